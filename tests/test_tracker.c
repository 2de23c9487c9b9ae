/* Trackers: hazards, minimal waits, transitive knowledge, the seed's
 * scenarios, deferred reclamation, bad input. */
#include <stdatomic.h>
#include <string.h>

#include "core/tracker_observer.h"
#include "hal/hal.h"
#include "ordo/buffer.h"
#include "ordo/event.h"
#include "ordo/tracker.h"
#include "refusal.h"
#include "test_util.h"

static ordo_device_t *device;

typedef struct observed {
    int count;
    ordo_stream_t *waiting[16];
    ordo_stream_t *origin[16];
    uint64_t point[16];
} observed_t;

static void observe(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin, uint64_t origin_point,
                    uint64_t needed_point) {
    observed_t *o = ctx;
    (void)needed_point;
    if (o->count < 16) {
        o->waiting[o->count] = waiting;
        o->origin[o->count] = origin;
        o->point[o->count] = origin_point;
    }
    o->count++;
}

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

typedef struct fixture {
    ordo_tracker_t *tracker;
    ordo_stream_t *s[3];
    ordo_buffer_t *b[4];
    observed_t seen;
} fixture_t;

static fixture_t *fixture_make(void) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_ok(ordo_tracker_create(device, &f->tracker));
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_create(device, 0, &f->s[i]));
    }
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_buffer_create(f->tracker, &f->b[i]));
    }
    assert_ok(ordo__tracker_set_wait_observer(f->tracker, observe, &f->seen));
    return f;
}

static void fixture_free(fixture_t *f) {
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_buffer_release(f->b[i], NULL, NULL));
    }
    for (int i = 0; i < 3; ++i) {
        ordo_status_t st = ordo_stream_synchronize(f->s[i], test_deadline());
        assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    }
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(f->tracker));
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
    free(f);
}

static void run(fixture_t *f, int stream, ordo_buffer_t *b, ordo_access_mode_t mode) {
    ordo_access_t access = {b, mode};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[stream], &access, 1, launch_noop, NULL));
}

static ordo_tracker_metrics_t metrics(fixture_t *f) {
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(f->tracker, &m));
    return m;
}

static void hazards_across_streams_get_waits(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    run(f, 0, f->b[0], ORDO_ACCESS_WRITE);
    run(f, 1, f->b[0], ORDO_ACCESS_READ); /* RAW */
    assert_int_equal(f->seen.count, 1);
    assert_ptr_equal(f->seen.waiting[0], f->s[1]);
    assert_ptr_equal(f->seen.origin[0], f->s[0]);
    assert_int_equal(f->seen.point[0], 1);
    run(f, 2, f->b[0], ORDO_ACCESS_READ); /* readers do not serialise */
    assert_int_equal(f->seen.count, 2);
    assert_ptr_equal(f->seen.waiting[1], f->s[2]);
    assert_ptr_equal(f->seen.origin[1], f->s[0]); /* on the writer, not the reader */
    run(f, 0, f->b[0], ORDO_ACCESS_WRITE);        /* WAR on two readers */
    assert_int_equal(f->seen.count, 4);
    run(f, 1, f->b[1], ORDO_ACCESS_WRITE);
    run(f, 2, f->b[1], ORDO_ACCESS_WRITE); /* WAW */
    assert_int_equal(f->seen.count, 5);
    assert_ptr_equal(f->seen.origin[4], f->s[1]);
    /* Same stream: nothing. */
    int before = f->seen.count;
    run(f, 2, f->b[1], ORDO_ACCESS_READ_WRITE);
    run(f, 2, f->b[1], ORDO_ACCESS_READ);
    assert_int_equal(f->seen.count, before);
    ordo_tracker_metrics_t m = metrics(f);
    assert_int_equal(m.waits_emitted, 5);
    assert_int_equal(m.submissions, 8);
    fixture_free(f);
}

static void waits_on_one_origin_collapse(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    for (int i = 0; i < 3; ++i) {
        run(f, 0, f->b[i], ORDO_ACCESS_WRITE);
    }
    ordo_access_t all[3] = {
        {f->b[0], ORDO_ACCESS_READ}, {f->b[1], ORDO_ACCESS_READ}, {f->b[2], ORDO_ACCESS_READ}};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], all, 3, launch_noop, NULL));
    assert_int_equal(f->seen.count, 1);
    assert_int_equal(f->seen.point[0], 3); /* the latest of the three */
    fixture_free(f);
}

/* A write on stream 0, a read of it on stream 1 (which waits for 0), then
 * a write on stream 2: the write needs both earlier accesses, but its wait
 * for stream 1's read already orders stream 0's write. One wait, not two;
 * the covered one counts as elided. In either index order of the streams. */
static void a_wait_another_covers_is_not_emitted(void **state) {
    (void)state;
    for (int order = 0; order < 2; ++order) {
        fixture_t *f = fixture_make();
        int first = order ? 1 : 0, second = order ? 0 : 1;
        run(f, first, f->b[0], ORDO_ACCESS_WRITE);
        run(f, second, f->b[0], ORDO_ACCESS_READ);
        assert_int_equal(f->seen.count, 1);
        uint64_t elided = metrics(f).waits_elided;
        run(f, 2, f->b[0], ORDO_ACCESS_WRITE);
        assert_int_equal(f->seen.count, 2);
        assert_ptr_equal(f->seen.waiting[1], f->s[2]);
        assert_ptr_equal(f->seen.origin[1], f->s[second]);
        ordo_tracker_metrics_t m = metrics(f);
        assert_int_equal(m.waits_emitted, 2);
        assert_int_equal(m.waits_elided, elided + 1);
        /* Two separate buffers give no such cover: two waits. */
        run(f, first, f->b[1], ORDO_ACCESS_WRITE);
        run(f, second, f->b[2], ORDO_ACCESS_WRITE);
        ordo_access_t both[2] = {{f->b[1], ORDO_ACCESS_READ}, {f->b[2], ORDO_ACCESS_READ}};
        assert_ok(ordo_tracker_submit(f->tracker, f->s[2], both, 2, launch_noop, NULL));
        assert_int_equal(f->seen.count, 4);
        fixture_free(f);
    }
}

static void known_orderings_are_elided(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    /* The seed's last_synced: once stream 1 waited for stream 0 at point 2,
     * a buffer stream 0 wrote at point 1 needs no wait. */
    run(f, 0, f->b[0], ORDO_ACCESS_WRITE);
    run(f, 0, f->b[1], ORDO_ACCESS_WRITE);
    run(f, 1, f->b[1], ORDO_ACCESS_READ);
    assert_int_equal(f->seen.count, 1);
    run(f, 1, f->b[0], ORDO_ACCESS_READ);
    assert_int_equal(f->seen.count, 1);
    ordo_tracker_metrics_t m = metrics(f);
    assert_int_equal(m.waits_elided, 1);
    fixture_free(f);
}

static void transitive_knowledge_is_used(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    run(f, 0, f->b[0], ORDO_ACCESS_WRITE); /* A writes x */
    run(f, 1, f->b[0], ORDO_ACCESS_READ);  /* B waits for A */
    run(f, 1, f->b[1], ORDO_ACCESS_WRITE); /* B writes y */
    run(f, 2, f->b[1], ORDO_ACCESS_READ);  /* C waits for B ... */
    assert_int_equal(f->seen.count, 2);
    run(f, 2, f->b[0], ORDO_ACCESS_READ); /* ... so C knows A: no wait */
    assert_int_equal(f->seen.count, 2);
    /* A write on C needs A's write (point 1) and B's read (point 1) of x:
     * C knows both, through its wait for B at point 2. */
    run(f, 2, f->b[0], ORDO_ACCESS_WRITE);
    assert_int_equal(f->seen.count, 2);
    ordo_tracker_metrics_t m = metrics(f);
    assert_int_equal(m.waits_elided, 3);
    fixture_free(f);
}

static void seed_scenarios_hold(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    /* Bindings all from the current stream: no analysis, no wait. */
    run(f, 0, f->b[0], ORDO_ACCESS_WRITE);
    run(f, 0, f->b[1], ORDO_ACCESS_WRITE);
    ordo_access_t same[3] = {
        {f->b[0], ORDO_ACCESS_READ}, {f->b[1], ORDO_ACCESS_READ}, {f->b[0], ORDO_ACCESS_READ}};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], same, 3, launch_noop, NULL));
    assert_int_equal(f->seen.count, 0);
    /* A binding from a stream never synced: a wait, once. */
    run(f, 1, f->b[2], ORDO_ACCESS_WRITE);
    ordo_access_t mixed[3] = {
        {f->b[0], ORDO_ACCESS_READ}, {f->b[2], ORDO_ACCESS_READ}, {f->b[1], ORDO_ACCESS_READ}};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], mixed, 3, launch_noop, NULL));
    assert_int_equal(f->seen.count, 1);
    assert_ptr_equal(f->seen.origin[0], f->s[1]);
    assert_int_equal(f->seen.point[0], 1); /* stream 1's cursor */
    /* The other stream learnt nothing about stream 0. */
    run(f, 1, f->b[0], ORDO_ACCESS_READ);
    assert_int_equal(f->seen.count, 2);
    assert_int_equal(f->seen.point[1], 4); /* stream 0's cursor: 4 submissions */
    fixture_free(f);
}

static void duplicates_merge_to_read_write(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    run(f, 1, f->b[0], ORDO_ACCESS_READ); /* a reader on stream 1 */
    ordo_access_t twice[2] = {{f->b[0], ORDO_ACCESS_READ}, {f->b[0], ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], twice, 2, launch_noop, NULL));
    assert_int_equal(f->seen.count, 1); /* the write half waits for the reader */
    run(f, 2, f->b[0], ORDO_ACCESS_READ);
    assert_int_equal(f->seen.count, 2); /* and is now the last writer */
    assert_ptr_equal(f->seen.origin[1], f->s[0]);
    /* Zero accesses are allowed: ordered by the stream alone. */
    assert_ok(ordo_tracker_submit(f->tracker, f->s[2], NULL, 0, launch_noop, NULL));
    fixture_free(f);
}

static void split_prepare_finish(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_access_t w = {f->b[0], ORDO_ACCESS_WRITE};
    ordo_access_t r = {f->b[0], ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_prepare(f->tracker, f->s[0], &w, 1));
    assert_ok(ordo_stream_host_task(f->s[0], noop_task, NULL));
    assert_ok(ordo_tracker_finish(f->tracker, f->s[0], &w, 1));
    assert_ok(ordo_tracker_prepare(f->tracker, f->s[1], &r, 1));
    assert_int_equal(f->seen.count, 1);
    assert_ok(ordo_tracker_finish(f->tracker, f->s[1], &r, 1));
    fixture_free(f);
}

/* ordo/tracker.h: a prepare holds its buffers for its finish. Until then
 * nothing else names them (a submission or a second prepare would order
 * against a history the finish is still to change; a release would free
 * what the finish reads), and the finish must match: same stream, no
 * write that was prepared as a read. A refused finish leaves the prepare
 * open; buffers the prepare did not name are not held. */
static void a_prepare_holds_its_buffers_for_its_finish(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_tracker_t *tracker = f->tracker;
    ordo_access_t held[2] = {{f->b[0], ORDO_ACCESS_READ}, {f->b[1], ORDO_ACCESS_WRITE}};
    ordo_access_t w0 = {f->b[0], ORDO_ACCESS_WRITE};
    ordo_access_t r1 = {f->b[1], ORDO_ACCESS_READ};
    ordo_access_t other = {f->b[2], ORDO_ACCESS_WRITE};
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f->s[0], held, 2);
    assert_ok(ordo_tracker_prepare(tracker, f->s[0], held, 2));
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_submit, tracker, f->s[1], &r1, 1, launch_noop, NULL);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_submit_host, tracker, f->s[0], &w0, 1, noop_task, NULL);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_prepare, tracker, f->s[0], &r1, 1);
    REFUSED(ORDO_ERR_BUSY, ordo_buffer_release, f->b[1], NULL, NULL);
    /* A fault of a handle or an argument in any access answers first
     * (docs/ERRORS.md: the objects' state comes last). */
    ordo_access_t then_null[2] = {{f->b[1], ORDO_ACCESS_READ}, {NULL, ORDO_ACCESS_READ}};
    ordo_access_t then_bad[2] = {{f->b[1], ORDO_ACCESS_READ}, {f->b[2], (ordo_access_mode_t)7}};
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, f->s[1], then_null, 2,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f->s[1], then_bad, 2);
    assert_ok(ordo_tracker_submit(tracker, f->s[1], &other, 1, launch_noop, NULL));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f->s[1], held, 2);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f->s[0], &w0, 1);
    assert_ptr_not_equal(strstr(ordo_error_message(), "prepared as a read"), NULL);
    assert_ok(ordo_stream_host_task(f->s[0], noop_task, NULL));
    /* A write prepared may be finished as a read; each buffer is let go by
     * its own finish. */
    assert_ok(ordo_tracker_finish(tracker, f->s[0], &r1, 1));
    assert_ok(ordo_tracker_submit(tracker, f->s[1], &r1, 1, launch_noop, NULL));
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_submit, tracker, f->s[1], &w0, 1, launch_noop, NULL);
    assert_ok(ordo_tracker_finish(tracker, f->s[0], &held[0], 1));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f->s[0], &held[0], 1);
    assert_ok(ordo_tracker_submit(tracker, f->s[1], &w0, 1, launch_noop, NULL));
    /* A buffer named twice in one prepare keeps both modes. */
    ordo_access_t twice[2] = {{f->b[3], ORDO_ACCESS_READ}, {f->b[3], ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_prepare(tracker, f->s[2], twice, 2));
    ordo_access_t w3 = {f->b[3], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_finish(tracker, f->s[2], &w3, 1));
    fixture_free(f); /* every buffer released: none is held */
}

static void many_streams_read_then_one_writes(void **state) {
    (void)state;
    enum { N = 10 }; /* beyond the readers a buffer keeps inline */
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *streams[N];
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_stream_create(device, 0, &streams[i]));
    }
    observed_t seen = {0};
    assert_ok(ordo__tracker_set_wait_observer(tracker, observe, &seen));
    ordo_buffer_t *b;
    assert_ok(ordo_buffer_create(tracker, &b));
    ordo_access_t w = {b, ORDO_ACCESS_WRITE};
    ordo_access_t r = {b, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(tracker, streams[0], &w, 1, launch_noop, NULL));
    for (int i = 1; i < N; ++i) {
        assert_ok(ordo_tracker_submit(tracker, streams[i], &r, 1, launch_noop, NULL));
    }
    assert_int_equal(seen.count, N - 1); /* each reader waits for the writer */
    assert_ok(ordo_tracker_submit(tracker, streams[N - 1], &w, 1, launch_noop, NULL));
    /* The writer on the last stream waits for the other eight readers; the
     * writer on stream 0 is known through any of them. */
    assert_int_equal(seen.count, (N - 1) + (N - 2));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
    }
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_stream_destroy(streams[i]));
    }
}

/* ---- ordering with real data ------------------------------------------- */

typedef struct slot {
    int value;
} slot_t;

typedef struct copy_job {
    slot_t *from;
    slot_t *to;
    int add;
} copy_job_t;

static ordo_status_t copy_slow(void *ctx) {
    copy_job_t *job = ctx;
    test_sleep_ms(5);
    job->to->value = job->from->value + job->add;
    return ORDO_OK;
}

static ordo_status_t launch_copy(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, copy_slow, ctx);
}

static void streams_see_each_others_writes(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    slot_t x = {1};
    slot_t y = {0};
    slot_t z = {0};
    copy_job_t a = {&x, &y, 10};   /* y = x + 10, on stream 0 */
    copy_job_t b = {&y, &z, 100};  /* z = y + 100, on stream 1 */
    copy_job_t c = {&z, &x, 1000}; /* x = z + 1000, on stream 2 */
    ordo_access_t acc_a[2] = {{f->b[0], ORDO_ACCESS_READ}, {f->b[1], ORDO_ACCESS_WRITE}};
    ordo_access_t acc_b[2] = {{f->b[1], ORDO_ACCESS_READ}, {f->b[2], ORDO_ACCESS_WRITE}};
    ordo_access_t acc_c[2] = {{f->b[2], ORDO_ACCESS_READ}, {f->b[0], ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], acc_a, 2, launch_copy, &a));
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], acc_b, 2, launch_copy, &b));
    assert_ok(ordo_tracker_submit(f->tracker, f->s[2], acc_c, 2, launch_copy, &c));
    assert_ok(ordo_stream_synchronize(f->s[2], test_deadline()));
    assert_int_equal(x.value, 1111);
    fixture_free(f);
}

/* ---- deferred reclamation ---------------------------------------------- */

typedef struct gate {
    _Atomic int open;
    _Atomic int left; /* the gate task has returned */
} gate_t;

static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->open) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    atomic_store(&g->left, 1);
    return ORDO_OK;
}

static ordo_status_t fail_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static ordo_status_t launch_gate(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, gate_task, ctx);
}

typedef struct reclaimed {
    _Atomic int calls;
    _Atomic(pthread_t) thread;
} reclaimed_t;

static void on_reclaim(void *ctx) {
    reclaimed_t *r = ctx;
    atomic_store(&r->thread, pthread_self());
    atomic_fetch_add(&r->calls, 1);
}

static void release_defers_until_uses_complete(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate = {0};
    ordo_access_t w = {f->b[3], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], &w, 1, launch_gate, &gate));
    reclaimed_t rec = {0};
    assert_ok(ordo_buffer_release(f->b[3], on_reclaim, &rec));
    /* It did not block: the gate only opens below (or at the test
     * deadline), so the use it would have waited for has not ended. */
    assert_false(atomic_load(&gate.left));
    f->b[3] = NULL;
    test_sleep_ms(10);
    assert_int_equal(atomic_load(&rec.calls), 0);
    ordo_tracker_metrics_t m = metrics(f);
    assert_int_equal(m.reclamations_pending, 1);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_false(pthread_equal(atomic_load(&rec.thread), pthread_self()));
    m = metrics(f);
    assert_int_equal(m.reclamations_pending, 0);
    assert_int_equal(m.reclamations_done, 1);
    /* An idle buffer is reclaimed at once, here. */
    ordo_buffer_t *idle;
    assert_ok(ordo_buffer_create(f->tracker, &idle));
    reclaimed_t now = {0};
    assert_ok(ordo_buffer_release(idle, on_reclaim, &now));
    assert_int_equal(atomic_load(&now.calls), 1);
    assert_ok(ordo_buffer_create(f->tracker, &f->b[3]));
    fixture_free(f);
}

/* Uses that have run need no deferral, whether a record covers them or
 * not: the release reclaims at once, on the releasing thread, every time. */
static void release_after_the_uses_ran_reclaims_at_once(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t *f = fixture_make();
    for (int round = 0; round < 50; ++round) {
        ordo_buffer_t *b;
        assert_ok(ordo_buffer_create(f->tracker, &b));
        run(f, 0, b, ORDO_ACCESS_WRITE);
        run(f, 1, b, ORDO_ACCESS_READ); /* records stream 0's point, not 1's */
        for (int i = 0; i < round % 12; ++i) {
            run(f, 1, f->b[0], ORDO_ACCESS_WRITE); /* later work, past the finishes kept */
        }
        assert_ok(ordo_stream_synchronize(f->s[0], test_deadline()));
        assert_ok(ordo_stream_synchronize(f->s[1], test_deadline()));
        reclaimed_t rec = {0};
        assert_ok(ordo_buffer_release(b, on_reclaim, &rec));
        assert_int_equal(atomic_load(&rec.calls), 1);
        assert_true(pthread_equal(atomic_load(&rec.thread), pthread_self()));
    }
    ordo_tracker_metrics_t m = metrics(f);
    assert_int_equal(m.reclamations_pending, 0);
    assert_int_equal(m.reclamations_done, 50);
    fixture_free(f);
}

/* A use that has run is known without waiting for the stream to go idle:
 * the stream is held at a gate behind it, and the release still reclaims
 * at once. A use behind the gate still defers. */
static void release_of_a_use_behind_busy_work(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t *f = fixture_make();
    ordo_event_t *after_use;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &after_use));
    ordo_buffer_t *ran, *held;
    assert_ok(ordo_buffer_create(f->tracker, &ran));
    assert_ok(ordo_buffer_create(f->tracker, &held));
    run(f, 0, ran, ORDO_ACCESS_WRITE);
    assert_ok(ordo_event_record(after_use, f->s[0]));
    gate_t gate = {0};
    ordo_access_t none = {f->b[0], ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], &none, 1, launch_gate, &gate));
    run(f, 0, held, ORDO_ACCESS_WRITE);
    assert_ok(ordo_event_synchronize(after_use, test_deadline()));
    reclaimed_t rec_ran = {0}, rec_held = {0};
    assert_ok(ordo_buffer_release(ran, on_reclaim, &rec_ran));
    assert_int_equal(atomic_load(&rec_ran.calls), 1);
    assert_true(pthread_equal(atomic_load(&rec_ran.thread), pthread_self()));
    assert_ok(ordo_buffer_release(held, on_reclaim, &rec_held));
    assert_int_equal(atomic_load(&rec_held.calls), 0);
    assert_false(atomic_load(&gate.left)); /* the gate still held it */
    atomic_store(&gate.open, 1);
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_int_equal(atomic_load(&rec_held.calls), 1);
    assert_ok(ordo_event_destroy(after_use));
    fixture_free(f);
}

/* The op count a finish notes covers whatever was enqueued on the stream
 * by then, from anywhere: another tracker's work on the same stream, or
 * ops enqueued between ordo_tracker_prepare and ordo_tracker_finish. Reclamation is never
 * early, and at once when those ops have run too. */
static void release_with_other_work_on_the_stream(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_tracker_t *other;
    assert_ok(ordo_tracker_create(device, &other));
    ordo_buffer_t *mine, *theirs;
    assert_ok(ordo_buffer_create(f->tracker, &mine));
    assert_ok(ordo_buffer_create(other, &theirs));
    /* Split form: a gate enqueued before the finish counts as the use's. */
    gate_t gate = {0};
    ordo_access_t w = {mine, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_prepare(f->tracker, f->s[0], &w, 1));
    assert_ok(ordo_stream_host_task(f->s[0], noop_task, NULL));
    assert_ok(ordo_stream_host_task(f->s[0], gate_task, &gate));
    assert_ok(ordo_tracker_finish(f->tracker, f->s[0], &w, 1));
    /* The other tracker's work behind it on the same stream. */
    ordo_access_t tw = {theirs, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(other, f->s[0], &tw, 1, launch_noop, NULL));
    reclaimed_t rec = {0};
    assert_ok(ordo_buffer_release(mine, on_reclaim, &rec));
    assert_int_equal(atomic_load(&rec.calls), 0); /* the gate is the use's: held */
    atomic_store(&gate.open, 1);
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_int_equal(atomic_load(&rec.calls), 1);
    /* Both trackers' work has run: the other tracker's release is at once
     * where the backend publishes its streams' progress (not CUDA's: see
     * the skip list), else once a recorded point is reached. */
    assert_ok(ordo_stream_synchronize(f->s[0], test_deadline()));
    reclaimed_t rec_theirs = {0};
    assert_ok(ordo_buffer_release(theirs, on_reclaim, &rec_theirs));
    if (test_device_is("cuda")) {
        assert_ok(ordo_tracker_drain(other, test_deadline()));
    } else {
        assert_true(pthread_equal(atomic_load(&rec_theirs.thread), pthread_self()));
    }
    assert_int_equal(atomic_load(&rec_theirs.calls), 1);
    assert_ok(ordo_tracker_destroy(other));
    fixture_free(f);
}

static void failed_stream_still_reclaims(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate = {0};
    ordo_access_t w = {f->b[3], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_gate, &gate));
    assert_ok(ordo_stream_host_task(f->s[0], fail_task, NULL));
    reclaimed_t rec = {0};
    assert_ok(ordo_buffer_release(f->b[3], on_reclaim, &rec));
    f->b[3] = NULL;
    atomic_store(&gate.open, 1);
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_ok(ordo_buffer_create(f->tracker, &f->b[3]));
    fixture_free(f);
}

/* A release that succeeds leaves the thread's message alone (ordo/status.h),
 * also when a stream that used the buffer has failed: it read that
 * stream's failed timeline through ordo_signal_query, whose refusal wrote
 * the message. */
static void a_successful_release_leaves_the_message_alone(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate = {0};
    assert_ok(ordo_stream_host_task(f->s[1], gate_task, &gate));
    ordo_access_t w = {f->b[2], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], &w, 1, launch_noop, NULL));
    assert_ok(ordo_stream_host_task(f->s[1], fail_task, NULL));
    atomic_store(&gate.open, 1);
    assert_status(ordo_stream_synchronize(f->s[1], test_deadline()), ORDO_ERR_ABORTED);
    /* A read elsewhere records stream 1's point: on the failed stream the
     * record fails its timeline. */
    ordo_access_t r = {f->b[2], ORDO_ACCESS_READ};
    ordo_status_t st = ordo_tracker_submit(f->tracker, f->s[0], &r, 1, launch_noop, NULL);
    assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    uint64_t value = 0;
    assert_status(ordo_signal_query(NULL, &value), ORDO_ERR_INVALID_HANDLE);
    char before[256];
    snprintf(before, sizeof before, "%s", ordo_error_message());
    assert_ok(ordo_buffer_release(f->b[2], NULL, NULL));
    assert_string_equal(ordo_error_message(), before);
    assert_ok(ordo_buffer_create(f->tracker, &f->b[2]));
    fixture_free(f);
}

static void failed_stream_does_not_imply_other_uses(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t long_read = {0};
    /* A long read on stream 0. */
    ordo_access_t r = {f->b[3], ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], &r, 1, launch_gate, &long_read));
    /* Stream 1 fails, then writes the buffer: its wait for the read is
     * skipped, as everything on a failed stream is. */
    assert_ok(ordo_stream_host_task(f->s[1], fail_task, NULL));
    assert_status(ordo_stream_synchronize(f->s[1], test_deadline()), ORDO_ERR_ABORTED);
    ordo_access_t w = {f->b[3], ORDO_ACCESS_WRITE};
    ordo_status_t st = ordo_tracker_submit(f->tracker, f->s[1], &w, 1, launch_noop, NULL);
    assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    reclaimed_t rec = {0};
    assert_ok(ordo_buffer_release(f->b[3], on_reclaim, &rec));
    f->b[3] = NULL;
    /* The read on stream 0 still runs: the buffer must outlive it. */
    test_sleep_ms(20);
    assert_int_equal(atomic_load(&rec.calls), 0);
    atomic_store(&long_read.open, 1);
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_ok(ordo_buffer_create(f->tracker, &f->b[3]));
    fixture_free(f);
}

/* ---- a tracker that holds its device and owns streams ------------------- */

static uint32_t device_refs(void) {
    return atomic_load(&device->refs);
}

static ordo_status_t count_task(void *ctx) {
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

/* The message of the last failed call contains text. */
#define assert_message_has(text)                                                                   \
    do {                                                                                           \
        if (!strstr(ordo_error_message(), (text))) {                                               \
            fail_msg("message \"%s\" lacks \"%s\"", ordo_error_message(), (text));                 \
        }                                                                                          \
    } while (0)

/* Opened by name, two streams of its own, a producer and a consumer:
 * close waits for the work, then leaves nothing (no block, no reference
 * on the device). */
static void open_and_close(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    uint32_t refs = device_refs();
    ordo_tracker_t *tracker;
    ordo_stream_t *a, *b;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_int_equal(device_refs(), refs + 1); /* the shared runtime: the tracker's one */
    assert_ok(ordo_tracker_stream_create(tracker, 0, &a));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &b));
    ordo_device_t *of_stream;
    assert_ok(ordo_stream_device(a, &of_stream));
    assert_ptr_equal(of_stream, device);
    _Atomic int ran = 0;
    for (int i = 0; i < 8; ++i) {
        ordo_buffer_t *buf;
        assert_ok(ordo_buffer_create(tracker, &buf));
        ordo_access_t w = {buf, ORDO_ACCESS_WRITE}, r = {buf, ORDO_ACCESS_READ};
        assert_ok(ordo_tracker_submit_host(tracker, a, &w, 1, count_task, (void *)&ran));
        assert_ok(ordo_tracker_submit_host(tracker, b, &r, 1, count_task, (void *)&ran));
        assert_ok(ordo_buffer_release(buf, NULL, NULL));
    }
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), 16);
    assert_int_equal(device_refs(), refs);
    assert_int_equal(refusal_live_blocks(), blocks);
}

typedef struct raise_later {
    ordo_signal_t *gate;
    unsigned after_ms;
} raise_later_t;

static void *raise_gate_later(void *arg) {
    const raise_later_t *r = arg;
    test_sleep_ms(r->after_ms);
    (void)ordo_signal_advance(r->gate, 1);
    return NULL;
}

/* Work still pending when close is called (held on a gate another thread
 * raises, usually while close waits) has all run when close returns OK,
 * on an owned stream the tracker ordered and on one it never did (work
 * enqueued on it directly): close drops nothing. */
static void close_waits_for_pending_work(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    ordo_tracker_t *tracker;
    ordo_stream_t *ordered, *direct;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &ordered));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &direct));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(ordered, gate, 1));
    assert_ok(ordo_stream_wait(direct, gate, 1));
    _Atomic int ran = 0;
    ordo_buffer_t *buf;
    assert_ok(ordo_buffer_create(tracker, &buf));
    ordo_access_t w = {buf, ORDO_ACCESS_WRITE};
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_tracker_submit_host(tracker, ordered, &w, 1, count_task, (void *)&ran));
        assert_ok(ordo_stream_host_task(direct, count_task, (void *)&ran));
    }
    reclaimed_t rec = {0};
    assert_ok(ordo_buffer_release(buf, on_reclaim, &rec)); /* its uses are held */
    raise_later_t later = {gate, 20};
    pthread_t thread = test_thread_start(raise_gate_later, &later);
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), 8);
    assert_int_equal(atomic_load(&rec.calls), 1);
    pthread_join(thread, NULL);
    assert_ok(ordo_signal_destroy(gate));
    assert_int_equal(refusal_live_blocks(), blocks);
}

/* A close whose wait times out tears nothing down: the tracker, its
 * streams and their work stay (the owned stream's destroy is still
 * refused, new work is still taken); a later close succeeds, also for a
 * stream the tracker owns but never ordered. */
static void close_that_times_out_leaves_all_intact(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    uint32_t refs = device_refs();
    ordo_tracker_t *tracker;
    ordo_stream_t *held, *unordered;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &held));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &unordered));
    assert_ok(ordo_stream_set_name(held, "held"));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(held, gate, 1));
    _Atomic int ran = 0;
    ordo_buffer_t *buf;
    assert_ok(ordo_buffer_create(tracker, &buf));
    ordo_access_t w = {buf, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, held, &w, 1, count_task, (void *)&ran));
    assert_ok(ordo_buffer_release(buf, NULL, NULL));

    assert_status(ordo_tracker_close(tracker, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
    assert_message_has("ordo_tracker_close: ");
    assert_message_has("stream held still had work pending at the deadline");
    assert_int_equal(atomic_load(&ran), 0);
    /* All there. */
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_int_equal(m.reclamations_pending, 1);
    assert_int_equal(device_refs(), refs + 3); /* the tracker's, and each stream's */
    assert_status(ordo_stream_destroy(held), ORDO_ERR_BUSY);
    assert_ok(ordo_stream_status(held));
    assert_ok(ordo_tracker_submit_host(tracker, held, NULL, 0, count_task, (void *)&ran));

    /* The same for a stream held that the tracker never ordered. */
    ordo_signal_t *gate2 = test_signal_make(0);
    assert_ok(ordo_stream_wait(unordered, gate2, 1));
    assert_ok(ordo_stream_host_task(unordered, count_task, (void *)&ran));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_status(ordo_tracker_close(tracker, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
    assert_message_has("ordo_tracker_close: ");
    assert_int_equal(atomic_load(&ran), 2); /* the held stream's work did run */
    assert_ok(ordo_signal_advance(gate2, 1));
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), 3);
    assert_int_equal(device_refs(), refs);
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_signal_destroy(gate2));
    assert_int_equal(refusal_live_blocks(), blocks);
}

static ordo_status_t fail_with_text(void *ctx) {
    (void)ctx;
    return ordo_fail(ORDO_ERR_ABORTED, "decoder: bad frame 7");
}

/* A failed stream: close returns the failure with its text and tears
 * nothing down; the failure stays, so a second close returns it again;
 * ordo_tracker_destroy then completes the teardown (streams and the
 * device reference included). */
static void close_after_a_failure_then_destroy(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    uint32_t refs = device_refs();
    ordo_tracker_t *tracker;
    ordo_stream_t *good, *bad;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &good));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &bad));
    assert_ok(ordo_stream_set_name(bad, "decoder"));
    ordo_buffer_t *buf;
    assert_ok(ordo_buffer_create(tracker, &buf));
    ordo_access_t r = {buf, ORDO_ACCESS_READ};
    _Atomic int ran = 0;
    assert_ok(ordo_tracker_submit_host(tracker, good, &r, 1, count_task, (void *)&ran));
    assert_ok(ordo_tracker_submit_host(tracker, bad, &r, 1, fail_with_text, NULL));
    assert_ok(ordo_buffer_release(buf, NULL, NULL));
    for (int attempt = 0; attempt < 2; ++attempt) {
        assert_status(ordo_tracker_close(tracker, test_deadline()), ORDO_ERR_ABORTED);
        assert_message_has("ordo_tracker_close: stream decoder: ");
        assert_message_has("decoder: bad frame 7");
        assert_status(ordo_stream_status(bad), ORDO_ERR_ABORTED); /* there to inspect */
        assert_int_equal(device_refs(), refs + 3);
    }
    assert_int_equal(atomic_load(&ran), 1);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_int_equal(device_refs(), refs);
    assert_int_equal(refusal_live_blocks(), blocks);
}

/* A failure that propagated: the stream the tracker used first (the
 * consumer) failed only by waiting for the producer's failed work. Close
 * names the producer, where the failure began, with its text. */
static void close_names_the_stream_a_failure_began_on(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *consumer, *producer;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &consumer));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &producer));
    assert_ok(ordo_stream_set_name(consumer, "consumer"));
    assert_ok(ordo_stream_set_name(producer, "producer"));
    ordo_buffer_t *first, *data;
    assert_ok(ordo_buffer_create(tracker, &first));
    assert_ok(ordo_buffer_create(tracker, &data));
    ordo_access_t r_first = {first, ORDO_ACCESS_READ}, w_data = {data, ORDO_ACCESS_WRITE},
                  r_data = {data, ORDO_ACCESS_READ};
    _Atomic int ran = 0;
    /* The producer fails only once the consumer's wait for it is queued
     * (a submission waiting on a stream failed already is refused). */
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(producer, gate, 1));
    assert_ok(ordo_tracker_submit_host(tracker, consumer, &r_first, 1, count_task, (void *)&ran));
    assert_ok(ordo_tracker_submit_host(tracker, producer, &w_data, 1, fail_with_text, NULL));
    assert_ok(ordo_tracker_submit_host(tracker, consumer, &r_data, 1, count_task, (void *)&ran));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_buffer_release(first, NULL, NULL));
    assert_ok(ordo_buffer_release(data, NULL, NULL));
    assert_status(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_ABORTED);
    assert_message_has("ordo_tracker_synchronize: stream producer: ");
    assert_message_has("decoder: bad frame 7");
    assert_status(ordo_tracker_close(tracker, test_deadline()), ORDO_ERR_ABORTED);
    assert_message_has("ordo_tracker_close: stream producer: ");
    assert_status(ordo_stream_status(consumer), ORDO_ERR_ABORTED); /* it failed too */
    assert_int_equal(atomic_load(&ran), 1);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_signal_destroy(gate));
}

/* Live buffers: close refuses at once (it does not wait for the deadline,
 * nor release or leak them), and closes once they are released. */
static void close_refuses_live_buffers(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    ordo_tracker_t *tracker;
    ordo_stream_t *s;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &s));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(s, gate, 1));
    ordo_buffer_t *buf;
    assert_ok(ordo_buffer_create(tracker, &buf));
    ordo_access_t w = {buf, ORDO_ACCESS_WRITE};
    _Atomic int ran = 0;
    assert_ok(ordo_tracker_submit_host(tracker, s, &w, 1, count_task, (void *)&ran));
    /* Had it waited, the held stream would have made it ORDO_ERR_TIMEOUT. */
    assert_status(ordo_tracker_close(tracker, test_deadline()), ORDO_ERR_BUSY);
    assert_message_has("ordo_tracker_close: 1 buffer(s) still live: release them first");
    assert_int_equal(atomic_load(&ran), 0);
    assert_status(ordo_tracker_destroy(tracker), ORDO_ERR_BUSY);
    assert_ok(ordo_tracker_submit_host(tracker, s, &w, 1, count_task, (void *)&ran));
    assert_ok(ordo_buffer_release(buf, NULL, NULL));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), 2);
    assert_ok(ordo_signal_destroy(gate));
    assert_int_equal(refusal_live_blocks(), blocks);
}

/* A tracker from ordo_tracker_create may own streams too: close destroys
 * them and the tracker, and leaves the caller's device reference and the
 * caller's own streams to the caller; ordo_tracker_destroy does the same
 * without the wait. */
static void a_created_tracker_closes_what_it_owns(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    uint32_t refs = device_refs();
    for (int by_destroy = 0; by_destroy < 2; ++by_destroy) {
        ordo_tracker_t *tracker;
        ordo_stream_t *mine, *owned;
        assert_ok(ordo_tracker_create(device, &tracker));
        assert_ok(ordo_stream_create(device, 0, &mine));
        assert_ok(ordo_tracker_stream_create(tracker, 0, &owned));
        ordo_buffer_t *buf;
        assert_ok(ordo_buffer_create(tracker, &buf));
        ordo_access_t w = {buf, ORDO_ACCESS_WRITE}, r = {buf, ORDO_ACCESS_READ};
        _Atomic int ran = 0;
        assert_ok(ordo_tracker_submit_host(tracker, mine, &w, 1, count_task, (void *)&ran));
        assert_ok(ordo_tracker_submit_host(tracker, owned, &r, 1, count_task, (void *)&ran));
        assert_ok(ordo_buffer_release(buf, NULL, NULL));
        assert_int_equal(device_refs(), refs + 3);
        if (by_destroy) {
            assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
            assert_ok(ordo_tracker_destroy(tracker));
        } else {
            assert_ok(ordo_tracker_close(tracker, test_deadline()));
        }
        assert_int_equal(atomic_load(&ran), 2);
        assert_int_equal(device_refs(), refs + 1); /* the caller's stream's */
        assert_ok(ordo_stream_host_task(mine, count_task, (void *)&ran));
        assert_ok(ordo_stream_synchronize(mine, test_deadline()));
        assert_ok(ordo_stream_destroy(mine));
        assert_int_equal(device_refs(), refs);
    }
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info)); /* the caller's reference still holds it */
    assert_int_equal(refusal_live_blocks(), blocks);
}

/* The streams a tracker owns are the tracker's to destroy: the caller's
 * destroy is refused, and the stream stays usable. */
static void destroying_an_owned_stream_is_refused(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *owned;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &owned));
    assert_status(ordo_stream_destroy(owned), ORDO_ERR_BUSY);
    assert_message_has("ordo_stream_destroy: stream ");
    assert_message_has("belongs to the tracker");
    assert_message_has("ordo_tracker_close");
    _Atomic int ran = 0;
    assert_ok(ordo_stream_host_task(owned, count_task, (void *)&ran));
    assert_ok(ordo_stream_synchronize(owned, test_deadline()));
    assert_int_equal(atomic_load(&ran), 1);
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
}

/* An owned stream another tracker still keeps in its table: the owner's
 * close and destroy are refused, nothing done, until the other goes. Its
 * own table's use does not count. */
static void an_owned_stream_in_another_table_keeps_the_owner(void **state) {
    (void)state;
    size_t blocks = refusal_live_blocks();
    ordo_tracker_t *owner, *other;
    ordo_stream_t *owned;
    assert_ok(ordo_tracker_open(test_device_name(), &owner));
    assert_ok(ordo_tracker_create(device, &other));
    assert_ok(ordo_tracker_stream_create(owner, 0, &owned));
    _Atomic int ran = 0;
    assert_ok(ordo_tracker_submit_host(owner, owned, NULL, 0, count_task, (void *)&ran));
    assert_ok(ordo_tracker_submit_host(other, owned, NULL, 0, count_task, (void *)&ran));
    assert_status(ordo_tracker_close(owner, test_deadline()), ORDO_ERR_BUSY);
    assert_message_has("ordo_tracker_close: stream ");
    assert_message_has("still ordered by 1 tracker(s)");
    assert_status(ordo_tracker_destroy(owner), ORDO_ERR_BUSY);
    assert_message_has("ordo_tracker_destroy: stream ");
    assert_ok(ordo_tracker_submit_host(owner, owned, NULL, 0, count_task, (void *)&ran));
    assert_ok(ordo_tracker_synchronize(other, test_deadline()));
    assert_ok(ordo_tracker_destroy(other));
    assert_ok(ordo_tracker_close(owner, test_deadline()));
    assert_int_equal(atomic_load(&ran), 3);
    assert_int_equal(refusal_live_blocks(), blocks);
}

/* A stream the tracker owns has its place among the streams it orders:
 * the caller's streams cannot take it, and it is made only where there is
 * one, so every owned stream can be ordered. */
static void a_tracker_keeps_a_place_for_each_stream_it_owns(void **state) {
    (void)state;
    enum { MAX = ORDO_TRACKER_MAX_STREAMS };
    ordo_tracker_t *tracker;
    ordo_stream_t *owned, *theirs[MAX];
    _Atomic int ran = 0;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &owned));
    for (int i = 0; i < MAX; ++i) {
        assert_ok(ordo_stream_create(device, 0, &theirs[i]));
    }
    for (int i = 0; i < MAX - 1; ++i) {
        assert_ok(ordo_tracker_submit_host(tracker, theirs[i], NULL, 0, count_task, (void *)&ran));
    }
    /* The last place is the owned stream's. */
    assert_status(
        ordo_tracker_submit_host(tracker, theirs[MAX - 1], NULL, 0, count_task, (void *)&ran),
        ORDO_ERR_RESOURCE_EXHAUSTED);
    assert_message_has("ordo_tracker_submit_host: a tracker orders at most 64 streams: it orders "
                       "63 and keeps a place for the 1 it owns and has not ordered yet");
    ordo_stream_t *more = (ordo_stream_t *)1;
    assert_status(ordo_tracker_stream_create(tracker, 0, &more), ORDO_ERR_RESOURCE_EXHAUSTED);
    assert_null(more);
    assert_message_has("ordo_tracker_stream_create: the tracker orders 63 streams and owns 1 "
                       "more it has not ordered yet: at most 64 in all");
    assert_ok(ordo_tracker_submit_host(tracker, owned, NULL, 0, count_task, (void *)&ran));
    assert_status(ordo_tracker_stream_create(tracker, 0, &more), ORDO_ERR_RESOURCE_EXHAUSTED);
    assert_message_has("the tracker orders 64 streams and owns 0 more");
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), MAX);
    for (int i = 0; i < MAX; ++i) {
        assert_ok(ordo_stream_destroy(theirs[i]));
    }
}

typedef struct closer {
    ordo_tracker_t *tracker;
    _Atomic ordo_status_t status;
    char message[256];
} closer_t;

static ordo_status_t close_from_task(void *ctx) {
    closer_t *c = ctx;
    ordo_status_t st = ordo_tracker_close(c->tracker, ORDO_DEADLINE_NOW);
    snprintf(c->message, sizeof c->message, "%s", ordo_error_message());
    atomic_store(&c->status, st);
    return ORDO_OK;
}

/* Close from a host task on one of the tracker's streams (owned, or the
 * caller's and ordered by it) would wait for itself: refused, nothing
 * done (with the deadline now, a wait would have been ORDO_ERR_TIMEOUT). */
static void close_on_a_stream_thread_is_refused(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *owned, *mine;
    assert_ok(ordo_tracker_open(test_device_name(), &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &owned));
    assert_ok(ordo_stream_create(device, 0, &mine));
    ordo_stream_t *streams[2] = {owned, mine};
    for (int i = 0; i < 2; ++i) {
        closer_t c = {.tracker = tracker, .status = ORDO_OK};
        assert_ok(ordo_tracker_submit_host(tracker, streams[i], NULL, 0, close_from_task, &c));
        assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
        assert_int_equal(atomic_load(&c.status), ORDO_ERR_BUSY);
        if (!strstr(c.message, "ordo_tracker_close: ") || !strstr(c.message, "thread")) {
            fail_msg("message \"%s\"", c.message);
        }
    }
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_ok(ordo_stream_destroy(mine));
}

/* ---- bad input ------------------------------------------------------------ */

static void bad_input_is_refused(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_access_t ok = {f->b[0], ORDO_ACCESS_READ};
    assert_status(ordo_tracker_submit(NULL, f->s[0], &ok, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_submit(f->tracker, NULL, &ok, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], NULL, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &ok, 1, NULL, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &ok, ORDO_TRACKER_MAX_ACCESSES + 1,
                                      launch_noop, NULL),
                  ORDO_ERR_OUT_OF_RANGE);
    ordo_access_t bad_mode = {f->b[0], (ordo_access_mode_t)7};
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &bad_mode, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    ordo_access_t null_buffer = {NULL, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_prepare(f->tracker, f->s[0], &null_buffer, 1),
                  ORDO_ERR_INVALID_HANDLE);
    uint64_t garbage[32] = {0};
    ordo_access_t fake = {(ordo_buffer_t *)garbage, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_finish(f->tracker, f->s[0], &fake, 1), ORDO_ERR_INVALID_HANDLE);
    /* A buffer of another tracker. */
    ordo_tracker_t *other;
    ordo_buffer_t *foreign;
    assert_ok(ordo_tracker_create(device, &other));
    assert_ok(ordo_buffer_create(other, &foreign));
    ordo_access_t wrong = {foreign, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &wrong, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    /* Not destroyable while buffers live. */
    assert_status(ordo_tracker_destroy(other), ORDO_ERR_BUSY);
    assert_ok(ordo_buffer_release(foreign, NULL, NULL));
    assert_ok(ordo_tracker_destroy(other));
    /* A released buffer. */
    ordo_buffer_t *gone;
    assert_ok(ordo_buffer_create(f->tracker, &gone));
    gate_t gate = {0};
    ordo_access_t w = {gone, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], &w, 1, launch_gate, &gate));
    assert_ok(ordo_buffer_release(gone, NULL, NULL)); /* pending: memory kept */
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_noop, NULL),
                  ORDO_ERR_DESTROYED);
    assert_status(ordo_buffer_release(gone, NULL, NULL), ORDO_ERR_DESTROYED);
    atomic_store(&gate.open, 1);
    /* A stream of another device runtime. */
    ordo_device_t *owned;
    ordo_stream_t *alien;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &owned));
    assert_ok(ordo_stream_create(owned, 0, &alien));
    assert_status(ordo_tracker_submit(f->tracker, alien, &ok, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_stream_destroy(alien));
    assert_ok(ordo_device_release(owned));
    /* Null outputs. */
    assert_status(ordo_tracker_create(NULL, &other), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_create(device, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_buffer_create(f->tracker, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_buffer_create(NULL, &gone), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_metrics(f->tracker, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_tracker_drain(NULL, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_buffer_release(NULL, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    fixture_free(f);
}

static ordo_status_t launch_returns(void *ctx, ordo_stream_t *stream) {
    (void)stream;
    return *(const ordo_status_t *)ctx;
}

static ordo_status_t launch_fails_inside(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, NULL, NULL);
}

/* A launch function that releases a buffer its submission names: the
 * release freed the buffer at once (no use of it was running), and the
 * finish then wrote its use into freed memory. Refused now, and the
 * buffer is released after the submission. */
typedef struct release_inside {
    ordo_buffer_t *buffer;
    ordo_status_t status;
} release_inside_t;

static ordo_status_t launch_releases(void *ctx, ordo_stream_t *stream) {
    (void)stream;
    release_inside_t *r = ctx;
    r->status = ordo_buffer_release(r->buffer, NULL, NULL);
    return ORDO_OK;
}

static void a_launch_function_cannot_release_its_buffers(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_buffer_t *b = NULL;
    assert_ok(ordo_buffer_create(f->tracker, &b));
    release_inside_t r = {b, ORDO_OK};
    ordo_access_t w = {b, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_releases, &r));
    assert_int_equal(r.status, ORDO_ERR_BUSY);
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(f->tracker, test_deadline()));
    fixture_free(f);
}

/* A launch function of ordo_tracker_submit runs between the submission's
 * waits and the record of its accesses: a submission, a prepare or
 * finish, a replay, a recording or the tracker's teardown made there was
 * taken (a nested write went unordered against the open one; a destroy
 * freed the tracker under the finish). Each is refused with a message
 * naming the launch, and works once the submission has returned. */
typedef struct calls_inside {
    fixture_t *f;
    ordo_status_t status[7];
    char message[7][320];
} calls_inside_t;

static ordo_status_t launch_calls_the_tracker(void *ctx, ordo_stream_t *stream) {
    calls_inside_t *c = ctx;
    ordo_tracker_t *tracker = c->f->tracker;
    ordo_access_t same = {c->f->b[0], ORDO_ACCESS_WRITE};
    ordo_access_t other = {c->f->b[1], ORDO_ACCESS_WRITE};
    ordo_status_t *st = c->status;
    st[0] = ordo_tracker_submit_host(tracker, c->f->s[1], &same, 1, noop_task, NULL);
    snprintf(c->message[0], sizeof c->message[0], "%s", ordo_error_message());
    st[1] = ordo_tracker_submit(tracker, c->f->s[1], &other, 1, launch_noop, NULL);
    snprintf(c->message[1], sizeof c->message[1], "%s", ordo_error_message());
    st[2] = ordo_tracker_prepare(tracker, c->f->s[1], &other, 1);
    snprintf(c->message[2], sizeof c->message[2], "%s", ordo_error_message());
    st[3] = ordo_tracker_finish(tracker, c->f->s[1], &other, 1);
    snprintf(c->message[3], sizeof c->message[3], "%s", ordo_error_message());
    st[4] = ordo_tracker_record_begin(tracker);
    snprintf(c->message[4], sizeof c->message[4], "%s", ordo_error_message());
    st[5] = ordo_tracker_destroy(tracker);
    snprintf(c->message[5], sizeof c->message[5], "%s", ordo_error_message());
    st[6] = ordo_tracker_close(tracker, test_deadline());
    snprintf(c->message[6], sizeof c->message[6], "%s", ordo_error_message());
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static void a_launch_function_cannot_submit_or_tear_down(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    calls_inside_t c = {.f = f};
    ordo_access_t w = {f->b[0], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_calls_the_tracker, &c));
    const char *calls[7] = {"ordo_tracker_submit_host",  "ordo_tracker_submit",
                            "ordo_tracker_prepare",      "ordo_tracker_finish",
                            "ordo_tracker_record_begin", "ordo_tracker_destroy",
                            "ordo_tracker_close"};
    for (int i = 0; i < 7; ++i) {
        if (c.status[i] != ORDO_ERR_BUSY || strncmp(c.message[i], calls[i], strlen(calls[i])) ||
            c.message[i][strlen(calls[i])] != ':' ||
            !strstr(c.message[i], "inside a launch function of ordo_tracker_submit")) {
            fail_msg("%s inside a launch function: %s (%s)", calls[i],
                     ordo_status_name(c.status[i]), c.message[i]);
        }
    }
    /* Nothing was taken: the tracker orders the next submissions. */
    assert_ok(ordo_tracker_submit_host(f->tracker, f->s[1], &w, 1, noop_task, NULL));
    assert_int_equal(metrics(f).submissions, 2);
    fixture_free(f);
}

/* The refusals hold however deep the call is: A's launch function submits
 * on tracker B, whose launch function calls A (its destroy freed A under
 * A's finish when only the innermost launch was known), while B's own
 * calls from A's launch function work. */
typedef struct nested_launch {
    fixture_t *f;
    ordo_tracker_t *other;
    ordo_buffer_t *other_buffer;
    ordo_status_t destroy_outer, submit_outer, submit_other;
} nested_launch_t;

static ordo_status_t launch_calls_the_outer_tracker(void *ctx, ordo_stream_t *stream) {
    nested_launch_t *n = ctx;
    n->destroy_outer = ordo_tracker_destroy(n->f->tracker);
    ordo_access_t w = {n->f->b[1], ORDO_ACCESS_WRITE};
    n->submit_outer = ordo_tracker_submit_host(n->f->tracker, stream, &w, 1, noop_task, NULL);
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static ordo_status_t launch_submits_on_another_tracker(void *ctx, ordo_stream_t *stream) {
    nested_launch_t *n = ctx;
    ordo_access_t w = {n->other_buffer, ORDO_ACCESS_WRITE};
    n->submit_other =
        ordo_tracker_submit(n->other, stream, &w, 1, launch_calls_the_outer_tracker, n);
    return ORDO_OK;
}

static void a_nested_launch_still_refuses_the_outer_tracker(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    nested_launch_t n = {.f = f};
    assert_ok(ordo_tracker_create(device, &n.other));
    assert_ok(ordo_buffer_create(n.other, &n.other_buffer));
    ordo_access_t w = {f->b[0], ORDO_ACCESS_WRITE};
    assert_ok(
        ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_submits_on_another_tracker, &n));
    assert_ok(n.submit_other);
    assert_status(n.destroy_outer, ORDO_ERR_BUSY);
    assert_status(n.submit_outer, ORDO_ERR_BUSY);
    assert_ok(ordo_buffer_release(n.other_buffer, NULL, NULL));
    assert_ok(ordo_tracker_synchronize(n.other, test_deadline()));
    assert_ok(ordo_tracker_destroy(n.other));
    fixture_free(f);
}

/* A bad stream answers before a bad access list (docs/ERRORS.md), on every
 * entry point; and a tracker's synchronize from a host task of one of its
 * streams is refused at once (it waited for itself, then named that
 * stream as failed). */
typedef struct self_sync {
    ordo_tracker_t *tracker;
    ordo_status_t status;
    uint64_t took_ns;
    char message[256];
} self_sync_t;

static ordo_status_t self_sync_task(void *ctx) {
    self_sync_t *s = ctx;
    uint64_t start = ordo_time_now_ns();
    s->status = ordo_tracker_synchronize(s->tracker, test_deadline());
    s->took_ns = ordo_time_now_ns() - start;
    snprintf(s->message, sizeof s->message, "%s", ordo_error_message());
    return ORDO_OK;
}

static void bad_streams_answer_first_and_self_waits_are_refused(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_stream_t *bad = (ordo_stream_t *)&f->seen; /* not a stream */
    assert_status(ordo_tracker_submit(f->tracker, NULL, NULL, 1, launch_noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_prepare(f->tracker, bad, NULL, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_finish(f->tracker, NULL, NULL, 2000), ORDO_ERR_INVALID_HANDLE);
    ordo_access_t wrong = {f->b[0], (ordo_access_mode_t)99};
    assert_status(ordo_tracker_submit_host(f->tracker, NULL, &wrong, 1, noop_task, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    /* With a good stream, the list's own fault. */
    assert_status(ordo_tracker_prepare(f->tracker, f->s[0], NULL, 1), ORDO_ERR_INVALID_ARGUMENT);

    self_sync_t s = {f->tracker, ORDO_OK, 0, ""};
    ordo_access_t w = {f->b[0], ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f->tracker, f->s[0], &w, 1, self_sync_task, &s));
    assert_ok(ordo_stream_synchronize(f->s[0], test_deadline()));
    assert_int_equal(s.status, ORDO_ERR_BUSY);
    assert_true(s.took_ns < 1000000000ull);
    /* Refused as such, not reported as that stream's failure. */
    assert_non_null(strstr(s.message, "ordo_tracker_synchronize: called on a thread of stream"));
    fixture_free(f);
}

/* A launch function's failure is returned with a message of its own (not
 * the thread's older one), and the submission records nothing. */
static void failing_launch_is_reported(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_access_t w = {f->b[0], ORDO_ACCESS_WRITE};
    ordo_access_t r = {f->b[0], ORDO_ACCESS_READ};
    assert_status(ordo_tracker_metrics(f->tracker, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_status_t device_error = ORDO_ERR_DEVICE;
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_returns, &device_error),
                  ORDO_ERR_DEVICE);
    assert_non_null(strstr(ordo_error_message(),
                           "ordo_tracker_submit: the launch function returned ORDO_ERR_DEVICE"));
    assert_null(strstr(ordo_error_message(), "out_metrics"));
    ordo_status_t not_a_status = (ordo_status_t)12345;
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_returns, &not_a_status),
                  ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "(12345)"));
    assert_status(ordo_tracker_submit(f->tracker, f->s[0], &w, 1, launch_fails_inside, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "returned ORDO_ERR_INVALID_ARGUMENT"));
    assert_non_null(strstr(ordo_error_message(), "ordo_stream_host_task"));
    /* None of the writes was recorded: a read elsewhere waits for nothing. */
    assert_ok(ordo_tracker_submit(f->tracker, f->s[1], &r, 1, launch_noop, NULL));
    assert_int_equal(f->seen.count, 0);
    fixture_free(f);
}

/* ---- bad input: tracker.h, buffer.h (tests/refusal.h) */

/* Counted on the reclaimer thread and inline on the releasing one. */
static _Atomic int reclaimed_count;

static void count_reclaim(void *ctx) {
    (void)ctx;
    atomic_fetch_add(&reclaimed_count, 1);
}

static ordo_status_t failing_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx, (void)stream;
    return ORDO_ERR_ABORTED;
}

static void tracker_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_tracker_t *tracker = (ordo_tracker_t *)1, *other = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, tracker, ordo_tracker_create, NULL, &tracker);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, tracker, ordo_tracker_create,
                   AS(ordo_device_t, f.signal), &tracker);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_create, f.device, NULL);
    assert_ok(ordo_tracker_create(f.device, &tracker));
    assert_ok(ordo_tracker_create(f.device, &other));
    ordo_tracker_t *wrong = AS(ordo_tracker_t, f.s[0]);

    ordo_buffer_t *buffer = (ordo_buffer_t *)1, *theirs = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, buffer, ordo_buffer_create, NULL, &buffer);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, buffer, ordo_buffer_create, wrong, &buffer);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_buffer_create, tracker, NULL);
    assert_ok(ordo_buffer_create(tracker, &buffer));
    assert_ok(ordo_buffer_create(other, &theirs));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, NULL, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, AS(ordo_buffer_t, f.signal), NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, AS(ordo_buffer_t, tracker), NULL, NULL);

    ordo_access_t ok[1] = {{buffer, ORDO_ACCESS_WRITE}};
    ordo_access_t bad_mode[1] = {{buffer, (ordo_access_mode_t)0}};
    ordo_access_t bad_mode2[1] = {{buffer, (ordo_access_mode_t)4}};
    ordo_access_t null_buffer[2] = {{buffer, ORDO_ACCESS_READ}, {NULL, ORDO_ACCESS_READ}};
    ordo_access_t wrong_buffer[1] = {{AS(ordo_buffer_t, f.signal), ORDO_ACCESS_READ}};
    ordo_access_t foreign_buffer[1] = {{theirs, ORDO_ACCESS_READ}};
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, NULL, f.s[0], ok, 1, launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, wrong, f.s[0], ok, 1, launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, NULL, ok, 1, launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, AS(ordo_stream_t, f.signal), ok,
            1, launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.foreign, ok, 1, launch_noop,
            NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], NULL, 1, launch_noop,
            NULL);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_submit, tracker, f.s[0], ok,
            ORDO_TRACKER_MAX_ACCESSES + 1, launch_noop, NULL);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_submit, tracker, f.s[0], ok, SIZE_MAX, launch_noop,
            NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], ok, 1, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], bad_mode, 1,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], bad_mode2, 1,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, f.s[0], null_buffer, 2,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, f.s[0], wrong_buffer, 1,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], foreign_buffer, 1,
            launch_noop, NULL);
    /* The launch function's own status comes back as it is. */
    assert_status(ordo_tracker_submit(tracker, f.s[0], ok, 1, failing_launch, NULL),
                  ORDO_ERR_ABORTED);
    /* The split form refuses the same. */
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_prepare, NULL, f.s[0], ok, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_prepare, tracker, NULL, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.foreign, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_prepare, tracker, f.s[0], ok, SIZE_MAX);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], bad_mode, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], foreign_buffer, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, NULL, f.s[0], ok, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, tracker, NULL, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.foreign, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_finish, tracker, f.s[0], ok, SIZE_MAX);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], bad_mode2, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, tracker, f.s[0], null_buffer, 2);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], foreign_buffer, 1);

    ordo_tracker_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_tracker_metrics, NULL, &m);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_tracker_metrics, wrong, &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_metrics, tracker, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_drain, NULL, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_drain, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_lock, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_unlock, wrong);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_unlock, tracker);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo__tracker_set_wait_observer, NULL, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo__tracker_set_wait_observer, wrong, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_destroy, wrong);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_destroy, tracker);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_close, NULL, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_close, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_close, tracker, ORDO_DEADLINE_NOW); /* live buffers */

    /* ordo_tracker_open: the open's status and message, nothing left. */
    ordo_tracker_t *opened = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, opened, ordo_tracker_open, NULL, &opened);
    assert_non_null(strstr(ordo_error_message(), "name is NULL"));
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, opened, ordo_tracker_open, "nosuch:0", &opened);
    assert_non_null(strstr(ordo_error_message(), "names no compiled-in backend"));
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, opened, ordo_tracker_open, "cpu:7", &opened);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, opened, ordo_tracker_open, "cpu:99999", &opened);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, opened, ordo_tracker_open, "cpu:-1", &opened);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_open, "cpu:0", NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_open, "nosuch", NULL);

    /* ordo_tracker_stream_create. */
    ordo_stream_t *owned = (ordo_stream_t *)1;
    ordo_device_info_t info;
    assert_ok(ordo_device_info(f.device, &info));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, owned, ordo_tracker_stream_create, NULL, 0, &owned);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, owned, ordo_tracker_stream_create, wrong, 0, &owned);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_stream_create, tracker, 0, NULL);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, owned, ordo_tracker_stream_create, tracker,
                   info.priority_least + 1, &owned);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, owned, ordo_tracker_stream_create, tracker,
                   info.priority_greatest - 1, &owned);
    /* Its streams are the tracker's to destroy; at most as many as it orders. */
    assert_ok(ordo_tracker_open("cpu:0", &opened));
    ordo_stream_t *streams[ORDO_TRACKER_MAX_STREAMS];
    for (unsigned i = 0; i < ORDO_TRACKER_MAX_STREAMS; ++i) {
        assert_ok(ordo_tracker_stream_create(opened, 0, &streams[i]));
    }
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, streams[0]);
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, streams[ORDO_TRACKER_MAX_STREAMS - 1]);
    REFUSED_CLEARS(ORDO_ERR_RESOURCE_EXHAUSTED, owned, ordo_tracker_stream_create, opened, 0,
                   &owned);
    assert_ok(ordo_tracker_close(opened, test_deadline()));

    /* Nothing refused above was recorded: the buffer is used by no stream. */
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_int_equal(m.submissions, 0);
    assert_ok(ordo_tracker_submit(tracker, f.s[0], ok, 1, launch_noop, NULL));
    atomic_store(&reclaimed_count, 0);
    assert_ok(ordo_buffer_release(buffer, count_reclaim, NULL));
    assert_ok(ordo_buffer_release(theirs, count_reclaim, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_drain(other, test_deadline()));
    assert_int_equal(atomic_load(&reclaimed_count), 2);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_tracker_destroy(other));
    refusal_fixture_free(&f);
}

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    test_conformance_begin("tracker");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hazards_across_streams_get_waits),
        cmocka_unit_test(waits_on_one_origin_collapse),
        cmocka_unit_test(a_prepare_holds_its_buffers_for_its_finish),
        cmocka_unit_test(a_wait_another_covers_is_not_emitted),
        cmocka_unit_test(known_orderings_are_elided),
        cmocka_unit_test(transitive_knowledge_is_used),
        cmocka_unit_test(seed_scenarios_hold),
        cmocka_unit_test(duplicates_merge_to_read_write),
        cmocka_unit_test(split_prepare_finish),
        cmocka_unit_test(many_streams_read_then_one_writes),
        cmocka_unit_test(streams_see_each_others_writes),
        cmocka_unit_test(release_defers_until_uses_complete),
        cmocka_unit_test(release_after_the_uses_ran_reclaims_at_once),
        cmocka_unit_test(release_of_a_use_behind_busy_work),
        cmocka_unit_test(release_with_other_work_on_the_stream),
        cmocka_unit_test(failed_stream_still_reclaims),
        cmocka_unit_test(failed_stream_does_not_imply_other_uses),
        cmocka_unit_test(open_and_close),
        cmocka_unit_test(close_waits_for_pending_work),
        cmocka_unit_test(close_that_times_out_leaves_all_intact),
        cmocka_unit_test(close_after_a_failure_then_destroy),
        cmocka_unit_test(close_names_the_stream_a_failure_began_on),
        cmocka_unit_test(close_refuses_live_buffers),
        cmocka_unit_test(a_created_tracker_closes_what_it_owns),
        cmocka_unit_test(destroying_an_owned_stream_is_refused),
        cmocka_unit_test(an_owned_stream_in_another_table_keeps_the_owner),
        cmocka_unit_test(a_tracker_keeps_a_place_for_each_stream_it_owns),
        cmocka_unit_test(close_on_a_stream_thread_is_refused),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(failing_launch_is_reported),
        cmocka_unit_test(a_launch_function_cannot_release_its_buffers),
        cmocka_unit_test(a_launch_function_cannot_submit_or_tear_down),
        cmocka_unit_test(a_nested_launch_still_refuses_the_outer_tracker),
        cmocka_unit_test(bad_streams_answer_first_and_self_waits_are_refused),
        cmocka_unit_test(a_successful_release_leaves_the_message_alone),
        cmocka_unit_test(tracker_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
