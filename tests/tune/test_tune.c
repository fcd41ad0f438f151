/* tune/tune: grid syntax, ranking on the crafted fragmentation sequence (an expandable config must win where the
 * default runs out of memory), the explanation, JSON, and determinism across thread counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"
#include "tune.h"
#include "test_replay_synth.h"

static char tmp[512];
static pl_replay_seq_t frag;

/* pl_tune_render_text into a malloc'd string (the frag sequence's header). */
static char *render_text(const pl_tune_t *t, size_t max_rows) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(pl_tune_render_text(t, &frag, max_rows, f), 0);
    fclose(f);
    return buf;
}

static void test_tune_grid_parse(void **state) {
    (void)state;
    pl_tune_grid_t *g = malloc(sizeof *g);
    char err[1024], text[512];
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse(NULL, g, err, sizeof err), 0);
    assert_int_equal(g->n_keys, 4);
    assert_int_equal(pl_tune_grid_size(g), 2 * 4 * 3 * 3);
    pl_tune_grid_text(g, 0, text, sizeof text);
    assert_string_equal(text, "expandable_segments:False");
    pl_tune_grid_text(g, pl_tune_grid_size(g) - 1, text, sizeof text);
    assert_string_equal(text, "expandable_segments:True,max_split_size_mb:1024,garbage_collection_threshold:0.8,"
                              "roundup_power2_divisions:8");
    assert_int_equal(pl_tune_grid_parse(" expandable_segments = True | default ; roundup_power2_divisions="
                                        "[256:1,>:4]|-", g, err, sizeof err), 0);
    assert_int_equal(pl_tune_grid_size(g), 4);
    pl_tune_grid_text(g, 0, text, sizeof text);
    assert_string_equal(text, "expandable_segments:True,roundup_power2_divisions:[256:1,>:4]");
    pl_tune_grid_text(g, 3, text, sizeof text);
    assert_string_equal(text, "");
    /* misuse: clear messages */
    assert_int_equal(pl_tune_grid_parse("max_split_size_mbb=100", g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "max_split_size_mbb"));
    assert_int_equal(pl_tune_grid_parse("max_split_size_mb=5", g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "max_split_size_mb"));
    assert_int_equal(pl_tune_grid_parse("expandable_segments", g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "key=v1|v2"));
    assert_int_equal(pl_tune_grid_parse("a=1;a=2", g, err, sizeof err), -EINVAL);
    assert_int_equal(pl_tune_grid_parse("", g, err, sizeof err), -EINVAL);
    free(g);
}

static void test_tune_ranks_expandable_first(void **state) {
    (void)state;
    pl_tune_grid_t *g = malloc(sizeof *g);
    char err[1024], expl[1024];
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse(NULL, g, err, sizeof err), 0);
    pl_tune_t t;
    assert_int_equal(pl_tune_run(&frag, g, frag.capacity_bytes, 2, &t, err, sizeof err), 0);
    assert_int_equal(t.n_entries, 72);
    assert_true(t.entries[0].cfg.expandable_segments);
    assert_int_equal(t.entries[0].res.n_ooms, 0);
    assert_true(t.baseline.res.n_ooms > 0);
    assert_string_equal(t.baseline.conf, "");
    /* ranked: no OOM first, then peak reserved ascending */
    for (size_t i = 1; i < t.n_entries; i++) assert_true(pl_tune_compare(&t.entries[i - 1], &t.entries[i]) < 0);
    size_t n_ok = 0;
    for (size_t i = 0; i < t.n_entries; i++)
        if (!t.entries[i].res.n_ooms) {
            n_ok++;
            assert_true(t.entries[i].cfg.expandable_segments); /* only expandable configs fit here */
        }
    assert_true(n_ok >= 1 && n_ok <= 36);
    pl_tune_explain(&t, expl, sizeof expl);
    assert_non_null(strstr(expl, "run out of memory at event 45"));
    assert_non_null(strstr(expl, "expandable segments"));
    /* text and JSON */
    char *buf = render_text(&t, 5);
    assert_non_null(strstr(buf, "PLATEAU_ALLOC_CONF=expandable_segments:True"));
    assert_non_null(strstr(buf, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    assert_non_null(strstr(buf, "(defaults)")); /* the baseline row is shown even below the top 5 */
    free(buf);
    /* identical results share a row: with every row shown, rows plus "the same for N more" cover all 72 configs,
     * in fewer than 72 rows; with one row, the baseline's still shows, then the hint */
    buf = render_text(&t, 0);
    size_t n_rows = 0, n_covered = 0;
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        int rank = 0, n = 0;
        size_t more = 0;
        if (sscanf(line, "%d %n", &rank, &n) == 1 && rank >= 1 && n > 0 && strncmp(line + n, "no", 2) == 0) {
            n_rows++;
            n_covered++;
        } else if (sscanf(line, "%d OOM%n", &rank, &n) == 1 && n > 0) {
            n_rows++;
            n_covered++;
        } else if (sscanf(line, " = the same for %zu more", &more) == 1) {
            n_covered += more;
        }
    }
    assert_int_equal(n_covered, 72);
    assert_true(n_rows >= 2 && n_rows < 72);
    free(buf);
    buf = render_text(&t, 1);
    const char *gap = strstr(buf, "  ...\n");
    assert_non_null(gap);
    assert_non_null(strstr(gap, " OOM@45 ")); /* after the gap: the baseline's row, which runs out of memory */
    assert_non_null(strstr(gap, "(defaults)"));
    free(buf);
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_tune_render_json(&t, &frag, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"PYTORCH_CUDA_ALLOC_CONF\":\"expandable_segments:True"));
    assert_non_null(strstr(buf, "\"rank\":72"));
    free(buf);
    pl_tune_free(&t);
    free(g);
}

/* Where the capacity came from (--capacity, the recording, the default) and the legend under the table. */
static void test_tune_capacity_and_legend(void **state) {
    (void)state;
    char why[128], err[1024];
    assert_int_equal(pl_replay_pick_capacity(&frag, 1u << 30, why, sizeof why), 1u << 30);
    assert_string_equal(why, "--capacity");
    assert_int_equal(pl_replay_pick_capacity(&frag, 0, why, sizeof why), RS_FRAG_CAPACITY);
    assert_string_equal(why, "from the trace's alloc_stats");
    pl_replay_seq_t none;
    pl_replay_seq_init(&none, 0);
    assert_int_equal(pl_replay_pick_capacity(&none, 0, why, sizeof why), PL_REPLAY_DEFAULT_CAPACITY_BYTES);
    assert_string_equal(why, "default: not recorded; use --capacity");
    pl_replay_seq_free(&none);

    pl_tune_grid_t *g = malloc(sizeof *g);
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse("expandable_segments=False|True", g, err, sizeof err), 0);
    pl_tune_t t;
    uint64_t cap = pl_replay_pick_capacity(&frag, 0, why, sizeof why);
    assert_int_equal(pl_tune_run(&frag, g, cap, 1, &t, err, sizeof err), 0);
    snprintf(t.capacity_why, sizeof t.capacity_why, "%s", why);
    char *buf = render_text(&t, 0);
    assert_non_null(strstr(buf, "\ncapacity: 100.0 MiB (from the trace's alloc_stats)\n"));
    /* the legend: after the table, before the best line */
    const char *legend = strstr(buf, "\n  unalloc@peak: reserved - allocated when reserved first reached its peak");
    assert_non_null(legend);
    assert_true(legend > strstr(buf, "(defaults)"));
    assert_true(legend < strstr(buf, "\nbest:"));
    assert_non_null(strstr(buf, "\n  OOM: no, or OOM@N:"));
    assert_non_null(strstr(buf, "\n  dev calls: segment allocations + page maps; expandable segments map one page"));
    free(buf);
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pl_tune_render_json(&t, &frag, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"capacity_bytes\":104857600,\"capacity_source\":\"from the trace's alloc_stats\","));
    free(buf);
    pl_tune_free(&t);
    free(g);
}

/* A group of identical results names the defaults first when they are in it but not its first row. */
static void test_tune_rows_grouped(void **state) {
    (void)state;
    pl_tune_entry_t e[4];
    memset(e, 0, sizeof e);
    for (int i = 0; i < 4; i++) {
        e[i].grid_index = (size_t)i;
        e[i].res.first_oom_event = -1;
        e[i].res.peak_reserved_bytes = i < 3 ? 20 << 20 : 40 << 20;
        e[i].res.peak_allocated_bytes = 10 << 20;
        e[i].res.reserved_per_allocated = i < 3 ? 2.0 : 4.0;
        e[i].res.n_device_calls = 3;
    }
    snprintf(e[0].conf, sizeof e[0].conf, "a:1");
    snprintf(e[2].conf, sizeof e[2].conf, "c:3");
    snprintf(e[3].conf, sizeof e[3].conf, "d:4");
    pl_tune_t t = {.entries = e, .n_entries = 4, .capacity_bytes = 1ull << 30, .n_threads = 1};
    t.baseline = e[1];
    char *buf = render_text(&t, 0);
    assert_non_null(strstr(buf, "   1  no "));
    assert_non_null(strstr(buf, "  a:1\n      = the same for 2 more: (defaults); c:3\n"));
    assert_non_null(strstr(buf, "   4  no "));
    assert_null(strstr(buf, "   2  no ")); /* ranks 2 and 3 are in rank 1's row */
    free(buf);
    buf = render_text(&t, 1); /* one row: d:4's is cut, and the text says how to see it */
    assert_null(strstr(buf, "d:4"));
    assert_non_null(strstr(buf, "--top 0 shows every row"));
    free(buf);
}

/* Same results, same order, whatever the thread count. */
static void test_tune_deterministic(void **state) {
    (void)state;
    pl_tune_grid_t *g = malloc(sizeof *g);
    char err[1024];
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse(NULL, g, err, sizeof err), 0);
    pl_tune_t a, b;
    assert_int_equal(pl_tune_run(&frag, g, frag.capacity_bytes, 1, &a, err, sizeof err), 0);
    assert_int_equal(pl_tune_run(&frag, g, frag.capacity_bytes, 3, &b, err, sizeof err), 0);
    assert_int_equal(a.n_entries, b.n_entries);
    for (size_t i = 0; i < a.n_entries; i++) {
        assert_int_equal(a.entries[i].grid_index, b.entries[i].grid_index);
        assert_string_equal(a.entries[i].conf, b.entries[i].conf);
        assert_memory_equal(&a.entries[i].res, &b.entries[i].res, sizeof a.entries[i].res);
    }
    pl_tune_free(&a);
    pl_tune_free(&b);
    free(g);
}

/* A grid without the defaults still replays them as the baseline; with room enough, the defaults can win. */
static void test_tune_baseline_outside_grid(void **state) {
    (void)state;
    pl_tune_grid_t *g = malloc(sizeof *g);
    char err[1024], expl[1024];
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse("garbage_collection_threshold=0.5|0.9", g, err, sizeof err), 0);
    pl_tune_t t;
    assert_int_equal(pl_tune_run(&frag, g, 100 * RS_MIB, 0, &t, err, sizeof err), 0);
    assert_int_equal(t.n_entries, 2);
    assert_true(t.baseline.res.n_ooms > 0);
    pl_tune_explain(&t, expl, sizeof expl);
    assert_non_null(strstr(expl, "Every setting in the grid runs out of memory"));
    pl_tune_free(&t);
    assert_int_equal(pl_tune_grid_parse("expandable_segments=False|True", g, err, sizeof err), 0);
    assert_int_equal(pl_tune_run(&frag, g, 1024 * RS_MIB, 0, &t, err, sizeof err), 0);
    assert_int_equal(t.entries[0].res.n_ooms, 0);
    assert_int_equal(t.entries[1].res.n_ooms, 0);
    pl_tune_explain(&t, expl, sizeof expl);
    assert_true(strlen(expl) > 20);
    pl_tune_free(&t);
    free(g);
}

static void test_tune_format_bytes(void **state) {
    (void)state;
    char b[32];
    pl_tune_format_bytes(512, b, sizeof b);
    assert_string_equal(b, "512 B");
    pl_tune_format_bytes(3.1 * 1024 * 1024 * 1024, b, sizeof b);
    assert_string_equal(b, "3.10 GiB");
    pl_tune_format_bytes(200.0 * 1024 * 1024, b, sizeof b);
    assert_string_equal(b, "200.0 MiB");
}

static int setup(void **state) {
    (void)state;
    char p[600], err[512];
    if (!rs_tmpdir(tmp, sizeof tmp)) return -1;
    snprintf(p, sizeof p, "%s/frag.pltrace", tmp);
    if (rs_write_frag(p, true)) return -1;
    return pl_replay_extract(p, NULL, &frag, err, sizeof err);
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    pl_replay_seq_free(&frag);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tune_grid_parse),
        cmocka_unit_test(test_tune_ranks_expandable_first),
        cmocka_unit_test(test_tune_rows_grouped),
        cmocka_unit_test(test_tune_capacity_and_legend),
        cmocka_unit_test(test_tune_deterministic),
        cmocka_unit_test(test_tune_baseline_outside_grid),
        cmocka_unit_test(test_tune_format_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
