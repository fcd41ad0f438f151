/* tune/torch_snapshot + tune/replay_input: PyTorch memory snapshot fixtures (tools/gen-snapshot-fixtures.py,
 * Python's pickle module, the schema torch/cuda/_memory_viz.py reads) -> replay sequence -> replay / tune.
 * The expected numbers come from each fixture's sidecar JSON, computed by the generator independently of plateau.
 * usage: test_tune_torch_snapshot FIXTURE_DIR (tests/fixtures/snapshots)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/files.h"

#include "replay_input.h"
#include "torch_snapshot.h"
#include "tune.h"

static const char *fixture_dir;

/* a fixture, whole and NUL-terminated */
static char *slurp(const char *name, size_t *len) {
    char *b = pl_test_slurp(fixture_dir, name, len);
    if (!b) fail_msg("cannot read %s/%s", fixture_dir, name);
    return b;
}

/* "key": N at the top level of a sidecar JSON (json.dump indent=1), or inside the object named within. */
static int64_t json_int(const char *json, const char *within, const char *key) {
    const char *p = json;
    char pat[128];
    if (within) {
        snprintf(pat, sizeof pat, "\"%s\": {", within);
        p = strstr(p, pat);
        assert_non_null(p);
    }
    snprintf(pat, sizeof pat, within ? "\n  \"%s\": " : "\n \"%s\": ", key); /* indent 1 per level */
    p = strstr(p, pat);
    if (!p) fail_msg("no %s in the sidecar", key);
    return strtoll(p + strlen(pat), NULL, 10);
}

static void load(const char *name, int device, pl_replay_seq_t *s, pl_torch_snapshot_info_t *info) {
    size_t len;
    char *b = slurp(name, &len), err[1024] = "";
    pl_torch_snapshot_opts_t o = {.device = device};
    int rc = pl_torch_snapshot_read(b, len, name, &o, s, info, err, sizeof err);
    if (rc) fail_msg("%s: rc %d: %s", name, rc, err);
    free(b);
}

static void check_against(const pl_replay_seq_t *s, const char *json, const char *within) {
    assert_int_equal(s->n_allocs, json_int(json, within, "n_allocs"));
    assert_int_equal(s->n_frees, json_int(json, within, "n_frees"));
    assert_int_equal(s->n_probes, json_int(json, within, "n_probes"));
    assert_int_equal(s->n_unmatched_frees, json_int(json, within, "n_unmatched_frees"));
    assert_int_equal(s->n_events, json_int(json, within, "n_events"));
    pl_alloc_config_t cfg;
    char err[256];
    assert_int_equal(pl_alloc_config_parse("", &cfg, err, sizeof err), 0);
    pl_replay_result_t r;
    assert_int_equal(pl_replay_run(s, &cfg, PL_REPLAY_DEFAULT_CAPACITY_BYTES, &r, err, sizeof err), 0);
    assert_int_equal(r.n_ooms, 0);
    assert_int_equal(r.peak_allocated_bytes, json_int(json, within, "peak_allocated_bytes"));
    assert_int_equal(r.peak_requested_bytes, json_int(json, within, "peak_requested_bytes"));
}

/* The same snapshot pickled with protocols 2..5 gives the same sequence and the peaks the generator computed. */
static void test_torch_snapshot_basic(void **state) {
    (void)state;
    char *json = slurp("basic.json", NULL);
    static const char *names[] = {"basic_p2.pickle", "basic_p3.pickle", "basic.pickle", "basic_p5.pickle"};
    for (int k = 0; k < 4; k++) {
        pl_replay_seq_t s;
        pl_torch_snapshot_info_t in;
        load(names[k], -1, &s, &in);
        assert_int_equal(in.protocol, k + 2);
        assert_int_equal(in.n_devices, 2);
        assert_int_equal(in.device, json_int(json, NULL, "device")); /* the device with the most allocations */
        assert_int_equal(s.device, in.device);
        assert_false(in.frees_from_requested);
        assert_int_equal(in.n_oom, 1);
        assert_int_equal(in.n_snapshot, 1);
        assert_int_equal(in.n_segment_alloc, json_int(json, NULL, "n_segment_alloc"));
        assert_true(in.have_segments);
        assert_int_equal(in.n_segments, json_int(json, NULL, "n_segments"));
        assert_int_equal(in.reserved_bytes, json_int(json, NULL, "reserved_bytes"));
        assert_true(in.have_reserved_peak);
        assert_int_equal(in.reserved_peak_bytes, json_int(json, NULL, "reserved_bytes")); /* no segment_free */
        assert_string_equal(in.alloc_conf, "garbage_collection_threshold:0.0");
        assert_true(in.have_expandable);
        assert_false(in.expandable);
        assert_int_equal(s.source, PL_DEV_SRC_ALLOCATOR);
        check_against(&s, json, NULL);
        char sum[2048];
        pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
        assert_non_null(strstr(sum, "PyTorch memory snapshot"));
        assert_non_null(strstr(sum, "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.0"));
        assert_null(strstr(sum, "ring buffer"));
        pl_replay_seq_free(&s);
    }
    /* --device 0: the other trace */
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    load("basic.pickle", 0, &s, &in);
    assert_int_equal(in.device, 0);
    check_against(&s, json, "device0");
    pl_replay_seq_free(&s);
    free(json);
}

/* A wrapped ring buffer: its first frees have no allocation; counted, and the summary says why. */
static void test_torch_snapshot_wrapped(void **state) {
    (void)state;
    char *json = slurp("wrapped.json", NULL);
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    load("wrapped.pickle", -1, &s, &in);
    assert_true(json_int(json, NULL, "n_unmatched_frees") > 0);
    check_against(&s, json, NULL);
    char sum[2048];
    pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
    assert_non_null(strstr(sum, "ring buffer"));
    pl_replay_seq_free(&s);
    free(json);
}

/* Older PyTorch: no free_completed, frees are free_requested. */
static void test_torch_snapshot_requested_only(void **state) {
    (void)state;
    char *json = slurp("requested_only.json", NULL);
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    load("requested_only.pickle", -1, &s, &in);
    assert_true(in.frees_from_requested);
    assert_int_equal(in.n_free_completed, 0);
    assert_false(in.have_segments);
    check_against(&s, json, NULL);
    pl_replay_seq_free(&s);
    free(json);
}

/* The fragmentation fixture: the defaults OOM at 100 MiB on the 12 MiB request (event 45), expandable segments
 * fit, and tune ranks an expandable config first (as for the crafted trace in tune.tune). */
static void test_torch_snapshot_frag_tune(void **state) {
    (void)state;
    char *json = slurp("frag.json", NULL);
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    load("frag.pickle", -1, &s, &in);
    check_against(&s, json, NULL);
    pl_tune_grid_t *g = malloc(sizeof *g);
    char err[512];
    assert_int_equal(pl_tune_grid_parse(NULL, g, err, sizeof err), 0);
    pl_tune_t t;
    assert_int_equal(pl_tune_run(&s, g, (uint64_t)100 << 20, 2, &t, err, sizeof err), 0);
    assert_non_null(strstr(t.entries[0].conf, "expandable_segments:True"));
    assert_int_equal(t.entries[0].res.n_ooms, 0);
    assert_true(t.baseline.res.n_ooms > 0);
    assert_int_equal(t.baseline.res.first_oom_event, 45);
    assert_int_equal(t.baseline.res.first_oom_bytes, 12 << 20);
    pl_tune_free(&t);
    free(g);
    pl_replay_seq_free(&s);
    free(json);
}

/* A snapshot that recorded an OOM: the capacity the run had is reserved + device_free at that OOM (102 MiB for
 * frag_oom), used by default and named; replayed there the defaults fail on the request that failed when
 * recorded and expandable segments fit it. Without segments to anchor reserved, nothing is derived. */
static void test_torch_snapshot_oom_capacity(void **state) {
    (void)state;
    char *json = slurp("frag_oom.json", NULL);
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    load("frag_oom.pickle", -1, &s, &in);
    check_against(&s, json, NULL);
    assert_true(in.have_oom_capacity);
    assert_int_equal(in.oom_reserved_bytes, json_int(json, NULL, "reserved_at_oom_bytes"));
    assert_int_equal(in.oom_device_free_bytes, json_int(json, NULL, "device_free_at_oom_bytes"));
    assert_int_equal(s.capacity_bytes, json_int(json, NULL, "capacity_bytes"));
    char why[128], sum[2048], err[512];
    uint64_t cap = pl_replay_pick_capacity(&s, 0, why, sizeof why);
    assert_int_equal(cap, 102u << 20);
    assert_string_equal(why, "from the snapshot: reserved + free device memory at its first OOM");
    pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
    assert_non_null(
        strstr(sum, "at the first OOM 100.0 MiB reserved and 2.00 MiB free on the device: capacity 102.0 MiB"));
    pl_tune_grid_t *g = malloc(sizeof *g);
    assert_int_equal(pl_tune_grid_parse("expandable_segments=False|True", g, err, sizeof err), 0);
    pl_tune_t t;
    assert_int_equal(pl_tune_run(&s, g, cap, 2, &t, err, sizeof err), 0);
    assert_int_equal(t.capacity_bytes, 102u << 20);
    assert_int_equal(t.baseline.res.first_oom_event, 45); /* the recorded OOM, the last event */
    assert_int_equal(t.baseline.res.first_oom_bytes, 12u << 20);
    assert_string_equal(t.entries[0].conf, "expandable_segments:True");
    assert_int_equal(t.entries[0].res.n_ooms, 0);
    pl_tune_free(&t);
    free(g);
    pl_replay_seq_free(&s);
    free(json);

    /* basic: an oom with device_free and segments: capacity = reserved at that oom + 3 MiB */
    load("basic.pickle", -1, &s, &in);
    assert_true(in.have_oom_capacity);
    assert_int_equal(in.oom_device_free_bytes, 3u << 20);
    assert_true(in.oom_reserved_bytes > 0 && in.oom_reserved_bytes <= in.reserved_peak_bytes);
    assert_int_equal(s.capacity_bytes, in.oom_reserved_bytes + (3u << 20));
    pl_replay_seq_free(&s);
    /* requested_only: an oom, but no segments: not recorded, the default and a hint */
    load("requested_only.pickle", -1, &s, &in);
    assert_int_equal(in.n_oom, 1);
    assert_false(in.have_oom_capacity);
    assert_int_equal(s.capacity_bytes, 0);
    assert_int_equal(pl_replay_pick_capacity(&s, 0, why, sizeof why), PL_REPLAY_DEFAULT_CAPACITY_BYTES);
    assert_string_equal(why, "default: not recorded; use --capacity");
    pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
    assert_non_null(strstr(sum, "the capacity cannot be derived (no 'segments' to anchor the reserved bytes)"));
    pl_replay_seq_free(&s);
    /* frag: no oom, nothing derived, no note */
    load("frag.pickle", -1, &s, &in);
    assert_false(in.have_oom_capacity);
    assert_int_equal(s.capacity_bytes, 0);
    pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
    assert_null(strstr(sum, "capacity"));
    pl_replay_seq_free(&s);
}

static int read_err(const char *name, const void *b, size_t len, int device, char *err, size_t err_len) {
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    pl_torch_snapshot_opts_t o = {.device = device};
    int rc = pl_torch_snapshot_read(b, len, name, &o, &s, &in, err, err_len);
    if (!rc) pl_replay_seq_free(&s);
    return rc;
}

static void test_torch_snapshot_errors(void **state) {
    (void)state;
    char err[1024];
    size_t len;
    char *b = slurp("no_history.pickle", &len);
    assert_int_equal(read_err("nohist", b, len, -1, err, sizeof err), -ENODATA);
    assert_non_null(strstr(err, "nohist: "));
    assert_non_null(strstr(err, "_record_memory_history"));
    free(b);
    b = slurp("basic.pickle", &len);
    assert_int_equal(read_err("b", b, len, 2, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "no device 2"));
    free(b);
    /* pickles of other things */
    static const char list[] = "\x80\x04]."; /* [] */
    assert_int_equal(read_err("l", list, sizeof list - 1, -1, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "holds a list, not a dict"));
    static const char other[] = "\x80\x04}\x8c\x01" "a" "N" "s."; /* {'a': None} */
    assert_int_equal(read_err("o", other, sizeof other - 1, -1, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "neither 'device_traces' nor 'segments'"));
    /* {'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 'x'}]]} */
    static const char badsize[] = "\x80\x04}\x8c\x0d" "device_traces" "]]}(\x8c\x06" "action\x8c\x05" "alloc"
                                  "\x8c\x04" "addrK\x01\x8c\x04" "size\x8c\x01" "xuaas.";
    assert_int_equal(read_err("s", badsize, sizeof badsize - 1, -1, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "entry 0: 'size' is a str, not an int"));
    /* an alloc without an address */
    static const char noaddr[] = "\x80\x04}\x8c\x0d" "device_traces" "]]}(\x8c\x06" "action\x8c\x05" "alloc"
                                 "\x8c\x04" "sizeK\x01uaas.";
    assert_int_equal(read_err("a", noaddr, sizeof noaddr - 1, -1, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "entry 0 has no 'addr'"));
    /* code in a snapshot position is refused by the pickle reader */
    static const char code[] = "\x80\x04}\x8c\x0d" "device_traces" "\x8c\x02os\x8c\x06system\x93s.";
    assert_int_equal(read_err("c", code, sizeof code - 1, -1, err, sizeof err), -ENOTSUP);
    assert_non_null(strstr(err, "c: not a readable PyTorch memory snapshot: offset"));
    assert_non_null(strstr(err, "STACK_GLOBAL"));
}

/* One entry dict shared (memo gets) by 20000 entries, with 2000 keys: refused before the walk turns quadratic. */
static void test_torch_snapshot_sharing_bounded(void **state) {
    (void)state;
    size_t cap = 1 << 20, n = 0;
    unsigned char *p = malloc(cap);
#define PUT(...)                                                                                                   \
    do {                                                                                                           \
        const unsigned char b_[] = {__VA_ARGS__};                                                                  \
        memcpy(p + n, b_, sizeof b_);                                                                              \
        n += sizeof b_;                                                                                            \
    } while (0)
#define PUTS(s)                                                                                                    \
    do {                                                                                                           \
        p[n++] = 0x8c, p[n++] = (unsigned char)strlen(s);                                                          \
        memcpy(p + n, s, strlen(s));                                                                               \
        n += strlen(s);                                                                                            \
    } while (0)
    PUT(0x80, 4, '}');
    PUTS("device_traces");
    PUT(']', ']', '(');
    /* the shared entry: memo 0 */
    PUT('}', 0x94, '(');
    PUTS("action");
    PUTS("alloc");
    PUTS("addr");
    PUT('K', 1);
    PUTS("size");
    PUT('K', 1);
    for (int i = 0; i < 2000; i++) PUT('M', (unsigned char)(i & 0xff), (unsigned char)(i >> 8), 'N');
    PUT('u');
    for (int i = 0; i < 20000; i++) PUT('h', 0);
    PUT('e', 'a', 's', '.');
    char err[1024];
    assert_true(n < cap);
    assert_int_equal(read_err("shared", p, n, -1, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "shares the same dicts"));
    free(p);
#undef PUT
#undef PUTS
}

/* Truncated snapshots fail cleanly at every length. */
static void test_torch_snapshot_truncated(void **state) {
    (void)state;
    size_t len;
    char *b = slurp("frag.pickle", &len), err[1024];
    for (size_t n = 0; n < len; n++) {
        char *c = malloc(n ? n : 1);
        memcpy(c, b, n);
        int rc = read_err("t", c, n, -1, err, sizeof err);
        if (rc != -EBADMSG) fail_msg("cut at %zu: rc %d: %s", n, rc, err);
        free(c);
    }
    free(b);
}

/* pl_replay_load sniffs files: pickle, CSV, and the trace reader's errors for everything else. */
static void test_replay_input_sniff(void **state) {
    (void)state;
    char path[1024], err[1024];
    pl_replay_seq_t s;
    pl_replay_input_t *in = malloc(sizeof *in);
    snprintf(path, sizeof path, "%s/frag.pickle", fixture_dir);
    assert_int_equal(pl_replay_load(path, NULL, &s, in, err, sizeof err), 0);
    assert_int_equal(in->format, PL_REPLAY_FORMAT_TORCH_SNAPSHOT);
    assert_non_null(strstr(in->summary, "format: PyTorch memory snapshot"));
    assert_string_equal(s.file, path);
    pl_replay_seq_free(&s);
    snprintf(path, sizeof path, "%s/../rmm/basic_crlf.csv", fixture_dir);
    assert_int_equal(pl_replay_load(path, NULL, &s, in, err, sizeof err), 0);
    assert_int_equal(in->format, PL_REPLAY_FORMAT_RMM_LOG);
    assert_non_null(strstr(in->summary, "format: RMM"));
    pl_replay_seq_free(&s);
    /* a limit on the input size */
    pl_replay_load_opts_t o = {.device = -1, .max_input_bytes = 100};
    assert_int_equal(pl_replay_load(path, &o, &s, in, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "input limit of 100 bytes"));
    /* neither: the trace reader's message, naming the file and the formats accepted */
    snprintf(path, sizeof path, "%s/basic.json", fixture_dir);
    assert_int_equal(pl_replay_load(path, NULL, &s, in, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "basic.json"));
    assert_non_null(strstr(err, "PyTorch memory snapshot"));
    assert_int_equal(pl_replay_load("/nonexistent/x.pickle", NULL, &s, in, err, sizeof err), -ENOENT);
    /* in memory */
    size_t len;
    char *b = slurp("frag.pickle", &len);
    assert_int_equal(pl_replay_load_mem(b, len, "mem", NULL, &s, in, err, sizeof err), 0);
    assert_int_equal(in->format, PL_REPLAY_FORMAT_TORCH_SNAPSHOT);
    pl_replay_seq_free(&s);
    free(b);
    assert_string_equal(pl_replay_format_name(PL_REPLAY_FORMAT_RMM_LOG), "RMM log");
    free(in);
}

int main(int argc, char **argv) {
    fixture_dir = argc > 1 ? argv[1] : "tests/fixtures/snapshots";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_snapshot_basic),          cmocka_unit_test(test_torch_snapshot_wrapped),
        cmocka_unit_test(test_torch_snapshot_requested_only), cmocka_unit_test(test_torch_snapshot_frag_tune),
        cmocka_unit_test(test_torch_snapshot_errors),         cmocka_unit_test(test_torch_snapshot_sharing_bounded),
        cmocka_unit_test(test_torch_snapshot_truncated),      cmocka_unit_test(test_replay_input_sniff),
        cmocka_unit_test(test_torch_snapshot_oom_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
