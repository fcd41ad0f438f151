/* bench/alloc_bench.c: the caching allocator's hot path and memory efficiency.
 *
 * Sequences: "training" = the bundled transformer forward/backward (allocator/workload.c: activations freed
 * in reverse, logits buffers, parameters and optimizer state kept); "mix" = batches of 64 sizes log-uniform in
 * 512 B .. 8 MiB, freed in reverse. Each is replayed once to warm up, then R times timed.
 * Per malloc+free pair (the ns of the malloc call + the ns of its free call, clock_gettime around each call,
 * timer overhead subtracted) we report median and p99 for: plateau (default config, sim device, address space
 * only), jemalloc (mallocx/dallocx of the same sizes) and naive (a backend mem_alloc/mem_free per request, what
 * an allocator without a cache does). Then, for 4 configs (default, max_split_size_mb:64, expandable_segments,
 * both): peak reserved, peak allocated, their ratio, and device calls (alloc + free + map + unmap).
 *   alloc_bench [--json] [--repeats R] [--steps N]
 * JSON keys are documented in docs/allocator.md ("alloc_bench").
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jemalloc/jemalloc.h>

#include <plateau/alloc.h>

#include "backend.h"
#include "check.h"
#include "workload.h"

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef enum { IMPL_PLATEAU, IMPL_JEMALLOC, IMPL_NAIVE } impl_t;
static const char *const impl_names[] = {"plateau", "jemalloc", "naive"};

typedef struct ctx {
    impl_t impl;
    pl_alloc_t *a;
    pl_backend_t *be;
    size_t *naive_sizes; /* per id, for mem_free */
} ctx_t;

static inline void *do_malloc(ctx_t *c, size_t size, uint32_t id) {
    switch (c->impl) {
    case IMPL_PLATEAU: return pl_alloc_malloc(c->a, size, 0);
    case IMPL_JEMALLOC: return mallocx(size ? size : 1, 0);
    default: {
        uintptr_t p;
        size_t s = (size + 511) / 512 * 512;
        if (!s) s = 512;
        if (c->be->ops->mem_alloc(c->be, s, &p)) return NULL;
        c->naive_sizes[id] = s;
        return (void *)p;
    }
    }
}

static inline void do_free(ctx_t *c, void *p, uint32_t id) {
    switch (c->impl) {
    case IMPL_PLATEAU: pl_alloc_free(c->a, p); break;
    case IMPL_JEMALLOC: dallocx(p, 0); break;
    default: c->be->ops->mem_free(c->be, (uintptr_t)p, c->naive_sizes[id]); break;
    }
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

typedef struct timing {
    double median_ns, p99_ns; /* per pair, per-call timers (overhead subtracted) */
    double mean_ns;           /* per pair, one timer around whole untimed replays: no timer noise */
    size_t n_pairs;
} timing_t;

/* Replays w `repeats` times after one warm-up; returns pair timings. */
static timing_t time_impl(impl_t impl, const pl_workload_t *w, int repeats, int64_t timer_ns) {
    ctx_t c = {.impl = impl};
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.touch = false;
    PL_CHECK(pl_backend_sim_create(&so, &c.be) == 0);
    if (impl == IMPL_PLATEAU) {
        pl_alloc_config_t cfg;
        pl_alloc_config_default(&cfg);
        char err[256];
        PL_CHECK(pl_alloc_create(c.be, &cfg, &c.a, err, sizeof err) == 0);
    }
    void **ptrs = calloc(w->n_ids, sizeof *ptrs);
    int64_t *t_alloc = calloc(w->n_ids, sizeof *t_alloc);
    c.naive_sizes = calloc(w->n_ids, sizeof *c.naive_sizes);
    size_t cap = (size_t)repeats * w->n_allocs;
    int64_t *pairs = malloc(cap * sizeof *pairs);
    PL_CHECK(ptrs && t_alloc && c.naive_sizes && pairs);
    size_t n = 0;
    for (int r = 0; r <= repeats; r++) {
        for (size_t i = 0; i < w->n_ops; i++) {
            const pl_workload_op_t *op = &w->ops[i];
            if (op->kind == PL_WORKLOAD_ALLOC) {
                int64_t t0 = now_ns();
                ptrs[op->id] = do_malloc(&c, op->size_bytes, op->id);
                t_alloc[op->id] = now_ns() - t0;
                PL_CHECK(ptrs[op->id]);
            } else if (op->kind == PL_WORKLOAD_FREE) {
                int64_t t0 = now_ns();
                do_free(&c, ptrs[op->id], op->id);
                int64_t t = now_ns() - t0;
                ptrs[op->id] = NULL;
                if (r > 0 && n < cap) pairs[n++] = t_alloc[op->id] + t - 2 * timer_ns;
            }
        }
        for (uint32_t id = 0; id < w->n_ids; id++)
            if (ptrs[id]) {
                do_free(&c, ptrs[id], id);
                ptrs[id] = NULL;
            }
    }
    /* the same replays without per-call timers, for the mean */
    int64_t t_all = now_ns();
    for (int r = 0; r < repeats; r++) {
        for (size_t i = 0; i < w->n_ops; i++) {
            const pl_workload_op_t *op = &w->ops[i];
            if (op->kind == PL_WORKLOAD_ALLOC) {
                ptrs[op->id] = do_malloc(&c, op->size_bytes, op->id);
            } else if (op->kind == PL_WORKLOAD_FREE) {
                do_free(&c, ptrs[op->id], op->id);
                ptrs[op->id] = NULL;
            }
        }
        for (uint32_t id = 0; id < w->n_ids; id++)
            if (ptrs[id]) {
                do_free(&c, ptrs[id], id);
                ptrs[id] = NULL;
            }
    }
    t_all = now_ns() - t_all;
    qsort(pairs, n, sizeof *pairs, cmp_i64);
    timing_t t = {.n_pairs = n, .mean_ns = (double)t_all / (double)((size_t)repeats * w->n_allocs)};
    if (n) {
        t.median_ns = (double)pairs[n / 2];
        t.p99_ns = (double)pairs[(size_t)((double)n * 0.99)];
    }
    free(pairs);
    free(ptrs);
    free(t_alloc);
    free(c.naive_sizes);
    if (c.a) pl_alloc_destroy(c.a);
    pl_backend_destroy(c.be);
    return t;
}

typedef struct mem_result {
    const char *conf;
    int64_t peak_reserved, peak_allocated, device_calls, n_device_alloc, n_device_free, n_map, n_unmap;
} mem_result_t;

static mem_result_t measure_config(const char *conf, const pl_workload_t *w) {
    mem_result_t m = {.conf = conf};
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.touch = false;
    pl_backend_t *be;
    PL_CHECK(pl_backend_sim_create(&so, &be) == 0);
    pl_alloc_config_t cfg;
    char err[512];
    PL_CHECK(pl_alloc_config_parse(conf, &cfg, err, sizeof err) == 0);
    pl_alloc_t *a;
    PL_CHECK(pl_alloc_create(be, &cfg, &a, err, sizeof err) == 0);
    void **ptrs = calloc(w->n_ids, sizeof *ptrs);
    PL_CHECK(ptrs);
    PL_CHECK(pl_workload_replay(w, a, ptrs, 1, NULL) == 0);
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    m.peak_reserved = s.reserved_bytes[PL_POOL_ALL].peak;
    m.peak_allocated = s.allocated_bytes[PL_POOL_ALL].peak;
    m.n_device_alloc = s.num_device_alloc;
    m.n_device_free = s.num_device_free;
    m.n_map = s.num_device_map;
    m.n_unmap = s.num_device_unmap;
    m.device_calls = m.n_device_alloc + m.n_device_free + m.n_map + m.n_unmap;
    free(ptrs);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
    return m;
}

/* The "mix" sequence: batches of 64 log-uniform sizes 512 B .. 8 MiB, freed in reverse. */
static int make_mix(pl_workload_t *w, int n_batches) {
    memset(w, 0, sizeof *w);
    size_t n = (size_t)n_batches * 128;
    w->ops = calloc(n, sizeof *w->ops);
    if (!w->ops) return -ENOMEM;
    uint64_t s = 12345;
    for (int b = 0; b < n_batches; b++) {
        for (uint32_t i = 0; i < 64; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0;
            size_t size = (size_t)(512.0 * __builtin_exp2(u * 14.0)); /* 512 B .. 8 MiB */
            w->ops[w->n_ops++] = (pl_workload_op_t){PL_WORKLOAD_ALLOC, i, size};
            w->n_allocs++;
        }
        for (int i = 63; i >= 0; i--) w->ops[w->n_ops++] = (pl_workload_op_t){PL_WORKLOAD_FREE, (uint32_t)i, 0};
    }
    w->n_ids = 64;
    return 0;
}

static int64_t timer_overhead(void) {
    int64_t v[4097];
    for (int i = 0; i < 4097; i++) {
        int64_t t0 = now_ns();
        v[i] = now_ns() - t0;
    }
    qsort(v, 4097, sizeof v[0], cmp_i64);
    return v[2048];
}

int main(int argc, char **argv) {
    int json = 0, repeats = 5;
    pl_workload_params_t wp;
    pl_workload_default(&wp);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            wp.n_steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--json] [--repeats R] [--steps N]\n", argv[0]);
            return 2;
        }
    }
    PL_CHECK(repeats > 0);
    pl_workload_t train, mix;
    PL_CHECK(pl_workload_generate(&wp, &train) == 0);
    PL_CHECK(make_mix(&mix, 200) == 0);
    int64_t tov = timer_overhead();
    const pl_workload_t *seqs[2] = {&train, &mix};
    const char *seq_names[2] = {"training", "mix"};
    timing_t t[2][3];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 3; i++) t[s][i] = time_impl((impl_t)i, seqs[s], repeats, tov);
    static const char *const confs[4] = {"", "max_split_size_mb:64", "expandable_segments:True",
                                         "max_split_size_mb:64,expandable_segments:True"};
    static const char *const conf_names[4] = {"default", "max_split_size_mb:64", "expandable_segments",
                                              "max_split_size_mb:64+expandable_segments"};
    mem_result_t m[4];
    for (int i = 0; i < 4; i++) m[i] = measure_config(confs[i], &train);

    if (json) {
        printf("{\"timer_overhead_ns\":%lld,\"repeats\":%d,\"steps\":%d,\"timing\":{", (long long)tov, repeats,
               wp.n_steps);
        for (int s = 0; s < 2; s++) {
            printf("%s\"%s\":{", s ? "," : "", seq_names[s]);
            for (int i = 0; i < 3; i++)
                printf("%s\"%s\":{\"median_ns\":%.0f,\"p99_ns\":%.0f,\"mean_ns\":%.0f,\"pairs\":%zu}", i ? "," : "",
                       impl_names[i], t[s][i].median_ns, t[s][i].p99_ns, t[s][i].mean_ns, t[s][i].n_pairs);
            printf("}");
        }
        printf("},\"configs\":[");
        for (int i = 0; i < 4; i++)
            printf("%s{\"name\":\"%s\",\"conf\":\"%s\",\"peak_reserved_bytes\":%lld,\"peak_allocated_bytes\":%lld,"
                   "\"peak_ratio\":%.4f,\"device_calls\":%lld,\"num_device_alloc\":%lld,\"num_device_free\":%lld,"
                   "\"num_device_map\":%lld,\"num_device_unmap\":%lld}",
                   i ? "," : "", conf_names[i], m[i].conf, (long long)m[i].peak_reserved,
                   (long long)m[i].peak_allocated, (double)m[i].peak_reserved / (double)m[i].peak_allocated,
                   (long long)m[i].device_calls, (long long)m[i].n_device_alloc, (long long)m[i].n_device_free,
                   (long long)m[i].n_map, (long long)m[i].n_unmap);
        printf("]}\n");
    } else {
        printf("alloc_bench: training sequence %d steps (%zu allocations), mix 200 x 64; %d timed repeats; timer "
               "overhead %lld ns subtracted\n\n",
               wp.n_steps, train.n_allocs, repeats, (long long)tov);
        printf("%-10s %-10s %12s %12s %12s %10s\n", "sequence", "impl", "median ns", "p99 ns", "mean ns", "pairs");
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++)
                printf("%-10s %-10s %12.0f %12.0f %12.0f %10zu\n", seq_names[s], impl_names[i], t[s][i].median_ns,
                       t[s][i].p99_ns, t[s][i].mean_ns, t[s][i].n_pairs);
        printf("\n%-42s %14s %14s %7s %13s\n", "config (training sequence)", "peak reserved", "peak allocated",
               "ratio", "device calls");
        for (int i = 0; i < 4; i++)
            printf("%-42s %10.1f MiB %10.1f MiB %7.3f %13lld\n", conf_names[i], (double)m[i].peak_reserved / 1048576.0,
                   (double)m[i].peak_allocated / 1048576.0, (double)m[i].peak_reserved / (double)m[i].peak_allocated,
                   (long long)m[i].device_calls);
    }
    pl_workload_free(&train);
    pl_workload_free(&mix);
    return 0;
}
