// y = a * x + y in single precision: an example of a kernel of your own, tuned
// by the pipeline without touching it. Each thread handles VEC consecutive
// elements per step (one 4/8/16-byte load of x and of y) and walks the array
// in a grid-stride loop over however many blocks the grid has; the tail is done one element at a time.
//
// Compile-time knobs (-D): block_size_x (threads per block), VEC (1, 2 or 4 floats per
// load), CACHE_HINT (0 plain loads of x, 1 read-only path, 2 streaming).
#include "common.cuh"

#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef VEC
#define VEC 4
#endif

extern "C" __global__ void __launch_bounds__(block_size_x)
saxpy(float a, const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
    typedef Vec<float, VEC> V;
    const unsigned long long vectors = n / VEC;
    const unsigned long long stride = (unsigned long long)gridDim.x * block_size_x;
    const V* xv = reinterpret_cast<const V*>(x);
    V* yv = reinterpret_cast<V*>(y);
    for (unsigned long long i = blockIdx.x * (unsigned long long)block_size_x + threadIdx.x; i < vectors; i += stride) {
        const V xs = load_vec(xv + i);
        V ys = yv[i];
#pragma unroll
        for (int k = 0; k < VEC; ++k) ys.v[k] = a * xs.v[k] + ys.v[k];
        yv[i] = ys;
    }
    // The last n % VEC elements, by the first threads of block 0.
    const unsigned long long tail = vectors * VEC + blockIdx.x * (unsigned long long)block_size_x + threadIdx.x;
    if (blockIdx.x == 0 && tail < n) y[tail] = a * x[tail] + y[tail];
}
