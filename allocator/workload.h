/* allocator/workload.h: a deterministic, training-like allocation sequence (transformer forward/backward),
 * shared by plateau-alloc-demo and bench/alloc_bench. Not part of libplateau_alloc.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct pl_workload_params {
    int n_layers;       /* transformer blocks */
    int d_model;        /* channels C */
    int n_heads;
    int batch;          /* B */
    int max_seq;        /* T (upper bound when vary_seq) */
    int vocab;          /* V */
    int n_steps;
    int vary_seq;       /* 1: each step draws T from {T/2 .. T} in steps of T/8 (seeded) */
    uint64_t seed;
} pl_workload_params_t;

enum { PL_WORKLOAD_ALLOC = 0, PL_WORKLOAD_FREE = 1, PL_WORKLOAD_STEP = 2 };

typedef struct pl_workload_op {
    uint32_t kind;       /* PL_WORKLOAD_* */
    uint32_t id;         /* tensor id (index into the caller's pointer table) */
    size_t size_bytes;   /* ALLOC: bytes requested */
} pl_workload_op_t;

typedef struct pl_workload {
    pl_workload_op_t *ops;
    size_t n_ops;
    uint32_t n_ids;      /* ids are 0..n_ids-1 */
    size_t n_allocs;
} pl_workload_t;

/* Defaults: a GPT-2-small-like shape scaled down (6 layers, C=256, B=8, T=128, V=8192, 20 steps). */
void pl_workload_default(pl_workload_params_t *p);

/* Generate the sequence. Returns 0 or -ENOMEM / -EINVAL. Free with pl_workload_free. */
int pl_workload_generate(const pl_workload_params_t *p, pl_workload_t *out);
void pl_workload_free(pl_workload_t *w);

#include <plateau/alloc.h>

/* Replay w through allocator a on stream 0. ptrs has w->n_ids slots (caller-owned). Frees what is still
 * live at the end when free_at_end. Returns 0, or -ENOMEM when a malloc failed (*failed_op = its index). */
int pl_workload_replay(const pl_workload_t *w, pl_alloc_t *a, void **ptrs, int free_at_end, size_t *failed_op);
