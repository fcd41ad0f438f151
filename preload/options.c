/* PLATEAU_* option parsing (see options.h and docs/env.md). No allocation: runs inside the preload's
 * constructor, possibly before the program's allocator is ready. Sizes read through plateau's one size grammar
 * (common/units.h pl_units_parse: no allocation, no locale, no library call), like every other size a user types. */
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "units.h"

void pl_options_default(pl_options_t *o) {
    memset(o, 0, sizeof *o);
    o->sample_bytes = 512 * 1024;
    o->interval_ms = 100;
    o->flush_ms = 250;
    o->buffer_bytes = 256 * 1024;
    o->device_stacks = true;
    o->pss = true;
    o->cupti = PL_CUPTI_AUTO;
}

static int parse_u64(const char *s, uint64_t *out, const char **end) {
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -EINVAL;
    while (*p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -EINVAL;
        v = v * 10 + d;
        p++;
    }
    *out = v;
    *end = p;
    return 0;
}

static void bad(void (*warn)(const char *), const char *name, const char *val, const char *want, const char *def) {
    if (!warn) return;
    char msg[400];
    snprintf(msg, sizeof msg, "plateau: %s='%.100s' is not %s; using the default (%s)", name, val, want, def);
    warn(msg);
}

static int opt_bool(const char *(*get)(const char *), void (*warn)(const char *), const char *name, bool *v) {
    const char *s = get(name);
    if (!s) return 0;
    if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on")) *v = true;
    else if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off") || !*s)
        *v = false;
    else {
        bad(warn, name, s, "a boolean (0/1, yes/no, true/false, on/off)", *v ? "1" : "0");
        return 1;
    }
    return 0;
}

static int opt_range(const char *(*get)(const char *), void (*warn)(const char *), const char *name, uint32_t lo,
                     uint32_t hi, uint32_t *v) {
    const char *s = get(name);
    if (!s) return 0;
    uint64_t x;
    const char *end;
    if (parse_u64(s, &x, &end) || *end || x < lo || x > hi) {
        char want[80], def[32];
        snprintf(want, sizeof want, "an integer in [%u, %u]", lo, hi);
        snprintf(def, sizeof def, "%u", *v);
        bad(warn, name, s, want, def);
        return 1;
    }
    *v = (uint32_t)x;
    return 0;
}

uint32_t pl_options_uint(const char *(*get)(const char *), void (*warn)(const char *), const char *name, uint32_t lo,
                         uint32_t hi, uint32_t def) {
    uint32_t v = def;
    opt_range(get, warn, name, lo, hi, &v);
    return v;
}

int pl_options_parse(pl_options_t *o, const char *(*get)(const char *), void (*warn)(const char *)) {
    int n_bad = 0;
    const char *s = get("PLATEAU_DIR");
    if (s && *s) {
        if (strlen(s) >= sizeof o->dir) {
            bad(warn, "PLATEAU_DIR", s, "a path shorter than 512 bytes", "./plateau-run-<time>-<pid>");
            n_bad++;
        } else {
            snprintf(o->dir, sizeof o->dir, "%s", s);
        }
    }
    s = get("PLATEAU_SAMPLE_BYTES");
    if (s) {
        uint64_t v;
        if (pl_units_parse(s, &v) == 0) {
            o->sample_bytes = v;
        } else {
            char def[32];
            snprintf(def, sizeof def, "%llu", (unsigned long long)o->sample_bytes);
            bad(warn, "PLATEAU_SAMPLE_BYTES", s, "a byte count (e.g. 524288, 512K, 1M; 0 = every allocation)", def);
            n_bad++;
        }
    }
    n_bad += opt_range(get, warn, "PLATEAU_INTERVAL_MS", 1, 60000, &o->interval_ms);
    n_bad += opt_range(get, warn, "PLATEAU_FLUSH_MS", 10, 1000, &o->flush_ms);
    s = get("PLATEAU_BUFFER_BYTES");
    if (s) {
        uint64_t v;
        if (pl_units_parse(s, &v) == 0 && v >= 256 && v <= 1024 * 1024) {
            o->buffer_bytes = (uint32_t)v;
        } else {
            char def[32];
            snprintf(def, sizeof def, "%u", o->buffer_bytes);
            bad(warn, "PLATEAU_BUFFER_BYTES", s, "a byte count in [256, 1M]", def);
            n_bad++;
        }
    }
    s = get("PLATEAU_HOST_MEMORY");
    if (s) {
        uint64_t v;
        if (pl_units_parse(s, &v) == 0 && v > 0) {
            o->host_memory_bytes = v;
        } else {
            bad(warn, "PLATEAU_HOST_MEMORY", s, "a byte count > 0 (e.g. 200M)", "the machine's memory");
            n_bad++;
        }
    }
    n_bad += opt_bool(get, warn, "PLATEAU_STEP_SIGNAL", &o->step_signal);
    n_bad += opt_bool(get, warn, "PLATEAU_DEVICE_STACKS", &o->device_stacks);
    n_bad += opt_bool(get, warn, "PLATEAU_PSS", &o->pss);
    n_bad += opt_bool(get, warn, "PLATEAU_DISABLE", &o->disable);
    n_bad += opt_bool(get, warn, "PLATEAU_QUIET", &o->quiet);
    n_bad += opt_bool(get, warn, "PLATEAU_COLLECTOR", &o->collector);
    s = get("PLATEAU_RUN_ID");
    if (s) {
        uint64_t v = 0;
        size_t n = strspn(s, "0123456789abcdefABCDEF");
        for (size_t i = 0; i < n && n <= 16; i++) {
            unsigned c = (unsigned char)s[i];
            v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        if (n && n <= 16 && !s[n] && v) {
            o->run_id = v;
        } else {
            bad(warn, "PLATEAU_RUN_ID", s, "1 to 16 hex digits, not all zero", "no run id");
            n_bad++;
        }
    }
    s = get("PLATEAU_CUPTI");
    if (s) {
        bool on = o->cupti != PL_CUPTI_OFF;
        if (!strcmp(s, "auto")) {
            o->cupti = PL_CUPTI_AUTO;
        } else if (opt_bool(get, NULL, "PLATEAU_CUPTI", &on) == 0) {
            o->cupti = on ? PL_CUPTI_ON : PL_CUPTI_OFF;
        } else {
            bad(warn, "PLATEAU_CUPTI", s, "0, 1 or auto (or no/yes, false/true, off/on)",
                o->cupti == PL_CUPTI_AUTO ? "auto" : o->cupti == PL_CUPTI_ON ? "1" : "0");
            n_bad++;
        }
    }
    return n_bad;
}
