/* Target: what a program gets of its process's resources, printed so that a traced run can be compared with an
 * untraced one byte for byte (tests/cli/test_collector.sh). It allocates and steps first, so the tracer is at
 * work. Usage: limits tasks [N] | fds | threads
 *   tasks    start N threads (default 2) named worker-K, then print the number of entries in /proc/self/task and
 *            each thread's name, sorted
 *   fds      open /dev/null until open fails; print how many opened
 *   threads  start threads (each waits) until pthread_create fails, at most 4096; print how many started
 *   steps N  print its pid, then N steps (each leaks 4 KiB and prints "step K"), then wait to be killed */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

static void *wait_forever(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

static void work(void) {
    for (int s = 0; s < 5; s++) {
        void *volatile p = malloc(64 * 1024);
        (void)p;
        step();
        nanosleep(&(struct timespec){0, 40000000}, NULL); /* past the tracer's first sampling interval */
    }
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

static int tasks(int n) {
    for (int i = 0; i < n; i++) {
        pthread_t t;
        PL_CHECK(pthread_create(&t, NULL, wait_forever, NULL) == 0);
        char name[16];
        snprintf(name, sizeof name, "worker-%d", i % 100);
        pthread_setname_np(t, name);
    }
    work();
    static char names[256][32];
    int k = 0;
    DIR *d = opendir("/proc/self/task");
    PL_CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) && k < 256) {
        if (e->d_name[0] == '.') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(names[k], sizeof names[k], f)) names[k][0] = 0;
        fclose(f);
        k++;
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof names[0], cmp);
    printf("%d tasks\n", k);
    for (int i = 0; i < k; i++) printf("%s", names[i]);
    return 0;
}

static int fds(void) {
    work();
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("%d files opened (%s)\n", n, strerror(errno));
    return 0;
}

static int threads(void) {
    work();
    int n = 0, rc = 0;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 * 1024);
    while (n < 4096) {
        pthread_t t;
        if ((rc = pthread_create(&t, &a, wait_forever, NULL)) != 0) break;
        n++;
    }
    printf("%d threads started (%s)\n", n, rc ? strerror(rc) : "cap");
    return 0;
}

static int steps(int n) {
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    for (int k = 1; k <= n; k++) {
        void *volatile p = malloc(4096);
        (void)p;
        step();
        printf("step %d\n", k);
        fflush(stdout);
    }
    for (;;) pause();
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "tasks";
    if (!strcmp(mode, "tasks")) return tasks(arg_int(argc, argv, 2, 2));
    if (!strcmp(mode, "fds")) return fds();
    if (!strcmp(mode, "threads")) return threads();
    if (!strcmp(mode, "steps")) return steps(arg_int(argc, argv, 2, 60));
    fprintf(stderr, "usage: limits tasks [N] | fds | threads\n");
    return 2;
}
