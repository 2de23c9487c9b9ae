/* Internal: one process's handle of a shared signal, and the per-process
 * engine that feeds the handles' mirrors and watches their signallers.
 *
 * The engine has two threads, started with the first handle the process
 * opens and kept for the process's life (idle, asleep, when nothing
 * happens):
 *
 * - the watcher sleeps in one futex_waitv on: its control word (moved by
 *   `wanted`, by opens and closes), the registry_seq of every open page,
 *   and the wake_seq of every page whose handle has a timepoint waiting on
 *   its mirror (with SLEEPERS set by the page protocol). When it wakes it
 *   pulls the mirrors that are behind their pages (so timepoints, links,
 *   streams and async waiters of this process fire) and, when a page's
 *   registry moved, asks the reaper to look again.
 *
 * - the reaper sleeps in epoll_wait on an eventfd (look again) and a pidfd
 *   per registered signaller of any open page (but this process). A pidfd
 *   becomes readable when its process ends; the reaper then fails every
 *   page that still lists that process (pid and start time: a reused pid
 *   is not mistaken for it) with ORDO_ERR_ABANDONED, frees the slot, and
 *   pulls the mirrors. A signaller found dead when it is first looked at
 *   (no such pid, or another start time) is reported the same way.
 *
 * Handles are in the engine's list from open until their last reference
 * goes; a thread of the engine touches a handle only while holding a
 * reference it took under the engine's lock (ordo__signal_try_retain),
 * so it never meets one being closed. Those references are counted as
 * the handle's pins: when a release leaves only pins (checked under the
 * lock, where pins are taken), the program is done with the handle: its
 * registration ends then, not when an engine thread lets go of its pin (a
 * process that closes its handle and exits at once must not read as
 * abandoning the signal), that release ends (destroys) the handle on the
 * program's thread, and no thread of the engine pins it again.
 */
#ifndef ORDO_IPC_SHARED_HANDLE_H
#define ORDO_IPC_SHARED_HANDLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/shared_page.h"
#include "sync/signal_remote.h"

typedef struct shared_handle {
    signal_remote_t remote; /* first: the ops find the handle from it */
    shared_page_t *page;
    int fd;         /* the page's file, for ordo_shared_signal_fd */
    dev_t page_dev; /* the page's file (fstat at open): tells handles of one page */
    ino_t page_ino;
    bool registered;        /* this handle registered the process (under the engine's lock) */
    bool named;             /* a named object's (its file is not sealed) */
    bool detached;          /* a parent's handle copied into a forked child: in no list */
    uint32_t seen_registry; /* the watcher's: the registry_seq last looked at */
    uint32_t pins;          /* references the engine's threads hold (under the lock) */
    bool program_done;      /* the program's last reference went: no more pins (the lock) */
    struct shared_handle *prev, *next;
} shared_handle_t;

/* Starts the engine's threads if they do not run yet. */
ordo_status_t ordo__ipc_engine_start(const char *api);

/* Adds a handle to the engine (started). */
void ordo__ipc_engine_add(shared_handle_t *handle);

/* Takes a handle off the engine's list (its last reference went). */
void ordo__ipc_engine_remove(shared_handle_t *handle);

/* The watcher should look again (a timepoint waits on a mirror). Does not
 * block or take a lock. */
void ordo__ipc_engine_poke(void);

/* Returns once each of the engine's threads has ended two passes begun
 * after the call, or false at the deadline. The references a pass holds
 * (pins) are then gone, with any last release they deferred, and so are the
 * reaper's records of processes that had ended before the call. For tests
 * that count blocks (ordo_allocator_live_blocks); true at once when the
 * engine has not started. */
bool ordo__ipc_engine_settle(ordo_deadline_t deadline);

/* Serialises registrations of this process against closes. */
void ordo__ipc_engine_lock(void);
void ordo__ipc_engine_unlock(void);

/* Under the engine's lock: whether another handle of handle's page in
 * this process's list is registered. The page has one slot per process,
 * so the process stays a signaller until its last registered handle of
 * the page lets go. */
bool ordo__ipc_engine_page_registered_locked(const shared_handle_t *handle);

#endif
