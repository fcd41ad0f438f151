/* Data for the engine (see data.h). The built-in corpus is embedded with the assembler's .incbin so the demo
 * runs from any directory; PL_CORPUS_PATH (absolute, set by training/meson.build) names the file.
 */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

#ifndef PL_CORPUS_PATH
#error "PL_CORPUS_PATH must name training/data/corpus.txt"
#endif

__asm__(".section .rodata\n"
        ".balign 16\n"
        "pl_corpus_begin:\n"
        ".incbin \"" PL_CORPUS_PATH "\"\n"
        "pl_corpus_end:\n"
        ".previous\n");
extern const unsigned char pl_corpus_begin[] __asm__("pl_corpus_begin");
extern const unsigned char pl_corpus_end[] __asm__("pl_corpus_end");

const unsigned char *pl_data_builtin_corpus(size_t *len) {
    *len = (size_t)(pl_corpus_end - pl_corpus_begin);
    return pl_corpus_begin;
}

static uint64_t next(uint64_t *s) { /* splitmix64: any seed, including 0, is fine */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t pl_data_rand(pl_data_t *d, uint64_t n) { return n ? next(&d->rng) % n : 0; }

static int from_bytes(pl_data_t *d, const unsigned char *bytes, size_t len, uint64_t seed) {
    if (len < 1024) return -EINVAL;
    d->tokens = malloc(len * sizeof *d->tokens);
    if (!d->tokens) return -ENOMEM;
    for (size_t i = 0; i < len; i++) d->tokens[i] = bytes[i];
    d->n_tokens = len;
    d->n_train = len - len / 10;
    d->vocab = 256;
    d->rng = seed;
    return 0;
}

int pl_data_open_text(pl_data_t *d, const char *path, uint64_t seed) {
    memset(d, 0, sizeof *d);
    if (!path) {
        size_t len;
        const unsigned char *c = pl_data_builtin_corpus(&len);
        return from_bytes(d, c, len, seed);
    }
    FILE *f = fopen(path, "rb");
    if (!f) return -errno;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (pl_grow_first((void **)&buf, &cap, len + 1, 1, 1 << 16)) {
            rc = -ENOMEM;
            break;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = -EIO;
            break;
        }
    }
    fclose(f);
    if (rc == 0) rc = from_bytes(d, buf, len, seed);
    free(buf);
    return rc;
}

int pl_data_open_synthetic(pl_data_t *d, int vocab, size_t n_tokens, uint64_t seed) {
    memset(d, 0, sizeof *d);
    if (vocab < 2 || n_tokens < 16) return -EINVAL;
    d->tokens = malloc(n_tokens * sizeof *d->tokens);
    if (!d->tokens) return -ENOMEM;
    uint64_t s = seed ^ 0xA5A5A5A5ULL;
    uint64_t prev = next(&s) % (uint64_t)vocab;
    for (size_t i = 0; i < n_tokens; i++) {
        uint64_t r = next(&s);
        uint64_t off = (r & 3) == 3 ? (r >> 8) % 8 : (r & 3); /* mostly 0..2, sometimes up to 7 */
        prev = (prev * 31 + 7 + off) % (uint64_t)vocab;
        d->tokens[i] = (int32_t)prev;
    }
    d->n_tokens = n_tokens;
    d->n_train = n_tokens - n_tokens / 10;
    d->vocab = vocab;
    d->rng = seed;
    return 0;
}

void pl_data_batch(pl_data_t *d, bool validation, int B, int T, int *inputs, int *targets) {
    size_t lo = validation ? d->n_train : 0, hi = validation ? d->n_tokens : d->n_train;
    size_t span = hi - lo > (size_t)T + 1 ? hi - lo - (size_t)T - 1 : 1;
    for (int b = 0; b < B; b++) {
        size_t off = lo + (size_t)pl_data_rand(d, span);
        for (int t = 0; t < T; t++) {
            size_t i = off + (size_t)t;
            inputs[b * T + t] = d->tokens[i % d->n_tokens];
            targets[b * T + t] = d->tokens[(i + 1) % d->n_tokens];
        }
    }
}

void pl_data_close(pl_data_t *d) {
    free(d->tokens);
    memset(d, 0, sizeof *d);
}
