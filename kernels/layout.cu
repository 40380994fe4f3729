// Array of structures against structure of arrays: every point gets
// x += 10, y += 20. Both kernels read `in` and write a separate `out` (the
// input is never modified), one point per thread.
//
//   layout_aos: in and out hold n structs {float x, y;} (x0 y0 x1 y1 ...). The
//               struct keeps its natural 4-byte alignment, as in the lesson,
//               so x and y are two 4-byte accesses 8 bytes apart: each load or
//               store instruction of a warp touches 256 bytes to use 128.
//   layout_soa: in and out hold x[0..n) followed by y[0..n) (one allocation,
//               like a struct of two arrays of n floats): every access is
//               unit-stride.
//
// Compile-time knobs (-D): BLOCK (threads per block; the launch must match)
// and LAYOUT_AOS or LAYOUT_SOA.
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 128
#endif

typedef unsigned long long u64;

#if defined(LAYOUT_AOS)
struct Point {
    float x;
    float y;
};

extern "C" __global__ void __launch_bounds__(BLOCK) layout_aos(const float* __restrict__ in, float* __restrict__ out, u64 n) {
    const u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n) return;
    Point p = reinterpret_cast<const Point*>(in)[i];
    p.x += 10.0f;
    p.y += 20.0f;
    reinterpret_cast<Point*>(out)[i] = p;
}
#endif

#if defined(LAYOUT_SOA)
extern "C" __global__ void __launch_bounds__(BLOCK) layout_soa(const float* __restrict__ in, float* __restrict__ out, u64 n) {
    const u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] + 10.0f;
    out[n + i] = in[n + i] + 20.0f;
}
#endif
