/* reports/compare: one program run twice, on glibc and on jemalloc, and what the difference says (compare.h).
 *
 * The rules (docs/verdict.md, "Comparing two host allocators") read two states per run, each grows / flat /
 * unknown: the live heap (heap.bytes or heap.count leaks -> grows; heap.bytes flat or plateau, heap.count not
 * growing -> flat) and RSS (rss.anon, else rss). A leak of the program grows the live heap under any allocator;
 * allocator retention grows RSS under one allocator with the live heap flat under both. Anything not decided in
 * a run that the rule needs makes the comparison inconclusive, never a guess.
 */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "format.h"
#include "json.h"

#define GUESS_MIN_SAMPLES 20 /* sampled host allocations needed to tell the allocator by usable sizes */

static const pl_report_metric_t *metric(const pl_report_process_t *p, pl_metric_t m) {
    return p && p->metrics[m].present ? &p->metrics[m] : NULL;
}

static pl_compare_state_t state_of(const pl_report_metric_t *m) {
    if (!m) return PL_CMP_UNKNOWN;
    switch (m->verdict.kind) {
    case PL_VERDICT_LEAK: return PL_CMP_GROWS;
    case PL_VERDICT_FLAT:
    case PL_VERDICT_PLATEAU: return PL_CMP_FLAT;
    default: return PL_CMP_UNKNOWN;
    }
}

static const pl_report_metric_t *rss_metric(const pl_report_process_t *p) {
    const pl_report_metric_t *m = metric(p, PL_METRIC_RSS_ANON);
    return m ? m : metric(p, PL_METRIC_RSS);
}

static pl_compare_state_t heap_state(const pl_report_process_t *p) {
    pl_compare_state_t b = state_of(metric(p, PL_METRIC_HEAP_BYTES)), c = state_of(metric(p, PL_METRIC_HEAP_COUNT));
    if (b == PL_CMP_GROWS || c == PL_CMP_GROWS) return PL_CMP_GROWS;
    if (b == PL_CMP_FLAT && (c == PL_CMP_FLAT || !metric(p, PL_METRIC_HEAP_COUNT))) return PL_CMP_FLAT;
    return PL_CMP_UNKNOWN;
}

static bool known_alloc(const char *a) { return a && (!strcmp(a, "glibc") || !strcmp(a, "jemalloc")); }

/* "glibc" / "jemalloc" when the two runs are on different known allocators, else "run A (glibc)" / "run B" */
static void label(const pl_compare_t *c, int i, char *buf, size_t n) {
    const char *a = c->run[i].allocator, *o = c->run[1 - i].allocator;
    if (known_alloc(a) && known_alloc(o) && strcmp(a, o)) snprintf(buf, n, "%s", a);
    else if (known_alloc(a)) snprintf(buf, n, "run %c (%s)", 'A' + i, a);
    else snprintf(buf, n, "run %c", 'A' + i);
}

static char *slope(const pl_report_metric_t *m, bool bytes, char *buf, size_t n) {
    if (!m || !isfinite(m->verdict.slope_per_step) || m->verdict.undecided == PL_UNDECIDED_NO_DATA) {
        snprintf(buf, n, "?");
        return buf;
    }
    char v[32];
    pl_format_value(m->verdict.slope_per_step, bytes, v, sizeof v);
    snprintf(buf, n, "%s%s/step", m->verdict.slope_per_step >= 0 ? "+" : "", v);
    return buf;
}

/* why a run's state is unknown, for the inconclusive sentence */
static void undecided(const pl_compare_t *c, int i, bool heap, char *buf, size_t n) {
    char lb[48];
    label(c, i, lb, sizeof lb);
    const pl_report_process_t *p = c->run[i].proc;
    const pl_report_metric_t *m = heap ? metric(p, PL_METRIC_HEAP_BYTES) : rss_metric(p);
    if (heap && m && m->verdict.kind != PL_VERDICT_INCONCLUSIVE) m = metric(p, PL_METRIC_HEAP_COUNT);
    if (!m) {
        snprintf(buf, n, "%s has no %s series", lb, heap ? "live-heap" : "RSS");
        return;
    }
    const char *name = pl_metric_name((pl_metric_t)(m - p->metrics));
    if (m->verdict.more_steps > 0)
        snprintf(buf, n, "%s of %s is not decided yet (about %lld more steps)", name, lb,
                 (long long)m->verdict.more_steps);
    else snprintf(buf, n, "%s of %s is not decided yet", name, lb);
}

int pl_compare_runs(const pl_report_process_t *a, const char *alloc_a, const char *source_a,
                    const pl_report_process_t *b, const char *alloc_b, const char *source_b, pl_compare_t *out) {
    if (!a || !b || !out) return -EINVAL;
    memset(out, 0, sizeof *out);
    const pl_report_process_t *p[2] = {a, b};
    const char *al[2] = {alloc_a, alloc_b}, *src[2] = {source_a, source_b};
    for (int i = 0; i < 2; i++) {
        pl_compare_run_t *r = &out->run[i];
        snprintf(r->source, sizeof r->source, "%s", src[i] ? src[i] : "");
        snprintf(r->allocator, sizeof r->allocator, "%s", known_alloc(al[i]) ? al[i] : "unknown");
        r->pid = (long long)p[i]->pid;
        snprintf(r->name, sizeof r->name, "%s", p[i]->name);
        r->heap = heap_state(p[i]);
        r->rss = state_of(rss_metric(p[i]));
        r->proc = p[i];
    }
    out->growing_run = -1;
    pl_compare_run_t *r = out->run;
    char l0[48], l1[48], s0[48], s1[48], u[160], u2[160];
    label(out, 0, l0, sizeof l0);
    label(out, 1, l1, sizeof l1);
    if (r[0].heap == PL_CMP_GROWS && r[1].heap == PL_CMP_GROWS) {
        out->kind = PL_COMPARE_LEAK;
        snprintf(out->text, sizeof out->text,
                 "The live heap grows under both (%s %s, %s %s): a real leak in the program, not allocator "
                 "retention.", l0, slope(metric(a, PL_METRIC_HEAP_BYTES), true, s0, sizeof s0), l1,
                 slope(metric(b, PL_METRIC_HEAP_BYTES), true, s1, sizeof s1));
    } else if (r[0].heap == PL_CMP_FLAT && r[1].heap == PL_CMP_FLAT) {
        if (r[0].rss == PL_CMP_GROWS && r[1].rss == PL_CMP_GROWS) {
            out->kind = PL_COMPARE_OUTSIDE_HEAP;
            snprintf(out->text, sizeof out->text,
                     "RSS grows under both (%s %s, %s %s) while the live heap is flat in both: not a malloc leak and "
                     "not allocator retention; the growth is outside the malloc heap (file-backed or shared pages, "
                     "mappings made directly, thread stacks).", l0, slope(rss_metric(a), true, s0, sizeof s0), l1,
                     slope(rss_metric(b), true, s1, sizeof s1));
        } else if (r[0].rss == PL_CMP_FLAT && r[1].rss == PL_CMP_FLAT) {
            out->kind = PL_COMPARE_NO_GROWTH;
            snprintf(out->text, sizeof out->text,
                     "Neither RSS nor the live heap grows in either run: no leak and no allocator retention.");
        } else if ((r[0].rss == PL_CMP_GROWS && r[1].rss == PL_CMP_FLAT) ||
                   (r[1].rss == PL_CMP_GROWS && r[0].rss == PL_CMP_FLAT)) {
            int g = r[0].rss == PL_CMP_GROWS ? 0 : 1;
            const char *lg = g ? l1 : l0, *lf = g ? l0 : l1;
            slope(rss_metric(p[g]), true, s0, sizeof s0);
            if (!strcmp(r[g].allocator, "jemalloc") && !strcmp(r[1 - g].allocator, "glibc")) {
                out->kind = PL_COMPARE_INCONCLUSIVE;
                snprintf(out->text, sizeof out->text,
                         "RSS grows under jemalloc (%s) but not under glibc, while the live heap is flat in both: "
                         "not glibc retention; jemalloc may be holding freed pages longer than this run (it purges "
                         "them after dirty_decay_ms). Run both longer.", s0);
            } else {
                out->kind = PL_COMPARE_RETENTION;
                out->growing_run = g;
                snprintf(out->text, sizeof out->text,
                         "RSS grows under %s (%s) but is flat under %s, while the live heap is flat in both: %s, "
                         "not a leak.", lg, s0, lf,
                         !strcmp(r[g].allocator, "glibc") ? "glibc arena retention/fragmentation"
                                                          : "host-allocator retention/fragmentation (if the two runs "
                                                            "differ only in their allocator)");
            }
        } else {
            out->kind = PL_COMPARE_INCONCLUSIVE;
            int i = r[0].rss == PL_CMP_UNKNOWN ? 0 : 1;
            undecided(out, i, false, u, sizeof u);
            snprintf(out->text, sizeof out->text, "Not decided: the live heap is flat in both, but %s.", u);
        }
    } else if ((r[0].heap == PL_CMP_GROWS && r[1].heap == PL_CMP_FLAT) ||
               (r[1].heap == PL_CMP_GROWS && r[0].heap == PL_CMP_FLAT)) {
        out->kind = PL_COMPARE_INCONCLUSIVE;
        int g = r[0].heap == PL_CMP_GROWS ? 0 : 1;
        snprintf(out->text, sizeof out->text,
                 "Not decided: the live heap grows under %s (%s) but is flat under %s; a leak that depends on the "
                 "run, or growth the other allocator's size classes absorb. Run both longer.", g ? l1 : l0,
                 slope(metric(p[g], PL_METRIC_HEAP_BYTES), true, s0, sizeof s0), g ? l0 : l1);
    } else {
        out->kind = PL_COMPARE_INCONCLUSIVE;
        int i = r[0].heap == PL_CMP_UNKNOWN ? 0 : 1;
        undecided(out, i, true, u, sizeof u);
        if (r[1 - i].heap == PL_CMP_UNKNOWN) {
            undecided(out, 1 - i, true, u2, sizeof u2);
            snprintf(out->text, sizeof out->text, "Not decided: %s, and %s.", u, u2);
        } else snprintf(out->text, sizeof out->text, "Not decided: %s.", u);
    }
    return 0;
}

const char *pl_compare_guess_allocator(uint64_t n_sizes, uint64_t n_8mod16) {
    /* glibc's usable size of a heap chunk is its size (a multiple of 16) minus 8; jemalloc's are its size classes
     * (8, then multiples of 16). Sizes of 16 and below say nothing (extract.c counts only larger ones). */
    if (n_sizes < GUESS_MIN_SAMPLES) return NULL;
    if (n_8mod16 * 10 >= n_sizes * 9) return "glibc";
    if (n_8mod16 * 100 <= n_sizes) return "jemalloc";
    return NULL;
}

void pl_compare_proc_allocator(const pl_extract_proc_t *p, const char **alloc, const char **from) {
    *alloc = NULL;
    *from = "";
    if (!p) return;
    static const char *const known[] = {"glibc", "jemalloc", "tcmalloc", "mimalloc"};
    if (p->host_allocator[0] && strcmp(p->host_allocator, "unknown")) {
        *alloc = "other";
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (!strcmp(p->host_allocator, known[i])) *alloc = known[i];
        *from = "recorded";
        return;
    }
    *alloc = pl_compare_guess_allocator(p->n_usable_sizes, p->n_usable_8mod16);
    if (*alloc) *from = "guessed";
}

const char *pl_compare_kind_name(pl_compare_kind_t k) {
    switch (k) {
    case PL_COMPARE_RETENTION: return "allocator-retention";
    case PL_COMPARE_LEAK: return "leak";
    case PL_COMPARE_OUTSIDE_HEAP: return "outside-heap";
    case PL_COMPARE_NO_GROWTH: return "no-growth";
    default: return "inconclusive";
    }
}

/* ---- rendering ---- */

static const pl_metric_t table_metrics[] = {PL_METRIC_RSS_ANON, PL_METRIC_RSS_FILE, PL_METRIC_RSS,
                                            PL_METRIC_HEAP_BYTES, PL_METRIC_HEAP_COUNT};
#define N_TABLE (sizeof table_metrics / sizeof table_metrics[0])

int pl_compare_render_text(const pl_compare_t *c, FILE *o) {
    if (!c || !o) return -EINVAL;
    char l[2][48];
    label(c, 0, l[0], sizeof l[0]);
    label(c, 1, l[1], sizeof l[1]);
    fprintf(o, "plateau report: comparing two runs\n");
    for (int i = 0; i < 2; i++)
        fprintf(o, "  %c: %s  pid %lld %s, host allocator %s%s%s%s\n", 'A' + i, pl_format_esc(c->run[i].source),
                c->run[i].pid, pl_format_esc(c->run[i].name), pl_format_esc(c->run[i].allocator), c->run[i].allocator_from[0] ? " (" : "",
                c->run[i].allocator_from, c->run[i].allocator_from[0] ? ")" : "");
    fprintf(o, "  %-11s %-34s %-34s\n", "", l[0], l[1]);
    for (size_t k = 0; k < N_TABLE; k++) {
        const pl_report_metric_t *m[2] = {metric(c->run[0].proc, table_metrics[k]),
                                          metric(c->run[1].proc, table_metrics[k])};
        if (!m[0] && !m[1]) continue;
        fprintf(o, "  %-11s", pl_metric_name(table_metrics[k]));
        for (int i = 0; i < 2; i++) {
            char cell[64], s[40];
            if (m[i])
                snprintf(cell, sizeof cell, "%s %s", pl_verdict_name(m[i]->verdict.kind),
                         slope(m[i], pl_metric_is_bytes(table_metrics[k]), s, sizeof s));
            else snprintf(cell, sizeof cell, "-");
            fprintf(o, " %-34s", cell);
        }
        fputc('\n', o);
    }
    fprintf(o, "conclusion (%s): %s\n", pl_compare_kind_name(c->kind), c->text);
    return ferror(o) ? -EIO : 0;
}

static const char *state_name(pl_compare_state_t s) {
    return s == PL_CMP_GROWS ? "grows" : s == PL_CMP_FLAT ? "flat" : "unknown";
}

int pl_compare_render_json(const pl_compare_t *c, FILE *o) {
    if (!c || !o) return -EINVAL;
    pl_json_t j;
    pl_json_init(&j, o, 0);
    pl_json_object_block(&j);
    pl_json_kstr(&j, "schema", "plateau.compare");
    pl_json_kint(&j, "schema_version", PL_COMPARE_SCHEMA_VERSION);
    pl_json_key(&j, "runs");
    pl_json_array(&j); /* "[{" ... "}, {" ... "}]": the runs are blocks inside an inline array */
    for (int i = 0; i < 2; i++) {
        const pl_compare_run_t *r = &c->run[i];
        pl_json_object_block(&j);
        pl_json_kstr(&j, "source", r->source);
        pl_json_kstr(&j, "allocator", r->allocator);
        pl_json_key(&j, "allocator_from");
        pl_json_str_or_null(&j, r->allocator_from[0] ? r->allocator_from : NULL);
        pl_json_kint(&j, "pid", r->pid);
        pl_json_kstr(&j, "name", r->name);
        pl_json_kstr(&j, "heap", state_name(r->heap));
        pl_json_kstr(&j, "rss", state_name(r->rss));
        pl_json_key(&j, "metrics");
        pl_json_array_block(&j);
        for (size_t k = 0; k < N_TABLE; k++) {
            const pl_report_metric_t *m = metric(r->proc, table_metrics[k]);
            if (!m) continue;
            const pl_verdict_t *v = &m->verdict;
            pl_json_object(&j);
            pl_json_kstr(&j, "name", pl_metric_name(table_metrics[k]));
            pl_json_kstr(&j, "unit", pl_metric_is_bytes(table_metrics[k]) ? "bytes" : "count");
            pl_json_kstr(&j, "verdict", pl_verdict_name(v->kind));
            pl_json_knum(&j, "level", v->level);
            pl_json_knum(&j, "slope_per_step", v->slope_per_step);
            pl_json_key(&j, "slope_ci");
            pl_json_array(&j);
            pl_json_num(&j, v->slope_lo);
            pl_json_num(&j, v->slope_hi);
            pl_json_end(&j);
            pl_json_kint(&j, "more_steps", v->more_steps);
            pl_json_end(&j);
        }
        pl_json_end(&j);
        pl_json_end(&j);
    }
    pl_json_end(&j);
    pl_json_key(&j, "conclusion");
    pl_json_object(&j);
    pl_json_kstr(&j, "code", pl_compare_kind_name(c->kind));
    pl_json_key(&j, "growing_run");
    if (c->growing_run >= 0) pl_json_int(&j, c->growing_run);
    else pl_json_null(&j);
    pl_json_kstr(&j, "text", c->text);
    pl_json_end(&j);
    pl_json_end(&j);
    return pl_json_done(&j);
}
