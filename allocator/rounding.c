/* allocator/rounding.c: request rounding, pool choice and segment sizes (PyTorch's rules).
 *
 * Requests round up to 512 B; with roundup_power2_divisions, a size in [2^i, 2^(i+1)) larger than
 * 512 B x divisions rounds up to the next of `divisions` equal steps of that interval (a power of two
 * is kept as is). Rounded sizes <= 1 MiB go to the small pool (2 MiB segments); larger ones to the large
 * pool (20 MiB segments below 10 MiB, else the size rounded to 2 MiB).
 */
#include "config.h"

#include <stdint.h>

#include "internal.h"

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

size_t pl_rounding_round_slow(const pl_alloc_config_t *cfg, size_t size) {
    if (size < PL_MIN_BLOCK) return PL_MIN_BLOCK;
    if (size > SIZE_MAX - PL_ROUND_LARGE) return SIZE_MAX; /* cannot be satisfied; callers fail it */
    unsigned log = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    size_t divisions = cfg->roundup_power2_divisions[log];
    if (divisions > 1 && size > PL_MIN_BLOCK * divisions) {
        size_t floor2 = (size_t)1 << log;
        if (size == floor2) return size;
        size_t step = floor2 / divisions; /* divisions is a power of two */
        if (step == 0) return floor2 << 1;
        size_t r = size & ~(step - 1);
        r = r == size ? size : r + step;
        return round_up(r, PL_MIN_BLOCK);
    }
    return round_up(size, PL_MIN_BLOCK);
}

size_t pl_rounding_segment_size(size_t rounded) {
    if (rounded <= PL_SMALL_SIZE) return PL_SMALL_BUFFER;
    if (rounded < PL_MIN_LARGE_ALLOC) return PL_LARGE_BUFFER;
    return round_up(rounded, PL_ROUND_LARGE);
}

