/* reports/format: number formatting for text output (see format.h). Deterministic: goldens depend on it. */
#include "format.h"

#include <math.h>
#include <stdio.h>

char *pl_format_bytes(double bytes, char *buf, size_t size) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (!isfinite(bytes)) {
        snprintf(buf, size, "?");
        return buf;
    }
    double a = fabs(bytes);
    int u = 0;
    while (a >= 1024 && u < 5) {
        a /= 1024;
        u++;
    }
    const char *sign = bytes < 0 ? "-" : "";
    if (u == 0) snprintf(buf, size, "%s%.0f B", sign, a);
    else if (a >= 100) snprintf(buf, size, "%s%.0f %s", sign, a, units[u]);
    else if (a >= 10) snprintf(buf, size, "%s%.1f %s", sign, a, units[u]);
    else snprintf(buf, size, "%s%.2f %s", sign, a, units[u]);
    return buf;
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

void pl_format_json_str(FILE *o, const char *s) {
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", o);
        else if (*p == '\t') fputs("\\t", o);
        else if (*p < 0x20 || *p == 0x7f) fprintf(o, "\\u%04x", *p);
        else fputc(*p, o);
    }
    fputc('"', o);
}

void pl_format_json_num(FILE *o, double v) {
    if (isfinite(v)) fprintf(o, "%.10g", v);
    else fputs("null", o);
}
