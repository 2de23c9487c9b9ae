/* The accessors of sync/signal_access.h that sit off the hot paths (the
 * state word's readers are inline there); the signal's layout is
 * sync/signal_internal.h's. */
#include "sync/signal_internal.h"

uint64_t ordo__signal_trace_id(const ordo_signal_t *signal) {
    return signal->trace_id;
}

/* Written once, under the lock, before FAILED was published; the caller's
 * acquire load that saw FAILED makes both visible. */
ordo_status_t ordo__signal_failure(const ordo_signal_t *signal, const char **out_message) {
    if (out_message) {
        *out_message = signal->message;
    }
    return signal->failure;
}

const char *ordo__signal_failure_message(const ordo_signal_t *signal) {
    return signal->message;
}

bool ordo__signal_wanted_value(const ordo_signal_t *signal, uint64_t *out_value) {
    if (!(atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_WAITERS)) {
        return false;
    }
    uint64_t v = atomic_load_explicit(&signal->next_wake, memory_order_relaxed);
    if (v == SIGNAL_NO_WAKE) {
        return false;
    }
    *out_value = v;
    return true;
}
