/** @file
 * ordo/device.h - backends and devices.
 *
 * A backend (cpu; cuda where cuda.h was found at build time) provides
 * devices named "<backend>:<ordinal>" ("cpu" alone means "cpu:0";
 * ORDO_DEVICE_DEFAULT names "cpu:0").
 * ordo_device_open returns the process-wide runtime of that device: the
 * first callers may race, exactly one builds it, all get the same one. A
 * failed build leaves nothing behind, so a later call retries.
 * ordo_device_create_owned builds a private runtime from caller-supplied
 * parts that never aliases the shared one (for tests and custom stacks).
 *
 * Devices are reference counted: each open or create returns one
 * reference, ordo_device_release drops it; streams keep their device alive.
 * The shared runtime is torn down when its last reference goes, and rebuilt
 * by the next open. Events do not hold references (creating one must stay
 * cheap): destroy a device's events before its last release. A device
 * released with events alive is kept allocated so those events stay valid
 * (a leak that ordo_allocator_live_blocks shows), never freed under them.
 * Trackers, coordinators, barriers and direct resources keep their device
 * alive too (a tracker from ordo_tracker_open holds the reference its open
 * took, and drops it when closed), and so does an adaptor or pool a caller builds on the
 * device's own memory stack (ordo_device_memory), which the device owns.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef ORDO_DEVICE_H
#define ORDO_DEVICE_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/event_pool.h"
#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** Capacity of ordo_device_info_t's name and backend, terminator included. */
#define ORDO_DEVICE_NAME_MAX 32u
/** The default device: the CPU backend, always built and always present. */
#define ORDO_DEVICE_DEFAULT "default"

/** A device runtime: the shared one of a named device, or an owned one
 * (opaque, reference counted). */
typedef struct ordo_device ordo_device_t;

/** What a device can do. Stream priorities follow CUDA's convention: a
 * numerically lower value is more urgent; valid priorities run from
 * priority_greatest (most urgent) to priority_least (the default). */
typedef struct ordo_device_info {
    char name[ORDO_DEVICE_NAME_MAX];    /**< "cpu:0" */
    char backend[ORDO_DEVICE_NAME_MAX]; /**< "cpu" */
    int ordinal;                        /**< the device's number within its backend */
    int priority_least;                 /**< the least urgent priority (highest), the default */
    int priority_greatest;              /**< the most urgent priority (numerically lowest) */
    bool timing_events;                 /**< elapsed time between two timing events */
    bool device_memory;                 /**< memory distinct from the host's */
    bool native_timeline;               /**< the device itself signals/waits timeline values */
} ordo_device_info_t;

/** @name Adaptors of the default memory stack
 * The adaptors of a device's default memory stack (ordo/memory.h,
 * ordo_device_memory). The stack is the direct resource with, from the
 * bottom up, whichever of these are chosen: budget, logging, statistics,
 * guard.
 * @{ */
#define ORDO_DEVICE_MEMORY_BUDGET 1u     /**< a device-wide budget (ordo_mem_budget_create) */
#define ORDO_DEVICE_MEMORY_LOGGING 2u    /**< a line per call (ordo_mem_logging_create_path) */
#define ORDO_DEVICE_MEMORY_STATISTICS 4u /**< counters (ordo_mem_statistics_create) */
#define ORDO_DEVICE_MEMORY_GUARD 8u      /**< checks of every block (ordo_mem_guard_create) */
/** @} */
/** Capacity of ordo_device_memory_config_t's log_path, terminator included. */
#define ORDO_DEVICE_MEMORY_LOG_PATH_MAX 256u

/** The adaptors of a device's default memory stack and their settings. */
typedef struct ordo_device_memory_config {
    uint32_t adaptors;     /**< ORDO_DEVICE_MEMORY_* bits */
    uint64_t budget_bytes; /**< with BUDGET: the device's limit (0: unlimited) */
    char log_path[ORDO_DEVICE_MEMORY_LOG_PATH_MAX]; /**< with LOGGING */
} ordo_device_memory_config_t;

/** Caller-supplied parts of an owned runtime. */
typedef struct ordo_device_config {
    ordo_event_pool_config_t plain_events;  /**< the policy of the plain event pool */
    ordo_event_pool_config_t timing_events; /**< the policy of the timing event pool */
    ordo_device_memory_config_t memory;     /**< the default memory stack */
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_device_config_t;

/** The defaults the shared runtimes use. The memory stack defaults to
 * budget (unlimited) and statistics; the environment variable ORDO_MEMORY
 * replaces that choice with a comma-separated list of "budget[=BYTES]"
 * (K, M, G suffixes), "statistics", "guard", "log=PATH", or "direct" for
 * none (the plain direct resource, the mode for memory checkers; only
 * first, adaptors may follow), each item at most once. An unparsable
 * ORDO_MEMORY (an empty or a repeated item among them) is refused
 * with its reason, and *out_config is left zero; set but empty, it counts
 * as unset. */
ordo_status_t ordo_device_config_default(ordo_device_config_t *out_config);

/** The backends compiled in, in order ("cpu" first). *out_count is the
 * total even when capacity is smaller; names are static strings. */
ordo_status_t ordo_backend_list(const char **out_names, size_t capacity, size_t *out_count);

/** Whether a compiled-in backend can run here; if not, why (a sentence). */
ordo_status_t ordo_backend_available(const char *backend, bool *out_available, char *out_reason,
                                     size_t reason_capacity);

/** Every present device of every available backend. *out_count is the total
 * even when capacity is smaller. */
ordo_status_t ordo_device_list(ordo_device_info_t *out_infos, size_t capacity, size_t *out_count);

/** The shared runtime of the named device ("cpu", "cpu:0", ...). Unknown
 * backend: ORDO_ERR_NOT_FOUND; absent backend: ORDO_ERR_UNAVAILABLE;
 * ordinal beyond the devices present: ORDO_ERR_OUT_OF_RANGE. */
ordo_status_t ordo_device_open(const char *name, ordo_device_t **out_device);

/** A private runtime of the named device built with config (NULL: the
 * defaults). Never the shared one. */
ordo_status_t ordo_device_create_owned(const char *name, const ordo_device_config_t *config,
                                       ordo_device_t **out_device);

/** Adds a reference to device. */
ordo_status_t ordo_device_retain(ordo_device_t *device);

/** Drops a reference; the last one tears the runtime down (a shared one is
 * rebuilt by the next open). */
ordo_status_t ordo_device_release(ordo_device_t *device);

/** The device's name, backend, ordinal and capabilities. */
ordo_status_t ordo_device_info(ordo_device_t *device, ordo_device_info_t *out_info);

/** Non-zero in *out_shared when device is the process-wide runtime. */
ordo_status_t ordo_device_is_shared(ordo_device_t *device, bool *out_shared);

/** Statistics of the device's event pool of the given kind. */
ordo_status_t ordo_device_event_pool_stats(ordo_device_t *device, ordo_event_kind_t kind,
                                           ordo_event_pool_stats_t *out_stats);

/** Destroys pooled events beyond keep in each of the device's pools. */
ordo_status_t ordo_device_event_pool_trim(ordo_device_t *device, size_t keep);

ORDO_END_DECLS

#endif
