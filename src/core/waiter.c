/* Asynchronous waits (ordo/waiter.h): registration, the four ways a wait
 * is resolved (its timepoint, its deadline, a cancel, a destroy), the timer
 * thread and the worker threads. The protocol is described in
 * core/waiter_internal.h. */
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "core/waiter_internal.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

/* The callbacks this thread is running, innermost first. Cancel does not
 * wait for a callback from inside it; destroy is refused from inside one. */
typedef struct callback_frame {
    const ordo_waiter_t *waiter;
    ordo_wait_id_t id;
    struct callback_frame *outer;
} callback_frame_t;

static _Thread_local callback_frame_t *tls_frames;

static ordo_status_t waiter_check(const ordo_waiter_t *waiter, const char *api) {
    if (ORDO_UNLIKELY(!waiter)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "waiter is NULL");
    }
    /* The tag is read as a plain word: a handle of another type need not
     * be aligned as a waiter is (64 bytes). */
    uint32_t magic;
    memcpy(&magic, (const void *)waiter, sizeof magic);
    if (ORDO_UNLIKELY(magic != ORDO_WAITER_MAGIC)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live waiter (destroyed, or not a waiter)",
                           (const void *)waiter);
    }
    return ORDO_OK;
}

static inline ordo_wait_id_t entry_id(const wait_entry_t *e, uint32_t gen) {
    return ((uint64_t)gen << 32) | e->slot;
}

static inline uint32_t entry_flags_of(const wait_entry_t *e) {
    return atomic_load_explicit(&e->flags, memory_order_relaxed);
}

/* Where slot lives: its bucket and its index there; 0 if beyond every
 * bucket. */
static inline int slot_locate(uint32_t slot, unsigned *out_bucket, uint32_t *out_index) {
    uint64_t i = (uint64_t)slot + WAITER_BUCKET0;
    unsigned b = (unsigned)(63 - __builtin_clzll(i)) - WAITER_BUCKET0_SHIFT;
    *out_bucket = b;
    *out_index = (uint32_t)(i - ((uint64_t)WAITER_BUCKET0 << b));
    return b < WAITER_BUCKETS;
}

/* The entry of slot, or NULL when no bucket holds it yet. Lock-free:
 * buckets are published once and never move. */
static wait_entry_t *slot_entry(ordo_waiter_t *w, uint32_t slot) {
    unsigned b;
    uint32_t index;
    if (!slot_locate(slot, &b, &index)) {
        return NULL;
    }
    wait_entry_t *bucket = atomic_load_explicit(&w->buckets[b], memory_order_acquire);
    return bucket ? &bucket[index] : NULL;
}

/* The heap tag of a slot that has (had) a heap node: its bucket exists. */
static _Atomic uint32_t *slot_tag(ordo_waiter_t *w, uint32_t slot) {
    unsigned b;
    uint32_t index;
    (void)slot_locate(slot, &b, &index);
    return &atomic_load_explicit(&w->tags[b], memory_order_acquire)[index];
}

/* ---- the slab ------------------------------------------------------------ */

/* Adds the next bucket to the free stack. The heap first grows to hold two
 * nodes per entry: once compacted it always has room. */
static ordo_status_t slab_grow_locked(ordo_waiter_t *w, const char *api) {
    if (w->bucket_count == WAITER_BUCKETS) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                           "waiter %p holds %u waits, its maximum", (void *)w, w->capacity);
    }
    uint32_t b = w->bucket_count;
    uint32_t n = WAITER_BUCKET0 << b;
    pthread_mutex_lock(&w->timer_lock);
    int reserved = ordo__wait_heap_reserve(&w->heap, 2 * (w->capacity + n)) == 0;
    pthread_mutex_unlock(&w->timer_lock);
    wait_entry_t *bucket = reserved ? ordo__alloc((size_t)n * sizeof *bucket, 64) : NULL;
    _Atomic uint32_t *tags = bucket ? ordo__alloc((size_t)n * sizeof *tags, 64) : NULL;
    if (!tags) {
        if (bucket) {
            ordo__dealloc(bucket, (size_t)n * sizeof *bucket, 64);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                           "cannot grow the slab of waiter %p beyond %u waits", (void *)w,
                           w->capacity);
    }
    for (uint32_t k = n; k-- > 0;) {
        wait_entry_t *e = &bucket[k];
        e->slot = w->capacity + k;
        e->waiter = w;
        e->heap_tag = &tags[k];
        atomic_init(&e->word, WORD_MAKE(w->first_gen, PHASE_FREE));
        atomic_init(&e->last_over, 0);
        e->next = w->free_head;
        w->free_head = e;
    }
    atomic_store_explicit(&w->tags[b], tags, memory_order_release);
    atomic_store_explicit(&w->buckets[b], bucket, memory_order_release);
    w->capacity += n;
    w->bucket_count = b + 1;
    return ORDO_OK;
}

static ordo_status_t entry_acquire(ordo_waiter_t *w, wait_entry_t **out_entry, const char *api) {
    pthread_mutex_lock(&w->slab_lock);
    if (ORDO_UNLIKELY(!w->free_head)) {
        ordo_status_t st = slab_grow_locked(w, api);
        if (st != ORDO_OK) {
            pthread_mutex_unlock(&w->slab_lock);
            return st;
        }
    }
    wait_entry_t *e = w->free_head;
    w->free_head = e->next;
    ++w->live;
    pthread_mutex_unlock(&w->slab_lock);
    *out_entry = e;
    return ORDO_OK;
}

/* Both holders have let go: the entry goes back to the free stack under a
 * new generation, so its old id is recognised as over. */
static void entry_recycle(ordo_waiter_t *w, wait_entry_t *e) {
    ordo_signal_t *signal = e->signal;
    e->signal = NULL;
    const uint64_t over = atomic_load_explicit(&e->word, memory_order_relaxed);
    atomic_store_explicit(&e->last_over, WORD_MAKE(WORD_GEN(over), WORD_PHASE(over)),
                          memory_order_relaxed);
    uint32_t gen = WORD_GEN(over) + 1;
    atomic_store_explicit(&e->word, WORD_MAKE(gen ? gen : 1, PHASE_FREE), memory_order_release);
    if (signal) {
        ordo__signal_release_internal(signal);
    }
    pthread_mutex_lock(&w->slab_lock);
    e->next = w->free_head;
    w->free_head = e;
    if (--w->live == 0 && atomic_load_explicit(&w->closing, memory_order_relaxed)) {
        pthread_cond_broadcast(&w->slab_idle);
    }
    pthread_mutex_unlock(&w->slab_lock);
}

static inline void entry_release(ordo_waiter_t *w, wait_entry_t *e, uint32_t count) {
    if (atomic_fetch_sub_explicit(&e->refs, count, memory_order_acq_rel) == count) {
        entry_recycle(w, e);
    }
}

/* ---- running callbacks ----------------------------------------------------- */

/* Why a wait ended other than with its value, as the thread's message for
 * its callback (waiter.h): the signal's failure text, or what ended it. */
static void tell_outcome(const wait_entry_t *e, ordo_status_t status) {
    const char *why;
    switch (e->outcome) {
    case OUTCOME_TIMED_OUT:
        why = "the deadline passed before the signal reached its value";
        break;
    case OUTCOME_ABORTED:
        why = "the waiter was destroyed with the wait pending";
        break;
    default:
        why = ordo__signal_view(e->signal).failed ? ordo__signal_failure_message(e->signal)
                                                  : "the signal was destroyed before reaching "
                                                    "its value";
        break;
    }
    (void)ordo__error(status, NULL, "%s", why);
}

/* Runs the callback of an entry its caller moved to RUNNING, then marks it
 * DONE and wakes cancellers waiting for it. */
static void run_callback(ordo_waiter_t *w, wait_entry_t *e, uint32_t gen) {
    ordo_status_t status = e->status;
    switch (e->outcome) {
    case OUTCOME_TIMED_OUT:
        atomic_fetch_add_explicit(&w->timed_out, 1, memory_order_relaxed);
        break;
    case OUTCOME_ABORTED:
        atomic_fetch_add_explicit(&w->aborted, 1, memory_order_relaxed);
        break;
    default:
        if (status != ORDO_OK) {
            atomic_fetch_add_explicit(&w->failed, 1, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&w->fired, 1, memory_order_relaxed);
        break;
    }
    ordo_wait_id_t id = entry_id(e, gen);
    callback_frame_t frame = {w, id, tls_frames};
    tls_frames = &frame;
    if (ORDO_LIKELY(status == ORDO_OK)) {
        e->fn(e->ctx, status, id);
    } else {
        /* The thread's own message comes back after: an inline callback
         * runs inside another call (a failing signal's, a destroy's). */
        ordo__kept_message_t kept;
        ordo__message_keep(&kept);
        tell_outcome(e, status);
        e->fn(e->ctx, status, id);
        ordo__message_restore(&kept);
    }
    tls_frames = frame.outer;
    atomic_fetch_add_explicit(&w->completed, 1, memory_order_relaxed);
    uint64_t old =
        atomic_exchange_explicit(&e->word, WORD_MAKE(gen, PHASE_DONE), memory_order_seq_cst);
    if (old & WORD_WAITED) {
        atomic_fetch_add_explicit(&w->done_seq, 1, memory_order_seq_cst);
        ordo__futex_wake(&w->done_seq, INT_MAX);
    }
}

static void queue_push(ordo_waiter_t *w, wait_entry_t *e) {
    e->next = NULL;
    pthread_mutex_lock(&w->queue_lock);
    if (w->queue_tail) {
        w->queue_tail->next = e;
    } else {
        w->queue_head = e;
    }
    w->queue_tail = e;
    pthread_mutex_unlock(&w->queue_lock);
    /* Every worker parks with the same interest, and any one can run it. */
    ordo__parker_unpark(&w->queue_parker, ORDO_PARK_ANY, 1);
}

/* The phase a resolver moves an entry to. */
static inline uint32_t resolved_phase(const wait_entry_t *e) {
    return (entry_flags_of(e) & ENTRY_INLINE) ? PHASE_RUNNING : PHASE_QUEUED;
}

/* The claimer of e found IN_HEAP: e's heap node is stale from now on.
 * Clears its tag (before the entry can be recycled and tagged anew) and
 * counts it; asks the timer to compact the heap once more than half of it
 * is stale. */
static void heap_note_stale(ordo_waiter_t *w, wait_entry_t *e) {
    atomic_store_explicit(e->heap_tag, 0, memory_order_relaxed);
    int64_t stale = atomic_fetch_add_explicit(&w->heap_stale, 1, memory_order_relaxed) + 1;
    if (stale < WAITER_COMPACT_MIN ||
        2 * stale <= (int64_t)atomic_load_explicit(&w->heap_len_hint, memory_order_relaxed) ||
        atomic_load_explicit(&w->compact_requested, memory_order_relaxed) ||
        atomic_exchange_explicit(&w->compact_requested, 1, memory_order_relaxed)) {
        return;
    }
    /* The timer reads the request after its parker's key. */
    ordo__parker_unpark(&w->timer_parker, ORDO_PARK_ANY, 1);
}

/* The work of whoever won the entry out of PENDING (or SETUP): disarm its
 * timepoint (unless the caller is that timepoint's callback), count its
 * heap node stale (stale_node: the word it claimed had IN_HEAP, and the
 * caller is not the timer that popped the node), then run the callback
 * here (inline) or hand it to the workers. by_timepoint: the caller's
 * timepoint reference is dropped here too.
 *
 * A waiter's destroy (outcome ABORTED) or the timer (TIMED_OUT) that
 * finds the timepoint due already delivers the timepoint's outcome
 * instead: the signal reached the value, or failed, before the claim, and
 * the thread that raised it only had not run the due list that far yet (a
 * host thread woken by the raise may destroy the waiter meanwhile; a
 * callback earlier in that list may run long). The wait was decided. */
static void entry_resolved(ordo_waiter_t *w, wait_entry_t *e, uint32_t gen, ordo_status_t status,
                           uint32_t outcome, int by_timepoint, int stale_node) {
    uint32_t drop = by_timepoint ? 1 : 0;
    if (!by_timepoint) {
        ordo_cancel_result_t result;
        if (ordo_timepoint_cancel(&e->timepoint, &result) == ORDO_OK) {
            if (result == ORDO_CANCEL_PREVENTED) {
                ++drop; /* otherwise its callback is due: it finds the entry taken */
            } else if (outcome != OUTCOME_FIRED) {
                status = ordo__timepoint_due_status(&e->timepoint);
                outcome = OUTCOME_FIRED;
            }
        }
    }
    if (stale_node) {
        heap_note_stale(w, e);
    }
    e->status = status;
    e->outcome = outcome;
    if (entry_flags_of(e) & ENTRY_INLINE) {
        run_callback(w, e, gen);
        ++drop; /* the resolution's reference */
    } else {
        queue_push(w, e); /* the resolution's reference goes with it */
    }
    if (drop) {
        entry_release(w, e, drop);
    }
}

/* The callback of every entry's timepoint: the signal reached the value,
 * failed, or was destroyed. */
static void entry_timepoint_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    wait_entry_t *e = ctx;
    ordo_waiter_t *w = e->waiter;
    uint64_t word = atomic_load_explicit(&e->word, memory_order_acquire);
    for (;;) {
        uint32_t phase = WORD_PHASE(word);
        if (phase != PHASE_SETUP && phase != PHASE_PENDING) {
            entry_release(w, e, 1); /* resolved otherwise: only let go */
            return;
        }
        uint64_t target = WORD_MAKE(WORD_GEN(word), resolved_phase(e));
        if (atomic_compare_exchange_weak_explicit(&e->word, &word, target, memory_order_seq_cst,
                                                  memory_order_acquire)) {
            break;
        }
    }
    entry_resolved(w, e, WORD_GEN(word), status, OUTCOME_FIRED, 1, (word & WORD_IN_HEAP) != 0);
}

/* Claims e out of PENDING (word: as last read) for a resolver; 0 if
 * someone else has it. */
static int entry_claim_pending(wait_entry_t *e, uint64_t word) {
    if (WORD_PHASE(word) != PHASE_PENDING) {
        return 0;
    }
    return atomic_compare_exchange_strong_explicit(&e->word, &word,
                                                   WORD_MAKE(WORD_GEN(word), resolved_phase(e)),
                                                   memory_order_seq_cst, memory_order_relaxed);
}

/* ---- threads ------------------------------------------------------------- */

static void *worker_main(void *arg) {
    ordo_waiter_t *w = arg;
    pthread_setname_np(pthread_self(), "ordo-waiter");
    pthread_mutex_lock(&w->queue_lock);
    for (;;) {
        while (!w->queue_head && !w->queue_stop) {
            /* Read under the lock, so before any push it misses. */
            ordo_park_key_t key = ordo__parker_prepare(&w->queue_parker);
            pthread_mutex_unlock(&w->queue_lock);
            (void)ordo__parker_park(&w->queue_parker, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
            pthread_mutex_lock(&w->queue_lock);
        }
        wait_entry_t *e = w->queue_head;
        if (!e) {
            break; /* stopping, and nothing is left */
        }
        w->queue_head = e->next;
        if (!w->queue_head) {
            w->queue_tail = NULL;
        }
        pthread_mutex_unlock(&w->queue_lock);
        /* The queue's reference keeps the entry (and its generation). */
        uint64_t word = atomic_load_explicit(&e->word, memory_order_acquire);
        uint32_t gen = WORD_GEN(word);
        uint64_t queued = WORD_MAKE(gen, PHASE_QUEUED);
        if (atomic_compare_exchange_strong_explicit(&e->word, &queued,
                                                    WORD_MAKE(gen, PHASE_RUNNING),
                                                    memory_order_seq_cst, memory_order_relaxed)) {
            run_callback(w, e, gen);
        } /* else cancelled while queued */
        entry_release(w, e, 1);
        pthread_mutex_lock(&w->queue_lock);
    }
    pthread_mutex_unlock(&w->queue_lock);
    return NULL;
}

#define TIMER_BATCH 64

/* A heap node is live while its slot's tag holds its generation. The tags
 * are dense, so compacting reads a small array, not every entry. */
static int heap_node_live(void *ctx, const wait_heap_node_t *node) {
    return atomic_load_explicit(slot_tag(ctx, node->slot), memory_order_relaxed) == node->gen;
}

static void heap_compact_locked(ordo_waiter_t *w) {
    uint32_t dropped = ordo__wait_heap_filter(&w->heap, heap_node_live, w);
    atomic_fetch_sub_explicit(&w->heap_stale, dropped, memory_order_relaxed);
    atomic_store_explicit(&w->heap_len_hint, w->heap.len, memory_order_relaxed);
}

static void *timer_main(void *arg) {
    ordo_waiter_t *w = arg;
    pthread_setname_np(pthread_self(), "ordo-timer");
    /* Deadlines are met to the microsecond, not to the default 50 us
     * slack of a sleeping thread. */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&w->timer_lock);
    while (!w->timer_stop) {
        /* Before the timer looks at the request, the heap and stop: a
         * change it misses unparks it after (those under timer_lock are
         * made, and their wake-ups decided, under the lock). */
        ordo_park_key_t key = ordo__parker_prepare(&w->timer_parker);
        if (atomic_load_explicit(&w->compact_requested, memory_order_relaxed)) {
            atomic_store_explicit(&w->compact_requested, 0, memory_order_relaxed);
            heap_compact_locked(w);
        }
        uint64_t now = ordo_time_now_ns();
        wait_entry_t *batch[TIMER_BATCH];
        uint64_t words[TIMER_BATCH];
        uint32_t n = 0;
        /* Expired nodes, and stale ones on top: the timer then sleeps until
         * the earliest live deadline. */
        while (n < TIMER_BATCH && w->heap.len) {
            wait_heap_node_t top = w->heap.nodes[0];
            wait_entry_t *e = slot_entry(w, top.slot);
            uint64_t word = atomic_load_explicit(&e->word, memory_order_acquire);
            int live = WORD_GEN(word) == top.gen && WORD_PHASE(word) == PHASE_PENDING;
            if (live && top.deadline > now) {
                break;
            }
            ordo__wait_heap_pop(&w->heap);
            if (live) {
                words[n] = word;
                batch[n++] = e;
            } else {
                /* Its claimer counts it stale (or has): it is gone now. */
                atomic_fetch_sub_explicit(&w->heap_stale, 1, memory_order_relaxed);
            }
        }
        atomic_store_explicit(&w->heap_len_hint, w->heap.len, memory_order_relaxed);
        if (n) {
            pthread_mutex_unlock(&w->timer_lock);
            /* Each wait is claimed only when its turn comes, so a wait
             * stays PENDING (cancellable: PREVENTED) while the callbacks
             * before it in the batch run. Claimed up front, an inline wait
             * would sit in RUNNING before its callback started, and a
             * callback earlier in the batch that cancels it with
             * wait_for_callback would wait for this thread forever. */
            for (uint32_t i = 0; i < n; ++i) {
                if (entry_claim_pending(batch[i], words[i])) {
                    entry_resolved(w, batch[i], WORD_GEN(words[i]), ORDO_ERR_TIMEOUT,
                                   OUTCOME_TIMED_OUT, 0, 0);
                } else {
                    /* Resolved otherwise meanwhile; its claimer found
                     * IN_HEAP and counted the node stale. */
                    atomic_fetch_sub_explicit(&w->heap_stale, 1, memory_order_relaxed);
                }
            }
            pthread_mutex_lock(&w->timer_lock);
            continue;
        }
        if (atomic_load_explicit(&w->compact_requested, memory_order_relaxed)) {
            continue;
        }
        uint64_t until = w->heap.len ? w->heap.nodes[0].deadline : ORDO_DEADLINE_NEVER;
        w->timer_sleep_until = until;
        pthread_mutex_unlock(&w->timer_lock);
        (void)ordo__parker_park(&w->timer_parker, key, ORDO_PARK_ANY, until);
        pthread_mutex_lock(&w->timer_lock);
        w->timer_sleep_until = 0;
    }
    pthread_mutex_unlock(&w->timer_lock);
    return NULL;
}

static void timer_stop(ordo_waiter_t *w) {
    pthread_mutex_lock(&w->timer_lock);
    w->timer_stop = 1;
    pthread_mutex_unlock(&w->timer_lock);
    ordo__parker_unpark(&w->timer_parker, ORDO_PARK_ANY, 1);
    pthread_join(w->timer_thread, NULL);
}

static void workers_stop(ordo_waiter_t *w, uint32_t started) {
    pthread_mutex_lock(&w->queue_lock);
    w->queue_stop = 1;
    pthread_mutex_unlock(&w->queue_lock);
    ordo__parker_unpark(&w->queue_parker, ORDO_PARK_ANY, INT_MAX);
    for (uint32_t i = 0; i < started; ++i) {
        pthread_join(w->workers[i], NULL);
    }
}

/* ---- create and destroy ---------------------------------------------------- */

ordo_status_t ordo_waiter_config_default(ordo_waiter_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    out_config->worker_threads = 1;
    out_config->flags = 0;
    return ORDO_OK;
}

/* Frees what waiter_init made (threads already joined). */
static void waiter_free(ordo_waiter_t *w) {
    for (uint32_t b = 0; b < w->bucket_count; ++b) {
        wait_entry_t *bucket = atomic_load_explicit(&w->buckets[b], memory_order_relaxed);
        ordo__dealloc(bucket, (size_t)(WAITER_BUCKET0 << b) * sizeof *bucket, 64);
        _Atomic uint32_t *tags = atomic_load_explicit(&w->tags[b], memory_order_relaxed);
        ordo__dealloc(tags, (size_t)(WAITER_BUCKET0 << b) * sizeof *tags, 64);
    }
    ordo__wait_heap_free(&w->heap);
    if (w->workers) {
        ordo__dealloc(w->workers, (size_t)w->worker_count * sizeof *w->workers, 0);
    }
    pthread_mutex_destroy(&w->queue_lock);
    pthread_mutex_destroy(&w->timer_lock);
    pthread_cond_destroy(&w->slab_idle);
    pthread_mutex_destroy(&w->slab_lock);
    w->magic = ORDO_WAITER_DEAD;
    ordo__dealloc(w, sizeof *w, 64);
}

ordo_status_t ordo_waiter_create(const ordo_waiter_config_t *config, ordo_waiter_t **out_waiter) {
    if (!out_waiter) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_waiter is NULL");
    }
    *out_waiter = NULL;
    ordo_waiter_config_t cfg;
    (void)ordo_waiter_config_default(&cfg);
    if (config) {
        cfg = *config;
    }
    ORDO_RETURN_IF_ERROR(ordo__flags_check(cfg.flags, 0, __func__));
    if (cfg.worker_threads == 0 || cfg.worker_threads > ORDO_WAITER_MAX_WORKERS) {
        return ordo__error(cfg.worker_threads ? ORDO_ERR_OUT_OF_RANGE : ORDO_ERR_INVALID_ARGUMENT,
                           __func__, "worker_threads %u is not in 1..%u", cfg.worker_threads,
                           ORDO_WAITER_MAX_WORKERS);
    }
    ordo_waiter_t *w = ordo__alloc(sizeof *w, 64);
    if (!w) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a waiter");
    }
    /* Each waiter numbers its generations from its own starting point, so
     * an id handed to the wrong waiter is (almost always) not found. */
    static _Atomic uint32_t waiters_made;
    uint32_t first_gen =
        (atomic_fetch_add_explicit(&waiters_made, 1, memory_order_relaxed) + 1) * 0x9e3779b1u;
    w->first_gen = first_gen ? first_gen : 1;
    w->worker_count = cfg.worker_threads;
    w->workers = ordo__alloc((size_t)w->worker_count * sizeof *w->workers, 0);
    /* Default mutexes and condition variables cannot fail to initialise
     * on Linux (glibc allocates nothing for them). */
    pthread_mutex_init(&w->slab_lock, NULL);
    pthread_cond_init(&w->slab_idle, NULL);
    pthread_mutex_init(&w->timer_lock, NULL);
    ordo__parker_init(&w->timer_parker);
    pthread_mutex_init(&w->queue_lock, NULL);
    ordo__parker_init(&w->queue_parker);
    if (!w->workers) {
        waiter_free(w);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a waiter");
    }
    if (pthread_create(&w->timer_thread, NULL, timer_main, w) != 0) {
        waiter_free(w);
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, __func__, "cannot start the timer thread");
    }
    for (uint32_t i = 0; i < w->worker_count; ++i) {
        if (pthread_create(&w->workers[i], NULL, worker_main, w) != 0) {
            workers_stop(w, i);
            timer_stop(w);
            waiter_free(w);
            return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, __func__,
                               "cannot start worker thread %u of %u", i + 1, cfg.worker_threads);
        }
    }
    w->magic = ORDO_WAITER_MAGIC;
    *out_waiter = w;
    return ORDO_OK;
}

ordo_status_t ordo_waiter_destroy(ordo_waiter_t *waiter) {
    ORDO_RETURN_IF_ERROR(waiter_check(waiter, __func__));
    ordo_waiter_t *w = waiter;
    for (const callback_frame_t *f = tls_frames; f; f = f->outer) {
        if (f->waiter == w) {
            return ordo__error(ORDO_ERR_BUSY, __func__,
                               "called from a callback of waiter %p: it would wait for itself",
                               (void *)w);
        }
    }
    /* Inside timepoint callbacks (an inline callback of another waiter, a
     * coordinator callback...), timepoints that become due on this thread
     * wait for the running callback to return. One of them may be a wait of
     * this waiter, and destroy waits for its timepoint: it would never come. */
    if (ordo__timepoints_running_here()) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "called from inside a callback run by a signal: a timepoint of waiter "
                           "%p may be queued behind it on this thread; destroy it from elsewhere",
                           (void *)w);
    }
    if (atomic_exchange_explicit(&w->closing, 1, memory_order_seq_cst)) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "waiter %p is being destroyed already",
                           (void *)w);
    }
    /* Resolve every pending wait with ORDO_ERR_CANCELLED. A registration
     * that makes its entry PENDING after this scan sees closing and
     * resolves the entry itself (both sides use sequentially consistent
     * accesses: one of them sees the other). */
    for (uint32_t b = 0; b < WAITER_BUCKETS; ++b) {
        wait_entry_t *bucket = atomic_load_explicit(&w->buckets[b], memory_order_acquire);
        if (!bucket) {
            break;
        }
        for (uint32_t k = 0; k < (WAITER_BUCKET0 << b); ++k) {
            wait_entry_t *e = &bucket[k];
            uint64_t word = atomic_load_explicit(&e->word, memory_order_seq_cst);
            if (entry_claim_pending(e, word)) {
                entry_resolved(w, e, WORD_GEN(word), ORDO_ERR_CANCELLED, OUTCOME_ABORTED, 0,
                               (word & WORD_IN_HEAP) != 0);
            }
        }
    }
    /* Queued and running callbacks finish; due timepoints let go. */
    pthread_mutex_lock(&w->slab_lock);
    while (w->live) {
        pthread_cond_wait(&w->slab_idle, &w->slab_lock);
    }
    pthread_mutex_unlock(&w->slab_lock);
    timer_stop(w);
    workers_stop(w, w->worker_count);
    waiter_free(w);
    return ORDO_OK;
}

/* ---- registering ------------------------------------------------------------ */

static _Atomic(ordo__waiter_timer_add_hook_fn) timer_add_hook;
static void *timer_add_hook_ctx;

void ordo__waiter_set_timer_add_hook(ordo__waiter_timer_add_hook_fn hook, void *ctx) {
    timer_add_hook_ctx = ctx;
    atomic_store_explicit(&timer_add_hook, hook, memory_order_release);
}

/* Moves the wait (e, gen) from SETUP to PENDING with its heap node, under
 * the timer's lock so that the timer never sees the one without the other;
 * wakes the timer if the node is the new earliest deadline. 0 if the
 * wait's timepoint resolved it first. */
static int timer_add(ordo_waiter_t *w, wait_entry_t *e, uint32_t gen, ordo_deadline_t deadline) {
    ordo__waiter_timer_add_hook_fn hook =
        atomic_load_explicit(&timer_add_hook, memory_order_acquire);
    if (ORDO_UNLIKELY(hook != NULL)) {
        hook(timer_add_hook_ctx, w, entry_id(e, gen));
    }
    int wake = 0;
    pthread_mutex_lock(&w->timer_lock);
    /* Resolved since the caller looked, the entry may be recycled, and a
     * registration of a later generation may own the slot's tag and heap
     * node: nothing of it is touched. (A registration of the slot takes
     * this lock to set the tag, so none can while the lock is held.) */
    if (atomic_load_explicit(&e->word, memory_order_seq_cst) != WORD_MAKE(gen, PHASE_SETUP)) {
        pthread_mutex_unlock(&w->timer_lock);
        return 0;
    }
    /* More than half of the heap stale and the timer has not compacted it
     * (a long inline timeout callback keeps it busy): compacted here, so
     * the heap stays within about twice the waits pending. */
    int64_t stale = atomic_load_explicit(&w->heap_stale, memory_order_relaxed);
    if (stale >= WAITER_COMPACT_MIN && 2 * stale > (int64_t)w->heap.len) {
        heap_compact_locked(w);
    }
    /* Room first. Growing can fail; compacting then makes room, as the heap
     * holds two nodes per entry of the slab. Only claimers that have not
     * yet cleared their tag could keep it full: they are a few
     * instructions from doing so. */
    while (w->heap.len == w->heap.capacity &&
           ordo__wait_heap_reserve(&w->heap, 2 * w->heap.capacity) != 0) {
        heap_compact_locked(w);
        if (w->heap.len == w->heap.capacity) {
            pthread_mutex_unlock(&w->timer_lock);
            sched_yield();
            pthread_mutex_lock(&w->timer_lock);
        }
    }
    /* The tag before the CAS: from the CAS on, a firing may claim the wait
     * and clear the tag (heap_note_stale), and a tag stored after that
     * would mark the dead node live. No node of gen is in the heap yet, so
     * the tag alone changes nothing until the push. */
    atomic_store_explicit(e->heap_tag, gen, memory_order_relaxed);
    uint64_t setup = WORD_MAKE(gen, PHASE_SETUP);
    int added = atomic_compare_exchange_strong_explicit(
        &e->word, &setup, WORD_MAKE(gen, PHASE_PENDING) | WORD_IN_HEAP, memory_order_seq_cst,
        memory_order_relaxed);
    if (!added) {
        /* Resolved between the load above and the CAS: only this
         * generation's tag is taken back. */
        uint32_t mine = gen;
        atomic_compare_exchange_strong_explicit(e->heap_tag, &mine, 0, memory_order_relaxed,
                                                memory_order_relaxed);
    } else {
        wait_heap_node_t node = {deadline, e->slot, gen};
        if (ordo__wait_heap_push(&w->heap, node) == 0 && deadline < w->timer_sleep_until) {
            w->timer_sleep_until = deadline; /* one wake-up is enough */
            wake = 1;
        }
        atomic_store_explicit(&w->heap_len_hint, w->heap.len, memory_order_relaxed);
    }
    pthread_mutex_unlock(&w->timer_lock);
    if (wake) {
        ordo__parker_unpark(&w->timer_parker, ORDO_PARK_ANY, 1);
    }
    return added;
}

static ordo_status_t wait_register(ordo_waiter_t *w, ordo_signal_t *signal, uint64_t value,
                                   ordo_deadline_t deadline, uint32_t flags, ordo_wait_fn fn,
                                   void *ctx, ordo_wait_id_t *out_id, const char *api) {
    if (ORDO_UNLIKELY(atomic_load_explicit(&w->closing, memory_order_relaxed))) {
        return ordo__error(ORDO_ERR_DESTROYED, api, "waiter %p is being destroyed", (void *)w);
    }
    wait_entry_t *e;
    ORDO_RETURN_IF_ERROR(entry_acquire(w, &e, api));
    uint32_t gen = WORD_GEN(atomic_load_explicit(&e->word, memory_order_relaxed));
    uint32_t entry_flags = ((flags & ORDO_WAIT_INLINE) ? ENTRY_INLINE : 0) |
                           (deadline != ORDO_DEADLINE_NEVER ? ENTRY_TIMED : 0);
    atomic_store_explicit(&e->flags, entry_flags, memory_order_relaxed);
    e->fn = fn;
    e->ctx = ctx;
    e->signal = signal;
    atomic_store_explicit(&e->refs, 2, memory_order_relaxed); /* timepoint, resolution */
    atomic_store_explicit(&e->word, WORD_MAKE(gen, PHASE_SETUP), memory_order_relaxed);
    ordo_wait_id_t id = entry_id(e, gen);
    if (out_id) {
        *out_id = id;
    }
    atomic_fetch_add_explicit(&w->registered, 1, memory_order_relaxed);
    ordo__signal_retain_internal(signal);
    /* Arming publishes the fields above (under the signal's lock) to
     * whichever thread runs the timepoint. */
    if (ORDO_UNLIKELY(ordo__timepoint_arm_quiet(&e->timepoint, signal, value, entry_timepoint_fired,
                                                e, TIMEPOINT_USER) != ORDO_OK)) {
        atomic_fetch_sub_explicit(&w->registered, 1, memory_order_relaxed);
        if (out_id) {
            *out_id = 0;
        }
        entry_recycle(w, e); /* releases the signal */
        return ordo__error(ORDO_ERR_DESTROYED, api, "signal %p was destroyed", (void *)signal);
    }
    /* From here on the entry may be resolved and even recycled by others:
     * every further access is checked against the generation. */
    uint64_t pending = WORD_MAKE(gen, PHASE_PENDING);
    /* A signal that has reached the value (or ended) by now made the
     * timepoint due: it resolves the wait, so the deadline takes no part.
     * Without this check a timepoint queued behind the callback this
     * registration runs in would race the timer for a deadline already
     * past. (The caller keeps the signal alive during the call.) */
    signal_view_t view = ordo__signal_view(signal);
    if (view.ended || view.value >= value) {
        entry_flags &= ~ENTRY_TIMED;
    }
    if (entry_flags & ENTRY_TIMED) {
        if (!timer_add(w, e, gen, deadline)) {
            return ORDO_OK; /* the value was reached (or the signal failed) during arming */
        }
        pending |= WORD_IN_HEAP;
    } else {
        uint64_t setup = WORD_MAKE(gen, PHASE_SETUP);
        if (!atomic_compare_exchange_strong_explicit(&e->word, &setup, pending,
                                                     memory_order_seq_cst, memory_order_relaxed)) {
            return ORDO_OK; /* as above */
        }
    }
    if (ORDO_UNLIKELY(atomic_load_explicit(&w->closing, memory_order_seq_cst))) {
        /* A destroy began and may have scanned past this entry. */
        if (entry_claim_pending(e, pending)) {
            entry_resolved(w, e, gen, ORDO_ERR_CANCELLED, OUTCOME_ABORTED, 0,
                           (pending & WORD_IN_HEAP) != 0);
        }
    }
    return ORDO_OK;
}

static ordo_status_t check_wait_args(uint32_t flags, ordo_wait_fn fn, const char *api) {
    if (ORDO_UNLIKELY(!fn)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "fn is NULL");
    }
    if (ORDO_UNLIKELY(flags & ~ORDO_WAIT_INLINE)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "unknown flags 0x%x",
                           flags & ~ORDO_WAIT_INLINE);
    }
    return ORDO_OK;
}

ordo_status_t ordo_waiter_wait(ordo_waiter_t *waiter, ordo_signal_t *signal, uint64_t value,
                               ordo_deadline_t deadline, uint32_t flags, ordo_wait_fn fn, void *ctx,
                               ordo_wait_id_t *out_id) {
    if (out_id) {
        *out_id = 0;
    }
    ordo_status_t st = waiter_check(waiter, __func__);
    if (st == ORDO_OK) {
        st = ordo__signal_check(signal, __func__);
    }
    if (st == ORDO_OK) {
        st = ordo__signal_armable(signal, __func__);
    }
    if (st == ORDO_OK) {
        st = check_wait_args(flags, fn, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    if (ORDO_UNLIKELY(value > ORDO_SIGNAL_VALUE_MAX)) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "value %llu exceeds ORDO_SIGNAL_VALUE_MAX", (unsigned long long)value);
    }
    return wait_register(waiter, signal, value, deadline, flags, fn, ctx, out_id, __func__);
}

ordo_status_t ordo_waiter_wait_event(ordo_waiter_t *waiter, ordo_event_t *event,
                                     ordo_deadline_t deadline, uint32_t flags, ordo_wait_fn fn,
                                     void *ctx, ordo_wait_id_t *out_id) {
    if (out_id) {
        *out_id = 0;
    }
    ordo_status_t st = waiter_check(waiter, __func__);
    if (st == ORDO_OK) {
        st = ordo__hal_event_check_recorded(event, __func__);
    }
    if (st == ORDO_OK) {
        st = check_wait_args(flags, fn, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    return wait_register(waiter, event->timeline, event->point, deadline, flags, fn, ctx, out_id,
                         __func__);
}

/* ---- cancelling ------------------------------------------------------------- */

static int running_on_this_thread(const ordo_waiter_t *w, ordo_wait_id_t id) {
    for (const callback_frame_t *f = tls_frames; f; f = f->outer) {
        if (f->waiter == w && f->id == id) {
            return 1;
        }
    }
    return 0;
}

/* Sleeps until the callback of entry e (generation gen) has returned. */
static void wait_for_callback_return(ordo_waiter_t *w, wait_entry_t *e, uint32_t gen) {
    const uint64_t running = WORD_MAKE(gen, PHASE_RUNNING);
    for (;;) {
        /* The sequence before the word: a return after this read of the
         * word bumps the sequence after it, so the futex cannot miss it. */
        uint32_t seq = atomic_load_explicit(&w->done_seq, memory_order_seq_cst);
        uint64_t word = atomic_load_explicit(&e->word, memory_order_seq_cst);
        if ((word & ~(uint64_t)WORD_WAITED) != running) {
            return;
        }
        if (!(word & WORD_WAITED)) {
            (void)atomic_compare_exchange_strong_explicit(
                &e->word, &word, word | WORD_WAITED, memory_order_seq_cst, memory_order_relaxed);
            continue;
        }
        (void)ordo__futex_wait(&w->done_seq, seq, ORDO_DEADLINE_NEVER);
    }
}

static ordo_status_t never_issued(const ordo_waiter_t *w, ordo_wait_id_t id) {
    return ordo__error(ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel",
                       "wait id 0x%llx was never issued by waiter %p", (unsigned long long)id,
                       (const void *)w);
}

/* ORDO_ERR_NOT_FOUND for id (generation gen), no longer its slot's wait
 * (whose generation is now): the slot's last wait tells how it ended if
 * it was id's; an older generation of the slot's (each waiter starts its
 * own at first_gen) was issued and is over, which way is forgotten. */
static ordo_status_t wait_gone(const ordo_waiter_t *w, const wait_entry_t *e, ordo_wait_id_t id,
                               uint32_t gen, uint32_t now) {
    const uint64_t last = atomic_load_explicit(&e->last_over, memory_order_relaxed);
    if (WORD_GEN(last) == gen) { /* gen is not 0: last was written */
        switch (WORD_PHASE(last)) {
        case PHASE_DONE:
            return ordo__error(ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel",
                               "wait 0x%llx is over: its callback has completed",
                               (unsigned long long)id);
        case PHASE_CANCELLED:
            return ordo__error(ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel",
                               "wait 0x%llx was cancelled already", (unsigned long long)id);
        default: /* a registration taken back: its id was not handed out */
            return never_issued(w, id);
        }
    }
    if ((uint32_t)(gen - w->first_gen) < (uint32_t)(now - w->first_gen)) {
        return ordo__error(ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel",
                           "wait 0x%llx is over: its callback has completed or it was cancelled "
                           "(which is no longer known: later waits have used its slot since)",
                           (unsigned long long)id);
    }
    return never_issued(w, id);
}

ordo_status_t ordo_waiter_cancel(ordo_waiter_t *waiter, ordo_wait_id_t id, bool wait_for_callback,
                                 ordo_cancel_result_t *out_result) {
    if (out_result) {
        *out_result = ORDO_CANCEL_PREVENTED;
    }
    ORDO_RETURN_IF_ERROR(waiter_check(waiter, __func__));
    ordo_waiter_t *w = waiter;
    if (ORDO_UNLIKELY(!out_result)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_result is NULL");
    }
    if (ORDO_UNLIKELY(id == 0)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "0 is never a wait id");
    }
    uint32_t gen = (uint32_t)(id >> 32);
    wait_entry_t *e = slot_entry(w, (uint32_t)id);
    if (ORDO_UNLIKELY(!e || gen == 0)) {
        return never_issued(w, id);
    }
    uint64_t word = atomic_load_explicit(&e->word, memory_order_acquire);
    for (;;) {
        if (WORD_GEN(word) != gen) {
            return wait_gone(w, e, id, gen, WORD_GEN(word));
        }
        switch (WORD_PHASE(word)) {
        case PHASE_SETUP:
            /* Still inside ordo_waiter_wait on another thread, for a few
             * instructions more. */
            sched_yield();
            word = atomic_load_explicit(&e->word, memory_order_acquire);
            continue;
        case PHASE_PENDING:
            if (!atomic_compare_exchange_weak_explicit(
                    &e->word, &word, WORD_MAKE(gen, PHASE_CANCELLED), memory_order_seq_cst,
                    memory_order_acquire)) {
                continue;
            }
            {
                uint32_t drop = 1; /* the resolution's reference */
                ordo_cancel_result_t result;
                if (ordo_timepoint_cancel(&e->timepoint, &result) == ORDO_OK &&
                    result == ORDO_CANCEL_PREVENTED) {
                    ++drop;
                }
                if (word & WORD_IN_HEAP) {
                    heap_note_stale(w, e);
                }
                atomic_fetch_add_explicit(&w->cancelled, 1, memory_order_relaxed);
                entry_release(w, e, drop);
            }
            *out_result = ORDO_CANCEL_PREVENTED;
            return ORDO_OK;
        case PHASE_QUEUED:
            /* Resolved but not started: still preventable. The worker that
             * pops it lets it go. */
            if (!atomic_compare_exchange_weak_explicit(
                    &e->word, &word, WORD_MAKE(gen, PHASE_CANCELLED), memory_order_seq_cst,
                    memory_order_acquire)) {
                continue;
            }
            atomic_fetch_add_explicit(&w->cancelled, 1, memory_order_relaxed);
            *out_result = ORDO_CANCEL_PREVENTED;
            return ORDO_OK;
        case PHASE_RUNNING:
            *out_result = ORDO_CANCEL_TOO_LATE;
            if (wait_for_callback && !running_on_this_thread(w, id)) {
                wait_for_callback_return(w, e, gen);
            }
            return ORDO_OK;
        case PHASE_DONE:
            return ordo__error(ORDO_ERR_NOT_FOUND, __func__,
                               "wait 0x%llx is over: its callback has completed",
                               (unsigned long long)id);
        case PHASE_CANCELLED:
            return ordo__error(ORDO_ERR_NOT_FOUND, __func__, "wait 0x%llx was cancelled already",
                               (unsigned long long)id);
        default: /* PHASE_FREE: the slot's generation not handed out yet */
            return never_issued(w, id);
        }
    }
}

ordo_status_t ordo_waiter_metrics(ordo_waiter_t *waiter, ordo_waiter_metrics_t *out_metrics) {
    if (out_metrics) {
        memset(out_metrics, 0, sizeof *out_metrics);
    }
    ORDO_RETURN_IF_ERROR(waiter_check(waiter, __func__));
    if (!out_metrics) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_metrics is NULL");
    }
    /* Outcomes before starts before registrations: whatever a read counts
     * was counted at an earlier stage before, so the differences below do
     * not go negative (they are clamped for the rare case of a refused
     * registration being taken back). */
    ordo_waiter_metrics_t m;
    uint64_t completed = atomic_load_explicit(&waiter->completed, memory_order_seq_cst);
    m.cancelled = atomic_load_explicit(&waiter->cancelled, memory_order_seq_cst);
    m.failed = atomic_load_explicit(&waiter->failed, memory_order_seq_cst);
    m.fired = atomic_load_explicit(&waiter->fired, memory_order_seq_cst);
    m.timed_out = atomic_load_explicit(&waiter->timed_out, memory_order_seq_cst);
    m.aborted = atomic_load_explicit(&waiter->aborted, memory_order_seq_cst);
    m.registered = atomic_load_explicit(&waiter->registered, memory_order_seq_cst);
    uint64_t started = m.fired + m.timed_out + m.aborted;
    uint64_t resolved = started + m.cancelled;
    m.pending = m.registered > resolved ? m.registered - resolved : 0;
    m.running = started > completed ? started - completed : 0;
    *out_metrics = m;
    return ORDO_OK;
}
