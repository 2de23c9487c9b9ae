/* Stall reports: a deliberate cycle of waits reported as unreachable and
 * released by a host signal or after the test's own deadlines; reachable
 * waits name the stream that releases them (through chains, event waits
 * and failures); idle and busy streams are not reported; long queues;
 * signal and stream names; bad input; reports taken while streams come
 * and go. */
#include <stdatomic.h>
#include <string.h>

#include "refusal.h"
#include "test_util.h"

static ordo_device_t *device;

static int setup(void **state) {
    (void)state;
    return ordo_device_create_owned(test_device_name(), NULL, &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

static ordo_stream_t *stream_make(int priority) {
    ordo_stream_t *stream = NULL;
    assert_ok(ordo_stream_create(device, priority, &stream));
    return stream;
}

static ordo_signal_t *named_signal(const char *name) {
    ordo_signal_t *signal = test_signal_make(0);
    assert_ok(ordo_signal_set_name(signal, name));
    return signal;
}

/* Makes waiter wait for an event recorded on recorder now; returns it. */
static ordo_event_t *wait_for_event_of(ordo_stream_t *waiter, ordo_stream_t *recorder) {
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    assert_ok(ordo_event_record(event, recorder));
    assert_ok(ordo_stream_wait_event(waiter, event));
    return event;
}

/* Polls the report until it lists want streams; returns the last count. */
static size_t report_until(ordo_stall_entry_t *entries, size_t capacity, size_t want) {
    size_t count = 0;
    ordo_deadline_t deadline = test_deadline();
    do {
        assert_ok(ordo_stall_report(device, entries, capacity, &count));
        if (count == want) {
            break;
        }
        test_sleep_ms(1);
    } while (ordo_time_now_ns() < deadline);
    return count;
}

static const ordo_stall_entry_t *entry_of(const ordo_stall_entry_t *entries, size_t count,
                                          const ordo_stream_t *stream) {
    for (size_t i = 0; i < count; ++i) {
        if (entries[i].stream == stream) {
            return &entries[i];
        }
    }
    fail_msg("stream %p is not in the report", (const void *)stream);
    return NULL;
}

static char *report_text(void) {
    size_t len = 0;
    assert_ok(ordo_stall_report_format(device, NULL, 0, &len));
    char *text = calloc(1, len + 256);
    size_t again = 0;
    assert_ok(ordo_stall_report_format(device, text, len + 256, &again));
    return text;
}

static size_t lines_of(const char *text) {
    size_t n = 0;
    for (; *text; ++text) {
        n += *text == '\n';
    }
    return n;
}

/* Holds its stream (busy in a host task, not in a wait) until opened;
 * bounded by the test deadline. */
typedef struct gate {
    _Atomic int open;
    _Atomic int entered;
} gate_t;

static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->open) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    return atomic_load(&g->open) ? ORDO_OK : ORDO_ERR_TIMEOUT;
}

static void gate_wait_entered(gate_t *g) {
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->entered) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    assert_true(atomic_load(&g->entered));
}

/* ---- the cycle ------------------------------------------------------------ */

typedef struct cycle {
    ordo_stream_t *a, *b;
    ordo_signal_t *x, *y;
} cycle_t;

/* A waits for X, which B signals after it waits for Y, which A signals
 * after its wait: neither can move. */
static cycle_t cycle_make(void) {
    cycle_t c = {stream_make(0), stream_make(-1), named_signal("X"), named_signal("Y")};
    assert_ok(ordo_stream_wait(c.a, c.x, 1));
    assert_ok(ordo_stream_signal(c.a, c.y, 1));
    assert_ok(ordo_stream_wait(c.b, c.y, 1));
    assert_ok(ordo_stream_signal(c.b, c.x, 1));
    return c;
}

static void cycle_check_reported(const cycle_t *c) {
    ordo_stall_entry_t entries[4];
    assert_int_equal(report_until(entries, 4, 2), 2);
    /* In creation order. */
    assert_ptr_equal(entries[0].stream, c->a);
    assert_ptr_equal(entries[1].stream, c->b);
    assert_int_equal(entries[0].stream_priority, 0);
    assert_int_equal(entries[1].stream_priority, -1);
    assert_ptr_equal(entries[0].signal, c->x);
    assert_ptr_equal(entries[1].signal, c->y);
    assert_string_equal(entries[0].signal_name, "X");
    assert_string_equal(entries[1].signal_name, "Y");
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(entries[i].waited_value, 1);
        assert_int_equal(entries[i].current_value, 0);
        assert_int_equal(entries[i].reach, ORDO_STALL_UNREACHABLE);
        assert_null(entries[i].releasing_stream);
        assert_null(entries[i].progress_of);
    }
    char *text = report_text();
    assert_int_equal(lines_of(text), 2);
    assert_non_null(strstr(text, "\"X\" to reach 1 (now 0)"));
    assert_non_null(strstr(text, "\"Y\" to reach 1 (now 0)"));
    assert_non_null(strstr(text, "UNREACHABLE"));
    print_message("%s", text);
    free(text);
}

static void cycle_destroy(cycle_t *c) {
    assert_ok(ordo_stream_destroy(c->a));
    assert_ok(ordo_stream_destroy(c->b));
    assert_ok(ordo_signal_destroy(c->x));
    assert_ok(ordo_signal_destroy(c->y));
}

static void cycle_released_by_host_signal(void **state) {
    (void)state;
    cycle_t c = cycle_make();
    cycle_check_reported(&c);
    assert_ok(ordo_signal_advance(c.x, 1));
    assert_ok(ordo_stream_synchronize(c.a, test_deadline()));
    assert_ok(ordo_stream_synchronize(c.b, test_deadline()));
    size_t count = 99;
    assert_ok(ordo_stall_report(device, NULL, 0, &count));
    assert_int_equal(count, 0);
    char *text = report_text();
    assert_string_equal(text, "");
    free(text);
    cycle_destroy(&c);
}

/* The test's own waits end at their deadlines instead of hanging; the
 * report still explains why; a watchdog then fails the signal, and the
 * failure travels round the cycle. */
static void cycle_survives_deadlines(void **state) {
    (void)state;
    cycle_t c = cycle_make();
    assert_status(ordo_stream_synchronize(c.a, ordo_deadline_after_ms(30)), ORDO_ERR_TIMEOUT);
    ordo_stream_t *both[2] = {c.a, c.b};
    uint64_t ns = 0;
    assert_status(ordo_barrier_synchronize_streams(both, 2, ordo_deadline_after_ms(30), &ns),
                  ORDO_ERR_TIMEOUT);
    assert_status(ordo_signal_wait(c.y, 1, ordo_deadline_after_ms(10)), ORDO_ERR_TIMEOUT);
    cycle_check_reported(&c);
    assert_ok(ordo_signal_fail(c.x, ORDO_ERR_ABORTED, "watchdog: X never came"));
    assert_status(ordo_stream_synchronize(c.a, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(c.b, test_deadline()), ORDO_ERR_ABORTED);
    size_t count = 99;
    assert_ok(ordo_stall_report(device, NULL, 0, &count));
    assert_int_equal(count, 0);
    cycle_destroy(&c);

    /* Destroying a stalled stream also takes it out of the report. */
    c = cycle_make();
    cycle_check_reported(&c);
    assert_ok(ordo_stream_destroy(c.a));
    /* A's queued signal of Y fails as cancelled; B fails in turn. */
    assert_status(ordo_stream_synchronize(c.b, test_deadline()), ORDO_ERR_CANCELLED);
    assert_ok(ordo_stall_report(device, NULL, 0, &count));
    assert_int_equal(count, 0);
    assert_ok(ordo_stream_destroy(c.b));
    assert_ok(ordo_signal_destroy(c.x));
    assert_ok(ordo_signal_destroy(c.y));
}

/* A stream waiting for itself: only the host can release it. */
static void self_wait_is_unreachable(void **state) {
    (void)state;
    ordo_stream_t *a = stream_make(0);
    ordo_signal_t *x = named_signal("self");
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_signal(a, x, 1));
    ordo_stall_entry_t entries[2];
    assert_int_equal(report_until(entries, 2, 1), 1);
    assert_int_equal(entries[0].reach, ORDO_STALL_UNREACHABLE);
    char *text = report_text();
    char expected[128];
    snprintf(expected, sizeof expected, "UNREACHABLE by enqueued work - held by stream %p: a cycle",
             (void *)a);
    assert_non_null(strstr(text, expected));
    free(text);
    assert_ok(ordo_signal_advance(x, 1));
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_signal_destroy(x));
}

/* An unreachable wait held by a blocked stream names that stream and what
 * it waits for, down to the wait nothing enqueued releases: "loader" waits
 * for a host gate before it signals "batch", which "front" waits for;
 * "back" waits for an event recorded on "front" after its wait. */
static void unreachable_lines_follow_their_holders(void **state) {
    (void)state;
    ordo_stream_t *loader = stream_make(0), *front = stream_make(0), *back = stream_make(0);
    assert_ok(ordo_stream_set_name(loader, "loader"));
    assert_ok(ordo_stream_set_name(front, "front"));
    assert_ok(ordo_stream_set_name(back, "back"));
    ordo_signal_t *disk = named_signal("disk read"), *batch = named_signal("batch");
    assert_ok(ordo_stream_wait(loader, disk, 1));
    assert_ok(ordo_stream_signal(loader, batch, 1));
    assert_ok(ordo_stream_wait(front, batch, 1));
    ordo_event_t *event = wait_for_event_of(back, front);
    ordo_stall_entry_t entries[4];
    size_t count = report_until(entries, 4, 3);
    assert_int_equal(count, 3);
    for (size_t i = 0; i < count; ++i) {
        assert_int_equal(entries[i].reach, ORDO_STALL_UNREACHABLE);
    }
    char *text = report_text();
    print_message("%s", text);
    assert_int_equal(lines_of(text), 3);
    assert_non_null(strstr(text, "stream \"loader\" (priority 0) waits for signal \"disk read\" to "
                                 "reach 1 (now 0): UNREACHABLE by enqueued work - only a host "
                                 "signal, a link or a failure can release it (a deadlock if none "
                                 "comes)\n"));
    const char *holders =
        "held by stream \"loader\", which waits for signal \"disk read\" to reach "
        "1 (now 0) - only a host signal, a link or a failure can release that "
        "(a deadlock if none comes)\n";
    char expected[512];
    snprintf(expected, sizeof expected,
             "stream \"front\" (priority 0) waits for signal \"batch\" to reach 1 (now 0): "
             "UNREACHABLE by enqueued work - %s",
             holders);
    assert_non_null(strstr(text, expected));
    /* The point is the recording's number, which backends count apart. */
    snprintf(expected, sizeof expected,
             "stream \"back\" (priority 0) waits for stream \"front\" to reach point %llu (now "
             "0; an event wait): UNREACHABLE by enqueued work - held by stream \"front\", which "
             "waits for signal \"batch\" to reach 1 (now 0), %s",
             (unsigned long long)entry_of(entries, count, back)->waited_value, holders);
    assert_non_null(strstr(text, expected));
    free(text);
    assert_ok(ordo_signal_advance(disk, 1));
    ordo_stream_t *all[3] = {loader, front, back};
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_synchronize(all[i], test_deadline()));
    }
    assert_ok(ordo_event_destroy(event));
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_destroy(all[i]));
    }
    assert_ok(ordo_signal_destroy(disk));
    assert_ok(ordo_signal_destroy(batch));
}

/* Two streams each waiting for a signal the other raises only after its
 * own wait: each line names the cycle. */
static void unreachable_lines_name_a_cycle(void **state) {
    (void)state;
    cycle_t c = cycle_make();
    assert_ok(ordo_stream_set_name(c.a, "A"));
    assert_ok(ordo_stream_set_name(c.b, "B"));
    cycle_check_reported(&c);
    char *text = report_text();
    print_message("%s", text);
    assert_non_null(strstr(
        text, "stream \"A\" (priority 0) waits for signal \"X\" to reach 1 (now 0): UNREACHABLE by "
              "enqueued work - held by stream \"B\", which waits for signal \"Y\" to reach 1 (now "
              "0), held by stream \"A\": a cycle - only a host signal, a link or a failure can "
              "release a wait in it (a deadlock if none comes)\n"));
    assert_non_null(strstr(
        text, "stream \"B\" (priority -1) waits for signal \"Y\" to reach 1 (now 0): UNREACHABLE "
              "by enqueued work - held by stream \"A\", which waits for signal \"X\" to reach 1 "
              "(now 0), held by stream \"B\": a cycle - only a host signal, a link or a failure "
              "can release a wait in it (a deadlock if none comes)\n"));
    free(text);
    assert_ok(ordo_signal_advance(c.x, 1));
    assert_ok(ordo_stream_synchronize(c.a, test_deadline()));
    assert_ok(ordo_stream_synchronize(c.b, test_deadline()));
    cycle_destroy(&c);
}

/* ---- reachable waits -------------------------------------------------------- */

static void reachable_wait_names_its_releaser(void **state) {
    (void)state;
    ordo_stream_t *a = stream_make(0);
    ordo_stream_t *b = stream_make(0);
    ordo_signal_t *x = named_signal("frame ready");
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_wait(a, x, 2));
    assert_ok(ordo_stream_host_task(b, gate_task, &gate));
    assert_ok(ordo_stream_signal(b, x, 1));
    assert_ok(ordo_stream_signal(b, x, 2));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[2];
    /* B runs a host task: busy, not blocked, so not listed. */
    assert_int_equal(report_until(entries, 2, 1), 1);
    assert_ptr_equal(entries[0].stream, a);
    assert_ptr_equal(entries[0].signal, x);
    assert_int_equal(entries[0].waited_value, 2);
    assert_int_equal(entries[0].reach, ORDO_STALL_REACHABLE);
    assert_ptr_equal(entries[0].releasing_stream, b);
    assert_int_equal(entries[0].releasing_value, 2);
    assert_int_equal(entries[0].release_fails, 0);
    char *text = report_text();
    char expected[128];
    snprintf(expected, sizeof expected, "released when stream %p signals 2", (void *)b);
    assert_non_null(strstr(text, expected));
    assert_non_null(strstr(text, "\"frame ready\""));
    print_message("%s", text);
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    size_t count = 99;
    assert_ok(ordo_stall_report(device, entries, 2, &count));
    assert_int_equal(count, 0);
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(x));
}

/* ordo_stall_holder: A waits for X, then signals Y: Y is held by A (which
 * waits for X), X is raised by nothing enqueued, and once the host raises
 * X, Y is raised by enqueued work; bad input is refused. */
static void holder_names_the_blocked_stream(void **state) {
    (void)state;
    ordo_stream_t *a = stream_make(0);
    ordo_signal_t *x = named_signal("x");
    ordo_signal_t *y = named_signal("y");
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_signal(a, y, 3));
    ordo_stall_entry_t entries[1];
    assert_int_equal(report_until(entries, 1, 1), 1); /* A is blocked */
    ordo_stall_holder_t holder;
    assert_ok(ordo_stall_holder(device, y, 2, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_BLOCKED);
    assert_ptr_equal(holder.stream, a);
    assert_ptr_equal(holder.waits_for, x);
    assert_null(holder.progress_of);
    assert_string_equal(holder.signal_name, "x");
    assert_int_equal(holder.waited_value, 1);
    assert_int_equal(holder.current_value, 0);
    assert_ok(ordo_stall_holder(device, y, 4, &holder)); /* beyond what A brings */
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_NONE);
    assert_null(holder.stream);
    assert_ok(ordo_stall_holder(device, x, 1, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_NONE);
    assert_status(ordo_stall_holder(device, x, ORDO_SIGNAL_VALUE_MAX + 1, &holder),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(ordo_error_message(), "above ORDO_SIGNAL_VALUE_MAX"));
    ordo_signal_t *unused = named_signal("in no queue");
    assert_ok(ordo_stall_holder(device, unused, 1, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_NONE);
    assert_ok(ordo_stall_holder(device, unused, 0, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_RAISED); /* there already */

    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, holder, ordo_stall_holder, NULL, y, 1, &holder);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, holder, ordo_stall_holder, device, NULL, 1, &holder);
    assert_int_equal(ordo_stall_holder(device, y, 1, NULL), ORDO_ERR_INVALID_ARGUMENT);

    assert_ok(ordo_signal_advance(x, 1));
    assert_ok(ordo_signal_wait(y, 3, test_deadline()));
    assert_ok(ordo_stall_holder(device, y, 3, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_RAISED);
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_signal_destroy(x));
    assert_ok(ordo_signal_destroy(y));
    assert_ok(ordo_signal_destroy(unused));
}

/* C (busy) signals Y; B waits for Y, then signals X; A waits for X; D
 * waits for an event recorded on B after its signal. The fixpoint
 * releases all three, each by the right stream. */
static void chains_and_event_waits(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    ordo_stream_t *a = stream_make(0), *b = stream_make(0), *c = stream_make(0),
                  *d = stream_make(0);
    ordo_signal_t *x = named_signal("X"), *y = named_signal("Y");
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_wait(b, y, 1));
    assert_ok(ordo_stream_signal(b, x, 1));
    ordo_event_t *event = wait_for_event_of(d, b);
    assert_ok(ordo_stream_host_task(c, gate_task, &gate));
    assert_ok(ordo_stream_signal(c, y, 1));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[4];
    size_t count = report_until(entries, 4, 3);
    assert_int_equal(count, 3);
    const ordo_stall_entry_t *ea = entry_of(entries, count, a);
    const ordo_stall_entry_t *eb = entry_of(entries, count, b);
    const ordo_stall_entry_t *ed = entry_of(entries, count, d);
    assert_int_equal(ea->reach, ORDO_STALL_REACHABLE);
    assert_ptr_equal(ea->releasing_stream, b);
    assert_int_equal(eb->reach, ORDO_STALL_REACHABLE);
    assert_ptr_equal(eb->releasing_stream, c);
    assert_int_equal(ed->reach, ORDO_STALL_REACHABLE);
    assert_null(ed->signal);
    assert_ptr_equal(ed->progress_of, b);
    assert_ptr_equal(ed->releasing_stream, b);
    assert_int_equal(ed->waited_value, 3); /* B's third operation */
    assert_int_equal(ed->current_value, 0);
    assert_true(ed->releasing_value >= 3);
    char *text = report_text();
    char expected[128];
    snprintf(expected, sizeof expected, "waits for stream %p to reach point 3", (void *)b);
    assert_non_null(strstr(text, expected));
    print_message("%s", text);
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_synchronize(d, test_deadline()));
    assert_ok(ordo_stall_report(device, entries, 4, &count));
    assert_int_equal(count, 0);
    assert_ok(ordo_event_destroy(event));
    ordo_stream_t *all[4] = {a, b, c, d};
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_destroy(all[i]));
    }
    assert_ok(ordo_signal_destroy(x));
    assert_ok(ordo_signal_destroy(y));
}

/* C will fail at a wait on a failed signal, so its queued signal of Y
 * fails Y; B's wait for Y is released by that failure, and so is A's wait
 * for X, which B would signal. */
static void failures_release_as_failures(void **state) {
    (void)state;
    ordo_stream_t *a = stream_make(0), *b = stream_make(0), *c = stream_make(0);
    ordo_signal_t *x = named_signal("X"), *y = named_signal("Y"), *f = named_signal("broken");
    assert_ok(ordo_signal_fail(f, ORDO_ERR_DEVICE, "the device fell over"));
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_wait(b, y, 1));
    assert_ok(ordo_stream_signal(b, x, 1));
    assert_ok(ordo_stream_host_task(c, gate_task, &gate));
    assert_ok(ordo_stream_wait(c, f, 1));
    assert_ok(ordo_stream_signal(c, y, 1));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[3];
    size_t count = report_until(entries, 3, 2);
    assert_int_equal(count, 2);
    const ordo_stall_entry_t *ea = entry_of(entries, count, a);
    const ordo_stall_entry_t *eb = entry_of(entries, count, b);
    assert_int_equal(eb->reach, ORDO_STALL_REACHABLE);
    assert_ptr_equal(eb->releasing_stream, c);
    assert_int_equal(eb->release_fails, 1);
    assert_int_equal(ea->reach, ORDO_STALL_REACHABLE);
    assert_ptr_equal(ea->releasing_stream, b);
    assert_int_equal(ea->release_fails, 1);
    char *text = report_text();
    assert_non_null(strstr(text, "failure propagating"));
    free(text);
    /* The holder agrees: C's queued work fails Y, and B's fails X. */
    ordo_stall_holder_t holder;
    assert_ok(ordo_stall_holder(device, y, 1, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_FAILS);
    assert_ptr_equal(holder.stream, c);
    assert_ok(ordo_stall_holder(device, x, 1, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_FAILS);
    assert_ptr_equal(holder.stream, b);
    assert_ok(ordo_stall_holder(device, f, 1, &holder)); /* failed already */
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_FAILS);
    assert_null(holder.stream);
    assert_ok(ordo_stall_holder(device, f, 0, &holder)); /* reached before it failed */
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_RAISED);
    atomic_store(&gate.open, 1);
    assert_status(ordo_stream_synchronize(a, test_deadline()), ORDO_ERR_DEVICE);
    assert_ok(ordo_stall_report(device, entries, 3, &count));
    assert_int_equal(count, 0);
    ordo_stream_t *all[3] = {a, b, c};
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_destroy(all[i]));
    }
    assert_ok(ordo_signal_destroy(x));
    assert_ok(ordo_signal_destroy(y));
    assert_ok(ordo_signal_destroy(f));
}

/* ---- what is not reported -------------------------------------------------- */

static void idle_and_busy_streams_are_not_reported(void **state) {
    (void)state;
    ordo_stream_t *idle = stream_make(0);
    ordo_stream_t *busy = stream_make(0);
    ordo_stream_t *passed = stream_make(0);
    ordo_signal_t *reached = test_signal_make(5);
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(busy, gate_task, &gate));
    assert_ok(ordo_stream_wait(passed, reached, 5));
    assert_ok(ordo_stream_synchronize(passed, test_deadline()));
    gate_wait_entered(&gate);
    size_t count = 99;
    ordo_stall_entry_t entries[3];
    assert_ok(ordo_stall_report(device, entries, 3, &count));
    assert_int_equal(count, 0);
    char *text = report_text();
    assert_string_equal(text, "");
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_stream_synchronize(busy, test_deadline()));
    assert_ok(ordo_stream_destroy(idle));
    assert_ok(ordo_stream_destroy(busy));
    assert_ok(ordo_stream_destroy(passed));
    assert_ok(ordo_signal_destroy(reached));
}

/* More queued signals than a report inspects: a wait only that unseen
 * work could release is UNKNOWN, not UNREACHABLE. */
static void long_queue_is_unknown(void **state) {
    (void)state;
    enum { MANY = ORDO_STALL_MAX_PENDING + 100 };
    ordo_stream_t *a = stream_make(0), *b = stream_make(0);
    ordo_signal_t *x = named_signal("X"), *busywork = test_signal_make(0);
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_host_task(b, gate_task, &gate));
    for (uint64_t v = 1; v <= MANY; ++v) {
        assert_ok(ordo_stream_signal(b, busywork, v));
    }
    assert_ok(ordo_stream_signal(b, x, 1));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[2];
    assert_int_equal(report_until(entries, 2, 1), 1);
    assert_int_equal(entries[0].reach, ORDO_STALL_UNKNOWN);
    char *text = report_text();
    assert_non_null(strstr(text, "UNKNOWN"));
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(x));
    assert_ok(ordo_signal_destroy(busywork));
}

/* ---- names and bad input ---------------------------------------------------- */

/* A signal's or a stream's name: its address until set, truncated to fit
 * the room and the caller's buffer, cleared by NULL or "", and the bad
 * arguments refused. */
typedef ordo_status_t (*name_set_fn)(void *handle, const char *name);
typedef ordo_status_t (*name_get_fn)(void *handle, char *out_name, size_t capacity);

static ordo_status_t signal_name_set(void *handle, const char *name) {
    return ordo_signal_set_name(handle, name);
}

static ordo_status_t signal_name_get(void *handle, char *out_name, size_t capacity) {
    return ordo_signal_name(handle, out_name, capacity);
}

static ordo_status_t stream_name_set(void *handle, const char *name) {
    return ordo_stream_set_name(handle, name);
}

static ordo_status_t stream_name_get(void *handle, char *out_name, size_t capacity) {
    return ordo_stream_name(handle, out_name, capacity);
}

static void names_behave(void *handle, name_set_fn set, name_get_fn get, size_t room) {
    char name[64];
    char address[32];
    assert_true(room <= sizeof name);
    snprintf(address, sizeof address, "%p", handle);
    assert_ok(get(handle, name, sizeof name));
    assert_string_equal(name, address);
    assert_ok(set(handle, "weights uploaded"));
    assert_ok(get(handle, name, sizeof name));
    assert_string_equal(name, "weights uploaded");
    char small[8];
    assert_ok(get(handle, small, sizeof small));
    assert_string_equal(small, "weights");
    char longer[128];
    memset(longer, 'n', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_ok(set(handle, longer));
    assert_ok(get(handle, name, sizeof name));
    assert_int_equal(strlen(name), room - 1);
    assert_ok(set(handle, NULL));
    assert_ok(get(handle, name, sizeof name));
    assert_string_equal(name, address);
    assert_ok(set(handle, "x"));
    assert_ok(set(handle, ""));
    assert_ok(get(handle, name, sizeof name));
    assert_string_equal(name, address);
    assert_status(set(NULL, "x"), ORDO_ERR_INVALID_HANDLE);
    assert_status(get(NULL, name, sizeof name), ORDO_ERR_INVALID_HANDLE);
    assert_status(get(handle, NULL, sizeof name), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(get(handle, name, 0), ORDO_ERR_INVALID_ARGUMENT);
}

static void signal_names(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    names_behave(s, signal_name_set, signal_name_get, ORDO_SIGNAL_NAME_MAX);
    char name[ORDO_SIGNAL_NAME_MAX];
    assert_ok(ordo_signal_set_name(s, "kept"));
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    assert_status(ordo_signal_set_name(s, "late"), ORDO_ERR_DESTROYED);
    assert_ok(ordo_signal_name(s, name, sizeof name));
    assert_string_equal(name, "kept");
    assert_ok(ordo_signal_release(s));
}

static void stream_names(void **state) {
    (void)state;
    ordo_stream_t *s = stream_make(0);
    names_behave(s, stream_name_set, stream_name_get, ORDO_STREAM_NAME_MAX);
    assert_ok(ordo_stream_destroy(s));
}

/* Named streams appear by name in the entries and the text: the blocked
 * one, the one whose signal releases it, and the recording stream of an
 * event wait. An unnamed stream is still shown by its address. */
static void reports_name_streams(void **state) {
    (void)state;
    ordo_stream_t *consumer = stream_make(0), *producer = stream_make(0),
                  *follower = stream_make(0), *unnamed = stream_make(0);
    assert_ok(ordo_stream_set_name(consumer, "consumer"));
    assert_ok(ordo_stream_set_name(producer, "producer"));
    assert_ok(ordo_stream_set_name(follower, "follower"));
    ordo_signal_t *x = named_signal("X"), *y = named_signal("Y");
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_wait(consumer, x, 1));
    assert_ok(ordo_stream_host_task(producer, gate_task, &gate));
    assert_ok(ordo_stream_signal(producer, x, 1));
    ordo_event_t *event = wait_for_event_of(follower, producer);
    assert_ok(ordo_stream_wait(unnamed, y, 1));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[4];
    size_t count = report_until(entries, 4, 3);
    assert_int_equal(count, 3);
    const ordo_stall_entry_t *ec = entry_of(entries, count, consumer);
    assert_string_equal(ec->stream_name, "consumer");
    assert_string_equal(ec->releasing_stream_name, "producer");
    assert_string_equal(ec->progress_of_name, "");
    const ordo_stall_entry_t *ef = entry_of(entries, count, follower);
    assert_string_equal(ef->stream_name, "follower");
    assert_string_equal(ef->progress_of_name, "producer");
    assert_string_equal(ef->releasing_stream_name, "producer");
    const ordo_stall_entry_t *eu = entry_of(entries, count, unnamed);
    char address[32];
    snprintf(address, sizeof address, "%p", (void *)unnamed);
    assert_string_equal(eu->stream_name, address);
    assert_string_equal(eu->releasing_stream_name, "");
    assert_ok(ordo_signal_set_name(y, "Y \"2\"\n\\"));
    char *text = report_text();
    assert_non_null(strstr(text, "waits for signal \"Y \\\"2\\\"\\x0a\\\\\" to reach 1"));
    size_t lines = 0;
    for (const char *c = text; *c; ++c) {
        lines += *c == '\n';
    }
    assert_int_equal(lines, count); /* the name's newline is escaped */
    assert_non_null(strstr(text, "stream \"consumer\" (priority 0) waits for signal \"X\""));
    assert_non_null(strstr(text, "released when stream \"producer\" signals 1"));
    assert_non_null(strstr(text, "waits for stream \"producer\" to reach point"));
    assert_non_null(strstr(text, "released when stream \"producer\" reaches point"));
    char expected[64];
    snprintf(expected, sizeof expected, "stream %p (priority 0) waits", (void *)unnamed);
    assert_non_null(strstr(text, expected));
    print_message("%s", text);
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_signal_advance(y, 1));
    ordo_stream_t *all[4] = {consumer, producer, follower, unnamed};
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_synchronize(all[i], test_deadline()));
    }
    assert_ok(ordo_event_destroy(event));
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_destroy(all[i]));
    }
    assert_ok(ordo_signal_destroy(x));
    assert_ok(ordo_signal_destroy(y));
}

/* A wait a tracker inserted is shown with its timeline's name: the
 * stream it orders after, as that stream was named when the tracker first
 * used it. */
static ordo_status_t gated_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, gate_task, ctx);
}

static ordo_status_t no_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx, (void)stream;
    return ORDO_OK;
}

static void reports_name_a_trackers_timelines(void **state) {
    (void)state;
    ordo_stream_t *writer = stream_make(0), *reader = stream_make(0);
    assert_ok(ordo_stream_set_name(writer, "writer"));
    ordo_tracker_t *tracker = NULL;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b = NULL;
    assert_ok(ordo_buffer_create(tracker, &b));
    gate_t gate = {0, 0};
    ordo_access_t write = {b, ORDO_ACCESS_WRITE}, read = {b, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(tracker, writer, &write, 1, gated_launch, &gate));
    assert_ok(ordo_tracker_submit(tracker, reader, &read, 1, no_launch, NULL));
    gate_wait_entered(&gate);
    ordo_stall_entry_t entries[2];
    assert_int_equal(report_until(entries, 2, 1), 1);
    assert_ptr_equal(entries[0].stream, reader);
    assert_string_equal(entries[0].signal_name, "tracker timeline of stream writer");
    char *text = report_text();
    assert_non_null(strstr(text, "waits for signal \"tracker timeline of stream writer\""));
    print_message("%s", text);
    free(text);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(writer));
    assert_ok(ordo_stream_destroy(reader));
}

/* A wait the coordinator inserted shows its timeline's name too, and the
 * line follows it to what holds the stream it orders after. */
static void reports_name_a_coordinators_timelines(void **state) {
    (void)state;
    ordo_stream_t *loader = stream_make(0), *compute = stream_make(0);
    assert_ok(ordo_stream_set_name(loader, "loader"));
    assert_ok(ordo_stream_set_name(compute, "compute"));
    ordo_signal_t *disk = named_signal("disk read");
    ordo_coord_t *coord = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    ordo_op_desc_t load = {.type = ORDO_OP_TRANSFER, .stream = loader, .description = "load"};
    ordo_op_id_t a, b;
    assert_ok(ordo_coord_register(coord, &load, &a));
    ordo_op_desc_t forward = {
        .type = ORDO_OP_KERNEL, .stream = compute, .deps = &a, .dep_count = 1};
    assert_ok(ordo_coord_register(coord, &forward, &b));
    assert_ok(ordo_coord_begin(coord, a));
    assert_ok(ordo_stream_wait(loader, disk, 1));
    assert_ok(ordo_coord_complete(coord, a));
    assert_ok(ordo_coord_begin(coord, b));
    assert_ok(ordo_coord_complete(coord, b));
    ordo_stall_entry_t entries[2];
    assert_int_equal(report_until(entries, 2, 2), 2);
    const ordo_stall_entry_t *e = entry_of(entries, 2, compute);
    assert_string_equal(e->signal_name, "coordinator timeline of stream loader");
    char *text = report_text();
    print_message("%s", text);
    assert_non_null(strstr(text, "stream \"compute\" (priority 0) waits for signal \"coordinator "
                                 "timeline of stream loader\" to reach 1 (now 0): UNREACHABLE by "
                                 "enqueued work - held by stream \"loader\", which waits for "
                                 "signal \"disk read\" to reach 1 (now 0) - only"));
    free(text);
    assert_ok(ordo_signal_advance(disk, 1));
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_destroy(loader));
    assert_ok(ordo_stream_destroy(compute));
    assert_ok(ordo_signal_destroy(disk));
}

/* An unnamed signal is shown as an unnamed stream is: by its address,
 * unquoted, so that it is not taken for a signal named like an address. */
static void reports_show_an_unnamed_signal_by_its_address(void **state) {
    (void)state;
    ordo_stream_t *a = stream_make(0);
    ordo_signal_t *x = test_signal_make(0);
    assert_ok(ordo_stream_wait(a, x, 1));
    ordo_stall_entry_t entries[2];
    assert_int_equal(report_until(entries, 2, 1), 1);
    char address[32];
    snprintf(address, sizeof address, "%p", (void *)x);
    assert_string_equal(entries[0].signal_name, address);
    char *text = report_text();
    char expected[64];
    snprintf(expected, sizeof expected, "waits for signal %p to reach 1 (now 0)", (void *)x);
    assert_non_null(strstr(text, expected));
    assert_null(strchr(text, '"'));
    print_message("%s", text);
    free(text);
    assert_ok(ordo_signal_advance(x, 1));
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_signal_destroy(x));
}

static void bad_input_is_refused(void **state) {
    (void)state;
    ordo_stall_entry_t entries[2];
    size_t count = 0;
    char text[16];
    size_t len = 0;
    ordo_signal_t *not_a_device = test_signal_make(0);
    assert_status(ordo_stall_report(NULL, entries, 2, &count), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stall_report((ordo_device_t *)(void *)not_a_device, entries, 2, &count),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stall_report(device, NULL, 2, &count), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stall_report(device, entries, 2, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stall_report_format(NULL, text, sizeof text, &len), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stall_report_format(device, NULL, sizeof text, &len),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stall_report_format(device, text, sizeof text, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_signal_destroy(not_a_device));

    /* Too small: truncated and terminated, ORDO_ERR_OUT_OF_RANGE (as
     * ordo_metrics_format); the full length is reported. Too few entries:
     * the count is still the total. */
    ordo_stream_t *a = stream_make(0), *b = stream_make(0);
    ordo_signal_t *x = named_signal("X");
    assert_ok(ordo_stream_wait(a, x, 1));
    assert_ok(ordo_stream_wait(b, x, 1));
    assert_int_equal(report_until(entries, 2, 2), 2);
    assert_ok(ordo_stall_report(device, entries, 1, &count));
    assert_int_equal(count, 2);
    assert_status(ordo_stall_report_format(device, text, sizeof text, &len), ORDO_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(ordo_error_message(), "ordo_stall_report_format: "));
    assert_true(len > sizeof text);
    assert_int_equal(strlen(text), sizeof text - 1);
    assert_ok(ordo_signal_advance(x, 1));
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(x));
}

/* ---- reports while streams come, go and work -------------------------------- */

typedef struct churn {
    _Atomic int stop;
    _Atomic int rounds;
} churn_t;

static void *churner(void *arg) {
    churn_t *c = arg;
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&c->stop) && ordo_time_now_ns() < deadline) {
        ordo_stream_t *s = NULL;
        ordo_signal_t *x = NULL;
        if (ordo_stream_create(device, 0, &s) != ORDO_OK || ordo_signal_create(0, &x) != ORDO_OK) {
            break;
        }
        /* A wait that the same stream's later signal cannot release, then
         * destroy with the wait in progress or pending. */
        (void)ordo_stream_wait(s, x, 1);
        for (uint64_t v = 2; v < 40; ++v) {
            (void)ordo_stream_signal(s, x, v);
            /* Renamed while reports read the names. */
            (void)ordo_stream_set_name(s, v % 2 ? "churning" : NULL);
        }
        if (atomic_load(&c->rounds) % 2) {
            (void)ordo_signal_advance(x, 1);
        }
        (void)ordo_stream_destroy(s);
        (void)ordo_signal_destroy(x);
        atomic_fetch_add(&c->rounds, 1);
    }
    return NULL;
}

static void reports_while_streams_churn(void **state) {
    (void)state;
    churn_t churn = {0, 0};
    ordo_stream_t *steady = stream_make(0);
    ordo_signal_t *x = named_signal("steady");
    assert_ok(ordo_stream_wait(steady, x, 1));
    pthread_t thread = test_thread_start(churner, &churn);
    const int reports = (int)test_scaled(400);
    const int rounds = (int)test_scaled(40);
    ordo_stall_entry_t entries[8];
    ordo_deadline_t deadline = test_deadline();
    for (int i = 0;
         (i < reports || atomic_load(&churn.rounds) < rounds) && ordo_time_now_ns() < deadline;
         ++i) {
        size_t count = 0;
        assert_ok(ordo_stall_report(device, entries, 8, &count));
        assert_true(count <= 2);
        for (size_t k = 0; k < count && k < 8; ++k) { /* a name, or the address */
            char address[32];
            snprintf(address, sizeof address, "%p", (void *)entries[k].stream);
            assert_true(strcmp(entries[k].stream_name, "churning") == 0 ||
                        strcmp(entries[k].stream_name, address) == 0);
        }
        if (i % 16 == 0) {
            char *text = report_text();
            free(text);
        }
    }
    atomic_store(&churn.stop, 1);
    pthread_join(thread, NULL);
    assert_true(atomic_load(&churn.rounds) >= rounds);
    ordo_stall_entry_t *e = NULL;
    size_t count = report_until(entries, 8, 1);
    assert_int_equal(count, 1);
    e = &entries[0];
    assert_ptr_equal(e->stream, steady);
    assert_ok(ordo_signal_advance(x, 1));
    assert_ok(ordo_stream_synchronize(steady, test_deadline()));
    assert_ok(ordo_stream_destroy(steady));
    assert_ok(ordo_signal_destroy(x));
}

typedef struct reporter {
    _Atomic int stop;
    _Atomic int reports;
} reporter_t;

static void *reporter_main(void *arg) {
    reporter_t *r = arg;
    ordo_stall_entry_t entries[8];
    while (!atomic_load(&r->stop)) {
        size_t count = 0;
        if (ordo_stall_report(device, entries, 8, &count) != ORDO_OK) {
            return (void *)1;
        }
        atomic_fetch_add(&r->reports, 1);
    }
    return NULL;
}

/* The queued signal op holds the last reference to its signal: a report
 * walking the queue while the worker runs that op must not retain the
 * signal after the worker let it go (AddressSanitizer saw a use after
 * free here within a fraction of a second). */
static void reports_while_queued_signals_are_let_go(void **state) {
    (void)state;
    ordo_stream_t *stream = stream_make(0);
    reporter_t r = {0, 0};
    pthread_t thread = test_thread_start(reporter_main, &r);
    const uint64_t ops = test_scaled(40000);
    ordo_deadline_t deadline = test_deadline();
    uint64_t n = 0;
    for (; (n < ops || atomic_load(&r.reports) < 50) && ordo_time_now_ns() < deadline; ++n) {
        ordo_signal_t *signal = NULL;
        assert_ok(ordo_signal_create(0, &signal));
        assert_ok(ordo_stream_signal(stream, signal, 1));
        assert_ok(ordo_signal_release(signal)); /* the op's is the last reference */
        if ((n & 63) == 63) {
            assert_ok(ordo_stream_synchronize(stream, test_deadline()));
        }
    }
    atomic_store(&r.stop, 1);
    void *result = NULL;
    pthread_join(thread, &result);
    assert_null(result);
    assert_true(atomic_load(&r.reports) >= 50);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_stream_destroy(stream));
}

/* A queue seen in part (more waits and signals than a report inspects),
 * stopped at a wait nothing releases: the report's answer for that wait
 * stays exact (the unseen work behind it cannot run), but a signal raised
 * out of sight behind it has an unknown holder, not "nobody". */
static void a_holder_behind_an_unseen_part_is_unknown(void **state) {
    (void)state;
    enum { MANY = ORDO_STALL_MAX_PENDING + 100 };
    ordo_stream_t *stream = stream_make(0);
    ordo_signal_t *gate = named_signal("gate");
    ordo_signal_t *late = named_signal("late");
    ordo_signal_t *busywork = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, gate, 1));
    for (uint64_t v = 1; v <= MANY; ++v) {
        assert_ok(ordo_stream_signal(stream, busywork, v));
    }
    assert_ok(ordo_stream_signal(stream, late, 1));
    ordo_stall_entry_t entries[4];
    assert_int_equal(report_until(entries, 4, 1), 1);
    assert_ptr_equal(entries[0].stream, stream);
    assert_int_equal(entries[0].reach, ORDO_STALL_UNREACHABLE);
    ordo_stall_holder_t holder;
    assert_ok(ordo_stall_holder(device, late, 1, &holder));
    assert_int_equal(holder.hold, ORDO_STALL_HOLD_UNKNOWN);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_signal_destroy(late));
    assert_ok(ordo_signal_destroy(busywork));
}

/* ---- bad input: stall.h (tests/refusal.h) */

static void stall_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_stall_entry_t entries[2];
    size_t count = 9;
    char report[8];
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report, NULL, entries, 2, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report, AS(ordo_device_t, f.s[0]),
                   entries, 2, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_stall_report, f.device, NULL, 2, &count);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stall_report, f.device, entries, 2, NULL);
    assert_ok(ordo_stall_report(f.device, NULL, 0, &count));
    assert_int_equal(count, 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report_format, NULL, report,
                   sizeof report, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report_format,
                   AS(ordo_device_t, f.signal), report, sizeof report, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_stall_report_format, f.device, NULL,
                   sizeof report, &count);
    assert_ok(ordo_stall_report_format(f.device, NULL, 0, &count));
    refusal_fixture_free(&f);
}

int main(void) {
    test_conformance_begin("stall");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cycle_released_by_host_signal),
        cmocka_unit_test(cycle_survives_deadlines),
        cmocka_unit_test(self_wait_is_unreachable),
        cmocka_unit_test(unreachable_lines_follow_their_holders),
        cmocka_unit_test(unreachable_lines_name_a_cycle),
        cmocka_unit_test(reachable_wait_names_its_releaser),
        cmocka_unit_test(chains_and_event_waits),
        cmocka_unit_test(holder_names_the_blocked_stream),
        cmocka_unit_test(failures_release_as_failures),
        cmocka_unit_test(idle_and_busy_streams_are_not_reported),
        cmocka_unit_test(long_queue_is_unknown),
        cmocka_unit_test(signal_names),
        cmocka_unit_test(stream_names),
        cmocka_unit_test(reports_name_streams),
        cmocka_unit_test(reports_show_an_unnamed_signal_by_its_address),
        cmocka_unit_test(reports_name_a_trackers_timelines),
        cmocka_unit_test(reports_name_a_coordinators_timelines),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(reports_while_streams_churn),
        cmocka_unit_test(reports_while_queued_signals_are_let_go),
        cmocka_unit_test(a_holder_behind_an_unseen_part_is_unknown),
        cmocka_unit_test(stall_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
