/* plateau judge FILE: the verdict on the memory a training log already holds (reports/logjudge.h reads it;
 * docs/judge.md). Wiring only: read the file, one report process per run of the log, one metric per memory
 * column, analyse and render like a traced run's report. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "format.h"
#include "logjudge.h"
#include "output.h"
#include "render.h"
#include "report.h"
#include "units.h"

#define MAX_LOG_BYTES (256u << 20)

static void usage(FILE *f) {
    fprintf(f, "usage: plateau judge FILE [--json FILE] [--as METRIC] [--column NAME] [--unit UNIT] [--capacity SIZE]\n"
               "                     [--fail-on-leak]\n"
               "  FILE          a training log or table of steps and memory: free text (\"Step 10: 5,552 MB\"), CSV\n"
               "                (a step column and memory columns, e.g. Lightning's metrics.csv, nvidia-smi --format=csv)\n"
               "                or JSON lines; '-' reads stdin. A step that goes back starts a new run (docs/judge.md)\n"
               "  --json FILE   also write the JSON report ('-' = stdout instead of the text)\n"
               "  --as METRIC   judge every memory column as METRIC (rss, dev.reserved, dev.allocated, ...); by\n"
               "                default named by the column (reserved, allocated, gpu/vram: device; rss/ram: host)\n"
               "  --column NAME judge only this column\n"
               "  --unit UNIT   unit of values that carry none (CSV and JSON; default bytes): B, KB, MB, GB, KiB, MiB,\n"
               "                GiB\n"
               "  --capacity SIZE  the memory limit to project an OOM against (e.g. 80GiB, a GPU's memory)\n"
               "  --fail-on-leak   exit 3 when the verdict is LEAK\n");
}

/* the whole file (or stdin), at most MAX_LOG_BYTES; NULL with errno set */
static char *slurp(const char *path, size_t *len) {
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : 0;
    if (fd < 0) return NULL;
    struct stat st;
    if (fd && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        if (fd) close(fd);
        errno = EINVAL;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (ssize_t r; b;) {
        if (n == cap) {
            if (cap >= MAX_LOG_BYTES) {
                free(b);
                b = NULL;
                errno = EFBIG;
                break;
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(b);
            b = NULL;
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    int e = errno;
    if (fd) close(fd);
    errno = e;
    *len = n;
    return b;
}

static int render_json_cb(const void *ctx, FILE *o) { return pl_render_json(ctx, o, 0); }

int pl_cli_judge(int argc, char **argv) {
    const char *json = NULL, *as = NULL, *colname = NULL, *unit = NULL, *capacity = NULL;
    bool fail_on_leak = false;
    static const struct option longopts[] = {
        {"json", required_argument, NULL, 'j'}, {"as", required_argument, NULL, 'a'},
        {"column", required_argument, NULL, 'c'}, {"unit", required_argument, NULL, 'u'},
        {"capacity", required_argument, NULL, 'C'}, {"fail-on-leak", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    optind = 0; /* glibc: a full reset, ordering included (run, attach and watch parse without permuting: opts.h) */
    for (int o; (o = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
        switch (o) {
        case 'j': json = optarg; break;
        case 'a': as = optarg; break;
        case 'c': colname = optarg; break;
        case 'u': unit = optarg; break;
        case 'C': capacity = optarg; break;
        case 'f': fail_on_leak = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    double unit_mul = 1;
    if (unit && !(unit_mul = pl_log_unit(unit))) {
        fprintf(stderr, "plateau judge: --unit %s: not a unit (B, KB, MB, GB, KiB, MiB, GiB)\n", pl_format_esc(unit));
        return 2;
    }
    uint64_t cap_bytes = 0;
    if (capacity && pl_units_parse(capacity, &cap_bytes)) {
        fprintf(stderr, "plateau judge: --capacity %s: not a size (e.g. 80GiB)\n", pl_format_esc(capacity));
        return 2;
    }
    size_t len;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "plateau judge: %s: %s\n", pl_format_esc(path),
                errno == EINVAL ? "not a regular file" : strerror(errno));
        return 1;
    }
    pl_log_t log;
    char err[256] = "";
    pl_log_opts_t lo = {.metric = as, .column = colname, .unit_bytes = unit_mul};
    int rc = pl_log_parse(text, len, &lo, &log, err, sizeof err);
    free(text);
    if (rc == -EINVAL) {
        fprintf(stderr, "plateau judge: --as %s: not a metric (rss, dev.reserved, dev.allocated, heap.bytes, ...)\n",
                pl_format_esc(as ? as : ""));
        return 2;
    }
    if (rc) {
        fprintf(stderr, "plateau judge: %s: %s\n", pl_format_esc(path), rc == -ENODATA ? err : strerror(-rc));
        return 1;
    }

    /* what was read, and what was guessed, before the report */
    fprintf(stdout, "plateau judge: %s: %s, %zu run%s, steps from %s%s%s; ", pl_format_esc(path),
            pl_log_format_name(log.format), log.n_runs, log.n_runs == 1 ? "" : "s (a step went back: a restart)",
            log.by_order ? "the order of the rows" : "'", log.by_order ? "" : pl_format_esc(log.step_name),
            log.by_order ? "" : "'");
    bool any = false;
    for (size_t i = 0; i < log.n_cols; i++) {
        const pl_log_column_t *col = &log.cols[i];
        if (col->metric == PL_METRIC__COUNT) continue;
        fprintf(stdout, "%s'%s' judged as %s%s", any ? ", " : "", pl_format_esc(col->name),
                pl_metric_name(col->metric), col->guessed ? " (a guess: the log does not say host or device; --as)" : "");
        any = true;
    }
    fprintf(stdout, "\n");

    pl_report_t *rep = pl_report_create(path);
    rc = rep ? 0 : -ENOMEM;
    if (rep && cap_bytes) {
        rep->limits.host_bytes = (double)cap_bytes;
        rep->limits.device_bytes = (double)cap_bytes;
    }
    for (size_t r = 0; r < log.n_runs && !rc; r++) {
        pl_log_run_t *run = &log.runs[r];
        char name[96];
        snprintf(name, sizeof name, "run %zu (lines %zu-%zu, steps %lld-%lld)", r + 1, run->first_line,
                 run->last_line, (long long)run->first_step, (long long)run->last_step);
        pl_report_process_t *p = pl_report_add_process(rep, (int64_t)r + 1, -1, name);
        if (!p) {
            rc = -ENOMEM;
            break;
        }
        for (size_t c = 0; c < log.n_cols && !rc; c++) {
            if (!run->n[c] || log.cols[c].metric == PL_METRIC__COUNT) continue;
            rc = pl_report_set_samples(p, log.cols[c].metric, run->samples[c], run->n[c], NULL);
        }
    }
    if (!rc) rc = pl_report_analyze(rep);
    int status = 0;
    if (rc) {
        fprintf(stderr, "plateau judge: %s\n", strerror(-rc));
        status = 1;
    } else {
        bool json_out = json && !strcmp(json, "-");
        if (!json_out) pl_render_text(rep, stdout, NULL);
        if (json) {
            int w = pl_cli_output(json_out ? NULL : json, render_json_cb, rep);
            if (w) {
                fprintf(stderr, "plateau judge: writing JSON to %s failed: %s\n", pl_format_esc(json), strerror(-w));
                status = 1;
            } else if (!json_out) {
                printf("JSON report: %s\n", pl_format_esc(json));
            }
        }
        if (fail_on_leak && rep->verdict.kind == PL_PV_LEAK && status == 0) status = PL_EXIT_LEAK;
    }
    pl_report_destroy(rep);
    pl_log_free(&log);
    return status;
}
