/* common/table: see table.h. */
#include "table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 256

void pl_table_init(pl_table_t *t, size_t val_bytes, size_t max_n) {
    memset(t, 0, sizeof *t);
    t->val_bytes = val_bytes;
    t->slot_bytes = 8 + (val_bytes + 7) / 8 * 8;
    t->max_n = max_n;
}

void pl_table_free(pl_table_t *t) {
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

static uint64_t key_at(const pl_table_t *t, size_t i) {
    uint64_t k;
    memcpy(&k, t->slots + i * t->slot_bytes, sizeof k);
    return k;
}

/* Twice the slots (FIRST_CAP at first), every key moved to its place. */
static int grow(pl_table_t *t) {
    size_t nc = t->cap ? t->cap * 2 : FIRST_CAP;
    unsigned char *ns = calloc(nc, t->slot_bytes);
    if (!ns) return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t k = key_at(t, i);
        if (!k) continue;
        size_t j = pl_table_home(k, nc);
        for (uint64_t o;; j = (j + 1) & (nc - 1)) { /* the first free slot from its home */
            memcpy(&o, ns + j * t->slot_bytes, sizeof o);
            if (!o) break;
        }
        memcpy(ns + j * t->slot_bytes, t->slots + i * t->slot_bytes, t->slot_bytes);
    }
    free(t->slots);
    t->slots = ns;
    t->cap = nc;
    return 0;
}

int pl_table_put(pl_table_t *t, uint64_t key, void **val) {
    *val = NULL;
    if (!key) return 1;
    unsigned char *v = pl_table_get(t, key);
    if (v) {
        *val = v;
        return 0;
    }
    if (t->max_n && t->n >= t->max_n) return 1;
    if ((t->n + 1) * 2 > t->cap) {
        int rc = grow(t);
        if (rc) return rc;
    }
    size_t i = pl_table_home(key, t->cap);
    while (key_at(t, i)) i = (i + 1) & (t->cap - 1);
    unsigned char *s = t->slots + i * t->slot_bytes;
    memcpy(s, &key, sizeof key);
    memset(s + 8, 0, t->slot_bytes - 8);
    t->n++;
    *val = s + 8;
    return 0;
}

/* slot j's key and value into slot i, word by word (slot_bytes is a multiple of 8, a few words) */
static void move_slot(pl_table_t *t, size_t i, size_t j) {
    unsigned char *d = t->slots + i * t->slot_bytes, *s = t->slots + j * t->slot_bytes;
    for (size_t w = 0; w < t->slot_bytes; w += 8) memcpy(d + w, s + w, 8);
}

void pl_table_del(pl_table_t *t, void *val) {
    size_t mask = t->cap - 1, i = (size_t)((unsigned char *)val - 8 - t->slots) / t->slot_bytes, j = i;
    memset(t->slots + i * t->slot_bytes, 0, 8);
    for (;;) {
        j = (j + 1) & mask;
        uint64_t k = key_at(t, j);
        if (!k) break;
        size_t h = pl_table_home(k, t->cap);
        /* j moves back to the hole at i unless its home h is cyclically in (i, j] */
        bool stay = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stay) continue;
        move_slot(t, i, j);
        memset(t->slots + j * t->slot_bytes, 0, 8);
        i = j;
    }
    t->n--;
}

int pl_table_grow(uint64_t **keys, uint32_t **vals, size_t *cap, size_t first_cap, uint64_t empty,
                  pl_table_home_fn home) {
    size_t old = *cap, nc = old ? old * 2 : first_cap;
    uint64_t *nk = empty ? malloc(nc * sizeof *nk) : calloc(nc, sizeof *nk);
    uint32_t *nv = malloc(nc * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    if (empty)
        for (size_t i = 0; i < nc; i++) nk[i] = empty;
    for (size_t i = 0; i < old; i++) {
        uint64_t k = (*keys)[i];
        if (k == empty) continue;
        size_t j = home(k, nc);
        while (nk[j] != empty) j = (j + 1) & (nc - 1);
        nk[j] = k;
        nv[j] = (*vals)[i];
    }
    free(*keys);
    free(*vals);
    *keys = nk;
    *vals = nv;
    *cap = nc;
    return 0;
}
