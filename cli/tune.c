/* cli/tune: `plateau tune RUN_DIR|TRACE|SNAPSHOT|RMM_LOG [--capacity SIZE] [--grid SPEC] [--json FILE] [--jobs N]
 * [--top N] [--max-events N] [--device N]`.
 *
 * Loads the run's device allocation sequence (tune/replay_input.h: a plateau trace or run directory, a PyTorch
 * memory snapshot pickle or an RMM log), replays it under every config of the grid on all
 * cores (tune/tune.h), prints the ranked table, the winning PLATEAU_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF line and
 * one sentence of explanation. Exit status: 0 with a recommendation, 1 when the input is unusable (no trace, no
 * device records, too long) or an output cannot be written, 2 on bad arguments.
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "output.h"
#include "format.h"
#include "replay.h"
#include "replay_input.h"
#include "tune.h"
#include "units.h"

static void usage(FILE *o) {
    fprintf(o, "usage: plateau tune RUN_DIR|TRACE|SNAPSHOT|RMM_LOG [--capacity SIZE] [--grid SPEC] [--json FILE]\n"
               "                    [--jobs N] [--top N] [--max-events N] [--device N]\n"
               "  RUN_DIR         a directory written by plateau run, or one trace file\n"
               "  SNAPSHOT        a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot pickle)\n"
               "  RMM_LOG         an RMM logging_resource_adaptor CSV log\n"
               "  --capacity SIZE device memory for the replay (e.g. 24GiB; default: the recorded capacity,\n"
               "                  a snapshot's at its OOM, else 80GiB; the output says which)\n"
               "  --grid SPEC     settings to try: key=v1|v2|...;key=... ('default' leaves a key unset); default:\n"
               "                  " PL_TUNE_DEFAULT_GRID "\n"
               "  --json FILE     also write every result as JSON ('-' = stdout instead of the text)\n"
               "  --jobs N        replay threads (default: online cores)\n"
               "  --top N         table rows (default 15; 0 = all)\n"
               "  --max-events N  refuse sequences longer than N events (default %zu)\n"
               "  --device N      snapshots: the device trace to replay (default: the one with the most allocations)\n",
            PL_REPLAY_DEFAULT_MAX_EVENTS);
}

/* A size in the one grammar (common/units.h: 24GiB, 24G, 512MiB, 1e9 B as 1GB), more than 0 and at most what the
 * sim device can address. */
static int parse_capacity(const char *text, uint64_t *out) {
    uint64_t v;
    if (pl_units_parse(text, &v) || v == 0 || v > SIZE_MAX) return -EINVAL;
    *out = v;
    return 0;
}

static int parse_count(const char *text, unsigned long long max, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || v > max || text[0] == '-') return -EINVAL;
    *out = v;
    return 0;
}

typedef struct tune_rendering {
    const pl_tune_t *t;
    const pl_replay_seq_t *seq;
} tune_rendering_t;

static int render_tune_json(const void *ctx, FILE *o) {
    const tune_rendering_t *g = ctx;
    return pl_tune_render_json(g->t, g->seq, o);
}

typedef struct tune_opts {
    const char *grid_spec, *json;   /* --grid, --json */
    uint64_t capacity;              /* --capacity, 0: the recorded one */
    unsigned long long jobs, top, max_events, device; /* --jobs (0: one per core), --top, --max-events, --device */
    bool have_device;
    const char *path;               /* RUN_DIR|TRACE|SNAPSHOT|RMM_LOG */
} tune_opts_t;

/* An option's value into o. Returns 0, or 2 after one line. */
static int set_value(tune_opts_t *o, int c, const char *arg) {
    switch (c) {
    case 'c':
        if (parse_capacity(arg, &o->capacity)) {
            fprintf(stderr, "plateau tune: --capacity '%s' is not a size (e.g. 24GiB, 512MiB)\n", arg);
            return 2;
        }
        break;
    case 'g': o->grid_spec = arg; break;
    case 'j': o->json = arg; break;
    case 'J':
        if (parse_count(arg, 256, &o->jobs) || !o->jobs) {
            fprintf(stderr, "plateau tune: --jobs '%s' is not an integer in [1, 256]\n", arg);
            return 2;
        }
        break;
    case 't':
        if (parse_count(arg, 1000000, &o->top)) {
            fprintf(stderr, "plateau tune: --top '%s' is not a count\n", arg);
            return 2;
        }
        break;
    case 'm':
        if (parse_count(arg, 1ull << 40, &o->max_events) || !o->max_events) {
            fprintf(stderr, "plateau tune: --max-events '%s' is not a positive count\n", arg);
            return 2;
        }
        break;
    case 'd':
        if (parse_count(arg, 1u << 20, &o->device)) {
            fprintf(stderr, "plateau tune: --device '%s' is not a device index\n", arg);
            return 2;
        }
        o->have_device = true;
        break;
    }
    return 0;
}

/* argv into o. Returns -1 to go on, or the exit status (0 after --help, 2 after a usage error). */
static int parse_options(int argc, char **argv, tune_opts_t *o) {
    static const struct option longopts[] = {
        {"capacity", required_argument, NULL, 'c'}, {"grid", required_argument, NULL, 'g'},
        {"json", required_argument, NULL, 'j'},     {"jobs", required_argument, NULL, 'J'},
        {"top", required_argument, NULL, 't'},      {"max-events", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'd'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (tune_opts_t){.top = 15};
    int c;
    optind = 0; /* glibc: a full reset, ordering included (run, attach and watch parse without permuting: opts.h) */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?' || c == ':') {
            usage(stderr);
            return 2;
        }
        if (set_value(o, c, optarg)) return 2;
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o->path = argv[optind];
    return -1;
}

/* The ranking as text (unless --json -) and JSON. Returns the exit status. */
static int render(const tune_opts_t *o, const pl_tune_t *t, const pl_replay_seq_t *seq, bool json_out) {
    if (!json_out && pl_tune_render_text(t, seq, (size_t)o->top, stdout) != 0) return 1;
    if (!o->json) return 0;
    tune_rendering_t g = {t, seq};
    int rc = pl_cli_output(json_out ? NULL : o->json, render_tune_json, &g); /* a full disk reads ENOSPC, not EIO */
    if (rc) {
        fprintf(stderr, "plateau tune: cannot write %s: %s\n", json_out ? "stdout" : pl_format_esc(o->json),
                strerror(-rc));
        return 1;
    }
    if (!json_out) printf("json: %s\n", pl_format_esc(o->json));
    return 0;
}

/* Replay seq under every setting of grid, rank them, render. Returns the exit status. */
static int tune(const tune_opts_t *o, const pl_tune_grid_t *grid, const pl_replay_seq_t *seq, bool json_out) {
    char capacity_why[128], err[1024];
    uint64_t capacity = pl_replay_pick_capacity(seq, o->capacity, capacity_why, sizeof capacity_why);
    pl_tune_t t;
    if (pl_tune_run(seq, grid, capacity, (unsigned)o->jobs, &t, err, sizeof err) != 0) {
        fprintf(stderr, "plateau tune: %s\n", pl_format_esc(err));
        return 1;
    }
    snprintf(t.capacity_why, sizeof t.capacity_why, "%s", capacity_why);
    int status = render(o, &t, seq, json_out);
    pl_tune_free(&t);
    return status;
}

int pl_cli_tune(int argc, char **argv) {
    tune_opts_t o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0) return status;
    char err[1024];
    pl_tune_grid_t *grid = malloc(sizeof *grid);
    if (!grid) return 1;
    if (pl_tune_grid_parse(o.grid_spec, grid, err, sizeof err) != 0) {
        fprintf(stderr, "plateau tune: %s\n", pl_format_esc(err));
        free(grid);
        return 2;
    }
    pl_replay_seq_t seq;
    pl_replay_load_opts_t ro = {.max_events = (size_t)o.max_events, .device = o.have_device ? (int)o.device : -1};
    pl_replay_input_t *in = malloc(sizeof *in);
    if (!in || pl_replay_load(o.path, &ro, &seq, in, err, sizeof err) != 0) {
        fprintf(stderr, "plateau tune: %s\n", in ? pl_format_esc(err) : "out of memory");
        free(in);
        free(grid);
        return 1;
    }
    bool json_out = o.json && !strcmp(o.json, "-"); /* JSON on stdout instead of the text, as for replay and report */
    fputs(in->summary, json_out ? stderr : stdout); /* what a snapshot or an RMM log held ("" for traces) */
    free(in);
    if (seq.damaged) fprintf(stderr, "plateau tune: warning: %s: replaying the records before the damage\n",
                               pl_format_esc(seq.error));
    status = tune(&o, grid, &seq, json_out);
    pl_replay_seq_free(&seq);
    free(grid);
    return status;
}
