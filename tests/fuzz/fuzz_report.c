/* fuzz_report: the whole report path from bytes: trace reader -> extract -> analyze -> text, JSON and HTML, and the
 * exports (CSV, trace events, PyTorch snapshot pickle).
 *
 * Two modes, chosen by the first byte (bit 1 set: the trace is read twice, as two processes). Odd: the rest is the trace file itself (pl_trace_open_mem), which mostly
 * exercises header and chunk validation. Even: the rest is record payload, framed here into a valid header and
 * checksummed chunks (record counts from the codec), so mutations reach record decoding, extraction, the address
 * maps and every renderer instead of dying at a CRC. Any crash, sanitizer report, leak or unbounded allocation is
 * a bug; the libFuzzer -rss_limit_mb bound (run-fuzzer.sh) catches runaway memory.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "pack.h"
#include "export.h"
#include "extract.h"
#include "render.h"
#include "render_html.h"

#define FRAME_CHUNK 2048u

static uint8_t *frame(const uint8_t *p, size_t n, size_t *out_len) {
    size_t n_chunks = n / FRAME_CHUNK + 1;
    uint8_t *b = malloc(PL_TRACE_HEADER_BYTES + n + n_chunks * PL_CHUNK_HEADER_BYTES);
    if (!b) return NULL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 7, .ppid = 1, .start_mono_ns = 1000};
    pl_event_header_encode(&h, b);
    size_t w = PL_TRACE_HEADER_BYTES;
    uint32_t seq = 0;
    for (size_t off = 0; off < n || seq == 0; seq++) {
        size_t len = n - off < FRAME_CHUNK ? n - off : FRAME_CHUNK;
        uint32_t n_rec = 0;
        size_t pos = 0, used;
        pl_trace_record_t rec;
        pl_pack_ctx_t pack; /* the input may hold packed records (2.0): count them as the reader will */
        pl_pack_reset(&pack);
        while (pos < len && pl_pack_decode(&pack, p + off + pos, len - pos, &rec, &used) >= 0 && used) {
            pos += used;
            n_rec++;
        }
        pl_event_chunk_header(b + w, p + off, (uint32_t)len, n_rec, seq);
        memcpy(b + w + PL_CHUNK_HEADER_BYTES, p + off, len);
        w += PL_CHUNK_HEADER_BYTES + len;
        off += len;
        if (len == 0) break;
    }
    *out_len = w;
    return b;
}

static FILE *sink(void) {
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t *framed = NULL;
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    if (!(data[0] & 1)) {
        framed = frame(data + 1, size - 1, &len);
        if (!framed) return 0;
        buf = framed;
    }
    pl_report_t *r = pl_report_create("fuzz");
    pl_extract_t x;
    pl_extract_init(&x);
    pl_extract_opts_t o = {.max_points = 64, .since_step = data[0] >> 5};
    /* bit 1 of the mode byte: the same trace read twice, as two processes, so that ranked traces reach the rank
     * rows and the agreement of ranks (docs/verdict.md section 9) */
    bool twice = data[0] & 2;
    if (r && pl_extract_mem(r, &x, buf, len, "fuzz.pltrace", &o) == 0 &&
        (!twice || pl_extract_mem(r, &x, buf, len, "fuzz2.pltrace", &o) == 0) && pl_report_analyze(r) == 0 && sink()) {
        pl_render_text(r, sink(), NULL);
        pl_render_run_lines(&(pl_run_t){r, &x}, sink(), false);
        /* -EINVAL from the JSON writers is the emitter reporting broken nesting (common/json.h): a bug, not input */
        if (pl_render_run_json(&(pl_run_t){r, &x}, sink(), 32) == -EINVAL) abort();
        pl_render_html(&(pl_run_t){r, &x}, sink());
        pl_export_csv(&(pl_run_t){r, &x}, sink());
        if (pl_export_trace_events(&(pl_run_t){r, &x}, sink()) == -EINVAL) abort();
        pl_export_torch_t *t = NULL;
        if (pl_export_torch_collect_mem(buf, len, &t) == 0 && t) pl_export_torch_write(t, sink());
        pl_export_torch_free(t);
    }
    pl_extract_free(&x);
    pl_report_destroy(r);
    free(framed);
    return 0;
}
