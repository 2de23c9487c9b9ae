/* Internal: signals whose truth lives elsewhere.
 *
 * A remote signal is an ordo_signal_t (a handle, with its own timepoints,
 * lock and references) over a value and failure kept somewhere else: a
 * page of memory shared with other processes (src/ipc), later a peer
 * reached by messages. The handle's own state word is a mirror of that
 * truth: it never runs ahead of it (the mirror is raised after the truth,
 * and failed with the truth's failure), and the remote's owner brings it up
 * to the truth (ordo__signal_mirror_pull) when the truth moves and a
 * timepoint waits on the mirror (`wanted` tells it one does).
 *
 * What the calls of ordo/signal.h do on a remote signal:
 *   advance     raises the truth (ops->advance), then the mirror;
 *   fail        fails the truth (the first failure anywhere wins), then
 *               pulls the mirror, which takes the winning failure;
 *   query, failure, and every blocking wait read the truth (ops->state,
 *               ops->failure), so they see another party's move at once;
 *   a single blocking wait sleeps in ops->sleep (on the truth itself: no
 *               hop through the owner); multi-waits, timepoints, links and
 *               streams wait on the mirror;
 *   destroy     ends this handle only: it is marked destroyed, its
 *               timepoints are cancelled, and ops->interrupt wakes the
 *               handle's threads asleep in ops->sleep (a sleeper reads
 *               its token before it looks for DESTROYED, and the destroy
 *               sets DESTROYED before it interrupts: a sleeper that missed
 *               the one has a token the other makes stale);
 *   the last release calls ops->close, after which nothing of the remote
 *               is touched.
 *
 * The ops are called without any signal lock held, but `wanted`, which is
 * called under the handle's lock and must not block or take locks.
 */
#ifndef ORDO_SYNC_SIGNAL_REMOTE_H
#define ORDO_SYNC_SIGNAL_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/time.h"

/* What a remote's release hook leaves to the caller (signal_remote_ops_t). */
typedef enum signal_release {
    SIGNAL_RELEASE_DROPPED = 0,
    SIGNAL_RELEASE_LAST,
    SIGNAL_RELEASE_END_PINNED,
} signal_release_t;

typedef struct signal_remote signal_remote_t;

typedef struct signal_remote_ops {
    /* The truth, acquire, in the state word's encoding: the value in
     * ORDO_SIGNAL_VALUE_MAX's bits, ORDO__SIGNAL_FAILED_BIT when failed. */
    uint64_t (*state)(signal_remote_t *remote);
    /* Raises the truth to max(truth, value). ORDO_OK, or the status of a
     * failure found there (the message raised, naming api). */
    ordo_status_t (*advance)(signal_remote_t *remote, uint64_t value, const char *api);
    /* Fails the truth unless it failed already (then a successful no-op). */
    ordo_status_t (*fail)(signal_remote_t *remote, ordo_status_t status, const char *message,
                          const char *api);
    /* The failure of a truth seen failed: its status, and its message
     * copied into message (ORDO_SIGNAL_MESSAGE_MAX bytes, terminated). */
    ordo_status_t (*failure)(signal_remote_t *remote, char *message);
    /* A sleep's token, read before the caller checks the truth and the
     * handle: an interrupt or a move of the truth after this read makes a
     * sleep with it return. */
    uint32_t (*sleep_token)(signal_remote_t *remote);
    /* Sleeps once, until the truth may have reached value or failed, the
     * deadline passes, or interrupt is called after token was read; may
     * return early (the caller re-checks). A blocking wait spins on the
     * truth for a few microseconds before its first sleep, unless
     * sleep_looks is set. */
    void (*sleep)(signal_remote_t *remote, uint32_t token, uint64_t value,
                  ordo_deadline_t deadline);
    /* The truth moves only when this process looks for news (messages
     * another process sent), and sleep looks before it sleeps: a wait
     * calls sleep at once, as spinning on the truth would find nothing. */
    bool sleep_looks;
    /* Wakes every sleep on this remote. */
    void (*interrupt)(signal_remote_t *remote);
    /* A timepoint is armed on the mirror and waits. */
    void (*wanted)(signal_remote_t *remote);
    /* Optional: ORDO_OK when the owner feeds this handle's mirror, else
     * the status refusing timepoints on it (their waits would never end),
     * with a message naming api (NULL: none). Must not block or take
     * locks. */
    ordo_status_t (*armable)(signal_remote_t *remote, const char *api);
    /* A release of the handle (optional), for an owner whose threads hold
     * references of their own for a moment (pins, taken under a lock of
     * the owner's with ordo__signal_try_retain): under that lock it tells
     * the program's references from the pins. DROPPED: it dropped a
     * reference the program still has others beside (with
     * ordo__signal_release_unless_last). Otherwise the program's last
     * reference is going, and from here on the owner takes no more pins:
     * LAST, no pin is held: the caller drops it and ends the handle;
     * END_PINNED: the caller ends the handle now (as a destroy: its
     * timepoints cancelled, its sleepers woken), as the program's last
     * release must, then drops its reference, and the last pin to go
     * frees the handle (its release then returns LAST). */
    signal_release_t (*release)(signal_remote_t *remote);
    /* Optional: the handle was ended (ordo_signal_destroy, or the
     * program's last release): it moves the truth no more. Called once,
     * with no lock of the signal held. */
    void (*ended)(signal_remote_t *remote);
    /* The handle's last reference went. */
    void (*close)(signal_remote_t *remote);
} signal_remote_ops_t;

/* Embedded in the owner's own record. */
struct signal_remote {
    const signal_remote_ops_t *ops;
    ordo_signal_t *signal; /* the handle (set by ordo__signal_create_remote) */
};

/* A handle over remote, its mirror at the truth's state now; the caller
 * holds its one reference. */
ordo_status_t ordo__signal_create_remote(signal_remote_t *remote, ordo_signal_t **out_signal,
                                         const char *api);

/* The signal's remote, or NULL for a local signal. */
signal_remote_t *ordo__signal_remote(const ordo_signal_t *signal);

/* Brings the mirror up to the truth: raises it, or fails it with the
 * truth's failure; due callbacks run on the calling thread. A destroyed
 * handle is left alone. Records no message: a pull within a successful
 * call leaves the thread's message as it was. */
void ordo__signal_mirror_pull(ordo_signal_t *signal);

/* The handle's references now (acquire): a hint, exact only while the
 * caller holds whatever makes them move. */
uint32_t ordo__signal_references(const ordo_signal_t *signal);

/* Drops a reference unless it is the last (false then: the caller drops
 * it with ordo__signal_release_internal, which ends the handle). Calls no
 * hook: for an owner that drops references of its own under its lock. */
bool ordo__signal_release_unless_last(ordo_signal_t *signal);

/* The release hook's decision for an owner with pins (signal_remote_ops_t
 * .release), under the owner's lock, where its pins are taken and dropped:
 * pins is their count now, *program_done the owner's flag for the handle
 * (set here when the program's last reference goes). */
signal_release_t ordo__signal_release_pinned(ordo_signal_t *signal, uint32_t pins,
                                             bool *program_done);

/* Takes a reference unless the last one is gone already (false then):
 * for an owner that finds handles in a list of its own. */
bool ordo__signal_try_retain(ordo_signal_t *signal);

#endif
