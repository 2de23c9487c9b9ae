/* Streams: validation and dispatch to the backend. */
#include <stdio.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/name.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

ordo_status_t ordo__hal_stream_check(const ordo_stream_t *stream, const char *api) {
    if (!stream) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "stream is NULL");
    }
    if (stream->magic != ORDO_STREAM_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live stream",
                           (const void *)stream);
    }
    return ORDO_OK;
}

/* ---- the device's registry of live streams ------------------------------ */

static void registry_add(ordo_device_t *device, ordo_stream_t *stream) {
    pthread_mutex_lock(&device->streams_lock);
    stream->id = ++device->stream_ids;
    stream->registry_next = NULL;
    stream->registry_prev = device->streams_tail;
    if (device->streams_tail) {
        device->streams_tail->registry_next = stream;
    } else {
        device->streams_head = stream;
    }
    device->streams_tail = stream;
    ++device->stream_count;
    pthread_mutex_unlock(&device->streams_lock);
}

static void registry_remove(ordo_device_t *device, ordo_stream_t *stream) {
    pthread_mutex_lock(&device->streams_lock);
    if (stream->registry_prev) {
        stream->registry_prev->registry_next = stream->registry_next;
    } else {
        device->streams_head = stream->registry_next;
    }
    if (stream->registry_next) {
        stream->registry_next->registry_prev = stream->registry_prev;
    } else {
        device->streams_tail = stream->registry_prev;
    }
    stream->registry_prev = stream->registry_next = NULL;
    --device->stream_count;
    atomic_fetch_add_explicit(&device->streams_epoch, 1, memory_order_release);
    pthread_mutex_unlock(&device->streams_lock);
}

size_t ordo__hal_device_find_missing(ordo_device_t *device, ordo_stream_t *const *streams,
                                     const uint64_t *ids, size_t count) {
    size_t i = 0;
    pthread_mutex_lock(&device->streams_lock);
    for (; i < count; ++i) {
        const ordo_stream_t *live = device->streams_head;
        while (live && live != streams[i]) {
            live = live->registry_next;
        }
        /* The id tells a new stream at a recycled address from the old. */
        if (!live || live->id != ids[i]) {
            break;
        }
    }
    pthread_mutex_unlock(&device->streams_lock);
    return i;
}

void ordo__hal_stream_snapshot_release(hal_stream_snapshot_t *snapshot) {
    for (size_t i = 0; i < snapshot->count; ++i) {
        ordo__signal_release_internal(snapshot->ops[i].signal);
    }
    snapshot->count = 0;
    if (snapshot->progress) {
        ordo__signal_release_internal(snapshot->progress);
        snapshot->progress = NULL;
    }
}

ordo_status_t ordo__hal_host_task_failure(char *out, size_t capacity, uint64_t seq,
                                          ordo_status_t st, int left_message) {
    /* A value that is no ordo status has no name: its number is what the
     * task's author can look for. */
    const int known = ordo_status_is_error(st);
    int len = known
                  ? snprintf(out, capacity, "host task %llu returned %s", (unsigned long long)seq,
                             ordo_status_name(st))
                  : snprintf(out, capacity, "host task %llu returned %d, not an ordo status (%s)",
                             (unsigned long long)seq, (int)st, ordo_status_name(ORDO_ERR_ABORTED));
    if (left_message && len >= 0 && (size_t)len < capacity) {
        snprintf(out + len, capacity - (size_t)len, ": %s", ordo_error_message());
    }
    return known ? st : ORDO_ERR_ABORTED;
}

int ordo__hal_stream_on_own_thread(const ordo_stream_t *stream) {
    const hal_backend_t *backend = stream->device->backend;
    return backend->stream_on_own_thread && backend->stream_on_own_thread(stream);
}

void ordo__hal_stream_use(ordo_stream_t *stream, hal_stream_user_t user) {
    atomic_fetch_add_explicit(&stream->users[user], 1, memory_order_relaxed);
}

void ordo__hal_stream_unuse(ordo_stream_t *stream, hal_stream_user_t user) {
    atomic_fetch_sub_explicit(&stream->users[user], 1, memory_order_release);
}

ordo_status_t ordo__hal_stream_check_destroy(const ordo_stream_t *stream, const char *api) {
    return ordo__hal_stream_check_destroy_by(stream, 0, api);
}

ordo_status_t ordo__hal_stream_check_destroy_by(const ordo_stream_t *stream, uint32_t tracker_uses,
                                                const char *api) {
    if (ordo__hal_stream_on_own_thread(stream)) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "called on a thread of stream %p itself (from a host task or a callback "
                           "it ran): the destroy would wait for that thread; call %s from another "
                           "thread",
                           (const void *)stream, api);
    }
    uint32_t trackers =
        atomic_load_explicit(&stream->users[HAL_STREAM_TRACKER], memory_order_acquire) -
        tracker_uses;
    uint32_t coords =
        atomic_load_explicit(&stream->users[HAL_STREAM_COORDINATOR], memory_order_acquire);
    if (trackers || coords) {
        /* Only the holders there are: the message tells the user which. */
        char holders[64];
        if (trackers && coords) {
            snprintf(holders, sizeof holders, "%u tracker(s) and %u coordinator(s)", trackers,
                     coords);
        } else {
            snprintf(holders, sizeof holders, "%u %s", trackers ? trackers : coords,
                     trackers ? "tracker(s)" : "coordinator(s)");
        }
        return ordo__error(ORDO_ERR_BUSY, api,
                           "stream %p is still ordered by %s, which keep it in their tables: "
                           "destroy them first",
                           (const void *)stream, holders);
    }
    return ORDO_OK;
}

/* ---- public entry points ------------------------------------------------ */

ordo_status_t ordo_stream_create(ordo_device_t *device, int priority, ordo_stream_t **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    if (priority > device->info.priority_least || priority < device->info.priority_greatest) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "priority %d outside [%d (most urgent), %d] for %s", priority,
                           device->info.priority_greatest, device->info.priority_least,
                           device->info.name);
    }
    ordo_stream_t *stream = ordo__alloc(sizeof *stream, 0);
    if (!stream) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a stream");
    }
    static _Atomic uintptr_t trace_tracks;
    stream->magic = ORDO_STREAM_MAGIC;
    stream->device = device;
    stream->priority = priority;
    stream->trace_track = atomic_fetch_add_explicit(&trace_tracks, 1, memory_order_relaxed) + 1;
    ordo_status_t st = device->backend->stream_init(stream);
    if (st != ORDO_OK) {
        stream->magic = ORDO_HAL_DEAD;
        ordo__dealloc(stream, sizeof *stream, 0);
        return st;
    }
    ordo_device_retain(device);
    registry_add(device, stream);
    *out_stream = stream;
    return ORDO_OK;
}

ordo_status_t ordo_stream_destroy(ordo_stream_t *stream) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (stream->owner_kind == HAL_STREAM_OWNER_POOL) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "stream %p belongs to the stream pool %p, which hands it out: "
                           "ordo_stream_pool_destroy destroys it with the pool",
                           (void *)stream, stream->owner);
    }
    if (stream->owner_kind == HAL_STREAM_OWNER_TRACKER) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "stream %p belongs to the tracker %p, which made it "
                           "(ordo_tracker_stream_create): ordo_tracker_close (or "
                           "ordo_tracker_destroy) destroys it with the tracker",
                           (void *)stream, stream->owner);
    }
    return ordo__hal_stream_destroy(stream, __func__);
}

ordo_status_t ordo__hal_stream_destroy(ordo_stream_t *stream, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check_destroy(stream, api));
    ordo_device_t *device = stream->device;
    /* Out of the registry first: a stall report snapshotting the stream
     * holds streams_lock, so the backend's teardown waits for it. */
    registry_remove(device, stream);
    device->backend->stream_fini(stream);
    stream->magic = ORDO_HAL_DEAD;
    ordo__dealloc(stream, sizeof *stream, 0);
    return ordo_device_release(device);
}

ordo_status_t ordo_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx) {
    ordo_status_t st = ordo__hal_stream_check(stream, __func__);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        return st;
    }
    if (ORDO_UNLIKELY(!fn)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "fn is NULL");
    }
    return stream->device->backend->host_task(stream, fn, ctx);
}

static ordo_status_t check_point(ordo_signal_t *signal, uint64_t value, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, api));
    if (value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "value %llu exceeds ORDO_SIGNAL_VALUE_MAX",
                           (unsigned long long)value);
    }
    if (ordo__signal_destroyed(signal)) {
        return ordo__error(ORDO_ERR_DESTROYED, api, "signal %p was destroyed", (void *)signal);
    }
    return ORDO_OK;
}

ordo_status_t ordo_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value) {
    ordo_status_t st = ordo__hal_stream_check(stream, __func__);
    if (st == ORDO_OK) {
        st = check_point(signal, value, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    return stream->device->backend->signal(stream, signal, value);
}

ordo_status_t ordo_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value) {
    ordo_status_t st = ordo__hal_stream_check(stream, __func__);
    if (st == ORDO_OK) {
        st = check_point(signal, value, __func__);
    }
    if (st == ORDO_OK) {
        st = ordo__signal_armable(signal, __func__); /* the stream's wait arms on it */
    }
    if (st != ORDO_OK) {
        return st;
    }
    return stream->device->backend->wait(stream, signal, value);
}

ordo_status_t ordo_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (ordo__hal_stream_on_own_thread(stream)) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "called on a thread of stream %p itself (from a host task or a callback "
                           "it ran): the stream cannot reach work submitted before the call while "
                           "this thread waits in it",
                           (const void *)stream);
    }
    return stream->device->backend->synchronize(stream, deadline);
}

ordo_status_t ordo_stream_status(ordo_stream_t *stream) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    return stream->device->backend->status(stream);
}

ordo_status_t ordo__hal_stream_failure(const ordo_stream_t *stream) {
    return stream->device->backend->failure(stream);
}

ordo_status_t ordo_stream_is_healthy(ordo_stream_t *stream, bool *out_healthy) {
    if (out_healthy) {
        *out_healthy = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (!out_healthy) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_healthy is NULL");
    }
    *out_healthy = ordo__hal_stream_failure(stream) == ORDO_OK;
    return ORDO_OK;
}

ordo_status_t ordo_stream_priority(ordo_stream_t *stream, int *out_priority) {
    if (out_priority) {
        *out_priority = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (!out_priority) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_priority is NULL");
    }
    *out_priority = stream->priority;
    return ORDO_OK;
}

ordo_status_t ordo_stream_device(ordo_stream_t *stream, ordo_device_t **out_device) {
    if (out_device) {
        *out_device = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (!out_device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_device is NULL");
    }
    *out_device = stream->device;
    return ORDO_OK;
}

/* ---- names (under the device's streams_lock, which stall reports hold
 * while they read them) ---------------------------------------------------- */

void ordo__hal_stream_name_locked(const ordo_stream_t *stream, char *out, size_t capacity) {
    name_or_address(stream->name, stream, out, capacity);
}

void ordo__hal_stream_own_name(ordo_stream_t *stream, char out[ORDO_STREAM_NAME_MAX]) {
    memset(out, 0, ORDO_STREAM_NAME_MAX);
    pthread_mutex_lock(&stream->device->streams_lock);
    memcpy(out, stream->name, strnlen(stream->name, ORDO_STREAM_NAME_MAX - 1));
    pthread_mutex_unlock(&stream->device->streams_lock);
}

void ordo__timeline_name_after(ordo_signal_t *timeline, const char *whose, ordo_stream_t *stream) {
    char stream_name[ORDO_STREAM_NAME_MAX], name[ORDO_STREAM_NAME_MAX + 32]; /* truncated as set */
    (void)ordo_stream_name(stream, stream_name, sizeof stream_name);
    snprintf(name, sizeof name, "%s timeline of stream %s", whose, stream_name);
    (void)ordo_signal_set_name(timeline, name);
}

ordo_status_t ordo_stream_set_name(ordo_stream_t *stream, const char *name) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    pthread_mutex_lock(&stream->device->streams_lock);
    name_store(stream->name, sizeof stream->name, name);
    pthread_mutex_unlock(&stream->device->streams_lock);
    return ORDO_OK;
}

ordo_status_t ordo_stream_name(ordo_stream_t *stream, char *out_name, size_t capacity) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (!out_name || capacity == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s",
                           out_name ? "capacity is 0" : "out_name is NULL");
    }
    pthread_mutex_lock(&stream->device->streams_lock);
    ordo__hal_stream_name_locked(stream, out_name, capacity);
    pthread_mutex_unlock(&stream->device->streams_lock);
    return ORDO_OK;
}
