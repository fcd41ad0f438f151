/* Test helper: read one trace file and summarise what the preload tests check (steps, heap totals at each
 * step, sampled live bytes of the stacks that contain a given function, device records, process links). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/trace.h>

#define SUM_MAX_STEPS 512

typedef struct {
    pl_trace_header_t header;
    int rc;                          /* last pl_trace_next result: 0 clean end, -EBADMSG stopped */
    char err[512];
    bool has_start, has_end, has_exec;
    uint32_t pid, ppid, exec_seq;
    uint64_t sample_bytes;
    char exe[256], argv1[64];
    int n_steps, n_signal_steps, n_rss_step, n_marks, n_records, n_rss, n_pss, n_stack, n_frame_named;
    char last_mark[64];
    pl_rec_heap_t heap_at_step[SUM_MAX_STEPS + 1];   /* first heap record after step k (index k) */
    int64_t sym_live_at_step[SUM_MAX_STEPS + 1];     /* sampled live bytes in stacks containing `symbol` */
    int n_sym_stacks;
    int n_dev[PL_REC_TYPE_MAX + 1];
    int64_t dev_live_blocks_at_step[SUM_MAX_STEPS + 1]; /* from alloc_stats n_allocations */
    int n_alloc_stats;
} summary_t;

typedef struct { uint64_t addr; int64_t size; bool sym; } live_t;

static inline uint64_t sum_hash(uint64_t a) { return (a >> 4) * 0x9e3779b97f4a7c15ull >> 44; }

static inline void summarize(const char *path, const char *symbol, summary_t *s) {
    memset(s, 0, sizeof *s);
    pl_trace_reader_t *r;
    s->rc = pl_trace_open(path, &r);
    if (s->rc < 0) {
        snprintf(s->err, sizeof s->err, "%s", pl_trace_open_error());
        return;
    }
    s->header = *pl_trace_header(r);
    /* Pass 1: the PCs whose frame names `symbol`, then the stacks containing one of them. */
    uint64_t *sym_pcs = calloc(4096, 8);
    int n_sym_pcs = 0;
    uint8_t *stack_has = calloc(1 << 20, 1);
    pl_trace_record_t rec;
    int rc;
    while ((rc = pl_trace_next(r, &rec)) == 1)
        if (rec.type == PL_REC_FRAME && symbol && !strcmp(rec.u.frame.symbol, symbol) && n_sym_pcs < 4096)
            sym_pcs[n_sym_pcs++] = rec.u.frame.pc;
    pl_trace_close(r);
    pl_trace_open(path, &r);
    while (pl_trace_next(r, &rec) == 1)
        if (rec.type == PL_REC_STACK && rec.u.stack.stack_id < (1u << 20))
            for (uint32_t i = 0; i < rec.u.stack.n_frames; i++)
                for (int k = 0; k < n_sym_pcs; k++)
                    if (rec.u.stack.pcs[i] == sym_pcs[k] && !stack_has[rec.u.stack.stack_id]) {
                        stack_has[rec.u.stack.stack_id] = 1;
                        s->n_sym_stacks++;
                    }
    pl_trace_close(r);
    /* Pass 2: everything else. */
    live_t *live = calloc(1 << 20, sizeof *live);
    int64_t sym_live = 0;
    pl_trace_open(path, &r);
    while ((rc = pl_trace_next(r, &rec)) == 1) {
        s->n_records++;
        switch (rec.type) {
        case PL_REC_PROCESS_START:
            s->has_start = true;
            s->pid = rec.u.process.pid;
            s->ppid = rec.u.process.ppid;
            s->exec_seq = rec.u.process.exec_seq;
            s->sample_bytes = rec.u.process.sample_bytes;
            snprintf(s->exe, sizeof s->exe, "%s", rec.u.process.exe);
            if (rec.u.process.n_argv > 1) snprintf(s->argv1, sizeof s->argv1, "%s", rec.u.process.argv[1]);
            break;
        case PL_REC_PROCESS_END: s->has_end = true; break;
        case PL_REC_EXEC: s->has_exec = true; break;
        case PL_REC_STEP:
            s->n_steps++;
            if (rec.u.step.source == PL_STEP_SIGNAL) s->n_signal_steps++;
            if (s->n_steps <= SUM_MAX_STEPS) s->sym_live_at_step[s->n_steps] = sym_live;
            break;
        case PL_REC_HEAP:
            if (rec.u.heap.step && rec.u.heap.step <= SUM_MAX_STEPS) s->heap_at_step[rec.u.heap.step] = rec.u.heap;
            break;
        case PL_REC_MARK:
            s->n_marks++;
            snprintf(s->last_mark, sizeof s->last_mark, "%s", rec.u.mark.label);
            break;
        case PL_REC_RSS:
            s->n_rss++;
            s->n_rss_step += rec.u.rss.step != 0;
            s->n_pss += rec.u.rss.pss != PL_TRACE_NA;
            break;
        case PL_REC_STACK: s->n_stack++; break;
        case PL_REC_FRAME: s->n_frame_named += rec.u.frame.symbol[0] != 0; break;
        case PL_REC_HOST_ALLOC: {
            uint64_t h = sum_hash(rec.u.host_alloc.addr);
            while (live[h].addr && live[h].addr != rec.u.host_alloc.addr) h = (h + 1) & ((1 << 20) - 1);
            bool sym = rec.u.host_alloc.stack_id < (1u << 20) && stack_has[rec.u.host_alloc.stack_id];
            live[h] = (live_t){rec.u.host_alloc.addr, (int64_t)rec.u.host_alloc.size, sym};
            if (sym) sym_live += (int64_t)rec.u.host_alloc.size;
            break;
        }
        case PL_REC_HOST_FREE: {
            uint64_t h = sum_hash(rec.u.host_free.addr);
            while (live[h].addr && live[h].addr != rec.u.host_free.addr) h = (h + 1) & ((1 << 20) - 1);
            if (live[h].addr == rec.u.host_free.addr) {
                if (live[h].sym) sym_live -= live[h].size;
                live[h].size = 0;
                live[h].sym = false; /* keep addr as a tombstone: probing continues past it */
            }
            break;
        }
        case PL_REC_ALLOC_STATS:
            s->n_alloc_stats++;
            if (rec.u.alloc_stats.step <= SUM_MAX_STEPS)
                s->dev_live_blocks_at_step[rec.u.alloc_stats.step] = rec.u.alloc_stats.n_allocations;
            break;
        default:
            if (rec.type >= PL_REC_DEVICE_ALLOC && rec.type <= PL_REC_DEVICE_OOM) s->n_dev[rec.type]++;
            break;
        }
    }
    s->rc = rc;
    snprintf(s->err, sizeof s->err, "%s", pl_trace_error(r));
    pl_trace_close(r);
    free(live);
    free(stack_has);
    free(sym_pcs);
}
