/* Internal: high-water marks of counters that threads change at once (the
 * statistics adaptor's counters, a budget account's charge).
 *
 * A peak is raised by whoever moved the counter, with the value its own
 * read-modify-write produced. A reset sets the peak to the counter's value
 * and then raises it to the counter again: an increment whose raise read
 * the old, higher peak (and so left it) would otherwise be lost under the
 * stored value, leaving the peak below the counter. Sequentially
 * consistent, with the counter's increments too: either the increment's
 * raise reads the reset's store, or the reset's second read sees the
 * increment. */
#ifndef ORDO_MEM_PEAK_H
#define ORDO_MEM_PEAK_H

#include <stdatomic.h>
#include <stdint.h>

static inline void mem_peak_raise(_Atomic uint64_t *peak, uint64_t value) {
    uint64_t seen = atomic_load_explicit(peak, memory_order_seq_cst);
    while (seen < value && !atomic_compare_exchange_weak_explicit(
                               peak, &seen, value, memory_order_seq_cst, memory_order_seq_cst)) {
    }
}

static inline void mem_peak_reset(_Atomic uint64_t *peak, _Atomic uint64_t *counter) {
    atomic_store_explicit(peak, atomic_load_explicit(counter, memory_order_seq_cst),
                          memory_order_seq_cst);
    mem_peak_raise(peak, atomic_load_explicit(counter, memory_order_seq_cst));
}

#endif
