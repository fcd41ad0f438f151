/* longrun_gen: the traces of a long multi-rank training job, generated fast, as plateau run would write them
 * (bench/longrun_bench.sh; docs/long-runs.md).
 *
 * usage: longrun_gen full|bounded DIR RANKS HOURS [STEPS_PER_S=11]
 *        longrun_gen compact IN_DIR OUT_DIR   (every trace of IN_DIR, compacted as plateau run's collector does,
 *                                              into OUT_DIR under the same name, with the run-id file)
 *        longrun_gen repack IN_DIR OUT_DIR    (the same records, every one kept, written by this version's writer:
 *                                              a 1.9 trace's records packed (trace format 2.0), for comparing
 *                                              the report of one run's records in both forms)
 *        longrun_gen clone TRACE OUT_DIR RANKS (RANKS copies of one rank's trace, each its own rank, pid and node:
 *                                              OUT_DIR/node<rank/8>/<pid>.0.pltrace; for jobs too long to generate
 *                                              rank by rank)
 *
 * Each rank is one process running HOURS of a training loop at STEPS_PER_S, with the record mix measured on
 * bench/torch_realistic.py's trainer under plateau run (bench/RESULTS.md, "Long runs"): per step 25 sampled host
 * allocations freed within the step (of 400 call stacks), one freed in the next step, the step's heap and RSS
 * totals and its step record; heap and RSS samples every 100 ms; 800 stacks (40 native and 20 Python frames each),
 * 1,700 frames and 650 Python frames once; allocations kept for good during the first 300 steps (a warmup), then a
 * flat loop. `full` writes every record (PLATEAU_TRACE_FULL=1); `bounded` passes the same records through the
 * collector's compaction (collector/compact.c), exactly as plateau run does. Files are named <pid>.0.pltrace, one
 * rank per pid, node "node<rank/8>" (8 ranks per node). Prints the bytes written per rank and in all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plateau/trace.h>

#include "compact.h"
#include "event.h"
#include "pack.h"
#include "writer.h"

#define CHUNK ((size_t)256 << 10)

typedef struct gen {
    int fd;
    uint64_t off;
    uint32_t seq;
    uint8_t buf[CHUNK];
    size_t len;
    uint32_t n;
    pl_compact_t *compact;   /* NULL: full */
    int64_t now_ns;
    uint64_t rng;
} gen_t;

static int file_sink(void *ctx, const uint8_t *payload, uint32_t len, uint32_t n) {
    gen_t *g = ctx;
    static uint8_t packed[PL_TRACE_MAX_CHUNK_BYTES]; /* packed in a copy (2.0): the payload is the caller's */
    if (len > sizeof packed) return -EINVAL;
    memcpy(packed, payload, len);
    int64_t rc = pl_writer_chunk_write(g->fd, g->off, g->seq, packed, len, n);
    if (rc < 0) return (int)rc;
    g->seq++;
    g->off += (uint64_t)rc;
    return (int)rc;
}

static void flush_buf(gen_t *g) {
    if (!g->len) return;
    int rc = g->compact ? pl_compact_feed(g->compact, g->buf, (uint32_t)g->len, g->n, g->now_ns)
                        : file_sink(g, g->buf, (uint32_t)g->len, g->n);
    if (rc > 0) rc = 0; /* bytes written */
    if (!rc && g->compact) rc = pl_compact_tick(g->compact, g->now_ns);
    if (rc) {
        fprintf(stderr, "longrun_gen: write: %s\n", strerror(-rc));
        exit(1);
    }
    g->len = 0;
    g->n = 0;
}

static void put(gen_t *g, const pl_trace_record_t *r) {
    size_t m = pl_event_encode(r, g->buf + g->len, CHUNK - g->len);
    if (!m) {
        flush_buf(g);
        m = pl_event_encode(r, g->buf, CHUNK);
    }
    g->len += m;
    g->n++;
}

static uint64_t rnd(gen_t *g) {
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

static void host_alloc(gen_t *g, int64_t t, uint64_t addr, uint64_t size, uint32_t stack) {
    pl_trace_record_t r = {.type = PL_REC_HOST_ALLOC, .t_ns = t};
    r.u.host_alloc = (pl_rec_host_alloc_t){.addr = addr, .size = size, .stack_id = stack, .tid = 7, .kind = 0,
                                           .call_ordinal = PL_TRACE_NA};
    put(g, &r);
}

static void host_free(gen_t *g, int64_t t, uint64_t addr) {
    pl_trace_record_t r = {.type = PL_REC_HOST_FREE, .t_ns = t};
    r.u.host_free = (pl_rec_host_free_t){.addr = addr, .tid = 7};
    put(g, &r);
}

static void totals(gen_t *g, int64_t t, uint64_t step, int64_t live, uint64_t n_calls) {
    pl_trace_record_t r = {.type = PL_REC_HEAP, .t_ns = t};
    r.u.heap = (pl_rec_heap_t){.step = step, .live_bytes = live, .live_count = live / 512, .n_alloc = n_calls,
                               .n_free = n_calls - 1000, .alloc_bytes = n_calls * 700};
    put(g, &r);
    r = (pl_trace_record_t){.type = PL_REC_RSS, .t_ns = t + 50000};
    r.u.rss = (pl_rec_rss_t){.step = step, .rss_anon = (uint64_t)live + 300000000ull, .rss_file = 150000000ull,
                             .rss_shmem = 1 << 20, .pss = PL_TRACE_NA, .cgroup_current = PL_TRACE_NA,
                             .device_used = PL_TRACE_NA, .device_total = PL_TRACE_NA};
    put(g, &r);
}

static int one_rank(const char *dir, int rank, double hours, double steps_per_s, bool bounded, uint64_t *bytes) {
    uint32_t pid = 1000 + (uint32_t)rank;
    char path[4096], node[32];
    snprintf(path, sizeof path, "%s/%u.0.pltrace", dir, pid);
    snprintf(node, sizeof node, "node%d", rank / 8);
    static gen_t g;
    memset(&g, 0, sizeof g);
    g.rng = 88172645463325252ull + (uint64_t)rank;
    g.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (g.fd < 0) {
        fprintf(stderr, "longrun_gen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const int64_t t0 = 1000000000LL;
    pl_trace_header_t h = {.version = PL_TRACE_VERSION, .version_minor = PL_TRACE_VERSION_MINOR, .pid = pid,
                           .ppid = 1, .start_realtime_ns = 1790000000000000000LL, .start_mono_ns = t0};
    uint8_t hb[PL_TRACE_HEADER_BYTES];
    pl_event_header_encode(&h, hb);
    if (pwrite(g.fd, hb, sizeof hb, 0) != (ssize_t)sizeof hb) return -1;
    g.off = sizeof hb;
    if (bounded) g.compact = pl_compact_new(&(pl_compact_opts_t){.enabled = true}, file_sink, &g);
    static const char *const argv[] = {"python3", "train.py"};
    pl_trace_record_t r = {.type = PL_REC_PROCESS_START, .t_ns = t0};
    r.u.process = (pl_rec_process_t){.pid = pid, .ppid = 1, .rank = rank, .local_rank = rank % 8,
                                     .sample_bytes = 524288, .interval_ns = 100000000, .host_mem_bytes = 1ull << 40,
                                     .cgroup_max_bytes = PL_TRACE_NA, .start_realtime_ns = h.start_realtime_ns,
                                     .exe = "/usr/bin/python3", .argc = 2, .n_argv = 2, .host_allocator = "glibc",
                                     .host_allocator_version = "2.36", .node = node};
    r.u.process.argv[0] = argv[0];
    r.u.process.argv[1] = argv[1];
    put(&g, &r);
    /* once: modules, frames, Python frames, stacks */
    r = (pl_trace_record_t){.type = PL_REC_MODULE, .t_ns = t0};
    r.u.module = (pl_rec_module_t){.module_id = 1, .base = 0x7f0000000000ull, .path = "/usr/lib/libtorch_cpu.so",
                                   .build_id = "", .file_size = PL_TRACE_NA};
    put(&g, &r);
    for (uint32_t i = 0; i < 1700; i++) {
        r = (pl_trace_record_t){.type = PL_REC_FRAME, .t_ns = t0};
        r.u.frame = (pl_rec_frame_t){.pc = 0x7f0000100000ull + i * 64, .module_id = 1, .module_offset = 0x100000 + i * 64,
                                     .symbol = i % 4 ? "" : "_ZN2at6native12_GLOBAL__N_18some_kernelEv",
                                     .symbol_offset = 0x20};
        put(&g, &r);
    }
    for (uint32_t i = 1; i <= 650; i++) {
        r = (pl_trace_record_t){.type = PL_REC_PYFRAME, .t_ns = t0};
        r.u.pyframe = (pl_rec_pyframe_t){.pyframe_id = i, .line = (int32_t)(10 + i),
                                         .file = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
                                         .function = "Module._call_impl"};
        put(&g, &r);
    }
    for (uint32_t id = 1; id <= 800; id++) {
        r = (pl_trace_record_t){.type = PL_REC_STACK, .t_ns = t0};
        r.u.stack.stack_id = id;
        r.u.stack.n_frames = 40;
        for (uint32_t k = 0; k < 40; k++) r.u.stack.pcs[k] = 0x7f0000100000ull + ((id * 7 + k * 13) % 1700) * 64;
        r.u.stack.n_py = 20;
        for (uint32_t k = 0; k < 20; k++) r.u.stack.py[k] = 1 + (id * 3 + k * 11) % 650;
        put(&g, &r);
    }
    uint64_t n_steps = (uint64_t)(hours * 3600.0 * steps_per_s);
    const int64_t step_ns = (int64_t)(1e9 / steps_per_s), sample_ns = 100000000;
    int64_t next_sample = t0 + sample_ns;
    uint64_t n_calls = 1000, kept = 0;
    int64_t live = 200000000;
    for (uint64_t s = 1; s <= n_steps; s++) {
        int64_t t = t0 + (int64_t)s * step_ns;
        g.now_ns = t;
        uint64_t carry = 0x500000000000ull + (s % 2) * 0x100000;
        if (s > 1) host_free(&g, t + 1000, 0x500000000000ull + ((s - 1) % 2) * 0x100000);
        host_alloc(&g, t + 2000, carry, 65536, 1 + (uint32_t)(rnd(&g) % 400));
        for (int k = 0; k < 25; k++) { /* scratch, freed within the step */
            uint64_t a = 0x600000000000ull + (uint64_t)k * 0x100000;
            int64_t ta = t + 3000 + k * (step_ns / 40);
            host_alloc(&g, ta, a, 4096 + (rnd(&g) % 512) * 16, 1 + (uint32_t)(rnd(&g) % 400));
            host_free(&g, ta + step_ns / 80, a);
            while (next_sample < ta) { /* the periodic samples fall between the step's allocations */
                totals(&g, next_sample, 0, live + (int64_t)(rnd(&g) % 65536), n_calls);
                next_sample += sample_ns;
            }
            n_calls += 2;
        }
        if (s <= 300) { /* warmup: a few allocations kept for good */
            host_alloc(&g, t + step_ns - 3000, 0x700000000000ull + kept++ * 0x10000, 262144, 401 + (uint32_t)(s % 8));
            live += 262144;
        }
        totals(&g, t + step_ns - 2000, s, live + (int64_t)(rnd(&g) % 65536), n_calls);
        r = (pl_trace_record_t){.type = PL_REC_STEP, .t_ns = t + step_ns - 1000};
        r.u.step = (pl_rec_step_t){.step = s, .source = PL_STEP_OPTIMIZER};
        put(&g, &r);
        /* plateau run's collector takes the ring's records as they are published, every few milliseconds, and
         * ticks: kept records then reach the file in chunks of at most 250 ms of the run (a few steps each), not
         * 256 KiB ones */
        if (g.compact) flush_buf(&g);
    }
    r = (pl_trace_record_t){.type = PL_REC_PROCESS_END, .t_ns = t0 + (int64_t)(n_steps + 1) * step_ns};
    put(&g, &r);
    flush_buf(&g);
    if (g.compact) {
        pl_compact_flush(g.compact, true, g.now_ns);
        pl_compact_free(g.compact);
    }
    close(g.fd);
    *bytes = g.off;
    return 0;
}

/* An existing trace through the collector's compaction: its chunks' payloads in, as the ring hands them over. */
static int compact_one(const char *in, const char *out, bool compact) {
    FILE *f = fopen(in, "rb");
    if (!f) return -errno;
    static gen_t g;
    memset(&g, 0, sizeof g);
    g.fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    uint8_t hb[PL_TRACE_HEADER_BYTES];
    pl_trace_header_t th;
    bool ok = g.fd >= 0 && fread(hb, 1, sizeof hb, f) == sizeof hb && pl_event_header_decode(hb, &th) == 0;
    if (ok) { /* written by this version's writer: packed records (2.0) */
        th.version_minor = PL_TRACE_VERSION_MINOR;
        pl_event_header_encode(&th, hb);
    }
    if (!ok || pwrite(g.fd, hb, sizeof hb, 0) != (ssize_t)sizeof hb) {
        fclose(f);
        return -EIO;
    }
    g.off = sizeof hb;
    g.compact = pl_compact_new(&(pl_compact_opts_t){.enabled = compact}, file_sink, &g);
    static uint8_t payload[PL_TRACE_MAX_CHUNK_BYTES];
    uint8_t ch[PL_CHUNK_HEADER_BYTES];
    int64_t now = 0;
    while (fread(ch, 1, sizeof ch, f) == sizeof ch) {
        uint32_t len, n;
        memcpy(&len, ch + 4, 4);
        memcpy(&n, ch + 8, 4);
        if (len > sizeof payload || fread(payload, 1, len, f) != len) break;
        now += 1000000;
        /* the collector compacts the ordinary records the program wrote: unpack a 2.0 file's chunks first */
        static uint8_t plain[PL_TRACE_MAX_CHUNK_BYTES];
        len = (uint32_t)pl_pack_unpack(payload, len, plain, sizeof plain, &n);
        pl_compact_feed(g.compact, plain, len, n, now);
        pl_compact_tick(g.compact, now);
    }
    pl_compact_flush(g.compact, true, now);
    pl_compact_stats_t st;
    pl_compact_get_stats(g.compact, &st);
    pl_compact_free(g.compact);
    fclose(f);
    close(g.fd);
    printf("%s: %" PRIu64 " -> %" PRIu64 " bytes of records, %" PRIu64 " pairs and %" PRIu64 " samples counted\n",
           in, st.bytes_in, st.bytes_out, st.n_pairs, st.n_samples);
    return 0;
}

/* Copy `src` as rank `rank`: the header's pid and the process_start record (the first chunk, re-encoded) changed,
 * every later chunk copied as it is (their checksums do not depend on their offset). */
static int clone_one(const char *src, const char *dir, int rank) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -errno;
    uint8_t hb[PL_TRACE_HEADER_BYTES], ch[PL_CHUNK_HEADER_BYTES];
    static uint8_t payload[PL_TRACE_MAX_CHUNK_BYTES], out[PL_TRACE_MAX_CHUNK_BYTES];
    pl_trace_header_t h;
    uint32_t len, n;
    if (read(in, hb, sizeof hb) != (ssize_t)sizeof hb || pl_event_header_decode(hb, &h) < 0 ||
        read(in, ch, sizeof ch) != (ssize_t)sizeof ch) {
        close(in);
        return -EBADMSG;
    }
    memcpy(&len, ch + 4, 4);
    memcpy(&n, ch + 8, 4);
    if (len > sizeof payload || read(in, payload, len) != (ssize_t)len) {
        close(in);
        return -EBADMSG;
    }
    uint32_t pid = 1000 + (uint32_t)rank;
    char node[32], path[4096];
    snprintf(node, sizeof node, "node%d", rank / 8);
    snprintf(path, sizeof path, "%s/%s", dir, node);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%u.0.pltrace", dir, node, pid);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        close(in);
        return -errno;
    }
    h.pid = pid;
    pl_event_header_encode(&h, hb);
    size_t olen = 0;
    pl_pack_ctx_t pack;
    pl_pack_reset(&pack);
    for (size_t off = 0; off < len;) {
        pl_trace_record_t r;
        size_t used;
        if (pl_pack_decode(&pack, payload + off, len - off, &r, &used) != 0) break;
        if (r.type == PL_REC_PROCESS_START) {
            r.u.process.pid = pid;
            r.u.process.rank = rank;
            r.u.process.local_rank = rank % 8;
            r.u.process.node = node;
        }
        olen += pl_event_encode(&r, out + olen, sizeof out - olen);
        off += used;
    }
    olen = pl_pack_chunk(out, olen);
    pl_event_chunk_header(ch, out, (uint32_t)olen, n, 0);
    int rc = write(fd, hb, sizeof hb) == (ssize_t)sizeof hb && write(fd, ch, sizeof ch) == (ssize_t)sizeof ch &&
                     write(fd, out, olen) == (ssize_t)olen
                 ? 0
                 : -EIO;
    ssize_t k;
    while (!rc && (k = read(in, payload, sizeof payload)) > 0)
        if (write(fd, payload, (size_t)k) != k) rc = -EIO;
    close(fd);
    close(in);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "clone")) {
        mkdir(argv[3], 0700);
        for (int k = 0; k < atoi(argv[4]); k++)
            if (clone_one(argv[2], argv[3], k)) {
                fprintf(stderr, "longrun_gen: cannot clone %s\n", argv[2]);
                return 1;
            }
        return 0;
    }
    if (argc == 4 && (!strcmp(argv[1], "compact") || !strcmp(argv[1], "repack"))) {
        bool compact = !strcmp(argv[1], "compact");
        DIR *d = opendir(argv[2]);
        if (!d || (mkdir(argv[3], 0700) < 0 && errno != EEXIST)) return 1;
        struct dirent *e;
        while ((e = readdir(d))) {
            char in[4096], out[4096];
            snprintf(in, sizeof in, "%s/%s", argv[2], e->d_name);
            snprintf(out, sizeof out, "%s/%s", argv[3], e->d_name);
            size_t n = strlen(e->d_name);
            if (!strcmp(e->d_name, PL_TRACE_RUN_ID_FILE)) {
                char cmd[9000];
                snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", in, out);
                if (system(cmd)) return 1;
            } else if (n > 8 && !strcmp(e->d_name + n - 8, ".pltrace") && compact_one(in, out, compact)) {
                fprintf(stderr, "longrun_gen: %s: cannot compact\n", in);
                return 1;
            }
        }
        closedir(d);
        return 0;
    }
    if (argc < 5 || (strcmp(argv[1], "full") && strcmp(argv[1], "bounded"))) {
        fprintf(stderr, "usage: %s full|bounded DIR RANKS HOURS [STEPS_PER_S=11]\n", argv[0]);
        return 2;
    }
    bool bounded = !strcmp(argv[1], "bounded");
    const char *dir = argv[2];
    int ranks = atoi(argv[3]);
    double hours = atof(argv[4]), sps = argc > 5 ? atof(argv[5]) : 11.0;
    if (ranks < 1 || hours <= 0 || sps <= 0) return 2;
    mkdir(dir, 0700);
    uint64_t total = 0;
    for (int k = 0; k < ranks; k++) {
        uint64_t b = 0;
        if (one_rank(dir, k, hours, sps, bounded, &b)) return 1;
        total += b;
        if (k == 0) printf("rank 0: %" PRIu64 " bytes for %.3g h: %.1f MB/h\n", b, hours, (double)b / 1e6 / hours);
    }
    printf("%d ranks: %" PRIu64 " bytes (%.1f MB per rank-hour)\n", ranks, total, (double)total / 1e6 / hours / ranks);
    return 0;
}
