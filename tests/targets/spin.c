/* Target: runs until killed, allocating and stepping every 5 ms (for the SIGKILL test). Prints "ready"
 * after STEPS_READY steps. Usage: spin [STEPS_READY=20]. */
#include <time.h>
#include <unistd.h>

#include "target.h"

int main(int argc, char **argv) {
    int ready = arg_int(argc, argv, 1, 20);
    for (long s = 0;; s++) {
        void *p = malloc(1024);
        PL_CHECK(p);
        if (s % 2) free(p);
        step();
        if (s == ready) {
            printf("ready\n");
            fflush(stdout);
        }
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
}
