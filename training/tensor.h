/* The thin tensor layer between the model and device memory.
 *
 * Every tensor of the engine (parameters, gradients, AdamW moments, activations, logits, temporaries, token ids)
 * is one pl_alloc_malloc block on the engine's allocator, allocated when the op that produces it runs and freed
 * (pl_tensor_free) when a framework would drop its last reference. The descriptor itself lives on the host heap,
 * as a framework's tensor object does. Tensors are dense, row-major, at most 4 dims.
 * On the cuda backend the data pointer is device memory: only the kernel table (ops.h) may touch it, and
 * pl_tensor_zeros (a host memset) is for host-memory backends (sim) only.
 * Not thread-safe per tensor; the allocator underneath is.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <plateau/alloc.h>

typedef enum pl_dtype { PL_F32 = 0, PL_I32 = 1 } pl_dtype_t;

typedef struct pl_tensor {
    union {
        float *f;   /* PL_F32 view */
        int32_t *i; /* PL_I32 view */
        void *p;
    };
    size_t n;           /* elements */
    size_t bytes;       /* n * 4 */
    int shape[4];       /* unused trailing dims are 0 */
    pl_dtype_t dtype;
    const char *name;   /* static string, for messages */
    pl_alloc_t *alloc;  /* where the data block came from */
} pl_tensor_t;

/* Allocate an uninitialised tensor of shape (d0[,d1[,d2[,d3]]]) (pass 0 for unused dims) on `a`, default stream.
 * Returns NULL when the descriptor or the device block cannot be allocated (pl_alloc_last_error() says why). */
pl_tensor_t *pl_tensor_new(pl_alloc_t *a, const char *name, pl_dtype_t dtype, int d0, int d1, int d2, int d3);

/* As pl_tensor_new, zero-filled. */
pl_tensor_t *pl_tensor_zeros(pl_alloc_t *a, const char *name, pl_dtype_t dtype, int d0, int d1, int d2, int d3);

/* Return the block to the allocator and free the descriptor. NULL is a no-op. */
void pl_tensor_free(pl_tensor_t *t);

/* A growable list of tensor references (host memory): what keeps tensors alive past their use. */
typedef struct pl_tensor_list {
    pl_tensor_t **items;
    size_t n, cap;
} pl_tensor_list_t;

/* Append t; returns 0 or -ENOMEM (then t is not in the list). */
int pl_tensor_list_push(pl_tensor_list_t *l, pl_tensor_t *t);

/* Free every tensor in the list and the list's storage. */
void pl_tensor_list_clear(pl_tensor_list_t *l);

/* Sum of bytes of the tensors in the list. */
size_t pl_tensor_list_bytes(const pl_tensor_list_t *l);
