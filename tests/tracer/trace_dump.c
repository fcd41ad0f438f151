/* plateau-trace-dump TRACE...: print every record, one per line ("type key=value ..."), then the reader's
 * verdict on the file. A debugging aid and a helper for shell-level tests. Exit 0 clean, 1 stopped early. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <plateau/trace.h>

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
    default: break;
    }
    putchar('\n');
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE...\n", argv[0]);
        return 2;
    }
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
