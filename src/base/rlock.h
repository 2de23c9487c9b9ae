/* Internal: a recursive lock on a futex, biased towards the thread that
 * uses it alone.
 *
 * The shared path is an ordinary futex lock (`word`): one atomic to take,
 * one to give back; waiters spin briefly, then sleep. Most programs drive a
 * tracker and its pools from one thread, and on a virtual machine those
 * two atomics cost more than the work they guard. So once one thread has
 * taken the lock many times in a row through the shared path, the lock is
 * biased to it: from then on that thread takes it with plain stores and
 * loads (`bias_inside`, a Dekker-style flag) and no atomic read-modify-
 * write. Another thread that wants the lock takes `word`, raises
 * `revoking`, pays an asymmetric fence (base/asym_fence.h) and waits until
 * the biased thread is outside; then the bias is gone and everyone uses
 * the shared path. Each revocation doubles the run a thread needs before
 * the lock is biased again, so a lock that several threads share settles
 * on the shared path. Without membarrier the lock is never biased.
 *
 * A revoked thread may have read `bias` (itself) just before the
 * revocation and be descheduled before it writes its flag; when it resumes
 * it sees that it lost the bias and backs off, clearing the flag. Were the
 * lock biased to another thread with the same flag by then, that store
 * would hide the new biased thread from its revoker. So there are two
 * flags, and `bias` names the thread with the flag it uses (in the low bit
 * of the thread's marker, which is aligned): a revocation leaves its flag
 * to the revoked thread until that thread has come through the shared
 * path (which it does when it backs off), and the bias can go at once to
 * another thread on the other flag. A thread that earns the bias after a
 * hand-off is thus biased at once; only when both flags wait for threads
 * that have not come back is the lock biased to no one. Each flag has one
 * writer at a time.
 *
 * Unlock through the bias reads nothing of the lock after its release
 * store, so a thread that takes the lock next may destroy it at once, as
 * with a mutex; a revoker that raced with that unlock (and so may not be
 * woken) sleeps in short steps and looks again.
 *
 * The owning thread may take the lock again (each lock needs its unlock). */
#ifndef ORDO_BASE_RLOCK_H
#define ORDO_BASE_RLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ordo_rlock {
    _Atomic uint32_t word;       /* the shared lock: 0 free, 1 held, 2 held with sleepers */
    _Atomic(const void *) owner; /* the holder's marker, whichever path it took */
    uint32_t depth;              /* the holder's */
    uint32_t through_bias;       /* the holder's: 1 + the flag it entered with, or 0 */
    /* The marker of the thread it is biased to, plus the flag that thread
     * uses (0 or 1); 0 when biased to no one. */
    _Atomic uintptr_t bias;
    /* Per flag: up while its thread is inside through the bias (written by
     * the biased thread and, backing off, by a revoked one). */
    _Atomic uint32_t bias_inside[2];
    _Atomic uint32_t revoking; /* written under word: the bias is being taken away */
    /* Under word, per flag: the thread whose bias on it was last revoked,
     * until it next comes through the shared path (see above). */
    const void *revoked[2];
    /* Under word: the last thread through the shared path, its run of
     * consecutive acquisitions and the run that earns the bias. */
    const void *run_owner;
    uint32_t run;
    uint32_t run_to_bias;
} ordo_rlock_t;

/* One per thread; its address names the thread (aligned, so that `bias`
 * can carry a flag index in the low bit). */
extern _Thread_local _Alignas(2) char ordo__rlock_marker __attribute__((tls_model("initial-exec")));

void ordo__rlock_init(ordo_rlock_t *lock);
/* Out of line: the shared path of lock and unlock. */
void ordo__rlock_lock_shared(ordo_rlock_t *lock);
void ordo__rlock_unlock_shared(ordo_rlock_t *lock);
/* Out of line: wakes a revoker waiting for the biased thread to leave.
 * It takes the flag's address and touches nothing but that address, so
 * an unlock may call it after its release store. */
void ordo__rlock_wake_revoker(_Atomic uint32_t *bias_inside);

/* The value of `bias` that names the calling thread on flag `flag`. */
static inline uintptr_t ordo__rlock_bias_of_me(unsigned flag) {
    return (uintptr_t)&ordo__rlock_marker | flag;
}

/* Non-zero when the calling thread holds the lock. Only this thread ever
 * stores its own marker, so seeing it means it is still ours. */
static inline int ordo__rlock_held(const ordo_rlock_t *lock) {
    return atomic_load_explicit(&lock->owner, memory_order_relaxed) == &ordo__rlock_marker;
}

static inline int ordo__rlock_enter_bias(ordo_rlock_t *lock, unsigned flag);
static inline void ordo__rlock_back_off_bias(ordo_rlock_t *lock, unsigned flag);
static inline void ordo__rlock_leave_bias(ordo_rlock_t *lock, unsigned flag);

static inline __attribute__((always_inline)) void ordo_rlock_lock(ordo_rlock_t *lock) {
    const void *me = &ordo__rlock_marker;
    if (atomic_load_explicit(&lock->owner, memory_order_relaxed) == me) {
        ++lock->depth;
        return;
    }
    uintptr_t bias = atomic_load_explicit(&lock->bias, memory_order_relaxed);
    unsigned flag = (unsigned)bias & 1u;
    if ((bias & ~(uintptr_t)1) == (uintptr_t)me && ordo__rlock_enter_bias(lock, flag)) {
        lock->through_bias = 1 + flag;
    } else {
        ordo__rlock_lock_shared(lock);
        lock->through_bias = 0;
    }
    atomic_store_explicit(&lock->owner, me, memory_order_relaxed);
    lock->depth = 1;
}

static inline __attribute__((always_inline)) void ordo_rlock_unlock(ordo_rlock_t *lock) {
    if (--lock->depth) {
        return;
    }
    atomic_store_explicit(&lock->owner, NULL, memory_order_relaxed);
    if (lock->through_bias) {
        ordo__rlock_leave_bias(lock, lock->through_bias - 1);
    } else {
        ordo__rlock_unlock_shared(lock);
    }
}

/* The hot side of the asymmetric fence, for the biased paths only: a lock
 * is biased only after ordo__asym_init found membarrier (ordo__rlock_init),
 * and from then on a hot side needs no more than the compiler's fence. */
static inline void ordo__rlock_bias_fence(void) {
    atomic_signal_fence(memory_order_seq_cst);
}

/* The biased thread enters: announce, then make sure no revocation has
 * started or finished (an asymmetric fence orders the store before the
 * loads; the revoker pays for it). */
static inline int ordo__rlock_enter_bias(ordo_rlock_t *lock, unsigned flag) {
    atomic_store_explicit(&lock->bias_inside[flag], 1, memory_order_relaxed);
    ordo__rlock_bias_fence();
    /* Acquire: a finished revocation cleared `bias` before `revoking`. */
    if (!atomic_load_explicit(&lock->revoking, memory_order_acquire) &&
        atomic_load_explicit(&lock->bias, memory_order_relaxed) == ordo__rlock_bias_of_me(flag)) {
        return 1;
    }
    ordo__rlock_back_off_bias(lock, flag);
    return 0;
}

/* The biased thread steps back from an entry it may not make (it still
 * uses the lock afterwards). Release: a revoker that sees the flag down
 * sees this thread's writes; one that found it up and sleeps raised
 * `revoking` before its fence, so this load sees it. */
static inline void ordo__rlock_back_off_bias(ordo_rlock_t *lock, unsigned flag) {
    atomic_store_explicit(&lock->bias_inside[flag], 0, memory_order_release);
    ordo__rlock_bias_fence();
    if (atomic_load_explicit(&lock->revoking, memory_order_relaxed)) {
        ordo__rlock_wake_revoker(&lock->bias_inside[flag]);
    }
}

/* The biased thread leaves at unlock. Nothing of the lock is read after
 * the release store: from then on a revoker may take the lock, and the
 * tracker may be destroyed as soon as it is free (as with a mutex). So
 * `revoking` is read first: a revocation that began before that is woken
 * (by address only); one that begins later and finds the flag still up
 * sleeps with a short timeout and looks again (see revoke). */
static inline void ordo__rlock_leave_bias(ordo_rlock_t *lock, unsigned flag) {
    int wake = atomic_load_explicit(&lock->revoking, memory_order_relaxed) != 0;
    _Atomic uint32_t *inside = &lock->bias_inside[flag];
    atomic_store_explicit(inside, 0, memory_order_release);
    if (wake) {
        ordo__rlock_wake_revoker(inside);
    }
}

#endif
