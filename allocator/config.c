/* allocator/config.c: the PYTORCH_CUDA_ALLOC_CONF-compatible config parser (and PLATEAU_SIM_DEVICE's).
 *
 * Syntax: `key:value,key:value`, spaces around tokens allowed, later duplicates win (as in PyTorch).
 * Strict: an unknown key, a bad number, an out-of-range value or trailing garbage is -EINVAL with a message
 * naming the key and listing the valid keys; nothing ever falls back silently to a default.
 * roundup_power2_divisions bucket form `[K1:v1,K2:v2,>:v]` (K in MiB, powers of two, increasing): v1 applies to
 * sizes below K1 MiB, v2 to [K1, K2) MiB, v to sizes >= the last K (docs/allocator.md explains the choice).
 * Pure functions: no globals, reentrant.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/alloc.h>

#include "units.h"

#define MIB ((size_t)1 << 20)

static const char *const alloc_keys =
    "max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, roundup_power2_divisions, "
    "expandable_segments, per_process_memory_fraction, release_lock_on_cudamalloc, "
    "pinned_use_cuda_host_register, pinned_num_register_threads, pinned_use_background_threads, backend";

static const char *const sim_keys = "capacity, granularity, fail_alloc_at, fail_map_at, touch";

typedef struct cursor {
    const char *s;      /* whole input */
    const char *p;      /* current position */
    char *err;
    size_t err_len;
    const char *what;   /* "allocator config" or the env var name */
    const char *keys;   /* valid keys for messages */
} cursor_t;

static int fail(cursor_t *c, const char *key, const char *fmt, ...) {
    if (c->err && c->err_len) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (key)
            snprintf(c->err, c->err_len, "%s: key '%s': %s (at offset %zu of \"%s\"); valid keys: %s", c->what, key,
                     msg, (size_t)(c->p - c->s), c->s, c->keys);
        else
            snprintf(c->err, c->err_len, "%s: %s (at offset %zu of \"%s\"); valid keys: %s", c->what, msg,
                     (size_t)(c->p - c->s), c->s, c->keys);
    }
    return -EINVAL;
}

static void skip_ws(cursor_t *c) {
    while (*c->p == ' ' || *c->p == '\t') c->p++;
}

/* A token: [A-Za-z0-9_.+-]+ (keys, numbers, words), plus any non-ASCII byte: never valid, but part of the word
 * the user wrote, so an error quotes 'Trüe' whole rather than 'Tr'. Copies into buf; returns length (0 = none).
 * A token longer than buf is kept cut with a visible "..." (never valid either: callers reject by content). */
static size_t token(cursor_t *c, char *buf, size_t buf_len) {
    skip_ws(c);
    size_t n = 0;
    while ((*c->p >= 'a' && *c->p <= 'z') || (*c->p >= 'A' && *c->p <= 'Z') || (*c->p >= '0' && *c->p <= '9') ||
           *c->p == '_' || *c->p == '.' || *c->p == '+' || *c->p == '-' || (unsigned char)*c->p >= 0x80) {
        if (n + 1 < buf_len) buf[n] = *c->p;
        n++;
        c->p++;
    }
    if (n >= buf_len) { /* cut: end on a whole UTF-8 character, then "..." */
        size_t k = buf_len > 4 ? buf_len - 4 : 0;
        while (k && ((unsigned char)buf[k] & 0xc0) == 0x80) k--;
        snprintf(buf + k, buf_len - k, "...");
        return buf_len - 1;
    }
    buf[n] = 0;
    return n;
}

static int expect(cursor_t *c, char ch) {
    skip_ws(c);
    if (*c->p != ch) return -1;
    c->p++;
    return 0;
}

/* Unsigned decimal integer, whole token. */
static int parse_u64(const char *t, uint64_t *out) {
    if (!*t) return -1;
    uint64_t v = 0;
    for (const char *q = t; *q; q++) {
        if (*q < '0' || *q > '9') return -1;
        if (v > (UINT64_MAX - (uint64_t)(*q - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(*q - '0');
    }
    *out = v;
    return 0;
}

static int parse_double(const char *t, double *out) {
    if (!*t) return -1;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (*end || errno || v != v) return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *t, bool *out) {
    if (!strcmp(t, "True") || !strcmp(t, "true") || !strcmp(t, "1")) {
        *out = true;
        return 0;
    }
    if (!strcmp(t, "False") || !strcmp(t, "false") || !strcmp(t, "0")) {
        *out = false;
        return 0;
    }
    return -1;
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

static unsigned log2u(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

static int parse_divisions(cursor_t *c, const char *key, pl_alloc_config_t *cfg) {
    char t[64];
    uint64_t v;
    skip_ws(c);
    if (*c->p != '[') {
        if (!token(c, t, sizeof t)) return fail(c, key, "expected a number or a [size_mb:divisions,...] list");
        if (parse_u64(t, &v) || !is_pow2(v) || v > (1u << 30))
            return fail(c, key, "'%s' is not a power of two in [1, 2^30]", t);
        for (int i = 0; i < PL_ROUNDUP_N_INTERVALS; i++) cfg->roundup_power2_divisions[i] = (unsigned)v;
        return 0;
    }
    c->p++;
    unsigned div[PL_ROUNDUP_N_INTERVALS] = {0};
    unsigned start = 0; /* first interval index not yet assigned */
    bool saw_gt = false, any = false;
    for (;;) {
        skip_ws(c);
        if (*c->p == ']' && any) {
            c->p++;
            break;
        }
        if (saw_gt) return fail(c, key, "'>' must be the last entry of the list");
        bool gt = false;
        uint64_t k = 0;
        if (*c->p == '>') {
            c->p++;
            gt = true;
        } else {
            if (!token(c, t, sizeof t)) return fail(c, key, "expected size_mb or '>' in the list");
            if (parse_u64(t, &k) || !is_pow2(k) || log2u(k) > 42)
                return fail(c, key, "interval '%s' is not a power of two (MiB) up to 2^42", t);
        }
        if (expect(c, ':')) return fail(c, key, "expected ':' after the interval");
        if (!token(c, t, sizeof t) || parse_u64(t, &v) || !is_pow2(v) || v > (1u << 30))
            return fail(c, key, "divisions '%s' is not a power of two in [1, 2^30]", t);
        if (gt) {
            for (unsigned i = start; i < PL_ROUNDUP_N_INTERVALS; i++) div[i] = (unsigned)v;
            start = PL_ROUNDUP_N_INTERVALS;
            saw_gt = true;
        } else {
            unsigned end = 20 + log2u(k); /* sizes below k MiB */
            if (end <= start && any) return fail(c, key, "intervals must increase (%s MiB)", t);
            for (unsigned i = start; i < end; i++) div[i] = (unsigned)v;
            start = end;
        }
        any = true;
        skip_ws(c);
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p != ']') return fail(c, key, "expected ',' or ']' in the list");
    }
    memcpy(cfg->roundup_power2_divisions, div, sizeof div);
    return 0;
}

PL_API void pl_alloc_config_default(pl_alloc_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->max_split_size_bytes = SIZE_MAX;
    cfg->max_non_split_rounding_bytes = 20 * MIB;
    cfg->garbage_collection_threshold = 0.0;
    cfg->per_process_memory_fraction = 1.0;
    cfg->expandable_segments = false;
}

static int parse_alloc(cursor_t *c, pl_alloc_config_t *out) {
    pl_alloc_config_t cfg;
    pl_alloc_config_default(&cfg);
    char key[64], t[64];
    skip_ws(c);
    if (!*c->p) goto done;
    for (;;) {
        const char *key_at = c->p;
        if (!token(c, key, sizeof key)) return fail(c, NULL, "expected a key");
        if (expect(c, ':')) return fail(c, key, "expected ':' after the key");
        uint64_t u;
        double d;
        bool b;
        if (!strcmp(key, "max_split_size_mb")) {
            if (!token(c, t, sizeof t) || parse_u64(t, &u)) return fail(c, key, "'%s' is not a number of MiB", t);
            if (u < 20) return fail(c, key, "%s MiB is too small, must be >= 20", t);
            if (u > (SIZE_MAX >> 21)) return fail(c, key, "%s MiB is too large", t);
            cfg.max_split_size_bytes = (size_t)u * MIB;
        } else if (!strcmp(key, "max_non_split_rounding_mb")) {
            if (!token(c, t, sizeof t) || parse_u64(t, &u)) return fail(c, key, "'%s' is not a number of MiB", t);
            if (u > (SIZE_MAX >> 21)) return fail(c, key, "%s MiB is too large", t);
            cfg.max_non_split_rounding_bytes = (size_t)u * MIB;
        } else if (!strcmp(key, "garbage_collection_threshold")) {
            if (!token(c, t, sizeof t) || parse_double(t, &d)) return fail(c, key, "'%s' is not a number", t);
            if (!(d > 0.0 && d < 1.0)) return fail(c, key, "%s is out of range, must be in (0, 1)", t);
            cfg.garbage_collection_threshold = d;
        } else if (!strcmp(key, "per_process_memory_fraction")) {
            if (!token(c, t, sizeof t) || parse_double(t, &d)) return fail(c, key, "'%s' is not a number", t);
            if (!(d > 0.0 && d <= 1.0)) return fail(c, key, "%s is out of range, must be in (0, 1]", t);
            cfg.per_process_memory_fraction = d;
        } else if (!strcmp(key, "expandable_segments")) {
            if (!token(c, t, sizeof t) || parse_bool(t, &b)) return fail(c, key, "'%s' is not True or False", t);
            cfg.expandable_segments = b;
        } else if (!strcmp(key, "roundup_power2_divisions")) {
            int rc = parse_divisions(c, key, &cfg);
            if (rc) return rc;
        } else if (!strcmp(key, "release_lock_on_cudamalloc") || !strcmp(key, "pinned_use_cuda_host_register") ||
                   !strcmp(key, "pinned_use_background_threads")) {
            if (!token(c, t, sizeof t) || parse_bool(t, &b)) return fail(c, key, "'%s' is not True or False", t);
        } else if (!strcmp(key, "pinned_num_register_threads")) {
            if (!token(c, t, sizeof t) || parse_u64(t, &u) || !is_pow2(u) || u > 128)
                return fail(c, key, "'%s' is not a power of two in [1, 128]", t);
        } else if (!strcmp(key, "backend")) {
            if (!token(c, t, sizeof t)) return fail(c, key, "expected native");
            if (strcmp(t, "native")) return fail(c, key, "'%s' is not supported, only native", t);
        } else {
            c->p = key_at;
            return fail(c, key, "unknown key");
        }
        skip_ws(c);
        if (!*c->p) break;
        if (*c->p != ',') return fail(c, key, "trailing garbage after the value");
        c->p++;
        skip_ws(c);
        if (!*c->p) return fail(c, NULL, "empty entry after ','");
    }
done:
    *out = cfg;
    return 0;
}

PL_API int pl_alloc_config_parse(const char *text, pl_alloc_config_t *cfg, char *err, size_t err_len) {
    cursor_t c = {.s = text ? text : "", .p = text ? text : "", .err = err, .err_len = err_len,
                  .what = "allocator config", .keys = alloc_keys};
    if (err && err_len) err[0] = 0;
    return parse_alloc(&c, cfg);
}

PL_API int pl_alloc_config_from_env(pl_alloc_config_t *cfg, char *err, size_t err_len) {
    const char *name = "PLATEAU_ALLOC_CONF";
    const char *v = getenv(name);
    if (!v) {
        name = "PYTORCH_CUDA_ALLOC_CONF";
        v = getenv(name);
    }
    if (err && err_len) err[0] = 0;
    if (!v) {
        pl_alloc_config_default(cfg);
        return 0;
    }
    cursor_t c = {.s = v, .p = v, .err = err, .err_len = err_len, .what = name, .keys = alloc_keys};
    return parse_alloc(&c, cfg);
}

typedef struct out {
    char *buf;
    size_t len, n;
} out_t;

static void put(out_t *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->n < o->len ? o->len - o->n : 0;
    int k = vsnprintf(room ? o->buf + o->n : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) o->n += (size_t)k;
}

/* The shortest decimal that parses back to exactly v (0.6, not 0.59999999999999998): users paste these lines. */
static void shortest_double(double v, char *s, size_t len) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, len, "%.*g", prec, v);
        if (strtod(s, NULL) == v) return;
    }
}

PL_API int pl_alloc_config_format(const pl_alloc_config_t *cfg, char *buf, size_t buf_len) {
    char num[32];
    out_t o = {buf, buf_len, 0};
    if (buf && buf_len) buf[0] = 0;
    pl_alloc_config_t d;
    pl_alloc_config_default(&d);
    const char *sep = "";
    if (cfg->max_split_size_bytes != d.max_split_size_bytes) {
        put(&o, "%smax_split_size_mb:%zu", sep, cfg->max_split_size_bytes / MIB);
        sep = ",";
    }
    if (cfg->max_non_split_rounding_bytes != d.max_non_split_rounding_bytes) {
        put(&o, "%smax_non_split_rounding_mb:%zu", sep, cfg->max_non_split_rounding_bytes / MIB);
        sep = ",";
    }
    if (cfg->garbage_collection_threshold != d.garbage_collection_threshold) {
        shortest_double(cfg->garbage_collection_threshold, num, sizeof num);
        put(&o, "%sgarbage_collection_threshold:%s", sep, num);
        sep = ",";
    }
    if (cfg->per_process_memory_fraction != d.per_process_memory_fraction) {
        shortest_double(cfg->per_process_memory_fraction, num, sizeof num);
        put(&o, "%sper_process_memory_fraction:%s", sep, num);
        sep = ",";
    }
    if (cfg->expandable_segments) {
        put(&o, "%sexpandable_segments:True", sep);
        sep = ",";
    }
    const unsigned *dv = cfg->roundup_power2_divisions;
    bool all_same = true, all_zero = true;
    for (int i = 0; i < PL_ROUNDUP_N_INTERVALS; i++) {
        if (dv[i] != dv[0]) all_same = false;
        if (dv[i]) all_zero = false;
    }
    if (!all_zero) {
        if (all_same) {
            put(&o, "%sroundup_power2_divisions:%u", sep, dv[0]);
        } else {
            /* Runs of equal values; a run ending at interval e reads "K:v" with K = 2^(e-20) MiB. Runs that end
             * below 1 MiB cannot be written in the list form: they take the value of the run reaching 1 MiB. */
            put(&o, "%sroundup_power2_divisions:[", sep);
            const char *s2 = "";
            int i = 0;
            while (i < PL_ROUNDUP_N_INTERVALS) {
                int e = i;
                while (e < PL_ROUNDUP_N_INTERVALS && dv[e] == dv[i]) e++;
                if (e < 20) e = 20;
                if (e == PL_ROUNDUP_N_INTERVALS) {
                    if (dv[i]) put(&o, "%s>:%u", s2, dv[i]);
                } else {
                    put(&o, "%s%llu:%u", s2, 1ull << (e - 20), dv[i] ? dv[i] : 1);
                }
                s2 = ",";
                i = e;
            }
            put(&o, "]");
        }
        sep = ",";
    }
    (void)sep;
    return (int)o.n;
}

/* ---- PLATEAU_SIM_DEVICE ---- */

/* A size in the one grammar (common/units.h). */
static int parse_size(const char *t, size_t *out) {
    uint64_t v;
    if (pl_units_parse(t, &v) || v > SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
}

PL_API int pl_sim_options_parse(const char *text, pl_sim_options_t *out, char *err, size_t err_len) {
    cursor_t c = {.s = text ? text : "", .p = text ? text : "", .err = err, .err_len = err_len,
                  .what = "sim device", .keys = sim_keys};
    if (err && err_len) err[0] = 0;
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    char key[64], t[64];
    skip_ws(&c);
    while (*c.p) {
        const char *key_at = c.p;
        if (!token(&c, key, sizeof key)) return fail(&c, NULL, "expected a key");
        if (expect(&c, ':')) return fail(&c, key, "expected ':' after the key");
        size_t sz;
        uint64_t u;
        bool b;
        if (!strcmp(key, "capacity")) {
            if (!token(&c, t, sizeof t) || parse_size(t, &sz) || sz == 0)
                return fail(&c, key, "'%s' is not a size like 80GiB", t);
            o.capacity_bytes = sz;
        } else if (!strcmp(key, "granularity")) {
            if (!token(&c, t, sizeof t) || parse_size(t, &sz) || !is_pow2(sz) || sz < 4096)
                return fail(&c, key, "'%s' is not a power-of-two size >= 4KiB", t);
            o.granularity_bytes = sz;
        } else if (!strcmp(key, "fail_alloc_at") || !strcmp(key, "fail_map_at")) {
            if (!token(&c, t, sizeof t) || parse_u64(t, &u)) return fail(&c, key, "'%s' is not a count", t);
            if (key[5] == 'a')
                o.fail_alloc_at = u;
            else
                o.fail_map_at = u;
        } else if (!strcmp(key, "touch")) {
            if (!token(&c, t, sizeof t) || parse_bool(t, &b)) return fail(&c, key, "'%s' is not 0 or 1", t);
            o.touch = b;
        } else {
            c.p = key_at;
            return fail(&c, key, "unknown key");
        }
        skip_ws(&c);
        if (!*c.p) break;
        if (*c.p != ',') return fail(&c, key, "trailing garbage after the value");
        c.p++;
        skip_ws(&c);
        if (!*c.p) return fail(&c, NULL, "empty entry after ','");
    }
    *out = o;
    return 0;
}
