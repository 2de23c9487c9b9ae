/* Shared signals (ordo/shared_signal.h): creating, opening and closing a
 * process's handle of a shared page, and the handle's remote ops (the
 * page protocol of ipc/shared_page.h behind sync/signal_remote.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "ipc/shared_handle.h"
#include "ordo/shared_signal.h"
#include "sync/signal_access.h"

static shared_handle_t *handle_of(signal_remote_t *remote) {
    return (shared_handle_t *)remote; /* remote is the handle's first member */
}

static uint64_t op_state(signal_remote_t *remote) {
    uint64_t page = ordo__shared_page_state(handle_of(remote)->page);
    return (page & PAGE_VALUE_MASK) | ((page & PAGE_FAILED) ? ORDO__SIGNAL_FAILED_BIT : 0);
}

static ordo_status_t op_advance(signal_remote_t *remote, uint64_t value, const char *api) {
    return ordo__shared_page_advance(handle_of(remote)->page, value, api);
}

static ordo_status_t op_fail(signal_remote_t *remote, ordo_status_t status, const char *message,
                             const char *api) {
    return ordo__shared_page_fail(handle_of(remote)->page, status, message, api);
}

static ordo_status_t op_failure(signal_remote_t *remote, char *message) {
    return ordo__shared_page_failure(handle_of(remote)->page, message);
}

static uint32_t op_sleep_token(signal_remote_t *remote) {
    return ordo__shared_page_sleep_token(handle_of(remote)->page);
}

static void op_sleep(signal_remote_t *remote, uint32_t token, uint64_t value,
                     ordo_deadline_t deadline) {
    ordo__shared_page_sleep(handle_of(remote)->page, token, value, deadline);
}

static void op_interrupt(signal_remote_t *remote) {
    ordo__shared_page_wake_all(handle_of(remote)->page);
}

static void op_wanted(signal_remote_t *remote) {
    (void)remote;
    ordo__ipc_engine_poke();
}

/* The parent's handle copied into a forked child is in no engine's list:
 * nothing here feeds its mirror, nor watches its signallers. */
static ordo_status_t detached_refused(const shared_handle_t *h, const char *api) {
    if (!h->detached) {
        return ORDO_OK;
    }
    if (!api) {
        return ORDO_ERR_INVALID_HANDLE;
    }
    return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                       "signal %p is the parent's handle, copied into this process by fork: the "
                       "child must open its own (ordo_shared_signal_open_fd on the page's "
                       "descriptor, or ordo_shared_signal_open_name)",
                       (void *)h->remote.signal);
}

static ordo_status_t op_armable(signal_remote_t *remote, const char *api) {
    return detached_refused(handle_of(remote), api);
}

static void handle_free(shared_handle_t *h) {
    munmap(h->page, ORDO_SHARED_SIGNAL_SIZE);
    close(h->fd);
    ordo__dealloc(h, sizeof *h, 0);
}

/* Under the engine's lock: this handle's registration ends, and the
 * process's with it unless another handle of the page holds one. */
static void registration_end_locked(shared_handle_t *h) {
    if (!h->registered) {
        return;
    }
    h->registered = false;
    if (!ordo__ipc_engine_page_registered_locked(h)) {
        (void)ordo__shared_page_unregister(h->page, getpid());
    }
}

/* A release, under the engine's lock, where the engine's pins are taken
 * and dropped too, so the count of the program's references (the rest) is
 * exact there, and only goes down there: when the program's last goes,
 * its registration ends, and the engine pins the handle no more. */
static signal_release_t op_release(signal_remote_t *remote) {
    shared_handle_t *h = handle_of(remote);
    ordo__ipc_engine_lock();
    signal_release_t release =
        ordo__signal_release_pinned(h->remote.signal, h->pins, &h->program_done);
    if (h->program_done) {
        registration_end_locked(h);
    }
    ordo__ipc_engine_unlock();
    return release;
}

/* A handle destroyed can advance the signal no more, so it is no
 * signaller now: its registration ends with it, not with its last
 * reference (a signal fd, a retain elsewhere may keep the handle). */
static void op_ended(signal_remote_t *remote) {
    shared_handle_t *h = handle_of(remote);
    ordo__ipc_engine_lock();
    registration_end_locked(h);
    ordo__ipc_engine_unlock();
}

static void op_close(signal_remote_t *remote) {
    shared_handle_t *h = handle_of(remote);
    ordo__ipc_engine_lock();
    registration_end_locked(h);
    ordo__ipc_engine_unlock();
    ordo__ipc_engine_remove(h);
    handle_free(h);
}

static const signal_remote_ops_t shared_ops = {
    .state = op_state,
    .advance = op_advance,
    .fail = op_fail,
    .failure = op_failure,
    .sleep_token = op_sleep_token,
    .sleep = op_sleep,
    .interrupt = op_interrupt,
    .wanted = op_wanted,
    .armable = op_armable,
    .release = op_release,
    .ended = op_ended,
    .close = op_close,
};

/* The handle of a shared signal (*out), or an error for api. */
static ordo_status_t shared_handle(ordo_signal_t *signal, shared_handle_t **out, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, api));
    signal_remote_t *remote = ordo__signal_remote(signal);
    if (!remote || remote->ops != &shared_ops) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "signal %p is not a shared signal",
                           (void *)signal);
    }
    *out = handle_of(remote);
    return ORDO_OK;
}

/* Maps the page of fd (checked: a live fd, a file of the page's size, a
 * page of this layout) and makes this process's handle of it. The fd
 * stays the caller's. */
static ordo_status_t handle_open(int fd, bool fresh, bool named, uint64_t initial_value,
                                 const char *what, ordo_signal_t **out_signal, const char *api) {
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s is not an open file descriptor", what);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s: fstat: %s", what, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%s is not an ordo shared signal (not a memory file)", what);
    }
    /* A descriptor may come from a process that does not trust this one,
     * which could shrink the file under the mapping (SIGBUS on the next
     * read): only a memfd sealed against shrinking is taken, and the seal
     * is looked at before the size (a file still unsealed at the size's
     * look could be shrunk, then sealed, in between). Named
     * objects are opened by name, among processes that trust each other
     * (docs/IPC.md). */
    if (!named && !fresh) {
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "%s is not sealed against shrinking (a shared signal's fd is a "
                               "sealed memfd; open a named signal by its name)",
                               what);
        }
    }
    if (fstat(fd, &st) != 0) { /* again: its size can only grow from here */
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s: fstat: %s", what, strerror(errno));
    }
    if (st.st_size != (off_t)ORDO_SHARED_SIGNAL_SIZE) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%s is not an ordo shared signal: %lld bytes, not %u (truncated, or "
                           "another kind of file)",
                           what, (long long)st.st_size, ORDO_SHARED_SIGNAL_SIZE);
    }
    void *map = mmap(NULL, ORDO_SHARED_SIGNAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int err = errno;
        return ordo__error(
            err == EACCES || err == EPERM ? ORDO_ERR_INVALID_ARGUMENT : ORDO_ERR_OUT_OF_MEMORY, api,
            "%s cannot be mapped for reading and writing: %s", what, strerror(err));
    }
    ordo_status_t st_engine = ordo__ipc_engine_start(api);
    if (st_engine != ORDO_OK) {
        munmap(map, ORDO_SHARED_SIGNAL_SIZE);
        return st_engine;
    }
    shared_page_t *page = map;
    if (fresh) {
        ordo__shared_page_init(page, initial_value);
    } else {
        ordo_status_t st_page = ordo__shared_page_validate(page, what, api);
        if (st_page != ORDO_OK) {
            munmap(map, ORDO_SHARED_SIGNAL_SIZE);
            return st_page;
        }
    }
    shared_handle_t *h = ordo__alloc(sizeof *h, 0);
    int own_fd = h ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (!h || own_fd < 0) {
        int err = errno;
        if (h) {
            ordo__dealloc(h, sizeof *h, 0);
        }
        munmap(map, ORDO_SHARED_SIGNAL_SIZE);
        return h ? ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api, "cannot keep %s: %s", what,
                               strerror(err))
                 : ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a shared handle");
    }
    h->remote.ops = &shared_ops;
    h->page_dev = st.st_dev;
    h->page_ino = st.st_ino;
    h->named = named;
    h->page = page;
    h->fd = own_fd;
    ordo_signal_t *signal;
    ordo_status_t st_make = ordo__signal_create_remote(&h->remote, &signal, api);
    if (st_make != ORDO_OK) {
        handle_free(h);
        return st_make;
    }
    ordo__ipc_engine_add(h);
    *out_signal = signal;
    return ORDO_OK;
}

ordo_shared_signal_config_t ordo_shared_signal_config_default(void) {
    return (ordo_shared_signal_config_t){.initial_value = 0, .name = NULL, .flags = 0};
}

/* A POSIX shared-memory name as ordo takes it: "/" then 1 to
 * ORDO_SHARED_SIGNAL_NAME_MAX - 2 bytes, no other "/", and not "/." or
 * "/.." (they name the shared-memory directory and its parent, not a file
 * in it). */
static ordo_status_t name_check(const char *name, const char *api) {
    if (!name) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "name is NULL");
    }
    size_t len = strnlen(name, ORDO_SHARED_SIGNAL_NAME_MAX);
    if (name[0] != '/' || len < 2 || len >= ORDO_SHARED_SIGNAL_NAME_MAX || strchr(name + 1, '/')) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "name \"%.40s\" is not \"/\" followed by 1 to %u bytes without \"/\"",
                           name, ORDO_SHARED_SIGNAL_NAME_MAX - 2);
    }
    if (strcmp(name, "/.") == 0 || strcmp(name, "/..") == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "name \"%s\" names a directory, not a shared-memory object", name);
    }
    return ORDO_OK;
}

/* Where glibc keeps POSIX shared-memory objects (shm_open). */
#define SHM_DIRECTORY "/dev/shm"

/* Removes the name of a create that failed after its shm_open, only if the
 * name still refers to this create's file (fd): meanwhile another process
 * may have removed it and created its own, live signal under it. A window
 * remains between the look and the unlink (POSIX has no unlink of a name
 * only if it names a given file), as short as two system calls; outside
 * it, a name another process made is never removed. */
static void name_unlink_if_ours(const char *name, int fd) {
    struct stat mine, named;
    char path[sizeof SHM_DIRECTORY + ORDO_SHARED_SIGNAL_NAME_MAX];
    snprintf(path, sizeof path, "%s%s", SHM_DIRECTORY, name);
    if (fstat(fd, &mine) == 0 && stat(path, &named) == 0 && mine.st_dev == named.st_dev &&
        mine.st_ino == named.st_ino) {
        shm_unlink(name);
    }
}

ordo_status_t ordo_shared_signal_create(const ordo_shared_signal_config_t *config,
                                        ordo_signal_t **out_signal) {
    if (!out_signal) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal is NULL");
    }
    *out_signal = NULL;
    if (!config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "config is NULL");
    }
    ORDO_RETURN_IF_ERROR(ordo__flags_check(config->flags, 0, __func__));
    if (config->initial_value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "initial value %llu exceeds ORDO_SIGNAL_VALUE_MAX",
                           (unsigned long long)config->initial_value);
    }
    int fd;
    char what[ORDO_SHARED_SIGNAL_NAME_MAX + 16];
    if (config->name) {
        ORDO_RETURN_IF_ERROR(name_check(config->name, __func__));
        fd = shm_open(config->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            int err = errno;
            return ordo__error(err == EEXIST ? ORDO_ERR_BUSY : ORDO_ERR_UNAVAILABLE, __func__,
                               "shm_open(\"%s\"): %s", config->name, strerror(err));
        }
        snprintf(what, sizeof what, "\"%s\"", config->name);
    } else {
        fd = memfd_create("ordo-shared-signal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) {
            int err = errno;
            return ordo__error(err == EMFILE || err == ENFILE ? ORDO_ERR_RESOURCE_EXHAUSTED
                                                              : ORDO_ERR_UNAVAILABLE,
                               __func__, "memfd_create: %s", strerror(err));
        }
        snprintf(what, sizeof what, "the new memfd");
    }
    ordo_status_t st = ORDO_OK;
    if (ftruncate(fd, ORDO_SHARED_SIGNAL_SIZE) != 0) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot size %s: %s", what,
                         strerror(errno));
    } else if (!config->name &&
               fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        /* Sealed against shrinking: no peer can make the page vanish under
         * a reader. */
        st = ordo__error(ORDO_ERR_UNAVAILABLE, __func__, "cannot seal %s: %s", what,
                         strerror(errno));
    }
    if (st == ORDO_OK) {
        st = handle_open(fd, true, config->name != NULL, config->initial_value, what, out_signal,
                         __func__);
    }
    if (st != ORDO_OK && config->name) {
        name_unlink_if_ours(config->name, fd);
    }
    close(fd);
    return st;
}

ordo_status_t ordo_shared_signal_open_fd(int fd, ordo_signal_t **out_signal) {
    if (!out_signal) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal is NULL");
    }
    *out_signal = NULL;
    char what[32];
    snprintf(what, sizeof what, "fd %d", fd);
    return handle_open(fd, false, false, 0, what, out_signal, __func__);
}

/* A named object is visible from its shm_open on, before its creator has
 * sized it and written its page (magic last, released): the opener waits
 * for both, NAMED_CREATE_WAIT_MS at most, rather than take a page being
 * made for something that is not a signal. True once both are there, or
 * once the file has some other size (handle_open then says what it is). */
#define NAMED_CREATE_WAIT_MS 100u

static bool named_made(int fd) {
    ordo_deadline_t deadline = ordo_deadline_after_ms(NAMED_CREATE_WAIT_MS);
    for (;;) {
        struct stat st;
        uint64_t magic = 0;
        if (fstat(fd, &st) != 0 || (st.st_size != 0 && st.st_size != ORDO_SHARED_SIGNAL_SIZE) ||
            (st.st_size == ORDO_SHARED_SIGNAL_SIZE &&
             pread(fd, &magic, sizeof magic, 0) == (ssize_t)sizeof magic && magic != 0)) {
            return true;
        }
        if ((ordo_deadline_t)ordo_time_now_ns() >= deadline) {
            return false;
        }
        struct timespec pause = {0, 50000};
        nanosleep(&pause, NULL);
    }
}

ordo_status_t ordo_shared_signal_open_name(const char *name, ordo_signal_t **out_signal) {
    if (!out_signal) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal is NULL");
    }
    *out_signal = NULL;
    ORDO_RETURN_IF_ERROR(name_check(name, __func__));
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        return ordo__error(err == ENOENT ? ORDO_ERR_NOT_FOUND : ORDO_ERR_UNAVAILABLE, __func__,
                           "shm_open(\"%s\"): %s", name, strerror(err));
    }
    char what[ORDO_SHARED_SIGNAL_NAME_MAX + 8];
    snprintf(what, sizeof what, "\"%s\"", name);
    if (!named_made(fd)) {
        close(fd);
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__,
                           "%s is still being created after %u ms (or its creator ended while "
                           "creating it): try again",
                           what, NAMED_CREATE_WAIT_MS);
    }
    ordo_status_t st = handle_open(fd, false, true, 0, what, out_signal, __func__);
    close(fd);
    return st;
}

ordo_status_t ordo_shared_signal_unlink(const char *name) {
    ORDO_RETURN_IF_ERROR(name_check(name, __func__));
    if (shm_unlink(name) != 0) {
        int err = errno;
        return ordo__error(err == ENOENT ? ORDO_ERR_NOT_FOUND : ORDO_ERR_UNAVAILABLE, __func__,
                           "shm_unlink(\"%s\"): %s", name, strerror(err));
    }
    return ORDO_OK;
}

ordo_status_t ordo_shared_signal_fd(ordo_signal_t *signal, int *out_fd) {
    if (out_fd) {
        *out_fd = -1;
    }
    shared_handle_t *h = NULL;
    ORDO_RETURN_IF_ERROR(shared_handle(signal, &h, __func__));
    if (!out_fd) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_fd is NULL");
    }
    if (ordo__signal_destroyed(signal)) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "signal %p was destroyed", (void *)signal);
    }
    if (h->named) {
        /* Its file cannot be sealed: a receiver could not trust it
         * (ordo_shared_signal_open_fd takes sealed memfds only). */
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "signal %p is a named shared signal: other processes open it by its "
                           "name",
                           (void *)signal);
    }
    int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, __func__, "dup: %s", strerror(errno));
    }
    *out_fd = fd;
    return ORDO_OK;
}

ordo_status_t ordo_signal_is_shared(ordo_signal_t *signal, bool *out_shared) {
    if (out_shared) {
        *out_shared = false;
    }
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (!out_shared) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_shared is NULL");
    }
    signal_remote_t *remote = ordo__signal_remote(signal);
    *out_shared = remote && remote->ops == &shared_ops;
    return ORDO_OK;
}

ordo_status_t ordo_shared_signal_register(ordo_signal_t *signal) {
    shared_handle_t *h = NULL;
    ORDO_RETURN_IF_ERROR(shared_handle(signal, &h, __func__));
    if (ordo__signal_destroyed(signal)) {
        return ordo__error(ORDO_ERR_DESTROYED, __func__, "signal %p was destroyed", (void *)signal);
    }
    ORDO_RETURN_IF_ERROR(detached_refused(h, __func__));
    uint64_t start_time = 0; /* 0: unknown (no /proc); pids are then not told apart */
    (void)ordo__process_start_time(0, &start_time);
    ordo__ipc_engine_lock();
    ordo_status_t st = ordo__shared_page_register(h->page, getpid(), start_time, __func__);
    if (st == ORDO_OK) {
        h->registered = true;
    }
    ordo__ipc_engine_unlock();
    return st;
}

ordo_status_t ordo_shared_signal_unregister(ordo_signal_t *signal) {
    shared_handle_t *h = NULL;
    ORDO_RETURN_IF_ERROR(shared_handle(signal, &h, __func__));
    ordo__ipc_engine_lock();
    registration_end_locked(h);
    ordo__ipc_engine_unlock();
    return ORDO_OK;
}
