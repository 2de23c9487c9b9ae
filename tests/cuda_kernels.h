/* The test kernels (tests/cuda_kernels.cu), embedded by the build, and a
 * loader for tests and benchmarks. Internal; needs the CUDA backend. */
#ifndef ORDO_TESTS_CUDA_KERNELS_H
#define ORDO_TESTS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdio.h>

#include "backends/cuda/cuda_api.h"

extern const unsigned char ordo_cuda_kernels_image[];
extern const size_t ordo_cuda_kernels_size;
extern const char ordo_cuda_kernels_missing[];

typedef struct cuda_kernels {
    CUmodule module;
    CUfunction spin;
    CUfunction fill;
    CUfunction combine;
    CUfunction step;
    CUfunction fault;
} cuda_kernels_t;

/* Loads the kernels into the current context. 0 with a reason when they
 * were not built or the driver refuses the image. */
static inline int cuda_kernels_load(const cuda_api_t *cu, cuda_kernels_t *out, char *reason,
                                    size_t capacity) {
    if (ordo_cuda_kernels_size == 0) {
        snprintf(reason, capacity, "the test kernels were not built: %s",
                 ordo_cuda_kernels_missing);
        return 0;
    }
    CUresult r = cu->ModuleLoadData(&out->module, ordo_cuda_kernels_image);
    const char *what = "cuModuleLoadData";
    if (r == CUDA_SUCCESS) {
        what = "cuModuleGetFunction";
        if ((r = cu->ModuleGetFunction(&out->spin, out->module, "ordo_spin")) == CUDA_SUCCESS &&
            (r = cu->ModuleGetFunction(&out->fill, out->module, "ordo_fill")) == CUDA_SUCCESS &&
            (r = cu->ModuleGetFunction(&out->combine, out->module, "ordo_combine")) ==
                CUDA_SUCCESS &&
            (r = cu->ModuleGetFunction(&out->step, out->module, "ordo_step")) == CUDA_SUCCESS) {
            r = cu->ModuleGetFunction(&out->fault, out->module, "ordo_fault");
        }
    }
    if (r != CUDA_SUCCESS) {
        char detail[128];
        ordo__cuda_describe(r, detail, sizeof detail);
        snprintf(reason, capacity, "the test kernels cannot be loaded: %s: %s", what, detail);
        return 0;
    }
    return 1;
}

#endif
