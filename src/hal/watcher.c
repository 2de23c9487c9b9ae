/* The completion watcher, its timelines and the registry of device points
 * (see watcher.h). */
#include "hal/watcher.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "base/timer_slack.h"
#include "sync/signal_access.h"

#define DEFAULT_MIN_POLL_NS 10000u
#define DEFAULT_MAX_POLL_NS 50000u
#define DEFAULT_IDLE_POLL_NS 1000000u
#define LEAST_POLL_NS 1000u

/* Why the watcher is unparked (base/parker.h). Each sleep of the thread
 * names those that end it early: nothing pending, any of them; pending but
 * nothing wanted (an idle poll), all but a push; a value wanted (a short
 * poll), only callbacks handed over and a halt. An unpark for another
 * reason still ends a sleep that has not begun. */
enum {
    WATCHER_WAKE_PUSH = 1u,     /* a watch was pushed */
    WATCHER_WAKE_WANT = 2u,     /* a timepoint was armed on a registered signal */
    WATCHER_WAKE_DEFERRED = 4u, /* a helper handed callbacks over */
    WATCHER_WAKE_HALT = 8u,     /* the thread is to stop */
};
#define WATCHER_WAKE_ALWAYS (WATCHER_WAKE_DEFERRED | WATCHER_WAKE_HALT)

#define WATCHER_OF_FEEDER(f) ((hal_watcher_t *)((char *)(f)-offsetof(hal_watcher_t, feeder)))

/* ---- wants ----------------------------------------------------------------- */

/* The feeder's call, under the signal's lock: a timepoint was armed on a
 * registered signal: the watcher polls sooner (the thread's look at the
 * signals follows its parker's key). */
static void watcher_wanted(hal_watcher_t *w) {
    ordo__parker_unpark(&w->parker, WATCHER_WAKE_WANT, 1);
}

static void feeder_wanted(signal_feeder_t *feeder) {
    watcher_wanted(WATCHER_OF_FEEDER(feeder));
}

/* A point just registered under signal at value: wanted at once if a
 * timepoint already waits there (armed before the feeder hung, or by
 * a wait for a value not produced until now). */
static void registration_wanted(hal_watcher_t *w, ordo_signal_t *signal, uint64_t value) {
    uint64_t wanted;
    if (ordo__signal_wanted_value(signal, &wanted) && wanted <= value) {
        watcher_wanted(w);
    }
}

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
        } else if (!(n = ordo__alloc(sizeof *n, 0))) {
            return 0;
        }
        size_t b = bucket_of(signal);
        n->signal = signal;
        n->head = n->tail = NULL;
        n->next = w->buckets[b];
        w->buckets[b] = n;
        n->active_prev = NULL;
        n->active_next = w->active;
        if (w->active) {
            w->active->active_prev = n;
        }
        w->active = n;
        ordo__signal_feeder_set(signal, &w->feeder);
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
        if (n->active_prev) {
            n->active_prev->active_next = n->active_next;
        } else {
            w->active = n->active_next;
        }
        if (n->active_next) {
            n->active_next->active_prev = n->active_prev;
        }
        /* The signal is retained (by the watch, or it is a timeline's
         * progress) while its last entry goes. */
        ordo__signal_feeder_clear(n->signal, &w->feeder);
        n->signal = NULL;
        n->next = w->spare;
        w->spare = n;
    }
}

/* Whether a timepoint waits for a value that a pending point reaches. */
static int registry_wanted(hal_watcher_t *w) {
    int wanted = 0;
    pthread_mutex_lock(&w->registry_lock);
    for (const hal_reg_signal_t *n = w->active; n && !wanted; n = n->active_next) {
        uint64_t value;
        wanted = ordo__signal_wanted_value(n->signal, &value) && n->tail && n->tail->value >= value;
    }
    pthread_mutex_unlock(&w->registry_lock);
    return wanted;
}

int ordo__hal_watcher_find(hal_watcher_t *w, ordo_signal_t *signal, uint64_t value,
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

int ordo__hal_timeline_failed(const hal_timeline_t *t, ordo_status_t *out_status,
                              const char **out_message) {
    /* Acquire: the failure fields were written before the flag. */
    if (!ordo__signal_view(t->progress).failed) {
        return 0;
    }
    ordo_status_t status = ordo__signal_failure(t->progress, out_message);
    if (out_status) {
        *out_status = status;
    }
    return 1;
}

void ordo__hal_timeline_fail(hal_timeline_t *t, ordo_status_t status, const char *message) {
    (void)ordo_signal_fail(t->progress, status, message);
}

/* The verdict of an ordering check: the waited-on value is reached (by
 * anyone), or the waiting stream fails in turn: with the producing
 * stream's failure if that stream ended short of its point (its signal is
 * failed with the same status, but perhaps not yet: its watch may come
 * later), else with the signal's if the signal ended short of the value. */
static void check_verdict(hal_watch_t *h) {
    signal_view_t check = ordo__signal_view(h->check);
    if (check.value >= h->check_value) {
        return;
    }
    char what[ORDO_SIGNAL_MESSAGE_MAX];
    if (h->after) {
        signal_view_t after = ordo__signal_view(h->after);
        if (after.value < h->after_value && after.ended) {
            const char *message = "it was destroyed";
            ordo_status_t status =
                after.failed ? ordo__signal_failure(h->after, &message) : ORDO_ERR_CANCELLED;
            /* Told as every failure a wait passes on (tracker_sync.c
             * tells them from a stream's own by it). */
            const char *origin = ordo__failure_origin(message);
            snprintf(what, sizeof what, ORDO__WAIT_UNREACHED_TEXT "%.*s", (int)strlen(origin),
                     origin);
            ordo__hal_timeline_fail(h->timeline, status, what);
            return;
        }
    }
    if (!check.ended) {
        return;
    }
    ordo__hal_timeline_fail(h->timeline, ordo__signal_wait_ended(h->check, what, sizeof what),
                            what);
}

/* Everything a completed watch stands for, in order: a device error or a
 * failed check fails the timeline first; then the signal is raised (or,
 * on a failed timeline, failed), the event record completes, progress
 * moves, and the point leaves the registry and goes back. Under pass_lock
 * (or on a detached timeline in ordo__hal_timeline_fini), outside every other
 * lock but the registry's (for the removal only). */
static void watch_complete(hal_watcher_t *w, hal_watch_t *h, int reached) {
    hal_timeline_t *t = h->timeline;
    if (h->status != ORDO_OK) {
        ordo__hal_timeline_fail(t, h->status,
                                h->message ? h->message : "the device reported an error");
    }
    if (h->check) {
        check_verdict(h);
    }
    ordo_status_t failure = ORDO_OK;
    const char *message = NULL;
    int failed = ordo__hal_timeline_failed(t, &failure, &message);
    if (h->signal) {
        if (!failed) {
            (void)ordo_signal_advance(h->signal, h->value);
        } else {
            /* A point the stream never reaches: its waiters get the
             * failure instead of hanging (unless another producer has
             * reached the value: then nobody waits for it). */
            if (ordo__signal_reached(h->signal) < h->value) {
                (void)ordo_signal_fail(h->signal, failure, message);
            }
        }
    }
    if (h->event) {
        ordo__hal_event_record_reached(h->event, h->generation, !failed && reached);
    }
    if (h->seq && !failed) {
        (void)ordo_signal_advance(t->progress, h->seq);
    }
    if (h->point) {
        pthread_mutex_lock(&w->registry_lock);
        registry_remove_locked(w, &h->entries[0]);
        registry_remove_locked(w, &h->entries[1]);
        pthread_mutex_unlock(&w->registry_lock);
        w->ops->release(w->user, h->point, reached);
    }
    if (h->signal) {
        ordo__signal_release_internal(h->signal);
    }
    if (h->after) {
        ordo__signal_release_internal(h->after);
    }
    if (h->check) {
        ordo__signal_release_internal(h->check);
    }
    if (h->message) {
        ordo__dealloc(h->message, ORDO_SIGNAL_MESSAGE_MAX, 0);
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
        if (st != ORDO_OK && (h->message = ordo__alloc(ORDO_SIGNAL_MESSAGE_MAX, 0)) != NULL) {
            snprintf(h->message, ORDO_SIGNAL_MESSAGE_MAX, "%s", msg);
        }
        return 1;
    }
    if (!h->after) {
        return 1;
    }
    signal_view_t after = ordo__signal_view(h->after);
    return after.value >= h->after_value || after.ended;
}

/* ---- the watcher thread -------------------------------------------------- */

typedef struct watcher_pass {
    hal_watch_t *done_head;
    hal_watch_t *done_tail;
    int outstanding;
} watcher_pass_t;

/* Whether watch h of t is ready, asking the device as little as it can:
 * a stream reaches its points in order, so once the oldest queued point is
 * reached the newest is asked too, and if it is reached, every point
 * between answers without a query (*inout_reached: the largest seq known
 * reached in this pass; *inout_asked: the newest was asked about). A pass
 * over many completed points makes two queries, not one each; a pass
 * that finds the oldest still pending makes one. */
static int watch_ready_in_order(hal_watcher_t *w, hal_timeline_t *t, hal_watch_t *h,
                                uint64_t *inout_reached, int *inout_asked) {
    if (h->point && h->seq && h->seq <= *inout_reached) {
        h->status = ORDO_OK;
        return 1;
    }
    if (!watch_ready(w, t, h)) {
        return 0;
    }
    if (h->point && h->status == ORDO_OK && !*inout_asked && w->ops->in_order) {
        *inout_asked = 1;
        pthread_mutex_lock(&t->lock);
        hal_watch_t *newest = t->last_point;
        pthread_mutex_unlock(&t->lock);
        /* Only passes take watches off, so `newest` stays queued. */
        if (newest && newest != h && newest->seq > h->seq) {
            char msg[ORDO_SIGNAL_MESSAGE_MAX] = "";
            if (w->ops->query(w->user, t, newest, msg, sizeof msg) == ORDO_OK) {
                *inout_reached = newest->seq;
            }
        }
    }
    return 1;
}

/* Takes every completed watch off every timeline, in order per timeline. */
static void watcher_scan(hal_watcher_t *w, watcher_pass_t *pass) {
    pthread_mutex_lock(&w->lock);
    for (hal_timeline_t *t = w->timelines; t; t = t->next) {
        uint64_t reached = 0;
        int asked = 0;
        for (;;) {
            pthread_mutex_lock(&t->lock);
            hal_watch_t *h = t->head;
            pthread_mutex_unlock(&t->lock);
            if (!h) {
                break;
            }
            pass->outstanding = 1;
            if (!watch_ready_in_order(w, t, h, &reached, &asked)) {
                break;
            }
            /* Only passes take watches off, so h is still the head. */
            pthread_mutex_lock(&t->lock);
            t->head = h->next;
            if (!t->head) {
                t->tail = NULL;
            }
            if (t->last_point == h) {
                t->last_point = NULL;
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

/* The watcher whose pass this thread runs (NULL elsewhere). */
static _Thread_local const hal_watcher_t *tls_watcher;

int ordo__hal_watcher_is_current(const hal_watcher_t *w) {
    return tls_watcher == w;
}

/* One pass, pass_lock held: scans every timeline and completes what is
 * reached. Returns whether anything is pending; *out_progressed: whether
 * anything completed. */
static int watcher_pass_locked(hal_watcher_t *w, int *out_progressed) {
    watcher_pass_t pass = {NULL, NULL, 0};
    /* Callbacks the completions make due queue in the sink (sink_take). */
    timepoint_sink_t *outer_sink = ordo__timepoints_divert(&w->sink);
    watcher_scan(w, &pass);
    /* Completions in the order they were taken: a timeline whose ordering
     * check names another's point sees that point completed in an earlier
     * pass or earlier in this list. */
    for (hal_watch_t *h = pass.done_head; h;) {
        hal_watch_t *next = h->next;
        hal_timeline_t *t = h->timeline;
        watch_complete(w, h, h->status == ORDO_OK && h->point != NULL);
        if (atomic_fetch_sub_explicit(&t->processing, 1, memory_order_release) == 1) {
            ordo__futex_wake(&t->processing, INT_MAX); /* touches only the address */
        }
        h = next;
    }
    (void)ordo__timepoints_divert(outer_sink);
    *out_progressed = pass.done_head != NULL;
    return pass.outstanding;
}

/* The sink of every pass: callbacks other than waiters' wake-ups queue
 * here, in the order the passes made them due, and the watcher thread runs
 * them after its pass, outside pass_lock. So a helper's pass runs none (a
 * callback on a waiting thread could need a lock that thread holds), and
 * callbacks keep one order whichever thread completed their points. */
static void sink_take(timepoint_sink_t *sink, due_list_t *due) {
    hal_watcher_t *w = (hal_watcher_t *)((char *)sink - offsetof(hal_watcher_t, sink));
    pthread_mutex_lock(&w->deferred_lock);
    if (w->deferred.tail) {
        w->deferred.tail->next_ = due->head;
    } else {
        w->deferred.head = due->head;
    }
    w->deferred.tail = due->tail;
    atomic_store_explicit(&w->deferred_pending, 1, memory_order_relaxed);
    pthread_mutex_unlock(&w->deferred_lock);
    if (pthread_equal(pthread_self(), w->thread)) {
        return; /* the watcher's own pass: it runs them once it ends */
    }
    /* After deferred_pending: the watcher's key that follows this unpark
     * comes with the flag. */
    ordo__parker_unpark(&w->parker, WATCHER_WAKE_DEFERRED, 1);
}

/* Runs the callbacks helpers handed over, on the calling thread. */
static void run_deferred(hal_watcher_t *w) {
    if (!atomic_load_explicit(&w->deferred_pending, memory_order_relaxed)) {
        return;
    }
    pthread_mutex_lock(&w->deferred_lock);
    due_list_t due = w->deferred;
    w->deferred.head = w->deferred.tail = NULL;
    atomic_store_explicit(&w->deferred_pending, 0, memory_order_relaxed);
    pthread_mutex_unlock(&w->deferred_lock);
    if (due.head) {
        ordo__timepoints_run(&due);
    }
}

/* The feeder's help, on a waiting thread (see watcher.h): one pass unless
 * another is running, or this thread runs callbacks already (whatever that
 * pass made due would wait for them to return), bracketed by the backend's
 * help ops, with others' callbacks diverted to the watcher thread. */
static int feeder_help(signal_feeder_t *feeder) {
    hal_watcher_t *w = WATCHER_OF_FEEDER(feeder);
    if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
        return -1; /* halted: nothing to help any more */
    }
    if (ordo__timepoints_running_here() || pthread_mutex_trylock(&w->pass_lock) != 0) {
        return 0;
    }
    int progressed = 0;
    /* Under pass_lock: a halt sets stop, then waits for the lock. */
    if (!atomic_load_explicit(&w->stop, memory_order_acquire) &&
        (!w->ops->help_begin || w->ops->help_begin(w->user))) {
        const hal_watcher_t *outer = tls_watcher;
        tls_watcher = w;
        (void)watcher_pass_locked(w, &progressed);
        tls_watcher = outer;
        if (w->ops->help_end) {
            w->ops->help_end(w->user);
        }
        atomic_fetch_add_explicit(&w->helped_passes, 1, memory_order_relaxed);
        atomic_store_explicit(&w->last_help_ns, ordo_time_now_ns(), memory_order_relaxed);
    }
    pthread_mutex_unlock(&w->pass_lock);
    return progressed;
}

/* The interval before the next poll while something is pending (see
 * watcher.h); *inout_poll_ns carries the eager schedule's doubling. */
static uint64_t next_interval(hal_watcher_t *w, int progressed, int *inout_fresh,
                              uint64_t *inout_poll_ns) {
    if (!registry_wanted(w)) {
        atomic_fetch_add_explicit(&w->idle_polls, 1, memory_order_relaxed);
        *inout_fresh = 1; /* a want restarts the eager schedule */
        return w->idle_poll_ns;
    }
    atomic_fetch_add_explicit(&w->wanted_polls, 1, memory_order_relaxed);
    /* A waiter that helps passes at least every max_poll_ns, and its
     * passes scan every timeline: it polls for everyone meanwhile, so the
     * watcher keeps to the idle interval (a wait with no thread, a link
     * say, may then be seen up to that much later once the helper's wait
     * has ended). */
    uint64_t helped = atomic_load_explicit(&w->last_help_ns, memory_order_relaxed);
    if (helped && ordo_time_now_ns() - helped < 2 * w->max_poll_ns) {
        *inout_fresh = 1;
        return w->idle_poll_ns;
    }
    if (progressed || *inout_fresh) {
        *inout_poll_ns = w->min_poll_ns;
    } else {
        *inout_poll_ns = *inout_poll_ns * 2 > w->max_poll_ns ? w->max_poll_ns : *inout_poll_ns * 2;
    }
    *inout_fresh = 0;
    return *inout_poll_ns;
}

static void *watcher_main(void *arg) {
    hal_watcher_t *w = arg;
    tls_watcher = w;
    /* The kernel may stretch a timed sleep by the thread's timer slack (50
     * us by default), as long as the longest poll interval: keep the
     * schedule below as written. */
    (void)ordo__timer_slack_set(1000);
    if (w->ops->thread_start) {
        w->ops->thread_start(w->user);
    }
    uint64_t poll_ns = w->min_poll_ns;
    int fresh = 1; /* the next interval is the first after new work */
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&w->parker);
        /* After the key: ordo__hal_watcher_halt sets stop before it unparks,
         * so a halt this load missed ends the sleep below. */
        if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
            run_deferred(w);
            break;
        }
        int progressed = 0;
        pthread_mutex_lock(&w->pass_lock);
        int pending = watcher_pass_locked(w, &progressed);
        pthread_mutex_unlock(&w->pass_lock);
        run_deferred(w);
        if (pending) {
            /* Something is pending: poll again after the interval. A push
             * does not cut the sleep short (the pusher pays no wake-up; the
             * next poll sees its point): the key is read again here so
             * that pushes during the pass do not end it at once either. A
             * want after this key ends an idle poll (the interval below
             * looks at the signals after the key), and a halt or handed
             * over callbacks end any sleep. */
            key = ordo__parker_prepare(&w->parker);
            if (atomic_load_explicit(&w->deferred_pending, memory_order_relaxed)) {
                continue; /* a helper handed callbacks over: run them now */
            }
            if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
                run_deferred(w);
                break;
            }
            uint64_t interval = next_interval(w, progressed, &fresh, &poll_ns);
            uint32_t interest = WATCHER_WAKE_ALWAYS;
            if (interval == w->idle_poll_ns) {
                interest |= WATCHER_WAKE_WANT;
            }
            (void)ordo__parker_park(&w->parker, key, interest, ordo_time_now_ns() + interval);
            continue;
        }
        /* Nothing pending: sleep until a push (pushes during the pass moved
         * the epoch since the key: no sleep then). */
        (void)ordo__parker_park(&w->parker, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
        fresh = 1; /* new work: it may complete soon */
    }
    return NULL;
}

ordo_status_t ordo__hal_watcher_start(hal_watcher_t *w, const hal_watcher_ops_t *ops, void *user,
                                      const hal_watcher_config_t *config, const char *api) {
    static const hal_watcher_config_t defaults = {0, 0, 0};
    if (!config) {
        config = &defaults;
    }
    memset(w, 0, sizeof *w);
    w->ops = ops;
    w->user = user;
    w->feeder.wanted = feeder_wanted;
    w->feeder.help = feeder_help;
    w->sink.take = sink_take;
    w->min_poll_ns = config->min_poll_ns ? config->min_poll_ns : DEFAULT_MIN_POLL_NS;
    w->max_poll_ns = config->max_poll_ns ? config->max_poll_ns : DEFAULT_MAX_POLL_NS;
    w->idle_poll_ns = config->idle_poll_ns ? config->idle_poll_ns : DEFAULT_IDLE_POLL_NS;
    if (w->min_poll_ns < LEAST_POLL_NS) {
        w->min_poll_ns = LEAST_POLL_NS;
    }
    if (w->max_poll_ns < w->min_poll_ns) {
        w->max_poll_ns = w->min_poll_ns;
    }
    if (w->idle_poll_ns < w->max_poll_ns) {
        w->idle_poll_ns = w->max_poll_ns;
    }
    w->feeder.help_min_ns = w->min_poll_ns;
    w->feeder.help_max_ns = w->max_poll_ns;
    if (ordo_signal_create(0, &w->registered) != ORDO_OK) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create the watcher's signal");
    }
    pthread_mutex_init(&w->pass_lock, NULL);
    pthread_mutex_init(&w->deferred_lock, NULL);
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->registry_lock, NULL);
    ordo_status_t st = ORDO_OK;
    if (pthread_create(&w->thread, NULL, watcher_main, w) != 0) {
        st = ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                         "cannot start the device's completion thread");
        goto fail;
    }
    w->started = 1;
    return ORDO_OK;
fail:
    pthread_mutex_destroy(&w->pass_lock);
    pthread_mutex_destroy(&w->deferred_lock);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->registry_lock);
    ordo__signal_release_internal(w->registered);
    return st;
}

void ordo__hal_watcher_halt(hal_watcher_t *w) {
    if (!w->started) {
        return;
    }
    atomic_store_explicit(&w->stop, 1, memory_order_release);
    ordo__parker_unpark(&w->parker, WATCHER_WAKE_HALT, INT_MAX);
    pthread_join(w->thread, NULL);
    if (!ordo__hal_watcher_is_current(w)) {
        /* A helper's pass under way ends; later ones see stop under the
         * lock and do nothing (its passes run no user callback, so this
         * wait is short). */
        pthread_mutex_lock(&w->pass_lock);
        pthread_mutex_unlock(&w->pass_lock);
        /* What that pass handed over: owners may wait for it (an
         * asynchronous waiter's destroy, a memory reap). */
        run_deferred(w);
    }
    w->started = 0;
}

void ordo__hal_watcher_stop(hal_watcher_t *w) {
    if (!w->started) {
        return;
    }
    ordo__hal_watcher_halt(w);
    /* Every timeline is finished, so every feeder is off its signal: no
     * waiter starts helping now; let those helping finish. */
    for (;;) {
        uint32_t helpers = atomic_load_explicit(&w->feeder.helpers, memory_order_acquire);
        if (!helpers) {
            break;
        }
        (void)ordo__futex_wait(&w->feeder.helpers, helpers, ORDO_DEADLINE_NEVER);
    }
    /* Callbacks helpers handed over after the thread's last look. */
    run_deferred(w);
    while (w->spare) {
        hal_reg_signal_t *n = w->spare;
        w->spare = n->next;
        ordo__dealloc(n, sizeof *n, 0);
    }
    pthread_mutex_destroy(&w->pass_lock);
    pthread_mutex_destroy(&w->deferred_lock);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->registry_lock);
    ordo__signal_release_internal(w->registered);
}

/* ---- timelines ----------------------------------------------------------- */

ordo_status_t ordo__hal_timeline_init(hal_timeline_t *t, hal_watcher_t *w, void *user,
                                      const char *name, const char *api) {
    memset(t, 0, sizeof *t);
    t->watcher = w;
    t->user = user;
    if (ordo_signal_create(0, &t->progress) != ORDO_OK) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create the stream's timeline");
    }
    ordo__signal_name_set_internal(t->progress, name);
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

void ordo__hal_timeline_fini(hal_timeline_t *t, ordo_deadline_t deadline, uint64_t reserved,
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
        ordo__futex_wait(&t->processing, n, ORDO_DEADLINE_NEVER);
    }
    pthread_mutex_lock(&t->lock);
    hal_watch_t *h = t->head;
    t->head = t->tail = t->last_point = NULL;
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
                ordo__hal_timeline_fail(t, cancel_status, why);
            }
        }
        watch_complete(w, h, reached);
        h = next;
    }
    if (ordo__signal_reached(t->progress) < reserved) {
        ordo__hal_timeline_fail(t, cancel_status, why);
    }
    while (t->spare) {
        hal_watch_t *s = t->spare;
        t->spare = s->next;
        ordo__dealloc(s, sizeof *s, 0);
    }
    pthread_mutex_destroy(&t->lock);
    ordo__signal_release_internal(t->progress);
    t->progress = NULL;
}

hal_watch_t *ordo__hal_timeline_watch_alloc(hal_timeline_t *t) {
    pthread_mutex_lock(&t->lock);
    hal_watch_t *h = t->spare;
    if (h) {
        t->spare = h->next;
    }
    pthread_mutex_unlock(&t->lock);
    if (!h) {
        return ordo__alloc(sizeof *h, 0);
    }
    memset(h, 0, sizeof *h);
    return h;
}

void ordo__hal_timeline_watch_free(hal_timeline_t *t, hal_watch_t *w) {
    watch_recycle(t, w);
}

void ordo__hal_timeline_push(hal_timeline_t *t, hal_watch_t *h) {
    hal_watcher_t *w = t->watcher;
    /* Read before h is queued: a pass may complete it at once (the caller
     * still holds its own reference to the signal). */
    uint64_t seq = h->seq;
    ordo_signal_t *signal = h->signal;
    uint64_t value = h->value;
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
    if (h->point) {
        t->last_point = h;
    }
    ++t->count;
    if (h->seq > t->last_seq) {
        t->last_seq = h->seq;
    }
    pthread_mutex_unlock(&t->lock);
    ordo__parker_unpark(&w->parker, WATCHER_WAKE_PUSH, 1);
    if (registered) {
        if (seq) {
            registration_wanted(w, t->progress, seq);
        }
        if (signal) {
            registration_wanted(w, signal, value);
        }
        uint64_t n = atomic_fetch_add_explicit(&w->registrations, 1, memory_order_relaxed) + 1;
        (void)ordo_signal_advance(w->registered, n & ORDO_SIGNAL_VALUE_MAX);
    }
}

ordo_status_t ordo__hal_timeline_push_failure(hal_timeline_t *t, ordo_status_t status,
                                              const char *message) {
    hal_watch_t *h = ordo__hal_timeline_watch_alloc(t);
    if (!h) {
        /* No room to fail in order: fail now (points still pending fail
         * too, which is the lesser evil than letting them succeed). */
        ordo__hal_timeline_fail(t, status, message);
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    h->status = status;
    if ((h->message = ordo__alloc(ORDO_SIGNAL_MESSAGE_MAX, 0)) != NULL) {
        snprintf(h->message, ORDO_SIGNAL_MESSAGE_MAX, "%s", message ? message : "");
    }
    ordo__hal_timeline_push(t, h);
    return ORDO_OK;
}

size_t ordo__hal_timeline_snapshot(hal_timeline_t *t, hal_pending_op_t *ops, size_t capacity) {
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
            ordo__signal_retain_internal(h->signal);
        }
        ++n;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
