/** @file
 * ordo/time.h - time points, deadlines and timeouts.
 *
 * All times are nanoseconds on CLOCK_MONOTONIC. Every blocking call in ordo
 * takes an absolute deadline, so a sequence of waits shares one budget
 * instead of restarting a timeout at each step. ORDO_DEADLINE_NEVER waits
 * without limit; ORDO_DEADLINE_NOW (any time in the past) only polls.
 *
 * Thread-safety: all functions here are pure or read the clock; safe from
 * any thread.
 */
#ifndef ORDO_TIME_H
#define ORDO_TIME_H

#include "ordo/export.h"

#include <stdint.h>

ORDO_BEGIN_DECLS

/** An absolute CLOCK_MONOTONIC time in nanoseconds. */
typedef uint64_t ordo_deadline_t;

/** A deadline already past: a wait only polls. */
#define ORDO_DEADLINE_NOW ((ordo_deadline_t)0)
/** No deadline: a wait without limit. */
#define ORDO_DEADLINE_NEVER ((ordo_deadline_t)UINT64_MAX)

/** The current CLOCK_MONOTONIC time in nanoseconds. */
uint64_t ordo_time_now_ns(void);

/** The deadline timeout_ns from now; saturates at ORDO_DEADLINE_NEVER. */
ordo_deadline_t ordo_deadline_after_ns(uint64_t timeout_ns);

/** The deadline timeout_ms milliseconds from now; saturates. */
ordo_deadline_t ordo_deadline_after_ms(uint64_t timeout_ms);

/** Nanoseconds left until deadline: 0 once it has passed, UINT64_MAX for
 * ORDO_DEADLINE_NEVER. */
uint64_t ordo_deadline_remaining_ns(ordo_deadline_t deadline);

ORDO_END_DECLS

#endif
