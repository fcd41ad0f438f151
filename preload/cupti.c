/* CUPTI memory activity as a second, independent source of device records (built only with CUPTI's headers).
 *
 * When the program's cuInit succeeds (cuda.c's cuInit wrapper calls pl_cupti_on_cuda_init), libcupti is loaded
 * with dlopen -- never linked, for the reason libcuda is not: a link dependency makes the preload fail to load on
 * machines without it -- from PLATEAU_LIBCUPTI, else the soname libcupti.so.<CUDA major>, else the directories
 * baked in at build time (PL_CUPTI_LIBDIRS: cuda_root's extras/CUPTI/lib64 and lib64). Activity buffers are
 * registered, CUPTI_ACTIVITY_KIND_MEMORY2 and MEMORY_POOL enabled, and each completed buffer is converted
 * (cupti_record.c) into device records with source PL_DEV_SRC_CUPTI, written through pl_emit like the hooks'.
 * CUPTI flushes by itself every PLATEAU_FLUSH_MS (cuptiActivityFlushPeriod) and we force a flush at exit.
 * A program that never initialises CUDA never loads libcupti.
 * Failure policy: whatever fails (library missing, a function missing, any CUPTI call; on a machine without a
 * driver cuptiActivityEnable returns CUPTI_ERROR_UNKNOWN) gives exactly one line on stderr naming the call and
 * CUPTI's error, and the source stays off; the device hooks and everything else keep recording. The library is
 * left loaded (unloading CUPTI after it initialised is not safe).
 * Threads: the start runs once (atomic state, no lock: CUPTI may call cuInit again from inside, which returns at
 * once); buffers are completed on CUPTI's own thread or the flushing one. Buffer memory comes from mmap, never
 * from the traced malloc. */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* CUPTI's headers use enumerators beyond int (-Wpedantic under warning_level=3): not our code. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <cupti.h>
#pragma GCC diagnostic pop

#include "cupti_record.h"
#include "preload.h"

#define BUFFER_BYTES (1u << 20)

enum { ST_IDLE = 0, ST_STARTING = 1, ST_RUNNING = 2, ST_OFF = -1, ST_FAILED = -2 };

/* The libcupti functions used, one line each: X(FIELD, SYMBOL, OPTIONAL, PARAMS). The state's function pointers
 * and resolve()'s look-up table are expanded from it (the same X-macro scheme as cuda_hooks.h); resolve() looks
 * them up in this order, so the first missing one is the one reported. */
#define PL_CUPTI_FUNCTIONS(X)                                                                                   \
    X(result_string, "cuptiGetResultString", false, (CUptiResult, const char **))                              \
    X(register_callbacks, "cuptiActivityRegisterCallbacks", false,                                              \
      (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))                                    \
    X(enable, "cuptiActivityEnable", false, (CUpti_ActivityKind))                                              \
    X(disable, "cuptiActivityDisable", false, (CUpti_ActivityKind))                                            \
    X(next_record, "cuptiActivityGetNextRecord", false, (uint8_t *, size_t, CUpti_Activity **))                \
    X(flush_all, "cuptiActivityFlushAll", false, (uint32_t))                                                   \
    X(flush_period, "cuptiActivityFlushPeriod", true, (uint32_t)) /* CUPTI 11.1 and later */                    \
    X(timestamp, "cuptiGetTimestamp", false, (uint64_t *))

#define PL_CUPTI_FIELD_(FIELD, SYM, OPTIONAL, PARAMS) CUptiResult(*FIELD) PARAMS;
#define PL_CUPTI_LOOKUP_(FIELD, SYM, OPTIONAL, PARAMS) {SYM, offsetof(cupti_state_t, FIELD), OPTIONAL},

typedef struct cupti_state {
    atomic_int state;
    pid_t pid;                    /* process that enabled CUPTI: a fork child must not flush */
    int64_t clock_offset_ns;      /* CLOCK_MONOTONIC - cuptiGetTimestamp */
    PL_CUPTI_FUNCTIONS(PL_CUPTI_FIELD_)
    atomic_uint_fast64_t n_buffers, n_records, n_converted, n_errors;
} cupti_state_t;
static cupti_state_t cp;

/* The one note (start() runs once per process; its own wording, not PL_WARN_ONCE). */
static void line(const char *what, const char *detail) {
    char buf[640];
    if (snprintf(buf, sizeof buf, "plateau: CUPTI unavailable: %s: %s; device hooks keep recording", what, detail) > 0)
        pl_note(buf); /* a detail past the buffer is cut: the line stays one line */
}

static int fail_call(const char *call, CUptiResult rc) {
    const char *s = NULL;
    char num[48];
    if (!cp.result_string || cp.result_string(rc, &s) != CUPTI_SUCCESS || !s) {
        snprintf(num, sizeof num, "CUPTI error %d", (int)rc);
        s = num;
    }
    line(call, s);
    return -1;
}

/* ------------------------------------------------------------------ buffers */

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    void *p = mmap(NULL, BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *buf = p == MAP_FAILED ? NULL : p; /* NULL: CUPTI drops records (and counts them) */
    *size = p == MAP_FAILED ? 0 : BUFFER_BYTES;
    *max_records = 0;
}

static int next_record(void *ctx, uint8_t *buf, size_t valid, void **cursor) {
    (void)ctx;
    CUpti_Activity *rec = *cursor;
    CUptiResult rc = cp.next_record(buf, valid, &rec);
    if (rc == CUPTI_SUCCESS) {
        *cursor = rec;
        return 1;
    }
    return rc == CUPTI_ERROR_MAX_LIMIT_REACHED ? 0 : -1;
}

static void emit(void *ctx, const pl_trace_record_t *rec) {
    (void)ctx;
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    PL_GUARD_SCOPE();
    pl_emit(rec);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx;
    (void)stream_id;
    pl_cupti_counts_t c = {0};
    pl_cupti_record_drain(buf, valid, next_record, NULL, cp.clock_offset_ns, emit, NULL, &c);
    atomic_fetch_add(&cp.n_buffers, 1);
    atomic_fetch_add(&cp.n_records, c.n_records);
    atomic_fetch_add(&cp.n_converted, c.n_converted);
    atomic_fetch_add(&cp.n_errors, c.n_errors);
    if (buf) munmap(buf, size ? size : BUFFER_BYTES);
}

/* ------------------------------------------------------------------ start and exit */

static void cupti_at_exit(void) {
    if (atomic_load(&cp.state) != ST_RUNNING || getpid() != cp.pid) return;
    PL_GUARD_SCOPE();
    cp.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* dlopen libcupti: the explicit path, else the soname, else the build's CUDA directories. NULL after printing
 * the line (or silently, in auto mode, when no default place has it). */
static void *load_library(char *path, size_t cap) {
    const char *env = pl_env_get("PLATEAU_LIBCUPTI");
    if (env && *env) {
        snprintf(path, cap, "%s", env);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) line("dlopen", dlerror());
        return h;
    }
    char soname[32], first_error[400] = "";
    snprintf(soname, sizeof soname, "libcupti.so.%d", CUDA_VERSION / 1000);
    snprintf(path, cap, "%s", soname);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(first_error, sizeof first_error, "%s", dlerror());
    const char *dirs = PL_CUPTI_LIBDIRS; /* ':'-separated */
    while (*dirs) {
        size_t n = strcspn(dirs, ":");
        for (int with_major = 1; with_major >= 0 && n; with_major--) {
            snprintf(path, cap, "%.*s/%s", (int)n, dirs, with_major ? soname : "libcupti.so");
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        }
        dirs += n + (dirs[n] == ':');
    }
    if (pl_g.opt.cupti == PL_CUPTI_ON) line("dlopen", first_error);
    return NULL;
}

static bool resolve(void *h, const char *path) {
    static const struct { const char *name; size_t off; bool optional; } fns[] = {
        PL_CUPTI_FUNCTIONS(PL_CUPTI_LOOKUP_)};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        void *p = dlsym(h, fns[i].name);
        if (!p && !fns[i].optional) {
            char what[96], detail[560];
            snprintf(what, sizeof what, "dlsym(%s)", fns[i].name);
            snprintf(detail, sizeof detail, "not found in %s", path);
            line(what, detail);
            return false;
        }
        memcpy((char *)&cp + fns[i].off, &p, sizeof p);
    }
    return true;
}

static int start(void) {
    char path[512];
    void *h = load_library(path, sizeof path);
    if (!h || !resolve(h, path)) return -1;
    uint64_t ts = 0;
    CUptiResult rc = cp.timestamp(&ts);
    if (rc != CUPTI_SUCCESS) return fail_call("cuptiGetTimestamp", rc);
    cp.clock_offset_ns = pl_now_ns() - (int64_t)ts;
    if ((rc = cp.register_callbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
        return fail_call("cuptiActivityRegisterCallbacks", rc);
    if ((rc = cp.enable(CUPTI_ACTIVITY_KIND_MEMORY2)) != CUPTI_SUCCESS) return fail_call("cuptiActivityEnable", rc);
    if ((rc = cp.enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) != CUPTI_SUCCESS) {
        cp.disable(CUPTI_ACTIVITY_KIND_MEMORY2);
        return fail_call("cuptiActivityEnable(MEMORY_POOL)", rc);
    }
    if (cp.flush_period) cp.flush_period(pl_g.opt.flush_ms);
    cp.pid = getpid();
    atexit(cupti_at_exit); /* registered after CUPTI's own start-up: runs before its exit handlers */
    return 0;
}

void pl_cupti_on_cuda_init(void) {
    int st = atomic_load_explicit(&cp.state, memory_order_acquire);
    if (st != ST_IDLE) return;
    if (pl_g.opt.cupti == PL_CUPTI_OFF || !atomic_load(&pl_g.active)) {
        atomic_store(&cp.state, ST_OFF);
        return;
    }
    if (!atomic_compare_exchange_strong(&cp.state, &st, ST_STARTING)) return;
    int rc;
    {
        PL_GUARD_SCOPE(); /* CUPTI's own allocations and driver calls are not the program's */
        rc = start();
    }
    atomic_store_explicit(&cp.state, rc == 0 ? ST_RUNNING : ST_FAILED, memory_order_release);
}

int pl_cupti_describe(char *buf, size_t cap) {
    static const char *const names[] = {"failed", "off", "idle", "starting", "running"};
    int st = atomic_load(&cp.state);
    return snprintf(buf, cap, " cupti=%s cupti_buffers=%llu cupti_records=%llu cupti_converted=%llu",
                    names[st + 2], (unsigned long long)cp.n_buffers, (unsigned long long)cp.n_records,
                    (unsigned long long)cp.n_converted);
}
