/* Internal: asymmetric fences. A hot path that must not be reordered
 * across a store and a later load (Dekker style) pays a compiler barrier
 * only, and the rare path on the other side pays for both with
 * membarrier(PRIVATE_EXPEDITED), which runs a full barrier on every running
 * thread of the process. Where membarrier is unavailable the hot side
 * fences itself and the rare side does nothing. */
#ifndef ORDO_BASE_ASYM_FENCE_H
#define ORDO_BASE_ASYM_FENCE_H

#include <stdatomic.h>

/* 1 until membarrier is registered for the process (then 0 for good). */
extern _Atomic int ordo__asym_hot_fences;

/* Registers membarrier once for the process; returns non-zero when the hot
 * side may use compiler barriers only from now on. A hot side that read the
 * mode before this call fenced itself, which stays correct. */
int ordo__asym_init(void);

/* Non-zero when hot sides need no fence (membarrier registered). */
static inline int ordo__asym_cheap(void) {
    return !atomic_load_explicit(&ordo__asym_hot_fences, memory_order_relaxed);
}

/* The hot side: orders its earlier stores before its later loads. */
static inline void ordo__asym_hot(void) {
    if (atomic_load_explicit(&ordo__asym_hot_fences, memory_order_relaxed)) {
        atomic_thread_fence(memory_order_seq_cst);
    } else {
        atomic_signal_fence(memory_order_seq_cst);
    }
}

/* The rare side: after it returns, every hot side either had its store
 * visible here or will see this thread's earlier stores in its loads. */
void ordo__asym_rare(void);

#endif
