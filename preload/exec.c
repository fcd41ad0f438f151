/* exec and _exit: the two ways a process image ends without running destructors. The exec family records the
 * exec and flushes. An environment the program passes that still carries one of plateau's variables (PLATEAU_*,
 * an LD_PRELOAD naming this library) but lost others gets LD_PRELOAD, PLATEAU_DIR, PLATEAU_RUN_ID and
 * PLATEAU_QUIET back, so the new image is traced into the same run; an environment with none of them
 * (subprocess.run(..., env={...})) is passed exactly as given: that child is not traced and sees exactly what it
 * would untraced (docs/env.md, "Following children"). _exit writes the final records and flushes. */
#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

static struct {
    char ld_preload[2048];       /* LD_PRELOAD at start, re-added on exec when a program drops it */
} st;

void pl_exec_init(void) {
    const char *lp = getenv("LD_PRELOAD");
    if (lp) snprintf(st.ld_preload, sizeof st.ld_preload, "%s", lp);
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

static void next_sym(void *fn_ptr_out, const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    memcpy(fn_ptr_out, &p, sizeof p);
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

/* Whether the environment `envp` (n entries) carries any of plateau's variables: a PLATEAU_* or an LD_PRELOAD
 * naming this library (a program's own LD_PRELOAD=libfoo.so in an environment built from scratch is not ours). */
static bool env_is_ours(char *const envp[], size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strncmp(envp[i], "PLATEAU_", 8) ||
            (!strncmp(envp[i], "LD_PRELOAD=", 11) && strstr(envp[i] + 11, "libplateau_preload")))
            return true;
    return false;
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    static execve_fn real_execve;
    if (!real_execve) next_sym(&real_execve, "execve");
    before_exec(path);
    /* Follow into the new image when the program passes an environment that dropped some of ours (a launcher that
     * scrubs LD_PRELOAD); one with none of ours was built from scratch for the child: pass it as it is. */
    size_t n = 0;
    bool has_preload = false, has_dir = false, has_run = !pl_g.opt.run_id, has_quiet = !pl_g.opt.quiet,
         has_coll = !pl_g.opt.collector;
    for (; envp && envp[n]; n++) {
        if (!strncmp(envp[n], "LD_PRELOAD=", 11)) has_preload = true;
        if (!strncmp(envp[n], "PLATEAU_DIR=", 12)) has_dir = true;
        if (!strncmp(envp[n], "PLATEAU_RUN_ID=", 15)) has_run = true;
        if (!strncmp(envp[n], "PLATEAU_QUIET=", 14)) has_quiet = true;
        if (!strncmp(envp[n], "PLATEAU_COLLECTOR=", 18)) has_coll = true;
    }
    if (pl_g.opt.disable || !st.ld_preload[0] || (has_preload && has_dir && has_run && has_quiet && has_coll) ||
        n > 4096 || !env_is_ours(envp, n))
        return real_execve(path, argv, envp);
    char *env2[n + 6];
    static char pre[2048 + 16], dir[sizeof pl_g.opt.dir + 16], run[40];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) env2[k++] = envp[i];
    if (!has_preload) {
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", st.ld_preload);
        env2[k++] = pre;
    }
    if (!has_dir && pl_g.opt.dir[0]) {
        snprintf(dir, sizeof dir, "PLATEAU_DIR=%s", pl_g.opt.dir);
        env2[k++] = dir;
    }
    if (!has_run) {
        snprintf(run, sizeof run, "PLATEAU_RUN_ID=%016llx", (unsigned long long)pl_g.opt.run_id);
        env2[k++] = run;
    }
    if (!has_quiet) env2[k++] = (char *)"PLATEAU_QUIET=1";
    if (!has_coll) env2[k++] = (char *)(uintptr_t)"PLATEAU_COLLECTOR=1";
    env2[k] = NULL;
    return real_execve(path, argv, env2);
}

extern char **environ;

PL_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

PL_EXPORT int execvp(const char *file, char *const argv[]) {
    static int (*real_execvp)(const char *, char *const[]);
    if (!real_execvp) next_sym(&real_execvp, "execvp");
    before_exec(file);
    return real_execvp(file, argv);
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    static int (*real_execvpe)(const char *, char *const[], char *const[]);
    if (!real_execvpe) next_sym(&real_execvpe, "execvpe");
    before_exec(file);
    return real_execvpe(file, argv, envp);
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
static void execl_argv(char **argv, const char *arg, va_list ap) {
    size_t n = 0;
    argv[n++] = (char *)(uintptr_t)arg;
    while (argv[n - 1] && n < MAX_EXECL_ARGS) argv[n++] = va_arg(ap, char *);
    argv[MAX_EXECL_ARGS - 1] = NULL;
}

PL_EXPORT int execl(const char *path, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, ap);
    va_end(ap);
    return execve(path, argv, environ);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...) {
    char *argv[MAX_EXECL_ARGS];
    va_list ap;
    va_start(ap, arg);
    execl_argv(argv, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

