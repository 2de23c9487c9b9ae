/* Benchmarks of signals shared between processes (ordo/shared_signal.h)
 * against the primitives two processes use without ordo.
 *
 * ipc_signal_pingpong: a round trip between two processes, each side
 * raising its signal and waiting for the other's. Baselines: a pipe pair
 * (8-byte writes and reads), an eventfd pair, and a process-shared pthread
 * mutex and condition variable pair with a counter in a shared page.
 *
 * ipc_wake_idle: one wake-up of a waiter asleep in another process, from
 * the advance to the waiter's return (the waiter reads CLOCK_MONOTONIC on
 * waking and reports it through the shared page). Each wake waits until
 * the waiter has announced its value and the kernel shows it asleep
 * (/proc/PID/task/PID/stat state 'S'), then 500 us more. Baseline: a raw
 * futex word in a shared page (FUTEX_WAIT/FUTEX_WAKE, not private). The
 * two alternate in rounds, each round a child process of its own.
 *
 * ipc_abandon: from kill -9 of a registered signaller process to the last
 * of three waiters (two processes and a thread of this one) returning
 * ORDO_ERR_ABANDONED; median and max over the runs (the contract's bound
 * is ORDO_SHARED_SIGNAL_ABANDON_BOUND_MS).
 *
 * The other side of each benchmark is a child started with fork and exec
 * of /proc/self/exe as `ordo __ipc-child ...`: a fresh process that opens
 * its own handles from the descriptors it inherits. A parent-death signal
 * ends the children if this process ends; every wait is bounded, and an
 * alarm bounds each benchmark as a whole (a pipe or eventfd read has no
 * deadline of its own), so a bug fails the run instead of hanging it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "ordo/shared_signal.h"
#include "ordo/signal.h"
#include "ordo/status.h"

/* Any single wait longer than this is a failure, not a measurement. */
#define IPC_WAIT_MS 10000u
/* The bound on one benchmark as a whole (the alarm). */
#define IPC_ALARM_S 240u
/* Waiters of ipc_abandon: two child processes and a thread of this one. */
#define ABANDON_WAITERS 3
#define ABANDON_CHILD_WAITERS 2

/* ---- the shared page -------------------------------------------------- */

/* One side of the process-shared condition variable pair. */
typedef struct condvar_side {
    _Alignas(64) pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint64_t value; /* under mutex */
} condvar_side_t;

/* One waiter of ipc_abandon. */
typedef struct abandon_slot {
    _Alignas(64) _Atomic uint64_t waiting; /* 1 once about to wait */
    _Atomic uint64_t woke_at;              /* CLOCK_MONOTONIC ns on return */
    _Atomic int32_t status;                /* what the wait returned */
    _Atomic uint32_t done;
    _Atomic int32_t tid; /* the waiting thread */
} abandon_slot_t;

/* The page a benchmark shares with its child (a memfd, mapped by both). */
typedef struct ipc_page {
    _Alignas(64) _Atomic uint64_t ready; /* the child's handles are open */
    /* ipc_wake_idle: the value the child is about to wait for, the time it
     * woke (ns), and the last value it has reported. */
    _Alignas(64) _Atomic uint64_t waiting;
    _Atomic uint64_t woke_at;
    _Atomic uint64_t acked;
    _Alignas(64) _Atomic uint32_t futex_word; /* the raw futex baseline */
    condvar_side_t side[2];                   /* 0: parent to child, 1: back */
    abandon_slot_t waiter[ABANDON_WAITERS];
} ipc_page_t;

_Static_assert(sizeof(ipc_page_t) <= 4096, "the shared page is one page");

typedef struct page_handle {
    int fd;
    ipc_page_t *page;
} page_handle_t;

static ipc_page_t *page_map(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 4096) {
        return NULL; /* a shorter file would fault (SIGBUS) when touched */
    }
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

static page_handle_t page_create(void) {
    page_handle_t h = {memfd_create("ordo-bench-ipc", MFD_CLOEXEC), NULL};
    if (h.fd < 0 || ftruncate(h.fd, 4096) != 0 || !(h.page = page_map(h.fd))) {
        bench_fail("cannot make a shared page (memfd)");
    }
    return h;
}

static void page_destroy(page_handle_t *h) {
    munmap(h->page, 4096);
    close(h->fd);
}

/* ---- bounds: the alarm, deadlines ------------------------------------- */

static const char *volatile watchdog_what = "";

static void watchdog_fire(int sig) {
    (void)sig;
    static const char head[] = "ordo bench: ";
    static const char tail[] = " did not finish in time (a wait hung)\n";
    const char *what = watchdog_what;
    ssize_t ignored = write(2, head, sizeof head - 1);
    ignored = write(2, what, strlen(what));
    ignored = write(2, tail, sizeof tail - 1);
    (void)ignored;
    _exit(1); /* the children follow: their parent-death signal */
}

static void watchdog_arm(const char *what) {
    watchdog_what = what;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(IPC_ALARM_S);
}

static void watchdog_disarm(void) {
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static struct timespec timespec_of(ordo_deadline_t deadline) {
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    return ts;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

/* Waits, polling every 50 us, until *word is at least value. */
static void poll_until(_Atomic uint64_t *word, uint64_t value, const char *what) {
    ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
    while (atomic_load(word) < value) {
        if (ordo_deadline_remaining_ns(deadline) == 0) {
            bench_fail(what);
        }
        sleep_ns(50000);
    }
}

/* The scheduler state of thread tid of process pid ('R', 'S', ...), from
 * /proc; '?' if it cannot be read. */
static char thread_state(pid_t pid, pid_t tid) {
    char path[64];
    char text[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return '?';
    }
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) {
        return '?';
    }
    text[n] = '\0';
    /* "pid (comm) S ...": comm may hold anything, so the last ')'. */
    char *paren = strrchr(text, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* Waits until the thread is asleep (state 'S'). */
static void await_asleep(pid_t pid, pid_t tid, const char *what) {
    ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
    char state;
    while ((state = thread_state(pid, tid)) != 'S') {
        if (state == '?' || ordo_deadline_remaining_ns(deadline) == 0) {
            bench_fail(what);
        }
        sleep_ns(20000);
    }
}

/* ---- child processes -------------------------------------------------- */

/* Starts `ordo __ipc-child ROLE IMPL PAGE_FD FD0 FD1 ROUNDS INDEX SLOT`.
 * The descriptors given (-1: none) are let through the exec; the child
 * pins itself to slot (-1: not pinned). It is killed if this thread ends. */
static pid_t spawn_child(const char *role, const char *impl, int page_fd, int fd0, int fd1,
                         uint64_t rounds, int index, int slot) {
    char numbers[6][24];
    snprintf(numbers[0], sizeof numbers[0], "%d", page_fd);
    snprintf(numbers[1], sizeof numbers[1], "%d", fd0);
    snprintf(numbers[2], sizeof numbers[2], "%d", fd1);
    snprintf(numbers[3], sizeof numbers[3], "%llu", (unsigned long long)rounds);
    snprintf(numbers[4], sizeof numbers[4], "%d", index);
    snprintf(numbers[5], sizeof numbers[5], "%d", slot);
    char *argv[] = {"ordo",     "__ipc-child", (char *)role, (char *)impl, numbers[0], numbers[1],
                    numbers[2], numbers[3],    numbers[4],   numbers[5],   NULL};
    pid_t parent = getpid();
    /* The child inherits the CPUs of the thread that forks: all of them,
     * so that it can pin itself where it is told. */
    bench_unpin();
    pid_t pid = fork();
    if (pid < 0) {
        bench_fail("fork failed");
    }
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1);
        }
        int fds[3] = {page_fd, fd0, fd1};
        for (int i = 0; i < 3; ++i) {
            if (fds[i] >= 0) {
                fcntl(fds[i], F_SETFD, 0);
            }
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return pid;
}

/* Waits (bounded) for the child to end; it must exit 0, or with
 * expect_signal when that is not 0. */
static void reap_child(pid_t pid, int expect_signal, const char *what) {
    ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
        if (ordo_deadline_remaining_ns(deadline) == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            bench_fail(what);
        }
        sleep_ns(100000);
    }
    int ok = got == pid && (expect_signal ? WIFSIGNALED(status) && WTERMSIG(status) == expect_signal
                                          : WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!ok) {
        bench_fail(what);
    }
}

/* Children whose end is checked later (reap_deferred): a process with
 * threads may take a while to exit (a thread sanitizer's runtime sleeps a
 * second at exit), which the next run need not wait for. */
typedef struct deferred_child {
    pid_t pid;
    int expect_signal;
    const char *what;
} deferred_child_t;

static deferred_child_t *deferred;
static size_t deferred_count, deferred_capacity;

static void reap_later(pid_t pid, int expect_signal, const char *what) {
    if (deferred_count == deferred_capacity) {
        size_t capacity = deferred_capacity ? 2 * deferred_capacity : 64;
        deferred_child_t *grown = realloc(deferred, capacity * sizeof *grown);
        if (!grown) {
            bench_fail("out of memory");
        }
        deferred = grown;
        deferred_capacity = capacity;
    }
    deferred[deferred_count++] = (deferred_child_t){pid, expect_signal, what};
}

static void reap_deferred(void) {
    for (size_t i = 0; i < deferred_count; ++i) {
        reap_child(deferred[i].pid, deferred[i].expect_signal, deferred[i].what);
    }
    free(deferred);
    deferred = NULL;
    deferred_count = deferred_capacity = 0;
}

/* A child reports a failure on stderr and exits 1; the parent's bounded
 * waits and reap_child turn that into a failed run. */
static _Noreturn void child_fail(const char *role, const char *what, ordo_status_t status) {
    fprintf(stderr, "ordo bench: %s child: %s%s%s%s%s\n", role, what, status ? ": " : "",
            status ? ordo_status_name(status) : "", status ? ": " : "",
            status ? ordo_error_message() : "");
    exit(1);
}

static ordo_signal_t *open_signal(const char *role, int fd) {
    ordo_signal_t *signal = NULL;
    ordo_status_t st = ordo_shared_signal_open_fd(fd, &signal);
    if (st != ORDO_OK) {
        child_fail(role, "cannot open the shared signal", st);
    }
    close(fd);
    return signal;
}

/* A descriptor for the child to open the signal with (close-on-exec:
 * spawn_child lets it through). */
static int signal_fd_of(ordo_signal_t *signal) {
    int fd = -1;
    if (ordo_shared_signal_fd(signal, &fd) != ORDO_OK) {
        bench_fail("cannot get a shared signal's descriptor");
    }
    return fd;
}

static ordo_signal_t *create_shared(void) {
    ordo_shared_signal_config_t config = ordo_shared_signal_config_default();
    ordo_signal_t *signal = NULL;
    if (ordo_shared_signal_create(&config, &signal) != ORDO_OK) {
        bench_fail("cannot create a shared signal");
    }
    return signal;
}

/* ---- the ping-pong implementations ------------------------------------ */

typedef enum pp_impl { PP_ORDO, PP_PIPE, PP_EVENTFD, PP_CONDVAR, PP_IMPL_COUNT } pp_impl_t;

static const char *const pp_names[PP_IMPL_COUNT] = {"ordo", "pipe", "eventfd", "pshared_condvar"};

/* One end of a ping-pong: what it raises (send) and waits on (recv). */
typedef struct pp_end {
    pp_impl_t impl;
    ipc_page_t *page;
    ordo_signal_t *send_signal;
    ordo_signal_t *recv_signal;
    int send_fd;
    int recv_fd;
    int send_side; /* condvar sides */
    int recv_side;
} pp_end_t;

static int pp_set(pp_end_t *e, uint64_t value) {
    switch (e->impl) {
    case PP_ORDO:
        return ordo_signal_advance(e->send_signal, value) == ORDO_OK ? 0 : -1;
    case PP_PIPE:
        return write(e->send_fd, &value, sizeof value) == (ssize_t)sizeof value ? 0 : -1;
    case PP_EVENTFD: {
        uint64_t one = 1;
        return write(e->send_fd, &one, sizeof one) == (ssize_t)sizeof one ? 0 : -1;
    }
    case PP_CONDVAR: {
        condvar_side_t *s = &e->page->side[e->send_side];
        pthread_mutex_lock(&s->mutex);
        s->value = value;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->mutex);
        return 0;
    }
    default:
        return -1;
    }
}

/* 0 once the peer's value reached value; otherwise ordo's status, or -1
 * for the others' errors and deadline (a pipe or eventfd read has none:
 * the alarm bounds it). */
static int pp_wait(pp_end_t *e, uint64_t value, ordo_deadline_t deadline) {
    switch (e->impl) {
    case PP_ORDO:
        return (int)ordo_signal_wait(e->recv_signal, value, deadline);
    case PP_PIPE: {
        uint64_t got = 0;
        return read(e->recv_fd, &got, sizeof got) == (ssize_t)sizeof got && got == value ? 0 : -1;
    }
    case PP_EVENTFD: {
        uint64_t count = 0;
        return read(e->recv_fd, &count, sizeof count) == (ssize_t)sizeof count ? 0 : -1;
    }
    case PP_CONDVAR: {
        condvar_side_t *s = &e->page->side[e->recv_side];
        struct timespec until = timespec_of(deadline);
        int rc = 0;
        pthread_mutex_lock(&s->mutex);
        while (s->value < value && rc == 0) {
            rc = pthread_cond_timedwait(&s->cond, &s->mutex, &until);
        }
        int reached = s->value >= value;
        pthread_mutex_unlock(&s->mutex);
        return reached ? 0 : -1;
    }
    default:
        return -1;
    }
}

static void condvar_init(condvar_side_t *s) {
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    if (pthread_mutexattr_init(&ma) != 0 ||
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) != 0 ||
        pthread_mutex_init(&s->mutex, &ma) != 0 || pthread_condattr_init(&ca) != 0 ||
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) != 0 ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&s->cond, &ca) != 0) {
        bench_fail("cannot make a process-shared mutex and condition variable");
    }
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_destroy(&ca);
    s->value = 0;
}

/* The child's side: answers value i on ping with i on pong. */
static int child_pingpong(pp_impl_t impl, ipc_page_t *page, int fd0, int fd1, uint64_t rounds) {
    const char *role = "pingpong";
    pp_end_t e = {impl, page, NULL, NULL, fd1, fd0, 1, 0};
    if (impl == PP_ORDO) {
        e.recv_signal = open_signal(role, fd0);
        e.send_signal = open_signal(role, fd1);
        ordo_status_t st = ordo_shared_signal_register(e.send_signal);
        if (st != ORDO_OK) {
            child_fail(role, "cannot register as a signaller", st);
        }
    }
    atomic_store(&page->ready, 1);
    ordo_deadline_t deadline = 0;
    for (uint64_t i = 1; i <= rounds; ++i) {
        if ((i & 255) == 1) {
            deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
        }
        int st = pp_wait(&e, i, deadline);
        if (st != 0) {
            child_fail(role, "wait failed", st > 0 ? (ordo_status_t)st : ORDO_OK);
        }
        if (pp_set(&e, i) != 0) {
            child_fail(role, "set failed", ORDO_OK);
        }
    }
    if (impl == PP_ORDO) {
        /* Closing the handle unregisters this process. */
        ordo_signal_release(e.send_signal);
        ordo_signal_release(e.recv_signal);
    }
    return 0;
}

static bench_stats_t run_pingpong(pp_impl_t impl, bench_sizes_t sz) {
    const size_t warmup = 2;
    const uint64_t rounds = (sz.samples + warmup) * sz.batch;
    page_handle_t page = page_create();
    pp_end_t e = {impl, page.page, NULL, NULL, -1, -1, 0, 1};
    int child_fd0 = -1, child_fd1 = -1;
    switch (impl) {
    case PP_ORDO:
        e.send_signal = create_shared();
        e.recv_signal = create_shared();
        if (ordo_shared_signal_register(e.send_signal) != ORDO_OK) {
            bench_fail("cannot register as a signaller");
        }
        child_fd0 = signal_fd_of(e.send_signal);
        child_fd1 = signal_fd_of(e.recv_signal);
        break;
    case PP_PIPE: {
        int ping[2], pong[2];
        if (pipe2(ping, O_CLOEXEC) != 0 || pipe2(pong, O_CLOEXEC) != 0) {
            bench_fail("cannot make pipes");
        }
        e.send_fd = ping[1];
        e.recv_fd = pong[0];
        child_fd0 = ping[0];
        child_fd1 = pong[1];
        break;
    }
    case PP_EVENTFD:
        e.send_fd = eventfd(0, EFD_CLOEXEC);
        e.recv_fd = eventfd(0, EFD_CLOEXEC);
        if (e.send_fd < 0 || e.recv_fd < 0) {
            bench_fail("cannot make eventfds");
        }
        /* The child uses the same two objects, through its own copies. */
        child_fd0 = e.send_fd;
        child_fd1 = e.recv_fd;
        break;
    case PP_CONDVAR:
        condvar_init(&page.page->side[0]);
        condvar_init(&page.page->side[1]);
        break;
    default:
        bench_fail("unknown implementation");
    }
    pid_t child =
        spawn_child("pingpong", pp_names[impl], page.fd, child_fd0, child_fd1, rounds, 0, 1);
    if (impl != PP_EVENTFD) {
        /* Ours are closed, so a pipe read sees the end if the child dies. */
        if (child_fd0 >= 0) {
            close(child_fd0);
        }
        if (child_fd1 >= 0) {
            close(child_fd1);
        }
    }
    bench_pin(0);
    poll_until(&page.page->ready, 1, "the ping-pong child did not start");

    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    uint64_t i = 0;
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            ++i;
            if (pp_set(&e, i) != 0) {
                bench_fail("ping-pong: set failed");
            }
            if (pp_wait(&e, i, deadline) != 0) {
                bench_fail("ping-pong: the other process did not answer");
            }
        }
        if (s >= warmup) {
            samples[s - warmup] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    reap_later(child, 0, "the ping-pong child failed");
    switch (impl) {
    case PP_ORDO:
        ordo_signal_destroy(e.send_signal);
        ordo_signal_destroy(e.recv_signal);
        break;
    case PP_PIPE:
    case PP_EVENTFD:
        close(e.send_fd);
        close(e.recv_fd);
        break;
    case PP_CONDVAR:
        for (int k = 0; k < 2; ++k) {
            pthread_cond_destroy(&page.page->side[k].cond);
            pthread_mutex_destroy(&page.page->side[k].mutex);
        }
        break;
    default:
        break;
    }
    page_destroy(&page);
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

static void bench_ipc_pingpong(const bench_options_t *options) {
    const char *name = "ipc_signal_pingpong";
    watchdog_arm(name);
    /* The sleeping baselines take ~10 us or more per round trip: fewer. */
    bench_stats_t pipe_stats = run_pingpong(PP_PIPE, bench_pick(options, 30, 500));
    bench_emit(name, "pipe", &pipe_stats, NULL, 0);
    bench_stats_t eventfd_stats = run_pingpong(PP_EVENTFD, bench_pick(options, 30, 500));
    bench_emit(name, "eventfd", &eventfd_stats, NULL, 0);
    bench_stats_t condvar_stats = run_pingpong(PP_CONDVAR, bench_pick(options, 30, 500));
    bench_emit(name, "pshared_condvar", &condvar_stats, NULL, 0);
    bench_stats_t ordo = run_pingpong(PP_ORDO, bench_pick(options, 50, 5000));
    bench_ratio_t ratios[] = {{"pipe", ordo.median_ns / pipe_stats.median_ns},
                              {"eventfd", ordo.median_ns / eventfd_stats.median_ns},
                              {"pshared_condvar", ordo.median_ns / condvar_stats.median_ns}};
    bench_emit(name, "ordo", &ordo, ratios, 3);
    reap_deferred();
    watchdog_disarm();
}

/* ---- ipc_wake_idle ---------------------------------------------------- */

typedef enum wake_impl { WAKE_ORDO, WAKE_FUTEX, WAKE_IMPL_COUNT } wake_impl_t;

static const char *const wake_names[WAKE_IMPL_COUNT] = {"ordo", "futex"};

/* The child: for each value, announces it, sleeps until it is reached,
 * and reports when it woke. */
static int child_wake(wake_impl_t impl, ipc_page_t *page, int fd0, uint64_t rounds) {
    const char *role = "wake";
    ordo_signal_t *signal = impl == WAKE_ORDO ? open_signal(role, fd0) : NULL;
    atomic_store(&page->ready, 1);
    for (uint64_t i = 1; i <= rounds; ++i) {
        ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
        atomic_store(&page->waiting, i);
        if (impl == WAKE_ORDO) {
            ordo_status_t st = ordo_signal_wait(signal, i, deadline);
            if (st != ORDO_OK) {
                child_fail(role, "wait failed", st);
            }
        } else {
            uint32_t seen;
            const struct timespec bound = {IPC_WAIT_MS / 1000, 0};
            while ((seen = atomic_load(&page->futex_word)) < (uint32_t)i) {
                futex(&page->futex_word, FUTEX_WAIT, seen, &bound);
                if (ordo_deadline_remaining_ns(deadline) == 0) {
                    child_fail(role, "futex wait timed out", ORDO_OK);
                }
            }
        }
        atomic_store(&page->woke_at, bench_now_ns());
        atomic_store(&page->acked, i);
    }
    if (signal) {
        ordo_signal_release(signal);
    }
    return 0;
}

/* Runs one child of sz.samples wake-ups and stores their latencies. */
static void run_wake(wake_impl_t impl, size_t count, double *samples) {
    page_handle_t page = page_create();
    ordo_signal_t *signal = NULL;
    int child_fd = -1;
    if (impl == WAKE_ORDO) {
        signal = create_shared();
        if (ordo_shared_signal_register(signal) != ORDO_OK) {
            bench_fail("cannot register as a signaller");
        }
        child_fd = signal_fd_of(signal);
    }
    pid_t child = spawn_child("wake", wake_names[impl], page.fd, child_fd, -1, count, 0, 1);
    if (child_fd >= 0) {
        close(child_fd);
    }
    bench_pin(0);
    poll_until(&page.page->ready, 1, "the wake child did not start");
    for (uint64_t i = 1; i <= count; ++i) {
        poll_until(&page.page->waiting, i, "the wake child did not come to wait");
        await_asleep(child, child, "the wake child did not fall asleep");
        sleep_ns(500000); /* deep asleep now, as in signal_wake_idle */
        if (thread_state(child, child) != 'S') {
            bench_fail("the wake child woke before its value");
        }
        uint64_t t0 = bench_now_ns();
        if (impl == WAKE_ORDO) {
            if (ordo_signal_advance(signal, i) != ORDO_OK) {
                bench_fail("advance failed");
            }
        } else {
            atomic_store(&page.page->futex_word, (uint32_t)i);
            futex(&page.page->futex_word, FUTEX_WAKE, INT_MAX, NULL);
        }
        ordo_deadline_t deadline = ordo_deadline_after_ms(IPC_WAIT_MS);
        unsigned spins = 0;
        while (atomic_load(&page.page->acked) < i) {
            if (++spins % 4096 == 0 && ordo_deadline_remaining_ns(deadline) == 0) {
                bench_fail("the wake child did not wake");
            }
        }
        samples[i - 1] = (double)(atomic_load(&page.page->woke_at) - t0);
    }
    reap_later(child, 0, "the wake child failed");
    if (signal) {
        ordo_signal_destroy(signal);
    }
    page_destroy(&page);
}

static void bench_ipc_wake_idle(const bench_options_t *options) {
    const char *name = "ipc_wake_idle";
    watchdog_arm(name);
    /* One sample is one wake-up: the two alternate in rounds, so that a
     * noisy spell of the machine weighs on both. */
    const size_t rounds = options->quick ? 2 : 10;
    bench_sizes_t sz = bench_pick(options, 200, 1);
    double *futex_samples = calloc(rounds * sz.samples, sizeof(double));
    double *ordo_samples = calloc(rounds * sz.samples, sizeof(double));
    if (!futex_samples || !ordo_samples) {
        bench_fail("out of memory");
    }
    for (size_t r = 0; r < rounds; ++r) {
        run_wake(WAKE_FUTEX, sz.samples, futex_samples + r * sz.samples);
        run_wake(WAKE_ORDO, sz.samples, ordo_samples + r * sz.samples);
    }
    bench_stats_t futex_stats = bench_summarise(futex_samples, rounds * sz.samples, 1);
    bench_stats_t ordo = bench_summarise(ordo_samples, rounds * sz.samples, 1);
    bench_emit(name, "futex", &futex_stats, NULL, 0);
    bench_ratio_t ratio = {"futex", ordo.median_ns / futex_stats.median_ns};
    bench_emit(name, "ordo", &ordo, &ratio, 1);
    free(futex_samples);
    free(ordo_samples);
    reap_deferred();
    watchdog_disarm();
}

/* ---- ipc_abandon ------------------------------------------------------ */

/* A waiter: announces itself, waits for a value no one will reach, and
 * reports what the wait returned and when. */
static void abandon_wait(ordo_signal_t *signal, abandon_slot_t *slot) {
    atomic_store(&slot->tid, (int32_t)gettid());
    atomic_store(&slot->waiting, 1);
    ordo_status_t st = ordo_signal_wait(signal, 1, ordo_deadline_after_ms(IPC_WAIT_MS));
    atomic_store(&slot->woke_at, bench_now_ns());
    atomic_store(&slot->status, (int32_t)st);
    atomic_store(&slot->done, 1);
}

static int child_abandon_waiter(ipc_page_t *page, int fd0, int index) {
    ordo_signal_t *signal = open_signal("abandon waiter", fd0);
    abandon_wait(signal, &page->waiter[index]);
    ordo_signal_release(signal);
    return 0;
}

/* The signaller: registers, says so, and waits to be killed (its alarm
 * ends it if no one does, which abandons the signal all the same). */
static int child_abandon_signaller(ipc_page_t *page, int fd0) {
    const char *role = "abandon signaller";
    ordo_signal_t *signal = open_signal(role, fd0);
    ordo_status_t st = ordo_shared_signal_register(signal);
    if (st != ORDO_OK) {
        child_fail(role, "cannot register as a signaller", st);
    }
    atomic_store(&page->ready, 1);
    for (;;) {
        pause();
    }
}

typedef struct abandon_thread_arg {
    ordo_signal_t *signal;
    abandon_slot_t *slot;
} abandon_thread_arg_t;

static void *abandon_thread(void *p) {
    abandon_thread_arg_t *arg = p;
    abandon_wait(arg->signal, arg->slot);
    return NULL;
}

/* One run: the nanoseconds from the kill to the last waiter's return. */
static double run_abandon(void) {
    page_handle_t page = page_create();
    ipc_page_t *pg = page.page;
    ordo_signal_t *signal = create_shared();
    int fd = signal_fd_of(signal);
    pid_t signaller = spawn_child("abandon-signaller", "ordo", page.fd, fd, -1, 0, 0, -1);
    poll_until(&pg->ready, 1, "the signaller did not register");
    pid_t waiters[ABANDON_CHILD_WAITERS];
    for (int k = 0; k < ABANDON_CHILD_WAITERS; ++k) {
        waiters[k] = spawn_child("abandon-waiter", "ordo", page.fd, fd, -1, 0, k, -1);
    }
    close(fd);
    abandon_thread_arg_t arg = {signal, &pg->waiter[ABANDON_CHILD_WAITERS]};
    pthread_t thread;
    if (pthread_create(&thread, NULL, abandon_thread, &arg) != 0) {
        bench_fail("cannot start a thread");
    }
    for (int k = 0; k < ABANDON_WAITERS; ++k) {
        poll_until(&pg->waiter[k].waiting, 1, "an abandon waiter did not come to wait");
        pid_t pid = k < ABANDON_CHILD_WAITERS ? waiters[k] : getpid();
        await_asleep(pid, atomic_load(&pg->waiter[k].tid), "an abandon waiter did not fall asleep");
    }
    uint64_t t0 = bench_now_ns();
    kill(signaller, SIGKILL);
    for (int k = 0; k < ABANDON_WAITERS; ++k) {
        poll_until(&pg->waiter[k].woke_at, 1, "a waiter was not woken after its signaller's death");
    }
    uint64_t last = 0;
    for (int k = 0; k < ABANDON_WAITERS; ++k) {
        while (!atomic_load(&pg->waiter[k].done)) {
        }
        ordo_status_t st = (ordo_status_t)atomic_load(&pg->waiter[k].status);
        if (st != ORDO_ERR_ABANDONED) {
            fprintf(stderr, "ordo bench: ipc_abandon: waiter %d returned %s, not %s\n", k,
                    ordo_status_name(st), ordo_status_name(ORDO_ERR_ABANDONED));
            bench_fail("a waiter did not see the abandonment");
        }
        uint64_t woke = atomic_load(&pg->waiter[k].woke_at);
        last = woke > last ? woke : last;
    }
    pthread_join(thread, NULL);
    reap_later(signaller, SIGKILL, "the signaller was not killed");
    for (int k = 0; k < ABANDON_CHILD_WAITERS; ++k) {
        reap_later(waiters[k], 0, "an abandon waiter failed");
    }
    ordo_signal_destroy(signal);
    page_destroy(&page);
    return (double)(last - t0);
}

static void bench_ipc_abandon(const bench_options_t *options) {
    const char *name = "ipc_abandon";
    watchdog_arm(name);
    /* Four processes and a thread on however many CPUs: nothing pinned. */
    bench_unpin();
    bench_sizes_t sz = bench_pick(options, 100, 1);
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    for (size_t s = 0; s < sz.samples; ++s) {
        samples[s] = run_abandon();
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, 1);
    bench_emit_max(name, "ordo", &stats, NULL, 0, samples[sz.samples - 1]);
    free(samples);
    reap_deferred();
    watchdog_disarm();
}

/* ---- entry points ------------------------------------------------------ */

void bench_ipc_all(const bench_options_t *options) {
    if (bench_selected(options, "ipc_signal_pingpong")) {
        bench_ipc_pingpong(options);
    }
    if (bench_selected(options, "ipc_wake_idle")) {
        bench_ipc_wake_idle(options);
    }
    if (bench_selected(options, "ipc_abandon")) {
        bench_ipc_abandon(options);
    }
}

static int parse_int(const char *text, long long *out) {
    char *end;
    errno = 0;
    *out = strtoll(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' ? 0 : -1;
}

int bench_ipc_child(int argc, char **argv) {
    long long n[6];
    if (argc != 8) {
        fprintf(stderr, "ordo __ipc-child: internal use only (by ordo bench ipc_*)\n");
        return 2;
    }
    for (int i = 0; i < 6; ++i) {
        if (parse_int(argv[2 + i], &n[i]) != 0) {
            fprintf(stderr, "ordo __ipc-child: bad number '%s'\n", argv[2 + i]);
            return 2;
        }
    }
    const char *role = argv[0];
    const char *impl = argv[1];
    int fd0 = (int)n[1], fd1 = (int)n[2];
    uint64_t rounds = (uint64_t)n[3];
    int index = (int)n[4], slot = (int)n[5];
    /* A bound of its own: the default action of SIGALRM ends the child. */
    alarm(IPC_ALARM_S);
    ipc_page_t *page = page_map((int)n[0]);
    if (!page) {
        child_fail(role, "cannot map the shared page", ORDO_OK);
    }
    close((int)n[0]);
    if (slot >= 0) {
        bench_pin(slot);
    }
    if (strcmp(role, "pingpong") == 0) {
        for (int k = 0; k < PP_IMPL_COUNT; ++k) {
            if (strcmp(impl, pp_names[k]) == 0) {
                return child_pingpong((pp_impl_t)k, page, fd0, fd1, rounds);
            }
        }
    } else if (strcmp(role, "wake") == 0) {
        for (int k = 0; k < WAKE_IMPL_COUNT; ++k) {
            if (strcmp(impl, wake_names[k]) == 0) {
                return child_wake((wake_impl_t)k, page, fd0, rounds);
            }
        }
    } else if (strcmp(role, "abandon-waiter") == 0 && index >= 0 && index < ABANDON_CHILD_WAITERS) {
        return child_abandon_waiter(page, fd0, index);
    } else if (strcmp(role, "abandon-signaller") == 0) {
        return child_abandon_signaller(page, fd0);
    }
    fprintf(stderr, "ordo __ipc-child: unknown role '%s' or implementation '%s'\n", role, impl);
    return 2;
}
