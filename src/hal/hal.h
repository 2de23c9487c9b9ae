/* Internal: the device HAL. Public objects (devices, streams, events) are
 * thin, validated shells; each backend fills in a vtable that does the
 * work. Everything above this layer is written once against the shells.
 *
 * Lock order: registry_lock (hal/device.c) before any backend lock; it is
 * never held while user code runs. */
#ifndef ORDO_HAL_HAL_H
#define ORDO_HAL_HAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/event_pool.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "ordo/stream.h"

#define ORDO_DEVICE_MAGIC 0x44455643u /* "DEVC" */
#define ORDO_STREAM_MAGIC 0x5354524du /* "STRM" */
#define ORDO_EVENT_MAGIC 0x4556454eu  /* "EVEN" */
#define ORDO_HAL_DEAD 0xdeaddeadu

typedef struct hal_backend hal_backend_t;

struct ordo_device {
    uint32_t magic;
    _Atomic uint32_t refs;
    const hal_backend_t *backend;
    size_t backend_index; /* in the registry's table */
    int shared;
    ordo_device_info_t info;
    event_pool_t *event_pools[2]; /* indexed by ordo_event_kind_t */
    void *impl;
};

struct ordo_stream {
    uint32_t magic;
    ordo_device_t *device;
    int priority;
    void *impl;
};

struct ordo_event {
    uint32_t magic;
    _Atomic uint32_t in_pool; /* 1 while the pool holds it */
    ordo_device_t *device;
    ordo_event_kind_t kind;
    int pooled; /* from the pool's free list (0: created beyond its maximum) */
    /* The recorded point: the recording stream's completion timeline and
     * the value it reaches there. NULL timeline: never recorded. */
    ordo_signal_t *timeline;
    uint64_t point;
    /* Timing events: CLOCK_MONOTONIC ns when the point was reached. */
    _Atomic uint64_t reached_ns;
    /* Bumped by every record; a stream stamps reached_ns only for the
     * recording it was given. Both change under stamp_lock. */
    uint64_t generation;
    _Atomic uint32_t stamp_lock;
    /* Records submitted and not yet passed by their stream, plus
     * EVENT_DESTROY_REQUESTED once destroyed: the last of the two to finish
     * returns the event to its pool. */
    _Atomic uint32_t pending_records;
    void *impl;
};

struct hal_backend {
    const char *name;
    /* Non-zero when usable here; otherwise a reason in reason. */
    int (*available)(char *reason, size_t reason_capacity);
    size_t (*device_count)(void);
    void (*device_info)(int ordinal, ordo_device_info_t *out_info);
    ordo_status_t (*device_init)(ordo_device_t *device);
    void (*device_fini)(ordo_device_t *device);

    ordo_status_t (*stream_init)(ordo_stream_t *stream);
    /* Cancels pending work and returns once the stream is idle. */
    void (*stream_fini)(ordo_stream_t *stream);
    ordo_status_t (*host_task)(ordo_stream_t *stream, ordo_host_fn fn, void *ctx);
    ordo_status_t (*signal)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    ordo_status_t (*wait)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    ordo_status_t (*synchronize)(ordo_stream_t *stream, ordo_deadline_t deadline);
    ordo_status_t (*status)(ordo_stream_t *stream);
    /* Records event on stream: sets event->timeline and event->point. */
    ordo_status_t (*event_record)(ordo_event_t *event, ordo_stream_t *stream);
};

extern const hal_backend_t hal_cpu_backend;

#define EVENT_DESTROY_REQUESTED 0x80000000u

/* Backend helpers for recording events (hal/event.c). A backend calls
 * hal_event_record_begin before submitting a record (it gets the
 * recording's generation), hal_event_record_abort if the submission
 * failed, and hal_event_record_reached when its stream passes the record
 * (stamp: whether the point was really reached, for timing events). */
uint64_t hal_event_record_begin(ordo_event_t *event);
void hal_event_record_abort(ordo_event_t *event, uint64_t generation);
void hal_event_record_reached(ordo_event_t *event, uint64_t generation, int stamp);

/* Handle checks raising a message for api. */
ordo_status_t hal_device_check(const ordo_device_t *device, const char *api);
ordo_status_t hal_stream_check(const ordo_stream_t *stream, const char *api);
ordo_status_t hal_event_check(const ordo_event_t *event, const char *api);
/* hal_event_check, and refuses an event never recorded (it names no point). */
ordo_status_t hal_event_check_recorded(const ordo_event_t *event, const char *api);

/* For tests: make the next n shared-runtime builds fail. */
void hal_inject_build_failures(int n);

#endif
