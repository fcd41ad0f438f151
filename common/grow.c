/* common/grow: geometric growth of caller-owned arrays with the byte count checked for overflow (see grow.h). */
#include "grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

size_t pl_grow_cap(size_t cap, size_t need, size_t first, size_t elem) {
    if (elem == 0) return 0;
    size_t max = SIZE_MAX / elem; /* the most elements whose byte count fits */
    if (need > max) return 0;
    if (need <= cap) return cap;
    size_t nc = cap ? cap : (first ? first : 1);
    if (cap && nc <= max / 2) nc *= 2;
    else if (cap) nc = max;
    while (nc < need) nc = nc <= max / 2 ? nc * 2 : max;
    return nc > max ? max : nc;
}

int pl_grow_realloc(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap) return 0;
    size_t nc = pl_grow_cap(*cap, need, first, elem);
    if (!nc) {
        errno = EOVERFLOW;
        return -1;
    }
    void *np = realloc(*p, nc * elem);
    if (!np) {
        errno = ENOMEM;
        return -1;
    }
    *p = np;
    *cap = nc;
    return 0;
}
