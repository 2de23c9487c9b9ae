/* Internal: the CUDA backend's devices and streams.
 *
 * A device is the device's primary context (retained while the ordo device
 * lives, made current on every thread that calls into the backend), a pool
 * of CUDA events for stream points (timing disabled), and a completion
 * watcher (hal/watcher.h) that observes those points and turns them into
 * signal values. A stream is a non-blocking CUstream of the requested
 * priority, a timeline in the watcher and a host lane (hal/lane.h) for the
 * operations that cannot go to the device yet. See docs/CUDA.md.
 *
 * Locks (after those of hal/hal.h): a stream's lane lock before its
 * timeline lock and the watcher's registry lock (a direct issue pushes a
 * watch, and a device wait looks a point up, under the lane lock);
 * `aligned_lock` (also the orphaned words') is a leaf. */
#ifndef ORDO_BACKENDS_CUDA_INTERNAL_H
#define ORDO_BACKENDS_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backends/cuda/cuda_api.h"
#include "base/parker.h"
#include "hal/event_pool.h"
#include "hal/hal.h"
#include "hal/lane.h"
#include "hal/watcher.h"
#include "ordo/cuda.h"

/* How long destroying a stream waits for the device to pass the points it
 * has already issued before it reports the rest as cancelled. */
#define CUDA_DESTROY_DRAIN_MS 2000u

/* An allocation aligned beyond what cuMemAlloc guarantees: the base to
 * free for an aligned pointer handed out. */
typedef struct cuda_aligned {
    struct cuda_aligned *next;
    CUdeviceptr base;
    CUdeviceptr aligned;
} cuda_aligned_t;

/* A stream's progress word (host memory the device writes) that its
 * stream was destroyed before the device's last write to it: freed when
 * the device is, after the context has drained. */
typedef struct cuda_orphan_word {
    struct cuda_orphan_word *next;
    void *word;
} cuda_orphan_word_t;

/* Memory given back to the driver on the device's free thread: cuMemFree
 * and cuMemFreeHost (and cuCtxSynchronize) may wait for the whole device,
 * which may wait for the host (a stream at a cuStreamWaitValue64 of a
 * user's): the threads that observe completions and run held work must
 * never block behind it. */
typedef struct cuda_free {
    struct cuda_free *next;
    CUdeviceptr device_ptr; /* cuMemFree, or 0 */
    void *host_ptr;         /* cuMemFreeHost, or NULL */
    int synchronize_first;  /* cuCtxSynchronize before the free */
} cuda_free_t;

typedef struct cuda_device {
    ordo_device_t *shell;
    const cuda_api_t *cu;
    int ordinal;
    CUdevice dev;
    CUcontext ctx;
    int memops;         /* 64-bit stream memory operations (v2) are supported */
    int observe_memops; /* points are observed through a word the device writes */
    int memory_pools;   /* cuMemAllocAsync is supported */
    event_pool_t *points;
    hal_watcher_t watcher;
    int watcher_started;
    pthread_mutex_t aligned_lock;
    cuda_aligned_t *aligned;     /* under aligned_lock */
    cuda_orphan_word_t *orphans; /* under aligned_lock */
    /* The free thread and its queue (ordo__cuda_defer_free). */
    pthread_mutex_t free_lock;
    ordo_parker_t free_parker; /* the thread sleeps on it, awaiting frees */
    cuda_free_t *free_head;    /* under free_lock, oldest first */
    cuda_free_t **free_tail;
    int free_stop;    /* under free_lock */
    int free_started; /* the thread runs */
    pthread_t free_thread;
    /* Frees handed to the thread, taken up by it (a driver call under way
     * or done), and done: observable, for tests of a free that waits for
     * the whole device (a free still under way from earlier work holds up
     * every later one). */
    _Atomic uint64_t frees_queued;
    _Atomic uint64_t frees_begun;
    _Atomic uint64_t frees_done;
    /* Drains (cuda_free.c): that waited for a lowering to end, that the
     * driver refused for a capture of the program's, and frees parked
     * meanwhile (their memory not given back yet). Observable, for tests. */
    _Atomic int exiting; /* the process exits: no more drains */
    _Atomic uint64_t drains_deferred;
    _Atomic uint64_t drains_refused;
    _Atomic uint64_t drains_parked;
    /* Native graphs lowered again (cuda_graph.c): updated in place, and
     * instantiated anew. Observable, for tests. */
    _Atomic uint64_t graphs_updated;
    _Atomic uint64_t graphs_reinstantiated;
    struct cuda_device *next_live; /* the live devices, stopped at exit */
} cuda_device_t;

typedef struct cuda_stream {
    ordo_stream_t *shell;
    cuda_device_t *dev;
    CUstream cu;
    hal_timeline_t timeline;
    hal_lane_t lane;
    int timeline_ready;
    int lane_ready;
    /* Under the lane's lock: the last point number handed out. */
    uint64_t reserved;
    /* Host-task chaining: the last op the lane ran was a host task, nothing
     * went to the device or the timeline since and the lane has not emptied
     * since
     * (chain_idle is its idle count then), so the next host task needs no
     * point of its own. Lane thread, or a direct issue (the lane idle). */
    int chain;
    uint64_t chain_idle;
    /* With observe_memops: the word the device writes each point's number
     * to (host memory mapped for the device), and its device address. */
    _Atomic uint64_t *word; /* read with acquire: the device's write is fenced */
    CUdeviceptr word_device;
    uint64_t word_last; /* the last value a write to it was enqueued with (as `reserved`) */
    unsigned polls;     /* watcher thread only */
} cuda_stream_t;

/* Gives device memory (device_ptr) or page-locked host memory (host_ptr)
 * back to the driver on the device's free thread (cuda_free.c), after a
 * drain of the context if synchronize_first; does not wait for the free.
 * Where the queue cannot take it (out of memory, or the thread is gone),
 * frees it on the calling thread, which may then wait for the device. */
void ordo__cuda_defer_free(cuda_device_t *d, CUdeviceptr device_ptr, void *host_ptr,
                           int synchronize_first);

/* Starts and stops the free thread (the stop runs every queued free). */
ordo_status_t ordo__cuda_free_thread_start(cuda_device_t *d, const char *api);
void ordo__cuda_free_thread_stop(cuda_device_t *d);

/* A drain of the context at the device's release (the context current):
 * false if the driver refused it for a capture of the program's. */
int ordo__cuda_drain_for_release(cuda_device_t *d);

/* Around a graph's lowering (its captures): drains of the context wait
 * for it to end (cuda_free.c). enter waits for drains under way, for a
 * bound. */
void ordo__cuda_lowering_enter(const cuda_device_t *d);
void ordo__cuda_lowering_exit(const cuda_device_t *d);

/* Makes the device's primary context current on the calling thread. */
ordo_status_t ordo__cuda_enter(const cuda_device_t *d, const char *api);

/* Capture interaction modes. While a thread of the program captures a
 * stream in GLOBAL mode (PyTorch's default), a potentially unsafe call
 * (cuEventQuery, cuMemFree and the like) from a thread in the default
 * mode, GLOBAL, is refused, and the refusal invalidates that capture. ordo
 * makes such calls of its own in the RELAXED mode, in which they are
 * neither refused nor break a capture; ordo never records an event or
 * frees memory that a capture holds. Program code on ordo's threads (host
 * tasks, enqueue functions, callbacks) keeps the default mode.
 *
 * relax_captures: for good, on a thread of ordo's that runs no program
 * code (the free thread). relax_captures_for_now: for one call, returning
 * the thread's mode to give back to restore_captures. Each is a no-op on a
 * driver without stream capture. */
void ordo__cuda_relax_captures(const cuda_device_t *d);
CUstreamCaptureMode ordo__cuda_relax_captures_for_now(const cuda_device_t *d);
void ordo__cuda_restore_captures(const cuda_device_t *d, CUstreamCaptureMode mode);

/* Whether a driver result says a stream capture (another thread's, or the
 * calling thread's) stood in the way of the call: not a device failure. */
int ordo__cuda_capture_conflict(CUresult result);

/* The stream's CUDA device, or an error when stream is not a CUDA stream. */
ordo_status_t ordo__cuda_stream_of(ordo_stream_t *stream, cuda_stream_t **out_stream,
                                   const char *api);
ordo_status_t ordo__cuda_device_of(ordo_device_t *device, cuda_device_t **out_device,
                                   const char *api);

/* Enqueues fn(ctx, stream) in stream order: now (on the calling thread)
 * when the stream holds nothing, else on the lane once the held ops before
 * it have been issued. A failure of fn fails the stream at that point. */
ordo_status_t ordo__cuda_stream_enqueue(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                        const char *api);

/* ordo__cuda_stream_enqueue, but even on a failed stream, and run also when the
 * stream is destroyed before the lane reaches it (for frees). */
ordo_status_t ordo__cuda_stream_enqueue_always(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                               const char *api);

/* A held enqueue allocated ahead, on s, for an enqueue that must not fail
 * for want of memory when it is made (a graph's destroy); NULL, with a
 * message, without memory. unreserve gives back one never used. */
void *ordo__cuda_stream_reserve(cuda_stream_t *s, const char *api);
void ordo__cuda_stream_unreserve(void *reserved);

/* ordo__cuda_stream_enqueue_always with a reservation of s, which it takes
 * in every case. Fails only where the lane's thread cannot be started, or
 * the stream holds nothing and the device's context cannot be made current;
 * fn then does not run, and nothing the caller queued is held on the lane. */
ordo_status_t ordo__cuda_stream_enqueue_reserved(cuda_stream_t *s, void *reserved,
                                                 ordo_cuda_enqueue_fn fn, void *ctx,
                                                 const char *api);

/* The backend entry points of cuda_stream.c. */
ordo_status_t ordo__cuda_stream_init(ordo_stream_t *stream);
void ordo__cuda_stream_fini(ordo_stream_t *stream);
int ordo__cuda_stream_on_own_thread(const ordo_stream_t *stream);
ordo_status_t ordo__cuda_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx);
ordo_status_t ordo__cuda_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal,
                                       uint64_t value);
ordo_status_t ordo__cuda_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
ordo_status_t ordo__cuda_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline);
ordo_status_t ordo__cuda_stream_status(ordo_stream_t *stream);
ordo_status_t ordo__cuda_stream_failure(const ordo_stream_t *stream);
ordo_status_t ordo__cuda_stream_event_record(ordo_event_t *event, ordo_stream_t *stream);
void ordo__cuda_stream_snapshot(ordo_stream_t *stream, hal_stream_snapshot_t *snapshot);
/* The lane holds anything (queued or running); for tests. */
int ordo__cuda_stream_holding(ordo_stream_t *stream);
int ordo__cuda_stream_waits_unmet(ordo_stream_t *stream);

/* Runs fn(ctx, stream's handle) on the calling thread, in stream order, if
 * the stream holds nothing (no op queued or running on its lane, no direct
 * issue under way), and sets *out_ran; meanwhile other submissions queue
 * behind it. Otherwise runs nothing. fn's status is returned as it is: it
 * does not fail the stream. The caller has entered the device. */
ordo_status_t ordo__cuda_stream_run_if_idle(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                            int *out_ran);

/* Native graphs (cuda_graph.c): hal_backend's graph_make, graph_remake,
 * graph_launch and graph_free. */
ordo_status_t ordo__cuda_graph_make(ordo_stream_t *stream, const hal_graph_node_t *nodes,
                                    uint32_t count, void **out_native, const char *api);
ordo_status_t ordo__cuda_graph_remake(void *native, const hal_graph_node_t *nodes, uint32_t count,
                                      void **out_native, const char *api);
ordo_status_t ordo__cuda_graph_launch(void *native);
void ordo__cuda_graph_free(void *native, int launched);

/* The capture of a launch function's work into a CUDA graph under way on
 * this thread, or NULL (nearly always). */
typedef struct cuda_capture cuda_capture_t;
extern _Thread_local cuda_capture_t *ordo__cuda_capturing;

/* While this thread captures for s: the capture stream its work goes to
 * instead of s->cu. NULL otherwise. */
CUstream ordo__cuda_capture_stream(const cuda_stream_t *s);

/* Refuses api, a stream operation of this backend other than a captured
 * stream's device work, on a thread that captures (ORDO_ERR_UNSUPPORTED);
 * the capture then fails with it. Call only when ordo__cuda_capturing. */
ordo_status_t ordo__cuda_capture_refuse(const char *api);

/* The watcher's view of points (cuda_stream.c). */
extern const hal_watcher_ops_t ordo__cuda_watcher_ops;

#endif
