/* reports/retention: who keeps it. The Python census's retention records (docs/retention.md, trace 1.8) become, per
 * process, the holders the census reported with their sizes census by census; the holders that grew in step with
 * the steps are named (a path a user can type, what it is, how fast it grows, the bytes it keeps, the line that grows
 * it and a likely fix for the known shapes).
 * Growth, not size: a holder is named only when its size (items; autograd nodes for a tensor) grew over the censuses
 * of the run, in most intervals, never shrank, and still grew over the last third of them: a buffer that fills and
 * then stays bounded, or a list emptied each epoch, is never named.
 * Data flow: extract.c hands each record to pl_retention_add; pl_retention_judge runs once the trace is read; the
 * analysis writes each holder's fix_line and the verdict line's sentence (reports/analyze: sentences.h); the
 * renderers read the result. The model writes no English. Not thread-safe per object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#define PL_RETENTION_MAX_HOLDERS 16   /* holders kept per process (the census reports at most 12 at a time) */
#define PL_RETENTION_MAX_POINTS 128   /* censuses kept per holder (every other one dropped past it) */
#define PL_RETENTION_MAX_CENSUS 65536 /* census numbers whose step is remembered */
#define PL_RETENTION_MIN_POINTS 4     /* censuses a holder needs before it can be named */

typedef struct pl_retention_point {
    uint32_t census;
    uint64_t items, nodes, bytes;   /* PL_TRACE_NA unknown */
    uint32_t flags;
} pl_retention_point_t;

typedef struct pl_retention_holder {
    char path[256], what[256], kind[32], file[1024], fix[256];
    int32_t line;
    uint32_t flags;                 /* PL_RETENTION_* of the last record (GUESS sticks) */
    size_t n_points;
    pl_retention_point_t points[PL_RETENTION_MAX_POINTS]; /* in census order */
    /* set by pl_retention_judge */
    bool named;
    bool by_nodes;                  /* sized by autograd nodes (a tensor), not items */
    double size_per_step;           /* items (or nodes) per step over the censuses */
    double bytes_per_step;          /* NAN when bytes are unknown */
    double nodes_per_step;          /* a container's: autograd nodes of the tensors it holds, per step (NAN unknown) */
    uint64_t size_last, bytes_last; /* at the last census (bytes PL_TRACE_NA unknown) */
    int64_t first_step, last_step;  /* steps of its first and last census */
    /* Where its memory was allocated (trace 1.9; set by reports/extract.c): of its largest storages at the last
     * census that sent them (n_ranges), those that begin at a sampled host allocation live at that moment, by the
     * allocation's stack id and weighted bytes; then the growing site (pl_extract_site_t) most of them belong to. */
    uint32_t match_census, n_ranges, n_match;
    uint32_t match_stack[PL_RETENTION_MAX_RANGES];
    double match_bytes[PL_RETENTION_MAX_RANGES];
    char alloc_at[256];             /* that site's name ("train.py:42 in train"), "" none */
    uint32_t alloc_hits;            /* storages found there (of n_ranges) */
    double alloc_bytes;             /* their sampled allocations' estimated bytes */
    /* set by the analysis (reports/analyze: pl_retention_say), read by the verdict line and the renderers */
    char fix_line[401];             /* the line that grows it, with its likely fix: "; likely fix: ... at main.py:17",
                                     * "; grown at main.py:17", "" none (cut at 400 bytes) */
} pl_retention_holder_t;

typedef struct pl_retention {
    uint32_t n_census;              /* census records seen */
    uint32_t last_census;           /* highest census number */
    bool any_short;                 /* a census stopped short */
    double census_seconds;          /* time the censuses took, all together */
    uint64_t *census_step;          /* [census] -> step (PL_TRACE_NA unknown), malloc'd, cap_census entries */
    size_t cap_census;
    size_t n_holders;
    pl_retention_holder_t holders[PL_RETENTION_MAX_HOLDERS];
    size_t n_named;                 /* set by pl_retention_judge; named holders first, by bytes then size growth */
} pl_retention_t;

/* Fold one retention record into *rt (zeroed before the first). Returns 0 or -ENOMEM. */
int pl_retention_add(pl_retention_t *rt, const pl_rec_retention_t *q);

/* The holder of path, NULL when none. */
pl_retention_holder_t *pl_retention_find(pl_retention_t *rt, const char *path);

/* Judge every holder (docs/retention.md, "Growth, not size") and sort the named ones first. Idempotent. */
void pl_retention_judge(pl_retention_t *rt);

void pl_retention_free(pl_retention_t *rt);
