/** @file
 * ordo/status.h - the error model of the whole library.
 *
 * Every public function that can fail returns an ordo_status_t (the helpers
 * that cannot, here, in ordo/time.h and ordo/version.h, return their value).
 * ORDO_OK (zero) is success; every other value is an error class. The class
 * tells a program what to do; the detail of the most recent error raised on
 * the calling thread (which function, which argument, which value) is kept
 * as text and read with ordo_error_message(). Successful calls leave that
 * text untouched.
 *
 * Outputs on failure: an out-parameter that is not NULL is written on every
 * path; a failed call leaves its empty value there (NULL, 0, an all-zero
 * struct), except where the function's comment gives the output a meaning
 * on failure. Caller-provided arrays and text buffers are not cleared.
 * docs/ERRORS.md lists the exceptions.
 *
 * Statuses also travel as data: a failed timeline signal carries the status
 * (and a message) it was failed with, and every waiter receives it.
 *
 * Thread-safety: all functions here are safe from any thread; the error
 * message is per thread.
 */
#ifndef ORDO_STATUS_H
#define ORDO_STATUS_H

#include "ordo/export.h"

ORDO_BEGIN_DECLS

/** What every public function that can fail returns: ORDO_OK or an error class. */
typedef enum ordo_status {
    /** Success. */
    ORDO_OK = 0,
    /** An argument is malformed: a null pointer, a zero count, conflicting
     * arguments or flags. (A count above its maximum is
     * ORDO_ERR_OUT_OF_RANGE.) */
    ORDO_ERR_INVALID_ARGUMENT = 1,
    /** A handle is null, of the wrong type or not a live ordo object. */
    ORDO_ERR_INVALID_HANDLE = 2,
    /** A number is outside the range the call accepts: a value, or a count
     * (of entries, dependencies, threads, ...), above its maximum. */
    ORDO_ERR_OUT_OF_RANGE = 3,
    /** The object was destroyed; it only still exists because of a reference. */
    ORDO_ERR_DESTROYED = 4,
    /** A deadline passed before the awaited condition held. */
    ORDO_ERR_TIMEOUT = 5,
    /** The operation was cancelled (for example, its signal was destroyed). */
    ORDO_ERR_CANCELLED = 6,
    /** The object is not in a state that allows the call (already armed,
     * still in use, ...). */
    ORDO_ERR_BUSY = 7,
    /** A host or device allocation failed, or a memory budget refused
     * one. */
    ORDO_ERR_OUT_OF_MEMORY = 8,
    /** A configured limit was reached (a tracker's or a coordinator's 64
     * streams, ...). A memory budget's limit is
     * ORDO_ERR_OUT_OF_MEMORY instead (ordo/memory_adaptors.h): to the
     * caller it is memory that cannot be had. */
    ORDO_ERR_RESOURCE_EXHAUSTED = 9,
    /** The request would close a cycle of waits. */
    ORDO_ERR_DEADLOCK = 10,
    /** A backend or device is not present on this machine. */
    ORDO_ERR_UNAVAILABLE = 11,
    /** The backend or object does not support this request. */
    ORDO_ERR_UNSUPPORTED = 12,
    /** The device or its driver reported an error. */
    ORDO_ERR_DEVICE = 13,
    /** User work failed (a task returned an error, or a producer called
     * ordo_signal_fail with this status). */
    ORDO_ERR_ABORTED = 14,
    /** A lookup found nothing. */
    ORDO_ERR_NOT_FOUND = 15,
    /** An invariant of ordo itself was broken: a bug, please report it. */
    ORDO_ERR_INTERNAL = 16,
    /** Memory was written where it must not be: outside a block, or in a
     * freed block (found by a checking resource such as the guard). */
    ORDO_ERR_CORRUPTED = 17,
    /** A process that was registered to advance a shared signal ended
     * before it unregistered (ordo/shared_signal.h), or the MPI rank that
     * owns an observed signal was found dead (ordo/mpi.h). */
    ORDO_ERR_ABANDONED = 18,
    ORDO_STATUS_COUNT_ /**< not a status: one past the last */
} ordo_status_t;

/** The enumerator's name, for example "ORDO_ERR_TIMEOUT"; "ORDO_ERR_<unknown>" for a
 * value that is not a status. Never NULL. */
const char *ordo_status_name(ordo_status_t status);

/** A short sentence describing the status class. Never NULL. */
const char *ordo_status_describe(ordo_status_t status);

/** Non-zero when status is a defined error value (not ORDO_OK). */
bool ordo_status_is_error(ordo_status_t status);

/** The detail of the most recent error raised by ordo on this thread, or ""
 * when none was. Valid until the next ordo call on this thread, and not
 * once the thread exits (the text is freed with the thread; pthread key
 * destructors that run after that read a fixed text saying so). A later
 * call that succeeds leaves it as it is: it may describe an earlier
 * failure, so read it only right after a call that failed. */
const char *ordo_error_message(void);

/** @def ORDO_FORMAT_
 * Lets GCC and Clang check the format strings of ordo_fail and
 * ordo_signal_failf against their arguments (nothing elsewhere). */
#if defined(__GNUC__)
#define ORDO_FORMAT_(f, a) __attribute__((format(printf, f, a)))
#else
#define ORDO_FORMAT_(f, a)
#endif

/** Makes the printf-style text fmt (NULL: "") this thread's error message
 * (ordo_error_message) and returns status unchanged, so user code fails
 * with a message of its own in one line:
 *
 *     return ordo_fail(ORDO_ERR_ABORTED, "decoder: bad frame %d", n);
 *
 * A host task (ordo/stream.h) that returns an error after calling it
 * fails its stream with that text in the stream's failure message, and so
 * in the message of every signal the failure fails and of every wait that
 * receives it; a launch function (ordo/tracker.h) that does so has the
 * text in ordo_tracker_submit's message. The text is cut to 511 bytes. */
ordo_status_t ordo_fail(ordo_status_t status, const char *fmt, ...) ORDO_FORMAT_(2, 3);

ORDO_END_DECLS

#endif
