/* Packed records (trace format 2.0, tracer/core/pack.c): a chunk of ordinary records packed in place decodes to
 * the same records (every field, extreme and NA values, many threads), is much shorter for a training loop's
 * per-step records, unpacks to the same bytes; ordinary (1.9) payloads decode as before; damaged packed records are
 * refused and unknown packed kinds skipped. A trace written by the writer is packed and reads back whole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "event.h"
#include "pack.h"
#include "records.h"
#include "writer.h"
#include "../common/tmpdir.h"

#define CAP (1u << 20)
static uint8_t ordinary[CAP], packed[CAP], back[CAP];
static pl_trace_record_t recs[20000];

typedef struct {
    size_t len;
    uint32_t n;
} payload_t;

static void put(payload_t *p, const pl_trace_record_t *r) {
    assert_true(p->n < sizeof recs / sizeof recs[0]);
    size_t m = pl_event_encode(r, ordinary + p->len, CAP - p->len);
    assert_true(m > 0);
    p->len += m;
    recs[p->n++] = *r;
}

/* A training loop's records as a bounded trace holds them: per step a step record, its heap and rss totals, a
 * periodic sample of each, and sampled allocations of several threads that live past their step. */
static payload_t loop_payload(unsigned steps, unsigned n_threads) {
    payload_t p = {0};
    pl_trace_record_t r;
    int64_t t = 5000000000LL;
    uint64_t n_alloc = 1000000, live = 1 << 28;
    for (unsigned s = 1; s <= steps; s++) {
        memset(&r, 0, sizeof r);
        t += 87000000 + (s * 7919) % 1000000;
        r.type = PL_REC_HEAP;
        r.t_ns = t;
        live += (s * 104729) % 65536 - 30000;
        n_alloc += 4000 + s % 97;
        r.u.heap = (pl_rec_heap_t){0, (int64_t)live, 40000 + s % 13, n_alloc, n_alloc - 40000, n_alloc * 300,
                                   1 << 26, 3};
        put(&p, &r);
        r.type = PL_REC_RSS;
        r.t_ns = t + 30000;
        r.u.rss = (pl_rec_rss_t){0, live + (1 << 26), 1 << 27, 4096, PL_TRACE_NA, live + (1 << 27), PL_TRACE_NA,
                                 PL_TRACE_NA};
        put(&p, &r);
        for (unsigned k = 0; k < n_threads; k++) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HOST_ALLOC;
            r.t_ns = t + 40000 + k;
            r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x7f3a00000000ull + ((uint64_t)k << 32) + s * 4128,
                                                   .size = 4128, .stack_id = 17 + k, .tid = 31000 + k * 3,
                                                   .kind = PL_HOST_MALLOC, .call_ordinal = 5000ull * s + k};
            put(&p, &r);
            if (s % 3 == 0) {
                r.type = PL_REC_HOST_FREE;
                r.t_ns += 100;
                r.u.host_free = (pl_rec_host_free_t){.addr = 0x7f3a00000000ull + ((uint64_t)k << 32) + (s - 2) * 4128,
                                                     .tid = 31000 + k * 3};
                put(&p, &r);
            }
        }
        memset(&r, 0, sizeof r);
        t += 1000000;
        r.type = PL_REC_STEP;
        r.t_ns = t;
        r.u.step = (pl_rec_step_t){s, PL_STEP_OPTIMIZER};
        put(&p, &r);
        r.type = PL_REC_HEAP;
        r.t_ns = t + 10;
        r.u.heap = (pl_rec_heap_t){s, (int64_t)live, 40000 + s % 13, n_alloc, n_alloc - 40000, n_alloc * 300,
                                   1 << 26, 3};
        put(&p, &r);
        r.type = PL_REC_RSS;
        r.t_ns = t + 20000;
        r.u.rss = (pl_rec_rss_t){s, live + (1 << 26), 1 << 27, 4096, PL_TRACE_NA, live + (1 << 27), PL_TRACE_NA,
                                 PL_TRACE_NA};
        put(&p, &r);
    }
    return p;
}

/* Decode len bytes of buf with a fresh context: every record must equal recs[i]. */
static void assert_decodes_to_recs(const uint8_t *buf, size_t len, uint32_t n) {
    pl_pack_ctx_t x;
    pl_pack_reset(&x);
    size_t off = 0;
    uint32_t i = 0;
    while (off < len) {
        pl_trace_record_t d;
        size_t used = 0;
        assert_int_equal(pl_pack_decode(&x, buf + off, len - off, &d, &used), 0);
        assert_true(i < n);
        if (!rec_equal(&d, &recs[i])) fail_msg("record %u (type %d) differs after packing", i, recs[i].type);
        off += used;
        i++;
    }
    assert_int_equal(off, len);
    assert_int_equal(i, n);
}

static void test_pack_loop_round_trip_and_size(void **state) {
    (void)state;
    payload_t p = loop_payload(300, 3);
    memcpy(packed, ordinary, p.len);
    assert_false(pl_pack_any(ordinary, p.len)); /* a 1.9 chunk: the reader's fast path */
    size_t len = pl_pack_chunk(packed, p.len);
    assert_true(pl_pack_any(packed, len));
    assert_decodes_to_recs(packed, len, p.n);
    /* heap and rss 76 -> ~15-25 bytes, host_alloc 48 -> ~15, host_free 24 -> ~8, step 24 -> ~7 */
    if (len * 10 > p.len * 3) fail_msg("packed %zu of %zu bytes: more than 0.3x", len, p.len);
    uint32_t n;
    size_t blen = pl_pack_unpack(packed, len, back, CAP, &n);
    assert_int_equal(n, p.n);
    assert_int_equal(blen, p.len);
    assert_memory_equal(back, ordinary, p.len);
}

/* Values a difference can overflow on, NA everywhere, steps going back, times going back, more threads than the
 * context holds, and every other record kind between them (kept ordinary, still moving the time base). */
static void test_pack_extremes_and_every_kind(void **state) {
    (void)state;
    payload_t p = {0};
    pl_trace_record_t r;
    for (unsigned seed = 0; seed < 3; seed++)
        for (int type = 1; type <= PL_REC_TYPE_MAX; type++) {
            rec_sample((pl_rec_type_t)type, seed, &r);
            put(&p, &r);
        }
    static const uint64_t u[] = {0, 1, PL_TRACE_NA, PL_TRACE_NA - 1, 1ull << 63, (1ull << 63) - 1, 12345};
    static const int64_t i[] = {0, -1, PL_TRACE_MAX_T_NS, -PL_TRACE_MAX_T_NS, 1, -PL_TRACE_MAX_T_NS + 7, 99};
    static const int64_t t[] = {0, PL_TRACE_MAX_T_NS, 1, PL_TRACE_MAX_T_NS - 1, 77, 0, 5};
    for (unsigned k = 0; k < 7; k++) {
        memset(&r, 0, sizeof r);
        r.t_ns = t[k];
        r.type = PL_REC_HEAP;
        r.u.heap = (pl_rec_heap_t){u[k],   i[k],           i[6 - k],       u[6 - k],
                                   u[k],   u[(k + 3) % 7], i[(k + 1) % 7], i[(k + 2) % 7]};
        put(&p, &r);
        r.type = PL_REC_RSS;
        r.u.rss = (pl_rec_rss_t){u[(k + 1) % 7], u[k], u[6 - k], u[(k + 2) % 7], u[(k + 3) % 7], u[(k + 4) % 7],
                                 u[(k + 5) % 7], u[(k + 6) % 7]};
        put(&p, &r);
        r.type = PL_REC_STEP;
        r.u.step = (pl_rec_step_t){u[(k + 2) % 7], UINT32_MAX - k};
        put(&p, &r);
    }
    for (unsigned k = 0; k < 3 * PL_PACK_THREADS; k++) { /* threads come back after their slot was taken */
        memset(&r, 0, sizeof r);
        r.t_ns = 1000 + k;
        r.type = PL_REC_HOST_ALLOC;
        uint32_t tid = k % 2 ? UINT32_MAX - (k % 20) : k % 20;
        r.u.host_alloc = (pl_rec_host_alloc_t){.addr = u[k % 7] ^ k, .size = u[(k + 1) % 7], .stack_id = UINT32_MAX - k,
                                               .tid = tid, .kind = k % 5,
                                               .call_ordinal = k % 4 ? u[(k + 2) % 7] : PL_TRACE_NA};
        put(&p, &r);
        r.type = PL_REC_HOST_FREE;
        r.u.host_free = (pl_rec_host_free_t){.addr = u[(k + 4) % 7] + k, .tid = tid};
        put(&p, &r);
    }
    memcpy(packed, ordinary, p.len);
    size_t len = pl_pack_chunk(packed, p.len);
    assert_true(len < p.len);
    assert_decodes_to_recs(packed, len, p.n);
    uint32_t n;
    assert_int_equal(pl_pack_unpack(packed, len, back, CAP, &n), p.len);
    assert_memory_equal(back, ordinary, p.len);
}

/* A 1.9 payload (ordinary records only) decodes through the packed reader exactly as through the ordinary one. */
static void test_pack_ordinary_payload_reads_as_before(void **state) {
    (void)state;
    payload_t p = loop_payload(20, 2);
    assert_decodes_to_recs(ordinary, p.len, p.n);
}

/* Bytes after a record that does not decode stay as they came, so a reader stops where it would have. */
static void test_pack_keeps_a_damaged_tail(void **state) {
    (void)state;
    payload_t p = loop_payload(4, 1);
    memcpy(packed, ordinary, p.len);
    size_t last = p.len - 76;           /* the last record is a 76-byte rss: its length now runs past the payload */
    memcpy(packed + last + 2, &(uint16_t){200}, 2);
    size_t len = pl_pack_chunk(packed, p.len);
    assert_memory_equal(packed + len - 76, ordinary + last, 2);
    assert_int_equal(packed[len - 76 + 2], 200);
    assert_memory_equal(packed + len - 76 + 4, ordinary + last + 4, 72);
}

static void test_pack_refuses_damage_and_skips_unknown_kinds(void **state) {
    (void)state;
    pl_pack_ctx_t x;
    pl_trace_record_t d;
    size_t used;
    payload_t p = {0};
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_HEAP;
    r.t_ns = 123456789;
    r.u.heap = (pl_rec_heap_t){3, 1 << 20, 100, 5000, 4900, 1 << 30, 0, 0};
    put(&p, &r);
    memcpy(packed, ordinary, p.len);
    size_t len = pl_pack_chunk(packed, p.len);
    assert_true(len < p.len);
    assert_int_equal(packed[0], PL_PACK_TYPE_BASE + PL_REC_HEAP);
    for (size_t cut = 0; cut < len; cut++) { /* a record cut anywhere is refused: its length says more */
        pl_pack_reset(&x);
        memcpy(back, packed, len);
        uint16_t l16 = (uint16_t)cut;
        memcpy(back + 2, &l16, 2);
        assert_int_equal(pl_pack_decode(&x, back, len, &d, &used), -EBADMSG);
    }
    /* an 11-byte varint (more than 64 bits) */
    uint8_t v[32] = {PL_PACK_TYPE_BASE + PL_REC_STEP, 0, 16, 0};
    for (int k = 4; k < 15; k++) v[k] = 0xff;
    v[15] = 0x01;
    pl_pack_reset(&x);
    assert_int_equal(pl_pack_decode(&x, v, 16, &d, &used), -EBADMSG);
    /* a time before 0, and a heap total past 2^62 - 1: malformed as in an ordinary record */
    uint8_t neg[] = {PL_PACK_TYPE_BASE + PL_REC_STEP, 0, 7, 0, 0x01, 0x02, 0x00};
    pl_pack_reset(&x);
    assert_int_equal(pl_pack_decode(&x, neg, sizeof neg, &d, &used), -EBADMSG);
    uint8_t big[] = {PL_PACK_TYPE_BASE + PL_REC_HEAP, 0, 22, 0, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80,
                     0x80, 0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0, 0, 0};
    pl_pack_reset(&x);
    big[15] = 0x00; big[14] = 0x7f; /* the same record with live_bytes just under 2^62: accepted */
    assert_int_equal(pl_pack_decode(&x, big, sizeof big, &d, &used), 0);
    big[14] = 0x80; big[15] = 0x01;
    pl_pack_reset(&x);
    assert_int_equal(pl_pack_decode(&x, big, sizeof big, &d, &used), -EBADMSG);
    /* a well-framed packed kind this reader does not know is skipped by its length; the context is unchanged */
    uint8_t unk[] = {PL_PACK_TYPE_BASE + 30, 0, 6, 0, 0x55, 0x66};
    pl_pack_reset(&x);
    assert_int_equal(pl_pack_decode(&x, unk, sizeof unk, &d, &used), 1);
    assert_int_equal(used, 6);
    assert_int_equal(x.t_ns, 0);
    uint8_t short_frame[] = {PL_PACK_TYPE_BASE + 30, 0, 3, 0};
    assert_int_equal(pl_pack_decode(&x, short_frame, sizeof short_frame, &d, &used), -EBADMSG);
}

/* Through the writer and the reader: the file holds packed records, and they read back as written. */
static void test_pack_writer_file_reads_back(void **state) {
    (void)state;
    char dir[256], path[300];
    assert_int_equal(pl_test_tmpdir_make(dir, sizeof dir, "pack"), 0);
    snprintf(path, sizeof path, "%s/1.0.pltrace", dir);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = 1,
                           .start_realtime_ns = 1, .start_mono_ns = 2};
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, NULL, &w), 0);
    payload_t p = loop_payload(200, 2);
    for (uint32_t i = 0; i < p.n; i++) assert_int_equal(pl_writer_emit(w, &recs[i]), 0);
    pl_writer_close(w);
    uint64_t file = pl_writer_bytes_written(w);
    pl_writer_destroy(w);
    if (file * 10 > p.len * 3) fail_msg("file %llu bytes for %zu bytes of records", (unsigned long long)file, p.len);
    pl_trace_reader_t *rd;
    assert_int_equal(pl_trace_open(path, &rd), 0);
    pl_trace_record_t d;
    uint32_t i = 0;
    while (pl_trace_next(rd, &d) == 1) {
        assert_true(i < p.n);
        if (!rec_equal(&d, &recs[i])) fail_msg("record %u differs", i);
        i++;
    }
    assert_string_equal(pl_trace_error(rd), "");
    assert_int_equal(i, p.n);
    pl_trace_close(rd);
    assert_int_equal(pl_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_loop_round_trip_and_size),
        cmocka_unit_test(test_pack_extremes_and_every_kind),
        cmocka_unit_test(test_pack_ordinary_payload_reads_as_before),
        cmocka_unit_test(test_pack_keeps_a_damaged_tail),
        cmocka_unit_test(test_pack_refuses_damage_and_skips_unknown_kinds),
        cmocka_unit_test(test_pack_writer_file_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
