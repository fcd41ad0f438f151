/* tune/rmm_log: RMM logging_resource_adaptor CSV -> replay sequence (see rmm_log.h). One pass, line by line;
 * nothing is copied out of the caller's buffer. */
#include "rmm_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>


typedef struct field {
    const char *p;
    size_t n, col; /* col: 1-based byte column of the field's start */
} field_t;

static int line_err(char *err, size_t err_len, const char *name, size_t line, size_t col, const char *fmt, ...) {
    int n = snprintf(err, err_len, "%s: line %zu, column %zu: ", name, line, col);
    if (n >= 0 && (size_t)n < err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -EBADMSG;
}

static bool parse_dec(const field_t *f, uint64_t *out) {
    if (!f->n || f->n > 20) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < f->n; i++) {
        unsigned d = (unsigned)(f->p[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_hex(const field_t *f, uint64_t *out) {
    if (f->n < 3 || f->n > 18 || f->p[0] != '0' || (f->p[1] != 'x' && f->p[1] != 'X')) return false;
    uint64_t v = 0;
    for (size_t i = 2; i < f->n; i++) {
        char c = f->p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15) return false;
        v = (v << 4) | d;
    }
    *out = v;
    return true;
}

static bool field_is(const field_t *f, const char *s) { return f->n == strlen(s) && !memcmp(f->p, s, f->n); }

static bool printable(const field_t *f) {
    if (!f->n) return false;
    for (size_t i = 0; i < f->n; i++)
        if ((unsigned char)f->p[i] < 0x20 || f->p[i] == 0x7f) return false;
    return true;
}

enum { A_ALLOC, A_FREE, A_FAIL };

/* One data line [p, p+n) (no line end). Returns 0 or -EBADMSG with err set. */
static int parse_line(const char *p, size_t n, const char *name, size_t line, int *action, uint64_t *ptr,
                      uint64_t *size, uint64_t *stream, uint64_t *thread_hash, char *err, size_t err_len) {
    field_t f[6];
    size_t nf = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == ',') {
            if (nf == 6) return line_err(err, err_len, name, line, start + 1, "more than 6 fields");
            f[nf++] = (field_t){p + start, i - start, start + 1};
            start = i + 1;
        }
    }
    if (nf < 6) return line_err(err, err_len, name, line, n + 1, "%zu fields, 6 expected (%s)", nf, PL_RMM_LOG_HEADER);
    if (!printable(&f[0])) return line_err(err, err_len, name, line, f[0].col, "empty or unprintable thread id");
    if (!printable(&f[1])) return line_err(err, err_len, name, line, f[1].col, "empty or unprintable time");
    if (field_is(&f[2], "allocate")) *action = A_ALLOC;
    else if (field_is(&f[2], "free") || field_is(&f[2], "deallocate")) *action = A_FREE;
    else if (field_is(&f[2], "allocate failure")) *action = A_FAIL;
    else return line_err(err, err_len, name, line, f[2].col, "action '%.*s' is not allocate, free or allocate failure",
                         (int)(f[2].n > 40 ? 40 : f[2].n), f[2].p);
    if (field_is(&f[3], "(nil)") || field_is(&f[3], "0")) *ptr = 0;
    else if (!parse_hex(&f[3], ptr))
        return line_err(err, err_len, name, line, f[3].col, "pointer is not 0x-prefixed hex (up to 16 digits)");
    if (*action != A_FAIL && *ptr == 0)
        return line_err(err, err_len, name, line, f[3].col, "null pointer for a successful %s",
                        *action == A_ALLOC ? "allocate" : "free");
    if (!parse_dec(&f[4], size))
        return line_err(err, err_len, name, line, f[4].col, "size is not a decimal byte count");
    if (!parse_hex(&f[5], stream) && !parse_dec(&f[5], stream))
        return line_err(err, err_len, name, line, f[5].col, "stream is neither 0x-prefixed hex nor decimal");
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the thread field, for counting threads */
    for (size_t i = 0; i < f[0].n; i++) h = (h ^ (unsigned char)f[0].p[i]) * 1099511628211ull;
    *thread_hash = h;
    return 0;
}

int pl_rmm_log_read(const void *data, size_t len, const char *name, size_t max_events, pl_replay_seq_t *s,
                    pl_rmm_log_info_t *info, char *err, size_t err_len) {
    const char *p = data, *end = p + len;
    pl_rmm_log_info_t in;
    memset(&in, 0, sizeof in);
    uint64_t threads[64];
    if (len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3;
    pl_replay_seq_init(s, max_events);
    snprintf(s->file, sizeof s->file, "%s", name);
    s->source = PL_DEV_SRC_ALLOCATOR; /* the requests made of an RMM memory resource */
    s->device = 0;                    /* the log does not say which device */
    int rc = 0;
    size_t line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        bool complete = nl != NULL;
        const char *e = complete ? nl : end;
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r') n--;
        line++;
        if (line == 1) {
            if (n != strlen(PL_RMM_LOG_HEADER) || memcmp(p, PL_RMM_LOG_HEADER, n)) {
                rc = line_err(err, err_len, name, 1, 1, "not an RMM log: the header is not '%s'", PL_RMM_LOG_HEADER);
                goto fail;
            }
        } else if (n == 0) {
            /* blank lines are allowed only at the end */
            const char *q = e;
            while (q < end && (*q == '\n' || *q == '\r')) q++;
            if (q != end) {
                rc = line_err(err, err_len, name, line, 1, "empty line");
                goto fail;
            }
            break;
        } else {
            int action = A_ALLOC;
            uint64_t ptr = 0, size = 0, stream = 0, th = 0;
            char lerr[256];
            rc = parse_line(p, n, name, line, &action, &ptr, &size, &stream, &th, lerr, sizeof lerr);
            if (rc) {
                if (!complete) { /* cut short while writing: replay what came before */
                    s->damaged = true;
                    snprintf(s->error, sizeof s->error, "%.200s (the last line has no newline)", lerr);
                    rc = 0;
                    break;
                }
                snprintf(err, err_len, "%s", lerr);
                goto fail;
            }
            in.n_lines++;
            if (in.n_threads_seen < 64) {
                size_t k = 0;
                while (k < in.n_threads_seen && threads[k] != th) k++;
                if (k == in.n_threads_seen) threads[in.n_threads_seen++] = th;
            }
            if (action == A_ALLOC) {
                in.n_allocate++;
                rc = pl_replay_seq_alloc(s, ptr, size, stream);
            } else if (action == A_FREE) {
                in.n_free++;
                rc = pl_replay_seq_free_addr(s, ptr);
            } else {
                in.n_failures++;
                rc = pl_replay_seq_probe(s, size, stream);
            }
            if (rc == -E2BIG) {
                snprintf(err, err_len, "%s: line %zu: more than %zu events (or %d streams): raise --max-events", name,
                         line, s->max_events, PL_REPLAY_MAX_STREAMS);
                goto fail;
            }
            if (rc) {
                snprintf(err, err_len, "%s: %s", name, strerror(-rc));
                goto fail;
            }
        }
        p = complete ? nl + 1 : end;
    }
    if (line == 0) {
        rc = line_err(err, err_len, name, 1, 1, "empty file, not an RMM log");
        goto fail;
    }
    if (!s->n_allocs && !s->n_probes) {
        snprintf(err, err_len, "%s: the RMM log has no allocations (%zu lines), so there is nothing to replay", name,
                 in.n_lines);
        rc = -ENODATA;
        goto fail;
    }
    if (info) *info = in;
    return 0;
fail:
    pl_replay_seq_free(s);
    return rc;
}

void pl_rmm_log_summary(const pl_rmm_log_info_t *in, const pl_replay_seq_t *s, char *buf, size_t buf_len) {
    int n = snprintf(buf, buf_len, "format: RMM logging_resource_adaptor log: %zu calls (%zu allocate, %zu free, %zu "
                     "allocate failure) from %zu%s thread%s\n", in->n_lines, in->n_allocate, in->n_free,
                     in->n_failures, in->n_threads_seen, in->n_threads_seen >= 64 ? "+" : "",
                     in->n_threads_seen == 1 ? "" : "s");
    if (n > 0 && (size_t)n < buf_len && s && s->n_unmatched_frees)
        snprintf(buf + n, buf_len - (size_t)n, "note: %zu frees of pointers the log never allocated (the adaptor was "
                 "installed after they were allocated) were skipped\n", s->n_unmatched_frees);
}
