/* Cross-stream barriers: a device form built from stream signals and
 * stream waits on the barrier's timelines, and a host synchronize.
 *
 * Timeline i belongs to member i; generation g of the barrier signals it to
 * g. Hub scheme: members 1..n-1 signal their timelines, member 0 waits for
 * all of them and then signals timeline 0, which the others wait for.
 * All-to-all: every member signals its timeline and waits for every other.
 * Every signal is enqueued before any wait on it, so no wait is ever on a
 * point that no work has been enqueued to reach. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/hal.h"
#include "ordo/barrier.h"
#include "ordo/event.h"
#include "sync/signal_access.h"

#define ORDO_BARRIER_MAGIC 0x42415252u /* "BARR" */

struct ordo_barrier {
    uint32_t magic;
    ordo_barrier_scheme_t scheme; /* resolved: hub or all-to-all */
    ordo_device_t *device;        /* retained */
    size_t count;
    uint64_t generation;
    /* The device's streams_epoch when the members were last found alive. */
    uint64_t epoch;
    ordo_stream_t **streams;
    uint64_t *ids;
    ordo_signal_t **timelines;
    size_t bytes; /* of the whole allocation */
};

static ordo_status_t barrier_check(const ordo_barrier_t *barrier, const char *api) {
    if (!barrier) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "barrier is NULL");
    }
    if (barrier->magic != ORDO_BARRIER_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live barrier",
                           (const void *)barrier);
    }
    return ORDO_OK;
}

/* Validates a set and copies its distinct streams, in first-seen order,
 * into unique (room for ORDO_BARRIER_MAX_STREAMS). */
static ordo_status_t set_validate(ordo_stream_t *const *streams, size_t count, const char *api,
                                  ordo_stream_t **unique, size_t *out_unique) {
    if (!streams) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "streams is NULL");
    }
    if (count == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "the set of streams is empty");
    }
    if (count > ORDO_BARRIER_MAX_STREAMS) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api,
                           "%zu streams exceed ORDO_BARRIER_MAX_STREAMS (%u)", count,
                           ORDO_BARRIER_MAX_STREAMS);
    }
    size_t n = 0;
    for (size_t i = 0; i < count; ++i) {
        ordo_stream_t *s = streams[i];
        if (!s) {
            return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "entry %zu is NULL", i);
        }
        if (s->magic != ORDO_STREAM_MAGIC) {
            return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                               "entry %zu (%p) is not a live stream (destroyed, or not a stream)",
                               i, (void *)s);
        }
        if (s->device != streams[0]->device) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "entry %zu is a stream of device %s (%p), entry 0 of %s (%p): a "
                               "barrier spans one device",
                               i, s->device->info.name, (void *)s->device,
                               streams[0]->device->info.name, (void *)streams[0]->device);
        }
        size_t k = 0;
        while (k < n && unique[k] != s) {
            ++k;
        }
        if (k == n) {
            unique[n++] = s; /* duplicates merge */
        }
    }
    *out_unique = n;
    return ORDO_OK;
}

/* The members are alive unless a stream of the device was destroyed since
 * they were last checked; then each is looked up without touching it. */
static ordo_status_t members_check(ordo_barrier_t *b, const char *api) {
    uint64_t epoch = atomic_load_explicit(&b->device->streams_epoch, memory_order_acquire);
    if (ORDO_LIKELY(epoch == b->epoch)) {
        return ORDO_OK;
    }
    size_t bad = ordo__hal_device_find_missing(b->device, b->streams, b->ids, b->count);
    if (bad < b->count) {
        return ordo__error(ORDO_ERR_DESTROYED, api,
                           "member %zu (stream %p) was destroyed after the barrier was created",
                           bad, (void *)b->streams[bad]);
    }
    b->epoch = epoch;
    return ORDO_OK;
}

static void barrier_free(ordo_barrier_t *b) {
    for (size_t i = 0; i < b->count; ++i) {
        if (b->timelines[i]) {
            /* Released, never destroyed: operations still queued on the
             * streams hold their own references and still run. */
            ordo__signal_release_internal(b->timelines[i]);
        }
    }
    ordo_device_release(b->device);
    b->magic = ORDO_HAL_DEAD;
    ordo__dealloc(b, b->bytes, 0);
}

static ordo_status_t barrier_make(ordo_stream_t *const *streams, size_t count,
                                  ordo_barrier_scheme_t scheme, ordo_barrier_t **out,
                                  const char *api) {
    if (scheme != ORDO_BARRIER_SCHEME_AUTO && scheme != ORDO_BARRIER_SCHEME_HUB &&
        scheme != ORDO_BARRIER_SCHEME_ALL_TO_ALL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "scheme %d is not a barrier scheme",
                           (int)scheme);
    }
    ordo_stream_t *unique[ORDO_BARRIER_MAX_STREAMS];
    size_t n = 0;
    ORDO_RETURN_IF_ERROR(set_validate(streams, count, api, unique, &n));
    ordo_device_t *device = unique[0]->device;
    size_t bytes = sizeof(ordo_barrier_t) +
                   n * (sizeof(ordo_stream_t *) + sizeof(uint64_t) + sizeof(ordo_signal_t *));
    ordo_barrier_t *b = ordo__alloc(bytes, 0);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a barrier of %zu streams",
                           n);
    }
    b->magic = ORDO_BARRIER_MAGIC;
    b->bytes = bytes;
    b->device = device;
    ordo_device_retain(device);
    b->count = n;
    b->epoch = atomic_load_explicit(&device->streams_epoch, memory_order_acquire);
    b->streams = (ordo_stream_t **)(b + 1);
    b->ids = (uint64_t *)(b->streams + n);
    b->timelines = (ordo_signal_t **)(b->ids + n);
    if (scheme == ORDO_BARRIER_SCHEME_AUTO) {
        scheme = n <= 2 ? ORDO_BARRIER_SCHEME_ALL_TO_ALL : ORDO_BARRIER_SCHEME_HUB;
    }
    b->scheme = scheme;
    for (size_t i = 0; i < n; ++i) {
        b->streams[i] = unique[i];
        b->ids[i] = unique[i]->id;
        if (ordo_signal_create(0, &b->timelines[i]) != ORDO_OK) {
            barrier_free(b);
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                               "cannot create the barrier's timelines");
        }
        char name[ORDO_SIGNAL_NAME_MAX];
        snprintf(name, sizeof name, "barrier %p[%zu]", (void *)b, i);
        ordo__signal_name_set_internal(b->timelines[i], name);
    }
    *out = b;
    return ORDO_OK;
}

/* The first error of a sequence of enqueues, with its message kept. */
typedef struct first_error {
    ordo_status_t status;
    size_t member;
    char message[256];
} first_error_t;

/* Keeps the failure of the first member in set order, whichever was seen
 * first: a member that fails while the host waits is seen only after the
 * enqueues a later member refused. */
static void note(first_error_t *e, ordo_status_t st, size_t member) {
    if (st != ORDO_OK && (e->status == ORDO_OK || member < e->member)) {
        e->status = st;
        e->member = member;
        snprintf(e->message, sizeof e->message, "%s", ordo_error_message());
    }
}

static ordo_status_t raise_first(const first_error_t *e, const char *api) {
    if (e->status == ORDO_OK) {
        return ORDO_OK;
    }
    return ordo__error(e->status, api, "member %zu: %s", e->member, e->message);
}

/* Member i's stream signals timeline t to g. If that cannot be enqueued,
 * the timeline fails, so nobody waits for a point that will not come (a
 * failed stream has failed it already; failing again is a no-op). */
static void enqueue_signal(ordo_barrier_t *b, size_t i, size_t t, uint64_t g, first_error_t *e) {
    ordo_status_t st = ordo_stream_signal(b->streams[i], b->timelines[t], g);
    if (st != ORDO_OK) {
        note(e, st, i);
        (void)ordo_signal_fail(b->timelines[t], st, "a barrier signal could not be enqueued");
    }
}

static void enqueue_wait(ordo_barrier_t *b, size_t i, size_t t, uint64_t g, first_error_t *e) {
    note(e, ordo_stream_wait(b->streams[i], b->timelines[t], g), i);
}

static ordo_status_t barrier_enqueue(ordo_barrier_t *b, const char *api) {
    size_t n = b->count;
    if (n == 1) {
        ordo_status_t st = ordo_stream_status(b->streams[0]);
        return st == ORDO_OK ? ORDO_OK
                             : ordo__error(st, api, "member 0: stream %p has failed with %s",
                                           (void *)b->streams[0], ordo_status_name(st));
    }
    uint64_t g = ++b->generation;
    first_error_t e = {ORDO_OK, 0, ""};
    if (b->scheme == ORDO_BARRIER_SCHEME_HUB) {
        for (size_t i = 1; i < n; ++i) {
            enqueue_signal(b, i, i, g, &e);
        }
        for (size_t i = 1; i < n; ++i) {
            enqueue_wait(b, 0, i, g, &e);
        }
        enqueue_signal(b, 0, 0, g, &e);
        for (size_t i = 1; i < n; ++i) {
            enqueue_wait(b, i, 0, g, &e);
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            enqueue_signal(b, i, i, g, &e);
        }
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < n; ++j) {
                if (j != i) {
                    enqueue_wait(b, i, j, g, &e);
                }
            }
        }
    }
    return raise_first(&e, api);
}

ordo_status_t ordo_barrier_create(ordo_stream_t *const *streams, size_t count,
                                  ordo_barrier_scheme_t scheme, ordo_barrier_t **out_barrier) {
    if (!out_barrier) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_barrier is NULL");
    }
    *out_barrier = NULL;
    return barrier_make(streams, count, scheme, out_barrier, __func__);
}

ordo_status_t ordo_barrier_destroy(ordo_barrier_t *barrier) {
    ORDO_RETURN_IF_ERROR(barrier_check(barrier, __func__));
    barrier_free(barrier);
    return ORDO_OK;
}

ordo_status_t ordo_barrier_arrive(ordo_barrier_t *barrier) {
    ordo_status_t st = barrier_check(barrier, __func__);
    if (st == ORDO_OK) {
        st = members_check(barrier, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    return barrier_enqueue(barrier, __func__);
}

ordo_status_t ordo_barrier_synchronize(ordo_barrier_t *barrier, ordo_deadline_t deadline,
                                       uint64_t *out_elapsed_ns) {
    if (out_elapsed_ns) {
        *out_elapsed_ns = 0;
    }
    uint64_t start = ordo_time_now_ns();
    ordo_status_t st = barrier_check(barrier, __func__);
    if (st == ORDO_OK) {
        st = members_check(barrier, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    /* Every member records its current point on its timeline, then the
     * host waits for all of them with the one deadline. */
    uint64_t g = ++barrier->generation;
    first_error_t failed = {ORDO_OK, 0, ""};
    for (size_t i = 0; i < barrier->count; ++i) {
        enqueue_signal(barrier, i, i, g, &failed);
    }
    size_t late = barrier->count;
    for (size_t i = 0; i < barrier->count; ++i) {
        st = ordo_signal_wait(barrier->timelines[i], g, deadline);
        if (st == ORDO_ERR_TIMEOUT) {
            late = late < barrier->count ? late : i;
        } else {
            note(&failed, st, i);
        }
    }
    if (out_elapsed_ns) {
        *out_elapsed_ns = ordo_time_now_ns() - start;
    }
    if (late < barrier->count) {
        return ordo__error(ORDO_ERR_TIMEOUT, __func__,
                           "member %zu (stream %p) had not reached its point by the deadline%s",
                           late, (void *)barrier->streams[late],
                           failed.status != ORDO_OK ? " (and a member has failed)" : "");
    }
    return raise_first(&failed, __func__);
}

ordo_status_t ordo_barrier_stream_count(ordo_barrier_t *barrier, size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    ORDO_RETURN_IF_ERROR(barrier_check(barrier, __func__));
    if (!out_count) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_count is NULL");
    }
    *out_count = barrier->count;
    return ORDO_OK;
}

ordo_status_t ordo_barrier_streams(ordo_stream_t *const *streams, size_t count) {
    ordo_barrier_t *b = NULL;
    ORDO_RETURN_IF_ERROR(barrier_make(streams, count, ORDO_BARRIER_SCHEME_AUTO, &b, __func__));
    ordo_status_t st = barrier_enqueue(b, __func__);
    barrier_free(b);
    return st;
}

ordo_status_t ordo_barrier_synchronize_streams(ordo_stream_t *const *streams, size_t count,
                                               ordo_deadline_t deadline, uint64_t *out_elapsed_ns) {
    if (out_elapsed_ns) {
        *out_elapsed_ns = 0;
    }
    uint64_t start = ordo_time_now_ns();
    ordo_stream_t *unique[ORDO_BARRIER_MAX_STREAMS];
    size_t n = 0;
    ordo_status_t st = set_validate(streams, count, __func__, unique, &n);
    if (st != ORDO_OK) {
        return st;
    }
    /* Points first, at the call: work submitted while the host waits for
     * one stream does not lengthen the wait for another. */
    ordo_event_t *events[ORDO_BARRIER_MAX_STREAMS] = {0};
    first_error_t failed = {ORDO_OK, 0, ""};
    for (size_t i = 0; i < n; ++i) {
        st = ordo_event_create(unique[i]->device, ORDO_EVENT_PLAIN, &events[i]);
        if (st == ORDO_OK) {
            st = ordo_event_record(events[i], unique[i]);
        }
        note(&failed, st, i);
    }
    size_t late = n;
    for (size_t i = 0; i < n; ++i) {
        int recorded = events[i] && events[i]->timeline;
        if (recorded) {
            st = ordo_event_synchronize(events[i], deadline);
            if (st == ORDO_ERR_TIMEOUT) {
                late = late < n ? late : i;
            } else {
                note(&failed, st, i);
            }
        }
        if (events[i]) {
            (void)ordo_event_destroy(events[i]);
        }
    }
    if (out_elapsed_ns) {
        *out_elapsed_ns = ordo_time_now_ns() - start;
    }
    if (late < n) {
        return ordo__error(ORDO_ERR_TIMEOUT, __func__,
                           "stream %zu (%p) had not reached its point by the deadline%s", late,
                           (void *)unique[late],
                           failed.status != ORDO_OK ? " (and a stream has failed)" : "");
    }
    return raise_first(&failed, __func__);
}
