/* reports/period: the training loop's period from the allocation stream (method: docs/period.md).
 *
 * Input: a trace's allocation records as (time, call-site key) events. Device blocks are exact (one record per
 * block handed out), host allocations are Poisson-by-bytes samples (one record per sample_bytes allocated, on
 * average): an exact stream repeats call site for call site every step, a sampled one only in its rate over time.
 * Hence two detectors, tried in order: the sequence detector (lag of best call-site self-match, steps cut at an
 * anchor call site) and the time detector (autocorrelation of allocation counts per time bin, steps cut on a grid).
 * Invariants: work is bounded (SEQ_WINDOW events x SEQ_MAX_LAG lags; TIME_BINS bins x TIME_SCALES scales), whatever
 * the trace length; results are deterministic; bounds are strictly increasing.
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
    cand_t cs = {0}, ct = {0};
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
    if (rc) goto out;
    cs.exact = exact_only;
    cand_t *pick = cs.conf >= o.min_confidence || cs.conf >= ct.conf ? &cs : &ct;
    out->method = pick == &cs ? PL_PERIOD_SEQUENCE : PL_PERIOD_TIME;
    out->confidence = pick->conf;
    out->period_ns = pick->period_ns;
    out->period_allocs = pick->period_allocs;
    out->allocs_exact = pick->exact;
    if (pick == &ct && in->heap_t1_ns - in->heap_t0_ns > 2 * ct.period_ns && in->heap_n_alloc1 > in->heap_n_alloc0) {
        /* the heap records' exact call counters give the true rate; the sampled records only a fraction of it */
        out->period_allocs = (double)(in->heap_n_alloc1 - in->heap_n_alloc0) * ct.period_ns /
                             (double)(in->heap_t1_ns - in->heap_t0_ns);
        out->allocs_exact = true;
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
    default: return "none";
    }
}
