/* tune/replay_input: sniff an input and hand it to the reader of its format (see replay_input.h).
 * Sniffing looks at the first bytes only: pickle PROTO (0x80), the RMM CSV header, else a plateau trace. */
#include "replay_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"

const char *pl_replay_format_name(pl_replay_format_t f) {
    switch (f) {
    case PL_REPLAY_FORMAT_TRACE: return "plateau trace";
    case PL_REPLAY_FORMAT_TORCH_SNAPSHOT: return "PyTorch memory snapshot";
    case PL_REPLAY_FORMAT_RMM_LOG: return "RMM log";
    default: return "unknown";
    }
}

static pl_replay_format_t sniff(const unsigned char *p, size_t n) {
    if (n >= 1 && p[0] == 0x80) return PL_REPLAY_FORMAT_TORCH_SNAPSHOT;
    if (n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3, n -= 3;
    size_t h = strlen(PL_RMM_LOG_HEADER);
    if (n >= h && !memcmp(p, PL_RMM_LOG_HEADER, h) && (n == h || p[h] == '\r' || p[h] == '\n'))
        return PL_REPLAY_FORMAT_RMM_LOG;
    return PL_REPLAY_FORMAT_TRACE;
}

static const char not_any[] = " (nor a PyTorch memory snapshot pickle, whose first byte is 0x80, nor an RMM log, whose "
                              "first line is " PL_RMM_LOG_HEADER ")";

static void append(char *err, size_t err_len, const char *s) {
    size_t n = strnlen(err, err_len);
    if (n + 1 < err_len) snprintf(err + n, err_len - n, "%s", s);
}

int pl_replay_load_mem(const void *data, size_t len, const char *name, const pl_replay_load_opts_t *o,
                       pl_replay_seq_t *s, pl_replay_input_t *in, char *err, size_t err_len) {
    pl_replay_load_opts_t opts = o ? *o : (pl_replay_load_opts_t){.device = -1};
    pl_replay_input_t tmp;
    if (!in) in = &tmp;
    memset(in, 0, sizeof *in);
    in->format = sniff(data, len);
    int rc;
    switch (in->format) {
    case PL_REPLAY_FORMAT_TORCH_SNAPSHOT: {
        pl_torch_snapshot_opts_t so = {.max_events = opts.max_events, .device = opts.device,
                                       .limits = {.max_input_bytes = opts.max_input_bytes}};
        rc = pl_torch_snapshot_read(data, len, name, &so, s, &in->snapshot, err, err_len);
        if (!rc) pl_torch_snapshot_summary(&in->snapshot, s, in->summary, sizeof in->summary);
        return rc;
    }
    case PL_REPLAY_FORMAT_RMM_LOG:
        rc = pl_rmm_log_read(data, len, name, opts.max_events, s, &in->rmm, err, err_len);
        if (!rc) pl_rmm_log_summary(&in->rmm, s, in->summary, sizeof in->summary);
        return rc;
    default: {
        pl_replay_opts_t ro = {.max_events = opts.max_events};
        rc = pl_replay_extract_mem(data, len, name, &ro, s, err, err_len);
        if (rc == -EBADMSG) append(err, err_len, not_any);
        return rc;
    }
    }
}

/* Read a whole file of at most max bytes. */
static int slurp(const char *path, int fd, size_t max, unsigned char **out, size_t *len, char *err, size_t err_len) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -errno;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        snprintf(err, err_len, "%s: %lld bytes is more than the input limit of %zu bytes", path,
                 (long long)st.st_size, max);
        return -E2BIG;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0; /* +1: sees growth while reading (a file still being written) */
    unsigned char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, err_len, "%s: out of memory", path);
        return -ENOMEM;
    }
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                free(buf);
                snprintf(err, err_len, "%s: more than the input limit of %zu bytes", path, max);
                return -E2BIG;
            }
            size_t ncap = pl_grow_cap(cap, cap + 1, 0, 1); /* doubled, then no more than the limit + 1 */
            if (ncap > max + 1) ncap = max + 1;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                snprintf(err, err_len, "%s: out of memory", path);
                return -ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            snprintf(err, err_len, "%s: %s", path, strerror(e));
            return -e;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (n > max) {
        free(buf);
        snprintf(err, err_len, "%s: more than the input limit of %zu bytes", path, max);
        return -E2BIG;
    }
    *out = buf;
    *len = n;
    return 0;
}

int pl_replay_load(const char *path, const pl_replay_load_opts_t *o, pl_replay_seq_t *s, pl_replay_input_t *in,
                   char *err, size_t err_len) {
    pl_replay_load_opts_t opts = o ? *o : (pl_replay_load_opts_t){.device = -1};
    pl_replay_opts_t ro = {.max_events = opts.max_events};
    if (in) memset(in, 0, sizeof *in);
    struct stat st;
    int fd = -1;
    /* O_NONBLOCK: a FIFO must not block the open; anything but a regular file goes to the trace reader, which
     * refuses it with a message */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
        return pl_replay_extract(path, &ro, s, err, err_len); /* run directories and the trace reader's errors */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return pl_replay_extract(path, &ro, s, err, err_len);
    }
    unsigned char head[64];
    ssize_t n;
    do n = pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    pl_replay_format_t f = n > 0 ? sniff(head, (size_t)n) : PL_REPLAY_FORMAT_TRACE;
    if (f == PL_REPLAY_FORMAT_TRACE) {
        close(fd);
        int rc = pl_replay_extract(path, &ro, s, err, err_len);
        if (rc == -EBADMSG) append(err, err_len, not_any);
        return rc;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = slurp(path, fd, opts.max_input_bytes ? opts.max_input_bytes : PL_REPLAY_DEFAULT_MAX_INPUT_BYTES, &buf,
                   &len, err, err_len);
    close(fd);
    if (rc) return rc;
    rc = pl_replay_load_mem(buf, len, path, &opts, s, in, err, err_len);
    free(buf);
    return rc;
}
