/* common/format: number formatting for text output (see format.h). Deterministic: goldens depend on it. */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

char *pl_format_bytes(double bytes, char *buf, size_t size) {
    return pl_units_format(bytes, PL_UNITS_SIG3, buf, size);
}

char *pl_format_value(double v, bool is_bytes, char *buf, size_t size) {
    if (is_bytes) return pl_format_bytes(v, buf, size);
    if (!isfinite(v)) snprintf(buf, size, "?");
    else if (fabs(v) >= 100 || v == floor(v)) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%.3g", v);
    return buf;
}

char *pl_format_duration(double s, char *buf, size_t size) {
    if (!isfinite(s) || s < 0) snprintf(buf, size, "?");
    else if (s < 120) snprintf(buf, size, "%.0f s", s);
    else if (s < 7200) snprintf(buf, size, "%.0f min", s / 60);
    else if (s < 172800) snprintf(buf, size, "%.1f h", s / 3600);
    else snprintf(buf, size, "%.1f d", s / 86400);
    return buf;
}

/* Length of the valid, harmless UTF-8 sequence at p (1 for printable ASCII), 0 when its bytes must be escaped. */
static size_t safe_char(const unsigned char *p) {
    unsigned c = p[0];
    if (c >= 0x20 && c < 0x7f) return c == '\\' ? 0 : 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    if (c == 0xc2 && p[1] <= 0x9f) return 0;                                    /* C1 controls */
    if (c == 0xe2 && p[1] == 0x80 && p[2] >= 0xaa && p[2] <= 0xae) return 0;    /* U+202A..U+202E */
    if (c == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9) return 0;    /* U+2066..U+2069 */
    return n;
}

/* The escaped form of the character at p into tmp (at most 16 bytes); *n gets the input bytes it covers. */
static size_t escape_one(const unsigned char *p, char tmp[16], size_t *n) {
    *n = safe_char(p);
    if (*n) {
        memcpy(tmp, p, *n);
        return *n;
    }
    *n = 1;
    if (*p == '\n') return (size_t)snprintf(tmp, 16, "\\n");
    if (*p == '\t') return (size_t)snprintf(tmp, 16, "\\t");
    if (*p == '\r') return (size_t)snprintf(tmp, 16, "\\r");
    if (*p == '\\') return (size_t)snprintf(tmp, 16, "\\\\");
    return (size_t)snprintf(tmp, 16, "\\x%02x", *p);
}

char *pl_format_escape(const char *s, char *buf, size_t size) {
    if (!size) return buf;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    char tmp[16];
    size_t total = 0, n;
    for (const unsigned char *q = p; *q; q += n) total += escape_one(q, tmp, &n);
    size_t room = total < size ? size : size > 3 ? size - 3 : 0; /* when cut: "..." at the end */
    size_t o = 0;
    for (; *p; p += n) {
        size_t len = escape_one(p, tmp, &n);
        if (o + len + 1 > room) break;
        memcpy(buf + o, tmp, len);
        o += len;
    }
    if (total >= size) snprintf(buf + o, size - o, "...");
    else buf[o] = 0;
    return buf;
}

const char *pl_format_esc(const char *s) {
    static _Thread_local char ring[8][16384];
    static _Thread_local unsigned next;
    char *b = ring[next++ % 8];
    return pl_format_escape(s, b, sizeof ring[0]);
}
