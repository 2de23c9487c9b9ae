/* The other process of test_ipc's cross-process tests (ordo/shared_signal.h):
 * test_ipc forks and execs it with a command and its arguments.
 *
 * A shared signal argument is a file descriptor: "<n>", inherited across
 * exec (the test clears its FD_CLOEXEC in the child), or "sock:<n>", the
 * next descriptor received with ordo_fd_receive on the inherited UNIX
 * socket n (the test sends them with ordo_fd_send, in argument order).
 *
 * Commands (each exits 0 when everything went as asked, non-zero with a
 * line on stderr otherwise; lines on stdout tell the test where it is):
 *
 *   pingpong <wait> <next> <rounds>
 *       registers on next; for r = 1..rounds: waits for wait to reach r
 *       (30 s deadline), then advances next to r. A node of a ring whose
 *       first node (the test) starts each round.
 *   signal-then-hang <sig> <value>
 *       registers, advances to value, prints "ready", then blocks until it
 *       is killed (it ends itself, still registered, after 60 s).
 *   register-after <go> <sig> <value>
 *       waits for go to reach 1, registers on sig, advances it to value,
 *       then hangs until killed
 *   wait <sig> <value> <timeout_ms> [<advance_to>]
 *       prints "ready", waits, prints
 *       "result <STATUS_NAME> <CLOCK_MONOTONIC ns at return> <failure message>";
 *       after an ORDO_OK wait, advances to advance_to if given.
 *   fail <sig> <status> <message> [<go>]
 *       registers (then, given go, prints "ready" and waits for go to reach
 *       1), fails the signal with status (a number) and message, prints
 *       "failure <STATUS_NAME> <message>" as it then reads the failure,
 *       unregisters.
 *   advance <sig> <value> [<sig> <value> ...]
 *       advances each signal to its value, in order.
 *   stream-stage <in> <in_value> <out> <out_value>
 *       registers on out; on a stream of cpu:0: waits for in to reach
 *       in_value, runs a host task that prints "task in=<value of in>
 *       out=<value of out>", signals out to out_value; synchronizes and
 *       prints "done <STATUS_NAME>".
 *   exit-registered <sig> <value>
 *       registers, advances to value and exits (exit(0)) still registered,
 *       its handle never released.
 *   exit-unregistered <sig> <value>
 *       registers, advances, unregisters and exits with its handle open.
 *   exit-released <sig> <value>
 *       registers, advances and releases its handle (which unregisters it).
 *   exit-destroyed-held <sig> <value>
 *       registers, takes a second reference to its handle, advances,
 *       destroys the handle (which unregisters it) and exits holding the
 *       second reference.
 *   exit-registered-twice <sig> <value>
 *       opens sig twice, registers through both handles, advances to
 *       value, releases and unregisters the first handle and exits still
 *       registered through the second.
 *   open-name <name> <value>
 *       opens the named signal, advances it to value.
 *   open-fails <sig>
 *       expects ordo_shared_signal_open_fd to refuse sig; prints
 *       "refused <STATUS_NAME>".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ordo/ordo.h"

static const char *command = "?";

/* Handles a command leaves open on purpose live here, so that a leak
 * checker counts them as reachable. */
static ordo_signal_t *kept[8];

static void die(const char *fmt, ...) ORDO_FORMAT_(1, 2);

static void die(const char *fmt, ...) {
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    fprintf(stderr, "ipc_peer %s (pid %d): %s\n", command, (int)getpid(), text);
    exit(10);
}

static void check(ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        die("%s returned %s (%s)", what, ordo_status_name(st), ordo_error_message());
    }
}

/* One line on stdout, written at once (the test reads it through a pipe). */
static void say(const char *fmt, ...) ORDO_FORMAT_(1, 2);

static void say(const char *fmt, ...) {
    char text[1024];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof text - 1, fmt, args);
    va_end(args);
    if (n < 0) {
        die("vsnprintf failed");
    }
    if ((size_t)n > sizeof text - 2) {
        n = (int)sizeof text - 2;
    }
    text[n++] = '\n';
    size_t done = 0;
    while (done < (size_t)n) {
        ssize_t w = write(STDOUT_FILENO, text + done, (size_t)n - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            die("write to stdout failed: %s", strerror(errno));
        }
        done += (size_t)w;
    }
}

static uint64_t number(const char *text) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || !end || *end || end == text) {
        die("not a number: \"%s\"", text);
    }
    return (uint64_t)v;
}

/* The descriptor an argument names (see the file's comment). */
static int fd_argument(const char *arg) {
    if (strncmp(arg, "sock:", 5) == 0) {
        int socket = (int)number(arg + 5);
        int fd = -1;
        check(ordo_fd_receive(socket, ordo_deadline_after_ms(10000), &fd), "ordo_fd_receive");
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || !(flags & FD_CLOEXEC)) {
            die("the received descriptor %d is not close-on-exec", fd);
        }
        return fd;
    }
    return (int)number(arg);
}

/* Opens the shared signal an argument names; its descriptor is closed
 * (the handle does not need it). */
static ordo_signal_t *open_argument(const char *arg) {
    int fd = fd_argument(arg);
    ordo_signal_t *signal = NULL;
    check(ordo_shared_signal_open_fd(fd, &signal), "ordo_shared_signal_open_fd");
    close(fd);
    bool shared = false;
    check(ordo_signal_is_shared(signal, &shared), "ordo_signal_is_shared");
    if (!shared) {
        die("a handle opened from a descriptor is not shared");
    }
    return signal;
}

static void need(int argc, int count) {
    if (argc < count) {
        die("expects %d arguments, got %d", count - 2, argc - 2);
    }
}

/* Blocks until killed; ends itself (still registered) after 60 s, so a
 * lost peer does not outlive its test for long. */
static void hang(void) {
    const ordo_deadline_t end = ordo_deadline_after_ms(60000);
    while (ordo_time_now_ns() < end) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    die("not killed within 60 s");
}

static void failure_text(ordo_signal_t *signal, char *message, size_t capacity) {
    ordo_status_t failure = ORDO_OK;
    check(ordo_signal_failure(signal, &failure, message, capacity), "ordo_signal_failure");
}

static int run_pingpong(int argc, char **argv) {
    need(argc, 5);
    ordo_signal_t *wait = open_argument(argv[2]);
    ordo_signal_t *next = open_argument(argv[3]);
    uint64_t rounds = number(argv[4]);
    check(ordo_shared_signal_register(next), "ordo_shared_signal_register");
    say("ready");
    for (uint64_t r = 1; r <= rounds; ++r) {
        ordo_status_t st = ordo_signal_wait(wait, r, ordo_deadline_after_ms(30000));
        if (st != ORDO_OK) {
            die("round %" PRIu64 ": ordo_signal_wait returned %s (%s)", r, ordo_status_name(st),
                ordo_error_message());
        }
        check(ordo_signal_advance(next, r), "ordo_signal_advance");
    }
    check(ordo_shared_signal_unregister(next), "ordo_shared_signal_unregister");
    check(ordo_signal_release(wait), "ordo_signal_release");
    check(ordo_signal_release(next), "ordo_signal_release");
    return 0;
}

static int run_signal_then_hang(int argc, char **argv) {
    need(argc, 4);
    ordo_signal_t *signal = open_argument(argv[2]);
    kept[0] = signal;
    check(ordo_shared_signal_register(signal), "ordo_shared_signal_register");
    check(ordo_signal_advance(signal, number(argv[3])), "ordo_signal_advance");
    say("ready");
    hang();
    return 1;
}

/* Waits for go to reach 1, then registers on the signal and advances it:
 * the parent decides when the registration comes. */
static int run_register_after(int argc, char **argv) {
    need(argc, 5);
    ordo_signal_t *go = open_argument(argv[2]);
    ordo_signal_t *signal = open_argument(argv[3]);
    kept[0] = go;
    kept[1] = signal;
    say("ready");
    check(ordo_signal_wait(go, 1, ordo_deadline_after_ms(60000)), "ordo_signal_wait");
    check(ordo_shared_signal_register(signal), "ordo_shared_signal_register");
    check(ordo_signal_advance(signal, number(argv[4])), "ordo_signal_advance");
    hang();
    return 1;
}

static int run_wait(int argc, char **argv) {
    need(argc, 5);
    ordo_signal_t *signal = open_argument(argv[2]);
    uint64_t value = number(argv[3]);
    uint64_t timeout_ms = number(argv[4]);
    say("ready");
    ordo_status_t st = ordo_signal_wait(signal, value, ordo_deadline_after_ms(timeout_ms));
    uint64_t now = ordo_time_now_ns();
    char message[ORDO_SIGNAL_MESSAGE_MAX] = "";
    failure_text(signal, message, sizeof message);
    say("result %s %" PRIu64 " %s", ordo_status_name(st), now, message);
    if (st == ORDO_OK && argc > 5) {
        check(ordo_signal_advance(signal, number(argv[5])), "ordo_signal_advance");
    }
    check(ordo_signal_release(signal), "ordo_signal_release");
    return 0;
}

static int run_fail(int argc, char **argv) {
    need(argc, 5);
    ordo_signal_t *signal = open_argument(argv[2]);
    ordo_signal_t *go = argc > 5 ? open_argument(argv[5]) : NULL;
    check(ordo_shared_signal_register(signal), "ordo_shared_signal_register");
    if (go) {
        say("ready");
        check(ordo_signal_wait(go, 1, ordo_deadline_after_ms(30000)), "ordo_signal_wait");
    }
    check(ordo_signal_fail(signal, (ordo_status_t)number(argv[3]), argv[4]), "ordo_signal_fail");
    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX] = "";
    check(ordo_signal_failure(signal, &failure, message, sizeof message), "ordo_signal_failure");
    say("failure %s %s", ordo_status_name(failure), message);
    check(ordo_shared_signal_unregister(signal), "ordo_shared_signal_unregister");
    check(ordo_signal_release(signal), "ordo_signal_release");
    if (go) {
        check(ordo_signal_release(go), "ordo_signal_release");
    }
    return 0;
}

static int run_advance(int argc, char **argv) {
    need(argc, 4);
    if (argc % 2) {
        die("expects pairs of <signal> <value>");
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        ordo_signal_t *signal = open_argument(argv[i]);
        check(ordo_signal_advance(signal, number(argv[i + 1])), "ordo_signal_advance");
        check(ordo_signal_release(signal), "ordo_signal_release");
    }
    return 0;
}

typedef struct stage {
    ordo_signal_t *in;
    ordo_signal_t *out;
} stage_t;

static ordo_status_t stage_task(void *ctx) {
    stage_t *stage = ctx;
    uint64_t in = 0;
    uint64_t out = 0;
    ordo_status_t st = ordo_signal_query(stage->in, &in);
    (void)ordo_signal_query(stage->out, &out);
    say("task in=%" PRIu64 " out=%" PRIu64 " %s", in, out, ordo_status_name(st));
    return ORDO_OK;
}

static int run_stream_stage(int argc, char **argv) {
    need(argc, 6);
    stage_t stage = {open_argument(argv[2]), open_argument(argv[4])};
    uint64_t in_value = number(argv[3]);
    uint64_t out_value = number(argv[5]);
    check(ordo_shared_signal_register(stage.out), "ordo_shared_signal_register");
    ordo_device_t *device = NULL;
    ordo_stream_t *stream = NULL;
    check(ordo_device_open("cpu:0", &device), "ordo_device_open");
    check(ordo_stream_create(device, 0, &stream), "ordo_stream_create");
    check(ordo_stream_wait(stream, stage.in, in_value), "ordo_stream_wait");
    check(ordo_stream_host_task(stream, stage_task, &stage), "ordo_stream_host_task");
    check(ordo_stream_signal(stream, stage.out, out_value), "ordo_stream_signal");
    say("ready");
    ordo_status_t st = ordo_stream_synchronize(stream, ordo_deadline_after_ms(30000));
    say("done %s", ordo_status_name(st));
    check(ordo_stream_destroy(stream), "ordo_stream_destroy");
    check(ordo_device_release(device), "ordo_device_release");
    check(ordo_shared_signal_unregister(stage.out), "ordo_shared_signal_unregister");
    check(ordo_signal_release(stage.in), "ordo_signal_release");
    check(ordo_signal_release(stage.out), "ordo_signal_release");
    return 0;
}

/* How run_exit ends its registration. */
enum { EXIT_REGISTERED, EXIT_UNREGISTERED, EXIT_RELEASED, EXIT_DESTROYED_HELD };

static int run_exit(int argc, char **argv, int how) {
    need(argc, 4);
    ordo_signal_t *signal = open_argument(argv[2]);
    kept[0] = signal;
    check(ordo_shared_signal_register(signal), "ordo_shared_signal_register");
    if (how == EXIT_DESTROYED_HELD) {
        check(ordo_signal_retain(signal), "ordo_signal_retain"); /* never released */
    }
    check(ordo_signal_advance(signal, number(argv[3])), "ordo_signal_advance");
    if (how == EXIT_UNREGISTERED) {
        check(ordo_shared_signal_unregister(signal), "ordo_shared_signal_unregister");
    }
    if (how == EXIT_RELEASED) {
        check(ordo_signal_release(signal), "ordo_signal_release");
        kept[0] = NULL;
    }
    if (how == EXIT_DESTROYED_HELD) {
        check(ordo_signal_destroy(signal), "ordo_signal_destroy");
    }
    exit(0);
}

static int run_exit_registered_twice(int argc, char **argv) {
    need(argc, 4);
    ordo_signal_t *first = open_argument(argv[2]);
    int fd = -1;
    check(ordo_shared_signal_fd(first, &fd), "ordo_shared_signal_fd");
    ordo_signal_t *second = NULL;
    check(ordo_shared_signal_open_fd(fd, &second), "ordo_shared_signal_open_fd");
    close(fd);
    kept[0] = second;
    check(ordo_shared_signal_register(first), "ordo_shared_signal_register");
    check(ordo_shared_signal_register(second), "ordo_shared_signal_register");
    check(ordo_signal_advance(second, number(argv[3])), "ordo_signal_advance");
    check(ordo_shared_signal_unregister(first), "ordo_shared_signal_unregister");
    check(ordo_signal_release(first), "ordo_signal_release");
    exit(0);
}

static int run_open_name(int argc, char **argv) {
    need(argc, 4);
    ordo_signal_t *signal = NULL;
    check(ordo_shared_signal_open_name(argv[2], &signal), "ordo_shared_signal_open_name");
    check(ordo_signal_advance(signal, number(argv[3])), "ordo_signal_advance");
    check(ordo_signal_release(signal), "ordo_signal_release");
    return 0;
}

static int run_open_fails(int argc, char **argv) {
    need(argc, 3);
    int fd = fd_argument(argv[2]);
    ordo_signal_t *signal = (ordo_signal_t *)1;
    ordo_status_t st = ordo_shared_signal_open_fd(fd, &signal);
    if (st == ORDO_OK || signal != NULL) {
        die("ordo_shared_signal_open_fd returned %s, handle %p", ordo_status_name(st),
            (void *)signal);
    }
    say("refused %s", ordo_status_name(st));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ipc_peer <command> <arguments...>\n");
        return 2;
    }
    command = argv[1];
    if (strcmp(command, "pingpong") == 0) {
        return run_pingpong(argc, argv);
    }
    if (strcmp(command, "signal-then-hang") == 0) {
        return run_signal_then_hang(argc, argv);
    }
    if (strcmp(command, "register-after") == 0) {
        return run_register_after(argc, argv);
    }
    if (strcmp(command, "wait") == 0) {
        return run_wait(argc, argv);
    }
    if (strcmp(command, "fail") == 0) {
        return run_fail(argc, argv);
    }
    if (strcmp(command, "advance") == 0) {
        return run_advance(argc, argv);
    }
    if (strcmp(command, "stream-stage") == 0) {
        return run_stream_stage(argc, argv);
    }
    if (strcmp(command, "exit-registered") == 0) {
        return run_exit(argc, argv, EXIT_REGISTERED);
    }
    if (strcmp(command, "exit-unregistered") == 0) {
        return run_exit(argc, argv, EXIT_UNREGISTERED);
    }
    if (strcmp(command, "exit-released") == 0) {
        return run_exit(argc, argv, EXIT_RELEASED);
    }
    if (strcmp(command, "exit-destroyed-held") == 0) {
        return run_exit(argc, argv, EXIT_DESTROYED_HELD);
    }
    if (strcmp(command, "exit-registered-twice") == 0) {
        return run_exit_registered_twice(argc, argv);
    }
    if (strcmp(command, "open-name") == 0) {
        return run_open_name(argc, argv);
    }
    if (strcmp(command, "open-fails") == 0) {
        return run_open_fails(argc, argv);
    }
    die("unknown command");
    return 2;
}
