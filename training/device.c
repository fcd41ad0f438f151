/* Device selection (see device.h): probes the driver through the allocator's cuda backend, loads the CUDA kernels
 * module with dlopen and initialises its runtime; falls back to the CPU for `auto`. The module is the only object
 * that links the CUDA runtime, so this file (and plateau-train) load on machines without a driver.
 */
#include "config.h"

#include "device.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pl_train_device_parse(const char *text, pl_device_kind_t *out) {
    if (!strcmp(text, "auto")) *out = PL_DEVICE_AUTO;
    else if (!strcmp(text, "cpu")) *out = PL_DEVICE_CPU;
    else if (!strcmp(text, "cuda")) *out = PL_DEVICE_CUDA;
    else return -EINVAL;
    return 0;
}

const char *pl_train_device_name(pl_device_kind_t kind) {
    return kind == PL_DEVICE_CUDA ? "cuda" : kind == PL_DEVICE_CPU ? "cpu" : "auto";
}

/* dlopen one candidate path and check its table; 0 or -ENODEV with the reason in err. */
static int try_module(const char *path, const pl_train_ops_t **ops, void **init, char *err, size_t err_len) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); /* a CUDA runtime is never unloaded */
    if (!h) {
        snprintf(err, err_len, "cannot load the CUDA kernels module: dlopen(\"%.250s\"): %.250s", path, dlerror());
        return -ENODEV;
    }
    const pl_train_ops_t *(*get)(void) = NULL;
    *(void **)&get = dlsym(h, PL_TRAIN_CUDA_OPS_SYMBOL);
    *init = dlsym(h, PL_TRAIN_CUDA_INIT_SYMBOL);
    const pl_train_ops_t *t = get ? get() : NULL;
    if (!t || !*init) {
        snprintf(err, err_len, "%.300s is not a plateau-train CUDA module (no %s or %s)", path,
                 PL_TRAIN_CUDA_OPS_SYMBOL, PL_TRAIN_CUDA_INIT_SYMBOL);
        return -ENODEV;
    }
    if (t->abi != PL_TRAIN_OPS_ABI || t->size != sizeof(pl_train_ops_t)) {
        snprintf(err, err_len, "%.300s has kernel table ABI %u (size %u), this plateau-train needs ABI %u (size %zu)",
                 path, t->abi, t->size, PL_TRAIN_OPS_ABI, sizeof(pl_train_ops_t));
        return -ENODEV;
    }
#define PL_CHECK_FIELD(f)                                                                                       \
    if (!t->f) {                                                                                                \
        snprintf(err, err_len, "%.300s: kernel table entry %s is NULL", path, #f);                                  \
        return -ENODEV;                                                                                         \
    }
    PL_TRAIN_OPS_FIELDS(PL_CHECK_FIELD)
#undef PL_CHECK_FIELD
    *ops = t;
    return 0;
}

/* Find and load the module: $PLATEAU_TRAIN_CUDA_MODULE, else beside the executable, else the install dir. */
static int load_module(const pl_train_ops_t **ops, void **init, char *path, size_t path_len, char *err,
                       size_t err_len) {
    const char *env = getenv("PLATEAU_TRAIN_CUDA_MODULE");
    if (env && *env) {
        snprintf(path, path_len, "%s", env);
        return try_module(path, ops, init, err, err_len);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int rc = -ENODEV;
    char first_err[512] = "";
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(path, path_len, "%s/%s", exe, PL_TRAIN_CUDA_MODULE_NAME);
        if (access(path, F_OK) == 0) return try_module(path, ops, init, err, err_len);
        snprintf(first_err, sizeof first_err, "%.300s", path);
    }
    if (PL_TRAIN_CUDA_MODULE_DIR[0]) {
        snprintf(path, path_len, "%s/%s", PL_TRAIN_CUDA_MODULE_DIR, PL_TRAIN_CUDA_MODULE_NAME);
        if (access(path, F_OK) == 0) return try_module(path, ops, init, err, err_len);
    }
    snprintf(err, err_len,
             "the CUDA kernels module %s was not found (looked in %s%s%.300s; set PLATEAU_TRAIN_CUDA_MODULE)",
             PL_TRAIN_CUDA_MODULE_NAME, first_err[0] ? first_err : "(no executable path)",
             PL_TRAIN_CUDA_MODULE_DIR[0] ? " and " : "", PL_TRAIN_CUDA_MODULE_DIR[0] ? path : "");
    return rc;
}

/* Everything cuda needs; 0 or -ENODEV with the reason in err. */
static int open_cuda(pl_train_device_t *dev, bool automatic, char *err, size_t err_len) {
    const char *env = getenv("PLATEAU_TRAIN_CUDA_MODULE");
    if (!PL_TRAIN_HAVE_CUDA_MODULE && !(env && *env)) { /* nothing to run kernels with: do not even probe */
        snprintf(err, err_len, "this plateau-train was built without the CUDA kernels module (-Dcuda=disabled, or "
                               "no nvcc or static CUDA runtime at build time)");
        return -ENODEV;
    }
    pl_backend_t *be = NULL;
    char msg[512];
    int rc = pl_backend_cuda_create(0, &be, msg, sizeof msg);
    if (rc != 0) {
        snprintf(err, err_len, "%s", msg);
        return -ENODEV;
    }
    const pl_train_ops_t *ops = NULL;
    void *init_sym = NULL;
    char path[PATH_MAX + 64];
    rc = load_module(&ops, &init_sym, path, sizeof path, err, err_len);
    if (rc == 0) {
        int (*init)(int, char *, size_t) = NULL;
        *(void **)&init = init_sym;
        rc = init(0, msg, sizeof msg);
        if (rc != 0) {
            snprintf(err, err_len,
                     "the driver reports a device, but the CUDA runtime of %.300s failed to initialise: %.250s", path,
                     msg);
            rc = -ENODEV;
        }
    }
    if (rc != 0) {
        pl_backend_destroy(be);
        return -ENODEV;
    }
    dev->kind = PL_DEVICE_CUDA;
    dev->ops = ops;
    dev->backend = be;
    snprintf(dev->reason, sizeof dev->reason, "cuda device 0 (kernels module %.300s%s)", path,
             automatic ? "; auto: driver, device and CUDA runtime all usable" : "");
    return 0;
}

int pl_train_device_open(pl_device_kind_t want, const pl_sim_options_t *sim, pl_train_device_t *dev, char *err,
                         size_t err_len) {
    memset(dev, 0, sizeof *dev);
    char why[640] = "";
    if (want != PL_DEVICE_CPU) {
        int rc = open_cuda(dev, want == PL_DEVICE_AUTO, why, sizeof why);
        if (rc == 0) return 0;
        if (want == PL_DEVICE_CUDA) {
            snprintf(err, err_len, "--device cuda: %s", why);
            return rc;
        }
    }
    pl_sim_options_t defaults;
    if (!sim) {
        pl_sim_options_default(&defaults);
        sim = &defaults;
    }
    int rc = pl_backend_sim_create(sim, &dev->backend);
    if (rc != 0) {
        snprintf(err, err_len, "cannot create the sim device: %s", strerror(-rc));
        return rc;
    }
    dev->kind = PL_DEVICE_CPU;
    dev->ops = pl_train_ops_cpu();
    if (want == PL_DEVICE_CPU)
        snprintf(dev->reason, sizeof dev->reason, "cpu (requested; tensors on the sim device)");
    else
        snprintf(dev->reason, sizeof dev->reason, "cpu (auto: no usable CUDA device: %s)", why);
    return 0;
}

void pl_train_device_close(pl_train_device_t *dev) {
    if (dev->backend) pl_backend_destroy(dev->backend);
    dev->backend = NULL;
    dev->ops = NULL;
}
