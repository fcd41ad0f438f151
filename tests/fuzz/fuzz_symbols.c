/* Fuzz target: reports/ingest/symbols.c on arbitrary module files. The input is written to a scratch file which is then
 * opened as a module and looked up at a spread of offsets: the ELF reader must never read out of bounds, crash or
 * hang whatever the headers, section table, symbol table or notes say, and a name it returns must be a string.
 * Seeded with a small real shared object (fuzz_symbols_seed.c) so mutations start from valid ELF structure. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    static int fd = -1;
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/pl-fuzz-symbols-%d", (int)getpid());
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return 0;
        unlink(path); /* gone when the process ends; reopened by name below through /proc */
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    uint64_t seed = size * 0x9e3779b97f4a7c15ull;
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) return 0;
    pl_symbols_t *s = pl_symbols_new();
    if (!s) return 0;
    pl_sym_module_t m = {path, "", UINT64_MAX, 0};
    size_t sum = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t off = (seed >> (i % 48)) + (uint64_t)i * 0x40;
        const char *name = NULL;
        uint64_t so = 0;
        if (pl_symbols_lookup(s, &m, off, &name, &so) == PL_SYM_OK) {
            if (!name) __builtin_trap();
            sum += strlen(name);
        }
    }
    pl_symbols_free(s);
    return (int)(sum & 0);
}
