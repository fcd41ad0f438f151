/* reports/seriesfile: the plain-text series format of the labeled corpus (tests/fixtures/series/) and of
 * `plateau report --series` style inputs.
 *
 *   # plateau-series 1 label=plateau name=seed003_run2 warmup_min=80
 *   10 5434000000
 *   20 7017000000 12.5
 *
 * The first line is the header: "# plateau-series 1" then key=value words (keys [A-Za-z0-9_.-], <= 31 bytes;
 * values <= 127 bytes, no spaces). Later lines starting with '#' and blank lines are ignored. Data lines are
 * "STEP VALUE [SECONDS]": STEP an integer in [0, 2^53], VALUE a finite number, SECONDS (time since start) finite in
 * [0, 9e9]. Several lines may share a step (several samples within it). Lines are at most 255 bytes.
 * Parsing is bounded: at most max_samples samples are stored (more is an error), memory grows by doubling up to
 * that bound, nothing else is allocated. Input need not be NUL-terminated.
 */
#pragma once

#include <stddef.h>

#include "series.h"

#define PL_SERIESFILE_MAX_META 32
#define PL_SERIESFILE_MAX_LINE 255

typedef struct pl_seriesfile_meta {
    char key[32];
    char value[128];
} pl_seriesfile_meta_t;

typedef struct pl_seriesfile {
    pl_sample_t *samples;  /* n_samples, owned */
    size_t n_samples;
    pl_seriesfile_meta_t meta[PL_SERIESFILE_MAX_META];
    size_t n_meta;
} pl_seriesfile_t;

typedef struct pl_parse_error {
    size_t offset;   /* byte offset of the offending line */
    size_t line;     /* 1-based line number */
    char msg[96];
} pl_parse_error_t;

/* Parse len bytes. Returns 0 and fills *out (free with pl_seriesfile_free), or -EINVAL (malformed; *err says where
 * and why when err is not NULL), -E2BIG (more than max_samples samples), -ENOMEM. */
int pl_seriesfile_parse(const char *buf, size_t len, size_t max_samples, pl_seriesfile_t *out, pl_parse_error_t *err);

/* Read a whole file (at most max_bytes, else -EFBIG) and parse it. Also returns -errno from open/read. */
int pl_seriesfile_load(const char *path, size_t max_bytes, size_t max_samples, pl_seriesfile_t *out,
                       pl_parse_error_t *err);

/* The header value for key, or NULL. */
const char *pl_seriesfile_get(const pl_seriesfile_t *f, const char *key);

void pl_seriesfile_free(pl_seriesfile_t *f);
