/* Fuzz target: the size grammar (common/units.c). Properties: no crash, no UB, no read past the NUL; the answer
 * agrees with a second, wider reading (128-bit digits, then the unit) on accept, on -ERANGE and on -EINVAL; every
 * accepted size formats in every style into any buffer length without overrunning it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* -EINVAL, -ERANGE or 0 with *out, read the slow way */
static int reference(const char *s, uint64_t *out) {
    static const char *unit[] = {"", "b", "k", "kib", "kb", "m", "mib", "mb", "g", "gib", "gb", "t", "tib", "tb"};
    static const unsigned __int128 mul[] = {1, 1, 1024, 1024, 1000, 1 << 20, 1 << 20, 1000000, 1 << 30, 1 << 30,
                                            1000000000, (unsigned __int128)1 << 40, (unsigned __int128)1 << 40,
                                            1000000000000ull};
    size_t n = strspn(s, "0123456789");
    if (n == 0) return -EINVAL;
    unsigned __int128 v = 0;
    int big = 0;
    for (size_t i = 0; i < n; i++) {
        v = v * 10 + (unsigned)(s[i] - '0');
        if (v > UINT64_MAX) big = 1, v = (unsigned __int128)UINT64_MAX + 1; /* stays above the limit */
    }
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        if (strcasecmp(s + n, unit[i])) continue;
        if (big || v * mul[i] > UINT64_MAX) return -ERANGE;
        *out = (uint64_t)(v * mul[i]);
        return 0;
    }
    return -EINVAL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64) return 0;
    char s[65];
    memcpy(s, data, size);
    s[size] = 0;
    uint64_t got = 7, want = 7;
    int rc = pl_units_parse(s, &got), rc_ref = reference(s, &want);
    if (rc != rc_ref || got != want) abort();
    if (rc) return 0;
    for (int style = PL_UNITS_SIG3; style <= PL_UNITS_TORCH; style++) {
        char buf[48];
        size_t len = size % sizeof buf;
        memset(buf, 'x', sizeof buf);
        pl_units_format((double)got, (pl_units_style_t)style, buf, len);
        if (len < sizeof buf && buf[len] != 'x') abort();
        if (len && !memchr(buf, 0, len)) abort();
    }
    return 0;
}
