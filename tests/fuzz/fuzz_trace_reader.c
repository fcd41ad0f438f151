/* libFuzzer target: the trace reader on arbitrary bytes. Every record it yields must be internally
 * consistent (strings NUL-terminated inside the input, counts within their caps), and it must stop. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <plateau/trace.h>

#include "crc.h"
#include "event.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_trace_reader_t *r;
    if (size > 0 && (data[0] & 1) && size - 1 <= sizeof fixed) {
        memcpy(fixed, data + 1, size - 1);
        repair(fixed, size - 1);
        data = fixed;
        size = size - 1;
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
