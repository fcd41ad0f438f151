/* plateau: the command. Argument dispatch only; each subcommand lives in its own file (cli/commands.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command_t;

/* Subcommands register here once their file exists (weak so a missing one reports "not built"). */
#pragma weak pl_cli_run
#pragma weak pl_cli_report
#pragma weak pl_cli_tune
#pragma weak pl_cli_replay
#pragma weak pl_cli_watch

static const command_t commands[] = {
    {"run", pl_cli_run, "run a command under the tracer: plateau run [-o DIR] [options] -- CMD ARGS..."},
    {"report", pl_cli_report, "report on a run: plateau report RUN_DIR|TRACE [--json FILE] [--html FILE]"},
    {"watch", pl_cli_watch, "the live verdict of a run in progress: plateau watch RUN_DIR"},
    {"tune", pl_cli_tune, "recommend allocator settings from a recorded run: plateau tune RUN_DIR|TRACE"},
    {"replay", pl_cli_replay, "replay a recorded run under one setting: plateau replay TRACE --conf STRING"},
};

static void usage(FILE *f) {
    fprintf(f, "plateau %s: tell a warmup plateau from a memory leak\n\nusage: plateau COMMAND [ARGS]\n\n", PL_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("plateau %s\n", PL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        if (!commands[i].fn) {
            fprintf(stderr, "plateau: '%s' is not built in this version\n", argv[1]);
            return 2;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "plateau: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
