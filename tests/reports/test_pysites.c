/* reports.pysites: growing sites named by the Python line (reports/extract.c, reports/pysites.c,
 * docs/python-frames.md) on a synthetic trace written with the tracer's writer.
 *
 * Planted: one user line (train.py:42) reached through two native stacks, one of them under a torch module frame
 * (site-packages): the two merge into one site named by the user's line with its source text, the torch frame kept
 * in the Python stack; a native-only stack stays a site of its own, named by native frames as before; a freed
 * scratch allocation is not a site. Then the path classification on its own. */
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
#include "extract.h"
#include "pysites.h"
#include "render.h"
#include "render_html.h"
#include "helpers.h"
#include "sentences.h"
#include "writer.h"

static char g_src[256];

static void write_trace(const char *path) {
    const int64_t t0 = 1000000000LL, sec = 1000000000LL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = 7,
                           .ppid = 1, .start_mono_ns = t0};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    pl_rec_process_t proc = {.pid = 7, .ppid = 1, .rank = -1, .local_rank = -1, .sample_bytes = 0,
                             .interval_ns = 100000000, .host_mem_bytes = 8ull << 30, /* 160 KB/s: ~15 h */
                             .cgroup_max_bytes = PL_TRACE_NA, .exe = "/usr/bin/python3", .argc = 1, .n_argv = 1};
    proc.argv[0] = "python3";
    pl_writer_t *w = pl_test_trace_open(path, &h, &opt, t0, &proc);
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_MODULE;
    r.u.module = (pl_rec_module_t){.module_id = 1, .base = 0x400000, .path = "/opt/gone/python3"};
    pl_test_emit_flush(w, &r);
    static const char *const syms[] = {"malloc", "alloc_a", "alloc_b", "alloc_c", "main"};
    for (int i = 0; i < 5; i++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_FRAME;
        r.u.frame = (pl_rec_frame_t){.pc = 0x401000u + 0x1000u * (unsigned)i, .module_id = 1,
                                     .module_offset = 0x1000u + 0x1000u * (unsigned)i, .symbol = syms[i],
                                     .symbol_offset = 4};
        pl_test_emit_flush(w, &r);
    }
    const struct { uint32_t id; int line; const char *file, *fn; } pyf[] = {
        {1, 42, g_src, "train_epoch"},
        {2, 60, g_src, "<module>"},
        {3, 1194, "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "Module._call_impl"},
        {4, 30, g_src, "scratch"},
    };
    for (int i = 0; i < 4; i++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_PYFRAME;
        r.u.pyframe = (pl_rec_pyframe_t){pyf[i].id, pyf[i].line, pyf[i].file, pyf[i].fn};
        pl_test_emit_flush(w, &r);
    }
    /* stacks: 1 and 2 reach train.py:42 through different native frames; 3 is scratch (freed); 4 is native only */
    const struct { uint32_t native; uint32_t n_py; uint32_t py[3]; } stk[] = {
        {1, 3, {3, 1, 2}}, {2, 2, {1, 2}}, {3, 2, {4, 2}}, {1, 0, {0}}};
    for (uint32_t i = 0; i < 4; i++) {
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STACK;
        r.u.stack.stack_id = i + 1;
        r.u.stack.n_frames = 3;
        r.u.stack.pcs[0] = 0x401000;
        r.u.stack.pcs[1] = 0x401000u + 0x1000u * stk[i].native;
        r.u.stack.pcs[2] = 0x405000;
        r.u.stack.n_py = stk[i].n_py;
        memcpy(r.u.stack.py, stk[i].py, sizeof stk[i].py);
        pl_test_emit_flush(w, &r);
    }
    static const uint64_t leak[4] = {100000, 50000, 0, 10000};
    uint64_t leaked = 0;
    for (int s = 1; s <= 160; s++) {
        int64_t t = t0 + s * sec;
        for (uint32_t k = 0; k < 4 && s > 20; k++) { /* flat for 20 steps, then the leaks */
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HOST_ALLOC;
            r.t_ns = t + k;
            uint64_t addr = k == 2 ? 0x90000000ull : 0x10000000ull + (uint64_t)s * 0x100000ull + k * 0x10000ull;
            r.u.host_alloc = (pl_rec_host_alloc_t){.addr = addr, .size = k == 2 ? 1 << 20 : leak[k],
                                                   .stack_id = k + 1, .tid = 7};
            pl_test_emit_flush(w, &r);
            leaked += leak[k];
        }
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HOST_FREE; /* the scratch buffer (freeing an address never sampled is ignored) */
        r.t_ns = t + 10;
        r.u.host_free = (pl_rec_host_free_t){.addr = 0x90000000ull, .tid = 7};
        pl_test_emit_flush(w, &r);
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = t + 20;
        r.u.heap = (pl_rec_heap_t){.step = (uint64_t)s,
                                   .live_bytes = 100000000 + (int64_t)leaked + (int64_t)((s * 7919) % 13) * 4096,
                                   .live_count = 5000 + s * 3};
        pl_test_emit_flush(w, &r);
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STEP;
        r.t_ns = t + 30;
        r.u.step = (pl_rec_step_t){.step = (uint64_t)s, .source = PL_STEP_API_CALL};
        pl_test_emit_flush(w, &r);
    }
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_END;
    r.t_ns = t0 + 161 * sec;
    pl_test_emit(w, &r);
    pl_test_trace_close(w);
}

/* the scratch directory, holding the script the trace's Python frames name */
static int setup(void **state) {
    if (pl_test_dir_setup(state)) return -1;
    pl_test_path(g_src, sizeof g_src, "train.py");
    FILE *f = fopen(g_src, "w");
    if (!f) return -1;
    for (int i = 1; i <= 70; i++)
        fprintf(f, i == 42 ? "        epoch_logits.append(logits)   \n" : "x = %d\n", i);
    fclose(f);
    return 0;
}

static char *render(pl_report_t *rep, pl_extract_t *x, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    pl_run_t run = {rep, x};
    assert_int_equal(json ? pl_render_run_json(&run, f, 64) : pl_render_run_lines(&run, f, false), 0);
    fclose(f);
    return buf;
}

static void test_pysites_merge_by_user_line(void **state) {
    (void)state;
    char path[200];
    pl_test_path(path, sizeof path, "7.0.pltrace");
    write_trace(path);
    pl_report_t *rep = pl_report_create(path);
    assert_non_null(rep);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(rep, &x, path, NULL), 0);
    assert_string_equal(rep->procs[0]->site_line, ""); /* extraction records facts; the sentence is the analysis's */
    assert_int_equal(pl_run_analyze(&(pl_run_t){rep, &x}), 0); /* writes the site sentence, once */
    assert_string_equal(rep->procs[0]->site_line, "94% of it allocated at train.py:42 (`epoch_logits.append(logits)`)");
    const pl_extract_proc_t *p = &x.procs[0];
    assert_int_equal(p->n_sites, 2);
    const pl_extract_site_t *top = &p->sites[0], *nat = &p->sites[1];
    /* stacks 1 and 2 merged: named by the user's line, not the torch frame inside it */
    assert_string_equal(top->py_name, "train.py:42 in train_epoch");
    assert_int_equal(top->n_stacks, 2);
    assert_int_equal(top->py_line, 42);
    assert_string_equal(top->py_file, g_src);
    assert_string_equal(top->py_source, "epoch_logits.append(logits)");
    assert_true(top->growth_bytes > 14 * nat->growth_bytes && top->growth_bytes < 16 * nat->growth_bytes);
    assert_true(top->share > 0.93 && top->share < 0.94); /* 150000 of 160000 per step */
    assert_int_equal(top->stack_id, 1);                   /* the stack that grew most */
    assert_int_equal(top->n_py, 3);
    assert_string_equal(top->py_frames[0], "/usr/lib/python3/dist-packages/torch/nn/modules/module.py:1194 in "
                                           "Module._call_impl");
    assert_string_equal(top->py_short[0], "torch/nn/modules/module.py:1194 in Module._call_impl");
    assert_string_equal(top->py_short[2], "train.py:60 in <module>");
    /* the native-only stack: a site of its own, named as before (first frame after malloc) */
    assert_null(nat->py_name);
    assert_int_equal(nat->n_stacks, 1);
    assert_true(nat->n_frames >= 1 && strstr(nat->frames[0], "alloc_a"));
    char *text = render(rep, &x, false);
    assert_non_null(strstr(text, "94% of it allocated at train.py:42 (`epoch_logits.append(logits)`)"));
    char sentence[128];
    size_t n = pl_run_site_sentence(p, sentence, sizeof sentence);
    assert_int_equal(n, strlen(sentence));
    assert_string_equal(sentence, "94% of it allocated at train.py:42 (`epoch_logits.append(logits)`)");
    assert_int_equal(pl_run_site_sentence(p, sentence, 10), 9); /* cut, still terminated */
    assert_string_equal(sentence, "94% of it");
    assert_non_null(strstr(text, "train.py:42 in train_epoch: `epoch_logits.append(logits)`"));
    assert_non_null(strstr(text, "<- train.py:60 in <module>"));
    free(text);
    /* the text says the row's sentence, the one the verdict and the HTML quote: never a second spelling of it */
    snprintf(rep->procs[0]->site_line, sizeof rep->procs[0]->site_line, "the row's own sentence");
    text = render(rep, &x, false);
    assert_non_null(strstr(text, "\n  the row's own sentence\n"));
    assert_null(strstr(text, "of it allocated at"));
    free(text);
    char *json = render(rep, &x, true);
    assert_non_null(strstr(json, "\"python\": {\"name\": \"train.py:42 in train_epoch\""));
    assert_non_null(strstr(json, "\"merged_stacks\": 2"));
    free(json);
    char *html = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&html, &len);
    assert_int_equal(pl_render_html(&(pl_run_t){rep, &x}, f), 0);
    fclose(f);
    assert_non_null(strstr(html, "<b><code>train.py:42 in train_epoch</code></b>: <code>epoch_logits.append(logits)"));
    assert_non_null(strstr(html, "<details><summary>2 native frames</summary>"));
    free(html);
    pl_extract_free(&x);
    pl_report_destroy(rep);
}

static void test_pysites_paths(void **state) {
    (void)state;
    assert_true(pl_pysite_is_user("/home/u/train.py"));
    assert_true(pl_pysite_is_user("train.py"));
    assert_false(pl_pysite_is_user("/usr/lib/python3.11/threading.py"));
    assert_false(pl_pysite_is_user("/root/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py"));
    assert_false(pl_pysite_is_user("/usr/lib/python3/dist-packages/torch/nn/modules/module.py"));
    /* plateau's own Python side, built or installed, is not the user's code; a user's folders of the same names are */
    assert_false(pl_pysite_is_user("/work/plateau/build/python/plateau/_census.py"));
    assert_false(pl_pysite_is_user("/usr/share/plateau/python/plateau/_steps.py"));
    assert_false(pl_pysite_is_user("/opt/p/share/plateau/python/boot/sitecustomize.py"));
    assert_true(pl_pysite_is_user("/home/u/robot/python/boot/train.py"));
    assert_true(pl_pysite_is_user("/home/u/proj/python/plateau/model.py"));
    /* the wheel's package, also where pip --target put it (no site-packages in the path) */
    assert_false(pl_pysite_is_user("/opt/tools/plateau_profiler/_census.py"));
    assert_false(pl_pysite_is_user("/opt/tools/plateau_profiler/boot/sitecustomize.py"));
    assert_true(pl_pysite_is_user("/home/u/plateau_profiler/train.py"));
    assert_false(pl_pysite_is_user("/venv/lib/python3.11/site-packages/numpy/core/numeric.py"));
    assert_false(pl_pysite_is_user("<frozen importlib._bootstrap>"));
    assert_false(pl_pysite_is_user(""));
    assert_string_equal(pl_pysite_short("/home/u/proj/train.py"), "train.py");
    assert_string_equal(pl_pysite_short("/usr/lib/python3/dist-packages/torch/nn/functional.py"),
                        "torch/nn/functional.py");
    assert_string_equal(pl_pysite_short("/usr/lib64/python3.11/threading.py"), "threading.py");
    assert_string_equal(pl_pysite_short("<frozen os>"), "<frozen os>");
    assert_null(pl_pysite_source("/nonexistent/train.py", 3, 0));
    assert_null(pl_pysite_source("<frozen os>", 3, 0));
    /* a file changed after the run started is not quoted */
    char *src = pl_pysite_source(g_src, 42, 0);
    assert_string_equal(src, "epoch_logits.append(logits)");
    free(src);
    assert_null(pl_pysite_source(g_src, 42, 1700000000000000000LL));
    assert_null(pl_pysite_source(g_src, 71, 0)); /* past the end */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pysites_merge_by_user_line),
        cmocka_unit_test(test_pysites_paths),
    };
    return cmocka_run_group_tests(tests, setup, pl_test_dir_teardown);
}
