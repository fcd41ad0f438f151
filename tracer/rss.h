/* Resident-memory sampling from /proc and cgroup v2: RssAnon/RssFile/RssShmem (/proc/self/status), PSS
 * (/proc/self/smaps_rollup), memory.current and memory.max of the process's cgroup. Reads with open/read
 * into stack buffers: no malloc, no stdio, so the preload's sampler thread can call it at any time.
 * The roots are configurable so tests can point at fixture files. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <plateau/trace.h>

typedef struct pl_rss_ctx {
    char proc_self[128];    /* default "/proc/self" */
    char cgroup_dir[512];   /* "" when no cgroup v2 directory was found */
    bool skip_pss;          /* smaps_rollup walks page tables: large processes may want it off */
} pl_rss_ctx_t;

/* Find the cgroup v2 directory of the process under cgroup_root (default "/sys/fs/cgroup" when NULL) using
 * <proc_self>/cgroup (proc_self NULL = "/proc/self"). Never fails: missing files leave cgroup_dir empty. */
void pl_rss_init(pl_rss_ctx_t *ctx, const char *proc_self, const char *cgroup_root);

/* Take one sample. Fields that cannot be read are PL_TRACE_NA; device_used/device_total are left NA here. */
void pl_rss_sample(const pl_rss_ctx_t *ctx, pl_rec_rss_t *out);

/* memory.max in bytes, PL_TRACE_NA when absent or "max". */
uint64_t pl_rss_cgroup_max(const pl_rss_ctx_t *ctx);

/* Parsers, exposed for tests. `key` like "RssAnon:"; value in kB converted to bytes; PL_TRACE_NA if absent. */
uint64_t pl_rss_parse_kb(const char *text, const char *key);
