/* allocator/workload.c: the bundled training-like allocation sequence (see workload.h).
 *
 * Per step, as a framework allocates per op: forward allocates activations layer by layer (LN outputs, qkv
 * (B,T,3C), attention scores and probabilities (B,H,T,T), attention output, MLP hidden (B,T,4C) and its GELU,
 * residuals, small per-row statistics (B,T)), then logits (B,T,V), their softmax and the loss; backward frees
 * them in reverse order while allocating short-lived gradient temporaries, and allocates the parameter
 * gradients (freed at the next step's zero_grad, set_to_none). Parameters live for the whole run; AdamW state
 * (m, v per parameter) is allocated at the first optimizer step and kept. float32 everywhere.
 */
#include "workload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

typedef struct gen {
    pl_workload_t *w;
    size_t cap;
    uint32_t next_id;
    int failed;
} gen_t;

static void emit(gen_t *g, uint32_t kind, uint32_t id, size_t size) {
    if (g->failed) return;
    if (pl_grow_first((void **)&g->w->ops, &g->cap, g->w->n_ops + 1, sizeof *g->w->ops, 4096)) {
        g->failed = 1;
        return;
    }
    g->w->ops[g->w->n_ops++] = (pl_workload_op_t){kind, id, size};
    if (kind == PL_WORKLOAD_ALLOC) g->w->n_allocs++;
}

static uint32_t alloc(gen_t *g, size_t size) {
    uint32_t id = g->next_id++;
    emit(g, PL_WORKLOAD_ALLOC, id, size);
    return id;
}

static void release(gen_t *g, uint32_t id) { emit(g, PL_WORKLOAD_FREE, id, 0); }

static uint64_t rnd(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void pl_workload_default(pl_workload_params_t *p) {
    memset(p, 0, sizeof *p);
    p->n_layers = 6;
    p->d_model = 256;
    p->n_heads = 4;
    p->batch = 8;
    p->max_seq = 128;
    p->vocab = 8192;
    p->n_steps = 20;
    p->vary_seq = 1;
    p->seed = 42;
}

#define F4 ((size_t)4)

int pl_workload_generate(const pl_workload_params_t *p, pl_workload_t *out) {
    if (p->n_layers <= 0 || p->d_model <= 0 || p->n_heads <= 0 || p->batch <= 0 || p->max_seq <= 0 ||
        p->vocab <= 0 || p->n_steps <= 0)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    gen_t g = {.w = out};
    const size_t C = (size_t)p->d_model, L = (size_t)p->n_layers, V = (size_t)p->vocab, H = (size_t)p->n_heads;
    const size_t B = (size_t)p->batch;
    /* parameters: wte (V,C), wpe (T,C), per layer ln1 w/b (C), qkv w (3C,C) b (3C), proj w (C,C) b (C),
     * ln2 w/b (C), fc w (4C,C) b (4C), fcproj w (C,4C) b (C); final ln w/b (C) */
    size_t psizes[64 * 16];
    size_t n_params = 0;
    psizes[n_params++] = V * C * F4;
    psizes[n_params++] = (size_t)p->max_seq * C * F4;
    for (size_t l = 0; l < L && n_params + 12 < sizeof psizes / sizeof psizes[0]; l++) {
        size_t per[] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
        for (size_t i = 0; i < sizeof per / sizeof per[0]; i++) psizes[n_params++] = per[i] * F4;
    }
    psizes[n_params++] = C * F4;
    psizes[n_params++] = C * F4;
    for (size_t i = 0; i < n_params; i++) (void)alloc(&g, psizes[i]);
    uint32_t grad_ids[64 * 16];
    int have_grads = 0;
    uint64_t seed = p->seed;
    enum { MAX_ACT = 64 * 24 + 16 };
    uint32_t acts[MAX_ACT];
    for (int step = 0; step < p->n_steps; step++) {
        emit(&g, PL_WORKLOAD_STEP, (uint32_t)step, 0);
        size_t T = (size_t)p->max_seq;
        if (p->vary_seq && T >= 8) T = T / 2 + (size_t)(rnd(&seed) % 5) * (T / 8);
        const size_t BT = B * T;
        size_t n_act = 0;
        /* forward */
        acts[n_act++] = alloc(&g, BT * 4);         /* input token ids (int32) */
        acts[n_act++] = alloc(&g, BT * C * F4);    /* embeddings + positions */
        for (size_t l = 0; l < L && n_act + 16 < MAX_ACT; l++) {
            acts[n_act++] = alloc(&g, BT * C * F4);        /* ln1 out */
            acts[n_act++] = alloc(&g, BT * F4);            /* ln1 mean */
            acts[n_act++] = alloc(&g, BT * F4);            /* ln1 rstd */
            acts[n_act++] = alloc(&g, BT * 3 * C * F4);    /* qkv */
            acts[n_act++] = alloc(&g, B * H * T * T * F4); /* att scores */
            acts[n_act++] = alloc(&g, B * H * T * T * F4); /* att probs */
            acts[n_act++] = alloc(&g, BT * C * F4);        /* att out */
            acts[n_act++] = alloc(&g, BT * C * F4);        /* proj + residual */
            acts[n_act++] = alloc(&g, BT * C * F4);        /* ln2 out */
            acts[n_act++] = alloc(&g, BT * F4);            /* ln2 mean */
            acts[n_act++] = alloc(&g, BT * F4);            /* ln2 rstd */
            acts[n_act++] = alloc(&g, BT * 4 * C * F4);    /* fc out */
            acts[n_act++] = alloc(&g, BT * 4 * C * F4);    /* gelu out */
            acts[n_act++] = alloc(&g, BT * C * F4);        /* fcproj + residual */
        }
        acts[n_act++] = alloc(&g, BT * C * F4); /* final ln */
        acts[n_act++] = alloc(&g, BT * V * F4); /* logits */
        acts[n_act++] = alloc(&g, BT * V * F4); /* softmax probs */
        uint32_t loss = alloc(&g, BT * F4);     /* per-token loss */
        /* zero_grad(set_to_none): last step's parameter gradients go */
        if (have_grads)
            for (size_t i = 0; i < n_params; i++) release(&g, grad_ids[i]);
        /* backward: dlogits, then per layer temporaries; activations freed in reverse */
        uint32_t dlogits = alloc(&g, BT * V * F4);
        release(&g, loss);
        for (size_t i = 0; i < n_params; i++) grad_ids[i] = alloc(&g, psizes[i]);
        have_grads = 1;
        uint32_t dres = alloc(&g, BT * C * F4);
        release(&g, dlogits);
        while (n_act > 0) {
            uint32_t id = acts[--n_act];
            /* a short-lived gradient temporary of a similar size per activation of a layer */
            if (n_act % 7 == 3) {
                uint32_t tmp = alloc(&g, BT * C * F4);
                release(&g, tmp);
            }
            release(&g, id);
        }
        release(&g, dres);
        /* AdamW: m and v allocated lazily on the first step, kept */
        if (step == 0)
            for (size_t i = 0; i < 2 * n_params; i++) (void)alloc(&g, psizes[i % n_params]);
    }
    out->n_ids = g.next_id;
    if (g.failed) {
        pl_workload_free(out);
        return -ENOMEM;
    }
    return 0;
}

void pl_workload_free(pl_workload_t *w) {
    free(w->ops);
    memset(w, 0, sizeof *w);
}

int pl_workload_replay(const pl_workload_t *w, pl_alloc_t *a, void **ptrs, int free_at_end, size_t *failed_op) {
    memset(ptrs, 0, w->n_ids * sizeof *ptrs);
    int rc = 0;
    for (size_t i = 0; i < w->n_ops; i++) {
        const pl_workload_op_t *op = &w->ops[i];
        if (op->kind == PL_WORKLOAD_ALLOC) {
            ptrs[op->id] = pl_alloc_malloc(a, op->size_bytes, 0);
            if (!ptrs[op->id]) {
                if (failed_op) *failed_op = i;
                rc = -ENOMEM;
                break;
            }
        } else if (op->kind == PL_WORKLOAD_FREE) {
            pl_alloc_free(a, ptrs[op->id]);
            ptrs[op->id] = NULL;
        }
    }
    if (free_at_end || rc)
        for (uint32_t id = 0; id < w->n_ids; id++)
            if (ptrs[id]) {
                pl_alloc_free(a, ptrs[id]);
                ptrs[id] = NULL;
            }
    return rc;
}
