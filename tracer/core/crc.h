/* CRC-32C (Castagnoli) over byte ranges: the checksum of trace headers and chunks. Pure and thread-safe. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC-32C: start with crc = 0. */
uint32_t pl_crc_update(uint32_t crc, const void *data, size_t len);

/* The same function through the portable slicing-by-8 path, whatever the CPU offers (for tests comparing the two
 * implementations). */
uint32_t pl_crc_update_portable(uint32_t crc, const void *data, size_t len);
