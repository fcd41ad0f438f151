/* NVML through dlopen (see nvml.h). The types below are the ABI of nvml.h (NVML is a C library with a stable ABI per
 * versioned entry point); plateau does not need NVIDIA's headers to build. */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_ret_t;                 /* nvmlReturn_t */
typedef void *nvml_dev_t;               /* nvmlDevice_t: an opaque handle */
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ull)

typedef struct {                        /* nvmlProcessInfo_t (= nvmlProcessInfo_v2_st) */
    unsigned int pid;
    unsigned long long usedGpuMemory;   /* bytes, NVML_VALUE_NOT_AVAILABLE when hidden */
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_proc_t;

typedef struct {                        /* nvmlMemory_t */
    unsigned long long total, free, used;
} nvml_mem_t;

typedef struct {
    nvml_dev_t handle;
    uint64_t total_bytes;
    nvml_proc_t procs[PL_NVML_MAX_PROCS];
    unsigned n_procs;
} device_t;

struct pl_nvml {
    void *lib;
    nvml_ret_t (*init)(void);
    nvml_ret_t (*shutdown)(void);
    nvml_ret_t (*count)(unsigned int *);
    nvml_ret_t (*handle)(unsigned int, nvml_dev_t *);
    nvml_ret_t (*procs)(nvml_dev_t, unsigned int *, nvml_proc_t *);
    nvml_ret_t (*mem)(nvml_dev_t, nvml_mem_t *);
    device_t dev[PL_NVML_MAX_DEVICES];
    unsigned n_dev;
    int inited;                         /* nvmlInit_v2 succeeded: nvmlShutdown is owed */
};

static void *sym(void *lib, const char *a, const char *b) {
    void *p = dlsym(lib, a);
    return p || !b ? p : dlsym(lib, b);
}

int pl_nvml_open(pl_nvml_t **out, char *why, size_t why_size) {
    const char *path = getenv("PLATEAU_LIBNVML");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    pl_nvml_t *nv = calloc(1, sizeof *nv);
    if (!nv) return -ENOMEM;
    nv->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int rc = 0;
    if (!nv->lib) {
        snprintf(why, why_size, "%s not loaded (%s)", path, dlerror());
        rc = -ENOENT;
        goto fail;
    }
    *(void **)&nv->init = sym(nv->lib, "nvmlInit_v2", NULL);
    *(void **)&nv->shutdown = sym(nv->lib, "nvmlShutdown", NULL);
    *(void **)&nv->count = sym(nv->lib, "nvmlDeviceGetCount_v2", NULL);
    *(void **)&nv->handle = sym(nv->lib, "nvmlDeviceGetHandleByIndex_v2", NULL);
    *(void **)&nv->procs = sym(nv->lib, "nvmlDeviceGetComputeRunningProcesses_v3",
                               "nvmlDeviceGetComputeRunningProcesses_v2");
    *(void **)&nv->mem = sym(nv->lib, "nvmlDeviceGetMemoryInfo", NULL);
    if (!nv->init || !nv->shutdown || !nv->count || !nv->handle || !nv->procs || !nv->mem) {
        snprintf(why, why_size, "%s lacks an entry point plateau needs (nvmlInit_v2, nvmlDeviceGetCount_v2, "
                 "nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetMemoryInfo)",
                 path);
        rc = -ENOSYS;
        goto fail;
    }
    nvml_ret_t e = nv->init();
    if (e != NVML_SUCCESS) {
        snprintf(why, why_size, "nvmlInit_v2 failed (NVML error %d)", e);
        rc = -EIO;
        goto fail;
    }
    nv->inited = 1;
    unsigned n = 0;
    if ((e = nv->count(&n)) != NVML_SUCCESS || n == 0) {
        snprintf(why, why_size, e != NVML_SUCCESS ? "nvmlDeviceGetCount_v2 failed (NVML error %d)" : "NVML sees no GPU",
                 e);
        rc = -EIO;
        goto fail;
    }
    if (n > PL_NVML_MAX_DEVICES) n = PL_NVML_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        nvml_mem_t m;
        if ((e = nv->handle(i, &nv->dev[i].handle)) != NVML_SUCCESS ||
            (e = nv->mem(nv->dev[i].handle, &m)) != NVML_SUCCESS) {
            snprintf(why, why_size, "NVML device %u cannot be read (NVML error %d)", i, e);
            rc = -EIO;
            goto fail;
        }
        nv->dev[i].total_bytes = m.total;
    }
    nv->n_dev = n;
    *out = nv;
    return 0;
fail:
    pl_nvml_close(nv);
    return rc;
}

int pl_nvml_refresh(pl_nvml_t *nv) {
    int rc = 0;
    for (unsigned i = 0; i < nv->n_dev; i++) {
        device_t *d = &nv->dev[i];
        unsigned n = PL_NVML_MAX_PROCS;
        nvml_ret_t e = nv->procs(d->handle, &n, d->procs);
        if (e == NVML_ERROR_INSUFFICIENT_SIZE) { /* more processes than we keep: the rest are not seen */
            n = PL_NVML_MAX_PROCS;
        } else if (e != NVML_SUCCESS) {
            rc = -EIO;
            continue;
        }
        d->n_procs = n > PL_NVML_MAX_PROCS ? PL_NVML_MAX_PROCS : n;
    }
    return rc;
}

unsigned pl_nvml_n_devices(const pl_nvml_t *nv) { return nv ? nv->n_dev : 0; }

int pl_nvml_used(const pl_nvml_t *nv, unsigned dev, uint32_t pid, uint64_t *used_bytes, uint64_t *total_bytes) {
    if (!nv || dev >= nv->n_dev) return -EINVAL;
    const device_t *d = &nv->dev[dev];
    uint64_t used = 0;
    for (unsigned i = 0; i < d->n_procs; i++) {
        if (d->procs[i].pid != pid) continue;
        if (d->procs[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE) return -ENODATA;
        used += d->procs[i].usedGpuMemory; /* MIG: one entry per compute instance */
    }
    *used_bytes = used;
    *total_bytes = d->total_bytes;
    return 0;
}

void pl_nvml_close(pl_nvml_t *nv) {
    if (!nv) return;
    if (nv->inited) nv->shutdown();
    if (nv->lib) dlclose(nv->lib);
    free(nv);
}
