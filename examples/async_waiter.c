/* The asynchronous waiter: register callbacks for signal values instead of
 * blocking a thread on each. One wait fires when its value is reached, one
 * runs into its deadline, one is cancelled before it can fire. Callbacks
 * run on the waiter's worker thread, never under ordo's locks. */
#include <ordo/ordo.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic int callbacks;

static void report(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    printf("wait %s (id %llx): %s\n", (const char *)ctx, (unsigned long long)id,
           ordo_status_name(status));
    atomic_fetch_add(&callbacks, 1);
}

int main(void) {
    ordo_waiter_t *waiter = NULL;
    ordo_signal_t *ready = NULL;
    if (ordo_waiter_create(NULL, &waiter) != ORDO_OK || ordo_signal_create(0, &ready) != ORDO_OK) {
        fprintf(stderr, "setup: %s\n", ordo_error_message());
        return 1;
    }
    ordo_wait_id_t fires, times_out, cancelled;
    ordo_wait_async(waiter, ready, 1, ordo_deadline_after_ms(5000), 0, report, "for 1", &fires);
    ordo_wait_async(waiter, ready, 2, ordo_deadline_after_ms(50), 0, report, "for 2", &times_out);
    ordo_wait_async(waiter, ready, 3, ORDO_DEADLINE_NEVER, 0, report, "for 3", &cancelled);

    ordo_cancel_result_t result;
    ordo_waiter_cancel(waiter, cancelled, 1, &result);
    printf("cancelling the wait for 3: %s\n",
           result == ORDO_CANCEL_PREVENTED ? "prevented" : "too late");

    ordo_signal_signal(ready, 1); /* fires "for 1" on the worker thread */

    /* Let the deadline of "for 2" pass, then let every callback finish. */
    ordo_signal_t *never = NULL;
    ordo_signal_create(0, &never);
    ordo_signal_wait(never, 1, ordo_deadline_after_ms(200));
    ordo_signal_release(never);
    ordo_waiter_destroy(waiter);
    ordo_signal_release(ready);
    printf("%d callbacks ran\n", atomic_load(&callbacks));
    return atomic_load(&callbacks) == 2 ? 0 : 1;
}
