/* Integration: the preload in real programs (tests/targets). Each test runs a target under LD_PRELOAD in a
 * fresh run directory and checks its trace(s) through the reader API. Env (set by meson): PL_PRELOAD (the
 * library), PL_TARGETS (directory of target_* programs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "trace_summary.h"
#include "../common/files.h"
#include "../common/spawn.h"
#include "../common/tmpdir.h"

static const char *preload, *targets;
static char run_dir[256];
static char out_buf[65536], err_buf[65536];
static char *notes_buf; /* the run directory's plateau-notes after run(): the preload's notes ("" if none) */
static rlim_t fsize_limit; /* > 0: file size limit for the target, to simulate a full disk */
static rlim_t as_limit;    /* > 0: address-space limit (RLIMIT_AS) for the target */

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(run_dir, sizeof run_dir, "preload");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(run_dir);
}

static void clean_run_dir(void) {
    DIR *d = opendir(run_dir);
    assert_non_null(d);
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", run_dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}


/* In the child: the preload, the run directory, the file-size limit, then extra "K=V" entries (ctx). */
static void child_env(void *ctx) {
    const char *const *env = ctx;
    setenv("LD_PRELOAD", preload, 1);
    setenv("PLATEAU_DIR", run_dir, 1);
    setenv("PLATEAU_QUIET", "1", 1);
    if (fsize_limit) {
        signal(SIGXFSZ, SIG_IGN); /* ignored dispositions survive exec: writes fail with EFBIG */
        struct rlimit rl = {fsize_limit, fsize_limit};
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    if (as_limit) {
        struct rlimit rl = {as_limit, as_limit};
        setrlimit(RLIMIT_AS, &rl);
    }
    for (int i = 0; env && env[i]; i++) putenv((char *)(uintptr_t)env[i]);
}

/* Start argv under the preload with extra "K=V" env entries; stdout/stderr go to pipes. */
static pid_t start(char *const argv[], const char *const env[], int *out_fd, int *err_fd) {
    pid_t pid = pl_test_spawn(argv, child_env, (void *)(uintptr_t)env, out_fd, err_fd);
    assert_true(pid > 0);
    return pid;
}

static int run(char *const argv[], const char *const env[]) {
    int o, e;
    clean_run_dir();
    pid_t pid = start(argv, env, &o, &e);
    int rc = pl_test_finish(pid, o, e, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
    assert_true(rc >= 0);
    if (rc != 0) fprintf(stderr, "target stderr:\n%s\n", err_buf);
    free(notes_buf);
    notes_buf = pl_test_slurp(run_dir, PL_TRACE_NOTES_FILE, NULL);
    if (!notes_buf) notes_buf = calloc(1, 1);
    assert_non_null(notes_buf);
    return rc;
}

static char *target(const char *name) {
    static char paths[8][512];
    static int k;
    char *p = paths[k++ % 8];
    snprintf(p, 512, "%s/target_%s", targets, name);
    return p;
}

/* Trace files in the run directory, sorted by name. */
static int list_traces(char paths[][600], int max) {
    DIR *d = opendir(run_dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n < max)
        if (strstr(e->d_name, ".pltrace")) snprintf(paths[n++], 600, "%s/%s", run_dir, e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(paths[i], paths[j]) > 0) {
                char t[600];
                memcpy(t, paths[i], 600);
                memcpy(paths[i], paths[j], 600);
                memcpy(paths[j], t, 600);
            }
    return n;
}

static summary_t sum;

static void summarize_only(const char *symbol) {
    char paths[4][600];
    assert_int_equal(list_traces(paths, 4), 1);
    summarize(paths[0], symbol, &sum);
    if (sum.rc != 0) fprintf(stderr, "reader: %s\n", sum.err);
    assert_int_equal(sum.rc, 0);
    assert_true(sum.has_start);
}

static void test_preload_leak_named_with_growing_live_bytes(void **state) {
    (void)state;
    char *argv[] = {target("leak"), "30", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only("leak_function");
    assert_true(sum.has_end);
    assert_int_equal(sum.n_steps, 30);
    assert_int_equal(sum.sample_bytes, 0);
    assert_true(sum.n_sym_stacks >= 1);
    /* Every step adds exactly the 16 blocks of leak_function to the live bytes of its stacks. */
    int64_t per_step = sum.sym_live_at_step[2] - sum.sym_live_at_step[1];
    assert_true(per_step >= 16 * 4000 && per_step <= 16 * 4096);
    for (int s = 2; s <= 30; s++) assert_int_equal(sum.sym_live_at_step[s] - sum.sym_live_at_step[s - 1], per_step);
    /* Exact heap totals grow by at least as much. */
    assert_true(sum.heap_at_step[30].live_bytes - sum.heap_at_step[1].live_bytes >= 29 * per_step);
    assert_int_equal(sum.heap_at_step[30].live_count - sum.heap_at_step[1].live_count, 29 * 16);
}

static void test_preload_leak_found_by_sampling(void **state) {
    (void)state;
    char *argv[] = {target("leak"), "60", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=32K", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only("leak_function");
    assert_int_equal(sum.sample_bytes, 32768);
    assert_true(sum.n_sym_stacks >= 1);
    assert_true(sum.sym_live_at_step[60] > sum.sym_live_at_step[10]);
    assert_true(sum.sym_live_at_step[60] >= 20 * 4000);
    assert_true(sum.n_frame_named > 0);
}

static void test_preload_plateau_is_flat_after_warmup(void **state) {
    (void)state;
    char *argv[] = {target("plateau"), "40", "10", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only("cache_fill");
    assert_int_equal(sum.n_steps, 40);
    assert_true(sum.heap_at_step[10].live_bytes - sum.heap_at_step[1].live_bytes >= 9 * 16 * 4096);
    for (int s = 11; s <= 40; s++) {
        assert_int_equal(sum.heap_at_step[s].live_bytes, sum.heap_at_step[11].live_bytes);
        assert_int_equal(sum.heap_at_step[s].live_count, sum.heap_at_step[11].live_count);
        assert_int_equal(sum.sym_live_at_step[s], sum.sym_live_at_step[10]);
    }
    assert_true(sum.sym_live_at_step[10] >= 10 * 16 * 4096);
}

static void test_preload_storm_8_threads_exact_totals(void **state) {
    (void)state;
    char *argv[] = {target("storm"), "100000", "8", NULL};
    assert_int_equal(run(argv, NULL), 0);
    unsigned long kept = 0, kept_bytes = 0;
    assert_int_equal(sscanf(out_buf, "kept %lu %lu", &kept, &kept_bytes), 2);
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 2);
    pl_rec_heap_t a = sum.heap_at_step[1], b = sum.heap_at_step[2];
    assert_int_equal(b.live_count - a.live_count, (int64_t)kept);
    assert_int_equal(b.live_bytes - a.live_bytes, (int64_t)kept_bytes);
    /* Every iteration allocates once (realloc's malloc(16) twice), plus handoff and kept blocks. */
    assert_true(b.n_alloc - a.n_alloc >= 8ull * (100000 + 256 + 100));
    assert_int_equal((b.n_alloc - a.n_alloc) - (b.n_free - a.n_free), kept);
}

static void test_preload_fork_exec_traces_linked(void **state) {
    (void)state;
    char *argv[] = {target("forkexec"), NULL};
    assert_int_equal(run(argv, NULL), 0);
    char paths[8][600];
    int n = list_traces(paths, 8);
    assert_int_equal(n, 3);
    summary_t s[3];
    int parent = -1, child = -1, image = -1;
    for (int i = 0; i < 3; i++) {
        summarize(paths[i], NULL, &s[i]);
        assert_int_equal(s[i].rc, 0);
        assert_true(s[i].has_start);
    }
    for (int i = 0; i < 3; i++)
        if (s[i].has_exec) child = i;
        else if (!strcmp(s[i].argv1, "exec")) image = i;
        else parent = i;
    assert_true(parent >= 0 && child >= 0 && image >= 0);
    assert_int_equal(s[child].ppid, s[parent].pid);
    assert_int_equal(s[child].header.ppid, s[parent].pid);
    assert_int_equal(s[image].pid, s[child].pid);
    assert_int_equal(s[image].ppid, s[parent].pid);
    assert_int_equal(s[image].exec_seq, s[child].exec_seq + 1);
    assert_int_equal(s[parent].n_steps, 2);
    assert_int_equal(s[child].n_steps, 1);
    assert_int_equal(s[image].n_steps, 1);
    assert_true(s[parent].has_end && s[image].has_end);
    assert_false(s[child].has_end); /* exec replaced it */
}

static void test_preload_sigkill_leaves_readable_trace(void **state) {
    (void)state;
    clean_run_dir();
    char *argv[] = {target("spin"), "40", NULL};
    int o, e;
    pid_t pid = start(argv, NULL, &o, &e);
    char line[16] = {0};
    assert_true(read(o, line, sizeof line - 1) > 0);
    assert_non_null(strstr(line, "ready"));
    /* Wait (up to 10 s on a loaded machine) until the writer thread has flushed 40 steps, then kill. */
    char paths0[2][600];
    for (int tries = 0; tries < 200; tries++) {
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        if (list_traces(paths0, 2) != 1) continue;
        summarize(paths0[0], NULL, &sum);
        if (sum.n_steps >= 40 && sum.n_rss >= 2) break;
    }
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    close(o);
    close(e);
    char paths[2][600];
    assert_int_equal(list_traces(paths, 2), 1);
    summarize(paths[0], NULL, &sum);
    /* Readable up to the last flushed chunk: a clean end (or a clean stop with a message). */
    assert_true(sum.rc == 0 || (sum.rc == -EBADMSG && strstr(sum.err, "offset")));
    assert_true(sum.has_start);
    assert_false(sum.has_end);
    assert_true(sum.n_steps >= 40);
    assert_true(sum.n_rss >= 2);
}

static void test_preload_python_ctypes_step_and_mark(void **state) {
    (void)state;
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import ctypes\n"
                    "lib = ctypes.CDLL(None)\n"
                    "for _ in range(5): lib.plateau_step()\n"
                    "lib.plateau_mark(b'done')\n",
                    NULL};
    assert_int_equal(run(argv, NULL), 0);
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 5);
    assert_true(sum.n_rss_step >= 1); /* RSS samples taken for steps */
    assert_int_equal(sum.n_marks, 1);
    assert_string_equal(sum.last_mark, "done");
    assert_true(sum.heap_at_step[5].n_alloc > 1000); /* the interpreter's allocations are counted */
}

static void test_preload_sigusr2_marks_steps_when_asked(void **state) {
    (void)state;
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import os, signal, time\n"
                    "for _ in range(3):\n"
                    "    os.kill(os.getpid(), signal.SIGUSR2)\n"
                    "    time.sleep(0.1)\n",
                    NULL};
    const char *env[] = {"PLATEAU_STEP_SIGNAL=1", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 3);
    assert_int_equal(sum.n_signal_steps, 3);
}

static void test_preload_device_events_from_allocator_hook(void **state) {
    (void)state;
    char *argv[] = {target("device"), "10", NULL};
    assert_int_equal(run(argv, NULL), 0);
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 10);
    assert_int_equal(sum.n_dev[PL_REC_DEVICE_ALLOC], 10 * 9);
    assert_true(sum.n_dev[PL_REC_DEVICE_FREE] >= 10 * 8);
    assert_true(sum.n_dev[PL_REC_DEVICE_MAP] >= 1);
    assert_int_equal(sum.n_alloc_stats, 10 + 1); /* one per step and a last one at destroy */
    for (int s = 1; s <= 10; s++) assert_int_equal(sum.dev_live_blocks_at_step[s], s);
}

static void test_preload_malformed_env_uses_defaults(void **state) {
    (void)state;
    char *argv[] = {target("leak"), "3", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=lots", "PLATEAU_INTERVAL_MS=0", "PLATEAU_STEP_SIGNAL=maybe", NULL};
    assert_int_equal(run(argv, env), 0);
    assert_non_null(strstr(notes_buf, "PLATEAU_SAMPLE_BYTES='lots'"));
    assert_non_null(strstr(notes_buf, "PLATEAU_INTERVAL_MS='0'"));
    assert_non_null(strstr(notes_buf, "PLATEAU_STEP_SIGNAL='maybe'"));
    assert_null(strstr(err_buf, "plateau")); /* plateau's own channel, never the program's stderr */
    summarize_only(NULL);
    assert_int_equal(sum.sample_bytes, 512 * 1024);
    assert_int_equal(sum.n_steps, 3);
}

static void test_preload_jemalloc_host_allocator(void **state) {
    (void)state;
    const char *je = PL_JEMALLOC_PATH; /* config.h: "" when the build found none */
    if (access(je, R_OK) != 0) skip();
    char *argv[] = {target("leak"), "10", NULL};
    char lp[1100];
    snprintf(lp, sizeof lp, "LD_PRELOAD=%s:%s", preload, je);
    const char *env[] = {lp, "PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only("leak_function");
    assert_int_equal(sum.n_steps, 10);
    int64_t per_step = sum.sym_live_at_step[2] - sum.sym_live_at_step[1];
    assert_true(per_step >= 16 * 4000);
    assert_int_equal(sum.sym_live_at_step[10] - sum.sym_live_at_step[1], 9 * per_step);
}

/* What summarize() does not keep: the recorded host allocator, the step records and the lost-record total. */
typedef struct {
    char allocator[64], allocator_version[128];
    int n_steps;
    uint64_t n_lost;
    int n_lost_records;
} extra_t;

static void read_extra(extra_t *x) {
    char paths[4][600];
    assert_int_equal(list_traces(paths, 4), 1);
    memset(x, 0, sizeof *x);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(paths[0], &r), 0);
    assert_int_equal(pl_trace_header(r)->version_minor, PL_TRACE_VERSION_MINOR);
    pl_trace_record_t rec;
    int rc;
    while ((rc = pl_trace_next(r, &rec)) == 1) {
        if (rec.type == PL_REC_PROCESS_START) {
            snprintf(x->allocator, sizeof x->allocator, "%s", rec.u.process.host_allocator);
            snprintf(x->allocator_version, sizeof x->allocator_version, "%s", rec.u.process.host_allocator_version);
        } else if (rec.type == PL_REC_STEP) {
            x->n_steps++;
        } else if (rec.type == PL_REC_LOST) {
            x->n_lost += rec.u.lost.n_records;
            x->n_lost_records++;
        }
    }
    assert_int_equal(rc, 0);
    pl_trace_close(r);
}

/* The same leak on glibc and on jemalloc: the allocator is recorded in process_start, and the live heap (malloc
 * bytes + the program's anonymous mappings) grows by the same amount per step under both. jemalloc's own extent
 * mappings (made inside malloc) are not counted as the program's; the program's own mapping still is. */
static void test_preload_heap_growth_same_on_glibc_and_jemalloc(void **state) {
    (void)state;
    const char *je = PL_JEMALLOC_PATH; /* config.h: "" when the build found none */
    if (access(je, R_OK) != 0) skip();
    enum { STEPS = 20 };
    char steps[8];
    snprintf(steps, sizeof steps, "%d", STEPS);
    char *argv[] = {target("heapmix"), steps, NULL};
    char lp[1100];
    snprintf(lp, sizeof lp, "LD_PRELOAD=%s:%s", preload, je);
    double growth[2];
    for (int k = 0; k < 2; k++) {
        const char *env[] = {"PLATEAU_SAMPLE_BYTES=1M", k ? lp : NULL, NULL};
        assert_int_equal(run(argv, env), 0);
        extra_t x;
        read_extra(&x);
        assert_string_equal(x.allocator, k ? "jemalloc" : "glibc");
        assert_true(x.allocator_version[0] != 0);
        summarize_only(NULL);
        assert_int_equal(sum.n_steps, STEPS);
        const pl_rec_heap_t *a = &sum.heap_at_step[2], *b = &sum.heap_at_step[STEPS];
        /* the program's own mapping: exactly 64 KiB per step under both allocators */
        assert_int_equal(b->mmap_live_bytes - a->mmap_live_bytes, (int64_t)(STEPS - 2) * 64 * 1024);
        growth[k] = (double)(b->live_bytes + b->mmap_live_bytes - a->live_bytes - a->mmap_live_bytes) / (STEPS - 2);
        fprintf(stderr, "heapmix on %s (%s): %.0f B/step\n", x.allocator, x.allocator_version, growth[k]);
        assert_true(growth[k] >= 16 * 4000 + 300 * 1024 + 64 * 1024);
    }
    double rel = growth[1] / growth[0];
    assert_true(rel > 0.9 && rel < 1.1);
}

/* Every allocator entry a C++ program uses is counted once, whichever allocator serves it: jemalloc defines its own
 * operators new and delete, which never call malloc, while its operator delete(void *) frees through free (counted
 * alone, the deletes drove the live count below zero). The target is a non-PIE executable that takes the address
 * of malloc: its canonical PLT entry is what dlsym(RTLD_DEFAULT, "malloc") returns, and it must not name the
 * allocator after the executable. Between steps 1 and 2 the target allocates N blocks, between 2 and 3 it frees
 * them: the counts move by exactly N and the live count and bytes come back. */
static void test_preload_cxx_counts_exact_on_glibc_and_jemalloc(void **state) {
    (void)state;
    const char *je = PL_JEMALLOC_PATH; /* config.h: "" when the build found none */
    if (access(target("heapcxx"), X_OK) != 0) skip(); /* no C++ compiler at build time */
    enum { N_BLOCKS = 64 };
    char *argv[] = {target("heapcxx"), NULL};
    char lp[1100];
    snprintf(lp, sizeof lp, "LD_PRELOAD=%s:%s", preload, je);
    for (int k = 0; k < 2; k++) {
        if (k && access(je, R_OK) != 0) skip();
        const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", k ? lp : NULL, NULL};
        assert_int_equal(run(argv, env), 0);
        extra_t x;
        read_extra(&x);
        assert_string_equal(x.allocator, k ? "jemalloc" : "glibc");
        summarize_only(NULL);
        assert_int_equal(sum.n_steps, 3);
        const pl_rec_heap_t *a = &sum.heap_at_step[1], *b = &sum.heap_at_step[2], *c = &sum.heap_at_step[3];
        fprintf(stderr, "heapcxx on %s: live_count %lld -> %lld -> %lld, n_alloc +%llu, n_free +%llu\n",
                x.allocator, (long long)a->live_count, (long long)b->live_count, (long long)c->live_count,
                (unsigned long long)(c->n_alloc - a->n_alloc), (unsigned long long)(c->n_free - a->n_free));
        assert_true(a->live_count >= 0);
        assert_int_equal(b->n_alloc - a->n_alloc, N_BLOCKS);
        assert_int_equal(b->n_free - a->n_free, 0);
        assert_int_equal(b->live_count - a->live_count, N_BLOCKS);
        assert_true(b->live_bytes - a->live_bytes >= 8 * (100 + 200 + 300 + 4 + 400 + 500 + 64 + 192));
        assert_int_equal(c->n_alloc - b->n_alloc, 0);
        assert_int_equal(c->n_free - b->n_free, N_BLOCKS);
        assert_int_equal(c->live_count, a->live_count);
        assert_int_equal(c->live_bytes, a->live_bytes);
    }
}

/* Steps during a storm that overflows the writer (every allocation sampled, the smallest buffers, a slow flush):
 * allocation records are lost and counted, but every step and mark record is in the trace. */
static void test_preload_steps_survive_writer_overflow(void **state) {
    (void)state;
    char *argv[] = {target("stepstorm"), "100", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", "PLATEAU_BUFFER_BYTES=256", "PLATEAU_FLUSH_MS=1000", NULL};
    assert_int_equal(run(argv, env), 0);
    assert_non_null(strstr(out_buf, "steps 100"));
    extra_t x;
    read_extra(&x);
    fprintf(stderr, "stepstorm: %d steps, %llu records lost in %d lost records\n", x.n_steps,
            (unsigned long long)x.n_lost, x.n_lost_records);
    assert_int_equal(x.n_steps, 100);
    assert_true(x.n_lost > 0);
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 100);
    assert_int_equal(sum.n_marks, 10);
    for (int k = 1; k <= 100; k++) assert_true(sum.heap_at_step[k].n_alloc > 0); /* each step's totals too */
}

/* Multi-process Python: forked pool workers (like DataLoader workers) and a subprocess (vfork + exec). */
static void test_preload_python_workers_and_subprocess(void **state) {
    (void)state;
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import ctypes, multiprocessing as mp, subprocess\n"
                    "def work(n):\n"
                    "    return len(bytearray(n))\n"
                    "if __name__ == '__main__':\n"
                    "    mp.set_start_method('fork')\n"
                    "    with mp.Pool(2) as p: assert sum(p.map(work, [1000] * 8)) == 8000\n"
                    "    subprocess.run(['/bin/true'], check=True)\n"
                    "    ctypes.CDLL(None).plateau_step()\n",
                    NULL};
    assert_int_equal(run(argv, NULL), 0);
    char paths[16][600];
    int n = list_traces(paths, 16);
    assert_true(n >= 4); /* python, 2 workers, /bin/true (+ any helper processes) */
    static summary_t s[16];
    int parent = -1, children = 0, true_img = 0;
    for (int i = 0; i < n; i++) {
        summarize(paths[i], NULL, &s[i]);
        assert_true(s[i].rc == 0);
        assert_true(s[i].has_start);
        if (s[i].n_steps == 1) parent = i;
    }
    assert_true(parent >= 0);
    assert_false(s[parent].has_exec); /* the vfork child's exec is not the parent's */
    assert_true(s[parent].has_end);
    for (int i = 0; i < n; i++) {
        if (i == parent) continue;
        if (s[i].ppid == s[parent].pid) children++;
        if (strstr(s[i].exe, "true")) true_img++;
    }
    assert_true(children >= 3);
    assert_int_equal(true_img, 1);
}

/* execve with an environment that drops LD_PRELOAD and PLATEAU_DIR: the tracer adds them back. */
/* A launcher that scrubs LD_PRELOAD from the environment it passes: the tracer puts it back, the image is traced. */
static void test_preload_exec_follows_without_ld_preload(void **state) {
    (void)state;
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import os\nos.execve('/bin/true', ['/bin/true'], "
                    "{k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'})\n",
                    NULL};
    assert_int_equal(run(argv, NULL), 0);
    char paths[4][600];
    assert_int_equal(list_traces(paths, 4), 2);
    summary_t a, b;
    summarize(paths[0], NULL, &a);
    summarize(paths[1], NULL, &b);
    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, 0);
    summary_t *py = a.exec_seq == 0 ? &a : &b, *img = a.exec_seq == 0 ? &b : &a;
    assert_true(py->has_exec);
    assert_int_equal(img->pid, py->pid);
    assert_int_equal(img->exec_seq, 1);
    assert_non_null(strstr(img->exe, "true"));
    assert_true(img->has_end);
}

/* An environment built from scratch (none of plateau's variables) gets them back (docs/env.md, "The program's
 * environment"): the new image is traced too, as the next image of the same pid. */
static void test_preload_exec_with_empty_env_traced(void **state) {
    (void)state;
    char *argv[] = {"/usr/bin/python3", "-c", "import os\nos.execve('/bin/true', ['/bin/true'], {})\n", NULL};
    assert_int_equal(run(argv, NULL), 0);
    char paths[4][600];
    assert_int_equal(list_traces(paths, 4), 2);
    summary_t a, b;
    summarize(paths[0], NULL, &a);
    summarize(paths[1], NULL, &b);
    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, 0);
    summary_t *py = a.exec_seq == 0 ? &a : &b, *img = a.exec_seq == 0 ? &b : &a;
    assert_true(py->has_exec);
    assert_int_equal(img->pid, py->pid);
    assert_int_equal(img->exec_seq, 1);
    assert_non_null(strstr(img->exe, "true"));
}

static void test_preload_dlopened_library_named_in_stacks(void **state) {
    (void)state;
    char plugin[600];
    snprintf(plugin, sizeof plugin, "%s/libtarget_plugin.so", targets);
    char *argv[] = {target("dlopen"), plugin, "12", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only("plugin_leak");
    assert_int_equal(sum.n_steps, 12);
    assert_true(sum.n_sym_stacks >= 1);
    int64_t per_step = sum.sym_live_at_step[2] - sum.sym_live_at_step[1];
    assert_true(per_step >= 8192);
    assert_int_equal(sum.sym_live_at_step[12] - sum.sym_live_at_step[1], 11 * per_step);
    /* The module record names the plugin's file. */
    char paths[2][600];
    assert_int_equal(list_traces(paths, 2), 1);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(paths[0], &r), 0);
    pl_trace_record_t rec;
    bool seen = false;
    while (pl_trace_next(r, &rec) == 1)
        if (rec.type == PL_REC_MODULE && strstr(rec.u.module.path, "libtarget_plugin.so")) seen = true;
    pl_trace_close(r);
    assert_true(seen);
}

/* Frames deeper than the two innermost carry no in-process symbol (dladdr scans a whole dynamic symbol table: ~1 ms
 * per PC in libtorch); they keep their module and offset for the report's offline lookup. The innermost frames keep
 * dladdr's name (the report strips allocation functions by it). */
static void test_preload_deep_frames_named_offline_only(void **state) {
    (void)state;
    char *argv[] = {target("leak"), "4", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    char paths[2][600];
    assert_int_equal(list_traces(paths, 2), 1);
    enum { MAXPC = 4096 };
    static uint64_t pcs[MAXPC];
    static int min_pos[MAXPC];
    int n_pcs = 0;
    pl_trace_reader_t *r;
    pl_trace_record_t rec;
    assert_int_equal(pl_trace_open(paths[0], &r), 0);
    while (pl_trace_next(r, &rec) == 1) {
        if (rec.type != PL_REC_STACK) continue;
        for (uint32_t i = 0; i < rec.u.stack.n_frames; i++) {
            int k = 0;
            while (k < n_pcs && pcs[k] != rec.u.stack.pcs[i]) k++;
            if (k == n_pcs && n_pcs < MAXPC) {
                pcs[n_pcs] = rec.u.stack.pcs[i];
                min_pos[n_pcs++] = (int)i;
            } else if (k < n_pcs && (int)i < min_pos[k]) {
                min_pos[k] = (int)i;
            }
        }
    }
    pl_trace_close(r);
    int deep = 0, deep_with_module = 0, named_inner = 0;
    assert_int_equal(pl_trace_open(paths[0], &r), 0);
    while (pl_trace_next(r, &rec) == 1) {
        if (rec.type != PL_REC_FRAME) continue;
        int k = 0;
        while (k < n_pcs && pcs[k] != rec.u.frame.pc) k++;
        assert_true(k < n_pcs);
        if (min_pos[k] >= 2) {
            deep++;
            if (rec.u.frame.module_id) deep_with_module++;
            if (rec.u.frame.symbol[0]) fprintf(stderr, "deep frame named in-process: %s\n", rec.u.frame.symbol);
            assert_string_equal(rec.u.frame.symbol, "");
        } else if (!strcmp(rec.u.frame.symbol, "leak_function")) {
            named_inner++;
        }
    }
    pl_trace_close(r);
    assert_true(deep >= 2);                /* main's callers in libc, _start */
    assert_int_equal(deep_with_module, deep); /* each still has its module for the offline lookup */
    assert_int_equal(named_inner, 1);
}

static void test_preload_exit_with_threads_still_allocating(void **state) {
    (void)state;
    for (int round = 0; round < 3; round++) {
        char *argv[] = {target("threads"), "4", NULL};
        assert_int_equal(run(argv, NULL), 0);
        summarize_only(NULL);
        assert_int_equal(sum.n_steps, 5);
        assert_true(sum.has_end);
        assert_true(sum.heap_at_step[5].n_alloc > sum.heap_at_step[1].n_alloc);
    }
}

static void test_preload_full_disk_stops_recording_once(void **state) {
    (void)state;
    char *argv[] = {target("leak"), "400", NULL};
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", "PLATEAU_FLUSH_MS=10", NULL};
    fsize_limit = 16384;
    int rc = run(argv, env);
    fsize_limit = 0;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out_buf, "leaked 6400 blocks")); /* the program ran to the end */
    const char *first = strstr(notes_buf, "recording stopped"); /* the file-size limit, named with its value */
    assert_non_null(first);
    assert_non_null(strstr(notes_buf, "file-size limit (ulimit -f, 16384 bytes)"));
    assert_null(strstr(first + 1, "recording stopped")); /* said once */
    assert_null(strstr(err_buf, "plateau")); /* on plateau's channel, never the program's stderr */
    char paths[2][600];
    assert_int_equal(list_traces(paths, 2), 1);
    summarize(paths[0], NULL, &sum);
    /* Readable up to the last whole chunk (which may be none at all at this tiny limit). */
    assert_true(sum.rc == 0 || sum.rc == -EBADMSG);
    assert_true(sum.n_steps < 400);
    assert_false(sum.has_end);
}

/* A program that closes or dup2s over every descriptor above 2 keeps its data file exactly as it wrote it, and the
 * trace keeps recording to the end (tests/targets/fdclose.c checks its file itself and exits 1 on any foreign
 * byte). */
static void test_preload_program_closing_all_fds_keeps_its_file(void **state) {
    (void)state;
    static const char *const modes[] = {"loop", "closefrom", "range", "dup2"};
    char data[400];
    snprintf(data, sizeof data, "%s/data.txt", run_dir);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char *argv[] = {target("fdclose"), (char *)(uintptr_t)modes[i], data, NULL};
        const char *env[] = {"PLATEAU_FLUSH_MS=50", "PLATEAU_SAMPLE_BYTES=0", NULL};
        int rc = run(argv, env);
        if (rc) fprintf(stderr, "mode %s\n", modes[i]);
        assert_int_equal(rc, 0);
        summarize_only(NULL);
        assert_int_equal(sum.rc, 0);
        assert_true(sum.has_end); /* recorded to the end: the trace's descriptor survived */
        assert_true(sum.n_rss >= 10); /* and so did the sampler's (one sample per 100 ms over 1.2 s) */
        assert_null(strstr(err_buf, "plateau:"));
    }
}

/* The close syscall itself (no interposer sees it) on every descriptor, then the program's file on every number:
 * the trace never writes into it; it reopens its file or stops with one line. */
static void test_preload_raw_close_never_writes_into_program_file(void **state) {
    (void)state;
    char data[400];
    snprintf(data, sizeof data, "%s/data.txt", run_dir);
    char *argv[] = {target("fdclose"), "raw", data, NULL};
    const char *env[] = {"PLATEAU_FLUSH_MS=50", "PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    char paths[2][600];
    assert_int_equal(list_traces(paths, 2), 1);
    summarize(paths[0], NULL, &sum);
    assert_int_equal(sum.rc, 0); /* whole chunks only, whatever happened */
    assert_true(sum.has_start);
    const char *line = strstr(err_buf, "closed the trace file's descriptor");
    if (!sum.has_end) {
        assert_non_null(line);
        assert_null(strstr(line + 1, "closed the trace file's descriptor")); /* said once */
    }
}

/* A program that fits its address-space limit untraced fits it traced: 100 MiB under a 160 MiB RLIMIT_AS (the
 * tracer used to reserve ~115 MiB of tables and thread stacks whatever the limit), and the trace is whole. */
static void test_preload_fits_the_programs_address_space_limit(void **state) {
    (void)state;
    char *argv[] = {target("aslimit"), "100", NULL};
    as_limit = 160u << 20;
    int rc = run(argv, NULL);
    as_limit = 0;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out_buf, "allocated 100 MiB"));
    summarize_only(NULL);
    assert_true(sum.has_end);
    assert_null(strstr(err_buf, "plateau:"));
}

/* The process record is never dropped, whatever the legal buffer size: an argv of 20 arguments of 1000
 * characters (a 20 KiB record) with 16 KiB buffers (it used to be lost) and with the smallest, 256 B. */
static void test_preload_process_start_kept_with_small_buffers(void **state) {
    (void)state;
    static char args[20][1001];
    char *argv[22] = {"/bin/true"};
    for (int i = 0; i < 20; i++) {
        memset(args[i], 'a' + i, 1000);
        args[i][1000] = 0;
        argv[i + 1] = args[i];
    }
    argv[21] = NULL;
    static const char *const sizes[] = {"PLATEAU_BUFFER_BYTES=16K", "PLATEAU_BUFFER_BYTES=256"};
    for (int k = 0; k < 2; k++) {
        const char *env[] = {sizes[k], NULL};
        assert_int_equal(run(argv, env), 0);
        assert_null(strstr(err_buf, "plateau:"));
        summarize_only(NULL); /* asserts the process record is there */
        assert_true(sum.has_end);
        assert_int_equal(strlen(sum.argv1), sizeof sum.argv1 - 1); /* argv[1] recorded (cut by the summary) */
        assert_int_equal(sum.argv1[0], 'a');
    }
}

/* PSS (a page-table walk: milliseconds in a large process) is read at most every 5 s, however often RSS is
 * sampled, and first 5 s after the process starts: a 1.2 s run sampled every 20 ms has dozens of RSS samples and no
 * PSS value; a 6.5 s run has one. */
static void test_preload_pss_sampled_rarely(void **state) {
    (void)state;
    char data[400];
    snprintf(data, sizeof data, "%s/data.txt", run_dir);
    char *argv[] = {target("fdclose"), "loop", data, NULL};
    const char *env[] = {"PLATEAU_INTERVAL_MS=20", NULL};
    assert_int_equal(run(argv, env), 0);
    summarize_only(NULL);
    fprintf(stderr, "pss: %d of %d rss samples (1.2 s)\n", sum.n_pss, sum.n_rss);
    assert_true(sum.n_rss >= 30);
    assert_int_equal(sum.n_pss, 0);
    char *sleeper[] = {"/bin/sleep", "6.5", NULL};
    assert_int_equal(run(sleeper, env), 0);
    summarize_only(NULL);
    fprintf(stderr, "pss: %d of %d rss samples (6.5 s)\n", sum.n_pss, sum.n_rss);
    assert_true(sum.n_rss >= 150);
    assert_int_equal(sum.n_pss, 1);
}

/* Partial munmap (head, tail, middle hole), mremap (grow in place, move over a mapping, shrink, move), MAP_FIXED
 * replacement by anonymous and file mappings: live mmap bytes and range counts exact at every step, zero at the end
 * (table in tests/targets/mremap.c). */
static void test_preload_mmap_partial_unmap_and_mremap_exact(void **state) {
    (void)state;
    static const int64_t pages[13] = {0, 0, 17, 15, 13, 11, 19, 23, 16, 16, 15, 78, 0};
    static const int64_t ranges[13] = {0, 0, 2, 2, 2, 3, 4, 4, 4, 5, 5, 5, 0};
    char *argv[] = {target("mremap"), NULL};
    assert_int_equal(run(argv, NULL), 0);
    assert_non_null(strstr(out_buf, "ok"));
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 12);
    const pl_rec_heap_t *h = sum.heap_at_step;
    for (int k = 2; k <= 12; k++) {
        if (h[k].mmap_live_bytes - h[1].mmap_live_bytes != pages[k] * 4096)
            fprintf(stderr, "step %d: %lld bytes, expected %lld\n", k,
                    (long long)(h[k].mmap_live_bytes - h[1].mmap_live_bytes), (long long)pages[k] * 4096);
        assert_int_equal(h[k].mmap_live_bytes - h[1].mmap_live_bytes, pages[k] * 4096);
        assert_int_equal(h[k].mmap_live_count - h[1].mmap_live_count, ranges[k]);
    }
}

/* The range table under 4 threads mapping, punching holes, moving and unmapping at once: back to the start. */
static void test_preload_mmap_ranges_threads_balance(void **state) {
    (void)state;
    char *argv[] = {target("mremap"), "threads", NULL};
    assert_int_equal(run(argv, NULL), 0);
    assert_non_null(strstr(out_buf, "ok"));
    summarize_only(NULL);
    assert_int_equal(sum.n_steps, 2);
    assert_int_equal(sum.heap_at_step[2].mmap_live_bytes, sum.heap_at_step[1].mmap_live_bytes);
    assert_int_equal(sum.heap_at_step[2].mmap_live_count, sum.heap_at_step[1].mmap_live_count);
}

/* Warnings are rate-limited per call site, never process-wide: two unrelated failures, each hit twice, say two
 * lines (preload/warn_target.c). */
static void test_preload_each_warning_said_once(void **state) {
    (void)state;
    char *argv[] = {(char *)(uintptr_t)getenv("PL_WARN_TARGET"), NULL};
    assert_non_null(argv[0]);
    const char *env[] = {"PLATEAU_SAMPLE_BYTES=0", NULL};
    assert_int_equal(run(argv, env), 0);
    assert_non_null(strstr(out_buf, "done"));
    static const char *const said[] = {"cannot map the sampled-pointer table", "pl_alloc_set_hook not found"};
    for (int i = 0; i < 2; i++) {
        const char *first = strstr(notes_buf, said[i]);
        if (!first) fprintf(stderr, "missing '%s' in:\n%s\n", said[i], notes_buf);
        assert_non_null(first);
        assert_null(strstr(first + 1, said[i]));
    }
    assert_null(strstr(err_buf, "plateau"));
}

int main(void) {
    preload = getenv("PL_PRELOAD");
    targets = getenv("PL_TARGETS");
    if (!preload || !targets) {
        fprintf(stderr, "PL_PRELOAD and PL_TARGETS must be set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preload_leak_named_with_growing_live_bytes),
        cmocka_unit_test(test_preload_leak_found_by_sampling),
        cmocka_unit_test(test_preload_plateau_is_flat_after_warmup),
        cmocka_unit_test(test_preload_storm_8_threads_exact_totals),
        cmocka_unit_test(test_preload_fork_exec_traces_linked),
        cmocka_unit_test(test_preload_sigkill_leaves_readable_trace),
        cmocka_unit_test(test_preload_python_ctypes_step_and_mark),
        cmocka_unit_test(test_preload_sigusr2_marks_steps_when_asked),
        cmocka_unit_test(test_preload_device_events_from_allocator_hook),
        cmocka_unit_test(test_preload_malformed_env_uses_defaults),
        cmocka_unit_test(test_preload_jemalloc_host_allocator),
        cmocka_unit_test(test_preload_heap_growth_same_on_glibc_and_jemalloc),
        cmocka_unit_test(test_preload_cxx_counts_exact_on_glibc_and_jemalloc),
        cmocka_unit_test(test_preload_steps_survive_writer_overflow),
        cmocka_unit_test(test_preload_python_workers_and_subprocess),
        cmocka_unit_test(test_preload_exec_follows_without_ld_preload),
        cmocka_unit_test(test_preload_exec_with_empty_env_traced),
        cmocka_unit_test(test_preload_dlopened_library_named_in_stacks),
        cmocka_unit_test(test_preload_deep_frames_named_offline_only),
        cmocka_unit_test(test_preload_exit_with_threads_still_allocating),
        cmocka_unit_test(test_preload_full_disk_stops_recording_once),
        cmocka_unit_test(test_preload_each_warning_said_once),
        cmocka_unit_test(test_preload_mmap_partial_unmap_and_mremap_exact),
        cmocka_unit_test(test_preload_mmap_ranges_threads_balance),
        cmocka_unit_test(test_preload_program_closing_all_fds_keeps_its_file),
        cmocka_unit_test(test_preload_raw_close_never_writes_into_program_file),
        cmocka_unit_test(test_preload_fits_the_programs_address_space_limit),
        cmocka_unit_test(test_preload_process_start_kept_with_small_buffers),
        cmocka_unit_test(test_preload_pss_sampled_rarely),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
