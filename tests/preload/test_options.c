/* PLATEAU_* parsing: defaults, valid values, and every malformed value rejected with one message that
 * names the variable, the default kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "options.h"

static const char *const *env_now;

static const char *fake_getenv(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; env_now && env_now[i]; i++)
        if (!strncmp(env_now[i], name, n) && env_now[i][n] == '=') return env_now[i] + n + 1;
    return NULL;
}

static char msgs[2048];
static int n_msgs;
static void collect(const char *m) {
    n_msgs++;
    strncat(msgs, m, sizeof msgs - strlen(msgs) - 2);
    strcat(msgs, "\n");
}

static int parse(const char *const *env, pl_options_t *o) {
    env_now = env;
    msgs[0] = 0;
    n_msgs = 0;
    pl_options_default(o);
    return pl_options_parse(o, fake_getenv, collect);
}

static void test_options_defaults(void **state) {
    (void)state;
    pl_options_t o;
    assert_int_equal(parse(NULL, &o), 0);
    assert_int_equal(o.sample_bytes, 512 * 1024);
    assert_int_equal(o.interval_ms, 100);
    assert_int_equal(o.flush_ms, 250);
    assert_false(o.step_signal);
    assert_true(o.device_stacks);
    assert_string_equal(o.dir, "");
}

static void test_options_valid_values(void **state) {
    (void)state;
    const char *env[] = {"PLATEAU_DIR=/tmp/x", "PLATEAU_SAMPLE_BYTES=1M", "PLATEAU_INTERVAL_MS=20",
                         "PLATEAU_FLUSH_MS=1000", "PLATEAU_STEP_SIGNAL=yes", "PLATEAU_DEVICE_STACKS=0",
                         "PLATEAU_PSS=off", "PLATEAU_QUIET=1", NULL};
    pl_options_t o;
    assert_int_equal(parse(env, &o), 0);
    assert_int_equal(n_msgs, 0);
    assert_string_equal(o.dir, "/tmp/x");
    assert_int_equal(o.sample_bytes, 1 << 20);
    assert_int_equal(o.interval_ms, 20);
    assert_int_equal(o.flush_ms, 1000);
    assert_true(o.step_signal);
    assert_false(o.device_stacks);
    assert_false(o.pss);
    assert_true(o.quiet);
    const char *zero[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(parse(zero, &o), 0);
    assert_int_equal(o.sample_bytes, 0);
    assert_int_equal(o.buffer_bytes, 256 * 1024);
    const char *buf[] = {"PLATEAU_BUFFER_BYTES=4K", NULL};
    assert_int_equal(parse(buf, &o), 0);
    assert_int_equal(o.buffer_bytes, 4096);
    const char *small[] = {"PLATEAU_BUFFER_BYTES=100", NULL}, *big[] = {"PLATEAU_BUFFER_BYTES=2M", NULL};
    assert_int_equal(parse(small, &o), 1);
    assert_int_equal(o.buffer_bytes, 256 * 1024);
    assert_int_equal(parse(big, &o), 1);
    assert_int_equal(o.buffer_bytes, 256 * 1024);
    assert_non_null(strstr(msgs, "PLATEAU_BUFFER_BYTES='2M' is not a byte count in [256, 1M]"));
    /* PLATEAU_HOST_MEMORY: the host memory recorded for tests of limits; 0 or junk keeps the machine's */
    assert_int_equal(o.host_memory_bytes, 0);
    const char *hm[] = {"PLATEAU_HOST_MEMORY=300M", NULL}, *hm0[] = {"PLATEAU_HOST_MEMORY=0", NULL};
    assert_int_equal(parse(hm, &o), 0);
    assert_int_equal(o.host_memory_bytes, 300u << 20);
    assert_int_equal(parse(hm0, &o), 1);
    assert_int_equal(o.host_memory_bytes, 0);
    assert_non_null(strstr(msgs, "PLATEAU_HOST_MEMORY='0' is not a byte count > 0"));
}

static void test_options_malformed_values_keep_defaults(void **state) {
    (void)state;
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=-5", "PLATEAU_INTERVAL_MS=0", "PLATEAU_FLUSH_MS=5000",
                         "PLATEAU_STEP_SIGNAL=perhaps", "PLATEAU_PSS=2", NULL};
    pl_options_t o;
    assert_int_equal(parse(env, &o), 5);
    assert_int_equal(n_msgs, 5);
    assert_int_equal(o.sample_bytes, 512 * 1024);
    assert_int_equal(o.interval_ms, 100);
    assert_int_equal(o.flush_ms, 250);
    assert_false(o.step_signal);
    assert_true(o.pss);
    assert_non_null(strstr(msgs, "PLATEAU_SAMPLE_BYTES='-5'"));
    assert_non_null(strstr(msgs, "PLATEAU_FLUSH_MS='5000' is not an integer in [10, 1000]; using the default (250)"));
    assert_non_null(strstr(msgs, "PLATEAU_STEP_SIGNAL='perhaps'"));
}

/* The preload's size grammar before it read sizes through common/units.h, restated from its last version
 * (preload/options.c pl_options_parse_bytes, until issue 13 part 5): digits, then exactly one of "", B, K, KiB, k,
 * M, MiB, G, GiB (case as written), powers of 1024; overflow refused. The reference the new grammar must keep. */
static int old_parse_bytes(const char *s, uint64_t *out) {
    static const struct { const char *suffix; unsigned shift; } units[] = {
        {"", 0}, {"B", 0}, {"K", 10}, {"KiB", 10}, {"k", 10}, {"M", 20}, {"MiB", 20}, {"G", 30}, {"GiB", 30},
    };
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].suffix)) continue;
        if (units[i].shift && v > (UINT64_MAX >> units[i].shift)) return -1;
        *out = v << units[i].shift;
        return 0;
    }
    return -1;
}

/* PLATEAU_SAMPLE_BYTES=s through pl_options_parse: 0 and the size, or the number of complaints. */
static int sample_bytes(const char *s, uint64_t *out) {
    char var[96];
    snprintf(var, sizeof var, "PLATEAU_SAMPLE_BYTES=%s", s);
    const char *env[] = {var, NULL};
    pl_options_t o;
    int n_bad = parse(env, &o);
    *out = o.sample_bytes;
    return n_bad;
}

/* Every string the old grammar accepted means the same size now, read by pl_options_parse: the list of what it
 * documented and tested, each unit at the overflow edge, then every string of up to 4 characters over digits and
 * unit letters. A string it refused may now be a size (1m, 1KB, 2T: the union grammar), never the reverse. */
static void test_options_sizes_keep_old_meaning(void **state) {
    (void)state;
    static const struct { const char *s; uint64_t bytes; } listed[] = {
        {"0", 0}, {"524288", 524288}, {"4096", 4096}, {"7B", 7}, {"512K", 512ull << 10}, {"512k", 512ull << 10},
        {"512KiB", 512ull << 10}, {"1M", 1ull << 20}, {"3MiB", 3ull << 20}, {"1G", 1ull << 30},
        {"2GiB", 2ull << 30}, {"18446744073709551615", UINT64_MAX}, {"18446744073709551615B", UINT64_MAX},
        {"18014398509481983K", 18014398509481983ull << 10}, {"17592186044415M", 17592186044415ull << 20},
        {"17179869183GiB", 17179869183ull << 30}, {"007k", 7ull << 10},
    };
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
        uint64_t old = 1, now = 1;
        assert_int_equal(old_parse_bytes(listed[i].s, &old), 0);
        assert_true(old == listed[i].bytes);
        if (sample_bytes(listed[i].s, &now) != 0 || now != old)
            fail_msg("'%s': old grammar %llu, now %llu (%s)", listed[i].s, (unsigned long long)old,
                     (unsigned long long)now, msgs);
    }
    /* refused by both: overflow at each unit's edge, signs, fractions, blanks, unknown units */
    static const char *const refused[] = {"18446744073709551616", "18014398509481984K", "17592186044416M",
                                          "17179869184G", "", "-5", "1.5G", " 1G", "1 G", "1G ", "G", "12X",
                                          "1Ki", "0x10", "+1"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        uint64_t old = 1, now = 1;
        assert_int_not_equal(old_parse_bytes(refused[i], &old), 0);
        if (sample_bytes(refused[i], &now) != 1 || now != 512 * 1024)
            fail_msg("'%s' was refused and should still be: sample_bytes %llu", refused[i], (unsigned long long)now);
    }
    /* exhaustively: every string of 1..4 characters over these, each accepted by the old grammar keeps its size */
    static const char alpha[] = "0179BKMGikbm";
    const size_t n_alpha = sizeof alpha - 1;
    size_t n_old = 0, n_new_only = 0;
    for (size_t len = 1; len <= 4; len++) {
        size_t total = 1;
        for (size_t k = 0; k < len; k++) total *= n_alpha;
        for (size_t code = 0; code < total; code++) {
            char s[5];
            size_t c = code;
            for (size_t k = 0; k < len; k++, c /= n_alpha) s[k] = alpha[c % n_alpha];
            s[len] = 0;
            uint64_t old = 1, now = 1;
            int old_ok = old_parse_bytes(s, &old) == 0, now_ok = sample_bytes(s, &now) == 0;
            if (old_ok && (!now_ok || now != old))
                fail_msg("'%s': old grammar %llu, now %s %llu", s, (unsigned long long)old,
                         now_ok ? "" : "refused,", (unsigned long long)now);
            n_old += old_ok;
            n_new_only += now_ok && !old_ok;
        }
    }
    /* the walk met all the old grammar's strings: 340 of digits alone, 420 of 1..3 digits and B, K, k, M or G,
     * 12 of one digit and KiB, MiB or GiB; and strings only the union reads (1m, 9KB, ...) */
    assert_int_equal(n_old, 340 + 420 + 12);
    assert_true(n_new_only > 0);
    uint64_t v;
    assert_int_equal(sample_bytes("1m", &v), 0);
    assert_true(v == 1ull << 20);
    assert_int_equal(sample_bytes("1KB", &v), 0);
    assert_true(v == 1000);
    /* PLATEAU_BUFFER_BYTES reads the same grammar, within its bounds */
    const char *buf_env[] = {"PLATEAU_BUFFER_BYTES=1MiB", NULL};
    pl_options_t o;
    assert_int_equal(parse(buf_env, &o), 0);
    assert_int_equal(o.buffer_bytes, 1u << 20);
}

/* PLATEAU_CUPTI: 0/1/auto (and the boolean spellings); anything else keeps auto with one message. */
static void test_options_cupti_mode(void **state) {
    (void)state;
    pl_options_t o;
    assert_int_equal(parse(NULL, &o), 0);
    assert_int_equal(o.cupti, PL_CUPTI_AUTO);
    static const struct { const char *env; int mode; } ok[] = {
        {"PLATEAU_CUPTI=0", PL_CUPTI_OFF}, {"PLATEAU_CUPTI=off", PL_CUPTI_OFF}, {"PLATEAU_CUPTI=1", PL_CUPTI_ON},
        {"PLATEAU_CUPTI=yes", PL_CUPTI_ON}, {"PLATEAU_CUPTI=auto", PL_CUPTI_AUTO},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *env[] = {ok[i].env, NULL};
        assert_int_equal(parse(env, &o), 0);
        assert_int_equal(n_msgs, 0);
        assert_int_equal(o.cupti, ok[i].mode);
    }
    static const char *const bad_values[] = {"PLATEAU_CUPTI=2", "PLATEAU_CUPTI=AUTO", "PLATEAU_CUPTI=auto ",
                                             "PLATEAU_CUPTI=maybe"};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        const char *env[] = {bad_values[i], NULL};
        assert_int_equal(parse(env, &o), 1);
        assert_int_equal(n_msgs, 1);
        assert_int_equal(o.cupti, PL_CUPTI_AUTO);
        assert_non_null(strstr(msgs, "is not 0, 1 or auto"));
        assert_non_null(strstr(msgs, "using the default (auto)"));
    }
}

/* Booleans: 1/0, yes/no, true/false, on/off in any case (TRUE, Off); nothing else. */
static void test_options_booleans_any_case(void **state) {
    (void)state;
    pl_options_t o;
    const char *on[] = {"PLATEAU_STEP_SIGNAL=TRUE", "PLATEAU_QUIET=Yes", "PLATEAU_PSS=OFF", "PLATEAU_DISABLE=False",
                        NULL};
    assert_int_equal(parse(on, &o), 0);
    assert_int_equal(n_msgs, 0);
    assert_true(o.step_signal);
    assert_true(o.quiet);
    assert_false(o.pss);
    assert_false(o.disable);
    const char *bad[] = {"PLATEAU_STEP_SIGNAL=truthy", "PLATEAU_QUIET=2", NULL};
    assert_int_equal(parse(bad, &o), 2);
    assert_int_equal(n_msgs, 2);
    assert_false(o.step_signal);
}

/* PLATEAU_DEBUG_CUDA (read by preload/cuda.c through pl_options_uint): digits in range, nothing after them. */
static void test_options_uint_strict(void **state) {
    (void)state;
    static const struct { const char *env; uint32_t want; } ok[] = {
        {"PLATEAU_DEBUG_CUDA=0", 0}, {"PLATEAU_DEBUG_CUDA=1", 1}, {"PLATEAU_DEBUG_CUDA=2", 2},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *env[] = {ok[i].env, NULL};
        env_now = env;
        msgs[0] = 0;
        n_msgs = 0;
        assert_int_equal(pl_options_uint(fake_getenv, collect, "PLATEAU_DEBUG_CUDA", 0, 2, 0), ok[i].want);
        assert_int_equal(n_msgs, 0);
    }
    static const char *const bad_values[] = {"PLATEAU_DEBUG_CUDA=1T", "PLATEAU_DEBUG_CUDA=1e3",
                                             "PLATEAU_DEBUG_CUDA=4294967297", "PLATEAU_DEBUG_CUDA=3",
                                             "PLATEAU_DEBUG_CUDA=-1", "PLATEAU_DEBUG_CUDA= 1", "PLATEAU_DEBUG_CUDA="};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        const char *env[] = {bad_values[i], NULL};
        env_now = env;
        msgs[0] = 0;
        n_msgs = 0;
        assert_int_equal(pl_options_uint(fake_getenv, collect, "PLATEAU_DEBUG_CUDA", 0, 2, 0), 0);
        assert_int_equal(n_msgs, 1);
        assert_non_null(strstr(msgs, "is not an integer in [0, 2]; using the default (0)"));
    }
    env_now = NULL;
    assert_int_equal(pl_options_uint(fake_getenv, collect, "PLATEAU_DEBUG_CUDA", 0, 2, 0), 0); /* unset */
}

/* PLATEAU_RUN_ID: the run id plateau run gives every process of a run (trace header, 1.4). */
static void test_options_run_id(void **state) {
    (void)state;
    pl_options_t o;
    assert_int_equal(parse(NULL, &o), 0);
    assert_true(o.run_id == 0);
    const char *ok[] = {"PLATEAU_RUN_ID=00f1E2d3c4b5a697", NULL};
    assert_int_equal(parse(ok, &o), 0);
    assert_true(o.run_id == 0x00f1e2d3c4b5a697ull);
    static const char *const bad_values[] = {"PLATEAU_RUN_ID=", "PLATEAU_RUN_ID=0", "PLATEAU_RUN_ID=12345678901234567",
                                             "PLATEAU_RUN_ID=12g4", "PLATEAU_RUN_ID=-1"};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        const char *env[] = {bad_values[i], NULL};
        assert_int_equal(parse(env, &o), 1);
        assert_int_equal(n_msgs, 1);
        assert_true(o.run_id == 0);
        assert_non_null(strstr(msgs, "is not 1 to 16 hex digits"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_defaults),
        cmocka_unit_test(test_options_valid_values),
        cmocka_unit_test(test_options_malformed_values_keep_defaults),
        cmocka_unit_test(test_options_sizes_keep_old_meaning),
        cmocka_unit_test(test_options_cupti_mode),
        cmocka_unit_test(test_options_run_id),
        cmocka_unit_test(test_options_booleans_any_case),
        cmocka_unit_test(test_options_uint_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
