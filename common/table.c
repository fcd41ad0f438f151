/* common/table: see table.h. */
#include "table.h"

#include <errno.h>
#include <stdlib.h>

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
