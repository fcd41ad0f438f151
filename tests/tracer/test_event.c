/* Record codec: every record type survives encode/decode field for field; malformed input is rejected. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "event.h"
#include "records.h"

static void test_event_round_trip_every_type(void **state) {
    (void)state;
    for (int t = 1; t <= PL_REC_TYPE_MAX; t++) {
        pl_trace_record_t in, out;
        rec_sample((pl_rec_type_t)t, 3, &in);
        uint8_t buf[4096];
        size_t n = pl_event_encode(&in, buf, sizeof buf);
        assert_true(n >= PL_REC_HEADER_BYTES);
        size_t used = 0;
        assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
        assert_int_equal(used, n);
        assert_int_equal(out.type, t);
        assert_true(rec_equal(&in, &out));
        assert_string_not_equal(pl_trace_type_name((pl_rec_type_t)t), "unknown");
    }
    /* Spot-check decoded fields directly, not only through re-encoding. */
    pl_trace_record_t in, out;
    rec_sample(PL_REC_PROCESS_START, 0, &in);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.process.argv[1], "train.py");
    assert_string_equal(out.u.process.exe, "/usr/bin/python3");
    assert_int_equal(out.u.process.rank, -1);
    rec_sample(PL_REC_ALLOC_STATS, 0, &in);
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_true(out.u.alloc_stats.fragmentation == 0.25);
}

static void test_event_encode_refuses_small_buffer(void **state) {
    (void)state;
    pl_trace_record_t in;
    rec_sample(PL_REC_STACK, 1, &in);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf);
    for (size_t cap = 0; cap < n; cap++) assert_int_equal(pl_event_encode(&in, buf, cap), 0);
    assert_int_equal(pl_event_encode(&in, buf, n), n);
}

static void test_event_decode_rejects_malformed(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_MARK, 1, &in);
    uint8_t buf[256];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    /* Every truncation of the record is refused. */
    for (size_t len = 0; len < n; len++) assert_int_equal(pl_event_decode(buf, len, &out, &used), -EBADMSG);
    /* A string without its NUL is refused. */
    uint8_t bad[256];
    memcpy(bad, buf, n);
    bad[n - 1] = 'x';
    assert_int_equal(pl_event_decode(bad, n, &out, &used), -EBADMSG);
    /* A stack claiming too many frames is refused. */
    rec_sample(PL_REC_STACK, 1, &in);
    uint8_t sb[4096];
    size_t ns = pl_event_encode(&in, sb, sizeof sb);
    uint32_t many = PL_TRACE_MAX_FRAMES + 1;
    memcpy(sb + PL_REC_HEADER_BYTES + 4, &many, 4);
    assert_int_equal(pl_event_decode(sb, ns, &out, &used), -EBADMSG);
    /* An unknown type is skipped by its length, not an error. */
    memcpy(bad, buf, n);
    uint16_t t = 999;
    memcpy(bad, &t, 2);
    assert_int_equal(pl_event_decode(bad, n, &out, &used), 1);
    assert_int_equal(used, n);
}

/* Times and signed values beyond +-2^62 (PL_TRACE_MAX_T_NS) are malformed: a reader never hands one on, so every
 * difference or sum of two is defined (the report's arithmetic on fuzzed timestamps overflowed before). */
static void test_event_decode_rejects_extreme_values(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    uint8_t buf[256];
    size_t used;
    rec_sample(PL_REC_STEP, 1, &in);
    const int64_t times[] = {-1, INT64_MIN, PL_TRACE_MAX_T_NS + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        in.t_ns = times[i];
        size_t n = pl_event_encode(&in, buf, sizeof buf);
        assert_int_equal(pl_event_decode(buf, n, &out, &used), -EBADMSG);
    }
    in.t_ns = PL_TRACE_MAX_T_NS;
    size_t n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_true(out.t_ns == PL_TRACE_MAX_T_NS);
    /* a signed field inside a record: the heap's live bytes may be negative, but not beyond -2^62 */
    rec_sample(PL_REC_HEAP, 1, &in);
    in.u.heap.live_bytes = -PL_TRACE_MAX_T_NS;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_true(out.u.heap.live_bytes == -PL_TRACE_MAX_T_NS);
    in.u.heap.live_bytes = INT64_MIN;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), -EBADMSG);
    /* the header's start times */
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 1, .start_mono_ns = INT64_MIN + 5}, o;
    uint8_t b[PL_TRACE_HEADER_BYTES];
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), -EBADMSG);
    h.start_mono_ns = 1;
    h.start_realtime_ns = INT64_MAX;
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), -EBADMSG);
    h.start_realtime_ns = PL_TRACE_MAX_T_NS;
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), 0);
}

/* 1.1: module identity fields are appended; a 1.0 module record (without them) still decodes, with defaults. */
static void test_event_module_identity_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_MODULE, 0, &in);
    uint8_t buf[512];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.module.build_id, "ff911b3ce9381ae2a10014abbd63ff257d1ef8a4");
    assert_int_equal(out.u.module.file_size, 21912);
    assert_int_equal(out.u.module.file_mtime_ns, 1795309713821609749LL);
    /* the 1.0 layout: header, u32 id, u64 base, str path; nothing after */
    size_t old_len = PL_REC_HEADER_BYTES + 4 + 8 + 2 + strlen("/bin/x") + 1;
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(used, old_len);
    assert_string_equal(out.u.module.path, "/bin/x");
    assert_string_equal(out.u.module.build_id, "");
    assert_true(out.u.module.file_size == PL_TRACE_NA);
    assert_int_equal(out.u.module.file_mtime_ns, 0);
    /* a 1.1 record cut inside its appended fields is malformed, not silently defaulted */
    len16 = (uint16_t)(old_len + 5);
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len + 5, &out, &used), -EBADMSG);
}

/* 1.2: process_start appends the host allocator; a 1.1 process record (without it) decodes with "". */
static void test_event_process_allocator_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_PROCESS_START, 0, &in);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.process.host_allocator, "jemalloc");
    assert_string_equal(out.u.process.host_allocator_version, "5.3.0-0-g54eaed1d8b56");
    assert_string_equal(out.u.process.argv[3], in.u.process.argv[3]);
    /* the 1.1 layout ends after the last argv string */
    size_t old_len = n - (2 + strlen("jemalloc") + 1) - (2 + strlen("5.3.0-0-g54eaed1d8b56") + 1) -
                     (2 + strlen(in.u.process.node) + 1); /* 1.7's node */
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(used, old_len);
    assert_int_equal(out.u.process.n_argv, 4);
    assert_string_equal(out.u.process.host_allocator, "");
    assert_string_equal(out.u.process.host_allocator_version, "");
    /* cut inside the appended fields: malformed */
    len16 = (uint16_t)(old_len + 3);
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len + 3, &out, &used), -EBADMSG);
    /* a record written without the fields set encodes them as "" (never a NULL dereference) */
    in.u.process.host_allocator = NULL;
    in.u.process.host_allocator_version = NULL;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.process.host_allocator, "");
}

/* 1.7: process_start appends the host name; a 1.6 process record (without it) decodes with "", and a name longer
 * than 63 bytes is cut there. */
static void test_event_process_node_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_PROCESS_START, 2, &in);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.process.node, "gpu-node-07");
    assert_string_equal(out.u.process.host_allocator, "jemalloc");
    /* the 1.6 layout ends after host_allocator_version */
    size_t old_len = n - (2 + strlen("gpu-node-07") + 1);
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(used, old_len);
    assert_string_equal(out.u.process.host_allocator_version, "5.3.0-0-g54eaed1d8b56");
    assert_string_equal(out.u.process.node, "");
    /* cut inside the appended field: malformed */
    len16 = (uint16_t)(old_len + 1);
    memcpy(buf + 2, &len16, 2);
    assert_int_equal(pl_event_decode(buf, old_len + 1, &out, &used), -EBADMSG);
    char longname[100];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    in.u.process.node = longname;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_int_equal(strlen(out.u.process.node), 63);
    in.u.process.node = NULL; /* unset: encoded as "" */
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_string_equal(out.u.process.node, "");
}

/* 1.3: host_alloc appends the thread's call ordinal; a 1.2 host_alloc record (without it) decodes with NA. */
static void test_event_host_alloc_ordinal_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_HOST_ALLOC, 4, &in);
    uint8_t buf[256];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(n, PL_REC_HEADER_BYTES + 8 + 8 + 4 + 4 + 4 + 8);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_true(out.u.host_alloc.call_ordinal == 5000015ull);
    assert_int_equal(out.u.host_alloc.stack_id, 7);
    assert_int_equal(out.u.host_alloc.kind, PL_HOST_CALLOC);
    /* PL_TRACE_NA itself survives the round trip */
    in.u.host_alloc.call_ordinal = PL_TRACE_NA;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_true(out.u.host_alloc.call_ordinal == PL_TRACE_NA);
    /* the 1.2 layout ends after kind */
    in.u.host_alloc.call_ordinal = 77;
    n = pl_event_encode(&in, buf, sizeof buf);
    size_t old_len = n - 8;
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    memset(&out, 0, sizeof out);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(used, old_len);
    assert_true(out.u.host_alloc.addr == in.u.host_alloc.addr);
    assert_int_equal(out.u.host_alloc.tid, 4242);
    assert_true(out.u.host_alloc.call_ordinal == PL_TRACE_NA);
    /* cut inside the ordinal: malformed, not silently defaulted */
    for (size_t cut = 1; cut < 8; cut++) {
        len16 = (uint16_t)(old_len + cut);
        memcpy(buf + 2, &len16, 2);
        assert_int_equal(pl_event_decode(buf, old_len + cut, &out, &used), -EBADMSG);
    }
    /* a later version's appended bytes after the ordinal are skipped */
    len16 = (uint16_t)(n + 4);
    memcpy(buf + 2, &len16, 2);
    memset(buf + n, 0xab, 4);
    assert_int_equal(pl_event_decode(buf, n + 4, &out, &used), 0);
    assert_int_equal(used, n + 4);
    assert_true(out.u.host_alloc.call_ordinal == 77);
}

/* 1.5: stack records append Python frame ids; a 1.3 stack record (without them) decodes with none; more than fit
 * beside the native frames is malformed; a pyframe record round-trips its strings. */
static void test_event_stack_python_frames_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_STACK, 3, &in); /* 8 native frames, 3 Python frames */
    assert_int_equal(in.u.stack.n_py, 3);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(n, PL_REC_HEADER_BYTES + 4 + 4 + 8 * 8 + 4 + 3 * 4);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_int_equal(out.u.stack.n_frames, 8);
    assert_int_equal(out.u.stack.n_py, 3);
    assert_int_equal(out.u.stack.py[0], 4);
    assert_int_equal(out.u.stack.py[2], 6);
    /* the 1.3 layout ends after the pcs */
    size_t old_len = n - 4 - 3 * 4;
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    memset(&out, 0xff, sizeof out);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(out.u.stack.n_frames, 8);
    assert_int_equal(out.u.stack.n_py, 0);
    /* n_frames + n_py over the limit */
    in.u.stack.n_py = PL_TRACE_MAX_FRAMES - 8 + 1;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), -EBADMSG);
    rec_sample(PL_REC_PYFRAME, 0, &in);
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_int_equal(out.u.pyframe.pyframe_id, 1);
    assert_int_equal(out.u.pyframe.line, 42);
    assert_string_equal(out.u.pyframe.file, "/home/u/train.py");
    assert_string_equal(out.u.pyframe.function, "Trainer.train_epoch");
}

/* 1.9: retention records append the storages reachable from the holder; a 1.8 record (without them) decodes with
 * none; more than PL_RETENTION_MAX_RANGES is malformed. */
static void test_event_retention_ranges_and_old_records(void **state) {
    (void)state;
    pl_trace_record_t in, out;
    rec_sample(PL_REC_RETENTION, 3, &in);
    assert_int_equal(in.u.retention.n_ranges, 3);
    uint8_t buf[4096];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_int_equal(out.u.retention.n_ranges, 3);
    assert_true(out.u.retention.range_addr[2] == 0x7f0000021000ull);
    assert_true(out.u.retention.range_bytes[2] == 4098);
    size_t old_len = n - 4 - 3 * 16; /* the 1.8 layout ends after fix */
    uint16_t len16 = (uint16_t)old_len;
    memcpy(buf + 2, &len16, 2);
    memset(&out, 0xff, sizeof out);
    assert_int_equal(pl_event_decode(buf, old_len, &out, &used), 0);
    assert_int_equal(out.u.retention.n_ranges, 0);
    assert_string_equal(out.u.retention.fix, in.u.retention.fix);
    in.u.retention.n_ranges = PL_RETENTION_MAX_RANGES + 1;
    n = pl_event_encode(&in, buf, sizeof buf);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), -EBADMSG);
}

/* Frame symbols are not cut at the generic 4 KiB string limit: deep C++ template names survive whole. */
static void test_event_long_frame_symbol_whole(void **state) {
    (void)state;
    static char sym[20001];
    for (size_t i = 0; i < sizeof sym - 1; i++) sym[i] = (char)('a' + i % 26);
    sym[sizeof sym - 1] = 0;
    pl_trace_record_t in = {.type = PL_REC_FRAME, .t_ns = 1}, out;
    in.u.frame = (pl_rec_frame_t){.pc = 1, .module_id = 1, .module_offset = 1, .symbol = sym};
    static uint8_t buf[32768];
    size_t n = pl_event_encode(&in, buf, sizeof buf), used;
    assert_true(n > sizeof sym);
    assert_int_equal(pl_event_decode(buf, n, &out, &used), 0);
    assert_int_equal(strlen(out.u.frame.symbol), sizeof sym - 1);
    assert_string_equal(out.u.frame.symbol, sym);
}

static void test_event_header_round_trip_and_checks(void **state) {
    (void)state;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 12, .ppid = 1, .exec_seq = 2,
                           .start_realtime_ns = 5, .start_mono_ns = 6}, o;
    uint8_t b[PL_TRACE_HEADER_BYTES];
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), 0);
    assert_int_equal(o.pid, 12);
    assert_int_equal(o.exec_seq, 2);
    assert_int_equal(o.start_mono_ns, 6);
    assert_int_equal(o.version_minor, 0); /* a writer that does not set it: a 1.0 file */
    h.version_minor = PL_TRACE_VERSION_MINOR;
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), 0);
    assert_int_equal(o.version_minor, PL_TRACE_VERSION_MINOR);
    assert_true(o.run_id == 0); /* none given: the reserved bytes of older files */
    h.run_id = 0x0123456789abcdefull;
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), 0);
    assert_true(o.run_id == 0x0123456789abcdefull);
    assert_int_equal(o.pid, 12);
    b[20] ^= 1;
    assert_int_equal(pl_event_header_decode(b, &o), -EBADMSG);
    h.version = PL_TRACE_VERSION + 1;
    pl_event_header_encode(&h, b);
    assert_int_equal(pl_event_header_decode(b, &o), -EPROTONOSUPPORT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_round_trip_every_type),
        cmocka_unit_test(test_event_encode_refuses_small_buffer),
        cmocka_unit_test(test_event_decode_rejects_malformed),
        cmocka_unit_test(test_event_decode_rejects_extreme_values),
        cmocka_unit_test(test_event_module_identity_and_old_records),
        cmocka_unit_test(test_event_process_allocator_and_old_records),
        cmocka_unit_test(test_event_process_node_and_old_records),
        cmocka_unit_test(test_event_host_alloc_ordinal_and_old_records),
        cmocka_unit_test(test_event_stack_python_frames_and_old_records),
        cmocka_unit_test(test_event_long_frame_symbol_whole),
        cmocka_unit_test(test_event_header_round_trip_and_checks),
        cmocka_unit_test(test_event_retention_ranges_and_old_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
