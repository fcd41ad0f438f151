/* cli/replay: `plateau replay RUN_DIR|TRACE|SNAPSHOT|RMM_LOG --conf STRING [--capacity SIZE] [--json FILE]
 * [--max-events N] [--device N]` (inputs: tune/replay_input.h).
 *
 * Replays the recorded device allocation sequence under one allocator setting and prints every statistic as
 * `name: value` lines (for scripts), with the recorded alloc_stats beside the replay's at the same point when the
 * trace has them. Exit status: 0 when the replay ran (an OOM is a result), 1 unusable input, 2 bad arguments.
 */
#include <errno.h>
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
    fprintf(o, "usage: plateau replay RUN_DIR|TRACE|SNAPSHOT|RMM_LOG --conf STRING [--capacity SIZE] [--json FILE]\n"
               "                      [--max-events N] [--device N]\n"
               "  input           a plateau run directory or trace, a PyTorch memory snapshot pickle, an RMM CSV log\n"
               "  --conf STRING   allocator settings, PLATEAU_ALLOC_CONF syntax (\"\" = defaults)\n"
               "  --capacity SIZE device memory (default: the recorded capacity, else 80GiB)\n"
               "  --json FILE     write the stats as JSON to FILE ('-' = stdout instead of the text)\n"
               "  --device N      snapshots: the device trace to replay (default: the one with the most allocations)\n");
}

typedef struct replay_rendering {
    const pl_replay_seq_t *seq;
    const char *conf;
    const pl_replay_result_t *r;
    const char *capacity_why;
} replay_rendering_t;

static int render_replay_json(const void *ctx, FILE *o) {
    const replay_rendering_t *g = ctx;
    pl_replay_render_json(g->seq, g->conf, g->r, g->capacity_why, o);
    return ferror(o) ? -ENOMEM : 0;
}

typedef struct replay_opts {
    const char *conf, *json;   /* --conf (required), --json */
    uint64_t capacity;         /* --capacity, 0: the recorded one */
    size_t max_events;         /* --max-events, 0 all */
    int device;                /* --device, -1: the one with the most allocations */
    const char *path;          /* RUN_DIR|TRACE|SNAPSHOT|RMM_LOG */
} replay_opts_t;

/* An option's value into o. Returns 0, or 2 after one line. */
static int set_value(replay_opts_t *o, int c, const char *arg) {
    char *end;
    if (c == 'c') {
        o->conf = arg;
    } else if (c == 'j') {
        o->json = arg;
    } else if (c == 'C') {
        if (pl_units_parse(arg, &o->capacity) || o->capacity == 0 || o->capacity > SIZE_MAX) {
            fprintf(stderr, "plateau replay: --capacity '%s' is not a size (e.g. 24GiB, 512MiB)\n", arg);
            return 2;
        }
    } else if (c == 'm') {
        unsigned long long v = strtoull(arg, &end, 10);
        if (end == arg || *end || !v || arg[0] == '-') {
            fprintf(stderr, "plateau replay: --max-events '%s' is not a positive count\n", arg);
            return 2;
        }
        o->max_events = (size_t)v;
    } else if (c == 'd') {
        unsigned long v = strtoul(arg, &end, 10);
        if (end == arg || *end || v > (1ul << 20) || arg[0] == '-') {
            fprintf(stderr, "plateau replay: --device '%s' is not a device index\n", arg);
            return 2;
        }
        o->device = (int)v;
    }
    return 0;
}

/* argv into o. Returns -1 to go on, or the exit status (0 after --help, 2 after a usage error). */
static int parse_options(int argc, char **argv, replay_opts_t *o) {
    static const struct option longopts[] = {
        {"conf", required_argument, NULL, 'c'},       {"capacity", required_argument, NULL, 'C'},
        {"json", required_argument, NULL, 'j'},       {"max-events", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'd'},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (replay_opts_t){.device = -1};
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
    if (optind != argc - 1 || !o->conf) {
        if (!o->conf) fprintf(stderr, "plateau replay: --conf is required (\"\" for the defaults)\n");
        usage(stderr);
        return 2;
    }
    o->path = argv[optind];
    return -1;
}

/* The result as text and/or JSON. Returns the exit status. */
static int render(const replay_opts_t *o, const pl_replay_seq_t *seq, const char *canon, const pl_replay_result_t *r,
                  const char *capacity_why) {
    if (o->json && !strcmp(o->json, "-")) {
        pl_replay_render_json(seq, canon, r, capacity_why, stdout);
        return 0;
    }
    pl_replay_render_text(seq, canon, r, capacity_why, stdout);
    if (!o->json) return 0;
    replay_rendering_t g = {seq, canon, r, capacity_why};
    int rc = pl_cli_output(o->json, render_replay_json, &g); /* a full disk reads ENOSPC, not EIO */
    if (rc) {
        fprintf(stderr, "plateau replay: cannot write %s: %s\n", pl_format_esc(o->json), strerror(-rc));
        return 1;
    }
    return 0;
}

/* Replay seq under cfg and render. Returns the exit status. */
static int replay(const replay_opts_t *o, const pl_alloc_config_t *cfg, const pl_replay_seq_t *seq) {
    char capacity_why[128], err[1024];
    uint64_t capacity = pl_replay_pick_capacity(seq, o->capacity, capacity_why, sizeof capacity_why);
    pl_replay_result_t r;
    if (pl_replay_run(seq, cfg, capacity, &r, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: %s\n", pl_format_esc(err));
        return 1;
    }
    char canon[512];
    pl_alloc_config_format(cfg, canon, sizeof canon);
    return render(o, seq, canon, &r, capacity_why);
}

int pl_cli_replay(int argc, char **argv) {
    replay_opts_t o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0) return status;
    char err[1024];
    pl_alloc_config_t cfg;
    if (pl_alloc_config_parse(o.conf, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: --conf: %s\n", err);
        return 2;
    }
    pl_replay_seq_t seq;
    pl_replay_load_opts_t ro = {.max_events = o.max_events, .device = o.device};
    pl_replay_input_t *in = malloc(sizeof *in);
    if (!in || pl_replay_load(o.path, &ro, &seq, in, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: %s\n", in ? pl_format_esc(err) : "out of memory");
        free(in);
        return 1;
    }
    /* what a snapshot or an RMM log held ("" for traces); stderr when stdout is JSON */
    fputs(in->summary, o.json && !strcmp(o.json, "-") ? stderr : stdout);
    free(in);
    if (seq.n_skipped_files)
        fprintf(stderr, "plateau replay: note: skipped %zu file(s) that are not regular files: %s\n",
                seq.n_skipped_files, pl_format_esc(seq.skipped));
    if (seq.damaged) fprintf(stderr, "plateau replay: warning: %s: replaying the records before the damage\n",
                               pl_format_esc(seq.error));
    status = replay(&o, &cfg, &seq);
    pl_replay_seq_free(&seq);
    return status;
}
