/* The CUDA kernel table (ops.h) of libplateau-train-cuda.so: thin C wrappers over the kernel launchers of
 * kernels_fwd.cu, kernels_bwd.cu and kernels_util.cu, and the CUDA runtime's memcpy/memset for the memory ops.
 *
 * Invariants: every launch and copy goes to the legacy default stream (stream 0), which is also the stream the
 * engine's allocator uses, so a block freed to the allocator and handed out again is only touched by later work on
 * the same stream (stream order makes the reuse safe). The first failure of any call is kept (call name, CUDA error
 * name and string) and returned by last_error(); later failures are not recorded. Downloads and sumsq synchronise.
 * Exported: pl_train_cuda_ops, pl_train_cuda_init (everything else, the static CUDA runtime included, is hidden).
 * Compiled in CI; it has never run on a GPU (this project has none); on a machine without one only init runs, and
 * fails with the runtime's error.
 */
#include <errno.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "../ops.h"
#include "kernels_cuda.cuh"

#define PL_MODULE_API __attribute__((visibility("default")))

static char first_error[512];
static int have_error;
static double *scratch; /* device double for sumsq (bind_scratch), from the engine's allocator */

static void note(const char *call, int rc) {
    if (rc == 0 || have_error) return;
    snprintf(first_error, sizeof first_error, "%s: %s (%s)", call, cudaGetErrorName((cudaError_t)rc),
             cudaGetErrorString((cudaError_t)rc));
    have_error = 1;
}

static void cu_encoder_forward(float *restrict out, const int *restrict inp, const float *restrict wte,
                               const float *restrict wpe, int B, int T, int C) {
    note("encoder_forward launch", pl_cuda_encoder_forward(out, inp, wte, wpe, B, T, C, NULL));
}
static void cu_encoder_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                                const int *restrict inp, int B, int T, int C) {
    note("encoder_backward launch", pl_cuda_encoder_backward(dwte, dwpe, dout, inp, B, T, C, NULL));
}
static void cu_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                                 const float *restrict inp, const float *restrict weight, const float *restrict bias,
                                 int B, int T, int C) {
    note("layernorm_forward launch", pl_cuda_layernorm_forward(out, mean, rstd, inp, weight, bias, B, T, C, NULL));
}
static void cu_layernorm_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                                  const float *restrict dout, const float *restrict inp, const float *restrict weight,
                                  const float *restrict mean, const float *restrict rstd, int B, int T, int C) {
    note("layernorm_backward launch",
         pl_cuda_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, B, T, C, NULL));
}
static void cu_matmul_forward(float *restrict out, const float *restrict inp, const float *restrict weight,
                              const float *restrict bias, int B, int T, int C, int OC) {
    note("matmul_forward launch", pl_cuda_matmul_forward(out, inp, weight, bias, B, T, C, OC, NULL));
}
static void cu_matmul_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                               const float *restrict dout, const float *restrict inp, const float *restrict weight,
                               int B, int T, int C, int OC) {
    note("matmul_backward launch", pl_cuda_matmul_backward(dinp, dweight, dbias, dout, inp, weight, B, T, C, OC, NULL));
}
static void cu_attention_forward(float *restrict out, float *restrict preatt, float *restrict att,
                                 const float *restrict inp, int B, int T, int C, int NH) {
    note("attention_forward launch", pl_cuda_attention_forward(out, preatt, att, inp, B, T, C, NH, NULL));
}
static void cu_attention_backward(float *restrict dinp, float *restrict dpreatt, float *restrict datt,
                                  const float *restrict dout, const float *restrict inp, const float *restrict att,
                                  int B, int T, int C, int NH) {
    note("attention_backward launch",
         pl_cuda_attention_backward(dinp, dpreatt, datt, dout, inp, att, B, T, C, NH, NULL));
}
static void cu_gelu_forward(float *restrict out, const float *restrict inp, size_t N) {
    note("gelu_forward launch", pl_cuda_gelu_forward(out, inp, (long)N, NULL));
}
static void cu_gelu_backward(float *restrict dinp, const float *restrict inp, const float *restrict dout, size_t N) {
    note("gelu_backward launch", pl_cuda_gelu_backward(dinp, inp, dout, (long)N, NULL));
}
static void cu_residual_forward(float *restrict out, const float *restrict a, const float *restrict b, size_t N) {
    note("residual_forward launch", pl_cuda_residual_forward(out, a, b, (long)N, NULL));
}
static void cu_residual_backward(float *restrict da, float *restrict db, const float *restrict dout, size_t N) {
    note("residual_backward launch", pl_cuda_residual_backward(da, db, dout, (long)N, NULL));
}
static void cu_crossentropy_forward(float *restrict probs, float *restrict losses, const float *restrict logits,
                                    const int *restrict targets, int B, int T, int V) {
    note("crossentropy_forward launch", pl_cuda_crossentropy_forward(probs, losses, logits, targets, B, T, V, NULL));
}
static void cu_crossentropy_backward(float *restrict dlogits, const float *restrict dlosses,
                                     const float *restrict probs, const int *restrict targets, int B, int T, int V) {
    note("crossentropy_backward launch",
         pl_cuda_crossentropy_backward(dlogits, dlosses, probs, targets, B, T, V, NULL));
}
static void cu_adamw_update(float *restrict param, const float *restrict grad, float *restrict m, float *restrict v,
                            size_t N, float lr, float beta1, float beta2, float eps, float wd, int t) {
    note("adamw_update launch", pl_cuda_adamw_update(param, grad, m, v, (long)N, lr, beta1, beta2, eps, wd, t, NULL));
}
static double cu_sumsq(const float *restrict grad, size_t N) {
    double h = 0.0;
    if (!scratch) {
        note("sumsq (no scratch bound)", (int)cudaErrorInvalidValue);
        return 0.0;
    }
    note("sumsq launch", pl_cuda_sumsq(scratch, grad, (long)N, NULL));
    note("cudaMemcpy(sumsq, device to host)", (int)cudaMemcpy(&h, scratch, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}
static void cu_scale(float *restrict grad, size_t N, float scale) {
    note("scale launch", pl_cuda_scale(grad, (long)N, scale, NULL));
}
static void cu_fill(float *dst, size_t N, float value) { note("fill launch", pl_cuda_fill(dst, (long)N, value, NULL)); }
static void cu_channel_mean(float *restrict out, const float *restrict x, int BT, int C) {
    note("channel_mean launch", pl_cuda_channel_mean(out, x, BT, C, NULL));
}
static void cu_ema(float *out, const float *old, const float *x, int C, float a, float b) {
    note("ema launch", pl_cuda_ema(out, old, x, C, a, b, NULL));
}
static void cu_zero(void *dst, size_t bytes) { note("cudaMemset", (int)cudaMemset(dst, 0, bytes)); }
static void cu_copy(void *dst, const void *src, size_t bytes) {
    note("cudaMemcpy(device to device)", (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
static void cu_upload(void *dst, const void *src, size_t bytes) {
    note("cudaMemcpy(host to device)", (int)cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void cu_download(void *dst, const void *src, size_t bytes) {
    note("cudaMemcpy(device to host)", (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void cu_bind_scratch(void *dev, size_t bytes) { scratch = bytes >= sizeof(double) ? dev : NULL; }
static const char *cu_last_error(void) { return have_error ? first_error : NULL; }

static const pl_train_ops_t cuda_ops = {
    .abi = PL_TRAIN_OPS_ABI,
    .size = sizeof(pl_train_ops_t),
    .name = "cuda",
    .scratch_bytes = sizeof(double),
    .encoder_forward = cu_encoder_forward,
    .encoder_backward = cu_encoder_backward,
    .layernorm_forward = cu_layernorm_forward,
    .layernorm_backward = cu_layernorm_backward,
    .matmul_forward = cu_matmul_forward,
    .matmul_backward = cu_matmul_backward,
    .attention_forward = cu_attention_forward,
    .attention_backward = cu_attention_backward,
    .gelu_forward = cu_gelu_forward,
    .gelu_backward = cu_gelu_backward,
    .residual_forward = cu_residual_forward,
    .residual_backward = cu_residual_backward,
    .crossentropy_forward = cu_crossentropy_forward,
    .crossentropy_backward = cu_crossentropy_backward,
    .adamw_update = cu_adamw_update,
    .sumsq = cu_sumsq,
    .scale = cu_scale,
    .fill = cu_fill,
    .channel_mean = cu_channel_mean,
    .ema = cu_ema,
    .zero = cu_zero,
    .copy = cu_copy,
    .upload = cu_upload,
    .download = cu_download,
    .bind_scratch = cu_bind_scratch,
    .last_error = cu_last_error,
};

PL_MODULE_API const pl_train_ops_t *pl_train_cuda_ops(void);
PL_MODULE_API int pl_train_cuda_init(int device, char *err, size_t err_len);

const pl_train_ops_t *pl_train_cuda_ops(void) { return &cuda_ops; }

/* The first runtime call initialises the CUDA runtime (it loads libcuda.so.1 itself); cudaFree(0) then creates or
 * binds the device's primary context, the one the allocator's cuda backend allocates in. */
int pl_train_cuda_init(int device, char *err, size_t err_len) {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        snprintf(err, err_len, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(rc), cudaGetErrorString(rc));
        return -ENODEV;
    }
    if (device < 0 || device >= n) {
        snprintf(err, err_len, "cudaGetDeviceCount reports %d device(s), device %d is not one of them", n, device);
        return -ENODEV;
    }
    rc = cudaSetDevice(device);
    if (rc == cudaSuccess) rc = cudaFree(NULL);
    if (rc != cudaSuccess) {
        snprintf(err, err_len, "cudaSetDevice(%d)/cudaFree(0): %s (%s)", device, cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
        return -ENODEV;
    }
    have_error = 0;
    first_error[0] = '\0';
    return 0;
}
