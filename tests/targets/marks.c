/* Target: plateau_mark() beside device events, for the exports (tests/cli/test_exports.sh). plateau's caching
 * allocator on the sim backend; each step allocates 4 blocks, frees them and keeps one 256 KiB block; marks at the
 * start, every 4th step ("eval, \"every 4\"": a comma and quotes for CSV and JSON) and one whose label is cut
 * inside a UTF-8 character. Usage: marks [STEPS=12]. Prints "marks N" (marks made). */
#include <plateau/alloc.h>

#include "target.h"

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 12), n_marks = 0;
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.capacity_bytes = 1ull << 30;
    pl_backend_t *be;
    PL_CHECK(pl_backend_sim_create(&so, &be) == 0);
    pl_alloc_config_t cfg;
    pl_alloc_config_default(&cfg);
    pl_alloc_t *a;
    char err[256];
    PL_CHECK(pl_alloc_create(be, &cfg, &a, err, sizeof err) == 0);
    mark("start");
    n_marks++;
    for (int s = 1; s <= steps; s++) {
        void *t[4];
        for (int i = 0; i < 4; i++) PL_CHECK((t[i] = pl_alloc_malloc(a, 8192u << i, 0)));
        for (int i = 0; i < 4; i++) pl_alloc_free(a, t[i]);
        PL_CHECK(pl_alloc_malloc(a, 256u << 10, 0));
        if (s % 4 == 0) {
            mark("eval, \"every 4\"");
            n_marks++;
        }
        if (s == 6) { /* 62 ASCII bytes, then a 2-byte character: the tracer keeps 63 bytes */
            mark("ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ\xc3\xa9");
            n_marks++;
        }
        step();
    }
    printf("marks %d\n", n_marks);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return 0;
}
