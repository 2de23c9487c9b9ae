/* Internal: the device HAL. Public objects (devices, streams, events) are
 * thin, validated shells; each backend fills in a vtable that does the
 * work. Everything above this layer is written once against the shells.
 *
 * Lock order: registry_lock (hal/device.c) before any backend lock; it is
 * never held while user code runs. A device's streams_lock (its registry
 * of live streams, hal/stream.c) is never held together with
 * registry_lock; it is taken before a backend's stream lock (a stall
 * report snapshots each stream's queue under it) and never while user
 * code or an allocation runs. */
#ifndef ORDO_HAL_HAL_H
#define ORDO_HAL_HAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/event_pool.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "ordo/stream.h"
#include "ordo/tracker.h" /* ordo_launch_fn, for native graphs */

#define ORDO_DEVICE_MAGIC 0x44455643u /* "DEVC" */
#define ORDO_STREAM_MAGIC 0x5354524du /* "STRM" */
#define ORDO_EVENT_MAGIC 0x4556454eu  /* "EVEN" */
#define ORDO_HAL_DEAD 0xdeaddeadu

typedef struct hal_backend hal_backend_t;

/* State a layer above the HAL keeps per device: made on first use (set
 * with a compare-exchange from NULL, so racing first users agree on one),
 * freed with the device through its own destroy. */
typedef struct hal_device_attachment hal_device_attachment_t;
struct hal_device_attachment {
    void (*destroy)(hal_device_attachment_t *self);
};

/* The memory part of ordo_device_config_default: ORDO_MEMORY if set, else
 * budget (unlimited) and statistics (src/hal/device_config.c). */
ordo_status_t ordo__device_memory_config_default(ordo_device_memory_config_t *out_config,
                                                 const char *api);

/* Checks a caller's memory config (adaptor bits known, a log path with
 * logging). */
ordo_status_t ordo__device_memory_config_check(const ordo_device_memory_config_t *config,
                                               const char *api);

struct ordo_device {
    uint32_t magic;
    _Atomic uint32_t refs;
    const hal_backend_t *backend;
    size_t backend_index; /* in the registry's table */
    int shared;
    ordo_device_info_t info;
    /* The public call building the device, for the refusals of the
     * backend's device_init (which has no api of its own); NULL after. */
    const char *building_api;
    event_pool_t *event_pools[2]; /* indexed by ordo_event_kind_t */
    /* The memory budget account of the device (src/mem/budget.c). */
    _Atomic(hal_device_attachment_t *) mem_budget;
    /* The default memory stack (src/mem/device_memory.c): built on first
     * use under memory_lock from memory_config, destroyed before the
     * backend's device_fini (it may hold the backend's memory). */
    _Atomic(hal_device_attachment_t *) memory;
    pthread_mutex_t memory_lock;
    ordo_device_memory_config_t memory_config;
    void *impl;
    /* The registry of live streams, in creation order: stall reports walk
     * it, barriers check their members against it. */
    pthread_mutex_t streams_lock;
    ordo_stream_t *streams_head; /* under streams_lock */
    ordo_stream_t *streams_tail; /* under streams_lock */
    size_t stream_count;         /* under streams_lock */
    uint64_t stream_ids;         /* under streams_lock: the last id given */
    /* Bumped (under streams_lock) by every stream destroy: a holder of
     * stream pointers that saw the same value before knows none of them
     * was destroyed since. */
    _Atomic uint64_t streams_epoch;
};

/* The objects that keep a stream in their tables (ordo__hal_stream_use). */
typedef enum hal_stream_user {
    HAL_STREAM_TRACKER = 0,
    HAL_STREAM_COORDINATOR = 1,
    HAL_STREAM_USER_KINDS = 2,
} hal_stream_user_t;

/* The objects that make streams and destroy them themselves. */
typedef enum hal_stream_owner {
    HAL_STREAM_OWNER_NONE = 0,    /* its creator's: ordo_stream_destroy */
    HAL_STREAM_OWNER_POOL = 1,    /* a stream pool's: ordo_stream_pool_destroy */
    HAL_STREAM_OWNER_TRACKER = 2, /* a tracker's: ordo_tracker_close or _destroy */
} hal_stream_owner_t;

struct ordo_stream {
    uint32_t magic;
    ordo_device_t *device;
    int priority;
    void *impl;
    /* The object that made the stream and alone destroys it (NULL: the
     * caller that created it, with ordo_stream_destroy): a stream pool or
     * a tracker (ordo_tracker_stream_create), as owner_kind says. */
    const void *owner;
    hal_stream_owner_t owner_kind;
    /* Per hal_stream_user_t, the trackers and coordinators that keep the
     * stream in their tables and would read it after a destroy. */
    _Atomic uint32_t users[HAL_STREAM_USER_KINDS];
    /* The device's registry (under device->streams_lock). */
    ordo_stream_t *registry_prev;
    ordo_stream_t *registry_next;
    uint64_t id; /* unique within the device, never reused */
    /* The key of the stream's track in traces: unique in the process and
     * never reused (an address is, once a stream is freed, and a stream
     * made later in the same trace would share the track). Set before the
     * backend starts the stream's threads. */
    uintptr_t trace_track;
    /* Under device->streams_lock: a name for diagnostics ("" when none). */
    char name[ORDO_STREAM_NAME_MAX];
};

/* One wait or signal still queued on a stream (a stall report's view). */
typedef enum hal_pending_kind { HAL_PENDING_WAIT, HAL_PENDING_SIGNAL } hal_pending_kind_t;

typedef struct hal_pending_op {
    hal_pending_kind_t kind;
    ordo_signal_t *signal; /* retained by the snapshot */
    uint64_t value;
    /* The op's number on its stream: the stream's progress timeline
     * reaches seq once the op has run. */
    uint64_t seq;
} hal_pending_op_t;

/* A stream's queue at one moment. The caller supplies ops and capacity;
 * the backend fills the rest. Release with ordo__hal_stream_snapshot_release. */
typedef struct hal_stream_snapshot {
    hal_pending_op_t *ops; /* in: room for capacity entries */
    size_t capacity;
    size_t count;            /* waits and signals not yet run, in stream order */
    int truncated;           /* more were queued than capacity, or than the backend
                              * walks (count may then be 0) */
    int in_wait;             /* ops[0] is the wait the stream is running now */
    ordo_status_t status;    /* the stream's failure, or ORDO_OK */
    ordo_signal_t *progress; /* retained: the timeline that reaches an op's seq
                              * when the op has run (event waits wait on it) */
    uint64_t completed;      /* ops run */
    uint64_t submitted;      /* ops submitted */
} hal_stream_snapshot_t;

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
    /* Bumped by every record (and put back by a refused one). A stream
     * stamps reached_ns for a record at least as new as the one stamped
     * last (stamped_generation), so neither an older record passed late
     * nor a newer record's refusal loses the stamp of the record that
     * counts. All three change under stamp_lock. */
    uint64_t generation;
    uint64_t stamped_generation;
    _Atomic uint32_t stamp_lock;
    /* Records submitted and not yet passed by their stream, plus
     * EVENT_DESTROY_REQUESTED once destroyed: the last of the two to finish
     * returns the event to its pool. */
    _Atomic uint32_t pending_records;
    void *impl;
};

/* A node of a native graph (hal_backend.graph_make): the work a launch
 * function enqueues on stream, after the nodes deps names (indices of
 * earlier nodes). */
typedef struct hal_graph_node {
    ordo_stream_t *stream;
    ordo_launch_fn launch;
    void *ctx;
    const uint32_t *deps;
    uint32_t dep_count;
} hal_graph_node_t;

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
    /* Optional: non-zero when the calling thread is one stream_fini waits
     * for (the stream's worker, its host lane, its device's completion
     * thread), where user code runs as host tasks and signal callbacks:
     * destroying the stream from there would wait for itself. */
    int (*stream_on_own_thread)(const ordo_stream_t *stream);
    ordo_status_t (*host_task)(ordo_stream_t *stream, ordo_host_fn fn, void *ctx);
    ordo_status_t (*signal)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    ordo_status_t (*wait)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    /* Optional: signal and wait for internal callers that hold spare
     * references on signal: the op adopts one of them (on success; on
     * failure the caller keeps it) instead of taking its own, so the
     * submitting thread does not write the reference count, a line the
     * threads that run the ops write. Only the stream's health is checked
     * (as signal and wait do, failing the signal of a refused signal op).
     * Either may be NULL (the other need not be): use signal or wait. */
    ordo_status_t (*signal_adopt)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    ordo_status_t (*wait_adopt)(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
    ordo_status_t (*synchronize)(ordo_stream_t *stream, ordo_deadline_t deadline);
    ordo_status_t (*status)(ordo_stream_t *stream);
    /* The stream's failure status (ORDO_OK while healthy), recording no
     * message: for internal health checks inside calls that go on. */
    ordo_status_t (*failure)(const ordo_stream_t *stream);
    /* Records event on stream: sets event->timeline and event->point. */
    ordo_status_t (*event_record)(ordo_event_t *event, ordo_stream_t *stream);
    /* Device memory: bytes > 0, alignment a power of two. ORDO_ERR_OUT_OF_MEMORY
     * (with a message) when the device has none to give. mem_free runs on
     * any thread that is not a driver's, never under an ordo lock. */
    ordo_status_t (*mem_alloc)(ordo_device_t *device, size_t bytes, size_t alignment,
                               void **out_ptr);
    void (*mem_free)(ordo_device_t *device, void *ptr, size_t bytes);
    /* Fills snapshot with the waits and signals still queued on stream,
     * retaining each signal. Must not hold the stream back (the CPU
     * backend holds only its producers' lock, for a walk of the queue)
     * and must not allocate or run user code. NULL: the backend cannot
     * show its queues (stall reports skip its streams). */
    void (*stream_snapshot)(ordo_stream_t *stream, hal_stream_snapshot_t *snapshot);
    /* Optional: the stream's progress timeline (it reaches an op's number
     * once that op and every op before it have run, as in a snapshot) and
     * its count of ops submitted (it only grows; the submitting thread
     * reads it after its own submissions). Both live as long as the
     * stream. A tracker reads the count after each submission and later
     * compares the progress with it: it learns that the submission's work
     * has run without recording a point. NULL where the progress does not
     * follow every op of the stream (CUDA: work a launch function puts on
     * the native stream is not numbered). */
    void (*stream_progress)(ordo_stream_t *stream, ordo_signal_t **out_progress,
                            const _Atomic uint64_t **out_submitted);
    /* Optional: backend state of an event (event->impl), made when the
     * device's event pool creates the event and destroyed with it (both
     * under the pool's lock, after device_init and before device_fini). */
    ordo_status_t (*event_init)(ordo_device_t *device, ordo_event_t *event);
    void (*event_fini)(ordo_device_t *device, ordo_event_t *event);
    /* Optional: the time between two timing events whose points are both
     * reached, measured by the device. NULL: from the host stamps. */
    ordo_status_t (*event_elapsed_ns)(ordo_event_t *start, ordo_event_t *end, int64_t *out_ns);
    /* Optional: non-zero when the stream holds back on the host a wait
     * whose signal has not reached its value, which work enqueued later
     * elsewhere may be needed to raise. NULL: never (a backend whose queues
     * never wait on the host for later work, or one without native graphs,
     * which alone ask). */
    int (*stream_waits_unmet)(ordo_stream_t *stream);
    /* Optional, all three or none: native graphs (core/graph_native.c).
     * graph_make builds and instantiates one from nodes (in a topological
     * order, their streams all of stream's device), to be launched on
     * stream, calling each launch function once, on the calling thread,
     * with the work it enqueues on its stream captured instead of run; any
     * other stream operation it attempts is refused. A refusal
     * (ORDO_ERR_UNSUPPORTED: the driver cannot, or a launch function did
     * what a capture cannot hold; a launch function's own failure; out of
     * memory) raises a message naming api and leaves nothing behind.
     * graph_launch enqueues one run of the graph on its stream, in stream
     * order (after the runs before it). graph_free frees it once the runs
     * enqueued so far (launched: any was) no longer need it, never
     * blocking and never failing: what that takes was reserved by
     * graph_make. */
    ordo_status_t (*graph_make)(ordo_stream_t *stream, const hal_graph_node_t *nodes,
                                uint32_t count, void **out_native, const char *api);
    /* Optional, with the three: lowers nodes again for native, which
     * graph_make made from the same recording on the same stream (a rebind
     * or a refresh since), calling each launch function once as
     * graph_make does. Where the backend can, it updates native in place
     * (the runs enqueued before run as they were) and returns native in
     * *out_native; otherwise it makes a new one there, and the caller
     * frees native with graph_free as before. A refusal is graph_make's,
     * and leaves native as it was. */
    ordo_status_t (*graph_remake)(void *native, const hal_graph_node_t *nodes, uint32_t count,
                                  void **out_native, const char *api);
    ordo_status_t (*graph_launch)(void *native);
    void (*graph_free)(void *native, int launched);
};

extern const hal_backend_t ordo__hal_cpu_backend;
#ifdef ORDO_HAVE_CUDA_H
extern const hal_backend_t ordo__hal_cuda_backend;
#endif

#define EVENT_DESTROY_REQUESTED 0x80000000u

/* Backend helpers for recording events (hal/event.c). A backend calls
 * ordo__hal_event_record_begin before submitting a record (it gets the
 * recording's generation), ordo__hal_event_record_abort if the submission
 * failed, and ordo__hal_event_record_reached when its stream passes the record
 * (stamp: whether the point was really reached, for timing events). */
uint64_t ordo__hal_event_record_begin(ordo_event_t *event);
void ordo__hal_event_record_abort(ordo_event_t *event, uint64_t generation);
void ordo__hal_event_record_reached(ordo_event_t *event, uint64_t generation, int stamp);

/* For a backend that records the event's own object (a CUDA timing event)
 * when a held record is issued later: non-zero, with the event's stamp
 * lock held (ordo__hal_event_unlock), while generation is still the
 * event's newest record; 0 when the event was recorded again since (the
 * older record must then not move the event's object). */
int ordo__hal_event_lock_if_current(ordo_event_t *event, uint64_t generation);
void ordo__hal_event_unlock(ordo_event_t *event);

/* Handle checks raising a message for api. */
ordo_status_t ordo__hal_device_check(const ordo_device_t *device, const char *api);
ordo_status_t ordo__hal_stream_check(const ordo_stream_t *stream, const char *api);

/* The failure status of a stream already checked (ORDO_OK while healthy),
 * leaving the thread's message alone, unlike ordo_stream_status: for a
 * call that only decides by it and goes on (ordo/status.h). */
ordo_status_t ordo__hal_stream_failure(const ordo_stream_t *stream);
ordo_status_t ordo__hal_event_check(const ordo_event_t *event, const char *api);
/* ordo__hal_event_check, and refuses an event never recorded (it names no point). */
ordo_status_t ordo__hal_event_check_recorded(const ordo_event_t *event, const char *api);

/* Non-zero when the calling thread is one of stream's own (see
 * hal_backend.stream_on_own_thread): it must not destroy the stream. */
int ordo__hal_stream_on_own_thread(const ordo_stream_t *stream);

/* A tracker or coordinator takes stream into its table (use) and lets it
 * go when destroyed (unuse); the stream's destroy is refused in between. */
void ordo__hal_stream_use(ordo_stream_t *stream, hal_stream_user_t user);
void ordo__hal_stream_unuse(ordo_stream_t *stream, hal_stream_user_t user);

/* ORDO_ERR_BUSY, with a message for api, when stream must not be
 * destroyed now: called on its own thread, or still used by a tracker or
 * a coordinator. The owner (a stream pool, a tracker) is not checked. */
ordo_status_t ordo__hal_stream_check_destroy(const ordo_stream_t *stream, const char *api);

/* ordo__hal_stream_check_destroy for an owner that itself keeps the stream
 * in its table tracker_uses times (a tracker that will let it go first). */
ordo_status_t ordo__hal_stream_check_destroy_by(const ordo_stream_t *stream, uint32_t tracker_uses,
                                                const char *api);

/* Destroys stream after ordo__hal_stream_check_destroy; for its stream pool. */
ordo_status_t ordo__hal_stream_destroy(ordo_stream_t *stream, const char *api);

/* Writes the failure message of a stream whose host task number seq
 * returned st into out: "host task <seq> returned <status>" (for a value
 * that is no ordo status, "returned <number>, not an ordo status
 * (ORDO_ERR_ABORTED)"), followed by the message the task left on the
 * calling thread (ordo_fail, or an ordo call that failed inside it) when
 * left_message says it left one during its run (its ordo__error_count
 * moved); the thread's message is otherwise an older one and is not used.
 * Returns the status the stream fails with: st, or ORDO_ERR_ABORTED for a
 * value that is no ordo status. */
ordo_status_t ordo__hal_host_task_failure(char *out, size_t capacity, uint64_t seq,
                                          ordo_status_t st, int left_message);

/* Drops the references a snapshot holds (outside every lock: a last
 * release may run callbacks). */
void ordo__hal_stream_snapshot_release(hal_stream_snapshot_t *snapshot);

/* The index of the first of streams[i] (never dereferenced) that is not a
 * live stream of device with id ids[i], or count when all are. Takes
 * streams_lock once. */
size_t ordo__hal_device_find_missing(ordo_device_t *device, ordo_stream_t *const *streams,
                                     const uint64_t *ids, size_t count);

/* Copies stream's name, or its address when it has none, into out
 * (capacity > 0). The caller holds the device's streams_lock. */
void ordo__hal_stream_name_locked(const ordo_stream_t *stream, char *out, size_t capacity);

/* Names a timeline ordo made for itself after the stream it orders, for
 * stall reports: "<whose> timeline of stream <name or address>" (the
 * stream's name as it is now). Here, below the tracker, graphs and the
 * coordinator, which all name theirs so. */
void ordo__timeline_name_after(ordo_signal_t *timeline, const char *whose, ordo_stream_t *stream);

/* How a backend's refusal on a failed stream describes it, before the
 * failure's own message. */
#define HAL_STREAM_FAILED_TEXT "the stream has failed: "

/* The name ordo_stream_set_name gave the stream (taking the device's
 * streams_lock), zero-filled after it: "" when it has none. */
void ordo__hal_stream_own_name(ordo_stream_t *stream, char out[ORDO_STREAM_NAME_MAX]);

/* For tests: make the next n shared-runtime builds fail. */
void ordo__hal_inject_build_failures(int n);

#endif
