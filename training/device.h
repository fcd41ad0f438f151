/* Device selection of the training engine: which kernel table (ops.h) and which allocator backend a run uses.
 *
 *   cpu   the CPU kernels over the sim backend (host memory): always available.
 *   cuda  the CUDA kernels of the dlopened module libplateau-train-cuda.so over the allocator's cuda backend.
 *         Available when (1) the driver loads (libcuda.so.1 or $PLATEAU_LIBCUDA), cuInit succeeds and device 0
 *         exists: the allocator's own backend creation is the probe; (2) the module was built (nvcc found) and
 *         loads ($PLATEAU_TRAIN_CUDA_MODULE, else next to the executable, else the install directory); and
 *         (3) the module initialises the CUDA runtime on device 0.
 *   auto  cuda when all three hold, else cpu; `reason` says which and why.
 * plateau-train itself never links libcuda or libcudart: only the module does (cudart statically).
 * Not thread-safe; one device per process.
 */
#pragma once

#include <stddef.h>

#include <plateau/alloc.h>

#include "ops.h"

typedef enum pl_device_kind { PL_DEVICE_AUTO = 0, PL_DEVICE_CPU, PL_DEVICE_CUDA } pl_device_kind_t;

typedef struct pl_train_device {
    pl_device_kind_t kind;      /* resolved: PL_DEVICE_CPU or PL_DEVICE_CUDA */
    const pl_train_ops_t *ops;  /* the kernel table */
    pl_backend_t *backend;      /* sim (cpu) or cuda; owned, destroy after the allocator */
    char reason[768];           /* one line: the device and why it was chosen (auto) */
} pl_train_device_t;

/* Parse "auto", "cpu" or "cuda"; returns 0 or -EINVAL. */
int pl_train_device_parse(const char *text, pl_device_kind_t *out);
const char *pl_train_device_name(pl_device_kind_t kind);

/* Select and open a device. `sim` configures the sim backend (NULL = defaults). Returns 0 (dev filled), or
 *   -ENODEV  want = cuda and CUDA is unavailable: err names the failing step or call (no driver, cuInit, no
 *            device, module not built or not loadable, runtime initialisation);
 *   -ENOMEM / -EINVAL  the sim backend could not be created (err says so).
 * auto never fails for lack of CUDA: it falls back to cpu and says why in dev->reason. */
int pl_train_device_open(pl_device_kind_t want, const pl_sim_options_t *sim, pl_train_device_t *dev, char *err,
                         size_t err_len);

/* Destroy the backend (the allocator over it must be destroyed first). The module stays loaded. */
void pl_train_device_close(pl_train_device_t *dev);
