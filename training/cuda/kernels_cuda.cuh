/* CUDA kernels of the GPT-2 engine: the same ops, shapes and conventions as the CPU kernels (kernels_impl.h):
 * dense row-major float32, (B,T,C) activations, (OC,C) weights, every backward ACCUMULATES (+=) into the
 * gradients it writes (atomicAdd where threads share a parameter gradient).
 *
 * Each launcher takes device pointers and a stream (a cudaStream_t passed as void*, so callers need no CUDA
 * headers), enqueues its kernel(s) and returns the launch status (0 = cudaSuccess). They are compiled in CI when
 * nvcc is found and selected at run time only when a GPU is present; this machine has none, so they are kept
 * one-thread-per-output simple, readable against the CPU reference rather than fast.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

int pl_cuda_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C,
                            void *stream);
int pl_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C,
                             void *stream);
int pl_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int B, int T, int C, void *stream);
int pl_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int B, int T, int C,
                               void *stream);
int pl_cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int T,
                           int C, int OC, void *stream);
int pl_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int B, int T, int C, int OC, void *stream);
int pl_cuda_attention_forward(float *out, float *preatt, float *att, const float *inp, int B, int T, int C, int NH,
                              void *stream);
int pl_cuda_attention_backward(float *dinp, float *dpreatt, float *datt, const float *dout, const float *inp,
                               const float *att, int B, int T, int C, int NH, void *stream);
int pl_cuda_gelu_forward(float *out, const float *inp, long N, void *stream);
int pl_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, long N, void *stream);
int pl_cuda_residual_forward(float *out, const float *a, const float *b, long N, void *stream);
int pl_cuda_residual_backward(float *da, float *db, const float *dout, long N, void *stream);
int pl_cuda_crossentropy_forward(float *probs, float *losses, const float *logits, const int *targets, int B, int T,
                                 int V, void *stream);
int pl_cuda_crossentropy_backward(float *dlogits, const float *dlosses, const float *probs, const int *targets,
                                  int B, int T, int V, void *stream);
int pl_cuda_adamw_update(float *param, const float *grad, float *m, float *v, long N, float lr, float beta1,
                         float beta2, float eps, float wd, int t, void *stream);

/* kernels_util.cu: the engine's small glue ops (ops.h) */
int pl_cuda_fill(float *dst, long N, float value, void *stream);
int pl_cuda_scale(float *grad, long N, float scale, void *stream);
int pl_cuda_sumsq(double *out, const float *grad, long N, void *stream); /* *out (device) = sum of grad^2 */
int pl_cuda_channel_mean(float *out, const float *x, int BT, int C, void *stream);
int pl_cuda_ema(float *out, const float *old, const float *x, int C, float a, float b, void *stream);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* Launch geometry shared by both .cu files: 1-D grids of 256 threads. */
#define PL_CUDA_BLOCK 256
static inline unsigned pl_cuda_blocks(long n) { return (unsigned)((n + PL_CUDA_BLOCK - 1) / PL_CUDA_BLOCK); }
#endif
