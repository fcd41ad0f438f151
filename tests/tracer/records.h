/* Test helper: one sample record of every type, and a field-by-field comparison. */
#pragma once

#include <stdbool.h>
#include <string.h>

#include <plateau/trace.h>

static inline void rec_sample(pl_rec_type_t type, unsigned seed, pl_trace_record_t *r) {
    static const char *const argv[] = {"python3", "train.py", "--steps", "100"};
    memset(r, 0, sizeof *r);
    r->type = type;
    r->t_ns = 1000000007LL * (seed + 1);
    switch (type) {
    case PL_REC_PROCESS_START:
        r->u.process = (pl_rec_process_t){.pid = 100 + seed, .ppid = 1, .exec_seq = seed % 3, .rank = -1,
                                          .local_rank = 3, .sample_bytes = 524288, .interval_ns = 100000000,
                                          .host_mem_bytes = 1ull << 34, .cgroup_max_bytes = PL_TRACE_NA,
                                          .start_realtime_ns = 1700000000000000000LL, .exe = "/usr/bin/python3",
                                          .argc = 4, .n_argv = 4, .host_allocator = "jemalloc",
                                          .host_allocator_version = "5.3.0-0-g54eaed1d8b56", .node = "gpu-node-07"};
        for (int i = 0; i < 4; i++) r->u.process.argv[i] = argv[i];
        break;
    case PL_REC_PROCESS_END: break;
    case PL_REC_STEP: r->u.step = (pl_rec_step_t){.step = seed + 1, .source = PL_STEP_SIGNAL}; break;
    case PL_REC_MARK: r->u.mark = (pl_rec_mark_t){.step = seed, .label = "eval-begin"}; break;
    case PL_REC_RSS:
        r->u.rss = (pl_rec_rss_t){seed, 1 << 20, 2 << 20, 0, 3 << 20, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA};
        break;
    case PL_REC_HEAP: r->u.heap = (pl_rec_heap_t){seed, 123456, 42, 1000, 958, 99999999, 8192, 2}; break;
    case PL_REC_HOST_ALLOC:
        r->u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x7f0000001000ull + seed, .size = 4096, .stack_id = 7,
                                                .tid = 4242, .kind = PL_HOST_CALLOC,
                                                .call_ordinal = 1000003ull * (seed + 1)};
        break;
    case PL_REC_HOST_FREE: r->u.host_free = (pl_rec_host_free_t){.addr = 0x7f0000001000ull, .tid = 4243}; break;
    case PL_REC_DEVICE_ALLOC:
    case PL_REC_DEVICE_FREE:
    case PL_REC_DEVICE_MAP:
    case PL_REC_DEVICE_UNMAP:
    case PL_REC_DEVICE_OOM:
        r->u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .device = 1, .pool = 2, .allocator_id = 3,
                                        .addr = 0x10000000ull * (seed + 1), .size = 2 << 20, .requested = 1000000,
                                        .stream = 0xdeadbeef, .stack_id = 9, .tid = 77};
        break;
    case PL_REC_ALLOC_STATS:
        r->u.alloc_stats = (pl_rec_alloc_stats_t){.allocator_id = 1, .device = 0, .step = 5,
                                                  .allocated_bytes = 1 << 30, .allocated_bytes_peak = 3 << 29,
                                                  .reserved_bytes = 2LL << 30, .reserved_bytes_peak = 2LL << 30,
                                                  .active_bytes = 1 << 30, .inactive_split_bytes = 1 << 20,
                                                  .requested_bytes = 1000, .n_allocations = 17, .n_segments = 3,
                                                  .num_alloc_retries = 1, .num_ooms = 0, .num_device_alloc = 4,
                                                  .num_device_free = 1, .largest_free_bytes = 1 << 21,
                                                  .capacity_bytes = 80ull << 30, .fragmentation = 0.25};
        break;
    case PL_REC_STACK:
        r->u.stack.stack_id = seed + 1;
        r->u.stack.n_frames = 5 + seed % 7;
        for (unsigned i = 0; i < r->u.stack.n_frames; i++) r->u.stack.pcs[i] = 0x400000u + 16 * i + seed;
        r->u.stack.n_py = seed % 4; /* 1.4: Python frame ids */
        for (unsigned i = 0; i < r->u.stack.n_py; i++) r->u.stack.py[i] = 1 + i + seed;
        break;
    case PL_REC_FRAME:
        r->u.frame = (pl_rec_frame_t){.pc = 0x401234, .module_id = 2, .module_offset = 0x1234,
                                      .symbol = "leak_function", .symbol_offset = 0x14};
        break;
    case PL_REC_MODULE:
        r->u.module = (pl_rec_module_t){.module_id = 2, .base = 0x400000, .path = "/bin/x",
                                        .build_id = "ff911b3ce9381ae2a10014abbd63ff257d1ef8a4", .file_size = 21912,
                                        .file_mtime_ns = 1795309713821609749LL};
        break;
    case PL_REC_THREAD_NAME: r->u.thread_name = (pl_rec_thread_name_t){.tid = 4242, .name = "worker-1"}; break;
    case PL_REC_LOST: r->u.lost = (pl_rec_lost_t){.n_records = 12, .n_bytes = 768}; break;
    case PL_REC_EXEC: r->u.exec = (pl_rec_exec_t){.path = "/bin/sh"}; break;
    case PL_REC_PYFRAME:
        r->u.pyframe = (pl_rec_pyframe_t){.pyframe_id = seed + 1, .line = 42, .file = "/home/u/train.py",
                                          .function = "Trainer.train_epoch"};
        break;
    case PL_REC_RETENTION:
        r->u.retention = (pl_rec_retention_t){.census = seed + 1, .flags = PL_RETENTION_GUESS, .step = 40 + seed,
                                              .items = PL_TRACE_NA, .nodes = 1200 + seed, .bytes = 367 * 1024,
                                              .line = 196, .path = "total_loss", .what = "local of train() in main.py",
                                              .kind = "tensor", .file = "/home/u/main.py",
                                              .fix = "accumulate `loss.item()` (or `loss.detach()`)",
                                              .n_ranges = seed % (PL_RETENTION_MAX_RANGES + 1)};
        for (uint32_t i = 0; i < r->u.retention.n_ranges; i++) {
            r->u.retention.range_addr[i] = 0x7f0000001000ull + 0x10000ull * i;
            r->u.retention.range_bytes[i] = 4096 + i;
        }
        break;
    case PL_REC_AGGREGATE:
        r->u.aggregate = (pl_rec_aggregate_t){.what = PL_AGG_HOST_PAIRS, .stack_id = 7 + seed, .step_first = seed,
                                              .step_last = 1000 + seed, .n = 123456, .bytes = 1ull << 33,
                                              .n_sized = 120000, .n_8mod16 = 60000};
        break;
    }
}

static inline bool str_eq(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* Compare by re-encoding both: equal bytes mean equal fields (strings compared by content). */
#include "event.h"
static inline bool rec_equal(const pl_trace_record_t *a, const pl_trace_record_t *b) {
    static unsigned char ba[70000], bb[70000];
    size_t na = pl_event_encode(a, ba, sizeof ba), nb = pl_event_encode(b, bb, sizeof bb);
    return na && na == nb && !memcmp(ba, bb, na);
}
