/* Tensor descriptors over the plateau allocator (see tensor.h). The only place in training/ that calls
 * pl_alloc_malloc / pl_alloc_free for tensor data, so every byte the engine touches is visible to the allocator's
 * stats and event hook.
 */
#include "tensor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

pl_tensor_t *pl_tensor_new(pl_alloc_t *a, const char *name, pl_dtype_t dtype, int d0, int d1, int d2, int d3) {
    int dims[4] = {d0, d1, d2, d3};
    size_t n = 1;
    for (int k = 0; k < 4; k++) {
        if (dims[k] < 0) return NULL;
        if (dims[k] > 0) n *= (size_t)dims[k];
    }
    pl_tensor_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n = n;
    t->bytes = n * 4;
    t->dtype = dtype;
    t->name = name;
    t->alloc = a;
    memcpy(t->shape, dims, sizeof dims);
    t->p = pl_alloc_malloc(a, t->bytes, 0);
    if (!t->p) {
        free(t);
        return NULL;
    }
    return t;
}

pl_tensor_t *pl_tensor_zeros(pl_alloc_t *a, const char *name, pl_dtype_t dtype, int d0, int d1, int d2, int d3) {
    pl_tensor_t *t = pl_tensor_new(a, name, dtype, d0, d1, d2, d3);
    if (t) memset(t->p, 0, t->bytes);
    return t;
}

void pl_tensor_free(pl_tensor_t *t) {
    if (!t) return;
    pl_alloc_free(t->alloc, t->p);
    free(t);
}

int pl_tensor_list_push(pl_tensor_list_t *l, pl_tensor_t *t) {
    if (pl_grow_first((void **)&l->items, &l->cap, l->n + 1, sizeof *l->items, 64)) return -ENOMEM;
    l->items[l->n++] = t;
    return 0;
}

void pl_tensor_list_clear(pl_tensor_list_t *l) {
    for (size_t k = l->n; k > 0; k--) pl_tensor_free(l->items[k - 1]);
    free(l->items);
    l->items = NULL;
    l->n = l->cap = 0;
}

size_t pl_tensor_list_bytes(const pl_tensor_list_t *l) {
    size_t s = 0;
    for (size_t k = 0; k < l->n; k++) s += l->items[k]->bytes;
    return s;
}
