/* collector.compact: the collector's compaction of long runs' traces (collector/compact.c, docs/long-runs.md).
 *
 * - Which records go: a sampled allocation freed within its step goes with its free, counted per stack in an
 *   aggregate record; one that lives across a step boundary, one at an address the file holds live, one of a trace
 *   without steps, stay.
 * - What the report makes of a bounded trace: a long synthetic training loop (a warmup, then a leak that starts
 *   mid-run, scratch buffers of several stacks freed within each step, buffers carried into the next step, address
 *   reuse without a free, periodic samples) is compacted with tiny hold bounds (blocks cut mid-step) and the
 *   defaults; its report's verdicts, rates, warmup ends, sites and host-allocator evidence are those of the full
 *   trace, its text the same but for the line saying what was aggregated. The same for the report goldens'
 *   synthetic trace (tests/cli/test_report_synth.h), JSON and text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/test_report_synth.h"
#include "analyze.h"
#include "compact.h"
#include "event.h"
#include "pack.h"
#include "extract.h"
#include "render.h"
#include "writer.h"

static char g_dir[128];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/pl-test-compact-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (getenv("PL_TEST_KEEP")) return 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The same file name in folder `sub` (made when missing): a report names the file it read, so the full and the
 * bounded trace of one comparison are called alike. */
static void tpath_in(char *buf, size_t n, const char *sub, const char *name) {
    snprintf(buf, n, "%s/%s", g_dir, sub);
    mkdir(buf, 0700);
    snprintf(buf, n, "%s/%s/%s", g_dir, sub, name);
}

/* ---- compacting a file as the collector compacts a ring: its chunks' payloads in, kept records out ---- */

typedef struct out_file { int fd; uint64_t off; uint32_t seq; } out_file_t;

static int file_sink(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n) {
    out_file_t *o = ctx;
    static uint8_t packed[PL_TRACE_MAX_CHUNK_BYTES]; /* packed in a copy (2.0): the payload is the caller's */
    if (len > sizeof packed) return -EINVAL;
    memcpy(packed, payload, len);
    int64_t rc = pl_writer_chunk_write(o->fd, o->off, o->seq, packed, len, n);
    if (rc < 0) return (int)rc;
    o->seq++;
    o->off += (uint64_t)rc;
    return (int)rc;
}

static void compact_file(const char *in, const char *out, const pl_compact_opts_t *opts, pl_compact_stats_t *st) {
    size_t len;
    unsigned char *b = synth_slurp(in, &len);
    assert_non_null(b);
    assert_true(len >= PL_TRACE_HEADER_BYTES);
    out_file_t o = {.fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), .off = PL_TRACE_HEADER_BYTES};
    assert_true(o.fd >= 0);
    assert_int_equal(pwrite(o.fd, b, PL_TRACE_HEADER_BYTES, 0), PL_TRACE_HEADER_BYTES);
    pl_compact_t *c = pl_compact_new(opts, file_sink, &o);
    assert_non_null(c);
    int64_t now = 0;
    for (size_t off = PL_TRACE_HEADER_BYTES; off + PL_CHUNK_HEADER_BYTES <= len;) {
        uint32_t plen, n;
        memcpy(&plen, b + off + 4, 4);
        memcpy(&n, b + off + 8, 4);
        assert_true(off + PL_CHUNK_HEADER_BYTES + plen <= len);
        now += 1000000; /* 1 ms per chunk: hold_ns decides nothing here but in the test that sets it */
        /* the collector compacts the ordinary records a program wrote: a 2.0 file's chunks are unpacked first */
        static uint8_t plain[PL_TRACE_MAX_CHUNK_BYTES];
        uint32_t pn;
        size_t pl = pl_pack_unpack(b + off + PL_CHUNK_HEADER_BYTES, plen, plain, sizeof plain, &pn);
        assert_int_equal(pn, n);
        assert_int_equal(pl_compact_feed(c, plain, (uint32_t)pl, n, now), 0);
        assert_int_equal(pl_compact_tick(c, now), 0);
        off += PL_CHUNK_HEADER_BYTES + plen;
    }
    assert_int_equal(pl_compact_flush(c, true, now), 0);
    if (st) pl_compact_get_stats(c, st);
    pl_compact_free(c);
    close(o.fd);
    free(b);
}

static off_t file_size(const char *p) {
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    return sb.st_size;
}

/* ---- a long training loop ---- */

typedef struct loop_cfg {
    int n_steps;
    int leak_from;          /* the leak starts after this step (0: from the start; > n_steps: none) */
    uint64_t leak_bytes;
    bool with_steps;
} loop_cfg_t;

#define EMIT_REC()                                                                                                 \
    do {                                                                                                           \
        assert_int_equal(synth_emit(w, &r, &since), 0);                                                            \
        memset(&r, 0, sizeof r);                                                                                   \
    } while (0)

static void alloc_rec(pl_trace_record_t *r, int64_t t, uint64_t addr, uint64_t size, uint32_t stack, uint32_t kind) {
    r->type = PL_REC_HOST_ALLOC;
    r->t_ns = t;
    r->u.host_alloc = (pl_rec_host_alloc_t){.addr = addr, .size = size, .stack_id = stack, .tid = 77, .kind = kind,
                                            .call_ordinal = PL_TRACE_NA};
}

static void free_rec(pl_trace_record_t *r, int64_t t, uint64_t addr) {
    r->type = PL_REC_HOST_FREE;
    r->t_ns = t;
    r->u.host_free = (pl_rec_host_free_t){.addr = addr, .tid = 77};
}

/* Stacks: 1 the leak (keep_history <- train), 2-4 scratch buffers freed within the step, 5 a buffer carried into
 * the next step, 6 an address reused without a free we saw, 7 an mmap'd scratch area. Every call is recorded
 * (sample_bytes 0). The heap and RSS records follow the leak (plus a warmup ramp over the first 100 steps). */
static void loop_trace(const char *path, const loop_cfg_t *c) {
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = 31,
                           .ppid = 1, .start_realtime_ns = 1700000000000000000LL, .start_mono_ns = 1000000000};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, &opt, &w), 0);
    int since = 0;
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    static const char *const argv[] = {"python3", "train.py"};
    r.type = PL_REC_PROCESS_START;
    r.t_ns = h.start_mono_ns;
    r.u.process = (pl_rec_process_t){.pid = 31, .ppid = 1, .rank = -1, .local_rank = -1, .sample_bytes = 0,
                                     .interval_ns = 100000000, .host_mem_bytes = 64ull << 30,
                                     .cgroup_max_bytes = PL_TRACE_NA, .start_realtime_ns = h.start_realtime_ns,
                                     .exe = "/usr/bin/python3", .argc = 2, .n_argv = 2, .host_allocator = "",
                                     .host_allocator_version = "", .node = ""};
    r.u.process.argv[0] = argv[0];
    r.u.process.argv[1] = argv[1];
    EMIT_REC();
    static const char *const syms[] = {"", "keep_history", "scratch_a", "scratch_b", "scratch_c", "carry",
                                       "reuse", "mapped"};
    r.type = PL_REC_MODULE;
    r.t_ns = h.start_mono_ns;
    r.u.module = (pl_rec_module_t){.module_id = 1, .base = 0x400000, .path = "/opt/trainer", .build_id = "",
                                   .file_size = PL_TRACE_NA};
    EMIT_REC();
    for (uint32_t id = 1; id <= 7; id++) {
        r.type = PL_REC_FRAME;
        r.t_ns = h.start_mono_ns;
        r.u.frame = (pl_rec_frame_t){.pc = 0x401000 + id * 0x100, .module_id = 1, .module_offset = 0x1000 + id * 0x100,
                                     .symbol = syms[id], .symbol_offset = 0x10};
        EMIT_REC();
        r.type = PL_REC_STACK;
        r.t_ns = h.start_mono_ns;
        r.u.stack.stack_id = id;
        r.u.stack.n_frames = 2;
        r.u.stack.pcs[0] = 0x401000 + id * 0x100;
        r.u.stack.pcs[1] = 0x402000;
        EMIT_REC();
    }
    const int64_t sec = 500000000; /* 0.5 s steps */
    uint64_t leaked = 0, n_alloc = 0, n_free = 0;
    for (int s = 1; s <= c->n_steps; s++) {
        int64_t t = h.start_mono_ns + s * sec;
        uint64_t step = c->with_steps ? (uint64_t)s : 0;
        /* the carried buffer of the previous step is freed now; a new one lives into the next step */
        if (s > 1) {
            free_rec(&r, t + 100, 0x50000000ull + (uint64_t)(s - 1) * 0x1000);
            EMIT_REC();
            n_free++;
        }
        alloc_rec(&r, t + 200, 0x50000000ull + (uint64_t)s * 0x1000, 24568, 5, PL_HOST_MALLOC); EMIT_REC(); n_alloc++;
        for (int k = 0; k < 6; k++) { /* scratch buffers of three stacks, freed within the step */
            uint64_t a = 0x60000000ull + (uint64_t)k * 0x10000;
            alloc_rec(&r, t + 300 + k * 10, a, 4096 + (uint64_t)k * 8 + 8 * (k % 2), 2 + (uint32_t)(k % 3),
                      PL_HOST_MALLOC);
            EMIT_REC();
            n_alloc++;
            /* periodic samples between an allocation and its free, every 6th step a spike up and one down */
            int64_t dv = (int64_t)((s * 31 + k * 17) % 7) * 8192 + (s % 6 == 0 && k == 3 ? 50000000 : 0) -
                         (s % 6 == 3 && k == 4 ? 30000000 : 0);
            r.type = PL_REC_HEAP;
            r.t_ns = t + 305 + k * 10;
            r.u.heap = (pl_rec_heap_t){.step = 0, .live_bytes = 100000000 + (int64_t)leaked + dv,
                                       .live_count = 5000 + (int64_t)k, .n_alloc = n_alloc, .n_free = n_free};
            EMIT_REC();
            r.type = PL_REC_RSS;
            r.t_ns = t + 305 + k * 10;
            r.u.rss = (pl_rec_rss_t){.step = 0, .rss_anon = 500000000ull + leaked + (uint64_t)(dv + 40000000),
                                     .rss_file = 200000000ull + (uint64_t)k * 4096, .rss_shmem = 0,
                                     .pss = s % 50 == 0 && k == 1 ? 690000000ull : PL_TRACE_NA,
                                     .cgroup_current = PL_TRACE_NA, .device_used = PL_TRACE_NA,
                                     .device_total = PL_TRACE_NA};
            EMIT_REC();
            free_rec(&r, t + 306 + k * 10, a); EMIT_REC(); n_free++;
        }
        alloc_rec(&r, t + 400, 0x70000000ull, 1 << 20, 7, PL_HOST_MMAP); EMIT_REC();
        free_rec(&r, t + 410, 0x70000000ull); EMIT_REC();
        if (s % 10 == 1) { /* reuse: a new allocation at an address the trace holds live (its free was not seen) */
            alloc_rec(&r, t + 500, 0x80000000ull, 65536, 6, PL_HOST_MALLOC); EMIT_REC(); n_alloc++;
            if (s % 20 == 11) {
                free_rec(&r, t + 510, 0x80000000ull);
                EMIT_REC();
                n_free++;
            }
        }
        if (s > c->leak_from) {
            alloc_rec(&r, t + 600, 0x10000000ull + (uint64_t)s * 0x100000ull, c->leak_bytes, 1, PL_HOST_MALLOC);
            EMIT_REC();
            n_alloc++;
            leaked += c->leak_bytes;
        }
        int64_t ramp = s < 100 ? (int64_t)s * 200000 : 20000000;
        int64_t wobble = (int64_t)((s * 7919) % 13) * 4096;
        r.type = PL_REC_HEAP;
        r.t_ns = t + 700;
        r.u.heap = (pl_rec_heap_t){.step = step, .live_bytes = 100000000 + ramp + (int64_t)leaked + wobble,
                                   .live_count = 5000 + (int64_t)(leaked / (c->leak_bytes ? c->leak_bytes : 1)),
                                   .n_alloc = n_alloc, .n_free = n_free, .alloc_bytes = n_alloc * 4096};
        EMIT_REC();
        r.type = PL_REC_RSS;
        r.t_ns = t + 800;
        r.u.rss = (pl_rec_rss_t){.step = step, .rss_anon = 500000000ull + (uint64_t)ramp + leaked + (uint64_t)wobble,
                                 .rss_file = 200000000ull, .rss_shmem = 0, .pss = PL_TRACE_NA,
                                 .cgroup_current = PL_TRACE_NA, .device_used = PL_TRACE_NA,
                                 .device_total = PL_TRACE_NA};
        EMIT_REC();
        if (c->with_steps) {
            r.type = PL_REC_STEP;
            r.t_ns = t + 900;
            r.u.step = (pl_rec_step_t){.step = (uint64_t)s, .source = PL_STEP_OPTIMIZER};
            EMIT_REC();
        }
    }
    r.type = PL_REC_PROCESS_END;
    r.t_ns = h.start_mono_ns + (c->n_steps + 1) * sec;
    EMIT_REC();
    assert_int_equal(pl_writer_flush(w), 0);
    pl_writer_close(w);
    pl_writer_destroy(w);
}

/* ---- reports of the two traces ---- */

typedef struct run { pl_report_t *r; pl_extract_t x; } run_t;

static size_t g_max_points; /* the report's points per metric; 0 = its default */

static void run_file(run_t *u, const char *path) {
    u->r = pl_report_create(path);
    assert_non_null(u->r);
    pl_extract_init(&u->x);
    pl_extract_opts_t o = {.max_points = g_max_points};
    assert_int_equal(pl_extract_path(u->r, &u->x, path, &o), 0);
    assert_int_equal(pl_report_analyze(u->r), 0);
}

static void run_free(run_t *u) {
    pl_extract_free(&u->x);
    pl_report_destroy(u->r);
}

/* The run's text (json: its JSON) without what a bounded trace says of itself: the line naming what was aggregated,
 * the "aggregated" object, and the record count (a bounded trace has fewer records: that is the point). */
static char *render(run_t *u, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pl_run_t run = {u->r, &u->x};
    assert_int_equal(json ? pl_render_run_json(&run, f, 0) : pl_render_run_text(&run, f, NULL), 0);
    fclose(f);
    char *out = calloc(1, len + 1);
    size_t w = 0;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
        char *rec = strstr(line, "\"records\": ");
        if (rec && rec < line + n) { /* "records": N -> "records": # */
            size_t head = (size_t)(rec - line) + strlen("\"records\": ");
            memcpy(out + w, line, head);
            w += head;
            out[w++] = '#';
            char *end = line + head;
            while (*end >= '0' && *end <= '9') end++;
            size_t rest = n - (size_t)(end - line);
            memcpy(out + w, end, rest);
            w += rest;
        } else if (!strstr(line, "bounded trace:") || strstr(line, "bounded trace:") >= line + n) {
            memcpy(out + w, line, n);
            w += n;
        }
        line = nl ? nl + 1 : NULL;
    }
    out[w] = 0;
    free(buf);
    static const char *const subs[] = {"/full/", "/bounded/", "/tiny/", "/plain/"}; /* tpath_in's folders: one name */
    for (size_t i = 0; i < 4; i++)
        for (char *p; (p = strstr(out, subs[i]));) {
            size_t k = strlen(subs[i]);
            memcpy(p, "/x/", 3);
            memmove(p + 3, p + k, strlen(p + k) + 1);
        }
    if (json) { /* the "aggregated" object, from its key to its closing brace and the comma before the key */
        char *a;
        while ((a = strstr(out, "\"aggregated\": {"))) {
            char *e = strchr(a, '}');
            assert_non_null(e);
            char *b = a;
            while (b > out && b[-1] != ',') b--;
            if (b > out) b--;
            memmove(b, e + 1, strlen(e + 1) + 1);
        }
    }
    return out;
}

static void assert_same_report(run_t *full, run_t *bounded) {
    assert_int_equal(full->r->n_procs, bounded->r->n_procs);
    for (size_t i = 0; i < full->r->n_procs; i++) {
        const pl_report_process_t *a = full->r->procs[i], *b = bounded->r->procs[i];
        assert_int_equal(a->verdict.kind, b->verdict.kind);
        for (int m = 0; m < PL_METRIC__COUNT; m++) {
            assert_int_equal(a->metrics[m].present, b->metrics[m].present);
            if (!a->metrics[m].present) continue;
            const pl_verdict_t *va = &a->metrics[m].verdict, *vb = &b->metrics[m].verdict;
            assert_int_equal(va->kind, vb->kind);
            assert_int_equal(va->warmup_end_step, vb->warmup_end_step);
            assert_int_equal(va->tail_start_step, vb->tail_start_step);
            assert_true(va->slope_per_step == vb->slope_per_step || (isnan(va->slope_per_step) && isnan(vb->slope_per_step)));
        }
        const pl_extract_proc_t *xa = &full->x.procs[i], *xb = &bounded->x.procs[i];
        assert_int_equal(xa->n_steps, xb->n_steps);
        assert_int_equal(xa->site_tail_step, xb->site_tail_step);
        assert_int_equal(xa->n_sites, xb->n_sites);
        for (size_t k = 0; k < xa->n_sites; k++) {
            assert_int_equal(xa->sites[k].stack_id, xb->sites[k].stack_id);
            assert_true(xa->sites[k].growth_bytes == xb->sites[k].growth_bytes);
            assert_true(xa->sites[k].live_bytes == xb->sites[k].live_bytes);
            assert_int_equal(xa->sites[k].n_live, xb->sites[k].n_live);
        }
        assert_int_equal(xa->n_usable_sizes, xb->n_usable_sizes);
        assert_int_equal(xa->n_usable_8mod16, xb->n_usable_8mod16);
    }
    for (int json = 0; json <= 1; json++) {
        char *ta = render(full, json), *tb = render(bounded, json);
        assert_string_equal(ta, tb);
        free(ta);
        free(tb);
    }
}

/* ---- the tests ---- */

static void test_compact_keeps_what_the_report_reads(void **state) {
    (void)state;
    char full[256], small[256], tiny[256];
    tpath_in(full, sizeof full, "full", "loop.pltrace");
    tpath_in(small, sizeof small, "bounded", "loop.pltrace");
    tpath_in(tiny, sizeof tiny, "tiny", "loop.pltrace");
    loop_cfg_t c = {.n_steps = 3000, .leak_from = 1500, .leak_bytes = 64 * 1024, .with_steps = true};
    loop_trace(full, &c);
    pl_compact_stats_t st;
    compact_file(full, small, &(pl_compact_opts_t){.enabled = true}, &st);
    /* per step: 6 scratch pairs and the mmap'd one go; the carried buffer, the reused address and the leak stay.
     * But one: step 1536's leak lands at the mmap'd area's address, so step 1537's mmap displaces it in the report
     * (the address is live in the file): that pair stays. */
    assert_int_equal(st.n_pairs, 7 * 3000 - 1);
    assert_true(file_size(small) * 2 < file_size(full));
    /* blocks cut every few records, mid-step, and aggregates written every 7 steps: still the same report */
    pl_compact_stats_t st2;
    compact_file(full, tiny, &(pl_compact_opts_t){.enabled = true, .hold_bytes = 300, .agg_steps = 7}, &st2);
    assert_true(st2.n_pairs > 0 && st2.n_pairs < st.n_pairs);
    assert_true(st2.n_aggregates > st.n_aggregates);
    run_t a, b, t;
    run_file(&a, full);
    run_file(&b, small);
    run_file(&t, tiny);
    /* the loop leaks, from its leak's stack, and the reports say it alike */
    assert_int_equal(a.r->procs[0]->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
    assert_true(a.x.procs[0].n_sites >= 1);
    assert_int_equal(a.x.procs[0].sites[0].stack_id, 1);
    assert_same_report(&a, &b);
    assert_same_report(&a, &t);
    /* what was aggregated is said: counts of the elided pairs, and their steps */
    assert_int_equal(a.x.procs[0].n_agg_pairs, 0);
    assert_int_equal(b.x.procs[0].n_agg_pairs, 7 * 3000 - 1);
    assert_int_equal(b.x.procs[0].agg_step_first, 0);
    assert_int_equal(b.x.procs[0].agg_step_last, 2999);
    /* of the 6 periodic heap and 6 RSS samples of each step, some were neither first, last, lowest nor highest */
    assert_int_equal(b.x.procs[0].n_agg_samples, st.n_samples);
    assert_true(st.n_samples > 3000);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(pl_render_run_text(&(pl_run_t){b.r, &b.x}, f, NULL), 0);
    fclose(f);
    assert_non_null(strstr(text, "pid 31: bounded trace: 20999 sampled allocations freed within their step"));
    free(text);
    run_free(&a);
    run_free(&b);
    run_free(&t);
}

/* A long run's totals fold into windows of steps no wider than half the report's bins: the same report. The report
 * keeps 64 points per metric here (8,192 by default), so a 3,000-step loop is "long": its totals fold into windows of
 * up to 16 steps. Windows cut short by the hold time keep more, never less. */
static void test_compact_folds_long_runs_totals(void **state) {
    (void)state;
    char full[256], out[256], cut[256];
    tpath_in(full, sizeof full, "full", "fold.pltrace");
    tpath_in(out, sizeof out, "bounded", "fold.pltrace");
    tpath_in(cut, sizeof cut, "tiny", "fold.pltrace");
    loop_cfg_t c = {.n_steps = 3000, .leak_from = 1700, .leak_bytes = 64 * 1024, .with_steps = true};
    loop_trace(full, &c);
    pl_compact_stats_t st, st2;
    compact_file(full, out, &(pl_compact_opts_t){.enabled = true, .fold_points = 64}, &st);
    compact_file(full, cut, &(pl_compact_opts_t){.enabled = true, .fold_points = 64, .hold_ns = 3000000}, &st2);
    pl_compact_stats_t plain;
    char plain_path[256];
    tpath_in(plain_path, sizeof plain_path, "plain", "fold.pltrace");
    compact_file(full, plain_path, &(pl_compact_opts_t){.enabled = true}, &plain);
    assert_true(st.n_samples > plain.n_samples + 4000); /* most totals of steps 256-3000 folded */
    assert_true(st2.n_samples > plain.n_samples && st2.n_samples < st.n_samples);
    assert_true(file_size(out) < file_size(plain_path));
    g_max_points = 64;
    run_t a, b, t;
    run_file(&a, full);
    run_file(&b, out);
    run_file(&t, cut);
    g_max_points = 0;
    assert_int_equal(a.r->procs[0]->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
    assert_same_report(&a, &b);
    assert_same_report(&a, &t);
    run_free(&a);
    run_free(&b);
    run_free(&t);
}

/* The size limit: past it only the trace's end and its counts are written; the report says where the trace stopped
 * and judges what came before, never more (the loop's leak starts after the limit: no leak is claimed). */
static void test_compact_size_limit(void **state) {
    (void)state;
    char full[256], out[256];
    tpath_in(full, sizeof full, "full", "limit.pltrace");
    tpath_in(out, sizeof out, "bounded", "limit.pltrace");
    loop_cfg_t c = {.n_steps = 3000, .leak_from = 2000, .leak_bytes = 64 * 1024, .with_steps = true};
    loop_trace(full, &c);
    const uint64_t max = 256 << 10;
    pl_compact_stats_t st;
    compact_file(full, out, &(pl_compact_opts_t){.enabled = true, .max_bytes = max}, &st);
    assert_true((uint64_t)file_size(out) <= PL_TRACE_HEADER_BYTES + max);
    /* the limit is on the file's (packed, 2.0) bytes, not on the records' ordinary size: the file fills it */
    if ((uint64_t)file_size(out) < max - max / 8) fail_msg("file %ld bytes of a %llu-byte limit", (long)file_size(out), (unsigned long long)max);
    run_t a, b;
    run_file(&a, full);
    run_file(&b, out);
    const pl_extract_proc_t *xp = &b.x.procs[0];
    assert_true(xp->capped);
    assert_true(xp->cap_step > 100 && xp->cap_step < 2000);
    assert_int_equal(xp->cap_last_step, 3000);
    assert_int_equal(xp->n_steps, xp->cap_step); /* the steps recorded */
    assert_true(xp->clean_end);                   /* the end is written: not "killed or still running" */
    assert_int_equal(a.r->procs[0]->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
    assert_int_not_equal(b.r->procs[0]->metrics[PL_METRIC_HEAP_BYTES].verdict.kind, PL_VERDICT_LEAK);
    char want[160];
    snprintf(want, sizeof want, "pid 31: the trace reached its size limit (PLATEAU_TRACE_MAX) at step %llu: ",
             (unsigned long long)xp->cap_step);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_run_text(&(pl_run_t){b.r, &b.x}, f, NULL), 0);
    fclose(f);
    assert_non_null(strstr(buf, want));
    assert_non_null(strstr(buf, "this report covers steps up to"));
    free(buf);
    run_free(&a);
    run_free(&b);
}

/* A trace without step records is reported by time, and its allocation stream is period detection's input: it is
 * written whole. */
static void test_compact_without_steps_writes_all(void **state) {
    (void)state;
    char full[256], out[256];
    tpath_in(full, sizeof full, "full", "nosteps.pltrace");
    tpath_in(out, sizeof out, "bounded", "nosteps.pltrace");
    loop_cfg_t c = {.n_steps = 200, .leak_from = 50, .leak_bytes = 4096, .with_steps = false};
    loop_trace(full, &c);
    pl_compact_stats_t st;
    compact_file(full, out, &(pl_compact_opts_t){.enabled = true}, &st);
    assert_int_equal(st.n_pairs, 0);
    assert_int_equal(st.n_out, st.n_in);
    run_t a, b;
    run_file(&a, full);
    run_file(&b, out);
    assert_same_report(&a, &b);
    run_free(&a);
    run_free(&b);
}

/* A sink that appends to a buffer. */
typedef struct { uint8_t *b; size_t len; uint32_t n; } mem_t;
static int mem_sink(void *ctx, const uint8_t *p, uint32_t l, uint32_t k) {
    mem_t *m = ctx;
    memcpy(m->b + m->len, p, l);
    m->len += l;
    m->n += k;
    return 0;
}

/* Record by record: which go and which stay, and the aggregate's counts. */
static void test_compact_pairs_within_a_step(void **state) {
    (void)state;
    uint8_t in[4096];
    size_t len = 0;
    uint32_t n = 0;
    pl_trace_record_t r;
#define PUT()                                                                                                      \
    do {                                                                                                           \
        size_t m = pl_event_encode(&r, in + len, sizeof in - len);                                                 \
        assert_true(m > 0);                                                                                        \
        len += m;                                                                                                  \
        n++;                                                                                                       \
        memset(&r, 0, sizeof r);                                                                                   \
    } while (0)
    memset(&r, 0, sizeof r);
    r.type = PL_REC_STEP; r.t_ns = 1; r.u.step.step = 1; PUT();            /* 0: the trace has steps */
    alloc_rec(&r, 2, 0xa000, 40, 3, PL_HOST_MALLOC); PUT();                 /* 1: freed in this step: goes */
    alloc_rec(&r, 3, 0xb000, 24, 4, PL_HOST_MALLOC); PUT();                 /* 2: lives on: stays */
    free_rec(&r, 4, 0xa000); PUT();                                         /* 3: goes with 1 */
    alloc_rec(&r, 5, 0xb000, 24, 4, PL_HOST_MALLOC); PUT();                 /* 4: displaces 2: stays */
    free_rec(&r, 6, 0xb000); PUT();                                         /* 5: frees 4: stays */
    r.type = PL_REC_STEP; r.t_ns = 7; r.u.step.step = 2; PUT();            /* 6 */
    alloc_rec(&r, 8, 0xc000, 8, 3, PL_HOST_MALLOC); PUT();                  /* 7: freed after the step: stays */
    r.type = PL_REC_STEP; r.t_ns = 9; r.u.step.step = 3; PUT();            /* 8 */
    free_rec(&r, 10, 0xc000); PUT();                                        /* 9: stays */
    alloc_rec(&r, 11, 0xc000, 56, 3, PL_HOST_MALLOC); PUT();                /* 10: the address is free again: goes */
    free_rec(&r, 12, 0xc000); PUT();                                        /* 11: goes */
#undef PUT
    uint8_t outb[8192];
    mem_t sink = {outb, 0, 0};
    pl_compact_t *c = pl_compact_new(&(pl_compact_opts_t){.enabled = true}, mem_sink, &sink);
    assert_int_equal(pl_compact_feed(c, in, (uint32_t)len, n, 1000), 0);
    assert_int_equal(pl_compact_flush(c, true, 2000), 0);
    pl_compact_stats_t st;
    pl_compact_get_stats(c, &st);
    pl_compact_free(c);
    assert_int_equal(st.n_pairs, 2);
    assert_int_equal(st.pair_bytes, 96);
    /* kept: steps, 2, 4, 5, 7, 9, then one aggregate (stack 3) */
    static const int kept_types[] = {PL_REC_STEP, PL_REC_HOST_ALLOC, PL_REC_HOST_ALLOC, PL_REC_HOST_FREE, PL_REC_STEP,
                                     PL_REC_HOST_ALLOC, PL_REC_STEP, PL_REC_HOST_FREE, PL_REC_AGGREGATE};
    static const int64_t kept_t[] = {1, 3, 5, 6, 7, 8, 9, 10, 2000};
    size_t off = 0;
    for (size_t i = 0; i < sizeof kept_types / sizeof kept_types[0]; i++) {
        pl_trace_record_t d;
        size_t used;
        assert_true(off < sink.len);
        assert_int_equal(pl_event_decode(outb + off, sink.len - off, &d, &used), 0);
        assert_int_equal(d.type, kept_types[i]);
        assert_int_equal(d.t_ns, kept_t[i]);
        if (d.type == PL_REC_AGGREGATE) {
            assert_int_equal(d.u.aggregate.what, PL_AGG_HOST_PAIRS);
            assert_int_equal(d.u.aggregate.stack_id, 3);
            assert_int_equal(d.u.aggregate.n, 2);
            assert_int_equal(d.u.aggregate.bytes, 96);
            assert_int_equal(d.u.aggregate.n_sized, 2);
            assert_int_equal(d.u.aggregate.n_8mod16, 2); /* 40 and 56 are 8 mod 16 */
            assert_int_equal(d.u.aggregate.step_first, 1);
            assert_int_equal(d.u.aggregate.step_last, 3);
        }
        off += used;
    }
    assert_int_equal(off, sink.len);
    assert_int_equal(sink.n, sizeof kept_types / sizeof kept_types[0]);
}

/* The goldens' synthetic trace (tests/cli/test_report_synth.h: a device warmup plateau, a host leak, a scratch
 * buffer freed within each step), and the same with a teardown: the same report, text and JSON. */
static void test_compact_golden_trace_same_report(void **state) {
    (void)state;
    for (int teardown_ = 0; teardown_ <= 1; teardown_++) {
        char full[256], out[256];
        char name[32];
        snprintf(name, sizeof name, "synth%d.pltrace", teardown_);
        tpath_in(full, sizeof full, "full", name);
        tpath_in(out, sizeof out, "bounded", name);
        synth_cfg_t c = synth_default();
        c.teardown = teardown_;
        assert_int_equal(synth_trace(full, &c), 0);
        pl_compact_stats_t st;
        compact_file(full, out, &(pl_compact_opts_t){.enabled = true}, &st);
        assert_int_equal(st.n_pairs, 160);
        run_t a, b;
        run_file(&a, full);
        run_file(&b, out);
        assert_same_report(&a, &b);
        run_free(&a);
        run_free(&b);
    }
}

/* A trace that has not stepped (yet) loses nothing: its records are not held for a step that may never come, they
 * reach the sink within out_ns like every kept record (the collector's PLATEAU_FLUSH_MS promise). */
static void test_compact_holds_nothing_before_a_step(void **state) {
    (void)state;
    uint8_t in[512], outb[4096];
    size_t len = 0;
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    alloc_rec(&r, 10, 0xa000, 40, 3, PL_HOST_MALLOC);
    len += pl_event_encode(&r, in + len, sizeof in - len);
    free_rec(&r, 11, 0xa000);
    len += pl_event_encode(&r, in + len, sizeof in - len);
    mem_t sink = {outb, 0, 0};
    pl_compact_t *c = pl_compact_new(&(pl_compact_opts_t){.enabled = true, .out_ns = 250000000}, mem_sink, &sink);
    assert_non_null(c);
    assert_int_equal(pl_compact_feed(c, in, (uint32_t)len, 2, 1000000000), 0);
    assert_int_equal(pl_compact_tick(c, 1100000000), 0);
    assert_int_equal(sink.n, 0); /* within out_ns: gathered into one chunk with what follows */
    assert_int_equal(pl_compact_tick(c, 1250000000), 0);
    assert_int_equal(sink.n, 2);
    assert_int_equal(sink.len, len);
    pl_compact_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact_pairs_within_a_step),
        cmocka_unit_test(test_compact_holds_nothing_before_a_step),
        cmocka_unit_test(test_compact_keeps_what_the_report_reads),
        cmocka_unit_test(test_compact_without_steps_writes_all),
        cmocka_unit_test(test_compact_folds_long_runs_totals),
        cmocka_unit_test(test_compact_size_limit),
        cmocka_unit_test(test_compact_golden_trace_same_report),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
