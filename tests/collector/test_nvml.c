/* collector/nvml.c over the NVML test double (tests/nvml_double, loaded through PLATEAU_LIBNVML): devices and their
 * capacity, each process's used memory per device as the state file says, NVML_VALUE_NOT_AVAILABLE, a library that
 * is absent or fails to initialise. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "nvml.h"

static char state_path[64];

static void write_state(const char *text) {
    FILE *f = fopen(state_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state) {
    (void)state;
    snprintf(state_path, sizeof state_path, "/tmp/pl-nvml-state-%d", (int)getpid());
    setenv("PL_NVML_DOUBLE_STATE", state_path, 1);
    unsetenv("PL_NVML_DOUBLE_FAIL");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(state_path);
    return 0;
}

static void test_nvml_used_per_process(void **state) {
    (void)state;
    write_state("device 0 total 1000000\ndevice 1 total 2000000\n"
                "pid 10 device 0 used 4096\npid 11 device 1 used 8192\npid 10 device 1 used 100\n");
    pl_nvml_t *nv = NULL;
    char why[200] = "";
    assert_int_equal(pl_nvml_open(&nv, why, sizeof why), 0);
    assert_int_equal(pl_nvml_n_devices(nv), 2);
    assert_int_equal(pl_nvml_refresh(nv), 0);
    uint64_t used = 1, total = 0;
    assert_int_equal(pl_nvml_used(nv, 0, 10, &used, &total), 0);
    assert_int_equal(used, 4096);
    assert_int_equal(total, 1000000);
    assert_int_equal(pl_nvml_used(nv, 1, 10, &used, &total), 0);
    assert_int_equal(used, 100);
    assert_int_equal(total, 2000000);
    assert_int_equal(pl_nvml_used(nv, 0, 11, &used, &total), 0);
    assert_int_equal(used, 0); /* not on device 0 */
    assert_int_equal(pl_nvml_used(nv, 2, 10, &used, &total), -EINVAL);
    /* the double's state changes: a refresh sees it, no refresh keeps the last reading */
    write_state("device 0 total 1000000\ndevice 1 total 2000000\n"
                "pid 10 device 0 used 65536\npid 12 device 0 used na\n");
    assert_int_equal(pl_nvml_used(nv, 0, 10, &used, &total), 0);
    assert_int_equal(used, 4096);
    assert_int_equal(pl_nvml_refresh(nv), 0);
    assert_int_equal(pl_nvml_used(nv, 0, 10, &used, &total), 0);
    assert_int_equal(used, 65536);
    assert_int_equal(pl_nvml_used(nv, 1, 10, &used, &total), 0);
    assert_int_equal(used, 0); /* gone from device 1 */
    assert_int_equal(pl_nvml_used(nv, 0, 12, &used, &total), -ENODATA);
    pl_nvml_close(nv);
}

static void test_nvml_absent_or_failing(void **state) {
    (void)state;
    pl_nvml_t *nv = NULL;
    char why[300] = "";
    setenv("PL_NVML_DOUBLE_FAIL", "init", 1);
    assert_int_equal(pl_nvml_open(&nv, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "nvmlInit_v2 failed"));
    assert_null(nv);
    unsetenv("PL_NVML_DOUBLE_FAIL");
    const char *lib = getenv("PLATEAU_LIBNVML");
    char *keep = lib ? strdup(lib) : NULL;
    setenv("PLATEAU_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
    why[0] = 0;
    assert_int_equal(pl_nvml_open(&nv, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "/nonexistent/libnvidia-ml.so.1 not loaded"));
    if (keep) setenv("PLATEAU_LIBNVML", keep, 1);
    free(keep);
    pl_nvml_close(NULL);
}

int main(void) {
    if (!getenv("PLATEAU_LIBNVML")) {
        fprintf(stderr, "PLATEAU_LIBNVML must name the NVML double (tests/nvml_double)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nvml_used_per_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nvml_absent_or_failing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
