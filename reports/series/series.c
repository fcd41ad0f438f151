/* reports/series: samples -> per-step baseline series (see series.h for the model and its invariants).
 *
 * The baseline is the per-step minimum: a leak raises every sample of a step, a spike raises only some, so the
 * minimum keeps the leak and drops the spike. Peaks are kept beside it so impact (how close to OOM the worst moment
 * came) is still reported.
 */
#include "series.h"
#include "trend.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t key; /* step or bucket */
    size_t idx;  /* original position: keeps the sort stable */
} order_t;

static int order_cmp(const void *a, const void *b) {
    const order_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

/* Median nanoseconds per step from consecutive points that both carry times; 0 when there are none. */
static double median_step_ns(const pl_point_t *p, size_t n) {
    if (n < 2) return 0;
    int64_t *d = malloc((n - 1) * sizeof *d);
    if (!d) return 0;
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (p[i].t_ns < 0 || p[i - 1].t_ns < 0 || p[i].t_ns <= p[i - 1].t_ns) continue;
        int64_t ds = p[i].step - p[i - 1].step;
        if (ds <= 0) continue;
        d[m++] = (p[i].t_ns - p[i - 1].t_ns) / ds;
    }
    double r = 0;
    if (m) {
        qsort(d, m, sizeof *d, i64_cmp);
        r = m % 2 ? (double)d[m / 2] : 0.5 * ((double)d[m / 2 - 1] + (double)d[m / 2]);
    }
    free(d);
    return r;
}

/* The samples ord[0..m) (sorted by key) folded into one point per key: its lowest value (base), highest (peak),
 * earliest time and sample count; s's points, and its peak. 0 or -ENOMEM. */
static int fold_points(const pl_sample_t *samples, const order_t *ord, size_t m, pl_series_t *s) {
    size_t n_points = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || ord[i].key != ord[i - 1].key) n_points++;
    pl_point_t *pts = n_points ? calloc(n_points, sizeof *pts) : NULL;
    if (n_points && !pts) return -ENOMEM;
    size_t k = (size_t)-1;
    for (size_t i = 0; i < m; i++) {
        const pl_sample_t *x = &samples[ord[i].idx];
        if (i == 0 || ord[i].key != ord[i - 1].key) {
            k++;
            pts[k].step = ord[i].key;
            pts[k].t_ns = x->t_ns >= 0 ? x->t_ns : -1;
            pts[k].base = pts[k].peak = x->value;
            pts[k].n_samples = 0;
        }
        pl_point_t *p = &pts[k];
        if (x->value < p->base) p->base = x->value;
        if (x->value > p->peak) p->peak = x->value;
        if (x->t_ns >= 0 && (p->t_ns < 0 || x->t_ns < p->t_ns)) p->t_ns = x->t_ns;
        if (p->n_samples < UINT32_MAX) p->n_samples++;
        if (s->peak_step < 0 || x->value > s->peak) {
            s->peak = x->value;
            s->peak_step = p->step;
        }
    }
    s->points = pts;
    s->n_points = n_points;
    return 0;
}

int pl_series_build(const pl_sample_t *samples, size_t n, const pl_series_opts_t *opts, pl_series_t *out) {
    if (!out || (n && !samples)) return -EINVAL;
    pl_series_t s = {0};
    s.peak_step = -1;
    if (n == 0) {
        *out = s;
        return 0;
    }
    if (n > SIZE_MAX / sizeof(order_t)) return -ENOMEM;
    int64_t bucket_ns = opts && opts->bucket_ns > 0 ? opts->bucket_ns : PL_SERIES_DEFAULT_BUCKET_NS;
    size_t max_buckets = opts && opts->max_buckets > 1 ? opts->max_buckets : PL_SERIES_DEFAULT_MAX_BUCKETS;

    bool any_step = false, any_time = false;
    int64_t t_min = INT64_MAX, t_max = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(samples[i].value)) continue;
        if (samples[i].step >= 0) any_step = true;
        if (samples[i].t_ns >= 0) {
            any_time = true;
            if (samples[i].t_ns < t_min) t_min = samples[i].t_ns;
            if (samples[i].t_ns > t_max) t_max = samples[i].t_ns;
        }
    }
    bool by_time = !any_step && any_time;
    if (by_time) {
        /* widen buckets so a long run stays within max_buckets (integer maths: no overflow for any int64 span) */
        uint64_t span = (uint64_t)t_max - (uint64_t)t_min;
        uint64_t need = span / max_buckets + 1;
        if (need > (uint64_t)bucket_ns) bucket_ns = need > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)need;
        s.by_time = true;
        s.bucket_ns = bucket_ns;
    }

    order_t *ord = malloc(n * sizeof *ord);
    if (!ord) return -ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const pl_sample_t *x = &samples[i];
        int64_t key;
        if (!isfinite(x->value)) {
            s.n_dropped++;
            continue;
        }
        if (any_step) {
            /* beyond 2^53 a step is not exact as a double, which the trend maths works in, and no run gets there:
             * a hostile or corrupt trace; the verdict's step arithmetic stays far from int64 overflow */
            if (x->step < 0 || x->step > PL_SERIES_MAX_STEP) {
                s.n_dropped++;
                continue;
            }
            key = x->step;
        } else if (by_time) {
            if (x->t_ns < 0) {
                s.n_dropped++;
                continue;
            }
            key = (x->t_ns - t_min) / bucket_ns;
        } else {
            key = (int64_t)i;
        }
        ord[m].key = key;
        ord[m].idx = i;
        m++;
    }
    bool in_order = true; /* the extraction's samples come sorted by step already: then sorting is a waste */
    for (size_t i = 1; i < m && in_order; i++) in_order = order_cmp(&ord[i - 1], &ord[i]) < 0;
    if (!in_order) qsort(ord, m, sizeof *ord, order_cmp);

    int rc = fold_points(samples, ord, m, &s);
    free(ord);
    if (rc) return rc;
    s.step_ns = by_time ? (double)bucket_ns : median_step_ns(s.points, s.n_points);
    *out = s;
    return 0;
}

int pl_series_compact(const pl_series_t *in, size_t max_points, pl_series_t *out) {
    if (!in || !out || max_points < 2) return -EINVAL;
    pl_series_t s = *in;
    size_t n = in->n_points;
    size_t bin = n <= max_points ? 1 : (n + max_points - 1) / max_points;
    size_t m = n ? (n + bin - 1) / bin : 0;
    s.points = m ? calloc(m, sizeof *s.points) : NULL;
    if (m && !s.points) return -ENOMEM;
    for (size_t j = 0; j < m; j++) {
        size_t lo = j * bin, hi = lo + bin < n ? lo + bin : n;
        pl_point_t p = in->points[lo];
        uint64_t cnt = 0;
        for (size_t i = lo; i < hi; i++) {
            const pl_point_t *q = &in->points[i];
            if (q->base < p.base) p.base = q->base;
            if (q->peak > p.peak) p.peak = q->peak;
            cnt += q->n_samples;
        }
        p.n_samples = cnt > UINT32_MAX ? UINT32_MAX : (uint32_t)cnt;
        s.points[j] = p;
    }
    s.n_points = m;
    *out = s;
    return 0;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y);
}

#define SAW_MIN_FALLS 4

/* The falls of a sawtooth: indices i (the low point after a fall) where base drops by more than `thr` from the
 * point before; a fall over consecutive points counts once, at its lowest point. Returns their number. */
static size_t saw_falls(const pl_point_t *p, size_t n, double thr, size_t *fall) {
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (p[i].base - p[i - 1].base >= -thr) continue;
        if (k && fall[k - 1] == i - 1) fall[k - 1] = i;
        else fall[k++] = i;
    }
    return k;
}

/* Do the falls come every `*period` steps, with climbs spread over the period, far out of the noise? */
static int saw_check(const pl_point_t *p, size_t n, const size_t *fall, size_t k, double *scratch, int64_t *period) {
    *period = 0;
    size_t g = 0;
    for (size_t j = 1; j < k; j++) scratch[g++] = (double)(p[fall[j]].step - p[fall[j - 1]].step);
    double per = pl_trend_median(scratch, g);
    if (per < 3) return 0;
    double tol = per / 5 > 1 ? per / 5 : 1;
    size_t agree = 0;
    for (size_t j = 1; j < k; j++)
        if (fabs((double)(p[fall[j]].step - p[fall[j - 1]].step) - per) <= tol) agree++;
    if (4 * agree < 3 * (k - 1)) return 0;
    /* climbs spread over each period: largest one-step rise / the period's climb, in the median period */
    size_t q = 0;
    for (size_t j = 1; j < k; j++) {
        size_t a = fall[j - 1], b = fall[j] - 1; /* the low after a fall .. the top before the next */
        double climb = p[b].base - p[a].base, top = 0;
        for (size_t i = a + 1; i <= b; i++)
            if (p[i].base - p[i - 1].base > top) top = p[i].base - p[i - 1].base;
        scratch[q++] = climb > 0 ? top / climb : 1;
    }
    if (pl_trend_median(scratch, q) >= 0.75) return 0;
    /* falls far out of the noise of the other step-to-step changes (robust sigma: 1.4826 MAD) */
    size_t m = 0, f = 0;
    for (size_t i = 1; i < n; i++) {
        if (f < k && fall[f] == i) {
            f++;
            continue;
        }
        scratch[m++] = p[i].base - p[i - 1].base;
    }
    if (m < 2) return 0;
    double med = pl_trend_median(scratch, m);
    for (size_t i = 0; i < m; i++) scratch[i] = fabs(scratch[i] - med);
    double sigma = 1.4826 * pl_trend_median(scratch, m);
    for (size_t j = 0; j < k; j++) scratch[j] = p[fall[j] - 1].base - p[fall[j]].base;
    if (pl_trend_median(scratch, k) < 6 * sigma) return 0;
    *period = (int64_t)llround(per);
    return 0;
}

int pl_series_sawtooth(const pl_series_t *in, pl_series_t *out, int64_t *period) {
    if (!in || !out || !period || (in->n_points && !in->points)) return -EINVAL;
    *period = 0;
    size_t n = in->n_points;
    const pl_point_t *p = in->points;
    if (n < 4 * SAW_MIN_FALLS) return 0;
    double *scratch = malloc(n * sizeof *scratch);
    size_t *fall = malloc(n * sizeof *fall);
    int rc = -ENOMEM;
    if (!scratch || !fall) goto done;
    /* a fall: a drop of at least half the 98th percentile of |change| (falls are 2% of the changes and more for
     * periods up to 50 steps) */
    for (size_t i = 1; i < n; i++) scratch[i - 1] = fabs(p[i].base - p[i - 1].base);
    qsort(scratch, n - 1, sizeof *scratch, dbl_cmp);
    double thr = 0.5 * scratch[(size_t)(0.98 * (double)(n - 2))];
    rc = 0;
    if (!(thr > 0)) goto done;
    size_t k = saw_falls(p, n, thr, fall);
    if (k < SAW_MIN_FALLS) goto done;
    int64_t per;
    saw_check(p, n, fall, k, scratch, &per);
    if (!per) goto done;
    /* one point per period: from the start to the first fall, then from each fall to the next */
    pl_series_t s = *in;
    s.points = calloc(k + 1, sizeof *s.points);
    rc = -ENOMEM;
    if (!s.points) goto done;
    size_t m = 0;
    for (size_t j = 0; j <= k; j++) {
        size_t lo = j ? fall[j - 1] : 0, hi = j < k ? fall[j] : n;
        if (lo >= hi) continue;
        size_t at = lo;
        double peak = p[lo].peak;
        uint64_t cnt = 0;
        for (size_t i = lo; i < hi; i++) {
            if (p[i].base < p[at].base) at = i;
            if (p[i].peak > peak) peak = p[i].peak;
            cnt += p[i].n_samples;
        }
        s.points[m] = p[at];
        s.points[m].peak = peak;
        s.points[m].n_samples = cnt > UINT32_MAX ? UINT32_MAX : (uint32_t)cnt;
        m++;
    }
    s.n_points = m;
    *out = s;
    *period = per;
    rc = 0;
done:
    free(scratch);
    free(fall);
    return rc;
}

void pl_series_free(pl_series_t *s) {
    if (!s) return;
    free(s->points);
    s->points = NULL;
    s->n_points = 0;
}
