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
 *   - ordo's own, while a graph is lowered (cuda_graph.c). The GPU's
 *     capture gate keeps them apart: a drain waits until no lowering is
 *     under way, and a lowering waits for the drains under way (and
 *     waiting) to end, but for LOWERING_WAIT_NS at most: a drain may wait
 *     on work the host holds back (a stream at a gate), perhaps for the
 *     lowering thread itself to open it. This assumes the driver checks
 *     for captures when the synchronize is called (undocumented; the
 *     stand-in does so), so that a drain already in its synchronize does
 *     not break a capture that begins after; a drain that comes later
 *     waits for the lowering, whether the lowering went ahead in time or
 *     not. Drains do not wait for each other. One gate a GPU (by
 *     ordinal): every ordo device opened on it (shared and owned
 *     runtimes) uses its primary context.
 *   - the program's, on threads of its own: ordo cannot see them. A drain
 *     the driver refuses (having broken that capture) parks its free: the
 *     memory is not given back, the frees queued behind go on, and one
 *     drain for all the parked frees is tried again after a pause that
 *     doubles from DRAIN_RETRY_FIRST_NS to DRAIN_RETRY_MAX_NS (each try
 *     breaks whatever capture runs at that moment, so tries are few). A
 *     free that needs a drain while others are parked joins them without
 *     a try of its own. When the device closes, a last drain is tried;
 *     if refused too, the parked memory is left to the context (freed with
 *     it, leaked if the context outlives the device), never given back
 *     undrained.
 *
 * A drain stops waiting for lowerings once the free thread is told to
 * stop (a device release, perhaps from the lowering thread itself): it is
 * then not made, and its memory is left to the context, as is that of a
 * drain at the device's release while a lowering is under way on the GPU.
 * At the process's exit no drain and no free is made any more (one may
 * wait on a stream the host will never release; the memory goes with the
 * process); one already in the driver is still waited for. While a drain waits for lowerings, the
 * frees behind it wait too; new lowerings hold back (20 ms at most) for it.
 *
 * One window remains: a drain counted in, then descheduled for longer
 * than a waiting lowering's 20 ms before its synchronize, breaks that
 * lowering's capture (under ORDO_GRAPH_NATIVE_AUTO the graph is then
 * replayed op by op; under REQUIRE its recording fails).
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
#define DRAIN_STOP_LOOK_NS 10000000ull   /* 10 ms: how often a waiting drain looks for a stop */
#define DRAIN_RETRY_FIRST_NS 10000000ull /* 10 ms */
#define DRAIN_RETRY_MAX_NS 1000000000ull /* 1 s */

typedef struct capture_gate {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* CLOCK_MONOTONIC; broadcast when a count falls */
    int lowerings;          /* lowerings under way */
    int drains;             /* drains in their synchronize */
    int drains_waiting;     /* drains waiting for lowerings to end */
} capture_gate_t;

#define CAPTURE_GATES 64 /* ordinals beyond share gates: coarser, still safe */
static capture_gate_t gates[CAPTURE_GATES];
static pthread_once_t gates_once = PTHREAD_ONCE_INIT;

static void gates_init(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (int i = 0; i < CAPTURE_GATES; ++i) {
        pthread_mutex_init(&gates[i].lock, NULL);
        pthread_cond_init(&gates[i].changed, &attr);
    }
    pthread_condattr_destroy(&attr);
}

static capture_gate_t *gate_of(const cuda_device_t *d) {
    pthread_once(&gates_once, gates_init);
    return &gates[(unsigned)d->ordinal % CAPTURE_GATES];
}

/* Waits on the gate's condition until ns (ordo_time_now_ns's clock, which
 * is CLOCK_MONOTONIC). */
static void gate_wait_until(capture_gate_t *g, uint64_t ns) {
    struct timespec at = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    (void)pthread_cond_timedwait(&g->changed, &g->lock, &at);
}

void ordo__cuda_lowering_enter(const cuda_device_t *d) {
    capture_gate_t *g = gate_of(d);
    const uint64_t until = ordo_time_now_ns() + LOWERING_WAIT_NS;
    pthread_mutex_lock(&g->lock);
    while ((g->drains > 0 || g->drains_waiting > 0) && ordo_time_now_ns() < until) {
        gate_wait_until(g, until);
    }
    ++g->lowerings;
    pthread_mutex_unlock(&g->lock);
}

void ordo__cuda_lowering_exit(const cuda_device_t *d) {
    capture_gate_t *g = gate_of(d);
    pthread_mutex_lock(&g->lock);
    if (--g->lowerings == 0) {
        pthread_cond_broadcast(&g->changed);
    }
    pthread_mutex_unlock(&g->lock);
}

static int free_stopping(cuda_device_t *d) {
    pthread_mutex_lock(&d->free_lock);
    int stopping = d->free_stop;
    pthread_mutex_unlock(&d->free_lock);
    return stopping;
}

/* Waits until the device has run everything issued before; false if it
 * could not: the driver refused for a capture, or the calling thread
 * captures itself (a launch function being lowered, freeing memory here
 * because the queue could not take it: a synchronize would break its own
 * capture). The context is current. */
static int drain(cuda_device_t *d) {
    if (ordo__cuda_capturing || atomic_load_explicit(&d->exiting, memory_order_acquire)) {
        return 0;
    }
    capture_gate_t *g = gate_of(d);
    pthread_mutex_lock(&g->lock);
    if (g->lowerings > 0) {
        atomic_fetch_add_explicit(&d->drains_deferred, 1, memory_order_release);
        ++g->drains_waiting;
        while (g->lowerings > 0 && !free_stopping(d)) {
            gate_wait_until(g, ordo_time_now_ns() + DRAIN_STOP_LOOK_NS);
        }
        --g->drains_waiting;
        if (g->lowerings > 0 || atomic_load_explicit(&d->exiting, memory_order_acquire)) {
            /* Stopping, with a lowering still under way (another ordo
             * device's on this GPU, or one whose thread released this
             * device or exits): no synchronize, which would break it. Or
             * the process exits meanwhile. */
            pthread_cond_broadcast(&g->changed);
            pthread_mutex_unlock(&g->lock);
            return 0;
        }
    }
    ++g->drains;
    pthread_mutex_unlock(&g->lock);
    CUresult r = d->cu->CtxSynchronize();
    pthread_mutex_lock(&g->lock);
    --g->drains;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
    if (ordo__cuda_capture_conflict(r)) {
        atomic_fetch_add_explicit(&d->drains_refused, 1, memory_order_release);
        return 0;
    }
    return 1;
}

static void give_back(cuda_device_t *d, const cuda_free_t *f) {
    /* At exit the memory goes with the process: a free may wait for the
     * whole device, perhaps for a stream the host never releases. */
    if (atomic_load_explicit(&d->exiting, memory_order_acquire) ||
        ordo__cuda_enter(d, "ordo_mem_deallocate") != ORDO_OK) {
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
        }
        if (parked && ((stopping && !f) || ordo_time_now_ns() >= retry_ns)) {
            /* The retry is due (frees still queued do not put it off), or
             * the device closes and the queue is done: one drain for all. */
            int drained = drain(d);
            if (drained || (stopping && !f)) {
                parked_release(d, &parked, drained);
                retry_ns = 0;
                pause_ns = DRAIN_RETRY_FIRST_NS;
            } else {
                pause_ns = pause_ns * 2 < DRAIN_RETRY_MAX_NS ? pause_ns * 2 : DRAIN_RETRY_MAX_NS;
                retry_ns = ordo_time_now_ns() + pause_ns;
            }
        } else if (stopping && !f && !parked) {
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
        /* Freed here (it may block: better than a leak), in the RELAXED
         * mode as on the free thread; a drain it needs that cannot be had
         * leaves the memory to the context. */
        if (f) {
            ordo__dealloc(f, sizeof *f, 0);
        }
        if (ordo__cuda_enter(d, "ordo_mem_deallocate") != ORDO_OK) {
            return;
        }
        CUstreamCaptureMode mode = ordo__cuda_relax_captures_for_now(d);
        if (!local.synchronize_first || drain(d)) {
            give_back(d, &local);
        }
        ordo__cuda_restore_captures(d, mode);
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
    pthread_mutex_lock(&d->free_lock);
    d->free_started = 0;
    pthread_mutex_unlock(&d->free_lock);
}

int ordo__cuda_drain_for_release(cuda_device_t *d) {
    CUstreamCaptureMode mode = ordo__cuda_relax_captures_for_now(d);
    int drained = drain(d);
    ordo__cuda_restore_captures(d, mode);
    return drained;
}
