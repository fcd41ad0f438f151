/* GPT-2 model: parameters, the forward tape, backward in reverse with per-op frees, AdamW, checkpoints and the
 * leak scenarios. Life cycle and memory rules are in model.h; the kernels (and their shapes) in kernels_impl.h.
 * Every op and every access to tensor memory goes through the kernel table m->ops (ops.h): tensor data may be
 * device memory, so this file never dereferences it (host copies: initial parameters, losses, checkpoints).
 *
 * Invariants: between pl_gpt2_forward(training) and pl_gpt2_backward the tape holds exactly the tensors backward
 * needs; after backward the tape is empty (its tensors freed, or moved to `leaked` by a leak scenario). Every
 * tensor the model ever allocates is reachable from params, grads, moments, stats, tape or leaked, so destroy
 * frees everything.
 */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* One transformer block's parameters (C channels), in checkpoint order. */
typedef struct layer_params {
    pl_tensor_t *ln1w, *ln1b;         /* (C), (C) */
    pl_tensor_t *qkvw, *qkvb;         /* (3C,C), (3C) */
    pl_tensor_t *attprojw, *attprojb; /* (C,C), (C) */
    pl_tensor_t *ln2w, *ln2b;         /* (C), (C) */
    pl_tensor_t *fcw, *fcb;           /* (4C,C), (4C) */
    pl_tensor_t *fcprojw, *fcprojb;   /* (C,4C), (C) */
} layer_params_t;

typedef pl_tensor_t **param_slot_t; /* where one parameter's tensor pointer lives */

/* The parameter tensors by name (llm.c's ParameterTensors), one tensor per weight or bias as a framework's
 * nn.Module holds them. The same struct holds the gradients and the AdamW moments (fields NULL until created).
 * slot[i] is the field of the i-th tensor in checkpoint order (llm.c's ptrs[]): what loops over every parameter
 * walk; param_layout sets it up. */
typedef struct param_tensors {
    pl_tensor_t *wte;      /* (V,C) token embedding, also the tied output head */
    pl_tensor_t *wpe;      /* (maxT,C) position embedding */
    layer_params_t *layer; /* [L] */
    pl_tensor_t *lnfw, *lnfb; /* (C), (C) final LayerNorm */
    param_slot_t *slot;    /* [4 + 12L] */
} param_tensors_t;

typedef enum param_init { INIT_ZERO, INIT_ONE, INIT_NORMAL, INIT_NORMAL_RESID } param_init_t;

typedef struct param_spec {
    const char *name;
    int rows, cols;    /* cols 0: a vector */
    param_init_t init; /* GPT-2: matrices N(0, 0.02), residual projections scaled by 1/sqrt(2L); LayerNorm
                          weights 1; biases 0 */
} param_spec_t;

typedef struct layer_tape {
    pl_tensor_t *ln1, *ln1_mean, *ln1_rstd; /* (B,T,C), (B,T), (B,T) */
    pl_tensor_t *qkv;                       /* (B,T,3C) */
    pl_tensor_t *att;                       /* (B,NH,T,T) softmax probabilities */
    pl_tensor_t *atty;                      /* (B,T,C) attention output before projection */
    pl_tensor_t *res2;                      /* (B,T,C) residual after attention */
    pl_tensor_t *ln2, *ln2_mean, *ln2_rstd; /* (B,T,C), (B,T), (B,T) */
    pl_tensor_t *fch, *fch_gelu;            /* (B,T,4C) */
    pl_tensor_t *res3;                      /* (B,T,C) residual after the MLP: the block's output */
} layer_tape_t;

struct pl_gpt2 {
    pl_gpt2_config_t cfg;
    pl_alloc_t *alloc;
    const pl_train_ops_t *ops; /* where tensor data lives and how ops run on it (ops.h) */
    pl_tensor_t *scratch;     /* ops->scratch_bytes of device scratch (cuda only), NULL on cpu */
    float *host_losses;       /* host copy of losses (B*T floats), grown as needed */
    size_t host_losses_n;
    int n_ptensors;           /* 4 + 12*L */
    param_tensors_t params;
    param_tensors_t grads;    /* NULL until backward reaches them */
    param_tensors_t adam_m;   /* NULL until the first update */
    param_tensors_t adam_v;
    pl_tensor_t **stats;      /* [L] running channel means of ln1 output, (C) */
    int step;                 /* optimizer steps done */
    /* tape of the last training forward */
    int B, T;
    bool taped;
    bool leak_graph_now;      /* this step's graph is retained */
    pl_tensor_t *inputs, *targets; /* (B,T) int32 */
    pl_tensor_t *encoded;          /* (B,T,C) */
    layer_tape_t *layers;          /* [L] */
    pl_tensor_t *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C), (B,T), (B,T) */
    pl_tensor_t *probs;            /* (B,T,V) */
    pl_tensor_t *losses;           /* (B,T) */
    /* leak scenarios */
    pl_leak_config_t leak;
    pl_tensor_list_t leaked;
};

/* ---- fail-fast allocation (programs may fail fast; a framework raises OutOfMemoryError) ---- */

static pl_tensor_t *tnew(pl_gpt2_t *m, const char *name, pl_dtype_t dt, int d0, int d1, int d2, int d3, bool zero) {
    pl_tensor_t *t = pl_tensor_new(m->alloc, name, dt, d0, d1, d2, d3);
    if (!t) {
        fprintf(stderr, "plateau-train: out of device memory allocating %s (%d,%d,%d,%d): %s\n", name, d0, d1, d2,
                d3, pl_alloc_last_error());
        exit(2);
    }
    if (zero) m->ops->zero(t->p, t->bytes);
    return t;
}
#define NEW(name, ...) tnew(m, name, PL_F32, __VA_ARGS__, false)
#define ZEROS(name, ...) tnew(m, name, PL_F32, __VA_ARGS__, true)

static void keep(pl_gpt2_t *m, pl_tensor_t *t) {
    if (pl_tensor_list_push(&m->leaked, t) != 0) {
        fprintf(stderr, "plateau-train: out of host memory\n");
        exit(2);
    }
}

/* Drop the tape's reference to a saved activation: freed, unless this step's graph is retained (leak graph). */
static void release(pl_gpt2_t *m, pl_tensor_t **t) {
    if (!*t) return;
    if (m->leak_graph_now)
        keep(m, *t);
    else
        pl_tensor_free(*t);
    *t = NULL;
}

/* After a download (a synchronising point): a device failure of any op so far ends the program, as a framework
 * raises on a CUDA error. The CPU table never fails. */
static void check_device(const pl_gpt2_t *m, const char *where) {
    const char *e = m->ops->last_error();
    if (e) {
        fprintf(stderr, "plateau-train: %s device error during %s: %s\n", m->ops->name, where, e);
        exit(2);
    }
}

static void drop(pl_tensor_t **t) {
    pl_tensor_free(*t);
    *t = NULL;
}

/* ---- config ---- */

void pl_gpt2_config_default(pl_gpt2_config_t *cfg) {
    *cfg = (pl_gpt2_config_t){.n_layer = 4, .n_head = 4, .n_embd = 128, .vocab = 256, .max_seq = 64};
}

void pl_adamw_config_default(pl_adamw_config_t *cfg) {
    *cfg = (pl_adamw_config_t){
        .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
}

int pl_gpt2_config_check(const pl_gpt2_config_t *cfg, char *err, size_t err_len) {
    const char *why = NULL;
    if (cfg->n_layer < 1 || cfg->n_layer > 256) why = "layers must be in 1..256";
    else if (cfg->n_head < 1 || cfg->n_embd < 1 || cfg->n_embd > 16384) why = "channels must be in 1..16384";
    else if (cfg->n_embd % cfg->n_head != 0) why = "heads must divide channels";
    else if (cfg->vocab < 2 || cfg->vocab > (1 << 24)) why = "vocab must be in 2..16777216";
    else if (cfg->max_seq < 1 || cfg->max_seq > 65536) why = "sequence length must be in 1..65536";
    if (why) {
        snprintf(err, err_len, "%s (layers %d, heads %d, channels %d, vocab %d, seq %d)", why, cfg->n_layer,
                 cfg->n_head, cfg->n_embd, cfg->vocab, cfg->max_seq);
        return -EINVAL;
    }
    return 0;
}

/* Every parameter in checkpoint order: wte, wpe, per layer the 12 of layer_params_t, lnfw, lnfb (llm.c's
 * fill_in_parameter_sizes and ptrs[] in one walk). Each output is optional: slot[i] gets the field of p that holds
 * the i-th tensor, spec[i] its name, shape and initialisation, *n_elems the total element count. Returns the
 * number of tensors, 4 + 12L. */
static int param_layout(const pl_gpt2_config_t *cfg, param_tensors_t *p, param_slot_t *slot, param_spec_t *spec,
                        size_t *n_elems) {
    const int C = cfg->n_embd;
    int n = 0;
    size_t elems = 0;
#define PARAM(field, nm, r, c, how)                                                                    \
    do {                                                                                               \
        if (slot) slot[n] = &p->field;                                                                 \
        if (spec) spec[n] = (param_spec_t){nm, r, c, how};                                             \
        elems += (size_t)(r) * ((c) != 0 ? (size_t)(c) : 1);                                           \
        n++;                                                                                           \
    } while (0)
    PARAM(wte, "wte", cfg->vocab, C, INIT_NORMAL);
    PARAM(wpe, "wpe", cfg->max_seq, C, INIT_NORMAL);
    for (int l = 0; l < cfg->n_layer; l++) {
        PARAM(layer[l].ln1w, "ln1.weight", C, 0, INIT_ONE);
        PARAM(layer[l].ln1b, "ln1.bias", C, 0, INIT_ZERO);
        PARAM(layer[l].qkvw, "attn.qkv.weight", 3 * C, C, INIT_NORMAL);
        PARAM(layer[l].qkvb, "attn.qkv.bias", 3 * C, 0, INIT_ZERO);
        PARAM(layer[l].attprojw, "attn.proj.weight", C, C, INIT_NORMAL_RESID);
        PARAM(layer[l].attprojb, "attn.proj.bias", C, 0, INIT_ZERO);
        PARAM(layer[l].ln2w, "ln2.weight", C, 0, INIT_ONE);
        PARAM(layer[l].ln2b, "ln2.bias", C, 0, INIT_ZERO);
        PARAM(layer[l].fcw, "mlp.fc.weight", 4 * C, C, INIT_NORMAL);
        PARAM(layer[l].fcb, "mlp.fc.bias", 4 * C, 0, INIT_ZERO);
        PARAM(layer[l].fcprojw, "mlp.proj.weight", C, 4 * C, INIT_NORMAL_RESID);
        PARAM(layer[l].fcprojb, "mlp.proj.bias", C, 0, INIT_ZERO);
    }
    PARAM(lnfw, "lnf.weight", C, 0, INIT_ONE);
    PARAM(lnfb, "lnf.bias", C, 0, INIT_ZERO);
#undef PARAM
    if (n_elems) *n_elems = elems;
    return n;
}

static size_t count_params(const pl_gpt2_config_t *cfg) {
    size_t n = 0;
    param_layout(cfg, NULL, NULL, NULL, &n);
    return n;
}

/* The layer array and slot table of an empty parameter set; -ENOMEM. */
static int param_tensors_init(param_tensors_t *p, const pl_gpt2_config_t *cfg) {
    p->layer = calloc((size_t)cfg->n_layer, sizeof *p->layer);
    p->slot = calloc((size_t)param_layout(cfg, NULL, NULL, NULL, NULL), sizeof *p->slot);
    if (!p->layer || !p->slot) {
        free(p->layer);
        free(p->slot);
        *p = (param_tensors_t){0};
        return -ENOMEM;
    }
    param_layout(cfg, p, p->slot, NULL, NULL);
    return 0;
}

/* The i-th tensor of a set (checkpoint order); NULL when not created. */
static pl_tensor_t *param_at(const param_tensors_t *p, int i) { return *p->slot[i]; }

void pl_gpt2_budget(const pl_gpt2_config_t *cfg, int B, int T, pl_gpt2_budget_t *out) {
    const size_t C = (size_t)cfg->n_embd, BT = (size_t)B * T, L = (size_t)cfg->n_layer;
    const size_t P = count_params(cfg);
    out->n_params = P;
    out->params_bytes = P * 4;
    out->grads_bytes = P * 4;
    out->optimizer_bytes = 2 * P * 4;
    /* per layer saved: ln1, qkv(3), atty, res2, ln2, fch(4), fch_gelu(4), res3 = 16 C per token; 4 mean/rstd;
     * att NH*T*T per sequence. Plus encoded, lnf (C each), lnf mean/rstd, losses, token ids (2) per token,
     * and probs (V per token). */
    size_t per_layer = BT * (16 * C + 4) + (size_t)B * cfg->n_head * T * T;
    out->activations_bytes = 4 * (L * per_layer + BT * (2 * C + 5) + BT * (size_t)cfg->vocab);
    out->logits_bytes = BT * (size_t)cfg->vocab * 4;
}

/* ---- create / destroy ---- */

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static float rng_normal(uint64_t *s) { /* Box-Muller */
    double u1 = ((rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

pl_gpt2_t *pl_gpt2_create(pl_alloc_t *a, const pl_gpt2_config_t *cfg, uint64_t seed) {
    return pl_gpt2_create_on(a, pl_train_ops_cpu(), cfg, seed);
}

pl_gpt2_t *pl_gpt2_create_on(pl_alloc_t *a, const pl_train_ops_t *ops, const pl_gpt2_config_t *cfg, uint64_t seed) {
    char err[128];
    if (!a || !ops || pl_gpt2_config_check(cfg, err, sizeof err) != 0) return NULL;
    pl_gpt2_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cfg = *cfg;
    m->alloc = a;
    m->ops = ops;
    m->n_ptensors = param_layout(cfg, NULL, NULL, NULL, NULL);
    m->stats = calloc((size_t)cfg->n_layer, sizeof *m->stats);
    m->layers = calloc((size_t)cfg->n_layer, sizeof *m->layers);
    param_spec_t *spec = calloc((size_t)m->n_ptensors, sizeof *spec);
    if (param_tensors_init(&m->params, cfg) || param_tensors_init(&m->grads, cfg) ||
        param_tensors_init(&m->adam_m, cfg) || param_tensors_init(&m->adam_v, cfg) || !m->stats || !m->layers ||
        !spec) {
        free(spec);
        pl_gpt2_destroy(m);
        return NULL;
    }
    param_layout(cfg, NULL, NULL, spec, NULL);
    if (ops->scratch_bytes) { /* device scratch of the table (e.g. the cuda sumsq result), persistent */
        m->scratch = pl_tensor_new(a, "ops.scratch", PL_F32, (int)((ops->scratch_bytes + 3) / 4), 0, 0, 0);
        if (!m->scratch) {
            free(spec);
            pl_gpt2_destroy(m);
            return NULL;
        }
        ops->bind_scratch(m->scratch->p, m->scratch->bytes);
    }
    uint64_t rs = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (!rs) rs = 1;
    const float resid_std = 0.02f / sqrtf(2.0f * (float)cfg->n_layer);
    for (int i = 0; i < m->n_ptensors; i++) {
        const param_spec_t *ps = &spec[i];
        pl_tensor_t *t = pl_tensor_new(a, ps->name, PL_F32, ps->rows, ps->cols, 0, 0);
        float *host = t ? malloc(t->bytes) : NULL; /* initialised on the host, then uploaded */
        if (!host) {
            pl_tensor_free(t);
            free(spec);
            pl_gpt2_destroy(m);
            return NULL;
        }
        *m->params.slot[i] = t;
        if (ps->init == INIT_NORMAL || ps->init == INIT_NORMAL_RESID) {
            float std = ps->init == INIT_NORMAL_RESID ? resid_std : 0.02f;
            for (size_t j = 0; j < t->n; j++) host[j] = std * rng_normal(&rs);
        } else {
            for (size_t j = 0; j < t->n; j++) host[j] = ps->init == INIT_ONE ? 1.0f : 0.0f;
        }
        ops->upload(t->p, host, t->bytes);
        free(host);
    }
    free(spec);
    if (ops->last_error()) {
        pl_gpt2_destroy(m);
        return NULL;
    }
    return m;
}

static void tape_clear(pl_gpt2_t *m) {
    drop(&m->inputs);
    drop(&m->targets);
    drop(&m->encoded);
    for (int l = m->cfg.n_layer - 1; l >= 0; l--) { /* reverse order of allocation */
        layer_tape_t *lt = &m->layers[l];
        pl_tensor_t **all[] = {&lt->res3,     &lt->fch_gelu, &lt->fch, &lt->ln2_rstd, &lt->ln2_mean,
                               &lt->ln2,      &lt->res2,     &lt->atty, &lt->att,     &lt->qkv,
                               &lt->ln1_rstd, &lt->ln1_mean, &lt->ln1};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) drop(all[k]);
    }
    drop(&m->lnf);
    drop(&m->lnf_mean);
    drop(&m->lnf_rstd);
    drop(&m->probs);
    drop(&m->losses);
    m->taped = false;
}

void pl_gpt2_destroy(pl_gpt2_t *m) {
    if (!m) return;
    if (m->layers) tape_clear(m);
    pl_tensor_list_clear(&m->leaked);
    for (int l = 0; m->stats && l < m->cfg.n_layer; l++) pl_tensor_free(m->stats[l]);
    param_tensors_t *const sets[] = {&m->adam_v, &m->adam_m, &m->grads, &m->params}; /* per tensor, this order */
    for (int i = m->n_ptensors - 1; i >= 0; i--)
        for (size_t k = 0; k < sizeof sets / sizeof *sets; k++)
            if (sets[k]->slot) pl_tensor_free(param_at(sets[k], i));
    pl_tensor_free(m->scratch);
    free(m->host_losses);
    free(m->layers);
    free(m->stats);
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        free(sets[k]->slot);
        free(sets[k]->layer);
    }
    free(m);
}

void pl_gpt2_set_leak(pl_gpt2_t *m, const pl_leak_config_t *leak) {
    m->leak = *leak;
    if (m->leak.every < 1) m->leak.every = 1;
    if (m->leak.start < 1) m->leak.start = 1;
}

static bool leak_fires(const pl_gpt2_t *m, pl_leak_kind_t kind) {
    int s = m->step + 1; /* the step being computed */
    return m->leak.kind == kind && s >= m->leak.start && (s - m->leak.start) % m->leak.every == 0;
}

/* ---- forward ---- */

#define PRM(field) (m->params.field->f) /* a parameter's data by name: PRM(wte), PRM(layer[l].qkvw) */

/* Per-layer running statistics of the ln1 output (a framework's buffer, e.g. a quantiser's running mean).
 * Normal: one (C) buffer per layer, created at the first training forward, updated in place.
 * Leak stats: a new (C) tensor every forward holding 0.9*old + 0.1*batch, and the old one stays referenced
 * (the module pattern `self.running_min = self.running_min * 0.9 + x * 0.1`). */
static void update_stats(pl_gpt2_t *m, int l, const pl_tensor_t *x, int BT) {
    const int C = m->cfg.n_embd;
    pl_tensor_t *batch_mean = ZEROS("stats.batch_mean", C, 0, 0, 0); /* temporary */
    m->ops->channel_mean(batch_mean->f, x->f, BT, C);
    pl_tensor_t *old = m->stats[l];
    if (!old) {
        m->stats[l] = ZEROS("stats.running_mean", C, 0, 0, 0);
        old = m->stats[l];
    }
    if (leak_fires(m, PL_LEAK_STATS)) {
        pl_tensor_t *fresh = NEW("stats.running_mean", C, 0, 0, 0);
        m->ops->ema(fresh->f, old->f, batch_mean->f, C, 0.9f, 0.1f);
        keep(m, old);
        m->stats[l] = fresh;
    } else {
        m->ops->ema(old->f, old->f, batch_mean->f, C, 0.9f, 0.1f);
    }
    pl_tensor_free(batch_mean);
}

float pl_gpt2_forward(pl_gpt2_t *m, const int *inputs, const int *targets, int B, int T, bool training) {
    const int C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab, L = m->cfg.n_layer;
    const size_t BTC = (size_t)B * T * C;
    if (T > m->cfg.max_seq || T < 1 || B < 1) {
        fprintf(stderr, "plateau-train: sequence length %d outside 1..%d (or batch %d < 1)\n", T, m->cfg.max_seq, B);
        exit(2);
    }
    if (m->taped) tape_clear(m); /* a training forward without backward: drop its graph */
    m->B = B;
    m->T = T;
    m->inputs = tnew(m, "inputs", PL_I32, B, T, 0, 0, false);
    m->targets = tnew(m, "targets", PL_I32, B, T, 0, 0, false);
    m->ops->upload(m->inputs->p, inputs, (size_t)B * T * sizeof(int));
    m->ops->upload(m->targets->p, targets, (size_t)B * T * sizeof(int));

    m->encoded = NEW("encoded", B, T, C, 0);
    m->ops->encoder_forward(m->encoded->f, m->inputs->i, PRM(wte), PRM(wpe), B, T, C);
    if (training && leak_fires(m, PL_LEAK_CACHE)) { /* per-step cache entry, never evicted */
        pl_tensor_t *entry = NEW("cache.embeddings", B, T, C, 0);
        m->ops->copy(entry->p, m->encoded->p, entry->bytes);
        keep(m, entry);
    }

    const pl_tensor_t *residual = m->encoded;
    for (int l = 0; l < L; l++) {
        layer_tape_t *lt = &m->layers[l];
        lt->ln1 = NEW("ln1", B, T, C, 0);
        lt->ln1_mean = NEW("ln1.mean", B, T, 0, 0);
        lt->ln1_rstd = NEW("ln1.rstd", B, T, 0, 0);
        m->ops->layernorm_forward(lt->ln1->f, lt->ln1_mean->f, lt->ln1_rstd->f, residual->f, PRM(layer[l].ln1w),
                                     PRM(layer[l].ln1b), B, T, C);
        if (training) update_stats(m, l, lt->ln1, B * T);
        lt->qkv = NEW("qkv", B, T, 3 * C, 0);
        m->ops->matmul_forward(lt->qkv->f, lt->ln1->f, PRM(layer[l].qkvw), PRM(layer[l].qkvb), B, T, C, 3 * C);
        pl_tensor_t *preatt = NEW("attn.scores", B, NH, T, T); /* temporary */
        lt->att = NEW("attn.probs", B, NH, T, T);
        lt->atty = NEW("attn.out", B, T, C, 0);
        m->ops->attention_forward(lt->atty->f, preatt->f, lt->att->f, lt->qkv->f, B, T, C, NH);
        pl_tensor_free(preatt);
        pl_tensor_t *attproj = NEW("attn.proj", B, T, C, 0); /* consumed by the residual add only */
        m->ops->matmul_forward(attproj->f, lt->atty->f, PRM(layer[l].attprojw), PRM(layer[l].attprojb), B, T, C, C);
        lt->res2 = NEW("res2", B, T, C, 0);
        m->ops->residual_forward(lt->res2->f, residual->f, attproj->f, BTC);
        pl_tensor_free(attproj);
        lt->ln2 = NEW("ln2", B, T, C, 0);
        lt->ln2_mean = NEW("ln2.mean", B, T, 0, 0);
        lt->ln2_rstd = NEW("ln2.rstd", B, T, 0, 0);
        m->ops->layernorm_forward(lt->ln2->f, lt->ln2_mean->f, lt->ln2_rstd->f, lt->res2->f, PRM(layer[l].ln2w),
                                     PRM(layer[l].ln2b), B, T, C);
        lt->fch = NEW("mlp.fc", B, T, 4 * C, 0);
        m->ops->matmul_forward(lt->fch->f, lt->ln2->f, PRM(layer[l].fcw), PRM(layer[l].fcb), B, T, C, 4 * C);
        lt->fch_gelu = NEW("mlp.gelu", B, T, 4 * C, 0);
        m->ops->gelu_forward(lt->fch_gelu->f, lt->fch->f, BTC * 4);
        pl_tensor_t *fcproj = NEW("mlp.proj", B, T, C, 0); /* consumed by the residual add only */
        m->ops->matmul_forward(fcproj->f, lt->fch_gelu->f, PRM(layer[l].fcprojw), PRM(layer[l].fcprojb), B, T, 4 * C, C);
        lt->res3 = NEW("res3", B, T, C, 0);
        m->ops->residual_forward(lt->res3->f, lt->res2->f, fcproj->f, BTC);
        pl_tensor_free(fcproj);
        residual = lt->res3;
    }
    m->lnf = NEW("lnf", B, T, C, 0);
    m->lnf_mean = NEW("lnf.mean", B, T, 0, 0);
    m->lnf_rstd = NEW("lnf.rstd", B, T, 0, 0);
    m->ops->layernorm_forward(m->lnf->f, m->lnf_mean->f, m->lnf_rstd->f, residual->f, PRM(lnfw), PRM(lnfb), B, T,
                                 C);
    pl_tensor_t *logits = NEW("logits", B, T, V, 0); /* (B,T,V): the large-vocabulary tensor */
    m->ops->matmul_forward(logits->f, m->lnf->f, PRM(wte), NULL, B, T, C, V); /* tied head: wte^T */
    m->probs = NEW("probs", B, T, V, 0);
    m->losses = NEW("losses", B, T, 0, 0);
    m->ops->crossentropy_forward(m->probs->f, m->losses->f, logits->f, m->targets->i, B, T, V);
    if (training && leak_fires(m, PL_LEAK_OUTPUTS))
        keep(m, logits); /* outputs.append(logits) */
    else
        pl_tensor_free(logits);
    if (m->host_losses_n < (size_t)B * T) {
        float *h = realloc(m->host_losses, (size_t)B * T * sizeof *h);
        if (!h) {
            fprintf(stderr, "plateau-train: out of host memory\n");
            exit(2);
        }
        m->host_losses = h;
        m->host_losses_n = (size_t)B * T;
    }
    m->ops->download(m->host_losses, m->losses->p, (size_t)B * T * sizeof(float));
    check_device(m, "forward");
    double sum = 0;
    for (int i = 0; i < B * T; i++) sum += m->host_losses[i];
    float loss = (float)(sum / (B * T));
    if (training)
        m->taped = true;
    else
        tape_clear(m);
    return loss;
}

/* ---- backward ---- */

/* autograd's .grad of parameter p, kept in *g: created zeroed on first use */
static float *grad_of(pl_gpt2_t *m, pl_tensor_t **g, const pl_tensor_t *p) {
    if (!*g) *g = tnew(m, "grad", PL_F32, p->shape[0], p->shape[1], 0, 0, true);
    return (*g)->f;
}
#define GRAD(field) grad_of(m, &m->grads.field, m->params.field) /* GRAD(wte), GRAD(layer[l].qkvw) */

void pl_gpt2_backward(pl_gpt2_t *m) {
    if (!m->taped) {
        fprintf(stderr, "plateau-train: backward without a training forward\n");
        exit(2);
    }
    const int B = m->B, T = m->T, C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab, L = m->cfg.n_layer;
    const size_t BTC = (size_t)B * T * C;
    m->leak_graph_now = leak_fires(m, PL_LEAK_GRAPH);

    pl_tensor_t *dlosses = NEW("dlosses", B, T, 0, 0);
    m->ops->fill(dlosses->f, (size_t)B * T, 1.0f / (float)(B * T)); /* mean loss */
    pl_tensor_t *dlogits = ZEROS("dlogits", B, T, V, 0);
    m->ops->crossentropy_backward(dlogits->f, dlosses->f, m->probs->f, m->targets->i, B, T, V);
    drop(&dlosses);
    release(m, &m->probs);
    release(m, &m->losses);
    pl_tensor_t *dlnf = ZEROS("dlnf", B, T, C, 0);
    m->ops->matmul_backward(dlnf->f, GRAD(wte), NULL, dlogits->f, m->lnf->f, PRM(wte), B, T, C, V);
    drop(&dlogits);
    release(m, &m->lnf);
    pl_tensor_t *dres = ZEROS("dresidual", B, T, C, 0); /* gradient of the residual stream, (B,T,C) */
    const pl_tensor_t *last = L > 0 ? m->layers[L - 1].res3 : m->encoded;
    m->ops->layernorm_backward(dres->f, GRAD(lnfw), GRAD(lnfb), dlnf->f, last->f, PRM(lnfw), m->lnf_mean->f,
                                  m->lnf_rstd->f, B, T, C);
    drop(&dlnf);
    release(m, &m->lnf_mean);
    release(m, &m->lnf_rstd);

    for (int l = L - 1; l >= 0; l--) {
        layer_tape_t *lt = &m->layers[l];
        const pl_tensor_t *residual = l == 0 ? m->encoded : m->layers[l - 1].res3;
        release(m, &lt->res3); /* consumed by the next layer's (or the final) LayerNorm backward, done */
        /* res3 = res2 + fcproj */
        pl_tensor_t *dres2 = ZEROS("dres2", B, T, C, 0);
        pl_tensor_t *dfcproj = ZEROS("dmlp.proj", B, T, C, 0);
        m->ops->residual_backward(dres2->f, dfcproj->f, dres->f, BTC);
        drop(&dres);
        pl_tensor_t *dfch_gelu = ZEROS("dmlp.gelu", B, T, 4 * C, 0);
        m->ops->matmul_backward(dfch_gelu->f, GRAD(layer[l].fcprojw), GRAD(layer[l].fcprojb), dfcproj->f, lt->fch_gelu->f,
                                   PRM(layer[l].fcprojw), B, T, 4 * C, C);
        drop(&dfcproj);
        release(m, &lt->fch_gelu);
        pl_tensor_t *dfch = ZEROS("dmlp.fc", B, T, 4 * C, 0);
        m->ops->gelu_backward(dfch->f, lt->fch->f, dfch_gelu->f, BTC * 4);
        drop(&dfch_gelu);
        release(m, &lt->fch);
        pl_tensor_t *dln2 = ZEROS("dln2", B, T, C, 0);
        m->ops->matmul_backward(dln2->f, GRAD(layer[l].fcw), GRAD(layer[l].fcb), dfch->f, lt->ln2->f, PRM(layer[l].fcw), B, T,
                                   C, 4 * C);
        drop(&dfch);
        release(m, &lt->ln2);
        m->ops->layernorm_backward(dres2->f, GRAD(layer[l].ln2w), GRAD(layer[l].ln2b), dln2->f, lt->res2->f,
                                      PRM(layer[l].ln2w), lt->ln2_mean->f, lt->ln2_rstd->f, B, T, C);
        drop(&dln2);
        release(m, &lt->ln2_mean);
        release(m, &lt->ln2_rstd);
        release(m, &lt->res2);
        /* res2 = residual + attproj */
        pl_tensor_t *dresidual = ZEROS("dresidual", B, T, C, 0);
        pl_tensor_t *dattproj = ZEROS("dattn.proj", B, T, C, 0);
        m->ops->residual_backward(dresidual->f, dattproj->f, dres2->f, BTC);
        drop(&dres2);
        pl_tensor_t *datty = ZEROS("dattn.out", B, T, C, 0);
        m->ops->matmul_backward(datty->f, GRAD(layer[l].attprojw), GRAD(layer[l].attprojb), dattproj->f, lt->atty->f,
                                   PRM(layer[l].attprojw), B, T, C, C);
        drop(&dattproj);
        release(m, &lt->atty);
        pl_tensor_t *dqkv = ZEROS("dqkv", B, T, 3 * C, 0);
        pl_tensor_t *dpreatt = NEW("dattn.scores", B, NH, T, T); /* temporaries, overwritten by the kernel */
        pl_tensor_t *datt = NEW("dattn.probs", B, NH, T, T);
        m->ops->attention_backward(dqkv->f, dpreatt->f, datt->f, datty->f, lt->qkv->f, lt->att->f, B, T, C, NH);
        drop(&datt);
        drop(&dpreatt);
        drop(&datty);
        release(m, &lt->att);
        pl_tensor_t *dln1 = ZEROS("dln1", B, T, C, 0);
        m->ops->matmul_backward(dln1->f, GRAD(layer[l].qkvw), GRAD(layer[l].qkvb), dqkv->f, lt->ln1->f, PRM(layer[l].qkvw), B,
                                   T, C, 3 * C);
        drop(&dqkv);
        release(m, &lt->qkv);
        release(m, &lt->ln1);
        m->ops->layernorm_backward(dresidual->f, GRAD(layer[l].ln1w), GRAD(layer[l].ln1b), dln1->f, residual->f,
                                      PRM(layer[l].ln1w), lt->ln1_mean->f, lt->ln1_rstd->f, B, T, C);
        drop(&dln1);
        release(m, &lt->ln1_mean);
        release(m, &lt->ln1_rstd);
        dres = dresidual;
    }
    m->ops->encoder_backward(GRAD(wte), GRAD(wpe), dres->f, m->inputs->i, B, T, C);
    drop(&dres);
    release(m, &m->encoded);
    release(m, &m->targets);
    release(m, &m->inputs);
    m->taped = false;
    m->leak_graph_now = false;
}

/* ---- optimizer ---- */

static bool is_matrix(const pl_tensor_t *t) { return t->shape[1] != 0; }

float pl_gpt2_update(pl_gpt2_t *m, const pl_adamw_config_t *opt) {
    double sumsq = 0;
    for (int i = 0; i < m->n_ptensors; i++) {
        const pl_tensor_t *g = param_at(&m->grads, i);
        if (g) sumsq += m->ops->sumsq(g->f, g->n);
    }
    check_device(m, "gradient norm");
    float norm = (float)sqrt(sumsq);
    float scale = (opt->grad_clip > 0 && norm > opt->grad_clip) ? opt->grad_clip / norm : 1.0f;
    m->step++;
    for (int i = 0; i < m->n_ptensors; i++) {
        pl_tensor_t *p = param_at(&m->params, i), *g = param_at(&m->grads, i);
        pl_tensor_t **mom = m->adam_m.slot[i], **vel = m->adam_v.slot[i];
        if (!g) continue;
        if (!*mom) { /* lazy optimizer state, as torch.optim creates it at the first step */
            *mom = tnew(m, "adam.m", PL_F32, p->shape[0], p->shape[1], 0, 0, true);
            *vel = tnew(m, "adam.v", PL_F32, p->shape[0], p->shape[1], 0, 0, true);
        }
        if (scale != 1.0f) m->ops->scale(g->f, g->n, scale);
        m->ops->adamw_update(p->f, g->f, (*mom)->f, (*vel)->f, p->n, opt->lr, opt->beta1, opt->beta2, opt->eps,
                                is_matrix(p) ? opt->weight_decay : 0.0f, m->step);
    }
    return norm;
}

void pl_gpt2_zero_grad(pl_gpt2_t *m) {
    for (int i = m->n_ptensors - 1; i >= 0; i--) drop(m->grads.slot[i]);
}

/* ---- accessors ---- */

const pl_gpt2_config_t *pl_gpt2_get_config(const pl_gpt2_t *m) { return &m->cfg; }
const pl_train_ops_t *pl_gpt2_ops(const pl_gpt2_t *m) { return m->ops; }
int pl_gpt2_step(const pl_gpt2_t *m) { return m->step; }
size_t pl_gpt2_num_params(const pl_gpt2_t *m) { return count_params(&m->cfg); }
int pl_gpt2_num_param_tensors(const pl_gpt2_t *m) { return m->n_ptensors; }
pl_tensor_t *pl_gpt2_param(pl_gpt2_t *m, int idx) { return param_at(&m->params, idx); }
pl_tensor_t *pl_gpt2_grad(pl_gpt2_t *m, int idx) { return param_at(&m->grads, idx); }
size_t pl_gpt2_leaked_bytes(const pl_gpt2_t *m) { return pl_tensor_list_bytes(&m->leaked); }
size_t pl_gpt2_n_leaked(const pl_gpt2_t *m) { return m->leaked.n; }

/* ---- checkpoints ----
 * Layout (little-endian host order): "PLGPT2CK", u32 version 1, i32 n_layer, n_head, n_embd, vocab, max_seq,
 * step, has_optimizer; then every parameter tensor in index order as raw float32; then, if has_optimizer,
 * every m tensor then every v tensor. */

#define CK_MAGIC "PLGPT2CK"
enum { CK_VERSION = 1, CK_NFIELDS = 7 };

int pl_gpt2_save(const pl_gpt2_t *m, const char *path, char *err, size_t err_len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_len, "cannot create checkpoint %s: %s", path, strerror(errno));
        return -EIO;
    }
    bool has_opt = m->adam_m.wte != NULL; /* the first tensor: moments are created for all at once */
    float *host = NULL; /* tensors are downloaded one at a time (device memory on cuda) */
    size_t host_n = 0;
    for (int i = 0; i < m->n_ptensors; i++)
        if (param_at(&m->params, i)->n > host_n) host_n = param_at(&m->params, i)->n;
    uint32_t version = CK_VERSION;
    int32_t hdr[CK_NFIELDS] = {m->cfg.n_layer, m->cfg.n_head, m->cfg.n_embd, m->cfg.vocab,
                               m->cfg.max_seq, m->step,       has_opt};
    bool ok = fwrite(CK_MAGIC, 8, 1, f) == 1 && fwrite(&version, sizeof version, 1, f) == 1 &&
              fwrite(hdr, sizeof hdr, 1, f) == 1;
    host = malloc(host_n * sizeof *host);
    if (!host) ok = false;
    for (int i = 0; ok && i < m->n_ptensors; i++) {
        const pl_tensor_t *p = param_at(&m->params, i);
        m->ops->download(host, p->p, p->bytes);
        ok = fwrite(host, 4, p->n, f) == p->n;
    }
    for (int pass = 0; ok && has_opt && pass < 2; pass++) {
        for (int i = 0; ok && i < m->n_ptensors; i++) {
            const pl_tensor_t *t = param_at(pass == 0 ? &m->adam_m : &m->adam_v, i);
            if (!t) { /* a parameter that never received a gradient: write zeros */
                float z = 0;
                for (size_t j = 0; ok && j < param_at(&m->params, i)->n; j++) ok = fwrite(&z, 4, 1, f) == 1;
            } else {
                m->ops->download(host, t->p, t->bytes);
                ok = fwrite(host, 4, t->n, f) == t->n;
            }
        }
    }
    free(host);
    if (fclose(f) != 0) ok = false;
    if (m->ops->last_error()) {
        snprintf(err, err_len, "cannot write checkpoint %s: %s device error: %s", path, m->ops->name,
                 m->ops->last_error());
        return -EIO;
    }
    if (!ok) {
        snprintf(err, err_len, "cannot write checkpoint %s: %s", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

int pl_gpt2_load(pl_gpt2_t *m, const char *path, char *err, size_t err_len) {
    static const char *const field[CK_NFIELDS] = {"layers", "heads", "channels", "vocab", "max seq"};
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -EIO;
    }
    char magic[8];
    uint32_t version = 0;
    int32_t hdr[CK_NFIELDS];
    int rc = 0;
    float *buf = NULL;
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, CK_MAGIC, 8) != 0 || fread(&version, 4, 1, f) != 1 ||
        fread(hdr, sizeof hdr, 1, f) != 1) {
        snprintf(err, err_len, "%s is not a plateau-train checkpoint (bad magic or short header)", path);
        rc = -EINVAL;
        goto out;
    }
    if (version != CK_VERSION) {
        snprintf(err, err_len, "%s: checkpoint version %u, this build reads version %d", path, version, CK_VERSION);
        rc = -EINVAL;
        goto out;
    }
    const int32_t want[5] = {m->cfg.n_layer, m->cfg.n_head, m->cfg.n_embd, m->cfg.vocab, m->cfg.max_seq};
    size_t used = (size_t)snprintf(err, err_len, "checkpoint %s does not match the model:", path);
    for (int k = 0; k < 5; k++) {
        if (hdr[k] == want[k]) continue;
        rc = -EINVAL;
        if (used < err_len)
            used += (size_t)snprintf(err + used, err_len - used, " %s %d in file, %d in model;", field[k], hdr[k],
                                     want[k]);
    }
    if (rc) {
        if (used > 0 && used < err_len && err[used - 1] == ';') err[used - 1] = '\0'; /* no trailing separator */
        goto out;
    }
    const bool has_opt = hdr[6] != 0;
    /* read everything into a host buffer first so a truncated file leaves the model unchanged */
    size_t P = count_params(&m->cfg), total = P * (has_opt ? 3 : 1);
    buf = malloc(total * sizeof *buf);
    if (!buf) {
        snprintf(err, err_len, "out of host memory reading %s", path);
        rc = -ENOMEM;
        goto out;
    }
    if (fread(buf, sizeof *buf, total, f) != total || fgetc(f) != EOF) {
        snprintf(err, err_len, "checkpoint %s has the wrong size for this config (truncated or trailing data)", path);
        rc = -EINVAL;
        goto out;
    }
    size_t off = 0;
    for (int i = 0; i < m->n_ptensors; i++) {
        pl_tensor_t *p = param_at(&m->params, i);
        m->ops->upload(p->p, buf + off, p->bytes);
        off += p->n;
    }
    for (int pass = 0; has_opt && pass < 2; pass++) {
        for (int i = 0; i < m->n_ptensors; i++) {
            pl_tensor_t **slot = (pass == 0 ? &m->adam_m : &m->adam_v)->slot[i];
            const pl_tensor_t *p = param_at(&m->params, i);
            if (!*slot) *slot = tnew(m, pass == 0 ? "adam.m" : "adam.v", PL_F32, p->shape[0], p->shape[1], 0, 0, false);
            m->ops->upload((*slot)->p, buf + off, (*slot)->bytes);
            off += (*slot)->n;
        }
    }
    if (!has_opt) { /* the file has no optimizer state: start AdamW afresh, as a framework would */
        for (int i = 0; i < m->n_ptensors; i++) {
            drop(m->adam_m.slot[i]);
            drop(m->adam_v.slot[i]);
        }
    }
    if (m->ops->last_error()) {
        snprintf(err, err_len, "cannot load checkpoint %s: %s device error: %s", path, m->ops->name,
                 m->ops->last_error());
        rc = -EIO;
        goto out;
    }
    m->step = hdr[5];
    err[0] = '\0';
out:
    free(buf);
    fclose(f);
    return rc;
}
