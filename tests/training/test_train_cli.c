/* plateau-train as a program: plateau_step()/plateau_mark() found at run time through dlsym (a preloaded test double
 * counts them), the budget and final stats printed, a leak scenario reported, exit statuses and the checkpoint
 * mismatch message. argv[1] = plateau-train, argv[2] = the step_counter test double (shared module).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/shell.h"

static const char *train_exe, *counter_lib;
static const char *tiny = "--layers 1 --heads 2 --channels 16 --seq 8 --batch 2 --threads 1";


static char out[1 << 16];

static void test_train_cli_calls_step_api(void **state) {
    (void)state;
    int rc = pl_test_shell(out, sizeof out,
                           "LD_PRELOAD=%s ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 %s %s --steps 7 "
                           "--eval-every 3", counter_lib, train_exe, tiny);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "step_counter: steps=7 marks=4 last=eval-end")); /* evals at steps 3 and 6 */
}

static void test_train_cli_prints_budget_and_stats(void **state) {
    (void)state;
    int rc = pl_test_shell(out, sizeof out, "%s %s --steps 2", train_exe, tiny);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "expected memory budget"));
    assert_non_null(strstr(out, "(batch x seq x vocab x 4 = 2 x 8 x 256 x 4)"));
    assert_non_null(strstr(out, "optimizer"));
    assert_non_null(strstr(out, "allocator stats (sim device)"));
    assert_non_null(strstr(out, "held by leak scenario: 0 tensors"));
}

static void test_train_cli_leak_is_reported(void **state) {
    (void)state;
    int rc = pl_test_shell(out, sizeof out, "%s %s --steps 5 --leak outputs --leak-start 2", train_exe, tiny);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "scenario: leak outputs from step 2"));
    assert_non_null(strstr(out, "held by leak scenario: 4 tensors"));
}

static void test_train_cli_checkpoint_mismatch(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/plateau-cli-ckpt-%d.bin", (int)getpid());
    assert_int_equal(pl_test_shell(out, sizeof out, "%s %s --steps 1 --save %s", train_exe, tiny, path), 0);
    assert_int_equal(pl_test_shell(out, sizeof out, "%s %s --steps 1 --load %s", train_exe, tiny, path), 0);
    assert_non_null(strstr(out, "loaded"));
    int rc = pl_test_shell(out, sizeof out, "%s --layers 2 --heads 2 --channels 16 --seq 8 --steps 1 --load %s",
                           train_exe, path);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "does not match the model: layers 1 in file, 2 in model"));
    unlink(path);
}

static void test_train_cli_usage_errors(void **state) {
    (void)state;
    assert_int_equal(pl_test_shell(out, sizeof out, "%s --leak sometimes", train_exe), 1);
    assert_non_null(strstr(out, "--leak expects graph, outputs, stats, cache or none"));
    assert_int_equal(pl_test_shell(out, sizeof out, "%s --heads 3", train_exe), 1);
    assert_non_null(strstr(out, "heads must divide channels"));
    assert_int_equal(
        pl_test_shell(out, sizeof out, "PLATEAU_SIM_DEVICE=capacity:8MiB %s --threads 1 --steps 1", train_exe), 2);
    assert_non_null(strstr(out, "out of device memory"));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PLATEAU_TRAIN STEP_COUNTER_SO\n", argv[0]);
        return 1;
    }
    train_exe = argv[1];
    counter_lib = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_cli_calls_step_api),
        cmocka_unit_test(test_train_cli_prints_budget_and_stats),
        cmocka_unit_test(test_train_cli_leak_is_reported),
        cmocka_unit_test(test_train_cli_checkpoint_mismatch),
        cmocka_unit_test(test_train_cli_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
