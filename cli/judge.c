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

#include "analyze.h"
#include "commands.h"
#include "format.h"
#include "grow.h"
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
            if (pl_grow((void **)&b, &cap, cap + 1, 1)) { /* doubled */
                free(b);
                b = NULL;
                break;
            }
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

typedef struct judge_opts {
    const char *json, *as, *colname, *unit, *capacity; /* --json, --as, --column, --unit, --capacity */
    bool fail_on_leak;
    const char *path;          /* FILE ('-': stdin) */
    double unit_mul;           /* bytes per unit of --unit (1: bytes) */
    uint64_t cap_bytes;        /* --capacity in bytes, 0 none */
} judge_opts_t;

/* argv into o. Returns -1 to go on, or the exit status (0 after --help, 2 after a usage error). */
static int parse_options(int argc, char **argv, judge_opts_t *o) {
    static const struct option longopts[] = {
        {"json", required_argument, NULL, 'j'}, {"as", required_argument, NULL, 'a'},
        {"column", required_argument, NULL, 'c'}, {"unit", required_argument, NULL, 'u'},
        {"capacity", required_argument, NULL, 'C'}, {"fail-on-leak", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    *o = (judge_opts_t){.unit_mul = 1};
    optind = 0; /* glibc: a full reset, ordering included (run, attach and watch parse without permuting: opts.h) */
    for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
        switch (c) {
        case 'j': o->json = optarg; break;
        case 'a': o->as = optarg; break;
        case 'c': o->colname = optarg; break;
        case 'u': o->unit = optarg; break;
        case 'C': o->capacity = optarg; break;
        case 'f': o->fail_on_leak = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o->path = argv[optind];
    if (o->unit && !(o->unit_mul = pl_log_unit(o->unit))) {
        fprintf(stderr, "plateau judge: --unit %s: not a unit (B, KB, MB, GB, KiB, MiB, GiB)\n", pl_format_esc(o->unit));
        return 2;
    }
    if (o->capacity && pl_units_parse(o->capacity, &o->cap_bytes)) {
        fprintf(stderr, "plateau judge: --capacity %s: not a size (e.g. 80GiB)\n", pl_format_esc(o->capacity));
        return 2;
    }
    return -1;
}

/* The log read and parsed into log. Returns -1 to go on, or the exit status after one line. */
static int read_log(const judge_opts_t *o, pl_log_t *log) {
    size_t len;
    char *text = slurp(o->path, &len);
    if (!text) {
        fprintf(stderr, "plateau judge: %s: %s\n", pl_format_esc(o->path),
                errno == EINVAL ? "not a regular file" : strerror(errno));
        return 1;
    }
    char err[256] = "";
    pl_log_opts_t lo = {.metric = o->as, .column = o->colname, .unit_bytes = o->unit_mul};
    int rc = pl_log_parse(text, len, &lo, log, err, sizeof err);
    free(text);
    if (rc == -EINVAL) {
        fprintf(stderr, "plateau judge: --as %s: not a metric (rss, dev.reserved, dev.allocated, heap.bytes, ...)\n",
                pl_format_esc(o->as ? o->as : ""));
        return 2;
    }
    if (rc) {
        fprintf(stderr, "plateau judge: %s: %s\n", pl_format_esc(o->path), rc == -ENODATA ? err : strerror(-rc));
        return 1;
    }
    return -1;
}

/* What was read, and what was guessed, before the report. */
static void say_what_was_read(const char *path, const pl_log_t *log) {
    fprintf(stdout, "plateau judge: %s: %s, %zu run%s, steps from %s%s%s; ", pl_format_esc(path),
            pl_log_format_name(log->format), log->n_runs, log->n_runs == 1 ? "" : "s (a step went back: a restart)",
            log->by_order ? "the order of the rows" : "'", log->by_order ? "" : pl_format_esc(log->step_name),
            log->by_order ? "" : "'");
    bool any = false;
    for (size_t i = 0; i < log->n_cols; i++) {
        const pl_log_column_t *col = &log->cols[i];
        if (col->metric == PL_METRIC__COUNT) continue;
        fprintf(stdout, "%s'%s' judged as %s%s", any ? ", " : "", pl_format_esc(col->name),
                pl_metric_name(col->metric), col->guessed ? " (a guess: the log does not say host or device; --as)" : "");
        any = true;
    }
    fprintf(stdout, "\n");
}

/* Each run of the log as a process of rep, its memory columns as its series. Returns 0 or -ENOMEM. */
static int add_runs(pl_report_t *rep, const pl_log_t *log) {
    int rc = 0;
    for (size_t r = 0; r < log->n_runs && !rc; r++) {
        const pl_log_run_t *run = &log->runs[r];
        char name[96];
        snprintf(name, sizeof name, "run %zu (lines %zu-%zu, steps %lld-%lld)", r + 1, run->first_line,
                 run->last_line, (long long)run->first_step, (long long)run->last_step);
        pl_report_process_t *p = pl_report_add_process(rep, (int64_t)r + 1, -1, name);
        if (!p) return -ENOMEM;
        for (size_t c = 0; c < log->n_cols && !rc; c++) {
            if (!run->n[c] || log->cols[c].metric == PL_METRIC__COUNT) continue;
            rc = pl_report_set_samples(p, log->cols[c].metric, run->samples[c], run->n[c], NULL);
        }
    }
    return rc;
}

/* The text (unless --json -) and the JSON report. Returns the exit status. */
static int render(const judge_opts_t *o, pl_report_t *rep) {
    int status = 0;
    bool json_out = o->json && !strcmp(o->json, "-");
    if (!json_out) pl_render_text(rep, stdout, NULL);
    if (o->json) {
        int w = pl_cli_output(json_out ? NULL : o->json, render_json_cb, rep);
        if (w) {
            fprintf(stderr, "plateau judge: writing JSON to %s failed: %s\n", pl_format_esc(o->json), strerror(-w));
            status = 1;
        } else if (!json_out) {
            printf("JSON report: %s\n", pl_format_esc(o->json));
        }
    }
    if (o->fail_on_leak && rep->verdict.kind == PL_PV_LEAK && status == 0) status = PL_EXIT_LEAK;
    return status;
}

int pl_cli_judge(int argc, char **argv) {
    judge_opts_t o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0) return status;
    pl_log_t log;
    if ((status = read_log(&o, &log)) >= 0) return status;
    say_what_was_read(o.path, &log);
    pl_report_t *rep = pl_report_create(o.path);
    int rc = rep ? 0 : -ENOMEM;
    if (rep && o.cap_bytes) {
        rep->limits.host_bytes = (double)o.cap_bytes;
        rep->limits.device_bytes = (double)o.cap_bytes;
    }
    if (!rc) rc = add_runs(rep, &log);
    if (!rc) rc = pl_report_analyze(rep);
    if (rc) {
        fprintf(stderr, "plateau judge: %s\n", strerror(-rc));
        status = 1;
    } else {
        status = render(&o, rep);
    }
    pl_report_destroy(rep);
    pl_log_free(&log);
    return status;
}
