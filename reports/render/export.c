/* reports/export: helpers the exporters share (export.h): strings from a trace made valid UTF-8, which JSON,
 * CSV readers and pickle's str all require (a label cut at 63 bytes by the tracer can end inside a character). */
#include "export.h"

#include <string.h>

/* length of the valid UTF-8 sequence at p (1..4), 0 when p does not start one (overlong forms, surrogates and
 * code points past U+10FFFF are not valid) */
static size_t utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (!n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) return 0;
    if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))) return 0;
    return n;
}

char *pl_export_utf8(const char *s, char *buf, size_t size) {
    if (!size) return buf;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        size_t n = utf8_len(p);
        const char *src = n ? (const char *)p : "\xef\xbf\xbd";
        size_t w = n ? n : 3;
        if (o + w >= size) break;
        memcpy(buf + o, src, w);
        o += w;
        p += n ? n : 1;
    }
    buf[o] = 0;
    return buf;
}
