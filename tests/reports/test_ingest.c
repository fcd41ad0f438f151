/* reports.ingest: the one reader of traces (reports/ingest/ingest.c). The one switch hands each record kind to its
 * handler and only to it; the tables take stack, frame, module and Python frame records (the first record for an id
 * wins, bounds hold, a symbol past the budget is cut); a handler's error stops the read and is returned; a damaged
 * trace hands on every record before the damage and says so in *end. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "event.h"
#include "ingest.h"

typedef struct seen { int n[PL_REC_TYPE_MAX + 1]; int stop_at; int calls; } seen_t;

static int count(void *ctx, const pl_trace_record_t *rec) {
    seen_t *s = ctx;
    s->n[rec->type]++;
    return ++s->calls == s->stop_at ? -ENOSPC : 0;
}

static const pl_ingest_handlers_t all = {count, count, count, count, count, count, count, count, count, count, count,
                                         count, count, count, count, count, count, count, count, count, count, count};

static void test_ingest_dispatch(void **state) {
    (void)state;
    pl_ingest_t *in = pl_ingest_new();
    assert_non_null(in);
    seen_t s = {.stop_at = -1};
    for (int t = 1; t <= PL_REC_TYPE_MAX; t++) {
        pl_trace_record_t r = {.type = (pl_rec_type_t)t};
        if (t == PL_REC_FRAME) r.u.frame = (pl_rec_frame_t){.pc = 0x10, .symbol = "f"};
        if (t == PL_REC_MODULE) r.u.module = (pl_rec_module_t){.module_id = 1, .path = "/x/libm.so", .build_id = ""};
        if (t == PL_REC_PYFRAME) r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 1, .file = "a.py", .function = "g"};
        if (t == PL_REC_STACK) r.u.stack.stack_id = 1;
        assert_int_equal(pl_ingest_record(in, &r, &all, &s), 0);
    }
    for (int t = 1; t <= PL_REC_TYPE_MAX; t++) assert_int_equal(s.n[t], 1); /* each kind to its handler, once */
    /* only the device handler: nothing else is called */
    seen_t d = {.stop_at = -1};
    pl_ingest_handlers_t dev = {.device_alloc = count, .device_free = count, .device_map = count,
                                .device_unmap = count, .device_oom = count};
    for (int t = 1; t <= PL_REC_TYPE_MAX; t++) {
        pl_trace_record_t r = {.type = (pl_rec_type_t)t};
        if (t == PL_REC_FRAME || t == PL_REC_MODULE || t == PL_REC_PYFRAME || t == PL_REC_STACK) continue;
        assert_int_equal(pl_ingest_record(in, &r, &dev, &d), 0);
    }
    assert_int_equal(d.calls, PL_REC_DEVICE_OOM - PL_REC_DEVICE_ALLOC + 1);
    pl_ingest_free(in);
}

static void test_ingest_tables(void **state) {
    (void)state;
    pl_ingest_t *in = pl_ingest_new();
    pl_ingest_handlers_t none = {0};
    pl_trace_record_t r = {.type = PL_REC_STACK};
    r.u.stack.stack_id = 7;
    r.u.stack.n_frames = 2;
    r.u.stack.pcs[0] = 0x1000;
    r.u.stack.pcs[1] = 0x2000;
    r.u.stack.n_py = 1;
    r.u.stack.py[0] = 3;
    assert_int_equal(pl_ingest_record(in, &r, &none, NULL), 0);
    r.u.stack.n_frames = 1; /* a second record for id 7: the first wins */
    assert_int_equal(pl_ingest_record(in, &r, &none, NULL), 0);
    pl_ingest_stack_t k;
    assert_true(pl_ingest_stack(in, 7, &k));
    assert_int_equal(k.n_pcs, 2);
    assert_int_equal(k.pcs[1], 0x2000);
    assert_int_equal(k.n_py, 1);
    assert_int_equal(k.py[0], 3);
    assert_int_equal(k.index, 0);
    assert_false(pl_ingest_stack(in, 8, &k));
    assert_false(pl_ingest_stack(in, 0, &k));
    assert_int_equal(pl_ingest_n_stacks(in), 1);

    pl_trace_record_t m = {.type = PL_REC_MODULE};
    m.u.module = (pl_rec_module_t){.module_id = 0, .path = "/usr/lib/libplateau_preload.so", .build_id = "ab",
                                   .file_size = 5, .file_mtime_ns = 6};
    assert_int_equal(pl_ingest_record(in, &m, &none, NULL), 0);
    const pl_sym_module_t *md = pl_ingest_module(in, 0); /* id 0 is a key like any other */
    assert_non_null(md);
    assert_string_equal(pl_ingest_module_base(md), "libplateau_preload.so");
    assert_true(pl_ingest_module_own(md));
    assert_int_equal(md->file_size, 5);
    assert_false(pl_ingest_module_own(NULL));
    assert_string_equal(pl_ingest_module_base(NULL), "?");

    pl_trace_record_t f = {.type = PL_REC_FRAME};
    f.u.frame = (pl_rec_frame_t){.pc = 0x1000, .module_id = 0, .module_offset = 0x40, .symbol = "malloc",
                                 .symbol_offset = 4};
    assert_int_equal(pl_ingest_record(in, &f, &none, NULL), 0);
    const pl_ingest_frame_t *fr = pl_ingest_frame(in, 0x1000);
    assert_non_null(fr);
    assert_string_equal(fr->symbol, "malloc");
    assert_int_equal(fr->module_offset, 0x40);
    assert_null(pl_ingest_frame(in, 0x2000));
    const pl_ingest_frame_t *lf;
    const pl_sym_module_t *lm;
    const char *name = NULL;
    uint64_t off;
    /* no symboliser asked: NO_FILE, but frame and module found */
    assert_int_equal(pl_ingest_lookup(in, NULL, 0x1000, &lf, &lm, &name, &off), PL_SYM_NO_FILE);
    assert_ptr_equal(lf, fr);
    assert_ptr_equal(lm, md);

    pl_trace_record_t p = {.type = PL_REC_PYFRAME};
    p.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 3, .line = 12, .file = "train.py", .function = "step"};
    assert_int_equal(pl_ingest_record(in, &p, &none, NULL), 0);
    const pl_ingest_pyframe_t *py = pl_ingest_pyframe(in, 3);
    assert_non_null(py);
    assert_string_equal(py->function, "step");
    assert_int_equal(py->line, 12);
    pl_ingest_free(in);

    /* no tables (NULL): the records are still handed on */
    seen_t s = {.stop_at = -1};
    pl_ingest_handlers_t h = {.stack = count};
    assert_int_equal(pl_ingest_record(NULL, &r, &h, &s), 0);
    assert_int_equal(s.n[PL_REC_STACK], 1);
}

static void test_ingest_symbol_budget(void **state) {
    (void)state;
    pl_ingest_t *in = pl_ingest_new();
    pl_ingest_handlers_t none = {0};
    size_t len = PL_INGEST_SYMBOL_MAX + 100;
    char *sym = malloc(len + 1);
    memset(sym, 'a', len);
    sym[len] = 0;
    pl_trace_record_t f = {.type = PL_REC_FRAME};
    f.u.frame = (pl_rec_frame_t){.pc = 1, .symbol = sym};
    assert_int_equal(pl_ingest_record(in, &f, &none, NULL), 0);
    assert_int_equal(strlen(pl_ingest_frame(in, 1)->symbol), PL_INGEST_SYMBOL_MAX); /* in full up to the max */
    /* past the budget, symbols are cut short */
    size_t n = PL_INGEST_SYMBOLS_BUDGET / (PL_INGEST_SYMBOL_MAX + 1) + 2;
    for (size_t i = 0; i < n && i + 2 < PL_INGEST_MAX_FRAMES; i++) {
        f.u.frame.pc = 2 + i;
        assert_int_equal(pl_ingest_record(in, &f, &none, NULL), 0);
    }
    assert_int_equal(strlen(pl_ingest_frame(in, 1 + n)->symbol), PL_INGEST_SYMBOL_CUT);
    free(sym);
    pl_ingest_free(in);
}

/* a trace in memory: header, one chunk of `n` records, and optionally a damaged tail */
static uint8_t *mem_trace(int n, bool damaged, size_t *len) {
    uint8_t recs[4096];
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = 100 + i};
        r.u.step.step = (uint64_t)i + 1;
        at += pl_event_encode(&r, recs + at, sizeof recs - at);
    }
    size_t cap = PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES + at + 16;
    uint8_t *b = calloc(1, cap);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 7, .ppid = 1, .start_mono_ns = 10};
    pl_event_header_encode(&h, b);
    pl_event_chunk_header(b + PL_TRACE_HEADER_BYTES, recs, (uint32_t)at, (uint32_t)n, 0);
    memcpy(b + PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES, recs, at);
    *len = PL_TRACE_HEADER_BYTES + PL_CHUNK_HEADER_BYTES + at;
    if (damaged) {
        memset(b + *len, 0x5a, 16); /* not a chunk header */
        *len += 16;
    }
    return b;
}

static void test_ingest_read(void **state) {
    (void)state;
    size_t len;
    pl_trace_reader_t *rd;
    for (int damaged = 0; damaged < 2; damaged++) {
        uint8_t *b = mem_trace(5, damaged, &len);
        assert_int_equal(pl_trace_open_mem(b, len, "t", &rd), 0);
        pl_ingest_t *in = pl_ingest_new();
        seen_t s = {.stop_at = -1};
        int end = 99;
        assert_int_equal(pl_ingest_read(in, rd, &all, &s, &end), 0);
        assert_int_equal(s.n[PL_REC_STEP], 5); /* every record before the damage */
        if (damaged) assert_true(end < 0);
        else assert_int_equal(end, 0);
        pl_trace_close(rd);
        pl_ingest_free(in);
        free(b);
    }
    /* a handler's error stops the read at that record and is returned */
    uint8_t *b = mem_trace(5, false, &len);
    assert_int_equal(pl_trace_open_mem(b, len, "t", &rd), 0);
    pl_ingest_t *in = pl_ingest_new();
    seen_t s = {.stop_at = 3};
    int end = 99;
    assert_int_equal(pl_ingest_read(in, rd, &all, &s, &end), -ENOSPC);
    assert_int_equal(s.n[PL_REC_STEP], 3);
    assert_int_equal(end, 1);
    pl_trace_close(rd);
    pl_ingest_free(in);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingest_dispatch),
        cmocka_unit_test(test_ingest_tables),
        cmocka_unit_test(test_ingest_symbol_budget),
        cmocka_unit_test(test_ingest_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
