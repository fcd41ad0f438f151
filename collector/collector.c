/* plateau run's collector (see collector.h). One main thread finds rings and answers plateau run; one thread per
 * ring (per traced process image) writes its records and samples its process. Invariants:
 * - Each ring's trace file is written by exactly one thread of this process, at the end of its last whole chunk
 *   (pl_ring_reader_t), so chunks hit the file in order with consecutive sequence numbers.
 * - A ring thread ends only after the image is gone and the ring drained: its records never outlive it unwritten.
 * - The ring list is guarded by list_mu; a ring's thread owns its reader; `finish`/`passed`/`done` are atomics. */
#include "collector.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compact.h"
#include "ring.h"
#include "rss.h"
#include "units.h"

#define SCAN_MS 200
#define TRACE_MAX_DEFAULT ((uint64_t)1 << 30) /* PLATEAU_TRACE_MAX: a 72-hour run of bench/torch_realistic.py writes ~0.36 GB */
#define TRACE_MAX_LEAST ((uint64_t)1 << 20)   /* less would not hold a PyTorch process's stacks */
#define MIN_STEP_RSS_GAP_NS 2000000LL   /* at most one step RSS sample per 2 ms, as the in-process sampler */
#define PSS_MIN_GAP_NS 5000000000LL     /* PSS: the in-process sampler's schedule (preload/sampler.c) */
#define PSS_GAP_PER_READ 500
#define MAX_TIDS 512
#define GONE_CHECK_NS 100000000LL     /* how often a ring thread looks whether its process is gone */

typedef struct ring {
    struct ring *next;
    char name[64];                /* <pid>.<seq>.ring */
    uint32_t pid, seq;
    pl_ring_reader_t rd;          /* rd.hdr: guarded by mu against the main thread's wake-up (pl_ring_ring) */
    pl_compact_t *compact;        /* rd's sink (compact.h): what a long run's trace keeps; owned by the ring thread */
    pthread_mutex_t mu;
    pl_rss_ctx_t rss;
    unsigned long long start_ticks; /* /proc/PID/stat starttime at attach: a reused pid is not this process */
    pthread_t thread;
    atomic_bool finish;           /* the command ended: make a full pass */
    atomic_bool passed;           /* that pass is done */
    atomic_bool done;             /* the image is gone and its ring drained */
    uint32_t tids[MAX_TIDS], tid_hash[MAX_TIDS];
    unsigned n_tids;
} ring_t;

static struct {
    char dir[PATH_MAX];
    bool full_trace;              /* PLATEAU_TRACE_FULL: every record as the program made it, no compaction */
    uint64_t trace_max;           /* PLATEAU_TRACE_MAX: the most bytes of a trace (0 = no limit) */
    pthread_mutex_t list_mu;
    ring_t *rings;                /* list_mu */
    char refused[64][64];         /* rings that could not be read: said once, not retried (main thread) */
    unsigned n_refused;
} g = {.list_mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void note(const char *fmt, const char *a, int err) {
    fprintf(stderr, "plateau: collector: ");
    fprintf(stderr, fmt, a, strerror(err));
    fputc('\n', stderr);
}

/* State and start time of /proc/PID/stat. Returns false when the process is gone (or a zombie: it writes nothing
 * more). */
static bool proc_alive(uint32_t pid, unsigned long long *start_ticks) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* comm may hold anything, the state follows its closing paren */
    if (!p || p[1] != ' ') return false;
    char state = p[2];
    if (state == 'Z' || state == 'X' || state == 'x') return false;
    /* starttime is field 22; the state is field 3 */
    p += 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (!p) return false;
    *start_ticks = strtoull(p, NULL, 10);
    return true;
}

static bool image_gone(ring_t *r) {
    if (atomic_load(&r->rd.hdr->events) & PL_RING_EV_CLOSED) return true;
    unsigned long long t;
    if (!proc_alive(r->pid, &t) || t != r->start_ticks) return true;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%u.%u.pltrace", g.dir, r->pid, r->seq + 1);
    return access(path, F_OK) == 0; /* the pid exec'd into a newly traced image */
}

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* Names of threads not recorded yet (or renamed), as the in-process sampler did (preload/threads.c). */
static unsigned thread_names(ring_t *r, pl_trace_record_t *recs, char (*names)[64], unsigned cap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/task", r->pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    unsigned n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
        char cpath[96];
        snprintf(cpath, sizeof cpath, "/proc/%u/task/%u/comm", r->pid, tid);
        int fd = open(cpath, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, names[n], 63);
        close(fd);
        if (k <= 0) continue;
        names[n][k] = 0;
        if (names[n][k - 1] == '\n') names[n][k - 1] = 0;
        uint32_t h = hash_name(names[n]);
        unsigned i = 0;
        while (i < r->n_tids && r->tids[i] != tid) i++;
        if (i < r->n_tids && r->tid_hash[i] == h) continue;
        if (i == r->n_tids) {
            if (r->n_tids == MAX_TIDS) continue;
            r->tids[r->n_tids++] = tid;
        }
        r->tid_hash[i] = h;
        recs[n] = (pl_trace_record_t){.type = PL_REC_THREAD_NAME, .t_ns = now_ns()};
        recs[n].u.thread_name = (pl_rec_thread_name_t){.tid = tid, .name = names[n]};
        n++;
    }
    closedir(d);
    return n;
}

static void rss_record(ring_t *r, pl_trace_record_t *rec, uint64_t step, bool pss) {
    *rec = (pl_trace_record_t){.type = PL_REC_RSS};
    r->rss.skip_pss = !pss;
    pl_rss_sample(&r->rss, &rec->u.rss);
    uint64_t total = atomic_load(&r->rd.hdr->device_total);
    if (total) { /* the program's own last reading (preload/cuda.c): we never call its driver */
        rec->u.rss.device_used = atomic_load(&r->rd.hdr->device_used);
        rec->u.rss.device_total = total;
    }
    rec->u.rss.step = step;
    rec->t_ns = now_ns();
}

/* The ring's sink: records into the compactor, which writes what it keeps to the trace file. Bytes that are not
 * whole records were passed on as they came (the reader stops at them); only a failed write is an error. */
static int compact_sink(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n_records) {
    ring_t *r = ctx;
    int rc = pl_compact_feed(r->compact, payload, len, n_records, now_ns());
    return rc == -EBADMSG ? 0 : rc;
}

static int compact_out(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n_records) {
    return pl_ring_put_chunk(&((ring_t *)ctx)->rd, payload, len, n_records);
}

/* Everything held by the compactor to the file; `final`: the image is gone, its aggregates too. */
static void compact_flush(ring_t *r, bool final) {
    if (r->compact && !r->rd.stopped) pl_compact_flush(r->compact, final, now_ns());
}

static void collect(ring_t *r, bool partial) {
    bool was = r->rd.stopped;
    long rc = pl_ring_collect(&r->rd, partial);
    if (rc >= 0 && r->compact && !r->rd.stopped) rc = pl_compact_tick(r->compact, now_ns());
    if (rc < 0 && !was) {
        char what[96];
        snprintf(what, sizeof what, "%u.%u.pltrace", r->pid, r->seq);
        note("cannot write %s (%s): recording of that process stopped", what, (int)-rc);
    }
}

#define MAX_BATCH 80

static void *ring_main(void *arg) {
    ring_t *r = arg;
    pl_ring_hdr_t *h = r->rd.hdr;
    int64_t interval = (int64_t)(h->interval_ms ? h->interval_ms : 100) * 1000000;
    int64_t flush = (int64_t)(h->flush_ms ? h->flush_ms : 250) * 1000000;
    int64_t t = now_ns(), next_sample = t, next_partial = t, last_rss = 0, next_pss = t + PSS_MIN_GAP_NS;
    int64_t next_gone_check = t;
    uint64_t ticks = 0;
    pl_trace_record_t recs[MAX_BATCH];
    static _Thread_local char names[MAX_BATCH][64];
    for (;;) {
        uint32_t seen = atomic_load(&h->doorbell);
        bool finish = atomic_load(&r->finish) && !atomic_load(&r->passed);
        t = now_ns();
        /* Before the pass: whatever the image published before going is in this pass. /proc is read at most every
         * GONE_CHECK_NS (a program stepping in a tight loop wakes us at every step). */
        bool gone = false;
        if (finish || t >= next_gone_check || (atomic_load(&h->events) & PL_RING_EV_CLOSED)) {
            gone = image_gone(r);
            next_gone_check = t + GONE_CHECK_NS;
        }
        bool step_rss = (atomic_load(&h->events) & PL_RING_EV_RSS) && t - last_rss >= MIN_STEP_RSS_GAP_NS;
        bool partial = gone || finish || step_rss || t >= next_partial;
        collect(r, partial); /* the step's own record precedes its RSS sample in the file */
        if (partial) next_partial = t + flush;
        unsigned n = 0;
        bool started = r->rd.seq > 0; /* process_start, the image's first record, is in the file: ours may follow */
        if (!gone && started && step_rss) {
            atomic_fetch_and(&h->events, ~PL_RING_EV_RSS);
            rss_record(r, &recs[n++], atomic_load(&h->step), false);
            last_rss = t;
        }
        if (!gone && started && t >= next_sample) {
            atomic_fetch_or(&h->requests, PL_RING_REQ_HEAP);
            bool pss = h->pss && t >= next_pss;
            int64_t t0 = now_ns();
            rss_record(r, &recs[n++], 0, pss);
            if (pss) {
                int64_t gap = (now_ns() - t0) * PSS_GAP_PER_READ;
                next_pss = t0 + (gap > PSS_MIN_GAP_NS ? gap : PSS_MIN_GAP_NS);
            }
            last_rss = t;
            if (ticks++ % 10 == 0) n += thread_names(r, recs + n, names, MAX_BATCH - n);
            next_sample = t + interval;
        }
        if (n && !r->rd.stopped) pl_ring_write_records(&r->rd, recs, n);
        if (gone) {
            collect(r, true);
            compact_flush(r, true);
            break;
        }
        if (finish) {
            compact_flush(r, false); /* the report may read the file now: nothing of it stays held */
            atomic_store(&r->passed, true);
        }
        int64_t until = next_sample < next_partial ? next_sample : next_partial;
        if (atomic_load(&h->events) & PL_RING_EV_RSS && last_rss + MIN_STEP_RSS_GAP_NS < until)
            until = last_rss + MIN_STEP_RSS_GAP_NS;
        int64_t wait = until - now_ns();
        if (wait < 0) wait = 0;
        if (!started && wait < 1000000) wait = 1000000; /* process_start is microseconds away: do not spin */
        if (wait > SCAN_MS * 1000000LL) wait = SCAN_MS * 1000000LL; /* notice a process gone without a word */
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        syscall(SYS_futex, &h->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", g.dir, r->name);
    unlink(path);
    pthread_mutex_lock(&r->mu);
    pl_ring_detach(&r->rd);
    pthread_mutex_unlock(&r->mu);
    pl_compact_free(r->compact);
    r->compact = NULL;
    pl_rss_close(&r->rss);
    atomic_store(&r->passed, true);
    atomic_store(&r->done, true);
    return NULL;
}

/* `<pid>.<seq>.ring`: its pid and seq. */
static bool ring_name(const char *name, uint32_t *pid, uint32_t *seq) {
    char *end;
    unsigned long p = strtoul(name, &end, 10);
    if (end == name || *end != '.') return false;
    const char *s = end + 1;
    unsigned long q = strtoul(s, &end, 10);
    if (end == s || strcmp(end, PL_RING_SUFFIX) || p == 0 || p > UINT32_MAX || q > UINT32_MAX) return false;
    *pid = (uint32_t)p;
    *seq = (uint32_t)q;
    return true;
}

static void attach(const char *name) {
    uint32_t pid, seq;
    if (strlen(name) >= sizeof ((ring_t *)0)->name || !ring_name(name, &pid, &seq)) return;
    pthread_mutex_lock(&g.list_mu);
    for (ring_t *r = g.rings; r; r = r->next)
        if (!strcmp(r->name, name)) {
            pthread_mutex_unlock(&g.list_mu);
            return;
        }
    pthread_mutex_unlock(&g.list_mu);
    for (unsigned i = 0; i < g.n_refused; i++)
        if (!strcmp(g.refused[i], name)) return;
    ring_t *r = calloc(1, sizeof *r);
    if (!r) return;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->pid = pid;
    r->seq = seq;
    pthread_mutex_init(&r->mu, NULL);
    char rpath[PATH_MAX + 64], tpath[PATH_MAX + 64];
    snprintf(rpath, sizeof rpath, "%s/%s", g.dir, name);
    snprintf(tpath, sizeof tpath, "%s/%u.%u.pltrace", g.dir, pid, seq);
    int rc = pl_ring_attach(rpath, tpath, &r->rd);
    if (rc < 0) {
        if (rc != -ENOENT) { /* gone meanwhile (drained by an earlier thread) is not worth a word */
            note("cannot read the ring %s (%s): that process is not recorded", name, -rc);
            if (g.n_refused < sizeof g.refused / sizeof g.refused[0])
                snprintf(g.refused[g.n_refused++], sizeof g.refused[0], "%s", name);
        }
        free(r);
        return;
    }
    pl_compact_opts_t co = {.enabled = !g.full_trace, .max_bytes = g.trace_max};
    r->compact = pl_compact_new(&co, compact_out, r);
    if (r->compact) { /* else (out of memory) the records go to the file as they came */
        r->rd.sink = compact_sink;
        r->rd.sink_ctx = r;
    }
    if (!proc_alive(pid, &r->start_ticks)) r->start_ticks = ~0ull; /* gone already: drain it */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%u", pid);
    pl_rss_init(&r->rss, proc, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    rc = pthread_create(&r->thread, &attr, ring_main, r);
    pthread_attr_destroy(&attr);
    if (rc) {
        note("cannot start a thread for %s (%s)", name, rc);
        pl_ring_detach(&r->rd);
        pl_compact_free(r->compact);
        pl_rss_close(&r->rss);
        free(r);
        return;
    }
    pthread_mutex_lock(&g.list_mu);
    r->next = g.rings;
    g.rings = r;
    pthread_mutex_unlock(&g.list_mu);
}

static void scan(void) {
    DIR *d = opendir(g.dir);
    if (!d) return;
    struct dirent *e;
    size_t sl = strlen(PL_RING_SUFFIX);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] != '.' && n > sl && !strcmp(e->d_name + n - sl, PL_RING_SUFFIX)) attach(e->d_name);
    }
    closedir(d);
}

/* Join the threads of drained rings; returns how many rings are still being collected. */
static unsigned reap(void) {
    unsigned live = 0;
    pthread_mutex_lock(&g.list_mu);
    for (ring_t **pp = &g.rings; *pp;) {
        ring_t *r = *pp;
        if (atomic_load(&r->done)) {
            pthread_join(r->thread, NULL);
            *pp = r->next;
            free(r);
            continue;
        }
        live++;
        pp = &r->next;
    }
    pthread_mutex_unlock(&g.list_mu);
    return live;
}

/* The command ended: every ring makes one full pass (a ring of a process that ended is drained by it). */
static void finish_pass(void) {
    scan();
    pthread_mutex_lock(&g.list_mu);
    for (ring_t *r = g.rings; r; r = r->next) {
        atomic_store(&r->finish, true);
        pthread_mutex_lock(&r->mu);
        if (r->rd.hdr) pl_ring_ring(r->rd.hdr); /* out of its wait now */
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&g.list_mu);
    for (;;) {
        bool all = true;
        pthread_mutex_lock(&g.list_mu);
        for (ring_t *r = g.rings; r; r = r->next) all = all && atomic_load(&r->passed);
        pthread_mutex_unlock(&g.list_mu);
        if (all) return;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

static void collector_main(int ctl, int done, pid_t parent) {
    prctl(PR_SET_NAME, "plateau-collect");
    struct rlimit rl; /* our own descriptor limit, not the program's: room for a few per traced process */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in >= 0 && inotify_add_watch(in, g.dir, IN_MOVED_TO) < 0) {
        close(in);
        in = -1;
    }
    bool ended = false;
    for (;;) {
        struct pollfd p[2] = {{.fd = ended ? -1 : ctl, .events = POLLIN}, {.fd = in, .events = POLLIN}};
        int k = poll(p, 2, ended ? 5 : SCAN_MS); /* once ended, exit soon after the last ring is drained */
        if (k > 0 && p[1].revents) {
            char buf[4096];
            while (read(in, buf, sizeof buf) > 0) {
            }
        }
        scan();
        if (!ended && ((k > 0 && p[0].revents) || getppid() != parent)) {
            char c;
            if (getppid() != parent || read(ctl, &c, 1) <= 0) {
                ended = true;
                finish_pass();
                if (write(done, "d", 1) < 0) { /* plateau run is gone: nobody to tell */
                }
                close(done);
            }
        }
        if (reap() == 0 && ended) break;
    }
    _exit(0);
}

int pl_collector_start(const char *dir, pl_collector_t *c) {
    memset(c, 0, sizeof *c);
    c->ctl_fd = c->done_fd = -1;
    if (strlen(dir) >= sizeof g.dir) return -ENAMETOOLONG;
    int ctl[2], done[2];
    if (pipe2(ctl, O_CLOEXEC) < 0) return -errno;
    if (pipe2(done, O_CLOEXEC) < 0) {
        int e = errno;
        close(ctl[0]);
        close(ctl[1]);
        return -e;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ctl[0]), close(ctl[1]), close(done[0]), close(done[1]);
        return -e;
    }
    if (pid == 0) {
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL); /* the program's signals, group-wide ones included, are not ours */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1); /* hold no pipe the program's readers wait on; notes go to plateau run's stderr */
            close(null);
        }
        close(ctl[1]);
        close(done[0]);
        snprintf(g.dir, sizeof g.dir, "%s", dir);
        const char *full = getenv("PLATEAU_TRACE_FULL");
        g.full_trace = full && (!strcmp(full, "1") || !strcasecmp(full, "yes") || !strcasecmp(full, "true") ||
                                !strcasecmp(full, "on"));
        const char *max = getenv("PLATEAU_TRACE_MAX");
        g.trace_max = TRACE_MAX_DEFAULT;
        if (max && pl_units_parse(max, &g.trace_max) < 0) {
            fprintf(stderr, "plateau: PLATEAU_TRACE_MAX='%s' is not a size; using the default (1G)\n", max);
            g.trace_max = TRACE_MAX_DEFAULT;
        }
        if (g.trace_max && g.trace_max < TRACE_MAX_LEAST) g.trace_max = TRACE_MAX_LEAST;
        collector_main(ctl[0], done[1], parent);
    }
    close(ctl[0]);
    close(done[1]);
    c->pid = pid;
    c->ctl_fd = ctl[1];
    c->done_fd = done[0];
    return 0;
}

bool pl_collector_finish(pl_collector_t *c, int timeout_ms) {
    if (c->pid <= 0) return false;
    close(c->ctl_fd);
    c->ctl_fd = -1;
    struct pollfd p = {.fd = c->done_fd, .events = POLLIN};
    int64_t end = now_ns() + (int64_t)timeout_ms * 1000000;
    bool ok = false;
    for (;;) {
        int64_t left = (end - now_ns()) / 1000000;
        if (left < 0) break;
        int k = poll(&p, 1, (int)left);
        if (k < 0 && errno == EINTR) continue;
        if (k > 0) {
            char ch;
            ok = read(c->done_fd, &ch, 1) == 1;
        }
        break;
    }
    close(c->done_fd);
    c->done_fd = -1;
    /* Usually every traced process has ended and the collector exits within milliseconds: reap it, so that its CPU
     * time counts in ours (time, getrusage). One that goes on collecting a process the command left running is
     * left to finish on its own. */
    for (int i = 0; ok && i < 200; i++) {
        pid_t w = waitpid(c->pid, NULL, WNOHANG);
        if (w == c->pid || (w < 0 && errno != EINTR)) {
            c->pid = 0;
            break;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return ok;
}
