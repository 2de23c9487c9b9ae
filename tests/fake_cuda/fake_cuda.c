/* A stand-in for the CUDA driver (libcuda.so.1), for testing the CUDA
 * backend on machines without a GPU. Built only as a test library and
 * found only through LD_LIBRARY_PATH (tests/CMakeLists.txt runs test_cuda
 * and test_conformance against it); the real backend code runs unchanged.
 *
 * One device. Its "device memory" is host memory; each stream is a host
 * thread that runs its commands in order: event records, event waits,
 * the test kernels of tests/cuda_kernels.cu and the demo's kernels of
 * tools/ordo/demo_kernels.cu emulated on the host (by name), asynchronous
 * copies, memsets and frees, and 64-bit stream memory operations. An event completes when its
 * stream runs the record; a wait blocks its stream until the record it names (the latest at the
 * time of the call) completes. The fault kernel sets a sticky error, as a real fault does: every
 * later call returns it and nothing more runs; so does a stream memory operation on an address no
 * live allocation (device or page-locked host memory) covers. A free
 * (cuMemFree, cuMemFreeHost, cuMemFreeAsync) of anything but the start of
 * a live allocation of its kind returns CUDA_ERROR_INVALID_VALUE, as the
 * driver does; so does a second cuMemFreeAsync of one already queued.
 *
 * Refuses what the driver refuses, and behaves as it does where ordo
 * could otherwise get away with something only the stand-in allows:
 * - cuGetProcAddress hands out the ABI of the version asked for (the
 *   prototype of that version): cuCtxSynchronize at 13000 or later is
 *   cuCtxSynchronize_v2, which takes the context to synchronize (a
 *   garbage argument fails CUDA_ERROR_INVALID_CONTEXT); an entry asked for
 *   at a version before it existed is not found;
 * - device and host pointers are different kinds: a copy, memset or free
 *   given a pointer of the other kind (or a range no allocation covers)
 *   returns CUDA_ERROR_INVALID_VALUE. Page-locked memory mapped for the
 *   device is both (its device address is its host address, as with
 *   unified addressing);
 * - cuMemcpyHtoD from pageable memory returns once the data is staged, and
 *   the data lands on the device only after the next command of any stream
 *   has run (or at the next synchronizing call): work not ordered after
 *   the copy sees the old bytes. From page-locked memory it is synchronous;
 * - cuMemFree and cuMemFreeHost first wait for all queued work of the
 *   context (as the driver's implicit synchronization does);
 * - with CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment the streams share
 *   one hardware queue: while a stream waits on a value
 *   (cuStreamWaitValue64), no command enqueued on another stream after
 *   that wait runs;
 * - the device has compute capability 9.0, and cuModuleLoadData accepts a
 *   fat binary only with SASS for 9.x (sm_90 or below of major 9) or PTX
 *   for 9.0 or below (CUDA_ERROR_NO_BINARY_FOR_GPU otherwise,
 *   CUDA_ERROR_INVALID_IMAGE for anything that is not a fat binary, a cubin
 *   or PTX text).
 *
 * Stricter than a real driver where that finds bugs: a call without a
 * current context fails (CUDA_ERROR_INVALID_CONTEXT), a destroyed or
 * foreign handle fails (CUDA_ERROR_INVALID_HANDLE, handles are never
 * reused), and cuStreamWaitEvent on an event never recorded fails
 * (CUDA_ERROR_INVALID_VALUE) instead of silently waiting on nothing. */
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo_kernels.h"

#define LIVE 0x4c495645u /* "LIVE" */
#define FAKE_CC 90       /* the device's compute capability, 9.0 */
#define DEAD 0x44454144u /* "DEAD" */

/* ---- contexts and errors ---------------------------------------------------- */

struct CUctx_st {
    uint32_t magic;
    int refs;
};

static pthread_mutex_t g = PTHREAD_MUTEX_INITIALIZER; /* contexts, events */
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct CUctx_st primary = {DEAD, 0};
static _Atomic int sticky; /* a CUresult once a kernel faulted */
static _Atomic int initialised;
static int one_queue; /* one hardware queue: set at cuInit from the environment */
static _Thread_local CUcontext current;
static _Thread_local CUcontext pushed[8];
static _Thread_local int pushed_count;

/* Set by the library's destructor: a call into the driver after it (a
 * thread of the process still polling while the driver is unloaded) is
 * reported and ends the process with status 70. */
static _Atomic int unloading;

static void unloaded_call(void) {
    static const char text[] = "fake libcuda: called after the driver was unloaded\n";
    ssize_t written = write(2, text, sizeof text - 1);
    (void)written;
    _exit(70);
}

__attribute__((destructor)) static void driver_unload(void) {
    atomic_store(&unloading, 1);
    /* A thread that still polls calls in within a poll interval. */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

/* Whether the calling thread may use the device now. */
static CUresult usable(void) {
    if (atomic_load(&unloading)) {
        unloaded_call();
    }
    if (!atomic_load(&initialised)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    int error = atomic_load(&sticky);
    if (error) {
        return (CUresult)error;
    }
    pthread_mutex_lock(&g);
    int ok = current == &primary && primary.magic == LIVE;
    pthread_mutex_unlock(&g);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

#define USABLE()                                                                                   \
    do {                                                                                           \
        CUresult usable_ = usable();                                                               \
        if (usable_ != CUDA_SUCCESS) {                                                             \
            return usable_;                                                                        \
        }                                                                                          \
    } while (0)

/* Graphs (below): a call a capture forbids on this thread, and a
 * synchronize of the whole context while any stream captures. */
static CUresult capture_allows_unsafe_call(void);
static CUresult capture_allows_context_sync(void);

#define CAPTURE_SAFE()                                                                             \
    do {                                                                                           \
        CUresult safe_ = capture_allows_unsafe_call();                                             \
        if (safe_ != CUDA_SUCCESS) {                                                               \
            return safe_;                                                                          \
        }                                                                                          \
    } while (0)

static void fault(CUresult error) {
    pthread_mutex_lock(&g);
    atomic_store(&sticky, (int)error);
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&g);
}

CUresult cuGetErrorName(CUresult error, const char **out) {
    static const struct {
        CUresult r;
        const char *name;
    } names[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS"},
        {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
        {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
        {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
        {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
        {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
        {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
        {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
        {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        if (names[i].r == error) {
            *out = names[i].name;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **out) {
    const char *name = NULL;
    if (cuGetErrorName(error, &name) != CUDA_SUCCESS) {
        *out = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = error == CUDA_ERROR_ILLEGAL_ADDRESS
               ? "an illegal memory access was encountered (stand-in driver)"
               : "reported by the stand-in driver";
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
    if (flags) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const char *connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    one_queue = connections && strcmp(connections, "1") == 0;
    atomic_store(&initialised, 1);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    *version = CUDA_VERSION;
    return CUDA_SUCCESS;
}

static CUresult device_get_count(int *count) {
    *count = 1;
    return atomic_load(&initialised) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult device_get(CUdevice *device, int ordinal) {
    if (ordinal != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = 0;
    return CUDA_SUCCESS;
}

static CUresult device_get_name(char *name, int length, CUdevice device) {
    if (device != 0 || length <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    strncpy(name, "stand-in device", (size_t)length - 1);
    name[length - 1] = '\0';
    return CUDA_SUCCESS;
}

static CUresult device_get_attribute(int *value, CUdevice_attribute attribute, CUdevice device) {
    if (device != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        *value = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = FAKE_CC / 10;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = FAKE_CC % 10;
        break;
    default:
        *value = 0;
        break;
    }
    return CUDA_SUCCESS;
}

static CUresult device_total_mem(size_t *bytes, CUdevice device) {
    (void)device;
    *bytes = (size_t)1 << 32;
    return CUDA_SUCCESS;
}

static CUresult primary_retain(CUcontext *context, CUdevice device) {
    if (device != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&g);
    if (primary.refs++ == 0) {
        primary.magic = LIVE;
        atomic_store(&sticky, 0); /* a reset context starts clean */
    }
    pthread_mutex_unlock(&g);
    *context = &primary;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice device) {
    if (device != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&g);
    CUresult r = CUDA_SUCCESS;
    if (primary.refs == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--primary.refs == 0) {
        primary.magic = DEAD;
    }
    pthread_mutex_unlock(&g);
    return r;
}

static CUresult ctx_set_current(CUcontext context) {
    if (context && context != &primary) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    current = context;
    return CUDA_SUCCESS;
}

static CUresult ctx_get_current(CUcontext *context) {
    *context = current;
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext context) {
    if (context != &primary || pushed_count == 8) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pushed[pushed_count++] = current;
    current = context;
    return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *context) {
    if (pushed_count == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (context) {
        *context = current;
    }
    current = pushed[--pushed_count];
    return CUDA_SUCCESS;
}

static CUresult ctx_priority_range(int *least, int *greatest) {
    USABLE();
    *least = 0;
    *greatest = -5;
    return CUDA_SUCCESS;
}

/* ---- events ---------------------------------------------------------------- */

struct CUevent_st {
    uint32_t magic;
    unsigned flags;
    uint64_t recorded;  /* under g: records issued */
    uint64_t completed; /* under g: the latest record run */
    uint64_t time_ns;   /* under g: when it ran */
    int refs;           /* under g: commands naming it */
    struct CUevent_st *next_dead;
};

/* Destroyed handles stay allocated (and reachable) so a later use is
 * refused, never a use after free. */
static struct CUevent_st *dead_events;

static int event_live_locked(const struct CUevent_st *e) {
    return e && e->magic == LIVE;
}

static CUresult event_create(CUevent *out, unsigned int flags) {
    USABLE();
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->magic = LIVE;
    e->flags = flags;
    *out = e;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent e) {
    pthread_mutex_lock(&g);
    if (!event_live_locked(e)) {
        pthread_mutex_unlock(&g);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    e->magic = DEAD;
    e->next_dead = dead_events;
    dead_events = e;
    pthread_mutex_unlock(&g);
    return CUDA_SUCCESS;
}

static CUresult event_query(CUevent e) {
    USABLE();
    CAPTURE_SAFE();
    pthread_mutex_lock(&g);
    CUresult r = !event_live_locked(e)         ? CUDA_ERROR_INVALID_HANDLE
                 : e->completed >= e->recorded ? CUDA_SUCCESS
                                               : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&g);
    return r;
}

static CUresult event_synchronize(CUevent e) {
    CAPTURE_SAFE();
    pthread_mutex_lock(&g);
    if (!event_live_locked(e)) {
        pthread_mutex_unlock(&g);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    while (e->completed < e->recorded && !atomic_load(&sticky)) {
        pthread_cond_wait(&changed, &g);
    }
    pthread_mutex_unlock(&g);
    return (CUresult)atomic_load(&sticky);
}

static CUresult event_elapsed(float *ms, CUevent start, CUevent end) {
    USABLE();
    pthread_mutex_lock(&g);
    CUresult r = CUDA_SUCCESS;
    if (!event_live_locked(start) || !event_live_locked(end) ||
        (start->flags & CU_EVENT_DISABLE_TIMING) || (end->flags & CU_EVENT_DISABLE_TIMING) ||
        !start->recorded || !end->recorded) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (start->completed < start->recorded || end->completed < end->recorded) {
        r = CUDA_ERROR_NOT_READY;
    } else {
        *ms = (float)((double)((int64_t)end->time_ns - (int64_t)start->time_ns) / 1e6);
    }
    pthread_mutex_unlock(&g);
    return r;
}

/* ---- streams ---------------------------------------------------------------- */

typedef enum cmd_kind {
    CMD_RECORD,
    CMD_WAIT_EVENT,
    CMD_KERNEL,
    CMD_WAIT_VALUE,
    CMD_WRITE_VALUE,
    CMD_COPY,
    CMD_SET,
    CMD_FREE,
    CMD_GRAPH, /* a launch of an executable graph (graph below) */
} cmd_kind_t;

typedef enum kernel_id {
    K_SPIN = 1,
    K_FILL,
    K_COMBINE,
    K_STEP,
    K_FAULT,
    K_DEMO_MATMUL,
    K_DEMO_ROW_SUMS
} kernel_id_t;

typedef struct cmd {
    struct cmd *next;
    cmd_kind_t kind;
    struct CUevent_st *event;
    uint64_t generation;
    kernel_id_t kernel;
    uint64_t args[6];
    unsigned grid[3], block[3]; /* a kernel's launch shape */
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t seq;                 /* enqueue order over all streams */
    const struct CUstream_st *on; /* the stream it was enqueued on */
    struct CUgraphExec_st *exec;  /* CMD_GRAPH */
    struct exec_plan *plan;       /* CMD_GRAPH: the steps it runs */
} cmd_t;

struct CUstream_st {
    uint32_t magic;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cmd_t *head;
    cmd_t *tail;
    int busy;
    int destroyed;
    struct CUstream_st *next_dead;
    struct CUstream_st *next_all; /* every stream ever created, under dead_lock */
    /* Stream capture (graphs, below), under the stream's lock: the graph
     * work goes to instead of running, the node it last added, the
     * capture's state and the thread and mode it began with. */
    struct CUgraph_st *capture;
    struct CUgraphNode_st *capture_last;
    int capture_invalidated;
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread;
};

static pthread_mutex_t dead_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *dead_streams;
static struct CUstream_st *all_streams;

/* ---- what the device can address ------------------------------------------------
 *
 * Device memory and page-locked host memory, from allocation to free. A
 * stream memory operation on any other address faults the device (as a
 * real one's MMU does: an access through a freed mapping). */

typedef enum map_kind { MAP_DEVICE, MAP_HOST } map_kind_t;

typedef struct mapping {
    struct mapping *next;
    uintptr_t base;
    size_t bytes;
    map_kind_t kind;
    int free_enqueued; /* a cuMemFreeAsync of it is queued on a stream */
} mapping_t;

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping_t *mappings;

static int map_add(void *ptr, size_t bytes, map_kind_t kind) {
    mapping_t *m = calloc(1, sizeof *m);
    if (!m) {
        return 0;
    }
    m->base = (uintptr_t)ptr;
    m->bytes = bytes;
    m->kind = kind;
    pthread_mutex_lock(&map_lock);
    m->next = mappings;
    mappings = m;
    pthread_mutex_unlock(&map_lock);
    return 1;
}

static void map_remove(void *ptr) {
    pthread_mutex_lock(&map_lock);
    for (mapping_t **link = &mappings; *link; link = &(*link)->next) {
        if ((*link)->base == (uintptr_t)ptr) {
            mapping_t *m = *link;
            *link = m->next;
            free(m);
            break;
        }
    }
    pthread_mutex_unlock(&map_lock);
}

/* A free must name the start of a live allocation of its kind that no
 * stream-ordered free has claimed yet (the driver answers
 * CUDA_ERROR_INVALID_VALUE otherwise; here that also keeps a double or
 * misdirected free from reaching the C library). enqueue_free: claim it
 * for a cuMemFreeAsync. */
static int map_claim(void *ptr, map_kind_t kind, int enqueue_free) {
    int found = 0;
    pthread_mutex_lock(&map_lock);
    for (mapping_t *m = mappings; m; m = m->next) {
        if (m->base == (uintptr_t)ptr) {
            found = m->kind == kind && !m->free_enqueued;
            if (found && enqueue_free) {
                m->free_enqueued = 1;
            }
            break;
        }
    }
    pthread_mutex_unlock(&map_lock);
    return found;
}

static void map_unclaim(void *ptr) {
    pthread_mutex_lock(&map_lock);
    for (mapping_t *m = mappings; m; m = m->next) {
        if (m->base == (uintptr_t)ptr) {
            m->free_enqueued = 0;
            break;
        }
    }
    pthread_mutex_unlock(&map_lock);
}

/* Whether [ptr, ptr + bytes) lies in one live allocation of a kind in
 * kinds (a mask of 1 << map_kind_t). */
static int mapped_as(const void *ptr, size_t bytes, unsigned kinds) {
    uintptr_t p = (uintptr_t)ptr;
    int found = 0;
    pthread_mutex_lock(&map_lock);
    for (const mapping_t *m = mappings; m && !found; m = m->next) {
        found = (kinds & (1u << m->kind)) && p >= m->base && p - m->base <= m->bytes &&
                bytes <= m->bytes - (p - m->base);
    }
    pthread_mutex_unlock(&map_lock);
    return found;
}

/* What the device can address: device memory and mapped page-locked
 * memory. */
static int mapped(const void *ptr, size_t bytes) {
    return mapped_as(ptr, bytes, 1u << MAP_DEVICE | 1u << MAP_HOST);
}

/* A host pointer: anything but device memory (pageable or page-locked). */
static int host_pointer(const void *ptr) {
    return !mapped_as(ptr, 0, 1u << MAP_DEVICE);
}

static int page_locked(const void *ptr, size_t bytes) {
    return mapped_as(ptr, bytes, 1u << MAP_HOST);
}

/* The demo's kernels, emulated thread by thread of the launch's grid as
 * demo_kernels.h describes them (and demo_kernels.cu computes them): a
 * grid that does not cover the problem leaves cells unwritten, a block of
 * another shape writes nothing, and the arithmetic is the kernels' own
 * (fused multiply-adds in the same order, the same pairwise tree), so the
 * results are those of the device bit for bit. */
static void demo_matmul(const cmd_t *c) {
    const double *in = (const double *)(uintptr_t)c->args[0];
    const double *b = (const double *)(uintptr_t)c->args[1];
    double *out = (double *)(uintptr_t)c->args[2];
    const unsigned rows = (unsigned)c->args[3], k = (unsigned)c->args[4], m = (unsigned)c->args[5];
    if (c->block[0] != DEMO_TILE || c->block[1] != DEMO_TILE || c->block[2] != 1) {
        return;
    }
    /* blockIdx.z does not enter the kernel's indices: every z-slice writes
     * the same values, so one is emulated. */
    for (unsigned by = 0; by < c->grid[1]; ++by) {
        for (unsigned bx = 0; bx < c->grid[0]; ++bx) {
            for (unsigned ty = 0; ty < DEMO_TILE; ++ty) {
                for (unsigned tx = 0; tx < DEMO_TILE; ++tx) {
                    const unsigned row = by * DEMO_TILE + ty, col = bx * DEMO_TILE + tx;
                    if (!(row < rows && col < m)) {
                        continue;
                    }
                    double sum = 0.0;
                    for (unsigned base = 0; base < k; base += DEMO_TILE) {
                        for (unsigned p = 0; p < DEMO_TILE; ++p) {
                            const unsigned q = base + p;
                            double x = q < k ? in[(size_t)row * k + q] : 0.0;
                            double y = q < k ? b[(size_t)q * m + col] : 0.0;
                            sum = fma(x, y, sum);
                        }
                    }
                    out[(size_t)row * m + col] = sum;
                }
            }
        }
    }
}

static void demo_row_sums(const cmd_t *c) {
    const double *out = (const double *)(uintptr_t)c->args[0];
    double *result = (double *)(uintptr_t)c->args[1];
    const unsigned rows = (unsigned)c->args[2], m = (unsigned)c->args[3];
    if (c->block[0] != DEMO_REDUCE_THREADS || c->block[1] != 1 || c->block[2] != 1) {
        return;
    }
    double partial[DEMO_REDUCE_THREADS];
    for (unsigned row = 0; row < c->grid[0]; ++row) {
        for (unsigned t = 0; t < DEMO_REDUCE_THREADS; ++t) {
            double sum = 0.0;
            if (row < rows) {
                for (unsigned j = t; j < m; j += DEMO_REDUCE_THREADS) {
                    sum += out[(size_t)row * m + j];
                }
            }
            partial[t] = sum;
        }
        for (unsigned half = DEMO_REDUCE_THREADS / 2; half > 0; half /= 2) {
            for (unsigned t = 0; t < half; ++t) {
                partial[t] += partial[t + half];
            }
        }
        if (row < rows) {
            result[row] = partial[0];
        }
    }
}

static void run_kernel(const cmd_t *c) {
    uint64_t *cells = (uint64_t *)(uintptr_t)c->args[0];
    switch (c->kernel) {
    case K_SPIN:
        sleep_ns(c->args[0]);
        break;
    case K_FILL:
        for (uint64_t i = 0; i < c->args[2]; ++i) {
            cells[i] = c->args[1];
        }
        break;
    case K_COMBINE: {
        sleep_ns(c->args[4]);
        int dst = (int)c->args[1];
        int a = (int)c->args[2];
        int b = (int)c->args[3];
        cells[dst] = cells[a] * 1099511628211ull + cells[b] + (uint64_t)dst + 1ull;
        break;
    }
    case K_STEP:
        sleep_ns(c->args[1]);
        cells[0] += 1;
        break;
    case K_FAULT:
        fault(CUDA_ERROR_ILLEGAL_ADDRESS);
        break;
    case K_DEMO_MATMUL:
        demo_matmul(c);
        break;
    case K_DEMO_ROW_SUMS:
        demo_row_sums(c);
        break;
    }
}

/* ---- one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) -------------------
 *
 * The streams' work is fed to the device through one queue: a stream
 * memory wait that is not yet satisfied blocks the queue, so no command
 * enqueued after it on any other stream runs until it is. */

static _Atomic uint64_t enqueue_seq;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
#define MAX_BLOCKING 64
static const cmd_t *blocking[MAX_BLOCKING]; /* under queue_lock: waits not yet satisfied */

static int queue_blocked_locked(const cmd_t *c) {
    for (int i = 0; i < MAX_BLOCKING; ++i) {
        if (blocking[i] && blocking[i] != c && blocking[i]->on != c->on &&
            blocking[i]->seq < c->seq) {
            return 1;
        }
    }
    return 0;
}

static void queue_admit(const cmd_t *c) {
    if (!one_queue) {
        return;
    }
    pthread_mutex_lock(&queue_lock);
    while (queue_blocked_locked(c) && !atomic_load(&sticky)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec += 1;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&queue_cond, &queue_lock, &ts);
    }
    pthread_mutex_unlock(&queue_lock);
}

static void queue_block(const cmd_t *c, int on) {
    if (!one_queue) {
        return;
    }
    pthread_mutex_lock(&queue_lock);
    for (int i = 0; i < MAX_BLOCKING; ++i) {
        if (on ? !blocking[i] : blocking[i] == c) {
            blocking[i] = on ? c : NULL;
            break;
        }
    }
    pthread_cond_broadcast(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
}

/* ---- pageable host-to-device copies ------------------------------------------
 *
 * cuMemcpyHtoD from pageable memory returns once the bytes are staged; the
 * DMA to the destination completes later, on the legacy stream, which the
 * non-blocking streams do not wait for. Emulated deterministically: the
 * staged bytes land after the next command of any stream has run, or at
 * the next call that synchronizes with the legacy stream. */

typedef struct landing {
    struct landing *next;
    void *dst;
    size_t bytes;
    unsigned char data[];
} landing_t;

static pthread_mutex_t landing_lock = PTHREAD_MUTEX_INITIALIZER;
static landing_t *landings; /* oldest first */
static landing_t **landings_tail = &landings;

static void land_pending(void) {
    pthread_mutex_lock(&landing_lock);
    landing_t *l = landings;
    landings = NULL;
    landings_tail = &landings;
    while (l) {
        landing_t *next = l->next;
        memcpy(l->dst, l->data, l->bytes);
        free(l);
        l = next;
    }
    pthread_mutex_unlock(&landing_lock);
}

static int stage_landing(void *dst, const void *src, size_t bytes) {
    landing_t *l = malloc(sizeof *l + bytes);
    if (!l) {
        return 0;
    }
    l->next = NULL;
    l->dst = dst;
    l->bytes = bytes;
    memcpy(l->data, src, bytes);
    pthread_mutex_lock(&landing_lock);
    *landings_tail = l;
    landings_tail = &l->next;
    pthread_mutex_unlock(&landing_lock);
    return 1;
}

static void graph_run(cmd_t *c);
static CUresult capture_add_locked(struct CUstream_st *s, cmd_t *c);
static int capture_refuses(struct CUstream_st *s);

static void run(cmd_t *c) {
    /* A graph's launch runs its steps through here, which skip after a
     * fault; the launch itself must still end (its ticket, its reference). */
    if (atomic_load(&sticky) && c->kind != CMD_FREE && c->kind != CMD_GRAPH) {
        /* After a fault nothing runs: records never complete. */
        goto done;
    }
    switch (c->kind) {
    case CMD_RECORD:
        pthread_mutex_lock(&g);
        if (c->event->completed < c->generation) {
            c->event->completed = c->generation;
            c->event->time_ns = now_ns();
        }
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&g);
        break;
    case CMD_WAIT_EVENT:
        pthread_mutex_lock(&g);
        while (c->event->completed < c->generation && !atomic_load(&sticky)) {
            pthread_cond_wait(&changed, &g);
        }
        pthread_mutex_unlock(&g);
        break;
    case CMD_KERNEL:
        run_kernel(c);
        break;
    case CMD_WAIT_VALUE: {
        if (!mapped(c->dst, sizeof(uint64_t))) {
            fault(CUDA_ERROR_ILLEGAL_ADDRESS);
            break;
        }
        int blocked = 0;
        while (atomic_load_explicit((_Atomic uint64_t *)c->dst, memory_order_acquire) <
                   c->args[0] &&
               !atomic_load(&sticky)) {
            if (!blocked) {
                queue_block(c, 1);
                blocked = 1;
            }
            sleep_ns(20000);
        }
        if (blocked) {
            queue_block(c, 0);
        }
        break;
    }
    case CMD_WRITE_VALUE:
        if (!mapped(c->dst, sizeof(uint64_t))) {
            fault(CUDA_ERROR_ILLEGAL_ADDRESS);
            break;
        }
        atomic_store_explicit((_Atomic uint64_t *)c->dst, c->args[0], memory_order_release);
        break;
    case CMD_COPY:
        memcpy(c->dst, c->src, c->bytes);
        break;
    case CMD_SET:
        memset(c->dst, (int)c->args[0], c->bytes);
        break;
    case CMD_FREE:
        map_remove(c->dst);
        free(c->dst);
        break;
    case CMD_GRAPH:
        graph_run(c);
        break;
    }
done:
    if (c->event) {
        pthread_mutex_lock(&g);
        --c->event->refs;
        pthread_mutex_unlock(&g);
    }
    free(c);
}

static void *stream_main(void *arg) {
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->destroyed) {
            pthread_cond_wait(&s->cond, &s->lock);
        }
        cmd_t *c = s->head;
        if (!c) {
            break; /* destroyed and drained */
        }
        s->head = c->next;
        if (!s->head) {
            s->tail = NULL;
        }
        s->busy = 1;
        pthread_mutex_unlock(&s->lock);
        queue_admit(c);
        run(c);
        land_pending();
        pthread_mutex_lock(&s->lock);
        s->busy = 0;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int stream_live(const struct CUstream_st *s) {
    return s && s->magic == LIVE;
}

static CUresult enqueue(CUstream s, cmd_t *c) {
    if (!stream_live(s)) {
        free(c);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&s->lock);
    if (s->capture) {
        CUresult r = capture_add_locked(s, c);
        pthread_mutex_unlock(&s->lock);
        return r;
    }
    pthread_mutex_unlock(&s->lock);
    if (c->event) {
        pthread_mutex_lock(&g);
        ++c->event->refs;
        pthread_mutex_unlock(&g);
    }
    c->next = NULL;
    c->on = s;
    pthread_mutex_lock(&s->lock);
    c->seq = atomic_fetch_add(&enqueue_seq, 1) + 1;
    if (s->tail) {
        s->tail->next = c;
    } else {
        s->head = c;
    }
    s->tail = c;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static cmd_t *cmd_new(cmd_kind_t kind) {
    cmd_t *c = calloc(1, sizeof *c);
    if (c) {
        c->kind = kind;
    }
    return c;
}

static CUresult stream_create(CUstream *out, unsigned int flags, int priority) {
    (void)flags;
    USABLE();
    if (priority > 0 || priority < -5) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->magic = LIVE;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_t thread;
    if (pthread_create(&thread, NULL, stream_main, s) != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_detach(thread);
    pthread_mutex_lock(&dead_lock);
    s->next_all = all_streams;
    all_streams = s;
    pthread_mutex_unlock(&dead_lock);
    *out = s;
    return CUDA_SUCCESS;
}

/* Returns at once; the thread drains what was enqueued, then ends. */
static CUresult stream_destroy(CUstream s) {
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&s->lock);
    s->magic = DEAD;
    s->destroyed = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&dead_lock);
    s->next_dead = dead_streams;
    dead_streams = s;
    pthread_mutex_unlock(&dead_lock);
    return CUDA_SUCCESS;
}

static CUresult stream_query(CUstream s) {
    USABLE();
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (capture_refuses(s)) {
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_lock(&s->lock);
    int idle = !s->head && !s->busy;
    pthread_mutex_unlock(&s->lock);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult stream_synchronize(CUstream s) {
    USABLE();
    CAPTURE_SAFE();
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (capture_refuses(s)) {
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_lock(&s->lock);
    while ((s->head || s->busy) && !atomic_load(&sticky)) {
        pthread_cond_wait(&s->cond, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return (CUresult)atomic_load(&sticky);
}

/* For tests of ordo's error paths (found with dlsym; a real driver has no
 * such entry): the next count cuEventRecord calls fail with result. */
void fake_cuda_fail_event_records(int count, CUresult result);
static _Atomic int record_failures;
static _Atomic int record_failure_result;

void fake_cuda_fail_event_records(int count, CUresult result) {
    atomic_store(&record_failure_result, (int)result);
    atomic_store(&record_failures, count);
}

static CUresult event_record(CUevent e, CUstream s) {
    USABLE();
    for (int left = atomic_load(&record_failures); left > 0;) {
        if (atomic_compare_exchange_weak(&record_failures, &left, left - 1)) {
            return (CUresult)atomic_load(&record_failure_result);
        }
    }
    cmd_t *c = cmd_new(CMD_RECORD);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g);
    if (!event_live_locked(e)) {
        pthread_mutex_unlock(&g);
        free(c);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    c->event = e;
    c->generation = ++e->recorded;
    pthread_mutex_unlock(&g);
    return enqueue(s, c);
}

static CUresult stream_wait_event(CUstream s, CUevent e, unsigned int flags) {
    USABLE();
    if (flags) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    cmd_t *c = cmd_new(CMD_WAIT_EVENT);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g);
    CUresult r = !event_live_locked(e) ? CUDA_ERROR_INVALID_HANDLE
                 : !e->recorded        ? CUDA_ERROR_INVALID_VALUE /* stricter than CUDA */
                                       : CUDA_SUCCESS;
    c->event = e;
    c->generation = e->recorded;
    pthread_mutex_unlock(&g);
    if (r != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    return enqueue(s, c);
}

static CUresult stream_wait_value(CUstream s, CUdeviceptr addr, cuuint64_t value,
                                  unsigned int flags) {
    USABLE();
    if (flags != CU_STREAM_WAIT_VALUE_GEQ) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    cmd_t *c = cmd_new(CMD_WAIT_VALUE);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst = (void *)(uintptr_t)addr;
    c->args[0] = value;
    return enqueue(s, c);
}

static CUresult stream_write_value(CUstream s, CUdeviceptr addr, cuuint64_t value,
                                   unsigned int flags) {
    USABLE();
    if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    cmd_t *c = cmd_new(CMD_WRITE_VALUE);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst = (void *)(uintptr_t)addr;
    c->args[0] = value;
    return enqueue(s, c);
}

/* ---- memory ------------------------------------------------------------------- */

static int too_big(size_t bytes) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 && bytes / (size_t)page >= (size_t)pages / 2;
}

static void *block(size_t bytes, size_t alignment) {
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static CUresult mem_alloc(CUdeviceptr *ptr, size_t bytes) {
    USABLE();
    CAPTURE_SAFE();
    if (bytes == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *p = too_big(bytes) ? NULL : block(bytes, 256);
    if (p && !map_add(p, bytes, MAP_DEVICE)) {
        free(p);
        p = NULL;
    }
    if (!p) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Waits until every stream of the context, destroyed ones included, has
 * run all it was given (or the context has faulted); then what pageable
 * copies staged has landed. */
static CUresult drain_all(void) {
    pthread_mutex_lock(&dead_lock);
    struct CUstream_st *first = all_streams;
    pthread_mutex_unlock(&dead_lock);
    for (struct CUstream_st *s = first; s; s = s->next_all) {
        pthread_mutex_lock(&s->lock);
        while ((s->head || s->busy) && !atomic_load(&sticky)) {
            pthread_cond_wait(&s->cond, &s->lock);
        }
        pthread_mutex_unlock(&s->lock);
    }
    land_pending();
    return (CUresult)atomic_load(&sticky);
}

/* Frees also after a fault (and returns the fault): a real context frees
 * everything it holds when it is finally reset. Like the driver's
 * cuMemFree and cuMemFreeHost, it first waits for the context's work. */
static CUresult release_block(void *ptr, map_kind_t kind) {
    CAPTURE_SAFE();
    CUresult r = usable();
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_INITIALIZED) {
        return r;
    }
    if (map_claim(ptr, kind, 0)) {
        (void)drain_all();
    }
    if (!map_claim(ptr, kind, 0)) {
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
    }
    map_remove(ptr);
    free(ptr);
    return r;
}

static CUresult mem_free(CUdeviceptr ptr) {
    return release_block((void *)(uintptr_t)ptr, MAP_DEVICE);
}

static CUresult mem_get_info(size_t *free_bytes, size_t *total_bytes) {
    USABLE();
    *free_bytes = *total_bytes = (size_t)1 << 32;
    return CUDA_SUCCESS;
}

static CUresult mem_alloc_async(CUdeviceptr *ptr, size_t bytes, CUstream s) {
    USABLE();
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return mem_alloc(ptr, bytes);
}

static CUresult mem_free_async(CUdeviceptr ptr, CUstream s) {
    USABLE();
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    cmd_t *c = cmd_new(CMD_FREE);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst = (void *)(uintptr_t)ptr;
    if (!map_claim(c->dst, MAP_DEVICE, 1)) {
        free(c);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = enqueue(s, c);
    if (r != CUDA_SUCCESS) {
        map_unclaim((void *)(uintptr_t)ptr);
    }
    return r;
}

static CUresult mem_host_alloc(void **ptr, size_t bytes, unsigned int flags) {
    (void)flags;
    USABLE();
    CAPTURE_SAFE();
    void *p = too_big(bytes) ? NULL : block(bytes, 4096);
    if (p && !map_add(p, bytes, MAP_HOST)) {
        free(p);
        p = NULL;
    }
    if (!p) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = p;
    return CUDA_SUCCESS;
}

static CUresult mem_free_host(void *ptr) {
    return release_block(ptr, MAP_HOST);
}

static CUresult mem_host_device_pointer(CUdeviceptr *device_ptr, void *host_ptr,
                                        unsigned int flags) {
    USABLE();
    if (flags) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *device_ptr = (CUdeviceptr)(uintptr_t)host_ptr;
    return CUDA_SUCCESS;
}

/* On the legacy stream: ordered after the copies before it on it. From
 * page-locked memory the copy is done when the call returns; from
 * pageable memory only staged (see land_pending). */
static CUresult memcpy_htod(CUdeviceptr dst, const void *src, size_t bytes) {
    USABLE();
    CAPTURE_SAFE();
    void *to = (void *)(uintptr_t)dst;
    if (!mapped(to, bytes) || !host_pointer(src)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    land_pending();
    if (page_locked(src, bytes)) {
        memcpy(to, src, bytes);
    } else if (!stage_landing(to, src, bytes)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult memcpy_dtoh(void *dst, CUdeviceptr src, size_t bytes) {
    USABLE();
    CAPTURE_SAFE();
    const void *from = (const void *)(uintptr_t)src;
    if (!host_pointer(dst) || !mapped(from, bytes)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    land_pending();
    memcpy(dst, from, bytes);
    return CUDA_SUCCESS;
}

static CUresult copy_async(void *dst, const void *src, size_t bytes, CUstream s) {
    USABLE();
    int to_device = mapped_as(dst, 0, 1u << MAP_DEVICE) || !mapped_as(src, 0, 1u << MAP_DEVICE);
    if (to_device ? !mapped(dst, bytes) || !host_pointer(src)
                  : !host_pointer(dst) || !mapped(src, bytes)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    cmd_t *c = cmd_new(CMD_COPY);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    return enqueue(s, c);
}

static CUresult memcpy_htod_async(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    return copy_async((void *)(uintptr_t)dst, src, bytes, s);
}

static CUresult memcpy_dtoh_async(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    return copy_async(dst, (const void *)(uintptr_t)src, bytes, s);
}

static CUresult memset_d8_async(CUdeviceptr dst, unsigned char value, size_t count, CUstream s) {
    USABLE();
    if (!mapped((void *)(uintptr_t)dst, count)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    cmd_t *c = cmd_new(CMD_SET);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst = (void *)(uintptr_t)dst;
    c->args[0] = value;
    c->bytes = count;
    return enqueue(s, c);
}

static struct { int dummy; } default_pool;

static CUresult device_default_pool(CUmemoryPool *pool, CUdevice device) {
    if (device != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *pool = (CUmemoryPool)(void *)&default_pool;
    return CUDA_SUCCESS;
}

static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attribute, void *value) {
    (void)attribute, (void)value;
    return pool == (CUmemoryPool)(void *)&default_pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- modules and kernels ------------------------------------------------------ */

static struct { int dummy; } the_module;

static const struct {
    const char *name;
    kernel_id_t id;
} kernel_names[] = {{"ordo_spin", K_SPIN},
                    {"ordo_fill", K_FILL},
                    {"ordo_combine", K_COMBINE},
                    {"ordo_step", K_STEP},
                    {"ordo_fault", K_FAULT},
                    {DEMO_KERNEL_MATMUL, K_DEMO_MATMUL},
                    {DEMO_KERNEL_ROW_SUMS, K_DEMO_ROW_SUMS}};

/* Whether the image holds code the device can run: a fat binary (magic
 * 0xba55ed50, then entries of a 16-bit kind, 1 PTX or 2 SASS in a cubin,
 * a 32-bit header size at 4, a 64-bit payload size at 8 and the target
 * architecture, e.g. 90 for sm_90, at 28) with SASS of the device's major
 * version not above its minor, or PTX not above it; a cubin (ELF) whose
 * e_flags name such an architecture; or PTX text whose .target does. */
static CUresult image_check(const void *image) {
    const unsigned char *b = image;
    uint32_t magic;
    memcpy(&magic, b, sizeof magic);
    if (magic == 0xba55ed50u) {
        uint16_t header;
        uint64_t size;
        memcpy(&header, b + 6, sizeof header);
        memcpy(&size, b + 8, sizeof size);
        if (header < 16 || size > ((uint64_t)1 << 32)) {
            return CUDA_ERROR_INVALID_IMAGE;
        }
        for (uint64_t at = header; at + 32 <= header + size;) {
            uint16_t kind;
            uint32_t entry_header, arch;
            uint64_t payload;
            memcpy(&kind, b + at, sizeof kind);
            memcpy(&entry_header, b + at + 4, sizeof entry_header);
            memcpy(&payload, b + at + 8, sizeof payload);
            memcpy(&arch, b + at + 28, sizeof arch);
            if (entry_header < 32 || payload > size) {
                return CUDA_ERROR_INVALID_IMAGE;
            }
            if ((kind == 2 && arch / 10 == FAKE_CC / 10 && arch <= FAKE_CC) ||
                (kind == 1 && arch <= FAKE_CC)) {
                return CUDA_SUCCESS;
            }
            at += entry_header + payload;
        }
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    if (memcmp(b,
               "\x7f"
               "ELF",
               4) == 0) {
        /* ELF64: e_flags at 48; the architecture in its low byte (the
         * cubin ABI of CUDA 12) or, from ABI version 8 on, the next. */
        uint32_t flags;
        memcpy(&flags, b + 48, sizeof flags);
        unsigned arch = b[8] >= 8 ? (flags >> 8) & 0xffu : flags & 0xffu;
        return arch / 10 == FAKE_CC / 10 && arch <= FAKE_CC ? CUDA_SUCCESS
                                                            : CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    const char *target = strstr((const char *)image, ".target sm_");
    if (target) {
        return (unsigned)atoi(target + 11) <= FAKE_CC ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    return CUDA_ERROR_INVALID_IMAGE;
}

static CUresult module_load(CUmodule *module, const void *image) {
    USABLE();
    if (!image) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult checked = image_check(image);
    if (checked != CUDA_SUCCESS) {
        return checked;
    }
    *module = (CUmodule)(void *)&the_module;
    return CUDA_SUCCESS;
}

static CUresult module_unload(CUmodule module) {
    return module == (CUmodule)(void *)&the_module ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult module_function(CUfunction *function, CUmodule module, const char *name) {
    USABLE();
    if (module != (CUmodule)(void *)&the_module) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (size_t i = 0; i < sizeof kernel_names / sizeof kernel_names[0]; ++i) {
        if (strcmp(kernel_names[i].name, name) == 0) {
            *function = (CUfunction)(uintptr_t)kernel_names[i].id;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* Parameters are read at launch, as the driver does. */
static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                              unsigned int bx, unsigned int by, unsigned int bz,
                              unsigned int shared, CUstream s, void **params, void **extra) {
    USABLE();
    /* A real driver refuses an empty launch, more than 1024 threads per
     * block and dynamic shared memory beyond 48 KiB without opting in. */
    if (!params || extra || !gx || !gy || !gz || !bx || !by || !bz || bz > 64 ||
        (uint64_t)bx * by * bz > 1024 || shared > 48 * 1024) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    cmd_t *c = cmd_new(CMD_KERNEL);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->kernel = (kernel_id_t)(uintptr_t)f;
    c->grid[0] = gx, c->grid[1] = gy, c->grid[2] = gz;
    c->block[0] = bx, c->block[1] = by, c->block[2] = bz;
    switch (c->kernel) {
    case K_SPIN:
        c->args[0] = *(unsigned long long *)params[0];
        break;
    case K_FILL:
        c->args[0] = *(CUdeviceptr *)params[0];
        c->args[1] = *(unsigned long long *)params[1];
        c->args[2] = *(unsigned *)params[2];
        break;
    case K_COMBINE:
        c->args[0] = *(CUdeviceptr *)params[0];
        c->args[1] = (uint64_t) * (int *)params[1];
        c->args[2] = (uint64_t) * (int *)params[2];
        c->args[3] = (uint64_t) * (int *)params[3];
        c->args[4] = *(unsigned long long *)params[4];
        break;
    case K_STEP:
        c->args[0] = *(CUdeviceptr *)params[0];
        c->args[1] = *(unsigned long long *)params[1];
        break;
    case K_FAULT:
        c->args[0] = *(CUdeviceptr *)params[0];
        break;
    case K_DEMO_MATMUL: /* in, b, out, rows, k, m */
        for (int i = 0; i < 3; ++i) {
            c->args[i] = *(CUdeviceptr *)params[i];
        }
        for (int i = 3; i < 6; ++i) {
            c->args[i] = *(unsigned *)params[i];
        }
        break;
    case K_DEMO_ROW_SUMS: /* out, result, rows, m */
        c->args[0] = *(CUdeviceptr *)params[0];
        c->args[1] = *(CUdeviceptr *)params[1];
        c->args[2] = *(unsigned *)params[2];
        c->args[3] = *(unsigned *)params[3];
        break;
    default:
        free(c);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return enqueue(s, c);
}

/* cuCtxSynchronize before 13.0: the current context. */
static CUresult ctx_synchronize(void) {
    USABLE();
    CAPTURE_SAFE();
    CUresult r = capture_allows_context_sync();
    if (r != CUDA_SUCCESS) {
        return r;
    }
    return drain_all();
}

/* cuCtxSynchronize_v2 (13.0): the context named, NULL for the current one.
 * Called with no argument, it reads whatever the register held. */
static CUresult ctx_synchronize_v2(CUcontext ctx) {
    if (ctx && ctx != &primary) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    USABLE();
    CAPTURE_SAFE();
    CUresult r = capture_allows_context_sync();
    if (r != CUDA_SUCCESS) {
        return r;
    }
    return drain_all();
}

/* ---- graphs --------------------------------------------------------------------
 *
 * What ordo uses of CUDA graphs, emulated strictly: stream capture of
 * kernels, copies and memsets (in THREAD_LOCAL, GLOBAL or RELAXED mode,
 * with the calls a capture forbids refused and the capture invalidated,
 * by each thread's interaction mode: cuThreadExchangeStreamCaptureMode;
 * a context synchronize refused while any stream captures), graphs built with child-graph and empty
 * nodes, instantiation, launches and destruction. Anything else that reaches a capturing stream (an
 * event record or wait, a stream memory operation, a free, a graph launch)
 * is refused as unsupported and invalidates the capture: ordo never
 * captures those. An update (cuGraphExecUpdate) takes a graph of the same
 * topology as the one instantiated (or last updated from): nodes paired in
 * the order they were added, each with the same kind, the same
 * dependencies and, for captured work, the same kind of command (a kernel
 * may change its function and arguments, a copy or a memset its operands);
 * anything else is refused with the reason in the result info and changes
 * nothing. Launches made before an update run the graph as it was, as the
 * driver documents for its updates; an update that overlaps a launch or
 * another update of the same executable graph (graph objects are not
 * thread-safe) aborts the process.
 *
 * A launch runs the executable graph as one command of its stream, but
 * its nodes in a random order that respects the graph's edges and nothing
 * else, drawn afresh at each launch: work a graph does not order runs in
 * an order no program could count on. Launches of one executable graph
 * run one after another, in the order they were made, as a real driver's
 * do. */

typedef enum node_kind { NODE_WORK, NODE_CHILD, NODE_EMPTY } node_kind_t;

struct CUgraphNode_st {
    uint32_t magic;
    struct CUgraph_st *graph;
    node_kind_t kind;
    cmd_t work;               /* NODE_WORK: the captured command */
    struct CUgraph_st *child; /* NODE_CHILD: the node's own copy of the child */
    size_t dep_count;
    struct CUgraphNode_st **deps;
};

struct CUgraph_st {
    uint32_t magic;
    size_t count;
    size_t capacity;
    struct CUgraphNode_st **nodes; /* in the order added: a topological order */
};

/* A flattened node of an executable graph: a command, or a barrier. */
typedef struct exec_step {
    int is_work;
    cmd_t work;
    size_t dep_count;
    size_t *deps;
} exec_step_t;

/* An executable graph's flattened steps. A launch holds the plan it was
 * made with: an update replaces the graph's plan for later launches. */
typedef struct exec_plan {
    int refs; /* under g: the graph's, and each launch queued */
    size_t count;
    size_t capacity;
    exec_step_t *steps;
    size_t *next_start; /* the steps after step i: next[next_start[i], next_start[i + 1]) */
    size_t *next;
} exec_plan_t;

struct CUgraphExec_st {
    uint32_t magic;
    exec_plan_t *plan;        /* under g */
    struct CUgraph_st *shape; /* a copy of the graph of its plan: an update's check */
    int refs;                 /* under g: the handle's, and each launch queued */
    uint64_t launched;        /* under g: tickets handed out */
    uint64_t ran;             /* under g: launches that have run */
    int launching;            /* under g: cuGraphLaunch calls under way */
    int updating;             /* under g: a cuGraphExecUpdate under way */
};

static _Thread_local int captures_here; /* THREAD_LOCAL or GLOBAL captures begun on this thread */
static _Atomic int global_captures;
static _Atomic int all_captures; /* in any mode, on any thread */
/* The thread's capture interaction mode (cuThreadExchangeStreamCaptureMode;
 * GLOBAL, 0, by default). */
static _Thread_local CUstreamCaptureMode thread_mode;

static void graph_free(struct CUgraph_st *graph);

static void node_free(struct CUgraphNode_st *node) {
    if (node->child) {
        graph_free(node->child);
    }
    free(node->deps);
    node->magic = DEAD;
    free(node);
}

static void graph_free(struct CUgraph_st *graph) {
    for (size_t i = 0; i < graph->count; ++i) {
        node_free(graph->nodes[i]);
    }
    free(graph->nodes);
    graph->magic = DEAD;
    free(graph);
}

static struct CUgraph_st *graph_new(void) {
    struct CUgraph_st *graph = calloc(1, sizeof *graph);
    if (graph) {
        graph->magic = LIVE;
    }
    return graph;
}

static int graph_live(const struct CUgraph_st *graph) {
    return graph && graph->magic == LIVE;
}

/* Adds a node of kind to graph after deps (checked by the caller). */
static struct CUgraphNode_st *node_add(struct CUgraph_st *graph, node_kind_t kind,
                                       struct CUgraphNode_st *const *deps, size_t dep_count) {
    if (graph->count == graph->capacity) {
        size_t capacity = graph->capacity ? graph->capacity * 2 : 16;
        struct CUgraphNode_st **grown = realloc(graph->nodes, capacity * sizeof *grown);
        if (!grown) {
            return NULL;
        }
        graph->nodes = grown;
        graph->capacity = capacity;
    }
    struct CUgraphNode_st *node = calloc(1, sizeof *node);
    if (!node || (dep_count && !(node->deps = malloc(dep_count * sizeof *node->deps)))) {
        free(node);
        return NULL;
    }
    node->magic = LIVE;
    node->graph = graph;
    node->kind = kind;
    node->dep_count = dep_count;
    if (dep_count) {
        memcpy(node->deps, deps, dep_count * sizeof *deps);
    }
    graph->nodes[graph->count++] = node;
    return node;
}

/* A deep copy of graph: a child node owns its child's copy, as CUDA's does. */
static struct CUgraph_st *graph_clone(const struct CUgraph_st *graph) {
    struct CUgraph_st *copy = graph_new();
    struct CUgraphNode_st **deps = NULL;
    for (size_t i = 0; copy && i < graph->count; ++i) {
        const struct CUgraphNode_st *from = graph->nodes[i];
        free(deps);
        deps = from->dep_count ? malloc(from->dep_count * sizeof *deps) : NULL;
        if (from->dep_count && !deps) {
            graph_free(copy);
            return NULL;
        }
        for (size_t d = 0; d < from->dep_count; ++d) {
            size_t at = 0;
            while (graph->nodes[at] != from->deps[d]) {
                ++at;
            }
            deps[d] = copy->nodes[at];
        }
        struct CUgraphNode_st *node = node_add(copy, from->kind, deps, from->dep_count);
        if (!node || (from->child && !(node->child = graph_clone(from->child)))) {
            graph_free(copy);
            copy = NULL;
            break;
        }
        node->work = from->work;
    }
    free(deps);
    return copy;
}

/* Checks deps: all nodes of graph, none twice. */
static CUresult deps_check(const struct CUgraph_st *graph, const CUgraphNode *deps, size_t count) {
    if (count && !deps) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; ++i) {
        if (!deps[i] || deps[i]->magic != LIVE || deps[i]->graph != graph) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        for (size_t j = 0; j < i; ++j) {
            if (deps[j] == deps[i]) {
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
    }
    return CUDA_SUCCESS;
}

/* Invalidates the captures a forbidden call of this thread breaks: its
 * own, and with a GLOBAL one anywhere, those too. */
static void captures_invalidate(int all_global) {
    pthread_t self = pthread_self();
    pthread_mutex_lock(&dead_lock);
    for (struct CUstream_st *s = all_streams; s; s = s->next_all) {
        pthread_mutex_lock(&s->lock);
        if (s->capture && ((s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                            pthread_equal(s->capture_thread, self)) ||
                           (all_global && s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL))) {
            s->capture_invalidated = 1;
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&dead_lock);
}

/* A potentially unsafe call (one that synchronizes, allocates, frees or
 * queries an event), by the thread's interaction mode: RELAXED, allowed;
 * THREAD_LOCAL, refused while the thread captures (not RELAXED); GLOBAL,
 * also while any thread captures in GLOBAL mode. A refusal invalidates
 * those captures. */
static CUresult capture_allows_unsafe_call(void) {
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) {
        return CUDA_SUCCESS;
    }
    int global = thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && atomic_load(&global_captures) > 0;
    if (!captures_here && !global) {
        return CUDA_SUCCESS;
    }
    captures_invalidate(global);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Synchronizing a context while any of its streams captures, in any mode
 * and from any thread, is refused whatever the caller's mode, and
 * invalidates every such capture. */
static CUresult capture_allows_context_sync(void) {
    if (atomic_load(&all_captures) == 0) {
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&dead_lock);
    for (struct CUstream_st *s = all_streams; s; s = s->next_all) {
        pthread_mutex_lock(&s->lock);
        if (s->capture) {
            s->capture_invalidated = 1;
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&dead_lock);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult thread_exchange_capture_mode(CUstreamCaptureMode *mode) {
    if (!mode ||
        (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
         *mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstreamCaptureMode previous = thread_mode;
    thread_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}

/* enqueue's path for a capturing stream (its lock held): the command
 * becomes a node after the capture's last one; c is consumed. */
static CUresult capture_add_locked(struct CUstream_st *s, cmd_t *c) {
    CUresult r = CUDA_SUCCESS;
    if (s->capture_invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c->kind != CMD_KERNEL && c->kind != CMD_COPY && c->kind != CMD_SET) {
        s->capture_invalidated = 1;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else {
        pthread_mutex_lock(&g);
        struct CUgraphNode_st *node =
            node_add(s->capture, NODE_WORK, &s->capture_last, s->capture_last ? 1 : 0);
        pthread_mutex_unlock(&g);
        if (!node) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            node->work = *c;
            node->work.next = NULL;
            s->capture_last = node;
        }
    }
    free(c);
    return r;
}

static CUresult stream_begin_capture(CUstream s, CUstreamCaptureMode mode) {
    USABLE();
    if (!s) {
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream */
    }
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUgraph_st *graph = graph_new();
    if (!graph) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&s->lock);
    if (s->capture) {
        pthread_mutex_unlock(&s->lock);
        graph_free(graph);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    s->capture = graph;
    s->capture_last = NULL;
    s->capture_invalidated = 0;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    pthread_mutex_unlock(&s->lock);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        ++captures_here;
    }
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_add(&global_captures, 1);
    }
    atomic_fetch_add(&all_captures, 1);
    return CUDA_SUCCESS;
}

static CUresult stream_end_capture(CUstream s, CUgraph *out) {
    if (!stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!out) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&s->lock);
    struct CUgraph_st *graph = s->capture;
    if (!graph) {
        pthread_mutex_unlock(&s->lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    CUstreamCaptureMode mode = s->capture_mode;
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->capture_thread, pthread_self())) {
        pthread_mutex_unlock(&s->lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    int invalidated = s->capture_invalidated;
    s->capture = NULL;
    s->capture_last = NULL;
    pthread_mutex_unlock(&s->lock);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        --captures_here;
    }
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_sub(&global_captures, 1);
    }
    atomic_fetch_sub(&all_captures, 1);
    if (invalidated) {
        graph_free(graph);
        *out = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = graph;
    return CUDA_SUCCESS;
}

/* A capturing stream refuses what would wait for its work (a query, a
 * synchronize), and the capture ends invalidated. */
static int capture_refuses(struct CUstream_st *s) {
    pthread_mutex_lock(&s->lock);
    int capturing = s->capture != NULL;
    if (capturing) {
        s->capture_invalidated = 1;
    }
    pthread_mutex_unlock(&s->lock);
    return capturing;
}

static CUresult graph_create(CUgraph *out, unsigned int flags) {
    USABLE();
    if (!out || flags) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = graph_new();
    return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult graph_add_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps,
                               size_t count, CUgraph child) {
    USABLE();
    if (!out || !graph_live(graph) || (child && (!graph_live(child) || child == graph))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = deps_check(graph, deps, count);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    struct CUgraph_st *copy = NULL;
    if (child && !(copy = graph_clone(child))) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUgraphNode_st *node = node_add(graph, child ? NODE_CHILD : NODE_EMPTY, deps, count);
    if (!node) {
        if (copy) {
            graph_free(copy);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    node->child = copy;
    *out = node;
    return CUDA_SUCCESS;
}

static CUresult graph_add_child_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps,
                                     size_t count, CUgraph child) {
    if (!child) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return graph_add_node(out, graph, deps, count, child);
}

static CUresult graph_add_empty_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps,
                                     size_t count) {
    return graph_add_node(out, graph, deps, count, NULL);
}

static CUresult graph_get_nodes(CUgraph graph, CUgraphNode *nodes, size_t *count) {
    if (!graph_live(graph) || !count) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (nodes) {
        size_t n = *count < graph->count ? *count : graph->count;
        for (size_t i = 0; i < n; ++i) {
            nodes[i] = graph->nodes[i];
        }
        for (size_t i = n; i < *count; ++i) {
            nodes[i] = NULL;
        }
    }
    *count = graph->count;
    return CUDA_SUCCESS;
}

static CUresult graph_destroy(CUgraph graph) {
    if (!graph_live(graph)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    graph_free(graph);
    return CUDA_SUCCESS;
}

static void plan_free(exec_plan_t *plan) {
    for (size_t i = 0; i < plan->count; ++i) {
        free(plan->steps[i].deps);
    }
    free(plan->steps);
    free(plan->next_start);
    free(plan->next);
    free(plan);
}

static void plan_unref_locked(exec_plan_t *plan) {
    if (--plan->refs == 0) {
        plan_free(plan);
    }
}

static void exec_free(struct CUgraphExec_st *exec) {
    if (exec->plan) {
        plan_unref_locked(exec->plan);
    }
    if (exec->shape) {
        graph_free(exec->shape);
    }
    free(exec);
}

/* Appends a step after deps (copied); its index, or SIZE_MAX without memory. */
static size_t exec_step_add(exec_plan_t *exec, const cmd_t *work, const size_t *deps,
                            size_t dep_count) {
    if (exec->count == exec->capacity) {
        size_t capacity = exec->capacity ? exec->capacity * 2 : 32;
        exec_step_t *grown = realloc(exec->steps, capacity * sizeof *grown);
        if (!grown) {
            return SIZE_MAX;
        }
        exec->steps = grown;
        exec->capacity = capacity;
    }
    exec_step_t *step = &exec->steps[exec->count];
    memset(step, 0, sizeof *step);
    if (dep_count && !(step->deps = malloc(dep_count * sizeof *deps))) {
        return SIZE_MAX;
    }
    if (dep_count) {
        memcpy(step->deps, deps, dep_count * sizeof *deps);
    }
    step->dep_count = dep_count;
    if (work) {
        step->is_work = 1;
        step->work = *work;
    }
    return exec->count++;
}

/* Flattens graph into exec after the steps in entry: a barrier before its
 * roots, one after all its nodes (returned; SIZE_MAX without memory). A
 * child node is its child graph flattened in its place. */
static size_t exec_flatten(exec_plan_t *exec, const struct CUgraph_st *graph, const size_t *entry,
                           size_t entry_count) {
    size_t first = exec_step_add(exec, NULL, entry, entry_count);
    size_t *step_of = calloc(graph->count + 1, sizeof *step_of);
    size_t *deps = NULL;
    size_t last = SIZE_MAX;
    if (first == SIZE_MAX || !step_of) {
        goto out;
    }
    for (size_t i = 0; i < graph->count; ++i) {
        const struct CUgraphNode_st *node = graph->nodes[i];
        size_t n = node->dep_count ? node->dep_count : 1;
        free(deps);
        if (!(deps = malloc(n * sizeof *deps))) {
            goto out;
        }
        deps[0] = first;
        for (size_t d = 0; d < node->dep_count; ++d) {
            size_t at = 0;
            while (graph->nodes[at] != node->deps[d]) {
                ++at;
            }
            deps[d] = step_of[at];
        }
        step_of[i] = node->kind == NODE_CHILD  ? exec_flatten(exec, node->child, deps, n)
                     : node->kind == NODE_WORK ? exec_step_add(exec, &node->work, deps, n)
                                               : exec_step_add(exec, NULL, deps, n);
        if (step_of[i] == SIZE_MAX) {
            goto out;
        }
    }
    step_of[graph->count] = first;
    last = graph->count ? exec_step_add(exec, NULL, step_of, graph->count)
                        : exec_step_add(exec, NULL, &first, 1);
out:
    free(deps);
    free(step_of);
    return last;
}

/* The steps after each step, from the steps' dependencies. */
static int exec_link(exec_plan_t *exec) {
    size_t n = exec->count, edges = 0;
    for (size_t i = 0; i < n; ++i) {
        edges += exec->steps[i].dep_count;
    }
    exec->next_start = calloc(n + 1, sizeof *exec->next_start);
    exec->next = malloc((edges ? edges : 1) * sizeof *exec->next);
    size_t *fill = calloc(n + 1, sizeof *fill);
    if (!exec->next_start || !exec->next || !fill) {
        free(fill);
        return 0;
    }
    for (size_t i = 0; i < n; ++i) {
        for (size_t d = 0; d < exec->steps[i].dep_count; ++d) {
            ++exec->next_start[exec->steps[i].deps[d] + 1];
        }
    }
    for (size_t i = 0; i < n; ++i) {
        exec->next_start[i + 1] += exec->next_start[i];
        fill[i] = exec->next_start[i];
    }
    for (size_t i = 0; i < n; ++i) {
        for (size_t d = 0; d < exec->steps[i].dep_count; ++d) {
            exec->next[fill[exec->steps[i].deps[d]]++] = i;
        }
    }
    free(fill);
    return 1;
}

/* The plan of graph, with one reference; NULL without memory. */
static exec_plan_t *plan_make(const struct CUgraph_st *graph) {
    exec_plan_t *plan = calloc(1, sizeof *plan);
    if (!plan) {
        return NULL;
    }
    plan->refs = 1;
    if (exec_flatten(plan, graph, NULL, 0) == SIZE_MAX || !exec_link(plan)) {
        plan_free(plan);
        return NULL;
    }
    return plan;
}

static CUresult graph_instantiate(CUgraphExec *out, CUgraph graph, unsigned long long flags) {
    USABLE();
    if (!out || !graph_live(graph)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags) {
        return CUDA_ERROR_NOT_SUPPORTED; /* none of the flags is emulated */
    }
    struct CUgraphExec_st *exec = calloc(1, sizeof *exec);
    if (!exec) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    exec->plan = plan_make(graph);
    exec->shape = graph_clone(graph);
    if (!exec->plan || !exec->shape) {
        exec_free(exec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    exec->magic = LIVE;
    exec->refs = 1;
    *out = exec;
    return CUDA_SUCCESS;
}

static void exec_unref_locked(struct CUgraphExec_st *exec) {
    if (--exec->refs == 0) {
        exec_free(exec);
    }
}

static CUresult graph_exec_destroy(CUgraphExec exec) {
    pthread_mutex_lock(&g);
    if (!exec || exec->magic != LIVE) {
        pthread_mutex_unlock(&g);
        return CUDA_ERROR_INVALID_VALUE;
    }
    exec->magic = DEAD; /* launches queued still run (their references) */
    exec_unref_locked(exec);
    pthread_mutex_unlock(&g);
    return CUDA_SUCCESS;
}

/* Two calls on one executable graph at once: the program's race (graph
 * objects are not thread-safe), which a driver need not survive. */
static _Noreturn void graph_race(const char *call, const char *other) {
    fprintf(stderr, "fake_cuda: %s on an executable graph while %s of it is under way\n", call,
            other);
    abort();
}

/* Pairs the nodes of was and now in the order they were added; the result
 * of an update from was to now, and the node of now at fault. */
static CUgraphExecUpdateResult shape_diff(const struct CUgraph_st *was,
                                          const struct CUgraph_st *now, CUgraphNode *out_node) {
    *out_node = NULL;
    if (was->count != now->count) {
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    }
    for (size_t i = 0; i < now->count; ++i) {
        const struct CUgraphNode_st *a = was->nodes[i];
        struct CUgraphNode_st *b = now->nodes[i];
        *out_node = b;
        if (a->dep_count != b->dep_count) {
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        }
        for (size_t d = 0; d < b->dep_count; ++d) {
            size_t at = 0, bt = 0;
            while (was->nodes[at] != a->deps[d]) {
                ++at;
            }
            while (now->nodes[bt] != b->deps[d]) {
                ++bt;
            }
            if (at != bt) {
                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            }
        }
        if (a->kind != b->kind || (a->kind == NODE_WORK && a->work.kind != b->work.kind)) {
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        }
        if (a->kind == NODE_CHILD) {
            CUgraphNode inner;
            CUgraphExecUpdateResult r = shape_diff(a->child, b->child, &inner);
            if (r != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
                return r; /* the child node is the one of now at fault */
            }
        }
    }
    *out_node = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static CUresult graph_exec_update(CUgraphExec exec, CUgraph graph,
                                  CUgraphExecUpdateResultInfo *info) {
    USABLE();
    if (!info) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(info, 0, sizeof *info);
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    if (!graph_live(graph)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&g);
    if (!exec || exec->magic != LIVE) {
        pthread_mutex_unlock(&g);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (exec->launching || exec->updating) {
        graph_race("cuGraphExecUpdate", exec->launching ? "cuGraphLaunch" : "cuGraphExecUpdate");
    }
    exec->updating = 1;
    pthread_mutex_unlock(&g);
    CUgraphNode at = NULL;
    CUgraphExecUpdateResult result = shape_diff(exec->shape, graph, &at);
    exec_plan_t *plan = NULL;
    struct CUgraph_st *shape = NULL;
    CUresult r = CUDA_SUCCESS;
    if (result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    } else if (!(plan = plan_make(graph)) || !(shape = graph_clone(graph))) {
        result = CU_GRAPH_EXEC_UPDATE_ERROR;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g);
    exec->updating = 0;
    if (r == CUDA_SUCCESS) {
        /* Launches made before hold the plan they were made with. */
        plan_unref_locked(exec->plan);
        exec->plan = plan;
        plan = NULL;
        struct CUgraph_st *old = exec->shape;
        exec->shape = shape;
        shape = old;
    }
    if (plan) {
        plan_unref_locked(plan);
    }
    pthread_mutex_unlock(&g);
    if (shape) {
        graph_free(shape);
    }
    info->result = result;
    info->errorNode = at;
    return r;
}

static CUresult graph_launch(CUgraphExec exec, CUstream s) {
    USABLE();
    if (!s || !stream_live(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    cmd_t *c = cmd_new(CMD_GRAPH);
    if (!c) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g);
    if (!exec || exec->magic != LIVE) {
        pthread_mutex_unlock(&g);
        free(c);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (exec->updating) {
        graph_race("cuGraphLaunch", "cuGraphExecUpdate");
    }
    ++exec->launching;
    ++exec->refs;
    ++exec->plan->refs;
    c->exec = exec;
    c->plan = exec->plan;
    c->generation = ++exec->launched;
    pthread_mutex_unlock(&g);
    CUresult r = enqueue(s, c);
    pthread_mutex_lock(&g);
    --exec->launching;
    if (r != CUDA_SUCCESS) {
        /* Not queued (a capturing stream, a dead one): the ticket goes as if run. */
        ++exec->ran;
        pthread_cond_broadcast(&changed);
        plan_unref_locked(c->plan);
        exec_unref_locked(exec);
    }
    pthread_mutex_unlock(&g);
    return r;
}

/* Runs a launch on its stream's thread, after the launches before it, its
 * steps in a random order their edges allow. */
static void graph_run(cmd_t *c) {
    struct CUgraphExec_st *exec = c->exec;
    static _Atomic uint64_t draws;
    uint64_t rng = (atomic_fetch_add(&draws, 1) + 1) * 0x9e3779b97f4a7c15ull;
    pthread_mutex_lock(&g);
    while (exec->ran + 1 < c->generation && !atomic_load(&sticky)) {
        pthread_cond_wait(&changed, &g);
    }
    pthread_mutex_unlock(&g);
    const exec_plan_t *plan = c->plan;
    size_t n = plan->count;
    size_t *waiting = calloc(n, sizeof *waiting); /* deps not yet run */
    size_t *ready = malloc((n ? n : 1) * sizeof *ready);
    if (!waiting || !ready) {
        fault(CUDA_ERROR_OUT_OF_MEMORY);
    } else {
        size_t ready_count = 0;
        for (size_t i = 0; i < n; ++i) {
            waiting[i] = plan->steps[i].dep_count;
            if (!waiting[i]) {
                ready[ready_count++] = i;
            }
        }
        while (ready_count) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t pick = (size_t)(rng % ready_count);
            size_t i = ready[pick];
            ready[pick] = ready[--ready_count];
            if (plan->steps[i].is_work) {
                cmd_t *work = malloc(sizeof *work);
                if (!work) {
                    fault(CUDA_ERROR_OUT_OF_MEMORY);
                    break;
                }
                *work = plan->steps[i].work;
                work->next = NULL;
                run(work);
            }
            for (size_t e = plan->next_start[i]; e < plan->next_start[i + 1]; ++e) {
                if (--waiting[plan->next[e]] == 0) {
                    ready[ready_count++] = plan->next[e];
                }
            }
        }
    }
    free(waiting);
    free(ready);
    pthread_mutex_lock(&g);
    ++exec->ran;
    pthread_cond_broadcast(&changed);
    plan_unref_locked(c->plan);
    exec_unref_locked(exec);
    pthread_mutex_unlock(&g);
}

/* ---- entry points ------------------------------------------------------------- */

/* Each entry point from the CUDA version its prototype (as the stand-in
 * implements it) is that of: asked for at an earlier version it is not
 * found, asked for at a later one the newest ABI up to it is given. */
static const struct {
    const char *name;
    int since;
    void *fn;
} table[] = {
    {"cuGetErrorName", 6000, (void *)cuGetErrorName},
    {"cuGetErrorString", 6000, (void *)cuGetErrorString},
    {"cuDeviceGetCount", 2000, (void *)device_get_count},
    {"cuDeviceGet", 2000, (void *)device_get},
    {"cuDeviceGetName", 2000, (void *)device_get_name},
    {"cuDeviceGetAttribute", 2000, (void *)device_get_attribute},
    {"cuDeviceTotalMem", 3020, (void *)device_total_mem},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)primary_retain},
    {"cuDevicePrimaryCtxRelease", 11000, (void *)primary_release},
    {"cuCtxSetCurrent", 4000, (void *)ctx_set_current},
    {"cuCtxGetCurrent", 4000, (void *)ctx_get_current},
    {"cuCtxPushCurrent", 4000, (void *)ctx_push},
    {"cuCtxPopCurrent", 4000, (void *)ctx_pop},
    {"cuCtxGetStreamPriorityRange", 5050, (void *)ctx_priority_range},
    {"cuCtxSynchronize", 2000, (void *)ctx_synchronize},
    {"cuCtxSynchronize", 13000, (void *)ctx_synchronize_v2},
    {"cuStreamCreateWithPriority", 5050, (void *)stream_create},
    {"cuStreamDestroy", 4000, (void *)stream_destroy},
    {"cuStreamQuery", 2000, (void *)stream_query},
    {"cuStreamSynchronize", 2000, (void *)stream_synchronize},
    {"cuStreamWaitEvent", 3020, (void *)stream_wait_event},
    {"cuStreamWaitValue64", 11070, (void *)stream_wait_value},
    {"cuStreamWriteValue64", 11070, (void *)stream_write_value},
    {"cuEventCreate", 2000, (void *)event_create},
    {"cuEventDestroy", 4000, (void *)event_destroy},
    {"cuEventRecord", 2000, (void *)event_record},
    {"cuEventQuery", 2000, (void *)event_query},
    {"cuEventSynchronize", 2000, (void *)event_synchronize},
    {"cuEventElapsedTime", 2000, (void *)event_elapsed},
    {"cuMemAlloc", 3020, (void *)mem_alloc},
    {"cuMemFree", 3020, (void *)mem_free},
    {"cuMemGetInfo", 3020, (void *)mem_get_info},
    {"cuMemAllocAsync", 11020, (void *)mem_alloc_async},
    {"cuMemFreeAsync", 11020, (void *)mem_free_async},
    {"cuMemHostAlloc", 2020, (void *)mem_host_alloc},
    {"cuMemFreeHost", 2000, (void *)mem_free_host},
    {"cuMemHostGetDevicePointer", 3020, (void *)mem_host_device_pointer},
    {"cuMemcpyHtoD", 3020, (void *)memcpy_htod},
    {"cuMemcpyDtoH", 3020, (void *)memcpy_dtoh},
    {"cuMemcpyHtoDAsync", 3020, (void *)memcpy_htod_async},
    {"cuMemcpyDtoHAsync", 3020, (void *)memcpy_dtoh_async},
    {"cuMemsetD8Async", 3020, (void *)memset_d8_async},
    {"cuDeviceGetDefaultMemPool", 11020, (void *)device_default_pool},
    {"cuMemPoolSetAttribute", 11020, (void *)pool_attribute},
    {"cuMemPoolGetAttribute", 11020, (void *)pool_attribute},
    {"cuModuleLoadData", 2000, (void *)module_load},
    {"cuModuleUnload", 2000, (void *)module_unload},
    {"cuModuleGetFunction", 2000, (void *)module_function},
    {"cuLaunchKernel", 4000, (void *)launch_kernel},
    {"cuStreamBeginCapture", 10010, (void *)stream_begin_capture},
    {"cuStreamEndCapture", 10000, (void *)stream_end_capture},
    {"cuGraphCreate", 10000, (void *)graph_create},
    {"cuGraphAddChildGraphNode", 10000, (void *)graph_add_child_node},
    {"cuGraphAddEmptyNode", 10000, (void *)graph_add_empty_node},
    {"cuGraphGetNodes", 10000, (void *)graph_get_nodes},
    {"cuGraphDestroy", 10000, (void *)graph_destroy},
    {"cuGraphInstantiateWithFlags", 11040, (void *)graph_instantiate},
    {"cuGraphLaunch", 10000, (void *)graph_launch},
    {"cuGraphExecDestroy", 10000, (void *)graph_exec_destroy},
    {"cuGraphExecUpdate", 12000, (void *)graph_exec_update},
    {"cuThreadExchangeStreamCaptureMode", 10010, (void *)thread_exchange_capture_mode},
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *symbolStatus) {
    (void)flags;
    if (!symbol || !pfn || cudaVersion > CUDA_VERSION) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    int known = 0;
    int best = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        if (strcmp(table[i].name, symbol) == 0) {
            known = 1;
            if (table[i].since <= cudaVersion && table[i].since > best) {
                best = table[i].since;
                *pfn = table[i].fn;
            }
        }
    }
    CUdriverProcAddressQueryResult status = *pfn    ? CU_GET_PROC_ADDRESS_SUCCESS
                                            : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                                    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (symbolStatus) {
        *symbolStatus = status;
    }
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
