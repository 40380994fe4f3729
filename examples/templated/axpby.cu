// y = a * x + b * y for any element type (a and b in float): a C++ template kernel, tuned as it is.
// The pipeline instantiates it per configuration from its template arguments
// (the spec's kernel name `axpby<real, block_size_x, ITEMS>`): no extern "C",
// no wrapper kernel. Each block handles Block * PerThread consecutive elements,
// PerThread per thread, Block apart, so every load of a warp is coalesced. (The
// template parameters are not named block_size_x or ITEMS: those are -D macros.)
template <typename T, int Block, int PerThread>
__global__ void __launch_bounds__(Block) axpby(T* __restrict__ y, const T* __restrict__ x, float a, float b, int n) {
    const int base = blockIdx.x * Block * PerThread + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
        const int i = base + k * Block;
        if (i < n) y[i] = T(a * float(x[i]) + b * float(y[i]));
    }
}
