/* NVIDIA's management library (NVML), read from outside the program: GPU memory used per process, for `plateau
 * attach` (docs/attach.md "Device memory"). The platform boundary of the attach sampler's device side.
 *
 * The library is loaded with dlopen at run time, never linked (a machine without the NVIDIA driver runs plateau all
 * the same): PLATEAU_LIBNVML names the file (tests point it at tests/nvml_double), else "libnvidia-ml.so.1". The
 * entry points are the versioned names the current nvml.h declares: nvmlInit_v2, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetComputeRunningProcesses_v3 (whose nvmlProcessInfo_t has the
 * nvmlProcessInfo_v2_st layout; _v2 of the same layout where _v3 is absent), nvmlDeviceGetMemoryInfo, nvmlShutdown.
 * Not thread-safe: one owner thread. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PL_NVML_MAX_DEVICES 16
#define PL_NVML_MAX_PROCS 1024   /* processes kept per device and refresh */

typedef struct pl_nvml pl_nvml_t;

/* Load and initialise NVML. Returns 0, or -ENOENT (no library: no driver here), -ENOSYS (an entry point is
 * missing), -EIO (nvmlInit failed, or no device); why gets one line for each failure. */
int pl_nvml_open(pl_nvml_t **out, char *why, size_t why_size);

/* Read every device's running compute processes and memory once. Returns 0 or -EIO (a call failed: the
 * previous reading is kept). */
int pl_nvml_refresh(pl_nvml_t *nv);

/* Devices found (at most PL_NVML_MAX_DEVICES). */
unsigned pl_nvml_n_devices(const pl_nvml_t *nv);

/* Device memory of `pid` on device `dev` at the last refresh: 0 with *used_bytes (0 when pid is not listed on
 * that device) and *total_bytes (the device's capacity), -EINVAL for a device out of range, -ENODATA when NVML
 * listed the pid without its memory (NVML_VALUE_NOT_AVAILABLE: a pid namespace or permissions hide it). */
int pl_nvml_used(const pl_nvml_t *nv, unsigned dev, uint32_t pid, uint64_t *used_bytes, uint64_t *total_bytes);

/* nvmlShutdown, dlclose, free. Safe on NULL. */
void pl_nvml_close(pl_nvml_t *nv);
