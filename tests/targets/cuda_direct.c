/* Target for tests/preload/test_cuda.c: a program linked directly against the driver (here the test double,
 * libcuda.so.1), calling cuMemAlloc_v2 / cuMemFree_v2 / cuMemAllocManaged / cuMemAllocAsync by name. The
 * preload's exported driver names interpose these calls (plain interposition, no cuGetProcAddress involved). */
#include <stdio.h>

#include <cuda.h>

#include "check.h"

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr a, b, c;
    PL_CHECK_RC(cuInit(0));
    PL_CHECK_RC(cuDeviceGet(&dev, 0));
    PL_CHECK_RC(cuDevicePrimaryCtxRetain(&ctx, dev));
    PL_CHECK_RC(cuCtxSetCurrent(ctx));
    PL_CHECK_RC(cuMemAlloc_v2(&a, 12345));
    PL_CHECK_RC(cuMemAllocManaged(&b, 100, CU_MEM_ATTACH_GLOBAL));
    PL_CHECK_RC(cuMemAllocAsync(&c, 8192, NULL));
    PL_CHECK_RC(cuMemFree_v2(b));
    PL_CHECK_RC(cuMemFreeAsync(c, NULL));
    PL_CHECK_RC(cuMemFree_v2(a));
    PL_CHECK_RC(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
