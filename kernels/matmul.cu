// Square single-precision matrix multiply C = A x B (n x n, row-major), the
// shared-memory lesson. A block of TILE x TILE threads computes a TILE x TILE
// tile of C, one element per thread, summing k = 0 .. n-1 in order.
//
//   matmul_naive:     A and B straight from global memory. The threads of a
//                     row all read the same A element; B reads coalesce.
//   matmul_shared_a:  the block's TILE x TILE slice of A is staged in shared
//                     memory (one coalesced load per element). A row of the
//                     slice is written and read by one warp only (32 % TILE
//                     == 0 and a warp covers whole rows), so __syncwarp()
//                     orders it; B still comes from global memory.
//   matmul_shared_ab: slices of A and of B in shared memory, __syncthreads()
//                     between filling and using them (the classic tiling).
//
// Rows are `ld` elements apart (ld = n for linear storage, the pitch in
// elements for pitched storage); only columns below n are ever touched. Any n
// works: tiles that reach past n load zeros into shared memory and threads
// outside C compute nothing and store nothing, but still reach every barrier.
//
// Compile-time knobs (-D): TILE (8, 16 or 32; the block is TILE x TILE) and
// one MATMUL_<VARIANT>.
#include "common.cuh"

#ifndef TILE
#define TILE 16
#endif

static_assert(32 % TILE == 0 && (TILE * TILE) % 32 == 0, "TILE must be 8, 16 or 32");

typedef unsigned long long u64;

#if defined(MATMUL_NAIVE)
extern "C" __global__ void __launch_bounds__(TILE * TILE)
matmul_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n, int ld) {
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= n || col >= n) return;
    const float* a = A + (u64)row * ld;
    const float* b = B + col;
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += a[k] * b[(u64)k * ld];
    C[(u64)row * ld + col] = sum;
}
#endif

#if defined(MATMUL_SHARED_A)
extern "C" __global__ void __launch_bounds__(TILE * TILE)
matmul_shared_a(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n, int ld) {
    __shared__ float a_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool row_in = row < n, col_in = col < n;
    const float* a = A + (u64)(row_in ? row : 0) * ld;
    float sum = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        a_tile[ty][tx] = row_in && k0 + tx < n ? a[k0 + tx] : 0.0f;
        __syncwarp();  // the row a_tile[ty][*] was written by this warp
        if (col_in) {
            const float* b = B + (u64)k0 * ld + col;
            if (k0 + TILE <= n) {
#pragma unroll
                for (int k = 0; k < TILE; ++k) sum += a_tile[ty][k] * b[(u64)k * ld];
            } else {
                for (int k = 0; k < n - k0; ++k) sum += a_tile[ty][k] * b[(u64)k * ld];
            }
        }
        __syncwarp();  // every lane has read the row before it is overwritten
    }
    if (row_in && col_in) C[(u64)row * ld + col] = sum;
}
#endif

#if defined(MATMUL_SHARED_AB)
extern "C" __global__ void __launch_bounds__(TILE * TILE)
matmul_shared_ab(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n, int ld) {
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool row_in = row < n, col_in = col < n;
    const float* a = A + (u64)(row_in ? row : 0) * ld;
    float sum = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        a_tile[ty][tx] = row_in && k0 + tx < n ? a[k0 + tx] : 0.0f;
        b_tile[ty][tx] = col_in && k0 + ty < n ? B[(u64)(k0 + ty) * ld + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) sum += a_tile[ty][k] * b_tile[k][tx];
        __syncthreads();
    }
    if (row_in && col_in) C[(u64)row * ld + col] = sum;
}
#endif
