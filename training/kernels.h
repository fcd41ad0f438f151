/* CPU kernels of the GPT-2 engine (float32, OpenMP) and their double twins for the gradient check.
 * Shapes and conventions are documented beside each kernel in kernels_impl.h: tensors are dense row-major,
 * (B,T,C) activations, (OC,C) weights; every backward ACCUMULATES (+=) into all gradients it writes.
 * Pointer arguments are `restrict`: no two may overlap.
 * Thread safety: each call parallelises internally with OpenMP; do not call concurrently on the same outputs.
 */
#pragma once

#include <stddef.h>

/* ---- float ---- */
void pl_kernels_encoder_forward(float *restrict out, const int *restrict inp, const float *restrict wte,
                                const float *restrict wpe, int B, int T, int C);
void pl_kernels_encoder_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                                 const int *restrict inp, int B, int T, int C);
void pl_kernels_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                                  const float *restrict inp, const float *restrict weight, const float *restrict bias,
                                  int B, int T, int C);
void pl_kernels_layernorm_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                                   const float *restrict dout, const float *restrict inp, const float *restrict weight,
                                   const float *restrict mean, const float *restrict rstd, int B, int T, int C);
void pl_kernels_matmul_forward(float *restrict out, const float *restrict inp, const float *restrict weight,
                               const float *restrict bias, int B, int T, int C, int OC);
void pl_kernels_matmul_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                                const float *restrict dout, const float *restrict inp, const float *restrict weight,
                                int B, int T, int C, int OC);
void pl_kernels_attention_forward(float *restrict out, float *restrict preatt, float *restrict att,
                                  const float *restrict inp, int B, int T, int C, int NH);
void pl_kernels_attention_backward(float *restrict dinp, float *restrict dpreatt, float *restrict datt,
                                   const float *restrict dout, const float *restrict inp, const float *restrict att,
                                   int B, int T, int C, int NH);
void pl_kernels_gelu_forward(float *restrict out, const float *restrict inp, size_t N);
void pl_kernels_gelu_backward(float *restrict dinp, const float *restrict inp, const float *restrict dout, size_t N);
void pl_kernels_residual_forward(float *restrict out, const float *restrict a, const float *restrict b, size_t N);
void pl_kernels_residual_backward(float *restrict da, float *restrict db, const float *restrict dout, size_t N);
void pl_kernels_crossentropy_forward(float *restrict probs, float *restrict losses, const float *restrict logits,
                                     const int *restrict targets, int B, int T, int V);
void pl_kernels_crossentropy_backward(float *restrict dlogits, const float *restrict dlosses,
                                      const float *restrict probs, const int *restrict targets, int B, int T, int V);
void pl_kernels_adamw_update(float *restrict param, const float *restrict grad, float *restrict m, float *restrict v,
                             size_t N, float lr, float beta1, float beta2, float eps, float wd, int t);
double pl_kernels_sumsq(const float *restrict grad, size_t N);
void pl_kernels_scale(float *restrict grad, size_t N, float scale);

/* ---- double ---- */
void pl_kernels_encoder_forward_f64(double *restrict out, const int *restrict inp, const double *restrict wte,
                                    const double *restrict wpe, int B, int T, int C);
void pl_kernels_encoder_backward_f64(double *restrict dwte, double *restrict dwpe, const double *restrict dout,
                                     const int *restrict inp, int B, int T, int C);
void pl_kernels_layernorm_forward_f64(double *restrict out, double *restrict mean, double *restrict rstd,
                                      const double *restrict inp, const double *restrict weight,
                                      const double *restrict bias, int B, int T, int C);
void pl_kernels_layernorm_backward_f64(double *restrict dinp, double *restrict dweight, double *restrict dbias,
                                       const double *restrict dout, const double *restrict inp,
                                       const double *restrict weight, const double *restrict mean,
                                       const double *restrict rstd, int B, int T, int C);
void pl_kernels_matmul_forward_f64(double *restrict out, const double *restrict inp, const double *restrict weight,
                                   const double *restrict bias, int B, int T, int C, int OC);
void pl_kernels_matmul_backward_f64(double *restrict dinp, double *restrict dweight, double *restrict dbias,
                                    const double *restrict dout, const double *restrict inp,
                                    const double *restrict weight, int B, int T, int C, int OC);
void pl_kernels_attention_forward_f64(double *restrict out, double *restrict preatt, double *restrict att,
                                      const double *restrict inp, int B, int T, int C, int NH);
void pl_kernels_attention_backward_f64(double *restrict dinp, double *restrict dpreatt, double *restrict datt,
                                       const double *restrict dout, const double *restrict inp,
                                       const double *restrict att, int B, int T, int C, int NH);
void pl_kernels_gelu_forward_f64(double *restrict out, const double *restrict inp, size_t N);
void pl_kernels_gelu_backward_f64(double *restrict dinp, const double *restrict inp, const double *restrict dout,
                                  size_t N);
void pl_kernels_residual_forward_f64(double *restrict out, const double *restrict a, const double *restrict b,
                                     size_t N);
void pl_kernels_residual_backward_f64(double *restrict da, double *restrict db, const double *restrict dout, size_t N);
void pl_kernels_crossentropy_forward_f64(double *restrict probs, double *restrict losses, const double *restrict logits,
                                         const int *restrict targets, int B, int T, int V);
void pl_kernels_crossentropy_backward_f64(double *restrict dlogits, const double *restrict dlosses,
                                          const double *restrict probs, const int *restrict targets, int B, int T,
                                          int V);
void pl_kernels_adamw_update_f64(double *restrict param, const double *restrict grad, double *restrict m,
                                 double *restrict v, size_t N, double lr, double beta1, double beta2, double eps,
                                 double wd, int t);
double pl_kernels_sumsq_f64(const double *restrict grad, size_t N);
void pl_kernels_scale_f64(double *restrict grad, size_t N, double scale);

