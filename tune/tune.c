/* tune/tune: a grid of allocator settings, replayed in parallel, ranked, explained (docs/tune.md).
 *
 * Invariants: entries[] holds one result per grid combination, each computed by exactly one worker from the shared
 * read-only sequence, so the ranked table is the same for any thread count; the baseline (all defaults) is always
 * replayed so the explanation has something to compare with.
 */
#include "tune.h"

#include "format.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "units.h"

/* ---- grid ----------------------------------------------------------------------------------------------- */

static void trim(char *s) {
    size_t n = strlen(s), i = 0;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n')) s[--n] = 0;
    while (s[i] == ' ' || s[i] == '\t') i++;
    if (i) memmove(s, s + i, n - i + 1);
}

size_t pl_tune_grid_size(const pl_tune_grid_t *g) {
    size_t n = 1;
    for (size_t k = 0; k < g->n_keys; k++) n *= g->n_values[k];
    return n;
}

void pl_tune_grid_text(const pl_tune_grid_t *g, size_t i, char *buf, size_t buf_len) {
    size_t len = 0;
    if (buf_len) buf[0] = 0;
    size_t idx[PL_TUNE_MAX_KEYS]; /* odometer digits: last key fastest */
    for (size_t k = g->n_keys; k-- > 0;) {
        idx[k] = i % g->n_values[k];
        i /= g->n_values[k];
    }
    for (size_t k = 0; k < g->n_keys; k++) {
        const char *v = g->values[k][idx[k]];
        if (!v[0]) continue;
        int w = snprintf(buf + len, len < buf_len ? buf_len - len : 0, "%s%s:%s", len ? "," : "", g->keys[k], v);
        if (w > 0) len += (size_t)w;
    }
}

int pl_tune_grid_parse(const char *spec, pl_tune_grid_t *g, char *err, size_t err_len) {
    if (err_len) err[0] = 0;
    if (!spec) spec = PL_TUNE_DEFAULT_GRID;
    memset(g, 0, sizeof *g);
    char *copy = strdup(spec), *save = NULL;
    if (!copy) return -ENOMEM;
    int rc = 0;
    for (char *part = strtok_r(copy, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
        trim(part);
        if (!part[0]) continue;
        char *eq = strchr(part, '=');
        if (!eq) {
            snprintf(err, err_len, "--grid: '%s' has no '=': use key=v1|v2|...;key=...", part);
            rc = -EINVAL;
            goto out;
        }
        *eq = 0;
        trim(part);
        if (g->n_keys == PL_TUNE_MAX_KEYS || strlen(part) >= sizeof g->keys[0] || !part[0]) {
            snprintf(err, err_len, "--grid: too many keys (at most %d) or a bad key name '%s'", PL_TUNE_MAX_KEYS, part);
            rc = -E2BIG;
            goto out;
        }
        for (size_t k = 0; k < g->n_keys; k++)
            if (!strcmp(g->keys[k], part)) {
                snprintf(err, err_len, "--grid: key '%s' given twice", part);
                rc = -EINVAL;
                goto out;
            }
        size_t k = g->n_keys++;
        snprintf(g->keys[k], sizeof g->keys[k], "%s", part);
        char *vsave = NULL;
        for (char *v = strtok_r(eq + 1, "|", &vsave); v; v = strtok_r(NULL, "|", &vsave)) {
            trim(v);
            if (g->n_values[k] == PL_TUNE_MAX_VALUES || strlen(v) >= PL_TUNE_VALUE_CHARS) {
                snprintf(err, err_len, "--grid: key '%s': too many values (at most %d) or a value too long", g->keys[k],
                         PL_TUNE_MAX_VALUES);
                rc = -E2BIG;
                goto out;
            }
            if (!strcmp(v, "default") || !strcmp(v, "-")) v = "";
            snprintf(g->values[k][g->n_values[k]++], PL_TUNE_VALUE_CHARS, "%s", v);
        }
        if (!g->n_values[k]) {
            snprintf(err, err_len, "--grid: key '%s' has no values", g->keys[k]);
            rc = -EINVAL;
            goto out;
        }
    }
    if (!g->n_keys) {
        snprintf(err, err_len, "--grid: empty grid: use key=v1|v2|...;key=...");
        rc = -EINVAL;
        goto out;
    }
    size_t n = 1;
    for (size_t k = 0; k < g->n_keys; k++) {
        n *= g->n_values[k];
        if (n > PL_TUNE_MAX_CONFIGS) {
            snprintf(err, err_len, "--grid: more than %d combinations", PL_TUNE_MAX_CONFIGS);
            rc = -E2BIG;
            goto out;
        }
    }
    /* validate each value once, alone (a combination is valid when each of its key:value pairs is) */
    for (size_t k = 0; k < g->n_keys; k++)
        for (size_t v = 0; v < g->n_values[k]; v++) {
            if (!g->values[k][v][0]) continue;
            char text[256], perr[512];
            pl_alloc_config_t cfg;
            snprintf(text, sizeof text, "%s:%s", g->keys[k], g->values[k][v]);
            if (pl_alloc_config_parse(text, &cfg, perr, sizeof perr) != 0) {
                snprintf(err, err_len, "--grid: %s", perr);
                rc = -EINVAL;
                goto out;
            }
        }
out:
    free(copy);
    return rc;
}

/* ---- running -------------------------------------------------------------------------------------------- */

int pl_tune_compare(const pl_tune_entry_t *a, const pl_tune_entry_t *b) {
#define CMP(x, y) do { if ((x) != (y)) return (x) < (y) ? -1 : 1; } while (0)
    CMP(a->rc != 0, b->rc != 0);
    CMP(a->res.n_ooms > 0 || a->res.first_oom_event >= 0, b->res.n_ooms > 0 || b->res.first_oom_event >= 0);
    CMP(a->res.peak_reserved_bytes, b->res.peak_reserved_bytes);
    /* ratios compared to 1e-9 so that float noise never reorders equal results */
    double ra = a->res.reserved_per_allocated, rb = b->res.reserved_per_allocated;
    if (ra < rb - 1e-9 || ra > rb + 1e-9) return ra < rb ? -1 : 1;
    CMP(a->res.n_device_calls, b->res.n_device_calls);
    CMP(a->grid_index, b->grid_index);
    return 0;
#undef CMP
}

static int cmp_entries(const void *a, const void *b) { return pl_tune_compare(a, b); }

typedef struct work {
    const pl_replay_seq_t *s;
    pl_tune_entry_t *entries;
    size_t n;
    uint64_t capacity_bytes;
    atomic_size_t next;
} work_t;

static void run_entry(const work_t *w, pl_tune_entry_t *e) {
    e->rc = pl_replay_run(w->s, &e->cfg, w->capacity_bytes, &e->res, e->error, sizeof e->error);
}

static void *worker(void *arg) {
    work_t *w = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&w->next, 1);
        if (i >= w->n) break;
        run_entry(w, &w->entries[i]);
    }
    return NULL;
}

void pl_tune_free(pl_tune_t *t) {
    free(t->entries);
    memset(t, 0, sizeof *t);
}

int pl_tune_run(const pl_replay_seq_t *s, const pl_tune_grid_t *g, uint64_t capacity_bytes, unsigned n_threads,
                pl_tune_t *t, char *err, size_t err_len) {
    if (err_len) err[0] = 0;
    memset(t, 0, sizeof *t);
    size_t n = pl_tune_grid_size(g);
    /* one extra slot: the baseline when the grid lacks it */
    pl_tune_entry_t *e = calloc(n + 1, sizeof *e);
    if (!e) return -ENOMEM;
    size_t baseline_at = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        char text[512], perr[512];
        pl_tune_grid_text(g, i, text, sizeof text);
        e[i].grid_index = i;
        if (pl_alloc_config_parse(text, &e[i].cfg, perr, sizeof perr) != 0) {
            snprintf(err, err_len, "grid config '%s': %s", text, perr);
            free(e);
            return -EINVAL;
        }
        pl_alloc_config_format(&e[i].cfg, e[i].conf, sizeof e[i].conf);
        if (!e[i].conf[0] && baseline_at == SIZE_MAX) baseline_at = i;
    }
    size_t n_run = n;
    if (baseline_at == SIZE_MAX) { /* replay the defaults too, outside the ranking */
        e[n].grid_index = n;
        pl_alloc_config_default(&e[n].cfg);
        n_run = n + 1;
    }
    if (!n_threads) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (unsigned)c : 1;
    }
    if (n_threads > n_run) n_threads = (unsigned)n_run;
    if (n_threads > 256) n_threads = 256;
    work_t w = {.s = s, .entries = e, .n = n_run, .capacity_bytes = capacity_bytes};
    atomic_init(&w.next, 0);
    pthread_t th[256];
    unsigned started = 0;
    for (unsigned i = 1; i < n_threads; i++) {
        if (pthread_create(&th[started], NULL, worker, &w) != 0) break;
        started++;
    }
    worker(&w); /* this thread works too */
    for (unsigned i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (size_t i = 0; i < n_run; i++)
        if (e[i].rc) {
            int rc = e[i].rc;
            snprintf(err, err_len, "replay under '%s' failed: %s", e[i].conf[0] ? e[i].conf : "(defaults)", e[i].error);
            free(e);
            return rc;
        }
    t->baseline = e[baseline_at == SIZE_MAX ? n : baseline_at];
    qsort(e, n, sizeof *e, cmp_entries);
    t->entries = e;
    t->n_entries = n;
    t->capacity_bytes = e[0].res.capacity_bytes;
    t->n_threads = started + 1;
    return 0;
}

/* ---- explanation and rendering -------------------------------------------------------------------------- */

void pl_tune_format_bytes(double b, char *buf, size_t buf_len) {
    pl_units_format(b, PL_UNITS_TENTHS, buf, buf_len);
}

static bool oomed(const pl_replay_result_t *r) { return r->n_ooms > 0 || r->first_oom_event >= 0; }

/* "expandable segments", "expandable segments with max_split_size_mb:256", "max_split_size_mb:256" */
static void describe(const char *conf, char *buf, size_t buf_len) {
    const char *ex = strstr(conf, "expandable_segments:True");
    if (!ex) {
        snprintf(buf, buf_len, "`%s`", conf);
        return;
    }
    char rest[512] = "";
    size_t len = 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", conf);
    /* split at top-level commas only (roundup lists have commas inside brackets) */
    int depth = 0;
    char *start = copy;
    for (char *p = copy;; p++) {
        if (*p == '[') depth++;
        if (*p == ']') depth--;
        if ((*p == ',' && depth == 0) || !*p) {
            char c = *p;
            *p = 0;
            if (strncmp(start, "expandable_segments", 19) != 0) {
                int w = snprintf(rest + len, sizeof rest - len, "%s%s", len ? "," : "", start);
                if (w > 0 && (size_t)w < sizeof rest - len) len += (size_t)w;
            }
            if (!c) break;
            start = p + 1;
        }
    }
    if (len)
        snprintf(buf, buf_len, "expandable segments with %s", rest);
    else
        snprintf(buf, buf_len, "expandable segments");
}

void pl_tune_explain(const pl_tune_t *t, char *buf, size_t buf_len) {
    if (!t->n_entries) {
        snprintf(buf, buf_len, "No configuration was replayed.");
        return;
    }
    const pl_replay_result_t *w = &t->entries[0].res, *b = &t->baseline.res;
    char cap[32], wr[32], br[32], wu[32], bu[32], desc[600];
    pl_tune_format_bytes((double)t->capacity_bytes, cap, sizeof cap);
    pl_tune_format_bytes((double)w->peak_reserved_bytes, wr, sizeof wr);
    pl_tune_format_bytes((double)b->peak_reserved_bytes, br, sizeof br);
    pl_tune_format_bytes((double)w->unallocated_at_peak_bytes, wu, sizeof wu);
    pl_tune_format_bytes((double)b->unallocated_at_peak_bytes, bu, sizeof bu);
    describe(t->entries[0].conf, desc, sizeof desc);
    if (oomed(w)) {
        char pa[32];
        pl_tune_format_bytes((double)w->peak_allocated_bytes, pa, sizeof pa);
        snprintf(buf, buf_len,
                 "Every setting in the grid runs out of memory at a capacity of %s (the best one still fails at event "
                 "%lld); the run needs more device memory (--capacity) or smaller tensors, not other allocator "
                 "settings.", cap, (long long)w->first_oom_event);
    } else if (!t->entries[0].conf[0]) {
        snprintf(buf, buf_len,
                 "The default settings are already the best in the grid: nothing lowers peak reserved below %s "
                 "(%.3fx peak allocated, %s reserved-but-unallocated at the peak, %lld device calls).", wr,
                 w->reserved_per_allocated, wu, (long long)w->n_device_calls);
    } else if (oomed(b)) {
        char req[32];
        pl_tune_format_bytes((double)b->first_oom_bytes, req, sizeof req);
        snprintf(buf, buf_len,
                 "At a capacity of %s the default settings run out of memory at event %lld (a request of %s); "
                 "with %s the run fits: reserved-but-unallocated at the peak drops from %s to %s and peak reserved "
                 "is %s.", cap, (long long)b->first_oom_event, req, desc, bu, wu, wr);
    } else if (w->peak_reserved_bytes < b->peak_reserved_bytes) {
        bool plural = !strncmp(desc, "expandable segments", 19);
        snprintf(buf, buf_len,
                 "%s cut%s reserved-but-unallocated from %s to %s at the peak, and peak reserved from %s to %s "
                 "(%.3fx -> %.3fx peak allocated).", desc, plural ? "" : "s", bu, wu, br, wr, b->reserved_per_allocated,
                 w->reserved_per_allocated);
    } else {
        snprintf(buf, buf_len,
                 "%s keeps peak reserved at %s (%.3fx peak allocated vs %.3fx) with %lld device calls instead of %lld.",
                 desc, wr, w->reserved_per_allocated, b->reserved_per_allocated, (long long)w->n_device_calls,
                 (long long)b->n_device_calls);
    }
    if (buf_len && (buf[0] >= 'a' && buf[0] <= 'z')) buf[0] = (char)(buf[0] - 'a' + 'A');
}

static void oom_cell(const pl_replay_result_t *r, char *buf, size_t len) {
    if (oomed(r))
        snprintf(buf, len, "OOM@%lld", (long long)r->first_oom_event);
    else
        snprintf(buf, len, "no");
}

static const char *conf_name(const pl_tune_entry_t *e) { return e->conf[0] ? e->conf : "(defaults)"; }

/* Same text in every column of the table. */
static bool same_row(const pl_tune_entry_t *a, const pl_tune_entry_t *b) {
    const pl_replay_result_t *x = &a->res, *y = &b->res;
    return a->rc == b->rc && oomed(x) == oomed(y) && x->first_oom_event == y->first_oom_event &&
           x->peak_reserved_bytes == y->peak_reserved_bytes && x->peak_allocated_bytes == y->peak_allocated_bytes &&
           fabs(x->reserved_per_allocated - y->reserved_per_allocated) < 1e-9 &&
           x->unallocated_at_peak_bytes == y->unallocated_at_peak_bytes && x->n_device_calls == y->n_device_calls;
}

int pl_tune_render_text(const pl_tune_t *t, const pl_replay_seq_t *s, size_t max_rows, FILE *out) {
    char cap[32], expl[1024], tmp[5][32];
    pl_tune_format_bytes((double)t->capacity_bytes, cap, sizeof cap);
    fprintf(out, "plateau tune: %s (%s source), %zu events (%zu allocations, %zu frees, %zu failed requests), "
            "%zu configs at capacity %s on %u threads\n",
            pl_format_esc(s->file), pl_replay_source_name(s->source), s->n_events, s->n_allocs, s->n_frees, s->n_probes,
            t->n_entries, cap, t->n_threads);
    if (t->capacity_why[0]) fprintf(out, "capacity: %s (%s)\n", cap, t->capacity_why);
    if (s->damaged)
        fprintf(out, "warning: the trace is cut short (%s): replaying what was recorded before\n", pl_format_esc(s->error));
    if (s->n_skipped_files)
        fprintf(out, "note: skipped %zu file(s) that are not regular files: %s\n", s->n_skipped_files, pl_format_esc(s->skipped));
    if (s->n_other_streams_records)
        fprintf(out, "note: %zu device allocations of other sources, allocators, devices or files (or pinned host "
                "memory) are not part of this sequence\n", s->n_other_streams_records);
    if (s->n_bad_records)
        fprintf(out, "note: %zu allocation records at an impossible address were skipped\n", s->n_bad_records);
    if (s->n_unmatched_frees)
        fprintf(out, "note: %zu frees of addresses allocated before tracing started were skipped\n", s->n_unmatched_frees);
    fprintf(out, "\n%4s  %-10s %12s %12s %9s %14s %8s  %s\n", "rank", "OOM", "peak resv", "peak alloc", "resv/alloc",
            "unalloc@peak", "dev calls", "config");
    /* Configs whose results are identical in every column share one row (a grid often holds many settings that
     * change nothing for this run); max_rows counts rows. The row of the defaults is shown even below them. */
    size_t base_at = t->n_entries;
    for (size_t i = 0; i < t->n_entries; i++)
        if (!t->entries[i].conf[0]) base_at = i;
    size_t shown = 0;
    bool cut = false;
    for (size_t i = 0, j; i < t->n_entries; i = j) {
        for (j = i + 1; j < t->n_entries && same_row(&t->entries[i], &t->entries[j]); j++) {}
        bool has_base = base_at >= i && base_at < j;
        if (max_rows && shown >= max_rows && !has_base) {
            cut = true;
            continue;
        }
        if (max_rows && shown >= max_rows) fprintf(out, "  ...\n");
        shown++;
        const pl_tune_entry_t *e = &t->entries[i];
        oom_cell(&e->res, tmp[0], sizeof tmp[0]);
        pl_tune_format_bytes((double)e->res.peak_reserved_bytes, tmp[1], sizeof tmp[1]);
        pl_tune_format_bytes((double)e->res.peak_allocated_bytes, tmp[2], sizeof tmp[2]);
        pl_tune_format_bytes((double)e->res.unallocated_at_peak_bytes, tmp[3], sizeof tmp[3]);
        fprintf(out, "%4zu  %-10s %12s %12s %9.3fx %14s %8lld  %s\n", i + 1, tmp[0], tmp[1], tmp[2],
                e->res.reserved_per_allocated, tmp[3], (long long)e->res.n_device_calls, conf_name(e));
        if (j - i > 1) {
            /* name the defaults first when they are in the group, then up to three others */
            fprintf(out, "%6s= the same for %zu more: ", "", j - i - 1);
            size_t named = 0;
            if (has_base && base_at != i) {
                fprintf(out, "(defaults)");
                named++;
            }
            for (size_t k = i + 1; k < j && named < 3; k++) {
                if (k == base_at) continue;
                fprintf(out, "%s%s", named ? "; " : "", conf_name(&t->entries[k]));
                named++;
            }
            if (named < j - i - 1) fprintf(out, "; and %zu others", j - i - 1 - named);
            fputc('\n', out);
        }
    }
    if (cut) fprintf(out, "  (--top 0 shows every row; --json has every config)\n");
    fprintf(out, "\n  OOM: no, or OOM@N: the first request that failed at this capacity (event N of the sequence)\n"
                 "  peak resv / peak alloc: the highest reserved (held from the device) and allocated bytes; "
                 "resv/alloc their ratio\n"
                 "  unalloc@peak: reserved - allocated when reserved first reached its peak (fragmentation and cache "
                 "held then)\n"
                 "  dev calls: segment allocations + page maps; expandable segments map one page "
                 "(granularity, 2 MiB) at a time, so\n"
                 "             they make more calls than plain segments for the same memory (the cost of their lower "
                 "peak)\n");
    const pl_tune_entry_t *win = &t->entries[0];
    fprintf(out, "\nbest:\n  PLATEAU_ALLOC_CONF=%s\n  PYTORCH_CUDA_ALLOC_CONF=%s\n", win->conf, win->conf);
    if (!win->conf[0]) fprintf(out, "  (the defaults: nothing to set)\n");
    pl_tune_explain(t, expl, sizeof expl);
    fprintf(out, "\n%s\n", expl);
    return ferror(out) ? -EIO : 0;
}

static void json_result(pl_json_t *j, const pl_replay_result_t *r) {
    pl_json_object(j);
    pl_json_kuint(j, "capacity_bytes", r->capacity_bytes);
    pl_json_kbool(j, "oom", oomed(r));
    pl_json_kint(j, "n_ooms", r->n_ooms);
    pl_json_kint(j, "first_oom_event", r->first_oom_event);
    pl_json_kuint(j, "first_oom_bytes", r->first_oom_bytes);
    pl_json_kint(j, "peak_allocated_bytes", r->peak_allocated_bytes);
    pl_json_kint(j, "peak_reserved_bytes", r->peak_reserved_bytes);
    pl_json_kint(j, "peak_requested_bytes", r->peak_requested_bytes);
    pl_json_key(j, "reserved_per_allocated");
    pl_json_numf(j, "%.6f", r->reserved_per_allocated);
    pl_json_kint(j, "unallocated_at_peak_bytes", r->unallocated_at_peak_bytes);
    pl_json_kint(j, "n_device_alloc", r->n_device_alloc);
    pl_json_kint(j, "n_device_free", r->n_device_free);
    pl_json_kint(j, "n_device_map", r->n_device_map);
    pl_json_kint(j, "n_device_unmap", r->n_device_unmap);
    pl_json_kint(j, "n_device_calls", r->n_device_calls);
    pl_json_kint(j, "n_map_events", r->n_map_events);
    pl_json_kint(j, "n_unmap_events", r->n_unmap_events);
    pl_json_kint(j, "n_alloc_retries", r->n_alloc_retries);
    pl_json_kint(j, "n_failed_allocs", r->n_failed_allocs);
    pl_json_kint(j, "end_allocated_bytes", r->end_allocated_bytes);
    pl_json_kint(j, "end_reserved_bytes", r->end_reserved_bytes);
    pl_json_end(j);
}

/* "input": what was replayed */
static void json_seq(pl_json_t *j, const pl_replay_seq_t *s) {
    pl_json_key(j, "input");
    pl_json_object(j);
    pl_json_kstr(j, "file", s->file);
    pl_json_kstr(j, "source", pl_replay_source_name(s->source));
    pl_json_kuint(j, "allocator_id", s->allocator_id);
    pl_json_kint(j, "device", s->device);
    pl_json_kuint(j, "n_events", s->n_events);
    pl_json_kuint(j, "n_allocs", s->n_allocs);
    pl_json_kuint(j, "n_frees", s->n_frees);
    pl_json_kuint(j, "n_failed_requests", s->n_probes);
    pl_json_kuint(j, "n_unmatched_frees", s->n_unmatched_frees);
    pl_json_kuint(j, "n_streams", s->n_streams);
    pl_json_kuint(j, "n_other_alloc_records", s->n_other_streams_records);
    pl_json_kuint(j, "n_bad_records", s->n_bad_records);
    pl_json_kuint(j, "recorded_capacity_bytes", s->capacity_bytes);
    pl_json_kuint(j, "n_map_records", s->n_map_records);
    pl_json_kuint(j, "n_unmap_records", s->n_unmap_records);
    pl_json_kbool(j, "damaged", s->damaged);
    pl_json_kstr(j, "error", s->error);
    pl_json_end(j);
}

int pl_tune_render_json(const pl_tune_t *t, const pl_replay_seq_t *s, FILE *out) {
    char expl[1024];
    pl_tune_explain(t, expl, sizeof expl);
    pl_json_t j;
    pl_json_init(&j, out, PL_JSON_COMPACT);
    pl_json_object(&j);
    json_seq(&j, s);
    pl_json_kuint(&j, "capacity_bytes", t->capacity_bytes);
    pl_json_kstr(&j, "capacity_source", t->capacity_why);
    pl_json_key(&j, "best");
    pl_json_object(&j);
    pl_json_kstr(&j, "PLATEAU_ALLOC_CONF", t->entries[0].conf);
    pl_json_kstr(&j, "PYTORCH_CUDA_ALLOC_CONF", t->entries[0].conf);
    pl_json_end(&j);
    pl_json_kstr(&j, "explanation", expl);
    pl_json_key(&j, "baseline");
    json_result(&j, &t->baseline.res);
    pl_json_key(&j, "configs");
    pl_json_array(&j);
    for (size_t i = 0; i < t->n_entries; i++) {
        pl_json_break(&j, 0); /* one config a line */
        pl_json_object(&j);
        pl_json_kuint(&j, "rank", i + 1);
        pl_json_kstr(&j, "conf", t->entries[i].conf);
        pl_json_key(&j, "result");
        json_result(&j, &t->entries[i].res);
        pl_json_end(&j);
    }
    pl_json_end(&j);
    pl_json_end(&j);
    return pl_json_done(&j);
}

void pl_replay_render_text(const pl_replay_seq_t *s, const char *conf, const pl_replay_result_t *r,
                           const char *capacity_why, FILE *out) {
    char b[32];
    fprintf(out, "input: %s\nsource: %s (allocator %u, device %d)\n", s->file, pl_replay_source_name(s->source),
            s->allocator_id, s->device);
    fprintf(out, "events: %zu (allocations %zu, frees %zu, failed requests %zu, unmatched frees %zu, streams %zu)\n",
            s->n_events, s->n_allocs, s->n_frees, s->n_probes, s->n_unmatched_frees, s->n_streams);
    if (s->damaged) fprintf(out, "warning: the trace is cut short: %s\n", s->error);
    fprintf(out, "conf: %s\n", conf && conf[0] ? conf : "(defaults)");
    pl_tune_format_bytes((double)r->capacity_bytes, b, sizeof b);
    fprintf(out, "capacity_bytes: %llu (%s)\n", (unsigned long long)r->capacity_bytes, b);
    if (capacity_why && capacity_why[0]) fprintf(out, "capacity_source: %s\n", capacity_why);
#define BYTES(name, v) do { pl_tune_format_bytes((double)(v), b, sizeof b); \
        fprintf(out, "%s: %lld (%s)\n", name, (long long)(v), b); } while (0)
    BYTES("peak_allocated_bytes", r->peak_allocated_bytes);
    BYTES("peak_reserved_bytes", r->peak_reserved_bytes);
    BYTES("peak_requested_bytes", r->peak_requested_bytes);
    fprintf(out, "reserved_per_allocated: %.4f\n", r->reserved_per_allocated);
    BYTES("unallocated_at_peak_bytes", r->unallocated_at_peak_bytes);
    BYTES("end_allocated_bytes", r->end_allocated_bytes);
    BYTES("end_reserved_bytes", r->end_reserved_bytes);
#undef BYTES
    fprintf(out, "n_device_alloc: %lld\nn_device_free: %lld\nn_device_map: %lld\nn_device_unmap: %lld\n"
            "n_device_calls: %lld\nn_alloc_retries: %lld\nn_ooms: %lld\nn_failed_allocs: %lld\n",
            (long long)r->n_device_alloc, (long long)r->n_device_free, (long long)r->n_device_map,
            (long long)r->n_device_unmap, (long long)r->n_device_calls, (long long)r->n_alloc_retries,
            (long long)r->n_ooms, (long long)r->n_failed_allocs);
    fprintf(out, "n_map_events: %lld (recorded device_map records: %llu)\nn_unmap_events: %lld (recorded: %llu)\n",
            (long long)r->n_map_events, (unsigned long long)s->n_map_records, (long long)r->n_unmap_events,
            (unsigned long long)s->n_unmap_records);
    if (r->first_oom_event >= 0)
        fprintf(out, "first_oom: event %lld of %zu, %llu bytes requested\n", (long long)r->first_oom_event,
                s->n_events, (unsigned long long)r->first_oom_bytes);
    else
        fprintf(out, "first_oom: none\n");
    if (s->have_stats && r->have_at_stats) {
        const pl_rec_alloc_stats_t *st = &s->last_stats;
        fprintf(out, "recorded (last alloc_stats, step %llu) vs replay at the same event:\n",
                (unsigned long long)st->step);
        fprintf(out, "  allocated_bytes_peak: %lld vs %lld\n  reserved_bytes_peak: %lld vs %lld\n"
                "  num_device_alloc: %lld vs %lld\n  num_device_free: %lld vs %lld\n  num_ooms: %lld vs %lld\n",
                (long long)st->allocated_bytes_peak, (long long)r->at_stats_allocated_peak_bytes,
                (long long)st->reserved_bytes_peak, (long long)r->at_stats_reserved_peak_bytes,
                (long long)st->num_device_alloc, (long long)r->at_stats_n_device_alloc, (long long)st->num_device_free,
                (long long)r->at_stats_n_device_free, (long long)st->num_ooms, (long long)r->at_stats_n_ooms);
    }
}

void pl_replay_render_json(const pl_replay_seq_t *s, const char *conf, const pl_replay_result_t *r,
                           const char *capacity_why, FILE *out) {
    pl_json_t j;
    pl_json_init(&j, out, PL_JSON_COMPACT);
    pl_json_object(&j);
    json_seq(&j, s);
    pl_json_kstr(&j, "capacity_source", capacity_why ? capacity_why : "");
    pl_json_kstr(&j, "conf", conf ? conf : "");
    pl_json_key(&j, "result");
    json_result(&j, r);
    if (s->have_stats && r->have_at_stats) {
        const pl_rec_alloc_stats_t *st = &s->last_stats;
        pl_json_key(&j, "recorded");
        pl_json_object(&j);
        pl_json_kuint(&j, "step", st->step);
        pl_json_kint(&j, "allocated_bytes_peak", st->allocated_bytes_peak);
        pl_json_kint(&j, "reserved_bytes_peak", st->reserved_bytes_peak);
        pl_json_kint(&j, "num_device_alloc", st->num_device_alloc);
        pl_json_kint(&j, "num_device_free", st->num_device_free);
        pl_json_kint(&j, "num_ooms", st->num_ooms);
        pl_json_end(&j);
        pl_json_key(&j, "replay_at_recorded");
        pl_json_object(&j);
        pl_json_kint(&j, "allocated_bytes_peak", r->at_stats_allocated_peak_bytes);
        pl_json_kint(&j, "reserved_bytes_peak", r->at_stats_reserved_peak_bytes);
        pl_json_kint(&j, "num_device_alloc", r->at_stats_n_device_alloc);
        pl_json_kint(&j, "num_device_free", r->at_stats_n_device_free);
        pl_json_kint(&j, "num_ooms", r->at_stats_n_ooms);
        pl_json_end(&j);
    }
    pl_json_end(&j);
}
