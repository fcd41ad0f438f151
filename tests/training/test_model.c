/* The engine end to end on the plateau allocator (sim backend): the model's gradients against finite differences,
 * the loss falling on the built-in corpus, the memory shapes of every scenario as the allocator's stats see them
 * (non-leak defaults plateau; each leak grows allocated bytes and live blocks per step), evaluation spikes that
 * return, the budget against measured peaks, and checkpoints (round trip, config mismatch, garbage, truncation).
 * Tiny models throughout so the suite stays fast under ASan+UBSan; OMP_NUM_THREADS=1 is set by meson.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <plateau/alloc.h>

#include "data.h"
#include "model.h"

typedef struct env {
    pl_backend_t *backend;
    pl_alloc_t *alloc;
    pl_data_t data;
} env_t;

static int setup(void **state) {
    env_t *e = calloc(1, sizeof *e);
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    pl_alloc_config_t cfg;
    pl_alloc_config_default(&cfg);
    char err[256];
    if (!e || pl_backend_sim_create(&so, &e->backend) != 0) return -1;
    if (pl_alloc_create(e->backend, &cfg, &e->alloc, err, sizeof err) != 0) return -1;
    if (pl_data_open_text(&e->data, NULL, 7) != 0) return -1;
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env_t *e = *state;
    pl_data_close(&e->data);
    pl_alloc_destroy(e->alloc);
    pl_backend_destroy(e->backend);
    free(e);
    return 0;
}

static pl_gpt2_config_t tiny(void) {
    return (pl_gpt2_config_t){.n_layer = 2, .n_head = 2, .n_embd = 32, .vocab = 256, .max_seq = 32};
}

static void stats(env_t *e, pl_alloc_stats_t *s) { pl_alloc_get_stats(e->alloc, s); }

/* One training step on a fresh batch; returns the loss. */
static float train_step(env_t *e, pl_gpt2_t *m, int B, int T, const pl_adamw_config_t *opt) {
    int in[B * T], tg[B * T];
    pl_data_batch(&e->data, false, B, T, in, tg);
    float loss = pl_gpt2_forward(m, in, tg, B, T, true);
    pl_gpt2_backward(m);
    pl_gpt2_update(m, opt);
    pl_gpt2_zero_grad(m);
    return loss;
}

/* ---- the parameters: names, shapes and initial values in checkpoint order (what checkpoints and
 * pl_gpt2_param index by) ---- */

static void test_model_parameter_layout(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 11);
    assert_non_null(m);
    const int C = cfg.n_embd, L = cfg.n_layer;
    static const struct { const char *name; int rows_c, cols_c; float init; } layer[12] = {
        /* rows and columns in units of C (0: a vector); init: the value of every element, NAN = random */
        {"ln1.weight", 1, 0, 1.0f},       {"ln1.bias", 1, 0, 0.0f},        {"attn.qkv.weight", 3, 1, NAN},
        {"attn.qkv.bias", 3, 0, 0.0f},    {"attn.proj.weight", 1, 1, NAN}, {"attn.proj.bias", 1, 0, 0.0f},
        {"ln2.weight", 1, 0, 1.0f},       {"ln2.bias", 1, 0, 0.0f},        {"mlp.fc.weight", 4, 1, NAN},
        {"mlp.fc.bias", 4, 0, 0.0f},      {"mlp.proj.weight", 1, 4, NAN},  {"mlp.proj.bias", 1, 0, 0.0f}};
    assert_int_equal(pl_gpt2_num_param_tensors(m), 4 + 12 * L);
    size_t total = 0;
    for (int i = 0; i < pl_gpt2_num_param_tensors(m); i++) {
        const pl_tensor_t *p = pl_gpt2_param(m, i);
        const char *name;
        int rows, cols;
        float init = NAN;
        if (i == 0) {
            name = "wte", rows = cfg.vocab, cols = C;
        } else if (i == 1) {
            name = "wpe", rows = cfg.max_seq, cols = C;
        } else if (i >= 2 + 12 * L) {
            name = i == 2 + 12 * L ? "lnf.weight" : "lnf.bias", rows = C, cols = 0;
            init = i == 2 + 12 * L ? 1.0f : 0.0f;
        } else {
            int k = (i - 2) % 12;
            name = layer[k].name, rows = layer[k].rows_c * C, cols = layer[k].cols_c * C, init = layer[k].init;
        }
        if (strcmp(p->name, name) || p->shape[0] != rows || p->shape[1] != cols)
            fail_msg("parameter %d: %s (%d,%d), expected %s (%d,%d)", i, p->name, p->shape[0], p->shape[1], name, rows,
                     cols);
        size_t n_init = 0;
        for (size_t j = 0; j < p->n; j++) n_init += isnan(init) ? p->f[j] != 0.0f : p->f[j] == init;
        if (n_init != p->n) fail_msg("parameter %d (%s): %zu of %zu elements initialised as expected", i, name, n_init, p->n);
        total += p->n;
        assert_null(pl_gpt2_grad(m, i));
    }
    assert_int_equal(total, pl_gpt2_num_params(m));
    /* one backward: every parameter has its gradient, of its own shape */
    int in[2 * 8], tg[2 * 8];
    pl_data_batch(&e->data, false, 2, 8, in, tg);
    pl_gpt2_forward(m, in, tg, 2, 8, true);
    pl_gpt2_backward(m);
    for (int i = 0; i < pl_gpt2_num_param_tensors(m); i++) {
        const pl_tensor_t *p = pl_gpt2_param(m, i), *g = pl_gpt2_grad(m, i);
        assert_non_null(g);
        assert_memory_equal(g->shape, p->shape, sizeof p->shape);
    }
    pl_gpt2_zero_grad(m);
    pl_gpt2_destroy(m);
}

/* ---- gradients of the whole model (wiring: tied head, residual stream, per-layer order) ---- */

static void test_model_gradient_matches_finite_differences(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = {.n_layer = 2, .n_head = 2, .n_embd = 8, .vocab = 256, .max_seq = 6};
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 11);
    assert_non_null(m);
    enum { B = 2, T = 6 };
    int in[B * T], tg[B * T];
    pl_data_batch(&e->data, false, B, T, in, tg);
    pl_gpt2_forward(m, in, tg, B, T, true);
    pl_gpt2_backward(m);
    /* Float32 model: central differences with h = 1e-2 on the parameters with the largest gradients of each tensor;
     * tolerance |analytic - numeric| <= 1e-3 + 5e-2 * |numeric| (float rounding of the loss is ~1e-7 / h). */
    int n_checked = 0;
    for (int i = 0; i < pl_gpt2_num_param_tensors(m); i++) {
        pl_tensor_t *p = pl_gpt2_param(m, i), *g = pl_gpt2_grad(m, i);
        assert_non_null(g); /* every parameter receives a gradient */
        size_t best = 0;
        for (size_t j = 0; j < g->n; j++)
            if (fabsf(g->f[j]) > fabsf(g->f[best])) best = j;
        float ana = g->f[best];
        float x0 = p->f[best];
        const float h = 1e-2f;
        p->f[best] = x0 + h;
        double lp = pl_gpt2_forward(m, in, tg, B, T, false);
        p->f[best] = x0 - h;
        double lm = pl_gpt2_forward(m, in, tg, B, T, false);
        p->f[best] = x0;
        double num = (lp - lm) / (2 * h);
        if (fabs(ana - num) > 1e-3 + 5e-2 * fabs(num))
            fail_msg("param tensor %d (%s)[%zu]: analytic %.6g vs numeric %.6g", i, p->name, best, ana, num);
        n_checked++;
    }
    assert_int_equal(n_checked, 4 + 12 * cfg.n_layer);
    pl_gpt2_zero_grad(m);
    pl_gpt2_destroy(m);
}

/* ---- learning ---- */

static void test_model_loss_falls_on_builtin_corpus(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 1337);
    assert_non_null(m);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    opt.lr = 3e-3f;
    e->data.rng = 1337;
    const int steps = 80;
    float first = 0, tail = 0;
    for (int s = 1; s <= steps; s++) {
        float l = train_step(e, m, 4, 32, &opt);
        if (s == 1) first = l;
        if (s > steps - 10) tail += l / 10;
    }
    print_message("loss %.4f -> mean of last 10 steps %.4f\n", first, tail);
    assert_true(first > 5.0f);       /* ~ln 256 = 5.55 at init */
    assert_true(tail < first - 2.0f); /* stated margin: at least 2 nats below the initial loss after 80 steps */
    pl_gpt2_destroy(m);
}

/* ---- memory shapes ---- */

enum { N_STEPS = 14 };
typedef struct series {
    int64_t allocated[N_STEPS + 1], blocks[N_STEPS + 1], reserved[N_STEPS + 1];
} series_t;

static void run_series(env_t *e, pl_leak_kind_t kind, int start, int every, bool variable_seq, series_t *out) {
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 5);
    assert_non_null(m);
    pl_leak_config_t leak = {kind, start, every};
    pl_gpt2_set_leak(m, &leak);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    for (int s = 1; s <= N_STEPS; s++) {
        int T = variable_seq ? 8 * (1 + (int)pl_data_rand(&e->data, 4)) : 32;
        train_step(e, m, 2, T, &opt);
        pl_alloc_stats_t st;
        stats(e, &st);
        out->allocated[s] = st.allocated_bytes[PL_POOL_ALL].current;
        out->blocks[s] = st.allocation[PL_POOL_ALL].current;
        out->reserved[s] = st.reserved_bytes[PL_POOL_ALL].current;
    }
    pl_gpt2_destroy(m);
    pl_alloc_stats_t st;
    stats(e, &st);
    assert_int_equal(st.allocation[PL_POOL_ALL].current, 0); /* destroy returns every block */
    assert_int_equal(st.allocated_bytes[PL_POOL_ALL].current, 0);
}

static void test_model_default_plateaus(void **state) {
    env_t *e = *state;
    series_t s;
    run_series(e, PL_LEAK_NONE, 1, 1, false, &s);
    /* warmup: the optimizer's moments appear at step 1, so allocated after step 1 already includes them;
     * from step 2 on, allocated bytes, live blocks and reserved bytes are identical after every step */
    for (int k = 3; k <= N_STEPS; k++) {
        assert_int_equal(s.allocated[k], s.allocated[2]);
        assert_int_equal(s.blocks[k], s.blocks[2]);
        assert_int_equal(s.reserved[k], s.reserved[2]);
    }
}

static void test_model_variable_seq_plateaus(void **state) {
    env_t *e = *state;
    series_t s;
    run_series(e, PL_LEAK_NONE, 1, 1, true, &s);
    /* allocated between steps does not depend on the sequence length (activations are freed) */
    for (int k = 2; k <= N_STEPS; k++) {
        assert_int_equal(s.allocated[k], s.allocated[1]);
        assert_int_equal(s.blocks[k], s.blocks[1]);
    }
    /* reserved never shrinks and is bounded by the largest shape's needs: it stops at a plateau */
    for (int k = 2; k <= N_STEPS; k++) assert_true(s.reserved[k] >= s.reserved[k - 1]);
}

static void check_leak(env_t *e, pl_leak_kind_t kind, const char *name) {
    const int start = 4;
    series_t s;
    run_series(e, kind, start, 1, false, &s);
    for (int k = 3; k < start; k++) { /* before the leak starts: flat */
        assert_int_equal(s.allocated[k], s.allocated[2]);
        assert_int_equal(s.blocks[k], s.blocks[2]);
    }
    int64_t db = s.allocated[start] - s.allocated[start - 1], dn = s.blocks[start] - s.blocks[start - 1];
    for (int k = start; k <= N_STEPS; k++) { /* from the first leaking step: grows by the same amount every step */
        if (s.allocated[k] <= s.allocated[k - 1] || s.blocks[k] <= s.blocks[k - 1])
            fail_msg("leak %s did not grow at step %d: %lld -> %lld bytes, %lld -> %lld blocks", name, k,
                     (long long)s.allocated[k - 1], (long long)s.allocated[k], (long long)s.blocks[k - 1],
                     (long long)s.blocks[k]);
        assert_int_equal(s.allocated[k] - s.allocated[k - 1], db);
        assert_int_equal(s.blocks[k] - s.blocks[k - 1], dn);
    }
    print_message("leak %-7s +%lld bytes, +%lld blocks per step\n", name, (long long)db, (long long)dn);
}

static void test_model_leak_graph(void **state) { check_leak(*state, PL_LEAK_GRAPH, "graph"); }
static void test_model_leak_outputs(void **state) { check_leak(*state, PL_LEAK_OUTPUTS, "outputs"); }
static void test_model_leak_stats(void **state) { check_leak(*state, PL_LEAK_STATS, "stats"); }
static void test_model_leak_cache(void **state) { check_leak(*state, PL_LEAK_CACHE, "cache"); }

static void test_model_leak_rate(void **state) {
    env_t *e = *state;
    series_t s;
    run_series(e, PL_LEAK_OUTPUTS, 2, 3, false, &s); /* leaks at steps 2, 5, 8, 11, 14 */
    for (int k = 2; k <= N_STEPS; k++) {
        bool fires = (k - 2) % 3 == 0;
        if (fires)
            assert_true(s.allocated[k] > s.allocated[k - 1]);
        else
            assert_int_equal(s.allocated[k], s.allocated[k - 1]);
    }
}

/* The output-list leak holds exactly one logits tensor, B*T*V*4 bytes, per step. */
static void test_model_leak_outputs_is_logits_sized(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 5);
    pl_leak_config_t leak = {PL_LEAK_OUTPUTS, 1, 1};
    pl_gpt2_set_leak(m, &leak);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    for (int s = 0; s < 3; s++) train_step(e, m, 2, 16, &opt);
    assert_int_equal(pl_gpt2_n_leaked(m), 3);
    assert_int_equal(pl_gpt2_leaked_bytes(m), 3 * 2 * 16 * 256 * 4);
    pl_gpt2_destroy(m);
}

static void test_model_eval_spike_returns(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 5);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    train_step(e, m, 2, 32, &opt);
    pl_alloc_stats_t before, after;
    pl_alloc_reset_peak_stats(e->alloc);
    stats(e, &before);
    int in[8 * 32], tg[8 * 32];
    pl_data_batch(&e->data, true, 8, 32, in, tg);
    float vl = pl_gpt2_forward(m, in, tg, 8, 32, false);
    stats(e, &after);
    assert_true(vl > 0 && isfinite(vl));
    assert_int_equal(after.allocated_bytes[0].current, before.allocated_bytes[0].current);
    assert_int_equal(after.allocation[0].current, before.allocation[0].current);
    assert_true(after.allocated_bytes[0].peak > before.allocated_bytes[0].current + 8 * 32 * 256 * 4);
    /* a training forward without backward keeps its graph until the next forward drops it */
    pl_gpt2_forward(m, in, tg, 2, 32, true);
    stats(e, &after);
    assert_true(after.allocated_bytes[0].current > before.allocated_bytes[0].current);
    pl_gpt2_forward(m, in, tg, 2, 32, false);
    stats(e, &after);
    assert_int_equal(after.allocated_bytes[0].current, before.allocated_bytes[0].current);
    assert_int_equal(after.allocation[0].current, before.allocation[0].current);
    pl_gpt2_forward(m, in, tg, 2, 32, true); /* and destroy frees a pending graph */
    pl_gpt2_destroy(m);
    stats(e, &after);
    assert_int_equal(after.allocation[0].current, 0);
}

/* Measured peak of a step against the printed budget (params + grads + optimizer + activations + logits). */
static void test_model_budget_matches_peak(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 5);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    train_step(e, m, 4, 32, &opt); /* creates the optimizer state */
    pl_alloc_reset_peak_stats(e->alloc);
    train_step(e, m, 4, 32, &opt);
    pl_alloc_stats_t st;
    stats(e, &st);
    pl_gpt2_budget_t b;
    pl_gpt2_budget(&cfg, 4, 32, &b);
    double budget = (double)(b.params_bytes + b.grads_bytes + b.optimizer_bytes + b.activations_bytes + b.logits_bytes);
    double peak = (double)st.requested_bytes[0].peak;
    print_message("budget %.0f bytes, measured peak requested %.0f bytes (ratio %.3f)\n", budget, peak, peak / budget);
    assert_true(peak > 0.85 * budget && peak < 1.25 * budget);
    pl_gpt2_destroy(m);
}

/* ---- checkpoints ---- */

static void tmpname(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/plateau-test-ckpt-%d-%s.bin", (int)getpid(), tag);
}

static void test_model_checkpoint_round_trip(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny();
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    pl_gpt2_t *a = pl_gpt2_create(e->alloc, &cfg, 1), *b = pl_gpt2_create(e->alloc, &cfg, 2);
    for (int s = 0; s < 3; s++) train_step(e, a, 2, 16, &opt);
    char path[128], err[512];
    tmpname(path, sizeof path, "rt");
    assert_int_equal(pl_gpt2_save(a, path, err, sizeof err), 0);
    assert_int_equal(pl_gpt2_load(b, path, err, sizeof err), 0);
    assert_int_equal(pl_gpt2_step(b), 3);
    for (int i = 0; i < pl_gpt2_num_param_tensors(a); i++)
        assert_memory_equal(pl_gpt2_param(a, i)->f, pl_gpt2_param(b, i)->f, pl_gpt2_param(a, i)->bytes);
    /* same batch, same state: the next step gives bit-identical losses and parameters (moments restored too) */
    uint64_t r = e->data.rng;
    float la = train_step(e, a, 2, 16, &opt);
    e->data.rng = r;
    float lb = train_step(e, b, 2, 16, &opt);
    assert_true(la == lb);
    for (int i = 0; i < pl_gpt2_num_param_tensors(a); i++)
        assert_memory_equal(pl_gpt2_param(a, i)->f, pl_gpt2_param(b, i)->f, pl_gpt2_param(a, i)->bytes);
    unlink(path);
    pl_gpt2_destroy(a);
    pl_gpt2_destroy(b);
}

static void test_model_checkpoint_mismatch_is_a_clear_error(void **state) {
    env_t *e = *state;
    pl_gpt2_config_t cfg = tiny(), other = tiny();
    other.n_layer = 3;
    other.n_embd = 64;
    pl_gpt2_t *a = pl_gpt2_create(e->alloc, &cfg, 1), *b = pl_gpt2_create(e->alloc, &other, 1);
    char path[128], err[512];
    tmpname(path, sizeof path, "mm");
    assert_int_equal(pl_gpt2_save(a, path, err, sizeof err), 0);
    float before = pl_gpt2_param(b, 0)->f[0];
    assert_int_equal(pl_gpt2_load(b, path, err, sizeof err), -EINVAL);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "layers 2 in file, 3 in model"));
    assert_non_null(strstr(err, "channels 32 in file, 64 in model"));
    assert_true(pl_gpt2_param(b, 0)->f[0] == before);
    unlink(path);
    pl_gpt2_destroy(b);

    /* not a checkpoint */
    tmpname(path, sizeof path, "junk");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("this is not a checkpoint, just some text long enough", f);
    fclose(f);
    assert_int_equal(pl_gpt2_load(a, path, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a plateau-train checkpoint"));
    /* truncated: same config, cut in the middle; the model must stay unchanged */
    assert_int_equal(pl_gpt2_save(a, path, err, sizeof err), 0);
    assert_int_equal(truncate(path, 4096), 0);
    pl_gpt2_param(a, 0)->f[0] = 123.0f;
    assert_int_equal(pl_gpt2_load(a, path, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "wrong size"));
    assert_true(pl_gpt2_param(a, 0)->f[0] == 123.0f);
    /* missing file */
    unlink(path);
    assert_int_equal(pl_gpt2_load(a, path, err, sizeof err), -EIO);
    pl_gpt2_destroy(a);
}

static void test_model_synthetic_vocab(void **state) {
    env_t *e = *state;
    pl_data_t d;
    assert_int_equal(pl_data_open_synthetic(&d, 1000, 4096, 3), 0);
    for (size_t i = 0; i < d.n_tokens; i++) assert_true(d.tokens[i] >= 0 && d.tokens[i] < 1000);
    pl_gpt2_config_t cfg = {.n_layer = 1, .n_head = 2, .n_embd = 16, .vocab = 1000, .max_seq = 8};
    pl_gpt2_t *m = pl_gpt2_create(e->alloc, &cfg, 5);
    int in[2 * 8], tg[2 * 8];
    pl_data_batch(&d, false, 2, 8, in, tg);
    float l = pl_gpt2_forward(m, in, tg, 2, 8, false);
    assert_true(fabsf(l - logf(1000.0f)) < 0.5f); /* near-uniform at init */
    pl_gpt2_destroy(m);
    pl_data_close(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_parameter_layout),
        cmocka_unit_test(test_model_gradient_matches_finite_differences),
        cmocka_unit_test(test_model_loss_falls_on_builtin_corpus),
        cmocka_unit_test(test_model_default_plateaus),
        cmocka_unit_test(test_model_variable_seq_plateaus),
        cmocka_unit_test(test_model_leak_graph),
        cmocka_unit_test(test_model_leak_outputs),
        cmocka_unit_test(test_model_leak_stats),
        cmocka_unit_test(test_model_leak_cache),
        cmocka_unit_test(test_model_leak_rate),
        cmocka_unit_test(test_model_leak_outputs_is_logits_sized),
        cmocka_unit_test(test_model_eval_spike_returns),
        cmocka_unit_test(test_model_budget_matches_peak),
        cmocka_unit_test(test_model_checkpoint_round_trip),
        cmocka_unit_test(test_model_checkpoint_mismatch_is_a_clear_error),
        cmocka_unit_test(test_model_synthetic_vocab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
