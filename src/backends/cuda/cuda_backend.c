/* The CUDA backend: devices "cuda:N" on the driver API, loaded at run time
 * (cuda_api.c); streams in cuda_stream.c; its memory resources are the
 * memory layer's (src/mem/cuda_memory.c). See docs/CUDA.md. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "base/alloc.h"
#include "base/error.h"

/* Devices beyond this are not listed (the HAL refuses ordinals >= 64). */
#define CUDA_MAX_DEVICES 64

/* The defaults of the point pool: points are acquired at every signal,
 * record and host task, so the pool starts warm and never caps (a capped
 * pool would create events one by one past its maximum). */
#define POINT_POOL_INITIAL 64
#define POINT_POOL_GROWTH 64

/* Bumped whenever a device runtime is built: a primary context released by
 * its last runtime and retained again keeps its handle, so a thread that
 * still names it as current binds it again rather than trusting the old
 * binding. */
static _Atomic uint64_t context_epoch = 1;
static _Thread_local uint64_t thread_epoch;

ordo_status_t ordo__cuda_enter(const cuda_device_t *d, const char *api) {
    uint64_t epoch = atomic_load_explicit(&context_epoch, memory_order_relaxed);
    CUcontext current = NULL;
    if (thread_epoch == epoch && d->cu->CtxGetCurrent(&current) == CUDA_SUCCESS &&
        current == d->ctx) {
        return ORDO_OK;
    }
    CUresult r = d->cu->CtxSetCurrent(d->ctx);
    if (r != CUDA_SUCCESS) {
        return ordo__cuda_error(r, api, "cuCtxSetCurrent");
    }
    thread_epoch = epoch;
    return ORDO_OK;
}

void ordo__cuda_relax_captures(const cuda_device_t *d) {
    (void)ordo__cuda_relax_captures_for_now(d);
}

CUstreamCaptureMode ordo__cuda_relax_captures_for_now(const cuda_device_t *d) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (d->cu->ThreadExchangeStreamCaptureMode &&
        d->cu->ThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) {
        mode = CU_STREAM_CAPTURE_MODE_RELAXED; /* unchanged: nothing to give back */
    }
    return mode;
}

void ordo__cuda_restore_captures(const cuda_device_t *d, CUstreamCaptureMode mode) {
    if (d->cu->ThreadExchangeStreamCaptureMode && mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        (void)d->cu->ThreadExchangeStreamCaptureMode(&mode);
    }
}

int ordo__cuda_capture_conflict(CUresult result) {
    return result == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
           result == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
           result == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

/* ---- availability and enumeration ---------------------------------------- */

static int cuda_available(char *reason, size_t reason_capacity) {
    const cuda_api_t *cu = ordo__cuda_api_load(reason, reason_capacity);
    if (cu && reason_capacity) {
        reason[0] = '\0';
    }
    return cu != NULL;
}

static size_t cuda_device_count(void) {
    const cuda_api_t *cu = ordo__cuda_api_load(NULL, 0);
    int count = 0;
    if (!cu || cu->DeviceGetCount(&count) != CUDA_SUCCESS || count < 0) {
        return 0;
    }
    return count > CUDA_MAX_DEVICES ? CUDA_MAX_DEVICES : (size_t)count;
}

/* Stream priorities are a property of a context: read once per device from
 * its primary context (retained just for the query if no device is open),
 * without disturbing the calling thread's current context. */
static pthread_mutex_t priorities_lock = PTHREAD_MUTEX_INITIALIZER;
static int priorities_known[CUDA_MAX_DEVICES];
static int priorities_least[CUDA_MAX_DEVICES];
static int priorities_greatest[CUDA_MAX_DEVICES];

static void priority_range(const cuda_api_t *cu, int ordinal, CUdevice dev, int *out_least,
                           int *out_greatest) {
    pthread_mutex_lock(&priorities_lock);
    if (!priorities_known[ordinal]) {
        int least = 0;
        int greatest = 0;
        CUcontext ctx = NULL;
        if (cu->DevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) {
            if (cu->CtxPushCurrent(ctx) == CUDA_SUCCESS) {
                if (cu->CtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS) {
                    least = greatest = 0;
                }
                CUcontext popped = NULL;
                (void)cu->CtxPopCurrent(&popped);
            }
            (void)cu->DevicePrimaryCtxRelease(dev);
        }
        priorities_least[ordinal] = least;
        priorities_greatest[ordinal] = greatest <= least ? greatest : least;
        priorities_known[ordinal] = 1;
    }
    *out_least = priorities_least[ordinal];
    *out_greatest = priorities_greatest[ordinal];
    pthread_mutex_unlock(&priorities_lock);
}

static int attribute(const cuda_api_t *cu, CUdevice dev, CUdevice_attribute which) {
    int value = 0;
    return cu->DeviceGetAttribute(&value, which, dev) == CUDA_SUCCESS ? value : 0;
}

static void cuda_device_info(int ordinal, ordo_device_info_t *out_info) {
    memset(out_info, 0, sizeof *out_info);
    snprintf(out_info->name, sizeof out_info->name, "cuda:%d", ordinal);
    snprintf(out_info->backend, sizeof out_info->backend, "cuda");
    out_info->ordinal = ordinal;
    out_info->timing_events = 1;
    out_info->device_memory = 1;
    const cuda_api_t *cu = ordo__cuda_api();
    CUdevice dev = 0;
    if (!cu || ordinal < 0 || ordinal >= CUDA_MAX_DEVICES ||
        cu->DeviceGet(&dev, ordinal) != CUDA_SUCCESS) {
        return;
    }
    priority_range(cu, ordinal, dev, &out_info->priority_least, &out_info->priority_greatest);
    /* The device can write and wait timeline values itself: the v2 stream
     * memory operations, 64-bit, are there (and the driver exports them). */
    out_info->native_timeline =
        cu->StreamWaitValue64 && cu->StreamWriteValue64 &&
        attribute(cu, dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
}

/* ---- the point pool ------------------------------------------------------- */

static ordo_status_t point_create(void *user, ordo_event_kind_t kind, void **out_event) {
    (void)kind;
    cuda_device_t *d = user;
    CUevent event = NULL;
    CUresult r = d->cu->EventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        return ordo__cuda_error(r, "ordo_stream_signal", "cuEventCreate");
    }
    *out_event = event;
    return ORDO_OK;
}

static void point_destroy(void *user, void *event) {
    cuda_device_t *d = user;
    (void)d->cu->EventDestroy((CUevent)event);
}

/* ---- process exit ---------------------------------------------------------
 *
 * A process may exit with devices still open. The driver is unloaded after
 * the exit handlers run; the completion threads must not call into it
 * while it goes, so an exit handler stops them first (the frees still
 * queued are dropped: cuda_free.c), and a device opened after it ran (by
 * a later exit handler) is stopped as soon as it is made. Nothing of the
 * device is freed: the process is ending. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_device_t *live_devices; /* under live_lock */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exited; /* under live_lock */

static void halt_locked(cuda_device_t *d) {
    ordo__hal_watcher_halt(&d->watcher);
    /* No drain at exit: one may wait on a stream the host will never
     * release. The memory goes with the process. */
    atomic_store_explicit(&d->exiting, 1, memory_order_release);
    ordo__cuda_free_thread_stop(d);
}

static void halt_at_exit(void) {
    pthread_mutex_lock(&live_lock);
    exited = 1;
    for (cuda_device_t *d = live_devices; d; d = d->next_live) {
        halt_locked(d);
    }
    pthread_mutex_unlock(&live_lock);
}

static void register_exit_handler(void) {
    (void)atexit(halt_at_exit);
}

static void live_add(cuda_device_t *d) {
    pthread_once(&exit_once, register_exit_handler);
    pthread_mutex_lock(&live_lock);
    d->next_live = live_devices;
    live_devices = d;
    if (exited) {
        halt_locked(d);
    }
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(cuda_device_t *d) {
    pthread_mutex_lock(&live_lock);
    for (cuda_device_t **link = &live_devices; *link; link = &(*link)->next_live) {
        if (*link == d) {
            *link = d->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

/* ---- devices -------------------------------------------------------------- */

static void device_release_parts(cuda_device_t *d) {
    live_remove(d);
    if (d->watcher_started) {
        ordo__hal_watcher_stop(&d->watcher);
    }
    /* After the watcher: its completions may still queue frees. */
    ordo__cuda_free_thread_stop(d);
    if (d->points) {
        (void)ordo__event_pool_destroy(d->points);
    }
    while (d->aligned) {
        cuda_aligned_t *a = d->aligned;
        d->aligned = a->next;
        ordo__dealloc(a, sizeof *a, 0);
    }
    if (d->orphans) {
        /* Words of streams destroyed with writes to them still pending:
         * free once the context has run everything (or failed); a drain
         * refused for a capture of the program's leaves them to the
         * context. */
        const int drained = ordo__cuda_drain_for_release(d);
        while (d->orphans) {
            cuda_orphan_word_t *o = d->orphans;
            d->orphans = o->next;
            if (drained) {
                (void)d->cu->MemFreeHost(o->word);
            }
            ordo__dealloc(o, sizeof *o, 0);
        }
    }
    pthread_mutex_destroy(&d->aligned_lock);
    pthread_mutex_destroy(&d->free_lock);
    if (d->ctx) {
        (void)d->cu->DevicePrimaryCtxRelease(d->dev);
    }
    ordo__dealloc(d, sizeof *d, 0);
}

/* ORDO_CUDA_POLL_US=MIN,MAX[,IDLE]: the completion thread's poll intervals
 * in microseconds: after progress, at most while a value is waited for,
 * and while none is (docs/CUDA.md); unset, or not two or three numbers
 * with 1 <= MIN <= MAX <= IDLE <= 1000000: the defaults. */
/* Reads a decimal number of 1 to 7 digits at *text (no sign, no space)
 * and moves past it; 0 if there is none. */
static int env_number(const char **text, unsigned long *out) {
    const char *p = *text;
    unsigned long value = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 8) {
        value = value * 10u + (unsigned long)(*p++ - '0');
        ++digits;
    }
    if (digits == 0 || digits > 7) {
        return 0;
    }
    *out = value;
    *text = p;
    return 1;
}

static void watcher_config_from_env(hal_watcher_config_t *out_config) {
    memset(out_config, 0, sizeof *out_config);
    const char *p = getenv("ORDO_CUDA_POLL_US");
    unsigned long lo = 0, hi = 0, idle = 0;
    int ok = p && env_number(&p, &lo) && *p++ == ',' && env_number(&p, &hi);
    if (ok && *p == ',') {
        ++p;
        ok = env_number(&p, &idle) && *p == '\0';
    } else if (ok) {
        ok = *p == '\0';
        idle = hi > 1000ul ? hi : 1000ul; /* the default, or MAX if longer */
    }
    if (ok && lo >= 1 && lo <= hi && hi <= idle && idle <= 1000000ul) {
        out_config->min_poll_ns = (uint64_t)lo * 1000u;
        out_config->max_poll_ns = (uint64_t)hi * 1000u;
        out_config->idle_poll_ns = (uint64_t)idle * 1000u;
    }
}

static ordo_status_t cuda_device_init(ordo_device_t *device) {
    const char *api = device->building_api ? device->building_api : "ordo_device_open";
    const cuda_api_t *cu = ordo__cuda_api();
    if (!cu) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, api, "the CUDA driver is not loaded");
    }
    cuda_device_t *d = ordo__alloc(sizeof *d, 0);
    if (!d) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a CUDA device");
    }
    pthread_mutex_init(&d->aligned_lock, NULL);
    pthread_mutex_init(&d->free_lock, NULL);
    ordo__parker_init(&d->free_parker);
    d->free_tail = &d->free_head;
    d->shell = device;
    d->cu = cu;
    d->ordinal = device->info.ordinal;
    CUresult r = cu->DeviceGet(&d->dev, d->ordinal);
    if (r == CUDA_SUCCESS) {
        r = cu->DevicePrimaryCtxRetain(&d->ctx, d->dev);
        if (r != CUDA_SUCCESS) {
            d->ctx = NULL;
        }
    }
    if (r != CUDA_SUCCESS) {
        ordo_status_t st = ordo__cuda_error(r, api, "cannot open the device's primary context");
        device_release_parts(d);
        return st;
    }
    atomic_fetch_add_explicit(&context_epoch, 1, memory_order_relaxed);
    ordo_status_t st = ordo__cuda_enter(d, api);
    if (st != ORDO_OK) {
        device_release_parts(d);
        return st;
    }
    d->memops = device->info.native_timeline;
    d->memory_pools = cu->MemAllocAsync && cu->MemFreeAsync && cu->DeviceGetDefaultMemPool &&
                      attribute(cu, d->dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    /* Points are CUDA events by default; ORDO_CUDA_POINTS=memops observes
     * them through a word each stream's device work writes instead (both
     * are measured by the cuda_signal_point benchmark; docs/CUDA.md). */
    const char *mode = getenv("ORDO_CUDA_POINTS");
    d->observe_memops = d->memops && mode && strcmp(mode, "memops") == 0;
    event_pool_backend_t backend = {point_create, point_destroy, d};
    ordo_event_pool_config_t config = {POINT_POOL_INITIAL, POINT_POOL_GROWTH, 0};
    char who[128];
    snprintf(who, sizeof who, "%s (the CUDA points' pool)", api);
    st = ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &d->points, who);
    if (st != ORDO_OK) {
        d->points = NULL;
        device_release_parts(d);
        return st;
    }
    hal_watcher_config_t watcher_config;
    watcher_config_from_env(&watcher_config);
    st = ordo__hal_watcher_start(&d->watcher, &ordo__cuda_watcher_ops, d, &watcher_config, api);
    if (st != ORDO_OK) {
        device_release_parts(d);
        return st;
    }
    d->watcher_started = 1;
    st = ordo__cuda_free_thread_start(d, api);
    if (st != ORDO_OK) {
        device_release_parts(d);
        return st;
    }
    live_add(d);
    device->impl = d;
    return ORDO_OK;
}

static void cuda_device_fini(ordo_device_t *device) {
    cuda_device_t *d = device->impl;
    (void)ordo__cuda_enter(d, "ordo_device_release");
    device_release_parts(d);
    device->impl = NULL;
}

ordo_status_t ordo__cuda_device_of(ordo_device_t *device, cuda_device_t **out_device,
                                   const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, api));
    if (device->backend != &ordo__hal_cuda_backend) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%s is not a CUDA device",
                           device->info.name);
    }
    *out_device = device->impl;
    return ORDO_OK;
}

ordo_status_t ordo__cuda_stream_of(ordo_stream_t *stream, cuda_stream_t **out_stream,
                                   const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, api));
    if (stream->device->backend != &ordo__hal_cuda_backend) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "a stream of %s is not a CUDA stream",
                           stream->device->info.name);
    }
    *out_stream = stream->impl;
    return ORDO_OK;
}

/* ---- device memory -------------------------------------------------------- */

/* cuMemAlloc aligns to at least this; more is served by over-allocating. */
#define CUDA_NATURAL_ALIGNMENT 256u

static ordo_status_t cuda_mem_alloc(ordo_device_t *device, size_t bytes, size_t alignment,
                                    void **out_ptr) {
    static const char api[] = "ordo_mem_allocate";
    cuda_device_t *d = device->impl;
    ORDO_RETURN_IF_ERROR(ordo__cuda_enter(d, api));
    size_t extra = alignment > CUDA_NATURAL_ALIGNMENT ? alignment - CUDA_NATURAL_ALIGNMENT : 0;
    cuda_aligned_t *record = NULL;
    if (extra && !(record = ordo__alloc(sizeof *record, 0))) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate an alignment record");
    }
    CUdeviceptr base = 0;
    CUresult r = d->cu->MemAlloc(&base, bytes + extra);
    if (r != CUDA_SUCCESS) {
        if (record) {
            ordo__dealloc(record, sizeof *record, 0);
        }
        char detail[128];
        ordo__cuda_describe(r, detail, sizeof detail);
        return ordo__error(ordo__cuda_status_of(r), api,
                           "%s cannot allocate %zu bytes: cuMemAlloc: %s", device->info.name, bytes,
                           detail);
    }
    CUdeviceptr aligned = base;
    if (record) {
        aligned = (base + alignment - 1) & ~(CUdeviceptr)(alignment - 1);
        record->base = base;
        record->aligned = aligned;
        pthread_mutex_lock(&d->aligned_lock);
        record->next = d->aligned;
        d->aligned = record;
        pthread_mutex_unlock(&d->aligned_lock);
    }
    *out_ptr = (void *)(uintptr_t)aligned;
    return ORDO_OK;
}

/* cuMemFree may synchronise the device, and the device may wait for the
 * host (work a user enqueued at a cuStreamWaitValue64): it runs on the
 * device's free thread, never on the completion thread that calls this
 * when a stream reaches a free. */
static void cuda_mem_free(ordo_device_t *device, void *ptr, size_t bytes) {
    (void)bytes;
    cuda_device_t *d = device->impl;
    CUdeviceptr target = (CUdeviceptr)(uintptr_t)ptr;
    pthread_mutex_lock(&d->aligned_lock);
    for (cuda_aligned_t **link = &d->aligned; *link; link = &(*link)->next) {
        if ((*link)->aligned == target) {
            cuda_aligned_t *a = *link;
            *link = a->next;
            target = a->base;
            ordo__dealloc(a, sizeof *a, 0);
            break;
        }
    }
    pthread_mutex_unlock(&d->aligned_lock);
    ordo__cuda_defer_free(d, target, NULL, 0);
}

/* ---- events --------------------------------------------------------------- */

/* A timing event owns a CUDA event with timing enabled, recorded with each
 * of its records; plain events need none (their points are pooled events
 * of the device). */
static ordo_status_t cuda_event_init(ordo_device_t *device, ordo_event_t *event) {
    static const char api[] = "ordo_event_create";
    event->impl = NULL;
    if (event->kind != ORDO_EVENT_TIMING) {
        return ORDO_OK;
    }
    cuda_device_t *d = device->impl;
    ORDO_RETURN_IF_ERROR(ordo__cuda_enter(d, api));
    CUevent e = NULL;
    CUresult r = d->cu->EventCreate(&e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        return ordo__cuda_error(r, api, "cuEventCreate");
    }
    event->impl = e;
    return ORDO_OK;
}

static void cuda_event_fini(ordo_device_t *device, ordo_event_t *event) {
    if (!event->impl) {
        return;
    }
    cuda_device_t *d = device->impl;
    if (ordo__cuda_enter(d, "ordo_event_destroy") == ORDO_OK) {
        (void)d->cu->EventDestroy((CUevent)event->impl);
    }
    event->impl = NULL;
}

static ordo_status_t cuda_event_elapsed_ns(ordo_event_t *start, ordo_event_t *end,
                                           int64_t *out_ns) {
    static const char api[] = "ordo_event_elapsed_ns";
    cuda_device_t *d = start->device->impl;
    ORDO_RETURN_IF_ERROR(ordo__cuda_enter(d, api));
    float ms = 0.0f;
    CUresult r = d->cu->EventElapsedTime(&ms, (CUevent)start->impl, (CUevent)end->impl);
    if (r != CUDA_SUCCESS) {
        return ordo__cuda_error(r, api, "cuEventElapsedTime");
    }
    *out_ns = (int64_t)((double)ms * 1e6);
    return ORDO_OK;
}

/* ---- the public entry points of ordo/cuda.h -------------------------------- */

ordo_status_t ordo_cuda_stream_handle(ordo_stream_t *stream, struct CUstream_st **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    cuda_stream_t *s = NULL;
    ORDO_RETURN_IF_ERROR(ordo__cuda_stream_of(stream, &s, __func__));
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        /* Inside a captured launch function: its own stream's handle is the
         * capture's; another's would let work escape it (run once, now). */
        CUstream capture = ordo__cuda_capture_stream(s);
        if (!capture) {
            return ordo__cuda_capture_refuse(__func__);
        }
        *out_stream = capture;
        return ORDO_OK;
    }
    *out_stream = s->cu;
    return ORDO_OK;
}

ordo_status_t ordo_cuda_stream_enqueue(ordo_stream_t *stream, ordo_cuda_enqueue_fn fn, void *ctx) {
    cuda_stream_t *s = NULL;
    ORDO_RETURN_IF_ERROR(ordo__cuda_stream_of(stream, &s, __func__));
    if (!fn) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "fn is NULL");
    }
    return ordo__cuda_stream_enqueue(s, fn, ctx, __func__);
}

ordo_status_t ordo_cuda_device_context(ordo_device_t *device, struct CUctx_st **out_context,
                                       int *out_device) {
    if (out_context) {
        *out_context = NULL;
    }
    if (out_device) {
        *out_device = 0;
    }
    cuda_device_t *d = NULL;
    ORDO_RETURN_IF_ERROR(ordo__cuda_device_of(device, &d, __func__));
    if (out_context) {
        *out_context = d->ctx;
    }
    if (out_device) {
        *out_device = (int)d->dev;
    }
    return ORDO_OK;
}

ordo_status_t ordo_cuda_make_current(ordo_device_t *device) {
    cuda_device_t *d = NULL;
    ORDO_RETURN_IF_ERROR(ordo__cuda_device_of(device, &d, __func__));
    return ordo__cuda_enter(d, __func__);
}

const hal_backend_t ordo__hal_cuda_backend = {
    .name = "cuda",
    .available = cuda_available,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .device_init = cuda_device_init,
    .device_fini = cuda_device_fini,
    .stream_init = ordo__cuda_stream_init,
    .stream_fini = ordo__cuda_stream_fini,
    .stream_on_own_thread = ordo__cuda_stream_on_own_thread,
    .host_task = ordo__cuda_stream_host_task,
    .signal = ordo__cuda_stream_signal,
    .wait = ordo__cuda_stream_wait,
    .synchronize = ordo__cuda_stream_synchronize,
    .status = ordo__cuda_stream_status,
    .failure = ordo__cuda_stream_failure,
    .event_record = ordo__cuda_stream_event_record,
    .stream_snapshot = ordo__cuda_stream_snapshot,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .event_init = cuda_event_init,
    .event_fini = cuda_event_fini,
    .event_elapsed_ns = cuda_event_elapsed_ns,
    .stream_waits_unmet = ordo__cuda_stream_waits_unmet,
    .graph_make = ordo__cuda_graph_make,
    .graph_remake = ordo__cuda_graph_remake,
    .graph_launch = ordo__cuda_graph_launch,
    .graph_free = ordo__cuda_graph_free,
};
