/* tune/tune: replay one allocation sequence under a grid of allocator settings and rank them (docs/tune.md).
 *
 * A grid is a list of keys, each with a list of values (a value "default" leaves the key unset); its configs are
 * every combination, in odometer order (last key fastest), each parsed by pl_alloc_config_parse so a bad value is
 * reported like PLATEAU_ALLOC_CONF would. Configs run on worker threads (one sim device and allocator each; the
 * sequence is shared read-only); results do not depend on the thread count. Ranking: no OOM first, then peak
 * reserved, peak reserved / peak allocated, device alloc+map calls (all ascending), then grid order.
 * Data flow: pl_replay_extract -> pl_tune_run -> pl_tune_explain / pl_tune_render_* -> cli/tune.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "replay.h"

#define PL_TUNE_MAX_KEYS 8
#define PL_TUNE_MAX_VALUES 16
#define PL_TUNE_MAX_CONFIGS 4096
#define PL_TUNE_VALUE_CHARS 96

/* The default grid, in --grid syntax (docs/tune.md). */
#define PL_TUNE_DEFAULT_GRID                                                                                       \
    "expandable_segments=False|True;max_split_size_mb=default|64|256|1024;"                                         \
    "garbage_collection_threshold=default|0.6|0.8;roundup_power2_divisions=default|4|8"

typedef struct pl_tune_grid {
    size_t n_keys;
    char keys[PL_TUNE_MAX_KEYS][48];
    size_t n_values[PL_TUNE_MAX_KEYS];
    char values[PL_TUNE_MAX_KEYS][PL_TUNE_MAX_VALUES][PL_TUNE_VALUE_CHARS]; /* "" = default (key unset) */
} pl_tune_grid_t;

typedef struct pl_tune_entry {
    size_t grid_index;          /* position in the grid's odometer order */
    char conf[512];             /* pl_alloc_config_format of the parsed config ("" = all defaults) */
    pl_alloc_config_t cfg;
    int rc;                     /* 0, or the replay's error (message in error) */
    char error[256];
    pl_replay_result_t res;
} pl_tune_entry_t;

typedef struct pl_tune {
    pl_tune_entry_t *entries;   /* n_entries, ranked best first after pl_tune_run */
    size_t n_entries;
    pl_tune_entry_t baseline;   /* all defaults (also in entries when the grid has it) */
    uint64_t capacity_bytes;
    char capacity_why[128];     /* where the capacity came from (pl_replay_pick_capacity; set by the caller, "" = not
                                   said) */
    unsigned n_threads;
} pl_tune_t;

/* Parse `key=v1|v2|...;key=...` (NULL = PL_TUNE_DEFAULT_GRID). Every combination is validated with
 * pl_alloc_config_parse. Returns 0 or -EINVAL / -E2BIG with a message in err. */
int pl_tune_grid_parse(const char *spec, pl_tune_grid_t *g, char *err, size_t err_len);
/* Number of configs in the grid. */
size_t pl_tune_grid_size(const pl_tune_grid_t *g);
/* Config text of combination i (`key:value,...`, defaults omitted) into buf. */
void pl_tune_grid_text(const pl_tune_grid_t *g, size_t i, char *buf, size_t buf_len);

/* Replay s under every config of g (plus the all-defaults baseline) on n_threads threads (0 = online cores),
 * then rank. Returns 0, -ENOMEM, -EINVAL (a config the allocator refused: err says which). */
int pl_tune_run(const pl_replay_seq_t *s, const pl_tune_grid_t *g, uint64_t capacity_bytes, unsigned n_threads,
                pl_tune_t *t, char *err, size_t err_len);
void pl_tune_free(pl_tune_t *t);

/* Ranking order of two results (negative: a is better). */
int pl_tune_compare(const pl_tune_entry_t *a, const pl_tune_entry_t *b);

/* One sentence explaining the winner from the numbers, against the baseline. */
void pl_tune_explain(const pl_tune_t *t, char *buf, size_t buf_len);

/* Table (top rows; max_rows 0 = all), the winning lines and the explanation. */
int pl_tune_render_text(const pl_tune_t *t, const pl_replay_seq_t *s, size_t max_rows, FILE *out);
int pl_tune_render_json(const pl_tune_t *t, const pl_replay_seq_t *s, FILE *out);

/* Human size: "3.1 GiB", "512 B". */
void pl_tune_format_bytes(double bytes, char *buf, size_t buf_len);
/* Full stats of one replay as `name: value` lines (plateau replay); capacity_why: where the capacity came from
 * (pl_replay_pick_capacity), NULL = not said. */
void pl_replay_render_text(const pl_replay_seq_t *s, const char *conf, const pl_replay_result_t *r,
                           const char *capacity_why, FILE *out);
void pl_replay_render_json(const pl_replay_seq_t *s, const char *conf, const pl_replay_result_t *r,
                           const char *capacity_why, FILE *out);
