/* test_tune_gen: writes the synthetic traces of tests/tune/test_replay_synth.h for the plateau tune/replay CLI
 * test. usage: test_tune_gen frag|frag-nostats|nodev|workload CONF PATH */
#include <stdio.h>
#include <string.h>

#include "../tune/test_replay_synth.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_tune_gen frag|frag-nostats|nodev|workload CONF PATH\n");
        return 2;
    }
    int rc;
    if (!strcmp(argv[1], "frag")) {
        rc = rs_write_frag(argv[3], true);
    } else if (!strcmp(argv[1], "frag-nostats")) {
        rc = rs_write_frag(argv[3], false);
    } else if (!strcmp(argv[1], "nodev")) {
        rc = rs_write_no_device(argv[3]);
    } else if (!strcmp(argv[1], "workload")) {
        pl_workload_params_t p;
        pl_workload_default(&p);
        p.n_steps = 4;
        rs_recorded_t rec;
        rc = rs_record_workload(argv[3], argv[2], &p, 80ull << 30, &rec);
        if (!rc)
            printf("%lld %lld %lld %lld\n", (long long)rec.final.allocated_bytes[PL_POOL_ALL].peak,
                   (long long)rec.final.reserved_bytes[PL_POOL_ALL].peak, (long long)rec.final.num_device_alloc,
                   (long long)rec.final.num_device_map);
    } else {
        fprintf(stderr, "test_tune_gen: unknown kind '%s'\n", argv[1]);
        return 2;
    }
    if (rc) fprintf(stderr, "test_tune_gen: %s: error %d\n", argv[3], rc);
    return rc ? 1 : 0;
}
