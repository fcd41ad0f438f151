/* The shared ring: how a traced process image hands its records to a collector outside it (docs/ARCHITECTURE.md,
 * "The collector"). The producer (the writer, writer.c, in ring mode) creates `<dir>/<pid>.<seq>.ring` next to its
 * trace file, maps it MAP_SHARED and closes the descriptor: the program keeps no descriptor and runs no thread of
 * ours. Producers encode records into the ring's buffers exactly as into the in-process writer's, and publish each
 * buffer's state, length and record count in one 64-bit word (release); the collector (plateau run's, collector/)
 * reads the words (acquire), writes every published byte range as a checksummed chunk to the trace file (the whole
 * of a sealed buffer, the new tail of the one being filled), and empties sealed buffers by storing EMPTY in their
 * word. Nothing is locked across the two processes: the producer's mutex stays in its private memory, the
 * collector only reads bytes below a published length and writes only the words of buffers it empties, so either
 * side may die at any point without blocking the other. The file outlives the process: after a SIGKILL the
 * collector drains everything that was published (a record being encoded at that instant is lost).
 *
 * Besides the buffers the first page carries a few words both sides use: the doorbell (a futex word the producer
 * bumps and wakes non-privately when it seals a buffer, after a step, at exit), the steps completed (for the RSS
 * sample the collector takes after each step), and the requests the collector leaves for the next allocation on a
 * program thread (heap totals every interval; the steps SIGUSR2 asked for). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#define PL_RING_MAGIC 0x31676e6952554c50ull /* "PLURing1" */
#define PL_RING_HEADER_BYTES 4096u
#define PL_RING_MAX_BUFFERS 64u
#define PL_RING_SUFFIX ".ring"

/* Buffer states in a published word (bits 62-63); bits 32-61 the record count, 0-31 the length in bytes. */
enum { PL_RING_EMPTY = 0, PL_RING_FILLING = 1, PL_RING_SEALED = 2 };

static inline uint64_t pl_ring_word(unsigned state, uint32_t n_records, uint32_t len) {
    return (uint64_t)state << 62 | (uint64_t)(n_records & 0x3fffffffu) << 32 | len;
}
static inline unsigned pl_ring_word_state(uint64_t w) { return (unsigned)(w >> 62); }
static inline uint32_t pl_ring_word_records(uint64_t w) { return (uint32_t)(w >> 32) & 0x3fffffffu; }
static inline uint32_t pl_ring_word_len(uint64_t w) { return (uint32_t)w; }

/* events (producer -> collector) */
#define PL_RING_EV_RSS 1u     /* a step ended: an RSS sample, tagged with `step`, is due */
#define PL_RING_EV_CLOSED 2u  /* the image wrote its last record (exit, _exit): drain and finish */
/* requests (collector or the SIGUSR2 handler -> the next allocation on a program thread) */
#define PL_RING_REQ_HEAP 1u   /* emit the exact heap totals (an interval passed) */
#define PL_RING_REQ_STEPS 2u  /* record the `signal_steps` SIGUSR2 counted */

typedef struct pl_ring_hdr {
    uint64_t magic;                /* PL_RING_MAGIC, set before the file gets its final name */
    uint32_t n_bufs;               /* buffers after the header page */
    uint32_t pid, exec_seq;        /* the image this ring belongs to (its trace: <pid>.<exec_seq>.pltrace) */
    uint32_t interval_ms;          /* PLATEAU_INTERVAL_MS: the collector's sampling period */
    uint32_t flush_ms;             /* PLATEAU_FLUSH_MS: the longest a published record waits for the file */
    uint32_t pss;                  /* PLATEAU_PSS */
    uint64_t cap_bytes;            /* each buffer's size */
    uint64_t file_bytes;           /* the trace file's length when the ring was made (its header) */
    _Atomic uint32_t doorbell;     /* futex word: bumped (and FUTEX_WAKE, not private) by the producer */
    _Atomic uint32_t events;       /* PL_RING_EV_* */
    _Atomic uint32_t requests;     /* PL_RING_REQ_* */
    _Atomic uint32_t signal_steps; /* SIGUSR2 steps not recorded yet */
    _Atomic uint64_t step;         /* steps completed (the RSS sample after a step carries it) */
    _Atomic uint64_t device_used, device_total; /* CUDA builds: the latest device memory reading of the
                                                   program's driver calls; total 0 = none yet */
    _Atomic uint64_t buf[PL_RING_MAX_BUFFERS]; /* one published word per buffer (pl_ring_word) */
} pl_ring_hdr_t;

_Static_assert(sizeof(pl_ring_hdr_t) <= PL_RING_HEADER_BYTES, "ring header fits its page");

/* Producer side: bump the doorbell and wake the collector (async-signal-safe: an atomic add and a syscall). */
void pl_ring_ring(pl_ring_hdr_t *h);

/* ---- collector side ---- */

typedef struct pl_ring_reader {
    pl_ring_hdr_t *hdr;            /* the mapping (hdr + buffers) */
    size_t map_bytes;
    uint32_t n_bufs;               /* hdr's, checked and kept at attach: the program can write the page */
    uint64_t cap_bytes;
    int trace_fd;                  /* the trace file, opened for writing by attach */
    uint64_t file_off;             /* end of the last whole chunk written */
    uint32_t seq;                  /* next chunk sequence number */
    unsigned head;                 /* the buffer being collected */
    uint32_t done_len, done_records; /* of buffer `head`: what earlier chunks already carried */
    bool stopped;                  /* a write failed: nothing more is written */
    uint8_t *scratch;              /* PL_TRACE_MAX_CHUNK_BYTES, mapped at the first chunk: where it is packed */
    /* Where collected records go: NULL, chunks straight to the trace file; else sink(sink_ctx, ...) gets every
     * published range of whole records (the collector's compaction, collector/compact.h), which writes what it
     * keeps through pl_ring_put_chunk. Set after attach, before the first collect. */
    int (*sink)(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n_records);
    void *sink_ctx;
} pl_ring_reader_t;

/* Map ring file `ring_path` (which must be complete: its magic set) and open `trace_path` to append chunks.
 * Returns 0 or -errno (nothing held on failure). */
int pl_ring_attach(const char *ring_path, const char *trace_path, pl_ring_reader_t *r);

/* Write what the producer published since the last call: every sealed buffer whole (then emptied for reuse) and,
 * with `partial`, the new tail of the buffer being filled. Returns bytes of payload written, or -errno when a
 * write failed (then r->stopped and nothing more is written). */
long pl_ring_collect(pl_ring_reader_t *r, bool partial);

/* Append one chunk of whole records to the trace file (the sink's way to the file), packed (trace format 2.0,
 * pl_writer_chunk_write) in a copy: the payload is not changed. Returns the bytes written (chunk header and packed
 * payload) or -errno (then r->stopped and nothing more is written). */
int pl_ring_put_chunk(pl_ring_reader_t *r, const uint8_t *payload, uint32_t len, uint32_t n_records);

/* Write n records of the collector's own (RSS samples, thread names) as one chunk after what was collected. */
int pl_ring_write_records(pl_ring_reader_t *r, const pl_trace_record_t *recs, unsigned n);

void pl_ring_detach(pl_ring_reader_t *r);
