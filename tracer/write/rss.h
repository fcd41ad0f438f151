/* Resident-memory sampling from /proc and the process's memory cgroup: RssAnon/RssFile/RssShmem
 * (/proc/self/status), PSS (/proc/self/smaps_rollup), and the cgroup's usage and limit: cgroup v2's memory.current
 * and memory.max (the least over the cgroup and its ancestors), or cgroup v1's memory.usage_in_bytes and
 * hierarchical_memory_limit (memory.stat; else memory.limit_in_bytes). A v1/v2 hybrid (the memory controller on v1,
 * the others on v2) is read as v1: the memory controller is where /proc/self/cgroup names it. The files sampled
 * repeatedly stay open in descriptor slots (fdslot.h: high numbers the program cannot take by accident) and are
 * re-read with pread at offset 0, into stack buffers: no malloc, no stdio, no descriptor appearing and
 * disappearing at the program's lowest free number, so the preload's sampler thread can call it at any time.
 * The roots are configurable so tests can point at fixture files. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <plateau/trace.h>

#include "fdslot.h"

typedef struct pl_rss_ctx {
    char proc_self[128];    /* default "/proc/self" */
    char cgroup_dir[512];   /* "" when no memory cgroup directory was found */
    bool cgroup_v1;         /* cgroup_dir is a cgroup v1 memory controller directory */
    size_t cgroup_root_len; /* cgroup_dir's leading root (v2: the hierarchy's; v1: its memory mount): ancestors stop
                             * there */
    bool skip_pss;          /* smaps_rollup walks page tables: large processes may want it off */
    pl_fdslot_t status, smaps_rollup, cgroup_current; /* open by init, re-read by every sample */
} pl_rss_ctx_t;

/* Find the memory cgroup directory of the process under cgroup_root (default "/sys/fs/cgroup" when NULL) using
 * <proc_self>/cgroup (proc_self NULL = "/proc/self"): a v1 line naming the memory controller ("4:memory:/job" ->
 * <root>/memory/job), else the v2 line ("0::/job" -> <root>/job, or <root>/unified/job on a hybrid), and open the
 * files samples read. Never fails: missing files leave cgroup_dir empty and their fields NA. The context must not
 * hold open files (zeroed or closed). */
void pl_rss_init(pl_rss_ctx_t *ctx, const char *proc_self, const char *cgroup_root);

/* Close the files init opened (the slots are emptied). Safe on a zeroed or closed context. */
void pl_rss_close(pl_rss_ctx_t *ctx);

/* The context's descriptor slots, for the preload's close/dup2 interposers. */
enum { PL_RSS_N_SLOTS = 3 };
pl_fdslot_t *pl_rss_slot(pl_rss_ctx_t *ctx, int i);

/* Take one sample. Fields that cannot be read are PL_TRACE_NA; device_used/device_total are left NA here. */
void pl_rss_sample(pl_rss_ctx_t *ctx, pl_rec_rss_t *out);

/* The cgroup's effective memory limit in bytes: v2, the least memory.max of the cgroup and its ancestors up to the
 * root; v1, hierarchical_memory_limit from memory.stat (which the kernel computes the same way), else
 * memory.limit_in_bytes. PL_TRACE_NA when none is set ("max"; v1's "unlimited", any value >= 2^62) or readable. */
uint64_t pl_rss_cgroup_max(const pl_rss_ctx_t *ctx);

/* Parsers, exposed for tests. `key` like "RssAnon:"; value in kB converted to bytes; PL_TRACE_NA if absent. */
uint64_t pl_rss_parse_kb(const char *text, const char *key);
