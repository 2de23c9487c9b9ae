/* The metrics snapshot: every component's counters read through one call,
 * the text form, truncation, bad input. */
#include <string.h>

#include "ordo/metrics.h"
#include "refusal.h"
#include "test_util.h"

static ordo_status_t noop(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop, NULL);
}

static void on_done(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)ctx, (void)status, (void)id;
}

static void snapshot_reads_every_component(void **state) {
    (void)state;
    ordo_device_t *device = NULL;
    ordo_stream_t *s[2];
    ordo_tracker_t *tracker = NULL;
    ordo_buffer_t *buffer = NULL;
    ordo_coord_t *coord = NULL;
    ordo_waiter_t *waiter = NULL;
    ordo_signal_t *signal = test_signal_make(0);
    assert_ok(ordo_device_open(test_device_name(), &device));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(device, 0, &s[i]));
    }
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_buffer_create(tracker, &buffer));
    assert_ok(ordo_coord_create(device, NULL, &coord));
    assert_ok(ordo_waiter_create(NULL, &waiter));

    ordo_access_t w = {buffer, ORDO_ACCESS_WRITE}, r = {buffer, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit(tracker, s[0], &w, 1, launch, NULL));
    assert_ok(ordo_tracker_submit(tracker, s[1], &r, 1, launch, NULL));
    ordo_op_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.type = ORDO_OP_KERNEL;
    desc.priority = ORDO_OP_PRIORITY_NORMAL;
    desc.stream = s[0];
    desc.description = "one op";
    ordo_op_id_t op = 0;
    assert_ok(ordo_coord_register(coord, &desc, &op));
    assert_ok(ordo_coord_begin(coord, op));
    assert_ok(ordo_coord_complete(coord, op));
    assert_ok(ordo_waiter_wait(waiter, signal, 1, ORDO_DEADLINE_NEVER, 0, on_done, NULL, NULL));
    ordo_event_t *event = NULL;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));

    ordo_metrics_sources_t sources = {device, coord, waiter, tracker};
    ordo_metrics_t m;
    assert_ok(ordo_metrics_snapshot(&sources, &m));
    assert_true(m.has_device && m.has_coord && m.has_waiter && m.has_tracker);
    assert_int_equal(m.tracker.submissions, 2);
    assert_int_equal(m.tracker.waits_emitted, 1);
    assert_int_equal(m.coord.registered, 1);
    assert_int_equal(m.waiter.pending, 1);
    assert_true(m.events[ORDO_EVENT_PLAIN].in_use >= 1);

    char text[2048];
    size_t length = 0;
    assert_ok(ordo_metrics_format(&m, text, sizeof text, &length));
    assert_int_equal(strlen(text), length);
    assert_non_null(strstr(text, "operations: 1 registered"));
    assert_non_null(strstr(text, "ordering: 2 submissions; waits 1 emitted"));
    assert_non_null(strstr(text, "async waits: 1 registered, 1 pending"));
    assert_non_null(strstr(text, "plain events:"));
    char small[16];
    size_t needed = 0;
    assert_status(ordo_metrics_format(&m, small, sizeof small, &needed), ORDO_ERR_OUT_OF_RANGE);
    assert_int_equal(needed, length);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_ok(ordo_metrics_format(&m, NULL, 0, &needed));
    assert_int_equal(needed, length);

    /* Absent sources are marked absent. */
    ordo_metrics_sources_t only_waiter = {NULL, NULL, waiter, NULL};
    assert_ok(ordo_metrics_snapshot(&only_waiter, &m));
    assert_false(m.has_device || m.has_coord || m.has_tracker);
    assert_true(m.has_waiter);

    /* Bad input. */
    assert_status(ordo_metrics_snapshot(NULL, &m), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_metrics_snapshot(&sources, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_metrics_format(NULL, text, sizeof text, &length), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_metrics_format(&m, NULL, 8, &length), ORDO_ERR_INVALID_ARGUMENT);
    ordo_metrics_sources_t bad = {NULL, NULL, NULL, (ordo_tracker_t *)(void *)&m};
    assert_status(ordo_metrics_snapshot(&bad, &m), ORDO_ERR_INVALID_HANDLE);

    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_signal_advance(signal, 1));
    assert_ok(ordo_waiter_destroy(waiter));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_synchronize(s[i], test_deadline()));
    }
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_buffer_release(buffer, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_destroy(s[i]));
    }
    assert_ok(ordo_signal_release(signal));
    assert_ok(ordo_device_release(device));
}

/* ---- bad input: metrics.h (tests/refusal.h) */

static void metrics_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_metrics_t *m = malloc(sizeof *m);
    assert_non_null(m);
    ordo_metrics_sources_t sources = {f.device, NULL, NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, *m, ordo_metrics_snapshot, NULL, m);
    ordo_metrics_sources_t wrong_device = {AS(ordo_device_t, f.s[0]), NULL, NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_device, m);
    ordo_metrics_sources_t wrong_coord = {NULL, AS(ordo_coord_t, f.s[0]), NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_coord, m);
    ordo_metrics_sources_t wrong_waiter = {NULL, NULL, AS(ordo_waiter_t, f.s[0]), NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_waiter, m);
    assert_ok(ordo_metrics_snapshot(&sources, m));
    char text[16];
    size_t length = 0;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_metrics_format, m, text, sizeof text, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, length, ordo_metrics_format, NULL, text, sizeof text,
                   &length);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, length, ordo_metrics_format, m, NULL, sizeof text,
                   &length);
    assert_ok(ordo_metrics_format(m, NULL, 0, &length));
    assert_true(length > 0);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_metrics_format, m, text, sizeof text, &length);
    assert_int_equal(strlen(text), sizeof text - 1);
    free(m);
    refusal_fixture_free(&f);
}

int main(void) {
    test_conformance_begin("metrics");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshot_reads_every_component),
        cmocka_unit_test(metrics_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
