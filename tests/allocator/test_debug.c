/* tests/allocator/test_debug.c: the allocator's checks (allocator/debug.h) fire where they should, at the build's
 * debug level: PL_REQUIRE always; PL_ASSERT in a splice or merge with a broken neighbourhood at debug_level >= 1;
 * the whole-heap walk after an operation at debug_level >= 2. Each misuse runs in a child; the parent reads what
 * the child wrote on stderr. The plain build (level 0) checks that the disabled ones stay silent. */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

/* Runs fn(arg) in a child with stderr into a pipe; returns the child's wait status, its stderr in out. */
static int run_child(void (*fn)(void *), void *arg, char *out, size_t out_len) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < out_len && (r = read(fds[0], out + n, out_len - 1 - n)) > 0) n += (size_t)r;
    out[n] = 0;
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static bool aborted(int st) { return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT; }

static void require_false(void *arg) {
    int three = 3;
    PL_REQUIRE(three == 4, "three is not four:", arg);
}

static void test_debug_require_always_on(void **state) {
    (void)state;
    char out[512];
    int st = run_child(require_false, (void *)0x1234, out, sizeof out);
    assert_true(aborted(st));
    assert_non_null(strstr(out, "plateau allocator: "));
    assert_non_null(strstr(out, "test_debug.c:"));
    assert_non_null(strstr(out, "check `three == 4` failed: three is not four: 0x1234"));
}

/* Three blocks of one plain segment laid out by hand, [0, 512) [512, 1536) [1536, 4096), linked. */
typedef struct hand_seg {
    pl_segment_t seg;
    pl_block_t b[5]; /* b[3], b[4]: spares, to splice in */
} hand_seg_t;

static void hand_seg_init(hand_seg_t *h) {
    memset(h, 0, sizeof *h);
    h->seg.addr = 0x100000;
    h->seg.size_bytes = h->seg.mapped_bytes = 4096;
    h->seg.pool = PL_POOL_SMALL;
    h->seg.first = &h->b[0];
    const size_t at[3] = {0, 512, 1536}, size[3] = {512, 1024, 2560};
    for (int i = 0; i < 5; i++) {
        pl_block_set_seg(&h->b[i], &h->seg);
        h->b[i].pool = PL_POOL_SMALL;
        if (i >= 3) continue;
        h->b[i].addr = h->seg.addr + at[i];
        h->b[i].size_bytes = size[i];
        h->b[i].state = PL_BLOCK_ALLOCATED;
        h->b[i].prev = i ? &h->b[i - 1] : NULL;
        h->b[i].next = i < 2 ? &h->b[i + 1] : NULL;
    }
}

static void splice_good(void *arg) {
    (void)arg;
    hand_seg_t h;
    hand_seg_init(&h);
    /* split b[1]: its last 512 bytes become b[3] */
    h.b[1].size_bytes = 512;
    h.b[3].addr = h.b[1].addr + 512;
    h.b[3].size_bytes = 512;
    pl_block_splice(&h.seg, &h.b[1], &h.b[3], &h.b[2]);
    if (h.b[1].next != &h.b[3] || h.b[3].prev != &h.b[1] || h.b[3].next != &h.b[2] || h.b[2].prev != &h.b[3])
        _exit(5);
    /* a new first block: b[0] gives up its front half to b[4] */
    h.b[0].addr += 256;
    h.b[0].size_bytes -= 256;
    h.b[4].addr = h.seg.addr;
    h.b[4].size_bytes = 256;
    pl_block_splice(&h.seg, NULL, &h.b[4], &h.b[0]);
    if (h.seg.first != &h.b[4] || h.b[4].prev || h.b[4].next != &h.b[0] || h.b[0].prev != &h.b[4]) _exit(6);
    _exit(0);
}

static void splice_gap(void *arg) {
    (void)arg;
    hand_seg_t h;
    hand_seg_init(&h);
    h.b[1].size_bytes = 512;
    h.b[3].addr = h.b[1].addr + 1024; /* leaves a hole after b[1] */
    h.b[3].size_bytes = 512;
    pl_block_splice(&h.seg, &h.b[1], &h.b[3], &h.b[2]);
}

static void splice_not_neighbours(void *arg) {
    (void)arg;
    hand_seg_t h;
    hand_seg_init(&h);
    h.b[3].addr = h.b[0].addr + 512;
    h.b[3].size_bytes = 0; /* and b[0], b[2] are not neighbours */
    pl_block_splice(&h.seg, &h.b[0], &h.b[3], &h.b[2]);
}

static void merge_free_block(void *arg) {
    (void)arg;
    hand_seg_t h;
    hand_seg_init(&h);
    h.b[1].state = PL_BLOCK_FREE; /* still in the bins: merging it would leave a dangling treap node */
    pl_block_merge(NULL, &h.b[0], &h.b[1]);
}

static void merge_pending_events(void *arg) {
    (void)arg;
    hand_seg_t h;
    hand_seg_init(&h);
    h.b[1].event_count = 1;
    pl_block_merge(NULL, &h.b[0], &h.b[1]);
}

static void test_debug_splice_merge_asserts(void **state) {
    (void)state;
    char out[512];
    assert_int_equal(run_child(splice_good, NULL, out, sizeof out), 0); /* exit status 0, no signal */
    assert_string_equal(out, "");
    void (*const broken[])(void *) = {splice_gap, splice_not_neighbours, merge_free_block, merge_pending_events};
    const char *const what[] = {"p->addr + p->size_bytes == n->addr", "p->next == q", "l->state != PL_BLOCK_FREE",
                                "r->event_count == 0"};
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        if (PL_DEBUG < 1) {
            /* level 0: no check, the broken splice goes through (merge's would reach the NULL allocator) */
            if (i < 2) assert_int_equal(run_child(broken[i], NULL, out, sizeof out), 0);
            continue;
        }
        int st = run_child(broken[i], NULL, out, sizeof out);
        if (!aborted(st)) fail_msg("case %zu: the broken %s was not stopped", i, i < 2 ? "splice" : "merge");
        assert_non_null(strstr(out, "internal.h:"));
        if (!strstr(out, what[i])) fail_msg("case %zu: expected `%s` in: %s", i, what[i], out);
    }
}

/* A heap whose books disagree with its blocks (reserved_bytes off by a page) is stopped at the next malloc when
 * the expensive checks are on; with them off the malloc succeeds. */
static void corrupt_then_malloc(void *arg) {
    (void)arg;
    fixture_t f;
    fx_open(&f, (size_t)1 << 30, false, "");
    void *p = pl_alloc_malloc(f.a, 4096, 0);
    f.a->reserved_bytes += 512;
    void *q = pl_alloc_malloc(f.a, 4096, 0);
    _exit(p && q ? 0 : 4);
}

static void test_debug_expensive_check_after_malloc(void **state) {
    (void)state;
    char out[1024];
    int st = run_child(corrupt_then_malloc, NULL, out, sizeof out);
    if (!PL_EXPENSIVE) {
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        return;
    }
    assert_true(aborted(st));
    assert_non_null(strstr(out, "alloc.c:"));
    if (!strstr(out, "check `pl_alloc_check` failed: reserved")) fail_msg("unexpected message: %s", out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_debug_require_always_on),
        cmocka_unit_test(test_debug_splice_merge_asserts),
        cmocka_unit_test(test_debug_expensive_check_after_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
