/* ordo/mpi.h under mpirun (-np 2 and -np 4): communication as tracked work.
 *
 * Every rank runs the same cases in the same order and checks its own
 * results; a check that fails is reported on stderr with the rank, and the
 * case goes on (so every rank still submits the same collectives). After
 * each case the ranks agree on their failure counts (a bounded
 * MPI_Iallreduce of the program's own); the program exits 1 on every rank
 * if any check failed on any rank. Every wait has a deadline: an ordo wait
 * that passes it is a failed check, and an MPI wait of the program's own
 * that passes it (a rank stuck in a collective, or a destroy that cannot
 * finish) ends the job with MPI_Abort, so a bug fails instead of hanging.
 *
 * Cases: gradient buckets (compute writes bucket k, its allreduce, a second
 * stage reads it; the next write of bucket k waits for both), a ring
 * pipeline (each round computed from the previous round's message),
 * broadcast from every root, all-to-all, isolation of ordo's traffic from
 * the program's (a duplicate communicator), two communications of one
 * tracker reducing the same buckets in turn, a buffer released with its
 * allreduce in flight (reclaimed after it), the progress thread's CPU
 * while idle and while a receive waits, destroy with operations in flight,
 * destroy past its deadline, MPI errors (a truncated receive; a request
 * that cannot start) failing the communication stream and what waits on
 * it, a thousand small allreduces back to back, signals across ranks,
 * ranks alive but quiet never found dead, a stall report naming a cycle
 * of waits round the ranks, a destroy ending other ranks' subscriptions,
 * and bad input.
 * TEST_MPI_CASE=<name> runs one case. */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include "ordo/mpi.h"
#include "ordo/ordo.h"

/* The bound on any single wait (4 ranks share 2 cores, sanitizers slow it). */
#define TEST_WAIT_MS 30000

static int rank, size;
static int case_failures; /* this rank's failed checks in the current case */
static const char *case_name = "setup";

static ordo_deadline_t test_deadline(void) {
    return ordo_deadline_after_ms(TEST_WAIT_MS);
}

static void check_failed(int line, const char *fmt, ...) ORDO_FORMAT_(2, 3);
static void check_failed(int line, const char *fmt, ...) {
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    fprintf(stderr, "[rank %d/%d] %s: line %d: %s\n", rank, size, case_name, line, text);
    fflush(stderr);
    ++case_failures;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            check_failed(__LINE__, "%s", #cond);                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_STATUS(expr, expected)                                                               \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != (expected)) {                                                                   \
            check_failed(__LINE__, "%s returned %s, expected %s (%s)", #expr,                      \
                         ordo_status_name(st_), ordo_status_name(expected),                        \
                         st_ ? ordo_error_message() : "");                                         \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, ORDO_OK)

/* Ends the whole job: something a later step needs is missing, or a rank
 * is stuck where the program cannot go on. */
static _Noreturn void abort_job(int line, const char *what) {
    fprintf(stderr, "[rank %d/%d] %s: line %d: %s (%s); aborting the job\n", rank, size, case_name,
            line, what, ordo_error_message());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    abort();
}

#define REQUIRE_OK(expr)                                                                           \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != ORDO_OK) {                                                                      \
            abort_job(__LINE__, #expr " failed");                                                  \
        }                                                                                          \
    } while (0)

/* Completes a request of the program's own, or ends the job at the
 * deadline. */
static void mpi_wait_bounded(MPI_Request *request, MPI_Status *status, int line) {
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        int done = 0;
        int rc = MPI_Test(request, &done, status ? status : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            abort_job(line, "MPI_Test failed");
        }
        if (done) {
            return;
        }
        if (ordo_time_now_ns() >= deadline) {
            abort_job(line, "an MPI request of the test did not complete in time");
        }
        sched_yield();
    }
}

/* The sum of value over the ranks (MPI_COMM_WORLD, bounded). */
static int world_sum(int value) {
    int total = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
    mpi_wait_bounded(&request, NULL, __LINE__);
    return total;
}

/* Every rank gets here (a barrier of the program's own, bounded). */
static void ranks_meet(int line) {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    mpi_wait_bounded(&request, MPI_STATUS_IGNORE, line);
}

/* Whether the last ordo error message starts with "api: ". */
static int message_names(const char *api) {
    const char *message = ordo_error_message();
    size_t n = strlen(api);
    return strncmp(message, api, n) == 0 && message[n] == ':';
}

/* ---- a fixture: a tracker, two compute streams, the communication ------ */

static ordo_device_t *device;

typedef struct fixture {
    ordo_tracker_t *tracker;
    ordo_stream_t *compute;  /* the first compute stage */
    ordo_stream_t *consumer; /* the second */
    ordo_stream_t *comm;     /* the communication stream, given to mpi */
    ordo_mpi_t *mpi;
} fixture_t;

/* Collective over MPI_COMM_WORLD (ordo_mpi_create duplicates it). */
static void fixture_open(fixture_t *f) {
    memset(f, 0, sizeof *f);
    REQUIRE_OK(ordo_tracker_create(device, &f->tracker));
    REQUIRE_OK(ordo_stream_create(device, 0, &f->compute));
    REQUIRE_OK(ordo_stream_create(device, 0, &f->consumer));
    REQUIRE_OK(ordo_stream_create(device, 0, &f->comm));
    REQUIRE_OK(ordo_stream_set_name(f->compute, "compute"));
    REQUIRE_OK(ordo_stream_set_name(f->consumer, "consumer"));
    REQUIRE_OK(ordo_stream_set_name(f->comm, "communication"));
    REQUIRE_OK(ordo_mpi_create(f->tracker, f->comm, MPI_COMM_WORLD, &f->mpi));
    ordo_stream_t *stream = NULL;
    CHECK_OK(ordo_mpi_stream(f->mpi, &stream));
    CHECK(stream == f->comm);
    int r = -1, s = -1;
    CHECK_OK(ordo_mpi_rank(f->mpi, &r, &s));
    CHECK(r == rank);
    CHECK(s == size);
}

/* The teardown order of ordo/tracker.h and ordo/mpi.h: the buffers are
 * released by the case; then synchronize, the communication (the tracker
 * and the streams outlive it), the tracker, the streams. expect_sync and
 * expect_destroy are what the synchronize and ordo_mpi_destroy should
 * return. */
static void fixture_close(fixture_t *f, ordo_status_t expect_sync, ordo_status_t expect_destroy) {
    CHECK_STATUS(ordo_tracker_synchronize(f->tracker, test_deadline()), expect_sync);
    ordo_status_t st = ordo_mpi_destroy(f->mpi, test_deadline());
    if (st == ORDO_ERR_TIMEOUT) {
        abort_job(__LINE__, "ordo_mpi_destroy timed out");
    }
    CHECK_STATUS(st, expect_destroy);
    CHECK_OK(ordo_tracker_drain(f->tracker, test_deadline()));
    CHECK_OK(ordo_tracker_destroy(f->tracker));
    CHECK_OK(ordo_stream_destroy(f->compute));
    CHECK_OK(ordo_stream_destroy(f->consumer));
    CHECK_OK(ordo_stream_destroy(f->comm));
}

static ordo_buffer_t *buffer_make(fixture_t *f) {
    ordo_buffer_t *buffer = NULL;
    REQUIRE_OK(ordo_buffer_create(f->tracker, &buffer));
    return buffer;
}

static void host_task(fixture_t *f, ordo_stream_t *stream, ordo_buffer_t *buffer,
                      ordo_access_mode_t mode, ordo_host_fn fn, void *ctx, int line) {
    ordo_access_t access = {buffer, mode};
    ordo_status_t st = ordo_tracker_submit_host(f->tracker, stream, &access, 1, fn, ctx);
    if (st != ORDO_OK) {
        check_failed(line, "ordo_tracker_submit_host returned %s (%s)", ordo_status_name(st),
                     ordo_error_message());
    }
}

/* A mismatch seen by a host task: counted, and the first one kept. */
typedef struct mismatches {
    _Atomic uint64_t count;
    _Atomic int recorded;
    char first[256];
} mismatches_t;

static void mismatch(mismatches_t *m, const char *fmt, ...) ORDO_FORMAT_(2, 3);
static void mismatch(mismatches_t *m, const char *fmt, ...) {
    if (atomic_fetch_add(&m->count, 1) == 0) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(m->first, sizeof m->first, fmt, args);
        va_end(args);
        atomic_store(&m->recorded, 1);
    }
}

static void check_no_mismatch(mismatches_t *m, int line) {
    uint64_t count = atomic_load(&m->count);
    if (count) {
        check_failed(line, "%llu wrong values; the first: %s", (unsigned long long)count,
                     atomic_load(&m->recorded) ? m->first : "?");
    }
}

/* ---- gradient buckets: compute, allreduce, a second stage --------------- */

#define BUCKETS 4
#define BUCKET_LEN 4096
#define BUCKET_ITERS 16

/* What rank r adds to element i of bucket k at iteration it. */
static int64_t contribution(int r, int it, int k, int i) {
    return (int64_t)((r + 1) * 7 + it * 3 + k * 11 + i % 97);
}

typedef struct gradients {
    int64_t data[BUCKETS][BUCKET_LEN];
    int64_t expect[BUCKETS][BUCKET_LEN]; /* the consumer's own serial model */
    mismatches_t wrong;
    _Atomic int checked;
} gradients_t;

typedef struct bucket_step {
    gradients_t *g;
    int k, it;
} bucket_step_t;

/* Compute (a read-write of bucket k): the rank's contribution of this
 * iteration, added to the previous iteration's reduced values. */
static ordo_status_t bucket_compute(void *ctx) {
    const bucket_step_t *s = ctx;
    int64_t *data = s->g->data[s->k];
    for (int i = 0; i < BUCKET_LEN; ++i) {
        data[i] += contribution(rank, s->it, s->k, i);
    }
    return ORDO_OK;
}

/* The second stage (a read of bucket k): after the allreduce the bucket
 * holds size * previous + the sum over ranks of the contributions. */
static ordo_status_t bucket_check(void *ctx) {
    const bucket_step_t *s = ctx;
    const int64_t *data = s->g->data[s->k];
    int64_t *expect = s->g->expect[s->k];
    for (int i = 0; i < BUCKET_LEN; ++i) {
        int64_t sum = 0;
        for (int r = 0; r < size; ++r) {
            sum += contribution(r, s->it, s->k, i);
        }
        expect[i] = expect[i] * size + sum;
        if (data[i] != expect[i]) {
            mismatch(&s->g->wrong, "bucket %d iteration %d element %d: %lld, expected %lld", s->k,
                     s->it, i, (long long)data[i], (long long)expect[i]);
        }
    }
    atomic_fetch_add(&s->g->checked, 1);
    return ORDO_OK;
}

/* The overlap of compute and allreduce, ordered by the tracker alone: the
 * compute of bucket k at iteration it + 1 reads what the allreduce of
 * iteration it wrote and must not start before the second stage has read
 * it, so any missing order changes the values. While the work runs, the
 * program makes MPI calls of its own (MPI_THREAD_MULTIPLE). */
static void allreduce_overlap(void) {
    fixture_t f;
    fixture_open(&f);
    gradients_t *g = calloc(1, sizeof *g);
    bucket_step_t *steps = calloc(BUCKET_ITERS * BUCKETS, sizeof *steps);
    ordo_buffer_t *bucket[BUCKETS];
    for (int k = 0; k < BUCKETS; ++k) {
        bucket[k] = buffer_make(&f);
    }
    for (int it = 0; it < BUCKET_ITERS; ++it) {
        for (int k = 0; k < BUCKETS; ++k) {
            bucket_step_t *s = &steps[it * BUCKETS + k];
            *s = (bucket_step_t){g, k, it};
            host_task(&f, f.compute, bucket[k], ORDO_ACCESS_READ_WRITE, bucket_compute, s,
                      __LINE__);
            CHECK_OK(
                ordo_mpi_allreduce(f.mpi, bucket[k], g->data[k], BUCKET_LEN, MPI_INT64_T, MPI_SUM));
            host_task(&f, f.consumer, bucket[k], ORDO_ACCESS_READ, bucket_check, s, __LINE__);
        }
        /* The program's own collective, concurrent with ordo's. */
        CHECK(world_sum(it) == it * size);
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    check_no_mismatch(&g->wrong, __LINE__);
    CHECK(atomic_load(&g->checked) == BUCKET_ITERS * BUCKETS);
    /* The host sees the last reduction too. */
    for (int k = 0; k < BUCKETS; ++k) {
        CHECK(memcmp(g->data[k], g->expect[k], sizeof g->data[k]) == 0);
    }
    ordo_tracker_metrics_t m;
    CHECK_OK(ordo_tracker_metrics(f.tracker, &m));
    CHECK(m.waits_emitted > 0);
    for (int k = 0; k < BUCKETS; ++k) {
        CHECK_OK(ordo_buffer_release(bucket[k], NULL, NULL));
    }
    fixture_close(&f, ORDO_OK, ORDO_OK);
    free(steps);
    free(g);
}

/* ---- a ring pipeline ---------------------------------------------------- */

#define RING_LEN 32768 /* 256 KiB a message: past the eager limit */
#define RING_ROUNDS 10

/* What rank r sends in round t: round 0 its own values; round t the
 * message it received in round t - 1 plus (r + 1) * t. */
static int64_t ring_value(int r, int t, int i) {
    if (t == 0) {
        return (int64_t)r * 1000003 + i;
    }
    int from = (r + size - 1) % size;
    return ring_value(from, t - 1, i) + (int64_t)(r + 1) * t;
}

typedef struct ring {
    int64_t send[2][RING_LEN];
    int64_t recv[2][RING_LEN];
    mismatches_t wrong;
    _Atomic int checked;
} ring_t;

typedef struct ring_step {
    ring_t *ring;
    int t;
} ring_step_t;

/* Round t's message: from round t - 1's received one (slot (t - 1) % 2)
 * into send slot t % 2, whose round t - 2 send must have completed. */
static ordo_status_t ring_produce(void *ctx) {
    const ring_step_t *s = ctx;
    int64_t *out = s->ring->send[s->t % 2];
    if (s->t == 0) {
        for (int i = 0; i < RING_LEN; ++i) {
            out[i] = ring_value(rank, 0, i);
        }
        return ORDO_OK;
    }
    const int64_t *in = s->ring->recv[(s->t - 1) % 2];
    for (int i = 0; i < RING_LEN; ++i) {
        out[i] = in[i] + (int64_t)(rank + 1) * s->t;
    }
    return ORDO_OK;
}

static ordo_status_t ring_check(void *ctx) {
    const ring_step_t *s = ctx;
    const int64_t *in = s->ring->recv[s->t % 2];
    int from = (rank + size - 1) % size;
    for (int i = 0; i < RING_LEN; ++i) {
        int64_t expect = ring_value(from, s->t, i);
        if (in[i] != expect) {
            mismatch(&s->ring->wrong, "round %d element %d: %lld, expected %lld", s->t, i,
                     (long long)in[i], (long long)expect);
            break;
        }
    }
    atomic_fetch_add(&s->ring->checked, 1);
    return ORDO_OK;
}

/* Rank r sends to r + 1 and receives from r - 1 each round; even ranks
 * send first and odd ranks receive first (operations on the communication
 * stream complete in order, so as with blocking MPI calls, all sending
 * first would wait on each other past the eager limit). */
static void ring_pipeline(void) {
    fixture_t f;
    fixture_open(&f);
    ring_t *ring = calloc(1, sizeof *ring);
    ring_step_t steps[RING_ROUNDS];
    ordo_buffer_t *send[2] = {buffer_make(&f), buffer_make(&f)};
    ordo_buffer_t *recv[2] = {buffer_make(&f), buffer_make(&f)};
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int t = 0; t < RING_ROUNDS; ++t) {
        int slot = t % 2;
        steps[t] = (ring_step_t){ring, t};
        ordo_access_t produce[2] = {{send[slot], ORDO_ACCESS_WRITE},
                                    {recv[1 - slot], ORDO_ACCESS_READ}};
        CHECK_OK(ordo_tracker_submit_host(f.tracker, f.compute, produce, t ? 2 : 1, ring_produce,
                                          &steps[t]));
        for (int phase = 0; phase < 2; ++phase) {
            if ((phase == 0) == (rank % 2 == 0)) {
                CHECK_OK(ordo_mpi_send(f.mpi, send[slot], ring->send[slot], RING_LEN, MPI_INT64_T,
                                       next, t));
            } else {
                CHECK_OK(ordo_mpi_recv(f.mpi, recv[slot], ring->recv[slot], RING_LEN, MPI_INT64_T,
                                       prev, t));
            }
        }
        host_task(&f, f.consumer, recv[slot], ORDO_ACCESS_READ, ring_check, &steps[t], __LINE__);
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    check_no_mismatch(&ring->wrong, __LINE__);
    CHECK(atomic_load(&ring->checked) == RING_ROUNDS);
    for (int s = 0; s < 2; ++s) {
        CHECK_OK(ordo_buffer_release(send[s], NULL, NULL));
        CHECK_OK(ordo_buffer_release(recv[s], NULL, NULL));
    }
    fixture_close(&f, ORDO_OK, ORDO_OK);
    free(ring);
}

/* ---- broadcast from every root ------------------------------------------ */

#define BCAST_LEN 20000

typedef struct bcast_data {
    int32_t values[BCAST_LEN];
    mismatches_t wrong;
    _Atomic int checked;
} bcast_data_t;

typedef struct bcast_step {
    bcast_data_t *d;
    int round, root;
} bcast_step_t;

static int32_t bcast_value(int round, int root, int i) {
    return round * 1000000 + root * 100000 + i;
}

/* On the root, the values to send; elsewhere, garbage the broadcast must
 * overwrite (and must not be overwritten by: a write after write). */
static ordo_status_t bcast_fill(void *ctx) {
    const bcast_step_t *s = ctx;
    for (int i = 0; i < BCAST_LEN; ++i) {
        s->d->values[i] = rank == s->root ? bcast_value(s->round, s->root, i) : -1 - i;
    }
    return ORDO_OK;
}

static ordo_status_t bcast_check(void *ctx) {
    const bcast_step_t *s = ctx;
    for (int i = 0; i < BCAST_LEN; ++i) {
        if (s->d->values[i] != bcast_value(s->round, s->root, i)) {
            mismatch(&s->d->wrong, "round %d (root %d) element %d: %d, expected %d", s->round,
                     s->root, i, s->d->values[i], bcast_value(s->round, s->root, i));
            break;
        }
    }
    atomic_fetch_add(&s->d->checked, 1);
    return ORDO_OK;
}

static void bcast_every_root(void) {
    fixture_t f;
    fixture_open(&f);
    bcast_data_t *d = calloc(1, sizeof *d);
    const int rounds = 2 * size;
    bcast_step_t *steps = calloc((size_t)rounds, sizeof *steps);
    ordo_buffer_t *buffer = buffer_make(&f);
    for (int round = 0; round < rounds; ++round) {
        steps[round] = (bcast_step_t){d, round, round % size};
        host_task(&f, f.compute, buffer, ORDO_ACCESS_WRITE, bcast_fill, &steps[round], __LINE__);
        CHECK_OK(ordo_mpi_bcast(f.mpi, buffer, d->values, BCAST_LEN, MPI_INT32_T, round % size));
        host_task(&f, f.consumer, buffer, ORDO_ACCESS_READ, bcast_check, &steps[round], __LINE__);
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    check_no_mismatch(&d->wrong, __LINE__);
    CHECK(atomic_load(&d->checked) == rounds);
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    free(steps);
    free(d);
}

/* ---- all-to-all ---------------------------------------------------------- */

#define A2A_COUNT 3000 /* elements to each rank */
#define A2A_ROUNDS 12
#define A2A_MAX_RANKS 16

typedef struct a2a_data {
    int32_t send[A2A_MAX_RANKS * A2A_COUNT];
    int32_t recv[A2A_MAX_RANKS * A2A_COUNT];
    mismatches_t wrong;
    _Atomic int checked;
} a2a_data_t;

typedef struct a2a_step {
    a2a_data_t *d;
    int round;
} a2a_step_t;

/* What rank from sends to rank to, element i, in round. */
static int32_t a2a_value(int round, int from, int to, int i) {
    return ((round * A2A_MAX_RANKS + from) * A2A_MAX_RANKS + to) * 4096 + i % 4096;
}

static ordo_status_t a2a_fill(void *ctx) {
    const a2a_step_t *s = ctx;
    for (int to = 0; to < size; ++to) {
        for (int i = 0; i < A2A_COUNT; ++i) {
            s->d->send[to * A2A_COUNT + i] = a2a_value(s->round, rank, to, i);
        }
    }
    return ORDO_OK;
}

static ordo_status_t a2a_check(void *ctx) {
    const a2a_step_t *s = ctx;
    for (int from = 0; from < size; ++from) {
        for (int i = 0; i < A2A_COUNT; ++i) {
            int32_t got = s->d->recv[from * A2A_COUNT + i];
            int32_t expect = a2a_value(s->round, from, rank, i);
            if (got != expect) {
                mismatch(&s->d->wrong, "round %d from rank %d element %d: %d, expected %d",
                         s->round, from, i, got, expect);
                from = size;
                break;
            }
        }
    }
    atomic_fetch_add(&s->d->checked, 1);
    return ORDO_OK;
}

static void alltoall(void) {
    if (size > A2A_MAX_RANKS) {
        abort_job(__LINE__, "more ranks than the all-to-all case holds");
    }
    fixture_t f;
    fixture_open(&f);
    a2a_data_t *d = calloc(1, sizeof *d);
    a2a_step_t steps[A2A_ROUNDS];
    ordo_buffer_t *send = buffer_make(&f), *recv = buffer_make(&f);
    for (int round = 0; round < A2A_ROUNDS; ++round) {
        steps[round] = (a2a_step_t){d, round};
        host_task(&f, f.compute, send, ORDO_ACCESS_WRITE, a2a_fill, &steps[round], __LINE__);
        CHECK_OK(ordo_mpi_alltoall(f.mpi, send, d->send, recv, d->recv, A2A_COUNT, MPI_INT32_T));
        host_task(&f, f.consumer, recv, ORDO_ACCESS_READ, a2a_check, &steps[round], __LINE__);
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    check_no_mismatch(&d->wrong, __LINE__);
    CHECK(atomic_load(&d->checked) == A2A_ROUNDS);
    CHECK_OK(ordo_buffer_release(send, NULL, NULL));
    CHECK_OK(ordo_buffer_release(recv, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    free(d);
}

/* ---- ordo's traffic is its own ------------------------------------------ */

/* Even rank r and r + 1 form a pair (the last rank of an odd size has
 * none). */
static int pair_peer(void) {
    if (rank % 2 == 0) {
        return rank + 1 < size ? rank + 1 : -1;
    }
    return rank - 1;
}

/* The program and ordo send on "the same" communicator with the same tag:
 * ordo's duplicate keeps the two apart, whichever is posted first. */
static void traffic_isolated(void) {
    fixture_t f;
    fixture_open(&f);
    int peer = pair_peer();
    const int tag = 7;
    int32_t program_value = -1, ordo_value[4] = {-1, -1, -1, -1};
    ordo_buffer_t *buffer = buffer_make(&f);
    if (peer >= 0 && rank % 2 == 0) {
        MPI_Request request;
        program_value = 1111;
        MPI_Isend(&program_value, 1, MPI_INT32_T, peer, tag, MPI_COMM_WORLD, &request);
        for (int i = 0; i < 4; ++i) {
            ordo_value[i] = 2222 + i;
        }
        CHECK_OK(ordo_mpi_send(f.mpi, buffer, ordo_value, 4, MPI_INT32_T, peer, tag));
        mpi_wait_bounded(&request, NULL, __LINE__);
        CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    } else if (peer >= 0) {
        /* ordo's receive is posted first: the program's message, sent
         * first, must not match it. */
        CHECK_OK(ordo_mpi_recv(f.mpi, buffer, ordo_value, 4, MPI_INT32_T, peer, tag));
        CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
        MPI_Request request;
        MPI_Status status;
        MPI_Irecv(&program_value, 1, MPI_INT32_T, peer, tag, MPI_COMM_WORLD, &request);
        mpi_wait_bounded(&request, &status, __LINE__);
        CHECK(program_value == 1111);
        for (int i = 0; i < 4; ++i) {
            CHECK(ordo_value[i] == 2222 + i);
        }
    }
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
}

/* ---- two communications, one tracker ------------------------------------- */

#define TWO_LEN 8192
#define TWO_ROUNDS 8

typedef struct two_data {
    int64_t bucket[2][TWO_LEN];
    int64_t expect[2][TWO_LEN];
    mismatches_t wrong;
    _Atomic int checked;
} two_data_t;

typedef struct two_step {
    two_data_t *d;
    int k, round;
} two_step_t;

static ordo_status_t two_compute(void *ctx) {
    const two_step_t *s = ctx;
    for (int i = 0; i < TWO_LEN; ++i) {
        s->d->bucket[s->k][i] += contribution(rank, s->round, s->k, i);
    }
    return ORDO_OK;
}

/* Each round, bucket k is reduced twice: by one communication and then by
 * the other (an order across the two communication streams the tracker
 * must place), so it holds size * (size * previous + sum) after both. */
static ordo_status_t two_check(void *ctx) {
    const two_step_t *s = ctx;
    for (int i = 0; i < TWO_LEN; ++i) {
        int64_t sum = 0;
        for (int r = 0; r < size; ++r) {
            sum += contribution(r, s->round, s->k, i);
        }
        int64_t *expect = &s->d->expect[s->k][i];
        *expect = (*expect * size + sum) * size;
        if (s->d->bucket[s->k][i] != *expect) {
            mismatch(&s->d->wrong, "bucket %d round %d element %d: %lld, expected %lld", s->k,
                     s->round, i, (long long)s->d->bucket[s->k][i], (long long)*expect);
            break;
        }
    }
    atomic_fetch_add(&s->d->checked, 1);
    return ORDO_OK;
}

/* Two ordo_mpi_t of one tracker, each on its own stream, their progress
 * threads calling MPI at once: bucket 0 is reduced by the first then the
 * second, bucket 1 the other way round, every round. */
static void two_communications(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_stream_t *comm2;
    ordo_mpi_t *mpi2;
    REQUIRE_OK(ordo_stream_create(device, 0, &comm2));
    REQUIRE_OK(ordo_mpi_create(f.tracker, comm2, MPI_COMM_WORLD, &mpi2));
    two_data_t *d = calloc(1, sizeof *d);
    two_step_t steps[TWO_ROUNDS][2];
    ordo_buffer_t *bucket[2] = {buffer_make(&f), buffer_make(&f)};
    ordo_mpi_t *first[2] = {f.mpi, mpi2}, *second[2] = {mpi2, f.mpi};
    for (int round = 0; round < TWO_ROUNDS; ++round) {
        for (int k = 0; k < 2; ++k) {
            steps[round][k] = (two_step_t){d, k, round};
            host_task(&f, f.compute, bucket[k], ORDO_ACCESS_READ_WRITE, two_compute,
                      &steps[round][k], __LINE__);
            CHECK_OK(ordo_mpi_allreduce(first[k], bucket[k], d->bucket[k], TWO_LEN, MPI_INT64_T,
                                        MPI_SUM));
            CHECK_OK(ordo_mpi_allreduce(second[k], bucket[k], d->bucket[k], TWO_LEN, MPI_INT64_T,
                                        MPI_SUM));
            host_task(&f, f.consumer, bucket[k], ORDO_ACCESS_READ, two_check, &steps[round][k],
                      __LINE__);
        }
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    check_no_mismatch(&d->wrong, __LINE__);
    CHECK(atomic_load(&d->checked) == 2 * TWO_ROUNDS);
    CHECK_OK(ordo_buffer_release(bucket[0], NULL, NULL));
    CHECK_OK(ordo_buffer_release(bucket[1], NULL, NULL));
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    ordo_status_t st = ordo_mpi_destroy(mpi2, test_deadline());
    if (st == ORDO_ERR_TIMEOUT) {
        abort_job(__LINE__, "ordo_mpi_destroy timed out");
    }
    CHECK_OK(st);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    CHECK_OK(ordo_stream_destroy(comm2));
    free(d);
}

/* ---- a released buffer is reclaimed after its communication ------------- */

#define RECLAIM_LEN 100000

typedef struct reclaimed {
    int64_t *data;
    int64_t expect_first, expect_last;
    _Atomic int reclaims;
    _Atomic int wrong;
} reclaimed_t;

static void reclaim_check(void *ctx) {
    reclaimed_t *r = ctx;
    if (r->data[0] != r->expect_first || r->data[RECLAIM_LEN - 1] != r->expect_last) {
        atomic_fetch_add(&r->wrong, 1);
    }
    free(r->data);
    r->data = NULL;
    atomic_fetch_add(&r->reclaims, 1);
}

/* The buffer is released right after its allreduce is submitted: the
 * reclaim (which frees the data) runs only once the allreduce wrote it. */
static void release_defers_reclaim(void) {
    fixture_t f;
    fixture_open(&f);
    enum { BUFFERS = 6 };
    reclaimed_t r[BUFFERS];
    for (int b = 0; b < BUFFERS; ++b) {
        r[b] = (reclaimed_t){.data = malloc(RECLAIM_LEN * sizeof(int64_t))};
        for (int i = 0; i < RECLAIM_LEN; ++i) {
            r[b].data[i] = (int64_t)(rank + 1) * (i + b);
        }
        int64_t ranks = (int64_t)size * (size + 1) / 2;
        r[b].expect_first = ranks * b;
        r[b].expect_last = ranks * (RECLAIM_LEN - 1 + b);
        ordo_buffer_t *buffer = buffer_make(&f);
        CHECK_OK(ordo_mpi_allreduce(f.mpi, buffer, r[b].data, RECLAIM_LEN, MPI_INT64_T, MPI_SUM));
        CHECK_OK(ordo_buffer_release(buffer, reclaim_check, &r[b]));
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    for (int b = 0; b < BUFFERS; ++b) {
        CHECK(atomic_load(&r[b].reclaims) == 1);
        CHECK(atomic_load(&r[b].wrong) == 0);
    }
    fixture_close(&f, ORDO_OK, ORDO_OK);
}

/* ---- the progress thread does not spin ---------------------------------- */

static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* With nothing in flight the process uses (almost) no CPU; with a receive
 * waiting 300 ms for a late message, the progress thread's polling costs a
 * small part of a core, not a core. (The sleeps here make the idle time
 * and the lateness being measured; nothing waits for state with them.) */
static void progress_does_not_spin(void) {
    fixture_t f;
    fixture_open(&f);
    struct timespec idle = {0, 200 * 1000000L};
    uint64_t wall = ordo_time_now_ns(), cpu = process_cpu_ns();
    nanosleep(&idle, NULL);
    cpu = process_cpu_ns() - cpu;
    wall = ordo_time_now_ns() - wall;
    if (cpu * 10 > wall) {
        check_failed(__LINE__, "idle: %.1f ms of CPU in %.1f ms", cpu / 1e6, wall / 1e6);
    }
    int peer = pair_peer();
    int32_t value = 0;
    ordo_buffer_t *buffer = buffer_make(&f);
    if (peer >= 0 && rank % 2 == 1) {
        wall = ordo_time_now_ns();
        cpu = process_cpu_ns();
        CHECK_OK(ordo_mpi_recv(f.mpi, buffer, &value, 1, MPI_INT32_T, peer, 11));
        CHECK_OK(ordo_stream_synchronize(f.comm, test_deadline()));
        cpu = process_cpu_ns() - cpu;
        wall = ordo_time_now_ns() - wall;
        CHECK(value == 1234);
        if (cpu * 4 > wall) {
            check_failed(__LINE__, "a receive in flight: %.1f ms of CPU in %.1f ms", cpu / 1e6,
                         wall / 1e6);
        }
    } else if (peer >= 0) {
        struct timespec late = {0, 300 * 1000000L};
        nanosleep(&late, NULL);
        value = 1234;
        CHECK_OK(ordo_mpi_send(f.mpi, buffer, &value, 1, MPI_INT32_T, peer, 11));
    }
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
}

/* ---- destroy with work in flight, and past its deadline ----------------- */

/* ordo_mpi_destroy waits for what was submitted: the data is final once
 * it returns, with no synchronize before it. */
static void destroy_waits_for_operations(void) {
    fixture_t f;
    fixture_open(&f);
    enum { LEN = 50000, OPS = 4 };
    int64_t *data = calloc((size_t)OPS * LEN, sizeof *data);
    ordo_buffer_t *buffer[OPS];
    for (int op = 0; op < OPS; ++op) {
        buffer[op] = buffer_make(&f);
        for (int i = 0; i < LEN; ++i) {
            data[op * LEN + i] = (int64_t)(rank + 1) * (op + 1) + i;
        }
        CHECK_OK(ordo_mpi_allreduce(f.mpi, buffer[op], &data[op * LEN], LEN, MPI_INT64_T, MPI_SUM));
    }
    ordo_status_t st = ordo_mpi_destroy(f.mpi, test_deadline());
    if (st == ORDO_ERR_TIMEOUT) {
        abort_job(__LINE__, "ordo_mpi_destroy timed out");
    }
    CHECK_OK(st);
    int64_t ranks_sum = (int64_t)size * (size + 1) / 2;
    int wrong = 0;
    for (int op = 0; op < OPS && !wrong; ++op) {
        for (int i = 0; i < LEN; ++i) {
            int64_t expect = ranks_sum * (op + 1) + (int64_t)size * i;
            if (data[op * LEN + i] != expect) {
                check_failed(__LINE__, "allreduce %d element %d: %lld after destroy, expected %lld",
                             op, i, (long long)data[op * LEN + i], (long long)expect);
                wrong = 1;
                break;
            }
        }
    }
    for (int op = 0; op < OPS; ++op) {
        CHECK_OK(ordo_buffer_release(buffer[op], NULL, NULL));
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    CHECK_OK(ordo_tracker_drain(f.tracker, test_deadline()));
    CHECK_OK(ordo_tracker_destroy(f.tracker));
    CHECK_OK(ordo_stream_destroy(f.compute));
    CHECK_OK(ordo_stream_destroy(f.consumer));
    CHECK_OK(ordo_stream_destroy(f.comm));
    free(data);
}

/* A destroy whose deadline passes while a receive waits for its message
 * returns ORDO_ERR_TIMEOUT (freeing nothing); once the message is sent,
 * destroy completes, and the message arrived. */
static void destroy_past_deadline(void) {
    fixture_t f;
    fixture_open(&f);
    int peer = pair_peer();
    const int tag = 9;
    int32_t values[8] = {0};
    ordo_buffer_t *buffer = buffer_make(&f);
    int token = 0;
    if (peer >= 0 && rank % 2 == 1) {
        CHECK_OK(ordo_mpi_recv(f.mpi, buffer, values, 8, MPI_INT32_T, peer, tag));
        CHECK_STATUS(ordo_mpi_destroy(f.mpi, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
        CHECK(message_names("ordo_mpi_destroy"));
        /* Now the peer may send (the program's own message). */
        MPI_Request request;
        MPI_Isend(&token, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, &request);
        mpi_wait_bounded(&request, NULL, __LINE__);
    } else if (peer >= 0) {
        MPI_Request request;
        MPI_Irecv(&token, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, &request);
        mpi_wait_bounded(&request, NULL, __LINE__);
        for (int i = 0; i < 8; ++i) {
            values[i] = 300 + i;
        }
        CHECK_OK(ordo_mpi_send(f.mpi, buffer, values, 8, MPI_INT32_T, peer, tag));
    }
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    if (peer >= 0 && rank % 2 == 1) {
        for (int i = 0; i < 8; ++i) {
            CHECK(values[i] == 300 + i);
        }
    }
}

/* ---- an MPI error fails the communication stream ------------------------- */

typedef struct reader {
    _Atomic int ran;
} reader_t;

static ordo_status_t reader_run(void *ctx) {
    reader_t *r = ctx;
    atomic_store(&r->ran, 1);
    return ORDO_OK;
}

static int message_has(const char *message, const char *part) {
    return strcasestr(message, part) != NULL;
}

/* Leaves a known refusal as the thread's message, and a copy of it in
 * mark: a call that succeeds must leave it there. */
static void message_mark(char *mark, size_t capacity) {
    (void)ordo_signal_query(NULL, NULL);
    snprintf(mark, capacity, "%s", ordo_error_message());
}

#define CHECK_MESSAGE_KEPT(mark)                                                                   \
    do {                                                                                           \
        if (strcmp(ordo_error_message(), (mark)) != 0) {                                           \
            check_failed(__LINE__, "the thread's message became \"%s\" (was \"%s\")",              \
                         ordo_error_message(), (mark));                                            \
        }                                                                                          \
    } while (0)

/* The sender sends 16 elements, the receiver receives into 8: the receive
 * completes with MPI_ERR_TRUNCATE, which fails its point, the
 * communication stream and the stream whose work waits on the received
 * data (that work never runs); the message carries MPI's error string.
 * The sender's side completes (the message is small: sent eagerly), so
 * neither rank is left waiting. */
static void truncation_fails_the_stream(void) {
    fixture_t f;
    fixture_open(&f);
    int peer = pair_peer();
    const int tag = 5;
    int32_t values[16];
    for (int i = 0; i < 16; ++i) {
        values[i] = 40 + i;
    }
    ordo_buffer_t *buffer = buffer_make(&f);
    reader_t reader = {0};
    char mpi_text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    MPI_Error_string(MPI_ERR_TRUNCATE, mpi_text, &length);
    if (peer >= 0 && rank % 2 == 0) {
        CHECK_OK(ordo_mpi_send(f.mpi, buffer, values, 16, MPI_INT32_T, peer, tag));
        CHECK_OK(ordo_stream_synchronize(f.comm, test_deadline()));
        CHECK_OK(ordo_stream_status(f.comm));
        CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
        fixture_close(&f, ORDO_OK, ORDO_OK);
    } else if (peer >= 0) {
        /* The submission may already see the failure (see
         * start_error_fails_the_stream). */
        ordo_status_t st = ordo_mpi_recv(f.mpi, buffer, values, 8, MPI_INT32_T, peer, tag);
        if (st != ORDO_OK &&
            (st != ORDO_ERR_DEVICE || !message_has(ordo_error_message(), mpi_text))) {
            check_failed(__LINE__, "the receive returned %s (%s)", ordo_status_name(st),
                         ordo_error_message());
        }
        /* Work that reads the received data: it waits on the receive's
         * point (its submission may already see the failure). */
        ordo_access_t read = {buffer, ORDO_ACCESS_READ};
        st = ordo_tracker_submit_host(f.tracker, f.consumer, &read, 1, reader_run, &reader);
        if (st != ORDO_OK && st != ORDO_ERR_DEVICE) {
            check_failed(__LINE__, "the reader's submission returned %s (%s)", ordo_status_name(st),
                         ordo_error_message());
        }
        /* The tracker's synchronize: the failure, with MPI's text. */
        st = ordo_tracker_synchronize(f.tracker, test_deadline());
        CHECK(st == ORDO_ERR_DEVICE);
        if (st != ORDO_OK) {
            const char *message = ordo_error_message();
            if (!message_has(message, mpi_text)) {
                check_failed(__LINE__, "synchronize's message \"%s\" lacks MPI's \"%s\"", message,
                             mpi_text);
            }
            if (!message_has(message, "recv") && !message_has(message, "receive")) {
                check_failed(__LINE__, "synchronize's message \"%s\" names no receive", message);
            }
        }
        /* The communication stream's own synchronize. */
        st = ordo_stream_synchronize(f.comm, test_deadline());
        CHECK(st == ORDO_ERR_DEVICE);
        if (st != ORDO_OK && !message_has(ordo_error_message(), mpi_text)) {
            check_failed(__LINE__, "the stream's message \"%s\" lacks MPI's \"%s\"",
                         ordo_error_message(), mpi_text);
        }
        CHECK_STATUS(ordo_stream_status(f.comm), ORDO_ERR_DEVICE);
        /* What waited on the receive failed, and never ran. */
        CHECK_STATUS(ordo_stream_synchronize(f.consumer, test_deadline()), ORDO_ERR_DEVICE);
        CHECK(atomic_load(&reader.ran) == 0);
        /* The compute stream had nothing to do with it. */
        CHECK_OK(ordo_stream_status(f.compute));
        /* A later operation is refused with the stream's failure. */
        int32_t more[2] = {0, 0};
        ordo_buffer_t *other = buffer_make(&f);
        CHECK_STATUS(ordo_mpi_send(f.mpi, other, more, 2, MPI_INT32_T, peer, tag + 1),
                     ORDO_ERR_DEVICE);
        CHECK_OK(ordo_buffer_release(other, NULL, NULL));
        CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
        /* Destroy returns the failed operation's status. */
        fixture_close(&f, ORDO_ERR_DEVICE, ORDO_ERR_DEVICE);
    } else {
        CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
        fixture_close(&f, ORDO_OK, ORDO_OK);
    }
}

/* An MPI error when a request starts (a derived datatype never committed:
 * MPI_ERR_TYPE from MPI_Isend) fails the stream the same way, with MPI's
 * text. Every rank does it alone: nobody waits for a message that never
 * comes. */
static void start_error_fails_the_stream(void) {
    fixture_t f;
    fixture_open(&f);
    MPI_Datatype uncommitted;
    MPI_Type_contiguous(2, MPI_INT32_T, &uncommitted);
    char mpi_text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    MPI_Error_string(MPI_ERR_TYPE, mpi_text, &length);
    int32_t values[4] = {1, 2, 3, 4};
    ordo_buffer_t *buffer = buffer_make(&f);
    /* The submission may already see the failure: the request starts on
     * the stream's worker, which may fail the stream before the submission
     * has enqueued its wait. Accepted (its wait then refused), it leaves
     * the thread's message alone. */
    char mark[512];
    message_mark(mark, sizeof mark);
    ordo_status_t st = ordo_mpi_send(f.mpi, buffer, values, 2, uncommitted, (rank + 1) % size, 3);
    if (st != ORDO_OK && (st != ORDO_ERR_DEVICE || !message_has(ordo_error_message(), mpi_text))) {
        check_failed(__LINE__, "the send returned %s (%s)", ordo_status_name(st),
                     ordo_error_message());
    }
    if (st == ORDO_OK) {
        CHECK_MESSAGE_KEPT(mark);
    }
    st = ordo_stream_synchronize(f.comm, test_deadline());
    CHECK(st == ORDO_ERR_DEVICE);
    if (st != ORDO_OK && !message_has(ordo_error_message(), mpi_text)) {
        check_failed(__LINE__, "the stream's message \"%s\" lacks MPI's \"%s\"",
                     ordo_error_message(), mpi_text);
    }
    if (st != ORDO_OK && !message_has(ordo_error_message(), "send")) {
        check_failed(__LINE__, "the stream's message \"%s\" names no send", ordo_error_message());
    }
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_ERR_DEVICE, ORDO_ERR_DEVICE);
    MPI_Type_free(&uncommitted);
}

/* The same start error, many times over: the submission is accepted when
 * its wait is enqueued before the worker failed the stream, or when the
 * wait is refused on the stream that failed meanwhile; either way the
 * thread's message stays. Which one happens is a race between the
 * submitting thread and the stream's worker (no hook orders them), so
 * this repeats it, each time on its own stream and an ordo_mpi_t of
 * MPI_COMM_SELF (no other rank involved). */
static void accepted_send_keeps_the_message(void) {
    enum { TRIES = 128 };
    MPI_Datatype uncommitted;
    MPI_Type_contiguous(2, MPI_INT32_T, &uncommitted);
    int32_t values[4] = {1, 2, 3, 4};
    for (int i = 0; i < TRIES; ++i) {
        ordo_tracker_t *tracker = NULL;
        ordo_stream_t *comm = NULL;
        ordo_mpi_t *mpi = NULL;
        ordo_buffer_t *buffer = NULL;
        REQUIRE_OK(ordo_tracker_create(device, &tracker));
        REQUIRE_OK(ordo_stream_create(device, 0, &comm));
        REQUIRE_OK(ordo_mpi_create(tracker, comm, MPI_COMM_SELF, &mpi));
        REQUIRE_OK(ordo_buffer_create(tracker, &buffer));
        char mark[512];
        message_mark(mark, sizeof mark);
        ordo_status_t st = ordo_mpi_send(mpi, buffer, values, 2, uncommitted, 0, 3);
        if (st == ORDO_OK) {
            CHECK_MESSAGE_KEPT(mark);
        } else {
            CHECK(st == ORDO_ERR_DEVICE);
        }
        CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
        CHECK_STATUS(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_DEVICE);
        CHECK_STATUS(ordo_mpi_destroy(mpi, test_deadline()), ORDO_ERR_DEVICE);
        CHECK_OK(ordo_tracker_drain(tracker, test_deadline()));
        CHECK_OK(ordo_tracker_destroy(tracker));
        CHECK_OK(ordo_stream_destroy(comm));
    }
    MPI_Type_free(&uncommitted);
}

/* Calls that succeed on published signals leave the thread's message
 * alone, though the publication's news runs inline in them and finds the
 * signal ended: a failure, a destroy, and ordo_mpi_destroy with a failed
 * publication. The publication's timepoint is armed once rank 1 saw the
 * first news (it is armed right after that news is sent). */
static void published_calls_keep_the_message(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *failing = NULL, *destroyed = NULL, *seen_failing = NULL, *seen_destroyed = NULL;
    if (rank == 0) {
        REQUIRE_OK(ordo_signal_create(0, &failing));
        REQUIRE_OK(ordo_signal_create(0, &destroyed));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, failing, 85));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, destroyed, 86));
        CHECK_OK(ordo_signal_advance(failing, 1));
        CHECK_OK(ordo_signal_advance(destroyed, 1));
    } else if (rank == 1) {
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 85, &seen_failing));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 86, &seen_destroyed));
        CHECK_OK(ordo_signal_wait(seen_failing, 1, test_deadline()));
        CHECK_OK(ordo_signal_wait(seen_destroyed, 1, test_deadline()));
    }
    ranks_meet(__LINE__);
    char mark[512];
    if (rank == 0) {
        message_mark(mark, sizeof mark);
        CHECK_OK(ordo_signal_fail(failing, ORDO_ERR_ABORTED, "the producer gave up"));
        CHECK_MESSAGE_KEPT(mark);
        CHECK_OK(ordo_signal_destroy(destroyed));
        CHECK_MESSAGE_KEPT(mark);
    } else if (rank == 1) {
        CHECK_STATUS(ordo_signal_wait(seen_failing, 2, test_deadline()), ORDO_ERR_ABORTED);
        CHECK(strstr(ordo_error_message(), "the producer gave up") != NULL);
        CHECK_STATUS(ordo_signal_wait(seen_destroyed, 2, test_deadline()), ORDO_ERR_CANCELLED);
        CHECK_OK(ordo_signal_release(seen_failing));
        CHECK_OK(ordo_signal_release(seen_destroyed));
    }
    ranks_meet(__LINE__);
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    message_mark(mark, sizeof mark);
    CHECK_OK(ordo_mpi_destroy(f.mpi, test_deadline()));
    CHECK_MESSAGE_KEPT(mark);
    CHECK_OK(ordo_tracker_destroy(f.tracker));
    CHECK_OK(ordo_stream_destroy(f.compute));
    CHECK_OK(ordo_stream_destroy(f.consumer));
    CHECK_OK(ordo_stream_destroy(f.comm));
    if (rank == 0) {
        CHECK_OK(ordo_signal_release(failing)); /* the destroy let `destroyed` go */
    }
}

/* ---- many small operations ------------------------------------------------ */

/* A thousand allreduces of one element each, back to back: every one
 * completes (nothing lost between the stream's worker and the progress
 * thread), in order, with its value. */
static void many_small_operations(void) {
    fixture_t f;
    fixture_open(&f);
    enum { OPS = 1000 };
    int64_t *values = calloc(OPS, sizeof *values);
    ordo_buffer_t *buffer = buffer_make(&f);
    for (int op = 0; op < OPS; ++op) {
        values[op] = (int64_t)rank * OPS + op;
        CHECK_OK(ordo_mpi_allreduce(f.mpi, buffer, &values[op], 1, MPI_INT64_T, MPI_SUM));
    }
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    int64_t ranks = (int64_t)size * (size - 1) / 2;
    for (int op = 0; op < OPS; ++op) {
        if (values[op] != ranks * OPS + (int64_t)size * op) {
            check_failed(__LINE__, "allreduce %d: %lld, expected %lld", op, (long long)values[op],
                         (long long)(ranks * OPS + (int64_t)size * op));
            break;
        }
    }
    CHECK_OK(ordo_buffer_release(buffer, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    free(values);
}

/* ---- bad input ----------------------------------------------------------- */

/* A refusal: an error status (one of up to two), the message naming api. */
#define CHECK_REFUSED(expr, api, status_a, status_b)                                               \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != (status_a) && st_ != (status_b)) {                                              \
            check_failed(__LINE__, "%s returned %s, expected %s or %s (%s)", #expr,                \
                         ordo_status_name(st_), ordo_status_name(status_a),                        \
                         ordo_status_name(status_b), st_ ? ordo_error_message() : "");             \
        } else if (!message_names(api)) {                                                          \
            check_failed(__LINE__, "%s: message \"%s\" does not name %s", #expr,                   \
                         ordo_error_message(), api);                                               \
        }                                                                                          \
    } while (0)

/* ---- signals across ranks ------------------------------------------------ */

#define SIGNAL_LAPS 500

static _Atomic int stage_runs;
static ordo_status_t stage_ran(void *ctx) {
    (void)ctx;
    atomic_fetch_add(&stage_runs, 1);
    return ORDO_OK;
}

static void timepoint_count(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    if (status == ORDO_OK) {
        atomic_fetch_add((_Atomic int *)ctx, 1);
    }
}

/* A ring of published signals: rank r raises its own after it sees rank
 * r - 1's (rank 0 starts each lap); then a stream of every rank waits on
 * the previous rank's signal and signals its own, a timepoint and a link
 * fire on an observed signal, and a failure with its message goes round
 * the ring. */
static void signals_across_ranks(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *mine = NULL;
    REQUIRE_OK(ordo_signal_create(0, &mine));
    REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, mine, 42));
    CHECK_STATUS(ordo_mpi_signal_publish(f.mpi, mine, 42), ORDO_ERR_BUSY);
    ordo_signal_t *prev = NULL;
    REQUIRE_OK(ordo_mpi_signal_open(f.mpi, (rank + size - 1) % size, 42, &prev));
    bool shared = true;
    CHECK_OK(ordo_signal_is_shared(prev, &shared));
    CHECK(!shared);

    /* Blocking waits, monotonic values. */
    for (uint64_t lap = 1; lap <= SIGNAL_LAPS; ++lap) {
        if (rank == 0) {
            CHECK_OK(ordo_signal_advance(mine, lap));
            CHECK_OK(ordo_signal_wait(prev, lap, test_deadline()));
        } else {
            CHECK_OK(ordo_signal_wait(prev, lap, test_deadline()));
            CHECK_OK(ordo_signal_advance(mine, lap));
        }
        uint64_t seen = 0;
        CHECK_OK(ordo_signal_query(prev, &seen));
        CHECK(seen >= lap);
    }

    /* A timepoint on the observed signal fires (on the progress thread). */
    _Atomic int fired = 0;
    ordo_timepoint_t timepoint = ORDO_TIMEPOINT_INIT;
    CHECK_OK(ordo_timepoint_arm(&timepoint, prev, SIGNAL_LAPS + 1, timepoint_count, &fired));

    /* Streams: rank 0 raises; every other rank's stream waits on the
     * previous rank's signal, runs a task, and signals its own. */
    atomic_store(&stage_runs, 0);
    for (uint64_t v = SIGNAL_LAPS + 1; v <= SIGNAL_LAPS + 50; ++v) {
        if (rank == 0) {
            CHECK_OK(ordo_signal_advance(mine, v));
        } else {
            CHECK_OK(ordo_stream_wait(f.consumer, prev, v));
            CHECK_OK(ordo_stream_host_task(f.consumer, stage_ran, NULL));
            CHECK_OK(ordo_stream_signal(f.consumer, mine, v));
        }
    }
    CHECK_OK(ordo_signal_wait(prev, SIGNAL_LAPS + 50, test_deadline()));
    CHECK_OK(ordo_stream_synchronize(f.consumer, test_deadline()));
    CHECK(rank == 0 || atomic_load(&stage_runs) == 50);
    /* The timepoint has fired: its value was reached, and the mirror is
     * brought up by the progress thread soon after (bounded wait). */
    ordo_deadline_t until = test_deadline();
    while (atomic_load(&fired) == 0 && ordo_time_now_ns() < until) {
        sched_yield();
    }
    CHECK(atomic_load(&fired) == 1);

    /* A link from the observed signal to a local one. */
    ordo_signal_t *local = NULL;
    REQUIRE_OK(ordo_signal_create(0, &local));
    ordo_link_t link;
    memset(&link, 0, sizeof link);
    CHECK_OK(ordo_link_arm(&link, prev, SIGNAL_LAPS + 60, local, 1));
    if (rank == 0) {
        CHECK_OK(ordo_signal_advance(mine, SIGNAL_LAPS + 60));
    } else {
        CHECK_OK(ordo_signal_wait(prev, SIGNAL_LAPS + 60, test_deadline()));
        CHECK_OK(ordo_signal_advance(mine, SIGNAL_LAPS + 60));
    }
    CHECK_OK(ordo_signal_wait(local, 1, test_deadline()));

    /* A failure goes round with its message, a producer's
     * ORDO_ERR_CANCELLED included (not read as a destroy). */
    if (rank == 0) {
        CHECK_OK(ordo_signal_fail(mine, ORDO_ERR_CANCELLED, "rank 0 gave up"));
    }
    ordo_status_t waited = ordo_signal_wait(prev, SIGNAL_LAPS + 1000, test_deadline());
    CHECK(waited == ORDO_ERR_CANCELLED);
    CHECK(strstr(ordo_error_message(), "rank 0 gave up") != NULL);
    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    CHECK_OK(ordo_signal_failure(prev, &failure, message, sizeof message));
    CHECK(failure == ORDO_ERR_CANCELLED);
    CHECK(strcmp(message, "rank 0 gave up") == 0);
    if (rank != 0) {
        CHECK_OK(ordo_signal_fail(mine, failure, message)); /* pass it on */
    }
    /* Values reached before stay reached. */
    CHECK_OK(ordo_signal_wait(prev, SIGNAL_LAPS, test_deadline()));

    /* Bad input. */
    ordo_signal_t *none = (ordo_signal_t *)&none;
    CHECK_STATUS(ordo_mpi_signal_open(f.mpi, size, 1, &none), ORDO_ERR_OUT_OF_RANGE);
    CHECK(none == NULL);
    CHECK_STATUS(ordo_mpi_signal_open(f.mpi, -1, 1, &none), ORDO_ERR_OUT_OF_RANGE);
    CHECK_STATUS(ordo_mpi_signal_open(NULL, 0, 1, &none), ORDO_ERR_INVALID_HANDLE);
    CHECK_STATUS(ordo_mpi_signal_open(f.mpi, 0, 1, NULL), ORDO_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ordo_mpi_signal_publish(NULL, mine, 7), ORDO_ERR_INVALID_HANDLE);
    CHECK_STATUS(ordo_mpi_signal_publish(f.mpi, NULL, 7), ORDO_ERR_INVALID_HANDLE);
    /* Destroy refuses while an observed handle is open. */
    CHECK_STATUS(ordo_mpi_destroy(f.mpi, test_deadline()), ORDO_ERR_BUSY);
    CHECK(message_names("ordo_mpi_destroy"));

    (void)world_sum(0); /* every rank is done with the others' signals */
    CHECK_OK(ordo_signal_release(local));
    CHECK_OK(ordo_signal_release(prev));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    CHECK_OK(ordo_signal_release(mine));
}

static void bad_input_is_refused(void) {
    const ordo_status_t HANDLE = ORDO_ERR_INVALID_HANDLE, ARGUMENT = ORDO_ERR_INVALID_ARGUMENT,
                        RANGE = ORDO_ERR_OUT_OF_RANGE;
    fixture_t f;
    fixture_open(&f);
    ordo_buffer_t *a = buffer_make(&f), *b = buffer_make(&f);
    int32_t data[64] = {0}, other[64] = {0};

    /* Creation. */
    ordo_stream_t *spare;
    REQUIRE_OK(ordo_stream_create(device, 0, &spare));
    ordo_mpi_t *mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(NULL, spare, MPI_COMM_WORLD, &mpi), "ordo_mpi_create", HANDLE,
                  HANDLE);
    CHECK(mpi == NULL);
    mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(f.tracker, NULL, MPI_COMM_WORLD, &mpi), "ordo_mpi_create", HANDLE,
                  HANDLE);
    CHECK(mpi == NULL);
    CHECK_REFUSED(ordo_mpi_create(f.tracker, spare, MPI_COMM_WORLD, NULL), "ordo_mpi_create",
                  ARGUMENT, ARGUMENT);
    mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(f.tracker, spare, MPI_COMM_NULL, &mpi), "ordo_mpi_create",
                  ARGUMENT, HANDLE);
    CHECK(mpi == NULL);
    /* An intercommunicator (the even ranks' group and the odd ones'). */
    MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    REQUIRE_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half) == MPI_SUCCESS
                   ? ORDO_OK
                   : ORDO_ERR_DEVICE);
    REQUIRE_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 17, &inter) ==
                       MPI_SUCCESS
                   ? ORDO_OK
                   : ORDO_ERR_DEVICE);
    mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(f.tracker, spare, inter, &mpi), "ordo_mpi_create", ARGUMENT,
                  ARGUMENT);
    CHECK(mpi == NULL);
    if (mpi && mpi != (ordo_mpi_t *)&data) {
        CHECK_OK(ordo_mpi_destroy(mpi, test_deadline()));
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    CHECK_OK(ordo_stream_destroy(spare)); /* the refusals left nothing on it */
    CHECK_REFUSED(ordo_mpi_destroy(NULL, test_deadline()), "ordo_mpi_destroy", HANDLE, HANDLE);

    /* The getters. */
    ordo_stream_t *stream = f.compute;
    CHECK_REFUSED(ordo_mpi_stream(NULL, &stream), "ordo_mpi_stream", HANDLE, HANDLE);
    CHECK(stream == NULL);
    CHECK_REFUSED(ordo_mpi_stream(f.mpi, NULL), "ordo_mpi_stream", ARGUMENT, ARGUMENT);
    int r = 99, s = 99;
    CHECK_REFUSED(ordo_mpi_rank(NULL, &r, &s), "ordo_mpi_rank", HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_rank(f.mpi, NULL, &s), "ordo_mpi_rank", ARGUMENT, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_rank(f.mpi, &r, NULL), "ordo_mpi_rank", ARGUMENT, ARGUMENT);

    /* NULL handles, NULL data, negative counts, ranks out of range. */
    CHECK_REFUSED(ordo_mpi_allreduce(NULL, a, data, 4, MPI_INT32_T, MPI_SUM), "ordo_mpi_allreduce",
                  HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, NULL, data, 4, MPI_INT32_T, MPI_SUM),
                  "ordo_mpi_allreduce", HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, a, NULL, 4, MPI_INT32_T, MPI_SUM), "ordo_mpi_allreduce",
                  ARGUMENT, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, a, data, -1, MPI_INT32_T, MPI_SUM),
                  "ordo_mpi_allreduce", ARGUMENT, RANGE);
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, a, data, 4, MPI_DATATYPE_NULL, MPI_SUM),
                  "ordo_mpi_allreduce", ARGUMENT, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, a, data, 4, MPI_INT32_T, MPI_OP_NULL),
                  "ordo_mpi_allreduce", ARGUMENT, ARGUMENT);

    CHECK_REFUSED(ordo_mpi_bcast(NULL, a, data, 4, MPI_INT32_T, 0), "ordo_mpi_bcast", HANDLE,
                  HANDLE);
    CHECK_REFUSED(ordo_mpi_bcast(f.mpi, NULL, data, 4, MPI_INT32_T, 0), "ordo_mpi_bcast", HANDLE,
                  HANDLE);
    CHECK_REFUSED(ordo_mpi_bcast(f.mpi, a, data, -3, MPI_INT32_T, 0), "ordo_mpi_bcast", ARGUMENT,
                  RANGE);
    CHECK_REFUSED(ordo_mpi_bcast(f.mpi, a, data, 4, MPI_INT32_T, size), "ordo_mpi_bcast", RANGE,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_bcast(f.mpi, a, data, 4, MPI_INT32_T, -1), "ordo_mpi_bcast", RANGE,
                  ARGUMENT);

    int peer = (rank + 1) % size;
    CHECK_REFUSED(ordo_mpi_send(NULL, a, data, 4, MPI_INT32_T, peer, 0), "ordo_mpi_send", HANDLE,
                  HANDLE);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, NULL, data, 4, MPI_INT32_T, peer, 0), "ordo_mpi_send",
                  HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, NULL, 4, MPI_INT32_T, peer, 0), "ordo_mpi_send", ARGUMENT,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, data, -1, MPI_INT32_T, peer, 0), "ordo_mpi_send",
                  ARGUMENT, RANGE);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, data, 4, MPI_INT32_T, size, 0), "ordo_mpi_send", RANGE,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, data, 4, MPI_INT32_T, size + 100, 0), "ordo_mpi_send",
                  RANGE, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, data, 4, MPI_INT32_T, -1, 0), "ordo_mpi_send", RANGE,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_send(f.mpi, a, data, 4, MPI_INT32_T, peer, -1), "ordo_mpi_send",
                  ARGUMENT, RANGE);

    CHECK_REFUSED(ordo_mpi_recv(NULL, a, data, 4, MPI_INT32_T, peer, 0), "ordo_mpi_recv", HANDLE,
                  HANDLE);
    CHECK_REFUSED(ordo_mpi_recv(f.mpi, NULL, data, 4, MPI_INT32_T, peer, 0), "ordo_mpi_recv",
                  HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_recv(f.mpi, a, NULL, 4, MPI_INT32_T, peer, 0), "ordo_mpi_recv", ARGUMENT,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_recv(f.mpi, a, data, -1, MPI_INT32_T, peer, 0), "ordo_mpi_recv",
                  ARGUMENT, RANGE);
    CHECK_REFUSED(ordo_mpi_recv(f.mpi, a, data, 4, MPI_INT32_T, size, 0), "ordo_mpi_recv", RANGE,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_recv(f.mpi, a, data, 4, MPI_INT32_T, peer, -7), "ordo_mpi_recv",
                  ARGUMENT, RANGE);

    CHECK_REFUSED(ordo_mpi_alltoall(NULL, a, data, b, other, 1, MPI_INT32_T), "ordo_mpi_alltoall",
                  HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, NULL, data, b, other, 1, MPI_INT32_T),
                  "ordo_mpi_alltoall", HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, a, data, NULL, other, 1, MPI_INT32_T),
                  "ordo_mpi_alltoall", HANDLE, HANDLE);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, a, NULL, b, other, 1, MPI_INT32_T), "ordo_mpi_alltoall",
                  ARGUMENT, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, a, data, b, NULL, 1, MPI_INT32_T), "ordo_mpi_alltoall",
                  ARGUMENT, ARGUMENT);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, a, data, b, other, -2, MPI_INT32_T), "ordo_mpi_alltoall",
                  ARGUMENT, RANGE);
    CHECK_REFUSED(ordo_mpi_alltoall(f.mpi, a, data, a, other, 1, MPI_INT32_T), "ordo_mpi_alltoall",
                  ARGUMENT, ARGUMENT);

    /* A buffer of another tracker. */
    ordo_tracker_t *foreign_tracker;
    ordo_buffer_t *foreign;
    REQUIRE_OK(ordo_tracker_create(device, &foreign_tracker));
    REQUIRE_OK(ordo_buffer_create(foreign_tracker, &foreign));
    ordo_status_t st = ordo_mpi_allreduce(f.mpi, foreign, data, 4, MPI_INT32_T, MPI_SUM);
    if (st == ORDO_OK) {
        check_failed(__LINE__, "an allreduce of another tracker's buffer was accepted");
    } else if (!ordo_error_message()[0]) {
        check_failed(__LINE__, "another tracker's buffer: %s without a message",
                     ordo_status_name(st));
    }
    CHECK_OK(ordo_buffer_release(foreign, NULL, NULL));
    CHECK_OK(ordo_tracker_synchronize(foreign_tracker, test_deadline()));
    CHECK_OK(ordo_tracker_destroy(foreign_tracker));

    /* A buffer, and a stream, of another device (a private runtime). */
    ordo_device_t *other_device;
    ordo_tracker_t *other_tracker;
    ordo_stream_t *other_stream;
    REQUIRE_OK(ordo_device_create_owned("cpu", NULL, &other_device));
    REQUIRE_OK(ordo_tracker_create(other_device, &other_tracker));
    REQUIRE_OK(ordo_buffer_create(other_tracker, &foreign));
    REQUIRE_OK(ordo_stream_create(other_device, 0, &other_stream));
    CHECK(ordo_mpi_allreduce(f.mpi, foreign, data, 4, MPI_INT32_T, MPI_SUM) != ORDO_OK);
    CHECK(ordo_error_message()[0] != '\0');
    CHECK(ordo_mpi_send(f.mpi, foreign, data, 4, MPI_INT32_T, peer, 0) != ORDO_OK);
    mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(f.tracker, other_stream, MPI_COMM_WORLD, &mpi), "ordo_mpi_create",
                  ARGUMENT, ARGUMENT);
    CHECK(mpi == NULL);
    CHECK_OK(ordo_buffer_release(foreign, NULL, NULL));
    CHECK_OK(ordo_tracker_synchronize(other_tracker, test_deadline()));
    CHECK_OK(ordo_tracker_destroy(other_tracker));
    CHECK_OK(ordo_stream_destroy(other_stream));
    CHECK_OK(ordo_device_release(other_device));

    /* An MPI operation while the tracker records a graph: refused (it runs
     * once), and the recording fails with it (ordo/graph.h). */
    REQUIRE_OK(ordo_tracker_record_begin(f.tracker));
    CHECK_REFUSED(ordo_mpi_allreduce(f.mpi, a, data, 4, MPI_INT32_T, MPI_SUM), "ordo_mpi_allreduce",
                  ORDO_ERR_BUSY, ORDO_ERR_BUSY);
    ordo_graph_t *graph = (ordo_graph_t *)&data;
    CHECK_STATUS(ordo_tracker_record_end(f.tracker, &graph), ORDO_ERR_BUSY);
    CHECK(graph == NULL);
    CHECK(strstr(ordo_error_message(), "ordo_mpi_allreduce") != NULL);

    /* A freed communicator: MPI_Comm_free leaves MPI_COMM_NULL behind. */
    MPI_Comm freed;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &freed) != MPI_SUCCESS ||
        MPI_Comm_free(&freed) != MPI_SUCCESS) {
        abort_job(__LINE__, "MPI_Comm_dup or MPI_Comm_free failed");
    }
    mpi = (ordo_mpi_t *)&data;
    CHECK_REFUSED(ordo_mpi_create(f.tracker, f.compute, freed, &mpi), "ordo_mpi_create", ARGUMENT,
                  HANDLE);
    CHECK(mpi == NULL);

    /* Signals: a wrong rank, the peer timeout out of range. */
    ordo_signal_t *observed = (ordo_signal_t *)&data;
    CHECK_REFUSED(ordo_mpi_signal_open(f.mpi, size, 1, &observed), "ordo_mpi_signal_open", RANGE,
                  RANGE);
    CHECK(observed == NULL);
    CHECK_REFUSED(ordo_mpi_signal_open(f.mpi, -1, 1, &observed), "ordo_mpi_signal_open", RANGE,
                  RANGE);
    CHECK_REFUSED(ordo_mpi_signal_open(f.mpi, 0, 1, NULL), "ordo_mpi_signal_open", ARGUMENT,
                  ARGUMENT);
    CHECK_REFUSED(ordo_mpi_signal_publish(f.mpi, NULL, 1), "ordo_mpi_signal_publish", HANDLE,
                  HANDLE);
    CHECK_REFUSED(ordo_mpi_set_peer_timeout(f.mpi, 0), "ordo_mpi_set_peer_timeout", RANGE, RANGE);
    CHECK_REFUSED(ordo_mpi_set_peer_timeout(NULL, 1000), "ordo_mpi_set_peer_timeout", HANDLE,
                  HANDLE);

    /* Nothing refused was enqueued: the stream is healthy and a valid
     * collective (the same on every rank) still matches. */
    CHECK_OK(ordo_stream_status(f.comm));
    for (int i = 0; i < 4; ++i) {
        data[i] = rank + i;
    }
    CHECK_OK(ordo_mpi_allreduce(f.mpi, a, data, 4, MPI_INT32_T, MPI_SUM));
    CHECK_OK(ordo_tracker_synchronize(f.tracker, test_deadline()));
    for (int i = 0; i < 4; ++i) {
        CHECK(data[i] == size * (size - 1) / 2 + size * i);
    }
    CHECK_OK(ordo_buffer_release(a, NULL, NULL));
    CHECK_OK(ordo_buffer_release(b, NULL, NULL));
    fixture_close(&f, ORDO_OK, ORDO_OK);
}

/* ---- liveness: no false alarm --------------------------------------------- */

#define LIVENESS_TIMEOUT_MS 400u

/* Lets time pass on this rank (a wait that must time out). */
static void idle_for(uint64_t ms) {
    ordo_signal_t *never = NULL;
    REQUIRE_OK(ordo_signal_create(0, &never));
    CHECK_STATUS(ordo_signal_wait(never, 1, ordo_deadline_after_ms(ms)), ORDO_ERR_TIMEOUT);
    CHECK_OK(ordo_signal_release(never));
}

/* Ranks that are alive but quiet are never found dead: an owner that
 * publishes long after another rank subscribed (idle meanwhile: no signal
 * published or observed), an observer that let its handle go and stays
 * away for several timeouts, then comes back. */
static void liveness_no_false_alarm(void) {
    fixture_t f;
    fixture_open(&f);
    REQUIRE_OK(ordo_mpi_set_peer_timeout(f.mpi, LIVENESS_TIMEOUT_MS));
    ranks_meet(__LINE__); /* every rank has set the timeout */
    ordo_signal_t *mine = NULL, *observed = NULL;
    if (rank == 0) {
        idle_for(3 * LIVENESS_TIMEOUT_MS); /* rank 1 subscribes meanwhile */
        REQUIRE_OK(ordo_signal_create(0, &mine));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, mine, 7));
        CHECK_OK(ordo_signal_advance(mine, 1));
    } else if (rank == 1) {
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 7, &observed));
        CHECK_OK(ordo_signal_wait(observed, 1, test_deadline()));
        CHECK_OK(ordo_signal_release(observed)); /* unsubscribes */
        /* A handle of a signal rank 0 never publishes, failed here: rank 0
         * keeps the subscription, and still hears from this rank. */
        ordo_signal_t *never = NULL;
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 97, &never));
        CHECK_OK(ordo_signal_fail(never, ORDO_ERR_CANCELLED, "given up here"));
        idle_for(3 * LIVENESS_TIMEOUT_MS);
        CHECK_OK(ordo_signal_release(never));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 7, &observed));
        CHECK_OK(ordo_signal_wait(observed, 1, test_deadline()));
    }
    ranks_meet(__LINE__); /* rank 1 is back */
    if (rank == 0) {
        CHECK_OK(ordo_signal_advance(mine, 2));
    } else if (rank == 1) {
        CHECK_OK(ordo_signal_wait(observed, 2, test_deadline()));
        CHECK_OK(ordo_signal_release(observed));
    }
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    if (mine) {
        CHECK_OK(ordo_signal_release(mine));
    }
}

/* A timeout shortened after the progress thread has set its next
 * heartbeat by the default one (2 s: a beat every 250 ms) takes effect at
 * once: the ranks beat by the new period, and nobody is found dead while
 * every rank lives. */
static void liveness_timeout_shortened_later(void) {
    fixture_t f;
    fixture_open(&f);
    idle_for(400); /* the idle progress thread looks, every 250 ms */
    REQUIRE_OK(ordo_mpi_set_peer_timeout(f.mpi, 100));
    ranks_meet(__LINE__); /* every rank has set it */
    ordo_signal_t *mine = NULL, *theirs = NULL;
    REQUIRE_OK(ordo_signal_create(0, &mine));
    REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, mine, 11));
    REQUIRE_OK(ordo_mpi_signal_open(f.mpi, (rank + 1) % size, 11, &theirs));
    CHECK_OK(ordo_signal_advance(mine, 1));
    CHECK_OK(ordo_signal_wait(theirs, 1, test_deadline()));
    idle_for(600); /* six timeouts */
    uint64_t value = 0;
    CHECK_OK(ordo_signal_query(theirs, &value));
    ranks_meet(__LINE__); /* every rank is done with the other's signal */
    CHECK_OK(ordo_signal_release(theirs));
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    CHECK_OK(ordo_signal_release(mine));
}

/* An ordo_mpi_t destroyed while other ranks observe its signals: they
 * hear the end as ORDO_ERR_CANCELLED (not as silence, which would be a
 * dead rank), for a published signal (with the value it reached) and for
 * one it never published. */
static void destroy_ends_subscriptions(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *published = NULL, *reached = NULL, *never = NULL;
    if (rank == 0) {
        REQUIRE_OK(ordo_signal_create(0, &published));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, published, 78));
        CHECK_OK(ordo_signal_advance(published, 3));
    } else if (rank == 1) {
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 78, &reached));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 77, &never));
        CHECK_OK(ordo_signal_wait(reached, 3, test_deadline()));
    }
    ranks_meet(__LINE__);
    if (rank == 0) {
        fixture_close(&f, ORDO_OK, ORDO_OK);
        CHECK_OK(ordo_signal_release(published));
    } else if (rank == 1) {
        CHECK_STATUS(ordo_signal_wait(reached, 4, test_deadline()), ORDO_ERR_CANCELLED);
        CHECK(strstr(ordo_error_message(), "rank 0 destroyed the ordo_mpi_t") != NULL);
        uint64_t value = 0;
        CHECK_STATUS(ordo_signal_query(reached, &value), ORDO_ERR_CANCELLED);
        CHECK(value == 3);
        CHECK_STATUS(ordo_signal_wait(never, 1, test_deadline()), ORDO_ERR_CANCELLED);
        CHECK(strstr(ordo_error_message(), "before it published") != NULL);
        CHECK_OK(ordo_signal_release(reached));
        CHECK_OK(ordo_signal_release(never));
    }
    ranks_meet(__LINE__);
    if (rank != 0) {
        fixture_close(&f, ORDO_OK, ORDO_OK);
    }
}

/* Armed by a case: MPI_Comm_set_errhandler fails at its armed_at-th
 * call on rank 1 (the profiling interface: the test's definition takes
 * the place of MPI's, which it calls). */
static int errhandler_calls = -1, errhandler_fails_at;
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler handler) {
    int code = PMPI_Comm_set_errhandler(comm, handler);
    if (errhandler_calls >= 0 && ++errhandler_calls == errhandler_fails_at && rank == 1) {
        return MPI_ERR_OTHER;
    }
    return code;
}

/* A control communicator that one rank cannot set up fails the create on
 * every rank (mpi_control.c), and the ranks still agree on the ones they
 * keep: later creates on the same processes work, signals included. The
 * record of the kept ones is outside the allocator hooks: as many blocks
 * are live after as before (so ordo_allocator_set stays possible). The
 * only case that uses these processes in this order: the first create
 * makes a new duplicate. */
static void a_control_setup_failing_on_one_rank_fails_every_rank(void) {
    MPI_Comm reversed; /* processes in an order no other case uses */
    if (MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed) != MPI_SUCCESS) {
        abort_job(__LINE__, "MPI_Comm_split failed");
    }
    ordo_tracker_t *tracker;
    ordo_stream_t *comm;
    REQUIRE_OK(ordo_tracker_create(device, &tracker));
    REQUIRE_OK(ordo_stream_create(device, 0, &comm));
    size_t before = 0, after = 0;
    CHECK_OK(ordo_allocator_live_blocks(&before));
    ordo_mpi_t *mpi = NULL;
    errhandler_fails_at = 2; /* the data duplicate's, then the control one's */
    errhandler_calls = 0;
    ordo_status_t st = ordo_mpi_create(tracker, comm, reversed, &mpi);
    errhandler_calls = -1;
    CHECK_STATUS(st, ORDO_ERR_DEVICE);
    CHECK(strstr(ordo_error_message(), "MPI_Comm_set_errhandler") != NULL);
    if (st == ORDO_OK) {
        CHECK_OK(ordo_mpi_destroy(mpi, test_deadline()));
    }
    for (int round = 0; round < 2; ++round) {
        REQUIRE_OK(ordo_mpi_create(tracker, comm, reversed, &mpi));
        int me = -1, all = 0;
        CHECK_OK(ordo_mpi_rank(mpi, &me, &all));
        int next = (me + 1) % size;
        ordo_signal_t *mine = NULL, *theirs = NULL;
        REQUIRE_OK(ordo_signal_create(0, &mine));
        REQUIRE_OK(ordo_mpi_signal_publish(mpi, mine, 61));
        REQUIRE_OK(ordo_mpi_signal_open(mpi, next, 61, &theirs));
        CHECK_OK(ordo_signal_advance(mine, 1));
        CHECK_OK(ordo_signal_wait(theirs, 1, test_deadline()));
        ranks_meet(__LINE__);
        CHECK_OK(ordo_signal_release(theirs));
        CHECK_OK(ordo_mpi_destroy(mpi, test_deadline()));
        CHECK_OK(ordo_signal_release(mine));
        ranks_meet(__LINE__);
    }
    CHECK_OK(ordo_allocator_live_blocks(&after));
    CHECK(after == before);
    CHECK_OK(ordo_tracker_destroy(tracker));
    CHECK_OK(ordo_stream_destroy(comm));
    MPI_Comm_free(&reversed);
}

/* Whether process pid is stopped (state T in /proc/pid/stat). */
static int process_stopped(int pid) {
    char path[64], text[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) {
        return 0;
    }
    size_t n = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[n] = '\0';
    const char *end = strrchr(text, ')'); /* after the command's name */
    return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
}

/* ordo/mpi.h: an observer's handle takes each value the owner sends, and
 * a destroy of the owner's ordo_mpi_t reaches it as ORDO_ERR_CANCELLED.
 * Rank 1 is stopped (SIGSTOP) while rank 0 moves its SIGNALS signals
 * twice, more news than rank 1's queue takes, so updates wait in rank
 * 0's outbox, merged; then rank 0 destroys its ordo_mpi_t and continues
 * rank 1. Every observed signal still reaches its last value. */
#define SIGNALS 300
static void destroy_sends_the_last_state(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *s[SIGNALS] = {0};
    if (rank == 0) {
        for (int i = 0; i < SIGNALS; ++i) {
            REQUIRE_OK(ordo_signal_create(0, &s[i]));
            REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, s[i], 1000u + (uint32_t)i));
            CHECK_OK(ordo_signal_advance(s[i], 1));
        }
    } else if (rank == 1) {
        for (int i = 0; i < SIGNALS; ++i) {
            REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 1000u + (uint32_t)i, &s[i]));
            CHECK_OK(ordo_signal_wait(s[i], 1, test_deadline()));
        }
    }
    ranks_meet(__LINE__);
    int pid = (int)getpid();
    MPI_Request request;
    if (rank == 0) {
        MPI_Irecv(&pid, 1, MPI_INT, 1, 71, MPI_COMM_WORLD, &request);
        mpi_wait_bounded(&request, NULL, __LINE__);
        REQUIRE_OK(kill(pid, SIGSTOP) == 0 ? ORDO_OK : ORDO_ERR_INTERNAL);
        ordo_deadline_t deadline = test_deadline();
        while (!process_stopped(pid)) {
            if (ordo_time_now_ns() >= deadline) {
                (void)kill(pid, SIGCONT);
                abort_job(__LINE__, "rank 1 did not stop");
            }
            sched_yield();
        }
        for (uint64_t v = 2; v <= 3; ++v) {
            for (int i = 0; i < SIGNALS; ++i) {
                CHECK_OK(ordo_signal_advance(s[i], v));
            }
        }
        fixture_close(&f, ORDO_OK, ORDO_OK);
        (void)kill(pid, SIGCONT);
        for (int i = 0; i < SIGNALS; ++i) {
            CHECK_OK(ordo_signal_release(s[i]));
        }
    } else if (rank == 1) {
        MPI_Isend(&pid, 1, MPI_INT, 0, 71, MPI_COMM_WORLD, &request);
        mpi_wait_bounded(&request, NULL, __LINE__);
        int short_of = 0;
        for (int i = 0; i < SIGNALS; ++i) {
            /* The last value, then the end (its failure comes after). */
            ordo_status_t st = ordo_signal_wait(s[i], 3, test_deadline());
            short_of += st != ORDO_OK;
            CHECK_OK(ordo_signal_release(s[i]));
        }
        CHECK(short_of == 0);
    }
    ranks_meet(__LINE__);
    if (rank != 0) {
        fixture_close(&f, ORDO_OK, ORDO_OK);
    }
}

/* Only a signal of the publishing rank can be published: a handle of
 * another rank's signal is refused (its publication's reference would
 * keep the ordo_mpi_t from ever being destroyed), a shared signal is
 * accepted like a local one, and both ordo_mpi_t are destroyed. */
static void publish_refuses_a_handle(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *local = NULL, *shared = NULL, *observed = NULL;
    if (rank == 0) {
        REQUIRE_OK(ordo_signal_create(0, &local));
        ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
        REQUIRE_OK(ordo_shared_signal_create(&config, &shared));
        CHECK_OK(ordo_mpi_signal_publish(f.mpi, local, 81));
        CHECK_OK(ordo_mpi_signal_publish(f.mpi, shared, 82));
    } else if (rank == 1) {
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 81, &observed));
        CHECK_REFUSED(ordo_mpi_signal_publish(f.mpi, observed, 83), "ordo_mpi_signal_publish",
                      ORDO_ERR_INVALID_ARGUMENT, ORDO_ERR_INVALID_ARGUMENT);
        CHECK(strstr(ordo_error_message(), "ordo_mpi_signal_open") != NULL);
        CHECK(strstr(ordo_error_message(), "rank 0's signal 81") != NULL);
        CHECK_OK(ordo_signal_release(observed));
    }
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    if (rank == 0) {
        CHECK_OK(ordo_signal_release(local));
        CHECK_OK(ordo_signal_release(shared));
    }
}

/* A handle's last reference dropped on another thread, whose end (the
 * callbacks it runs) is still under way: the destroy waits for its close,
 * which touches the ordo_mpi_t, and says so at its deadline rather than
 * freeing under it. */
typedef struct slow_end {
    ordo_mpi_t *mpi;
    _Atomic int destroy_status; /* a destroy from inside the end's callback */
    _Atomic int entered;
    _Atomic int open;
} slow_end_t;

static void slow_end_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    slow_end_t *e = ctx;
    /* It could only wait for itself: refused. */
    atomic_store(&e->destroy_status, (int)ordo_mpi_destroy(e->mpi, ORDO_DEADLINE_NEVER));
    atomic_store(&e->entered, 1);
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&e->open) && (ordo_deadline_t)ordo_time_now_ns() < until) {
        sched_yield();
    }
}

static void *release_main(void *arg) {
    (void)ordo_signal_release(arg);
    return NULL;
}

static void destroy_waits_for_a_closing_handle(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *published = NULL, *observed = NULL;
    REQUIRE_OK(ordo_signal_create(0, &published));
    REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, published, 91));
    ranks_meet(__LINE__);
    REQUIRE_OK(ordo_mpi_signal_open(f.mpi, (rank + 1) % size, 91, &observed));
    slow_end_t e = {f.mpi, -1, 0, 0};
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    REQUIRE_OK(ordo_timepoint_arm(&tp, observed, 5, slow_end_fire, &e));
    pthread_t releaser;
    CHECK(pthread_create(&releaser, NULL, release_main, observed) == 0);
    while (!atomic_load(&e.entered)) {
        sched_yield();
    }
    CHECK_STATUS(ordo_mpi_destroy(f.mpi, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    CHECK(strstr(ordo_error_message(), "still closing") != NULL);
    CHECK(atomic_load(&e.destroy_status) == (int)ORDO_ERR_BUSY);
    atomic_store(&e.open, 1);
    CHECK(pthread_join(releaser, NULL) == 0);
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    CHECK_OK(ordo_signal_release(published));
}

/* ordo_mpi_destroy from a callback is refused, wherever the callback
 * runs: on this thread, where the publication's own callback may be
 * queued behind it (the destroy waited for that one for ever), and on the
 * progress thread, where another rank's advance of a published signal
 * runs it (the destroy joined its own thread and freed the ordo_mpi_t
 * under it). */
typedef struct destroy_in_callback {
    ordo_mpi_t *mpi;
    _Atomic int status;
    _Atomic int done;
    char message[256];
} destroy_in_callback_t;

static void destroy_in_callback_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    destroy_in_callback_t *d = ctx;
    ordo_status_t st = ordo_mpi_destroy(d->mpi, test_deadline());
    snprintf(d->message, sizeof d->message, "%s", ordo_error_message());
    atomic_store(&d->status, (int)st);
    atomic_store(&d->done, 1);
}

static void destroy_in_callback_check(destroy_in_callback_t *d, int line) {
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&d->done) && (ordo_deadline_t)ordo_time_now_ns() < until) {
        sched_yield();
    }
    if (!atomic_load(&d->done)) {
        abort_job(line, "the callback did not run");
    }
    if (atomic_load(&d->status) != (int)ORDO_ERR_BUSY || !strstr(d->message, "callback")) {
        check_failed(line, "the destroy in a callback returned %s (%s)",
                     ordo_status_name((ordo_status_t)atomic_load(&d->status)), d->message);
    }
}

static void destroy_from_a_callback_is_refused(void) {
    fixture_t f;
    fixture_open(&f);
    /* Rank 0 owns two signals and holds no handle (a destroy would go
     * ahead); rank 1 observes both. */
    ordo_signal_t *here = NULL, *moved = NULL;
    destroy_in_callback_t local = {.mpi = f.mpi}, remote = {.mpi = f.mpi};
    ordo_timepoint_t tp_local = ORDO_TIMEPOINT_INIT, tp_remote = ORDO_TIMEPOINT_INIT;
    if (rank == 0) {
        REQUIRE_OK(ordo_signal_create(0, &here));
        REQUIRE_OK(ordo_signal_create(0, &moved));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, here, 95));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, moved, 96));
        REQUIRE_OK(ordo_timepoint_arm(&tp_local, here, 1, destroy_in_callback_fire, &local));
        REQUIRE_OK(ordo_timepoint_arm(&tp_remote, moved, 1, destroy_in_callback_fire, &remote));
    }
    ranks_meet(__LINE__);
    ordo_signal_t *seen = NULL, *pushed = NULL;
    if (rank == 1) {
        /* Observed: the publications' own timepoints are armed. */
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 95, &seen));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 96, &pushed));
        CHECK_OK(ordo_signal_wait(seen, 0, test_deadline()));
        CHECK_OK(ordo_signal_wait(pushed, 0, test_deadline()));
    }
    ranks_meet(__LINE__);
    if (rank == 0) {
        CHECK_OK(ordo_signal_advance(here, 1)); /* runs the callback on this thread */
        destroy_in_callback_check(&local, __LINE__);
    }
    ranks_meet(__LINE__);
    if (rank == 1) {
        CHECK_OK(ordo_signal_advance(pushed, 1)); /* rank 0's progress thread takes it */
        CHECK_OK(ordo_signal_wait(seen, 1, test_deadline()));
    }
    if (rank == 0) {
        destroy_in_callback_check(&remote, __LINE__);
    }
    ranks_meet(__LINE__);
    if (rank == 1) {
        CHECK_OK(ordo_signal_release(seen));
        CHECK_OK(ordo_signal_release(pushed));
    }
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    if (rank == 0) {
        CHECK_OK(ordo_signal_release(here));
        CHECK_OK(ordo_signal_release(moved));
    }
}

/* ---- a stall report across ranks ----------------------------------------- */

/* An observer's advance or failure that reaches the owner before the
 * owner published the id (the handle took it at once) is applied at the
 * publish: owner and observer agree. Rank 1's control messages reach rank
 * 0 in the order sent, so once rank 0's published `ticker` moved, the
 * raises sent before it were received. A raise of an id never published
 * is freed with the ordo_mpi_t. */
static void early_raise_applied_at_publish(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *ticker = NULL, *advanced = NULL, *failed = NULL;
    ordo_signal_t *t = NULL, *a = NULL, *x = NULL, *never = NULL;
    if (rank == 0) {
        REQUIRE_OK(ordo_signal_create(0, &ticker));
        REQUIRE_OK(ordo_signal_create(0, &advanced));
        REQUIRE_OK(ordo_signal_create(0, &failed));
        REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, ticker, 90));
    }
    ranks_meet(__LINE__);
    if (rank == 1) {
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 90, &t));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 91, &a));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 92, &x));
        REQUIRE_OK(ordo_mpi_signal_open(f.mpi, 0, 93, &never));
        CHECK_OK(ordo_signal_advance(a, 5));
        CHECK_OK(ordo_signal_advance(a, 3)); /* the highest counts */
        CHECK_OK(ordo_signal_advance(x, 4));
        CHECK_OK(ordo_signal_fail(x, ORDO_ERR_ABORTED, "the observer gave up"));
        CHECK_OK(ordo_signal_advance(never, 7));
        CHECK_OK(ordo_signal_advance(t, 1));
    } else if (rank == 0) {
        CHECK_OK(ordo_signal_wait(ticker, 1, test_deadline()));
        char mark[512];
        message_mark(mark, sizeof mark);
        CHECK_OK(ordo_mpi_signal_publish(f.mpi, advanced, 91));
        CHECK_OK(ordo_mpi_signal_publish(f.mpi, failed, 92));
        CHECK_MESSAGE_KEPT(mark);
        uint64_t value = 0;
        CHECK_OK(ordo_signal_query(advanced, &value));
        CHECK(value == 5);
        CHECK_STATUS(ordo_signal_query(failed, &value), ORDO_ERR_ABORTED);
        CHECK(value == 4);
        ordo_status_t failure = ORDO_OK;
        char text[ORDO_SIGNAL_MESSAGE_MAX] = "";
        CHECK_OK(ordo_signal_failure(failed, &failure, text, sizeof text));
        CHECK(failure == ORDO_ERR_ABORTED);
        CHECK(strcmp(text, "the observer gave up") == 0);
    }
    if (rank == 1) { /* the owner's news agrees with what the handles took */
        CHECK_OK(ordo_signal_wait(a, 5, test_deadline()));
        CHECK_STATUS(ordo_signal_wait(x, 5, test_deadline()), ORDO_ERR_ABORTED);
    }
    ranks_meet(__LINE__);
    if (rank == 1) {
        CHECK_OK(ordo_signal_release(t));
        CHECK_OK(ordo_signal_release(a));
        CHECK_OK(ordo_signal_release(x));
        CHECK_OK(ordo_signal_release(never));
    }
    ranks_meet(__LINE__);
    fixture_close(&f, ORDO_OK, ORDO_OK);
    if (rank == 0) {
        CHECK_OK(ordo_signal_release(ticker));
        CHECK_OK(ordo_signal_release(advanced));
        CHECK_OK(ordo_signal_release(failed));
    }
}

/* A deliberate cycle round the ranks: each rank's consumer stream waits
 * for the previous rank's published signal, then raises its own; nothing
 * else raises them. Rank 0's stall report names every rank's wait, every
 * publication's holder, and the one cycle; after the hosts raise their
 * signals, a second report names none. */
static void stall_report_names_a_cycle(void) {
    fixture_t f;
    fixture_open(&f);
    ordo_signal_t *mine = NULL, *prev = NULL;
    REQUIRE_OK(ordo_signal_create(0, &mine));
    REQUIRE_OK(ordo_mpi_signal_publish(f.mpi, mine, 50));
    REQUIRE_OK(ordo_mpi_signal_open(f.mpi, (rank + size - 1) % size, 50, &prev));
    CHECK_OK(ordo_stream_wait(f.consumer, prev, 1));
    CHECK_OK(ordo_stream_signal(f.consumer, mine, 1));
    CHECK_STATUS(ordo_stream_synchronize(f.consumer, ordo_deadline_after_ms(200)),
                 ORDO_ERR_TIMEOUT);
    ranks_meet(__LINE__); /* every rank is blocked */
    if (rank == 0) {
        char text[8192];
        size_t len = 0;
        int cycles = -1;
        CHECK_OK(ordo_mpi_stall_report(f.mpi, test_deadline(), text, sizeof text, &len, &cycles));
        CHECK(cycles == 1);
        CHECK(len == strlen(text));
        char expected[160];
        for (int r = 0; r < size; ++r) {
            int p = (r + size - 1) % size;
            snprintf(expected, sizeof expected,
                     "rank %d: stream \"consumer\" waits for rank %d's signal 50 to reach 1 "
                     "(now 0)",
                     r, p);
            CHECK(strstr(text, expected) != NULL);
            snprintf(expected, sizeof expected,
                     "rank %d: signal 50 (at 0) is held by stream \"consumer\", which waits for "
                     "rank %d's signal 50 to reach 1 (now 0)",
                     r, p);
            CHECK(strstr(text, expected) != NULL);
        }
        /* From rank 0 round the ring backwards: 0 -> size-1 -> ... -> 0. */
        char cycle[512] = "cycle: rank 0 signal 50";
        for (int r = size - 1; r >= 0; --r) {
            size_t at = strlen(cycle);
            snprintf(cycle + at, sizeof cycle - at, " -> rank %d signal 50", r);
        }
        CHECK(strstr(text, cycle) != NULL);
        if (case_failures) {
            fprintf(stderr, "the report:\n%s", text);
        }
        /* Too small a buffer: cut, terminated, the full length told. */
        char small[16];
        size_t full = 0;
        CHECK_STATUS(
            ordo_mpi_stall_report(f.mpi, test_deadline(), small, sizeof small, &full, NULL),
            ORDO_ERR_OUT_OF_RANGE);
        CHECK(strlen(small) == sizeof small - 1 && full > sizeof small);
        CHECK_REFUSED(ordo_mpi_stall_report(NULL, test_deadline(), text, sizeof text, &len, NULL),
                      "ordo_mpi_stall_report", ORDO_ERR_INVALID_HANDLE, ORDO_ERR_INVALID_HANDLE);
        CHECK_REFUSED(ordo_mpi_stall_report(f.mpi, test_deadline(), text, sizeof text, NULL, NULL),
                      "ordo_mpi_stall_report", ORDO_ERR_INVALID_ARGUMENT,
                      ORDO_ERR_INVALID_ARGUMENT);
        CHECK_REFUSED(
            ordo_mpi_stall_report(f.mpi, ORDO_DEADLINE_NEVER, text, sizeof text, &len, NULL),
            "ordo_mpi_stall_report", ORDO_ERR_INVALID_ARGUMENT, ORDO_ERR_INVALID_ARGUMENT);
    }
    ranks_meet(__LINE__);                   /* rank 0 has its report */
    CHECK_OK(ordo_signal_advance(mine, 1)); /* the hosts break the cycle */
    CHECK_OK(ordo_stream_synchronize(f.consumer, test_deadline()));
    CHECK_OK(ordo_signal_wait(prev, 1, test_deadline()));
    ranks_meet(__LINE__);
    if (rank == 0) {
        char text[4096];
        size_t len = 0;
        int cycles = -1;
        CHECK_OK(ordo_mpi_stall_report(f.mpi, test_deadline(), text, sizeof text, &len, &cycles));
        CHECK(cycles == 0);
        CHECK(strstr(text, "waits for") == NULL);
    }
    ranks_meet(__LINE__);
    CHECK_OK(ordo_signal_release(prev));
    fixture_close(&f, ORDO_OK, ORDO_OK);
    CHECK_OK(ordo_signal_release(mine));
}

/* ---- main ---------------------------------------------------------------- */

typedef struct test_case {
    const char *name;
    void (*run)(void);
} test_case_t;

int main(int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "test_mpi: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "test_mpi: MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n",
                provided);
        MPI_Finalize();
        return 1;
    }
    if (size < 2) {
        fprintf(stderr, "test_mpi: run it with at least 2 ranks (mpirun -np 2)\n");
        MPI_Finalize();
        return 1;
    }
    REQUIRE_OK(ordo_device_open("cpu:0", &device));

    static const test_case_t cases[] = {
        {"allreduce_overlap", allreduce_overlap},
        {"ring_pipeline", ring_pipeline},
        {"bcast_every_root", bcast_every_root},
        {"alltoall", alltoall},
        {"traffic_isolated", traffic_isolated},
        {"two_communications", two_communications},
        {"release_defers_reclaim", release_defers_reclaim},
        {"progress_does_not_spin", progress_does_not_spin},
        {"destroy_waits_for_operations", destroy_waits_for_operations},
        {"destroy_past_deadline", destroy_past_deadline},
        {"truncation_fails_the_stream", truncation_fails_the_stream},
        {"start_error_fails_the_stream", start_error_fails_the_stream},
        {"accepted_send_keeps_the_message", accepted_send_keeps_the_message},
        {"published_calls_keep_the_message", published_calls_keep_the_message},
        {"many_small_operations", many_small_operations},
        {"signals_across_ranks", signals_across_ranks},
        {"liveness_no_false_alarm", liveness_no_false_alarm},
        {"liveness_timeout_shortened_later", liveness_timeout_shortened_later},
        {"stall_report_names_a_cycle", stall_report_names_a_cycle},
        {"destroy_ends_subscriptions", destroy_ends_subscriptions},
        {"destroy_sends_the_last_state", destroy_sends_the_last_state},
        {"a_control_setup_failing_on_one_rank_fails_every_rank",
         a_control_setup_failing_on_one_rank_fails_every_rank},
        {"publish_refuses_a_handle", publish_refuses_a_handle},
        {"destroy_waits_for_a_closing_handle", destroy_waits_for_a_closing_handle},
        {"destroy_from_a_callback_is_refused", destroy_from_a_callback_is_refused},
        {"bad_input_is_refused", bad_input_is_refused},
        {"early_raise_applied_at_publish", early_raise_applied_at_publish},
    };
    const char *only = getenv("TEST_MPI_CASE"); /* runs one case (the same on every rank) */
    int failed_cases = 0, ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        if (only && *only && strcmp(only, cases[i].name) != 0) {
            continue;
        }
        case_name = cases[i].name;
        case_failures = 0;
        uint64_t start = ordo_time_now_ns();
        cases[i].run();
        int total = world_sum(case_failures);
        ++ran;
        if (total) {
            ++failed_cases;
        }
        if (rank == 0) {
            printf("[%s] %s (%d ranks, %.1f ms)%s\n", total ? "FAILED" : "    OK", case_name, size,
                   (double)(ordo_time_now_ns() - start) / 1e6,
                   total ? " - see the ranks' messages above" : "");
            fflush(stdout);
        }
    }
    case_name = "teardown";
    case_failures = 0;
    CHECK_OK(ordo_device_release(device));
    failed_cases += world_sum(case_failures) != 0;
    if (rank == 0) {
        printf("%d of %d cases failed on %d ranks\n", failed_cases, ran, size);
    }
    if (ran == 0) {
        failed_cases = 1;
    }
    MPI_Finalize();
    return failed_cases ? 1 : 0;
}
