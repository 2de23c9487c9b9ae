/* Loading the CUDA driver at run time (see cuda_api.h). */
#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

typedef PFN_cuGetProcAddress_v12000 get_proc_v2_fn;
typedef PFN_cuGetProcAddress_v11030 get_proc_v1_fn;

/* One entry point: its base name for cuGetProcAddress, the CUDA version
 * whose ABI of it the table's field is typed with (PFN_<base>_v<version>
 * of cudaTypedefs.h: the version the entry point last changed its
 * prototype at, up to that of the headers), and the exported symbol of
 * the same ABI for dlsym. Asking cuGetProcAddress for the entry at that
 * version, never at the driver's, is what keeps the prototype and the
 * function in step: a driver asked at its own version hands out the
 * newest ABI, which may take other arguments (cuCtxSynchronize at 13000
 * is cuCtxSynchronize_v2, which takes the context). */
typedef struct entry {
    const char *base;
    const char *symbol;
    int version;
    size_t offset;
    int optional;
} entry_t;

/* X(field, base, version, symbol, optional) */
#define CUDA_ENTRIES(X)                                                                            \
    X(GetErrorName, cuGetErrorName, 6000, "cuGetErrorName", 0)                                     \
    X(GetErrorString, cuGetErrorString, 6000, "cuGetErrorString", 0)                               \
    X(DeviceGetCount, cuDeviceGetCount, 2000, "cuDeviceGetCount", 0)                               \
    X(DeviceGet, cuDeviceGet, 2000, "cuDeviceGet", 0)                                              \
    X(DeviceGetName, cuDeviceGetName, 2000, "cuDeviceGetName", 0)                                  \
    X(DeviceGetAttribute, cuDeviceGetAttribute, 2000, "cuDeviceGetAttribute", 0)                   \
    X(DeviceTotalMem, cuDeviceTotalMem, 3020, "cuDeviceTotalMem_v2", 0)                            \
    X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, "cuDevicePrimaryCtxRetain", 0)       \
    X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 11000, "cuDevicePrimaryCtxRelease_v2",   \
      0)                                                                                           \
    X(CtxSetCurrent, cuCtxSetCurrent, 4000, "cuCtxSetCurrent", 0)                                  \
    X(CtxGetCurrent, cuCtxGetCurrent, 4000, "cuCtxGetCurrent", 0)                                  \
    X(CtxPushCurrent, cuCtxPushCurrent, 4000, "cuCtxPushCurrent_v2", 0)                            \
    X(CtxPopCurrent, cuCtxPopCurrent, 4000, "cuCtxPopCurrent_v2", 0)                               \
    X(CtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange, 5050, "cuCtxGetStreamPriorityRange", \
      0)                                                                                           \
    X(CtxSynchronize, cuCtxSynchronize, 2000, "cuCtxSynchronize", 0)                               \
    X(StreamCreateWithPriority, cuStreamCreateWithPriority, 5050, "cuStreamCreateWithPriority", 0) \
    X(StreamDestroy, cuStreamDestroy, 4000, "cuStreamDestroy_v2", 0)                               \
    X(StreamQuery, cuStreamQuery, 2000, "cuStreamQuery", 0)                                        \
    X(StreamSynchronize, cuStreamSynchronize, 2000, "cuStreamSynchronize", 0)                      \
    X(StreamWaitEvent, cuStreamWaitEvent, 3020, "cuStreamWaitEvent", 0)                            \
    X(EventCreate, cuEventCreate, 2000, "cuEventCreate", 0)                                        \
    X(EventDestroy, cuEventDestroy, 4000, "cuEventDestroy_v2", 0)                                  \
    X(EventRecord, cuEventRecord, 2000, "cuEventRecord", 0)                                        \
    X(EventQuery, cuEventQuery, 2000, "cuEventQuery", 0)                                           \
    X(EventSynchronize, cuEventSynchronize, 2000, "cuEventSynchronize", 0)                         \
    X(EventElapsedTime, cuEventElapsedTime, 2000, "cuEventElapsedTime", 0)                         \
    X(MemAlloc, cuMemAlloc, 3020, "cuMemAlloc_v2", 0)                                              \
    X(MemFree, cuMemFree, 3020, "cuMemFree_v2", 0)                                                 \
    X(MemGetInfo, cuMemGetInfo, 3020, "cuMemGetInfo_v2", 0)                                        \
    X(MemHostAlloc, cuMemHostAlloc, 2020, "cuMemHostAlloc", 0)                                     \
    X(MemFreeHost, cuMemFreeHost, 2000, "cuMemFreeHost", 0)                                        \
    X(MemHostGetDevicePointer, cuMemHostGetDevicePointer, 3020, "cuMemHostGetDevicePointer_v2", 0) \
    X(MemcpyHtoD, cuMemcpyHtoD, 3020, "cuMemcpyHtoD_v2", 0)                                        \
    X(MemcpyDtoH, cuMemcpyDtoH, 3020, "cuMemcpyDtoH_v2", 0)                                        \
    X(MemcpyHtoDAsync, cuMemcpyHtoDAsync, 3020, "cuMemcpyHtoDAsync_v2", 0)                         \
    X(MemcpyDtoHAsync, cuMemcpyDtoHAsync, 3020, "cuMemcpyDtoHAsync_v2", 0)                         \
    X(MemsetD8Async, cuMemsetD8Async, 3020, "cuMemsetD8Async", 0)                                  \
    X(ModuleLoadData, cuModuleLoadData, 2000, "cuModuleLoadData", 0)                               \
    X(ModuleUnload, cuModuleUnload, 2000, "cuModuleUnload", 0)                                     \
    X(ModuleGetFunction, cuModuleGetFunction, 2000, "cuModuleGetFunction", 0)                      \
    X(LaunchKernel, cuLaunchKernel, 4000, "cuLaunchKernel", 0)                                     \
    /* The v2 stream memory operations (CUDA 11.7 on); older drivers only                          \
     * have the v1 ones, which need a kernel module parameter: not used. */                        \
    X(StreamWaitValue64, cuStreamWaitValue64, 11070, "cuStreamWaitValue64_v2", 1)                  \
    X(StreamWriteValue64, cuStreamWriteValue64, 11070, "cuStreamWriteValue64_v2", 1)               \
    X(MemAllocAsync, cuMemAllocAsync, 11020, "cuMemAllocAsync", 1)                                 \
    X(MemFreeAsync, cuMemFreeAsync, 11020, "cuMemFreeAsync", 1)                                    \
    X(DeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, "cuDeviceGetDefaultMemPool", 1)   \
    X(MemPoolSetAttribute, cuMemPoolSetAttribute, 11020, "cuMemPoolSetAttribute", 1)               \
    X(MemPoolGetAttribute, cuMemPoolGetAttribute, 11020, "cuMemPoolGetAttribute", 1)               \
    /* Graphs (cuda_graph.c), all or none. */                                                      \
    X(StreamBeginCapture, cuStreamBeginCapture, 10010, "cuStreamBeginCapture_v2", 1)               \
    X(StreamEndCapture, cuStreamEndCapture, 10000, "cuStreamEndCapture", 1)                        \
    X(GraphCreate, cuGraphCreate, 10000, "cuGraphCreate", 1)                                       \
    X(GraphAddChildGraphNode, cuGraphAddChildGraphNode, 10000, "cuGraphAddChildGraphNode", 1)      \
    X(GraphAddEmptyNode, cuGraphAddEmptyNode, 10000, "cuGraphAddEmptyNode", 1)                     \
    X(GraphGetNodes, cuGraphGetNodes, 10000, "cuGraphGetNodes", 1)                                 \
    X(GraphDestroy, cuGraphDestroy, 10000, "cuGraphDestroy", 1)                                    \
    X(GraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040,                               \
      "cuGraphInstantiateWithFlags", 1)                                                            \
    X(GraphLaunch, cuGraphLaunch, 10000, "cuGraphLaunch", 1)                                       \
    X(GraphExecDestroy, cuGraphExecDestroy, 10000, "cuGraphExecDestroy", 1)                        \
    /* Updating an executable graph in place (CUDA 12.0 on; without it, a                          \
     * graph lowered again is instantiated again). */                                              \
    X(GraphExecUpdate, cuGraphExecUpdate, 12000, "cuGraphExecUpdate_v2", 1)                        \
    /* Other threads' captures (cuda_backend.c, ordo__cuda_relax_captures). */                     \
    X(ThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, 10010,                   \
      "cuThreadExchangeStreamCaptureMode", 1)

#define ENTRY(field, base, version, symbol, optional)                                              \
    {#base, symbol, version, offsetof(cuda_api_t, field), optional},
static const entry_t entries[] = {CUDA_ENTRIES(ENTRY)};

/* A field typed with another version's prototype than the one it is looked
 * up at does not build. */
#define CHECK_TYPE(field, base, version, symbol, optional)                                         \
    _Static_assert(_Generic(((cuda_api_t *)0)->field, PFN_##base##_v##version : 1, default : 0),   \
                   #field " is not typed PFN_" #base "_v" #version);
CUDA_ENTRIES(CHECK_TYPE)

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cuda_api_t table;
static const cuda_api_t *loaded;
static char load_reason[160];

void ordo__cuda_describe(CUresult result, char *out, size_t capacity) {
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

ordo_status_t ordo__cuda_status_of(CUresult result) {
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

ordo_status_t ordo__cuda_error(CUresult result, const char *api, const char *what) {
    char detail[128];
    ordo__cuda_describe(result, detail, sizeof detail);
    return ordo__error(ordo__cuda_status_of(result), api, "%s: %s", what, detail);
}

/* Looks one entry point up: cuGetProcAddress at the version of the
 * entry's prototype first, dlsym of the symbol of that ABI second. A driver
 * older than that version has no such ABI (cuGetProcAddress refuses a
 * version above the driver's); its dlsym finds none either unless the
 * symbol is older than the entry's version says. */
static void *resolve(void *lib, get_proc_v2_fn get_v2, get_proc_v1_fn get_v1, int driver,
                     const entry_t *e) {
    void *fn = NULL;
    if (e->version <= driver) {
        if (get_v2) {
            CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            if (get_v2(e->base, &fn, e->version, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
                    CUDA_SUCCESS ||
                status != CU_GET_PROC_ADDRESS_SUCCESS) {
                fn = NULL;
            }
        } else if (get_v1) {
            if (get_v1(e->base, &fn, e->version, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) {
                fn = NULL;
            }
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
    get_proc_v2_fn get_v2 = NULL;
    get_proc_v1_fn get_v1 = NULL;
    SET_FN(get_v2, dlsym(lib, "cuGetProcAddress_v2"));
    if (!get_v2) {
        SET_FN(get_v1, dlsym(lib, "cuGetProcAddress"));
    }
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
        void *fn = resolve(lib, get_v2, get_v1, driver, &entries[i]);
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

const cuda_api_t *ordo__cuda_api_load(char *reason, size_t capacity) {
    pthread_once(&load_once, load);
    if (!loaded && reason && capacity) {
        snprintf(reason, capacity, "%s", load_reason);
    }
    return loaded;
}

const cuda_api_t *ordo__cuda_api(void) {
    return loaded;
}
