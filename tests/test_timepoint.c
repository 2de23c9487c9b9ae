/* Timepoints and links: firing once, cancellation, callbacks that signal,
 * chains, failure propagation, destroy with pending timepoints, bad input
 * on every entry point. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "refusal.h"
#include "test_util.h"

typedef struct record {
    _Atomic int calls;
    _Atomic int status;
} record_t;

static void record_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)tp;
    record_t *r = ctx;
    atomic_store(&r->status, (int)status);
    atomic_fetch_add(&r->calls, 1);
}

static void timepoint_fires_once(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    record_t r = {0, -1};
    assert_ok(ordo_timepoint_arm(&tp, s, 3, record_fired, &r));
    assert_ok(ordo_signal_advance(s, 2));
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_ok(ordo_signal_advance(s, 3));
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_int_equal(atomic_load(&r.status), ORDO_OK);
    assert_ok(ordo_signal_advance(s, 10));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, NULL));
    assert_ok(ordo_signal_destroy(s));
    assert_int_equal(atomic_load(&r.calls), 1);
}

static void timepoint_on_reached_value_fires_at_arming(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(5);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    record_t r = {0, -1};
    assert_ok(ordo_timepoint_arm(&tp, s, 5, record_fired, &r));
    assert_int_equal(atomic_load(&r.calls), 1);
    ordo_cancel_result_t result;
    assert_ok(ordo_timepoint_cancel(&tp, &result));
    assert_int_equal(result, ORDO_CANCEL_TOO_LATE);
    /* A fired timepoint may be armed again. */
    assert_ok(ordo_timepoint_arm(&tp, s, 6, record_fired, &r));
    assert_ok(ordo_signal_advance(s, 6));
    assert_int_equal(atomic_load(&r.calls), 2);
    assert_ok(ordo_signal_destroy(s));
}

static void timepoints_fire_in_value_order(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    enum { N = 6 };
    static const uint64_t values[N] = {5, 1, 3, 3, 9, 2};
    ordo_timepoint_t tps[N];
    memset(tps, 0, sizeof tps);
    record_t r[N];
    memset(r, 0, sizeof r);
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_timepoint_arm(&tps[i], s, values[i], record_fired, &r[i]));
    }
    assert_ok(ordo_signal_advance(s, 3));
    for (int i = 0; i < N; ++i) {
        assert_int_equal(atomic_load(&r[i].calls), values[i] <= 3);
    }
    assert_ok(ordo_signal_advance(s, 9));
    for (int i = 0; i < N; ++i) {
        assert_int_equal(atomic_load(&r[i].calls), 1);
    }
    assert_ok(ordo_signal_destroy(s));
}

static void cancel_before_dispatch_prevents_the_callback(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    record_t r = {0, -1};
    assert_ok(ordo_timepoint_arm(&tp, s, 1, record_fired, &r));
    ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
    assert_ok(ordo_timepoint_cancel(&tp, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    assert_ok(ordo_signal_advance(s, 1));
    assert_int_equal(atomic_load(&r.calls), 0);
    /* Cancelling again is an error, not a silent success. */
    assert_status(ordo_timepoint_cancel(&tp, &result), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_signal_destroy(s));
}

/* A callback that holds the dispatching thread until released. */
typedef struct gate {
    _Atomic int entered;
    _Atomic int release;
    _Atomic int calls;
} gate_t;

static void gate_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)status;
    (void)tp;
    gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->release) && ordo_time_now_ns() < deadline) {
    }
    atomic_fetch_add(&g->calls, 1);
}

static void *signal_to_one(void *arg) {
    (void)ordo_signal_advance(arg, 1);
    return NULL;
}

static void cancel_during_dispatch_reports_too_late(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    gate_t g = {0, 0, 0};
    assert_ok(ordo_timepoint_arm(&tp, s, 1, gate_fired, &g));
    pthread_t t = test_thread_start(signal_to_one, s);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g.entered)) {
        assert_true(ordo_time_now_ns() < deadline);
    }
    ordo_cancel_result_t result = ORDO_CANCEL_PREVENTED;
    assert_ok(ordo_timepoint_cancel(&tp, &result));
    assert_int_equal(result, ORDO_CANCEL_TOO_LATE);
    atomic_store(&g.release, 1);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&g.calls), 1);
    assert_ok(ordo_signal_destroy(s));
}

typedef struct relay {
    ordo_signal_t *next;
    uint64_t value;
    ordo_timepoint_t follow_up;
    record_t record;
} relay_t;

static void relay_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)tp;
    relay_t *relay = ctx;
    if (status == ORDO_OK) {
        /* Signalling another signal and arming a timepoint from a callback. */
        (void)ordo_signal_advance(relay->next, relay->value);
        (void)ordo_timepoint_arm(&relay->follow_up, relay->next, relay->value + 1, record_fired,
                                 &relay->record);
    }
}

static void callback_may_signal_and_arm(void **state) {
    (void)state;
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    relay_t relay;
    memset(&relay, 0, sizeof relay);
    relay.next = b;
    relay.value = 7;
    assert_ok(ordo_timepoint_arm(&tp, a, 1, relay_fired, &relay));
    assert_ok(ordo_signal_advance(a, 1));
    assert_ok(ordo_signal_wait(b, 7, ORDO_DEADLINE_NOW));
    assert_int_equal(atomic_load(&relay.record.calls), 0);
    assert_ok(ordo_signal_advance(b, 8));
    assert_int_equal(atomic_load(&relay.record.calls), 1);
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
}

static void destroy_cancels_pending_timepoints(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tps[3];
    memset(tps, 0, sizeof tps);
    record_t r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_timepoint_arm(&tps[i], s, (uint64_t)i + 1, record_fired, &r[i]));
    }
    assert_ok(ordo_signal_advance(s, 1));
    assert_ok(ordo_signal_destroy(s));
    assert_int_equal(atomic_load(&r[0].status), ORDO_OK);
    for (int i = 1; i < 3; ++i) {
        assert_int_equal(atomic_load(&r[i].calls), 1);
        assert_int_equal(atomic_load(&r[i].status), ORDO_ERR_CANCELLED);
    }
}

static void failure_reaches_pending_timepoints(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    ordo_timepoint_t late = ORDO_TIMEPOINT_INIT;
    record_t r = {0, -1};
    record_t r_late = {0, -1};
    assert_ok(ordo_timepoint_arm(&tp, s, 4, record_fired, &r));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_DEVICE, "boom"));
    assert_int_equal(atomic_load(&r.status), ORDO_ERR_DEVICE);
    /* Arming on a failed signal fires at once with the failure. */
    assert_ok(ordo_timepoint_arm(&late, s, 9, record_fired, &r_late));
    assert_int_equal(atomic_load(&r_late.status), ORDO_ERR_DEVICE);
    assert_ok(ordo_signal_destroy(s));
}

static void link_chain_carries_values_and_failures(void **state) {
    (void)state;
    enum { N = 8 };
    ordo_signal_t *s[N];
    ordo_link_t links[N - 1];
    memset(links, 0, sizeof links);
    for (int i = 0; i < N; ++i) {
        s[i] = test_signal_make(0);
    }
    for (int i = 0; i + 1 < N; ++i) {
        assert_ok(ordo_link_arm(&links[i], s[i], 1, s[i + 1], (uint64_t)(10 * (i + 1))));
    }
    assert_ok(ordo_signal_advance(s[0], 1));
    uint64_t value;
    assert_ok(ordo_signal_query(s[N - 1], &value));
    assert_int_equal(value, 10 * (N - 1));

    /* Re-arm for value 2 and fail the head: the failure reaches the tail,
     * its text after one link prefix (each link puts its prefix before the
     * text where the failure began, not before the last link's, which cut
     * that text short after a few links). */
    for (int i = 0; i + 1 < N; ++i) {
        assert_ok(ordo_link_arm(&links[i], s[i], i == 0 ? 2 : 1000, s[i + 1], 1000));
    }
    assert_ok(ordo_signal_fail(s[0], ORDO_ERR_DEVICE, "head failed"));
    assert_status(ordo_signal_wait(s[N - 1], 1000, test_deadline()), ORDO_ERR_DEVICE);
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    for (int i = 1; i < N; ++i) {
        assert_ok(ordo_signal_failure(s[i], &failure, message, sizeof message));
        assert_string_equal(message, "linked source failed: head failed");
    }
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_signal_destroy(s[i]));
    }
}

/* The signal failed with status and message. */
static void check_failure(ordo_signal_t *signal, ordo_status_t status, const char *message) {
    ordo_status_t failure;
    char got[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(signal, &failure, got, sizeof got));
    assert_int_equal(failure, status);
    assert_string_equal(got, message);
}

static void link_source_destroyed_fails_target(void **state) {
    (void)state;
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    assert_ok(ordo_signal_destroy(a));
    assert_status(ordo_signal_wait(b, 1, test_deadline()), ORDO_ERR_CANCELLED);
    check_failure(b, ORDO_ERR_CANCELLED,
                  "linked source signal was destroyed before reaching its value");
    assert_ok(ordo_signal_destroy(b));
}

/* A source failed with ORDO_ERR_CANCELLED, the status a destroy gives, is
 * still a failure: its target gets the status and the source's message. */
static void link_source_cancelled_passes_its_message(void **state) {
    (void)state;
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    assert_ok(ordo_signal_fail(a, ORDO_ERR_CANCELLED, "decoder crashed"));
    check_failure(b, ORDO_ERR_CANCELLED, "linked source failed: decoder crashed");
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
    /* A program's text that begins like a wait's prefix, but with no
     * status's name in it, is the failure's own: kept whole. */
    a = test_signal_make(0);
    b = test_signal_make(0);
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    const char *own = "waited-on signal failed: ORDO_probe: the sensor said: overheated";
    assert_ok(ordo_signal_fail(a, ORDO_ERR_ABORTED, own));
    char expected[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(expected, sizeof expected, "linked source failed: %s", own);
    check_failure(b, ORDO_ERR_ABORTED, expected);
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
}

/* A link that fires into a target failed (or destroyed) first is refused
 * there: nobody's error. The call that fired it succeeds and leaves the
 * thread's message as it was (ordo/status.h). */
static void a_link_into_an_ended_target_leaves_the_message(void **state) {
    (void)state;
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&link, a, 1, b, 5));
    assert_ok(ordo_signal_fail(b, ORDO_ERR_ABORTED, "target failed"));
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    assert_ok(ordo_signal_advance(a, 1));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    /* Armed on a reached source: it fires inside the arm. */
    ordo_link_t again = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&again, a, 1, b, 6));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    /* A destroyed source fails the target: refused there too. */
    ordo_signal_t *c = test_signal_make(0);
    ordo_link_t third = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&third, c, 1, b, 7));
    assert_ok(ordo_signal_destroy(c));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
}

static void link_cancel_releases_its_signals(void **state) {
    (void)state;
    ordo_signal_t *a = test_signal_make(0);
    ordo_signal_t *b = test_signal_make(0);
    ordo_link_t link;
    memset(&link, 0, sizeof link);
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    assert_status(ordo_link_arm(&link, a, 1, b, 1), ORDO_ERR_BUSY);
    ordo_cancel_result_t result;
    assert_ok(ordo_link_cancel(&link, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    assert_ok(ordo_signal_advance(a, 1));
    assert_status(ordo_signal_wait(b, 1, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
    assert_ok(ordo_signal_destroy(a));
    assert_ok(ordo_signal_destroy(b));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

/* A chain far longer than a stack could hold if dispatch recursed. */
static void long_link_chain_does_not_recurse(void **state) {
    (void)state;
    enum { N = 20000 };
    ordo_signal_t **s = calloc(N, sizeof *s);
    ordo_link_t *links = calloc(N, sizeof *links);
    assert_non_null(s);
    assert_non_null(links);
    for (int i = 0; i < N; ++i) {
        s[i] = test_signal_make(0);
    }
    for (int i = 0; i + 1 < N; ++i) {
        assert_ok(ordo_link_arm(&links[i], s[i], 1, s[i + 1], 1));
    }
    assert_ok(ordo_signal_advance(s[0], 1));
    assert_ok(ordo_signal_wait(s[N - 1], 1, ORDO_DEADLINE_NOW));
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_signal_destroy(s[i]));
    }
    free(links);
    free(s);
}

typedef struct rearm_probe {
    ordo_signal_t *source;
    ordo_signal_t *other;
    ordo_link_t *link;
    ordo_status_t rearm_status;
    ordo_cancel_result_t cancel_result;
} rearm_probe_t;

static void rearm_probe_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)status;
    (void)tp;
    rearm_probe_t *probe = ctx;
    /* The link becomes due now but runs only after this callback returns. */
    (void)ordo_signal_advance(probe->source, 1);
    probe->rearm_status = ordo_link_arm(probe->link, probe->other, 1, probe->other, 2);
    (void)ordo_link_cancel(probe->link, &probe->cancel_result);
}

static void due_timepoint_cannot_be_rearmed(void **state) {
    (void)state;
    ordo_signal_t *trigger = test_signal_make(0);
    ordo_signal_t *source = test_signal_make(0);
    ordo_signal_t *target = test_signal_make(0);
    ordo_signal_t *other = test_signal_make(0);
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&link, source, 1, target, 5));
    rearm_probe_t probe = {source, other, &link, ORDO_OK, ORDO_CANCEL_PREVENTED};
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    assert_ok(ordo_timepoint_arm(&tp, trigger, 1, rearm_probe_fired, &probe));
    assert_ok(ordo_signal_advance(trigger, 1));
    assert_int_equal(probe.rearm_status, ORDO_ERR_BUSY);
    assert_int_equal(probe.cancel_result, ORDO_CANCEL_TOO_LATE);
    /* The link still did its job, once. */
    assert_ok(ordo_signal_wait(target, 5, ORDO_DEADLINE_NOW));
    assert_status(ordo_signal_wait(other, 2, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
    /* Fired: the owner may arm it again. */
    assert_ok(ordo_link_arm(&link, other, 1, other, 2));
    assert_ok(ordo_signal_advance(other, 1));
    assert_ok(ordo_signal_wait(other, 2, ORDO_DEADLINE_NOW));
    assert_ok(ordo_signal_destroy(trigger));
    assert_ok(ordo_signal_destroy(source));
    assert_ok(ordo_signal_destroy(target));
    assert_ok(ordo_signal_destroy(other));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

static void bad_input_is_refused(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    record_t r = {0, -1};
    ordo_cancel_result_t result;
    assert_status(ordo_timepoint_arm(NULL, s, 1, record_fired, &r), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_timepoint_arm(&tp, s, 1, NULL, &r), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_timepoint_arm(&tp, NULL, 1, record_fired, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_timepoint_arm(&tp, s, ORDO_SIGNAL_VALUE_MAX + 1, record_fired, &r),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_timepoint_cancel(&tp, &result), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_timepoint_cancel(NULL, &result), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_timepoint_arm(&tp, s, 1, record_fired, &r));
    assert_status(ordo_timepoint_arm(&tp, s, 2, record_fired, &r), ORDO_ERR_BUSY);
    assert_status(ordo_timepoint_cancel(&tp, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_timepoint_cancel(&tp, &result));

    ordo_link_t link;
    memset(&link, 0, sizeof link);
    assert_status(ordo_link_arm(NULL, s, 1, s, 2), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_link_arm(&link, s, 1, NULL, 2), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_link_arm(&link, NULL, 1, s, 2), ORDO_ERR_INVALID_HANDLE);
    /* Both bad: the first in parameter order answers. */
    assert_status(ordo_link_arm(&link, NULL, 1, NULL, 2), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "source"));
    assert_status(ordo_link_arm(&link, s, 1, s, ORDO_SIGNAL_VALUE_MAX + 1), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_link_cancel(NULL, &result), ORDO_ERR_INVALID_ARGUMENT);

    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    assert_status(ordo_timepoint_arm(&tp, s, 5, record_fired, &r), ORDO_ERR_DESTROYED);
    assert_status(ordo_link_arm(&link, s, 1, s, 2), ORDO_ERR_DESTROYED);
    assert_ok(ordo_signal_release(s));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

/* Allocator hooks that hold up the deallocation of one block until the test
 * opens a gate (bounded by the test deadline), so that a thread freeing
 * that block stops at a known point. */
typedef struct stall_hooks {
    _Atomic(void *) block; /* the block whose deallocation waits */
    _Atomic int stalled;   /* its deallocation has begun */
    _Atomic int gate;      /* opened by the test */
} stall_hooks_t;

static void *stall_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void stall_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)size;
    (void)alignment;
    stall_hooks_t *hooks = user;
    if (block == atomic_load(&hooks->block)) {
        atomic_store(&hooks->stalled, 1);
        const ordo_deadline_t deadline = test_deadline();
        while (!atomic_load(&hooks->gate) && ordo_time_now_ns() < deadline) {
            sched_yield();
        }
    }
    free(block);
}

/* A link is its owner's again (to re-arm or free) once it has given its
 * target the outcome: a thread that sees the target reached may reuse the
 * link while the thread that ran the link is still finishing. Here that
 * thread is held inside the link, freeing the source (the link held its
 * last reference), while the test re-arms the link. */
static void link_is_the_owners_once_its_target_is_signalled(void **state) {
    (void)state;
    stall_hooks_t hooks_state;
    atomic_init(&hooks_state.block, NULL);
    atomic_init(&hooks_state.stalled, 0);
    atomic_init(&hooks_state.gate, 0);
    const ordo_allocator_t hooks = {stall_allocate, stall_deallocate, &hooks_state};
    assert_ok(ordo_allocator_set(&hooks));

    ordo_signal_t *trigger = test_signal_make(0);
    ordo_signal_t *source = test_signal_make(0);
    ordo_signal_t *target = test_signal_make(0);
    ordo_signal_t *other = test_signal_make(0);
    ordo_link_t first = {ORDO_TIMEPOINT_INIT, NULL, 0};
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    assert_ok(ordo_link_arm(&first, trigger, 1, source, 1));
    assert_ok(ordo_link_arm(&link, source, 1, target, 1));
    /* From here the links hold the source's only references; `link`
     * releases the last one after signalling its target. */
    assert_ok(ordo_signal_release(source));
    atomic_store(&hooks_state.block, (void *)source);

    pthread_t producer = test_thread_start(signal_to_one, trigger);
    ordo_status_t waited = ordo_signal_wait(target, 1, test_deadline());
    /* Nothing here may allocate: the producer may hold the allocator. */
    ordo_status_t rearmed = ordo_link_arm(&link, other, 1, other, 2);
    atomic_store(&hooks_state.gate, 1);
    pthread_join(producer, NULL);

    assert_int_equal(waited, ORDO_OK);
    assert_int_equal(atomic_load(&hooks_state.stalled), 1);
    assert_int_equal(rearmed, ORDO_OK);
    ordo_cancel_result_t result;
    assert_ok(ordo_link_cancel(&link, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    assert_ok(ordo_signal_destroy(trigger));
    assert_ok(ordo_signal_destroy(target));
    assert_ok(ordo_signal_destroy(other));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
    assert_ok(ordo_allocator_set(NULL));
}

/* ---- bad input: timepoint.h, link.h (tests/refusal.h) */

static void on_timepoint(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    ++*(int *)ctx;
}

static void timepoint_and_link_entry_points_refuse_bad_input(void **state) {
    (void)state;
    size_t before = refusal_live_blocks();
    ordo_signal_t *a = test_signal_make(0), *b = test_signal_make(0);
    int fired = 0;
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    ordo_cancel_result_t result;
    ordo_signal_t *wrong = AS(ordo_signal_t, &tp);

    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_arm, NULL, a, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_timepoint_arm, &tp, NULL, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_timepoint_arm, &tp, GARBAGE(ordo_signal_t), 1,
            on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_arm, &tp, a, 1, NULL, &fired);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_timepoint_arm, &tp, a, ORDO_SIGNAL_VALUE_MAX + 1,
            on_timepoint, &fired);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, &tp, &result);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, NULL, &result);
    assert_ok(ordo_timepoint_arm(&tp, a, 1, on_timepoint, &fired));
    REFUSED(ORDO_ERR_BUSY, ordo_timepoint_arm, &tp, a, 2, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_cancel, &tp, NULL);
    assert_ok(ordo_timepoint_cancel(&tp, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, &tp, &result);
    assert_int_equal(fired, 0);

    ordo_link_t link;
    memset(&link, 0, sizeof link);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_link_arm, NULL, a, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, NULL, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, a, 1, NULL, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, wrong, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, a, 1, wrong, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_link_arm, &link, a, ORDO_SIGNAL_VALUE_MAX + 1, b, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_link_arm, &link, a, 1, b, ORDO_SIGNAL_VALUE_MAX + 1);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, &link, &result);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, NULL, &result);
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    REFUSED(ORDO_ERR_BUSY, ordo_link_arm, &link, a, 2, b, 2);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_link_cancel, &link, NULL);
    assert_ok(ordo_link_cancel(&link, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, &link, &result);

    /* Destroyed source or target: refused, holding no reference. */
    ordo_signal_t *dead = test_signal_make(0);
    assert_ok(ordo_signal_retain(dead));
    assert_ok(ordo_signal_destroy(dead));
    REFUSED(ORDO_ERR_DESTROYED, ordo_timepoint_arm, &tp, dead, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_DESTROYED, ordo_link_arm, &link, dead, 1, b, 1);
    REFUSED(ORDO_ERR_DESTROYED, ordo_link_arm, &link, a, 1, dead, 1);
    assert_ok(ordo_signal_release(dead));
    assert_int_equal(fired, 0);

    assert_ok(ordo_signal_release(a));
    assert_ok(ordo_signal_release(b));
    assert_int_equal(refusal_live_blocks(), before);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timepoint_fires_once),
        cmocka_unit_test(timepoint_on_reached_value_fires_at_arming),
        cmocka_unit_test(timepoints_fire_in_value_order),
        cmocka_unit_test(cancel_before_dispatch_prevents_the_callback),
        cmocka_unit_test(cancel_during_dispatch_reports_too_late),
        cmocka_unit_test(callback_may_signal_and_arm),
        cmocka_unit_test(destroy_cancels_pending_timepoints),
        cmocka_unit_test(failure_reaches_pending_timepoints),
        cmocka_unit_test(link_chain_carries_values_and_failures),
        cmocka_unit_test(link_source_destroyed_fails_target),
        cmocka_unit_test(link_source_cancelled_passes_its_message),
        cmocka_unit_test(a_link_into_an_ended_target_leaves_the_message),
        cmocka_unit_test(link_cancel_releases_its_signals),
        cmocka_unit_test(long_link_chain_does_not_recurse),
        cmocka_unit_test(due_timepoint_cannot_be_rearmed),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(link_is_the_owners_once_its_target_is_signalled),
        cmocka_unit_test(timepoint_and_link_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
