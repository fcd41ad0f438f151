/* common/table: growing an open-addressing table of 64-bit keys with 32-bit values, kept as two parallel arrays
 * (keys[cap], vals[cap]; cap a power of two; linear probing from the slot home(key, cap) returns; `empty` marks a
 * free slot and is never a key). The tables' lookups stay in their owners, inline on their hot paths; only the cold
 * rehash is shared (reports/period.c's native-stack identities, tune/replay.c's live-address map). Not thread-safe
 * per table. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The slot a key's probe starts from, in [0, cap). */
typedef size_t (*pl_table_home_fn)(uint64_t key, size_t cap);

/* Doubles *cap (first_cap when 0), moving every key and its value to its place in new arrays, in slot order, and
 * frees the old ones. 0, or -ENOMEM with the table unchanged. */
int pl_table_grow(uint64_t **keys, uint32_t **vals, size_t *cap, size_t first_cap, uint64_t empty,
                  pl_table_home_fn home);
