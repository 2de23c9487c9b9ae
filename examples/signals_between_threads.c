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
        /* Publishes everything written before it. A failed signal refuses
         * the raise: there is nothing left to publish. */
        if (ordo_signal_advance(progress, step) != ORDO_OK) {
            return NULL;
        }
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
    /* The producer uses the signal until it returns; main releases the
     * signal only after joining it. */
    pthread_t thread;
    if (pthread_create(&thread, NULL, producer, progress) != 0) {
        fprintf(stderr, "cannot start the producer thread\n");
        ordo_signal_release(progress);
        return 1;
    }
    int ok = 1;
    for (uint64_t step = 1; ok && step <= STEPS; ++step) {
        ordo_status_t st = ordo_signal_wait(progress, step, ordo_deadline_after_ms(5000));
        if (st != ORDO_OK) {
            fprintf(stderr, "step %llu: %s: %s\n", (unsigned long long)step, ordo_status_name(st),
                    ordo_error_message());
            ok = 0;
        } else {
            printf("step %llu ready: %.1f\n", (unsigned long long)step, results[step]);
        }
    }
    if (ok) {
        /* Values reached before the failure stay reached; later ones fail,
         * with the status the producer chose. Its message travels with the
         * signal: ordo_signal_failure reads it. */
        ordo_status_t st = ordo_signal_wait(progress, STEPS + 1, ordo_deadline_after_ms(5000));
        printf("waiting for step %d: %s (%s)\n", STEPS + 1, ordo_status_name(st),
               st == ORDO_OK ? "reached" : ordo_error_message());
        ordo_status_t failure = ORDO_OK;
        char why[ORDO_SIGNAL_MESSAGE_MAX];
        if (ordo_signal_failure(progress, &failure, why, sizeof why) == ORDO_OK &&
            failure != ORDO_OK) {
            printf("the producer failed it: %s: %s\n", ordo_status_name(failure), why);
        }
        ok = st == ORDO_ERR_ABORTED;
    }
    pthread_join(thread, NULL);
    ordo_signal_release(progress);
    return ok ? 0 : 1;
}
