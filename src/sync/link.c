#include <string.h>

#include "ordo/link.h"
#include "sync/signal_internal.h"

void ordo__link_timepoint_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    ordo_link_t *link = ctx;
    ordo_signal_t *source = timepoint->signal_;
    ordo_signal_t *target = link->target_;
    uint64_t target_value = link->target_value_;
    /* Everything of the link is read: it is its owner's again (to re-arm or
     * free) from here on, before its target gets the outcome, so a thread
     * that sees the target reached may reuse the link at once. The
     * references the link held are this call's until its end. */
    __atomic_store_n(&timepoint->state_, TIMEPOINT_FIRED, __ATOMIC_RELEASE);
    /* The target's refusal (it failed or was destroyed first) is nobody's
     * error: the call that fired the link (an advance, an arm, a destroy)
     * goes on, and its thread's message stays (ordo/status.h). */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    if (status == ORDO_OK) {
        (void)ordo_signal_advance(target, target_value);
    } else if (!signal_failed_outcome(source)) {
        /* Destroyed: not failed with ORDO_ERR_CANCELLED, the same status. */
        (void)ordo_signal_fail(target, ORDO_ERR_CANCELLED,
                               "linked source signal was destroyed before reaching its value");
    } else {
        static const char prefix[] = ORDO__LINK_FAILED_TEXT;
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        const char *origin = ordo__failure_origin(source->message);
        size_t room = sizeof message - sizeof prefix; /* keeps the terminator */
        size_t len = strnlen(origin, room);
        memcpy(message, prefix, sizeof prefix - 1);
        memcpy(message + sizeof prefix - 1, origin, len);
        message[sizeof prefix - 1 + len] = '\0';
        (void)ordo_signal_fail(target, status, message);
    }
    ordo__message_restore(&kept);
    ordo__signal_release_internal(target);
    ordo__signal_release_internal(source);
}

/* The ends of a link: live signals (handles), values a signal can take
 * (arguments), not destroyed (state), in that order of faults and each
 * source before target (docs/ERRORS.md). */
static ordo_status_t link_ends_check(ordo_signal_t *const ends[2], const uint64_t values[2]) {
    static const char api[] = "ordo_link_arm";
    static const char *const which[2] = {"source", "target"};
    for (int i = 0; i < 2; ++i) {
        if (!ends[i]) {
            return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s is NULL", which[i]);
        }
        ORDO_RETURN_IF_ERROR(ordo__signal_check(ends[i], api));
    }
    for (int i = 0; i < 2; ++i) {
        if (values[i] > ORDO_SIGNAL_VALUE_MAX) {
            return ordo__error(ORDO_ERR_OUT_OF_RANGE, api,
                               "%s value %llu exceeds ORDO_SIGNAL_VALUE_MAX", which[i],
                               (unsigned long long)values[i]);
        }
    }
    for (int i = 0; i < 2; ++i) {
        if (atomic_load_explicit(&ends[i]->state, memory_order_relaxed) & SIGNAL_DESTROYED) {
            return ordo__error(ORDO_ERR_DESTROYED, api, "%s signal %p was destroyed", which[i],
                               (void *)ends[i]);
        }
    }
    return ORDO_OK;
}

ordo_status_t ordo_link_arm(ordo_link_t *link, ordo_signal_t *source, uint64_t source_value,
                            ordo_signal_t *target, uint64_t target_value) {
    if (!link) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "link is NULL");
    }
    /* The source's checks are ordo_timepoint_arm's, made here so that a
     * refusal names this call and leaves the link as it was. */
    ordo_signal_t *const ends[2] = {source, target};
    const uint64_t values[2] = {source_value, target_value};
    ORDO_RETURN_IF_ERROR(link_ends_check(ends, values));
    uint32_t state = __atomic_load_n(&link->timepoint_.state_, __ATOMIC_ACQUIRE);
    if (state == TIMEPOINT_ARMED || state == TIMEPOINT_DUE) {
        return ordo__error(ORDO_ERR_BUSY, __func__, "link %p is armed, or due and not yet run",
                           (void *)link);
    }
    ordo_signal_t *const old_target = link->target_;
    const uint64_t old_target_value = link->target_value_;
    link->target_ = target;
    link->target_value_ = target_value;
    /* Both references last until the link fires or is cancelled: the
     * callback may run after a caller's release (it is queued when the
     * source fails inside another callback) and reads the source's
     * failure message. */
    ordo__signal_retain_internal(target);
    ordo__signal_retain_internal(source);
    ordo_status_t st =
        ordo__timepoint_arm_checked(&link->timepoint_, source, source_value,
                                    ordo__link_timepoint_fired, link, TIMEPOINT_LINK, __func__);
    if (st != ORDO_OK) {
        /* The source destroyed since its check, by another thread. */
        ordo__signal_release_internal(source);
        ordo__signal_release_internal(target);
        link->target_ = old_target;
        link->target_value_ = old_target_value;
    }
    return st;
}

ordo_status_t ordo_link_cancel(ordo_link_t *link, ordo_cancel_result_t *out_result) {
    if (out_result) {
        *out_result = ORDO_CANCEL_PREVENTED;
    }
    if (!link) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "link is NULL");
    }
    ordo_status_t st = ordo_timepoint_cancel(&link->timepoint_, out_result);
    if (st != ORDO_OK) {
        /* The timepoint's refusal, with this call named first. */
        return ordo__error(st, __func__, "link %p: %s", (void *)link, ordo_error_message());
    }
    if (*out_result == ORDO_CANCEL_PREVENTED) {
        ordo__signal_release_internal(link->timepoint_.signal_);
        ordo__signal_release_internal(link->target_);
    }
    return st;
}
