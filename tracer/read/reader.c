/* Trace reader: header check, then one chunk at a time (at most PL_TRACE_MAX_CHUNK_BYTES held), each chunk
 * verified (magic, length bound, sequence, CRC-32C) before any of its records is decoded. The first bad or
 * short chunk ends the stream with -EBADMSG and a message naming file and offset; records of earlier
 * chunks have all been delivered. The source is a file (pread) or a memory buffer (tests, fuzzing).
 * Follow mode (pl_trace_follow, for a trace still being written): a short chunk header or payload at the end is a
 * chunk not completely written yet: pl_trace_next returns 0 and the next call reads it again from its header. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "crc.h"
#include "event.h"
#include "pack.h"
#include "grow.h"

struct pl_trace_reader {
    int fd;                 /* -1 for a memory source */
    const uint8_t *mem;     /* memory source */
    size_t mem_len;
    char name[256];         /* file name used in messages */
    pl_trace_header_t header;
    uint64_t offset;        /* file offset of the next chunk header */
    uint32_t next_seq;
    uint8_t *chunk;         /* current chunk payload (malloc'd, grows up to the max) */
    size_t chunk_cap;
    size_t chunk_len, chunk_pos;
    uint32_t chunk_records, chunk_seen;
    pl_pack_ctx_t pack;          /* what the chunk's packed records are differences against (2.0) */
    bool chunk_packed;           /* the chunk may hold packed records: decode through `pack` (else a 1.9 chunk) */
    int in_chunk;           /* a chunk has been loaded and not yet finished */
    uint64_t chunk_offset;  /* file offset of the current chunk's header */
    int status;             /* 0 reading; else the sticky return of pl_trace_next */
    int follow;             /* a short chunk at the end is not complete yet (pl_trace_follow) */
    uint8_t *ra;            /* file source: READ_AHEAD bytes read at once (malloc'd on first use), ... */
    uint64_t ra_off;        /* ... from this file offset, ... */
    size_t ra_len;          /* ... of which this many were there */
    char err[512];
};

/* Chunks of a long, bounded trace are small (a few steps' records, a few hundred bytes): reading each header and
 * payload with its own pread cost two system calls per chunk. The file is read READ_AHEAD bytes at a time instead
 * and chunks are copied out of that; a request the buffer does not hold whole reads the file again from its
 * offset (so a trace still being written is seen as it grows: bytes already read never change). */
#define READ_AHEAD ((size_t)512 << 10)

static _Thread_local char open_err[512];

const char *pl_trace_open_error(void) { return open_err; }

static ssize_t pread_all(pl_trace_reader_t *r, uint64_t off, void *buf, size_t len);

/* Read up to len bytes at off; returns bytes read (short at EOF) or -errno. */
static ssize_t src_read(pl_trace_reader_t *r, uint64_t off, void *buf, size_t len) {
    if (!len) return 0; /* an empty chunk: buf may be NULL (nothing was ever loaded), which memcpy may not take */
    if (r->fd < 0) {
        if (off >= r->mem_len) return 0;
        size_t n = r->mem_len - off < len ? r->mem_len - off : len;
        memcpy(buf, r->mem + off, n);
        return (ssize_t)n;
    }
    if (r->ra && off >= r->ra_off && off - r->ra_off <= r->ra_len && len <= r->ra_len - (off - r->ra_off)) {
        memcpy(buf, r->ra + (off - r->ra_off), len);
        return (ssize_t)len;
    }
    if (len < READ_AHEAD && (r->ra || (r->ra = malloc(READ_AHEAD)))) {
        r->ra_len = 0;
        ssize_t n = pread_all(r, off, r->ra, READ_AHEAD);
        if (n < 0) return n;
        r->ra_off = off;
        r->ra_len = (size_t)n;
        size_t m = (size_t)n < len ? (size_t)n : len;
        memcpy(buf, r->ra, m);
        return (ssize_t)m;
    }
    return pread_all(r, off, buf, len);
}

static ssize_t pread_all(pl_trace_reader_t *r, uint64_t off, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(r->fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int open_common(pl_trace_reader_t *r, pl_trace_reader_t **out) {
    uint8_t hb[PL_TRACE_HEADER_BYTES];
    ssize_t n = src_read(r, 0, hb, sizeof hb);
    int rc;
    if (n < 0) {
        rc = (int)n;
        snprintf(open_err, sizeof open_err, "%s: cannot read header: %s", r->name, strerror((int)-n));
        goto fail;
    }
    if ((size_t)n < sizeof hb) {
        rc = -EBADMSG;
        snprintf(open_err, sizeof open_err, "%s: offset 0: truncated header (%zd of %u bytes)", r->name, n,
                 PL_TRACE_HEADER_BYTES);
        goto fail;
    }
    rc = pl_event_header_decode(hb, &r->header);
    if (rc == -EPROTONOSUPPORT) {
        uint32_t v;
        memcpy(&v, hb + 8, 4);
        snprintf(open_err, sizeof open_err, "%s: trace format version %u is newer than this reader (%u)",
                 r->name, v, PL_TRACE_VERSION);
        goto fail;
    }
    if (rc < 0) {
        snprintf(open_err, sizeof open_err, "%s: offset 0: not a plateau trace (bad magic or header checksum)",
                 r->name);
        goto fail;
    }
    r->offset = PL_TRACE_HEADER_BYTES;
    open_err[0] = 0;
    *out = r;
    return 0;
fail:
    if (r->fd >= 0) close(r->fd);
    free(r->ra);
    free(r);
    return rc;
}

static pl_trace_reader_t *reader_new(const char *name) {
    pl_trace_reader_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->fd = -1;
    snprintf(r->name, sizeof r->name, "%s", name ? name : "(trace)");
    return r;
}

int pl_trace_open(const char *path, pl_trace_reader_t **out) {
    pl_trace_reader_t *r = reader_new(path);
    if (!r) return -ENOMEM;
    /* O_NONBLOCK: opening a FIFO for reading would block until a writer appears; it is refused below instead */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) {
        int e = errno;
        snprintf(open_err, sizeof open_err, "%s: %s", path, strerror(e));
        free(r);
        return -e;
    }
    struct stat sb;
    int e = fstat(r->fd, &sb) != 0 ? errno : S_ISREG(sb.st_mode) ? 0 : EINVAL;
    if (e) {
        if (e == EINVAL)
            snprintf(open_err, sizeof open_err, "%s: %s, not a regular file: not read", path,
                     pl_trace_file_kind(sb.st_mode));
        else
            snprintf(open_err, sizeof open_err, "%s: %s", path, strerror(e));
        close(r->fd);
        free(r);
        return -e;
    }
    return open_common(r, out);
}

int pl_trace_open_mem(const void *data, size_t len, const char *name, pl_trace_reader_t **out) {
    pl_trace_reader_t *r = reader_new(name);
    if (!r) return -ENOMEM;
    r->mem = data;
    r->mem_len = len;
    return open_common(r, out);
}

void pl_trace_follow(pl_trace_reader_t *r, int follow) { r->follow = follow != 0; }

const pl_trace_header_t *pl_trace_header(const pl_trace_reader_t *r) { return &r->header; }
const char *pl_trace_error(const pl_trace_reader_t *r) { return r->err; }
uint64_t pl_trace_offset(const pl_trace_reader_t *r) { return r->chunk_offset; }

static int stop(pl_trace_reader_t *r, uint64_t off, const char *fmt, ...) {
    int n = snprintf(r->err, sizeof r->err, "%s: offset %" PRIu64 ": ", r->name, off);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->err) vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
    va_end(ap);
    r->status = -EBADMSG;
    return r->status;
}

/* Load the next chunk. Returns 1 loaded, 0 clean EOF, <0 stopped. */
static int load_chunk(pl_trace_reader_t *r) {
    uint8_t h[PL_CHUNK_HEADER_BYTES];
    uint64_t off = r->offset;
    ssize_t n = src_read(r, off, h, sizeof h);
    if (n < 0) {
        snprintf(r->err, sizeof r->err, "%s: offset %" PRIu64 ": read error: %s", r->name, off,
                 strerror((int)-n));
        return r->status = (int)n;
    }
    if (n == 0) return 0;
    if ((size_t)n < sizeof h && r->follow) return 0;
    if ((size_t)n < sizeof h)
        return stop(r, off, "truncated chunk header (%zd of %u bytes); the trace ends here", n,
                    PL_CHUNK_HEADER_BYTES);
    uint32_t v[6];
    memcpy(v, h, sizeof v);
    if (v[0] != PL_CHUNK_MAGIC) return stop(r, off, "bad chunk magic; the rest of the file is unreadable");
    if (v[1] > PL_TRACE_MAX_CHUNK_BYTES)
        return stop(r, off, "chunk length %u exceeds the maximum %u", v[1], PL_TRACE_MAX_CHUNK_BYTES);
    if (v[3] != r->next_seq) return stop(r, off, "chunk sequence %u, expected %u", v[3], r->next_seq);
    if (pl_grow_first((void **)&r->chunk, &r->chunk_cap, v[1], 1, 65536)) return r->status = -ENOMEM;
    n = src_read(r, off + sizeof h, r->chunk, v[1]);
    if (n < 0) return r->status = (int)n;
    if ((size_t)n < v[1] && r->follow) return 0; /* r->offset unchanged: read again from this header */
    if ((size_t)n < v[1])
        return stop(r, off, "truncated chunk (%zd of %u payload bytes); the trace ends here", n, v[1]);
    uint32_t crc = pl_crc_update(pl_crc_update(0, h, 16), r->chunk, v[1]);
    if (crc != v[4]) return stop(r, off, "chunk checksum mismatch (corrupted); reading stops here");
    r->chunk_offset = off;
    r->chunk_len = v[1];
    r->chunk_pos = 0;
    r->chunk_records = v[2];
    r->chunk_seen = 0;
    pl_pack_reset(&r->pack);
    r->chunk_packed = pl_pack_any(r->chunk, v[1]);
    r->in_chunk = 1;
    r->next_seq++;
    r->offset = off + sizeof h + v[1];
    return 1;
}

int pl_trace_next(pl_trace_reader_t *r, pl_trace_record_t *rec) {
    for (;;) {
        if (r->status) return r->status;
        if (r->chunk_pos >= r->chunk_len) {
            if (r->in_chunk && r->chunk_seen != r->chunk_records)
                return stop(r, r->chunk_offset, "chunk holds %u records, header says %u", r->chunk_seen,
                            r->chunk_records);
            r->chunk_len = 0;
            r->in_chunk = 0;
            int rc = load_chunk(r);
            if (rc == 0) {
                r->chunk_offset = r->offset;
                return 0; /* not sticky: a file still being written may grow */
            }
            if (rc < 0) return rc;
            continue;
        }
        size_t used = 0;
        const uint8_t *p = r->chunk + r->chunk_pos;
        size_t left = r->chunk_len - r->chunk_pos;
        int rc = r->chunk_packed ? pl_pack_decode(&r->pack, p, left, rec, &used) : pl_event_decode(p, left, rec, &used);
        if (rc < 0)
            return stop(r, r->chunk_offset, "malformed record at payload byte %zu of a checksummed chunk",
                        r->chunk_pos);
        r->chunk_pos += used;
        r->chunk_seen++;
        if (rc == 0) return 1;
    }
}

void pl_trace_close(pl_trace_reader_t *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    free(r->chunk);
    free(r->ra);
    free(r);
}

const char *pl_trace_type_name(pl_rec_type_t type) {
    static const char *const names[] = {
        [PL_REC_PROCESS_START] = "process_start", [PL_REC_PROCESS_END] = "process_end",
        [PL_REC_STEP] = "step",                   [PL_REC_MARK] = "mark",
        [PL_REC_RSS] = "rss",                     [PL_REC_HEAP] = "heap",
        [PL_REC_HOST_ALLOC] = "host_alloc",       [PL_REC_HOST_FREE] = "host_free",
        [PL_REC_DEVICE_ALLOC] = "device_alloc",   [PL_REC_DEVICE_FREE] = "device_free",
        [PL_REC_DEVICE_MAP] = "device_map",       [PL_REC_DEVICE_UNMAP] = "device_unmap",
        [PL_REC_DEVICE_OOM] = "device_oom",       [PL_REC_ALLOC_STATS] = "alloc_stats",
        [PL_REC_STACK] = "stack",                 [PL_REC_FRAME] = "frame",
        [PL_REC_MODULE] = "module",               [PL_REC_THREAD_NAME] = "thread_name",
        [PL_REC_LOST] = "lost",                   [PL_REC_EXEC] = "exec",
        [PL_REC_PYFRAME] = "pyframe",             [PL_REC_RETENTION] = "retention",
        [PL_REC_AGGREGATE] = "aggregate",
    };
    if ((unsigned)type >= sizeof names / sizeof names[0] || !names[type]) return "unknown";
    return names[type];
}
