/* ordo_tracker_synchronize: waits for the work of every stream a tracker
 * orders, then for its pending reclamations. Kept apart from tracker.c:
 * it reads only the tracker's list of streams. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "core/frontier.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

#define API "ordo_tracker_synchronize"

/* The part of an ordo message after "api: ", or all of it. */
static const char *detail_of(const char *message, const char *api) {
    size_t n = strlen(api);
    return strncmp(message, api, n) == 0 && strncmp(message + n, ": ", 2) == 0 ? message + n + 2
                                                                               : message;
}

/* Whether a stream's synchronize refusal (its detail) is a failure that
 * began elsewhere: the stream only waited for failed work. */
static int failed_by_a_wait(const char *detail) {
    static const char text[] = HAL_STREAM_FAILED_TEXT ORDO__WAIT_ENDED_TEXT;
    return strncmp(detail, text, sizeof text - 1) == 0;
}

ordo_status_t ordo_tracker_synchronize(ordo_tracker_t *tracker, ordo_deadline_t deadline) {
    ordo_status_t st = ordo__tracker_check(tracker, API);
    if (st != ORDO_OK) {
        return st;
    }
    /* Streams are attached by submissions: the list is read under the
     * lock that submitting threads hold, then waited on without it, so
     * submissions go on meanwhile (and are not waited for once they come
     * after the read). The streams the tracker owns and has not ordered
     * yet follow (they get their work from elsewhere). Streams outlive
     * their tracker: the pointers stay good. */
    ordo_stream_t *streams[2 * ORDO_TRACKER_MAX_STREAMS];
    (void)ordo_tracker_lock(tracker);
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        st = ordo__graph_refuse(tracker, API, ordo__graph_host_wait_refused);
        (void)ordo_tracker_unlock(tracker);
        return st;
    }
    uint32_t count = frontier_stream_count(tracker);
    for (uint32_t i = 0; i < count; ++i) {
        streams[i] = frontier_stream(tracker, i);
    }
    for (uint32_t i = 0; i < tracker->owned_count; ++i) {
        uint32_t index;
        if (!tracker_stream_find(tracker, tracker->owned[i], &index)) {
            streams[count++] = tracker->owned[i];
        }
    }
    (void)ordo_tracker_unlock(tracker);
    /* On a thread of one of them (a host task, or a callback it ran): it
     * would wait for itself. Refused before anything is waited for. */
    for (uint32_t i = 0; i < count; ++i) {
        if (ordo__hal_stream_on_own_thread(streams[i])) {
            return ordo__error(ORDO_ERR_BUSY, API,
                               "called on a thread of stream %p (a host task, or a callback it "
                               "ran), which the synchronize would wait for",
                               (void *)streams[i]);
        }
    }

    /* The failure reported: the first stream's (in first-use order) that
     * failed on its own, else the first that failed by a wait. */
    ordo_status_t failure = ORDO_OK;
    int failure_own = 0;
    char failed_name[ORDO_STREAM_NAME_MAX] = "";
    char failed_message[ORDO_SIGNAL_MESSAGE_MAX + 64] = "";
    for (uint32_t i = 0; i < count; ++i) {
        st = ordo_stream_synchronize(streams[i], deadline);
        if (st == ORDO_OK) {
            continue;
        }
        char name[ORDO_STREAM_NAME_MAX];
        if (ordo_stream_name(streams[i], name, sizeof name) != ORDO_OK) {
            snprintf(name, sizeof name, "%p", (void *)streams[i]);
        }
        if (st == ORDO_ERR_TIMEOUT) {
            /* Work is still pending: the teardown this precedes is not
             * safe, whatever other streams failed with. */
            return ordo__error(st, API, "stream %s still had work pending at the deadline", name);
        }
        const char *detail = detail_of(ordo_error_message(), "ordo_stream_synchronize");
        int own = !failed_by_a_wait(detail);
        if (failure == ORDO_OK || (own && !failure_own)) {
            failure = st;
            failure_own = own;
            snprintf(failed_name, sizeof failed_name, "%s", name);
            snprintf(failed_message, sizeof failed_message, "%s", detail);
        }
    }
    st = ordo_tracker_drain(tracker, deadline);
    if (st != ORDO_OK) {
        return ordo__error(st, API, "%s", detail_of(ordo_error_message(), "ordo_tracker_drain"));
    }
    if (failure != ORDO_OK) {
        return ordo__error(failure, API, "stream %s: %s", failed_name, failed_message);
    }
    return ORDO_OK;
}
