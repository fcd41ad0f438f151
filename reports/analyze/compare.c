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
#include <stdio.h>
#include <string.h>

#define GUESS_MIN_SAMPLES 20 /* sampled host allocations needed to tell the allocator by usable sizes */

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
    const pl_report_metric_t *m = pl_report_metric_of(p, PL_METRIC_RSS_ANON);
    return m ? m : pl_report_metric_of(p, PL_METRIC_RSS);
}

static pl_compare_state_t heap_state(const pl_report_process_t *p) {
    pl_compare_state_t b = state_of(pl_report_metric_of(p, PL_METRIC_HEAP_BYTES)), c = state_of(pl_report_metric_of(p, PL_METRIC_HEAP_COUNT));
    if (b == PL_CMP_GROWS || c == PL_CMP_GROWS) return PL_CMP_GROWS;
    if (b == PL_CMP_FLAT && (c == PL_CMP_FLAT || !pl_report_metric_of(p, PL_METRIC_HEAP_COUNT))) return PL_CMP_FLAT;
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

/* why a run's state is unknown, for the inconclusive sentence */
static void undecided(const pl_compare_t *c, int i, bool heap, char *buf, size_t n) {
    char lb[48];
    label(c, i, lb, sizeof lb);
    const pl_report_process_t *p = c->run[i].proc;
    const pl_report_metric_t *m = heap ? pl_report_metric_of(p, PL_METRIC_HEAP_BYTES) : rss_metric(p);
    if (heap && m && m->verdict.kind != PL_VERDICT_INCONCLUSIVE) m = pl_report_metric_of(p, PL_METRIC_HEAP_COUNT);
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
    snprintf(out->run[0].label, sizeof out->run[0].label, "%s", l0); /* the renderers name the runs so */
    snprintf(out->run[1].label, sizeof out->run[1].label, "%s", l1);
    if (r[0].heap == PL_CMP_GROWS && r[1].heap == PL_CMP_GROWS) {
        out->kind = PL_COMPARE_LEAK;
        snprintf(out->text, sizeof out->text,
                 "The live heap grows under both (%s %s, %s %s): a real leak in the program, not allocator "
                 "retention.", l0, pl_report_slope_text(pl_report_metric_of(a, PL_METRIC_HEAP_BYTES), true, s0, sizeof s0), l1,
                 pl_report_slope_text(pl_report_metric_of(b, PL_METRIC_HEAP_BYTES), true, s1, sizeof s1));
    } else if (r[0].heap == PL_CMP_FLAT && r[1].heap == PL_CMP_FLAT) {
        if (r[0].rss == PL_CMP_GROWS && r[1].rss == PL_CMP_GROWS) {
            out->kind = PL_COMPARE_OUTSIDE_HEAP;
            snprintf(out->text, sizeof out->text,
                     "RSS grows under both (%s %s, %s %s) while the live heap is flat in both: not a malloc leak and "
                     "not allocator retention; the growth is outside the malloc heap (file-backed or shared pages, "
                     "mappings made directly, thread stacks).", l0, pl_report_slope_text(rss_metric(a), true, s0, sizeof s0), l1,
                     pl_report_slope_text(rss_metric(b), true, s1, sizeof s1));
        } else if (r[0].rss == PL_CMP_FLAT && r[1].rss == PL_CMP_FLAT) {
            out->kind = PL_COMPARE_NO_GROWTH;
            snprintf(out->text, sizeof out->text,
                     "Neither RSS nor the live heap grows in either run: no leak and no allocator retention.");
        } else if ((r[0].rss == PL_CMP_GROWS && r[1].rss == PL_CMP_FLAT) ||
                   (r[1].rss == PL_CMP_GROWS && r[0].rss == PL_CMP_FLAT)) {
            int g = r[0].rss == PL_CMP_GROWS ? 0 : 1;
            const char *lg = g ? l1 : l0, *lf = g ? l0 : l1;
            pl_report_slope_text(rss_metric(p[g]), true, s0, sizeof s0);
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
                 pl_report_slope_text(pl_report_metric_of(p[g], PL_METRIC_HEAP_BYTES), true, s0, sizeof s0), g ? l0 : l1);
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
