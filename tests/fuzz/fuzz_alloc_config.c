/* tests/fuzz/fuzz_alloc_config.c: the allocator config parser (PYTORCH_CUDA_ALLOC_CONF syntax) and the sim
 * device options. Properties: no crash or sanitizer report on any input; an accepted config formats to a
 * string that parses back to the identical struct; an accepted config drives a small allocator through a few
 * input-derived mallocs/frees with every invariant intact (pl_alloc_check). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/alloc.h>

/* declared with the allocator's internals (its sources are compiled in: not exported from libplateau_alloc.so) */
int pl_alloc_check(pl_alloc_t *a, char *err, size_t err_len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char err[1024];
    pl_sim_options_t so;
    (void)pl_sim_options_parse(s, &so, err, sizeof err);
    pl_alloc_config_t c, c2;
    if (pl_alloc_config_parse(s, &c, err, sizeof err) == 0) {
        char buf[2048];
        int n = pl_alloc_config_format(&c, buf, sizeof buf);
        if (n < 0 || (size_t)n >= sizeof buf) abort();
        if (pl_alloc_config_parse(buf, &c2, err, sizeof err) != 0) {
            fprintf(stderr, "formatted '%s' rejected: %s\n", buf, err);
            abort();
        }
        if (memcmp(&c, &c2, sizeof c)) {
            fprintf(stderr, "'%s' -> '%s' does not round-trip\n", s, buf);
            abort();
        }
        pl_sim_options_t o;
        pl_sim_options_default(&o);
        o.capacity_bytes = (size_t)256 << 20;
        o.touch = false;
        pl_backend_t *be;
        pl_alloc_t *a;
        if (pl_backend_sim_create(&o, &be) == 0) {
            if (pl_alloc_create(be, &c, &a, err, sizeof err) == 0) {
                void *p[8] = {0};
                for (size_t i = 0; i < size && i < 32; i++) {
                    size_t k = data[i] & 7;
                    if (p[k]) {
                        pl_alloc_free(a, p[k]);
                        p[k] = NULL;
                    } else {
                        p[k] = pl_alloc_malloc(a, (size_t)data[i] << (data[i] & 15 ? 8 + (data[i] & 15) : 0), 0);
                    }
                    if (pl_alloc_check(a, err, sizeof err)) {
                        fprintf(stderr, "invariant: %s\n", err);
                        abort();
                    }
                }
                for (int k = 0; k < 8; k++) pl_alloc_free(a, p[k]);
                pl_alloc_empty_cache(a);
                pl_alloc_destroy(a);
            }
            pl_backend_destroy(be);
        }
    }
    free(s);
    return 0;
}
