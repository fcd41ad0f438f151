/* Deterministic synthetic series for the reports tests: a xorshift RNG with Gaussian noise and shape helpers.
 * Header-only (static functions) so every test binary gets its own copy. */
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "series.h"

typedef struct {
    uint64_t s;
} synth_rng_t;

static inline double synth_uniform(synth_rng_t *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return ((double)(r->s >> 11) + 0.5) / 9007199254740992.0;
}

static inline double synth_gauss(synth_rng_t *r) {
    double u = synth_uniform(r), v = synth_uniform(r);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

typedef double (*synth_shape_fn)(double t, const double *k);

static inline double synth_linear_then_flat(double t, const double *k) { /* k: lo, hi, warmup */
    return k[0] + (k[1] - k[0]) * (t < k[2] ? t / k[2] : 1.0);
}
static inline double synth_warmup_then_leak(double t, const double *k) { /* k: lo, hi, warmup, leak/step */
    return synth_linear_then_flat(t, k) + (t > k[2] ? k[3] * (t - k[2]) : 0);
}
static inline double synth_flat(double t, const double *k) {
    (void)t;
    return k[0];
}
static inline double synth_exp_approach(double t, const double *k) { /* k: lo, hi, tau */
    return k[0] + (k[1] - k[0]) * (1 - exp(-t / k[2]));
}
static inline double synth_onset_leak(double t, const double *k) { /* k: level, onset, leak/step */
    return k[0] + (t > k[1] ? k[2] * (t - k[1]) : 0);
}

/* n samples at steps 1..n (one per step), value = shape * (1 + sd * noise), with AR(1) coefficient phi; step_s > 0
 * adds times. Caller frees. */
static inline pl_sample_t *synth_series(uint64_t seed, size_t n, synth_shape_fn fn, const double *k, double sd,
                                        double phi, double step_s) {
    synth_rng_t r = {seed * 2654435761u + 88172645463325252ull};
    pl_sample_t *s = calloc(n, sizeof *s);
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double t = (double)(i + 1);
        e = phi * e + sqrt(1 - phi * phi) * synth_gauss(&r);
        s[i].step = (int64_t)(i + 1);
        s[i].t_ns = step_s > 0 ? (int64_t)(t * step_s * 1e9) : -1;
        s[i].value = fn(t, k) * (1 + sd * e);
    }
    return s;
}
