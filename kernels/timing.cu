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
