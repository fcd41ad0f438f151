/* The shared ring's collector side, and the producer's doorbell (see ring.h for the protocol). The collector
 * keeps its own place in the ring (head, and how much of the head buffer earlier chunks carried) in its private
 * memory: the only words it writes in the shared page are the EMPTY words of buffers it has written whole. */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "event.h"
#include "writer.h"

void pl_ring_ring(pl_ring_hdr_t *h) {
    atomic_fetch_add(&h->doorbell, 1);
    syscall(SYS_futex, &h->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0); /* not private: the collector is elsewhere */
}

int pl_ring_attach(const char *ring_path, const char *trace_path, pl_ring_reader_t *r) {
    memset(r, 0, sizeof *r);
    r->trace_fd = -1;
    int fd = open(ring_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -errno;
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size < PL_RING_HEADER_BYTES) rc = -EINVAL;
    void *p = MAP_FAILED;
    if (!rc) p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (rc) return rc;
    if (p == MAP_FAILED) return -errno;
    pl_ring_hdr_t *h = p;
    uint64_t magic = atomic_load_explicit((_Atomic uint64_t *)&h->magic, memory_order_acquire);
    uint32_t n_bufs = h->n_bufs; /* read once: the program can write this page */
    uint64_t cap = h->cap_bytes;
    if (magic != PL_RING_MAGIC || n_bufs < 2 || n_bufs > PL_RING_MAX_BUFFERS || cap == 0 ||
        cap > PL_TRACE_MAX_CHUNK_BYTES || PL_RING_HEADER_BYTES + cap * n_bufs > (uint64_t)sb.st_size) {
        munmap(p, (size_t)sb.st_size);
        return -EINVAL;
    }
    r->trace_fd = open(trace_path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (r->trace_fd < 0) {
        rc = -errno;
        munmap(p, (size_t)sb.st_size);
        return rc;
    }
    r->hdr = h;
    r->map_bytes = (size_t)sb.st_size;
    r->n_bufs = n_bufs;
    r->cap_bytes = cap;
    r->file_off = h->file_bytes;
    return 0;
}

int pl_ring_put_chunk(pl_ring_reader_t *r, const uint8_t *payload, uint32_t len, uint32_t n_records) {
    if (r->stopped) return -EPIPE;
    if (len > PL_TRACE_MAX_CHUNK_BYTES) return -EINVAL;
    if (!r->scratch) { /* the payload is packed in a copy: it may be the ring, which the program shares */
        void *p = mmap(NULL, PL_TRACE_MAX_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            r->stopped = true;
            return -ENOMEM;
        }
        r->scratch = p;
    }
    memcpy(r->scratch, payload, len);
    int64_t n = pl_writer_chunk_write(r->trace_fd, r->file_off, r->seq, r->scratch, len, n_records);
    if (n < 0) {
        r->stopped = true;
        return (int)n;
    }
    r->seq++;
    r->file_off += (uint64_t)n;
    return (int)n;
}

static int pass_on(pl_ring_reader_t *r, const uint8_t *payload, uint32_t len, uint32_t n_records) {
    return r->sink ? r->sink(r->sink_ctx, payload, len, n_records) : pl_ring_put_chunk(r, payload, len, n_records);
}

long pl_ring_collect(pl_ring_reader_t *r, bool partial) {
    pl_ring_hdr_t *h = r->hdr;
    long total = 0;
    for (unsigned k = 0; k < r->n_bufs; k++) {
        uint64_t word = atomic_load_explicit(&h->buf[r->head], memory_order_acquire);
        unsigned st = pl_ring_word_state(word);
        if (st == PL_RING_EMPTY || (st == PL_RING_FILLING && !partial)) break;
        uint32_t len = pl_ring_word_len(word), n = pl_ring_word_records(word);
        if (len > r->cap_bytes || len < r->done_len || n < r->done_records) { /* not a word the producer wrote */
            r->stopped = true;
            return -EPROTO;
        }
        if (len > r->done_len && !r->stopped) {
            const uint8_t *data = (const uint8_t *)h + PL_RING_HEADER_BYTES + (size_t)r->head * r->cap_bytes;
            int rc = pass_on(r, data + r->done_len, len - r->done_len, n - r->done_records);
            if (rc < 0) return rc;
            total += len - r->done_len;
        }
        if (st == PL_RING_FILLING) { /* the producer goes on filling it: remember how far we wrote */
            r->done_len = len;
            r->done_records = n;
            break;
        }
        r->done_len = r->done_records = 0; /* sealed and written whole: hand it back */
        atomic_store_explicit(&h->buf[r->head], pl_ring_word(PL_RING_EMPTY, 0, 0), memory_order_release);
        r->head = (r->head + 1) % r->n_bufs;
    }
    return total;
}

int pl_ring_write_records(pl_ring_reader_t *r, const pl_trace_record_t *recs, unsigned n) {
    uint8_t buf[16384];
    size_t len = 0;
    uint32_t k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t m = pl_event_encode(&recs[i], buf + len, sizeof buf - len);
        if (!m) break;
        len += m;
        k++;
    }
    int rc = k ? pass_on(r, buf, (uint32_t)len, k) : 0;
    return rc < 0 ? rc : 0;
}

void pl_ring_detach(pl_ring_reader_t *r) {
    if (r->hdr) munmap(r->hdr, r->map_bytes);
    if (r->trace_fd >= 0) close(r->trace_fd);
    if (r->scratch) munmap(r->scratch, PL_TRACE_MAX_CHUNK_BYTES);
    r->scratch = NULL;
    r->hdr = NULL;
    r->trace_fd = -1;
}
