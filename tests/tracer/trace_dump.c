/* plateau-trace-dump TRACE...: print every record, one per line ("type key=value ..."), then the reader's
 * verdict on the file. A debugging aid and a helper for shell-level tests. Exit 0 clean, 1 stopped early.
 *
 * plateau-trace-dump --stats TRACE|DIR...: what the bytes of the traces are, record kind by record kind (count,
 * bytes, share, bytes per hour of the trace's own duration), summed over every file given (a directory: its
 * *.pltrace files), with the chunk headers and the file header apart. It walks the chunks itself (type and length
 * of each record, no decoding), so it counts the bytes on disk exactly; it stops at the first damaged chunk, as
 * the reader does. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <plateau/trace.h>

#include "event.h"
#include "pack.h"

static void print(const pl_trace_record_t *r) {
    printf("%" PRId64 " %s", r->t_ns, pl_trace_type_name(r->type));
    switch (r->type) {
    case PL_REC_PROCESS_START:
        printf(" pid=%u ppid=%u exec_seq=%u rank=%d sample_bytes=%" PRIu64 " exe=%s argc=%u", r->u.process.pid,
               r->u.process.ppid, r->u.process.exec_seq, r->u.process.rank, r->u.process.sample_bytes,
               r->u.process.exe, r->u.process.argc);
        for (uint32_t i = 0; i < r->u.process.n_argv; i++) printf(" argv[%u]=%s", i, r->u.process.argv[i]);
        printf(" host_allocator=%s host_allocator_version=%s", r->u.process.host_allocator,
               r->u.process.host_allocator_version);
        break;
    case PL_REC_STEP: printf(" step=%" PRIu64 " source=%u", r->u.step.step, r->u.step.source); break;
    case PL_REC_MARK: printf(" step=%" PRIu64 " label=%s", r->u.mark.step, r->u.mark.label); break;
    case PL_REC_RSS:
        printf(" step=%" PRIu64 " anon=%" PRIu64 " file=%" PRIu64 " shmem=%" PRIu64 " pss=%" PRIu64 " cgroup=%" PRIu64,
               r->u.rss.step, r->u.rss.rss_anon, r->u.rss.rss_file, r->u.rss.rss_shmem, r->u.rss.pss, r->u.rss.cgroup_current);
        break;
    case PL_REC_HEAP:
        printf(" step=%" PRIu64 " live_bytes=%" PRId64 " live_count=%" PRId64 " n_alloc=%" PRIu64 " n_free=%" PRIu64
               " mmap_live_bytes=%" PRId64,
               r->u.heap.step, r->u.heap.live_bytes, r->u.heap.live_count, r->u.heap.n_alloc, r->u.heap.n_free,
               r->u.heap.mmap_live_bytes);
        break;
    case PL_REC_HOST_ALLOC:
        printf(" addr=0x%" PRIx64 " size=%" PRIu64 " stack=%u tid=%u kind=%u", r->u.host_alloc.addr,
               r->u.host_alloc.size, r->u.host_alloc.stack_id, r->u.host_alloc.tid, r->u.host_alloc.kind);
        if (r->u.host_alloc.call_ordinal != PL_TRACE_NA) printf(" ordinal=%" PRIu64, r->u.host_alloc.call_ordinal);
        break;
    case PL_REC_HOST_FREE: printf(" addr=0x%" PRIx64 " tid=%u", r->u.host_free.addr, r->u.host_free.tid); break;
    case PL_REC_DEVICE_ALLOC:
    case PL_REC_DEVICE_FREE:
    case PL_REC_DEVICE_MAP:
    case PL_REC_DEVICE_UNMAP:
    case PL_REC_DEVICE_OOM:
        printf(" source=%u device=%d allocator=%u addr=0x%" PRIx64 " size=%" PRIu64 " requested=%" PRIu64
               " stream=%" PRIu64 " stack=%u",
               r->u.device.source, r->u.device.device, r->u.device.allocator_id, r->u.device.addr,
               r->u.device.size, r->u.device.requested, r->u.device.stream, r->u.device.stack_id);
        break;
    case PL_REC_ALLOC_STATS:
        printf(" allocator=%u step=%" PRIu64 " allocated=%" PRId64 " reserved=%" PRId64 " n_allocations=%" PRId64,
               r->u.alloc_stats.allocator_id, r->u.alloc_stats.step, r->u.alloc_stats.allocated_bytes,
               r->u.alloc_stats.reserved_bytes, r->u.alloc_stats.n_allocations);
        break;
    case PL_REC_STACK:
        printf(" id=%u", r->u.stack.stack_id);
        for (uint32_t i = 0; i < r->u.stack.n_frames; i++) printf(" 0x%" PRIx64, r->u.stack.pcs[i]);
        for (uint32_t i = 0; i < r->u.stack.n_py; i++) printf(" py%u", r->u.stack.py[i]);
        break;
    case PL_REC_FRAME:
        printf(" pc=0x%" PRIx64 " module=%u offset=0x%" PRIx64 " symbol=%s+0x%" PRIx64, r->u.frame.pc,
               r->u.frame.module_id, r->u.frame.module_offset, r->u.frame.symbol, r->u.frame.symbol_offset);
        break;
    case PL_REC_MODULE:
        printf(" id=%u base=0x%" PRIx64 " path=%s build_id=%s size=%" PRIu64 " mtime_ns=%" PRId64,
               r->u.module.module_id, r->u.module.base, r->u.module.path, r->u.module.build_id,
               r->u.module.file_size, r->u.module.file_mtime_ns);
        break;
    case PL_REC_THREAD_NAME: printf(" tid=%u name=%s", r->u.thread_name.tid, r->u.thread_name.name); break;
    case PL_REC_LOST: printf(" n_records=%" PRIu64, r->u.lost.n_records); break;
    case PL_REC_EXEC: printf(" path=%s", r->u.exec.path); break;
    case PL_REC_PYFRAME:
        printf(" id=%u %s:%d in %s", r->u.pyframe.pyframe_id, r->u.pyframe.file, r->u.pyframe.line,
               r->u.pyframe.function);
        break;
    case PL_REC_RETENTION: {
        const pl_rec_retention_t *q = &r->u.retention;
        printf(" census=%u step=%" PRIu64 " flags=%u path=%s kind=%s items=%" PRIu64 " nodes=%" PRIu64
               " bytes=%" PRIu64 " what=%s at=%s:%d fix=%s",
               q->census, q->step, q->flags, q->path, q->kind, q->items, q->nodes, q->bytes, q->what, q->file,
               q->line, q->fix);
        if (q->n_ranges) printf(" ranges=%u first=0x%" PRIx64 "+%" PRIu64, q->n_ranges, q->range_addr[0], q->range_bytes[0]);
        break;
    }
    case PL_REC_AGGREGATE: {
        const pl_rec_aggregate_t *q = &r->u.aggregate;
        printf(" what=%u stack=%u steps=%" PRIu64 "..%" PRIu64 " n=%" PRIu64 " bytes=%" PRIu64 " sized=%" PRIu64
               " 8mod16=%" PRIu64,
               q->what, q->stack_id, q->step_first, q->step_last, q->n, q->bytes, q->n_sized, q->n_8mod16);
        break;
    }
    default: break;
    }
    putchar('\n');
}

/* ---- --stats ---- */

#define N_KINDS 256

typedef struct stats {
    uint64_t n[N_KINDS], bytes[N_KINDS]; /* per record type (types past 255 share the last row) */
    uint64_t chunk_bytes, header_bytes, file_bytes, n_chunks, n_files;
    double seconds;                      /* summed over files: last record time - trace start */
} stats_t;

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* One file into *st. Returns 0, or -1 when it is not a trace (said on stderr). Damage ends the walk quietly. */
static int stats_file(const char *path, stats_t *st) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t hdr[PL_TRACE_HEADER_BYTES];
    pl_trace_header_t h;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || pl_event_header_decode(hdr, &h) < 0) {
        fprintf(stderr, "%s: not a plateau trace\n", path);
        fclose(f);
        return -1;
    }
    st->n_files++;
    st->header_bytes += sizeof hdr;
    st->file_bytes += sizeof hdr;
    static uint8_t payload[PL_TRACE_MAX_CHUNK_BYTES];
    int64_t last_t = h.start_mono_ns;
    uint8_t ch[PL_CHUNK_HEADER_BYTES];
    while (fread(ch, 1, sizeof ch, f) == sizeof ch) {
        uint32_t len = rd32(ch + 4);
        if (rd32(ch) != PL_CHUNK_MAGIC || len > PL_TRACE_MAX_CHUNK_BYTES || fread(payload, 1, len, f) != len) break;
        st->n_chunks++;
        st->chunk_bytes += sizeof ch;
        st->file_bytes += sizeof ch + len;
        pl_pack_ctx_t pack; /* a packed record (2.0) counts as its kind: its bytes are what the kind costs */
        pl_pack_reset(&pack);
        for (uint32_t off = 0; off < len;) {
            pl_trace_record_t rec;
            size_t used;
            int rc = pl_pack_decode(&pack, payload + off, len - off, &rec, &used);
            if (rc < 0) break;
            unsigned type = rc == 0 ? (unsigned)rec.type : rd16(payload + off);
            if (rc == 0 && rec.t_ns > last_t) last_t = rec.t_ns;
            unsigned k = type < N_KINDS ? type : N_KINDS - 1;
            st->n[k]++;
            st->bytes[k] += used;
            off += (uint32_t)used;
        }
    }
    st->seconds += (double)(last_t - h.start_mono_ns) / 1e9;
    fclose(f);
    return 0;
}

static int stats_path(const char *path, stats_t *st) {
    struct stat sb;
    if (stat(path, &sb) < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) return stats_file(path, st);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 9 || strcmp(e->d_name + n - 8, ".pltrace")) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stats_file(full, st) < 0) rc = -1;
    }
    closedir(d);
    return rc;
}

static void stats_row(const char *name, uint64_t n, uint64_t bytes, const stats_t *st) {
    double per_h = st->seconds > 0 ? (double)bytes / st->seconds * 3600.0 : 0;
    printf("%-14s %10" PRIu64 " %12" PRIu64 " %6.1f%% %10.1f %12.2f\n", name, n, bytes,
           st->file_bytes ? 100.0 * (double)bytes / (double)st->file_bytes : 0.0, n ? (double)bytes / (double)n : 0.0,
           per_h / 1e6);
}

/* The table: kinds by bytes, largest first. MB/h is per hour of trace (summed over files: per process-hour). */
static int stats_main(int argc, char **argv) {
    stats_t st = {0};
    int rc = 0;
    for (int i = 0; i < argc; i++)
        if (stats_path(argv[i], &st) < 0) rc = 1;
    printf("# %" PRIu64 " files, %" PRIu64 " bytes, %.1f s of trace (summed over files), %" PRIu64 " chunks\n",
           st.n_files, st.file_bytes, st.seconds, st.n_chunks);
    printf("%-14s %10s %12s %7s %10s %12s\n", "kind", "records", "bytes", "share", "B/record", "MB/h");
    bool done[N_KINDS] = {0};
    for (;;) {
        int best = -1;
        for (int k = 0; k < N_KINDS; k++)
            if (!done[k] && st.n[k] && (best < 0 || st.bytes[k] > st.bytes[best])) best = k;
        if (best < 0) break;
        done[best] = true;
        char name[32];
        const char *tn = pl_trace_type_name((pl_rec_type_t)best);
        if (!strcmp(tn, "unknown")) snprintf(name, sizeof name, "type %d", best);
        else snprintf(name, sizeof name, "%s", tn);
        stats_row(name, st.n[best], st.bytes[best], &st);
    }
    stats_row("(chunk hdrs)", st.n_chunks, st.chunk_bytes, &st);
    stats_row("(file hdrs)", st.n_files, st.header_bytes, &st);
    stats_row("total", 0, st.file_bytes, &st);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE...\n       %s --stats TRACE|DIR...\n", argv[0], argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "--stats")) return stats_main(argc - 2, argv + 2);
    int status = 0;
    for (int i = 1; i < argc; i++) {
        pl_trace_reader_t *r;
        if (pl_trace_open(argv[i], &r) < 0) {
            fprintf(stderr, "%s\n", pl_trace_open_error());
            status = 1;
            continue;
        }
        const pl_trace_header_t *h = pl_trace_header(r);
        printf("# %s version=%u.%u pid=%u ppid=%u exec_seq=%u\n", argv[i], h->version, h->version_minor, h->pid,
               h->ppid, h->exec_seq);
        pl_trace_record_t rec;
        int rc;
        while ((rc = pl_trace_next(r, &rec)) == 1) print(&rec);
        if (rc < 0) {
            fprintf(stderr, "%s\n", pl_trace_error(r));
            status = 1;
        }
        pl_trace_close(r);
    }
    return status;
}
