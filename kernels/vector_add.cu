// Element-wise add c = a + b, the vectorisation lesson: one grid-stride loop
// whose body loads VEC elements of a and of b as one instruction each, adds
// them and stores VEC elements of c. `#pragma unroll UNROLL` unrolls the
// grid-stride loop itself (each copy of the body keeps its own exit test).
//
// Alignment: a, b and c may start anywhere (the tuner shifts them by `offset`
// elements). Elements before the first VEC-aligned one are a scalar head, the
// ones after the last whole vector a scalar tail. When the three pointers
// disagree on their misalignment no common vector boundary exists, and the
// whole array is added one element at a time.
//
// Compile-time knobs (-D): ELEM (signed char, __half, float or int), BLOCK
// (threads per block; the launch must match), VEC (elements per load, with
// VEC * sizeof(ELEM) <= 16), UNROLL (pragma unroll factor of the loop).
#include <cuda_fp16.h>

#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

static_assert(VEC >= 1 && (VEC & (VEC - 1)) == 0, "VEC must be a power of two");
static_assert(VEC * sizeof(ELEM) <= 16, "a vector must fit one 16-byte load");

typedef unsigned long long u64;

// One element. Integers wrap around like the hardware's add; halves use the
// half-precision add (round to nearest).
template <typename T> __device__ __forceinline__ T add_elem(T x, T y) { return static_cast<T>(x + y); }
template <> __device__ __forceinline__ __half add_elem<__half>(__half x, __half y) { return __hadd(x, y); }

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> add_vec(const Vec<T, N>& x, const Vec<T, N>& y) {
    Vec<T, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = add_elem(x.v[k], y.v[k]);
    return r;
}

// Halves in pairs: one HADD2 adds two lanes.
template <int N>
__device__ __forceinline__ Vec<__half, N> add_vec(const Vec<__half, N>& x, const Vec<__half, N>& y) {
    Vec<__half, N> r;
    if constexpr (N % 2 == 0) {
#pragma unroll
        for (int k = 0; k < N; k += 2) {
            const __half2 s = __hadd2(__halves2half2(x.v[k], x.v[k + 1]), __halves2half2(y.v[k], y.v[k + 1]));
            r.v[k] = __low2half(s);
            r.v[k + 1] = __high2half(s);
        }
    } else {
#pragma unroll
        for (int k = 0; k < N; ++k) r.v[k] = __hadd(x.v[k], y.v[k]);
    }
    return r;
}

// Store a vector as one instruction of its full width.
template <typename T, int N>
__device__ __forceinline__ void store_vec(Vec<T, N>* p, const Vec<T, N>& value) {
    using Raw = typename RawOfSize<sizeof(Vec<T, N>)>::type;
    *reinterpret_cast<Raw*>(p) = *reinterpret_cast<const Raw*>(&value);
}

// Elements from p to the next VEC-aligned address.
__device__ __forceinline__ unsigned misalignment(const void* p) {
    return (unsigned)((reinterpret_cast<u64>(p) / sizeof(ELEM)) % VEC);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
vector_add(const ELEM* __restrict__ a, const ELEM* __restrict__ b, ELEM* __restrict__ c, u64 n) {
    using V = Vec<ELEM, VEC>;
    constexpr int kUnroll = UNROLL;
    const u64 gid = (u64)blockIdx.x * BLOCK + threadIdx.x;
    const u64 threads = (u64)gridDim.x * BLOCK;
    const unsigned mis = misalignment(a);
    if (VEC > 1 && (misalignment(b) != mis || misalignment(c) != mis)) {
#pragma unroll kUnroll
        for (u64 i = gid; i < n; i += threads) c[i] = add_elem(a[i], b[i]);
        return;
    }
    const u64 head = aligned_head<VEC>(a, n);
    if (gid < head) c[gid] = add_elem(a[gid], b[gid]);
    const V* va = reinterpret_cast<const V*>(a + head);
    const V* vb = reinterpret_cast<const V*>(b + head);
    V* vc = reinterpret_cast<V*>(c + head);
    const u64 n_vec = (n - head) / VEC;
#pragma unroll kUnroll
    for (u64 i = gid; i < n_vec; i += threads) store_vec(vc + i, add_vec(load_vec(va + i), load_vec(vb + i)));
    const u64 tail_start = head + n_vec * VEC;
    if (gid < n - tail_start) c[tail_start + gid] = add_elem(a[tail_start + gid], b[tail_start + gid]);
}
