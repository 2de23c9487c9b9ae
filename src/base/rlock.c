/* Recursive futex lock (see rlock.h). */
#include "base/rlock.h"

#include <stddef.h>

#include "base/futex.h"

/* Each thread's own address names it as an owner. Initial-exec: one
 * %fs-relative access instead of a call to __tls_get_addr in the
 * position-independent build (a single byte of static TLS). */
static _Thread_local char thread_marker __attribute__((tls_model("initial-exec")));

void ordo_rlock_init(ordo_rlock_t *lock) {
    atomic_init(&lock->word, 0);
    atomic_init(&lock->owner, NULL);
    lock->depth = 0;
}

int ordo_rlock_held(const ordo_rlock_t *lock) {
    /* Only this thread ever stores its own marker, so seeing it means it
     * is still ours. */
    return atomic_load_explicit(&lock->owner, memory_order_relaxed) == &thread_marker;
}

static void lock_slow(ordo_rlock_t *lock) {
    for (int spin = 0; spin < 128; ++spin) {
        ordo_cpu_relax();
        uint32_t expected = 0;
        if (atomic_load_explicit(&lock->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
    }
    /* Mark the lock contended; sleep while it stays held. */
    while (atomic_exchange_explicit(&lock->word, 2, memory_order_acquire) != 0) {
        (void)ordo_futex_wait(&lock->word, 2, ORDO_DEADLINE_NEVER);
    }
}

void ordo_rlock_lock(ordo_rlock_t *lock) {
    if (ordo_rlock_held(lock)) {
        ++lock->depth;
        return;
    }
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                 memory_order_relaxed)) {
        lock_slow(lock);
    }
    atomic_store_explicit(&lock->owner, &thread_marker, memory_order_relaxed);
    lock->depth = 1;
}

void ordo_rlock_unlock(ordo_rlock_t *lock) {
    if (--lock->depth) {
        return;
    }
    atomic_store_explicit(&lock->owner, NULL, memory_order_relaxed);
    if (atomic_exchange_explicit(&lock->word, 0, memory_order_release) == 2) {
        ordo_futex_wake(&lock->word, 1);
    }
}
