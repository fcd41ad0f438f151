/* cli/output: write a rendered report to a file or to stdout so that a failure names the errno of the first write
 * that failed (ENOSPC on a full disk, EDQUOT, EFBIG, EPIPE), never the generic EIO that stdio's error flag leaves.
 * The renderer writes into memory (open_memstream); the bytes then go out with write(2), and close(2) is checked
 * (NFS reports a full disk there). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "output.h"

static int write_all(int fd, const char *buf, size_t len) {
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int pl_cli_output(const char *path, pl_cli_render_fn render, const void *ctx) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return -errno;
    int rc = render(ctx, m);
    if (fclose(m) && !rc) rc = -ENOMEM;
    if (rc) {
        free(buf);
        return rc;
    }
    if (!path) {
        if (fflush(stdout)) rc = -errno; /* what stdout already holds goes first */
        if (!rc) rc = write_all(STDOUT_FILENO, buf, len);
        free(buf);
        return rc;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = -errno;
        free(buf);
        return rc;
    }
    rc = write_all(fd, buf, len);
    if (close(fd) && !rc && errno != EINTR) rc = -errno;
    free(buf);
    return rc;
}
