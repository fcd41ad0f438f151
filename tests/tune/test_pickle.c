/* tune/pickle: the data-only pickle reader.
 * Fixtures (tests/fixtures/snapshots/opcodes_p{2,3,4,5}.pickle, written by Python's own pickle module through
 * tools/gen-snapshot-fixtures.py) hold every value type Python writes for plain data; hand-built byte strings cover
 * the opcodes Python only writes for huge values (LONG4, BINUNICODE8, BINBYTES8, LONG_BINGET, DUP), the refused
 * opcodes (their error text is checked), malformed input, truncation at every byte and the limits.
 * usage: test_tune_pickle FIXTURE_DIR
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

#include "pickle.h"

static const char *fixture_dir;

/* a fixture, whole and NUL-terminated */
static unsigned char *slurp(const char *name, size_t *len) {
    unsigned char *b = (unsigned char *)pl_test_slurp(fixture_dir, name, len);
    if (!b) fail_msg("cannot read %s/%s", fixture_dir, name);
    return b;
}

static int64_t get_int(const pl_pickle_doc_t *d, pl_pickle_ref_t dict, const char *key) {
    int64_t v = -12345;
    pl_pickle_ref_t r = pl_pickle_dict_get(d, dict, key);
    assert_int_not_equal(r, PL_PICKLE_NULL);
    assert_int_equal(pl_pickle_int(d, r, &v), 0);
    return v;
}

static void check_str(const pl_pickle_doc_t *d, pl_pickle_ref_t dict, const char *key, const char *want, size_t n) {
    size_t len = 0;
    const char *s = pl_pickle_str(d, pl_pickle_dict_get(d, dict, key), &len);
    assert_non_null(s);
    assert_int_equal(len, n);
    assert_memory_equal(s, want, n);
}

static void check_opcodes(int proto) {
    char name[64], err[256] = "";
    snprintf(name, sizeof name, "opcodes_p%d.pickle", proto);
    size_t len;
    unsigned char *b = slurp(name, &len);
    pl_pickle_doc_t d;
    int rc = pl_pickle_parse(b, len, NULL, &d, err, sizeof err);
    if (rc) fail_msg("%s: %s", name, err);
    assert_int_equal(d.protocol, proto);
    pl_pickle_ref_t root = d.root;
    assert_int_equal(pl_pickle_type(&d, root), PL_PICKLE_DICT);
    assert_int_equal(pl_pickle_type(&d, pl_pickle_dict_get(&d, root, "none")), PL_PICKLE_NONE);
    assert_int_equal(pl_pickle_type(&d, pl_pickle_dict_get(&d, root, "t")), PL_PICKLE_BOOL);
    assert_int_equal(get_int(&d, root, "t"), 1);
    assert_int_equal(get_int(&d, root, "f"), 0);
    assert_int_equal(get_int(&d, root, "i8"), 200);
    assert_int_equal(get_int(&d, root, "i16"), 60000);
    assert_int_equal(get_int(&d, root, "i32"), -5);
    assert_int_equal(get_int(&d, root, "i32b"), 2147483647);
    assert_true(get_int(&d, root, "long") == 0x7F3A12345678LL);
    assert_true(get_int(&d, root, "neg") == -(1LL << 40));
    assert_true(get_int(&d, root, "max") == INT64_MAX);
    assert_true(get_int(&d, root, "min") == INT64_MIN);
    assert_int_equal(get_int(&d, root, "zero"), 0);
    pl_pickle_ref_t f = pl_pickle_dict_get(&d, root, "float");
    assert_int_equal(pl_pickle_type(&d, f), PL_PICKLE_FLOAT);
    assert_true(d.values[f].u.f == 1.5);
    check_str(&d, root, "str", "h\xc3\xa9llo", 6);
    check_str(&d, root, "empty", "", 0);
    size_t n;
    const char *ls = pl_pickle_str(&d, pl_pickle_dict_get(&d, root, "long_str"), &n);
    assert_int_equal(n, 300);
    assert_true(ls[0] == 'x' && ls[299] == 'x');
    if (proto >= 3) {
        assert_int_equal(pl_pickle_type(&d, pl_pickle_dict_get(&d, root, "bytes")), PL_PICKLE_BYTES);
        check_str(&d, root, "bytes", "\x00\x01\x02", 3);
        pl_pickle_str(&d, pl_pickle_dict_get(&d, root, "long_bytes"), &n);
        assert_int_equal(n, 300);
    }
    if (proto >= 5) check_str(&d, root, "bytearray", "ba", 2);
    /* tuples of every arity */
    static const char *tk[] = {"tuple0", "tuple1", "tuple2", "tuple3", "tuple5"};
    static const size_t tn[] = {0, 1, 2, 3, 5};
    for (size_t i = 0; i < 5; i++) {
        pl_pickle_ref_t t = pl_pickle_dict_get(&d, root, tk[i]);
        assert_int_equal(pl_pickle_type(&d, t), PL_PICKLE_TUPLE);
        assert_int_equal(pl_pickle_len(&d, t), tn[i]);
        for (size_t j = 0; j < tn[i]; j++) {
            int64_t v;
            assert_int_equal(pl_pickle_int(&d, pl_pickle_item(&d, t, j), &v), 0);
            assert_int_equal(v, (int64_t)j + 1);
        }
    }
    /* a list long enough for several APPENDS batches, in order */
    pl_pickle_ref_t l = pl_pickle_dict_get(&d, root, "list");
    assert_int_equal(pl_pickle_len(&d, l), 2500);
    for (size_t j = 0; j < 2500; j += 499) {
        int64_t v;
        assert_int_equal(pl_pickle_int(&d, pl_pickle_item(&d, l, j), &v), 0);
        assert_int_equal(v, (int64_t)j);
    }
    assert_int_equal(pl_pickle_item(&d, l, 2500), PL_PICKLE_NULL);
    /* int keys, several SETITEMS batches */
    pl_pickle_ref_t dd = pl_pickle_dict_get(&d, root, "dict");
    assert_int_equal(pl_pickle_len(&d, dd), 1500);
    for (size_t j = 0; j < 1500; j += 311) {
        int64_t k, v;
        assert_int_equal(pl_pickle_int(&d, pl_pickle_dict_key(&d, dd, j), &k), 0);
        assert_int_equal(pl_pickle_int(&d, pl_pickle_dict_value(&d, dd, j), &v), 0);
        assert_int_equal(k, (int64_t)j);
        assert_int_equal(v, (int64_t)(j * j));
    }
    /* [[[]]] */
    pl_pickle_ref_t nest = pl_pickle_dict_get(&d, root, "nested");
    nest = pl_pickle_item(&d, pl_pickle_item(&d, nest, 0), 0);
    assert_int_equal(pl_pickle_type(&d, nest), PL_PICKLE_LIST);
    assert_int_equal(pl_pickle_len(&d, nest), 0);
    /* memo: one dict referenced twice is one value; a list that contains itself */
    pl_pickle_ref_t sh = pl_pickle_dict_get(&d, root, "shared");
    assert_int_equal(pl_pickle_item(&d, sh, 0), pl_pickle_item(&d, sh, 1));
    check_str(&d, pl_pickle_item(&d, sh, 0), "k", "v", 1);
    pl_pickle_ref_t self = pl_pickle_dict_get(&d, root, "selfref");
    assert_int_equal(pl_pickle_item(&d, self, 1), self);
    /* recursive tuples (POP, POP_MARK + memo get): t[0][0] is t */
    pl_pickle_ref_t rt = pl_pickle_dict_get(&d, root, "rtuple");
    assert_int_equal(pl_pickle_type(&d, rt), PL_PICKLE_TUPLE);
    assert_int_equal(pl_pickle_item(&d, pl_pickle_item(&d, rt, 0), 0), rt);
    pl_pickle_ref_t rt5 = pl_pickle_dict_get(&d, root, "rtuple5");
    assert_int_equal(pl_pickle_len(&d, rt5), 5);
    assert_int_equal(pl_pickle_item(&d, pl_pickle_item(&d, rt5, 0), 0), rt5);
    /* accessors on the wrong type */
    assert_int_equal(pl_pickle_len(&d, pl_pickle_dict_get(&d, root, "i8")), 0);
    assert_int_equal(pl_pickle_item(&d, root, 0), PL_PICKLE_NULL);
    assert_int_equal(pl_pickle_dict_get(&d, root, "absent"), PL_PICKLE_NULL);
    int64_t v;
    assert_int_equal(pl_pickle_int(&d, root, &v), -EINVAL);
    assert_null(pl_pickle_str(&d, root, &n));
    assert_int_equal(pl_pickle_type(&d, PL_PICKLE_NULL), PL_PICKLE_NONE);
    pl_pickle_doc_free(&d);
    free(b);
}

static void test_pickle_protocol2(void **state) { (void)state; check_opcodes(2); }
static void test_pickle_protocol3(void **state) { (void)state; check_opcodes(3); }
static void test_pickle_protocol4(void **state) { (void)state; check_opcodes(4); }
static void test_pickle_protocol5(void **state) { (void)state; check_opcodes(5); }

static int parse(const void *b, size_t n, pl_pickle_doc_t *d, char *err, size_t err_len) {
    return pl_pickle_parse(b, n, NULL, d, err, err_len);
}
#define PARSE_LIT(lit, d, err) parse(lit, sizeof lit - 1, d, err, sizeof err)

/* Opcodes Python writes only for huge values, built by hand. */
static void test_pickle_rare_opcodes(void **state) {
    (void)state;
    pl_pickle_doc_t d;
    char err[256];
    /* [LONG4 of 3 bytes, BINUNICODE8 "ab", BINBYTES8 "c", DUP, LONG_BINPUT / LONG_BINGET, LONG1 of 9 and 0 bytes] */
    static const unsigned char p[] = {
        0x80, 4, ']', '(',
        0x8b, 3, 0, 0, 0, 0x00, 0x80, 0xff,               /* LONG4: 3 bytes, little endian 0xff8000 -> -32768 */
        0x8d, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b',           /* BINUNICODE8 */
        0x8e, 1, 0, 0, 0, 0, 0, 0, 0, 'c',                /* BINBYTES8 */
        '2',                                              /* DUP */
        'r', 3, 0, 0, 0,                                  /* LONG_BINPUT 3 (indexes follow the values read) */
        'j', 3, 0, 0, 0,                                  /* LONG_BINGET 3 */
        0x8a, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0,               /* LONG1 of 9 bytes, sign-extended: 1 */
        0x8a, 0,                                          /* LONG1 of 0 bytes: 0 */
        'e', '.'};
    assert_int_equal(parse(p, sizeof p, &d, err, sizeof err), 0);
    assert_int_equal(pl_pickle_len(&d, d.root), 7);
    int64_t v;
    size_t n;
    assert_int_equal(pl_pickle_int(&d, pl_pickle_item(&d, d.root, 0), &v), 0);
    assert_int_equal(v, -32768);
    assert_true(pl_pickle_str_eq(&d, pl_pickle_item(&d, d.root, 1), "ab"));
    assert_int_equal(pl_pickle_type(&d, pl_pickle_item(&d, d.root, 2)), PL_PICKLE_BYTES);
    assert_memory_equal(pl_pickle_str(&d, pl_pickle_item(&d, d.root, 2), &n), "c", 1);
    assert_int_equal(pl_pickle_item(&d, d.root, 2), pl_pickle_item(&d, d.root, 3));
    assert_int_equal(pl_pickle_item(&d, d.root, 3), pl_pickle_item(&d, d.root, 4));
    assert_int_equal(pl_pickle_int(&d, pl_pickle_item(&d, d.root, 5), &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(pl_pickle_int(&d, pl_pickle_item(&d, d.root, 6), &v), 0);
    assert_int_equal(v, 0);
    pl_pickle_doc_free(&d);
}

static void expect_refused(const char *what, const unsigned char *p, size_t n, int want_rc, const char *needle) {
    pl_pickle_doc_t d;
    char err[512] = "";
    int rc = parse(p, n, &d, err, sizeof err);
    if (rc != want_rc) fail_msg("%s: rc %d (want %d): %s", what, rc, want_rc, err);
    if (!strstr(err, needle)) fail_msg("%s: '%s' not in '%s'", what, needle, err);
}

static void test_pickle_refuses_code(void **state) {
    (void)state;
    /* what pickle.dumps(os.system, 2) and friends look like: GLOBAL module\nname\n, then REDUCE */
    static const unsigned char global[] = "\x80\x02" "cos\nsystem\n" "q\x00" ".";
    expect_refused("GLOBAL", global, sizeof global - 1, -ENOTSUP, "opcode GLOBAL (0x63) refused");
    static const unsigned char sglobal[] = "\x80\x04" "\x8c\x02os\x8c\x06system\x93" ".";
    expect_refused("STACK_GLOBAL", sglobal, sizeof sglobal - 1, -ENOTSUP, "opcode STACK_GLOBAL (0x93) refused");
    static const unsigned char reduce[] = "\x80\x02" "N)R.";
    expect_refused("REDUCE", reduce, sizeof reduce - 1, -ENOTSUP, "opcode REDUCE (0x52) refused");
    static const unsigned char build[] = "\x80\x02" "}}b.";
    expect_refused("BUILD", build, sizeof build - 1, -ENOTSUP, "opcode BUILD (0x62) refused");
    static const unsigned char newobj[] = "\x80\x02" "N)\x81.";
    expect_refused("NEWOBJ", newobj, sizeof newobj - 1, -ENOTSUP, "opcode NEWOBJ (0x81) refused");
    static const unsigned char newobj_ex[] = "\x80\x04" "N)}\x92.";
    expect_refused("NEWOBJ_EX", newobj_ex, sizeof newobj_ex - 1, -ENOTSUP, "NEWOBJ_EX");
    static const unsigned char inst[] = "\x80\x02" "(ios\nsystem\n.";
    expect_refused("INST", inst, sizeof inst - 1, -ENOTSUP, "opcode INST");
    static const unsigned char obj[] = "\x80\x02" "(No.";
    expect_refused("OBJ", obj, sizeof obj - 1, -ENOTSUP, "opcode OBJ");
    static const unsigned char ext[] = "\x80\x02" "\x82\x01.";
    expect_refused("EXT1", ext, sizeof ext - 1, -ENOTSUP, "opcode EXT1");
    static const unsigned char persid[] = "\x80\x02" "N" "Q.";
    expect_refused("BINPERSID", persid, sizeof persid - 1, -ENOTSUP, "opcode BINPERSID");
    static const unsigned char buf[] = "\x80\x05" "\x97.";
    expect_refused("NEXT_BUFFER", buf, sizeof buf - 1, -ENOTSUP, "opcode NEXT_BUFFER");
    /* the refusal names its offset */
    expect_refused("offset", global, sizeof global - 1, -ENOTSUP, "offset 2:");
    /* not code, but not part of the subset either */
    static const unsigned char text_int[] = "\x80\x02" "I12\n.";
    expect_refused("INT", text_int, sizeof text_int - 1, -ENOTSUP, "opcode INT");
    static const unsigned char set[] = "\x80\x04" "\x8f.";
    expect_refused("EMPTY_SET", set, sizeof set - 1, -ENOTSUP, "EMPTY_SET");
    /* protocols */
    static const unsigned char p1[] = "}q\x00.";
    expect_refused("protocol 1", p1, sizeof p1 - 1, -ENOTSUP, "not a pickle of protocol 2..5");
    static const unsigned char p6[] = "\x80\x06N.";
    expect_refused("protocol 6", p6, sizeof p6 - 1, -ENOTSUP, "pickle protocol 6 is not supported");
}

static void test_pickle_malformed(void **state) {
    (void)state;
    struct { const char *what; const char *bytes; size_t n; const char *needle; } cases[] = {
        {"empty", "", 0, "empty input"},
        {"no STOP", "\x80\x02N", 3, "before STOP"},
        {"after STOP", "\x80\x02N.N", 5, "1 bytes after STOP"},
        {"two values", "\x80\x02NN.", 5, "2 values on the stack"},
        {"open mark", "\x80\x02(N.", 5, "open MARK"},
        {"APPEND to dict", "\x80\x02}Na.", 6, "APPEND to a dict"},
        {"SETITEM on list", "\x80\x02]NNs.", 7, "SETITEM on a list"},
        {"odd SETITEMS", "\x80\x02}(Nu.", 7, "odd number"},
        {"APPENDS no list", "\x80\x02(Ne.", 6, "APPENDS without a list"},
        {"unset memo", "\x80\x02h\x05.", 5, "memo index 5 was never stored"},
        {"empty memoize", "\x80\x04\x94.", 4, "nothing on the stack"},
        {"TUPLE2 short", "\x80\x02N\x86.", 5, "TUPLE2 needs 2 values"},
        {"too long int", "\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.", 14, "does not fit 64 bits"},
        {"long int bytes", "\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14, "does not fit 64 bits"},
        {"unknown", "\x80\x02\xff.", 4, "unknown opcode 0xff"},
        {"bad frame", "\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00N.", 13, "truncated frame"},
        {"string past end", "\x80\x04\x8c\x10" "ab.", 7, "truncated string"},
        {"pop nothing", "\x80\x02" "0.", 4, "no MARK"},
        {"second PROTO", "\x80\x02\x80\x02N.", 6, "PROTO after the start"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pl_pickle_doc_t d;
        char err[256] = "";
        int rc = parse(cases[i].bytes, cases[i].n, &d, err, sizeof err);
        if (rc != -EBADMSG) fail_msg("%s: rc %d: %s", cases[i].what, rc, err);
        if (!strstr(err, cases[i].needle)) fail_msg("%s: '%s' not in '%s'", cases[i].what, cases[i].needle, err);
    }
}

/* Every prefix of real pickles fails cleanly (ASan/UBSan runs check "cleanly"); the whole file parses. */
static void test_pickle_truncated_everywhere(void **state) {
    (void)state;
    static const char *names[] = {"basic.pickle", "basic_p2.pickle", "opcodes_p5.pickle"};
    for (size_t k = 0; k < 3; k++) {
        size_t len;
        unsigned char *b = slurp(names[k], &len);
        pl_pickle_doc_t d;
        char err[256];
        assert_int_equal(parse(b, len, &d, err, sizeof err), 0);
        pl_pickle_doc_free(&d);
        for (size_t n = 0; n < len; n++) {
            /* a copy of exactly n bytes, so ASan sees any read past the end */
            unsigned char *c = malloc(n ? n : 1);
            memcpy(c, b, n);
            int rc = parse(c, n, &d, err, sizeof err);
            if (rc != -EBADMSG) fail_msg("%s cut at %zu: rc %d (%s)", names[k], n, rc, err);
            free(c);
        }
        free(b);
    }
}

static void test_pickle_limits(void **state) {
    (void)state;
    pl_pickle_doc_t d;
    char err[256];
    /* depth: 300 nested MARKs against the default of 256, and against a limit of 8 */
    unsigned char deep[310];
    size_t n = 0;
    deep[n++] = 0x80, deep[n++] = 2;
    for (int i = 0; i < 300; i++) deep[n++] = '(';
    deep[n++] = '.';
    assert_int_equal(parse(deep, n, &d, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "nested MARKs"));
    pl_pickle_limits_t lim = {.max_depth = 8};
    static const unsigned char nine[] = "\x80\x02" "]((((((((((N" "e.";
    assert_int_equal(pl_pickle_parse(nine, sizeof nine - 1, &lim, &d, err, sizeof err), -E2BIG);
    /* memory: the opcodes fixture needs far more than 4 KiB of values */
    size_t len;
    unsigned char *b = slurp("opcodes_p4.pickle", &len);
    lim = (pl_pickle_limits_t){.max_mem_bytes = 4096};
    assert_int_equal(pl_pickle_parse(b, len, &lim, &d, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "more than 4096 bytes of memory"));
    /* ... and parses under a limit it fits */
    lim.max_mem_bytes = 1 << 20;
    assert_int_equal(pl_pickle_parse(b, len, &lim, &d, err, sizeof err), 0);
    pl_pickle_doc_free(&d);
    /* input size */
    lim = (pl_pickle_limits_t){.max_input_bytes = 1000};
    assert_int_equal(pl_pickle_parse(b, len, &lim, &d, err, sizeof err), -E2BIG);
    assert_non_null(strstr(err, "larger than the limit of 1000 bytes"));
    /* a memo index beyond the values read so far (would make the memo table huge) */
    static const unsigned char sparse[] = "\x80\x02N" "r\xff\xff\xff\x0f" ".";
    assert_int_equal(parse(sparse, sizeof sparse - 1, &d, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "memo index 268435455 is beyond the 1 values read so far"));
    free(b);
}

/* Parsing is linear: 200k list items in a single APPENDS and 100k MEMOIZE/BINGET pairs parse fast. */
static void test_pickle_linear(void **state) {
    (void)state;
    size_t cap = 2000000, n = 0;
    unsigned char *p = malloc(cap);
    p[n++] = 0x80, p[n++] = 4, p[n++] = ']', p[n++] = 0x94, p[n++] = '(';
    for (int i = 0; i < 200000; i++) p[n++] = 'K', p[n++] = (unsigned char)i;
    for (int i = 0; i < 100000; i++) p[n++] = 'N', p[n++] = 0x94, p[n++] = 'h', p[n++] = 0;
    p[n++] = 'e', p[n++] = '.';
    pl_pickle_doc_t d;
    char err[256];
    assert_int_equal(parse(p, n, &d, err, sizeof err), 0);
    assert_int_equal(pl_pickle_len(&d, d.root), 200000 + 2 * 100000);
    assert_int_equal(pl_pickle_item(&d, d.root, 200001), d.root); /* BINGET 0 is the list itself */
    pl_pickle_doc_free(&d);
    free(p);
}

int main(int argc, char **argv) {
    fixture_dir = argc > 1 ? argv[1] : "tests/fixtures/snapshots";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pickle_protocol2),       cmocka_unit_test(test_pickle_protocol3),
        cmocka_unit_test(test_pickle_protocol4),       cmocka_unit_test(test_pickle_protocol5),
        cmocka_unit_test(test_pickle_rare_opcodes),    cmocka_unit_test(test_pickle_refuses_code),
        cmocka_unit_test(test_pickle_malformed),       cmocka_unit_test(test_pickle_truncated_everywhere),
        cmocka_unit_test(test_pickle_limits),          cmocka_unit_test(test_pickle_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
