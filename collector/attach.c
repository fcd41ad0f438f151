/* plateau attach's sampler (see attach.h). Invariants:
 * - One trace per followed process image, written only by this thread: records reach the file at each poll's
 *   flush, so a plateau attach killed with SIGKILL leaves traces readable up to its last poll.
 * - A process is followed while its /proc/PID/stat shows it alive with the start time it had when found: a pid
 *   reused by a later process is a new process, never more samples of the old one.
 * - Once a process showed device memory on a device, every later sample of it carries that device (0 when NVML no
 *   longer lists it), so its dev.reserved series drops to 0 instead of keeping its last value. */
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "grow.h"
#include "rss.h"
#include "writer.h"

#define PSS_MIN_GAP_NS 5000000000LL     /* PSS on the collector's schedule (collector.c) */
#define PSS_GAP_PER_READ 500
#define MAX_DEPTH 64                    /* parent links walked from a process to an attached one */

typedef struct aproc {
    uint32_t pid, ppid;
    unsigned long long start_ticks;     /* /proc/PID/stat starttime when found */
    pl_writer_t *w;
    pl_rss_ctx_t rss;
    int64_t next_sample_ns, next_pss_ns;
    uint32_t dev_mask;                  /* NVML devices this process has shown memory on */
    bool ended;                         /* its trace is closed */
} aproc_t;

struct pl_attach {
    pl_attach_opts_t o;
    char proc_root[256];
    int64_t interval_ns;
    long clk_tck;
    int64_t boot_realtime_ns;           /* btime of <proc>/stat */
    char node[64];
    uint64_t host_mem_bytes;
    int64_t next_scan_ns;               /* next look for ended processes and new children */
    aproc_t **procs;                    /* procs[0]: the first attached, whose steps pl_attach_step records */
    size_t n, cap;
    uint32_t refused[256];              /* pids whose /proc could not be read: said once */
    size_t n_refused;
};

static pl_attach_t *g_log_owner; /* the writer's log hook has no context: one sampler per process */

static void say(const pl_attach_t *a, const char *fmt, ...) {
    if (!a->o.log) return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    a->o.log(a->o.log_ctx, line);
}

static void writer_log(const char *msg) {
    if (g_log_owner) say(g_log_owner, "%s", msg);
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A small /proc file whole into buf (NUL-terminated). Returns its length, or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t off = 0;
    while (off + 1 < size) {
        ssize_t k = read(fd, buf + off, size - 1 - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        off += (size_t)k;
    }
    close(fd);
    buf[off] = 0;
    return (ssize_t)off;
}

typedef struct pstat { char state; uint32_t ppid; unsigned long long start_ticks; } pstat_t;

/* <root>/<pid>/stat: state, ppid and starttime (fields 3, 4, 22; comm, field 2, may hold anything). */
static bool read_stat(const char *root, uint32_t pid, pstat_t *out) {
    char path[320], buf[1024];
    snprintf(path, sizeof path, "%s/%u/stat", root, pid);
    if (read_small(path, buf, sizeof buf) <= 0) return false;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return false;
    p += 2;
    out->state = *p;
    unsigned long ppid = 0;
    for (int field = 3; field < 22 && p; field++) {
        if (field == 4) ppid = strtoul(p, NULL, 10);
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (!p) return false;
    out->ppid = (uint32_t)ppid;
    out->start_ticks = strtoull(p, NULL, 10);
    return true;
}

static bool alive(const pstat_t *s) { return s->state != 'Z' && s->state != 'X' && s->state != 'x'; }

/* The owner of <root>/<pid> (the process's uid). */
static long owner_of(const char *root, uint32_t pid) {
    char path[320];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%u", root, pid);
    return stat(path, &sb) == 0 ? (long)sb.st_uid : -1;
}

int pl_attach_check(const char *proc_root, uint32_t pid, char *why, size_t why_size) {
    const char *root = proc_root && *proc_root ? proc_root : "/proc";
    pstat_t st;
    if (pid == 0 || !read_stat(root, pid, &st)) {
        snprintf(why, why_size, "no process %u (it does not exist, or has ended)", pid);
        return -ESRCH;
    }
    if (!alive(&st)) {
        snprintf(why, why_size, "pid %u has ended (a zombie its parent has not reaped)", pid);
        return -ESRCH;
    }
    /* smaps_rollup (PSS) and exe need the access ptrace would (PTRACE_MODE_READ): another user's process, unless
     * we are root; hidepid hides even status */
    char path[320], buf[64];
    snprintf(path, sizeof path, "%s/%u/smaps_rollup", root, pid);
    ssize_t k = read_small(path, buf, sizeof buf);
    if (k == -EACCES || k == -EPERM) {
        long uid = owner_of(root, pid);
        snprintf(why, why_size, "pid %u belongs to uid %ld, not to you (uid %u): its /proc files are not readable "
                 "(permission denied); run plateau attach as that user or as root", pid, uid, (unsigned)geteuid());
        return -EACCES;
    }
    return 0;
}

int pl_attach_create(const pl_attach_opts_t *o, pl_attach_t **out) {
    if (!o || !o->dir) return -EINVAL;
    pl_attach_t *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    a->o = *o;
    snprintf(a->proc_root, sizeof a->proc_root, "%s", o->proc_root && *o->proc_root ? o->proc_root : "/proc");
    a->interval_ns = (int64_t)(o->interval_ms ? o->interval_ms : 500) * 1000000;
    a->clk_tck = sysconf(_SC_CLK_TCK);
    if (a->clk_tck <= 0) a->clk_tck = 100;
    char path[300], buf[8192];
    snprintf(path, sizeof path, "%s/stat", a->proc_root);
    if (read_small(path, buf, sizeof buf) > 0) {
        const char *b = strstr(buf, "\nbtime ");
        if (b) a->boot_realtime_ns = (int64_t)strtoll(b + 7, NULL, 10) * 1000000000;
    }
    struct utsname u;
    if (uname(&u) == 0) snprintf(a->node, sizeof a->node, "%.63s", u.nodename);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    a->host_mem_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : PL_TRACE_NA;
    g_log_owner = a;
    *out = a;
    return 0;
}

static int env_int(const char *env, size_t len, const char *key) {
    size_t kl = strlen(key);
    for (size_t off = 0; off < len; off += strlen(env + off) + 1)
        if (!strncmp(env + off, key, kl) && env[off + kl] == '=') {
            char *end;
            long v = strtol(env + off + kl + 1, &end, 10);
            if (end != env + off + kl + 1 && *end == 0 && v >= 0 && v < INT32_MAX) return (int)v;
        }
    return -1;
}

/* The process_start record of p, from /proc: what the preload records about itself, seen from outside. */
static void write_start(pl_attach_t *a, aproc_t *p) {
    static char cmd[8192], env[65536], exe[PATH_MAX];
    char path[320];
    pl_trace_record_t r = {.type = PL_REC_PROCESS_START, .t_ns = mono_ns()};
    pl_rec_process_t *q = &r.u.process;
    q->pid = p->pid;
    q->ppid = p->ppid;
    snprintf(path, sizeof path, "%s/%u/environ", a->proc_root, p->pid); /* ranks, as the preload reads them */
    ssize_t el = read_small(path, env, sizeof env);
    el = el < 0 ? 0 : el;
    q->rank = env_int(env, (size_t)el, "RANK");
    if (q->rank < 0) q->rank = env_int(env, (size_t)el, "OMPI_COMM_WORLD_RANK");
    if (q->rank < 0) q->rank = env_int(env, (size_t)el, "SLURM_PROCID");
    q->local_rank = env_int(env, (size_t)el, "LOCAL_RANK");
    if (q->local_rank < 0) q->local_rank = env_int(env, (size_t)el, "SLURM_LOCALID");
    q->interval_ns = (uint64_t)a->interval_ns;
    q->host_mem_bytes = a->host_mem_bytes;
    q->cgroup_max_bytes = pl_rss_cgroup_max(&p->rss);
    q->start_realtime_ns = a->boot_realtime_ns + (int64_t)(p->start_ticks * 1000000000ull / (unsigned long)a->clk_tck);
    snprintf(path, sizeof path, "%s/%u/exe", a->proc_root, p->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    q->exe = exe;
    snprintf(path, sizeof path, "%s/%u/cmdline", a->proc_root, p->pid);
    ssize_t len = read_small(path, cmd, sizeof cmd);
    for (size_t off = 0; len > 0 && off < (size_t)len; off += strlen(cmd + off) + 1) {
        if (q->n_argv < PL_TRACE_MAX_ARGV) q->argv[q->n_argv++] = cmd + off;
        q->argc++;
    }
    q->host_allocator = "unknown"; /* not seen from outside */
    q->host_allocator_version = "";
    q->node = a->node;
    pl_writer_emit(p->w, &r);
}

static void refuse_once(pl_attach_t *a, uint32_t pid, const char *why) {
    for (size_t i = 0; i < a->n_refused; i++)
        if (a->refused[i] == pid) return;
    if (a->n_refused < sizeof a->refused / sizeof a->refused[0]) a->refused[a->n_refused++] = pid;
    say(a, "%s: not followed", why);
}

static int add(pl_attach_t *a, uint32_t pid, const pstat_t *st) {
    if (pl_grow((void **)&a->procs, &a->cap, a->n + 1, sizeof *a->procs)) return -ENOMEM;
    aproc_t *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    p->pid = pid;
    p->ppid = st->ppid;
    p->start_ticks = st->start_ticks;
    char proc[300];
    snprintf(proc, sizeof proc, "%s/%u", a->proc_root, pid);
    pl_rss_init(&p->rss, proc, NULL);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = pid,
                           .ppid = st->ppid, .start_realtime_ns = real_ns(), .start_mono_ns = mono_ns(),
                           .run_id = a->o.run_id};
    pl_writer_options_t wo;
    pl_writer_options_default(&wo);
    wo.buffer_bytes = 64 * 1024; /* a few samples per poll: small buffers, many processes */
    wo.n_buffers = 4;
    wo.log = writer_log;
    int rc = -EEXIST;
    char path[PATH_MAX + 64];
    for (uint32_t seq = 0; seq < 1000 && rc == -EEXIST; seq++) { /* a pid reused within the run: the next seq */
        h.exec_seq = seq;
        snprintf(path, sizeof path, "%s/%u.%u.pltrace", a->o.dir, pid, seq);
        rc = pl_writer_open(path, &h, &wo, &p->w);
    }
    if (rc < 0) {
        say(a, "cannot write the trace of pid %u in %s (%s)", pid, a->o.dir, strerror(-rc));
        pl_rss_close(&p->rss);
        free(p);
        return rc;
    }
    write_start(a, p);
    int64_t t = mono_ns();
    p->next_sample_ns = t;
    p->next_pss_ns = t; /* one PSS reading at once, then on the schedule */
    a->procs[a->n++] = p;
    return 0;
}

int pl_attach_add(pl_attach_t *a, uint32_t pid) {
    char why[300];
    int rc = pl_attach_check(a->proc_root, pid, why, sizeof why);
    if (rc) return rc;
    for (size_t i = 0; i < a->n; i++)
        if (a->procs[i]->pid == pid && !a->procs[i]->ended) return 0; /* given twice, or found as a child */
    pstat_t st;
    if (!read_stat(a->proc_root, pid, &st)) return -ESRCH;
    return add(a, pid, &st);
}

static void end_proc(pl_attach_t *a, aproc_t *p) {
    (void)a;
    pl_trace_record_t r = {.type = PL_REC_PROCESS_END, .t_ns = mono_ns()};
    pl_writer_emit(p->w, &r);
    pl_writer_close(p->w);
    pl_writer_destroy(p->w);
    p->w = NULL;
    pl_rss_close(&p->rss);
    p->ended = true;
}

static bool same_alive(const pl_attach_t *a, const aproc_t *p) {
    pstat_t st;
    return read_stat(a->proc_root, p->pid, &st) && alive(&st) && st.start_ticks == p->start_ticks;
}

/* The device memory of p on every NVML device it has shown memory on, as alloc_stats records. */
static void device_sample(pl_attach_t *a, aproc_t *p, uint64_t step, int64_t t) {
    pl_nvml_t *nv = a->o.nvml;
    for (unsigned d = 0; d < pl_nvml_n_devices(nv) && d < 32; d++) {
        uint64_t used, total;
        if (pl_nvml_used(nv, d, p->pid, &used, &total)) continue;
        if (!used && !(p->dev_mask & (1u << d))) continue;
        p->dev_mask |= 1u << d;
        pl_trace_record_t r = {.type = PL_REC_ALLOC_STATS, .t_ns = t};
        pl_rec_alloc_stats_t *s = &r.u.alloc_stats;
        const int64_t na = (int64_t)PL_TRACE_NA;
        *s = (pl_rec_alloc_stats_t){.allocator_id = PL_ALLOC_ID_NVML, .device = (int32_t)d, .step = step,
                                    .allocated_bytes = na, .allocated_bytes_peak = na, .reserved_bytes = (int64_t)used,
                                    .reserved_bytes_peak = na, .active_bytes = na, .inactive_split_bytes = na,
                                    .requested_bytes = na, .n_allocations = na, .n_segments = na,
                                    .num_alloc_retries = na, .num_ooms = na, .num_device_alloc = na,
                                    .num_device_free = na, .largest_free_bytes = PL_TRACE_NA,
                                    .capacity_bytes = total};
        pl_writer_emit(p->w, &r);
    }
}

static void sample(pl_attach_t *a, aproc_t *p, uint64_t step, int64_t t) {
    bool pss = t >= p->next_pss_ns;
    p->rss.skip_pss = !pss;
    pl_trace_record_t r = {.type = PL_REC_RSS};
    int64_t t0 = mono_ns();
    pl_rss_sample(&p->rss, &r.u.rss);
    if (pss) {
        int64_t gap = (mono_ns() - t0) * PSS_GAP_PER_READ;
        p->next_pss_ns = t0 + (gap > PSS_MIN_GAP_NS ? gap : PSS_MIN_GAP_NS);
    }
    r.u.rss.step = step;
    r.t_ns = t;
    if (r.u.rss.rss_anon != PL_TRACE_NA) pl_writer_emit(p->w, &r); /* gone between the check and the read */
    if (a->o.nvml) device_sample(a, p, step, t);
}

/* Processes whose parent chain reaches a followed one, not followed yet. */
static void find_children(pl_attach_t *a) {
    DIR *d = opendir(a->proc_root);
    if (!d) return;
    typedef struct { uint32_t pid, ppid; pstat_t st; } ent_t;
    ent_t *ents = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    uint32_t self = (uint32_t)getpid();
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        if (*end || pid > UINT32_MAX || pid == self) continue;
        pstat_t st;
        if (!read_stat(a->proc_root, (uint32_t)pid, &st) || !alive(&st)) continue;
        if (pl_grow_first((void **)&ents, &cap, n + 1, sizeof *ents, 256)) break;
        ents[n++] = (ent_t){(uint32_t)pid, st.ppid, st};
    }
    closedir(d);
    /* Add in rounds: a grandchild is found once its parent is followed (bounded by MAX_DEPTH rounds). */
    for (int round = 0; round < MAX_DEPTH; round++) {
        bool added = false;
        for (size_t i = 0; i < n; i++) {
            bool followed = false, parent = false;
            for (size_t k = 0; k < a->n; k++) {
                const aproc_t *p = a->procs[k];
                if (p->ended) continue;
                if (p->pid == ents[i].pid) followed = true;
                if (p->pid == ents[i].ppid) parent = true;
            }
            if (followed || !parent) continue;
            bool refused = false;
            for (size_t k = 0; k < a->n_refused; k++) refused = refused || a->refused[k] == ents[i].pid;
            if (refused) continue;
            char why[300];
            if (pl_attach_check(a->proc_root, ents[i].pid, why, sizeof why)) {
                refuse_once(a, ents[i].pid, why);
                continue;
            }
            if (add(a, ents[i].pid, &ents[i].st) == 0) added = true;
            else refuse_once(a, ents[i].pid, "a child process could not be traced");
        }
        if (!added) break;
    }
    free(ents);
}

int pl_attach_poll(pl_attach_t *a) {
    int64_t t = mono_ns();
    if (t >= a->next_scan_ns) { /* /proc walked once per interval, however often the caller polls (its log) */
        for (size_t i = 0; i < a->n; i++)
            if (!a->procs[i]->ended && !same_alive(a, a->procs[i])) end_proc(a, a->procs[i]);
        if (a->o.children) find_children(a);
        a->next_scan_ns = t + a->interval_ns;
        t = mono_ns();
    }
    bool due = false;
    for (size_t i = 0; i < a->n; i++) due = due || (!a->procs[i]->ended && t >= a->procs[i]->next_sample_ns);
    if (due && a->o.nvml) pl_nvml_refresh(a->o.nvml);
    int live = 0;
    for (size_t i = 0; i < a->n; i++) {
        aproc_t *p = a->procs[i];
        if (p->ended) continue;
        live++;
        if (t >= p->next_sample_ns) {
            sample(a, p, 0, t);
            p->next_sample_ns = t + a->interval_ns;
        }
        pl_writer_flush(p->w);
    }
    return live;
}

int pl_attach_step(pl_attach_t *a, uint64_t step, bool take_sample) {
    if (!a->n || a->procs[0]->ended) return -ESRCH;
    aproc_t *p = a->procs[0];
    int64_t t = mono_ns();
    pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = t};
    r.u.step = (pl_rec_step_t){.step = step, .source = PL_STEP_LOG};
    pl_writer_emit(p->w, &r);
    if (!take_sample) return 0;
    if (a->o.nvml) pl_nvml_refresh(a->o.nvml);
    sample(a, p, step, t); /* the step's own sample, as the collector takes one after each step */
    pl_writer_flush(p->w);
    return 0;
}

int pl_attach_wait_ms(const pl_attach_t *a) {
    int64_t t = mono_ns(), next = t + a->interval_ns;
    for (size_t i = 0; i < a->n; i++)
        if (!a->procs[i]->ended && a->procs[i]->next_sample_ns < next) next = a->procs[i]->next_sample_ns;
    int64_t ms = (next - t) / 1000000;
    return ms < 0 ? 0 : (int)ms;
}

size_t pl_attach_n_traced(const pl_attach_t *a) { return a ? a->n : 0; }

void pl_attach_destroy(pl_attach_t *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) {
        aproc_t *p = a->procs[i];
        if (!p->ended) {
            pl_writer_close(p->w);
            pl_writer_destroy(p->w);
            pl_rss_close(&p->rss);
        }
        free(p);
    }
    free(a->procs);
    if (g_log_owner == a) g_log_owner = NULL;
    free(a);
}
