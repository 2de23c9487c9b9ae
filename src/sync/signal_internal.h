/* Internal: the timeline signal's representation, private to the files of
 * the sync layer (signal, timepoint dispatch, waits, links). Other layers
 * use a signal through sync/signal_access.h only; their include views do
 * not hold this header (CMakeLists.txt).
 *
 * The whole observable state is one atomic word:
 *
 *   bit 63 FAILED       set once, under the lock; freezes the value
 *   bit 62 DESTROYED    set once, under the lock
 *   bit 61 WAITERS      the timepoint list is not empty (kept under the lock)
 *   bit 60 DISPATCHING  one producer is collecting due timepoints
 *   bits 0-59           the value
 *
 * Raising the value is a CAS on that word. Armed timepoints sit in a list
 * sorted by value under the signal's mutex; next_wake mirrors the smallest
 * armed value so a producer can skip the lock when no target is reached.
 *
 * No lost wake-ups: registering a timepoint and raising the value are both
 * read-modify-writes of the same word, so one is ordered before the other.
 * If the raise comes first, the registering thread's fetch_or returns the
 * raised value and it collects the timepoint itself (its own only: others
 * in the list were listed with WAITERS set, so the raise that reached them
 * sees WAITERS and dispatches them). If the registration comes first, the
 * raise sees WAITERS. WAITERS is derived from the list (it
 * is cleared only under the lock, when the list is empty), never cleared
 * by a producer, so a second registration cannot be lost to a first wake.
 *
 * No touching freed memory: a producer that saw no WAITERS does nothing
 * after its CAS, so a consumer that saw the value may free the signal at
 * once. A producer that saw WAITERS takes DISPATCHING in the same CAS and
 * holds it until it has collected; the last release waits for DISPATCHING
 * to clear before freeing. Producers raising while DISPATCHING is held leave
 * the collection to its holder, who re-checks the value before letting go.
 *
 * Failed or destroyed: both end the signal, and a timepoint can get
 * ORDO_ERR_CANCELLED from either (a destroy cancels with it; a producer may
 * fail with it). The status cannot tell them apart; FAILED can. A failure
 * fires every armed timepoint and a timepoint armed on a failed signal
 * fires at once, so a later destroy cancels none; a destroyed signal
 * refuses a failure. So a non-OK outcome came from a failure exactly when
 * FAILED is set, read once the outcome is seen, while a reference holds
 * the signal (signal_failed_outcome).
 *
 * Feeders: a producer that observes the value somewhere else (a device's
 * completion watcher polling its points) may hang a feeder on the signal.
 * Arming a timepoint that does not fire at once calls the feeder's `wanted`
 * under the signal's lock, so the producer can look sooner than it would
 * for a value nobody waits for. A feeder with `help` also lets a thread
 * that sleeps in a wait look itself, on its own schedule (help_min_ns,
 * doubling to help_max_ns): ordo__signal_feeder_enter takes a reference under
 * the lock, ordo__signal_feeder_leave drops it. The feeder is set and cleared by
 * its owner (ordo__signal_feeder_set, ordo__signal_feeder_clear); clearing takes the
 * lock, so once it returns no `wanted` call for the signal is running or
 * can start, and no new reference is taken; the owner waits for `helpers`
 * to drop to zero before it frees the feeder.
 *
 * Locks: each signal has one mutex; no code holds two signal mutexes at
 * once, and no callback runs under one (a feeder's `wanted` is not a
 * user's callback: it must not block or take a lock that is held while a
 * signal's lock is taken).
 */
#ifndef ORDO_SYNC_SIGNAL_INTERNAL_H
#define ORDO_SYNC_SIGNAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "ordo/signal.h"
#include "ordo/timepoint.h"
#include "sync/signal_access.h"
#include "sync/signal_remote.h"

#define ORDO_SIGNAL_MAGIC 0x5349474eu /* "SIGN" */
/* A remote signal's handle (sync/signal_remote.h): one bit apart, so the
 * hot paths' magic compare also sends remote handles to the slow path,
 * and ordo__signal_check accepts both with one compare. */
#define ORDO_SIGNAL_MAGIC_REMOTE (ORDO_SIGNAL_MAGIC | 1u)
#define ORDO_SIGNAL_MAGIC_ANY_MASK (~1u)
#define ORDO_SIGNAL_DEAD 0xdeadbeefu

#define SIGNAL_FAILED ORDO__SIGNAL_FAILED_BIT       /* bits shared with signal_access.h's */
#define SIGNAL_DESTROYED ORDO__SIGNAL_DESTROYED_BIT /* inline readers */
#define SIGNAL_WAITERS ((uint64_t)1 << 61)
#define SIGNAL_DISPATCHING ((uint64_t)1 << 60)
#define SIGNAL_ENDED (SIGNAL_FAILED | SIGNAL_DESTROYED)
#define SIGNAL_VALUE_MASK ORDO_SIGNAL_VALUE_MAX
#define SIGNAL_NO_WAKE UINT64_MAX

/* Timepoint states (ordo_timepoint_t.state_). */
enum {
    TIMEPOINT_IDLE = 0,  /* never armed, or cancelled */
    TIMEPOINT_ARMED = 1, /* in its signal's list */
    TIMEPOINT_DUE = 2,   /* off the list, its callback not yet entered */
    TIMEPOINT_FIRED = 3, /* its callback was entered: the owner's again */
};

struct ordo_signal {
    uint32_t magic;
    _Atomic uint32_t refs;
    _Atomic uint64_t state;
    _Atomic uint64_t next_wake;
    /* NULL, or where the truth lives (sync/signal_remote.h): then the state
     * word is the truth's mirror. Set at creation. */
    signal_remote_t *remote;
    pthread_mutex_t lock;
    /* Under lock: armed timepoints, ascending by value. */
    ordo_timepoint_t *head;
    ordo_timepoint_t *tail;
    /* Written once, under lock, before FAILED is published. */
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    /* Under lock: a name for diagnostics ("" when none). Cold: nothing on
     * the value's paths reads it. */
    char name[ORDO_SIGNAL_NAME_MAX];
    /* Unique in the process, never reused (addresses are): names the
     * signal in traces, so a flow joins the right signal. */
    uint64_t trace_id;
    /* The producer to tell when a timepoint is armed (NULL: none). */
    _Atomic(signal_feeder_t *) feeder;
};

_Static_assert(offsetof(struct ordo_signal, state) == ORDO__SIGNAL_STATE_OFFSET,
               "signal_access.h's readers find the state word at its offset");
_Static_assert(offsetof(struct ordo_signal, refs) == ORDO__SIGNAL_REFS_OFFSET,
               "signal_access.h's retain finds the count at its offset");

/* Under lock: moves every armed timepoint with value <= reached onto due
 * (status ORDO_OK); all remaining ones too when rest != ORDO_OK, with
 * that status. Refreshes next_wake and WAITERS. */
void ordo__signal_collect_locked(ordo_signal_t *signal, uint64_t reached, ordo_status_t rest,
                                 due_list_t *due);

/* Called by the producer whose CAS took DISPATCHING: collects and runs
 * whatever is due, then lets DISPATCHING go. */
void ordo__signal_dispatch(ordo_signal_t *signal, uint64_t raised_to);

/* The callback of every link's timepoint. Unlike other callbacks it is
 * entered while its timepoint is still DUE, and marks it FIRED itself once
 * it has read the link's fields and before it signals or fails the target:
 * the owner cannot re-arm the link while it is read, and may reuse it as
 * soon as the target has its outcome. */
void ordo__link_timepoint_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint);

/* ordo_timepoint_arm for a timepoint of kind, its errors named for api. */
ordo_status_t ordo__timepoint_arm_checked(ordo_timepoint_t *timepoint, ordo_signal_t *signal,
                                          uint64_t value, ordo_timepoint_fn fn, void *ctx, int kind,
                                          const char *api);

/* Whether a non-OK outcome of a wait or timepoint on signal (whose memory
 * the caller holds) came from a failure rather than the destroy (see the
 * top of this file). Acquire: the failure and its message were written
 * before FAILED. */
static inline int signal_failed_outcome(const ordo_signal_t *signal) {
    return (atomic_load_explicit(&signal->state, memory_order_acquire) & SIGNAL_FAILED) != 0;
}

/* The state as the calls that read the truth see it (acquire): the word
 * itself for a local signal; for a remote one, the truth's value and
 * failure with the handle's DESTROYED (and the mirror's failure and value,
 * which the truth has too unless a peer scribbled them away). A handle
 * destroyed before it failed stays destroyed: a failure of the truth after
 * the destroy is not its news (as a destroyed local signal refuses one). */
static inline uint64_t signal_state_now(const ordo_signal_t *signal) {
    uint64_t mirror = atomic_load_explicit(&signal->state, memory_order_acquire);
    if (ORDO_LIKELY(!signal->remote)) {
        return mirror;
    }
    uint64_t truth = signal->remote->ops->state(signal->remote);
    uint64_t value = truth & SIGNAL_VALUE_MASK;
    if ((mirror & SIGNAL_VALUE_MASK) > value) {
        value = mirror & SIGNAL_VALUE_MASK;
    }
    uint64_t failed = (mirror & SIGNAL_DESTROYED) ? 0 : (truth & SIGNAL_FAILED);
    return value | failed | (mirror & SIGNAL_ENDED);
}

/* The failure of a signal signal_state_now saw failed: its status, and its
 * message copied into message (ORDO_SIGNAL_MESSAGE_MAX bytes; may be NULL). */
ordo_status_t ordo__signal_failure_now(const ordo_signal_t *signal, char *message);

#endif
