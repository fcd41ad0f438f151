/* plateau run's end-of-run notes: the run directory's plateau-notes file (PL_TRACE_NOTES_FILE, written by the
 * preload's note.c and the Python bootstrap, one "PID<TAB>TEXT" line per note) printed once on plateau's own
 * stderr, grouped by text: "plateau: 3 processes: this Python's frames are not readable ...". The program's own
 * descriptors never carry them (docs/env.md, "Notes"). Reads only a regular file owned by us, never follows a link,
 * never blocks on a FIFO planted there, reads at most NOTES_MAX_BYTES. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "commands.h"
#include "format.h"

#define NOTES_MAX_BYTES (1u << 20)
#define NOTES_MAX_TEXTS 256
#define NOTES_SHOWN 20

typedef struct {
    const char *text;      /* into the file's buffer, NUL-terminated, without the "plateau: " prefix */
    unsigned long pid;     /* one process that said it (the only one when n_pids is 1) */
    size_t n_pids;         /* distinct pids that said it */
} note_t;

typedef struct {
    size_t note;           /* index into the notes */
    unsigned long pid;
} said_t;

static char *read_notes(const char *dir, size_t *len) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, PL_TRACE_NOTES_FILE) >= (int)sizeof path) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    char *buf = NULL;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || !(buf = malloc(NOTES_MAX_BYTES + 1))) {
        close(fd);
        return NULL;
    }
    size_t got = 0;
    ssize_t n;
    while (got < NOTES_MAX_BYTES && (n = read(fd, buf + got, NOTES_MAX_BYTES - got)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = 0;
    *len = got;
    return buf;
}

/* The index of `text` among the notes, added if new; NOTES_MAX_TEXTS when there is no room. */
static size_t find_or_add(note_t *notes, size_t *n_notes, const char *text) {
    size_t i = 0;
    while (i < *n_notes && strcmp(notes[i].text, text)) i++;
    if (i == *n_notes && *n_notes < NOTES_MAX_TEXTS) notes[(*n_notes)++] = (note_t){.text = text};
    return i;
}

static int said_cmp(const void *a, const void *b) {
    const said_t *x = a, *y = b;
    if (x->note != y->note) return x->note < y->note ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int pl_cli_notes_print(const char *dir, FILE *out) {
    size_t len = 0;
    char *buf = read_notes(dir, &len);
    if (!buf) return 0;
    note_t *notes = calloc(NOTES_MAX_TEXTS, sizeof *notes);
    said_t *said = calloc(len / 3 + 1, sizeof *said); /* a line is at least "1\tx\n" */
    size_t n_notes = 0, n_said = 0;
    bool more = false;
    for (char *line = buf; notes && said && line < buf + len;) {
        char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        if (!nl) break; /* a line still being written */
        *nl = 0;
        char *tab = strchr(line, '\t'), *end;
        unsigned long pid = strtoul(line, &end, 10);
        if (tab && end == tab && end != line) {
            const char *text = tab + 1;
            if (!strncmp(text, "plateau: ", 9)) text += 9;
            size_t i = *text ? find_or_add(notes, &n_notes, text) : NOTES_MAX_TEXTS;
            if (i < NOTES_MAX_TEXTS) said[n_said++] = (said_t){i, pid};
            else if (*text) more = true;
        }
        line = nl + 1;
    }
    if (said) qsort(said, n_said, sizeof *said, said_cmp);
    for (size_t k = 0; k < n_said; k++)
        if (k == 0 || said_cmp(&said[k], &said[k - 1])) {
            notes[said[k].note].n_pids++;
            notes[said[k].note].pid = said[k].pid;
        }
    for (size_t i = 0; i < n_notes && i < NOTES_SHOWN; i++) {
        if (notes[i].n_pids == 1)
            fprintf(out, "plateau: pid %lu: %s\n", notes[i].pid, pl_format_esc(notes[i].text));
        else
            fprintf(out, "plateau: %zu processes: %s\n", notes[i].n_pids, pl_format_esc(notes[i].text));
    }
    if (n_notes > NOTES_SHOWN || more)
        fprintf(out, "plateau: more notes in %s/%s\n", pl_format_esc(dir), PL_TRACE_NOTES_FILE);
    free(said);
    free(notes);
    free(buf);
    return (int)n_notes;
}
