// Shared helpers for the kernel families: vector types, cache-hinted loads and
// warp-level sums. Compile-time knobs arrive as -D defines from tuner/compile.py.
#pragma once

#ifndef ELEM
#define ELEM float
#endif

#ifndef CACHE_HINT
#define CACHE_HINT 0  // 0: plain load, 1: read-only path (__ldg), 2: streaming (__ldcs)
#endif

// Vector of N elements of T, 16-byte aligned at most, as one load instruction.
template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

template <typename T> __device__ __forceinline__ T load_hinted(const T* p) {
#if CACHE_HINT == 1
    return __ldg(p);
#elif CACHE_HINT == 2
    return __ldcs(p);
#else
    return *p;
#endif
}

// __ldg/__ldcs take the built-in vector types; map Vec<T,N> onto one of them
// by size so that the load stays a single instruction.
template <int BYTES> struct RawOfSize;
template <> struct RawOfSize<1> { using type = unsigned char; };
template <> struct RawOfSize<2> { using type = unsigned short; };
template <> struct RawOfSize<4> { using type = unsigned int; };
template <> struct RawOfSize<8> { using type = uint2; };
template <> struct RawOfSize<16> { using type = uint4; };

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const Vec<T, N>* p) {
    using Raw = typename RawOfSize<sizeof(Vec<T, N>)>::type;
    Raw raw = load_hinted(reinterpret_cast<const Raw*>(p));
    return *reinterpret_cast<Vec<T, N>*>(&raw);
}

// Elements before the first N-element-aligned one (at most n): a scalar head
// lets N-wide vector loads start aligned whatever offset the pointer has.
template <int N, typename T>
__device__ __forceinline__ unsigned long long aligned_head(const T* p, unsigned long long n) {
    const unsigned long long misaligned = (reinterpret_cast<unsigned long long>(p) / sizeof(T)) % N;
    return misaligned ? min((unsigned long long)(N - misaligned), n) : 0ull;
}

// The vectorised grid-stride walk over n elements of p that copy, read and the
// shuffle reduction share: a scalar head up to the first N-aligned element,
// then N-wide loads with IN_FLIGHT of them in flight per thread, a remainder of
// whole vectors, and a scalar tail. The caller says what to do with each piece:
// element(index) for a head or tail element, vector(index of the vector after
// the head, its value) for each loaded vector. Threads are the whole grid of
// THREADS-thread blocks.
template <int N, int IN_FLIGHT, int THREADS, typename T, typename Element, typename Vector>
__device__ __forceinline__ void grid_stride_vectors(const T* p, unsigned long long n, Element element, Vector vector) {
    typedef unsigned long long u64;
    using V = Vec<T, N>;
    const u64 gid = (u64)blockIdx.x * THREADS + threadIdx.x;
    const u64 threads = (u64)gridDim.x * THREADS;
    const u64 head = aligned_head<N>(p, n);
    if (gid < head) element(gid);
    const V* body = reinterpret_cast<const V*>(p + head);
    const u64 n_vec = (n - head) / N;
    u64 i = gid;
    for (; i + (IN_FLIGHT - 1) * threads < n_vec; i += IN_FLIGHT * threads) {
        V r[IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < IN_FLIGHT; ++u) r[u] = load_vec(body + i + u * threads);
#pragma unroll
        for (int u = 0; u < IN_FLIGHT; ++u) vector(i + u * threads, r[u]);
    }
    for (; i < n_vec; i += threads) vector(i, load_vec(body + i));
    const u64 tail_start = head + n_vec * N;
    if (gid < n - tail_start) element(tail_start + gid);
}

// Sum across the 32 lanes of a warp; every lane receives the total.
template <typename T> __device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

// Sum across a block of THREADS threads (a multiple of 32). Result valid in thread 0.
template <typename T, int THREADS> __device__ __forceinline__ T block_sum(T x) {
    __shared__ T warp_totals[THREADS / 32];
    x = warp_sum(x);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_totals[warp] = x;
    __syncthreads();
    if (warp == 0) {
        x = lane < THREADS / 32 ? warp_totals[lane] : T(0);
        x = warp_sum(x);
    }
    return x;
}
