/* RSS/PSS/cgroup sampler (see rss.h). Values in /proc are in kB (1024 bytes). memory.current is bytes. */
#include "rss.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Read a small file into buf (NUL-terminated). Returns bytes read or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = 0;
    return (ssize_t)got;
}

/* Open `path` into slot s (empty on failure). */
static void open_slot(pl_fdslot_t *s, const char *path) {
    atomic_init(&s->fd1, 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) pl_fdslot_set(s, fd);
}

/* Read the whole (small) file of slot s from its start into buf (NUL-terminated). Returns bytes read or -1. */
static ssize_t read_slot(pl_fdslot_t *s, char *buf, size_t cap) {
    int fd = pl_fdslot_acquire(s);
    size_t got = 0;
    while (fd >= 0 && got + 1 < cap) {
        ssize_t n = pread(fd, buf + got, cap - 1 - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    pl_fdslot_release(s);
    buf[got] = 0;
    return fd < 0 ? -1 : (ssize_t)got;
}

static uint64_t parse_u64(const char *p, const char **end) {
    uint64_t v = 0;
    bool any = false;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p++ - '0');
        any = true;
    }
    if (end) *end = p;
    return any ? v : PL_TRACE_NA;
}

uint64_t pl_rss_parse_kb(const char *text, const char *key) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, key, klen)) {
            const char *p = line + klen;
            while (*p == ' ' || *p == '\t') p++;
            uint64_t v = parse_u64(p, NULL);
            return v == PL_TRACE_NA ? v : v * 1024;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    return PL_TRACE_NA;
}

/* Is the comma-separated controller list of a v1 line (between its two colons) one that holds "memory"? */
static bool lists_memory(const char *ctrl, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && ctrl[j] != ',') j++;
        if (j - i == 6 && !strncmp(ctrl + i, "memory", 6)) return true;
        i = j + 1;
    }
    return false;
}

/* Take dir (<root>[/sub]<rel>) as the cgroup directory when its usage file is readable. */
static bool take_cgroup(pl_rss_ctx_t *ctx, const char *root, const char *sub, const char *rel, bool v1) {
    char dir[512], probe[600];
    if (!strcmp(rel, "/")) rel = "";
    if (snprintf(dir, sizeof dir, "%s%s%s", root, sub, rel) >= (int)sizeof dir) return false;
    snprintf(probe, sizeof probe, "%s/%s", dir, v1 ? "memory.usage_in_bytes" : "memory.current");
    if (access(probe, R_OK) != 0) return false;
    snprintf(ctx->cgroup_dir, sizeof ctx->cgroup_dir, "%s", dir);
    ctx->cgroup_v1 = v1;
    ctx->cgroup_root_len = strlen(root) + strlen(sub);
    open_slot(&ctx->cgroup_current, probe);
    return true;
}

void pl_rss_init(pl_rss_ctx_t *ctx, const char *proc_self, const char *cgroup_root) {
    memset(ctx, 0, sizeof *ctx);
    snprintf(ctx->proc_self, sizeof ctx->proc_self, "%s", proc_self ? proc_self : "/proc/self");
    if (!cgroup_root) cgroup_root = "/sys/fs/cgroup";
    char path[700], buf[2048];
    snprintf(path, sizeof path, "%s/status", ctx->proc_self);
    open_slot(&ctx->status, path);
    snprintf(path, sizeof path, "%s/smaps_rollup", ctx->proc_self);
    open_slot(&ctx->smaps_rollup, path);
    snprintf(path, sizeof path, "%s/cgroup", ctx->proc_self);
    if (read_small(path, buf, sizeof buf) <= 0) return;
    /* lines "ID:CONTROLLERS:PATH": v1 "4:memory:/job" (or "4:cpu,memory:/job"), v2 "0::/job" */
    const char *v2 = NULL;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 && c2 == c1 + 1 && !strncmp(line, "0:", 2)) v2 = c2 + 1;
        else if (c2 && lists_memory(c1 + 1, (size_t)(c2 - c1 - 1))) {
            /* the memory controller is on v1 (alone or on a hybrid): that is where its files are */
            take_cgroup(ctx, cgroup_root, "/memory", c2 + 1, true);
            return;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (v2 && !take_cgroup(ctx, cgroup_root, "", v2, false)) take_cgroup(ctx, cgroup_root, "/unified", v2, false);
}

static uint64_t read_cgroup_value(const pl_rss_ctx_t *ctx, const char *file) {
    if (!ctx->cgroup_dir[0]) return PL_TRACE_NA;
    char path[600], buf[64];
    snprintf(path, sizeof path, "%s/%s", ctx->cgroup_dir, file);
    if (read_small(path, buf, sizeof buf) <= 0) return PL_TRACE_NA;
    return parse_u64(buf, NULL); /* "max" parses as NA */
}

void pl_rss_close(pl_rss_ctx_t *ctx) {
    for (int i = 0; i < PL_RSS_N_SLOTS; i++) pl_fdslot_close(pl_rss_slot(ctx, i));
}

pl_fdslot_t *pl_rss_slot(pl_rss_ctx_t *ctx, int i) {
    return i == 0 ? &ctx->status : i == 1 ? &ctx->smaps_rollup : &ctx->cgroup_current;
}

void pl_rss_sample(pl_rss_ctx_t *ctx, pl_rec_rss_t *out) {
    char buf[8192];
    pl_rec_rss_t s = {0, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA, PL_TRACE_NA};
    if (read_slot(&ctx->status, buf, sizeof buf) > 0) {
        s.rss_anon = pl_rss_parse_kb(buf, "RssAnon:");
        s.rss_file = pl_rss_parse_kb(buf, "RssFile:");
        s.rss_shmem = pl_rss_parse_kb(buf, "RssShmem:");
    }
    if (!ctx->skip_pss && read_slot(&ctx->smaps_rollup, buf, sizeof buf) > 0) s.pss = pl_rss_parse_kb(buf, "Pss:");
    if (read_slot(&ctx->cgroup_current, buf, 64) > 0) s.cgroup_current = parse_u64(buf, NULL);
    *out = s;
}

/* A limit that means "none": v2 writes "max" (NA here); v1 writes PAGE_COUNTER_MAX pages (9223372036854771712 with
 * 4 KiB pages), and no real limit comes near 2^62 bytes. */
static uint64_t real_limit(uint64_t v) { return v == PL_TRACE_NA || v >= (1ull << 62) ? PL_TRACE_NA : v; }

/* v2: the least memory.max from the cgroup up to (not including) the hierarchy's root, which has none. */
static uint64_t cgroup_v2_max(const pl_rss_ctx_t *ctx) {
    char dir[512], path[600], buf[64];
    snprintf(dir, sizeof dir, "%s", ctx->cgroup_dir);
    uint64_t least = PL_TRACE_NA;
    for (;;) {
        snprintf(path, sizeof path, "%s/memory.max", dir);
        if (read_small(path, buf, sizeof buf) > 0) {
            uint64_t v = real_limit(parse_u64(buf, NULL));
            if (v != PL_TRACE_NA && (least == PL_TRACE_NA || v < least)) least = v;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < ctx->cgroup_root_len) break;
        *slash = 0;
    }
    return least;
}

/* v1: the kernel's hierarchical_memory_limit (the least over the ancestors), else the cgroup's own limit. */
static uint64_t cgroup_v1_max(const pl_rss_ctx_t *ctx) {
    char path[600], buf[8192];
    snprintf(path, sizeof path, "%s/memory.stat", ctx->cgroup_dir);
    if (read_small(path, buf, sizeof buf) > 0) {
        for (const char *line = buf; line && *line;) {
            if (!strncmp(line, "hierarchical_memory_limit ", 26)) return real_limit(parse_u64(line + 26, NULL));
            line = strchr(line, '\n');
            if (line) line++;
        }
    }
    return real_limit(read_cgroup_value(ctx, "memory.limit_in_bytes"));
}

uint64_t pl_rss_cgroup_max(const pl_rss_ctx_t *ctx) {
    if (!ctx->cgroup_dir[0]) return PL_TRACE_NA;
    return ctx->cgroup_v1 ? cgroup_v1_max(ctx) : cgroup_v2_max(ctx);
}
