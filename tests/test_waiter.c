/* Asynchronous waiters: firing, where callbacks run, deadlines, failure and
 * destroy propagation, event waits, cancellation (prevented, too late,
 * from inside a callback), metrics, destroy with pending waits, bad input,
 * and a stress of many waits cancelled from several threads while
 * producers signal. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/waiter_internal.h"
#include "refusal.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------- */

/* What one callback saw. `done` (when set) is signalled with the number of
 * callbacks of the shared counter, so a test can wait for n of them. */
typedef struct rec {
    _Atomic int calls;
    _Atomic int status;
    _Atomic uint64_t id;
    _Atomic uint64_t at_ns;
    pthread_t thread;
    _Atomic int finished;
    ordo_signal_t *done;
    _Atomic uint64_t *counter;
    char message[160]; /* ordo_error_message() inside the callback */
} rec_t;

static void rec_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    rec_t *r = ctx;
    r->thread = pthread_self();
    snprintf(r->message, sizeof r->message, "%s", ordo_error_message());
    atomic_store(&r->at_ns, ordo_time_now_ns());
    atomic_store(&r->status, (int)status);
    atomic_store(&r->id, id);
    atomic_fetch_add(&r->calls, 1);
    atomic_store(&r->finished, 1);
    if (r->done) {
        uint64_t n = r->counter ? atomic_fetch_add(r->counter, 1) + 1 : 1;
        assert_ok(ordo_signal_advance(r->done, n));
    }
}

static ordo_waiter_t *waiter_make(uint32_t workers) {
    ordo_waiter_config_t config;
    assert_ok(ordo_waiter_config_default(&config));
    assert_int_equal(config.worker_threads, 1);
    config.worker_threads = workers;
    ordo_waiter_t *w = NULL;
    assert_ok(ordo_waiter_create(&config, &w));
    return w;
}

static void rec_init(rec_t *r, ordo_signal_t *done, _Atomic uint64_t *counter) {
    memset(r, 0, sizeof *r);
    atomic_store(&r->status, -1);
    r->done = done;
    r->counter = counter;
}

/* Waits (bounded) until the waiter has no callback running. */
static void wait_idle(ordo_waiter_t *w) {
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        ordo_waiter_metrics_t m;
        assert_ok(ordo_waiter_metrics(w, &m));
        if (m.running == 0) {
            return;
        }
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
}

typedef struct counter {
    _Atomic uint64_t calls;
    ordo_signal_t *done;
} counter_t;

static void count_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    counter_t *c = ctx;
    assert_int_equal(status, ORDO_OK);
    assert_ok(ordo_signal_advance(c->done, atomic_fetch_add(&c->calls, 1) + 1));
}

static void timeout_count_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    counter_t *c = ctx;
    assert_int_equal(status, ORDO_ERR_TIMEOUT);
    assert_ok(ordo_signal_advance(c->done, atomic_fetch_add(&c->calls, 1) + 1));
}

/* ---- firing and where callbacks run ------------------------------------- */

static void fires_after_register_on_a_worker(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    rec_t r;
    rec_init(&r, done, NULL);
    ordo_wait_id_t id = 0;
    assert_ok(ordo_waiter_wait(w, s, 5, ORDO_DEADLINE_NEVER, 0, rec_fn, &r, &id));
    assert_true(id != 0);
    assert_ok(ordo_signal_advance(s, 4));
    test_sleep_ms(5);
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_ok(ordo_signal_advance(s, 5));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_int_equal(atomic_load(&r.status), ORDO_OK);
    assert_int_equal(atomic_load(&r.id), id);
    assert_false(pthread_equal(r.thread, pthread_self()));
    wait_idle(w);
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.registered, 1);
    assert_int_equal(m.fired, 1);
    assert_int_equal(m.pending, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

static void fires_when_reached_before_register(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(9);
    ordo_signal_t *done = test_signal_make(0);
    /* Worker: queued at once, run on the worker. */
    rec_t r;
    rec_init(&r, done, NULL);
    ordo_wait_id_t id = 0;
    assert_ok(ordo_waiter_wait(w, s, 9, ORDO_DEADLINE_NEVER, 0, rec_fn, &r, &id));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_int_equal(atomic_load(&r.status), ORDO_OK);
    assert_false(pthread_equal(r.thread, pthread_self()));
    /* Inline: run by the registering thread before the call returns. */
    rec_t q;
    rec_init(&q, NULL, NULL);
    ordo_wait_id_t qid = 0;
    assert_ok(ordo_waiter_wait(w, s, 3, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &q, &qid));
    assert_int_equal(atomic_load(&q.calls), 1);
    assert_int_equal(atomic_load(&q.id), qid);
    assert_true(pthread_equal(q.thread, pthread_self()));
    /* A deadline already past loses to a value already reached. */
    rec_t p;
    rec_init(&p, NULL, NULL);
    assert_ok(ordo_waiter_wait(w, s, 0, ORDO_DEADLINE_NOW, ORDO_WAIT_INLINE, rec_fn, &p, NULL));
    assert_int_equal(atomic_load(&p.calls), 1);
    assert_int_equal(atomic_load(&p.status), ORDO_OK);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

/* Registering from inside a callback: the new wait's timepoint is queued
 * until that callback returns, yet a value reached at registration must
 * still win over a deadline already past (the timer must not take it). */
typedef struct nested {
    ordo_waiter_t *waiter;
    ordo_signal_t *reached;
    rec_t inner;
    _Atomic int registered;
} nested_t;

static void nested_register_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    nested_t *n = ctx;
    assert_int_equal(status, ORDO_OK);
    assert_ok(ordo_waiter_wait(n->waiter, n->reached, 1, ORDO_DEADLINE_NOW, ORDO_WAIT_INLINE,
                               rec_fn, &n->inner, NULL));
    atomic_store(&n->registered, 1);
    /* Long enough for the timer thread to look at its heap. */
    test_sleep_ms(30);
}

static void reached_value_wins_when_registered_in_a_callback(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *trigger = test_signal_make(0);
    ordo_signal_t *reached = test_signal_make(1);
    ordo_signal_t *done = test_signal_make(0);
    for (int round = 0; round < 3; ++round) {
        nested_t n;
        memset(&n, 0, sizeof n);
        n.waiter = w;
        n.reached = reached;
        rec_init(&n.inner, done, NULL);
        assert_ok(ordo_waiter_wait(w, trigger, (uint64_t)round + 1, ORDO_DEADLINE_NEVER,
                                   ORDO_WAIT_INLINE, nested_register_fn, &n, NULL));
        assert_ok(ordo_signal_advance(trigger, (uint64_t)round + 1));
        assert_int_equal(atomic_load(&n.registered), 1);
        assert_ok(ordo_signal_wait(done, 1, test_deadline()));
        assert_int_equal(atomic_load(&n.inner.calls), 1);
        assert_int_equal(atomic_load(&n.inner.status), ORDO_OK);
        wait_idle(w);
        assert_ok(ordo_signal_destroy(done));
        done = test_signal_make(0);
    }
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.timed_out, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(trigger));
    assert_ok(ordo_signal_destroy(reached));
    assert_ok(ordo_signal_destroy(done));
}

typedef struct producer {
    ordo_signal_t *signal;
    uint64_t value;
    pthread_t self;
} producer_t;

static void *produce(void *arg) {
    producer_t *p = arg;
    p->self = pthread_self();
    assert_ok(ordo_signal_advance(p->signal, p->value));
    return NULL;
}

static void inline_runs_on_the_signalling_thread(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(2);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic uint64_t counter = 0;
    rec_t in, out;
    rec_init(&in, done, &counter);
    rec_init(&out, done, &counter);
    assert_ok(ordo_waiter_wait(w, s, 1, test_deadline(), ORDO_WAIT_INLINE, rec_fn, &in, NULL));
    assert_ok(ordo_waiter_wait(w, s, 1, test_deadline(), 0, rec_fn, &out, NULL));
    producer_t p = {s, 1, 0};
    pthread_t t = test_thread_start(produce, &p);
    pthread_join(t, NULL);
    /* The inline callback ran inside the producer's signal call. */
    assert_int_equal(atomic_load(&in.calls), 1);
    assert_true(pthread_equal(in.thread, p.self));
    assert_ok(ordo_signal_wait(done, 2, test_deadline()));
    assert_false(pthread_equal(out.thread, p.self));
    assert_false(pthread_equal(out.thread, pthread_self()));
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

/* ---- deadlines ------------------------------------------------------------ */

static void deadline_fires_timeout_never_early(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic uint64_t counter = 0;
    rec_t worker, in;
    rec_init(&worker, done, &counter);
    rec_init(&in, done, &counter);
    ordo_deadline_t deadline = ordo_deadline_after_ms(20);
    assert_ok(ordo_waiter_wait(w, s, 1, deadline, 0, rec_fn, &worker, NULL));
    assert_ok(ordo_waiter_wait(w, s, 1, deadline, ORDO_WAIT_INLINE, rec_fn, &in, NULL));
    assert_ok(ordo_signal_wait(done, 2, test_deadline()));
    assert_int_equal(atomic_load(&worker.status), ORDO_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&in.status), ORDO_ERR_TIMEOUT);
    assert_true(atomic_load(&worker.at_ns) >= deadline);
    assert_true(atomic_load(&in.at_ns) >= deadline);
    /* Inline timeouts run on the waiter's timer thread. */
    assert_false(pthread_equal(in.thread, pthread_self()));
    /* A later signal changes nothing. */
    assert_ok(ordo_signal_advance(s, 1));
    test_sleep_ms(2);
    assert_int_equal(atomic_load(&worker.calls), 1);
    assert_int_equal(atomic_load(&in.calls), 1);
    /* ORDO_DEADLINE_NOW on an unreached value times out at once. */
    rec_t now;
    rec_init(&now, done, &counter);
    assert_ok(ordo_waiter_wait(w, s, 2, ORDO_DEADLINE_NOW, 0, rec_fn, &now, NULL));
    assert_ok(ordo_signal_wait(done, 3, test_deadline()));
    assert_int_equal(atomic_load(&now.status), ORDO_ERR_TIMEOUT);
    wait_idle(w);
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.timed_out, 3);
    assert_int_equal(m.fired, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

static int order_log[8];
static _Atomic int order_count;

static void order_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    assert_int_equal(status, ORDO_ERR_TIMEOUT);
    /* Only the timer thread runs these: write, then publish. */
    order_log[atomic_load(&order_count)] = (int)(intptr_t)ctx;
    atomic_fetch_add(&order_count, 1);
}

/* One attempt; returns 0, having checked nothing, when registering and
 * cancelling were not over before the first deadline (a stalled test
 * thread), so the order the deadlines fired in says nothing. */
static int deadline_order_attempt(void) {
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    atomic_store(&order_count, 0);
    static const int ms[5] = {40, 10, 30, 20, 50};
    /* A margin first, so that registering and cancelling normally happen
     * before any deadline even on a loaded machine under a sanitizer. */
    uint64_t base = ordo_time_now_ns() + 300000000u;
    ordo_wait_id_t ids[5];
    for (int i = 0; i < 5; ++i) {
        assert_ok(ordo_waiter_wait(w, s, 1, base + (uint64_t)ms[i] * 1000000u, ORDO_WAIT_INLINE,
                                   order_fn, (void *)(intptr_t)ms[i], &ids[i]));
    }
    /* Cancelling one in the middle of the heap keeps the rest in order. */
    ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
    ordo_status_t cancelled = ordo_waiter_cancel(w, ids[2], 0, &result);
    int in_time = ordo_time_now_ns() < base + 10000000u;
    /* Late, the cancel may find the wait over already. */
    assert_true(cancelled == ORDO_OK || (!in_time && cancelled == ORDO_ERR_NOT_FOUND));
    if (in_time) {
        assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    }
    /* Every wait not prevented times out (within 50 ms of base) before the
     * destroy, which would otherwise end it with another status. */
    int fire = cancelled == ORDO_OK && result == ORDO_CANCEL_PREVENTED ? 4 : 5;
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&order_count) < fire) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    wait_idle(w);
    if (in_time) {
        assert_int_equal(order_log[0], 10);
        assert_int_equal(order_log[1], 20);
        assert_int_equal(order_log[2], 40);
        assert_int_equal(order_log[3], 50);
    }
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&order_count), fire);
    assert_ok(ordo_signal_destroy(s));
    return in_time;
}

static void deadlines_fire_in_deadline_order(void **state) {
    (void)state;
    int attempt = 0;
    while (!deadline_order_attempt()) {
        assert_true(++attempt < 5);
    }
}

static uint32_t heap_len(ordo_waiter_t *w) {
    pthread_mutex_lock(&w->timer_lock);
    uint32_t len = w->heap.len;
    pthread_mutex_unlock(&w->timer_lock);
    return len;
}

/* Stale heap nodes of cancelled waits are compacted away by the timer, and
 * the deadlines still pending all fire. One attempt; returns 0, having
 * checked nothing of the order, when the test thread stalled past the first
 * deadline before the compaction could be seen. */
static int heap_compaction_attempt(void) {
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    counter_t c = {0, test_signal_make(0)};
    enum { N = 4 * WAITER_COMPACT_MIN };
    static ordo_wait_id_t ids[N];
    /* A second ahead: registering, cancelling and the compaction normally
     * all come well before, even on a loaded machine under a sanitizer. */
    uint64_t base = ordo_time_now_ns() + 1000000000u;
    for (uint32_t i = 0; i < N; ++i) {
        /* Deadlines in shuffled order. */
        uint64_t deadline = base + (uint64_t)((i * 7919u) % N) * 1000u;
        assert_ok(ordo_waiter_wait(w, s, 1, deadline, 0, timeout_count_fn, &c, &ids[i]));
    }
    uint64_t prevented = 0;
    for (uint32_t i = 0; i < N; ++i) {
        if (i % 4) {
            ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
            ordo_status_t cancelled = ordo_waiter_cancel(w, ids[i], 0, &result);
            /* Late, a cancel may find the wait over already. */
            assert_true(cancelled == ORDO_OK || cancelled == ORDO_ERR_NOT_FOUND);
            prevented += cancelled == ORDO_OK && result == ORDO_CANCEL_PREVENTED;
        }
    }
    /* The timer compacts in the background, long before any deadline. */
    ordo_deadline_t deadline = test_deadline();
    while (heap_len(w) == N && ordo_time_now_ns() < base) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    int in_time = ordo_time_now_ns() < base;
    if (in_time) {
        assert_int_equal(prevented, N - N / 4);
    }
    /* Every wait not prevented times out (within 5 ms of base) before the
     * destroy, which would otherwise end it with another status. */
    assert_ok(ordo_signal_wait(c.done, N - prevented, test_deadline()));
    wait_idle(w);
    if (in_time) {
        ordo_waiter_metrics_t m;
        assert_ok(ordo_waiter_metrics(w, &m));
        assert_int_equal(m.timed_out, N / 4);
        assert_int_equal(m.cancelled, N - N / 4);
        assert_int_equal(m.pending, 0);
        /* The stale nodes left go as they reach the top. */
        while (heap_len(w) != 0) {
            assert_true(ordo_time_now_ns() < deadline);
            test_sleep_ms(1);
        }
        assert_int_equal(atomic_load(&w->heap_stale), 0);
    }
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(c.done));
    return in_time;
}

static void heap_compaction_keeps_live_deadlines(void **state) {
    (void)state;
    int attempt = 0;
    while (!heap_compaction_attempt()) {
        assert_true(++attempt < 5);
    }
}

/* While an inline timeout callback keeps the timer thread busy, waits
 * with deadlines registered and resolved by their signals leave stale
 * heap nodes that only the timer compacted: the heap grew with every
 * registration. A registration now compacts a heap more than half stale,
 * so it stays within about twice what is pending. */
typedef struct busy_timer {
    _Atomic int entered;
    ordo_signal_t *gate;
} busy_timer_t;

static void busy_timer_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status, (void)id;
    busy_timer_t *b = ctx;
    atomic_store(&b->entered, 1);
    (void)ordo_signal_wait(b->gate, 1, test_deadline());
}

static void rec_nothing(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)ctx, (void)status, (void)id;
}

/* Puts w's timer into busy_timer_fn, an inline timeout callback of a
 * wait on never, and waits (bounded) until it is there: it then neither
 * pops nor compacts until b's gate opens. */
static void busy_timer_hold(ordo_waiter_t *w, busy_timer_t *b, ordo_signal_t *never) {
    assert_ok(ordo_waiter_wait(w, never, 1, ordo_deadline_after_ms(1), ORDO_WAIT_INLINE,
                               busy_timer_fn, b, NULL));
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&b->entered) && (ordo_deadline_t)ordo_time_now_ns() < until) {
        sched_yield();
    }
    assert_true(atomic_load(&b->entered));
}

static void a_busy_timer_does_not_let_the_heap_grow(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    busy_timer_t b = {0, test_signal_make(0)};
    ordo_signal_t *never = test_signal_make(0);
    busy_timer_hold(w, &b, never);
    uint32_t largest = 0;
    for (int round = 0; round < 40; ++round) {
        ordo_signal_t *s = test_signal_make(0);
        for (int i = 0; i < 256; ++i) {
            assert_ok(ordo_waiter_wait(w, s, 1, test_deadline(), ORDO_WAIT_INLINE, rec_nothing,
                                       NULL, NULL));
        }
        assert_ok(ordo_signal_advance(s, 1)); /* resolves them: their nodes go stale */
        assert_ok(ordo_signal_destroy(s));
        pthread_mutex_lock(&w->timer_lock);
        largest = w->heap.len > largest ? (uint32_t)w->heap.len : largest;
        pthread_mutex_unlock(&w->timer_lock);
    }
    /* 10240 registrations, at most 256 pending at once. */
    assert_true(largest <= 2 * WAITER_COMPACT_MIN + 2 * 256);
    assert_ok(ordo_signal_advance(b.gate, 1));
    wait_idle(w);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(never));
    assert_ok(ordo_signal_destroy(b.gate));
}

/* A registration with a deadline whose wait is resolved and recycled on
 * its way to the timer, its slot then taken by a later wait with a
 * deadline, used to overwrite the later wait's heap tag (with its own
 * generation, then 0): the next compaction dropped the later wait's node
 * and its deadline never fired. The hook runs that interleaving on this
 * thread, between the first registration's look at the signal and the
 * timer's lock. */
typedef struct slot_reuse {
    ordo_signal_t *first;  /* the first wait's signal, reached in the hook */
    ordo_signal_t *second; /* the later wait's, never reached */
    rec_t *later;
    ordo_wait_id_t first_id;
    ordo_wait_id_t later_id;
} slot_reuse_t;

static void resolve_and_reuse_the_slot(void *ctx, ordo_waiter_t *w, ordo_wait_id_t id) {
    slot_reuse_t *r = ctx;
    ordo__waiter_set_timer_add_hook(NULL, NULL); /* the later registration passes */
    r->first_id = id;
    /* The first wait is inline: it runs here, and its entry is recycled. */
    assert_ok(ordo_signal_advance(r->first, 1));
    assert_ok(ordo_waiter_wait(w, r->second, 1, ordo_deadline_after_ms(1), 0, rec_fn, r->later,
                               &r->later_id));
}

static void a_wait_resolved_on_its_way_to_the_timer_leaves_its_slot_alone(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    /* The timer stays in an inline timeout callback: it neither pops nor
     * compacts until the gate opens, so only a registration compacts. */
    busy_timer_t b = {0, test_signal_make(0)};
    ordo_signal_t *never = test_signal_make(0);
    busy_timer_hold(w, &b, never);

    ordo_signal_t *done = test_signal_make(0);
    rec_t first, later;
    rec_init(&first, NULL, NULL);
    rec_init(&later, done, NULL);
    slot_reuse_t r = {test_signal_make(0), test_signal_make(0), &later, 0, 0};
    ordo__waiter_set_timer_add_hook(resolve_and_reuse_the_slot, &r);
    ordo_wait_id_t id = 0;
    assert_ok(
        ordo_waiter_wait(w, r.first, 1, test_deadline(), ORDO_WAIT_INLINE, rec_fn, &first, &id));
    assert_int_equal(id, r.first_id);
    assert_int_equal(atomic_load(&first.calls), 1);
    assert_int_equal(atomic_load(&first.status), ORDO_OK);
    /* The later wait holds the same slot under the next generation, and
     * the slot's tag names its node. */
    uint32_t slot = (uint32_t)id;
    assert_int_equal((uint32_t)r.later_id, slot);
    assert_true(r.later_id != id);
    assert_true(slot < WAITER_BUCKET0);
    assert_int_equal(atomic_load(&atomic_load(&w->tags[0])[slot]), (uint32_t)(r.later_id >> 32));

    /* More than half of the heap stale: the next registration compacts. */
    enum { N = 2 * WAITER_COMPACT_MIN };
    static ordo_wait_id_t ids[N];
    for (uint32_t i = 0; i < N; ++i) {
        assert_ok(ordo_waiter_wait(w, never, 1, test_deadline(), 0, rec_nothing, NULL, &ids[i]));
    }
    for (uint32_t i = 0; i < N; ++i) {
        ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
        assert_ok(ordo_waiter_cancel(w, ids[i], 0, &result));
        assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    }
    ordo_wait_id_t extra = 0;
    assert_ok(ordo_waiter_wait(w, never, 1, test_deadline(), 0, rec_nothing, NULL, &extra));
    assert_int_equal(heap_len(w), 2); /* the later wait's node and extra's */

    /* The timer free again: the later wait's deadline (passed) fires. */
    assert_ok(ordo_signal_advance(b.gate, 1));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_int_equal(atomic_load(&later.status), ORDO_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&later.id), r.later_id);
    ordo_cancel_result_t result;
    assert_ok(ordo_waiter_cancel(w, extra, 0, &result));
    wait_idle(w);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(r.first));
    assert_ok(ordo_signal_destroy(r.second));
    assert_ok(ordo_signal_destroy(done));
    assert_ok(ordo_signal_destroy(never));
    assert_ok(ordo_signal_destroy(b.gate));
}

/* ---- failures and destroys propagate ------------------------------------- */

static void failure_and_destroy_propagate(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *t = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic uint64_t counter = 0;
    rec_t reached, failed, late, gone;
    rec_init(&reached, done, &counter);
    rec_init(&failed, done, &counter);
    rec_init(&late, done, &counter);
    rec_init(&gone, done, &counter);
    assert_ok(ordo_waiter_wait(w, s, 1, test_deadline(), 0, rec_fn, &reached, NULL));
    assert_ok(ordo_waiter_wait(w, s, 2, test_deadline(), ORDO_WAIT_INLINE, rec_fn, &failed, NULL));
    assert_ok(ordo_signal_advance(s, 1));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, "producer crashed"));
    /* The inline one ran inside ordo_signal_fail. */
    assert_int_equal(atomic_load(&failed.calls), 1);
    assert_int_equal(atomic_load(&failed.status), ORDO_ERR_ABORTED);
    /* A wait registered on a failed signal gets its failure at once. */
    assert_ok(ordo_waiter_wait(w, s, 7, ORDO_DEADLINE_NEVER, 0, rec_fn, &late, NULL));
    /* A destroyed signal delivers ORDO_ERR_CANCELLED. */
    assert_ok(ordo_signal_retain(t));
    assert_ok(ordo_waiter_wait(w, t, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &gone, NULL));
    assert_ok(ordo_signal_destroy(t));
    assert_ok(ordo_signal_wait(done, 4, test_deadline()));
    assert_int_equal(atomic_load(&reached.status), ORDO_OK);
    assert_int_equal(atomic_load(&late.status), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&gone.status), ORDO_ERR_CANCELLED);
    /* Registering on a destroyed signal is refused. */
    rec_t never;
    rec_init(&never, NULL, NULL);
    ordo_wait_id_t id = 77;
    assert_status(ordo_waiter_wait(w, t, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &never, &id),
                  ORDO_ERR_DESTROYED);
    assert_int_equal(id, 0);
    wait_idle(w);
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.registered, 4);
    assert_int_equal(m.fired, 4);
    assert_int_equal(m.failed, 3);
    assert_int_equal(m.pending, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&never.calls), 0);
    assert_ok(ordo_signal_release(t));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

/* A callback whose status is not ORDO_OK reads why in ordo_error_message():
 * the failure's own text, a destroy, a deadline. An inline one leaves the
 * message of the call it ran in (here a successful ordo_signal_fail, after
 * a refused call) alone. */
static void callbacks_read_why_their_wait_ended(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0), *t = test_signal_make(0), *u = test_signal_make(0);
    rec_t failed, inline_failed, timed_out, gone, aborted;
    rec_t *all[] = {&failed, &inline_failed, &timed_out, &gone, &aborted};
    for (size_t i = 0; i < 5; ++i) {
        rec_init(all[i], NULL, NULL);
    }
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &failed, NULL));
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn,
                               &inline_failed, NULL));
    assert_ok(ordo_waiter_wait(w, t, 1, ordo_deadline_after_ms(1), 0, rec_fn, &timed_out, NULL));
    assert_ok(ordo_waiter_wait(w, u, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &gone, NULL));
    assert_status(ordo_signal_advance(NULL, 1), ORDO_ERR_INVALID_HANDLE);
    char before[160];
    snprintf(before, sizeof before, "%s", ordo_error_message());
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, "decoder: bad frame 7"));
    assert_string_equal(ordo_error_message(), before);
    assert_string_equal(inline_failed.message, "decoder: bad frame 7");
    assert_ok(ordo_signal_destroy(u));
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&failed.calls) + atomic_load(&timed_out.calls) + atomic_load(&gone.calls) <
           3) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    assert_string_equal(failed.message, "decoder: bad frame 7");
    assert_int_equal(atomic_load(&timed_out.status), ORDO_ERR_TIMEOUT);
    assert_non_null(strstr(timed_out.message, "deadline passed"));
    assert_int_equal(atomic_load(&gone.status), ORDO_ERR_CANCELLED);
    assert_non_null(strstr(gone.message, "signal was destroyed"));
    assert_ok(ordo_waiter_wait(w, t, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &aborted, NULL));
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&aborted.status), ORDO_ERR_CANCELLED);
    assert_non_null(strstr(aborted.message, "waiter was destroyed"));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(t));
}

/* A host task whose successful call ran an inline callback (which reads
 * its own message, the thread's put back after) and that then fails with
 * no message of its own: its stream's failure reads the plain text, not
 * the text the callback's message was kept from. */
static ordo_status_t fail_a_signal_then_fail_bare(void *ctx) {
    assert_ok(ordo_signal_fail(ctx, ORDO_ERR_ABORTED, "the task's signal"));
    return ORDO_ERR_ABORTED;
}

static void a_callback_inside_a_task_leaves_no_message_of_the_task(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    rec_t r;
    rec_init(&r, NULL, NULL);
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &r, NULL));
    ordo_device_t *device = NULL;
    assert_ok(ordo_device_open("cpu:0", &device));
    ordo_stream_t *stream = NULL;
    assert_ok(ordo_stream_create(device, 0, &stream));
    assert_ok(ordo_stream_host_task(stream, fail_a_signal_then_fail_bare, s));
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
    assert_string_equal(r.message, "the task's signal");
    const char *message = ordo_error_message();
    const char *tail = "returned ORDO_ERR_ABORTED";
    if (strlen(message) < strlen(tail) ||
        strcmp(message + strlen(message) - strlen(tail), tail) != 0) {
        fail_msg("the stream's failure reads \"%s\"", message);
    }
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_device_release(device));
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
}

/* ---- events -------------------------------------------------------------- */

static ordo_status_t fail_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void event_waits(void **state) {
    (void)state;
    ordo_device_t *device;
    assert_ok(ordo_device_open(test_device_name(), &device));
    ordo_stream_t *stream;
    assert_ok(ordo_stream_create(device, 0, &stream));
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *gate = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic uint64_t counter = 0;
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    /* Never recorded: no point to wait for. */
    rec_t r;
    rec_init(&r, done, &counter);
    assert_status(ordo_waiter_wait_event(w, event, ORDO_DEADLINE_NEVER, 0, rec_fn, &r, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    /* The stream waits on a gate; the event is its next point. */
    assert_ok(ordo_stream_wait(stream, gate, 1));
    assert_ok(ordo_event_record(event, stream));
    assert_ok(ordo_waiter_wait_event(w, event, test_deadline(), 0, rec_fn, &r, NULL));
    /* The wait captured the point: destroying the event changes nothing. */
    assert_ok(ordo_event_destroy(event));
    test_sleep_ms(5);
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_int_equal(atomic_load(&r.status), ORDO_OK);
    /* A stream failure before the point reaches the callback. */
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    assert_ok(ordo_stream_wait(stream, gate, 2));
    assert_ok(ordo_stream_host_task(stream, fail_task, NULL));
    assert_ok(ordo_event_record(event, stream));
    rec_t f;
    rec_init(&f, done, &counter);
    assert_ok(
        ordo_waiter_wait_event(w, event, test_deadline(), ORDO_WAIT_INLINE, rec_fn, &f, NULL));
    assert_ok(ordo_signal_advance(gate, 2));
    assert_ok(ordo_signal_wait(done, 2, test_deadline()));
    assert_int_equal(atomic_load(&f.status), ORDO_ERR_ABORTED);
    assert_non_null(strstr(f.message, "ORDO_ERR_ABORTED")); /* the stream's failure */
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_device_release(device));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_signal_destroy(done));
}

/* ---- cancellation ----------------------------------------------------------- */

static void cancel_prevents_a_pending_wait(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    rec_t r, q;
    rec_init(&r, NULL, NULL);
    rec_init(&q, NULL, NULL);
    ordo_wait_id_t id, qid;
    /* A deadline close enough to pass during the sleep below; should this
     * thread be held up past it before the cancel (a loaded machine), the
     * timeout has run (the cancel comes too late, or after the callback,
     * when the id is over), and the round is taken again with a later one. */
    ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
    uint32_t ms = 5;
    uint32_t timed_out_first = 0;
    for (; result != ORDO_CANCEL_PREVENTED; ms *= 4) {
        assert_true(ms <= 5 * 4 * 4 * 4 * 4);
        rec_init(&r, NULL, NULL);
        assert_ok(ordo_waiter_wait(w, s, 1, ordo_deadline_after_ms(ms), 0, rec_fn, &r, &id));
        result = ORDO_CANCEL_TOO_LATE;
        ordo_status_t st = ordo_waiter_cancel(w, id, 1, &result);
        if (st == ORDO_ERR_NOT_FOUND) {
            result = ORDO_CANCEL_TOO_LATE; /* its callback had completed */
        } else {
            assert_ok(st);
        }
        if (result != ORDO_CANCEL_PREVENTED) {
            wait_idle(w);
            assert_int_equal(atomic_load(&r.calls), 1);
            assert_int_equal(atomic_load(&r.status), ORDO_ERR_TIMEOUT);
            ++timed_out_first;
        }
    }
    ms /= 4;
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &q, &qid));
    assert_ok(ordo_waiter_cancel(w, qid, 0, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    /* Neither the deadline nor the signal runs them now. */
    test_sleep_ms(2 * ms);
    assert_ok(ordo_signal_advance(s, 1));
    wait_idle(w);
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_int_equal(atomic_load(&q.calls), 0);
    /* A second cancel, before or after the slot is reused, is refused. */
    assert_status(ordo_waiter_cancel(w, id, 0, &result), ORDO_ERR_NOT_FOUND);
    assert_non_null(strstr(ordo_error_message(), "cancelled"));
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.cancelled, 2);
    assert_int_equal(m.timed_out, timed_out_first);
    assert_int_equal(m.pending, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
}

/* The message of a refused cancel names the id (as %llx) and says text. */
#define assert_message_is_over(id, text)                                                           \
    do {                                                                                           \
        char expected[256];                                                                        \
        snprintf(expected, sizeof expected, "ordo_waiter_cancel: wait 0x%llx %s",                  \
                 (unsigned long long)(id), text);                                                  \
        if (!strstr(ordo_error_message(), expected)) {                                             \
            fail_msg("message \"%s\" lacks \"%s\"", ordo_error_message(), expected);               \
        }                                                                                          \
    } while (0)

static void stale_ids_are_not_found(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(1);
    rec_t r;
    rec_init(&r, NULL, NULL);
    ordo_wait_id_t first;
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &r, &first));
    assert_int_equal(atomic_load(&r.calls), 1);
    ordo_cancel_result_t result;
    assert_status(ordo_waiter_cancel(w, first, 1, &result), ORDO_ERR_NOT_FOUND);
    assert_message_is_over(first, "is over: its callback has completed");
    /* The slot is reused under a new generation: the old id stays over
     * (its slot still knows how it ended), the new one is live. */
    ordo_wait_id_t second;
    assert_ok(ordo_waiter_wait(w, s, 2, ORDO_DEADLINE_NEVER, 0, rec_fn, &r, &second));
    assert_int_equal((uint32_t)second, (uint32_t)first);
    assert_true(second != first);
    assert_status(ordo_waiter_cancel(w, first, 0, &result), ORDO_ERR_NOT_FOUND);
    assert_message_is_over(first, "is over: its callback has completed");
    assert_ok(ordo_waiter_cancel(w, second, 0, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_status(ordo_waiter_cancel(w, second, 0, &result), ORDO_ERR_NOT_FOUND);
    assert_message_is_over(second, "was cancelled already");
    /* Two waits on: how the first ended is no longer known, only that it
     * is over; a later generation was never issued. */
    assert_status(ordo_waiter_cancel(w, first, 0, &result), ORDO_ERR_NOT_FOUND);
    assert_message_is_over(first, "is over: its callback has completed or it was cancelled "
                                  "(which is no longer known");
    assert_status(ordo_waiter_cancel(w, second + ((uint64_t)1 << 32), 0, &result),
                  ORDO_ERR_NOT_FOUND);
    assert_non_null(strstr(ordo_error_message(), "was never issued by waiter"));
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
}

/* A worker callback that reports it started, then holds until a gate. */
typedef struct blocker {
    ordo_signal_t *started;
    ordo_signal_t *gate;
    _Atomic int returned;
    _Atomic int calls;
} blocker_t;

static void blocker_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    blocker_t *b = ctx;
    assert_int_equal(status, ORDO_OK);
    atomic_fetch_add(&b->calls, 1);
    assert_ok(ordo_signal_advance(b->started, 1));
    assert_ok(ordo_signal_wait(b->gate, 1, test_deadline()));
    test_sleep_ms(2); /* a canceller still waiting would return too early */
    atomic_store(&b->returned, 1);
}

typedef struct canceller {
    ordo_waiter_t *waiter;
    ordo_wait_id_t id;
    ordo_cancel_result_t result;
    ordo_status_t status;
    blocker_t *blocker;
    int returned_seen; /* the callback had returned when cancel did */
    _Atomic int back;
} canceller_t;

static void *cancel_and_wait(void *arg) {
    canceller_t *c = arg;
    c->status = ordo_waiter_cancel(c->waiter, c->id, 1, &c->result);
    c->returned_seen = atomic_load(&c->blocker->returned);
    atomic_store(&c->back, 1);
    return NULL;
}

static void cancel_too_late_waits_for_the_callback(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    blocker_t b = {test_signal_make(0), test_signal_make(0), 0, 0};
    ordo_wait_id_t id;
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, blocker_fn, &b, &id));
    /* A second wait resolved while the only worker is busy sits queued:
     * cancel still prevents it. */
    rec_t queued;
    rec_init(&queued, NULL, NULL);
    ordo_wait_id_t qid;
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &queued, &qid));
    assert_ok(ordo_signal_advance(s, 1));
    assert_ok(ordo_signal_wait(b.started, 1, test_deadline()));
    ordo_cancel_result_t result;
    assert_ok(ordo_waiter_cancel(w, qid, 1, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    /* Without waiting: TOO_LATE at once. */
    assert_ok(ordo_waiter_cancel(w, id, 0, &result));
    assert_int_equal(result, ORDO_CANCEL_TOO_LATE);
    assert_int_equal(atomic_load(&b.returned), 0);
    /* Waiting: returns only once the callback has. */
    canceller_t c = {w, id, ORDO_CANCEL_PREVENTED, ORDO_ERR_INTERNAL, &b, 0, 0};
    pthread_t t = test_thread_start(cancel_and_wait, &c);
    test_sleep_ms(20);
    assert_int_equal(atomic_load(&c.back), 0);
    assert_ok(ordo_signal_advance(b.gate, 1));
    pthread_join(t, NULL);
    assert_int_equal(c.status, ORDO_OK);
    assert_int_equal(c.result, ORDO_CANCEL_TOO_LATE);
    assert_true(c.returned_seen);
    wait_idle(w);
    assert_int_equal(atomic_load(&queued.calls), 0);
    assert_int_equal(atomic_load(&b.calls), 1);
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.fired, 1);
    assert_int_equal(m.cancelled, 1);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(b.started));
    assert_ok(ordo_signal_destroy(b.gate));
}

/* A callback that cancels itself (waiting), cancels another wait, and tries
 * to destroy its own waiter. */
typedef struct self_cancel {
    ordo_waiter_t *waiter;
    ordo_wait_id_t other;
    ordo_signal_t *done;
    ordo_cancel_result_t self_result;
    ordo_status_t self_status;
    ordo_cancel_result_t other_result;
    ordo_status_t destroy_status;
} self_cancel_t;

static void self_cancel_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    self_cancel_t *c = ctx;
    assert_int_equal(status, ORDO_OK);
    c->self_status = ordo_waiter_cancel(c->waiter, id, 1, &c->self_result);
    assert_ok(ordo_waiter_cancel(c->waiter, c->other, 1, &c->other_result));
    c->destroy_status = ordo_waiter_destroy(c->waiter);
    assert_ok(ordo_signal_advance(c->done, 1));
}

static void cancel_from_inside_a_callback(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; ++mode) {
        uint32_t flags = mode ? ORDO_WAIT_INLINE : 0;
        ordo_waiter_t *w = waiter_make(1);
        ordo_signal_t *s = test_signal_make(0);
        ordo_signal_t *other = test_signal_make(0);
        self_cancel_t c = {w,
                           0,
                           test_signal_make(0),
                           ORDO_CANCEL_PREVENTED,
                           ORDO_ERR_INTERNAL,
                           ORDO_CANCEL_TOO_LATE,
                           ORDO_OK};
        rec_t r;
        rec_init(&r, NULL, NULL);
        assert_ok(ordo_waiter_wait(w, other, 1, ORDO_DEADLINE_NEVER, flags, rec_fn, &r, &c.other));
        assert_ok(ordo_waiter_wait(w, s, 1, test_deadline(), flags, self_cancel_fn, &c, NULL));
        assert_ok(ordo_signal_advance(s, 1));
        assert_ok(ordo_signal_wait(c.done, 1, test_deadline()));
        assert_int_equal(c.self_status, ORDO_OK);
        assert_int_equal(c.self_result, ORDO_CANCEL_TOO_LATE);
        assert_int_equal(c.other_result, ORDO_CANCEL_PREVENTED);
        assert_int_equal(c.destroy_status, ORDO_ERR_BUSY);
        assert_ok(ordo_signal_advance(other, 1));
        wait_idle(w);
        assert_int_equal(atomic_load(&r.calls), 0);
        assert_ok(ordo_waiter_destroy(w));
        assert_ok(ordo_signal_destroy(s));
        assert_ok(ordo_signal_destroy(other));
        assert_ok(ordo_signal_destroy(c.done));
    }
}

/* Two inline waits time out together on the timer thread; the first one's
 * callback cancels the second, waiting for its callback. The second has not
 * started: the cancel must prevent it, not wait for a callback that this
 * very thread would run only afterwards. A gate callback holds the timer
 * thread until both are registered, so that both expire in one pass. No
 * cmocka assert runs off the test thread. */
typedef struct timer_pair {
    ordo_waiter_t *waiter;
    _Atomic int gate_entered;
    _Atomic int gate_open;
    _Atomic uint64_t second;
    _Atomic int first_done;
    _Atomic int first_status;
    _Atomic int cancel_status;
    _Atomic int cancel_result;
    _Atomic int second_calls;
} timer_pair_t;

static void timer_gate_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status;
    (void)id;
    timer_pair_t *p = ctx;
    atomic_store(&p->gate_entered, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&p->gate_open) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
}

static void timer_first_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    timer_pair_t *p = ctx;
    atomic_store(&p->first_status, (int)status);
    ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
    atomic_store(&p->cancel_status,
                 (int)ordo_waiter_cancel(p->waiter, atomic_load(&p->second), 1, &result));
    atomic_store(&p->cancel_result, (int)result);
    atomic_store(&p->first_done, 1);
}

static void timer_second_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status;
    (void)id;
    timer_pair_t *p = ctx;
    atomic_fetch_add(&p->second_calls, 1);
}

static void cancel_from_a_timer_callback_prevents_the_next(void **state) {
    (void)state;
    timer_pair_t *p = calloc(1, sizeof *p); /* leaked if the timer thread hangs */
    assert_non_null(p);
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    p->waiter = w;
    atomic_store(&p->cancel_status, -1);
    assert_ok(
        ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NOW, ORDO_WAIT_INLINE, timer_gate_fn, p, NULL));
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&p->gate_entered)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    /* Both deadlines are past, the first earlier. */
    ordo_wait_id_t second = 0;
    assert_ok(ordo_waiter_wait(w, s, 1, 1, ORDO_WAIT_INLINE, timer_first_fn, p, NULL));
    assert_ok(ordo_waiter_wait(w, s, 1, 2, ORDO_WAIT_INLINE, timer_second_fn, p, &second));
    atomic_store(&p->second, second);
    atomic_store(&p->gate_open, 1);
    while (!atomic_load(&p->first_done) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    if (!atomic_load(&p->first_done)) {
        /* The timer thread waits for itself: nothing can end it. */
        fail_msg("the first callback never returned: its cancel waits for a callback that "
                 "only its own thread would run");
    }
    assert_int_equal(atomic_load(&p->first_status), ORDO_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&p->cancel_status), ORDO_OK);
    assert_int_equal(atomic_load(&p->cancel_result), ORDO_CANCEL_PREVENTED);
    wait_idle(w);
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.timed_out, 2);
    assert_int_equal(m.cancelled, 1);
    assert_int_equal(m.pending, 0);
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&p->second_calls), 0);
    assert_ok(ordo_signal_destroy(s));
    free(p);
}

/* ---- destroy with pending waits ---------------------------------------- */

typedef struct destroy_rec {
    _Atomic int calls;
    _Atomic int cancelled;
    _Atomic int refused;
    ordo_waiter_t *waiter;
    ordo_signal_t *signal;
    pthread_t destroyer;
    _Atomic int on_destroyer;
} destroy_rec_t;

static void destroy_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    destroy_rec_t *d = ctx;
    atomic_fetch_add(&d->calls, 1);
    if (status == ORDO_ERR_CANCELLED) {
        atomic_fetch_add(&d->cancelled, 1);
    }
    if (pthread_equal(pthread_self(), d->destroyer)) {
        atomic_fetch_add(&d->on_destroyer, 1);
    }
    /* Registering while the waiter is being destroyed is refused. */
    ordo_wait_id_t again = 5;
    if (ordo_waiter_wait(d->waiter, d->signal, 1, ORDO_DEADLINE_NEVER, 0, destroy_fn, d, &again) ==
            ORDO_ERR_DESTROYED &&
        again == 0) {
        atomic_fetch_add(&d->refused, 1);
    }
}

/* Destroying a waiter from inside a callback that runs among timepoint
 * callbacks (here another waiter's inline callback): a wait of the
 * destroyed waiter may be due on the same signal, its timepoint queued
 * behind the running callback, so a destroy that waited for it would wait
 * forever. It is refused instead; nothing is done. */
typedef struct nested_destroy {
    ordo_waiter_t *victim;
    ordo_signal_t *done;
    _Atomic int result;
} nested_destroy_t;

static void nested_destroy_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status;
    (void)id;
    nested_destroy_t *d = ctx;
    atomic_store(&d->result, (int)ordo_waiter_destroy(d->victim));
    assert_ok(ordo_signal_advance(d->done, 1));
}

static void *signal_one(void *arg) {
    assert_ok(ordo_signal_advance(arg, 1));
    return NULL;
}

static void destroy_from_a_timepoint_callback_is_refused(void **state) {
    (void)state;
    ordo_waiter_t *w1 = waiter_make(1);
    ordo_waiter_t *w2 = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    nested_destroy_t d = {w2, done, -1};
    rec_t r;
    rec_init(&r, NULL, NULL);
    assert_ok(ordo_waiter_wait(w1, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, nested_destroy_fn,
                               &d, NULL));
    assert_ok(ordo_waiter_wait(w2, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &r, NULL));
    /* Signalled on another thread, so that a hang fails the wait below. */
    pthread_t t = test_thread_start(signal_one, s);
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&d.result), ORDO_ERR_BUSY);
    /* w2 is intact: its wait fired normally once the callback returned. */
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_int_equal(atomic_load(&r.status), ORDO_OK);
    assert_ok(ordo_waiter_destroy(w2));
    assert_ok(ordo_waiter_destroy(w1));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(done));
}

static void destroy_cancels_pending_waits(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(2);
    ordo_signal_t *s = test_signal_make(0);
    const int n = (int)test_scaled(2000);
    destroy_rec_t worker = {0, 0, 0, w, s, pthread_self(), 0};
    destroy_rec_t in = {0, 0, 0, w, s, pthread_self(), 0};
    for (int i = 0; i < n; ++i) {
        ordo_deadline_t deadline = i % 2 ? ORDO_DEADLINE_NEVER : test_deadline();
        assert_ok(ordo_waiter_wait(w, s, 1 + (uint64_t)i, deadline, 0, destroy_fn, &worker, NULL));
        assert_ok(ordo_waiter_wait(w, s, 1 + (uint64_t)i, deadline, ORDO_WAIT_INLINE, destroy_fn,
                                   &in, NULL));
    }
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.pending, 2 * (uint64_t)n);
    assert_ok(ordo_waiter_destroy(w));
    /* Every callback ran once, with CANCELLED; inline ones on this thread,
     * worker ones on a worker; each registration attempt was refused. */
    assert_int_equal(atomic_load(&worker.calls), n);
    assert_int_equal(atomic_load(&worker.cancelled), n);
    assert_int_equal(atomic_load(&worker.refused), n);
    assert_int_equal(atomic_load(&worker.on_destroyer), 0);
    assert_int_equal(atomic_load(&in.calls), n);
    assert_int_equal(atomic_load(&in.cancelled), n);
    assert_int_equal(atomic_load(&in.on_destroyer), n);
    /* The waiter let go of its references: the signal is ours alone. */
    assert_ok(ordo_signal_destroy(s));
}

/* A destroy that meets a wait whose signal was raised before it, while the
 * raising thread has not run the due timepoints that far (held here by a
 * timepoint armed before the waits, whose callback returns only once both
 * waits' callbacks ran): the wait was decided, not pending, so the
 * callbacks get the raise's outcome, not ORDO_ERR_CANCELLED. */
typedef struct due_gate {
    ordo_signal_t *signal;
    int fail; /* the raise is a failure */
    _Atomic int entered;
    rec_t *recs[2];
} due_gate_t;

static void due_gate_fn(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    due_gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    ordo_deadline_t deadline = test_deadline();
    while ((atomic_load(&g->recs[0]->calls) == 0 || atomic_load(&g->recs[1]->calls) == 0) &&
           ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
}

static void *due_gate_raise(void *arg) {
    due_gate_t *g = arg;
    if (g->fail) {
        assert_ok(ordo_signal_fail(g->signal, ORDO_ERR_ABORTED, "raised before the destroy"));
    } else {
        assert_ok(ordo_signal_advance(g->signal, 1));
    }
    return NULL;
}

/* by_timer: no destroy; the waits' deadline passes while the raiser is
 * held, and the timer takes them (the gate opens once both ran). */
static void due_wait_decided(int fail, int by_timer) {
    ordo_waiter_t *w = waiter_make(1);
    rec_t inline_rec, worker_rec;
    rec_init(&inline_rec, NULL, NULL);
    rec_init(&worker_rec, NULL, NULL);
    due_gate_t g = {test_signal_make(0), fail, 0, {&inline_rec, &worker_rec}};
    ordo_timepoint_t gate = ORDO_TIMEPOINT_INIT;
    assert_ok(ordo_timepoint_arm(&gate, g.signal, 1, due_gate_fn, &g));
    ordo_deadline_t soon = by_timer ? ordo_deadline_after_ms(20) : ORDO_DEADLINE_NEVER;
    assert_ok(ordo_waiter_wait(w, g.signal, 1, soon, ORDO_WAIT_INLINE, rec_fn, &inline_rec, NULL));
    assert_ok(ordo_waiter_wait(w, g.signal, 1, by_timer ? soon : test_deadline(), 0, rec_fn,
                               &worker_rec, NULL));
    pthread_t raiser = test_thread_start(due_gate_raise, &g);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g.entered)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    if (!by_timer) {
        assert_ok(ordo_waiter_destroy(w)); /* returns once the raiser let go */
    }
    pthread_join(raiser, NULL);
    int expected = fail ? ORDO_ERR_ABORTED : ORDO_OK;
    assert_int_equal(atomic_load(&inline_rec.calls), 1);
    assert_int_equal(atomic_load(&inline_rec.status), expected);
    assert_int_equal(atomic_load(&worker_rec.calls), 1);
    assert_int_equal(atomic_load(&worker_rec.status), expected);
    if (by_timer) {
        ordo_waiter_metrics_t m;
        assert_ok(ordo_waiter_metrics(w, &m));
        assert_int_equal(m.timed_out, 0);
        assert_int_equal(m.fired, 2);
        assert_ok(ordo_waiter_destroy(w));
    }
    assert_ok(ordo_signal_destroy(g.signal));
}

static void a_destroy_delivers_what_a_due_wait_met(void **state) {
    (void)state;
    for (int fail = 0; fail < 2; ++fail) {
        due_wait_decided(fail, 0);
    }
}

/* The same for the timer: a deadline that passes after the raise, while
 * the raising thread has not run the waits' timepoints yet, is not the
 * deadline passing first. */
static void a_deadline_after_the_raise_delivers_what_the_wait_met(void **state) {
    (void)state;
    for (int fail = 0; fail < 2; ++fail) {
        due_wait_decided(fail, 1);
    }
}

/* ---- metrics -------------------------------------------------------------- */

static void metrics_are_exact(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *f = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic uint64_t counter = 0;
    enum { N = 10 };
    rec_t r[N];
    ordo_wait_id_t ids[N];
    for (int i = 0; i < N; ++i) {
        rec_init(&r[i], done, &counter);
    }
    /* 3 reach, 2 fail, 2 time out, 2 cancelled, 1 stays pending. */
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, rec_fn, &r[i], &ids[i]));
    }
    for (int i = 3; i < 5; ++i) {
        assert_ok(ordo_waiter_wait(w, f, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, rec_fn, &r[i],
                                   &ids[i]));
    }
    for (int i = 5; i < 7; ++i) {
        assert_ok(
            ordo_waiter_wait(w, s, 100, ordo_deadline_after_ms(1), 0, rec_fn, &r[i], &ids[i]));
    }
    for (int i = 7; i < 10; ++i) {
        assert_ok(ordo_waiter_wait(w, s, 100, ORDO_DEADLINE_NEVER, 0, rec_fn, &r[i], &ids[i]));
    }
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.registered, 10);
    ordo_cancel_result_t result;
    for (int i = 7; i < 9; ++i) {
        assert_ok(ordo_waiter_cancel(w, ids[i], 0, &result));
        assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    }
    assert_ok(ordo_signal_advance(s, 1));
    assert_ok(ordo_signal_fail(f, ORDO_ERR_DEVICE, "device lost"));
    assert_ok(ordo_signal_wait(done, 7, test_deadline()));
    wait_idle(w);
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.registered, 10);
    assert_int_equal(m.fired, 5);
    assert_int_equal(m.failed, 2);
    assert_int_equal(m.timed_out, 2);
    assert_int_equal(m.cancelled, 2);
    assert_int_equal(m.aborted, 0);
    assert_int_equal(m.pending, 1);
    assert_int_equal(m.running, 0);
    for (int i = 3; i < 5; ++i) {
        assert_int_equal(atomic_load(&r[i].status), ORDO_ERR_DEVICE);
    }
    assert_ok(ordo_waiter_destroy(w));
    assert_int_equal(atomic_load(&r[9].status), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(f));
    assert_ok(ordo_signal_destroy(done));
}

/* ---- bad input ------------------------------------------------------------- */

static void noop_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)ctx;
    (void)status;
    (void)id;
}

static void bad_input_is_refused(void **state) {
    (void)state;
    ordo_waiter_t *w = NULL;
    ordo_waiter_config_t config = {0};
    assert_status(ordo_waiter_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_create(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_create(&config, &w), ORDO_ERR_INVALID_ARGUMENT);
    assert_null(w);
    config.worker_threads = ORDO_WAITER_MAX_WORKERS + 1;
    assert_status(ordo_waiter_create(&config, &w), ORDO_ERR_OUT_OF_RANGE);
    assert_ok(ordo_waiter_create(NULL, &w));

    ordo_signal_t *s = test_signal_make(0);
    /* Not a waiter: a live object of another type. */
    ordo_waiter_t *bogus = (ordo_waiter_t *)(void *)s;
    ordo_wait_id_t id = 9;
    ordo_cancel_result_t result;
    ordo_waiter_metrics_t m;
    assert_status(ordo_waiter_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_destroy(bogus), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait(NULL, s, 1, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_int_equal(id, 0);
    assert_status(ordo_waiter_wait(bogus, s, 1, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait(w, NULL, 1, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait(w, (ordo_signal_t *)(void *)w, 1, ORDO_DEADLINE_NEVER, 0,
                                   noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, NULL, NULL, &id),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0x10, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_wait(w, s, ORDO_SIGNAL_VALUE_MAX + 1, ORDO_DEADLINE_NEVER, 0, noop_fn,
                                   NULL, &id),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_int_equal(id, 0);

    assert_status(ordo_waiter_wait_event(NULL, NULL, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait_event(w, NULL, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_wait_event(w, (ordo_event_t *)(void *)s, ORDO_DEADLINE_NEVER, 0,
                                         noop_fn, NULL, &id),
                  ORDO_ERR_INVALID_HANDLE);

    assert_status(ordo_waiter_cancel(NULL, 1, 0, &result), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_cancel(bogus, 1, 0, &result), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_cancel(w, 0, 0, &result), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_cancel(w, 1, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
    /* Never issued: a slot beyond the slab, a generation never used, and
     * generation 0. */
    assert_status(ordo_waiter_cancel(w, ((uint64_t)7 << 32) | 0xfffffff0u, 0, &result),
                  ORDO_ERR_NOT_FOUND);
    assert_non_null(strstr(ordo_error_message(), "never issued"));
    assert_ok(ordo_waiter_wait(w, s, 1, ORDO_DEADLINE_NEVER, 0, noop_fn, NULL, &id));
    const ordo_wait_id_t never[] = {id + ((uint64_t)7 << 32), 5 /* generation 0 */, id + 1};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; ++i) {
        assert_status(ordo_waiter_cancel(w, never[i], 0, &result), ORDO_ERR_NOT_FOUND);
        assert_non_null(strstr(ordo_error_message(), "was never issued by waiter"));
    }
    /* An id of another waiter is not one of this waiter's. */
    ordo_waiter_t *other = waiter_make(1);
    assert_status(ordo_waiter_cancel(other, id, 0, &result), ORDO_ERR_NOT_FOUND);
    assert_non_null(strstr(ordo_error_message(), "was never issued by waiter"));
    assert_ok(ordo_waiter_destroy(other));
    assert_ok(ordo_waiter_cancel(w, id, 0, &result));

    assert_status(ordo_waiter_metrics(NULL, &m), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_metrics(bogus, &m), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_waiter_metrics(w, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.registered, 1);
    assert_int_equal(m.cancelled, 1);
    assert_ok(ordo_waiter_destroy(w));
    assert_ok(ordo_signal_destroy(s));
}

/* ---- scale and stress ----------------------------------------------------- */

static void many_pending_waits(void **state) {
    (void)state;
    ordo_waiter_t *w = waiter_make(1);
    const uint64_t n = test_scaled(100000);
    enum { SIGNALS = 16 };
    ordo_signal_t *s[SIGNALS];
    for (int i = 0; i < SIGNALS; ++i) {
        s[i] = test_signal_make(0);
    }
    counter_t c = {0, test_signal_make(0)};
    ordo_wait_id_t *ids = calloc(n, sizeof *ids);
    assert_non_null(ids);
    const ordo_deadline_t far = ordo_deadline_after_ms(3600u * 1000u);
    for (uint64_t i = 0; i < n; ++i) {
        /* Far deadlines: in the heap, never reached however long the
         * registering takes. */
        assert_ok(ordo_waiter_wait(w, s[i % SIGNALS], 1 + i / SIGNALS, far,
                                   i % 3 ? 0 : ORDO_WAIT_INLINE, count_fn, &c, &ids[i]));
    }
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.pending, n);
    /* Cancel every fourth, fire the rest. */
    uint64_t cancelled = 0;
    for (uint64_t i = 0; i < n; i += 4) {
        ordo_cancel_result_t result;
        assert_ok(ordo_waiter_cancel(w, ids[i], 0, &result));
        assert_int_equal(result, ORDO_CANCEL_PREVENTED);
        ++cancelled;
    }
    for (int i = 0; i < SIGNALS; ++i) {
        assert_ok(ordo_signal_advance(s[i], n));
    }
    assert_ok(ordo_signal_wait(c.done, n - cancelled, test_deadline()));
    wait_idle(w);
    assert_ok(ordo_waiter_metrics(w, &m));
    assert_int_equal(m.fired, n - cancelled);
    assert_int_equal(m.cancelled, cancelled);
    assert_int_equal(m.pending, 0);
    assert_int_equal(atomic_load(&c.calls), n - cancelled);
    assert_ok(ordo_waiter_destroy(w));
    for (int i = 0; i < SIGNALS; ++i) {
        assert_ok(ordo_signal_destroy(s[i]));
    }
    assert_ok(ordo_signal_destroy(c.done));
    free(ids);
}

/* Signals 0 and 1 fail at the end, signal 2 is destroyed, the rest reach
 * STRESS_TOP. */
enum { STRESS_SIGNALS = 32, STRESS_TOP = 64, STRESS_FAILING = 2, STRESS_DESTROYED = 2 };

typedef struct stress_rec {
    _Atomic int calls;
    _Atomic int prevented;
    _Atomic int status;
    ordo_wait_id_t id;          /* written through out_id, before any callback */
    _Atomic uint64_t published; /* the id, once ordo_waiter_wait returned */
    int signal;
} stress_rec_t;

typedef struct stress {
    ordo_waiter_t *waiter;
    ordo_signal_t *signals[STRESS_SIGNALS];
    ordo_signal_t *resolved_signal;
    _Atomic uint64_t resolved;
    stress_rec_t *recs;
    uint64_t n;
    _Atomic uint64_t next;          /* registration cursor */
    _Atomic int registrars_running; /* producers keep going until 0 */
    _Atomic int producers_started;
    _Atomic int stop_cancellers;
    _Atomic uint64_t violations;
    _Atomic uint64_t too_late_waited;
} stress_t;

static stress_t *stress_ctx;

static void stress_resolved(stress_t *st) {
    uint64_t n = atomic_fetch_add(&st->resolved, 1) + 1;
    assert_ok(ordo_signal_advance(st->resolved_signal, n));
}

static void stress_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    stress_rec_t *r = ctx;
    stress_t *st = stress_ctx;
    if (atomic_fetch_add(&r->calls, 1) != 0 || id != r->id || atomic_load(&r->prevented)) {
        atomic_fetch_add(&st->violations, 1);
    }
    atomic_store(&r->status, (int)status);
    stress_resolved(st);
}

static void *stress_register(void *arg) {
    stress_t *st = arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&seed;
    for (;;) {
        uint64_t i = atomic_fetch_add(&st->next, 1);
        if (i >= st->n) {
            break;
        }
        stress_rec_t *r = &st->recs[i];
        uint64_t x = test_rand(&seed);
        r->signal = (int)(x % STRESS_SIGNALS);
        ordo_signal_t *s = st->signals[r->signal];
        uint64_t current = 0;
        (void)ordo_signal_query(s, &current);
        /* Mostly just ahead of the signal, sometimes behind it. */
        uint64_t value = (x >> 8) % 8 == 0 ? current / 2 : current + 1 + (x >> 12) % 6;
        if (value > STRESS_TOP) {
            value = STRESS_TOP;
        }
        ordo_deadline_t deadline;
        switch ((x >> 20) % 3) {
        case 0:
            deadline = ORDO_DEADLINE_NEVER;
            break;
        case 1:
            deadline = ordo_deadline_after_ns(((x >> 24) % 20000) * 1000u);
            break;
        default:
            deadline = ordo_deadline_after_ms(1000);
            break;
        }
        uint32_t flags = (x >> 40) % 2 ? ORDO_WAIT_INLINE : 0;
        assert_ok(ordo_waiter_wait(st->waiter, s, value, deadline, flags, stress_fn, r, &r->id));
        atomic_store(&r->published, r->id);
    }
    atomic_fetch_sub(&st->registrars_running, 1);
    return NULL;
}

static void *stress_cancel(void *arg) {
    stress_t *st = arg;
    uint64_t seed = 0x2545f4914f6cdd1dull ^ (uint64_t)(uintptr_t)&seed;
    while (!atomic_load(&st->stop_cancellers)) {
        uint64_t x = test_rand(&seed);
        uint64_t limit = atomic_load(&st->next);
        if (limit > st->n) {
            limit = st->n;
        }
        if (limit == 0 || x % 3 != 0) {
            sched_yield();
            continue;
        }
        stress_rec_t *r = &st->recs[(x >> 8) % limit];
        ordo_wait_id_t id = atomic_load(&r->published);
        if (!id) {
            continue;
        }
        int wait = (x >> 40) % 2;
        ordo_cancel_result_t result;
        ordo_status_t status = ordo_waiter_cancel(st->waiter, id, wait, &result);
        if (status == ORDO_OK && result == ORDO_CANCEL_PREVENTED) {
            if (atomic_fetch_add(&r->prevented, 1) != 0 || atomic_load(&r->calls) != 0) {
                atomic_fetch_add(&st->violations, 1);
            }
            stress_resolved(st);
        } else if (status == ORDO_OK) {
            /* Too late: the callback started; if we waited, it is over. */
            if (wait) {
                atomic_fetch_add(&st->too_late_waited, 1);
                if (atomic_load(&r->calls) != 1) {
                    atomic_fetch_add(&st->violations, 1);
                }
            }
        } else if (status != ORDO_ERR_NOT_FOUND) {
            atomic_fetch_add(&st->violations, 1);
        }
    }
    return NULL;
}

/* Two producers raise every signal, each at its own pace, while waits are
 * registered (several producers may signal one timeline). */
static void *stress_produce(void *arg) {
    stress_t *st = arg;
    int pace = (int)atomic_fetch_add(&st->producers_started, 1) + 2;
    uint64_t value = 0;
    while (atomic_load(&st->registrars_running) && value < STRESS_TOP - 1) {
        ++value;
        for (int i = 0; i < STRESS_SIGNALS; ++i) {
            assert_ok(ordo_signal_advance(st->signals[i], value));
        }
        test_sleep_ms((unsigned)pace);
    }
    return NULL;
}

/* The end, once every wait is registered: every wait resolves, a few
 * signals by failing, one by being destroyed. */
static void stress_finish(stress_t *st) {
    for (int i = 0; i < STRESS_SIGNALS; ++i) {
        if (i < STRESS_FAILING) {
            assert_ok(ordo_signal_fail(st->signals[i], ORDO_ERR_ABORTED, "stress failure"));
        } else if (i == STRESS_DESTROYED) {
            assert_ok(ordo_signal_destroy(st->signals[i]));
        } else {
            assert_ok(ordo_signal_advance(st->signals[i], STRESS_TOP));
        }
    }
}

static void stress_run(uint32_t workers) {
    stress_t st;
    memset(&st, 0, sizeof st);
    stress_ctx = &st;
    st.waiter = waiter_make(workers);
    st.n = test_scaled(100000);
    st.recs = calloc(st.n, sizeof *st.recs);
    assert_non_null(st.recs);
    for (int i = 0; i < STRESS_SIGNALS; ++i) {
        st.signals[i] = test_signal_make(0);
    }
    st.resolved_signal = test_signal_make(0);
    enum { REGISTRARS = 2, CANCELLERS = 3 };
    atomic_store(&st.registrars_running, REGISTRARS);
    pthread_t registrars[REGISTRARS], cancellers[CANCELLERS];
    for (int i = 0; i < REGISTRARS; ++i) {
        registrars[i] = test_thread_start(stress_register, &st);
    }
    for (int i = 0; i < CANCELLERS; ++i) {
        cancellers[i] = test_thread_start(stress_cancel, &st);
    }
    pthread_t producers[2];
    for (int i = 0; i < 2; ++i) {
        producers[i] = test_thread_start(stress_produce, &st);
    }
    for (int i = 0; i < REGISTRARS; ++i) {
        pthread_join(registrars[i], NULL);
    }
    for (int i = 0; i < 2; ++i) {
        pthread_join(producers[i], NULL);
    }
    stress_finish(&st);
    assert_ok(ordo_signal_wait(st.resolved_signal, st.n, test_deadline()));
    atomic_store(&st.stop_cancellers, 1);
    for (int i = 0; i < CANCELLERS; ++i) {
        pthread_join(cancellers[i], NULL);
    }
    wait_idle(st.waiter);
    assert_int_equal(atomic_load(&st.violations), 0);
    uint64_t calls = 0, prevented = 0, timeouts = 0, failures = 0;
    for (uint64_t i = 0; i < st.n; ++i) {
        stress_rec_t *r = &st.recs[i];
        int c = atomic_load(&r->calls);
        int p = atomic_load(&r->prevented);
        assert_int_equal(c + p, 1);
        calls += (uint64_t)c;
        prevented += (uint64_t)p;
        if (c) {
            int status = atomic_load(&r->status);
            timeouts += status == ORDO_ERR_TIMEOUT;
            failures += status == ORDO_ERR_ABORTED || status == ORDO_ERR_CANCELLED;
            assert_true(status == ORDO_OK || status == ORDO_ERR_TIMEOUT ||
                        (status == ORDO_ERR_ABORTED && r->signal < STRESS_FAILING) ||
                        (status == ORDO_ERR_CANCELLED && r->signal == STRESS_DESTROYED));
        }
    }
    ordo_waiter_metrics_t m;
    assert_ok(ordo_waiter_metrics(st.waiter, &m));
    assert_int_equal(m.registered, st.n);
    assert_int_equal(m.pending, 0);
    assert_int_equal(m.running, 0);
    assert_int_equal(m.fired + m.timed_out, calls);
    assert_int_equal(m.timed_out, timeouts);
    assert_int_equal(m.failed, failures);
    assert_int_equal(m.cancelled, prevented);
    assert_int_equal(m.aborted, 0);
    print_message(
        "stress (%u workers): %llu waits, %llu fired, %llu timed out, %llu failed, %llu cancelled, "
        "%llu waited too late\n",
        workers, (unsigned long long)st.n, (unsigned long long)m.fired,
        (unsigned long long)m.timed_out, (unsigned long long)m.failed,
        (unsigned long long)m.cancelled, (unsigned long long)atomic_load(&st.too_late_waited));
    assert_ok(ordo_waiter_destroy(st.waiter));
    for (int i = 0; i < STRESS_SIGNALS; ++i) {
        if (i != STRESS_DESTROYED) {
            assert_ok(ordo_signal_destroy(st.signals[i]));
        }
    }
    assert_ok(ordo_signal_destroy(st.resolved_signal));
    free(st.recs);
}

static void stress_waits_cancels_and_producers(void **state) {
    (void)state;
    stress_run(1);
    stress_run(3);
}

/* ---- bad input: waiter.h (tests/refusal.h) */

static void on_wait(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status, (void)id;
    ++*(int *)ctx;
}

static void waiter_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_waiter_t *waiter = NULL;
    ordo_waiter_config_t no_workers = {0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, waiter, ordo_waiter_create, &no_workers, &waiter);
    /* A count above its maximum is out of range, as everywhere (status.h). */
    ordo_waiter_config_t too_many_workers = {ORDO_WAITER_MAX_WORKERS + 1, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, waiter, ordo_waiter_create, &too_many_workers, &waiter);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_waiter_create, NULL, NULL);
    assert_ok(ordo_waiter_create(NULL, &waiter));
    int calls = 0;
    ordo_wait_id_t id = 5;
    /* Destroyed signal. */
    ordo_signal_t *dead = test_signal_make(0);
    assert_ok(ordo_signal_retain(dead));
    assert_ok(ordo_signal_destroy(dead));
    REFUSED_CLEARS(ORDO_ERR_DESTROYED, id, ordo_waiter_wait, waiter, dead, 1, ORDO_DEADLINE_NEVER,
                   0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    assert_ok(ordo_signal_release(dead));
    id = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait, waiter, f.signal, 1,
                   ORDO_DEADLINE_NEVER, UINT32_MAX, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    /* Events: not recorded, not an event, bad flags, no callback. */
    ordo_event_t *event = NULL;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &event));
    id = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    assert_ok(ordo_event_record(event, f.s[0]));
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0x10, on_wait, &calls, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0, NULL, &calls, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_waiter_wait_event, AS(ordo_waiter_t, event),
                   event, ORDO_DEADLINE_NEVER, 0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    ordo_waiter_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_waiter_metrics, NULL, &m);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_waiter_metrics, AS(ordo_waiter_t, f.s[0]), &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_waiter_metrics, waiter, NULL);
    ordo_cancel_result_t result;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, result, ordo_waiter_cancel, waiter, UINT64_MAX, 0, &result);
    assert_ok(ordo_waiter_metrics(waiter, &m));
    assert_int_equal(m.registered, 0);
    assert_ok(ordo_waiter_destroy(waiter));
    assert_int_equal(calls, 0);
    assert_ok(ordo_event_destroy(event));
    refusal_fixture_free(&f);
}

static void wait_recorded(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    *(ordo_status_t *)ctx = status;
}

/* docs/ERRORS.md, "Objects owned by other objects": a use that is defined
 * stays defined (tests/refusal.h). */
static void signal_destroyed_under_an_async_wait_cancels_it(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    /* A signal destroyed under an asynchronous wait cancels the wait. */
    ordo_waiter_t *waiter = NULL;
    assert_ok(ordo_waiter_create(NULL, &waiter));
    ordo_signal_t *signal = test_signal_make(0);
    ordo_status_t outcome = ORDO_OK;
    assert_ok(ordo_waiter_wait(waiter, signal, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE,
                               wait_recorded, &outcome, NULL));
    assert_ok(ordo_signal_destroy(signal));
    assert_int_equal(outcome, ORDO_ERR_CANCELLED);
    assert_ok(ordo_waiter_destroy(waiter));
    refusal_fixture_free(&f);
}

/* A wait-any made of two inline waits on one signal, each callback
 * cancelling its sibling, while another thread raises the signal. When
 * the raise lands while the second wait arms its timepoint, the arm used
 * to collect the first wait's timepoint too and run its callback on the
 * registering thread, whose cancel of the second wait (not yet registered)
 * then spun for ever on that thread. A watchdog ends the process if a
 * round makes no progress within TEST_WAIT_MS. */
typedef struct sibling_race {
    ordo_waiter_t *waiter;
    ordo_signal_t *_Atomic signal;
    _Atomic ordo_wait_id_t ids[2];
    _Atomic int go, raised, progress, stop;
    pthread_t registering; /* the test's thread */
} sibling_race_t;

static sibling_race_t sibling;

static void sibling_cancel(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status, (void)id;
    int me = (int)(intptr_t)ctx;
    /* The second id is the waiter's plain write, on the registering
     * thread: read there only (the case that spun), not on the
     * producer's, where it would race the write. */
    if (me == 0 && !pthread_equal(pthread_self(), sibling.registering)) {
        return;
    }
    ordo_wait_id_t other = atomic_load(&sibling.ids[1 - me]);
    if (other) {
        ordo_cancel_result_t result;
        (void)ordo_waiter_cancel(sibling.waiter, other, false, &result);
    }
}

static void *sibling_producer(void *arg) {
    (void)arg;
    uint64_t seed = 7;
    for (int round = 1; !atomic_load(&sibling.stop); ++round) {
        while (atomic_load(&sibling.go) != round) {
            if (atomic_load(&sibling.stop)) {
                return NULL;
            }
        }
        /* A delay swept across the second wait's arm. */
        for (uint64_t i = 0, n = test_rand(&seed) % 64; i < n; ++i) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#else
            atomic_signal_fence(memory_order_seq_cst);
#endif
        }
        (void)ordo_signal_advance(atomic_load(&sibling.signal), 1);
        atomic_store(&sibling.raised, round);
    }
    return NULL;
}

static void *sibling_watchdog(void *arg) {
    (void)arg;
    int last = -1;
    while (!atomic_load(&sibling.stop)) {
        ordo_deadline_t until = ordo_deadline_after_ms(TEST_WAIT_MS);
        while (!atomic_load(&sibling.stop) && (ordo_deadline_t)ordo_time_now_ns() < until) {
            test_sleep_ms(10);
        }
        int now = atomic_load(&sibling.progress);
        if (!atomic_load(&sibling.stop) && now == last) {
            fprintf(stderr, "sibling waits: no progress past round %d in %d ms\n", now,
                    TEST_WAIT_MS);
            _exit(3);
        }
        last = now;
    }
    return NULL;
}

static void a_callback_cancelling_a_wait_being_armed_does_not_spin(void **state) {
    (void)state;
    memset(&sibling, 0, sizeof sibling);
    sibling.registering = pthread_self();
    assert_ok(ordo_waiter_create(NULL, &sibling.waiter));
    pthread_t producer = test_thread_start(sibling_producer, NULL);
    pthread_t watchdog = test_thread_start(sibling_watchdog, NULL);
    const int rounds = (int)test_scaled(20000);
    for (int round = 1; round <= rounds; ++round) {
        ordo_signal_t *s = test_signal_make(0);
        atomic_store(&sibling.signal, s);
        atomic_store(&sibling.ids[0], 0);
        atomic_store(&sibling.ids[1], 0);
        ordo_wait_id_t first = 0;
        assert_ok(ordo_waiter_wait(sibling.waiter, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE,
                                   sibling_cancel, (void *)0, &first));
        atomic_store(&sibling.ids[0], first);
        atomic_store(&sibling.go, round);
        /* The id is written before the wait is armed (ordo/waiter.h), so
         * the first wait's callback may cancel it from then on. */
        assert_ok(ordo_waiter_wait(sibling.waiter, s, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE,
                                   sibling_cancel, (void *)1, (ordo_wait_id_t *)&sibling.ids[1]));
        ordo_deadline_t until = test_deadline();
        while (atomic_load(&sibling.raised) != round &&
               (ordo_deadline_t)ordo_time_now_ns() < until) {
        }
        assert_int_equal(atomic_load(&sibling.raised), round);
        atomic_store(&sibling.progress, round);
        assert_ok(ordo_signal_destroy(s));
    }
    atomic_store(&sibling.stop, 1);
    test_join_bounded(producer);
    test_join_bounded(watchdog);
    assert_ok(ordo_waiter_destroy(sibling.waiter));
}

int main(void) {
    test_conformance_begin("waiter");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fires_after_register_on_a_worker),
        cmocka_unit_test(fires_when_reached_before_register),
        cmocka_unit_test(reached_value_wins_when_registered_in_a_callback),
        cmocka_unit_test(inline_runs_on_the_signalling_thread),
        cmocka_unit_test(deadline_fires_timeout_never_early),
        cmocka_unit_test(deadlines_fire_in_deadline_order),
        cmocka_unit_test(heap_compaction_keeps_live_deadlines),
        cmocka_unit_test(a_busy_timer_does_not_let_the_heap_grow),
        cmocka_unit_test(a_wait_resolved_on_its_way_to_the_timer_leaves_its_slot_alone),
        cmocka_unit_test(failure_and_destroy_propagate),
        cmocka_unit_test(callbacks_read_why_their_wait_ended),
        cmocka_unit_test(a_callback_inside_a_task_leaves_no_message_of_the_task),
        cmocka_unit_test(event_waits),
        cmocka_unit_test(cancel_prevents_a_pending_wait),
        cmocka_unit_test(stale_ids_are_not_found),
        cmocka_unit_test(cancel_too_late_waits_for_the_callback),
        cmocka_unit_test(cancel_from_inside_a_callback),
        cmocka_unit_test(cancel_from_a_timer_callback_prevents_the_next),
        cmocka_unit_test(destroy_cancels_pending_waits),
        cmocka_unit_test(a_destroy_delivers_what_a_due_wait_met),
        cmocka_unit_test(a_deadline_after_the_raise_delivers_what_the_wait_met),
        cmocka_unit_test(destroy_from_a_timepoint_callback_is_refused),
        cmocka_unit_test(metrics_are_exact),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(many_pending_waits),
        cmocka_unit_test(stress_waits_cancels_and_producers),
        cmocka_unit_test(waiter_entry_points_refuse_bad_input),
        cmocka_unit_test(signal_destroyed_under_an_async_wait_cancels_it),
        cmocka_unit_test(a_callback_cancelling_a_wait_being_armed_does_not_spin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
