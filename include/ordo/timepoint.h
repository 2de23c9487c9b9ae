/** @file
 * ordo/timepoint.h - "when signal S reaches v (or fails), call f".
 *
 * A timepoint is a record the caller owns: arming it allocates nothing, so
 * it can live on the stack, inside another object or in an array. Blocking
 * waits, multi-waits and links are all built on timepoints.
 *
 * The callback f(ctx, status, timepoint) runs exactly once per arming,
 * unless ordo_timepoint_cancel prevents it:
 * - with ORDO_OK when the signal reaches the value (at once, on the arming
 *   thread, if it already has);
 * - with the signal's failure status when it fails before reaching it;
 * - with ORDO_ERR_CANCELLED when the signal is destroyed first.
 *
 * Callbacks run on the thread that caused them (the one that signalled,
 * failed, destroyed or armed; for a value a GPU stream reaches, the
 * device's completion thread, even when a waiting thread saw the point
 * first: docs/CUDA.md), never under a lock of ordo's. A callback may
 * signal, fail or wait-free query any signal and arm or cancel timepoints,
 * including its own (re-arming is allowed). Timepoints that become due while
 * a callback runs on the same thread are queued and run after it returns,
 * in order, so long chains cannot overflow the stack. A callback must not
 * block. Once the callback has been entered ordo never touches the timepoint
 * again: the callback may free or reuse its memory. Until then (armed, or
 * due with its callback not yet entered) the memory must stay valid, even
 * if the signal is destroyed meanwhile: a destroy delivers
 * ORDO_ERR_CANCELLED through the callback like any other outcome.
 *
 * Thread-safety: arming and cancelling one timepoint must not race with each
 * other (the owner serialises them), and a callback that re-arms its own
 * timepoint is arming it: while it may, no other thread may cancel it.
 * Different timepoints are independent.
 * The signal must stay alive (hold a reference) while its timepoint may be
 * cancelled.
 */
#ifndef ORDO_TIMEPOINT_H
#define ORDO_TIMEPOINT_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** A caller-owned wait record (see struct ordo_timepoint). */
typedef struct ordo_timepoint ordo_timepoint_t;

/** A timepoint's callback: status is the outcome (see above), timepoint
 * the one that fired. */
typedef void (*ordo_timepoint_fn)(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint);

/** A timepoint: a caller-owned record of one wait and its callback.
 * Zero-initialise (or use ORDO_TIMEPOINT_INIT) before first use. The fields
 * are ordo's while the timepoint is armed; do not touch them. */
struct ordo_timepoint {
    ordo_timepoint_t *next_; /**< internal: the next in its signal's list, or due */
    ordo_timepoint_t *prev_; /**< internal: the previous in its signal's list */
    ordo_signal_t *signal_;  /**< internal: the signal it is armed on */
    uint64_t value_;         /**< internal: the value it waits for */
    ordo_timepoint_fn fn_;   /**< internal: the callback */
    void *ctx_;              /**< internal: the callback's context */
    ordo_status_t status_;   /**< internal: the outcome, once due */
    uint16_t state_;         /**< internal: idle, armed, due or fired */
    uint16_t kind_;          /**< internal: whose timepoint it is (how it is run) */
};

/** An initializer for a timepoint never armed. */
#define ORDO_TIMEPOINT_INIT                                                                        \
    { 0 }

/** What a cancel achieved. */
typedef enum ordo_cancel_result {
    /** The callback will never run for this arming. */
    ORDO_CANCEL_PREVENTED = 0,
    /** The callback has started or is about to start (it was due already). */
    ORDO_CANCEL_TOO_LATE = 1
} ordo_cancel_result_t;

/** Arms timepoint to call fn(ctx, ...) when signal reaches value. Returns
 * ORDO_ERR_BUSY if the timepoint is armed already, ORDO_ERR_DESTROYED if the
 * signal is. On success the callback is guaranteed to run once unless
 * cancelled. */
ordo_status_t ordo_timepoint_arm(ordo_timepoint_t *timepoint, ordo_signal_t *signal, uint64_t value,
                                 ordo_timepoint_fn fn, void *ctx);

/** Disarms timepoint. *out_result says whether the callback was prevented or
 * is past stopping. ORDO_ERR_INVALID_ARGUMENT if it was never armed or was
 * cancelled already. */
ordo_status_t ordo_timepoint_cancel(ordo_timepoint_t *timepoint, ordo_cancel_result_t *out_result);

ORDO_END_DECLS

#endif
