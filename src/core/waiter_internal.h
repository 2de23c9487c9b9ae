/* Internal: the asynchronous waiter's representation (ordo/waiter.h).
 *
 * Entries. Every wait lives in an entry of the waiter's slab: buckets of
 * 1024 << b entries that are never moved or freed before the waiter, so an
 * id (generation << 32 | slot) finds its entry without a lock, and a stale
 * id finds a slot whose generation has moved on. Free entries form a stack
 * under slab_lock.
 *
 * One atomic word per entry decides everything: generation (high 32 bits),
 * WAITED (a canceller sleeps until the callback returns) and the phase:
 *
 *   FREE -> SETUP -> PENDING -> QUEUED -> RUNNING -> DONE -> FREE
 *                       |          |
 *                       |          +----> CANCELLED (prevented while queued)
 *                       +----> RUNNING (inline dispatch)
 *                       +----> CANCELLED (prevented while pending)
 *
 * Resolution is a compare-and-swap out of PENDING (or out of SETUP, by the
 * timepoint's callback only: the signal may be reached while the wait is
 * being registered). Exactly one of the firing timepoint, the timer thread
 * (deadline), ordo_waiter_cancel and the destroy wins it; the winner is the
 * only one to cancel the entry's timepoint, so arming and cancelling a
 * timepoint never race (ordo/timepoint.h). Cancel and the timer claim only
 * out of PENDING, which registration enters after arming has returned.
 *
 * Lifetime. refs counts two holders: the timepoint (until its callback has
 * run, or its cancel prevented it: timepoint memory must stay valid until
 * then) and the resolution (until the user callback has returned or was
 * prevented). The last to let go recycles the entry: it releases the
 * signal, bumps the generation and pushes the entry on the free stack.
 *
 * Deadlines. A wait with a deadline gets a heap node (deadline, slot,
 * generation) once it is PENDING; IN_HEAP in its word says so. Resolving
 * it otherwise leaves the node stale instead of removing it (no heap work,
 * no lock, on the fire and cancel paths): whoever claims a word with
 * IN_HEAP counts one stale node and clears the slot's tag (a dense array
 * of the generation each slot's live node carries), and the timer thread
 * drops stale nodes when they reach the top, before it sleeps, and
 * compacts the heap in O(n), reading only the tags, once more than half of
 * it is stale. A registration sets its slot's tag under timer_lock, and
 * only while its entry is still in SETUP of its generation: one resolved
 * (and perhaps recycled, its slot taken by a later wait) on its way there
 * leaves the tag to the later wait.
 *
 * Locks, all leaves with respect to each other except slab_lock before
 * timer_lock (growing the heap with the slab); none is held while calling
 * into a signal (arming, cancelling, releasing) or running a callback:
 *   slab_lock   free stack, bucket growth, live count
 *   timer_lock  the deadline heap and the timer's state
 *   queue_lock  the queue of resolved entries for the workers
 */
#ifndef ORDO_CORE_WAITER_INTERNAL_H
#define ORDO_CORE_WAITER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/parker.h"
#include "core/wait_heap.h"
#include "ordo/waiter.h"

#define ORDO_WAITER_MAGIC 0x57414954u /* "WAIT" */
#define ORDO_WAITER_DEAD 0xdead3a17u

/* Bucket b holds WAITER_BUCKET0 << b entries; 17 buckets hold ~134M. */
#define WAITER_BUCKET0_SHIFT 10
#define WAITER_BUCKET0 (1u << WAITER_BUCKET0_SHIFT)
#define WAITER_BUCKETS 17
/* The heap is compacted once it holds at least this many stale nodes, and
 * more stale nodes than live ones. */
#define WAITER_COMPACT_MIN 1024

enum {
    PHASE_FREE = 0,
    PHASE_SETUP = 1,     /* being registered; only its timepoint may resolve it */
    PHASE_PENDING = 2,   /* armed, and in the heap if it has a deadline */
    PHASE_QUEUED = 3,    /* resolved, waiting for a worker */
    PHASE_RUNNING = 4,   /* its callback was entered */
    PHASE_DONE = 5,      /* its callback returned */
    PHASE_CANCELLED = 6, /* prevented by ordo_waiter_cancel */
};
#define WORD_PHASE_MASK 0xffu
#define WORD_WAITED 0x100u  /* RUNNING only: a canceller sleeps until DONE */
#define WORD_IN_HEAP 0x200u /* PENDING only: a heap node names this wait */
#define WORD_MAKE(gen, phase) (((uint64_t)(gen) << 32) | (uint64_t)(phase))
#define WORD_GEN(word) ((uint32_t)((word) >> 32))
#define WORD_PHASE(word) ((uint32_t)(word)&WORD_PHASE_MASK)

/* What resolved an entry (for the metrics). */
enum { OUTCOME_FIRED = 0, OUTCOME_TIMED_OUT = 1, OUTCOME_ABORTED = 2 };

/* Entry flags. */
#define ENTRY_INLINE 1u /* ORDO_WAIT_INLINE */
#define ENTRY_TIMED 2u  /* has a deadline */

typedef struct wait_entry {
    ordo_timepoint_t timepoint;
    _Atomic uint64_t word;
    /* The word of the slot's last wait at recycling (gen and phase: DONE,
     * CANCELLED, or SETUP for a registration taken back), for the message
     * of a cancel that comes after it: written before the word moves on. */
    _Atomic uint64_t last_over;
    _Atomic uint32_t refs;
    uint32_t slot; /* the entry's index in the slab (constant) */
    /* ENTRY_*, set at registration. Atomic because a destroy's scan may
     * read it while a stale entry is being reused (its claim then fails). */
    _Atomic uint32_t flags;
    ordo_status_t status; /* the outcome, written by the resolver */
    uint32_t outcome;     /* OUTCOME_*, written by the resolver */
    ordo_wait_fn fn;
    void *ctx;
    ordo_signal_t *signal; /* a reference, dropped at recycling */
    struct ordo_waiter *waiter;
    struct wait_entry *next; /* the free stack or the worker queue */
    /* This slot's heap tag (constant): the generation of its live heap
     * node, or 0. */
    _Atomic uint32_t *heap_tag;
} wait_entry_t;

struct ordo_waiter {
    uint32_t magic;
    uint32_t worker_count;
    uint32_t first_gen;  /* the generation fresh entries start at */
    _Atomic int closing; /* set once by destroy */

    pthread_mutex_t slab_lock;
    pthread_cond_t slab_idle; /* destroy waits here for live == 0 */
    wait_entry_t *free_head;
    uint32_t live;     /* entries off the free stack */
    uint32_t capacity; /* entries in the buckets */
    uint32_t bucket_count;
    _Atomic(wait_entry_t *) buckets[WAITER_BUCKETS];
    _Atomic(_Atomic uint32_t *) tags[WAITER_BUCKETS]; /* per slot, as buckets */

    pthread_mutex_t timer_lock;
    ordo_parker_t timer_parker; /* the timer sleeps on it until its deadline */
    wait_heap_t heap;
    /* Stale heap nodes (signed: a claimer may count its node after the
     * timer has dropped it), a copy of heap.len for the claimers, and
     * whether the timer is asked to compact. */
    _Atomic int64_t heap_stale;
    _Atomic uint32_t heap_len_hint;
    _Atomic int compact_requested;
    /* The deadline the timer sleeps until; 0 while it is awake (then it
     * looks at the heap before sleeping again, so no wake-up is needed). */
    uint64_t timer_sleep_until;
    int timer_stop;
    pthread_t timer_thread;

    pthread_mutex_t queue_lock;
    ordo_parker_t queue_parker; /* idle workers sleep on it */
    wait_entry_t *queue_head;
    wait_entry_t *queue_tail;
    int queue_stop;
    pthread_t *workers;

    /* Bumped (and woken) when a callback some canceller waits for returns. */
    _Atomic uint32_t done_seq;

    /* Metrics, on their own lines: registering threads, resolvers and
     * cancellers each touch their own. */
    _Alignas(64) _Atomic uint64_t registered;
    _Alignas(64) _Atomic uint64_t fired;
    _Atomic uint64_t failed;
    _Atomic uint64_t timed_out;
    _Atomic uint64_t aborted;
    _Atomic uint64_t completed;
    _Alignas(64) _Atomic uint64_t cancelled;
};

/* Tests only: called by a registration with a deadline on its way to the
 * timer, after its timepoint is armed and before the timer's lock, with
 * the wait's id; the hook may resolve the wait and register others there,
 * as another thread may meanwhile. NULL (the default): nothing is called.
 * Set it while no registration runs. */
typedef void (*ordo__waiter_timer_add_hook_fn)(void *ctx, ordo_waiter_t *waiter, ordo_wait_id_t id);
void ordo__waiter_set_timer_add_hook(ordo__waiter_timer_add_hook_fn hook, void *ctx);

#endif
