/* reports/period: find a training loop's period in the allocation stream of a trace that marks no steps.
 *
 * Offline only (the preload records, this reads): the input is the trace's allocation records, device blocks
 * (exact: every block the allocator hands out) and sampled host allocations (Poisson by bytes, so only some calls),
 * each as (time, call-site key). Four detectors, method and parameters in docs/period.md:
 *  - sequence: the lag L (in recorded allocations) at which the call-site sequence best repeats itself; steps are
 *    then cut at each occurrence of an "anchor" call site that occurs once every L allocations;
 *  - time: the dominant lag of the autocorrelation of the allocation count per time bin (for sampled streams,
 *    where a random subset of calls is recorded and sequences do not line up); steps are cut every period. When one
 *    thread holds the records with ordinals, the same runs on its call clock and the two must agree (the steps are
 *    then cut on the call clock: preemption stretches time, not calls); so must the anchor detector's period;
 *  - anchor: one call site recorded in most steps at a sharp phase (a large tensor), tested for periodicity and
 *    followed burst by burst, so steps whose length jitters and drifts (a busy machine) are cut where they end;
 *  - ordinal: when host records carry their thread's exact malloc-call count (trace 1.3), the step's call count P
 *    divides the ordinal differences of one call site's records; steps are cut every P calls on that thread and
 *    mapped to times through the thread's records (immune to timing jitter).
 * The result is a period with a confidence in [0, 1] and synthetic step boundaries (end times of steps), or
 * "not found". Invariants: bounds_ns is sorted, strictly increasing; found implies n_bounds >= 2.
 * Data flow: tracer reader -> pl_period_steps (pl_period_scan + pl_period_detect) -> reports/extract (synthetic step
 * records).
 * Thread safety: none needed (no globals); memory: the events of one trace, capped at PL_PERIOD_MAX_EVENTS.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#define PL_PERIOD_MAX_EVENTS (1u << 19) /* allocation records kept per trace (the first ones) */

typedef struct pl_period_event {
    int64_t t_ns;
    uint64_t key;       /* call site: record type + stack id (or size class when the record has no stack) */
    uint64_t size_bytes;
    bool exact;         /* recorded for sure: a device block, or a host allocation when sample_bytes is 0 or the
                           size at least 4 x sample_bytes; else a sampled host allocation */
    uint32_t tid;       /* recording thread (host allocations; 0 otherwise) */
    uint64_t ordinal;   /* the thread's exact malloc-call count at this record (trace 1.3); PL_TRACE_NA unknown */
} pl_period_event_t;

typedef enum pl_period_method {
    PL_PERIOD_NONE = 0,
    PL_PERIOD_SEQUENCE = 1,
    PL_PERIOD_TIME = 2,
    PL_PERIOD_ANCHOR = 3, /* sampled streams: one call site followed with a phase-locked loop */
    PL_PERIOD_ORDINAL = 4, /* sampled host streams with call ordinals (trace 1.3): the period in exact calls */
} pl_period_method_t;

/* What one trace holds for detection, plus its step records (ground truth for measurement; detection never
 * looks at them). */
typedef struct pl_period_input {
    pl_period_event_t *ev;   /* n_ev, owned, in record order */
    size_t n_ev, cap_ev;
    int64_t *step_ns;        /* n_steps times of step records, owned */
    size_t n_steps, cap_steps;
    uint64_t heap_n_alloc0, heap_n_alloc1; /* exact malloc-family call counts at the first and last heap record */
    int64_t heap_t0_ns, heap_t1_ns;        /* times of those records (equal when fewer than two) */
    int64_t *heap_t_ns;      /* n_heap heap records' times and exact call counts (n_alloc), owned, in record order: */
    uint64_t *heap_n_alloc;  /* the call rate over the detected steps only (start-up excluded) */
    size_t n_heap, cap_heap;
    bool truncated;          /* more than PL_PERIOD_MAX_EVENTS allocation records: the rest were ignored */
    uint64_t sample_bytes;   /* from process_start: host records are all exact when 0 */
    bool have_sample_bytes;
    /* A call site is its native stack: stacks that differ only in their Python frames (trace 1.5) are one site, as
     * they were before Python frames were recorded (a site per Python line would make anchors of sub-step loops).
     * canon[stack_id] is the first stack id seen with the same native frames (0: unknown); owned. */
    uint32_t *canon;
    size_t n_canon;
    uint64_t *nat_hash;      /* open addressing over native-frame hashes: nat_hash[i] (0 empty), nat_id[i]; owned */
    uint32_t *nat_id;
    size_t nat_cap, nat_n;
} pl_period_input_t;

typedef struct pl_period_opts {
    double min_confidence;   /* below it: not found (default 0.5) */
    size_t min_repeats;      /* periods the stream must hold (default 4) */
} pl_period_opts_t;

typedef struct pl_period {
    bool found;
    pl_period_method_t method;
    double period_allocs;    /* allocation calls per step: exact (device blocks, or the heap's exact counters) when
                                allocs_exact, else recorded (sampled) allocations per step */
    bool allocs_exact;
    double period_ns;        /* median step duration */
    double confidence;       /* 0..1: repeat consistency of the chosen lag (see docs/period.md) */
    int64_t *bounds_ns;      /* n_bounds step end times, owned; empty when !found */
    size_t n_bounds;
} pl_period_t;

void pl_period_input_init(pl_period_input_t *in);
void pl_period_input_free(pl_period_input_t *in);

/* Fold one trace record into `in` (allocation records, step records, heap totals; others are ignored).
 * Returns 0 or -ENOMEM. */
int pl_period_add(pl_period_input_t *in, const pl_trace_record_t *rec);

/* Read every record of rd into `in` (stops cleanly at a damaged tail). Returns 0 or -ENOMEM. */
int pl_period_scan(pl_trace_reader_t *rd, pl_period_input_t *in);

/* Period detection's pass of its own over an unmarked trace: reads rd up to its first step record (a trace with steps
 * keeps them: *out not found) or its end (a damaged tail ends it too), then detects. *out filled on 0 (release with
 * pl_period_free); -EINVAL, -ENOMEM. rd is read, not closed. */
int pl_period_steps(pl_trace_reader_t *rd, const pl_period_opts_t *opts, pl_period_t *out);

/* Detect the period of in's allocation events (step records ignored). opts may be NULL (defaults). On return 0
 * *out is filled (found or not; release with pl_period_free); -EINVAL, -ENOMEM. Deterministic. */
int pl_period_detect(const pl_period_input_t *in, const pl_period_opts_t *opts, pl_period_t *out);

void pl_period_free(pl_period_t *p);

/* Name of a method: "none", "sequence", "time", "anchor", "ordinal". */
const char *pl_period_method_name(pl_period_method_t m);
