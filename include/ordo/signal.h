/** @file
 * ordo/signal.h - timeline signals.
 *
 * A timeline signal is a monotonic 64-bit value plus a sticky failure.
 *
 * - ordo_signal_advance(s, v) raises the value to max(current, v). Signalling
 *   a value lower than or equal to the current one is a no-op that succeeds:
 *   several producers may signal one timeline without coordinating.
 * - ordo_signal_fail(s, status, message) records a failure. Only the first
 *   failure is kept; later ones are no-ops. The value freezes where it was.
 * - A wait for value v succeeds once the value reaches v. If the signal fails
 *   before reaching v, the wait returns the failure status instead (at once
 *   if it had failed already, or as soon as it fails). Values reached before
 *   the failure stay reached: a wait for them still succeeds.
 * - Every wait takes an absolute deadline (ordo/time.h) and returns
 *   ORDO_ERR_TIMEOUT when it passes; never before.
 *
 * Values range over 0..ORDO_SIGNAL_VALUE_MAX; larger ones are refused with
 * ORDO_ERR_OUT_OF_RANGE. A blocking wait spins briefly, then sleeps on a
 * futex and is woken precisely when its own target is reached (on a value a
 * GPU stream raises, the sleeping thread also looks at the device's points
 * itself every 10-50 us: docs/SIGNALS.md): a signal that
 * no one waits on advances with one compare-and-swap, no lock, no system
 * call, and does not touch the signal after publishing the value, so a
 * consumer that has seen the value may destroy the signal at once.
 *
 * Lifetime: signals are reference counted. ordo_signal_create returns one
 * reference. ordo_signal_destroy ends the signal at once: every pending
 * waiter and timepoint receives ORDO_ERR_CANCELLED, later calls get
 * ORDO_ERR_DESTROYED (except ordo_signal_retain, ordo_signal_release,
 * ordo_signal_name and ordo_signal_failure, which work as long as a
 * reference holds the memory), and the caller's reference is dropped. The memory goes
 * when the last reference does (ordo_signal_release); releasing the last
 * reference of a signal not yet destroyed destroys it first. Each reference
 * is dropped once: after one owner's destroy, the others release theirs (a
 * second destroy is refused with ORDO_ERR_DESTROYED and drops nothing).
 *
 * Thread-safety: every function may be called from any thread on the same
 * signal concurrently, except that no call may race with the release of the
 * last reference. So a thread that waits on a signal another thread may
 * destroy holds a reference of its own (ordo_signal_retain before handing
 * the signal over, ordo_signal_release after the wait): the destroy then
 * cancels the wait wherever it is, spinning or asleep. Without one, the
 * destroy may free the memory under a wait that is still entering or
 * spinning (a wait holds references itself only while asleep).
 */
#ifndef ORDO_SIGNAL_H
#define ORDO_SIGNAL_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"
#include "ordo/time.h"

ORDO_BEGIN_DECLS

/** The largest value a signal can hold (2^60 - 1). */
#define ORDO_SIGNAL_VALUE_MAX ((uint64_t)0x0fffffffffffffffULL)
/** The most entries a wait-all or wait-any accepts. */
#define ORDO_SIGNAL_WAIT_MAX 4096u
/** Failure messages are truncated to this many bytes, terminator included. */
#define ORDO_SIGNAL_MESSAGE_MAX 160u
/** Signal names are truncated to this many bytes, terminator included. */
#define ORDO_SIGNAL_NAME_MAX 48u

/** A timeline signal (opaque, reference counted). */
typedef struct ordo_signal ordo_signal_t;

/** One entry of a multi-wait: "signal reaches value". */
typedef struct ordo_signal_point {
    ordo_signal_t *signal; /**< the signal waited on */
    uint64_t value;        /**< the value it must reach */
} ordo_signal_point_t;

/** Creates a signal at initial_value (at most ORDO_SIGNAL_VALUE_MAX); the
 * caller holds its one reference. */
ordo_status_t ordo_signal_create(uint64_t initial_value, ordo_signal_t **out_signal);

/** Adds a reference, so the memory outlives ordo_signal_destroy by others.
 * Works on a destroyed signal whose memory a reference still holds (a
 * holder may pass its hold on); the signal stays destroyed. */
ordo_status_t ordo_signal_retain(ordo_signal_t *signal);

/** Drops a reference; the last one destroys (if needed) and frees. */
ordo_status_t ordo_signal_release(ordo_signal_t *signal);

/** Cancels every pending wait and timepoint (ORDO_ERR_CANCELLED), marks the
 * signal destroyed and drops the caller's reference. */
ordo_status_t ordo_signal_destroy(ordo_signal_t *signal);

/** Stores the current value in *out_value. Returns ORDO_OK, or the failure
 * status when the signal has failed (*out_value is then the value it froze
 * at). */
ordo_status_t ordo_signal_query(ordo_signal_t *signal, uint64_t *out_value);

/** Raises the value to max(current, value). Lower or equal: a successful
 * no-op. On a failed signal: nothing changes and the failure is returned. */
ordo_status_t ordo_signal_advance(ordo_signal_t *signal, uint64_t value);

/** Fails the signal with status (an error, not ORDO_OK) and an optional
 * message (NULL for none). A signal that has failed already keeps its first
 * failure and this call is a successful no-op. Every wait then returns
 * status as given: failed with ORDO_ERR_TIMEOUT, a wait returns
 * ORDO_ERR_TIMEOUT at once, before its deadline (ordo_signal_failure tells
 * the two apart); prefer ORDO_ERR_ABORTED for work that failed. */
ordo_status_t ordo_signal_fail(ordo_signal_t *signal, ordo_status_t status, const char *message);

/** ordo_signal_fail with the printf-style message fmt (NULL: none),
 * truncated to ORDO_SIGNAL_MESSAGE_MAX bytes including the terminator:
 * `ordo_signal_failf(done, ORDO_ERR_ABORTED, "frame %d: bad header", n)`. */
ordo_status_t ordo_signal_failf(ordo_signal_t *signal, ordo_status_t status, const char *fmt, ...)
    ORDO_FORMAT_(3, 4);

/** Reads the failure: *out_status is ORDO_OK while the signal has not failed.
 * out_message (may be NULL) receives the message, truncated to
 * message_capacity bytes including the terminator. Works on a destroyed
 * signal whose memory a reference still holds: the failure it had before
 * the destroy (a destroy is not a failure). */
ordo_status_t ordo_signal_failure(ordo_signal_t *signal, ordo_status_t *out_status,
                                  char *out_message, size_t message_capacity);

/** Waits until the value reaches value, the signal fails, or the deadline
 * passes. Returns ORDO_OK, the failure status, ORDO_ERR_TIMEOUT, or
 * ORDO_ERR_CANCELLED when the signal is destroyed during the wait before
 * reaching value (ORDO_ERR_DESTROYED if it was destroyed before the call). */
ordo_status_t ordo_signal_wait(ordo_signal_t *signal, uint64_t value, ordo_deadline_t deadline);

/** Waits until every entry is reached. Returns as soon as one entry fails,
 * with its failure status; ORDO_ERR_TIMEOUT at the deadline. count is
 * 1..ORDO_SIGNAL_WAIT_MAX (ORDO_ERR_INVALID_ARGUMENT for 0,
 * ORDO_ERR_OUT_OF_RANGE above); entries may repeat a signal. */
ordo_status_t ordo_signal_wait_all(const ordo_signal_point_t *points, size_t count,
                                   ordo_deadline_t deadline);

/** Waits until any entry is reached or fails. *out_index names the entry
 * that decided the wait: reached (ORDO_OK) or failed (its failure status).
 * When several are reached already, the lowest index is reported.
 * ORDO_ERR_TIMEOUT at the deadline (*out_index is then count, as it is
 * when the call is refused); an entry whose signal failed with
 * ORDO_ERR_TIMEOUT is named by its index like any failure. */
ordo_status_t ordo_signal_wait_any(const ordo_signal_point_t *points, size_t count,
                                   ordo_deadline_t deadline, size_t *out_index);

/** Names the signal for diagnostics (stall reports, ordo/stall.h): name is
 * copied, truncated to ORDO_SIGNAL_NAME_MAX - 1 bytes; NULL or "" clears
 * it. Refused with ORDO_ERR_DESTROYED on a destroyed signal. Costs nothing
 * on signal, wait or query. */
ordo_status_t ordo_signal_set_name(ordo_signal_t *signal, const char *name);

/** Copies the signal's name into out_name (truncated to capacity bytes,
 * terminator included), or, when it has none, its address ("0x55d0c3a0").
 * Works on a destroyed signal whose memory a reference still holds. */
ordo_status_t ordo_signal_name(ordo_signal_t *signal, char *out_name, size_t capacity);

ORDO_END_DECLS

#endif
