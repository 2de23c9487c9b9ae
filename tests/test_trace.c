/* Traces: a real multi-stream program traced and its JSON validated (well
 * formed, flows with both ends, timestamps monotonic per track); marks;
 * limits (max_events at chunk edges, huge or unmappable, threads running
 * out of room together); start/stop misuse; recording threads racing stop;
 * a host task that stops and starts traces; program slices across
 * restarts and full traces; a child forked during a trace; bad input on
 * every entry point. */
#include <locale.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/trace.h"
#include "ordo/memory.h"
#include "ordo/trace.h"
#include "refusal.h"
#include "test_util.h"

#define TRACE_CHECK_NO_MAIN
#include "trace_check.c"

static ordo_device_t *device;

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

static void temp_path(char *path, size_t capacity, const char *what) {
    snprintf(path, capacity, "/tmp/ordo-test-trace-%s-%d.json", what, (int)getpid());
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc(1, (size_t)size + 1);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    return text;
}

static ordo_status_t busy_task(void *ctx) {
    (void)ctx;
    for (volatile int i = 0; i < 20000; ++i) {
    }
    return ORDO_OK;
}

static ordo_status_t launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, busy_task, NULL);
}

static void traced_program_is_valid(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    char path[128];
    temp_path(path, sizeof path, "program");
    assert_ok(ordo_trace_start(NULL));
    bool on = 0;
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 1);

    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *direct = NULL, *pool = NULL;
    ordo_stream_t *s[3];
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_mem_direct_create(device, &direct));
    assert_ok(ordo_mem_pool_create(tracker, direct, NULL, &pool));
    /* The last stream at the most urgent priority: its track names it (a
     * track's priority used to go through the durations' clamps). */
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_create(device, i == 2 ? info.priority_greatest : 0, &s[i]));
    }
    char urgent[64];
    snprintf(urgent, sizeof urgent, ", priority %d)", info.priority_greatest);
    /* The second stream's track carries its name (cut to 47 bytes, escaped
     * as JSON). */
    assert_ok(ordo_stream_set_name(
        s[1], "decode \"B\" with a name long enough to be cut at forty-seven bytes"));
    assert_ok(ordo_trace_slice_begin("submit \"phase\" 1"));
    ordo_block_t *blocks[4];
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_mem_allocate(pool, 4096, 0, s[0], 1, &blocks[i], NULL));
    }
    /* A chain across the streams: each step reads what the last wrote. */
    for (int step = 0; step < 40; ++step) {
        ordo_buffer_t *in = NULL, *out = NULL;
        assert_ok(ordo_block_buffer(blocks[step % 4], &in));
        assert_ok(ordo_block_buffer(blocks[(step + 1) % 4], &out));
        ordo_access_t accesses[2] = {{in, ORDO_ACCESS_READ}, {out, ORDO_ACCESS_WRITE}};
        assert_ok(ordo_tracker_submit(tracker, s[step % 3], accesses, 2, launch, NULL));
        assert_ok(ordo_trace_counter("steps", step));
    }
    assert_ok(ordo_trace_instant("submitted"));
    assert_ok(ordo_trace_slice_end());
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_mem_deallocate(pool, blocks[i], s[i % 3]));
    }
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_synchronize(s[i], test_deadline()));
    }
    ordo_tracker_metrics_t metrics;
    assert_ok(ordo_tracker_metrics(tracker, &metrics));

    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace %s: %s", path, summary);
    }
    assert_true(stats.events > 100);
    assert_int_equal(stats.dropped, 0);
    /* Every wait the tracker inserted became a flow arrow. */
    assert_true(metrics.waits_emitted > 0);
    assert_int_equal(stats.flows, metrics.waits_emitted);
    char *text = read_file(path);
    assert_non_null(strstr(text, "\"thread_name\""));
    assert_non_null(strstr(text, " (cpu:0, priority 0)\""));
    const char *named =
        strstr(text, "\"decode \\\"B\\\" with a name long enough to be cut at (stream ");
    if (!named || !strstr(named, ", cpu:0, priority 0)\"")) {
        fail_msg("the named stream's track is not named: %s", text);
    }
    assert_non_null(strstr(text, urgent));
    assert_non_null(strstr(text, "\"name\":\"host task\""));
    assert_non_null(strstr(text, "pool bytes in use"));
    assert_non_null(strstr(text, "submit \\\"phase\\\" 1"));
    free(text);
    remove(path);

    assert_ok(ordo_mem_reap_pending(pool, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_tracker_destroy(tracker)); /* before its streams */
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_destroy(s[i]));
    }
}

static void limits_and_misuse(void **state) {
    (void)state;
    /* Marks while off are accepted and dropped. */
    assert_ok(ordo_trace_instant("nobody sees this"));
    assert_status(ordo_trace_stop(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_trace_instant(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_trace_slice_begin(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_trace_counter(NULL, 1), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_trace_start(&(ordo_trace_config_t){0}), ORDO_OK);
    assert_status(ordo_trace_instant(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_trace_stop(NULL, NULL));
    assert_status(ordo_trace_is_on(NULL), ORDO_ERR_INVALID_ARGUMENT);

    /* Room for more events than memory can address: refused, still off. */
    bool on = 1;
    ordo_trace_config_t absurd = {UINT64_MAX, 0};
    assert_status(ordo_trace_start(&absurd), ORDO_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(ordo_error_message(), "max_events"));
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    assert_status(ordo_trace_stop(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);

    ordo_trace_config_t config = {10, 0};
    assert_ok(ordo_trace_start(&config));
    assert_status(ordo_trace_start(NULL), ORDO_ERR_BUSY);
    assert_ok(ordo_trace_slice_end()); /* no begin in this trace: ignored */
    for (int i = 0; i < 10000; ++i) {
        assert_ok(ordo_trace_instant("many"));
    }
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(NULL, &stats));
    /* A whole chunk is the unit of the limit: at most one chunk kept. */
    assert_true(stats.events <= 4096);
    assert_true(stats.events + stats.dropped == 10000);

    char path[128];
    temp_path(path, sizeof path, "empty");
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_trace_stop(path, &stats));
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid empty trace: %s", summary);
    }
    remove(path);

    assert_ok(ordo_trace_start(NULL));
    assert_status(ordo_trace_stop("/nonexistent-dir/trace.json", NULL), ORDO_ERR_INVALID_ARGUMENT);
}

typedef struct recorder {
    _Atomic int *stop;
    uint64_t marks;
} recorder_t;

static void *record_main(void *arg) {
    recorder_t *r = arg;
    while (!atomic_load(r->stop)) {
        (void)ordo_trace_slice_begin("work");
        (void)ordo_trace_counter("n", (int64_t)r->marks);
        (void)ordo_trace_slice_end();
        ++r->marks;
    }
    return NULL;
}

/* Threads keep recording while traces start and stop under them. */
static void stop_races_recorders(void **state) {
    (void)state;
    _Atomic int stop = 0;
    recorder_t recorders[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; ++i) {
        recorders[i] = (recorder_t){&stop, 0};
        threads[i] = test_thread_start(record_main, &recorders[i]);
    }
    char path[128];
    temp_path(path, sizeof path, "race");
    ordo_trace_config_t config = {64 * 1024, 0}; /* quick to map each round */
    for (int round = 0; round < (int)test_scaled(40); ++round) {
        assert_ok(ordo_trace_start(round % 8 == 0 ? NULL : &config));
        test_sleep_ms(1);
        ordo_trace_stats_t stats;
        assert_ok(ordo_trace_stop(round % 4 == 0 ? path : NULL, &stats));
        if (round % 4 == 0) {
            char summary[256];
            if (!check(path, summary, sizeof summary)) {
                fail_msg("round %d: invalid trace: %s", round, summary);
            }
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; ++i) {
        pthread_join(threads[i], NULL);
    }
    remove(path);
}

typedef struct controller {
    int rounds;
    _Atomic int *unexpected;
    int started, stopped;
} controller_t;

static void *control_main(void *arg) {
    controller_t *c = arg;
    ordo_trace_config_t config = {8192, 0};
    for (int i = 0; i < c->rounds; ++i) {
        ordo_status_t st = ordo_trace_start(&config);
        c->started += st == ORDO_OK;
        if (st != ORDO_OK && st != ORDO_ERR_BUSY) {
            atomic_fetch_add(c->unexpected, 1);
        }
        ordo_trace_stats_t stats;
        st = ordo_trace_stop(NULL, &stats);
        c->stopped += st == ORDO_OK;
        if (st != ORDO_OK && st != ORDO_ERR_INVALID_ARGUMENT) {
            atomic_fetch_add(c->unexpected, 1);
        }
    }
    return NULL;
}

/* Two threads start and stop traces against each other while a third
 * records: each call either does its work or is refused as it should be,
 * and every trace started is stopped once. */
static void start_and_stop_race_each_other(void **state) {
    (void)state;
    _Atomic int stop = 0, unexpected = 0;
    recorder_t recorder = {&stop, 0};
    pthread_t recording = test_thread_start(record_main, &recorder);
    controller_t controllers[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; ++i) {
        controllers[i] = (controller_t){(int)test_scaled(200), &unexpected, 0, 0};
        threads[i] = test_thread_start(control_main, &controllers[i]);
    }
    for (int i = 0; i < 2; ++i) {
        pthread_join(threads[i], NULL);
    }
    atomic_store(&stop, 1);
    pthread_join(recording, NULL);
    assert_int_equal(atomic_load(&unexpected), 0);
    bool on = 1;
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    assert_int_equal(controllers[0].started + controllers[1].started,
                     controllers[0].stopped + controllers[1].stopped);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* The checker itself: what it must accept and what it must refuse. */
static void checker_refuses_bad_traces(void **state) {
    (void)state;
    static const char *const good[] = {
        "{\"traceEvents\":[]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"ts\":1,\"name\":"
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}]}",
        ("{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},"
         "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":3},"
         "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":1.5e1}]}"),
    };
    static const char *const bad[] = {
        "{\"a\":1}",
        "{\"traceEvents\":5,\"other\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":nan}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":0x10}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":+1}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1.}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1,\"name\":\"\xff\"}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1,\"name\":\"\xc3\"}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1,\"name\":\"\xc0\xaf\"}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1,\"name\":\"\xed\xa0\x80\"}]}",
        /* slices that overlap without nesting */
        ("{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},"
         "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":10}]}"),
    };
    char path[128], summary[256];
    temp_path(path, sizeof path, "checker");
    for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
        write_text(path, good[i]);
        if (!check(path, summary, sizeof summary)) {
            fail_msg("refused %s: %s", good[i], summary);
        }
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        write_text(path, bad[i]);
        if (check(path, summary, sizeof summary)) {
            fail_msg("accepted %s", bad[i]);
        }
    }
    remove(path);
}

typedef struct gate {
    ordo_signal_t *started;
    ordo_signal_t *open;
} gate_t;

/* A host task that makes its own marks in the middle of its work. */
static ordo_status_t marking_task(void *ctx) {
    (void)ctx;
    test_sleep_ms(2);
    (void)ordo_trace_instant("inside a host task");
    (void)ordo_trace_slice_begin("inner");
    (void)ordo_trace_slice_end();
    test_sleep_ms(2);
    return ORDO_OK;
}

static ordo_status_t sleeping_task(void *ctx) {
    (void)ctx;
    test_sleep_ms(6);
    return ORDO_OK;
}

static ordo_status_t gated_task(void *ctx) {
    gate_t *g = ctx;
    (void)ordo_signal_advance(g->started, 1);
    return ordo_signal_wait(g->open, 1, test_deadline());
}

static void check_trace_file(const char *path) {
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace %s: %s", path, summary);
    }
    remove(path);
}

/* A stream's slices keep their own times: marks the host task makes on the
 * worker's thread do not move the task's slice, so the slices of a track
 * nest. */
static void host_task_marks_keep_slices_in_place(void **state) {
    (void)state;
    char path[128];
    temp_path(path, sizeof path, "marks");
    ordo_stream_t *s = NULL;
    assert_ok(ordo_stream_create(device, 0, &s));
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_stream_host_task(s, marking_task, NULL));
    assert_ok(ordo_stream_host_task(s, sleeping_task, NULL));
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_trace_stop(path, NULL));
    check_trace_file(path);
    assert_ok(ordo_stream_destroy(s));
}

/* Streams made and destroyed in turn within one trace get a track each:
 * tracks were keyed by the stream's address, which the next stream often
 * got again, and two streams shared one track and two names. */
static void streams_made_in_turn_have_tracks_of_their_own(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    if (!test_device_is("cpu")) {
        print_message("  skipped: only the CPU backend records stream tracks\n");
        return;
    }
    char path[128];
    temp_path(path, sizeof path, "turns");
    assert_ok(ordo_trace_start(NULL));
    enum { TURNS = 8 };
    for (int i = 0; i < TURNS; ++i) {
        ordo_stream_t *s = NULL;
        assert_ok(ordo_stream_create(device, 0, &s));
        assert_ok(ordo_stream_host_task(s, sleeping_task, NULL));
        assert_ok(ordo_stream_synchronize(s, test_deadline()));
        assert_ok(ordo_stream_destroy(s));
    }
    assert_ok(ordo_trace_stop(path, NULL));
    char *text = read_file(path);
    char last[32];
    snprintf(last, sizeof last, "\"stream %d (", TURNS);
    if (!strstr(text, last)) {
        fail_msg("no track named %s...: streams shared tracks", last + 1);
    }
    free(text);
    check_trace_file(path);
}

/* A piece of work that began in one trace and ended in the next is cut to
 * the part inside the new trace, not moved to its start. */
static void op_across_restart_is_cut(void **state) {
    (void)state;
    char path[128];
    temp_path(path, sizeof path, "restart");
    ordo_stream_t *s = NULL;
    gate_t g = {test_signal_make(0), test_signal_make(0)};
    assert_ok(ordo_stream_create(device, 0, &s));
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_stream_host_task(s, gated_task, &g));
    assert_ok(ordo_stream_host_task(s, sleeping_task, NULL));
    assert_ok(ordo_signal_wait(g.started, 1, test_deadline()));
    test_sleep_ms(3);
    assert_ok(ordo_trace_stop(NULL, NULL));
    assert_ok(ordo_trace_start(NULL));
    test_sleep_ms(2);
    assert_ok(ordo_signal_advance(g.open, 1));
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_trace_stop(path, NULL));
    check_trace_file(path);
    assert_ok(ordo_stream_destroy(s));
    assert_ok(ordo_signal_release(g.started));
    assert_ok(ordo_signal_release(g.open));
}

static void *one_slice_main(void *arg) {
    (void)arg;
    (void)ordo_trace_slice_begin("short-lived thread");
    (void)ordo_trace_slice_end();
    return NULL;
}

/* Every program thread's slices balance, however many threads made them. */
static void many_threads_balance(void **state) {
    (void)state;
    char path[128];
    temp_path(path, sizeof path, "threads");
    assert_ok(ordo_trace_start(NULL));
    for (int i = 0; i < 300; ++i) {
        pthread_join(test_thread_start(one_slice_main, NULL), NULL);
    }
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.events, 600);
    check_trace_file(path);
}

typedef struct flow {
    long long id;
    double start, finish;
    int ends;
} flow_t;

static int by_start(const void *x, const void *y) {
    const flow_t *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The flows of a trace ordo wrote (one event a line), up to capacity. */
static size_t read_flows(const char *path, flow_t *flows, size_t capacity) {
    char *text = read_file(path);
    size_t count = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int start = strstr(line, "\"ph\":\"s\"") != NULL,
            finish = strstr(line, "\"ph\":\"f\"") != NULL;
        if (!start && !finish) {
            continue;
        }
        long long id = strtoll(strstr(line, "\"id\":") + 5, NULL, 10);
        double ts = strtod(strstr(line, "\"ts\":") + 5, NULL);
        size_t i = 0;
        while (i < count && flows[i].id != id) {
            ++i;
        }
        if (i == count) {
            assert_true(count < capacity);
            flows[count++] = (flow_t){id, 0, 0, 0};
        }
        *(start ? &flows[i].start : &flows[i].finish) = ts;
        flows[i].ends += 1;
    }
    free(text);
    return count;
}

/* A tracker and two streams that ran one ordering across them: a write
 * on a, then a read on b (an inserted wait: one flow arrow in a trace). */
typedef struct hop {
    ordo_tracker_t *tracker;
    ordo_stream_t *a, *b;
    ordo_buffer_t *buffer;
} hop_t;

static void hop_run(hop_t *h) {
    assert_ok(ordo_tracker_create(device, &h->tracker));
    assert_ok(ordo_stream_create(device, 0, &h->a));
    assert_ok(ordo_stream_create(device, 0, &h->b));
    assert_ok(ordo_buffer_create(h->tracker, &h->buffer));
    ordo_access_t write = {h->buffer, ORDO_ACCESS_WRITE}, read = {h->buffer, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(h->tracker, h->a, &write, 1, launch, NULL));
    assert_ok(ordo_tracker_submit(h->tracker, h->b, &read, 1, launch, NULL));
    assert_ok(ordo_stream_synchronize(h->a, test_deadline()));
    assert_ok(ordo_stream_synchronize(h->b, test_deadline()));
}

static void hop_free(hop_t *h) {
    assert_ok(ordo_buffer_release(h->buffer, NULL, NULL));
    /* The release may defer its reclamation to the reclaimer thread. */
    assert_ok(ordo_tracker_drain(h->tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(h->tracker)); /* before its streams */
    assert_ok(ordo_stream_destroy(h->a));
    assert_ok(ordo_stream_destroy(h->b));
}

/* Streams, trackers and signals made and destroyed within one trace reuse
 * addresses: each arrow still joins its own round's signal and wait. */
static void flows_join_their_own_round(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    char path[128];
    temp_path(path, sizeof path, "rounds");
    enum { ROUNDS = 4 };
    assert_ok(ordo_trace_start(NULL));
    for (int round = 0; round < ROUNDS; ++round) {
        hop_t hop;
        hop_run(&hop);
        hop_free(&hop);
        test_sleep_ms(1);
    }
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.flows, ROUNDS);
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace %s: %s", path, summary);
    }
    flow_t flows[ROUNDS];
    assert_int_equal(read_flows(path, flows, ROUNDS), ROUNDS);
    qsort(flows, ROUNDS, sizeof *flows, by_start);
    /* Rounds follow one another: each arrow lies within its round. */
    for (int i = 0; i < ROUNDS; ++i) {
        assert_int_equal(flows[i].ends, 2);
        if (!(flows[i].start <= flows[i].finish) ||
            (i + 1 < ROUNDS && !(flows[i].finish < flows[i + 1].start))) {
            fail_msg("arrow %d goes from %.3f to %.3f (next starts at %.3f)", i, flows[i].start,
                     flows[i].finish, i + 1 < ROUNDS ? flows[i + 1].start : 0.0);
        }
    }
    remove(path);
}

/* A graph's replays enqueue its recorded waits: each is one of the
 * tracker's waits_emitted and draws its arrow, as an eager submission's. */
static void graph_replays_draw_their_waits(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    char path[128];
    temp_path(path, sizeof path, "replays");
    enum { REPLAYS = 5 };
    assert_ok(ordo_trace_start(NULL));
    hop_t h;
    hop_run(&h); /* one eager wait */
    ordo_access_t write = {h.buffer, ORDO_ACCESS_WRITE}, read = {h.buffer, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_record_begin(h.tracker));
    assert_ok(ordo_tracker_submit(h.tracker, h.a, &write, 1, launch, NULL));
    assert_ok(ordo_tracker_submit(h.tracker, h.b, &read, 1, launch, NULL));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(h.tracker, &graph));
    ordo_tracker_metrics_t before;
    assert_ok(ordo_tracker_metrics(h.tracker, &before));
    for (int i = 0; i < REPLAYS; ++i) {
        assert_ok(ordo_graph_replay(graph));
    }
    assert_ok(ordo_stream_synchronize(h.a, test_deadline()));
    assert_ok(ordo_stream_synchronize(h.b, test_deadline()));
    ordo_tracker_metrics_t metrics;
    assert_ok(ordo_tracker_metrics(h.tracker, &metrics));
    /* At least the recorded read's wait on a at every replay. */
    assert_true(metrics.waits_emitted - before.waits_emitted >= REPLAYS);
    assert_ok(ordo_graph_destroy(graph));
    hop_free(&h);
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace %s: %s", path, summary);
    }
    assert_int_equal(stats.dropped, 0);
    assert_int_equal(stats.flows, metrics.waits_emitted);
    remove(path);
}

/* A replay whose lane breaks (its stream fails during the replay, before
 * the lane's recorded wait) counts in waits_emitted only the waits it
 * enqueued, each drawn as an arrow: it counted the lane's skipped wait
 * too, one more than it drew. */
static ordo_stream_t *to_fail;

static ordo_status_t fail_now(void *ctx) {
    (void)ctx;
    return ordo_fail(ORDO_ERR_ABORTED, "made to fail");
}

static ordo_status_t launch_fails_the_other_lane(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    if (to_fail) {
        assert_ok(ordo_stream_host_task(to_fail, fail_now, NULL));
        assert_status(ordo_stream_synchronize(to_fail, test_deadline()), ORDO_ERR_ABORTED);
    }
    return ordo_stream_host_task(stream, busy_task, NULL);
}

static void a_broken_replay_counts_the_waits_it_enqueued(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    char path[128];
    temp_path(path, sizeof path, "broken-replay");
    hop_t h;
    hop_run(&h);
    ordo_access_t write = {h.buffer, ORDO_ACCESS_WRITE}, read = {h.buffer, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_record_begin(h.tracker));
    assert_ok(ordo_tracker_submit(h.tracker, h.a, &write, 1, launch_fails_the_other_lane, NULL));
    assert_ok(ordo_tracker_submit(h.tracker, h.b, &read, 1, launch, NULL));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(h.tracker, &graph));
    ordo_tracker_metrics_t before, after;
    assert_ok(ordo_tracker_metrics(h.tracker, &before));
    assert_ok(ordo_trace_start(NULL));
    to_fail = h.b;
    assert_status(ordo_graph_replay(graph), ORDO_ERR_ABORTED);
    to_fail = NULL;
    assert_ok(ordo_stream_synchronize(h.a, test_deadline()));
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_ok(ordo_tracker_metrics(h.tracker, &after));
    assert_int_equal(stats.flows, after.waits_emitted - before.waits_emitted);
    assert_ok(ordo_graph_destroy(graph));
    hop_free(&h);
    remove(path);
}

/* The virtual size of this process, in KiB (from /proc/self/status). */
static unsigned long long vm_size_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmSize: %llu kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

/* Records n instants on this thread. */
static void instants(uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        assert_ok(ordo_trace_instant("edge"));
    }
}

/* max_events is rounded up to whole chunks of 4096 events: 1 and 4096 keep
 * one chunk, 4097 two; the rest is dropped and counted. */
static void max_events_edges(void **state) {
    (void)state;
    static const struct {
        uint64_t max_events, kept;
    } cases[] = {{1, 4096}, {4095, 4096}, {4096, 4096}, {4097, 8192}, {8192, 8192}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        ordo_trace_config_t config = {cases[i].max_events, 0};
        assert_ok(ordo_trace_start(&config));
        instants(cases[i].kept + 100);
        ordo_trace_stats_t stats;
        assert_ok(ordo_trace_stop(NULL, &stats));
        assert_int_equal(stats.events, cases[i].kept);
        assert_int_equal(stats.dropped, 100);
    }
}

/* Room that can be mapped but not backed: start maps it without touching
 * more than its first part, stop gives it all back, and a start that cannot
 * map its room leaves tracing off and the next start working. */
static void huge_max_events(void **state) {
    (void)state;
    unsigned long long before = vm_size_kib();
    ordo_trace_config_t huge = {(uint64_t)1 << 36, 0}; /* about 3.8 TB of room */
    ordo_status_t st = ordo_trace_start(&huge);
    if (st == ORDO_OK) {
        assert_true(vm_size_kib() > before + (1ull << 30)); /* mapped */
        instants(10000);
        ordo_trace_stats_t stats;
        assert_ok(ordo_trace_stop(NULL, &stats));
        assert_int_equal(stats.events, 10000);
        assert_int_equal(stats.dropped, 0);
        assert_true(vm_size_kib() < before + (1ull << 20)); /* and given back */
    } else {
        assert_int_equal(st, ORDO_ERR_OUT_OF_MEMORY);
    }
    /* Past the address space, but no overflow in bytes. */
    ordo_trace_config_t unmappable = {(uint64_t)1 << 50, 0};
    assert_status(ordo_trace_start(&unmappable), ORDO_ERR_OUT_OF_MEMORY);
    bool on = 1;
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    /* Just past what size_t can count in bytes. */
    ordo_trace_config_t overflow = {(uint64_t)1 << 60, 0};
    assert_status(ordo_trace_start(&overflow), ORDO_ERR_OUT_OF_RANGE);
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    ordo_trace_config_t small = {4096, 0};
    assert_ok(ordo_trace_start(&small));
    instants(10);
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(NULL, &stats));
    assert_int_equal(stats.events, 10);
    assert_true(vm_size_kib() < before + (1ull << 20));
}

typedef struct filler {
    uint64_t count;
    _Atomic int *go;
} filler_t;

static void *fill_main(void *arg) {
    filler_t *f = arg;
    while (!atomic_load(f->go)) {
    }
    for (uint64_t i = 0; i < f->count; ++i) {
        (void)ordo_trace_instant("fill");
    }
    return NULL;
}

/* Threads that run out of room together: every chunk is filled, every
 * event recorded or counted as dropped, none twice. */
static void threads_exhaust_room_together(void **state) {
    (void)state;
    enum { THREADS = 4, CHUNKS = 4 };
    ordo_trace_config_t config = {CHUNKS * 4096, 0};
    assert_ok(ordo_trace_start(&config));
    _Atomic int go = 0;
    filler_t fillers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        fillers[i] = (filler_t){CHUNKS * 4096 + 1000, &go};
        threads[i] = test_thread_start(fill_main, &fillers[i]);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < THREADS; ++i) {
        pthread_join(threads[i], NULL);
    }
    char path[128];
    temp_path(path, sizeof path, "exhaust");
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.events, CHUNKS * 4096);
    assert_int_equal(stats.events + stats.dropped, THREADS * (CHUNKS * 4096 + 1000));
    check_trace_file(path);
}

/* A host task that stops the trace and starts the next one from a stream's
 * worker, while another stream keeps recording. */
typedef struct restart_ctx {
    const char *path;
    ordo_status_t stopped, started;
} restart_ctx_t;

static ordo_status_t restart_task(void *ctx) {
    restart_ctx_t *r = ctx;
    r->stopped = ordo_trace_stop(r->path, NULL);
    r->started = ordo_trace_start(NULL);
    return ORDO_OK;
}

static void restart_from_host_task(void **state) {
    (void)state;
    char first[128], second[128];
    temp_path(first, sizeof first, "task-first");
    temp_path(second, sizeof second, "task-second");
    ordo_stream_t *a = NULL, *b = NULL;
    assert_ok(ordo_stream_create(device, 0, &a));
    assert_ok(ordo_stream_create(device, 0, &b));
    assert_ok(ordo_trace_start(NULL));
    for (int i = 0; i < 50; ++i) {
        assert_ok(ordo_stream_host_task(b, busy_task, NULL));
    }
    restart_ctx_t r = {first, ORDO_ERR_INTERNAL, ORDO_ERR_INTERNAL};
    assert_ok(ordo_stream_host_task(a, busy_task, NULL));
    assert_ok(ordo_stream_host_task(a, restart_task, &r));
    assert_ok(ordo_stream_host_task(a, busy_task, NULL));
    for (int i = 0; i < 50; ++i) {
        assert_ok(ordo_stream_host_task(b, busy_task, NULL));
    }
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_ok(r.stopped);
    assert_ok(r.started);
    assert_ok(ordo_trace_stop(second, NULL));
    check_trace_file(first);
    check_trace_file(second);
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
}

/* How often needle occurs in text. */
static size_t occurrences(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle)) {
        ++n;
    }
    return n;
}

/* A program slice open when a trace stops does not carry over: in the next
 * trace its end is ignored, and the slices made there balance on their
 * own; a begin dropped for want of room leaves its end out too. */
static void slices_across_restarts(void **state) {
    (void)state;
    char path[128];
    temp_path(path, sizeof path, "depth");
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_trace_slice_begin("left open"));
    assert_ok(ordo_trace_slice_begin("left open too"));
    assert_ok(ordo_trace_stop(NULL, NULL));
    assert_ok(ordo_trace_slice_end()); /* while off: nothing */
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_trace_slice_end()); /* began in the last trace */
    assert_ok(ordo_trace_slice_begin("outer"));
    assert_ok(ordo_trace_slice_begin("inner"));
    assert_ok(ordo_trace_slice_end());
    assert_ok(ordo_trace_slice_end());
    assert_ok(ordo_trace_slice_end()); /* one too many */
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.events, 4);
    char *text = read_file(path);
    assert_int_equal(occurrences(text, "\"ph\":\"B\""), 2);
    assert_int_equal(occurrences(text, "\"ph\":\"E\""), 2);
    assert_null(strstr(text, "left open"));
    free(text);
    check_trace_file(path);

    /* A full trace drops a begin; in the next, the last event that fits is
     * a begin, its end is dropped: the slice ends with the trace. */
    ordo_trace_config_t one_chunk = {1, 0};
    assert_ok(ordo_trace_start(&one_chunk));
    instants(4096);
    assert_ok(ordo_trace_slice_begin("dropped"));
    assert_ok(ordo_trace_stop(NULL, &stats));
    assert_int_equal(stats.dropped, 1);
    assert_ok(ordo_trace_start(&one_chunk));
    instants(4095);
    assert_ok(ordo_trace_slice_begin("last to fit"));
    assert_ok(ordo_trace_slice_end());
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.events, 4096);
    assert_int_equal(stats.dropped, 1);
    text = read_file(path);
    assert_int_equal(occurrences(text, "\"ph\":\"B\""), 1);
    assert_int_equal(occurrences(text, "\"ph\":\"E\""), 1);
    free(text);
    check_trace_file(path);
}

typedef struct toggler {
    _Atomic int *stop;
    int rounds;
} toggler_t;

static void *toggle_main(void *arg) {
    toggler_t *t = arg;
    ordo_trace_config_t config = {64 * 1024, 0};
    while (!atomic_load(t->stop)) {
        if (ordo_trace_start(&config) == ORDO_OK) {
            (void)ordo_trace_stop(NULL, NULL);
            ++t->rounds;
        }
    }
    return NULL;
}

/* A child forked while other threads record, start and stop traces goes on
 * tracing alone: it can stop the trace it inherited, or start and stop its
 * own (the other threads are gone; a stop must not wait for them, nor a
 * call for a lock one of them held). Each child is given the test wait
 * bound (TEST_WAIT_MS). */
static void trace_in_forked_child(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    _Atomic int stop = 0;
    recorder_t recorders[2] = {{&stop, 0}, {&stop, 0}};
    toggler_t toggler = {&stop, 0};
    pthread_t threads[3];
    for (int i = 0; i < 2; ++i) {
        threads[i] = test_thread_start(record_main, &recorders[i]);
    }
    threads[2] = test_thread_start(toggle_main, &toggler);
    int failed_round = -1, hung = 0;
    for (int round = 0; round < (int)test_scaled(32) && failed_round < 0; ++round) {
        test_sleep_ms(1);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            alarm(TEST_WAIT_MS / 1000);
            bool on = 0;
            ordo_trace_config_t config = {4096, 0};
            int ok = ordo_trace_is_on(&on) == ORDO_OK &&
                     (on || ordo_trace_start(&config) == ORDO_OK) &&
                     ordo_trace_instant("in the child") == ORDO_OK &&
                     ordo_trace_stop(NULL, NULL) == ORDO_OK;
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed_round = round;
            hung = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; ++i) {
        pthread_join(threads[i], NULL);
    }
    bool on = 0;
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    if (failed_round >= 0) {
        fail_msg("the child of fork %d %s", failed_round, hung ? "hung" : "failed");
    }
}

/* Names are the program's bytes: the trace must stay valid JSON, UTF-8
 * included, whatever they hold and wherever a long one is cut. */
static void names_stay_valid_json(void **state) {
    (void)state;
    static const char *const names[] = {
        "quote \" backslash \\ slash /",
        "controls \x01\x1f tab\t newline\n del \x7f",
        "stray \xff\xfe bytes",
        "cut \xe2\x82",
        "overlong \xc0\xaf",
        "surrogate \xed\xa0\x80",
        "beyond \xf4\x90\x80\x80",
        "valid \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
    };
    char longs[4][400];
    /* Long names cut at every alignment of a multi-byte character or an
     * escape against the limit. */
    static const char *const units[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\\"};
    for (size_t u = 0; u < 4; ++u) {
        size_t n = 0;
        while (n + strlen(units[u]) < sizeof longs[u]) {
            memcpy(longs[u] + n, units[u], strlen(units[u]));
            n += strlen(units[u]);
        }
        longs[u][n] = '\0';
    }
    char path[128], summary[256];
    temp_path(path, sizeof path, "names");
    for (size_t shift = 0; shift < 4; ++shift) {
        assert_ok(ordo_trace_start(NULL));
        for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
            assert_ok(ordo_trace_slice_begin(names[i]));
            assert_ok(ordo_trace_instant(names[i]));
            assert_ok(ordo_trace_counter(names[i], 1));
            assert_ok(ordo_trace_slice_end());
        }
        for (size_t u = 0; u < 4; ++u) {
            assert_ok(ordo_trace_instant(longs[u] + shift));
            assert_ok(ordo_trace_counter(longs[u] + shift, 2));
        }
        assert_ok(ordo_trace_stop(path, NULL));
        if (!check(path, summary, sizeof summary)) {
            fail_msg("invalid trace with odd names (shift %zu): %s", shift, summary);
        }
    }
    remove(path);
}

/* A trace that cannot be written fully is an error, not a truncated file
 * reported as written; tracing is off after it and starts again. */
static void write_failure_is_reported(void **state) {
    (void)state;
    for (int events = 0; events <= 20000; events += 20000) {
        assert_ok(ordo_trace_start(NULL));
        for (int i = 0; i < events; ++i) {
            assert_ok(ordo_trace_instant("fill the disk"));
        }
        ordo_trace_stats_t stats;
        ordo_status_t st = ordo_trace_stop("/dev/full", &stats);
        assert_int_not_equal(st, ORDO_OK);
        assert_non_null(strstr(ordo_error_message(), "/dev/full"));
        assert_int_equal(stats.events, (uint64_t)events);
        bool on = 1;
        assert_ok(ordo_trace_is_on(&on));
        assert_int_equal(on, 0);
    }
    /* A path that is a directory cannot be opened. */
    assert_ok(ordo_trace_start(NULL));
    assert_int_not_equal(ordo_trace_stop("/tmp", NULL), ORDO_OK);
    assert_ok(ordo_trace_start(NULL));
    assert_ok(ordo_trace_stop(NULL, NULL));
}

/* An export that cannot allocate still writes what it can, a valid trace,
 * and says what it left out: ORDO_ERR_OUT_OF_MEMORY, not ORDO_OK. */
static void export_out_of_memory_is_reported(void **state) {
    (void)state;
    char path[128];
    temp_path(path, sizeof path, "oom");
    /* The table of open slices: its first block, or its second once the
     * first has grown. */
    const unsigned table_sites[] = {TRACE_EXPORT_ALLOC_SLICES, TRACE_EXPORT_ALLOC_SLICE_DEPTHS};
    for (size_t i = 0; i < sizeof table_sites / sizeof table_sites[0]; ++i) {
        assert_ok(ordo_trace_start(NULL));
        assert_ok(ordo_trace_slice_begin("my phase"));
        assert_ok(ordo_trace_instant("inside"));
        assert_ok(ordo_trace_slice_end());
        ordo__trace_export_fail_allocs(table_sites[i]);
        ordo_trace_stats_t stats;
        ordo_status_t st = ordo_trace_stop(path, &stats);
        ordo__trace_export_fail_allocs(0);
        assert_int_equal(st, ORDO_ERR_OUT_OF_MEMORY);
        assert_non_null(strstr(ordo_error_message(), "1 slice(s) of program threads"));
        assert_non_null(strstr(ordo_error_message(), path));
        assert_int_equal(stats.events, 3);
        char *text = read_file(path);
        assert_null(strstr(text, "my phase"));
        assert_non_null(strstr(text, "inside"));
        free(text);
        check_trace_file(path);
    }
    /* The flow arrows. */
    TEST_SKIP_IF_LISTED();
    assert_ok(ordo_trace_start(NULL));
    hop_t hop;
    hop_run(&hop);
    assert_ok(ordo_trace_slice_begin("kept"));
    assert_ok(ordo_trace_slice_end());
    ordo__trace_export_fail_allocs(TRACE_EXPORT_ALLOC_FLOWS);
    ordo_trace_stats_t stats;
    ordo_status_t st = ordo_trace_stop(path, &stats);
    ordo__trace_export_fail_allocs(0);
    assert_int_equal(st, ORDO_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(ordo_error_message(), "every flow arrow"));
    assert_null(strstr(ordo_error_message(), "slice"));
    assert_int_equal(stats.flows, 0);
    char *text = read_file(path);
    assert_null(strstr(text, "inserted wait"));
    assert_non_null(strstr(text, "kept"));
    free(text);
    check_trace_file(path);
    hop_free(&hop);
}

/* The largest "dur" in a trace's text, in microseconds. */
static double longest_duration(const char *text) {
    double longest = 0;
    for (const char *p = strstr(text, "\"dur\":"); p; p = strstr(p + 1, "\"dur\":")) {
        double d = strtod(p + 6, NULL);
        longest = d > longest ? d : longest;
    }
    return longest;
}

/* A stream's op is timed as trace_now() - start, the two read on whatever
 * CPUs the worker ran on; counters a hair apart make that difference wrap.
 * The export must not draw such an op for centuries, and a track's device
 * name goes into the file escaped like any other. */
static void skewed_durations_and_odd_device_names(void **state) {
    (void)state;
    static int stream; /* a track: any address */
    char path[128];
    temp_path(path, sizeof path, "skew");
    assert_ok(ordo_trace_start(NULL));
    trace_event_t track = {trace_now(), 0, &stream, NULL, 0, 0, TRACE_TRACK, 0};
    memcpy(&track.a, "dev\"ice\\\x01\xc3", 8);
    memcpy(&track.b,
           "\xa9\xe2\x82\xac"
           "12\xe2\x82",
           8); /* ends mid-character */
    assert_true(ordo__trace_record(&track));
    uint64_t now = trace_now();
    trace_event_t slice = {now, (uint64_t)0 - 5, &stream, "host task", 0, 0, TRACE_SLICE, 0};
    assert_true(ordo__trace_record(&slice));
    slice.ts = now + 10;
    slice.dur = 3;
    assert_true(ordo__trace_record(&slice));
    assert_ok(ordo_trace_stop(path, NULL));
    char summary[256];
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace: %s", summary);
    }
    char *text = read_file(path);
    /* The whole trace spans milliseconds: no slice lasts a second. */
    double longest = longest_duration(text);
    free(text);
    remove(path);
    if (longest > 1e6) {
        fail_msg("a slice lasts %g us", longest);
    }
}

typedef struct short_lived {
    int begin;
    uint32_t tid;
} short_lived_t;

static void *short_lived_main(void *arg) {
    short_lived_t *s = arg;
    s->tid = (uint32_t)syscall(SYS_gettid);
    if (s->begin) {
        (void)ordo_trace_slice_begin("left open at exit");
    }
    (void)ordo_trace_instant("short-lived");
    return NULL;
}

/* Threads that record and exit: their events stay in the trace (an open
 * slice ends with it), and their records are taken over by later threads
 * rather than piling up for the life of the process. */
static void exited_threads_records_reused(void **state) {
    (void)state;
    enum { THREADS = 64 };
    char path[128], summary[256];
    temp_path(path, sizeof path, "exited");
    assert_ok(ordo_trace_start(NULL));
    pthread_t th;
    short_lived_t first = {1, 0};
    assert_int_equal(pthread_create(&th, NULL, short_lived_main, &first), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    size_t records = ordo__trace_thread_records();
    short_lived_t later = {0, 0};
    for (int i = 0; i < THREADS; ++i) {
        assert_int_equal(pthread_create(&th, NULL, short_lived_main, &later), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
    }
    assert_true(ordo__trace_thread_records() <= records + 1);
    ordo_trace_stats_t stats;
    assert_ok(ordo_trace_stop(path, &stats));
    assert_int_equal(stats.events, 2 + THREADS);
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace: %s", summary);
    }
    /* The first thread's slice, on its own track, ended with the trace. */
    char *text = read_file(path);
    char begin[96], end[96];
    snprintf(begin, sizeof begin, "{\"ph\":\"B\",\"pid\":2,\"tid\":%u,", first.tid);
    snprintf(end, sizeof end, "{\"ph\":\"E\",\"pid\":2,\"tid\":%u,", first.tid);
    assert_non_null(strstr(text, begin));
    assert_non_null(strstr(text, end));
    free(text);
    remove(path);
}

typedef struct churn {
    _Atomic int stop;
    _Atomic int failed;
} churn_t;

static void *churn_main(void *arg) {
    churn_t *c = arg;
    while (!atomic_load(&c->stop)) {
        pthread_t th;
        short_lived_t s = {1, 0};
        if (pthread_create(&th, NULL, short_lived_main, &s) != 0 || pthread_join(th, NULL) != 0) {
            atomic_store(&c->failed, 1);
            break;
        }
    }
    return NULL;
}

/* Threads exiting and new ones taking over their records while traces start
 * and stop: every trace stays valid (run under ThreadSanitizer). */
static void thread_churn_races_stop(void **state) {
    (void)state;
    char path[128], summary[256];
    temp_path(path, sizeof path, "churn");
    churn_t c = {0, 0};
    pthread_t th[2];
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c), 0);
    }
    ordo_deadline_t deadline = ordo_deadline_after_ms(2000);
    int rounds = 0;
    while (rounds < 200 / ORDO_TEST_SCALE_DIVISOR &&
           (rounds < 5 || ordo_time_now_ns() < deadline)) {
        assert_ok(ordo_trace_start(NULL));
        assert_ok(ordo_trace_instant("round"));
        int write = rounds % 10 == 0;
        assert_ok(ordo_trace_stop(write ? path : NULL, NULL));
        if (write && !check(path, summary, sizeof summary)) {
            atomic_store(&c.stop, 1);
            fail_msg("invalid trace in round %d: %s", rounds, summary);
        }
        ++rounds;
    }
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    assert_int_equal(atomic_load(&c.failed), 0);
    /* Two churning threads (and the few the program has): the records do
     * not pile up with the threads made. */
    assert_true(ordo__trace_thread_records() < 64);
    remove(path);
}

/* A program that set a locale whose decimal separator is a comma still
 * gets JSON numbers ("1.5", not "1,5"). Skipped where no such locale is
 * installed (LOCPATH may point at one made with localedef). */
static void numbers_ignore_the_locale(void **state) {
    (void)state;
    static const char *const locales[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE",      "fr_FR.UTF-8",
                                          "fr_FR.utf8",  "fr_FR",      "ru_RU.UTF-8"};
    char saved[256];
    snprintf(saved, sizeof saved, "%s", setlocale(LC_NUMERIC, NULL));
    int found = 0;
    for (size_t i = 0; !found && i < sizeof locales / sizeof locales[0]; ++i) {
        found = setlocale(LC_NUMERIC, locales[i]) && localeconv()->decimal_point[0] != '.';
    }
    if (!found) {
        setlocale(LC_NUMERIC, saved);
        skip();
    }
    char path[128], summary[256];
    temp_path(path, sizeof path, "locale");
    ordo_status_t started = ordo_trace_start(NULL);
    for (int i = 0; started == ORDO_OK && i < 10; ++i) {
        (void)ordo_trace_slice_begin("comma");
        (void)ordo_trace_counter("comma", i);
        (void)ordo_trace_slice_end();
    }
    ordo_status_t stopped = started == ORDO_OK ? ordo_trace_stop(path, NULL) : started;
    setlocale(LC_NUMERIC, saved); /* the checker reads numbers with strtod */
    assert_ok(started);
    assert_ok(stopped);
    if (!check(path, summary, sizeof summary)) {
        fail_msg("invalid trace under a comma locale: %s", summary);
    }
    remove(path);
}

/* ---- bad input: trace.h (tests/refusal.h) */

static void trace_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    bool on = 7;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_is_on, NULL);
    ordo_trace_stats_t stats;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, stats, ordo_trace_stop, NULL, &stats);
    ordo_trace_config_t absurd = {UINT64_MAX, 0};
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_trace_start, &absurd);
    /* Room beyond any address space: refused, whichever the class. */
    ordo_trace_config_t huge = {UINT64_MAX / 64, 0};
    REFUSED(ORDO_ERR_OUT_OF_MEMORY, ordo_trace_start, &huge);
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    ordo_trace_config_t small = {4096, 0};
    assert_ok(ordo_trace_start(&small));
    REFUSED(ORDO_ERR_BUSY, ordo_trace_start, &small);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_slice_begin, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_instant, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_counter, NULL, 1);
    /* An end without a begin is ignored. */
    assert_ok(ordo_trace_slice_end());
    assert_ok(ordo_trace_instant("mark"));
    /* A path that cannot be written: an error, and the trace is over. */
    ordo_status_t st = ordo_trace_stop("/nonexistent-ordo-directory/trace.json", &stats);
    assert_int_not_equal(st, ORDO_OK);
    check_message("ordo_trace_stop", "unwritable path", __LINE__);
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_stop, NULL, NULL);
}

int main(void) {
    test_conformance_begin("trace");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traced_program_is_valid),
        cmocka_unit_test(limits_and_misuse),
        cmocka_unit_test(stop_races_recorders),
        cmocka_unit_test(start_and_stop_race_each_other),
        cmocka_unit_test(checker_refuses_bad_traces),
        cmocka_unit_test(host_task_marks_keep_slices_in_place),
        cmocka_unit_test(op_across_restart_is_cut),
        cmocka_unit_test(many_threads_balance),
        cmocka_unit_test(flows_join_their_own_round),
        cmocka_unit_test(graph_replays_draw_their_waits),
        cmocka_unit_test(a_broken_replay_counts_the_waits_it_enqueued),
        cmocka_unit_test(max_events_edges),
        cmocka_unit_test(huge_max_events),
        cmocka_unit_test(threads_exhaust_room_together),
        cmocka_unit_test(restart_from_host_task),
        cmocka_unit_test(slices_across_restarts),
        cmocka_unit_test(trace_in_forked_child),
        cmocka_unit_test(names_stay_valid_json),
        cmocka_unit_test(write_failure_is_reported),
        cmocka_unit_test(export_out_of_memory_is_reported),
        cmocka_unit_test(skewed_durations_and_odd_device_names),
        cmocka_unit_test(exited_threads_records_reused),
        cmocka_unit_test(streams_made_in_turn_have_tracks_of_their_own),
        cmocka_unit_test(thread_churn_races_stop),
        cmocka_unit_test(numbers_ignore_the_locale),
        cmocka_unit_test(trace_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
