/* Cross-process shared signals (ordo/shared_signal.h) and pollable signal
 * values (ordo/signal_fd.h): ping-pong between processes without a lost
 * wake-up, abandonment of a signaller that dies, failures and their
 * messages across the process boundary, streams, multi-waits, timepoints,
 * links and the async waiter on shared signals, named objects, bad input
 * and a hostile peer scribbling over the page.
 *
 * The other processes are tests/ipc_peer.c, forked and exec'd (its path:
 * IPC_PEER_PATH). Each peer dies with this process (PR_SET_PDEATHSIG),
 * each test's teardown kills and reaps the ones left, and every wait on a
 * peer (a line on its stdout, its exit) has a deadline. Where a test needs
 * a waiter to be asleep before it acts, it watches the waiting thread's
 * state in /proc (asleep in a futex wait) instead of sleeping. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc/shared_handle.h" /* ordo__ipc_engine_settle, for the block counts */
#include "ipc/shared_page.h"   /* the page's layout, for the corrupted pages */
#include "refusal.h"
#include "test_util.h"

#ifndef IPC_PEER_PATH
#error "IPC_PEER_PATH names the ipc_peer executable (tests/CMakeLists.txt)"
#endif

/* A wait on a peer: generous, so a lost wake-up fails the test instead of
 * hanging it, and a slow machine does not. */
#define PEER_WAIT_MS 30000u

/* The bound on abandonment asserted here: ORDO_SHARED_SIGNAL_ABANDON_BOUND_MS
 * with 5x slack for a noisy CI machine (scheduling, the kill's delivery),
 * times the sanitizers' slowdown divisor. */
#define ABANDON_SLACK 5u
static uint64_t abandon_bound_ns(void) {
    return (uint64_t)ORDO_SHARED_SIGNAL_ABANDON_BOUND_MS * ABANDON_SLACK * ORDO_TEST_SCALE_DIVISOR *
           1000000u;
}

static bool valid_status(ordo_status_t st) {
    return (unsigned)st < (unsigned)ORDO_STATUS_COUNT_;
}

/* ---- peers ---------------------------------------------------------------- */

typedef struct peer {
    pid_t pid;
    int pidfd;
    int out; /* the read end of its stdout */
    char buf[8192];
    size_t len;
    bool reaped;
    int wstatus;
} peer_t;

#define PEERS_MAX 48
static peer_t peers[PEERS_MAX];
static size_t peer_count;

/* Argument text for a spawn: numbers and "sock:<n>", from a ring of
 * buffers (enough for one command line). */
static char arg_ring[64][48];
static unsigned arg_next;

static const char *num(uint64_t v) {
    char *text = arg_ring[arg_next++ % 64];
    snprintf(text, sizeof arg_ring[0], "%" PRIu64, v);
    return text;
}

static const char *sock_arg(int fd) {
    char *text = arg_ring[arg_next++ % 64];
    snprintf(text, sizeof arg_ring[0], "sock:%d", fd);
    return text;
}

/* Forks and execs ipc_peer with args (NULL-terminated); the descriptors in
 * fds are inherited (their FD_CLOEXEC cleared in the child only). */
static peer_t *peer_spawn(const int *fds, size_t nfds, const char *const *args) {
    assert_true(peer_count < PEERS_MAX);
    const char *argv[32];
    size_t argc = 0;
    argv[argc++] = IPC_PEER_PATH;
    for (; args[argc - 1]; ++argc) {
        assert_true(argc < 31);
        argv[argc] = args[argc - 1];
    }
    argv[argc] = NULL;
    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(98);
        }
        if (dup2(pipefd[1], STDOUT_FILENO) < 0) {
            _exit(97);
        }
        for (size_t i = 0; i < nfds; ++i) {
            int flags = fcntl(fds[i], F_GETFD);
            if (flags < 0 || fcntl(fds[i], F_SETFD, flags & ~FD_CLOEXEC) < 0) {
                _exit(96);
            }
        }
        execv(IPC_PEER_PATH, (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    peer_t *p = &peers[peer_count++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->out = pipefd[0];
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    assert_true(p->pidfd >= 0);
    return p;
}

#define PEER(fds, nfds, ...) peer_spawn((fds), (nfds), (const char *const[]){__VA_ARGS__, NULL})

/* Reads the peer's stdout until a line that starts with prefix; copies the
 * rest of the line (after the prefix and one space) into out. Other lines
 * are printed. Returns false at the deadline or at the end of its
 * output. */
static bool peer_line(peer_t *p, const char *prefix, char *out, size_t capacity,
                      ordo_deadline_t deadline) {
    size_t plen = strlen(prefix);
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len)) != NULL) {
            *nl = '\0';
            size_t line_len = (size_t)(nl - p->buf) + 1;
            bool match = strncmp(p->buf, prefix, plen) == 0;
            if (match && out) {
                const char *rest = p->buf + plen;
                rest += *rest == ' ';
                snprintf(out, capacity, "%s", rest);
            } else if (!match) {
                print_message("peer %d: %s\n", (int)p->pid, p->buf);
            }
            memmove(p->buf, p->buf + line_len, p->len - line_len);
            p->len -= line_len;
            if (match) {
                return true;
            }
        }
        if (p->len == sizeof p->buf) {
            return false;
        }
        uint64_t left = ordo_deadline_remaining_ns(deadline);
        struct pollfd pfd = {.fd = p->out, .events = POLLIN};
        int r = poll(&pfd, 1, left == 0 ? 0 : (int)(left / 1000000u) + 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            if (ordo_deadline_remaining_ns(deadline) == 0) {
                return false;
            }
            continue;
        }
        ssize_t n = read(p->out, p->buf + p->len, sizeof p->buf - p->len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        p->len += (size_t)n;
    }
}

static void peer_expect(peer_t *p, const char *prefix, char *out, size_t capacity) {
    if (!peer_line(p, prefix, out, capacity, ordo_deadline_after_ms(PEER_WAIT_MS))) {
        fail_msg("peer %d printed no \"%s\" line within %u ms", (int)p->pid, prefix, PEER_WAIT_MS);
    }
}

/* Waits for the peer to end (within the deadline) and reaps it; returns
 * false if it did not end. */
static bool peer_join(peer_t *p, ordo_deadline_t deadline) {
    if (p->reaped) {
        return true;
    }
    for (;;) {
        uint64_t left = ordo_deadline_remaining_ns(deadline);
        struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
        int r = poll(&pfd, 1, left == 0 ? 0 : (int)(left / 1000000u) + 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r == 1) {
            break;
        }
        if (ordo_deadline_remaining_ns(deadline) == 0) {
            return false;
        }
    }
    pid_t got;
    do {
        got = waitpid(p->pid, &p->wstatus, 0);
    } while (got < 0 && errno == EINTR);
    assert_int_equal(got, p->pid);
    p->reaped = true;
    return true;
}

/* The peer ends with exit status 0 (its remaining output is printed). */
static void peer_join_ok(peer_t *p) {
    if (!peer_join(p, ordo_deadline_after_ms(PEER_WAIT_MS))) {
        fail_msg("peer %d did not end within %u ms", (int)p->pid, PEER_WAIT_MS);
    }
    (void)peer_line(p, "\x01", NULL, 0, ORDO_DEADLINE_NOW);
    if (!WIFEXITED(p->wstatus) || WEXITSTATUS(p->wstatus) != 0) {
        fail_msg("peer %d ended with %s %d", (int)p->pid,
                 WIFEXITED(p->wstatus) ? "exit status" : "signal",
                 WIFEXITED(p->wstatus) ? WEXITSTATUS(p->wstatus) : WTERMSIG(p->wstatus));
    }
}

/* Kills and reaps every peer still there (a test's teardown: also after
 * a failed assertion). */
static int peers_end(void **state) {
    (void)state;
    for (size_t i = 0; i < peer_count; ++i) {
        peer_t *p = &peers[i];
        if (!p->reaped) {
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &p->wstatus, 0) < 0 && errno == EINTR) {
            }
            p->reaped = true;
        }
        close(p->out);
        close(p->pidfd);
    }
    peer_count = 0;
    return 0;
}

/* A peer's "result <STATUS> <ns> <message>" line. */
typedef struct peer_result {
    char status[64];
    uint64_t end_ns;
    char message[512];
} peer_result_t;

static peer_result_t peer_result(peer_t *p) {
    char line[1024];
    peer_expect(p, "result", line, sizeof line);
    peer_result_t r = {0};
    int offset = 0;
    if (sscanf(line, "%63s %" SCNu64 " %n", r.status, &r.end_ns, &offset) < 2) {
        fail_msg("peer %d: a malformed result line \"%s\"", (int)p->pid, line);
    }
    snprintf(r.message, sizeof r.message, "%s", line + offset);
    return r;
}

/* ---- helpers -------------------------------------------------------------- */

static ordo_signal_t *shared_make(uint64_t initial) {
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    config.initial_value = initial;
    ordo_signal_t *signal = NULL;
    assert_ok(ordo_shared_signal_create(&config, &signal));
    assert_non_null(signal);
    return signal;
}

static int shared_fd(ordo_signal_t *signal) {
    int fd = -1;
    assert_ok(ordo_shared_signal_fd(signal, &fd));
    assert_true(fd > STDERR_FILENO);
    return fd;
}

static ordo_signal_t *shared_open(int fd) {
    ordo_signal_t *signal = NULL;
    assert_ok(ordo_shared_signal_open_fd(fd, &signal));
    assert_non_null(signal);
    return signal;
}

static uint64_t query(ordo_signal_t *signal) {
    uint64_t value = 0;
    assert_ok(ordo_signal_query(signal, &value));
    return value;
}

/* Whether text names pid as a number of its own (not inside another). */
static bool names_pid(const char *text, pid_t pid) {
    char digits[24];
    snprintf(digits, sizeof digits, "%d", (int)pid);
    size_t n = strlen(digits);
    for (const char *at = strstr(text, digits); at; at = strstr(at + 1, digits)) {
        bool before = at == text || at[-1] < '0' || at[-1] > '9';
        bool after = at[n] < '0' || at[n] > '9';
        if (before && after) {
            return true;
        }
    }
    return false;
}

static pid_t gettid_(void) {
    return (pid_t)syscall(SYS_gettid);
}

#ifndef SYS_futex_waitv
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_futex_waitv 449
#endif
#endif

/* Whether thread tid of process pid sleeps in a futex wait: state S and,
 * where /proc tells the system call, futex or futex_waitv. */
static bool task_sleeps_in_futex(pid_t pid, pid_t tid) {
    char path[96];
    char text[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *paren = strrchr(text, ')');
    if (!paren || paren[1] != ' ' || paren[2] != 'S') {
        return false;
    }
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    f = fopen(path, "r");
    if (!f) {
        return true; /* not readable here: the state alone */
    }
    long nr = -2;
    int got = fscanf(f, "%ld", &nr);
    fclose(f);
    if (got != 1) {
        return false; /* "running" */
    }
#ifdef SYS_futex_waitv
    if (nr == SYS_futex_waitv) {
        return true;
    }
#endif
    return nr == SYS_futex;
}

/* Waits (bounded) until the thread sleeps in a futex wait. */
static void await_futex_sleep(pid_t pid, pid_t tid) {
    const ordo_deadline_t deadline = test_deadline();
    while (!task_sleeps_in_futex(pid, tid)) {
        if (ordo_time_now_ns() >= deadline) {
            fail_msg("thread %d of process %d did not go to sleep in a futex wait in %d ms",
                     (int)tid, (int)pid, TEST_WAIT_MS);
        }
        sched_yield();
    }
}

/* A blocking wait on another thread: one, all or any. It holds a
 * reference of its own on each signal across the wait. */
typedef enum wait_form { FORM_ONE, FORM_ALL, FORM_ANY } wait_form_t;

typedef struct bg_wait {
    wait_form_t form;
    ordo_signal_point_t points[4];
    size_t count;
    uint64_t timeout_ms;
    _Atomic int tid;
    ordo_status_t result;
    size_t index;
    uint64_t end_ns;
    char message[512];
    pthread_t thread;
} bg_wait_t;

static void *bg_wait_main(void *arg) {
    bg_wait_t *w = arg;
    atomic_store(&w->tid, (int)gettid_());
    ordo_deadline_t deadline = ordo_deadline_after_ms(w->timeout_ms);
    if (w->form == FORM_ONE) {
        w->result = ordo_signal_wait(w->points[0].signal, w->points[0].value, deadline);
    } else if (w->form == FORM_ALL) {
        w->result = ordo_signal_wait_all(w->points, w->count, deadline);
    } else {
        w->result = ordo_signal_wait_any(w->points, w->count, deadline, &w->index);
    }
    w->end_ns = ordo_time_now_ns();
    snprintf(w->message, sizeof w->message, "%s", ordo_error_message());
    for (size_t i = 0; i < w->count; ++i) {
        (void)ordo_signal_release(w->points[i].signal);
    }
    return NULL;
}

/* Starts the wait and returns once its thread sleeps in it. */
static void bg_wait_start(bg_wait_t *w, wait_form_t form, const ordo_signal_point_t *points,
                          size_t count) {
    memset(w, 0, sizeof *w);
    w->form = form;
    w->count = count;
    w->timeout_ms = PEER_WAIT_MS;
    w->result = ORDO_ERR_INTERNAL;
    w->index = 99;
    for (size_t i = 0; i < count; ++i) {
        w->points[i] = points[i];
        assert_ok(ordo_signal_retain(points[i].signal));
    }
    w->thread = test_thread_start(bg_wait_main, w);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&w->tid) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    await_futex_sleep(getpid(), (pid_t)atomic_load(&w->tid));
}

static void bg_wait_one(bg_wait_t *w, ordo_signal_t *signal, uint64_t value) {
    ordo_signal_point_t point = {signal, value};
    bg_wait_start(w, FORM_ONE, &point, 1);
}

/* Joins the wait's thread: it must end within the peer deadline. */
static void bg_wait_join(bg_wait_t *w) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += PEER_WAIT_MS / 1000 + 5;
    if (pthread_timedjoin_np(w->thread, NULL, &until) != 0) {
        fail_msg("a waiting thread did not end");
    }
}

/* A timepoint whose callback records its status and raises a local
 * signal to 1. */
typedef struct tp_record {
    ordo_timepoint_t timepoint;
    _Atomic int status;
    _Atomic int calls;
    ordo_signal_t *fired;
} tp_record_t;

static void tp_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    tp_record_t *r = ctx;
    atomic_store(&r->status, (int)status);
    atomic_fetch_add(&r->calls, 1);
    (void)ordo_signal_advance(r->fired, 1);
}

static void tp_arm(tp_record_t *r, ordo_signal_t *signal, uint64_t value) {
    memset(r, 0, sizeof *r);
    atomic_init(&r->status, -1);
    r->fired = test_signal_make(0);
    assert_ok(ordo_timepoint_arm(&r->timepoint, signal, value, tp_fire, r));
}

/* Waits for the callback; returns its status (and frees the record's
 * signal). */
static ordo_status_t tp_outcome(tp_record_t *r) {
    assert_ok(ordo_signal_wait(r->fired, 1, ordo_deadline_after_ms(PEER_WAIT_MS)));
    assert_int_equal(atomic_load(&r->calls), 1);
    assert_ok(ordo_signal_release(r->fired));
    return (ordo_status_t)atomic_load(&r->status);
}

/* ---- ping-pong ------------------------------------------------------------ */

/* This process is node 0 of a ring of n shared signals s[0..n-1]: for each
 * round r it advances s[1] to r and waits for s[0] to reach r; peer i
 * waits for s[i] to reach r and advances s[(i+1) % n] to r. Every wait has
 * a deadline of 30 s, so a lost wake-up fails the round. The two-process
 * ring passes its descriptors over a UNIX socket (ordo_fd_send), the
 * larger one by inheritance. */
static void ring(size_t n, uint64_t rounds, bool over_socket) {
    ordo_signal_t *s[4];
    int fds[4];
    for (size_t i = 0; i < n; ++i) {
        s[i] = shared_make(0);
        fds[i] = shared_fd(s[i]);
    }
    peer_t *p[4] = {NULL};
    int sv[2] = {-1, -1};
    if (over_socket) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    }
    for (size_t i = 1; i < n; ++i) {
        size_t next = (i + 1) % n;
        if (over_socket) {
            p[i] = PEER(&sv[1], 1, "pingpong", sock_arg(sv[1]), sock_arg(sv[1]), num(rounds));
            assert_ok(ordo_fd_send(sv[0], fds[i], test_deadline()));
            assert_ok(ordo_fd_send(sv[0], fds[next], test_deadline()));
        } else {
            int pass[2] = {fds[i], fds[next]};
            p[i] = PEER(pass, 2, "pingpong", num((uint64_t)fds[i]), num((uint64_t)fds[next]),
                        num(rounds));
        }
        peer_expect(p[i], "ready", NULL, 0);
    }
    if (over_socket) {
        close(sv[0]);
        close(sv[1]);
    }
    for (size_t i = 0; i < n; ++i) {
        close(fds[i]);
    }
    assert_ok(ordo_shared_signal_register(s[1]));
    const uint64_t start = ordo_time_now_ns();
    for (uint64_t r = 1; r <= rounds; ++r) {
        assert_ok(ordo_signal_advance(s[1], r));
        ordo_status_t st = ordo_signal_wait(s[0], r, ordo_deadline_after_ms(PEER_WAIT_MS));
        if (st != ORDO_OK) {
            fail_msg("%zu processes, round %" PRIu64 ": %s (%s)", n, r, ordo_status_name(st),
                     ordo_error_message());
        }
    }
    const uint64_t elapsed = ordo_time_now_ns() - start;
    print_message("  %zu processes: %" PRIu64 " round trips in %.3f s (%.2f us each)\n", n, rounds,
                  (double)elapsed / 1e9, (double)elapsed / 1e3 / (double)rounds);
    for (size_t i = 1; i < n; ++i) {
        peer_join_ok(p[i]);
    }
    assert_ok(ordo_shared_signal_unregister(s[1]));
    for (size_t i = 0; i < n; ++i) {
        assert_int_equal(query(s[i]), rounds);
        assert_ok(ordo_signal_release(s[i]));
    }
}

static void ping_pong_two_processes(void **state) {
    (void)state;
    ring(2, test_scaled(100000), true);
}

static void ping_pong_four_process_ring(void **state) {
    (void)state;
    ring(4, test_scaled(100000), false);
}

/* ---- abandonment ---------------------------------------------------------- */

/* kill -9 of a registered signaller: a waiter here (asleep in
 * ordo_signal_wait), a timepoint, a pollable descriptor and a waiter in
 * another process all get ORDO_ERR_ABANDONED, within the bound (with the
 * slack of abandon_bound_ns), with a message that names the dead pid. */
static void kill_9_of_a_signaller_abandons_every_waiter(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    peer_t *signaller = PEER(&fd, 1, "signal-then-hang", num((uint64_t)fd), "1");
    peer_expect(signaller, "ready", NULL, 0);
    peer_t *other = PEER(&fd, 1, "wait", num((uint64_t)fd), "2", num(PEER_WAIT_MS));
    peer_expect(other, "ready", NULL, 0);
    close(fd);
    assert_ok(ordo_signal_wait(s, 1, ORDO_DEADLINE_NOW));

    tp_record_t tp;
    tp_arm(&tp, s, 2);
    ordo_signal_fd_t *sfd = NULL;
    assert_ok(ordo_signal_fd_create(s, 2, &sfd));
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_BUSY);
    bg_wait_t here;
    bg_wait_one(&here, s, 2);
    await_futex_sleep(other->pid, other->pid);

    const uint64_t killed_at = ordo_time_now_ns();
    assert_int_equal(kill(signaller->pid, SIGKILL), 0);
    bg_wait_join(&here);
    peer_result_t there = peer_result(other);
    ordo_status_t tp_status = tp_outcome(&tp);
    int pollable = -1;
    assert_ok(ordo_signal_fd_get(sfd, &pollable));
    struct pollfd pfd = {.fd = pollable, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, (int)PEER_WAIT_MS), 1);
    const uint64_t polled_at = ordo_time_now_ns();

    const double bound_ms = (double)abandon_bound_ns() / 1e6;
    print_message("  abandoned after kill -9: waiter here %.1f ms, waiter in another process "
                  "%.1f ms (bound asserted: %.0f ms)\n",
                  (double)(here.end_ns - killed_at) / 1e6, (double)(there.end_ns - killed_at) / 1e6,
                  bound_ms);
    if (here.result != ORDO_ERR_ABANDONED) {
        fail_msg("the waiter here got %s (%s)", ordo_status_name(here.result), here.message);
    }
    assert_true(here.end_ns - killed_at <= abandon_bound_ns());
    if (!names_pid(here.message, signaller->pid)) {
        fail_msg("the wait's message \"%s\" does not name pid %d", here.message,
                 (int)signaller->pid);
    }
    assert_string_equal(there.status, "ORDO_ERR_ABANDONED");
    assert_true(there.end_ns > killed_at);
    assert_true(there.end_ns - killed_at <= abandon_bound_ns());
    if (!names_pid(there.message, signaller->pid)) {
        fail_msg("the other process's failure message \"%s\" does not name pid %d", there.message,
                 (int)signaller->pid);
    }
    assert_int_equal(tp_status, ORDO_ERR_ABANDONED);
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_ABANDONED);
    assert_true(polled_at - killed_at <= abandon_bound_ns() + 1000000000u);

    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
    assert_int_equal(failure, ORDO_ERR_ABANDONED);
    assert_true(names_pid(message, signaller->pid));
    uint64_t value = 0;
    assert_status(ordo_signal_query(s, &value), ORDO_ERR_ABANDONED);
    assert_int_equal(value, 1);
    /* Reached before the death: still reached. */
    assert_ok(ordo_signal_wait(s, 1, ORDO_DEADLINE_NOW));

    peer_join_ok(other);
    assert_true(peer_join(signaller, test_deadline()));
    assert_true(WIFSIGNALED(signaller->wstatus) && WTERMSIG(signaller->wstatus) == SIGKILL);
    assert_ok(ordo_signal_fd_destroy(sfd));
    assert_ok(ordo_signal_release(s));
}

/* A signaller that exits (exit(0), not a crash) while registered abandons
 * the signal too. */
static void exit_while_registered_abandons(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    bg_wait_t here;
    bg_wait_one(&here, s, 4);
    peer_t *p = PEER(&fd, 1, "exit-registered", num((uint64_t)fd), "3");
    close(fd);
    peer_join_ok(p);
    const uint64_t exited_seen = ordo_time_now_ns();
    bg_wait_join(&here);
    if (here.result != ORDO_ERR_ABANDONED) {
        fail_msg("the waiter got %s (%s)", ordo_status_name(here.result), here.message);
    }
    assert_true(names_pid(here.message, p->pid));
    /* Within the bound of the exit (seen here after the peer ended). */
    assert_true(here.end_ns < exited_seen || here.end_ns - exited_seen <= abandon_bound_ns());
    assert_ok(ordo_signal_wait(s, 3, ORDO_DEADLINE_NOW));
    assert_status(ordo_signal_wait(s, 4, ORDO_DEADLINE_NOW), ORDO_ERR_ABANDONED);
    assert_ok(ordo_signal_release(s));

    /* A process that opens the page only after the signaller ended (no
     * handle of it was open here then) reports the death too. */
    s = shared_make(0);
    fd = shared_fd(s);
    assert_ok(ordo_signal_release(s));
    p = PEER(&fd, 1, "exit-registered", num((uint64_t)fd), "1");
    peer_join_ok(p);
    s = shared_open(fd);
    close(fd);
    const uint64_t opened = ordo_time_now_ns();
    ordo_status_t st = ordo_signal_wait(s, 2, ordo_deadline_after_ms(PEER_WAIT_MS));
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("opened after the death: the wait got %s (%s)", ordo_status_name(st),
                 ordo_error_message());
    }
    assert_true(ordo_time_now_ns() - opened <= abandon_bound_ns());
    assert_true(names_pid(ordo_error_message(), p->pid));
    assert_ok(ordo_signal_release(s));
}

/* Whether the page behind fd lists pid as a live signaller. */
static bool page_lists(int fd, pid_t pid) {
    static shared_page_t page;
    assert_int_equal(pread(fd, &page, sizeof page, 0), (ssize_t)sizeof page);
    for (size_t i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        uint64_t word = atomic_load_explicit(&page.slots[i].word, memory_order_relaxed);
        if (slot_pid(word) == (uint32_t)pid && slot_state(word) == SLOT_LIVE) {
            return true;
        }
    }
    return false;
}

/* A reaper reads a signaller's LIVE slot, and the signaller unregisters
 * and exits; a process that got its pid again registers in the same slot
 * before the reaper, which saw the first one end, marks the word it read
 * DEAD. The slot's generation makes that word another: the mark fails,
 * and the new signaller is not reported. (The word was pid and state
 * only, and the mark failed the signal for a process that lives.) The
 * interleaving is made here on the page directly. */
static void a_slot_reused_by_the_same_pid_is_not_marked_dead(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    shared_page_t *page =
        mmap(NULL, ORDO_SHARED_SIGNAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(page != MAP_FAILED);
    /* This process's pid: the reaper here never watches it (a pid no
     * process has would be found dead by it, and the page failed). */
    const pid_t pid = getpid();
    assert_ok(ordo__shared_page_register(page, pid, 11, "test"));
    size_t slot = ORDO_SHARED_SIGNAL_SIGNALLERS_MAX;
    pid_t seen = 0;
    uint64_t start = 0, read_word = 0;
    for (size_t i = 0;
         i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX && slot == ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        if (ordo__shared_page_slot_read(page, i, &seen, &start, &read_word) && seen == pid) {
            slot = i;
        }
    }
    assert_true(slot < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX);
    assert_int_equal(start, 11);
    assert_true(ordo__shared_page_unregister(page, pid));
    assert_ok(ordo__shared_page_register(page, pid, 12, "test"));
    uint64_t again = 0;
    assert_true(ordo__shared_page_slot_read(page, slot, &seen, &start, &again));
    assert_int_equal(seen, pid);
    assert_int_equal(start, 12);
    assert_false(ordo__shared_page_slot_mark_dead(page, slot, read_word));
    assert_false(ordo__shared_page_slot_dead(page, slot, &seen, &again));
    /* The new registration's own word is marked. */
    assert_true(ordo__shared_page_slot_read(page, slot, &seen, &start, &again));
    assert_true(ordo__shared_page_slot_mark_dead(page, slot, again));
    uint64_t dead = 0;
    assert_true(ordo__shared_page_slot_dead(page, slot, &seen, &dead));
    assert_int_equal(seen, pid);
    assert_true(ordo__shared_page_slot_release(page, slot, dead));
    assert_false(ordo__shared_page_unregister(page, pid));
    assert_int_equal(munmap(page, ORDO_SHARED_SIGNAL_SIZE), 0);
    close(fd);
    ordo_status_t failure = ORDO_ERR_INTERNAL;
    assert_ok(ordo_signal_failure(s, &failure, NULL, 0));
    assert_int_equal(failure, ORDO_OK);
    assert_ok(ordo_signal_release(s));
}

/* A process registered through two handles of one signal stays a
 * signaller until both let go: one handle's unregister and release leave
 * the other's registration, and the process's exit then abandons the
 * signal. (The first handle used to unregister the process.) */
static void a_registration_lasts_while_any_handle_holds_it(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    peer_t *p = PEER(&fd, 1, "exit-registered-twice", num((uint64_t)fd), "3");
    close(fd);
    peer_join_ok(p);
    const uint64_t exited = ordo_time_now_ns();
    ordo_status_t st = ordo_signal_wait(s, 4, ordo_deadline_after_ms(PEER_WAIT_MS));
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("the wait got %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    assert_true(ordo_time_now_ns() - exited <= abandon_bound_ns());
    assert_true(names_pid(ordo_error_message(), p->pid));
    assert_ok(ordo_signal_release(s));

    /* Here too: two handles of one page, each registered; one's release
     * leaves the process registered (its slot still lists this pid). */
    s = shared_make(0);
    fd = shared_fd(s);
    ordo_signal_t *again = shared_open(fd);
    assert_ok(ordo_shared_signal_register(s));
    assert_ok(ordo_shared_signal_register(again));
    assert_ok(ordo_shared_signal_unregister(s));
    assert_true(page_lists(fd, getpid()));
    assert_ok(ordo_shared_signal_register(s));
    assert_ok(ordo_signal_release(again));
    assert_true(page_lists(fd, getpid()));
    assert_ok(ordo_shared_signal_unregister(s));
    assert_false(page_lists(fd, getpid()));
    assert_ok(ordo_signal_release(s));
    close(fd);
}

typedef struct tid_holder {
    _Atomic pid_t tid;
    ordo_signal_t *stop;
} tid_holder_t;

static void *tid_holder_main(void *arg) {
    tid_holder_t *h = arg;
    atomic_store(&h->tid, (pid_t)syscall(SYS_gettid));
    (void)ordo_signal_wait(h->stop, 1, test_deadline());
    return NULL;
}

/* A slot naming a thread that is not a process (pidfd_open refuses it) is
 * reported as a signaller that ended, as a pid no process has is: the
 * signal fails as abandoned, within the bound, and no reaper keeps looking
 * at the slot again. */
static void a_slot_naming_a_thread_is_reported_ended(void **state) {
    (void)state;
    tid_holder_t holder = {.stop = test_signal_make(0)};
    atomic_init(&holder.tid, 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, tid_holder_main, &holder), 0);
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&holder.tid) == 0) {
        assert_true(ordo_time_now_ns() < deadline);
        sched_yield();
    }
    const pid_t tid = atomic_load(&holder.tid);
    assert_true(tid != getpid());
    /* Refused (EINVAL, or ENOENT on newer kernels). */
    assert_true(syscall(SYS_pidfd_open, tid, 0) < 0 && (errno == EINVAL || errno == ENOENT));

    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    shared_page_t *page =
        mmap(NULL, ORDO_SHARED_SIGNAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(page != MAP_FAILED);
    const uint64_t start = ordo_time_now_ns();
    assert_ok(ordo__shared_page_register(page, tid, 1, "test")); /* moves registry_seq */
    ordo_status_t st = ordo_signal_wait(s, 1, ordo_deadline_after_ns(abandon_bound_ns()));
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("the wait got %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    assert_true(ordo_time_now_ns() - start < abandon_bound_ns());
    assert_true(names_pid(ordo_error_message(), tid));
    assert_int_equal(munmap(page, ORDO_SHARED_SIGNAL_SIZE), 0);
    close(fd);
    assert_ok(ordo_signal_release(s));
    assert_ok(ordo_signal_advance(holder.stop, 1));
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_ok(ordo_signal_release(holder.stop));
}

/* A signaller this process's reaper could not watch when it registered
 * (no descriptor left for its pidfd: the limit lowered for the scan) is
 * watched by a later scan, without waiting for another registration, so
 * its death is reported within the bound once descriptors are back. */
static void a_signaller_the_reaper_could_not_watch_is_watched_later(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0), *go = shared_make(0);
    int fds[2] = {shared_fd(go), shared_fd(s)};
    peer_t *p = PEER(fds, 2, "register-after", num((uint64_t)fds[0]), num((uint64_t)fds[1]), "1");
    peer_expect(p, "ready", NULL, 0);
    close(fds[0]);
    close(fds[1]);
    int probe = dup(0);
    assert_true(probe >= 0);
    close(probe);
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)probe; /* no descriptor can be made from here */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    assert_ok(ordo_signal_advance(go, 1));
    ordo_status_t registered = ordo_signal_wait(s, 1, ordo_deadline_after_ms(PEER_WAIT_MS));
    /* Scans after the registration, all of them short of descriptors. */
    bool settled = ordo__ipc_engine_settle(ordo_deadline_after_ms(PEER_WAIT_MS));
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_ok(registered);
    assert_true(settled);
    assert_int_equal(kill(p->pid, SIGKILL), 0);
    assert_true(peer_join(p, ordo_deadline_after_ms(PEER_WAIT_MS)));
    const uint64_t killed = ordo_time_now_ns();
    ordo_status_t st = ordo_signal_wait(s, 2, ordo_deadline_after_ms(PEER_WAIT_MS));
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("the wait got %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    assert_true(ordo_time_now_ns() - killed <= abandon_bound_ns());
    assert_ok(ordo_signal_release(go));
    assert_ok(ordo_signal_release(s));
}

/* A signaller that unregistered, released its handle, or destroyed it
 * while another reference to it remains (each of which unregisters it),
 * then exits abandons nothing: a wait well past the bound times out
 * instead. */
static void exit_after_unregistering_abandons_nothing(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    const char *commands[3] = {"exit-unregistered", "exit-released", "exit-destroyed-held"};
    for (uint64_t i = 0; i < 3; ++i) {
        peer_t *p = PEER(&fd, 1, commands[i], num((uint64_t)fd), num(5 + i));
        peer_join_ok(p);
        assert_ok(ordo_signal_wait(s, 5 + i, ORDO_DEADLINE_NOW));
        ordo_status_t st = ordo_signal_wait(s, 100, ordo_time_now_ns() + 2 * abandon_bound_ns());
        if (st != ORDO_ERR_TIMEOUT) {
            fail_msg("%s: the wait got %s (%s)", commands[i], ordo_status_name(st),
                     ordo_error_message());
        }
        ordo_status_t failure = ORDO_ERR_INTERNAL;
        assert_ok(ordo_signal_failure(s, &failure, NULL, 0));
        assert_int_equal(failure, ORDO_OK);
    }
    close(fd);
    /* This process registers and unregisters; twice each is a no-op. */
    assert_ok(ordo_shared_signal_register(s));
    assert_ok(ordo_shared_signal_register(s));
    assert_ok(ordo_shared_signal_unregister(s));
    assert_ok(ordo_shared_signal_unregister(s));
    assert_ok(ordo_signal_advance(s, 7));
    assert_int_equal(query(s), 7);
    assert_ok(ordo_signal_release(s));
}

/* ORDO_SHARED_SIGNAL_SIGNALLERS_MAX processes registered: one more is
 * refused; the death of one of them abandons the signal. */
static void signallers_are_limited(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    peer_t *p[ORDO_SHARED_SIGNAL_SIGNALLERS_MAX];
    for (unsigned i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        p[i] = PEER(&fd, 1, "signal-then-hang", num((uint64_t)fd), "0");
    }
    for (unsigned i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        peer_expect(p[i], "ready", NULL, 0);
    }
    close(fd);
    REFUSED(ORDO_ERR_RESOURCE_EXHAUSTED, ordo_shared_signal_register, s);
    /* Nothing changed. */
    assert_ok(ordo_signal_advance(s, 1));
    assert_int_equal(kill(p[7]->pid, SIGKILL), 0);
    ordo_status_t st = ordo_signal_wait(s, 2, ordo_deadline_after_ms(PEER_WAIT_MS));
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("the wait got %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    assert_true(names_pid(ordo_error_message(), p[7]->pid));
    assert_ok(ordo_signal_release(s));
}

/* ThreadSanitizer does not support threads started in a child forked
 * from a threaded process: the fork tests skip under it (cmocka's skip
 * leaves the test at once). */
static void skip_fork_under_tsan(void) {
#ifdef TEST_UNDER_TSAN
    print_message("  skipped under ThreadSanitizer: it does not support threads started in a "
                  "child forked from a threaded process\n");
    skip();
#endif
}

/* A child forked (no exec) from this process, which has shared signals
 * open and its engine's threads running, opens a handle of its own, is a
 * signaller, and abandons the signal when it exits registered. */
static void forked_child_opens_its_own_handle(void **state) {
    (void)state;
    skip_fork_under_tsan();
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    ordo_signal_t *go = shared_make(0);
    int go_fd = shared_fd(go);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ordo_signal_t *mine = NULL;
        ordo_signal_t *my_go = NULL;
        if (ordo_shared_signal_open_fd(fd, &mine) != ORDO_OK ||
            ordo_shared_signal_open_fd(go_fd, &my_go) != ORDO_OK) {
            _exit(11);
        }
        if (ordo_shared_signal_register(mine) != ORDO_OK ||
            ordo_signal_advance(mine, 1) != ORDO_OK) {
            _exit(12);
        }
        /* Waits for the parent through a handle of its own. */
        if (ordo_signal_wait(my_go, 1, ordo_deadline_after_ms(PEER_WAIT_MS)) != ORDO_OK) {
            _exit(13);
        }
        _exit(0); /* still registered */
    }
    assert_ok(ordo_signal_wait(s, 1, ordo_deadline_after_ms(PEER_WAIT_MS)));
    assert_ok(ordo_signal_advance(go, 1));
    ordo_status_t st = ordo_signal_wait(s, 2, ordo_deadline_after_ms(PEER_WAIT_MS));
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    if (st != ORDO_ERR_ABANDONED) {
        fail_msg("the wait got %s (%s)", ordo_status_name(st), ordo_error_message());
    }
    assert_true(names_pid(ordo_error_message(), pid));
    close(fd);
    close(go_fd);
    assert_ok(ordo_signal_release(go));
    assert_ok(ordo_signal_release(s));
}

static void child_tp_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)ctx;
    (void)status;
    (void)timepoint;
}

/* Whether the last call was refused as the parent's handle, naming api. */
static bool refused_as_parents(ordo_status_t st, const char *api) {
    return st == ORDO_ERR_INVALID_HANDLE && strstr(ordo_error_message(), api) &&
           strstr(ordo_error_message(), "fork") && strstr(ordo_error_message(), "its own");
}

/* A forked child's exit at a failed step: it fails `ready` first (the
 * page itself: the copied handle still reaches it), so the parent's wait
 * ends at once. */
static void child_gives_up(ordo_signal_t *ready, int code) {
    (void)ordo_signal_fail(ready, ORDO_ERR_ABORTED, "the child gave up");
    _exit(code);
}

/* A forked child given its parent's handle (copied by fork, fed by no
 * engine of the child's) is refused where it would arm a wait that never
 * ends or register a signaller nobody watches, with a message telling it
 * to open its own; the handle it opens itself works, fed by its own
 * engine. */
static void forked_child_is_refused_its_parents_handle(void **state) {
    (void)state;
    skip_fork_under_tsan();
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    ordo_signal_t *ready = shared_make(0);
    int ready_fd = shared_fd(ready);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ordo_signal_fd_t *sfd = NULL;
        if (!refused_as_parents(ordo_signal_fd_create(s, 1, &sfd), "ordo_signal_fd_create") ||
            sfd) {
            child_gives_up(ready, 11);
        }
        if (!refused_as_parents(ordo_shared_signal_register(s), "ordo_shared_signal_register")) {
            child_gives_up(ready, 12);
        }
        ordo_timepoint_t tp;
        memset(&tp, 0, sizeof tp);
        if (!refused_as_parents(ordo_timepoint_arm(&tp, s, 1, child_tp_fired, NULL),
                                "ordo_timepoint_arm")) {
            child_gives_up(ready, 13);
        }
        ordo_signal_point_t points[1] = {{s, 1}};
        size_t index = 0;
        if (!refused_as_parents(ordo_signal_wait_any(points, 1, ORDO_DEADLINE_NOW, &index),
                                "ordo_signal_wait_any") ||
            !refused_as_parents(ordo_signal_wait_all(points, 1, ORDO_DEADLINE_NOW),
                                "ordo_signal_wait_all")) {
            child_gives_up(ready, 14);
        }
        /* Its own handles, opened from the inherited descriptors. */
        ordo_signal_t *mine = NULL;
        ordo_signal_t *my_ready = NULL;
        if (ordo_shared_signal_open_fd(fd, &mine) != ORDO_OK ||
            ordo_shared_signal_open_fd(ready_fd, &my_ready) != ORDO_OK) {
            child_gives_up(ready, 15);
        }
        if (ordo_signal_fd_create(mine, 1, &sfd) != ORDO_OK ||
            ordo_signal_advance(my_ready, 1) != ORDO_OK) {
            child_gives_up(ready, 16);
        }
        int readable = -1;
        if (ordo_signal_fd_get(sfd, &readable) != ORDO_OK) {
            child_gives_up(ready, 17);
        }
        struct pollfd p = {.fd = readable, .events = POLLIN};
        if (poll(&p, 1, (int)PEER_WAIT_MS) != 1 || ordo_signal_fd_result(sfd) != ORDO_OK) {
            child_gives_up(ready, 18);
        }
        /* The parent's copies are the child's to release. */
        if (ordo_signal_fd_destroy(sfd) != ORDO_OK || ordo_signal_release(mine) != ORDO_OK ||
            ordo_signal_release(my_ready) != ORDO_OK || ordo_signal_release(s) != ORDO_OK ||
            ordo_signal_release(ready) != ORDO_OK) {
            _exit(19);
        }
        _exit(0);
    }
    /* The child's signal fd is armed before it says it is ready (or it
     * fails `ready` as it gives up). */
    ordo_status_t st = ordo_signal_wait(ready, 1, ordo_deadline_after_ms(PEER_WAIT_MS));
    if (st == ORDO_OK) {
        assert_ok(ordo_signal_advance(s, 1));
    }
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    assert_true(WIFEXITED(wstatus));
    if (st != ORDO_OK || WEXITSTATUS(wstatus) != 0) {
        fail_msg("the child exited with %d (the wait for it got %s)", WEXITSTATUS(wstatus),
                 ordo_status_name(st));
    }
    close(fd);
    close(ready_fd);
    assert_ok(ordo_signal_release(ready));
    assert_ok(ordo_signal_release(s));
}

/* ---- failures across the boundary ----------------------------------------- */

/* A peer fails the signal with a status and a message: the waits here (a
 * blocking wait, a timepoint, a link) receive the status and the message.
 * ORDO_ERR_CANCELLED from a producer is a failure, not a destroy of this
 * process's handle. */
static void failure_and_message_cross_the_boundary(void **state) {
    (void)state;
    const ordo_status_t statuses[2] = {ORDO_ERR_ABORTED, ORDO_ERR_CANCELLED};
    for (int k = 0; k < 2; ++k) {
        ordo_signal_t *s = shared_make(0);
        int fd = shared_fd(s);
        ordo_signal_t *target = test_signal_make(0);
        ordo_link_t link = {0};
        assert_ok(ordo_link_arm(&link, s, 1, target, 1));
        tp_record_t tp;
        tp_arm(&tp, s, 1);
        bg_wait_t here;
        bg_wait_one(&here, s, 1);
        peer_t *p =
            PEER(&fd, 1, "fail", num((uint64_t)fd), num((uint64_t)statuses[k]), "decoder crashed");
        close(fd);
        peer_join_ok(p);
        bg_wait_join(&here);
        if (here.result != statuses[k] || !strstr(here.message, "decoder crashed") ||
            strstr(here.message, "destroyed")) {
            fail_msg("%s: the wait got %s: \"%s\"", ordo_status_name(statuses[k]),
                     ordo_status_name(here.result), here.message);
        }
        assert_int_equal(tp_outcome(&tp), statuses[k]);
        ordo_status_t failure = ORDO_OK;
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
        assert_int_equal(failure, statuses[k]);
        assert_string_equal(message, "decoder crashed");
        /* The handle is failed, not destroyed. */
        uint64_t value = 99;
        assert_status(ordo_signal_query(s, &value), statuses[k]);
        assert_int_equal(value, 0);
        assert_status(ordo_signal_advance(s, 3), statuses[k]);
        /* The link carried the failure, as a failure. */
        assert_status(ordo_signal_wait(target, 1, test_deadline()), statuses[k]);
        assert_ok(ordo_signal_failure(target, &failure, message, sizeof message));
        assert_int_equal(failure, statuses[k]);
        if (!strstr(message, "decoder crashed") || strstr(message, "destroyed")) {
            fail_msg("the link's target failed with \"%s\"", message);
        }
        assert_ok(ordo_signal_release(target));
        assert_ok(ordo_signal_release(s));
    }

    /* A long message is cut to ORDO_SIGNAL_MESSAGE_MAX - 1 bytes. */
    char longer[300];
    memset(longer, 'm', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    peer_t *p = PEER(&fd, 1, "fail", num((uint64_t)fd), num(ORDO_ERR_DEVICE), longer);
    close(fd);
    peer_join_ok(p);
    ordo_status_t failure = ORDO_OK;
    char got[sizeof longer];
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_int_equal(failure, ORDO_ERR_DEVICE);
    assert_int_equal(strlen(got), ORDO_SIGNAL_MESSAGE_MAX - 1);
    assert_int_equal(strspn(got, "m"), ORDO_SIGNAL_MESSAGE_MAX - 1);
    /* Only the first failure is kept, across processes too. */
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, "second"));
    assert_ok(ordo_signal_failure(s, &failure, NULL, 0));
    assert_int_equal(failure, ORDO_ERR_DEVICE);
    assert_ok(ordo_signal_release(s));
}

/* A process killed between its claim of the page's failure and the
 * failure's publication (a child that claims it raw and exits): the
 * waiters here still get the failure, published for the dead claimer by
 * the first sleeper that looks, not only by a later failer. */
static void a_failure_whose_claimer_died_still_arrives(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        shared_page_t *raw =
            mmap(NULL, ORDO_SHARED_SIGNAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (raw == MAP_FAILED) {
            _exit(11);
        }
        uint64_t unclaimed = 0;
        uint64_t claim = ((uint64_t)(uint32_t)ORDO_ERR_ABORTED << 32) | (uint32_t)getpid();
        _exit(atomic_compare_exchange_strong(&raw->failure, &unclaimed, claim) ? 0 : 12);
    }
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    close(fd);
    assert_status(ordo_signal_wait(s, 5, ordo_deadline_after_ms(PEER_WAIT_MS)), ORDO_ERR_ABORTED);
    assert_status(ordo_signal_advance(s, 7), ORDO_ERR_ABORTED);
    assert_ok(ordo_signal_release(s));
}

/* Two peers and this process fail one signal at once, each with its own
 * status and message: exactly one failure is kept, whole (its status with
 * its own message), and every process reads the same one. */
static void concurrent_failures_keep_one_whole(void **state) {
    (void)state;
    const ordo_status_t statuses[3] = {ORDO_ERR_ABORTED, ORDO_ERR_DEVICE, ORDO_ERR_UNAVAILABLE};
    const char *messages[3] = {"from peer a", "from peer b", "from here"};
    const uint64_t rounds = test_scaled(40);
    unsigned wins[3] = {0, 0, 0};
    for (uint64_t round = 0; round < rounds; ++round) {
        ordo_signal_t *s = shared_make(0);
        ordo_signal_t *go = shared_make(0);
        int fds[2] = {shared_fd(s), shared_fd(go)};
        peer_t *p[2];
        for (int i = 0; i < 2; ++i) {
            p[i] = PEER(fds, 2, "fail", num((uint64_t)fds[0]), num((uint64_t)statuses[i]),
                        messages[i], num((uint64_t)fds[1]));
        }
        for (int i = 0; i < 2; ++i) {
            peer_expect(p[i], "ready", NULL, 0);
        }
        close(fds[0]);
        close(fds[1]);
        assert_ok(ordo_signal_advance(go, 1));
        assert_ok(ordo_signal_fail(s, statuses[2], messages[2]));
        ordo_status_t failure = ORDO_OK;
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
        int winner = -1;
        for (int i = 0; i < 3; ++i) {
            if (failure == statuses[i]) {
                winner = i;
            }
        }
        if (winner < 0 || strcmp(message, messages[winner]) != 0) {
            fail_msg("round %" PRIu64 ": the failure kept is %s \"%s\"", round,
                     ordo_status_name(failure), message);
        }
        ++wins[winner];
        char expected[256];
        snprintf(expected, sizeof expected, "%s %s", ordo_status_name(failure), message);
        for (int i = 0; i < 2; ++i) {
            char line[256];
            peer_expect(p[i], "failure", line, sizeof line);
            if (strcmp(line, expected) != 0) {
                fail_msg("round %" PRIu64 ": peer %d read \"%s\", this process \"%s\"", round, i,
                         line, expected);
            }
            peer_join_ok(p[i]);
        }
        /* Later readers too. */
        assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
        assert_int_equal(failure, statuses[winner]);
        assert_string_equal(message, messages[winner]);
        assert_ok(ordo_signal_release(go));
        assert_ok(ordo_signal_release(s));
        peers_end(NULL);
    }
    print_message("  first failures kept: peer a %u, peer b %u, this process %u\n", wins[0],
                  wins[1], wins[2]);
}

/* ---- streams -------------------------------------------------------------- */

typedef struct stage_here {
    ordo_signal_t *in;
    ordo_signal_t *out;
    uint64_t in_seen;
    uint64_t out_seen;
    int ran;
} stage_here_t;

static ordo_status_t stage_here_task(void *ctx) {
    stage_here_t *stage = ctx;
    (void)ordo_signal_query(stage->in, &stage->in_seen);
    (void)ordo_signal_query(stage->out, &stage->out_seen);
    stage->ran = 1;
    return ORDO_OK;
}

/* A pipeline over two processes: a stream here waits for a (raised here by
 * the host, after everything was submitted), runs a task and signals b; a
 * stream in the peer waits for b, runs a task and signals c; this process
 * waits for c. Then the same with a failed: the failure travels through
 * both streams to c. */
static void streams_wait_on_and_signal_shared_signals(void **state) {
    (void)state;
    ordo_device_t *device = NULL;
    assert_ok(ordo_device_open("cpu:0", &device));
    for (int failing = 0; failing < 2; ++failing) {
        ordo_signal_t *a = shared_make(0);
        ordo_signal_t *b = shared_make(0);
        ordo_signal_t *c = shared_make(0);
        int fds[2] = {shared_fd(b), shared_fd(c)};
        peer_t *p =
            PEER(fds, 2, "stream-stage", num((uint64_t)fds[0]), "1", num((uint64_t)fds[1]), "1");
        peer_expect(p, "ready", NULL, 0);
        close(fds[0]);
        close(fds[1]);
        ordo_stream_t *stream = NULL;
        assert_ok(ordo_stream_create(device, 0, &stream));
        stage_here_t stage = {.in = a, .out = b};
        assert_ok(ordo_shared_signal_register(b));
        assert_ok(ordo_stream_wait(stream, a, 1));
        assert_ok(ordo_stream_host_task(stream, stage_here_task, &stage));
        assert_ok(ordo_stream_signal(stream, b, 1));
        /* Nothing has run: the peer's stream is held back too. */
        assert_status(ordo_signal_wait(c, 1, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
        assert_int_equal(query(b), 0);
        if (!failing) {
            assert_ok(ordo_signal_advance(a, 1));
            assert_ok(ordo_signal_wait(c, 1, ordo_deadline_after_ms(PEER_WAIT_MS)));
            char line[256];
            peer_expect(p, "task", line, sizeof line);
            assert_string_equal(line, "in=1 out=0 ORDO_OK");
            peer_expect(p, "done", line, sizeof line);
            assert_string_equal(line, "ORDO_OK");
            assert_ok(ordo_stream_synchronize(stream, test_deadline()));
            assert_int_equal(stage.ran, 1);
            assert_int_equal(stage.in_seen, 1);
            assert_int_equal(stage.out_seen, 0);
        } else {
            assert_ok(ordo_signal_fail(a, ORDO_ERR_ABORTED, "upstream broke"));
            assert_status(ordo_signal_wait(c, 1, ordo_deadline_after_ms(PEER_WAIT_MS)),
                          ORDO_ERR_ABORTED);
            char line[256];
            peer_expect(p, "done", line, sizeof line);
            assert_string_equal(line, "ORDO_ERR_ABORTED");
            assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
            assert_int_equal(stage.ran, 0);
            ordo_status_t failure = ORDO_OK;
            assert_ok(ordo_signal_failure(b, &failure, NULL, 0));
            assert_int_equal(failure, ORDO_ERR_ABORTED);
        }
        peer_join_ok(p);
        assert_ok(ordo_shared_signal_unregister(b));
        assert_ok(ordo_stream_destroy(stream));
        assert_ok(ordo_signal_release(a));
        assert_ok(ordo_signal_release(b));
        assert_ok(ordo_signal_release(c));
    }
    assert_ok(ordo_device_release(device));
}

/* A stream's wait on a shared signal that fails ends with that failure's
 * status and message, never read as a destroy of the handle: many rounds,
 * the failure coming before and after the stream's worker reaches its
 * wait. */
static void stream_wait_takes_the_shared_failure(void **state) {
    (void)state;
    ordo_device_t *device = NULL;
    assert_ok(ordo_device_open("cpu:0", &device));
    const uint64_t rounds = test_scaled(4000);
    uint64_t wrong = 0;
    char first_wrong[512] = "";
    for (uint64_t round = 0; round < rounds; ++round) {
        ordo_signal_t *a = shared_make(0);
        ordo_stream_t *stream = NULL;
        assert_ok(ordo_stream_create(device, 0, &stream));
        assert_ok(ordo_stream_wait(stream, a, 1));
        for (uint64_t i = 0; i < round % 4 * 8; ++i) {
            sched_yield(); /* varies who comes first */
        }
        assert_ok(ordo_signal_fail(a, ORDO_ERR_ABORTED, "upstream broke"));
        ordo_status_t st = ordo_stream_synchronize(stream, test_deadline());
        const char *message = ordo_error_message();
        if (st != ORDO_ERR_ABORTED || !strstr(message, "upstream broke") ||
            strstr(message, "destroyed")) {
            if (!wrong++) {
                snprintf(first_wrong, sizeof first_wrong, "round %" PRIu64 ": %s: %s", round,
                         ordo_status_name(st), message);
            }
        }
        assert_ok(ordo_stream_destroy(stream));
        assert_ok(ordo_signal_release(a));
    }
    assert_ok(ordo_device_release(device));
    if (wrong) {
        fail_msg("%" PRIu64 " of %" PRIu64 " streams did not fail with the signal's failure; the "
                 "first: %s",
                 wrong, rounds, first_wrong);
    }
}

/* ---- multi-waits, timepoints, links, the async waiter --------------------- */

/* wait-all and wait-any over local and shared signals, each asleep before
 * a peer raises (or fails) the shared ones. */
static void multi_waits_mix_local_and_shared_signals(void **state) {
    (void)state;
    ordo_signal_t *local = test_signal_make(0);
    ordo_signal_t *s1 = shared_make(0);
    ordo_signal_t *s2 = shared_make(0);
    int fds[2] = {shared_fd(s1), shared_fd(s2)};

    /* wait-all: the local one is raised here, the shared ones there. */
    bg_wait_t w;
    ordo_signal_point_t all[3] = {{local, 1}, {s1, 1}, {s2, 2}};
    bg_wait_start(&w, FORM_ALL, all, 3);
    assert_ok(ordo_signal_advance(local, 1));
    peer_t *p = PEER(fds, 2, "advance", num((uint64_t)fds[0]), "1", num((uint64_t)fds[1]), "2");
    peer_join_ok(p);
    bg_wait_join(&w);
    assert_int_equal(w.result, ORDO_OK);

    /* wait-any: decided by the shared entry. */
    ordo_signal_point_t any[2] = {{local, 5}, {s1, 3}};
    bg_wait_start(&w, FORM_ANY, any, 2);
    p = PEER(fds, 1, "advance", num((uint64_t)fds[0]), "3");
    peer_join_ok(p);
    bg_wait_join(&w);
    assert_int_equal(w.result, ORDO_OK);
    assert_int_equal(w.index, 1);

    /* wait-any: a shared entry that fails decides it. */
    ordo_signal_point_t any_fail[3] = {{local, 5}, {s1, 10}, {s2, 3}};
    bg_wait_start(&w, FORM_ANY, any_fail, 3);
    p = PEER(&fds[1], 1, "fail", num((uint64_t)fds[1]), num(ORDO_ERR_ABORTED), "stage 2 failed");
    peer_join_ok(p);
    bg_wait_join(&w);
    assert_int_equal(w.result, ORDO_ERR_ABORTED);
    assert_int_equal(w.index, 2);
    assert_non_null(strstr(w.message, "stage 2 failed"));

    /* wait-all: returns at the failure, not at the deadline. */
    ordo_signal_point_t all_fail[2] = {{s1, 10}, {local, 5}};
    bg_wait_start(&w, FORM_ALL, all_fail, 2);
    const uint64_t start = ordo_time_now_ns();
    p = PEER(fds, 1, "fail", num((uint64_t)fds[0]), num(ORDO_ERR_DEVICE), "lost");
    peer_join_ok(p);
    bg_wait_join(&w);
    assert_int_equal(w.result, ORDO_ERR_DEVICE);
    assert_true(w.end_ns - start < (uint64_t)PEER_WAIT_MS * 1000000u / 2);
    assert_non_null(strstr(w.message, "lost"));

    close(fds[0]);
    close(fds[1]);
    assert_ok(ordo_signal_release(s1));
    assert_ok(ordo_signal_release(s2));
    assert_ok(ordo_signal_release(local));
}

typedef struct wait_record {
    _Atomic int status;
    _Atomic int calls;
    _Atomic int tid;
    ordo_signal_t *fired;
} wait_record_t;

static void waiter_fire(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    wait_record_t *r = ctx;
    atomic_store(&r->status, (int)status);
    atomic_store(&r->tid, (int)gettid_());
    atomic_fetch_add(&r->calls, 1);
    (void)ordo_signal_advance(r->fired, 1);
}

static ordo_status_t wait_record_outcome(wait_record_t *r) {
    assert_ok(ordo_signal_wait(r->fired, 1, ordo_deadline_after_ms(PEER_WAIT_MS)));
    assert_int_equal(atomic_load(&r->calls), 1);
    assert_ok(ordo_signal_release(r->fired));
    return (ordo_status_t)atomic_load(&r->status);
}

/* A timepoint, links both ways and the async waiter (worker and inline
 * callbacks, a timeout) on shared signals another process raises. */
static void timepoints_links_and_waiter_on_shared_signals(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    ordo_signal_t *s2 = shared_make(0);
    int fds[2] = {shared_fd(s), shared_fd(s2)};
    ordo_waiter_t *waiter = NULL;
    assert_ok(ordo_waiter_create(NULL, &waiter));

    tp_record_t tp;
    tp_arm(&tp, s, 3);
    ordo_signal_t *linked = test_signal_make(0);
    ordo_link_t link = {0};
    assert_ok(ordo_link_arm(&link, s, 3, linked, 7));
    wait_record_t on_worker = {.fired = test_signal_make(0)};
    wait_record_t inline_ = {.fired = test_signal_make(0)};
    wait_record_t late = {.fired = test_signal_make(0)};
    ordo_wait_id_t ids[3] = {0};
    assert_ok(ordo_waiter_wait(waiter, s, 3, ordo_deadline_after_ms(PEER_WAIT_MS), 0, waiter_fire,
                               &on_worker, &ids[0]));
    assert_ok(ordo_waiter_wait(waiter, s, 3, ordo_deadline_after_ms(PEER_WAIT_MS), ORDO_WAIT_INLINE,
                               waiter_fire, &inline_, &ids[1]));
    const uint64_t short_start = ordo_time_now_ns();
    assert_ok(ordo_waiter_wait(waiter, s, 100, ordo_deadline_after_ms(50), 0, waiter_fire, &late,
                               &ids[2]));

    peer_t *p = PEER(fds, 1, "advance", num((uint64_t)fds[0]), "3");
    peer_join_ok(p);
    assert_int_equal(tp_outcome(&tp), ORDO_OK);
    assert_ok(ordo_signal_wait(linked, 7, ordo_deadline_after_ms(PEER_WAIT_MS)));
    assert_int_equal(wait_record_outcome(&on_worker), ORDO_OK);
    assert_int_equal(wait_record_outcome(&inline_), ORDO_OK);
    /* The inline callback ran on a thread of this process, not this one. */
    assert_int_not_equal(atomic_load(&inline_.tid), (int)gettid_());
    assert_int_equal(wait_record_outcome(&late), ORDO_ERR_TIMEOUT);
    assert_true(ordo_time_now_ns() - short_start >= 50000000u);

    /* A link from a local signal to a shared one another process waits on. */
    ordo_signal_t *source = test_signal_make(0);
    ordo_link_t out = {0};
    assert_ok(ordo_link_arm(&out, source, 1, s2, 4));
    p = PEER(&fds[1], 1, "wait", num((uint64_t)fds[1]), "4", num(PEER_WAIT_MS));
    peer_expect(p, "ready", NULL, 0);
    assert_ok(ordo_signal_advance(source, 1));
    peer_result_t r = peer_result(p);
    assert_string_equal(r.status, "ORDO_OK");
    peer_join_ok(p);

    /* A waiter's wait on a shared signal that a peer fails. */
    wait_record_t failed = {.fired = test_signal_make(0)};
    assert_ok(ordo_waiter_wait(waiter, s2, 9, ordo_deadline_after_ms(PEER_WAIT_MS), 0, waiter_fire,
                               &failed, NULL));
    p = PEER(&fds[1], 1, "fail", num((uint64_t)fds[1]), num(ORDO_ERR_ABORTED), "late stage");
    peer_join_ok(p);
    assert_int_equal(wait_record_outcome(&failed), ORDO_ERR_ABORTED);

    /* A wait still pending on a shared signal when the waiter goes. */
    wait_record_t pending = {.fired = test_signal_make(0)};
    assert_ok(ordo_waiter_wait(waiter, s, 50, ordo_deadline_after_ms(PEER_WAIT_MS), 0, waiter_fire,
                               &pending, NULL));

    close(fds[0]);
    close(fds[1]);
    assert_ok(ordo_waiter_destroy(waiter));
    assert_int_equal(wait_record_outcome(&pending), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_release(source));
    assert_ok(ordo_signal_release(linked));
    assert_ok(ordo_signal_release(s));
    assert_ok(ordo_signal_release(s2));
}

/* ---- pollable descriptors ------------------------------------------------- */

static bool readable(ordo_signal_fd_t *sfd, int timeout_ms) {
    int fd = -1;
    assert_ok(ordo_signal_fd_get(sfd, &fd));
    assert_true(fd >= 0);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r;
    do {
        r = poll(&pfd, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    assert_true(r >= 0);
    return r == 1 && (pfd.revents & POLLIN);
}

/* A descriptor made inside a callback for a value reached already is
 * readable at once too (its timepoint's callback used to be queued behind
 * the running one, and the descriptor stayed unreadable until it ran). */
typedef struct fd_in_callback {
    ordo_signal_t *signal;
    int readable;
    ordo_status_t result;
} fd_in_callback_t;

static void fd_in_callback_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    fd_in_callback_t *c = ctx;
    ordo_signal_fd_t *sfd = NULL;
    c->result = ordo_signal_fd_create(c->signal, 1, &sfd);
    if (c->result == ORDO_OK) {
        c->readable = readable(sfd, 0);
        c->result = ordo_signal_fd_result(sfd);
        (void)ordo_signal_fd_destroy(sfd);
    }
}

/* Its life on one signal: not readable while pending; readable once
 * reached, failed or destroyed, with the result saying which. */
static void signal_fd_life(ordo_signal_t *(*make)(uint64_t)) {
    /* Reached already: readable at once. */
    ordo_signal_t *s = make(5);
    ordo_signal_fd_t *sfd = NULL;
    assert_ok(ordo_signal_fd_create(s, 5, &sfd));
    assert_true(readable(sfd, 0));
    assert_ok(ordo_signal_fd_result(sfd));
    assert_ok(ordo_signal_fd_destroy(sfd));
    /* The same from inside a callback of the signal (a local one: its
     * callback runs on this thread, in the advance). */
    bool shared = true;
    assert_ok(ordo_signal_is_shared(s, &shared));
    if (!shared) {
        fd_in_callback_t in_callback = {s, 0, ORDO_ERR_INTERNAL};
        ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
        assert_ok(ordo_timepoint_arm(&tp, s, 6, fd_in_callback_fire, &in_callback));
        assert_ok(ordo_signal_advance(s, 6));
        assert_ok(in_callback.result);
        assert_true(in_callback.readable);
    }

    /* Pending, then reached. Reading the descriptor changes nothing. */
    assert_ok(ordo_signal_fd_create(s, 7, &sfd));
    assert_false(readable(sfd, 0));
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_BUSY);
    assert_ok(ordo_signal_advance(s, 6));
    assert_false(readable(sfd, 0));
    assert_ok(ordo_signal_advance(s, 9));
    assert_true(readable(sfd, (int)PEER_WAIT_MS));
    assert_ok(ordo_signal_fd_result(sfd));
    int fd = -1;
    assert_ok(ordo_signal_fd_get(sfd, &fd));
    uint64_t counter = 0;
    assert_int_equal(read(fd, &counter, sizeof counter), (ssize_t)sizeof counter);
    assert_ok(ordo_signal_fd_result(sfd));
    assert_ok(ordo_signal_fd_destroy(sfd));

    /* Pending, then failed; one below the value stays reached. */
    ordo_signal_fd_t *below = NULL;
    assert_ok(ordo_signal_fd_create(s, 12, &sfd));
    assert_ok(ordo_signal_fd_create(s, 9, &below));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_DEVICE, "device lost"));
    assert_true(readable(sfd, (int)PEER_WAIT_MS));
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_DEVICE);
    assert_non_null(strstr(ordo_error_message(), "device lost"));
    assert_ok(ordo_signal_fd_result(below));
    assert_ok(ordo_signal_fd_destroy(sfd));
    assert_ok(ordo_signal_fd_destroy(below));
    /* Failed already: readable at once. */
    assert_ok(ordo_signal_fd_create(s, 20, &sfd));
    assert_true(readable(sfd, 0));
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_DEVICE);
    assert_ok(ordo_signal_fd_destroy(sfd));
    assert_ok(ordo_signal_release(s));

    /* The handle destroyed while pending: readable, ORDO_ERR_CANCELLED; the
     * object keeps the memory until its own destroy. */
    s = make(0);
    assert_ok(ordo_signal_fd_create(s, 1, &sfd));
    assert_ok(ordo_signal_destroy(s));
    assert_true(readable(sfd, (int)PEER_WAIT_MS));
    assert_status(ordo_signal_fd_result(sfd), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_fd_destroy(sfd));

    /* The object destroyed while pending: the signal goes on. */
    s = make(0);
    assert_ok(ordo_signal_fd_create(s, 1, &sfd));
    assert_ok(ordo_signal_fd_destroy(sfd));
    assert_ok(ordo_signal_advance(s, 1));
    assert_ok(ordo_signal_release(s));
}

static ordo_signal_t *local_make(uint64_t initial) {
    return test_signal_make(initial);
}

static void signal_fd_on_local_and_shared_signals(void **state) {
    (void)state;
    signal_fd_life(local_make);
    signal_fd_life(shared_make);

    /* Raised and failed by another process. */
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    ordo_signal_fd_t *sfd = NULL;
    ordo_signal_fd_t *later = NULL;
    assert_ok(ordo_signal_fd_create(s, 2, &sfd));
    assert_ok(ordo_signal_fd_create(s, 4, &later));
    peer_t *p = PEER(&fd, 1, "advance", num((uint64_t)fd), "2");
    assert_true(readable(sfd, (int)PEER_WAIT_MS));
    assert_ok(ordo_signal_fd_result(sfd));
    peer_join_ok(p);
    assert_false(readable(later, 0));
    p = PEER(&fd, 1, "fail", num((uint64_t)fd), num(ORDO_ERR_ABORTED), "peer gave up");
    assert_true(readable(later, (int)PEER_WAIT_MS));
    assert_status(ordo_signal_fd_result(later), ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "peer gave up"));
    peer_join_ok(p);
    close(fd);
    assert_ok(ordo_signal_fd_destroy(sfd));
    assert_ok(ordo_signal_fd_destroy(later));
    assert_ok(ordo_signal_release(s));
}

/* ---- handles -------------------------------------------------------------- */

/* Waits (bounded) until every thread of this process but the caller is
 * asleep (state S): the engine's watcher then is not in a pass, and takes
 * no handle without the engine's lock. */
static void await_other_threads_asleep(void) {
    const ordo_deadline_t deadline = test_deadline();
    const pid_t self = (pid_t)syscall(SYS_gettid);
    for (;;) {
        bool all = true;
        DIR *dir = opendir("/proc/self/task");
        assert_non_null(dir);
        for (struct dirent *e; all && (e = readdir(dir));) {
            pid_t tid = (pid_t)atoi(e->d_name);
            if (tid > 0 && tid != self) {
                char path[96];
                char text[512];
                snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
                FILE *f = fopen(path, "r");
                if (!f) {
                    continue; /* ended */
                }
                size_t n = fread(text, 1, sizeof text - 1, f);
                fclose(f);
                text[n] = '\0';
                const char *paren = strrchr(text, ')');
                all = paren && paren[1] == ' ' && paren[2] == 'S';
            }
        }
        closedir(dir);
        if (all) {
            return;
        }
        if (ordo_time_now_ns() >= deadline) {
            fail_msg("the other threads did not go to sleep in %d ms", TEST_WAIT_MS);
        }
        sched_yield();
    }
}

typedef struct destroy_on_reach {
    ordo_signal_t *signal;
    ordo_status_t destroyed;
    bool ran;
} destroy_on_reach_t;

/* Lets the engine go (the destroy's release takes its lock), then ends the
 * handle, inside the fail's pull of the mirror. */
static void destroy_on_reach(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status;
    (void)timepoint;
    destroy_on_reach_t *d = ctx;
    d->ran = true;
    ordo__ipc_engine_unlock();
    d->destroyed = ordo_signal_destroy(d->signal);
}

/* A fail that succeeds leaves the thread's message alone, even when the
 * handle is destroyed while the fail brings its mirror up to the page (a
 * timepoint reached by the pull destroys it here; another thread's
 * destroy at that moment is the same). The engine's lock keeps the
 * watcher from pulling the mirror first. */
static void a_fail_that_succeeds_keeps_the_message_while_a_destroy_races(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    ordo_signal_t *other = shared_open(fd);
    close(fd);
    assert_ok(ordo_signal_retain(s)); /* this thread's own, across the destroy */
    destroy_on_reach_t d = {.signal = s, .destroyed = ORDO_ERR_INTERNAL};
    ordo_timepoint_t tp;
    memset(&tp, 0, sizeof tp);
    assert_ok(ordo_timepoint_arm(&tp, s, 1, destroy_on_reach, &d));
    ordo__ipc_engine_lock();
    await_other_threads_asleep();
    assert_ok(ordo_signal_advance(other, 1)); /* the page, not this handle's mirror */
    assert_int_equal(ordo_fail(ORDO_ERR_INTERNAL, "before the fail"), ORDO_ERR_INTERNAL);
    ordo_status_t st = ordo_signal_fail(s, ORDO_ERR_ABORTED, "boom");
    const bool ran = d.ran;
    if (!ran) {
        ordo__ipc_engine_unlock();
    }
    assert_ok(st);
    assert_string_equal(ordo_error_message(), "before the fail");
    assert_true(ran);
    assert_ok(d.destroyed);
    ordo_status_t failure = ORDO_OK;
    assert_ok(ordo_signal_failure(other, &failure, NULL, 0));
    assert_int_equal(failure, ORDO_ERR_ABORTED);
    assert_ok(ordo_signal_release(s));
    assert_ok(ordo_signal_release(other));
}

/* Destroying this process's handle cancels its waits and timepoints only:
 * another handle here and the peer's handle keep working on the same
 * timeline. */
static void destroy_ends_only_this_handle(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    ordo_signal_t *second = shared_open(fd);
    peer_t *p = PEER(&fd, 1, "wait", num((uint64_t)fd), "5", num(PEER_WAIT_MS), "6");
    peer_expect(p, "ready", NULL, 0);
    await_futex_sleep(p->pid, p->pid);

    tp_record_t tp;
    tp_arm(&tp, s, 5);
    bg_wait_t on_first;
    bg_wait_t on_second;
    bg_wait_one(&on_first, s, 5);
    bg_wait_one(&on_second, second, 5);
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    bg_wait_join(&on_first);
    if (on_first.result != ORDO_ERR_CANCELLED || !strstr(on_first.message, "destroyed")) {
        fail_msg("the wait on the destroyed handle got %s: \"%s\"",
                 ordo_status_name(on_first.result), on_first.message);
    }
    assert_int_equal(tp_outcome(&tp), ORDO_ERR_CANCELLED);
    uint64_t value = 0;
    assert_status(ordo_signal_query(s, &value), ORDO_ERR_DESTROYED);
    assert_status(ordo_signal_advance(s, 5), ORDO_ERR_DESTROYED);
    REFUSED(ORDO_ERR_DESTROYED, ordo_shared_signal_register, s);
    assert_ok(ordo_signal_release(s));

    /* The timeline did not fail: the other handles see it whole. */
    ordo_status_t failure = ORDO_ERR_INTERNAL;
    assert_ok(ordo_signal_failure(second, &failure, NULL, 0));
    assert_int_equal(failure, ORDO_OK);
    ordo_signal_t *third = shared_open(fd);
    close(fd);
    assert_int_equal(query(third), 0);
    assert_ok(ordo_signal_advance(third, 5));
    bg_wait_join(&on_second);
    assert_int_equal(on_second.result, ORDO_OK);
    peer_result_t r = peer_result(p);
    assert_string_equal(r.status, "ORDO_OK");
    assert_ok(ordo_signal_wait(second, 6, ordo_deadline_after_ms(PEER_WAIT_MS)));
    peer_join_ok(p);
    assert_ok(ordo_signal_release(second));
    assert_ok(ordo_signal_release(third));
}

/* ---- the last release --------------------------------------------------------- */

typedef struct busy_page {
    ordo_signal_t *signal;
    _Atomic int stop;
} busy_page_t;

static void *busy_page_main(void *arg) {
    busy_page_t *b = arg;
    for (uint64_t v = 1; !atomic_load(&b->stop); ++v) {
        (void)ordo_signal_advance(b->signal, v);
    }
    return NULL;
}

typedef struct end_record {
    _Atomic int calls;
    _Atomic int status;
    _Atomic pid_t thread;
} end_record_t;

static void end_fire(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    end_record_t *r = ctx;
    atomic_store(&r->status, (int)status);
    atomic_store(&r->thread, (pid_t)syscall(SYS_gettid));
    atomic_fetch_add(&r->calls, 1);
}

static void nothing_fires(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)ctx, (void)status, (void)timepoint;
}

/* The program's last release of a handle destroys it before it returns,
 * on the releasing thread (ordo/signal.h), even while a thread of the
 * engine holds the handle for a pass (kept busy here by another page that
 * moves all the time, with a timepoint waiting on it): a timepoint armed
 * on the handle is cancelled by then, so its memory may go right after. */
static void the_last_release_ends_the_handle_on_its_thread(void **state) {
    (void)state;
    busy_page_t busy = {shared_make(0), 0};
    ordo_timepoint_t waiting = ORDO_TIMEPOINT_INIT;
    assert_ok(
        ordo_timepoint_arm(&waiting, busy.signal, ORDO_SIGNAL_VALUE_MAX, nothing_fires, NULL));
    pthread_t mover;
    assert_int_equal(pthread_create(&mover, NULL, busy_page_main, &busy), 0);
    const pid_t self = (pid_t)syscall(SYS_gettid);
    const uint64_t rounds = test_scaled(600);
    for (uint64_t i = 0; i < rounds; ++i) {
        ordo_signal_t *h = shared_make(0);
        end_record_t r = {0, -1, 0};
        ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
        assert_ok(ordo_timepoint_arm(&tp, h, 100, end_fire, &r));
        assert_ok(ordo_signal_release(h)); /* the only reference */
        if (atomic_load(&r.calls) != 1 || atomic_load(&r.thread) != self) {
            fail_msg("round %" PRIu64 ": the release returned with its timepoint %s", i,
                     atomic_load(&r.calls) ? "cancelled on another thread" : "still armed");
        }
        assert_int_equal(atomic_load(&r.status), ORDO_ERR_CANCELLED);
    }
    atomic_store(&busy.stop, 1);
    assert_int_equal(pthread_join(mover, NULL), 0);
    assert_ok(ordo_signal_destroy(busy.signal)); /* cancels `waiting` */
}

/* ---- named objects -------------------------------------------------------- */

static char names[4][ORDO_SHARED_SIGNAL_NAME_MAX];
static unsigned names_used;

static const char *test_name(const char *what) {
    assert_true(names_used < 4);
    char *name = names[names_used++];
    snprintf(name, ORDO_SHARED_SIGNAL_NAME_MAX, "/ordo-test-ipc-%d-%s", (int)getpid(), what);
    return name;
}

/* Removes the names a test made (also after a failed assertion). */
static int names_end(void **state) {
    peers_end(state);
    for (unsigned i = 0; i < names_used; ++i) {
        (void)ordo_shared_signal_unlink(names[i]);
    }
    names_used = 0;
    return 0;
}

static ordo_signal_t *named_make(const char *name, uint64_t initial) {
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    config.name = name;
    config.initial_value = initial;
    ordo_signal_t *signal = NULL;
    assert_ok(ordo_shared_signal_create(&config, &signal));
    return signal;
}

static void named_signals(void **state) {
    (void)state;
    const char *name = test_name("a");
    ordo_signal_t *s = named_make(name, 2);
    bool shared = false;
    assert_ok(ordo_signal_is_shared(s, &shared));
    assert_true(shared);
    assert_int_equal(query(s), 2);

    /* Creating it again is refused. */
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    config.name = name;
    ordo_signal_t *again = NULL;
    REFUSED_CLEARS(ORDO_ERR_BUSY, again, ordo_shared_signal_create, &config, &again);

    /* Opened by name in another process, and here. */
    peer_t *p = PEER(NULL, 0, "open-name", name, "3");
    peer_join_ok(p);
    assert_ok(ordo_signal_wait(s, 3, ORDO_DEADLINE_NOW));
    ordo_signal_t *here = NULL;
    assert_ok(ordo_shared_signal_open_name(name, &here));
    assert_ok(ordo_signal_advance(here, 4));
    assert_int_equal(query(s), 4);

    /* Unlinked: the name is gone, the handles stay. */
    assert_ok(ordo_shared_signal_unlink(name));
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_shared_signal_unlink, name);
    ordo_signal_t *missing = NULL;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, missing, ordo_shared_signal_open_name, name, &missing);
    assert_ok(ordo_signal_advance(s, 5));
    assert_int_equal(query(here), 5);

    /* The name can be made again: a new timeline. */
    ordo_signal_t *fresh = named_make(name, 0);
    assert_ok(ordo_signal_advance(fresh, 9));
    assert_int_equal(query(s), 5);
    assert_ok(ordo_shared_signal_unlink(name));
    assert_ok(ordo_signal_release(fresh));

    /* A name never made. */
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, missing, ordo_shared_signal_open_name,
                   test_name("never-made"), &missing);

    /* The longest name: one slash and ORDO_SHARED_SIGNAL_NAME_MAX - 2 bytes. */
    char longest[ORDO_SHARED_SIGNAL_NAME_MAX];
    int n = snprintf(longest, sizeof longest, "/ordo-test-ipc-%d-", (int)getpid());
    memset(longest + n, 'n', sizeof longest - 1 - (size_t)n);
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(strlen(longest), ORDO_SHARED_SIGNAL_NAME_MAX - 1);
    snprintf(names[names_used++], ORDO_SHARED_SIGNAL_NAME_MAX, "%s", longest);
    ordo_signal_t *long_named = named_make(longest, 1);
    ordo_signal_t *long_opened = NULL;
    assert_ok(ordo_shared_signal_open_name(longest, &long_opened));
    assert_int_equal(query(long_opened), 1);
    assert_ok(ordo_shared_signal_unlink(longest));
    assert_ok(ordo_signal_release(long_opened));
    assert_ok(ordo_signal_release(long_named));

    assert_ok(ordo_signal_release(here));
    assert_ok(ordo_signal_release(s));
}

/* A name is visible from the creator's shm_open on, before the page is
 * made: an opener polling for it either finds no such name or the whole
 * signal, never "not an ordo shared signal". */
typedef struct name_poller {
    const char *name;
    ordo_signal_t *opened;
    ordo_status_t result;
    char message[256];
} name_poller_t;

static void *name_poller_main(void *arg) {
    name_poller_t *p = arg;
    ordo_deadline_t deadline = ordo_deadline_after_ms(PEER_WAIT_MS);
    do {
        p->result = ordo_shared_signal_open_name(p->name, &p->opened);
    } while (p->result == ORDO_ERR_NOT_FOUND && (ordo_deadline_t)ordo_time_now_ns() < deadline);
    snprintf(p->message, sizeof p->message, "%s", ordo_error_message());
    return NULL;
}

static void opening_a_name_while_it_is_created(void **state) {
    (void)state;
    const uint64_t rounds = test_scaled(200);
    for (uint64_t i = 0; i < rounds; ++i) {
        char name[ORDO_SHARED_SIGNAL_NAME_MAX];
        snprintf(name, sizeof name, "/ordo-test-ipc-%d-made-%" PRIu64, (int)getpid(), i);
        name_poller_t p = {name, NULL, ORDO_ERR_INTERNAL, ""};
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, name_poller_main, &p), 0);
        ordo_signal_t *made = named_make(name, i);
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_ok(ordo_shared_signal_unlink(name));
        if (p.result != ORDO_OK) {
            fail_msg("round %" PRIu64 ": the opener got %s (%s)", i, ordo_status_name(p.result),
                     p.message);
        }
        assert_int_equal(query(p.opened), i);
        assert_ok(ordo_signal_release(p.opened));
        assert_ok(ordo_signal_release(made));
    }
}

/* A seam for the sizing of a new page: this program's ftruncate comes
 * before the C library's (ordo is linked in statically). Armed, its next
 * call fails as a full /dev/shm would (ENOSPC); with a name set, it first
 * plays another process that removes that name and creates its own signal
 * under it, as may happen between a create's shm_open and its sizing. */
static _Atomic int ftruncate_fails;
static const char *ftruncate_replaces;
static ordo_signal_t *ftruncate_replacement;

int ftruncate(int fd, off_t length) {
    static int (*real)(int, off_t);
    if (!real) {
        *(void **)&real = dlsym(RTLD_NEXT, "ftruncate");
    }
    if (!atomic_exchange(&ftruncate_fails, 0)) {
        return real(fd, length);
    }
    if (ftruncate_replaces) {
        (void)shm_unlink(ftruncate_replaces);
        ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
        config.name = ftruncate_replaces;
        config.initial_value = 5;
        if (ordo_shared_signal_create(&config, &ftruncate_replacement) != ORDO_OK) {
            ftruncate_replacement = NULL;
        }
    }
    errno = ENOSPC;
    return -1;
}

/* A create whose sizing fails removes its name, unless the name no longer
 * refers to its file: a live signal another process made under the name
 * meanwhile stays. */
static void a_failed_create_removes_only_its_own_name(void **state) {
    (void)state;
    const char *name = test_name("failed");
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    config.name = name;
    ordo_signal_t *out = NULL;

    /* Its own name: removed. */
    ftruncate_replaces = NULL;
    atomic_store(&ftruncate_fails, 1);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_MEMORY, out, ordo_shared_signal_create, &config, &out);
    assert_non_null(strstr(ordo_error_message(), "No space left"));
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, out, ordo_shared_signal_open_name, name, &out);

    /* Another's, made under the name while the create sized its file: kept. */
    ftruncate_replaces = name;
    atomic_store(&ftruncate_fails, 1);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_MEMORY, out, ordo_shared_signal_create, &config, &out);
    ftruncate_replaces = NULL;
    assert_non_null(ftruncate_replacement);
    ordo_signal_t *by_name = NULL;
    assert_ok(ordo_shared_signal_open_name(name, &by_name));
    assert_int_equal(query(by_name), 5);
    assert_ok(ordo_signal_advance(by_name, 6));
    assert_int_equal(query(ftruncate_replacement), 6);
    assert_ok(ordo_signal_release(by_name));
    assert_ok(ordo_signal_release(ftruncate_replacement));
    ftruncate_replacement = NULL;
    assert_ok(ordo_shared_signal_unlink(name));
}

/* A named signal's file cannot be sealed, so its descriptor is not handed
 * out (ordo_shared_signal_open_fd would refuse it): other processes open
 * it by its name. */
static void named_signal_descriptor_refused(void **state) {
    (void)state;
    const char *name = test_name("fd");
    ordo_signal_t *s = named_make(name, 2);
    int fd = 12345;
    assert_int_equal(ordo_shared_signal_fd(s, &fd), ORDO_ERR_INVALID_ARGUMENT);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(ordo_error_message(), "by its name"));
    ordo_signal_t *by_name = NULL;
    assert_ok(ordo_shared_signal_open_name(name, &by_name));
    assert_ok(ordo_shared_signal_unlink(name));
    assert_ok(ordo_signal_advance(by_name, 3));
    assert_int_equal(query(s), 3);
    assert_ok(ordo_signal_release(by_name));
    assert_ok(ordo_signal_release(s));
}

/* ---- bad input ------------------------------------------------------------ */

/* Refused with some error (the header names none), with a message that
 * names the function. */
#define REFUSED_SOME(fn, ...)                                                                      \
    do {                                                                                           \
        refusal_prime_message(#fn);                                                                \
        ordo_status_t st_ = fn(__VA_ARGS__);                                                       \
        if (st_ == ORDO_OK || !valid_status(st_)) {                                                \
            fail_msg("line %d: %s(%s) returned %s", __LINE__, #fn, #__VA_ARGS__,                   \
                     ordo_status_name(st_));                                                       \
        }                                                                                          \
        check_message(#fn, #__VA_ARGS__, __LINE__);                                                \
    } while (0)

/* A memfd holding size bytes; sealed against shrinking, as a shared
 * signal's is, when sealed. */
static int memfd_with(const void *bytes, size_t size, bool sealed) {
    int fd = memfd_create("ordo-test-ipc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    if (size) {
        assert_int_equal(pwrite(fd, bytes, size, 0), (ssize_t)size);
    }
    if (sealed) {
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
    return fd;
}

/* The page of a live shared signal, read through its descriptor. */
static void page_read(int fd, unsigned char *page) {
    assert_int_equal(pread(fd, page, ORDO_SHARED_SIGNAL_SIZE, 0), (ssize_t)ORDO_SHARED_SIGNAL_SIZE);
}

/* A process that sends a memfd it still holds may shrink it and seal it
 * while the receiver opens it. The receiver looks at the seal before the
 * size, so it either refuses the file or maps one that can no longer
 * shrink: never a SIGBUS. A thread stands for the sender here, racing each
 * open at a delay swept across the open's checks. */
typedef struct shrinker {
    _Atomic int go;   /* 1: shrink cur_fd after delay_ns */
    _Atomic int stop; /* end the thread */
    _Atomic int fd;
    _Atomic long delay_ns;
} shrinker_t;

static void *shrinker_main(void *arg) {
    shrinker_t *s = arg;
    for (;;) {
        while (!atomic_load(&s->go)) {
            if (atomic_load(&s->stop)) {
                return NULL;
            }
            sched_yield();
        }
        uint64_t until = ordo_time_now_ns() + (uint64_t)atomic_load(&s->delay_ns);
        while (ordo_time_now_ns() < until) {
        }
        int fd = atomic_load(&s->fd);
        (void)!ftruncate(fd, 0);
        (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
        atomic_store(&s->go, 0);
    }
}

static void a_sender_shrinking_its_memfd_cannot_crash_the_opener(void **state) {
    (void)state;
    ordo_signal_t *real = shared_make(0);
    unsigned char page[ORDO_SHARED_SIGNAL_SIZE];
    int real_fd = shared_fd(real);
    page_read(real_fd, page);
    close(real_fd);
    shrinker_t s = {0, 0, -1, 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, shrinker_main, &s), 0);
    uint64_t opened = 0, refused = 0;
    const uint64_t rounds = test_scaled(3000);
    for (uint64_t i = 0; i < rounds; ++i) {
        int fd = memfd_with(page, sizeof page, false);
        atomic_store(&s.fd, fd);
        atomic_store(&s.delay_ns, (long)(i % 4000));
        atomic_store(&s.go, 1);
        ordo_signal_t *opened_signal = NULL;
        if (ordo_shared_signal_open_fd(fd, &opened_signal) == ORDO_OK) {
            assert_ok(ordo_signal_release(opened_signal));
            ++opened;
        } else {
            ++refused;
        }
        while (atomic_load(&s.go)) {
            sched_yield();
        }
        close(fd);
    }
    atomic_store(&s.stop, 1);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(opened + refused, rounds);
    assert_ok(ordo_signal_release(real));
}

/* ordo_shared_signal_open_fd refuses what is not a signal page, with the
 * status the header gives each case, and clears its output. */
static void open_refuses_what_is_not_a_signal_page(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(3);
    int fd = shared_fd(s);
    unsigned char page[ORDO_SHARED_SIGNAL_SIZE];
    page_read(fd, page);
    ordo_signal_t *out = NULL;

    /* A closed descriptor, and one that never was. */
    int closed = dup2(fd, 1000); /* a number nothing else takes meanwhile */
    assert_int_equal(closed, 1000);
    close(closed);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, out, ordo_shared_signal_open_fd, closed, &out);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, out, ordo_shared_signal_open_fd, -1, &out);

    /* Files that are not signal pages. */
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(devnull >= 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, devnull, &out);
    close(devnull);
    char path[] = "/tmp/ordo-test-ipc-XXXXXX";
    int regular = mkstemp(path);
    assert_true(regular >= 0);
    unlink(path);
    unsigned char text[ORDO_SHARED_SIGNAL_SIZE];
    for (size_t i = 0; i < sizeof text; ++i) {
        text[i] = (unsigned char)("not an ordo signal page\n"[i % 24]);
    }
    assert_int_equal(pwrite(regular, text, sizeof text, 0), (ssize_t)sizeof text);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, regular, &out);
    close(regular);
    static const unsigned char zero_page[ORDO_SHARED_SIGNAL_SIZE];
    int zeros = memfd_with(zero_page, sizeof zero_page, true);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, zeros, &out);
    close(zeros);
    int empty = memfd_with(NULL, 0, true);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, empty, &out);
    close(empty);
    /* Truncated: fewer bytes than a page, even the right ones. */
    int truncated = memfd_with(page, ORDO_SHARED_SIGNAL_SIZE / 2, true);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, truncated, &out);
    close(truncated);
    int tiny = memfd_with(page, 64, true);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, tiny, &out);
    close(tiny);
    /* A real page's bytes in a memfd not sealed against shrinking, which
     * its sender could shrink under this process's mapping: refused
     * (docs/IPC.md), and accepted once sealed. */
    int unsealed = memfd_with(page, sizeof page, false);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, unsealed, &out);
    assert_int_equal(fcntl(unsealed, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    ordo_signal_t *copied = shared_open(unsealed);
    assert_int_equal(query(copied), 3);
    assert_ok(ordo_signal_release(copied));
    close(unsealed);
    /* Not files at all. */
    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, pipefd[0], &out);
    close(pipefd[0]);
    close(pipefd[1]);
    int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dir >= 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, dir, &out);
    close(dir);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(sock >= 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_fd, sock, &out);
    close(sock);

    /* A page with a field of the header corrupted (written through the
     * signal's own descriptor, then restored): the magic, which says it is
     * not a signal page; the layout version and the size, which say it is
     * one of another layout. */
    const struct {
        size_t offset;
        size_t size;
        uint64_t value;
        ordo_status_t expected;
    } corrupt[] = {
        {offsetof(shared_page_t, magic), 8, 0x4c4e47534f44524eull, ORDO_ERR_INVALID_ARGUMENT},
        {offsetof(shared_page_t, magic), 8, 0, ORDO_ERR_INVALID_ARGUMENT},
        {offsetof(shared_page_t, version), 4, ORDO_SHARED_SIGNAL_LAYOUT_VERSION + 1,
         ORDO_ERR_UNSUPPORTED},
        {offsetof(shared_page_t, version), 4, 0, ORDO_ERR_UNSUPPORTED},
        {offsetof(shared_page_t, size), 4, ORDO_SHARED_SIGNAL_SIZE * 2, ORDO_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; ++i) {
        unsigned char bytes[8];
        memcpy(bytes, &corrupt[i].value, sizeof bytes); /* little-endian: the low bytes */
        assert_int_equal(pwrite(fd, bytes, corrupt[i].size, (off_t)corrupt[i].offset),
                         (ssize_t)corrupt[i].size);
        REFUSED_CLEARS(corrupt[i].expected, out, ordo_shared_signal_open_fd, fd, &out);
        /* The same bytes in a file of their own. */
        unsigned char copy[ORDO_SHARED_SIGNAL_SIZE];
        page_read(fd, copy);
        int other = memfd_with(copy, sizeof copy, true);
        REFUSED_CLEARS(corrupt[i].expected, out, ordo_shared_signal_open_fd, other, &out);
        close(other);
        assert_int_equal(
            pwrite(fd, page + corrupt[i].offset, corrupt[i].size, (off_t)corrupt[i].offset),
            (ssize_t)corrupt[i].size);
        ordo_signal_t *restored = shared_open(fd);
        assert_ok(ordo_signal_release(restored));
    }

    /* The memfd is sealed against shrinking. */
    assert_int_not_equal(ftruncate(fd, 64), 0);
    assert_int_equal(errno, EPERM);

    /* The descriptor is close-on-exec: a peer that was not given it finds
     * it closed. */
    int flags = fcntl(fd, F_GETFD);
    assert_true(flags >= 0 && (flags & FD_CLOEXEC));
    peer_t *p = PEER(NULL, 0, "open-fails", num((uint64_t)fd));
    char line[128];
    peer_expect(p, "refused", line, sizeof line);
    assert_string_equal(line, "ORDO_ERR_INVALID_HANDLE");
    peer_join_ok(p);

    /* None of it touched the signal. */
    assert_int_equal(query(s), 3);
    ordo_signal_t *again = shared_open(fd);
    assert_int_equal(query(again), 3);
    assert_ok(ordo_signal_release(again));
    close(fd);
    assert_ok(ordo_signal_release(s));
}

/* The names a shared-memory object may not have. */
static void bad_names_are_refused(void) {
    char too_long[ORDO_SHARED_SIGNAL_NAME_MAX + 1];
    too_long[0] = '/';
    memset(too_long + 1, 'n', sizeof too_long - 2);
    too_long[sizeof too_long - 1] = '\0';
    const char *bad[] = {"", "no-slash", "/", "/a/b", "//x", "/x/", "x/y", "/.", "/.."};
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    ordo_signal_t *out = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        config.name = bad[i];
        REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_create, &config, &out);
        REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_name, bad[i], &out);
        REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_unlink, bad[i]);
    }
    /* A name one byte too long: refused as a malformed argument or as out
     * of range (the header does not say which). */
    config.name = too_long;
    memset(&out, SENTINEL_BYTE, sizeof out);
    ordo_status_t st = ordo_shared_signal_create(&config, &out);
    assert_true(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_OUT_OF_RANGE);
    check_message("ordo_shared_signal_create", "too long", __LINE__);
    assert_null(out);
    st = ordo_shared_signal_open_name(too_long, &out);
    assert_true(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_OUT_OF_RANGE);
    assert_null(out);
    st = ordo_shared_signal_unlink(too_long);
    assert_true(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_OUT_OF_RANGE);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_open_name, NULL, &out);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_unlink, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_open_name, "/x", NULL);
}

/* A descriptor output of a refused call holds no descriptor: -1 (or the
 * empty value 0). */
#define FD_CLEARED(fd) assert_true((fd) == -1 || (fd) == 0)

static void entry_points_refuse_bad_input(void **state) {
    (void)state;
    /* Warm up: the first shared signal starts this process's watcher. The
     * count is taken, and checked, with the engine settled: a pass of its
     * threads holds a reference to each open signal, so the last release
     * of one (here or in an earlier test) may free its blocks on the
     * watcher's thread a moment after the program let go of it. */
    ordo_signal_t *warm = shared_make(0);
    assert_ok(ordo_signal_release(warm));
    assert_true(ordo__ipc_engine_settle(test_deadline()));
    size_t before = refusal_live_blocks();

    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    assert_int_equal(config.initial_value, 0);
    assert_null(config.name);
    assert_int_equal(config.flags, 0);
    ordo_signal_t *out = NULL;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_create, &config, NULL);
    config.flags = 1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, out, ordo_shared_signal_create, &config, &out);
    config.flags = 0;
    config.initial_value = ORDO_SIGNAL_VALUE_MAX + 1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, out, ordo_shared_signal_create, &config, &out);
    config.initial_value = ORDO_SIGNAL_VALUE_MAX;
    ordo_signal_t *top = NULL;
    assert_ok(ordo_shared_signal_create(&config, &top));
    assert_int_equal(query(top), ORDO_SIGNAL_VALUE_MAX);
    assert_ok(ordo_signal_wait(top, ORDO_SIGNAL_VALUE_MAX, ORDO_DEADLINE_NOW));
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_advance, top, ORDO_SIGNAL_VALUE_MAX + 1);
    assert_ok(ordo_signal_release(top));

    ordo_signal_t *s = shared_make(0);
    ordo_signal_t *local = test_signal_make(0);
    ordo_device_t *device = NULL;
    ordo_stream_t *stream = NULL;
    assert_ok(ordo_device_open("cpu:0", &device));
    assert_ok(ordo_stream_create(device, 0, &stream));
    ordo_signal_t *wrong = AS(ordo_signal_t, stream);
    int fd = shared_fd(s);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_open_fd, fd, NULL);

    bad_names_are_refused();

    int out_fd = 12345;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_fd, local, &out_fd);
    FD_CLEARED(out_fd);
    out_fd = 12345;
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_fd, NULL, &out_fd);
    FD_CLEARED(out_fd);
    out_fd = 12345;
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_fd, wrong, &out_fd);
    FD_CLEARED(out_fd);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_fd, s, NULL);

    bool shared = true;
    assert_ok(ordo_signal_is_shared(local, &shared));
    assert_false(shared);
    assert_ok(ordo_signal_is_shared(s, &shared));
    assert_true(shared);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, shared, ordo_signal_is_shared, NULL, &shared);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, shared, ordo_signal_is_shared, wrong, &shared);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_is_shared, s, NULL);

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_register, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_register, wrong);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_register, local);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_unregister, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_shared_signal_unregister, wrong);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_shared_signal_unregister, local);

    /* Descriptors over a socket. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_ok(ordo_fd_send(sv[0], fd, test_deadline()));
    int got = -1;
    assert_ok(ordo_fd_receive(sv[1], test_deadline(), &got));
    assert_true(got >= 0 && got != fd);
    int flags = fcntl(got, F_GETFD);
    assert_true(flags >= 0 && (flags & FD_CLOEXEC));
    ordo_signal_t *received = shared_open(got);
    close(got);
    assert_ok(ordo_signal_advance(received, 2));
    assert_int_equal(query(s), 2);
    assert_ok(ordo_signal_release(received));
    const uint64_t start = ordo_time_now_ns();
    out_fd = 12345;
    REFUSED(ORDO_ERR_TIMEOUT, ordo_fd_receive, sv[1], ordo_deadline_after_ms(20), &out_fd);
    FD_CLEARED(out_fd);
    assert_true(ordo_time_now_ns() - start >= 20000000u);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_fd_receive, sv[1], ORDO_DEADLINE_NOW, NULL);
    /* Data that carries no descriptor is not one. */
    assert_int_equal(write(sv[0], "x", 1), 1);
    out_fd = 12345;
    REFUSED_SOME(ordo_fd_receive, sv[1], ordo_deadline_after_ms(200), &out_fd);
    FD_CLEARED(out_fd);
    close(sv[0]);
    out_fd = 12345;
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_fd_receive, sv[1], test_deadline(), &out_fd);
    FD_CLEARED(out_fd);
    close(sv[1]);
    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    REFUSED_SOME(ordo_fd_send, pipefd[1], fd, test_deadline());
    out_fd = 12345;
    REFUSED_SOME(ordo_fd_receive, pipefd[0], ORDO_DEADLINE_NOW, &out_fd);
    FD_CLEARED(out_fd);
    close(pipefd[0]);
    close(pipefd[1]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    REFUSED_SOME(ordo_fd_send, sv[0], -1, test_deadline());
    REFUSED_SOME(ordo_fd_send, -1, fd, test_deadline());
    close(sv[0]);
    close(sv[1]);

    /* Pollable descriptors. */
    ordo_signal_fd_t *sfd = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, sfd, ordo_signal_fd_create, NULL, 1, &sfd);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, sfd, ordo_signal_fd_create, wrong, 1, &sfd);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, sfd, ordo_signal_fd_create, s, ORDO_SIGNAL_VALUE_MAX + 1,
                   &sfd);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, sfd, ordo_signal_fd_create, local, UINT64_MAX, &sfd);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_fd_create, s, 1, NULL);
    out_fd = 12345;
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_get, NULL, &out_fd);
    FD_CLEARED(out_fd);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_get, GARBAGE(ordo_signal_fd_t), &out_fd);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_result, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_result, GARBAGE(ordo_signal_fd_t));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_destroy, GARBAGE(ordo_signal_fd_t));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fd_destroy, AS(ordo_signal_fd_t, stream));
    assert_ok(ordo_signal_fd_create(s, 1, &sfd));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_fd_get, sfd, NULL);
    assert_ok(ordo_signal_fd_destroy(sfd));

    /* Destroyed handles. */
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    REFUSED(ORDO_ERR_DESTROYED, ordo_shared_signal_register, s);
    REFUSED_CLEARS(ORDO_ERR_DESTROYED, sfd, ordo_signal_fd_create, s, 1, &sfd);
    assert_ok(ordo_signal_release(s));

    close(fd);
    assert_ok(ordo_signal_release(local));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_device_release(device));
    assert_true(ordo__ipc_engine_settle(test_deadline()));
    assert_int_equal(refusal_live_blocks(), before);
}

/* A send to a peer that does not read waits for room until its deadline,
 * on a blocking socket too, and sends nothing; once the peer has read, the
 * descriptor goes through. */
static void a_send_to_a_peer_that_does_not_read_ends_at_its_deadline(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    int fd = shared_fd(s);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    /* The socket stays blocking; only the filling does not block. */
    int flags = fcntl(sv[0], F_GETFL);
    assert_true(flags >= 0);
    char filler[4096];
    memset(filler, 'f', sizeof filler);
    while (send(sv[0], filler, sizeof filler, MSG_DONTWAIT) > 0) {
    }
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    assert_int_equal(fcntl(sv[0], F_GETFL), flags);
    assert_false(flags & O_NONBLOCK);

    const uint64_t start = ordo_time_now_ns();
    REFUSED(ORDO_ERR_TIMEOUT, ordo_fd_send, sv[0], fd, ordo_deadline_after_ms(50));
    assert_true(ordo_time_now_ns() - start >= 50000000u);
    assert_non_null(strstr(ordo_error_message(), "not reading"));
    REFUSED(ORDO_ERR_TIMEOUT, ordo_fd_send, sv[0], fd, ORDO_DEADLINE_NOW);

    /* The peer reads everything: nothing of the refused sends was sent. */
    while (recv(sv[1], filler, sizeof filler, MSG_DONTWAIT) > 0) {
    }
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    assert_ok(ordo_fd_send(sv[0], fd, test_deadline()));
    int got = -1;
    assert_ok(ordo_fd_receive(sv[1], test_deadline(), &got));
    ordo_signal_t *received = shared_open(got);
    close(got);
    assert_ok(ordo_signal_advance(received, 3));
    assert_int_equal(query(s), 3);
    assert_ok(ordo_signal_release(received));
    close(sv[0]);
    close(sv[1]);
    close(fd);
    assert_ok(ordo_signal_release(s));
}

/* A destroyed handle hands out no descriptor (ordo/signal.h: calls on a
 * destroyed signal get ORDO_ERR_DESTROYED). */
static void destroyed_handle_gives_no_descriptor(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(0);
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    int out_fd = 12345;
    refusal_prime_message("ordo_shared_signal_fd");
    ordo_status_t st = ordo_shared_signal_fd(s, &out_fd);
    if (st == ORDO_OK) {
        close(out_fd);
    }
    assert_ok(ordo_signal_release(s));
    if (st != ORDO_ERR_DESTROYED) {
        fail_msg("ordo_shared_signal_fd on a destroyed handle returned %s, not ORDO_ERR_DESTROYED",
                 ordo_status_name(st));
    }
    check_message("ordo_shared_signal_fd", "destroyed", __LINE__);
    FD_CLEARED(out_fd);
}

/* ---- a hostile page -------------------------------------------------------- */

static const uint64_t interesting[] = {
    0,
    1,
    2,
    3,
    UINT64_MAX,
    ORDO_SIGNAL_VALUE_MAX,
    ORDO_SIGNAL_VALUE_MAX + 1,
    1ull << 63,
    1ull << 62,
    1ull << 61,
    0x7fffffffu,
    0x80000000u,
    0xffffffffu,
    ORDO_SHARED_SIGNAL_SIZE,
    ORDO_SHARED_SIGNAL_SIZE + 1,
    ORDO_SIGNAL_MESSAGE_MAX,
    ORDO_SHARED_SIGNAL_SIGNALLERS_MAX,
    ORDO_SHARED_SIGNAL_SIGNALLERS_MAX + 1,
    ORDO_STATUS_COUNT_,
    ORDO_ERR_ABANDONED,
    ORDO_ERR_CANCELLED,
    0x0101010101010101ull,
};
#define INTERESTING_COUNT (sizeof interesting / sizeof interesting[0])

static uint64_t hostile_word(uint64_t *seed) {
    uint64_t pick = test_rand(seed);
    if (pick % 4 == 0) {
        return test_rand(seed);
    }
    if (pick % 4 == 1) {
        return (uint64_t)getpid() | (test_rand(seed) % 2 ? 0 : (uint64_t)1 << 32);
    }
    return interesting[(pick >> 8) % INTERESTING_COUNT];
}

/* One round of scribbling, from the valid page (pristine) or on top of
 * what is there. */
static void scribble(unsigned char *page, const unsigned char *pristine, uint64_t *seed) {
    uint64_t mode = test_rand(seed) % 8;
    if (mode != 5) {
        memcpy(page, pristine, ORDO_SHARED_SIGNAL_SIZE);
    }
    if (mode == 0 || mode == 5) {
        /* A few aligned words (the header's fields are most likely there). */
        uint64_t n = 1 + test_rand(seed) % 4;
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t at = test_rand(seed) % 64; /* the first 512 bytes */
            if (test_rand(seed) % 4 == 0) {
                at = test_rand(seed) % (ORDO_SHARED_SIGNAL_SIZE / 8);
            }
            uint64_t word = hostile_word(seed);
            memcpy(page + at * 8, &word, sizeof word);
        }
    } else if (mode == 1) {
        /* Flipped bits. */
        uint64_t n = 1 + test_rand(seed) % 8;
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t r = test_rand(seed);
            page[r % 512] ^= (unsigned char)(1u << ((r >> 16) % 8));
        }
    } else if (mode == 2) {
        /* All random. */
        for (size_t i = 0; i < ORDO_SHARED_SIGNAL_SIZE; i += 8) {
            uint64_t word = test_rand(seed);
            memcpy(page + i, &word, sizeof word);
        }
    } else if (mode == 3) {
        /* A run of one byte (an unterminated message, a full table). */
        uint64_t r = test_rand(seed);
        size_t at = (size_t)(r % ORDO_SHARED_SIGNAL_SIZE);
        size_t len = (size_t)((r >> 16) % (ORDO_SHARED_SIGNAL_SIZE - at)) + 1;
        memset(page + at, (int)((r >> 32) & 0xff), len);
    } else if (mode == 6) {
        /* A signaller slot: this process, pid 1, a pid no process has, a
         * random one; live, claimed or any state; a start time right or
         * wrong. */
        uint64_t slot = test_rand(seed) % ORDO_SHARED_SIGNAL_SIGNALLERS_MAX;
        uint64_t r = test_rand(seed);
        uint64_t pids[4] = {(uint64_t)getpid(), 1, 4194303, r >> 40};
        uint64_t state = (r >> 8) % 4 == 3 ? (r >> 12) & 0xffffffffu : (r >> 8) % 3;
        uint64_t word = pids[r % 4] << 32 | state;
        uint64_t start = (r >> 20) % 2 ? 0 : test_rand(seed);
        shared_page_t *p = (shared_page_t *)page;
        memcpy((unsigned char *)&p->slots[slot].word, &word, sizeof word);
        memcpy((unsigned char *)&p->slots[slot].start_time, &start, sizeof start);
    } else if (mode == 7) {
        /* The failure's fields: the claim (a status, valid or not, and a
         * pid), the FAILED bit, a message without its terminator. */
        shared_page_t *p = (shared_page_t *)page;
        uint64_t r = test_rand(seed);
        uint64_t status = (r >> 16) % 3 == 0 ? (r >> 24) & 0xffffffffu : (r >> 24) % 20;
        uint64_t claim = r % 4 == 0 ? 0 : status << 32 | (uint32_t)(r >> 8);
        memcpy((unsigned char *)&p->failure, &claim, sizeof claim);
        if ((r >> 40) % 2) {
            memset(p->message, 'x', sizeof p->message);
        }
        if ((r >> 41) % 2) {
            uint64_t state = (test_rand(seed) % 100) | (uint64_t)1 << 63;
            memcpy((unsigned char *)&p->state, &state, sizeof state);
        }
    } else if (mode == 4) {
        /* Aligned 32-bit words (futex words, counts, pids). */
        uint64_t n = 1 + test_rand(seed) % 6;
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t at = test_rand(seed) % 128;
            uint32_t word = (uint32_t)hostile_word(seed);
            memcpy(page + at * 4, &word, sizeof word);
        }
    }
}

typedef struct hostile_stats {
    uint64_t waits;
    uint64_t worst_overshoot_ns;
    uint64_t bad_status;
    uint64_t late;
} hostile_stats_t;

/* A wait's deadline: it returns by then, give or take the slack (the
 * sanitizers' divisor times 500 ms). */
static void hostile_check_time(hostile_stats_t *stats, ordo_deadline_t deadline, uint64_t now) {
    ++stats->waits;
    if (now > deadline) {
        uint64_t over = now - deadline;
        if (over > stats->worst_overshoot_ns) {
            stats->worst_overshoot_ns = over;
        }
        if (over > 500000000ull * ORDO_TEST_SCALE_DIVISOR) {
            ++stats->late;
        }
    }
}

static void hostile_check_status(hostile_stats_t *stats, ordo_status_t st) {
    if (!valid_status(st)) {
        ++stats->bad_status;
    }
}

/* Every call a process makes on its handle, against whatever the page
 * holds now. */
static void hostile_calls(ordo_signal_t *s, ordo_signal_t *local, uint64_t *seed, uint64_t round,
                          hostile_stats_t *stats) {
    uint64_t value = 0;
    hostile_check_status(stats, ordo_signal_query(s, &value));
    uint64_t target = test_rand(seed) % 2 ? test_rand(seed) % 16 : value + 1;
    if (target > ORDO_SIGNAL_VALUE_MAX) {
        target = ORDO_SIGNAL_VALUE_MAX;
    }
    ordo_deadline_t deadline =
        round % 4 == 0 ? ordo_deadline_after_ms(1) : ordo_time_now_ns(); /* a poll */
    hostile_check_status(stats, ordo_signal_wait(s, target, deadline));
    hostile_check_time(stats, deadline, ordo_time_now_ns());
    hostile_check_status(stats, ordo_signal_advance(s, test_rand(seed) % 32));
    if (round % 7 == 3) {
        hostile_check_status(stats, ordo_signal_fail(s, ORDO_ERR_ABORTED, "hostile round"));
    }
    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    ordo_status_t st = ordo_signal_failure(s, &failure, message, sizeof message);
    hostile_check_status(stats, st);
    hostile_check_status(stats, failure);
    if (st == ORDO_OK && strnlen(message, sizeof message) == sizeof message) {
        ++stats->bad_status; /* unterminated */
    }
    if (round % 8 == 0) {
        ordo_signal_point_t points[2] = {{local, 1}, {s, target}};
        size_t index = 0;
        deadline = ordo_deadline_after_ms(1);
        hostile_check_status(stats, ordo_signal_wait_any(points, 2, deadline, &index));
        hostile_check_time(stats, deadline, ordo_time_now_ns());
        deadline = ordo_deadline_after_ms(1);
        hostile_check_status(stats, ordo_signal_wait_all(points, 2, deadline));
        hostile_check_time(stats, deadline, ordo_time_now_ns());
    }
    if (round % 16 == 0) {
        ordo_signal_fd_t *sfd = NULL;
        st = ordo_signal_fd_create(s, target, &sfd);
        hostile_check_status(stats, st);
        if (st == ORDO_OK) {
            hostile_check_status(stats, ordo_signal_fd_result(sfd));
            hostile_check_status(stats, ordo_signal_fd_destroy(sfd));
        }
    }
    if (round % 32 == 0) {
        hostile_check_status(stats, ordo_shared_signal_register(s));
        hostile_check_status(stats, ordo_shared_signal_unregister(s));
    }
}

typedef struct scribbler {
    unsigned char *page;
    const unsigned char *pristine;
    uint64_t seed;
    _Atomic int stop;
    uint64_t rounds;
} scribbler_t;

static void *scribbler_main(void *arg) {
    scribbler_t *sc = arg;
    while (!atomic_load(&sc->stop)) {
        scribble(sc->page, sc->pristine, &sc->seed);
        ++sc->rounds;
        if (sc->rounds % 64 == 0) {
            sched_yield();
        }
    }
    return NULL;
}

typedef struct hostile_waiter {
    ordo_signal_t *signal;
    _Atomic int stop;
    hostile_stats_t stats;
} hostile_waiter_t;

static void *hostile_waiter_main(void *arg) {
    hostile_waiter_t *w = arg;
    uint64_t target = 1;
    while (!atomic_load(&w->stop)) {
        ordo_deadline_t deadline = ordo_deadline_after_ms(2);
        hostile_check_status(&w->stats, ordo_signal_wait(w->signal, target, deadline));
        hostile_check_time(&w->stats, deadline, ordo_time_now_ns());
        target = target * 3 % 1000003;
    }
    return NULL;
}

static void hostile_report(const char *phase, const hostile_stats_t *stats) {
    print_message("  hostile page, %s: %" PRIu64 " waits, worst overshoot %.2f ms\n", phase,
                  stats->waits, (double)stats->worst_overshoot_ns / 1e6);
    if (stats->bad_status || stats->late) {
        fail_msg("%s: %" PRIu64 " calls returned no status at all, %" PRIu64
                 " waits returned past their deadline by over %d ms",
                 phase, stats->bad_status, stats->late, 500 * ORDO_TEST_SCALE_DIVISOR);
    }
}

/* A peer that scribbles over the page (played here, through a mapping of
 * the descriptor) cannot crash this process nor hold a wait past its
 * deadline: rounds of scribbling, each followed by every call on the
 * handle, then scribbling in a thread while others wait and call. A
 * timepoint keeps the watcher thread on the page throughout; afterwards
 * the watcher still serves a healthy signal. */
static void hostile_page_cannot_crash_or_hang(void **state) {
    (void)state;
    ordo_signal_t *s = shared_make(5);
    int fd = shared_fd(s);
    unsigned char *page =
        mmap(NULL, ORDO_SHARED_SIGNAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(page != MAP_FAILED);
    static unsigned char pristine[ORDO_SHARED_SIGNAL_SIZE];
    memcpy(pristine, page, sizeof pristine);
    ordo_signal_t *local = test_signal_make(0);
    tp_record_t watch;
    tp_arm(&watch, s, ORDO_SIGNAL_VALUE_MAX);

    uint64_t seed = 0x9e3779b97f4a7c15ull;
    hostile_stats_t stats = {0};
    const uint64_t rounds = test_scaled(4000);
    for (uint64_t round = 0; round < rounds; ++round) {
        scribble(page, pristine, &seed);
        hostile_calls(s, local, &seed, round, &stats);
    }
    hostile_report("rounds", &stats);

    /* Concurrently: a scribbler, a waiter, and the calls here. */
    scribbler_t sc = {.page = page, .pristine = pristine, .seed = 0x1234567ull};
    hostile_waiter_t hw = {.signal = s};
    assert_ok(ordo_signal_retain(s));
    pthread_t scribbling = test_thread_start(scribbler_main, &sc);
    pthread_t waiting = test_thread_start(hostile_waiter_main, &hw);
    hostile_stats_t concurrent = {0};
    const uint64_t concurrent_rounds = test_scaled(1500);
    for (uint64_t round = 0; round < concurrent_rounds; ++round) {
        hostile_calls(s, local, &seed, round, &concurrent);
    }
    atomic_store(&sc.stop, 1);
    atomic_store(&hw.stop, 1);
    test_join_bounded(scribbling);
    test_join_bounded(waiting);
    assert_ok(ordo_signal_release(s));
    hostile_report("concurrent, calls", &concurrent);
    hostile_report("concurrent, waiter", &hw.stats);
    print_message("  hostile page: %" PRIu64 " rounds of scribbling, then %" PRIu64
                  " concurrent ones\n",
                  rounds, sc.rounds);

    /* The handle ends cleanly, whatever the page says; its timepoint
     * fires (with the failure the page claims, or the destroy). */
    assert_ok(ordo_signal_destroy(s));
    ordo_status_t watched = tp_outcome(&watch);
    assert_true(valid_status(watched) && watched != ORDO_OK);
    munmap(page, ORDO_SHARED_SIGNAL_SIZE);
    close(fd);
    assert_ok(ordo_signal_release(local));

    /* The watcher still serves a healthy signal another process raises. */
    ordo_signal_t *healthy = shared_make(0);
    int hfd = shared_fd(healthy);
    tp_record_t tp;
    tp_arm(&tp, healthy, 1);
    peer_t *p = PEER(&hfd, 1, "advance", num((uint64_t)hfd), "1");
    close(hfd);
    peer_join_ok(p);
    assert_int_equal(tp_outcome(&tp), ORDO_OK);
    assert_ok(ordo_signal_release(healthy));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(ping_pong_two_processes, peers_end),
        cmocka_unit_test_teardown(ping_pong_four_process_ring, peers_end),
        cmocka_unit_test_teardown(kill_9_of_a_signaller_abandons_every_waiter, peers_end),
        cmocka_unit_test_teardown(exit_while_registered_abandons, peers_end),
        cmocka_unit_test_teardown(exit_after_unregistering_abandons_nothing, peers_end),
        cmocka_unit_test_teardown(a_registration_lasts_while_any_handle_holds_it, peers_end),
        cmocka_unit_test_teardown(a_slot_reused_by_the_same_pid_is_not_marked_dead, peers_end),
        cmocka_unit_test_teardown(a_signaller_the_reaper_could_not_watch_is_watched_later,
                                  peers_end),
        cmocka_unit_test_teardown(a_slot_naming_a_thread_is_reported_ended, peers_end),
        cmocka_unit_test_teardown(signallers_are_limited, peers_end),
        cmocka_unit_test_teardown(forked_child_opens_its_own_handle, peers_end),
        cmocka_unit_test_teardown(forked_child_is_refused_its_parents_handle, peers_end),
        cmocka_unit_test_teardown(failure_and_message_cross_the_boundary, peers_end),
        cmocka_unit_test_teardown(concurrent_failures_keep_one_whole, peers_end),
        cmocka_unit_test_teardown(a_failure_whose_claimer_died_still_arrives, peers_end),
        cmocka_unit_test_teardown(streams_wait_on_and_signal_shared_signals, peers_end),
        cmocka_unit_test_teardown(stream_wait_takes_the_shared_failure, peers_end),
        cmocka_unit_test_teardown(multi_waits_mix_local_and_shared_signals, peers_end),
        cmocka_unit_test_teardown(timepoints_links_and_waiter_on_shared_signals, peers_end),
        cmocka_unit_test_teardown(signal_fd_on_local_and_shared_signals, peers_end),
        cmocka_unit_test_teardown(destroy_ends_only_this_handle, peers_end),
        cmocka_unit_test_teardown(a_fail_that_succeeds_keeps_the_message_while_a_destroy_races,
                                  peers_end),
        cmocka_unit_test_teardown(the_last_release_ends_the_handle_on_its_thread, peers_end),
        cmocka_unit_test_teardown(named_signals, names_end),
        cmocka_unit_test_teardown(named_signal_descriptor_refused, names_end),
        cmocka_unit_test_teardown(a_failed_create_removes_only_its_own_name, names_end),
        cmocka_unit_test_teardown(opening_a_name_while_it_is_created, names_end),
        cmocka_unit_test_teardown(open_refuses_what_is_not_a_signal_page, peers_end),
        cmocka_unit_test_teardown(a_sender_shrinking_its_memfd_cannot_crash_the_opener, peers_end),
        cmocka_unit_test_teardown(entry_points_refuse_bad_input, peers_end),
        cmocka_unit_test_teardown(a_send_to_a_peer_that_does_not_read_ends_at_its_deadline,
                                  peers_end),
        cmocka_unit_test_teardown(destroyed_handle_gives_no_descriptor, peers_end),
        cmocka_unit_test_teardown(hostile_page_cannot_crash_or_hang, peers_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
