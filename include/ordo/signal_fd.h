/** @file
 * ordo/signal_fd.h - signal values as pollable file descriptors.
 *
 * An ordo_signal_fd_t exports "signal reaches value" as a file descriptor
 * (an eventfd) that becomes readable once the value is reached, the signal
 * fails, or this process's handle of it is destroyed, so an event loop
 * (epoll, poll, libuv, Python's asyncio with loop.add_reader) can wait for
 * it among its other sources. It works on local and shared signals
 * (ordo/shared_signal.h) alike. Once the descriptor is readable,
 * ordo_signal_fd_result says what happened; reading the descriptor is not
 * needed (and does not change the result).
 *
 * The descriptor belongs to the ordo_signal_fd_t: do not close it; it is
 * closed by ordo_signal_fd_destroy. The object holds a reference to the
 * signal until it is destroyed.
 *
 * Thread-safety: ordo_signal_fd_get and ordo_signal_fd_result may be called
 * from any thread; ordo_signal_fd_destroy must not race with other calls on
 * the same object.
 */
#ifndef ORDO_SIGNAL_FD_H
#define ORDO_SIGNAL_FD_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** A signal value exported as a pollable file descriptor (opaque). */
typedef struct ordo_signal_fd ordo_signal_fd_t;

/** Exports "signal reaches value" (at most ORDO_SIGNAL_VALUE_MAX) as a
 * descriptor. A value reached already (or a failed signal) gives a
 * descriptor that is readable at once. */
ordo_status_t ordo_signal_fd_create(ordo_signal_t *signal, uint64_t value,
                                    ordo_signal_fd_t **out_signal_fd);

/** The descriptor, for poll/epoll (*out_fd); valid until the object is
 * destroyed. */
ordo_status_t ordo_signal_fd_get(ordo_signal_fd_t *signal_fd, int *out_fd);

/** What the descriptor reports: ORDO_ERR_BUSY while the value is neither
 * reached nor failed (not yet readable); ORDO_OK once reached; the
 * signal's failure status (with its message in ordo_error_message) once it
 * failed short of the value; ORDO_ERR_CANCELLED when this process's handle
 * was destroyed first. */
ordo_status_t ordo_signal_fd_result(ordo_signal_fd_t *signal_fd);

/** Cancels the export if still pending, closes the descriptor and frees
 * the object; never blocks. Called while the export's own callback is due
 * or running (from another timepoint callback on the same thread, say), it
 * leaves the closing to that callback, which does it as it returns: the
 * object is not to be used after this call either way. */
ordo_status_t ordo_signal_fd_destroy(ordo_signal_fd_t *signal_fd);

ORDO_END_DECLS

#endif
