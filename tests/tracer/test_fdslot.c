/* Descriptor slots (tracer/write/fdslot.c): a slot's descriptor sits high, is refused once its number names another
 * file, and steps aside when the program takes its number. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "fdslot.h"

static int open_tmp(char *path) {
    strcpy(path, "/tmp/pl-test-fdslot-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

static void test_fdslot_set_moves_high_and_acquires(void **state) {
    (void)state;
    char path[64];
    int low = open_tmp(path);
    pl_fdslot_t s = PL_FDSLOT_INIT;
    assert_int_equal(pl_fdslot_fd(&s), -1);
    assert_int_equal(pl_fdslot_set(&s, low), 0);
    int fd = pl_fdslot_fd(&s);
    assert_true(fd >= pl_fdslot_high_hint());
    assert_int_equal(fcntl(low, F_GETFD), -1); /* the low number is free again */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_true(pl_fdslot_owns(&s, fd));
    assert_false(pl_fdslot_owns(&s, low));
    assert_int_equal(pl_fdslot_acquire(&s), fd);
    pl_fdslot_release(&s);
    pl_fdslot_close(&s);
    assert_int_equal(pl_fdslot_fd(&s), -1);
    assert_int_equal(fcntl(fd, F_GETFD), -1);
    unlink(path);
}

/* A zeroed slot is empty: closing it must not close descriptor 0. */
static void test_fdslot_zeroed_is_empty(void **state) {
    (void)state;
    pl_fdslot_t s;
    memset(&s, 0, sizeof s);
    assert_false(pl_fdslot_owns(&s, 0));
    assert_int_equal(pl_fdslot_acquire(&s), -EBADF);
    pl_fdslot_release(&s);
    pl_fdslot_close(&s);
    assert_true(fcntl(0, F_GETFD) >= 0);
}

/* The number now names another file (a raw close + open, or dup2 behind the slot's back): refused, forgotten,
 * and the other file left open. */
static void test_fdslot_refuses_a_number_it_no_longer_owns(void **state) {
    (void)state;
    char p1[64], p2[64];
    pl_fdslot_t s = PL_FDSLOT_INIT;
    assert_int_equal(pl_fdslot_set(&s, open_tmp(p1)), 0);
    int fd = pl_fdslot_fd(&s);
    int other = open_tmp(p2);
    assert_int_equal(dup2(other, fd), fd);
    assert_int_equal(pl_fdslot_acquire(&s), -EBADF);
    pl_fdslot_release(&s);
    assert_int_equal(pl_fdslot_fd(&s), -1);
    pl_fdslot_close(&s);
    assert_true(fcntl(fd, F_GETFD) >= 0); /* not ours: never closed */
    close(fd);
    close(other);
    unlink(p1);
    unlink(p2);
}

/* dup2 onto the slot's number, announced: the slot moves to another number, same file; the old number is left
 * for the program. */
static void test_fdslot_displace_keeps_the_file(void **state) {
    (void)state;
    char p1[64];
    pl_fdslot_t s = PL_FDSLOT_INIT;
    assert_int_equal(pl_fdslot_set(&s, open_tmp(p1)), 0);
    int fd = pl_fdslot_fd(&s);
    assert_false(pl_fdslot_displace(&s, fd + 1));
    assert_int_equal(pl_fdslot_fd(&s), fd);
    assert_true(pl_fdslot_displace(&s, fd));
    int moved = pl_fdslot_fd(&s);
    assert_true(moved >= 0 && moved != fd);
    assert_int_equal(write(pl_fdslot_acquire(&s), "x", 1), 1);
    pl_fdslot_release(&s);
    struct stat a, b;
    assert_int_equal(stat(p1, &a), 0);
    assert_int_equal(fstat(moved, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
    assert_int_equal(a.st_size, 1);
    close(fd); /* the program's dup2 would replace it */
    pl_fdslot_close(&s);
    unlink(p1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fdslot_set_moves_high_and_acquires),
        cmocka_unit_test(test_fdslot_zeroed_is_empty),
        cmocka_unit_test(test_fdslot_refuses_a_number_it_no_longer_owns),
        cmocka_unit_test(test_fdslot_displace_keeps_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
