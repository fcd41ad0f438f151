/* cli/report: `plateau report RUN_DIR|TRACE [--json FILE] [--html FILE] [--metric NAME] [--since-step N]`,
 * [--csv FILE] [--trace-events FILE] [--torch-snapshot FILE],
 * `plateau report --merge RUN_DIR...`: the run directories of a multi-node job in one report (reports/extract.h,
 * pl_extract_paths; three or more, or two holding distinct ranks, merge without --merge), and
 * `plateau report RUN_A RUN_B [--json FILE] [--allocators A,B]`: the same program on two host allocators compared
 * (reports/compare.h), and `plateau report --between A B RUN_DIR`: what grew between two steps (reports/window.h).
 *
 * Reads the trace(s) (reports/extract.h), classifies every series, prints the text report to stdout and writes the
 * JSON / HTML reports and the exports (--csv, --trace-events, --torch-snapshot: reports/export.h, docs/export.md)
 * to the files asked for. Exit status: 0 when a report was produced (leaks or not, also a partial one from a damaged
 * trace), 1 when the input is unusable (nothing readable; for --torch-snapshot, no device allocation) or an output
 * cannot be written, 2 on bad arguments, PL_EXIT_LEAK (3) with --fail-on-leak when the run verdict is a leak (the
 * report is printed all the same).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plateau/trace.h>

#include "analyze.h"
#include "commands.h"
#include "output.h"
#include "compare.h"
#include "compare_render.h"
#include "between.h"
#include "export.h"
#include "extract.h"
#include "format.h"
#include "render.h"
#include "render_html.h"
#include "run.h"
#include "window.h"

static void usage(FILE *o) {
    fprintf(o, "usage: plateau report RUN_DIR|TRACE [--json FILE] [--html FILE] [--csv FILE] [--trace-events FILE]"
               " [--torch-snapshot FILE] [--metric NAME] [--since-step N] [--ascii]\n"
               "  RUN_DIR      a directory written by plateau run (every regular *.pltrace file in it), or one trace file\n"
               "  --json FILE  also write the JSON report (docs/report-schema.md); '-' = stdout instead of the text\n"
               "  --html FILE  also write a self-contained HTML report with charts; '-' = stdout instead of the text\n"
               "  --csv FILE   also write every process's per-step series as CSV (one row per process and step);\n"
               "               '-' = stdout instead of the text\n"
               "  --trace-events FILE  also write Chrome/Perfetto trace-event JSON (ui.perfetto.dev,\n"
               "               chrome://tracing): counters per metric, steps and marks; '-' = stdout instead of\n"
               "               the text\n"
               "  --torch-snapshot FILE  also write the device allocations as a PyTorch memory snapshot pickle\n"
               "               (torch.cuda.memory._snapshot() layout, for memory_viz); exit 1 when the run has none\n"
               "  --metric M   only this metric: rss rss.anon rss.file rss.shmem pss heap.bytes heap.count\n"
               "               dev.allocated dev.reserved dev.tensors dev.other cgroup tensors dev.active\n"
               "               dev.inactive_split\n"
               "  --since-step N  ignore steps before N\n"
               "  --ascii      ASCII sparklines\n"
               "  --between A B  what grew between step A and step B (optimizer steps, 0 <= A < B): per process the\n"
               "               change of every metric and the call sites whose live bytes grew in that window,\n"
               "               largest first; the text is that view alone, --json adds \"between\", --html a section\n"
               "               (docs/window.md)\n"
               "  --all-processes  every process in full (by default quiet workers are one line, and short\n"
               "               helpers, no steps, under 1 s and 64 MiB RSS, one count by name)\n"
               "  --fail-on-leak  exit 3 when the run verdict is LEAK (0 on no leak, slow growth, undecided,\n"
               "               no data; 1 unusable input; 2 bad arguments): a CI gate (docs/ci.md)\n"
               "  --slow-hours H     a growth is a leak only if it reaches the memory limit within H hours\n"
               "                     (default 24; slower: \"slow growth\", docs/verdict.md section 8)\n"
               "  --horizon-steps N  without step times or a limit: within N steps, or doubles within them\n"
               "                     (default 10000)\n"
               "  --flat-rel-per-step R  the practical threshold: a series growing less than R x its level per\n"
               "                     step is flat, never a leak (default 0.0001: +100 %% over 10 000 steps;\n"
               "                     docs/verdict.md section 4)\n"
               "usage: plateau report [--merge] RUN_DIR RUN_DIR... [options above]\n"
               "  one report of the run directories of the nodes of one job: a row per rank, the leaking rank, whether\n"
               "  the ranks agree; processes are told apart by host name and pid (docs/verdict.md section 9)\n"
               "  --merge      merge two directories (three or more, or two holding distinct ranks, merge without it)\n"
               "usage: plateau report RUN_A RUN_B [--json FILE] [--allocators A,B] [--since-step N] [--compare]\n"
               "  compare two runs of one program made with plateau run --host-allocator glibc and jemalloc:\n"
               "  allocator retention, a real leak, or growth outside the heap\n"
               "  --allocators A,B  host allocator of each run (glibc or jemalloc), when the traces cannot tell\n"
               "  --compare    compare the two runs even when they hold distinct ranks\n");
}

typedef struct rendering {
    const pl_run_t *run;
    const pl_render_text_opts_t *to;
    const pl_compare_t *c;
    const pl_export_torch_t *t;
} rendering_t;

static int render_html(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_render_html(g->run, o);
}
static int render_json(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_render_run_json(g->run, o, 0);
}
static int render_text(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    if (pl_window_first(g->run->ext)) return pl_window_text(g->run, o); /* --between: the window's view alone */
    return pl_render_run_text(g->run, o, g->to);
}
static int render_csv(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_export_csv(g->run, o);
}
static int render_trace_events(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_export_trace_events(g->run, o);
}
static int render_torch(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_export_torch_write(g->t, o);
}
static int render_compare_json(const void *ctx, FILE *o) {
    const rendering_t *g = ctx;
    return pl_compare_render_json(g->c, o);
}

/* '-' names stdout, where the report then goes instead of the text (as for tune and replay). */
static bool is_stdout(const char *path) { return path && !strcmp(path, "-"); }

/* Written whole through cli/output.c: a full disk reads "No space left on device", not an I/O error. */
static int write_file(const char *path, const char *what, const rendering_t *g, pl_cli_render_fn fn) {
    bool out = is_stdout(path);
    int rc = pl_cli_output(out ? NULL : path, fn, g);
    if (rc) {
        fprintf(stderr, "plateau report: writing %s to %s failed: %s\n", what, out ? "stdout" : pl_format_esc(path),
                strerror(-rc));
        return -1;
    }
    if (!out) printf("%s: %s\n", what, pl_format_esc(path));
    return 0;
}

/* --torch-snapshot: the device events are read again from the traces (the report keeps only their series) */
static int write_torch(const char *path, const pl_run_t *run) {
    pl_export_torch_t *t = NULL;
    pl_export_torch_info_t info;
    int rc = pl_export_torch_collect(run, &t, &info);
    if (rc) {
        fprintf(stderr, "plateau report: reading device events for --torch-snapshot failed: %s\n", strerror(-rc));
        return -1;
    }
    if (!t) {
        fprintf(stderr, "plateau report: --torch-snapshot: the run recorded no device allocations (no CUDA or "
                        "plateau allocator events in its traces); no file written\n");
        return -1;
    }
    rendering_t g = {.t = t};
    rc = write_file(path, "PyTorch memory snapshot", &g, render_torch);
    if (!rc && info.n_other_procs)
        printf("  (pid %u, %llu trace entries; %zu other process%s with device events left out)\n", info.pid,
               (unsigned long long)info.n_events, info.n_other_procs, info.n_other_procs > 1 ? "es" : "");
    if (!rc && info.n_dropped)
        printf("  (the oldest %llu trace entries left out: %u kept, as PyTorch's history keeps the latest)\n",
               (unsigned long long)info.n_dropped, PL_EXPORT_TORCH_MAX_EVENTS);
    pl_export_torch_free(t);
    return rc;
}

/* ---- plateau report RUN_A RUN_B ---- */

/* The run's main process: the root (whose parent is not in the run), else the first one read. */
static size_t main_proc(const pl_extract_t *x) {
    for (size_t i = 0; i < x->n_procs; i++) {
        bool child = false;
        for (size_t j = 0; j < x->n_procs; j++) child |= j != i && x->procs[j].pid == x->procs[i].ppid;
        if (!child) return i;
    }
    return 0;
}

static int parse_allocators(const char *s, char a[2][16]) {
    const char *comma = s ? strchr(s, ',') : NULL;
    if (!comma) return -1;
    snprintf(a[0], sizeof a[0], "%.*s", (int)(comma - s), s);
    snprintf(a[1], sizeof a[1], "%s", comma + 1);
    for (int i = 0; i < 2; i++)
        if (strcmp(a[i], "glibc") && strcmp(a[i], "jemalloc")) return -1;
    return 0;
}

/* What plateau run --host-allocator asked for, from the run-id file of the directory holding trace ("" none). */
static void requested_allocator(const char *trace, char *out, size_t n) {
    out[0] = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", trace);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    pl_trace_dir_t list;
    if (pl_trace_dir_list(slash && !dir[0] ? "/" : dir, &list)) return;
    snprintf(out, n, "%s", list.host_allocator);
    pl_trace_dir_free(&list);
}

static int compare(const char *path_a, const char *path_b, const char *allocs, const char *json,
                   const pl_extract_opts_t *eo) {
    char given[2][16] = {"", ""};
    if (allocs && parse_allocators(allocs, given)) {
        fprintf(stderr, "plateau report: --allocators wants two of glibc,jemalloc (e.g. glibc,jemalloc), not '%s'\n",
                allocs);
        return 2;
    }
    const char *paths[2] = {path_a, path_b};
    pl_run_t run[2] = {{0}, {0}};
    int status = 1;
    size_t mp[2];
    const char *alloc[2] = {NULL, NULL}, *from[2] = {"", ""};
    char asked[2][16];
    for (int i = 0; i < 2; i++) {
        if (pl_run_create(&run[i], paths[i])) {
            fprintf(stderr, "plateau report: out of memory\n");
            goto out;
        }
        const pl_extract_t *x = run[i].ext;
        int rc = pl_extract_path(run[i].report, run[i].ext, paths[i], eo);
        if (rc == -ENOMEM || x->n_procs == 0) {
            fprintf(stderr, "plateau report: no usable trace in %s: %s\n", pl_format_esc(paths[i]),
                    x->first_error[0] ? pl_format_esc(x->first_error) : strerror(-rc));
            goto out;
        }
        if ((rc = pl_run_analyze(&run[i]))) {
            fprintf(stderr, "plateau report: analysis of %s failed: %s\n", pl_format_esc(paths[i]), strerror(-rc));
            goto out;
        }
        mp[i] = main_proc(x);
        if (given[i][0]) {
            alloc[i] = given[i];
            from[i] = "given";
        } else {
            /* the allocator the tracer saw serve malloc; else the one plateau run was asked for (a jemalloc under
             * another file name is recorded as other:NAME); else a guess from usable sizes */
            pl_compare_proc_allocator(&x->procs[mp[i]], &alloc[i], &from[i]);
            requested_allocator(x->procs[mp[i]].file, asked[i], sizeof asked[i]);
            bool seen = alloc[i] && !strcmp(from[i], "recorded") &&
                        (!strcmp(alloc[i], "glibc") || !strcmp(alloc[i], "jemalloc"));
            if (asked[i][0] && !seen) {
                alloc[i] = asked[i];
                from[i] = "requested";
            } else if (asked[i][0] && strcmp(asked[i], alloc[i])) {
                fprintf(stderr, "plateau report: %s was run with --host-allocator %s, but its program ran on %s "
                                "(recorded); comparing it as %s\n",
                        pl_format_esc(paths[i]), asked[i], alloc[i], alloc[i]);
            }
        }
    }
    pl_compare_t c;
    if (pl_compare_runs(run[0].ext->procs[mp[0]].proc, alloc[0], paths[0], run[1].ext->procs[mp[1]].proc, alloc[1],
                        paths[1], &c))
        goto out;
    for (int i = 0; i < 2; i++) snprintf(c.run[i].allocator_from, sizeof c.run[i].allocator_from, "%s", from[i]);
    status = is_stdout(json) ? 0 : pl_compare_render_text(&c, stdout) ? 1 : 0;
    if (json) {
        rendering_t g = {.c = &c};
        int rc = pl_cli_output(is_stdout(json) ? NULL : json, render_compare_json, &g);
        if (rc) {
            fprintf(stderr, "plateau report: cannot write JSON comparison to %s: %s\n",
                    is_stdout(json) ? "stdout" : pl_format_esc(json), strerror(-rc));
            status = 1;
        } else if (!is_stdout(json)) printf("JSON report: %s\n", pl_format_esc(json));
    }
    fflush(stdout);
out:
    for (int i = 0; i < 2; i++) pl_run_destroy(&run[i]);
    return status;
}

/* Auto-merge (docs/verdict.md §9): two paths that each hold at least one rank, and no rank in both, are the nodes
 * of one job. Two runs of one job (the allocator comparison) hold the same
 * ranks, and runs without ranks never merge by themselves. */
static bool distinct_ranks(const char *a, const char *b) {
    int32_t *ra = NULL, *rb = NULL;
    size_t na = 0, nb = 0, ua, ub;
    bool distinct = !pl_extract_scan_ranks(a, &ra, &na, &ua) && !pl_extract_scan_ranks(b, &rb, &nb, &ub) && na && nb;
    for (size_t i = 0; distinct && i < na; i++)
        for (size_t j = 0; distinct && j < nb; j++) distinct = ra[i] != rb[j];
    free(ra);
    free(rb);
    return distinct;
}

static bool parse_step(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = s && *s >= '0' && *s <= '9' ? strtoll(s, &end, 10) : -1;
    if (v < 0 || errno || *end) return false;
    *out = v;
    return true;
}

/* --between A B (two words), or A..B / A:B in one: steps 0 <= A < B. The second word is taken from argv when it is
 * a number (getopt then treats it as the option's). Returns 0, or -1 after one line on stderr. */
static int parse_between(int argc, char **argv, const char *arg, pl_extract_opts_t *eo) {
    char a[32] = "", b[32] = "";
    const char *sep = strstr(arg, "..");
    size_t sl = 2;
    if (!sep && (sep = strchr(arg, ':'))) sl = 1;
    if (sep && (size_t)(sep - arg) < sizeof a) {
        snprintf(a, sizeof a, "%.*s", (int)(sep - arg), arg);
        snprintf(b, sizeof b, "%s", sep + sl);
    } else if (!sep) {
        snprintf(a, sizeof a, "%s", arg);
        if (optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9') snprintf(b, sizeof b, "%s", argv[optind++]);
    }
    int64_t va, vb;
    if (!parse_step(a, &va) || !parse_step(b, &vb)) {
        fprintf(stderr, "plateau report: --between wants two step numbers A B (0 <= A < B), not '%s%s%s'\n",
                pl_format_esc(arg), b[0] && !sep ? " " : "", !sep ? pl_format_esc(b) : "");
        return -1;
    }
    if (va >= vb) {
        fprintf(stderr, "plateau report: --between %lld %lld: the window's first step must come before its last "
                        "(A < B)\n", (long long)va, (long long)vb);
        return -1;
    }
    eo->window = true;
    eo->window_from = va;
    eo->window_to = vb;
    return 0;
}

/* ---- the options ---- */

typedef struct report_opts {
    const char *json, *html, *allocs, *csv, *tev, *torch; /* --json ... --torch-snapshot, --allocators */
    pl_extract_opts_t eo;         /* --metric, --since-step, --between */
    pl_render_text_opts_t to;     /* --ascii, --all-processes */
    pl_practical_params_t pp;     /* --slow-hours, --horizon-steps */
    double flat_rel;              /* --flat-rel-per-step; 0: the default (pl_verdict_params_default) */
    bool fail_on_leak, merge, force_compare;
    int n_stdout;                 /* how many outputs go to stdout ('-') instead of the text */
    int n_paths;                  /* the operands: run directories or traces */
    char **paths;
} report_opts_t;

static const struct option report_longopts[] = {
    {"json", required_argument, NULL, 'j'},   {"html", required_argument, NULL, 'H'},
    {"metric", required_argument, NULL, 'm'}, {"since-step", required_argument, NULL, 's'},
    {"ascii", no_argument, NULL, 'a'},        {"help", no_argument, NULL, 'h'},
    {"allocators", required_argument, NULL, 'A'},
    {"slow-hours", required_argument, NULL, 'S'}, {"horizon-steps", required_argument, NULL, 'N'},
    {"fail-on-leak", no_argument, NULL, 'F'},     {"all-processes", no_argument, NULL, 'P'},
    {"merge", no_argument, NULL, 'M'},            {"compare", no_argument, NULL, 'C'},
    {"csv", required_argument, NULL, 'V'},        {"trace-events", required_argument, NULL, 'T'},
    {"torch-snapshot", required_argument, NULL, 'Y'},
    {"between", required_argument, NULL, 'B'},
    {"flat-rel-per-step", required_argument, NULL, 'R'},
    {NULL, 0, NULL, 0},
};

/* --metric NAME into o. Returns 0, or 2 after one line and the usage. */
static int set_metric(report_opts_t *o, const char *arg) {
    int k;
    for (k = 0; k < PL_METRIC__COUNT; k++)
        if (!strcmp(arg, pl_metric_name((pl_metric_t)k))) break;
    if (k == PL_METRIC__COUNT) {
        fprintf(stderr, "plateau report: unknown metric '%s'\n", arg);
        usage(stderr);
        return 2;
    }
    o->eo.only_metric = true;
    o->eo.metric = (pl_metric_t)k;
    return 0;
}

/* A numeric option (--since-step, --slow-hours, --flat-rel-per-step, --horizon-steps) into o. Returns 0, or 2
 * after one line. */
static int set_number(report_opts_t *o, int c, const char *arg) {
    char *end;
    errno = 0;
    if (c == 's' || c == 'N') {
        long long v = strtoll(arg, &end, 10);
        bool bad = errno || *end || end == arg || v < (c == 's' ? 0 : 1);
        if (bad && c == 's') fprintf(stderr, "plateau report: --since-step wants a step number >= 0, not '%s'\n", arg);
        if (bad && c == 'N') fprintf(stderr, "plateau report: --horizon-steps wants a step count >= 1, not '%s'\n", arg);
        if (bad) return 2;
        if (c == 's') o->eo.since_step = v;
        else o->pp.horizon_steps = v;
        return 0;
    }
    double v = strtod(arg, &end);
    bool bad = errno || *end || end == arg || !(v > 0) || (c == 'S' ? v > 1e6 : !(v < 1));
    if (bad && c == 'S') fprintf(stderr, "plateau report: --slow-hours wants hours > 0, not '%s'\n", arg);
    if (bad && c == 'R')
        fprintf(stderr, "plateau report: --flat-rel-per-step wants a fraction of the level in (0, 1), not "
                        "'%s'\n", arg);
    if (bad) return 2;
    if (c == 'S') o->pp.slow_hours = v;
    else o->flat_rel = v;
    return 0;
}

/* argv into o. Returns -1 to go on, or the exit status (0 after --help, 2 after a usage error). */
static int parse_options(int argc, char **argv, report_opts_t *o) {
    *o = (report_opts_t){.pp = {.slow_hours = 24, .horizon_steps = 10000}};
    int c, rc = -1;
    optind = 0; /* glibc: a full reset, ordering included (run, attach and watch parse without permuting: opts.h) */
    while (rc < 0 && (c = getopt_long(argc, argv, "h", report_longopts, NULL)) != -1) {
        switch (c) {
        case 'j': o->json = optarg; break;
        case 'H': o->html = optarg; break;
        case 'V': o->csv = optarg; break;
        case 'T': o->tev = optarg; break;
        case 'Y': o->torch = optarg; break;
        case 'a': o->to.ascii = true; break;
        case 'F': o->fail_on_leak = true; break;
        case 'P': o->to.all_processes = true; break;
        case 'A': o->allocs = optarg; break;
        case 'M': o->merge = true; break;
        case 'C': o->force_compare = true; break;
        case 'm': rc = set_metric(o, optarg) ? 2 : -1; break;
        case 's': case 'S': case 'R': case 'N': rc = set_number(o, c, optarg) ? 2 : -1; break;
        case 'B': rc = parse_between(argc, argv, optarg, &o->eo) ? 2 : -1; break;
        case 'h': usage(stdout); rc = 0; break;
        default: usage(stderr); rc = 2; break;
        }
    }
    o->n_paths = argc - optind;
    o->paths = argv + optind;
    return rc;
}

/* What the operands and options ask for together: refused combinations (2 after one line), two runs compared (0
 * with !o->merge and two paths), or one report of one run or of merged ones (-1: go on). */
static int choose_mode(report_opts_t *o) {
    o->n_stdout = is_stdout(o->json) + is_stdout(o->html) + is_stdout(o->csv) + is_stdout(o->tev);
    if (o->n_stdout > 1) {
        fprintf(stderr, "plateau report: more than one of --json, --html, --csv, --trace-events asks for stdout ('-'): "
                        "write all but one to a file\n");
        return 2;
    }
    if (is_stdout(o->torch)) {
        fprintf(stderr, "plateau report: --torch-snapshot wants a file (a pickle is binary), not stdout\n");
        return 2;
    }
    if (o->merge && o->force_compare) {
        fprintf(stderr, "plateau report: --merge and --compare exclude each other\n");
        return 2;
    }
    if (o->force_compare && o->n_paths != 2) {
        fprintf(stderr, "plateau report: --compare needs exactly two runs\n");
        return 2;
    }
    char **p = o->paths;
    if (o->n_paths == 2 && !o->merge && !o->force_compare && !o->allocs && distinct_ranks(p[0], p[1])) {
        fprintf(stderr, "plateau report: %s and %s hold distinct ranks of one job: merged into one report "
                        "(--compare compares them instead)\n", pl_format_esc(p[0]), pl_format_esc(p[1]));
        o->merge = true;
    }
    if (o->n_paths > 2) o->merge = true; /* only two runs compare */
    if (o->eo.window && o->n_paths == 2 && !o->merge) {
        fprintf(stderr, "plateau report: --between applies to one run (or the merged nodes of one job), not to a "
                        "comparison of two runs\n");
        return 2;
    }
    if (o->n_paths == 2 && !o->merge) {
        if (o->html || o->eo.only_metric || o->csv || o->tev || o->torch) {
            fprintf(stderr, "plateau report: --html, --metric and the exports (--csv, --trace-events, "
                            "--torch-snapshot) do not apply to a comparison of two runs\n");
            return 2;
        }
        if (o->fail_on_leak) {
            fprintf(stderr, "plateau report: --fail-on-leak does not apply to a comparison of two runs\n");
            return 2;
        }
        return 0;
    }
    if (o->allocs) {
        fprintf(stderr, "plateau report: --allocators needs two runs to compare\n");
        return 2;
    }
    if (o->n_paths < 1) {
        fprintf(stderr, "plateau report: expected one RUN_DIR or TRACE, two runs to compare, or RUN_DIRs to merge\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* ---- one report ---- */

/* Read and analyze the run(s) into run. Returns 0, or 1 after one line. */
static int read_run(const report_opts_t *o, pl_run_t *run) {
    const char *path = o->paths[0];
    pl_report_t *r = run->report;
    const pl_extract_t *x = run->ext;
    r->practical = o->pp;
    if (o->flat_rel > 0) r->params.flat_rel_per_step = o->flat_rel;
    int rc = o->n_paths > 1 ? pl_extract_paths(r, run->ext, (const char *const *)o->paths, (size_t)o->n_paths, &o->eo)
                            : pl_extract_path(r, run->ext, path, &o->eo);
    if (rc == -ENOMEM) {
        fprintf(stderr, "plateau report: out of memory reading %s\n", pl_format_esc(path));
        return 1;
    }
    if (x->n_procs == 0) {
        fprintf(stderr, "plateau report: no usable trace: %s\n",
                x->first_error[0] ? pl_format_esc(x->first_error) : strerror(-rc));
        return 1;
    }
    if ((rc = pl_run_analyze(run))) {
        fprintf(stderr, "plateau report: analysis failed: %s\n", strerror(-rc));
        return 1;
    }
    for (size_t i = 0; i < x->n_procs; i++)
        if (x->procs[i].damaged)
            fprintf(stderr, "plateau report: warning: %s (partial report)\n", pl_format_esc(x->procs[i].error));
    char why[256];
    if (o->eo.window && !pl_window_usable(x, why, sizeof why)) { /* a window beyond the run, a run without steps */
        fprintf(stderr, "plateau report: --between %lld %lld: %s\n", (long long)o->eo.window_from,
                (long long)o->eo.window_to, why);
        return 1;
    }
    return 0;
}

/* The text on stdout (unless an output goes there) and every output asked for. Returns the exit status. */
static int render_outputs(const report_opts_t *o, pl_run_t *run) {
    int status = 0, rc = 0;
    rendering_t g = {.run = run, .to = &o->to};
    if (!o->n_stdout && (rc = pl_cli_output(NULL, render_text, &g))) {
        fprintf(stderr, "plateau report: writing the report to stdout failed: %s\n", strerror(-rc));
        status = 1;
    }
    if (!o->n_stdout && !rc)
        for (int i = 0; i < o->n_paths; i++) pl_cli_attach_note_print(o->paths[i], stdout); /* plateau attach's runs */
    if (o->json && write_file(o->json, "JSON report", &g, render_json)) status = 1;
    if (o->html && write_file(o->html, "HTML report", &g, render_html)) status = 1;
    if (o->csv && write_file(o->csv, "CSV series", &g, render_csv)) status = 1;
    if (o->tev && write_file(o->tev, "trace events", &g, render_trace_events)) status = 1;
    if (o->torch && write_torch(o->torch, run)) status = 1;
    if (o->fail_on_leak && status == 0 && run->report->verdict.kind == PL_PV_LEAK) status = PL_EXIT_LEAK;
    fflush(stdout);
    return status;
}

/* One report of one run, or of the merged run directories of one job. */
static int report_runs(const report_opts_t *o) {
    char source[256]; /* the report's source: the first path, and how many more were merged */
    if (o->n_paths > 1) snprintf(source, sizeof source, "%s (+%d more run director%s merged)", o->paths[0],
                                 o->n_paths - 1, o->n_paths > 2 ? "ies" : "y");
    pl_run_t run;
    if (pl_run_create(&run, o->n_paths > 1 ? source : o->paths[0])) {
        fprintf(stderr, "plateau report: out of memory\n");
        return 1;
    }
    int status = read_run(o, &run);
    if (!status) status = render_outputs(o, &run);
    pl_run_destroy(&run);
    return status;
}

int pl_cli_report(int argc, char **argv) {
    report_opts_t o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = choose_mode(&o);
    if (rc == 0) return compare(o.paths[0], o.paths[1], o.allocs, o.json, &o.eo);
    if (rc > 0) return rc;
    return report_runs(&o);
}
