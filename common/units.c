/* common/units: see units.h. Deterministic: report, tune and demo outputs print through it. */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

/* ASCII case-insensitive equality. Not strcasecmp, which reads the locale: the preload parses its options in
 * its constructor, before the program has set one, and a size means the same thing in every locale. */
static bool unit_is(const char *s, const char *unit) {
    for (; *s && *unit; s++, unit++) {
        unsigned char a = (unsigned char)*s, b = (unsigned char)*unit;
        if ((a >= 'A' && a <= 'Z' ? a | 0x20 : a) != (b >= 'A' && b <= 'Z' ? b | 0x20 : b)) return false;
    }
    return !*s && !*unit;
}

int pl_units_parse(const char *text, uint64_t *out) {
    if (!text || *text < '0' || *text > '9') return -EINVAL;
    const char *p = text;
    uint64_t v = 0;
    bool too_big = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) too_big = true;
        else v = v * 10 + d;
    }
    static const struct {
        const char *unit;
        uint64_t mul;
    } units[] = {
        {"", 1},           {"B", 1},
        {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1000ull},
        {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1000000ull},
        {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1000000000ull},
        {"T", 1ull << 40}, {"TiB", 1ull << 40}, {"TB", 1000000000000ull},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!unit_is(p, units[i].unit)) continue;
        if (too_big || v > UINT64_MAX / units[i].mul) return -ERANGE;
        *out = v * units[i].mul;
        return 0;
    }
    return -EINVAL;
}

char *pl_units_format(double bytes, pl_units_style_t style, char *buf, size_t size) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (style == PL_UNITS_SIG3 && !isfinite(bytes)) {
        snprintf(buf, size, "?");
        return buf;
    }
    int max_unit = style == PL_UNITS_SIG3 ? 5 : 4;
    double a = fabs(bytes);
    int u = 0;
    while (a >= 1024.0 && u < max_unit) {
        a /= 1024.0;
        u++;
    }
    const char *sign = bytes < 0 ? "-" : "";
    switch (style) {
    case PL_UNITS_SIG3:
        if (u == 0) snprintf(buf, size, "%s%.0f B", sign, a);
        else snprintf(buf, size, "%s%.*f %s", sign, a >= 100 ? 0 : a >= 10 ? 1 : 2, a, units[u]);
        break;
    case PL_UNITS_TENTHS:
        if (u == 0) snprintf(buf, size, "%.0f B", bytes);
        else snprintf(buf, size, "%s%.*f %s", sign, a < 10 ? 2 : 1, a, units[u]);
        break;
    case PL_UNITS_FIXED2:
        if (u == 0) snprintf(buf, size, "%.0f B", bytes);
        else snprintf(buf, size, "%s%.2f %s", sign, a, units[u]);
        break;
    case PL_UNITS_TORCH:
        if (u == 0) snprintf(buf, size, "%.0f bytes", bytes);
        else snprintf(buf, size, "%s%.2f %s", sign, a, units[u]);
        break;
    }
    return buf;
}
