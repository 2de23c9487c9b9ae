#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/futex.h"
#include "base/name.h"
#include "sync/signal_internal.h"

ordo_status_t ordo__signal_check(const ordo_signal_t *signal, const char *api) {
    if (ORDO_UNLIKELY(!signal)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "signal is NULL");
    }
    if (ORDO_UNLIKELY((signal->magic & ORDO_SIGNAL_MAGIC_ANY_MASK) != ORDO_SIGNAL_MAGIC)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live signal (freed, or not a signal)",
                           (const void *)signal);
    }
    return ORDO_OK;
}

static ordo_status_t signal_make(uint64_t initial_state, signal_remote_t *remote,
                                 ordo_signal_t **out_signal, const char *api) {
    ordo_signal_t *signal = ordo__alloc(sizeof *signal, 64);
    if (!signal) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a signal");
    }
    if (pthread_mutex_init(&signal->lock, NULL) != 0) {
        ordo__dealloc(signal, sizeof *signal, 64);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot initialise the signal's lock");
    }
    signal->magic = remote ? ORDO_SIGNAL_MAGIC_REMOTE : ORDO_SIGNAL_MAGIC;
    atomic_init(&signal->refs, 1);
    atomic_init(&signal->state, initial_state);
    atomic_init(&signal->next_wake, SIGNAL_NO_WAKE);
    atomic_init(&signal->feeder, NULL);
    signal->remote = remote;
    signal->failure = ORDO_OK;
    static _Atomic uint64_t trace_ids;
    signal->trace_id = atomic_fetch_add_explicit(&trace_ids, 1, memory_order_relaxed) + 1;
    *out_signal = signal;
    return ORDO_OK;
}

ordo_status_t ordo_signal_create(uint64_t initial_value, ordo_signal_t **out_signal) {
    if (!out_signal) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal is NULL");
    }
    *out_signal = NULL;
    if (initial_value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "initial value %llu exceeds ORDO_SIGNAL_VALUE_MAX",
                           (unsigned long long)initial_value);
    }
    return signal_make(initial_value, NULL, out_signal, __func__);
}

ordo_status_t ordo__signal_create_remote(signal_remote_t *remote, ordo_signal_t **out_signal,
                                         const char *api) {
    *out_signal = NULL;
    uint64_t truth = remote->ops->state(remote);
    ordo_signal_t *signal = NULL;
    ORDO_RETURN_IF_ERROR(signal_make(truth & SIGNAL_VALUE_MASK, remote, &signal, api));
    if (truth & SIGNAL_FAILED) {
        signal->failure = remote->ops->failure(remote, signal->message);
        atomic_fetch_or_explicit(&signal->state, SIGNAL_FAILED, memory_order_release);
    }
    remote->signal = signal;
    *out_signal = signal;
    return ORDO_OK;
}

signal_remote_t *ordo__signal_remote(const ordo_signal_t *signal) {
    return signal->remote;
}

ordo_status_t ordo__signal_armable(const ordo_signal_t *signal, const char *api) {
    if (ORDO_LIKELY(!signal->remote) || !signal->remote->ops->armable) {
        return ORDO_OK;
    }
    return signal->remote->ops->armable(signal->remote, api);
}

bool ordo__signal_try_retain(ordo_signal_t *signal) {
    uint32_t refs = atomic_load_explicit(&signal->refs, memory_order_relaxed);
    while (refs != 0) {
        if (atomic_compare_exchange_weak_explicit(&signal->refs, &refs, refs + 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

ordo_status_t ordo__signal_failure_now(const ordo_signal_t *signal, char *message) {
    if (signal_failed_outcome(signal) || !signal->remote) {
        if (message) {
            size_t len = strnlen(signal->message, ORDO_SIGNAL_MESSAGE_MAX - 1);
            memcpy(message, signal->message, len);
            message[len] = '\0';
        }
        return signal->failure;
    }
    char scratch[ORDO_SIGNAL_MESSAGE_MAX];
    return signal->remote->ops->failure(signal->remote, message ? message : scratch);
}

ordo_status_t ordo_signal_retain(ordo_signal_t *signal) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    ordo__signal_retain_internal(signal);
    return ORDO_OK;
}

/* Marks the signal destroyed and cancels everything armed on it. Returns
 * ORDO_ERR_DESTROYED if it was already. */
static ordo_status_t signal_end(ordo_signal_t *signal) {
    if (signal->remote) {
        /* A failure of the truth that came first is the handle's too, even
         * if no timepoint had it pulled into the mirror yet. */
        ordo__signal_mirror_pull(signal);
    }
    due_list_t due = {0};
    pthread_mutex_lock(&signal->lock);
    uint64_t old = atomic_fetch_or_explicit(&signal->state, SIGNAL_DESTROYED, memory_order_seq_cst);
    if (old & SIGNAL_DESTROYED) {
        pthread_mutex_unlock(&signal->lock);
        return ORDO_ERR_DESTROYED;
    }
    /* Timepoints due at the current value are reached, not cancelled: a
     * producer raced with the destroy and has not dispatched them yet. */
    ordo__signal_collect_locked(signal, old & SIGNAL_VALUE_MASK, ORDO_ERR_CANCELLED, &due);
    pthread_mutex_unlock(&signal->lock);
    if (signal->remote) {
        signal->remote->ops->interrupt(signal->remote); /* its sleeps see DESTROYED */
        if (signal->remote->ops->ended) {
            signal->remote->ops->ended(signal->remote);
        }
    }
    ordo__timepoints_run(&due);
    return ORDO_OK;
}

bool ordo__signal_release_unless_last(ordo_signal_t *signal) {
    uint32_t refs = atomic_load_explicit(&signal->refs, memory_order_relaxed);
    while (refs > 1) {
        if (atomic_compare_exchange_weak_explicit(&signal->refs, &refs, refs - 1,
                                                  memory_order_release, memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

signal_release_t ordo__signal_release_pinned(ordo_signal_t *signal, uint32_t pins,
                                             bool *program_done) {
    if (*program_done) {
        return SIGNAL_RELEASE_LAST; /* a pin's, after the program's last */
    }
    /* Only releases, all under the owner's lock, lower the count: the
     * program keeps others when more than the pins and this one are left. */
    if (ordo__signal_references(signal) > pins + 1) {
        (void)ordo__signal_release_unless_last(signal);
        return SIGNAL_RELEASE_DROPPED;
    }
    *program_done = true;
    return pins ? SIGNAL_RELEASE_END_PINNED : SIGNAL_RELEASE_LAST;
}

uint32_t ordo__signal_references(const ordo_signal_t *signal) {
    return atomic_load_explicit(&signal->refs, memory_order_acquire);
}

void ordo__signal_release_internal(ordo_signal_t *signal) {
    if (ORDO_UNLIKELY(signal->remote != NULL) && signal->remote->ops->release) {
        signal_release_t release = signal->remote->ops->release(signal->remote);
        if (release == SIGNAL_RELEASE_DROPPED) {
            return;
        }
        if (release == SIGNAL_RELEASE_END_PINNED) {
            /* The program's last reference: ended now, while this one keeps
             * it; the owner's pins keep the memory, and the last to go frees
             * it (its own end finds it ended). */
            (void)signal_end(signal);
        }
    }
    if (atomic_fetch_sub_explicit(&signal->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    (void)signal_end(signal);
    /* A producer may still hold DISPATCHING: it lets go as its last touch. */
    while (atomic_load_explicit(&signal->state, memory_order_acquire) & SIGNAL_DISPATCHING) {
        sched_yield();
    }
    if (signal->remote) {
        signal->remote->ops->close(signal->remote);
    }
    signal->magic = ORDO_SIGNAL_DEAD;
    pthread_mutex_destroy(&signal->lock);
    ordo__dealloc(signal, sizeof *signal, 64);
}

ordo_status_t ordo_signal_release(ordo_signal_t *signal) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    ordo__signal_release_internal(signal);
    return ORDO_OK;
}

ordo_status_t ordo_signal_destroy(ordo_signal_t *signal) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (signal_end(signal) != ORDO_OK) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "signal %p was destroyed already",
                           (void *)signal);
    }
    ordo__signal_release_internal(signal);
    return ORDO_OK;
}

ordo_status_t ordo_signal_query(ordo_signal_t *signal, uint64_t *out_value) {
    if (out_value) {
        *out_value = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (!out_value) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_value is NULL");
    }
    uint64_t state = signal_state_now(signal);
    *out_value = state & SIGNAL_VALUE_MASK;
    if (state & SIGNAL_DESTROYED) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "signal %p was destroyed", (void *)signal);
    }
    if (state & SIGNAL_FAILED) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        ordo_status_t failure = ordo__signal_failure_now(signal, message);
        return ordo__error(failure, __func__, "signal failed at value %llu: %s",
                           (unsigned long long)*out_value, message);
    }
    return ORDO_OK;
}

static ordo_status_t signal_refused(ordo_signal_t *signal, uint64_t value, const char *api) {
    /* Acquire: the failure fields were written before the flag. */
    uint64_t state = atomic_load_explicit(&signal->state, memory_order_acquire);
    if (state & SIGNAL_DESTROYED) {
        return ordo__error(ORDO_ERR_DESTROYED, api, "signal %p was destroyed", (void *)signal);
    }
    return ordo__error(signal->failure, api, "signal failed at %llu, before reaching %llu: %s",
                       (unsigned long long)(state & SIGNAL_VALUE_MASK), (unsigned long long)value,
                       signal->message);
}

/* Raises the handle's own word: the whole advance of a local signal, the
 * mirror's half of a remote one's (api NULL: an ended word is left as it
 * is, with no message: the truth moved, and the mirror's end is its own). */
static inline ordo_status_t signal_raise(ordo_signal_t *signal, uint64_t value, const char *api) {
    uint64_t current = atomic_load_explicit(&signal->state, memory_order_relaxed);
    for (;;) {
        if (ORDO_UNLIKELY(current & SIGNAL_ENDED)) {
            return api ? signal_refused(signal, value, api) : ORDO_ERR_DESTROYED;
        }
        if ((current & SIGNAL_VALUE_MASK) >= value) {
            return ORDO_OK;
        }
        uint64_t flags = current & (SIGNAL_WAITERS | SIGNAL_DISPATCHING);
        int dispatch = flags == SIGNAL_WAITERS;
        uint64_t next = value | flags | (dispatch ? SIGNAL_DISPATCHING : 0);
        if (atomic_compare_exchange_weak_explicit(&signal->state, &current, next,
                                                  memory_order_seq_cst, memory_order_relaxed)) {
            if (dispatch) {
                ordo__signal_dispatch(signal, value);
            }
            /* Without DISPATCHING, the signal must not be touched any more. */
            return ORDO_OK;
        }
    }
}

/* Fails the handle's own word (a remote one's mirror: with the truth's
 * failure; api NULL: a destroyed handle is left with no message, as the
 * mirror's end is its own news, not the caller's). */
static ordo_status_t signal_fail_here(ordo_signal_t *signal, ordo_status_t status,
                                      const char *message, const char *api) {
    due_list_t due = {0};
    pthread_mutex_lock(&signal->lock);
    uint64_t current = atomic_load_explicit(&signal->state, memory_order_relaxed);
    if (current & SIGNAL_DESTROYED) {
        pthread_mutex_unlock(&signal->lock);
        return api ? ordo__error(ORDO_ERR_DESTROYED, api, "signal %p was destroyed", (void *)signal)
                   : ORDO_ERR_DESTROYED;
    }
    if (current & SIGNAL_FAILED) {
        pthread_mutex_unlock(&signal->lock);
        return ORDO_OK; /* the first failure stays */
    }
    signal->failure = status;
    if (message) {
        snprintf(signal->message, sizeof signal->message, "%s", message);
    }
    current = atomic_fetch_or_explicit(&signal->state, SIGNAL_FAILED, memory_order_seq_cst);
    ordo__signal_collect_locked(signal, current & SIGNAL_VALUE_MASK, status, &due);
    pthread_mutex_unlock(&signal->lock);
    ordo__timepoints_run(&due);
    return ORDO_OK;
}

void ordo__signal_mirror_pull(ordo_signal_t *signal) {
    uint64_t truth = signal->remote->ops->state(signal->remote);
    uint64_t mirror = atomic_load_explicit(&signal->state, memory_order_relaxed);
    if (mirror & SIGNAL_ENDED) {
        return;
    }
    if ((truth & SIGNAL_VALUE_MASK) > (mirror & SIGNAL_VALUE_MASK)) {
        (void)signal_raise(signal, truth & SIGNAL_VALUE_MASK, NULL);
    }
    if (truth & SIGNAL_FAILED) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        ordo_status_t failure = signal->remote->ops->failure(signal->remote, message);
        (void)signal_fail_here(signal, failure, message, NULL);
    }
}

/* The advance of a remote signal, or of a handle that is not a live
 * signal (refused). */
__attribute__((noinline)) static ordo_status_t signal_advance_slow(ordo_signal_t *signal,
                                                                   uint64_t value) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, "ordo_signal_advance"));
    if (value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, "ordo_signal_advance",
                           "value %llu exceeds ORDO_SIGNAL_VALUE_MAX", (unsigned long long)value);
    }
    if (signal->remote) {
        if (atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_DESTROYED) {
            return signal_refused(signal, value, "ordo_signal_advance");
        }
        /* The truth first: the mirror never runs ahead of it. */
        ordo_status_t raised =
            signal->remote->ops->advance(signal->remote, value, "ordo_signal_advance");
        if (raised != ORDO_OK) {
            ordo__signal_mirror_pull(signal); /* the failure found there */
            return raised;
        }
        /* The advance took effect: a failure or destroy of the mirror since
         * is the mirror's own news, not this call's. */
        (void)signal_raise(signal, value, NULL);
        return ORDO_OK;
    }
    return signal_raise(signal, value, "ordo_signal_advance");
}

ordo_status_t ordo_signal_advance(ordo_signal_t *signal, uint64_t value) {
    /* A local signal's magic only: a remote handle, a bad handle and a
     * value out of range take the slow path. */
    if (ORDO_UNLIKELY(!signal || signal->magic != ORDO_SIGNAL_MAGIC ||
                      value > ORDO_SIGNAL_VALUE_MAX)) {
        return signal_advance_slow(signal, value);
    }
    return signal_raise(signal, value, __func__);
}

static ordo_status_t signal_fail(ordo_signal_t *signal, ordo_status_t status, const char *message,
                                 const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, api));
    if (!ordo_status_is_error(status)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "status %d is not an ordo error status",
                           (int)status);
    }
    if (signal->remote) {
        if (atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_DESTROYED) {
            return ordo__error(ORDO_ERR_DESTROYED, api, "signal %p was destroyed", (void *)signal);
        }
        /* The first failure anywhere wins; the mirror takes the truth's. */
        ORDO_RETURN_IF_ERROR(signal->remote->ops->fail(signal->remote, status, message, api));
        ordo__signal_mirror_pull(signal);
        return ORDO_OK;
    }
    return signal_fail_here(signal, status, message, api);
}

ordo_status_t ordo_signal_fail(ordo_signal_t *signal, ordo_status_t status, const char *message) {
    return signal_fail(signal, status, message, __func__);
}

ordo_status_t ordo_signal_failf(ordo_signal_t *signal, ordo_status_t status, const char *fmt, ...) {
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    if (fmt) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(message, sizeof message, fmt, args);
        va_end(args);
    }
    return signal_fail(signal, status, fmt ? message : NULL, __func__);
}

ordo_status_t ordo_signal_failure(ordo_signal_t *signal, ordo_status_t *out_status,
                                  char *out_message, size_t message_capacity) {
    if (out_status) {
        *out_status = ORDO_OK;
    }
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (!out_status) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_status is NULL");
    }
    if (out_message && message_capacity == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "message_capacity is 0 but out_message is set");
    }
    char message[ORDO_SIGNAL_MESSAGE_MAX] = "";
    if (signal_state_now(signal) & SIGNAL_FAILED) {
        *out_status = ordo__signal_failure_now(signal, message);
    }
    if (out_message) {
        size_t len = strnlen(message, message_capacity - 1);
        memcpy(out_message, message, len);
        out_message[len] = '\0';
    }
    return ORDO_OK;
}

static const char *past(const char *text, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(text, prefix, n) == 0 ? text + n : NULL;
}

/* The length of a status's name and ": " at the start of text, or 0
 * (ordo_status_name's text for a status not of ordo's counts too). */
static size_t status_name_at(const char *text) {
    for (int status = 0; status <= ORDO_STATUS_COUNT_; ++status) {
        const char *name = ordo_status_name((ordo_status_t)status);
        size_t n = strlen(name);
        if (strncmp(text, name, n) == 0 && text[n] == ':' && text[n + 1] == ' ') {
            return n + 2;
        }
    }
    return 0;
}

const char *ordo__failure_origin(const char *message) {
    for (;;) {
        const char *rest = past(message, ORDO__LINK_FAILED_TEXT);
        if (!rest) {
            rest = past(message, ORDO__WAIT_UNREACHED_TEXT);
        }
        if (!rest && (rest = past(message, ORDO__WAIT_FAILED_TEXT)) != NULL) {
            /* Then a status's name and ": " (ordo__signal_wait_ended's
             * form, which a program's own text rarely has whole). */
            size_t name = status_name_at(rest);
            rest = name ? rest + name : NULL;
        }
        if (!rest) {
            return message;
        }
        message = rest;
    }
}

ordo_status_t ordo__signal_wait_ended(const ordo_signal_t *signal, char *what, size_t capacity) {
    /* The truth, not the mirror: a remote signal's wait may have ended on a
     * failure its mirror has not taken yet. */
    if (signal_state_now(signal) & SIGNAL_FAILED) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        ordo_status_t failure = ordo__signal_failure_now(signal, message);
        const char *origin = ordo__failure_origin(message);
        snprintf(what, capacity, ORDO__WAIT_FAILED_TEXT "%s: %.*s", ordo_status_name(failure),
                 (int)strlen(origin), origin);
        return failure;
    }
    snprintf(what, capacity, ORDO__WAIT_ENDED_TEXT "was destroyed: %s",
             ordo_status_name(ORDO_ERR_CANCELLED));
    return ORDO_ERR_CANCELLED;
}

void ordo__signal_feeder_set(ordo_signal_t *signal, signal_feeder_t *feeder) {
    if (atomic_load_explicit(&signal->feeder, memory_order_relaxed) == feeder) {
        return;
    }
    /* Under the lock: a call into the feeder replaced here has returned
     * before the store, so ordo__signal_feeder_clear of that one may skip the
     * lock once it reads this store (release, acquire). */
    pthread_mutex_lock(&signal->lock);
    atomic_store_explicit(&signal->feeder, feeder, memory_order_release);
    pthread_mutex_unlock(&signal->lock);
}

void ordo__signal_feeder_clear(ordo_signal_t *signal, signal_feeder_t *feeder) {
    if (atomic_load_explicit(&signal->feeder, memory_order_acquire) != feeder) {
        return;
    }
    pthread_mutex_lock(&signal->lock);
    signal_feeder_t *expected = feeder;
    atomic_compare_exchange_strong_explicit(&signal->feeder, &expected, NULL, memory_order_relaxed,
                                            memory_order_relaxed);
    pthread_mutex_unlock(&signal->lock);
}

signal_feeder_t *ordo__signal_feeder_enter(ordo_signal_t *signal) {
    if (!atomic_load_explicit(&signal->feeder, memory_order_relaxed)) {
        return NULL;
    }
    pthread_mutex_lock(&signal->lock);
    signal_feeder_t *feeder = atomic_load_explicit(&signal->feeder, memory_order_relaxed);
    if (feeder && feeder->help) {
        atomic_fetch_add_explicit(&feeder->helpers, 1, memory_order_relaxed);
    } else {
        feeder = NULL;
    }
    pthread_mutex_unlock(&signal->lock);
    return feeder;
}

void ordo__signal_feeder_leave(signal_feeder_t *feeder) {
    /* Release: the help happened before the owner may free the feeder. The
     * wake touches only the address. */
    if (atomic_fetch_sub_explicit(&feeder->helpers, 1, memory_order_release) == 1) {
        ordo__futex_wake(&feeder->helpers, INT_MAX);
    }
}

void ordo__signal_name_set_internal(ordo_signal_t *signal, const char *name) {
    pthread_mutex_lock(&signal->lock);
    name_store(signal->name, sizeof signal->name, name);
    pthread_mutex_unlock(&signal->lock);
}

void ordo__signal_name_get_internal(ordo_signal_t *signal, char *out, size_t capacity) {
    pthread_mutex_lock(&signal->lock);
    name_or_address(signal->name, signal, out, capacity);
    pthread_mutex_unlock(&signal->lock);
}

ordo_status_t ordo_signal_set_name(ordo_signal_t *signal, const char *name) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_DESTROYED) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "signal %p was destroyed", (void *)signal);
    }
    ordo__signal_name_set_internal(signal, name);
    return ORDO_OK;
}

ordo_status_t ordo_signal_name(ordo_signal_t *signal, char *out_name, size_t capacity) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (!out_name || capacity == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s",
                           out_name ? "capacity is 0" : "out_name is NULL");
    }
    ordo__signal_name_get_internal(signal, out_name, capacity);
    return ORDO_OK;
}
