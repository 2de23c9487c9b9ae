/* Loading the CUDA driver at run time (see cuda_api.h). */
#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

typedef CUresult (*get_proc_v2_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status);
typedef CUresult (*get_proc_v1_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags);

/* One entry point: its base name for cuGetProcAddress and the exported
 * symbol of the same ABI for dlsym. */
typedef struct entry {
    const char *base;
    const char *symbol;
    size_t offset;
    int optional;
} entry_t;

#define REQ(field, base, symbol)                                                                   \
    { base, symbol, offsetof(cuda_api_t, field), 0 }
#define OPT(field, base, symbol)                                                                   \
    { base, symbol, offsetof(cuda_api_t, field), 1 }

static const entry_t entries[] = {
    REQ(GetErrorName, "cuGetErrorName", "cuGetErrorName"),
    REQ(GetErrorString, "cuGetErrorString", "cuGetErrorString"),
    REQ(DeviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount"),
    REQ(DeviceGet, "cuDeviceGet", "cuDeviceGet"),
    REQ(DeviceGetName, "cuDeviceGetName", "cuDeviceGetName"),
    REQ(DeviceGetAttribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute"),
    REQ(DeviceTotalMem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2"),
    REQ(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"),
    REQ(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"),
    REQ(CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent"),
    REQ(CtxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent"),
    REQ(CtxPushCurrent, "cuCtxPushCurrent", "cuCtxPushCurrent_v2"),
    REQ(CtxPopCurrent, "cuCtxPopCurrent", "cuCtxPopCurrent_v2"),
    REQ(CtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", "cuCtxGetStreamPriorityRange"),
    REQ(CtxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize"),
    REQ(StreamCreateWithPriority, "cuStreamCreateWithPriority", "cuStreamCreateWithPriority"),
    REQ(StreamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2"),
    REQ(StreamQuery, "cuStreamQuery", "cuStreamQuery"),
    REQ(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize"),
    REQ(StreamWaitEvent, "cuStreamWaitEvent", "cuStreamWaitEvent"),
    REQ(EventCreate, "cuEventCreate", "cuEventCreate"),
    REQ(EventDestroy, "cuEventDestroy", "cuEventDestroy_v2"),
    REQ(EventRecord, "cuEventRecord", "cuEventRecord"),
    REQ(EventQuery, "cuEventQuery", "cuEventQuery"),
    REQ(EventSynchronize, "cuEventSynchronize", "cuEventSynchronize"),
    REQ(EventElapsedTime, "cuEventElapsedTime", "cuEventElapsedTime"),
    REQ(MemAlloc, "cuMemAlloc", "cuMemAlloc_v2"),
    REQ(MemFree, "cuMemFree", "cuMemFree_v2"),
    REQ(MemGetInfo, "cuMemGetInfo", "cuMemGetInfo_v2"),
    REQ(MemHostAlloc, "cuMemHostAlloc", "cuMemHostAlloc"),
    REQ(MemFreeHost, "cuMemFreeHost", "cuMemFreeHost"),
    REQ(MemHostGetDevicePointer, "cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2"),
    REQ(MemcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2"),
    REQ(MemcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2"),
    REQ(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2"),
    REQ(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2"),
    REQ(MemsetD8Async, "cuMemsetD8Async", "cuMemsetD8Async"),
    REQ(ModuleLoadData, "cuModuleLoadData", "cuModuleLoadData"),
    REQ(ModuleUnload, "cuModuleUnload", "cuModuleUnload"),
    REQ(ModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction"),
    REQ(LaunchKernel, "cuLaunchKernel", "cuLaunchKernel"),
    /* The v2 stream memory operations (CUDA 11.7 on); older drivers only
     * have the v1 ones, which need a kernel module parameter: not used. */
    OPT(StreamWaitValue64, "cuStreamWaitValue64", "cuStreamWaitValue64_v2"),
    OPT(StreamWriteValue64, "cuStreamWriteValue64", "cuStreamWriteValue64_v2"),
    OPT(MemAllocAsync, "cuMemAllocAsync", "cuMemAllocAsync"),
    OPT(MemFreeAsync, "cuMemFreeAsync", "cuMemFreeAsync"),
    OPT(DeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool"),
    OPT(MemPoolSetAttribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute"),
    OPT(MemPoolGetAttribute, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute"),
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cuda_api_t table;
static const cuda_api_t *loaded;
static char load_reason[160];

void cuda_describe(CUresult result, char *out, size_t capacity) {
    const char *name = NULL;
    const char *text = NULL;
    if (loaded) {
        (void)loaded->GetErrorName(result, &name);
        (void)loaded->GetErrorString(result, &text);
    }
    if (name && text) {
        snprintf(out, capacity, "%s (%s)", name, text);
    } else {
        snprintf(out, capacity, "CUDA error %d", (int)result);
    }
}

ordo_status_t cuda_status_of(CUresult result) {
    switch (result) {
    case CUDA_SUCCESS:
        return ORDO_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return ORDO_ERR_OUT_OF_MEMORY;
    case CUDA_ERROR_NOT_READY:
        return ORDO_ERR_BUSY;
    case CUDA_ERROR_NOT_SUPPORTED:
        return ORDO_ERR_UNSUPPORTED;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return ORDO_ERR_INVALID_ARGUMENT;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
        return ORDO_ERR_UNAVAILABLE;
    default:
        return ORDO_ERR_DEVICE;
    }
}

ordo_status_t cuda_error(CUresult result, const char *api, const char *what) {
    char detail[128];
    cuda_describe(result, detail, sizeof detail);
    return ordo_error(cuda_status_of(result), api, "%s: %s", what, detail);
}

/* Looks one entry point up: cuGetProcAddress first, dlsym second. */
static void *resolve(void *lib, get_proc_v2_fn get_v2, get_proc_v1_fn get_v1, int version,
                     const entry_t *e) {
    void *fn = NULL;
    if (get_v2) {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (get_v2(e->base, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
            status != CU_GET_PROC_ADDRESS_SUCCESS) {
            fn = NULL;
        }
    } else if (get_v1) {
        if (get_v1(e->base, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) {
            fn = NULL;
        }
    }
    if (!fn) {
        fn = dlsym(lib, e->symbol);
    }
    return fn;
}

/* Stores a looked-up address into a function pointer of the table. */
#define SET_FN(field, address)                                                                     \
    do {                                                                                           \
        void *address_ = (address);                                                                \
        memcpy(&(field), &address_, sizeof address_);                                              \
    } while (0)

/* Results that keep a driver from starting, named even when the library
 * cannot name them (a stub library answers every call with an error). */
static const struct {
    CUresult result;
    const char *text;
} startup_errors[] = {
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"},
    {CUDA_ERROR_STUB_LIBRARY,
     "CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is the toolkit's stub, not a driver)"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (the driver library and the kernel module differ)"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE (devices busy or unavailable)"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED (operation not permitted)"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM (an OS call failed)"},
};

/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", through the
 * library's own functions (they need no initialisation). */
static void describe_raw(void *lib, CUresult r, char *out, size_t capacity) {
    CUresult (*get_name)(CUresult, const char **) = NULL;
    CUresult (*get_string)(CUresult, const char **) = NULL;
    SET_FN(get_name, dlsym(lib, "cuGetErrorName"));
    SET_FN(get_string, dlsym(lib, "cuGetErrorString"));
    const char *name = NULL;
    const char *text = NULL;
    if (get_name) {
        (void)get_name(r, &name);
    }
    if (get_string) {
        (void)get_string(r, &text);
    }
    if (name && text) {
        snprintf(out, capacity, "%s (%s)", name, text);
    } else if (name) {
        snprintf(out, capacity, "%s", name);
    } else {
        snprintf(out, capacity, "CUDA error %d", (int)r);
        for (size_t i = 0; i < sizeof startup_errors / sizeof startup_errors[0]; ++i) {
            if (startup_errors[i].result == r) {
                snprintf(out, capacity, "%s", startup_errors[i].text);
            }
        }
    }
}

static void load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_reason, sizeof load_reason, "libcuda.so.1 not found: %s",
                 why ? why : "dlopen failed");
        return;
    }
    cuda_api_t api;
    memset(&api, 0, sizeof api);
    SET_FN(api.Init, dlsym(lib, "cuInit"));
    SET_FN(api.DriverGetVersion, dlsym(lib, "cuDriverGetVersion"));
    if (!api.Init || !api.DriverGetVersion) {
        snprintf(load_reason, sizeof load_reason,
                 "libcuda.so.1 lacks cuInit or cuDriverGetVersion");
        dlclose(lib);
        return;
    }
    char detail[120];
    CUresult r = api.Init(0);
    if (r != CUDA_SUCCESS) {
        describe_raw(lib, r, detail, sizeof detail);
        snprintf(load_reason, sizeof load_reason, "cuInit failed: %s", detail);
        dlclose(lib);
        return;
    }
    int driver = 0;
    if ((r = api.DriverGetVersion(&driver)) != CUDA_SUCCESS || driver <= 0) {
        describe_raw(lib, r, detail, sizeof detail);
        snprintf(load_reason, sizeof load_reason, "cuDriverGetVersion failed: %s", detail);
        dlclose(lib);
        return;
    }
    api.driver_version = driver;
    /* Ask for the ABI of the headers this was built with, but never for a
     * version above the driver's (cuGetProcAddress refuses those). */
    int version = driver < CUDA_VERSION ? driver : CUDA_VERSION;
    get_proc_v2_fn get_v2 = NULL;
    get_proc_v1_fn get_v1 = NULL;
    SET_FN(get_v2, dlsym(lib, "cuGetProcAddress_v2"));
    if (!get_v2) {
        SET_FN(get_v1, dlsym(lib, "cuGetProcAddress"));
    }
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
        void *fn = resolve(lib, get_v2, get_v1, version, &entries[i]);
        if (!fn && !entries[i].optional) {
            snprintf(load_reason, sizeof load_reason, "the CUDA driver (version %d.%d) lacks %s",
                     driver / 1000, (driver % 1000) / 10, entries[i].base);
            dlclose(lib);
            return;
        }
        memcpy((char *)&api + entries[i].offset, &fn, sizeof fn);
    }
    int count = 0;
    r = api.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        describe_raw(lib, r, detail, sizeof detail);
        snprintf(load_reason, sizeof load_reason, "cuDeviceGetCount failed: %s", detail);
        dlclose(lib);
        return;
    }
    if (count <= 0) {
        snprintf(load_reason, sizeof load_reason, "cuDeviceGetCount: no CUDA device found");
        dlclose(lib);
        return;
    }
    /* The library stays loaded for the life of the process: function
     * pointers into it are handed out. */
    table = api;
    loaded = &table;
}

const cuda_api_t *cuda_api_load(char *reason, size_t capacity) {
    pthread_once(&load_once, load);
    if (!loaded && reason && capacity) {
        snprintf(reason, capacity, "%s", load_reason);
    }
    return loaded;
}

const cuda_api_t *cuda_api(void) {
    return loaded;
}
