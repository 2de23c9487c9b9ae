/* The device's free thread (ordo__cuda_defer_free), and the drains some
 * frees need first.
 *
 * cuMemFree and cuMemFreeHost may wait for the whole device, and the
 * device may wait for the host (a stream at a cuStreamWaitValue64 of a
 * program's): the threads that observe completions and run held work must
 * never block behind them, so frees run here, in the order they came.
 *
 * A free whose stream failed or was destroyed short of it must first wait
 * for everything the device was given before (work of that stream, or of
 * one it waited for, may still use the memory): a drain, cuCtxSynchronize.
 * The driver refuses to synchronize a context while any stream of it
 * captures, in any mode and from any thread, and the refusal breaks the
 * capture. Two kinds of capture can be in the way:
 *
 *   - ordo's own, while a graph is lowered (cuda_graph.c): the capture
 *     lock keeps drains and lowerings apart. A lowering holds it shared;
 *     a drain holds it alone for the whole cuCtxSynchronize. The driver
 *     checks for captures when the call is made, so a lowering that finds
 *     a drain holding the lock past LOWERING_WAIT_NS (the device is busy
 *     with work the host may hold back) goes ahead without it: the drain
 *     is long past its check by then. One lock for the process: every
 *     ordo device opened on a GPU (shared and owned runtimes) uses the
 *     same primary context.
 *   - the program's, on threads of its own: ordo cannot see them. A drain
 *     the driver refuses (having broken that capture) parks its free: the
 *     memory is not given back, the frees queued behind go on, and one
 *     drain for all the parked frees is tried again after a pause that
 *     doubles from DRAIN_RETRY_FIRST_NS to DRAIN_RETRY_MAX_NS (each try
 *     breaks whatever capture runs at that moment, so tries are few). A
 *     free that needs a drain while others are parked joins them without
 *     a try of its own. When the device closes, a last drain is tried;
 *     if refused too, the parked memory is left to the context (leaked if
 *     the context outlives the device), never given back undrained.
 *
 * This thread runs no program code and puts itself in the RELAXED capture
 * interaction mode: its cuMemFree and cuMemFreeHost are not refused
 * during a program's GLOBAL capture (and do not break it). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "backends/cuda/cuda_internal.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/parker.h"
#include "ordo/time.h"

#define LOWERING_WAIT_NS 20000000ull     /* 20 ms */
#define DRAIN_RETRY_FIRST_NS 10000000ull /* 10 ms */
#define DRAIN_RETRY_MAX_NS 1000000000ull /* 1 s */

static pthread_rwlock_t capture_lock = PTHREAD_RWLOCK_INITIALIZER;

int ordo__cuda_lowering_enter(void) {
    if (pthread_rwlock_tryrdlock(&capture_lock) == 0) {
        return 1;
    }
    /* The wall clock's: what pthread_rwlock_timedrdlock takes (a jump of
     * the clock only moves this bound). */
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    uint64_t until = (uint64_t)at.tv_nsec + LOWERING_WAIT_NS;
    at.tv_sec += (time_t)(until / 1000000000ull);
    at.tv_nsec = (long)(until % 1000000000ull);
    return pthread_rwlock_timedrdlock(&capture_lock, &at) == 0;
}

void ordo__cuda_lowering_exit(int held) {
    if (held) {
        pthread_rwlock_unlock(&capture_lock);
    }
}

/* Waits until the device has run everything issued before; false if the
 * driver refused for a capture. On a thread that captures itself (a
 * launch function being lowered, its free made here because the queue
 * could not take it) the lock is the thread's already, shared. */
static int drain(cuda_device_t *d) {
    const int capturing_here = ordo__cuda_capturing != NULL;
    if (!capturing_here && pthread_rwlock_trywrlock(&capture_lock) != 0) {
        atomic_fetch_add_explicit(&d->drains_deferred, 1, memory_order_release);
        pthread_rwlock_wrlock(&capture_lock);
    }
    CUresult r = d->cu->CtxSynchronize();
    if (!capturing_here) {
        pthread_rwlock_unlock(&capture_lock);
    }
    if (ordo__cuda_capture_conflict(r)) {
        atomic_fetch_add_explicit(&d->drains_refused, 1, memory_order_release);
        return 0;
    }
    return 1;
}

static void give_back(cuda_device_t *d, const cuda_free_t *f) {
    if (ordo__cuda_enter(d, "ordo_mem_deallocate") != ORDO_OK) {
        return;
    }
    if (f->host_ptr) {
        (void)d->cu->MemFreeHost(f->host_ptr);
    } else {
        (void)d->cu->MemFree(f->device_ptr);
    }
}

static void free_record_done(cuda_device_t *d, cuda_free_t *f) {
    ordo__dealloc(f, sizeof *f, 0);
    atomic_fetch_add_explicit(&d->frees_done, 1, memory_order_release);
}

/* The parked frees (this thread's own list): given back after a drain
 * that went through, or, when give is false, only their records freed. */
static void parked_release(cuda_device_t *d, cuda_free_t **parked, int give) {
    while (*parked) {
        cuda_free_t *f = *parked;
        *parked = f->next;
        if (give) {
            give_back(d, f);
        }
        atomic_fetch_sub_explicit(&d->drains_parked, 1, memory_order_release);
        free_record_done(d, f);
    }
}

static void *free_main(void *arg) {
    cuda_device_t *d = arg;
    ordo__cuda_relax_captures(d);
    (void)ordo__cuda_enter(d, "the CUDA free thread");
    cuda_free_t *parked = NULL;
    uint64_t retry_ns = 0;
    uint64_t pause_ns = DRAIN_RETRY_FIRST_NS;
    pthread_mutex_lock(&d->free_lock);
    for (;;) {
        while (!d->free_head && !d->free_stop && (!parked || ordo_time_now_ns() < retry_ns)) {
            /* Read under the lock, so before any change it misses. */
            ordo_park_key_t key = ordo__parker_prepare(&d->free_parker);
            pthread_mutex_unlock(&d->free_lock);
            (void)ordo__parker_park(&d->free_parker, key, ORDO_PARK_ANY,
                                    parked ? retry_ns : ORDO_DEADLINE_NEVER);
            pthread_mutex_lock(&d->free_lock);
        }
        cuda_free_t *f = d->free_head;
        const int stopping = d->free_stop;
        if (f) {
            d->free_head = f->next;
            if (!d->free_head) {
                d->free_tail = &d->free_head;
            }
        }
        pthread_mutex_unlock(&d->free_lock);
        if (f) {
            atomic_fetch_add_explicit(&d->frees_begun, 1, memory_order_release);
            if (f->synchronize_first && (parked || !drain(d))) {
                f->next = parked;
                parked = f;
                atomic_fetch_add_explicit(&d->drains_parked, 1, memory_order_release);
                if (!retry_ns) {
                    retry_ns = ordo_time_now_ns() + pause_ns;
                }
            } else {
                give_back(d, f);
                free_record_done(d, f);
            }
        } else if (parked) {
            /* The retry is due, or the device closes: one drain for all. */
            int drained = drain(d);
            if (drained || stopping) {
                parked_release(d, &parked, drained);
                retry_ns = 0;
                pause_ns = DRAIN_RETRY_FIRST_NS;
            } else {
                pause_ns = pause_ns * 2 < DRAIN_RETRY_MAX_NS ? pause_ns * 2 : DRAIN_RETRY_MAX_NS;
                retry_ns = ordo_time_now_ns() + pause_ns;
            }
        } else if (stopping) {
            break; /* stopped, and every queued free done */
        }
        pthread_mutex_lock(&d->free_lock);
    }
    return NULL;
}

ordo_status_t ordo__cuda_free_thread_start(cuda_device_t *d, const char *api) {
    if (pthread_create(&d->free_thread, NULL, free_main, d) != 0) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot start the device's free thread");
    }
    d->free_started = 1;
    return ORDO_OK;
}

void ordo__cuda_defer_free(cuda_device_t *d, CUdeviceptr device_ptr, void *host_ptr,
                           int synchronize_first) {
    cuda_free_t local = {NULL, device_ptr, host_ptr, synchronize_first};
    cuda_free_t *f = ordo__alloc(sizeof *f, 0);
    int queued = 0;
    if (f) {
        *f = local;
        pthread_mutex_lock(&d->free_lock);
        if (d->free_started && !d->free_stop) {
            *d->free_tail = f;
            d->free_tail = &f->next;
            atomic_fetch_add_explicit(&d->frees_queued, 1, memory_order_relaxed);
            ordo__parker_unpark(&d->free_parker, ORDO_PARK_ANY, 1);
            queued = 1;
        }
        pthread_mutex_unlock(&d->free_lock);
    }
    if (!queued) {
        /* Freed here (it may block: better than a leak), unless a drain it
         * needs is refused: then left to the context. */
        if (f) {
            ordo__dealloc(f, sizeof *f, 0);
        }
        if (!local.synchronize_first ||
            (ordo__cuda_enter(d, "ordo_mem_deallocate") == ORDO_OK && drain(d))) {
            give_back(d, &local);
        }
    }
}

void ordo__cuda_free_thread_stop(cuda_device_t *d) {
    if (!d->free_started) {
        return;
    }
    pthread_mutex_lock(&d->free_lock);
    d->free_stop = 1;
    ordo__parker_unpark(&d->free_parker, ORDO_PARK_ANY, 1);
    pthread_mutex_unlock(&d->free_lock);
    pthread_join(d->free_thread, NULL);
    d->free_started = 0;
}

int ordo__cuda_drain_for_release(cuda_device_t *d) {
    return drain(d);
}
