/* allocator/backend_cuda.c: the CUDA driver backend, one backend.h op per driver call.
 *
 * Plain segments: cuMemAlloc_v2 / cuMemFree_v2. Expandable segments: cuMemAddressReserve, cuMemCreate (pinned
 * device memory), cuMemMap, cuMemSetAccess (read-write for this device), cuMemUnmap, cuMemRelease,
 * cuMemAddressFree, with the page size from cuMemGetAllocationGranularity (minimum). Capacity: cuMemGetInfo_v2.
 * Stream ordering: cuEventCreate (timing disabled) + cuEventRecord, cuEventQuery, cuEventSynchronize,
 * cuEventDestroy; cuStreamSynchronize before the allocator unmaps pages of a stream's expandable segment.
 *
 * Loading: the driver is never linked. libcuda.so.1 (or $PLATEAU_LIBCUDA) is dlopen'ed at run time with
 * RTLD_NODELETE (a driver is never unloaded: it owns threads), cuGetProcAddress_v2 is taken with dlsym and every
 * other entry point is fetched through it, asking for the exact ABI version its cudaTypedefs.h PFN type names.
 * Each backend retains the device's primary context and makes it current around every op on the calling thread,
 * restoring whatever context the thread had before (callers such as PyTorch run ops on many threads).
 *
 * Errors: CUDA_ERROR_OUT_OF_MEMORY -> -ENOMEM (the allocator's OOM path: free cache, retry); other failures map to
 * a negative errno. Every failure also leaves a message naming the driver call, its arguments and the CUresult
 * name in the backend's last-error string (the last_error op; pl_backend_cuda_last_error for programs).
 * The function table is written once at create and read-only afterwards; the last-error string has its own mutex.
 *
 * Built without CUDA's headers (-Dcuda=disabled), pl_backend_cuda_create returns -ENOTSUP with a message.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

#if PL_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>
#include <cudaTypedefs.h>

/* Entry points, each at the ABI version of its PFN type. Fields marked optional may be NULL. */
typedef struct cu_fns {
    PFN_cuGetErrorName_v6000 get_error_name;
    PFN_cuGetErrorString_v6000 get_error_string;
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGetCount_v2000 device_get_count;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain;
    PFN_cuDevicePrimaryCtxRelease_v11000 primary_ctx_release;
    PFN_cuCtxGetCurrent_v4000 ctx_get_current;
    PFN_cuCtxSetCurrent_v4000 ctx_set_current;
    PFN_cuMemGetInfo_v3020 mem_get_info;
    PFN_cuMemAlloc_v3020 mem_alloc;
    PFN_cuMemFree_v3020 mem_free;
    PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity;
    PFN_cuMemAddressReserve_v10020 mem_address_reserve;
    PFN_cuMemAddressFree_v10020 mem_address_free;
    PFN_cuMemCreate_v10020 mem_create;
    PFN_cuMemRelease_v10020 mem_release;
    PFN_cuMemMap_v10020 mem_map;
    PFN_cuMemUnmap_v10020 mem_unmap;
    PFN_cuMemSetAccess_v10020 mem_set_access;
    PFN_cuEventCreate_v2000 event_create;
    PFN_cuEventRecord_v2000 event_record;
    PFN_cuEventQuery_v2000 event_query;
    PFN_cuEventSynchronize_v2000 event_synchronize; /* optional: polled with cuEventQuery when absent */
    PFN_cuEventDestroy_v4000 event_destroy;
    PFN_cuStreamSynchronize_v2000 stream_synchronize;
} cu_fns_t;

typedef struct cu_entry {
    const char *name; /* base name, as cuGetProcAddress wants it */
    int version;      /* ABI version of the PFN type */
    size_t offset;    /* of the field in cu_fns_t */
    bool required;
} cu_entry_t;

#define CU_ENTRY(field, name, version, required) {name, version, offsetof(cu_fns_t, field), required}

static const cu_entry_t cu_entries[] = {
    CU_ENTRY(get_error_name, "cuGetErrorName", 6000, true),
    CU_ENTRY(get_error_string, "cuGetErrorString", 6000, true),
    CU_ENTRY(init, "cuInit", 2000, true),
    CU_ENTRY(device_get_count, "cuDeviceGetCount", 2000, true),
    CU_ENTRY(device_get, "cuDeviceGet", 2000, true),
    CU_ENTRY(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 7000, true),
    CU_ENTRY(primary_ctx_release, "cuDevicePrimaryCtxRelease", 11000, true),
    CU_ENTRY(ctx_get_current, "cuCtxGetCurrent", 4000, true),
    CU_ENTRY(ctx_set_current, "cuCtxSetCurrent", 4000, true),
    CU_ENTRY(mem_get_info, "cuMemGetInfo", 3020, true),
    CU_ENTRY(mem_alloc, "cuMemAlloc", 3020, true),
    CU_ENTRY(mem_free, "cuMemFree", 3020, true),
    CU_ENTRY(mem_get_allocation_granularity, "cuMemGetAllocationGranularity", 10020, true),
    CU_ENTRY(mem_address_reserve, "cuMemAddressReserve", 10020, true),
    CU_ENTRY(mem_address_free, "cuMemAddressFree", 10020, true),
    CU_ENTRY(mem_create, "cuMemCreate", 10020, true),
    CU_ENTRY(mem_release, "cuMemRelease", 10020, true),
    CU_ENTRY(mem_map, "cuMemMap", 10020, true),
    CU_ENTRY(mem_unmap, "cuMemUnmap", 10020, true),
    CU_ENTRY(mem_set_access, "cuMemSetAccess", 10020, true),
    CU_ENTRY(event_create, "cuEventCreate", 2000, true),
    CU_ENTRY(event_record, "cuEventRecord", 2000, true),
    CU_ENTRY(event_query, "cuEventQuery", 2000, true),
    CU_ENTRY(event_synchronize, "cuEventSynchronize", 2000, false),
    CU_ENTRY(event_destroy, "cuEventDestroy", 4000, true),
    CU_ENTRY(stream_synchronize, "cuStreamSynchronize", 2000, true),
};

typedef struct cuda_backend {
    pl_backend_t base;
    void *lib;              /* dlopen handle (RTLD_NODELETE) */
    cu_fns_t fn;            /* read-only after create */
    CUdevice dev;
    CUcontext ctx;          /* retained primary context */
    size_t gran_bytes;      /* cuMemGetAllocationGranularity, minimum */
    pthread_mutex_t err_mu; /* guards last_error */
    char last_error[512];
} cuda_backend_t;

static const pl_backend_ops_t cuda_ops;

static cuda_backend_t *cuda_of(pl_backend_t *b) { return (cuda_backend_t *)b; }

static const char *result_name(const cu_fns_t *fn, CUresult r, char *buf, size_t n) {
    const char *s = NULL;
    if (fn->get_error_name && fn->get_error_name(r, &s) == CUDA_SUCCESS && s) return s;
    snprintf(buf, n, "CUresult %d", (int)r);
    return buf;
}

static int errno_of(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return 0;
    case CUDA_ERROR_OUT_OF_MEMORY: return -ENOMEM;
    case CUDA_ERROR_NOT_READY: return -EBUSY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE: return -EINVAL;
    case CUDA_ERROR_NOT_SUPPORTED: return -ENOTSUP;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY: return -ENODEV;
    default: return -EIO;
    }
}

/* Records "<call>(<args>) on device D: <CUresult name> (<description>)" and returns the mapped errno. */
static int fail(cuda_backend_t *c, CUresult r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cuda_backend_t *c, CUresult r, const char *fmt, ...) {
    char call[256], nbuf[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call, sizeof call, fmt, ap);
    va_end(ap);
    const char *desc = NULL;
    if (c->fn.get_error_string && c->fn.get_error_string(r, &desc) != CUDA_SUCCESS) desc = NULL;
    pthread_mutex_lock(&c->err_mu);
    snprintf(c->last_error, sizeof c->last_error, "%s on device %d: %s (%s)", call, c->base.device,
             result_name(&c->fn, r, nbuf, sizeof nbuf), desc ? desc : "no description");
    pthread_mutex_unlock(&c->err_mu);
    return errno_of(r);
}

/* Make the primary context current on this thread; *prev gets what was current (restored by ctx_leave). */
static int ctx_enter(cuda_backend_t *c, CUcontext *prev) {
    CUcontext cur = NULL;
    if (c->fn.ctx_get_current(&cur) != CUDA_SUCCESS) cur = NULL;
    *prev = cur;
    if (cur == c->ctx) return 0;
    CUresult r = c->fn.ctx_set_current(c->ctx);
    return r == CUDA_SUCCESS ? 0 : fail(c, r, "cuCtxSetCurrent(primary context)");
}

static void ctx_leave(cuda_backend_t *c, CUcontext prev) {
    if (prev != c->ctx) c->fn.ctx_set_current(prev);
}

/* Runs `call` (a CUresult expression) with the context current; on failure records `...` as the message. */
#define CU_CALL(c, call, ...)                                        \
    do {                                                             \
        CUcontext prev_;                                             \
        int rc_ = ctx_enter((c), &prev_);                            \
        if (rc_) return rc_;                                         \
        CUresult r_ = (call);                                        \
        ctx_leave((c), prev_);                                       \
        if (r_ != CUDA_SUCCESS) return fail((c), r_, __VA_ARGS__);   \
    } while (0)

static int cuda_mem_alloc(pl_backend_t *b, size_t size, uintptr_t *out) {
    cuda_backend_t *c = cuda_of(b);
    CUdeviceptr p = 0;
    CU_CALL(c, c->fn.mem_alloc(&p, size), "cuMemAlloc_v2(%zu bytes)", size);
    *out = (uintptr_t)p;
    return 0;
}

static int cuda_mem_free(pl_backend_t *b, uintptr_t addr, size_t size) {
    cuda_backend_t *c = cuda_of(b);
    CU_CALL(c, c->fn.mem_free((CUdeviceptr)addr), "cuMemFree_v2(0x%jx, %zu bytes)", (uintmax_t)addr, size);
    return 0;
}

static int cuda_granularity(pl_backend_t *b, size_t *out) {
    *out = cuda_of(b)->gran_bytes;
    return 0;
}

static int cuda_addr_reserve(pl_backend_t *b, size_t size, uintptr_t *out) {
    cuda_backend_t *c = cuda_of(b);
    CUdeviceptr p = 0;
    CU_CALL(c, c->fn.mem_address_reserve(&p, size, 0, 0, 0), "cuMemAddressReserve(%zu bytes)", size);
    *out = (uintptr_t)p;
    return 0;
}

static int cuda_addr_free(pl_backend_t *b, uintptr_t addr, size_t size) {
    cuda_backend_t *c = cuda_of(b);
    CU_CALL(c, c->fn.mem_address_free((CUdeviceptr)addr, size), "cuMemAddressFree(0x%jx, %zu bytes)",
            (uintmax_t)addr, size);
    return 0;
}

static CUmemAllocationProp device_prop(const cuda_backend_t *c) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = c->dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    return prop;
}

static int cuda_phys_create(pl_backend_t *b, size_t size, pl_phys_t *out) {
    cuda_backend_t *c = cuda_of(b);
    CUmemAllocationProp prop = device_prop(c);
    CUmemGenericAllocationHandle h = 0;
    CU_CALL(c, c->fn.mem_create(&h, size, &prop, 0), "cuMemCreate(%zu bytes)", size);
    *out = (pl_phys_t)h;
    return 0;
}

static int cuda_phys_release(pl_backend_t *b, pl_phys_t h) {
    cuda_backend_t *c = cuda_of(b);
    CU_CALL(c, c->fn.mem_release((CUmemGenericAllocationHandle)h), "cuMemRelease(handle 0x%jx)", (uintmax_t)h);
    return 0;
}

static int cuda_map(pl_backend_t *b, uintptr_t addr, size_t size, pl_phys_t h) {
    cuda_backend_t *c = cuda_of(b);
    CU_CALL(c, c->fn.mem_map((CUdeviceptr)addr, size, 0, (CUmemGenericAllocationHandle)h, 0),
            "cuMemMap(0x%jx, %zu bytes, handle 0x%jx)", (uintmax_t)addr, size, (uintmax_t)h);
    return 0;
}

static int cuda_unmap(pl_backend_t *b, uintptr_t addr, size_t size) {
    cuda_backend_t *c = cuda_of(b);
    /* cuMemUnmap does not wait for queued work that may still use the pages: the allocator calls
     * stream_synchronize on the owning stream before each batch of unmaps (expandable.c). */
    CU_CALL(c, c->fn.mem_unmap((CUdeviceptr)addr, size), "cuMemUnmap(0x%jx, %zu bytes)", (uintmax_t)addr, size);
    return 0;
}

static int cuda_set_access(pl_backend_t *b, uintptr_t addr, size_t size) {
    cuda_backend_t *c = cuda_of(b);
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = c->dev;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CALL(c, c->fn.mem_set_access((CUdeviceptr)addr, size, &d, 1), "cuMemSetAccess(0x%jx, %zu bytes, read-write)",
            (uintmax_t)addr, size);
    return 0;
}

static int cuda_mem_info(pl_backend_t *b, size_t *out_free, size_t *out_total) {
    cuda_backend_t *c = cuda_of(b);
    size_t fr = 0, tot = 0;
    CU_CALL(c, c->fn.mem_get_info(&fr, &tot), "cuMemGetInfo_v2");
    *out_free = fr;
    *out_total = tot;
    return 0;
}

static int cuda_event_record(pl_backend_t *b, pl_stream_t stream, pl_event_t *out) {
    cuda_backend_t *c = cuda_of(b);
    CUevent ev = NULL;
    CU_CALL(c, c->fn.event_create(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    CUcontext prev;
    int rc = ctx_enter(c, &prev);
    if (rc) {
        c->fn.event_destroy(ev);
        return rc;
    }
    CUresult r = c->fn.event_record(ev, (CUstream)stream);
    if (r != CUDA_SUCCESS) c->fn.event_destroy(ev);
    ctx_leave(c, prev);
    if (r != CUDA_SUCCESS) return fail(c, r, "cuEventRecord(stream 0x%jx)", (uintmax_t)stream);
    *out = (pl_event_t)ev;
    return 0;
}

static int cuda_event_query(pl_backend_t *b, pl_event_t ev) {
    cuda_backend_t *c = cuda_of(b);
    CUcontext prev;
    int rc = ctx_enter(c, &prev);
    if (rc) return rc;
    CUresult r = c->fn.event_query((CUevent)ev);
    ctx_leave(c, prev);
    if (r == CUDA_SUCCESS) return 0;
    if (r == CUDA_ERROR_NOT_READY) return -EBUSY;
    return fail(c, r, "cuEventQuery");
}

static int cuda_event_synchronize(pl_backend_t *b, pl_event_t ev) {
    cuda_backend_t *c = cuda_of(b);
    if (c->fn.event_synchronize) {
        CU_CALL(c, c->fn.event_synchronize((CUevent)ev), "cuEventSynchronize");
        return 0;
    }
    /* No cuEventSynchronize: poll. */
    for (;;) {
        int rc = cuda_event_query(b, ev);
        if (rc != -EBUSY) return rc;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static int cuda_stream_synchronize(pl_backend_t *b, pl_stream_t stream) {
    cuda_backend_t *c = cuda_of(b);
    CU_CALL(c, c->fn.stream_synchronize((CUstream)stream), "cuStreamSynchronize(stream 0x%jx)", (uintmax_t)stream);
    return 0;
}

static void cuda_event_destroy(pl_backend_t *b, pl_event_t ev) {
    cuda_backend_t *c = cuda_of(b);
    CUcontext prev;
    if (ctx_enter(c, &prev)) return;
    CUresult r = c->fn.event_destroy((CUevent)ev);
    ctx_leave(c, prev);
    if (r != CUDA_SUCCESS) fail(c, r, "cuEventDestroy_v2");
}

static void cuda_last_error(pl_backend_t *b, char *buf, size_t len) {
    cuda_backend_t *c = cuda_of(b);
    if (!len) return;
    pthread_mutex_lock(&c->err_mu);
    snprintf(buf, len, "%s", c->last_error);
    pthread_mutex_unlock(&c->err_mu);
}

static void cuda_destroy(pl_backend_t *b) {
    cuda_backend_t *c = cuda_of(b);
    if (c->ctx) c->fn.primary_ctx_release(c->dev);
    if (c->lib) dlclose(c->lib); /* RTLD_NODELETE: the driver stays mapped */
    pthread_mutex_destroy(&c->err_mu);
    free(c);
}

static const pl_backend_ops_t cuda_ops = {
    .name = "cuda",
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .granularity = cuda_granularity,
    .addr_reserve = cuda_addr_reserve,
    .addr_free = cuda_addr_free,
    .phys_create = cuda_phys_create,
    .phys_release = cuda_phys_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .set_access = cuda_set_access,
    .mem_info = cuda_mem_info,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .event_destroy = cuda_event_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .last_error = cuda_last_error,
    .destroy = cuda_destroy,
};

/* Writes the message to err and to the backend's last error; returns rc. */
static int create_fail(cuda_backend_t *c, int rc, char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int create_fail(cuda_backend_t *c, int rc, char *err, size_t err_len, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && err_len) snprintf(err, err_len, "cuda backend: %s", msg);
    if (c) cuda_destroy(&c->base);
    return rc;
}

/* A failed driver call during create: its message (with the CUresult name) goes to err. */
static int create_fail_cu(cuda_backend_t *c, CUresult r, char *err, size_t err_len, const char *call) {
    char nbuf[32];
    const char *desc = NULL;
    if (c->fn.get_error_string(r, &desc) != CUDA_SUCCESS) desc = NULL;
    int rc = r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -ENODEV; /* otherwise: a driver, but no usable device */
    return create_fail(c, rc, err, err_len, "%s on device %d: %s (%s)", call, c->base.device,
                       result_name(&c->fn, r, nbuf, sizeof nbuf), desc ? desc : "no description");
}

PL_API int pl_backend_cuda_create(int device, pl_backend_t **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = 0;
    if (!out) return -EINVAL;
    const char *path = getenv("PLATEAU_LIBCUDA");
    if (!path || !*path) path = "libcuda.so.1";
    cuda_backend_t *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->base.ops = &cuda_ops;
    c->base.device = device;
    pthread_mutex_init(&c->err_mu, NULL);

    dlerror();
    c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!c->lib) {
        const char *why = dlerror();
        return create_fail(c, -ENODEV, err, err_len,
                           "no CUDA driver: dlopen(\"%s\") failed: %s (set PLATEAU_LIBCUDA to the driver's path)",
                           path, why ? why : "unknown error");
    }
    void *sym = dlsym(c->lib, "cuGetProcAddress_v2");
    if (!sym)
        return create_fail(c, -ENODEV, err, err_len,
                           "%s has no cuGetProcAddress_v2: driver older than CUDA 12.0, or not a CUDA driver", path);
    PFN_cuGetProcAddress_v12000 get_proc;
    memcpy(&get_proc, &sym, sizeof get_proc);

    for (size_t i = 0; i < sizeof cu_entries / sizeof cu_entries[0]; i++) {
        const cu_entry_t *e = &cu_entries[i];
        void *p = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = get_proc(e->name, &p, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st);
        if (r != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
            if (!e->required) continue;
            return create_fail(c, -ENODEV, err, err_len,
                               "cuGetProcAddress_v2(\"%s\", version %d) in %s failed: CUresult %d, status %s", e->name,
                               e->version, path, (int)r,
                               st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version not sufficient"
                                                                                 : "symbol not found");
        }
        memcpy((char *)&c->fn + e->offset, &p, sizeof p);
    }

    CUresult r = c->fn.init(0);
    if (r != CUDA_SUCCESS) return create_fail_cu(c, r, err, err_len, "cuInit(0)");
    int n_devices = 0;
    r = c->fn.device_get_count(&n_devices);
    if (r != CUDA_SUCCESS) return create_fail_cu(c, r, err, err_len, "cuDeviceGetCount");
    if (device < 0 || device >= n_devices)
        return create_fail(c, -ENODEV, err, err_len, "device %d not present (the driver at %s reports %d device%s)",
                           device, path, n_devices, n_devices == 1 ? "" : "s");
    r = c->fn.device_get(&c->dev, device);
    if (r != CUDA_SUCCESS) return create_fail_cu(c, r, err, err_len, "cuDeviceGet");
    CUcontext ctx = NULL;
    r = c->fn.primary_ctx_retain(&ctx, c->dev);
    if (r != CUDA_SUCCESS) return create_fail_cu(c, r, err, err_len, "cuDevicePrimaryCtxRetain");
    c->ctx = ctx;

    CUmemAllocationProp prop = device_prop(c);
    size_t gran = 0;
    r = c->fn.mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) return create_fail_cu(c, r, err, err_len, "cuMemGetAllocationGranularity");
    if (!gran || (gran & (gran - 1)))
        return create_fail(c, -ENODEV, err, err_len, "cuMemGetAllocationGranularity reported %zu bytes", gran);
    c->gran_bytes = gran;
    /* One query through the op proves the context works on this thread. */
    size_t fr, tot;
    if (cuda_mem_info(&c->base, &fr, &tot)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", c->last_error);
        return create_fail(c, -ENODEV, err, err_len, "%s", msg);
    }
    *out = &c->base;
    return 0;
}

PL_API const char *pl_backend_cuda_last_error(pl_backend_t *b) {
    static _Thread_local char copy[512];
    copy[0] = 0;
    if (b && b->ops == &cuda_ops) cuda_last_error(b, copy, sizeof copy);
    return copy;
}

#else /* !PL_HAVE_CUDA */

PL_API int pl_backend_cuda_create(int device, pl_backend_t **out, char *err, size_t err_len) {
    (void)out;
    if (err && err_len)
        snprintf(err, err_len,
                 "cuda backend for device %d: this plateau was built without CUDA's headers (-Dcuda=disabled or no "
                 "cuda.h found); rebuild with -Dcuda=enabled, or use the sim backend",
                 device);
    return -ENOTSUP;
}

PL_API const char *pl_backend_cuda_last_error(pl_backend_t *b) {
    (void)b;
    return "";
}

#endif
