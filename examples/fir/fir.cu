// y[i] = sum_t coeffs[t] * x[i + t], a 17-tap FIR filter in single precision,
// its taps in constant memory: every thread of a warp reads the same tap at
// once, which the constant cache broadcasts. Each thread computes ITEMS
// outputs, block_size_x apart, so a block covers block_size_x * ITEMS outputs.
#define TAPS 17

#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

__constant__ float coeffs[TAPS];

extern "C" __global__ void __launch_bounds__(block_size_x)
fir(float* __restrict__ y, const float* __restrict__ x, int n) {
    const int base = blockIdx.x * (block_size_x * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = base + k * block_size_x;
        if (i < n) {
            float acc = 0.0f;
#pragma unroll
            for (int t = 0; t < TAPS; ++t) acc += coeffs[t] * x[i + t];
            y[i] = acc;
        }
    }
}
