/* libplateau_preload.so's lifecycle: options, start and stop, the process_start record, fork. The other jobs sit in
 * their own files (preload.h lists them). Data flow: interposers (heap.c) and hooks (device.c, cuda.c) call
 * pl_emit; the writer (tracer/write/writer.c) turns records into checksummed chunks; a new stack's PCs are resolved
 * to modules once each by the thread that interns it (frames.c). Under plateau run (PLATEAU_COLLECTOR) the chunks
 * go through a shared ring file to plateau run's collector, which also samples RSS from outside: no thread and no
 * descriptor of ours stays in the program. Preloaded by hand, a writer thread writes the chunks and the sampler
 * thread (sampler.c) adds heap totals and RSS every interval and at every step. Failure policy: say so once on
 * plateau's own channel (note.c), stop recording, keep forwarding (the program never notices). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"
#include "pyframes.h"
#include "ring.h"
#include "rss.h"

pl_preload_t pl_g = {.requests = &pl_g.no_requests};
PL_TLS int pl_tl_guard;
static PL_TLS uint32_t tl_tid;

static struct {
    char path[PATH_MAX];         /* this image's trace file */
} st;

/* ------------------------------------------------------------------ small helpers */

int64_t pl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint32_t pl_tid(void) {
    if (!tl_tid) tl_tid = (uint32_t)syscall(SYS_gettid);
    return tl_tid;
}

void pl_warn(const char *msg) { pl_note(msg); }

void pl_emit(const pl_trace_record_t *rec) {
    pl_writer_t *w = atomic_load_explicit(&pl_g.writer, memory_order_acquire);
    if (w) pl_writer_emit(w, rec);
}

/* ------------------------------------------------------------------ own memory */

/* Address space the tracer's tables reserve at full size (MAP_NORESERVE, touched as used): the stack table
 * (2^18 stacks of up to 32 frames, 2^20 PCs: ~88 MiB), the sampled-pointer set (2 x 16 MiB), the mmap range table
 * (2 MiB). */
#define TABLES_FULL_BYTES (122ull << 20)

unsigned pl_mem_shift(void) {
    static atomic_int shift = -1;
    int k = atomic_load_explicit(&shift, memory_order_relaxed);
    if (k >= 0) return (unsigned)k;
    struct rlimit rl;
    k = 0;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        while (k < 10 && (TABLES_FULL_BYTES >> k) > rl.rlim_cur / 32) k++;
    atomic_store_explicit(&shift, k, memory_order_relaxed);
    return (unsigned)k;
}

static void writer_thread_start(void) { /* fallback mode only: ring mode runs no thread */
    pl_tl_guard = 1;
    pthread_setname_np(pthread_self(), "plateau-writer");
}

/* ------------------------------------------------------------------ start / stop */

static const char *env_get(const char *name) { return pl_env_get(name); }

static int env_int(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > INT32_MAX ? -1 : (int)v;
}

static size_t read_cmdline(char *buf, size_t cap) {
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t got = 0;
    ssize_t n;
    while (got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0) got += (size_t)n;
    close(fd);
    buf[got] = 0;
    return got;
}

static void emit_process_start(uint32_t ppid, uint32_t exec_seq) {
    static char cmd[16384];
    char *exe = pl_g.exe;
    pl_trace_record_t r = {.type = PL_REC_PROCESS_START, .t_ns = pl_now_ns()};
    pl_rec_process_t *p = &r.u.process;
    p->pid = (uint32_t)getpid();
    p->ppid = ppid;
    p->exec_seq = exec_seq;
    p->rank = env_int("RANK");
    if (p->rank < 0) p->rank = env_int("OMPI_COMM_WORLD_RANK");
    if (p->rank < 0) p->rank = env_int("SLURM_PROCID");
    if (p->rank < 0) p->rank = env_int("PMI_RANK");
    p->local_rank = env_int("LOCAL_RANK");
    if (p->local_rank < 0) p->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    if (p->local_rank < 0) p->local_rank = env_int("SLURM_LOCALID");
    if (p->local_rank < 0) p->local_rank = env_int("MPI_LOCALRANKID"); /* MPICH, Intel MPI */
    p->sample_bytes = pl_g.opt.sample_bytes;
    p->interval_ns = (uint64_t)pl_g.opt.interval_ms * 1000000;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    p->host_mem_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : PL_TRACE_NA;
    if (pl_g.opt.host_memory_bytes) p->host_mem_bytes = pl_g.opt.host_memory_bytes; /* PLATEAU_HOST_MEMORY (tests) */
    p->cgroup_max_bytes = pl_rss_cgroup_max(&pl_g.rss);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p->start_realtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof pl_g.exe - 1);
    exe[n > 0 ? n : 0] = 0;
    p->exe = exe;
    size_t len = read_cmdline(cmd, sizeof cmd);
    for (size_t off = 0; off < len; off += strlen(cmd + off) + 1) {
        if (p->n_argv < PL_TRACE_MAX_ARGV) p->argv[p->n_argv++] = cmd + off;
        p->argc++;
    }
    /* Looked up once per image: a fork child inherits the answer (and makes no loader call after fork). */
    static char alloc_name[64], alloc_version[128];
    if (!alloc_name[0]) pl_heap_allocator(alloc_name, sizeof alloc_name, alloc_version, sizeof alloc_version);
    p->host_allocator = alloc_name;
    p->host_allocator_version = alloc_version;
    static char node[64]; /* the host name: ranks of a multi-node job are (node, pid) (uname, no allocation) */
    if (gethostname(node, sizeof node - 1)) node[0] = 0;
    p->node = node;
    pl_emit(&r);
}

/* Make the run directory if PLATEAU_DIR is unset (or make a relative one absolute), and keep it for children (they
 * write next to us; the program's environment never shows it: env.c). */
static bool ensure_dir(void) {
    if (!pl_g.opt.dir[0]) {
        char cwd[400];
        if (!getcwd(cwd, sizeof cwd)) return false;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        snprintf(pl_g.opt.dir, sizeof pl_g.opt.dir, "%s/plateau-run-%04d%02d%02d-%02d%02d%02d-%d", cwd,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
        pl_env_set("PLATEAU_DIR", pl_g.opt.dir); /* what children get; the program's environment never shows it */
    } else if (pl_g.opt.dir[0] != '/') {
        /* a relative PLATEAU_DIR (set by hand) names the first process's folder: made absolute once and exported,
         * so a child that changed its working directory writes next to us instead of making folders in its own */
        char cwd[PATH_MAX], abs[sizeof pl_g.opt.dir];
        if (!getcwd(cwd, sizeof cwd)) return false;
        int n = snprintf(abs, sizeof abs, "%s/%s", cwd, pl_g.opt.dir);
        if (n < 0 || (size_t)n >= sizeof abs) return false;
        memcpy(pl_g.opt.dir, abs, sizeof abs);
        pl_env_set("PLATEAU_DIR", pl_g.opt.dir);
    }
    if (mkdir(pl_g.opt.dir, 0700) < 0 && errno != EEXIST) return false;
    return true;
}

static void start_recording(uint32_t ppid) {
    PL_GUARD_SCOPE();
    char msg[PATH_MAX + 128];
    if (!ensure_dir()) /* no run directory, so no channel to say it on (docs/env.md, "Notes") */
        return;
    pl_note_ready(pl_g.opt.dir);
    unsigned k = pl_mem_shift();
    if (!pl_g.stacks && pl_stack_create((1u << 18) >> k, (1u << 20) >> k, &pl_g.stacks) < 0) {
        pl_warn("plateau: cannot map the stack table: not recording");
        return;
    }
    pl_rss_init(&pl_g.rss, NULL, NULL);
    for (int i = 0; i < PL_RSS_N_SLOTS; i++) pl_fd_register(pl_rss_slot(&pl_g.rss, i));
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = (uint32_t)getpid(), .ppid = ppid,
                           .start_mono_ns = pl_now_ns(), .run_id = pl_g.opt.run_id};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h.start_realtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    pl_writer_options_t wo;
    pl_writer_options_default(&wo);
    wo.flush_ms = pl_g.opt.flush_ms;
    wo.buffer_bytes = pl_g.opt.buffer_bytes;
    wo.log = pl_warn;
    wo.thread_start = writer_thread_start;
    pl_writer_t *w = NULL;
    int rc = -EEXIST;
    char ring_path[PATH_MAX + 16];
    for (uint32_t seq = 0; seq < 1000 && rc == -EEXIST; seq++) {
        h.exec_seq = seq;
        snprintf(st.path, sizeof st.path, "%s/%u.%u.pltrace", pl_g.opt.dir, h.pid, seq);
        snprintf(ring_path, sizeof ring_path, "%s/%u.%u%s", pl_g.opt.dir, h.pid, seq, PL_RING_SUFFIX);
        if (pl_g.opt.collector) {
            rc = pl_writer_open_ring(st.path, ring_path, &h, &wo, &w);
            if (rc < 0 && rc != -EEXIST) { /* e.g. a file size limit below the ring: the in-process writer */
                snprintf(msg, sizeof msg, "plateau: cannot make the shared ring '%s' (%s): the tracer runs its "
                         "writer and sampler threads in pid %u", ring_path, strerror(-rc), h.pid);
                pl_warn(msg);
                rc = pl_writer_open(st.path, &h, &wo, &w);
            }
        } else {
            rc = pl_writer_open(st.path, &h, &wo, &w);
        }
    }
    if (rc < 0) {
        snprintf(msg, sizeof msg, "plateau: cannot create trace file '%s' (%s): not recording", st.path,
                 strerror(-rc));
        pl_warn(msg);
        return;
    }
    pl_g.pid = h.pid;
    pl_g.ring = pl_writer_ring(w);
    if (pl_g.ring) {
        pl_g.ring->interval_ms = pl_g.opt.interval_ms;
        pl_g.ring->pss = pl_g.opt.pss;
#if PL_HAVE_CUDA
        pl_rec_rss_t dev = {.device_used = PL_TRACE_NA, .device_total = 0};
        pl_cuda_sample(&dev); /* a fork child: the reading it inherited, until its own driver calls */
        if (dev.device_total && dev.device_total != PL_TRACE_NA) {
            atomic_store(&pl_g.ring->device_used, dev.device_used);
            atomic_store(&pl_g.ring->device_total, dev.device_total);
        }
#endif
    }
    pl_fd_register(pl_writer_fdslot(w));
    atomic_store(&pl_g.writer, w);
    emit_process_start(ppid, h.exec_seq);
    pl_writer_flush(w); /* a process that dies young still leaves its process_start record */
    if (pl_g.ring) {
        /* The collector samples /proc/PID from outside: no descriptor and no thread of ours stays here. */
        for (int i = 0; i < PL_RSS_N_SLOTS; i++) pl_fd_unregister(pl_rss_slot(&pl_g.rss, i));
        pl_rss_close(&pl_g.rss);
        pl_g.requests = &pl_g.ring->requests;
        atomic_store(&pl_g.active, true);
        if (!pl_g.opt.quiet) {
            snprintf(msg, sizeof msg, "plateau: tracing pid %u into %s", h.pid, st.path);
            pl_warn(msg);
        }
        return;
    }
    /* The tracer's threads start with every signal blocked: the program's handlers run on its own threads,
     * as untraced, never on ours (where they could interrupt a write or be counted as the tracer's). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pl_writer_start(w) < 0) pl_warn("plateau: cannot start the writer thread: flushing only at exit");
    bool sampler_started = pl_sampler_start();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!sampler_started) pl_warn("plateau: cannot start the sampler thread: no RSS samples");
    atomic_store(&pl_g.active, true);
    if (!pl_g.opt.quiet) {
        snprintf(msg, sizeof msg, "plateau: tracing pid %u into %s", h.pid, st.path);
        pl_warn(msg);
    }
}

static void fork_prepare(void) {
    pl_tl_guard++; /* lowered by fork_parent or fork_child */
    pl_device_fork_prepare();
    pl_heap_fork_prepare();
    pl_pyframes_fork_prepare();
    pl_frames_fork_prepare();
    if (pl_g.stacks) pl_stack_lock(pl_g.stacks);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_fork_prepare(w);
}

static void fork_parent(void) {
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_fork_parent(w);
    if (pl_g.stacks) pl_stack_unlock(pl_g.stacks);
    pl_frames_fork_parent();
    pl_pyframes_fork_parent();
    pl_heap_fork_parent();
    pl_device_fork_parent();
    pl_tl_guard--;
}

static void fork_child(void) {
    /* The parent's ring is not mapped here (MADV_DONTFORK): forget it before anything reads it. */
    pl_g.requests = &pl_g.no_requests;
    pl_g.ring = NULL;
    bool was_active = atomic_exchange(&pl_g.active, false);
    /* Locks first: releasing the parent's writer below calls munmap, which is interposed. */
    pl_heap_fork_child();
    pl_device_fork_child();
    pl_writer_t *w = atomic_exchange(&pl_g.writer, NULL);
    if (w) {
        pl_fd_unregister(pl_writer_fdslot(w));
        pl_writer_fork_child(w);
    }
    pl_rss_close(&pl_g.rss); /* the parent's /proc files; start_recording opens the child's */
    if (pl_g.stacks) pl_stack_reset(pl_g.stacks);
    pl_frames_fork_child();
    pl_pyframes_fork_child();
    pl_sampler_fork_child();
    pl_threads_fork_child();
    pl_note_fork_child();
    atomic_store(&pl_g.step, 0);
    tl_tid = 0;
    pl_tl_guard--;
    if (was_active) start_recording((uint32_t)getppid());
}

__attribute__((constructor)) static void pl_preload_init(void) {
    pl_heap_resolve();
    pl_env_init(); /* before anything reads the environment, and before main copies it */
    pl_options_default(&pl_g.opt);
    pl_options_parse(&pl_g.opt, env_get, pl_warn);
    if (pl_g.opt.disable) return;
    pl_capture_init();
    pl_pyframes_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (pl_g.opt.step_signal) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = pl_step_on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, NULL);
    }
    start_recording((uint32_t)getppid());
}

/* Final records and a synchronous flush. Other threads may still allocate: they keep being counted, and
 * their records after this point are refused by the closed writer (memory stays mapped). */
__attribute__((destructor)) static void pl_preload_fini(void) {
    if (!atomic_load(&pl_g.active)) return;
    PL_GUARD_SCOPE();
    pl_sampler_stop();
    pl_sampler_final(); /* ring mode: the steps SIGUSR2 counted, heap totals and one RSS read of its own */
    pl_trace_record_t r = {.type = PL_REC_PROCESS_END, .t_ns = pl_now_ns()};
    pl_emit(&r);
    atomic_store(&pl_g.active, false);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_close(w);
}
