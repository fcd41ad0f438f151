/* Synthetic plateau traces for the report tests (tests/reports/test_extract.c, tests/cli/test_report.c), written
 * with the tracer's own writer (tracer/write/writer.h), so the reports read exactly what the preload would write.
 *
 * One trace = one process that runs n_steps steps of 1 s each:
 *  - device (alloc_stats, capacity 16 GiB): allocated ramps from 1 GiB to 5 GiB over `warmup` steps, then flat
 *    (a warmup plateau); reserved 1 GiB above it; tensor count ramps 100 -> 500, then flat;
 *  - host: every step, stack 1 (leaky_collect <- main) allocates `leak_bytes` that are never freed, stack 2
 *    (scratch_buffer <- main) allocates 1 MiB and frees it in the same step; the heap record's live bytes follow
 *    (100 MB base + the leak, with a small deterministic wobble); RSS anon follows the heap, RssFile is flat;
 *  - sample_bytes = 0: every allocation is recorded (exact weights).
 * With clean_end a process_end record closes the trace. with_steps = false writes periodic samples only (step 0).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer.h"

typedef struct synth_cfg {
    uint32_t pid, ppid;
    int n_steps;
    int warmup;            /* device warmup steps */
    uint64_t leak_bytes;   /* per step from leaky_collect (0 = no host leak) */
    bool clean_end;
    bool with_steps;
    bool device;           /* write alloc_stats */
    bool teardown;         /* after the last step: everything freed (allocated 0, heap 0, the leaked blocks too), tagged
                              step 0 */
    const char *leak_symbol; /* the leaking frame's dladdr name (NULL = "leaky_collect") */
    uint64_t lost_records;   /* > 0: one `lost` record of this many, halfway through */
    int64_t start_realtime_ns; /* trace start, CLOCK_REALTIME (0 = 2023-11-14) */
    const char *exe;         /* the process's executable (NULL = /usr/bin/python3) */
    bool ranked;             /* a distributed rank: rank, local_rank below (else both -1) */
    int32_t rank, local_rank;
    const char *node;        /* host name in process_start (NULL = none, as in traces before 1.7) */
    int64_t t0_ns;           /* CLOCK_MONOTONIC at trace start (0 = 1 s) */
    const char *const *argv; /* NULL = python3 train.py --steps */
    uint32_t n_argv;
    int64_t base_bytes;      /* live heap before the leak (0 = 100 MB) */
    bool no_pss;             /* no PSS in any RSS sample (a process that lived < 5 s, or PLATEAU_PSS=0) */
    bool no_rss;             /* no RSS sample at all (a worker that ended before the sampler's first read) */
    int64_t step_ns;         /* a step's length (0 = 1 s) */
    int leak_from;           /* the host leak starts at this step (0 = the first): a leak that starts mid-run */
    uint64_t pss_per_step;   /* PSS climbs by this much a step while RSS and the heap do not (copy-on-access) */
    int64_t startup_ns;      /* > 0: the steps begin this much after the trace starts (imports, building a dataset),
                              * with one heap sample at the start: the first step's point then spans the start-up */
    uint64_t sample_bytes;   /* process_start's sampling rate (0: every allocation recorded, exact weights) */
} synth_cfg_t;

static inline synth_cfg_t synth_default(void) {
    return (synth_cfg_t){.pid = 4242, .ppid = 1, .n_steps = 160, .warmup = 50, .leak_bytes = 256 * 1024,
                         .clean_end = true, .with_steps = true, .device = true};
}

static inline int synth_emit(pl_writer_t *w, pl_trace_record_t *r, int *since_flush) {
    int rc = pl_writer_emit(w, r);
    if (rc) return rc;
    if (++*since_flush >= 64) {
        *since_flush = 0;
        return pl_writer_flush(w);
    }
    return 0;
}

/* Write the trace to path (must not exist). Returns 0 or a negative errno. */
static inline int synth_trace(const char *path, const synth_cfg_t *c) {
    const int64_t t0 = c->t0_ns ? c->t0_ns : 1000000000LL, sec = c->step_ns ? c->step_ns : 1000000000LL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = c->pid, .ppid = c->ppid, .exec_seq = 0,
                           .start_realtime_ns = c->start_realtime_ns ? c->start_realtime_ns : 1700000000000000000LL,
                           .start_mono_ns = t0};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    pl_writer_t *w;
    int rc = pl_writer_open(path, &h, &opt, &w);
    if (rc) return rc;
    int nf = 0;
    pl_trace_record_t r;
#define EMIT() do { if ((rc = synth_emit(w, &r, &nf))) goto out; } while (0)
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_START;
    r.t_ns = t0;
    r.u.process = (pl_rec_process_t){.pid = c->pid, .ppid = c->ppid, .rank = c->ranked ? c->rank : -1,
                                     .local_rank = c->ranked ? c->local_rank : -1, .node = c->node,
                                     .sample_bytes = c->sample_bytes, .interval_ns = 100000000, .host_mem_bytes = 64ull << 30,
                                     .cgroup_max_bytes = PL_TRACE_NA, .start_realtime_ns = h.start_realtime_ns,
                                     .exe = c->exe ? c->exe : "/usr/bin/python3", .argc = 3, .n_argv = 3};
    r.u.process.argv[0] = "python3";
    r.u.process.argv[1] = "train.py";
    r.u.process.argv[2] = "--steps";
    if (c->argv) {
        r.u.process.argc = r.u.process.n_argv = c->n_argv < PL_TRACE_MAX_ARGV ? c->n_argv : PL_TRACE_MAX_ARGV;
        for (uint32_t i = 0; i < r.u.process.n_argv; i++) r.u.process.argv[i] = c->argv[i];
    }
    EMIT();
    static const struct { uint64_t pc; uint32_t mod; const char *sym; } frames[] = {
        {0x7f0000001000ull, 1, "malloc"}, {0x401000, 2, "leaky_collect"}, {0x402000, 2, "scratch_buffer"},
        {0x403000, 2, "main"}};
    memset(&r, 0, sizeof r);
    r.type = PL_REC_MODULE;
    r.t_ns = t0;
    r.u.module = (pl_rec_module_t){.module_id = 1, .base = 0x7f0000000000ull, .path = "/opt/plateau/libplateau_preload.so"};
    EMIT();
    r.u.module = (pl_rec_module_t){.module_id = 2, .base = 0x400000, .path = "/opt/app/trainer"};
    EMIT();
    for (int i = 0; i < 4; i++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_FRAME;
        r.t_ns = t0;
        r.u.frame = (pl_rec_frame_t){.pc = frames[i].pc, .module_id = frames[i].mod,
                                     .module_offset = frames[i].pc & 0xffff,
                                     .symbol = i == 1 && c->leak_symbol ? c->leak_symbol : frames[i].sym,
                                     .symbol_offset = 0x1c};
        EMIT();
    }
    for (uint32_t id = 1; id <= 2; id++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STACK;
        r.t_ns = t0;
        r.u.stack.stack_id = id;
        r.u.stack.n_frames = 3;
        r.u.stack.pcs[0] = frames[0].pc;
        r.u.stack.pcs[1] = frames[id].pc;
        r.u.stack.pcs[2] = frames[3].pc;
        EMIT();
    }
    uint64_t leaked = 0;
    int64_t n_leaked = 0;
    if (c->startup_ns > 0) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = t0 + 1000;
        r.u.heap = (pl_rec_heap_t){.live_bytes = c->base_bytes ? c->base_bytes : 100000000, .live_count = 5000};
        EMIT();
    }
    for (int s = 1; s <= c->n_steps; s++) {
        int64_t t = t0 + (c->startup_ns > 0 ? c->startup_ns : 0) + s * sec;
        uint64_t step = c->with_steps ? (uint64_t)s : 0;
        /* host: the leak and the scratch buffer */
        if (c->leak_bytes && s >= c->leak_from) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HOST_ALLOC;
            r.t_ns = t + 1000;
            r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x10000000ull + (uint64_t)s * 0x100000ull,
                                                   .size = c->leak_bytes, .stack_id = 1, .tid = c->pid};
            EMIT();
            leaked += c->leak_bytes;
            n_leaked++;
        }
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HOST_ALLOC;
        r.t_ns = t + 2000;
        r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x90000000ull, .size = 1 << 20, .stack_id = 2, .tid = c->pid};
        EMIT();
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HOST_FREE;
        r.t_ns = t + 3000;
        r.u.host_free = (pl_rec_host_free_t){.addr = 0x90000000ull, .tid = c->pid};
        EMIT();
        if (c->device) {
            double f = s >= c->warmup ? 1.0 : (double)s / c->warmup;
            memset(&r, 0, sizeof r);
            r.type = PL_REC_ALLOC_STATS;
            r.t_ns = t + 4000;
            int64_t alloc = (int64_t)((1.0 + 4.0 * f) * (double)(1 << 30)) + (s % 3) * 4096;
            r.u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = 1, .device = 0, .step = step,
                                                     .allocated_bytes = alloc, .reserved_bytes = alloc + (1LL << 30),
                                                     .n_allocations = 100 + (int64_t)(400 * f),
                                                     .capacity_bytes = 16ull << 30};
            EMIT();
        }
        int64_t wobble = (int64_t)((s * 7919) % 13) * 4096;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = t + 5000;
        r.u.heap = (pl_rec_heap_t){.step = step,
                                   .live_bytes = (c->base_bytes ? c->base_bytes : 100000000) + (int64_t)leaked + wobble,
                                   .live_count = 5000 + n_leaked, .n_alloc = (uint64_t)s * 2,
                                   .n_free = (uint64_t)s};
        EMIT();
        memset(&r, 0, sizeof r);
        r.type = PL_REC_RSS;
        r.t_ns = t + 6000;
        r.u.rss = (pl_rec_rss_t){.step = step, .rss_anon = 500000000ull + leaked + (uint64_t)wobble,
                                 .rss_file = 200000000ull, .rss_shmem = 0,
                                 .pss = c->no_pss ? PL_TRACE_NA : 690000000ull + leaked + (uint64_t)s * c->pss_per_step,
                                 .cgroup_current = PL_TRACE_NA, .device_used = PL_TRACE_NA,
                                 .device_total = PL_TRACE_NA};
        if (!c->no_rss) EMIT();
        if (c->lost_records && s == c->n_steps / 2) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_LOST;
            r.t_ns = t + 6500;
            r.u.lost = (pl_rec_lost_t){.n_records = c->lost_records, .n_bytes = c->lost_records * 48};
            EMIT();
        }
        if (c->with_steps) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_STEP;
            r.t_ns = t + 7000;
            r.u.step = (pl_rec_step_t){.step = (uint64_t)s, .source = PL_STEP_API_CALL};
            EMIT();
        }
    }
    if (c->teardown) {
        const int64_t t = t0 + c->n_steps * sec + sec / 2;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_ALLOC_STATS;
        r.t_ns = t;
        r.u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = 1, .step = 0, .reserved_bytes = 1LL << 30,
                                                 .capacity_bytes = 16ull << 30};
        EMIT();
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = t + 1000;
        r.u.heap = (pl_rec_heap_t){.step = 0, .live_bytes = 4096, .live_count = 1};
        EMIT();
        for (int s = 1; c->leak_bytes && s <= c->n_steps; s++) { /* a Python program frees what it kept at exit */
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HOST_FREE;
            r.t_ns = t + 2000 + s;
            r.u.host_free = (pl_rec_host_free_t){.addr = 0x10000000ull + (uint64_t)s * 0x100000ull, .tid = c->pid};
            EMIT();
        }
    }
    if (c->clean_end) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_PROCESS_END;
        r.t_ns = t0 + (c->n_steps + 1) * sec;
        EMIT();
    }
#undef EMIT
    rc = pl_writer_flush(w);
out:
    pl_writer_close(w);
    pl_writer_destroy(w);
    return rc;
}

/* Read a whole (small) file into a malloc'd buffer. */
static inline unsigned char *synth_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) *len = (size_t)n;
    return b;
}
