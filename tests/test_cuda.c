/* The CUDA backend. Without a driver or a device (or in a build without
 * cuda.h) every device test prints ordo_backend_available's reason and
 * skips; the tests of the absent path and of bad input run everywhere.
 *
 * On a GPU: points and host waits, device-side waits (issued at once, or
 * bound later when the wait came before its signal), host signals gating
 * device work, host tasks between kernels, two randomized multi-stream
 * programs checked value by value (one ordered by a tracker, one by
 * explicit signals submitted in a random interleaving), the memory
 * resources, stall reports, teardown with held work, pooled points, and
 * last (it breaks the context) a faulting kernel failing every signal.
 * Every wait has a deadline; the kernels spin for microseconds.
 *
 * Modes (environment):
 * - ORDO_TEST_CUDA_REQUIRE=1: a test that would skip for want of a GPU
 *   capability (no device, a kernel image the driver refuses, no 64-bit
 *   stream memory operations, no memory pools) fails instead, so a GPU
 *   run cannot pass by skipping;
 * - ORDO_TEST_CUDA_SANITIZER_SAFE=1: the tests whose driver errors are
 *   deliberate (out of memory, the faulting kernel, which fails every
 *   later call) are left out, for compute-sanitizer, which reports them. */
#include <ctype.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "test_rescue.h"
#include "refusal.h"
#include "test_util.h"

#ifdef ORDO_HAVE_CUDA_H
#include "backends/cuda/cuda_internal.h"
#include "cuda_kernels.h"
#endif

static char skip_reason[256] = "";
static ordo_device_t *device;
static int require_gpu; /* ORDO_TEST_CUDA_REQUIRE=1 */

static int env_flag(const char *name) {
    const char *value = getenv(name);
    return value && strcmp(value, "1") == 0;
}

/* A test that cannot run for want of a GPU capability: skipped, or failed
 * where the run requires a GPU. */
#define SKIP_FOR_WANT_OF(...)                                                                      \
    do {                                                                                           \
        if (require_gpu) {                                                                         \
            fail_msg("required (ORDO_TEST_CUDA_REQUIRE=1) but " __VA_ARGS__);                      \
        }                                                                                          \
        print_message("  skipped: " __VA_ARGS__);                                                  \
        print_message("\n");                                                                       \
        skip();                                                                                    \
    } while (0)

#define REQUIRE_DEVICE()                                                                           \
    do {                                                                                           \
        if (!device) {                                                                             \
            SKIP_FOR_WANT_OF("%s", skip_reason);                                                   \
        }                                                                                          \
    } while (0)

/* ---- everywhere: the absent path and bad input ---------------------------- */

static void absence_is_explained(void **state) {
    (void)state;
    bool available = 0;
    char reason[160] = "";
    ordo_status_t st = ordo_backend_available("cuda", &available, reason, sizeof reason);
#ifdef ORDO_HAVE_CUDA_H
    assert_ok(st);
    ordo_device_t *d = NULL;
    if (!available) {
        /* A precise reason, and the device refused with it. */
        assert_true(strlen(reason) > 10);
        assert_status(ordo_device_open("cuda:0", &d), ORDO_ERR_UNAVAILABLE);
        assert_non_null(strstr(ordo_error_message(), reason));
        size_t count = 0;
        ordo_device_info_t infos[16];
        assert_ok(ordo_device_list(infos, 16, &count));
        for (size_t i = 0; i < count && i < 16; ++i) {
            assert_string_not_equal(infos[i].backend, "cuda");
        }
    } else {
        /* The shared runtime: the suite's own, one more reference. */
        assert_ok(ordo_device_open("cuda:0", &d));
        assert_ok(ordo_device_release(d));
        assert_status(ordo_device_open("cuda:64", &d), ORDO_ERR_OUT_OF_RANGE);
    }
#else
    assert_status(st, ORDO_ERR_NOT_FOUND);
#endif
}

static void other_backends_are_refused(void **state) {
    (void)state;
    ordo_device_t *cpu;
    assert_ok(ordo_device_open("cpu", &cpu));
    ordo_stream_t *stream;
    assert_ok(ordo_stream_create(cpu, 0, &stream));
#ifdef ORDO_HAVE_CUDA_H
    const ordo_status_t wrong = ORDO_ERR_INVALID_ARGUMENT;
    const ordo_status_t unsupported = ORDO_ERR_UNSUPPORTED;
    const ordo_status_t bad_handle = ORDO_ERR_INVALID_HANDLE;
#else
    const ordo_status_t wrong = ORDO_ERR_UNSUPPORTED;
    const ordo_status_t unsupported = ORDO_ERR_UNSUPPORTED;
    const ordo_status_t bad_handle = ORDO_ERR_UNSUPPORTED;
#endif
    struct CUstream_st *handle = NULL;
    assert_status(ordo_cuda_stream_handle(stream, &handle), wrong);
    assert_status(ordo_cuda_stream_handle(NULL, &handle), bad_handle);
    assert_status(ordo_cuda_stream_enqueue(stream, NULL, NULL), wrong);
    assert_status(ordo_cuda_stream_enqueue(NULL, NULL, NULL), bad_handle);
    struct CUctx_st *context = NULL;
    int dev = -1;
    assert_status(ordo_cuda_device_context(cpu, &context, &dev), wrong);
    assert_status(ordo_cuda_device_context(NULL, &context, &dev), bad_handle);
    assert_status(ordo_cuda_make_current(cpu), wrong);
    assert_status(ordo_cuda_make_current(NULL), bad_handle);
    ordo_mem_resource_t *resource = NULL;
    assert_status(ordo_mem_cuda_async_create(cpu, &resource), unsupported);
    assert_status(ordo_mem_host_pinned_create(cpu, &resource), unsupported);
    assert_status(ordo_mem_cuda_async_create(NULL, &resource), bad_handle);
#ifdef ORDO_HAVE_CUDA_H
    assert_status(ordo_mem_cuda_async_create(cpu, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_host_pinned_create(cpu, NULL), ORDO_ERR_INVALID_ARGUMENT);
#endif
    assert_null(resource);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_device_release(cpu));
}

/* ---- bad input: cuda.h, on the cpu device (tests/refusal.h) */

static ordo_status_t cuda_enqueue(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    ++*(int *)ctx;
    return ORDO_OK;
}

static void cuda_entry_points_on_cpu(void **state) {
    (void)state;
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    struct CUstream_st *handle = (struct CUstream_st *)1;
    struct CUctx_st *context = NULL;
    int ordinal = 0, calls = 0;
    ordo_mem_resource_t *r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, handle, ordo_cuda_stream_handle,
                   AS(ordo_stream_t, f.signal), &handle);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_handle, f.s[0], NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_stream_enqueue, NULL, cuda_enqueue, &calls);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_stream_enqueue, AS(ordo_stream_t, f.signal),
            cuda_enqueue, &calls);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_enqueue, f.s[0], NULL, &calls);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_enqueue, f.s[0], cuda_enqueue, &calls);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, context, ordinal, ordo_cuda_device_context, NULL,
                    &context, &ordinal);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, context, ordinal, ordo_cuda_device_context,
                    AS(ordo_device_t, f.s[0]), &context, &ordinal);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_device_context, f.device, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_make_current, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_make_current, AS(ordo_device_t, f.s[0]));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_make_current, f.device);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_cuda_async_create, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_cuda_async_create,
                   AS(ordo_device_t, f.s[0]), &r);
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, r, ordo_mem_cuda_async_create, f.device, &r);
    r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_host_pinned_create, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, r, ordo_mem_host_pinned_create, f.device, &r);
    assert_int_equal(calls, 0);
    refusal_fixture_free(&f);
}

/* Made to fail on demand: ordo's host blocks (installed before any ordo
 * object, see main). */
static _Atomic int allocations_fail;
/* Allocations that still succeed before every later one fails; < 0: all. */
static _Atomic long allocations_left = -1;

static void *test_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    if (atomic_load(&allocations_fail)) {
        return NULL;
    }
    long left = atomic_load(&allocations_left);
    while (left >= 0) {
        if (left == 0) {
            return NULL;
        }
        if (atomic_compare_exchange_weak(&allocations_left, &left, left - 1)) {
            break;
        }
    }
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void test_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    free(block);
}

#ifdef ORDO_HAVE_CUDA_H

/* ---- helpers for the device tests ------------------------------------------- */

static const cuda_api_t *cu;
static cuda_kernels_t kernels;
static int kernels_loaded;
static char kernels_reason[256] = "";

#define REQUIRE_KERNELS()                                                                          \
    do {                                                                                           \
        REQUIRE_DEVICE();                                                                          \
        if (!kernels_loaded) {                                                                     \
            SKIP_FOR_WANT_OF("%s", kernels_reason);                                                \
        }                                                                                          \
    } while (0)

#define assert_cu(expr) assert_int_equal((int)(expr), (int)CUDA_SUCCESS)

static ordo_stream_t *stream_make(void) {
    ordo_stream_t *stream = NULL;
    assert_ok(ordo_stream_create(device, 0, &stream));
    return stream;
}

static int holding(ordo_stream_t *stream) {
    return ordo__cuda_stream_holding(stream);
}

/* A kernel launch, enqueued in ordo stream order; it may run later on the
 * stream's lane, so launches live until the test frees them. */
typedef struct launch {
    struct launch *next;
    CUfunction f;
    CUdeviceptr ptr;
    int i[3];
    unsigned long long u;
    unsigned n;
    unsigned grid;
    unsigned block;
    void *params[6];
} launch_t;

static launch_t *launches;

static ordo_status_t launch_fn(void *ctx, struct CUstream_st *stream) {
    launch_t *l = ctx;
    CUresult r = cu->LaunchKernel(l->f, l->grid, 1, 1, l->block, 1, 1, 0, stream, l->params, NULL);
    return r == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

static launch_t *launch_new(CUfunction f) {
    launch_t *l = calloc(1, sizeof *l);
    assert_non_null(l);
    l->f = f;
    l->grid = l->block = 1;
    l->next = launches;
    launches = l;
    return l;
}

static void launches_free(void) {
    while (launches) {
        launch_t *next = launches->next;
        free(launches);
        launches = next;
    }
}

static void enqueue(ordo_stream_t *stream, launch_t *l) {
    assert_ok(ordo_cuda_stream_enqueue(stream, launch_fn, l));
}

static void spin(ordo_stream_t *stream, unsigned long long ns) {
    launch_t *l = launch_new(kernels.spin);
    l->u = ns;
    l->params[0] = &l->u;
    enqueue(stream, l);
}

static void fill(ordo_stream_t *stream, CUdeviceptr cells, unsigned long long value, unsigned n) {
    launch_t *l = launch_new(kernels.fill);
    l->ptr = cells;
    l->u = value;
    l->n = n;
    l->block = 128;
    l->grid = (n + 127) / 128;
    l->params[0] = &l->ptr;
    l->params[1] = &l->u;
    l->params[2] = &l->n;
    enqueue(stream, l);
}

static void combine(ordo_stream_t *stream, CUdeviceptr cells, int dst, int a, int b,
                    unsigned long long ns) {
    launch_t *l = launch_new(kernels.combine);
    l->ptr = cells;
    l->i[0] = dst;
    l->i[1] = a;
    l->i[2] = b;
    l->u = ns;
    l->params[0] = &l->ptr;
    l->params[1] = &l->i[0];
    l->params[2] = &l->i[1];
    l->params[3] = &l->i[2];
    l->params[4] = &l->u;
    enqueue(stream, l);
}

static unsigned long long combined(unsigned long long a, unsigned long long b, int dst) {
    return a * 1099511628211ull + b + (unsigned long long)dst + 1ull;
}

static CUdeviceptr cells_alloc(size_t count) {
    CUdeviceptr cells = 0;
    assert_cu(cu->MemAlloc(&cells, count * sizeof(unsigned long long)));
    ordo_stream_t *s = stream_make();
    fill(s, cells, 0, (unsigned)count);
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_stream_destroy(s));
    return cells;
}

typedef struct copy_args {
    CUdeviceptr device;
    void *host;
    size_t bytes;
    int to_device;
} copy_args_t;

static ordo_status_t copy_fn(void *ctx, struct CUstream_st *stream) {
    copy_args_t *c = ctx;
    CUresult r = c->to_device ? cu->MemcpyHtoDAsync(c->device, c->host, c->bytes, stream)
                              : cu->MemcpyDtoHAsync(c->host, c->device, c->bytes, stream);
    return r == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

/* Reads go through a stream of their own into page-locked staging memory,
 * with a deadline: a synchronous cuMemcpyDtoH runs on the legacy stream,
 * which may be queued behind a stream held at a gate (one hardware queue)
 * and has no deadline. */
#define STAGING_BYTES ((size_t)1 << 16)
static ordo_stream_t *reader;
static void *staging;

static void device_read(void *dst, CUdeviceptr src, size_t bytes) {
    assert_true(bytes <= STAGING_BYTES);
    copy_args_t down = {src, staging, bytes, 0};
    assert_ok(ordo_cuda_stream_enqueue(reader, copy_fn, &down));
    assert_ok(ordo_stream_synchronize(reader, test_deadline()));
    memcpy(dst, staging, bytes);
}

static unsigned long long cell_read(CUdeviceptr cells, int index) {
    unsigned long long value = 0;
    device_read(&value, cells + (CUdeviceptr)index * sizeof value, sizeof value);
    return value;
}

/* A gate: a word of page-locked host memory mapped for the device. A
 * stream held at a gate waits on the device (a 64-bit stream memory wait)
 * until the host opens it, however long the host's threads stall: unlike a
 * timed spin, only the host ends the wait (or a fault of the context, which
 * fails all pending work). */
typedef struct gate {
    _Atomic uint64_t *word;
    CUdeviceptr device;
} gate_t;

#define REQUIRE_GATES()                                                                            \
    do {                                                                                           \
        REQUIRE_KERNELS();                                                                         \
        if (!((cuda_device_t *)device->impl)->memops) {                                            \
            SKIP_FOR_WANT_OF("the device has no 64-bit stream memory operations");                 \
        }                                                                                          \
    } while (0)

/* Every gate made and not yet freed: each test's teardown opens them all,
 * so a test that ends early (a failed assertion between hold and open)
 * leaves no stream parked for ever, with every later cuMemFree,
 * cuMemFreeHost and cuCtxSynchronize behind it. And gates end themselves:
 * a watchdog thread opens any gate shut for longer than GATE_LIFETIME_MS,
 * so a test whose own thread is stuck in a driver call (the driver may hold
 * every thread's calls while a free waits for the whole device, and the
 * device waits at the gate) fails at its deadline instead of hanging. The
 * watchdog writes host memory only, never calls the driver. */
#define GATES_MAX 16
#define GATE_LIFETIME_MS 15000
typedef struct live_gate {
    _Atomic uint64_t *word;
    ordo_deadline_t expiry;
} live_gate_t;
static live_gate_t live_gates[GATES_MAX]; /* under gates_lock */
static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gates_cond = PTHREAD_COND_INITIALIZER;
static int gates_watchdog_stop;      /* under gates_lock */
static uint64_t gates_expired_count; /* under gates_lock (or once the watchdog is joined) */
static pthread_t gates_watchdog;
static int gates_watchdog_started;

static int gates_open_all(void **state) {
    (void)state;
    pthread_mutex_lock(&gates_lock);
    for (int i = 0; i < GATES_MAX; ++i) {
        if (live_gates[i].word) {
            atomic_store_explicit(live_gates[i].word, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&gates_lock);
    return 0;
}

static void *gates_watchdog_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&gates_lock);
    while (!gates_watchdog_stop) {
        ordo_deadline_t now = ordo_time_now_ns();
        for (int i = 0; i < GATES_MAX; ++i) {
            if (live_gates[i].word && live_gates[i].expiry <= now &&
                atomic_load_explicit(live_gates[i].word, memory_order_acquire) == 0) {
                atomic_store_explicit(live_gates[i].word, 1, memory_order_release);
                ++gates_expired_count;
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&gates_cond, &gates_lock, &until);
    }
    pthread_mutex_unlock(&gates_lock);
    return NULL;
}

static void gates_watchdog_start(void) {
    gates_watchdog_started = pthread_create(&gates_watchdog, NULL, gates_watchdog_main, NULL) == 0;
}

static void gates_watchdog_halt(void) {
    if (!gates_watchdog_started) {
        return;
    }
    pthread_mutex_lock(&gates_lock);
    gates_watchdog_stop = 1;
    pthread_cond_signal(&gates_cond);
    pthread_mutex_unlock(&gates_lock);
    pthread_join(gates_watchdog, NULL);
    gates_watchdog_started = 0;
}

static void gate_make(gate_t *gate) {
    void *word = NULL;
    assert_cu(cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    gate->word = word;
    atomic_init(gate->word, 0);
    assert_cu(cu->MemHostGetDevicePointer(&gate->device, word, 0));
    pthread_mutex_lock(&gates_lock);
    int i = 0;
    while (i < GATES_MAX && live_gates[i].word) {
        ++i;
    }
    if (i < GATES_MAX) {
        live_gates[i].word = gate->word;
        live_gates[i].expiry = ordo_deadline_after_ms(GATE_LIFETIME_MS);
    }
    pthread_mutex_unlock(&gates_lock);
    assert_true(i < GATES_MAX);
}

static ordo_status_t gate_wait_fn(void *ctx, struct CUstream_st *stream) {
    const gate_t *gate = ctx;
    CUresult r = cu->StreamWaitValue64(stream, gate->device, 1, CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

/* Holds the stream's later device work until the gate opens. */
static void gate_hold(ordo_stream_t *stream, gate_t *gate) {
    assert_ok(ordo_cuda_stream_enqueue(stream, gate_wait_fn, gate));
}

static void gate_open(gate_t *gate) {
    atomic_store_explicit(gate->word, 1, memory_order_release);
}

/* Once no stream waits at it any more. */
static void gate_free(gate_t *gate) {
    pthread_mutex_lock(&gates_lock);
    for (int i = 0; i < GATES_MAX; ++i) {
        if (live_gates[i].word == gate->word) {
            live_gates[i].word = NULL;
        }
    }
    pthread_mutex_unlock(&gates_lock);
    assert_cu(cu->MemFreeHost((void *)gate->word));
    gate->word = NULL;
}

/* ---- on a device -------------------------------------------------------------- */

static void the_device_is_listed_with_its_capabilities(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    assert_string_equal(info.name, "cuda:0");
    assert_string_equal(info.backend, "cuda");
    assert_true(info.timing_events);
    assert_true(info.device_memory);
    assert_true(info.priority_greatest <= info.priority_least);
    print_message("  cuda:0: priorities %d to %d, native timeline %s, driver %d\n",
                  info.priority_greatest, info.priority_least, info.native_timeline ? "yes" : "no",
                  cu->driver_version);
    struct CUctx_st *context = NULL;
    int dev = -1;
    assert_ok(ordo_cuda_device_context(device, &context, &dev));
    assert_non_null(context);
    assert_int_equal(dev, 0);
    assert_ok(ordo_cuda_device_context(device, NULL, NULL));
    ordo_stream_t *stream = stream_make();
    struct CUstream_st *handle = NULL;
    assert_ok(ordo_cuda_stream_handle(stream, &handle));
    assert_non_null(handle);
    assert_status(ordo_cuda_stream_handle(stream, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_cuda_stream_enqueue(stream, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_stream_destroy(stream));
}

/* Each entry point is bound at the version of the prototype ordo calls it
 * with: cuGetProcAddress asked at the driver's own version hands out the
 * newest ABI, and cuCtxSynchronize at 13000 is cuCtxSynchronize_v2, which
 * takes the context. */
static void driver_entries_are_bound_with_their_prototypes(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(lib);
    PFN_cuGetProcAddress_v12000 get = NULL;
    void *symbol = dlsym(lib, "cuGetProcAddress_v2");
    memcpy(&get, &symbol, sizeof symbol);
    if (get) {
        void *legacy = NULL;
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        assert_cu(get("cuCtxSynchronize", &legacy, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
        assert_int_equal(found, CU_GET_PROC_ADDRESS_SUCCESS);
        void *bound = NULL;
        memcpy(&bound, &cu->CtxSynchronize, sizeof bound);
        assert_ptr_equal(bound, legacy);
        if (cu->driver_version >= 13000) {
            void *v2 = NULL;
            assert_cu(get("cuCtxSynchronize", &v2, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
            assert_ptr_not_equal(v2, legacy);
        }
    }
    (void)dlclose(lib);
    /* And calling it synchronizes. */
    assert_cu(cu->CtxSynchronize());
}

static void a_kernel_then_a_signal_reaches_the_host(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_event_t *start;
    ordo_event_t *end;
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &start));
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &end));
    uint64_t t0 = ordo_time_now_ns();
    assert_ok(ordo_event_record(start, stream));
    spin(stream, 20000000ull);
    assert_ok(ordo_event_record(end, stream));
    assert_ok(ordo_stream_signal(stream, s, 1));
    assert_ok(ordo_signal_wait(s, 1, test_deadline()));
    /* Not reported before the device got there. */
    assert_true(ordo_time_now_ns() - t0 >= 19000000ull);
    bool complete = 0;
    assert_ok(ordo_event_query(end, &complete));
    assert_true(complete);
    int64_t ns = 0;
    assert_ok(ordo_event_elapsed_ns(start, end, &ns));
    assert_true(ns >= 19500000);
    assert_true(ns < (int64_t)TEST_WAIT_MS * 1000000);
    assert_ok(ordo_event_destroy(start));
    assert_ok(ordo_event_destroy(end));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
    launches_free();
}

static void device_waits_stay_on_the_device(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(2);
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *t = test_signal_make(0);
    spin(a, 30000000ull);
    fill(a, cells, 7, 1);
    assert_ok(ordo_stream_signal(a, s, 1));
    /* The point is recorded: the wait goes to the device, nothing held. */
    assert_ok(ordo_stream_wait(b, s, 1));
    assert_false(holding(b));
    combine(b, cells, 1, 0, 0, 0);
    assert_ok(ordo_stream_signal(b, t, 1));
    assert_ok(ordo_signal_wait(t, 1, test_deadline()));
    assert_int_equal(cell_read(cells, 1), combined(7, 7, 1));
    /* An event wait works the same way. */
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    spin(a, 10000000ull);
    fill(a, cells, 11, 1);
    assert_ok(ordo_event_record(event, a));
    assert_ok(ordo_stream_wait_event(b, event));
    assert_false(holding(b));
    combine(b, cells, 1, 0, 0, 0);
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_int_equal(cell_read(cells, 1), combined(11, 11, 1));
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(t));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

static void a_wait_before_its_signal_binds_on_the_device(void **state) {
    (void)state;
    REQUIRE_GATES();
    CUdeviceptr cells = cells_alloc(2);
    gate_t gate_storage;
    gate_t *gate = &gate_storage;
    gate_make(gate);
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *t = test_signal_make(0);
    /* Nothing reaches s yet: the wait is held on the host. */
    assert_ok(ordo_stream_wait(b, s, 1));
    assert_true(holding(b));
    combine(b, cells, 1, 0, 0, 0);
    assert_ok(ordo_stream_signal(b, t, 1));
    /* a's work stays on the device, behind the gate, until it opens. */
    gate_hold(a, gate);
    fill(a, cells, 5, 1);
    assert_ok(ordo_stream_signal(a, s, 1));
    /* The point is now recorded: b's lane binds the wait to it and lets go
     * before the device reaches it, and b's work waits on the device. */
    ordo_deadline_t deadline = test_deadline();
    uint64_t value = 0;
    while (holding(b)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    assert_ok(ordo_signal_query(s, &value));
    assert_int_equal(value, 0);
    /* b's work has not run (read from its signal: a copy out of the cells
     * on another stream could wait behind a's gate, on a hardware queue
     * the two streams share). */
    assert_ok(ordo_signal_query(t, &value));
    assert_int_equal(value, 0);
    gate_open(gate);
    assert_ok(ordo_signal_wait(t, 1, test_deadline()));
    assert_int_equal(cell_read(cells, 1), combined(5, 5, 1));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(t));
    gate_free(gate);
    assert_cu(cu->MemFree(cells));
    launches_free();
}

static void host_signals_gate_device_work(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(1);
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *host = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, host, 3));
    fill(stream, cells, 9, 1);
    assert_ok(ordo_stream_signal(stream, done, 1));
    assert_status(ordo_stream_synchronize(stream, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    assert_int_equal(cell_read(cells, 0), 0);
    assert_ok(ordo_signal_advance(host, 2));
    test_sleep_ms(10);
    assert_int_equal(cell_read(cells, 0), 0);
    assert_ok(ordo_signal_advance(host, 3));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_int_equal(cell_read(cells, 0), 9);
    /* A host signal that fails fails the stream. */
    ordo_signal_t *broken = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, broken, 1));
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_signal(stream, after, 1));
    assert_ok(ordo_signal_fail(broken, ORDO_ERR_ABORTED, "upstream"));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_status(stream), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(host));
    assert_ok(ordo_signal_destroy(done));
    assert_ok(ordo_signal_destroy(broken));
    assert_ok(ordo_signal_destroy(after));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

typedef struct task_check {
    CUdeviceptr cells;
    unsigned long long expect;
    unsigned long long *write; /* page-locked */
    _Atomic int ran;
    _Atomic int wrong;
} task_check_t;

/* Runs on the stream's lane: the kernel before it is done, so a plain
 * synchronous copy sees its result; the kernel after sees what it writes,
 * because the copy is from page-locked memory: cuMemcpyHtoD from pageable
 * memory returns once the bytes are staged, and the DMA, on the legacy
 * stream, is not ordered before the non-blocking stream's next kernel. */
static ordo_status_t check_and_write(void *ctx) {
    task_check_t *c = ctx;
    unsigned long long value = 0;
    if (cu->MemcpyDtoH(&value, c->cells, sizeof value) != CUDA_SUCCESS || value != c->expect) {
        atomic_store(&c->wrong, 1);
    }
    if (cu->MemcpyHtoD(c->cells, c->write, sizeof *c->write) != CUDA_SUCCESS) {
        atomic_store(&c->wrong, 1);
    }
    atomic_store(&c->ran, 1);
    return ORDO_OK;
}

static ordo_status_t failing_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void host_tasks_run_between_kernels(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(2);
    ordo_stream_t *stream = stream_make();
    unsigned long long *write = NULL;
    assert_cu(cu->MemHostAlloc((void **)&write, sizeof *write, CU_MEMHOSTALLOC_PORTABLE));
    *write = 4;
    task_check_t check = {cells, 3, write, 0, 0};
    spin(stream, 10000000ull);
    fill(stream, cells, 3, 1);
    assert_ok(ordo_stream_host_task(stream, check_and_write, &check));
    combine(stream, cells, 1, 0, 0, 0);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_true(atomic_load(&check.ran));
    assert_false(atomic_load(&check.wrong));
    assert_int_equal(cell_read(cells, 1), combined(4, 4, 1));
    /* A failing task fails the stream: later points fail. */
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_signal(stream, before, 1));
    assert_ok(ordo_stream_host_task(stream, failing_task, NULL));
    /* The task may already have failed the stream: then these submissions
     * are refused with its status (and the signal fails at once). */
    launch_t *late = launch_new(kernels.fill);
    late->ptr = cells;
    late->u = 1;
    late->n = 1;
    late->params[0] = &late->ptr;
    late->params[1] = &late->u;
    late->params[2] = &late->n;
    ordo_status_t st = ordo_cuda_stream_enqueue(stream, launch_fn, late);
    assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    st = ordo_stream_signal(stream, after, 1);
    assert_true(st == ORDO_OK || st == ORDO_ERR_ABORTED);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(after));
    assert_cu(cu->MemFree(cells));
    assert_cu(cu->MemFreeHost(write));
    launches_free();
}

static ordo_status_t refusing_enqueue(void *ctx, struct CUstream_st *stream) {
    (void)ctx, (void)stream;
    return ORDO_ERR_ABORTED;
}

static void a_failing_enqueue_fails_the_stream(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    /* Directly: the status comes back, and the stream fails at that point. */
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_signal(stream, before, 1));
    assert_status(ordo_cuda_stream_enqueue(stream, refusing_enqueue, NULL), ORDO_ERR_ABORTED);
    /* The stream may already be marked failed when the signal is submitted
     * (then the submission returns the failure and fails the signal at
     * once) or not yet (then its point fails): either way it fails. */
    ordo_status_t submitted = ordo_stream_signal(stream, after, 1);
    assert_true(submitted == ORDO_OK || submitted == ORDO_ERR_ABORTED);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(stream));
    /* Held behind a host wait: queued, it fails the stream when it runs. */
    stream = stream_make();
    ordo_signal_t *host = test_signal_make(0);
    ordo_signal_t *later = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, host, 1));
    assert_ok(ordo_cuda_stream_enqueue(stream, refusing_enqueue, NULL));
    assert_ok(ordo_stream_signal(stream, later, 1));
    assert_ok(ordo_signal_advance(host, 1));
    assert_status(ordo_signal_wait(later, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_status(stream), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(after));
    assert_ok(ordo_signal_destroy(host));
    assert_ok(ordo_signal_destroy(later));
}

/* User code that runs on ordo's own threads (a host task or an enqueued
 * function on the lane, a callback on the completion thread) may leave
 * another context current, or none (a task that works with another
 * device, say). The next thing ordo does there still has the device's. */
static ordo_status_t unbind_in_task(void *ctx) {
    (void)ctx;
    return cu->CtxSetCurrent(NULL) == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

static ordo_status_t note_current(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    CUcontext current = NULL;
    if (cu->CtxGetCurrent(&current) == CUDA_SUCCESS &&
        current == ((cuda_device_t *)device->impl)->ctx) {
        atomic_store((_Atomic int *)ctx, 1);
    }
    return ORDO_OK;
}

typedef struct unbinder {
    _Atomic int ran;
    _Atomic int unbound;
} unbinder_t;

static void unbind_in_callback(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    unbinder_t *u = ctx;
    atomic_store(&u->unbound, cu->CtxSetCurrent(NULL) == CUDA_SUCCESS);
    atomic_store(&u->ran, 1);
}

static void user_code_on_ordo_threads_cannot_unbind_the_context(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    /* The lane: a held wait keeps everything after it on the lane thread,
     * where the task runs before the enqueued function and the point. */
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *host = test_signal_make(0);
    ordo_signal_t *done = test_signal_make(0);
    _Atomic int bound = 0;
    assert_ok(ordo_stream_wait(stream, host, 1));
    assert_ok(ordo_stream_host_task(stream, unbind_in_task, NULL));
    assert_ok(ordo_cuda_stream_enqueue(stream, note_current, (void *)&bound));
    assert_ok(ordo_stream_signal(stream, done, 1));
    assert_true(holding(stream));
    assert_ok(ordo_signal_advance(host, 1));
    assert_ok(ordo_signal_wait(done, 1, test_deadline()));
    assert_true(atomic_load(&bound));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    /* The completion thread: a callback run when a point completes unbinds
     * the context; the points after it are still observed. */
    ordo_signal_t *first = test_signal_make(0);
    ordo_signal_t *second = test_signal_make(0);
    unbinder_t unbinder = {0, 0};
    ordo_timepoint_t timepoint = ORDO_TIMEPOINT_INIT;
    assert_ok(ordo_timepoint_arm(&timepoint, first, 1, unbind_in_callback, &unbinder));
    assert_ok(ordo_stream_signal(stream, first, 1));
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&unbinder.ran)) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    assert_true(atomic_load(&unbinder.unbound));
    assert_ok(ordo_stream_signal(stream, second, 1));
    assert_ok(ordo_signal_wait(second, 1, test_deadline()));
    assert_ok(ordo_stream_status(stream));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(host));
    assert_ok(ordo_signal_destroy(done));
    assert_ok(ordo_signal_destroy(first));
    assert_ok(ordo_signal_destroy(second));
}

#define ENQUEUERS 4

typedef struct enqueuer {
    ordo_stream_t *stream;
    CUdeviceptr cell;
    ordo_signal_t *signal;
    launch_t *launch; /* one per thread: its step kernel, launched many times */
    int rounds;
    _Atomic int errors;
} enqueuer_t;

static void *enqueue_many(void *arg) {
    enqueuer_t *e = arg;
    for (int i = 1; i <= e->rounds; ++i) {
        if (ordo_cuda_stream_enqueue(e->stream, launch_fn, e->launch) != ORDO_OK) {
            atomic_fetch_add(&e->errors, 1);
        }
        if (i % 16 == 0 && ordo_stream_signal(e->stream, e->signal, (uint64_t)i) != ORDO_OK) {
            atomic_fetch_add(&e->errors, 1);
        }
    }
    return NULL;
}

/* Threads enqueue to one stream at once, while a host wait now and then
 * holds the stream: every kernel runs once, every signal arrives. */
static void concurrent_enqueues_on_one_stream(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(ENQUEUERS);
    ordo_stream_t *stream = stream_make();
    enqueuer_t e[ENQUEUERS];
    pthread_t threads[ENQUEUERS];
    int rounds = (int)test_scaled(400);
    for (int t = 0; t < ENQUEUERS; ++t) {
        e[t] =
            (enqueuer_t){stream, cells + (CUdeviceptr)t * 8, test_signal_make(0), NULL, rounds, 0};
        e[t].launch = launch_new(kernels.step);
        e[t].launch->ptr = e[t].cell;
        e[t].launch->u = 0;
        e[t].launch->params[0] = &e[t].launch->ptr;
        e[t].launch->params[1] = &e[t].launch->u;
        threads[t] = test_thread_start(enqueue_many, &e[t]);
    }
    ordo_signal_t *host = test_signal_make(0);
    for (uint64_t k = 1; k <= 8; ++k) {
        assert_ok(ordo_stream_wait(stream, host, k));
        test_sleep_ms(1);
        assert_ok(ordo_signal_advance(host, k));
    }
    for (int t = 0; t < ENQUEUERS; ++t) {
        pthread_join(threads[t], NULL);
    }
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    for (int t = 0; t < ENQUEUERS; ++t) {
        assert_int_equal(atomic_load(&e[t].errors), 0);
        assert_int_equal(cell_read(cells, t), (unsigned long long)rounds);
        assert_ok(ordo_signal_wait(e[t].signal, (uint64_t)(rounds / 16 * 16), ORDO_DEADLINE_NOW));
        assert_ok(ordo_signal_destroy(e[t].signal));
    }
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(host));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* ---- randomized multi-stream programs ---------------------------------------- */

#define RANDOM_STREAMS 3

typedef struct program {
    int ops;
    int stream_of[4096];
    int a[4096];
    int b[4096];
    unsigned long long spin_ns[4096];
    unsigned long long expect[4096];
} program_t;

/* Op i writes cell i from two earlier cells, on a random stream. */
static program_t *program_make(uint64_t seed, int ops) {
    program_t *p = calloc(1, sizeof *p);
    p->ops = ops;
    uint64_t rng = seed;
    for (int i = 0; i < ops; ++i) {
        p->stream_of[i] = (int)(test_rand(&rng) % RANDOM_STREAMS);
        p->a[i] = i ? (int)(test_rand(&rng) % (uint64_t)i) : 0;
        p->b[i] = i ? (int)(test_rand(&rng) % (uint64_t)i) : 0;
        p->spin_ns[i] = test_rand(&rng) % 20000u;
        unsigned long long va = i ? p->expect[p->a[i]] : 0;
        unsigned long long vb = i ? p->expect[p->b[i]] : 0;
        p->expect[i] = combined(va, vb, i);
    }
    return p;
}

static void cells_check(const unsigned long long *expect, CUdeviceptr cells, int count) {
    unsigned long long *got = calloc((size_t)count, sizeof *got);
    device_read(got, cells, (size_t)count * sizeof *got);
    int wrong = 0;
    for (int i = 0; i < count; ++i) {
        wrong += got[i] != expect[i];
    }
    free(got);
    assert_int_equal(wrong, 0);
}

static void program_check(const program_t *p, CUdeviceptr cells) {
    cells_check(p->expect, cells, p->ops);
}

typedef struct tracked_launch {
    CUdeviceptr cells;
    const program_t *p;
    int i;
} tracked_launch_t;

static ordo_status_t tracked_launch_fn(void *ctx, ordo_stream_t *stream) {
    tracked_launch_t *t = ctx;
    combine(stream, t->cells, t->i, t->p->a[t->i], t->p->b[t->i], t->p->spin_ns[t->i]);
    return ORDO_OK;
}

/* A program's cells, streams, tracker and one buffer per cell. */
typedef struct tracked_rig {
    program_t *p;
    CUdeviceptr cells;
    ordo_stream_t *streams[RANDOM_STREAMS];
    ordo_tracker_t *tracker;
    ordo_buffer_t **buffers;
    tracked_launch_t *launches; /* per op, for submissions that outlive the call */
} tracked_rig_t;

static void rig_make(tracked_rig_t *rig, uint64_t seed, int ops) {
    rig->p = program_make(seed, ops);
    rig->cells = cells_alloc((size_t)ops);
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        rig->streams[k] = stream_make();
    }
    assert_ok(ordo_tracker_create(device, &rig->tracker));
    rig->buffers = calloc((size_t)ops, sizeof *rig->buffers);
    rig->launches = calloc((size_t)ops, sizeof *rig->launches);
    for (int i = 0; i < ops; ++i) {
        assert_ok(ordo_buffer_create(rig->tracker, &rig->buffers[i]));
        rig->launches[i] = (tracked_launch_t){rig->cells, rig->p, i};
    }
}

/* Op i of the program, tracked: it reads cells a and b and writes cell i
 * (reads it too where the program runs more than once: cell 0 reads
 * itself). */
static void rig_submit(tracked_rig_t *rig, int i, ordo_access_mode_t own) {
    ordo_access_t accesses[3] = {{rig->buffers[rig->p->a[i]], ORDO_ACCESS_READ},
                                 {rig->buffers[rig->p->b[i]], ORDO_ACCESS_READ},
                                 {rig->buffers[i], own}};
    assert_ok(ordo_tracker_submit(rig->tracker, rig->streams[rig->p->stream_of[i]],
                                  i ? accesses : &accesses[2], i ? 3 : 1, tracked_launch_fn,
                                  &rig->launches[i]));
}

static void rig_free(tracked_rig_t *rig) {
    for (int i = 0; i < rig->p->ops; ++i) {
        assert_ok(ordo_buffer_release(rig->buffers[i], NULL, NULL));
    }
    assert_ok(ordo_tracker_drain(rig->tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(rig->tracker));
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        assert_ok(ordo_stream_destroy(rig->streams[k]));
    }
    free(rig->launches);
    free(rig->buffers);
    free(rig->p);
    assert_cu(cu->MemFree(rig->cells));
    launches_free();
}

static void random_program_ordered_by_a_tracker(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    int ops = (int)test_scaled(3000);
    tracked_rig_t rig;
    rig_make(&rig, 7, ops);
    for (int i = 0; i < ops; ++i) {
        rig_submit(&rig, i, ORDO_ACCESS_WRITE);
    }
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        assert_ok(ordo_stream_synchronize(rig.streams[k], test_deadline()));
    }
    program_check(rig.p, rig.cells);
    ordo_tracker_metrics_t metrics;
    assert_ok(ordo_tracker_metrics(rig.tracker, &metrics));
    print_message("  %d ops: %llu device waits emitted, %llu elided\n", ops,
                  (unsigned long long)metrics.waits_emitted,
                  (unsigned long long)metrics.waits_elided);
    rig_free(&rig);
}

/* The same kind of program ordered by one signal per op, submitted in a
 * random interleaving of the streams' sequences: many waits come before
 * the signal they wait for is submitted (held, then bound on the device). */
static void random_program_with_waits_before_signals(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    int ops = (int)test_scaled(2000);
    program_t *p = program_make(11, ops);
    CUdeviceptr cells = cells_alloc((size_t)ops);
    ordo_stream_t *streams[RANDOM_STREAMS];
    int *sequence[RANDOM_STREAMS];
    int length[RANDOM_STREAMS] = {0};
    int next[RANDOM_STREAMS] = {0};
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        streams[k] = stream_make();
        sequence[k] = calloc((size_t)ops, sizeof(int));
    }
    ordo_signal_t **signals = calloc((size_t)ops, sizeof *signals);
    for (int i = 0; i < ops; ++i) {
        signals[i] = test_signal_make(0);
        int k = p->stream_of[i];
        sequence[k][length[k]++] = i;
    }
    uint64_t rng = 99;
    for (int submitted = 0; submitted < ops; ++submitted) {
        int k;
        do {
            k = (int)(test_rand(&rng) % RANDOM_STREAMS);
        } while (next[k] == length[k]);
        int i = sequence[k][next[k]++];
        ordo_stream_t *s = streams[k];
        if (i) {
            assert_ok(ordo_stream_wait(s, signals[p->a[i]], 1));
            assert_ok(ordo_stream_wait(s, signals[p->b[i]], 1));
        }
        combine(s, cells, i, p->a[i], p->b[i], p->spin_ns[i]);
        assert_ok(ordo_stream_signal(s, signals[i], 1));
    }
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        assert_ok(ordo_stream_synchronize(streams[k], test_deadline()));
    }
    program_check(p, cells);
    for (int k = 0; k < RANDOM_STREAMS; ++k) {
        assert_ok(ordo_stream_destroy(streams[k]));
        free(sequence[k]);
    }
    for (int i = 0; i < ops; ++i) {
        assert_ok(ordo_signal_destroy(signals[i]));
    }
    free(signals);
    free(p);
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* ---- graphs: a recording replayed as one CUDA graph ------------------------------ */

/* The cells program p leaves after `runs` runs from all zero, serially. */
static unsigned long long *program_expect_runs(const program_t *p, int runs) {
    unsigned long long *cells = calloc((size_t)p->ops, sizeof *cells);
    assert_non_null(cells);
    for (int r = 0; r < runs; ++r) {
        for (int i = 0; i < p->ops; ++i) {
            cells[i] = combined(cells[p->a[i]], cells[p->b[i]], i);
        }
    }
    return cells;
}

/* A random program recorded once and replayed `replays` times as `native`
 * asks; every replay reads what the one before wrote (cell 0 reads itself),
 * so the cells come out right only if each replay, and the replays among
 * themselves, are ordered as eager runs would be. The stand-in driver runs
 * a CUDA graph's nodes in a random order its edges allow. */
static void replay_program(ordo_graph_native_t native, uint32_t expect_native, uint64_t seed) {
    const int replays = 4;
    tracked_rig_t rig;
    rig_make(&rig, seed, (int)test_scaled(400));
    assert_ok(ordo_tracker_record_begin_native(rig.tracker, native));
    for (int i = 0; i < rig.p->ops; ++i) {
        rig_submit(&rig, i, ORDO_ACCESS_READ_WRITE);
    }
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(rig.tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, expect_native);
    for (int r = 0; r < replays; ++r) {
        assert_ok(ordo_graph_replay(graph));
    }
    /* Destroyed with its replays in flight: they run as enqueued. */
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_tracker_synchronize(rig.tracker, test_deadline()));
    unsigned long long *expect = program_expect_runs(rig.p, replays);
    cells_check(expect, rig.cells, rig.p->ops);
    free(expect);
    rig_free(&rig);
}

static void a_recording_replays_as_one_cuda_graph(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        replay_program(ORDO_GRAPH_NATIVE_REQUIRE, 1, seed);
        replay_program(ORDO_GRAPH_NATIVE_OFF, 0, seed);
    }
}

typedef struct one_cell {
    CUdeviceptr cells;
    int use_host_task;     /* also a host task on the stream: cannot be captured */
    int allocates;         /* also a cuMemAlloc: forbidden in a capture */
    ordo_stream_t *escape; /* also the handle of this other stream: refused */
    int calls;
    _Atomic int host_task_runs; /* by the stream's lane, while replays go on */
    /* Also an ordo_mem_allocate from this stream-ordered resource, freed
     * again: refused on a capturing thread. */
    ordo_mem_resource_t *async_memory;
} one_cell_t;

static ordo_status_t count_task(void *ctx) {
    ++*(int *)ctx;
    return ORDO_OK;
}

static ordo_status_t count_run_task(void *ctx) {
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

static ordo_status_t one_cell_launch(void *ctx, ordo_stream_t *stream) {
    one_cell_t *c = ctx;
    ++c->calls;
    combine(stream, c->cells, 0, 0, 0, 0);
    if (c->use_host_task) {
        ordo_status_t st = ordo_stream_host_task(stream, count_run_task, &c->host_task_runs);
        if (st != ORDO_OK) {
            return st;
        }
    }
    if (c->escape) {
        struct CUstream_st *other = NULL;
        ordo_status_t st = ordo_cuda_stream_handle(c->escape, &other);
        if (st != ORDO_OK) {
            return st;
        }
    }
    if (c->async_memory) {
        ordo_block_t *block = NULL;
        ordo_status_t st = ordo_mem_allocate(c->async_memory, 64, 0, stream, 0, &block, NULL);
        if (st == ORDO_OK) {
            st = ordo_mem_deallocate(c->async_memory, block, stream);
        }
        if (st != ORDO_OK) {
            return st;
        }
    }
    if (c->allocates) {
        /* The driver's own example of a potentially unsafe call: refused
         * on a capturing thread, and the capture invalidated. */
        CUdeviceptr more = 0;
        if (cu->MemAlloc(&more, 64) != CUDA_SUCCESS) {
            return ORDO_ERR_DEVICE;
        }
        (void)cu->MemFree(more);
    }
    return ORDO_OK;
}

/* A launch function that leaves another context current (or none: user
 * code working with another device) does not stop the lowering: the graph
 * calls after it get the device's context again. */
static ordo_status_t combine_then_unbind(void *ctx, ordo_stream_t *stream) {
    combine(stream, *(CUdeviceptr *)ctx, 0, 0, 0, 0);
    return cu->CtxSetCurrent(NULL) == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

static void a_launch_function_that_unbinds_the_context_is_still_lowered(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(1);
    ordo_stream_t *stream = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b;
    assert_ok(ordo_buffer_create(tracker, &b));
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_tracker_submit(tracker, stream, &access, 1, combine_then_unbind, &cells));
    }
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(combined(0, 0, 0), combined(0, 0, 0), 0));
    assert_ok(ordo__cuda_enter(device->impl, "test")); /* for the test's own calls */
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(stream));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* Records one launch of c on stream; the graph (or NULL) and the status of
 * the end. */
static ordo_status_t record_one(ordo_tracker_t *tracker, ordo_stream_t *stream, ordo_buffer_t *b,
                                one_cell_t *c, ordo_graph_native_t native, ordo_graph_t **graph) {
    assert_ok(ordo_tracker_record_begin_native(tracker, native));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(tracker, stream, &access, 1, one_cell_launch, c));
    return ordo_tracker_record_end(tracker, graph);
}

/* What a capture cannot hold: with AUTO the graph is replayed op by op
 * (launch functions called at every replay), with REQUIRE the recording
 * fails saying why; a rebind lowers the graph again, for the new buffer. */
static void what_a_cuda_graph_cannot_hold_is_replayed_op_by_op(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(2), other = cells_alloc(2);
    ordo_stream_t *stream = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b, *b2;
    assert_ok(ordo_buffer_create(tracker, &b));
    assert_ok(ordo_buffer_create(tracker, &b2));
    ordo_graph_t *graph = NULL;
    ordo_graph_info_t info;

    /* A host task inside a launch function. */
    one_cell_t c = {cells, 1, 0, NULL, 0, 0, NULL};
    assert_status(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph),
                  ORDO_ERR_UNSUPPORTED);
    assert_null(graph);
    assert_non_null(strstr(ordo_error_message(), "captured into a CUDA graph"));
    c = (one_cell_t){cells, 1, 0, NULL, 0, 0, NULL};
    assert_ok(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_AUTO, &graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 0);
    int calls = c.calls;
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(c.calls, calls + 2);
    assert_ok(ordo_graph_destroy(graph));

    /* An allocation: the driver invalidates the capture. */
    c = (one_cell_t){cells, 0, 1, NULL, 0, 0, NULL};
    assert_status(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph),
                  ORDO_ERR_UNSUPPORTED);
    assert_null(graph);

    /* A stream-ordered allocation: issued at once on the real stream, it
     * escaped the capture (the stand-in refuses it there, the real driver
     * would make it once, outside the graph, and the free was refused,
     * leaving the block allocated). Refused itself now, as what a captured
     * launch function may not do. */
    ordo_mem_resource_t *async_memory = NULL;
    ordo_status_t made = ordo_mem_cuda_async_create(device, &async_memory);
    if (made == ORDO_OK) {
        c = (one_cell_t){cells, 0, 0, NULL, 0, 0, async_memory};
        assert_status(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph),
                      ORDO_ERR_UNSUPPORTED);
        assert_null(graph);
        assert_non_null(strstr(ordo_error_message(), "ordo_mem_allocate: a launch function"));
        uint64_t held = 1;
        assert_ok(ordo_mem_reap_pending(async_memory, test_deadline()));
        assert_ok(ordo_mem_bytes_outstanding(async_memory, &held));
        assert_int_equal(held, 0);
        assert_ok(ordo_mem_resource_destroy(async_memory));
    } else {
        print_message("  the stream-ordered allocation's part skipped: %s\n", ordo_error_message());
    }

    /* Another stream's handle: work on it would escape the capture. */
    ordo_stream_t *elsewhere = stream_make();
    c = (one_cell_t){cells, 0, 0, elsewhere, 0, 0, NULL};
    assert_status(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph),
                  ORDO_ERR_UNSUPPORTED);
    assert_null(graph);
    assert_ok(ordo_stream_destroy(elsewhere));

    /* An empty recording is an empty graph in every mode. */
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 0);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_destroy(graph));

    /* A host task among the submissions: not device work. */
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    int ran = 0;
    assert_ok(ordo_tracker_submit_host(tracker, stream, &access, 1, count_task, &ran));
    assert_status(ordo_tracker_record_end(tracker, &graph), ORDO_ERR_UNSUPPORTED);
    assert_null(graph);

    /* Lowered: the launch function is called once, at the end of the
     * recording, and each replay runs what it enqueued then. */
    c = (one_cell_t){cells, 0, 0, NULL, 0, 0, NULL};
    assert_ok(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    assert_int_equal(c.calls, 1);
    for (int r = 0; r < 3; ++r) {
        assert_ok(ordo_graph_replay(graph));
    }
    assert_int_equal(c.calls, 1);
    /* Rebound, with the context pointing at other cells: lowered again at
     * the next replay, which runs on them. */
    c.cells = other;
    assert_ok(ordo_graph_rebind(graph, b, b2));
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c.calls, 2);
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c.calls, 2);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    unsigned long long v = 0; /* two op-by-op replays above, three native ones */
    for (int r = 0; r < 5; ++r) {
        v = combined(v, v, 0);
    }
    assert_int_equal(cell_read(cells, 0), v);
    assert_int_equal(cell_read(other, 0), combined(combined(0, 0, 0), combined(0, 0, 0), 0));
    assert_ok(ordo_graph_destroy(graph));

    assert_status(ordo_tracker_record_begin_native(tracker, (ordo_graph_native_t)7),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_buffer_release(b2, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(stream));
    assert_cu(cu->MemFree(cells));
    assert_cu(cu->MemFree(other));
    launches_free();
}

typedef struct fill_ctx {
    CUdeviceptr cells;
    unsigned long long value;
    int use_host_task;
    _Atomic int host_task_runs; /* by the stream's lane, while replays go on */
} fill_ctx_t;

static ordo_status_t fill_launch(void *ctx, ordo_stream_t *stream) {
    fill_ctx_t *f = ctx;
    fill(stream, f->cells, f->value, 1);
    return f->use_host_task ? ordo_stream_host_task(stream, count_run_task, &f->host_task_runs)
                            : ORDO_OK;
}

/* A lowered graph runs what its launch function enqueued when it was
 * lowered; ordo_graph_refresh, or a new context for the launch function
 * (ordo_graph_set_task_context), has it called again. Under AUTO, a refresh
 * whose capture fails leaves the graph replayed op by op, in order with
 * its native replays before. */
static void a_refresh_lowers_the_graph_again(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(1);
    ordo_stream_t *streams[2] = {stream_make(), stream_make()};
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b;
    assert_ok(ordo_buffer_create(tracker, &b));
    fill_ctx_t f = {cells, 100, 0, 0};
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_AUTO));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(tracker, streams[0], &access, 1, fill_launch, &f));
    one_cell_t c = {cells, 0, 0, NULL, 0, 0, NULL};
    assert_ok(ordo_tracker_submit(tracker, streams[1], &access, 1, one_cell_launch, &c));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    f.value = 200; /* not seen: the graph holds the launch made with 100 */
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(100, 100, 0));
    assert_ok(ordo_graph_refresh(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(200, 200, 0));
    /* A launch function's context set: lowered again with it, natively. */
    fill_ctx_t g = {cells, 250, 0, 0};
    assert_ok(ordo_graph_set_task_context(graph, 0, &g));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(250, 250, 0));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    assert_ok(ordo_graph_set_task_context(graph, 0, &f));
    /* A refresh that cannot be captured: op by op from then on. */
    f.value = 300;
    f.use_host_task = 1;
    assert_ok(ordo_graph_refresh(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 0);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(300, 300, 0));
    assert_int_equal(atomic_load(&f.host_task_runs),
                     2);                  /* its host task ran at both op-by-op replays */
    assert_ok(ordo_graph_refresh(graph)); /* nothing for a graph replayed op by op */
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    for (int k = 0; k < 2; ++k) {
        assert_ok(ordo_stream_destroy(streams[k]));
    }
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* A host task that fails its stream once opened (bounded). */
typedef struct failing_gate {
    _Atomic int open;
} failing_gate_t;

static ordo_status_t failing_gate_task(void *ctx) {
    failing_gate_t *g = ctx;
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&g->open) && ordo_time_now_ns() < until) {
        sched_yield();
    }
    return ordo_fail(ORDO_ERR_ABORTED, "the gate failed its stream on purpose");
}

/* Lane 1's launch function at the re-lowering: opens the gate of its own
 * stream and waits (bounded) until the stream has failed, so the native
 * replay that follows meets a failed stream on lane 1. */
typedef struct fail_during_lowering {
    CUdeviceptr cells;
    ordo_stream_t *stream;
    failing_gate_t *gate;
    int arm;
} fail_during_lowering_t;

static ordo_status_t fail_during_lowering_launch(void *ctx, ordo_stream_t *stream) {
    fail_during_lowering_t *f = ctx;
    combine(stream, f->cells, 1, 1, 1, 0);
    if (f->arm) {
        atomic_store(&f->gate->open, 1);
        ordo_deadline_t until = test_deadline();
        while (ordo_stream_status(f->stream) == ORDO_OK && ordo_time_now_ns() < until) {
            sched_yield();
        }
    }
    return ORDO_OK;
}

/* A native replay refused by one lane's failed stream breaks lane 0 too
 * (every lane's exit waits for it), but only a refusal by a healthy stream
 * spends the graph: the next replay reports the failed stream's failure,
 * not ORDO_ERR_UNAVAILABLE. */
static void a_native_replay_refused_by_a_failed_stream_reports_its_failure(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(2);
    ordo_stream_t *s0 = stream_make(), *s1 = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b0, *b1;
    assert_ok(ordo_buffer_create(tracker, &b0));
    assert_ok(ordo_buffer_create(tracker, &b1));
    one_cell_t c = {cells, 0, 0, NULL, 0, 0, NULL};
    failing_gate_t gate = {0};
    fail_during_lowering_t f = {cells, s1, &gate, 0};
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t a0 = {b0, ORDO_ACCESS_READ_WRITE}, a1 = {b1, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(tracker, s0, &a0, 1, one_cell_launch, &c));
    assert_ok(ordo_tracker_submit(tracker, s1, &a1, 1, fail_during_lowering_launch, &f));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));

    assert_ok(ordo_stream_host_task(s1, failing_gate_task, &gate));
    f.arm = 1;
    assert_ok(ordo_graph_refresh(graph));
    assert_true(ordo_graph_replay(graph) != ORDO_OK); /* lane 1's stream failed under it */
    /* Lane 0's stream fails too (a failing task in its gap: the graph was
     * not launched); once it has, the report still names lane 1's. */
    ordo_deadline_t until = test_deadline();
    while (ordo_stream_status(s0) == ORDO_OK && ordo_time_now_ns() < until) {
        sched_yield();
    }
    assert_status(ordo_graph_replay(graph), ORDO_ERR_ABORTED);
    if (!strstr(ordo_error_message(), "on purpose")) {
        fail_msg("the next replay said \"%s\", not the stream's failure", ordo_error_message());
    }
    (void)ordo_tracker_synchronize(tracker, test_deadline());
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(b0, NULL, NULL));
    assert_ok(ordo_buffer_release(b1, NULL, NULL));
    (void)ordo_tracker_drain(tracker, test_deadline());
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(s0));
    assert_ok(ordo_stream_destroy(s1));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* A host task that holds its stream's lane until opened (or the test's
 * deadline passes: then it fails, and so does the test). */
typedef struct lane_latch {
    _Atomic int entered;
    _Atomic int open;
} lane_latch_t;

static ordo_status_t lane_latch_task(void *ctx) {
    lane_latch_t *latch = ctx;
    atomic_store(&latch->entered, 1);
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&latch->open)) {
        if (ordo_time_now_ns() >= until) {
            return ORDO_ERR_TIMEOUT;
        }
        sched_yield();
    }
    return ORDO_OK;
}

/* A launch function of n combine kernels on one cell. */
typedef struct n_cells {
    CUdeviceptr cells;
    int kernels;
    int calls;
} n_cells_t;

static ordo_status_t n_cells_launch(void *ctx, ordo_stream_t *stream) {
    n_cells_t *c = ctx;
    ++c->calls;
    for (int k = 0; k < c->kernels; ++k) {
        combine(stream, c->cells, 0, 0, 0, 0);
    }
    return ORDO_OK;
}

/* A graph lowered again (rebound, refreshed) is updated in place while no
 * launch of it is held on its lane: the launches already issued (queued on
 * the device behind a gate here) run the graph as it was, the later ones
 * as it is now. A launch held on the lane would run the updated graph, so
 * then the new capture is instantiated instead; so it is when the launch
 * function's work has another shape (the driver refuses that update). */
static void a_graph_lowered_again_is_updated_in_place_when_it_can_be(void **state) {
    (void)state;
    REQUIRE_GATES();
    cuda_device_t *d = device->impl;
    if (!d->cu->GraphExecUpdate) {
        SKIP_FOR_WANT_OF("the driver has no cuGraphExecUpdate (CUDA 12.0)");
    }
    CUdeviceptr cells = cells_alloc(1), other = cells_alloc(1), third = cells_alloc(1);
    ordo_stream_t *stream = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b, *b2;
    assert_ok(ordo_buffer_create(tracker, &b));
    assert_ok(ordo_buffer_create(tracker, &b2));
    n_cells_t c = {cells, 1, 0};
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(tracker, stream, &access, 1, n_cells_launch, &c));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    uint64_t updated = atomic_load(&d->graphs_updated);
    uint64_t remade = atomic_load(&d->graphs_reinstantiated);

    /* Two launches issued and held on the device; then a rebind. */
    static gate_t gate;
    gate_make(&gate);
    gate_hold(stream, &gate);
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_false(holding(stream));
    c.cells = other;
    assert_ok(ordo_graph_rebind(graph, b, b2));
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c.calls, 2);
    assert_int_equal(atomic_load(&d->graphs_updated), updated + 1);
    assert_int_equal(atomic_load(&d->graphs_reinstantiated), remade);
    gate_open(&gate);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(combined(0, 0, 0), combined(0, 0, 0), 0));
    assert_int_equal(cell_read(other, 0), combined(0, 0, 0));

    /* A launch held on the lane behind a host task: instantiated anew. */
    lane_latch_t latch = {0, 0};
    assert_ok(ordo_stream_host_task(stream, lane_latch_task, &latch));
    assert_ok(ordo_graph_replay(graph)); /* on other */
    assert_true(holding(stream));
    c.cells = third;
    assert_ok(ordo_graph_rebind(graph, b2, b));
    assert_ok(ordo_graph_replay(graph)); /* on third */
    assert_int_equal(c.calls, 3);
    assert_int_equal(atomic_load(&d->graphs_updated), updated + 1);
    assert_int_equal(atomic_load(&d->graphs_reinstantiated), remade + 1);
    atomic_store(&latch.open, 1);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(other, 0), combined(combined(0, 0, 0), combined(0, 0, 0), 0));
    assert_int_equal(cell_read(third, 0), combined(0, 0, 0));

    /* Idle again, it updates the new one in place; then work of another
     * shape (two kernels): the driver refuses the update. */
    c.cells = cells;
    assert_ok(ordo_graph_refresh(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(atomic_load(&d->graphs_updated), updated + 2);
    c.kernels = 2;
    assert_ok(ordo_graph_refresh(graph));
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c.calls, 5);
    assert_int_equal(atomic_load(&d->graphs_updated), updated + 2);
    assert_int_equal(atomic_load(&d->graphs_reinstantiated), remade + 2);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    unsigned long long v = combined(combined(0, 0, 0), combined(0, 0, 0), 0);
    for (int k = 0; k < 3; ++k) {
        v = combined(v, v, 0);
    }
    assert_int_equal(cell_read(cells, 0), v);

    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_buffer_release(b2, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(stream));
    gate_free(&gate);
    assert_cu(cu->MemFree(cells));
    assert_cu(cu->MemFree(other));
    assert_cu(cu->MemFree(third));
    launches_free();
}

/* ---- beside the program's own stream captures ----------------------------- */

/* A capture of the program's, on a stream and a thread of its own: begun
 * in mode, held until told to end (or the deadline), then ended. */
typedef struct program_capture {
    CUstreamCaptureMode mode;
    _Atomic int begun; /* 1: capturing; -1: could not begin */
    _Atomic int end;
    CUresult ended; /* cuStreamEndCapture's result */
} program_capture_t;

static void *program_capture_main(void *arg) {
    program_capture_t *pc = arg;
    cuda_device_t *d = device->impl;
    CUstream raw = NULL;
    if (cu->CtxSetCurrent(d->ctx) != CUDA_SUCCESS ||
        cu->StreamCreateWithPriority(&raw, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
        atomic_store(&pc->begun, -1);
        return NULL;
    }
    if (cu->StreamBeginCapture(raw, pc->mode) != CUDA_SUCCESS) {
        (void)cu->StreamDestroy(raw);
        atomic_store(&pc->begun, -1);
        return NULL;
    }
    atomic_store(&pc->begun, 1);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&pc->end) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    CUgraph graph = NULL;
    pc->ended = cu->StreamEndCapture(raw, &graph);
    if (graph) {
        (void)cu->GraphDestroy(graph);
    }
    (void)cu->StreamDestroy(raw);
    return NULL;
}

static pthread_t program_capture_start(program_capture_t *pc, CUstreamCaptureMode mode) {
    *pc = (program_capture_t){.mode = mode, .ended = CUDA_ERROR_UNKNOWN};
    pthread_t thread = test_thread_start(program_capture_main, pc);
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&pc->begun) == 0) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(atomic_load(&pc->begun), 1);
    return thread;
}

static void program_capture_end(program_capture_t *pc, pthread_t thread) {
    atomic_store(&pc->end, 1);
    pthread_join(thread, NULL);
}

/* Frees of earlier tests still queued or under way are done. */
static void frees_settle(cuda_device_t *d) {
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load_explicit(&d->frees_done, memory_order_acquire) <
           atomic_load_explicit(&d->frees_queued, memory_order_relaxed)) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
}

/* Waits until counter reaches at least value. */
static void counter_reach(_Atomic uint64_t *counter, uint64_t value) {
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load_explicit(counter, memory_order_acquire) < value) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
}

/* A host task that reads its thread's capture interaction mode. */
static ordo_status_t capture_mode_task(void *ctx) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (cu->ThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) {
        return ORDO_ERR_DEVICE;
    }
    *(int *)ctx = (int)mode;
    (void)cu->ThreadExchangeStreamCaptureMode(&mode);
    return ORDO_OK;
}

/* While another thread of the program captures a stream in GLOBAL mode
 * (PyTorch's default), a thread in the default mode that makes a
 * potentially unsafe call (cuEventQuery, cuMemFree) is refused, and the
 * refusal breaks that capture. ordo makes its queries (on the completion
 * thread, or a waiting thread's pass) and its frees (the free thread) in
 * the RELAXED mode: ordo's work completes, its memory goes back, and the
 * program's capture ends whole; a host task runs in the default mode. */
static void ordo_runs_beside_a_global_capture_of_the_program(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    if (!cu->ThreadExchangeStreamCaptureMode) {
        SKIP_FOR_WANT_OF("the driver has no cuThreadExchangeStreamCaptureMode");
    }
    cuda_device_t *d = device->impl;
    ordo_mem_resource_t *direct;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    CUdeviceptr cells = cells_alloc(1);
    ordo_block_t *block;
    assert_ok(ordo_mem_allocate(direct, 4096, 0, stream, 0, &block, NULL));
    frees_settle(d);
    const uint64_t done = atomic_load(&d->frees_done);

    /* Static: a failed assertion leaves the capturing thread running to
     * its deadline, and it must find pc there. */
    static program_capture_t pc;
    pthread_t capturer = program_capture_start(&pc, CU_STREAM_CAPTURE_MODE_GLOBAL);
    combine(stream, cells, 0, 0, 0, 0);
    int host_task_mode = -1;
    assert_ok(ordo_stream_host_task(stream, capture_mode_task, &host_task_mode));
    assert_ok(ordo_stream_signal(stream, s, 1));
    assert_ok(ordo_signal_wait(s, 1, test_deadline()));
    assert_ok(ordo_mem_deallocate(direct, block, stream));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    counter_reach(&d->frees_done, done + 1);
    program_capture_end(&pc, capturer);
    assert_int_equal(pc.ended, CUDA_SUCCESS);
    /* Program code on ordo's threads keeps the default mode. */
    assert_int_equal(host_task_mode, CU_STREAM_CAPTURE_MODE_GLOBAL);

    assert_true(cell_read(cells, 0) == combined(0, 0, 0));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_signal_destroy(s));
    assert_cu(cu->MemFree(cells));
}

/* One cell, a stream, a tracker with one buffer, and a page-locked block
 * for a draining free, with the device's earlier frees done. */
typedef struct drain_rig {
    cuda_device_t *d;
    CUdeviceptr cells;
    ordo_stream_t *stream;
    ordo_tracker_t *tracker;
    ordo_buffer_t *b;
    void *host;
} drain_rig_t;

static void drain_rig_make(drain_rig_t *rig) {
    rig->d = device->impl;
    rig->cells = cells_alloc(1);
    rig->stream = stream_make();
    assert_ok(ordo_tracker_create(device, &rig->tracker));
    assert_ok(ordo_buffer_create(rig->tracker, &rig->b));
    rig->host = NULL;
    assert_cu(cu->MemHostAlloc(&rig->host, 4096, CU_MEMHOSTALLOC_PORTABLE));
    frees_settle(rig->d);
}

/* Replays graph once, checks the cell, and frees everything but the
 * block (handed to a free). */
static void drain_rig_finish(drain_rig_t *rig, ordo_graph_t *graph) {
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_tracker_synchronize(rig->tracker, test_deadline()));
    assert_true(cell_read(rig->cells, 0) == combined(0, 0, 0));
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(rig->b, NULL, NULL));
    assert_ok(ordo_tracker_drain(rig->tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(rig->tracker));
    assert_ok(ordo_stream_destroy(rig->stream));
    assert_cu(cu->MemFree(rig->cells));
}

/* A launch function, captured while ordo lowers a graph, that hands the
 * free thread a free which drains the context first (and opens a gate, if
 * given one), then returns once a drain has found the lowering in its way
 * (drains_deferred), or was refused (the lowering's capture broken). */
typedef struct drain_during_capture {
    cuda_device_t *d;
    CUdeviceptr cells;
    void *host;
    gate_t *gate;
    uint64_t deferred; /* the count once a drain waits for the lowering */
    uint64_t refused;  /* the count before */
    int calls;
    int late;
} drain_during_capture_t;

static ordo_status_t drain_during_capture_launch(void *ctx, ordo_stream_t *stream) {
    drain_during_capture_t *c = ctx;
    combine(stream, c->cells, 0, 0, 0, 0);
    if (c->calls++ == 0) {
        ordo__cuda_defer_free(c->d, 0, c->host, 1);
        if (c->gate) {
            gate_open(c->gate);
        }
        const ordo_deadline_t deadline = test_deadline();
        while (atomic_load_explicit(&c->d->drains_deferred, memory_order_acquire) < c->deferred &&
               atomic_load_explicit(&c->d->drains_refused, memory_order_acquire) == c->refused) {
            if (ordo_time_now_ns() >= deadline) {
                c->late = 1;
                break;
            }
            sched_yield();
        }
    }
    return ORDO_OK;
}

/* Records one launch of c on the rig's stream under REQUIRE: the capture
 * ends whole, with no drain refused meanwhile. */
static ordo_graph_t *record_draining(drain_rig_t *rig, drain_during_capture_t *c) {
    assert_ok(ordo_tracker_record_begin_native(rig->tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t access = {rig->b, ORDO_ACCESS_READ_WRITE};
    assert_ok(
        ordo_tracker_submit(rig->tracker, rig->stream, &access, 1, drain_during_capture_launch, c));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(rig->tracker, &graph));
    assert_false(c->late);
    assert_int_equal(c->calls, 1);
    assert_int_equal(atomic_load(&rig->d->drains_refused), c->refused);
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    return graph;
}

/* A drain waits for everything the device was given, a stream held at a
 * gate by the host included. A lowering that finds such a drain under way
 * goes ahead after a bound (the drain's synchronize made its check for
 * captures when it began), rather than wait for a gate the same thread
 * may be the one to open; a drain that comes after, while the lowering
 * captures, still waits for it. */
static void a_lowering_goes_ahead_of_a_drain_held_by_the_host(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    REQUIRE_GATES();
    drain_rig_t rig;
    drain_rig_make(&rig);
    cuda_device_t *d = rig.d;
    ordo_stream_t *gated = stream_make();
    static gate_t gate;
    gate_make(&gate);
    gate_hold(gated, &gate);
    void *second = NULL;
    assert_cu(cu->MemHostAlloc(&second, 4096, CU_MEMHOSTALLOC_PORTABLE));
    const uint64_t begun = atomic_load(&d->frees_begun);
    const uint64_t done = atomic_load(&d->frees_done);
    ordo__cuda_defer_free(d, 0, rig.host, 1); /* its drain waits for the gate */
    counter_reach(&d->frees_begun, begun + 1);
    drain_during_capture_t c = {d,
                                rig.cells,
                                second,
                                &gate,
                                atomic_load(&d->drains_deferred) + 1,
                                atomic_load(&d->drains_refused),
                                0,
                                0};
    ordo_graph_t *graph = record_draining(&rig, &c);
    counter_reach(&d->frees_done, done + 2);
    drain_rig_finish(&rig, graph);
    assert_ok(ordo_stream_synchronize(gated, test_deadline()));
    assert_ok(ordo_stream_destroy(gated));
    gate_free(&gate);
}

/* A launch function, captured while ordo lowers a graph on the shared
 * runtime, that hands an owned runtime of the same GPU a draining free,
 * and once that drain waits for the lowering, has another thread release
 * the owned runtime: the release stops the free thread, whose drain must
 * then not be made (it would break this capture). */
typedef struct release_during_capture {
    ordo_device_t *owned;
    CUdeviceptr cells;
    void *host;
    uint64_t deferred;
    ordo_status_t released;
    int late;
} release_during_capture_t;

static void *release_main(void *arg) {
    release_during_capture_t *c = arg;
    c->released = ordo_device_release(c->owned);
    return NULL;
}

static ordo_status_t release_during_capture_launch(void *ctx, ordo_stream_t *stream) {
    release_during_capture_t *c = ctx;
    combine(stream, c->cells, 0, 0, 0, 0);
    cuda_device_t *od = c->owned->impl;
    ordo__cuda_defer_free(od, 0, c->host, 1);
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load_explicit(&od->drains_deferred, memory_order_acquire) < c->deferred) {
        if (ordo_time_now_ns() >= deadline) {
            c->late = 1;
            return ORDO_OK;
        }
        sched_yield();
    }
    pthread_t releaser = test_thread_start(release_main, c);
    pthread_join(releaser, NULL);
    return ORDO_OK;
}

static void releasing_another_runtime_leaves_a_lowering_whole(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    drain_rig_t rig;
    drain_rig_make(&rig);
    ordo_device_t *owned = NULL;
    assert_ok(ordo_device_create_owned("cuda:0", NULL, &owned));
    cuda_device_t *od = owned->impl;
    release_during_capture_t c = {
        owned, rig.cells, rig.host, atomic_load(&od->drains_deferred) + 1, ORDO_ERR_BUSY, 0};
    assert_ok(ordo_tracker_record_begin_native(rig.tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t access = {rig.b, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(rig.tracker, rig.stream, &access, 1,
                                  release_during_capture_launch, &c));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(rig.tracker, &graph));
    assert_false(c.late);
    assert_ok(c.released);
    /* The drain was not made, so its memory was left alone: it is still
     * there to free. */
    assert_cu(cu->MemFreeHost(rig.host));
    drain_rig_finish(&rig, graph);
}

/* A free whose stream failed short of it drains the context
 * (cuCtxSynchronize) before it gives the memory back; the driver refuses
 * to synchronize a context while any of its streams captures, and breaks
 * the capture. A drain waits for a lowering of ordo's to end (the
 * lowering's capture ends whole); against a capture of the program's, the
 * free is parked, the memory kept, the frees behind it go on, and the
 * drain is tried again later. */
static void a_draining_free_waits_out_captures(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    drain_rig_t rig;
    drain_rig_make(&rig);
    cuda_device_t *d = rig.d;
    const uint64_t refused = atomic_load(&d->drains_refused);

    /* ordo's own lowering: the drain waits for it, the capture ends
     * whole, then the free goes. */
    drain_during_capture_t c = {
        d, rig.cells, rig.host, NULL, atomic_load(&d->drains_deferred) + 1, refused, 0, 0};
    const uint64_t done = atomic_load(&d->frees_done);
    ordo_graph_t *graph = record_draining(&rig, &c);
    counter_reach(&d->frees_done, done + 1);
    drain_rig_finish(&rig, graph);

    /* The program's capture: the drain is refused (the stand-in follows
     * the CUDA Programming Guide: no context synchronize while any stream
     * of it captures), the free parked with its memory, and a free queued
     * behind it goes on. A driver that lets the drain through instead
     * simply frees. */
    void *parked_host = NULL;
    assert_cu(cu->MemHostAlloc(&parked_host, 4096, CU_MEMHOSTALLOC_PORTABLE));
    CUdeviceptr plain = 0;
    assert_cu(cu->MemAlloc(&plain, 4096));
    static program_capture_t pc; /* static: see ordo_runs_beside_a_global_capture_of_the_program */
    pthread_t capturer = program_capture_start(&pc, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    const uint64_t done_before = atomic_load(&d->frees_done);
    ordo__cuda_defer_free(d, 0, parked_host, 1);
    ordo__cuda_defer_free(d, plain, NULL, 0);
    counter_reach(&d->frees_done, done_before + 1);
    if (atomic_load_explicit(&d->drains_refused, memory_order_acquire) != refused) {
        /* Refused: parked, only the plain free done while the capture
         * lasts. */
        assert_int_equal(atomic_load(&d->drains_parked), 1);
        assert_int_equal(atomic_load(&d->frees_done), done_before + 1);
    } else {
        print_message("  the driver drained the context during another thread's capture\n");
    }
    program_capture_end(&pc, capturer);
    counter_reach(&d->frees_done, done_before + 2);
    assert_int_equal(atomic_load(&d->drains_parked), 0);
}

/* Whether message begins with one of the calls in names ("a|b|c"), the
 * whole name (a part may be named after it: "api, plain_events: ..."). */
static int names_one_of(const char *message, const char *names) {
    for (const char *name = names; *name;) {
        size_t length = strcspn(name, "|");
        if (strncmp(message, name, length) == 0 && message[length] != '_' &&
            !isalnum((unsigned char)message[length])) {
            return 1;
        }
        name += length + (name[length] == '|');
    }
    return 0;
}

/* Runs call with host allocation k failing, for k = 0, 1, ... until it
 * succeeds: each refusal is ORDO_ERR_OUT_OF_MEMORY naming api (or one of
 * the calls api lists, "a|b"), and leaves
 * no block behind where exact is set. */
#define SWEEP_ALLOCATIONS(call, api, exact)                                                        \
    do {                                                                                           \
        long k_ = 0;                                                                               \
        for (;; ++k_) {                                                                            \
            size_t sweep_before_ = 0, sweep_after_ = 0;                                            \
            assert_ok(ordo_allocator_live_blocks(&sweep_before_));                                 \
            atomic_store(&allocations_left, k_);                                                   \
            ordo_status_t sweep_st_ = (call);                                                      \
            atomic_store(&allocations_left, -1);                                                   \
            if (sweep_st_ == ORDO_OK) {                                                            \
                break;                                                                             \
            }                                                                                      \
            assert_int_equal(sweep_st_, ORDO_ERR_OUT_OF_MEMORY);                                   \
            if (!names_one_of(ordo_error_message(), (api))) {                                      \
                fail_msg("refused at allocation %ld: \"%s\"", k_, ordo_error_message());           \
            }                                                                                      \
            assert_ok(ordo_allocator_live_blocks(&sweep_after_));                                  \
            if (exact) {                                                                           \
                assert_int_equal(sweep_after_, sweep_before_);                                     \
            }                                                                                      \
        }                                                                                          \
        print_message("  %s: %ld allocation(s) swept\n", (api), k_);                               \
    } while (0)

/* A CUDA device's build refused at each of its host allocations in turn
 * names the call that built it (not another entry point), and leaves no
 * block behind; then the same for a stream of it, its memory stack (the
 * device's budget record may stay, made on the way: it is the device's,
 * counted at the end), a block and its stream-ordered free (a refused free
 * leaves the block the caller's, to free again). */
static void each_refused_host_allocation_names_its_call(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    size_t at_start = 0, at_end = 0;
    assert_ok(ordo_allocator_live_blocks(&at_start));
    ordo_device_t *owned = NULL;
    SWEEP_ALLOCATIONS(ordo_device_create_owned("cuda:0", NULL, &owned), "ordo_device_create_owned",
                      1);
    ordo_stream_t *stream = NULL;
    SWEEP_ALLOCATIONS(ordo_stream_create(owned, 0, &stream), "ordo_stream_create", 1);
    ordo_mem_resource_t *memory = NULL;
    SWEEP_ALLOCATIONS(ordo_device_memory(owned, &memory), "ordo_device_memory", 0);
    ordo_block_t *block = NULL;
    SWEEP_ALLOCATIONS(ordo_mem_allocate(memory, 4096, 0, stream, 0, &block, NULL),
                      "ordo_mem_allocate", 1);
    SWEEP_ALLOCATIONS(ordo_mem_deallocate(memory, block, stream), "ordo_mem_deallocate", 0);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_device_release(owned));
    assert_ok(ordo_allocator_live_blocks(&at_end));
    assert_int_equal(at_end, at_start);
}

/* Records one launch of c into a CUDA graph: the first refusal met. */
static ordo_status_t record_native(ordo_tracker_t *tracker, ordo_stream_t *stream, ordo_buffer_t *b,
                                   one_cell_t *c, ordo_graph_t **out_graph) {
    ordo_status_t st = ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE);
    if (st != ORDO_OK) {
        return st;
    }
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    (void)ordo_tracker_submit(tracker, stream, &access, 1, one_cell_launch, c);
    return ordo_tracker_record_end(tracker, out_graph); /* the submission's refusal, if any */
}

/* The same sweep over the CUDA work of a program: a tracker, the CUDA
 * memory resources, a timing event, a recording lowered to a CUDA graph,
 * its replays and a tracked launch. Each refused call leaves things as
 * they were: the cell holds exactly the work that was accepted. (The
 * device's pools keep what they grew to: no count of blocks at the end.) */
static void each_refused_host_allocation_in_cuda_work_names_its_call(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(1);
    ordo_stream_t *stream = stream_make();
    ordo_tracker_t *tracker = NULL;
    SWEEP_ALLOCATIONS(ordo_tracker_create(device, &tracker), "ordo_tracker_create", 1);
    ordo_mem_resource_t *memory = NULL;
    SWEEP_ALLOCATIONS(ordo_mem_cuda_async_create(device, &memory), "ordo_mem_cuda_async_create", 1);
    assert_ok(ordo_mem_resource_destroy(memory));
    SWEEP_ALLOCATIONS(ordo_mem_host_pinned_create(device, &memory), "ordo_mem_host_pinned_create",
                      1);
    assert_ok(ordo_mem_resource_destroy(memory));
    ordo_event_t *event = NULL;
    SWEEP_ALLOCATIONS(ordo_event_create(device, ORDO_EVENT_TIMING, &event), "ordo_event_create", 0);
    SWEEP_ALLOCATIONS(ordo_event_record(event, stream), "ordo_event_record", 0);
    assert_ok(ordo_event_synchronize(event, test_deadline()));
    assert_ok(ordo_event_destroy(event));
    ordo_buffer_t *b = NULL;
    SWEEP_ALLOCATIONS(ordo_buffer_create(tracker, &b), "ordo_buffer_create", 0);
    one_cell_t c = {cells, 0, 0, NULL, 0, 0, NULL};
    ordo_graph_t *graph = NULL;
    SWEEP_ALLOCATIONS(
        record_native(tracker, stream, b, &c, &graph),
        "ordo_tracker_record_begin_native|ordo_tracker_submit|ordo_tracker_record_end", 0);
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, 1);
    /* A replay refused part-way (a point it could not allocate after its
     * launch) spends the graph and fails the lane's stream (graph.h): not
     * swept. */
    assert_ok(ordo_graph_replay(graph));
    assert_ok(ordo_graph_replay(graph));
    ordo_access_t access = {b, ORDO_ACCESS_READ_WRITE};
    SWEEP_ALLOCATIONS(ordo_tracker_submit(tracker, stream, &access, 1, one_cell_launch, &c),
                      "ordo_tracker_submit", 0);
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    /* Three accepted launches, each cell[0] = combined(cell[0], cell[0], 0). */
    unsigned long long expected = 0;
    for (int i = 0; i < 3; ++i) {
        expected = combined(expected, expected, 0);
    }
    assert_int_equal(cell_read(cells, 0), expected);
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(stream));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* A graph destroyed while a launch of it is held on its stream's lane,
 * with no memory to be had then: the executable graph is given back after
 * the launch, which runs (its place in the stream was reserved when the
 * graph was made). */
static void a_destroy_without_memory_waits_for_a_held_launch(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(1);
    ordo_stream_t *stream = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b;
    assert_ok(ordo_buffer_create(tracker, &b));
    one_cell_t c = {cells, 0, 0, NULL, 0, 0, NULL};
    ordo_graph_t *graph = NULL;
    assert_ok(record_one(tracker, stream, b, &c, ORDO_GRAPH_NATIVE_REQUIRE, &graph));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, gate, 1));
    assert_true(holding(stream));
    assert_ok(ordo_graph_replay(graph)); /* its launch held behind the gate */
    atomic_store(&allocations_fail, 1);
    ordo_status_t st = ordo_graph_destroy(graph);
    atomic_store(&allocations_fail, 0);
    assert_ok(st);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(cell_read(cells, 0), combined(0, 0, 0));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(stream));
    assert_cu(cu->MemFree(cells));
    launches_free();
}

/* A lane of a native graph that holds a wait before a replay, met only by
 * a signal another lane gives after it: the join would wait for that
 * signal, which waits for the graph. The replay goes op by op (the launch
 * functions called again), the next one natively again. */
static void a_replay_behind_a_held_wait_goes_op_by_op(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    CUdeviceptr cells = cells_alloc(2), other = cells_alloc(2);
    ordo_stream_t *a = stream_make(), *b = stream_make();
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *b0, *b1;
    assert_ok(ordo_buffer_create(tracker, &b0));
    assert_ok(ordo_buffer_create(tracker, &b1));
    one_cell_t c0 = {cells, 0, 0, NULL, 0, 0, NULL}, c1 = {other, 0, 0, NULL, 0, 0, NULL};
    assert_ok(ordo_tracker_record_begin_native(tracker, ORDO_GRAPH_NATIVE_REQUIRE));
    ordo_access_t x0 = {b0, ORDO_ACCESS_READ_WRITE}, x1 = {b1, ORDO_ACCESS_READ_WRITE};
    assert_ok(ordo_tracker_submit(tracker, a, &x0, 1, one_cell_launch, &c0)); /* lane 0 */
    assert_ok(ordo_tracker_submit(tracker, b, &x1, 1, one_cell_launch, &c1));
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    assert_int_equal(c0.calls + c1.calls, 2);
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(a, gate, 1)); /* before the replay, on lane 0 */
    assert_true(ordo__cuda_stream_waits_unmet(a));
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c0.calls + c1.calls, 4);  /* op by op */
    assert_ok(ordo_stream_signal(b, gate, 1)); /* after the replay, on lane 1 */
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_ok(ordo_stream_synchronize(a, test_deadline()));
    assert_false(ordo__cuda_stream_waits_unmet(a)); /* met (the lane may still be finishing) */
    assert_ok(ordo_graph_replay(graph));
    assert_int_equal(c0.calls + c1.calls, 4); /* natively again */
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    const unsigned long long once = combined(0, 0, 0);
    assert_int_equal(cell_read(cells, 0), combined(once, once, 0));
    assert_int_equal(cell_read(other, 0), combined(once, once, 0));
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_buffer_release(b0, NULL, NULL));
    assert_ok(ordo_buffer_release(b1, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_cu(cu->MemFree(cells));
    assert_cu(cu->MemFree(other));
    launches_free();
}

/* Native replays among eager work on their own streams and on others: each
 * replay is one submission per lane to the work around it. Ops rewrite
 * random cells from random cells, so every ordering the tracker owes
 * shows in the cells. */
#define MIXED_LANES 7 /* streams the recording uses */
#define MIXED_OTHERS 2
#define MIXED_CELLS 48

typedef struct mixed_op {
    CUdeviceptr cells;
    int dst, a, b;
    unsigned long long ns;
} mixed_op_t;

static ordo_status_t mixed_launch(void *ctx, ordo_stream_t *stream) {
    mixed_op_t *o = ctx;
    combine(stream, o->cells, o->dst, o->a, o->b, o->ns);
    return ORDO_OK;
}

static void mixed_submit(ordo_tracker_t *tracker, ordo_stream_t *stream, ordo_buffer_t **buffers,
                         mixed_op_t *o) {
    ordo_access_t accesses[3] = {{buffers[o->dst], ORDO_ACCESS_WRITE}};
    size_t n = 1;
    if (o->a != o->dst) {
        accesses[n++] = (ordo_access_t){buffers[o->a], ORDO_ACCESS_READ};
    }
    if (o->b != o->dst && o->b != o->a) {
        accesses[n++] = (ordo_access_t){buffers[o->b], ORDO_ACCESS_READ};
    }
    if (o->a == o->dst || o->b == o->dst) {
        accesses[0].mode = ORDO_ACCESS_READ_WRITE;
    }
    assert_ok(ordo_tracker_submit(tracker, stream, accesses, n, mixed_launch, o));
}

static mixed_op_t mixed_op_make(CUdeviceptr cells, uint64_t *rng, unsigned long long spin) {
    return (mixed_op_t){cells, (int)(test_rand(rng) % MIXED_CELLS),
                        (int)(test_rand(rng) % MIXED_CELLS), (int)(test_rand(rng) % MIXED_CELLS),
                        test_rand(rng) % spin};
}

static void mixed_round(ordo_graph_native_t native, uint64_t seed) {
    uint64_t rng = seed * 7919u + 13u;
    CUdeviceptr cells = cells_alloc(MIXED_CELLS);
    ordo_stream_t *streams[MIXED_LANES + MIXED_OTHERS];
    for (int k = 0; k < MIXED_LANES + MIXED_OTHERS; ++k) {
        streams[k] = stream_make();
    }
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    ordo_buffer_t *buffers[MIXED_CELLS];
    for (int i = 0; i < MIXED_CELLS; ++i) {
        assert_ok(ordo_buffer_create(tracker, &buffers[i]));
    }
    enum { RECORDED = 60, EAGER = 400 };
    mixed_op_t *recorded = calloc(RECORDED, sizeof *recorded);
    mixed_op_t *eager = calloc(EAGER, sizeof *eager);
    assert_ok(ordo_tracker_record_begin_native(tracker, native));
    for (int i = 0; i < RECORDED; ++i) {
        recorded[i] = mixed_op_make(cells, &rng, 3000);
        mixed_submit(tracker, streams[test_rand(&rng) % MIXED_LANES], buffers, &recorded[i]);
    }
    ordo_graph_t *graph = NULL;
    assert_ok(ordo_tracker_record_end(tracker, &graph));
    ordo_graph_info_t info;
    assert_ok(ordo_graph_info(graph, &info));
    assert_int_equal(info.native, native == ORDO_GRAPH_NATIVE_REQUIRE);
    unsigned long long expect[MIXED_CELLS] = {0};
    for (int step = 0, e = 0; step < 40; ++step) {
        if (test_rand(&rng) % 3 == 0) {
            assert_ok(ordo_graph_replay(graph));
            for (int i = 0; i < RECORDED; ++i) {
                const mixed_op_t *o = &recorded[i];
                expect[o->dst] = combined(expect[o->a], expect[o->b], o->dst);
            }
            continue;
        }
        for (int burst = 1 + (int)(test_rand(&rng) % 8); burst > 0 && e < EAGER; --burst, ++e) {
            mixed_op_t *o = &eager[e];
            *o = mixed_op_make(cells, &rng, 200000);
            mixed_submit(tracker, streams[test_rand(&rng) % (MIXED_LANES + MIXED_OTHERS)], buffers,
                         o);
            expect[o->dst] = combined(expect[o->a], expect[o->b], o->dst);
        }
    }
    assert_ok(ordo_graph_destroy(graph));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    cells_check(expect, cells, MIXED_CELLS);
    for (int i = 0; i < MIXED_CELLS; ++i) {
        assert_ok(ordo_buffer_release(buffers[i], NULL, NULL));
    }
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    for (int k = 0; k < MIXED_LANES + MIXED_OTHERS; ++k) {
        assert_ok(ordo_stream_destroy(streams[k]));
    }
    free(recorded);
    free(eager);
    assert_cu(cu->MemFree(cells));
    launches_free();
}

static void native_replays_are_ordered_among_eager_work(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        mixed_round(ORDO_GRAPH_NATIVE_REQUIRE, seed);
        mixed_round(ORDO_GRAPH_NATIVE_OFF, seed);
    }
}

/* ---- memory ------------------------------------------------------------------- */

static void the_async_resource_frees_in_stream_order(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    ordo_mem_resource_t *resource = NULL;
    ordo_status_t st = ordo_mem_cuda_async_create(device, &resource);
    if (st == ORDO_ERR_UNSUPPORTED) {
        SKIP_FOR_WANT_OF("%s", ordo_error_message());
    }
    assert_ok(st);
    ordo_stream_t *stream = stream_make();
    ordo_block_t *block;
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(resource, 4096, 0, stream, 0, &block, &ptr));
    assert_non_null(ptr);
    assert_int_equal((uintptr_t)ptr % ORDO_MEM_DEFAULT_ALIGNMENT, 0);
    fill(stream, (CUdeviceptr)(uintptr_t)ptr, 1, 512);
    uint64_t outstanding = 0;
    assert_ok(ordo_mem_bytes_outstanding(resource, &outstanding));
    assert_int_equal(outstanding, 4096);
    spin(stream, 5000000ull);
    assert_ok(ordo_mem_deallocate(resource, block, stream));
    assert_ok(ordo_mem_reap_pending(resource, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(resource, &outstanding));
    assert_int_equal(outstanding, 0);
    /* Over-aligned. */
    assert_ok(ordo_mem_allocate(resource, 100, (size_t)1 << 16, stream, 0, &block, &ptr));
    assert_int_equal((uintptr_t)ptr % ((size_t)1 << 16), 0);
    assert_ok(ordo_mem_deallocate(resource, block, stream));
    assert_status(ordo_mem_deallocate(resource, block, stream), ORDO_ERR_INVALID_HANDLE);
    bool tracking = 1;
    assert_ok(ordo_mem_supports_use_tracking(resource, &tracking));
    assert_false(tracking);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_mem_reap_pending(resource, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(resource));
    assert_ok(ordo_stream_destroy(stream));
    launches_free();
}

static void pinned_memory_round_trips(void **state) {
    (void)state;
    REQUIRE_KERNELS();
    ordo_mem_resource_t *pinned;
    assert_ok(ordo_mem_host_pinned_create(device, &pinned));
    ordo_mem_resource_t *direct;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *stream = stream_make();
    enum { N = 1024 };
    ordo_block_t *host_block;
    ordo_block_t *device_block;
    unsigned long long *host = NULL;
    void *dev = NULL;
    assert_ok(ordo_mem_allocate(pinned, N * 8, 0, stream, 0, &host_block, (void **)&host));
    assert_ok(ordo_mem_allocate(direct, N * 8, 0, stream, 0, &device_block, &dev));
    for (int i = 0; i < N; ++i) {
        host[i] = (unsigned long long)i;
    }
    copy_args_t up = {(CUdeviceptr)(uintptr_t)dev, host, N * 8, 1};
    copy_args_t down = {(CUdeviceptr)(uintptr_t)dev, host, N * 8, 0};
    assert_ok(ordo_cuda_stream_enqueue(stream, copy_fn, &up));
    combine(stream, (CUdeviceptr)(uintptr_t)dev, 0, 1, 2, 0);
    assert_ok(ordo_cuda_stream_enqueue(stream, copy_fn, &down));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_int_equal(host[0], combined(1, 2, 0));
    assert_int_equal(host[N - 1], N - 1);
    assert_ok(ordo_mem_deallocate(pinned, host_block, stream));
    assert_ok(ordo_mem_deallocate(direct, device_block, stream));
    assert_ok(ordo_mem_reap_pending(pinned, test_deadline()));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(pinned));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_stream_destroy(stream));
    launches_free();
}

static void out_of_memory_is_reported(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    ordo_mem_resource_t *direct;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *stream = stream_make();
    ordo_block_t *block = NULL;
    assert_status(ordo_mem_allocate(direct, ORDO_MEM_MAX_BYTES, 0, stream, 0, &block, NULL),
                  ORDO_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(ordo_error_message(), "cuMemAlloc"));
    assert_null(block);
    /* The device is still usable. */
    assert_ok(ordo_mem_allocate(direct, 1 << 20, (size_t)1 << 21, stream, 0, &block, NULL));
    assert_ok(ordo_mem_deallocate(direct, block, stream));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_stream_destroy(stream));
}

/* Opens a gate once the device's free thread has taken up at least
 * `begun` frees (or at the deadline, noting that it had to). */
typedef struct gate_opener {
    gate_t *gate;
    cuda_device_t *d;
    uint64_t begun;
    int late; /* opened at the deadline: the free never began */
} gate_opener_t;

static void *gate_opener_main(void *arg) {
    gate_opener_t *o = arg;
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load_explicit(&o->d->frees_begun, memory_order_acquire) < o->begun) {
        if (ordo_time_now_ns() >= deadline) {
            o->late = 1;
            break;
        }
        sched_yield();
    }
    gate_open(o->gate);
    return NULL;
}

/* A stream that waits on the device for a host value (a gate) must not
 * stop completions of other streams from being seen. cuMemFree and
 * cuMemFreeHost wait for the whole device, the gated stream included, and
 * while they wait the driver may hold other threads' calls: done on the
 * completion thread, a free would stall it until the gate opened. Frees of
 * the direct and page-locked resources run on the device's free thread:
 * the completion thread saw the frees' points, handed them over, and the
 * free ends once the host opens the gate. The gate is opened by a thread
 * that makes no driver call, only once a free is under way; every later
 * completion is seen. */
static void completions_are_seen_while_a_stream_waits_on_the_host(void **state) {
    (void)state;
    REQUIRE_GATES();
    cuda_device_t *d = device->impl;
    ordo_mem_resource_t *direct;
    ordo_mem_resource_t *pinned;
    assert_ok(ordo_mem_direct_create(device, &direct));
    assert_ok(ordo_mem_host_pinned_create(device, &pinned));
    ordo_stream_t *gated = stream_make();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_block_t *device_block;
    ordo_block_t *host_block;
    assert_ok(ordo_mem_allocate(direct, 4096, 0, stream, 0, &device_block, NULL));
    assert_ok(ordo_mem_allocate(pinned, 4096, 0, stream, 0, &host_block, NULL));
    /* Static: a failed assertion leaves the opener running to its
     * deadline, and it must find them there. */
    static gate_t gate;
    static gate_opener_t opener;
    /* Frees of earlier tests may still be queued or under way: one that
     * began after the gate shut would wait for it, and every free of this
     * test behind it. */
    frees_settle(d);
    gate_make(&gate);
    gate_hold(gated, &gate);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    opener = (gate_opener_t){&gate, d, atomic_load(&d->frees_begun) + 1, 0};
    pthread_t opener_thread = test_thread_start(gate_opener_main, &opener);
    assert_ok(ordo_mem_deallocate(direct, device_block, stream));
    assert_ok(ordo_mem_deallocate(pinned, host_block, stream));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_reap_pending(pinned, test_deadline()));
    for (uint64_t v = 1; v <= 3; ++v) {
        assert_ok(ordo_stream_signal(stream, s, v));
        assert_ok(ordo_signal_wait(s, v, test_deadline()));
    }
    pthread_join(opener_thread, NULL);
    assert_false(opener.late);
    assert_ok(ordo_stream_synchronize(gated, test_deadline()));
    assert_ok(ordo_stream_destroy(gated));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_mem_resource_destroy(pinned));
    assert_ok(ordo_signal_destroy(s));
    gate_free(&gate);
}

/* A host thread asleep on a point behind a gate helps: its own passes see
 * the point once the gate opens, and its own CUDA context is still current
 * when it returns. */
typedef struct point_waiter {
    ordo_signal_t *signal;
    ordo_status_t status;
    CUcontext before;
    CUcontext after;
} point_waiter_t;

static void *point_waiter_main(void *arg) {
    point_waiter_t *pw = arg;
    (void)cu->CtxSetCurrent(NULL);
    (void)cu->CtxGetCurrent(&pw->before);
    pw->status = ordo_signal_wait(pw->signal, 1, test_deadline());
    (void)cu->CtxGetCurrent(&pw->after);
    return NULL;
}

static void a_host_wait_helps_complete_its_point(void **state) {
    (void)state;
    REQUIRE_GATES();
    cuda_device_t *d = device->impl;
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    static gate_t gate;
    gate_make(&gate);
    gate_hold(stream, &gate);
    assert_ok(ordo_stream_signal(stream, s, 1));
    uint64_t helped = atomic_load(&d->watcher.helped_passes);
    point_waiter_t pw = {s, ORDO_ERR_BUSY, NULL, NULL};
    pthread_t waiter = test_thread_start(point_waiter_main, &pw);
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&d->watcher.helped_passes) == helped) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    gate_open(&gate);
    pthread_join(waiter, NULL);
    assert_ok(pw.status);
    assert_null(pw.before);
    assert_null(pw.after);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
    gate_free(&gate);
}

/* ---- stall reports, teardown, pools ------------------------------------------ */

static void a_held_wait_shows_in_a_stall_report(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *host = test_signal_make(0);
    assert_ok(ordo_signal_set_name(host, "host gate"));
    assert_ok(ordo_stream_wait(stream, host, 1));
    ordo_deadline_t deadline = test_deadline();
    size_t count = 0;
    ordo_stall_entry_t entries[4];
    do {
        assert_true(ordo_time_now_ns() < deadline);
        assert_ok(ordo_stall_report(device, entries, 4, &count));
    } while (count == 0);
    assert_int_equal(count, 1);
    assert_ptr_equal(entries[0].stream, stream);
    assert_ptr_equal(entries[0].signal, host);
    assert_int_equal(entries[0].waited_value, 1);
    assert_int_equal(entries[0].reach, ORDO_STALL_UNREACHABLE);
    assert_ok(ordo_signal_advance(host, 1));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_stall_report(device, entries, 4, &count));
    assert_int_equal(count, 0);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(host));
}

static void destroy_with_held_work_cancels_it(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *never = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, never, 1));
    assert_ok(ordo_stream_signal(stream, after, 1));
    /* The destroy cancels the held wait: it does not wait for `never`. */
    test_rescue_t rescue;
    test_rescue_begin(&rescue, never, 1);
    assert_ok(ordo_stream_destroy(stream));
    assert_false(test_rescue_end(&rescue));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_destroy(never));
    assert_ok(ordo_signal_destroy(after));
}

/* ORDO_CUDA_POLL_US=MIN,MAX sets the completion thread's poll intervals
 * of a device runtime opened after it; anything but two numbers with
 * 1 <= MIN <= MAX <= 1000000 leaves the defaults (10 us, 50 us). */
static void poll_intervals_come_from_the_environment(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    static const struct {
        const char *text;
        uint64_t min_ns, max_ns, idle_ns;
    } cases[] = {
        {"", 10000, 50000, 1000000},
        {"abc", 10000, 50000, 1000000},
        {"20", 10000, 50000, 1000000},
        {"0,50", 10000, 50000, 1000000},
        {"60,50", 10000, 50000, 1000000},
        {"5,1000001", 10000, 50000, 1000000},
        {"5,50x", 10000, 50000, 1000000},
        {"5,50,", 10000, 50000, 1000000},
        {"5,50,-3", 10000, 50000, 1000000},
        {"5,50,40", 10000, 50000, 1000000},
        {"5,50,200x", 10000, 50000, 1000000},
        {"5,50,1000001", 10000, 50000, 1000000},
        {"5,50", 5000, 50000, 1000000},
        {"1,1000000", 1000, 1000000000, 1000000000},
        {"7,7", 7000, 7000, 1000000},
        {"7,7,7", 7000, 7000, 7000},
        {"2,20,500", 2000, 20000, 500000},
        {" 5,50", 10000, 50000, 1000000},
        {"+5,50", 10000, 50000, 1000000},
        {"-18446744073709551615,50", 10000, 50000, 1000000},
        {"5, 50", 10000, 50000, 1000000},
        {"5,50,+200", 10000, 50000, 1000000},
        {"00000005,50", 10000, 50000, 1000000},
    };
    const char *old = getenv("ORDO_CUDA_POLL_US");
    char *saved = old ? strdup(old) : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        assert_int_equal(setenv("ORDO_CUDA_POLL_US", cases[i].text, 1), 0);
        ordo_device_t *owned = NULL;
        assert_ok(ordo_device_create_owned("cuda:0", NULL, &owned));
        const cuda_device_t *d = owned->impl;
        if (d->watcher.min_poll_ns != cases[i].min_ns ||
            d->watcher.max_poll_ns != cases[i].max_ns ||
            d->watcher.idle_poll_ns != cases[i].idle_ns) {
            fail_msg("ORDO_CUDA_POLL_US=\"%s\": intervals %llu, %llu, %llu ns; expected %llu, "
                     "%llu, %llu",
                     cases[i].text, (unsigned long long)d->watcher.min_poll_ns,
                     (unsigned long long)d->watcher.max_poll_ns,
                     (unsigned long long)d->watcher.idle_poll_ns,
                     (unsigned long long)cases[i].min_ns, (unsigned long long)cases[i].max_ns,
                     (unsigned long long)cases[i].idle_ns);
        }
        assert_ok(ordo_device_release(owned));
    }
    if (saved) {
        assert_int_equal(setenv("ORDO_CUDA_POLL_US", saved, 1), 0);
        free(saved);
    } else {
        assert_int_equal(unsetenv("ORDO_CUDA_POLL_US"), 0);
    }
}

static void points_come_from_a_pool(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    cuda_device_t *d = device->impl;
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_event_pool_stats_t before;
    ordo_event_pool_stats_t after;
    assert_ok(ordo__event_pool_stats(d->points, &before));
    for (uint64_t round = 1; round <= 50; ++round) {
        for (uint64_t k = 0; k < 20; ++k) {
            assert_ok(ordo_stream_signal(stream, s, round * 20 + k));
        }
        assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    }
    assert_ok(ordo__event_pool_stats(d->points, &after));
    assert_true(after.created_total - before.created_total <= 128);
    assert_true(after.acquires - before.acquires >= 1000);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
}

/* With points observed through a word the device writes: a stream that
 * fails on the host while its device work still runs (here an enqueued
 * function launches a kernel, then fails) is destroyed with a write to its
 * word pending. The word must outlive that write: the device would write
 * through a freed mapping (and fault the context). */
static ordo_status_t launch_then_refuse(void *ctx, struct CUstream_st *stream) {
    (void)launch_fn(ctx, stream);
    return ORDO_ERR_ABORTED;
}

static void a_destroyed_streams_word_outlives_its_pending_writes(void **state) {
    (void)state;
    REQUIRE_GATES();
    if (!((cuda_device_t *)device->impl)->observe_memops) {
        print_message("  skipped: points are observed by events (ORDO_CUDA_POINTS=memops)\n");
        skip();
    }
    gate_t gate;
    gate_make(&gate);
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    /* `before` waits behind the gate, so the failure (queued after it) is
     * not seen before `after` is issued behind the kernel. */
    gate_hold(stream, &gate);
    assert_ok(ordo_stream_signal(stream, before, 1));
    launch_t *l = launch_new(kernels.spin);
    l->u = 300000000ull;
    l->params[0] = &l->u;
    assert_status(ordo_cuda_stream_enqueue(stream, launch_then_refuse, l), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_signal(stream, after, 1));
    gate_open(&gate);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    ordo_deadline_t deadline = test_deadline();
    while (ordo_stream_status(stream) == ORDO_OK) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    assert_status(ordo_stream_status(stream), ORDO_ERR_ABORTED);
    /* The kernel still spins: the destroy drains nothing. */
    assert_ok(ordo_stream_destroy(stream));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    /* Once the device has run it all, the context is still healthy. */
    assert_cu(cu->CtxSynchronize());
    gate_free(&gate);
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(after));
    launches_free();
}

/* A page-locked block freed on a stream that has failed while device work
 * it issued still uses the block: the memory goes back only once that work
 * is done (here a kernel, then a write into the block through its device
 * address). */
typedef struct late_write {
    launch_t *spin;
    CUdeviceptr target;
} late_write_t;

static ordo_status_t spin_write_then_refuse(void *ctx, struct CUstream_st *stream) {
    late_write_t *w = ctx;
    (void)launch_fn(w->spin, stream);
    (void)cu->StreamWriteValue64(stream, w->target, 7, CU_STREAM_WRITE_VALUE_DEFAULT);
    return ORDO_ERR_ABORTED;
}

static void a_pinned_block_freed_on_a_failed_stream_outlives_its_use(void **state) {
    (void)state;
    REQUIRE_GATES();
    ordo_mem_resource_t *pinned;
    assert_ok(ordo_mem_host_pinned_create(device, &pinned));
    gate_t gate;
    gate_make(&gate);
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *before = test_signal_make(0);
    ordo_block_t *block;
    void *host = NULL;
    assert_ok(ordo_mem_allocate(pinned, 64, 0, stream, 0, &block, &host));
    late_write_t w = {launch_new(kernels.spin), 0};
    w.spin->u = 300000000ull;
    w.spin->params[0] = &w.spin->u;
    assert_cu(cu->MemHostGetDevicePointer(&w.target, host, 0));
    /* `before` waits behind the gate, so the failure (queued after it) is
     * not seen before the kernel and the write are enqueued. */
    gate_hold(stream, &gate);
    assert_ok(ordo_stream_signal(stream, before, 1));
    assert_status(ordo_cuda_stream_enqueue(stream, spin_write_then_refuse, &w), ORDO_ERR_ABORTED);
    gate_open(&gate);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    ordo_deadline_t deadline = test_deadline();
    while (ordo_stream_status(stream) == ORDO_OK) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    /* The kernel still spins; the free point fails at once. */
    assert_ok(ordo_mem_deallocate(pinned, block, stream));
    assert_ok(ordo_mem_reap_pending(pinned, test_deadline()));
    assert_cu(cu->CtxSynchronize());
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_mem_resource_destroy(pinned));
    gate_free(&gate);
    assert_ok(ordo_signal_destroy(before));
    launches_free();
}

static ordo_mem_resource_t *async_resource_or_skip(void) {
    ordo_mem_resource_t *resource = NULL;
    ordo_status_t st = ordo_mem_cuda_async_create(device, &resource);
    if (st == ORDO_ERR_UNSUPPORTED) {
        SKIP_FOR_WANT_OF("%s", ordo_error_message());
    }
    assert_ok(st);
    return resource;
}

/* An enqueued function that keeps the lane busy until the test lets it
 * go (a test of the lane only: real ones must not block). */
typedef struct lane_blocker {
    _Atomic int started;
    _Atomic int release;
} lane_blocker_t;

static ordo_status_t block_the_lane(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    lane_blocker_t *b = ctx;
    atomic_store(&b->started, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&b->release) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    return ORDO_OK;
}

/* A stream-ordered block freed on a stream that has failed while its lane
 * still holds work: the free itself is held behind that work, so the
 * block's descriptor must not be reused (nor the block counted as given
 * back) before the held free has been issued. Otherwise the late free
 * gives back whatever block took the descriptor meanwhile. */
static void an_async_free_held_on_a_failed_stream_frees_its_own_block(void **state) {
    (void)state;
    REQUIRE_GATES();
    ordo_mem_resource_t *resource = async_resource_or_skip();
    gate_t gate;
    gate_make(&gate);
    ordo_stream_t *failing = stream_make();
    ordo_stream_t *other = stream_make();
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *host = test_signal_make(0);
    lane_blocker_t blocker = {0, 0};
    ordo_block_t *first;
    assert_ok(ordo_mem_allocate(resource, 4096, 0, failing, 0, &first, NULL));
    /* The failure is queued behind `before`, which waits at the gate; a
     * host wait moves what follows onto the lane, where the blocker runs
     * (and keeps the lane busy) before the stream fails. */
    gate_hold(failing, &gate);
    assert_ok(ordo_stream_signal(failing, before, 1));
    assert_status(ordo_cuda_stream_enqueue(failing, refusing_enqueue, NULL), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_wait(failing, host, 1));
    assert_ok(ordo_cuda_stream_enqueue(failing, block_the_lane, &blocker));
    assert_ok(ordo_signal_advance(host, 1));
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&blocker.started)) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    gate_open(&gate);
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    while (ordo_stream_status(failing) == ORDO_OK) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    assert_true(holding(failing));
    /* The free waits on the lane behind the blocker. */
    assert_ok(ordo_mem_deallocate(resource, first, failing));
    ordo_block_t *second;
    void *second_ptr = NULL;
    assert_ok(ordo_mem_allocate(resource, 4096, 0, other, 0, &second, &second_ptr));
    /* The lane issues the held free now. */
    atomic_store(&blocker.release, 1);
    assert_ok(ordo_mem_reap_pending(resource, test_deadline()));
    uint64_t outstanding = 0;
    assert_ok(ordo_mem_bytes_outstanding(resource, &outstanding));
    assert_int_equal(outstanding, 4096);
    /* The second block is still live: the device can write it, and its
     * own free is accepted. */
    fill(other, (CUdeviceptr)(uintptr_t)second_ptr, 3, 512);
    assert_ok(ordo_stream_synchronize(other, test_deadline()));
    assert_ok(ordo_mem_deallocate(resource, second, other));
    assert_ok(ordo_mem_reap_pending(resource, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(resource, &outstanding));
    assert_int_equal(outstanding, 0);
    assert_ok(ordo_stream_synchronize(other, test_deadline()));
    assert_ok(ordo_stream_destroy(failing));
    assert_ok(ordo_stream_destroy(other));
    assert_ok(ordo_mem_resource_destroy(resource));
    gate_free(&gate);
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(host));
    launches_free();
}

/* The stand-in driver's failure injection. A real driver has none: the
 * test skips (no GPU capability is missing, so ORDO_TEST_CUDA_REQUIRE
 * does not fail it). */
typedef void (*fail_records_fn)(int count, CUresult result);

static fail_records_fn stand_in_record_failures(void) {
    fail_records_fn fn = NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) {
        void *symbol = dlsym(lib, "fake_cuda_fail_event_records");
        memcpy(&fn, &symbol, sizeof symbol);
        (void)dlclose(lib);
    }
    if (!fn) {
        print_message("  skipped: needs the stand-in driver's failure injection\n");
        skip();
    }
    return fn;
}

/* On CUDA too, the tracker names the stream a failure began on: the
 * consumer, used first, waited on the device for the producer's point and
 * failed only because the producer failed (on its own: a device error
 * issuing a point), and its failure says so as every failure a wait passes
 * on does. */
static ordo_status_t launch_nothing(void *ctx, ordo_stream_t *stream) {
    (void)ctx, (void)stream;
    return ORDO_OK;
}

static void the_tracker_names_the_stream_a_device_failure_began_on(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    fail_records_fn fail_records = stand_in_record_failures();
    ordo_tracker_t *tracker;
    ordo_stream_t *consumer, *producer;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &consumer));
    assert_ok(ordo_tracker_stream_create(tracker, 0, &producer));
    assert_ok(ordo_stream_set_name(consumer, "consumer"));
    assert_ok(ordo_stream_set_name(producer, "producer"));
    ordo_buffer_t *first, *data;
    assert_ok(ordo_buffer_create(tracker, &first));
    assert_ok(ordo_buffer_create(tracker, &data));
    ordo_access_t r_first = {first, ORDO_ACCESS_READ}, w_data = {data, ORDO_ACCESS_WRITE},
                  r_data = {data, ORDO_ACCESS_READ};
    gate_t gate;
    gate_make(&gate);
    assert_ok(ordo_tracker_submit(tracker, consumer, &r_first, 1, launch_nothing, NULL));
    gate_hold(producer, &gate); /* the producer's device work waits */
    assert_ok(ordo_tracker_submit(tracker, producer, &w_data, 1, launch_nothing, NULL));
    assert_ok(ordo_tracker_submit(tracker, consumer, &r_data, 1, launch_nothing, NULL));
    ordo_signal_t *sig = test_signal_make(0);
    fail_records(1, CUDA_ERROR_LAUNCH_FAILED);
    (void)ordo_stream_signal(producer, sig, 1); /* fails the producer now */
    gate_open(&gate);
    assert_ok(ordo_buffer_release(first, NULL, NULL));
    assert_ok(ordo_buffer_release(data, NULL, NULL));
    assert_status(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_DEVICE);
    if (!strstr(ordo_error_message(), "stream producer: ")) {
        fail_msg("the failure names another stream: %s", ordo_error_message());
    }
    assert_status(ordo_stream_synchronize(consumer, test_deadline()), ORDO_ERR_DEVICE);
    assert_non_null(strstr(ordo_error_message(), "was not reached: its stream failed"));
    (void)ordo_tracker_close(tracker, test_deadline());
    assert_ok(ordo_tracker_destroy(tracker));
    gate_free(&gate);
    assert_ok(ordo_signal_destroy(sig));
}

/* A free whose point a healthy stream refuses (out of memory) must not
 * leave the free pending for ever: a page-locked block stays the caller's
 * (the stream may still use it), a stream-ordered one (its free already in
 * the stream's order) goes back. */
static void a_free_point_refused_on_a_healthy_stream_leaves_nothing_pending(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    fail_records_fn fail_records = stand_in_record_failures();
    ordo_stream_t *stream = stream_make();
    ordo_mem_resource_t *pinned;
    assert_ok(ordo_mem_host_pinned_create(device, &pinned));
    ordo_block_t *block;
    void *host = NULL;
    uint64_t outstanding = 0;
    assert_ok(ordo_mem_allocate(pinned, 64, 0, stream, 0, &block, &host));
    fail_records(1, CUDA_ERROR_OUT_OF_MEMORY);
    assert_status(ordo_mem_deallocate(pinned, block, stream), ORDO_ERR_OUT_OF_MEMORY);
    assert_ok(ordo_stream_status(stream));
    assert_ok(ordo_mem_reap_pending(pinned, ordo_deadline_after_ms(100)));
    assert_ok(ordo_mem_bytes_outstanding(pinned, &outstanding));
    assert_int_equal(outstanding, 64);
    memset(host, 1, 64); /* still the caller's */
    assert_ok(ordo_mem_deallocate(pinned, block, stream));
    assert_ok(ordo_mem_reap_pending(pinned, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(pinned, &outstanding));
    assert_int_equal(outstanding, 0);
    assert_ok(ordo_mem_resource_destroy(pinned));
    ordo_mem_resource_t *async = async_resource_or_skip();
    assert_ok(ordo_mem_allocate(async, 4096, 0, stream, 0, &block, NULL));
    fail_records(1, CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(ordo_mem_deallocate(async, block, stream));
    assert_ok(ordo_stream_status(stream));
    assert_ok(ordo_mem_reap_pending(async, ordo_deadline_after_ms(2000)));
    assert_ok(ordo_mem_bytes_outstanding(async, &outstanding));
    assert_int_equal(outstanding, 0);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(async));
    assert_ok(ordo_stream_destroy(stream));
}

/* Last: a fault poisons the context for the rest of the process. */
static void a_device_fault_fails_every_signal(void **state) {
    (void)state;
    REQUIRE_GATES();
    /* Never opened, and never freed: the faulted context's wait may still
     * read it (a reset context would free it). */
    static gate_t gate;
    gate_make(&gate);
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *r = test_signal_make(0);
    /* A stream-ordered block live across the fault. */
    ordo_mem_resource_t *async = NULL;
    ordo_block_t *block = NULL;
    if (ordo_mem_cuda_async_create(device, &async) == ORDO_OK) {
        assert_ok(ordo_mem_allocate(async, 4096, 0, a, 0, &block, NULL));
    }
    launch_t *l = launch_new(kernels.fault);
    l->ptr = (CUdeviceptr)64; /* nothing is mapped there */
    l->params[0] = &l->ptr;
    /* r's point is pending on the device, behind the gate, when the fault
     * comes. */
    gate_hold(b, &gate);
    assert_ok(ordo_stream_signal(b, r, 1));
    uint64_t value = 1;
    assert_ok(ordo_signal_query(r, &value));
    assert_int_equal(value, 0);
    enqueue(a, l);
    /* The fault may already be known when the point is submitted: then the
     * submission itself fails. Either way nothing hangs. */
    ordo_status_t st = ordo_stream_signal(a, s, 1);
    assert_true(st == ORDO_OK || st == ORDO_ERR_DEVICE);
    if (st == ORDO_OK) {
        assert_status(ordo_signal_wait(s, 1, test_deadline()), ORDO_ERR_DEVICE);
    }
    /* A point of another stream, enqueued before the fault, fails with the
     * device's error. */
    assert_status(ordo_signal_wait(r, 1, test_deadline()), ORDO_ERR_DEVICE);
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    ordo_status_t failure;
    assert_ok(ordo_signal_failure(r, &failure, message, sizeof message));
    print_message("  the fault reads: %s\n", message);
    assert_non_null(strstr(message, "CUDA_ERROR_"));
    assert_status(ordo_stream_synchronize(a, test_deadline()), ORDO_ERR_DEVICE);
    assert_status(ordo_stream_status(b), ORDO_ERR_DEVICE);
    if (async) {
        /* The broken context refuses the stream-ordered free; the block
         * still goes back (the context's reset reclaims the memory), so
         * the resource, and with it the device, can be released. */
        assert_ok(ordo_mem_deallocate(async, block, a));
        assert_ok(ordo_mem_reap_pending(async, test_deadline()));
        uint64_t outstanding = 1;
        assert_ok(ordo_mem_bytes_outstanding(async, &outstanding));
        assert_int_equal(outstanding, 0);
        assert_ok(ordo_mem_resource_destroy(async));
    }
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(r));
    launches_free();
}

#endif /* ORDO_HAVE_CUDA_H */

static int suite_setup(void **state) {
    (void)state;
    bool available = 0;
    char reason[160] = "";
    if (ordo_backend_available("cuda", &available, reason, sizeof reason) != ORDO_OK) {
        snprintf(skip_reason, sizeof skip_reason, "the CUDA backend is not built: %s",
                 ordo_error_message());
        return 0;
    }
    if (!available) {
        snprintf(skip_reason, sizeof skip_reason, "CUDA is not available: %s", reason);
        return 0;
    }
#ifdef ORDO_HAVE_CUDA_H
    if (ordo_device_open("cuda:0", &device) != ORDO_OK) {
        snprintf(skip_reason, sizeof skip_reason, "cuda:0 cannot be opened: %s",
                 ordo_error_message());
        device = NULL;
        return 0;
    }
    cu = ordo__cuda_api();
    if (ordo_cuda_make_current(device) != ORDO_OK ||
        ordo_stream_create(device, 0, &reader) != ORDO_OK ||
        cu->MemHostAlloc(&staging, STAGING_BYTES, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
        return -1;
    }
    kernels_loaded = cuda_kernels_load(cu, &kernels, kernels_reason, sizeof kernels_reason);
    gates_watchdog_start();
#endif
    return 0;
}

static int suite_teardown(void **state) {
    (void)state;
    int failed = 0;
#ifdef ORDO_HAVE_CUDA_H
    gates_open_all(NULL);
    gates_watchdog_halt(); /* joined: its count is read without the lock */
    if (gates_expired_count) {
        print_message("%llu gate(s) stayed shut past %d ms and were opened by the watchdog\n",
                      (unsigned long long)gates_expired_count, GATE_LIFETIME_MS);
        failed = -1;
    }
    if (kernels_loaded) {
        (void)cu->ModuleUnload(kernels.module);
    }
    if (reader) {
        (void)ordo_stream_destroy(reader);
    }
    if (staging) {
        (void)cu->MemFreeHost(staging);
    }
#endif
    if (device && ordo_device_release(device) != ORDO_OK) {
        failed = -1;
    }
    return failed;
}

/* Every device test opens the gates left shut when it ends (gates_open_all). */
#define DEVICE_TEST(name) cmocka_unit_test_teardown(name, gates_open_all)

/* Left out under compute-sanitizer (ORDO_TEST_CUDA_SANITIZER_SAFE=1): the
 * tests whose driver errors are deliberate (memcheck counts each refused
 * call as an error: on an H200, a launch function's cuMemAlloc refused in
 * a capture, a cuGraphExecUpdate refused before a new instantiation, and
 * a drain refused during a program's capture), and two that need a stream
 * to run past another parked at a gate (on an H100 under synccheck the
 * free's point was not reached while the other stream sat at the gate:
 * the tool does not promise that streams run concurrently). */
static int left_out_under_sanitizers(const char *name) {
    return strcmp(name, "out_of_memory_is_reported") == 0 ||
           strcmp(name, "a_device_fault_fails_every_signal") == 0 ||
           strcmp(name, "what_a_cuda_graph_cannot_hold_is_replayed_op_by_op") == 0 ||
           strcmp(name, "a_graph_lowered_again_is_updated_in_place_when_it_can_be") == 0 ||
           strcmp(name, "a_draining_free_waits_out_captures") == 0 ||
           strcmp(name, "a_wait_before_its_signal_binds_on_the_device") == 0 ||
           strcmp(name, "completions_are_seen_while_a_stream_waits_on_the_host") == 0;
}

int main(void) {
    /* Before any ordo object exists (the allocator cannot change later). */
    const ordo_allocator_t hooks = {test_allocate, test_deallocate, NULL};
    if (ordo_allocator_set(&hooks) != ORDO_OK) {
        fprintf(stderr, "cannot install the test allocator: %s\n", ordo_error_message());
        return 1;
    }
    require_gpu = env_flag("ORDO_TEST_CUDA_REQUIRE");
    int sanitizer_safe = env_flag("ORDO_TEST_CUDA_SANITIZER_SAFE");
    const struct CMUnitTest all[] = {
        cmocka_unit_test(absence_is_explained),
        cmocka_unit_test(other_backends_are_refused),
        cmocka_unit_test(cuda_entry_points_on_cpu),
#ifdef ORDO_HAVE_CUDA_H
        DEVICE_TEST(the_device_is_listed_with_its_capabilities),
        DEVICE_TEST(driver_entries_are_bound_with_their_prototypes),
        DEVICE_TEST(each_refused_host_allocation_names_its_call),
        DEVICE_TEST(each_refused_host_allocation_in_cuda_work_names_its_call),
        DEVICE_TEST(a_kernel_then_a_signal_reaches_the_host),
        DEVICE_TEST(device_waits_stay_on_the_device),
        DEVICE_TEST(a_wait_before_its_signal_binds_on_the_device),
        DEVICE_TEST(host_signals_gate_device_work),
        DEVICE_TEST(host_tasks_run_between_kernels),
        DEVICE_TEST(a_failing_enqueue_fails_the_stream),
        DEVICE_TEST(user_code_on_ordo_threads_cannot_unbind_the_context),
        DEVICE_TEST(concurrent_enqueues_on_one_stream),
        DEVICE_TEST(random_program_ordered_by_a_tracker),
        DEVICE_TEST(random_program_with_waits_before_signals),
        DEVICE_TEST(a_recording_replays_as_one_cuda_graph),
        DEVICE_TEST(what_a_cuda_graph_cannot_hold_is_replayed_op_by_op),
        DEVICE_TEST(a_launch_function_that_unbinds_the_context_is_still_lowered),
        DEVICE_TEST(a_refresh_lowers_the_graph_again),
        DEVICE_TEST(a_graph_lowered_again_is_updated_in_place_when_it_can_be),
        DEVICE_TEST(a_native_replay_refused_by_a_failed_stream_reports_its_failure),
        DEVICE_TEST(a_destroy_without_memory_waits_for_a_held_launch),
        DEVICE_TEST(a_replay_behind_a_held_wait_goes_op_by_op),
        DEVICE_TEST(native_replays_are_ordered_among_eager_work),
        DEVICE_TEST(ordo_runs_beside_a_global_capture_of_the_program),
        DEVICE_TEST(a_draining_free_waits_out_captures),
        DEVICE_TEST(a_lowering_goes_ahead_of_a_drain_held_by_the_host),
        DEVICE_TEST(releasing_another_runtime_leaves_a_lowering_whole),
        DEVICE_TEST(the_async_resource_frees_in_stream_order),
        DEVICE_TEST(pinned_memory_round_trips),
        DEVICE_TEST(out_of_memory_is_reported),
        DEVICE_TEST(completions_are_seen_while_a_stream_waits_on_the_host),
        DEVICE_TEST(a_held_wait_shows_in_a_stall_report),
        DEVICE_TEST(destroy_with_held_work_cancels_it),
        DEVICE_TEST(poll_intervals_come_from_the_environment),
        DEVICE_TEST(points_come_from_a_pool),
        DEVICE_TEST(a_host_wait_helps_complete_its_point),
        DEVICE_TEST(a_destroyed_streams_word_outlives_its_pending_writes),
        DEVICE_TEST(a_pinned_block_freed_on_a_failed_stream_outlives_its_use),
        DEVICE_TEST(an_async_free_held_on_a_failed_stream_frees_its_own_block),
        DEVICE_TEST(the_tracker_names_the_stream_a_device_failure_began_on),
        DEVICE_TEST(a_free_point_refused_on_a_healthy_stream_leaves_nothing_pending),
        DEVICE_TEST(a_device_fault_fails_every_signal),
#endif
    };
    struct CMUnitTest tests[sizeof all / sizeof all[0]];
    size_t count = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        if (sanitizer_safe && left_out_under_sanitizers(all[i].name)) {
            print_message("left out (ORDO_TEST_CUDA_SANITIZER_SAFE=1): %s\n", all[i].name);
            continue;
        }
        tests[count++] = all[i];
    }
    int failures = _cmocka_run_group_tests("cuda", tests, count, suite_setup, suite_teardown);
    if (!device) {
        print_message("cuda device tests skipped: %s\n", skip_reason);
        if (require_gpu) {
            print_message("required (ORDO_TEST_CUDA_REQUIRE=1): failing\n");
            return failures ? failures : 1;
        }
    }
    return failures;
}
