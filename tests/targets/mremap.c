/* Target: anonymous mappings changed piece by piece, with a step after each change so a test can check the exact
 * live mmap bytes and range count at every step (tests/preload/test_preload.c has the expected table).
 * P = 4096. Step 1 is the baseline; then:
 *  2  x = mmap(100 B) (one page), a = mmap(16P)           +17P  ranges +2
 *  3  munmap(a, 2P)              head                      15P        2
 *  4  munmap(a + 14P, 2P)        tail                      13P        2
 *  5  munmap(a + 6P, 2P)         middle hole               11P        3
 *  6  c = mmap(8P); munmap(c + 4P, 4P); mremap(c, 4P, 8P, 0): grown in place      19P  4
 *  7  t = mmap(12P); mremap(c, 8P, 12P, MAYMOVE|FIXED, t): moved over t           23P  4
 *  8  mremap(t, 12P, 5P, 0)      shrink                    16P        4
 *  9  mmap(a + 2P, 2P, MAP_FIXED anonymous) over a piece    16P        5 (the piece split in two)
 * 10  mmap(a + 8P, P, MAP_FIXED file) over a piece          15P        5 (trimmed)
 * 11  mremap(x, P, 64P, MAYMOVE): moved or grown            78P        5
 * 12  munmap(a, 16P), munmap(t, 5P), munmap(x, 64P)          0P        0
 * Usage: mremap [threads]. Prints "ok" at the end. With "threads": step 1, then 4 threads x 2000 rounds of map,
 * punch a hole, move the upper part with mremap, unmap everything (the table under concurrent use), step 2: the
 * live mmap bytes and ranges of step 2 equal those of step 1. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "target.h"

#define P 4096ul

static char *map_anon(void *at, size_t n, int extra) {
    char *p = mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
    PL_CHECK(p != MAP_FAILED);
    return p;
}

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        char *m = map_anon(NULL, 8 * P, 0);
        PL_CHECK(munmap(m + P, P) == 0);                             /* [0,1) [2,8) */
        char *u = mremap(m + 2 * P, 6 * P, 10 * P, MREMAP_MAYMOVE); /* the upper piece grows or moves */
        PL_CHECK(u != MAP_FAILED);
        u[9 * P] = 1;
        PL_CHECK(munmap(m, P) == 0);
        PL_CHECK(munmap(u, 10 * P) == 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "threads")) {
        step();
        pthread_t th[4];
        for (int i = 0; i < 4; i++) PL_CHECK(pthread_create(&th[i], NULL, churn, NULL) == 0);
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        step();
        printf("ok\n");
        return 0;
    }
    step();                                           /* 1 */
    char *x = map_anon(NULL, 100, 0);
    char *a = map_anon(NULL, 16 * P, 0);
    step();                                           /* 2 */
    PL_CHECK(munmap(a, 2 * P) == 0);
    step();                                           /* 3 */
    PL_CHECK(munmap(a + 14 * P, 2 * P) == 0);
    step();                                           /* 4 */
    PL_CHECK(munmap(a + 6 * P, 2 * P) == 0);
    step();                                           /* 5 */
    char *c = map_anon(NULL, 8 * P, 0);
    PL_CHECK(munmap(c + 4 * P, 4 * P) == 0);
    PL_CHECK(mremap(c, 4 * P, 8 * P, 0) == c);
    step();                                           /* 6 */
    char *t = map_anon(NULL, 12 * P, 0);
    PL_CHECK(mremap(c, 8 * P, 12 * P, MREMAP_MAYMOVE | MREMAP_FIXED, t) == t);
    step();                                           /* 7 */
    PL_CHECK(mremap(t, 12 * P, 5 * P, 0) == t);
    step();                                           /* 8 */
    PL_CHECK(map_anon(a + 2 * P, 2 * P, MAP_FIXED) == a + 2 * P);
    step();                                           /* 9 */
    int fd = open("/proc/self/exe", O_RDONLY);
    PL_CHECK(fd >= 0);
    PL_CHECK(mmap(a + 8 * P, P, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == a + 8 * P);
    close(fd);
    step();                                           /* 10 */
    x = mremap(x, P, 64 * P, MREMAP_MAYMOVE);
    PL_CHECK(x != MAP_FAILED);
    x[63 * P] = 1;
    step();                                           /* 11 */
    PL_CHECK(munmap(a, 16 * P) == 0);
    PL_CHECK(munmap(t, 5 * P) == 0);
    PL_CHECK(munmap(x, 64 * P) == 0);
    step();                                           /* 12 */
    printf("ok\n");
    return 0;
}
