/* Internal: the CUDA driver API, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen on first use; every entry point is
 * looked up with cuGetProcAddress (by base name, for the ABI of the CUDA
 * version this was compiled against, capped at the driver's own version),
 * falling back to dlsym of the versioned symbol name. Nothing links
 * against libcuda or the CUDA runtime, so one binary runs with and without
 * a driver; without one, cuda_api_load says why.
 *
 * Thread-safety: cuda_api_load may be called from any thread (the first
 * call loads, the others wait for it and see the same result); the table
 * it returns is immutable afterwards. */
#ifndef ORDO_BACKENDS_CUDA_API_H
#define ORDO_BACKENDS_CUDA_API_H

#include <cuda.h>
#include <stddef.h>

#include "ordo/status.h"

typedef struct cuda_api {
    int driver_version;
    /* Required: loading fails without any of these. */
    CUresult (*Init)(unsigned int flags);
    CUresult (*DriverGetVersion)(int *version);
    CUresult (*GetErrorName)(CUresult error, const char **out);
    CUresult (*GetErrorString)(CUresult error, const char **out);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *device, int ordinal);
    CUresult (*DeviceGetName)(char *name, int length, CUdevice device);
    CUresult (*DeviceGetAttribute)(int *value, CUdevice_attribute attribute, CUdevice device);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice device);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice device);
    CUresult (*CtxSetCurrent)(CUcontext context);
    CUresult (*CtxGetCurrent)(CUcontext *context);
    CUresult (*CtxPushCurrent)(CUcontext context);
    CUresult (*CtxPopCurrent)(CUcontext *context);
    CUresult (*CtxGetStreamPriorityRange)(int *least, int *greatest);
    CUresult (*CtxSynchronize)(void);
    CUresult (*StreamCreateWithPriority)(CUstream *stream, unsigned int flags, int priority);
    CUresult (*StreamDestroy)(CUstream stream);
    CUresult (*StreamQuery)(CUstream stream);
    CUresult (*StreamSynchronize)(CUstream stream);
    CUresult (*StreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
    CUresult (*EventCreate)(CUevent *event, unsigned int flags);
    CUresult (*EventDestroy)(CUevent event);
    CUresult (*EventRecord)(CUevent event, CUstream stream);
    CUresult (*EventQuery)(CUevent event);
    CUresult (*EventSynchronize)(CUevent event);
    CUresult (*EventElapsedTime)(float *milliseconds, CUevent start, CUevent end);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*MemHostAlloc)(void **ptr, size_t bytes, unsigned int flags);
    CUresult (*MemFreeHost)(void *ptr);
    CUresult (*MemHostGetDevicePointer)(CUdeviceptr *device_ptr, void *host_ptr,
                                        unsigned int flags);
    CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
    CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
    CUresult (*ModuleLoadData)(CUmodule *module, const void *image);
    CUresult (*ModuleUnload)(CUmodule module);
    CUresult (*ModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
    CUresult (*LaunchKernel)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void **params, void **extra);
    /* Optional: NULL when the driver lacks them. */
    CUresult (*StreamWaitValue64)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                  unsigned int flags);
    CUresult (*StreamWriteValue64)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                   unsigned int flags);
    CUresult (*MemAllocAsync)(CUdeviceptr *ptr, size_t bytes, CUstream stream);
    CUresult (*MemFreeAsync)(CUdeviceptr ptr, CUstream stream);
    CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool *pool, CUdevice device);
    CUresult (*MemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attribute, void *value);
    CUresult (*MemPoolGetAttribute)(CUmemoryPool pool, CUmemPool_attribute attribute, void *value);
} cuda_api_t;

/* The loaded table, or NULL with the reason ("libcuda.so.1 not found:
 * ...", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)") copied into reason. */
const cuda_api_t *cuda_api_load(char *reason, size_t capacity);

/* The table once loaded successfully (NULL before or after a failure). */
const cuda_api_t *cuda_api(void);

/* "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)". */
void cuda_describe(CUresult result, char *out, size_t capacity);

/* Raises an ordo error for a failed driver call: status from the result
 * (out of memory, not ready, device), message "what: CUDA_ERROR_...". */
ordo_status_t cuda_error(CUresult result, const char *api, const char *what);

/* The ordo status class of a driver result. */
ordo_status_t cuda_status_of(CUresult result);

#endif
