/* Synthetic device traces for the replay / tune tests (tests/tune/test_replay.c, test_tune.c, tests/cli/
 * test_tune.c), written with the tracer's own writer (tracer/write/writer.h) as the preload would write them:
 *  - rs_record_workload: a real recording. An allocator on a sim device runs the training-like workload
 *    (allocator/workload.h) under a config; its event hook writes device_alloc/free/map/unmap/oom records
 *    (source allocator, allocator_id 1) and alloc_stats at each step and at the end, like preload/device.c.
 *  - rs_write_frag: a crafted fragmentation sequence (docs/tune.md): at a capacity of 100 MiB, 25 blocks of 4 MiB
 *    fill five 20 MiB segments, all but the middle block of each segment are freed, then 12 MiB is requested.
 *    The default config cannot place it (every segment is pinned by one live block) and runs out of memory;
 *    expandable segments unmap the free pages and fit it.
 *  - rs_write_no_device: a trace with steps and heap records but no device records.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <plateau/alloc.h>

#include "workload.h"
#include "writer.h"

#define RS_MIB ((uint64_t)1 << 20)
#define RS_FRAG_CAPACITY (100 * RS_MIB)

typedef struct rs_ctx {
    pl_writer_t *w;
    int since_flush;
    int rc;
} rs_ctx_t;

static inline void rs_emit(rs_ctx_t *c, const pl_trace_record_t *r) {
    if (c->rc) return;
    int rc = pl_writer_emit(c->w, r);
    if (!rc && ++c->since_flush >= 64) {
        c->since_flush = 0;
        rc = pl_writer_flush(c->w);
    }
    if (rc) c->rc = rc;
}

static inline int rs_open(const char *path, rs_ctx_t *c) {
    const int64_t t0 = 1000000000LL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 777, .ppid = 1, .start_mono_ns = t0,
                           .start_realtime_ns = 1700000000000000000LL};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    memset(c, 0, sizeof *c);
    int rc = pl_writer_open(path, &h, &opt, &c->w);
    if (rc) return rc;
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_START;
    r.t_ns = t0;
    r.u.process = (pl_rec_process_t){.pid = 777, .ppid = 1, .rank = -1, .local_rank = -1,
                                     .cgroup_max_bytes = PL_TRACE_NA, .exe = "/opt/app/train", .argc = 1,
                                     .n_argv = 1};
    r.u.process.argv[0] = "train";
    rs_emit(c, &r);
    return c->rc;
}

static inline int rs_close(rs_ctx_t *c, bool end) {
    if (end) {
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_PROCESS_END;
        r.t_ns = 2000000000LL;
        rs_emit(c, &r);
    }
    int rc = c->rc ? c->rc : pl_writer_flush(c->w);
    pl_writer_close(c->w);
    pl_writer_destroy(c->w);
    return rc;
}

/* A device record of any source (CUDA interposers: allocator_id 0, pool 0; device -1 = pinned host memory). */
static inline void rs_device_src(rs_ctx_t *c, pl_rec_type_t type, uint32_t source, int32_t device, uint64_t addr,
                                 uint64_t size, uint64_t requested, uint64_t stream) {
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.t_ns = 1500000000LL;
    bool alloc = source == PL_DEV_SRC_ALLOCATOR;
    r.u.device = (pl_rec_device_t){.source = source, .device = device, .pool = alloc ? 2 : 0,
                                   .allocator_id = alloc ? 1 : 0, .addr = addr, .size = size,
                                   .requested = requested, .stream = stream, .tid = 777};
    rs_emit(c, &r);
}

static inline void rs_device(rs_ctx_t *c, pl_rec_type_t type, uint64_t addr, uint64_t size, uint64_t requested,
                             uint64_t stream) {
    rs_device_src(c, type, PL_DEV_SRC_ALLOCATOR, 0, addr, size, requested, stream);
}

static inline void rs_stats(rs_ctx_t *c, pl_alloc_t *a, uint64_t step) {
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_ALLOC_STATS;
    r.t_ns = 1500000000LL;
    r.u.alloc_stats = (pl_rec_alloc_stats_t){
        .allocator_id = 1, .device = 0, .step = step,
        .allocated_bytes = s.allocated_bytes[PL_POOL_ALL].current,
        .allocated_bytes_peak = s.allocated_bytes[PL_POOL_ALL].peak,
        .reserved_bytes = s.reserved_bytes[PL_POOL_ALL].current,
        .reserved_bytes_peak = s.reserved_bytes[PL_POOL_ALL].peak,
        .num_alloc_retries = s.num_alloc_retries, .num_ooms = s.num_ooms,
        .num_device_alloc = s.num_device_alloc, .num_device_free = s.num_device_free,
        .capacity_bytes = s.capacity_bytes};
    rs_emit(c, &r);
}

static inline void rs_hook(void *ctx, const pl_alloc_event_t *ev) {
    static const pl_rec_type_t types[] = {0, PL_REC_DEVICE_ALLOC, PL_REC_DEVICE_FREE, PL_REC_DEVICE_MAP,
                                          PL_REC_DEVICE_UNMAP, PL_REC_DEVICE_OOM};
    rs_device(ctx, types[ev->kind], ev->addr, ev->size_bytes, ev->requested_bytes, ev->stream);
}

/* Record workload p under conf on a sim device of capacity_bytes into path; *final gets the allocator's stats at
 * the end (before destroy), n_maps the number of SEGMENT_MAP events. Returns 0 or a negative errno. */
typedef struct rs_recorded {
    pl_alloc_stats_t final;
    size_t n_failed;
} rs_recorded_t;

static inline int rs_record_workload(const char *path, const char *conf, const pl_workload_params_t *p,
                                     uint64_t capacity_bytes, rs_recorded_t *out) {
    pl_workload_t wl;
    int rc = pl_workload_generate(p, &wl);
    if (rc) return rc;
    pl_alloc_config_t cfg;
    char err[512];
    if ((rc = pl_alloc_config_parse(conf, &cfg, err, sizeof err))) goto out_wl;
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.touch = false;
    so.capacity_bytes = capacity_bytes;
    pl_backend_t *be;
    if ((rc = pl_backend_sim_create(&so, &be))) goto out_wl;
    pl_alloc_t *a;
    if ((rc = pl_alloc_create(be, &cfg, &a, err, sizeof err))) goto out_be;
    rs_ctx_t c;
    if ((rc = rs_open(path, &c))) goto out_a;
    pl_alloc_set_hook(a, rs_hook, &c);
    void **ptrs = calloc(wl.n_ids ? wl.n_ids : 1, sizeof *ptrs);
    memset(out, 0, sizeof *out);
    uint64_t step = 0;
    for (size_t i = 0; ptrs && i < wl.n_ops; i++) {
        const pl_workload_op_t *op = &wl.ops[i];
        if (op->kind == PL_WORKLOAD_ALLOC) {
            ptrs[op->id] = pl_alloc_malloc(a, op->size_bytes, 0);
            if (!ptrs[op->id]) out->n_failed++;
        } else if (op->kind == PL_WORKLOAD_FREE) {
            pl_alloc_free(a, ptrs[op->id]);
            ptrs[op->id] = NULL;
        } else {
            rs_stats(&c, a, ++step);
        }
    }
    rs_stats(&c, a, 0);
    pl_alloc_get_stats(a, &out->final);
    pl_alloc_set_hook(a, NULL, NULL);
    rc = ptrs ? rs_close(&c, true) : -ENOMEM;
    if (!ptrs) rs_close(&c, false);
    free(ptrs);
out_a:
    pl_alloc_destroy(a);
out_be:
    pl_backend_destroy(be);
out_wl:
    pl_workload_free(&wl);
    return rc;
}

/* The fragmentation sequence; with_stats adds an alloc_stats record carrying the capacity. */
static inline int rs_write_frag(const char *path, bool with_stats) {
    rs_ctx_t c;
    int rc = rs_open(path, &c);
    if (rc) return rc;
    const uint64_t base = 0x7f0000000000ull, blk = 4 * RS_MIB;
    for (uint64_t i = 0; i < 25; i++) rs_device(&c, PL_REC_DEVICE_ALLOC, base + i * blk, blk, blk, 0);
    for (uint64_t i = 0; i < 25; i++)
        if (i % 5 != 2) rs_device(&c, PL_REC_DEVICE_FREE, base + i * blk, blk, blk, 0);
    rs_device(&c, PL_REC_DEVICE_ALLOC, base + 0x100000000ull, 12 * RS_MIB, 12 * RS_MIB, 0);
    rs_device(&c, PL_REC_DEVICE_FREE, base + 0x100000000ull, 12 * RS_MIB, 12 * RS_MIB, 0);
    if (with_stats) {
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_ALLOC_STATS;
        r.t_ns = 1600000000LL;
        r.u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = 1, .device = 0, .step = 1,
                                                 .capacity_bytes = RS_FRAG_CAPACITY};
        rs_emit(&c, &r);
    }
    return rs_close(&c, true);
}

static inline int rs_write_no_device(const char *path) {
    rs_ctx_t c;
    int rc = rs_open(path, &c);
    if (rc) return rc;
    for (uint64_t s = 1; s <= 5; s++) {
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STEP;
        r.t_ns = 1000000000LL + (int64_t)s;
        r.u.step = (pl_rec_step_t){.step = s};
        rs_emit(&c, &r);
        r.type = PL_REC_HEAP;
        r.u.heap = (pl_rec_heap_t){.step = s, .live_bytes = 1000 * (int64_t)s, .live_count = 10};
        rs_emit(&c, &r);
    }
    return rs_close(&c, true);
}

/* A fresh temporary directory (mkdtemp) into buf; returns buf or NULL. */
static inline char *rs_tmpdir(char *buf, size_t len) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/plateau-tune-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(buf);
}
