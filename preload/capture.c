/* Native stack capture for sampled allocations: the C runtime's unwinder (libgcc's _Unwind_Backtrace) on the calling
 * thread, the preload's own frames
 * skipped, this thread's Python frames appended (pyframes.c), interned in the stack table (tracer/write/stack.c) with a
 * PL_REC_STACK record the first time. Called with pl_tl_guard raised, on the program's thread: no malloc, no
 * locks beyond the stack table's and the frame sets' (frames.c, which resolves a new stack's PCs right here). */
#include "config.h"

#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <unwind.h>

#include "preload.h"
#include "pyframes.h"

/* Why libgcc's unwinder and not libunwind: libunwind's first unwind opens a pipe that it keeps for good (to probe
 * addresses), two descriptors out of the program's numbers and RLIMIT_NOFILE (docs/env.md, "What the tracer takes
 * from the program"). libgcc's opens nothing, allocates nothing for objects the loader knows, and finds each frame's
 * unwind information through glibc's _dl_find_object (lock-free, 2.35+). A frame without unwind information ends
 * the stack. */
typedef struct {
    void **pcs;
    int n, cap;
} backtrace_t;

static _Unwind_Reason_Code backtrace_frame(struct _Unwind_Context *ctx, void *arg) {
    backtrace_t *b = arg;
    int before = 0;
    uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
    if (!ip || b->n >= b->cap) return _URC_END_OF_STACK;
    b->pcs[b->n++] = (void *)(ip + (before ? 1 : 0)); /* a signal frame's exact PC, as a return address */
    return _URC_NO_REASON;
}

uint32_t pl_stack_capture(void) {
    if (!pl_g.stacks) return 0;
    void *raw[PL_TRACE_MAX_FRAMES + 16];
    backtrace_t bt = {raw, 0, (int)(sizeof raw / sizeof raw[0])};
    _Unwind_Backtrace(backtrace_frame, &bt);
    int n = bt.n;
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
        pl_frames_resolve(pcs, k);
    }
    return id;
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

void pl_capture_init(void) { dl_iterate_phdr(find_text, (void *)(uintptr_t)&pl_stack_capture); }
