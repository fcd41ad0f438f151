/* The kernel table (training/ops.h) on the CPU: complete, and the refactor from direct kernel calls to the table
 * changed nothing. The oracle is a training loop in this file that calls the kernels.c functions directly on
 * buffers allocated once (as model.c did before the table; the same loop as bench/train_bench.c's reference):
 * the engine's losses and gradient norms through the table must equal it bit for bit, in every build (the bits
 * themselves depend on the compiler and sanitizers, so they are computed here rather than stored).
 * A spy table (the CPU table wrapped, counting calls, asking for device scratch like the cuda table) checks that
 * the model drives every entry through the table and still gives the same bits.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <plateau/alloc.h>

#include "data.h"
#include "kernels.h"
#include "model.h"
#include "ops.h"

enum { RL = 2, RNH = 4, RC = 64, RV = 256, GB = 4, GT = 32, N_STEPS = 6, NP = 4 + 12 * RL };

typedef struct run_result {
    float loss[N_STEPS], norm[N_STEPS], val;
    long long allocs;
} run_result_t;

/* ---- the oracle: direct kernel calls, every buffer allocated up front ---- */

static float *fz(size_t n) {
    float *p = calloc(n, sizeof(float));
    assert_non_null(p);
    return p;
}

typedef struct ref {
    float *p[NP], *g[NP], *m[NP], *v[NP];
    size_t pn[NP];
    bool matrix[NP];
    int step;
} ref_t;

static void ref_init(ref_t *r, pl_gpt2_t *model) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < NP; i++) {
        const pl_tensor_t *t = pl_gpt2_param(model, i);
        r->pn[i] = t->n;
        r->matrix[i] = t->shape[1] != 0;
        r->p[i] = fz(t->n), r->g[i] = fz(t->n), r->m[i] = fz(t->n), r->v[i] = fz(t->n);
        memcpy(r->p[i], t->f, t->bytes); /* identical initial parameters (sim device: host memory) */
    }
}

static void ref_free(ref_t *r) {
    for (int i = 0; i < NP; i++) free(r->p[i]), free(r->g[i]), free(r->m[i]), free(r->v[i]);
}

#define RP(l, k) (r->p[2 + 12 * (l) + (k)])
#define RG(l, k) (r->g[2 + 12 * (l) + (k)])

/* One training step (or a forward only when opt == NULL) of batch (Bn, GT); returns the loss, *norm the norm. */
static float ref_step(ref_t *r, const int *in, const int *tg, int Bn, const pl_adamw_config_t *opt, float *norm) {
    const int B = Bn, T = GT;
    const size_t BT = (size_t)B * T, BTC = BT * RC, ATT = (size_t)B * RNH * T * T;
    float *enc = fz(BTC), *res[RL + 1], *ln1[RL], *m1[RL], *r1[RL], *qkv[RL], *att[RL], *atty[RL], *res2[RL], *ln2[RL],
          *m2[RL], *r2[RL], *fch[RL], *fchg[RL];
    float *pre = fz(ATT), *proj = fz(BTC);
    pl_kernels_encoder_forward(enc, in, r->p[0], r->p[1], B, T, RC);
    res[0] = enc;
    for (int l = 0; l < RL; l++) {
        ln1[l] = fz(BTC), m1[l] = fz(BT), r1[l] = fz(BT), qkv[l] = fz(3 * BTC), att[l] = fz(ATT), atty[l] = fz(BTC);
        res2[l] = fz(BTC), ln2[l] = fz(BTC), m2[l] = fz(BT), r2[l] = fz(BT), fch[l] = fz(4 * BTC);
        fchg[l] = fz(4 * BTC), res[l + 1] = fz(BTC);
        pl_kernels_layernorm_forward(ln1[l], m1[l], r1[l], res[l], RP(l, 0), RP(l, 1), B, T, RC);
        pl_kernels_matmul_forward(qkv[l], ln1[l], RP(l, 2), RP(l, 3), B, T, RC, 3 * RC);
        pl_kernels_attention_forward(atty[l], pre, att[l], qkv[l], B, T, RC, RNH);
        pl_kernels_matmul_forward(proj, atty[l], RP(l, 4), RP(l, 5), B, T, RC, RC);
        pl_kernels_residual_forward(res2[l], res[l], proj, BTC);
        pl_kernels_layernorm_forward(ln2[l], m2[l], r2[l], res2[l], RP(l, 6), RP(l, 7), B, T, RC);
        pl_kernels_matmul_forward(fch[l], ln2[l], RP(l, 8), RP(l, 9), B, T, RC, 4 * RC);
        pl_kernels_gelu_forward(fchg[l], fch[l], 4 * BTC);
        pl_kernels_matmul_forward(proj, fchg[l], RP(l, 10), RP(l, 11), B, T, 4 * RC, RC);
        pl_kernels_residual_forward(res[l + 1], res2[l], proj, BTC);
    }
    float *lnf = fz(BTC), *mf = fz(BT), *rf = fz(BT), *logits = fz(BT * RV), *probs = fz(BT * RV), *losses = fz(BT);
    pl_kernels_layernorm_forward(lnf, mf, rf, res[RL], r->p[2 + 12 * RL], r->p[3 + 12 * RL], B, T, RC);
    pl_kernels_matmul_forward(logits, lnf, r->p[0], NULL, B, T, RC, RV);
    pl_kernels_crossentropy_forward(probs, losses, logits, tg, B, T, RV);
    double sum = 0;
    for (size_t i = 0; i < BT; i++) sum += losses[i];
    if (opt) {
        for (int i = 0; i < NP; i++) memset(r->g[i], 0, r->pn[i] * sizeof(float));
        float *dl = fz(BT), *dlogits = fz(BT * RV), *dlnf = fz(BTC), *dres = fz(BTC);
        for (size_t i = 0; i < BT; i++) dl[i] = 1.0f / (float)BT;
        pl_kernels_crossentropy_backward(dlogits, dl, probs, tg, B, T, RV);
        pl_kernels_matmul_backward(dlnf, r->g[0], NULL, dlogits, lnf, r->p[0], B, T, RC, RV);
        pl_kernels_layernorm_backward(dres, r->g[2 + 12 * RL], r->g[3 + 12 * RL], dlnf, res[RL], r->p[2 + 12 * RL], mf,
                                      rf, B, T, RC);
        for (int l = RL - 1; l >= 0; l--) {
            float *dres2 = fz(BTC), *dp = fz(BTC), *dfg = fz(4 * BTC), *dfc = fz(4 * BTC), *dln = fz(BTC);
            float *dresid = fz(BTC), *dp2 = fz(BTC), *daty = fz(BTC), *dqkv = fz(3 * BTC), *dpre = fz(ATT);
            float *datt = fz(ATT), *dln1 = fz(BTC);
            pl_kernels_residual_backward(dres2, dp, dres, BTC);
            pl_kernels_matmul_backward(dfg, RG(l, 10), RG(l, 11), dp, fchg[l], RP(l, 10), B, T, 4 * RC, RC);
            pl_kernels_gelu_backward(dfc, fch[l], dfg, 4 * BTC);
            pl_kernels_matmul_backward(dln, RG(l, 8), RG(l, 9), dfc, ln2[l], RP(l, 8), B, T, RC, 4 * RC);
            pl_kernels_layernorm_backward(dres2, RG(l, 6), RG(l, 7), dln, res2[l], RP(l, 6), m2[l], r2[l], B, T, RC);
            pl_kernels_residual_backward(dresid, dp2, dres2, BTC);
            pl_kernels_matmul_backward(daty, RG(l, 4), RG(l, 5), dp2, atty[l], RP(l, 4), B, T, RC, RC);
            pl_kernels_attention_backward(dqkv, dpre, datt, daty, qkv[l], att[l], B, T, RC, RNH);
            pl_kernels_matmul_backward(dln1, RG(l, 2), RG(l, 3), dqkv, ln1[l], RP(l, 2), B, T, RC, 3 * RC);
            pl_kernels_layernorm_backward(dresid, RG(l, 0), RG(l, 1), dln1, res[l], RP(l, 0), m1[l], r1[l], B, T, RC);
            free(dres2), free(dp), free(dfg), free(dfc), free(dln), free(dp2), free(daty), free(dqkv), free(dpre);
            free(datt), free(dln1), free(dres);
            dres = dresid;
        }
        pl_kernels_encoder_backward(r->g[0], r->g[1], dres, in, B, T, RC);
        free(dl), free(dlogits), free(dlnf), free(dres);
        double sumsq = 0;
        for (int i = 0; i < NP; i++) sumsq += pl_kernels_sumsq(r->g[i], r->pn[i]);
        *norm = (float)sqrt(sumsq);
        float scale = (opt->grad_clip > 0 && *norm > opt->grad_clip) ? opt->grad_clip / *norm : 1.0f;
        r->step++;
        for (int i = 0; i < NP; i++) {
            if (scale != 1.0f) pl_kernels_scale(r->g[i], r->pn[i], scale);
            pl_kernels_adamw_update(r->p[i], r->g[i], r->m[i], r->v[i], r->pn[i], opt->lr, opt->beta1, opt->beta2,
                                    opt->eps, r->matrix[i] ? opt->weight_decay : 0.0f, r->step);
        }
    }
    for (int l = 0; l < RL; l++)
        free(ln1[l]), free(m1[l]), free(r1[l]), free(qkv[l]), free(att[l]), free(atty[l]), free(res2[l]),
            free(ln2[l]), free(m2[l]), free(r2[l]), free(fch[l]), free(fchg[l]), free(res[l + 1]);
    free(enc), free(pre), free(proj), free(lnf), free(mf), free(rf), free(logits), free(probs), free(losses);
    return (float)(sum / (double)BT);
}

/* ---- the engine on a table ---- */

/* A fixed-seed run: 2 layers, 4 heads, 64 channels, seed 42, data seed 7, `leak` from step 3; 6 training steps and
 * one evaluation. ops NULL = pl_gpt2_create (the default CPU path). With `oracle`, the same steps through ref_step
 * and their results in *oracle. */
static void engine_run(const pl_train_ops_t *ops, pl_leak_kind_t leak, const char *save_path, run_result_t *r,
                       run_result_t *oracle) {
    pl_sim_options_t sim;
    pl_sim_options_default(&sim);
    pl_backend_t *be;
    assert_int_equal(pl_backend_sim_create(&sim, &be), 0);
    pl_alloc_t *a;
    char err[256];
    assert_int_equal(pl_alloc_create(be, NULL, &a, err, sizeof err), 0);
    pl_gpt2_config_t cfg = {.n_layer = RL, .n_head = RNH, .n_embd = RC, .vocab = RV, .max_seq = GT};
    pl_gpt2_t *m = ops ? pl_gpt2_create_on(a, ops, &cfg, 42) : pl_gpt2_create(a, &cfg, 42);
    assert_non_null(m);
    ref_t ref;
    if (oracle) ref_init(&ref, m);
    pl_leak_config_t lk = {.kind = leak, .start = 3, .every = 1};
    pl_gpt2_set_leak(m, &lk);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    pl_data_t d = {0};
    assert_int_equal(pl_data_open_text(&d, NULL, 7), 0);
    int in[2 * GB * GT], tg[2 * GB * GT];
    for (int s = 0; s < N_STEPS; s++) {
        pl_data_batch(&d, false, GB, GT, in, tg);
        r->loss[s] = pl_gpt2_forward(m, in, tg, GB, GT, true);
        pl_gpt2_backward(m);
        r->norm[s] = pl_gpt2_update(m, &opt);
        pl_gpt2_zero_grad(m);
        if (oracle) oracle->loss[s] = ref_step(&ref, in, tg, GB, &opt, &oracle->norm[s]);
    }
    pl_data_batch(&d, true, 2 * GB, GT, in, tg);
    r->val = pl_gpt2_forward(m, in, tg, 2 * GB, GT, false);
    if (oracle) {
        oracle->val = ref_step(&ref, in, tg, 2 * GB, NULL, NULL);
        ref_free(&ref);
    }
    pl_alloc_stats_t st;
    pl_alloc_get_stats(a, &st);
    r->allocs = (long long)st.allocation[0].allocated;
    if (save_path) assert_int_equal(pl_gpt2_save(m, save_path, err, sizeof err), 0);
    pl_gpt2_destroy(m);
    pl_data_close(&d);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
}

static void assert_same_bits(const run_result_t *r, const run_result_t *o) {
    for (int s = 0; s < N_STEPS; s++) {
        if (memcmp(&r->loss[s], &o->loss[s], sizeof(float)) != 0 ||
            memcmp(&r->norm[s], &o->norm[s], sizeof(float)) != 0)
            fail_msg("step %d: engine loss %a norm %a, direct calls %a %a", s + 1, (double)r->loss[s],
                     (double)r->norm[s], (double)o->loss[s], (double)o->norm[s]);
    }
    if (memcmp(&r->val, &o->val, sizeof(float)) != 0)
        fail_msg("validation loss %a, direct calls %a", (double)r->val, (double)o->val);
    assert_true(o->loss[N_STEPS - 1] < o->loss[0]); /* the oracle trains: not a vacuous comparison */
}

static void test_ops_cpu_table_is_complete(void **state) {
    (void)state;
    const pl_train_ops_t *t = pl_train_ops_cpu();
    assert_non_null(t);
    assert_int_equal(t->abi, PL_TRAIN_OPS_ABI);
    assert_int_equal(t->size, sizeof(pl_train_ops_t));
    assert_string_equal(t->name, "cpu");
    assert_int_equal(t->scratch_bytes, 0);
#define CHECK_FIELD(f) assert_true(t->f != NULL);
    PL_TRAIN_OPS_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
    assert_null(t->last_error());
}

/* (3) the CPU table gives the losses and norms of the direct kernel calls bit for bit, by both constructors, and
 * allocates the same tensors either way */
static void test_ops_cpu_table_matches_direct_calls(void **state) {
    (void)state;
    run_result_t r, oracle, r2;
    engine_run(NULL, PL_LEAK_STATS, NULL, &r, &oracle);
    assert_same_bits(&r, &oracle);
    engine_run(pl_train_ops_cpu(), PL_LEAK_STATS, NULL, &r2, NULL);
    assert_same_bits(&r2, &oracle);
    assert_int_equal(r2.allocs, r.allocs);
}

/* ---- spy table: the CPU table wrapped, counting every entry ---- */

static pl_train_ops_t spy;
static const pl_train_ops_t *cpu;
static struct {
#define COUNTER(f) long f;
    PL_TRAIN_OPS_FIELDS(COUNTER)
#undef COUNTER
} calls;
static void *bound_scratch;
static size_t bound_bytes;

#define SPY0(f, ret, params, args)                                                                               \
    static ret spy_##f params {                                                                                  \
        calls.f++;                                                                                               \
        RET_##ret cpu->f args;                                                                                   \
    }
#define RET_void
#define RET_double return
#define RET_cstr return
typedef const char *cstr;
SPY0(encoder_forward, void, (float *restrict o, const int *restrict i, const float *restrict w, const float *restrict p,
                             int B, int T, int C), (o, i, w, p, B, T, C))
SPY0(encoder_backward, void, (float *restrict dw, float *restrict dp, const float *restrict d, const int *restrict i,
                              int B, int T, int C), (dw, dp, d, i, B, T, C))
SPY0(layernorm_forward, void, (float *restrict o, float *restrict mu, float *restrict rs, const float *restrict x,
                               const float *restrict w, const float *restrict b, int B, int T, int C),
     (o, mu, rs, x, w, b, B, T, C))
SPY0(layernorm_backward, void, (float *restrict dx, float *restrict dw, float *restrict db, const float *restrict d,
                                const float *restrict x, const float *restrict w, const float *restrict mu,
                                const float *restrict rs, int B, int T, int C), (dx, dw, db, d, x, w, mu, rs, B, T, C))
SPY0(matmul_forward, void, (float *restrict o, const float *restrict x, const float *restrict w,
                            const float *restrict b, int B, int T, int C, int OC), (o, x, w, b, B, T, C, OC))
SPY0(matmul_backward, void, (float *restrict dx, float *restrict dw, float *restrict db, const float *restrict d,
                             const float *restrict x, const float *restrict w, int B, int T, int C, int OC),
     (dx, dw, db, d, x, w, B, T, C, OC))
SPY0(attention_forward, void, (float *restrict o, float *restrict pre, float *restrict att, const float *restrict x,
                               int B, int T, int C, int NH), (o, pre, att, x, B, T, C, NH))
SPY0(attention_backward, void, (float *restrict dx, float *restrict dpre, float *restrict datt,
                                const float *restrict d, const float *restrict x, const float *restrict att, int B,
                                int T, int C, int NH), (dx, dpre, datt, d, x, att, B, T, C, NH))
SPY0(gelu_forward, void, (float *restrict o, const float *restrict x, size_t N), (o, x, N))
SPY0(gelu_backward, void, (float *restrict dx, const float *restrict x, const float *restrict d, size_t N),
     (dx, x, d, N))
SPY0(residual_forward, void, (float *restrict o, const float *restrict a, const float *restrict b, size_t N),
     (o, a, b, N))
SPY0(residual_backward, void, (float *restrict da, float *restrict db, const float *restrict d, size_t N),
     (da, db, d, N))
SPY0(crossentropy_forward, void, (float *restrict p, float *restrict l, const float *restrict lg,
                                  const int *restrict t, int B, int T, int V), (p, l, lg, t, B, T, V))
SPY0(crossentropy_backward, void, (float *restrict dl, const float *restrict d, const float *restrict p,
                                   const int *restrict t, int B, int T, int V), (dl, d, p, t, B, T, V))
SPY0(adamw_update, void, (float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t N,
                          float lr, float b1, float b2, float eps, float wd, int t),
     (p, g, m, v, N, lr, b1, b2, eps, wd, t))
SPY0(sumsq, double, (const float *restrict g, size_t N), (g, N))
SPY0(scale, void, (float *restrict g, size_t N, float s), (g, N, s))
SPY0(fill, void, (float *dst, size_t N, float v), (dst, N, v))
SPY0(channel_mean, void, (float *restrict o, const float *restrict x, int BT, int C), (o, x, BT, C))
SPY0(ema, void, (float *o, const float *old, const float *x, int C, float a, float b), (o, old, x, C, a, b))
SPY0(zero, void, (void *dst, size_t n), (dst, n))
SPY0(copy, void, (void *dst, const void *src, size_t n), (dst, src, n))
SPY0(upload, void, (void *dst, const void *src, size_t n), (dst, src, n))
SPY0(download, void, (void *dst, const void *src, size_t n), (dst, src, n))
SPY0(last_error, cstr, (void), ())
static void spy_bind_scratch(void *dev, size_t bytes) {
    calls.bind_scratch++;
    bound_scratch = dev;
    bound_bytes = bytes;
}

static void test_ops_spy_table_drives_every_entry(void **state) {
    (void)state;
    cpu = pl_train_ops_cpu();
    spy = *cpu;
    spy.name = "spy";
    spy.scratch_bytes = sizeof(double); /* as the cuda table: the model must allocate and bind device scratch */
#define WRAP(f) spy.f = spy_##f;
    PL_TRAIN_OPS_FIELDS(WRAP)
#undef WRAP
    memset(&calls, 0, sizeof calls);
    char path[] = "/tmp/plateau-test-ops-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    run_result_t r, oracle, plain;
    engine_run(&spy, PL_LEAK_CACHE, path, &r, &oracle); /* cache leak: exercises copy; it does not change the math */
    unlink(path);
    assert_same_bits(&r, &oracle);
    engine_run(NULL, PL_LEAK_CACHE, NULL, &plain, NULL);
    assert_int_equal(r.allocs, plain.allocs + 1); /* the bound scratch is the only extra tensor */
    assert_int_equal(calls.bind_scratch, 1);
    assert_non_null(bound_scratch);
    assert_true(bound_bytes >= sizeof(double));
    /* every entry was used (save: download of parameters and moments) */
#define USED(f)                                                                                                  \
    if (calls.f == 0) fail_msg("table entry %s never called", #f);
    PL_TRAIN_OPS_FIELDS(USED)
#undef USED
    /* per step: one crossentropy each way, one sumsq per parameter tensor with a gradient (4 + 12L = 28) */
    assert_int_equal(calls.crossentropy_forward, N_STEPS + 1);
    assert_int_equal(calls.crossentropy_backward, N_STEPS);
    assert_int_equal(calls.sumsq, N_STEPS * 28);
    assert_int_equal(calls.adamw_update, N_STEPS * 28);
    assert_int_equal(calls.encoder_backward, N_STEPS);
}

/* ---- a device error: the table's last_error() is checked after each download and ends the run (exit 2) ---- */

static const char *failing_last_error(void) { return "cudaMemcpy(device to host): cudaErrorIllegalAddress (injected)"; }

static void test_ops_device_error_exits_2_naming_the_call(void **state) {
    (void)state;
    pl_train_ops_t failing = *pl_train_ops_cpu();
    failing.name = "failing";
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka's handler is not for the child */
        dup2(fds[1], 2);
        close(fds[0]);
        pl_sim_options_t sim;
        pl_sim_options_default(&sim);
        pl_backend_t *be;
        pl_alloc_t *a;
        char err[256];
        if (pl_backend_sim_create(&sim, &be) != 0 || pl_alloc_create(be, NULL, &a, err, sizeof err) != 0) _exit(10);
        pl_gpt2_config_t cfg = {.n_layer = 1, .n_head = 2, .n_embd = 16, .vocab = 256, .max_seq = 8};
        pl_gpt2_t *m = pl_gpt2_create_on(a, &failing, &cfg, 1);
        if (!m) _exit(11);
        failing.last_error = failing_last_error; /* the next synchronising point sees the failure */
        int in[16] = {0}, tg[16] = {0};
        pl_gpt2_forward(m, in, tg, 2, 8, true);
        _exit(12); /* not reached: the forward's download check exits */
    }
    close(fds[1]);
    char buf[1024];
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    buf[n > 0 ? n : 0] = '\0';
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(buf, "plateau-train: failing device error during forward: cudaMemcpy(device to host): "
                                "cudaErrorIllegalAddress (injected)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_cpu_table_is_complete),
        cmocka_unit_test(test_ops_cpu_table_matches_direct_calls),
        cmocka_unit_test(test_ops_spy_table_drives_every_entry),
        cmocka_unit_test(test_ops_device_error_exits_2_naming_the_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
