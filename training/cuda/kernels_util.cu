// The engine's small glue ops on the GPU (see ../ops.h for what each computes; CPU versions in ../ops_cpu.c and
// ../kernels_impl.h). One thread per element except sumsq (one block, a tree reduction). Compiled in CI, never run
// without a GPU.
#include <cuda_runtime.h>

#include "kernels_cuda.cuh"

// dst[i] = value; one thread per element.
__global__ static void fill_k(float *dst, long N, float value) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) dst[i] = value;
}

// grad[i] *= scale (gradient clipping); one thread per element.
__global__ static void scale_k(float *g, long N, float scale) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) g[i] *= scale;
}

// *out = sum of g[i]^2 in double. One block of PL_CUDA_BLOCK threads: thread k sums elements k, k + blockDim, ...,
// then a shared-memory tree reduction; thread 0 writes the result. The CPU reference sums in another order, so the
// two agree to rounding, not bit for bit.
__global__ static void sumsq_k(double *out, const float *g, long N) {
    __shared__ double part[PL_CUDA_BLOCK];
    double s = 0.0;
    for (long i = threadIdx.x; i < N; i += blockDim.x) s += (double)g[i] * (double)g[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = part[0];
}

// out[c] += x[i,c] / BT over rows i = 0..BT-1 in order (same order as the CPU); one thread per channel c.
__global__ static void channel_mean_k(float *out, const float *x, int BT, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = out[c];
    for (int i = 0; i < BT; i++) s += x[(long)i * C + c] / (float)BT;
    out[c] = s;
}

// out[c] = a * old[c] + b * x[c] (out may alias old); one thread per channel.
__global__ static void ema_k(float *out, const float *old, const float *x, int C, float a, float b) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) out[c] = a * old[c] + b * x[c];
}

#define LAUNCH(kernel, n, ...)                                                                                   \
    do {                                                                                                         \
        kernel<<<pl_cuda_blocks(n), PL_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(__VA_ARGS__);                      \
        return (int)cudaGetLastError();                                                                          \
    } while (0)

extern "C" int pl_cuda_fill(float *dst, long N, float value, void *stream) { LAUNCH(fill_k, N, dst, N, value); }
extern "C" int pl_cuda_scale(float *grad, long N, float scale, void *stream) { LAUNCH(scale_k, N, grad, N, scale); }
extern "C" int pl_cuda_sumsq(double *out, const float *grad, long N, void *stream) {
    sumsq_k<<<1, PL_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(out, grad, N);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_channel_mean(float *out, const float *x, int BT, int C, void *stream) {
    LAUNCH(channel_mean_k, C, out, x, BT, C);
}
extern "C" int pl_cuda_ema(float *out, const float *old, const float *x, int C, float a, float b, void *stream) {
    LAUNCH(ema_k, C, out, old, x, C, a, b);
}
