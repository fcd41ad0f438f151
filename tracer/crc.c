/* CRC-32C, table driven (one table of 256 words built once). Used for the trace header and every chunk;
 * speed is secondary (a chunk is checksummed once, by the writer thread). */
#include "crc.h"

#include <pthread.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
}

uint32_t pl_crc_update(uint32_t crc, const void *data, size_t len) {
    pthread_once(&table_once, table_init);
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
