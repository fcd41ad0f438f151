/* A test double of NVIDIA's management library (libnvidia-ml.so.1) for `plateau attach` (collector/nvml.h): the
 * devices and each process's used device memory come from a text file the test rewrites while plateau samples,
 * named by PL_NVML_DOUBLE_STATE and re-read at every call that returns them:
 *     device 0 total 85899345920          one line per device (index, capacity in bytes)
 *     pid 4242 device 0 used 1073741824   one line per process on a device ("used na": NVML_VALUE_NOT_AVAILABLE)
 * Without the file (or without device lines): one device of 80 GiB and no process. Exports only the entry points
 * plateau loads, under the versioned names nvml.h declares; the types are nvml.h's ABI (nvmlProcessInfo_t as
 * nvmlProcessInfo_v2_st). PL_NVML_DOUBLE_FAIL=init makes nvmlInit_v2 fail (NVML_ERROR_DRIVER_NOT_LOADED). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define MAX_DEV 8
#define MAX_PROCS 256

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; }
    nvmlProcessInfo_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_DRIVER_NOT_LOADED = 9 };

static struct {
    int inited;
    unsigned n_dev;
    unsigned long long total[MAX_DEV];
    nvmlProcessInfo_t procs[MAX_DEV][MAX_PROCS];
    unsigned n_procs[MAX_DEV];
    char tag[MAX_DEV];           /* the handles point here */
} st;

static void load(void) {
    st.n_dev = 0;
    memset(st.n_procs, 0, sizeof st.n_procs);
    const char *path = getenv("PL_NVML_DOUBLE_STATE");
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned d, pid;
        unsigned long long v;
        char used[32];
        if (sscanf(line, "device %u total %llu", &d, &v) == 2 && d < MAX_DEV) {
            st.total[d] = v;
            if (d + 1 > st.n_dev) st.n_dev = d + 1;
        } else if (sscanf(line, "pid %u device %u used %31s", &pid, &d, used) == 3 && d < MAX_DEV &&
                   st.n_procs[d] < MAX_PROCS) {
            nvmlProcessInfo_t *p = &st.procs[d][st.n_procs[d]++];
            p->pid = pid;
            p->usedGpuMemory = !strcmp(used, "na") ? ~0ull : strtoull(used, NULL, 10);
            p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu;
        }
    }
    if (f) fclose(f);
    if (st.n_dev == 0) {
        st.n_dev = 1;
        st.total[0] = 80ull << 30;
    }
}

static int dev_index(nvmlDevice_t h) {
    char *p = h;
    return p >= st.tag && p < st.tag + st.n_dev ? (int)(p - st.tag) : -1;
}

API nvmlReturn_t nvmlInit_v2(void) {
    const char *fail = getenv("PL_NVML_DOUBLE_FAIL");
    if (fail && !strcmp(fail, "init")) return NVML_ERROR_DRIVER_NOT_LOADED;
    st.inited = 1;
    load();
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlShutdown(void) {
    if (!st.inited) return NVML_ERROR_UNINITIALIZED;
    st.inited = 0;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!st.inited) return NVML_ERROR_UNINITIALIZED;
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    load();
    *n = st.n_dev;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h) {
    if (!st.inited) return NVML_ERROR_UNINITIALIZED;
    if (!h || i >= st.n_dev) return NVML_ERROR_INVALID_ARGUMENT;
    *h = &st.tag[i];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
    if (!st.inited) return NVML_ERROR_UNINITIALIZED;
    load();
    int d = dev_index(h);
    if (d < 0 || !m) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long used = 0;
    for (unsigned i = 0; i < st.n_procs[d]; i++)
        if (st.procs[d][i].usedGpuMemory != ~0ull) used += st.procs[d][i].usedGpuMemory;
    m->total = st.total[d];
    m->used = used;
    m->free = used < m->total ? m->total - used : 0;
    return NVML_SUCCESS;
}

/* NVML's contract: *n in = the array's capacity; out = the number of processes; INSUFFICIENT_SIZE (with the
 * number needed) when they do not fit. */
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *n, nvmlProcessInfo_t *out) {
    if (!st.inited) return NVML_ERROR_UNINITIALIZED;
    load();
    int d = dev_index(h);
    if (d < 0 || !n) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned have = st.n_procs[d];
    if (*n < have || (!out && have)) {
        *n = have;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, st.procs[d], have * sizeof *out);
    *n = have;
    return NVML_SUCCESS;
}
