/* Trace writer (see writer.h). Invariants:
 * - Buffers form a ring. `cur` is the one producers fill; the sealed buffers are exactly those from `head`
 *   up to (not including) `cur`, in order; the writer writes them from `head`, so chunks hit the file in
 *   seal order and get consecutive sequence numbers.
 * - `mu` guards the ring and is held only for memcpy-sized work; `io_mu` serialises file writes (writer
 *   thread vs explicit flush) and is never taken while holding `mu`... except in fork_prepare, which takes
 *   io_mu first, then mu, the same order as the flush path.
 * - After the first write error `stopped` is set and nothing more is written (the reader stops at the last
 *   whole chunk).
 * - The file is reached only through `file` (fdslot.h): a high descriptor whose identity is checked before every
 *   write, which the preload's close/dup2 interposers keep out of the program's way. Chunks are written with
 *   pwritev at `bytes_written`, the end of the last whole chunk, so the file position never depends on the
 *   descriptor: when the program takes the descriptor away anyway, the writer reopens the same file by path
 *   (same device and inode) and goes on where it stopped, overwriting any partial chunk; when it cannot, it
 *   stops with one line. It never writes to a descriptor it does not own.
 * - Priority records (process start/end, exec, step, mark, lost, and the heap/RSS/allocator-stats records taken
 *   at a step) are never dropped because the ring is full: ordinary records may fill a buffer only up to
 *   buffer_bytes - reserve, priority records use the whole buffer; when even that is full and no buffer is free,
 *   they go (encoded) to a small spill area that seal_locked moves to the front of the next buffer. While the
 *   spill holds records, ordinary records are dropped (counted), so the file keeps emission order. Each buffer
 *   has room for the largest record (PL_REC_MAX_BYTES) whatever buffer_bytes is: a priority record larger than
 *   buffer_bytes (a process record with a long argv) takes an empty buffer to itself. Only a full spill (a
 *   writer stalled for thousands of steps) still drops one, counted like any other. */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "event.h"
#include "pack.h"
#include "fdslot.h"
#include "ring.h"

enum { BUF_EMPTY = 0, BUF_FILLING = 1, BUF_SEALED = 2, BUF_WRITING = 3 };

typedef struct {
    uint8_t *data;
    size_t len;          /* bytes used; guarded by mu */
    uint32_t n_records;  /* guarded by mu */
    int state;           /* guarded by mu */
} wbuf_t;

#define MAX_BUFFERS 64
#define SPILL_BYTES (16u * 1024)
#define WRITER_STACK_BYTES (256u * 1024) /* encoding, and the tick (dladdr, stat): a few KiB used */

struct pl_writer {
    pthread_mutex_t mu;
    pthread_mutex_t io_mu;
    pthread_cond_t cond;          /* writer thread wake-up (with mu) */
    wbuf_t bufs[MAX_BUFFERS];
    unsigned n_bufs, cur, head;   /* guarded by mu */
    uint64_t lost_records, lost_bytes, lost_reported; /* guarded by mu */
    size_t reserve_bytes;         /* tail of each buffer only priority records may use */
    size_t cap_bytes;             /* each buffer's size: max(buffer_bytes, PL_REC_MAX_BYTES) */
    uint8_t *spill;               /* [SPILL_BYTES] encoded priority records waiting for a free buffer; mu */
    size_t spill_len;             /* guarded by mu */
    int64_t last_t_ns;            /* time of the last record offered to emit (for the final LOST); mu */
    uint32_t seq;                 /* next chunk sequence; guarded by io_mu */
    pl_fdslot_t file;             /* the trace file; chunks go through pl_fdslot_acquire; io_mu for writes */
    char path[4096];              /* to reopen it when the program took the descriptor */
    pl_writer_options_t opt;
    atomic_bool stopped, closed, quit;
    bool thread_started;
    pthread_t thread;
    atomic_uint_fast64_t bytes_written;
    void *region;                 /* mmap of the buffers (ring mode: of the spill only) */
    size_t region_bytes;
    pl_ring_hdr_t *ring;          /* ring mode: the shared mapping (header page, then the buffers); else NULL */
    size_t ring_bytes;
    _Atomic uint64_t *pub;        /* each buffer's published word: ring->buf, or pub_local */
    _Atomic uint64_t pub_local[MAX_BUFFERS];
};

/* Publish buffer i's state, length and record count (ring mode: what the collector may read). mu held. */
static void publish(pl_writer_t *w, unsigned i) {
    const wbuf_t *b = &w->bufs[i];
    unsigned st = b->state == BUF_FILLING ? PL_RING_FILLING : b->state == BUF_EMPTY ? PL_RING_EMPTY : PL_RING_SEALED;
    atomic_store_explicit(&w->pub[i], pl_ring_word(st, b->n_records, (uint32_t)b->len), memory_order_release);
}

/* May buffer i be filled again? In ring mode the collector empties buffers (in their published word). mu held. */
static bool buf_free(pl_writer_t *w, unsigned i) {
    if (w->ring)
        return pl_ring_word_state(atomic_load_explicit(&w->pub[i], memory_order_acquire)) == PL_RING_EMPTY;
    return w->bufs[i].state == BUF_EMPTY;
}

void pl_writer_options_default(pl_writer_options_t *opt) {
    memset(opt, 0, sizeof *opt);
    opt->buffer_bytes = 256 * 1024;
    opt->n_buffers = 8;
    opt->flush_ms = 250;
}

static void *map_anon(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The file-size limit (RLIMIT_FSIZE, `ulimit -f`): a write that starts at or past it raises SIGXFSZ, which the
 * kernel sends to the whole process (our threads block it; a program thread takes it and dies of it), and one that
 * crosses it is cut short. So a write that would cross it is not made at all: -EFBIG, the file ends at the last
 * whole chunk, and the program never gets a signal of ours. Read at each write: the program may change its limit.
 * (A limit lowered by another thread between this check and the write still raises the signal: a window of one
 * system call.) */
static int fsize_room(const struct iovec *iov, int n_iov, uint64_t off) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    uint64_t end = off;
    for (int i = 0; i < n_iov; i++) end += iov[i].iov_len;
    return end > (uint64_t)rl.rlim_cur ? -EFBIG : 0;
}

static int write_all(int fd, const struct iovec *iov_in, int n_iov, uint64_t off) {
    if (fsize_room(iov_in, n_iov, off) < 0) return -EFBIG;
    struct iovec iov[4];
    memcpy(iov, iov_in, sizeof(struct iovec) * (size_t)n_iov);
    int i = 0;
    while (i < n_iov) {
        ssize_t n = pwritev(fd, iov + i, n_iov - i, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        off += (uint64_t)n;
        while (i < n_iov && (size_t)n >= iov[i].iov_len) n -= (ssize_t)iov[i++].iov_len;
        if (i < n_iov) {
            iov[i].iov_base = (uint8_t *)iov[i].iov_base + n;
            iov[i].iov_len -= (size_t)n;
        }
    }
    return 0;
}

static void report_stop(pl_writer_t *w, int err) {
    bool was = atomic_exchange(&w->stopped, true);
    if (was || !w->opt.log) return;
    char msg[200];
    struct rlimit rl;
    if (err == -EFBIG && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(msg, sizeof msg, "plateau: the trace reached the file-size limit (ulimit -f, %llu bytes): recording "
                 "stopped, the program continues; what was recorded is kept", (unsigned long long)rl.rlim_cur);
    else
        snprintf(msg, sizeof msg, "plateau: trace write failed (%s): recording stopped, the program continues",
                 strerror(-err));
    w->opt.log(msg);
}

/* The program closed or replaced the trace's descriptor behind the interposers (a raw close syscall): open the
 * same file again by path. Returns 0, or -errno after saying once that recording stopped. io_mu held. */
static int reopen_file(pl_writer_t *w) {
    uint64_t dev = w->file.dev, ino = w->file.ino;
    int fd = open(w->path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    int rc = fd < 0 ? -errno : 0;
    if (!rc) {
        pl_fdslot_t probe = PL_FDSLOT_INIT;
        rc = pl_fdslot_set(&probe, fd);
        if (!rc && (probe.dev != dev || probe.ino != ino)) {
            pl_fdslot_close(&probe); /* a different file under the same name: not ours to write */
            rc = -ESTALE;
        }
        if (!rc) atomic_store(&w->file.fd1, pl_fdslot_fd(&probe) + 1); /* same dev and inode as before */
    }
    if (rc && !atomic_exchange(&w->stopped, true) && w->opt.log) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "plateau: the program closed the trace file's descriptor and the file cannot be reopened (%s): "
                 "recording stopped, the program continues", strerror(-rc));
        w->opt.log(msg);
    }
    return rc;
}

/* Write one chunk (header + payload) at the end of the last whole chunk. io_mu held. */
static int write_chunk(pl_writer_t *w, const struct iovec *iov, int n_iov) {
    uint64_t off = atomic_load(&w->bytes_written);
    for (int attempt = 0;; attempt++) {
        int fd = pl_fdslot_acquire(&w->file);
        int rc = fd < 0 ? fd : write_all(fd, iov, n_iov, off);
        pl_fdslot_release(&w->file);
        if (rc != -EBADF || attempt) return rc;
        if ((rc = reopen_file(w)) < 0) return rc;
    }
}

int pl_writer_open(const char *path, const pl_trace_header_t *h, const pl_writer_options_t *opt_in,
                   pl_writer_t **out) {
    pl_writer_options_t opt;
    if (opt_in) opt = *opt_in;
    else pl_writer_options_default(&opt);
    if (opt.buffer_bytes < 256) opt.buffer_bytes = 256;
    if (opt.buffer_bytes > PL_TRACE_MAX_CHUNK_BYTES) opt.buffer_bytes = PL_TRACE_MAX_CHUNK_BYTES;
    if (opt.n_buffers < 2) opt.n_buffers = 2;
    if (opt.n_buffers > MAX_BUFFERS) opt.n_buffers = MAX_BUFFERS;
    if (opt.flush_ms == 0) opt.flush_ms = 250;
    if (opt.flush_ms > 1000) opt.flush_ms = 1000;

    pl_writer_t *w = map_anon(sizeof *w);
    if (!w) return -ENOMEM;
    w->opt = opt;
    w->cap_bytes = opt.buffer_bytes > PL_REC_MAX_BYTES ? opt.buffer_bytes : PL_REC_MAX_BYTES;
    w->region_bytes = w->cap_bytes * opt.n_buffers + SPILL_BYTES;
    w->reserve_bytes = opt.buffer_bytes / 8;
    if (w->reserve_bytes < 128) w->reserve_bytes = 128; /* a step with its heap and RSS records */
    if (w->reserve_bytes > 32 * 1024) w->reserve_bytes = 32 * 1024;
    w->region = map_anon(w->region_bytes);
    int rc;
    if (!w->region) {
        rc = -ENOMEM;
        goto fail_struct;
    }
    w->n_bufs = opt.n_buffers;
    for (unsigned i = 0; i < w->n_bufs; i++) w->bufs[i].data = (uint8_t *)w->region + i * w->cap_bytes;
    w->spill = (uint8_t *)w->region + w->n_bufs * w->cap_bytes;
    w->bufs[0].state = BUF_FILLING;
    w->pub = w->pub_local;
    publish(w, 0);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->io_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);

    if (strlen(path) >= sizeof w->path) {
        rc = -ENAMETOOLONG;
        goto fail_region;
    }
    memcpy(w->path, path, strlen(path) + 1);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || (rc = pl_fdslot_set(&w->file, fd)) < 0) {
        if (fd < 0) rc = -errno;
        else unlink(path);
        goto fail_region;
    }
    uint8_t hb[PL_TRACE_HEADER_BYTES];
    pl_event_header_encode(h, hb);
    struct iovec iov = {hb, sizeof hb};
    rc = write_all(pl_fdslot_fd(&w->file), &iov, 1, 0);
    if (rc < 0) {
        pl_fdslot_close(&w->file);
        unlink(path);
        goto fail_region;
    }
    atomic_store(&w->bytes_written, sizeof hb);
    *out = w;
    return 0;
fail_region:
    munmap(w->region, w->region_bytes);
fail_struct:
    munmap(w, sizeof *w);
    return rc;
}

static bool is_priority(const pl_trace_record_t *r) {
    switch (r->type) {
    case PL_REC_PROCESS_START:
    case PL_REC_PROCESS_END:
    case PL_REC_STEP:
    case PL_REC_MARK:
    case PL_REC_EXEC:
    case PL_REC_LOST:
    case PL_REC_RETENTION: return true;
    case PL_REC_HEAP: return r->u.heap.step != 0;
    case PL_REC_RSS: return r->u.rss.step != 0;
    case PL_REC_ALLOC_STATS: return r->u.alloc_stats.step != 0;
    default: return false;
    }
}

static uint16_t rec_len(const uint8_t *p) {
    uint16_t n;
    memcpy(&n, p + 2, 2);
    return n;
}

/* Move whole spilled records to the front of `cur` (empty, just made current) while they fit. mu held. */
static void drain_spill_locked(pl_writer_t *w) {
    wbuf_t *b = &w->bufs[w->cur];
    size_t off = 0;
    while (off < w->spill_len) {
        uint16_t n = rec_len(w->spill + off);
        if (b->len + n > (b->len ? w->opt.buffer_bytes : w->cap_bytes)) break;
        memcpy(b->data + b->len, w->spill + off, n);
        b->len += n;
        b->n_records++;
        off += n;
    }
    memmove(w->spill, w->spill + off, w->spill_len - off);
    w->spill_len -= off;
    publish(w, w->cur);
}

/* Seal `cur` (if it holds records) and advance; mu held. Returns false if the next buffer is not free. */
static bool seal_locked(pl_writer_t *w) {
    wbuf_t *b = &w->bufs[w->cur];
    unsigned next = (w->cur + 1) % w->n_bufs;
    if (!buf_free(w, next)) return false;
    b->state = BUF_SEALED;
    publish(w, w->cur);
    w->cur = next;
    w->bufs[next].state = BUF_FILLING;
    w->bufs[next].len = 0;
    w->bufs[next].n_records = 0;
    publish(w, next);
    if (w->spill_len) drain_spill_locked(w);
    if (w->ring) pl_ring_ring(w->ring); /* a sealed buffer for the collector */
    return true;
}

/* Encode into `cur` if the record fits below `limit` bytes of the buffer (a priority record alone in an empty
 * buffer: below cap_bytes). mu held. */
static bool append_locked(pl_writer_t *w, const pl_trace_record_t *rec, size_t limit) {
    wbuf_t *b = &w->bufs[w->cur];
    if (b->len == 0 && limit == w->opt.buffer_bytes) limit = w->cap_bytes;
    if (b->len >= limit) return false;
    size_t n = pl_event_encode(rec, b->data + b->len, limit - b->len);
    if (!n) return false;
    b->len += n;
    b->n_records++;
    publish(w, w->cur);
    return true;
}

/* Queue one record: into `cur` (sealing it for a fresh one when full), else, for a priority record, into the
 * spill. Returns false when it was dropped (not counted here). mu held. */
static bool put_locked(pl_writer_t *w, const pl_trace_record_t *rec, bool *sealed) {
    bool prio = is_priority(rec);
    size_t limit = prio ? w->opt.buffer_bytes : w->opt.buffer_bytes - w->reserve_bytes;
    if (!w->spill_len && append_locked(w, rec, limit)) return true;
    if (w->bufs[w->cur].len > 0 && seal_locked(w)) {
        *sealed = true;
        if (!w->spill_len && append_locked(w, rec, limit)) return true;
    }
    if (!prio) return false;
    size_t room = SPILL_BYTES - w->spill_len;
    if (room > w->opt.buffer_bytes) room = w->opt.buffer_bytes; /* it must fit a buffer once drained */
    size_t n = pl_event_encode(rec, w->spill + w->spill_len, room);
    if (!n) return false;
    w->spill_len += n;
    return true;
}

/* Report records dropped so far in a LOST record (a priority record). mu held. */
static void put_lost_locked(pl_writer_t *w, int64_t t_ns, bool *sealed) {
    if (w->lost_records <= w->lost_reported) return;
    pl_trace_record_t lost = {.type = PL_REC_LOST, .t_ns = t_ns};
    lost.u.lost.n_records = w->lost_records - w->lost_reported;
    lost.u.lost.n_bytes = w->lost_bytes;
    if (put_locked(w, &lost, sealed)) w->lost_reported = w->lost_records;
}

int pl_writer_emit(pl_writer_t *w, const pl_trace_record_t *rec) {
    if (atomic_load_explicit(&w->stopped, memory_order_relaxed) ||
        atomic_load_explicit(&w->closed, memory_order_relaxed))
        return -EPIPE;
    pthread_mutex_lock(&w->mu);
    if (atomic_load_explicit(&w->closed, memory_order_relaxed)) {
        pthread_mutex_unlock(&w->mu);
        return -EPIPE;
    }
    bool sealed = false;
    w->last_t_ns = rec->t_ns;
    bool ok = put_locked(w, rec, &sealed);
    if (ok) put_lost_locked(w, rec->t_ns, &sealed);
    else {
        w->lost_records++;
        w->lost_bytes += 64;
    }
    if (sealed) pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -ENOBUFS;
}

/* Write every sealed buffer; with seal_current, seal `cur` first if it holds records. io_mu held. */
static int flush_pass_locked(pl_writer_t *w, bool seal_current) {
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (seal_current && w->bufs[w->cur].len > 0) seal_locked(w);
    for (;;) {
        wbuf_t *b = &w->bufs[w->head];
        if (b->state != BUF_SEALED) break;
        b->state = BUF_WRITING;
        pthread_mutex_unlock(&w->mu);
        if (!atomic_load(&w->stopped)) {
            uint8_t ch[PL_CHUNK_HEADER_BYTES];
            b->len = pl_pack_chunk(b->data, b->len); /* the buffer is ours while BUF_WRITING */
            pl_event_chunk_header(ch, b->data, (uint32_t)b->len, b->n_records, w->seq);
            struct iovec iov[2] = {{ch, sizeof ch}, {b->data, b->len}};
            int wrc = write_chunk(w, iov, 2);
            if (wrc < 0) {
                report_stop(w, wrc);
                rc = wrc;
            } else {
                w->seq++;
                atomic_fetch_add(&w->bytes_written, sizeof ch + b->len);
            }
        }
        pthread_mutex_lock(&w->mu);
        b->state = BUF_EMPTY;
        b->len = 0;
        b->n_records = 0;
        w->head = (w->head + 1) % w->n_bufs;
        /* A producer may have found the ring full and left `cur` sealed-less: nothing else to fix. */
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Passes until `cur` and the spill are empty (a full ring frees buffers only as it is written): while the spill
 * holds records (each pass moves at least one into a buffer, so this ends: the spill is bounded), then at most 4
 * more for `cur`, so that producers that keep emitting cannot hold the flusher. io_mu held. */
static int flush_io_locked(pl_writer_t *w, bool seal_current) {
    int rc = 0;
    for (int extra = 0, pass = 0; extra < 4 && pass < 4096; pass++) { /* 16 KiB of spill: < 1400 records */
        int prc = flush_pass_locked(w, seal_current);
        if (prc && !rc) rc = prc;
        if (!seal_current || atomic_load(&w->stopped)) break;
        pthread_mutex_lock(&w->mu);
        bool spilled = w->spill_len > 0, left = spilled || w->bufs[w->cur].len > 0;
        pthread_mutex_unlock(&w->mu);
        if (!left) break;
        if (!spilled) extra++;
    }
    return rc;
}

int pl_writer_flush(pl_writer_t *w) {
    if (w->ring) { /* the collector writes; it holds whatever was published, even after the process is gone */
        pl_ring_ring(w->ring);
        return 0;
    }
    pthread_mutex_lock(&w->io_mu);
    int rc = flush_io_locked(w, true);
    pthread_mutex_unlock(&w->io_mu);
    return rc;
}

static void *writer_main(void *arg) {
    pl_writer_t *w = arg;
    if (w->opt.thread_start) w->opt.thread_start();
    pthread_mutex_lock(&w->mu);
    while (!atomic_load(&w->quit)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)w->opt.flush_ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&w->cond, &w->mu, &ts);
        if (atomic_load(&w->quit)) break;
        pthread_mutex_unlock(&w->mu);
        if (w->opt.tick) w->opt.tick(w->opt.tick_ctx);
        pthread_mutex_lock(&w->io_mu);
        flush_io_locked(w, true);
        pthread_mutex_unlock(&w->io_mu);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int pl_writer_start(pl_writer_t *w) {
    if (w->thread_started || w->ring) return 0; /* ring mode: no thread, the collector writes */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WRITER_STACK_BYTES); /* not the default 8 MiB of address space */
    int rc = pthread_create(&w->thread, &attr, writer_main, w);
    pthread_attr_destroy(&attr);
    if (rc) return -rc;
    w->thread_started = true;
    return 0;
}

bool pl_writer_stopped(const pl_writer_t *w) { return atomic_load(&((pl_writer_t *)w)->stopped); }

void pl_writer_close(pl_writer_t *w) {
    if (!w || atomic_load(&w->closed)) return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->mu);
        atomic_store(&w->quit, true);
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        w->thread_started = false;
    }
    if (w->opt.tick) w->opt.tick(w->opt.tick_ctx);
    if (w->ring) {
        pthread_mutex_lock(&w->mu);
        bool sealed = false;
        put_lost_locked(w, w->last_t_ns, &sealed);
        /* Spilled records (the ring was full) reach the ring only when a buffer frees: take what the collector has
         * freed by now, without waiting for it. What is still spilled after that is lost with the process. */
        for (unsigned k = 0; k < w->n_bufs && w->spill_len && w->bufs[w->cur].len > 0 && seal_locked(w); k++) {
        }
        atomic_store(&w->closed, true);
        pthread_mutex_unlock(&w->mu);
        atomic_fetch_or(&w->ring->events, PL_RING_EV_CLOSED);
        pl_ring_ring(w->ring);
        return;
    }
    pthread_mutex_lock(&w->io_mu);
    flush_io_locked(w, true);
    /* Drops not yet reported (no record was emitted after them): report them now, so the count is exact. */
    pthread_mutex_lock(&w->mu);
    bool sealed = false;
    put_lost_locked(w, w->last_t_ns, &sealed);
    pthread_mutex_unlock(&w->mu);
    flush_io_locked(w, true);
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->closed, true);
    pthread_mutex_unlock(&w->mu);
    pl_fdslot_close(&w->file);
    pthread_mutex_unlock(&w->io_mu);
}

void pl_writer_destroy(pl_writer_t *w) {
    if (!w) return;
    pl_writer_close(w);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->io_mu);
    pthread_cond_destroy(&w->cond);
    munmap(w->region, w->region_bytes);
    if (w->ring) munmap(w->ring, w->ring_bytes);
    munmap(w, sizeof *w);
}

void pl_writer_fork_prepare(pl_writer_t *w) {
    pthread_mutex_lock(&w->io_mu);
    pthread_mutex_lock(&w->mu);
}

void pl_writer_fork_parent(pl_writer_t *w) {
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&w->io_mu);
}

void pl_writer_fork_child(pl_writer_t *w) {
    /* Single-threaded here: the writer thread does not exist in the child. The ring (MADV_DONTFORK) is not mapped
     * here: the child can never write into its parent's records, and its old address is not ours to unmap. */
    pl_fdslot_close(&w->file);
    munmap(w->region, w->region_bytes);
    munmap(w, sizeof *w);
}

/* ------------------------------------------------------------------ ring mode */

int64_t pl_writer_chunk_write(int fd, uint64_t off, uint32_t seq, uint8_t *payload, uint32_t len, uint32_t n_records) {
    uint8_t ch[PL_CHUNK_HEADER_BYTES];
    len = (uint32_t)pl_pack_chunk(payload, len);
    pl_event_chunk_header(ch, payload, len, n_records, seq);
    struct iovec iov[2] = {{ch, sizeof ch}, {payload, len}};
    int rc = write_all(fd, iov, 2, off);
    return rc < 0 ? rc : (int64_t)(sizeof ch + len);
}

/* Create the ring file under a temporary name, give it its blocks (fallocate: a page of a shared file mapping that
 * cannot get a block on a full disk is a SIGBUS in the program, so no block is left to allocate later), map it,
 * close the descriptor, fill the header, and give it its final name (the collector only looks at final names).
 * Refused (-EFBIG, nothing done) when RLIMIT_FSIZE is below its size: ftruncate/fallocate past it would raise
 * SIGXFSZ in the program. */
static int ring_create(pl_writer_t *w, const char *ring_path, const pl_trace_header_t *h) {
    char tmp[4200];
    const char *slash = strrchr(ring_path, '/');
    int dlen = slash ? (int)(slash - ring_path + 1) : 0;
    if (snprintf(tmp, sizeof tmp, "%.*s.%s.tmp", dlen, ring_path, ring_path + dlen) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    size_t bytes = PL_RING_HEADER_BYTES + w->cap_bytes * w->n_bufs;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < bytes) return -EFBIG;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -errno;
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    void *p = MAP_FAILED;
    if (!rc) p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (rc || p == MAP_FAILED) {
        unlink(tmp);
        return rc ? -rc : -ENOMEM;
    }
    madvise(p, bytes, MADV_DONTFORK); /* a fork child must never write into this image's ring */
    pl_ring_hdr_t *r = p;
    r->n_bufs = w->n_bufs;
    r->pid = h->pid;
    r->exec_seq = h->exec_seq;
    r->cap_bytes = w->cap_bytes;
    r->file_bytes = atomic_load(&w->bytes_written);
    w->ring = r;
    w->ring_bytes = bytes;
    w->pub = r->buf;
    for (unsigned i = 0; i < w->n_bufs; i++) {
        w->bufs[i].data = (uint8_t *)p + PL_RING_HEADER_BYTES + i * w->cap_bytes;
        publish(w, i);
    }
    atomic_store_explicit((_Atomic uint64_t *)&r->magic, PL_RING_MAGIC, memory_order_release);
    if (rename(tmp, ring_path) < 0) {
        rc = -errno;
        unlink(tmp);
        w->ring = NULL;
        w->pub = w->pub_local;
        munmap(p, bytes);
        return rc;
    }
    return 0;
}

int pl_writer_open_ring(const char *path, const char *ring_path, const pl_trace_header_t *h,
                        const pl_writer_options_t *opt, pl_writer_t **out) {
    pl_writer_t *w;
    int rc = pl_writer_open(path, h, opt, &w);
    if (rc < 0) return rc;
    /* The buffers move into the ring; the private region keeps only the spill. */
    void *spill = map_anon(SPILL_BYTES);
    if (!spill) rc = -ENOMEM;
    else rc = ring_create(w, ring_path, h);
    if (rc < 0) {
        if (spill) munmap(spill, SPILL_BYTES);
        pl_writer_destroy(w);
        unlink(path);
        return rc;
    }
    munmap(w->region, w->region_bytes);
    w->region = spill;
    w->region_bytes = SPILL_BYTES;
    w->spill = spill;
    w->ring->flush_ms = w->opt.flush_ms;
    pl_fdslot_close(&w->file); /* the collector writes the file: no descriptor stays in the program */
    *out = w;
    return 0;
}

pl_ring_hdr_t *pl_writer_ring(pl_writer_t *w) { return w->ring; }

uint64_t pl_writer_n_lost(const pl_writer_t *w) {
    pl_writer_t *m = (pl_writer_t *)w;
    pthread_mutex_lock(&m->mu);
    uint64_t n = m->lost_records;
    pthread_mutex_unlock(&m->mu);
    return n;
}

pl_fdslot_t *pl_writer_fdslot(pl_writer_t *w) { return &w->file; }

uint64_t pl_writer_bytes_written(const pl_writer_t *w) { return atomic_load(&((pl_writer_t *)w)->bytes_written); }
