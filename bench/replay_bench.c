/* replay_bench: plateau tune's replay speed (tune/replay.c, tune.c).
 *
 * Generates a device allocation sequence of N events (default 10M), either `random` (half allocations, half frees
 * in random order; a live set of about 4000 tensors, sizes from 512 B to 64 MiB, mostly small, three streams: the
 * allocator's hard case) or `training` (allocator/workload.h's transformer forward/backward, repeated for enough
 * steps: activations freed in reverse, parameters kept), then measures
 * events per second of pl_replay_run for four configs (one thread each, sequentially), and of pl_tune_run over a
 * grid on every core (aggregate events/s = configs x events / wall time). Target: >= 20M events/s per config.
 * Each config runs on the replay's fast path (the allocator's unlocked handle API, what plateau tune uses) and, for
 * comparison in the same run, on the locked public API with a tracking hook (the previous implementation); both must
 * give the same peaks and device calls (checked here too).
 * usage: replay_bench [N_EVENTS] [--seq random|training] [--grid SPEC] [--jobs N] [--path fast|locked|both]
 *                     [--configs 0,1,2,3] [--no-grid] [--repeat N]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"
#include "tune.h"
#include "workload.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: what a config's replay costs, less disturbed than wall time on a shared machine */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t draw_size(void) {
    uint64_t r = rng() % 100;
    if (r < 60) return 512 + rng() % (64 * 1024);                 /* small activations, scalars */
    if (r < 90) return (1u << 20) + rng() % (4u << 20);           /* mid-size */
    return (8ull << 20) + rng() % (56ull << 20);                  /* large weights / buffers */
}

#define LIVE 4096

static int generate(pl_replay_seq_t *s, size_t n_events) {
    static uint64_t live[LIVE];
    size_t n_live = 0;
    uint64_t next_addr = 0x10000000ull;
    pl_replay_seq_init(s, n_events + 16);
    while (s->n_events + 1 < n_events) {
        bool do_alloc = n_live < LIVE / 2 || (n_live < LIVE && (rng() & 1));
        int rc;
        if (do_alloc) {
            uint64_t addr = next_addr;
            next_addr += 1u << 20;
            rc = pl_replay_seq_alloc(s, addr, draw_size(), rng() % 8 == 0 ? 1 + rng() % 2 : 0);
            live[n_live++] = addr;
        } else {
            size_t i = (size_t)(rng() % n_live);
            rc = pl_replay_seq_free_addr(s, live[i]);
            live[i] = live[--n_live];
        }
        if (rc) return rc;
    }
    return 0;
}

/* The training-like workload, its steps repeated until n_events; addresses are tensor ids (unique while live). */
static int generate_training(pl_replay_seq_t *s, size_t n_events) {
    pl_workload_params_t p;
    pl_workload_default(&p);
    pl_workload_t w;
    int rc = pl_workload_generate(&p, &w);
    if (rc) return rc;
    pl_replay_seq_init(s, n_events + 16);
    while (!rc && s->n_events + 1 < n_events) {
        for (size_t i = 0; !rc && i < w.n_ops && s->n_events + 1 < n_events; i++) {
            const pl_workload_op_t *op = &w.ops[i];
            if (op->kind == PL_WORKLOAD_ALLOC)
                rc = pl_replay_seq_alloc(s, 0x1000 + (uint64_t)op->id * 16, op->size_bytes, 0);
            else if (op->kind == PL_WORKLOAD_FREE)
                rc = pl_replay_seq_free_addr(s, 0x1000 + (uint64_t)op->id * 16);
        }
    }
    pl_workload_free(&w);
    return rc;
}

int main(int argc, char **argv) {
    const char *seq = "random";
    size_t n_events = 10000000;
    const char *grid_spec = "expandable_segments=False|True;max_split_size_mb=default|256;roundup_power2_divisions=default|4";
    unsigned jobs = 0, repeat = 1;
    const char *path = "both", *only = NULL;
    bool grid = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--grid") && i + 1 < argc)
            grid_spec = argv[++i];
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc)
            seq = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--path") && i + 1 < argc)
            path = argv[++i];
        else if (!strcmp(argv[i], "--configs") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-grid"))
            grid = false;
        else
            n_events = (size_t)strtoull(argv[i], NULL, 10);
    }
    pl_replay_seq_t s;
    double t0 = now_s();
    if (strcmp(seq, "random") ? generate_training(&s, n_events) : generate(&s, n_events)) {
        fprintf(stderr, "replay_bench: cannot generate the sequence\n");
        return 1;
    }
    double t_gen = now_s() - t0;
    printf("replay_bench: %s sequence, %zu events (%zu allocs, %zu frees, %u slots, %zu streams), built in %.2f s (%.1fM events/s)\n",
           seq, s.n_events, s.n_allocs, s.n_frees, s.n_slots, s.n_streams, t_gen, (double)s.n_events / t_gen / 1e6);
    static const char *confs[] = {"", "expandable_segments:True", "max_split_size_mb:256", "roundup_power2_divisions:4"};
    char err[1024];
    bool run_fast = strcmp(path, "locked") != 0, run_locked = strcmp(path, "fast") != 0;
    printf("%-28s %-7s %8s %10s %8s %10s %12s %10s\n", "config", "path", "wall s", "Mev/s", "cpu s", "Mev/s cpu",
           "peak resv", "dev calls");
    for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
        char idx[4];
        snprintf(idx, sizeof idx, "%zu", i);
        if (only && !strstr(only, idx)) continue;
        pl_alloc_config_t cfg;
        pl_alloc_config_parse(confs[i], &cfg, err, sizeof err);
        pl_replay_result_t res[2];
        for (unsigned rep = 0; rep < repeat; rep++)
            for (int k = 0; k < 2; k++) {
                if ((k == 0 && !run_fast) || (k == 1 && !run_locked)) continue;
                t0 = now_s();
                double c0 = cpu_s();
                if (pl_replay_run_path(&s, &cfg, 0, k ? PL_REPLAY_PATH_LOCKED : PL_REPLAY_PATH_FAST, &res[k], err,
                                       sizeof err)) {
                    fprintf(stderr, "replay_bench: %s\n", err);
                    return 1;
                }
                double dt = now_s() - t0, dc = cpu_s() - c0;
                char b[32];
                pl_tune_format_bytes((double)res[k].peak_reserved_bytes, b, sizeof b);
                printf("%-28s %-7s %8.3f %10.2f %8.3f %10.2f %12s %10lld\n", confs[i][0] ? confs[i] : "(defaults)",
                       k ? "locked" : "fast", dt, (double)s.n_events / dt / 1e6, dc, (double)s.n_events / dc / 1e6, b,
                       (long long)res[k].n_device_calls);
            }
        const char *field = run_fast && run_locked ? pl_replay_result_diff(&res[0], &res[1]) : NULL;
        if (field) {
            fprintf(stderr, "replay_bench: %s: the fast and the locked path disagree (%s)\n", confs[i], field);
            return 1;
        }
    }
    if (!grid) {
        pl_replay_seq_free(&s);
        return 0;
    }
    pl_tune_grid_t *g = malloc(sizeof *g);
    if (!g || pl_tune_grid_parse(grid_spec, g, err, sizeof err)) {
        fprintf(stderr, "replay_bench: %s\n", g ? err : "out of memory");
        return 1;
    }
    pl_tune_t t;
    t0 = now_s();
    if (pl_tune_run(&s, g, 0, jobs, &t, err, sizeof err)) {
        fprintf(stderr, "replay_bench: %s\n", err);
        return 1;
    }
    double dt = now_s() - t0;
    size_t n_cfg = t.n_entries + (t.baseline.grid_index >= t.n_entries ? 1 : 0);
    printf("grid: %zu configs (+baseline when outside the grid: %zu replays) on %u threads in %.2f s: "
           "%.2fM events/s aggregate, %.2fM events/s per config\n",
           t.n_entries, n_cfg, t.n_threads, dt, (double)n_cfg * (double)s.n_events / dt / 1e6,
           (double)n_cfg * (double)s.n_events / dt / 1e6 / t.n_threads);
    pl_tune_free(&t);
    free(g);
    pl_replay_seq_free(&s);
    return 0;
}
