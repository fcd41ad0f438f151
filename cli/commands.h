/* The plateau command's subcommands. Each lives in its own cli/<name>.c and is registered in cli/main.c.
 * Each returns the process exit status. argv[0] is the subcommand name. */
#pragma once

int pl_cli_run(int argc, char **argv);
int pl_cli_report(int argc, char **argv);
int pl_cli_tune(int argc, char **argv);
int pl_cli_replay(int argc, char **argv);
