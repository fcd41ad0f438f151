/* exec, spawn and _exit. A new image (exec, posix_spawn, system, popen) is handed its parent's environment with
 * plateau's variables put back (env.c: the program's own environment never shows them, and the new image's preload
 * takes them out again), so every exec'd child is traced into the same run and sees exactly the environment it was
 * given (docs/env.md, "Following children"). The exec family also records the exec and flushes. _exit writes the
 * final records and flushes. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload.h"

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

static void next_sym(void *fn_ptr_out, const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    memcpy(fn_ptr_out, &p, sizeof p);
}

/* CHILD_ENV(envp, env2): env2 is envp with plateau's variables put back (pl_env_child), on this stack frame: no
 * allocation, so vfork children can use it; envp itself when there is nothing to put back. */
#define CHILD_ENV(envp, env2)                                                                                   \
    size_t env2##_n = 1, env2##_bytes = 1;                                                                      \
    bool env2##_own = pl_env_child_size((envp), &env2##_n, &env2##_bytes) == 0;                                \
    char env2##_buf[env2##_bytes];                                                                              \
    char *env2##_arr[env2##_n];                                                                                 \
    char *const *env2 = (envp);                                                                                 \
    if (env2##_own) {                                                                                           \
        pl_env_child((envp), env2##_arr, env2##_buf);                                                           \
        env2 = env2##_arr;                                                                                      \
    }

/* Record the exec and flush: exec ends this image without running destructors. */
static void before_exec(const char *path) {
    if (!atomic_load(&pl_g.active)) return;
    /* A vfork child (posix_spawn, Python's subprocess) shares our memory but is not this traced process:
     * it must not write into the parent's trace. */
    if ((uint32_t)getpid() != pl_g.pid) return;
    PL_GUARD_SCOPE();
    pl_trace_record_t r = {.type = PL_REC_EXEC, .t_ns = pl_now_ns()};
    r.u.exec.path = path ? path : "";
    pl_emit(&r);
    pl_emit_heap(pl_now_ns(), 0);
    pl_writer_t *w = atomic_load(&pl_g.writer);
    if (w) pl_writer_flush(w);
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    static execve_fn real_execve;
    if (!real_execve) next_sym(&real_execve, "execve");
    before_exec(path);
    CHILD_ENV(envp, env2);
    return real_execve(path, argv, env2);
}

PL_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

PL_EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    static int (*real_execvpe)(const char *, char *const[], char *const[]);
    if (!real_execvpe) next_sym(&real_execvpe, "execvpe");
    before_exec(file);
    CHILD_ENV(envp, env2);
    return real_execvpe(file, argv, env2);
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    static int (*real_fexecve)(int, char *const[], char *const[]);
    if (!real_fexecve) next_sym(&real_fexecve, "fexecve");
    before_exec("");
    CHILD_ENV(envp, env2);
    return real_fexecve(fd, argv, env2);
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);

PL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    static spawn_fn real_spawn;
    if (!real_spawn) next_sym(&real_spawn, "posix_spawn");
    CHILD_ENV(envp, env2);
    return real_spawn(pid, path, fa, attr, argv, env2);
}

PL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    static spawn_fn real_spawnp;
    if (!real_spawnp) next_sym(&real_spawnp, "posix_spawnp");
    CHILD_ENV(envp, env2);
    return real_spawnp(pid, file, fa, attr, argv, env2);
}

/* system(): glibc's spawns /bin/sh with `environ` from inside libc, where no interposer sees it, so this is glibc's
 * own algorithm (sysdeps/posix/system.c, 2.36) over the posix_spawn above: SIGINT and SIGQUIT ignored while any
 * system() runs (counted across threads), SIGCHLD blocked, the child started with the caller's mask and those two
 * signals at their default unless they were ignored, `sh -c LINE`, 127 as the shell's status when it cannot
 * start. Unlike glibc's, a thread cancelled while it waits does not restore the two signals. */
static pthread_mutex_t system_lock = PTHREAD_MUTEX_INITIALIZER;
static int system_refs;
static struct sigaction system_intr, system_quit;

static int system_run(const char *line) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    pthread_mutex_lock(&system_lock);
    if (system_refs++ == 0) {
        sigaction(SIGINT, &sa, &system_intr);
        sigaction(SIGQUIT, &sa, &system_quit);
    }
    pthread_mutex_unlock(&system_lock);
    sigset_t omask;
    sigaddset(&sa.sa_mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &sa.sa_mask, &omask);
    sigset_t reset;
    sigemptyset(&reset);
    if (system_intr.sa_handler != SIG_IGN) sigaddset(&reset, SIGINT);
    if (system_quit.sa_handler != SIG_IGN) sigaddset(&reset, SIGQUIT);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &omask);
    posix_spawnattr_setsigdefault(&attr, &reset);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {(char *)(uintptr_t)"sh", (char *)(uintptr_t)"-c", (char *)(uintptr_t)line, NULL};
    pid_t pid;
    int status;
    int ret = posix_spawn(&pid, "/bin/sh", NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (ret == 0) {
        while (waitpid(pid, &status, 0) != pid)
            if (errno != EINTR) {
                status = -1;
                break;
            }
    } else {
        status = 127 << 8; /* as if the shell had exited 127 */
    }
    pthread_mutex_lock(&system_lock);
    if (--system_refs == 0) {
        sigaction(SIGINT, &system_intr, NULL);
        sigaction(SIGQUIT, &system_quit, NULL);
    }
    pthread_mutex_unlock(&system_lock);
    sigprocmask(SIG_SETMASK, &omask, NULL);
    if (ret != 0) errno = ret;
    return status;
}

PL_EXPORT int system(const char *line) {
    if (!line) return system_run("exit 0") == 0;
    return system_run(line);
}

/* popen(): glibc's spawns /bin/sh with `environ` from inside libc too, and returns as soon as the shell started, so
 * `environ` is the child's environment for that moment and then the program's again. Another thread that reads the
 * environment in that window sees plateau's variables; one that changes it copies the child's environment, from
 * which plateau's variables are taken out again. */
PL_EXPORT FILE *popen(const char *command, const char *mode) {
    static FILE *(*real_popen)(const char *, const char *);
    if (!real_popen) next_sym(&real_popen, "popen");
    char **mine = environ;
    CHILD_ENV(mine, env2);
    if (env2 == mine) return real_popen(command, mode);
    environ = (char **)(uintptr_t)env2;
    int saved_errno;
    FILE *f = real_popen(command, mode);
    saved_errno = errno;
    if (environ == (char **)(uintptr_t)env2) environ = mine;
    else pl_env_restrip(); /* another thread changed the environment meanwhile: from a copy of the child's */
    errno = saved_errno;
    return f;
}

/* _exit skips destructors (Python's os._exit in multiprocessing and DataLoader workers, dash's exit): write
 * the final heap totals and the process_end record and flush, so the last interval is not lost and the
 * process does not look killed. Other threads are not stopped: their later records are simply not written. */
PL_EXPORT void _exit(int status) {
    static void (*real_exit)(int);
    if (!real_exit) next_sym(&real_exit, "_exit");
    if (atomic_load(&pl_g.active) && (uint32_t)getpid() == pl_g.pid) {
        PL_GUARD_SCOPE();
        pl_emit_heap(pl_now_ns(), 0);
        pl_trace_record_t r = {.type = PL_REC_PROCESS_END, .t_ns = pl_now_ns()};
        pl_emit(&r);
        pl_writer_t *w = atomic_load(&pl_g.writer);
        if (w) pl_writer_flush(w);
    }
    if (real_exit) real_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

#define MAX_EXECL_ARGS 1024

/* execl's argument list as an argv array (NULL-terminated; cut at MAX_EXECL_ARGS - 1 entries). */
static void execl_argv(char **argv, const char *arg, va_list *ap) {
    size_t n = 0;
    argv[n++] = (char *)(uintptr_t)arg;
    while (argv[n - 1] && n < MAX_EXECL_ARGS) argv[n++] = va_arg(*ap, char *);
    argv[MAX_EXECL_ARGS - 1] = NULL;
}

PL_EXPORT int execl(const char *path, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, &ap);
    va_end(ap);
    return execve(path, argv, environ);
}

PL_EXPORT int execle(const char *path, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, &ap);
    char *const *envp = va_arg(ap, char *const *); /* after the NULL that ends the arguments */
    va_end(ap);
    return execve(path, argv, envp);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, &ap);
    va_end(ap);
    return execvp(file, argv);
}

