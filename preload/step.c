/* The step and mark API the program calls (include/plateau/step.h: plateau_step, plateau_step_auto,
 * plateau_mark, plateau_alloc_stats) and the SIGUSR2 step (PLATEAU_STEP_SIGNAL). A step writes its step record,
 * the exact heap totals and the observed allocators' stats on the calling thread, then asks the sampler thread (or
 * plateau run's collector) for an RSS sample; a signal only counts the step for the sampler thread (or the next
 * allocation) to record. */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <plateau/step.h>

#include "preload.h"

void pl_step_record(pl_step_source_t source, int64_t t) {
    uint64_t step = atomic_fetch_add(&pl_g.step, 1) + 1;
    pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = t};
    r.u.step = (pl_rec_step_t){.step = step, .source = source};
    pl_emit(&r);
    pl_emit_heap(t, step);
    pl_device_emit_stats(step);
}

/* Explicit steps win over automatic ones (include/plateau/step.h, plateau_step_auto): once the program has called
 * plateau_step(), plateau_step_auto() records nothing; the first explicit call right after an automatic step is
 * that same boundary (the usual `opt.step(); plateau_step()`), so it records nothing either. */
static atomic_bool step_explicit_seen;  /* plateau_step() has been called in this process image */
static atomic_bool step_last_auto;      /* the last recorded step came from plateau_step_auto() */

static void step_now(pl_step_source_t source) {
    PL_GUARD_SCOPE();
    pl_step_record(source, pl_now_ns());
    pl_sampler_request_rss();
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
    if (n < 0 || (n > 0 && !vals) || source < 1 || source > 0xffff || source == PLATEAU_STATS_NVML) return;
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

PL_EXPORT void plateau_retention(unsigned census, unsigned flags, const uint64_t *vals, int n, const char *path,
                                 const char *what, const char *kind, const char *file, int line, const char *fix) {
    if (!atomic_load_explicit(&pl_g.active, memory_order_relaxed)) return;
    if (n < 0 || (n > 0 && !vals)) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_RETENTION, .t_ns = pl_now_ns()};
    r.u.retention = (pl_rec_retention_t){
        .census = census, .flags = flags, .step = atomic_load(&pl_g.step),
        .items = n > 0 ? vals[0] : PL_TRACE_NA, .nodes = n > 1 ? vals[1] : PL_TRACE_NA,
        .bytes = n > 2 ? vals[2] : PL_TRACE_NA, .line = line, .path = path ? path : "", .what = what ? what : "",
        .kind = kind ? kind : "", .file = file ? file : "", .fix = fix ? fix : ""};
    /* vals[3]: the number of storages that follow as (data pointer, bytes) pairs (NA or absent: none) */
    if (n > 3 && vals[3] != PL_TRACE_NA) {
        uint64_t k = vals[3];
        if (k > PL_RETENTION_MAX_RANGES) k = PL_RETENTION_MAX_RANGES;
        if (k > (uint64_t)(n - 4) / 2) k = (uint64_t)(n - 4) / 2;
        for (uint64_t i = 0; i < k; i++) {
            r.u.retention.range_addr[i] = vals[4 + 2 * i];
            r.u.retention.range_bytes[i] = vals[5 + 2 * i];
        }
        r.u.retention.n_ranges = (uint32_t)k;
    }
    pl_emit(&r);
}

void pl_step_on_signal(int sig) {
    (void)sig;
    pl_sampler_signal_step();
}
