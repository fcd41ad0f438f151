/* reports.retention: who keeps it (reports/retention.c, docs/retention.md).
 *
 * Pure: holders that grow with the steps are named, a buffer that fills then stays bounded, a list emptied each epoch
 * and a holder gone by the last census are not; a holder's first report carries its earlier censuses, placed at
 * their own steps. End to end: a synthetic trace (the tracer's writer) with a live-heap leak and a census that
 * reports `total_loss`: the verdict line says who keeps it, the text report lists it, the JSON has the retention
 * block; the same trace without retention records keeps the allocation-site verdict line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "extract.h"
#include "render.h"
#include "render_html.h"
#include "retention.h"
#include "helpers.h"
#include "sentences.h"
#include "writer.h"
#include "words.h"

static pl_rec_retention_t census_rec(uint32_t census, uint64_t step) {
    return (pl_rec_retention_t){.census = census, .step = step, .items = 1000, .nodes = 10, .bytes = 5000000,
                                .path = "", .what = "", .kind = "census", .file = "", .fix = ""};
}

static pl_rec_retention_t holder_rec(uint32_t census, uint64_t step, const char *path, uint64_t items,
                                     uint64_t nodes, uint64_t bytes) {
    return (pl_rec_retention_t){.census = census, .step = step, .items = items, .nodes = nodes, .bytes = bytes,
                                .line = 17, .path = path, .what = "local of train() in main.py",
                                .kind = items == PL_TRACE_NA ? "tensor" : "list", .file = "/src/main.py",
                                .fix = "accumulate `loss.item()` (or `loss.detach()`)"};
}

static const pl_retention_holder_t *find(const pl_retention_t *rt, const char *path) {
    for (size_t i = 0; i < rt->n_holders; i++)
        if (!strcmp(rt->holders[i].path, path)) return &rt->holders[i];
    return NULL;
}

/* censuses every 10 steps; sizes per census given by f(census) */
static void feed(pl_retention_t *rt, int n_census, const char *path, uint64_t (*items)(int), uint64_t (*nodes)(int)) {
    for (int c = 1; c <= n_census; c++) {
        pl_rec_retention_t q = census_rec((uint32_t)c, (uint64_t)c * 10);
        if (path == NULL || !strcmp(path, "total_loss")) assert_int_equal(pl_retention_add(rt, &q), 0);
        if (!path) continue;
        q = holder_rec((uint32_t)c, (uint64_t)c * 10, path, items ? items(c) : PL_TRACE_NA, nodes ? nodes(c) : 0,
                       (uint64_t)c * 1024);
        assert_int_equal(pl_retention_add(rt, &q), 0);
    }
}

static uint64_t graph_grows(int c) { return (uint64_t)c * 80; }                /* 8 nodes per step */
static uint64_t fills_then_flat(int c) { return c < 4 ? (uint64_t)c * 20 : 50; } /* a deque(maxlen=50) */
static uint64_t cleared(int c) { return (uint64_t)(c % 3) * 10; }               /* emptied each epoch */
static uint64_t list_grows(int c) { return (uint64_t)c * 10; }

static void test_retention_growth_not_size(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    feed(&rt, 8, "total_loss", NULL, graph_grows);
    feed(&rt, 8, "replay", fills_then_flat, NULL);
    feed(&rt, 8, "epoch_losses", cleared, NULL);
    feed(&rt, 8, "outputs", list_grows, NULL);
    feed(&rt, 8, "kept", list_grows, graph_grows);
    pl_retention_judge(&rt);
    pl_retention_say(&rt); /* the analysis writes each holder's line with its fix */
    assert_int_equal(rt.n_census, 8);
    assert_int_equal(rt.n_named, 3);
    const pl_retention_holder_t *h = find(&rt, "total_loss");
    assert_non_null(h);
    assert_true(h->named && h->by_nodes);
    assert_true(fabs(h->size_per_step - 8.0) < 1e-9);
    assert_true(fabs(h->bytes_per_step - 102.4) < 1e-9);
    assert_int_equal(h->first_step, 10);
    assert_int_equal(h->last_step, 80);
    h = find(&rt, "outputs");
    assert_true(h->named && !h->by_nodes && fabs(h->size_per_step - 1.0) < 1e-9);
    assert_true(h->nodes_per_step == 0); /* no graph among its items */
    char buf[400];
    pl_retention_holder_phrase(h, buf, sizeof buf);
    assert_string_equal(buf, "`outputs` (local of train() in main.py): list, +1 item/step, 8.0 KiB of tensors "
                             "(+102 B/step); likely fix: accumulate `loss.item()` (or `loss.detach()`) at main.py:17");
    assert_false(find(&rt, "replay")->named);       /* filled, then bounded */
    assert_false(find(&rt, "epoch_losses")->named); /* shrinks at each epoch */
    assert_true(rt.holders[0].named && rt.holders[1].named && rt.holders[2].named); /* named first */
    h = find(&rt, "kept"); /* a list of losses: their graphs are kept too */
    pl_retention_holder_phrase(h, buf, sizeof buf);
    assert_non_null(strstr(buf, "`kept` (local of train() in main.py): list, +1 item/step, holding autograd graphs "
                                "(+8 nodes/step), 8.0 KiB of tensors"));
    pl_retention_free(&rt);
}

/* the census reports a holder the first time it grows, with the sizes it had at the censuses before */
static void test_retention_history_at_own_steps(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    for (uint32_t c = 1; c <= 5; c++) {
        pl_rec_retention_t q = census_rec(c, 100 * c);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
    }
    for (uint32_t c = 1; c <= 5; c++) { /* all written at step 500, measured at censuses 1..5 */
        pl_rec_retention_t q = holder_rec(c, 500, "model.history", 100 * c, 0, PL_TRACE_NA);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
        assert_int_equal(pl_retention_add(&rt, &q), 0); /* a repeat keeps the first values */
    }
    pl_retention_judge(&rt);
    const pl_retention_holder_t *h = find(&rt, "model.history");
    assert_int_equal(h->n_points, 5);
    assert_true(h->named);
    assert_int_equal(h->first_step, 100);
    assert_int_equal(h->last_step, 500);
    assert_true(fabs(h->size_per_step - 1.0) < 1e-9); /* 400 items over 400 steps, not over 0 */
    assert_true(isnan(h->bytes_per_step));
    pl_retention_free(&rt);
    /* censuses past the first table of their steps (64): measured at censuses 62..66, each at its own step */
    rt = (pl_retention_t){0};
    for (uint32_t c = 1; c <= 300; c++) {
        pl_rec_retention_t q = census_rec(c, 10 * c);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
    }
    for (uint32_t c = 62; c <= 66; c++) {
        pl_rec_retention_t q = holder_rec(c, 3000, "model.history", 100 * c, 0, PL_TRACE_NA);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
    }
    pl_retention_judge(&rt);
    h = find(&rt, "model.history");
    assert_int_equal(h->n_points, 5);
    assert_int_equal(h->first_step, 620);
    assert_int_equal(h->last_step, 660);
    pl_retention_free(&rt);
}

/* a holder no longer reachable at the last census (its scope ended) keeps nothing now: not named; nor one with
 * fewer than PL_RETENTION_MIN_POINTS censuses */
static void test_retention_gone_or_short(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    for (uint32_t c = 1; c <= 8; c++) {
        pl_rec_retention_t q = census_rec(c, 10 * c);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
        if (c <= 6) {
            q = holder_rec(c, 10 * c, "gone", 10 * c, 0, 0);
            assert_int_equal(pl_retention_add(&rt, &q), 0);
        }
        if (c >= 6) {
            q = holder_rec(c, 10 * c, "late", 10 * c, 0, 0);
            assert_int_equal(pl_retention_add(&rt, &q), 0);
        }
    }
    pl_retention_judge(&rt);
    assert_int_equal(rt.n_named, 0);
    char buf[256];
    assert_int_equal(pl_retention_sentence(&rt, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    pl_retention_free(&rt);
}

/* a tensor's graph past the census's node cap: its size is a lower bound; still named, at the exact points' rate */
static void test_retention_capped_graph(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    for (uint32_t c = 1; c <= 8; c++) {
        pl_rec_retention_t q = census_rec(c, 100 * c);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
        q = holder_rec(c, 100 * c, "total_loss", PL_TRACE_NA, c <= 3 ? 800 * c : 5000, 4);
        if (c > 3) q.flags |= PL_RETENTION_CAPPED;
        assert_int_equal(pl_retention_add(&rt, &q), 0);
        q = holder_rec(c, 100 * c, "flat_capped", PL_TRACE_NA, c <= 3 ? 5000 - 10 * (4 - c) : 5000, 4);
        if (c > 3) q.flags |= PL_RETENTION_CAPPED;
        assert_int_equal(pl_retention_add(&rt, &q), 0);
    }
    pl_retention_judge(&rt);
    const pl_retention_holder_t *h = find(&rt, "total_loss");
    assert_true(h->named);
    assert_true(fabs(h->size_per_step - 8.0) < 1e-9); /* 800 -> 2400 over steps 100 -> 300 */
    assert_int_equal(h->first_step, 100);
    assert_int_equal(h->last_step, 800);
    assert_true(find(&rt, "flat_capped")->named); /* grew in each exact interval, then at least as big */
    pl_retention_free(&rt);
}

/* the holder table is bounded: holders no longer reachable make room for new ones */
static void test_retention_table_recycles_gone_holders(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    char path[32];
    for (uint32_t c = 1; c <= 8; c++) {
        pl_rec_retention_t q = census_rec(c, 10 * c);
        assert_int_equal(pl_retention_add(&rt, &q), 0);
        if (c <= 2) /* 2 * 12 holders seen once each, then gone */
            for (int k = 0; k < 12; k++) {
                snprintf(path, sizeof path, "gone%u_%d", c, k);
                q = holder_rec(c, 10 * c, path, 5, 0, 0);
                assert_int_equal(pl_retention_add(&rt, &q), 0);
            }
        if (c >= 4) {
            q = holder_rec(c, 10 * c, "late_leak", 10 * c, 0, 0);
            assert_int_equal(pl_retention_add(&rt, &q), 0);
        }
    }
    assert_int_equal(rt.n_holders, PL_RETENTION_MAX_HOLDERS);
    pl_retention_judge(&rt);
    assert_int_equal(rt.n_named, 1);
    assert_string_equal(rt.holders[0].path, "late_leak");
    assert_int_equal(rt.holders[0].n_points, 5);
    pl_retention_free(&rt);
}

static void test_retention_sentence(void **state) {
    (void)state;
    pl_retention_t rt = {0};
    feed(&rt, 6, "total_loss", NULL, graph_grows);
    pl_retention_judge(&rt);
    pl_retention_say(&rt); /* the analysis writes each holder's line with its fix */
    char buf[600];
    size_t n = pl_retention_sentence(&rt, buf, sizeof buf);
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "kept by `total_loss` (local of train() in main.py; autograd graph +8 nodes/step); likely "
                             "fix: accumulate `loss.item()` (or `loss.detach()`) at main.py:17");
    pl_retention_holder_phrase(&rt.holders[0], buf, sizeof buf); /* in full, for the lists */
    assert_string_equal(buf, "`total_loss` (local of train() in main.py): a tensor whose autograd graph grows 8 "
                             "nodes/step, 6.0 KiB of tensors (+102 B/step); likely fix: accumulate `loss.item()` (or "
                             "`loss.detach()`) at main.py:17");
    pl_retention_free(&rt);
}

/* ---- end to end: writer -> extract -> verdict line, text, JSON ---- */

/* ranges: the leak's memory is sampled host allocations made at main.py:42 (one per step, at LEAK_ADDR(step)), and
 * the holder's records carry its 30 newest storages, plus 2 that no sampled allocation begins at (trace 1.9) */
#define LEAK_ADDR(step) (0x40000000ull + (uint64_t)(step) * 0x100000ull)

static void write_trace_ranges(const char *path, bool with_census, bool leak, bool ranges) {
    const int64_t t0 = 1000000000LL, sec = 1000000000LL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = 9,
                           .ppid = 1, .start_mono_ns = t0};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    pl_rec_process_t proc = {.pid = 9, .ppid = 1, .rank = -1, .local_rank = -1, .interval_ns = 100000000,
                             .host_mem_bytes = 1ull << 30, .cgroup_max_bytes = PL_TRACE_NA,
                             .exe = "/usr/bin/python3", .argc = 2, .n_argv = 2};
    proc.argv[0] = "python3";
    proc.argv[1] = "main.py";
    pl_writer_t *w = pl_test_trace_open(path, &h, &opt, t0, &proc);
    pl_trace_record_t r;
    if (ranges) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_PYFRAME;
        r.t_ns = t0 + 1;
        r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = 1, .line = 42, .file = "/src/main.py", .function = "train"};
        pl_test_emit_flush(w, &r);
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STACK;
        r.t_ns = t0 + 2;
        r.u.stack.stack_id = 1;
        r.u.stack.n_frames = 1;
        r.u.stack.pcs[0] = 0x401000;
        r.u.stack.n_py = 1;
        r.u.stack.py[0] = 1;
        pl_test_emit_flush(w, &r);
    }
    uint32_t census = 0;
    for (int s = 1; s <= 160; s++) {
        int64_t t = t0 + s * sec;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = t;
        r.u.heap = (pl_rec_heap_t){.step = (uint64_t)s, .live_bytes = 100000000 + (leak && s > 10 ? s * 367 * 1024 : 0) +
                                                                      (s * 7919 % 13) * 4096,
                                   .live_count = 5000 + s * 31 % 7};
        pl_test_emit_flush(w, &r);
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STEP;
        r.t_ns = t + 10;
        r.u.step = (pl_rec_step_t){.step = (uint64_t)s, .source = PL_STEP_OPTIMIZER};
        pl_test_emit_flush(w, &r);
        if (ranges && leak && s > 10) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HOST_ALLOC;
            r.t_ns = t + 5;
            r.u.host_alloc = (pl_rec_host_alloc_t){.addr = LEAK_ADDR(s), .size = 367 * 1024, .stack_id = 1, .tid = 9,
                                                   .call_ordinal = PL_TRACE_NA};
            pl_test_emit_flush(w, &r);
        }
        if (!with_census || s % 20) continue;
        census++;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_RETENTION;
        r.t_ns = t + 20;
        r.u.retention = census_rec(census, (uint64_t)s);
        pl_test_emit_flush(w, &r);
        if (census < 2) continue; /* first reported at census 2, with census 1 */
        for (uint32_t c = census == 2 ? 1 : census; c <= census; c++) {
            r.u.retention = holder_rec(c, (uint64_t)s, "total_loss", PL_TRACE_NA, 160 * c, 367 * 1024 * 20 * c);
            if (ranges && c == census) { /* storages as measured at this census */
                for (uint32_t i = 0; i < 30; i++) {
                    r.u.retention.range_addr[i] = LEAK_ADDR(s - (int)i);
                    r.u.retention.range_bytes[i] = 367 * 1024;
                }
                r.u.retention.range_addr[30] = 0x1000;
                r.u.retention.range_addr[31] = LEAK_ADDR(s) + 64; /* inside, not at the start: not matched */
                r.u.retention.range_bytes[30] = r.u.retention.range_bytes[31] = 4096;
                r.u.retention.n_ranges = 32;
            }
            pl_test_emit_flush(w, &r);
        }
    }
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_END;
    r.t_ns = t0 + 161 * sec;
    pl_test_emit(w, &r);
    pl_test_trace_close(w);
}

static char *render(pl_report_t *rep, pl_extract_t *x, int json) { /* 0 text, 1 JSON, 2 HTML */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    pl_run_t run = {rep, x};
    if (json == 2) assert_int_equal(pl_render_html(&run, f), 0);
    else assert_int_equal(json ? pl_render_run_json(&run, f, 64) : pl_render_run_lines(&run, f, false), 0);
    fclose(f);
    return buf;
}

static char g_verdict[640];

static void run_one_ranges(const char *path, bool census, bool leak, bool ranges, char **text, char **json,
                           char **html) {
    write_trace_ranges(path, census, leak, ranges);
    pl_report_t *rep = pl_report_create(path);
    assert_non_null(rep);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(rep, &x, path, NULL), 0);
    assert_string_equal(rep->procs[0]->holder_line, ""); /* extraction records facts; the sentence is the analysis's */
    assert_int_equal(pl_run_analyze(&(pl_run_t){rep, &x}), 0); /* writes the holder sentence, once */
    snprintf(g_verdict, sizeof g_verdict, "%s", rep->verdict.line);
    *text = render(rep, &x, 0);
    *json = render(rep, &x, 1);
    *html = render(rep, &x, 2);
    pl_extract_free(&x);
    pl_report_destroy(rep);
}

static void run_one(const char *path, bool census, bool leak, char **text, char **json, char **html) {
    run_one_ranges(path, census, leak, false, text, json, html);
}

/* Who keeps it, and where that was allocated: the holder's storages begin at the growing site's sampled
 * allocations, so the report ties the two (its phrase in the lists, JSON allocated_at); without storages, or when
 * none match, nothing is claimed. */
static void test_retention_allocated_at(void **state) {
    (void)state;
    char path[200], *text, *json, *html;
    pl_test_path(path, sizeof path, "9.0.pltrace");
    run_one_ranges(path, true, true, true, &text, &json, &html);
    assert_non_null(strstr(g_verdict, "kept by `total_loss`"));
    assert_non_null(strstr(text, "; it holds memory allocated at main.py:42 in train (30 of its 32 largest storages "
                                 "are sampled allocations there)"));
    assert_non_null(strstr(json, "\"allocated_at\": {\"site\": \"main.py:42 in train\", \"storages_matched\": 30, "
                                 "\"storages_checked\": 32, \"bytes\": "));
    assert_non_null(strstr(html, "it holds memory allocated at main.py:42 in train"));
    free(text);
    free(json);
    free(html);
    unlink(path);
    run_one_ranges(path, true, true, false, &text, &json, &html); /* no storages recorded: no claim */
    assert_non_null(strstr(json, "\"allocated_at\": null"));
    assert_null(strstr(text, "it holds memory allocated at"));
    free(text);
    free(json);
    free(html);
    unlink(path);
}

static void test_retention_end_to_end(void **state) {
    (void)state;
    char path[200], *text, *json, *html;
    pl_test_path(path, sizeof path, "9.0.pltrace");
    run_one(path, true, true, &text, &json, &html);
    const char *verdict = g_verdict;
    assert_non_null(strstr(verdict, "verdict: LEAK in pid 9 (python3 main.py): +367 KiB/step of heap.bytes"));
    assert_non_null(strstr(verdict, "; kept by `total_loss` (local of train() in main.py; autograd graph +8 "
                                    "nodes/step); likely fix: accumulate `loss.item()` (or `loss.detach()`) at "
                                    "main.py:17"));
    assert_non_null(strstr(text, "who keeps it (pid 9, 8 censuses):\n  1. `total_loss`"));
    assert_non_null(strstr(json, "\"retention\": {\"censuses\": 8, \"stopped_short\": false"));
    assert_non_null(strstr(json, "\"path\": \"total_loss\", \"what\": \"local of train() in main.py\", \"kind\": "
                                 "\"tensor\", \"named\": true, \"size_unit\": \"autograd_nodes\""));
    assert_non_null(strstr(json, "\"line\": {\"file\": \"/src/main.py\", \"line\": 17, \"guess\": false}"));
    assert_non_null(strstr(html, "<h3>Who keeps it (8 censuses)</h3>\n<ol>\n<li>`total_loss` (local of train() in "
                                 "main.py)"));
    free(text);
    free(json);
    free(html);
    unlink(path);
    run_one(path, false, true, &text, &json, &html); /* no census: the verdict line as before, retention null */
    assert_non_null(strstr(g_verdict, "verdict: LEAK in pid 9 (python3 main.py): +367 KiB/step of heap.bytes"));
    assert_null(strstr(g_verdict, "kept by"));
    assert_null(strstr(text, "who keeps it"));
    assert_non_null(strstr(json, "\"retention\": null"));
    assert_null(strstr(html, "Who keeps it"));
    free(text);
    free(json);
    free(html);
    unlink(path);
    run_one(path, true, false, &text, &json, &html); /* a growing holder, flat memory: listed, not as a leak's */
    assert_null(strstr(g_verdict, "kept by"));
    assert_null(strstr(text, "who keeps it"));
    assert_non_null(strstr(text, "growing references (pid 9, 8 censuses; its memory does not grow: not a leak):\n"
                                 "  1. `total_loss`"));
    assert_non_null(strstr(html, "<h3>Growing references"));
    assert_non_null(strstr(json, "\"named\": true"));
    free(text);
    free(json);
    free(html);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retention_growth_not_size),
        cmocka_unit_test(test_retention_history_at_own_steps),
        cmocka_unit_test(test_retention_gone_or_short),
        cmocka_unit_test(test_retention_capped_graph),
        cmocka_unit_test(test_retention_table_recycles_gone_holders),
        cmocka_unit_test(test_retention_sentence),
        cmocka_unit_test(test_retention_end_to_end),
        cmocka_unit_test(test_retention_allocated_at),
    };
    return cmocka_run_group_tests(tests, pl_test_dir_setup, pl_test_dir_teardown);
}
