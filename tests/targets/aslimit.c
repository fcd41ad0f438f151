/* Allocates and touches MIB mebibytes in 1 MiB blocks, then frees them: run under an address-space limit
 * (RLIMIT_AS) that leaves room for the program alone, it must succeed traced as it does untraced.
 *   aslimit MIB     exit 0 when every block was allocated, 1 otherwise (how far it got on stderr) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n <= 0 || n > 4096) return 2;
    void **blocks = calloc((size_t)n, sizeof *blocks);
    if (!blocks) return 1;
    for (int i = 0; i < n; i++) {
        blocks[i] = malloc(1 << 20);
        if (!blocks[i]) {
            fprintf(stderr, "aslimit: out of address space after %d MiB\n", i);
            return 1;
        }
        memset(blocks[i], i, 1 << 20);
    }
    for (int i = 0; i < n; i++) free(blocks[i]);
    free(blocks);
    printf("allocated %d MiB\n", n);
    return 0;
}
