/* Unit tests for reports/period.c: synthetic allocation streams with known periods (jitter, variable-length steps,
 * noise allocations, an evaluation spike every K steps, sampled streams) must be found within tolerance; aperiodic
 * streams must not; and reports/extract.c must turn a periodic unmarked trace into auto-detected steps. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>
#include <stdarg.h>
#include <cmocka.h>

#include "analyze.h"
#include "extract.h"
#include "period.h"
#include "render.h"
#include "report.h"
#include "helpers.h"

static uint64_t g_rng;
static uint64_t rnd(void) { /* xorshift64*: deterministic per test */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}
static double unif(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

typedef struct gen {
    int n_steps;
    int per_step;          /* exact allocations per step (distinct call sites 1..per_step, some repeated) */
    double step_ms;        /* mean step duration */
    double jitter;         /* step duration uniform in [1-j, 1+j] x step_ms */
    double noise;          /* probability of a random extra allocation after each one */
    int eval_every;        /* every K steps an evaluation of eval_allocs allocations follows (0 = none) */
    int eval_allocs;
    bool sampled;          /* host samples: each allocation recorded with probability `keep` */
    double keep;
} gen_t;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void add_ev(pl_period_input_t *in, int64_t t, uint64_t key, bool exact) {
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.t_ns = t;
    if (exact) {
        r.type = PL_REC_DEVICE_ALLOC;
        r.u.device.stack_id = (uint32_t)key;
        r.u.device.size = 4096;
    } else {
        r.type = PL_REC_HOST_ALLOC;
        r.u.host_alloc.stack_id = (uint32_t)key;
        r.u.host_alloc.size = 1 << 20;
    }
    assert_int_equal(pl_period_add(in, &r), 0);
}

/* Fill in with g's stream; returns the true median step duration in ns. Step ends are also added as step records
 * (detection must ignore them). */
static double generate(const gen_t *g, pl_period_input_t *in) {
    int64_t t = 1000000000LL;
    double *d = malloc((size_t)g->n_steps * sizeof *d);
    assert_non_null(d);
    for (int s = 0; s < g->n_steps; s++) {
        double dur = g->step_ms * 1e6 * (1 + g->jitter * (2 * unif() - 1));
        d[s] = dur;
        /* the loop: forward allocations bunched in the first 40% of the step, backward in the next 40%, the
         * optimizer's quiet last 20% */
        for (int k = 0; k < g->per_step; k++) {
            int64_t at = t + (int64_t)(dur * 0.8 * (k + 0.5 * unif()) / g->per_step);
            uint32_t key = 1 + (uint32_t)(k % (g->per_step > 8 ? g->per_step - 3 : g->per_step));
            if (!g->sampled || unif() < g->keep) add_ev(in, at, key, !g->sampled);
            if (g->noise > 0 && unif() < g->noise) add_ev(in, at + 10, 1000 + rnd() % 5000, !g->sampled);
        }
        t += (int64_t)dur;
        pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = t};
        r.u.step.step = (uint64_t)s + 1;
        assert_int_equal(pl_period_add(in, &r), 0);
        if (g->eval_every && (s + 1) % g->eval_every == 0) {
            double edur = g->step_ms * 1e6 * 0.6;
            for (int k = 0; k < g->eval_allocs; k++) {
                int64_t at = t + (int64_t)(edur * k / g->eval_allocs);
                if (!g->sampled || unif() < g->keep) add_ev(in, at, 1 + (uint32_t)(k % (g->per_step / 3)), !g->sampled);
            }
            t += (int64_t)edur;
        }
    }
    qsort(d, (size_t)g->n_steps, sizeof *d, cmp_d);
    double med = d[g->n_steps / 2];
    free(d);
    return med;
}

static void expect_found(const gen_t *g, pl_period_method_t method, double tol) {
    pl_period_input_t in;
    pl_period_input_init(&in);
    double truth = generate(g, &in);
    pl_period_t p;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    printf("    found %d method %s allocs %.1f period %.3f ms (true %.3f) conf %.2f bounds %zu (steps %d)\n", p.found,
           pl_period_method_name(p.method), p.period_allocs, p.period_ns / 1e6, truth / 1e6, p.confidence,
           p.n_bounds, g->n_steps);
    assert_true(p.found);
    assert_int_equal(p.method, method);
    assert_true(p.confidence >= 0.5 && p.confidence <= 1.0);
    /* with jitter the median step is not exactly the mean one: tolerance on the period */
    assert_true(fabs(p.period_ns - truth) <= tol * truth);
    if (method == PL_PERIOD_SEQUENCE) assert_int_equal((int)p.period_allocs, g->per_step);
    double n_evals = g->eval_every ? g->n_steps / g->eval_every : 0;
    assert_true(fabs((double)p.n_bounds - g->n_steps) <= 0.1 * g->n_steps + n_evals + 1);
    for (size_t i = 1; i < p.n_bounds; i++) assert_true(p.bounds_ns[i] > p.bounds_ns[i - 1]);
    pl_period_free(&p);
    pl_period_input_free(&in);
}

static void expect_none(pl_period_input_t *in) {
    pl_period_t p;
    assert_int_equal(pl_period_detect(in, NULL, &p), 0);
    printf("    found %d method %s period %.3f ms conf %.2f\n", p.found, pl_period_method_name(p.method),
           p.period_ns / 1e6, p.confidence);
    assert_false(p.found);
    assert_null(p.bounds_ns);
    assert_int_equal(p.n_bounds, 0);
    pl_period_free(&p);
}

/* A call site is its native stack: two stacks that differ only in their Python frames (trace 1.5) give the same
 * event key, a third with other native frames another one; records with no stack fall back to the size class. */
static void test_period_site_is_native_stack(void **state) {
    (void)state;
    pl_period_input_t in;
    pl_period_input_init(&in);
    pl_trace_record_t st = {.type = PL_REC_STACK};
    st.u.stack.n_frames = 2;
    st.u.stack.pcs[0] = 0x401000;
    st.u.stack.pcs[1] = 0x402000;
    for (uint32_t id = 1; id <= 3; id++) {
        st.u.stack.stack_id = id;
        st.u.stack.n_py = id == 3 ? 0 : 1;
        st.u.stack.py[0] = id; /* another Python line each */
        if (id == 3) st.u.stack.pcs[1] = 0x403000;
        assert_int_equal(pl_period_add(&in, &st), 0);
    }
    for (uint32_t id = 1; id <= 3; id++) {
        pl_trace_record_t a = {.type = PL_REC_HOST_ALLOC, .t_ns = id};
        a.u.host_alloc.stack_id = id;
        a.u.host_alloc.size = 64;
        a.u.host_alloc.call_ordinal = id;
        assert_int_equal(pl_period_add(&in, &a), 0);
    }
    assert_int_equal(in.n_ev, 3);
    assert_true(in.ev[0].key == in.ev[1].key);
    assert_true(in.ev[2].key != in.ev[0].key);
    /* stack ids past the first canon table (1024), ids below kept: id 3000 is id 1's native stack, id 5000 id 3's */
    st.u.stack.n_py = 0;
    st.u.stack.pcs[1] = 0x402000;
    st.u.stack.stack_id = 3000;
    assert_int_equal(pl_period_add(&in, &st), 0);
    st.u.stack.pcs[1] = 0x403000;
    st.u.stack.stack_id = 5000;
    assert_int_equal(pl_period_add(&in, &st), 0);
    static const uint32_t ids[] = {1, 3, 3000, 5000};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        pl_trace_record_t a = {.type = PL_REC_HOST_ALLOC, .t_ns = ids[i]};
        a.u.host_alloc.stack_id = ids[i];
        a.u.host_alloc.size = 64;
        a.u.host_alloc.call_ordinal = ids[i];
        assert_int_equal(pl_period_add(&in, &a), 0);
    }
    assert_int_equal(in.n_ev, 7);
    assert_true(in.ev[3].key == in.ev[0].key && in.ev[5].key == in.ev[0].key);
    assert_true(in.ev[4].key == in.ev[2].key && in.ev[6].key == in.ev[2].key);
    /* heap records past the first arrays (256): times and call counts kept in order */
    for (int i = 0; i < 1000; i++) {
        pl_trace_record_t h = {.type = PL_REC_HEAP, .t_ns = 1000 + i};
        h.u.heap.n_alloc = 7 * (uint64_t)i;
        assert_int_equal(pl_period_add(&in, &h), 0);
    }
    assert_int_equal(in.n_heap, 1000);
    for (size_t i = 0; i < in.n_heap; i++) {
        assert_int_equal(in.heap_t_ns[i], 1000 + (int64_t)i);
        assert_int_equal(in.heap_n_alloc[i], 7 * i);
    }
    pl_period_input_free(&in);
}

static void test_period_exact_steady(void **state) {
    (void)state;
    g_rng = 1;
    gen_t g = {.n_steps = 50, .per_step = 40, .step_ms = 5};
    expect_found(&g, PL_PERIOD_SEQUENCE, 0.02);
}

static void test_period_exact_jitter_variable_steps(void **state) {
    (void)state;
    g_rng = 2;
    gen_t g = {.n_steps = 80, .per_step = 60, .step_ms = 8, .jitter = 0.5};
    expect_found(&g, PL_PERIOD_SEQUENCE, 0.15);
}

static void test_period_exact_noise(void **state) {
    (void)state;
    g_rng = 3;
    gen_t g = {.n_steps = 60, .per_step = 50, .step_ms = 4, .jitter = 0.1, .noise = 0.05};
    expect_found(&g, PL_PERIOD_SEQUENCE, 0.1);
}

static void test_period_exact_eval_spike(void **state) {
    (void)state;
    g_rng = 4;
    /* an evaluation every 10 steps: the best-matching lag is the 10-step cycle; the step must still win */
    gen_t g = {.n_steps = 60, .per_step = 45, .step_ms = 3, .jitter = 0.1, .eval_every = 10, .eval_allocs = 20};
    expect_found(&g, PL_PERIOD_SEQUENCE, 0.1);
}

static void test_period_sampled_time(void **state) {
    (void)state;
    g_rng = 5;
    /* a sampled host stream: ~12 of 40 allocations per step recorded, at random */
    gen_t g = {.n_steps = 60, .per_step = 40, .step_ms = 20, .jitter = 0.05, .sampled = true, .keep = 0.3};
    expect_found(&g, PL_PERIOD_TIME, 0.1);
}

/* A PyTorch-like sampled stream (tests/targets/torch_loop.py under the default sampling): per step, two large
 * buffers at the optimizer's end of the step (each recorded with p 0.63) and ten call sites at their own phases
 * (p 0.3), plus random others; step lengths jitter +-30% from step to step and drift from 1x to 1.8x over the run
 * (a loaded machine). The anchor detector must cut the steps; with `shuffle` every record gets a random time
 * instead (same call sites and counts, no loop) and nothing may be found. Returns the step end times (truth). */
static int64_t *torchlike(pl_period_input_t *in, int n_steps, bool shuffle) {
    int64_t *ends = malloc((size_t)n_steps * sizeof *ends), t = 1000000000LL;
    assert_non_null(ends);
    const double base_ns = 80e6;
    for (int s = 0; s < n_steps; s++) {
        double dur = base_ns * (1 + 0.8 * s / n_steps) * (1 + 0.3 * (2 * unif() - 1));
        for (int k = 0; k < 2; k++)
            for (int rep = 0; rep < 2; rep++)
                if (unif() < 0.63) add_ev(in, t + (int64_t)(dur * (0.92 + 0.02 * rep + 0.01 * unif())), 1 + k, false);
        for (int k = 0; k < 10; k++)
            if (unif() < 0.3) add_ev(in, t + (int64_t)(dur * (0.08 * k + 0.03 * unif())), 10 + k, false);
        if (unif() < 0.5) add_ev(in, t + (int64_t)(dur * unif()), 100 + rnd() % 50, false);
        t += (int64_t)dur;
        ends[s] = t;
    }
    if (shuffle) {
        int64_t t0 = 1000000000LL, span = t - t0;
        for (size_t i = 0; i < in->n_ev; i++) in->ev[i].t_ns = t0 + (int64_t)(unif() * (double)span);
    }
    return ends;
}

static void test_period_sampled_anchor_drift(void **state) {
    (void)state;
    g_rng = 11;
    const int n_steps = 200;
    pl_period_input_t in;
    pl_period_input_init(&in);
    int64_t *ends = torchlike(&in, n_steps, false);
    pl_period_t p;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    size_t one = 0; /* true steps holding exactly one detected step end */
    for (int i = 1; i < n_steps; i++) {
        size_t k = 0;
        for (size_t j = 0; j < p.n_bounds; j++) k += p.bounds_ns[j] > ends[i - 1] && p.bounds_ns[j] <= ends[i];
        one += k == 1;
    }
    printf("    found %d method %s period %.2f ms conf %.2f bounds %zu (steps %d), one-per-step %zu\n", p.found,
           pl_period_method_name(p.method), p.period_ns / 1e6, p.confidence, p.n_bounds, n_steps, one);
    assert_true(p.found);
    assert_int_equal(p.method, PL_PERIOD_ANCHOR);
    assert_true(fabs((double)p.n_bounds - n_steps) <= 0.1 * n_steps + 1);
    assert_true(one >= 0.9 * (n_steps - 1));
    for (size_t i = 1; i < p.n_bounds; i++) assert_true(p.bounds_ns[i] > p.bounds_ns[i - 1]);
    pl_period_free(&p);
    pl_period_input_free(&in);
    free(ends);
    /* deliberate misuse: the same records at random times must not pass for a loop */
    for (uint64_t seed = 12; seed < 17; seed++) {
        g_rng = seed;
        pl_period_input_init(&in);
        free(torchlike(&in, n_steps, true));
        expect_none(&in);
        pl_period_input_free(&in);
    }
}

/* ---- ordinal detector (trace 1.3 host records carry the thread's exact malloc-call count) ---- */

typedef struct ogen {
    int n_steps;
    uint64_t calls;        /* malloc calls per step on the loop thread */
    double step_ms, jitter; /* step duration uniform in [1-j, 1+j] x step_ms */
    double extra;          /* probability that a step makes 1..40 extra calls (a log line, a lazy init) */
    bool second_thread;    /* a second thread allocating at random (sites of its own), with ordinals */
    bool two_phase;        /* the frequent sites allocate twice per step, at two phases */
    double na;             /* share of records without an ordinal (NA) */
} ogen_t;

static void add_host(pl_period_input_t *in, int64_t t, uint32_t stack, uint32_t tid, uint64_t ordinal) {
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_HOST_ALLOC;
    r.t_ns = t;
    r.u.host_alloc = (pl_rec_host_alloc_t){.addr = 0x1000, .size = 300000, .stack_id = stack, .tid = tid,
                                           .call_ordinal = ordinal};
    assert_int_equal(pl_period_add(in, &r), 0);
}

/* A sampled host stream with ordinals: per step, `calls` malloc calls, of which 12 large ones at fixed indexes
 * (sites 1..12; with two_phase, sites 1..6 each twice, forward and backward) are recorded with probability 0.5,
 * plus a random small one now and then. Returns the step end times (n_steps, malloc'd); step records added too. */
static int64_t *ordinal_stream(const ogen_t *g, pl_period_input_t *in) {
    int64_t t = 1000000000LL, *ends = malloc((size_t)g->n_steps * sizeof *ends);
    assert_non_null(ends);
    uint64_t ord = 123456; /* calls made before the loop (imports) */
    uint64_t ord2 = 999;
    pl_trace_record_t pr = {.type = PL_REC_PROCESS_START, .t_ns = t};
    pr.u.process.sample_bytes = 524288;
    assert_int_equal(pl_period_add(in, &pr), 0);
    for (int k = 0; k < 40; k++) add_host(in, t - 500000000LL + k * 1000000LL, 500 + (uint32_t)(rnd() % 300), 1,
                                          1000 + (uint64_t)k * 3000 + rnd() % 2000); /* start-up */
    for (int s = 0; s < g->n_steps; s++) {
        double dur = g->step_ms * 1e6 * (1 + g->jitter * (2 * unif() - 1));
        uint64_t extra = unif() < g->extra ? 1 + rnd() % 40 : 0, n = g->calls + extra;
        for (int k = 0; k < 12; k++) {
            uint64_t at = (uint64_t)k * (g->calls / 13) + 7; /* call index within the step */
            if (extra && at > g->calls / 2) at += extra;    /* the extra calls come mid-step */
            uint32_t site = g->two_phase ? 1 + (uint32_t)(k % 6) : 1 + (uint32_t)k;
            double frac = (double)at / (double)n, tj = 0.02 * (unif() - 0.5);
            uint64_t o = ord + at + 1;
            if (unif() < 0.5)
                add_host(in, t + (int64_t)(dur * (frac + tj > 0 ? frac + tj : 0)), site, 1,
                         unif() < g->na ? PL_TRACE_NA : o);
        }
        if (unif() < 0.3) { /* a small random call somewhere, another site */
            uint64_t at = rnd() % n;
            add_host(in, t + (int64_t)(dur * (double)at / (double)n), 100 + (uint32_t)(rnd() % 50), 1, ord + at + 1);
        }
        if (g->second_thread)
            for (int k = 0; k < 3; k++) {
                ord2 += 1 + rnd() % 2000;
                add_host(in, t + (int64_t)(dur * unif()), 200 + (uint32_t)(rnd() % 8), 2, ord2);
            }
        ord += n;
        t += (int64_t)dur;
        ends[s] = t;
        pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = t};
        r.u.step.step = (uint64_t)s + 1;
        assert_int_equal(pl_period_add(in, &r), 0);
    }
    return ends;
}

/* true steps (between consecutive ends) holding exactly one detected step end */
static size_t one_per_step(const pl_period_t *p, const int64_t *ends, int n_steps) {
    size_t one = 0;
    for (int i = 1; i < n_steps; i++) {
        size_t k = 0;
        for (size_t j = 0; j < p->n_bounds; j++) k += p->bounds_ns[j] > ends[i - 1] && p->bounds_ns[j] <= ends[i];
        one += k == 1;
    }
    return one;
}

static void expect_ordinal(const ogen_t *g) {
    pl_period_input_t in;
    pl_period_input_init(&in);
    int64_t *ends = ordinal_stream(g, &in);
    pl_period_t p;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    size_t one = one_per_step(&p, ends, g->n_steps);
    printf("    found %d method %s allocs %.1f period %.2f ms conf %.2f bounds %zu (steps %d), one-per-step %zu\n",
           p.found, pl_period_method_name(p.method), p.period_allocs, p.period_ns / 1e6, p.confidence, p.n_bounds,
           g->n_steps, one);
    assert_true(p.found);
    assert_int_equal(p.method, PL_PERIOD_ORDINAL);
    assert_true(p.allocs_exact);
    assert_true(p.period_allocs == (double)g->calls); /* the exact call count, whatever the timing */
    assert_true(p.confidence >= 0.5 && p.confidence <= 1.0);
    assert_true(fabs((double)p.n_bounds - g->n_steps) <= 0.1 * g->n_steps + 1);
    assert_true(one >= 0.9 * (g->n_steps - 1));
    for (size_t i = 1; i < p.n_bounds; i++) assert_true(p.bounds_ns[i] > p.bounds_ns[i - 1]);
    pl_period_free(&p);
    pl_period_input_free(&in);
    free(ends);
}

static void test_period_ordinal_jitter(void **state) {
    (void)state;
    g_rng = 21;
    /* step lengths +-50 %: no time detector follows this; the call count does not change */
    ogen_t g = {.n_steps = 80, .calls = 711, .step_ms = 50, .jitter = 0.5};
    expect_ordinal(&g);
    g_rng = 22;
    ogen_t g2 = {.n_steps = 60, .calls = 3000, .step_ms = 200, .jitter = 0.3, .second_thread = true};
    expect_ordinal(&g2);
}

static void test_period_ordinal_two_phases_extra_calls(void **state) {
    (void)state;
    g_rng = 23;
    /* the 2-thread MLP's miss: every frequent site at two phases of the step */
    ogen_t g = {.n_steps = 100, .calls = 711, .step_ms = 40, .jitter = 0.3, .two_phase = true,
                .second_thread = true};
    expect_ordinal(&g);
    /* one step in ten makes a few extra calls: the period is still the common count, steps still one each */
    g_rng = 24;
    ogen_t g2 = {.n_steps = 100, .calls = 711, .step_ms = 40, .jitter = 0.3, .extra = 0.1};
    expect_ordinal(&g2);
    /* some records without an ordinal (NA) in between: ignored */
    g_rng = 25;
    ogen_t g3 = {.n_steps = 80, .calls = 1500, .step_ms = 40, .jitter = 0.3, .na = 0.2};
    expect_ordinal(&g3);
}

/* Records at random ordinals (no loop) must give nothing, whatever the seed. */
static void test_period_ordinal_aperiodic_none(void **state) {
    (void)state;
    for (uint64_t seed = 30; seed < 36; seed++) {
        g_rng = seed;
        pl_period_input_t in;
        pl_period_input_init(&in);
        int64_t t = 1000000000LL;
        uint64_t ord[2] = {100, 100};
        for (int i = 0; i < 3000; i++) {
            uint32_t tid = 1 + (uint32_t)(rnd() % 2);
            t += (int64_t)(-log(1 - unif()) * 1000000);
            ord[tid - 1] += 1 + (uint64_t)(-log(1 - unif()) * (seed % 2 ? 60 : 700));
            add_host(&in, t, 1 + (uint32_t)(rnd() % (seed % 3 ? 12 : 40)), tid, ord[tid - 1]);
        }
        expect_none(&in);
        pl_period_input_free(&in);
    }
}

/* A trace without ordinals (1.0 - 1.2: NA) behaves as before: the same result as with the ordinals removed, and
 * a loop with ordinals found by them is not found by ordinals once they are NA. */
static void test_period_ordinal_absent_as_before(void **state) {
    (void)state;
    g_rng = 11;
    pl_period_input_t in;
    pl_period_input_init(&in);
    int64_t *ends = torchlike(&in, 200, false);
    pl_period_t a, b;
    assert_int_equal(pl_period_detect(&in, NULL, &a), 0);
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].ordinal = PL_TRACE_NA;
    assert_int_equal(pl_period_detect(&in, NULL, &b), 0);
    assert_true(a.found && b.found);
    assert_int_equal(a.method, PL_PERIOD_ANCHOR);
    assert_int_equal(b.method, a.method);
    assert_int_equal(b.n_bounds, a.n_bounds);
    assert_memory_equal(a.bounds_ns, b.bounds_ns, a.n_bounds * sizeof *a.bounds_ns);
    pl_period_free(&a);
    pl_period_free(&b);
    pl_period_input_free(&in);
    free(ends);
    /* an mmap record's ordinal (the count of calls before it, equal to the previous call's) is not used */
    pl_period_input_init(&in);
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_HOST_ALLOC;
    r.u.host_alloc = (pl_rec_host_alloc_t){.size = 1 << 20, .stack_id = 3, .tid = 1, .kind = PL_HOST_MMAP,
                                           .call_ordinal = 42};
    assert_int_equal(pl_period_add(&in, &r), 0);
    r.u.host_alloc.kind = PL_HOST_MALLOC;
    assert_int_equal(pl_period_add(&in, &r), 0);
    assert_int_equal(in.n_ev, 2);
    assert_true(in.ev[0].ordinal == PL_TRACE_NA);
    assert_true(in.ev[1].ordinal == 42 && in.ev[1].tid == 1);
    pl_period_input_free(&in);
    g_rng = 21;
    pl_period_input_init(&in);
    ogen_t g = {.n_steps = 80, .calls = 711, .step_ms = 50, .jitter = 0.5};
    ends = ordinal_stream(&g, &in);
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].ordinal = PL_TRACE_NA;
    assert_int_equal(pl_period_detect(&in, NULL, &a), 0);
    assert_int_not_equal(a.method, PL_PERIOD_ORDINAL);
    pl_period_free(&a);
    pl_period_input_free(&in);
    free(ends);
}

/* Deliberate misuse / hostile input: ordinals going backwards in time, all equal, near UINT64_MAX, one thread's
 * records claiming another's ordinals. Never a period from the ordinal detector, never a crash or a hang. */
static void test_period_ordinal_hostile(void **state) {
    (void)state;
    g_rng = 40;
    pl_period_input_t in;
    pl_period_input_init(&in);
    ogen_t g = {.n_steps = 80, .calls = 711, .step_ms = 50, .jitter = 0.2};
    int64_t *ends = ordinal_stream(&g, &in);
    /* every tenth record's ordinal swapped with a random other one: going backwards in time */
    for (size_t i = 0; i < in.n_ev; i += 10) {
        size_t j = (size_t)(rnd() % in.n_ev);
        uint64_t o = in.ev[i].ordinal;
        in.ev[i].ordinal = in.ev[j].ordinal;
        in.ev[j].ordinal = o;
    }
    pl_period_t p;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    assert_int_not_equal(p.method, PL_PERIOD_ORDINAL);
    pl_period_free(&p);
    /* all equal (a writer that never set them) */
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].ordinal = 0;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    assert_int_not_equal(p.method, PL_PERIOD_ORDINAL);
    pl_period_free(&p);
    /* periodic, but at the top of the range: multiples of a huge period wrap around */
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].ordinal = UINT64_MAX - 1 - (in.n_ev - i) * (UINT64_MAX / 4096);
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    assert_int_not_equal(p.method, PL_PERIOD_ORDINAL);
    pl_period_free(&p);
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].ordinal = UINT64_MAX - 1 - (in.n_ev - i) * 711 * (i % 3);
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    pl_period_free(&p);
    pl_period_input_free(&in);
    free(ends);
    /* two threads' records under one tid, each periodic on its own counter: the merged ordinals interleave */
    g_rng = 41;
    pl_period_input_init(&in);
    ogen_t g2 = {.n_steps = 80, .calls = 711, .step_ms = 50, .jitter = 0.2, .second_thread = true};
    ends = ordinal_stream(&g2, &in);
    for (size_t i = 0; i < in.n_ev; i++) in.ev[i].tid = 1;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    printf("    merged threads: found %d method %s allocs %.1f\n", p.found, pl_period_method_name(p.method),
           p.period_allocs);
    if (p.method == PL_PERIOD_ORDINAL) { /* if it still finds one, it is the loop's */
        assert_true(p.period_allocs == 711);
        assert_true(one_per_step(&p, ends, g2.n_steps) >= 0.9 * (g2.n_steps - 1));
    }
    pl_period_free(&p);
    pl_period_input_free(&in);
    free(ends);
}

/* A loop inside the step (8 layers of 60 calls, the same 3 sites in each) must not pass for the step: the step is
 * 8 x 60 + 50 calls, with the optimizer's sites once per step. Found means the step's count, else nothing. */
static void test_period_ordinal_inner_loop(void **state) {
    (void)state;
    for (uint64_t seed = 50; seed < 54; seed++) {
        g_rng = seed;
        pl_period_input_t in;
        pl_period_input_init(&in);
        int64_t t = 1000000000LL;
        uint64_t ord = 5000;
        const uint64_t P = 8 * 60 + 50;
        for (int s = 0; s < 100; s++) {
            double dur = 30e6 * (1 + 0.3 * (2 * unif() - 1));
            for (uint64_t l = 0; l < 8; l++)
                for (uint64_t k = 0; k < 3; k++)
                    if (unif() < (seed % 2 ? 0.3 : 0.6)) {
                        uint64_t at = l * 60 + k * 17;
                        add_host(&in, t + (int64_t)(dur * (double)at / (double)P), 1 + (uint32_t)k, 1, ord + at);
                    }
            for (uint64_t k = 0; k < 3; k++)
                if (unif() < 0.5) {
                    uint64_t at = 8 * 60 + k * 15;
                    add_host(&in, t + (int64_t)(dur * (double)at / (double)P), 10 + (uint32_t)k, 1, ord + at);
                }
            ord += P;
            t += (int64_t)dur;
        }
        pl_period_t p;
        assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
        printf("    found %d method %s allocs %.1f bounds %zu (steps 100)\n", p.found, pl_period_method_name(p.method),
               p.period_allocs, p.n_bounds);
        if (p.method == PL_PERIOD_ORDINAL) {
            assert_true(p.period_allocs == (double)P);
            assert_true(fabs((double)p.n_bounds - 100) <= 11);
        }
        pl_period_free(&p);
        pl_period_input_free(&in);
    }
}

/* ---- a single-threaded sampled loop on a busy machine (tests/reports/period_loop.py, docs/period.md) ---- */

typedef struct sgen {
    int n_steps;
    uint64_t calls;        /* malloc calls per step, at a steady rate of the program's own (CPU) time */
    double step_ms;        /* CPU time per step */
    int pause_every;       /* every K-th step is preempted in its middle for pause_steps steps of wall time (0: no) */
    double pause_steps;
    double slice_ms;       /* the process runs only the first 60 % of every slice of this length (0: always) */
    uint64_t odd_calls;    /* every other step makes this many calls more (in its first burst) */
    int per_burst;         /* records per burst (0: 15) */
} sgen_t;

/* Wall time of CPU time tau (ns) under time slicing: off for 40 % of every slice. */
static double sliced(const sgen_t *g, double tau) {
    if (g->slice_ms <= 0) return tau;
    double run = 0.6 * g->slice_ms * 1e6, k = floor(tau / run);
    return k * g->slice_ms * 1e6 + (tau - k * run);
}

/* Per step, one list-growth call site recorded 45 times (15 in each of three bursts, at random calls of the burst:
 * sampled, so the ordinal detector has no same-site pairs a step apart) and now and then another site; records carry
 * their ordinals. The wall clock is the scheduler's (sgen_t). Returns the step end times (wall); step records too. */
static int64_t *sliced_loop(const sgen_t *g, pl_period_input_t *in) {
    int64_t t0 = 1000000000LL, *ends = malloc((size_t)g->n_steps * sizeof *ends);
    assert_non_null(ends);
    pl_trace_record_t pr = {.type = PL_REC_PROCESS_START, .t_ns = t0};
    pr.u.process.sample_bytes = 524288;
    assert_int_equal(pl_period_add(in, &pr), 0);
    const uint64_t ord0 = 40000;
    const double burst[3][2] = {{0.05, 0.25}, {0.3, 0.35}, {0.7, 0.75}}; /* unevenly spaced: no sub-step period */
    double paused_ns = 0, step_ns = g->step_ms * 1e6;
    uint64_t ord = ord0;
    const int nr = g->per_burst ? g->per_burst : 15;
    for (int s = 0; s < g->n_steps; s++) {
        uint64_t calls = g->calls + (s % 2 ? g->odd_calls : 0);
        bool pause = g->pause_every && s % g->pause_every == g->pause_every - 1;
        for (int b = 0; b < 3; b++)
            for (int k = 0; k < nr; k++) {
                uint64_t lo = (uint64_t)(burst[b][0] * (double)calls), hi = (uint64_t)(burst[b][1] * (double)calls);
                uint64_t idx = lo + (uint64_t)k * ((hi - lo) / (uint64_t)nr) + rnd() % ((hi - lo) / (uint64_t)nr);
                double f = (double)idx / (double)calls; /* distinct calls, distinct ordinals */
                double tau = ((double)s + f) * step_ns;
                double extra = pause && f > 0.5 ? g->pause_steps * step_ns : 0;
                add_host(in, t0 + (int64_t)(sliced(g, tau) + paused_ns + extra), 1, 1, ord + idx);
            }
        if (unif() < 0.3) { /* in the quiet stretch between bursts */
            uint64_t idx = (uint64_t)((0.4 + 0.2 * unif()) * (double)calls);
            double tau = ((double)s + (double)idx / (double)calls) * step_ns;
            add_host(in, t0 + (int64_t)(sliced(g, tau) + paused_ns), 2 + (uint32_t)(rnd() % 3), 1, ord + idx);
        }
        ord += calls;
        if (pause) paused_ns += g->pause_steps * step_ns;
        ends[s] = t0 + (int64_t)(sliced(g, (double)(s + 1) * step_ns) + paused_ns);
        pl_trace_record_t r = {.type = PL_REC_STEP, .t_ns = ends[s]};
        r.u.step.step = (uint64_t)s + 1;
        assert_int_equal(pl_period_add(in, &r), 0);
    }
    return ends;
}

/* The Python loops' wrong periods (reports.period_loops): on the wall clock alone, preemption stretching one step in
 * seven pushed the time detector's grid out of phase (more steps than the loop made), and time slices of a
 * preempted process were a period of their own. The call clock follows the first and does not see the second:
 * found, one step end per step; and never the slices' period (nothing rather than a wrong period). The call clock
 * alone is not trusted either: a sparse loop whose call count alternates from step to step repeats exactly every two
 * steps in calls; unconfirmed by the wall clock, that is nothing rather than the two-step cycle. */
/* Detect on g's loop: with must_find, found with one step end per step; else that, or nothing. */
static void expect_steps(const char *what, const sgen_t *g, bool must_find) {
    pl_period_input_t in;
    pl_period_input_init(&in);
    int64_t *ends = sliced_loop(g, &in);
    pl_period_t p;
    assert_int_equal(pl_period_detect(&in, NULL, &p), 0);
    size_t one = one_per_step(&p, ends, g->n_steps);
    printf("    %s: found %d method %s allocs %.1f period %.2f ms bounds %zu (steps %d) one-per-step %zu\n", what,
           p.found, pl_period_method_name(p.method), p.period_allocs, p.period_ns / 1e6, p.n_bounds, g->n_steps, one);
    if (must_find) assert_true(p.found);
    if (p.found) {
        assert_true(fabs((double)p.n_bounds - g->n_steps) <= 0.1 * g->n_steps + 1);
        assert_true(one >= 0.9 * (g->n_steps - 1));
    }
    pl_period_free(&p);
    pl_period_input_free(&in);
    free(ends);
}

static void test_period_sampled_single_thread_scheduler(void **state) {
    (void)state;
    for (uint64_t seed = 60; seed < 63; seed++) {
        g_rng = seed;
        sgen_t preempted = {.n_steps = 60, .calls = 747, .step_ms = 20, .pause_every = 7, .pause_steps = 1.5};
        expect_steps("preempted", &preempted, true);
        g_rng = seed;
        sgen_t sliced = {.n_steps = 60, .calls = 747, .step_ms = 20, .slice_ms = 9};
        expect_steps("sliced", &sliced, false);
        g_rng = seed;
        sgen_t alternating = {.n_steps = 60, .calls = 540, .step_ms = 5, .odd_calls = 60, .per_burst = 3};
        expect_steps("alternating", &alternating, false);
    }
}

static void test_period_aperiodic_none(void **state) {
    (void)state;
    g_rng = 6;
    pl_period_input_t in;
    pl_period_input_init(&in);
    int64_t t = 1000000000LL;
    for (int i = 0; i < 4000; i++) { /* Poisson arrivals, random call sites: exact records */
        t += (int64_t)(-log(1 - unif()) * 100000);
        add_ev(&in, t, 1 + rnd() % 200, true);
    }
    expect_none(&in);
    pl_period_input_free(&in);
    pl_period_input_init(&in);
    t = 1000000000LL;
    for (int i = 0; i < 3000; i++) { /* sampled, a few call sites, random times */
        t += (int64_t)(-log(1 - unif()) * 1000000);
        add_ev(&in, t, 1 + rnd() % 4, false);
    }
    expect_none(&in);
    pl_period_input_free(&in);
}

static void test_period_too_little(void **state) {
    (void)state;
    pl_period_input_t in;
    pl_period_input_init(&in);
    expect_none(&in); /* empty */
    /* two call sites alternating once a second: periodic, but 2 allocations per step is too little to cut steps */
    for (int s = 0; s < 100; s++) {
        add_ev(&in, 1000000000LL * (s + 1), 1, false);
        add_ev(&in, 1000000000LL * (s + 1) + 1000, 2, false);
    }
    expect_none(&in);
    pl_period_input_free(&in);
    /* three repeats only */
    g_rng = 7;
    pl_period_input_init(&in);
    gen_t g = {.n_steps = 3, .per_step = 40, .step_ms = 5};
    generate(&g, &in);
    expect_none(&in);
    pl_period_input_free(&in);
}

static void test_period_bad_args(void **state) {
    (void)state;
    pl_period_t p;
    pl_period_input_t in;
    pl_period_input_init(&in);
    assert_int_equal(pl_period_detect(NULL, NULL, &p), -EINVAL);
    assert_int_equal(pl_period_detect(&in, NULL, NULL), -EINVAL);
    assert_int_equal(pl_period_add(NULL, NULL), -EINVAL);
    assert_int_equal(pl_period_scan(NULL, &in), -EINVAL);
    pl_period_free(NULL);
    pl_period_input_free(NULL);
    assert_string_equal(pl_period_method_name(PL_PERIOD_NONE), "none");
    assert_string_equal(pl_period_method_name(PL_PERIOD_SEQUENCE), "sequence");
    assert_string_equal(pl_period_method_name(PL_PERIOD_TIME), "time");
    assert_string_equal(pl_period_method_name(PL_PERIOD_ANCHOR), "anchor");
    assert_string_equal(pl_period_method_name(PL_PERIOD_ORDINAL), "ordinal");
}

/* Write a trace without step records whose 30 device allocations repeat every 200 ms step, 40 steps, heap growing
 * 1 MiB per step; with_mark: a mark record in step 10. Returns the number of records written. */
static uint64_t write_periodic_trace(const char *path, bool with_mark) {
    uint64_t n = 0;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = 77, .ppid = 1, .start_mono_ns = 1000000000LL};
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    pl_rec_process_t proc = {.pid = 77, .ppid = 1, .rank = -1, .local_rank = -1, .exe = "/bin/train",
                             .interval_ns = 100000000, .cgroup_max_bytes = PL_TRACE_NA};
    pl_writer_t *w = pl_test_trace_open(path, &h, &opt, h.start_mono_ns, &proc);
    pl_trace_record_t r;
    const int n_steps = 40, per_step = 30;
    const int64_t step_ns = 200000000; /* 200 ms: periodic heap samples every 100 ms fall inside steps */
    int64_t t = h.start_mono_ns;
    for (int s = 0; s < n_steps; s++) {
        for (int k = 0; k < per_step; k++) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_DEVICE_ALLOC;
            r.t_ns = t + 1000 + (int64_t)k * (step_ns / 2 / per_step);
            r.u.device = (pl_rec_device_t){.source = PL_DEV_SRC_ALLOCATOR, .allocator_id = 1, .pool = 2,
                                           .addr = 0x100000ull * (uint64_t)(k + 1), .size = 4096ull * (uint64_t)(k + 1),
                                           .requested = 4096, .stack_id = (uint32_t)k + 1};
            pl_test_emit(w, &r);
        }
        for (int q = 0; q < 2; q++) { /* periodic heap samples (step 0), growing: a leak of 1 MiB per step */
            memset(&r, 0, sizeof r);
            r.type = PL_REC_HEAP;
            r.t_ns = t + (q ? step_ns * 3 / 4 : step_ns / 4);
            r.u.heap = (pl_rec_heap_t){.live_bytes = (int64_t)(100 << 20) + (int64_t)s * (1 << 20),
                                       .live_count = 1000 + s, .n_alloc = (uint64_t)(s * 2 + q) * 500};
            pl_test_emit(w, &r);
        }
        if (with_mark && s == 10) {
            memset(&r, 0, sizeof r);
            r.type = PL_REC_MARK;
            r.t_ns = t + step_ns / 2;
            r.u.mark = (pl_rec_mark_t){.label = "eval"};
            pl_test_emit(w, &r);
            n++;
        }
        t += step_ns;
        assert_int_equal(pl_writer_flush(w), 0);
    }
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_END;
    r.t_ns = t;
    pl_test_emit(w, &r);
    pl_test_trace_close(w);
    return n + 2 + (uint64_t)n_steps * (per_step + 2);
}

/* reports/extract.c: a trace without step records whose device allocations repeat every step gets synthetic
 * steps; the text report says so. */
static void test_period_extract_auto_steps(void **state) {
    (void)state;
    char path[256];
    pl_test_path(path, sizeof path, "1.0.pltrace");
    write_periodic_trace(path, false);
    const int n_steps = 40, per_step = 30;

    pl_report_t *rep = pl_report_create(path);
    assert_non_null(rep);
    pl_extract_t x;
    pl_extract_init(&x);
    assert_int_equal(pl_extract_file(rep, &x, path, NULL), 0);
    assert_int_equal(pl_report_analyze(rep), 0);
    assert_int_equal(x.n_procs, 1);
    assert_true(x.procs[0].steps_auto);
    assert_true(x.procs[0].n_steps >= (uint64_t)n_steps - 2 && x.procs[0].n_steps <= (uint64_t)n_steps + 1);
    assert_true(fabs(x.procs[0].auto_period_ms - 200) < 10);
    assert_true(fabs(x.procs[0].auto_period_allocs - per_step) < 0.5);
    const pl_report_metric_t *hb = &rep->procs[0]->metrics[PL_METRIC_HEAP_BYTES];
    assert_true(hb->present);
    assert_false(hb->series.by_time); /* per step, not per time bucket */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(pl_render_run_lines(&(pl_run_t){rep, &x}, f, false), 0);
    fclose(f);
    assert_non_null(strstr(buf, "steps auto-detected, period 30 allocations / 200 ms, confidence"));
    free(buf);
    pl_extract_free(&x);
    pl_report_destroy(rep);
}

/* reports/extract.c reads a trace once and collects the period detector's input beside extraction; when a period is
 * found it undoes that pass and reads again with the steps. Nothing of the undone pass may remain: the record count,
 * the marks and the row are those of one pass, from a file and from memory alike. */
static void test_period_extract_undone_pass_leaves_nothing(void **state) {
    (void)state;
    char path[256];
    pl_test_path(path, sizeof path, "1.0.pltrace");
    uint64_t n_records = write_periodic_trace(path, true);
    char *text[2] = {NULL, NULL};
    for (int from_mem = 0; from_mem < 2; from_mem++) {
        pl_report_t *rep = pl_report_create(path);
        assert_non_null(rep);
        pl_extract_t x;
        pl_extract_init(&x);
        if (from_mem) {
            FILE *f = fopen(path, "rb");
            assert_non_null(f);
            static uint8_t buf[1 << 20];
            size_t len = fread(buf, 1, sizeof buf, f);
            fclose(f);
            assert_true(len > 0 && len < sizeof buf);
            assert_int_equal(pl_extract_mem(rep, &x, buf, len, path, NULL), 0);
        } else {
            assert_int_equal(pl_extract_file(rep, &x, path, NULL), 0);
        }
        assert_int_equal(pl_report_analyze(rep), 0);
        assert_int_equal(x.n_procs, 1);
        assert_int_equal(rep->n_procs, 1);
        assert_true(x.procs[0].steps_auto);
        assert_int_equal(x.procs[0].n_records, n_records);
        assert_int_equal(rep->procs[0]->n_marks, 1);
        assert_string_equal(rep->procs[0]->marks[0].label, "eval");
        assert_true(x.procs[0].clean_end);
        size_t len = 0;
        FILE *f = open_memstream(&text[from_mem], &len);
        assert_non_null(f);
        assert_int_equal(pl_render_run_lines(&(pl_run_t){rep, &x}, f, false), 0);
        fclose(f);
        pl_extract_free(&x);
        pl_report_destroy(rep);
    }
    assert_string_equal(text[0], text[1]);
    free(text[0]);
    free(text[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period_site_is_native_stack),
        cmocka_unit_test(test_period_exact_steady),
        cmocka_unit_test(test_period_exact_jitter_variable_steps),
        cmocka_unit_test(test_period_exact_noise),
        cmocka_unit_test(test_period_exact_eval_spike),
        cmocka_unit_test(test_period_sampled_time),
        cmocka_unit_test(test_period_sampled_anchor_drift),
        cmocka_unit_test(test_period_ordinal_jitter),
        cmocka_unit_test(test_period_ordinal_two_phases_extra_calls),
        cmocka_unit_test(test_period_ordinal_aperiodic_none),
        cmocka_unit_test(test_period_ordinal_absent_as_before),
        cmocka_unit_test(test_period_ordinal_hostile),
        cmocka_unit_test(test_period_ordinal_inner_loop),
        cmocka_unit_test(test_period_sampled_single_thread_scheduler),
        cmocka_unit_test(test_period_aperiodic_none),
        cmocka_unit_test(test_period_too_little),
        cmocka_unit_test(test_period_bad_args),
        cmocka_unit_test_setup_teardown(test_period_extract_auto_steps, pl_test_dir_setup, pl_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_period_extract_undone_pass_leaves_nothing, pl_test_dir_setup,
                                        pl_test_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
