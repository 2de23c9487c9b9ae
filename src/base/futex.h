/* Internal: a thin wrapper over Linux futexes: private ones (a word in this
 * process's memory), and shared ones (a word in memory mapped by several
 * processes; the kernel keys them by the page, not the address). */
#ifndef ORDO_BASE_FUTEX_H
#define ORDO_BASE_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

#include "ordo/time.h"

typedef enum ordo_futex_result {
    ORDO_FUTEX_WOKEN = 0,    /* woken, or a spurious return: re-check */
    ORDO_FUTEX_MISMATCH = 1, /* *word != expected when called */
    ORDO_FUTEX_TIMED_OUT = 2 /* the deadline passed */
} ordo_futex_result_t;

/* Sleeps while *word == expected, until woken or the absolute
 * CLOCK_MONOTONIC deadline (ORDO_DEADLINE_NEVER: no limit). */
ordo_futex_result_t ordo__futex_wait(_Atomic uint32_t *word, uint32_t expected,
                                     ordo_deadline_t deadline);

/* Wakes up to count sleepers on word. Touches only the address, never the
 * memory, so it is safe after the word's owner may have gone. */
void ordo__futex_wake(_Atomic uint32_t *word, int count);

/* The same, on a word in shared memory other processes may wait or wake on. */
ordo_futex_result_t ordo__futex_wait_shared(_Atomic uint32_t *word, uint32_t expected,
                                            ordo_deadline_t deadline);
void ordo__futex_wake_shared(_Atomic uint32_t *word, int count);

/* A short pause for spin loops. */
static inline void ordo__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
