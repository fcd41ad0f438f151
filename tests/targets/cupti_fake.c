/* A fake libcupti for tests/preload/test_cuda.c: the success path of the preload's CUPTI source (preload/cupti.c),
 * which the real libcupti never reaches without a GPU. It implements the calls cupti.c makes, and at
 * cuptiActivityFlushAll turns the driver double's call log ($PL_CUPTI_FAKE_LOG, the file PL_CUDA_DOUBLE=log:
 * writes) into CUPTI_ACTIVITY_KIND_MEMORY2 records (CUpti_ActivityMemory4, the installed header's layout): one
 * ALLOCATION per successful allocation, one RELEASE per successful free, as CUPTI would report them. The records
 * are delivered through the registered buffer callbacks, in buffers of at most 4 records so several are used.
 * $PL_CUPTI_FAKE_FAIL=<call name> makes that call return CUPTI_ERROR_NOT_INITIALIZED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <cupti.h>
#pragma GCC diagnostic pop

#define EXPORT __attribute__((visibility("default")))

static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static int g_enabled_memory2;

static CUptiResult maybe_fail(const char *call) {
    const char *f = getenv("PL_CUPTI_FAKE_FAIL");
    return f && !strcmp(f, call) ? CUPTI_ERROR_NOT_INITIALIZED : CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
    *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS"
           : result == CUPTI_ERROR_NOT_INITIALIZED ? "CUPTI_ERROR_NOT_INITIALIZED" : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                   CUpti_BuffersCallbackCompleteFunc done) {
    g_request = req;
    g_complete = done;
    return maybe_fail("cuptiActivityRegisterCallbacks");
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    CUptiResult rc = maybe_fail("cuptiActivityEnable");
    if (rc == CUPTI_SUCCESS && kind == CUPTI_ACTIVITY_KIND_MEMORY2) g_enabled_memory2 = 1;
    return rc;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY2) g_enabled_memory2 = 0;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t ms) {
    (void)ms;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t); /* CUPTI's clock is not the tracer's: cupti.c must apply an offset */
    *ts = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec) {
    uint8_t *next = *rec ? (uint8_t *)*rec + sizeof(CUpti_ActivityMemory4) : buf;
    if (next + sizeof(CUpti_ActivityMemory4) > buf + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(void *)next;
    return CUPTI_SUCCESS;
}

static int is_alloc(const char *c) {
    return !strcmp(c, "cuMemAlloc_v2") || !strncmp(c, "cuMemAllocAsync", 15) || !strcmp(c, "cuMemAllocManaged") ||
           !strcmp(c, "cuMemAllocPitch_v2") || !strcmp(c, "cuMemHostAlloc") || !strcmp(c, "cuMemAllocHost_v2");
}

static int is_free(const char *c) {
    return !strcmp(c, "cuMemFree_v2") || !strncmp(c, "cuMemFreeAsync", 14) || !strcmp(c, "cuMemFreeHost");
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flags) {
    (void)flags;
    const char *path = getenv("PL_CUPTI_FAKE_LOG");
    FILE *f = path && g_enabled_memory2 && g_request ? fopen(path, "r") : NULL;
    if (!f) return CUPTI_SUCCESS;
    char line[512], call[64], result[64];
    unsigned long long seq, ptr, size;
    int dev;
    uint8_t *buf = NULL;
    size_t cap = 0, used = 0, max_records = 0;
    uint64_t ts;
    cuptiGetTimestamp(&ts);
    for (int eof = 0; !eof;) {
        eof = !fgets(line, sizeof line, f);
        int ok = !eof && sscanf(line, "%llu %63s %63s dev=%d ptr=0x%llx size=%llu", &seq, call, result, &dev, &ptr,
                                &size) == 6 && !strcmp(result, "CUDA_SUCCESS") && (is_alloc(call) || is_free(call));
        if (buf && (eof || used + sizeof(CUpti_ActivityMemory4) > cap || used >= 4 * sizeof(CUpti_ActivityMemory4))) {
            g_complete(NULL, 0, buf, cap, used);
            buf = NULL;
        }
        if (!ok) continue;
        if (!buf) {
            g_request(&buf, &cap, &max_records);
            used = 0;
            if (!buf) break;
        }
        CUpti_ActivityMemory4 m;
        memset(&m, 0, sizeof m);
        m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
        m.memoryOperationType = is_alloc(call) ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                               : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        int host = !strcmp(call, "cuMemHostAlloc") || !strcmp(call, "cuMemAllocHost_v2") || !strcmp(call, "cuMemFreeHost");
        m.memoryKind = host ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.address = ptr;
        m.bytes = size;
        m.deviceId = (uint32_t)dev;
        m.streamId = CUPTI_INVALID_STREAM_ID;
        m.timestamp = ts + seq; /* after start, in log order */
        memcpy(buf + used, &m, sizeof m);
        used += sizeof m;
    }
    fclose(f);
    return CUPTI_SUCCESS;
}
