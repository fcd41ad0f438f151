/* Exact-spelling getopt_long for plateau run, attach and watch (opts.h). */
#include "opts.h"

#include <stdio.h>
#include <string.h>

#include "format.h"

void pl_opts_start(pl_opts_t *o, const char *who, const char *shortopts, const struct option *longopts) {
    o->who = who;
    o->shortopts = shortopts;
    o->longopts = longopts;
    o->at = 1;
    o->dashdash = false;
    snprintf(o->optstring, sizeof o->optstring, "+:%s", shortopts);
    o->saved_opterr = opterr;
    opterr = 0;
    optind = 0; /* glibc: a full reset (a cluster left half-read by an earlier parse is forgotten) */
}

/* Was tok the option val, spelled in full and alone? */
static bool spelled(const pl_opts_t *o, const char *tok, int val) {
    if (tok[0] != '-') return false;
    if (tok[1] != '-') return tok[1] == val && tok[2] == 0;
    for (const struct option *l = o->longopts; l->name; l++)
        if (l->val == val && !strcmp(tok + 2, l->name)) return true;
    return false;
}

int pl_opts_next(pl_opts_t *o, int argc, char **argv) {
    int at = optind ? optind : 1;
    int c = getopt_long(argc, argv, o->optstring, o->longopts, NULL);
    o->at = at;
    if (c == -1) {
        o->dashdash = optind > at && at < argc && !strcmp(argv[at], "--");
        return -1;
    }
    if (at >= argc) return '?';
    if (c == ':') return spelled(o, argv[at], optopt) ? ':' : '?';
    if (c == '?' || !spelled(o, argv[at], c)) return '?';
    return c;
}

void pl_opts_say(const pl_opts_t *o, int c, char **argv) {
    if (c == ':')
        fprintf(stderr, "%s: option '%s' needs a value\n", o->who, pl_format_esc(argv[o->at]));
    else
        fprintf(stderr, "%s: unknown option '%s'\n", o->who, pl_format_esc(argv[o->at]));
}

void pl_opts_end(pl_opts_t *o) { opterr = o->saved_opterr; }
