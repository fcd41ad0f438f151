/* reports.export: the exporters (reports/export*.c) on synthetic input, byte for byte where the format is ours
 * to fix (CSV), through a parser where it is someone else's (the snapshot pickle, read by tune/pickle.c: the
 * reader plateau tune uses; tests/cli/test_exports.sh reads every export with Python's own parsers). Marks in the
 * text and JSON renderers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "event.h"
#include "extract.h"
#include "writer.h"
#include "helpers.h"
#include "export.h"
#include "render.h"
#include "pickle.h"

#include "../common/files.h"

static const char *g_golden_dir = "tests/reports/golden";

static void test_export_utf8(void **state) {
    (void)state;
    char b[64];
    assert_string_equal(pl_export_utf8("caf\xc3\xa9 \xe2\x82\xac", b, sizeof b), "caf\xc3\xa9 \xe2\x82\xac");
    /* a character cut at the end, a lone continuation byte, an overlong NUL, a surrogate, past U+10FFFF */
    assert_string_equal(pl_export_utf8("ab\xc3", b, sizeof b), "ab\xef\xbf\xbd");
    assert_string_equal(pl_export_utf8("\x80x", b, sizeof b), "\xef\xbf\xbdx");
    assert_string_equal(pl_export_utf8("\xc0\x80", b, sizeof b), "\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(pl_export_utf8("\xed\xa0\x80", b, sizeof b), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(pl_export_utf8("\xf4\x90\x80\x80", b, sizeof b),
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    /* a buffer too small: cut before a whole character, never inside one */
    assert_string_equal(pl_export_utf8("a\xc3\xa9z", b, 3), "a");
    assert_string_equal(pl_export_utf8(NULL, b, sizeof b), "");
}

/* one sample per step; a step listed twice has two samples (the series keeps the first's time, the minimum) */
static void add_series(pl_report_process_t *p, pl_metric_t m, const int64_t *steps, const double *v, size_t n) {
    pl_sample_t s[16];
    for (size_t i = 0; i < n; i++) s[i] = (pl_sample_t){steps[i], steps[i] * 1000000000LL + (int64_t)i, v[i]};
    assert_int_equal(pl_report_set_samples(p, m, s, n, NULL), 0);
}

/* Rows are the union of the metrics' and the marks' steps; a metric without a point leaves an empty cell; labels
 * and names are quoted and made valid UTF-8. */
static void test_export_csv_rows_and_quoting(void **state) {
    (void)state;
    pl_report_t *r = pl_report_create("synthetic");
    pl_report_process_t *p = pl_report_add_process(r, 42, 3, "tr,ain\xc3");
    add_series(p, PL_METRIC_RSS, (int64_t[]){1, 2, 2, 3, 4}, (double[]){100, 250, 200, 300, 400}, 5);
    add_series(p, PL_METRIC_HEAP_BYTES, (int64_t[]){2, 4}, (double[]){10.5, 20}, 2);
    assert_int_equal(pl_report_add_mark(p, 3, 3000000000LL, "eval \"x\", y"), 0);
    assert_int_equal(pl_report_add_mark(p, 3, 3100000000LL, "two\nlines"), 0);
    assert_int_equal(pl_report_add_mark(p, 6, 6000000000LL, "after"), 0);
    pl_report_process_t *q = pl_report_add_process(r, 43, -1, "other");
    add_series(q, PL_METRIC_RSS, (int64_t[]){1}, (double[]){5}, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_export_csv(&(pl_run_t){r, NULL}, f), 0);
    fclose(f);
    const char *want = "pid,exec,rank,process,by,step,t_seconds,rss,heap.bytes,marks\r\n"
                       "42,,3,\"tr,ain\xef\xbf\xbd\",step,1,1,100,,\r\n"
                       "42,,3,\"tr,ain\xef\xbf\xbd\",step,2,2,200,10.5,\r\n"
                       "42,,3,\"tr,ain\xef\xbf\xbd\",step,3,3.000000003,300,,\"eval \"\"x\"\", y; two\nlines\"\r\n"
                       "42,,3,\"tr,ain\xef\xbf\xbd\",step,4,4.000000001,400,20,\r\n"
                       "42,,3,\"tr,ain\xef\xbf\xbd\",step,6,,,,after\r\n"
                       "43,,,other,step,1,1,5,,\r\n";
    assert_string_equal(buf, want);
    free(buf);
    pl_report_destroy(r);
}

/* Marks: a line under the process's metrics in the text, a "marks" array in the JSON (absent without marks, so
 * older reports are unchanged); labels escaped for the terminal; past PL_REPORT_MAX_MARKS only counted. */
static void test_export_marks_in_text_and_json(void **state) {
    (void)state;
    pl_report_t *r = pl_report_create("synthetic");
    pl_report_process_t *p = pl_report_add_process(r, 42, -1, "train");
    add_series(p, PL_METRIC_RSS, (int64_t[]){1, 2, 3, 4}, (double[]){100, 200, 300, 400}, 4);
    pl_report_process_t *q = pl_report_add_process(r, 43, -1, "quiet");
    add_series(q, PL_METRIC_RSS, (int64_t[]){1, 2, 3, 4}, (double[]){1, 1, 1, 1}, 4);
    assert_int_equal(pl_report_add_mark(p, 2, 2000000000LL, "eval\x1b[31m"), 0);
    for (int i = 0; i < PL_REPORT_MAX_MARKS + 1; i++) assert_int_equal(pl_report_add_mark(p, 3, 3000000000LL, "m"), 0);
    assert_int_equal(p->n_marks, PL_REPORT_MAX_MARKS);
    assert_int_equal(p->n_marks_dropped, 2);
    assert_int_equal(pl_report_analyze(r), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pl_render_text_opts_t to = {.all_processes = true};
    assert_int_equal(pl_render_text(r, f, &to), 0);
    fclose(f);
    char want[160];
    snprintf(want, sizeof want, "  marks: step 2 eval\\x1b[31m, step 3 m, step 3 m, step 3 m, step 3 m, step 3 m, "
                                "step 3 m, step 3 m, and %d more\n", PL_REPORT_MAX_MARKS - 8 + 2);
    assert_non_null(strstr(buf, want));
    assert_null(strstr(strstr(buf, "process 43"), "marks:"));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(pl_render_json(r, f, 0), 0);
    fclose(f);
    assert_non_null(
        strstr(buf, "\"marks\": [\n        {\"step\": 2, \"t_seconds\": 2, \"label\": \"eval\\u001b[31m\"},"));
    assert_non_null(strstr(buf, "\"marks_dropped\": 2"));
    const char *other = strstr(buf, "\"pid\": 43");
    assert_non_null(other);
    assert_null(strstr(other, "\"marks\""));
    free(buf);
    pl_report_destroy(r);
}

/* ---- the snapshot pickle ---- */

static size_t put_rec(uint8_t *buf, size_t at, pl_rec_type_t type, int64_t t, pl_rec_device_t d) {
    pl_trace_record_t r = {.type = type, .t_ns = t};
    r.u.device = d;
    size_t n = pl_event_encode(&r, buf + at, 4096);
    assert_true(n > 0);
    return at + n;
}

/* a trace in memory: header, then one chunk of the records in rec[0..n) */
static uint8_t *mem_trace(const uint8_t *recs, size_t n, uint32_t n_recs, size_t *len) {
    uint8_t *b = malloc(PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES + n);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 7, .ppid = 1, .start_mono_ns = 1000,
                           .start_realtime_ns = 5000000};
    pl_event_header_encode(&h, b);
    pl_event_chunk_header(b + PL_TRACE_HEADER_BYTES, recs, (uint32_t)n, n_recs, 0);
    memcpy(b + PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES, recs, n);
    *len = PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES + n;
    return b;
}

/* the snapshot of a trace in memory, parsed by tune's pickle reader; the trace is freed */
static void snapshot_doc(uint8_t *trace, size_t len, pl_pickle_doc_t *d, char **buf) {
    pl_export_torch_t *t;
    assert_int_equal(pl_export_torch_collect_mem(trace, len, &t), 0);
    assert_non_null(t);
    size_t blen = 0;
    FILE *f = open_memstream(buf, &blen);
    assert_int_equal(pl_export_torch_write(t, f), 0);
    fclose(f);
    pl_export_torch_free(t);
    free(trace);
    char err[200];
    assert_int_equal(pl_pickle_parse(*buf, blen, NULL, d, err, sizeof err), 0);
}

static int64_t get_int(const pl_pickle_doc_t *d, pl_pickle_ref_t v, const char *k) {
    int64_t x = -12345;
    assert_int_equal(pl_pickle_int(d, pl_pickle_dict_get(d, v, k), &x), 0);
    return x;
}

/* plateau's allocator: a 2 MiB segment with two blocks of which one is freed, a block outside any segment (its
 * own segment), a device-1 block, a hostile ordinal and a CUPTI copy (both left out), one OOM. The segments'
 * blocks fill them exactly (inactive gaps), the device traces are per device, in time order. */
static void test_export_torch_snapshot_layout(void **state) {
    (void)state;
    static uint8_t recs[1 << 14];
    size_t n = 0;
    uint32_t k = 0;
    pl_rec_device_t a = {.source = PL_DEV_SRC_ALLOCATOR, .device = 0, .pool = 2, .stream = 5};
#define REC(type, t, ...)                                                 \
    do {                                                                  \
        pl_rec_device_t d_ = a;                                           \
        struct { uint64_t addr, size; } f_ = {__VA_ARGS__};               \
        d_.addr = f_.addr;                                                \
        d_.size = f_.size;                                                \
        n = put_rec(recs, n, type, t, d_);                                \
        k++;                                                              \
    } while (0)
    REC(PL_REC_DEVICE_MAP, 2000, 0x100000, 2u << 20);
    REC(PL_REC_DEVICE_ALLOC, 3000, 0x100000, 512u << 10);
    REC(PL_REC_DEVICE_ALLOC, 4000, 0x180000, 256u << 10);
    REC(PL_REC_DEVICE_FREE, 5000, 0x100000, 0);
    REC(PL_REC_DEVICE_ALLOC, 6000, 0x7000000000, 4096);
    a.source = PL_DEV_SRC_CUPTI;
    REC(PL_REC_DEVICE_ALLOC, 6500, 0x9000000000, 4096);
    a.source = PL_DEV_SRC_ALLOCATOR;
    a.device = 99;
    REC(PL_REC_DEVICE_ALLOC, 6600, 0xa000000000, 4096);
    a.device = 1;
    REC(PL_REC_DEVICE_ALLOC, 7000, 0x8000000000, 8192);
    a.device = 0;
    a.source = PL_DEV_SRC_DRIVER;
    REC(PL_REC_DEVICE_OOM, 8000, 0, 1u << 30);
#undef REC
    size_t len;
    pl_pickle_doc_t d;
    char *buf = NULL;
    uint8_t *trace = mem_trace(recs, n, k, &len);
    snapshot_doc(trace, len, &d, &buf);
    pl_pickle_ref_t segs = pl_pickle_dict_get(&d, d.root, "segments");
    assert_int_equal(pl_pickle_len(&d, segs), 3);
    /* the segment: inactive 512 KiB (freed), the live 256 KiB block, inactive to its end */
    pl_pickle_ref_t s0 = pl_pickle_item(&d, segs, 0);
    assert_int_equal(get_int(&d, s0, "address"), 0x100000);
    assert_int_equal(get_int(&d, s0, "total_size"), 2 << 20);
    assert_int_equal(get_int(&d, s0, "allocated_size"), 256 << 10);
    assert_int_equal(get_int(&d, s0, "stream"), 5);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, s0, "segment_type"), "large"));
    pl_pickle_ref_t bl = pl_pickle_dict_get(&d, s0, "blocks");
    assert_int_equal(pl_pickle_len(&d, bl), 3);
    const char *states[3] = {"inactive", "active_allocated", "inactive"};
    const int64_t sizes[3] = {512 << 10, 256 << 10, (2 << 20) - (768 << 10)};
    for (size_t i = 0; i < 3; i++) {
        pl_pickle_ref_t b = pl_pickle_item(&d, bl, i);
        assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, b, "state"), states[i]));
        assert_int_equal(get_int(&d, b, "size"), sizes[i]);
    }
    /* the block outside any mapped segment is a segment of its own; then device 1's */
    pl_pickle_ref_t s1 = pl_pickle_item(&d, segs, 1), s2 = pl_pickle_item(&d, segs, 2);
    assert_int_equal(get_int(&d, s1, "address"), 0x7000000000);
    assert_int_equal(get_int(&d, s1, "total_size"), 4096);
    assert_int_equal(get_int(&d, s2, "device"), 1);
    /* device traces: device 0 in time order (the CUPTI copy and device 99 left out), device 1 */
    pl_pickle_ref_t dt = pl_pickle_dict_get(&d, d.root, "device_traces");
    assert_int_equal(pl_pickle_len(&d, dt), 2);
    pl_pickle_ref_t t0 = pl_pickle_item(&d, dt, 0);
    const char *acts[] = {"segment_alloc", "alloc", "alloc", "free_completed", "alloc", "oom"};
    assert_int_equal(pl_pickle_len(&d, t0), 6);
    for (size_t i = 0; i < 6; i++)
        assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, pl_pickle_item(&d, t0, i), "action"), acts[i]));
    pl_pickle_ref_t fr = pl_pickle_item(&d, t0, 3);
    assert_int_equal(get_int(&d, fr, "size"), 512 << 10); /* the free's size is the block's */
    /* time_us on the wall clock: start_realtime_ns + (t - start_mono_ns), in microseconds */
    assert_int_equal(get_int(&d, pl_pickle_item(&d, t0, 0), "time_us"), (5000000 + 2000 - 1000) / 1000);
    assert_int_equal(pl_pickle_len(&d, pl_pickle_item(&d, dt, 1)), 1);
    pl_pickle_doc_free(&d);
    free(buf);
}

/* The CUDA hooks: a range is a segment of one block; a second record of a live address (a runtime call and the
 * driver call under it, should both be recorded) and a free of an address not live are left out; device -1 (the
 * hooks could not tell) is device 0. */
static void test_export_torch_cuda_hooks(void **state) {
    (void)state;
    uint8_t recs[1024];
    size_t n = 0, len;
    pl_rec_device_t rt = {.source = PL_DEV_SRC_RUNTIME, .device = -1, .addr = 0x5000, .size = 4096};
    pl_rec_device_t drv = rt;
    drv.source = PL_DEV_SRC_DRIVER;
    n = put_rec(recs, n, PL_REC_DEVICE_ALLOC, 2000, rt);
    n = put_rec(recs, n, PL_REC_DEVICE_ALLOC, 2001, drv);
    n = put_rec(recs, n, PL_REC_DEVICE_FREE, 3000, rt);
    n = put_rec(recs, n, PL_REC_DEVICE_FREE, 3001, drv);
    pl_pickle_doc_t d;
    char *buf = NULL;
    uint8_t *trace = mem_trace(recs, n, 4, &len);
    snapshot_doc(trace, len, &d, &buf);
    assert_int_equal(pl_pickle_len(&d, pl_pickle_dict_get(&d, d.root, "segments")), 0);
    pl_pickle_ref_t dt = pl_pickle_dict_get(&d, d.root, "device_traces");
    assert_int_equal(pl_pickle_len(&d, dt), 1);
    pl_pickle_ref_t t0 = pl_pickle_item(&d, dt, 0);
    const char *acts[] = {"segment_alloc", "alloc", "free_completed", "segment_free"};
    assert_int_equal(pl_pickle_len(&d, t0), 4);
    for (size_t i = 0; i < 4; i++)
        assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, pl_pickle_item(&d, t0, i), "action"), acts[i]));
    pl_pickle_doc_free(&d);
    free(buf);
    /* past the first ring (1024 records): 1500 ranges allocated, then freed, every entry kept in time order */
    enum { N_RANGES = 1500 };
    uint8_t *many = malloc((size_t)N_RANGES * 2 * 128 + 4096); /* put_rec asks for 4096 bytes of room */
    assert_non_null(many);
    n = 0;
    for (int i = 0; i < N_RANGES; i++) {
        rt.addr = 0x100000 + (uint64_t)i * 0x1000;
        n = put_rec(many, n, PL_REC_DEVICE_ALLOC, 10000 + i, rt);
    }
    for (int i = 0; i < N_RANGES; i++) {
        rt.addr = 0x100000 + (uint64_t)i * 0x1000;
        n = put_rec(many, n, PL_REC_DEVICE_FREE, 20000 + i, rt);
    }
    trace = mem_trace(many, n, 2 * N_RANGES, &len);
    free(many);
    buf = NULL;
    snapshot_doc(trace, len, &d, &buf);
    dt = pl_pickle_dict_get(&d, d.root, "device_traces");
    t0 = pl_pickle_item(&d, dt, 0);
    assert_int_equal(pl_pickle_len(&d, t0), 4 * N_RANGES);
    assert_int_equal(get_int(&d, pl_pickle_item(&d, t0, 1), "addr"), 0x100000);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, pl_pickle_item(&d, t0, 1), "action"), "alloc"));
    assert_int_equal(get_int(&d, pl_pickle_item(&d, t0, 4 * N_RANGES - 1), "addr"),
                     0x100000 + (N_RANGES - 1) * 0x1000);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, pl_pickle_item(&d, t0, 4 * N_RANGES - 1), "action"),
                                 "segment_free"));
    pl_pickle_doc_free(&d);
    free(buf);
}

/* Frames: a stack with Python frames is written as them, one without as its native frames less the tracer's own
 * innermost ones; a second allocation of the same stack gets the same list (from the pickle's memo); a block that
 * is live carries 'history' (the field torch 1.13's memory_viz reads frames from). */
static void test_export_torch_frames(void **state) {
    (void)state;
    static uint8_t recs[1 << 14];
    size_t n = 0, len;
    uint32_t k = 0;
    pl_trace_record_t r;
#define EMIT()                                                 \
    do {                                                       \
        size_t w_ = pl_event_encode(&r, recs + n, sizeof recs - n); \
        assert_true(w_ > 0);                                   \
        n += w_;                                               \
        k++;                                                   \
    } while (0)
    r = (pl_trace_record_t){.type = PL_REC_MODULE, .t_ns = 1100};
    r.u.module = (pl_rec_module_t){.module_id = 1, .path = "/x/libplateau_preload.so", .build_id = ""};
    EMIT();
    r.u.module = (pl_rec_module_t){.module_id = 2, .path = "/x/train", .build_id = ""};
    EMIT();
    r = (pl_trace_record_t){.type = PL_REC_FRAME, .t_ns = 1100};
    r.u.frame = (pl_rec_frame_t){.pc = 0x10, .module_id = 1, .symbol = "pl_hook"};
    EMIT();
    r.u.frame = (pl_rec_frame_t){.pc = 0x20, .module_id = 2, .symbol = "main"};
    EMIT();
    r = (pl_trace_record_t){.type = PL_REC_PYFRAME, .t_ns = 1100};
    r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 3, .line = 42, .file = "/t/train.py", .function = "step"};
    EMIT();
    r = (pl_trace_record_t){.type = PL_REC_STACK, .t_ns = 1100};
    r.u.stack = (pl_rec_stack_t){.stack_id = 5, .n_frames = 2, .pcs = {0x10, 0x20}};
    EMIT();
    r.u.stack = (pl_rec_stack_t){.stack_id = 6, .n_frames = 1, .pcs = {0x10}, .n_py = 1, .py = {3}};
    EMIT();
    const uint32_t stacks[3] = {5, 5, 6};
    for (int i = 0; i < 3; i++) {
        r = (pl_trace_record_t){.type = PL_REC_DEVICE_ALLOC, .t_ns = 2000 + i};
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .addr = 0x1000u * (i + 1), .size = 4096,
                                       .stack_id = stacks[i]};
        EMIT();
    }
#undef EMIT
    pl_pickle_doc_t d;
    char *buf = NULL;
    uint8_t *trace = mem_trace(recs, n, k, &len);
    snapshot_doc(trace, len, &d, &buf);
    pl_pickle_ref_t t0 = pl_pickle_item(&d, pl_pickle_dict_get(&d, d.root, "device_traces"), 0);
    assert_int_equal(pl_pickle_len(&d, t0), 3);
    pl_pickle_ref_t f[3];
    for (int i = 0; i < 3; i++) f[i] = pl_pickle_dict_get(&d, pl_pickle_item(&d, t0, (size_t)i), "frames");
    assert_int_equal(pl_pickle_len(&d, f[0]), 1); /* pl_hook (libplateau_preload.so) left out */
    pl_pickle_ref_t m = pl_pickle_item(&d, f[0], 0);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, m, "name"), "main"));
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, m, "filename"), "/x/train"));
    assert_int_equal(f[1], f[0]); /* the memo's list: the same value */
    assert_int_equal(pl_pickle_len(&d, f[2]), 1);
    pl_pickle_ref_t py = pl_pickle_item(&d, f[2], 0);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, py, "name"), "step"));
    assert_true(pl_pickle_str_eq(&d, pl_pickle_dict_get(&d, py, "filename"), "/t/train.py"));
    assert_int_equal(get_int(&d, py, "line"), 42);
    /* the live blocks (3 segments of one block each: no map records) carry history with the same frames */
    pl_pickle_ref_t segs = pl_pickle_dict_get(&d, d.root, "segments");
    assert_int_equal(pl_pickle_len(&d, segs), 3);
    pl_pickle_ref_t b2 = pl_pickle_item(&d, pl_pickle_dict_get(&d, pl_pickle_item(&d, segs, 2), "blocks"), 0);
    pl_pickle_ref_t h = pl_pickle_item(&d, pl_pickle_dict_get(&d, b2, "history"), 0);
    assert_int_equal(get_int(&d, h, "real_size"), 4096);
    assert_int_equal(pl_pickle_dict_get(&d, h, "frames"), f[2]);
    pl_pickle_doc_free(&d);
    free(buf);
}

/* A rank's trace file: process start (rank, realtime start), 6 steps with an RSS sample each, a mark, and n_dev
 * device allocations from plateau's allocator. */
static void write_rank_trace(const char *path, uint32_t pid, int32_t rank, int n_dev) {
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = pid, .ppid = 1, .start_mono_ns = 1000,
                           .start_realtime_ns = 1700000000000000000LL + rank};
    pl_rec_process_t proc = {.pid = pid, .ppid = 1, .rank = rank, .local_rank = rank, .exe = "/bin/train",
                             .cgroup_max_bytes = PL_TRACE_NA, .host_allocator = "glibc", .host_allocator_version = ""};
    pl_writer_t *w = pl_test_trace_open(path, &h, NULL, 1000, &proc);
    pl_trace_record_t r;
    for (int i = 0; i < n_dev; i++) {
        r = (pl_trace_record_t){.type = PL_REC_DEVICE_ALLOC, .t_ns = 1500 + i};
        r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .addr = 0x10000u * (i + 1), .size = 4096};
        pl_test_emit(w, &r);
    }
    for (uint64_t k = 1; k <= 6; k++) {
        r = (pl_trace_record_t){.type = PL_REC_RSS, .t_ns = 1000 + (int64_t)k * 1000000};
        r.u.rss = (pl_rec_rss_t){.step = k, .rss_anon = 1000 * k, .rss_file = 0, .rss_shmem = 0, .pss = PL_TRACE_NA,
                                 .cgroup_current = PL_TRACE_NA, .device_used = PL_TRACE_NA,
                                 .device_total = PL_TRACE_NA};
        pl_test_emit(w, &r);
        if (k == 3) {
            r = (pl_trace_record_t){.type = PL_REC_MARK, .t_ns = 1000 + (int64_t)k * 1000000 + 5};
            r.u.mark = (pl_rec_mark_t){.step = k, .label = rank ? "eval r1" : "eval r0"};
            pl_test_emit(w, &r);
        }
        r = (pl_trace_record_t){.type = PL_REC_STEP, .t_ns = 1000 + (int64_t)k * 1000000 + 10};
        r.u.step = (pl_rec_step_t){.step = k};
        pl_test_emit(w, &r);
    }
    r = (pl_trace_record_t){.type = PL_REC_PROCESS_END, .t_ns = 9000000};
    pl_test_emit(w, &r);
    pl_test_trace_close(w);
}

/* Two ranks in one run directory: the snapshot takes the process with more device allocations and counts the
 * other; the trace events name each process with its rank, sort ranks in rank order, and put each mark in its
 * process on the wall clock. */
static void test_export_two_ranks(void **state) {
    (void)state;
    const char *dir = pl_test_dir;
    char p0[160], p1[160];
    pl_test_path(p0, sizeof p0, "a.pltrace");
    pl_test_path(p1, sizeof p1, "b.pltrace");
    write_rank_trace(p0, 101, 1, 2);
    write_rank_trace(p1, 102, 0, 5);
    pl_report_t *r = pl_report_create("two-ranks"); /* not the temporary dir: the golden holds the source */
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(r, &x, dir, NULL), 0);
    assert_int_equal(x.n_procs, 2);
    assert_int_equal(pl_report_analyze(r), 0);

    pl_export_torch_t *t;
    pl_export_torch_info_t info;
    assert_int_equal(pl_export_torch_collect(&(pl_run_t){r, &x}, &t, &info), 0);
    assert_non_null(t);
    assert_int_equal(info.pid, 102);
    assert_int_equal(info.n_other_procs, 1);
    assert_int_equal(info.n_events, 5);
    assert_string_equal(info.source, "allocator");
    pl_export_torch_free(t);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_export_trace_events(&(pl_run_t){r, &x}, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "{\"ph\": \"M\", \"pid\": 101, \"tid\": 101, \"name\": \"process_name\", "
                                "\"args\": {\"name\": \"train (pid 101, rank 1)\"}}"));
    assert_non_null(strstr(buf, "\"pid\": 102, \"tid\": 102, \"name\": \"process_sort_index\", \"args\": "
                                "{\"sort_index\": 0}}"));
    assert_non_null(strstr(buf, "\"pid\": 101, \"tid\": 101, \"name\": \"process_sort_index\", \"args\": "
                                "{\"sort_index\": 1}}"));
    /* the mark of rank 1 at realtime start + 1 + (3 ms + 5 ns - 0) after its trace start: in microseconds */
    assert_non_null(strstr(buf, "{\"ph\": \"i\", \"pid\": 101, \"tid\": 101, \"name\": \"eval r1\", "
                                "\"cat\": \"plateau.mark\", \"s\": \"t\", \"ts\": 1700000000003000.006, "
                                "\"args\": {\"step\": 3}}"));
    assert_non_null(strstr(buf, "\"name\": \"eval r0\""));
    assert_non_null(strstr(buf, "\"clock\": \"realtime\""));
    assert_true(pl_test_golden(g_golden_dir, "trace_events_two_ranks.json", buf, len));
    free(buf);
    pl_extract_free(&x);
    pl_report_destroy(r);
}

/* No device records: nothing to export (the CLI then says so and writes no file). */
static void test_export_torch_nothing(void **state) {
    (void)state;
    uint8_t recs[256];
    pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = 5};
    r.u.step.step = 1;
    size_t len, n = pl_event_encode(&r, recs, sizeof recs);
    assert_true(n > 0);
    uint8_t *trace = mem_trace(recs, n, 1, &len);
    pl_export_torch_t *t = (pl_export_torch_t *)trace;
    assert_int_equal(pl_export_torch_collect_mem(trace, len, &t), 0);
    assert_null(t);
    free(trace);
}

int main(int argc, char **argv) {
    if (argc > 1) g_golden_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_utf8),
        cmocka_unit_test(test_export_csv_rows_and_quoting),
        cmocka_unit_test(test_export_marks_in_text_and_json),
        cmocka_unit_test(test_export_torch_snapshot_layout),
        cmocka_unit_test(test_export_torch_cuda_hooks),
        cmocka_unit_test(test_export_torch_frames),
        cmocka_unit_test(test_export_torch_nothing),
        cmocka_unit_test_setup_teardown(test_export_two_ranks, pl_test_dir_setup, pl_test_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
