/* The stand-in driver (fake_cuda/) refuses what the real driver refuses
 * and behaves as it does where ordo could otherwise get away with
 * something: each test shows one such rule. Run only against the stand-in
 * (LD_LIBRARY_PATH), with CUDA_DEVICE_MAX_CONNECTIONS=1 set here before
 * the driver is initialised.
 *
 * `test_fake_cuda exit-with-device-open` instead opens cuda:0, leaves a
 * point pending behind a gate that never opens and returns from main: the
 * stand-in ends the process with status 70 if any thread calls into it
 * while it is unloaded (ordo must stop its device threads at exit).
 * `test_fake_cuda device-opened-during-exit` does the same with a device
 * made by an exit handler that runs after ordo's. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "backends/cuda/cuda_api.h"
#include "cuda_kernels.h"
#include "ordo/cuda.h"

static const cuda_api_t *cu;
static PFN_cuGetProcAddress_v12000 get_proc;

#define assert_cu(expr) assert_int_equal((int)(expr), (int)CUDA_SUCCESS)
#define assert_cu_status(expr, result) assert_int_equal((int)(expr), (int)(result))

static int setup(void **state) {
    (void)state;
    char reason[160] = "";
    cu = ordo__cuda_api_load(reason, sizeof reason);
    if (!cu) {
        print_message("the stand-in driver is not loaded: %s\n", reason);
        return -1;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *symbol = lib ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    memcpy(&get_proc, &symbol, sizeof symbol);
    CUcontext ctx = NULL;
    if (!get_proc || cu->DevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cu->CtxSetCurrent(ctx) != CUDA_SUCCESS) {
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    (void)cu->DevicePrimaryCtxRelease(0);
    return 0;
}

/* A word of mapped page-locked memory a stream can wait on. */
static _Atomic uint64_t *gate_make(CUdeviceptr *device) {
    void *word = NULL;
    assert_cu(cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    atomic_init((_Atomic uint64_t *)word, 0);
    assert_cu(cu->MemHostGetDevicePointer(device, word, 0));
    return word;
}

static void get_proc_honours_the_version(void **state) {
    (void)state;
    void *v1 = NULL;
    void *v2 = NULL;
    void *fn = NULL;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_cu(get_proc("cuCtxSynchronize", &v1, 12090, CU_GET_PROC_ADDRESS_DEFAULT, &found));
    assert_int_equal(found, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_cu(get_proc("cuCtxSynchronize", &v2, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
    assert_ptr_not_equal(v1, v2);
    /* The 13.0 entry takes the context: a wrong one is refused. Its type
     * is declared here: a 12.x toolkit's cudaTypedefs.h has none. */
    typedef CUresult (*sync_v2_fn)(CUcontext);
    sync_v2_fn sync_v2 = NULL;
    memcpy(&sync_v2, &v2, sizeof v2);
    assert_cu_status(sync_v2((CUcontext)(uintptr_t)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(sync_v2(NULL));
    /* Before an entry existed, it is not found; above the driver's version
     * nothing is. */
    assert_cu_status(get_proc("cuMemAllocAsync", &fn, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &found),
                     CUDA_ERROR_NOT_FOUND);
    assert_int_equal(found, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_null(fn);
    assert_cu_status(get_proc("cuMemAlloc", &fn, 99000, CU_GET_PROC_ADDRESS_DEFAULT, &found),
                     CUDA_ERROR_INVALID_VALUE);
}

static void device_and_host_pointers_are_different_kinds(void **state) {
    (void)state;
    CUdeviceptr d = 0;
    assert_cu(cu->MemAlloc(&d, 64));
    void *pinned = NULL;
    assert_cu(cu->MemHostAlloc(&pinned, 64, CU_MEMHOSTALLOC_PORTABLE));
    unsigned char pageable[64] = {0};
    CUdeviceptr as_device = (CUdeviceptr)(uintptr_t)pageable;
    assert_cu_status(cu->MemcpyHtoD(as_device, pageable, 8), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemcpyHtoD(d, (const void *)(uintptr_t)d, 8), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemcpyDtoH((void *)(uintptr_t)d, d, 8), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemcpyDtoH(pageable, as_device, 8), CUDA_ERROR_INVALID_VALUE);
    /* Past the end of the allocation. */
    assert_cu_status(cu->MemcpyDtoH(pageable, d + 32, 64), CUDA_ERROR_INVALID_VALUE);
    CUstream s = NULL;
    assert_cu(cu->StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0));
    assert_cu_status(cu->MemsetD8Async(as_device, 0, 8, s), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemcpyHtoDAsync(as_device, pinned, 8, s), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemcpyDtoHAsync((void *)(uintptr_t)d, d, 8, s), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemFree((CUdeviceptr)(uintptr_t)pinned), CUDA_ERROR_INVALID_VALUE);
    assert_cu_status(cu->MemFreeHost((void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE);
    /* The right kinds work. */
    assert_cu(cu->MemcpyHtoD(d, pinned, 8));
    assert_cu(cu->MemcpyDtoH(pageable, d, 8));
    assert_cu(cu->StreamDestroy(s));
    assert_cu(cu->MemFree(d));
    assert_cu(cu->MemFreeHost(pinned));
}

static void a_pageable_copy_to_the_device_lands_late(void **state) {
    (void)state;
    CUdeviceptr d = 0;
    assert_cu(cu->MemAlloc(&d, 8));
    unsigned long long *pinned = NULL;
    assert_cu(cu->MemHostAlloc((void **)&pinned, 8, CU_MEMHOSTALLOC_PORTABLE));
    CUstream s = NULL;
    assert_cu(cu->StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0));
    assert_cu(cu->MemsetD8Async(d, 0, 8, s));
    assert_cu(cu->StreamSynchronize(s));
    /* From pageable memory: staged; the next command of a non-blocking
     * stream does not see it. */
    unsigned long long five = 5;
    assert_cu(cu->MemcpyHtoD(d, &five, sizeof five));
    *pinned = 99;
    assert_cu(cu->MemcpyDtoHAsync(pinned, d, 8, s));
    assert_cu(cu->StreamSynchronize(s));
    assert_int_equal(*pinned, 0);
    /* It has landed since. */
    assert_cu(cu->MemcpyDtoHAsync(pinned, d, 8, s));
    assert_cu(cu->StreamSynchronize(s));
    assert_int_equal(*pinned, 5);
    /* From page-locked memory the copy is done when the call returns. */
    unsigned long long *seven = NULL;
    assert_cu(cu->MemHostAlloc((void **)&seven, 8, CU_MEMHOSTALLOC_PORTABLE));
    *seven = 7;
    assert_cu(cu->MemcpyHtoD(d, seven, 8));
    assert_cu(cu->MemcpyDtoHAsync(pinned, d, 8, s));
    assert_cu(cu->StreamSynchronize(s));
    assert_int_equal(*pinned, 7);
    assert_cu(cu->StreamDestroy(s));
    assert_cu(cu->MemFree(d));
    assert_cu(cu->MemFreeHost(pinned));
    assert_cu(cu->MemFreeHost(seven));
}

typedef struct freer {
    CUcontext ctx;
    CUdeviceptr d;
    _Atomic int done;
    CUresult result;
} freer_t;

static void *free_on_a_thread(void *arg) {
    freer_t *f = arg;
    (void)cu->CtxSetCurrent(f->ctx);
    f->result = cu->MemFree(f->d);
    atomic_store(&f->done, 1);
    return NULL;
}

static void a_free_waits_for_queued_work(void **state) {
    (void)state;
    CUdeviceptr gate_device = 0;
    _Atomic uint64_t *gate = gate_make(&gate_device);
    CUstream s = NULL;
    assert_cu(cu->StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0));
    assert_cu(cu->StreamWaitValue64(s, gate_device, 1, CU_STREAM_WAIT_VALUE_GEQ));
    freer_t f = {NULL, 0, 0, CUDA_ERROR_UNKNOWN};
    assert_cu(cu->CtxGetCurrent(&f.ctx));
    assert_cu(cu->MemAlloc(&f.d, 64));
    pthread_t thread = test_thread_start(free_on_a_thread, &f);
    /* Still waiting while the stream is held (a bounded look). */
    ordo_deadline_t look = ordo_deadline_after_ms(50);
    while (ordo_time_now_ns() < look) {
        assert_false(atomic_load(&f.done));
        test_sleep_ms(1);
    }
    atomic_store(gate, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&f.done)) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    pthread_join(thread, NULL);
    assert_cu(f.result);
    assert_cu(cu->StreamDestroy(s));
    assert_cu(cu->MemFreeHost((void *)gate));
}

static void one_hardware_queue_holds_later_work_behind_a_wait(void **state) {
    (void)state;
    CUdeviceptr gate_device = 0;
    _Atomic uint64_t *gate = gate_make(&gate_device);
    CUstream waiting = NULL;
    CUstream other = NULL;
    CUevent done = NULL;
    assert_cu(cu->StreamCreateWithPriority(&waiting, CU_STREAM_NON_BLOCKING, 0));
    assert_cu(cu->StreamCreateWithPriority(&other, CU_STREAM_NON_BLOCKING, 0));
    assert_cu(cu->EventCreate(&done, CU_EVENT_DISABLE_TIMING));
    assert_cu(cu->StreamWaitValue64(waiting, gate_device, 1, CU_STREAM_WAIT_VALUE_GEQ));
    /* Let the wait reach the device first. */
    test_sleep_ms(5);
    assert_cu(cu->EventRecord(done, other));
    ordo_deadline_t look = ordo_deadline_after_ms(50);
    while (ordo_time_now_ns() < look) {
        assert_cu_status(cu->EventQuery(done), CUDA_ERROR_NOT_READY);
        test_sleep_ms(1);
    }
    atomic_store(gate, 1);
    ordo_deadline_t deadline = test_deadline();
    CUresult r;
    while ((r = cu->EventQuery(done)) == CUDA_ERROR_NOT_READY) {
        assert_true(ordo_time_now_ns() < deadline);
        test_sleep_ms(1);
    }
    assert_cu(r);
    assert_cu(cu->EventDestroy(done));
    assert_cu(cu->StreamDestroy(waiting));
    assert_cu(cu->StreamDestroy(other));
    assert_cu(cu->MemFreeHost((void *)gate));
}

/* A fat binary of one entry: kind 1 (PTX) or 2 (SASS) for arch. */
static void fatbin_make(unsigned char *image, uint16_t kind, uint32_t arch) {
    memset(image, 0, 96);
    uint32_t magic = 0xba55ed50u;
    uint16_t version = 1, header = 16, entry_header = 64;
    uint64_t size = 64 + 16, payload = 16;
    memcpy(image, &magic, 4);
    memcpy(image + 4, &version, 2);
    memcpy(image + 6, &header, 2);
    memcpy(image + 8, &size, 8);
    memcpy(image + 16, &kind, 2);
    memcpy(image + 20, &entry_header, 2);
    memcpy(image + 24, &payload, 8);
    memcpy(image + 16 + 28, &arch, 4);
}

static void a_module_needs_code_for_the_device(void **state) {
    (void)state;
    CUmodule module = NULL;
    _Alignas(8) unsigned char image[96];
    fatbin_make(image, 2, 75);
    assert_cu_status(cu->ModuleLoadData(&module, image), CUDA_ERROR_NO_BINARY_FOR_GPU);
    fatbin_make(image, 1, 100);
    assert_cu_status(cu->ModuleLoadData(&module, image), CUDA_ERROR_NO_BINARY_FOR_GPU);
    fatbin_make(image, 2, 90);
    assert_cu(cu->ModuleLoadData(&module, image));
    assert_cu(cu->ModuleUnload(module));
    fatbin_make(image, 1, 80); /* PTX is compiled for a newer device */
    assert_cu(cu->ModuleLoadData(&module, image));
    assert_cu(cu->ModuleUnload(module));
    assert_cu_status(cu->ModuleLoadData(&module, ".version 8.0\n.target sm_100\n"),
                     CUDA_ERROR_NO_BINARY_FOR_GPU);
    assert_cu_status(cu->ModuleLoadData(&module, "not an image at all, just some words"),
                     CUDA_ERROR_INVALID_IMAGE);
    if (ordo_cuda_kernels_size) {
        /* The tests' own fat binary holds sm_90 code. */
        assert_cu(cu->ModuleLoadData(&module, ordo_cuda_kernels_image));
        assert_cu(cu->ModuleUnload(module));
    }
}

/* Returns from main with a device open and a point pending on it. */
/* Leaves a point of a new stream of device pending behind a gate that
 * never opens; 0, or 1 with the reason printed. */
static int leave_a_point_pending(ordo_device_t *device, const char *what) {
    ordo_stream_t *stream = NULL;
    ordo_signal_t *signal = NULL;
    if (ordo_stream_create(device, 0, &stream) != ORDO_OK ||
        ordo_signal_create(0, &signal) != ORDO_OK) {
        fprintf(stderr, "%s: %s\n", what, ordo_error_message());
        return 1;
    }
    cu = ordo__cuda_api();
    CUdeviceptr gate_device = 0;
    void *word = NULL;
    struct CUstream_st *native = NULL;
    if (cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) !=
            CUDA_SUCCESS ||
        cu->MemHostGetDevicePointer(&gate_device, word, 0) != CUDA_SUCCESS ||
        ordo_cuda_stream_handle(stream, &native) != ORDO_OK ||
        cu->StreamWaitValue64(native, gate_device, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS ||
        ordo_stream_signal(stream, signal, 1) != ORDO_OK) {
        fprintf(stderr, "%s: cannot set up the pending point\n", what);
        return 1;
    }
    return 0;
}

static int exit_with_device_open(void) {
    ordo_device_t *device = NULL;
    if (ordo_device_open("cuda:0", &device) != ORDO_OK) {
        fprintf(stderr, "exit-with-device-open: %s\n", ordo_error_message());
        return 1;
    }
    /* The watcher polls the point until ordo stops it at exit. */
    return leave_a_point_pending(device, "exit-with-device-open");
}

/* Run by exit after ordo's own exit handler (registered before it): a
 * device made now must be stopped as soon as it is made. */
static void open_a_device_late(void) {
    ordo_device_t *owned = NULL;
    if (ordo_device_create_owned("cuda:0", NULL, &owned) != ORDO_OK ||
        leave_a_point_pending(owned, "device-opened-during-exit") != 0) {
        fprintf(stderr, "device-opened-during-exit: %s\n", ordo_error_message());
        _Exit(1);
    }
}

static int device_opened_during_exit(void) {
    if (atexit(open_a_device_late) != 0) {
        return 1;
    }
    ordo_device_t *device = NULL;
    if (ordo_device_open("cuda:0", &device) != ORDO_OK) { /* registers ordo's handler */
        fprintf(stderr, "device-opened-during-exit: %s\n", ordo_error_message());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exit-with-device-open") == 0) {
        return exit_with_device_open();
    }
    if (argc > 1 && strcmp(argv[1], "device-opened-during-exit") == 0) {
        return device_opened_during_exit();
    }
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_proc_honours_the_version),
        cmocka_unit_test(device_and_host_pointers_are_different_kinds),
        cmocka_unit_test(a_pageable_copy_to_the_device_lands_late),
        cmocka_unit_test(a_free_waits_for_queued_work),
        cmocka_unit_test(one_hardware_queue_holds_later_work_behind_a_wait),
        cmocka_unit_test(a_module_needs_code_for_the_device),
    };
    return cmocka_run_group_tests_name("fake_cuda", tests, setup, teardown);
}
