/* Target for tests/preload/test_cuda.c: a program linked directly against the driver (here the test double,
 * libcuda.so.1), calling cuMemAlloc_v2 / cuMemFree_v2 / cuMemAllocManaged / cuMemAllocAsync by name. The
 * preload's exported driver names interpose these calls (plain interposition, no cuGetProcAddress involved). */
#include <stdio.h>

#include <cuda.h>

#define CHECK(x)                                                                                               \
    do {                                                                                                       \
        CUresult rc_ = (x);                                                                                    \
        if (rc_ != CUDA_SUCCESS) {                                                                             \
            fprintf(stderr, "target_cuda_direct: %s -> %d\n", #x, (int)rc_);                                 \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr a, b, c;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc_v2(&a, 12345));
    CHECK(cuMemAllocManaged(&b, 100, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAllocAsync(&c, 8192, NULL));
    CHECK(cuMemFree_v2(b));
    CHECK(cuMemFreeAsync(c, NULL));
    CHECK(cuMemFree_v2(a));
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
