/* A program that treats every descriptor above 2 as its own, the way daemons and shells do, and checks that its
 * data file holds exactly what it wrote. The tracer's descriptors must survive (or step aside) and must never
 * receive a byte of the program's data, nor write a byte into the program's file.
 *   fdclose MODE DATAFILE
 *   MODE loop:      close(3..1023) one by one, then open DATAFILE
 *        closefrom: closefrom(3), then open DATAFILE
 *        range:     close_range(3, ~0U, 0), then open DATAFILE
 *        dup2:      open DATAFILE and dup2 it onto every number 3..1023 (bash's `exec N>file`), close the copies
 *        raw:       the close syscall itself on 3..1023 (bypassing libc), then fill every number with DATAFILE
 * Then, over 1.2 s (several trace flushes), it allocates and appends lines, and finally reads the file back.
 * Exit 0 when the file is exactly the lines written, 1 otherwise (the difference on stderr), 2 on bad usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINES 12

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *mode = argv[1], *path = argv[2];
    int fds[1024], n_fds = 0;
    if (!strcmp(mode, "loop")) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
    } else if (!strcmp(mode, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(mode, "range")) {
        if (close_range(3, ~0U, 0) < 0) return 2;
    } else if (!strcmp(mode, "raw")) {
        for (int fd = 3; fd < 1024; fd++) syscall(SYS_close, fd);
    } else if (strcmp(mode, "dup2")) {
        return 2;
    }
    int data = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (data < 0) return 2;
    fds[n_fds++] = data;
    if (!strcmp(mode, "dup2")) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != data && dup2(data, fd) == fd) close(fd);
    } else if (!strcmp(mode, "raw")) {
        int fd;
        while (n_fds < 1024 && (fd = open(path, O_WRONLY | O_APPEND)) >= 0) fds[n_fds++] = fd;
    }
    char expect[LINES * 16 + 1] = "";
    void *keep[LINES];
    for (int i = 0; i < LINES; i++) {
        keep[i] = malloc(1 << 16); /* records for the tracer to write meanwhile */
        memset(keep[i], i, 1 << 16);
        char line[16];
        int len = snprintf(line, sizeof line, "line %d\n", i);
        strcat(expect, line);
        if (write(fds[i % n_fds], line, (size_t)len) != len) return 1;
        nap_ms(100);
    }
    for (int i = 0; i < LINES; i++) free(keep[i]);
    char got[sizeof expect + 4096];
    int rd = open(path, O_RDONLY);
    ssize_t n = rd < 0 ? -1 : read(rd, got, sizeof got - 1);
    got[n > 0 ? n : 0] = 0;
    if (strcmp(got, expect)) {
        fprintf(stderr, "fdclose %s: the file holds %zd bytes, not the %zu written\n", mode, n, strlen(expect));
        return 1;
    }
    return 0;
}
