/* A test double of the CUDA driver (built as libcuda.so.1): the driver calls a caching allocator and the tracer use,
 * implemented over host memory, checking the API contract the way a real driver does. See docs/cuda-double.md.
 *
 * Memory model. Plain allocations (cuMemAlloc_v2, cuMemAllocAsync*, cuMemAllocManaged) are anonymous read-write
 * mappings. Each device owns one memfd sized to its capacity: the "physical memory". cuMemCreate takes pages of the
 * reported granularity from it (a byte map of used pages), cuMemAddressReserve makes a PROT_NONE anonymous range,
 * cuMemMap maps the handle's pages MAP_SHARED|MAP_FIXED over part of such a range (still PROT_NONE, so a write
 * faults like on a GPU), cuMemSetAccess is mprotect, cuMemUnmap puts the PROT_NONE reservation back, and a physical
 * allocation's pages are punched out of the memfd when it is both released and unmapped.
 *
 * Invariants: the double only ever uses MAP_FIXED inside ranges it reserved itself (never at a caller's hint); a
 * reservation's page table names, for each granularity page, the mapping covering it or NULL; used bytes per device
 * never exceed the capacity; every call that fails its contract check counts a violation and, when `verbose`, says
 * why on stderr. One mutex guards all state; the current context is per thread, validated by a generation count.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Everything cuda.h declares that this file defines is a driver entry point: export it. */
#pragma GCC visibility push(default)
#include <cuda.h>
#undef cuGetProcAddress
/* Entry points the real libcuda exports that cuda.h declares only in other modes. */
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
#include "cuda_double.h"
#pragma GCC visibility pop

#define DRIVER_VERSION 13000
#define MAX_DEVICES 8
#define N_BUCKETS 4096
#define HOST_PAGE_BYTES 4096u
#define MSG_BYTES 320

/* ---------------------------------------------------------------------------------------------------------------- */
/* State                                                                                                            */

enum { K_ALLOC = 1, K_PHYS, K_STREAM, K_EVENT };

typedef struct node {
  struct node *next;  /* hash chain */
  uint64_t key;       /* address, handle value, or object pointer */
  int kind;           /* K_* */
} node_t;

typedef struct alloc {
  node_t n;
  uint64_t size_bytes;   /* requested */
  uint64_t map_bytes;    /* mapped and charged: size rounded up to the host page */
  int device;
  uint32_t call;         /* PL_CUDA_DOUBLE_MEM_ALLOC / _ASYNC / _MANAGED / _PITCH / _HOST_ALLOC / _ALLOC_HOST */
  bool host;             /* pinned host memory: not charged to the device, freed only by cuMemFreeHost */
} alloc_t;

typedef struct phys {
  node_t n;              /* key: the CUmemGenericAllocationHandle */
  uint64_t size_bytes;
  int device;
  bool released;         /* cuMemRelease called; freed once n_maps drops to 0 */
  uint64_t n_maps;       /* live mappings of it */
  uint32_t n_pages;
  uint32_t *pages;       /* page indices in the device's memfd */
} phys_t;

struct CUctx_st {
  int device;
  uint64_t refcount;     /* primary context retain count */
  uint64_t gen;          /* bumped when the context is destroyed, so stale current-context pointers are caught */
};

struct CUstream_st { node_t n; struct CUctx_st *ctx; unsigned flags; };
struct CUevent_st { node_t n; struct CUctx_st *ctx; bool recorded; };

typedef struct mapping {
  struct mapping *next;  /* in its reservation's list */
  uint64_t base, size_bytes;
  phys_t *phys;
  uint64_t sync_epoch;   /* g.sync_epoch when mapped: a later stream sync makes its unmap a synchronised one */
} mapping_t;

typedef struct resv {
  struct resv *next;
  uint64_t base, size_bytes;
  size_t n_pages;        /* whole granularity pages in the range */
  mapping_t **page;      /* [n_pages]: the mapping covering each page, or NULL */
  mapping_t *maps;
} resv_t;

typedef struct device {
  int memfd;             /* physical memory, capacity bytes, sparse */
  uint32_t n_pages;
  uint8_t *page_used;    /* [n_pages] */
  uint32_t next_hint;    /* where the page search starts */
  uint64_t used_bytes;
} device_t;

typedef struct config {
  uint64_t capacity_bytes, granularity_bytes, ctx_bytes;
  int n_devices;
  uint64_t fail_alloc_at, fail_map_at, fail_create_at, fail_reserve_at, fail_access_at;  /* 1-based, 0 = never */
  uint64_t fail_code;    /* CUresult that injected failures return (default CUDA_ERROR_OUT_OF_MEMORY) */
  int verbose;
  int leak_exitcode;
  uint64_t log_max;
  char log_path[512];
} config_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
  bool configured;          /* config parsed (from env or reset) */
  bool config_ok;
  bool initialized;         /* cuInit succeeded */
  bool inherited;           /* this is a fork child: the state is the parent's (until a reset) */
  config_t cfg;
  node_t *bucket[N_BUCKETS];
  resv_t *resvs;
  device_t dev[MAX_DEVICES];
  struct CUctx_st ctx[MAX_DEVICES];
  pl_cuda_double_counters_t c;
  pl_cuda_double_rec_t *log;
  size_t log_len, log_cap;
  int log_fd;
  uint64_t next_handle;
  uint64_t n_try_alloc, n_try_map, n_try_create, n_try_reserve, n_try_access;
  uint64_t sync_epoch;      /* successful cuStreamSynchronize calls since the reset */
  char violation[MSG_BYTES];
} g = { .log_fd = -1 };

static _Thread_local struct { struct CUctx_st *ctx; uint64_t gen; } t_cur;
static _Thread_local char t_violation[MSG_BYTES];

static void lock(void) { pthread_mutex_lock(&g_lock); }
static void unlock(void) { pthread_mutex_unlock(&g_lock); }

/* ---------------------------------------------------------------------------------------------------------------- */
/* Small helpers                                                                                                    */

typedef struct { CUresult code; const char *name, *text; } err_t;
static const err_t k_errors[] = {
  { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
  { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
  { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
  { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
  { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
  { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
  { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
  { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
  { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
  { CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed" },
  { CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed" },
  { CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped" },
  { CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped" },
  { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
  { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
  { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
  { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
  { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
  { CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
  { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed" },
  { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
  { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
  { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static const err_t *find_error(CUresult code) {
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
    if (k_errors[i].code == code) return &k_errors[i];
  return NULL;
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Records a contract violation: counted, kept for pl_cuda_double_last_violation, printed when verbose. */
__attribute__((format(printf, 2, 3)))
static CUresult violate(CUresult code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g.violation, sizeof g.violation, fmt, ap);
  va_end(ap);
  g.c.n_violations++;
  if (g.cfg.verbose) fprintf(stderr, "plateau cuda double: %s -> %s\n", g.violation, find_error(code)->name);
  return code;
}

static uint64_t hash_key(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k % N_BUCKETS;
}

static void node_put(node_t *n) {
  uint64_t b = hash_key(n->key ^ (uint64_t)n->kind);
  n->next = g.bucket[b];
  g.bucket[b] = n;
}

static node_t *node_get(int kind, uint64_t key) {
  for (node_t *n = g.bucket[hash_key(key ^ (uint64_t)kind)]; n; n = n->next)
    if (n->kind == kind && n->key == key) return n;
  return NULL;
}

static void node_del(node_t *n) {
  node_t **p = &g.bucket[hash_key(n->key ^ (uint64_t)n->kind)];
  while (*p != n) p = &(*p)->next;
  *p = n->next;
}

static void charge(int device, uint64_t bytes) {
  g.dev[device].used_bytes += bytes;
  g.c.used_bytes += bytes;
  if (g.c.used_bytes > g.c.peak_used_bytes) g.c.peak_used_bytes = g.c.used_bytes;
}

static void uncharge(int device, uint64_t bytes) {
  g.dev[device].used_bytes -= bytes;
  g.c.used_bytes -= bytes;
}

static bool fits(int device, uint64_t bytes) {
  return bytes <= g.cfg.capacity_bytes && g.dev[device].used_bytes <= g.cfg.capacity_bytes - bytes;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* The call log                                                                                                     */

static const char *call_name(uint32_t call, uint32_t ptsz) {
  switch (call) {
  case PL_CUDA_DOUBLE_MEM_ALLOC: return "cuMemAlloc_v2";
  case PL_CUDA_DOUBLE_MEM_FREE: return "cuMemFree_v2";
  case PL_CUDA_DOUBLE_MEM_ALLOC_ASYNC: return ptsz ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync";
  case PL_CUDA_DOUBLE_MEM_FREE_ASYNC: return ptsz ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync";
  case PL_CUDA_DOUBLE_MEM_ALLOC_MANAGED: return "cuMemAllocManaged";
  case PL_CUDA_DOUBLE_MEM_ADDRESS_RESERVE: return "cuMemAddressReserve";
  case PL_CUDA_DOUBLE_MEM_ADDRESS_FREE: return "cuMemAddressFree";
  case PL_CUDA_DOUBLE_MEM_CREATE: return "cuMemCreate";
  case PL_CUDA_DOUBLE_MEM_RELEASE: return "cuMemRelease";
  case PL_CUDA_DOUBLE_MEM_MAP: return "cuMemMap";
  case PL_CUDA_DOUBLE_MEM_UNMAP: return "cuMemUnmap";
  case PL_CUDA_DOUBLE_MEM_SET_ACCESS: return "cuMemSetAccess";
  case PL_CUDA_DOUBLE_MEM_ALLOC_PITCH: return "cuMemAllocPitch_v2";
  case PL_CUDA_DOUBLE_MEM_HOST_ALLOC: return "cuMemHostAlloc";
  case PL_CUDA_DOUBLE_MEM_ALLOC_HOST: return "cuMemAllocHost_v2";
  case PL_CUDA_DOUBLE_MEM_FREE_HOST: return "cuMemFreeHost";
  default: return "unknown";
  }
}

int pl_cuda_double_format(const pl_cuda_double_rec_t *r, char *buf, size_t buf_bytes) {
  const err_t *e = find_error((CUresult)r->result);
  char code[32];
  if (!e) snprintf(code, sizeof code, "CUresult(%d)", (int)r->result);
  return snprintf(buf, buf_bytes,
                  "%" PRIu64 " %s %s dev=%d ptr=0x%" PRIx64 " size=%" PRIu64 " handle=0x%" PRIx64
                  " stream=0x%" PRIx64 " arg=0x%" PRIx64 "\n",
                  r->seq, call_name(r->call, r->ptsz), e ? e->name : code, (int)r->device, r->ptr, r->size_bytes,
                  r->handle, r->stream, r->arg);
}

/* Appends a record (seq is assigned here) and mirrors it to the log file. Caller holds the lock. */
static void log_rec(pl_cuda_double_rec_t r) {
  r.seq = g.c.n_logged++;
  if (g.log_len == g.log_cap && g.log_cap < g.cfg.log_max) {
    size_t cap = g.log_cap ? g.log_cap * 2 : 1024;
    if (cap > g.cfg.log_max) cap = (size_t)g.cfg.log_max;
    pl_cuda_double_rec_t *p = realloc(g.log, cap * sizeof *p);
    if (p) { g.log = p; g.log_cap = cap; }
  }
  if (g.log_len < g.log_cap) g.log[g.log_len++] = r;
  else g.c.n_log_dropped++;
  if (g.log_fd >= 0) {
    char line[256];
    int n = pl_cuda_double_format(&r, line, sizeof line);
    if (n > 0 && (size_t)n < sizeof line && write(g.log_fd, line, (size_t)n) != n) {
      close(g.log_fd);  /* a short write means the file is unusable: stop mirroring, keep the in-memory log */
      g.log_fd = -1;
    }
  }
}

static pl_cuda_double_rec_t rec(uint32_t call) {
  return (pl_cuda_double_rec_t){ .call = call, .device = -1 };
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Configuration                                                                                                    */

static const char k_keys[] = "capacity, granularity, devices, ctx_bytes, fail_alloc_at, fail_map_at, fail_create_at, "
                             "fail_reserve_at, fail_access_at, fail_code, verbose, log, log_max, leak_exitcode";

static void config_defaults(config_t *c) {
  memset(c, 0, sizeof *c);
  c->capacity_bytes = 1ULL << 30;
  c->granularity_bytes = 2ULL << 20;
  c->n_devices = 1;
  c->verbose = 1;
  c->log_max = 1ULL << 22;
  c->fail_code = CUDA_ERROR_OUT_OF_MEMORY;
}

/* Parses "123", "64KiB", "2MiB", "1GiB", "1G", "1T" (binary units). */
static bool parse_size(const char *s, size_t len, uint64_t *out) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno || end == buf || buf[0] == '-') return false;
  uint64_t mul = 1;
  if (*end) {
    switch (*end) {
    case 'k': case 'K': mul = 1ULL << 10; break;
    case 'm': case 'M': mul = 1ULL << 20; break;
    case 'g': case 'G': mul = 1ULL << 30; break;
    case 't': case 'T': mul = 1ULL << 40; break;
    case 'b': case 'B': mul = 1; end--; break;
    default: return false;
    }
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return false;
  }
  if (mul > 1 && v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

/* Parses `s` into *c; on error writes why into err and returns false. */
static bool config_parse(const char *s, config_t *c, char *err, size_t err_bytes) {
  config_defaults(c);
  while (s && *s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const char *colon = memchr(s, ':', len);
    if (len == 0) { s = end ? end + 1 : s + len; continue; }
    if (!colon) { snprintf(err, err_bytes, "'%.*s' is not key:value", (int)len, s); return false; }
    size_t klen = (size_t)(colon - s);
    const char *v = colon + 1;
    size_t vlen = len - klen - 1;
    uint64_t n = 0;
#define KEY(name) (klen == sizeof(name) - 1 && memcmp(s, name, klen) == 0)
    if (KEY("log")) {
      if (vlen == 0 || vlen >= sizeof c->log_path) { snprintf(err, err_bytes, "bad log path"); return false; }
      memcpy(c->log_path, v, vlen);
      c->log_path[vlen] = 0;
    } else if (!parse_size(v, vlen, &n)) {
      snprintf(err, err_bytes, "bad value '%.*s' for %.*s", (int)vlen, v, (int)klen, s);
      return false;
    } else if (KEY("capacity")) c->capacity_bytes = n;
    else if (KEY("granularity")) c->granularity_bytes = n;
    else if (KEY("ctx_bytes")) c->ctx_bytes = n;
    else if (KEY("devices")) c->n_devices = n <= MAX_DEVICES ? (int)n : -1;
    else if (KEY("fail_alloc_at")) c->fail_alloc_at = n;
    else if (KEY("fail_map_at")) c->fail_map_at = n;
    else if (KEY("fail_create_at")) c->fail_create_at = n;
    else if (KEY("fail_reserve_at")) c->fail_reserve_at = n;
    else if (KEY("fail_access_at")) c->fail_access_at = n;
    else if (KEY("fail_code")) {
      if (n == 0 || n > 999) { snprintf(err, err_bytes, "fail_code must be a CUresult, 1..999"); return false; }
      c->fail_code = n;
    }
    else if (KEY("verbose")) c->verbose = n != 0;
    else if (KEY("log_max")) c->log_max = n;
    else if (KEY("leak_exitcode")) c->leak_exitcode = n <= 255 ? (int)n : 255;
    else { snprintf(err, err_bytes, "unknown key '%.*s' (valid keys: %s)", (int)klen, s, k_keys); return false; }
#undef KEY
    s = end ? end + 1 : s + len;
  }
  if (c->n_devices < 1) { snprintf(err, err_bytes, "devices must be 1..%d", MAX_DEVICES); return false; }
  if (!is_pow2(c->granularity_bytes) || c->granularity_bytes < HOST_PAGE_BYTES || c->granularity_bytes > (1ULL << 30)) {
    snprintf(err, err_bytes, "granularity must be a power of two from 4KiB to 1GiB");
    return false;
  }
  if (c->capacity_bytes < c->granularity_bytes || c->capacity_bytes % c->granularity_bytes ||
      c->capacity_bytes / c->granularity_bytes > (1ULL << 24)) {
    snprintf(err, err_bytes, "capacity must be a multiple of the granularity, at most 2^24 granularity pages");
    return false;
  }
  if (c->ctx_bytes > c->capacity_bytes) { snprintf(err, err_bytes, "ctx_bytes exceeds capacity"); return false; }
  return true;
}

/* Caller holds the lock. */
static void configure(const char *s) {
  char err[256];
  config_t c;
  g.config_ok = config_parse(s, &c, err, sizeof err);
  if (!g.config_ok) {
    fprintf(stderr, "plateau cuda double: PL_CUDA_DOUBLE: %s; cuInit will fail\n", err);
    config_defaults(&c);
  }
  g.cfg = c;
  g.c.capacity_bytes = c.capacity_bytes;
  g.c.granularity_bytes = c.granularity_bytes;
  if (c.log_path[0]) {
    g.log_fd = open(c.log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (g.log_fd < 0) fprintf(stderr, "plateau cuda double: cannot open log %s: %s\n", c.log_path, strerror(errno));
  }
  g.configured = true;
}

static void ensure_configured(void) {
  if (!g.configured) configure(getenv("PL_CUDA_DOUBLE"));
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Physical memory and mappings                                                                                     */

static bool devices_open(void) {
  for (int d = 0; d < g.cfg.n_devices; d++) {
    device_t *dv = &g.dev[d];
    if (dv->page_used) continue;
    dv->n_pages = (uint32_t)(g.cfg.capacity_bytes / g.cfg.granularity_bytes);
    dv->page_used = calloc(dv->n_pages, 1);
    dv->memfd = memfd_create("plateau-cuda-double", MFD_CLOEXEC);
    if (!dv->page_used || dv->memfd < 0 || ftruncate(dv->memfd, (off_t)g.cfg.capacity_bytes) != 0) {
      fprintf(stderr, "plateau cuda double: cannot set up device %d memory: %s\n", d, strerror(errno));
      if (dv->memfd >= 0) close(dv->memfd);
      free(dv->page_used);
      dv->page_used = NULL;
      dv->memfd = -1;
      return false;
    }
  }
  return true;
}

/* Takes n free pages (the caller checked the capacity, so they exist), preferring one contiguous run. */
static void pages_take(device_t *dv, uint32_t n, uint32_t *out) {
  uint32_t run = 0;
  for (uint32_t k = 0; k < dv->n_pages; k++) {
    uint32_t i = (dv->next_hint + k) % dv->n_pages;
    if (i == 0) run = 0;  /* runs do not wrap around */
    run = dv->page_used[i] ? 0 : run + 1;
    if (run == n) {
      for (uint32_t j = 0; j < n; j++) { out[j] = i + 1 - n + j; dv->page_used[out[j]] = 1; }
      dv->next_hint = (i + 1) % dv->n_pages;
      return;
    }
  }
  uint32_t got = 0;  /* fragmented: scattered pages */
  for (uint32_t i = 0; i < dv->n_pages && got < n; i++)
    if (!dv->page_used[i]) { dv->page_used[i] = 1; out[got++] = i; }
}

static void phys_free(phys_t *p) {
  device_t *dv = &g.dev[p->device];
  for (uint32_t i = 0; i < p->n_pages; i++) {
    off_t off = (off_t)p->pages[i] * (off_t)g.cfg.granularity_bytes;
    fallocate(dv->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)g.cfg.granularity_bytes);
    dv->page_used[p->pages[i]] = 0;
  }
  uncharge(p->device, p->size_bytes);
  g.c.n_live_physical--;
  node_del(&p->n);
  free(p->pages);
  free(p);
}

/* Puts the PROT_NONE reservation back over [base, base+size). */
static int map_reserved(uint64_t base, uint64_t size) {
  void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? -errno : 0;
}

static resv_t *resv_find(uint64_t ptr, uint64_t size) {
  for (resv_t *r = g.resvs; r; r = r->next)
    if (ptr >= r->base && ptr - r->base < r->size_bytes && size <= r->size_bytes - (ptr - r->base)) return r;
  return NULL;
}

/* Removes one mapping: restores the reservation there, drops the physical reference. */
static void mapping_remove(resv_t *r, mapping_t *m) {
  uint64_t gran = g.cfg.granularity_bytes;
  map_reserved(m->base, m->size_bytes);
  for (uint64_t a = m->base; a < m->base + m->size_bytes; a += gran) r->page[(a - r->base) / gran] = NULL;
  mapping_t **pp = &r->maps;
  while (*pp != m) pp = &(*pp)->next;
  *pp = m->next;
  phys_t *p = m->phys;
  free(m);
  g.c.n_live_mappings--;
  if (--p->n_maps == 0 && p->released) phys_free(p);
}

static void alloc_free(alloc_t *a) {
  munmap((void *)(uintptr_t)a->n.key, a->map_bytes);
  if (!a->host) uncharge(a->device, a->map_bytes);
  g.c.n_live_allocs--;
  node_del(&a->n);
  free(a);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Leak reports                                                                                                     */

static bool dev_match(int scope, int device) { return scope < 0 || scope == device; }

/* Reports (and with reclaim, frees) what is live on device `scope` (-1: everything, including reservations, which
 * belong to no device). Returns the number of objects; adds their bytes to *bytes. Caller holds the lock. */
static size_t leaks(int scope, const char *when, bool print, bool reclaim, uint64_t *bytes) {
  size_t n = 0;
#define LEAK(...) do { n++; if (print) fprintf(stderr, "plateau cuda double: leak at %s: " __VA_ARGS__); } while (0)
  for (resv_t *r = g.resvs; r; r = r->next) {
    for (mapping_t *m = r->maps, *next; m; m = next) {
      next = m->next;
      if (!dev_match(scope, m->phys->device)) continue;
      LEAK("cuMemMap ptr=0x%" PRIx64 " size=%" PRIu64 " handle=0x%" PRIx64 " (device %d) still mapped\n", when,
           m->base, m->size_bytes, m->phys->n.key, m->phys->device);
      if (m->phys->released) *bytes += m->size_bytes;  /* an unreleased handle's bytes are counted below */
      if (reclaim) mapping_remove(r, m);
    }
  }
  for (size_t b = 0; b < N_BUCKETS; b++) {
    for (node_t *nd = g.bucket[b], *next; nd; nd = next) {
      next = nd->next;
      if (nd->kind == K_ALLOC) {
        alloc_t *a = (alloc_t *)nd;
        if (!dev_match(scope, a->device)) continue;
        LEAK("%s ptr=0x%" PRIx64 " size=%" PRIu64 " (device %d) never freed\n", when, call_name(a->call, 0),
             a->n.key, a->size_bytes, a->device);
        *bytes += a->map_bytes;
        if (reclaim) alloc_free(a);
      } else if (nd->kind == K_PHYS) {
        phys_t *p = (phys_t *)nd;
        if (!dev_match(scope, p->device)) continue;
        if (p->released) continue;  /* released but still mapped: its mappings were reported above */
        LEAK("cuMemCreate handle=0x%" PRIx64 " size=%" PRIu64 " (device %d) never released\n", when, p->n.key,
             p->size_bytes, p->device);
        *bytes += p->size_bytes;
        if (reclaim) {
          p->released = true;
          g.c.n_live_handles--;
          if (p->n_maps == 0) phys_free(p);
        }
      } else if (nd->kind == K_STREAM || nd->kind == K_EVENT) {
        struct CUctx_st *ctx = nd->kind == K_STREAM ? ((struct CUstream_st *)nd)->ctx : ((struct CUevent_st *)nd)->ctx;
        if (!dev_match(scope, ctx->device)) continue;
        LEAK("%s %p (device %d) never destroyed\n", when, nd->kind == K_STREAM ? "cuStreamCreate" : "cuEventCreate",
             (void *)nd, ctx->device);
        if (reclaim) {
          node_del(nd);
          if (nd->kind == K_STREAM) g.c.n_live_streams--;
          else g.c.n_live_events--;
          free(nd);
        }
      }
    }
  }
  if (scope < 0) {
    for (resv_t *r = g.resvs; r; r = r->next)
      LEAK("cuMemAddressReserve ptr=0x%" PRIx64 " size=%" PRIu64 " never freed\n", when, r->base, r->size_bytes);
  }
#undef LEAK
  return n;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Initialisation, version, devices                                                                                 */

CUresult CUDAAPI cuInit(unsigned int Flags) {
  CUresult rc = CUDA_SUCCESS;
  lock();
  ensure_configured();
  if (Flags != 0) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuInit: flags=%u must be 0", Flags);
  else if (g.inherited) rc = CUDA_ERROR_NOT_INITIALIZED;  /* CUDA does not survive fork */
  else if (!g.config_ok) rc = CUDA_ERROR_INVALID_VALUE;
  else if (!devices_open()) rc = CUDA_ERROR_OPERATING_SYSTEM;
  else g.initialized = true;
  unlock();
  return rc;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = DRIVER_VERSION;
  return CUDA_SUCCESS;
}

/* Common prologue: returns CUDA_SUCCESS with the lock held, or an error with it released. */
static CUresult enter(void) {
  lock();
  if (!g.initialized) { unlock(); return CUDA_ERROR_NOT_INITIALIZED; }
  return CUDA_SUCCESS;
}

static bool device_ok(CUdevice d) { return d >= 0 && d < g.cfg.n_devices; }

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!count) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount: count is NULL");
  else *count = g.cfg.n_devices;
  unlock();
  return rc;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!device) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: device is NULL");
  else if (!device_ok(ordinal)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet: ordinal %d", ordinal);
  else *device = ordinal;
  unlock();
  return rc;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!name || len <= 0) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName: name=%p len=%d", (void *)name, len);
  else if (!device_ok(dev)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGetName: device %d", dev);
  else snprintf(name, (size_t)len, "plateau CUDA driver double %d", dev);
  unlock();
  return rc;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!pi) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: pi is NULL");
  else if (!device_ok(dev)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGetAttribute: device %d", dev);
  else if ((int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: attribute %d", (int)attrib);
  else {
    int v = 0;  /* attributes the double does not model read as 0 */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 4; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = dev + 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    default: break;
    }
    *pi = v;
  }
  unlock();
  return rc;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!bytes) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem_v2: bytes is NULL");
  else if (!device_ok(dev)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDeviceTotalMem_v2: device %d", dev);
  else *bytes = (size_t)g.cfg.capacity_bytes;
  unlock();
  return rc;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Contexts                                                                                                         */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult rc = enter();
  if (rc) return rc;
  struct CUctx_st *c = &g.ctx[dev < 0 || dev >= MAX_DEVICES ? 0 : dev];
  if (!pctx) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain: pctx is NULL");
  else if (!device_ok(dev)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDevicePrimaryCtxRetain: device %d", dev);
  else if (c->refcount == 0 && !fits(dev, g.cfg.ctx_bytes)) { g.c.n_ooms++; rc = CUDA_ERROR_OUT_OF_MEMORY; }
  else {
    if (c->refcount++ == 0) {
      c->device = dev;
      charge(dev, g.cfg.ctx_bytes);
      g.c.n_ctx_active++;
    }
    *pctx = c;
  }
  unlock();
  return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!device_ok(dev)) rc = violate(CUDA_ERROR_INVALID_DEVICE, "cuDevicePrimaryCtxRelease_v2: device %d", dev);
  else if (g.ctx[dev].refcount == 0)
    rc = violate(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease_v2: device %d primary context not retained",
                 dev);
  else if (--g.ctx[dev].refcount == 0) {
    /* Context destroy: the driver frees everything the context owns; the double reports each object as a leak. */
    uint64_t bytes = 0;
    size_t n = leaks(dev, "context destroy", true, true, &bytes);
    if (n)
      fprintf(stderr, "plateau cuda double: %zu object(s), %" PRIu64 " bytes leaked at context destroy (device %d)\n",
              n, bytes, dev);
    g.c.n_leaks += n;
    g.c.leaked_bytes += bytes;
    uncharge(dev, g.cfg.ctx_bytes);
    g.c.n_ctx_active--;
    g.ctx[dev].gen++;
  }
  unlock();
  return rc;
}

/* The calling thread's current context if it is still alive, else NULL. Caller holds the lock. */
static struct CUctx_st *current(void) {
  struct CUctx_st *c = t_cur.ctx;
  return c && c->refcount > 0 && c->gen == t_cur.gen ? c : NULL;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!pctx) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuCtxGetCurrent: pctx is NULL");
  else *pctx = current();
  unlock();
  return rc;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!ctx) t_cur.ctx = NULL;
  else if ((uintptr_t)ctx < (uintptr_t)&g.ctx[0] || (uintptr_t)ctx >= (uintptr_t)&g.ctx[MAX_DEVICES] ||
           ctx->refcount == 0)
    rc = violate(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: %p is not a live context", (void *)ctx);
  else { t_cur.ctx = ctx; t_cur.gen = ctx->gen; }
  unlock();
  return rc;
}

/* Device of the current context, or -1 after recording why. Caller holds the lock. */
static int need_context(const char *fn) {
  struct CUctx_st *c = current();
  if (c) return c->device;
  if (t_cur.ctx) violate(CUDA_ERROR_CONTEXT_IS_DESTROYED, "%s: the current context was destroyed", fn);
  else violate(CUDA_ERROR_INVALID_CONTEXT, "%s: no current context", fn);
  return -1;
}

static CUresult no_context_code(void) {
  return t_cur.ctx ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  CUresult rc = enter();
  if (rc) return rc;
  int d = need_context("cuMemGetInfo_v2");
  if (d < 0) rc = no_context_code();
  else if (!free_bytes || !total_bytes) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo_v2: NULL argument");
  else {
    *free_bytes = (size_t)(g.cfg.capacity_bytes - g.dev[d].used_bytes);
    *total_bytes = (size_t)g.cfg.capacity_bytes;
  }
  unlock();
  return rc;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Streams and events (work is synchronous here, so they only need to be valid handles)                             */

/* Checks a stream argument; returns the device it implies, or -1 (violation recorded). Caller holds the lock. */
static int stream_device(CUstream s, const char *fn) {
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return need_context(fn);
  node_t *n = node_get(K_STREAM, (uint64_t)(uintptr_t)s);
  if (!n) { violate(CUDA_ERROR_INVALID_HANDLE, "%s: stream %p is not a live stream", fn, (void *)s); return -1; }
  return ((struct CUstream_st *)n)->ctx->device;
}

static CUresult stream_code(CUstream s) {
  bool dflt = s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
  return dflt ? no_context_code() : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  CUresult rc = enter();
  if (rc) return rc;
  int d = need_context("cuStreamCreate");
  struct CUstream_st *s = NULL;
  if (d < 0) rc = no_context_code();
  else if (!phStream) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: phStream is NULL");
  else if (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
    rc = violate(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: flags %u", Flags);
  else if (!(s = calloc(1, sizeof *s))) rc = CUDA_ERROR_OUT_OF_MEMORY;
  else {
    s->n.kind = K_STREAM;
    s->n.key = (uint64_t)(uintptr_t)s;
    s->ctx = &g.ctx[d];
    s->flags = Flags;
    node_put(&s->n);
    g.c.n_live_streams++;
    *phStream = s;
  }
  unlock();
  return rc;
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  CUresult rc = enter();
  if (rc) return rc;
  node_t *n = hStream ? node_get(K_STREAM, (uint64_t)(uintptr_t)hStream) : NULL;
  if (!n) rc = violate(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy_v2: %p is not a live stream", (void *)hStream);
  else { node_del(n); free(n); g.c.n_live_streams--; }
  unlock();
  return rc;
}

static CUresult stream_sync(CUstream hStream, const char *fn) {
  CUresult rc = enter();
  if (rc) return rc;
  if (stream_device(hStream, fn) < 0) rc = stream_code(hStream);
  if (rc == CUDA_SUCCESS) {
    g.sync_epoch++;
    g.c.n_stream_sync++;
  }
  unlock();
  return rc;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream, "cuStreamSynchronize"); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, "cuStreamSynchronize_ptsz"); }

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  CUresult rc = enter();
  if (rc) return rc;
  int d = need_context("cuEventCreate");
  struct CUevent_st *e = NULL;
  if (d < 0) rc = no_context_code();
  else if (!phEvent) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: phEvent is NULL");
  else if (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    rc = violate(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: flags %u", Flags);
  else if (!(e = calloc(1, sizeof *e))) rc = CUDA_ERROR_OUT_OF_MEMORY;
  else {
    e->n.kind = K_EVENT;
    e->n.key = (uint64_t)(uintptr_t)e;
    e->ctx = &g.ctx[d];
    node_put(&e->n);
    g.c.n_live_events++;
    *phEvent = e;
  }
  unlock();
  return rc;
}

static CUresult event_record(CUevent hEvent, CUstream hStream, const char *fn) {
  CUresult rc = enter();
  if (rc) return rc;
  node_t *n = hEvent ? node_get(K_EVENT, (uint64_t)(uintptr_t)hEvent) : NULL;
  if (!n) rc = violate(CUDA_ERROR_INVALID_HANDLE, "%s: %p is not a live event", fn, (void *)hEvent);
  else if (stream_device(hStream, fn) < 0) rc = stream_code(hStream);
  else ((struct CUevent_st *)n)->recorded = true;
  unlock();
  return rc;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, "cuEventRecord");
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, "cuEventRecord_ptsz");
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!hEvent || !node_get(K_EVENT, (uint64_t)(uintptr_t)hEvent))
    rc = violate(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery: %p is not a live event", (void *)hEvent);
  unlock();
  return rc;  /* all work is synchronous: a recorded (or never recorded) event is complete */
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  CUresult rc = enter();
  if (rc) return rc;
  node_t *n = hEvent ? node_get(K_EVENT, (uint64_t)(uintptr_t)hEvent) : NULL;
  if (!n) rc = violate(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy_v2: %p is not a live event", (void *)hEvent);
  else { node_del(n); free(n); g.c.n_live_events--; }
  unlock();
  return rc;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Plain allocations                                                                                                */

static bool inject(uint64_t *n_try, uint64_t at) {
  if (++*n_try != at) return false;
  g.c.n_injected++;
  return true;
}

static bool is_host_call(uint32_t call) {
  return call == PL_CUDA_DOUBLE_MEM_HOST_ALLOC || call == PL_CUDA_DOUBLE_MEM_ALLOC_HOST;
}

/* Allocates for the logged call r (device set by the caller). Caller holds the lock. Pinned host memory
 * (cuMemHostAlloc, cuMemAllocHost_v2) belongs to the context like device memory but is not charged. */
static CUresult alloc_plain(CUdeviceptr *dptr, size_t bytesize, pl_cuda_double_rec_t *r) {
  const char *fn = call_name(r->call, r->ptsz);
  bool host = is_host_call(r->call);
  if (!dptr) return violate(CUDA_ERROR_INVALID_VALUE, "%s: dptr is NULL", fn);
  if (bytesize == 0) return violate(CUDA_ERROR_INVALID_VALUE, "%s: size 0", fn);
  if (inject(&g.n_try_alloc, g.cfg.fail_alloc_at)) return (CUresult)g.cfg.fail_code;
  uint64_t map_bytes = round_up(bytesize, HOST_PAGE_BYTES);
  if (map_bytes < bytesize || (!host && !fits(r->device, map_bytes))) {
    g.c.n_ooms++;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  alloc_t *a = calloc(1, sizeof *a);
  void *p = a ? mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
              : MAP_FAILED;
  if (p == MAP_FAILED) { free(a); g.c.n_ooms++; return CUDA_ERROR_OUT_OF_MEMORY; }
  a->n.kind = K_ALLOC;
  a->n.key = (uint64_t)(uintptr_t)p;
  a->size_bytes = bytesize;
  a->map_bytes = map_bytes;
  a->device = r->device;
  a->call = r->call;
  a->host = host;
  node_put(&a->n);
  if (!host) charge(r->device, map_bytes);
  g.c.n_alloc++;
  g.c.n_live_allocs++;
  *dptr = a->n.key;
  r->ptr = a->n.key;
  return CUDA_SUCCESS;
}

static CUresult free_plain(CUdeviceptr dptr, pl_cuda_double_rec_t *r) {
  const char *fn = call_name(r->call, r->ptsz);
  node_t *n = node_get(K_ALLOC, dptr);
  if (!n) {
    if (dptr == 0) return violate(CUDA_ERROR_INVALID_VALUE, "%s: ptr 0", fn);
    if (resv_find(dptr, 1)) return violate(CUDA_ERROR_INVALID_VALUE, "%s: 0x%" PRIx64 " is in a reserved range "
                                           "(use cuMemUnmap/cuMemAddressFree)", fn, (uint64_t)dptr);
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: 0x%" PRIx64 " is not the start of a live allocation", fn,
                   (uint64_t)dptr);
  }
  alloc_t *a = (alloc_t *)n;
  bool want_host = r->call == PL_CUDA_DOUBLE_MEM_FREE_HOST;
  if (a->host != want_host)
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: 0x%" PRIx64 " is %s memory (use %s)", fn, (uint64_t)dptr,
                   a->host ? "pinned host" : "device", a->host ? "cuMemFreeHost" : "cuMemFree_v2");
  r->device = a->device;
  r->size_bytes = a->size_bytes;
  alloc_free(a);
  g.c.n_free++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ALLOC);
  r.size_bytes = bytesize;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) {
    r.device = need_context("cuMemAlloc_v2");
    rc = r.device < 0 ? no_context_code() : alloc_plain(dptr, bytesize, &r);
  }
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ALLOC_MANAGED);
  r.size_bytes = bytesize;
  r.arg = flags;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) {
    r.device = need_context("cuMemAllocManaged");
    if (r.device < 0) rc = no_context_code();
    else if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
      rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged: flags %u must be CU_MEM_ATTACH_GLOBAL or _HOST",
                   flags);
    else rc = alloc_plain(dptr, bytesize, &r);
  }
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_FREE);
  r.ptr = dptr;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) rc = need_context("cuMemFree_v2") < 0 ? no_context_code() : free_plain(dptr, &r);
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

/* Pitched 2D allocation: rows padded to PITCH_ALIGN_BYTES (a real driver picks its own alignment). */
#define PITCH_ALIGN_BYTES 512u
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ALLOC_PITCH);
  size_t pitch = round_up(WidthInBytes, PITCH_ALIGN_BYTES);
  r.size_bytes = pitch * Height;
  r.arg = pitch;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) {
    r.device = need_context("cuMemAllocPitch_v2");
    if (r.device < 0) rc = no_context_code();
    else if (!pPitch || (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
      rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemAllocPitch_v2: pPitch NULL or ElementSizeBytes %u not 4, 8, 16",
                   ElementSizeBytes);
    else if (Height && pitch > SIZE_MAX / Height) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else rc = alloc_plain(dptr, pitch * Height, &r);
    if (rc == CUDA_SUCCESS) *pPitch = pitch;
  }
  if (rc != CUDA_SUCCESS) r.arg = 0;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult host_alloc(uint32_t call, void **pp, size_t bytesize, unsigned int flags) {
  pl_cuda_double_rec_t r = rec(call);
  r.size_bytes = bytesize;
  r.arg = flags;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) {
    r.device = need_context(call_name(call, 0));
    CUdeviceptr p = 0;
    if (r.device < 0) rc = no_context_code();
    else if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
      rc = violate(CUDA_ERROR_INVALID_VALUE, "%s: unknown flags 0x%x", call_name(call, 0), flags);
    else if (!pp) rc = violate(CUDA_ERROR_INVALID_VALUE, "%s: pp is NULL", call_name(call, 0));
    else rc = alloc_plain(&p, bytesize, &r);
    if (rc == CUDA_SUCCESS) *pp = (void *)(uintptr_t)p;
  }
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  return host_alloc(PL_CUDA_DOUBLE_MEM_HOST_ALLOC, pp, bytesize, Flags);
}
CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize) {
  return host_alloc(PL_CUDA_DOUBLE_MEM_ALLOC_HOST, pp, bytesize, 0);
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_FREE_HOST);
  r.ptr = (uint64_t)(uintptr_t)p;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) rc = need_context("cuMemFreeHost") < 0 ? no_context_code() : free_plain(r.ptr, &r);
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, uint32_t ptsz) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ALLOC_ASYNC);
  r.ptsz = ptsz;
  r.size_bytes = bytesize;
  r.stream = (uint64_t)(uintptr_t)hStream;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) {
    r.device = stream_device(hStream, call_name(r.call, ptsz));
    rc = r.device < 0 ? stream_code(hStream) : alloc_plain(dptr, bytesize, &r);
  }
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream hStream, uint32_t ptsz) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_FREE_ASYNC);
  r.ptsz = ptsz;
  r.ptr = dptr;
  r.stream = (uint64_t)(uintptr_t)hStream;
  lock();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (g.initialized) rc = stream_device(hStream, call_name(r.call, ptsz)) < 0 ? stream_code(hStream)
                                                                               : free_plain(dptr, &r);
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream, 0);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream, 1);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream, 0); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream, 1); }

/* ---------------------------------------------------------------------------------------------------------------- */
/* Virtual memory management                                                                                        */

/* Checks a CUmemAllocationProp; returns CUDA_SUCCESS or the error (violation recorded). */
static CUresult prop_check(const CUmemAllocationProp *prop, const char *fn) {
  if (!prop) return violate(CUDA_ERROR_INVALID_VALUE, "%s: prop is NULL", fn);
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: prop.type %d must be CU_MEM_ALLOCATION_TYPE_PINNED", fn,
                   (int)prop->type);
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: prop.location.type %d: the double models device memory only", fn,
                   (int)prop->location.type);
  if (!device_ok(prop->location.id))
    return violate(CUDA_ERROR_INVALID_DEVICE, "%s: prop.location.id %d", fn, prop->location.id);
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: prop.requestedHandleTypes %d", fn, (int)prop->requestedHandleTypes);
  if (prop->win32HandleMetaData)
    return violate(CUDA_ERROR_INVALID_VALUE, "%s: prop.win32HandleMetaData must be NULL", fn);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option) {
  CUresult rc = enter();
  if (rc) return rc;
  if (!granularity) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemGetAllocationGranularity: granularity is NULL");
  else if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemGetAllocationGranularity: option %d", (int)option);
  else if ((rc = prop_check(prop, "cuMemGetAllocationGranularity")) == CUDA_SUCCESS)
    *granularity = (size_t)g.cfg.granularity_bytes;
  unlock();
  return rc;
}

static CUresult reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags,
                        pl_cuda_double_rec_t *r) {
  const uint64_t gran = g.cfg.granularity_bytes;
  if (!ptr) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: ptr is NULL");
  if (flags) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: flags %llu must be 0", flags);
  if (size == 0 || size % HOST_PAGE_BYTES)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: size %zu is not a positive multiple of the host "
                   "page size", size);
  if (alignment && !is_pow2(alignment))
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: alignment %zu is not a power of two", alignment);
  if (addr % HOST_PAGE_BYTES)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: hint 0x%" PRIx64 " is not page aligned",
                   (uint64_t)addr);
  if (inject(&g.n_try_reserve, g.cfg.fail_reserve_at)) return (CUresult)g.cfg.fail_code;
  uint64_t align = alignment > gran ? alignment : gran;
  if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
  resv_t *rv = calloc(1, sizeof *rv);
  if (!rv) return CUDA_ERROR_OUT_OF_MEMORY;
  rv->n_pages = size / gran;
  rv->page = calloc(rv->n_pages ? rv->n_pages : 1, sizeof *rv->page);
  if (!rv->page) { free(rv); return CUDA_ERROR_OUT_OF_MEMORY; }
  const int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uint64_t base = 0;
  if (addr && addr % align == 0) {  /* a hint: never MAP_FIXED over what may be someone else's memory */
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE, mflags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && (uint64_t)(uintptr_t)p == addr) base = addr;
    else if (p != MAP_FAILED) munmap(p, size);  /* old kernels treat the flag as a plain hint */
  }
  if (!base) {
    uint64_t span = size + align;
    void *p = mmap(NULL, span, PROT_NONE, mflags, -1, 0);
    if (p == MAP_FAILED) { free(rv->page); free(rv); return CUDA_ERROR_OUT_OF_MEMORY; }
    uint64_t start = (uint64_t)(uintptr_t)p;
    base = round_up(start, align);
    if (base > start) munmap(p, base - start);
    if (start + span > base + size) munmap((void *)(uintptr_t)(base + size), start + span - (base + size));
  }
  rv->base = base;
  rv->size_bytes = size;
  rv->next = g.resvs;
  g.resvs = rv;
  g.c.n_reserve++;
  g.c.n_live_reservations++;
  *ptr = base;
  r->ptr = base;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ADDRESS_RESERVE);
  r.size_bytes = size;
  r.arg = alignment;
  lock();
  CUresult rc = g.initialized ? reserve(ptr, size, alignment, addr, flags, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult address_free(CUdeviceptr ptr, size_t size) {
  resv_t **pp = &g.resvs;
  while (*pp && (*pp)->base != ptr) pp = &(*pp)->next;
  resv_t *rv = *pp;
  if (!rv) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: 0x%" PRIx64 " is not a reserved range",
                          (uint64_t)ptr);
  if (rv->size_bytes != size)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: size %zu, but the range at 0x%" PRIx64
                   " was reserved with %" PRIu64, size, (uint64_t)ptr, rv->size_bytes);
  if (rv->maps)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: range 0x%" PRIx64 " still has mapped pages at 0x%"
                   PRIx64 " (cuMemUnmap first)", (uint64_t)ptr, rv->maps->base);
  munmap((void *)(uintptr_t)rv->base, rv->size_bytes);
  *pp = rv->next;
  free(rv->page);
  free(rv);
  g.c.n_address_free++;
  g.c.n_live_reservations--;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_ADDRESS_FREE);
  r.ptr = ptr;
  r.size_bytes = size;
  lock();
  CUresult rc = g.initialized ? address_free(ptr, size) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                       unsigned long long flags, pl_cuda_double_rec_t *r) {
  const uint64_t gran = g.cfg.granularity_bytes;
  if (!handle) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: handle is NULL");
  CUresult rc = prop_check(prop, "cuMemCreate");
  if (rc) return rc;
  r->device = prop->location.id;
  if (flags) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: flags %llu must be 0", flags);
  if (size == 0 || size % gran)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: size %zu is not a positive multiple of the granularity %"
                   PRIu64, size, gran);
  if (inject(&g.n_try_create, g.cfg.fail_create_at)) return (CUresult)g.cfg.fail_code;
  if (!fits(r->device, size)) { g.c.n_ooms++; return CUDA_ERROR_OUT_OF_MEMORY; }
  phys_t *p = calloc(1, sizeof *p);
  uint32_t n_pages = (uint32_t)(size / gran);
  if (p) p->pages = malloc(n_pages * sizeof *p->pages);
  if (!p || !p->pages) { free(p); return CUDA_ERROR_OUT_OF_MEMORY; }
  pages_take(&g.dev[r->device], n_pages, p->pages);
  p->n.kind = K_PHYS;
  p->n.key = ++g.next_handle;
  p->size_bytes = size;
  p->device = r->device;
  p->n_pages = n_pages;
  node_put(&p->n);
  charge(p->device, size);
  g.c.n_create++;
  g.c.n_live_handles++;
  g.c.n_live_physical++;
  *handle = p->n.key;
  r->handle = p->n.key;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_CREATE);
  r.size_bytes = size;
  lock();
  CUresult rc = g.initialized ? create(handle, size, prop, flags, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult release(CUmemGenericAllocationHandle handle, pl_cuda_double_rec_t *r) {
  node_t *n = node_get(K_PHYS, handle);
  phys_t *p = (phys_t *)n;
  if (!p || p->released)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemRelease: handle 0x%llx is not a live handle", handle);
  r->device = p->device;
  r->size_bytes = p->size_bytes;
  p->released = true;
  g.c.n_release++;
  g.c.n_live_handles--;
  if (p->n_maps == 0) phys_free(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_RELEASE);
  r.handle = handle;
  lock();
  CUresult rc = g.initialized ? release(handle, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

/* Checks that [ptr, ptr+size) is granularity-aligned and inside one reservation; returns it or NULL (violation). */
static resv_t *range_check(uint64_t ptr, uint64_t size, const char *fn) {
  const uint64_t gran = g.cfg.granularity_bytes;
  if (size == 0 || ptr % gran || size % gran) {
    violate(CUDA_ERROR_INVALID_VALUE, "%s: ptr 0x%" PRIx64 " size %" PRIu64 " not aligned to the granularity %" PRIu64,
            fn, ptr, size, gran);
    return NULL;
  }
  resv_t *rv = resv_find(ptr, size);
  if (!rv) violate(CUDA_ERROR_INVALID_VALUE, "%s: [0x%" PRIx64 ", +%" PRIu64 ") is not inside one reserved range", fn,
                   ptr, size);
  return rv;
}

static CUresult map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags, pl_cuda_double_rec_t *r) {
  const uint64_t gran = g.cfg.granularity_bytes;
  if (flags) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemMap: flags %llu must be 0", flags);
  if (offset) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemMap: offset %zu must be 0", offset);
  phys_t *p = (phys_t *)node_get(K_PHYS, handle);
  if (!p || p->released)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemMap: handle 0x%llx is not a live handle", handle);
  r->device = p->device;
  resv_t *rv = range_check(ptr, size, "cuMemMap");
  if (!rv) return CUDA_ERROR_INVALID_VALUE;
  if (size > p->size_bytes)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuMemMap: size %zu exceeds the handle's %" PRIu64, size, p->size_bytes);
  size_t first = (ptr - rv->base) / gran, n = size / gran;
  for (size_t i = first; i < first + n; i++)
    if (rv->page[i])
      return violate(CUDA_ERROR_INVALID_VALUE, "cuMemMap: page 0x%" PRIx64 " is already mapped (handle 0x%" PRIx64 ")",
                     rv->base + i * gran, rv->page[i]->phys->n.key);
  if (inject(&g.n_try_map, g.cfg.fail_map_at)) return (CUresult)g.cfg.fail_code;
  mapping_t *m = calloc(1, sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = g.dev[p->device].memfd;
  for (size_t i = 0; i < n;) {  /* one mmap per run of consecutive physical pages */
    size_t run = 1;
    while (i + run < n && p->pages[i + run] == p->pages[i] + run) run++;
    void *want = (void *)(uintptr_t)(ptr + i * gran);
    void *got = mmap(want, run * gran, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)p->pages[i] * (off_t)gran);
    if (got != want) {
      map_reserved(ptr, size);
      free(m);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    i += run;
  }
  m->base = ptr;
  m->size_bytes = size;
  m->phys = p;
  m->sync_epoch = g.sync_epoch;
  m->next = rv->maps;
  rv->maps = m;
  for (size_t i = first; i < first + n; i++) rv->page[i] = m;
  p->n_maps++;
  g.c.n_map++;
  g.c.n_live_mappings++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_MAP);
  r.ptr = ptr;
  r.size_bytes = size;
  r.arg = offset;
  r.handle = handle;
  lock();
  CUresult rc = g.initialized ? map(ptr, size, offset, handle, flags, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

/* Checks that the range is covered by mappings (whole ones when `whole`); returns the reservation or NULL. */
static resv_t *mapped_check(uint64_t ptr, uint64_t size, bool whole, const char *fn) {
  const uint64_t gran = g.cfg.granularity_bytes;
  resv_t *rv = range_check(ptr, size, fn);
  if (!rv) return NULL;
  size_t first = (ptr - rv->base) / gran, n = size / gran;
  for (size_t i = first; i < first + n; i++) {
    if (!rv->page[i]) {
      violate(CUDA_ERROR_INVALID_VALUE, "%s: page 0x%" PRIx64 " in the range is not mapped", fn, rv->base + i * gran);
      return NULL;
    }
  }
  if (whole) {
    mapping_t *a = rv->page[first], *b = rv->page[first + n - 1];
    if (a->base != ptr || b->base + b->size_bytes != ptr + size) {
      violate(CUDA_ERROR_INVALID_VALUE, "%s: [0x%" PRIx64 ", +%" PRIu64 ") cuts through a mapping "
              "(unmap whole mappings)", fn, ptr, size);
      return NULL;
    }
  }
  return rv;
}

static CUresult unmap(CUdeviceptr ptr, size_t size, pl_cuda_double_rec_t *r) {
  resv_t *rv = mapped_check(ptr, size, true, "cuMemUnmap");
  if (!rv) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t gran = g.cfg.granularity_bytes;
  r->device = rv->page[(ptr - rv->base) / gran]->phys->device;
  bool synced = true;
  for (uint64_t a = ptr; a < ptr + size;) {
    mapping_t *m = rv->page[(a - rv->base) / gran];
    a = m->base + m->size_bytes;
    if (m->sync_epoch >= g.sync_epoch) synced = false;
    mapping_remove(rv, m);
  }
  g.c.n_unmap++;
  if (synced) g.c.n_unmap_synced++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_UNMAP);
  r.ptr = ptr;
  r.size_bytes = size;
  lock();
  CUresult rc = g.initialized ? unmap(ptr, size, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

static CUresult set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count,
                           pl_cuda_double_rec_t *r) {
  if (!desc || count == 0) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: no access descriptors");
  int prot = PROT_NONE;  /* the host stands in for every device: the widest access granted wins */
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
      return violate(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: desc[%zu].location.type %d", i,
                     (int)desc[i].location.type);
    if (!device_ok(desc[i].location.id))
      return violate(CUDA_ERROR_INVALID_DEVICE, "cuMemSetAccess: desc[%zu].location.id %d", i, desc[i].location.id);
    switch (desc[i].flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_NONE: break;
    case CU_MEM_ACCESS_FLAGS_PROT_READ: prot |= PROT_READ; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot |= PROT_READ | PROT_WRITE; break;
    default: return violate(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: desc[%zu].flags %d", i, (int)desc[i].flags);
    }
  }
  r->arg = (uint64_t)desc[0].flags;
  r->device = desc[0].location.id;
  if (!mapped_check(ptr, size, false, "cuMemSetAccess")) return CUDA_ERROR_INVALID_VALUE;
  if (inject(&g.n_try_access, g.cfg.fail_access_at)) return (CUresult)g.cfg.fail_code;
  if (mprotect((void *)(uintptr_t)ptr, size, prot) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  g.c.n_set_access++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  pl_cuda_double_rec_t r = rec(PL_CUDA_DOUBLE_MEM_SET_ACCESS);
  r.ptr = ptr;
  r.size_bytes = size;
  lock();
  CUresult rc = g.initialized ? set_access(ptr, size, desc, count, &r) : CUDA_ERROR_NOT_INITIALIZED;
  r.result = rc;
  log_rec(r);
  unlock();
  return rc;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Device memory through the driver: cuMemsetD8, cuMemcpyDtoH, cuCtxSynchronize (synchronous here; the memory is  */
/* touched after the lock is released, so a fault on a page without access leaves the double usable)               */

/* Is [ptr, ptr+n) device memory: inside one live plain device allocation (not pinned host memory), or inside one
 * reservation with every page of it mapped? Records a violation when not. Caller holds the lock. A mapped page
 * without access is device memory all the same: touching it faults (SIGSEGV), as the copy engine's access would
 * fail on a GPU. */
static bool device_range(uint64_t ptr, uint64_t n, const char *fn) {
  if (n == 0) return true;
  for (size_t b = 0; b < N_BUCKETS; b++)
    for (node_t *x = g.bucket[b]; x; x = x->next) {
      if (x->kind != K_ALLOC) continue;
      alloc_t *a = (alloc_t *)x;
      if (!a->host && ptr >= x->key && ptr - x->key < a->size_bytes && n <= a->size_bytes - (ptr - x->key))
        return true;
    }
  resv_t *r = resv_find(ptr, n);
  if (r) {
    const uint64_t gran = g.cfg.granularity_bytes;
    size_t first = (ptr - r->base) / gran, last = (ptr + n - 1 - r->base) / gran;
    for (size_t i = first; i <= last; i++)
      if (!r->page[i]) {
        violate(CUDA_ERROR_INVALID_VALUE, "%s: page 0x%" PRIx64 " of [0x%" PRIx64 ", +%" PRIu64 ") is not mapped", fn,
                r->base + i * gran, ptr, n);
        return false;
      }
    return true;
  }
  violate(CUDA_ERROR_INVALID_VALUE, "%s: [0x%" PRIx64 ", +%" PRIu64 ") is not inside a live device allocation or a "
          "mapped range", fn, ptr, n);
  return false;
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  CUresult rc = enter();
  if (rc) return rc;
  if (need_context("cuMemsetD8_v2") < 0) rc = no_context_code();
  else if (!device_range(dstDevice, N, "cuMemsetD8_v2")) rc = CUDA_ERROR_INVALID_VALUE;
  unlock();  /* before touching the memory: a fault there (no access) must not leave the lock held */
  if (rc == CUDA_SUCCESS) memset((void *)(uintptr_t)dstDevice, uc, N);
  return rc;
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  CUresult rc = enter();
  if (rc) return rc;
  if (need_context("cuMemcpyDtoH_v2") < 0) rc = no_context_code();
  else if (!dstHost && ByteCount) rc = violate(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoH_v2: dstHost is NULL");
  else if (!device_range(srcDevice, ByteCount, "cuMemcpyDtoH_v2")) rc = CUDA_ERROR_INVALID_VALUE;
  unlock();
  if (rc == CUDA_SUCCESS && ByteCount) memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  return rc;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  CUresult rc = enter();
  if (rc) return rc;
  if (need_context("cuCtxSynchronize") < 0) rc = no_context_code();
  unlock();
  return rc;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Errors                                                                                                           */

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  const err_t *e = find_error(error);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = e ? e->text : NULL;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  const err_t *e = find_error(error);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = e ? e->name : NULL;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Entry points by name, as libcudart fetches them                                                                  */

typedef void (*fn_t)(void);

/* Base name, the CUDA version that introduced this ABI, the function, and its per-thread-stream variant. Several
 * rows may share a name (cuGetProcAddress); the highest version not above the request wins. Older ABIs (the v1
 * functions the _v2 ones replaced) are not implemented: asking for them reports VERSION_NOT_SUFFICIENT. */
typedef struct { const char *name; int version; fn_t fn, fn_ptsz; } entry_t;
#define E(name, version, fn, ptsz) { name, version, (fn_t)(fn), (fn_t)(ptsz) }
static const entry_t k_entries[] = {
  E("cuInit", 2000, cuInit, NULL),
  E("cuDriverGetVersion", 2020, cuDriverGetVersion, NULL),
  E("cuDeviceGetCount", 2000, cuDeviceGetCount, NULL),
  E("cuDeviceGet", 2000, cuDeviceGet, NULL),
  E("cuDeviceGetName", 2000, cuDeviceGetName, NULL),
  E("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute, NULL),
  E("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2, NULL),
  E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain, NULL),
  E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2, NULL),
  E("cuCtxGetCurrent", 4000, cuCtxGetCurrent, NULL),
  E("cuCtxSetCurrent", 4000, cuCtxSetCurrent, NULL),
  E("cuCtxSynchronize", 2000, cuCtxSynchronize, NULL),
  E("cuMemGetInfo", 3020, cuMemGetInfo_v2, NULL),
  E("cuMemAlloc", 3020, cuMemAlloc_v2, NULL),
  E("cuMemFree", 3020, cuMemFree_v2, NULL),
  E("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
  E("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
  E("cuMemAllocManaged", 6000, cuMemAllocManaged, NULL),
  E("cuMemAllocPitch", 3020, cuMemAllocPitch_v2, NULL),
  E("cuMemHostAlloc", 2020, cuMemHostAlloc, NULL),
  E("cuMemAllocHost", 3020, cuMemAllocHost_v2, NULL),
  E("cuMemFreeHost", 2000, cuMemFreeHost, NULL),
  E("cuMemAddressReserve", 10020, cuMemAddressReserve, NULL),
  E("cuMemAddressFree", 10020, cuMemAddressFree, NULL),
  E("cuMemCreate", 10020, cuMemCreate, NULL),
  E("cuMemRelease", 10020, cuMemRelease, NULL),
  E("cuMemMap", 10020, cuMemMap, NULL),
  E("cuMemUnmap", 10020, cuMemUnmap, NULL),
  E("cuMemSetAccess", 10020, cuMemSetAccess, NULL),
  E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity, NULL),
  E("cuMemsetD8", 3020, cuMemsetD8_v2, NULL),
  E("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, NULL),
  E("cuStreamCreate", 2000, cuStreamCreate, NULL),
  E("cuStreamDestroy", 4000, cuStreamDestroy_v2, NULL),
  E("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
  E("cuEventCreate", 2000, cuEventCreate, NULL),
  E("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
  E("cuEventQuery", 2000, cuEventQuery, NULL),
  E("cuEventDestroy", 4000, cuEventDestroy_v2, NULL),
  E("cuGetErrorString", 6000, cuGetErrorString, NULL),
  E("cuGetErrorName", 6000, cuGetErrorName, NULL),
  E("cuGetProcAddress", 11030, cuGetProcAddress, NULL),
  E("cuGetProcAddress", 12000, cuGetProcAddress_v2, NULL),
};
#undef E

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus) {
  if (!symbol || !pfn || cudaVersion <= 0 || cudaVersion > DRIVER_VERSION ||
      (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
    return CUDA_ERROR_INVALID_VALUE;
  const entry_t *best = NULL;
  bool named = false;
  for (size_t i = 0; i < sizeof k_entries / sizeof k_entries[0]; i++) {
    if (strcmp(k_entries[i].name, symbol) != 0) continue;
    named = true;
    if (k_entries[i].version <= cudaVersion && (!best || k_entries[i].version > best->version)) best = &k_entries[i];
  }
  fn_t f = NULL;
  if (best) f = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->fn_ptsz ? best->fn_ptsz : best->fn;
  memcpy(pfn, &f, sizeof *pfn);  /* function pointer into void *, as the API requires */
  if (symbolStatus)
    *symbolStatus = best ? CU_GET_PROC_ADDRESS_SUCCESS
                         : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Control API (cuda_double.h)                                                                                      */

/* Drops every object without a report. Caller holds the lock. */
static void drop_all(void) {
  while (g.resvs) {
    resv_t *rv = g.resvs;
    g.resvs = rv->next;
    for (mapping_t *m = rv->maps, *next; m; m = next) { next = m->next; free(m); }
    munmap((void *)(uintptr_t)rv->base, rv->size_bytes);
    free(rv->page);
    free(rv);
  }
  for (size_t b = 0; b < N_BUCKETS; b++) {
    for (node_t *n = g.bucket[b], *next; n; n = next) {
      next = n->next;
      if (n->kind == K_ALLOC) munmap((void *)(uintptr_t)n->key, ((alloc_t *)n)->map_bytes);
      if (n->kind == K_PHYS) free(((phys_t *)n)->pages);
      free(n);
    }
    g.bucket[b] = NULL;
  }
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (g.dev[d].page_used) { close(g.dev[d].memfd); free(g.dev[d].page_used); }
    memset(&g.dev[d], 0, sizeof g.dev[d]);
    g.ctx[d].refcount = 0;
    g.ctx[d].gen++;
  }
}

int pl_cuda_double_reset(const char *config) {
  lock();
  drop_all();
  free(g.log);
  g.log = NULL;
  g.log_len = g.log_cap = 0;
  if (g.log_fd >= 0) close(g.log_fd);
  g.log_fd = -1;
  memset(&g.c, 0, sizeof g.c);
  g.n_try_alloc = g.n_try_map = g.n_try_create = g.n_try_reserve = g.n_try_access = 0;
  g.sync_epoch = 0;
  g.violation[0] = 0;
  g.initialized = false;
  g.inherited = false;
  configure(config ? config : getenv("PL_CUDA_DOUBLE"));
  int rc = g.config_ok ? 0 : -EINVAL;
  unlock();
  return rc;
}

void pl_cuda_double_counters(pl_cuda_double_counters_t *out) {
  lock();
  ensure_configured();
  *out = g.c;
  unlock();
}

size_t pl_cuda_double_log(size_t first, pl_cuda_double_rec_t *out, size_t max_recs) {
  lock();
  size_t n = 0;
  if (first < g.log_len) {
    n = g.log_len - first < max_recs ? g.log_len - first : max_recs;
    memcpy(out, g.log + first, n * sizeof *out);
  }
  unlock();
  return n;
}

size_t pl_cuda_double_live(int report) {
  uint64_t bytes = 0;
  lock();
  size_t n = leaks(-1, "check", report != 0, false, &bytes);
  unlock();
  return n;
}

const char *pl_cuda_double_last_violation(void) {
  lock();
  memcpy(t_violation, g.violation, sizeof t_violation);
  unlock();
  return t_violation;
}

/* Fork: the lock must not be held across it, and the child inherits the parent's objects (and shares its memfd
 * pages), so, as with a real driver, it cannot use the device: every call fails until a reset, and its exit does
 * not report the parent's objects as its own leaks. */
static void fork_prepare(void) { lock(); }
static void fork_parent(void) { unlock(); }
static void fork_child(void) {
  if (g.initialized || g.resvs || g.c.n_live_allocs || g.c.n_live_physical) g.inherited = true;
  g.initialized = false;
  unlock();
}

__attribute__((constructor)) static void at_load(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* At process exit nothing should be left: report what is. */
__attribute__((destructor)) static void at_exit_report(void) {
  uint64_t bytes = 0;
  lock();
  if (g.inherited) { unlock(); return; }
  size_t n = leaks(-1, "process exit", true, false, &bytes);
  if (n)
    fprintf(stderr, "plateau cuda double: %zu object(s), %" PRIu64 " bytes still live at process exit\n", n, bytes);
  int code = n ? g.cfg.leak_exitcode : 0;
  unlock();
  if (code) _exit(code);
}
