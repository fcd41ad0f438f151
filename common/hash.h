/* common/hash: the 64-bit hashes the stack tables key on. Header-only, pure, thread-safe.
 * pl_hash_mix64 is MurmurHash3's 64-bit finaliser (every input bit reaches every output bit); pl_hash_pcs folds a
 * stack's return addresses through it, so the writer's stack table (tracer/write/stack.c) and the report's native-stack
 * identity (reports/period.c) agree on what one stack is. */
#pragma once

#include <stdint.h>

static inline uint64_t pl_hash_mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* n frames pcs[0..n) (innermost first); the count is part of the key. */
static inline uint64_t pl_hash_pcs(const uint64_t *pcs, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = pl_hash_mix64(h ^ pcs[i]);
    return h;
}
