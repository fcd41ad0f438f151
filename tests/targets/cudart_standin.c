/* A stand-in "libcudart" for the preload's device-interception tests (tests/preload/test_cuda.c).
 *
 * It loads the CUDA driver exactly the way the real runtime does: dlopen("libcuda.so.1") (or $PLATEAU_LIBCUDA),
 * dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress("cuGetProcAddress") through itself and every other
 * entry point through that re-fetched pointer (with explicit versions, and both stream variants of the async calls:
 * the per-thread-default-stream flag for the _ptsz runtime names), cuInit(0) and a retained primary context. It
 * exports runtime-named functions (cudaMalloc, cudaFree, cudaMallocAsync[_ptsz], cudaFreeAsync[_ptsz],
 * cudaMallocFromPoolAsync[_ptsz] (the pool is ignored: the double has no pools, cuMemAllocAsync stands in),
 * cudaMallocManaged, cudaMallocPitch, cudaMalloc3D (cuMemAllocPitch_v2 with height * depth rows), cudaMallocHost,
 * cudaHostAlloc, cudaFreeHost) that call the driver through those pointers, and
 * standin_* helpers that call the driver directly (plain and virtual-memory allocations), so a test sees both the
 * runtime path (one record per cudaMalloc) and the driver path. The first call must not race with others (the
 * targets make it on the main thread); later calls may come from any thread.
 * Errors: the runtime-named calls return the CUresult as an int (0 success, 2 out of memory). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static struct {
    int state; /* 0 not tried, 1 ready, -1 failed */
    gpa_v2_fn gpa;
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async_ptsz)(CUdeviceptr, CUstream);
    CUresult (*alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*host_alloc)(void **, size_t, unsigned int);
    CUresult (*alloc_host)(void **, size_t);
    CUresult (*free_host)(void *);
    CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*mem_release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUdevice dev;
    CUcontext ctx;
} rt;

static _Thread_local int tl_ctx_set; /* like the real runtime: the primary context made current per thread */

static int fetch(const char *name, void *fn_out, int version, cuuint64_t flags) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (rt.gpa(name, &p, version, flags, &status) != CUDA_SUCCESS || !p || status != CU_GET_PROC_ADDRESS_SUCCESS) {
        fprintf(stderr, "cudart_standin: cuGetProcAddress(%s, %d) failed\n", name, version);
        return -1;
    }
    memcpy(fn_out, &p, sizeof p);
    return 0;
}

static int lazy_init(void);

/* Initialise once (first call; single-threaded targets or the main thread first), then make the primary context
 * current on the calling thread. */
static int enter(void) {
    if (lazy_init() < 0) return -1;
    if (!tl_ctx_set) {
        if (rt.ctx_set(rt.ctx)) return -1;
        tl_ctx_set = 1;
    }
    return 0;
}

static int lazy_init(void) {
    if (rt.state) return rt.state > 0 ? 0 : -1;
    rt.state = -1;
    const char *path = getenv("PLATEAU_LIBCUDA");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cudart_standin: %s\n", dlerror());
        return -1;
    }
    void *g = dlsym(h, "cuGetProcAddress_v2");
    if (!g) return -1;
    memcpy(&rt.gpa, &g, sizeof g);
    /* The real runtime re-fetches cuGetProcAddress through itself and uses that pointer from then on. */
    if (fetch("cuGetProcAddress", &rt.gpa, 12000, CU_GET_PROC_ADDRESS_DEFAULT) < 0) return -1;
    const cuuint64_t ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (fetch("cuInit", &rt.init, 2000, 0) || fetch("cuDeviceGet", &rt.device_get, 2000, 0) ||
        fetch("cuDevicePrimaryCtxRetain", &rt.retain, 7000, 0) ||
        fetch("cuDevicePrimaryCtxRelease", &rt.release, 11000, 0) || fetch("cuCtxSetCurrent", &rt.ctx_set, 4000, 0) ||
        fetch("cuMemAlloc", &rt.alloc, 12000, 0) || fetch("cuMemFree", &rt.free, 12000, 0) ||
        fetch("cuMemAllocAsync", &rt.alloc_async, 12000, 0) || fetch("cuMemFreeAsync", &rt.free_async, 12000, 0) ||
        fetch("cuMemAllocAsync", &rt.alloc_async_ptsz, 12000, ptds) ||
        fetch("cuMemFreeAsync", &rt.free_async_ptsz, 12000, ptds) ||
        fetch("cuMemAllocPitch", &rt.alloc_pitch, 12000, 0) || fetch("cuMemHostAlloc", &rt.host_alloc, 12000, 0) ||
        fetch("cuMemAllocHost", &rt.alloc_host, 12000, 0) || fetch("cuMemFreeHost", &rt.free_host, 12000, 0) ||
        fetch("cuMemAllocManaged", &rt.managed, 12000, 0) ||
        fetch("cuMemAddressReserve", &rt.reserve, 12000, 0) || fetch("cuMemAddressFree", &rt.address_free, 12000, 0) ||
        fetch("cuMemCreate", &rt.create, 12000, 0) || fetch("cuMemRelease", &rt.mem_release, 12000, 0) ||
        fetch("cuMemMap", &rt.map, 12000, 0) || fetch("cuMemUnmap", &rt.unmap, 12000, 0) ||
        fetch("cuMemGetAllocationGranularity", &rt.granularity, 12000, 0))
        return -1;
    if (rt.init(0) || rt.device_get(&rt.dev, 0) || rt.retain(&rt.ctx, rt.dev)) return -1;
    rt.state = 1;
    return 0;
}

#define INIT_OR_FAIL                                                                                           \
    if (enter() < 0) return (int)CUDA_ERROR_NOT_INITIALIZED

EXPORT int cudaMalloc(void **ptr, size_t size) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    CUresult rc = rt.alloc(&p, size);
    *ptr = (void *)(uintptr_t)p;
    return (int)rc;
}

EXPORT int cudaFree(void *ptr) {
    INIT_OR_FAIL;
    return ptr ? (int)rt.free((CUdeviceptr)(uintptr_t)ptr) : 0;
}

static int malloc_async(int ptsz, void **ptr, size_t size, void *stream) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    CUresult rc = (ptsz ? rt.alloc_async_ptsz : rt.alloc_async)(&p, size, (CUstream)stream);
    *ptr = (void *)(uintptr_t)p;
    return (int)rc;
}

EXPORT int cudaMallocAsync(void **ptr, size_t size, void *stream) { return malloc_async(0, ptr, size, stream); }
EXPORT int cudaMallocAsync_ptsz(void **ptr, size_t size, void *stream) { return malloc_async(1, ptr, size, stream); }

EXPORT int cudaMallocFromPoolAsync(void **ptr, size_t size, void *pool, void *stream) {
    (void)pool;
    return malloc_async(0, ptr, size, stream);
}

EXPORT int cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, void *pool, void *stream) {
    (void)pool;
    return malloc_async(1, ptr, size, stream);
}

EXPORT int cudaFreeAsync(void *ptr, void *stream) {
    INIT_OR_FAIL;
    return (int)rt.free_async((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream);
}

EXPORT int cudaFreeAsync_ptsz(void *ptr, void *stream) {
    INIT_OR_FAIL;
    return (int)rt.free_async_ptsz((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream);
}

EXPORT int cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    CUresult rc = rt.alloc_pitch(&p, pitch, width, height, 4);
    *ptr = (void *)(uintptr_t)p;
    return (int)rc;
}

/* struct cudaPitchedPtr / cudaExtent */
typedef struct { void *ptr; size_t pitch, xsize, ysize; } standin_pitched_ptr_t;
typedef struct { size_t width, height, depth; } standin_extent_t;

EXPORT int cudaMalloc3D(standin_pitched_ptr_t *out, standin_extent_t extent) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult rc = rt.alloc_pitch(&p, &pitch, extent.width, extent.height * (extent.depth ? extent.depth : 1), 4);
    out->ptr = (void *)(uintptr_t)p;
    out->pitch = pitch;
    out->xsize = extent.width;
    out->ysize = extent.height;
    return (int)rc;
}

EXPORT int cudaMallocHost(void **ptr, size_t size) {
    INIT_OR_FAIL;
    return (int)rt.alloc_host(ptr, size);
}

EXPORT int cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    INIT_OR_FAIL;
    return (int)rt.host_alloc(ptr, size, flags);
}

EXPORT int cudaFreeHost(void *ptr) {
    INIT_OR_FAIL;
    return (int)rt.free_host(ptr);
}

EXPORT int cudaMallocManaged(void **ptr, size_t size, unsigned int flags) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    CUresult rc = rt.managed(&p, size, flags);
    *ptr = (void *)(uintptr_t)p;
    return (int)rc;
}

/* Driver path, not through a runtime-named function. */
EXPORT int standin_driver_alloc(uint64_t *ptr, size_t size) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    CUresult rc = rt.alloc(&p, size);
    *ptr = (uint64_t)p;
    return (int)rc;
}

EXPORT int standin_driver_free(uint64_t ptr) {
    INIT_OR_FAIL;
    return (int)rt.free((CUdeviceptr)ptr);
}

EXPORT int standin_driver_pitch(uint64_t *ptr, size_t width, size_t height) {
    INIT_OR_FAIL;
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult rc = rt.alloc_pitch(&p, &pitch, width, height, 8);
    *ptr = (uint64_t)p;
    return (int)rc;
}

EXPORT int standin_driver_host(void **ptr, size_t size) {
    INIT_OR_FAIL;
    return (int)rt.host_alloc(ptr, size, CU_MEMHOSTALLOC_PORTABLE);
}

EXPORT int standin_driver_free_host(void *ptr) {
    INIT_OR_FAIL;
    return (int)rt.free_host(ptr);
}

/* An expandable-segment round trip: reserve, create + map n_chunks granules, unmap, release, free the range. */
EXPORT int standin_vmm(int n_chunks) {
    INIT_OR_FAIL;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = rt.dev;
    size_t gran = 0;
    if (rt.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || !gran) return -1;
    CUdeviceptr base = 0;
    size_t total = gran * (size_t)n_chunks;
    if (rt.reserve(&base, total, 0, 0, 0)) return -1;
    CUmemGenericAllocationHandle h[16];
    for (int i = 0; i < n_chunks && i < 16; i++) {
        if (rt.create(&h[i], gran, &prop, 0) || rt.map(base + gran * (size_t)i, gran, 0, h[i], 0)) return -1;
        if (rt.mem_release(h[i])) return -1; /* legal while mapped: the mapping keeps it alive */
    }
    for (int i = n_chunks - 1; i >= 0; i--)
        if (rt.unmap(base + gran * (size_t)i, gran)) return -1;
    return rt.address_free(base, total) ? -1 : 0;
}

EXPORT void standin_shutdown(void) {
    if (rt.state > 0) rt.release(rt.dev);
    rt.state = 0;
}
