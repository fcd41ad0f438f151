/* tune/replay_input: one entry point for everything `plateau tune` and `plateau replay` read (docs/tune.md).
 *
 * pl_replay_load sniffs its input and dispatches: a directory or a plateau trace -> pl_replay_extract (unchanged
 * behaviour); a file whose first byte is 0x80 (pickle PROTO) -> a PyTorch memory snapshot (torch_snapshot.h); a
 * file whose first line is the RMM logging_resource_adaptor header -> an RMM log (rmm_log.h). Anything else goes
 * to the trace reader, whose error then also names the other accepted formats.
 * Snapshot and RMM files are read whole into memory, up to max_input_bytes (default 1 GiB).
 * Data flow: cli/tune.c, cli/replay.c -> pl_replay_load -> {pl_replay_extract, pl_torch_snapshot_read,
 * pl_rmm_log_read} -> pl_replay_seq_t -> pl_replay_run / pl_tune_run.
 */
#pragma once

#include <stddef.h>

#include "replay.h"
#include "rmm_log.h"
#include "torch_snapshot.h"

#define PL_REPLAY_DEFAULT_MAX_INPUT_BYTES ((size_t)1 << 30)

typedef enum pl_replay_format {
    PL_REPLAY_FORMAT_TRACE = 0,     /* plateau trace file or run directory */
    PL_REPLAY_FORMAT_TORCH_SNAPSHOT,
    PL_REPLAY_FORMAT_RMM_LOG,
} pl_replay_format_t;

typedef struct pl_replay_load_opts {
    size_t max_events;       /* 0 = PL_REPLAY_DEFAULT_MAX_EVENTS */
    int device;              /* snapshots: the device trace to replay; -1 = the one with the most allocations */
    size_t max_input_bytes;  /* snapshots and RMM logs: 0 = PL_REPLAY_DEFAULT_MAX_INPUT_BYTES */
} pl_replay_load_opts_t;

typedef struct pl_replay_input {
    pl_replay_format_t format;
    pl_torch_snapshot_info_t snapshot; /* format == TORCH_SNAPSHOT */
    pl_rmm_log_info_t rmm;             /* format == RMM_LOG */
    char summary[2048];                /* lines on what was read ("" for traces), each ending in '\n' */
} pl_replay_input_t;

/* Load path into *s (initialised and owned by the caller on success) and describe it in *in (may be NULL).
 * Returns 0, or the reader's error (-ENOENT, -EBADMSG, -ENOTSUP, -ENODATA, -ENODEV, -E2BIG, -ENOMEM, -EIO) with a
 * message naming the file and the problem in err. */
int pl_replay_load(const char *path, const pl_replay_load_opts_t *o, pl_replay_seq_t *s, pl_replay_input_t *in,
                   char *err, size_t err_len);
/* Same over an in-memory input (name for messages); never a run directory. */
int pl_replay_load_mem(const void *data, size_t len, const char *name, const pl_replay_load_opts_t *o,
                       pl_replay_seq_t *s, pl_replay_input_t *in, char *err, size_t err_len);

/* Name of a format ("plateau trace", "PyTorch memory snapshot", "RMM log"). */
const char *pl_replay_format_name(pl_replay_format_t f);
