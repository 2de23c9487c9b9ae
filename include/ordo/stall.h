/** @file
 * ordo/stall.h - why is this hung? Stall reports of a device's streams.
 *
 * A stall report looks at every live stream of a device and lists those
 * blocked in a wait: the signal and value each waits for, the signal's
 * current value, and whether work already enqueued on the device's streams
 * can still reach that value.
 *
 * How reachability is decided: the report takes a snapshot of every
 * stream's queued waits and signals, then simulates forward from the
 * signals' current values: a queued signal raises its signal's simulated
 * value, a stream passes a wait once the simulated value reaches it (or
 * the signal has failed: the wait then fails the stream, which releases
 * it too), and a stream's own progress rises as it passes its operations
 * (so waits on events are followed as well). This repeats until nothing
 * moves. A wait passed in the simulation is REACHABLE, and the report
 * names the stream whose queued signal releases it and the value it
 * signals. A wait still blocked at the end is UNREACHABLE: no work
 * enqueued on this device reaches it, so only something outside the
 * device's queues can release it (a host signal, a link, another device,
 * a failure) - a deadlock if nothing will, which the waiters' own
 * deadlines turn into ORDO_ERR_TIMEOUT instead of a hang.
 *
 * The simulation assumes that host tasks already enqueued return; a host
 * task that itself blocks is not seen. A stream running a host task, an
 * idle stream and a failed stream are not blocked and are not listed.
 * When one stream has more than ORDO_STALL_MAX_PENDING waits and signals
 * queued (or, on the CPU backend, more than about a million operations of
 * any kind), the report sees only the first ones: a wait the seen work does
 * not reach is then reported as ORDO_STALL_UNKNOWN instead of UNREACHABLE
 * when such a queue was run past all it showed (work behind a wait the
 * simulation stopped at cannot run), and a holder the seen work does not
 * show is ORDO_STALL_HOLD_UNKNOWN whenever a queue was seen in part.
 *
 * Cost and safety: the snapshot holds the device's registry of live streams
 * (stream create, destroy and naming on the device wait meanwhile) and, for each
 * stream in turn, the lock its producers take to enqueue (the streams keep
 * running while it is taken); it allocates nothing under a lock and runs no
 * user code under one. A report is a moment's picture: streams move on while it is read.
 *
 * Thread-safety: any thread, concurrently with anything else on the
 * device, including from a watchdog while the device is hung.
 */
#ifndef ORDO_STALL_H
#define ORDO_STALL_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/device.h"
#include "ordo/signal.h"
#include "ordo/status.h"
#include "ordo/stream.h"

ORDO_BEGIN_DECLS

/** Per stream, the most queued waits and signals a report inspects. */
#define ORDO_STALL_MAX_PENDING 4096u

/** Whether work already enqueued on the device reaches a blocked wait. */
typedef enum ordo_stall_reach {
    ORDO_STALL_UNREACHABLE = 0, /**< no enqueued work reaches the value */
    ORDO_STALL_REACHABLE = 1,   /**< releasing_stream's queued work reaches it */
    ORDO_STALL_UNKNOWN = 2,     /**< a queue was too long to see whole */
} ordo_stall_reach_t;

/** One blocked stream. The pointers identify objects for the reader (and
 * compare with the caller's own); the report holds no reference, so they
 * may dangle once the wait ends: do not signal through them blindly. */
typedef struct ordo_stall_entry {
    ordo_stream_t *stream; /**< the blocked stream */
    int stream_priority;   /**< its priority */
    /** What it waits for: signal reaching waited_value. For a wait on an
     * event (ordo_stream_wait_event), the signal is the recording stream's
     * progress timeline, internal to ordo: signal is then NULL and
     * progress_of names the recording stream. */
    ordo_signal_t *signal;
    ordo_stream_t *progress_of; /**< for a wait on an event: the recording stream, else NULL */
    char signal_name[ORDO_SIGNAL_NAME_MAX]; /**< its name, else its address */
    uint64_t waited_value;                  /**< the value waited for */
    uint64_t current_value;   /**< the signal's value (or the recording stream's progress) */
    ordo_stall_reach_t reach; /**< whether enqueued work reaches waited_value */
    /** REACHABLE: the stream whose queued operation releases the wait, and
     * the value that operation brings the signal to (for a progress wait:
     * the point the stream reaches). release_fails: that stream has failed
     * or will fail first, so the release is a failure propagating (the
     * blocked stream then fails too). NULL / 0 otherwise. */
    ordo_stream_t *releasing_stream;
    uint64_t releasing_value; /**< the value that operation brings the signal to */
    bool release_fails;       /**< true when the release is a failure propagating */
    /** The names of stream, progress_of and releasing_stream
     * (ordo_stream_set_name), each its stream's address when it has none,
     * "" when there is no such stream. */
    char stream_name[ORDO_STREAM_NAME_MAX];
    char progress_of_name[ORDO_STREAM_NAME_MAX];      /**< see stream_name */
    char releasing_stream_name[ORDO_STREAM_NAME_MAX]; /**< see stream_name */
} ordo_stall_entry_t;

/** Fills out_entries with up to capacity blocked streams, in the order the
 * streams were created; *out_count receives how many are blocked even when
 * capacity is smaller (out_entries may be NULL when capacity is 0). */
ordo_status_t ordo_stall_report(ordo_device_t *device, ordo_stall_entry_t *out_entries,
                                size_t capacity, size_t *out_count);

/** The same report as text, one line per blocked stream ("" when none),
 * each ending in a newline, for a watchdog's log, e.g.
 * @code{.unparsed}
 *   stream 0x5581e0 (priority 0) waits for signal "X" to reach 1 (now 0):
 *   UNREACHABLE by enqueued work - only a host signal, a link or a failure
 *   can release it (a deadlock if none comes)
 * @endcode
 * (on one line; names are quoted, with quotes, backslashes and control
 * characters escaped as `\"`, `\\` and `\xHH`; a stream or signal without
 * a name shows its address, unquoted, as the stream above does). An
 * UNREACHABLE wait that the queued work of a blocked stream would release
 * is followed to its root instead, link after link (at most 8): held by
 * stream B, which waits for signal Y to reach 1 (now 0) - only a host
 * signal, a link or a failure can release that; a chain that comes back to
 * a stream already on it ends with that stream: a cycle. The text
 * is truncated to capacity - 1 bytes and always terminated when
 * capacity > 0; *out_len receives the full length (without the
 * terminator) even when truncated, so a caller may size a buffer with
 * capacity 0 and out_text NULL (ORDO_OK), and retry. A text cut to fit
 * returns ORDO_ERR_OUT_OF_RANGE, as ordo_metrics_format does. */
ordo_status_t ordo_stall_report_format(ordo_device_t *device, char *out_text, size_t capacity,
                                       size_t *out_len);

/** What keeps a signal from a value, as far as the device's queues tell. */
typedef enum ordo_stall_hold {
    /** No work enqueued on the device raises it that far: only a host
     * signal, a link, another process or rank, or a failure can. */
    ORDO_STALL_HOLD_NONE = 0,
    /** Enqueued work raises it that far (once the streams run). */
    ORDO_STALL_HOLD_RAISED = 1,
    /** The queued work of a blocked stream would raise it: the holder. */
    ORDO_STALL_HOLD_BLOCKED = 2,
    /** A queue was too long to see whole, and the seen work does not. */
    ORDO_STALL_HOLD_UNKNOWN = 3,
    /** It has failed or was destroyed below the value, or enqueued work
     * fails it (a failure that reaches a stream, through a wait on a
     * failed signal, fails the signals it would raise): a wait for the
     * value ends with that failure, it does not hang. */
    ORDO_STALL_HOLD_FAILS = 4,
} ordo_stall_hold_t;

/** ordo_stall_holder's answer. For ORDO_STALL_HOLD_BLOCKED: stream is the
 * first stream (in creation order) whose queued signal would raise the
 * signal to the value, and the rest says what that stream is blocked on,
 * as in ordo_stall_entry_t (waits_for NULL and progress_of set for a wait
 * on an event). For ORDO_STALL_HOLD_FAILS: stream (and stream_name) is the
 * stream whose queued work fails it, NULL where it has ended already.
 * Other answers leave them NULL, 0 and "". */
typedef struct ordo_stall_holder {
    ordo_stall_hold_t hold;                 /**< the answer */
    ordo_stream_t *stream;                  /**< the blocked stream that would raise it */
    char stream_name[ORDO_STREAM_NAME_MAX]; /**< its name, else its address */
    ordo_signal_t *waits_for;               /**< the signal that stream waits for */
    ordo_stream_t *progress_of;             /**< for a wait on an event: the recording stream */
    char signal_name[ORDO_SIGNAL_NAME_MAX]; /**< the waited signal's name, else its address */
    uint64_t waited_value;                  /**< the value that stream waits for */
    uint64_t current_value;                 /**< the waited signal's value now */
} ordo_stall_holder_t;

/** Why signal has not reached value, from the device's queues (the same
 * snapshot and simulation as ordo_stall_report): whether enqueued work
 * raises it, and if only a blocked stream's would, which stream and what
 * it waits for. Follows a chain of waits one link at a time (a report
 * across ranks, ordo/mpi.h, follows them from rank to rank). A value
 * above ORDO_SIGNAL_VALUE_MAX is ORDO_ERR_OUT_OF_RANGE. */
ordo_status_t ordo_stall_holder(ordo_device_t *device, ordo_signal_t *signal, uint64_t value,
                                ordo_stall_holder_t *out_holder);

ORDO_END_DECLS

#endif
