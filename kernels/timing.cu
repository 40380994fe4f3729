// Spins one thread for a given number of nanoseconds of the GPU's global timer.
// Launched right before the start event of a sample, it keeps the stream busy
// while the host enqueues the event and the kernel under test, so the host's
// launch latency never falls between the two events.
extern "C" __global__ void hold_stream(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}

// Evicts the L2 cache before a timed sample: reads a buffer twice the L2's size
// (16-byte loads that allocate in L2 and skip L1). Reads leave the L2 holding
// clean lines, which the timed kernel replaces for free; a memset flush leaves
// it full of dirty lines whose write-back the timed kernel pays for (about 3 %
// of a 1 GiB read on an H100). The sink is never written; it keeps the loads.
extern "C" __global__ void flush_l2(const uint4* __restrict__ buffer, unsigned long long n, unsigned* sink) {
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    unsigned acc = 0u;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += threads) {
        const uint4 v = __ldcg(buffer + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) *sink = acc;
}
