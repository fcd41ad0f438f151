/* Integration: the preload's device interception (preload/cuda.c) over the CUDA driver test double.
 *  - target_cuda allocates through a stand-in libcudart (tests/targets/cudart_standin.c) that loads the driver the
 *    way the real runtime does; the trace's device events must equal, line for line, what the double logged
 *    (address and size, in order), with one record per cudaMalloc (runtime) and one per direct driver call.
 *  - target_cudart_real dlopens the real libcudart: it fails at init without a GPU, but its cuGetProcAddress
 *    look-ups of the allocation entry points must have been wrapped (PLATEAU_DEBUG_CUDA=1 summary on stderr).
 *  - CUPTI (preload/cupti.c, when built with it): the real libcupti loads over the double but cannot enable
 *    activity without a driver: exactly one "CUPTI unavailable" line naming cuptiActivityEnable and CUPTI's
 *    error, and the trace's device events still equal the double's log; PLATEAU_CUPTI=0 gives no line; a
 *    PLATEAU_LIBCUPTI that does not exist gives one line naming dlopen; a program that never initialises CUDA
 *    never loads libcupti.
 * Env (set by meson): PL_PRELOAD, PL_TARGETS, PL_CUDA_DOUBLE_PATH, PL_CUDART (real libcudart, may be absent),
 * PL_HAVE_CUPTI (0/1), PL_LIBCUPTI (the real libcupti, may be absent). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <plateau/trace.h>

#include "extract.h"
#include "render.h"

#include "../common/files.h"
#include "../common/spawn.h"
#include "../common/tmpdir.h"

static const char *preload, *targets, *double_path, *cudart, *libcupti, *cupti_fake;
static bool have_cupti;
static char run_dir[256], double_dir[512];
static char out_buf[65536], err_buf[65536];
static char *notes_buf; /* the run directory's plateau-notes after run(): the preload's notes ("" if none) */

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(run_dir, sizeof run_dir, "cuda");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(run_dir);
}


/* In the child: the preload and the run directory, then extra "K=V" entries (ctx). */
static void child_env(void *ctx) {
    const char *const *env = ctx;
    setenv("LD_PRELOAD", preload, 1);
    setenv("PLATEAU_DIR", run_dir, 1);
    setenv("PLATEAU_QUIET", "1", 1);
    for (int i = 0; env && env[i]; i++) putenv((char *)(uintptr_t)env[i]);
}

/* Run argv under the preload with extra "K=V" env entries; returns the exit status (128 + signal). */
static int run(char *const argv[], const char *const env[]) {
    int o, e;
    char notes[400];
    snprintf(notes, sizeof notes, "%s/%s", run_dir, PL_TRACE_NOTES_FILE);
    unlink(notes);
    pid_t pid = pl_test_spawn(argv, child_env, (void *)(uintptr_t)env, &o, &e);
    assert_true(pid > 0);
    int rc = pl_test_finish(pid, o, e, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
    assert_true(rc >= 0);
    if (rc != 0) fprintf(stderr, "target stderr:\n%s\n", err_buf);
    free(notes_buf);
    notes_buf = pl_test_slurp(run_dir, PL_TRACE_NOTES_FILE, NULL);
    if (!notes_buf) notes_buf = calloc(1, 1);
    assert_non_null(notes_buf);
    return rc;
}

static void only_trace(char *path, size_t cap) {
    DIR *d = opendir(run_dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".pltrace")) {
            snprintf(path, cap, "%s/%s", run_dir, e->d_name);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
}

#define MAX_EVENTS 4096
#define LINE 128

static int is_alloc(const char *call) {
    return !strcmp(call, "cuMemAlloc_v2") || !strncmp(call, "cuMemAllocAsync", 15) ||
           !strcmp(call, "cuMemAllocManaged") || !strncmp(call, "cuMemAllocFromPoolAsync", 23) ||
           !strcmp(call, "cuMemAllocPitch_v2") || !strcmp(call, "cuMemHostAlloc") || !strcmp(call, "cuMemAllocHost_v2");
}

/* The double's log rendered as the device events the trace must contain: "<kind> ptr=0x.. size=..". */
static int expected_events(const char *log_path, char ev[][LINE], int *n_alloc) {
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[512], call[64], result[64];
    unsigned long long seq, ptr, size;
    int dev, n = 0;
    *n_alloc = 0;
    while (fgets(line, sizeof line, f)) {
        assert_int_equal(sscanf(line, "%llu %63s %63s dev=%d ptr=0x%llx size=%llu", &seq, call, result, &dev, &ptr,
                                &size), 6);
        const char *kind = NULL;
        bool ok = !strcmp(result, "CUDA_SUCCESS");
        if (ok && is_alloc(call)) kind = "alloc", ++*n_alloc;
        else if (ok && (!strcmp(call, "cuMemFree_v2") || !strncmp(call, "cuMemFreeAsync", 14) ||
                        !strcmp(call, "cuMemFreeHost")))
            kind = "free";
        else if (ok && !strcmp(call, "cuMemMap")) kind = "map";
        else if (ok && !strcmp(call, "cuMemUnmap")) kind = "unmap";
        else if (!strcmp(result, "CUDA_ERROR_OUT_OF_MEMORY") && (is_alloc(call) || !strcmp(call, "cuMemCreate")))
            kind = "oom";
        if (!kind) continue;
        assert_true(n < MAX_EVENTS);
        snprintf(ev[n++], LINE, "%s ptr=0x%llx size=%llu", kind, ptr, size);
    }
    fclose(f);
    return n;
}

typedef struct {
    int n_events, n_runtime_alloc, n_driver_alloc, n_rss_dev;
    int n_cupti;                       /* CUPTI records: kept apart in cupti_ev, never in ev */
    int64_t t_first_hook, t_end;       /* first hook device record, process_end */
    int64_t t_cupti_min, t_cupti_max;
    char cupti_ev[MAX_EVENTS][LINE];
    int n_not_dev0; /* alloc/free/map/unmap records whose device is not -1: the double has no cuCtxGetDevice, so
                       the device is unknown (preload/cuda.c records -1 then) */
    uint64_t max_dev_used, dev_total;
    int n_map, n_map_stack;            /* the hooks' map records, and those that carry a stack */
    char ev[MAX_EVENTS][LINE];
} trace_dev_t;

static void read_trace(const char *path, trace_dev_t *t) {
    memset(t, 0, sizeof *t);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    pl_trace_record_t rec;
    int rc;
    while ((rc = pl_trace_next(r, &rec)) == 1) {
        const char *kind = NULL;
        switch (rec.type) {
        case PL_REC_DEVICE_ALLOC: kind = "alloc"; break;
        case PL_REC_DEVICE_FREE: kind = "free"; break;
        case PL_REC_DEVICE_MAP: kind = "map"; break;
        case PL_REC_DEVICE_UNMAP: kind = "unmap"; break;
        case PL_REC_DEVICE_OOM: kind = "oom"; break;
        case PL_REC_PROCESS_END: t->t_end = rec.t_ns; break;
        case PL_REC_RSS:
            if (rec.u.rss.device_used != PL_TRACE_NA) {
                t->n_rss_dev++;
                if (rec.u.rss.device_used > t->max_dev_used) t->max_dev_used = rec.u.rss.device_used;
                t->dev_total = rec.u.rss.device_total;
            }
            break;
        default: break;
        }
        if (!kind) continue;
        const pl_rec_device_t *d = &rec.u.device;
        if (d->source == PL_DEV_SRC_CUPTI) {
            assert_true(t->n_cupti < MAX_EVENTS);
            if (!t->n_cupti || rec.t_ns < t->t_cupti_min) t->t_cupti_min = rec.t_ns;
            if (!t->n_cupti || rec.t_ns > t->t_cupti_max) t->t_cupti_max = rec.t_ns;
            snprintf(t->cupti_ev[t->n_cupti++], LINE, "%s ptr=0x%llx size=%llu", kind, (unsigned long long)d->addr,
                     (unsigned long long)d->size);
            continue;
        }
        assert_true(d->source == PL_DEV_SRC_RUNTIME || d->source == PL_DEV_SRC_DRIVER);
        if (!t->n_events) t->t_first_hook = rec.t_ns;
        if (rec.type != PL_REC_DEVICE_OOM && d->device != -1) t->n_not_dev0++;
        if (rec.type == PL_REC_DEVICE_MAP) {
            t->n_map++;
            t->n_map_stack += d->stack_id != 0;
        }
        if (rec.type == PL_REC_DEVICE_ALLOC) {
            if (d->source == PL_DEV_SRC_RUNTIME) t->n_runtime_alloc++;
            else t->n_driver_alloc++;
        }
        assert_true(t->n_events < MAX_EVENTS);
        snprintf(t->ev[t->n_events++], LINE, "%s ptr=0x%llx size=%llu", kind, (unsigned long long)d->addr,
                 (unsigned long long)d->size);
    }
    assert_int_equal(rc, 0);
    pl_trace_close(r);
}

static trace_dev_t td;
static char expect[MAX_EVENTS][LINE];
static int count_lines(const char *text, const char *needle);

static void test_cuda_standin_trace_matches_driver_log(void **state) {
    (void)state;
    char target[512], log_path[400], env_libcuda[600], env_double[600], trace[700];
    snprintf(target, sizeof target, "%s/target_cuda", targets);
    snprintf(log_path, sizeof log_path, "%s/driver.log", run_dir);
    snprintf(env_libcuda, sizeof env_libcuda, "PLATEAU_LIBCUDA=%s", double_path);
    snprintf(env_double, sizeof env_double, "PL_CUDA_DOUBLE=log:%s,leak_exitcode:97", log_path);
    const char *env[] = {env_libcuda, env_double, "PLATEAU_INTERVAL_MS=5", "PLATEAU_DEBUG_CUDA=1", NULL};
    char *argv[] = {target, "80", NULL};
    assert_int_equal(run(argv, env), 0);
    assert_null(strstr(err_buf, "plateau cuda double:")); /* no contract violation, no leak */

    /* dlsym(RTLD_NEXT) from the program still means "after the program": the preload's own malloc. */
    assert_non_null(strstr(out_buf, "next_malloc "));
    assert_non_null(strstr(strstr(out_buf, "next_malloc "), "libplateau_preload"));

    int n_alloc_logged = 0;
    int n_expect = expected_events(log_path, expect, &n_alloc_logged);
    only_trace(trace, sizeof trace);
    read_trace(trace, &td);
    for (int i = 0; i < n_expect || i < td.n_events; i++)
        if (i >= n_expect || i >= td.n_events || strcmp(expect[i], td.ev[i]))
            fprintf(stderr, "event %d: driver log '%s' trace '%s'\n", i, i < n_expect ? expect[i] : "-",
                    i < td.n_events ? td.ev[i] : "-");
    /* 14 allocations + 14 frees + 2 maps + 2 unmaps + 1 out of memory */
    assert_int_equal(n_expect, 33);
    assert_int_equal(td.n_events, n_expect);
    for (int i = 0; i < n_expect; i++) assert_string_equal(td.ev[i], expect[i]);
    /* Each cudaMalloc-like call counted once, as runtime; the direct driver allocation as driver. */
    assert_int_equal(n_alloc_logged, 14);
    /* cudaMalloc x2, cudaMallocAsync[_ptsz], cudaMallocManaged, cudaMallocFromPoolAsync[_ptsz] x2,
     * cudaMallocPitch, cudaMalloc3D, cudaMallocHost, cudaHostAlloc; driver: cuMemAlloc_v2, cuMemAllocPitch_v2,
     * cuMemHostAlloc */
    assert_int_equal(td.n_runtime_alloc, 11);
    assert_int_equal(td.n_driver_alloc, 3);
    assert_int_equal(td.n_not_dev0, 0);
    /* a mapping carries its stack, as an allocation does (PLATEAU_DEVICE_STACKS=1, the default): the report's
     * device sites count what an expandable segment grows by */
    assert_int_equal(td.n_map, 2);
    assert_int_equal(td.n_map_stack, 2);

    /* Device memory sampled with RSS: the 3 MiB block was live during the sleep; capacity is 1 GiB. */
    assert_true(td.n_rss_dev >= 1);
    assert_int_equal(td.dev_total, 1ull << 30);
    assert_true(td.max_dev_used >= 3u << 20);
    assert_true(td.max_dev_used < 64u << 20);

    /* CUPTI (auto): the real libcupti loads but cannot enable activity on the double. One line, and the hooks'
     * events above are complete. */
    if (!have_cupti || !libcupti || access(libcupti, R_OK) != 0) {
        fprintf(stderr, "CUPTI not built or no libcupti at '%s': CUPTI part skipped\n", libcupti ? libcupti : "");
        return;
    }
    assert_int_equal(count_lines(notes_buf, "CUPTI"), 1);
    assert_non_null(strstr(notes_buf, "plateau: CUPTI unavailable: cuptiActivityEnable: CUPTI_ERROR_"));
    assert_non_null(strstr(notes_buf, "; device hooks keep recording\n"));
    assert_null(strstr(err_buf, "CUPTI unavailable")); /* a note, never the program's stderr */
    assert_non_null(strstr(err_buf, " cupti=failed "));
}

/* Lines of text containing needle. */
static int count_lines(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        if (strstr(line, needle)) n++;
        p = end ? end + 1 : NULL;
    }
    return n;
}

/* target_cuda (no threads) under the preload with extra env: its device events must equal the double's log. */
static void run_standin_events_match(const char *const extra[]) {
    char target[512], log_path[400], env_libcuda[600], env_double[600], trace[700];
    snprintf(target, sizeof target, "%s/target_cuda", targets);
    snprintf(log_path, sizeof log_path, "%s/driver.log", run_dir);
    snprintf(env_libcuda, sizeof env_libcuda, "PLATEAU_LIBCUDA=%s", double_path);
    snprintf(env_double, sizeof env_double, "PL_CUDA_DOUBLE=log:%s,leak_exitcode:97", log_path);
    const char *env[8] = {env_libcuda, env_double, "PLATEAU_DEBUG_CUDA=1"};
    for (int i = 0; extra[i] && i < 4; i++) env[3 + i] = extra[i];
    char *argv[] = {target, "0", NULL};
    assert_int_equal(run(argv, env), 0);
    int n_alloc_logged = 0;
    int n_expect = expected_events(log_path, expect, &n_alloc_logged);
    only_trace(trace, sizeof trace);
    read_trace(trace, &td);
    assert_int_equal(n_expect, 33);
    assert_int_equal(td.n_events, n_expect);
    for (int i = 0; i < n_expect; i++) assert_string_equal(td.ev[i], expect[i]);
}

/* The success path, with a fake libcupti (tests/targets/cupti_fake.c) that reports the double's allocations and
 * frees as CUPTI MEMORY2 records when flushed (at exit): they reach the trace as source CUPTI, apart from the
 * hooks' records (which still equal the driver log), on the tracer's clock; the report's cross-check agrees. The
 * fake's failure of a chosen call gives the one line naming that call. */
static void test_cuda_cupti_fake_records_cross_check(void **state) {
    (void)state;
    if (!have_cupti || !cupti_fake || !*cupti_fake) {
        fprintf(stderr, "built without CUPTI: skipped\n");
        skip();
    }
    char env_lib[700], env_log[500], trace[700];
    snprintf(env_lib, sizeof env_lib, "PLATEAU_LIBCUPTI=%s", cupti_fake);
    snprintf(env_log, sizeof env_log, "PL_CUPTI_FAKE_LOG=%s/driver.log", run_dir);
    const char *extra[] = {env_lib, env_log, "PLATEAU_CUPTI=1", NULL};
    run_standin_events_match(extra);
    assert_int_equal(count_lines(notes_buf, "CUPTI"), 0);
    assert_non_null(strstr(err_buf, " cupti=running "));
    assert_non_null(strstr(err_buf, " cupti_records=28 cupti_converted=28"));
    /* CUPTI's view: the 14 allocations and 14 frees of the log, in order (no map, unmap or OOM) */
    int n = 0;
    for (int i = 0; i < 33; i++)
        if (!strncmp(expect[i], "alloc ", 6) || !strncmp(expect[i], "free ", 5)) {
            assert_true(n < td.n_cupti);
            assert_string_equal(td.cupti_ev[n], expect[i]);
            n++;
        }
    assert_int_equal(n, 28);
    assert_int_equal(td.n_cupti, 28);
    /* converted to the tracer's clock: after the first hook record, before the end record */
    assert_true(td.t_cupti_min >= td.t_first_hook);
    assert_true(td.t_cupti_max <= td.t_end);
    /* the report: hooks and CUPTI agree */
    only_trace(trace, sizeof trace);
    pl_report_t *rep = pl_report_create(trace);
    assert_non_null(rep);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_path(rep, &x, trace, NULL), 0);
    assert_int_equal(x.n_procs, 1);
    assert_int_equal(x.procs[0].n_hook_dev_allocs, 14);
    assert_int_equal(x.procs[0].n_cupti_dev_allocs, 14);
    static char text[1 << 16];
    memset(text, 0, sizeof text);
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    assert_non_null(f);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){rep, &x}, f, false), 0);
    fclose(f);
    assert_non_null(strstr(text, "device allocations: hooks 14 ("));
    assert_non_null(strstr(text, "), CUPTI 14 ("));
    assert_non_null(strstr(text, "): agree"));
    pl_extract_free(&x);
    pl_report_destroy(rep);

    /* a failing CUPTI call: one line naming it, no CUPTI record, hooks unchanged */
    static const char *const calls[] = {"cuptiActivityRegisterCallbacks", "cuptiActivityEnable"};
    for (int c = 0; c < 2; c++) {
        char rm[300], env_fail[200], want[200];
        snprintf(rm, sizeof rm, "rm -f '%s'/*", run_dir);
        assert_int_equal(system(rm), 0);
        snprintf(env_fail, sizeof env_fail, "PL_CUPTI_FAKE_FAIL=%s", calls[c]);
        const char *extra_fail[] = {env_lib, env_log, env_fail, NULL};
        run_standin_events_match(extra_fail);
        assert_int_equal(count_lines(notes_buf, "CUPTI"), 1);
        snprintf(want, sizeof want, "plateau: CUPTI unavailable: %s: CUPTI_ERROR_NOT_INITIALIZED; device hooks keep "
                 "recording\n", calls[c]);
        assert_non_null(strstr(notes_buf, want));
        assert_int_equal(td.n_cupti, 0);
    }
}

static void test_cuda_cupti_off_no_line(void **state) {
    (void)state;
    const char *extra[] = {"PLATEAU_CUPTI=0", NULL};
    run_standin_events_match(extra);
    assert_int_equal(count_lines(notes_buf, "CUPTI"), 0);
    if (have_cupti) assert_non_null(strstr(err_buf, " cupti=off "));
}

static void test_cuda_cupti_missing_library_one_line(void **state) {
    (void)state;
    if (!have_cupti) {
        fprintf(stderr, "built without CUPTI: skipped\n");
        skip();
    }
    const char *modes[] = {"PLATEAU_CUPTI=auto", "PLATEAU_CUPTI=1"};
    for (int m = 0; m < 2; m++) {
        char rm[300];
        snprintf(rm, sizeof rm, "rm -f '%s'/*", run_dir);
        assert_int_equal(system(rm), 0);
        const char *extra[] = {"PLATEAU_LIBCUPTI=/nonexistent/plateau-test/libcupti.so.13", modes[m], NULL};
        run_standin_events_match(extra);
        assert_int_equal(count_lines(notes_buf, "CUPTI"), 1);
        assert_non_null(strstr(notes_buf, "plateau: CUPTI unavailable: dlopen: /nonexistent/plateau-test/libcupti.so.13"));
        assert_non_null(strstr(err_buf, " cupti=failed "));
    }
}

/* A program that never initialises CUDA never loads libcupti (nor prints anything about it). */
static void test_cuda_cupti_not_loaded_without_cuda(void **state) {
    (void)state;
    char target[512];
    snprintf(target, sizeof target, "%s/target_leak", targets);
    const char *env[] = {"PLATEAU_DEBUG_CUDA=1", "PLATEAU_CUPTI=1", NULL};
    char *argv[] = {target, "3", NULL};
    assert_int_equal(run(argv, env), 0);
    assert_int_equal(count_lines(notes_buf, "CUPTI"), 0);
    if (have_cupti) assert_non_null(strstr(err_buf, " cupti=idle "));
}

static int cmp_line(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* 4 threads allocate and free concurrently through both paths: across threads the trace's order and the
 * driver's may interleave differently (a record is written after the call returns), so compare as multisets:
 * the same events, each counted once, frees carrying the right sizes. */
static void test_cuda_threads_same_events(void **state) {
    (void)state;
    char target[512], log_path[400], env_libcuda[600], env_double[600], trace[700];
    snprintf(target, sizeof target, "%s/target_cuda", targets);
    snprintf(log_path, sizeof log_path, "%s/driver.log", run_dir);
    snprintf(env_libcuda, sizeof env_libcuda, "PLATEAU_LIBCUDA=%s", double_path);
    snprintf(env_double, sizeof env_double, "PL_CUDA_DOUBLE=log:%s,leak_exitcode:97", log_path);
    const char *env[] = {env_libcuda, env_double, NULL};
    char *argv[] = {target, "0", "4", NULL};
    assert_int_equal(run(argv, env), 0);
    int n_alloc_logged = 0;
    int n_expect = expected_events(log_path, expect, &n_alloc_logged);
    only_trace(trace, sizeof trace);
    read_trace(trace, &td);
    assert_int_equal(n_alloc_logged, 14 + 4 * 200);
    assert_int_equal(n_expect, 33 + 4 * 200 * 2);
    assert_int_equal(td.n_events, n_expect);
    assert_int_equal(td.n_runtime_alloc, 11 + 4 * 100);
    assert_int_equal(td.n_driver_alloc, 3 + 4 * 100);
    /* In trace order, every address alternates alloc, free, alloc ... (a free is written before its address can
     * be reused by another thread's allocation). */
    static uint64_t live_addrs[64];
    int n_live = 0;
    for (int i = 0; i < td.n_events; i++) {
        char kind[16];
        unsigned long long a;
        assert_int_equal(sscanf(td.ev[i], "%15s ptr=0x%llx", kind, &a), 2);
        if (strcmp(kind, "alloc") && strcmp(kind, "free")) continue;
        int k = 0;
        while (k < n_live && live_addrs[k] != a) k++;
        if (!strcmp(kind, "alloc")) {
            assert_int_equal(k, n_live); /* not live already */
            assert_true(n_live < 64);
            live_addrs[n_live++] = a;
        } else {
            assert_true(k < n_live); /* was live */
            live_addrs[k] = live_addrs[--n_live];
        }
    }
    assert_int_equal(n_live, 0);
    qsort(expect, (size_t)n_expect, LINE, cmp_line);
    qsort(td.ev, (size_t)td.n_events, LINE, cmp_line);
    for (int i = 0; i < n_expect; i++) assert_string_equal(td.ev[i], expect[i]);
}

/* A program linked against libcuda calls the driver by name: the preload's exported driver symbols see it. */
static void test_cuda_direct_link_interposed(void **state) {
    (void)state;
    char target[512], log_path[400], env_double[600], trace[700];
    snprintf(target, sizeof target, "%s/target_cuda_direct", targets);
    snprintf(log_path, sizeof log_path, "%s/driver.log", run_dir);
    snprintf(env_double, sizeof env_double, "PL_CUDA_DOUBLE=log:%s,leak_exitcode:97", log_path);
    const char *env[] = {env_double, NULL};
    char *argv[] = {target, NULL};
    assert_int_equal(run(argv, env), 0);
    int n_alloc_logged = 0;
    int n_expect = expected_events(log_path, expect, &n_alloc_logged);
    only_trace(trace, sizeof trace);
    read_trace(trace, &td);
    assert_int_equal(n_alloc_logged, 3);
    assert_int_equal(n_expect, 6);
    assert_int_equal(td.n_events, n_expect);
    for (int i = 0; i < n_expect; i++) assert_string_equal(td.ev[i], expect[i]);
    assert_int_equal(td.n_driver_alloc, 3);
    assert_int_equal(td.n_runtime_alloc, 0);
    assert_int_equal(td.n_not_dev0, 0);
}

/* A plugin loaded with RTLD_LOCAL links the runtime: its cudaMalloc binds to the preload's export, and the real
 * one is only in the plugin's local scope. The call must work (and be recorded once). */
static void test_cuda_runtime_in_local_scope(void **state) {
    (void)state;
    char target[512], plugin[512], log_path[400], env_libcuda[600], env_double[600], trace[700];
    snprintf(target, sizeof target, "%s/target_cuda_local", targets);
    snprintf(plugin, sizeof plugin, "%s/libtarget_cuda_plugin.so", targets);
    snprintf(log_path, sizeof log_path, "%s/driver.log", run_dir);
    snprintf(env_libcuda, sizeof env_libcuda, "PLATEAU_LIBCUDA=%s", double_path);
    snprintf(env_double, sizeof env_double, "PL_CUDA_DOUBLE=log:%s", log_path);
    const char *env[] = {env_libcuda, env_double, NULL};
    char *argv[] = {target, plugin, NULL};
    assert_int_equal(run(argv, env), 0);
    assert_null(strstr(err_buf, "cannot be found"));
    int n_alloc_logged = 0;
    int n_expect = expected_events(log_path, expect, &n_alloc_logged);
    only_trace(trace, sizeof trace);
    read_trace(trace, &td);
    assert_int_equal(n_expect, 2);
    assert_int_equal(td.n_events, 2);
    for (int i = 0; i < n_expect; i++) assert_string_equal(td.ev[i], expect[i]);
    assert_int_equal(td.n_runtime_alloc, 1);
    assert_int_equal(td.n_driver_alloc, 0);
}

/* Parse "NAME=N" out of the PLATEAU_DEBUG_CUDA summary line. */
static long summary_count(const char *name) {
    const char *line = strstr(err_buf, "plateau cuda: dlsym_hooked=");
    assert_non_null(line);
    char key[80];
    snprintf(key, sizeof key, " %s=", name);
    const char *p = strstr(line, key);
    if (!p && !strcmp(name, "dlsym_hooked")) p = line + strlen("plateau cuda:");
    assert_non_null(p);
    return strtol(strchr(p, '=') + 1, NULL, 10);
}

static void test_cuda_real_cudart_lookups_wrapped(void **state) {
    (void)state;
    if (!cudart || access(cudart, R_OK) != 0) {
        fprintf(stderr, "no libcudart at '%s': skipped\n", cudart ? cudart : "");
        skip();
    }
    char target[512], env_ld[700];
    snprintf(target, sizeof target, "%s/target_cudart_real", targets);
    snprintf(env_ld, sizeof env_ld, "LD_LIBRARY_PATH=%s", double_dir);
    const char *env[] = {env_ld, "PL_CUDA_DOUBLE=verbose:0", "PLATEAU_DEBUG_CUDA=1", NULL};
    char *argv[] = {target, (char *)(uintptr_t)cudart, NULL};
    assert_int_equal(run(argv, env), 0);
    int rc = -1;
    assert_int_equal(sscanf(out_buf, "cudaMalloc %d", &rc), 1);
    assert_int_not_equal(rc, 0); /* no GPU: the runtime's initialisation fails, as expected */
    /* It found cuGetProcAddress_v2 with dlsym and re-fetched cuGetProcAddress through itself: both wrapped. */
    assert_true(summary_count("dlsym_hooked") >= 1);
    assert_int_equal(summary_count("dlsym_trampoline"), 1); /* x86-64 and aarch64 */
    assert_true(summary_count("cuGetProcAddress_v2") >= 2);
    assert_true(summary_count("gpa_lookups") >= 10);
    assert_int_equal(summary_count("refused"), 0);
    /* Its look-ups of the allocation entry points got our wrappers, per ABI and stream variant. */
    assert_true(summary_count("cuMemAlloc_v2") >= 1);
    assert_true(summary_count("cuMemFree_v2") >= 1);
    assert_true(summary_count("cuMemAllocAsync") >= 1);
    assert_true(summary_count("cuMemAllocAsync_ptsz") >= 1);
    assert_true(summary_count("cuMemFreeAsync_ptsz") >= 1);
    assert_true(summary_count("cuMemFreeAsync") >= 1);
    assert_true(summary_count("cuMemAllocPitch_v2") >= 1);
    assert_true(summary_count("cuMemHostAlloc") >= 1);
    assert_true(summary_count("cuMemFreeHost") >= 1);
    assert_true(summary_count("cuMemAllocManaged") >= 1);
    /* and its cuInit, after which the CUPTI source starts (and fails cleanly here: one line) */
    assert_true(summary_count("cuInit") >= 1);
    if (have_cupti && libcupti && access(libcupti, R_OK) == 0) {
        assert_int_equal(count_lines(notes_buf, "CUPTI"), 1);
        assert_non_null(strstr(notes_buf, "plateau: CUPTI unavailable: cuptiActivityEnable: CUPTI_ERROR_"));
    }
}

int main(void) {
    preload = getenv("PL_PRELOAD");
    targets = getenv("PL_TARGETS");
    double_path = getenv("PL_CUDA_DOUBLE_PATH");
    cudart = getenv("PL_CUDART");
    libcupti = getenv("PL_LIBCUPTI");
    cupti_fake = getenv("PL_CUPTI_FAKE");
    have_cupti = getenv("PL_HAVE_CUPTI") && !strcmp(getenv("PL_HAVE_CUPTI"), "1");
    if (!preload || !targets || !double_path) {
        fprintf(stderr, "PL_PRELOAD, PL_TARGETS and PL_CUDA_DOUBLE_PATH must be set\n");
        return 1;
    }
    snprintf(double_dir, sizeof double_dir, "%s", double_path);
    char *slash = strrchr(double_dir, '/');
    if (slash) *slash = 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cuda_standin_trace_matches_driver_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_threads_same_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_direct_link_interposed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_runtime_in_local_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_real_cudart_lookups_wrapped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_cupti_off_no_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_cupti_missing_library_one_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_cupti_not_loaded_without_cuda, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_cupti_fake_records_cross_check, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
