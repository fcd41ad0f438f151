/* reports/period: the training loop's period from the allocation stream (method: docs/period.md).
 *
 * Input: a trace's allocation records as (time, call-site key) events. Device blocks are exact (one record per
 * block handed out), host allocations are Poisson-by-bytes samples (one record per sample_bytes allocated, on
 * average): an exact stream repeats call site for call site every step, a sampled one only in its rate over time.
 * Hence three detectors: the sequence detector (lag of best call-site self-match, steps cut at an anchor call site),
 * the time detector (autocorrelation of allocation counts per time bin, steps cut on a grid) and the anchor detector
 * (one sampled call site at a sharp phase of the step, tested for periodicity, steps cut at its bursts). When host
 * records carry their thread's exact malloc-call count (trace 1.3), a fourth, the ordinal detector, finds the
 * step's call count from same-site ordinal differences and cuts steps by call count (immune to timing jitter); and
 * when one thread holds those records, the time detector also runs on that thread's call clock, which must agree
 * with the wall-clock time and anchor results before either counts (calls_detect).
 * Invariants: work is bounded (SEQ_WINDOW events x SEQ_MAX_LAG lags; TIME_BINS bins x TIME_SCALES scales; ANCHOR_SCAN
 * passes over at most all events), whatever the trace length; results are deterministic; bounds are strictly
 * increasing.
 */
#include "period.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "hash.h"
#include "ingest.h"
#include "table.h"

#define SEQ_WINDOW 32768     /* events of the sequence detector (the middle of the stream) */
#define SEQ_MAX_LAG 4096     /* longest period in allocations the sequence detector looks for */
#define SEQ_TIE 0.05         /* lags whose match rate is within this of the best count as ties: the smallest wins */
#define HOST_EXACT_FACTOR 4  /* host allocations of 4 x sample_bytes or more are recorded with p > 0.98 */
#define SEQ_MIN_EXACT 64     /* exact (device) events needed to run the sequence detector on them alone */
#define ANCHOR_MIN_REG 0.5   /* an anchor must recur at the period this often, else steps are cut every L events */
#define SEQ_MIN_NORM 0.5     /* a step lag matches at least this far from chance (0) to certainty (1) */
#define SEQ_REL_NORM 0.6     /* ... and at least this fraction of the best lag's normalised match */
#define SEQ_MIN_ANCHOR_REG 0.6 /* ... and has an anchor recurring at that lag this often */
#define SEQ_MAX_CANDIDATES 64  /* strong lags examined for an anchor, smallest first */
#define MIN_ALLOCS_PER_STEP 4  /* fewer recorded allocations per period: too little evidence to cut steps */
#define TIME_BINS 4096       /* bins per scale of the time detector */
#define TIME_SCALES 5        /* bin layouts, see time_detect */
#define TIME_MIN_LAG 3       /* a period must span at least this many bins to be resolved */
#define TIME_PEAK_FRAC 0.85  /* first autocorrelation peak at least this fraction of the highest one wins */
#define TIME_SUB_FRAC 0.7    /* ... and Lp/k replaces Lp when its autocorrelation is at least this fraction */
#define TIME_MIN_EVENTS_PER_STEP 8 /* sparser: counts per bin are 0 or 1 and scheduler artefacts (a preempted
                                     * process allocating in time slices) pass for periods */
#define FOLD_BINS 32         /* phase bins used to place the time detector's grid in the quietest phase */

/* ---- input ---- */

void pl_period_input_init(pl_period_input_t *in) { memset(in, 0, sizeof *in); }

void pl_period_input_free(pl_period_input_t *in) {
    if (!in) return;
    free(in->ev);
    free(in->step_ns);
    free(in->heap_t_ns);
    free(in->heap_n_alloc);
    free(in->canon);
    free(in->nat_hash);
    free(in->nat_id);
    memset(in, 0, sizeof *in);
}

static uint64_t size_class(uint64_t s) {
    uint64_t c = 0;
    while (s > 1) { s >>= 1; c++; }
    return c;
}

static uint64_t make_key(uint32_t type, uint32_t stack_id, uint64_t size) {
    /* no stack: the power-of-two size class stands in for the call site */
    uint64_t site = stack_id ? (uint64_t)stack_id : (1ull << 40) | size_class(size);
    return ((uint64_t)type << 48) ^ site;
}

/* The canonical id of a stack: the first one recorded with the same native frames. */
static uint32_t canon_id(const pl_period_input_t *in, uint32_t stack_id) {
    return stack_id < in->n_canon && in->canon[stack_id] ? in->canon[stack_id] : stack_id;
}

#define MAX_CANON_STACK_ID (1u << 24)

/* A native-stack hash's first slot: the hash is already mixed. */
static size_t nat_home(uint64_t h, size_t cap) { return (size_t)h & (cap - 1); }

/* Remember a stack record's canonical id (see pl_period_input_t). Returns 0 or -ENOMEM. */
static int add_stack(pl_period_input_t *in, const pl_rec_stack_t *st) {
    uint32_t id = st->stack_id;
    if (id == 0 || id >= MAX_CANON_STACK_ID) return 0;
    uint64_t h = pl_hash_pcs(st->pcs, st->n_frames);
    if (h == 0) h = 1;
    if ((in->nat_n + 1) * 2 > in->nat_cap &&
        pl_table_grow(&in->nat_hash, &in->nat_id, &in->nat_cap, 1024, 0, nat_home))
        return -ENOMEM;
    size_t k = h & (in->nat_cap - 1);
    while (in->nat_hash[k] && in->nat_hash[k] != h) k = (k + 1) & (in->nat_cap - 1);
    if (!in->nat_hash[k]) {
        in->nat_hash[k] = h;
        in->nat_id[k] = id;
        in->nat_n++;
    }
    if (id >= in->n_canon) {
        size_t old = in->n_canon;
        if (pl_grow_first((void **)&in->canon, &in->n_canon, (size_t)id + 1, sizeof *in->canon, 1024)) return -ENOMEM;
        memset(in->canon + old, 0, (in->n_canon - old) * sizeof *in->canon);
    }
    in->canon[id] = in->nat_id[k];
    return 0;
}

static int push_event(pl_period_input_t *in, const pl_period_event_t *e) {
    if (in->n_ev >= PL_PERIOD_MAX_EVENTS) {
        in->truncated = true;
        return 0;
    }
    if (pl_grow_first((void **)&in->ev, &in->cap_ev, in->n_ev + 1, sizeof *in->ev, 1024)) return -ENOMEM;
    in->ev[in->n_ev++] = *e;
    return 0;
}

static int on_host_alloc(void *ctx, const pl_trace_record_t *rec) {
    pl_period_input_t *in = ctx;
    const pl_rec_host_alloc_t *q = &rec->u.host_alloc;
    /* recorded for sure when every call is (sample_bytes 0) or nearly so (p = 1 - exp(-s/sample) > 0.98) */
    bool exact = in->have_sample_bytes && (in->sample_bytes == 0 || q->size >= HOST_EXACT_FACTOR * in->sample_bytes);
    /* an mmap record carries the count of calls before it (it is no malloc call): the same as the call before,
     * so it gives the ordinal detector nothing and would read as a repeated ordinal */
    uint64_t key = make_key(PL_REC_HOST_ALLOC, canon_id(in, q->stack_id), q->size);
    uint64_t ordinal = q->kind == PL_HOST_MMAP ? PL_TRACE_NA : q->call_ordinal;
    pl_period_event_t e = {rec->t_ns, key, q->size, exact, q->tid, ordinal};
    return push_event(in, &e);
}

static int on_device_alloc(void *ctx, const pl_trace_record_t *rec) {
    pl_period_input_t *in = ctx;
    const pl_rec_device_t *q = &rec->u.device;
    pl_period_event_t e = {rec->t_ns, make_key(PL_REC_DEVICE_ALLOC, canon_id(in, q->stack_id), q->size), q->size,
                           true, 0, PL_TRACE_NA};
    return push_event(in, &e);
}

static int on_stack(void *ctx, const pl_trace_record_t *rec) { return add_stack(ctx, &rec->u.stack); }

static int on_process(void *ctx, const pl_trace_record_t *rec) {
    pl_period_input_t *in = ctx;
    in->sample_bytes = rec->u.process.sample_bytes;
    in->have_sample_bytes = true;
    return 0;
}

static int on_step(void *ctx, const pl_trace_record_t *rec) {
    pl_period_input_t *in = ctx;
    if (pl_grow_first((void **)&in->step_ns, &in->cap_steps, in->n_steps + 1, sizeof *in->step_ns, 256))
        return -ENOMEM;
    in->step_ns[in->n_steps++] = rec->t_ns;
    return 0;
}

static int on_heap(void *ctx, const pl_trace_record_t *rec) {
    pl_period_input_t *in = ctx;
    if (in->heap_t0_ns == 0 && in->heap_t1_ns == 0) {
        in->heap_n_alloc0 = rec->u.heap.n_alloc;
        in->heap_t0_ns = rec->t_ns;
    }
    if (rec->t_ns >= in->heap_t1_ns) {
        in->heap_n_alloc1 = rec->u.heap.n_alloc;
        in->heap_t1_ns = rec->t_ns;
    }
    if (in->n_heap == in->cap_heap) {
        if (in->cap_heap >= PL_PERIOD_MAX_EVENTS) return 0; /* enough: keep the first ones */
        size_t cap_t = in->cap_heap, cap_n = in->cap_heap; /* one step from one capacity: both grow alike */
        if (pl_grow_first((void **)&in->heap_t_ns, &cap_t, in->n_heap + 1, sizeof *in->heap_t_ns, 256) ||
            pl_grow_first((void **)&in->heap_n_alloc, &cap_n, in->n_heap + 1, sizeof *in->heap_n_alloc, 256))
            return -ENOMEM;
        in->cap_heap = cap_t;
    }
    in->heap_t_ns[in->n_heap] = rec->t_ns;
    in->heap_n_alloc[in->n_heap++] = rec->u.heap.n_alloc;
    return 0;
}

/* what period detection reads of a trace: allocations, stacks (to tell identical call paths apart by their pcs),
 * steps and heap totals */
static const pl_ingest_handlers_t handlers = {.host_alloc = on_host_alloc, .device_alloc = on_device_alloc,
                                              .stack = on_stack, .process = on_process, .step = on_step,
                                              .heap = on_heap};

int pl_period_add(pl_period_input_t *in, const pl_trace_record_t *rec) {
    if (!in || !rec) return -EINVAL;
    return pl_ingest_record(NULL, rec, &handlers, in);
}

int pl_period_scan(pl_trace_reader_t *rd, pl_period_input_t *in) {
    if (!rd || !in) return -EINVAL;
    return pl_ingest_read(NULL, rd, &handlers, in, NULL);
}

/* a step record ends the pass that looks for steps: the trace has its own */
static int stop_at_step(void *ctx, const pl_trace_record_t *rec) {
    (void)ctx;
    (void)rec;
    return 1;
}

int pl_period_steps(pl_trace_reader_t *rd, const pl_period_opts_t *opts, pl_period_t *out) {
    if (!rd || !out) return -EINVAL;
    memset(out, 0, sizeof *out);
    pl_ingest_handlers_t h = handlers;
    h.step = stop_at_step;
    pl_period_input_t in;
    pl_period_input_init(&in);
    int rc = pl_ingest_read(NULL, rd, &h, &in, NULL);
    if (rc == 0) rc = pl_period_detect(&in, opts, out);
    else if (rc == 1) rc = 0; /* marked: *out stays not found */
    pl_period_input_free(&in);
    return rc;
}

/* ---- helpers ---- */

typedef struct tev { int64_t t_ns; uint64_t key; size_t ix; } tev_t;

static int cmp_tev(const void *a, const void *b) {
    const tev_t *x = a, *y = b;
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns ? -1 : 1;
    return x->ix < y->ix ? -1 : x->ix > y->ix;
}

static int cmp_key_ix(const void *a, const void *b) {
    const tev_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->ix < y->ix ? -1 : x->ix > y->ix;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_gap_ns(const int64_t *b, size_t n) {
    if (n < 2) return 0;
    int64_t *g = malloc((n - 1) * sizeof *g);
    if (!g) return NAN;
    for (size_t i = 0; i + 1 < n; i++) g[i] = b[i + 1] - b[i];
    qsort(g, n - 1, sizeof *g, cmp_i64);
    double m = (n - 1) % 2 ? (double)g[(n - 1) / 2] : 0.5 * ((double)g[(n - 1) / 2 - 1] + (double)g[(n - 1) / 2]);
    free(g);
    return m;
}

/* strictly increasing copy of b (equal times collapse) */
static size_t uniq_i64(int64_t *b, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || b[i] > b[w - 1]) b[w++] = b[i];
    return w;
}

typedef struct cand {
    double conf, period_allocs, period_ns;
    bool exact;
    int64_t *bounds;
    size_t n_bounds;
} cand_t;

/* ---- sequence detector ---- */

/* Regularity of the best anchor for lag L: among call sites seen about m/L times, the fraction of consecutive
 * occurrences L (+-10%) events apart, highest wins (*key). Returns -1 when no call site qualifies. */
static double anchor_for(const tev_t *kix, size_t m, size_t L, size_t min_repeats, uint64_t *key) {
    double expect = (double)m / (double)L, best_reg = -1;
    size_t tol = L / 10 > 1 ? L / 10 : 1;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && kix[j].key == kix[i].key; j++) {}
        double cnt = (double)(j - i);
        if (cnt < 0.7 * expect || cnt > 1.3 * expect || cnt < (double)min_repeats) continue;
        size_t ok = 0;
        for (size_t k = i + 1; k < j; k++) {
            size_t g = kix[k].ix - kix[k - 1].ix;
            ok += g + tol >= L && g <= L + tol;
        }
        double reg = (double)ok / (double)(j - i - 1);
        if (reg > best_reg) { best_reg = reg; *key = kix[i].key; }
    }
    return best_reg;
}

/* e: m events in time order. Fills c (c->conf = 0 when nothing periodic). */
static int seq_detect(const tev_t *e, size_t m, size_t min_repeats, cand_t *c) {
    size_t w0 = m > SEQ_WINDOW ? (m - SEQ_WINDOW) / 2 : 0, nw = m > SEQ_WINDOW ? SEQ_WINDOW : m;
    size_t lmax = nw / min_repeats;
    if (lmax > SEQ_MAX_LAG) lmax = SEQ_MAX_LAG;
    if (lmax < MIN_ALLOCS_PER_STEP + 1) return 0;
    const tev_t *x = e + w0;
    double *match = calloc(lmax + 2, sizeof *match);
    uint64_t *keys = malloc(m * sizeof *keys);
    tev_t *kix = NULL;
    int rc = -ENOMEM;
    if (!match || !keys) goto out;
    rc = 0;
    /* chance match rate: sum of squared key frequencies over the window */
    for (size_t i = 0; i < nw; i++) keys[i] = x[i].key;
    qsort(keys, nw, sizeof *keys, cmp_u64);
    double base = 0;
    for (size_t i = 0, j; i < nw; i = j) {
        for (j = i; j < nw && keys[j] == keys[i]; j++) {}
        double p = (double)(j - i) / (double)nw;
        base += p * p;
    }
    if (base > 0.999) goto out; /* one call site only: no structure to match */
    for (size_t i = 0; i < nw; i++) keys[i] = x[i].key; /* contiguous keys: the inner loop vectorises */
    double mmax = 0;
    for (size_t L = 1; L <= lmax; L++) {
        size_t hit = 0, n = nw - L;
        for (size_t i = 0; i < n; i++) hit += keys[i] == keys[i + L];
        match[L] = (double)hit / (double)n;
        if (match[L] > mmax) mmax = match[L];
    }
    /* the fundamental lag (smallest that matches about as well as any): below the minimum step size, larger
     * lags are its multiples, not steps (a stream alternating two call sites is not a loop of 4 allocations) */
    for (size_t L = 1; L < MIN_ALLOCS_PER_STEP && L < lmax; L++)
        if (match[L] >= mmax - SEQ_TIE && (L == 1 || match[L] >= match[L - 1]) && match[L] >= match[L + 1]) goto out;
    /* (key, index) pairs sorted by key then index put each call site's occurrences side by side, for anchors */
    kix = malloc(m * sizeof *kix);
    if (!kix) { rc = -ENOMEM; goto out; }
    for (size_t i = 0; i < m; i++) kix[i] = (tev_t){0, e[i].key, i};
    qsort(kix, m, sizeof *kix, cmp_key_ix);
    /* the step is the smallest strong lag (self-match well above chance, with an anchor): a larger lag that
     * matches better is a cycle of steps (an evaluation every K steps); a smaller one without an anchor that
     * recurs once per lag is a loop inside the step (layers) */
    double nmax = (mmax - base) / (1 - base);
    size_t best = 0, n_tried = 0;
    double best_reg = -1, norm = 0;
    uint64_t anchor = 0;
    for (size_t L = MIN_ALLOCS_PER_STEP; L <= lmax && !best && n_tried < SEQ_MAX_CANDIDATES; L++) {
        double nl = (match[L] - base) / (1 - base);
        if (nl < SEQ_MIN_NORM || nl < SEQ_REL_NORM * nmax) continue;
        if (match[L] < match[L - 1] || (L < lmax && match[L] < match[L + 1])) continue;
        n_tried++;
        uint64_t k = 0;
        double reg = anchor_for(kix, m, L, min_repeats, &k);
        if (reg >= SEQ_MIN_ANCHOR_REG) { best = L; best_reg = reg; anchor = k; norm = nl; }
    }
    if (!best) { /* no strong lag with an anchor: the best-matching lag, cut every L events if need be */
        for (size_t L = MIN_ALLOCS_PER_STEP; L <= lmax && !best; L++)
            if (match[L] >= mmax - SEQ_TIE && match[L] >= match[L - 1] && (L == lmax || match[L] >= match[L + 1]))
                best = L;
        if (!best) goto out;
        norm = (match[best] - base) / (1 - base);
        best_reg = anchor_for(kix, m, best, min_repeats, &anchor);
    }
    if (norm <= 0) goto out;
    size_t nb = 0;
    int64_t *b = malloc((m / best + 2 + (best_reg >= ANCHOR_MIN_REG ? m : 0)) * sizeof *b);
    if (!b) { rc = -ENOMEM; goto out; }
    if (best_reg >= ANCHOR_MIN_REG) {
        /* a step ends where the anchor's next occurrence begins the next one */
        for (size_t k = 0; k < m; k++)
            if (e[k].key == anchor) b[nb++] = e[k].t_ns;
    } else {
        for (size_t k = best; k < m; k += best) b[nb++] = e[k].t_ns;
        best_reg = 0.5;
    }
    nb = uniq_i64(b, nb);
    if (nb < 2) { free(b); goto out; }
    c->conf = norm * (best_reg < 1 ? best_reg : 1);
    c->period_allocs = (double)best;
    c->period_ns = median_gap_ns(b, nb);
    c->bounds = b;
    c->n_bounds = nb;
out:
    free(match);
    free(keys);
    free(kix);
    return rc;
}

/* ---- time detector ---- */

/* autocorrelation of x[0..n) at lag L, over its own mean and variance */
static double acf_at(const double *x, size_t n, size_t L) {
    if (L >= n) return 0;
    double mean = 0, var = 0, acc = 0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    if (var <= 0) return 0;
    for (size_t i = 0; i + L < n; i++) acc += (x[i] - mean) * (x[i + L] - mean);
    return (acc / (double)(n - L)) / (var / (double)n);
}

/* Trim the grid b[0..nb) to the loop: cells at either end whose event count is far from the median cell's
 * (program start-up and teardown: imports, model construction, freeing) are not steps. Returns the new count
 * (b is shifted in place). */
static size_t trim_grid(const tev_t *e, size_t m, int64_t *b, size_t nb) {
    if (nb < 4) return nb;
    size_t nc = nb - 1, *cnt = calloc(nc, sizeof *cnt), *srt = malloc(nc * sizeof *srt);
    if (!cnt || !srt) { free(cnt); free(srt); return nb; }
    for (size_t i = 0, c = 0; i < m; i++) { /* e is sorted by time */
        while (c < nc && e[i].t_ns >= b[c + 1]) c++;
        if (c < nc && e[i].t_ns >= b[c]) cnt[c]++;
    }
    memcpy(srt, cnt, nc * sizeof *srt);
    qsort(srt, nc, sizeof *srt, cmp_size);
    double med = (double)srt[nc / 2], tol = 0.5 * med + 2 * sqrt(med) + 1;
    size_t lo = 0, hi = nc;
    while (lo < hi && fabs((double)cnt[lo] - med) > tol) lo++;
    while (hi > lo && fabs((double)cnt[hi - 1] - med) > tol) hi--;
    free(cnt);
    free(srt);
    /* cells lo..hi-1 stay: their bounds are b[lo..hi] */
    if (hi - lo < 1) return nb;
    memmove(b, b + lo, (hi - lo + 1) * sizeof *b);
    return hi - lo + 1;
}

/* calls: e's times are call ordinals (calls_detect); then a scale whose period holds fewer than
 * TIME_MIN_EVENTS_PER_STEP events has no say, rather than deciding the result (on the call clock a loop inside the
 * step, the growth of each "layer" list, is as exactly periodic as the step and wins ties at the finest scale). */
static int time_detect(const tev_t *e, size_t m, size_t min_repeats, bool calls, cand_t *c) {
    if (m < 16) return 0;
    int64_t t0 = e[0].t_ns, t1 = e[m - 1].t_ns;
    double span = (double)(t1 - t0);
    if (span <= 0) return 0;
    double *x = malloc(TIME_BINS * sizeof *x), *r = malloc(TIME_BINS * sizeof *r);
    if (!x || !r) { free(x); free(r); return -ENOMEM; }
    double best_r = 0, best_p = 0;
    /* scales: the whole trace in 4096, 1024 and 256 bins, then 4096 bins over the middle 1/8 and 1/64 of it */
    static const double scale_div[TIME_SCALES] = {1, 4, 16, 1.0 / 8, 1.0 / 64};
    for (int sc = 0; sc < TIME_SCALES; sc++) {
        size_t nb = scale_div[sc] >= 1 ? (size_t)(TIME_BINS / scale_div[sc]) : TIME_BINS;
        double w = scale_div[sc] >= 1 ? span / (double)nb : span * scale_div[sc] / (double)nb;
        if (w < 1000) continue; /* 1 us: finer than the tracer's timestamps are meaningful */
        double start = (double)t0 + (span - (double)nb * w) / 2;
        memset(x, 0, nb * sizeof *x);
        size_t in = 0;
        for (size_t i = 0; i < m; i++) {
            double f = ((double)e[i].t_ns - start) / w;
            if (f < 0 || f >= (double)nb) continue;
            x[(size_t)f] += 1;
            in++;
        }
        if (in < 16) continue;
        double mean = (double)in / (double)nb, var = 0;
        for (size_t i = 0; i < nb; i++) { x[i] -= mean; var += x[i] * x[i]; }
        if (var <= 0) continue;
        size_t lmax = nb / min_repeats;
        for (size_t L = 1; L <= lmax; L++) {
            double acc = 0;
            for (size_t i = 0; i + L < nb; i++) acc += x[i] * x[i + L];
            r[L] = (acc / (double)(nb - L)) / (var / (double)nb);
        }
        size_t L0 = 1;
        while (L0 <= lmax && r[L0] > 0) L0++; /* past the smoothing lobe around lag 0 */
        if (L0 >= lmax) continue;
        double rmax = 0;
        for (size_t L = L0; L < lmax; L++) if (r[L] > rmax) rmax = r[L];
        if (rmax <= 0) continue;
        size_t Lp = 0;
        for (size_t L = L0 + 1; L < lmax && !Lp; L++)
            if (r[L] >= TIME_PEAK_FRAC * rmax && r[L] >= r[L - 1] && r[L] >= r[L + 1]) Lp = L;
        /* a peak at a multiple of the period (bins that do not divide the period blur its own lag): take the
         * smallest integer fraction of Lp whose autocorrelation nearly matches */
        for (size_t k = 8; k >= 2; k--) {
            size_t Lk = (Lp + k / 2) / k;
            if (Lk < TIME_MIN_LAG || Lk < L0) continue;
            double rk = fmax(r[Lk - 1], fmax(r[Lk], r[Lk + 1]));
            if (rk >= TIME_SUB_FRAC * r[Lp]) {
                Lp = r[Lk - 1] > r[Lk] && r[Lk - 1] >= r[Lk + 1] ? Lk - 1 : r[Lk + 1] > r[Lk] ? Lk + 1 : Lk;
                break;
            }
        }
        if (Lp < TIME_MIN_LAG) continue;
        /* significance of the peak: Bartlett's variance of r under "no correlation beyond lag Lp-1", then a
         * Bonferroni bound over the lags searched; confidence = 1 - that p-value */
        double s2 = 1;
        for (size_t k = 1; k < Lp; k++) s2 += 2 * r[k] * r[k];
        double z = r[Lp] / sqrt(s2 / (double)nb);
        /* repeat consistency: a true period shows in each half of the window on its own, and again at twice the
         * lag; a noise peak picked from many lags rarely does. The weakest of the three decides. */
        size_t h = nb / 2;
        for (int half = 0; half < 2 && Lp < h / 2; half++) {
            double zh = acf_at(x + half * h, h, Lp) / sqrt(s2 / (double)h);
            if (zh < z) z = zh;
        }
        if (2 * Lp + 1 < nb / 2) {
            double r2 = fmax(acf_at(x, nb, 2 * Lp - 1), fmax(acf_at(x, nb, 2 * Lp), acf_at(x, nb, 2 * Lp + 1)));
            double z2 = r2 / sqrt(s2 / (double)nb);
            if (z2 < z) z = z2;
        }
        double pval = (double)(lmax - L0) * 0.5 * erfc(z / sqrt(2));
        double conf = pval >= 1 ? 0 : 1 - pval;
        double den = r[Lp - 1] - 2 * r[Lp] + r[Lp + 1], d = den < 0 ? 0.5 * (r[Lp - 1] - r[Lp + 1]) / den : 0;
        if (d > 0.5 || d < -0.5) d = 0;
        if (calls && (double)m * ((double)Lp + d) * w / span < TIME_MIN_EVENTS_PER_STEP) continue;
        if (conf > best_r + 1e-9) { best_r = conf; best_p = ((double)Lp + d) * w; }
    }
    free(x);
    free(r);
    if (best_r <= 0 || best_p <= 0 || span / best_p < (double)min_repeats) return 0;
    if ((double)m * best_p / span < TIME_MIN_EVENTS_PER_STEP) return 0;
    /* grid phase: the quietest phase of the folded stream, where a step is least likely to be cut in half */
    double fold[FOLD_BINS] = {0};
    for (size_t i = 0; i < m; i++) {
        double ph = fmod((double)(e[i].t_ns - t0), best_p) / best_p;
        int k = (int)(ph * FOLD_BINS);
        fold[k < FOLD_BINS ? k : FOLD_BINS - 1] += 1;
    }
    int q = 0;
    for (int k = 1; k < FOLD_BINS; k++) if (fold[k] < fold[q]) q = k;
    double phase = (q + 0.5) / FOLD_BINS * best_p;
    size_t n = (size_t)(span / best_p) + 2, nb = 0;
    int64_t *b = malloc(n * sizeof *b);
    if (!b) return -ENOMEM;
    for (size_t k = 0; k < n; k++) {
        double t = (double)t0 + phase + (double)k * best_p;
        if (t > (double)t1) break;
        b[nb++] = (int64_t)t;
    }
    nb = uniq_i64(b, nb);
    nb = trim_grid(e, m, b, nb);
    if (nb < 2) { free(b); return 0; }
    c->conf = best_r;
    c->period_ns = best_p;
    c->period_allocs = (double)m * best_p / span;
    c->bounds = b;
    c->n_bounds = nb;
    return 0;
}


/* ---- anchor detector (sampled streams whose step length jitters and drifts) ---- */

/* A sampled stream records a random subset of each step's allocations, but a call site that allocates much per
 * step (a large tensor) is recorded in most steps, at the same phase of the step (an optimizer's buffers at its
 * end). Its occurrences, collapsed into one per burst, are the step ends; a step in which it was not recorded shows
 * as a gap of about two periods and gets a boundary in its middle. This follows a step length that jitters from step
 * to step and drifts over the run (a loaded machine), which a grid of one period (time detector) cannot.
 * Method and parameters: docs/period.md. */

#define ANCHOR_MIN_OCC 16      /* occurrences a call site needs to be an anchor */
#define ANCHOR_MAX_KEYS 16     /* most frequent call sites tried */
#define ANCHOR_BURST 0.5       /* occurrences closer than this fraction of the period are one burst (one step) */
#define ANCHOR_REG_LO 0.6      /* a "regular" gap between bursts: within 0.6 .. 1.4 periods */
#define ANCHOR_REG_HI 1.4
#define ANCHOR_NEAR 0.2        /* gaps within 1 +- this period are "near"; the windows it is tested against are as wide */
#define ANCHOR_SCAN 51         /* periods tried per call site, 0.6 .. 1.6 x its typical gap */
#define ANCHOR_SCAN_LO 0.6
#define ANCHOR_SCAN_HI 1.6
#define ANCHOR_MAX_P 1e-4       /* p-value of the periodicity test (Bonferroni over the call sites tried) */
#define ANCHOR_MIN_STEPS 16    /* bursts the anchor must show */
#define ANCHOR_MIN_COVER 0.6   /* share of steps in which the anchor was seen */
#define ANCHOR_MIN_REGULAR 0.65 /* share of the anchor's gaps that are about one period */
#define ANCHOR_MIN_PHASE 0.3   /* phase concentration of the other call sites within the steps cut (see below) */
#define ANCHOR_FILL_BIAS 0.25  /* a gap of g periods holds floor(g + 0.25) steps: jitter must not add steps */
#define ANCHOR_MAX_FILL 4      /* longer gaps are pauses (start-up, evaluation): one step, no fill */
#define ANCHOR_LOCAL 8         /* gaps in the local period (their median): follows drift and slowdowns */
#define ANCHOR_ALIGN 0.1       /* another call site joins the anchor when its bursts sit within this fraction of a
                                * period of the anchor's ... */
#define ANCHOR_ALIGN_FRAC 0.8  /* ... this often */

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The call site's step-sized gap: the median of its gaps that are at least a third of its upper-quartile gap
 * (smaller ones are repeats inside a step). 0 when it has too few. */
static double step_gap(const int64_t *t, size_t n) {
    if (n < 3) return 0;
    double *g = malloc((n - 1) * sizeof *g);
    if (!g) return 0;
    for (size_t i = 0; i + 1 < n; i++) g[i] = (double)(t[i + 1] - t[i]);
    qsort(g, n - 1, sizeof *g, cmp_d);
    double q = g[(3 * (n - 1)) / 4];
    size_t lo = 0;
    while (lo < n - 1 && g[lo] < q / 3) lo++;
    double r = lo < n - 1 ? g[lo + (n - 1 - lo) / 2] : 0;
    free(g);
    return r;
}

/* collapse sorted times t[0..n) into burst starts (in place); returns their count */
static size_t to_bursts(int64_t *t, size_t n, double period) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || (double)(t[i] - t[w - 1]) > ANCHOR_BURST * period) t[w++] = t[i];
    return w;
}

/* log of P(Binomial(n, 1/2) >= k), exact (log-sum-exp over the terms) */
static double log_binom_half_tail(size_t n, size_t k) {
    if (k == 0 || n == 0) return 0;
    double mx = -INFINITY, sum = 0, lf_n = lgamma((double)n + 1);
    for (size_t j = k; j <= n; j++) {
        double l = lf_n - lgamma((double)j + 1) - lgamma((double)(n - j) + 1);
        if (l > mx) { sum = sum * exp(mx - l) + 1; mx = l; }
        else sum += exp(l - mx);
    }
    double r = mx + log(sum) - (double)n * log(2);
    return r > 0 ? 0 : r;
}

typedef struct akey { size_t at, n; double period, log_p, reg; } akey_t;

/* times of one call site, sorted, into t; returns n */
static size_t key_times(const tev_t *k, const akey_t *a, int64_t *t) {
    for (size_t q = 0; q < a->n; q++) t[q] = k[a->at + q].t_ns;
    qsort(t, a->n, sizeof *t, cmp_i64);
    return a->n;
}

/* The call sites occurring most often (at least ANCHOR_MIN_OCC times each) among k (sorted by key): at most
 * ANCHOR_MAX_KEYS, most frequent first. */
static size_t top_keys(const tev_t *k, size_t m, akey_t *top) {
    size_t n_top = 0;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && k[j].key == k[i].key; j++) {}
        akey_t r = {i, j - i, 0, 0, 0};
        if (r.n < ANCHOR_MIN_OCC) continue;
        size_t pos;
        if (n_top < ANCHOR_MAX_KEYS) pos = n_top++;
        else if (r.n > top[ANCHOR_MAX_KEYS - 1].n) pos = ANCHOR_MAX_KEYS - 1; /* replaces the least frequent */
        else continue;
        while (pos > 0 && top[pos - 1].n < r.n) { top[pos] = top[pos - 1]; pos--; }
        top[pos] = r;
    }
    return n_top;
}

/* One call site's evidence: how many of its gaps between bursts are about one period, against chance. The period
 * near its typical gap that makes it most periodic (the gap median is biased by missed steps and repeats inside a
 * step): a scan of ANCHOR_SCAN candidates, paid for in the p-value. t: its times (n); u: scratch of n. False when
 * it has no typical gap. */
static bool key_evidence(akey_t *a, const int64_t *t, size_t n, int64_t *u) {
    double P0 = step_gap(t, n);
    a->period = 0;
    a->log_p = 0;
    if (P0 <= 0) return false;
    for (int f = 0; f < ANCHOR_SCAN; f++) {
        double P = P0 * (ANCHOR_SCAN_LO + (ANCHOR_SCAN_HI - ANCHOR_SCAN_LO) * f / (ANCHOR_SCAN - 1));
        memcpy(u, t, n * sizeof *u);
        size_t nb = to_bursts(u, n, P), reg = 0, n_in = 0, n_out = 0;
        if (nb < ANCHOR_MIN_STEPS) continue;
        for (size_t i = 0; i + 1 < nb; i++) {
            double g = (double)(u[i + 1] - u[i]) / P;
            reg += g >= ANCHOR_REG_LO && g <= ANCHOR_REG_HI;
            n_in += g >= 1 - ANCHOR_NEAR && g <= 1 + ANCHOR_NEAR;
            n_out += (g >= ANCHOR_BURST && g < ANCHOR_BURST + ANCHOR_NEAR) ||
                     (g > 2 - ANCHOR_BURST - ANCHOR_NEAR && g <= 2 - ANCHOR_BURST);
        }
        /* Evidence of a period: gaps near one period (1 +- 0.2) against gaps as far off on either side
         * (0.5 - 0.7 and 1.3 - 1.5 periods). At random times the gaps between bursts are the burst window plus
         * an exponential, whose density is convex and decreasing: then the outer windows hold at least as many
         * gaps as the inner one, whatever the rate (g(u) = f(1-u) + f(1+u) grows with u). So "inner" is at
         * most Binomial(inner + outer, 1/2), and its tail is the p-value. */
        double lp = log_binom_half_tail(n_in + n_out, n_in);
        if (lp < a->log_p) {
            a->log_p = lp;
            a->period = P;
            a->reg = (double)reg / (double)(nb - 1);
        }
    }
    return true;
}

/* Call sites at the anchor's phase join it (more of the steps are seen): their bursts must sit within ANCHOR_ALIGN
 * periods of an anchor burst whenever one is near. u[0..nab): the anchor's bursts; t: the union, nab entries on
 * entry (the anchor's), with room for every event after them. Returns the union's size. */
static size_t join_aligned(const tev_t *k, const akey_t *top, size_t n_top, size_t best, double P, const int64_t *u,
                           size_t nab, int64_t *t) {
    size_t n_all = nab;
    for (size_t a = 0; a < n_top; a++) {
        if (a == best || top[a].log_p > log(1e-6) || fabs(top[a].period - P) > 0.15 * P) continue;
        int64_t *v = t + n_all; /* scratch after the union: room, since the union holds distinct events */
        size_t nv = key_times(k, &top[a], v), nvb = to_bursts(v, nv, P), near = 0, close = 0;
        for (size_t i = 0; i < nvb; i++) {
            size_t lo = 0, hi = nab; /* first anchor burst >= v[i] */
            while (lo < hi) { size_t mid = (lo + hi) / 2; if (u[mid] < v[i]) lo = mid + 1; else hi = mid; }
            double d = INFINITY;
            if (lo < nab) d = fabs((double)(u[lo] - v[i]));
            if (lo > 0) d = fmin(d, fabs((double)(v[i] - u[lo - 1])));
            if (d <= 0.5 * P) {
                near++;
                close += d <= ANCHOR_ALIGN * P;
            }
        }
        if (near >= nvb / 2 && (double)close >= ANCHOR_ALIGN_FRAC * (double)near) n_all += nvb;
    }
    return n_all;
}

/* Step ends from the bursts t[0..ns): every burst; a gap of g local periods (g < ANCHOR_MAX_FILL) holds
 * floor(g + bias) steps. *b gets them (malloc'd, distinct, sorted), *nb their count; -ENOMEM. */
static int fill_steps(const int64_t *t, size_t ns, double P, int64_t **b_out, size_t *nb_out) {
    size_t cap = ns * (ANCHOR_MAX_FILL + 1) + 1, nb = 0;
    int64_t *b = malloc(cap * sizeof *b);
    double *recent = malloc(ANCHOR_LOCAL * sizeof *recent), loc[ANCHOR_LOCAL];
    if (!b || !recent) {
        free(b);
        free(recent);
        return -ENOMEM;
    }
    size_t n_recent = 0;
    b[nb++] = t[0];
    for (size_t i = 0; i + 1 < ns; i++) {
        double g = (double)(t[i + 1] - t[i]), Pl = P;
        if (n_recent) {
            size_t nl = n_recent < ANCHOR_LOCAL ? n_recent : ANCHOR_LOCAL;
            memcpy(loc, recent, nl * sizeof *loc);
            qsort(loc, nl, sizeof *loc, cmp_d);
            Pl = loc[nl / 2];
        }
        double steps = floor(g / Pl + ANCHOR_FILL_BIAS);
        if (steps < 1 || g > ANCHOR_MAX_FILL * Pl) steps = 1;
        for (int j = 1; j < (int)steps; j++) b[nb++] = t[i] + (int64_t)(g * j / steps);
        b[nb++] = t[i + 1];
        /* every gap short of a pause counts: an isolated missed step (2 periods) does not move the median, a
         * sustained slowdown (the machine got busier) does within a few steps and stops fill-ins */
        if (g <= ANCHOR_MAX_FILL * Pl) recent[n_recent++ % ANCHOR_LOCAL] = g;
    }
    free(recent);
    *b_out = b;
    *nb_out = uniq_i64(b, nb);
    return 0;
}

/* The steps cut must organise the rest of the stream: in a loop every call site sits at its own phase of the step,
 * so the phases of the other frequent call sites' occurrences are concentrated (resultant length of the phase
 * angles, count-weighted: ~0.5 - 0.9 on PyTorch loops cut right, ~0.05 cut at a wrong period, 0 at random). A call
 * site that happens to recur regularly while the rest of the stream does not fails here. t: scratch. */
static double phase_concentration(const tev_t *k, const akey_t *top, size_t n_top, size_t best, const int64_t *b,
                                  size_t nb, int64_t *t) {
    double r_sum = 0;
    size_t w_sum = 0;
    for (size_t a = 0; a < n_top; a++) {
        if (a == best) continue;
        double zr = 0, zi = 0;
        size_t n = key_times(k, &top[a], t), w = 0;
        for (size_t i = 0, j = 0; i < n; i++) {
            while (j < nb && b[j] <= t[i]) j++;
            if (j == 0 || j >= nb) continue;
            double ph = 2 * M_PI * (double)(t[i] - b[j - 1]) / (double)(b[j] - b[j - 1]);
            zr += cos(ph);
            zi += sin(ph);
            w++;
        }
        r_sum += sqrt(zr * zr + zi * zi);
        w_sum += w;
    }
    return w_sum ? r_sum / (double)w_sum : 0;
}

static int anchor_detect(const tev_t *e, size_t m, cand_t *c) {
    if (m < ANCHOR_MIN_OCC) return 0;
    tev_t *k = malloc(m * sizeof *k);
    int64_t *t = malloc(m * sizeof *t), *u = malloc(m * sizeof *u);
    akey_t top[ANCHOR_MAX_KEYS];
    int rc = -ENOMEM;
    int64_t *b = NULL;
    size_t nb = 0;
    if (!k || !t || !u) goto out;
    rc = 0;
    memcpy(k, e, m * sizeof *k);
    qsort(k, m, sizeof *k, cmp_key_ix); /* each call site's occurrences side by side */
    size_t n_top = top_keys(k, m, top), best = SIZE_MAX;
    for (size_t a = 0; a < n_top; a++) {
        if (!key_evidence(&top[a], t, key_times(k, &top[a], t), u)) continue;
        if (best == SIZE_MAX || top[a].log_p < top[best].log_p) best = a; /* the strongest evidence */
    }
    if (best == SIZE_MAX || top[best].reg < ANCHOR_MIN_REGULAR) goto out;
    /* Bonferroni over the call sites and periods tried: the chance that the best looks this periodic at random */
    double log_bonf = top[best].log_p + log((double)n_top * ANCHOR_SCAN);
    if (log_bonf > log(ANCHOR_MAX_P)) goto out;
    double P = top[best].period;
    size_t nab = to_bursts(u, key_times(k, &top[best], u), P);
    memcpy(t, u, nab * sizeof *t); /* t: the union of joined call sites' times; u[0..nab): anchor bursts */
    size_t n_all = join_aligned(k, top, n_top, best, P, u, nab, t);
    qsort(t, n_all, sizeof *t, cmp_i64);
    size_t ns = to_bursts(t, n_all, P);
    if (ns < ANCHOR_MIN_STEPS) goto out;
    if ((rc = fill_steps(t, ns, P, &b, &nb))) goto out;
    double cover = (double)ns / (double)nb;
    if (cover < ANCHOR_MIN_COVER || nb < 2) goto out;
    /* as for the other detectors: fewer recorded allocations per step are too little evidence to cut steps */
    if ((double)m * median_gap_ns(b, nb) / (double)(e[m - 1].t_ns - e[0].t_ns + 1) < MIN_ALLOCS_PER_STEP) goto out;
    if (phase_concentration(k, top, n_top, best, b, nb, t) < ANCHOR_MIN_PHASE) goto out;
    c->conf = (1 - exp(log_bonf)) * top[best].reg;
    c->period_ns = median_gap_ns(b, nb);
    c->period_allocs = (double)m * c->period_ns / (double)(e[m - 1].t_ns - e[0].t_ns);
    c->bounds = b;
    c->n_bounds = nb;
    b = NULL;
out:
    free(b);
    free(k);
    free(t);
    free(u);
    return rc;
}

/* ---- ordinal detector (trace 1.3: host records carry their thread's exact malloc-call count) ---- */

/* A sampled stream on an exact clock: on one thread, the records of one call site are a whole number of steps
 * apart in calls when they are the same call of the step (the same index in the step's call sequence). So the
 * step's call count P is the value whose multiples the same-site ordinal differences hit far more often than
 * chance; steps are cut every P calls on that thread and mapped to times through the thread's own records. */
#define ORD_MIN_RECORDS 32     /* records with ordinals a thread needs */
#define ORD_MIN_SITE 4         /* records a call site needs on the thread to take part */
#define ORD_PAIR_WINDOW 8      /* same-site pairs: each record with the next 8 records of its site */
#define ORD_MAX_DIFFS (1u << 22) /* bound on the pairs kept per thread */
#define ORD_CANDIDATES 64      /* exact differences tried as the period, at most: */
#define ORD_GLOBAL_CANDIDATES 16 /* the most frequent ones overall, */
#define ORD_SITE_CANDIDATES 2  /* and each site's own most frequent ones */
#define ORD_MIN_P 8            /* fewer calls per step: not a step */
#define ORD_MAX_MULT 4         /* a record and its partner 1..4 periods apart are "locked" */
#define ORD_TOL_DIV 512        /* differences within P / 512 calls of a multiple count (exact below P = 512) */
#define ORD_MAX_LOG_P (-20.72) /* ln 1e-9: the periodicity test, after Bonferroni over threads x candidates */
#define ORD_HALF_LOG_P (-9.21) /* ln 1e-4: the same test in each half of the pairs (by position) on its own */
#define ORD_MIN_LOCKED 0.6     /* share of the thread's records with a same-site partner 1..4 periods away */
#define ORD_MIN_SITE_LOCK 0.45 /* share of the thread's call sites with at least half their records locked */
#define ORD_SITE_MORE 0.2      /* a non-multiple candidate locking this many more sites is the step (see below) */
#define ORD_LOCK_TIE 0.05      /* candidates locking within this of the best are ties: the most significant wins */
#define ORD_MIN_COVER 0.5      /* share of the steps cut that hold a locked record */
#define ORD_MAX_BAD 0.01       /* share of repeated ordinals or time inversions tolerated on a thread */
#define ORD_WINDOW_STEPS 16    /* the boundary phase is re-placed every 16 steps (follows steps with extra calls) */

typedef struct oev { uint64_t ord; int64_t t_ns; uint64_t key; uint32_t tid; } oev_t;

static int cmp_oev_tid(const void *a, const void *b) {
    const oev_t *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ord != y->ord) return x->ord < y->ord ? -1 : 1;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static int cmp_oev_key(const void *a, const void *b) {
    const oev_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* log of P(Binomial(n, q) >= k), exact (log-sum-exp over the terms) */
static double log_binom_tail(size_t n, size_t k, double q) {
    if (k == 0 || n == 0) return 0;
    if (k > n) return -INFINITY;
    double mx = -INFINITY, sum = 0, lf_n = lgamma((double)n + 1), lq = log(q), l1q = log1p(-q);
    for (size_t j = k; j <= n; j++) {
        double l = lf_n - lgamma((double)j + 1) - lgamma((double)(n - j) + 1) + (double)j * lq + (double)(n - j) * l1q;
        if (l > mx) { sum = sum * exp(mx - l) + 1; mx = l; }
        else sum += exp(l - mx);
        if (l < mx - 40) break; /* the terms only shrink past the mode */
    }
    double r = mx + log(sum);
    return r > 0 ? 0 : r;
}

/* values of sorted d[0..n) in [lo, hi] */
static size_t count_in(const uint64_t *d, size_t n, uint64_t lo, uint64_t hi) {
    size_t a = 0, b = n;
    while (a < b) { size_t m = a + (b - a) / 2; if (d[m] < lo) a = m + 1; else b = m; }
    size_t c = a, e = n;
    while (c < e) { size_t m = c + (e - c) / 2; if (d[m] <= hi) c = m + 1; else e = m; }
    return c - a;
}

/* The periodicity test at P over sorted differences: hits within tol of 2P, 3P, 4P against controls within tol of
 * the half-multiples on either side (1.5P .. 4.5P). Without a loop, the differences have a smooth density and
 * the hit windows hold no more than a third of hits + controls on average (twice as many control windows; for a
 * convex density the controls hold more); k = 1 is left out because P was chosen as a frequent difference.
 * Returns ln P(Binomial(hits + controls, 1/3) >= hits). */
static double ord_test(const uint64_t *d, size_t n, uint64_t P) {
    uint64_t tol = P / ORD_TOL_DIV, half = P / 2;
    size_t hits = 0, ctl = 0;
    for (uint64_t k = 2; k <= ORD_MAX_MULT; k++) {
        hits += count_in(d, n, k * P - tol, k * P + tol);
        ctl += count_in(d, n, k * P - half - tol, k * P - half + tol);
        ctl += count_in(d, n, k * P + (P - half) - tol, k * P + (P - half) + tol);
    }
    if ((double)hits <= (double)(hits + ctl) / 3) return 0;
    return log_binom_tail(hits + ctl, hits, 1.0 / 3);
}

/* Share of the site-sorted records s[0..n) (sites of at least ORD_MIN_SITE records, delimited by key) with a
 * same-site partner 1..ORD_MAX_MULT periods away; marks them in locked[]. *site_lock: the share of those sites
 * with at least half their records locked. */
static double ord_lock(const oev_t *s, size_t n, uint64_t P, bool *locked, double *site_lock) {
    uint64_t tol = P / ORD_TOL_DIV;
    size_t n_in = 0, n_locked = 0, n_sites = 0, n_sites_locked = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && s[j].key == s[i].key; j++) {}
        if (j - i < ORD_MIN_SITE) {
            for (size_t a = i; a < j; a++) locked[a] = false;
            continue;
        }
        size_t site_locked = 0;
        for (size_t a = i; a < j; a++) {
            bool l = false;
            size_t lo = a > i + ORD_PAIR_WINDOW ? a - ORD_PAIR_WINDOW : i;
            for (size_t b = lo; b < j && b <= a + ORD_PAIR_WINDOW && !l; b++) {
                if (b == a) continue;
                uint64_t dd = s[a].ord > s[b].ord ? s[a].ord - s[b].ord : s[b].ord - s[a].ord;
                uint64_t k = (dd + P / 2) / P;
                l = k >= 1 && k <= ORD_MAX_MULT && (dd > k * P ? dd - k * P : k * P - dd) <= tol;
            }
            locked[a] = l;
            n_locked += l;
            site_locked += l;
        }
        n_in += j - i;
        n_sites++;
        n_sites_locked += 2 * site_locked >= j - i;
    }
    if (site_lock) *site_lock = n_sites ? (double)n_sites_locked / (double)n_sites : 0;
    return n_in ? (double)n_locked / (double)n_in : 0;
}

/* The start of the largest circular gap between the phases ph[0..n) (sorted) in [0, P), a sixteenth into it: the
 * step ends after its last busy phase (the optimizer's), before the quiet stretch up to the next step's first
 * allocation. A boundary right after a record maps to a time right after it (the interpolation below); in the
 * middle of the gap it would fall anywhere in the quiet stretch. */
static uint64_t quiet_phase(const uint64_t *ph, size_t n, uint64_t P) {
    if (n == 0) return 0;
    uint64_t best = P - ph[n - 1] + ph[0], at = ph[n - 1]; /* the wrap-around gap */
    for (size_t i = 1; i < n; i++)
        if (ph[i] - ph[i - 1] > best) { best = ph[i] - ph[i - 1]; at = ph[i - 1]; }
    return (at + 1 + best / 16) % P;
}

/* The k most frequent values (count >= 3, within [ORD_MIN_P, UINT64_MAX / 64]: 16 P must not overflow) of sorted
 * d[0..n) into out, most frequent first; returns how many. */
static size_t top_values(const uint64_t *d, size_t n, size_t k, uint64_t *out) {
    uint64_t cnt[ORD_CANDIDATES];
    size_t m = 0;
    if (k > ORD_CANDIDATES) k = ORD_CANDIDATES;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && d[j] == d[i]; j++) {}
        uint64_t c = j - i;
        if (c < 3 || d[i] < ORD_MIN_P || d[i] > UINT64_MAX / 64) continue;
        if (m == k && cnt[m - 1] >= c) continue;
        size_t at = m < k ? m++ : k - 1;
        for (; at > 0 && cnt[at - 1] < c; at--) { /* insertion, by count descending */
            cnt[at] = cnt[at - 1];
            out[at] = out[at - 1];
        }
        cnt[at] = c;
        out[at] = d[i];
    }
    return m;
}

typedef struct site_cand { uint64_t value; size_t n_records; } site_cand_t;

typedef struct ord_best { double log_p, lock, site_lock; uint64_t P; } ord_best_t;

/* q is within tolerance of a whole multiple (>= 2) of p */
static bool ord_multiple(uint64_t q, uint64_t p) {
    if (p == 0 || q <= p) return false;
    uint64_t m = (q + p / 2) / p, dev = m * p > q ? m * p - q : q - m * p;
    return m >= 2 && dev <= m * (p / ORD_TOL_DIV);
}

/* One thread's records g[0..n) (sorted by ordinal, repeated ordinals removed, times made non-decreasing).
 * Fills *res with the chosen candidate (P 0 when none). Returns 0 or -ENOMEM. */
static int ord_thread_period(const oev_t *g, size_t n, size_t bonferroni, ord_best_t *res) {
    res->log_p = 0;
    res->P = 0;
    int rc = -ENOMEM;
    oev_t *s = malloc(n * sizeof *s);
    size_t cap = n * ORD_PAIR_WINDOW < ORD_MAX_DIFFS ? n * ORD_PAIR_WINDOW : ORD_MAX_DIFFS;
    uint64_t *d = malloc(cap * sizeof *d), *d1 = NULL, *d2 = NULL;
    bool *locked = malloc(n * sizeof *locked);
    uint64_t *cand = NULL;
    size_t nd = 0, nd1 = 0, nd2 = 0;
    if (!s || !d || !locked) goto out;
    memcpy(s, g, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_oev_key);
    d1 = malloc(cap * sizeof *d1);
    d2 = malloc(cap * sizeof *d2);
    if (!d1 || !d2) goto out;
    /* candidates: the most frequent exact differences overall (below) and each site's own two most frequent (a
     * site called often inside the step, a list growing, must not crowd out the sites recurring once a step) */
    cand = malloc(ORD_CANDIDATES * sizeof *cand);
    if (!cand) goto out;
    site_cand_t site_cand[ORD_CANDIDATES];
    size_t n_site_cand = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && s[j].key == s[i].key; j++) {}
        if (j - i < ORD_MIN_SITE) continue;
        size_t nd0 = nd;
        for (size_t a = i; a < j; a++)
            for (size_t b = a + 1; b < j && b <= a + ORD_PAIR_WINDOW && nd < cap; b++) {
                d1[nd] = s[a].ord; /* where the pair starts, for the halves below */
                d[nd++] = s[b].ord - s[a].ord;
            }
        memcpy(d2, d + nd0, (nd - nd0) * sizeof *d2);
        qsort(d2, nd - nd0, sizeof *d2, cmp_u64);
        uint64_t v[ORD_SITE_CANDIDATES];
        size_t nv = top_values(d2, nd - nd0, ORD_SITE_CANDIDATES, v);
        /* keep the candidates of the sites with the most records (the loop's, rather than start-up's) */
        const size_t max_site_cand = ORD_CANDIDATES - ORD_GLOBAL_CANDIDATES;
        for (size_t k = 0; k < nv; k++) {
            if (n_site_cand == max_site_cand && site_cand[max_site_cand - 1].n_records >= j - i) break;
            size_t at = n_site_cand < max_site_cand ? n_site_cand++ : max_site_cand - 1;
            for (; at > 0 && site_cand[at - 1].n_records < j - i; at--) site_cand[at] = site_cand[at - 1];
            site_cand[at] = (site_cand_t){v[k], j - i};
        }
    }
    /* halves by pairs, not by calls or records: start-up makes many calls and records but few repeating pairs */
    if (nd) {
        memcpy(d2, d1, nd * sizeof *d2);
        qsort(d2, nd, sizeof *d2, cmp_u64);
        uint64_t mid = d2[nd / 2];
        for (size_t k = 0; k < nd; k++) {
            if (d1[k] < mid) d1[nd1++] = d[k]; /* nd1 <= k: overwrites only positions already read */
            else d2[nd2++] = d[k];
        }
    }
    qsort(d, nd, sizeof *d, cmp_u64);
    qsort(d1, nd1, sizeof *d1, cmp_u64);
    qsort(d2, nd2, sizeof *d2, cmp_u64);
    size_t nc = top_values(d, nd, ORD_GLOBAL_CANDIDATES, cand);
    for (size_t k = 0; k < n_site_cand; k++) {
        bool dup = false;
        for (size_t q = 0; q < nc && !dup; q++) dup = cand[q] == site_cand[k].value;
        if (!dup) cand[nc++] = site_cand[k].value;
    }
    double lb = log((double)(bonferroni ? bonferroni : 1) * (double)(nc ? nc : 1));
    ord_best_t best = {0, 0, 0, 0};
    double max_lock = 0;
    ord_best_t sig[ORD_CANDIDATES];
    size_t n_sig = 0;
    for (size_t c = 0; c < nc; c++) {
        uint64_t P = cand[c];
        double lp = ord_test(d, nd, P) + lb;
        if (lp > ORD_MAX_LOG_P) continue;
        if (ord_test(d1, nd1, P) + lb > ORD_HALF_LOG_P || ord_test(d2, nd2, P) + lb > ORD_HALF_LOG_P) continue;
        double site_lock = 0, lock = ord_lock(s, n, P, locked, &site_lock);
        sig[n_sig++] = (ord_best_t){lp, lock, site_lock, P};
        /* the step locks (nearly) every call site; a loop inside the step (layers) locks only its own */
        if (lock >= ORD_MIN_LOCKED && site_lock >= ORD_MIN_SITE_LOCK && lock > max_lock) max_lock = lock;
    }
    /* among those locking about as well as the best, the most significant: a multiple of the step scores fewer
     * hits (its odd multiples miss) */
    for (size_t c = 0; c < n_sig; c++)
        if (max_lock > 0 && sig[c].lock >= max_lock - ORD_LOCK_TIE && sig[c].site_lock >= ORD_MIN_SITE_LOCK &&
            sig[c].log_p < best.log_p)
            best = sig[c];
    /* a loop inside the step locks as many records but fewer call sites than the step: a candidate that is not a
     * multiple of the winner and locks clearly more sites replaces it (the step is not a multiple of its layers) */
    for (int round = 0; round < 4 && best.P; round++) {
        ord_best_t alt = best;
        for (size_t c = 0; c < n_sig; c++)
            if (sig[c].lock >= ORD_MIN_LOCKED && sig[c].site_lock >= alt.site_lock + ORD_SITE_MORE &&
                !ord_multiple(sig[c].P, best.P) && sig[c].P != best.P)
                alt = sig[c];
        if (alt.P == best.P) break;
        best = alt;
    }
    /* unsure: a significant divisor of the winner may be the real step (the winner then a cycle of steps) */
    for (size_t c = 0; c < n_sig && best.P; c++)
        if (ord_multiple(best.P, sig[c].P)) best = (ord_best_t){0, 0, 0, 0};
    *res = best;
    rc = 0;
out:
    free(cand);
    free(locked);
    free(d2);
    free(d1);
    free(d);
    free(s);
    return rc;
}

/* Ordinals to times: each of the sorted ordinals bo[0..nb) linear between the thread's records g[0..n) (sorted by
 * ordinal, distinct, times non-decreasing) bracketing it; those outside the records are dropped. Writes the strictly
 * increasing times to bt; returns their count. */
static size_t ord_to_times(const oev_t *g, size_t n, const uint64_t *bo, size_t nb, int64_t *bt) {
    size_t nt = 0;
    for (size_t k = 0, i = 0; k < nb; k++) {
        while (i + 1 < n && g[i + 1].ord <= bo[k]) i++;
        if (i + 1 >= n || g[i].ord > bo[k]) continue;
        double f = (double)(bo[k] - g[i].ord) / (double)(g[i + 1].ord - g[i].ord);
        bt[nt++] = g[i].t_ns + (int64_t)llround(f * (double)(g[i + 1].t_ns - g[i].t_ns));
    }
    return uniq_i64(bt, nt);
}

/* Steps of period P on the thread's records g[0..n): boundaries every P calls at the quietest phase of the
 * locked records (re-placed every ORD_WINDOW_STEPS steps), mapped to times by interpolating the thread's
 * (ordinal, time) pairs. Fills c (c->conf = 0 when the steps fail the checks). */
static int ord_cut(const oev_t *g, size_t n, const ord_best_t *b, size_t min_repeats, cand_t *c) {
    uint64_t P = b->P;
    int rc = -ENOMEM;
    oev_t *s = malloc(n * sizeof *s);
    bool *locked = malloc(n * sizeof *locked);
    uint64_t *lo_ord = NULL, *ph = NULL, *bo = NULL;
    int64_t *bt = NULL;
    if (!s || !locked) goto out;
    memcpy(s, g, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_oev_key);
    ord_lock(s, n, P, locked, NULL);
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) nl += locked[i];
    lo_ord = malloc((nl ? nl : 1) * sizeof *lo_ord);
    ph = malloc((nl ? nl : 1) * sizeof *ph);
    if (!lo_ord || !ph) goto out;
    nl = 0;
    for (size_t i = 0; i < n; i++)
        if (locked[i]) lo_ord[nl++] = s[i].ord;
    qsort(lo_ord, nl, sizeof *lo_ord, cmp_u64);
    rc = 0;
    if (nl < 2) goto out;
    uint64_t first = lo_ord[0], last = lo_ord[nl - 1], span = last - first;
    /* at least 2 x min_repeats steps; at most 2 per locked record, else the coverage check below fails anyway
     * (this also bounds the work on hostile ordinals far apart) */
    if (span / P < 2 * min_repeats || span / P > 2 * (uint64_t)nl + 2) goto out;
    size_t max_b = (size_t)(span / P) + 2 * (span / P / ORD_WINDOW_STEPS + 2);
    bo = malloc(max_b * sizeof *bo);
    if (!bo) { rc = -ENOMEM; goto out; }
    size_t nb = 0, covered = 0;
    uint64_t win = ORD_WINDOW_STEPS * P, phase = 0;
    bool have_phase = false;
    for (size_t i = 0; i < nl;) {
        uint64_t w0 = first + ((lo_ord[i] - first) / win) * win, w1 = w0 + win < w0 ? UINT64_MAX : w0 + win;
        size_t j = i, m = 0;
        for (; j < nl && (lo_ord[j] < w1 || j == i); j++) ph[m++] = lo_ord[j] % P;
        if (m >= 4 || !have_phase) {
            qsort(ph, m, sizeof *ph, cmp_u64);
            phase = quiet_phase(ph, m, P);
            have_phase = true;
        }
        uint64_t hi = w1 < last ? w1 : last;
        uint64_t x = w0 + (phase + P - w0 % P) % P; /* first boundary >= w0 at the phase */
        for (; x < hi && x >= w0 && nb < max_b; x += P) { /* (x >= w0: stops at a wrap-around) */
            if (x < first) continue;
            if (nb && x - bo[nb - 1] < P / 2) continue;                  /* the phase moved back: one step */
            while (nb && x - bo[nb - 1] > P + P / 2 && nb < max_b) bo[nb] = bo[nb - 1] + P, nb++; /* moved on */
            bo[nb++] = x;
        }
        i = j;
    }
    /* coverage: steps (between consecutive boundaries) holding a locked record */
    for (size_t k = 0, i = 0; k + 1 < nb; k++) {
        while (i < nl && lo_ord[i] <= bo[k]) i++;
        covered += i < nl && lo_ord[i] <= bo[k + 1];
    }
    if (nb < 2 * min_repeats || (double)covered < ORD_MIN_COVER * (double)(nb - 1)) goto out;
    bt = malloc(nb * sizeof *bt);
    if (!bt) { rc = -ENOMEM; goto out; }
    size_t nt = ord_to_times(g, n, bo, nb, bt);
    if (nt < 2 * min_repeats) goto out;
    c->period_ns = median_gap_ns(bt, nt);
    if (!(c->period_ns > 0)) goto out;
    c->bounds = bt;
    c->n_bounds = nt;
    bt = NULL;
    c->period_allocs = (double)P;
    c->exact = true;
    c->conf = (1 - exp(b->log_p)) * (0.5 + 0.5 * b->lock);
out:
    free(bt);
    free(bo);
    free(ph);
    free(lo_ord);
    free(locked);
    free(s);
    return rc;
}

/* Clean one thread's records e[i..j) (sorted by ordinal) in place: drop repeated ordinals, make times
 * non-decreasing. Returns the end of the kept records, or SIZE_MAX when more than ORD_MAX_BAD of them were damaged
 * (hostile or broken input: the thread has no say). */
static size_t ord_clean(oev_t *e, size_t i, size_t j) {
    size_t w = i, bad = 0;
    for (size_t k = i; k < j; k++) {
        if (w > i && e[k].ord == e[w - 1].ord) { bad++; continue; }
        if (w > i && e[k].t_ns < e[w - 1].t_ns) { bad++; e[k].t_ns = e[w - 1].t_ns; }
        e[w++] = e[k];
    }
    return (double)bad > ORD_MAX_BAD * (double)(j - i) ? SIZE_MAX : w;
}

/* The records carrying ordinals, sorted by thread then ordinal, into *out (malloc'd); returns their count, 0 when
 * fewer than ORD_MIN_RECORDS, SIZE_MAX without memory. */
static size_t ord_events(const pl_period_input_t *in, oev_t **out) {
    size_t m = 0;
    for (size_t i = 0; i < in->n_ev; i++) m += in->ev[i].ordinal != PL_TRACE_NA;
    if (m < ORD_MIN_RECORDS) return 0;
    oev_t *e = malloc(m * sizeof *e);
    if (!e) return SIZE_MAX;
    m = 0;
    for (size_t i = 0; i < in->n_ev; i++)
        if (in->ev[i].ordinal != PL_TRACE_NA)
            e[m++] = (oev_t){in->ev[i].ordinal, in->ev[i].t_ns, in->ev[i].key, in->ev[i].tid};
    qsort(e, m, sizeof *e, cmp_oev_tid);
    *out = e;
    return m;
}

/* The ordinal detector over every thread with enough records carrying ordinals; the most significant thread wins.
 * Hostile or damaged input (ordinals going backwards in time, repeated, NA) costs the thread its say, never a
 * wrong period: a thread with more than 1% of such records is skipped. */
static int ord_detect(const pl_period_input_t *in, size_t min_repeats, cand_t *c) {
    oev_t *e = NULL;
    size_t m = ord_events(in, &e);
    if (m == SIZE_MAX) return -ENOMEM;
    if (m == 0) return 0;
    size_t n_threads = 0;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && e[j].tid == e[i].tid; j++) {}
        n_threads += j - i >= ORD_MIN_RECORDS;
    }
    int rc = 0;
    ord_best_t best = {0, 0, 0, 0};
    size_t best_at = 0, best_n = 0;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && e[j].tid == e[i].tid; j++) {}
        if (j - i < ORD_MIN_RECORDS) continue;
        size_t w = ord_clean(e, i, j); /* in place: each thread's records stay at e[i..) */
        if (w == SIZE_MAX || w - i < ORD_MIN_RECORDS) continue;
        ord_best_t r;
        rc = ord_thread_period(e + i, w - i, n_threads, &r);
        if (rc) break;
        if (r.P && r.log_p < best.log_p) { best = r; best_at = i; best_n = w - i; }
    }
    if (!rc && best.P) rc = ord_cut(e + best_at, best_n, &best, min_repeats, c);
    free(e);
    return rc;
}

/* ---- the time detector on the call clock (trace 1.3 ordinals, one thread allocating) ---- */

/* A single-threaded sampled loop (a pure-Python loop) has no same-site record pairs a step apart for the ordinal
 * detector (one list-growth site recorded ~45 times a step), so only the time detector sees it; but on the wall
 * clock a step's length is whatever the scheduler made it: a preempted step is stretched, a loaded stretch of the run
 * is slower, and time slices of a preempted process are periodic themselves. A grid of one period in time then cuts
 * wrong steps (docs/period.md, "The wrong periods on pure-Python loops"). The call ordinal advances only when the
 * program runs: the same autocorrelation on that clock finds the step in calls, and its grid, mapped to times through
 * the thread's records, follows every stretch. Alone it is not trusted either (a loop whose call count alternates
 * repeats exactly every two steps in calls), so pl_period_detect takes a period both clocks see. */
#define CALLS_MIN_SHARE 0.9 /* the thread holds at least this share of the records with ordinals */
#define CALL_NS 1000000     /* one call is 1 ms on the detector's clock (its bins must be at least 1 us wide) */
#define CALLS_AGREE 0.1     /* the call clock's median step and the wall clock's period agree within 10 % */

/* Fills c from the time detector run on the call clock when one thread holds the records (*ran = true), else
 * leaves c and *ran alone. Returns 0 or -ENOMEM. */
static int calls_detect(const pl_period_input_t *in, size_t min_repeats, cand_t *c, bool *ran) {
    oev_t *e = NULL;
    size_t m = ord_events(in, &e);
    if (m == SIZE_MAX) return -ENOMEM;
    if (m == 0) return 0;
    size_t at = 0, n = 0; /* the thread with the most records */
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && e[j].tid == e[i].tid; j++) {}
        if (j - i > n) { at = i; n = j - i; }
    }
    int rc = 0;
    tev_t *x = NULL;
    uint64_t *bo = NULL;
    cand_t t = {0};
    if ((double)n < CALLS_MIN_SHARE * (double)m) goto out;
    size_t w = ord_clean(e, at, at + n);
    if (w == SIZE_MAX || w - at < ORD_MIN_RECORDS) goto out;
    const oev_t *g = e + at;
    n = w - at;
    uint64_t o0 = g[0].ord;
    if (g[n - 1].ord - o0 > (uint64_t)(INT64_MAX / CALL_NS / 2)) goto out; /* hostile ordinals: no say */
    rc = -ENOMEM;
    x = malloc(n * sizeof *x);
    if (!x) goto out;
    for (size_t i = 0; i < n; i++) x[i] = (tev_t){(int64_t)(g[i].ord - o0) * CALL_NS, g[i].key, i};
    rc = time_detect(x, n, min_repeats, true, &t);
    if (rc) goto out;
    *ran = true;
    if (t.conf <= 0 || t.n_bounds < 2) goto out;
    rc = -ENOMEM;
    bo = malloc(t.n_bounds * sizeof *bo);
    int64_t *bt = malloc(t.n_bounds * sizeof *bt);
    if (!bo || !bt) { free(bt); goto out; }
    rc = 0;
    for (size_t k = 0; k < t.n_bounds; k++) bo[k] = o0 + (uint64_t)(t.bounds[k] / CALL_NS);
    size_t nt = ord_to_times(g, n, bo, t.n_bounds, bt);
    double period_ns = nt >= 2 ? median_gap_ns(bt, nt) : 0;
    if (nt < 2 * min_repeats || !(period_ns > 0)) { free(bt); goto out; }
    c->conf = t.conf;
    c->period_ns = period_ns;
    c->period_allocs = t.period_ns / CALL_NS; /* the thread's calls per step */
    c->exact = true;
    c->bounds = bt;
    c->n_bounds = nt;
out:
    free(t.bounds);
    free(bo);
    free(x);
    free(e);
    return rc;
}

/* ---- public ---- */

/* Drop, in place and in order, the events whose call site occurs fewer than min_count times: such a site cannot be
 * part of every step of a loop that ran min_count steps, and one-off allocations (another thread, a lazy init)
 * shift the sequence and break its self-match. Returns the new count, or SIZE_MAX without memory. */
static size_t drop_rare(tev_t *e, size_t m, size_t min_count) {
    uint64_t *k = malloc((m ? m : 1) * sizeof *k);
    if (!k) return SIZE_MAX;
    for (size_t i = 0; i < m; i++) k[i] = e[i].key;
    qsort(k, m, sizeof *k, cmp_u64);
    /* keep only the call sites seen often enough, once each (sorted): a lookup is then one binary search */
    size_t nk = 0;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && k[j] == k[i]; j++) {}
        if (j - i >= min_count) k[nk++] = k[i];
    }
    size_t w = 0;
    for (size_t i = 0; i < m; i++)
        if (nk && bsearch(&e[i].key, k, nk, sizeof *k, cmp_u64)) e[w++] = e[i];
    free(k);
    return w;
}

static tev_t *sorted(const pl_period_input_t *in, bool exact_only, size_t *n_out) {
    tev_t *e = malloc((in->n_ev ? in->n_ev : 1) * sizeof *e);
    if (!e) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < in->n_ev; i++)
        if (!exact_only || in->ev[i].exact) e[n++] = (tev_t){in->ev[i].t_ns, in->ev[i].key, i};
    qsort(e, n, sizeof *e, cmp_tev); /* records of several threads arrive slightly out of order */
    *n_out = n;
    return e;
}

/* The heap records' exact call counters give the true rate (the sampled records only a fraction of it), taken
 * between the first and last heap records inside the detected steps: start-up is not a step. */
static void exact_rate(const pl_period_input_t *in, const cand_t *pick, pl_period_t *out) {
    int64_t lo_t = 0, hi_t = 0;
    uint64_t lo_n = 0, hi_n = 0;
    bool have_lo = false;
    for (size_t i = 0; i < in->n_heap; i++) {
        int64_t t = in->heap_t_ns[i];
        if (t < pick->bounds[0] || t > pick->bounds[pick->n_bounds - 1]) continue;
        if (!have_lo || t < lo_t) { lo_t = t; lo_n = in->heap_n_alloc[i]; have_lo = true; }
        if (t >= hi_t) { hi_t = t; hi_n = in->heap_n_alloc[i]; }
    }
    if (have_lo && hi_t - lo_t > 2 * pick->period_ns && hi_n > lo_n) {
        out->period_allocs = (double)(hi_n - lo_n) * pick->period_ns / (double)(hi_t - lo_t);
        out->allocs_exact = true;
    }
}

int pl_period_detect(const pl_period_input_t *in, const pl_period_opts_t *opts, pl_period_t *out) {
    if (!in || !out) return -EINVAL;
    pl_period_opts_t o = {.min_confidence = 0.5, .min_repeats = 4};
    if (opts) {
        if (opts->min_confidence > 0) o.min_confidence = opts->min_confidence;
        if (opts->min_repeats >= 2) o.min_repeats = opts->min_repeats;
    }
    memset(out, 0, sizeof *out);
    size_t n_exact = 0;
    for (size_t i = 0; i < in->n_ev; i++) n_exact += in->ev[i].exact;
    bool exact_only = n_exact >= SEQ_MIN_EXACT;
    cand_t cs = {0}, ct = {0}, ca = {0}, co = {0}, cc = {0};
    size_t ms = 0, ma = 0;
    tev_t *es = sorted(in, exact_only, &ms), *ea = exact_only ? sorted(in, false, &ma) : NULL;
    int rc = -ENOMEM;
    if (!es || (exact_only && !ea)) goto out;
    if (!exact_only) {
        ea = sorted(in, false, &ma); /* the time detector keeps every event; the sequence one drops one-offs */
        if (!ea) goto out;
    }
    ms = drop_rare(es, ms, o.min_repeats);
    if (ms == SIZE_MAX) goto out;
    rc = seq_detect(es, ms, o.min_repeats, &cs);
    /* the ordinal detector, when the sequence one is not confident: exact call counts beat timing statistics */
    if (!rc && cs.conf < o.min_confidence) rc = ord_detect(in, o.min_repeats, &co);
    bool ord_wins = co.conf >= o.min_confidence && co.n_bounds >= 2;
    /* the time detector; when one thread allocates, also on its call clock, and the two must agree (below) */
    bool by_calls = false;
    if (!rc && !ord_wins) rc = time_detect(ea, ma, o.min_repeats, false, &ct);
    if (!rc && !ord_wins) rc = calls_detect(in, o.min_repeats, &cc, &by_calls);
    if (!rc && by_calls) {
        /* Both clocks must see the same step: a period on the wall clock alone is the scheduler's (time slices) or
         * cut on a grid that preemption stretched out of phase; one on the call clock alone was not confirmed in
         * time (a multiple of a step too sparse to see). Agreed, the call clock's steps are taken: they follow every
         * stretch. */
        bool agree = ct.conf > 0 && cc.conf > 0 && fabs(cc.period_ns - ct.period_ns) <= CALLS_AGREE * ct.period_ns;
        double conf = fmin(ct.conf, cc.conf);
        free(ct.bounds);
        ct = agree ? cc : (cand_t){0};
        ct.conf = agree ? conf : 0;
        if (agree) cc.bounds = NULL; /* moved */
    }
    /* the anchor detector: not needed when the sequence wins */
    if (!rc && !ord_wins && cs.conf < o.min_confidence) rc = anchor_detect(ea, ma, &ca);
    bool anchor_agrees = ct.conf > 0 && fabs(ca.period_ns - ct.period_ns) <= CALLS_AGREE * ct.period_ns;
    if (!rc && by_calls && ca.conf > 0 && !anchor_agrees) {
        /* the same for the anchor detector's wall-clock steps: with one thread allocating, a period the call clock
         * does not confirm is not trusted (measured: a 2.1 ms "period" of a list-growth site in a 46 ms step) */
        free(ca.bounds);
        ca = (cand_t){0};
    }
    if (rc) goto out;
    cs.exact = exact_only;
    cand_t *pick = cs.conf >= o.min_confidence                                        ? &cs
                   : ord_wins                                                         ? &co
                   : cs.conf >= ct.conf && cs.conf >= ca.conf                         ? &cs
                   : ca.conf > ct.conf                                                ? &ca
                                                                                      : &ct;
    out->method = pick == &cs   ? PL_PERIOD_SEQUENCE
                  : pick == &co ? PL_PERIOD_ORDINAL
                  : pick == &ca ? PL_PERIOD_ANCHOR
                                : PL_PERIOD_TIME;
    out->confidence = pick->conf;
    out->period_ns = pick->period_ns;
    out->period_allocs = pick->period_allocs;
    out->allocs_exact = pick->exact;
    if (pick != &cs && pick != &co && !(pick == &ct && by_calls) && pick->n_bounds >= 2) exact_rate(in, pick, out);
    if (pick->conf > 0 && pick->conf >= o.min_confidence && pick->n_bounds >= 2) {
        out->found = true;
        out->bounds_ns = pick->bounds;
        out->n_bounds = pick->n_bounds;
        pick->bounds = NULL;
    } else {
        out->method = pick->conf > 0 ? out->method : PL_PERIOD_NONE;
    }
    if (!out->found && out->method == PL_PERIOD_NONE) {
        out->period_ns = out->period_allocs = 0;
        out->allocs_exact = false;
    }
out:
    free(cs.bounds);
    free(ct.bounds);
    free(ca.bounds);
    free(co.bounds);
    free(cc.bounds);
    free(ea);
    free(es);
    return rc;
}

void pl_period_free(pl_period_t *p) {
    if (!p) return;
    free(p->bounds_ns);
    memset(p, 0, sizeof *p);
}

const char *pl_period_method_name(pl_period_method_t m) {
    switch (m) {
    case PL_PERIOD_SEQUENCE: return "sequence";
    case PL_PERIOD_TIME: return "time";
    case PL_PERIOD_ANCHOR: return "anchor";
    case PL_PERIOD_ORDINAL: return "ordinal";
    default: return "none";
    }
}
