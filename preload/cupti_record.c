/* CUPTI memory activity records -> plateau device records (see cupti_record.h for the mapping). Pure: reads
 * the record layouts of the CUPTI headers plateau was built with and touches no CUPTI library, so the unit test
 * feeds it hand-built records. Records of a newer CUPTI append fields to these layouts; only the leading ones are
 * read. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* CUPTI's headers use enumerators beyond int (-Wpedantic under warning_level=3): not our code. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <cupti.h>
#pragma GCC diagnostic pop

#include "cupti_record.h"

static int32_t memory_device(uint32_t memory_kind, uint32_t device_id) {
    switch (memory_kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return -1; /* host memory, as the hooks record cudaMallocHost */
    default: return device_id == UINT32_MAX ? -1 : (int32_t)device_id;
    }
}

int pl_cupti_record_convert(const void *activity, int64_t clock_offset_ns, pl_trace_record_t *out) {
    if (!activity || !out) return -EINVAL;
    CUpti_ActivityKind kind;
    memcpy(&kind, activity, sizeof kind); /* every record starts with its kind */
    pl_rec_device_t d = {.source = PL_DEV_SRC_CUPTI, .device = -1};
    pl_rec_type_t type;
    uint64_t t;
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
        CUpti_ActivityMemory4 m;
        memset(&m, 0, sizeof m);
        memcpy(&m, activity, offsetof(CUpti_ActivityMemory4, name)); /* no byte beyond the fields read */
        if (m.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC ||
            m.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC)
            return 0;
        if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) type = PL_REC_DEVICE_ALLOC;
        else if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) type = PL_REC_DEVICE_FREE;
        else return 0;
        d.device = memory_device(m.memoryKind, m.deviceId);
        d.addr = m.address;
        d.size = d.requested = m.bytes;
        d.stream = m.streamId == CUPTI_INVALID_STREAM_ID ? 0 : m.streamId;
        t = m.timestamp;
    } else if (kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) {
        CUpti_ActivityMemoryPool3 p;
        memset(&p, 0, sizeof p);
        memcpy(&p, activity, offsetof(CUpti_ActivityMemoryPool3, utilizedSize));
        if (p.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED) type = PL_REC_DEVICE_MAP;
        else if (p.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
            type = PL_REC_DEVICE_UNMAP;
        else return 0;
        d.device = p.deviceId == UINT32_MAX ? -1 : (int32_t)p.deviceId;
        d.addr = p.address;
        d.size = d.requested = p.size;
        t = p.timestamp;
    } else {
        return 0;
    }
    memset(out, 0, sizeof *out);
    out->type = type;
    out->t_ns = (int64_t)t + clock_offset_ns;
    out->u.device = d;
    return 1;
}

void pl_cupti_record_drain(uint8_t *buf, size_t valid_bytes, pl_cupti_next_fn next, void *next_ctx,
                           int64_t clock_offset_ns, pl_cupti_emit_fn emit, void *emit_ctx, pl_cupti_counts_t *counts) {
    if (!buf || !valid_bytes || !next) return;
    void *cursor = NULL;
    int rc;
    while ((rc = next(next_ctx, buf, valid_bytes, &cursor)) == 1) {
        counts->n_records++;
        pl_trace_record_t r;
        if (pl_cupti_record_convert(cursor, clock_offset_ns, &r) != 1) continue;
        counts->n_converted++;
        if (emit) emit(emit_ctx, &r);
    }
    if (rc < 0) counts->n_errors++;
}
