/* oneTBB as a peer of the dag benchmarks (bench_dag.c): a flow graph of
 * continue_nodes and a task_group, running task bodies given from C.
 * Written in C++ (bench_dag_tbb.cpp); built only where CMake finds oneTBB
 * and a C++ compiler. No function lets an exception out: each says
 * instead that it failed. */
#ifndef ORDO_TOOL_BENCH_DAG_TBB_H
#define ORDO_TOOL_BENCH_DAG_TBB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs task `index` of a benchmark. */
typedef void (*bench_tbb_body_t)(void *ctx, uint64_t index);

/* Limits oneTBB to `threads` threads, the calling thread among them, in an
 * arena of that many slots that every function below runs in. Each worker
 * thread calls worker_entry once, before its first task. 0 on success. */
int bench_tbb_start(unsigned threads, void (*worker_entry)(void));

/* Releases what bench_tbb_start made and waits until the workers end. */
void bench_tbb_stop(void);

typedef struct bench_tbb_graph bench_tbb_graph_t;

/* A flow graph of `tasks` continue_nodes, node i running body(ctx, i):
 * with chain non-zero, node i waits for node i - 1 (an edge each); else
 * there are no edges. NULL on failure. */
bench_tbb_graph_t *bench_tbb_graph_create(uint64_t tasks, int chain, bench_tbb_body_t body,
                                          void *ctx);

/* Puts a message to every node without a predecessor, then waits until
 * every node has run. The graph runs again as often as asked. 0 on
 * success. */
int bench_tbb_graph_run(bench_tbb_graph_t *graph);

void bench_tbb_graph_destroy(bench_tbb_graph_t *graph);

/* A task_group: runs body(ctx, i) for every i below tasks as a task of its
 * own (no order among them), then waits for all. 0 on success. */
int bench_tbb_task_group_run(uint64_t tasks, bench_tbb_body_t body, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
