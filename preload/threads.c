/* Thread names: every thread of the process whose name was not recorded yet (or changed) gets a
 * PL_REC_THREAD_NAME. Runs on the sampler thread only; getdents64 on a stack buffer and /proc reads, no malloc. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

static struct {
    uint32_t tids[512];          /* threads whose name was recorded (sampler thread only) */
    uint32_t name_hash[512];
    unsigned n_tids;
} st;

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* Record names of threads not seen yet (or renamed). Uses getdents64 on a stack buffer: no malloc. */
void pl_threads_scan(void) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d =
                (void *)(buf + off);
            off += d->reclen;
            if (d->name[0] < '0' || d->name[0] > '9') continue;
            uint32_t tid = (uint32_t)strtoul(d->name, NULL, 10);
            char path[64], name[64];
            snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
            int cfd = open(path, O_RDONLY | O_CLOEXEC);
            if (cfd < 0) continue;
            ssize_t k = read(cfd, name, sizeof name - 1);
            close(cfd);
            if (k <= 0) continue;
            name[k] = 0;
            if (name[k - 1] == '\n') name[k - 1] = 0;
            uint32_t h = hash_name(name);
            unsigned i = 0;
            while (i < st.n_tids && st.tids[i] != tid) i++;
            if (i < st.n_tids && st.name_hash[i] == h) continue;
            if (i == st.n_tids) {
                if (st.n_tids == sizeof st.tids / sizeof st.tids[0]) continue;
                st.tids[st.n_tids++] = tid;
            }
            st.name_hash[i] = h;
            pl_trace_record_t r = {.type = PL_REC_THREAD_NAME, .t_ns = pl_now_ns()};
            r.u.thread_name = (pl_rec_thread_name_t){.tid = tid, .name = name};
            pl_emit(&r);
        }
    }
    close(fd);
}

void pl_threads_fork_child(void) { st.n_tids = 0; }
