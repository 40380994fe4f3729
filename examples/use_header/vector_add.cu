// A program of your own that takes its launch configuration from the tuner's
// exported header: c = a + b over 2^28 floats with the tuned block size,
// vector width and grid, verified element by element on the host.
//
//   nvcc -O3 -arch=sm_90 -I results/<gpu> examples/use_header/vector_add.cu -o vector_add && ./vector_add
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "best_configs.h"

using Best = tuner_best::vector_add_float32_n268435456;
constexpr size_t N = size_t(1) << 28;

template <int Width> struct Vec;
template <> struct Vec<1> { using type = float; };
template <> struct Vec<2> { using type = float2; };
template <> struct Vec<4> { using type = float4; };

template <int Block, int Width>
__global__ void __launch_bounds__(Block) add(const float* a, const float* b, float* c, size_t n) {
  using V = typename Vec<Width>::type;
  const size_t vectors = n / Width;
  for (size_t i = blockIdx.x * size_t(Block) + threadIdx.x; i < vectors; i += size_t(gridDim.x) * Block) {
    V x = reinterpret_cast<const V*>(a)[i], y = reinterpret_cast<const V*>(b)[i], z;
    const float* xs = reinterpret_cast<const float*>(&x);
    const float* ys = reinterpret_cast<const float*>(&y);
    float* zs = reinterpret_cast<float*>(&z);
#pragma unroll
    for (int k = 0; k < Width; ++k) zs[k] = xs[k] + ys[k];
    reinterpret_cast<V*>(c)[i] = z;
  }
  for (size_t i = vectors * Width + blockIdx.x * size_t(Block) + threadIdx.x; i < n; i += size_t(gridDim.x) * Block)
    c[i] = a[i] + b[i];  // the tail that does not fill a vector
}

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t e = (call);                                                      \
    if (e != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));            \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main() {
  std::vector<float> a(N), b(N), c(N);
  for (size_t i = 0; i < N; ++i) {
    a[i] = float(i % 1000) * 0.5f;
    b[i] = float(i % 7) - 3.0f;
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, N * sizeof(float)));
  CHECK(cudaMalloc(&db, N * sizeof(float)));
  CHECK(cudaMalloc(&dc, N * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dc, 0xff, N * sizeof(float)));  // poisoned: an unwritten element fails

  // The tuned grid where the header has one; else one thread per vector.
  unsigned grid = Best::grid[0] ? Best::grid[0] : unsigned((N / Best::vector_width + Best::block_size - 1) / Best::block_size);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  add<Best::block_size, Best::vector_width><<<grid, Best::block_size>>>(da, db, dc, N);  // warm-up
  CHECK(cudaEventRecord(start));
  add<Best::block_size, Best::vector_width><<<grid, Best::block_size>>>(da, db, dc, N);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(c.data(), dc, N * sizeof(float), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < N; ++i) wrong += c[i] != a[i] + b[i];
  std::printf("tuned=%d block=%d vector_width=%d grid=%u: %.1f GB/s (one launch), %zu of %zu elements wrong -> %s\n",
              int(tuner_best::tuned), Best::block_size, Best::vector_width, grid, 3.0 * N * sizeof(float) / ms / 1e6,
              wrong, N, wrong ? "FAIL" : "ok");
  return wrong ? 1 : 0;
}
