/* tests/allocator/test_config.c: the PYTORCH_CUDA_ALLOC_CONF parser and PLATEAU_SIM_DEVICE. */
#include "config.h"

#include "helpers.h"

static pl_alloc_config_t parse_ok(const char *s) {
    pl_alloc_config_t c;
    char err[512];
    int rc = pl_alloc_config_parse(s, &c, err, sizeof err);
    if (rc) fail_msg("'%s' rejected: %s", s, err);
    return c;
}

/* Rejects s; the message must contain `needle` and list the valid keys. */
static void parse_bad(const char *s, const char *needle) {
    pl_alloc_config_t c;
    memset(&c, 0x5a, sizeof c);
    pl_alloc_config_t before = c;
    char err[512];
    assert_int_equal(pl_alloc_config_parse(s, &c, err, sizeof err), -EINVAL);
    if (!strstr(err, needle)) fail_msg("'%s': message '%s' lacks '%s'", s, err, needle);
    if (!strstr(err, "valid keys: max_split_size_mb")) fail_msg("'%s': message '%s' lacks the key list", s, err);
    assert_memory_equal(&c, &before, sizeof c); /* out-parameter untouched on error */
}

static void test_config_defaults(void **state) {
    (void)state;
    pl_alloc_config_t c = parse_ok(""), d;
    pl_alloc_config_default(&d);
    assert_memory_equal(&c, &d, sizeof c);
    assert_true(c.max_split_size_bytes == SIZE_MAX);
    assert_int_equal(c.max_non_split_rounding_bytes, 20 * MiB);
    assert_false(c.expandable_segments);
    assert_true(c.per_process_memory_fraction == 1.0);
    c = parse_ok(NULL);
    assert_memory_equal(&c, &d, sizeof c);
    c = parse_ok("   ");
    assert_memory_equal(&c, &d, sizeof c);
}

static void test_config_valid(void **state) {
    (void)state;
    pl_alloc_config_t c = parse_ok("max_split_size_mb:128,expandable_segments:True");
    assert_int_equal(c.max_split_size_bytes, 128 * MiB);
    assert_true(c.expandable_segments);
    c = parse_ok("max_split_size_mb:20");
    assert_int_equal(c.max_split_size_bytes, 20 * MiB);
    c = parse_ok(" garbage_collection_threshold : 0.6 , per_process_memory_fraction:0.5,max_non_split_rounding_mb:4");
    assert_true(c.garbage_collection_threshold == 0.6);
    assert_true(c.per_process_memory_fraction == 0.5);
    assert_int_equal(c.max_non_split_rounding_bytes, 4 * MiB);
    c = parse_ok("expandable_segments:False,expandable_segments:true"); /* last wins */
    assert_true(c.expandable_segments);
    c = parse_ok("roundup_power2_divisions:4");
    for (int i = 0; i < PL_ROUNDUP_N_INTERVALS; i++) assert_int_equal(c.roundup_power2_divisions[i], 4);
    c = parse_ok("release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False,pinned_num_register_threads:8,"
                 "pinned_use_background_threads:True,backend:native");
    c = parse_ok("per_process_memory_fraction:1");
    assert_true(c.per_process_memory_fraction == 1.0);
}

static void test_config_bucket_form(void **state) {
    (void)state;
    /* [256:1,512:2,>:8]: 1 division below 256 MiB, 2 in [256, 512) MiB, 8 from 512 MiB on */
    pl_alloc_config_t c = parse_ok("roundup_power2_divisions:[256:1,512:2,>:8]");
    assert_int_equal(c.roundup_power2_divisions[0], 1);
    assert_int_equal(c.roundup_power2_divisions[27], 1);  /* [128, 256) MiB */
    assert_int_equal(c.roundup_power2_divisions[28], 2);  /* [256, 512) MiB */
    assert_int_equal(c.roundup_power2_divisions[29], 8);  /* [512 MiB, 1 GiB) */
    assert_int_equal(c.roundup_power2_divisions[63], 8);
    c = parse_ok("roundup_power2_divisions:[ 1:4 , 64:8 ]");
    assert_int_equal(c.roundup_power2_divisions[19], 4);
    assert_int_equal(c.roundup_power2_divisions[20], 8);
    assert_int_equal(c.roundup_power2_divisions[25], 8);
    assert_int_equal(c.roundup_power2_divisions[26], 0); /* not covered: plain 512 B rounding */
    c = parse_ok("roundup_power2_divisions:[>:2],max_split_size_mb:40");
    assert_int_equal(c.roundup_power2_divisions[5], 2);
    assert_int_equal(c.max_split_size_bytes, 40 * MiB);
}

static void test_config_invalid(void **state) {
    (void)state;
    parse_bad("max_split_size_mbb:100", "key 'max_split_size_mbb': unknown key");
    parse_bad("foo:1", "key 'foo'");
    parse_bad("max_split_size_mb:abc", "key 'max_split_size_mb'");
    parse_bad("max_split_size_mb:19", "must be >= 20");
    parse_bad("max_split_size_mb:-20", "key 'max_split_size_mb'");
    parse_bad("max_split_size_mb:20x", "key 'max_split_size_mb'");
    parse_bad("max_split_size_mb:99999999999999999999999", "key 'max_split_size_mb'");
    parse_bad("garbage_collection_threshold:1.0", "out of range");
    parse_bad("garbage_collection_threshold:0", "out of range");
    parse_bad("garbage_collection_threshold:nan", "key 'garbage_collection_threshold'");
    parse_bad("per_process_memory_fraction:1.5", "out of range");
    parse_bad("per_process_memory_fraction:0", "out of range");
    parse_bad("expandable_segments:yes", "not True or False");
    parse_bad("expandable_segments:True;", "trailing garbage");
    parse_bad("expandable_segments:True junk", "trailing garbage");
    parse_bad("expandable_segments:True,", "empty entry");
    parse_bad("expandable_segments", "expected ':'");
    parse_bad(",expandable_segments:True", "expected a key");
    parse_bad("roundup_power2_divisions:3", "not a power of two");
    parse_bad("roundup_power2_divisions:0", "not a power of two");
    parse_bad("roundup_power2_divisions:[256:1,128:2]", "intervals must increase");
    parse_bad("roundup_power2_divisions:[100:1]", "not a power of two");
    parse_bad("roundup_power2_divisions:[256:1", "expected ',' or ']'");
    parse_bad("roundup_power2_divisions:[]", "key 'roundup_power2_divisions'");
    parse_bad("roundup_power2_divisions:[>:2,256:1]", "'>' must be the last");
    parse_bad("pinned_num_register_threads:256", "key 'pinned_num_register_threads'");
    parse_bad("backend:cudaMallocAsync", "only native");
    /* non-ASCII text is quoted whole (it read 'Tr' is not True or False) */
    parse_bad("expandable_segments:Tr\xc3\xbc" "e", "'Tr\xc3\xbc" "e' is not True or False");
    parse_bad("max_split_size_mb:2\xc2\xb2", "key 'max_split_size_mb'");
    parse_bad("m\xc3\xa4x_split_size_mb:100", "key 'm\xc3\xa4x_split_size_mb': unknown key");
    /* a token longer than the parser keeps is cut visibly */
    char longer[200];
    snprintf(longer, sizeof longer, "expandable_segments:%0120d", 1);
    parse_bad(longer, "...' is not True or False");
}

static void test_config_env(void **state) {
    (void)state;
    pl_alloc_config_t c;
    char err[512];
    unsetenv("PLATEAU_ALLOC_CONF");
    setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64", 1);
    assert_int_equal(pl_alloc_config_from_env(&c, err, sizeof err), 0);
    assert_int_equal(c.max_split_size_bytes, 64 * MiB);
    setenv("PLATEAU_ALLOC_CONF", "expandable_segments:True", 1); /* ours wins */
    assert_int_equal(pl_alloc_config_from_env(&c, err, sizeof err), 0);
    assert_true(c.expandable_segments);
    assert_true(c.max_split_size_bytes == SIZE_MAX);
    setenv("PLATEAU_ALLOC_CONF", "bogus:1", 1);
    assert_int_equal(pl_alloc_config_from_env(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "PLATEAU_ALLOC_CONF"));
    assert_non_null(strstr(err, "bogus"));
    /* allocator creation from the env fails the same way, no silent fallback */
    pl_backend_t *be;
    pl_alloc_t *a = NULL;
    assert_int_equal(pl_backend_sim_create(NULL, &be), 0);
    assert_int_equal(pl_alloc_create(be, NULL, &a, err, sizeof err), -EINVAL);
    assert_null(a);
    assert_non_null(strstr(err, "bogus"));
    unsetenv("PLATEAU_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    assert_int_equal(pl_alloc_create(be, NULL, &a, err, sizeof err), 0);
    pl_alloc_destroy(a);
    pl_backend_destroy(be);
}

static void roundtrip(const char *s) {
    pl_alloc_config_t c = parse_ok(s), c2;
    char buf[512];
    int n = pl_alloc_config_format(&c, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    c2 = parse_ok(buf);
    if (memcmp(&c, &c2, sizeof c)) fail_msg("'%s' formatted as '%s' does not parse back equal", s, buf);
}

static void test_config_format_roundtrip(void **state) {
    (void)state;
    char buf[8];
    pl_alloc_config_t d;
    pl_alloc_config_default(&d);
    assert_int_equal(pl_alloc_config_format(&d, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    roundtrip("max_split_size_mb:128,expandable_segments:True");
    roundtrip("garbage_collection_threshold:0.6,per_process_memory_fraction:0.25,max_non_split_rounding_mb:0");
    roundtrip("roundup_power2_divisions:8");
    roundtrip("roundup_power2_divisions:[256:1,512:2,>:8]");
    roundtrip("roundup_power2_divisions:[1:4,64:8]");
    /* fractions print as the shortest decimal that parses back exactly: what a user pastes */
    {
        char out[128];
        pl_alloc_config_t g = parse_ok("garbage_collection_threshold:0.6,per_process_memory_fraction:0.123456789012");
        pl_alloc_config_format(&g, out, sizeof out);
        assert_string_equal(out, "garbage_collection_threshold:0.6,per_process_memory_fraction:0.123456789012");
    }
    /* truncated output still reports the full length */
    pl_alloc_config_t c = parse_ok("max_split_size_mb:128");
    assert_int_equal(pl_alloc_config_format(&c, buf, sizeof buf), (int)strlen("max_split_size_mb:128"));
    assert_int_equal(strlen(buf), sizeof buf - 1);
}

static void test_config_sim_options(void **state) {
    (void)state;
    pl_sim_options_t o;
    char err[512];
    assert_int_equal(pl_sim_options_parse("capacity:80GiB,granularity:2MiB,fail_alloc_at:3,fail_map_at:5,touch:0", &o,
                                          err, sizeof err),
                     0);
    assert_true(o.capacity_bytes == ((size_t)80 << 30));
    assert_int_equal(o.granularity_bytes, 2 * MiB);
    assert_int_equal(o.fail_alloc_at, 3);
    assert_int_equal(o.fail_map_at, 5);
    assert_false(o.touch);
    assert_int_equal(pl_sim_options_parse("capacity:1GB", &o, err, sizeof err), 0);
    assert_int_equal(o.capacity_bytes, 1000000000);
    assert_true(o.touch);
    assert_int_equal(pl_sim_options_parse("capacity:1G,granularity:64k", &o, err, sizeof err), 0);
    assert_int_equal(o.capacity_bytes, (size_t)1 << 30);
    assert_int_equal(o.granularity_bytes, 64 * KiB);
    assert_int_equal(pl_sim_options_parse("capacity:80XB", &o, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "capacity"));
    assert_int_equal(pl_sim_options_parse("granularity:3000", &o, err, sizeof err), -EINVAL);
    assert_int_equal(pl_sim_options_parse("speed:1", &o, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "valid keys: capacity"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),   cmocka_unit_test(test_config_valid),
        cmocka_unit_test(test_config_bucket_form), cmocka_unit_test(test_config_invalid),
        cmocka_unit_test(test_config_env),        cmocka_unit_test(test_config_format_roundtrip),
        cmocka_unit_test(test_config_sim_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
