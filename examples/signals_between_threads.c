/* Timeline signals between threads: a producer publishes its progress as a
 * monotonically increasing value; a consumer waits for the steps it needs,
 * each wait bounded by a deadline, and a failure reaches it instead of a
 * hang. */
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdio.h>

#define STEPS 5

static double results[STEPS + 1];

static void *producer(void *arg) {
    ordo_signal_t *progress = arg;
    for (uint64_t step = 1; step <= STEPS; ++step) {
        results[step] = 1.5 * (double)step; /* ... produce step ... */
        ordo_signal_signal(progress, step); /* publishes everything before it */
    }
    /* Something went wrong after the last step: every waiter on a later
     * value gets this status, now and in the future. */
    ordo_signal_fail(progress, ORDO_ERR_ABORTED, "the producer stopped after its last step");
    return NULL;
}

int main(void) {
    ordo_signal_t *progress = NULL;
    if (ordo_signal_create(0, &progress) != ORDO_OK) {
        fprintf(stderr, "cannot create a signal: %s\n", ordo_error_message());
        return 1;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, producer, progress);
    for (uint64_t step = 1; step <= STEPS; ++step) {
        ordo_status_t st = ordo_signal_wait(progress, step, ordo_deadline_after_ms(5000));
        if (st != ORDO_OK) {
            fprintf(stderr, "step %llu: %s\n", (unsigned long long)step, ordo_error_message());
            return 1;
        }
        printf("step %llu ready: %.1f\n", (unsigned long long)step, results[step]);
    }
    /* Values reached before the failure stay reached; later ones fail. */
    ordo_status_t st = ordo_signal_wait(progress, STEPS + 1, ordo_deadline_after_ms(5000));
    printf("waiting for step %d: %s (%s)\n", STEPS + 1, ordo_status_name(st), ordo_error_message());
    pthread_join(thread, NULL);
    ordo_signal_release(progress);
    return st == ORDO_ERR_ABORTED ? 0 : 1;
}
