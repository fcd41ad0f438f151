/* CUPTI memory activity -> plateau device records (cupti_record.c), and the CUPTI source's entry points
 * (cupti.c). Built only when CUPTI's headers are found (PL_HAVE_CUPTI). This header does not include CUPTI's:
 * cuda.c and the tests use it without them; activity records travel as `const void *`. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

/* ---- cupti_record.c: pure conversion, no CUPTI library needed (unit-tested with hand-built records) ---- */

/* Convert one activity record (a CUpti_Activity of any kind) into a device record with source
 * PL_DEV_SRC_CUPTI. clock_offset_ns is added to CUPTI's timestamp to get CLOCK_MONOTONIC (record t_ns).
 *  - CUPTI_ACTIVITY_KIND_MEMORY2 (CUpti_ActivityMemory4; the fields read are the prefix shared with the older
 *    Memory2/Memory3 layouts): ALLOCATION -> PL_REC_DEVICE_ALLOC, RELEASE -> PL_REC_DEVICE_FREE; size = bytes;
 *    device = deviceId, -1 for pinned or pageable host memory; stream = CUPTI's stream id (0 when none).
 *    Module globals (DEVICE_STATIC / MANAGED_STATIC) are no allocation call: not converted.
 *  - CUPTI_ACTIVITY_KIND_MEMORY_POOL (CUpti_ActivityMemoryPool3): CREATED -> PL_REC_DEVICE_MAP, DESTROYED ->
 *    PL_REC_DEVICE_UNMAP (pool base address and size); TRIMMED is not converted (the released bytes are unknown).
 * Returns 1 and fills *out, 0 for a record that is not converted (other kinds and operations), -EINVAL for NULL. */
int pl_cupti_record_convert(const void *activity, int64_t clock_offset_ns, pl_trace_record_t *out);

/* Next record of a completed buffer: cursor is NULL before the first one. Returns 1 and advances *cursor, 0 at
 * the end, < 0 when the buffer is corrupt (cuptiActivityGetNextRecord's contract, adapted). */
typedef int (*pl_cupti_next_fn)(void *ctx, uint8_t *buf, size_t valid_bytes, void **cursor);
typedef void (*pl_cupti_emit_fn)(void *ctx, const pl_trace_record_t *rec);

typedef struct pl_cupti_counts {
    uint64_t n_records;    /* activity records read */
    uint64_t n_converted;  /* device records emitted */
    uint64_t n_errors;     /* buffers that ended in a corrupt record */
} pl_cupti_counts_t;

/* Read every record of a completed buffer through next, emit the converted ones in order, add to *counts. */
void pl_cupti_record_drain(uint8_t *buf, size_t valid_bytes, pl_cupti_next_fn next, void *next_ctx,
                           int64_t clock_offset_ns, pl_cupti_emit_fn emit, void *emit_ctx, pl_cupti_counts_t *counts);

/* ---- cupti.c: the preload's CUPTI source ---- */

/* The program's cuInit just succeeded (called by cuda.c's cuInit wrapper, on the program's thread). The first
 * call loads libcupti and enables memory activity per PLATEAU_CUPTI; later calls return at once. Never blocks on
 * another thread; on failure prints one line on stderr and leaves the hooks recording. */
void pl_cupti_on_cuda_init(void);

/* " cupti=<state> cupti_records=N ..." for the PLATEAU_DEBUG_CUDA summary line. */
int pl_cupti_describe(char *buf, size_t cap);
