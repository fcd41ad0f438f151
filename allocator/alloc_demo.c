/* allocator/alloc_demo.c: plateau-alloc-demo, the caching allocator on its own, without a tracer or a model (the
 * whole pipeline's demo is `make demo`, tools/demo.sh). Replays the bundled training-like allocation sequence
 * (allocator/workload.c: a transformer's forward/backward, activations freed in reverse, logits buffers, parameters
 * and AdamW state kept) through the caching allocator on the sim device, under the config of PLATEAU_ALLOC_CONF (else
 * PYTORCH_CUDA_ALLOC_CONF) and the device of PLATEAU_SIM_DEVICE (default capacity:80GiB,touch:0), and prints
 * PyTorch-style memory stats.
 *   plateau-alloc-demo [--steps N] [--layers N] [--fixed-seq] [--empty-cache-each-step]
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/alloc.h>

#include "check.h"
#include "units.h"
#include "workload.h"

static const char *human(char *buf, size_t len, double bytes) {
    return pl_units_format(bytes, PL_UNITS_FIXED2, buf, len);
}

static void row(const char *name, const pl_stat_t s[PL_POOL_N], bool bytes) {
    static const char *pools[] = {"", "small pool", "large pool"};
    for (int p = 0; p < PL_POOL_N; p++) {
        char c[32], k[32], a[32], f[32];
        if (bytes) {
            human(c, sizeof c, (double)s[p].current);
            human(k, sizeof k, (double)s[p].peak);
            human(a, sizeof a, (double)s[p].allocated);
            human(f, sizeof f, (double)s[p].freed);
        } else {
            snprintf(c, sizeof c, "%lld", (long long)s[p].current);
            snprintf(k, sizeof k, "%lld", (long long)s[p].peak);
            snprintf(a, sizeof a, "%lld", (long long)s[p].allocated);
            snprintf(f, sizeof f, "%lld", (long long)s[p].freed);
        }
        char label[64];
        if (p == 0)
            snprintf(label, sizeof label, "%s", name);
        else
            snprintf(label, sizeof label, "      from %s", pools[p]);
        printf("| %-28s | %12s | %12s | %12s | %12s |\n", label, c, k, a, f);
    }
}

/* Options into *wp and *empty_each_step; returns false on an unknown one. */
static bool parse(int argc, char **argv, pl_workload_params_t *wp, int *empty_each_step) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            wp->n_steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            wp->n_layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fixed-seq"))
            wp->vary_seq = 0;
        else if (!strcmp(argv[i], "--empty-cache-each-step"))
            *empty_each_step = 1;
        else
            return false;
    }
    return true;
}

static void print_step(pl_alloc_t *a, int step) {
    char b1[32], b2[32];
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    printf("%4d  %-12s  %-12s\n", step, human(b1, sizeof b1, (double)s.reserved_bytes[0].current),
           human(b2, sizeof b2, (double)s.allocated_bytes[0].current));
}

/* Replay w through a step by step, printing reserved and allocated at each step's end. Returns 1 at the first
 * allocation that fails (after saying so), else 0. */
static int replay(pl_alloc_t *a, const pl_workload_t *w, void **ptrs, int empty_each_step) {
    int step = -1, rc = 0;
    printf("step  reserved      allocated\n");
    for (size_t i = 0; i < w->n_ops && !rc; i++) {
        const pl_workload_op_t *op = &w->ops[i];
        if (op->kind == PL_WORKLOAD_STEP) {
            if (step >= 0) {
                print_step(a, step);
                if (empty_each_step) pl_alloc_empty_cache(a);
            }
            step = (int)op->id;
        } else if (op->kind == PL_WORKLOAD_ALLOC) {
            ptrs[op->id] = pl_alloc_malloc(a, op->size_bytes, 0);
            if (!ptrs[op->id]) {
                printf("\nstep %d: %s\n", step, pl_alloc_last_error());
                rc = 1;
            }
        } else {
            pl_alloc_free(a, ptrs[op->id]);
            ptrs[op->id] = NULL;
        }
    }
    if (!rc) print_step(a, step);
    return rc;
}

/* The PyTorch-style memory stats table and summary lines. */
static void print_stats(pl_alloc_t *a) {
    char b1[32], b2[32];
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    printf("\n|==================================================================================|\n");
    printf("| %-28s | %12s | %12s | %12s | %12s |\n", "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed");
    printf("|----------------------------------------------------------------------------------|\n");
    row("Allocated memory", s.allocated_bytes, true);
    row("Active memory", s.active_bytes, true);
    row("Requested memory", s.requested_bytes, true);
    row("GPU reserved memory", s.reserved_bytes, true);
    row("Non-releasable memory", s.inactive_split_bytes, true);
    row("Allocations", s.allocation, false);
    row("Active allocs", s.active, false);
    row("GPU reserved segments", s.segment, false);
    row("Non-releasable allocs", s.inactive_split, false);
    printf("|==================================================================================|\n");
    printf("num_alloc_retries %lld, num_ooms %lld, device alloc/free %lld/%lld, map/unmap %lld/%lld\n",
           (long long)s.num_alloc_retries, (long long)s.num_ooms, (long long)s.num_device_alloc,
           (long long)s.num_device_free, (long long)s.num_device_map, (long long)s.num_device_unmap);
    printf("largest free block %s, releasable %s, fragmentation %.3f\n",
           human(b1, sizeof b1, (double)s.largest_free_bytes), human(b2, sizeof b2, (double)s.releasable_bytes),
           s.fragmentation);
    printf("peak reserved %s, peak allocated %s, ratio %.3f\n",
           human(b1, sizeof b1, (double)s.reserved_bytes[0].peak), human(b2, sizeof b2, (double)s.allocated_bytes[0].peak),
           s.allocated_bytes[0].peak ? (double)s.reserved_bytes[0].peak / (double)s.allocated_bytes[0].peak : 0.0);
}

int main(int argc, char **argv) {
    pl_workload_params_t wp;
    pl_workload_default(&wp);
    int empty_each_step = 0;
    if (!parse(argc, argv, &wp, &empty_each_step)) {
        fprintf(stderr, "usage: %s [--steps N] [--layers N] [--fixed-seq] [--empty-cache-each-step]\n"
                        "config: PLATEAU_ALLOC_CONF (else PYTORCH_CUDA_ALLOC_CONF); device: PLATEAU_SIM_DEVICE\n",
                argv[0]);
        return 2;
    }
    char err[1024];
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.touch = false; /* the demo never writes: address space only */
    const char *dev = getenv("PLATEAU_SIM_DEVICE");
    if (dev && pl_sim_options_parse(dev, &so, err, sizeof err)) {
        fprintf(stderr, "plateau-alloc-demo: PLATEAU_SIM_DEVICE: %s\n", err);
        return 2;
    }
    pl_backend_t *be;
    PL_CHECK(pl_backend_sim_create(&so, &be) == 0, "bad PLATEAU_SIM_DEVICE values");
    pl_alloc_t *a;
    if (pl_alloc_create(be, NULL, &a, err, sizeof err)) {
        fprintf(stderr, "plateau-alloc-demo: %s\n", err);
        return 2;
    }
    pl_alloc_config_t cfg;
    PL_CHECK(pl_alloc_config_from_env(&cfg, err, sizeof err) == 0, err);
    char conf[512];
    pl_alloc_config_format(&cfg, conf, sizeof conf);

    pl_workload_t w;
    PL_CHECK(pl_workload_generate(&wp, &w) == 0, "out of memory generating the workload");
    void **ptrs = calloc(w.n_ids, sizeof *ptrs);
    PL_CHECK(ptrs, "out of memory");
    char b1[32];
    printf("plateau-alloc-demo: %d steps of a %d-layer transformer (C=%d, B=%d, T<=%d, V=%d): %zu allocations\n",
           wp.n_steps, wp.n_layers, wp.d_model, wp.batch, wp.max_seq, wp.vocab, w.n_allocs);
    printf("config: %s\ndevice: sim, capacity %s\n\n", conf[0] ? conf : "(defaults)",
           human(b1, sizeof b1, (double)so.capacity_bytes));
    int rc = replay(a, &w, ptrs, empty_each_step);
    print_stats(a);
    for (uint32_t id = 0; id < w.n_ids; id++)
        if (ptrs[id]) pl_alloc_free(a, ptrs[id]);
    free(ptrs);
    pl_workload_free(&w);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return rc;
}
