/* tune/rmm_log: an RMM logging_resource_adaptor CSV log as a replay sequence (docs/tune.md, "RMM logs").
 *
 * Format (rmm/mr/detail/logging_resource_adaptor_impl.cpp): a header line `Thread,Time,Action,Pointer,Size,Stream`,
 * then one line per call: thread id, time (`%H:%M:%S.%f`, or seconds in older logs: not interpreted), action
 * (`allocate`, `free`, older `deallocate`, or `allocate failure`), the pointer (`0x...` hex; `(nil)`, `0x0` or `0`
 * for a failure), the size in bytes (decimal), the stream (`0x...` hex or decimal). allocate -> ALLOC, free ->
 * FREE by address, allocate failure -> PROBE. The log's line order is the order the adaptor saw the calls.
 * Strict: a line that is not six fields of that shape is an error naming its line and column; CRLF line ends and a
 * UTF-8 byte order mark are accepted. A last line without its newline that does not parse (a process killed while
 * writing) makes the sequence damaged (s->damaged, s->error) instead: the lines before it are replayed.
 * Bounded: one pass over the caller's buffer, memory in the sequence only (capped by max_events).
 */
#pragma once

#include <stddef.h>

#include "replay.h"

#define PL_RMM_LOG_HEADER "Thread,Time,Action,Pointer,Size,Stream"

typedef struct pl_rmm_log_info {
    size_t n_lines;                     /* data lines read */
    size_t n_allocate, n_free, n_failures;
    size_t n_threads_seen;              /* distinct thread ids, up to 64 counted */
} pl_rmm_log_info_t;

/* Read a log held in data[0..len) (name: for s->file and messages). Returns 0 with *s initialised (owned by the
 * caller; also when damaged), -EBADMSG (no header, or a bad line: err says "name: line N, column C: ..."),
 * -ENODATA (no allocation), -E2BIG (max_events), -ENOMEM. */
int pl_rmm_log_read(const void *data, size_t len, const char *name, size_t max_events, pl_replay_seq_t *s,
                    pl_rmm_log_info_t *info, char *err, size_t err_len);

void pl_rmm_log_summary(const pl_rmm_log_info_t *info, const pl_replay_seq_t *s, char *buf, size_t buf_len);
