/* Cross-stream barriers: real data ordered across 2-8 streams by the
 * device form (both schemes, reusable and one-shot), no host block, the
 * host synchronize and its timing, failure propagation, bad input. */
#include <stdatomic.h>
#include <string.h>

#include "hal/hal.h"
#include "test_rescue.h"
#include "refusal.h"
#include "test_util.h"

#define MAX_STREAMS 8
#define ROUNDS 12

static ordo_device_t *device;

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

static void streams_make(ordo_stream_t **streams, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        assert_ok(ordo_stream_create(device, 0, &streams[i]));
    }
}

static void streams_destroy(ordo_stream_t **streams, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        assert_ok(ordo_stream_destroy(streams[i]));
    }
}

static void sleep_us(unsigned us) {
    struct timespec ts = {0, (long)us * 1000L};
    nanosleep(&ts, NULL);
}

/* ---- real data across the barrier ------------------------------------- */

/* Plain (non-atomic) cells: only the barrier orders the writers before
 * the readers, which ThreadSanitizer checks. */
typedef struct board {
    size_t n;
    int cells[MAX_STREAMS][ROUNDS];
    _Atomic int wrong;
    _Atomic int reads;
} board_t;

typedef struct cell_task {
    board_t *board;
    size_t stream;
    size_t round;
} cell_task_t;

static ordo_status_t write_cell(void *ctx) {
    cell_task_t *t = ctx;
    /* Uneven work, so an unordered reader would run ahead of a writer. */
    sleep_us((unsigned)((t->stream * 7 + t->round * 3) % 5) * 150);
    t->board->cells[t->stream][t->round] = (int)(t->round + 1);
    return ORDO_OK;
}

static ordo_status_t read_cells(void *ctx) {
    cell_task_t *t = ctx;
    for (size_t j = 0; j < t->board->n; ++j) {
        if (t->board->cells[j][t->round] != (int)(t->round + 1)) {
            atomic_fetch_add(&t->board->wrong, 1);
        }
    }
    atomic_fetch_add(&t->board->reads, 1);
    return ORDO_OK;
}

typedef enum mode { MODE_AUTO, MODE_HUB, MODE_ALL, MODE_ONCE } board_mode_t;

static void run_board(size_t n, board_mode_t mode) {
    ordo_stream_t *streams[MAX_STREAMS];
    streams_make(streams, n);
    board_t *board = calloc(1, sizeof *board);
    cell_task_t *tasks = calloc(n * ROUNDS, sizeof *tasks);
    board->n = n;
    ordo_barrier_t *barrier = NULL;
    static const ordo_barrier_scheme_t schemes[] = {
        ORDO_BARRIER_SCHEME_AUTO, ORDO_BARRIER_SCHEME_HUB, ORDO_BARRIER_SCHEME_ALL_TO_ALL};
    if (mode != MODE_ONCE) {
        assert_ok(ordo_barrier_create(streams, n, schemes[mode], &barrier));
    }
    for (size_t r = 0; r < ROUNDS; ++r) {
        for (size_t i = 0; i < n; ++i) {
            tasks[r * n + i] = (cell_task_t){board, i, r};
            assert_ok(ordo_stream_host_task(streams[i], write_cell, &tasks[r * n + i]));
        }
        if (barrier) {
            assert_ok(ordo_barrier_arrive(barrier));
        } else {
            assert_ok(ordo_barrier_streams(streams, n));
        }
        for (size_t i = 0; i < n; ++i) {
            assert_ok(ordo_stream_host_task(streams[i], read_cells, &tasks[r * n + i]));
        }
    }
    uint64_t ns = 0;
    assert_ok(ordo_barrier_synchronize_streams(streams, n, test_deadline(), &ns));
    assert_int_equal(atomic_load(&board->reads), (int)(n * ROUNDS));
    if (atomic_load(&board->wrong) != 0) {
        fail_msg("%d reads saw a cell not yet written (n=%zu, mode=%d)", atomic_load(&board->wrong),
                 n, (int)mode);
    }
    if (barrier) {
        assert_ok(ordo_barrier_destroy(barrier));
    }
    streams_destroy(streams, n);
    free(tasks);
    free(board);
}

static void barrier_orders_real_data(void **state) {
    (void)state;
    for (size_t n = 2; n <= MAX_STREAMS; ++n) {
        for (int mode = MODE_AUTO; mode <= MODE_ONCE; ++mode) {
            run_board(n, (board_mode_t)mode);
        }
    }
}

/* ---- the device form does not block the host --------------------------- */

static ordo_status_t count_task(void *ctx) {
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

/* Polls the stall report until it lists want streams (bounded). */
static size_t report_until(ordo_stall_entry_t *entries, size_t capacity, size_t want) {
    size_t count = 0;
    ordo_deadline_t deadline = test_deadline();
    do {
        assert_ok(ordo_stall_report(device, entries, capacity, &count));
        if (count == want) {
            break;
        }
        test_sleep_ms(1);
    } while (ordo_time_now_ns() < deadline);
    return count;
}

static void device_barrier_does_not_block(void **state) {
    (void)state;
    enum { N = 4 };
    ordo_stream_t *streams[N];
    streams_make(streams, N);
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_signal_set_name(gate, "gate"));
    _Atomic int before = 0, after = 0;
    for (int scheme = ORDO_BARRIER_SCHEME_HUB; scheme <= ORDO_BARRIER_SCHEME_ALL_TO_ALL; ++scheme) {
        ordo_barrier_t *barrier;
        assert_ok(ordo_barrier_create(streams, N, (ordo_barrier_scheme_t)scheme, &barrier));
        uint64_t g = (uint64_t)scheme;
        /* Every stream but the last is held by the gate, which only this
         * thread (or the rescuer) opens; the last runs up to the barrier. */
        for (size_t i = 0; i < N; ++i) {
            if (i + 1 < N) {
                assert_ok(ordo_stream_wait(streams[i], gate, g));
            }
            assert_ok(ordo_stream_host_task(streams[i], count_task, &before));
        }
        /* If the calls under test blocked the host, the rescuer opens the
         * gate after the test deadline: the test fails instead of hanging. */
        test_rescue_t rescue;
        test_rescue_begin(&rescue, gate, g);
        uint64_t t0 = ordo_time_now_ns();
        assert_ok(ordo_barrier_arrive(barrier));
        assert_ok(ordo_barrier_streams(streams, N));
        for (size_t i = 0; i < N; ++i) {
            assert_ok(ordo_stream_host_task(streams[i], count_task, &after));
        }
        uint64_t took = ordo_time_now_ns() - t0;
        /* The calls returned while the streams are still held. */
        assert_true(took < (uint64_t)TEST_WAIT_MS * 1000000ull / 2);
        uint64_t gate_value = 0;
        assert_ok(ordo_signal_query(gate, &gate_value));
        assert_true(gate_value < g);
        /* A stall report explains the hold: three streams wait for the
         * host's gate (no queued work reaches it); the free stream waits
         * at the barrier for the held ones, so its wait is not reachable
         * by enqueued work either. */
        ordo_stall_entry_t entries[N];
        size_t count = report_until(entries, N, N);
        assert_int_equal(count, N);
        assert_int_equal(atomic_load(&before), (int)(g - 1) * N + 1);
        assert_int_equal(atomic_load(&after), (int)(g - 1) * N);
        size_t gated = 0;
        for (size_t i = 0; i < count; ++i) {
            assert_int_equal(entries[i].reach, ORDO_STALL_UNREACHABLE);
            if (entries[i].signal == gate) {
                assert_string_equal(entries[i].signal_name, "gate");
                ++gated;
            } else {
                assert_ptr_equal(entries[i].stream, streams[N - 1]);
                assert_non_null(strstr(entries[i].signal_name, "barrier"));
            }
        }
        assert_int_equal(gated, N - 1);
        assert_false(test_rescue_end(&rescue));
        assert_ok(ordo_signal_advance(gate, g));
        uint64_t ns = 0;
        assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), &ns));
        assert_int_equal(atomic_load(&before), (int)g * N);
        assert_int_equal(atomic_load(&after), (int)g * N);
        assert_ok(ordo_stall_report(device, entries, N, &count));
        assert_int_equal(count, 0);
        assert_ok(ordo_barrier_destroy(barrier));
    }
    assert_ok(ordo_signal_destroy(gate));
    streams_destroy(streams, N);
}

/* ---- host synchronize ---------------------------------------------------- */

static ordo_status_t sleep_20ms(void *ctx) {
    (void)ctx;
    test_sleep_ms(20);
    return ORDO_OK;
}

/* One timed host synchronize: with a deadline of deadline_ms from just
 * before the call (0: the test's), or else after sleep_20ms on every
 * stream. */
typedef struct timed {
    ordo_barrier_t *barrier;
    ordo_stream_t **streams;
    size_t count;
    int form; /* 0: ordo_barrier_synchronize, 1: ..._streams */
    ordo_status_t expected;
    unsigned deadline_ms;
} timed_t;

/* The time a synchronize reports lies within the call: it is never more
 * than the time measured around it, on every attempt. It also covers what
 * was still to wait for when the call was entered, but how much that was
 * is unknown when the test thread stalls between starting the work (or
 * the deadline's clock) and entering the call: the lower bound least_ns
 * must hold on one of a few attempts. Returns non-zero if it did. */
static int timed_best_of(const timed_t *t, uint64_t least_ns) {
    for (int attempt = 0; attempt < 5; ++attempt) {
        ordo_deadline_t deadline = test_deadline();
        if (t->deadline_ms) {
            deadline = ordo_deadline_after_ms(t->deadline_ms);
        } else {
            for (size_t i = 0; i < t->count; ++i) {
                assert_ok(ordo_stream_host_task(t->streams[i], sleep_20ms, NULL));
            }
        }
        uint64_t ns = 0;
        uint64_t before = ordo_time_now_ns();
        if (t->form == 0) {
            assert_status(ordo_barrier_synchronize(t->barrier, deadline, &ns), t->expected);
        } else {
            assert_status(ordo_barrier_synchronize_streams(t->streams, t->count, deadline, &ns),
                          t->expected);
        }
        uint64_t after = ordo_time_now_ns();
        assert_true(ns > 0 && ns <= after - before);
        if (t->expected == ORDO_ERR_TIMEOUT) {
            assert_true(after >= deadline);
        }
        if (ns >= least_ns) {
            return 1;
        }
        print_message("attempt %d: %llu ns reported, %llu ns around the call\n", attempt,
                      (unsigned long long)ns, (unsigned long long)(after - before));
    }
    return 0;
}

static void synchronize_reports_its_time(void **state) {
    (void)state;
    enum { N = 3 };
    ordo_stream_t *streams[N];
    streams_make(streams, N);
    ordo_barrier_t *barrier;
    assert_ok(ordo_barrier_create(streams, N, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    const uint64_t bound = (uint64_t)TEST_WAIT_MS * 1000000ull;

    /* Idle streams: quick, but not free. */
    uint64_t ns = 0;
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), &ns));
    assert_true(ns > 0 && ns < bound);
    ns = 0;
    assert_ok(ordo_barrier_synchronize_streams(streams, N, test_deadline(), &ns));
    assert_true(ns > 0 && ns < bound);

    /* Busy streams: at least the longest stream's work. */
    for (int form = 0; form < 2; ++form) {
        timed_t timed = {barrier, streams, N, form, ORDO_OK, 0};
        assert_true(timed_best_of(&timed, 15000000ull));
    }

    /* A held stream: the deadline, not a hang; the time is reported. */
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(streams[1], gate, 1));
    for (int form = 0; form < 2; ++form) {
        timed_t timed = {barrier, streams, N, form, ORDO_ERR_TIMEOUT, 30};
        assert_true(timed_best_of(&timed, 25000000ull));
    }
    /* NULL out_elapsed_ns is allowed. */
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), NULL));
    assert_ok(ordo_barrier_synchronize_streams(streams, N, test_deadline(), NULL));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_barrier_destroy(barrier));
    streams_destroy(streams, N);
}

/* ---- failures ------------------------------------------------------------ */

static ordo_status_t fail_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void failure_propagates(void **state) {
    (void)state;
    enum { N = 4 };
    for (int scheme = ORDO_BARRIER_SCHEME_HUB; scheme <= ORDO_BARRIER_SCHEME_ALL_TO_ALL; ++scheme) {
        for (size_t failing = 0; failing < N; failing += N - 1) {
            ordo_stream_t *streams[N];
            streams_make(streams, N);
            ordo_barrier_t *barrier;
            assert_ok(ordo_barrier_create(streams, N, (ordo_barrier_scheme_t)scheme, &barrier));
            _Atomic int after = 0;
            assert_ok(ordo_stream_host_task(streams[failing], fail_task, NULL));
            /* The failing task may or may not have run yet. */
            ordo_status_t st = ordo_barrier_arrive(barrier);
            assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
            for (size_t i = 0; i < N; ++i) {
                st = ordo_stream_host_task(streams[i], count_task, &after);
                assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
            }
            assert_status(ordo_barrier_synchronize(barrier, test_deadline(), NULL),
                          ORDO_ERR_ABORTED);
            assert_status(ordo_barrier_synchronize_streams(streams, N, test_deadline(), NULL),
                          ORDO_ERR_ABORTED);
            /* Every stream failed through the barrier; no work after it ran. */
            for (size_t i = 0; i < N; ++i) {
                assert_status(ordo_stream_status(streams[i]), ORDO_ERR_ABORTED);
            }
            assert_int_equal(atomic_load(&after), 0);
            /* The barrier stays failed. */
            assert_status(ordo_barrier_arrive(barrier), ORDO_ERR_ABORTED);
            assert_ok(ordo_barrier_destroy(barrier));
            streams_destroy(streams, N);
        }
    }
}

/* Fails its stream with ORDO_ERR_UNAVAILABLE once an op is queued behind
 * it (the barrier's, enqueued by the call the test is in). */
typedef struct fail_when_followed {
    const _Atomic uint64_t *submitted; /* the stream's count of ops */
    uint64_t mine;                     /* the task's own number */
    _Atomic int followed;
} fail_when_followed_t;

static ordo_status_t fail_when_followed(void *ctx) {
    fail_when_followed_t *f = ctx;
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load(f->submitted) == f->mine && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    atomic_store(&f->followed, atomic_load(f->submitted) != f->mine);
    return ORDO_ERR_UNAVAILABLE;
}

/* barrier.h: the host synchronize returns the failure of the first failed
 * member in set order. Member 2 failed before the call (its point is
 * refused while the call enqueues); member 1 fails only after its point
 * was enqueued, while the host waits: member 1's failure is the answer. */
static void synchronize_answers_the_first_member_in_set_order(void **state) {
    (void)state;
    enum { N = 3 };
    if (!device->backend->stream_progress) {
        print_message("skipped: the backend does not number a stream's ops\n");
        skip();
    }
    for (int one_shot = 0; one_shot < 2; ++one_shot) {
        ordo_stream_t *streams[N];
        streams_make(streams, N);
        assert_ok(ordo_stream_host_task(streams[2], fail_task, NULL));
        assert_status(ordo_stream_synchronize(streams[2], test_deadline()), ORDO_ERR_ABORTED);
        ordo_barrier_t *barrier = NULL;
        if (!one_shot) {
            assert_ok(ordo_barrier_create(streams, N, ORDO_BARRIER_SCHEME_AUTO, &barrier));
        }
        fail_when_followed_t f = {NULL, 0, 0};
        ordo_signal_t *progress = NULL;
        device->backend->stream_progress(streams[1], &progress, &f.submitted);
        f.mine = atomic_load(f.submitted) + 1; /* the task's number */
        assert_ok(ordo_stream_host_task(streams[1], fail_when_followed, &f));
        ordo_status_t st = one_shot
                               ? ordo_barrier_synchronize_streams(streams, N, test_deadline(), NULL)
                               : ordo_barrier_synchronize(barrier, test_deadline(), NULL);
        assert_true(atomic_load(&f.followed));
        if (st != ORDO_ERR_UNAVAILABLE) {
            fail_msg("%s: %s (%s), expected member 1's ORDO_ERR_UNAVAILABLE",
                     one_shot ? "ordo_barrier_synchronize_streams" : "ordo_barrier_synchronize",
                     ordo_status_name(st), ordo_error_message());
        }
        assert_non_null(strstr(ordo_error_message(), "member 1"));
        if (barrier) {
            assert_ok(ordo_barrier_destroy(barrier));
        }
        streams_destroy(streams, N);
    }
}

/* Sleeps 20 ms, then counts itself done. */
static ordo_status_t sleep_20ms_then_count(void *ctx) {
    test_sleep_ms(20);
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

static void synchronize_waits_for_healthy_streams(void **state) {
    (void)state;
    ordo_stream_t *streams[2];
    streams_make(streams, 2);
    _Atomic int done = 0;
    assert_ok(ordo_stream_host_task(streams[0], fail_task, NULL));
    assert_ok(ordo_stream_host_task(streams[1], sleep_20ms_then_count, &done));
    uint64_t ns = 0;
    assert_status(ordo_barrier_synchronize_streams(streams, 2, test_deadline(), &ns),
                  ORDO_ERR_ABORTED);
    /* The failure did not end the wait early: the healthy stream's work
     * was done when it returned. */
    assert_int_equal(atomic_load(&done), 1);
    assert_true(ns > 0);
    assert_ok(ordo_stream_status(streams[1]));
    /* The reusable form: a stream failed before the barrier was made. */
    ordo_barrier_t *barrier;
    assert_ok(ordo_barrier_create(streams, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_ok(ordo_stream_host_task(streams[1], sleep_20ms_then_count, &done));
    ns = 0;
    assert_status(ordo_barrier_synchronize(barrier, test_deadline(), &ns), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&done), 2);
    assert_true(ns > 0);
    assert_ok(ordo_barrier_destroy(barrier));
    streams_destroy(streams, 2);
}

/* ---- sets: duplicates, one stream, many streams --------------------------- */

static void duplicates_merge(void **state) {
    (void)state;
    ordo_stream_t *streams[2];
    streams_make(streams, 2);
    ordo_stream_t *listed[5] = {streams[0], streams[1], streams[0], streams[1], streams[1]};
    ordo_barrier_t *barrier;
    assert_ok(ordo_barrier_create(listed, 5, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    size_t count = 0;
    assert_ok(ordo_barrier_stream_count(barrier, &count));
    assert_int_equal(count, 2);
    board_t *board = calloc(1, sizeof *board);
    board->n = 2;
    cell_task_t tasks[2] = {{board, 0, 0}, {board, 1, 0}};
    for (size_t i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_host_task(streams[i], write_cell, &tasks[i]));
    }
    assert_ok(ordo_barrier_arrive(barrier));
    assert_ok(ordo_barrier_streams(listed, 5));
    for (size_t i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_host_task(streams[i], read_cells, &tasks[i]));
    }
    assert_ok(ordo_barrier_synchronize_streams(listed, 5, test_deadline(), NULL));
    assert_int_equal(atomic_load(&board->reads), 2);
    assert_int_equal(atomic_load(&board->wrong), 0);
    free(board);
    assert_ok(ordo_barrier_destroy(barrier));

    /* A set of one stream is valid. */
    assert_ok(ordo_barrier_create(streams, 1, ORDO_BARRIER_SCHEME_HUB, &barrier));
    assert_ok(ordo_barrier_arrive(barrier));
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), NULL));
    assert_ok(ordo_barrier_destroy(barrier));
    assert_ok(ordo_barrier_streams(streams, 1));
    streams_destroy(streams, 2);
}

typedef struct tally {
    _Atomic int *written;
    int expected;
    _Atomic int *wrong;
} tally_t;

static ordo_status_t bump(void *ctx) {
    atomic_fetch_add(((tally_t *)ctx)->written, 1);
    return ORDO_OK;
}

static ordo_status_t check_all(void *ctx) {
    tally_t *t = ctx;
    if (atomic_load(t->written) < t->expected) {
        atomic_fetch_add(t->wrong, 1);
    }
    return ORDO_OK;
}

static void many_streams(void **state) {
    (void)state;
    enum { N = 64, ROUNDS_MANY = 3 };
    ordo_stream_t **streams = calloc(N, sizeof *streams);
    streams_make(streams, N);
    _Atomic int written = 0, wrong = 0;
    tally_t tallies[ROUNDS_MANY];
    for (int scheme = ORDO_BARRIER_SCHEME_HUB; scheme <= ORDO_BARRIER_SCHEME_ALL_TO_ALL; ++scheme) {
        atomic_store(&written, 0);
        ordo_barrier_t *barrier;
        assert_ok(ordo_barrier_create(streams, N, (ordo_barrier_scheme_t)scheme, &barrier));
        for (int r = 0; r < ROUNDS_MANY; ++r) {
            tallies[r] = (tally_t){&written, (r + 1) * N, &wrong};
            for (size_t i = 0; i < N; ++i) {
                assert_ok(ordo_stream_host_task(streams[i], bump, &tallies[r]));
            }
            assert_ok(ordo_barrier_arrive(barrier));
            for (size_t i = 0; i < N; ++i) {
                assert_ok(ordo_stream_host_task(streams[i], check_all, &tallies[r]));
            }
        }
        assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), NULL));
        assert_int_equal(atomic_load(&wrong), 0);
        assert_int_equal(atomic_load(&written), ROUNDS_MANY * N);
        assert_ok(ordo_barrier_destroy(barrier));
    }
    streams_destroy(streams, N);
    free(streams);
}

/* ---- bad input ------------------------------------------------------------ */

static void bad_input_is_refused(void **state) {
    (void)state;
    ordo_stream_t *streams[2];
    streams_make(streams, 2);
    ordo_barrier_t *barrier = NULL;
    ordo_stream_t *with_null[2] = {streams[0], NULL};
    ordo_signal_t *not_a_stream = test_signal_make(0);
    ordo_stream_t *with_garbage[2] = {streams[0], (ordo_stream_t *)(void *)not_a_stream};
    ordo_stream_t *too_many[ORDO_BARRIER_MAX_STREAMS + 1];
    for (size_t i = 0; i <= ORDO_BARRIER_MAX_STREAMS; ++i) {
        too_many[i] = streams[i % 2];
    }
    ordo_device_t *owned;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &owned));
    ordo_stream_t *foreign;
    assert_ok(ordo_stream_create(owned, 0, &foreign));
    ordo_stream_t *mixed[2] = {streams[0], foreign};

    /* Creation. */
    assert_status(ordo_barrier_create(streams, 2, ORDO_BARRIER_SCHEME_AUTO, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_create(NULL, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_create(streams, 0, ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_create(too_many, ORDO_BARRIER_MAX_STREAMS + 1,
                                      ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_barrier_create(with_null, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_create(with_garbage, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_create(mixed, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_create(streams, 2, (ordo_barrier_scheme_t)9, &barrier),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_null(barrier);
    /* The full set size is accepted (duplicates merge). */
    assert_ok(ordo_barrier_create(too_many, ORDO_BARRIER_MAX_STREAMS, ORDO_BARRIER_SCHEME_AUTO,
                                  &barrier));
    assert_ok(ordo_barrier_destroy(barrier));

    /* The one-shot forms refuse the same sets. */
    uint64_t ns = 0;
    ordo_stream_t *const *sets[] = {NULL, with_null, with_garbage, mixed};
    const ordo_status_t want[] = {ORDO_ERR_INVALID_ARGUMENT, ORDO_ERR_INVALID_HANDLE,
                                  ORDO_ERR_INVALID_HANDLE, ORDO_ERR_INVALID_ARGUMENT};
    for (size_t k = 0; k < 4; ++k) {
        assert_status(ordo_barrier_streams(sets[k], 2), want[k]);
        assert_status(ordo_barrier_synchronize_streams(sets[k], 2, test_deadline(), &ns), want[k]);
    }
    assert_status(ordo_barrier_streams(streams, 0), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_synchronize_streams(streams, 0, test_deadline(), &ns),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_barrier_streams(too_many, ORDO_BARRIER_MAX_STREAMS + 1),
                  ORDO_ERR_OUT_OF_RANGE);

    /* Handles. */
    size_t count;
    assert_status(ordo_barrier_arrive(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_synchronize(NULL, test_deadline(), &ns), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_stream_count(NULL, &count), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_barrier_arrive((ordo_barrier_t *)(void *)not_a_stream),
                  ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_barrier_create(streams, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_status(ordo_barrier_stream_count(barrier, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_barrier_destroy(barrier));

    /* A member destroyed after the barrier was made: refused, without
     * touching the freed stream. */
    ordo_stream_t *doomed[3];
    streams_make(doomed, 3);
    assert_ok(ordo_barrier_create(doomed, 3, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_ok(ordo_barrier_arrive(barrier));
    assert_ok(ordo_stream_destroy(doomed[1]));
    assert_status(ordo_barrier_arrive(barrier), ORDO_ERR_DESTROYED);
    assert_status(ordo_barrier_synchronize(barrier, test_deadline(), &ns), ORDO_ERR_DESTROYED);
    /* A new stream (perhaps at the same address) does not revive it. */
    ordo_stream_t *fresh;
    assert_ok(ordo_stream_create(device, 0, &fresh));
    assert_status(ordo_barrier_arrive(barrier), ORDO_ERR_DESTROYED);
    assert_ok(ordo_barrier_destroy(barrier));
    assert_ok(ordo_stream_destroy(fresh));
    /* Destroying an unrelated stream does not disturb a barrier. */
    assert_ok(ordo_barrier_create(streams, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_ok(ordo_stream_destroy(doomed[0]));
    assert_ok(ordo_barrier_arrive(barrier));
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), &ns));
    assert_ok(ordo_barrier_destroy(barrier));
    assert_ok(ordo_stream_destroy(doomed[2]));

    assert_ok(ordo_stream_destroy(foreign));
    assert_ok(ordo_device_release(owned));
    assert_ok(ordo_signal_destroy(not_a_stream));
    streams_destroy(streams, 2);
}

/* Destroying a barrier with its operations still queued: they keep their
 * timelines alive and still run. */
static void destroy_with_operations_queued(void **state) {
    (void)state;
    ordo_stream_t *streams[3];
    streams_make(streams, 3);
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(streams[0], gate, 1));
    ordo_barrier_t *barrier;
    assert_ok(ordo_barrier_create(streams, 3, ORDO_BARRIER_SCHEME_HUB, &barrier));
    assert_ok(ordo_barrier_arrive(barrier));
    assert_ok(ordo_barrier_destroy(barrier));
    _Atomic int after = 0;
    for (size_t i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_host_task(streams[i], count_task, &after));
    }
    test_sleep_ms(5);
    assert_int_equal(atomic_load(&after), 0);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_barrier_synchronize_streams(streams, 3, test_deadline(), NULL));
    assert_int_equal(atomic_load(&after), 3);
    assert_ok(ordo_signal_destroy(gate));
    streams_destroy(streams, 3);
}

/* ---- bad input: barrier.h (tests/refusal.h) */

static void barrier_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_barrier_t *barrier = (ordo_barrier_t *)1;
    ordo_stream_t *wrong[2] = {f.s[0], AS(ordo_stream_t, f.signal)};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, barrier, ordo_barrier_create, wrong, 2,
                   ORDO_BARRIER_SCHEME_AUTO, &barrier);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, barrier, ordo_barrier_create, f.s, SIZE_MAX,
                   ORDO_BARRIER_SCHEME_AUTO, &barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, barrier, ordo_barrier_create, f.s, 2,
                   (ordo_barrier_scheme_t)-1, &barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, barrier, ordo_barrier_create, f.s, 2,
                   (ordo_barrier_scheme_t)3, &barrier);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_barrier_streams, f.s, SIZE_MAX);
    uint64_t ns = 5;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, ns, ordo_barrier_synchronize_streams, f.s, SIZE_MAX,
                   ORDO_DEADLINE_NOW, &ns);
    assert_ok(ordo_barrier_create(f.s, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    ordo_barrier_t *not_barrier = AS(ordo_barrier_t, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_barrier_destroy, not_barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ns, ordo_barrier_synchronize, not_barrier,
                   ORDO_DEADLINE_NOW, &ns);
    size_t count;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_barrier_stream_count, not_barrier, &count);
    /* out_elapsed_ns may be NULL. */
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), NULL));
    assert_ok(ordo_barrier_synchronize_streams(f.s, 2, test_deadline(), NULL));
    assert_ok(ordo_barrier_destroy(barrier));

    /* A barrier of one failed stream returns the failure with a message of
     * its own (not whatever message came before). */
    ordo_stream_t *failed = NULL;
    assert_ok(ordo_stream_create(f.device, 0, &failed));
    assert_ok(ordo_stream_host_task(failed, fail_task, NULL));
    assert_status(ordo_stream_synchronize(failed, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_barrier_create(&failed, 1, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    REFUSED(ORDO_ERR_ABORTED, ordo_barrier_arrive, barrier);
    assert_null(strstr(ordo_error_message(), "ordo_allocator_live_blocks"));
    REFUSED(ORDO_ERR_ABORTED, ordo_barrier_streams, &failed, 1);
    assert_null(strstr(ordo_error_message(), "ordo_allocator_live_blocks"));
    assert_ok(ordo_barrier_destroy(barrier));
    assert_ok(ordo_stream_destroy(failed));
    refusal_fixture_free(&f);
}

/* docs/ERRORS.md, "Objects owned by other objects": a use that is defined
 * stays defined (tests/refusal.h). */
static void barrier_reports_a_destroyed_member(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    /* A barrier member destroyed: the barrier reports it, untouched. */
    ordo_stream_t *member = NULL;
    assert_ok(ordo_stream_create(f.device, 0, &member));
    ordo_stream_t *set[2] = {f.s[0], member};
    ordo_barrier_t *barrier = NULL;
    assert_ok(ordo_barrier_create(set, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_ok(ordo_stream_destroy(member));
    REFUSED(ORDO_ERR_DESTROYED, ordo_barrier_arrive, barrier);
    assert_ok(ordo_barrier_destroy(barrier));
    refusal_fixture_free(&f);
}

int main(void) {
    test_conformance_begin("barrier");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(barrier_orders_real_data),
        cmocka_unit_test(device_barrier_does_not_block),
        cmocka_unit_test(synchronize_reports_its_time),
        cmocka_unit_test(failure_propagates),
        cmocka_unit_test(synchronize_waits_for_healthy_streams),
        cmocka_unit_test(synchronize_answers_the_first_member_in_set_order),
        cmocka_unit_test(duplicates_merge),
        cmocka_unit_test(many_streams),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(destroy_with_operations_queued),
        cmocka_unit_test(barrier_entry_points_refuse_bad_input),
        cmocka_unit_test(barrier_reports_a_destroyed_member),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
