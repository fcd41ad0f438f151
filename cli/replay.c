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

int pl_cli_replay(int argc, char **argv) {
    static const struct option longopts[] = {
        {"conf", required_argument, NULL, 'c'},       {"capacity", required_argument, NULL, 'C'},
        {"json", required_argument, NULL, 'j'},       {"max-events", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'd'},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *conf = NULL, *json = NULL;
    uint64_t capacity = 0;
    size_t max_events = 0;
    int device = -1;
    char err[1024];
    int c;
    optind = 0; /* glibc: a full reset, ordering included (run, attach and watch parse without permuting: opts.h) */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': conf = optarg; break;
        case 'C':
            if (pl_units_parse(optarg, &capacity) || capacity == 0 || capacity > SIZE_MAX) {
                fprintf(stderr, "plateau replay: --capacity '%s' is not a size (e.g. 24GiB, 512MiB)\n", optarg);
                return 2;
            }
            break;
        case 'j': json = optarg; break;
        case 'm': {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (end == optarg || *end || !v || optarg[0] == '-') {
                fprintf(stderr, "plateau replay: --max-events '%s' is not a positive count\n", optarg);
                return 2;
            }
            max_events = (size_t)v;
            break;
        }
        case 'd': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end || v > (1ul << 20) || optarg[0] == '-') {
                fprintf(stderr, "plateau replay: --device '%s' is not a device index\n", optarg);
                return 2;
            }
            device = (int)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1 || !conf) {
        if (!conf) fprintf(stderr, "plateau replay: --conf is required (\"\" for the defaults)\n");
        usage(stderr);
        return 2;
    }
    pl_alloc_config_t cfg;
    if (pl_alloc_config_parse(conf, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: --conf: %s\n", err);
        return 2;
    }
    pl_replay_seq_t seq;
    pl_replay_load_opts_t ro = {.max_events = max_events, .device = device};
    pl_replay_input_t *in = malloc(sizeof *in);
    if (!in || pl_replay_load(argv[optind], &ro, &seq, in, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: %s\n", in ? pl_format_esc(err) : "out of memory");
        free(in);
        return 1;
    }
    /* what a snapshot or an RMM log held ("" for traces); stderr when stdout is JSON */
    fputs(in->summary, json && !strcmp(json, "-") ? stderr : stdout);
    free(in);
    if (seq.n_skipped_files)
        fprintf(stderr, "plateau replay: note: skipped %zu file(s) that are not regular files: %s\n",
                seq.n_skipped_files, pl_format_esc(seq.skipped));
    if (seq.damaged) fprintf(stderr, "plateau replay: warning: %s: replaying the records before the damage\n",
                               pl_format_esc(seq.error));
    char capacity_why[128];
    capacity = pl_replay_pick_capacity(&seq, capacity, capacity_why, sizeof capacity_why);
    pl_replay_result_t r;
    int status = 1;
    if (pl_replay_run(&seq, &cfg, capacity, &r, err, sizeof err) != 0) {
        fprintf(stderr, "plateau replay: %s\n", pl_format_esc(err));
        goto out;
    }
    char canon[512];
    pl_alloc_config_format(&cfg, canon, sizeof canon);
    status = 0;
    if (json && !strcmp(json, "-")) {
        pl_replay_render_json(&seq, canon, &r, capacity_why, stdout);
    } else {
        pl_replay_render_text(&seq, canon, &r, capacity_why, stdout);
        if (json) {
            replay_rendering_t g = {&seq, canon, &r, capacity_why};
            int rc = pl_cli_output(json, render_replay_json, &g); /* a full disk reads ENOSPC, not EIO */
            if (rc) {
                fprintf(stderr, "plateau replay: cannot write %s: %s\n", pl_format_esc(json), strerror(-rc));
                status = 1;
            }
        }
    }
out:
    pl_replay_seq_free(&seq);
    return status;
}
