/* The CPU kernel table (see ops.h): the kernels.c functions themselves, and host-memory versions of the glue ops.
 * Tensor memory on the sim device is host memory, so upload/download/copy are memcpy and zero is memset; nothing
 * here can fail (last_error is always NULL). The glue ops keep the exact arithmetic and order the model used when
 * it did them inline, so losses are bit-identical to the direct calls.
 */
#include "ops.h"

#include <string.h>

#include "kernels.h"

static void cpu_fill(float *dst, size_t N, float value) {
    for (size_t i = 0; i < N; i++) dst[i] = value;
}

static void cpu_channel_mean(float *restrict out, const float *restrict x, int BT, int C) {
    for (int i = 0; i < BT; i++)
        for (int c = 0; c < C; c++) out[c] += x[(size_t)i * C + c] / (float)BT;
}

static void cpu_ema(float *out, const float *old, const float *x, int C, float a, float b) {
    for (int c = 0; c < C; c++) out[c] = a * old[c] + b * x[c];
}

static void cpu_zero(void *dst, size_t bytes) { memset(dst, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_bind_scratch(void *dev, size_t bytes) {
    (void)dev;
    (void)bytes;
}
static const char *cpu_last_error(void) { return NULL; }

static const pl_train_ops_t cpu_ops = {
    .abi = PL_TRAIN_OPS_ABI,
    .size = sizeof(pl_train_ops_t),
    .name = "cpu",
    .scratch_bytes = 0,
    .encoder_forward = pl_kernels_encoder_forward,
    .encoder_backward = pl_kernels_encoder_backward,
    .layernorm_forward = pl_kernels_layernorm_forward,
    .layernorm_backward = pl_kernels_layernorm_backward,
    .matmul_forward = pl_kernels_matmul_forward,
    .matmul_backward = pl_kernels_matmul_backward,
    .attention_forward = pl_kernels_attention_forward,
    .attention_backward = pl_kernels_attention_backward,
    .gelu_forward = pl_kernels_gelu_forward,
    .gelu_backward = pl_kernels_gelu_backward,
    .residual_forward = pl_kernels_residual_forward,
    .residual_backward = pl_kernels_residual_backward,
    .crossentropy_forward = pl_kernels_crossentropy_forward,
    .crossentropy_backward = pl_kernels_crossentropy_backward,
    .adamw_update = pl_kernels_adamw_update,
    .sumsq = pl_kernels_sumsq,
    .scale = pl_kernels_scale,
    .fill = cpu_fill,
    .channel_mean = cpu_channel_mean,
    .ema = cpu_ema,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .bind_scratch = cpu_bind_scratch,
    .last_error = cpu_last_error,
};

const pl_train_ops_t *pl_train_ops_cpu(void) { return &cpu_ops; }
