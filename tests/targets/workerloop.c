/* Target: a trainer that marks its steps and one forked worker whose loop marks nothing (a DataLoader worker's:
 * each batch a few large buffers, made and freed, nothing kept). Period detection finds the worker's loop from its
 * allocations (each buffer is far above the sampling mean, so every one is recorded); the worker stays a worker,
 * quiet, folded with the steps it has (docs/verdict.md §8). The trainer steps until the worker has exited.
 * Usage: workerloop [BATCHES] (default 80). Recorded under plateau run with PLATEAU_TRACE_FULL=1 as
 * tests/fixtures/runs/worker_loop_quiet.tar.xz (tests/cli/test_worker_loop.sh). */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

static void nap_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* the buffer is used: the compiler may not drop a malloc/free pair it can see through */
static void use(char *p, size_t n) {
    memset(p, 1, 4096);
    p[n - 1] = 2;
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* one batch: four buffers from four call sites, made and freed */
static void batch(void) {
    char *a = malloc(3u << 20);
    PL_CHECK(a);
    use(a, 3u << 20);
    char *b = malloc(4u << 20);
    PL_CHECK(b);
    use(b, 4u << 20);
    free(a);
    char *c = malloc(5u << 20);
    PL_CHECK(c);
    use(c, 5u << 20);
    char *d = malloc(6u << 20);
    PL_CHECK(d);
    use(d, 6u << 20);
    free(b);
    free(c);
    free(d);
}

int main(int argc, char **argv) {
    int batches = arg_int(argc, argv, 1, 80);
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < batches; i++) {
            batch();
            nap_ms(5);
        }
        return 0;
    }
    int status = 0;
    for (;;) { /* the trainer: a small temporary per step, until the worker is done */
        char *t = malloc(1000);
        PL_CHECK(t);
        use(t, 1000);
        free(t);
        nap_ms(10);
        step();
        pid_t w = waitpid(pid, &status, WNOHANG);
        PL_CHECK(w >= 0);
        if (w == pid) break;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
