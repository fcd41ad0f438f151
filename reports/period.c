/* reports/period: the training loop's period from the allocation stream (method: docs/period.md).
 *
 * Input: a trace's allocation records as (time, call-site key) events. Device blocks are exact (one record per
 * block handed out), host allocations are Poisson-by-bytes samples (one record per sample_bytes allocated, on
 * average): an exact stream repeats call site for call site every step, a sampled one only in its rate over time.
 * Hence three detectors: the sequence detector (lag of best call-site self-match, steps cut at an anchor call site),
 * the time detector (autocorrelation of allocation counts per time bin, steps cut on a grid) and the anchor detector
 * (one sampled call site at a sharp phase of the step, tested for periodicity, steps cut at its bursts).
 * Invariants: work is bounded (SEQ_WINDOW events x SEQ_MAX_LAG lags; TIME_BINS bins x TIME_SCALES scales; ANCHOR_SCAN
 * passes over at most all events), whatever the trace length; results are deterministic; bounds are strictly
 * increasing.
 */
#include "period.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int push_event(pl_period_input_t *in, const pl_period_event_t *e) {
    if (in->n_ev >= PL_PERIOD_MAX_EVENTS) {
        in->truncated = true;
        return 0;
    }
    if (in->n_ev == in->cap_ev) {
        size_t nc = in->cap_ev ? in->cap_ev * 2 : 1024;
        pl_period_event_t *ne = realloc(in->ev, nc * sizeof *ne);
        if (!ne) return -ENOMEM;
        in->ev = ne;
        in->cap_ev = nc;
    }
    in->ev[in->n_ev++] = *e;
    return 0;
}

int pl_period_add(pl_period_input_t *in, const pl_trace_record_t *rec) {
    if (!in || !rec) return -EINVAL;
    switch (rec->type) {
    case PL_REC_HOST_ALLOC: {
        const pl_rec_host_alloc_t *q = &rec->u.host_alloc;
        /* recorded for sure when every call is (sample_bytes 0) or nearly so (p = 1 - exp(-s/sample) > 0.98) */
        bool exact = in->have_sample_bytes &&
                     (in->sample_bytes == 0 || q->size >= HOST_EXACT_FACTOR * in->sample_bytes);
        pl_period_event_t e = {rec->t_ns, make_key(PL_REC_HOST_ALLOC, q->stack_id, q->size), q->size, exact};
        return push_event(in, &e);
    }
    case PL_REC_DEVICE_ALLOC: {
        const pl_rec_device_t *q = &rec->u.device;
        pl_period_event_t e = {rec->t_ns, make_key(PL_REC_DEVICE_ALLOC, q->stack_id, q->size), q->size, true};
        return push_event(in, &e);
    }
    case PL_REC_PROCESS_START:
        in->sample_bytes = rec->u.process.sample_bytes;
        in->have_sample_bytes = true;
        return 0;
    case PL_REC_STEP:
        if (in->n_steps == in->cap_steps) {
            size_t nc = in->cap_steps ? in->cap_steps * 2 : 256;
            int64_t *ns = realloc(in->step_ns, nc * sizeof *ns);
            if (!ns) return -ENOMEM;
            in->step_ns = ns;
            in->cap_steps = nc;
        }
        in->step_ns[in->n_steps++] = rec->t_ns;
        return 0;
    case PL_REC_HEAP:
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
            size_t nc = in->cap_heap ? in->cap_heap * 2 : 256;
            int64_t *nt = realloc(in->heap_t_ns, nc * sizeof *nt);
            if (!nt) return -ENOMEM;
            in->heap_t_ns = nt;
            uint64_t *nn = realloc(in->heap_n_alloc, nc * sizeof *nn);
            if (!nn) return -ENOMEM;
            in->heap_n_alloc = nn;
            in->cap_heap = nc;
        }
        in->heap_t_ns[in->n_heap] = rec->t_ns;
        in->heap_n_alloc[in->n_heap++] = rec->u.heap.n_alloc;
        return 0;
    default: return 0;
    }
}

int pl_period_scan(pl_trace_reader_t *rd, pl_period_input_t *in) {
    if (!rd || !in) return -EINVAL;
    pl_trace_record_t rec;
    while (pl_trace_next(rd, &rec) > 0) {
        int rc = pl_period_add(in, &rec);
        if (rc) return rc;
    }
    return 0;
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

static int time_detect(const tev_t *e, size_t m, size_t min_repeats, cand_t *c) {
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

static int anchor_detect(const tev_t *e, size_t m, cand_t *c) {
    if (m < ANCHOR_MIN_OCC) return 0;
    tev_t *k = malloc(m * sizeof *k);
    int64_t *t = malloc(m * sizeof *t), *u = malloc(m * sizeof *u);
    akey_t top[ANCHOR_MAX_KEYS];
    size_t n_top = 0;
    int rc = -ENOMEM;
    int64_t *b = NULL;
    if (!k || !t || !u) goto out;
    rc = 0;
    memcpy(k, e, m * sizeof *k);
    qsort(k, m, sizeof *k, cmp_key_ix); /* each call site's occurrences side by side */
    for (size_t i = 0, j; i < m; i = j) { /* the most frequent call sites */
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
    /* each call site's evidence: how many of its gaps between bursts are about one period, against chance */
    size_t best = SIZE_MAX;
    for (size_t a = 0; a < n_top; a++) {
        size_t n = key_times(k, &top[a], t);
        double P0 = step_gap(t, n);
        top[a].period = 0;
        top[a].log_p = 0;
        if (P0 <= 0) continue;
        /* the period near the call site's typical gap that makes it most periodic (the gap median is biased by
         * missed steps and repeats inside a step): a scan of ANCHOR_SCAN candidates, paid for in the p-value */
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
            if (lp < top[a].log_p) {
                top[a].log_p = lp;
                top[a].period = P;
                top[a].reg = (double)reg / (double)(nb - 1);
            }
        }
        if (best == SIZE_MAX || top[a].log_p < top[best].log_p) best = a; /* the strongest evidence */
    }
    if (best == SIZE_MAX || top[best].reg < ANCHOR_MIN_REGULAR) goto out;
    /* Bonferroni over the call sites and periods tried: the chance that the best looks this periodic at random */
    double log_bonf = top[best].log_p + log((double)n_top * ANCHOR_SCAN);
    if (log_bonf > log(ANCHOR_MAX_P)) goto out;
    double P = top[best].period;
    /* call sites at the anchor's phase join it (more of the steps are seen): their bursts must sit within
     * ANCHOR_ALIGN periods of an anchor burst whenever one is near */
    size_t na = key_times(k, &top[best], u);
    size_t nab = to_bursts(u, na, P);
    memcpy(t, u, nab * sizeof *t); /* t: the union of joined call sites' times; u[0..nab): anchor bursts */
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
    qsort(t, n_all, sizeof *t, cmp_i64);
    size_t ns = to_bursts(t, n_all, P);
    if (ns < ANCHOR_MIN_STEPS) goto out;
    /* step ends: every burst; a gap of g local periods (g < ANCHOR_MAX_FILL) holds floor(g + bias) steps */
    size_t cap = ns * (ANCHOR_MAX_FILL + 1) + 1, nb = 0;
    b = malloc(cap * sizeof *b);
    double *recent = malloc(ANCHOR_LOCAL * sizeof *recent), loc[ANCHOR_LOCAL];
    if (!b || !recent) { free(recent); rc = -ENOMEM; goto out; }
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
    nb = uniq_i64(b, nb);
    double cover = (double)ns / (double)nb;
    if (cover < ANCHOR_MIN_COVER || nb < 2) goto out;
    /* as for the other detectors: fewer recorded allocations per step are too little evidence to cut steps */
    if ((double)m * median_gap_ns(b, nb) / (double)(e[m - 1].t_ns - e[0].t_ns + 1) < MIN_ALLOCS_PER_STEP) goto out;
    /* The steps cut must organise the rest of the stream: in a loop every call site sits at its own phase of the
     * step, so the phases of the other frequent call sites' occurrences are concentrated (resultant length of the
     * phase angles, count-weighted: ~0.5 - 0.9 on PyTorch loops cut right, ~0.05 cut at a wrong period, 0 at
     * random). A call site that happens to recur regularly while the rest of the stream does not fails here. */
    double zr = 0, zi = 0, r_sum = 0;
    size_t w_sum = 0;
    for (size_t a = 0; a < n_top; a++) {
        if (a == best) continue;
        zr = zi = 0;
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
    double phase_r = w_sum ? r_sum / (double)w_sum : 0;
    if (phase_r < ANCHOR_MIN_PHASE) goto out;
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
    cand_t cs = {0}, ct = {0}, ca = {0};
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
    if (!rc) rc = time_detect(ea, ma, o.min_repeats, &ct);
    if (!rc && cs.conf < o.min_confidence) rc = anchor_detect(ea, ma, &ca); /* not needed when the sequence wins */
    if (rc) goto out;
    cs.exact = exact_only;
    cand_t *pick = cs.conf >= o.min_confidence || (cs.conf >= ct.conf && cs.conf >= ca.conf) ? &cs
                   : ca.conf > ct.conf                                                        ? &ca
                                                                                              : &ct;
    out->method = pick == &cs ? PL_PERIOD_SEQUENCE : pick == &ca ? PL_PERIOD_ANCHOR : PL_PERIOD_TIME;
    out->confidence = pick->conf;
    out->period_ns = pick->period_ns;
    out->period_allocs = pick->period_allocs;
    out->allocs_exact = pick->exact;
    if (pick != &cs && pick->n_bounds >= 2) {
        /* the heap records' exact call counters give the true rate (the sampled records only a fraction of it),
         * taken between the first and last heap records inside the detected steps: start-up is not a step */
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
    default: return "none";
    }
}
