// Compares a kernel's output with the host reference, both on the device.
// The reference is computed on the host (numpy, in higher precision) and
// uploaded once per problem; each configuration's output is then compared
// where it lies, and only the totals cross the bus: a 2^28-element output is
// checked in about a millisecond instead of downloaded and compared in numpy.
#include <cuda_fp16.h>

// Sums one value over the block into one atomic add per warp.
template <typename T>
__device__ void add_warp_total(T value, T* total) {
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1)
        value += __shfl_xor_sync(0xffffffffu, value, lane_mask);
    if ((threadIdx.x & 31) == 0 && value != T(0)) atomicAdd(total, value);
}

// Elements whose bits differ from the reference's (exact families: integers,
// copies). *wrong must be zero before the launch.
template <typename Word>
__device__ void count_mismatches(const Word* out, const Word* ref, unsigned long long n, unsigned long long* wrong) {
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long count = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads)
        count += out[i] != ref[i];
    add_warp_total(count, wrong);
}

extern "C" __global__ void mismatches_1(const unsigned char* out, const unsigned char* ref, unsigned long long n, unsigned long long* wrong) {
    count_mismatches(out, ref, n, wrong);
}
extern "C" __global__ void mismatches_2(const unsigned short* out, const unsigned short* ref, unsigned long long n, unsigned long long* wrong) {
    count_mismatches(out, ref, n, wrong);
}
extern "C" __global__ void mismatches_4(const unsigned* out, const unsigned* ref, unsigned long long n, unsigned long long* wrong) {
    count_mismatches(out, ref, n, wrong);
}
extern "C" __global__ void mismatches_8(const unsigned long long* out, const unsigned long long* ref, unsigned long long n, unsigned long long* wrong) {
    count_mismatches(out, ref, n, wrong);
}

__device__ double to_double(__half value) { return (double)__half2float(value); }
__device__ double to_double(float value) { return (double)value; }
__device__ double to_double(double value) { return value; }

// sums[0] += sum of (out - ref)^2 in double; sums[1] += elements of out that
// are not finite (never written: the poison is NaN). sums must be zero first.
template <typename Out, typename Ref>
__device__ void squared_error(const Out* out, const Ref* ref, unsigned long long n, double* sums) {
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    double squared = 0.0, not_finite = 0.0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads) {
        const double value = to_double(out[i]);
        if (!isfinite(value)) {
            not_finite += 1.0;
            continue;
        }
        const double difference = value - (double)ref[i];
        squared += difference * difference;
    }
    add_warp_total(squared, sums);
    add_warp_total(not_finite, sums + 1);
}

extern "C" __global__ void squared_error_f16(const __half* out, const float* ref, unsigned long long n, double* sums) {
    squared_error(out, ref, n, sums);
}
extern "C" __global__ void squared_error_f32(const float* out, const double* ref, unsigned long long n, double* sums) {
    squared_error(out, ref, n, sums);
}
