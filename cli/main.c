/* plateau: the command. Argument dispatch only; each subcommand lives in its own file (cli/commands.h). */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "format.h"

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
#pragma weak pl_cli_judge
#pragma weak pl_cli_attach

static const command_t commands[] = {
    {"run", pl_cli_run, "run a command under the tracer: plateau run [-o DIR] [options] -- CMD ARGS..."},
    {"report", pl_cli_report, "report on a run: plateau report RUN_DIR|TRACE [--json FILE] [--html FILE]"},
    {"watch", pl_cli_watch, "the live verdict of a run in progress: plateau watch RUN_DIR"},
    {"attach", pl_cli_attach, "follow running processes plateau did not start: plateau attach [options] PID..."},
    {"judge", pl_cli_judge, "judge the memory a training log already holds: plateau judge LOG|CSV|JSONL"},
    {"tune", pl_cli_tune, "recommend allocator settings from a recorded run: plateau tune RUN_DIR|TRACE"},
    {"replay", pl_cli_replay, "replay a recorded run under one setting: plateau replay TRACE --conf STRING"},
};

static void usage(FILE *f) {
    fprintf(f, "plateau %s: tell a warmup plateau from a memory leak\n\nusage: plateau COMMAND [ARGS]\n\n", PL_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-8s %s\n", "help", "this text, or a command's options: plateau help [COMMAND]");
}

static const command_t *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name)) return &commands[i];
    return NULL;
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
    /* plateau help [COMMAND]: what git, cargo and pip users type; COMMAND's own --help text */
    bool help = !strcmp(argv[1], "help");
    if (help && argc == 2) {
        usage(stdout);
        return 0;
    }
    if (help && argc > 3) {
        fprintf(stderr, "plateau help: give one command (plateau help COMMAND)\n");
        return 2;
    }
    const char *name = help ? argv[2] : argv[1];
    const command_t *c = find_command(name);
    if (!c) {
        fprintf(stderr, "plateau: unknown command '%s'\n\n", pl_format_esc(name));
        usage(stderr);
        return 2;
    }
    if (!c->fn) {
        fprintf(stderr, "plateau: '%s' is not built in this version\n", name);
        return 2;
    }
    if (help) {
        char *hargv[] = {(char *)c->name, "--help", NULL};
        return c->fn(2, hargv);
    }
    return c->fn(argc - 1, argv + 1);
}
