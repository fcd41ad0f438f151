/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78, initial and final complement), used for the trace header
 * and every chunk. The writer checksums each chunk once; the report checksums every byte of every trace it reads,
 * so this is on the ingest path (bench/ingest_bench.sh: the byte-wise table took ~45 % of `plateau report`).
 * Two implementations of the same function, chosen once:
 *  - x86-64 with SSE4.2: the crc32 instruction, which computes exactly this CRC (Castagnoli, reflected), 8 bytes
 *    per instruction;
 *  - anywhere else: slicing-by-8, eight 256-word tables built once (table k = the CRC of a byte followed by k zero
 *    bytes), 8 bytes per step.
 * Both agree with the bit-at-a-time definition on every length and alignment (tests/tracer/test_crc.c).
 * Thread-safe: the tables and the choice are set up under pthread_once; no other state. */
#include "crc.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static uint32_t (*crc_raw)(uint32_t crc, const uint8_t *p, size_t len); /* crc not complemented */

/* Slicing-by-8: fold 8 bytes at a time (the first 4 XORed into the running CRC). Little-endian loads, like the
 * rest of the trace code. */
static uint32_t crc_sliced(uint32_t crc, const uint8_t *p, size_t len) {
    for (; len && ((uintptr_t)p & 7); len--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    for (; len >= 8; len -= 8, p += 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
              table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
    }
    for (; len; len--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t len) {
    for (; len && ((uintptr_t)p & 7); len--) crc = _mm_crc32_u8(crc, *p++);
    uint64_t c = crc;
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
    }
    crc = (uint32_t)c;
    for (; len; len--) crc = _mm_crc32_u8(crc, *p++);
    return crc;
}

static bool have_sse42(void) {
    __builtin_cpu_init(); /* needed when called before libgcc's constructor (the preload's early calls) */
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t len) { return crc_sliced(crc, p, len); }
static bool have_sse42(void) { return false; }
#endif

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++) table[k][i] = table[0][table[k - 1][i] & 0xff] ^ (table[k - 1][i] >> 8);
    crc_raw = have_sse42() ? crc_sse42 : crc_sliced;
}

uint32_t pl_crc_update(uint32_t crc, const void *data, size_t len) {
    pthread_once(&table_once, table_init);
    return ~crc_raw(~crc, data, len);
}

uint32_t pl_crc_update_portable(uint32_t crc, const void *data, size_t len) {
    pthread_once(&table_once, table_init);
    return ~crc_sliced(~crc, data, len);
}
