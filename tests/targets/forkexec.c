/* Target: fork + exec. The parent allocates and steps; a forked child allocates, steps, then execs this
 * program again with "exec" (the new image allocates and steps); the parent waits. Usage: forkexec [clearenv|scrubenv];
 * with clearenv the child execs with an empty environment, with scrubenv with its environment less LD_PRELOAD and
 * PLATEAU_RUN_ID (the tracer puts plateau's variables back either way: the new image is traced). */
#include <sys/wait.h>
#include <unistd.h>

#include "target.h"

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "exec")) {
        void *p = malloc(3000);
        step();
        free(p);
        return 0;
    }
    void *a = malloc(1000);
    step();
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        void *b = malloc(2000);
        step();
        free(b);
        if (argc > 1 && !strcmp(argv[1], "clearenv")) {
            char *args[] = {argv[0], "exec", NULL}, *env[] = {NULL};
            execve("/proc/self/exe", args, env);
        }
        if (argc > 1 && !strcmp(argv[1], "scrubenv")) {
            extern char **environ;
            char *args[] = {argv[0], "exec", NULL}, *env[256];
            size_t n = 0;
            for (char **e = environ; *e && n < 255; e++)
                if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "PLATEAU_RUN_ID=", 15)) env[n++] = *e;
            env[n] = NULL;
            execve("/proc/self/exe", args, env);
        }
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(126);
    }
    int st;
    PL_CHECK(waitpid(pid, &st, 0) == pid);
    PL_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(a);
    step();
    return 0;
}
