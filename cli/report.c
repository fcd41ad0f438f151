/* cli/report: `plateau report RUN_DIR|TRACE [--json FILE] [--html FILE] [--metric NAME] [--since-step N]`.
 *
 * Reads the trace(s) (reports/extract.h), classifies every series, prints the text report to stdout and writes the
 * JSON / HTML reports to the files asked for. Exit status: 0 when a report was produced (leaks or not, also a
 * partial one from a damaged trace), 1 when the input is unusable (nothing readable) or an output cannot be
 * written, 2 on bad arguments.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "reports/extract.h"
#include "reports/render.h"
#include "reports/render_html.h"

static void usage(FILE *o) {
    fprintf(o, "usage: plateau report RUN_DIR|TRACE [--json FILE] [--html FILE] [--metric NAME] [--since-step N]"
               " [--ascii]\n"
               "  RUN_DIR      a directory written by plateau run (every *.pltrace in it), or one trace file\n"
               "  --json FILE  also write the JSON report (docs/report-schema.md)\n"
               "  --html FILE  also write a self-contained HTML report with charts\n"
               "  --metric M   only this metric: rss rss.anon rss.file rss.shmem pss heap.bytes heap.count\n"
               "               dev.allocated dev.reserved dev.tensors dev.other cgroup\n"
               "  --since-step N  ignore steps before N\n"
               "  --ascii      ASCII sparklines\n");
}

static int write_file(const char *path, const char *what, const pl_report_t *r, const pl_extract_t *x, bool html) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "plateau report: cannot write %s report to %s: %s\n", what, path, strerror(errno));
        return -1;
    }
    int rc = html ? pl_render_html(r, x, f) : pl_extract_render_json(r, x, f, 0);
    if (fclose(f) && !rc) rc = -EIO;
    if (rc) {
        fprintf(stderr, "plateau report: writing %s report to %s failed: %s\n", what, path, strerror(-rc));
        return -1;
    }
    printf("%s report: %s\n", what, path);
    return 0;
}

int pl_cli_report(int argc, char **argv) {
    static const struct option longopts[] = {
        {"json", required_argument, NULL, 'j'},   {"html", required_argument, NULL, 'H'},
        {"metric", required_argument, NULL, 'm'}, {"since-step", required_argument, NULL, 's'},
        {"ascii", no_argument, NULL, 'a'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *json = NULL, *html = NULL;
    pl_extract_opts_t eo = {0};
    pl_render_text_opts_t to = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = optarg; break;
        case 'H': html = optarg; break;
        case 'a': to.ascii = true; break;
        case 'm': {
            int k;
            for (k = 0; k < PL_METRIC__COUNT; k++)
                if (!strcmp(optarg, pl_metric_name((pl_metric_t)k))) break;
            if (k == PL_METRIC__COUNT) {
                fprintf(stderr, "plateau report: unknown metric '%s'\n", optarg);
                usage(stderr);
                return 2;
            }
            eo.only_metric = true;
            eo.metric = (pl_metric_t)k;
            break;
        }
        case 's': {
            char *end;
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 0) {
                fprintf(stderr, "plateau report: --since-step wants a step number >= 0, not '%s'\n", optarg);
                return 2;
            }
            eo.since_step = v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "plateau report: expected one RUN_DIR or TRACE\n");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    pl_report_t *r = pl_report_create(path);
    if (!r) {
        fprintf(stderr, "plateau report: out of memory\n");
        return 1;
    }
    pl_extract_t x;
    pl_extract_init(&x);
    int status = 0;
    int rc = pl_extract_path(r, &x, path, &eo);
    if (rc == -ENOMEM) {
        fprintf(stderr, "plateau report: out of memory reading %s\n", path);
        status = 1;
        goto out;
    }
    if (x.n_procs == 0) {
        fprintf(stderr, "plateau report: no usable trace: %s\n", x.first_error[0] ? x.first_error : strerror(-rc));
        status = 1;
        goto out;
    }
    if ((rc = pl_report_analyze(r))) {
        fprintf(stderr, "plateau report: analysis failed: %s\n", strerror(-rc));
        status = 1;
        goto out;
    }
    for (size_t i = 0; i < x.n_procs; i++)
        if (x.procs[i].damaged) fprintf(stderr, "plateau report: warning: %s (partial report)\n", x.procs[i].error);
    if (pl_render_text(r, stdout, &to) || pl_extract_render_text(r, &x, stdout)) status = 1;
    if (json && write_file(json, "JSON", r, &x, false)) status = 1;
    if (html && write_file(html, "HTML", r, &x, true)) status = 1;
    fflush(stdout);
out:
    pl_extract_free(&x);
    pl_report_destroy(r);
    return status;
}
