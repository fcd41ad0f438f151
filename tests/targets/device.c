/* Target: plateau's caching allocator on the sim backend. Each step allocates 8 blocks, frees them, keeps one
 * 1 MiB block (a tensor leak of one block per step). Usage: device [STEPS=10]. Prints "blocks N". */
#include <plateau/alloc.h>

#include "target.h"

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 10);
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
    void *kept[1000];
    for (int s = 0; s < steps; s++) {
        void *t[8];
        for (int i = 0; i < 8; i++) PL_CHECK((t[i] = pl_alloc_malloc(a, 4096u << i, 0)));
        for (int i = 0; i < 8; i++) pl_alloc_free(a, t[i]);
        PL_CHECK((kept[s] = pl_alloc_malloc(a, 1u << 20, 0)));
        step();
    }
    printf("blocks %d\n", steps);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return 0;
}
