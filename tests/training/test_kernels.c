/* Gradient check of every CPU kernel's backward against central finite differences, in double precision
 * (the _f64 instantiation of the same kernel text), then the float32 kernels against the double ones.
 *
 * For an op y = f(x1..xk) and a fixed random R, L = sum(y * R); the backward called with dout = R must give
 * dL/dxi. Each backward must ACCUMULATE: gradients are pre-filled with 0.25 and the check subtracts it.
 * Tolerances (stated): finite differences with h = 1e-5, |analytic - numeric| <= 1e-8 + 1e-7 * |numeric|
 * (observed <= 2e-10);
 * float32 vs double, outputs and gradients: |f32 - f64| <= 1e-5 + 1e-4 * |f64|.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels.h"

enum { MAXIN = 3 };
#define FD_H 1e-5
#define FD_ATOL 1e-8
#define FD_RTOL 1e-7
#define F32_ATOL 1e-5
#define F32_RTOL 1e-4

/* Shared small dims. */
enum { B = 2, T = 4, C = 8, NH = 2, OC = 6, V = 7 };
static int tokens[B * T] = {1, 3, 0, 6, 2, 2, 5, 4};

typedef struct op {
    const char *name;
    int n_in;
    size_t in_n[MAXIN];
    size_t out_n;
    double in_scale[MAXIN]; /* inputs ~ U(-s, s) */
    void (*fwd64)(double **in, double *out);
    void (*bwd64)(double **in, const double *dout, double **din);
    void (*fwd32)(float **in, float *out);
    void (*bwd32)(float **in, const float *dout, float **din);
} op_t;

static uint64_t rs = 42;
static double urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

/* ---- op adapters ---- */

static void enc_f64(double **in, double *out) { pl_kernels_encoder_forward_f64(out, tokens, in[0], in[1], B, T, C); }
static void enc_b64(double **in, const double *d, double **din) {
    (void)in;
    pl_kernels_encoder_backward_f64(din[0], din[1], d, tokens, B, T, C);
}
static void enc_f32(float **in, float *out) { pl_kernels_encoder_forward(out, tokens, in[0], in[1], B, T, C); }
static void enc_b32(float **in, const float *d, float **din) {
    (void)in;
    pl_kernels_encoder_backward(din[0], din[1], d, tokens, B, T, C);
}

static void ln_f64(double **in, double *out) {
    double mean[B * T], rstd[B * T];
    pl_kernels_layernorm_forward_f64(out, mean, rstd, in[0], in[1], in[2], B, T, C);
}
static void ln_b64(double **in, const double *d, double **din) {
    double mean[B * T], rstd[B * T], out[B * T * C];
    pl_kernels_layernorm_forward_f64(out, mean, rstd, in[0], in[1], in[2], B, T, C);
    pl_kernels_layernorm_backward_f64(din[0], din[1], din[2], d, in[0], in[1], mean, rstd, B, T, C);
}
static void ln_f32(float **in, float *out) {
    float mean[B * T], rstd[B * T];
    pl_kernels_layernorm_forward(out, mean, rstd, in[0], in[1], in[2], B, T, C);
}
static void ln_b32(float **in, const float *d, float **din) {
    float mean[B * T], rstd[B * T], out[B * T * C];
    pl_kernels_layernorm_forward(out, mean, rstd, in[0], in[1], in[2], B, T, C);
    pl_kernels_layernorm_backward(din[0], din[1], din[2], d, in[0], in[1], mean, rstd, B, T, C);
}

/* B*T = 8 rows: two full 4-row tiles of the tiled forward (the 1 x 7 variant below exercises the row tail) */
static void mm_f64(double **in, double *out) { pl_kernels_matmul_forward_f64(out, in[0], in[1], in[2], B, T, C, OC); }
static void mm_b64(double **in, const double *d, double **din) {
    pl_kernels_matmul_backward_f64(din[0], din[1], din[2], d, in[0], in[1], B, T, C, OC);
}
static void mm_f32(float **in, float *out) { pl_kernels_matmul_forward(out, in[0], in[1], in[2], B, T, C, OC); }
static void mm_b32(float **in, const float *d, float **din) {
    pl_kernels_matmul_backward(din[0], din[1], din[2], d, in[0], in[1], B, T, C, OC);
}
/* 1 x 7 rows: one full tile plus a 3-row tail */
static void mmt_f64(double **in, double *out) { pl_kernels_matmul_forward_f64(out, in[0], in[1], in[2], 1, 7, C, OC); }
static void mmt_b64(double **in, const double *d, double **din) {
    pl_kernels_matmul_backward_f64(din[0], din[1], din[2], d, in[0], in[1], 1, 7, C, OC);
}
static void mmt_f32(float **in, float *out) { pl_kernels_matmul_forward(out, in[0], in[1], in[2], 1, 7, C, OC); }
static void mmt_b32(float **in, const float *d, float **din) {
    pl_kernels_matmul_backward(din[0], din[1], din[2], d, in[0], in[1], 1, 7, C, OC);
}

static void att_f64(double **in, double *out) {
    double pre[B * NH * T * T], att[B * NH * T * T];
    pl_kernels_attention_forward_f64(out, pre, att, in[0], B, T, C, NH);
}
static void att_b64(double **in, const double *d, double **din) {
    double pre[B * NH * T * T], att[B * NH * T * T], out[B * T * C], dpre[B * NH * T * T], datt[B * NH * T * T];
    pl_kernels_attention_forward_f64(out, pre, att, in[0], B, T, C, NH);
    pl_kernels_attention_backward_f64(din[0], dpre, datt, d, in[0], att, B, T, C, NH);
}
static void att_f32(float **in, float *out) {
    float pre[B * NH * T * T], att[B * NH * T * T];
    pl_kernels_attention_forward(out, pre, att, in[0], B, T, C, NH);
}
static void att_b32(float **in, const float *d, float **din) {
    float pre[B * NH * T * T], att[B * NH * T * T], out[B * T * C], dpre[B * NH * T * T], datt[B * NH * T * T];
    pl_kernels_attention_forward(out, pre, att, in[0], B, T, C, NH);
    pl_kernels_attention_backward(din[0], dpre, datt, d, in[0], att, B, T, C, NH);
}

static void gelu_f64(double **in, double *out) { pl_kernels_gelu_forward_f64(out, in[0], B * T * C); }
static void gelu_b64(double **in, const double *d, double **din) {
    pl_kernels_gelu_backward_f64(din[0], in[0], d, B * T * C);
}
static void gelu_f32(float **in, float *out) { pl_kernels_gelu_forward(out, in[0], B * T * C); }
static void gelu_b32(float **in, const float *d, float **din) { pl_kernels_gelu_backward(din[0], in[0], d, B * T * C); }

static void res_f64(double **in, double *out) { pl_kernels_residual_forward_f64(out, in[0], in[1], B * T * C); }
static void res_b64(double **in, const double *d, double **din) {
    (void)in;
    pl_kernels_residual_backward_f64(din[0], din[1], d, B * T * C);
}
static void res_f32(float **in, float *out) { pl_kernels_residual_forward(out, in[0], in[1], B * T * C); }
static void res_b32(float **in, const float *d, float **din) {
    (void)in;
    pl_kernels_residual_backward(din[0], din[1], d, B * T * C);
}

static void ce_f64(double **in, double *out) {
    double probs[B * T * V];
    pl_kernels_crossentropy_forward_f64(probs, out, in[0], tokens, B, T, V);
}
static void ce_b64(double **in, const double *d, double **din) {
    double probs[B * T * V], losses[B * T];
    pl_kernels_crossentropy_forward_f64(probs, losses, in[0], tokens, B, T, V);
    pl_kernels_crossentropy_backward_f64(din[0], d, probs, tokens, B, T, V);
}
static void ce_f32(float **in, float *out) {
    float probs[B * T * V];
    pl_kernels_crossentropy_forward(probs, out, in[0], tokens, B, T, V);
}
static void ce_b32(float **in, const float *d, float **din) {
    float probs[B * T * V], losses[B * T];
    pl_kernels_crossentropy_forward(probs, losses, in[0], tokens, B, T, V);
    pl_kernels_crossentropy_backward(din[0], d, probs, tokens, B, T, V);
}

/* ---- the generic checker ---- */

static double loss_of(const op_t *op, double **in, const double *R) {
    double *out = malloc(op->out_n * sizeof *out);
    op->fwd64(in, out);
    double L = 0;
    for (size_t j = 0; j < op->out_n; j++) L += out[j] * R[j];
    free(out);
    return L;
}

static void check_op(const op_t *op) {
    double *in[MAXIN] = {0}, *din[MAXIN] = {0};
    float *in32[MAXIN] = {0}, *din32[MAXIN] = {0};
    double *R = malloc(op->out_n * sizeof *R), *out = malloc(op->out_n * sizeof *out);
    float *R32 = malloc(op->out_n * sizeof *R32), *out32 = malloc(op->out_n * sizeof *out32);
    assert_non_null(R);
    for (size_t j = 0; j < op->out_n; j++) R[j] = 2 * urand() - 1, R32[j] = (float)R[j];
    for (int k = 0; k < op->n_in; k++) {
        in[k] = malloc(op->in_n[k] * sizeof(double));
        din[k] = malloc(op->in_n[k] * sizeof(double));
        in32[k] = malloc(op->in_n[k] * sizeof(float));
        din32[k] = malloc(op->in_n[k] * sizeof(float));
        for (size_t j = 0; j < op->in_n[k]; j++) {
            /* round inputs to float so both precisions see identical values */
            in32[k][j] = (float)(op->in_scale[k] * (2 * urand() - 1));
            in[k][j] = in32[k][j];
            din[k][j] = 0.25;
            din32[k][j] = 0.25f;
        }
    }
    op->bwd64(in, R, din);
    double worst = 0;
    for (int k = 0; k < op->n_in; k++) {
        for (size_t j = 0; j < op->in_n[k]; j++) {
            double x0 = in[k][j];
            in[k][j] = x0 + FD_H;
            double lp = loss_of(op, in, R);
            in[k][j] = x0 - FD_H;
            double lm = loss_of(op, in, R);
            in[k][j] = x0;
            double num = (lp - lm) / (2 * FD_H);
            double ana = din[k][j] - 0.25;
            double err = fabs(ana - num);
            if (err > worst) worst = err;
            if (err > FD_ATOL + FD_RTOL * fabs(num))
                fail_msg("%s: d/d(input %d)[%zu]: analytic %.12g, finite difference %.12g", op->name, k, j, ana, num);
        }
    }
    /* float32 vs double */
    op->fwd64(in, out);
    op->fwd32(in32, out32);
    for (size_t j = 0; j < op->out_n; j++)
        if (fabs(out32[j] - out[j]) > F32_ATOL + F32_RTOL * fabs(out[j]))
            fail_msg("%s: float32 forward[%zu] %.9g vs double %.9g", op->name, j, out32[j], out[j]);
    op->bwd32(in32, R32, din32);
    for (int k = 0; k < op->n_in; k++)
        for (size_t j = 0; j < op->in_n[k]; j++)
            if (fabs(din32[k][j] - din[k][j]) > F32_ATOL + F32_RTOL * fabs(din[k][j]))
                fail_msg("%s: float32 grad %d[%zu] %.9g vs double %.9g", op->name, k, j, din32[k][j], din[k][j]);
    print_message("%-12s max |analytic - numeric| = %.3g\n", op->name, worst);
    for (int k = 0; k < op->n_in; k++) free(in[k]), free(din[k]), free(in32[k]), free(din32[k]);
    free(R), free(out), free(R32), free(out32);
}

static void test_kernels_encoder(void **state) {
    (void)state;
    op_t op = {"encoder", 2, {V * C, T * C}, B * T * C, {1, 1}, enc_f64, enc_b64, enc_f32, enc_b32};
    check_op(&op);
}
static void test_kernels_layernorm(void **state) {
    (void)state;
    op_t op = {"layernorm", 3, {B * T * C, C, C}, B * T * C, {2, 1.5, 1}, ln_f64, ln_b64, ln_f32, ln_b32};
    check_op(&op);
}
static void test_kernels_matmul(void **state) {
    (void)state;
    op_t op = {"matmul", 3, {B * T * C, OC * C, OC}, B * T * OC, {1, 1, 1}, mm_f64, mm_b64, mm_f32, mm_b32};
    check_op(&op);
    op_t tail = {"matmul-tail", 3, {7 * C, OC * C, OC}, 7 * OC, {1, 1, 1}, mmt_f64, mmt_b64, mmt_f32, mmt_b32};
    check_op(&tail);
}
static void test_kernels_attention(void **state) {
    (void)state;
    op_t op = {"attention", 1, {B * T * 3 * C}, B * T * C, {1.5}, att_f64, att_b64, att_f32, att_b32};
    check_op(&op);
}
static void test_kernels_gelu(void **state) {
    (void)state;
    op_t op = {"gelu", 1, {B * T * C}, B * T * C, {3}, gelu_f64, gelu_b64, gelu_f32, gelu_b32};
    check_op(&op);
}
static void test_kernels_residual(void **state) {
    (void)state;
    op_t op = {"residual", 2, {B * T * C, B * T * C}, B * T * C, {1, 1}, res_f64, res_b64, res_f32, res_b32};
    check_op(&op);
}
static void test_kernels_crossentropy(void **state) {
    (void)state;
    op_t op = {"crossentropy", 1, {B * T * V}, B * T, {2}, ce_f64, ce_b64, ce_f32, ce_b32};
    check_op(&op);
}

/* Attention is causal: output at t must not depend on inputs at t2 > t. */
static void test_kernels_attention_causal(void **state) {
    (void)state;
    double in[B * T * 3 * C], out1[B * T * C], out2[B * T * C], pre[B * NH * T * T], att[B * NH * T * T];
    for (size_t j = 0; j < sizeof in / sizeof *in; j++) in[j] = 2 * urand() - 1;
    pl_kernels_attention_forward_f64(out1, pre, att, in, B, T, C, NH);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 3 * C; c++) in[((size_t)b * T + (T - 1)) * 3 * C + c] += 1.0; /* perturb the last token */
    pl_kernels_attention_forward_f64(out2, pre, att, in, B, T, C, NH);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T - 1; t++)
            for (int c = 0; c < C; c++) assert_true(out1[(b * T + t) * C + c] == out2[(b * T + t) * C + c]);
}

/* AdamW against the textbook update computed by hand, in double, two steps. */
static void test_kernels_adamw(void **state) {
    (void)state;
    double p[2] = {0.5, -1.0}, g[2] = {0.1, -0.3}, m[2] = {0}, v[2] = {0};
    const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double ep[2] = {0.5, -1.0}, em[2] = {0}, ev[2] = {0};
    for (int t = 1; t <= 2; t++) {
        pl_kernels_adamw_update_f64(p, g, m, v, 2, lr, b1, b2, eps, wd, t);
        for (int i = 0; i < 2; i++) {
            em[i] = b1 * em[i] + (1 - b1) * g[i];
            ev[i] = b2 * ev[i] + (1 - b2) * g[i] * g[i];
            double mh = em[i] / (1 - pow(b1, t)), vh = ev[i] / (1 - pow(b2, t));
            ep[i] -= lr * (mh / (sqrt(vh) + eps) + wd * ep[i]);
        }
    }
    for (int i = 0; i < 2; i++) {
        assert_true(fabs(p[i] - ep[i]) < 1e-12);
        assert_true(fabs(m[i] - em[i]) < 1e-15);
    }
    /* zero gradient: only the decoupled weight decay moves the parameter */
    double q[1] = {2.0}, z[1] = {0}, mq[1] = {0}, vq[1] = {0};
    pl_kernels_adamw_update_f64(q, z, mq, vq, 1, lr, b1, b2, eps, wd, 1);
    assert_true(fabs(q[0] - (2.0 - lr * wd * 2.0)) < 1e-12);
    /* float32 twin agrees */
    float pf[2] = {0.5f, -1.0f}, gf[2] = {0.1f, -0.3f}, mf[2] = {0}, vf[2] = {0};
    pl_kernels_adamw_update(pf, gf, mf, vf, 2, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, 1);
    double p1[2] = {0.5, -1.0}, m1[2] = {0}, v1[2] = {0};
    pl_kernels_adamw_update_f64(p1, g, m1, v1, 2, lr, b1, b2, eps, wd, 1);
    for (int i = 0; i < 2; i++) assert_true(fabs(pf[i] - p1[i]) < 1e-6);
}

/* Gradient clipping primitives: sum of squares and scaling. */
static void test_kernels_clip(void **state) {
    (void)state;
    float g[5] = {3, 4, 0, 0, 0};
    assert_true(fabs(pl_kernels_sumsq(g, 5) - 25.0) < 1e-9);
    pl_kernels_scale(g, 5, 0.2f);
    assert_true(fabs(sqrt(pl_kernels_sumsq(g, 5)) - 1.0) < 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_encoder),   cmocka_unit_test(test_kernels_layernorm),
        cmocka_unit_test(test_kernels_matmul),    cmocka_unit_test(test_kernels_attention),
        cmocka_unit_test(test_kernels_gelu),      cmocka_unit_test(test_kernels_residual),
        cmocka_unit_test(test_kernels_crossentropy), cmocka_unit_test(test_kernels_attention_causal),
        cmocka_unit_test(test_kernels_adamw),     cmocka_unit_test(test_kernels_clip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
