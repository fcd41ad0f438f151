/* Writer + reader: round trip through a file, O_EXCL/0600, truncation at every byte offset, corrupted
 * checksum, periodic flushing by the writer thread, record loss when the ring is full, and a full disk
 * (file size limit) that stops recording with exactly one message; follow mode resumes a file cut anywhere. Ring
 * mode (ring.h): a collector writing sealed buffers and growing tails gives the same records in order, the producer
 * keeps no descriptor, a process that ends without closing is drained whole, and a full ring's losses are counted. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "event.h"
#include "records.h"
#include "ring.h"
#include "writer.h"
#include "../common/tmpdir.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    return pl_test_tmpdir_make(dir, sizeof dir, "writer");
}

static int teardown(void **state) {
    (void)state;
    return pl_test_tmpdir_remove(dir);
}

static pl_trace_header_t header(void) {
    return (pl_trace_header_t){.version = PL_TRACE_VERSION, .pid = (uint32_t)getpid(), .ppid = 1,
                               .start_realtime_ns = 1, .start_mono_ns = 2};
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Write n records cycling over every type, with small chunks. */
static void write_trace(const char *path, int n, size_t buffer_bytes) {
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    opt.buffer_bytes = buffer_bytes;
    opt.n_buffers = 4;
    pl_trace_header_t h = header();
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, &opt, &w), 0);
    for (int i = 0; i < n; i++) {
        pl_trace_record_t r;
        rec_sample((pl_rec_type_t)(1 + i % PL_REC_TYPE_MAX), (unsigned)i, &r);
        assert_int_equal(pl_writer_emit(w, &r), 0);
        if (i % 4 == 3) assert_int_equal(pl_writer_flush(w), 0); /* never fill the ring: no LOST records */
    }
    pl_writer_destroy(w);
}

static void test_writer_round_trip(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "rt.pltrace");
    write_trace(path, 3000, 4096);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    assert_int_equal(pl_trace_header(r)->pid, (uint32_t)getpid());
    int i = 0, rc;
    pl_trace_record_t got;
    while ((rc = pl_trace_next(r, &got)) == 1) {
        pl_trace_record_t want;
        rec_sample((pl_rec_type_t)(1 + i % PL_REC_TYPE_MAX), (unsigned)i, &want);
        assert_true(rec_equal(&want, &got));
        i++;
    }
    assert_int_equal(rc, 0);
    assert_string_equal(pl_trace_error(r), "");
    assert_int_equal(i, 3000);
    pl_trace_close(r);

    /* O_EXCL: an existing file is never overwritten. */
    pl_trace_header_t h = header();
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, NULL, &w), -EEXIST);
}

/* Chunk boundaries of a well-formed trace file image. */
static int chunk_ends(const uint8_t *b, size_t len, size_t *ends, int *recs_before, int max) {
    size_t off = PL_TRACE_HEADER_BYTES;
    int n = 0, recs = 0;
    while (off + PL_CHUNK_HEADER_BYTES <= len && n < max) {
        uint32_t plen, nrec;
        memcpy(&plen, b + off + 4, 4);
        memcpy(&nrec, b + off + 8, 4);
        off += PL_CHUNK_HEADER_BYTES + plen;
        recs += (int)nrec;
        ends[n] = off;
        recs_before[n] = recs;
        n++;
    }
    assert_int_equal(off, len);
    return n;
}

static void test_writer_truncation_every_offset(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "trunc.pltrace");
    write_trace(path, 60, 512); /* a few kB, ~8 chunks */
    size_t len;
    uint8_t *b = slurp(path, &len);
    size_t ends[64];
    int recs[64];
    int n_chunks = chunk_ends(b, len, ends, recs, 64);
    assert_true(n_chunks >= 4);
    for (size_t cut = 0; cut <= len; cut++) {
        pl_trace_reader_t *r;
        int rc = pl_trace_open_mem(b, cut, "cut.pltrace", &r);
        if (cut < PL_TRACE_HEADER_BYTES) {
            assert_int_equal(rc, -EBADMSG);
            assert_non_null(strstr(pl_trace_open_error(), "cut.pltrace"));
            continue;
        }
        assert_int_equal(rc, 0);
        int expect = 0;
        bool boundary = cut == PL_TRACE_HEADER_BYTES;
        for (int c = 0; c < n_chunks; c++) {
            if (ends[c] <= cut) expect = recs[c];
            if (ends[c] == cut) boundary = true;
        }
        pl_trace_record_t rec;
        int got = 0;
        while ((rc = pl_trace_next(r, &rec)) == 1) got++;
        assert_int_equal(got, expect);
        if (boundary) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(rc, -EBADMSG);
            assert_non_null(strstr(pl_trace_error(r), "cut.pltrace: offset "));
            assert_non_null(strstr(pl_trace_error(r), "truncated"));
            assert_int_equal(pl_trace_next(r, &rec), -EBADMSG); /* sticky */
        }
        pl_trace_close(r);
    }
    free(b);
}

/* Follow mode (plateau watch): a file cut at any offset after its header reads as "the records of its whole chunks,
 * then end for now"; once the rest is appended, reading resumes at the cut chunk and delivers every record once. */
static void test_writer_follow_resumes_at_every_offset(void **state) {
    (void)state;
    char path[300], live[300];
    path_of(path, sizeof path, "follow.pltrace");
    path_of(live, sizeof live, "follow-live.pltrace");
    write_trace(path, 60, 512);
    size_t len;
    uint8_t *b = slurp(path, &len);
    size_t ends[64];
    int recs[64];
    int n_chunks = chunk_ends(b, len, ends, recs, 64);
    for (size_t cut = PL_TRACE_HEADER_BYTES; cut <= len; cut++) {
        FILE *f = fopen(live, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, cut, f), cut);
        fclose(f);
        pl_trace_reader_t *r;
        assert_int_equal(pl_trace_open(live, &r), 0);
        pl_trace_follow(r, 1);
        int expect = 0;
        for (int c = 0; c < n_chunks; c++)
            if (ends[c] <= cut) expect = recs[c];
        pl_trace_record_t rec;
        int got = 0, rc;
        while ((rc = pl_trace_next(r, &rec)) == 1) {
            pl_trace_record_t want;
            rec_sample((pl_rec_type_t)(1 + got % PL_REC_TYPE_MAX), (unsigned)got, &want);
            assert_true(rec_equal(&want, &rec));
            got++;
        }
        assert_int_equal(rc, 0); /* not damage: not written yet */
        assert_int_equal(got, expect);
        f = fopen(live, "ab");
        assert_non_null(f);
        assert_int_equal(fwrite(b + cut, 1, len - cut, f), len - cut);
        fclose(f);
        while ((rc = pl_trace_next(r, &rec)) == 1) {
            pl_trace_record_t want;
            rec_sample((pl_rec_type_t)(1 + got % PL_REC_TYPE_MAX), (unsigned)got, &want);
            assert_true(rec_equal(&want, &rec));
            got++;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(got, 60);
        pl_trace_close(r);
    }
    free(b);
}

static void test_writer_corrupted_checksum_stops_cleanly(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "crc.pltrace");
    write_trace(path, 60, 512);
    size_t len;
    uint8_t *b = slurp(path, &len);
    size_t ends[64];
    int recs[64];
    int n_chunks = chunk_ends(b, len, ends, recs, 64);
    assert_true(n_chunks >= 3);
    b[ends[1] + PL_CHUNK_HEADER_BYTES + 5] ^= 0x40; /* a payload byte of the third chunk */
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open_mem(b, len, "crc.pltrace", &r), 0);
    pl_trace_record_t rec;
    int got = 0, rc;
    while ((rc = pl_trace_next(r, &rec)) == 1) got++;
    assert_int_equal(rc, -EBADMSG);
    assert_int_equal(got, recs[1]);
    char want[64];
    snprintf(want, sizeof want, "offset %zu: chunk checksum mismatch", ends[1]);
    assert_non_null(strstr(pl_trace_error(r), want));
    assert_int_equal(pl_trace_offset(r), ends[0]);
    pl_trace_close(r);
    /* A damaged header is refused at open. */
    b[3] ^= 1;
    assert_int_equal(pl_trace_open_mem(b, len, "crc.pltrace", &r), -EBADMSG);
    free(b);
}

static void test_writer_thread_flushes_periodically(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "thread.pltrace");
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    opt.flush_ms = 50;
    pl_trace_header_t h = header();
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, &opt, &w), 0);
    assert_int_equal(pl_writer_start(w), 0);
    pl_trace_record_t rec;
    rec_sample(PL_REC_STEP, 1, &rec);
    assert_int_equal(pl_writer_emit(w, &rec), 0);
    /* Without any explicit flush, the record reaches the file within a few intervals. */
    int got = 0;
    for (int tries = 0; tries < 40 && got == 0; tries++) {
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        pl_trace_reader_t *r;
        assert_int_equal(pl_trace_open(path, &r), 0);
        pl_trace_record_t o;
        while (pl_trace_next(r, &o) == 1) got += o.type == PL_REC_STEP;
        pl_trace_close(r);
    }
    assert_int_equal(got, 1);
    pl_writer_destroy(w);
}

static void test_writer_full_ring_counts_lost_records(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "lost.pltrace");
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    opt.buffer_bytes = 4096;
    opt.n_buffers = 2;
    pl_trace_header_t h = header();
    pl_writer_t *w;
    assert_int_equal(pl_writer_open(path, &h, &opt, &w), 0);
    pl_trace_record_t rec;
    rec_sample(PL_REC_HOST_ALLOC, 1, &rec);
    int ok = 0, dropped = 0;
    for (int i = 0; i < 1000; i++) {
        int rc = pl_writer_emit(w, &rec);
        if (rc == 0) ok++;
        else if (rc == -ENOBUFS) dropped++;
        else fail();
    }
    assert_true(dropped > 0);
    assert_int_equal(pl_writer_n_lost(w), (uint64_t)dropped);
    assert_int_equal(pl_writer_flush(w), 0);
    assert_int_equal(pl_writer_emit(w, &rec), 0); /* room again: the LOST record goes first */
    pl_writer_destroy(w);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    pl_trace_record_t o;
    uint64_t lost = 0;
    int allocs = 0;
    while (pl_trace_next(r, &o) == 1) {
        if (o.type == PL_REC_LOST) lost += o.u.lost.n_records;
        if (o.type == PL_REC_HOST_ALLOC) allocs++;
    }
    assert_int_equal(lost, (uint64_t)dropped);
    assert_int_equal(allocs, ok + 1);
    pl_trace_close(r);
}

/* Steps, marks and per-step heap totals survive a ring that ordinary records keep full (no writer thread, no
 * flush for a long stretch): every one is in the file, in emission order, and the LOST records add up exactly
 * to the ordinary records dropped. */
static void test_writer_full_ring_keeps_steps(void **state) {
    (void)state;
    static const size_t sizes[] = {256, 4096};
    for (size_t z = 0; z < 2; z++) {
        char path[300];
        snprintf(path, sizeof path, "%s/steps%zu.pltrace", dir, z);
        pl_writer_options_t opt;
        pl_writer_options_default(&opt);
        opt.buffer_bytes = sizes[z];
        opt.n_buffers = 2;
        pl_trace_header_t h = header();
        pl_writer_t *w;
        assert_int_equal(pl_writer_open(path, &h, &opt, &w), 0);
        pl_trace_record_t alloc, step, heap, mark;
        rec_sample(PL_REC_HOST_ALLOC, 1, &alloc);
        rec_sample(PL_REC_MARK, 1, &mark);
        enum { STEPS = 300 };
        int dropped = 0, kept_allocs = 0;
        for (int s = 1; s <= STEPS; s++) {
            for (int i = 0; i < 50; i++) {
                alloc.t_ns = s;
                int rc = pl_writer_emit(w, &alloc);
                if (rc == -ENOBUFS) dropped++;
                else if (rc == 0) kept_allocs++;
                else fail();
            }
            step = (pl_trace_record_t){.type = PL_REC_STEP, .t_ns = s, .u.step = {.step = (uint64_t)s}};
            heap = (pl_trace_record_t){.type = PL_REC_HEAP, .t_ns = s, .u.heap = {.step = (uint64_t)s}};
            mark.t_ns = s;
            assert_int_equal(pl_writer_emit(w, &step), 0);
            assert_int_equal(pl_writer_emit(w, &heap), 0);
            if (s % 100 == 0) assert_int_equal(pl_writer_emit(w, &mark), 0);
            if (s % 60 == 0) assert_int_equal(pl_writer_flush(w), 0); /* a slow writer: rarely drained */
        }
        assert_true(dropped > 0);
        assert_int_equal(pl_writer_n_lost(w), (uint64_t)dropped);
        pl_writer_destroy(w); /* the drops after the last record offered are reported at close */
        pl_trace_reader_t *r;
        assert_int_equal(pl_trace_open(path, &r), 0);
        pl_trace_record_t o;
        uint64_t lost = 0, last_step = 0;
        int allocs = 0, marks = 0, heaps = 0, rc;
        int64_t last_t = 0;
        while ((rc = pl_trace_next(r, &o)) == 1) {
            assert_true(o.t_ns >= last_t); /* emission order kept */
            last_t = o.t_ns;
            if (o.type == PL_REC_LOST) lost += o.u.lost.n_records;
            if (o.type == PL_REC_HOST_ALLOC) allocs++;
            if (o.type == PL_REC_MARK) marks++;
            if (o.type == PL_REC_STEP) {
                assert_int_equal(o.u.step.step, last_step + 1);
                last_step = o.u.step.step;
            }
            if (o.type == PL_REC_HEAP) {
                assert_int_equal(o.u.heap.step, last_step);
                heaps++;
            }
        }
        assert_int_equal(rc, 0);
        pl_trace_close(r);
        assert_int_equal(last_step, STEPS);
        assert_int_equal(heaps, STEPS);
        assert_int_equal(marks, STEPS / 100);
        assert_int_equal(allocs, kept_allocs);
        assert_int_equal(lost, (uint64_t)dropped);
    }
}

static int n_logs;
static void count_log(const char *msg) {
    (void)msg;
    n_logs++;
}

static void test_writer_full_disk_stops_once(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "full.pltrace");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {20000, 20000};
        setrlimit(RLIMIT_FSIZE, &rl);
        pl_writer_options_t opt;
        pl_writer_options_default(&opt);
        opt.buffer_bytes = 4096;
        opt.log = count_log;
        pl_trace_header_t h = header();
        pl_writer_t *w;
        if (pl_writer_open(path, &h, &opt, &w)) _exit(10);
        pl_trace_record_t rec;
        rec_sample(PL_REC_HOST_ALLOC, 1, &rec);
        int flush_err = 0;
        for (int i = 0; i < 5000; i++) {
            if (pl_writer_emit(w, &rec) == -ENOBUFS && pl_writer_flush(w) < 0) flush_err++;
        }
        pl_writer_flush(w);
        if (!pl_writer_stopped(w)) _exit(11);
        if (pl_writer_emit(w, &rec) != -EPIPE) _exit(12);
        if (n_logs != 1 || flush_err < 1) _exit(13);
        pl_writer_destroy(w);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* What was written is readable up to the last whole chunk. */
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    pl_trace_record_t o;
    int n = 0, rc;
    while ((rc = pl_trace_next(r, &o)) == 1) n++;
    assert_true(n > 0);
    assert_true(rc == 0 || rc == -EBADMSG);
    assert_true(pl_trace_offset(r) <= 20000);
    pl_trace_close(r);
}

static int n_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 1024; fd++) n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

/* Every record of `path` against rec_sample's sequence from 0 (LOST records included: the sequence has its own);
 * returns how many. */
static int check_sequence(const char *path) {
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    int i = 0, rc;
    pl_trace_record_t got;
    while ((rc = pl_trace_next(r, &got)) == 1) {
        pl_trace_record_t want;
        rec_sample((pl_rec_type_t)(1 + i % PL_REC_TYPE_MAX), (unsigned)i, &want);
        assert_true(rec_equal(&want, &got));
        i++;
    }
    assert_int_equal(rc, 0);
    assert_string_equal(pl_trace_error(r), "");
    pl_trace_close(r);
    return i;
}

static void test_writer_ring_round_trip(void **state) {
    (void)state;
    char path[300], ring[300];
    path_of(path, sizeof path, "ring.pltrace");
    path_of(ring, sizeof ring, "ring.ring");
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    opt.buffer_bytes = 4096;
    opt.n_buffers = 4;
    pl_trace_header_t h = header();
    pl_writer_t *w;
    int fds = n_fds();
    assert_int_equal(pl_writer_open_ring(path, ring, &h, &opt, &w), 0);
    assert_int_equal(n_fds(), fds); /* the producer keeps no descriptor */
    assert_non_null(pl_writer_ring(w));
    pl_ring_reader_t rd;
    assert_int_equal(pl_ring_attach(ring, path, &rd), 0);
    for (int i = 0; i < 3000; i++) {
        pl_trace_record_t r;
        rec_sample((pl_rec_type_t)(1 + i % PL_REC_TYPE_MAX), (unsigned)i, &r);
        assert_int_equal(pl_writer_emit(w, &r), 0);
        /* sealed buffers often, the tail of the one being filled now and then: chunks of every size */
        if (i % 3 == 2) assert_true(pl_ring_collect(&rd, i % 7 == 0) >= 0);
    }
    pl_writer_close(w);
    assert_true(atomic_load(&pl_writer_ring(w)->events) & PL_RING_EV_CLOSED);
    assert_true(pl_ring_collect(&rd, true) >= 0);
    assert_false(rd.stopped);
    assert_int_equal(pl_writer_n_lost(w), 0); /* never full: each record is where the sequence says */
    pl_writer_destroy(w);
    pl_ring_detach(&rd);
    assert_int_equal(check_sequence(path), 3000);
}

/* A producer that ends without a word (as after SIGKILL): everything it published is drained from the file. */
static void test_writer_ring_drained_after_the_process_is_gone(void **state) {
    (void)state;
    char path[300], ring[300];
    path_of(path, sizeof path, "gone.pltrace");
    path_of(ring, sizeof ring, "gone.ring");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pl_writer_options_t opt;
        pl_writer_options_default(&opt);
        opt.buffer_bytes = 4096;
        opt.n_buffers = 64; /* room for all: nobody collects while it runs */
        pl_trace_header_t h = header();
        pl_writer_t *w;
        if (pl_writer_open_ring(path, ring, &h, &opt, &w)) _exit(1);
        for (int i = 0; i < 500; i++) {
            pl_trace_record_t r;
            rec_sample((pl_rec_type_t)(1 + i % PL_REC_TYPE_MAX), (unsigned)i, &r);
            if (pl_writer_emit(w, &r)) _exit(2);
        }
        _exit(0); /* no close: the ring is not marked closed */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pl_ring_reader_t rd;
    assert_int_equal(pl_ring_attach(ring, path, &rd), 0);
    assert_false(atomic_load(&rd.hdr->events) & PL_RING_EV_CLOSED);
    assert_true(pl_ring_collect(&rd, true) > 0);
    pl_ring_detach(&rd);
    assert_int_equal(check_sequence(path), 500);
}

/* The collector lags: the ring fills, records are dropped and counted, never waited for; once buffers are handed
 * back the LOST record goes first, with the exact count. */
static void test_writer_ring_full_counts_lost_records(void **state) {
    (void)state;
    char path[300], ring[300];
    path_of(path, sizeof path, "rlost.pltrace");
    path_of(ring, sizeof ring, "rlost.ring");
    pl_writer_options_t opt;
    pl_writer_options_default(&opt);
    opt.buffer_bytes = 4096;
    opt.n_buffers = 2;
    pl_trace_header_t h = header();
    pl_writer_t *w;
    assert_int_equal(pl_writer_open_ring(path, ring, &h, &opt, &w), 0);
    pl_ring_reader_t rd;
    assert_int_equal(pl_ring_attach(ring, path, &rd), 0);
    pl_trace_record_t rec;
    rec_sample(PL_REC_HOST_ALLOC, 1, &rec);
    int ok = 0, dropped = 0;
    for (int i = 0; i < 1000; i++) {
        int rc = pl_writer_emit(w, &rec);
        if (rc == 0) ok++;
        else if (rc == -ENOBUFS) dropped++;
        else fail();
    }
    assert_true(dropped > 0);
    assert_int_equal(pl_writer_n_lost(w), (uint64_t)dropped);
    assert_true(pl_ring_collect(&rd, false) > 0); /* the sealed buffer is handed back */
    assert_int_equal(pl_writer_emit(w, &rec), 0);
    pl_writer_close(w);
    assert_true(pl_ring_collect(&rd, true) > 0);
    pl_writer_destroy(w);
    pl_ring_detach(&rd);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    pl_trace_record_t o;
    uint64_t lost = 0;
    int allocs = 0;
    while (pl_trace_next(r, &o) == 1) {
        if (o.type == PL_REC_LOST) lost += o.u.lost.n_records;
        if (o.type == PL_REC_HOST_ALLOC) allocs++;
    }
    assert_int_equal(lost, (uint64_t)dropped);
    assert_int_equal(allocs, ok + 1);
    pl_trace_close(r);
}

static char last_log[256];
static void keep_log(const char *msg) {
    n_logs++;
    snprintf(last_log, sizeof last_log, "%s", msg);
}

/* ulimit -f with SIGXFSZ at its default action (it kills): the writer never writes past the limit, so the process
 * is never signalled; it stops recording with one line naming the limit, and the file ends at its last whole chunk
 * (no partial chunk: the reader ends cleanly). */
static void test_writer_file_size_limit_never_raises_sigxfsz(void **state) {
    (void)state;
    char path[300];
    path_of(path, sizeof path, "fsize.pltrace");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = {20000, 20000};
        setrlimit(RLIMIT_FSIZE, &rl);
        pl_writer_options_t opt;
        pl_writer_options_default(&opt);
        opt.buffer_bytes = 4096;
        opt.log = keep_log;
        n_logs = 0;
        pl_trace_header_t h = header();
        pl_writer_t *w;
        if (pl_writer_open(path, &h, &opt, &w)) _exit(10);
        pl_trace_record_t rec;
        rec_sample(PL_REC_HOST_ALLOC, 1, &rec);
        for (int i = 0; i < 5000; i++)
            if (pl_writer_emit(w, &rec) == -ENOBUFS) pl_writer_flush(w);
        pl_writer_flush(w);
        if (!pl_writer_stopped(w)) _exit(11);
        if (n_logs != 1 || !strstr(last_log, "file-size limit (ulimit -f, 20000 bytes)")) _exit(13);
        pl_writer_destroy(w);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) fail_msg("the writer's process was killed by signal %d", WTERMSIG(st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    pl_trace_reader_t *r;
    assert_int_equal(pl_trace_open(path, &r), 0);
    pl_trace_record_t o;
    int n = 0, rc;
    while ((rc = pl_trace_next(r, &o)) == 1) n++;
    assert_true(n > 0);
    assert_int_equal(rc, 0); /* whole chunks only */
    assert_true(pl_trace_offset(r) <= 20000);
    pl_trace_close(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_round_trip),
        cmocka_unit_test(test_writer_truncation_every_offset),
        cmocka_unit_test(test_writer_follow_resumes_at_every_offset),
        cmocka_unit_test(test_writer_corrupted_checksum_stops_cleanly),
        cmocka_unit_test(test_writer_thread_flushes_periodically),
        cmocka_unit_test(test_writer_full_ring_counts_lost_records),
        cmocka_unit_test(test_writer_full_ring_keeps_steps),
        cmocka_unit_test(test_writer_full_disk_stops_once),
        cmocka_unit_test(test_writer_file_size_limit_never_raises_sigxfsz),
        cmocka_unit_test(test_writer_ring_round_trip),
        cmocka_unit_test(test_writer_ring_drained_after_the_process_is_gone),
        cmocka_unit_test(test_writer_ring_full_counts_lost_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
