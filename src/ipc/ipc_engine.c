/* The per-process engine of shared signals: the watcher and the reaper
 * (ipc/shared_handle.h says what each does). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "ipc/shared_handle.h"
#include "sync/signal_access.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif
#define WAITV_MAX 128 /* FUTEX_WAITV_MAX */

/* When futex_waitv is missing (Linux before 5.16) or the words to watch
 * do not fit in one call, the watcher looks every this often instead. */
#define WATCH_POLL_NS 1000000ull
/* A reaper scan that could not look at everything (no memory for its list
 * of handles, or for a process's record; no descriptor for a pidfd) is
 * made again this many milliseconds later, until one is whole. */
#define REAPER_RETRY_MS 20

typedef struct waitv_entry {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
} waitv_entry_t;

/* A signaller the reaper watches. */
typedef struct watched_process {
    pid_t pid;
    uint64_t start_time;
    int pidfd;
    bool ended; /* its pidfd was readable */
    bool seen;  /* a slot still names it (this scan) */
    char comm[20];
    struct watched_process *next;
} watched_process_t;

static struct {
    pthread_mutex_t lock;
    shared_handle_t *head;
    size_t count;
    bool started; /* both threads run */
    bool reaper_running;
    bool watcher_running;
    _Atomic uint32_t control;        /* the watcher's private futex word */
    _Atomic uint32_t watcher_passes; /* ended, for ordo__ipc_engine_settle */
    _Atomic uint32_t reaper_scans;
    int epoll_fd;
    int rescan_fd;              /* eventfd: the reaper looks again */
    watched_process_t *watched; /* the reaper's own */
} engine = {.lock = PTHREAD_MUTEX_INITIALIZER, .epoll_fd = -1, .rescan_fd = -1};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

void ordo__ipc_engine_lock(void) {
    pthread_mutex_lock(&engine.lock);
}

void ordo__ipc_engine_unlock(void) {
    pthread_mutex_unlock(&engine.lock);
}

void ordo__ipc_engine_poke(void) {
    atomic_fetch_add_explicit(&engine.control, 1, memory_order_seq_cst);
    ordo__futex_wake(&engine.control, 1);
}

static void reaper_poke(void) {
    uint64_t one = 1;
    ssize_t wrote = write(engine.rescan_fd, &one, sizeof one);
    (void)wrote; /* a full counter already asks for a scan */
}

/* The handles with a reference each, taken under the lock. The engine's
 * threads take one on every pass: up to SNAPSHOT_INLINE handles it lives on
 * the thread's stack, so a pass allocates nothing and the blocks the
 * program counts (ordo_allocator_live_blocks) do not move under it. */
#define SNAPSHOT_INLINE 64

typedef struct handles_snapshot {
    shared_handle_t **list;
    size_t count;
    size_t capacity; /* of a heap list; 0 for the inline one */
    bool whole;      /* false: no memory for the list, which holds nothing */
    shared_handle_t *inline_list[SNAPSHOT_INLINE];
} handles_snapshot_t;

static void handles_snapshot(handles_snapshot_t *snap) {
    pthread_mutex_lock(&engine.lock);
    size_t n = engine.count;
    snap->count = snap->capacity = 0;
    snap->list = snap->inline_list;
    if (n > SNAPSHOT_INLINE) {
        snap->list = ordo__alloc(n * sizeof *snap->list, 0);
        snap->capacity = snap->list ? n : 0;
    }
    snap->whole = snap->list != NULL;
    if (snap->list) {
        for (shared_handle_t *h = engine.head; h; h = h->next) {
            if (!h->program_done && ordo__signal_try_retain(h->remote.signal)) {
                ++h->pins;
                snap->list[snap->count++] = h;
            }
        }
    }
    pthread_mutex_unlock(&engine.lock);
}

/* Drops the snapshot's references. Under the lock, with the pins, so a
 * releasing hook (shared_signal.c) never sees a reference of the engine's
 * that is not a pin; a last reference is dropped after, outside it (it
 * closes the handle, which takes the lock). */
static void handles_release(handles_snapshot_t *snap) {
    size_t last = 0;
    pthread_mutex_lock(&engine.lock);
    for (size_t i = 0; i < snap->count; ++i) {
        --snap->list[i]->pins;
        if (!ordo__signal_release_unless_last(snap->list[i]->remote.signal)) {
            snap->list[last++] = snap->list[i];
        }
    }
    pthread_mutex_unlock(&engine.lock);
    for (size_t i = 0; i < last; ++i) {
        ordo__signal_release_internal(snap->list[i]->remote.signal);
    }
    if (snap->capacity) {
        ordo__dealloc(snap->list, snap->capacity * sizeof *snap->list, 0);
    }
}

static void waitv_add(waitv_entry_t *v, size_t *n, bool *overflow, _Atomic uint32_t *word,
                      uint32_t expected, bool private_word) {
    if (*n == WAITV_MAX) {
        *overflow = true;
        return;
    }
    v[*n] = (waitv_entry_t){
        .val = expected,
        .uaddr = (uint64_t)(uintptr_t)word,
        .flags = FUTEX_32 | (private_word ? FUTEX_PRIVATE_FLAG : 0),
    };
    ++*n;
}

/* One pass of the watcher over one handle: pulls its mirror if its page
 * moved ahead, else arms the page's sleep and lists its words. Returns
 * true if it pulled (the caller looks again before sleeping). */
static bool watch_handle(shared_handle_t *h, waitv_entry_t *v, size_t *n, bool *overflow,
                         bool *watching) {
    shared_page_t *page = h->page;
    uint32_t registry = atomic_load_explicit(&page->registry_seq, memory_order_seq_cst);
    if (registry != h->seen_registry) {
        h->seen_registry = registry;
        reaper_poke();
    }
    waitv_add(v, n, overflow, &page->registry_seq, registry, false);
    ordo_signal_t *signal = h->remote.signal;
    uint64_t wanted;
    if (!ordo__signal_wanted_value(signal, &wanted) || ordo__signal_destroyed(signal)) {
        return false;
    }
    ordo__shared_page_rescue_failure(page);
    /* The page protocol's sleep: read wake_seq, then announce SLEEPERS. */
    uint32_t seq = ordo__shared_page_sleep_token(page);
    uint64_t truth = ordo__shared_page_announce(page);
    signal_view_t mirror = ordo__signal_view(signal);
    if ((truth & PAGE_FAILED) || (truth & PAGE_VALUE_MASK) > mirror.value) {
        ordo__signal_mirror_pull(signal);
        return true;
    }
    waitv_add(v, n, overflow, &page->wake_seq, seq, false);
    *watching = true;
    return false;
}

static void *watcher_main(void *arg) {
    (void)arg;
    waitv_entry_t v[WAITV_MAX];
    bool have_waitv = true;
    for (;;) {
        uint32_t control = atomic_load_explicit(&engine.control, memory_order_seq_cst);
        size_t n = 0;
        bool overflow = false, pulled = false, watching = false;
        waitv_add(v, &n, &overflow, &engine.control, control, true);
        handles_snapshot_t snap;
        handles_snapshot(&snap);
        overflow |= !snap.whole; /* polled until a pass sees every handle */
        for (size_t i = 0; i < snap.count; ++i) {
            pulled |= watch_handle(snap.list[i], v, &n, &overflow, &watching);
        }
        /* The pages stay mapped while slept on: a close pokes the control
         * word, and a word unmapped under the sleep only delays nothing. */
        handles_release(&snap);
        atomic_fetch_add_explicit(&engine.watcher_passes, 1, memory_order_release);
        if (pulled) {
            continue;
        }
        struct timespec until;
        struct timespec *timeout = NULL;
        if (overflow || !have_waitv || watching) {
            /* Polling, or a slice of the page protocol (a raiser that died
             * between its raise and its wake delays a mirror one slice). */
            uint64_t at = ordo_time_now_ns() +
                          (overflow || !have_waitv ? WATCH_POLL_NS : PAGE_SLEEP_SLICE_NS);
            until.tv_sec = (time_t)(at / 1000000000u);
            until.tv_nsec = (long)(at % 1000000000u);
            timeout = &until;
        }
        if (have_waitv) {
            long rc = syscall(SYS_futex_waitv, v, (unsigned)n, 0u, timeout, CLOCK_MONOTONIC);
            if (rc < 0 && errno == ENOSYS) {
                have_waitv = false;
            }
        } else {
            ordo__futex_wait(&engine.control, control,
                             (ordo_deadline_t)ordo_time_now_ns() + WATCH_POLL_NS);
        }
    }
    return NULL;
}

static watched_process_t *watched_find(pid_t pid, uint64_t start_time) {
    for (watched_process_t *w = engine.watched; w; w = w->next) {
        if (w->pid == pid && w->start_time == start_time) {
            return w;
        }
    }
    return NULL;
}

/* Starts watching pid; NULL (and *out_ended) when it has ended already:
 * no such process, another one under its pid, or a pid that names a thread
 * and not a process (a scribbled slot: no signaller registers so); NULL and
 * *out_retry when it cannot be watched now (no descriptor, no memory:
 * looked at again by the retry of an incomplete scan); NULL and neither on
 * a kernel without pidfds (before Linux 5.3), where no signaller can be
 * watched, and on any other refusal, which a retry would meet again. */
static watched_process_t *watch_process(pid_t pid, uint64_t start_time, bool *out_ended,
                                        bool *out_retry) {
    *out_ended = false;
    *out_retry = false;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int err = errno;
        /* A thread that is not a process's leader is refused with EINVAL,
         * or ENOENT on newer kernels. */
        *out_ended = err == ESRCH || err == EINVAL || err == ENOENT;
        *out_retry = err == EMFILE || err == ENFILE || err == ENOMEM;
        return NULL;
    }
    /* The pidfd names whatever process has the pid now: it is the
     * signaller only if it started when the signaller did. */
    uint64_t now_start = 0;
    if (start_time != 0 && ordo__process_start_time(pid, &now_start) && now_start != start_time) {
        close(pidfd);
        *out_ended = true;
        return NULL;
    }
    watched_process_t *w = ordo__alloc(sizeof *w, 0);
    if (!w) {
        close(pidfd);
        *out_retry = true;
        return NULL;
    }
    w->pid = pid;
    w->start_time = start_time;
    w->pidfd = pidfd;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, w->comm, sizeof w->comm - 1);
        close(fd);
        if (got > 0) {
            w->comm[got] = '\0';
            w->comm[strcspn(w->comm, "\n")] = '\0';
        }
    }
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = w};
    if (epoll_ctl(engine.epoll_fd, EPOLL_CTL_ADD, pidfd, &event) != 0) {
        close(pidfd);
        ordo__dealloc(w, sizeof *w, 0);
        *out_retry = true;
        return NULL;
    }
    w->next = engine.watched;
    engine.watched = w;
    return w;
}

/* Fails the page for the dead signaller pid, whose slot this reaper (or
 * another, which died before it finished) marked DEAD, then frees the slot
 * (ipc/shared_page.h, "Reporting a dead signaller"). */
static void report_dead(shared_handle_t *h, size_t slot, uint64_t dead_word, pid_t pid,
                        const char *comm) {
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(message, sizeof message, "signalling process %d%s%s%s ended before it unregistered",
             (int)pid, comm[0] ? " (" : "", comm, comm[0] ? ")" : "");
    (void)ordo__shared_page_fail(h->page, ORDO_ERR_ABANDONED, message, "ordo shared signal reaper");
    (void)ordo__shared_page_slot_release(h->page, slot, dead_word);
    ordo__signal_mirror_pull(h->remote.signal);
}

/* The slot first: only a signaller still registered when it is found
 * ended abandoned the signal (one that unregistered and then exited did
 * not, though the reaper may have read its slot before it left). */
static void abandon(shared_handle_t *h, size_t slot, uint64_t word, pid_t pid, const char *comm) {
    if (!ordo__shared_page_slot_mark_dead(h->page, slot, word)) {
        /* The slot moved. If another reaper marked it DEAD, it reports the
         * death, unless it dies first: then nothing would, since a DEAD
         * mark moves no registry_seq. Reported here too: failing a failed
         * page and releasing a released slot change nothing. */
        pid_t dead_pid;
        uint64_t dead_word;
        if (ordo__shared_page_slot_dead(h->page, slot, &dead_pid, &dead_word)) {
            report_dead(h, slot, dead_word, dead_pid, dead_pid == pid ? comm : "");
        }
        return;
    }
    report_dead(h, slot, (word & ~SLOT_STATE_MASK) | SLOT_DEAD, pid, comm);
}

/* Looks at every live slot of every open page: watches new signallers,
 * reports ended ones, forgets processes no slot names. False if it could
 * not look at everything (then it forgets no process: one it did not look
 * at may still be named). */
static bool reaper_scan(void) {
    handles_snapshot_t snap;
    handles_snapshot(&snap);
    bool whole = snap.whole;
    pid_t self = getpid();
    for (watched_process_t *w = engine.watched; w; w = w->next) {
        w->seen = false;
    }
    for (size_t i = 0; i < snap.count; ++i) {
        shared_handle_t *h = snap.list[i];
        for (size_t s = 0; s < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++s) {
            pid_t pid;
            uint64_t start, word;
            if (ordo__shared_page_slot_dead(h->page, s, &pid, &word)) {
                report_dead(h, s, word, pid, ""); /* a reaper died before it finished */
                continue;
            }
            if (!ordo__shared_page_slot_read(h->page, s, &pid, &start, &word) || pid == self) {
                continue;
            }
            watched_process_t *w = watched_find(pid, start);
            bool ended = false;
            if (!w) {
                bool retry = false;
                w = watch_process(pid, start, &ended, &retry);
                whole &= !retry;
            }
            if (w) {
                w->seen = true;
                ended = w->ended;
            }
            if (ended) {
                abandon(h, s, word, pid, w ? w->comm : "");
            }
        }
    }
    handles_release(&snap);
    for (watched_process_t **link = &engine.watched; *link;) {
        watched_process_t *w = *link;
        if (!w->ended && (w->seen || !snap.whole)) {
            link = &w->next;
            continue;
        }
        *link = w->next;
        epoll_ctl(engine.epoll_fd, EPOLL_CTL_DEL, w->pidfd, NULL);
        close(w->pidfd);
        ordo__dealloc(w, sizeof *w, 0);
    }
    return whole;
}

static void *reaper_main(void *arg) {
    (void)arg;
    struct epoll_event events[16];
    bool whole = true;
    for (;;) {
        int n = epoll_wait(engine.epoll_fd, events, 16, whole ? -1 : REAPER_RETRY_MS);
        if (n < 0) {
            if (errno != EINTR) {
                /* The instance is gone (a program that closed descriptors
                 * it does not own): no spin, a look every retry instead. */
                struct timespec pause = {0, REAPER_RETRY_MS * 1000000L};
                nanosleep(&pause, NULL);
                whole = reaper_scan();
            }
            continue;
        }
        for (int i = 0; i < n; ++i) {
            if (events[i].data.ptr == NULL) {
                uint64_t drained;
                ssize_t got = read(engine.rescan_fd, &drained, sizeof drained);
                (void)got;
            } else {
                ((watched_process_t *)events[i].data.ptr)->ended = true;
            }
        }
        whole = reaper_scan();
        atomic_fetch_add_explicit(&engine.reaper_scans, 1, memory_order_release);
    }
    return NULL;
}

/* One round: a pass of each thread ends after the pokes. A pass under way
 * at the poke may be the one counted, so a round proves only that the
 * passes begun before it have ended; the second round's passes began after
 * the first round's poke, and saw every process that had ended by then. */
static bool settle_round(ordo_deadline_t deadline) {
    uint32_t passes = atomic_load_explicit(&engine.watcher_passes, memory_order_acquire);
    uint32_t scans = atomic_load_explicit(&engine.reaper_scans, memory_order_acquire);
    ordo__ipc_engine_poke();
    reaper_poke();
    while (atomic_load_explicit(&engine.watcher_passes, memory_order_acquire) == passes ||
           atomic_load_explicit(&engine.reaper_scans, memory_order_acquire) == scans) {
        if ((ordo_deadline_t)ordo_time_now_ns() >= deadline) {
            return false;
        }
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    return true;
}

bool ordo__ipc_engine_settle(ordo_deadline_t deadline) {
    pthread_mutex_lock(&engine.lock);
    bool started = engine.started;
    pthread_mutex_unlock(&engine.lock);
    return !started || (settle_round(deadline) && settle_round(deadline));
}

/* In a forked child the engine's threads do not exist and its descriptors
 * are the parent's epoll instance: it starts anew, with no handles (the
 * parent's are not the child's to use). */
static void engine_after_fork_child(void) {
    pthread_mutex_init(&engine.lock, NULL);
    /* The parent's handles, copied into the child: releasing one there
     * unmaps the child's copy of the page, and must not touch the child's
     * (new) list. */
    for (shared_handle_t *h = engine.head; h; h = h->next) {
        h->detached = true;
        h->registered = false; /* the parent's registration, not the child's */
        /* References the parent's engine threads held: no thread here will
         * drop them. */
        for (; h->pins > 0; --h->pins) {
            if (!ordo__signal_release_unless_last(h->remote.signal)) {
                break; /* only the pins held it: the copy stays mapped */
            }
        }
    }
    for (watched_process_t *w = engine.watched, *next; w; w = next) {
        next = w->next;
        close(w->pidfd);
        ordo__dealloc(w, sizeof *w, 0);
    }
    if (engine.epoll_fd >= 0) {
        close(engine.epoll_fd);
        close(engine.rescan_fd);
    }
    engine.epoll_fd = engine.rescan_fd = -1;
    engine.head = NULL;
    engine.count = 0;
    engine.started = engine.reaper_running = engine.watcher_running = false;
    engine.watched = NULL;
    atomic_store_explicit(&engine.control, 0, memory_order_relaxed);
}

static void engine_before_fork(void) {
    pthread_mutex_lock(&engine.lock);
}

static void engine_after_fork_parent(void) {
    pthread_mutex_unlock(&engine.lock);
}

static void atfork_install(void) {
    pthread_atfork(engine_before_fork, engine_after_fork_parent, engine_after_fork_child);
}

static int thread_start_quiet(pthread_t *thread, void *(*fn)(void *)) {
    /* The engine's threads take no signals: the program's handlers run on
     * its own threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(thread, &attr, fn, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Under the lock: makes what is missing of the engine (a failure leaves
 * what was made for the next open to complete). */
static ordo_status_t engine_start(const char *api) {
    if (engine.epoll_fd < 0) {
        int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        int rescan_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
        if (epoll_fd < 0 || rescan_fd < 0 ||
            epoll_ctl(epoll_fd, EPOLL_CTL_ADD, rescan_fd, &event) != 0) {
            int err = errno;
            if (epoll_fd >= 0) {
                close(epoll_fd);
            }
            if (rescan_fd >= 0) {
                close(rescan_fd);
            }
            return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                               "cannot make the shared signals' watcher's descriptors: %s",
                               strerror(err));
        }
        engine.epoll_fd = epoll_fd;
        engine.rescan_fd = rescan_fd;
    }
    pthread_t thread;
    int rc = 0;
    if (!engine.reaper_running && (rc = thread_start_quiet(&thread, reaper_main)) == 0) {
        engine.reaper_running = true;
    }
    if (rc == 0 && !engine.watcher_running &&
        (rc = thread_start_quiet(&thread, watcher_main)) == 0) {
        engine.watcher_running = true;
    }
    if (rc != 0) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                           "cannot start the shared signals' watcher threads: %s", strerror(rc));
    }
    engine.started = true;
    return ORDO_OK;
}

ordo_status_t ordo__ipc_engine_start(const char *api) {
    pthread_once(&atfork_once, atfork_install);
    pthread_mutex_lock(&engine.lock);
    ordo_status_t st = engine.started ? ORDO_OK : engine_start(api);
    pthread_mutex_unlock(&engine.lock);
    return st;
}

void ordo__ipc_engine_add(shared_handle_t *handle) {
    pthread_mutex_lock(&engine.lock);
    handle->seen_registry = atomic_load_explicit(&handle->page->registry_seq, memory_order_relaxed);
    handle->prev = NULL;
    handle->next = engine.head;
    if (engine.head) {
        engine.head->prev = handle;
    }
    engine.head = handle;
    ++engine.count;
    pthread_mutex_unlock(&engine.lock);
    reaper_poke(); /* the new page's signallers */
    ordo__ipc_engine_poke();
}

bool ordo__ipc_engine_page_registered_locked(const shared_handle_t *handle) {
    for (const shared_handle_t *h = engine.head; h; h = h->next) {
        if (h != handle && h->registered && h->page_dev == handle->page_dev &&
            h->page_ino == handle->page_ino) {
            return true;
        }
    }
    return false;
}

void ordo__ipc_engine_remove(shared_handle_t *handle) {
    pthread_mutex_lock(&engine.lock);
    if (handle->detached) {
        pthread_mutex_unlock(&engine.lock);
        return;
    }
    if (handle->prev) {
        handle->prev->next = handle->next;
    } else {
        engine.head = handle->next;
    }
    if (handle->next) {
        handle->next->prev = handle->prev;
    }
    --engine.count;
    pthread_mutex_unlock(&engine.lock);
    ordo__ipc_engine_poke();
}
