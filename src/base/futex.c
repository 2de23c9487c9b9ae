#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/futex.h"

static ordo_futex_result_t futex_wait(_Atomic uint32_t *word, uint32_t expected,
                                      ordo_deadline_t deadline, int private_flag) {
    struct timespec abs;
    struct timespec *timeout = NULL;
    if (deadline != ORDO_DEADLINE_NEVER) {
        abs.tv_sec = (time_t)(deadline / 1000000000u);
        abs.tv_nsec = (long)(deadline % 1000000000u);
        timeout = &abs;
    }
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time, so retries
     * after a spurious wake-up keep the caller's deadline exactly. */
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET | private_flag, expected,
                      timeout, NULL, FUTEX_BITSET_MATCH_ANY);
    if (rc == 0) {
        return ORDO_FUTEX_WOKEN;
    }
    switch (errno) {
    case EAGAIN:
        return ORDO_FUTEX_MISMATCH;
    case ETIMEDOUT:
        return ORDO_FUTEX_TIMED_OUT;
    default: /* EINTR and anything else: the caller re-checks its state */
        return ORDO_FUTEX_WOKEN;
    }
}

ordo_futex_result_t ordo__futex_wait(_Atomic uint32_t *word, uint32_t expected,
                                     ordo_deadline_t deadline) {
    return futex_wait(word, expected, deadline, FUTEX_PRIVATE_FLAG);
}

ordo_futex_result_t ordo__futex_wait_shared(_Atomic uint32_t *word, uint32_t expected,
                                            ordo_deadline_t deadline) {
    return futex_wait(word, expected, deadline, 0);
}

void ordo__futex_wake(_Atomic uint32_t *word, int count) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, NULL, NULL, 0);
}

void ordo__futex_wake_shared(_Atomic uint32_t *word, int count) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, count, NULL, NULL, 0);
}
