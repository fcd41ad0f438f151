// Forward CUDA kernels of the GPT-2 engine (see kernels_cuda.cuh; CPU reference: ../kernels_impl.h).
// One thread per output element or per row; no shared-memory tiling: compiled in CI, run only on a GPU.
#include <cuda_runtime.h>
#include <math.h>

#include "kernels_cuda.cuh"

// out (B,T,C) = wte[inp] + wpe[t]; one thread per element.
__global__ static void encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                                   int C) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * T * C) return;
    long bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T);
    out[i] = wte[(long)inp[bt] * C + c] + wpe[(long)t * C + c];
}

// One thread per row (b,t): mean, rstd (B,T), out (B,T,C).
__global__ static void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                     const float *bias, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float *x = inp + (long)r * C;
    float m = 0.f, v = 0.f;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float s = rsqrtf(v / C + 1e-5f);
    for (int c = 0; c < C; c++) out[(long)r * C + c] = (x[c] - m) * s * w[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
}

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias; one thread per output element.
__global__ static void matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int BT, int C,
                                  int OC) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)BT * OC) return;
    long r = i / OC;
    int o = (int)(i % OC);
    float s = bias ? bias[o] : 0.f;
    for (int c = 0; c < C; c++) s += inp[r * C + c] * w[(long)o * C + c];
    out[i] = s;
}

// One thread per (b,h,t) query row: scores, causal softmax, weighted sum of values.
__global__ static void attention_fwd(float *out, float *preatt, float *att, const float *inp, int B, int T, int C,
                                     int NH) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * NH * T) return;
    int t = (int)(i % T), h = (int)((i / T) % NH), b = (int)(i / ((long)T * NH));
    int C3 = 3 * C, hs = C / NH;
    float scale = rsqrtf((float)hs);
    const float *q = inp + ((long)b * T + t) * C3 + h * hs;
    float *pre = preatt + i * T, *a = att + i * T;
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *k = inp + ((long)b * T + t2) * C3 + h * hs + C;
        float s = 0.f;
        for (int d = 0; d < hs; d++) s += q[d] * k[d];
        pre[t2] = s * scale;
        maxv = fmaxf(maxv, pre[t2]);
    }
    float sum = 0.f;
    for (int t2 = 0; t2 <= t; t2++) {
        a[t2] = expf(pre[t2] - maxv);
        sum += a[t2];
    }
    for (int t2 = 0; t2 < T; t2++) {
        if (t2 <= t) {
            a[t2] /= sum;
        } else {
            a[t2] = 0.f;
            pre[t2] = 0.f;
        }
    }
    float *o = out + ((long)b * T + t) * C + h * hs;
    for (int d = 0; d < hs; d++) {
        float s = 0.f;
        for (int t2 = 0; t2 <= t; t2++) s += a[t2] * inp[((long)b * T + t2) * C3 + h * hs + 2 * C + d];
        o[d] = s;
    }
}

__global__ static void gelu_fwd(float *out, const float *inp, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = inp[i];
    out[i] = 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__global__ static void residual_fwd(float *out, const float *a, const float *b, long N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = a[i] + b[i];
}

// One thread per row (b,t): softmax over V into probs (B,T,V), loss (B,T).
__global__ static void crossentropy_fwd(float *probs, float *losses, const float *logits, const int *targets, int N,
                                        int V) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float *l = logits + (long)r * V;
    float *p = probs + (long)r * V;
    float maxv = -INFINITY, sum = 0.f;
    for (int v = 0; v < V; v++) maxv = fmaxf(maxv, l[v]);
    for (int v = 0; v < V; v++) {
        p[v] = expf(l[v] - maxv);
        sum += p[v];
    }
    for (int v = 0; v < V; v++) p[v] /= sum;
    losses[r] = -logf(p[targets[r]]);
}

#define LAUNCH(kernel, n, ...)                                                                                   \
    do {                                                                                                         \
        kernel<<<pl_cuda_blocks(n), PL_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(__VA_ARGS__);                      \
        return (int)cudaGetLastError();                                                                          \
    } while (0)

extern "C" int pl_cuda_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                                       int C, void *stream) {
    LAUNCH(encoder_fwd, (long)B * T * C, out, inp, wte, wpe, B, T, C);
}
extern "C" int pl_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                                         const float *bias, int B, int T, int C, void *stream) {
    LAUNCH(layernorm_fwd, (long)B * T, out, mean, rstd, inp, weight, bias, B * T, C);
}
extern "C" int pl_cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B,
                                      int T, int C, int OC, void *stream) {
    LAUNCH(matmul_fwd, (long)B * T * OC, out, inp, weight, bias, B * T, C, OC);
}
extern "C" int pl_cuda_attention_forward(float *out, float *preatt, float *att, const float *inp, int B, int T, int C,
                                         int NH, void *stream) {
    LAUNCH(attention_fwd, (long)B * NH * T, out, preatt, att, inp, B, T, C, NH);
}
extern "C" int pl_cuda_gelu_forward(float *out, const float *inp, long N, void *stream) {
    LAUNCH(gelu_fwd, N, out, inp, N);
}
extern "C" int pl_cuda_residual_forward(float *out, const float *a, const float *b, long N, void *stream) {
    LAUNCH(residual_fwd, N, out, a, b, N);
}
extern "C" int pl_cuda_crossentropy_forward(float *probs, float *losses, const float *logits, const int *targets,
                                            int B, int T, int V, void *stream) {
    LAUNCH(crossentropy_fwd, (long)B * T, probs, losses, logits, targets, B * T, V);
}
