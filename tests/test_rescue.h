/* Test-only: shows that a call did not block on a signal only the test
 * would raise, without an upper bound on the call's wall time (which a
 * stalled thread can exceed on a loaded machine).
 *
 * test_rescue_begin starts a rescuer thread; the test makes the call, then
 * test_rescue_end tells the rescuer it returned. A rescuer not told so
 * before the test deadline raises the signal itself (so a call that does
 * block returns instead of hanging the test) and records that it had to:
 * test_rescue_end returns non-zero then, and the test fails. */
#ifndef ORDO_TEST_RESCUE_H
#define ORDO_TEST_RESCUE_H

#include <stdatomic.h>

#include "test_util.h"

typedef struct test_rescue {
    ordo_signal_t *gate; /* raised to value by a rescue */
    uint64_t value;
    ordo_signal_t *done; /* raised by test_rescue_end */
    _Atomic int rescued;
    pthread_t thread;
} test_rescue_t;

static inline void *test_rescuer_main(void *arg) {
    test_rescue_t *r = arg;
    if (ordo_signal_wait(r->done, 1, test_deadline()) == ORDO_ERR_TIMEOUT) {
        atomic_store(&r->rescued, 1);
        (void)ordo_signal_advance(r->gate, r->value);
    }
    return NULL;
}

static inline void test_rescue_begin(test_rescue_t *r, ordo_signal_t *gate, uint64_t value) {
    r->gate = gate;
    r->value = value;
    r->done = test_signal_make(0);
    atomic_init(&r->rescued, 0);
    r->thread = test_thread_start(test_rescuer_main, r);
}

/* Returns non-zero if the rescuer had to raise the gate. */
static inline int test_rescue_end(test_rescue_t *r) {
    assert_ok(ordo_signal_advance(r->done, 1));
    pthread_join(r->thread, NULL);
    assert_ok(ordo_signal_destroy(r->done));
    return atomic_load(&r->rescued);
}

#endif
