#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "ordo/status.h"

bench_sizes_t bench_pick(const bench_options_t *options, size_t samples, uint64_t batch) {
    bench_sizes_t s = {samples, batch};
    if (options->quick) {
        s.samples = samples < 10 ? samples : 10;
        s.batch = batch < 20 ? batch : 20;
    }
    return s;
}

_Noreturn void bench_fail(const char *what) {
    const char *detail = ordo_error_message();
    fprintf(stderr, "ordo bench: %s%s%s\n", what, detail[0] ? ": " : "", detail);
    exit(1);
}

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stats_t bench_summarise(double *samples, size_t count, uint64_t ops_per_sample) {
    bench_stats_t stats = {0, 0, 0};
    if (count == 0) {
        return stats;
    }
    qsort(samples, count, sizeof *samples, compare_double);
    stats.median_ns =
        count % 2 ? samples[count / 2] : (samples[count / 2 - 1] + samples[count / 2]) / 2.0;
    /* Nearest rank: the smallest sample with at least 90% of the samples
     * at or below it (rank ceil(0.9 n), index one less). */
    size_t p90_rank = (count * 9 + 9) / 10;
    stats.p90_ns = samples[p90_rank - 1];
    stats.iters = (uint64_t)count * ops_per_sample;
    return stats;
}

static const char *cpu_model(void) {
    static char model[128];
    if (model[0]) {
        return model;
    }
    snprintf(model, sizeof model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        return model;
    }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon += 2;
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(model, sizeof model, "%s", colon);
            }
            break;
        }
    }
    fclose(f);
    return model;
}

static const char *device_name;

void bench_set_device(const char *name) {
    device_name = name;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_json_string(const char *text) {
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; ++c) {
        if (*c == '"' || *c == '\\') {
            printf("\\%c", *c);
        } else if (*c < 0x20) {
            printf("\\u%04x", *c);
        } else {
            putchar(*c);
        }
    }
    putchar('"');
}

/* A JSON number, or null where there is none (a ratio to a median of zero,
 * NaN): printf's "inf" and "nan" are not JSON. */
static void put_json_number(const char *format, double value) {
    if (isfinite(value)) {
        printf(format, value);
    } else {
        printf("null");
    }
}

static int lines_emitted;

int bench_lines_emitted(void) {
    return lines_emitted;
}

void bench_line_printed(void) {
    lines_emitted++;
}

static void emit_line(const char *name, const char *impl, const bench_stats_t *stats,
                      const bench_ratio_t *ratios, size_t ratio_count, double cpu_pct,
                      double max_ns) {
    lines_emitted++;
    printf("{\"name\":");
    put_json_string(name);
    printf(",\"impl\":");
    put_json_string(impl);
    printf(",\"median_ns\":");
    put_json_number("%.2f", stats->median_ns);
    printf(",\"p90_ns\":");
    put_json_number("%.2f", stats->p90_ns);
    if (!isnan(max_ns)) {
        printf(",\"max_ns\":");
        put_json_number("%.2f", max_ns);
    }
    printf(",\"iters\":%llu,\"cpu\":", (unsigned long long)stats->iters);
    put_json_string(cpu_model());
    if (device_name) {
        printf(",\"device\":");
        put_json_string(device_name);
    }
    if (!isnan(cpu_pct)) {
        printf(",\"cpu_pct\":");
        put_json_number("%.1f", cpu_pct);
    }
    if (ratio_count) {
        printf(",\"ratio_to\":{");
        for (size_t i = 0; i < ratio_count; ++i) {
            printf("%s", i ? "," : "");
            put_json_string(ratios[i].against);
            putchar(':');
            put_json_number("%.3f", ratios[i].ratio);
        }
        printf("}");
    }
    printf("}\n");
    fflush(stdout);
}

void bench_emit(const char *name, const char *impl, const bench_stats_t *stats,
                const bench_ratio_t *ratios, size_t ratio_count) {
    emit_line(name, impl, stats, ratios, ratio_count, NAN, NAN);
}

void bench_emit_cpu(const char *name, const char *impl, const bench_stats_t *stats,
                    const bench_ratio_t *ratios, size_t ratio_count, double cpu_pct) {
    emit_line(name, impl, stats, ratios, ratio_count, cpu_pct, NAN);
}

void bench_emit_max(const char *name, const char *impl, const bench_stats_t *stats,
                    const bench_ratio_t *ratios, size_t ratio_count, double max_ns) {
    emit_line(name, impl, stats, ratios, ratio_count, NAN, max_ns);
}

/* The CPUs the process may use, read once before any thread is pinned
 * (a thread created by a pinned thread inherits its single CPU). */
static cpu_set_t allowed_cpus;
static pthread_once_t allowed_once = PTHREAD_ONCE_INIT;

static void read_allowed_cpus(void) {
    if (sched_getaffinity(0, sizeof allowed_cpus, &allowed_cpus) != 0) {
        CPU_ZERO(&allowed_cpus);
    }
}

void bench_pin(int slot) {
    pthread_once(&allowed_once, read_allowed_cpus);
    cpu_set_t allowed = allowed_cpus;
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &allowed)) {
            continue;
        }
        if (seen++ == slot) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

void bench_unpin(void) {
    pthread_once(&allowed_once, read_allowed_cpus);
    pthread_setaffinity_np(pthread_self(), sizeof allowed_cpus, &allowed_cpus);
}

typedef struct pinned_start {
    int slot;
    void *(*fn)(void *);
    void *arg;
} pinned_start_t;

static void *pinned_trampoline(void *p) {
    pinned_start_t start = *(pinned_start_t *)p;
    free(p);
    bench_pin(start.slot);
    return start.fn(start.arg);
}

int bench_thread_start(pthread_t *thread, int slot, void *(*fn)(void *), void *arg) {
    pinned_start_t *start = malloc(sizeof *start);
    if (!start) {
        return -1;
    }
    *start = (pinned_start_t){slot, fn, arg};
    if (pthread_create(thread, NULL, pinned_trampoline, start) != 0) {
        free(start);
        return -1;
    }
    return 0;
}

static int any_selected;

int bench_selected(const bench_options_t *options, const char *name) {
    int selected = !options->filter || strstr(name, options->filter) != NULL;
    any_selected |= selected;
    return selected;
}

int bench_any_selected(void) {
    return any_selected;
}
