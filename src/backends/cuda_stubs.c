/* The functions of ordo/cuda.h in a build without cuda.h: each refuses
 * with ORDO_ERR_UNSUPPORTED and says why. */
#include "base/error.h"
#include "ordo/cuda.h"

static ordo_status_t not_built(const char *api) {
    return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                       "ordo was built without the CUDA backend (cuda.h was not found)");
}

ordo_status_t ordo_cuda_stream_handle(ordo_stream_t *stream, struct CUstream_st **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    (void)stream;
    return not_built(__func__);
}

ordo_status_t ordo_cuda_stream_enqueue(ordo_stream_t *stream, ordo_cuda_enqueue_fn fn, void *ctx) {
    (void)stream, (void)fn, (void)ctx;
    return not_built(__func__);
}

ordo_status_t ordo_cuda_device_context(ordo_device_t *device, struct CUctx_st **out_context,
                                       int *out_device) {
    if (out_context) {
        *out_context = NULL;
    }
    if (out_device) {
        *out_device = 0;
    }
    (void)device;
    return not_built(__func__);
}

ordo_status_t ordo_cuda_make_current(ordo_device_t *device) {
    (void)device;
    return not_built(__func__);
}

ordo_status_t ordo_mem_cuda_async_create(ordo_device_t *device,
                                         ordo_mem_resource_t **out_resource) {
    if (out_resource) {
        *out_resource = NULL;
    }
    (void)device;
    return not_built(__func__);
}

ordo_status_t ordo_mem_host_pinned_create(ordo_device_t *device,
                                          ordo_mem_resource_t **out_resource) {
    if (out_resource) {
        *out_resource = NULL;
    }
    (void)device;
    return not_built(__func__);
}
