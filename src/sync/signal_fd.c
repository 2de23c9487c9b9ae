/* Signal values as pollable file descriptors (ordo/signal_fd.h).
 *
 * One eventfd and one timepoint per export. Who frees the object: a
 * destroy that cancels the timepoint frees it at once. A destroy that comes
 * too late to cancel it (its callback is due or running) must not wait for
 * the callback: the callback may be queued behind the very callback that
 * calls the destroy, on the same thread. So the two meet on one word,
 * `owner`: the callback, as its last touch, swaps in CALLBACK_DONE; the
 * destroy tries PENDING -> ORPHANED. Whichever comes second frees: the
 * destroy if the callback was done, the callback if the destroy left the
 * object to it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/alloc.h"
#include "ordo/signal_fd.h"
#include "sync/signal_internal.h"

#define SIGNAL_FD_MAGIC 0x5346444fu /* "ODFS" */
#define SIGNAL_FD_DEAD 0xdeadf00du

enum { OUTCOME_PENDING = 0 };
enum { OWNER_PENDING = 0, OWNER_CALLBACK_DONE = 1, OWNER_ORPHANED = 2 };

struct ordo_signal_fd {
    uint32_t magic;
    int fd;
    ordo_signal_t *signal; /* a reference of the object's */
    uint64_t value;
    ordo_timepoint_t timepoint;
    _Atomic uint32_t outcome; /* OUTCOME_PENDING, or 1 + the timepoint's status */
    _Atomic uint32_t owner;   /* OWNER_*: who frees (see the top) */
};

static void signal_fd_free(ordo_signal_fd_t *export) {
    close(export->fd);
    ordo__signal_release_internal(export->signal);
    ordo__dealloc(export, sizeof *export, 0);
}

static void signal_fd_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    ordo_signal_fd_t *export = ctx;
    atomic_store_explicit(&export->outcome, 1u + (uint32_t)status, memory_order_release);
    uint64_t one = 1;
    /* Cannot fail short of a counter at its maximum (it is written once). */
    ssize_t wrote = write(export->fd, &one, sizeof one);
    (void)wrote;
    if (atomic_exchange_explicit(&export->owner, OWNER_CALLBACK_DONE, memory_order_acq_rel) ==
        OWNER_ORPHANED) {
        signal_fd_free(export);
    }
}

static ordo_status_t signal_fd_check(const ordo_signal_fd_t *export, const char *api) {
    if (!export) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "signal_fd is NULL");
    }
    if (export->magic != SIGNAL_FD_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live signal fd (destroyed, or not one)",
                           (const void *)export);
    }
    return ORDO_OK;
}

ordo_status_t ordo_signal_fd_create(ordo_signal_t *signal, uint64_t value,
                                    ordo_signal_fd_t **out_signal_fd) {
    if (!out_signal_fd) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal_fd is NULL");
    }
    *out_signal_fd = NULL;
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "value %llu exceeds ORDO_SIGNAL_VALUE_MAX", (unsigned long long)value);
    }
    ordo_signal_fd_t *export = ordo__alloc(sizeof *export, 0);
    if (!export) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a signal fd");
    }
    export->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (export->fd < 0) {
        int err = errno;
        ordo__dealloc(export, sizeof *export, 0);
        return ordo__error(err == EMFILE || err == ENFILE ? ORDO_ERR_RESOURCE_EXHAUSTED
                                                          : ORDO_ERR_UNAVAILABLE,
                           __func__, "eventfd: %s", strerror(err));
    }
    export->magic = SIGNAL_FD_MAGIC;
    export->signal = signal;
    export->value = value;
    export->timepoint = (ordo_timepoint_t)ORDO_TIMEPOINT_INIT;
    atomic_init(&export->outcome, OUTCOME_PENDING);
    atomic_init(&export->owner, OWNER_PENDING);
    ordo__signal_retain_internal(signal);
    /* Reached or failed already: resolved here, so the descriptor is
     * readable when this returns. A timepoint armed from inside a callback
     * would have its own queued behind that callback on this thread. */
    uint64_t state = signal_state_now(signal);
    if (!(state & SIGNAL_DESTROYED) &&
        ((state & SIGNAL_VALUE_MASK) >= value || (state & SIGNAL_FAILED))) {
        ordo_status_t outcome =
            (state & SIGNAL_VALUE_MASK) >= value ? ORDO_OK : ordo__signal_failure_now(signal, NULL);
        signal_fd_fired(export, outcome, NULL); /* owner: CALLBACK_DONE */
        *out_signal_fd = export;
        return ORDO_OK;
    }
    ordo_status_t st = ordo__timepoint_arm_checked(
        &export->timepoint, signal, value, signal_fd_fired, export, TIMEPOINT_USER, __func__);
    if (st != ORDO_OK) {
        ordo__signal_release_internal(signal);
        close(export->fd);
        export->magic = SIGNAL_FD_DEAD;
        ordo__dealloc(export, sizeof *export, 0);
        return st;
    }
    *out_signal_fd = export;
    return ORDO_OK;
}

ordo_status_t ordo_signal_fd_get(ordo_signal_fd_t *signal_fd, int *out_fd) {
    if (out_fd) {
        *out_fd = -1;
    }
    ORDO_RETURN_IF_ERROR(signal_fd_check(signal_fd, __func__));
    if (!out_fd) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_fd is NULL");
    }
    *out_fd = signal_fd->fd;
    return ORDO_OK;
}

ordo_status_t ordo_signal_fd_result(ordo_signal_fd_t *signal_fd) {
    ORDO_RETURN_IF_ERROR(signal_fd_check(signal_fd, __func__));
    uint32_t outcome = atomic_load_explicit(&signal_fd->outcome, memory_order_acquire);
    if (outcome == OUTCOME_PENDING) {
        return ordo__error(ORDO_ERR_BUSY, __func__, "value %llu is neither reached nor failed yet",
                           (unsigned long long)signal_fd->value);
    }
    ordo_status_t status = (ordo_status_t)(outcome - 1u);
    if (status == ORDO_OK) {
        return ORDO_OK;
    }
    const ordo_signal_t *signal = signal_fd->signal;
    if (!(signal_state_now(signal) & SIGNAL_FAILED)) {
        return ordo__error(status, __func__,
                           "this process's handle of the signal was destroyed before it reached "
                           "value %llu",
                           (unsigned long long)signal_fd->value);
    }
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    (void)ordo__signal_failure_now(signal, message);
    return ordo__error(status, __func__, "the signal failed before reaching value %llu: %s",
                       (unsigned long long)signal_fd->value, message);
}

ordo_status_t ordo_signal_fd_destroy(ordo_signal_fd_t *signal_fd) {
    ORDO_RETURN_IF_ERROR(signal_fd_check(signal_fd, __func__));
    signal_fd->magic = SIGNAL_FD_DEAD;
    ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
    if (__atomic_load_n(&signal_fd->timepoint.state_, __ATOMIC_ACQUIRE) == TIMEPOINT_ARMED) {
        (void)ordo_timepoint_cancel(&signal_fd->timepoint, &result);
    }
    uint32_t pending = OWNER_PENDING;
    if (result == ORDO_CANCEL_PREVENTED ||
        !atomic_compare_exchange_strong_explicit(&signal_fd->owner, &pending, OWNER_ORPHANED,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        signal_fd_free(signal_fd); /* cancelled, or its callback is done */
    }
    return ORDO_OK;
}
