/* Internal: the CUDA driver API, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen on first use; every entry point is
 * looked up with cuGetProcAddress by base name at the CUDA version of the
 * prototype its field is typed with (PFN_<name>_v<version> of
 * cudaTypedefs.h, checked at build time in cuda_api.c), falling back to
 * dlsym of the versioned symbol name. Nothing links
 * against libcuda or the CUDA runtime, so one binary runs with and without
 * a driver; without one, ordo__cuda_api_load says why.
 *
 * Thread-safety: ordo__cuda_api_load may be called from any thread (the first
 * call loads, the others wait for it and see the same result); the table
 * it returns is immutable afterwards. */
#ifndef ORDO_BACKENDS_CUDA_API_H
#define ORDO_BACKENDS_CUDA_API_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stddef.h>

#include "ordo/status.h"

typedef struct ordo__cuda_api {
    int driver_version;
    /* Required: loading fails without any of these. */
    PFN_cuInit_v2000 Init;
    PFN_cuDriverGetVersion_v2020 DriverGetVersion;
    PFN_cuGetErrorName_v6000 GetErrorName;
    PFN_cuGetErrorString_v6000 GetErrorString;
    PFN_cuDeviceGetCount_v2000 DeviceGetCount;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetName_v2000 DeviceGetName;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuDeviceTotalMem_v3020 DeviceTotalMem;
    PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease;
    PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
    PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
    PFN_cuCtxPushCurrent_v4000 CtxPushCurrent;
    PFN_cuCtxPopCurrent_v4000 CtxPopCurrent;
    PFN_cuCtxGetStreamPriorityRange_v5050 CtxGetStreamPriorityRange;
    PFN_cuCtxSynchronize_v2000 CtxSynchronize;
    PFN_cuStreamCreateWithPriority_v5050 StreamCreateWithPriority;
    PFN_cuStreamDestroy_v4000 StreamDestroy;
    PFN_cuStreamQuery_v2000 StreamQuery;
    PFN_cuStreamSynchronize_v2000 StreamSynchronize;
    PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
    PFN_cuEventCreate_v2000 EventCreate;
    PFN_cuEventDestroy_v4000 EventDestroy;
    PFN_cuEventRecord_v2000 EventRecord;
    PFN_cuEventQuery_v2000 EventQuery;
    PFN_cuEventSynchronize_v2000 EventSynchronize;
    PFN_cuEventElapsedTime_v2000 EventElapsedTime;
    PFN_cuMemAlloc_v3020 MemAlloc;
    PFN_cuMemFree_v3020 MemFree;
    PFN_cuMemGetInfo_v3020 MemGetInfo;
    PFN_cuMemHostAlloc_v2020 MemHostAlloc;
    PFN_cuMemFreeHost_v2000 MemFreeHost;
    PFN_cuMemHostGetDevicePointer_v3020 MemHostGetDevicePointer;
    PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
    PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
    PFN_cuMemsetD8Async_v3020 MemsetD8Async;
    PFN_cuModuleLoadData_v2000 ModuleLoadData;
    PFN_cuModuleUnload_v2000 ModuleUnload;
    PFN_cuModuleGetFunction_v2000 ModuleGetFunction;
    PFN_cuLaunchKernel_v4000 LaunchKernel;
    /* Optional: NULL when the driver lacks them. */
    PFN_cuStreamWaitValue64_v11070 StreamWaitValue64;
    PFN_cuStreamWriteValue64_v11070 StreamWriteValue64;
    PFN_cuMemAllocAsync_v11020 MemAllocAsync;
    PFN_cuMemFreeAsync_v11020 MemFreeAsync;
    PFN_cuDeviceGetDefaultMemPool_v11020 DeviceGetDefaultMemPool;
    PFN_cuMemPoolSetAttribute_v11020 MemPoolSetAttribute;
    PFN_cuMemPoolGetAttribute_v11020 MemPoolGetAttribute;
    PFN_cuStreamBeginCapture_v10010 StreamBeginCapture;
    PFN_cuStreamEndCapture_v10000 StreamEndCapture;
    PFN_cuGraphCreate_v10000 GraphCreate;
    PFN_cuGraphAddChildGraphNode_v10000 GraphAddChildGraphNode;
    PFN_cuGraphAddEmptyNode_v10000 GraphAddEmptyNode;
    PFN_cuGraphGetNodes_v10000 GraphGetNodes;
    PFN_cuGraphDestroy_v10000 GraphDestroy;
    PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags;
    PFN_cuGraphLaunch_v10000 GraphLaunch;
    PFN_cuGraphExecDestroy_v10000 GraphExecDestroy;
    PFN_cuGraphExecUpdate_v12000 GraphExecUpdate; /* on its own: graphs work without it */
    /* Where it is missing, the driver has no stream capture either. */
    PFN_cuThreadExchangeStreamCaptureMode_v10010 ThreadExchangeStreamCaptureMode;
} cuda_api_t;

/* The loaded table, or NULL with the reason ("libcuda.so.1 not found:
 * ...", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)") copied into reason. */
const cuda_api_t *ordo__cuda_api_load(char *reason, size_t capacity);

/* The table once loaded successfully (NULL before or after a failure). */
const cuda_api_t *ordo__cuda_api(void);

/* "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)". */
void ordo__cuda_describe(CUresult result, char *out, size_t capacity);

/* Raises an ordo error for a failed driver call: status from the result
 * (out of memory, not ready, device), message "what: CUDA_ERROR_...". */
ordo_status_t ordo__cuda_error(CUresult result, const char *api, const char *what);

/* The ordo status class of a driver result. */
ordo_status_t ordo__cuda_status_of(CUresult result);

#endif
