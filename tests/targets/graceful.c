/* Target: a service with a graceful shutdown, for the signal tests of plateau run (tests/cli/test_signals.sh).
 * Counts every catchable signal it gets and prints "got NAME" for each (from the main loop, not the handler).
 * The first SIGTERM starts a shutdown that takes 300 ms; the program then exits 0, or 42 when a second SIGTERM
 * arrived meanwhile (the double delivery the tests guard against). Prints "ready" once its handlers are set. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t counts[65];

static void on_signal(int sig) { counts[sig]++; }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGCONT, SIGTSTP};
static const char *const names[] = {"HUP", "INT", "QUIT", "TERM", "USR1", "USR2", "ALRM", "PIPE", "CONT", "TSTP"};

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
    int seen[65] = {0};
    printf("ready\n");
    fflush(stdout);
    for (int ticks = 0; ticks < 60 * 200; ticks++) { /* at most a minute */
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
            int s = sigs[i];
            while (seen[s] < counts[s]) {
                seen[s]++;
                printf("got %s\n", names[i]);
                fflush(stdout);
            }
        }
        if (counts[SIGTERM]) {
            sleep_ms(300); /* the graceful shutdown */
            printf("shutdown after %d SIGTERM; counts:", (int)counts[SIGTERM]);
            for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) printf(" %s=%d", names[i], (int)counts[sigs[i]]);
            printf("\n");
            return counts[SIGTERM] == 1 ? 0 : 42;
        }
        sleep_ms(5);
    }
    return 3;
}
