/* Internal: the parker, ordo's one way to put a thread to sleep until
 * another thread has work for it (or a deadline passes), and to wake it.
 * Every private thread loop uses it: CPU stream workers, host lanes, the
 * completion watcher, the CUDA free thread, the reclaimer (and the drains
 * that wait for it to go idle), the asynchronous waiter's workers and its
 * timer.
 *
 * The state is one atomic 64-bit word:
 *
 *   bits 32-63 EPOCH     moved by every unpark (and by taking the lock)
 *   bit  31    LOCKED    the wakers' lock is held (optional, see below)
 *   bits 26-29 INTEREST  the union of the reasons parked sleepers wake
 *                        for (cleared when SLEEPERS drops to 0)
 *   bits 13-25 WOKEN     sleepers a waker has woken that have not left
 *   bits 0-12  SLEEPERS  sleepers announced and not yet woken or left
 *
 * The futex is the EPOCH half (a private futex on its 32 bits).
 *
 * A sleeper's loop, and a waker's:
 *
 *   for (;;) {                              publish the work (a queue push
 *       key = ordo__parker_prepare(p);      under a mutex, an atomic store)
 *       if (there is work) { take it; }     ordo__parker_unpark(p, reason, n);
 *       else ordo__parker_park(p, key, interest, deadline);
 *   }
 *
 * prepare is an acquire load of the word. park announces the sleeper with
 * a CAS C that adds one to SLEEPERS and ORs its interest into INTEREST,
 * only if the epoch is still the key's; sleeps on the futex while the
 * epoch is the key's (until the deadline: CLOCK_MONOTONIC, absolute); and
 * after any return from the futex leaves with a CAS that takes one off
 * WOKEN if it is not 0, else off SLEEPERS, and returns: a spurious return
 * costs the caller one look. unpark is one CAS W (release) that moves the
 * epoch and, if SLEEPERS is not 0 and INTEREST has one of its reasons,
 * moves up to n sleepers from SLEEPERS to WOKEN; only then does it make
 * the futex_wake system call. So a waker pays one RMW and no system call
 * while nobody sleeps, and only the first of several wakers pays the call
 * while a woken sleeper is still on its way out (the sleeper's own leave
 * would come too late for that).
 *
 * No lost wake-up. W, the sleeper's prepare P and its announcing CAS C act
 * on one word, so they fall in one modification order. If P reads W's
 * value or a later one, it synchronises with W (W's release heads a
 * release sequence of RMWs), and the look that follows P sees the work.
 * Otherwise the key holds the epoch from before W: if W comes before C, C
 * finds the epoch moved and does not sleep; if C comes before W, then at
 * W the sleeper is counted, in SLEEPERS or in WOKEN. Counted in SLEEPERS,
 * W wakes: the futex either finds the epoch moved and returns at once, or
 * is asleep already and is woken (the kernel checks the futex word and
 * queues the sleeper under one lock, the wake takes the same lock). If
 * SLEEPERS is 0, earlier wakers, after C, moved every counted sleeper to
 * WOKEN, each waking one queued thread per sleeper it moved (wakes are
 * anonymous: the counts only balance, so the threads queued and not yet
 * woken never outnumber SLEEPERS), and a counted sleeper not queued then
 * finds the epoch moved. So every sleeper counted at W returns from the
 * futex and leaves with an RMW after W, which continues W's release
 * sequence: its next look sees W's work. Moving sleepers in the same RMW
 * as the epoch matters: a sleeper that announces after W holds W's epoch
 * and is not one W may count as woken. The memory orders: W's release
 * pairs with P's acquire; C, the
 * futex's reads and the leaving CAS need no ordering of their own (the
 * modification order decides which case holds, and the caller loops back
 * to a prepare before it looks again). The one hole is an epoch that
 * wraps all the way round (2^32 unparks) between P and C.
 *
 * Reasons. An unpark names reasons (a mask of ORDO_PARK_ANY's 4 bits) and
 * a sleeper parks with an interest (a mask): an unpark always moves the
 * epoch (so a sleeper that has not slept yet does not), but wakes
 * sleepers only if one of its reasons is in INTEREST. A sleeper that does
 * not want a kind of work to cut its timed sleep short (the completion
 * watcher's polls) leaves that kind's reason out of its interest.
 *
 * Several sleepers may park on one parker (a waiter's workers, threads in
 * a drain), at most 8191 at once. INTEREST holds their union, so a waker
 * wakes as soon as one of them wants its reason. unpark(p, r, 1) wakes one
 * of them and must only be used where they all park with the same
 * interest and any one of them can take the work (the one woken keeps
 * looking until no work is left, and an unpark meanwhile wakes another);
 * unpark(p, r, INT_MAX) wakes them all.
 *
 * The wakers' lock (optional). Wakers that serialise on a lock of their
 * own anyway (CPU stream producers) may use the word's LOCKED bit as that
 * lock, on a parker with one sleeper that parks for every reason its
 * wakers name: ordo__parker_lock's CAS sets LOCKED and moves the epoch,
 * and ordo__parker_unlock is a plain release store of the word it read
 * with the epoch moved and, if the sleeper was counted, SLEEPERS and
 * INTEREST cleared (no WOKEN: the one sleeper is simply taken off),
 * followed by the wake. The waker then pays exactly the lock it pays
 * anyway. This holds because while LOCKED is set nobody else writes the
 * word: park announces only while the lock is free (a prepare that reads
 * LOCKED yields a key that parks no one: the holder is publishing), every
 * waker of such a parker goes through the lock, never through unpark
 * (whose RMW the unlocking store would overwrite), and the sleeper leaves
 * without writing while the lock is held: the holder locked after the
 * sleeper announced, saw it, and its unlock takes it off (a sleeper that
 * finds itself taken off leaves without writing too). The proof above
 * holds with W the lock and its unlock together: a P that reads the
 * locked word does not sleep, one that reads the unlocking store
 * synchronises with it, and no C falls between.
 *
 * A waker touches the parker's memory only in its RMW (or store); the
 * wake that follows touches only the futex's address, so the sleeper may
 * free the parker once it has seen the work, provided it cannot see the
 * work before the waker's RMW (a mutex held across the publish and the
 * unpark, or a join of the waking thread, ensures that where it matters).
 */
#ifndef ORDO_BASE_PARKER_H
#define ORDO_BASE_PARKER_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/futex.h"
#include "ordo/time.h"

typedef struct ordo_parker {
    _Atomic uint64_t word;
} ordo_parker_t;

/* What prepare returns and park takes. */
typedef uint64_t ordo_park_key_t;

/* Every reason (an interest in all of them, or an unpark for all). */
#define ORDO_PARK_ANY 0xfu

typedef enum ordo_park_result {
    ORDO_PARK_WOKEN = 0,    /* woken, the epoch moved, or a spurious return: look again */
    ORDO_PARK_TIMED_OUT = 1 /* the deadline passed (look again all the same) */
} ordo_park_result_t;

#define ORDO__PARKER_SLEEPER_ONE ((uint64_t)1)
#define ORDO__PARKER_SLEEPERS ((uint64_t)0x1fff)
#define ORDO__PARKER_WOKEN_SHIFT 13
#define ORDO__PARKER_WOKEN_ONE ((uint64_t)1 << ORDO__PARKER_WOKEN_SHIFT)
#define ORDO__PARKER_WOKEN (ORDO__PARKER_SLEEPERS << ORDO__PARKER_WOKEN_SHIFT)
#define ORDO__PARKER_INTEREST_SHIFT 26
#define ORDO__PARKER_INTEREST ((uint64_t)ORDO_PARK_ANY << ORDO__PARKER_INTEREST_SHIFT)
#define ORDO__PARKER_LOCKED ((uint64_t)1 << 31)
#define ORDO__PARKER_EPOCH_ONE ((uint64_t)1 << 32)

static inline void ordo__parker_init(ordo_parker_t *p) {
    atomic_init(&p->word, 0);
}

/* Sleeper: read before it looks for work (see above). */
static inline ordo_park_key_t ordo__parker_prepare(ordo_parker_t *p) {
    return atomic_load_explicit(&p->word, memory_order_acquire);
}

/* Sleeper: sleeps unless the epoch moved since key, until an unpark for a
 * reason in interest or the absolute CLOCK_MONOTONIC deadline
 * (ORDO_DEADLINE_NEVER: none), or a spurious return. */
ordo_park_result_t ordo__parker_park(ordo_parker_t *p, ordo_park_key_t key, uint32_t interest,
                                     ordo_deadline_t deadline);

/* The system call of a wake: wakes up to count threads asleep on p. */
void ordo__parker_wake(ordo_parker_t *p, int count);

/* Whether a waker that finds word wakes for reason: a sleeper is counted
 * and parked with an interest in it. */
static inline int ordo__parker_wakes(uint64_t word, uint32_t reason) {
    return (word & ORDO__PARKER_SLEEPERS) != 0 &&
           (word & ((uint64_t)(reason & ORDO_PARK_ANY) << ORDO__PARKER_INTEREST_SHIFT)) != 0;
}

/* The word after a waker found word: the epoch moved and, if it wakes,
 * up to count sleepers moved to WOKEN (INTEREST cleared with the last). */
static inline uint64_t ordo__parker_woken(uint64_t word, uint32_t reason, int count) {
    uint64_t next = word + ORDO__PARKER_EPOCH_ONE;
    if (ordo__parker_wakes(word, reason)) {
        uint64_t sleepers = word & ORDO__PARKER_SLEEPERS;
        uint64_t n = count > 0 && (uint64_t)count < sleepers ? (uint64_t)count : sleepers;
        next = next - n * ORDO__PARKER_SLEEPER_ONE + n * ORDO__PARKER_WOKEN_ONE;
        if (n == sleepers) {
            next &= ~ORDO__PARKER_INTEREST;
        }
    }
    return next;
}

/* Waker, after publishing its work: moves the epoch and wakes up to count
 * sleepers if one parked with an interest in reason. */
static inline void ordo__parker_unpark(ordo_parker_t *p, uint32_t reason, int count) {
    uint64_t word = atomic_load_explicit(&p->word, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&p->word, &word,
                                                  ordo__parker_woken(word, reason, count),
                                                  memory_order_release, memory_order_relaxed)) {
    }
    if (__builtin_expect(ordo__parker_wakes(word, reason), 0)) {
        ordo__parker_wake(p, count);
    }
}

/* The wakers' lock (see above): spins (yielding after a while) until it
 * takes LOCKED, moving the epoch; returns the word it replaced, for
 * ordo__parker_unlock. */
static inline uint64_t ordo__parker_lock(ordo_parker_t *p) {
    uint64_t word = atomic_load_explicit(&p->word, memory_order_relaxed);
    unsigned spins = 0;
    for (;;) {
        if (!(word & ORDO__PARKER_LOCKED)) {
            if (atomic_compare_exchange_weak_explicit(
                    &p->word, &word, (word | ORDO__PARKER_LOCKED) + ORDO__PARKER_EPOCH_ONE,
                    memory_order_acquire, memory_order_relaxed)) {
                return word;
            }
            continue;
        }
        if (++spins < 128) {
            ordo__cpu_relax();
        } else {
            sched_yield(); /* the holder may have been preempted */
        }
        word = atomic_load_explicit(&p->word, memory_order_relaxed);
    }
}

/* Releases the wakers' lock taken by the ordo__parker_lock that returned
 * seen, publishing what was written under it, and wakes the sleeper if it
 * parked with an interest in reason. */
static inline void ordo__parker_unlock(ordo_parker_t *p, uint64_t seen, uint32_t reason) {
    uint64_t next = seen + ORDO__PARKER_EPOCH_ONE;
    int wake = ordo__parker_wakes(seen, reason);
    if (__builtin_expect(wake, 0)) {
        next &= ~(ORDO__PARKER_SLEEPERS | ORDO__PARKER_INTEREST);
    }
    atomic_store_explicit(&p->word, next, memory_order_release);
    if (__builtin_expect(wake, 0)) {
        ordo__parker_wake(p, 1);
    }
}

#endif
