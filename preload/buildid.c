/* Build-id note reader (buildid.h). Notes are (namesz, descsz, type) headers followed by the name and the
 * descriptor, each padded to 4 bytes (the ELF64 note layout Linux uses for both classes). The header is copied out,
 * so a caller's buffer need not be aligned. */
#include "buildid.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

int pl_buildid_from_notes(const void *notes, size_t n, char hex[129]) {
    const uint8_t *p = notes, *end = p + n;
    while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr h;
        memcpy(&h, p, sizeof h);
        size_t name_sz = (h.n_namesz + 3u) & ~3u, desc_sz = (h.n_descsz + 3u) & ~3u;
        const uint8_t *name = p + sizeof h;
        if (name_sz > (size_t)(end - name)) break;
        const uint8_t *desc = name + name_sz;
        if (desc_sz > (size_t)(end - desc)) break;
        if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && !memcmp(name, "GNU", 4) && h.n_descsz <= 64) {
            static const char digits[] = "0123456789abcdef";
            for (uint32_t k = 0; k < h.n_descsz; k++) {
                hex[2 * k] = digits[desc[k] >> 4];
                hex[2 * k + 1] = digits[desc[k] & 15];
            }
            hex[2 * h.n_descsz] = 0;
            return 1;
        }
        p = desc + desc_sz;
    }
    return 0;
}
