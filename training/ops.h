/* The kernel table of the training engine: every op model.c runs on tensor data, plus the few host<->device
 * operations it needs. model.c never touches tensor memory itself; it calls through a table, so the same model
 * code drives the CPU kernels (kernels.c, tensors on the sim device = host memory) or the CUDA kernels
 * (training/cuda/, tensors on the allocator's cuda backend = device memory, in the dlopened module
 * libplateau-train-cuda.so).
 *
 * Conventions: the kernel entries have exactly the signatures of kernels.h (shapes and the accumulate-into-gradients
 * rule are documented in kernels_impl.h); the CPU table points straight at those functions, so the table costs one
 * indirect call per op and changes no result. Pointers passed to a table entry are pointers returned by the
 * allocator the table was selected with (device pointers on cuda), except the host side of upload/download.
 * Errors: entries return nothing (a device executes asynchronously); the first failure is kept and returned by
 * last_error() (NULL = none), which callers check after each download (a synchronising point).
 * Thread safety: one thread drives a table at a time.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PL_TRAIN_OPS_ABI 1u

typedef struct pl_train_ops {
    uint32_t abi;     /* PL_TRAIN_OPS_ABI */
    uint32_t size;    /* sizeof(pl_train_ops_t) of the builder */
    const char *name; /* "cpu" or "cuda" */
    size_t scratch_bytes; /* device scratch the table needs (bind_scratch), 0 = none */

    /* ---- model ops (kernels.h) ---- */
    void (*encoder_forward)(float *restrict out, const int *restrict inp, const float *restrict wte,
                            const float *restrict wpe, int B, int T, int C);
    void (*encoder_backward)(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                             const int *restrict inp, int B, int T, int C);
    void (*layernorm_forward)(float *restrict out, float *restrict mean, float *restrict rstd,
                              const float *restrict inp, const float *restrict weight, const float *restrict bias,
                              int B, int T, int C);
    void (*layernorm_backward)(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                               const float *restrict dout, const float *restrict inp, const float *restrict weight,
                               const float *restrict mean, const float *restrict rstd, int B, int T, int C);
    void (*matmul_forward)(float *restrict out, const float *restrict inp, const float *restrict weight,
                           const float *restrict bias, int B, int T, int C, int OC);
    void (*matmul_backward)(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                            const float *restrict dout, const float *restrict inp, const float *restrict weight,
                            int B, int T, int C, int OC);
    void (*attention_forward)(float *restrict out, float *restrict preatt, float *restrict att,
                              const float *restrict inp, int B, int T, int C, int NH);
    void (*attention_backward)(float *restrict dinp, float *restrict dpreatt, float *restrict datt,
                               const float *restrict dout, const float *restrict inp, const float *restrict att,
                               int B, int T, int C, int NH);
    void (*gelu_forward)(float *restrict out, const float *restrict inp, size_t N);
    void (*gelu_backward)(float *restrict dinp, const float *restrict inp, const float *restrict dout, size_t N);
    void (*residual_forward)(float *restrict out, const float *restrict a, const float *restrict b, size_t N);
    void (*residual_backward)(float *restrict da, float *restrict db, const float *restrict dout, size_t N);
    void (*crossentropy_forward)(float *restrict probs, float *restrict losses, const float *restrict logits,
                                 const int *restrict targets, int B, int T, int V);
    void (*crossentropy_backward)(float *restrict dlogits, const float *restrict dlosses,
                                  const float *restrict probs, const int *restrict targets, int B, int T, int V);
    void (*adamw_update)(float *restrict param, const float *restrict grad, float *restrict m, float *restrict v,
                         size_t N, float lr, float beta1, float beta2, float eps, float wd, int t);
    double (*sumsq)(const float *restrict grad, size_t N); /* sum of squares, returned to the host */
    void (*scale)(float *restrict grad, size_t N, float scale);

    /* ---- small ops of the model's glue ---- */
    void (*fill)(float *dst, size_t N, float value);                                /* dst[i] = value */
    /* out[c] += x[i,c] / BT for i in 0..BT (in that order), x (BT,C): the batch mean of the statistics buffer */
    void (*channel_mean)(float *restrict out, const float *restrict x, int BT, int C);
    /* out[c] = a * old[c] + b * x[c]; out may be old (in place) */
    void (*ema)(float *out, const float *old, const float *x, int C, float a, float b);

    /* ---- memory ---- */
    void (*zero)(void *dst, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);       /* device to device */
    void (*upload)(void *dst, const void *src, size_t bytes);     /* host src to device dst */
    void (*download)(void *dst, const void *src, size_t bytes);   /* device src to host dst; synchronises */
    void (*bind_scratch)(void *dev, size_t bytes);                /* once, before any op, when scratch_bytes > 0 */
    const char *(*last_error)(void);                              /* first failure so far, NULL = none */
} pl_train_ops_t;

/* Every function entry, for tests that check a table is complete. */
#define PL_TRAIN_OPS_FIELDS(X)                                                                                    \
    X(encoder_forward) X(encoder_backward) X(layernorm_forward) X(layernorm_backward) X(matmul_forward)          \
    X(matmul_backward) X(attention_forward) X(attention_backward) X(gelu_forward) X(gelu_backward)               \
    X(residual_forward) X(residual_backward) X(crossentropy_forward) X(crossentropy_backward) X(adamw_update)    \
    X(sumsq) X(scale) X(fill) X(channel_mean) X(ema) X(zero) X(copy) X(upload) X(download) X(bind_scratch)      \
    X(last_error)

/* The CPU table (kernels.c; tensor memory is host memory). Never NULL. */
const pl_train_ops_t *pl_train_ops_cpu(void);

/* Entry points of the CUDA module (libplateau-train-cuda.so), looked up with dlsym by device.c:
 *   const pl_train_ops_t *pl_train_cuda_ops(void);            the table (no CUDA call made)
 *   int pl_train_cuda_init(int device, char *err, size_t n);  initialise the CUDA runtime on `device`:
 *                                                            0, or -ENODEV with the failing call in err */
#define PL_TRAIN_CUDA_OPS_SYMBOL "pl_train_cuda_ops"
#define PL_TRAIN_CUDA_INIT_SYMBOL "pl_train_cuda_init"
#define PL_TRAIN_CUDA_MODULE_NAME "libplateau-train-cuda.so"
