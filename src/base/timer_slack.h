/* Internal: the calling thread's timer slack (Linux: how much later than
 * asked the kernel may end a timed sleep, 50 us by default, to batch
 * wake-ups). A thread whose short timed sleeps are a schedule (a poll
 * every few microseconds) tightens it for their duration. */
#ifndef ORDO_BASE_TIMER_SLACK_H
#define ORDO_BASE_TIMER_SLACK_H

#include <stdint.h>

/* Sets the calling thread's slack to slack_ns and returns the one it had
 * (0 where the platform has none to set: restoring it does nothing). */
uint64_t ordo__timer_slack_set(uint64_t slack_ns);

/* Gives the thread back a slack that ordo__timer_slack_set returned. */
void ordo__timer_slack_restore(uint64_t previous_ns);

#endif
