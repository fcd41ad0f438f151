/* Fuzz target: the fast replay (pl_alloc_run_batch on the allocator's handle API) against the locked reference
 * (public API + tracking hook), differentially. The input is a program of allocations, frees and probes over a few
 * streams, replayed under one of seven configs on a device of 32 MiB .. 1 GiB (OOMs, cache release, GC, expandable
 * segments). Property: both paths give the same pl_replay_result_t in every field; anything else aborts.
 * Byte 0 picks the config (tests/common/replay_confs.h), byte 1 the capacity; then 3 bytes per op:
 *   b0 % 8: 0-3 alloc, 4-6 free, 7 probe; b0 >> 6: stream; b1, b2: size (2^(b1 % 28) scaled by b2) or which live
 *   allocation to free; the recorded-stats mark falls at the op where b0 == 0xff. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "../common/replay_confs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


#define MAX_LIVE 512

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_replay_paths: fast and locked replays differ in %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *conf = pl_test_replay_confs[data[0] % PL_TEST_N_REPLAY_CONFS];
    uint64_t capacity = (uint64_t)32 << (20 + data[1] % 6); /* 32 MiB .. 1 GiB */
    pl_replay_seq_t s;
    pl_replay_seq_init(&s, 1 << 16);
    uint64_t live[MAX_LIVE], next_addr = 0x10000000ull;
    size_t n_live = 0;
    for (size_t i = 2; i + 3 <= size; i += 3) {
        uint8_t b0 = data[i], b1 = data[i + 1], b2 = data[i + 2];
        unsigned op = b0 % 8;
        uint64_t stream = b0 >> 6;
        uint64_t bytes = ((uint64_t)1 << (b1 % 28)) + (uint64_t)b2 * ((uint64_t)1 << (b1 % 28)) / 256;
        if (b0 == 0xff) {
            s.have_stats = true;
            s.stats_event = s.n_events;
        }
        if (op < 4 && n_live < MAX_LIVE) {
            if (pl_replay_seq_alloc(&s, next_addr, bytes, stream)) break;
            live[n_live++] = next_addr;
            next_addr += (uint64_t)1 << 28;
        } else if (op < 7 && n_live) {
            size_t k = b1 % n_live;
            if (pl_replay_seq_free_addr(&s, live[k])) break;
            live[k] = live[--n_live];
        } else if (op == 7) {
            if (pl_replay_seq_probe(&s, bytes, stream)) break;
        }
    }
    pl_alloc_config_t cfg;
    char err[512];
    if (pl_alloc_config_parse(conf, &cfg, err, sizeof err)) abort(); /* the list holds valid configs only */
    pl_replay_result_t fast, locked;
    memset(&fast, 0x5a, sizeof fast);
    memset(&locked, 0xa5, sizeof locked);
    int rf = pl_replay_run_path(&s, &cfg, capacity, PL_REPLAY_PATH_FAST, &fast, err, sizeof err);
    int rl = pl_replay_run_path(&s, &cfg, capacity, PL_REPLAY_PATH_LOCKED, &locked, err, sizeof err);
    check(rf == rl, "return code");
    const char *field = rf ? NULL : pl_replay_result_diff(&fast, &locked);
    check(!field, field);
    pl_replay_seq_free(&s);
    return 0;
}
