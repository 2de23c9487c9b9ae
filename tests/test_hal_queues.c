/* The backend-agnostic machinery of asynchronous device backends, run
 * against a stand-in backend whose "device points" are flags the test
 * sets: the completion watcher (order per timeline, no head-of-line
 * blocking across timelines, device errors, ordering checks, failure
 * markers, teardown), the registry of device points, and the host lane
 * (held operations, blocking, the notifier, direct issue, teardown). */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/lane.h"
#include "hal/watcher.h"
#include "sync/signal_internal.h"
#include "test_rescue.h"
#include "test_util.h"

/* ---- a stand-in backend -------------------------------------------------- */

typedef struct fake_point {
    _Atomic int reached;
    _Atomic int error; /* an ordo_status_t: the device failed at this point */
} fake_point_t;

typedef struct fake_device {
    _Atomic int frozen; /* non-zero: every point reads not reached, uncounted */
    _Atomic int queries;
    _Atomic int released;
    _Atomic int released_reached;
    _Atomic int thread_started;
} fake_device_t;

static ordo_status_t fake_query(void *user, hal_timeline_t *t, const hal_watch_t *w, char *msg,
                                size_t capacity) {
    (void)t;
    fake_device_t *d = user;
    if (atomic_load(&d->frozen)) {
        return ORDO_ERR_BUSY;
    }
    atomic_fetch_add(&d->queries, 1);
    fake_point_t *p = w->point;
    ordo_status_t error = (ordo_status_t)atomic_load(&p->error);
    if (error != ORDO_OK) {
        snprintf(msg, capacity, "the fake device failed");
        return error;
    }
    return atomic_load(&p->reached) ? ORDO_OK : ORDO_ERR_BUSY;
}

static void fake_release(void *user, void *point, int reached) {
    (void)point;
    fake_device_t *d = user;
    atomic_fetch_add(&d->released, 1);
    if (reached) {
        atomic_fetch_add(&d->released_reached, 1);
    }
}

static void fake_thread_start(void *user) {
    fake_device_t *d = user;
    atomic_store(&d->thread_started, 1);
}

static const hal_watcher_ops_t fake_ops = {
    .query = fake_query, .release = fake_release, .thread_start = fake_thread_start};
/* A device whose points are reached in order, as a stream's are. */
static const hal_watcher_ops_t fake_in_order_ops = {
    .query = fake_query, .release = fake_release, .thread_start = fake_thread_start, .in_order = 1};

typedef struct fixture {
    fake_device_t device;
    hal_watcher_t watcher;
} fixture_t;

static fixture_t *fixture_make_with(const hal_watcher_ops_t *ops,
                                    const hal_watcher_config_t *config) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_ok(ordo__hal_watcher_start(&f->watcher, ops, &f->device, config, "test"));
    return f;
}

static fixture_t *fixture_make(void) {
    return fixture_make_with(&fake_ops, NULL);
}

static void fixture_free(fixture_t *f) {
    ordo__hal_watcher_stop(&f->watcher);
    free(f);
}

static void timeline_make(fixture_t *f, hal_timeline_t *t) {
    assert_ok(ordo__hal_timeline_init(t, &f->watcher, NULL, "test timeline", "test"));
}

/* Pushes a point numbered seq that raises signal (may be NULL) to value. */
static void push_point(hal_timeline_t *t, fake_point_t *p, uint64_t seq, ordo_signal_t *signal,
                       uint64_t value) {
    hal_watch_t *w = ordo__hal_timeline_watch_alloc(t);
    assert_non_null(w);
    w->point = p;
    w->seq = seq;
    if (signal) {
        assert_ok(ordo_signal_retain(signal));
        w->signal = signal;
        w->value = value;
    }
    ordo__hal_timeline_push(t, w);
}

static uint64_t value_of(ordo_signal_t *s) {
    return atomic_load(&s->state) & SIGNAL_VALUE_MASK;
}

/* ---- the watcher ---------------------------------------------------------- */

static void points_complete_in_order(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *s = test_signal_make(0);
    fake_point_t p[3] = {{0, ORDO_OK}, {0, ORDO_OK}, {0, ORDO_OK}};
    for (int i = 0; i < 3; ++i) {
        push_point(&t, &p[i], (uint64_t)i + 1, s, (uint64_t)i + 1);
    }
    /* The last is reached first: nothing completes before the first. */
    atomic_store(&p[2].reached, 1);
    test_sleep_ms(5);
    assert_int_equal(value_of(s), 0);
    assert_int_equal(value_of(t.progress), 0);
    atomic_store(&p[0].reached, 1);
    assert_ok(ordo_signal_wait(s, 1, test_deadline()));
    assert_ok(ordo_signal_wait(t.progress, 1, test_deadline()));
    test_sleep_ms(5);
    assert_int_equal(value_of(s), 1);
    atomic_store(&p[1].reached, 1);
    assert_ok(ordo_signal_wait(s, 3, test_deadline()));
    assert_ok(ordo_signal_wait(t.progress, 3, test_deadline()));
    ordo__hal_timeline_fini(&t, test_deadline(), 3, ORDO_ERR_CANCELLED, "cancelled");
    assert_int_equal(atomic_load(&f->device.released), 3);
    assert_int_equal(atomic_load(&f->device.released_reached), 3);
    assert_true(atomic_load(&f->device.thread_started));
    assert_ok(ordo_signal_destroy(s));
    fixture_free(f);
}

static void a_slow_timeline_holds_back_no_other(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t slow;
    hal_timeline_t fast;
    timeline_make(f, &slow);
    timeline_make(f, &fast);
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    fake_point_t never = {0, ORDO_OK};
    fake_point_t done = {1, ORDO_OK};
    push_point(&slow, &never, 1, a, 1);
    push_point(&fast, &done, 1, b, 1);
    assert_ok(ordo_signal_wait(b, 1, test_deadline()));
    assert_int_equal(value_of(a), 0);
    /* Torn down with its point pending: the point fails as cancelled. */
    ordo__hal_timeline_fini(&slow, ordo_deadline_after_ms(10), 1, ORDO_ERR_CANCELLED, "dropped");
    assert_status(ordo_signal_wait(a, 1, ORDO_DEADLINE_NOW), ORDO_ERR_CANCELLED);
    ordo__hal_timeline_fini(&fast, test_deadline(), 1, ORDO_ERR_CANCELLED, "dropped");
    assert_int_equal(atomic_load(&f->device.released), 2);
    assert_int_equal(atomic_load(&f->device.released_reached), 1);
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
    fixture_free(f);
}

static void a_device_error_fails_the_timeline(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *s[3];
    fake_point_t p[3] = {{1, ORDO_OK}, {0, ORDO_ERR_DEVICE}, {1, ORDO_OK}};
    for (int i = 0; i < 3; ++i) {
        s[i] = test_signal_make(0);
        push_point(&t, &p[i], (uint64_t)i + 1, s[i], 1);
    }
    assert_ok(ordo_signal_wait(s[0], 1, test_deadline()));
    assert_status(ordo_signal_wait(s[1], 1, test_deadline()), ORDO_ERR_DEVICE);
    assert_status(ordo_signal_wait(s[2], 1, test_deadline()), ORDO_ERR_DEVICE);
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    ordo_status_t failure;
    assert_ok(ordo_signal_failure(s[2], &failure, message, sizeof message));
    assert_non_null(strstr(message, "the fake device failed"));
    ordo_status_t st;
    assert_true(ordo__hal_timeline_failed(&t, &st, NULL));
    assert_int_equal(st, ORDO_ERR_DEVICE);
    ordo__hal_timeline_fini(&t, test_deadline(), 3, ORDO_ERR_CANCELLED, "cancelled");
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_signal_destroy(s[i]));
    }
    fixture_free(f);
}

typedef struct found {
    const void *point;
    uint64_t seq;
    int calls;
} found_t;

static void note_found(void *ctx, const hal_watch_t *w) {
    found_t *found = ctx;
    found->point = w->point;
    found->seq = w->seq;
    ++found->calls;
}

static void the_registry_finds_the_earliest_point(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *other = test_signal_make(0);
    fake_point_t p5 = {0, ORDO_OK};
    fake_point_t p9 = {0, ORDO_OK};
    fake_point_t plain = {0, ORDO_OK};
    uint64_t before = value_of(f->watcher.registered);
    push_point(&t, &p9, 1, s, 9);
    push_point(&t, &p5, 2, s, 5); /* values need not arrive in order */
    push_point(&t, &plain, 3, NULL, 0);
    assert_true(value_of(f->watcher.registered) >= before + 3);
    found_t found = {NULL, 0, 0};
    assert_true(ordo__hal_watcher_find(&f->watcher, s, 3, note_found, &found));
    assert_ptr_equal(found.point, &p5);
    assert_true(ordo__hal_watcher_find(&f->watcher, s, 6, note_found, &found));
    assert_ptr_equal(found.point, &p9);
    assert_true(ordo__hal_watcher_find(&f->watcher, s, 9, note_found, &found));
    assert_ptr_equal(found.point, &p9);
    assert_false(ordo__hal_watcher_find(&f->watcher, s, 10, note_found, &found));
    assert_false(ordo__hal_watcher_find(&f->watcher, other, 1, note_found, &found));
    /* Under the progress signal, by number. */
    assert_true(ordo__hal_watcher_find(&f->watcher, t.progress, 3, note_found, &found));
    assert_ptr_equal(found.point, &plain);
    assert_int_equal(found.seq, 3);
    assert_int_equal(found.calls, 4);
    /* Completed points leave the registry. */
    atomic_store(&p9.reached, 1);
    atomic_store(&p5.reached, 1);
    atomic_store(&plain.reached, 1);
    assert_ok(ordo_signal_wait(t.progress, 3, test_deadline()));
    /* (The progress moves just before the point leaves the registry.) */
    ordo_deadline_t deadline = test_deadline();
    while (ordo__hal_watcher_find(&f->watcher, s, 1, note_found, &found) ||
           ordo__hal_watcher_find(&f->watcher, t.progress, 1, note_found, &found)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    ordo__hal_timeline_fini(&t, test_deadline(), 3, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(other));
    fixture_free(f);
}

/* A check on t waits for `after` (another timeline's progress) to pass
 * after_value, then fails t if check ended short of check_value. */
static void push_check(hal_timeline_t *t, ordo_signal_t *after, uint64_t after_value,
                       ordo_signal_t *check, uint64_t check_value) {
    hal_watch_t *w = ordo__hal_timeline_watch_alloc(t);
    assert_non_null(w);
    if (after) {
        assert_ok(ordo_signal_retain(after));
    }
    assert_ok(ordo_signal_retain(check));
    w->after = after;
    w->after_value = after_value;
    w->check = check;
    w->check_value = check_value;
    ordo__hal_timeline_push(t, w);
}

static void ordering_checks_propagate_failures(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t producer;
    hal_timeline_t consumer;
    timeline_make(f, &producer);
    timeline_make(f, &consumer);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *r = test_signal_make(0);
    ordo_signal_t *ok = test_signal_make(0);
    fake_point_t p = {0, ORDO_OK};
    fake_point_t q = {1, ORDO_OK};
    push_point(&producer, &p, 1, s, 1);
    /* The consumer waited for p on the device; its next point is reached
     * at once but must not be reported before p. */
    push_check(&consumer, producer.progress, 1, s, 1);
    push_point(&consumer, &q, 1, r, 1);
    test_sleep_ms(5);
    assert_int_equal(value_of(r), 0);
    atomic_store(&p.error, ORDO_ERR_DEVICE); /* the producer fails at p */
    assert_status(ordo_signal_wait(s, 1, test_deadline()), ORDO_ERR_DEVICE);
    assert_status(ordo_signal_wait(r, 1, test_deadline()), ORDO_ERR_DEVICE);
    assert_true(ordo__hal_timeline_failed(&consumer, NULL, NULL));
    /* A check whose signal was reached passes. */
    hal_timeline_t third;
    timeline_make(f, &third);
    ordo_signal_t *reached = test_signal_make(1);
    fake_point_t x = {1, ORDO_OK};
    push_check(&third, NULL, 0, reached, 1);
    push_point(&third, &x, 1, ok, 1);
    assert_ok(ordo_signal_wait(ok, 1, test_deadline()));
    ordo__hal_timeline_fini(&producer, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    ordo__hal_timeline_fini(&consumer, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    ordo__hal_timeline_fini(&third, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(r));
    assert_ok(ordo_signal_destroy(ok));
    assert_ok(ordo_signal_destroy(reached));
    fixture_free(f);
}

/* The producer fails before its point: the waiter fails with the producer's
 * failure at once, unless someone else reached the value. */
static void a_failed_producer_fails_its_waiters(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t producer;
    hal_timeline_t consumer;
    hal_timeline_t lucky;
    timeline_make(f, &producer);
    timeline_make(f, &consumer);
    timeline_make(f, &lucky);
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *elsewhere = test_signal_make(0);
    ordo_signal_t *r = test_signal_make(0);
    ordo_signal_t *ok = test_signal_make(0);
    fake_point_t never = {0, ORDO_OK};
    fake_point_t q = {1, ORDO_OK};
    fake_point_t x = {1, ORDO_OK};
    assert_ok(ordo__hal_timeline_push_failure(&producer, ORDO_ERR_ABORTED, "a task failed"));
    push_point(&producer, &never, 1, s, 1);
    push_point(&producer, &never, 2, elsewhere, 1);
    push_check(&consumer, producer.progress, 1, s, 1);
    push_point(&consumer, &q, 1, r, 1);
    assert_status(ordo_signal_wait(r, 1, test_deadline()), ORDO_ERR_ABORTED);
    /* A value reached by another producer is reached. */
    assert_ok(ordo_signal_advance(elsewhere, 1));
    push_check(&lucky, producer.progress, 2, elsewhere, 1);
    push_point(&lucky, &x, 1, ok, 1);
    assert_ok(ordo_signal_wait(ok, 1, test_deadline()));
    ordo__hal_timeline_fini(&producer, ordo_deadline_after_ms(5), 2, ORDO_ERR_CANCELLED,
                            "cancelled");
    ordo__hal_timeline_fini(&consumer, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    ordo__hal_timeline_fini(&lucky, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(elsewhere));
    assert_ok(ordo_signal_destroy(r));
    assert_ok(ordo_signal_destroy(ok));
    fixture_free(f);
}

static void a_check_on_a_destroyed_signal_cancels(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *gone = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_signal_retain(gone));
    assert_ok(ordo_signal_destroy(gone));
    fake_point_t p = {1, ORDO_OK};
    push_check(&t, NULL, 0, gone, 1);
    push_point(&t, &p, 1, after, 1);
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_CANCELLED);
    ordo__hal_timeline_fini(&t, test_deadline(), 1, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_release(gone));
    assert_ok(ordo_signal_destroy(after));
    fixture_free(f);
}

static void failure_markers_fail_in_order(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    fake_point_t p1 = {0, ORDO_OK};
    fake_point_t p2 = {1, ORDO_OK};
    push_point(&t, &p1, 1, before, 1);
    assert_ok(ordo__hal_timeline_push_failure(&t, ORDO_ERR_ABORTED, "enqueued work failed"));
    push_point(&t, &p2, 2, after, 1);
    test_sleep_ms(2);
    atomic_store(&p1.reached, 1);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    const char *message = NULL;
    assert_true(ordo__hal_timeline_failed(&t, NULL, &message));
    assert_string_equal(message, "enqueued work failed");
    ordo__hal_timeline_fini(&t, test_deadline(), 2, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(after));
    fixture_free(f);
}

static void teardown_cancels_what_was_never_issued(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *progress = t.progress;
    assert_ok(ordo_signal_retain(progress));
    fake_point_t p = {1, ORDO_OK};
    push_point(&t, &p, 1, NULL, 0);
    /* Numbers up to 4 were handed out, only 1 was issued. */
    ordo__hal_timeline_fini(&t, test_deadline(), 4, ORDO_ERR_CANCELLED, "never issued");
    assert_status(ordo_signal_wait(progress, 4, ORDO_DEADLINE_NOW), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_wait(progress, 1, ORDO_DEADLINE_NOW));
    assert_ok(ordo_signal_release(progress));
    fixture_free(f);
}

static void timelines_snapshot_their_signal_points(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *s = test_signal_make(0);
    fake_point_t p[3] = {{0, ORDO_OK}, {0, ORDO_OK}, {0, ORDO_OK}};
    push_point(&t, &p[0], 1, s, 4);
    push_point(&t, &p[1], 2, NULL, 0);
    push_point(&t, &p[2], 3, s, 7);
    hal_pending_op_t ops[1];
    assert_int_equal(ordo__hal_timeline_snapshot(&t, ops, 1), 2);
    assert_int_equal(ops[0].kind, HAL_PENDING_SIGNAL);
    assert_ptr_equal(ops[0].signal, s);
    assert_int_equal(ops[0].value, 4);
    assert_int_equal(ops[0].seq, 1);
    assert_ok(ordo_signal_release(ops[0].signal));
    for (int i = 0; i < 3; ++i) {
        atomic_store(&p[i].reached, 1);
    }
    assert_ok(ordo_signal_wait(s, 7, test_deadline()));
    ordo__hal_timeline_fini(&t, test_deadline(), 3, ORDO_ERR_CANCELLED, "cancelled");
    assert_ok(ordo_signal_destroy(s));
    fixture_free(f);
}

/* Many points over several timelines, completed in random order by a
 * thread while others push: every signal ends at its last value and every
 * point is released once. */
#define STRESS_TIMELINES 4

typedef struct stress {
    fixture_t *f;
    hal_timeline_t timelines[STRESS_TIMELINES];
    ordo_signal_t *signals[STRESS_TIMELINES];
    fake_point_t *points;
    uint64_t per_timeline;
    _Atomic uint64_t pushed;
} stress_t;

static void *stress_push(void *arg) {
    stress_t *st = arg;
    for (uint64_t i = 0; i < st->per_timeline; ++i) {
        for (int k = 0; k < STRESS_TIMELINES; ++k) {
            fake_point_t *p = &st->points[(size_t)k * st->per_timeline + i];
            push_point(&st->timelines[k], p, i + 1, st->signals[k], i + 1);
            atomic_fetch_add(&st->pushed, 1);
        }
    }
    return NULL;
}

static void stress_many_points(void **state) {
    (void)state;
    stress_t *st = calloc(1, sizeof *st);
    st->f = fixture_make();
    st->per_timeline = test_scaled(2000);
    st->points = calloc(STRESS_TIMELINES * st->per_timeline, sizeof *st->points);
    for (int k = 0; k < STRESS_TIMELINES; ++k) {
        timeline_make(st->f, &st->timelines[k]);
        st->signals[k] = test_signal_make(0);
    }
    pthread_t pusher = test_thread_start(stress_push, st);
    uint64_t total = STRESS_TIMELINES * st->per_timeline;
    /* Reached in a random order, whether pushed yet or not. */
    uint64_t *order = calloc(total, sizeof *order);
    for (uint64_t i = 0; i < total; ++i) {
        order[i] = i;
    }
    uint64_t rng = 42;
    for (uint64_t i = total - 1; i > 0; --i) {
        uint64_t j = test_rand(&rng) % (i + 1);
        uint64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (uint64_t i = 0; i < total; ++i) {
        atomic_store(&st->points[order[i]].reached, 1);
    }
    free(order);
    pthread_join(pusher, NULL);
    for (int k = 0; k < STRESS_TIMELINES; ++k) {
        assert_ok(ordo_signal_wait(st->signals[k], st->per_timeline, test_deadline()));
        ordo__hal_timeline_fini(&st->timelines[k], test_deadline(), st->per_timeline,
                                ORDO_ERR_CANCELLED, "cancelled");
        assert_ok(ordo_signal_destroy(st->signals[k]));
    }
    assert_int_equal(atomic_load(&st->f->device.released), total);
    assert_int_equal(atomic_load(&st->f->device.released_reached), total);
    fixture_free(st->f);
    free(st->points);
    free(st);
}

/* ---- when the watcher polls ------------------------------------------------ */

/* Polls this far apart while nothing is wanted: longer than any test. */
static const hal_watcher_config_t lazy_config = {1000000, 1000000, 10000000000ull};

static uint64_t elapsed_ms_since(uint64_t start_ns) {
    return (ordo_time_now_ns() - start_ns) / 1000000u;
}

/* Waits (bounded) until a watcher counter moves past before. */
static void wait_for_count(_Atomic uint64_t *count, uint64_t before) {
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(count) == before) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
}

/* A lazily polling watcher with one timeline and one point on it, not yet
 * reached, that raises s to 1. Static in each test: a failed assertion
 * leaves the watcher running, and the point must stay valid. */
typedef struct one_point {
    fixture_t *f;
    hal_timeline_t t;
    ordo_signal_t *s;
    fake_point_t p;
} one_point_t;

static void one_point_open(one_point_t *r) {
    r->f = fixture_make_with(&fake_ops, &lazy_config);
    timeline_make(r->f, &r->t);
    r->s = test_signal_make(0);
    atomic_store(&r->p.reached, 0);
    atomic_store(&r->p.error, ORDO_OK);
}

static void one_point_push(one_point_t *r) {
    push_point(&r->t, &r->p, 1, r->s, 1);
}

static void one_point_close(one_point_t *r) {
    ordo__hal_timeline_fini(&r->t, test_deadline(), 0, ORDO_ERR_CANCELLED, "test");
    assert_ok(ordo_signal_destroy(r->s));
    fixture_free(r->f);
}

/* The sync layer's side of a feeder: told of each timepoint armed and not
 * fired at once, of none after it is cleared; no reference to help with
 * when it cannot help. */
typedef struct counting_feeder {
    signal_feeder_t base;
    _Atomic int wanted;
} counting_feeder_t;

static void counting_wanted(signal_feeder_t *feeder) {
    atomic_fetch_add(&((counting_feeder_t *)feeder)->wanted, 1);
}

static void noop_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)ctx, (void)status, (void)timepoint;
}

static void a_feeder_hears_of_armed_timepoints(void **state) {
    (void)state;
    counting_feeder_t feeder = {.base = {.wanted = counting_wanted}};
    ordo_signal_t *s = test_signal_make(1);
    ordo__signal_feeder_set(s, &feeder.base);
    ordo_timepoint_t reached = {0}, pending = {0}, later = {0};
    assert_ok(ordo_timepoint_arm(&reached, s, 1, noop_fired, NULL)); /* fires at once */
    assert_int_equal(atomic_load(&feeder.wanted), 0);
    assert_ok(ordo_timepoint_arm(&pending, s, 2, noop_fired, NULL));
    assert_int_equal(atomic_load(&feeder.wanted), 1);
    assert_null(ordo__signal_feeder_enter(s)); /* no help to give */
    ordo__signal_feeder_clear(s, &feeder.base);
    assert_ok(ordo_timepoint_arm(&later, s, 3, noop_fired, NULL));
    assert_int_equal(atomic_load(&feeder.wanted), 1);
    assert_ok(ordo_signal_advance(s, 3));
    assert_ok(ordo_signal_destroy(s));
}

/* A reached point nobody waits for waits for the idle poll; a wait on it
 * has it looked at at once (the waiting thread helps, and tells the
 * watcher). */
static void a_wait_cuts_the_idle_poll_short(void **state) {
    (void)state;
    static one_point_t r;
    one_point_open(&r);
    uint64_t idle = atomic_load(&r.f->watcher.idle_polls);
    one_point_push(&r);
    wait_for_count(&r.f->watcher.idle_polls, idle);
    atomic_store(&r.p.reached, 1);
    assert_int_equal(value_of(r.s), 0); /* the next poll is seconds away */
    uint64_t start = ordo_time_now_ns();
    assert_ok(ordo_signal_wait(r.s, 1, test_deadline()));
    assert_true(elapsed_ms_since(start) < 5000);
    one_point_close(&r);
}

typedef struct plain_waiter {
    ordo_signal_t *signal;
    uint64_t value;
    ordo_status_t status;
} plain_waiter_t;

static void *plain_waiter_main(void *arg) {
    plain_waiter_t *pw = arg;
    pw->status = ordo_signal_wait(pw->signal, pw->value, test_deadline());
    return NULL;
}

/* A wait armed before any device work produces its value is wanted once a
 * point that reaches it is pushed, though the push itself wakes nobody. */
static void a_point_pushed_for_a_waiting_value_is_wanted(void **state) {
    (void)state;
    fixture_t *f = fixture_make_with(&fake_ops, &lazy_config);
    hal_timeline_t busy, t;
    timeline_make(f, &busy);
    timeline_make(f, &t);
    static fake_point_t slow, p;
    atomic_store(&slow.reached, 0);
    atomic_store(&p.reached, 1);
    uint64_t idle = atomic_load(&f->watcher.idle_polls);
    push_point(&busy, &slow, 1, NULL, 0); /* keeps the watcher at its idle poll */
    wait_for_count(&f->watcher.idle_polls, idle);
    ordo_signal_t *s = test_signal_make(0);
    plain_waiter_t pw = {s, 1, ORDO_ERR_BUSY};
    uint64_t start = ordo_time_now_ns();
    pthread_t waiter = test_thread_start(plain_waiter_main, &pw);
    uint64_t armed_at;
    ordo_deadline_t deadline = test_deadline();
    while (!ordo__signal_wanted_value(s, &armed_at)) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    push_point(&t, &p, 1, s, 1);
    pthread_join(waiter, NULL);
    assert_ok(pw.status);
    assert_true(elapsed_ms_since(start) < 5000);
    atomic_store(&slow.reached, 1);
    ordo__hal_timeline_fini(&busy, test_deadline(), 0, ORDO_ERR_CANCELLED, "test");
    ordo__hal_timeline_fini(&t, test_deadline(), 0, ORDO_ERR_CANCELLED, "test");
    assert_ok(ordo_signal_destroy(s));
    fixture_free(f);
}

/* A thread waits for r's point on a thread of its own, which is seen to
 * help before the point is reached; returns that thread, joined. */
static pthread_t one_point_helped_wait(one_point_t *r) {
    plain_waiter_t pw = {r->s, 1, ORDO_ERR_BUSY};
    pthread_t waiter = test_thread_start(plain_waiter_main, &pw);
    wait_for_count(&r->f->watcher.helped_passes, 0);
    atomic_store(&r->p.reached, 1);
    pthread_join(waiter, NULL);
    assert_ok(pw.status);
    return waiter;
}

/* A thread waiting for a registered value runs passes itself. */
static void a_waiting_thread_helps(void **state) {
    (void)state;
    static one_point_t r;
    one_point_open(&r);
    one_point_push(&r);
    (void)one_point_helped_wait(&r);
    one_point_close(&r);
}

/* A helping waiter runs no callback but waiters' wake-ups: a user's
 * timepoint on the signal it completes runs on the watcher thread. */
typedef struct thread_record {
    _Atomic int ran;
    pthread_t thread;
} thread_record_t;

static void record_thread(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    thread_record_t *r = ctx;
    r->thread = pthread_self();
    atomic_store(&r->ran, 1);
}

static void a_helping_waiter_hands_callbacks_to_the_watcher(void **state) {
    (void)state;
    static one_point_t r;
    one_point_open(&r);
    one_point_push(&r);
    static thread_record_t record;
    atomic_store(&record.ran, 0);
    ordo_timepoint_t tp = {0};
    assert_ok(ordo_timepoint_arm(&tp, r.s, 1, record_thread, &record));
    pthread_t waiter = one_point_helped_wait(&r);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&record.ran)) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    assert_false(pthread_equal(record.thread, waiter));
    assert_true(pthread_equal(record.thread, r.f->watcher.thread));
    one_point_close(&r);
}

/* On a device that reaches points in order, the newest point reached
 * answers for the ones before it: a few queries, not one per point. */
static void an_in_order_device_is_asked_a_few_times_for_many_points(void **state) {
    (void)state;
    fixture_t *f = fixture_make_with(&fake_in_order_ops, &lazy_config);
    hal_timeline_t t;
    timeline_make(f, &t);
    ordo_signal_t *s = test_signal_make(0);
    enum { POINTS = 64 };
    static fake_point_t p[POINTS];
    for (int i = 0; i < POINTS; ++i) {
        atomic_store(&p[i].reached, 0);
        push_point(&t, &p[i], (uint64_t)i + 1, s, (uint64_t)i + 1);
    }
    /* The device passes them all at once: the watcher's (or a helper's)
     * looks meanwhile see none reached and are not counted, so the count
     * is that of the completion alone, however the threads interleave. */
    atomic_store(&f->device.frozen, 1);
    for (int i = 0; i < POINTS; ++i) {
        atomic_store(&p[i].reached, 1);
    }
    int before = atomic_load(&f->device.queries);
    atomic_store(&f->device.frozen, 0);
    assert_ok(ordo_signal_wait(s, POINTS, test_deadline()));
    assert_true(atomic_load(&f->device.queries) - before <= 8);
    ordo__hal_timeline_fini(&t, test_deadline(), 0, ORDO_ERR_CANCELLED, "test");
    assert_ok(ordo_signal_destroy(s));
    fixture_free(f);
}

/* ---- the lane --------------------------------------------------------------- */

typedef struct lane_log {
    _Atomic int count;
    int order[64];
    int cancelled[64];
} lane_log_t;

typedef struct test_op {
    hal_lane_op_t base;
    lane_log_t *log;
    int id;
    ordo_signal_t *block_on; /* blocks until it reaches 1 */
    _Atomic int *bound;      /* if set: done once *bound is non-zero */
    int runs;
} test_op_t;

static hal_lane_step_t test_run(hal_lane_op_t *base, int cancelled, ordo_signal_point_t *out_wait) {
    test_op_t *op = (test_op_t *)base;
    ++op->runs;
    if (!cancelled) {
        if (op->bound && !atomic_load(op->bound)) {
            *out_wait = (ordo_signal_point_t){op->block_on, 1};
            return HAL_LANE_BLOCKED;
        }
        if (op->block_on && !op->bound && value_of(op->block_on) < 1) {
            *out_wait = (ordo_signal_point_t){op->block_on, 1};
            return HAL_LANE_BLOCKED;
        }
    }
    int at = atomic_fetch_add(&op->log->count, 1);
    op->log->order[at] = op->id;
    op->log->cancelled[at] = cancelled;
    return HAL_LANE_DONE;
}

static test_op_t *op_make(lane_log_t *log, int id, int kind, ordo_signal_t *block_on) {
    test_op_t *op = ordo__alloc(sizeof *op, 0);
    assert_non_null(op);
    op->base.size = sizeof *op;
    op->base.kind = kind;
    op->base.run = test_run;
    op->log = log;
    op->id = id;
    op->block_on = block_on;
    if (kind == HAL_LANE_WAIT && block_on) {
        assert_ok(ordo_signal_retain(block_on));
        op->base.signal = block_on;
        op->base.value = 1;
        op->base.seq = (uint64_t)id;
    }
    return op;
}

static void push(hal_lane_t *lane, test_op_t *op) {
    hal_lane_lock(lane);
    assert_ok(ordo__hal_lane_push_locked(lane, &op->base, "test"));
    hal_lane_unlock(lane);
}

static int holding(hal_lane_t *lane) {
    hal_lane_lock(lane);
    int h = hal_lane_holding_locked(lane);
    hal_lane_unlock(lane);
    return h;
}

static void wait_count(lane_log_t *log, int count) {
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&log->count) < count) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
}

/* Polls the lane's stall snapshot (bounded by the test deadline) until
 * its first held op is a wait the lane's thread is blocked in; returns the
 * last snapshot's op count, its first op in *out_first (its signal's
 * reference released) and whether it was blocked. */
static size_t snapshot_until_in_wait(hal_lane_t *lane, hal_pending_op_t *out_first,
                                     int *out_in_wait) {
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        hal_pending_op_t ops[4];
        int in_wait = 0;
        size_t n = ordo__hal_lane_snapshot(lane, ops, 4, &in_wait);
        for (size_t i = 0; i < n && i < 4; ++i) {
            assert_ok(ordo_signal_release(ops[i].signal));
        }
        if (in_wait || ordo_time_now_ns() >= deadline) {
            if (n > 0) {
                *out_first = ops[0];
            }
            *out_in_wait = in_wait;
            return n;
        }
        test_sleep_ms(1);
    }
}

static _Atomic int lane_thread_started;

static void lane_started(void *user) {
    (void)user;
    atomic_store(&lane_thread_started, 1);
}

static void lanes_run_held_ops_in_order(void **state) {
    (void)state;
    hal_lane_t lane;
    assert_ok(ordo__hal_lane_init(&lane, NULL, lane_started, NULL, "test"));
    assert_false(holding(&lane));
    lane_log_t log = {0};
    ordo_signal_t *gate = test_signal_make(0);
    push(&lane, op_make(&log, 1, HAL_LANE_OTHER, NULL));
    push(&lane, op_make(&log, 2, HAL_LANE_WAIT, gate));
    push(&lane, op_make(&log, 3, HAL_LANE_OTHER, NULL));
    wait_count(&log, 1);
    /* A stall report sees the wait, blocked once the lane's thread has
     * started it; op 3 stays behind it. */
    hal_pending_op_t first = {0};
    int in_wait = 0;
    assert_int_equal(snapshot_until_in_wait(&lane, &first, &in_wait), 1);
    assert_true(in_wait);
    assert_int_equal(first.kind, HAL_PENDING_WAIT);
    assert_ptr_equal(first.signal, gate);
    assert_int_equal(first.seq, 2);
    assert_int_equal(atomic_load(&log.count), 1);
    assert_true(holding(&lane));
    assert_ok(ordo_signal_advance(gate, 1));
    wait_count(&log, 3);
    assert_int_equal(log.order[0], 1);
    assert_int_equal(log.order[1], 2);
    assert_int_equal(log.order[2], 3);
    ordo_deadline_t deadline = test_deadline();
    while (holding(&lane)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    assert_true(atomic_load(&lane_thread_started));
    ordo__hal_lane_fini(&lane);
    assert_ok(ordo_signal_destroy(gate));
}

static void the_notifier_wakes_a_blocked_op(void **state) {
    (void)state;
    ordo_signal_t *notifier = test_signal_make(0);
    ordo_signal_t *never = test_signal_make(0);
    hal_lane_t lane;
    assert_ok(ordo__hal_lane_init(&lane, notifier, NULL, NULL, "test"));
    lane_log_t log = {0};
    _Atomic int bound = 0;
    test_op_t *op = op_make(&log, 1, HAL_LANE_OTHER, never);
    op->bound = &bound;
    push(&lane, op);
    test_sleep_ms(5);
    assert_int_equal(atomic_load(&log.count), 0);
    /* What the op waits for can now be reached another way; the notifier
     * tells it to look again. */
    atomic_store(&bound, 1);
    assert_ok(ordo_signal_advance(notifier, 1));
    wait_count(&log, 1);
    assert_int_equal(log.cancelled[0], 0);
    ordo__hal_lane_fini(&lane);
    assert_ok(ordo_signal_destroy(never));
    assert_ok(ordo_signal_destroy(notifier));
}

static void teardown_cancels_held_ops(void **state) {
    (void)state;
    hal_lane_t lane;
    assert_ok(ordo__hal_lane_init(&lane, NULL, NULL, NULL, "test"));
    lane_log_t log = {0};
    ordo_signal_t *never = test_signal_make(0);
    push(&lane, op_make(&log, 1, HAL_LANE_WAIT, never));
    push(&lane, op_make(&log, 2, HAL_LANE_SIGNAL, NULL));
    push(&lane, op_make(&log, 3, HAL_LANE_OTHER, NULL));
    /* Torn down while op 1 is blocked: the teardown wakes it (it does not
     * wait for `never`), and every op runs cancelled. */
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        hal_lane_lock(&lane);
        int blocked = lane.in_wait && lane.current && lane.current->signal == never;
        hal_lane_unlock(&lane);
        if (blocked) {
            break;
        }
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    test_rescue_t rescue;
    test_rescue_begin(&rescue, never, 1);
    ordo__hal_lane_fini(&lane);
    assert_false(test_rescue_end(&rescue));
    assert_int_equal(atomic_load(&log.count), 3);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(log.order[i], i + 1);
        assert_int_equal(log.cancelled[i], 1);
    }
    assert_ok(ordo_signal_destroy(never));
}

static void direct_issue_holds_the_lane(void **state) {
    (void)state;
    hal_lane_t lane;
    assert_ok(ordo__hal_lane_init(&lane, NULL, NULL, NULL, "test"));
    lane_log_t log = {0};
    hal_lane_lock(&lane);
    assert_false(hal_lane_holding_locked(&lane));
    hal_lane_begin_direct_locked(&lane);
    hal_lane_unlock(&lane);
    assert_true(holding(&lane));
    /* Submitted while the direct issue runs: queued, not started. */
    push(&lane, op_make(&log, 1, HAL_LANE_OTHER, NULL));
    test_sleep_ms(5);
    assert_int_equal(atomic_load(&log.count), 0);
    uint64_t idle = lane.idle_count;
    ordo__hal_lane_end_direct(&lane);
    wait_count(&log, 1);
    assert_int_equal(log.cancelled[0], 0);
    hal_lane_lock(&lane);
    assert_true(lane.idle_count >= idle);
    hal_lane_unlock(&lane);
    ordo__hal_lane_fini(&lane);
}

/* A lane that never started a thread tears down at once. */
static void an_unused_lane_tears_down(void **state) {
    (void)state;
    hal_lane_t lane;
    assert_ok(ordo__hal_lane_init(&lane, NULL, NULL, NULL, "test"));
    hal_pending_op_t ops[1];
    int in_wait = 1;
    assert_int_equal(ordo__hal_lane_snapshot(&lane, ops, 1, &in_wait), 0);
    assert_false(in_wait);
    ordo__hal_lane_fini(&lane);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(points_complete_in_order),
        cmocka_unit_test(a_slow_timeline_holds_back_no_other),
        cmocka_unit_test(a_device_error_fails_the_timeline),
        cmocka_unit_test(the_registry_finds_the_earliest_point),
        cmocka_unit_test(ordering_checks_propagate_failures),
        cmocka_unit_test(a_failed_producer_fails_its_waiters),
        cmocka_unit_test(a_check_on_a_destroyed_signal_cancels),
        cmocka_unit_test(failure_markers_fail_in_order),
        cmocka_unit_test(teardown_cancels_what_was_never_issued),
        cmocka_unit_test(timelines_snapshot_their_signal_points),
        cmocka_unit_test(stress_many_points),
        cmocka_unit_test(a_feeder_hears_of_armed_timepoints),
        cmocka_unit_test(a_wait_cuts_the_idle_poll_short),
        cmocka_unit_test(a_point_pushed_for_a_waiting_value_is_wanted),
        cmocka_unit_test(a_waiting_thread_helps),
        cmocka_unit_test(a_helping_waiter_hands_callbacks_to_the_watcher),
        cmocka_unit_test(an_in_order_device_is_asked_a_few_times_for_many_points),
        cmocka_unit_test(lanes_run_held_ops_in_order),
        cmocka_unit_test(the_notifier_wakes_a_blocked_op),
        cmocka_unit_test(teardown_cancels_held_ops),
        cmocka_unit_test(direct_issue_holds_the_lane),
        cmocka_unit_test(an_unused_lane_tears_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
