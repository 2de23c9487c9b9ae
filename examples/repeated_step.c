/* A step repeated many times (a training iteration, a decode step),
 * recorded once and replayed: the tracker orders the step's submissions
 * once, while recording, and each replay runs them with the waits found
 * then, and no analysis. The step: a "forward" stage on stream A computes
 * activations from the weights; an "update" stage on stream B reads them
 * and updates the weights in place. So B waits for A inside a step, and A
 * waits for B's update of the step before. On the CPU backend a replay
 * enqueues the recorded tasks one by one; on CUDA, a recording of launch
 * functions (ordo_tracker_submit) started with
 * ordo_tracker_record_begin_native replays as one CUDA graph. */
#include <ordo/ordo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024, STEPS = 200 };
static uint64_t weights[N], activations[N];

static ordo_status_t forward(void *ctx) {
    (void)ctx;
    for (int i = 0; i < N; ++i)
        activations[i] = weights[i] * 3 + 1;
    return ORDO_OK;
}

static ordo_status_t update(void *ctx) {
    (void)ctx;
    for (int i = 0; i < N; ++i)
        weights[i] += activations[(i + 1) % N]; /* reads a neighbour: order shows */
    return ORDO_OK;
}

static void check(ordo_status_t st) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s\n", ordo_status_name(st), ordo_error_message());
        exit(1);
    }
}

int main(void) {
    ordo_tracker_t *tracker;
    ordo_stream_t *a, *b;
    check(ordo_tracker_open(ORDO_DEVICE_DEFAULT, &tracker));
    check(ordo_tracker_stream_create(tracker, 0, &a));
    check(ordo_tracker_stream_create(tracker, 0, &b));
    ordo_buffer_t *w, *act;
    check(ordo_buffer_create(tracker, &w));
    check(ordo_buffer_create(tracker, &act));
    for (int i = 0; i < N; ++i)
        weights[i] = (uint64_t)i;

    /* Recorded, not run: nothing is enqueued until the first replay. */
    check(ordo_tracker_record_begin(tracker));
    ordo_access_t fwd[2] = {{w, ORDO_ACCESS_READ}, {act, ORDO_ACCESS_WRITE}};
    ordo_access_t upd[2] = {{act, ORDO_ACCESS_READ}, {w, ORDO_ACCESS_READ_WRITE}};
    check(ordo_tracker_submit_host(tracker, a, fwd, 2, forward, NULL));
    check(ordo_tracker_submit_host(tracker, b, upd, 2, update, NULL));
    ordo_graph_t *step;
    check(ordo_tracker_record_end(tracker, &step));

    for (int s = 0; s < STEPS; ++s)
        check(ordo_graph_replay(step)); /* each ordered after the one before */
    ordo_graph_info_t info;
    check(ordo_graph_info(step, &info));
    check(ordo_tracker_synchronize(tracker, ordo_deadline_after_ms(10000)));
    check(ordo_graph_destroy(step));

    /* The same steps, serially, for the check. */
    uint64_t w_ref[N], a_ref[N];
    for (int i = 0; i < N; ++i)
        w_ref[i] = (uint64_t)i;
    for (int s = 0; s < STEPS; ++s) {
        for (int i = 0; i < N; ++i)
            a_ref[i] = w_ref[i] * 3 + 1;
        for (int i = 0; i < N; ++i)
            w_ref[i] += a_ref[(i + 1) % N];
    }
    int wrong = 0;
    for (int i = 0; i < N; ++i)
        wrong += weights[i] != w_ref[i];
    printf("%d replays of a %llu-task step (cross-stream waits inside: %llu): %s\n", STEPS,
           (unsigned long long)info.tasks, (unsigned long long)info.waits,
           wrong ? "WRONG" : "weights as computed serially");
    check(ordo_buffer_release(w, NULL, NULL));
    check(ordo_buffer_release(act, NULL, NULL));
    check(ordo_tracker_close(tracker, ordo_deadline_after_ms(10000)));
    return wrong ? 1 : 0;
}
