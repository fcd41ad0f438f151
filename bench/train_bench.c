/* train_bench: what per-op allocation through plateau costs the training engine.
 *
 * Runs the same GPT-2 training step two ways with the same kernels, the same initial parameters and the same
 * batches: (1) the engine (training/model.c), every tensor allocated per op and freed through the plateau caching
 * allocator on the sim backend; (2) a reference loop written here in the style of llm.c's train_gpt2.c, which
 * mallocs every parameter, gradient, optimizer and activation buffer once up front and only memsets per step.
 * Reports tokens/s of both (R x N timed steps, interleaved step by step so machine noise hits both) and the
 * allocator's share of the engine's step time: one step's exact pl_alloc_malloc/pl_alloc_free sequence is
 * recorded through the allocator's event hook and replayed on a warm allocator, timed, divided by the step time.
 * Checks that both loops compute the same loss (they share kernels and inputs). Target: engine >= 0.9x reference.
 * The engine runs its ops through the CPU kernel table (training/ops.h: one indirect call per op); the reference
 * calls kernels.c directly, so the ratio also bounds what the table costs.
 *
 * usage: train_bench [steps (10)] [rounds (3)]: R x N timed step pairs after 2 warmup steps.
 * Config: 4 layers, 4 heads, 256 channels, vocab 256, batch 4, seq 64.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <plateau/alloc.h>

#include "check.h"
#include "data.h"
#include "kernels.h"
#include "model.h"

enum { L = 4, NH = 4, C = 256, V = 256, B = 4, T = 64 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *xcalloc(size_t n) {
    float *p = calloc(n, sizeof(float));
    PL_CHECK(p != NULL);
    return p;
}

/* ---- the reference: everything allocated once (llm.c style) ---- */

typedef struct ref_layer {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *preatt, *att, *atty, *attproj, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch,
        *fch_gelu, *fcproj, *res3;
} ref_layer_t;

typedef struct ref {
    int n_ptensors;
    float *params, *grads, *m, *v; /* flat, same order as the engine's parameter tensors */
    float *p[4 + 12 * L], *g[4 + 12 * L];
    size_t pn[4 + 12 * L];
    bool is_matrix[4 + 12 * L];
    size_t n_params;
    int *inputs, *targets;
    float *encoded, *lnf, *lnf_mean, *lnf_rstd, *logits, *probs, *losses;
    ref_layer_t layer[L];
    /* gradient scratch, reused every layer and zeroed every step */
    float *dlogits, *dlosses, *dlnf, *dres_a, *dres_b, *dres2, *dproj, *dfch_gelu, *dfch, *dln, *datty, *dqkv, *dpreatt,
        *datt;
    int step;
} ref_t;

static void ref_init(ref_t *r, pl_gpt2_t *model) {
    memset(r, 0, sizeof *r);
    r->n_ptensors = pl_gpt2_num_param_tensors(model);
    for (int i = 0; i < r->n_ptensors; i++) {
        r->pn[i] = pl_gpt2_param(model, i)->n;
        r->is_matrix[i] = pl_gpt2_param(model, i)->shape[1] != 0;
        r->n_params += r->pn[i];
    }
    r->params = xcalloc(r->n_params);
    r->grads = xcalloc(r->n_params);
    r->m = xcalloc(r->n_params);
    r->v = xcalloc(r->n_params);
    size_t off = 0;
    for (int i = 0; i < r->n_ptensors; i++) { /* identical initial parameters */
        r->p[i] = r->params + off;
        r->g[i] = r->grads + off;
        memcpy(r->p[i], pl_gpt2_param(model, i)->f, r->pn[i] * sizeof(float));
        off += r->pn[i];
    }
    const size_t BT = (size_t)B * T, BTC = BT * C, ATT = (size_t)B * NH * T * T;
    r->inputs = calloc(BT, sizeof(int));
    r->targets = calloc(BT, sizeof(int));
    PL_CHECK(r->inputs && r->targets);
    r->encoded = xcalloc(BTC);
    for (int l = 0; l < L; l++) {
        ref_layer_t *a = &r->layer[l];
        a->ln1 = xcalloc(BTC), a->ln1_mean = xcalloc(BT), a->ln1_rstd = xcalloc(BT), a->qkv = xcalloc(3 * BTC);
        a->preatt = xcalloc(ATT), a->att = xcalloc(ATT), a->atty = xcalloc(BTC), a->attproj = xcalloc(BTC);
        a->res2 = xcalloc(BTC), a->ln2 = xcalloc(BTC), a->ln2_mean = xcalloc(BT), a->ln2_rstd = xcalloc(BT);
        a->fch = xcalloc(4 * BTC), a->fch_gelu = xcalloc(4 * BTC), a->fcproj = xcalloc(BTC), a->res3 = xcalloc(BTC);
    }
    r->lnf = xcalloc(BTC), r->lnf_mean = xcalloc(BT), r->lnf_rstd = xcalloc(BT);
    r->logits = xcalloc(BT * V), r->probs = xcalloc(BT * V), r->losses = xcalloc(BT);
    r->dlogits = xcalloc(BT * V), r->dlosses = xcalloc(BT), r->dlnf = xcalloc(BTC), r->dres_a = xcalloc(BTC);
    r->dres_b = xcalloc(BTC), r->dres2 = xcalloc(BTC), r->dproj = xcalloc(BTC), r->dfch_gelu = xcalloc(4 * BTC);
    r->dfch = xcalloc(4 * BTC), r->dln = xcalloc(BTC), r->datty = xcalloc(BTC), r->dqkv = xcalloc(3 * BTC);
    r->dpreatt = xcalloc(ATT), r->datt = xcalloc(ATT);
}

#define RP(l, k) (r->p[2 + 12 * (l) + (k)])
#define RG(l, k) (r->g[2 + 12 * (l) + (k)])

static float ref_step(ref_t *r, const int *inputs, const int *targets, const pl_adamw_config_t *opt) {
    const size_t BT = (size_t)B * T, BTC = BT * C;
    memcpy(r->inputs, inputs, BT * sizeof(int));
    memcpy(r->targets, targets, BT * sizeof(int));
    /* forward */
    pl_kernels_encoder_forward(r->encoded, r->inputs, r->p[0], r->p[1], B, T, C);
    const float *residual = r->encoded;
    for (int l = 0; l < L; l++) {
        ref_layer_t *a = &r->layer[l];
        pl_kernels_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, residual, RP(l, 0), RP(l, 1), B, T, C);
        pl_kernels_matmul_forward(a->qkv, a->ln1, RP(l, 2), RP(l, 3), B, T, C, 3 * C);
        pl_kernels_attention_forward(a->atty, a->preatt, a->att, a->qkv, B, T, C, NH);
        pl_kernels_matmul_forward(a->attproj, a->atty, RP(l, 4), RP(l, 5), B, T, C, C);
        pl_kernels_residual_forward(a->res2, residual, a->attproj, BTC);
        pl_kernels_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, RP(l, 6), RP(l, 7), B, T, C);
        pl_kernels_matmul_forward(a->fch, a->ln2, RP(l, 8), RP(l, 9), B, T, C, 4 * C);
        pl_kernels_gelu_forward(a->fch_gelu, a->fch, 4 * BTC);
        pl_kernels_matmul_forward(a->fcproj, a->fch_gelu, RP(l, 10), RP(l, 11), B, T, 4 * C, C);
        pl_kernels_residual_forward(a->res3, a->res2, a->fcproj, BTC);
        residual = a->res3;
    }
    pl_kernels_layernorm_forward(r->lnf, r->lnf_mean, r->lnf_rstd, residual, r->p[2 + 12 * L], r->p[3 + 12 * L], B, T,
                                 C);
    pl_kernels_matmul_forward(r->logits, r->lnf, r->p[0], NULL, B, T, C, V);
    pl_kernels_crossentropy_forward(r->probs, r->losses, r->logits, r->targets, B, T, V);
    double sum = 0;
    for (size_t i = 0; i < BT; i++) sum += r->losses[i];
    /* backward: zero the parameter grads and the gradient scratch (what the engine's zero-filled allocations do) */
    memset(r->grads, 0, r->n_params * sizeof(float));
    for (size_t i = 0; i < BT; i++) r->dlosses[i] = 1.0f / (float)BT;
    memset(r->dlogits, 0, BT * V * sizeof(float));
    pl_kernels_crossentropy_backward(r->dlogits, r->dlosses, r->probs, r->targets, B, T, V);
    memset(r->dlnf, 0, BTC * sizeof(float));
    pl_kernels_matmul_backward(r->dlnf, r->g[0], NULL, r->dlogits, r->lnf, r->p[0], B, T, C, V);
    float *dres = r->dres_a, *dresidual = r->dres_b;
    memset(dres, 0, BTC * sizeof(float));
    pl_kernels_layernorm_backward(dres, r->g[2 + 12 * L], r->g[3 + 12 * L], r->dlnf, residual, r->p[2 + 12 * L],
                                  r->lnf_mean, r->lnf_rstd, B, T, C);
    for (int l = L - 1; l >= 0; l--) {
        ref_layer_t *a = &r->layer[l];
        const float *res_in = l == 0 ? r->encoded : r->layer[l - 1].res3;
        memset(r->dres2, 0, BTC * sizeof(float));
        memset(r->dproj, 0, BTC * sizeof(float));
        pl_kernels_residual_backward(r->dres2, r->dproj, dres, BTC);
        memset(r->dfch_gelu, 0, 4 * BTC * sizeof(float));
        pl_kernels_matmul_backward(r->dfch_gelu, RG(l, 10), RG(l, 11), r->dproj, a->fch_gelu, RP(l, 10), B, T, 4 * C,
                                   C);
        memset(r->dfch, 0, 4 * BTC * sizeof(float));
        pl_kernels_gelu_backward(r->dfch, a->fch, r->dfch_gelu, 4 * BTC);
        memset(r->dln, 0, BTC * sizeof(float));
        pl_kernels_matmul_backward(r->dln, RG(l, 8), RG(l, 9), r->dfch, a->ln2, RP(l, 8), B, T, C, 4 * C);
        pl_kernels_layernorm_backward(r->dres2, RG(l, 6), RG(l, 7), r->dln, a->res2, RP(l, 6), a->ln2_mean, a->ln2_rstd,
                                      B, T, C);
        memset(dresidual, 0, BTC * sizeof(float));
        memset(r->dproj, 0, BTC * sizeof(float));
        pl_kernels_residual_backward(dresidual, r->dproj, r->dres2, BTC);
        memset(r->datty, 0, BTC * sizeof(float));
        pl_kernels_matmul_backward(r->datty, RG(l, 4), RG(l, 5), r->dproj, a->atty, RP(l, 4), B, T, C, C);
        memset(r->dqkv, 0, 3 * BTC * sizeof(float));
        pl_kernels_attention_backward(r->dqkv, r->dpreatt, r->datt, r->datty, a->qkv, a->att, B, T, C, NH);
        memset(r->dln, 0, BTC * sizeof(float));
        pl_kernels_matmul_backward(r->dln, RG(l, 2), RG(l, 3), r->dqkv, a->ln1, RP(l, 2), B, T, C, 3 * C);
        pl_kernels_layernorm_backward(dresidual, RG(l, 0), RG(l, 1), r->dln, res_in, RP(l, 0), a->ln1_mean, a->ln1_rstd,
                                      B, T, C);
        float *tmp = dres;
        dres = dresidual;
        dresidual = tmp;
    }
    pl_kernels_encoder_backward(r->g[0], r->g[1], dres, r->inputs, B, T, C);
    /* update: global-norm clipping then AdamW, per parameter tensor like the engine */
    double sumsq = 0;
    for (int i = 0; i < r->n_ptensors; i++) sumsq += pl_kernels_sumsq(r->g[i], r->pn[i]);
    float norm = (float)sqrt(sumsq);
    float scale = (opt->grad_clip > 0 && norm > opt->grad_clip) ? opt->grad_clip / norm : 1.0f;
    r->step++;
    size_t off = 0;
    for (int i = 0; i < r->n_ptensors; i++) {
        if (scale != 1.0f) pl_kernels_scale(r->g[i], r->pn[i], scale);
        pl_kernels_adamw_update(r->p[i], r->g[i], r->m + off, r->v + off, r->pn[i], opt->lr, opt->beta1, opt->beta2,
                                opt->eps, r->is_matrix[i] ? opt->weight_decay : 0.0f, r->step);
        off += r->pn[i];
    }
    return (float)(sum / (double)BT);
}

/* ---- recording one engine step's allocator calls, for the replay ---- */

typedef struct rec_ev {
    int is_alloc;
    size_t size;  /* requested bytes (alloc) */
    int slot;     /* which live pointer this event creates / frees */
} rec_ev_t;

typedef struct recorder {
    rec_ev_t ev[8192];
    uintptr_t live_addr[8192];
    int n_ev, n_slots;
} recorder_t;

static void rec_hook(void *ctx, const pl_alloc_event_t *e) {
    recorder_t *r = ctx;
    if (r->n_ev >= 8192) return;
    if (e->kind == PL_ALLOC_EV_ALLOC) {
        int s = r->n_slots < 8192 ? r->n_slots++ : 0;
        r->live_addr[s] = e->addr;
        r->ev[r->n_ev++] = (rec_ev_t){1, e->requested_bytes, s};
    } else if (e->kind == PL_ALLOC_EV_FREE) {
        for (int s = r->n_slots - 1; s >= 0; s--) {
            if (r->live_addr[s] == e->addr) {
                r->live_addr[s] = 0;
                r->ev[r->n_ev++] = (rec_ev_t){0, 0, s};
                break;
            }
        }
    }
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 10, rounds = argc > 2 ? atoi(argv[2]) : 3;
    PL_CHECK(steps > 0 && rounds > 0);
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    pl_alloc_config_t acfg;
    pl_alloc_config_default(&acfg);
    pl_backend_t *backend;
    pl_alloc_t *alloc;
    char err[256];
    PL_CHECK(pl_backend_sim_create(&so, &backend) == 0);
    PL_CHECK(pl_alloc_create(backend, &acfg, &alloc, err, sizeof err) == 0);
    pl_gpt2_config_t cfg = {.n_layer = L, .n_head = NH, .n_embd = C, .vocab = V, .max_seq = T};
    pl_gpt2_t *model = pl_gpt2_create(alloc, &cfg, 1337);
    PL_CHECK(model != NULL);
    ref_t ref;
    ref_init(&ref, model);
    pl_adamw_config_t opt;
    pl_adamw_config_default(&opt);
    pl_data_t data;
    PL_CHECK(pl_data_open_text(&data, NULL, 1) == 0);
    const int total = 2 + rounds * steps;
    int *inputs = malloc(sizeof(int) * B * T * (size_t)total), *targets = malloc(sizeof(int) * B * T * (size_t)total);
    PL_CHECK(inputs && targets);
    for (int s = 0; s < total; s++) pl_data_batch(&data, false, B, T, inputs + s * B * T, targets + s * B * T);

    /* two warmup steps each (the engine's optimizer state and allocator cache warm up), same batches */
    for (int s = 0; s < 2; s++) {
        float le = pl_gpt2_forward(model, inputs + s * B * T, targets + s * B * T, B, T, true);
        pl_gpt2_backward(model);
        pl_gpt2_update(model, &opt);
        pl_gpt2_zero_grad(model);
        float lr = ref_step(&ref, inputs + s * B * T, targets + s * B * T, &opt);
        printf("warmup step %d: loss engine %.6f, reference %.6f\n", s + 1, le, lr);
        PL_CHECK(fabsf(le - lr) < 1e-4f * fabsf(lr) + 1e-5f);
    }
    /* timed steps, interleaved one by one (who goes first alternates) so machine noise hits both loops alike;
     * the per-pair ratio's median is the headline, totals give tokens/s */
    const int n_timed = rounds * steps;
    double *ratio = malloc(sizeof(double) * (size_t)n_timed), sum_eng = 0, sum_ref = 0;
    PL_CHECK(ratio != NULL);
    float last_e = 0, last_r = 0;
    for (int k = 0; k < n_timed; k++) {
        int s = 2 + k;
        double t_ref = 0, t_eng = 0;
        for (int which = 0; which < 2; which++) {
            bool eng = (which == 0) == (k % 2 == 1);
            double t0 = now_s();
            if (eng) {
                last_e = pl_gpt2_forward(model, inputs + s * B * T, targets + s * B * T, B, T, true);
                pl_gpt2_backward(model);
                pl_gpt2_update(model, &opt);
                pl_gpt2_zero_grad(model);
                t_eng = now_s() - t0;
            } else {
                last_r = ref_step(&ref, inputs + s * B * T, targets + s * B * T, &opt);
                t_ref = now_s() - t0;
            }
        }
        sum_eng += t_eng;
        sum_ref += t_ref;
        ratio[k] = t_ref / t_eng; /* engine tokens/s over reference tokens/s */
    }
    for (int i = 1; i < n_timed; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && ratio[j] < ratio[j - 1]; j--) {
            double tmp = ratio[j];
            ratio[j] = ratio[j - 1];
            ratio[j - 1] = tmp;
        }
    double median = n_timed % 2 ? ratio[n_timed / 2] : 0.5 * (ratio[n_timed / 2 - 1] + ratio[n_timed / 2]);
    printf("final loss: engine %.6f, reference %.6f\n", last_e, last_r);

    /* record one step's allocator calls and replay them on the warm allocator */
    static recorder_t rec;
    pl_alloc_set_hook(alloc, rec_hook, &rec);
    pl_gpt2_forward(model, inputs, targets, B, T, true);
    pl_gpt2_backward(model);
    pl_gpt2_update(model, &opt);
    pl_gpt2_zero_grad(model);
    pl_alloc_set_hook(alloc, NULL, NULL);
    void **slots = calloc((size_t)rec.n_slots + 1, sizeof(void *));
    PL_CHECK(slots != NULL);
    const int reps = 200;
    double t0 = now_s();
    for (int k = 0; k < reps; k++) {
        for (int i = 0; i < rec.n_ev; i++) {
            if (rec.ev[i].is_alloc)
                slots[rec.ev[i].slot] = pl_alloc_malloc(alloc, rec.ev[i].size, 0);
            else
                pl_alloc_free(alloc, slots[rec.ev[i].slot]);
        }
    }
    double t_alloc = (now_s() - t0) / reps;
    int n_alloc = 0;
    for (int i = 0; i < rec.n_ev; i++) n_alloc += rec.ev[i].is_alloc;

    const double tokens = (double)B * T * n_timed;
    double tps_eng = tokens / sum_eng, tps_ref = tokens / sum_ref, step_eng = sum_eng / n_timed;
    printf("config: %d layers, %d heads, %d channels, vocab %d, batch %d, seq %d, %zu params\n", L, NH, C, V, B, T,
           ref.n_params);
    printf("reference (all memory up front): %8.0f tokens/s  (%.1f ms/step)\n", tps_ref, 1e3 * sum_ref / n_timed);
    printf("engine (per-op plateau allocs):  %8.0f tokens/s  (%.1f ms/step)\n", tps_eng, 1e3 * step_eng);
    printf("ratio engine/reference: %.3f over %d interleaved step pairs (median of per-pair ratios %.3f; "
           "range %.3f..%.3f)  target >= 0.9\n",
           tps_eng / tps_ref, n_timed, median, ratio[0], ratio[n_timed - 1]);
    printf("allocator: %d mallocs + %d frees per step, %.1f us per step = %.2f%% of the engine's step time\n",
           n_alloc, rec.n_ev - n_alloc, 1e6 * t_alloc, 100.0 * t_alloc / step_eng);
    free(slots);
    free(ratio);
    free(inputs);
    free(targets);
    pl_data_close(&data);
    pl_gpt2_destroy(model);
    pl_alloc_destroy(alloc);
    pl_backend_destroy(backend);
    return median >= 0.9 ? 0 : 3;
}
