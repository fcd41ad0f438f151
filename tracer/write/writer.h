/* Trace file writer: producers (any thread) encode records into a ring of in-memory buffers under a short
 * mutex; a writer thread seals the current buffer at least every flush interval and writes sealed buffers
 * as checksummed chunks. Producers never wait for I/O: when every buffer is full, records are dropped and
 * counted (a PL_REC_LOST record follows). On a write error (full disk, file size limit) the writer stops
 * recording for good and reports once through the log hook. All memory comes from mmap, never from malloc,
 * so the preloaded tracer can use it inside malloc. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

typedef struct pl_writer pl_writer_t;

typedef struct pl_writer_options {
    size_t buffer_bytes;      /* chunk payload capacity; default 256 KiB, at least 256 B, at most PL_TRACE_MAX_CHUNK_BYTES */
    unsigned n_buffers;       /* default 8 */
    unsigned flush_ms;        /* writer wake-up and seal interval; default 250 */
    void (*log)(const char *msg);       /* one-line messages (write error); may be NULL */
    void (*thread_start)(void);         /* called first in the writer thread (e.g. set a re-entrancy guard) */
    void (*tick)(void *ctx);            /* called by the writer thread before each flush, no lock held */
    void *tick_ctx;
} pl_writer_options_t;

void pl_writer_options_default(pl_writer_options_t *opt);

/* Create `path` with O_EXCL and mode 0600, write the header. Returns 0, -errno. */
int pl_writer_open(const char *path, const pl_trace_header_t *h, const pl_writer_options_t *opt,
                   pl_writer_t **out);

/* Ring mode (ring.h): like pl_writer_open, then the buffers move into the shared file `ring_path`, the trace
 * file's descriptor is closed, and records reach the file through a collector outside the process
 * (pl_ring_collect). pl_writer_start starts no thread, pl_writer_flush only wakes the collector, pl_writer_close
 * marks the ring closed. Returns 0 or -errno (then neither file is left behind): -EFBIG when RLIMIT_FSIZE is
 * below the ring's size. */
int pl_writer_open_ring(const char *path, const char *ring_path, const pl_trace_header_t *h,
                        const pl_writer_options_t *opt, pl_writer_t **out);
struct pl_ring_hdr;
struct pl_ring_hdr *pl_writer_ring(pl_writer_t *w);   /* NULL unless in ring mode */

/* Write one chunk (header, then payload) at offset `off` of `fd`: the collector's (pl_ring_put_chunk) and offline
 * tools' way to a trace file (the writer thread writes its own buffers the same way). The payload, whole ordinary
 * records, is rewritten in place into the 2.0 form (pack.h: never longer) before it is written. Returns the bytes
 * written (chunk header and packed payload) or -errno. */
int64_t pl_writer_chunk_write(int fd, uint64_t off, uint32_t seq, uint8_t *payload, uint32_t len, uint32_t n_records);

/* Start the background writer thread. Returns 0 or -errno (then only explicit flushes write). */
int pl_writer_start(pl_writer_t *w);

/* Append a record. Thread-safe, never blocks on I/O. Returns 0, -ENOBUFS (dropped: buffers full or record
 * too large), -EPIPE (writer stopped or closed). Not async-signal-safe (takes a mutex). */
int pl_writer_emit(pl_writer_t *w, const pl_trace_record_t *rec);

/* Seal the current buffer and write everything pending, in the caller's thread. Returns 0 or -errno. */
int pl_writer_flush(pl_writer_t *w);

/* True once a write error stopped recording. */
bool pl_writer_stopped(const pl_writer_t *w);

/* Stop the thread, flush, close the file. Later emits return -EPIPE. Memory stays mapped (other threads
 * may still call emit during process exit); pl_writer_destroy releases it. */
void pl_writer_close(pl_writer_t *w);
void pl_writer_destroy(pl_writer_t *w);

/* fork: prepare takes the writer's locks, parent releases them, child drops the parent's pending records,
 * closes the inherited file and releases the writer (the child opens its own). */
void pl_writer_fork_prepare(pl_writer_t *w);
void pl_writer_fork_parent(pl_writer_t *w);
void pl_writer_fork_child(pl_writer_t *w);

/* The trace file's descriptor slot (fdslot.h), for the preload's close/dup2 interposers. */
struct pl_fdslot;
struct pl_fdslot *pl_writer_fdslot(pl_writer_t *w);

/* Counters for tests and the LOST record. */
uint64_t pl_writer_n_lost(const pl_writer_t *w);
uint64_t pl_writer_bytes_written(const pl_writer_t *w);
