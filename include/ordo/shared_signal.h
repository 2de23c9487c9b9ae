/** @file
 * ordo/shared_signal.h - timeline signals shared between processes.
 *
 * A shared signal is a timeline signal (ordo/signal.h) whose value and
 * failure live in a page of shared memory: an anonymous memfd, passed to
 * another process as a file descriptor (over a UNIX socket with
 * ordo_fd_send / ordo_fd_receive, or inherited across exec), or a named
 * POSIX shared-memory object. Each process opens the page and gets an
 * ordo_signal_t of its own on it, and every call of ordo/signal.h,
 * ordo/timepoint.h, ordo/link.h and ordo/waiter.h works on that handle as
 * on a local signal, with the same semantics: advance is a monotonic
 * maximum, the first failure (status and message) is kept and reaches
 * every waiter of every process, waits take deadlines, and wait-all and
 * wait-any take any mix of local and shared signals. A stream (ordo/stream.h)
 * can wait on one and signal one, so a stage in one process runs after
 * another process's stage with no host thread blocking.
 *
 * A blocking ordo_signal_wait on a shared signal sleeps on a shared futex in
 * the page itself and is woken by the advancing process directly. Other
 * waits (timepoints, links, streams, async waiters, multi-waits) are fed
 * by one watcher thread per process, started with the first shared signal
 * the process opens, which sleeps on the futexes of the shared signals
 * this process waits on (futex_waitv) and raises the local handles.
 *
 * Abandonment: a process that is to advance a shared signal registers as
 * one of its signallers (ordo_shared_signal_register). If it ends while
 * registered (exit, a crash, kill -9), the signal fails with
 * ORDO_ERR_ABANDONED and a message naming the process, within
 * ORDO_SHARED_SIGNAL_ABANDON_BOUND_MS of its end, and waiters in every
 * process wake with it. Each process that has a shared signal open watches
 * the registered signallers through pidfds (Linux 5.3 or later), so any
 * surviving process reports the death. A signaller that is done
 * unregisters, destroys its handle (ordo_signal_destroy: the handle can
 * signal no more, even while references to it remain, a signal fd's
 * among them) or releases its last reference to it, each of which
 * unregisters it. A registration
 * survives exec (the process is the same): a program that execs while
 * registered is reported when the new image ends.
 *
 * Handles: ordo_signal_destroy on a shared signal's handle ends that
 * handle only (its pending waits and timepoints in this process get
 * ORDO_ERR_CANCELLED); the timeline lives on in the other processes. To
 * end it for everyone, fail it. The page goes when the last process unmaps
 * it (and, for a named object, once it is unlinked).
 *
 * Trust: the page is shared with other processes, which may scribble on
 * it. Every read of it is bounded and checked: a hostile or broken peer can
 * make values and failures wrong, but cannot make this process crash
 * (memfds are sealed against shrinking; a named object is not, see
 * docs/IPC.md) or wait past its deadline.
 *
 * Processes share signals within one PID namespace on one machine; a
 * forked child uses handles it opens itself, not its parent's: nothing in
 * the child feeds the copies fork made of its parent's handles, so the
 * calls that would need it refuse them with ORDO_ERR_INVALID_HANDLE
 * (timepoints, links, signal fds, multi-waits, async waits, stream waits,
 * ordo_shared_signal_register). The child may release those copies, and
 * opens its own handle from an inherited descriptor (ordo_shared_signal_fd
 * gives one from a copy too) or by name.
 *
 * Thread-safety: as for ordo/signal.h.
 */
#ifndef ORDO_SHARED_SIGNAL_H
#define ORDO_SHARED_SIGNAL_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/status.h"
#include "ordo/time.h"

ORDO_BEGIN_DECLS

/** The version of the shared page's layout; a page of another version is
 * refused with ORDO_ERR_UNSUPPORTED. */
#define ORDO_SHARED_SIGNAL_LAYOUT_VERSION 2u
/** The size of the shared page, in bytes. */
#define ORDO_SHARED_SIGNAL_SIZE 4096u
/** How many processes can be registered signallers of one signal at once. */
#define ORDO_SHARED_SIGNAL_SIGNALLERS_MAX 32u
/** Shared-memory names are at most this many bytes, terminator included. */
#define ORDO_SHARED_SIGNAL_NAME_MAX 240u
/** The bound on the time from a registered signaller's end to the failure
 * of its signals (docs/IPC.md says what it rests on). */
#define ORDO_SHARED_SIGNAL_ABANDON_BOUND_MS 100u

/** How to create a shared signal. */
typedef struct ordo_shared_signal_config {
    /** The value it starts at (at most ORDO_SIGNAL_VALUE_MAX). */
    uint64_t initial_value;
    /** NULL: anonymous shared memory (a memfd), passed on as a file
     * descriptor (ordo_shared_signal_fd). Otherwise the name of a POSIX
     * shared-memory object to create ("/name": one slash, then up to
     * ORDO_SHARED_SIGNAL_NAME_MAX - 2 bytes, no other slash, not "/." or
     * "/.."); creating a
     * name that exists is refused with ORDO_ERR_BUSY. */
    const char *name;
    /** Reserved: 0. */
    uint32_t flags;
} ordo_shared_signal_config_t;

/** The default: anonymous, at value 0. */
ordo_shared_signal_config_t ordo_shared_signal_config_default(void);

/** Creates a shared signal; the caller holds one reference to this
 * process's handle. */
ordo_status_t ordo_shared_signal_create(const ordo_shared_signal_config_t *config,
                                        ordo_signal_t **out_signal);

/** Opens the shared signal behind fd (from ordo_shared_signal_fd in some
 * process). The fd stays the caller's: it may be closed right after.
 * Refused with a status and message: a closed fd (ORDO_ERR_INVALID_HANDLE);
 * something that is not an ordo signal page, a truncated or foreign file
 * (ORDO_ERR_INVALID_ARGUMENT); a page of another layout version
 * (ORDO_ERR_UNSUPPORTED). */
ordo_status_t ordo_shared_signal_open_fd(int fd, ordo_signal_t **out_signal);

/** Opens a named shared signal (ORDO_ERR_NOT_FOUND when no such name
 * exists; otherwise as ordo_shared_signal_open_fd). A name being created
 * by another process is waited for, 100 ms at most, then refused with
 * ORDO_ERR_UNAVAILABLE (try again); never taken for a file that is not a
 * signal. */
ordo_status_t ordo_shared_signal_open_name(const char *name, ordo_signal_t **out_signal);

/** Removes a name (handles open on it stay valid). ORDO_ERR_NOT_FOUND when
 * no such name exists. */
ordo_status_t ordo_shared_signal_unlink(const char *name);

/** A new file descriptor (close-on-exec) for an anonymous shared signal's
 * page, for another process to open; the caller closes it.
 * ORDO_ERR_INVALID_ARGUMENT for a local signal, and for a named one (its
 * file cannot be sealed against shrinking, so ordo_shared_signal_open_fd
 * would refuse it: other processes open it by its name);
 * ORDO_ERR_DESTROYED for a destroyed handle. */
ordo_status_t ordo_shared_signal_fd(ordo_signal_t *signal, int *out_fd);

/** Whether signal is a shared signal's handle (*out_shared). */
ordo_status_t ordo_signal_is_shared(ordo_signal_t *signal, bool *out_shared);

/** Registers the calling process as a signaller through this handle: if
 * it ends while registered, the signal fails with ORDO_ERR_ABANDONED.
 * Registering twice is a successful no-op. With several handles of one
 * signal open in the process, it stays registered while any of them is
 * (unregistered or released last). ORDO_ERR_RESOURCE_EXHAUSTED when
 * ORDO_SHARED_SIGNAL_SIGNALLERS_MAX processes are registered already. */
ordo_status_t ordo_shared_signal_register(ordo_signal_t *signal);

/** Ends this handle's registration (a successful no-op when it has none);
 * the process is no longer a signaller once no handle of the signal in it
 * is registered. */
ordo_status_t ordo_shared_signal_unregister(ordo_signal_t *signal);

/** Sends fd over the connected UNIX socket `socket` (SCM_RIGHTS). The
 * caller keeps its fd. While the socket has no room (its peer does not
 * read), waits until the deadline (ORDO_ERR_TIMEOUT, nothing sent), on a
 * blocking socket as on a non-blocking one. */
ordo_status_t ordo_fd_send(int socket, int fd, ordo_deadline_t deadline);

/** Receives a file descriptor sent with ordo_fd_send on `socket`, waiting
 * until the deadline (ORDO_ERR_TIMEOUT); the caller owns *out_fd
 * (close-on-exec). ORDO_ERR_NOT_FOUND if the peer closed the socket. */
ordo_status_t ordo_fd_receive(int socket, ordo_deadline_t deadline, int *out_fd);

ORDO_END_DECLS

#endif
