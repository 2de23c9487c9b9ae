// Kernels of the CUDA tests and benchmarks. Compiled by nvcc into a fat
// binary embedded in the test and tool programs (see CMakeLists.txt) and
// loaded with cuModuleLoadData: nothing links against the CUDA runtime.
// Every kernel is launched with one block of one thread unless noted.

__device__ static unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ static void spin_ns(unsigned long long ns) {
    unsigned long long start = now_ns();
    while (now_ns() - start < ns) {
    }
}

// Busy-waits ns nanoseconds on the device's global timer.
extern "C" __global__ void ordo_spin(unsigned long long ns) {
    spin_ns(ns);
}

// cells[i] = value for i < n (any launch shape).
extern "C" __global__ void ordo_fill(unsigned long long *cells, unsigned long long value,
                                     unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        cells[i] = value;
    }
}

// After ns of busy work, cells[dst] = cells[a] * P + cells[b] + dst + 1: a
// value that differs if either input was read too early.
extern "C" __global__ void ordo_combine(unsigned long long *cells, int dst, int a, int b,
                                        unsigned long long ns) {
    spin_ns(ns);
    volatile unsigned long long *c = cells;
    c[dst] = c[a] * 1099511628211ull + c[b] + (unsigned long long)dst + 1ull;
}

// After ns of busy work, adds one to *cell: a dependent chain step.
extern "C" __global__ void ordo_step(unsigned long long *cell, unsigned long long ns) {
    spin_ns(ns);
    volatile unsigned long long *c = cell;
    *c = *c + 1ull;
}

// Writes through bad: launched with an address no allocation covers, it
// faults the device (CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the context).
extern "C" __global__ void ordo_fault(unsigned long long *bad) {
    volatile unsigned long long *p = bad;
    *p = 1ull;
}
