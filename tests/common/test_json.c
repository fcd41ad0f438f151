/* common/json: the emitter's commas, layout, escaping and number formats (every JSON golden rests on these bytes),
 * and that misuse is reported rather than written. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json.h"

typedef struct {
    char *buf;
    size_t len;
    FILE *f;
    pl_json_t j;
} doc_t;

static void doc_open(doc_t *d, unsigned flags) {
    d->buf = NULL;
    d->f = open_memstream(&d->buf, &d->len);
    assert_non_null(d->f);
    pl_json_init(&d->j, d->f, flags);
}

/* closes the stream, checks the document's bytes and pl_json_done's verdict */
static void doc_check(doc_t *d, const char *want, int want_rc) {
    int rc = pl_json_done(&d->j);
    fclose(d->f);
    assert_int_equal(rc, want_rc);
    if (want) assert_string_equal(d->buf, want);
    free(d->buf);
}

static void test_json_inline_commas(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0);
    pl_json_object(&d.j);
    pl_json_kint(&d.j, "a", -1);
    pl_json_key(&d.j, "b");
    pl_json_array(&d.j);
    pl_json_uint(&d.j, 18446744073709551615ull);
    pl_json_null(&d.j);
    pl_json_bool(&d.j, true);
    pl_json_end(&d.j);
    pl_json_key(&d.j, "c");
    pl_json_array(&d.j);
    pl_json_end(&d.j);
    pl_json_kbool(&d.j, "d", false);
    pl_json_end(&d.j);
    doc_check(&d, "{\"a\": -1, \"b\": [18446744073709551615, null, true], \"c\": [], \"d\": false}\n", 0);

    doc_open(&d, PL_JSON_COMPACT);
    pl_json_object(&d.j);
    pl_json_kint(&d.j, "a", 1);
    pl_json_key(&d.j, "b");
    pl_json_object(&d.j);
    pl_json_kstr(&d.j, "c", "x");
    pl_json_kuint(&d.j, "d", 2);
    pl_json_end(&d.j);
    pl_json_end(&d.j);
    doc_check(&d, "{\"a\":1,\"b\":{\"c\":\"x\",\"d\":2}}\n", 0);

    doc_open(&d, PL_JSON_COMPACT | PL_JSON_NO_NEWLINE);
    pl_json_array(&d.j);
    pl_json_int(&d.j, 1);
    pl_json_int(&d.j, 2);
    pl_json_end(&d.j);
    doc_check(&d, "[1,2]", 0);
}

/* blocks indent two spaces past the line they opened on; empty blocks stay on one line */
static void test_json_block_layout(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0);
    pl_json_object_block(&d.j);
    pl_json_kint(&d.j, "n", 1);
    pl_json_key(&d.j, "list");
    pl_json_array_block(&d.j);
    pl_json_object_block(&d.j);
    pl_json_kstr(&d.j, "k", "v");
    pl_json_key(&d.j, "empty");
    pl_json_array_block(&d.j);
    pl_json_end(&d.j);
    pl_json_end(&d.j);
    pl_json_object(&d.j);
    pl_json_end(&d.j);
    pl_json_end(&d.j);
    pl_json_end(&d.j);
    doc_check(&d,
              "{\n"
              "  \"n\": 1,\n"
              "  \"list\": [\n"
              "    {\n"
              "      \"k\": \"v\",\n"
              "      \"empty\": []\n"
              "    },\n"
              "    {}\n"
              "  ]\n"
              "}\n",
              0);
}

/* a break wraps an inline container before its next item or its closing bracket, once */
static void test_json_break(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0);
    pl_json_object(&d.j);
    pl_json_kint(&d.j, "a", 1);
    pl_json_break(&d.j, 3);
    pl_json_kint(&d.j, "b", 2);
    pl_json_kint(&d.j, "c", 3);
    pl_json_key(&d.j, "d");
    pl_json_array_block(&d.j); /* opened on the line indented 3: items at 5, the bracket at 3 */
    pl_json_int(&d.j, 4);
    pl_json_end(&d.j);
    pl_json_key(&d.j, "e");
    pl_json_array(&d.j);
    pl_json_break(&d.j, 1);
    pl_json_end(&d.j);
    pl_json_end(&d.j);
    doc_check(&d, "{\"a\": 1,\n   \"b\": 2, \"c\": 3, \"d\": [\n     4\n   ], \"e\": [\n ]}\n", 0);
}

static void test_json_escape(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0);
    pl_json_array(&d.j);
    pl_json_str(&d.j, "q\"b\\n\nt\tc\x01\x1f\x7f" "e\xc3\xa9 bad\xff\xc3");
    pl_json_str(&d.j, NULL);
    pl_json_str_or_null(&d.j, NULL);
    pl_json_end(&d.j);
    doc_check(&d, "[\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001f\\u007fe\xc3\xa9 bad\xff\xc3\", \"\", null]\n", 0);
}

/* %.10g, null for NaN and infinities, and caller formats as they are */
static void test_json_numbers(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0);
    pl_json_array(&d.j);
    pl_json_num(&d.j, 0.1 + 0.2);
    pl_json_num(&d.j, 1e21);
    pl_json_num(&d.j, 1234567890.0);
    pl_json_num(&d.j, 12345678901.0);
    pl_json_num(&d.j, -0.0);
    pl_json_num(&d.j, NAN);
    pl_json_num(&d.j, -INFINITY);
    pl_json_numf(&d.j, "%.6f", 1.5);
    pl_json_numf(&d.j, "%lld.%03lld", 12LL, 7LL);
    pl_json_end(&d.j);
    doc_check(&d, "[0.3, 1e+21, 1234567890, 1.23456789e+10, -0, null, null, 1.500000, 12.007]\n", 0);
}

static void test_json_misuse(void **state) {
    (void)state;
    doc_t d;
    doc_open(&d, 0); /* a value where a key is due */
    pl_json_object(&d.j);
    pl_json_int(&d.j, 1);
    pl_json_end(&d.j);
    doc_check(&d, "{", -EINVAL);

    doc_open(&d, 0); /* a key in an array */
    pl_json_array(&d.j);
    pl_json_key(&d.j, "k");
    doc_check(&d, "[", -EINVAL);

    doc_open(&d, 0); /* a key without its value */
    pl_json_object(&d.j);
    pl_json_key(&d.j, "k");
    pl_json_end(&d.j);
    doc_check(&d, "{\"k\": ", -EINVAL);

    doc_open(&d, 0); /* left open, and a second top-level value */
    pl_json_array(&d.j);
    doc_check(&d, "[", -EINVAL);
    doc_open(&d, 0);
    pl_json_null(&d.j);
    pl_json_null(&d.j);
    doc_check(&d, "null", -EINVAL);

    doc_open(&d, 0); /* an end with nothing open */
    pl_json_end(&d.j);
    doc_check(&d, "", -EINVAL);

    doc_open(&d, 0); /* too deep */
    for (int i = 0; i <= PL_JSON_MAX_DEPTH; i++) pl_json_array(&d.j);
    for (int i = 0; i <= PL_JSON_MAX_DEPTH; i++) pl_json_end(&d.j);
    doc_check(&d, NULL, -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_inline_commas), cmocka_unit_test(test_json_block_layout),
        cmocka_unit_test(test_json_break),         cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_json_numbers),       cmocka_unit_test(test_json_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
