/* cli/output: reports written whole, with the errno of the first failing write (see output.c). */
#pragma once

#include <stdio.h>

/* Renders into out; returns 0 or a negative errno. */
typedef int (*pl_cli_render_fn)(const void *ctx, FILE *out);

/* Render, then write the bytes to path (created or truncated, mode 0666 & ~umask), or to stdout when path is NULL
 * (after what stdout's buffer holds). Returns 0, the renderer's error, or -errno of the first failed open, write
 * or close. Not thread-safe (stdout). */
int pl_cli_output(const char *path, pl_cli_render_fn render, const void *ctx);
