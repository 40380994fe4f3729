// Streaming yardsticks: a grid-stride copy and a read-only pass, both with
// VEC-wide loads and UNROLL loads in flight per thread. A scalar head reaches
// the first VEC-aligned element (source and destination share the offset) and a
// scalar tail finishes after the last whole vector.
//
// Compile-time knobs (-D): ELEM (4-byte type), BLOCK, VEC, UNROLL, CACHE_HINT,
// and COPY_COPY or COPY_READ.
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

typedef unsigned long long u64;

#if defined(COPY_COPY)
extern "C" __global__ void __launch_bounds__(BLOCK)
copy_kernel(const ELEM* __restrict__ src, ELEM* __restrict__ dst, u64 n) {
    using V = Vec<ELEM, VEC>;
    // Source and destination share their offset, so the head aligns both.
    V* out = reinterpret_cast<V*>(dst + aligned_head<VEC>(src, n));
    grid_stride_vectors<VEC, UNROLL, BLOCK>(
        src, n, [&](u64 j) { dst[j] = src[j]; }, [&](u64 j, const V& r) { out[j] = r; });
}
#endif

#if defined(COPY_READ)
// Reads every element once and folds the bits with XOR (cheaper than a sum and
// exact for any type); one word per block is written so the loads stay live.
extern "C" __global__ void __launch_bounds__(BLOCK)
read_kernel(const ELEM* __restrict__ src, unsigned* __restrict__ partials, u64 n) {
    using V = Vec<unsigned, VEC>;
    const unsigned* words = reinterpret_cast<const unsigned*>(src);
    unsigned acc = 0u;
    grid_stride_vectors<VEC, UNROLL, BLOCK>(
        words, n, [&](u64 j) { acc ^= words[j]; },
        [&](u64, const V& r) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc ^= r.v[k];
        });
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
    __shared__ unsigned warp_totals[BLOCK / 32];
    if ((threadIdx.x & 31) == 0) warp_totals[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int w = 0; w < BLOCK / 32; ++w) total ^= warp_totals[w];
        partials[blockIdx.x] = total;
    }
}
#endif
