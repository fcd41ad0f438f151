/* tune/replay: sequence builder, extraction from traces (recorded in-process through the allocator's hook, and
 * crafted), round trip against the recorded stats, the fragmentation OOM, bad input, determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay.h"
#include "test_replay_synth.h"

static char tmp[512];

static void path_in(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", tmp, name); }

static void test_replay_builder_pairs(void **state) {
    (void)state;
    pl_replay_seq_t s;
    pl_replay_seq_init(&s, 0);
    assert_int_equal(pl_replay_seq_alloc(&s, 0x1000, 100, 0), 0);
    assert_int_equal(pl_replay_seq_alloc(&s, 0x2000, 200, 7), 0);
    assert_int_equal(pl_replay_seq_free_addr(&s, 0x1000), 0);
    assert_int_equal(pl_replay_seq_alloc(&s, 0x3000, 300, 0), 0); /* reuses slot of 0x1000 */
    assert_int_equal(pl_replay_seq_free_addr(&s, 0x9999), 0);     /* unknown: counted, skipped */
    assert_int_equal(pl_replay_seq_alloc(&s, 0x2000, 50, 7), 0);  /* its free was lost: implicit free first */
    assert_int_equal(s.n_slots, 2);
    assert_int_equal(s.n_allocs, 4);
    assert_int_equal(s.n_frees, 1);
    assert_int_equal(s.n_unmatched_frees, 1);
    assert_int_equal(s.n_implicit_frees, 1);
    assert_int_equal(s.n_streams, 2);
    assert_int_equal(s.n_events, 6);
    assert_int_equal(s.ev[3].kind, PL_REPLAY_ALLOC);
    assert_int_equal(s.ev[3].slot, s.ev[0].slot);
    assert_int_equal(s.ev[4].kind, PL_REPLAY_FREE);
    assert_int_equal(s.ev[4].slot, s.ev[1].slot);
    assert_int_equal(s.ev[5].stream, 1);
    pl_replay_seq_free(&s);
}

/* Many live addresses: the hash map grows, deletes with backward shift and never loses a pairing. */
static void test_replay_builder_many(void **state) {
    (void)state;
    pl_replay_seq_t s;
    pl_replay_seq_init(&s, 0);
    const uint64_t n = 20000;
    for (uint64_t i = 0; i < n; i++) assert_int_equal(pl_replay_seq_alloc(&s, 0x100000 + i * 512, 512, 0), 0);
    for (uint64_t i = 0; i < n; i += 2) assert_int_equal(pl_replay_seq_free_addr(&s, 0x100000 + i * 512), 0);
    for (uint64_t i = 1; i < n; i += 2) assert_int_equal(pl_replay_seq_free_addr(&s, 0x100000 + i * 512), 0);
    assert_int_equal(s.n_frees, n);
    assert_int_equal(s.n_unmatched_frees, 0);
    assert_int_equal(s.n_slots, n);
    /* every free names the slot of its own allocation */
    for (uint64_t i = 0; i < n; i += 2) assert_int_equal(s.ev[n + i / 2].slot, s.ev[i].slot);
    pl_replay_seq_free(&s);
}

static void test_replay_limit(void **state) {
    (void)state;
    char p[600], err[512];
    path_in(p, sizeof p, "limit.pltrace");
    unlink(p);
    assert_int_equal(rs_write_frag(p, true), 0);
    pl_replay_seq_t s;
    pl_replay_opts_t o = {.max_events = 10};
    assert_int_equal(pl_replay_extract(p, &o, &s, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "--max-events"));
}

static pl_workload_params_t small_workload(void) {
    pl_workload_params_t p;
    pl_workload_default(&p);
    p.n_layers = 2;
    p.d_model = 128;
    p.batch = 4;
    p.max_seq = 64;
    p.vocab = 2048;
    p.n_steps = 6;
    p.vary_seq = 1;
    return p;
}

/* Record under a config, replay under the same one: identical peaks and device call counts, both against the last
 * recorded alloc_stats (at the same event) and against the allocator's final stats and the map records. */
static void roundtrip(const char *conf, const char *name) {
    char p[600], err[512];
    path_in(p, sizeof p, name);
    unlink(p);
    pl_workload_params_t wp = small_workload();
    rs_recorded_t rec;
    assert_int_equal(rs_record_workload(p, conf, &wp, 80 * RS_MIB * 1024, &rec), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), 0);
    assert_false(s.damaged);
    assert_int_equal(s.source, PL_DEV_SRC_ALLOCATOR);
    assert_true(s.have_stats);
    assert_int_equal(s.n_unmatched_frees, 0);
    assert_true(s.n_allocs > 100);
    pl_alloc_config_t cfg;
    assert_int_equal(pl_alloc_config_parse(conf, &cfg, err, sizeof err), 0);
    pl_replay_result_t r;
    assert_int_equal(pl_replay_run(&s, &cfg, s.capacity_bytes, &r, err, sizeof err), 0);
    assert_true(r.have_at_stats);
    assert_int_equal(r.at_stats_allocated_peak_bytes, s.last_stats.allocated_bytes_peak);
    assert_int_equal(r.at_stats_reserved_peak_bytes, s.last_stats.reserved_bytes_peak);
    assert_int_equal(r.at_stats_n_device_alloc, s.last_stats.num_device_alloc);
    assert_int_equal(r.at_stats_n_device_free, s.last_stats.num_device_free);
    assert_int_equal(r.peak_allocated_bytes, rec.final.allocated_bytes[PL_POOL_ALL].peak);
    assert_int_equal(r.peak_reserved_bytes, rec.final.reserved_bytes[PL_POOL_ALL].peak);
    assert_int_equal(r.n_device_alloc, rec.final.num_device_alloc);
    assert_int_equal(r.n_device_map, rec.final.num_device_map);
    assert_int_equal(r.n_map_events, (int64_t)s.n_map_records);
    assert_int_equal(r.n_unmap_events, (int64_t)s.n_unmap_records);
    assert_int_equal(r.n_ooms, 0);
    assert_true(r.peak_reserved_bytes >= r.peak_allocated_bytes);
    assert_true(r.unallocated_at_peak_bytes >= 0 && r.unallocated_at_peak_bytes <= r.peak_reserved_bytes);
    /* deterministic: a second replay is identical field by field */
    pl_replay_result_t r2;
    assert_int_equal(pl_replay_run(&s, &cfg, s.capacity_bytes, &r2, err, sizeof err), 0);
    assert_memory_equal(&r, &r2, sizeof r);
    pl_replay_seq_free(&s);
}

static void test_replay_roundtrip_default(void **state) {
    (void)state;
    roundtrip("", "rt-default.pltrace");
}
static void test_replay_roundtrip_expandable(void **state) {
    (void)state;
    roundtrip("expandable_segments:True", "rt-exp.pltrace");
}
static void test_replay_roundtrip_mixed(void **state) {
    (void)state;
    roundtrip("max_split_size_mb:20,roundup_power2_divisions:4,garbage_collection_threshold:0.5", "rt-mix.pltrace");
}

/* The crafted fragmentation sequence: the default OOMs at 100 MiB (at the 12 MiB request), expandable does not. */
static void test_replay_fragmentation_oom(void **state) {
    (void)state;
    char p[600], err[512];
    path_in(p, sizeof p, "frag.pltrace");
    unlink(p);
    assert_int_equal(rs_write_frag(p, true), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), 0);
    assert_int_equal(s.capacity_bytes, RS_FRAG_CAPACITY);
    assert_int_equal(s.n_allocs, 26);
    assert_int_equal(s.n_frees, 21);
    pl_alloc_config_t def, exp;
    pl_alloc_config_default(&def);
    assert_int_equal(pl_alloc_config_parse("expandable_segments:True", &exp, err, sizeof err), 0);
    pl_replay_result_t rd, re;
    assert_int_equal(pl_replay_run(&s, &def, s.capacity_bytes, &rd, err, sizeof err), 0);
    assert_int_equal(pl_replay_run(&s, &exp, s.capacity_bytes, &re, err, sizeof err), 0);
    assert_true(rd.n_ooms >= 1);
    assert_int_equal(rd.first_oom_event, 45); /* 25 allocs + 20 frees, then the 12 MiB request */
    assert_int_equal(rd.first_oom_bytes, 12 * RS_MIB);
    /* reserved first reaches its peak (100 MiB) at the 21st block, which opens the fifth 20 MiB segment */
    assert_int_equal(rd.peak_reserved_bytes, 100 * RS_MIB);
    assert_int_equal(rd.unallocated_at_peak_bytes, 16 * RS_MIB);
    assert_int_equal(re.n_ooms, 0);
    assert_int_equal(re.first_oom_event, -1);
    assert_true(re.peak_reserved_bytes <= (int64_t)RS_FRAG_CAPACITY);
    assert_true(re.unallocated_at_peak_bytes < rd.unallocated_at_peak_bytes); /* pages are mapped as needed */
    /* more room: the default fits too */
    assert_int_equal(pl_replay_run(&s, &def, 200 * RS_MIB, &rd, err, sizeof err), 0);
    assert_int_equal(rd.n_ooms, 0);
    pl_replay_seq_free(&s);
}

static void test_replay_no_device_events(void **state) {
    (void)state;
    char p[600], err[1024];
    path_in(p, sizeof p, "nodev.pltrace");
    unlink(p);
    assert_int_equal(rs_write_no_device(p), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), -ENODATA);
    assert_non_null(strstr(err, "no device allocation records"));
    assert_non_null(strstr(err, "plateau run"));
    assert_non_null(strstr(err, "allocator"));
}

static void test_replay_bad_input(void **state) {
    (void)state;
    char p[600], q[600], err[1024];
    /* not a trace */
    path_in(p, sizeof p, "garbage.pltrace");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("this is not a trace\n", f);
    fclose(f);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "garbage.pltrace"));
    /* missing */
    path_in(q, sizeof q, "missing.pltrace");
    assert_int_equal(pl_replay_extract(q, NULL, &s, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "missing.pltrace"));
    /* empty directory */
    path_in(q, sizeof q, "emptydir");
    assert_int_equal(mkdir(q, 0700), 0);
    assert_int_equal(pl_replay_extract(q, NULL, &s, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "no *.pltrace"));
    unlink(p);
}

/* A truncated trace: everything before the damage is replayed, the damage is reported. */
static void test_replay_truncated(void **state) {
    (void)state;
    char p[600], err[1024];
    path_in(p, sizeof p, "trunc.pltrace");
    unlink(p);
    pl_workload_params_t wp = small_workload();
    rs_recorded_t rec;
    assert_int_equal(rs_record_workload(p, "", &wp, 80 * RS_MIB * 1024, &rec), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    pl_replay_seq_t full;
    assert_int_equal(pl_replay_extract(p, NULL, &full, err, sizeof err), 0);
    assert_int_equal(truncate(p, st.st_size - 100), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), 0);
    assert_true(s.damaged);
    assert_non_null(strstr(s.error, "trunc.pltrace"));
    assert_true(s.n_events > 0 && s.n_events < full.n_events);
    pl_replay_result_t r;
    pl_alloc_config_t def;
    pl_alloc_config_default(&def);
    assert_int_equal(pl_replay_run(&s, &def, 0, &r, err, sizeof err), 0);
    assert_true(r.peak_allocated_bytes > 0);
    pl_replay_seq_free(&s);
    /* cut inside the header: not a trace */
    assert_int_equal(truncate(p, 30), 0);
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), -EBADMSG);
    assert_true(strlen(err) > 0);
    pl_replay_seq_free(&full);
}

/* A run directory: the file with device records is picked among others. */
static void test_replay_run_dir(void **state) {
    (void)state;
    char d[600], p[700], err[1024];
    path_in(d, sizeof d, "rundir");
    assert_int_equal(mkdir(d, 0700), 0);
    snprintf(p, sizeof p, "%s/1.0.pltrace", d);
    assert_int_equal(rs_write_no_device(p), 0);
    snprintf(p, sizeof p, "%s/2.0.pltrace", d);
    assert_int_equal(rs_write_frag(p, false), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(d, NULL, &s, err, sizeof err), 0);
    assert_non_null(strstr(s.file, "2.0.pltrace"));
    assert_int_equal(s.n_allocs, 26);
    assert_int_equal(s.capacity_bytes, 0); /* no alloc_stats: unknown */
    pl_replay_seq_free(&s);
}

/* Records from the CUDA interposers: device allocations on device 0 are the sequence; pinned host memory
 * (device -1), even when more numerous, is not; an OOM recorded with device -1 becomes a probe; sizes are `size`. */
static void test_replay_cuda_sources(void **state) {
    (void)state;
    char p[600], err[1024];
    path_in(p, sizeof p, "cuda.pltrace");
    unlink(p);
    rs_ctx_t c;
    assert_int_equal(rs_open(p, &c), 0);
    for (uint64_t i = 0; i < 10; i++)
        rs_device_src(&c, PL_REC_DEVICE_ALLOC, PL_DEV_SRC_RUNTIME, -1, 0x5000000 + i * 4096, 4096, 4096, 0);
    for (uint64_t i = 0; i < 3; i++)
        rs_device_src(&c, PL_REC_DEVICE_ALLOC, PL_DEV_SRC_RUNTIME, 0, 0x7f0000000000ull + i * RS_MIB * 64,
                      48 * RS_MIB, PL_TRACE_NA, 5);
    rs_device_src(&c, PL_REC_DEVICE_OOM, PL_DEV_SRC_RUNTIME, -1, 0, 96 * RS_MIB, 96 * RS_MIB, 5);
    rs_device_src(&c, PL_REC_DEVICE_FREE, PL_DEV_SRC_RUNTIME, 0, 0x7f0000000000ull, 48 * RS_MIB, 0, 5);
    assert_int_equal(rs_close(&c, true), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), 0);
    assert_int_equal(s.source, PL_DEV_SRC_RUNTIME);
    assert_int_equal(s.device, 0);
    assert_int_equal(s.n_allocs, 3);
    assert_int_equal(s.n_probes, 1);
    assert_int_equal(s.n_frees, 1);
    assert_int_equal(s.n_other_streams_records, 10);
    assert_int_equal(s.ev[0].size_bytes, 48 * RS_MIB);
    assert_int_equal(s.streams[s.ev[0].stream], 5);
    pl_alloc_config_t def;
    pl_alloc_config_default(&def);
    pl_replay_result_t r;
    /* 3 x 48 MiB fit in 160 MiB, the 96 MiB probe does not: the replay reproduces the recorded OOM */
    assert_int_equal(pl_replay_run(&s, &def, 160 * RS_MIB, &r, err, sizeof err), 0);
    assert_int_equal(r.peak_allocated_bytes, 144 * RS_MIB);
    assert_int_equal(r.first_oom_event, 3);
    assert_int_equal(r.n_failed_allocs, 0);
    /* with more room the probe fits and is freed at once */
    assert_int_equal(pl_replay_run(&s, &def, 400 * RS_MIB, &r, err, sizeof err), 0);
    assert_int_equal(r.first_oom_event, -1);
    assert_int_equal(r.peak_allocated_bytes, 240 * RS_MIB);
    assert_int_equal(r.end_allocated_bytes, 96 * RS_MIB);
    pl_replay_seq_free(&s);
}

/* Misuse: absurd sizes (0, SIZE_MAX, 2^63), the all-ones address, double frees, an absurd failed request. Replays
 * under every grid config's keys end with OOM results, never a crash; the impossible address is skipped. */
static void test_replay_absurd_records(void **state) {
    (void)state;
    char p[600], err[1024];
    path_in(p, sizeof p, "absurd.pltrace");
    unlink(p);
    rs_ctx_t c;
    assert_int_equal(rs_open(p, &c), 0);
    const uint64_t sizes[] = {0, 1, UINT64_MAX, UINT64_MAX - 511, (uint64_t)1 << 63, (uint64_t)1 << 40, 513,
                              0x7fffffffffffffffull};
    for (uint64_t i = 0; i < 8; i++) rs_device(&c, PL_REC_DEVICE_ALLOC, 0x1000 + i * 16, sizes[i], sizes[i], i % 3);
    rs_device(&c, PL_REC_DEVICE_ALLOC, UINT64_MAX, 5, 5, 0);
    rs_device(&c, PL_REC_DEVICE_OOM, 0, UINT64_MAX, UINT64_MAX, 9);
    for (int k = 0; k < 2; k++)
        for (uint64_t i = 0; i < 8; i++) rs_device(&c, PL_REC_DEVICE_FREE, 0x1000 + i * 16, 0, 0, 0);
    assert_int_equal(rs_close(&c, true), 0);
    pl_replay_seq_t s;
    assert_int_equal(pl_replay_extract(p, NULL, &s, err, sizeof err), 0);
    assert_int_equal(s.n_allocs, 8);
    assert_int_equal(s.n_bad_records, 1);
    assert_int_equal(s.n_frees, 8);
    assert_int_equal(s.n_unmatched_frees, 8);
    static const char *confs[] = {"", "expandable_segments:True", "roundup_power2_divisions:8",
                                  "max_split_size_mb:20,garbage_collection_threshold:0.5"};
    for (size_t i = 0; i < 4; i++) {
        pl_alloc_config_t cfg;
        assert_int_equal(pl_alloc_config_parse(confs[i], &cfg, err, sizeof err), 0);
        pl_replay_result_t r;
        assert_int_equal(pl_replay_run(&s, &cfg, 0, &r, err, sizeof err), 0);
        assert_int_equal(r.first_oom_event, 2);        /* SIZE_MAX fails, the 0 and 1 B blocks fit */
        assert_true(r.n_failed_allocs >= 4);
        assert_int_equal(r.end_allocated_bytes, 0);    /* every block that was handed out was freed once */
    }
    pl_replay_seq_free(&s);
}

static int setup(void **state) {
    (void)state;
    return rs_tmpdir(tmp, sizeof tmp) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_builder_pairs),
        cmocka_unit_test(test_replay_builder_many),
        cmocka_unit_test(test_replay_limit),
        cmocka_unit_test(test_replay_roundtrip_default),
        cmocka_unit_test(test_replay_roundtrip_expandable),
        cmocka_unit_test(test_replay_roundtrip_mixed),
        cmocka_unit_test(test_replay_fragmentation_oom),
        cmocka_unit_test(test_replay_no_device_events),
        cmocka_unit_test(test_replay_bad_input),
        cmocka_unit_test(test_replay_truncated),
        cmocka_unit_test(test_replay_run_dir),
        cmocka_unit_test(test_replay_cuda_sources),
        cmocka_unit_test(test_replay_absurd_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
