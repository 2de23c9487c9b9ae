/* The completion watcher, its timelines and the registry of device points
 * (see watcher.h). */
#include "hal/watcher.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "sync/signal_internal.h"

#define DEFAULT_MIN_POLL_NS 10000u
#define DEFAULT_MAX_POLL_NS 50000u
#define LEAST_POLL_NS 1000u

/* ---- the registry -------------------------------------------------------- */

static size_t bucket_of(const ordo_signal_t *signal) {
    uint64_t x = (uint64_t)(uintptr_t)signal;
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 32) % HAL_REGISTRY_BUCKETS;
}

static hal_reg_signal_t *node_find_locked(hal_watcher_t *w, const ordo_signal_t *signal) {
    hal_reg_signal_t *n = w->buckets[bucket_of(signal)];
    while (n && n->signal != signal) {
        n = n->next;
    }
    return n;
}

/* Registers e as (signal, value) at watch; 0 when out of memory (the point
 * then stays unregistered: waits for it are held on the host, which is
 * slower, never wrong). */
static int registry_add_locked(hal_watcher_t *w, hal_reg_entry_t *e, ordo_signal_t *signal,
                               uint64_t value, hal_watch_t *watch) {
    hal_reg_signal_t *n = node_find_locked(w, signal);
    if (!n) {
        n = w->spare;
        if (n) {
            w->spare = n->next;
        } else if (!(n = ordo_alloc(sizeof *n, 0))) {
            return 0;
        }
        size_t b = bucket_of(signal);
        n->signal = signal;
        n->head = n->tail = NULL;
        n->next = w->buckets[b];
        w->buckets[b] = n;
    }
    e->owner = n;
    e->value = value;
    e->watch = watch;
    /* Values mostly arrive in order: insert from the tail. */
    hal_reg_entry_t *after = n->tail;
    while (after && after->value > value) {
        after = after->prev;
    }
    e->prev = after;
    e->next = after ? after->next : n->head;
    if (e->next) {
        e->next->prev = e;
    } else {
        n->tail = e;
    }
    if (after) {
        after->next = e;
    } else {
        n->head = e;
    }
    return 1;
}

static void registry_remove_locked(hal_watcher_t *w, hal_reg_entry_t *e) {
    hal_reg_signal_t *n = e->owner;
    if (!n) {
        return;
    }
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        n->head = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    } else {
        n->tail = e->prev;
    }
    e->owner = NULL;
    if (!n->head) {
        hal_reg_signal_t **link = &w->buckets[bucket_of(n->signal)];
        while (*link != n) {
            link = &(*link)->next;
        }
        *link = n->next;
        n->signal = NULL;
        n->next = w->spare;
        w->spare = n;
    }
}

int hal_watcher_find(hal_watcher_t *w, ordo_signal_t *signal, uint64_t value,
                     void (*use)(void *ctx, const hal_watch_t *watch), void *ctx) {
    pthread_mutex_lock(&w->registry_lock);
    const hal_reg_signal_t *n = node_find_locked(w, signal);
    const hal_reg_entry_t *best = NULL;
    /* The smallest registered value >= value: waits mostly name recent
     * points, so walk back from the largest. */
    for (const hal_reg_entry_t *e = n ? n->tail : NULL; e && e->value >= value; e = e->prev) {
        best = e;
    }
    if (best) {
        use(ctx, best->watch);
    }
    pthread_mutex_unlock(&w->registry_lock);
    return best != NULL;
}

/* ---- completing watches -------------------------------------------------- */

static void watch_recycle(hal_timeline_t *t, hal_watch_t *h) {
    pthread_mutex_lock(&t->lock);
    h->next = t->spare;
    t->spare = h;
    pthread_mutex_unlock(&t->lock);
}

int hal_timeline_failed(const hal_timeline_t *t, ordo_status_t *out_status,
                        const char **out_message) {
    /* Acquire: the failure fields were written before the flag. */
    uint64_t state = atomic_load_explicit(&t->progress->state, memory_order_acquire);
    if (!(state & SIGNAL_FAILED)) {
        return 0;
    }
    if (out_status) {
        *out_status = t->progress->failure;
    }
    if (out_message) {
        *out_message = t->progress->message;
    }
    return 1;
}

void hal_timeline_fail(hal_timeline_t *t, ordo_status_t status, const char *message) {
    (void)ordo_signal_fail(t->progress, status, message);
}

/* The verdict of an ordering check: the waited-on value is reached (by
 * anyone), or the waiting stream fails in turn: with the producing
 * stream's failure if that stream ended short of its point (its signal is
 * failed with the same status, but perhaps not yet: its watch may come
 * later), else with the signal's if the signal ended short of the value. */
static void check_verdict(hal_watch_t *h) {
    uint64_t state = atomic_load_explicit(&h->check->state, memory_order_acquire);
    if ((state & SIGNAL_VALUE_MASK) >= h->check_value) {
        return;
    }
    char what[ORDO_SIGNAL_MESSAGE_MAX];
    if (h->after) {
        uint64_t after = atomic_load_explicit(&h->after->state, memory_order_acquire);
        if ((after & SIGNAL_VALUE_MASK) < h->after_value && (after & SIGNAL_ENDED)) {
            int failed = (after & SIGNAL_FAILED) != 0;
            snprintf(what, sizeof what, "the stream producing the waited-on value failed: %.100s",
                     failed ? h->after->message : "it was destroyed");
            hal_timeline_fail(h->timeline, failed ? h->after->failure : ORDO_ERR_CANCELLED, what);
            return;
        }
    }
    if (!(state & SIGNAL_ENDED)) {
        return;
    }
    hal_timeline_fail(h->timeline, signal_wait_ended(h->check, what, sizeof what), what);
}

/* Everything a completed watch stands for, in order: a device error or a
 * failed check fails the timeline first; then the signal is raised (or,
 * on a failed timeline, failed), the event record completes, progress
 * moves, and the point leaves the registry and goes back. Outside every
 * lock but the registry's (for the removal only). */
static void watch_complete(hal_watcher_t *w, hal_watch_t *h, int reached) {
    hal_timeline_t *t = h->timeline;
    if (h->status != ORDO_OK) {
        hal_timeline_fail(t, h->status, h->message ? h->message : "the device reported an error");
    }
    if (h->check) {
        check_verdict(h);
    }
    ordo_status_t failure = ORDO_OK;
    const char *message = NULL;
    int failed = hal_timeline_failed(t, &failure, &message);
    if (h->signal) {
        if (!failed) {
            (void)ordo_signal_signal(h->signal, h->value);
        } else {
            /* A point the stream never reaches: its waiters get the
             * failure instead of hanging (unless another producer has
             * reached the value: then nobody waits for it). */
            uint64_t state = atomic_load_explicit(&h->signal->state, memory_order_acquire);
            if ((state & SIGNAL_VALUE_MASK) < h->value) {
                (void)ordo_signal_fail(h->signal, failure, message);
            }
        }
    }
    if (h->event) {
        hal_event_record_reached(h->event, h->generation, !failed && reached);
    }
    if (h->seq && !failed) {
        (void)ordo_signal_signal(t->progress, h->seq);
    }
    if (h->point) {
        pthread_mutex_lock(&w->registry_lock);
        registry_remove_locked(w, &h->entries[0]);
        registry_remove_locked(w, &h->entries[1]);
        pthread_mutex_unlock(&w->registry_lock);
        w->ops->release(w->user, h->point, reached);
    }
    if (h->signal) {
        signal_release_internal(h->signal);
    }
    if (h->after) {
        signal_release_internal(h->after);
    }
    if (h->check) {
        signal_release_internal(h->check);
    }
    if (h->message) {
        ordo_dealloc(h->message, ORDO_SIGNAL_MESSAGE_MAX, 0);
    }
    watch_recycle(t, h);
}

/* Whether the watch can complete; for a point, asks the backend. */
static int watch_ready(hal_watcher_t *w, hal_timeline_t *t, hal_watch_t *h) {
    if (h->point) {
        char msg[ORDO_SIGNAL_MESSAGE_MAX] = "";
        ordo_status_t st = w->ops->query(w->user, t, h, msg, sizeof msg);
        if (st == ORDO_ERR_BUSY) {
            return 0;
        }
        h->status = st;
        if (st != ORDO_OK && (h->message = ordo_alloc(ORDO_SIGNAL_MESSAGE_MAX, 0)) != NULL) {
            snprintf(h->message, ORDO_SIGNAL_MESSAGE_MAX, "%s", msg);
        }
        return 1;
    }
    if (!h->after) {
        return 1;
    }
    uint64_t state = atomic_load_explicit(&h->after->state, memory_order_acquire);
    return (state & SIGNAL_VALUE_MASK) >= h->after_value || (state & SIGNAL_ENDED);
}

/* ---- the watcher thread -------------------------------------------------- */

typedef struct watcher_pass {
    hal_watch_t *done_head;
    hal_watch_t *done_tail;
    int outstanding;
} watcher_pass_t;

/* Takes every completed watch off every timeline, in order per timeline. */
static void watcher_scan(hal_watcher_t *w, watcher_pass_t *pass) {
    pthread_mutex_lock(&w->lock);
    for (hal_timeline_t *t = w->timelines; t; t = t->next) {
        for (;;) {
            pthread_mutex_lock(&t->lock);
            hal_watch_t *h = t->head;
            pthread_mutex_unlock(&t->lock);
            if (!h) {
                break;
            }
            pass->outstanding = 1;
            if (!watch_ready(w, t, h)) {
                break;
            }
            /* Only this thread takes watches off, so h is still the head. */
            pthread_mutex_lock(&t->lock);
            t->head = h->next;
            if (!t->head) {
                t->tail = NULL;
            }
            --t->count;
            pthread_mutex_unlock(&t->lock);
            atomic_fetch_add_explicit(&t->processing, 1, memory_order_relaxed);
            h->next = NULL;
            if (pass->done_tail) {
                pass->done_tail->next = h;
            } else {
                pass->done_head = h;
            }
            pass->done_tail = h;
        }
    }
    pthread_mutex_unlock(&w->lock);
}

/* The watcher whose thread this is (NULL elsewhere). */
static _Thread_local const hal_watcher_t *tls_watcher;

int hal_watcher_is_current(const hal_watcher_t *w) {
    return tls_watcher == w;
}

static void *watcher_main(void *arg) {
    hal_watcher_t *w = arg;
    tls_watcher = w;
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    /* The kernel may stretch a timed sleep by the thread's timer slack (50
     * us by default), as long as the longest poll interval: keep the
     * schedule below as written. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    if (w->ops->thread_start) {
        w->ops->thread_start(w->user);
    }
    uint64_t poll_ns = w->min_poll_ns;
    int woken = 1; /* the next interval is the first after new work */
    for (;;) {
        uint32_t seen = atomic_load_explicit(&w->work, memory_order_seq_cst);
        /* After `seen`: hal_watcher_halt sets stop before it bumps work, so
         * a halt this load missed changes work and ends the sleep below. */
        if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
            break;
        }
        watcher_pass_t pass = {NULL, NULL, 0};
        watcher_scan(w, &pass);
        int progressed = pass.done_head != NULL;
        /* Completions in the order they were taken: a timeline whose
         * ordering check names another's point sees that point completed
         * in an earlier pass or earlier in this list. */
        for (hal_watch_t *h = pass.done_head; h;) {
            hal_watch_t *next = h->next;
            hal_timeline_t *t = h->timeline;
            watch_complete(w, h, h->status == ORDO_OK && h->point != NULL);
            if (atomic_fetch_sub_explicit(&t->processing, 1, memory_order_release) == 1) {
                ordo_futex_wake(&t->processing, INT_MAX); /* touches only the address */
            }
            h = next;
        }
        if (pass.outstanding) {
            /* Something is pending: poll again after the interval, which
             * starts short after progress or new work and doubles while
             * nothing completes. A push does not cut the sleep short (the
             * pusher pays no wake-up; the next poll sees its point): the
             * word is read again here so that pushes during the pass do
             * not end it at once either. Only a halt (which also wakes)
             * does. */
            if (progressed || woken) {
                poll_ns = w->min_poll_ns;
            } else {
                poll_ns = poll_ns * 2 > w->max_poll_ns ? w->max_poll_ns : poll_ns * 2;
            }
            woken = 0;
            seen = atomic_load_explicit(&w->work, memory_order_seq_cst);
            if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
                break;
            }
            (void)ordo_futex_wait(&w->work, seen, ordo_time_now_ns() + poll_ns);
            continue;
        }
        /* Nothing pending: sleep until a push. Pushers wake the watcher only
         * while it says it sleeps so: both sides write one word and read the
         * other, sequentially consistent, so either the pusher sees
         * `sleeping` or this re-check sees `work`. */
        atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&w->work, memory_order_seq_cst) == seen) {
            (void)ordo_futex_wait(&w->work, seen, ORDO_DEADLINE_NEVER);
        }
        atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
        woken = 1; /* new work: it may complete soon */
    }
    return NULL;
}

ordo_status_t hal_watcher_start(hal_watcher_t *w, const hal_watcher_ops_t *ops, void *user,
                                uint64_t min_poll_ns, uint64_t max_poll_ns, const char *api) {
    memset(w, 0, sizeof *w);
    w->ops = ops;
    w->user = user;
    w->min_poll_ns = min_poll_ns ? min_poll_ns : DEFAULT_MIN_POLL_NS;
    w->max_poll_ns = max_poll_ns ? max_poll_ns : DEFAULT_MAX_POLL_NS;
    if (w->min_poll_ns < LEAST_POLL_NS) {
        w->min_poll_ns = LEAST_POLL_NS;
    }
    if (w->max_poll_ns < w->min_poll_ns) {
        w->max_poll_ns = w->min_poll_ns;
    }
    if (ordo_signal_create(0, &w->registered) != ORDO_OK) {
        return ordo_error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create the watcher's signal");
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->registry_lock, NULL);
    if (pthread_create(&w->thread, NULL, watcher_main, w) != 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->registry_lock);
        signal_release_internal(w->registered);
        return ordo_error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                          "cannot start the device's completion thread");
    }
    w->started = 1;
    return ORDO_OK;
}

void hal_watcher_halt(hal_watcher_t *w) {
    if (!w->started) {
        return;
    }
    atomic_store_explicit(&w->stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&w->work, 1, memory_order_seq_cst);
    ordo_futex_wake(&w->work, INT_MAX);
    pthread_join(w->thread, NULL);
    w->started = 0;
}

void hal_watcher_stop(hal_watcher_t *w) {
    if (!w->started) {
        return;
    }
    hal_watcher_halt(w);
    while (w->spare) {
        hal_reg_signal_t *n = w->spare;
        w->spare = n->next;
        ordo_dealloc(n, sizeof *n, 0);
    }
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->registry_lock);
    signal_release_internal(w->registered);
}

/* ---- timelines ----------------------------------------------------------- */

ordo_status_t hal_timeline_init(hal_timeline_t *t, hal_watcher_t *w, void *user, const char *name,
                                const char *api) {
    memset(t, 0, sizeof *t);
    t->watcher = w;
    t->user = user;
    if (ordo_signal_create(0, &t->progress) != ORDO_OK) {
        return ordo_error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create the stream's timeline");
    }
    signal_name_set_internal(t->progress, name);
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_lock(&w->lock);
    t->next = w->timelines;
    if (t->next) {
        t->next->prev = t;
    }
    w->timelines = t;
    t->attached = 1;
    pthread_mutex_unlock(&w->lock);
    return ORDO_OK;
}

void hal_timeline_fini(hal_timeline_t *t, ordo_deadline_t deadline, uint64_t reserved,
                       ordo_status_t cancel_status, const char *why) {
    hal_watcher_t *w = t->watcher;
    pthread_mutex_lock(&t->lock);
    uint64_t last = t->last_seq;
    pthread_mutex_unlock(&t->lock);
    if (last) {
        /* Returns early if the timeline fails. */
        (void)ordo_signal_wait(t->progress, last, deadline);
    }
    pthread_mutex_lock(&w->lock);
    if (t->prev) {
        t->prev->next = t->next;
    } else {
        w->timelines = t->next;
    }
    if (t->next) {
        t->next->prev = t->prev;
    }
    t->attached = 0;
    pthread_mutex_unlock(&w->lock);
    /* Detached: the watcher takes nothing more off; let it finish what it
     * took. */
    for (;;) {
        uint32_t n = atomic_load_explicit(&t->processing, memory_order_acquire);
        if (!n) {
            break;
        }
        ordo_futex_wait(&t->processing, n, ORDO_DEADLINE_NEVER);
    }
    pthread_mutex_lock(&t->lock);
    hal_watch_t *h = t->head;
    t->head = t->tail = NULL;
    t->count = 0;
    pthread_mutex_unlock(&t->lock);
    int dropped = 0;
    while (h) {
        hal_watch_t *next = h->next;
        int reached = 0;
        if (!dropped) {
            if (watch_ready(w, t, h)) {
                reached = h->status == ORDO_OK && h->point != NULL;
            } else {
                dropped = 1;
                hal_timeline_fail(t, cancel_status, why);
            }
        }
        watch_complete(w, h, reached);
        h = next;
    }
    uint64_t state = atomic_load_explicit(&t->progress->state, memory_order_acquire);
    if ((state & SIGNAL_VALUE_MASK) < reserved) {
        hal_timeline_fail(t, cancel_status, why);
    }
    while (t->spare) {
        hal_watch_t *s = t->spare;
        t->spare = s->next;
        ordo_dealloc(s, sizeof *s, 0);
    }
    pthread_mutex_destroy(&t->lock);
    signal_release_internal(t->progress);
    t->progress = NULL;
}

hal_watch_t *hal_timeline_watch_alloc(hal_timeline_t *t) {
    pthread_mutex_lock(&t->lock);
    hal_watch_t *h = t->spare;
    if (h) {
        t->spare = h->next;
    }
    pthread_mutex_unlock(&t->lock);
    if (!h) {
        return ordo_alloc(sizeof *h, 0);
    }
    memset(h, 0, sizeof *h);
    return h;
}

void hal_timeline_watch_free(hal_timeline_t *t, hal_watch_t *w) {
    watch_recycle(t, w);
}

void hal_timeline_push(hal_timeline_t *t, hal_watch_t *h) {
    hal_watcher_t *w = t->watcher;
    h->timeline = t;
    h->next = NULL;
    int registered = 0;
    if (h->point && (h->seq || h->signal)) {
        pthread_mutex_lock(&w->registry_lock);
        if (h->seq) {
            registered |= registry_add_locked(w, &h->entries[0], t->progress, h->seq, h);
        }
        if (h->signal) {
            registered |= registry_add_locked(w, &h->entries[1], h->signal, h->value, h);
        }
        pthread_mutex_unlock(&w->registry_lock);
    }
    pthread_mutex_lock(&t->lock);
    if (t->tail) {
        t->tail->next = h;
    } else {
        t->head = h;
    }
    t->tail = h;
    ++t->count;
    if (h->seq > t->last_seq) {
        t->last_seq = h->seq;
    }
    pthread_mutex_unlock(&t->lock);
    atomic_fetch_add_explicit(&w->work, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst)) {
        ordo_futex_wake(&w->work, 1);
    }
    if (registered) {
        uint64_t n = atomic_fetch_add_explicit(&w->registrations, 1, memory_order_relaxed) + 1;
        (void)ordo_signal_signal(w->registered, n & ORDO_SIGNAL_VALUE_MAX);
    }
}

ordo_status_t hal_timeline_push_failure(hal_timeline_t *t, ordo_status_t status,
                                        const char *message) {
    hal_watch_t *h = hal_timeline_watch_alloc(t);
    if (!h) {
        /* No room to fail in order: fail now (points still pending fail
         * too, which is the lesser evil than letting them succeed). */
        hal_timeline_fail(t, status, message);
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    h->status = status;
    if ((h->message = ordo_alloc(ORDO_SIGNAL_MESSAGE_MAX, 0)) != NULL) {
        snprintf(h->message, ORDO_SIGNAL_MESSAGE_MAX, "%s", message ? message : "");
    }
    hal_timeline_push(t, h);
    return ORDO_OK;
}

size_t hal_timeline_snapshot(hal_timeline_t *t, hal_pending_op_t *ops, size_t capacity) {
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (hal_watch_t *h = t->head; h; h = h->next) {
        if (!h->signal) {
            continue;
        }
        if (n < capacity) {
            hal_pending_op_t *op = &ops[n];
            op->kind = HAL_PENDING_SIGNAL;
            op->signal = h->signal;
            op->value = h->value;
            op->seq = h->seq;
            signal_retain_internal(h->signal);
        }
        ++n;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
