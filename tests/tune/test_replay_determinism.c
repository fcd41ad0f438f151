/* tune/replay + allocator/backend_sim.c: a replay's results do not depend on where the sim device's memory lands.
 * Best fit breaks ties between equal free blocks by address; with host mmap addresses, replays running side by side
 * (plateau tune --jobs 2) changed each other's segment order and the ranking flipped from run to run.
 * usage: test_tune_replay_determinism FIXTURES/traces (workload.pltrace: a recorded sequence whose grid has ties). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "tune.h"

static const char *traces_dir;

static pl_replay_seq_t load_workload(void) {
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/workload.pltrace", traces_dir);
    pl_replay_seq_t s;
    int rc = pl_replay_extract(path, NULL, &s, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* touch = false: the first segment sits at va_base, later ones above it (lowest address first), and a freed range
 * is handed out again. */
static void test_sim_private_address_space(void **state) {
    (void)state;
    const uint64_t bases[] = {0, (uint64_t)1 << 44};
    for (size_t k = 0; k < 2; k++) {
        pl_sim_options_t so;
        pl_sim_options_default(&so);
        so.touch = false;
        so.va_base = bases[k];
        uint64_t base = bases[k] ? bases[k] : PL_SIM_VA_BASE;
        pl_backend_t *be;
        pl_alloc_t *a;
        assert_int_equal(pl_backend_sim_create(&so, &be), 0);
        assert_int_equal(pl_alloc_create(be, NULL, &a, NULL, 0), 0);
        void *p = pl_alloc_malloc(a, 4u << 20, 0);  /* one 20 MiB large-pool segment */
        void *q = pl_alloc_malloc(a, 30u << 20, 0); /* does not fit the rest: a second segment */
        assert_non_null(p);
        assert_non_null(q);
        assert_int_equal((uintptr_t)p, base);
        assert_true((uintptr_t)q > (uintptr_t)p);
        assert_int_equal((uintptr_t)q, base + (20u << 20));
        pl_alloc_free(a, p);
        pl_alloc_empty_cache(a); /* the first segment goes back to the device */
        void *r = pl_alloc_malloc(a, 4u << 20, 0);
        assert_int_equal((uintptr_t)r, base); /* its range again */
        pl_alloc_free(a, q);
        pl_alloc_free(a, r);
        pl_alloc_destroy(a);
        pl_backend_destroy(be);
    }
    pl_sim_options_t so;
    pl_sim_options_default(&so);
    so.touch = false;
    so.va_base = PL_SIM_VA_BASE + 4096; /* not granularity-aligned */
    pl_backend_t *be;
    assert_int_equal(pl_backend_sim_create(&so, &be), -EINVAL);
}

static const char *const confs[] = {"", "max_split_size_mb:64", "roundup_power2_divisions:8",
                                    "garbage_collection_threshold:0.8,roundup_power2_divisions:8",
                                    "max_split_size_mb:64,roundup_power2_divisions:4", "expandable_segments:True"};
#define N_CONFS (sizeof confs / sizeof confs[0])

/* The same replay with the device's address space at two bases: identical in every field, on both paths. */
static void test_replay_independent_of_base(void **state) {
    (void)state;
    pl_replay_seq_t s = load_workload();
    char err[512];
    for (size_t i = 0; i < N_CONFS; i++) {
        pl_alloc_config_t cfg;
        assert_int_equal(pl_alloc_config_parse(confs[i], &cfg, err, sizeof err), 0);
        for (int path = PL_REPLAY_PATH_FAST; path <= PL_REPLAY_PATH_LOCKED; path++) {
            pl_replay_result_t r[2];
            const uint64_t bases[2] = {PL_SIM_VA_BASE, (uint64_t)0x40000000};
            for (int k = 0; k < 2; k++) {
                pl_sim_options_t so;
                pl_sim_options_default(&so);
                so.va_base = bases[k];
                assert_int_equal(pl_replay_run_sim(&s, &cfg, &so, (pl_replay_path_t)path, &r[k], err, sizeof err), 0);
            }
            const char *d = pl_replay_result_diff(&r[0], &r[1]);
            if (d) fprintf(stderr, "conf '%s' path %d: %s differs between bases\n", confs[i], path, d);
            assert_null(d);
        }
    }
    pl_replay_seq_free(&s);
}

typedef struct job {
    const pl_replay_seq_t *s;
    const pl_replay_result_t *ref; /* N_CONFS, computed alone */
    int rounds;
    int n_diff;
    char first[256];
} job_t;

static void *replayer(void *arg) {
    job_t *j = arg;
    char err[512];
    for (int round = 0; round < j->rounds; round++)
        for (size_t i = 0; i < N_CONFS; i++) {
            pl_alloc_config_t cfg;
            pl_replay_result_t r;
            pl_alloc_config_parse(confs[i], &cfg, err, sizeof err);
            if (pl_replay_run(j->s, &cfg, 0, &r, err, sizeof err)) {
                j->n_diff++;
                continue;
            }
            const char *d = pl_replay_result_diff(&j->ref[i], &r);
            if (d && !j->n_diff++) snprintf(j->first, sizeof j->first, "conf '%s' round %d: %s", confs[i], round, d);
        }
    return NULL;
}

/* Replays of one sequence on two threads at once, round after round: every result equals the one computed alone. */
static void test_replay_concurrent_identical(void **state) {
    (void)state;
    pl_replay_seq_t s = load_workload();
    char err[512];
    pl_replay_result_t ref[N_CONFS];
    for (size_t i = 0; i < N_CONFS; i++) {
        pl_alloc_config_t cfg;
        assert_int_equal(pl_alloc_config_parse(confs[i], &cfg, err, sizeof err), 0);
        assert_int_equal(pl_replay_run(&s, &cfg, 0, &ref[i], err, sizeof err), 0);
    }
    job_t jobs[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        jobs[t] = (job_t){.s = &s, .ref = ref, .rounds = 400};
        assert_int_equal(pthread_create(&th[t], NULL, replayer, &jobs[t]), 0);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        if (jobs[t].n_diff) fprintf(stderr, "thread %d: %d results differ, first %s\n", t, jobs[t].n_diff, jobs[t].first);
        assert_int_equal(jobs[t].n_diff, 0);
    }
    pl_replay_seq_free(&s);
}

/* The whole grid on 2 threads, ten times: the ranked configs and every result equal the 1-thread run's. */
static void test_tune_jobs_identical(void **state) {
    (void)state;
    pl_replay_seq_t s = load_workload();
    char err[512];
    pl_tune_grid_t *g = malloc(sizeof *g);
    assert_non_null(g);
    assert_int_equal(pl_tune_grid_parse(NULL, g, err, sizeof err), 0);
    pl_tune_t one;
    assert_int_equal(pl_tune_run(&s, g, 0, 1, &one, err, sizeof err), 0);
    for (int round = 0; round < 10; round++) {
        pl_tune_t two;
        assert_int_equal(pl_tune_run(&s, g, 0, 2, &two, err, sizeof err), 0);
        assert_int_equal(two.n_entries, one.n_entries);
        for (size_t i = 0; i < one.n_entries; i++) {
            assert_string_equal(two.entries[i].conf, one.entries[i].conf);
            assert_null(pl_replay_result_diff(&two.entries[i].res, &one.entries[i].res));
        }
        pl_tune_free(&two);
    }
    pl_tune_free(&one);
    free(g);
    pl_replay_seq_free(&s);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURES/traces\n", argv[0]);
        return 2;
    }
    traces_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_private_address_space),
        cmocka_unit_test(test_replay_independent_of_base),
        cmocka_unit_test(test_replay_concurrent_identical),
        cmocka_unit_test(test_tune_jobs_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
