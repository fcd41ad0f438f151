/* trace_overhead: wall-time ratio traced/untraced of (a) an 8-thread malloc storm (tests/targets/storm:
 * 8 x ITERS malloc+free of mixed sizes) and (b) a training loop (plateau-train on the sim device), and the
 * same ratio for heaptrack when it is installed; plus the trace size per 1,000 steps of (b). Each
 * configuration runs REPS times, alternating, and the median wall time is used (the machine is shared).
 * Usage: trace_overhead --preload LIB --storm EXE --train EXE [--reps N] [--iters N] [--steps N] [--json] */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

enum { PLAIN, TRACED, HEAPTRACK, N_MODES };
static const char *mode_name[N_MODES] = {"untraced", "plateau", "heaptrack"};
static const char *preload, *heaptrack = "/usr/bin/heaptrack";
static char tmpdir[] = "/tmp/pl-bench-XXXXXX";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rm_rf(const char *d) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "warning: %s failed\n", cmd);
}

static long dir_bytes(const char *d) {
    DIR *dd = opendir(d);
    if (!dd) return 0;
    long n = 0;
    struct dirent *e;
    char p[800];
    struct stat sb;
    while ((e = readdir(dd)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            if (stat(p, &sb) == 0) n += sb.st_size;
        }
    closedir(dd);
    return n;
}

/* Run argv in `mode`; returns wall seconds, *cpu_s the child's user+sys CPU seconds. *trace_bytes gets the
 * run directory's size (plateau mode). */
static double run_once(char *const argv[], int mode, long *trace_bytes, double *cpu_s) {
    char run_dir[300];
    snprintf(run_dir, sizeof run_dir, "%s/run", tmpdir);
    rm_rf(run_dir);
    PL_CHECK(mkdir(run_dir, 0700) == 0);
    char *hargv[64];
    int k = 0;
    if (mode == HEAPTRACK) {
        static char out[400];
        snprintf(out, sizeof out, "%s/ht", run_dir);
        hargv[k++] = (char *)heaptrack;
        hargv[k++] = "-o";
        hargv[k++] = out;
    }
    for (int i = 0; argv[i] && k < 63; i++) hargv[k++] = argv[i];
    hargv[k] = NULL;
    double t0 = now_s();
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        if (mode == TRACED) {
            setenv("LD_PRELOAD", preload, 1);
            setenv("PLATEAU_DIR", run_dir, 1);
            setenv("PLATEAU_QUIET", "1", 1);
        }
        execv(hargv[0], hargv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    PL_CHECK(wait4(pid, &st, 0, &ru) == pid);
    double t = now_s() - t0;
    *cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
             (double)ru.ru_stime.tv_usec * 1e-6;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s run of %s failed (status %d)\n", mode_name[mode], argv[0], st);
        exit(1);
    }
    if (trace_bytes) *trace_bytes = dir_bytes(run_dir);
    return t;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { double median[N_MODES], cpu[N_MODES]; bool have[N_MODES]; long trace_bytes; } result_t;

static void measure(char *const argv[], int reps, bool with_heaptrack, result_t *r) {
    double t[N_MODES][32], c[N_MODES][32];
    memset(r, 0, sizeof *r);
    for (int i = 0; i < reps; i++)
        for (int m = 0; m < N_MODES; m++) {
            if (m == HEAPTRACK && !with_heaptrack) continue;
            long bytes = 0;
            t[m][i] = run_once(argv, m, m == TRACED ? &bytes : NULL, &c[m][i]);
            if (m == TRACED) r->trace_bytes = bytes;
        }
    for (int m = 0; m < N_MODES; m++) {
        if (m == HEAPTRACK && !with_heaptrack) continue;
        qsort(t[m], (size_t)reps, sizeof(double), cmp_d);
        qsort(c[m], (size_t)reps, sizeof(double), cmp_d);
        r->median[m] = t[m][reps / 2];
        r->cpu[m] = c[m][reps / 2];
        r->have[m] = true;
    }
}

int main(int argc, char **argv) {
    const char *storm = NULL, *train = NULL;
    int reps = 3, iters = 1000000, steps = 50;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preload") && i + 1 < argc) preload = argv[++i];
        else if (!strcmp(argv[i], "--storm") && i + 1 < argc) storm = argv[++i];
        else if (!strcmp(argv[i], "--train") && i + 1 < argc) train = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heaptrack") && i + 1 < argc) heaptrack = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: %s --preload LIB --storm EXE --train EXE [--reps N] [--iters N] [--steps N] "
                            "[--heaptrack PATH] [--json]\n", argv[0]);
            return 2;
        }
    }
    if (!preload || !storm || !train || reps < 1 || reps > 32 || iters < 1 || steps < 1) {
        fprintf(stderr, "trace_overhead: --preload, --storm and --train are required (see --help)\n");
        return 2;
    }
    PL_CHECK(mkdtemp(tmpdir));
    bool ht = access(heaptrack, X_OK) == 0;
    char iters_s[32], steps_s[32];
    snprintf(iters_s, sizeof iters_s, "%d", iters);
    snprintf(steps_s, sizeof steps_s, "%d", steps);
    char *a_argv[] = {(char *)storm, iters_s, "8", NULL};
    char *b_argv[] = {(char *)train, "--steps", steps_s, "--layers", "2", "--channels", "64", "--threads", "1",
                      "--log-every", "1000000", NULL};
    result_t a, b;
    measure(a_argv, reps, ht, &a);
    measure(b_argv, reps, ht, &b);
    rm_rf(tmpdir);
    double ra = a.median[TRACED] / a.median[PLAIN], rb = b.median[TRACED] / b.median[PLAIN];
    double ha = ht ? a.median[HEAPTRACK] / a.median[PLAIN] : 0, hb = ht ? b.median[HEAPTRACK] / b.median[PLAIN] : 0;
    double per_1000 = (double)b.trace_bytes * 1000.0 / steps;
    if (json) {
        printf("{\"reps\":%d,\"storm\":{\"threads\":8,\"ops\":%d,\"untraced_s\":%.3f,\"plateau_s\":%.3f,"
               "\"plateau_ratio\":%.3f,\"heaptrack_s\":%.3f,\"heaptrack_ratio\":%.3f,\"trace_bytes\":%ld},"
               "\"train\":{\"steps\":%d,\"untraced_s\":%.3f,\"plateau_s\":%.3f,\"plateau_ratio\":%.3f,"
               "\"heaptrack_s\":%.3f,\"heaptrack_ratio\":%.3f,\"trace_bytes\":%ld,\"trace_bytes_per_1000_steps\":%.0f},"
               "\"cpu_ratio\":{\"storm\":%.3f,\"train\":%.3f},\"heaptrack_installed\":%s}\n",
               reps, 8 * iters, a.median[PLAIN], a.median[TRACED], ra, a.median[HEAPTRACK], ha, a.trace_bytes, steps,
               b.median[PLAIN], b.median[TRACED], rb, b.median[HEAPTRACK], hb, b.trace_bytes, per_1000,
               a.cpu[TRACED] / a.cpu[PLAIN], b.cpu[TRACED] / b.cpu[PLAIN], ht ? "true" : "false");
    } else {
        printf("workload                         untraced   plateau  ratio   heaptrack  ratio\n");
        printf("(a) malloc storm, 8 thr, %7d  %7.3fs  %7.3fs  %5.2fx", 8 * iters, a.median[PLAIN], a.median[TRACED], ra);
        if (ht) printf("  %8.3fs  %5.2fx", a.median[HEAPTRACK], ha);
        printf("\n(b) training loop, %4d steps     %7.3fs  %7.3fs  %5.2fx", steps, b.median[PLAIN], b.median[TRACED], rb);
        if (ht) printf("  %8.3fs  %5.2fx", b.median[HEAPTRACK], hb);
        printf("\ncpu-time ratio (user+sys, less sensitive to a loaded machine): (a) %.2fx, (b) %.2fx",
               a.cpu[TRACED] / a.cpu[PLAIN], b.cpu[TRACED] / b.cpu[PLAIN]);
        printf("\ntrace size of (b): %ld bytes, %.0f bytes per 1,000 steps (median of %d runs each)\n", b.trace_bytes,
               per_1000, reps);
    }
    return 0;
}
