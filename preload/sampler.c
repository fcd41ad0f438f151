/* The sampler thread: heap totals and RSS every interval, an RSS sample after each step, the steps SIGUSR2 asked
 * for, thread names every 10 intervals. It runs with pl_tl_guard raised for good and every signal blocked, and
 * sleeps on a futex that steps and the signal handler bump (both async-signal-safe: an atomic add and a
 * syscall). Also the final samples at exit (pl_sampler_final).
 * Ring mode (PLATEAU_COLLECTOR, ring.h) runs no sampler thread: plateau run's collector reads RSS, PSS and thread
 * names from /proc/PID and asks, through the ring's requests word, the next allocation on a program thread for the
 * exact heap totals (pl_ring_service); steps wake it through the ring's doorbell. */
#include "config.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"
#include "ring.h"

#define SAMPLER_STACK_BYTES (256u * 1024)

static struct {
    pthread_t sampler;
    bool sampler_started;
    atomic_uint wake;            /* futex word: bumped to wake the sampler */
    atomic_bool quit;
    atomic_uint pending_signal_steps;
    atomic_bool rss_requested;
    int64_t next_pss_ns;         /* the next RSS sample that also reads PSS (sampler thread, and fini) */
} st;

static void futex_wake(atomic_uint *word) {
    atomic_fetch_add(word, 1);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void pl_emit_heap(int64_t t, uint64_t step) {
    pl_trace_record_t r = {.type = PL_REC_HEAP, .t_ns = t};
    pl_heap_totals(&r.u.heap);
    r.u.heap.step = step;
    pl_emit(&r);
}

/* PSS comes from smaps_rollup, which walks every page table of the process (5-7 ms in a PyTorch process) and
 * holds its mmap lock meanwhile. Read every 100 ms in each of a DataLoader's processes it made a real script 1.7x
 * slower, so it is read at most every PSS_MIN_GAP_NS and, when a read is slow, PSS_GAP_PER_READ times its duration
 * later (0.2% of a core at most). The first read comes PSS_MIN_GAP_NS after the process (or forked child) starts:
 * a short-lived worker (a validation DataLoader's lives a second or two) has no PSS, and a process's PSS at its
 * start says nothing. With a read at every start, PSS still cost bench/torch_overhead.sh 2.4% of its wall time
 * (bench/RESULTS.md). PSS serves totals and shares, never a per-step verdict, so sparse samples are enough. */
#define PSS_MIN_GAP_NS 5000000000LL
#define PSS_GAP_PER_READ 500

static void emit_rss(uint64_t step) {
    pl_trace_record_t r = {.type = PL_REC_RSS};
    int64_t t0 = pl_now_ns();
    bool pss = pl_g.opt.pss && t0 >= st.next_pss_ns;
    pl_g.rss.skip_pss = !pss;
    pl_rss_sample(&pl_g.rss, &r.u.rss);
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
        for (unsigned k = 0; k < n_sig; k++) pl_step_record(PL_STEP_SIGNAL, now);
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
            pl_emit_heap(now, 0);
            emit_rss(0);
        }
        last_rss = now;
        if (due_periodic) {
            next_sample = now + (int64_t)pl_g.opt.interval_ms * 1000000;
            if (ticks++ % 10 == 0) pl_threads_scan();
        }
    }
    return NULL;
}

bool pl_sampler_start(void) {
    st.next_pss_ns = pl_now_ns() + PSS_MIN_GAP_NS;
    atomic_store(&st.quit, false);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, SAMPLER_STACK_BYTES); /* not the default 8 MiB of address space */
    st.sampler_started = pthread_create(&st.sampler, &attr, sampler_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    return st.sampler_started;
}

void pl_sampler_stop(void) {
    if (!st.sampler_started) return;
    atomic_store(&st.quit, true);
    futex_wake(&st.wake);
    pthread_join(st.sampler, NULL);
    st.sampler_started = false;
}

void pl_sampler_request_rss(void) {
    pl_ring_hdr_t *ring = pl_g.ring;
    if (ring) {
        atomic_store(&ring->step, atomic_load(&pl_g.step));
        atomic_fetch_or(&ring->events, PL_RING_EV_RSS);
        pl_ring_ring(ring);
        return;
    }
    atomic_store(&st.rss_requested, true);
    futex_wake(&st.wake);
}

void pl_sampler_signal_step(void) {
    pl_ring_hdr_t *ring = pl_g.ring;
    if (ring && (uint32_t)getpid() == pl_g.pid) { /* not in a fork child before its own ring exists */
        atomic_fetch_add(&ring->signal_steps, 1);
        atomic_fetch_or(&ring->requests, PL_RING_REQ_STEPS);
        pl_ring_ring(ring);
        return;
    }
    if (ring) return;
    atomic_fetch_add(&st.pending_signal_steps, 1);
    futex_wake(&st.wake);
}

/* Ring mode: the SIGUSR2 steps not recorded yet, each with its heap totals. Run inside an allocation on a program
 * thread, so without the observed allocators' stats: those take the allocator's lock, which this very thread may
 * hold (the plateau allocator calls malloc). */
static void ring_signal_steps(pl_ring_hdr_t *ring) {
    unsigned n = atomic_exchange(&ring->signal_steps, 0);
    int64_t now = pl_now_ns();
    for (unsigned k = 0; k < n; k++) {
        uint64_t step = atomic_fetch_add(&pl_g.step, 1) + 1;
        pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = now};
        r.u.step = (pl_rec_step_t){.step = step, .source = PL_STEP_SIGNAL};
        pl_emit(&r);
        pl_emit_heap(now, step);
    }
    if (n) pl_sampler_request_rss();
}

void pl_ring_service(void) {
    pl_ring_hdr_t *ring = pl_g.ring;
    if (!ring || !atomic_load_explicit(&pl_g.active, memory_order_relaxed) || (uint32_t)getpid() != pl_g.pid) return;
    PL_GUARD_SCOPE();
    uint32_t req = atomic_exchange(&ring->requests, 0);
    if (req & PL_RING_REQ_STEPS) ring_signal_steps(ring);
    if (req & PL_RING_REQ_HEAP) pl_emit_heap(pl_now_ns(), 0);
}

/* Ring mode at exit: the collector cannot read a process that is gone, so the last RSS sample is read here, from
 * descriptors opened and closed within this call (no PSS: it walks every page table). */
static void ring_final(pl_ring_hdr_t *ring) {
    ring_signal_steps(ring);
    pl_emit_heap(pl_now_ns(), 0);
    pl_rss_ctx_t ctx;
    pl_rss_init(&ctx, NULL, NULL);
    ctx.skip_pss = true;
    pl_trace_record_t r = {.type = PL_REC_RSS};
    pl_rss_sample(&ctx, &r.u.rss);
    pl_rss_close(&ctx);
    r.u.rss.step = 0;
    if (atomic_fetch_and(&ring->events, ~PL_RING_EV_RSS) & PL_RING_EV_RSS)
        r.u.rss.step = atomic_load(&pl_g.step); /* the last step's sample, not taken yet */
    r.t_ns = pl_now_ns();
    pl_emit(&r);
}

void pl_sampler_final(void) {
    if (pl_g.ring) {
        ring_final(pl_g.ring);
        return;
    }
    /* A step whose RSS sample the sampler had not taken yet gets it now. */
    if (atomic_exchange(&st.rss_requested, false)) emit_rss(atomic_load(&pl_g.step));
    pl_emit_heap(pl_now_ns(), 0);
    emit_rss(0);
}

void pl_sampler_fork_child(void) {
    st.sampler_started = false;
    atomic_store(&st.pending_signal_steps, 0);
}
