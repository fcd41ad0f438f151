/* allocator/pluggable.c: the entry points PyTorch's torch.cuda.memory.CUDAPluggableAllocator loads from
 * libplateau_alloc.so (plateau_torch_malloc / plateau_torch_free), plus plateau's way to read the stats
 * (PyTorch's memory_stats() throws for pluggable allocators).
 *
 * One caching allocator per device over the cuda backend, created lazily by the first malloc on that device,
 * configured from PLATEAU_ALLOC_CONF (else PYTORCH_CUDA_ALLOC_CONF), and kept for the life of the process.
 * Streams are CUstream/cudaStream_t values (the runtime's and the driver's stream handles are the same objects);
 * they are taken as void * so this file needs no CUDA header and builds without CUDA (then every malloc fails
 * with the backend's -ENOTSUP message).
 * Thread safety: the per-device allocator pointer is published with release/acquire atomics after creation under
 * one mutex; the allocators are thread-safe themselves. A failed creation is remembered (sticky): its message
 * is kept and later mallocs on that device fail fast with it.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <plateau/alloc.h>

#define PL_TORCH_MAX_DEVICES 64

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(pl_alloc_t *) g_alloc[PL_TORCH_MAX_DEVICES];
static pl_backend_t *g_backend[PL_TORCH_MAX_DEVICES]; /* guarded by g_mu */
static int g_failed[PL_TORCH_MAX_DEVICES];            /* guarded by g_mu: negative errno of a failed creation */
static char g_failure[PL_TORCH_MAX_DEVICES][512];     /* guarded by g_mu */
static _Thread_local char t_error[640];

/* Slow path: create the device's allocator, or return NULL with t_error set. */
static pl_alloc_t *create_device(int device) {
    pthread_mutex_lock(&g_mu);
    pl_alloc_t *a = atomic_load_explicit(&g_alloc[device], memory_order_acquire);
    if (a || g_failed[device]) {
        if (!a) snprintf(t_error, sizeof t_error, "%s", g_failure[device]);
        pthread_mutex_unlock(&g_mu);
        return a;
    }
    char err[512];
    pl_backend_t *be = NULL;
    int rc = pl_backend_cuda_create(device, &be, err, sizeof err);
    if (rc == 0) {
        rc = pl_alloc_create(be, NULL, &a, err, sizeof err);
        if (rc) {
            pl_backend_destroy(be);
            be = NULL;
        }
    }
    if (rc) {
        g_failed[device] = rc;
        /* %.400s: the message is cut rather than the device and errno, which name the problem */
        snprintf(g_failure[device], sizeof g_failure[device], "plateau_torch_malloc: device %d unusable (%s): %.400s",
                 device, strerror(-rc), err);
        snprintf(t_error, sizeof t_error, "%s", g_failure[device]);
        a = NULL;
    } else {
        g_backend[device] = be;
        atomic_store_explicit(&g_alloc[device], a, memory_order_release);
    }
    pthread_mutex_unlock(&g_mu);
    return a;
}

static pl_alloc_t *device_alloc(int device, bool create) {
    if (device < 0 || device >= PL_TORCH_MAX_DEVICES) {
        snprintf(t_error, sizeof t_error, "plateau_torch: device %d out of range [0, %d)", device,
                 PL_TORCH_MAX_DEVICES);
        return NULL;
    }
    pl_alloc_t *a = atomic_load_explicit(&g_alloc[device], memory_order_acquire);
    if (a || !create) return a;
    return create_device(device);
}

PL_API void *plateau_torch_malloc(ssize_t size, int device, void *stream) {
    if (size < 0) {
        snprintf(t_error, sizeof t_error, "plateau_torch_malloc: negative size %zd", size);
        return NULL;
    }
    pl_alloc_t *a = device_alloc(device, true);
    if (!a) return NULL;
    void *p = pl_alloc_malloc(a, (size_t)size, (pl_stream_t)stream);
    if (!p) snprintf(t_error, sizeof t_error, "%s", pl_alloc_last_error());
    return p;
}

PL_API void plateau_torch_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size;
    (void)stream; /* the block remembers its stream */
    if (!ptr) return;
    pl_alloc_t *a = device_alloc(device, false);
    if (!a) {
        /* No allocator on that device: the pointer cannot be ours. Nothing to free; say so. */
        snprintf(t_error, sizeof t_error, "plateau_torch_free: %p on device %d, which never allocated", ptr, device);
        return;
    }
    pl_alloc_free(a, ptr); /* a pointer this allocator never handed out is a PL_REQUIRE failure (abort) */
}

PL_API int plateau_torch_stats(int device, pl_alloc_stats_t *out) {
    if (!out) return -EINVAL;
    memset(out, 0, sizeof *out);
    if (device < 0 || device >= PL_TORCH_MAX_DEVICES) return -EINVAL;
    pl_alloc_t *a = device_alloc(device, false);
    if (!a) return -ENOENT;
    pl_alloc_get_stats(a, out);
    return 0;
}

PL_API int plateau_torch_empty_cache(int device) {
    if (device < 0 || device >= PL_TORCH_MAX_DEVICES) return -EINVAL;
    pl_alloc_t *a = device_alloc(device, false);
    if (!a) return -ENOENT;
    pl_alloc_empty_cache(a);
    return 0;
}

PL_API const char *plateau_torch_last_error(void) { return t_error; }

PL_API void plateau_torch_release_all(void) {
    pthread_mutex_lock(&g_mu);
    for (int d = 0; d < PL_TORCH_MAX_DEVICES; d++) {
        pl_alloc_t *a = atomic_exchange_explicit(&g_alloc[d], NULL, memory_order_acq_rel);
        pl_alloc_destroy(a);
        pl_backend_destroy(g_backend[d]);
        g_backend[d] = NULL;
        g_failed[d] = 0;
        g_failure[d][0] = 0;
    }
    pthread_mutex_unlock(&g_mu);
}
