/* CPU kernels of the GPT-2 engine, written once over a scalar type and instantiated twice by kernels.c:
 * float (`_f32` names hidden behind the plain names in kernels.h, used by the model) and double (`_f64`, used
 * only by the finite-difference gradient check in tests/training).
 *
 * Before including: define REAL (float|double) and KFN(name) (appends the suffix). <tgmath.h> picks expf or exp
 * from the argument type, so the same text is exact in both precisions.
 *
 * Conventions (as llm.c): B batch, T sequence length, C channels, NH heads, hs = C/NH head size, V vocab,
 * OC output channels. Every tensor is dense row-major with the shape given in the comment beside it.
 * Backward functions ACCUMULATE (+=) into every gradient they write (d-inputs and d-parameters), so a tensor
 * consumed twice (the residual stream, the tied token embedding) receives both contributions; callers zero
 * gradients when they allocate them. Forward functions overwrite their outputs.
 * Parallelism: OpenMP over independent rows (b,t) or (b,h); loops that would race on a shared accumulator
 * (parameter gradients of LayerNorm, embeddings) stay serial, they are O(B*T*C) and cheap.
 */
#include <tgmath.h>

#ifndef PL_PAR_MIN
/* Loops over fewer elements than this run on one thread: a parallel region costs more than it saves there, and
 * every region is a barrier that stalls when a core is busy elsewhere (biases, LayerNorm gains, small tensors). */
#define PL_PAR_MIN 16384
#endif

/* out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
 * out (B,T,C), inp (B,T) token ids, wte (V,C), wpe (maxT,C) */
void KFN(pl_kernels_encoder_forward)(REAL *restrict out, const int *restrict inp, const REAL *restrict wte,
                                     const REAL *restrict wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            REAL *o = out + ((size_t)b * T + t) * C;
            const REAL *we = wte + (size_t)inp[b * T + t] * C;
            const REAL *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        }
    }
}

/* dwte[tok] += dout[b,t]; dwpe[t] += dout[b,t]. dwte (V,C), dwpe (maxT,C), dout (B,T,C). Serial: tokens repeat. */
void KFN(pl_kernels_encoder_backward)(REAL *restrict dwte, REAL *restrict dwpe, const REAL *restrict dout,
                                      const int *restrict inp, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const REAL *d = dout + ((size_t)b * T + t) * C;
            REAL *dwe = dwte + (size_t)inp[b * T + t] * C;
            REAL *dpe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                dwe[c] += d[c];
                dpe[c] += d[c];
            }
        }
    }
}

/* out = (x - mean) * rstd * weight + bias over the last axis, eps 1e-5.
 * out (B,T,C), mean (B,T), rstd (B,T) saved for backward, inp (B,T,C), weight (C), bias (C). */
void KFN(pl_kernels_layernorm_forward)(REAL *restrict out, REAL *restrict mean, REAL *restrict rstd,
                                       const REAL *restrict inp, const REAL *restrict weight, const REAL *restrict bias,
                                       int B, int T, int C) {
    const REAL eps = (REAL)1e-5;
    const int BT = B * T;
#pragma omp parallel for if ((size_t)BT * C >= PL_PAR_MIN)
    for (int i = 0; i < BT; i++) {
        const REAL *x = inp + (size_t)i * C;
        REAL m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        REAL v = 0;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        REAL s = 1 / sqrt(v + eps);
        REAL *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

/* dinp += ..., dweight += sum_bt dout*xhat, dbias += sum_bt dout.
 * dinp (B,T,C), dweight (C), dbias (C), dout (B,T,C), inp (B,T,C), mean/rstd (B,T). */
void KFN(pl_kernels_layernorm_backward)(REAL *restrict dinp, REAL *restrict dweight, REAL *restrict dbias,
                                        const REAL *restrict dout, const REAL *restrict inp,
                                        const REAL *restrict weight, const REAL *restrict mean,
                                        const REAL *restrict rstd, int B, int T, int C) {
    const int BT = B * T;
#pragma omp parallel for if ((size_t)BT * C >= PL_PAR_MIN)
    for (int i = 0; i < BT; i++) {
        const REAL *d = dout + (size_t)i * C;
        const REAL *x = inp + (size_t)i * C;
        REAL *dx = dinp + (size_t)i * C;
        REAL m = mean[i], s = rstd[i];
        REAL dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            REAL xhat = (x[c] - m) * s;
            REAL dn = weight[c] * d[c];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * xhat;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            REAL xhat = (x[c] - m) * s;
            REAL dn = weight[c] * d[c];
            dx[c] += (dn - dnorm_mean - xhat * dnorm_norm_mean) * s;
        }
    }
    for (int i = 0; i < BT; i++) { /* parameter grads: shared accumulators, serial */
        const REAL *d = dout + (size_t)i * C;
        const REAL *x = inp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            dweight[c] += (x[c] - mean[i]) * rstd[i] * d[c];
            dbias[c] += d[c];
        }
    }
}

/* out = inp @ weight^T + bias. out (B,T,OC), inp (B,T,C), weight (OC,C), bias (OC) or NULL.
 * Four rows at a time share each weight row; `omp simd reduction` lets the dot products vectorise (it permits
 * reassociating the sum, which plain -O3 without -ffast-math does not). */
void KFN(pl_kernels_matmul_forward)(REAL *restrict out, const REAL *restrict inp, const REAL *restrict weight,
                                    const REAL *restrict bias, int B, int T, int C, int OC) {
    enum { TILE = 4 };
    const int BT = B * T;
    const int n_tiles = (BT + TILE - 1) / TILE;
#pragma omp parallel for
    for (int tile = 0; tile < n_tiles; tile++) {
        const int r0 = tile * TILE;
        if (BT - r0 >= TILE) {
            const REAL *x0 = inp + (size_t)r0 * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
            for (int o = 0; o < OC; o++) {
                const REAL *w = weight + (size_t)o * C;
                REAL s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
                for (int c = 0; c < C; c++) {
                    s0 += x0[c] * w[c];
                    s1 += x1[c] * w[c];
                    s2 += x2[c] * w[c];
                    s3 += x3[c] * w[c];
                }
                REAL bo = bias ? bias[o] : 0;
                out[(size_t)r0 * OC + o] = s0 + bo;
                out[(size_t)(r0 + 1) * OC + o] = s1 + bo;
                out[(size_t)(r0 + 2) * OC + o] = s2 + bo;
                out[(size_t)(r0 + 3) * OC + o] = s3 + bo;
            }
        } else {
            for (int r = r0; r < BT; r++) {
                const REAL *x = inp + (size_t)r * C;
                for (int o = 0; o < OC; o++) {
                    const REAL *w = weight + (size_t)o * C;
                    REAL s = 0;
#pragma omp simd reduction(+ : s)
                    for (int c = 0; c < C; c++) s += x[c] * w[c];
                    out[(size_t)r * OC + o] = s + (bias ? bias[o] : 0);
                }
            }
        }
    }
}

/* dinp += dout @ weight; dweight += dout^T @ inp; dbias += sum_bt dout (dbias may be NULL).
 * dinp (B,T,C), dweight (OC,C), dbias (OC), dout (B,T,OC), inp (B,T,C), weight (OC,C).
 * Both products sum four terms per pass over a row, so each read-modify-write of the accumulator row carries
 * four multiply-adds (one per pass is load/store bound). */
void KFN(pl_kernels_matmul_backward)(REAL *restrict dinp, REAL *restrict dweight, REAL *restrict dbias,
                                     const REAL *restrict dout, const REAL *restrict inp, const REAL *restrict weight,
                                     int B, int T, int C, int OC) {
    const int BT = B * T;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const REAL *d = dout + (size_t)i * OC;
        REAL *dx = dinp + (size_t)i * C;
        int o = 0;
        for (; o + 4 <= OC; o += 4) {
            const REAL *w0 = weight + (size_t)o * C, *w1 = w0 + C, *w2 = w1 + C, *w3 = w2 + C;
            const REAL g0 = d[o], g1 = d[o + 1], g2 = d[o + 2], g3 = d[o + 3];
            for (int c = 0; c < C; c++) dx[c] += w0[c] * g0 + w1[c] * g1 + w2[c] * g2 + w3[c] * g3;
        }
        for (; o < OC; o++) {
            const REAL *w = weight + (size_t)o * C;
            const REAL g = d[o];
            for (int c = 0; c < C; c++) dx[c] += w[c] * g;
        }
    }
#pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        REAL *dw = dweight + (size_t)o * C;
        REAL db = 0;
        int i = 0;
        for (; i + 4 <= BT; i += 4) {
            const REAL *x0 = inp + (size_t)i * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
            const REAL g0 = dout[(size_t)i * OC + o], g1 = dout[(size_t)(i + 1) * OC + o];
            const REAL g2 = dout[(size_t)(i + 2) * OC + o], g3 = dout[(size_t)(i + 3) * OC + o];
            db += g0 + g1 + g2 + g3;
            for (int c = 0; c < C; c++) dw[c] += x0[c] * g0 + x1[c] * g1 + x2[c] * g2 + x3[c] * g3;
        }
        for (; i < BT; i++) {
            const REAL *x = inp + (size_t)i * C;
            const REAL g = dout[(size_t)i * OC + o];
            db += g;
            for (int c = 0; c < C; c++) dw[c] += x[c] * g;
        }
        if (dbias) dbias[o] += db;
    }
}

/* Causal multi-head self-attention. inp (B,T,3C) holds q,k,v side by side; out (B,T,C);
 * preatt (B,NH,T,T) scores (a temporary: backward does not need it); att (B,NH,T,T) softmax probabilities, saved.
 * Entries t2 > t of preatt/att are set to 0 (masked). Scale 1/sqrt(hs). */
void KFN(pl_kernels_attention_forward)(REAL *restrict out, REAL *restrict preatt, REAL *restrict att,
                                       const REAL *restrict inp, int B, int T, int C, int NH) {
    const int C3 = 3 * C, hs = C / NH;
    const REAL scale = 1 / sqrt((REAL)hs);
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const REAL *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                REAL *pre = preatt + (((size_t)b * NH + h) * T + t) * T;
                REAL *a = att + (((size_t)b * NH + h) * T + t) * T;
                REAL maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL s = 0;
#pragma omp simd reduction(+ : s)
                    for (int i = 0; i < hs; i++) s += q[i] * k[i];
                    s *= scale;
                    pre[t2] = s;
                    if (s > maxv) maxv = s;
                }
                REAL sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    REAL e = exp(pre[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                REAL inv = 1 / sum;
                for (int t2 = 0; t2 < T; t2++) {
                    if (t2 <= t) {
                        a[t2] *= inv;
                    } else {
                        a[t2] = 0;
                        pre[t2] = 0;
                    }
                }
                REAL *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    REAL w = a[t2];
                    for (int i = 0; i < hs; i++) o[i] += w * v[i];
                }
            }
        }
    }
}

/* dinp (B,T,3C) += gradient through q, k and v. datt, dpreatt (B,NH,T,T) are caller-provided scratch
 * (temporaries, overwritten here). att (B,NH,T,T) from forward, inp (B,T,3C), dout (B,T,C).
 * Parallel over (b,h): each pair writes a disjoint slice of dinp. */
void KFN(pl_kernels_attention_backward)(REAL *restrict dinp, REAL *restrict dpreatt, REAL *restrict datt,
                                        const REAL *restrict dout, const REAL *restrict inp, const REAL *restrict att,
                                        int B, int T, int C, int NH) {
    const int C3 = 3 * C, hs = C / NH;
    const REAL scale = 1 / sqrt((REAL)hs);
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const REAL *a = att + (((size_t)b * NH + h) * T + t) * T;
                REAL *da = datt + (((size_t)b * NH + h) * T + t) * T;
                REAL *dpre = dpreatt + (((size_t)b * NH + h) * T + t) * T;
                const REAL *d = dout + ((size_t)b * T + t) * C + h * hs;
                /* out = att @ v */
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    REAL *dv = dinp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    REAL s = 0;
                    for (int i = 0; i < hs; i++) {
                        s += v[i] * d[i];
                        dv[i] += a[t2] * d[i];
                    }
                    da[t2] = s;
                }
                /* softmax: dpre = att * (datt - sum(att * datt)) */
                REAL dot = 0;
                for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
                for (int t2 = 0; t2 <= t; t2++) dpre[t2] = a[t2] * (da[t2] - dot);
                /* preatt = scale * q . k */
                const REAL *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                REAL *dq = dinp + ((size_t)b * T + t) * C3 + h * hs;
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL *dk = dinp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL g = dpre[t2] * scale;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += k[i] * g;
                        dk[i] += q[i] * g;
                    }
                }
            }
        }
    }
}

/* GELU, tanh approximation (as GPT-2). out (N), inp (N). */
void KFN(pl_kernels_gelu_forward)(REAL *restrict out, const REAL *restrict inp, size_t N) {
    const REAL k = (REAL)0.7978845608028654; /* sqrt(2/pi) */
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        REAL x = inp[i];
        out[i] = (REAL)0.5 * x * (1 + tanh(k * (x + (REAL)0.044715 * x * x * x)));
    }
}

/* dinp (N) += gelu'(inp) * dout. */
void KFN(pl_kernels_gelu_backward)(REAL *restrict dinp, const REAL *restrict inp, const REAL *restrict dout, size_t N) {
    const REAL k = (REAL)0.7978845608028654;
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        REAL x = inp[i];
        REAL u = k * (x + (REAL)0.044715 * x * x * x);
        REAL th = tanh(u);
        REAL sech2 = 1 - th * th;
        REAL du = k * (1 + 3 * (REAL)0.044715 * x * x);
        dinp[i] += ((REAL)0.5 * (1 + th) + (REAL)0.5 * x * sech2 * du) * dout[i];
    }
}

/* out = a + b. out, a, b (N). */
void KFN(pl_kernels_residual_forward)(REAL *restrict out, const REAL *restrict a, const REAL *restrict b, size_t N) {
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

/* da += dout; db += dout. (N) each. */
void KFN(pl_kernels_residual_backward)(REAL *restrict da, REAL *restrict db, const REAL *restrict dout, size_t N) {
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* Softmax over V then cross-entropy against targets. probs (B,T,V) saved for backward, losses (B,T),
 * logits (B,T,V), targets (B,T). */
void KFN(pl_kernels_crossentropy_forward)(REAL *restrict probs, REAL *restrict losses, const REAL *restrict logits,
                                          const int *restrict targets, int B, int T, int V) {
    const int BT = B * T;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const REAL *l = logits + (size_t)i * V;
        REAL *p = probs + (size_t)i * V;
        REAL maxv = -INFINITY;
        for (int v = 0; v < V; v++)
            if (l[v] > maxv) maxv = l[v];
        REAL sum = 0;
        for (int v = 0; v < V; v++) {
            p[v] = exp(l[v] - maxv);
            sum += p[v];
        }
        REAL inv = 1 / sum;
        for (int v = 0; v < V; v++) p[v] *= inv;
        losses[i] = -log(p[targets[i]]);
    }
}

/* dlogits (B,T,V) += (probs - onehot(target)) * dlosses[b,t]. dlosses (B,T): 1/(B*T) for a mean loss. */
void KFN(pl_kernels_crossentropy_backward)(REAL *restrict dlogits, const REAL *restrict dlosses,
                                           const REAL *restrict probs, const int *restrict targets, int B, int T,
                                           int V) {
    const int BT = B * T;
#pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        REAL *dl = dlogits + (size_t)i * V;
        const REAL *p = probs + (size_t)i * V;
        REAL g = dlosses[i];
        for (int v = 0; v < V; v++) dl[v] += (p[v] - (v == targets[i] ? 1 : 0)) * g;
    }
}

/* AdamW step t (1-based) on one parameter tensor: param, grad, m, v (N). Weight decay is decoupled
 * (param -= lr * wd * param) and applied only when wd != 0 (the caller passes 0 for biases and LayerNorm gains). */
void KFN(pl_kernels_adamw_update)(REAL *restrict param, const REAL *restrict grad, REAL *restrict m, REAL *restrict v,
                                  size_t N, REAL lr, REAL beta1, REAL beta2, REAL eps, REAL wd, int t) {
    const REAL c1 = 1 - pow(beta1, (REAL)t), c2 = 1 - pow(beta2, (REAL)t);
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        REAL g = grad[i];
        REAL mi = beta1 * m[i] + (1 - beta1) * g;
        REAL vi = beta2 * v[i] + (1 - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        REAL mhat = mi / c1, vhat = vi / c2;
        param[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * param[i]);
    }
}

/* Sum of squares of grad (N), accumulated in double whatever REAL is (for the global clipping norm). */
double KFN(pl_kernels_sumsq)(const REAL *restrict grad, size_t N) {
    double s = 0;
#pragma omp parallel for reduction(+ : s) if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) s += (double)grad[i] * (double)grad[i];
    return s;
}

/* grad (N) *= scale. */
void KFN(pl_kernels_scale)(REAL *restrict grad, size_t N, REAL scale) {
#pragma omp parallel for if (N >= PL_PAR_MIN)
    for (size_t i = 0; i < N; i++) grad[i] *= scale;
}
