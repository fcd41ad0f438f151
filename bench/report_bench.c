/* report_bench: time and peak memory of `plateau report`'s streaming path on a generated trace.
 *
 * usage: report_bench [MiB] [DIR]  (default 1024 MiB in $TMPDIR or /tmp). Writes a synthetic trace of about MiB
 * mebibytes with the tracer's writer (tests/cli/test_report_synth.h: about 440 bytes per step), then reads it back
 * through pl_extract_path + pl_report_analyze + the text renderer (to /dev/null), and prints wall time, throughput
 * and the growth of peak RSS during the report (getrusage ru_maxrss before and after). The trace is deleted.
 * Targets: <= 10 s and <= 200 MB for 1 GB on the 2-core dev machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../tests/cli/test_report_synth.h"
#include "analyze.h"
#include "extract.h"
#include "render.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    const char *dir = argc > 2 ? argv[2] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mib < 1) mib = 1;
    char path[512];
    snprintf(path, sizeof path, "%s/report_bench-%d.pltrace", dir, (int)getpid());
    synth_cfg_t c = synth_default();
    c.leak_bytes = 4096;
    c.n_steps = (int)(mib * 1048576.0 / 440.0);
    double t0 = now_s();
    int rc = synth_trace(path, &c);
    if (rc) {
        fprintf(stderr, "report_bench: writing %s: %s\n", path, strerror(-rc));
        return 1;
    }
    double t1 = now_s();
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    double bytes = (double)ftell(f);
    fclose(f);
    long rss0 = maxrss_kb();
    pl_report_t *r = pl_report_create(path);
    pl_extract_t x;
    pl_extract_init(&x);
    double t2 = now_s();
    rc = pl_extract_path(r, &x, path, NULL);
    if (!rc) rc = pl_report_analyze(r);
    FILE *null = fopen("/dev/null", "w");
    if (!rc && null) rc = pl_render_text(r, null, NULL);
    double t3 = now_s();
    long rss1 = maxrss_kb();
    if (null) fclose(null);
    unlink(path);
    if (rc) {
        fprintf(stderr, "report_bench: report failed: %s\n", strerror(-rc));
        return 1;
    }
    printf("trace: %.0f MB, %d steps, written in %.2f s\n", bytes / 1e6, c.n_steps, t1 - t0);
    printf("report: %.2f s (%.0f MB/s), peak RSS %.1f MB (before the report: %.1f MB)\n", t3 - t2,
           bytes / 1e6 / (t3 - t2), (double)rss1 / 1024, (double)rss0 / 1024);
    pl_extract_free(&x);
    pl_report_destroy(r);
    return 0;
}
