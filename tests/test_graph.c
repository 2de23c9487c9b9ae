/* Graphs (ordo/graph.h): a tracker's submissions recorded once and
 * replayed.
 *
 * - recording runs nothing and leaves the tracker's state alone; replays
 *   run the recorded work with its waits (counted against an eager run);
 * - replay equals eager execution: seeded random programs (streams,
 *   buffers of real data, host tasks and launch functions, each computing
 *   its written buffers from what it reads, in an order-sensitive way)
 *   replayed several times, with eager work between the replays, end with
 *   exactly the data of a serial run and of the same program run eagerly;
 *   with every slot rebound to another data set at every replay; with
 *   lanes beyond the tracker's first eight streams;
 * - a replay is ordered against the work around it: it waits for a
 *   producer held back by a gate, and a consumer after it waits for it
 *   (each shown by a stream that cannot finish within a bound);
 * - a rebound replay is ordered by the new buffer's history;
 * - what cannot be replayed is refused while recording, the recording then
 *   fails with that refusal and the tracker stays usable;
 * - failures: a task or a launch function that fails at a replay fails its
 *   stream and the work ordered after it (no wait hangs), and a replay on a
 *   failed stream enqueues nothing;
 * - lifetimes: the tracker and bound buffers are kept while a graph lives;
 *   a graph destroyed with replays queued leaves them to run;
 * - three threads replaying and submitting under ordo_tracker_lock on
 *   shared streams and buffers (every access a read-modify-write: under
 *   ThreadSanitizer a missing order is a reported race);
 * - bad input on every entry point, through tests/refusal.h (a destroyed
 *   graph is found by its dead tag: the suite's allocator keeps freed
 *   blocks readable for a while).
 *
 * Every wait has a deadline; nothing sleeps. ORDO_GRAPH_SEED and
 * ORDO_GRAPH_PROGRAMS reproduce or widen the random programs. */
#include <stdatomic.h>
#include <string.h>

#include "refusal.h"
#include "test_util.h"

static ordo_device_t *device;

/* ---- a quarantine allocator ------------------------------------------------
 * Freed blocks stay readable until QUARANTINE more are freed, so a handle
 * used right after its destroy meets its dead tag (docs/ERRORS.md: ordo
 * detects a destroyed object while its memory carries that tag). */

#define QUARANTINE 512

static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static void *quarantine[QUARANTINE];
static unsigned quarantine_next;

/* Allocations this thread makes before one is refused (-1: none is). */
static _Thread_local int allocations_before_refusal = -1;

static void *quarantine_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    if (allocations_before_refusal == 0) {
        return NULL;
    }
    if (allocations_before_refusal > 0) {
        --allocations_before_refusal;
    }
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void quarantine_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    pthread_mutex_lock(&quarantine_lock);
    void *oldest = quarantine[quarantine_next];
    quarantine[quarantine_next] = block;
    quarantine_next = (quarantine_next + 1) % QUARANTINE;
    pthread_mutex_unlock(&quarantine_lock);
    free(oldest);
}

static void quarantine_flush(void) {
    for (unsigned i = 0; i < QUARANTINE; ++i) {
        free(quarantine[i]);
        quarantine[i] = NULL;
    }
}

/* ---- helpers -------------------------------------------------------------- */

/* A task that counts its runs. */
static ordo_status_t count_run(void *ctx) {
    atomic_fetch_add((_Atomic uint64_t *)ctx, 1);
    return ORDO_OK;
}

static ordo_status_t noop(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    (void)ctx, (void)stream;
    return ORDO_OK;
}

/* A task that holds its stream until the gate opens (bounded). */
static ordo_status_t wait_gate(void *ctx) {
    _Atomic int *gate = ctx;
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(gate)) {
        if (ordo_time_now_ns() > deadline) {
            return ordo_fail(ORDO_ERR_TIMEOUT, "the test's gate stayed closed");
        }
    }
    return ORDO_OK;
}

static ordo_stream_t *stream_make(void) {
    ordo_stream_t *s = NULL;
    assert_ok(ordo_stream_create(device, 0, &s));
    return s;
}

static ordo_buffer_t *buffer_make(ordo_tracker_t *tracker) {
    ordo_buffer_t *b = NULL;
    assert_ok(ordo_buffer_create(tracker, &b));
    return b;
}

/* Shows that stream cannot finish its work while something it must wait
 * for is held back: its synchronize times out. */
static void assert_held(ordo_stream_t *stream) {
    assert_status(ordo_stream_synchronize(stream, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
}

/* ---- recording runs nothing; replays run it ------------------------------- */

typedef struct copy_task {
    uint64_t *from;
    uint64_t *to;
    uint64_t add;
    _Atomic uint64_t runs;
} copy_task_t;

static ordo_status_t copy_add(void *ctx) {
    copy_task_t *c = ctx;
    *c->to = *c->from + c->add;
    atomic_fetch_add(&c->runs, 1);
    return ORDO_OK;
}

static void recording_runs_nothing_replays_run_it(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *a = stream_make(), *b = stream_make();
    ordo_buffer_t *x = buffer_make(tracker), *y = buffer_make(tracker);
    uint64_t xv = 0, yv = 0;
    copy_task_t produce = {&xv, &xv, 1, 0}; /* x += 1 */
    copy_task_t consume = {&xv, &yv, 100, 0};
    ordo_tracker_metrics_t before, after;
    assert_ok(ordo_tracker_metrics(tracker, &before));

    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t w = {x, ORDO_ACCESS_READ_WRITE};
    ordo_access_t rw[] = {{x, ORDO_ACCESS_READ}, {y, ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit_host(tracker, a, &w, 1, copy_add, &produce));
    assert_ok(ordo_tracker_submit_host(tracker, b, rw, 2, copy_add, &consume));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    /* Nothing ran, nothing was submitted. */
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&produce.runs), 0);
    assert_int_equal(atomic_load(&consume.runs), 0);
    assert_ok(ordo_tracker_metrics(tracker, &after));
    assert_int_equal(after.submissions, before.submissions);
    assert_int_equal(after.waits_emitted, before.waits_emitted);

    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.streams, 2);
    assert_int_equal(info.buffers, 2);
    assert_int_equal(info.tasks, 2);
    assert_int_equal(info.waits, 1);
    assert_int_equal(info.records, 1);
    assert_int_equal(info.replays, 0);
    ordo_buffer_t *bound;
    ordo_access_mode_t mode;
    assert_ok(ordo_graph_buffer(graph, 0, &bound, &mode));
    assert_ptr_equal(bound, x);
    assert_int_equal(mode, ORDO_ACCESS_READ_WRITE);
    assert_ok(ordo_graph_buffer(graph, 1, &bound, &mode));
    assert_ptr_equal(bound, y);
    assert_int_equal(mode, ORDO_ACCESS_WRITE);

    for (uint64_t r = 1; r <= 5; ++r) {
        assert_ok(ordo_graph_replay(graph));
    }
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&produce.runs), 5);
    assert_int_equal(atomic_load(&consume.runs), 5);
    assert_int_equal(xv, 5);
    assert_int_equal(yv, 105);
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.replays, 5);
    /* Each replay: a submission per stream and its recorded wait; from the
     * second on, a's entry also waits for b's read of x in the replay
     * before (write after read), as five eager runs would. */
    ordo_tracker_metrics_t replayed;
    assert_ok(ordo_tracker_metrics(tracker, &replayed));
    assert_int_equal(replayed.submissions - after.submissions, 10);
    assert_int_equal(replayed.waits_emitted - after.waits_emitted, 5 + 4);
    assert_int_equal(replayed.points_recorded - after.points_recorded, 5 + 4);
    /* Eager work after the replays sees their results. */
    copy_task_t after_task = {&yv, &xv, 1, 0};
    ordo_access_t back[] = {{y, ORDO_ACCESS_READ}, {x, ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit_host(tracker, a, back, 2, copy_add, &after_task));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(xv, 106);

    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(x, NULL, NULL));
    assert_ok(ordo_buffer_release(y, NULL, NULL));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
}

/* A launch function that enqueues copy_add with its own context. */
static ordo_status_t launch_copy_add(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, copy_add, ctx);
}

/* Each task's context set between replays: the replays after it run with
 * the new one (a host task and a launch function alike), a replay made
 * before it, still held on its stream, keeps the old one. */
static void a_task_context_set_between_replays(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *a = stream_make();
    ordo_buffer_t *x = buffer_make(tracker);
    uint64_t xv = 0, yv = 0;
    copy_task_t first = {&xv, &xv, 1, 0}, then = {&xv, &yv, 10, 0}; /* x += 1; y = x + 10 */
    copy_task_t first2 = {&xv, &xv, 100, 0}, then2 = {&xv, &yv, 1000, 0};
    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t w = {x, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, a, &w, 1, copy_add, &first));
    assert_ok(ordo_tracker_submit(tracker, a, &w, 1, launch_copy_add, &then));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    _Atomic int gate = 0;
    assert_ok(ordo_stream_host_task(a, wait_gate, (void *)&gate));
    assert_ok(ordo_graph_replay(graph)); /* held behind the gate */
    assert_ok(ordo_graph_set_task_context(graph, 0, &first2));
    assert_ok(ordo_graph_set_task_context(graph, 1, &then2));
    assert_ok(ordo_graph_replay(graph));
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&first.runs), 1);
    assert_int_equal(atomic_load(&then.runs), 1);
    assert_int_equal(atomic_load(&first2.runs), 1);
    assert_int_equal(atomic_load(&then2.runs), 1);
    assert_int_equal(xv, 101);        /* 0 + 1, then + 100 */
    assert_int_equal(yv, 101 + 1000); /* the second replay's */

    /* Bad input: the task's index past the last, a graph destroyed. */
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_graph_set_task_context, graph, 2, &first);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_set_task_context, NULL, 0, &first);
    assert_ok(ordo_graph_destroy(graph));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_set_task_context, graph, 0, &first);
    assert_ok(ordo_buffer_release(x, NULL, NULL));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
}

static void empty_recording_makes_an_empty_graph(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.streams + info.buffers + info.tasks + info.waits, 0);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.replays, 1);
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_tracker_destroy(tracker));
}

/* ---- replay equals eager: random programs ------------------------------- */

#define WIDTH 6      /* values per buffer */
#define MAX_BUF 8    /* buffers of a program */
#define MAX_TASKS 48 /* tasks of a program */
#define MAX_OUTSIDE 3
#define POOL_STREAMS 12
#define REPS 4

typedef struct prog_task {
    uint32_t stream;
    uint32_t count;
    uint32_t buf[3];
    ordo_access_mode_t mode[3];
    uint32_t spin;
    int launch;
    uint64_t salt;
} prog_task_t;

typedef struct program {
    unsigned streams, buffers, tasks;
    int rebind; /* two data sets, alternated at every replay */
    prog_task_t task[MAX_TASKS];
    prog_task_t outside[REPS][MAX_OUTSIDE];
    unsigned outside_count[REPS];
} program_t;

typedef uint64_t data_set_t[MAX_BUF][WIDTH];

static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static void task_make(prog_task_t *t, const program_t *p, uint64_t *rng, uint64_t salt) {
    memset(t, 0, sizeof *t);
    t->stream = (uint32_t)(rng_next(rng) % p->streams);
    t->count = (uint32_t)(rng_next(rng) % 4); /* zero accesses sometimes */
    if (t->count > p->buffers) {
        t->count = p->buffers;
    }
    for (uint32_t k = 0; k < t->count; ++k) {
        uint32_t b;
        int distinct;
        do {
            b = (uint32_t)(rng_next(rng) % p->buffers);
            distinct = 1;
            for (uint32_t j = 0; j < k; ++j) {
                distinct &= t->buf[j] != b;
            }
        } while (!distinct);
        t->buf[k] = b;
        t->mode[k] = (ordo_access_mode_t)(1 + rng_next(rng) % 3);
    }
    t->spin = (uint32_t)(rng_next(rng) % 4 == 0 ? rng_next(rng) % 2000 : 0);
    t->launch = p->rebind || rng_next(rng) % 3 == 0;
    t->salt = salt;
}

static void program_make(program_t *p, uint64_t seed) {
    uint64_t rng = seed * 0x9e3779b97f4a7c15u + 1;
    memset(p, 0, sizeof *p);
    p->streams = 2 + (unsigned)(rng_next(&rng) % 3);
    if (rng_next(&rng) % 8 == 0) {
        p->streams =
            9 + (unsigned)(rng_next(&rng) % (POOL_STREAMS - 8)); /* past the inline eight */
    }
    p->buffers = 2 + (unsigned)(rng_next(&rng) % (MAX_BUF - 1));
    p->tasks = 1 + (unsigned)(rng_next(&rng) % MAX_TASKS);
    p->rebind = rng_next(&rng) % 4 == 0;
    for (unsigned i = 0; i < p->tasks; ++i) {
        task_make(&p->task[i], p, &rng, 1000 + i);
    }
    for (unsigned r = 0; r < REPS; ++r) {
        p->outside_count[r] = (unsigned)(rng_next(&rng) % (MAX_OUTSIDE + 1));
        for (unsigned i = 0; i < p->outside_count[r]; ++i) {
            task_make(&p->outside[r][i], p, &rng, 5000 + 10 * r + i);
        }
    }
}

/* The work: every written buffer becomes a function of its old value (if
 * also read), of everything the task reads and of the task: run out of
 * order, or two at once, the values differ. */
static void task_apply(const prog_task_t *t, data_set_t *data) {
    uint64_t acc[WIDTH];
    for (int i = 0; i < WIDTH; ++i) {
        acc[i] = t->salt * 7 + (uint64_t)i;
    }
    for (uint32_t k = 0; k < t->count; ++k) {
        if (t->mode[k] & ORDO_ACCESS_READ) {
            for (int i = 0; i < WIDTH; ++i) {
                acc[i] = acc[i] * 31 + (*data)[t->buf[k]][i];
            }
        }
    }
    for (volatile uint32_t s = 0; s < t->spin; s = s + 1) {
    }
    for (uint32_t k = 0; k < t->count; ++k) {
        if (t->mode[k] & ORDO_ACCESS_WRITE) {
            uint64_t *v = (*data)[t->buf[k]];
            for (int i = 0; i < WIDTH; ++i) {
                uint64_t old = (t->mode[k] & ORDO_ACCESS_READ) ? v[i] * 1000003 : 0;
                v[i] = old ^ (acc[i] + k);
            }
        }
    }
}

/* A task bound to a data set. */
typedef struct task_run {
    const prog_task_t *task;
    data_set_t *data;
} task_run_t;

static ordo_status_t task_run(void *ctx) {
    const task_run_t *run = ctx;
    task_apply(run->task, run->data);
    return ORDO_OK;
}

struct model_run;

/* A recorded launch: enqueues its task on the data set current at the
 * replay (the test sets it before each), as a launch function that
 * follows rebinding does. */
typedef struct task_launch {
    struct model_run *m;
    unsigned task;
} task_launch_t;

static ordo_status_t task_launch(void *ctx, ordo_stream_t *stream);

static void data_init(data_set_t *d, uint64_t seed) {
    for (int b = 0; b < MAX_BUF; ++b) {
        for (int i = 0; i < WIDTH; ++i) {
            (*d)[b][i] = seed * 131 + (uint64_t)b * 17 + (uint64_t)i;
        }
    }
}

typedef struct model_run {
    ordo_tracker_t *tracker;
    ordo_buffer_t *buffers[2][MAX_BUF];
    data_set_t data[2];
    task_run_t runs[2][MAX_TASKS];              /* the program's tasks per data set */
    task_run_t outside_runs[REPS][MAX_OUTSIDE]; /* eager work between replays */
    task_launch_t launches[MAX_TASKS];
    unsigned current;
} model_run_t;

static ordo_status_t task_launch(void *ctx, ordo_stream_t *stream) {
    const task_launch_t *l = ctx;
    return ordo_stream_host_task(stream, task_run, &l->m->runs[l->m->current][l->task]);
}

static ordo_stream_t *pool_streams[POOL_STREAMS];

static void access_list(const prog_task_t *t, ordo_buffer_t *const *buffers, ordo_access_t *out) {
    for (uint32_t k = 0; k < t->count; ++k) {
        out[k] = (ordo_access_t){buffers[t->buf[k]], t->mode[k]};
    }
}

/* A fresh tracker whose first streams are the pool's in a random order, so
 * that the program's streams get indices anywhere in the table. */
static model_run_t *model_make(const program_t *p, uint64_t seed) {
    model_run_t *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_ok(ordo_tracker_create(device, &m->tracker));
    unsigned order[POOL_STREAMS];
    for (unsigned i = 0; i < POOL_STREAMS; ++i) {
        order[i] = i;
    }
    uint64_t rng = seed + 77;
    for (unsigned i = POOL_STREAMS - 1; i > 0; --i) {
        unsigned j = (unsigned)(rng_next(&rng) % (i + 1));
        unsigned tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (unsigned i = 0; i < POOL_STREAMS; ++i) {
        assert_ok(
            ordo_tracker_submit_host(m->tracker, pool_streams[order[i]], NULL, 0, noop, NULL));
    }
    for (int set = 0; set < 2; ++set) {
        data_init(&m->data[set], seed + (uint64_t)set);
        for (unsigned b = 0; b < p->buffers; ++b) {
            m->buffers[set][b] = buffer_make(m->tracker);
        }
        for (unsigned i = 0; i < p->tasks; ++i) {
            m->runs[set][i] = (task_run_t){&p->task[i], &m->data[set]};
        }
    }
    for (unsigned i = 0; i < p->tasks; ++i) {
        m->launches[i] = (task_launch_t){m, i};
    }
    return m;
}

static void model_free(model_run_t *m, const program_t *p) {
    assert_ok(ordo_tracker_synchronize(m->tracker, test_deadline()));
    for (int set = 0; set < 2; ++set) {
        for (unsigned b = 0; b < p->buffers; ++b) {
            assert_ok(ordo_buffer_release(m->buffers[set][b], NULL, NULL));
        }
    }
    assert_ok(ordo_tracker_synchronize(m->tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(m->tracker));
    free(m);
}

/* t's accesses on data set `set`, submitted eagerly as fn(ctx). */
static void submit_as(model_run_t *m, const prog_task_t *t, unsigned set, ordo_host_fn fn,
                      void *ctx) {
    ordo_access_t list[3];
    access_list(t, m->buffers[set], list);
    assert_ok(
        ordo_tracker_submit_host(m->tracker, pool_streams[t->stream], list, t->count, fn, ctx));
}

static void submit_eager(model_run_t *m, const prog_task_t *t, task_run_t *run, unsigned set) {
    submit_as(m, t, set, task_run, run);
}

static void submit_outside(model_run_t *m, const program_t *p, unsigned r, unsigned set) {
    for (unsigned i = 0; i < p->outside_count[r]; ++i) {
        m->outside_runs[r][i] = (task_run_t){&p->outside[r][i], &m->data[set]};
        submit_eager(m, &p->outside[r][i], &m->outside_runs[r][i], set);
    }
}

/* The data after REPS repetitions, outside work before each. */
static void run_serial(const program_t *p, uint64_t seed, data_set_t *out) {
    data_set_t sets[2];
    data_init(&sets[0], seed);
    data_init(&sets[1], seed + 1);
    for (unsigned r = 0; r < REPS; ++r) {
        data_set_t *d = &sets[p->rebind ? r % 2 : 0];
        for (unsigned i = 0; i < p->outside_count[r]; ++i) {
            task_apply(&p->outside[r][i], d);
        }
        for (unsigned i = 0; i < p->tasks; ++i) {
            task_apply(&p->task[i], d);
        }
    }
    memcpy(out, sets, sizeof sets);
}

static void run_eager(const program_t *p, uint64_t seed, data_set_t *out) {
    model_run_t *m = model_make(p, seed);
    for (unsigned r = 0; r < REPS; ++r) {
        unsigned set = p->rebind ? r % 2 : 0;
        submit_outside(m, p, r, set);
        for (unsigned i = 0; i < p->tasks; ++i) {
            submit_eager(m, &p->task[i], &m->runs[set][i], set);
        }
    }
    assert_ok(ordo_tracker_synchronize(m->tracker, test_deadline()));
    memcpy(out, m->data, sizeof m->data);
    model_free(m, p);
}

/* The waits and records the tracker emits for one eager run of the
 * program on idle streams and empty histories: what a recording finds. */
static void eager_waits(const program_t *p, uint64_t seed, uint64_t *out_waits,
                        uint64_t *out_records) {
    model_run_t *m = model_make(p, seed);
    ordo_tracker_metrics_t before, after;
    assert_ok(ordo_tracker_metrics(m->tracker, &before));
    for (unsigned i = 0; i < p->tasks; ++i) {
        submit_as(m, &p->task[i], 0, noop, NULL);
    }
    assert_ok(ordo_tracker_metrics(m->tracker, &after));
    *out_waits = after.waits_emitted - before.waits_emitted;
    *out_records = after.points_recorded - before.points_recorded;
    model_free(m, p);
}

static void run_replayed(const program_t *p, uint64_t seed, data_set_t *out,
                         ordo_graph_info_t *out_info) {
    model_run_t *m = model_make(p, seed);
    assert_ok(ordo_tracker_record_begin(m->tracker));
    for (unsigned i = 0; i < p->tasks; ++i) {
        const prog_task_t *t = &p->task[i];
        ordo_access_t list[3];
        access_list(t, m->buffers[0], list);
        if (t->launch) {
            assert_ok(ordo_tracker_submit(m->tracker, pool_streams[t->stream], list, t->count,
                                          task_launch, &m->launches[i]));
        } else {
            assert_ok(ordo_tracker_submit_host(m->tracker, pool_streams[t->stream], list, t->count,
                                               task_run, &m->runs[0][i]));
        }
    }
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(m->tracker, &graph));
    for (unsigned r = 0; r < REPS; ++r) {
        unsigned set = p->rebind ? r % 2 : 0;
        if (set != m->current) {
            for (unsigned b = 0; b < p->buffers; ++b) {
                ordo_status_t st =
                    ordo_graph_rebind(graph, m->buffers[m->current][b], m->buffers[set][b]);
                /* A buffer the program never names is in no slot. */
                if (st != ORDO_ERR_NOT_FOUND) {
                    assert_ok(st);
                }
            }
            m->current = set;
        }
        submit_outside(m, p, r, set);
        assert_ok(ordo_graph_replay(graph));
    }
    assert_ok(ordo_tracker_synchronize(m->tracker, test_deadline()));
    memcpy(out, m->data, sizeof m->data);
    assert_ok(ordo_graph_info(graph, out_info));
    assert_ok(ordo_graph_destroy(graph));
    model_free(m, p);
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : fallback;
}

static void replay_equals_eager(void **state) {
    (void)state;
    for (unsigned i = 0; i < POOL_STREAMS; ++i) {
        pool_streams[i] = stream_make();
    }
    const uint64_t first = env_u64("ORDO_GRAPH_SEED", 1);
    const uint64_t programs = env_u64("ORDO_GRAPH_PROGRAMS", test_device_scaled(600));
    program_t *p = malloc(sizeof *p);
    data_set_t serial[2], eager[2], replayed[2];
    uint64_t rebound = 0, wide = 0;
    for (uint64_t seed = first; seed < first + programs; ++seed) {
        program_make(p, seed);
        rebound += (uint64_t)p->rebind;
        wide += (uint64_t)(p->streams > 8);
        run_serial(p, seed, serial);
        run_eager(p, seed, eager);
        ordo_graph_info_t info;
        run_replayed(p, seed, replayed, &info);
        if (memcmp(eager, serial, sizeof serial) != 0) {
            fail_msg("seed %llu: the eager run differs from the serial one",
                     (unsigned long long)seed);
        }
        if (memcmp(replayed, serial, sizeof serial) != 0) {
            fail_msg("seed %llu: the replays differ from the eager run (%u streams, %u buffers, "
                     "%u tasks%s)",
                     (unsigned long long)seed, p->streams, p->buffers, p->tasks,
                     p->rebind ? ", rebound" : "");
        }
        uint64_t waits, records;
        eager_waits(p, seed, &waits, &records);
        if (info.waits != waits || info.records != records || info.tasks != p->tasks) {
            fail_msg("seed %llu: the graph holds %llu waits, %llu records and %llu tasks; an "
                     "eager run on idle streams emits %llu, %llu, %u",
                     (unsigned long long)seed, (unsigned long long)info.waits,
                     (unsigned long long)info.records, (unsigned long long)info.tasks,
                     (unsigned long long)waits, (unsigned long long)records, p->tasks);
        }
        assert_int_equal(info.replays, REPS);
    }
    print_message("  %llu programs, %llu rebound at every replay, %llu on more than 8 streams\n",
                  (unsigned long long)programs, (unsigned long long)rebound,
                  (unsigned long long)wide);
    free(p);
    for (unsigned i = 0; i < POOL_STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(pool_streams[i]));
    }
}

/* ---- ordered against the work around it --------------------------------- */

static void replay_is_ordered_against_outside_work(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *a = stream_make(), *b = stream_make(), *c = stream_make();
    ordo_buffer_t *x = buffer_make(tracker), *y = buffer_make(tracker);
    uint64_t xv = 0, yv = 0, zv = 0;
    copy_task_t in_graph = {&xv, &yv, 10, 0};   /* y = x + 10, on b */
    copy_task_t producer = {&xv, &xv, 5, 0};    /* x += 5, on a */
    copy_task_t consumer = {&yv, &zv, 1000, 0}; /* z = y + 1000, on c */

    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t rw[] = {{x, ORDO_ACCESS_READ}, {y, ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit_host(tracker, b, rw, 2, copy_add, &in_graph));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));

    /* A producer of x held back on a; the replay on b waits for it, and a
     * consumer of y on c waits for the replay. */
    _Atomic int gate = 0;
    assert_ok(ordo_stream_host_task(a, wait_gate, &gate));
    ordo_access_t wx = {x, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, a, &wx, 1, copy_add, &producer));
    assert_ok(ordo_graph_replay(graph));
    ordo_access_t ry = {y, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit_host(tracker, c, &ry, 1, copy_add, &consumer));
    assert_held(b);
    assert_held(c);
    assert_int_equal(atomic_load(&in_graph.runs), 0);
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(yv, 15);
    assert_int_equal(zv, 1015);

    /* Write after read: a writer of x on c after the replay waits for the
     * replay's read, held back behind a gate on b. */
    atomic_store(&gate, 0);
    assert_ok(ordo_stream_host_task(b, wait_gate, &gate));
    assert_ok(ordo_graph_replay(graph)); /* reads x = 5 once the gate opens */
    copy_task_t overwrite = {&xv, &xv, 100, 0};
    assert_ok(ordo_tracker_submit_host(tracker, c, &wx, 1, copy_add, &overwrite));
    assert_held(c);
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(yv, 15);
    assert_int_equal(xv, 105);

    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(x, NULL, NULL));
    assert_ok(ordo_buffer_release(y, NULL, NULL));
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_stream_destroy(c));
}

/* ---- rebinding ------------------------------------------------------------ */

/* A launch function that reads, when it is called, which input is bound. */
typedef struct rebound_launch {
    copy_task_t tasks[2];
    unsigned current;
} rebound_launch_t;

static ordo_status_t launch_bound(void *ctx, ordo_stream_t *stream) {
    rebound_launch_t *l = ctx;
    return ordo_stream_host_task(stream, copy_add, &l->tasks[l->current]);
}

static void rebind_orders_by_the_new_buffer(void **state) {
    (void)state;
    ordo_tracker_t *tracker, *other;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_tracker_create(device, &other));
    ordo_stream_t *a = stream_make(), *b = stream_make();
    ordo_buffer_t *in[2] = {buffer_make(tracker), buffer_make(tracker)};
    ordo_buffer_t *out = buffer_make(tracker), *spare = buffer_make(tracker);
    ordo_buffer_t *foreign = buffer_make(other);
    uint64_t inv[2] = {1, 2}, outv = 0;
    rebound_launch_t launch = {{{&inv[0], &outv, 0, 0}, {&inv[1], &outv, 0, 0}}, 0};

    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t list[] = {{in[0], ORDO_ACCESS_READ}, {out, ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit(tracker, b, list, 2, launch_bound, &launch));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(outv, 1);

    /* Bound to in[1], whose producer is held back on a: the replay waits
     * for it, and no longer for in[0]'s history. */
    _Atomic int gate = 0;
    copy_task_t produce = {&inv[1], &inv[1], 40, 0};
    assert_ok(ordo_stream_host_task(a, wait_gate, &gate));
    ordo_access_t w1 = {in[1], ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, a, &w1, 1, copy_add, &produce));
    assert_ok(ordo_graph_rebind(graph, in[0], in[1]));
    launch.current = 1;
    ordo_buffer_t *bound;
    ordo_access_mode_t mode;
    assert_ok(ordo_graph_buffer(graph, 0, &bound, &mode));
    assert_ptr_equal(bound, in[1]);
    assert_ok(ordo_graph_replay(graph));
    assert_held(b);
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(outv, 42);
    /* in[0] is bound no more: it may be released; in[1] may not. */
    assert_status(ordo_buffer_release(in[1], NULL, NULL), ORDO_ERR_BUSY);
    assert_ok(ordo_buffer_release(in[0], NULL, NULL));
    /* A released buffer whose use still waits behind a gate. */
    ordo_buffer_t *gone = buffer_make(tracker);
    ordo_access_t wg = {gone, ORDO_ACCESS_WRITE};
    atomic_store(&gate, 0);
    assert_ok(ordo_stream_host_task(a, wait_gate, &gate));
    assert_ok(ordo_tracker_submit_host(tracker, a, &wg, 1, noop, NULL));
    assert_ok(ordo_buffer_release(gone, NULL, NULL));

    REFUSED(ORDO_ERR_NOT_FOUND, ordo_graph_rebind, graph, spare, in[1]);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_rebind, graph, in[1], out);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_rebind, graph, in[1], foreign);
    REFUSED(ORDO_ERR_DESTROYED, ordo_graph_rebind, graph, in[1], gone);
    atomic_store(&gate, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_rebind, graph, in[1], NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_rebind, graph, NULL, spare);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_rebind, graph, GARBAGE(ordo_buffer_t), spare);
    assert_ok(ordo_graph_rebind(graph, in[1], in[1])); /* nothing to do */
    assert_ok(ordo_graph_buffer(graph, 0, &bound, &mode));
    assert_ptr_equal(bound, in[1]);

    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(in[1], NULL, NULL));
    assert_ok(ordo_buffer_release(out, NULL, NULL));
    assert_ok(ordo_buffer_release(spare, NULL, NULL));
    assert_ok(ordo_buffer_release(foreign, NULL, NULL));
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
    assert_ok(ordo_tracker_close(other, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
}

/* ---- what cannot be replayed -------------------------------------------- */

typedef enum refused_call {
    REFUSE_SYNCHRONIZE,
    REFUSE_DRAIN,
    REFUSE_CLOSE,
    REFUSE_DESTROY,
    REFUSE_RELEASE,
    REFUSE_PREPARE,
    REFUSE_FINISH,
    REFUSE_REPLAY,
    REFUSE_COUNT
} refused_call_t;

static const char *const refused_names[REFUSE_COUNT] = {
    "ordo_tracker_synchronize", "ordo_tracker_drain",  "ordo_tracker_close",
    "ordo_tracker_destroy",     "ordo_buffer_release", "ordo_tracker_prepare",
    "ordo_tracker_finish",      "ordo_graph_replay",
};

static ordo_status_t call_refused(refused_call_t call, ordo_tracker_t *tracker,
                                  ordo_stream_t *stream, ordo_buffer_t *buffer,
                                  ordo_graph_t *graph) {
    ordo_access_t access = {buffer, ORDO_ACCESS_WRITE};
    switch (call) {
    case REFUSE_SYNCHRONIZE:
        return ordo_tracker_synchronize(tracker, test_deadline());
    case REFUSE_DRAIN:
        return ordo_tracker_drain(tracker, test_deadline());
    case REFUSE_CLOSE:
        return ordo_tracker_close(tracker, test_deadline());
    case REFUSE_DESTROY:
        return ordo_tracker_destroy(tracker);
    case REFUSE_RELEASE:
        return ordo_buffer_release(buffer, NULL, NULL);
    case REFUSE_PREPARE:
        return ordo_tracker_prepare(tracker, stream, &access, 1);
    case REFUSE_FINISH:
        return ordo_tracker_finish(tracker, stream, &access, 1);
    default:
        return ordo_graph_replay(graph);
    }
}

static void recording_refuses_what_cannot_be_replayed(void **state) {
    (void)state;
    const int count_blocks = !test_device_keeps_host_blocks();
    ordo_stream_t *s = stream_make();
    for (int call = 0; call < REFUSE_COUNT; ++call) {
        size_t blocks = count_blocks ? refusal_live_blocks() : 0;
        ordo_tracker_t *tracker;
        assert_ok(ordo_tracker_create(device, &tracker));
        ordo_buffer_t *x = buffer_make(tracker), *y = buffer_make(tracker);
        _Atomic uint64_t runs = 0;
        ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
        /* Another graph, for the replay. */
        assert_ok(ordo_tracker_record_begin(tracker));
        assert_ok(ordo_tracker_submit_host(tracker, s, &wx, 1, count_run, &runs));
        ordo_graph_t *graph;
        assert_ok(ordo_tracker_record_end(tracker, &graph));

        assert_ok(ordo_tracker_record_begin(tracker));
        assert_status(ordo_tracker_record_begin(tracker), ORDO_ERR_BUSY);
        assert_ok(ordo_tracker_submit_host(tracker, s, &wx, 1, count_run, &runs));
        ordo_status_t st = call_refused((refused_call_t)call, tracker, s, y, graph);
        if (st != ORDO_ERR_BUSY || !strstr(ordo_error_message(), refused_names[call])) {
            fail_msg("%s while recording returned %s (%s)", refused_names[call],
                     ordo_status_name(st), ordo_error_message());
        }
        /* A host wait on a stream is not the tracker's: allowed. */
        assert_ok(ordo_stream_synchronize(s, test_deadline()));
        /* The recording goes on, but fails at its end with the refusal. */
        assert_ok(ordo_tracker_submit_host(tracker, s, &wx, 1, count_run, &runs));
        ordo_graph_t *refused = GARBAGE(ordo_graph_t);
        st = ordo_tracker_record_end(tracker, &refused);
        assert_int_equal(st, ORDO_ERR_BUSY);
        assert_null(refused);
        const char *message = ordo_error_message();
        if (!strstr(message, "ordo_tracker_record_end") || !strstr(message, refused_names[call])) {
            fail_msg("record_end's message \"%s\" does not name the refused %s", message,
                     refused_names[call]);
        }
        assert_status(ordo_tracker_record_end(tracker, &refused), ORDO_ERR_BUSY);
        /* The tracker is usable: nothing recorded ran, new work does, a
         * new recording works. */
        assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
        assert_int_equal(atomic_load(&runs), 0);
        assert_ok(ordo_graph_replay(graph));
        assert_ok(ordo_tracker_submit_host(tracker, s, &wx, 1, count_run, &runs));
        assert_ok(ordo_tracker_record_begin(tracker));
        assert_ok(ordo_tracker_submit_host(tracker, s, &wx, 1, count_run, &runs));
        ordo_graph_t *again;
        assert_ok(ordo_tracker_record_end(tracker, &again));
        assert_ok(ordo_graph_replay(again));
        assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
        assert_int_equal(atomic_load(&runs), 3);
        assert_ok(ordo_graph_destroy(again));
        assert_ok(ordo_graph_destroy(graph));
        assert_ok(ordo_buffer_release(x, NULL, NULL));
        assert_ok(ordo_buffer_release(y, NULL, NULL));
        assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
        assert_ok(ordo_tracker_destroy(tracker));
        if (count_blocks) {
            assert_int_equal(refusal_live_blocks(), blocks);
        }
    }
    assert_ok(ordo_stream_destroy(s));
}

/* ---- failures ----------------------------------------------------------- */

typedef struct failing {
    _Atomic int fail;
    _Atomic uint64_t runs;
} failing_t;

static ordo_status_t maybe_fail(void *ctx) {
    failing_t *f = ctx;
    atomic_fetch_add(&f->runs, 1);
    return atomic_load(&f->fail) ? ordo_fail(ORDO_ERR_ABORTED, "graph task failed on purpose")
                                 : ORDO_OK;
}

static ordo_status_t launch_maybe_fail(void *ctx, ordo_stream_t *stream) {
    failing_t *f = ctx;
    if (atomic_load(&f->fail)) {
        return ordo_fail(ORDO_ERR_ABORTED, "launch refused on purpose");
    }
    return ordo_stream_host_task(stream, count_run, &f->runs);
}

/* a: fails (a task or a launch); b: reads what a wrote, then writes z;
 * c: reads z. Both later streams fail instead of waiting forever. */
static void failure_propagates(int launch) {
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *a = stream_make(), *b = stream_make(), *c = stream_make();
    ordo_buffer_t *x = buffer_make(tracker), *z = buffer_make(tracker);
    failing_t f = {0, 0};
    _Atomic uint64_t later = 0;
    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
    if (launch) {
        assert_ok(ordo_tracker_submit(tracker, a, &wx, 1, launch_maybe_fail, &f));
    } else {
        assert_ok(ordo_tracker_submit_host(tracker, a, &wx, 1, maybe_fail, &f));
    }
    ordo_access_t xz[] = {{x, ORDO_ACCESS_READ}, {z, ORDO_ACCESS_WRITE}};
    assert_ok(ordo_tracker_submit_host(tracker, b, xz, 2, count_run, &later));
    ordo_access_t rz = {z, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit_host(tracker, c, &rz, 1, count_run, &later));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&later), 2);

    atomic_store(&f.fail, 1);
    ordo_status_t st = ordo_graph_replay(graph);
    if (launch) {
        assert_int_equal(st, ORDO_ERR_ABORTED);
        if (!strstr(ordo_error_message(), "ordo_graph_replay") ||
            !strstr(ordo_error_message(), "launch refused on purpose")) {
            fail_msg("the replay's message \"%s\" does not carry the launch's",
                     ordo_error_message());
        }
    } else if (st != ORDO_OK && st != ORDO_ERR_ABORTED) {
        /* The task may fail its stream before the replay has enqueued the
         * stream's later ops, which are then refused with its failure. */
        fail_msg("the replay returned %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    /* Every stream fails; none hangs. */
    assert_status(ordo_stream_synchronize(a, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(b, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(c, test_deadline()), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&later), 2);
    /* A replay on a failed stream enqueues nothing. */
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_status(ordo_graph_replay(graph), ORDO_ERR_ABORTED);
    ordo_graph_info_t again;
    assert_ok(ordo_graph_info(graph, &again));
    assert_int_equal(again.replays, info.replays);
    assert_status(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_ABORTED);

    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(x, NULL, NULL));
    assert_ok(ordo_buffer_release(z, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_stream_destroy(c));
}

/* A replay that could not enqueue all its work (its thread out of memory
 * at the k-th allocation, k swept, with replays piling up behind a gate so
 * that the streams need new operations) spends the graph: every later
 * replay is refused with ORDO_ERR_UNAVAILABLE and why, not with the failure
 * it left on its streams, and enqueues nothing. */
static void a_replay_short_of_memory_spends_the_graph(void **state) {
    (void)state;
    int spent = 0;
    for (int k = 0; k < 64 && !spent; ++k) {
        ordo_tracker_t *tracker;
        assert_ok(ordo_tracker_create(device, &tracker));
        ordo_stream_t *s[3] = {stream_make(), stream_make(), stream_make()};
        ordo_buffer_t *x = buffer_make(tracker), *z = buffer_make(tracker);
        assert_ok(ordo_tracker_record_begin(tracker));
        ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
        assert_ok(ordo_tracker_submit_host(tracker, s[0], &wx, 1, noop, NULL));
        ordo_access_t xz[] = {{x, ORDO_ACCESS_READ}, {z, ORDO_ACCESS_WRITE}};
        assert_ok(ordo_tracker_submit_host(tracker, s[1], xz, 2, noop, NULL));
        ordo_access_t rz = {z, ORDO_ACCESS_READ};
        assert_ok(ordo_tracker_submit_host(tracker, s[2], &rz, 1, noop, NULL));
        ordo_graph_t *graph;
        assert_ok(ordo_tracker_record_end(tracker, &graph));
        _Atomic int gate = 0;
        assert_ok(ordo_stream_host_task(s[0], wait_gate, &gate));
        allocations_before_refusal = k;
        ordo_status_t st = ORDO_OK;
        for (int r = 0; r < 300 && st == ORDO_OK; ++r) {
            st = ordo_graph_replay(graph);
        }
        allocations_before_refusal = -1;
        if (st != ORDO_OK && strstr(ordo_error_message(), "an enqueue was refused")) {
            ++spent;
            ordo_graph_info_t info, again;
            assert_ok(ordo_graph_info(graph, &info));
            for (int r = 0; r < 3; ++r) {
                assert_status(ordo_graph_replay(graph), ORDO_ERR_UNAVAILABLE);
                if (!strstr(ordo_error_message(), "cannot be replayed any more")) {
                    fail_msg("k %d: \"%s\" does not say the graph is spent", k,
                             ordo_error_message());
                }
            }
            assert_ok(ordo_graph_info(graph, &again));
            assert_int_equal(again.replays, info.replays);
        }
        atomic_store(&gate, 1);
        (void)ordo_tracker_synchronize(tracker, test_deadline()); /* failed streams: refused */
        assert_ok(ordo_graph_destroy(graph));
        assert_ok(ordo_buffer_release(x, NULL, NULL));
        assert_ok(ordo_buffer_release(z, NULL, NULL));
        (void)ordo_tracker_drain(tracker, test_deadline());
        assert_ok(ordo_tracker_destroy(tracker));
        for (int i = 0; i < 3; ++i) {
            assert_ok(ordo_stream_destroy(s[i]));
        }
    }
    assert_true(spent > 0); /* some k fell inside a replay's enqueues */
}

/* A stream's capture refused for lack of memory leaves the graph as if it
 * was never made: no lane for that stream, which a replay would then
 * count (and a native graph join) with nothing on it. */
static void a_capture_short_of_memory_leaves_no_lane(void **state) {
    (void)state;
    int refused = 0;
    for (int k = 0; k < 40; ++k) {
        ordo_tracker_t *tracker;
        assert_ok(ordo_tracker_create(device, &tracker));
        ordo_stream_t *a = stream_make(), *b = stream_make();
        ordo_buffer_t *x = buffer_make(tracker), *y = buffer_make(tracker);
        assert_ok(ordo_tracker_record_begin(tracker));
        ordo_access_t rx[] = {{x, ORDO_ACCESS_READ}, {y, ORDO_ACCESS_READ}};
        allocations_before_refusal = k;
        ordo_status_t st = ordo_tracker_submit_host(tracker, b, rx, 2, noop, NULL);
        allocations_before_refusal = -1;
        assert_ok(ordo_tracker_submit_host(tracker, a, rx, 1, noop, NULL));
        ordo_graph_t *graph;
        assert_ok(ordo_tracker_record_end(tracker, &graph));
        ordo_graph_info_t info;
        assert_ok(ordo_graph_info(graph, &info));
        if (st != ORDO_OK) {
            ++refused;
            assert_int_equal(st, ORDO_ERR_OUT_OF_MEMORY);
            assert_int_equal(info.streams, 1);
            assert_int_equal(info.buffers, 1);
        }
        assert_ok(ordo_graph_replay(graph));
        assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
        assert_ok(ordo_graph_destroy(graph));
        assert_ok(ordo_buffer_release(x, NULL, NULL));
        assert_ok(ordo_buffer_release(y, NULL, NULL));
        assert_ok(ordo_tracker_close(tracker, test_deadline()));
        assert_ok(ordo_stream_destroy(a));
        assert_ok(ordo_stream_destroy(b));
        if (st == ORDO_OK) {
            break;
        }
    }
    assert_true(refused > 0);
}

static void failing_task_fails_what_follows(void **state) {
    (void)state;
    failure_propagates(0);
}

static void failing_launch_fails_what_follows(void **state) {
    (void)state;
    failure_propagates(1);
}

/* ---- lifetimes ---------------------------------------------------------- */

static void graph_keeps_its_tracker_and_buffers(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_stream_t *a = stream_make();
    ordo_buffer_t *x = buffer_make(tracker);
    _Atomic uint64_t runs = 0;
    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, a, &wx, 1, count_run, &runs));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_status(ordo_buffer_release(x, NULL, NULL), ORDO_ERR_BUSY);
    check_owner_named("graph");
    /* Replays queued behind a gate outlive the graph's destroy. */
    _Atomic int gate = 0;
    assert_ok(ordo_stream_host_task(a, wait_gate, &gate));
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_graph_replay(graph));
    }
    assert_status(ordo_tracker_destroy(tracker), ORDO_ERR_BUSY); /* x lives */
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(x, NULL, NULL));
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&runs), 3);

    /* A live graph alone keeps the tracker. */
    assert_ok(ordo_tracker_record_begin(tracker));
    assert_ok(ordo_tracker_submit_host(tracker, a, NULL, 0, count_run, &runs));
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_status(ordo_tracker_destroy(tracker), ORDO_ERR_BUSY);
    check_owner_named("graph");
    assert_status(ordo_tracker_close(tracker, test_deadline()), ORDO_ERR_BUSY);
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
}

/* ---- memory pools on a recording tracker ---------------------------------- */

typedef struct pool_fixture {
    ordo_tracker_t *tracker;
    ordo_stream_t *a, *b, *c;
    ordo_mem_resource_t *pool;
} pool_fixture_t;

static void pool_fixture_make(pool_fixture_t *f) {
    assert_ok(ordo_tracker_create(device, &f->tracker));
    f->a = stream_make();
    f->b = stream_make();
    f->c = stream_make();
    ordo_mem_resource_t *upstream;
    assert_ok(ordo_device_memory(device, &upstream));
    assert_ok(ordo_mem_pool_create(f->tracker, upstream, NULL, &f->pool));
}

static void pool_fixture_free(pool_fixture_t *f) {
    assert_ok(ordo_mem_reap_pending(f->pool, test_deadline()));
    uint64_t outstanding = 1;
    assert_ok(ordo_mem_bytes_outstanding(f->pool, &outstanding));
    assert_int_equal(outstanding, 0);
    assert_ok(ordo_mem_resource_destroy(f->pool));
    assert_ok(ordo_tracker_close(f->tracker, test_deadline()));
    assert_ok(ordo_stream_destroy(f->a));
    assert_ok(ordo_stream_destroy(f->b));
    assert_ok(ordo_stream_destroy(f->c));
}

static ordo_buffer_t *block_buffer(ordo_block_t *block) {
    ordo_buffer_t *buffer = NULL;
    assert_ok(ordo_block_buffer(block, &buffer));
    return buffer;
}

/* A temporary between two streams (the step's scratch): written on a,
 * read on b into an output. */
typedef struct scratch_step {
    uint64_t *temp; /* the graph's block */
    uint64_t *out;
    uint64_t step;
} scratch_step_t;

static ordo_status_t scratch_write(void *ctx) {
    scratch_step_t *s = ctx;
    ++s->step;
    for (int i = 0; i < 32; ++i) {
        s->temp[i] = s->step * 1000 + (uint64_t)i;
    }
    return ORDO_OK;
}

static ordo_status_t scratch_read(void *ctx) {
    scratch_step_t *s = ctx;
    uint64_t sum = 0;
    for (int i = 0; i < 32; ++i) {
        sum += s->temp[i];
    }
    *s->out += sum;
    return ORDO_OK;
}

/* What a launch function called at a replay tries on its tracker. */
typedef struct in_replay {
    ordo_tracker_t *tracker;
    ordo_graph_t *self, *other;
    ordo_buffer_t *bound, *own, *plain;
    ordo_status_t rebind, destroy, refresh, submit, release, replay, record, set_context;
    int calls;
} in_replay_t;

static ordo_status_t try_from_replay(void *ctx, ordo_stream_t *stream) {
    in_replay_t *t = ctx;
    if (!t->self) {
        return ORDO_OK; /* the recording's own call */
    }
    t->calls++;
    t->rebind = ordo_graph_rebind(t->other, t->bound, t->own);
    t->destroy = ordo_graph_destroy(t->self);
    t->refresh = ordo_graph_refresh(t->other);
    t->set_context = ordo_graph_set_task_context(t->other, 0, NULL);
    ordo_access_t w = {t->plain, ORDO_ACCESS_WRITE};
    t->submit = ordo_tracker_submit_host(t->tracker, stream, &w, 1, noop, NULL);
    t->release = ordo_buffer_release(t->plain, NULL, NULL);
    t->replay = ordo_graph_replay(t->other);
    /* A recording would capture its submissions, not refuse them. */
    t->record = ordo_tracker_record_begin(t->tracker);
    return ORDO_OK;
}

/* A launch function called at a replay cannot submit on the tracker nor
 * change its graphs: the replay's entry has prepared its lanes, its exit
 * writes the histories, and its own blocks read live meanwhile (bound to
 * another graph then, one would be freed under it). */
static void launch_functions_of_a_replay_cannot_change_the_tracker(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f);
    in_replay_t t = {0};
    t.tracker = f.tracker;
    t.plain = buffer_make(f.tracker);
    ordo_block_t *kept;
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.a, 0, &kept, NULL));
    t.bound = block_buffer(kept);
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_access_t wk = {t.bound, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.a, &wk, 1, noop, NULL));
    assert_ok(ordo_tracker_record_end(f.tracker, &t.other));
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_block_t *own;
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.a, 0, &own, NULL));
    t.own = block_buffer(own);
    ordo_access_t wo = {t.own, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f.tracker, f.a, &wo, 1, try_from_replay, &t));
    assert_ok(ordo_mem_deallocate(f.pool, own, f.a)); /* the graph's own memory */
    assert_ok(ordo_tracker_record_end(f.tracker, &t.self));
    assert_ok(ordo_graph_replay(t.self));
    assert_int_equal(t.calls, 1);
    assert_int_equal(t.rebind, ORDO_ERR_BUSY);
    assert_int_equal(t.destroy, ORDO_ERR_BUSY);
    assert_int_equal(t.refresh, ORDO_ERR_BUSY);
    assert_int_equal(t.set_context, ORDO_ERR_BUSY);
    assert_int_equal(t.submit, ORDO_ERR_BUSY);
    assert_int_equal(t.release, ORDO_ERR_BUSY);
    assert_int_equal(t.replay, ORDO_ERR_BUSY);
    assert_int_equal(t.record, ORDO_ERR_BUSY);
    /* Between replays all of them are taken again. */
    assert_ok(ordo_tracker_synchronize(f.tracker, test_deadline()));
    assert_ok(ordo_graph_destroy(t.self));
    assert_ok(ordo_graph_replay(t.other));
    assert_ok(ordo_tracker_synchronize(f.tracker, test_deadline()));
    assert_ok(ordo_graph_destroy(t.other));
    assert_ok(ordo_buffer_release(t.plain, NULL, NULL));
    assert_ok(ordo_mem_deallocate(f.pool, kept, f.a));
    pool_fixture_free(&f);
}

static void pool_blocks_freed_in_the_recording_are_the_graphs(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f);
    ordo_buffer_t *out = buffer_make(f.tracker);
    uint64_t out_value = 0;
    scratch_step_t step = {NULL, &out_value, 0};

    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_block_t *temp;
    void *ptr;
    assert_ok(ordo_mem_allocate(f.pool, 32 * sizeof(uint64_t), 0, f.a, 0, &temp, &ptr));
    step.temp = ptr;
    ordo_buffer_t *temp_buffer = block_buffer(temp);
    ordo_access_t w = {temp_buffer, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.a, &w, 1, scratch_write, &step));
    ordo_access_t r[] = {{temp_buffer, ORDO_ACCESS_READ}, {out, ORDO_ACCESS_READ_WRITE}};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.b, r, 2, scratch_read, &step));
    assert_ok(ordo_mem_deallocate(f.pool, temp, f.b));
    /* Freed: the recording refuses it as a freed block's buffer. */
    assert_status(ordo_tracker_submit_host(f.tracker, f.a, &w, 1, noop, NULL), ORDO_ERR_DESTROYED);
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(f.tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.memory_bytes, 32 * sizeof(uint64_t));
    assert_int_equal(info.buffers, 2);
    /* The caller's handle ended; the graph holds the memory. */
    assert_status(ordo_mem_deallocate(f.pool, temp, f.a), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_graph_rebind(graph, temp_buffer, out), ORDO_ERR_INVALID_ARGUMENT);
    uint64_t outstanding = 0;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &outstanding));
    assert_int_equal(outstanding, 32 * sizeof(uint64_t));

    /* Every replay uses the same memory, ordered across replays (the next
     * write on a waits for the last read on b). */
    const uint64_t replays = test_device_scaled(200);
    uint64_t expected = 0;
    for (uint64_t k = 1; k <= replays; ++k) {
        assert_ok(ordo_graph_replay(graph));
        expected += k * 1000 * 32 + 31 * 32 / 2;
    }
    assert_ok(ordo_tracker_synchronize(f.tracker, test_deadline()));
    assert_int_equal(out_value, expected);

    /* Destroyed with a replay held back: the memory goes back to the pool
     * behind the replay's uses, and a new block of it on c waits. */
    _Atomic int gate = 0;
    assert_ok(ordo_stream_host_task(f.b, wait_gate, &gate));
    assert_ok(ordo_graph_replay(graph));
    expected += (replays + 1) * 1000 * 32 + 31 * 32 / 2;
    assert_ok(ordo_graph_destroy(graph));
    ordo_block_t *again;
    void *again_ptr;
    assert_ok(ordo_mem_allocate(f.pool, 32 * sizeof(uint64_t), 0, f.c, 0, &again, &again_ptr));
    if (again_ptr == ptr) {
        assert_ok(ordo_stream_host_task(f.c, noop, NULL));
        assert_held(f.c);
    }
    atomic_store(&gate, 1);
    assert_ok(ordo_tracker_synchronize(f.tracker, test_deadline()));
    assert_int_equal(out_value, expected);
    assert_ok(ordo_mem_deallocate(f.pool, again, f.c));
    assert_ok(ordo_buffer_release(out, NULL, NULL));
    pool_fixture_free(&f);
}

static void pool_blocks_and_recordings(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f);
    ordo_block_t *before, *kept, *same, *other;
    assert_ok(ordo_mem_allocate(f.pool, 256, 0, f.a, 0, &before, NULL));
    assert_ok(ordo_mem_allocate(f.pool, 256, 0, f.a, 0, &same, NULL));
    assert_ok(ordo_mem_allocate(f.pool, 512, 0, f.a, 0, &other, NULL));

    /* A block allocated in a recording and not freed in it stays the
     * caller's; a graph that names it keeps it from being freed. */
    assert_ok(ordo_tracker_record_begin(f.tracker));
    assert_ok(ordo_mem_allocate(f.pool, 256, 0, f.a, 0, &kept, NULL));
    ordo_access_t w[] = {{block_buffer(kept), ORDO_ACCESS_WRITE},
                         {block_buffer(before), ORDO_ACCESS_READ}};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.b, w, 2, noop, NULL));
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(f.tracker, &graph));
    assert_ok(ordo_graph_info(graph, &(ordo_graph_info_t){0}));
    assert_status(ordo_mem_deallocate(f.pool, kept, f.a), ORDO_ERR_BUSY);
    check_owner_named("graph");
    assert_status(ordo_mem_deallocate(f.pool, before, f.a), ORDO_ERR_BUSY);
    assert_ok(ordo_graph_replay(graph));
    /* Blocks are rebound to blocks of the same size only. */
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_rebind, graph, block_buffer(before),
            block_buffer(other));
    ordo_buffer_t *plain = buffer_make(f.tracker);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_rebind, graph, block_buffer(before), plain);
    assert_ok(ordo_graph_rebind(graph, block_buffer(before), block_buffer(same)));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_mem_deallocate(f.pool, before, f.a)); /* bound no more */
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_mem_deallocate(f.pool, kept, f.a));

    /* Freeing a block from before the recording fails it; so do the uses
     * and reaping. A block freed in a failed recording goes back. */
    ordo_block_t *temp = NULL;
    assert_ok(ordo_tracker_record_begin(f.tracker));
    assert_ok(ordo_mem_allocate(f.pool, 256, 0, f.a, 0, &temp, NULL));
    assert_ok(ordo_mem_deallocate(f.pool, temp, f.a));
    assert_status(ordo_mem_deallocate(f.pool, same, f.a), ORDO_ERR_BUSY);
    assert_status(ordo_mem_prepare_use(f.pool, same, f.a, ORDO_ACCESS_READ), ORDO_ERR_BUSY);
    assert_status(ordo_mem_record_use(f.pool, same, f.a), ORDO_ERR_BUSY);
    assert_status(ordo_mem_reap_pending(f.pool, test_deadline()), ORDO_ERR_BUSY);
    ordo_graph_t *refused;
    assert_status(ordo_tracker_record_end(f.tracker, &refused), ORDO_ERR_BUSY);
    if (!strstr(ordo_error_message(), "ordo_mem_deallocate")) {
        fail_msg("\"%s\" does not name the refused ordo_mem_deallocate", ordo_error_message());
    }
    assert_ok(ordo_mem_deallocate(f.pool, same, f.a));
    assert_ok(ordo_mem_deallocate(f.pool, other, f.a));
    assert_ok(ordo_buffer_release(plain, NULL, NULL));
    pool_fixture_free(&f);
}

/* A block a graph is bound to is refused to a free in a recording too
 * (another graph rebound to a block the recording allocated). Through a
 * guard, a free in a recording goes to the recording at once (the graph
 * holds the memory, which the guard neither poisons nor holds), and a
 * release out of the guard's quarantine meanwhile waits for the
 * recording's end instead of failing it. */
static void bound_and_guarded_blocks_and_recordings(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f);
    ordo_block_t *x, *y;
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.a, 0, &x, NULL));
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_access_t wx = {block_buffer(x), ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.a, &wx, 1, noop, NULL));
    ordo_graph_t *g1;
    assert_ok(ordo_tracker_record_end(f.tracker, &g1));
    assert_ok(ordo_tracker_record_begin(f.tracker));
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.a, 0, &y, NULL));
    assert_ok(ordo_graph_rebind(g1, block_buffer(x), block_buffer(y)));
    assert_status(ordo_mem_deallocate(f.pool, y, f.a), ORDO_ERR_BUSY);
    check_owner_named("graph");
    ordo_graph_t *g2;
    assert_ok(ordo_tracker_record_end(f.tracker, &g2)); /* the refusal left it whole */
    assert_ok(ordo_graph_replay(g1));
    assert_ok(ordo_graph_rebind(g1, block_buffer(y), block_buffer(x)));
    assert_ok(ordo_mem_deallocate(f.pool, y, f.a));
    assert_ok(ordo_graph_destroy(g2));
    assert_ok(ordo_graph_destroy(g1));
    assert_ok(ordo_mem_deallocate(f.pool, x, f.a));

    ordo_mem_guard_config_t config;
    assert_ok(ordo_mem_guard_config_default(&config));
    config.quarantine_blocks = 0; /* every block leaves at its free point */
    ordo_mem_resource_t *guard;
    ordo_status_t made = ordo_mem_guard_create(f.pool, &config, &guard);
    if (made == ORDO_ERR_UNSUPPORTED) { /* device memory the host cannot read */
        fprintf(stderr, "  the guard's part skipped: %s\n", ordo_error_message());
        pool_fixture_free(&f);
        return;
    }
    assert_ok(made);

    /* A block a graph is bound to: its free through the guard is refused
     * at once, not quarantined (the replays use its memory). */
    ordo_block_t *bound;
    assert_ok(ordo_mem_allocate(guard, 64, 0, f.a, 0, &bound, NULL));
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_access_t wb = {block_buffer(bound), ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.a, &wb, 1, noop, NULL));
    assert_ok(ordo_tracker_record_end(f.tracker, &g1));
    assert_status(ordo_mem_deallocate(guard, bound, f.a), ORDO_ERR_BUSY);
    check_owner_named("graph");
    /* Named by the caller's handle, not the pool's block below the guard. */
    char handle[64];
    snprintf(handle, sizeof handle, "ordo_mem_deallocate: block %p ", (void *)bound);
    if (strncmp(ordo_error_message(), handle, strlen(handle)) != 0) {
        fail_msg("\"%s\" does not begin \"%s\"", ordo_error_message(), handle);
    }
    assert_ok(ordo_graph_replay(g1));
    assert_ok(ordo_graph_destroy(g1));
    /* Its memory goes back to the pool at a later call on the guard, made
     * here, never on f.a's worker (where the pool's free would race this
     * thread's unlocked tracker calls). */
    assert_ok(ordo_mem_deallocate(guard, bound, f.a));

    /* A free in the recording, through the guard: the graph's memory. */
    ordo_buffer_t *out = buffer_make(f.tracker);
    uint64_t out_value = 0;
    scratch_step_t step = {NULL, &out_value, 0};
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_block_t *temp;
    void *ptr;
    assert_ok(ordo_mem_allocate(guard, 32 * sizeof(uint64_t), 0, f.a, 0, &temp, &ptr));
    step.temp = ptr;
    ordo_access_t w = {block_buffer(temp), ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.a, &w, 1, scratch_write, &step));
    ordo_access_t r[] = {{block_buffer(temp), ORDO_ACCESS_READ}, {out, ORDO_ACCESS_READ_WRITE}};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.b, r, 2, scratch_read, &step));
    assert_ok(ordo_mem_deallocate(guard, temp, f.b));
    assert_status(ordo_mem_deallocate(guard, temp, f.b), ORDO_ERR_INVALID_HANDLE);
    ordo_graph_t *graph;
    assert_ok(ordo_tracker_record_end(f.tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_true(info.memory_bytes >= 32 * sizeof(uint64_t)); /* the canaries too */
    uint64_t expected = 0;
    for (uint64_t k = 1; k <= 3; ++k) {
        assert_ok(ordo_graph_replay(graph));
        expected += k * 1000 * 32 + 31 * 32 / 2;
    }
    assert_ok(ordo_tracker_synchronize(f.tracker, test_deadline()));
    assert_int_equal(out_value, expected);
    ordo_mem_guard_report_t report;
    assert_ok(ordo_mem_guard_check(guard, &report)); /* no write after a free */
    assert_int_equal(report.findings[ORDO_MEM_GUARD_USE_AFTER_FREE], 0);
    assert_int_equal(report.total, 1); /* the double free above */
    assert_ok(ordo_graph_destroy(graph));

    /* A block freed before a recording reaches its free point during it:
     * its release waits for the end, and the recording is unharmed. */
    ordo_block_t *early;
    assert_ok(ordo_mem_allocate(guard, 64, 0, f.a, 0, &early, NULL));
    _Atomic int gate = 0;
    assert_ok(ordo_stream_host_task(f.a, wait_gate, &gate));
    assert_ok(ordo_mem_deallocate(guard, early, f.a));
    assert_ok(ordo_tracker_record_begin(f.tracker));
    ordo_access_t wo = {out, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(f.tracker, f.b, &wo, 1, noop, NULL));
    atomic_store(&gate, 1);
    assert_ok(ordo_stream_synchronize(f.a, test_deadline())); /* the free point: released */
    uint64_t outstanding = 0;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &outstanding));
    assert_true(outstanding > 0); /* held by the recording */
    assert_ok(ordo_tracker_record_end(f.tracker, &graph));
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_mem_guard_check(guard, &report));
    assert_int_equal(report.total, 1);
    assert_ok(ordo_mem_reap_pending(guard, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &outstanding));
    assert_int_equal(outstanding, 0);
    assert_ok(ordo_mem_resource_destroy(guard));
    assert_ok(ordo_buffer_release(out, NULL, NULL));
    pool_fixture_free(&f);
}
/* ---- threads ------------------------------------------------------------- */

#define STRESS_THREADS 3
#define STRESS_SHARED 4
#define STRESS_STREAMS 3

typedef struct stress {
    pthread_barrier_t recorded; /* no synchronize may refuse another's recording */
    ordo_tracker_t *tracker;
    ordo_stream_t *streams[STRESS_STREAMS];
    ordo_buffer_t *buffers[STRESS_SHARED];
    uint64_t counts[STRESS_SHARED]; /* plain memory: the tracker orders every access */
    uint64_t rounds;
} stress_t;

typedef struct stress_thread {
    stress_t *s;
    unsigned id;
    uint64_t increments[STRESS_SHARED]; /* per round, what this thread adds */
} stress_thread_t;

typedef struct bump {
    uint64_t *count;
    const uint64_t *read; /* read alongside (another buffer), or NULL */
    uint64_t seen;
} bump_t;

static ordo_status_t bump_run(void *ctx) {
    bump_t *b = ctx;
    if (b->read) {
        b->seen += *b->read;
    }
    ++*b->count;
    return ORDO_OK;
}

/* Records this thread's graph: every task increments one shared buffer
 * (a read-write) and reads another, on the streams in turn. */
static const char *stress_record(stress_thread_t *th, bump_t *tasks, ordo_graph_t **out_graph) {
    stress_t *s = th->s;
    ordo_tracker_lock(s->tracker);
    if (ordo_tracker_record_begin(s->tracker) != ORDO_OK) {
        ordo_tracker_unlock(s->tracker);
        return "record_begin failed";
    }
    for (unsigned i = 0; i < 8; ++i) {
        unsigned w = (th->id + i) % STRESS_SHARED, r = (th->id + 2 * i + 1) % STRESS_SHARED;
        tasks[i] = (bump_t){&s->counts[w], r != w ? &s->counts[r] : NULL, 0};
        ordo_access_t list[] = {{s->buffers[w], ORDO_ACCESS_READ_WRITE},
                                {s->buffers[r], ORDO_ACCESS_READ}};
        if (ordo_tracker_submit_host(s->tracker, s->streams[(th->id + i) % STRESS_STREAMS], list,
                                     r != w ? 2 : 1, bump_run, &tasks[i]) != ORDO_OK) {
            (void)ordo_tracker_record_end(s->tracker, out_graph);
            ordo_tracker_unlock(s->tracker);
            return "a recorded submission failed";
        }
        th->increments[w] += 1;
    }
    ordo_status_t st = ordo_tracker_record_end(s->tracker, out_graph);
    ordo_tracker_unlock(s->tracker);
    return st == ORDO_OK ? NULL : "record_end failed";
}

static void *stress_main(void *arg) {
    stress_thread_t *th = arg;
    stress_t *s = th->s;
    bump_t tasks[8];
    ordo_graph_t *graph = NULL;
    const char *failed = stress_record(th, tasks, &graph);
    pthread_barrier_wait(&s->recorded);
    if (failed) {
        return (void *)failed;
    }
    ordo_status_t st;
    bump_t eager = {&s->counts[th->id % STRESS_SHARED], NULL, 0};
    ordo_access_t eager_access = {s->buffers[th->id % STRESS_SHARED], ORDO_ACCESS_READ_WRITE};
    for (uint64_t round = 0; round < s->rounds; ++round) {
        ordo_tracker_lock(s->tracker);
        st = ordo_graph_replay(graph);
        if (st == ORDO_OK) {
            st = ordo_tracker_submit_host(s->tracker, s->streams[round % STRESS_STREAMS],
                                          &eager_access, 1, bump_run, &eager);
        }
        ordo_tracker_unlock(s->tracker);
        if (st != ORDO_OK) {
            return "a replay or a submission failed";
        }
    }
    /* The contexts live until every stream has run them. */
    if (ordo_tracker_synchronize(s->tracker, test_deadline()) != ORDO_OK) {
        return "synchronize failed";
    }
    ordo_tracker_lock(s->tracker);
    st = ordo_graph_destroy(graph);
    ordo_tracker_unlock(s->tracker);
    return st == ORDO_OK ? NULL : "destroy failed";
}

static void threads_replay_and_submit_under_the_lock(void **state) {
    (void)state;
    stress_t s;
    memset(&s, 0, sizeof s);
    s.rounds = test_device_scaled(2000);
    pthread_barrier_init(&s.recorded, NULL, STRESS_THREADS);
    assert_ok(ordo_tracker_create(device, &s.tracker));
    for (int i = 0; i < STRESS_STREAMS; ++i) {
        s.streams[i] = stream_make();
    }
    for (int i = 0; i < STRESS_SHARED; ++i) {
        s.buffers[i] = buffer_make(s.tracker);
    }
    stress_thread_t threads[STRESS_THREADS];
    pthread_t ids[STRESS_THREADS];
    memset(threads, 0, sizeof threads);
    for (unsigned t = 0; t < STRESS_THREADS; ++t) {
        threads[t].s = &s;
        threads[t].id = t;
        ids[t] = test_thread_start(stress_main, &threads[t]);
    }
    for (unsigned t = 0; t < STRESS_THREADS; ++t) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 60;
        void *result = NULL;
        if (pthread_timedjoin_np(ids[t], &result, &until) != 0) {
            fail_msg("a stress thread did not finish in 60 s");
        }
        if (result) {
            fail_msg("stress thread %u: %s (%s)", t, (const char *)result, ordo_error_message());
        }
    }
    for (unsigned b = 0; b < STRESS_SHARED; ++b) {
        uint64_t expected = 0;
        for (unsigned t = 0; t < STRESS_THREADS; ++t) {
            expected += threads[t].increments[b] * s.rounds;
            expected += (t % STRESS_SHARED == b) ? s.rounds : 0;
        }
        assert_int_equal(s.counts[b], expected);
    }
    for (int i = 0; i < STRESS_SHARED; ++i) {
        assert_ok(ordo_buffer_release(s.buffers[i], NULL, NULL));
    }
    assert_ok(ordo_tracker_close(s.tracker, test_deadline()));
    for (int i = 0; i < STRESS_STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(s.streams[i]));
    }
    pthread_barrier_destroy(&s.recorded);
}

/* ---- bad input ------------------------------------------------------------ */

static void graph_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(f.device, &tracker));
    ordo_buffer_t *x = buffer_make(tracker);
    ordo_graph_t *graph = NULL;
    ordo_graph_info_t info;
    ordo_buffer_t *bound;
    ordo_access_mode_t mode;

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_record_begin, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_record_begin, GARBAGE(ordo_tracker_t));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, graph, ordo_tracker_record_end, NULL, &graph);
    REFUSED_CLEARS(ORDO_ERR_BUSY, graph, ordo_tracker_record_end, tracker, &graph);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_replay, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_replay, GARBAGE(ordo_graph_t));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_replay, AS(ordo_graph_t, tracker));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_destroy, AS(ordo_graph_t, x));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, info, ordo_graph_info, NULL, &info);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, bound, mode, ordo_graph_buffer, NULL, 0, &bound,
                    &mode);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_rebind, NULL, x, x);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_record_begin_native, NULL,
            ORDO_GRAPH_NATIVE_AUTO);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_record_begin_native, tracker,
            (ordo_graph_native_t)3);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_record_begin_native, tracker,
            (ordo_graph_native_t)-1);

    /* The CPU backend has no native graphs: REQUIRE fails at the end,
     * saying so, and AUTO replays op by op, as OFF (the default) does. */
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t write_x = {x, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(tracker, f.s[0], &write_x, 1, launch_noop, NULL));
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, graph, ordo_tracker_record_end, tracker, &graph);
    if (!strstr(ordo_error_message(), "no native graphs")) {
        fail_msg("\"%s\" does not say why", ordo_error_message());
    }
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_AUTO));
    assert_ok(ordo_tracker_submit(tracker, f.s[0], &write_x, 1, launch_noop, NULL));
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 0);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_refresh(graph)); /* nothing to do op by op */
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_destroy(graph));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_refresh, graph);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_refresh, NULL);
    /* An empty recording is an empty graph even under REQUIRE. */
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_destroy(graph));
    graph = NULL;

    /* Recording: bad submissions are refused and not recorded; a NULL
     * output leaves the recording going. */
    assert_ok(ordo_tracker_record_begin(tracker));
    ordo_access_t ok = {x, ORDO_ACCESS_WRITE};
    ordo_access_t bad_mode = {x, (ordo_access_mode_t)9};
    ordo_access_t null_buffer = {NULL, ORDO_ACCESS_READ};
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit_host, tracker, NULL, &ok, 1, noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit_host, tracker, f.foreign, &ok, 1, noop,
            NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit_host, tracker, f.s[0], NULL, 1, noop,
            NULL);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_submit_host, tracker, f.s[0], &ok,
            ORDO_TRACKER_MAX_ACCESSES + 1, noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit_host, tracker, f.s[0], &bad_mode, 1,
            noop, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit_host, tracker, f.s[0], &null_buffer, 1,
            noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit_host, tracker, f.s[0], &ok, 1, NULL,
            NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], &ok, 1, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], &bad_mode, 1,
            launch_noop, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_record_end, tracker, NULL);
    assert_ok(ordo_tracker_submit_host(tracker, f.s[0], &ok, 1, noop, NULL));
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.tasks, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_info, graph, NULL);
    REFUSED_CLEARS2(ORDO_ERR_OUT_OF_RANGE, bound, mode, ordo_graph_buffer, graph, 1, &bound, &mode);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_buffer, graph, 0, NULL, &mode);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_graph_buffer, graph, 0, &bound, NULL);

    /* A destroyed graph: its dead tag is still there to read. */
    assert_ok(ordo_graph_destroy(graph));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_replay, graph);
    if (!strstr(ordo_error_message(), "destroyed")) {
        fail_msg("\"%s\" does not say the graph was destroyed", ordo_error_message());
    }
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_destroy, graph);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, info, ordo_graph_info, graph, &info);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_graph_rebind, graph, x, x);

    assert_ok(ordo_buffer_release(x, NULL, NULL));
    assert_ok(ordo_tracker_close(tracker, test_deadline()));
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
    /* Before any ordo object exists (the allocator cannot change later). */
    const ordo_allocator_t quarantine_hooks = {quarantine_allocate, quarantine_deallocate, NULL};
    if (ordo_allocator_set(&quarantine_hooks) != ORDO_OK) {
        fprintf(stderr, "cannot install the quarantine allocator: %s\n", ordo_error_message());
        return 1;
    }
    test_conformance_begin("graph");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recording_runs_nothing_replays_run_it),
        cmocka_unit_test(a_task_context_set_between_replays),
        cmocka_unit_test(empty_recording_makes_an_empty_graph),
        cmocka_unit_test(replay_equals_eager),
        cmocka_unit_test(replay_is_ordered_against_outside_work),
        cmocka_unit_test(rebind_orders_by_the_new_buffer),
        cmocka_unit_test(recording_refuses_what_cannot_be_replayed),
        cmocka_unit_test(failing_task_fails_what_follows),
        cmocka_unit_test(failing_launch_fails_what_follows),
        cmocka_unit_test(a_replay_short_of_memory_spends_the_graph),
        cmocka_unit_test(a_capture_short_of_memory_leaves_no_lane),
        cmocka_unit_test(launch_functions_of_a_replay_cannot_change_the_tracker),
        cmocka_unit_test(graph_keeps_its_tracker_and_buffers),
        cmocka_unit_test(pool_blocks_freed_in_the_recording_are_the_graphs),
        cmocka_unit_test(pool_blocks_and_recordings),
        cmocka_unit_test(bound_and_guarded_blocks_and_recordings),
        cmocka_unit_test(threads_replay_and_submit_under_the_lock),
        cmocka_unit_test(graph_entry_points_refuse_bad_input),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    size_t live = 0;
    (void)ordo_allocator_live_blocks(&live);
    if (live == 0 && ordo_allocator_set(NULL) == ORDO_OK) {
        quarantine_flush();
    }
    return failed;
}
