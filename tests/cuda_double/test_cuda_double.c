/* Tests of the CUDA driver test double (tests/cuda_double/cuda_double.c).
 *
 * The double is loaded the way the allocator's cuda backend and libcudart load a driver: dlopen of libcuda.so.1 by
 * path (never linked), dlsym of cuGetProcAddress_v2 only, then every entry point fetched through it by base name and
 * ABI version. Each contract rule of docs/cuda-double.md gets a test that breaks it on purpose.
 */
#include <errno.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda_double.h"

#ifndef PL_CUDA_DOUBLE_PATH
#error "PL_CUDA_DOUBLE_PATH must name the double's build path"
#endif

#define MIB (1ull << 20)
#define GRAN (2 * MIB)

/* Entry points, typed as libcudart types them (cudaTypedefs.h). */
static struct {
  void *lib;
  PFN_cuGetProcAddress_v12000 getProcAddress;
  PFN_cuGetProcAddress_v11030 getProcAddressLegacy;
  PFN_cuInit_v2000 init;
  PFN_cuDriverGetVersion_v2020 driverGetVersion;
  PFN_cuDeviceGetCount_v2000 deviceGetCount;
  PFN_cuDeviceGet_v2000 deviceGet;
  PFN_cuDeviceGetName_v2000 deviceGetName;
  PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
  PFN_cuDeviceTotalMem_v3020 deviceTotalMem;
  PFN_cuDevicePrimaryCtxRetain_v7000 primaryCtxRetain;
  PFN_cuDevicePrimaryCtxRelease_v11000 primaryCtxRelease;
  PFN_cuCtxGetCurrent_v4000 ctxGetCurrent;
  PFN_cuCtxSetCurrent_v4000 ctxSetCurrent;
  PFN_cuMemGetInfo_v3020 memGetInfo;
  PFN_cuMemAlloc_v3020 memAlloc;
  PFN_cuMemFree_v3020 memFree;
  PFN_cuMemAllocAsync_v11020 memAllocAsync;
  PFN_cuMemFreeAsync_v11020 memFreeAsync;
  PFN_cuMemAllocAsync_v11020_ptsz memAllocAsyncPtsz;
  PFN_cuMemFreeAsync_v11020_ptsz memFreeAsyncPtsz;
  PFN_cuMemAllocManaged_v6000 memAllocManaged;
  PFN_cuMemAllocPitch_v3020 memAllocPitch;
  PFN_cuMemHostAlloc_v2020 memHostAlloc;
  PFN_cuMemAllocHost_v3020 memAllocHost;
  PFN_cuMemFreeHost_v2000 memFreeHost;
  PFN_cuMemAddressReserve_v10020 memAddressReserve;
  PFN_cuMemAddressFree_v10020 memAddressFree;
  PFN_cuMemCreate_v10020 memCreate;
  PFN_cuMemRelease_v10020 memRelease;
  PFN_cuMemMap_v10020 memMap;
  PFN_cuMemUnmap_v10020 memUnmap;
  PFN_cuMemSetAccess_v10020 memSetAccess;
  PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity;
  PFN_cuStreamCreate_v2000 streamCreate;
  PFN_cuStreamDestroy_v4000 streamDestroy;
  PFN_cuStreamSynchronize_v2000 streamSynchronize;
  PFN_cuEventCreate_v2000 eventCreate;
  PFN_cuEventRecord_v2000 eventRecord;
  PFN_cuEventQuery_v2000 eventQuery;
  PFN_cuEventDestroy_v4000 eventDestroy;
  PFN_cuMemsetD8_v3020 memsetD8;
  PFN_cuMemcpyDtoH_v3020 memcpyDtoH;
  PFN_cuCtxSynchronize_v2000 ctxSynchronize;
  PFN_cuGetErrorString_v6000 getErrorString;
  PFN_cuGetErrorName_v6000 getErrorName;
  pl_cuda_double_reset_fn *reset;
  pl_cuda_double_counters_fn *counters;
  pl_cuda_double_log_fn *log;
  pl_cuda_double_format_fn *format;
  pl_cuda_double_live_fn *live;
  pl_cuda_double_last_violation_fn *last_violation;
} D;

/* A stand-in for a preloaded tracer's interposer: the executable exports the driver's own name (export_dynamic).
 * Built with -Bsymbolic, the double must still hand out and call its own function, never this one. */
__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  (void)dptr;
  (void)bytesize;
  return CUDA_ERROR_UNKNOWN;
}

/* Stores a void * from dlsym / cuGetProcAddress into a function pointer without a pedantic cast. */
#define AS_FN(dst, p) do { void *p_ = (p); memcpy(&(dst), &p_, sizeof(dst)); } while (0)

static void *sym(const char *name) {
  void *p = dlsym(D.lib, name);
  if (!p) fail_msg("dlsym(%s): %s", name, dlerror());
  return p;
}

static void *proc(const char *name, int version, cuuint64_t flags) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult rc = D.getProcAddress(name, &p, version, flags, &st);
  if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !p)
    fail_msg("cuGetProcAddress_v2(%s, %d, %llu) = %d, status %d", name, version, (unsigned long long)flags, (int)rc,
             (int)st);
  return p;
}

#define FETCH(field, name, version) AS_FN(D.field, proc(name, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM))

static int group_setup(void **state) {
  (void)state;
  D.lib = dlopen(PL_CUDA_DOUBLE_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!D.lib) { fprintf(stderr, "dlopen %s: %s\n", PL_CUDA_DOUBLE_PATH, dlerror()); return -1; }
  AS_FN(D.getProcAddress, sym("cuGetProcAddress_v2"));  /* the only symbol libcudart takes through dlsym */
  FETCH(getProcAddressLegacy, "cuGetProcAddress", 11030);
  FETCH(init, "cuInit", 2000);
  FETCH(driverGetVersion, "cuDriverGetVersion", 2020);
  FETCH(deviceGetCount, "cuDeviceGetCount", 2000);
  FETCH(deviceGet, "cuDeviceGet", 2000);
  FETCH(deviceGetName, "cuDeviceGetName", 2000);
  FETCH(deviceGetAttribute, "cuDeviceGetAttribute", 2000);
  FETCH(deviceTotalMem, "cuDeviceTotalMem", 3020);
  FETCH(primaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  FETCH(primaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000);
  FETCH(ctxGetCurrent, "cuCtxGetCurrent", 4000);
  FETCH(ctxSetCurrent, "cuCtxSetCurrent", 4000);
  FETCH(memGetInfo, "cuMemGetInfo", 3020);
  FETCH(memsetD8, "cuMemsetD8", 3020);
  FETCH(memcpyDtoH, "cuMemcpyDtoH", 3020);
  FETCH(ctxSynchronize, "cuCtxSynchronize", 2000);
  FETCH(memAlloc, "cuMemAlloc", 3020);
  FETCH(memFree, "cuMemFree", 3020);
  FETCH(memAllocAsync, "cuMemAllocAsync", 11020);
  FETCH(memFreeAsync, "cuMemFreeAsync", 11020);
  AS_FN(D.memAllocAsyncPtsz, proc("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  AS_FN(D.memFreeAsyncPtsz, proc("cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  FETCH(memAllocManaged, "cuMemAllocManaged", 6000);
  FETCH(memAllocPitch, "cuMemAllocPitch", 3020);
  FETCH(memHostAlloc, "cuMemHostAlloc", 2020);
  FETCH(memAllocHost, "cuMemAllocHost", 3020);
  FETCH(memFreeHost, "cuMemFreeHost", 2000);
  FETCH(memAddressReserve, "cuMemAddressReserve", 10020);
  FETCH(memAddressFree, "cuMemAddressFree", 10020);
  FETCH(memCreate, "cuMemCreate", 10020);
  FETCH(memRelease, "cuMemRelease", 10020);
  FETCH(memMap, "cuMemMap", 10020);
  FETCH(memUnmap, "cuMemUnmap", 10020);
  FETCH(memSetAccess, "cuMemSetAccess", 10020);
  FETCH(memGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020);
  FETCH(streamCreate, "cuStreamCreate", 2000);
  FETCH(streamDestroy, "cuStreamDestroy", 4000);
  FETCH(streamSynchronize, "cuStreamSynchronize", 2000);
  FETCH(eventCreate, "cuEventCreate", 2000);
  FETCH(eventRecord, "cuEventRecord", 2000);
  FETCH(eventQuery, "cuEventQuery", 2000);
  FETCH(eventDestroy, "cuEventDestroy", 4000);
  FETCH(getErrorString, "cuGetErrorString", 6000);
  FETCH(getErrorName, "cuGetErrorName", 6000);
  AS_FN(D.reset, sym("pl_cuda_double_reset"));
  AS_FN(D.counters, sym("pl_cuda_double_counters"));
  AS_FN(D.log, sym("pl_cuda_double_log"));
  AS_FN(D.format, sym("pl_cuda_double_format"));
  AS_FN(D.live, sym("pl_cuda_double_live"));
  AS_FN(D.last_violation, sym("pl_cuda_double_last_violation"));
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  D.reset("");
  return dlclose(D.lib);
}

static pl_cuda_double_counters_t counters(void) {
  pl_cuda_double_counters_t c;
  D.counters(&c);
  return c;
}

/* Reset with `config` (quiet unless it says otherwise), cuInit, retain device 0's primary context, make it current. */
static void start(const char *config) {
  char cfg[512];
  snprintf(cfg, sizeof cfg, "verbose:0%s%s", config[0] ? "," : "", config);
  assert_int_equal(D.reset(cfg), 0);
  assert_int_equal(D.init(0), CUDA_SUCCESS);
  CUdevice dev = -1;
  CUcontext ctx = NULL;
  assert_int_equal(D.deviceGet(&dev, 0), CUDA_SUCCESS);
  assert_int_equal(D.primaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  assert_non_null(ctx);
  assert_int_equal(D.ctxSetCurrent(ctx), CUDA_SUCCESS);
}

/* Releases the context and requires that nothing leaked and nothing broke the contract. */
static void finish(void) {
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_leaks, 0);
  assert_int_equal(c.n_violations, 0);
  assert_int_equal(D.live(1), 0);
  assert_int_equal(c.used_bytes, 0);
}

static CUmemAllocationProp prop_dev(int dev) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

static CUresult set_rw(CUdeviceptr ptr, size_t size, CUmemAccess_flags flags) {
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = flags;
  return D.memSetAccess(ptr, size, &d, 1);
}

static void *hostp(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* Expects a call to be refused as a contract violation: checks the code and that one more violation was counted. */
#define REFUSED(call, code) do {                                   \
    uint64_t v0_ = counters().n_violations;                        \
    assert_int_equal((call), (code));                              \
    assert_int_equal(counters().n_violations, v0_ + 1);            \
  } while (0)

/* Runs fn(arg) with fd 2 sent to a temporary file; returns what was written (malloc'ed). */
static char *capture_stderr(void (*fn)(void *), void *arg) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(tmp), 2) >= 0);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fseek(tmp, 0, SEEK_END);
  long n = ftell(tmp);
  assert_true(n >= 0);
  rewind(tmp);
  char *buf = calloc(1, (size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, tmp), (size_t)n);
  fclose(tmp);
  return buf;
}

/* In a forked child: default SIGSEGV action (cmocka and ASan install handlers), then fn; returns the wait status. */
static int in_child(void (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    fn(arg);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static void write_byte(void *p) { *(volatile char *)p = 42; }
static void read_byte(void *p) { if (*(volatile char *)p == 42) _exit(42); }

/* ---------------------------------------------------------------------------------------------------------------- */

static void test_cuda_double_proc_address(void **state) {
  (void)state;
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  /* Pointers are the double's own exported functions, even with an interposer of the same name in the process. */
  void *own = sym("cuMemAlloc_v2");
  void *interposer = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  assert_non_null(interposer);
  assert_ptr_not_equal(own, interposer);  /* the executable's definition is visible process-wide ... */
  assert_ptr_equal(proc("cuMemAlloc", 3020, 0), own);  /* ... but -Bsymbolic keeps the double's table its own */
  assert_ptr_equal(proc("cuMemAlloc", 13000, 0), sym("cuMemAlloc_v2"));
  assert_ptr_equal(proc("cuDevicePrimaryCtxRelease", 12000, 0), sym("cuDevicePrimaryCtxRelease_v2"));
  assert_ptr_equal(proc("cuStreamDestroy", 12000, 0), sym("cuStreamDestroy_v2"));
  /* Per-thread default stream variants only when asked for. */
  assert_ptr_equal(proc("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                   sym("cuMemAllocAsync_ptsz"));
  assert_ptr_equal(proc("cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                   sym("cuMemFreeAsync_ptsz"));
  assert_ptr_equal(proc("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_DEFAULT), sym("cuMemAllocAsync"));
  assert_ptr_equal(proc("cuEventRecord", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                   sym("cuEventRecord_ptsz"));
  /* No per-thread variant: the legacy one. */
  assert_ptr_equal(proc("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), sym("cuMemAlloc_v2"));
  /* cuGetProcAddress itself, by version: the runtime re-fetches it this way. */
  assert_ptr_equal(proc("cuGetProcAddress", 12000, 0), sym("cuGetProcAddress_v2"));
  assert_ptr_equal(proc("cuGetProcAddress", 11030, 0), sym("cuGetProcAddress"));
  /* The legacy entry point answers the same. */
  assert_int_equal(D.getProcAddressLegacy("cuMemCreate", &p, 10020, 0), CUDA_SUCCESS);
  assert_ptr_equal(p, sym("cuMemCreate"));
  /* Too old a version for the ABI the double implements. */
  p = &st;
  assert_int_equal(D.getProcAddress("cuMemAlloc", &p, 3000, 0, &st), CUDA_SUCCESS);
  assert_null(p);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  assert_int_equal(D.getProcAddress("cuMemCreate", &p, 10010, 0, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  /* Unknown symbol: success with NULL and SYMBOL_NOT_FOUND, as documented for CUDA 13. */
  p = &st;
  assert_int_equal(D.getProcAddress("cuLaunchKernel", &p, 12000, 0, &st), CUDA_SUCCESS);
  assert_null(p);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  /* A version newer than the driver, bad flags, NULL arguments. */
  assert_int_equal(D.getProcAddress("cuMemAlloc", &p, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.getProcAddress("cuMemAlloc", &p, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.getProcAddress(NULL, &p, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.getProcAddress("cuMemAlloc", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
  /* The status pointer is optional. */
  assert_int_equal(D.getProcAddress("cuInit", &p, 12000, 0, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, sym("cuInit"));
}

static void test_cuda_double_init_and_devices(void **state) {
  (void)state;
  assert_int_equal(D.reset("verbose:0,capacity:64MiB,devices:2"), 0);
  int v = 0, n = 0;
  assert_int_equal(D.driverGetVersion(&v), CUDA_SUCCESS);  /* works before cuInit, like the real one */
  assert_int_equal(v, 13000);
  assert_int_equal(D.deviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr ptr = 0;
  assert_int_equal(D.memAlloc(&ptr, 4096), CUDA_ERROR_NOT_INITIALIZED);
  assert_int_equal(D.init(1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.init(0), CUDA_SUCCESS);
  assert_int_equal(D.deviceGetCount(&n), CUDA_SUCCESS);
  assert_int_equal(n, 2);
  CUdevice dev = -1;
  assert_int_equal(D.deviceGet(&dev, 1), CUDA_SUCCESS);
  assert_int_equal(dev, 1);
  assert_int_equal(D.deviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  assert_int_equal(D.deviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
  assert_non_null(strstr(name, "double"));
  assert_int_equal(D.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
  assert_int_equal(v, 1);
  assert_int_equal(D.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1), CUDA_SUCCESS);
  assert_true(v >= 7);
  assert_int_equal(D.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5), CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  assert_int_equal(D.deviceTotalMem(&total, 1), CUDA_SUCCESS);
  assert_int_equal(total, 64 * MIB);
  CUmemAllocationProp prop = prop_dev(0);
  size_t gran = 0;
  assert_int_equal(D.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  assert_int_equal(gran, GRAN);
  assert_int_equal(D.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
  assert_int_equal(gran, GRAN);
  prop.location.id = 7;
  assert_int_equal(D.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   CUDA_ERROR_INVALID_DEVICE);
  prop = prop_dev(0);
  prop.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
  assert_int_equal(D.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   CUDA_ERROR_INVALID_VALUE);
  const char *s = NULL;
  assert_int_equal(D.getErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(D.getErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_string_equal(s, "out of memory");
  assert_int_equal(D.getErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_null(s);
}

static void test_cuda_double_config(void **state) {
  (void)state;
  assert_int_equal(D.reset("verbose:0,capacity:3GiB,granularity:64KiB"), 0);
  assert_int_equal(counters().capacity_bytes, 3ull << 30);
  assert_int_equal(counters().granularity_bytes, 64ull << 10);
  assert_int_equal(D.reset("verbose:0,capacity:4194304"), 0);
  assert_int_equal(counters().capacity_bytes, 4 * MIB);
  /* From the environment, as a process under test would be configured. */
  setenv("PL_CUDA_DOUBLE", "verbose:0,capacity:6MiB,granularity:1MiB", 1);
  assert_int_equal(D.reset(NULL), 0);
  unsetenv("PL_CUDA_DOUBLE");
  assert_int_equal(counters().capacity_bytes, 6 * MIB);
  assert_int_equal(counters().granularity_bytes, MIB);
  /* Bad configurations: a clear message and cuInit fails. */
  const char *bad[] = { "capacity:lots", "granularity:3MiB", "granularity:1KiB", "capacity:3MiB",
                        "nonsense:1", "devices:0", "devices:9", "capacity" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(D.reset(bad[i]), -EINVAL);
    assert_int_not_equal(D.init(0), CUDA_SUCCESS);
  }
  assert_int_equal(D.reset("verbose:0"), 0);
  assert_int_equal(D.init(0), CUDA_SUCCESS);
}

static void test_cuda_double_context(void **state) {
  (void)state;
  assert_int_equal(D.reset("verbose:0,capacity:64MiB,ctx_bytes:8MiB"), 0);
  assert_int_equal(D.init(0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  size_t free_b = 0, total_b = 0;
  REFUSED(D.memAlloc(&ptr, 4096), CUDA_ERROR_INVALID_CONTEXT);
  REFUSED(D.memGetInfo(&free_b, &total_b), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext ctx = NULL, cur = (CUcontext)&ctx;
  assert_int_equal(D.ctxGetCurrent(&cur), CUDA_SUCCESS);
  assert_null(cur);
  REFUSED(D.primaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);  /* not retained */
  assert_int_equal(D.primaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  CUcontext ctx2 = NULL;
  assert_int_equal(D.primaryCtxRetain(&ctx2, 0), CUDA_SUCCESS);
  assert_ptr_equal(ctx, ctx2);  /* one primary context per device */
  assert_int_equal(D.ctxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(D.ctxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, ctx);
  /* The context's own footprint shows in cuMemGetInfo, like a real context's. */
  assert_int_equal(D.memGetInfo(&free_b, &total_b), CUDA_SUCCESS);
  assert_int_equal(total_b, 64 * MIB);
  assert_int_equal(free_b, 56 * MIB);
  REFUSED(D.ctxSetCurrent((CUcontext)&ptr), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(D.memAlloc(&ptr, 4096), CUDA_SUCCESS);  /* still retained once */
  assert_int_equal(D.memFree(ptr), CUDA_SUCCESS);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);  /* destroyed now */
  assert_int_equal(counters().n_ctx_active, 0);
  assert_int_equal(counters().used_bytes, 0);
  REFUSED(D.memAlloc(&ptr, 4096), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  /* Re-retained: the same handle becomes valid again, but the thread must make it current again. */
  assert_int_equal(D.primaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  REFUSED(D.memAlloc(&ptr, 4096), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(D.ctxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(D.memAlloc(&ptr, 4096), CUDA_SUCCESS);
  assert_int_equal(D.memFree(ptr), CUDA_SUCCESS);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(counters().n_leaks, 0);
}

static void test_cuda_double_alloc_free(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUdeviceptr a = 0, b = 0;
  size_t free0 = 0, free1 = 0, total = 0;
  assert_int_equal(D.memGetInfo(&free0, &total), CUDA_SUCCESS);
  assert_int_equal(free0, 64 * MIB);
  assert_int_equal(D.memAlloc(&a, 3 * MIB + 1), CUDA_SUCCESS);
  assert_int_equal(a % 256, 0);
  memset(hostp(a), 0x5a, 3 * MIB + 1);  /* device memory is host memory here: usable at once */
  assert_int_equal(D.memGetInfo(&free1, &total), CUDA_SUCCESS);
  assert_int_equal(free0 - free1, 3 * MIB + 4096);  /* charged in host pages */
  assert_int_equal(D.memAlloc(&b, 100), CUDA_SUCCESS);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_alloc, 2);
  assert_int_equal(c.n_live_allocs, 2);
  REFUSED(D.memFree(a + 256), CUDA_ERROR_INVALID_VALUE);  /* not the start */
  REFUSED(D.memAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memAlloc(NULL, 10), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memFree(0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  REFUSED(D.memFree(a), CUDA_ERROR_INVALID_VALUE);  /* double free */
  assert_int_equal(D.memFree(b), CUDA_SUCCESS);
  c = counters();
  assert_int_equal(c.n_free, 2);
  assert_int_equal(c.peak_used_bytes, 3 * MIB + 2 * 4096);
  assert_string_not_equal(D.last_violation(), "");
  assert_non_null(strstr(D.last_violation(), "cuMemFree_v2"));
  /* The violations above were deliberate, so check the rest of finish() by hand. */
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(counters().n_leaks, 0);
  assert_int_equal(D.live(1), 0);
}

static void test_cuda_double_capacity_oom(void **state) {
  (void)state;
  start("capacity:8MiB");
  CUdeviceptr a = 0, b = 0, c = 0;
  assert_int_equal(D.memAlloc(&a, 6 * MIB), CUDA_SUCCESS);
  assert_int_equal(D.memAlloc(&b, 4 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp prop = prop_dev(0);
  CUmemGenericAllocationHandle h = 0;
  assert_int_equal(D.memCreate(&h, 4 * MIB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(D.memAllocManaged(&c, 4 * MIB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(D.memAllocAsync(&c, 4 * MIB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(counters().n_ooms, 4);
  assert_int_equal(counters().n_violations, 0);  /* running out is not misuse */
  assert_int_equal(D.memCreate(&h, 2 * MIB, &prop, 0), CUDA_SUCCESS);  /* what is left still works */
  assert_int_equal(D.memAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);     /* ... and nothing more */
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  assert_int_equal(D.memAlloc(&b, 8 * MIB), CUDA_SUCCESS);  /* freed memory is reusable */
  assert_int_equal(D.memFree(b), CUDA_SUCCESS);
  finish();
}

static void test_cuda_double_streams_async_managed(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUstream s = NULL;
  CUevent e = NULL;
  CUdeviceptr a = 0, b = 0, m = 0;
  assert_int_equal(D.streamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(D.memAllocAsync(&a, MIB, s), CUDA_SUCCESS);
  memset(hostp(a), 1, MIB);
  assert_int_equal(D.memAllocAsyncPtsz(&b, MIB, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  assert_int_equal(D.memAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  memset(hostp(m), 1, 4096);
  assert_int_equal(D.eventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  assert_int_equal(D.eventRecord(e, s), CUDA_SUCCESS);
  assert_int_equal(D.eventQuery(e), CUDA_SUCCESS);
  assert_int_equal(D.streamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(D.streamSynchronize(NULL), CUDA_SUCCESS);
  assert_int_equal(D.memFreeAsync(a, s), CUDA_SUCCESS);
  assert_int_equal(D.memFreeAsyncPtsz(b, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  assert_int_equal(D.memFree(m), CUDA_SUCCESS);
  assert_int_equal(D.eventDestroy(e), CUDA_SUCCESS);
  assert_int_equal(D.streamDestroy(s), CUDA_SUCCESS);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_alloc, 3);
  assert_int_equal(c.n_free, 3);
  assert_int_equal(c.n_live_streams, 0);
  assert_int_equal(c.n_live_events, 0);
  /* The log tells the per-thread variants apart. */
  pl_cuda_double_rec_t r[8];
  assert_int_equal(D.log(0, r, 8), 6);
  assert_int_equal(r[0].call, PL_CUDA_DOUBLE_MEM_ALLOC_ASYNC);
  assert_int_equal(r[0].ptsz, 0);
  assert_int_equal(r[0].stream, (uint64_t)(uintptr_t)s);
  assert_int_equal(r[1].call, PL_CUDA_DOUBLE_MEM_ALLOC_ASYNC);
  assert_int_equal(r[1].ptsz, 1);
  assert_int_equal(r[2].call, PL_CUDA_DOUBLE_MEM_ALLOC_MANAGED);
  assert_int_equal(r[2].arg, CU_MEM_ATTACH_GLOBAL);
  assert_int_equal(r[4].call, PL_CUDA_DOUBLE_MEM_FREE_ASYNC);
  assert_int_equal(r[4].ptsz, 1);
  assert_int_equal(r[4].size_bytes, MIB);
  finish();
  /* Misuse: destroyed handles, bad flags. */
  start("capacity:64MiB");
  assert_int_equal(D.streamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(D.eventCreate(&e, 0), CUDA_SUCCESS);
  assert_int_equal(D.streamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(D.eventDestroy(e), CUDA_SUCCESS);
  REFUSED(D.memAllocAsync(&a, MIB, s), CUDA_ERROR_INVALID_HANDLE);
  REFUSED(D.streamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  REFUSED(D.streamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  REFUSED(D.eventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  REFUSED(D.eventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
  REFUSED(D.memAllocManaged(&m, 4096, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.streamCreate(&s, 0x100), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(D.live(1), 0);
}

/* The expandable-segment pattern of a caching allocator: one reserved range, pages mapped at its end on demand. */
static void test_cuda_double_vmm_expandable(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUmemAllocationProp prop = prop_dev(0);
  size_t gran = 0, free_b = 0, total = 0;
  assert_int_equal(D.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  const size_t range = 16 * gran;
  CUdeviceptr base = 0;
  assert_int_equal(D.memAddressReserve(&base, range, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(base % gran, 0);
  assert_int_equal(D.memGetInfo(&free_b, &total), CUDA_SUCCESS);
  assert_int_equal(free_b, total);  /* reserving costs no device memory */
  CUmemGenericAllocationHandle h[4];
  for (int i = 0; i < 4; i++) {  /* grow by one page at a time, releasing each handle once mapped (as PyTorch) */
    CUdeviceptr at = base + (size_t)i * gran;
    assert_int_equal(D.memCreate(&h[i], gran, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(D.memMap(at, gran, 0, h[i], 0), CUDA_SUCCESS);
    assert_int_equal(set_rw(at, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    assert_int_equal(D.memRelease(h[i]), CUDA_SUCCESS);
    memset(hostp(at), 0x10 + i, gran);
  }
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_live_handles, 0);
  assert_int_equal(c.n_live_physical, 4);  /* released but mapped: still backed */
  assert_int_equal(c.used_bytes, 4 * gran);
  /* The data survived all later maps (no page was mapped over). */
  for (int i = 0; i < 4; i++) assert_int_equal(((unsigned char *)hostp(base))[(size_t)i * gran + 7], 0x10 + i);
  /* One bigger handle mapped across two pages, access set for the whole grown range at once. */
  CUmemGenericAllocationHandle big = 0;
  assert_int_equal(D.memCreate(&big, 2 * gran, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base + 4 * gran, 2 * gran, 0, big, 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base, 6 * gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  memset(hostp(base + 4 * gran), 0x77, 2 * gran);
  /* Shrink: unmap the tail mappings; the physical memory goes once unmapped and released. */
  assert_int_equal(D.memUnmap(base + 3 * gran, 3 * gran), CUDA_SUCCESS);  /* two whole mappings at once */
  c = counters();
  assert_int_equal(c.n_live_physical, 4);  /* big is unreleased: still backed */
  assert_int_equal(c.used_bytes, 5 * gran);
  assert_int_equal(D.memRelease(big), CUDA_SUCCESS);
  c = counters();
  assert_int_equal(c.n_live_physical, 3);
  assert_int_equal(c.used_bytes, 3 * gran);
  /* Re-grow over the freed tail: new pages, access to be set again. */
  assert_int_equal(D.memCreate(&h[0], gran, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base + 3 * gran, gran, 0, h[0], 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base + 3 * gran, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  ((char *)hostp(base + 3 * gran))[0] = 1;
  assert_int_equal(D.memRelease(h[0]), CUDA_SUCCESS);
  /* Tear down: unmap all (one call per mapping here), then free the range. */
  for (int i = 3; i >= 0; i--) assert_int_equal(D.memUnmap(base + (size_t)i * gran, gran), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, range), CUDA_SUCCESS);
  c = counters();
  assert_int_equal(c.n_create, 6);
  assert_int_equal(c.n_map, 6);
  assert_int_equal(c.n_unmap, 5);
  assert_int_equal(c.n_live_mappings, 0);
  assert_int_equal(c.n_live_reservations, 0);
  finish();
}

static void test_cuda_double_vmm_contract(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUmemAllocationProp prop = prop_dev(0);
  CUdeviceptr base = 0, other = 0;
  CUmemGenericAllocationHandle h = 0, h2 = 0, dead = 0;
  /* cuMemAddressReserve: size a multiple of the host page, power-of-two alignment, flags 0. */
  REFUSED(D.memAddressReserve(&base, 8 * GRAN + 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memAddressReserve(&base, 8 * GRAN, 3 * GRAN, 0, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memAddressReserve(&base, 8 * GRAN, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.memAddressReserve(&base, 8 * GRAN, 4 * GRAN, 0, 0), CUDA_SUCCESS);
  assert_int_equal(base % (4 * GRAN), 0);
  assert_int_equal(D.memAddressReserve(&other, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  /* cuMemCreate: size a multiple of the granularity, a device location, flags 0. */
  REFUSED(D.memCreate(&h, GRAN + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memCreate(&h, GRAN, &prop, 1), CUDA_ERROR_INVALID_VALUE);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  REFUSED(D.memCreate(&h, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop = prop_dev(1);
  REFUSED(D.memCreate(&h, GRAN, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
  prop = prop_dev(0);
  assert_int_equal(D.memCreate(&h, 2 * GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h2, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&dead, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(dead), CUDA_SUCCESS);
  REFUSED(D.memRelease(dead), CUDA_ERROR_INVALID_VALUE);  /* double release */
  REFUSED(D.memRelease(0xdeadbeef), CUDA_ERROR_INVALID_VALUE);
  /* cuMemMap: aligned, inside one reservation, never over a mapped page, offset 0, within the handle. */
  REFUSED(D.memMap(base + 4096, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memMap(base, GRAN + 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memMap(base + 7 * GRAN, 2 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* runs off the end */
  void *outside = mmap(NULL, 4 * GRAN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(outside != MAP_FAILED);
  CUdeviceptr out_al = ((uint64_t)(uintptr_t)outside + GRAN - 1) / GRAN * GRAN;
  ((char *)outside)[0] = 1;
  REFUSED(D.memMap(out_al, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  /* not reserved: must not be touched */
  REFUSED(D.memMap(base, 4 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* bigger than the handle */
  REFUSED(D.memMap(base, GRAN, GRAN, h, 0), CUDA_ERROR_INVALID_VALUE);  /* offset must be 0 */
  REFUSED(D.memMap(base, GRAN, 0, h, 1), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memMap(base, GRAN, 0, dead, 0), CUDA_ERROR_INVALID_VALUE);  /* released handle */
  assert_int_equal(D.memMap(base, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
  REFUSED(D.memMap(base + GRAN, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  /* over a mapped page */
  assert_int_equal(D.memMap(base + 2 * GRAN, GRAN, 0, h2, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(other, GRAN, 0, h2, 0), CUDA_SUCCESS);  /* one handle, two places */
  /* cuMemSetAccess: only over fully mapped, aligned ranges, valid descriptors. */
  REFUSED(set_rw(base, 4 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);  /* hole */
  REFUSED(set_rw(base + 4096, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
  REFUSED(set_rw(base, GRAN, (CUmemAccess_flags)2), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memSetAccess(base, GRAN, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(set_rw(base, 3 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  assert_int_equal(set_rw(other, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  ((char *)hostp(base + 2 * GRAN))[5] = 9;
  assert_int_equal(((char *)hostp(other))[5], 9);  /* same physical memory */
  /* cuMemUnmap: whole mappings only. */
  REFUSED(D.memUnmap(base, GRAN), CUDA_ERROR_INVALID_VALUE);  /* half of h's mapping */
  REFUSED(D.memUnmap(base + 3 * GRAN, GRAN), CUDA_ERROR_INVALID_VALUE);  /* nothing mapped there */
  /* cuMemAddressFree: exact range, nothing mapped in it. */
  REFUSED(D.memAddressFree(base, 8 * GRAN), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memAddressFree(base + GRAN, 7 * GRAN), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memFree(base), CUDA_ERROR_INVALID_VALUE);  /* reserved memory is not a cuMemAlloc allocation */
  assert_non_null(strstr(D.last_violation(), "reserved range"));
  assert_int_equal(D.memUnmap(base, 3 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memUnmap(other, GRAN), CUDA_SUCCESS);
  REFUSED(D.memAddressFree(base, 4 * GRAN), CUDA_ERROR_INVALID_VALUE);  /* wrong size */
  assert_int_equal(D.memAddressFree(base, 8 * GRAN), CUDA_SUCCESS);
  REFUSED(D.memAddressFree(base, 8 * GRAN), CUDA_ERROR_INVALID_VALUE);  /* twice */
  assert_int_equal(D.memAddressFree(other, 2 * GRAN), CUDA_SUCCESS);
  REFUSED(D.memMap(base, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  /* range gone */
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(h2), CUDA_SUCCESS);
  assert_int_equal(((char *)outside)[0], 1);
  munmap(outside, 4 * GRAN);
  assert_true(counters().n_violations >= 25);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(counters().n_leaks, 0);
  assert_int_equal(D.live(1), 0);
  assert_int_equal(counters().used_bytes, 0);
}

/* Access must be set before use: a write to mapped memory without access faults, as it would on a GPU. */
static void test_cuda_double_access_faults(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUmemAllocationProp prop = prop_dev(0);
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle h = 0;
  assert_int_equal(D.memAddressReserve(&base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h, 2 * GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
  /* Mapped, no access yet: a write dies of SIGSEGV. */
  int st = in_child(write_byte, hostp(base + GRAN + 123));
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGSEGV);
  /* Reserved but unmapped: the same. */
  st = in_child(write_byte, hostp(base + 3 * GRAN));
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGSEGV);
  /* Read-only access: reads work, writes fault. */
  assert_int_equal(set_rw(base, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ), CUDA_SUCCESS);
  st = in_child(read_byte, hostp(base));
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  st = in_child(write_byte, hostp(base));
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGSEGV);
  /* Read-write: the positive control, in the child and here. */
  assert_int_equal(set_rw(base, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  st = in_child(write_byte, hostp(base + GRAN + 123));
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  write_byte(hostp(base + 5));
  st = in_child(read_byte, hostp(base + 5));  /* the child sees the parent's write through the shared memfd */
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 42);
  /* After unmap and a fresh map of new memory, access has to be set again. */
  assert_int_equal(D.memUnmap(base, 2 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
  st = in_child(write_byte, hostp(base));
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGSEGV);
  assert_int_equal(D.memUnmap(base, 2 * GRAN), CUDA_SUCCESS);
  /* Plain freed allocations are unmapped at once (checked before anything else can reuse the address). */
  CUdeviceptr a = 0;
  assert_int_equal(D.memAlloc(&a, 2 * GRAN), CUDA_SUCCESS);
  assert_int_equal(msync(hostp(a), 4096, MS_ASYNC), 0);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  errno = 0;
  assert_int_equal(msync(hostp(a), 4096, MS_ASYNC), -1);
  assert_int_equal(errno, ENOMEM);
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  finish();
}

static void test_cuda_double_fault_injection(void **state) {
  (void)state;
  start("capacity:64MiB,fail_alloc_at:2,fail_create_at:3,fail_map_at:2,fail_reserve_at:2,fail_access_at:1");
  CUdeviceptr a[3] = { 0 }, base = 0, base2 = 0;
  assert_int_equal(D.memAlloc(&a[0], 4096), CUDA_SUCCESS);
  assert_int_equal(D.memAllocAsync(&a[1], 4096, NULL), CUDA_ERROR_OUT_OF_MEMORY);  /* the 2nd allocation, any kind */
  assert_int_equal(a[1], 0);
  assert_int_equal(D.memAlloc(&a[1], 4096), CUDA_SUCCESS);  /* only the Nth */
  assert_int_equal(D.memAddressReserve(&base, 8 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memAddressReserve(&base2, 8 * GRAN, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp prop = prop_dev(0);
  CUmemGenericAllocationHandle h[4] = { 0 };
  assert_int_equal(D.memCreate(&h[0], GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h[1], GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h[2], GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(D.memCreate(&h[2], GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, h[0], 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base + GRAN, GRAN, 0, h[1], 0), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(counters().n_live_mappings, 1);  /* the failed map left nothing behind */
  assert_int_equal(D.memMap(base + GRAN, GRAN, 0, h[1], 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(set_rw(base, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_injected, 5);
  assert_int_equal(c.n_violations, 0);
  assert_int_equal(c.n_ooms, 0);  /* injected failures are counted apart from real exhaustion */
  /* The failures are in the log with their results. */
  pl_cuda_double_rec_t r[32];
  size_t n = D.log(0, r, 32);
  size_t n_fail = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].result != CUDA_ERROR_OUT_OF_MEMORY) continue;
    n_fail++;
    if (r[i].call != PL_CUDA_DOUBLE_MEM_MAP && r[i].call != PL_CUDA_DOUBLE_MEM_SET_ACCESS)
      assert_int_equal(r[i].ptr | r[i].handle, 0);  /* out-parameters of a failed call are logged as 0 */
  }
  assert_int_equal(n_fail, 5);
  assert_int_equal(D.memUnmap(base, GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memUnmap(base + GRAN, GRAN), CUDA_SUCCESS);
  for (int i = 0; i < 3; i++) assert_int_equal(D.memRelease(h[i]), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, 8 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memFree(a[0]), CUDA_SUCCESS);
  assert_int_equal(D.memFree(a[1]), CUDA_SUCCESS);
  finish();
}

/* fail_code: injected failures return another CUresult (a non-OOM driver error); stream syncs are counted and an
 * unmap counts as synchronised only when a successful cuStreamSynchronize came after the mapping was made. */
static void test_cuda_double_fail_code_and_sync_before_unmap(void **state) {
  (void)state;
  assert_int_equal(D.reset("fail_code:0"), -EINVAL);
  assert_int_equal(D.reset("fail_code:1000"), -EINVAL);
  start("capacity:64MiB,fail_alloc_at:1,fail_map_at:1,fail_code:999");
  CUdeviceptr a = 0, base = 0;
  assert_int_equal(D.memAlloc(&a, 4096), CUDA_ERROR_UNKNOWN);
  assert_int_equal(D.memAlloc(&a, 4096), CUDA_SUCCESS);
  CUmemAllocationProp prop = prop_dev(0);
  CUmemGenericAllocationHandle h[2] = { 0 };
  assert_int_equal(D.memAddressReserve(&base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  for (int i = 0; i < 2; i++) assert_int_equal(D.memCreate(&h[i], GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, h[0], 0), CUDA_ERROR_UNKNOWN);
  assert_int_equal(D.memMap(base, GRAN, 0, h[0], 0), CUDA_SUCCESS);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_injected, 2);
  assert_int_equal(c.n_ooms, 0);
  assert_int_equal(c.n_stream_sync, 0);
  CUstream s = NULL;
  assert_int_equal(D.streamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(D.streamSynchronize(s), CUDA_SUCCESS);        /* after h[0]'s map */
  assert_int_equal(D.memMap(base + GRAN, GRAN, 0, h[1], 0), CUDA_SUCCESS);
  assert_int_equal(D.memUnmap(base, GRAN), CUDA_SUCCESS);         /* synchronised */
  assert_int_equal(D.memUnmap(base + GRAN, GRAN), CUDA_SUCCESS);  /* mapped after the sync: not */
  c = counters();
  assert_int_equal(c.n_stream_sync, 1);
  assert_int_equal(c.n_unmap, 2);
  assert_int_equal(c.n_unmap_synced, 1);
  assert_int_equal(D.streamSynchronize((CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(counters().n_stream_sync, 1);                  /* failed syncs do not count */
  for (int i = 0; i < 2; i++) assert_int_equal(D.memRelease(h[i]), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.streamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  assert_int_equal(counters().n_violations, 1);                   /* the bad stream above */
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(D.live(1), 0);
  assert_int_equal(counters().n_leaks, 0);
}

/* A deliberate leak: context destroy reports and reclaims it. */
static void leak_and_destroy(void *arg) {
  CUdeviceptr *base = arg;
  CUdeviceptr a = 0;
  CUstream s = NULL;
  CUmemGenericAllocationHandle h = 0, h2 = 0;
  CUmemAllocationProp prop = prop_dev(0);
  assert_int_equal(D.memAlloc(&a, 3 * MIB), CUDA_SUCCESS);
  assert_int_equal(D.streamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(D.memAddressReserve(base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(*base, GRAN, 0, h, 0), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);  /* released but left mapped */
  assert_int_equal(D.memCreate(&h2, GRAN, &prop, 0), CUDA_SUCCESS);  /* never released */
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
}

static void test_cuda_double_leak_at_context_destroy(void **state) {
  (void)state;
  start("capacity:64MiB,ctx_bytes:1MiB");
  CUdeviceptr base = 0;
  char *err = capture_stderr(leak_and_destroy, &base);
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_leaks, 4);  /* allocation, stream, mapping, unreleased handle */
  assert_int_equal(c.leaked_bytes, 3 * MIB + 2 * GRAN);
  assert_non_null(strstr(err, "leak at context destroy: cuMemAlloc_v2"));
  assert_non_null(strstr(err, "leak at context destroy: cuStreamCreate"));
  assert_non_null(strstr(err, "leak at context destroy: cuMemMap"));
  assert_non_null(strstr(err, "leak at context destroy: cuMemCreate"));
  assert_non_null(strstr(err, "4 object(s)"));
  free(err);
  /* Reclaimed: nothing on the device, and the range (not a context object) can now be freed. */
  assert_int_equal(c.used_bytes, 0);
  assert_int_equal(c.n_live_allocs + c.n_live_handles + c.n_live_physical + c.n_live_mappings + c.n_live_streams, 0);
  assert_int_equal(c.n_live_reservations, 1);
  assert_int_equal(D.live(0), 1);
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.live(0), 0);
}

/* A child that exits with a leak: the report on stderr, and the exit code that leak_exitcode asks for. */
static void leak_then_exit(void *arg) {
  (void)arg;
  if (D.reset("verbose:0,leak_exitcode:3") != 0 || D.init(0) != CUDA_SUCCESS) _exit(10);
  CUcontext ctx = NULL;
  CUdeviceptr a = 0, base = 0;
  if (D.primaryCtxRetain(&ctx, 0) || D.ctxSetCurrent(ctx) || D.memAlloc(&a, 12345) ||
      D.memAddressReserve(&base, GRAN, 0, 0, 0))
    _exit(11);
  exit(0);  /* runs the double's destructor */
}

static void test_cuda_double_leak_at_exit(void **state) {
  (void)state;
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    leak_then_exit(NULL);
  }
  close(pipefd[1]);
  char buf[4096] = { 0 };
  size_t got = 0;
  ssize_t n;
  while (got < sizeof buf - 1 && (n = read(pipefd[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
  close(pipefd[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 3);
  assert_non_null(strstr(buf, "leak at process exit: cuMemAlloc_v2"));
  assert_non_null(strstr(buf, "size=12345"));
  assert_non_null(strstr(buf, "leak at process exit: cuMemAddressReserve"));
  assert_non_null(strstr(buf, "2 object(s)"));
}

/* After fork the child cannot use the device (as with CUDA), and its exit does not report the parent's objects. */
static void child_uses_driver(void *arg) {
  (void)arg;
  CUdeviceptr a = 0;
  if (D.memAlloc(&a, 4096) != CUDA_ERROR_NOT_INITIALIZED) _exit(20);
  if (D.init(0) != CUDA_ERROR_NOT_INITIALIZED) _exit(21);
  exit(0);  /* runs the destructor: it must stay silent and keep the exit code */
}

static void fork_with_live_objects(void *arg) {
  int *status = arg;
  *status = in_child(child_uses_driver, NULL);
}

static void test_cuda_double_fork_child(void **state) {
  (void)state;
  start("capacity:64MiB,leak_exitcode:5");
  CUdeviceptr a = 0;
  assert_int_equal(D.memAlloc(&a, 4096), CUDA_SUCCESS);
  int status = -1;
  char *err = capture_stderr(fork_with_live_objects, &status);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_null(strstr(err, "leak"));
  free(err);
  CUdeviceptr b = 0;
  assert_int_equal(D.memAlloc(&b, 4096), CUDA_SUCCESS);  /* the parent keeps working */
  assert_int_equal(D.live(0), 2);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  assert_int_equal(D.memFree(b), CUDA_SUCCESS);
  finish();
}

/* The log, in memory and in the file named by log:PATH, byte for byte. */
static void test_cuda_double_log(void **state) {
  (void)state;
  char path[] = "/tmp/pl-cuda-double-log-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  char cfg[256];
  snprintf(cfg, sizeof cfg, "capacity:64MiB,log:%s", path);
  start(cfg);
  CUdeviceptr a = 0, base = 0;
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationProp prop = prop_dev(0);
  assert_int_equal(D.memAlloc(&a, 1000), CUDA_SUCCESS);
  assert_int_equal(D.memAddressReserve(&base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, h, 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* failures are logged too */
  assert_int_equal(D.memUnmap(base, GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memFree(a), CUDA_SUCCESS);
  const uint32_t want[] = { PL_CUDA_DOUBLE_MEM_ALLOC, PL_CUDA_DOUBLE_MEM_ADDRESS_RESERVE, PL_CUDA_DOUBLE_MEM_CREATE,
                            PL_CUDA_DOUBLE_MEM_MAP, PL_CUDA_DOUBLE_MEM_SET_ACCESS, PL_CUDA_DOUBLE_MEM_MAP,
                            PL_CUDA_DOUBLE_MEM_UNMAP, PL_CUDA_DOUBLE_MEM_RELEASE, PL_CUDA_DOUBLE_MEM_ADDRESS_FREE,
                            PL_CUDA_DOUBLE_MEM_FREE };
  pl_cuda_double_rec_t r[16];
  size_t n = D.log(0, r, 16);
  assert_int_equal(n, 10);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(r[i].seq, i);
    assert_int_equal(r[i].call, want[i]);
  }
  assert_int_equal(r[0].ptr, a);
  assert_int_equal(r[0].size_bytes, 1000);
  assert_int_equal(r[0].device, 0);
  assert_int_equal(r[1].ptr, base);
  assert_int_equal(r[2].handle, h);
  assert_int_equal(r[3].ptr, base);
  assert_int_equal(r[3].handle, h);
  assert_int_equal(r[4].arg, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  assert_int_equal(r[5].result, CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(r[9].ptr, a);
  assert_int_equal(r[9].size_bytes, 1000);  /* frees carry the allocated size */
  assert_int_equal(D.log(8, r, 16), 2);  /* paging */
  assert_int_equal(r[0].call, PL_CUDA_DOUBLE_MEM_ADDRESS_FREE);
  /* Canonical text, and the file mirror, identical. */
  char expect[4096] = { 0 }, line[256];
  size_t len = 0;
  n = D.log(0, r, 16);
  for (size_t i = 0; i < n; i++) {
    int k = D.format(&r[i], line, sizeof line);
    assert_true(k > 0 && (size_t)k < sizeof line);
    memcpy(expect + len, line, (size_t)k);
    len += (size_t)k;
  }
  snprintf(line, sizeof line, "0 cuMemAlloc_v2 CUDA_SUCCESS dev=0 ptr=0x%llx size=1000 handle=0x0 stream=0x0 arg=0x0\n",
           (unsigned long long)a);
  assert_memory_equal(expect, line, strlen(line));
  assert_non_null(strstr(expect, "5 cuMemMap CUDA_ERROR_INVALID_VALUE dev=0"));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char file[4096] = { 0 };
  size_t fl = fread(file, 1, sizeof file - 1, f);
  fclose(f);
  unlink(path);
  assert_int_equal(fl, len);
  assert_memory_equal(file, expect, len);
  assert_int_equal(counters().n_violations, 1);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(D.live(1), 0);
}

/* Threads: each makes the context current and runs plain and expandable allocations concurrently. */
enum { N_THREADS = 4, N_ITERS = 150 };

static void *thread_body(void *arg) {
  CUcontext ctx = arg;
  if (D.ctxSetCurrent(ctx)) return (void *)1;
  CUmemAllocationProp prop = prop_dev(0);
  CUdeviceptr base = 0;
  if (D.memAddressReserve(&base, 8 * GRAN, 0, 0, 0)) return (void *)2;
  for (int i = 0; i < N_ITERS; i++) {
    CUdeviceptr a = 0;
    CUmemGenericAllocationHandle h = 0;
    size_t pages = 1 + (size_t)i % 4;
    if (D.memAlloc(&a, 4096 * (1 + (size_t)i % 7))) return (void *)3;
    memset(hostp(a), i, 4096);
    if (D.memCreate(&h, pages * GRAN, &prop, 0)) return (void *)4;
    if (D.memMap(base, pages * GRAN, 0, h, 0)) return (void *)5;
    if (set_rw(base, pages * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) return (void *)6;
    memset(hostp(base + (pages - 1) * GRAN), i, 4096);
    if (D.memRelease(h)) return (void *)7;
    if (D.memUnmap(base, pages * GRAN)) return (void *)8;
    if (D.memFree(a)) return (void *)9;
  }
  if (D.memAddressFree(base, 8 * GRAN)) return (void *)10;
  return NULL;
}

static void test_cuda_double_threads(void **state) {
  (void)state;
  start("capacity:256MiB");
  CUcontext ctx = NULL;
  assert_int_equal(D.ctxGetCurrent(&ctx), CUDA_SUCCESS);
  pthread_t t[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, thread_body, ctx), 0);
  for (int i = 0; i < N_THREADS; i++) {
    void *ret = (void *)&ret;
    assert_int_equal(pthread_join(t[i], &ret), 0);
    assert_null(ret);
  }
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_alloc, N_THREADS * N_ITERS);
  assert_int_equal(c.n_map, N_THREADS * N_ITERS);
  assert_int_equal(c.n_logged, N_THREADS * (2 + 7 * N_ITERS));
  assert_true(c.peak_used_bytes >= 4 * GRAN);
  finish();
}

/* ASan shadows and MAP_FIXED: the double must never map over memory it did not reserve, even when given a hint
 * that points at live memory; instrumented code must be able to use what it maps. */
static void test_cuda_double_hint_and_asan(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUmemAllocationProp prop = prop_dev(0);
  CUdeviceptr base = 0, again = 0, clash = 0;
  CUmemGenericAllocationHandle h = 0;
  assert_int_equal(D.memAddressReserve(&base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, h, 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  /* Instrumented accesses to the MAP_FIXED mapping (ASan must see it as addressable). */
  unsigned char *p = hostp(base);
  for (size_t i = 0; i < GRAN; i += 4096) p[i] = (unsigned char)(i >> 12);
  for (size_t i = 0; i < GRAN; i += 4096) assert_int_equal(p[i], (unsigned char)(i >> 12));
  /* A hint at a live range (ours) must not be honoured over it. */
  assert_int_equal(D.memAddressReserve(&clash, 2 * GRAN, 0, base, 0), CUDA_SUCCESS);
  assert_int_not_equal(clash, base);
  assert_int_equal(p[4096], 1);  /* still mapped, data intact */
  /* A hint at a live heap object: neither honoured nor clobbered. */
  unsigned char *heap = aligned_alloc(GRAN, 2 * GRAN);
  assert_non_null(heap);
  memset(heap, 0xab, 2 * GRAN);
  CUdeviceptr hh = 0;
  assert_int_equal(D.memAddressReserve(&hh, 2 * GRAN, 0, (CUdeviceptr)(uintptr_t)heap, 0), CUDA_SUCCESS);
  assert_int_not_equal(hh, (CUdeviceptr)(uintptr_t)heap);
  for (size_t i = 0; i < 2 * GRAN; i += 4096) assert_int_equal(heap[i], 0xab);
  free(heap);
  /* Memory ASan poisoned and gave back (a large freed heap block) may be reused for a reservation: the double's
   * mapping there must be clean to instrumented code. */
  size_t big_bytes = 16 * GRAN;
  unsigned char *big = malloc(big_bytes);
  assert_non_null(big);
  big[0] = 1;
  CUdeviceptr hint = ((CUdeviceptr)(uintptr_t)big + GRAN - 1) / GRAN * GRAN;
  free(big);
  CUdeviceptr reuse = 0;
  CUmemGenericAllocationHandle h2 = 0;
  assert_int_equal(D.memAddressReserve(&reuse, 4 * GRAN, 0, hint, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&h2, 4 * GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(reuse, 4 * GRAN, 0, h2, 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(reuse, 4 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  memset(hostp(reuse), 0x3c, 4 * GRAN);
  assert_int_equal(((unsigned char *)hostp(reuse))[4 * GRAN - 1], 0x3c);
  assert_int_equal(D.memUnmap(reuse, 4 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(h2), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(reuse, 4 * GRAN), CUDA_SUCCESS);
  /* A hint at a free range is honoured (how an allocator extends a range contiguously). */
  CUdeviceptr freed = clash;
  assert_int_equal(D.memAddressFree(clash, 2 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memAddressReserve(&again, 2 * GRAN, 0, freed, 0), CUDA_SUCCESS);
  assert_int_equal(again, freed);
  assert_int_equal(D.memAddressFree(again, 2 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(hh, 2 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memUnmap(base, GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(h), CUDA_SUCCESS);
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  finish();
}

/* cuMemAllocPitch_v2 charges pitch * height; pinned host memory (cuMemHostAlloc, cuMemAllocHost_v2) is usable,
 * not charged to the device, freed only by cuMemFreeHost; mixing the two frees is a violation; a pinned block
 * still live at context destroy is a leak. */
static void test_cuda_double_pitch_and_pinned_host(void **state) {
  (void)state;
  start("");
  CUdeviceptr p = 0;
  size_t pitch = 0;
  assert_int_equal(D.memAllocPitch(&p, &pitch, 1000, 3, 4), CUDA_SUCCESS);
  assert_int_equal(pitch, 1024);
  assert_int_equal(counters().used_bytes, 4096); /* 3072 rounded up to the host page */
  memset(hostp(p), 1, pitch * 3);
  REFUSED(D.memAllocPitch(&p, &pitch, 1000, 3, 3), CUDA_ERROR_INVALID_VALUE);
  void *h = NULL, *h2 = NULL;
  assert_int_equal(D.memHostAlloc(&h, 5000, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  assert_int_equal(D.memAllocHost(&h2, 100), CUDA_SUCCESS);
  memset(h, 2, 5000);
  assert_int_equal(counters().used_bytes, 4096);
  REFUSED(D.memHostAlloc(&h, 10, 0x100), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memFree((CUdeviceptr)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
  REFUSED(D.memFreeHost(hostp(p)), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(D.memFreeHost(h), CUDA_SUCCESS);
  assert_int_equal(D.memFreeHost(h2), CUDA_SUCCESS);
  assert_int_equal(D.memFree(p), CUDA_SUCCESS);
  pl_cuda_double_rec_t r[16];
  size_t n = D.log(0, r, 16);
  char line[256];
  assert_true(n >= 1);
  D.format(&r[0], line, sizeof line);
  assert_non_null(strstr(line, "cuMemAllocPitch_v2 CUDA_SUCCESS"));
  assert_non_null(strstr(line, "size=3072"));
  assert_non_null(strstr(line, "arg=0x400"));
  D.format(&r[n - 2], line, sizeof line);
  assert_non_null(strstr(line, "cuMemFreeHost CUDA_SUCCESS"));
  assert_non_null(strstr(line, "size=100"));
  pl_cuda_double_counters_t c = counters();
  assert_int_equal(c.n_violations, 4);
  assert_int_equal(c.used_bytes, 0);
  /* a pinned block left at context destroy: one leak */
  assert_int_equal(D.memAllocHost(&h, 64), CUDA_SUCCESS);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(counters().n_leaks, 1);
  assert_int_equal(D.live(0), 0);
}

/* cuMemsetD8 / cuMemcpyDtoH: device memory written and read through the driver, in plain allocations and in mapped
 * ranges; host memory, unmapped pages, ranges past an allocation and a missing context are refused. */
static void test_cuda_double_memset_memcpy(void **state) {
  (void)state;
  start("capacity:64MiB");
  CUdeviceptr p = 0;
  unsigned char buf[8192];
  assert_int_equal(D.memAlloc(&p, 5000), CUDA_SUCCESS);
  assert_int_equal(D.memsetD8(p, 0xab, 5000), CUDA_SUCCESS);
  assert_int_equal(D.memsetD8(p + 100, 0x01, 10), CUDA_SUCCESS);
  assert_int_equal(D.memcpyDtoH(buf, p, 5000), CUDA_SUCCESS);
  assert_int_equal(D.ctxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(buf[0], 0xab);
  assert_int_equal(buf[105], 0x01);
  assert_int_equal(buf[4999], 0xab);
  assert_int_equal(((unsigned char *)hostp(p))[110], 0xab); /* host memory underneath */
  assert_int_equal(D.memsetD8(p, 0, 0), CUDA_SUCCESS);
  REFUSED(D.memsetD8(p + 4990, 0, 11), CUDA_ERROR_INVALID_VALUE);        /* past the allocation's requested size */
  REFUSED(D.memcpyDtoH(buf, p + 8192, 1), CUDA_ERROR_INVALID_VALUE);     /* nobody's memory */
  REFUSED(D.memcpyDtoH(NULL, p, 1), CUDA_ERROR_INVALID_VALUE);
  void *h = NULL;
  assert_int_equal(D.memAllocHost(&h, 4096), CUDA_SUCCESS);
  REFUSED(D.memsetD8((CUdeviceptr)(uintptr_t)h, 0, 16), CUDA_ERROR_INVALID_VALUE); /* pinned host memory */
  assert_int_equal(D.memFreeHost(h), CUDA_SUCCESS);
  /* a reservation with its first page mapped and accessible: the page, not beyond it */
  CUmemAllocationProp prop = prop_dev(0);
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle hd = 0;
  assert_int_equal(D.memAddressReserve(&base, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(D.memCreate(&hd, GRAN, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(D.memMap(base, GRAN, 0, hd, 0), CUDA_SUCCESS);
  assert_int_equal(set_rw(base, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
  assert_int_equal(D.memsetD8(base + GRAN - 4096, 0x5c, 4096), CUDA_SUCCESS);
  assert_int_equal(D.memcpyDtoH(buf, base + GRAN - 4096, 4096), CUDA_SUCCESS);
  assert_int_equal(buf[4095], 0x5c);
  REFUSED(D.memsetD8(base + GRAN - 4096, 0, 8192), CUDA_ERROR_INVALID_VALUE); /* into the unmapped second page */
  assert_int_equal(D.memUnmap(base, GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memRelease(hd), CUDA_SUCCESS);
  REFUSED(D.memsetD8(base, 0, 1), CUDA_ERROR_INVALID_VALUE);                /* unmapped again */
  assert_int_equal(D.memAddressFree(base, 4 * GRAN), CUDA_SUCCESS);
  assert_int_equal(D.memFree(p), CUDA_SUCCESS);
  /* without a current context */
  assert_int_equal(D.ctxSetCurrent(NULL), CUDA_SUCCESS);
  REFUSED(D.ctxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(counters().n_violations, 7);
  assert_int_equal(D.primaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(counters().n_leaks, 0);
  assert_int_equal(D.live(1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cuda_double_proc_address),
    cmocka_unit_test(test_cuda_double_init_and_devices),
    cmocka_unit_test(test_cuda_double_config),
    cmocka_unit_test(test_cuda_double_context),
    cmocka_unit_test(test_cuda_double_alloc_free),
    cmocka_unit_test(test_cuda_double_capacity_oom),
    cmocka_unit_test(test_cuda_double_streams_async_managed),
    cmocka_unit_test(test_cuda_double_vmm_expandable),
    cmocka_unit_test(test_cuda_double_vmm_contract),
    cmocka_unit_test(test_cuda_double_access_faults),
    cmocka_unit_test(test_cuda_double_fault_injection),
    cmocka_unit_test(test_cuda_double_fail_code_and_sync_before_unmap),
    cmocka_unit_test(test_cuda_double_leak_at_context_destroy),
    cmocka_unit_test(test_cuda_double_leak_at_exit),
    cmocka_unit_test(test_cuda_double_fork_child),
    cmocka_unit_test(test_cuda_double_log),
    cmocka_unit_test(test_cuda_double_pitch_and_pinned_host),
    cmocka_unit_test(test_cuda_double_memset_memcpy),
    cmocka_unit_test(test_cuda_double_threads),
    cmocka_unit_test(test_cuda_double_hint_and_asan),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
