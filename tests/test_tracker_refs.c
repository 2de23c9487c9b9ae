/* Trackers under adversity: the references queued records and waits hold
 * on the tracker's timelines (tracker destroyed while they wait on a
 * blocked stream, streams failing or destroyed with them queued, refused
 * enqueues), the stream lookup (a full table, refused streams, trackers
 * sharing streams), backends with none or only one of the adopting
 * entries (the CUDA backend has none), and the exact wait metrics of prepare's single pass
 * against a shadow of the buffer histories and the reference model. */
#include <stdatomic.h>
#include <string.h>

#include "core/tracker_internal.h"
#include "core/tracker_observer.h"
#include "hal/hal.h"
#include "ordo/buffer.h"
#include "ordo/tracker.h"
#include "stream_probe.h"
#include "test_util.h"
#include "tracker_model.h"

static ordo_device_t *device;

typedef struct gate {
    _Atomic int open;
    ordo_status_t result; /* what the gate task returns once open */
    /* If set: the gate opens once this stream's destroy has begun (the
     * task runs on it), not on `open`. */
    ordo_stream_t *until_destroyed;
    _Atomic int entered;
    _Atomic int saw_destroy;
} gate_t;

static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    if (g->until_destroyed) {
        atomic_store(&g->saw_destroy, test_stream_await_destroy(g->until_destroyed));
        return g->result;
    }
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->open) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    return g->result;
}

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static ordo_status_t launch_refused(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_ERR_ABORTED;
}

/* The waits a submission of accesses on stream needs, emitted with nothing
 * recorded for it (a prepare with no finish, which ordo_tracker_prepare
 * itself no longer leaves open): stream waits, no stream waits for it. */
static void wait_only(ordo_tracker_t *tracker, ordo_stream_t *stream, const ordo_access_t *access) {
    uint32_t t;
    assert_ok(tracker_stream_index(tracker, stream, &t, "wait_only"));
    assert_ok(ordo__tracker_prepare_at(tracker, t, access, 1, "wait_only"));
}

/* More records and waits than one batch of references on a timeline. */
#define QUEUED 600

/* How the blocked stream ends in queued_waits_outlive_the_tracker. */
enum { END_RUNS, END_FAILS, END_DESTROYED };

/* Stream 1 is blocked; stream 0 writes a buffer QUEUED times and stream 1
 * prepares a read of it after each (records on 0, waits on 1, nothing
 * recorded for 1: the buffer's uses are all on 0). Once 0 has run, the
 * tracker is destroyed with stream 1's waits still queued, holding the
 * references they adopted on stream 0's timeline; then stream 1 runs,
 * fails or is destroyed. ASan sees a timeline freed too early or leaked. */
static void queued_waits_outlive_the_tracker(int end) {
    ordo_tracker_t *tracker;
    ordo_stream_t *s[2];
    ordo_buffer_t *b;
    assert_ok(ordo_tracker_create(device, &tracker));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(device, 0, &s[i]));
    }
    assert_ok(ordo_buffer_create(tracker, &b));
    gate_t gate = {0, end == END_FAILS ? ORDO_ERR_ABORTED : ORDO_OK,
                   end == END_DESTROYED ? s[1] : NULL, 0, 0};
    assert_ok(ordo_stream_host_task(s[1], gate_task, &gate));
    ordo_access_t w = {b, ORDO_ACCESS_WRITE};
    ordo_access_t r = {b, ORDO_ACCESS_READ};
    for (int i = 0; i < QUEUED; ++i) {
        assert_ok(ordo_tracker_submit(tracker, s[0], &w, 1, launch_noop, NULL));
        wait_only(tracker, s[1], &r);
    }
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_int_equal(m.waits_emitted, QUEUED);
    assert_int_equal(m.points_recorded, QUEUED);
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_stream_synchronize(s[0], test_deadline()));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    switch (end) {
    case END_RUNS:
        atomic_store(&gate.open, 1);
        assert_ok(ordo_stream_synchronize(s[1], test_deadline()));
        break;
    case END_FAILS:
        atomic_store(&gate.open, 1);
        assert_status(ordo_stream_synchronize(s[1], test_deadline()), ORDO_ERR_ABORTED);
        break;
    default: {
        /* Destroyed while the gate still holds the waits back: they are
         * dropped (each releasing its reference) once the gate opens,
         * which it does once the destroy has begun. */
        ordo_deadline_t deadline = test_deadline();
        while (!atomic_load(&gate.entered)) {
            assert_true(ordo_time_now_ns() < deadline);
            test_sleep_ms(1);
        }
        assert_ok(ordo_stream_destroy(s[1]));
        assert_true(atomic_load(&gate.saw_destroy));
        s[1] = NULL;
        break;
    }
    }
    for (int i = 0; i < 2; ++i) {
        if (s[i]) {
            assert_ok(ordo_stream_destroy(s[i]));
        }
    }
}

static void tracker_destroyed_with_waits_queued_then_run(void **state) {
    (void)state;
    queued_waits_outlive_the_tracker(END_RUNS);
}

static void tracker_destroyed_with_waits_queued_then_stream_fails(void **state) {
    (void)state;
    queued_waits_outlive_the_tracker(END_FAILS);
}

static void tracker_destroyed_with_waits_queued_then_stream_destroyed(void **state) {
    (void)state;
    queued_waits_outlive_the_tracker(END_DESTROYED);
}

/* A stream fails while records it owes and waits it holds are queued on
 * it (a stream waiting on those records fails too); then enqueues on it are
 * refused, over and over (more than a batch): each refused op leaves its
 * reference with the tracker, and a refused record still fails the
 * timeline its waiters wait on. */
static void refused_enqueues_keep_their_references(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *s[4];
    ordo_buffer_t *b[2];
    assert_ok(ordo_tracker_create(device, &tracker));
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_create(device, 0, &s[i]));
    }
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_buffer_create(tracker, &b[i]));
    }
    gate_t gate = {0, ORDO_ERR_ABORTED, NULL, 0, 0};
    ordo_access_t w0 = {b[0], ORDO_ACCESS_WRITE};
    ordo_access_t r0 = {b[0], ORDO_ACCESS_READ};
    ordo_access_t w1 = {b[1], ORDO_ACCESS_WRITE};
    ordo_access_t r1 = {b[1], ORDO_ACCESS_READ};
    /* Stream 1: a gate that fails the stream, then waits (on 0) and
     * records (waited for by 2) queued behind it. */
    assert_ok(ordo_stream_host_task(s[1], gate_task, &gate));
    for (int i = 0; i < QUEUED / 2; ++i) {
        assert_ok(ordo_tracker_submit(tracker, s[0], &w0, 1, launch_noop, NULL));
        /* A wait only: stream 0 never waits for stream 1. */
        wait_only(tracker, s[1], &r0);
        assert_ok(ordo_tracker_submit(tracker, s[1], &w1, 1, launch_noop, NULL));
        assert_ok(ordo_tracker_submit(tracker, s[2], &r1, 1, launch_noop, NULL));
    }
    atomic_store(&gate.open, 1);
    assert_status(ordo_stream_synchronize(s[1], test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(s[2], test_deadline()), ORDO_ERR_ABORTED);
    ordo_tracker_metrics_t before, after;
    assert_ok(ordo_tracker_metrics(tracker, &before));
    /* Waits on the failed stream are refused (not counted). */
    for (int i = 0; i < QUEUED; ++i) {
        assert_ok(ordo_tracker_submit(tracker, s[0], &w0, 1, launch_noop, NULL));
        assert_status(ordo_tracker_submit(tracker, s[1], &r0, 1, launch_noop, NULL),
                      ORDO_ERR_ABORTED);
    }
    /* A record on it is refused: a healthy stream waiting for it is still
     * ordered (its wait fails it instead of hanging). */
    uint32_t t1;
    assert_ok(tracker_stream_index(tracker, s[1], &t1, "test"));
    ordo__tracker_finish_at(tracker, t1, &w1, 1); /* a finish with no prepare */
    /* The wait may fail stream 3 before the launch gets there. */
    ordo_status_t st = ordo_tracker_submit(tracker, s[3], &r1, 1, launch_noop, NULL);
    assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    assert_ok(ordo_tracker_metrics(tracker, &after));
    assert_int_equal(after.waits_emitted - before.waits_emitted, 1);
    assert_status(ordo_stream_synchronize(s[3], test_deadline()), ORDO_ERR_ABORTED);
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_buffer_release(b[i], NULL, NULL));
    }
    assert_ok(ordo_stream_synchronize(s[0], test_deadline()));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_destroy(s[i]));
    }
}

/* ---- backends without (some of) the adopting entries ----------------- */

/* The CPU backend with only the adopting entries `keep` has (1: signal,
 * 2: wait), on a private device: the tracker falls back to the retaining
 * entry for each missing one. */
static void with_adopting_entries(unsigned keep) {
    hal_backend_t backend = ordo__hal_cpu_backend;
    if (!(keep & 1)) {
        backend.signal_adopt = NULL;
    }
    if (!(keep & 2)) {
        backend.wait_adopt = NULL;
    }
    ordo_device_t *shared = device;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &device));
    device->backend = &backend;
    queued_waits_outlive_the_tracker(END_RUNS);
    queued_waits_outlive_the_tracker(END_FAILS);
    queued_waits_outlive_the_tracker(END_DESTROYED);
    refused_enqueues_keep_their_references(NULL);
    device->backend = &ordo__hal_cpu_backend;
    assert_ok(ordo_device_release(device));
    device = shared;
}

static void no_adopting_entries(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    with_adopting_entries(0);
}

static void only_the_adopting_wait(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    with_adopting_entries(2);
}

static void only_the_adopting_signal(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    with_adopting_entries(1);
}

/* ---- the stream lookup ------------------------------------------------ */

#define ALL ORDO_TRACKER_MAX_STREAMS

typedef struct last_wait {
    int count;
    ordo_stream_t *waiting;
    ordo_stream_t *origin;
} last_wait_t;

static void note_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin, uint64_t point,
                      uint64_t needed) {
    (void)point;
    (void)needed;
    last_wait_t *l = ctx;
    l->count++;
    l->waiting = waiting;
    l->origin = origin;
}

/* Every pair (writer, reader) of attached streams gets exactly one wait,
 * naming the right streams: the lookup maps each stream to its own state. */
static void check_pairs(ordo_tracker_t *tracker, ordo_stream_t **streams, ordo_buffer_t *b,
                        uint64_t *rng, int pairs) {
    last_wait_t seen = {0};
    assert_ok(ordo__tracker_set_wait_observer(tracker, note_wait, &seen));
    for (int k = 0; k < pairs; ++k) {
        uint32_t i = (uint32_t)(test_rand(rng) % ALL);
        uint32_t j = (uint32_t)(test_rand(rng) % (ALL - 1));
        j += j >= i; /* j != i */
        ordo_access_t w = {b, ORDO_ACCESS_WRITE};
        ordo_access_t r = {b, ORDO_ACCESS_READ};
        assert_ok(ordo_tracker_submit(tracker, streams[i], &w, 1, launch_noop, NULL));
        int before = seen.count;
        assert_ok(ordo_tracker_submit(tracker, streams[j], &r, 1, launch_noop, NULL));
        assert_int_equal(seen.count, before + 1);
        assert_ptr_equal(seen.waiting, streams[j]);
        assert_ptr_equal(seen.origin, streams[i]);
    }
    assert_ok(ordo__tracker_set_wait_observer(tracker, NULL, NULL));
}

static void a_full_lookup_shared_by_trackers(void **state) {
    (void)state;
    enum { TRACKERS = 3 };
    ordo_stream_t *streams[ALL + 1];
    for (uint32_t i = 0; i <= ALL; ++i) {
        assert_ok(ordo_stream_create(device, 0, &streams[i]));
    }
    ordo_stream_t *extra = streams[ALL];
    ordo_tracker_t *trackers[TRACKERS];
    ordo_buffer_t *buffers[TRACKERS];
    uint64_t rng = 0x5eed1234abcdull;
    for (int k = 0; k < TRACKERS; ++k) {
        assert_ok(ordo_tracker_create(device, &trackers[k]));
        assert_ok(ordo_buffer_create(trackers[k], &buffers[k]));
    }
    /* The extra stream is refused before it is attached: a bad access
     * after a good one, a foreign buffer. */
    ordo_access_t bad[2] = {{buffers[0], ORDO_ACCESS_READ}, {buffers[1], ORDO_ACCESS_READ}};
    assert_status(ordo_tracker_submit(trackers[0], extra, bad, 2, launch_noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_tracker_prepare(trackers[0], extra, bad, 2), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_tracker_finish(trackers[0], extra, bad, 2), ORDO_ERR_INVALID_ARGUMENT);
    /* Each tracker attaches all the others, in its own order. */
    for (int k = 0; k < TRACKERS; ++k) {
        uint32_t order[ALL];
        for (uint32_t i = 0; i < ALL; ++i) {
            order[i] = k == 1 ? ALL - 1 - i : i;
        }
        if (k == 2) {
            for (uint32_t i = ALL - 1; i > 0; --i) {
                uint32_t j = (uint32_t)(test_rand(&rng) % (i + 1));
                uint32_t tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
        }
        for (uint32_t i = 0; i < ALL; ++i) {
            ordo_access_t r = {buffers[k], ORDO_ACCESS_READ};
            assert_ok(
                ordo_tracker_submit(trackers[k], streams[order[i]], &r, 1, launch_noop, NULL));
        }
        /* Full: the extra stream is refused, and stays refused. */
        ordo_access_t r = {buffers[k], ORDO_ACCESS_READ};
        assert_status(ordo_tracker_submit(trackers[k], extra, &r, 1, launch_noop, NULL),
                      ORDO_ERR_RESOURCE_EXHAUSTED);
        assert_status(ordo_tracker_prepare(trackers[k], extra, &r, 1), ORDO_ERR_RESOURCE_EXHAUSTED);
    }
    for (int k = 0; k < TRACKERS; ++k) {
        check_pairs(trackers[k], streams, buffers[k], &rng, (int)test_scaled(400));
    }
    for (int k = 0; k < TRACKERS; ++k) {
        assert_ok(ordo_buffer_release(buffers[k], NULL, NULL));
        assert_ok(ordo_tracker_drain(trackers[k], test_deadline()));
        assert_ok(ordo_tracker_destroy(trackers[k]));
    }
    for (uint32_t i = 0; i <= ALL; ++i) {
        assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
        assert_ok(ordo_stream_destroy(streams[i]));
    }
}

/* ---- prepare's pass: exact metrics, nothing emitted on refusal ------------ */

#define STREAMS 12 /* more than a buffer keeps inline */
#define BUFFERS 5
#define SUBMISSIONS 3000

typedef struct shadow {
    int written;
    uint32_t writer;
    uint64_t readers; /* streams that read since the last write */
} shadow_t;

typedef struct watch {
    model_t *model;
    ordo_stream_t **streams;
    int calls;
} watch_t;

static uint32_t index_of(ordo_stream_t **streams, ordo_stream_t *s) {
    for (uint32_t i = 0; i < STREAMS; ++i) {
        if (streams[i] == s) {
            return i;
        }
    }
    return UINT32_MAX;
}

static void on_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin, uint64_t point,
                    uint64_t needed) {
    watch_t *w = ctx;
    w->calls++;
    model_on_wait(w->model, index_of(w->streams, waiting), index_of(w->streams, origin), point,
                  needed);
}

static void metrics_are_exact_and_refusals_emit_nothing(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *streams[STREAMS];
    ordo_buffer_t *buffers[BUFFERS];
    shadow_t shadow[BUFFERS] = {0};
    assert_ok(ordo_tracker_create(device, &tracker));
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_create(device, 0, &streams[i]));
    }
    for (int i = 0; i < BUFFERS; ++i) {
        assert_ok(ordo_buffer_create(tracker, &buffers[i]));
    }
    ordo_buffer_t *foreign_owner_buffer;
    ordo_tracker_t *other;
    assert_ok(ordo_tracker_create(device, &other));
    assert_ok(ordo_buffer_create(other, &foreign_owner_buffer));
    const uint32_t submissions = (uint32_t)test_scaled(SUBMISSIONS);
    watch_t watch = {model_create(STREAMS, submissions), streams, 0};
    assert_ok(ordo__tracker_set_wait_observer(tracker, on_wait, &watch));
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    uint64_t emitted = m.waits_emitted, elided = m.waits_elided;
    for (uint32_t n = 0; n < submissions;) {
        uint32_t t = (uint32_t)(test_rand(&rng) % STREAMS);
        size_t count = 1 + (size_t)(test_rand(&rng) % 4);
        ordo_access_t accesses[5];
        model_access_t maccesses[5];
        uint32_t ids[5];
        for (size_t i = 0; i < count; ++i) {
            ids[i] = (uint32_t)(test_rand(&rng) % BUFFERS); /* duplicates happen */
            ordo_access_mode_t mode = (ordo_access_mode_t)(1 + test_rand(&rng) % 3);
            accesses[i] = (ordo_access_t){buffers[ids[i]], mode};
            maccesses[i] = (model_access_t){ids[i], mode};
        }
        uint64_t kind = test_rand(&rng) % 8;
        if (kind == 0) {
            /* A bad access after the good ones: nothing emitted, nothing
             * recorded, nothing counted. */
            ordo_access_t bad = {foreign_owner_buffer, ORDO_ACCESS_READ};
            if (test_rand(&rng) % 2) {
                bad = (ordo_access_t){buffers[0], (ordo_access_mode_t)4};
            }
            accesses[count] = bad;
            int calls = watch.calls;
            assert_status(
                ordo_tracker_submit(tracker, streams[t], accesses, count + 1, launch_noop, NULL),
                ORDO_ERR_INVALID_ARGUMENT);
            assert_status(ordo_tracker_prepare(tracker, streams[t], accesses, count + 1),
                          ORDO_ERR_INVALID_ARGUMENT);
            assert_int_equal(watch.calls, calls);
            assert_ok(ordo_tracker_metrics(tracker, &m));
            assert_int_equal(m.waits_emitted, emitted);
            assert_int_equal(m.waits_elided, elided);
            continue;
        }
        /* The orderings this submission needs, per origin stream: each
         * one is either emitted or elided, exactly once. */
        uint64_t origins = 0;
        for (size_t i = 0; i < count; ++i) {
            const shadow_t *sh = &shadow[ids[i]];
            if (sh->written) {
                origins |= (uint64_t)1 << sh->writer;
            }
            if (accesses[i].mode & ORDO_ACCESS_WRITE) {
                origins |= sh->readers;
            }
        }
        origins &= ~((uint64_t)1 << t);
        uint64_t expected = 0;
        for (uint64_t rest = origins; rest; rest &= rest - 1) {
            ++expected;
        }
        int calls = watch.calls;
        model_begin(watch.model, t, maccesses, count);
        if (kind == 1) {
            /* A refused launch: its waits stand, nothing is recorded;
             * then the same accesses in the split form, whose prepare
             * emits nothing more. */
            assert_status(
                ordo_tracker_submit(tracker, streams[t], accesses, count, launch_refused, NULL),
                ORDO_ERR_ABORTED);
            ordo_tracker_metrics_t refused;
            assert_ok(ordo_tracker_metrics(tracker, &refused));
            assert_ok(ordo_tracker_prepare(tracker, streams[t], accesses, count));
            assert_ok(ordo_tracker_finish(tracker, streams[t], accesses, count));
            assert_ok(ordo_tracker_metrics(tracker, &m));
            assert_int_equal(m.waits_emitted, refused.waits_emitted);
            elided += m.waits_elided - refused.waits_elided; /* the prepare's, not counted */
        } else if (kind == 2) {
            assert_ok(ordo_tracker_prepare(tracker, streams[t], accesses, count));
            assert_ok(ordo_tracker_finish(tracker, streams[t], accesses, count));
        } else {
            assert_ok(ordo_tracker_submit(tracker, streams[t], accesses, count, launch_noop, NULL));
        }
        model_end(watch.model);
        ++n;
        assert_ok(ordo_tracker_metrics(tracker, &m));
        assert_int_equal(m.waits_emitted - emitted, (uint64_t)(watch.calls - calls));
        assert_int_equal((m.waits_emitted - emitted) + (m.waits_elided - elided), expected);
        emitted = m.waits_emitted;
        elided = m.waits_elided;
        for (size_t i = 0; i < count; ++i) {
            shadow_t *sh = &shadow[ids[i]];
            if (accesses[i].mode & ORDO_ACCESS_WRITE) {
                *sh = (shadow_t){1, t, 0};
            } else {
                sh->readers |= (uint64_t)1 << t;
            }
        }
    }
    const char *first = NULL;
    size_t violations = model_violations(watch.model, &first);
    if (violations) {
        print_error("%zu violations; first: %s\n", violations, first);
    }
    assert_int_equal(violations, 0);
    model_free(watch.model);
    for (int i = 0; i < BUFFERS; ++i) {
        assert_ok(ordo_buffer_release(buffers[i], NULL, NULL));
    }
    assert_ok(ordo_buffer_release(foreign_owner_buffer, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_tracker_destroy(other));
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
        assert_ok(ordo_stream_destroy(streams[i]));
    }
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
    test_conformance_begin("tracker-references");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracker_destroyed_with_waits_queued_then_run),
        cmocka_unit_test(tracker_destroyed_with_waits_queued_then_stream_fails),
        cmocka_unit_test(tracker_destroyed_with_waits_queued_then_stream_destroyed),
        cmocka_unit_test(refused_enqueues_keep_their_references),
        cmocka_unit_test(no_adopting_entries),
        cmocka_unit_test(only_the_adopting_wait),
        cmocka_unit_test(only_the_adopting_signal),
        cmocka_unit_test(a_full_lookup_shared_by_trackers),
        cmocka_unit_test(metrics_are_exact_and_refusals_emit_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
