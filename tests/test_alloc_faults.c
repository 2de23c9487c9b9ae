/* Host allocations failing at every point of short programs over the public
 * API, on the CPU backend. Each scenario is run once with nothing failing
 * (to count its allocations), then once per allocation k with the k-th
 * failing, then once per k with every allocation from the k-th on failing.
 * Every call must succeed or refuse with a memory status and a message
 * naming it; a refused call leaves nothing half done (a refused submission
 * ran nothing and can be made again); no wait outlives its deadline; and
 * once a scenario has torn down what it made, the allocator holds as many
 * blocks as before it. */
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "ordo/barrier.h"
#include "ordo/coordinator.h"
#include "ordo/memory.h"
#include "ordo/memory_adaptors.h"
#include "ordo/shared_signal.h"
#include "ordo/signal_fd.h"
#include "ordo/stall.h"
#include "ordo/trace.h"
#include "ordo/waiter.h"
#include "test_util.h"

/* ---- an allocator that fails on demand ------------------------------------------------- */

enum { FAULT_OFF, FAULT_ONE, FAULT_FROM };

static _Atomic int fault_mode = FAULT_OFF;
static _Atomic long fault_at;   /* the allocation that fails (FAULT_ONE) or the first that does */
static _Atomic long alloc_seen; /* allocations since the scenario began */
static _Atomic long faults_injected;

static void *failing_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    long n = atomic_fetch_add(&alloc_seen, 1);
    int mode = atomic_load(&fault_mode);
    long at = atomic_load(&fault_at);
    if ((mode == FAULT_ONE && n == at) || (mode == FAULT_FROM && n >= at)) {
        atomic_fetch_add(&faults_injected, 1);
        return NULL;
    }
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static void failing_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user;
    (void)size;
    (void)alignment;
    free(block);
}

/* What the scenario being run is at, for failure messages. */
static const char *current_scenario = "";
static long current_k = -1;

/* A public call's outcome: true when it succeeded. A refusal must carry a
 * memory status and a message naming the call. */
static bool check_call(ordo_status_t st, const char *call, int line) {
    if (st == ORDO_OK) {
        return true;
    }
    const char *msg = ordo_error_message();
    if (st != ORDO_ERR_OUT_OF_MEMORY && st != ORDO_ERR_RESOURCE_EXHAUSTED) {
        fail_msg("%s, allocation %ld (mode %d), line %d: %s returned %s (%s)", current_scenario,
                 current_k, atomic_load(&fault_mode), line, call, ordo_status_name(st), msg);
    }
    if (!msg[0] || !strstr(msg, call)) {
        fail_msg("%s, allocation %ld (mode %d), line %d: %s returned %s with the message '%s'",
                 current_scenario, current_k, atomic_load(&fault_mode), line, call,
                 ordo_status_name(st), msg);
    }
    return false;
}

/* TRY(fn, args...): the call may be refused for want of memory. */
#define TRY(fn, ...) check_call(fn(__VA_ARGS__), #fn, __LINE__)

/* MUST(fn, args...): the call must succeed (teardown, reading state). */
#define MUST(fn, ...)                                                                              \
    do {                                                                                           \
        ordo_status_t must_ = fn(__VA_ARGS__);                                                     \
        if (must_ != ORDO_OK) {                                                                    \
            fail_msg("%s, allocation %ld (mode %d), line %d: %s returned %s (%s)",                 \
                     current_scenario, current_k, atomic_load(&fault_mode), __LINE__, #fn,         \
                     ordo_status_name(must_), ordo_error_message());                               \
        }                                                                                          \
    } while (0)

/* Teardown frees what the scenario made: in the pass where every later
 * allocation fails, it runs with allocations working again (a teardown
 * that needs memory is found by the single-failure pass). */
static void teardown_begin(void) {
    if (atomic_load(&fault_mode) == FAULT_FROM) {
        atomic_store(&fault_mode, FAULT_OFF);
    }
}

/* Runs fn(args...) with allocations working: what a scenario must undo
 * in the pass where every later allocation fails (a refused free, made
 * again). */
#define WITHOUT_FAULTS(fn, ...)                                                                    \
    do {                                                                                           \
        int mode_ = atomic_exchange(&fault_mode, FAULT_OFF);                                       \
        MUST(fn, __VA_ARGS__);                                                                     \
        atomic_store(&fault_mode, mode_);                                                          \
    } while (0)

/* Polls an observable counter until it reaches want or the deadline. */
static bool counter_reaches(_Atomic long *counter, long want) {
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(counter) < want) {
        if (ordo_deadline_remaining_ns(deadline) == 0) {
            return false;
        }
        sched_yield();
    }
    return true;
}

static ordo_status_t count_task(void *ctx) {
    atomic_fetch_add((_Atomic long *)ctx, 1);
    return ORDO_OK;
}

/* A host task made on stream; a refused one ran nothing and is made once
 * more. Returns how many were enqueued (0, 1). */
static long host_task_retried(ordo_stream_t *stream, _Atomic long *counter) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (TRY(ordo_stream_host_task, stream, count_task, counter)) {
            return 1;
        }
    }
    return 0;
}

/* ---- the sweep ------------------------------------------------------------------------- */

/* Beyond this many allocation points, every SAMPLE_STRIDE-th is swept (the
 * suite stays within seconds under ThreadSanitizer). */
enum { SWEEP_DENSE = 400, SAMPLE_STRIDE = 7 };

static void run_once(void (*scenario)(void), int mode, long k) {
    size_t before = 0, after = 0;
    assert_ok(ordo_allocator_live_blocks(&before));
    current_k = k;
    atomic_store(&alloc_seen, 0);
    atomic_store(&fault_at, k);
    atomic_store(&fault_mode, mode);
    scenario();
    atomic_store(&fault_mode, FAULT_OFF);
    /* A library thread may still hold a handle the scenario released (the
     * shared signals' engine pins each handle for a moment on every pass):
     * its last reference goes there, a little later. */
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        assert_ok(ordo_allocator_live_blocks(&after));
        if (after == before || ordo_deadline_remaining_ns(deadline) == 0) {
            break;
        }
        sched_yield();
    }
    if (after != before) {
        fail_msg("%s, allocation %ld (mode %d): %zu blocks live after the scenario, %zu before",
                 current_scenario, k, mode, after, before);
    }
}

static void sweep(const char *name, void (*scenario)(void)) {
    current_scenario = name;
    run_once(scenario, FAULT_OFF, -1);
    long total = atomic_load(&alloc_seen);
    long swept = 0;
    for (int mode = FAULT_ONE; mode <= FAULT_FROM; ++mode) {
        for (long k = 0; k <= total; k += k < SWEEP_DENSE ? 1 : SAMPLE_STRIDE) {
            run_once(scenario, mode, k);
            ++swept;
        }
    }
    print_message("%s: %ld allocations, %ld runs\n", name, total, swept);
}

static int suite_setup(void **state) {
    (void)state;
    ordo_allocator_t hooks = {failing_allocate, failing_deallocate, NULL};
    return ordo_allocator_set(&hooks) == ORDO_OK ? 0 : -1;
}

static int suite_teardown(void **state) {
    (void)state;
    return ordo_allocator_set(NULL) == ORDO_OK ? 0 : -1;
}

/* ---- (1) signals, timepoints, links, signal fds, wait-any ----------------------------- */

static void on_timepoint(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    if (status == ORDO_OK) {
        atomic_fetch_add((_Atomic long *)ctx, 1);
    }
}

static void scenario_signals(void) {
    ordo_signal_t *a = NULL, *b = NULL;
    ordo_signal_fd_t *fd = NULL;
    TRY(ordo_signal_create, 0, &a);
    TRY(ordo_signal_create, 0, &b);
    _Atomic long fired = 0;
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    ordo_link_t link = {0};
    bool linked = false;
    if (a) {
        TRY(ordo_signal_set_name, a, "alpha");
        MUST(ordo_timepoint_arm, &tp, a, 1, on_timepoint, (void *)&fired);
    }
    if (a && b) {
        MUST(ordo_link_arm, &link, a, 1, b, 5);
        linked = true;
    }
    if (b) {
        TRY(ordo_signal_fd_create, b, 5, &fd);
    }
    if (a) {
        MUST(ordo_signal_advance, a, 1);
        assert_int_equal(atomic_load(&fired), 1);
    }
    if (b && !linked) {
        MUST(ordo_signal_advance, b, 5);
    }
    if (a && b) {
        ordo_signal_point_t points[] = {{a, 2}, {b, 5}};
        size_t index = 9;
        MUST(ordo_signal_wait_any, points, 2, test_deadline(), &index);
        assert_int_equal(index, 1);
        points[0].value = 1;
        MUST(ordo_signal_wait_all, points, 2, test_deadline());
    }
    if (fd) {
        int descriptor = -1;
        MUST(ordo_signal_fd_get, fd, &descriptor);
        struct pollfd p = {.fd = descriptor, .events = POLLIN};
        assert_int_equal(poll(&p, 1, TEST_WAIT_MS), 1);
        MUST(ordo_signal_fd_result, fd);
    }
    teardown_begin();
    if (fd) {
        MUST(ordo_signal_fd_destroy, fd);
    }
    if (a) {
        MUST(ordo_signal_release, a);
    }
    if (b) {
        MUST(ordo_signal_release, b);
    }
}

static void signals_timepoints_links_fds(void **state) {
    (void)state;
    sweep("signals", scenario_signals);
}

/* ---- (2) the asynchronous waiter ------------------------------------------------------- */

typedef struct wait_count {
    _Atomic long calls;
    _Atomic long ok;
    _Atomic long timed_out;
} wait_count_t;

static void on_wait(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    wait_count_t *count = ctx;
    if (status == ORDO_OK) {
        atomic_fetch_add(&count->ok, 1);
    } else if (status == ORDO_ERR_TIMEOUT) {
        atomic_fetch_add(&count->timed_out, 1);
    }
    atomic_fetch_add(&count->calls, 1);
}

static void scenario_waiter(void) {
    ordo_waiter_t *waiter = NULL;
    ordo_signal_t *s = NULL;
    ordo_waiter_config_t config;
    MUST(ordo_waiter_config_default, &config);
    config.worker_threads = 2;
    ordo_device_t *device = NULL;
    ordo_stream_t *stream = NULL;
    ordo_event_t *event = NULL;
    TRY(ordo_waiter_create, &config, &waiter);
    TRY(ordo_signal_create, 0, &s);
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        TRY(ordo_stream_create, device, 0, &stream);
        TRY(ordo_event_create, device, ORDO_EVENT_PLAIN, &event);
    }
    wait_count_t count = {0};
    long registered = 0, cancelled = 0, want_ok = 0, want_timeout = 0;
    if (waiter && s) {
        ordo_wait_id_t id = 0;
        /* Reached at registration, inline. */
        if (TRY(ordo_waiter_wait, waiter, s, 0, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE, on_wait,
                &count, &id)) {
            ++registered;
            ++want_ok;
        }
        /* Reached later, on a worker, within its deadline. */
        if (TRY(ordo_waiter_wait, waiter, s, 1, test_deadline(), 0, on_wait, &count, &id)) {
            ++registered;
            ++want_ok;
        }
        /* Times out. */
        if (TRY(ordo_waiter_wait, waiter, s, 100, ordo_deadline_after_ms(1), 0, on_wait, &count,
                &id)) {
            ++registered;
            ++want_timeout;
        }
        /* Cancelled before it resolves. */
        if (TRY(ordo_waiter_wait, waiter, s, 200, ORDO_DEADLINE_NEVER, 0, on_wait, &count, &id)) {
            ordo_cancel_result_t result;
            MUST(ordo_waiter_cancel, waiter, id, true, &result);
            assert_int_equal(result, ORDO_CANCEL_PREVENTED);
            ++cancelled;
        }
        MUST(ordo_signal_advance, s, 1);
        if (!counter_reaches(&count.calls, registered)) {
            fail_msg("waiter, allocation %ld (mode %d): %ld of %ld callbacks ran", current_k,
                     atomic_load(&fault_mode), atomic_load(&count.calls), registered);
        }
        assert_int_equal(atomic_load(&count.ok), want_ok);
        assert_int_equal(atomic_load(&count.timed_out), want_timeout);
        /* A stream's point, through an event. */
        if (stream && event && TRY(ordo_event_record, event, stream) &&
            TRY(ordo_waiter_wait_event, waiter, event, test_deadline(), 0, on_wait, &count, &id)) {
            ++registered;
            ++want_ok;
            if (!counter_reaches(&count.calls, registered)) {
                fail_msg("waiter, allocation %ld (mode %d): the event's callback did not run",
                         current_k, atomic_load(&fault_mode));
            }
            assert_int_equal(atomic_load(&count.ok), want_ok);
        }
        /* Pending at destroy: cancelled by it. */
        TRY(ordo_waiter_wait, waiter, s, 300, ORDO_DEADLINE_NEVER, 0, on_wait, &count, NULL);
    }
    (void)cancelled;
    teardown_begin();
    if (waiter) {
        MUST(ordo_waiter_destroy, waiter);
    }
    if (s) {
        MUST(ordo_signal_release, s);
    }
    if (event) {
        MUST(ordo_event_destroy, event);
    }
    if (stream) {
        MUST(ordo_stream_destroy, stream);
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void waiter_with_deadlines(void **state) {
    (void)state;
    sweep("waiter", scenario_waiter);
}

/* ---- (3) devices, streams, events, host tasks ----------------------------------------- */

static void scenario_streams(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *s1 = NULL, *s2 = NULL;
    ordo_event_t *event = NULL;
    ordo_signal_t *signal = NULL;
    _Atomic long runs = 0;
    long want = 0;
    if (TRY(ordo_device_create_owned, "cpu:0", NULL, &device)) {
        TRY(ordo_stream_create, device, 0, &s1);
        TRY(ordo_stream_create, device, 0, &s2);
        TRY(ordo_event_create, device, ORDO_EVENT_TIMING, &event);
    }
    TRY(ordo_signal_create, 0, &signal);
    if (s1) {
        TRY(ordo_stream_set_name, s1, "first");
        for (int i = 0; i < 3; ++i) {
            want += host_task_retried(s1, &runs);
        }
    }
    bool signalled = false;
    if (s1 && signal) {
        signalled = TRY(ordo_stream_signal, s1, signal, 1);
    }
    if (s2 && signal && signalled) {
        TRY(ordo_stream_wait, s2, signal, 1);
    }
    bool recorded = s1 && event && TRY(ordo_event_record, event, s1);
    if (recorded && s2) {
        TRY(ordo_stream_wait_event, s2, event);
    }
    if (s2) {
        want += host_task_retried(s2, &runs);
    }
    if (s1) {
        MUST(ordo_stream_synchronize, s1, test_deadline());
    }
    if (s2) {
        MUST(ordo_stream_synchronize, s2, test_deadline());
    }
    if (recorded) {
        MUST(ordo_event_synchronize, event, test_deadline());
    }
    assert_int_equal(atomic_load(&runs), want);
    teardown_begin();
    if (event) {
        MUST(ordo_event_destroy, event);
    }
    if (s1) {
        MUST(ordo_stream_destroy, s1);
    }
    if (s2) {
        MUST(ordo_stream_destroy, s2);
    }
    if (signal) {
        MUST(ordo_signal_release, signal);
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void devices_streams_events_tasks(void **state) {
    (void)state;
    sweep("streams", scenario_streams);
}

/* ---- (4) the tracker ------------------------------------------------------------------- */

static void reclaimed(void *ctx) {
    atomic_fetch_add((_Atomic long *)ctx, 1);
}

/* A submission through the tracker; a refused one ran nothing and is made
 * once more. */
static long submit_retried(ordo_tracker_t *tracker, ordo_stream_t *stream,
                           const ordo_access_t *accesses, size_t count, _Atomic long *runs) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (TRY(ordo_tracker_submit_host, tracker, stream, accesses, count, count_task, runs)) {
            return 1;
        }
    }
    return 0;
}

static void scenario_tracker(void) {
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *s[3] = {NULL, NULL, NULL};
    ordo_buffer_t *x = NULL, *y = NULL;
    _Atomic long runs = 0, reclaims = 0;
    long want = 0, want_reclaims = 0;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        TRY(ordo_tracker_create, device, &tracker);
        for (int i = 0; i < 3; ++i) {
            TRY(ordo_stream_create, device, 0, &s[i]);
        }
    }
    if (tracker) {
        TRY(ordo_buffer_create, tracker, &x);
        TRY(ordo_buffer_create, tracker, &y);
    }
    if (x && y && s[0] && s[1] && s[2]) {
        ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
        ordo_access_t rx_wy[] = {{x, ORDO_ACCESS_READ}, {y, ORDO_ACCESS_WRITE}};
        ordo_access_t ry = {y, ORDO_ACCESS_READ};
        want += submit_retried(tracker, s[0], &wx, 1, &runs);
        want += submit_retried(tracker, s[1], rx_wy, 2, &runs);
        want += submit_retried(tracker, s[2], &ry, 1, &runs);
        /* The split form: a refused prepare holds nothing; finish whatever
         * was prepared. */
        ordo_access_t wxy[] = {{x, ORDO_ACCESS_WRITE}, {y, ORDO_ACCESS_WRITE}};
        if (TRY(ordo_tracker_prepare, tracker, s[2], wxy, 2)) {
            want += host_task_retried(s[2], &runs);
            MUST(ordo_tracker_finish, tracker, s[2], wxy, 2);
        }
        want += submit_retried(tracker, s[0], &ry, 1, &runs);
    }
    if (x) {
        if (TRY(ordo_buffer_release, x, reclaimed, (void *)&reclaims)) {
            ++want_reclaims;
            x = NULL;
        }
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
    }
    assert_int_equal(atomic_load(&runs), want);
    teardown_begin();
    if (x) {
        MUST(ordo_buffer_release, x, reclaimed, (void *)&reclaims);
        ++want_reclaims;
    }
    if (y) {
        MUST(ordo_buffer_release, y, reclaimed, (void *)&reclaims);
        ++want_reclaims;
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
        assert_int_equal(atomic_load(&reclaims), want_reclaims);
        MUST(ordo_tracker_destroy, tracker);
    }
    for (int i = 0; i < 3; ++i) {
        if (s[i]) {
            MUST(ordo_stream_destroy, s[i]);
        }
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void tracker_across_three_streams(void **state) {
    (void)state;
    sweep("tracker", scenario_tracker);
}

/* ---- (5) graphs ------------------------------------------------------------------------ */

static void scenario_graph(void) {
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *a = NULL, *b = NULL;
    ordo_buffer_t *x = NULL, *y = NULL, *z = NULL;
    ordo_graph_t *graph = NULL;
    _Atomic long runs = 0;
    long want = 0, tasks = 0;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        TRY(ordo_tracker_create, device, &tracker);
        TRY(ordo_stream_create, device, 0, &a);
        TRY(ordo_stream_create, device, 0, &b);
    }
    if (tracker) {
        TRY(ordo_buffer_create, tracker, &x);
        TRY(ordo_buffer_create, tracker, &y);
        TRY(ordo_buffer_create, tracker, &z);
    }
    if (a && b && x && y && z && TRY(ordo_tracker_record_begin, tracker)) {
        ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
        ordo_access_t rx_wy[] = {{x, ORDO_ACCESS_READ}, {y, ORDO_ACCESS_WRITE}};
        /* A refused capture leaves no trace in the graph: it is made again. */
        tasks = submit_retried(tracker, a, &wx, 1, &runs);
        tasks += submit_retried(tracker, b, rx_wy, 2, &runs);
        TRY(ordo_tracker_record_end, tracker, &graph);
        assert_int_equal(atomic_load(&runs), 0);
    }
    if (graph) {
        ordo_graph_info_t info;
        MUST(ordo_graph_info, graph, &info);
        assert_int_equal(info.tasks, (uint64_t)tasks);
        for (int r = 0; r < 2; ++r) {
            if (TRY(ordo_graph_replay, graph)) {
                want += tasks;
            }
        }
        if (tasks > 0) { /* the same context: its index is built on the way */
            TRY(ordo_graph_set_task_context, graph, (uint64_t)tasks - 1, (void *)&runs);
        }
        bool rebound = TRY(ordo_graph_rebind, graph, x, z);
        if (TRY(ordo_graph_replay, graph)) {
            want += tasks;
        }
        MUST(ordo_graph_info, graph, &info);
        assert_int_equal(info.replays * (uint64_t)tasks, (uint64_t)want);
        ordo_buffer_t *bound = NULL;
        ordo_access_mode_t mode;
        MUST(ordo_graph_buffer, graph, 0, &bound, &mode);
        assert_ptr_equal(bound, rebound ? z : x);
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
    }
    assert_int_equal(atomic_load(&runs), want);
    teardown_begin();
    if (graph) {
        MUST(ordo_graph_destroy, graph);
    }
    ordo_buffer_t *buffers[] = {x, y, z};
    for (int i = 0; i < 3; ++i) {
        if (buffers[i]) {
            MUST(ordo_buffer_release, buffers[i], NULL, NULL);
        }
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
        MUST(ordo_tracker_destroy, tracker);
    }
    if (a) {
        MUST(ordo_stream_destroy, a);
    }
    if (b) {
        MUST(ordo_stream_destroy, b);
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void graphs_record_replay_rebind(void **state) {
    (void)state;
    sweep("graph", scenario_graph);
}

/* ---- (6) stream-ordered memory --------------------------------------------------------- */

static void scenario_memory(void) {
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *s[2] = {NULL, NULL};
    ordo_mem_resource_t *direct = NULL, *pool = NULL;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        TRY(ordo_tracker_create, device, &tracker);
        TRY(ordo_stream_create, device, 0, &s[0]);
        TRY(ordo_stream_create, device, 0, &s[1]);
        TRY(ordo_mem_direct_create, device, &direct);
    }
    if (tracker && direct) {
        ordo_mem_pool_config_t config;
        MUST(ordo_mem_pool_config_default, &config);
        config.chunk_bytes = 1 << 16;
        TRY(ordo_mem_pool_create, tracker, direct, &config, &pool);
    }
    if (pool && s[0] && s[1]) {
        ordo_block_t *blocks[3] = {NULL, NULL, NULL};
        void *ptr = NULL;
        TRY(ordo_mem_allocate, pool, 4096, 0, s[0], 1, &blocks[0], &ptr);
        TRY(ordo_mem_allocate, pool, 8192, 0, s[1], 2, &blocks[1], &ptr);
        if (blocks[0]) {
            /* Freed on the other stream: reused after s[1] has run it. */
            if (!TRY(ordo_mem_deallocate, pool, blocks[0], s[1])) {
                WITHOUT_FAULTS(ordo_mem_deallocate, pool, blocks[0], s[1]);
            }
        }
        TRY(ordo_mem_allocate, pool, 4096, 0, s[0], 3, &blocks[2], &ptr);
        for (int i = 1; i < 3; ++i) {
            if (blocks[i] && !TRY(ordo_mem_deallocate, pool, blocks[i], s[0])) {
                WITHOUT_FAULTS(ordo_mem_deallocate, pool, blocks[i], s[0]);
            }
        }
        MUST(ordo_stream_synchronize, s[0], test_deadline());
        MUST(ordo_stream_synchronize, s[1], test_deadline());
        MUST(ordo_mem_reap_pending, pool, test_deadline());
        uint64_t outstanding = 1;
        MUST(ordo_mem_bytes_outstanding, pool, &outstanding);
        assert_int_equal(outstanding, 0);
        TRY(ordo_mem_pool_trim, pool, 0);
    }
    if (direct && s[0]) {
        /* A stream-ordered free straight to the device's memory. */
        ordo_block_t *block = NULL;
        void *ptr = NULL;
        if (TRY(ordo_mem_allocate, direct, 256, 0, s[0], 4, &block, &ptr) &&
            !TRY(ordo_mem_deallocate, direct, block, s[0])) {
            WITHOUT_FAULTS(ordo_mem_deallocate, direct, block, s[0]);
        }
        MUST(ordo_stream_synchronize, s[0], test_deadline());
        MUST(ordo_mem_reap_pending, direct, test_deadline());
    }
    teardown_begin();
    if (pool) {
        MUST(ordo_mem_reap_pending, pool, test_deadline());
        MUST(ordo_mem_resource_destroy, pool);
    }
    if (direct) {
        MUST(ordo_mem_resource_destroy, direct);
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
        MUST(ordo_tracker_destroy, tracker);
    }
    for (int i = 0; i < 2; ++i) {
        if (s[i]) {
            MUST(ordo_stream_destroy, s[i]);
        }
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void memory_pool_across_streams(void **state) {
    (void)state;
    sweep("memory", scenario_memory);
}

/* ---- (7) barriers and stall reports ---------------------------------------------------- */

static void scenario_barrier(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *s[3] = {NULL, NULL, NULL};
    ordo_barrier_t *barrier = NULL;
    ordo_signal_t *gate = NULL;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        for (int i = 0; i < 3; ++i) {
            TRY(ordo_stream_create, device, 0, &s[i]);
        }
    }
    bool all = s[0] && s[1] && s[2];
    if (all) {
        TRY(ordo_barrier_create, s, 3, ORDO_BARRIER_SCHEME_AUTO, &barrier);
    }
    if (barrier) {
        /* A refused arrival leaves nothing behind that a later one, or
         * the streams' own work, would wait on forever. */
        for (int i = 0; i < 3; ++i) {
            TRY(ordo_barrier_arrive, barrier);
        }
        MUST(ordo_barrier_synchronize, barrier, test_deadline(), NULL);
        for (int i = 0; i < 3; ++i) {
            MUST(ordo_stream_synchronize, s[i], test_deadline());
        }
    }
    if (all) {
        TRY(ordo_barrier_streams, s, 3);
        TRY(ordo_barrier_synchronize_streams, s, 3, test_deadline(), NULL);
    }
    TRY(ordo_signal_create, 0, &gate);
    if (gate && s[0] && TRY(ordo_stream_wait, s[0], gate, 1)) {
        /* Stream 0 may still pass barrier waits ahead of the gate's (its
         * synchronize above may have been refused): a wait met as the
         * snapshot is taken is not reported, so the report is polled. */
        ordo_stall_entry_t entries[4];
        size_t count = 0;
        ordo_deadline_t deadline = test_deadline();
        while (TRY(ordo_stall_report, device, entries, 4, &count) && count == 0) {
            assert_true(ordo_time_now_ns() < deadline);
            test_sleep_ms(1);
        }
        char text[1024];
        size_t len = 0;
        TRY(ordo_stall_report_format, device, text, sizeof text, &len);
        ordo_stall_holder_t holder;
        TRY(ordo_stall_holder, device, gate, 1, &holder);
    }
    teardown_begin();
    if (gate) {
        MUST(ordo_signal_advance, gate, 1);
    }
    if (barrier) {
        MUST(ordo_barrier_destroy, barrier);
    }
    for (int i = 0; i < 3; ++i) {
        if (s[i]) {
            MUST(ordo_stream_synchronize, s[i], test_deadline());
            MUST(ordo_stream_destroy, s[i]);
        }
    }
    if (gate) {
        MUST(ordo_signal_release, gate);
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void barriers_and_stall_reports(void **state) {
    (void)state;
    sweep("barrier", scenario_barrier);
}

/* ---- (8) a trace of tracker work, exported -------------------------------------------- */

static char trace_dir[64];

static void scenario_trace(void) {
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *a = NULL, *b = NULL;
    ordo_buffer_t *x = NULL;
    _Atomic long runs = 0;
    long want = 0;
    bool on = TRY(ordo_trace_start, NULL);
    if (TRY(ordo_tracker_open, "cpu:0", &tracker)) {
        TRY(ordo_tracker_stream_create, tracker, 0, &a);
        TRY(ordo_tracker_stream_create, tracker, 0, &b);
        TRY(ordo_buffer_create, tracker, &x);
    }
    if (a && b && x) {
        ordo_access_t wx = {x, ORDO_ACCESS_WRITE};
        ordo_access_t rx = {x, ORDO_ACCESS_READ};
        want += submit_retried(tracker, a, &wx, 1, &runs);
        want += submit_retried(tracker, b, &rx, 1, &runs);
    }
    if (on) {
        MUST(ordo_trace_instant, "mark");
    }
    if (x && TRY(ordo_buffer_release, x, NULL, NULL)) {
        x = NULL;
    }
    if (tracker) {
        MUST(ordo_tracker_synchronize, tracker, test_deadline());
    }
    assert_int_equal(atomic_load(&runs), want);
    if (on) {
        char path[128];
        snprintf(path, sizeof path, "%s/trace.json", trace_dir);
        ordo_trace_stats_t stats;
        TRY(ordo_trace_stop, path, &stats);
        unlink(path);
    }
    teardown_begin();
    if (x) {
        MUST(ordo_buffer_release, x, NULL, NULL);
    }
    if (tracker) {
        MUST(ordo_tracker_close, tracker, test_deadline());
    }
}

static void trace_start_and_export(void **state) {
    (void)state;
    snprintf(trace_dir, sizeof trace_dir, "/tmp/ordo-alloc-faults-XXXXXX");
    assert_non_null(mkdtemp(trace_dir));
    sweep("trace", scenario_trace);
    rmdir(trace_dir);
}

/* ---- (9) named shared signals in one process ------------------------------------------ */

static char shared_name[64];

static void scenario_shared(void) {
    ordo_signal_t *made = NULL, *opened = NULL;
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    config.name = shared_name;
    if (TRY(ordo_shared_signal_create, &config, &made)) {
        TRY(ordo_shared_signal_open_name, shared_name, &opened);
        TRY(ordo_shared_signal_register, made);
        MUST(ordo_signal_advance, made, 3);
    }
    if (opened) {
        MUST(ordo_signal_wait, opened, 3, test_deadline());
    }
    teardown_begin();
    if (made) {
        MUST(ordo_shared_signal_unregister, made);
        MUST(ordo_shared_signal_unlink, shared_name);
        MUST(ordo_signal_release, made);
    }
    if (opened) {
        MUST(ordo_signal_release, opened);
    }
}

static void named_shared_signals(void **state) {
    (void)state;
    snprintf(shared_name, sizeof shared_name, "/ordo-alloc-faults-%d", (int)getpid());
    sweep("shared", scenario_shared);
}

/* ---- (10) a stack of memory adaptors under a budget ------------------------------------ */

static void scenario_adaptors(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *s[2] = {NULL, NULL};
    ordo_mem_resource_t *direct = NULL, *guard = NULL, *budget = NULL, *stats = NULL;
    bool limited = false;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        TRY(ordo_stream_create, device, 0, &s[0]);
        TRY(ordo_stream_create, device, 0, &s[1]);
        TRY(ordo_mem_direct_create, device, &direct);
        limited = TRY(ordo_mem_budget_set_limit, device, 1u << 20);
    }
    if (direct) {
        ordo_mem_guard_config_t config;
        MUST(ordo_mem_guard_config_default, &config);
        config.quarantine_blocks = 2;
        TRY(ordo_mem_guard_create, direct, &config, &guard);
    }
    if (guard) {
        TRY(ordo_mem_budget_create, guard, NULL, &budget);
    }
    if (budget) {
        TRY(ordo_mem_statistics_create, budget, &stats);
    }
    if (stats && s[0] && s[1]) {
        ordo_block_t *blocks[3] = {NULL, NULL, NULL};
        void *ptr = NULL;
        for (int i = 0; i < 3; ++i) {
            if (TRY(ordo_mem_allocate, stats, 1000u * (unsigned)(i + 1), 0, s[i % 2], (uint32_t)i,
                    &blocks[i], &ptr)) {
                memset(ptr, i, 1000u * (unsigned)(i + 1));
            }
        }
        /* Over the budget's limit: refused with the exhausted status. */
        ordo_block_t *big = NULL;
        ordo_status_t st = ordo_mem_allocate(stats, 2u << 20, 0, s[0], 7, &big, &ptr);
        if (check_call(st, "ordo_mem_allocate", __LINE__) && limited) {
            fail_msg("%s, allocation %ld: 2 MiB under a 1 MiB budget was handed out",
                     current_scenario, current_k);
        }
        if (big) {
            WITHOUT_FAULTS(ordo_mem_deallocate, stats, big, s[0]);
        }
        /* Freed on the other stream, and on the own stream. */
        ordo_stream_t *free_on[3] = {s[1], s[1], s[0]};
        for (int i = 0; i < 3; ++i) {
            if (blocks[i] && !TRY(ordo_mem_deallocate, stats, blocks[i], free_on[i])) {
                WITHOUT_FAULTS(ordo_mem_deallocate, stats, blocks[i], free_on[i]);
            }
        }
        MUST(ordo_stream_synchronize, s[0], test_deadline());
        MUST(ordo_stream_synchronize, s[1], test_deadline());
        MUST(ordo_mem_reap_pending, stats, test_deadline());
        uint64_t outstanding = 1;
        MUST(ordo_mem_bytes_outstanding, stats, &outstanding);
        assert_int_equal(outstanding, 0);
        ordo_mem_statistics_t counts;
        MUST(ordo_mem_statistics_get, stats, &counts);
        assert_int_equal(counts.overall.current_blocks, 0);
        ordo_mem_guard_report_t report;
        MUST(ordo_mem_guard_check, guard, &report);
        assert_int_equal(report.total, 0);
        assert_int_equal(report.live_blocks, 0);
        ordo_mem_budget_stats_t account;
        MUST(ordo_mem_budget_stats, device, &account);
        assert_int_equal(account.charged, 0);
    }
    teardown_begin();
    ordo_mem_resource_t *stack[4] = {stats, budget, guard, direct};
    for (int i = 0; i < 4; ++i) {
        if (stack[i]) {
            MUST(ordo_mem_reap_pending, stack[i], test_deadline());
            MUST(ordo_mem_resource_destroy, stack[i]);
        }
    }
    for (int i = 0; i < 2; ++i) {
        if (s[i]) {
            MUST(ordo_stream_destroy, s[i]);
        }
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void memory_adaptors_under_a_budget(void **state) {
    (void)state;
    sweep("adaptors", scenario_adaptors);
}

/* ---- (11) a coordinator over a stream pool --------------------------------------------- */

static ordo_status_t launch_count_task(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, count_task, ctx);
}

static void on_op_finished(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    (void)op;
    (void)status;
    atomic_fetch_add((_Atomic long *)ctx, 1);
}

static void scenario_coordinator(void) {
    ordo_device_t *device = NULL;
    ordo_stream_pool_t *pool = NULL;
    ordo_coord_t *coord = NULL;
    if (TRY(ordo_device_open, "cpu:0", &device)) {
        ordo_stream_pool_config_t config;
        MUST(ordo_stream_pool_config_default, &config);
        config.compute_streams = 2;
        config.transfer_streams = 1;
        TRY(ordo_stream_pool_create, device, &config, &pool);
    }
    if (pool) {
        ordo_coord_config_t config;
        MUST(ordo_coord_config_default, &config);
        config.stream_pool = pool;
        TRY(ordo_coord_create, device, &config, &coord);
    }
    _Atomic long ran = 0, finished = 0;
    long callbacks = 0;
    if (coord) {
        /* a; b (a transfer) after a; c after both; then c before a is refused. */
        ordo_op_id_t ops[3] = {0, 0, 0};
        ordo_op_type_t types[3] = {ORDO_OP_KERNEL, ORDO_OP_TRANSFER, ORDO_OP_REDUCTION};
        for (int i = 0; i < 3; ++i) {
            ordo_op_desc_t desc = {.type = types[i],
                                   .deps = ops,
                                   .dep_count = (size_t)i,
                                   .description = "step",
                                   .launch = launch_count_task,
                                   .launch_ctx = (void *)&ran};
            if (!TRY(ordo_coord_register, coord, &desc, &ops[i])) {
                break;
            }
            if (TRY(ordo_coord_on_complete, coord, ops[i], on_op_finished, (void *)&finished)) {
                ++callbacks;
            }
        }
        if (ops[2]) {
            ordo_status_t st = ordo_coord_add_dependency(coord, ops[0], ops[2]);
            if (st != ORDO_ERR_DEADLOCK) {
                check_call(st, "ordo_coord_add_dependency", __LINE__);
            }
        }
        /* Each dispatch launches what became ready; a refused one is made again. */
        for (int round = 0; round < 6; ++round) {
            size_t launched = 0;
            TRY(ordo_coord_dispatch, coord, 8, &launched);
            MUST(ordo_coord_drain, coord, test_deadline());
        }
        /* An op driven by hand on a stream of the pool. */
        ordo_op_id_t by_hand = 0;
        ordo_op_desc_t desc = {.type = ORDO_OP_SYNCHRONIZATION, .deps = ops, .dep_count = 1};
        if (ops[0] && TRY(ordo_coord_register, coord, &desc, &by_hand)) {
            ordo_stream_t *stream = NULL;
            MUST(ordo_coord_op_stream, coord, by_hand, &stream);
            if (TRY(ordo_coord_begin, coord, by_hand)) {
                host_task_retried(stream, &ran);
                TRY(ordo_coord_complete, coord, by_hand);
            }
        }
        MUST(ordo_coord_drain, coord, test_deadline());
        ordo_coord_metrics_t metrics;
        MUST(ordo_coord_metrics, coord, &metrics);
    }
    teardown_begin();
    if (coord) {
        MUST(ordo_coord_destroy, coord);
        /* Every callback added ran once: when its op finished, or cancelled. */
        assert_int_equal(atomic_load(&finished), callbacks);
    }
    if (pool) {
        MUST(ordo_stream_pool_destroy, pool);
    }
    if (device) {
        MUST(ordo_device_release, device);
    }
}

static void coordinator_over_a_stream_pool(void **state) {
    (void)state;
    sweep("coordinator", scenario_coordinator);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(signals_timepoints_links_fds),
        cmocka_unit_test(waiter_with_deadlines),
        cmocka_unit_test(devices_streams_events_tasks),
        cmocka_unit_test(tracker_across_three_streams),
        cmocka_unit_test(graphs_record_replay_rebind),
        cmocka_unit_test(memory_pool_across_streams),
        cmocka_unit_test(barriers_and_stall_reports),
        cmocka_unit_test(trace_start_and_export),
        cmocka_unit_test(named_shared_signals),
        cmocka_unit_test(memory_adaptors_under_a_budget),
        cmocka_unit_test(coordinator_over_a_stream_pool),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
