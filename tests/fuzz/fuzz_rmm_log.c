/* Fuzz target: the RMM logging_resource_adaptor CSV reader (tune/rmm_log.c -> replay sequence builder).
 * Properties: no crash, no UB, no read past the input (lines are not NUL-terminated), at most 64 Ki events, every
 * bad line a clean error, a cut last line a damaged sequence. */
#include <stddef.h>
#include <stdint.h>

#include "rmm_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_replay_seq_t s;
    pl_rmm_log_info_t in;
    char err[512];
    if (pl_rmm_log_read(data, size, "fuzz", 1 << 16, &s, &in, err, sizeof err) == 0) {
        char sum[1024];
        pl_rmm_log_summary(&in, &s, sum, sizeof sum);
        pl_replay_seq_free(&s);
    }
    return 0;
}
