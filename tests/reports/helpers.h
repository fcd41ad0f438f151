/* Scaffolding shared by the reports tests (not a test): the scratch directory a test program writes its traces in,
 * as cmocka fixtures, and the steps of writing a trace by hand with the tracer's writer (open it with its process
 * record, emit, close), with the step-by-step trace writer of the live follower's tests. Synthetic training runs
 * written whole are tests/cli/test_report_synth.h's.
 *
 * Header-only (static inline), included by relative path like tests/common/: nothing to link beyond the tracer_dep
 * (the writer) every including test already has. Include it after <cmocka.h>: a failure is a cmocka assertion. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/tmpdir.h"
#include "writer.h"

/* ---- the scratch directory ---- */

/* This test program's scratch directory, /tmp/pl-test-reports-XXXXXX: made by pl_test_dir_setup, removed with
 * everything in it by pl_test_dir_teardown, as a group's or one test's fixtures (a failed assertion skips the rest
 * of a test, not its teardown). */
static char pl_test_dir[128];

static inline int pl_test_dir_setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(pl_test_dir, sizeof pl_test_dir, "reports");
}

static inline int pl_test_dir_teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(pl_test_dir);
}

/* pl_test_dir/name into buf (n bytes); returns buf. */
static inline char *pl_test_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", pl_test_dir, name);
    return buf;
}

/* ---- a trace written by hand ---- */

static inline void pl_test_emit(pl_writer_t *w, const pl_trace_record_t *r) {
    assert_int_equal(pl_writer_emit(w, r), 0);
}

/* pl_test_emit, then flushed: each record its own chunk. */
static inline void pl_test_emit_flush(pl_writer_t *w, const pl_trace_record_t *r) {
    assert_int_equal(pl_writer_emit(w, r), 0);
    assert_int_equal(pl_writer_flush(w), 0);
}

/* A new trace at path with header h (opt NULL: the writer's defaults) and, when proc is not NULL, its process-start
 * record (proc) at t_ns. Close it with pl_test_trace_close. */
static inline pl_writer_t *pl_test_trace_open(const char *path, const pl_trace_header_t *h,
                                              const pl_writer_options_t *opt, int64_t t_ns,
                                              const pl_rec_process_t *proc) {
    pl_writer_t *w = NULL;
    assert_int_equal(pl_writer_open(path, h, opt, &w), 0);
    if (proc) {
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_PROCESS_START;
        r.t_ns = t_ns;
        r.u.process = *proc;
        pl_test_emit(w, &r);
    }
    return w;
}

/* Flush, close and free the writer of a trace. */
static inline void pl_test_trace_close(pl_writer_t *w) {
    assert_int_equal(pl_writer_flush(w), 0);
    pl_writer_close(w);
    pl_writer_destroy(w);
}

/* ---- a trace written step by step (the live follower reads it meanwhile) ---- */

typedef struct pl_test_tw {
    pl_writer_t *w;
    char path[300];  /* in pl_test_dir */
    int64_t step;    /* the last step written */
} pl_test_tw_t;

/* t: the trace pl_test_dir/name of process pid (parent 1), its process-start record (proc) at 1 ns. */
static inline void pl_test_tw_open(pl_test_tw_t *t, const char *name, uint32_t pid, const pl_rec_process_t *proc) {
    memset(t, 0, sizeof *t);
    pl_test_path(t->path, sizeof t->path, name);
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .pid = pid, .ppid = 1};
    t->w = pl_test_trace_open(t->path, &h, NULL, 1, proc);
}

/* n steps of 10 ms after the last one, the live heap at base + per_step x step in each, then flushed. */
static inline void pl_test_tw_steps(pl_test_tw_t *t, int n, double base, double per_step) {
    for (int i = 0; i < n; i++) {
        t->step++;
        pl_trace_record_t r;
        memset(&r, 0, sizeof r);
        r.type = PL_REC_HEAP;
        r.t_ns = 1 + t->step * 10000000;
        r.u.heap.step = (uint64_t)t->step;
        r.u.heap.live_bytes = (int64_t)(base + per_step * (double)t->step);
        pl_test_emit(t->w, &r);
        memset(&r, 0, sizeof r);
        r.type = PL_REC_STEP;
        r.t_ns = 1 + t->step * 10000000;
        r.u.step.step = (uint64_t)t->step;
        pl_test_emit(t->w, &r);
    }
    assert_int_equal(pl_writer_flush(t->w), 0);
}

/* The process-end record, then the trace closed. */
static inline void pl_test_tw_end(pl_test_tw_t *t) {
    pl_trace_record_t r;
    memset(&r, 0, sizeof r);
    r.type = PL_REC_PROCESS_END;
    pl_test_emit(t->w, &r);
    pl_test_trace_close(t->w);
    t->w = NULL;
}
