/* ordo - the command-line face of the library: info, bench. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ordo/ordo.h"

static void usage(FILE *out) {
    fprintf(out, "usage: ordo <command> [options]\n"
                 "\n"
                 "commands:\n"
                 "  info                 version, build configuration, backends compiled in\n"
                 "  bench [FILTER]       run the benchmarks whose name contains FILTER\n"
                 "                       (all when omitted); one JSON object per line\n"
                 "      --quick          few iterations: checks that benchmarks run, measures\n"
                 "                       nothing worth quoting\n"
                 "  --help, -h, help     this text\n");
}

static int command_info(void) {
    printf("ordo %s\n", ordo_version());
    printf("build: %s\n", ordo_build_config());
    const char *names[16];
    size_t count = 0;
    ordo_backend_list(names, 16, &count);
    printf("backends compiled in:");
    for (size_t i = 0; i < count && i < 16; ++i) {
        int available = 0;
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
    for (int i = 0; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            options.quick = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "ordo bench: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!options.filter) {
            options.filter = argv[i];
        } else {
            fprintf(stderr, "ordo bench: only one FILTER is accepted\n");
            return 2;
        }
    }
    bench_pin(-1); /* reads the CPU set before any thread is pinned */
    bench_signal_all(&options);
    bench_event_pool_generic(&options);
    bench_stream_all(&options);
    bench_dag_all(&options);
    bench_coord_all(&options);
    return 0;
}

int main(int argc, char **argv) {
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
    if (strcmp(command, "info") == 0) {
        return command_info();
    }
    if (strcmp(command, "bench") == 0) {
        return command_bench(argc - 2, argv + 2);
    }
    fprintf(stderr, "ordo: unknown command '%s'\n\n", command);
    usage(stderr);
    return 2;
}
