// dst = src^T for an n x n float matrix, through a shared-memory tile: a
// 2-D kernel of one's own. A block of TILE x block_size_y threads reads a
// TILE x TILE tile with coalesced rows (each thread TILE / block_size_y
// elements), then writes it transposed, again in coalesced rows. PAD extra
// columns in the tile move a column's elements to different shared-memory
// banks, so the transposed read does not serialise on one bank.
#ifndef TILE
#define TILE 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef PAD
#define PAD 1
#endif

extern "C" __global__ void __launch_bounds__(TILE * block_size_y)
transpose(float* __restrict__ dst, const float* __restrict__ src, int n) {
    __shared__ float tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += block_size_y)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = src[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += block_size_y)
        if (x < n && y + j < n) dst[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
