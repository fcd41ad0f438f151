/* tests/allocator/helpers.h: small fixtures shared by the allocator tests. */
#pragma once

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <plateau/alloc.h>

#include "internal.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

typedef struct fixture {
    pl_backend_t *be;
    pl_alloc_t *a;
} fixture_t;

/* Sim device of `capacity` bytes (touch as given) and an allocator with config `conf` (a string). */
static inline void fx_open(fixture_t *f, size_t capacity, bool touch, const char *conf) {
    pl_sim_options_t o;
    pl_sim_options_default(&o);
    o.capacity_bytes = capacity;
    o.touch = touch;
    assert_int_equal(pl_backend_sim_create(&o, &f->be), 0);
    pl_alloc_config_t c;
    char err[512];
    int rc = pl_alloc_config_parse(conf, &c, err, sizeof err);
    if (rc) fail_msg("config '%s': %s", conf, err);
    assert_int_equal(pl_alloc_create(f->be, &c, &f->a, err, sizeof err), 0);
}

static inline void fx_open_opts(fixture_t *f, const pl_sim_options_t *o, const char *conf) {
    assert_int_equal(pl_backend_sim_create(o, &f->be), 0);
    pl_alloc_config_t c;
    char err[512];
    if (pl_alloc_config_parse(conf, &c, err, sizeof err)) fail_msg("config '%s': %s", conf, err);
    assert_int_equal(pl_alloc_create(f->be, &c, &f->a, err, sizeof err), 0);
}

static inline void fx_check(fixture_t *f) {
    char err[512];
    if (pl_alloc_check(f->a, err, sizeof err)) fail_msg("invariant broken: %s", err);
}

static inline void fx_close(fixture_t *f) {
    fx_check(f);
    pl_alloc_destroy(f->a);
    pl_backend_destroy(f->be);
}

static inline pl_alloc_stats_t fx_stats(fixture_t *f) {
    pl_alloc_stats_t s;
    pl_alloc_get_stats(f->a, &s);
    return s;
}
