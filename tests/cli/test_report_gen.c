/* test_report_gen PATH [leak_bytes [n_steps [rank node pid]]]: write one synthetic trace (tests/cli/test_report_synth.h)
 * for the HTML integration test, the merge of several nodes' run directories (a rank, its host name and pid; rank
 * -1: none), and for regenerating the report fuzzer's seed. Exit 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_report_synth.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH [leak_bytes [n_steps [rank node pid]]]\n", argv[0]);
        return 2;
    }
    synth_cfg_t c = synth_default();
    if (argc > 2) c.leak_bytes = strtoull(argv[2], NULL, 10);
    if (argc > 3) c.n_steps = atoi(argv[3]);
    if (argc > 6) {
        c.rank = atoi(argv[4]);
        c.ranked = c.rank >= 0;
        c.local_rank = c.ranked ? c.rank % 8 : -1;
        c.node = argv[5];
        c.pid = (uint32_t)strtoul(argv[6], NULL, 10);
    }
    int rc = synth_trace(argv[1], &c);
    if (rc) fprintf(stderr, "%s: %s\n", argv[1], strerror(-rc));
    return rc ? 1 : 0;
}
