/* The `ordo bench` harness: timing, statistics, JSON lines, pinning. */
#ifndef ORDO_TOOL_BENCH_H
#define ORDO_TOOL_BENCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_options {
    const char *filter; /* run benchmarks whose name contains this; NULL: all */
    int quick;          /* few iterations: a smoke test, not a measurement */
} bench_options_t;

/* How many samples of how many operations a benchmark measures. */
typedef struct bench_sizes {
    size_t samples;
    uint64_t batch;
} bench_sizes_t;

/* The sizes to use: as given, or tiny under --quick. */
bench_sizes_t bench_pick(const bench_options_t *options, size_t samples, uint64_t batch);

/* Reports what failed (with ordo's last error message, if any) and exits:
 * a benchmark that cannot run correctly measures nothing. */
_Noreturn void bench_fail(const char *what);

/* Per-operation times of one (benchmark, implementation) pair. */
typedef struct bench_stats {
    double median_ns;
    double p90_ns;
    uint64_t iters; /* operations measured in total */
} bench_stats_t;

/* Summarises samples (each the per-operation time of a batch of
 * ops_per_sample operations). Sorts samples in place. */
bench_stats_t bench_summarise(double *samples, size_t count, uint64_t ops_per_sample);

/* One comparison to print on a result line: median / reference median. */
typedef struct bench_ratio {
    const char *against;
    double ratio;
} bench_ratio_t;

/* Prints one JSON line: name, impl, median_ns, p90_ns, iters, the host's
 * CPU model, the device's name while one is set (bench_set_device) and,
 * when given, ratios to the baselines of the same run. */
void bench_emit(const char *name, const char *impl, const bench_stats_t *stats,
                const bench_ratio_t *ratios, size_t ratio_count);

/* bench_emit with the CPU the measured side used while it waited, in
 * percent of one core ("cpu_pct"). */
void bench_emit_cpu(const char *name, const char *impl, const bench_stats_t *stats,
                    const bench_ratio_t *ratios, size_t ratio_count, double cpu_pct);

/* bench_emit with the largest sample ("max_ns"), where the worst case is
 * the figure that matters (a bound). */
void bench_emit_max(const char *name, const char *impl, const bench_stats_t *stats,
                    const bench_ratio_t *ratios, size_t ratio_count, double max_ns);

/* The device the following lines measure ("device" in each), or NULL for
 * none (host-only benchmarks). The string must outlive its use. */
void bench_set_device(const char *name);

/* Pins the calling thread to the slot-th CPU it may run on (0 or 1), so
 * each comparison uses the same two CPUs. Best effort. */
void bench_pin(int slot);

/* Lets the calling thread run on every CPU the process may use again. */
void bench_unpin(void);

/* Starts fn on a thread pinned to slot. */
int bench_thread_start(pthread_t *thread, int slot, void *(*fn)(void *), void *arg);

uint64_t bench_now_ns(void);

/* Each benchmark group. */
void bench_signal_all(const bench_options_t *options);
void bench_stream_all(const bench_options_t *options);
void bench_event_pool_generic(const bench_options_t *options);
void bench_dag_all(const bench_options_t *options);
/* graph_steps: one step repeated, analysed each time or recorded once. */
void bench_graph_all(const bench_options_t *options);
void bench_memory_all(const bench_options_t *options);
void bench_trace_all(const bench_options_t *options);
void bench_barrier_all(const bench_options_t *options);
void bench_waiter_all(const bench_options_t *options);
void bench_coord_all(const bench_options_t *options);
/* Signals between processes: the other side of each is a child process,
 * `ordo __ipc-child ...`, whose main is bench_ipc_child. */
void bench_ipc_all(const bench_options_t *options);
int bench_ipc_child(int argc, char **argv);
/* The CUDA benchmarks: each prints why it is skipped without a GPU. */
void bench_cuda_all(const bench_options_t *options);

struct channel_ops;
/* Two threads bouncing a counter through two channels; per round trip. */
bench_stats_t bench_run_pingpong(const struct channel_ops *ops, size_t samples, uint64_t batch);

/* Non-zero when name passes the filter. Every benchmark asks before it
 * runs (or says why it is skipped). */
int bench_selected(const bench_options_t *options, const char *name);

/* Non-zero once any benchmark's name passed the filter: a filter matching
 * none is an error, not an empty run. */
int bench_any_selected(void);

/* How many result lines the run has printed: a run whose selected
 * benchmarks were all skipped (each said why) measured nothing. */
int bench_lines_emitted(void);

/* Counts a result line a benchmark printed itself (not through
 * bench_emit*: a line of other fields). */
void bench_line_printed(void);

#endif
