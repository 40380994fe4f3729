// A copy kernel that, with REACH=1, stores far outside any allocation: an
// illegal address that poisons the CUDA context. Used to test that a sweep
// contains such a fault and measures the configurations after it.
extern "C" __global__ void faulty_copy(const float* __restrict__ src, float* __restrict__ dst, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)BLOCK + threadIdx.x;
    if (i < n) {
#if REACH
        dst[i + (1ull << 40)] = src[i];
#else
        dst[i] = src[i];
#endif
    }
}
