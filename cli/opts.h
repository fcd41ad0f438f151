/* cli/opts.c: getopt_long for the commands whose options were always spelled out in full (run, attach, watch):
 * one token is one option, exactly as --help spells it. Abbreviations (--sample for --sample-bytes), --opt=VALUE,
 * bundled or attached short options (-ho, -oDIR) are unknown options, as they always were; a value is the next
 * argument whatever it looks like (-o --). Reading stops at each operand and after "--" (the leading '+': getopt
 * never permutes): run's command keeps its own arguments; attach and watch take the operand and read on. */
#pragma once

#include <getopt.h>
#include <stdbool.h>

typedef struct pl_opts {
    const char *who;                /* "plateau run": the start of its messages */
    const char *shortopts;          /* getopt's, without the leading "+:" */
    const struct option *longopts;  /* getopt_long's */
    int at;                         /* the argv index of the token just read */
    bool dashdash;                  /* the last -1 consumed a "--" */
    int saved_opterr;
    char optstring[64];
} pl_opts_t;

/* Start reading argv[1..] (resets getopt's state). */
void pl_opts_start(pl_opts_t *o, const char *who, const char *shortopts, const struct option *longopts);

/* The next option: its val (optarg holds its value); -1 at an operand (argv[optind]; "-" alone counts as an operand:
 * callers decide) or after "--" (o->dashdash, optind past it) or at the end; '?' for a token that is no option as
 * spelled; ':' for an option whose value is missing. */
int pl_opts_next(pl_opts_t *o, int argc, char **argv);

/* The line for '?' ("WHO: unknown option 'TOKEN'") or ':' ("WHO: option 'TOKEN' needs a value") on stderr. */
void pl_opts_say(const pl_opts_t *o, int c, char **argv);

/* Done: getopt's own error messages on again (report, tune and replay rely on them). */
void pl_opts_end(pl_opts_t *o);
