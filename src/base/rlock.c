#include "base/rlock.h"

#include "base/asym_fence.h"
#include "base/futex.h"

_Thread_local _Alignas(2) char ordo__rlock_marker __attribute__((tls_model("initial-exec")));

/* The first run that earns the bias, and the longest after revocations. */
#define RUN_TO_BIAS_FIRST 64u
#define RUN_TO_BIAS_MAX (1u << 24)
/* How long a revoker sleeps before it looks at the biased thread again. */
#define REVOKE_RECHECK_NS 50000u

void ordo__rlock_init(ordo_rlock_t *lock) {
    atomic_init(&lock->word, 0);
    atomic_init(&lock->owner, NULL);
    lock->depth = 0;
    lock->through_bias = 0;
    atomic_init(&lock->bias, 0);
    atomic_init(&lock->bias_inside[0], 0);
    atomic_init(&lock->bias_inside[1], 0);
    atomic_init(&lock->revoking, 0);
    lock->revoked[0] = lock->revoked[1] = NULL;
    lock->run_owner = NULL;
    lock->run = 0;
    /* Without cheap asymmetric fences a biased entry costs two fences:
     * no better than the shared path, so the lock is never biased. */
    lock->run_to_bias = ordo__asym_init() ? RUN_TO_BIAS_FIRST : 0;
}

static void word_lock(ordo_rlock_t *lock) {
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        return;
    }
    for (int spin = 0; spin < 128; ++spin) {
        ordo__cpu_relax();
        expected = 0;
        if (atomic_load_explicit(&lock->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
    }
    /* Mark the lock contended; sleep while it stays held. */
    while (atomic_exchange_explicit(&lock->word, 2, memory_order_acquire) != 0) {
        (void)ordo__futex_wait(&lock->word, 2, ORDO_DEADLINE_NEVER);
    }
}

/* Under word: takes the bias away from the thread that has it (`bias`, its
 * marker and flag). */
static void revoke(ordo_rlock_t *lock, uintptr_t bias) {
    unsigned flag = (unsigned)bias & 1u;
    _Atomic uint32_t *inside = &lock->bias_inside[flag];
    atomic_store_explicit(&lock->revoking, 1, memory_order_seq_cst);
    ordo__asym_rare();
    /* The biased thread either saw `revoking` and stays out, or is inside
     * and leaves. Its leave read `revoking` before its release store (see
     * ordo__rlock_leave_bias), so a leave that raced with this revocation
     * may not wake us: each sleep is short, and the flag is looked at
     * again. */
    while (atomic_load_explicit(inside, memory_order_acquire)) {
        (void)ordo__futex_wait(inside, 1, ordo_deadline_after_ns(REVOKE_RECHECK_NS));
    }
    atomic_store_explicit(&lock->bias, 0, memory_order_relaxed);
    atomic_store_explicit(&lock->revoking, 0, memory_order_release);
    /* It may have read `bias` just before and still be on its way to its
     * flag: no other thread may use that flag until it has come here. */
    lock->revoked[flag] = (const void *)(bias & ~(uintptr_t)1);
    if (lock->run_to_bias < RUN_TO_BIAS_MAX) {
        lock->run_to_bias *= 2;
    }
}

void ordo__rlock_lock_shared(ordo_rlock_t *lock) {
    const void *me = &ordo__rlock_marker;
    word_lock(lock);
    uintptr_t bias = atomic_load_explicit(&lock->bias, memory_order_relaxed);
    if (bias && (bias & ~(uintptr_t)1) != (uintptr_t)me) {
        revoke(lock, bias);
        bias = 0;
    }
    for (unsigned flag = 0; flag < 2; ++flag) {
        if (lock->revoked[flag] == me) {
            lock->revoked[flag] = NULL; /* past any entry it began before losing the bias */
        }
    }
    if (lock->run_owner == me) {
        ++lock->run;
    } else {
        lock->run_owner = me;
        lock->run = 1;
    }
    if (!bias && lock->run_to_bias && lock->run >= lock->run_to_bias) {
        /* Biased from this thread's next acquisition, on a flag no revoked
         * thread may still write; it holds word now, so no other thread
         * is inside. */
        for (unsigned flag = 0; flag < 2; ++flag) {
            if (!lock->revoked[flag]) {
                atomic_store_explicit(&lock->bias, ordo__rlock_bias_of_me(flag),
                                      memory_order_relaxed);
                lock->run = 0;
                break;
            }
        }
    }
}

void ordo__rlock_unlock_shared(ordo_rlock_t *lock) {
    if (atomic_exchange_explicit(&lock->word, 0, memory_order_release) == 2) {
        ordo__futex_wake(&lock->word, 1);
    }
}

void ordo__rlock_wake_revoker(_Atomic uint32_t *bias_inside) {
    ordo__futex_wake(bias_inside, 1);
}
