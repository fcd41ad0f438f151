/* preload/buildid.c alone: the build-id among other notes, padding, the size limits, truncated and hostile sizes,
 * an unaligned buffer, and the build-id of this test program's own loaded image. */
#include <elf.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buildid.h"

/* Append one note (header, name padded to 4, descriptor padded to 4) at buf + *at. */
static void put_note(uint8_t *buf, size_t *at, uint32_t type, const char *name, uint32_t namesz, const uint8_t *desc,
                     uint32_t descsz) {
    Elf64_Nhdr h = {.n_namesz = namesz, .n_descsz = descsz, .n_type = type};
    memcpy(buf + *at, &h, sizeof h);
    *at += sizeof h;
    memset(buf + *at, 0, ((namesz + 3u) & ~3u) + ((descsz + 3u) & ~3u));
    memcpy(buf + *at, name, namesz);
    *at += (namesz + 3u) & ~3u;
    memcpy(buf + *at, desc, descsz);
    *at += (descsz + 3u) & ~3u;
}

static const uint8_t id20[20] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0xff,
                                 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0};
static const char id20_hex[] = "0123456789abcdef00ff102030405060708090a0";

static void test_buildid_found_after_other_notes(void **state) {
    (void)state;
    uint8_t buf[512];
    size_t n = 0;
    const uint8_t abi[16] = {0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    put_note(buf, &n, NT_GNU_ABI_TAG, "GNU", 4, abi, 16);
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNUX", 5, id20, 20);   /* another vendor's name: padded to 8, skipped */
    put_note(buf, &n, NT_GNU_PROPERTY_TYPE_0, "GNU", 4, id20, 7); /* odd descriptor: padded to 8, skipped */
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id20, 20);
    char hex[129] = "untouched";
    assert_int_equal(pl_buildid_from_notes(buf, n, hex), 1);
    assert_string_equal(hex, id20_hex);
}

static void test_buildid_none(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = 0;
    put_note(buf, &n, NT_GNU_ABI_TAG, "GNU", 4, id20, 16);
    char hex[129] = "untouched";
    assert_int_equal(pl_buildid_from_notes(buf, n, hex), 0);
    assert_int_equal(pl_buildid_from_notes(buf, 0, hex), 0);
    assert_int_equal(pl_buildid_from_notes(buf, sizeof(Elf64_Nhdr) - 1, hex), 0);
    assert_string_equal(hex, "untouched");
}

/* At most 64 bytes of id (128 hex digits and the terminator fill hex[129]); a longer one is not a build-id. */
static void test_buildid_size_limit(void **state) {
    (void)state;
    uint8_t buf[512], id[65];
    for (int i = 0; i < 65; i++) id[i] = (uint8_t)(0xa0 + i);
    size_t n = 0;
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id, 65);
    char hex[130];
    memset(hex, 'z', sizeof hex);
    assert_int_equal(pl_buildid_from_notes(buf, n, hex), 0);
    n = 0;
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id, 64);
    assert_int_equal(pl_buildid_from_notes(buf, n, hex), 1);
    assert_int_equal(strlen(hex), 128);
    assert_int_equal(hex[129], 'z'); /* nothing past hex[128] */
    n = 0;
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id, 0); /* empty id: found, empty string */
    assert_int_equal(pl_buildid_from_notes(buf, n, hex), 1);
    assert_string_equal(hex, "");
}

/* Through a heap copy of exactly n bytes, so ASan sees any read past the end. */
static int parse_exact(const uint8_t *buf, size_t n, char *hex) {
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, buf, n);
    int rc = pl_buildid_from_notes(copy, n, hex);
    free(copy);
    return rc;
}

/* A descriptor or name running past the end stops the walk; huge sizes must not wrap the bounds checks. */
static void test_buildid_truncated_and_hostile(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = 0;
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id20, 20);
    char hex[129] = "untouched";
    for (size_t cut = 0; cut < n; cut++) assert_int_equal(parse_exact(buf, cut, hex), 0);
    assert_string_equal(hex, "untouched");
    static const uint32_t sizes[] = {0xffffffffu, 0xfffffffdu, 0x80000000u, 0x7fffffffu, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int field = 0; field < 2; field++) {
            n = 0;
            put_note(buf, &n, NT_GNU_ABI_TAG, "GNU", 4, id20, 4);
            put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id20, 20);
            Elf64_Nhdr h;
            memcpy(&h, buf, sizeof h);
            if (field) h.n_descsz = sizes[i];
            else h.n_namesz = sizes[i];
            memcpy(buf, &h, sizeof h); /* the first note lies about its size */
            int rc = parse_exact(buf, n, hex);
            /* Either the walk stops, or (a size that wraps to a small padded one) it lands somewhere inside the
             * buffer; it never reports an id it did not read from the buffer. */
            if (rc) assert_string_equal(hex, id20_hex);
        }
    }
}

static void test_buildid_unaligned_buffer(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = 0;
    put_note(buf, &n, NT_GNU_BUILD_ID, "GNU", 4, id20, 20);
    uint8_t shifted[260];
    memcpy(shifted + 1, buf, n);
    char hex[129];
    assert_int_equal(pl_buildid_from_notes(shifted + 1, n, hex), 1);
    assert_string_equal(hex, id20_hex);
}

/* This program's own notes, as the preload reads a loaded object's (gcc links with --build-id on Debian). */
static int own_notes(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    char *hex = data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE &&
            pl_buildid_from_notes((const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
                                  info->dlpi_phdr[i].p_memsz, hex))
            return 1;
    return 1; /* the first object is the executable */
}

static void test_buildid_own_image(void **state) {
    (void)state;
    char hex[129] = "";
    dl_iterate_phdr(own_notes, hex);
    if (!hex[0]) skip(); /* linked without --build-id */
    assert_int_equal(strlen(hex) % 2, 0);
    assert_true(strlen(hex) >= 16);
    assert_int_equal(strspn(hex, "0123456789abcdef"), strlen(hex));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buildid_found_after_other_notes),
        cmocka_unit_test(test_buildid_none),
        cmocka_unit_test(test_buildid_size_limit),
        cmocka_unit_test(test_buildid_truncated_and_hostile),
        cmocka_unit_test(test_buildid_unaligned_buffer),
        cmocka_unit_test(test_buildid_own_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
