/* A first pipeline: a producer stage on stream A writes chunks of data, a
 * consumer stage on stream B reads each chunk and adds it up. Only the
 * declared accesses order them: the tracker makes B's read of a chunk wait
 * (device-side) for A's write of it, while A runs ahead. The host blocks
 * once, at the end. */
#include <ordo/ordo.h>
#include <stdio.h>
#include <stdlib.h>

enum { CHUNKS = 64, N = 4096 };
static double data[CHUNKS][N], total; /* total: written by the consumer stage only */

static ordo_status_t produce(void *chunk) { /* chunk: the task's context */
    for (int i = 0; i < N; ++i)
        ((double *)chunk)[i] = i;
    return ORDO_OK;
}

static ordo_status_t consume(void *chunk) {
    for (int i = 0; i < N; ++i)
        total += ((double *)chunk)[i];
    return ORDO_OK;
}

/* A failure ends the program with ordo's message (the process's exit
 * frees what is left). */
static void check(ordo_status_t st) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s\n", ordo_status_name(st), ordo_error_message());
        exit(1);
    }
}

int main(void) {
    ordo_tracker_t *tracker; /* it holds the device and owns the two streams */
    ordo_stream_t *a, *b;
    check(ordo_tracker_open(ORDO_DEVICE_DEFAULT, &tracker));
    check(ordo_tracker_stream_create(tracker, 0, &a));
    check(ordo_tracker_stream_create(tracker, 0, &b));
    for (int c = 0; c < CHUNKS; ++c) {
        ordo_buffer_t *buf; /* chunk c's memory, as the tracker sees it */
        check(ordo_buffer_create(tracker, &buf));
        ordo_access_t write = {buf, ORDO_ACCESS_WRITE}, read = {buf, ORDO_ACCESS_READ};
        check(ordo_tracker_submit_host(tracker, a, &write, 1, produce, data[c]));
        check(ordo_tracker_submit_host(tracker, b, &read, 1, consume, data[c]));
        check(ordo_buffer_release(buf, NULL, NULL)); /* its history goes once B has read it */
    }
    /* The buffers are released: close waits for all the work (a failed
     * task's status and message come back here), then destroys the
     * tracker and its streams and releases the device. */
    check(ordo_tracker_close(tracker, ordo_deadline_after_ms(10000)));
    printf("total %.0f\n", total);
    return total == CHUNKS * (N * (N - 1) / 2.0) ? 0 : 1;
}
