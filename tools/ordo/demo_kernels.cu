// The CUDA kernels of `ordo demo` (demo.c, demo_cuda.c). Compiled by nvcc
// into a fat binary embedded in the ordo program (see CMakeLists.txt) and
// loaded with cuModuleLoadData: nothing links against the CUDA runtime.
// Launch shapes and argument layouts are described in demo_kernels.h; the
// stand-in driver of the tests emulates both kernels to the same
// description.
#include "demo_kernels.h"

#if (DEMO_REDUCE_THREADS & (DEMO_REDUCE_THREADS - 1)) != 0
#error "DEMO_REDUCE_THREADS must be a power of two"
#endif

// out = in × b: rows × k times k × m, all row-major doubles. Each block
// stages one DEMO_TILE-wide slab of in and of b in shared memory per step
// along k; cells outside the matrices read as zero and are not written.
extern "C" __global__ void ordo_demo_matmul(const double *__restrict__ in,
                                            const double *__restrict__ b, double *__restrict__ out,
                                            unsigned rows, unsigned k, unsigned m) {
    __shared__ double tile_in[DEMO_TILE][DEMO_TILE];
    __shared__ double tile_b[DEMO_TILE][DEMO_TILE];
    if (blockDim.x != DEMO_TILE || blockDim.y != DEMO_TILE || blockDim.z != 1) {
        return; // not the launch shape the tiles are indexed for (the same for the whole block)
    }
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const unsigned row = blockIdx.y * DEMO_TILE + ty;
    const unsigned col = blockIdx.x * DEMO_TILE + tx;
    double sum = 0.0;
    for (unsigned base = 0; base < k; base += DEMO_TILE) {
        const unsigned p_in = base + tx; // the column of in this thread stages
        const unsigned p_b = base + ty;  // the row of b this thread stages
        tile_in[ty][tx] = row < rows && p_in < k ? in[(size_t)row * k + p_in] : 0.0;
        tile_b[ty][tx] = p_b < k && col < m ? b[(size_t)p_b * m + col] : 0.0;
        __syncthreads();
        for (unsigned p = 0; p < DEMO_TILE; ++p) {
            sum = fma(tile_in[ty][p], tile_b[p][tx], sum);
        }
        __syncthreads();
    }
    if (row < rows && col < m) {
        out[(size_t)row * m + col] = sum;
    }
}

// result[row] = the sum of row `row` of out (rows × m), one block per row.
extern "C" __global__ void ordo_demo_row_sums(const double *__restrict__ out,
                                              double *__restrict__ result, unsigned rows,
                                              unsigned m) {
    __shared__ double partial[DEMO_REDUCE_THREADS];
    if (blockDim.x != DEMO_REDUCE_THREADS || blockDim.y != 1 || blockDim.z != 1) {
        return; // not the launch shape partial[] is sized for (the same for the whole block)
    }
    const unsigned row = blockIdx.x;
    const unsigned t = threadIdx.x;
    double sum = 0.0;
    if (row < rows) {
        for (unsigned j = t; j < m; j += DEMO_REDUCE_THREADS) {
            sum += out[(size_t)row * m + j];
        }
    }
    partial[t] = sum;
    __syncthreads();
    for (unsigned half = DEMO_REDUCE_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            partial[t] += partial[t + half];
        }
        __syncthreads();
    }
    if (t == 0 && row < rows) {
        result[row] = partial[0];
    }
}
