// Sum reduction, from the divergent textbook kernel to a vectorised grid-stride
// kernel. Each kernel writes one partial sum per block to partials[blockIdx.x];
// the host (or a second launch over the partials) adds them. The shuffle kernel
// can also finish on the device in one launch (FINISH, see there).
//
// Compile-time knobs (-D): ELEM (int or float), BLOCK (threads per block, the
// launch must match), UNROLL, VEC, CACHE_HINT, MIN_BLOCKS, FINISH (shuffle),
// and exactly one REDUCE_<VARIANT> selecting the kernel.
//
// The in-place kernels (neighbored .. complete_template) overwrite `data`, as the
// lesson's kernels do: the harness restores the input before every launch.
// Every kernel handles any n: the last block's chunk may be partial, and reads
// past n are guarded, never performed.
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif
// How the shuffle kernel's block sums become one total.
#define FINISH_PARTIALS 0    // one partial per block; the host or a second launch adds them
#define FINISH_LAST_BLOCK 1  // the last block to finish adds the partials
#define FINISH_ATOMIC 2      // every block atomically adds its sum into the (zeroed) total
#ifndef FINISH
#define FINISH FINISH_PARTIALS
#endif

typedef unsigned long long u64;

// Fold UNROLL consecutive block-sized segments of the chunk into its first
// segment (in place); returns how many elements of the first segment are live.
// A whole chunk (every block but the last) takes the unguarded path, so all
// UNROLL loads are issued before the first add: per-load bounds checks would
// make each load wait for the previous one.
__device__ __forceinline__ unsigned fold_segments(ELEM* chunk, u64 remain) {
    const unsigned tid = threadIdx.x;
    if (UNROLL > 1 && remain >= (u64)UNROLL * blockDim.x) {
        ELEM v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) v[k] = chunk[tid + k * blockDim.x];
#pragma unroll
        for (int k = 1; k < UNROLL; ++k) v[0] += v[k];
        chunk[tid] = v[0];
    } else if (UNROLL > 1 && tid < remain) {
        ELEM s = chunk[tid];
#pragma unroll
        for (int k = 1; k < UNROLL; ++k)
            if (tid + (u64)k * blockDim.x < remain) s += chunk[tid + k * blockDim.x];
        chunk[tid] = s;
    }
    __syncthreads();
    return remain < blockDim.x ? (unsigned)remain : blockDim.x;
}

// Last 64 -> 1 elements by one warp. Each step reads, then synchronises the warp,
// then writes: the lanes never race, which the old volatile-only idiom cannot
// promise since Volta's independent thread scheduling.
__device__ __forceinline__ void warp_stage(volatile ELEM* chunk, unsigned len) {
    const unsigned tid = threadIdx.x;
    if (tid >= 32) return;
#pragma unroll
    for (unsigned offset = 32; offset > 0; offset >>= 1) {
        ELEM x = tid < len ? chunk[tid] : ELEM(0);
        if (tid + offset < len) x += chunk[tid + offset];
        __syncwarp();
        if (tid < len) chunk[tid] = x;
        __syncwarp();
    }
}

#define CHUNK_SETUP                                                    \
    const unsigned tid = threadIdx.x;                                  \
    const u64 base = (u64)blockIdx.x * blockDim.x * UNROLL;            \
    ELEM* chunk = data + base;                                         \
    const unsigned len = fold_segments(chunk, n - base);

#if defined(REDUCE_NEIGHBORED)
// Neighbouring pairs; the modulo test leaves most lanes of each warp idle.
extern "C" __global__ void reduce_neighbored(ELEM* data, ELEM* partials, u64 n) {
    CHUNK_SETUP
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        if (tid % (2 * stride) == 0 && tid + stride < len) chunk[tid] += chunk[tid + stride];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = chunk[0];
}
#endif

#if defined(REDUCE_NEIGHBORED_LESS)
// Neighbouring pairs, but consecutive threads do the work: fewer divergent warps.
extern "C" __global__ void reduce_neighbored_less(ELEM* data, ELEM* partials, u64 n) {
    CHUNK_SETUP
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        const unsigned index = 2 * stride * tid;
        if (index + stride < len) chunk[index] += chunk[index + stride];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = chunk[0];
}
#endif

#if defined(REDUCE_INTERLEAVED) || defined(REDUCE_UNROLLED)
// Pairs half a block apart: active threads are contiguous and reads coalesce.
// With UNROLL > 1 each block first folds UNROLL segments (the "unrolled" kernels).
extern "C" __global__ void
#if defined(REDUCE_INTERLEAVED)
reduce_interleaved
#else
reduce_unrolled
#endif
    (ELEM* data, ELEM* partials, u64 n) {
    CHUNK_SETUP
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride && tid + stride < len) chunk[tid] += chunk[tid + stride];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = chunk[0];
}
#endif

#if defined(REDUCE_UNROLLED_WARP)
// Unrolled, and the last six steps done by one warp without block barriers.
extern "C" __global__ void reduce_unrolled_warp(ELEM* data, ELEM* partials, u64 n) {
    CHUNK_SETUP
    for (unsigned stride = blockDim.x / 2; stride > 32; stride >>= 1) {
        if (tid < stride && tid + stride < len) chunk[tid] += chunk[tid + stride];
        __syncthreads();
    }
    warp_stage(chunk, len);
    if (tid == 0) partials[blockIdx.x] = chunk[0];
}
#endif

#if defined(REDUCE_COMPLETE) || defined(REDUCE_COMPLETE_TEMPLATE)
// The block loop written out step by step. "complete" tests the run-time block
// size; "complete_template" tests the compile-time BLOCK, so dead steps vanish.
#if defined(REDUCE_COMPLETE)
#define BLOCK_SIZE_USED blockDim.x
#define KERNEL_NAME reduce_complete
#else
#define BLOCK_SIZE_USED BLOCK
#define KERNEL_NAME reduce_complete_template
#endif
extern "C" __global__ void KERNEL_NAME(ELEM* data, ELEM* partials, u64 n) {
    CHUNK_SETUP
#pragma unroll
    for (unsigned half = 512; half > 32; half >>= 1) {
        if (BLOCK_SIZE_USED >= 2 * half) {
            if (tid < half && tid + half < len) chunk[tid] += chunk[tid + half];
            __syncthreads();
        }
    }
    warp_stage(chunk, len);
    if (tid == 0) partials[blockIdx.x] = chunk[0];
}
#endif

#if defined(REDUCE_SHARED) || defined(REDUCE_SHARED_INTERLEAVED) || defined(REDUCE_SHARED_SEQUENTIAL)
// Not in place: each thread adds UNROLL elements into a register, then the block
// reduces in shared memory. Missing elements count as zero.
__device__ __forceinline__ ELEM load_thread_sum(const ELEM* data, u64 n) {
    const u64 block_start = (u64)blockIdx.x * BLOCK * UNROLL;
    const u64 base = block_start + threadIdx.x;
    ELEM v[UNROLL];
    if (block_start + (u64)UNROLL * BLOCK <= n) {  // whole chunk: all loads in flight at once
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) v[k] = data[base + k * BLOCK];
    } else {
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) v[k] = base + (u64)k * BLOCK < n ? data[base + k * BLOCK] : ELEM(0);
    }
#pragma unroll
    for (int k = 1; k < UNROLL; ++k) v[0] += v[k];
    return v[0];
}
#endif

#if defined(REDUCE_SHARED)
// Completely unrolled tree in shared memory, then warp shuffles for the last 32.
extern "C" __global__ void reduce_shared(const ELEM* data, ELEM* partials, u64 n) {
    __shared__ ELEM smem[BLOCK];
    const unsigned tid = threadIdx.x;
    smem[tid] = load_thread_sum(data, n);
    __syncthreads();
#pragma unroll
    for (unsigned half = BLOCK / 2; half >= 32; half >>= 1) {
        if (tid < half) smem[tid] += smem[tid + half];
        __syncthreads();
    }
    if (tid < 32) {
        ELEM x = warp_sum(smem[tid]);
        if (tid == 0) partials[blockIdx.x] = x;
    }
}
#endif

#if defined(REDUCE_SHARED_INTERLEAVED)
// Interleaved addressing (index = 2*stride*tid): lanes of a warp hit the same
// shared-memory bank, so accesses serialise (bank conflicts).
extern "C" __global__ void reduce_shared_interleaved(const ELEM* data, ELEM* partials, u64 n) {
    __shared__ ELEM smem[BLOCK];
    const unsigned tid = threadIdx.x;
    smem[tid] = load_thread_sum(data, n);
    __syncthreads();
    for (unsigned stride = 1; stride < BLOCK; stride *= 2) {
        const unsigned index = 2 * stride * tid;
        if (index < BLOCK) smem[index] += smem[index + stride];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = smem[0];
}
#endif

#if defined(REDUCE_SHARED_SEQUENTIAL)
// Sequential addressing (tid, tid + stride): consecutive lanes, distinct banks.
extern "C" __global__ void reduce_shared_sequential(const ELEM* data, ELEM* partials, u64 n) {
    __shared__ ELEM smem[BLOCK];
    const unsigned tid = threadIdx.x;
    smem[tid] = load_thread_sum(data, n);
    __syncthreads();
    for (unsigned stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) smem[tid] += smem[tid + stride];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = smem[0];
}
#endif

#if defined(REDUCE_SHUFFLE)
// Grid-stride loop over VEC-wide loads, UNROLL loads in flight per thread, warp
// shuffles for the block sum. A scalar head reaches the first VEC-aligned element
// (any offset works) and a scalar tail takes what is left after the last vector.
#if MIN_BLOCKS > 0
#define BOUNDS __launch_bounds__(BLOCK, MIN_BLOCKS)
#else
#define BOUNDS __launch_bounds__(BLOCK)
#endif

#if FINISH == FINISH_ATOMIC
// A fire-and-forget atomic add (PTX red): no old value comes back, so no register
// waits for one; atomicAdd's returned value made ptxas spill at 1024 x 8 x 4.
__device__ __forceinline__ void red_add(int* p, int x) {
    asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(x) : "memory");
}
__device__ __forceinline__ void red_add(float* p, float x) {
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(p), "f"(x) : "memory");
}
#endif

#if FINISH != FINISH_PARTIALS
// With a device finish the second argument is a workspace, not the partials:
//   out[0]      the total;
//   out[1]      blocks finished so far, as unsigned bits (last_block; zero
//               between launches: the last block puts it back to zero);
//   out[2 + b]  block b's sum (last_block).
__device__ __forceinline__ void finish_on_device(ELEM block_total, ELEM* out) {
#if FINISH == FINISH_ATOMIC
    // The harness zeroes out[0] before the launch, inside the timed region.
    if (threadIdx.x == 0) red_add(out, block_total);
#else
    unsigned* blocks_done = reinterpret_cast<unsigned*>(out + 1);
    ELEM* block_sums = out + 2;
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = block_total;
        __threadfence();  // the sum is visible device-wide before the count says so
        is_last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // order the reads of the other blocks' sums after the count
    ELEM acc = ELEM(0);
    for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK) acc += __ldcg(block_sums + b);  // from L2, not L1
    acc = block_sum<ELEM, BLOCK>(acc);
    if (threadIdx.x == 0) {
        out[0] = acc;
        *blocks_done = 0u;  // ready for the next launch
    }
#endif
}
#endif

extern "C" __global__ void BOUNDS reduce_shuffle(const ELEM* __restrict__ data, ELEM* out, u64 n) {
    using V = Vec<ELEM, VEC>;
    ELEM acc = ELEM(0);
    grid_stride_vectors<VEC, UNROLL, BLOCK>(
        data, n, [&](u64 j) { acc += data[j]; },
        [&](u64, const V& r) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc += r.v[k];
        });
    acc = block_sum<ELEM, BLOCK>(acc);
#if FINISH == FINISH_PARTIALS
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
#else
    finish_on_device(acc, out);
#endif
}
#endif
