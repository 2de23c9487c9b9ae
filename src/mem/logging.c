/* The logging adaptor: one line per call, formatted on the stack and
 * written with a single write, so concurrent lines never mix. A sequence
 * number gives the replay order: an allocation takes its number once
 * upstream has handed the block out, a deallocation before it gives the
 * block back, so a handle's reuse always numbers after its free. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"

#define LOG_LINE_MAX 512

typedef struct logging_resource {
    ordo_mem_resource_t base;
    FILE *file; /* the caller's, or NULL */
    int fd;     /* ours (a path), or -1 */
    /* The signal a write to the file may raise, which must not end the
     * process over a log line (0: none): SIGPIPE on a pipe or socket whose
     * reader has gone, SIGXFSZ on a regular file written past a finite
     * RLIMIT_FSIZE. The write fails instead (write_signal_errno). */
    int write_signal;
    _Atomic uint64_t seq;
    _Atomic uint64_t lines;
    _Atomic uint64_t failed_lines;
    _Atomic uint64_t blocks_live;
} logging_resource_t;

static const mem_resource_ops_t logging_ops;

static long thread_id(void) {
    return (long)syscall(SYS_gettid);
}

static uint64_t next_seq(logging_resource_t *l) {
    return atomic_fetch_add_explicit(&l->seq, 1, memory_order_relaxed);
}

static const char *mode_name(ordo_access_mode_t mode) {
    switch (mode) {
    case ORDO_ACCESS_READ:
        return "read";
    case ORDO_ACCESS_WRITE:
        return "write";
    default:
        return "read_write";
    }
}

/* The signal a write to fd may raise: SIGPIPE for a pipe or a socket,
 * SIGXFSZ for a regular file while RLIMIT_FSIZE is finite (read here, once:
 * a limit lowered later is not seen), 0 for anything else. */
static int write_signal_of(int fd) {
    struct stat st;
    struct rlimit limit;
    if (fd < 0 || fstat(fd, &st) != 0) {
        return 0;
    }
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
        return SIGPIPE;
    }
    if (S_ISREG(st.st_mode) && getrlimit(RLIMIT_FSIZE, &limit) == 0 &&
        limit.rlim_cur != RLIM_INFINITY) {
        return SIGXFSZ;
    }
    return 0;
}

/* The errno a write fails with where it would have raised signo, blocked. */
static int write_signal_errno(int signo) {
    return signo == SIGPIPE ? EPIPE : EFBIG;
}

/* signo blocked on this thread for one write; one that write raised is
 * taken back (unless it was pending before), so the line fails instead of
 * the signal ending the process. */
typedef struct signal_guard {
    sigset_t old;
    int was_pending;
} signal_guard_t;

static void signal_block(signal_guard_t *g, int signo) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
    g->was_pending = sigpending(&pending) == 0 && sigismember(&pending, signo);
}

static void signal_restore(signal_guard_t *g, int signo, int raised) {
    if (raised && !g->was_pending) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, signo);
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static void write_line(logging_resource_t *l, const char *line, size_t length) {
    int ok;
    signal_guard_t guard;
    int failed_errno = 0; /* never a failed write's errno */
    if (l->write_signal) {
        signal_block(&guard, l->write_signal);
        failed_errno = write_signal_errno(l->write_signal);
    }
    int broken = 0;
    if (l->file) {
        /* One fwrite is atomic against other stdio calls on the stream;
         * the flush keeps the log whole if the process dies. */
        flockfile(l->file);
        ok = fwrite(line, 1, length, l->file) == length && fflush(l->file) == 0;
        broken = !ok && errno == failed_errno;
        funlockfile(l->file);
    } else {
        ssize_t n;
        do {
            n = write(l->fd, line, length);
        } while (n < 0 && errno == EINTR);
        ok = n == (ssize_t)length;
        broken = n < 0 && errno == failed_errno;
    }
    if (l->write_signal) {
        signal_restore(&guard, l->write_signal, broken);
    }
    atomic_fetch_add_explicit(ok ? &l->lines : &l->failed_lines, 1, memory_order_relaxed);
}

/* Writes "ordo-mem seq=.. t_ns=.. thread=.. op=<op> <fields> status=..". */
static void log_line(logging_resource_t *l, uint64_t seq, uint64_t t_ns, const char *op,
                     ordo_status_t status, const char *fmt, ...) ORDO_PRINTF(6, 7);

static void log_line(logging_resource_t *l, uint64_t seq, uint64_t t_ns, const char *op,
                     ordo_status_t status, const char *fmt, ...) {
    char line[LOG_LINE_MAX];
    int n =
        snprintf(line, sizeof line, "ordo-mem seq=%" PRIu64 " t_ns=%" PRIu64 " thread=%ld op=%s",
                 seq, t_ns, thread_id(), op);
    if (n > 0 && (size_t)n < sizeof line && fmt) {
        va_list args;
        va_start(args, fmt);
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, args);
        va_end(args);
        n = m < 0 ? -1 : n + m;
    }
    if (n > 0 && (size_t)n < sizeof line) {
        int m =
            snprintf(line + n, sizeof line - (size_t)n, " status=%s\n", ordo_status_name(status));
        n = m < 0 ? -1 : n + m;
    }
    if (n < 0 || (size_t)n >= sizeof line) {
        atomic_fetch_add_explicit(&l->failed_lines, 1, memory_order_relaxed);
        return;
    }
    write_line(l, line, (size_t)n);
}

static ordo_status_t logging_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                      ordo_block_t **out_block) {
    logging_resource_t *l = (logging_resource_t *)resource;
    ordo_block_t *block = NULL;
    ordo_status_t st = mem_allocate(resource->upstream, request, &block);
    uint64_t seq = next_seq(l);
    uint64_t t = ordo_time_now_ns();
    if (st == ORDO_OK) {
        mem_hand_out(block, resource);
        atomic_fetch_add_explicit(&l->blocks_live, 1, memory_order_relaxed);
    }
    log_line(l, seq, t, "allocate", st, " stream=%p bytes=%zu align=%zu tag=%u block=%p",
             (void *)request->stream, request->bytes, request->alignment, request->tag,
             (void *)block);
    *out_block = block;
    return st;
}

/* A free (release: an adaptor's above, passed on as one). */
static ordo_status_t logging_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream, int release) {
    logging_resource_t *l = (logging_resource_t *)resource;
    size_t bytes = block->bytes;
    size_t alignment = block->alignment;
    uint32_t tag = block->tag;
    uint64_t seq = next_seq(l);
    uint64_t t = ordo_time_now_ns();
    ordo_status_t st;
    if ((st = ordo__mem_check_holder(resource, block, "ordo_mem_deallocate")) != ORDO_OK) {
        goto logged;
    }
    uint64_t live = atomic_load_explicit(&l->blocks_live, memory_order_relaxed);
    do {
        if (!live) {
            /* Only catches the plainest case: nothing of ours is live. */
            st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_mem_deallocate",
                             "block %p (tag %u) was not allocated through this logging adaptor "
                             "(none of its blocks is live): give a block back to the stack it "
                             "came from",
                             (void *)block, tag);
            goto logged;
        }
    } while (!atomic_compare_exchange_weak_explicit(&l->blocks_live, &live, live - 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    st = ordo__mem_forward_free(resource, block, stream, release);
    if (!mem_freed_despite(st)) {
        atomic_fetch_add_explicit(&l->blocks_live, 1, memory_order_relaxed);
    }
logged:
    log_line(l, seq, t, "deallocate", st, " stream=%p bytes=%zu align=%zu tag=%u block=%p",
             (void *)stream, bytes, alignment, tag, (void *)block);
    return st;
}

static ordo_status_t logging_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                        ordo_stream_t *stream) {
    return logging_free(resource, block, stream, 0);
}

static ordo_status_t logging_release(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream) {
    return logging_free(resource, block, stream, 1);
}

static ordo_status_t logging_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    logging_resource_t *l = (logging_resource_t *)resource;
    ordo_status_t st = ordo__mem_forward_reap_pending(resource, deadline);
    uint64_t seq = next_seq(l);
    log_line(l, seq, ordo_time_now_ns(), "reap", st, " outstanding=%" PRIu64,
             ordo__mem_forward_bytes_outstanding(resource));
    return st;
}

static void log_use(logging_resource_t *l, const char *op, ordo_status_t st, ordo_block_t *block,
                    ordo_stream_t *stream, const char *mode) {
    uint64_t seq = next_seq(l);
    log_line(l, seq, ordo_time_now_ns(), op, st, " stream=%p bytes=%zu tag=%u block=%p mode=%s",
             (void *)stream, block->bytes, block->tag, (void *)block, mode);
}

static ordo_status_t logging_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                         ordo_stream_t *stream, ordo_access_mode_t mode) {
    ordo_status_t st = ordo__mem_forward_prepare_use(resource, block, stream, mode);
    log_use((logging_resource_t *)resource, "prepare_use", st, block, stream, mode_name(mode));
    return st;
}

static ordo_status_t logging_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                        ordo_stream_t *stream, ordo_access_mode_t mode) {
    ordo_status_t st = ordo__mem_forward_finish_use(resource, block, stream, mode);
    log_use((logging_resource_t *)resource, "finish_use", st, block, stream, mode_name(mode));
    return st;
}

static ordo_status_t logging_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                        ordo_stream_t *stream) {
    ordo_status_t st = ordo__mem_forward_record_use(resource, block, stream);
    log_use((logging_resource_t *)resource, "record_use", st, block, stream, "none");
    return st;
}

/* A call refused by validation never reaches the adaptor: log it here. */
static void logging_block_refused(ordo_mem_resource_t *resource, ordo_mem_resource_t *top,
                                  const ordo_block_t *block, mem_refusal_t why,
                                  ordo_status_t status, const char *api) {
    (void)top;
    static const char *const reasons[] = {
        [MEM_REFUSED_FREED] = "freed",
        [MEM_REFUSED_NOT_LIVE] = "not_a_block",
        [MEM_REFUSED_FOREIGN] = "foreign",
        [MEM_REFUSED_HOLDER] = "wrong_resource",
    };
    logging_resource_t *l = (logging_resource_t *)resource;
    const char *op = strncmp(api, "ordo_mem_", 9) == 0 ? api + 9 : api;
    uint64_t seq = next_seq(l);
    log_line(l, seq, ordo_time_now_ns(), op, status, " block=%p refused=%s", (const void *)block,
             reasons[why]);
}

static ordo_status_t logging_destroy(ordo_mem_resource_t *resource) {
    logging_resource_t *l = (logging_resource_t *)resource;
    uint64_t live = atomic_load_explicit(&l->blocks_live, memory_order_acquire);
    if (live) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
                           "the logging adaptor still has %" PRIu64 " block(s) outstanding", live);
    }
    if (l->fd >= 0) {
        (void)close(l->fd);
    }
    ordo__mem_resource_fini(resource);
    ordo__dealloc(l, sizeof *l, 0);
    return ORDO_OK;
}

static const mem_resource_ops_t logging_ops = {
    .kind = "logging",
    .allocate = logging_allocate,
    .deallocate = logging_deallocate,
    .release = logging_release,
    .bytes_outstanding = ordo__mem_forward_bytes_outstanding,
    .reap_pending = logging_reap_pending,
    .supports_use_tracking = ordo__mem_forward_supports_use_tracking,
    .prepare_use = logging_prepare_use,
    .finish_use = logging_finish_use,
    .record_use = logging_record_use,
    .block_buffer = ordo__mem_forward_block_buffer,
    .destroy = logging_destroy,
    .block_refused = logging_block_refused,
};

static ordo_status_t logging_make(ordo_mem_resource_t *upstream, FILE *file, int fd,
                                  ordo_mem_resource_t **out_resource, const char *api) {
    logging_resource_t *l = ordo__alloc(sizeof *l, 0);
    if (!l) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a logging adaptor");
    }
    l->file = file;
    l->fd = fd;
    l->write_signal = write_signal_of(file ? fileno(file) : fd);
    atomic_init(&l->seq, 1);
    ordo__mem_resource_init(&l->base, &logging_ops, upstream->device, upstream);
    log_line(l, 0, ordo_time_now_ns(), "open", ORDO_OK, " version=1 device=%s upstream=%s",
             upstream->device->info.name, upstream->ops->kind);
    *out_resource = &l->base;
    return ORDO_OK;
}

ordo_status_t ordo_mem_logging_create(ordo_mem_resource_t *upstream, FILE *file,
                                      ordo_mem_resource_t **out_resource) {
    ORDO_RETURN_IF_ERROR(ordo__mem_adaptor_create_check(upstream, out_resource, __func__));
    if (!file) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "file is NULL");
    }
    return logging_make(upstream, file, -1, out_resource, __func__);
}

ordo_status_t ordo_mem_logging_create_path(ordo_mem_resource_t *upstream, const char *path,
                                           ordo_mem_resource_t **out_resource) {
    ORDO_RETURN_IF_ERROR(ordo__mem_adaptor_create_check(upstream, out_resource, __func__));
    if (!path || !*path) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "path is %s",
                           path ? "empty" : "NULL");
    }
    /* Non-blocking for the open only: a FIFO nobody reads is refused
     * (ENXIO) instead of blocking the call until a reader comes. */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        int err = errno;
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "cannot open '%s' for appending: %s%s", path, strerror(err),
                           err == ENXIO ? " (a FIFO that no process has open for reading)" : "");
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int err = errno;
        (void)close(fd);
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "cannot set up '%s' for writing: %s", path, strerror(err));
    }
    ordo_status_t st = logging_make(upstream, NULL, fd, out_resource, __func__);
    if (st != ORDO_OK) {
        (void)close(fd);
    }
    return st;
}

ordo_status_t ordo_mem_logging_stats(ordo_mem_resource_t *resource,
                                     ordo_mem_logging_stats_t *out_stats) {
    if (out_stats) {
        memset(out_stats, 0, sizeof *out_stats);
    }
    ORDO_RETURN_IF_ERROR(ordo__mem_resource_check(resource, __func__));
    if (resource->ops != &logging_ops) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "%p is a %s resource, not a logging adaptor", (void *)resource,
                           resource->ops->kind);
    }
    if (!out_stats) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stats is NULL");
    }
    logging_resource_t *l = (logging_resource_t *)resource;
    out_stats->lines = atomic_load_explicit(&l->lines, memory_order_relaxed);
    out_stats->failed_lines = atomic_load_explicit(&l->failed_lines, memory_order_relaxed);
    return ORDO_OK;
}
