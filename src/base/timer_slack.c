/* The calling thread's timer slack (timer_slack.h). */
#include "base/timer_slack.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

uint64_t ordo__timer_slack_set(uint64_t slack_ns) {
#if defined(__linux__) && defined(PR_SET_TIMERSLACK) && defined(PR_GET_TIMERSLACK)
    int previous = prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
    if (previous <= 0) {
        return 0;
    }
    (void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns, 0UL, 0UL, 0UL);
    return (uint64_t)previous;
#else
    (void)slack_ns;
    return 0;
#endif
}

void ordo__timer_slack_restore(uint64_t previous_ns) {
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    if (previous_ns) {
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)previous_ns, 0UL, 0UL, 0UL);
    }
#else
    (void)previous_ns;
#endif
}
