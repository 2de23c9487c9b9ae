/* Benchmarks of automatic cross-stream ordering: trackers (ordo_tracker_submit,
 * ordo_tracker_prepare + ordo_tracker_finish; the same submissions recorded
 * once and replayed, ordo/graph.h) against OpenMP task dependences (libgomp
 * with gcc, libomp with clang), StarPU's implicit data dependences and
 * oneTBB's flow graph and task_group (bench_dag_tbb.cpp).
 * Every peer is optional: built only without sanitizers and when found
 * (tools/ordo/CMakeLists.txt); a peer not built or not starting leaves its
 * lines out and says why on stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ordo/buffer.h"
#include "ordo/device.h"
#include "ordo/graph.h"
#include "ordo/stream.h"
#include "ordo/tracker.h"

#ifdef ORDO_BENCH_OPENMP
#include <omp.h>
#endif
#ifdef ORDO_BENCH_STARPU
#include <ftw.h>
#include <starpu.h>
#endif
#ifdef ORDO_BENCH_TBB
#include "bench_dag_tbb.h"
#endif

_Noreturn static void wrong(const char *name, const char *impl) {
    fprintf(stderr, "ordo bench: %s: %s computed a wrong result (tasks ran out of order)\n", name,
            impl);
    exit(1);
}

/* ---- the work ------------------------------------------------------------ */

/* One small buffer: a cache line of its own, so that buffers written by
 * different threads never share one. */
typedef struct dag_slot {
    _Alignas(64) uint64_t v[7];
    uint64_t index;
} dag_slot_t;

/* A task of the chain: step `index` on the chain's one buffer. */
typedef struct chain_ctx {
    dag_slot_t *slot;
    uint64_t index;
} chain_ctx_t;

/* A few instructions whose result depends on the order of the steps: a
 * chain run out of order, or two steps at once, ends with a wrong value. */
static inline void chain_step(uint64_t *v, uint64_t index) {
    v[0] = v[0] * 3 + index;
    v[1] += v[0];
    v[2] ^= v[1] >> 3;
}

static inline void independent_write(uint64_t *v, uint64_t index) {
    v[0] = index + 1;
    v[1] = index * 3;
}

typedef enum dag_shape { DAG_CHAIN, DAG_INDEPENDENT } dag_shape_t;

typedef struct dag_case {
    const char *name;
    dag_shape_t shape;
    unsigned streams; /* the ordo streams the tasks go to in turn */
} dag_case_t;

typedef struct dag_work {
    const dag_case_t *c;
    uint64_t tasks;
    size_t slot_count;    /* chain: 1; independent: one per task */
    dag_slot_t *slots;    /* slot_count buffers */
    chain_ctx_t *chain;   /* chain: one per task */
    uint64_t expected[3]; /* chain: the buffer after every step in order */
} dag_work_t;

static void work_init(dag_work_t *w, const dag_case_t *c, uint64_t tasks) {
    w->c = c;
    w->tasks = tasks;
    w->slot_count = c->shape == DAG_CHAIN ? 1 : (size_t)tasks;
    w->slots = aligned_alloc(64, w->slot_count * sizeof *w->slots);
    w->chain = c->shape == DAG_CHAIN ? malloc((size_t)tasks * sizeof *w->chain) : NULL;
    if (!w->slots || (c->shape == DAG_CHAIN && !w->chain)) {
        bench_fail("out of memory");
    }
    memset(w->slots, 0, w->slot_count * sizeof *w->slots);
    for (size_t i = 0; i < w->slot_count; ++i) {
        w->slots[i].index = i;
    }
    if (c->shape == DAG_CHAIN) {
        uint64_t v[7] = {0};
        for (uint64_t i = 0; i < tasks; ++i) {
            w->chain[i] = (chain_ctx_t){&w->slots[0], i};
            chain_step(v, i);
        }
        memcpy(w->expected, v, sizeof w->expected);
    }
}

static void work_fini(dag_work_t *w) {
    free(w->slots);
    free(w->chain);
}

static void work_reset(dag_work_t *w) {
    for (size_t i = 0; i < w->slot_count; ++i) {
        memset(w->slots[i].v, 0, sizeof w->slots[i].v);
    }
}

static void work_check(const dag_work_t *w, const char *impl) {
    if (w->c->shape == DAG_CHAIN) {
        if (memcmp(w->slots[0].v, w->expected, sizeof w->expected) != 0) {
            wrong(w->c->name, impl);
        }
        return;
    }
    for (size_t i = 0; i < w->slot_count; ++i) {
        if (w->slots[i].v[0] != i + 1 || w->slots[i].v[1] != i * 3) {
            wrong(w->c->name, impl);
        }
    }
}

/* ---- ordo ---------------------------------------------------------------- */

typedef struct dag_ordo {
    ordo_tracker_t *tracker;
    ordo_stream_t *streams[2];
    unsigned stream_count;
    ordo_buffer_t **buffers;         /* one per slot */
    ordo_tracker_metrics_t measured; /* summed over the measured samples */
} dag_ordo_t;

static void metrics_add(ordo_tracker_metrics_t *sum, const ordo_tracker_metrics_t *before,
                        const ordo_tracker_metrics_t *after) {
    sum->submissions += after->submissions - before->submissions;
    sum->waits_emitted += after->waits_emitted - before->waits_emitted;
    sum->waits_elided += after->waits_elided - before->waits_elided;
    sum->points_recorded += after->points_recorded - before->points_recorded;
}

/* The tracker's counters over the measured samples, on a line of their
 * own: impl "ordo_metrics", with the timing of the ordo line it explains
 * (so every line has the fields every line has). */
static void emit_metrics(const char *name, const bench_stats_t *ordo,
                         const ordo_tracker_metrics_t *m) {
    printf("{\"name\":\"%s\",\"impl\":\"ordo_metrics\",\"median_ns\":%.2f,\"p90_ns\":%.2f,"
           "\"iters\":%llu,\"submissions\":%llu,\"waits_emitted\":%llu,\"waits_elided\":%llu,"
           "\"points_recorded\":%llu}\n",
           name, ordo->median_ns, ordo->p90_ns, (unsigned long long)ordo->iters,
           (unsigned long long)m->submissions, (unsigned long long)m->waits_emitted,
           (unsigned long long)m->waits_elided, (unsigned long long)m->points_recorded);
    fflush(stdout);
}

/* Where the streams' workers run (a worker inherits the CPU of the thread
 * that creates its stream); the submitter always runs on CPU slot 0.
 *
 * LAYOUT_SUBMITTER_ALONE: every worker on slot 1, so the submitter keeps a
 * CPU of its own, as in stream_task_chain. The `ordo` line of one-stream
 * benchmarks, the `ordo_one_cpu` line of two-stream ones (both workers
 * then share one CPU, and every hand-over between them is a switch).
 *
 * LAYOUT_SPREAD: the last stream's worker on slot 0 with the submitter,
 * the others alternating back from slot 1. The `ordo` line of two-stream
 * benchmarks (stream 0's worker on slot 1, stream 1's on slot 0: one
 * worker per CPU as the peers' two threads are bound); the
 * `ordo_same_cpu` line of one-stream ones (the worker shares the
 * submitter's CPU, so no queue line crosses cores: the submitter fills
 * the queue until it waits, then the worker runs it). */
typedef enum dag_layout { LAYOUT_SUBMITTER_ALONE, LAYOUT_SPREAD, LAYOUT_COUNT } dag_layout_t;

static const char *layout_impl(dag_layout_t layout, unsigned streams) {
    if (streams == 1) {
        return layout == LAYOUT_SPREAD ? "ordo_same_cpu" : "ordo";
    }
    return layout == LAYOUT_SPREAD ? "ordo" : "ordo_one_cpu";
}

static void streams_create(ordo_device_t *device, ordo_stream_t **streams, unsigned count,
                           dag_layout_t layout) {
    for (unsigned k = 0; k < count; ++k) {
        bench_pin(layout == LAYOUT_SPREAD && (count - 1 - k) % 2 == 0 ? 0 : 1);
        if (ordo_stream_create(device, 0, &streams[k]) != ORDO_OK) {
            bench_fail("cannot create a stream");
        }
    }
    bench_pin(0);
}

static void streams_synchronize(ordo_stream_t **streams, unsigned count) {
    for (unsigned k = 0; k < count; ++k) {
        if (ordo_stream_synchronize(streams[k], ordo_deadline_after_ms(300000)) != ORDO_OK) {
            bench_fail("synchronize failed");
        }
    }
}

static void ordo_setup(dag_ordo_t *o, ordo_device_t *device, const dag_work_t *w,
                       dag_layout_t layout) {
    memset(o, 0, sizeof *o);
    o->stream_count = w->c->streams;
    streams_create(device, o->streams, o->stream_count, layout);
    if (ordo_tracker_create(device, &o->tracker) != ORDO_OK) {
        bench_fail("cannot create a tracker");
    }
    o->buffers = malloc(w->slot_count * sizeof *o->buffers);
    if (!o->buffers) {
        bench_fail("out of memory");
    }
    for (size_t i = 0; i < w->slot_count; ++i) {
        if (ordo_buffer_create(o->tracker, &o->buffers[i]) != ORDO_OK) {
            bench_fail("cannot create a buffer");
        }
    }
}

static void tracker_teardown(ordo_tracker_t *tracker, ordo_buffer_t **buffers, size_t count,
                             ordo_stream_t **streams, unsigned stream_count) {
    for (size_t i = 0; i < count; ++i) {
        if (ordo_buffer_release(buffers[i], NULL, NULL) != ORDO_OK) {
            bench_fail("cannot release a buffer");
        }
    }
    if (ordo_tracker_drain(tracker, ordo_deadline_after_ms(300000)) != ORDO_OK ||
        ordo_tracker_destroy(tracker) != ORDO_OK) {
        bench_fail("cannot destroy the tracker");
    }
    for (unsigned k = 0; k < stream_count; ++k) {
        ordo_stream_destroy(streams[k]);
    }
}

static ordo_status_t chain_task(void *ctx) {
    const chain_ctx_t *c = ctx;
    chain_step(c->slot->v, c->index);
    return ORDO_OK;
}

static ordo_status_t launch_chain(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, chain_task, ctx);
}

static ordo_status_t independent_task(void *ctx) {
    dag_slot_t *slot = ctx;
    independent_write(slot->v, slot->index);
    return ORDO_OK;
}

static ordo_status_t launch_independent(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, independent_task, ctx);
}

/* Per task: every submission, then until every stream has run its work. */
static double ordo_sample(dag_ordo_t *o, dag_work_t *w) {
    bench_pin(0);
    work_reset(w);
    ordo_tracker_metrics_t before;
    ordo_tracker_metrics_t after;
    ordo_tracker_metrics(o->tracker, &before);
    const unsigned n = o->stream_count;
    uint64_t t0 = bench_now_ns();
    if (w->c->shape == DAG_CHAIN) {
        const ordo_access_t access = {o->buffers[0], ORDO_ACCESS_READ_WRITE};
        for (uint64_t i = 0; i < w->tasks; ++i) {
            if (ordo_tracker_submit(o->tracker, o->streams[i % n], &access, 1, launch_chain,
                                    &w->chain[i]) != ORDO_OK) {
                bench_fail("submission refused");
            }
        }
    } else {
        for (uint64_t i = 0; i < w->tasks; ++i) {
            const ordo_access_t access = {o->buffers[i], ORDO_ACCESS_WRITE};
            if (ordo_tracker_submit(o->tracker, o->streams[i % n], &access, 1, launch_independent,
                                    &w->slots[i]) != ORDO_OK) {
                bench_fail("submission refused");
            }
        }
    }
    streams_synchronize(o->streams, n);
    double per_task = (double)(bench_now_ns() - t0) / (double)w->tasks;
    ordo_tracker_metrics(o->tracker, &after);
    metrics_add(&o->measured, &before, &after);
    work_check(w, "ordo");
    return per_task;
}

/* ---- ordo_replay: the same submissions, recorded once -------------------- */

/* Records one sample's submissions on o's tracker, as host tasks (the
 * tasks the ordo line's launch functions enqueue): the graph replays
 * them with the waits the recording found, no analysis per task. */
static ordo_graph_t *replay_record(dag_ordo_t *o, dag_work_t *w) {
    const unsigned n = o->stream_count;
    ordo_graph_t *graph = NULL;
    int ok = ordo_tracker_record_begin(o->tracker) == ORDO_OK;
    for (uint64_t i = 0; ok && i < w->tasks; ++i) {
        if (w->c->shape == DAG_CHAIN) {
            const ordo_access_t access = {o->buffers[0], ORDO_ACCESS_READ_WRITE};
            ok = ordo_tracker_submit_host(o->tracker, o->streams[i % n], &access, 1, chain_task,
                                          &w->chain[i]) == ORDO_OK;
        } else {
            const ordo_access_t access = {o->buffers[i], ORDO_ACCESS_WRITE};
            ok = ordo_tracker_submit_host(o->tracker, o->streams[i % n], &access, 1,
                                          independent_task, &w->slots[i]) == ORDO_OK;
        }
    }
    if (ordo_tracker_record_end(o->tracker, &graph) != ORDO_OK || !ok) {
        bench_fail("cannot record the graph");
    }
    return graph;
}

/* Per task: the replay, then until every stream has run its work. */
static double replay_sample(dag_ordo_t *o, ordo_graph_t *graph, dag_work_t *w) {
    bench_pin(0);
    work_reset(w);
    uint64_t t0 = bench_now_ns();
    if (ordo_graph_replay(graph) != ORDO_OK) {
        bench_fail("replay refused");
    }
    streams_synchronize(o->streams, o->stream_count);
    double per_task = (double)(bench_now_ns() - t0) / (double)w->tasks;
    work_check(w, "ordo_replay");
    return per_task;
}

/* ---- the peers --------------------------------------------------------- */

/* oneTBB gives three lines: a flow graph built beforehand (tbb_flow) or in
 * the timed region (tbb_flow_build), and a task_group (tbb_task_group). */
enum {
    PEER_OPENMP,
    PEER_STARPU,
    PEER_TBB_FLOW,
    PEER_TBB_FLOW_BUILD,
    PEER_TBB_TASK_GROUP,
    PEER_COUNT
};

static const char *const peer_names[PEER_COUNT] = {"openmp", "starpu", "tbb_flow", "tbb_flow_build",
                                                   "tbb_task_group"};

#if defined(ORDO_BENCH_TBB)
#define TBB_PEER_MISSING NULL
#elif defined(ORDO_BENCH_TBB_MISSING)
#define TBB_PEER_MISSING ORDO_BENCH_TBB_MISSING
#else
#define TBB_PEER_MISSING "not built"
#endif

/* Why a peer's lines are left out; NULL while it may run. */
static const char *peer_missing[PEER_COUNT] = {
#if defined(ORDO_BENCH_OPENMP)
    NULL,
#elif defined(ORDO_BENCH_OPENMP_MISSING)
    ORDO_BENCH_OPENMP_MISSING,
#else
    "not built",
#endif
#if defined(ORDO_BENCH_STARPU)
    NULL,
#elif defined(ORDO_BENCH_STARPU_MISSING)
    ORDO_BENCH_STARPU_MISSING,
#else
    "not built",
#endif
    TBB_PEER_MISSING,
    TBB_PEER_MISSING,
    TBB_PEER_MISSING,
};

/* A task_group has no edges: it runs the independent tasks only. */
static int peer_fits(int peer, const dag_case_t *c) {
    return peer != PEER_TBB_TASK_GROUP || c->shape == DAG_INDEPENDENT;
}

#ifdef ORDO_BENCH_OPENMP
/* A team of two threads, one per CPU slot: one creates the tasks (and
 * runs some while it waits), both run them. Per task: from the first
 * task's creation until every task has run. */
static double openmp_sample(dag_work_t *w) {
    work_reset(w);
    double per_task = 0;
    const uint64_t tasks = w->tasks;
    dag_slot_t *slots = w->slots;
    uint64_t *chain = slots[0].v;
#pragma omp parallel num_threads(2) default(none) shared(per_task, slots, chain, w)                \
    firstprivate(tasks)
    {
        bench_pin(omp_get_thread_num());
#pragma omp barrier
#pragma omp single
        {
            uint64_t t0 = bench_now_ns();
            if (w->c->shape == DAG_CHAIN) {
                for (uint64_t i = 0; i < tasks; ++i) {
#pragma omp task default(none) firstprivate(i) shared(chain) depend(inout : chain[0])
                    chain_step(chain, i);
                }
            } else {
                for (uint64_t i = 0; i < tasks; ++i) {
                    dag_slot_t *slot = &slots[i];
#pragma omp task default(none) firstprivate(slot) depend(out : slot->v[0])
                    independent_write(slot->v, slot->index);
                }
            }
#pragma omp taskwait
            per_task = (double)(bench_now_ns() - t0) / (double)tasks;
        }
    }
    bench_pin(0);
    work_check(w, "openmp");
    return per_task;
}
#endif

#ifdef ORDO_BENCH_STARPU
/* StarPU runs once per `ordo bench` (starting it takes long), with
 * STARPU_HOME in a fresh temporary directory removed at the end, two CPU
 * workers, no CUDA or OpenCL, quiet. Paused (its idle workers otherwise
 * poll in a tight loop) except during its own samples. */
static int starpu_state; /* 0: not started, 1: running, -1: failed */
static char starpu_home[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void starpu_home_remove(void) {
    if (starpu_home[0]) {
        nftw(starpu_home, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        starpu_home[0] = '\0';
    }
}

static int starpu_start(void) {
    if (starpu_state) {
        return starpu_state > 0;
    }
    starpu_state = -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(starpu_home, sizeof starpu_home, "%s/ordo-bench-starpu-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(starpu_home)) {
        starpu_home[0] = '\0';
        peer_missing[PEER_STARPU] = "cannot make a temporary STARPU_HOME";
        return 0;
    }
    setenv("STARPU_HOME", starpu_home, 1);
    setenv("STARPU_SILENT", "1", 1);
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = 2;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.precedence_over_environment_variables = 1;
    /* Workers bind themselves; they must not inherit a pinned creator. */
    bench_unpin();
    int rc = starpu_init(&conf);
    bench_pin(0);
    if (rc != 0) {
        starpu_home_remove();
        peer_missing[PEER_STARPU] = "starpu_init failed";
        return 0;
    }
    starpu_pause();
    starpu_state = 1;
    return 1;
}

static void starpu_stop(void) {
    if (starpu_state > 0) {
        starpu_resume();
        starpu_shutdown();
        starpu_home_remove();
    }
    starpu_state = 0;
}

static void starpu_chain_task(void *buffers[], void *cl_arg) {
    const chain_ctx_t *c = cl_arg;
    chain_step((uint64_t *)STARPU_VECTOR_GET_PTR(buffers[0]), c->index);
}

static void starpu_independent_task(void *buffers[], void *cl_arg) {
    const dag_slot_t *slot = cl_arg;
    independent_write((uint64_t *)STARPU_VECTOR_GET_PTR(buffers[0]), slot->index);
}

static struct starpu_codelet starpu_chain_codelet = {
    .where = STARPU_CPU,
    .cpu_funcs = {starpu_chain_task},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "ordo_dag_chain",
};

static struct starpu_codelet starpu_independent_codelet = {
    .where = STARPU_CPU,
    .cpu_funcs = {starpu_independent_task},
    .nbuffers = 1,
    .modes = {STARPU_W},
    .name = "ordo_dag_independent",
};

/* One registered handle per slot (registration is set-up, not timed, as
 * ordo's buffer creation is not). */
static starpu_data_handle_t *starpu_register(dag_work_t *w) {
    starpu_data_handle_t *handles = malloc(w->slot_count * sizeof *handles);
    if (!handles) {
        bench_fail("out of memory");
    }
    for (size_t i = 0; i < w->slot_count; ++i) {
        starpu_vector_data_register(&handles[i], STARPU_MAIN_RAM, (uintptr_t)w->slots[i].v,
                                    sizeof w->slots[i].v / sizeof w->slots[i].v[0],
                                    sizeof w->slots[i].v[0]);
    }
    return handles;
}

static void starpu_unregister(dag_work_t *w, starpu_data_handle_t *handles) {
    starpu_resume();
    for (size_t i = 0; i < w->slot_count; ++i) {
        starpu_data_unregister(handles[i]);
    }
    starpu_pause();
    free(handles);
}

/* Per task: from the first task's submission until every task has run.
 * The buffers live in main memory only, where StarPU's CPU workers use
 * them in place, so they are reset and checked directly between samples
 * (nothing is in flight then). */
static double starpu_sample(dag_work_t *w, starpu_data_handle_t *handles) {
    work_reset(w);
    bench_pin(0);
    starpu_resume();
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < w->tasks; ++i) {
        struct starpu_task *task = starpu_task_create();
        if (!task) {
            fprintf(stderr, "ordo bench: starpu_task_create failed\n");
            exit(1);
        }
        if (w->c->shape == DAG_CHAIN) {
            task->cl = &starpu_chain_codelet;
            task->handles[0] = handles[0];
            task->cl_arg = &w->chain[i];
        } else {
            task->cl = &starpu_independent_codelet;
            task->handles[0] = handles[i];
            task->cl_arg = &w->slots[i];
        }
        if (starpu_task_submit(task) != 0) {
            fprintf(stderr, "ordo bench: starpu_task_submit failed\n");
            exit(1);
        }
    }
    starpu_task_wait_for_all();
    double per_task = (double)(bench_now_ns() - t0) / (double)w->tasks;
    starpu_pause();
    work_check(w, "starpu");
    return per_task;
}
#endif

#ifdef ORDO_BENCH_TBB
/* oneTBB starts once per `ordo bench`, with two threads as OpenMP's team:
 * the submitting thread (CPU slot 0), which runs tasks while it waits,
 * and one worker (slot 1). */
static int tbb_state; /* 0: not started, 1: running, -1: failed */

static void tbb_worker_entry(void) {
    bench_pin(1);
}

static void tbb_start(void) {
    if (tbb_state) {
        return;
    }
    /* Workers must not inherit a pinned creator. */
    bench_unpin();
    int rc = bench_tbb_start(2, tbb_worker_entry);
    bench_pin(0);
    tbb_state = rc == 0 ? 1 : -1;
    if (rc != 0) {
        peer_missing[PEER_TBB_FLOW] = "oneTBB failed to start";
        peer_missing[PEER_TBB_FLOW_BUILD] = peer_missing[PEER_TBB_FLOW];
        peer_missing[PEER_TBB_TASK_GROUP] = peer_missing[PEER_TBB_FLOW];
    }
}

static void tbb_stop(void) {
    if (tbb_state > 0) {
        bench_tbb_stop();
    }
    tbb_state = 0;
}

static void tbb_chain_body(void *ctx, uint64_t index) {
    dag_work_t *w = ctx;
    chain_step(w->slots[0].v, index);
}

static void tbb_independent_body(void *ctx, uint64_t index) {
    dag_work_t *w = ctx;
    independent_write(w->slots[index].v, index);
}

static bench_tbb_graph_t *tbb_graph_create(dag_work_t *w) {
    const int chain = w->c->shape == DAG_CHAIN;
    bench_tbb_graph_t *g =
        bench_tbb_graph_create(w->tasks, chain, chain ? tbb_chain_body : tbb_independent_body, w);
    if (!g) {
        bench_fail("cannot build the oneTBB flow graph");
    }
    return g;
}

static void tbb_graph_run(bench_tbb_graph_t *g) {
    if (bench_tbb_graph_run(g) != 0) {
        bench_fail("the oneTBB flow graph failed");
    }
}

/* Per task, with a graph built beforehand (graph non-NULL: tbb_flow): from
 * the first source's message until every node has run. Else (tbb_flow_build)
 * from the first node's construction until the graph built for the sample
 * is destroyed, as the other peers create and free their tasks in their
 * timed regions. */
static double tbb_flow_sample(dag_work_t *w, bench_tbb_graph_t *graph) {
    work_reset(w);
    bench_pin(0);
    uint64_t t0 = bench_now_ns();
    if (graph) {
        tbb_graph_run(graph);
    } else {
        bench_tbb_graph_t *g = tbb_graph_create(w);
        tbb_graph_run(g);
        bench_tbb_graph_destroy(g);
    }
    double per_task = (double)(bench_now_ns() - t0) / (double)w->tasks;
    work_check(w, graph ? "tbb_flow" : "tbb_flow_build");
    return per_task;
}

/* Per task: from the first task's run until the group's wait returns. */
static double tbb_task_group_sample(dag_work_t *w) {
    work_reset(w);
    bench_pin(0);
    uint64_t t0 = bench_now_ns();
    if (bench_tbb_task_group_run(w->tasks, tbb_independent_body, w) != 0) {
        bench_fail("the oneTBB task_group failed");
    }
    double per_task = (double)(bench_now_ns() - t0) / (double)w->tasks;
    work_check(w, "tbb_task_group");
    return per_task;
}
#endif

/* Non-zero when the peer runs; else says once on stderr why its lines are
 * left out. */
static int peer_ready(int peer) {
    static int told[PEER_COUNT];
#ifdef ORDO_BENCH_STARPU
    if (peer == PEER_STARPU) {
        starpu_start();
    }
#endif
#ifdef ORDO_BENCH_TBB
    if (peer >= PEER_TBB_FLOW) {
        tbb_start();
    }
#endif
    if (!peer_missing[peer]) {
        return 1;
    }
    if (!told[peer]) {
        told[peer] = 1;
        fprintf(stderr, "ordo bench: dag_* lines of %s left out: %s\n", peer_names[peer],
                peer_missing[peer]);
    }
    return 0;
}

/* ---- dag_chain, dag_chain_2streams, dag_independent ------------------------ */

static void dag_run(const bench_options_t *options, ordo_device_t *device, const dag_case_t *c) {
    const uint64_t tasks = options->quick ? 1000 : 100000;
    const size_t samples = options->quick ? 2 : 5;
    const int layouts = LAYOUT_COUNT;
    int ready[PEER_COUNT];
    for (int p = 0; p < PEER_COUNT; ++p) {
        ready[p] = peer_ready(p) && peer_fits(p, c);
    }
    dag_work_t w;
    work_init(&w, c, tasks);
    dag_ordo_t o[LAYOUT_COUNT];
    for (int l = 0; l < layouts; ++l) {
        ordo_setup(&o[l], device, &w, (dag_layout_t)l);
    }
    /* The replay runs in the layout of the ordo line. */
    const dag_layout_t main_layout = c->streams > 1 ? LAYOUT_SPREAD : LAYOUT_SUBMITTER_ALONE;
    ordo_graph_t *recorded = replay_record(&o[main_layout], &w);
#ifdef ORDO_BENCH_STARPU
    starpu_data_handle_t *handles = ready[PEER_STARPU] ? starpu_register(&w) : NULL;
#endif
#ifdef ORDO_BENCH_TBB
    bench_tbb_graph_t *graph = ready[PEER_TBB_FLOW] ? tbb_graph_create(&w) : NULL;
#endif
    /* times[p]: peer p's samples; times[PEER_COUNT + l]: ordo's in layout l;
     * times[REPLAY]: the replay's. */
    enum { REPLAY = PEER_COUNT + LAYOUT_COUNT };
    double *times[REPLAY + 1];
    for (int t = 0; t <= REPLAY; ++t) {
        times[t] = calloc(samples, sizeof(double));
        if (!times[t]) {
            bench_fail("out of memory");
        }
    }
    /* ordo and the peers alternate sample by sample, so a noisy spell on
     * the machine hits all of them. */
    for (size_t s = 0; s < samples; ++s) {
        for (int l = 0; l < layouts; ++l) {
            times[PEER_COUNT + l][s] = ordo_sample(&o[l], &w);
        }
        times[REPLAY][s] = replay_sample(&o[main_layout], recorded, &w);
#ifdef ORDO_BENCH_OPENMP
        if (ready[PEER_OPENMP]) {
            times[PEER_OPENMP][s] = openmp_sample(&w);
        }
#endif
#ifdef ORDO_BENCH_STARPU
        if (ready[PEER_STARPU]) {
            times[PEER_STARPU][s] = starpu_sample(&w, handles);
        }
#endif
#ifdef ORDO_BENCH_TBB
        if (ready[PEER_TBB_FLOW]) {
            times[PEER_TBB_FLOW][s] = tbb_flow_sample(&w, graph);
        }
        if (ready[PEER_TBB_FLOW_BUILD]) {
            times[PEER_TBB_FLOW_BUILD][s] = tbb_flow_sample(&w, NULL);
        }
        if (ready[PEER_TBB_TASK_GROUP]) {
            times[PEER_TBB_TASK_GROUP][s] = tbb_task_group_sample(&w);
        }
#endif
    }
    bench_unpin();
    bench_stats_t peers[PEER_COUNT];
    for (int p = 0; p < PEER_COUNT; ++p) {
        if (ready[p]) {
            peers[p] = bench_summarise(times[p], samples, tasks);
            bench_emit(c->name, peer_names[p], &peers[p], NULL, 0);
        }
    }
    bench_stats_t ordo_main = {0};
    for (int l = 0; l < layouts; ++l) {
        bench_stats_t ordo = bench_summarise(times[PEER_COUNT + l], samples, tasks);
        bench_ratio_t ratios[PEER_COUNT];
        size_t ratio_count = 0;
        for (int p = 0; p < PEER_COUNT; ++p) {
            if (ready[p]) {
                ratios[ratio_count++] =
                    (bench_ratio_t){peer_names[p], ordo.median_ns / peers[p].median_ns};
            }
        }
        bench_emit(c->name, layout_impl((dag_layout_t)l, c->streams), &ordo, ratios, ratio_count);
        if (l == LAYOUT_SUBMITTER_ALONE) {
            /* The tracker decides alike in every layout. */
            emit_metrics(c->name, &ordo, &o[l].measured);
        }
        if (l == (int)main_layout) {
            ordo_main = ordo;
        }
    }
    bench_stats_t replay = bench_summarise(times[REPLAY], samples, tasks);
    bench_ratio_t ratios[PEER_COUNT + 1];
    size_t ratio_count = 0;
    ratios[ratio_count++] = (bench_ratio_t){"ordo", replay.median_ns / ordo_main.median_ns};
    for (int p = 0; p < PEER_COUNT; ++p) {
        if (ready[p]) {
            ratios[ratio_count++] =
                (bench_ratio_t){peer_names[p], replay.median_ns / peers[p].median_ns};
        }
    }
    bench_emit(c->name, "ordo_replay", &replay, ratios, ratio_count);
    if (ordo_graph_destroy(recorded) != ORDO_OK) {
        bench_fail("cannot destroy the graph");
    }
#ifdef ORDO_BENCH_STARPU
    if (handles) {
        starpu_unregister(&w, handles);
    }
#endif
#ifdef ORDO_BENCH_TBB
    if (graph) {
        bench_tbb_graph_destroy(graph);
    }
#endif
    for (int l = 0; l < layouts; ++l) {
        tracker_teardown(o[l].tracker, o[l].buffers, w.slot_count, o[l].streams, o[l].stream_count);
        free(o[l].buffers);
    }
    for (int t = 0; t <= REPLAY; ++t) {
        free(times[t]);
    }
    work_fini(&w);
}

/* ---- hazard_overhead_N -------------------------------------------------- */

#define HAZARD_STREAMS 4u
#define HAZARD_POOL 64u        /* shared buffers */
#define HAZARD_PATTERN 4096u   /* submissions before the pattern repeats */
#define HAZARD_WRITE_EVERY 16u /* one submission in 16 writes one buffer */

/* Host time of ordo_tracker_prepare + ordo_tracker_finish alone (nothing is enqueued
 * between them; the waits and point records prepare enqueues on the CPU
 * streams are part of it) with n accesses per submission, over 4 streams
 * in turn (their workers on CPU slot 1, the measured thread on slot 0).
 * Each access picks one of 64 shared buffers (a fixed pseudo-random
 * pattern, distinct within a submission) and reads it, except that one
 * submission in 16 writes its first: the streams that read that buffer
 * next need a wait, and the writer needs one for the streams that read it
 * before (write after read); most other orderings a submission needs are
 * already known and elided. The ordo_metrics line counts both. Per
 * submission, after a warm-up pass of the pattern. */
static void hazard_run(const bench_options_t *options, ordo_device_t *device, unsigned n) {
    char name[32];
    snprintf(name, sizeof name, "hazard_overhead_%u", n);
    if (!bench_selected(options, name)) {
        return;
    }
    const uint64_t batch = options->quick ? 512 : 4 * HAZARD_PATTERN;
    const size_t samples = options->quick ? 2 : 15;
    ordo_stream_t *streams[HAZARD_STREAMS];
    streams_create(device, streams, HAZARD_STREAMS, LAYOUT_SUBMITTER_ALONE);
    ordo_tracker_t *tracker;
    if (ordo_tracker_create(device, &tracker) != ORDO_OK) {
        bench_fail("cannot create a tracker");
    }
    ordo_buffer_t *pool[HAZARD_POOL];
    for (unsigned b = 0; b < HAZARD_POOL; ++b) {
        if (ordo_buffer_create(tracker, &pool[b]) != ORDO_OK) {
            bench_fail("cannot create a buffer");
        }
    }
    ordo_access_t *pattern = malloc((size_t)HAZARD_PATTERN * n * sizeof *pattern);
    double *times = calloc(samples, sizeof *times);
    if (!pattern || !times) {
        bench_fail("out of memory");
    }
    uint64_t rng = 0x9e3779b97f4a7c15u;
    for (unsigned k = 0; k < HAZARD_PATTERN; ++k) {
        ordo_access_t *list = &pattern[(size_t)k * n];
        for (unsigned j = 0; j < n; ++j) {
            ordo_buffer_t *b;
            int distinct;
            do {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                b = pool[rng % HAZARD_POOL];
                distinct = 1;
                for (unsigned i = 0; i < j; ++i) {
                    distinct &= list[i].buffer != b;
                }
            } while (!distinct);
            int write = j == 0 && k % HAZARD_WRITE_EVERY == 0;
            list[j] = (ordo_access_t){b, write ? ORDO_ACCESS_WRITE : ORDO_ACCESS_READ};
        }
    }
    ordo_tracker_metrics_t measured = {0};
    /* A warm-up first: one pass of the pattern. */
    const uint64_t warmup = options->quick ? batch : HAZARD_PATTERN;
    for (size_t s = 0; s <= samples; ++s) {
        const uint64_t count = s == 0 ? warmup : batch;
        ordo_tracker_metrics_t before;
        ordo_tracker_metrics_t after;
        ordo_tracker_metrics(tracker, &before);
        uint64_t t0 = bench_now_ns();
        for (uint64_t i = 0; i < count; ++i) {
            const unsigned k = (unsigned)(i % HAZARD_PATTERN);
            ordo_stream_t *stream = streams[k % HAZARD_STREAMS];
            const ordo_access_t *list = &pattern[(size_t)k * n];
            if (ordo_tracker_prepare(tracker, stream, list, n) != ORDO_OK ||
                ordo_tracker_finish(tracker, stream, list, n) != ORDO_OK) {
                bench_fail("prepare or finish refused");
            }
        }
        uint64_t elapsed = bench_now_ns() - t0;
        ordo_tracker_metrics(tracker, &after);
        if (s > 0) {
            times[s - 1] = (double)elapsed / (double)count;
            metrics_add(&measured, &before, &after);
        }
        streams_synchronize(streams, HAZARD_STREAMS);
    }
    bench_unpin();
    bench_stats_t ordo = bench_summarise(times, samples, batch);
    bench_ratio_t budget = {"budget", ordo.median_ns / (40.0 + 15.0 * n)};
    bench_emit(name, "ordo", &ordo, &budget, 1);
    emit_metrics(name, &ordo, &measured);
    tracker_teardown(tracker, pool, HAZARD_POOL, streams, HAZARD_STREAMS);
    free(pattern);
    free(times);
}

void bench_dag_all(const bench_options_t *options) {
    static const dag_case_t cases[] = {
        {"dag_chain", DAG_CHAIN, 1},
        {"dag_chain_2streams", DAG_CHAIN, 2},
        {"dag_independent", DAG_INDEPENDENT, 2},
    };
    static const unsigned hazard_accesses[] = {1, 4, 16};
    int any = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        any |= bench_selected(options, cases[i].name);
    }
    for (size_t i = 0; i < sizeof hazard_accesses / sizeof hazard_accesses[0]; ++i) {
        char name[32];
        snprintf(name, sizeof name, "hazard_overhead_%u", hazard_accesses[i]);
        any |= bench_selected(options, name);
    }
    if (!any) {
        return;
    }
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        if (bench_selected(options, cases[i].name)) {
            dag_run(options, device, &cases[i]);
        }
    }
    for (size_t i = 0; i < sizeof hazard_accesses / sizeof hazard_accesses[0]; ++i) {
        hazard_run(options, device, hazard_accesses[i]);
    }
#ifdef ORDO_BENCH_STARPU
    starpu_stop();
#endif
#ifdef ORDO_BENCH_TBB
    tbb_stop();
#endif
    ordo_device_release(device);
}
