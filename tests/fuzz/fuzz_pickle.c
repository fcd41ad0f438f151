/* Fuzz target: the data-only pickle reader (tune/pickle.c) and the PyTorch memory snapshot reader on top of it
 * (tune/torch_snapshot.c -> replay sequence builder). Properties: no crash, no UB, no read past the input, memory
 * bounded by the limits below (a 64 MiB DOM, 64 open MARKs, 64 Ki events), every refusal a clean error. A parsed
 * document is walked through the public accessors (every value, every member), without recursion. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pickle.h"
#include "torch_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_pickle_limits_t lim = {.max_mem_bytes = (size_t)64 << 20, .max_depth = 64};
    pl_pickle_doc_t d;
    char err[512];
    if (pl_pickle_parse(data, size, &lim, &d, err, sizeof err) == 0) {
        volatile size_t sink = 0;
        for (pl_pickle_ref_t v = 0; v < d.n_values; v++) {
            size_t n = pl_pickle_len(&d, v), len;
            int64_t i;
            for (size_t k = 0; k < n; k++) {
                sink += pl_pickle_item(&d, v, k) + pl_pickle_dict_key(&d, v, k) + pl_pickle_dict_value(&d, v, k);
            }
            const char *s = pl_pickle_str(&d, v, &len);
            if (s && len) sink += (unsigned char)s[len - 1];
            if (!pl_pickle_int(&d, v, &i)) sink += (size_t)i;
            sink += strlen(pl_pickle_type_name(pl_pickle_type(&d, v)));
        }
        sink += pl_pickle_dict_get(&d, d.root, "device_traces");
        (void)sink;
        pl_pickle_doc_free(&d);
    }
    pl_torch_snapshot_opts_t o = {.max_events = 1 << 16, .device = -1, .limits = lim};
    pl_replay_seq_t s;
    pl_torch_snapshot_info_t in;
    if (pl_torch_snapshot_read(data, size, "fuzz", &o, &s, &in, err, sizeof err) == 0) {
        char sum[2048];
        pl_torch_snapshot_summary(&in, &s, sum, sizeof sum);
        pl_replay_seq_free(&s);
    }
    return 0;
}
