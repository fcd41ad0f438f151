/* Live anonymous mapping ranges (mranges.h): a sorted array (descending lo), binary search, memmove on insert and
 * split. Every operation touches O(overlapping ranges) entries plus one memmove. */
#include "mranges.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int pl_mranges_map(pl_mranges_t *t, uint32_t max) {
    if (t->r) return 0;
    if (t->failed) return -ENOMEM;
    t->max = max < 512 ? 512 : max;
    /* The raw system call: in the preload, mmap is interposed and would count these pages as the program's. */
    void *p = (void *)syscall(SYS_mmap, NULL, (size_t)t->max * sizeof(pl_mrange_t), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    t->r = (intptr_t)p < 0 && (intptr_t)p > -4096 ? NULL : p;
    t->failed = !t->r;
    return t->r ? 0 : -ENOMEM;
}

/* First index whose range starts below x (ranges at lower indices start at or above x). */
static uint32_t below(const pl_mranges_t *t, uintptr_t x) {
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->r[mid].lo >= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void pl_mranges_cut(pl_mranges_t *t, uintptr_t lo, uintptr_t hi, pl_mranges_delta_t *d) {
    if (!t->r || lo >= hi) return;
    uint32_t i = below(t, hi), j = i;
    while (j < t->n && t->r[j].hi > lo) j++;
    if (i == j) return;
    pl_mrange_t keep[2];
    uint32_t k = 0;
    if (t->r[i].hi > hi) keep[k++] = (pl_mrange_t){hi, t->r[i].hi};          /* above the hole */
    if (t->r[j - 1].lo < lo) keep[k++] = (pl_mrange_t){t->r[j - 1].lo, lo};  /* below the hole */
    for (uint32_t x = i; x < j; x++) {
        uintptr_t a = t->r[x].lo > lo ? t->r[x].lo : lo, b = t->r[x].hi < hi ? t->r[x].hi : hi;
        d->bytes -= (int64_t)(b - a);
    }
    if (k > j - i && t->n + k - (j - i) > t->max) { /* no room to split: drop the lower piece from the count */
        d->bytes -= (int64_t)(keep[1].hi - keep[1].lo);
        k = 1;
    }
    memmove(&t->r[i + k], &t->r[j], (t->n - j) * sizeof t->r[0]);
    memcpy(&t->r[i], keep, k * sizeof keep[0]);
    t->n = t->n + k - (j - i);
    d->count += (int64_t)k - (int64_t)(j - i);
}

void pl_mranges_add(pl_mranges_t *t, uintptr_t lo, uintptr_t hi, pl_mranges_delta_t *d) {
    if (!t->r || lo >= hi) return;
    pl_mranges_cut(t, lo, hi, d);
    if (t->n == t->max) return;
    uint32_t i = below(t, lo);
    memmove(&t->r[i + 1], &t->r[i], (t->n - i) * sizeof t->r[0]);
    t->r[i] = (pl_mrange_t){lo, hi};
    t->n++;
    d->bytes += (int64_t)(hi - lo);
    d->count++;
}

uintptr_t pl_mranges_overlap(const pl_mranges_t *t, uintptr_t lo, uintptr_t hi) {
    if (!t->r) return 0;
    uintptr_t n = 0;
    for (uint32_t x = below(t, hi); x < t->n && t->r[x].hi > lo; x++) {
        uintptr_t a = t->r[x].lo > lo ? t->r[x].lo : lo, b = t->r[x].hi < hi ? t->r[x].hi : hi;
        n += b - a;
    }
    return n;
}
