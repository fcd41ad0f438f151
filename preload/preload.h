/* Internal state shared by the preload's files: preload.c (start/stop, options, steps, sampler thread,
 * fork/exec), heap.c (malloc family and mmap interposers, exact counters, sampled stacks) and device.c
 * (plateau allocator observer). Rules (STYLE.md): never crash or block the host program; on failure say so
 * once on stderr and switch the feature off; the tracer's memory never comes from the traced malloc. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#include "options.h"
#include "stack.h"
#include "writer.h"

#define PL_EXPORT __attribute__((visibility("default")))
#define PL_TLS _Thread_local __attribute__((tls_model("initial-exec")))

typedef struct pl_preload {
    pl_options_t opt;
    _Atomic(pl_writer_t *) writer;   /* NULL when not recording */
    pl_stack_table_t *stacks;        /* created once; reset in a fork child */
    atomic_bool active;              /* recording (sampling and emitting) */
    atomic_uint_fast64_t step;       /* steps completed */
    uint64_t text_lo, text_hi;       /* this library's code: frames inside it are not recorded */
} pl_preload_t;

extern pl_preload_t pl_g;
extern PL_TLS int pl_tl_guard;       /* > 0 inside the tracer: no sampling, no re-entry */

static inline void pl_guard_leave_(int *unused) {
    (void)unused;
    pl_tl_guard--;
}
/* Raises pl_tl_guard from here to the end of the enclosing block, and lowers it however the block is left (return,
 * break, or a C++ exception unwinding through: the preload is built with -fexceptions), so an early return cannot
 * leave it raised. One per block; a raise that spans functions (fork_prepare/fork_parent) stays explicit. */
#define PL_GUARD_SCOPE() __attribute__((cleanup(pl_guard_leave_), unused)) int pl_guard_scope_ = ++pl_tl_guard

int64_t pl_now_ns(void);
uint32_t pl_tid(void);
void pl_emit(const pl_trace_record_t *rec);
void pl_warn(const char *msg);       /* one line on stderr (async-signal-safe write; the newline added if missing) */

/* pl_warn at most once per call site: each use has its own atomic flag, so one warning never silences a later,
 * unrelated one. Async-signal-safe (an atomic exchange and write(2)); the flag survives fork, like the condition. */
#define PL_WARN_ONCE(msg)                                                                                       \
    do {                                                                                                       \
        static atomic_bool pl_warned_;                                                                         \
        if (!atomic_exchange(&pl_warned_, true)) pl_warn(msg);                                                 \
    } while (0)

/* Capture the caller's stack (frames inside the preload skipped), intern it, emit PL_REC_STACK the first
 * time. Returns the id or 0. Call with pl_tl_guard raised. */
uint32_t pl_stack_capture(void);

/* How many times the tracer halves its tables (stack table, sampled-pointer set, mmap range table) to stay far
 * below the program's RLIMIT_AS: 0 without a limit, else the smallest k that brings their ~122 MiB of reserved
 * (lazily touched) address space under 1/32 of the limit, at most 10. Read once; async-signal-safe. */
unsigned pl_mem_shift(void);

/* heap.c */
void pl_heap_resolve(void);                    /* find the real allocator functions (idempotent) */
void pl_heap_totals(pl_rec_heap_t *out);       /* exact totals summed over thread slots */
/* Name ("glibc", "jemalloc", "tcmalloc", "mimalloc", "other:<file>", "unknown") and version ("" unknown) of the
 * allocator that serves malloc. No traced allocation, no file I/O. */
void pl_heap_allocator(char *name, size_t name_n, char *version, size_t version_n);
void pl_heap_fork_prepare(void);
void pl_heap_fork_parent(void);
void pl_heap_fork_child(void);
void pl_heap_reset_sampling(void);             /* forget sampled pointers (fork child) */

/* device.c */
void pl_device_emit_stats(uint64_t step);      /* one PL_REC_ALLOC_STATS per live observed allocator */
void pl_device_fork_prepare(void);
void pl_device_fork_parent(void);
void pl_device_fork_child(void);

/* fd.c: the tracer's own descriptors, kept out of the program's close/close_range/closefrom/dup2/dup3 */
struct pl_fdslot;
void pl_fd_register(struct pl_fdslot *s);      /* lock-free; a registered empty slot owns nothing */
void pl_fd_unregister(struct pl_fdslot *s);

/* cuda.c (only when built with CUDA): device used/total memory into an RSS sample, left as is when unknown */
void pl_cuda_sample(pl_rec_rss_t *out);
