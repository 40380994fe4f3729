// Misaligned accesses, the memory-access-pattern lesson: c = a + b where the
// reads (read_offset, read_offset_unrolled) or the writes (write_offset) are
// shifted by `offset` elements, a run-time argument, so one module serves
// every offset. With offset 11 a warp's 128 bytes straddle two 128-byte lines;
// with 0 or 128 they fill one.
//
//   read_offset:          c[i] = a[i + offset] + b[i + offset],  i < n
//   write_offset:         c[i + offset] = a[i] + b[i],           i < n
//   read_offset_unrolled: as read_offset, UNROLL elements per thread, BLOCK
//                         apart; all loads are issued before any store.
//
// The caller provides a and b with n + offset readable elements (reads) or c
// with n + offset writable elements (writes). Any n works: a block whose
// elements all lie below n takes the unguarded path, the last block checks
// each element.
//
// Compile-time knobs (-D): BLOCK (threads per block; the launch must match),
// UNROLL, READ_ONLY (1: const __restrict__ pointers and __ldg, the read-only
// path; 0: plain pointers and loads), and one OFFSET_<VARIANT>. The L1 policy
// comes from the tuner's -Xptxas -dlcm=ca|cg flag.
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef READ_ONLY
#define READ_ONLY 0
#endif

typedef unsigned long long u64;

#if READ_ONLY
#define IN_PTR const float* __restrict__
#define OUT_PTR float* __restrict__
#define LOAD(p) __ldg(p)
#else
#define IN_PTR const float*
#define OUT_PTR float*
#define LOAD(p) (*(p))
#endif

#if defined(OFFSET_READ_OFFSET)
extern "C" __global__ void __launch_bounds__(BLOCK) read_offset(IN_PTR a, IN_PTR b, OUT_PTR c, u64 n, u64 offset) {
    const u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) c[i] = LOAD(a + i + offset) + LOAD(b + i + offset);
}
#endif

#if defined(OFFSET_WRITE_OFFSET)
extern "C" __global__ void __launch_bounds__(BLOCK) write_offset(IN_PTR a, IN_PTR b, OUT_PTR c, u64 n, u64 offset) {
    const u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) c[i + offset] = LOAD(a + i) + LOAD(b + i);
}
#endif

#if defined(OFFSET_READ_OFFSET_UNROLLED)
extern "C" __global__ void __launch_bounds__(BLOCK)
read_offset_unrolled(IN_PTR a, IN_PTR b, OUT_PTR c, u64 n, u64 offset) {
    const u64 first = (u64)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    if (first + (u64)(UNROLL - 1) * BLOCK < n) {
        // Every element of this thread exists: 2 x UNROLL independent loads in flight.
        float sum[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const u64 k = first + (u64)u * BLOCK + offset;
            sum[u] = LOAD(a + k) + LOAD(b + k);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) c[first + (u64)u * BLOCK] = sum[u];
    } else {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const u64 i = first + (u64)u * BLOCK;
            if (i < n) c[i] = LOAD(a + i + offset) + LOAD(b + i + offset);
        }
    }
}
#endif
