/* Target: exit while threads are still allocating. Starts THREADS threads that malloc/free in a loop
 * forever, steps a few times, then returns from main (exit runs the tracer's destructor while they run).
 * Usage: threads [THREADS=4]. */
#include <pthread.h>
#include <time.h>

#include "target.h"

static void *churn(void *arg) {
    (void)arg;
    for (unsigned i = 0;; i++) {
        void *volatile p = malloc(16 + i % 4096);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = arg_int(argc, argv, 1, 4);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        PL_CHECK(pthread_create(&t, NULL, churn, NULL) == 0);
        pthread_detach(t);
    }
    for (int s = 0; s < 5; s++) {
        nanosleep(&(struct timespec){0, 30000000}, NULL);
        step();
    }
    return 0;
}
