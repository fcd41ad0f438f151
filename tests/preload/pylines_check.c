/* Helper of tests/preload/test_pylines.py: checks preload/pylines.c's decoders against lines computed by CPython
 * itself. stdin, one code object a line: FORMAT FIRSTLINENO HEXTABLE LASTI:LINE ... (FORMAT: lnotab, 310 or
 * locations; LASTI in code units; LINE -1 for "no line"). Prints "checked N" and every mismatch; exit 1 on any. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pylines.h"

static int hexval(int c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int main(void) {
    static char line[1 << 22];
    static uint8_t table[1 << 20];
    long checked = 0, bad = 0;
    while (fgets(line, sizeof line, stdin)) {
        char *save, *fmt = strtok_r(line, " \n", &save), *first_s = strtok_r(NULL, " \n", &save);
        char *hex = strtok_r(NULL, " \n", &save);
        if (!fmt || !first_s || !hex) continue;
        size_t n = strlen(hex) / 2;
        if (n > sizeof table) return 2;
        for (size_t i = 0; i < n; i++) table[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
        if (!strcmp(hex, "-")) n = 0;
        int first = atoi(first_s);
        for (char *c; (c = strtok_r(NULL, " \n", &save));) {
            const char *colon = strchr(c, ':');
            if (!colon) return 2;
            int lasti = atoi(c), want = atoi(colon + 1);
            int got = !strcmp(fmt, "lnotab") ? pl_pyframes_line_lnotab(table, n, first, lasti)
                      : !strcmp(fmt, "310")  ? pl_pyframes_line_310(table, n, first, lasti)
                                             : pl_pyframes_line(table, n, first, lasti);
            checked++;
            if (got != want && bad++ < 20)
                printf("mismatch: %s first %d lasti %d: got %d, CPython says %d\n", fmt, first, lasti, got, want);
        }
    }
    printf("checked %ld, %ld mismatches\n", checked, bad);
    return bad != 0;
}
