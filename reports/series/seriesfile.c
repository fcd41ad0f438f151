/* reports/seriesfile: bounded parser for the corpus text format (format in seriesfile.h).
 *
 * Hostile input is the design case (fuzzed by tests/fuzz/fuzz_series.c): every line is copied into a fixed buffer
 * before any libc number parsing, every number is range-checked, and the sample array never exceeds max_samples.
 */
#include "seriesfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

#define MAX_STEP (1LL << 53)
#define MAX_SECONDS 9e9

static int fail(pl_parse_error_t *err, size_t off, size_t line, const char *msg) {
    if (err) {
        err->offset = off;
        err->line = line;
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return -EINVAL;
}

static int key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

static int parse_header(const char *s, pl_seriesfile_t *f) {
    static const char magic[] = "# plateau-series 1";
    if (strncmp(s, magic, sizeof magic - 1)) return -1;
    s += sizeof magic - 1;
    if (*s && *s != ' ' && *s != '\t') return -1;
    while (*s) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        const char *k = s;
        while (key_char(*s)) s++;
        size_t kl = (size_t)(s - k);
        if (kl == 0 || kl >= sizeof f->meta[0].key || *s != '=') return -1;
        s++;
        const char *v = s;
        while (*s && *s != ' ' && *s != '\t') s++;
        size_t vl = (size_t)(s - v);
        if (vl >= sizeof f->meta[0].value) return -1;
        if (f->n_meta >= PL_SERIESFILE_MAX_META) return -1;
        pl_seriesfile_meta_t *m = &f->meta[f->n_meta++];
        memcpy(m->key, k, kl);
        m->key[kl] = 0;
        memcpy(m->value, v, vl);
        m->value[vl] = 0;
    }
    return 0;
}

/* Parse one data line: "STEP VALUE [SECONDS]". */
static int parse_data(const char *s, pl_sample_t *out) {
    char *end;
    errno = 0;
    if (!(*s >= '0' && *s <= '9')) return -1;
    long long step = strtoll(s, &end, 10);
    if (errno || end == s || step < 0 || step > MAX_STEP || (*end != ' ' && *end != '\t')) return -1;
    s = end;
    while (*s == ' ' || *s == '\t') s++;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || errno == ERANGE) return -1;
    s = end;
    double t = -1;
    while (*s == ' ' || *s == '\t') s++;
    if (*s) {
        errno = 0;
        t = strtod(s, &end);
        if (end == s || !isfinite(t) || t < 0 || t > MAX_SECONDS || errno == ERANGE) return -1;
        s = end;
        while (*s == ' ' || *s == '\t') s++;
        if (*s) return -1;
    }
    out->step = step;
    out->value = v;
    out->t_ns = t < 0 ? -1 : (int64_t)llround(t * 1e9);
    return 0;
}

int pl_seriesfile_parse(const char *buf, size_t len, size_t max_samples, pl_seriesfile_t *out, pl_parse_error_t *err) {
    if (!out || (len && !buf) || max_samples == 0) return -EINVAL;
    pl_seriesfile_t *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    size_t cap = 0, off = 0, line_no = 0;
    int rc = 0;
    char line[PL_SERIESFILE_MAX_LINE + 1];
    while (off < len) {
        size_t start = off;
        const char *nl = memchr(buf + off, '\n', len - off);
        size_t ll = nl ? (size_t)(nl - (buf + off)) : len - off;
        off += ll + (nl ? 1 : 0);
        line_no++;
        if (ll && buf[start + ll - 1] == '\r') ll--;
        if (ll > PL_SERIESFILE_MAX_LINE) {
            rc = fail(err, start, line_no, "line longer than 255 bytes");
            goto out;
        }
        memcpy(line, buf + start, ll);
        line[ll] = 0;
        if (memchr(line, 0, ll)) {
            rc = fail(err, start, line_no, "NUL byte in line");
            goto out;
        }
        if (line_no == 1) {
            if (parse_header(line, f)) {
                rc = fail(err, start, line_no, "bad header (want '# plateau-series 1 key=value ...')");
                goto out;
            }
            continue;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') continue;
        pl_sample_t smp;
        if (parse_data(p, &smp)) {
            rc = fail(err, start, line_no, "bad data line (want 'STEP VALUE [SECONDS]')");
            goto out;
        }
        if (f->n_samples == cap) {
            if (cap >= max_samples) {
                if (err) {
                    err->offset = start;
                    err->line = line_no;
                    snprintf(err->msg, sizeof err->msg, "more than %zu samples", max_samples);
                }
                rc = -E2BIG;
                goto out;
            }
            size_t ncap = pl_grow_cap(cap, cap + 1, 64, sizeof *f->samples);
            if (ncap > max_samples) ncap = max_samples;
            pl_sample_t *ns = ncap ? realloc(f->samples, ncap * sizeof *ns) : NULL;
            if (!ns) {
                rc = -ENOMEM;
                goto out;
            }
            f->samples = ns;
            cap = ncap;
        }
        f->samples[f->n_samples++] = smp;
    }
    if (line_no == 0) rc = fail(err, 0, 0, "empty input");
out:
    if (rc == 0) *out = *f;
    else free(f->samples);
    free(f);
    return rc;
}

int pl_seriesfile_load(const char *path, size_t max_bytes, size_t max_samples, pl_seriesfile_t *out,
                       pl_parse_error_t *err) {
    if (!path || !out) return -EINVAL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return -errno;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= max_bytes) {
                if (fgetc(fp) == EOF) break;
                rc = -EFBIG;
                goto out;
            }
            size_t ncap = pl_grow_cap(cap, cap + 1, 65536, 1);
            if (ncap > max_bytes) ncap = max_bytes;
            char *nb = ncap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp)) rc = -EIO;
            break;
        }
    }
    if (rc == 0) rc = pl_seriesfile_parse(buf, len, max_samples, out, err);
out:
    free(buf);
    fclose(fp);
    return rc;
}

const char *pl_seriesfile_get(const pl_seriesfile_t *f, const char *key) {
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}

void pl_seriesfile_free(pl_seriesfile_t *f) {
    if (!f) return;
    free(f->samples);
    f->samples = NULL;
    f->n_samples = 0;
    f->n_meta = 0;
}
