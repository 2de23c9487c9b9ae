/* Waiting for another process from an event loop.
 *
 * The parent creates a shared signal and starts a child program (itself,
 * with --child) that opens the signal from an inherited descriptor, does
 * some work and advances the signal to 1. Meanwhile the parent runs an
 * epoll loop over two sources: a timerfd that ticks every 10 ms, and an
 * ordo_signal_fd_t, a descriptor that becomes readable once the signal
 * reaches 1 (or fails: had the child crashed after registering as the
 * signal's signaller, the descriptor would become readable too, with
 * ORDO_ERR_ABANDONED as its result). */
#include <ordo/ordo.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int check(ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, ordo_status_name(st), ordo_error_message());
    }
    return st == ORDO_OK;
}

/* The child: opens the signal behind fd, works, advances it to 1. */
static int child_main(int fd) {
    ordo_signal_t *done = NULL;
    if (!check(ordo_shared_signal_open_fd(fd, &done), "child: open the shared signal")) {
        return 1;
    }
    close(fd); /* the handle does not need the descriptor */
    /* From here until it unregisters or closes its handle, this process
     * dying (even by kill -9) fails the signal with ORDO_ERR_ABANDONED. */
    int ok = check(ordo_shared_signal_register(done), "child: register");

    /* "Some work": 50 ms of it. */
    struct timespec work = {0, 50 * 1000 * 1000};
    nanosleep(&work, NULL);

    ok = ok && check(ordo_signal_advance(done, 1), "child: advance");
    ok &= check(ordo_signal_release(done), "child: close the handle"); /* unregisters */
    return ok ? 0 : 1;
}

/* Starts this program again as the child, passing it the signal's fd. */
static pid_t spawn_child(const char *self, int fd) {
    char fd_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", fd);
    pid_t pid = fork();
    if (pid == 0) {
        /* ordo's descriptors are close-on-exec: let this one through. */
        fcntl(fd, F_SETFD, 0);
        execl(self, self, "--child", fd_text, (char *)NULL);
        _exit(127);
    }
    return pid;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        char *end = NULL;
        long fd = strtol(argv[2], &end, 10);
        if (!*argv[2] || *end || fd < 0 || fd > 1 << 20) {
            fprintf(stderr, "ipc_epoll: --child takes a descriptor number, not '%s'\n", argv[2]);
            return 2;
        }
        return child_main((int)fd);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s (the --child form is the example's own)\n", argv[0]);
        return 2;
    }

    /* A shared signal at 0 in anonymous shared memory, and a descriptor
     * for the child to open it with. */
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    ordo_signal_t *done = NULL;
    int signal_page_fd = -1;
    if (!check(ordo_shared_signal_create(&config, &done), "create a shared signal") ||
        !check(ordo_shared_signal_fd(done, &signal_page_fd), "get its descriptor")) {
        return 1;
    }
    pid_t child = spawn_child("/proc/self/exe", signal_page_fd);
    close(signal_page_fd); /* the child has its own copy */
    if (child < 0) {
        perror("fork");
        return 1;
    }

    /* "done reaches 1" as a pollable descriptor. */
    ordo_signal_fd_t *done_fd = NULL;
    int done_poll_fd = -1;
    if (!check(ordo_signal_fd_create(done, 1, &done_fd), "export the value as a descriptor") ||
        !check(ordo_signal_fd_get(done_fd, &done_poll_fd), "get the descriptor")) {
        return 1;
    }

    /* Another source for the same loop: a timer ticking every 10 ms. */
    int ticker = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec every_10ms = {{0, 10 * 1000 * 1000}, {0, 10 * 1000 * 1000}};
    timerfd_settime(ticker, 0, &every_10ms, NULL);

    int loop = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event watch = {.events = EPOLLIN, .data.fd = done_poll_fd};
    epoll_ctl(loop, EPOLL_CTL_ADD, done_poll_fd, &watch);
    watch.data.fd = ticker;
    epoll_ctl(loop, EPOLL_CTL_ADD, ticker, &watch);

    uint64_t ticks = 0;
    int finished = 0;
    while (!finished) {
        struct epoll_event ready[2];
        int n = epoll_wait(loop, ready, 2, 10000); /* a bound: 10 s */
        if (n <= 0) {
            fprintf(stderr, "nothing happened for 10 s\n");
            break;
        }
        for (int i = 0; i < n; ++i) {
            if (ready[i].data.fd == ticker) {
                uint64_t expirations = 0;
                if (read(ticker, &expirations, sizeof expirations) == sizeof expirations) {
                    ticks += expirations;
                }
            } else {
                finished = 1; /* the signal reached 1, or failed */
            }
        }
    }

    /* What the descriptor reports: ORDO_OK once the value was reached. */
    ordo_status_t result = finished ? ordo_signal_fd_result(done_fd) : ORDO_ERR_TIMEOUT;
    printf("the child's signal: %s, after %llu ticks of the timer\n", ordo_status_name(result),
           (unsigned long long)ticks);

    int status = 0;
    waitpid(child, &status, 0);
    printf("the child exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    close(loop);
    close(ticker);
    int ok = check(ordo_signal_fd_destroy(done_fd), "destroy the descriptor");
    ok &= check(ordo_signal_release(done), "close the signal");
    return ok && result == ORDO_OK && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
