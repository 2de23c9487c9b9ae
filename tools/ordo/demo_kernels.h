/* The shape of the demo's CUDA kernels (demo_kernels.cu), shared by the
 * kernels, the host code that launches them (demo_cuda.c) and the stand-in
 * driver that emulates them (tests/fake_cuda/fake_cuda.c), so that all
 * three agree on names, launch shapes and argument layouts. Plain C and
 * CUDA C++ alike; defines only constants.
 *
 * ordo_demo_matmul(const double *in, const double *b, double *out,
 *                  unsigned rows, unsigned k, unsigned m)
 *   out = in × b (rows × k times k × m, row-major), tiled through shared
 *   memory. Block DEMO_TILE × DEMO_TILE × 1; grid ceil(m / DEMO_TILE) ×
 *   ceil(rows / DEMO_TILE) × 1; thread (x, y) of block (bx, by) computes
 *   out[by * DEMO_TILE + y][bx * DEMO_TILE + x] when inside, accumulating
 *   with fused multiply-adds in increasing order of the inner index.
 *
 * ordo_demo_row_sums(const double *out, double *result, unsigned rows,
 *                    unsigned m)
 *   result[i] = the sum of row i of out (rows × m). Block
 *   DEMO_REDUCE_THREADS × 1 × 1; grid rows × 1 × 1; thread t of block i
 *   sums the columns t, t + DEMO_REDUCE_THREADS, ... of row i, then the
 *   block adds its partial sums pairwise in shared memory (partial[t] +=
 *   partial[t + half] for t < half, half = DEMO_REDUCE_THREADS / 2, ..., 1)
 *   and thread 0 writes partial[0].
 *
 * Either kernel launched with another block shape returns without writing. */
#ifndef ORDO_TOOL_DEMO_KERNELS_H
#define ORDO_TOOL_DEMO_KERNELS_H

#define DEMO_KERNEL_MATMUL "ordo_demo_matmul"
#define DEMO_KERNEL_ROW_SUMS "ordo_demo_row_sums"

/* The side of the matrix product's square tiles and thread blocks. */
#define DEMO_TILE 16
/* Threads per row in the row sums (a power of two). */
#define DEMO_REDUCE_THREADS 256

#endif
