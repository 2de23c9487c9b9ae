/* Timepoints: arming, cancelling, and running due callbacks outside locks. */
#include "sync/signal_internal.h"
#include "sync/waiter.h"

static void due_append(due_list_t *due, ordo_timepoint_t *tp) {
    tp->next_ = NULL;
    if (due->tail) {
        due->tail->next_ = tp;
    } else {
        due->head = tp;
    }
    due->tail = tp;
}

static void list_unlink_locked(ordo_signal_t *signal, ordo_timepoint_t *tp) {
    if (tp->prev_) {
        tp->prev_->next_ = tp->next_;
    } else {
        signal->head = tp->next_;
    }
    if (tp->next_) {
        tp->next_->prev_ = tp->prev_;
    } else {
        signal->tail = tp->prev_;
    }
    tp->next_ = tp->prev_ = NULL;
}

/* Sorted insert, scanning from the tail: targets mostly grow, so the common
 * case is O(1). Equal values keep arming order. */
static void list_insert_locked(ordo_signal_t *signal, ordo_timepoint_t *tp) {
    ordo_timepoint_t *after = signal->tail;
    while (after && after->value_ > tp->value_) {
        after = after->prev_;
    }
    tp->prev_ = after;
    tp->next_ = after ? after->next_ : signal->head;
    if (tp->next_) {
        tp->next_->prev_ = tp;
    } else {
        signal->tail = tp;
    }
    if (after) {
        after->next_ = tp;
    } else {
        signal->head = tp;
    }
}

/* Publishes the list's smallest target and, when the list is empty,
 * clears WAITERS (see the protocol in signal_internal.h). */
static void refresh_waiters_locked(ordo_signal_t *signal) {
    uint64_t next = signal->head ? signal->head->value_ : SIGNAL_NO_WAKE;
    atomic_store_explicit(&signal->next_wake, next, memory_order_seq_cst);
    if (!signal->head) {
        atomic_fetch_and_explicit(&signal->state, ~SIGNAL_WAITERS, memory_order_seq_cst);
    }
}

static void mark_due(ordo_timepoint_t *tp, ordo_status_t status, due_list_t *due) {
    tp->status_ = status;
    __atomic_store_n(&tp->state_, TIMEPOINT_DUE, __ATOMIC_RELAXED);
    due_append(due, tp);
}

void ordo__signal_collect_locked(ordo_signal_t *signal, uint64_t reached, ordo_status_t rest,
                                 due_list_t *due) {
    while (signal->head && (signal->head->value_ <= reached || rest != ORDO_OK)) {
        ordo_timepoint_t *tp = signal->head;
        list_unlink_locked(signal, tp);
        mark_due(tp, tp->value_ <= reached ? ORDO_OK : rest, due);
    }
    refresh_waiters_locked(signal);
}

void ordo__signal_dispatch(ordo_signal_t *signal, uint64_t raised_to) {
    due_list_t due = {0};
    uint64_t collected_at = 0;
    uint64_t seen = raised_to;
    for (;;) {
        if (seen > collected_at &&
            atomic_load_explicit(&signal->next_wake, memory_order_seq_cst) <= seen) {
            pthread_mutex_lock(&signal->lock);
            uint64_t state = atomic_load_explicit(&signal->state, memory_order_seq_cst);
            collected_at = state & SIGNAL_VALUE_MASK;
            ordo__signal_collect_locked(signal, collected_at, ORDO_OK, &due);
            pthread_mutex_unlock(&signal->lock);
        }
        /* Let DISPATCHING go, unless producers raised the value meanwhile
         * and left its collection to us. */
        uint64_t state = atomic_load_explicit(&signal->state, memory_order_seq_cst);
        for (;;) {
            uint64_t value = state & SIGNAL_VALUE_MASK;
            if (value > seen && (state & SIGNAL_WAITERS) && !(state & SIGNAL_ENDED)) {
                seen = value;
                break;
            }
            if (atomic_compare_exchange_weak_explicit(&signal->state, &state,
                                                      state & ~SIGNAL_DISPATCHING,
                                                      memory_order_seq_cst, memory_order_seq_cst)) {
                /* The signal may be freed from here on. */
                ordo__timepoints_run(&due);
                return;
            }
        }
    }
}

/* Callbacks that become due while this thread is already running callbacks
 * are queued here and run by the outermost runner, so chains of links or
 * re-arming callbacks iterate instead of recursing. */
static _Thread_local due_list_t deferred;
static _Thread_local int running_callbacks;

/* Where this thread hands the callbacks it must not run (NULL: none). */
static _Thread_local timepoint_sink_t *divert_sink;

timepoint_sink_t *ordo__timepoints_divert(timepoint_sink_t *sink) {
    timepoint_sink_t *outer = divert_sink;
    divert_sink = sink;
    return outer;
}

int ordo__timepoints_running_here(void) {
    return running_callbacks;
}

static void run_one(ordo_timepoint_t *tp) {
    /* Read everything before the call: from FIRED on, the timepoint is its
     * owner's again (to re-arm or free). */
    ordo_timepoint_fn fn = tp->fn_;
    void *ctx = tp->ctx_;
    ordo_status_t status = tp->status_;
    if (tp->kind_ == TIMEPOINT_LINK) {
        /* A link's callback reads the link's fields first and marks it FIRED
         * itself, before it signals the target. */
        fn(ctx, status, tp);
        return;
    }
    __atomic_store_n(&tp->state_, TIMEPOINT_FIRED, __ATOMIC_RELEASE);
    fn(ctx, status, tp);
}

void ordo__timepoints_run(due_list_t *due) {
    /* Blocked waiters are woken first and at once, even from inside a
     * callback: their action is an atomic store and a futex wake, and a
     * thread blocked in a wait must not sit behind user callbacks. */
    due_list_t user = {0};
    for (ordo_timepoint_t *tp = due->head, *next; tp; tp = next) {
        next = tp->next_;
        if (tp->kind_ == TIMEPOINT_WAITER) {
            run_one(tp);
        } else {
            due_append(&user, tp);
        }
    }
    if (!user.head) {
        return;
    }
    if (divert_sink) {
        divert_sink->take(divert_sink, &user);
        return;
    }
    if (running_callbacks) {
        if (deferred.tail) {
            deferred.tail->next_ = user.head;
        } else {
            deferred.head = user.head;
        }
        deferred.tail = user.tail;
        return;
    }
    running_callbacks = 1;
    deferred = user;
    while (deferred.head) {
        ordo_timepoint_t *tp = deferred.head;
        deferred.head = tp->next_;
        if (!deferred.head) {
            deferred.tail = NULL;
        }
        run_one(tp);
    }
    running_callbacks = 0;
}

ordo_status_t ordo__timepoint_arm_quiet(ordo_timepoint_t *timepoint, ordo_signal_t *signal,
                                        uint64_t value, ordo_timepoint_fn fn, void *ctx, int kind) {
    timepoint->signal_ = signal;
    timepoint->value_ = value;
    timepoint->fn_ = fn;
    timepoint->ctx_ = ctx;
    timepoint->kind_ = (uint16_t)kind;
    if (ORDO_UNLIKELY(signal->remote != NULL)) {
        ORDO_RETURN_IF_ERROR(ordo__signal_armable(signal, NULL));
    }

    due_list_t due = {0};
    pthread_mutex_lock(&signal->lock);
    /* Acquire: a timepoint found reached here fires at once, and what it
     * orders must see everything before the raise it observed. */
    uint64_t state = atomic_load_explicit(&signal->state, memory_order_acquire);
    if (state & SIGNAL_DESTROYED) {
        pthread_mutex_unlock(&signal->lock);
        return ORDO_ERR_DESTROYED;
    }
    if ((state & SIGNAL_VALUE_MASK) >= value) {
        mark_due(timepoint, ORDO_OK, &due);
    } else if (state & SIGNAL_FAILED) {
        mark_due(timepoint, signal->failure, &due);
    } else {
        __atomic_store_n(&timepoint->state_, TIMEPOINT_ARMED, __ATOMIC_RELAXED);
        list_insert_locked(signal, timepoint);
        atomic_store_explicit(&signal->next_wake, signal->head->value_, memory_order_seq_cst);
        /* The registration half of the protocol: this read-modify-write is
         * ordered against every producer's CAS. A raise ordered first left
         * this timepoint's collection to us, and only this one's: any other
         * listed was listed with WAITERS set, so the raise that reached it
         * dispatches it (its collection takes the lock after us). Running
         * others' callbacks here, inside the arm, would let one of them
         * act on a registration not finished on this thread (a waiter's
         * cancel of the wait being armed spun for ever). */
        state = atomic_fetch_or_explicit(&signal->state, SIGNAL_WAITERS, memory_order_seq_cst);
        if ((state & SIGNAL_VALUE_MASK) >= value) {
            list_unlink_locked(signal, timepoint);
            mark_due(timepoint, ORDO_OK, &due);
            refresh_waiters_locked(signal);
        } else {
            /* Under the lock: ordo__signal_feeder_clear cannot finish meanwhile. */
            signal_feeder_t *feeder = atomic_load_explicit(&signal->feeder, memory_order_acquire);
            if (feeder) {
                feeder->wanted(feeder);
            }
            if (signal->remote) {
                signal->remote->ops->wanted(signal->remote);
            }
        }
    }
    pthread_mutex_unlock(&signal->lock);
    ordo__timepoints_run(&due);
    return ORDO_OK;
}

ordo_status_t ordo__timepoint_arm_checked(ordo_timepoint_t *timepoint, ordo_signal_t *signal,
                                          uint64_t value, ordo_timepoint_fn fn, void *ctx, int kind,
                                          const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, api));
    if (!timepoint || !fn) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%s is NULL",
                           timepoint ? "fn" : "timepoint");
    }
    if (value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "value %llu exceeds ORDO_SIGNAL_VALUE_MAX",
                           (unsigned long long)value);
    }
    uint32_t state = __atomic_load_n(&timepoint->state_, __ATOMIC_ACQUIRE);
    if (state == TIMEPOINT_ARMED || state == TIMEPOINT_DUE) {
        return ordo__error(ORDO_ERR_BUSY, api, "timepoint %p is %s (or was not zero-initialised)",
                           (void *)timepoint,
                           state == TIMEPOINT_ARMED ? "armed already"
                                                    : "due, its callback not yet run");
    }
    ORDO_RETURN_IF_ERROR(ordo__signal_armable(signal, api));
    ordo_status_t st = ordo__timepoint_arm_quiet(timepoint, signal, value, fn, ctx, kind);
    if (st != ORDO_OK) {
        return ordo__error(st, api, "signal %p was destroyed", (void *)signal);
    }
    return ORDO_OK;
}

ordo_status_t ordo_timepoint_arm(ordo_timepoint_t *timepoint, ordo_signal_t *signal, uint64_t value,
                                 ordo_timepoint_fn fn, void *ctx) {
    return ordo__timepoint_arm_checked(timepoint, signal, value, fn, ctx, TIMEPOINT_USER, __func__);
}

ordo_status_t ordo__timepoint_due_status(ordo_timepoint_t *timepoint) {
    ordo_signal_t *signal = timepoint->signal_;
    pthread_mutex_lock(&signal->lock);
    ordo_status_t status = timepoint->status_;
    pthread_mutex_unlock(&signal->lock);
    return status;
}

ordo_status_t ordo_timepoint_cancel(ordo_timepoint_t *timepoint, ordo_cancel_result_t *out_result) {
    if (out_result) {
        *out_result = ORDO_CANCEL_PREVENTED;
    }
    if (!timepoint || !out_result) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           timepoint ? "out_result" : "timepoint");
    }
    uint32_t state = __atomic_load_n(&timepoint->state_, __ATOMIC_ACQUIRE);
    if (state == TIMEPOINT_DUE || state == TIMEPOINT_FIRED) {
        *out_result = ORDO_CANCEL_TOO_LATE;
        return ORDO_OK;
    }
    if (state != TIMEPOINT_ARMED) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "timepoint %p is not armed (never armed, or cancelled already)",
                           (void *)timepoint);
    }
    ordo_signal_t *signal = timepoint->signal_;
    pthread_mutex_lock(&signal->lock);
    state = __atomic_load_n(&timepoint->state_, __ATOMIC_RELAXED);
    if (state == TIMEPOINT_ARMED) {
        list_unlink_locked(signal, timepoint);
        refresh_waiters_locked(signal);
        __atomic_store_n(&timepoint->state_, TIMEPOINT_IDLE, __ATOMIC_RELAXED);
        *out_result = ORDO_CANCEL_PREVENTED;
    } else {
        *out_result = ORDO_CANCEL_TOO_LATE;
    }
    pthread_mutex_unlock(&signal->lock);
    return ORDO_OK;
}
