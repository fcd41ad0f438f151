/* Two unrelated failures the preload warns about, each hit twice: the sampled-pointer table cannot be mapped (the
 * address space is lowered under it after start) and an allocator is announced while libplateau_alloc is not
 * loaded. Each warning must appear once (test_preload.c, test_preload_each_warning_said_once). Run with
 * PLATEAU_SAMPLE_BYTES=0 so the first allocation after the limit is sampled. Exit 0, or 2 on a setup failure. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int main(void) {
    /* No allocation before the limit (stdio would allocate, and be sampled, mapping the table): open and read. */
    char buf[64] = "";
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0) return 2;
    close(fd);
    unsigned long pages = strtoul(buf, NULL, 10);
    void *obs = dlsym(RTLD_DEFAULT, "plateau_alloc_observer");
    if (!obs) return 2;
    void (*observer)(void *, bool);
    *(void **)&observer = obs;
    /* 8 MiB above what is mapped now: less than the table's 2 x 16 MiB, enough for the program. */
    struct rlimit rl = {pages * (unsigned long)sysconf(_SC_PAGESIZE) + (8ul << 20), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &rl) != 0) return 2;
    for (int i = 0; i < 2; i++) {
        void *volatile p = malloc(1000);
        free(p);
    }
    observer(NULL, true);
    observer(NULL, true);
    puts("done");
    return 0;
}
