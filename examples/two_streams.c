/* Two streams with automatic ordering: declare what each piece of work
 * reads and writes, and the tracker inserts exactly the device-side waits
 * the hazards need. Here a producer stream fills a buffer and a consumer
 * stream sums it: the consumer's read waits for the producer's write, and
 * the producer's next write waits for the consumer's read. The host never
 * blocks until the end. */
#include <ordo/ordo.h>
#include <stdio.h>

#define N 1024
#define ROUNDS 4

static double data[N];
static double sums[ROUNDS];

typedef struct job {
    int round;
} job_t;

static ordo_status_t fill(void *ctx) {
    const job_t *job = ctx;
    for (int i = 0; i < N; ++i) {
        data[i] = job->round + 1;
    }
    return ORDO_OK;
}

static ordo_status_t sum(void *ctx) {
    const job_t *job = ctx;
    double total = 0;
    for (int i = 0; i < N; ++i) {
        total += data[i];
    }
    sums[job->round] = total;
    return ORDO_OK;
}

static ordo_status_t launch_fill(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, fill, ctx);
}

static ordo_status_t launch_sum(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, sum, ctx);
}

static int check(ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, ordo_status_name(st), ordo_error_message());
    }
    return st == ORDO_OK;
}

int main(void) {
    ordo_device_t *device = NULL;
    ordo_stream_t *producer = NULL, *consumer = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_buffer_t *buffer = NULL;
    int ok = check(ordo_device_open(ORDO_DEVICE_DEFAULT, &device), "open the device") &&
             check(ordo_stream_create(device, 0, &producer), "create a stream") &&
             check(ordo_stream_create(device, 0, &consumer), "create a stream") &&
             check(ordo_tracker_create(device, &tracker), "create a tracker") &&
             check(ordo_buffer_create(tracker, &buffer), "create a buffer");
    job_t jobs[ROUNDS];
    for (int r = 0; ok && r < ROUNDS; ++r) {
        jobs[r].round = r;
        ordo_access_t write = {buffer, ORDO_ACCESS_WRITE};
        ordo_access_t read = {buffer, ORDO_ACCESS_READ};
        ok =
            check(ordo_tracker_submit(tracker, producer, &write, 1, launch_fill, &jobs[r]),
                  "submit") &&
            check(ordo_tracker_submit(tracker, consumer, &read, 1, launch_sum, &jobs[r]), "submit");
    }
    /* The first wait on the host. A task that failed would fail its stream,
     * and synchronize would return that status. */
    if (producer && consumer) {
        ok &= check(ordo_stream_synchronize(producer, ordo_deadline_after_ms(10000)), "producer");
        ok &= check(ordo_stream_synchronize(consumer, ordo_deadline_after_ms(10000)), "consumer");
    }
    for (int r = 0; ok && r < ROUNDS; ++r) {
        printf("round %d: sum %.0f\n", r, sums[r]);
        ok &= sums[r] == (double)N * (r + 1);
    }
    ordo_tracker_metrics_t metrics;
    if (ok && check(ordo_tracker_metrics(tracker, &metrics), "metrics")) {
        printf("%llu waits inserted, %llu already known\n",
               (unsigned long long)metrics.waits_emitted, (unsigned long long)metrics.waits_elided);
    }
    /* Teardown, in reverse: the buffer (its history is dropped once its uses
     * complete), the tracker (once no reclamation is pending), then the
     * streams it ordered, then the device. */
    if (buffer) {
        ok &= check(ordo_buffer_release(buffer, NULL, NULL), "release the buffer");
    }
    if (tracker) {
        ok &= check(ordo_tracker_drain(tracker, ordo_deadline_after_ms(10000)), "drain") &&
              check(ordo_tracker_destroy(tracker), "destroy the tracker");
    }
    if (producer) {
        ok &= check(ordo_stream_destroy(producer), "destroy a stream");
    }
    if (consumer) {
        ok &= check(ordo_stream_destroy(consumer), "destroy a stream");
    }
    if (device) {
        ok &= check(ordo_device_release(device), "release the device");
    }
    return ok ? 0 : 1;
}
