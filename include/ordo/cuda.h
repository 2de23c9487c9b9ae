/**
 * @file ordo/cuda.h
 * @brief The CUDA backend: native handles, device work in stream order,
 * and CUDA memory resources.
 *
 * The CUDA backend is compiled in where `cuda.h` was found at build time
 * and loads the driver (`libcuda.so.1`) at run time; its devices are named
 * `"cuda:N"`. This header does not include `cuda.h`: the handles it hands
 * out are the driver's own types (`CUstream` is `struct CUstream_st *`,
 * `CUcontext` is `struct CUctx_st *`, `CUdevice` is an `int`).
 *
 * Every function here exists in every build. Called on a device or
 * stream of another backend it returns ::ORDO_ERR_INVALID_ARGUMENT (a
 * handle) or ::ORDO_ERR_UNSUPPORTED (a resource); in a build without
 * `cuda.h` every function returns ::ORDO_ERR_UNSUPPORTED.
 *
 * Ordering of device work. Work enqueued with ordo_cuda_stream_enqueue()
 * is ordered after everything submitted to the ordo stream before it
 * (host tasks, waits on signals, event records). Work enqueued directly on
 * the native handle is ordered after everything ordo has *issued* to the
 * device: a wait on a signal that no device work has been enqueued to
 * reach yet (a host signal, say) and a host task are held on the host
 * until they can go (the device never waits for the host), and raw work
 * enqueued meanwhile is not ordered behind them. See docs/CUDA.md.
 *
 * Host tasks that call CUDA: a host task runs once the device work before
 * it is done, and the device work after it is issued when it returns. A
 * copy to the device it makes must be complete by then: copy from
 * page-locked memory (ordo_mem_host_pinned_create(), cuMemHostAlloc), for
 * which cuMemcpyHtoD is synchronous. From pageable memory cuMemcpyHtoD
 * returns once the bytes are staged, and the copy, on the legacy stream,
 * is not ordered before the next kernel of ordo's non-blocking streams.
 *
 * Threads: each call makes the device's primary context current on the
 * calling thread (and leaves it so). Work enqueued from a thread of the
 * user's must have that context current (ordo_cuda_make_current()).
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef ORDO_CUDA_H
#define ORDO_CUDA_H

#include "ordo/export.h"

#include "ordo/device.h"
#include "ordo/memory.h"
#include "ordo/status.h"
#include "ordo/stream.h"

ORDO_BEGIN_DECLS

/** The driver's stream type (`CUstream` is a pointer to it). */
struct CUstream_st;
/** The driver's context type (`CUcontext` is a pointer to it). */
struct CUctx_st;

/**
 * @brief Enqueues device work (kernels, copies, memsets) on @p stream, the
 * native stream of an ordo CUDA stream, at its place in the ordo stream's
 * order.
 *
 * Runs on the submitting thread, or on the stream's host lane thread when
 * the stream holds operations back; either way with the device's primary
 * context current. It must only enqueue work and return: no blocking, no
 * waiting on the ordo stream it enqueues to.
 *
 * @param ctx the context given to ordo_cuda_stream_enqueue().
 * @param stream the native stream (`CUstream`).
 * @return ::ORDO_OK, or an error status: the ordo stream then fails at
 * this point (its later signal points fail with that status).
 */
typedef ordo_status_t (*ordo_cuda_enqueue_fn)(void *ctx, struct CUstream_st *stream);

/**
 * @brief The native stream (`CUstream`) of an ordo CUDA stream.
 *
 * Work enqueued on it directly is ordered after everything ordo has
 * issued to the device so far (see the file comment); use
 * ordo_cuda_stream_enqueue() to be ordered after everything submitted.
 * Inside a launch function being captured into a CUDA graph (ordo/graph.h,
 * "Native graphs"), on the capturing thread, it is the capture's stream.
 * Do not begin a capture of your own on it: ordo records its points and
 * device waits on the native stream, which a capture would take into the
 * graph (the driver then refuses ordo's queries of those points, and the
 * stream fails).
 *
 * @param stream a stream of a CUDA device.
 * @param[out] out_stream receives the handle; valid until the ordo stream
 * is destroyed.
 * @return ::ORDO_OK; ::ORDO_ERR_INVALID_HANDLE for a stream that is not
 * live; ::ORDO_ERR_INVALID_ARGUMENT for a NULL @p out_stream or a stream
 * of another backend; ::ORDO_ERR_UNSUPPORTED without the CUDA backend.
 */
ordo_status_t ordo_cuda_stream_handle(ordo_stream_t *stream, struct CUstream_st **out_stream);

/**
 * @brief Enqueues device work in the ordo stream's order.
 *
 * When the stream holds nothing back, @p fn runs now, on the calling
 * thread, and its status is returned; otherwise it is queued on the
 * stream's host lane and runs once the operations held before it have
 * been issued (its failure then fails the stream; the call returns
 * ::ORDO_OK). Inside a launch function being captured into a CUDA graph
 * (ordo/graph.h, "Native graphs"), @p fn runs now with the capture's
 * stream, and any other stream operation of the thread is refused with
 * ::ORDO_ERR_UNSUPPORTED.
 *
 * @param stream a stream of a CUDA device.
 * @param fn the function that enqueues the work.
 * @param ctx passed to @p fn.
 * @return ::ORDO_OK or @p fn's status; the stream's failure if it has
 * failed; ::ORDO_ERR_INVALID_HANDLE / ::ORDO_ERR_INVALID_ARGUMENT for bad
 * input; ::ORDO_ERR_UNSUPPORTED without the CUDA backend.
 */
ordo_status_t ordo_cuda_stream_enqueue(ordo_stream_t *stream, ordo_cuda_enqueue_fn fn, void *ctx);

/**
 * @brief The primary context and the driver's device ordinal of an ordo
 * CUDA device.
 *
 * @param device a CUDA device.
 * @param[out] out_context receives the primary context (`CUcontext`); may
 * be NULL.
 * @param[out] out_device receives the `CUdevice`; may be NULL.
 * @return ::ORDO_OK; ::ORDO_ERR_INVALID_HANDLE or
 * ::ORDO_ERR_INVALID_ARGUMENT for bad input; ::ORDO_ERR_UNSUPPORTED
 * without the CUDA backend.
 */
ordo_status_t ordo_cuda_device_context(ordo_device_t *device, struct CUctx_st **out_context,
                                       int *out_device);

/**
 * @brief Makes the device's primary context current on the calling
 * thread, for work the caller enqueues on native handles itself.
 *
 * @param device a CUDA device.
 * @return ::ORDO_OK; ::ORDO_ERR_DEVICE if the driver refuses;
 * ::ORDO_ERR_INVALID_HANDLE or ::ORDO_ERR_INVALID_ARGUMENT for bad input;
 * ::ORDO_ERR_UNSUPPORTED without the CUDA backend.
 */
ordo_status_t ordo_cuda_make_current(ordo_device_t *device);

/**
 * @brief A stream-ordered resource over CUDA's own allocator
 * (`cuMemAllocAsync` / `cuMemFreeAsync` on the device's default memory
 * pool).
 *
 * Allocation and free are enqueued on the stream named in the call. An
 * allocation is issued at once, even while the ordo stream holds work
 * back (it only makes the memory available sooner); a free goes in the
 * ordo stream's order (held with the stream's other held operations).
 * Inside a launch function being captured into a CUDA graph, an
 * allocation is refused (::ORDO_ERR_UNSUPPORTED): issued on the real
 * stream, it would escape the graph. Reuse across streams is CUDA's: a block freed on one stream
 * is reused by another only after a dependency CUDA can see (an event
 * wait; ordo's device waits are event waits). No use tracking
 * (ordo_mem_prepare_use() and friends return ::ORDO_ERR_UNSUPPORTED).
 * bytes_outstanding counts a block until its free is reached on the
 * device. The resource holds a reference on the device.
 *
 * @param device a CUDA device whose driver supports memory pools.
 * @param[out] out_resource receives the resource (destroy it with
 * ordo_mem_resource_destroy()).
 * @return ::ORDO_OK; ::ORDO_ERR_UNSUPPORTED on another backend, on a
 * device without memory pools, or without the CUDA backend;
 * ::ORDO_ERR_INVALID_HANDLE / ::ORDO_ERR_INVALID_ARGUMENT for bad input.
 */
ordo_status_t ordo_mem_cuda_async_create(ordo_device_t *device, ordo_mem_resource_t **out_resource);

/**
 * @brief A resource of page-locked host memory (`cuMemHostAlloc`,
 * portable to every context) for transfers between the host and a CUDA
 * device.
 *
 * The memory is host memory: the host reads and writes it directly, and
 * asynchronous copies to and from the device use it without staging. A
 * block freed on a stream is given back once the stream reaches the free.
 * No use tracking. The resource holds a reference on the device.
 *
 * @param device a CUDA device (the context the memory is registered with).
 * @param[out] out_resource receives the resource.
 * @return ::ORDO_OK; ::ORDO_ERR_UNSUPPORTED on another backend or without
 * the CUDA backend; ::ORDO_ERR_INVALID_HANDLE / ::ORDO_ERR_INVALID_ARGUMENT
 * for bad input.
 */
ordo_status_t ordo_mem_host_pinned_create(ordo_device_t *device,
                                          ordo_mem_resource_t **out_resource);

ORDO_END_DECLS

#endif
