/* GPT-2 model of the training engine: parameters, forward/backward with per-op tensor allocation, AdamW,
 * gradient clipping, checkpoints, and the leak scenarios that reproduce how training memory climbs.
 *
 * Memory life cycle (what the allocator sees, as in PyTorch eager mode):
 *   create      parameters (one tensor per weight or bias: 4 + 12*L of them)
 *   forward     one tensor per op output; temporaries (attention scores, projections before a residual add,
 *               logits once the softmax is taken) are freed as soon as the next op has consumed them; the rest
 *               is saved on the model's tape for backward
 *   backward    gradient tensors of activations are allocated per op and freed once consumed; saved activations
 *               are freed in reverse order as backward passes them; parameter gradients are allocated (zeroed)
 *               the first time backward reaches them, like autograd's .grad
 *   update      clipping, then AdamW; its moments m and v are created lazily at the first update (warmup)
 *   zero_grad   frees parameter gradients (set_to_none)
 * Not thread-safe: one thread drives a model; kernels parallelise inside with OpenMP.
 * Programs may fail fast: on device OOM the model prints the allocator's message and exits(2), as a framework
 * raises an OutOfMemoryError.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/alloc.h>

#include "ops.h"
#include "tensor.h"

typedef struct pl_gpt2_config {
    int n_layer;  /* L */
    int n_head;   /* NH; must divide n_embd */
    int n_embd;   /* C */
    int vocab;    /* V */
    int max_seq;  /* maxT: rows of the position embedding */
} pl_gpt2_config_t;

typedef struct pl_adamw_config {
    float lr, beta1, beta2, eps, weight_decay; /* weight decay applies to matrices only */
    float grad_clip;                            /* global L2 norm; 0 = off */
} pl_adamw_config_t;

/* Leak scenarios (common ways eager-mode training keeps memory alive). A leak fires on training steps s >= start with
 * (s - start) % every == 0 (steps are 1-based, counted as the step being computed). */
typedef enum pl_leak_kind {
    PL_LEAK_NONE = 0,
    PL_LEAK_GRAPH,   /* a retained reference keeps the step's saved activations (its graph) alive */
    PL_LEAK_OUTPUTS, /* each step's logits appended to a list */
    PL_LEAK_STATS,   /* per-layer statistics tensor re-created every forward, the old one kept referenced */
    PL_LEAK_CACHE,   /* a per-step cache entry (a copy of the embeddings) that is never evicted */
} pl_leak_kind_t;

typedef struct pl_leak_config {
    pl_leak_kind_t kind;
    int start; /* first step that leaks (1-based) */
    int every; /* leak on one step in `every` (>= 1) */
} pl_leak_config_t;

typedef struct pl_gpt2 pl_gpt2_t;

/* Memory budget, in bytes, of one training step at (B,T) (what a report should be checked against). */
typedef struct pl_gpt2_budget {
    size_t n_params;
    size_t params_bytes, grads_bytes, optimizer_bytes;
    size_t activations_bytes; /* saved for backward, logits excluded */
    size_t logits_bytes;      /* B*T*V*4 */
} pl_gpt2_budget_t;

/* Fills *cfg with the default model (4 layers, 4 heads, 128 channels, vocab 256, maxT 64). */
void pl_gpt2_config_default(pl_gpt2_config_t *cfg);
void pl_adamw_config_default(pl_adamw_config_t *cfg);

/* Check a config; returns 0 or -EINVAL with a message in err. */
int pl_gpt2_config_check(const pl_gpt2_config_t *cfg, char *err, size_t err_len);

void pl_gpt2_budget(const pl_gpt2_config_t *cfg, int B, int T, pl_gpt2_budget_t *out);

/* Create a model with GPT-2 initialisation from `seed`; parameters come from `a` (not owned). NULL on error.
 * pl_gpt2_create runs on the CPU table (tensor memory must be host memory: the sim backend);
 * pl_gpt2_create_on runs every op through `ops` (ops.h), whose memory must be `a`'s (cuda table: cuda backend). */
pl_gpt2_t *pl_gpt2_create(pl_alloc_t *a, const pl_gpt2_config_t *cfg, uint64_t seed);
pl_gpt2_t *pl_gpt2_create_on(pl_alloc_t *a, const pl_train_ops_t *ops, const pl_gpt2_config_t *cfg, uint64_t seed);

/* Frees every tensor the model holds (parameters, gradients, moments, tape, leaked tensors). */
void pl_gpt2_destroy(pl_gpt2_t *m);

void pl_gpt2_set_leak(pl_gpt2_t *m, const pl_leak_config_t *leak);

/* Forward of tokens inputs/targets (B,T) (host arrays, copied to device tensors). T <= max_seq.
 * training: the tape is kept for pl_gpt2_backward (which must follow before the next forward);
 * otherwise (evaluation) everything is freed before returning. Returns the mean cross-entropy. */
float pl_gpt2_forward(pl_gpt2_t *m, const int *inputs, const int *targets, int B, int T, bool training);

/* Backward of the last training forward: parameter gradients accumulate (+=) into .grad tensors. */
void pl_gpt2_backward(pl_gpt2_t *m);

/* Global-norm clipping then AdamW; creates the moments on the first call; advances the step counter.
 * Returns the gradient norm before clipping. */
float pl_gpt2_update(pl_gpt2_t *m, const pl_adamw_config_t *opt);

/* Free the parameter gradients (set_to_none). */
void pl_gpt2_zero_grad(pl_gpt2_t *m);

const pl_gpt2_config_t *pl_gpt2_get_config(const pl_gpt2_t *m);
const pl_train_ops_t *pl_gpt2_ops(const pl_gpt2_t *m);
int pl_gpt2_step(const pl_gpt2_t *m);      /* optimizer steps done */
size_t pl_gpt2_num_params(const pl_gpt2_t *m);
int pl_gpt2_num_param_tensors(const pl_gpt2_t *m);
pl_tensor_t *pl_gpt2_param(pl_gpt2_t *m, int idx);  /* idx < num_param_tensors */
pl_tensor_t *pl_gpt2_grad(pl_gpt2_t *m, int idx);   /* NULL when not allocated */
size_t pl_gpt2_leaked_bytes(const pl_gpt2_t *m);     /* bytes held by leak scenarios */
size_t pl_gpt2_n_leaked(const pl_gpt2_t *m);         /* tensors held by leak scenarios */

/* Checkpoint of parameters, optimizer moments and step counter. Returns 0 or a negative errno with a message
 * in err: -EIO (open/read/write), -EINVAL (not a checkpoint, or saved with a different config: the message names
 * each mismatching field with both values, or truncated). On load failure the model is unchanged. */
int pl_gpt2_save(const pl_gpt2_t *m, const char *path, char *err, size_t err_len);
int pl_gpt2_load(pl_gpt2_t *m, const char *path, char *err, size_t err_len);
