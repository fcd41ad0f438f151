/* The CUDA entry points cuda.c wraps, one list per family. Everything mechanical about a hook is expanded from its
 * one line here: the slot enum, the slot table (exported symbol, cuGetProcAddress name and version range,
 * per-thread-stream variant), the real function's pointer type, the wrapper's prototype bound to the exported
 * symbol, and the table of wrapper addresses. The wrapper bodies differ per hook and stay hand-written in cuda.c.
 *
 * Why X-macros and not a generator script: the lists are short, the expansions are plain C that the compiler
 * checks at every use (a wrapper whose definition does not match its listed parameters is a conflicting-types
 * error), and nothing is added to the build. Order matters only for PLATEAU_DEBUG_CUDA's summary line, which
 * prints the driver slots in list order.
 *
 * Included by cuda.c only, after <cuda.h>. */
#pragma once

/* Driver API: X(SLOT, SYMBOL, BASE, MIN_VERSION, MAX_VERSION, PTSZ, FN, PARAMS)
 *   SLOT     enum value
 *   SYMBOL   the exported symbol of this ABI (what dlsym and plain interposition see)
 *   BASE     the name given to cuGetProcAddress
 *   MIN/MAX  the cudaVersion range for which cuGetProcAddress returns this ABI
 *   PTSZ     the per-thread-default-stream variant
 *   FN       wrapper pl_cu_FN, real-function type FN_fn
 *   PARAMS   parameter types */
#define PL_CUDA_DRIVER_HOOKS(X)                                                                                  \
    X(S_ALLOC, "cuMemAlloc_v2", "cuMemAlloc", 3020, CUDA_VERSION, false, alloc, (CUdeviceptr *, size_t))         \
    X(S_FREE, "cuMemFree_v2", "cuMemFree", 3020, CUDA_VERSION, false, free, (CUdeviceptr))                       \
    X(S_MANAGED, "cuMemAllocManaged", "cuMemAllocManaged", 6000, CUDA_VERSION, false, managed,                   \
      (CUdeviceptr *, size_t, unsigned int))                                                                     \
    X(S_ALLOC_ASYNC, "cuMemAllocAsync", "cuMemAllocAsync", 11020, CUDA_VERSION, false, alloc_async,               \
      (CUdeviceptr *, size_t, CUstream))                                                                         \
    X(S_ALLOC_ASYNC_PTSZ, "cuMemAllocAsync_ptsz", "cuMemAllocAsync", 11020, CUDA_VERSION, true, alloc_async_ptsz, \
      (CUdeviceptr *, size_t, CUstream))                                                                         \
    X(S_FREE_ASYNC, "cuMemFreeAsync", "cuMemFreeAsync", 11020, CUDA_VERSION, false, free_async,                   \
      (CUdeviceptr, CUstream))                                                                                   \
    X(S_FREE_ASYNC_PTSZ, "cuMemFreeAsync_ptsz", "cuMemFreeAsync", 11020, CUDA_VERSION, true, free_async_ptsz,     \
      (CUdeviceptr, CUstream))                                                                                   \
    X(S_POOL_ASYNC, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, CUDA_VERSION, false, pool_async, \
      (CUdeviceptr *, size_t, CUmemoryPool, CUstream))                                                           \
    X(S_POOL_ASYNC_PTSZ, "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync", 11020, CUDA_VERSION, true,    \
      pool_async_ptsz, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))                                          \
    X(S_CREATE, "cuMemCreate", "cuMemCreate", 10020, CUDA_VERSION, false, create,                                \
      (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))                 \
    X(S_RELEASE, "cuMemRelease", "cuMemRelease", 10020, CUDA_VERSION, false, release,                            \
      (CUmemGenericAllocationHandle))                                                                            \
    X(S_MAP, "cuMemMap", "cuMemMap", 10020, CUDA_VERSION, false, map,                                           \
      (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))                           \
    X(S_UNMAP, "cuMemUnmap", "cuMemUnmap", 10020, CUDA_VERSION, false, unmap, (CUdeviceptr, size_t))             \
    X(S_RESERVE, "cuMemAddressReserve", "cuMemAddressReserve", 10020, CUDA_VERSION, false, reserve,              \
      (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))                                          \
    X(S_GPA, "cuGetProcAddress", "cuGetProcAddress", 11030, 11999, false, gpa,                                   \
      (const char *, void **, int, cuuint64_t))                                                                  \
    X(S_GPA_V2, "cuGetProcAddress_v2", "cuGetProcAddress", 12000, CUDA_VERSION, false, gpa_v2,                   \
      (const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))                                \
    X(S_INIT, "cuInit", "cuInit", 2000, CUDA_VERSION, false, init, (unsigned int))                               \
    X(S_ALLOC_PITCH, "cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, CUDA_VERSION, false, alloc_pitch,            \
      (CUdeviceptr *, size_t *, size_t, size_t, unsigned int))                                                   \
    X(S_HOST_ALLOC, "cuMemHostAlloc", "cuMemHostAlloc", 2020, CUDA_VERSION, false, host_alloc,                   \
      (void **, size_t, unsigned int))                                                                           \
    X(S_ALLOC_HOST, "cuMemAllocHost_v2", "cuMemAllocHost", 3020, CUDA_VERSION, false, alloc_host, (void **, size_t)) \
    X(S_FREE_HOST, "cuMemFreeHost", "cuMemFreeHost", 2000, CUDA_VERSION, false, free_host, (void *))

/* Runtime API (libcudart linked dynamically; no cudaGetDriverEntryPoint route): X(NAME, PARAMS)
 *   NAME     the exported function (also its slot R_NAME and its real-function type rt_NAME_fn)
 *   PARAMS   parameter types; every runtime entry point returns cudaError_t, an int here (the runtime's headers
 *            would clash with the driver's) */
#define PL_CUDA_RUNTIME_HOOKS(X)                                                                                 \
    X(cudaMalloc, (void **, size_t))                                                                             \
    X(cudaFree, (void *))                                                                                        \
    X(cudaMallocAsync, (void **, size_t, void *))                                                                \
    X(cudaFreeAsync, (void *, void *))                                                                           \
    X(cudaMallocManaged, (void **, size_t, unsigned int))                                                        \
    X(cudaMallocHost, (void **, size_t))                                                                         \
    X(cudaHostAlloc, (void **, size_t, unsigned int))                                                            \
    X(cudaFreeHost, (void *))                                                                                    \
    X(cudaMallocAsync_ptsz, (void **, size_t, void *))                                                           \
    X(cudaFreeAsync_ptsz, (void *, void *))                                                                      \
    X(cudaMallocFromPoolAsync, (void **, size_t, void *, void *))                                                \
    X(cudaMallocFromPoolAsync_ptsz, (void **, size_t, void *, void *))                                           \
    X(cudaMallocPitch, (void **, size_t *, size_t, size_t))                                                      \
    X(cudaMalloc3D, (rt_pitched_ptr_t *, rt_extent_t))

/* ------------------------------------------------------------------ expansions (cuda.c uses these once each) */

#define PL_CUDA_DRV_ENUM_(SLOT, SYM, BASE, MIN, MAX, PTSZ, FN, PARAMS) SLOT,
#define PL_CUDA_DRV_INFO_(SLOT, SYM, BASE, MIN, MAX, PTSZ, FN, PARAMS) [SLOT] = {SYM, BASE, MIN, MAX, PTSZ},
#define PL_CUDA_DRV_TYPE_(SLOT, SYM, BASE, MIN, MAX, PTSZ, FN, PARAMS) typedef CUresult(*FN##_fn) PARAMS;
#define PL_CUDA_DRV_PROTO_(SLOT, SYM, BASE, MIN, MAX, PTSZ, FN, PARAMS)                                          \
    PL_EXPORT CUresult pl_cu_##FN PARAMS __asm__(SYM);
#define PL_CUDA_DRV_WRAPPER_(SLOT, SYM, BASE, MIN, MAX, PTSZ, FN, PARAMS) [SLOT] = (any_fn)pl_cu_##FN,

#define PL_CUDA_RT_ENUM_(NAME, PARAMS) R_##NAME,
#define PL_CUDA_RT_NAME_(NAME, PARAMS) [R_##NAME] = #NAME,
#define PL_CUDA_RT_TYPE_(NAME, PARAMS) typedef int (*rt_##NAME##_fn) PARAMS;
#define PL_CUDA_RT_PROTO_(NAME, PARAMS) PL_EXPORT int NAME PARAMS;
