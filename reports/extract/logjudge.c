/* reports/logjudge: a training log's memory as series (see logjudge.h). Line by line: each line gives a step and
 * values for named columns; a step that goes back starts a new run. Values carry their unit (the text's, the
 * header's or the cell's); deltas ("(+1,607 MB)") and numbers without a unit in free text are not memory. */
#include "logjudge.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

const char *pl_log_format_name(pl_log_format_t f) {
    switch (f) {
    case PL_LOG_CSV: return "CSV";
    case PL_LOG_JSONL: return "JSON lines";
    default: return "text";
    }
}

void pl_log_free(pl_log_t *log) {
    if (!log) return;
    for (size_t r = 0; r < log->n_runs; r++)
        for (size_t c = 0; c < PL_LOG_MAX_COLUMNS; c++) free(log->runs[r].samples[c]);
    memset(log, 0, sizeof *log);
}

/* ------------------------------------------------------------------ words, numbers, units */

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '/'; }

static void lower_copy(char *dst, size_t size, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++) dst[k++] = (char)tolower((unsigned char)s[i]);
    dst[k] = 0;
}

/* A unit at p (after optional spaces): its multiplier, and *end after it; 0 when none. */
static double unit_at(const char *p, const char *e, const char **end) {
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    static const struct { const char *u; double mul; } units[] = {
        {"bytes", 1}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
        {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"b", 1},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].u);
        if ((size_t)(e - p) < n || strncasecmp(p, units[i].u, n) != 0) continue;
        if (p + n < e && isalpha((unsigned char)p[n])) continue; /* "mbps", "bytes_x", "balance" */
        *end = p + n;
        return units[i].mul;
    }
    return 0;
}

double pl_log_unit(const char *name) {
    const char *e = name + strlen(name), *end;
    double mul = unit_at(name, e, &end);
    return end == e && name[0] != ' ' && name[0] != '\t' ? mul : 0;
}

/* A unit named inside a header ("memory.used [MiB]", "gpu_mem_mb", "rss (GB)"): its multiplier, 0 none. */
static double unit_in_name(const char *name) {
    char low[64];
    lower_copy(low, sizeof low, name, strlen(name));
    static const struct { const char *u; double mul; } units[] = {
        {"gib", 1073741824.0}, {"mib", 1048576.0}, {"kib", 1024.0}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
        {"bytes", 1},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        const char *at = strstr(low, units[i].u);
        while (at) {
            size_t n = strlen(units[i].u);
            bool before = at == low || !isalpha((unsigned char)at[-1]);
            bool after = !isalpha((unsigned char)at[n]);
            if (before && after) return units[i].mul;
            at = strstr(at + 1, units[i].u);
        }
    }
    return 0;
}

/* A non-negative decimal at p: digits with thousands separators (',' or '_' before exactly three digits) and an
 * optional fraction. *end after it. false when p holds none. */
static bool number_at(const char *p, const char *e, double *v, const char **end) {
    if (p >= e || !isdigit((unsigned char)*p)) return false;
    char buf[64];
    size_t k = 0;
    while (p < e && k + 1 < sizeof buf) {
        if (isdigit((unsigned char)*p)) buf[k++] = *p++;
        else if ((*p == ',' || *p == '_') && e - p >= 4 && isdigit((unsigned char)p[1]) &&
                 isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]) &&
                 (e - p == 4 || !isdigit((unsigned char)p[4])))
            p++;
        else break;
    }
    if (p < e && *p == '.' && p + 1 < e && isdigit((unsigned char)p[1])) {
        buf[k++] = *p++;
        while (p < e && isdigit((unsigned char)*p) && k + 1 < sizeof buf) buf[k++] = *p++;
    }
    while (p < e && isdigit((unsigned char)*p)) p++; /* digits past the buffer: not a memory value */
    buf[k] = 0;
    *v = strtod(buf, NULL);
    *end = p;
    return isfinite(*v);
}

/* ------------------------------------------------------------------ columns and runs */

static pl_metric_t metric_of_name(const char *name, bool *guessed) {
    char low[64];
    lower_copy(low, sizeof low, name, strlen(name));
    *guessed = false;
    if (strstr(low, "reserved") || strstr(low, "cached")) return PL_METRIC_DEV_RESERVED;
    if (strstr(low, "alloc")) return PL_METRIC_DEV_ALLOCATED;
    static const char *const dev[] = {"gpu", "cuda", "vram", "device", "memory.used", "nvml", "hbm"};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (strstr(low, dev[i])) return PL_METRIC_DEV_RESERVED;
    static const char *const host[] = {"rss", "ram", "host", "cpu", "resident", "sys"};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        if (strstr(low, host[i])) return PL_METRIC_RSS;
    *guessed = true;
    return PL_METRIC_RSS;
}

static bool metric_by_name(const char *s, pl_metric_t *m) {
    for (int i = 0; i < PL_METRIC__COUNT; i++)
        if (!strcmp(pl_metric_name((pl_metric_t)i), s)) {
            *m = (pl_metric_t)i;
            return true;
        }
    return false;
}

typedef struct {
    pl_log_t *log;
    const pl_log_opts_t *opts;
    pl_metric_t forced;
    bool has_forced;
    int64_t last_step;
    bool started;
    size_t line;
    bool used; /* this line gave a sample */
} ctx_t;

/* The column index of `name` (created on first sight), or -1 when it is not kept (the option names another, the
 * table is full, or its metric is taken by an earlier column: one series per metric). */
static int column(ctx_t *c, const char *name) {
    pl_log_t *L = c->log;
    for (size_t i = 0; i < L->n_cols; i++)
        if (!strcmp(L->cols[i].name, name)) return L->cols[i].metric == PL_METRIC__COUNT ? -1 : (int)i;
    if (L->n_cols >= PL_LOG_MAX_COLUMNS) return -1;
    pl_log_column_t *col = &L->cols[L->n_cols];
    snprintf(col->name, sizeof col->name, "%s", name);
    col->metric = c->has_forced ? c->forced : metric_of_name(name, &col->guessed);
    if (c->has_forced) col->guessed = false;
    bool skip = c->opts && c->opts->column && strcmp(c->opts->column, name);
    for (size_t i = 0; i < L->n_cols && !skip; i++) skip = L->cols[i].metric == col->metric;
    if (skip) col->metric = PL_METRIC__COUNT; /* remembered as not kept */
    L->n_cols++;
    return skip ? -1 : (int)(L->n_cols - 1);
}

static int add_sample(ctx_t *c, int col, int64_t step, double bytes) {
    pl_log_t *L = c->log;
    if (!c->started || step < c->last_step) { /* the first line, or a restart: a new run */
        if (L->n_runs < PL_LOG_MAX_RUNS) {
            L->n_runs++;
            L->runs[L->n_runs - 1].first_line = c->line;
            L->runs[L->n_runs - 1].first_step = step;
        } else {
            L->n_runs_dropped++;
        }
        c->started = true;
    }
    c->last_step = step;
    pl_log_run_t *r = &L->runs[L->n_runs - 1];
    r->last_line = c->line;
    r->last_step = step;
    if (r->n[col] == r->cap[col]) {
        if (pl_grow_first((void **)&r->samples[col], &r->cap[col], r->n[col] + 1, sizeof *r->samples[col], 64))
            return -ENOMEM;
    }
    r->samples[col][r->n[col]++] = (pl_sample_t){step, -1, bytes};
    c->used = true;
    return 0;
}

/* ------------------------------------------------------------------ free text */

static const char *const step_words[] = {"global_step", "global step", "iteration", "step", "iter", "it",
                                         "batch"};

/* The step of a text line: a step word (a whole word, any case), then spaces, ':', '=', '#' or '[', then an
 * integer. Returns false when the line has none; *after is where the number ends. */
static bool text_step(const char *s, const char *e, int64_t *step, const char **after, const char **word) {
    for (const char *p = s; p < e; p++) {
        if (p > s && word_char(p[-1])) continue;
        for (size_t w = 0; w < sizeof step_words / sizeof step_words[0]; w++) {
            size_t n = strlen(step_words[w]);
            if ((size_t)(e - p) <= n || strncasecmp(p, step_words[w], n) != 0 || isalnum((unsigned char)p[n]))
                continue;
            const char *q = p + n;
            while (q < e && (*q == ' ' || *q == ':' || *q == '=' || *q == '#' || *q == '[' || *q == '\t')) q++;
            if (q >= e || !isdigit((unsigned char)*q)) continue;
            int64_t v = 0;
            while (q < e && isdigit((unsigned char)*q) && v < INT64_MAX / 10 - 10) v = v * 10 + (*q++ - '0');
            if (q < e && isdigit((unsigned char)*q)) return false; /* absurdly long */
            *step = v;
            *after = q;
            *word = step_words[w];
            return true;
        }
    }
    return false;
}

bool pl_log_text_step(const char *s, size_t len, int64_t *step) {
    const char *after, *word;
    return s && step && text_step(s, s + len, step, &after, &word);
}

/* The name of a value at p: the word before it (skipping spaces, ':', '=', '|'), "memory" when there is none. */
static void name_before(const char *s, const char *p, char *name, size_t size) {
    const char *q = p;
    while (q > s && (q[-1] == ' ' || q[-1] == ':' || q[-1] == '=' || q[-1] == '\t' || q[-1] == '|')) q--;
    const char *end = q;
    while (q > s && word_char(q[-1])) q--;
    if (q == end || isdigit((unsigned char)*q)) {
        snprintf(name, size, "memory");
        return;
    }
    size_t n = (size_t)(end - q);
    if (n >= size) n = size - 1;
    memcpy(name, q, n);
    name[n] = 0;
}

static int text_line(ctx_t *c, const char *s, const char *e) {
    int64_t step;
    const char *after, *word;
    if (c->log->by_order) return 0;
    if (!text_step(s, e, &step, &after, &word)) return 0;
    if (!c->log->step_name[0]) snprintf(c->log->step_name, sizeof c->log->step_name, "%s", word);
    bool seen[PL_LOG_MAX_COLUMNS] = {false}; /* a column's first value on the line: later ones are deltas, "(0 MB)" */
    for (const char *p = s; p < e; p++) {
        if (!isdigit((unsigned char)*p) || (p > s && (isdigit((unsigned char)p[-1]) || p[-1] == '.' ||
                                                       p[-1] == ',' || isalpha((unsigned char)p[-1]))))
            continue;
        const char *q = p;
        double v;
        if (!number_at(p, e, &v, &q)) continue;
        if (q == after) { /* the step number itself */
            p = q - 1;
            continue;
        }
        const char *u;
        double mul = unit_at(q, e, &u);
        bool delta = p > s && (p[-1] == '+' || p[-1] == '-');
        if (mul > 0 && !delta) {
            char name[48];
            name_before(s, p, name, sizeof name);
            int col = column(c, name);
            if (col >= 0 && !seen[col]) {
                seen[col] = true;
                int rc = add_sample(c, col, step, v * mul);
                if (rc) return rc;
            }
            p = u - 1;
        } else {
            p = q - 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ CSV and JSON lines: named fields */

typedef struct {
    char name[48];
    const char *v, *ve; /* the field's text */
} field_t;

static bool is_step_name(const char *name) {
    char low[64];
    lower_copy(low, sizeof low, name, strlen(name));
    static const char *const exact[] = {"step", "steps", "global_step", "_step", "iteration", "iter", "it",
                                        "trainer/global_step", "train/global_step"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(low, exact[i])) return true;
    return false;
}

static bool is_memory_name(const char *name) {
    char low[64];
    lower_copy(low, sizeof low, name, strlen(name));
    if (strstr(low, "step")) return false;
    static const char *const words[] = {"mem", "rss", "ram", "alloc", "reserved", "vram", "cached", "bytes"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(low, words[i])) return true;
    return false;
}

/* one row of named fields: the step field's value, then each memory field with its unit */
static int fields_row(ctx_t *c, const field_t *f, size_t n, int64_t row_step) {
    int64_t step = row_step;
    if (!c->log->by_order) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++) {
            if (strcmp(f[i].name, c->log->step_name)) continue;
            double v;
            const char *q;
            const char *p = f[i].v;
            while (p < f[i].ve && (*p == ' ' || *p == '"')) p++;
            if (!number_at(p, f[i].ve, &v, &q) || v > 9e15) return 0;
            step = (int64_t)v;
            found = true;
        }
        if (!found) return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_memory_name(f[i].name)) continue;
        const char *p = f[i].v;
        while (p < f[i].ve && (*p == ' ' || *p == '"')) p++;
        double v;
        const char *q;
        if (!number_at(p, f[i].ve, &v, &q)) continue; /* empty cell: logged at another step */
        const char *u;
        double mul = unit_at(q, f[i].ve, &u);
        if (mul == 0) mul = unit_in_name(f[i].name);
        if (mul == 0) mul = c->opts && c->opts->unit_bytes > 0 ? c->opts->unit_bytes : 1; /* none: --unit, else bytes */
        int col = column(c, f[i].name);
        if (col < 0) continue;
        int rc = add_sample(c, col, step, v * mul);
        if (rc) return rc;
    }
    return 0;
}

static size_t split_csv(const char *s, const char *e, char delim, const char **start, const char **end, size_t max) {
    size_t n = 0;
    const char *p = s;
    while (n < max) {
        const char *q = p;
        bool quoted = false;
        while (q < e && (quoted || *q != delim)) {
            if (*q == '"') quoted = !quoted;
            q++;
        }
        start[n] = p;
        end[n] = q;
        n++;
        if (q >= e) break;
        p = q + 1;
    }
    return n;
}

static void trim(const char **s, const char **e) {
    while (*s < *e && (**s == ' ' || **s == '"' || **s == '\t')) (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '"' || (*e)[-1] == '\t' || (*e)[-1] == '\r')) (*e)--;
}

#define MAX_FIELDS 256

typedef struct {
    char delim;
    size_t n;
    char names[MAX_FIELDS][48];
} header_t;

static void csv_header(ctx_t *c, header_t *h, const char *s, const char *e) {
    const char *st[MAX_FIELDS], *en[MAX_FIELDS];
    h->n = split_csv(s, e, h->delim, st, en, MAX_FIELDS);
    for (size_t i = 0; i < h->n; i++) {
        trim(&st[i], &en[i]);
        size_t n = (size_t)(en[i] - st[i]);
        if (n >= sizeof h->names[i]) n = sizeof h->names[i] - 1;
        memcpy(h->names[i], st[i], n);
        h->names[i][n] = 0;
        if (!c->log->step_name[0] && is_step_name(h->names[i]))
            snprintf(c->log->step_name, sizeof c->log->step_name, "%s", h->names[i]);
    }
    if (!c->log->step_name[0]) c->log->by_order = true;
}

static int csv_line(ctx_t *c, const header_t *h, const char *s, const char *e, int64_t row) {
    const char *st[MAX_FIELDS], *en[MAX_FIELDS];
    size_t n = split_csv(s, e, h->delim, st, en, h->n);
    field_t f[MAX_FIELDS];
    for (size_t i = 0; i < n; i++) {
        memcpy(f[i].name, h->names[i], sizeof f[i].name);
        f[i].v = st[i];
        f[i].ve = en[i];
    }
    return fields_row(c, f, n, row);
}

/* The top-level "key": value pairs of a one-line JSON object (strings, numbers; nested values skipped). */
static size_t json_fields(const char *s, const char *e, field_t *f, size_t max) {
    size_t n = 0;
    const char *p = s;
    while (p < e && *p != '{') p++;
    if (p < e) p++;
    while (p < e && n < max) {
        while (p < e && (*p == ' ' || *p == ',' || *p == '\t')) p++;
        if (p >= e || *p != '"') break;
        const char *k = ++p;
        while (p < e && *p != '"') p += *p == '\\' ? 2 : 1;
        if (p >= e) break;
        size_t kn = (size_t)(p - k);
        p++;
        while (p < e && (*p == ' ' || *p == ':')) p++;
        const char *v = p;
        int depth = 0;
        bool str = false;
        while (p < e) {
            if (str) {
                if (*p == '\\') p++;
                else if (*p == '"') str = false;
            } else if (*p == '"') {
                str = true;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (depth == 0) break;
                depth--;
            } else if (*p == ',' && depth == 0) {
                break;
            }
            p++;
        }
        if (kn >= sizeof f[n].name) kn = sizeof f[n].name - 1;
        memcpy(f[n].name, k, kn);
        f[n].name[kn] = 0;
        f[n].v = v;
        f[n].ve = p > e ? e : p;
        if (v < e && *v != '{' && *v != '[') n++;
    }
    return n;
}

static int jsonl_line(ctx_t *c, const char *s, const char *e, int64_t row) {
    field_t f[64];
    size_t n = json_fields(s, e, f, 64);
    if (!c->log->step_name[0] && !c->log->by_order) {
        for (size_t i = 0; i < n && !c->log->step_name[0]; i++)
            if (is_step_name(f[i].name)) snprintf(c->log->step_name, sizeof c->log->step_name, "%s", f[i].name);
        if (!c->log->step_name[0]) c->log->by_order = true;
    }
    return fields_row(c, f, n, row);
}

/* ------------------------------------------------------------------ the file */

static bool blank_or_comment(const char *s, const char *e) {
    while (s < e && isspace((unsigned char)*s)) s++;
    return s == e || *s == '#';
}

/* CSV when the first line splits into >= 2 fields on ',', '\t' or ';', one of them a step or memory name, and
 * no field of it is a number */
static bool looks_csv(const char *s, const char *e, char *delim) {
    static const char delims[] = {',', '\t', ';'};
    for (size_t d = 0; d < sizeof delims; d++) {
        const char *st[MAX_FIELDS], *en[MAX_FIELDS];
        size_t n = split_csv(s, e, delims[d], st, en, MAX_FIELDS);
        if (n < 2) continue;
        bool named = false, numeric = false;
        for (size_t i = 0; i < n; i++) {
            trim(&st[i], &en[i]);
            char name[48];
            size_t k = (size_t)(en[i] - st[i]) < sizeof name - 1 ? (size_t)(en[i] - st[i]) : sizeof name - 1;
            memcpy(name, st[i], k);
            name[k] = 0;
            double v;
            const char *q;
            if (number_at(st[i], en[i], &v, &q) && q == en[i]) numeric = true;
            named |= is_step_name(name) || is_memory_name(name);
        }
        if (named && !numeric) {
            *delim = delims[d];
            return true;
        }
    }
    return false;
}

int pl_log_parse(const char *text, size_t len, const pl_log_opts_t *opts, pl_log_t *out, char *err, size_t err_size) {
    if (!out || (len && !text) || (err_size && !err)) return -EINVAL;
    memset(out, 0, sizeof *out);
    ctx_t c = {.log = out, .opts = opts};
    if (opts && opts->metric) {
        if (!metric_by_name(opts->metric, &c.forced)) return -EINVAL;
        c.has_forced = true;
    }
    header_t *h = NULL;
    bool first = true;
    int rc = 0;
    int64_t row = 0;
    const char *p = text, *end = text + len;
    while (p < end && rc == 0) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        const char *le = e;
        if (le > p && le[-1] == '\r') le--;
        c.line++;
        out->n_lines++;
        c.used = false;
        if (!blank_or_comment(p, le)) {
            if (first) {
                first = false;
                const char *s = p;
                while (s < le && isspace((unsigned char)*s)) s++;
                char delim;
                if (*s == '{') {
                    out->format = PL_LOG_JSONL;
                } else if (looks_csv(p, le, &delim)) {
                    out->format = PL_LOG_CSV;
                    h = calloc(1, sizeof *h);
                    if (!h) return -ENOMEM;
                    h->delim = delim;
                    csv_header(&c, h, p, le);
                    p = e + 1;
                    continue;
                }
            }
            if (out->format == PL_LOG_CSV) rc = csv_line(&c, h, p, le, row);
            else if (out->format == PL_LOG_JSONL) rc = jsonl_line(&c, p, le, row);
            else rc = text_line(&c, p, le);
            if (c.used) out->n_used++;
            row++;
        }
        p = e + 1;
    }
    free(h);
    if (rc) {
        pl_log_free(out);
        return rc;
    }
    if (!out->n_used) {
        if (err_size) {
            if (out->format == PL_LOG_TEXT)
                snprintf(err, err_size, "no line holds a step number (step, iter, iteration) and a memory value "
                         "with its unit (MB, GiB, bytes)");
            else
                snprintf(err, err_size, "no %s row holds a %s and a memory column (a name with mem, rss, ram, "
                         "allocated, reserved, vram)", pl_log_format_name(out->format),
                         out->by_order ? "memory value" : "step");
        }
        pl_log_free(out);
        return -ENODATA;
    }
    return 0;
}
