/* The parker (see parker.h for the protocol and its proof). */
#include "base/parker.h"

/* The futex is the epoch: the word's high 32 bits. */
static _Atomic uint32_t *epoch_futex(ordo_parker_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (_Atomic uint32_t *)(void *)&p->word;
#else
    return (_Atomic uint32_t *)(void *)((char *)&p->word + sizeof(uint32_t));
#endif
}

static inline uint32_t epoch_of(uint64_t word) {
    return (uint32_t)(word >> 32);
}

/* Takes the sleeper off WOKEN if a waker counted one there, else off
 * SLEEPERS (INTEREST cleared with the last); the counts are anonymous,
 * only their sum is the threads inside park. On a parker with the wakers'
 * lock (one sleeper) an unlock takes the sleeper off itself: a held lock,
 * or a sleeper no longer counted, means there is nothing to write. */
static void leave(ordo_parker_t *p) {
    uint64_t word = atomic_load_explicit(&p->word, memory_order_relaxed);
    for (;;) {
        uint64_t next;
        if (word & ORDO__PARKER_LOCKED) {
            return; /* the holder locked after the announcement: it takes it off */
        }
        if (word & ORDO__PARKER_WOKEN) {
            next = word - ORDO__PARKER_WOKEN_ONE;
        } else if (word & ORDO__PARKER_SLEEPERS) {
            next = word - ORDO__PARKER_SLEEPER_ONE;
            if (!(next & ORDO__PARKER_SLEEPERS)) {
                next &= ~ORDO__PARKER_INTEREST;
            }
        } else {
            return; /* taken off by an unlock */
        }
        if (atomic_compare_exchange_weak_explicit(&p->word, &word, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            return;
        }
    }
}

ordo_park_result_t ordo__parker_park(ordo_parker_t *p, ordo_park_key_t key, uint32_t interest,
                                     ordo_deadline_t deadline) {
    if (key & ORDO__PARKER_LOCKED) {
        return ORDO_PARK_WOKEN; /* read while a waker published */
    }
    const uint64_t announce = (uint64_t)(interest & ORDO_PARK_ANY) << ORDO__PARKER_INTEREST_SHIFT;
    uint64_t word = atomic_load_explicit(&p->word, memory_order_relaxed);
    for (;;) {
        /* A locked word has a newer epoch than an unlocked key. */
        if (epoch_of(word) != epoch_of(key)) {
            return ORDO_PARK_WOKEN;
        }
        uint64_t inside = (word & ORDO__PARKER_SLEEPERS) +
                          ((word & ORDO__PARKER_WOKEN) >> ORDO__PARKER_WOKEN_SHIFT);
        if (inside == ORDO__PARKER_SLEEPERS) {
            sched_yield(); /* full: look again later */
            return ORDO_PARK_WOKEN;
        }
        if (atomic_compare_exchange_weak_explicit(&p->word, &word,
                                                  (word + ORDO__PARKER_SLEEPER_ONE) | announce,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            break;
        }
    }
    /* Whatever ends the wait, this sleeper leaves: a waker may have counted
     * it woken, and only a new announcement counts it asleep again. */
    ordo_futex_result_t r = ordo__futex_wait(epoch_futex(p), epoch_of(key), deadline);
    leave(p);
    return r == ORDO_FUTEX_TIMED_OUT ? ORDO_PARK_TIMED_OUT : ORDO_PARK_WOKEN;
}

void ordo__parker_wake(ordo_parker_t *p, int count) {
    ordo__futex_wake(epoch_futex(p), count);
}
