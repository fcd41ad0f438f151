/* libplateau_preload.so: start and stop, options, the sampler thread, steps and marks, stack capture and
 * frame resolution, fork and exec. Data flow: interposers (heap.c) and hooks (device.c) call pl_emit; the
 * writer (tracer/writer.c) turns records into checksummed chunks; the sampler thread adds heap totals and
 * RSS every interval and at every step; the writer thread's tick resolves new PCs (dladdr) once each.
 * Failure policy: say so once on stderr, stop recording, keep forwarding (the program never notices). */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <plateau/step.h>

#include "preload.h"
#include "pyframes.h"
#include "rss.h"

pl_preload_t pl_g;
PL_TLS int pl_tl_guard;
static PL_TLS uint32_t tl_tid;

static struct {
    pthread_t sampler;
    bool sampler_started;
    atomic_uint wake;            /* futex word: bumped to wake the sampler */
    atomic_bool quit;
    atomic_uint pending_signal_steps;
    atomic_bool rss_requested;
    pl_rss_ctx_t rss;
    int64_t next_pss_ns;         /* the next RSS sample that also reads PSS (sampler thread, and fini) */
    uint32_t resolved_stacks;    /* stacks whose PCs the writer tick has resolved (writer thread only) */
    char path[PATH_MAX];         /* this image's trace file */
    char ld_preload[2048];       /* LD_PRELOAD at start, re-added on exec when a program drops it */
    char exe[PATH_MAX];          /* /proc/self/exe */
    uint32_t pid;                /* the pid this image's trace belongs to */
    uint32_t tids[512];          /* threads whose name was recorded (sampler thread only) */
    uint32_t name_hash[512];
    unsigned n_tids;
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

void pl_warn(const char *msg) {
    size_t n = strlen(msg);
    (void)!write(2, msg, n);
    if (n && msg[n - 1] != '\n') (void)!write(2, "\n", 1);
}

void pl_emit(const pl_trace_record_t *rec) {
    pl_writer_t *w = atomic_load_explicit(&pl_g.writer, memory_order_acquire);
    if (w) pl_writer_emit(w, rec);
}

static void futex_wake(atomic_uint *word) {
    atomic_fetch_add(word, 1);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* ------------------------------------------------------------------ own memory */

/* Address space the tracer's tables reserve at full size (MAP_NORESERVE, touched as used): the stack table
 * (2^18 stacks of up to 32 frames, 2^20 PCs: ~88 MiB), the sampled-pointer set (2 x 16 MiB), the mmap range table
 * (2 MiB). */
#define TABLES_FULL_BYTES (122ull << 20)
#define SAMPLER_STACK_BYTES (256u * 1024)

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

/* ------------------------------------------------------------------ stacks */

uint32_t pl_stack_capture(void) {
    if (!pl_g.stacks) return 0;
    void *raw[PL_TRACE_MAX_FRAMES + 16];
    int n = unw_backtrace(raw, (int)(sizeof raw / sizeof raw[0]));
    /* Interned as one array: native PCs, then this thread's Python frames (PL_PYFRAME_TAG | id, pyframes.c);
     * when both do not fit, the outermost native frames (interpreter and process start-up) give way. */
    uint64_t pcs[PL_TRACE_MAX_FRAMES], py[PL_PYFRAMES_MAX_DEPTH];
    uint32_t n_py = pl_pyframes_capture(py, PL_PYFRAMES_MAX_DEPTH);
    uint32_t k = 0;
    int i = 0;
    while (i < n && (uint64_t)(uintptr_t)raw[i] >= pl_g.text_lo && (uint64_t)(uintptr_t)raw[i] < pl_g.text_hi) i++;
    for (; i < n && k < PL_TRACE_MAX_FRAMES - n_py; i++) pcs[k++] = (uint64_t)(uintptr_t)raw[i];
    memcpy(pcs + k, py, n_py * sizeof py[0]);
    bool is_new;
    uint32_t id = pl_stack_intern(pl_g.stacks, pcs, k + n_py, &is_new);
    if (id && is_new) {
        pl_trace_record_t r = {.type = PL_REC_STACK, .t_ns = pl_now_ns()};
        r.u.stack.stack_id = id;
        r.u.stack.n_frames = k;
        memcpy(r.u.stack.pcs, pcs, k * sizeof pcs[0]);
        r.u.stack.n_py = n_py;
        for (uint32_t j = 0; j < n_py; j++) r.u.stack.py[j] = (uint32_t)py[j];
        pl_emit(&r);
    }
    return id;
}

/* The NT_GNU_BUILD_ID note of the loaded object containing `pc`, read from its PT_NOTE segments in memory (no file
 * access, no allocation), as lowercase hex into hex[129]; "" when the object has none. */
typedef struct { uint64_t pc; char *hex; } build_id_query_t;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    build_id_query_t *q = data;
    bool here = false;
    for (int i = 0; i < info->dlpi_phnum && !here; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t lo = info->dlpi_addr + ph->p_vaddr;
        here = ph->p_type == PT_LOAD && q->pc >= lo && q->pc < lo + ph->p_memsz;
    }
    if (!here) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const uint8_t *p = (const uint8_t *)(uintptr_t)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *n = (const void *)p;
            size_t name_sz = (n->n_namesz + 3u) & ~3u, desc_sz = (n->n_descsz + 3u) & ~3u;
            const uint8_t *name = p + sizeof *n, *desc = name + name_sz;
            if (name_sz > (size_t)(end - name) || desc_sz > (size_t)(end - desc)) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) && n->n_descsz <= 64) {
                static const char digits[] = "0123456789abcdef";
                for (uint32_t k = 0; k < n->n_descsz; k++) {
                    q->hex[2 * k] = digits[desc[k] >> 4];
                    q->hex[2 * k + 1] = digits[desc[k] & 15];
                }
                q->hex[2 * n->n_descsz] = 0;
                return 1;
            }
            p = desc + desc_sz;
        }
    }
    return 1;
}

static void emit_module(uint32_t mid, uint64_t base, uint64_t pc, const char *path, int64_t t) {
    char hex[129] = "";
    build_id_query_t q = {.pc = pc, .hex = hex};
    dl_iterate_phdr(find_build_id, &q);
    struct stat sb;
    pl_trace_record_t m = {.type = PL_REC_MODULE, .t_ns = t};
    m.u.module = (pl_rec_module_t){.module_id = mid, .base = base, .path = path, .build_id = hex,
                                   .file_size = PL_TRACE_NA, .file_mtime_ns = 0};
    if (path[0] && stat(path, &sb) == 0) {
        m.u.module.file_size = (uint64_t)sb.st_size;
        m.u.module.file_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    }
    pl_emit(&m);
}

/* Writer-thread tick: resolve every PC of stacks interned since the last tick, once per PC. Only what the
 * running process knows is recorded (module, offset, dladdr's dynamic symbol, the module's build-id): static
 * functions, C++ demangling and long names are resolved offline by reports/symbols.c from module path + offset,
 * never in the traced process. */
static void resolve_frames(void *ctx) {
    (void)ctx;
    if (!pl_g.stacks) return;
    uint32_t n = pl_stack_count(pl_g.stacks);
    for (uint32_t id = st.resolved_stacks + 1; id <= n; id++) {
        const uint64_t *pcs;
        uint32_t nf = pl_stack_get(pl_g.stacks, id, &pcs);
        for (uint32_t i = 0; i < nf; i++) {
            uint64_t pc = pcs[i];
            if ((pc & PL_PYFRAME_TAG) || !pl_stack_pc_insert(pl_g.stacks, pc)) continue; /* Python frame ids */
            Dl_info info;
            memset(&info, 0, sizeof info);
            /* pc is a return address: look up pc - 1 so a call at the end of a function resolves to it. */
            pl_trace_record_t r = {.type = PL_REC_FRAME, .t_ns = pl_now_ns()};
            r.u.frame.pc = pc;
            r.u.frame.symbol = "";
            if (dladdr((void *)(uintptr_t)(pc - 1), &info) && info.dli_fbase) {
                bool is_new;
                uint64_t base = (uint64_t)(uintptr_t)info.dli_fbase;
                uint32_t mid = pl_stack_module_id(pl_g.stacks, base, &is_new);
                if (mid && is_new) {
                    /* The main program's dli_fname is argv[0]-like: use the resolved executable path. */
                    const char *path = info.dli_fname ? info.dli_fname : "";
                    if (path[0] != '/' && st.exe[0]) path = st.exe;
                    emit_module(mid, base, pc - 1, path, r.t_ns);
                }
                r.u.frame.module_id = mid;
                r.u.frame.module_offset = pc - base;
                if (info.dli_sname && info.dli_saddr) {
                    r.u.frame.symbol = info.dli_sname;
                    r.u.frame.symbol_offset = pc - (uint64_t)(uintptr_t)info.dli_saddr;
                }
            }
            pl_emit(&r);
        }
    }
    st.resolved_stacks = n;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uint64_t probe = (uint64_t)(uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            pl_g.text_lo = lo;
            pl_g.text_hi = hi;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ samples and steps */

static void emit_heap(int64_t t, uint64_t step) {
    pl_trace_record_t r = {.type = PL_REC_HEAP, .t_ns = t};
    pl_heap_totals(&r.u.heap);
    r.u.heap.step = step;
    pl_emit(&r);
}

/* PSS comes from smaps_rollup, which walks every page table of the process: milliseconds in a PyTorch process.
 * Read every 100 ms in each of a DataLoader's processes it made a real script 1.7x slower, so it is read at most
 * every PSS_MIN_GAP_NS and, when a read is slow, PSS_GAP_PER_READ times its duration later (0.2% of a core at
 * most). PSS serves totals and shares, never a per-step verdict, so sparse samples are enough. */
#define PSS_MIN_GAP_NS 5000000000LL
#define PSS_GAP_PER_READ 500

static void emit_rss(uint64_t step) {
    pl_trace_record_t r = {.type = PL_REC_RSS};
    int64_t t0 = pl_now_ns();
    bool pss = pl_g.opt.pss && t0 >= st.next_pss_ns;
    st.rss.skip_pss = !pss;
    pl_rss_sample(&st.rss, &r.u.rss);
    if (pss) {
        int64_t gap = (pl_now_ns() - t0) * PSS_GAP_PER_READ;
        st.next_pss_ns = t0 + (gap > PSS_MIN_GAP_NS ? gap : PSS_MIN_GAP_NS);
    }
#if PL_HAVE_CUDA
    pl_cuda_sample(&r.u.rss);
#endif
    r.u.rss.step = step;
    r.t_ns = pl_now_ns();
    pl_emit(&r);
}

static void do_step(pl_step_source_t source, int64_t t) {
    uint64_t step = atomic_fetch_add(&pl_g.step, 1) + 1;
    pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = t};
    r.u.step = (pl_rec_step_t){.step = step, .source = source};
    pl_emit(&r);
    emit_heap(t, step);
    pl_device_emit_stats(step);
}

/* Explicit steps win over automatic ones (include/plateau/step.h, plateau_step_auto): once the program has called
 * plateau_step(), plateau_step_auto() records nothing; the first explicit call right after an automatic step is
 * that same boundary (the usual `opt.step(); plateau_step()`), so it records nothing either. */
static atomic_bool step_explicit_seen;  /* plateau_step() has been called in this process image */
static atomic_bool step_last_auto;      /* the last recorded step came from plateau_step_auto() */

static void step_now(pl_step_source_t source) {
    PL_GUARD_SCOPE();
    do_step(source, pl_now_ns());
    atomic_store(&st.rss_requested, true);
    futex_wake(&st.wake);
}

PL_EXPORT void plateau_step(void) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    bool first = !atomic_exchange(&step_explicit_seen, true);
    if (atomic_exchange(&step_last_auto, false) && first) return;
    step_now(PL_STEP_API_CALL);
}

PL_EXPORT void plateau_step_auto(void) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    if (atomic_load(&step_explicit_seen)) return;
    atomic_store(&step_last_auto, true);
    step_now(PL_STEP_OPTIMIZER);
}

PL_EXPORT void plateau_mark(const char *label) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_MARK, .t_ns = pl_now_ns()};
    r.u.mark = (pl_rec_mark_t){.step = atomic_load(&pl_g.step), .label = label ? label : ""};
    pl_emit(&r);
}

/* Counters a framework hands over (include/plateau/step.h): one alloc_stats record, allocator id 0x10000 + source,
 * tagged with the steps completed so far (the caller reads them right after the step it closes). */
static int64_t stat_at(const uint64_t *vals, int n, int i) {
    if (i >= n || vals[i] == PL_TRACE_NA) return (int64_t)PL_TRACE_NA;
    return vals[i] > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)vals[i];
}

PL_EXPORT void plateau_alloc_stats(int source, int device, const uint64_t *vals, int n) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    if (n < 0 || (n > 0 && !vals) || source < 1 || source > 0xffff) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_ALLOC_STATS, .t_ns = pl_now_ns()};
    uint64_t cap = n > PLATEAU_STAT_CAPACITY_BYTES ? vals[PLATEAU_STAT_CAPACITY_BYTES] : PL_TRACE_NA;
    r.u.alloc_stats = (pl_rec_alloc_stats_t){
        .allocator_id = PL_ALLOC_ID_EXTERNAL + (uint32_t)source, .device = device, .step = atomic_load(&pl_g.step),
        .allocated_bytes = stat_at(vals, n, PLATEAU_STAT_ALLOCATED_BYTES),
        .allocated_bytes_peak = stat_at(vals, n, PLATEAU_STAT_ALLOCATED_BYTES_PEAK),
        .reserved_bytes = stat_at(vals, n, PLATEAU_STAT_RESERVED_BYTES),
        .reserved_bytes_peak = stat_at(vals, n, PLATEAU_STAT_RESERVED_BYTES_PEAK),
        .active_bytes = stat_at(vals, n, PLATEAU_STAT_ACTIVE_BYTES),
        .inactive_split_bytes = stat_at(vals, n, PLATEAU_STAT_INACTIVE_SPLIT_BYTES),
        .requested_bytes = stat_at(vals, n, PLATEAU_STAT_REQUESTED_BYTES),
        .n_allocations = stat_at(vals, n, PLATEAU_STAT_N_ALLOCATIONS),
        .n_segments = stat_at(vals, n, PLATEAU_STAT_N_SEGMENTS),
        .num_alloc_retries = stat_at(vals, n, PLATEAU_STAT_NUM_ALLOC_RETRIES),
        .num_ooms = stat_at(vals, n, PLATEAU_STAT_NUM_OOMS),
        .num_device_alloc = (int64_t)PL_TRACE_NA, .num_device_free = (int64_t)PL_TRACE_NA,
        .largest_free_bytes = PL_TRACE_NA, .capacity_bytes = cap,
        .fragmentation = NAN};
    pl_emit(&r);
}

static void on_sigusr2(int sig) {
    (void)sig;
    atomic_fetch_add(&st.pending_signal_steps, 1);
    futex_wake(&st.wake);
}

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* Record names of threads not seen yet (or renamed). Uses getdents64 on a stack buffer: no malloc. */
static void scan_threads(void) {
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

/* Sampler thread: heap totals and RSS every interval; an RSS sample for each step (requested by
 * plateau_step, at most one per 2 ms so a fast loop cannot keep this thread reading /proc); the steps
 * SIGUSR2 asked for; thread names every 10 intervals. Sleeps on a futex that steps and signals bump. */
#define MIN_STEP_RSS_GAP_NS 2000000

static void *sampler_main(void *arg) {
    (void)arg;
    pl_tl_guard = 1; /* permanently: this thread's calls are the tracer's own */
    pthread_setname_np(pthread_self(), "plateau-sampler");
    uint64_t ticks = 0;
    int64_t next_sample = pl_now_ns(), last_rss = 0;
    while (!atomic_load(&st.quit)) {
        unsigned seen = atomic_load(&st.wake);
        int64_t now = pl_now_ns();
        unsigned n_sig = atomic_exchange(&st.pending_signal_steps, 0);
        for (unsigned k = 0; k < n_sig; k++) do_step(PL_STEP_SIGNAL, now);
        if (n_sig) atomic_store(&st.rss_requested, true);
        bool requested = atomic_load(&st.rss_requested);
        bool due_step = requested && now - last_rss >= MIN_STEP_RSS_GAP_NS;
        bool due_periodic = now >= next_sample;
        if (!due_step && !due_periodic) {
            int64_t until = next_sample;
            if (requested && last_rss + MIN_STEP_RSS_GAP_NS < until) until = last_rss + MIN_STEP_RSS_GAP_NS;
            int64_t wait = until - now;
            struct timespec ts = {wait / 1000000000, wait % 1000000000};
            syscall(SYS_futex, &st.wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
            continue;
        }
        if (due_step) {
            atomic_store(&st.rss_requested, false);
            emit_rss(atomic_load(&pl_g.step)); /* the step itself wrote its exact heap record */
        } else {
            emit_heap(now, 0);
            emit_rss(0);
        }
        last_rss = now;
        if (due_periodic) {
            next_sample = now + (int64_t)pl_g.opt.interval_ms * 1000000;
            if (ticks++ % 10 == 0) scan_threads();
        }
    }
    return NULL;
}

static void writer_thread_start(void) {
    pl_tl_guard = 1;
    pthread_setname_np(pthread_self(), "plateau-writer");
}

/* ------------------------------------------------------------------ start / stop */

static const char *env_get(const char *name) { return getenv(name); }

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
    char *exe = st.exe;
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
    p->sample_bytes = pl_g.opt.sample_bytes;
    p->interval_ns = (uint64_t)pl_g.opt.interval_ms * 1000000;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    p->host_mem_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : PL_TRACE_NA;
    p->cgroup_max_bytes = pl_rss_cgroup_max(&st.rss);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p->start_realtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof st.exe - 1);
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
    pl_emit(&r);
}

/* Make the run directory if PLATEAU_DIR is unset, and export it so children write next to us. */
static bool ensure_dir(void) {
    if (!pl_g.opt.dir[0]) {
        char cwd[400];
        if (!getcwd(cwd, sizeof cwd)) return false;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        snprintf(pl_g.opt.dir, sizeof pl_g.opt.dir, "%s/plateau-run-%04d%02d%02d-%02d%02d%02d-%d", cwd,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
        setenv("PLATEAU_DIR", pl_g.opt.dir, 1);
    }
    if (mkdir(pl_g.opt.dir, 0700) < 0 && errno != EEXIST) return false;
    return true;
}

static void start_recording(uint32_t ppid) {
    PL_GUARD_SCOPE();
    char msg[PATH_MAX + 128];
    if (!ensure_dir()) {
        snprintf(msg, sizeof msg, "plateau: cannot create the run directory '%s' (%s): not recording",
                 pl_g.opt.dir, strerror(errno));
        pl_warn(msg);
        return;
    }
    unsigned k = pl_mem_shift();
    if (!pl_g.stacks && pl_stack_create((1u << 18) >> k, (1u << 20) >> k, &pl_g.stacks) < 0) {
        pl_warn("plateau: cannot map the stack table: not recording");
        return;
    }
    pl_rss_init(&st.rss, NULL, NULL);
    for (int i = 0; i < PL_RSS_N_SLOTS; i++) pl_fd_register(pl_rss_slot(&st.rss, i));
    st.next_pss_ns = 0;
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
    wo.tick = resolve_frames;
    pl_writer_t *w = NULL;
    int rc = -EEXIST;
    for (uint32_t seq = 0; seq < 1000 && rc == -EEXIST; seq++) {
        h.exec_seq = seq;
        snprintf(st.path, sizeof st.path, "%s/%u.%u.pltrace", pl_g.opt.dir, h.pid, seq);
        rc = pl_writer_open(st.path, &h, &wo, &w);
    }
    if (rc < 0) {
        snprintf(msg, sizeof msg, "plateau: cannot create trace file '%s' (%s): not recording", st.path,
                 strerror(-rc));
        pl_warn(msg);
        return;
    }
    st.resolved_stacks = 0;
    st.pid = h.pid;
    pl_fd_register(pl_writer_fdslot(w));
    atomic_store(&pl_g.writer, w);
    emit_process_start(ppid, h.exec_seq);
    pl_writer_flush(w); /* a process that dies young still leaves its process_start record */
    atomic_store(&st.quit, false);
    /* The tracer's threads start with every signal blocked: the program's handlers run on its own threads,
     * as untraced, never on ours (where they could interrupt a write or be counted as the tracer's). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pl_writer_start(w) < 0) pl_warn("plateau: cannot start the writer thread: flushing only at exit");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, SAMPLER_STACK_BYTES); /* not the default 8 MiB of address space */
    st.sampler_started = pthread_create(&st.sampler, &attr, sampler_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!st.sampler_started) pl_warn("plateau: cannot start the sampler thread: no RSS samples");
    atomic_store(&pl_g.active, true);
    if (!pl_g.opt.quiet) {
        snprintf(msg, sizeof msg, "plateau: tracing pid %u into %s", h.pid, st.path);
        pl_warn(msg);
    }
}

static void stop_sampler(void) {
    if (!st.sampler_started) return;
    atomic_store(&st.quit, true);
    futex_wake(&st.wake);
    pthread_join(st.sampler, NULL);
    st.sampler_started = false;
}

static void fork_prepare(void) {
    pl_tl_guard++; /* lowered by fork_parent or fork_child */
    pl_device_fork_prepare();
    pl_heap_fork_prepare();
    pl_pyframes_fork_prepare();
    if (pl_g.stacks) pl_stack_lock(pl_g.stacks);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_fork_prepare(w);
}

static void fork_parent(void) {
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_fork_parent(w);
    if (pl_g.stacks) pl_stack_unlock(pl_g.stacks);
    pl_pyframes_fork_parent();
    pl_heap_fork_parent();
    pl_device_fork_parent();
    pl_tl_guard--;
}

static void fork_child(void) {
    bool was_active = atomic_exchange(&pl_g.active, false);
    /* Locks first: releasing the parent's writer below calls munmap, which is interposed. */
    pl_heap_fork_child();
    pl_device_fork_child();
    pl_writer_t *w = atomic_exchange(&pl_g.writer, NULL);
    if (w) {
        pl_fd_unregister(pl_writer_fdslot(w));
        pl_writer_fork_child(w);
    }
    pl_rss_close(&st.rss); /* the parent's /proc files; start_recording opens the child's */
    if (pl_g.stacks) pl_stack_reset(pl_g.stacks);
    pl_pyframes_fork_child();
    st.sampler_started = false;
    st.n_tids = 0;
    atomic_store(&st.pending_signal_steps, 0);
    atomic_store(&pl_g.step, 0);
    tl_tid = 0;
    pl_tl_guard--;
    if (was_active) start_recording((uint32_t)getppid());
}

__attribute__((constructor)) static void pl_preload_init(void) {
    pl_heap_resolve();
    pl_options_default(&pl_g.opt);
    pl_options_parse(&pl_g.opt, env_get, pl_warn);
    if (pl_g.opt.disable) return;
    const char *lp = getenv("LD_PRELOAD");
    if (lp) snprintf(st.ld_preload, sizeof st.ld_preload, "%s", lp);
    dl_iterate_phdr(find_text, (void *)(uintptr_t)&pl_stack_capture);
    pl_pyframes_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (pl_g.opt.step_signal) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigusr2;
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
    stop_sampler();
    /* A step whose RSS sample the sampler had not taken yet gets it now. */
    if (atomic_exchange(&st.rss_requested, false)) emit_rss(atomic_load(&pl_g.step));
    emit_heap(pl_now_ns(), 0);
    emit_rss(0);
    pl_trace_record_t r = {.type = PL_REC_PROCESS_END, .t_ns = pl_now_ns()};
    pl_emit(&r);
    atomic_store(&pl_g.active, false);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_close(w);
}

/* ------------------------------------------------------------------ exec */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

static void next_sym(void *fn_ptr_out, const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    memcpy(fn_ptr_out, &p, sizeof p);
}

/* Record the exec and flush: exec ends this image without running destructors. */
static void before_exec(const char *path) {
    if (!atomic_load(&pl_g.active)) return;
    /* A vfork child (posix_spawn, Python's subprocess) shares our memory but is not this traced process:
     * it must not write into the parent's trace. */
    if ((uint32_t)getpid() != st.pid) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_EXEC, .t_ns = pl_now_ns()};
    r.u.exec.path = path ? path : "";
    pl_emit(&r);
    emit_heap(pl_now_ns(), 0);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_flush(w);
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    static execve_fn real_execve;
    if (!real_execve) next_sym(&real_execve, "execve");
    before_exec(path);
    /* Follow into the new image even when the program passes an environment without LD_PRELOAD. */
    size_t n = 0;
    bool has_preload = false, has_dir = false, has_run = !pl_g.opt.run_id;
    for (; envp && envp[n]; n++) {
        if (!strncmp(envp[n], "LD_PRELOAD=", 11)) has_preload = true;
        if (!strncmp(envp[n], "PLATEAU_DIR=", 12)) has_dir = true;
        if (!strncmp(envp[n], "PLATEAU_RUN_ID=", 15)) has_run = true;
    }
    if (pl_g.opt.disable || !st.ld_preload[0] || (has_preload && has_dir && has_run) || n > 4096)
        return real_execve(path, argv, envp);
    char *env2[n + 4];
    static char pre[2048 + 16], dir[sizeof pl_g.opt.dir + 16], run[40];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) env2[k++] = envp[i];
    if (!has_preload) {
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", st.ld_preload);
        env2[k++] = pre;
    }
    if (!has_dir && pl_g.opt.dir[0]) {
        snprintf(dir, sizeof dir, "PLATEAU_DIR=%s", pl_g.opt.dir);
        env2[k++] = dir;
    }
    if (!has_run) {
        snprintf(run, sizeof run, "PLATEAU_RUN_ID=%016llx", (unsigned long long)pl_g.opt.run_id);
        env2[k++] = run;
    }
    env2[k] = NULL;
    return real_execve(path, argv, env2);
}

extern char **environ;

PL_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

PL_EXPORT int execvp(const char *file, char *const argv[]) {
    static int (*real_execvp)(const char *, char *const[]);
    if (!real_execvp) next_sym(&real_execvp, "execvp");
    before_exec(file);
    return real_execvp(file, argv);
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    static int (*real_execvpe)(const char *, char *const[], char *const[]);
    if (!real_execvpe) next_sym(&real_execvpe, "execvpe");
    before_exec(file);
    return real_execvpe(file, argv, envp);
}

/* _exit skips destructors (Python's os._exit in multiprocessing and DataLoader workers, dash's exit): write
 * the final heap totals and the process_end record and flush, so the last interval is not lost and the
 * process does not look killed. Other threads are not stopped: their later records are simply not written. */
PL_EXPORT void _exit(int status) {
    static void (*real_exit)(int);
    if (!real_exit) next_sym(&real_exit, "_exit");
    if (atomic_load(&pl_g.active) && (uint32_t)getpid() == st.pid) {
        PL_GUARD_SCOPE();
        emit_heap(pl_now_ns(), 0);
        pl_trace_record_t r = {.type = PL_REC_PROCESS_END, .t_ns = pl_now_ns()};
        pl_emit(&r);
        pl_writer_t *w = atomic_load(&pl_g.writer);
        if (w) pl_writer_flush(w);
    }
    if (real_exit) real_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

#define MAX_EXECL_ARGS 1024

/* execl's argument list as an argv array (NULL-terminated; cut at MAX_EXECL_ARGS - 1 entries). */
static void execl_argv(char **argv, const char *arg, va_list ap) {
    size_t n = 0;
    argv[n++] = (char *)(uintptr_t)arg;
    while (argv[n - 1] && n < MAX_EXECL_ARGS) argv[n++] = va_arg(ap, char *);
    argv[MAX_EXECL_ARGS - 1] = NULL;
}

PL_EXPORT int execl(const char *path, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, ap);
    va_end(ap);
    return execve(path, argv, environ);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}
