/* libFuzzer target: the trace reader on arbitrary bytes. Every record it yields must be internally
 * consistent (strings NUL-terminated inside the input, counts within their caps), and it must stop.
 * Packed records (2.0): when the first input byte has bit 1 set too, each chunk's payload is packed
 * (pl_pack_chunk) before the checksums are repaired, so mutated ordinary records reach the packer and the packed
 * decoder with every value a mutation makes; the packed trace must then read as the same records as the
 * unpacked one (a differential check), and mutations of the packed bytes themselves come from seeds that hold
 * packed records. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <plateau/trace.h>

#include "crc.h"
#include "event.h"
#include "pack.h"

static size_t touch(const char *s) { return s ? strlen(s) : 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checksums would stop almost every mutation at the first chunk. When the first input byte is odd, the rest
 * of the input gets valid header and chunk checksums first, so the record decoder itself is fuzzed. */
static uint8_t fixed[1 << 20];

static void repair(uint8_t *b, size_t n) {
    if (n < PL_TRACE_HEADER_BYTES) return;
    uint32_t crc = pl_crc_update(0, b, 60);
    memcpy(b + 60, &crc, 4);
    size_t off = PL_TRACE_HEADER_BYTES;
    while (off + PL_CHUNK_HEADER_BYTES <= n) {
        uint32_t len;
        memcpy(&len, b + off + 4, 4);
        if (len > n - off - PL_CHUNK_HEADER_BYTES) break;
        crc = pl_crc_update(pl_crc_update(0, b + off, 16), b + off + PL_CHUNK_HEADER_BYTES, len);
        memcpy(b + off + 16, &crc, 4);
        off += PL_CHUNK_HEADER_BYTES + len;
    }
}

/* Pack every whole chunk's payload in place (the file shrinks); returns the new size. Sets *odd when a payload
 * holds an ordinary-framed record of a packed type (64..127): the unpacked reader skips it as unknown, the
 * packed one reads it as packed, so the two are not comparable. */
static size_t pack_chunks(uint8_t *b, size_t n, int *odd) {
    size_t off = PL_TRACE_HEADER_BYTES;
    while (off + PL_CHUNK_HEADER_BYTES <= n) {
        uint32_t len;
        memcpy(&len, b + off + 4, 4);
        if (len > n - off - PL_CHUNK_HEADER_BYTES) break;
        uint8_t *p = b + off + PL_CHUNK_HEADER_BYTES;
        for (size_t k = 0; k + 4 <= len;) {
            uint16_t t, l;
            memcpy(&t, p + k, 2);
            memcpy(&l, p + k + 2, 2);
            if (t >= PL_PACK_TYPE_BASE && t < 2 * PL_PACK_TYPE_BASE) *odd = 1;
            if (l < 4) break;
            k += l;
        }
        uint32_t plen = (uint32_t)pl_pack_chunk(p, len);
        memmove(p + plen, p + len, n - (off + PL_CHUNK_HEADER_BYTES + len));
        n -= len - plen;
        memcpy(b + off + 4, &plen, 4);
        off += PL_CHUNK_HEADER_BYTES + plen;
    }
    return n;
}

static uint8_t plain[1 << 20];

/* The records of the packed trace `data` must be those of the unpacked `plain`, in order, with the same end. */
static void same_records(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    pl_trace_reader_t *ra, *rb;
    if (pl_trace_open_mem(a, na, "plain", &ra) < 0) return;
    if (pl_trace_open_mem(b, nb, "packed", &rb) < 0) __builtin_trap();
    static pl_trace_record_t x, y;
    static uint8_t ex[70000], ey[70000];
    for (;;) {
        int ka = pl_trace_next(ra, &x), kb = pl_trace_next(rb, &y);
        if ((ka == 1) != (kb == 1)) __builtin_trap();
        if (ka != 1) break;
        size_t la = pl_event_encode(&x, ex, sizeof ex), lb = pl_event_encode(&y, ey, sizeof ey);
        if (la != lb || memcmp(ex, ey, la)) __builtin_trap();
    }
    pl_trace_close(ra);
    pl_trace_close(rb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_trace_reader_t *r;
    if (size > 0 && (data[0] & 1) && size - 1 <= sizeof fixed) {
        int pack = data[0] & 2, odd = 0;
        memcpy(fixed, data + 1, size - 1);
        size = size - 1;
        if (pack) {
            repair(fixed, size);
            memcpy(plain, fixed, size);
            size_t n_plain = size;
            size = pack_chunks(fixed, size, &odd);
            repair(fixed, size);
            if (!odd) same_records(plain, n_plain, fixed, size);
        } else {
            repair(fixed, size);
        }
        data = fixed;
    }
    if (pl_trace_open_mem(data, size, "fuzz", &r) < 0) return 0;
    pl_trace_record_t rec;
    size_t sum = 0;
    int rc, n = 0;
    while ((rc = pl_trace_next(r, &rec)) == 1) {
        n++;
        switch (rec.type) {
        case PL_REC_PROCESS_START:
            if (rec.u.process.n_argv > PL_TRACE_MAX_ARGV) __builtin_trap();
            sum += touch(rec.u.process.exe);
            for (uint32_t i = 0; i < rec.u.process.n_argv; i++) sum += touch(rec.u.process.argv[i]);
            /* 1.2 fields: always set ("" for an older record) */
            if (!rec.u.process.host_allocator || !rec.u.process.host_allocator_version) __builtin_trap();
            sum += touch(rec.u.process.host_allocator) + touch(rec.u.process.host_allocator_version);
            break;
        case PL_REC_MARK: sum += touch(rec.u.mark.label); break;
        case PL_REC_FRAME: sum += touch(rec.u.frame.symbol); break;
        case PL_REC_MODULE: /* 1.1 fields: always set (defaults for a 1.0 record) */
            if (!rec.u.module.build_id) __builtin_trap();
            sum += touch(rec.u.module.path) + touch(rec.u.module.build_id);
            break;
        case PL_REC_THREAD_NAME: sum += touch(rec.u.thread_name.name); break;
        case PL_REC_EXEC: sum += touch(rec.u.exec.path); break;
        case PL_REC_STACK:
            if (rec.u.stack.n_frames > PL_TRACE_MAX_FRAMES) __builtin_trap();
            for (uint32_t i = 0; i < rec.u.stack.n_frames; i++) sum += rec.u.stack.pcs[i] & 1;
            if (rec.u.stack.n_py > PL_TRACE_MAX_FRAMES - rec.u.stack.n_frames) __builtin_trap(); /* 1.4 */
            for (uint32_t i = 0; i < rec.u.stack.n_py; i++) sum += rec.u.stack.py[i] & 1;
            break;
        case PL_REC_PYFRAME: sum += touch(rec.u.pyframe.file) + touch(rec.u.pyframe.function); break;
        case PL_REC_RETENTION: /* 1.8 */
            sum += touch(rec.u.retention.path) + touch(rec.u.retention.what) + touch(rec.u.retention.kind) +
                   touch(rec.u.retention.file) + touch(rec.u.retention.fix);
            if (rec.u.retention.n_ranges > PL_RETENTION_MAX_RANGES) __builtin_trap(); /* 1.9: bounded */
            for (uint32_t i = 0; i < rec.u.retention.n_ranges; i++) sum += rec.u.retention.range_bytes[i];
            break;
        default: break;
        }
        if ((size_t)n > size) __builtin_trap(); /* every record takes at least one input byte */
    }
    if (rc < 0 && pl_trace_error(r)[0] == 0 && rc == -74) __builtin_trap(); /* -EBADMSG needs a message */
    pl_trace_close(r);
    return (int)(sum & 0);
}
