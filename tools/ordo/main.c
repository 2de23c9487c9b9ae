/* ordo - the command-line face of the library: demo, info, bench. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "demo.h"
#include "ordo/ordo.h"

static void usage(FILE *out) {
    fprintf(out, "usage: ordo <command> [options]\n"
                 "\n"
                 "commands:\n"
                 "  demo                 a three-stage pipeline (upload, blocked matrix product,\n"
                 "                       reduction) over many chunks on three streams, ordered\n"
                 "                       automatically from what each stage reads and writes,\n"
                 "                       checked against a serial computation\n"
                 "      --backend NAME   cpu (the default: the stages are host tasks) or cuda\n"
                 "                       (copies and kernels on cuda:0)\n"
                 "      --chunks N       chunks to run (default 192)\n"
                 "      --rows N         rows per chunk (default 64)\n"
                 "      --size N         inner and output dimension (default 256)\n"
                 "      --trace FILE     write a Chrome trace-event JSON timeline to FILE\n"
                 "      --quiet          no progress lines\n"
                 "  demo --mpi [options] the same kind of pipeline across MPI ranks (under\n"
                 "                       mpirun -np N; --mpi comes first; docs/MPI.md)\n"
                 "      --blocks N       gradient blocks per rank (default 16)\n"
                 "      --len N          values per block (default 16384)\n"
                 "      --iterations N   steps (default 8)\n"
                 "      --quiet          nothing printed unless the check fails\n"
                 "  info                 version, build configuration, backends compiled in\n"
                 "  bench [FILTER]       run the benchmarks whose name contains FILTER\n"
                 "                       (all when omitted); one JSON object per line;\n"
                 "                       exits 2 when no name matches or every benchmark\n"
                 "                       selected was skipped (each says why)\n"
                 "      --quick          few iterations: checks that benchmarks run, measures\n"
                 "                       nothing worth quoting\n"
                 "      --trace FILE     record a timeline of the run (trace_overhead is\n"
                 "                       skipped: it measures tracing itself)\n"
                 "  --help, -h, help     this text\n");
}

static int command_info(void) {
    printf("ordo %s\n", ordo_version());
    printf("%s\n", ordo_build_config());
    const char *names[16];
    size_t count = 0;
    ordo_backend_list(names, 16, &count);
    printf("backends compiled in:");
    for (size_t i = 0; i < count && i < 16; ++i) {
        bool available = 0;
        char reason[160] = "";
        ordo_backend_available(names[i], &available, reason, sizeof reason);
        printf(" %s (%s%s%s)", names[i], available ? "available" : "unavailable",
               available ? "" : ": ", reason);
    }
    printf("\n");
    ordo_device_info_t infos[16];
    ordo_device_list(infos, 16, &count);
    for (size_t i = 0; i < count && i < 16; ++i) {
        const ordo_device_info_t *d = &infos[i];
        printf("device %s: stream priorities %d (most urgent) to %d, timing events %s, "
               "device memory %s, native timeline %s\n",
               d->name, d->priority_greatest, d->priority_least, d->timing_events ? "yes" : "no",
               d->device_memory ? "yes" : "no", d->native_timeline ? "yes" : "no");
    }
    return 0;
}

static int command_bench(int argc, char **argv) {
    bench_options_t options = {NULL, 0};
    const char *trace = NULL;
    for (int i = 0; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            options.quick = 1;
        } else if (strcmp(argv[i], "--trace") == 0) {
            if (i + 1 == argc || (argv[i + 1][0] == '-' && argv[i + 1][1] == '-')) {
                fprintf(stderr, "ordo bench: '--trace' needs a FILE (see ordo --help)\n");
                return 2;
            }
            trace = argv[++i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "ordo bench: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!argv[i][0]) {
            fprintf(stderr, "ordo bench: FILTER is empty (leave it out to run every benchmark)\n");
            return 2;
        } else if (!options.filter) {
            options.filter = argv[i];
        } else {
            fprintf(stderr, "ordo bench: only one FILTER is accepted\n");
            return 2;
        }
    }
    if (trace && !cli_trace_path_ok("ordo bench", trace)) {
        return 2;
    }
    if (trace && ordo_trace_start(NULL) != ORDO_OK) {
        fprintf(stderr, "ordo bench: cannot trace: %s\n", ordo_error_message());
        return 1;
    }
    bench_pin(-1); /* reads the CPU set before any thread is pinned */
    bench_signal_all(&options);
    bench_event_pool_generic(&options);
    bench_stream_all(&options);
    bench_dag_all(&options);
    bench_graph_all(&options);
    bench_memory_all(&options);
    bench_trace_all(&options);
    bench_barrier_all(&options);
    bench_waiter_all(&options);
    bench_coord_all(&options);
    bench_ipc_all(&options);
    bench_cuda_all(&options);
    if (!bench_any_selected()) {
        /* Checked after the runs: each group says which names it has. */
        fprintf(stderr, "ordo bench: no benchmark name contains '%s'\n", options.filter);
        if (trace) {
            (void)ordo_trace_stop(NULL, NULL);
        }
        return 2;
    }
    if (!bench_lines_emitted()) {
        fprintf(stderr, "ordo bench: every benchmark selected was skipped, nothing was measured\n");
        if (trace) {
            (void)ordo_trace_stop(NULL, NULL);
        }
        return 2;
    }
    if (trace) {
        ordo_trace_stats_t stats;
        if (ordo_trace_stop(trace, &stats) != ORDO_OK) {
            fprintf(stderr, "ordo bench: cannot write the trace: %s\n", ordo_error_message());
            return 1;
        }
        fprintf(stderr, "ordo bench: trace %s: %llu events (%llu dropped), %llu flow arrows\n",
                trace, (unsigned long long)stats.events, (unsigned long long)stats.dropped,
                (unsigned long long)stats.flows);
    }
    return 0;
}

static int run(int argc, char **argv);

/* What was printed must have reached its file: a full disk or a closed
 * output is a failure, not a silent success with nothing written. */
int main(int argc, char **argv) {
    int rc = run(argc, argv);
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "ordo: cannot write the output: %s\n", strerror(errno ? errno : EIO));
        return 1;
    }
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *command = argv[1];
    if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
        strcmp(command, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(command, "demo") == 0 || strcmp(command, "bench") == 0) {
        for (int i = 2; i < argc; ++i) {
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                usage(stdout);
                return 0;
            }
        }
    }
    if (strcmp(command, "info") == 0) {
        if (argc > 2) {
            fprintf(stderr, "ordo info: takes no arguments, got '%s'\n", argv[2]);
            return 2;
        }
        return command_info();
    }
    if (strcmp(command, "demo") == 0) {
        return demo_main(argc - 2, argv + 2);
    }
    if (strcmp(command, "bench") == 0) {
        return command_bench(argc - 2, argv + 2);
    }
    if (strcmp(command, "__ipc-child") == 0) {
        /* Not a user's command: the other process of `ordo bench ipc_*`. */
        return bench_ipc_child(argc - 2, argv + 2);
    }
    fprintf(stderr, "ordo: unknown command '%s'\n\n", command);
    usage(stderr);
    return 2;
}
