// Backward CUDA kernels and AdamW (see kernels_cuda.cuh; CPU reference: ../kernels_impl.h). Every gradient is
// accumulated (+=); parameter gradients shared across threads use atomicAdd.
#include <cuda_runtime.h>
#include <math.h>

#include "kernels_cuda.cuh"

__global__ static void encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                                   int C) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * T * C) return;
    long bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T);
    atomicAdd(&dwte[(long)inp[bt] * C + c], dout[i]);
    atomicAdd(&dwpe[(long)t * C + c], dout[i]);
}

// One thread per row: dinp += ...; dweight, dbias += via atomics.
__global__ static void layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                     const float *w, const float *mean, const float *rstd, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float *d = dout + (long)r * C, *x = inp + (long)r * C;
    float m = mean[r], s = rstd[r], dmean = 0.f, dnm = 0.f;
    for (int c = 0; c < C; c++) {
        float xh = (x[c] - m) * s, dn = w[c] * d[c];
        dmean += dn;
        dnm += dn * xh;
    }
    dmean /= C;
    dnm /= C;
    for (int c = 0; c < C; c++) {
        float xh = (x[c] - m) * s, dn = w[c] * d[c];
        dinp[(long)r * C + c] += (dn - dmean - xh * dnm) * s;
        atomicAdd(&dw[c], xh * d[c]);
        atomicAdd(&db[c], d[c]);
    }
}

// dinp (BT,C) += dout (BT,OC) @ weight (OC,C); one thread per (row, c).
__global__ static void matmul_bwd_inp(float *dinp, const float *dout, const float *w, int BT, int C, int OC) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)BT * C) return;
    long r = i / C;
    int c = (int)(i % C);
    float s = 0.f;
    for (int o = 0; o < OC; o++) s += dout[r * OC + o] * w[(long)o * C + c];
    dinp[i] += s;
}

// dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums (thread c == 0 of each o). One thread per (o, c).
__global__ static void matmul_bwd_w(float *dw, float *db, const float *dout, const float *inp, int BT, int C, int OC) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)OC * C) return;
    int o = (int)(i / C), c = (int)(i % C);
    float s = 0.f, sb = 0.f;
    for (long r = 0; r < BT; r++) {
        float g = dout[r * OC + o];
        s += g * inp[r * C + c];
        sb += g;
    }
    dw[i] += s;
    if (db && c == 0) db[o] += sb;
}

// One thread per (b,h): walks t like the CPU kernel, so writes to dinp never race.
__global__ static void attention_bwd(float *dinp, float *dpreatt, float *datt, const float *dout, const float *inp,
                                     const float *att, int B, int T, int C, int NH) {
    long bh = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (bh >= (long)B * NH) return;
    int b = (int)(bh / NH), h = (int)(bh % NH), C3 = 3 * C, hs = C / NH;
    float scale = rsqrtf((float)hs);
    for (int t = 0; t < T; t++) {
        const float *a = att + (bh * T + t) * T;
        float *da = datt + (bh * T + t) * T, *dpre = dpreatt + (bh * T + t) * T;
        const float *d = dout + ((long)b * T + t) * C + h * hs;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = inp + ((long)b * T + t2) * C3 + h * hs + 2 * C;
            float *dv = dinp + ((long)b * T + t2) * C3 + h * hs + 2 * C;
            float s = 0.f;
            for (int k = 0; k < hs; k++) {
                s += v[k] * d[k];
                dv[k] += a[t2] * d[k];
            }
            da[t2] = s;
        }
        float dot = 0.f;
        for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
        for (int t2 = 0; t2 <= t; t2++) dpre[t2] = a[t2] * (da[t2] - dot);
        const float *q = inp + ((long)b * T + t) * C3 + h * hs;
        float *dq = dinp + ((long)b * T + t) * C3 + h * hs;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = inp + ((long)b * T + t2) * C3 + h * hs + C;
            float *dk = dinp + ((long)b * T + t2) * C3 + h * hs + C;
            float g = dpre[t2] * scale;
            for (int j = 0; j < hs; j++) {
                dq[j] += k[j] * g;
                dk[j] += q[j] * g;
            }
        }
    }
}

__global__ static void gelu_bwd(float *dinp, const float *inp, const float *dout, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const float k = 0.7978845608f;
    float x = inp[i], th = tanhf(k * (x + 0.044715f * x * x * x));
    float du = k * (1.f + 3.f * 0.044715f * x * x);
    dinp[i] += (0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * du) * dout[i];
}

__global__ static void residual_bwd(float *da, float *db, const float *dout, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    da[i] += dout[i];
    db[i] += dout[i];
}

__global__ static void crossentropy_bwd(float *dlogits, const float *dlosses, const float *probs, const int *targets,
                                        int N, int V) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)N * V) return;
    long r = i / V;
    int v = (int)(i % V);
    dlogits[i] += (probs[i] - (v == targets[r] ? 1.f : 0.f)) * dlosses[r];
}

__global__ static void adamw(float *p, const float *g, float *m, float *v, long N, float lr, float b1, float b2,
                             float eps, float wd, float c1, float c2) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float mi = b1 * m[i] + (1.f - b1) * g[i], vi = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p[i]);
}

#define LAUNCH(kernel, n, ...) kernel<<<pl_cuda_blocks(n), PL_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(__VA_ARGS__)

extern "C" int pl_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                                        int C, void *stream) {
    LAUNCH(encoder_bwd, (long)B * T * C, dwte, dwpe, dout, inp, B, T, C);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                          const float *inp, const float *weight, const float *mean, const float *rstd,
                                          int B, int T, int C, void *stream) {
    LAUNCH(layernorm_bwd, (long)B * T, dinp, dweight, dbias, dout, inp, weight, mean, rstd, B * T, C);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                       const float *weight, int B, int T, int C, int OC, void *stream) {
    LAUNCH(matmul_bwd_inp, (long)B * T * C, dinp, dout, weight, B * T, C, OC);
    LAUNCH(matmul_bwd_w, (long)OC * C, dweight, dbias, dout, inp, B * T, C, OC);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_attention_backward(float *dinp, float *dpreatt, float *datt, const float *dout,
                                          const float *inp, const float *att, int B, int T, int C, int NH,
                                          void *stream) {
    LAUNCH(attention_bwd, (long)B * NH, dinp, dpreatt, datt, dout, inp, att, B, T, C, NH);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, long N, void *stream) {
    LAUNCH(gelu_bwd, N, dinp, inp, dout, N);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_residual_backward(float *da, float *db, const float *dout, long N, void *stream) {
    LAUNCH(residual_bwd, N, da, db, dout, N);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_crossentropy_backward(float *dlogits, const float *dlosses, const float *probs,
                                             const int *targets, int B, int T, int V, void *stream) {
    LAUNCH(crossentropy_bwd, (long)B * T * V, dlogits, dlosses, probs, targets, B * T, V);
    return (int)cudaGetLastError();
}
extern "C" int pl_cuda_adamw_update(float *param, const float *grad, float *m, float *v, long N, float lr,
                                    float beta1, float beta2, float eps, float wd, int t, void *stream) {
    float c1 = 1.f - powf(beta1, (float)t), c2 = 1.f - powf(beta2, (float)t);
    LAUNCH(adamw, N, param, grad, m, v, N, lr, beta1, beta2, eps, wd, c1, c2);
    return (int)cudaGetLastError();
}
