/* Fuzz target: preload/buildid.c on arbitrary note bytes (a PT_NOTE segment as a loaded object maps it, which the
 * preload reads in every traced process). It must never read outside the buffer, and what it reports must be an
 * even number of lowercase hex digits, at most 128. The input is copied to a buffer of exactly its size at an odd
 * address, so ASan sees any overread and the reader any misalignment. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buildid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf + 1, data, size);
    char hex[129];
    memset(hex, 'x', sizeof hex);
    if (pl_buildid_from_notes(buf + 1, size, hex)) {
        size_t n = strnlen(hex, sizeof hex);
        if (n == sizeof hex || n % 2 || strspn(hex, "0123456789abcdef") != n) abort();
    }
    free(buf);
    return 0;
}
