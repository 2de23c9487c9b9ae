/* The asynchronous waiter: register callbacks for signal values instead of
 * blocking a thread on each. One wait fires when its value is reached, one
 * runs into its deadline, one is cancelled before it can fire. Callbacks
 * run on the waiter's worker thread, never under ordo's locks. */
#include <ordo/ordo.h>
#include <stdio.h>

typedef struct outcome {
    const char *name;
    ordo_status_t status;
} outcome_t;

/* Counts finished callbacks, so that main can wait for them with a
 * deadline instead of sleeping. */
static ordo_signal_t *finished;
static uint64_t callbacks; /* written only by the one worker thread */

static void report(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    outcome_t *outcome = ctx;
    outcome->status = status;
    printf("wait %s (id %llx): %s\n", outcome->name, (unsigned long long)id,
           ordo_status_name(status));
    ordo_signal_advance(finished, ++callbacks); /* publishes what the callback wrote */
}

static int check(ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, ordo_status_name(st), ordo_error_message());
    }
    return st == ORDO_OK;
}

int main(void) {
    ordo_waiter_t *waiter = NULL;
    ordo_signal_t *ready = NULL;
    outcome_t waits[3] = {{"for 1", ORDO_OK}, {"for 2", ORDO_OK}, {"for 3", ORDO_OK}};
    ordo_wait_id_t fires = 0, times_out = 0, cancelled = 0;
    int ok = check(ordo_signal_create(0, &finished), "create a signal") &&
             check(ordo_signal_create(0, &ready), "create a signal") &&
             check(ordo_waiter_create(NULL, &waiter), "create a waiter") &&
             check(ordo_waiter_wait(waiter, ready, 1, ordo_deadline_after_ms(5000), 0, report,
                                    &waits[0], &fires),
                   "wait for 1") &&
             check(ordo_waiter_wait(waiter, ready, 2, ordo_deadline_after_ms(50), 0, report,
                                    &waits[1], &times_out),
                   "wait for 2") &&
             check(ordo_waiter_wait(waiter, ready, 3, ORDO_DEADLINE_NEVER, 0, report, &waits[2],
                                    &cancelled),
                   "wait for 3");

    if (ok) {
        ordo_cancel_result_t result;
        ok = check(ordo_waiter_cancel(waiter, cancelled, 1, &result), "cancel");
        if (ok) {
            printf("cancelling the wait for 3: %s\n",
                   result == ORDO_CANCEL_PREVENTED ? "prevented" : "too late");
            ok = result == ORDO_CANCEL_PREVENTED;
        }
    }
    /* Fires "for 1" on the worker thread. */
    ok = ok && check(ordo_signal_advance(ready, 1), "signal");
    /* Two callbacks: "for 1" now, "for 2" once its deadline has passed. */
    ok = ok && check(ordo_signal_wait(finished, 2, ordo_deadline_after_ms(5000)), "callbacks");
    if (waiter) {
        /* Every wait still pending would get ORDO_ERR_CANCELLED here; none is. */
        ok &= check(ordo_waiter_destroy(waiter), "destroy the waiter");
    }
    if (ready) {
        ok &= check(ordo_signal_release(ready), "release a signal");
    }
    if (finished) {
        printf("%llu callbacks ran\n", (unsigned long long)callbacks);
        ok &= callbacks == 2 && waits[0].status == ORDO_OK && waits[1].status == ORDO_ERR_TIMEOUT;
        ok &= check(ordo_signal_release(finished), "release a signal");
    }
    return ok ? 0 : 1;
}
