/* A program that looks at itself the ways a program can notice a tracer, one mode per way, and prints what it sees.
 * tests/cli/test_unnoticed.py runs every mode untraced and under `plateau run` and compares the bytes (stdout,
 * stderr, exit status, files written): the program never notices plateau. Each mode also allocates, so the tracer
 * has something to record while it looks.
 * usage: target_unnoticed MODE [ARGS]   (modes: see main) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target.h"

extern char **environ;

static void churn(int n) {
    for (int i = 0; i < n; i++) {
        void *p = malloc(1000 + (size_t)i * 37);
        PL_CHECK(p);
        memset(p, i, 100);
        free(p);
    }
}

/* threads: workers compute and allocate; the sums are printed in order */
static void *worker(void *arg) {
    intptr_t k = (intptr_t)arg;
    uint64_t sum = 0;
    for (int i = 0; i < 2000; i++) {
        unsigned char *p = malloc(64 + (size_t)(i % 50) * 64);
        PL_CHECK(p);
        p[0] = (unsigned char)(i + k);
        sum += p[0];
        free(p);
    }
    return (void *)(uintptr_t)sum;
}

static int mode_threads(void) {
    pthread_t t[8];
    for (intptr_t i = 0; i < 8; i++) PL_CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        printf("thread %d: %lu\n", i, (unsigned long)(uintptr_t)r);
    }
    return 0;
}

/* tasks: the threads the process has (/proc/self/task), as the kernel, `ps -L` and CPython's fork warning count them */
static int count_tasks(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static int mode_tasks(void) {
    churn(5000);
    printf("tasks: %d\n", count_tasks());
    return 0;
}

/* fds: the open descriptors, as /proc/self/fd lists them (the directory's own descriptor left out), and how many
 * files can be opened under the current RLIMIT_NOFILE */
static int mode_fds(void) {
    churn(5000);
    DIR *d = opendir("/proc/self/fd");
    PL_CHECK(d);
    int self = dirfd(d);
    printf("fds:");
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && atoi(e->d_name) != self) printf(" %s", e->d_name);
    printf("\n");
    closedir(d);
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("opened until %s: %d\n", strerror(errno), n);
    return 0;
}

/* fork: children write to a pipe and exit with their own status */
static int mode_fork(void) {
    int p[2];
    PL_CHECK(pipe(p) == 0);
    for (int i = 0; i < 5; i++) {
        pid_t pid = fork();
        PL_CHECK(pid >= 0);
        if (pid == 0) {
            churn(1000);
            char line[32];
            int n = snprintf(line, sizeof line, "child %d\n", i);
            (void)!write(p[1], line, (size_t)n);
            _exit(10 + i);
        }
        int st;
        waitpid(pid, &st, 0);
        printf("child %d exited %d\n", i, WEXITSTATUS(st));
    }
    close(p[1]);
    char buf[256];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, stdout);
    return 0;
}

/* exec_env: a child exec'd with an explicit environment sees exactly it (env prints it) */
static int mode_exec_env(void) {
    churn(1000);
    fflush(stdout);
    char *argv[] = {"env", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", "X=1", NULL};
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        execve("/usr/bin/env", argv, envp);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("env exited %d\n", WEXITSTATUS(st));
    return 0;
}

/* environ: the program's whole environment, entry by entry, as its own `environ` holds it */
static int mode_environ(void) {
    churn(1000);
    for (char **e = environ; *e; e++) printf("%s\n", *e);
    printf("getenv LD_PRELOAD=%s PYTHONPATH=%s\n", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)",
           getenv("PYTHONPATH") ? getenv("PYTHONPATH") : "(unset)");
    return 0;
}

/* stack: the process's initial stack as the kernel laid it out (argv, envp, auxv), which some runtimes walk
 * themselves (Go's finds its page size there): past envp's NULL lie the auxiliary vector's pairs, AT_PAGESZ among
 * them with the page size getauxval and sysconf report. */
static int mode_stack(char **argv) {
    char **p = argv;
    while (*p) p++;                       /* argv's NULL */
    for (p++; *p; p++) {                  /* envp's entries, up to its NULL */
    }
    const unsigned long *av = (const unsigned long *)(p + 1);
    long pagesz = -1;
    int n = 0;
    for (; av[0] != AT_NULL && n < 256; av += 2, n++)
        if (av[0] == AT_PAGESZ) pagesz = (long)av[1];
    printf("auxv after envp: AT_PAGESZ %s\n", pagesz == sysconf(_SC_PAGESIZE) &&
           (unsigned long)pagesz == getauxval(AT_PAGESZ) ? "found, the page size" : "MISSING or wrong");
    return 0;
}

/* The pid of a child that must be traced, for the test to find its trace (pids.txt is not compared). */
static void note_pid(long pid) {
    FILE *f = fopen("pids.txt", "a");
    if (!f) return;
    fprintf(f, "%ld\n", pid);
    fclose(f);
}

static void wait_child(const char *how, pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    note_pid(pid);
    printf("%s: exited %d\n", how, WEXITSTATUS(st));
    fflush(stdout);
}

/* spawn_env: /usr/bin/env started every way a program starts a child with the inherited environment, or one derived
 * from it (environ plus X=1), prints the environment it was given: execv, execvp, execle, posix_spawn,
 * posix_spawnp, system, popen. Each child's own output, status and pid (pids.txt: each must be traced). */
static int mode_spawn_env(void) {
    churn(1000);
    char *argv[] = {"env", NULL};
    size_t n = 0;
    while (environ[n]) n++;
    char **derived = malloc((n + 2) * sizeof *derived);
    PL_CHECK(derived);
    memcpy(derived, environ, n * sizeof *derived);
    derived[n] = "X=1";
    derived[n + 1] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        execv("/usr/bin/env", argv);
        _exit(127);
    }
    wait_child("execv", pid);
    pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        execvp("env", argv);
        _exit(127);
    }
    wait_child("execvp", pid);
    pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        execle("/usr/bin/env", "env", (char *)NULL, derived);
        _exit(127);
    }
    wait_child("execle derived", pid);
    PL_CHECK(posix_spawn(&pid, "/usr/bin/env", NULL, NULL, argv, environ) == 0);
    wait_child("posix_spawn", pid);
    PL_CHECK(posix_spawnp(&pid, "env", NULL, NULL, argv, derived) == 0);
    wait_child("posix_spawnp derived", pid);
    int st = system("echo $$ >>pids.txt; /usr/bin/env");
    printf("system: %d\n", st);
    /* glibc's system(): sh -c -- LINE, 127 when the shell cannot run the command, its exit status, system(NULL) */
    printf("system argv: %d\n", system("tr '\\0' ' ' </proc/$$/cmdline; echo"));
    printf("system exit 3: %d, NULL: %d\n", system("exit 3"), system(NULL));
    fflush(stdout);
    FILE *f = popen("echo $$ >>pids.txt; /usr/bin/env", "r");
    PL_CHECK(f);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, got, stdout);
    printf("popen: %d\n", pclose(f));
    free(derived);
    return 0;
}

/* exec_inherit: a child exec'd with the inherited environment (its output, not the environment, is compared) */
static int mode_exec_inherit(const char *self) {
    churn(1000);
    fflush(stdout);
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, self, "threads", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child exited %d\n", WEXITSTATUS(st));
    return 0;
}

/* stderr_capture: a parent reads its child's stderr and stdout through pipes and prints what it got, escaped */
static int mode_stderr_capture(const char *self) {
    int p[2];
    PL_CHECK(pipe(p) == 0);
    fflush(stdout);
    pid_t pid = fork();
    PL_CHECK(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(self, self, "noisy", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(p[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)n;
    int st;
    waitpid(pid, &st, 0);
    printf("captured %zu bytes, status %d:\n", len, WEXITSTATUS(st));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n' || (c >= 32 && c < 127)) putchar(c);
        else printf("\\x%02x", c);
    }
    return 0;
}

static int mode_noisy(void) {
    for (int i = 0; i < 3; i++) {
        churn(500);
        printf("out %d\n", i);
        fflush(stdout);
        fprintf(stderr, "err %d\n", i);
    }
    return 0;
}

/* signals: every signal's disposition and the blocked mask, a handled SIGUSR1, a SIGALRM */
static volatile sig_atomic_t got;
static void on_sig(int s) { got = s; }

static int mode_signals(void) {
    churn(2000);
    sigset_t blocked;
    sigprocmask(SIG_BLOCK, NULL, &blocked);
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) != 0) continue;
        const char *what = sa.sa_handler == SIG_DFL ? "default" : sa.sa_handler == SIG_IGN ? "ignored" : "handled";
        if (sa.sa_handler != SIG_DFL || sigismember(&blocked, s) == 1)
            printf("signal %d: %s%s\n", s, what, sigismember(&blocked, s) == 1 ? ", blocked" : "");
    }
    signal(SIGUSR1, on_sig);
    raise(SIGUSR1);
    printf("got %d\n", (int)got);
    signal(SIGALRM, on_sig);
    alarm(1);
    pause();
    printf("got %d\n", (int)got);
    return 0;
}

/* limits: every resource limit as the program sees it */
static int mode_limits(void) {
    churn(1000);
    static const struct { int r; const char *name; } lim[] = {
        {RLIMIT_AS, "as"}, {RLIMIT_CORE, "core"}, {RLIMIT_CPU, "cpu"}, {RLIMIT_DATA, "data"},
        {RLIMIT_FSIZE, "fsize"}, {RLIMIT_MEMLOCK, "memlock"}, {RLIMIT_NOFILE, "nofile"}, {RLIMIT_NPROC, "nproc"},
        {RLIMIT_STACK, "stack"},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        struct rlimit rl;
        getrlimit(lim[i].r, &rl);
        printf("%s: %llu %llu\n", lim[i].name, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    }
    return 0;
}

/* files: writes through several descriptors (dup2 onto low numbers, O_APPEND, a closed and reused number) into
 * the working directory, which the test compares */
static int mode_files(void) {
    int a = open("a.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    PL_CHECK(a >= 0);
    for (int i = 0; i < 200; i++) {
        churn(20);
        dprintf(a, "line %d\n", i);
    }
    PL_CHECK(dup2(a, 9) == 9);
    close(a);
    dprintf(9, "through 9\n");
    close(9);
    int b = open("b.txt", O_WRONLY | O_CREAT | O_APPEND, 0644);
    PL_CHECK(b >= 0);
    for (int i = 0; i < 50; i++) dprintf(b, "append %d\n", i);
    close(b);
    printf("done\n");
    return 0;
}

/* exit: an exit status of its own, or death by a signal */
static int mode_exit(const char *how) {
    churn(1000);
    printf("exiting %s\n", how);
    fflush(stdout);
    if (strcmp(how, "signal") == 0) {
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
    }
    return atoi(how);
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "threads")) return mode_threads();
    if (!strcmp(m, "tasks")) return mode_tasks();
    if (!strcmp(m, "fds")) return mode_fds();
    if (!strcmp(m, "fork")) return mode_fork();
    if (!strcmp(m, "exec_env")) return mode_exec_env();
    if (!strcmp(m, "exec_inherit")) return mode_exec_inherit(argv[0]);
    if (!strcmp(m, "environ")) return mode_environ();
    if (!strcmp(m, "stack")) return mode_stack(argv);
    if (!strcmp(m, "spawn_env")) return mode_spawn_env();
    if (!strcmp(m, "stderr_capture")) return mode_stderr_capture(argv[0]);
    if (!strcmp(m, "noisy")) return mode_noisy();
    if (!strcmp(m, "signals")) return mode_signals();
    if (!strcmp(m, "limits")) return mode_limits();
    if (!strcmp(m, "files")) return mode_files();
    if (!strcmp(m, "exit")) return mode_exit(argc > 2 ? argv[2] : "0");
    fprintf(stderr, "usage: %s MODE\n", argv[0]);
    return 2;
}
