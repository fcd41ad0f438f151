/* Following a job's log as `tail -F` does, for plateau attach --steps-from (docs/attach.md "Steps"): complete
 * lines as they are appended; a file truncated in place (copytruncate, `> log`) is read again from its start; a
 * file renamed away and replaced (logrotate's create, a new run writing a new file) is read to its end, then the new
 * file from its start; a file that does not exist yet, or is gone, is waited for. Reads only; never holds a lock
 * or changes the file. One owner thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct pl_logtail pl_logtail_t;

enum {
    PL_LOGTAIL_MISSING = 1,    /* the path names no readable file now (waiting for it) */
    PL_LOGTAIL_TRUNCATED = 2,  /* the file got shorter than what was read: read again from its start */
    PL_LOGTAIL_ROTATED = 4,    /* the path names a new file: the old one was read to its end */
};

/* Returns 0 or -ENOMEM. A missing file is not an error (pl_logtail_poll says PL_LOGTAIL_MISSING). */
int pl_logtail_open(const char *path, pl_logtail_t **out);

/* Deliver every complete line appended since the last call (without its newline; lines over 64 KiB are cut) to
 * line(ctx, text, len). Returns the PL_LOGTAIL_* events of this call. */
int pl_logtail_poll(pl_logtail_t *t, void (*line)(void *ctx, const char *s, size_t n), void *ctx);

void pl_logtail_close(pl_logtail_t *t);
