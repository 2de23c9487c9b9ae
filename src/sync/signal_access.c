/* The readers other layers use instead of the signal's state word (see
 * sync/signal_access.h); the word's layout is sync/signal_internal.h's. */
#include "sync/signal_internal.h"

static signal_view_t view_of(uint64_t state) {
    return (signal_view_t){.value = state & SIGNAL_VALUE_MASK,
                           .failed = (state & SIGNAL_FAILED) != 0,
                           .ended = (state & SIGNAL_ENDED) != 0};
}

signal_view_t ordo__signal_view(const ordo_signal_t *signal) {
    return view_of(atomic_load_explicit(&signal->state, memory_order_acquire));
}

signal_view_t ordo__signal_view_latest(ordo_signal_t *signal) {
    return view_of(atomic_fetch_or_explicit(&signal->state, 0, memory_order_acquire));
}

uint64_t ordo__signal_reached(const ordo_signal_t *signal) {
    return atomic_load_explicit(&signal->state, memory_order_acquire) & SIGNAL_VALUE_MASK;
}

uint64_t ordo__signal_trace_id(const ordo_signal_t *signal) {
    return signal->trace_id;
}

bool ordo__signal_destroyed(const ordo_signal_t *signal) {
    return (atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_DESTROYED) != 0;
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

void ordo__signal_retain_internal(ordo_signal_t *signal) {
    signal_retain_internal(signal);
}

void ordo__signal_retain_many(ordo_signal_t *signal, uint32_t n) {
    atomic_fetch_add_explicit(&signal->refs, n, memory_order_relaxed);
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
