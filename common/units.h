/* common/units: the one size grammar every flag, environment variable and option string reads, and the byte
 * formatters the outputs print. Pure functions over caller buffers; thread-safe; no allocation. pl_units_parse
 * calls nothing (no locale: ASCII case folding), so the preload's constructor reads its sizes with it too.
 *
 * Grammar (pl_units_parse): decimal digits, then an optional unit, case-insensitive, with nothing around them:
 *   (none), B                 bytes
 *   K, KiB  M, MiB  G, GiB  T, TiB      powers of 1024
 *   KB  MB  GB  TB                       powers of 1000 (as disks and the SI count)
 * So `512K`, `512kib`, `1G`, `1GiB` and `1GB` (10^9) are sizes; `-1`, `1.5G`, ` 1G`, `1 G`, `1X`, `G` are not.
 * This is the union of the grammars plateau read before (--sample-bytes, PLATEAU_SAMPLE_BYTES, --capacity,
 * PLATEAU_SIM_DEVICE): every string one of them accepted keeps its meaning (tests/preload/test_options.c checks
 * the preload's old grammar against it). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* text as a byte count into *out. 0, or -EINVAL (not a size) / -ERANGE (more than UINT64_MAX bytes); *out is
 * written only on success. */
int pl_units_parse(const char *text, uint64_t *out);

/* How a byte count prints. Each output keeps the style it always had (goldens depend on them):
 *   PL_UNITS_SIG3    reports: 3 significant digits, B..PiB ("512 B", "1.50 KiB", "17.0 GiB", "200 MiB", "-4.20 MiB");
 *                    "?" for NaN and infinities
 *   PL_UNITS_TENTHS  plateau tune / replay: two decimals below 10, else one, B..TiB ("3.10 GiB", "200.0 MiB")
 *   PL_UNITS_FIXED2  plateau-alloc-demo: two decimals, B..TiB ("1.00 KiB", "512 B")
 *   PL_UNITS_TORCH   the allocator's OOM message, as PyTorch words it: two decimals, "N bytes" below 1 KiB */
typedef enum { PL_UNITS_SIG3, PL_UNITS_TENTHS, PL_UNITS_FIXED2, PL_UNITS_TORCH } pl_units_style_t;

/* bytes in style into buf (NUL-terminated, cut to size); returns buf. */
char *pl_units_format(double bytes, pl_units_style_t style, char *buf, size_t size);
