/* Devices: the backend registry, the per-(backend, ordinal) shared runtime
 * and owned runtimes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/hal.h"

static const hal_backend_t *const backends[] = {
    &ordo__hal_cpu_backend,
#ifdef ORDO_HAVE_CUDA_H
    &ordo__hal_cuda_backend,
#endif
};
#define BACKEND_COUNT (sizeof backends / sizeof backends[0])
/* Shared runtimes per backend; ordinals beyond this are refused. */
#define MAX_ORDINALS 64

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ordo_device_t *shared_devices[BACKEND_COUNT][MAX_ORDINALS];
static int injected_build_failures;

void ordo__hal_inject_build_failures(int n) {
    pthread_mutex_lock(&registry_lock);
    injected_build_failures = n;
    pthread_mutex_unlock(&registry_lock);
}

ordo_status_t ordo__hal_device_check(const ordo_device_t *device, const char *api) {
    if (!device) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "device is NULL");
    }
    if (device->magic != ORDO_DEVICE_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live device",
                           (const void *)device);
    }
    return ORDO_OK;
}

/* The defaults of everything but the memory stack (which ORDO_MEMORY may
 * choose); the memory part is left as it is. */
static void config_defaults_but_memory(ordo_device_config_t *config) {
    config->flags = 0;
    (void)ordo_event_pool_config_default(&config->plain_events);
    (void)ordo_event_pool_config_default(&config->timing_events);
}

ordo_status_t ordo_device_config_default(ordo_device_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    config_defaults_but_memory(out_config);
    ordo_status_t st = ordo__device_memory_config_default(&out_config->memory, __func__);
    if (st != ORDO_OK) {
        memset(out_config, 0, sizeof *out_config); /* all or nothing (docs/ERRORS.md) */
    }
    return st;
}

ordo_status_t ordo_backend_list(const char **out_names, size_t capacity, size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    if (!out_count || (capacity && !out_names)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_count ? "out_names" : "out_count");
    }
    for (size_t i = 0; i < BACKEND_COUNT && i < capacity; ++i) {
        out_names[i] = backends[i]->name;
    }
    *out_count = BACKEND_COUNT;
    return ORDO_OK;
}

static const hal_backend_t *backend_find(const char *name, size_t length, size_t *out_index) {
    for (size_t i = 0; i < BACKEND_COUNT; ++i) {
        if (strlen(backends[i]->name) == length && strncmp(backends[i]->name, name, length) == 0) {
            *out_index = i;
            return backends[i];
        }
    }
    return NULL;
}

ordo_status_t ordo_backend_available(const char *backend, bool *out_available, char *out_reason,
                                     size_t reason_capacity) {
    if (out_available) {
        *out_available = 0;
    }
    if (!backend || !out_available || (out_reason && reason_capacity == 0)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "backend and out_available must be set, and a reason buffer non-empty");
    }
    size_t index;
    const hal_backend_t *b = backend_find(backend, strlen(backend), &index);
    if (!b) {
        return ordo__error(ORDO_ERR_NOT_FOUND, __func__, "no backend named '%s' is compiled in",
                           backend);
    }
    char reason[160] = "";
    *out_available = b->available(reason, sizeof reason);
    if (out_reason) {
        snprintf(out_reason, reason_capacity, "%s", reason);
    }
    return ORDO_OK;
}

ordo_status_t ordo_device_list(ordo_device_info_t *out_infos, size_t capacity, size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    if (!out_count || (capacity && !out_infos)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_count ? "out_infos" : "out_count");
    }
    size_t total = 0;
    for (size_t i = 0; i < BACKEND_COUNT; ++i) {
        char reason[160];
        if (!backends[i]->available(reason, sizeof reason)) {
            continue;
        }
        size_t n = backends[i]->device_count();
        for (size_t d = 0; d < n; ++d, ++total) {
            if (total < capacity) {
                backends[i]->device_info((int)d, &out_infos[total]);
            }
        }
    }
    *out_count = total;
    return ORDO_OK;
}

/* Parses "backend" or "backend:ordinal". */
static ordo_status_t parse_name(const char *name, size_t *out_backend, int *out_ordinal,
                                const char *api) {
    if (!name) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "name is NULL");
    }
    if (strcmp(name, ORDO_DEVICE_DEFAULT) == 0) {
        name = "cpu:0";
    }
    const char *colon = strchr(name, ':');
    size_t length = colon ? (size_t)(colon - name) : strlen(name);
    const hal_backend_t *b = backend_find(name, length, out_backend);
    if (!b) {
        return ordo__error(ORDO_ERR_NOT_FOUND, api, "'%s' names no compiled-in backend", name);
    }
    char reason[160];
    if (!b->available(reason, sizeof reason)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, api, "backend '%s' is not available: %s", b->name,
                           reason);
    }
    *out_ordinal = 0;
    if (colon) {
        /* Digits only: no sign, no blanks, no trailing text. */
        const char *digits = colon + 1;
        size_t n = strspn(digits, "0123456789");
        if (n == 0 || digits[n] != '\0') {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "'%s': the ordinal must be a non-negative decimal integer", name);
        }
        /* Leading zeros are accepted, so only the digits after them
         * count against the bound (strtol never sees more than four). */
        size_t zeros = strspn(digits, "0");
        if (zeros == n) {
            zeros = n - 1; /* "0", "000": the ordinal 0 */
        }
        if (n - zeros > 4 || strtol(digits + zeros, NULL, 10) >= MAX_ORDINALS) {
            return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "'%s': ordinal beyond %d", name,
                               MAX_ORDINALS - 1);
        }
        *out_ordinal = (int)strtol(digits + zeros, NULL, 10);
    }
    size_t present = b->device_count();
    if ((size_t)*out_ordinal >= present) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "'%s': backend '%s' has %zu device(s)", name,
                           b->name, present);
    }
    return ORDO_OK;
}

/* The event pools' view of the device: they pool whole ordo_event_t. */
static ordo_status_t pool_event_create(void *user, ordo_event_kind_t kind, void **out_event) {
    ordo_event_t *event = ordo__alloc(sizeof *event, 0);
    if (!event) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    ordo_device_t *device = user;
    event->magic = ORDO_EVENT_MAGIC;
    event->device = device;
    event->kind = kind;
    if (device->backend->event_init) {
        ordo_status_t st = device->backend->event_init(device, event);
        if (st != ORDO_OK) {
            ordo__dealloc(event, sizeof *event, 0);
            return st;
        }
    }
    *out_event = event;
    return ORDO_OK;
}

static void pool_event_destroy(void *user, void *object) {
    ordo_device_t *device = user;
    ordo_event_t *event = object;
    if (device->backend->event_fini) {
        device->backend->event_fini(device, event);
    }
    event->magic = ORDO_HAL_DEAD;
    ordo__dealloc(event, sizeof *event, 0);
}

static void device_teardown(ordo_device_t *device);

/* The last release's teardown: what it meets (a memory stack still in
 * use, left as it is) is no failure of the call that released, whose
 * thread keeps its message (ordo/status.h). */
static void device_free(ordo_device_t *device) {
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    device_teardown(device);
    ordo__message_restore(&kept);
}

static void device_teardown(ordo_device_t *device) {
    /* Events do not hold device references (that would cost two atomic
     * operations per event on the hot path). A device released while its
     * events live is kept, so they stay safe to use and destroy: a leak
     * that ordo_allocator_live_blocks shows, never a dangling event. */
    for (int k = 0; k < 2; ++k) {
        ordo_event_pool_stats_t stats;
        if (device->event_pools[k] &&
            ordo__event_pool_stats(device->event_pools[k], &stats) == ORDO_OK && stats.in_use > 0) {
            device->shared = 0;
            return;
        }
    }
    for (int k = 0; k < 2; ++k) {
        if (device->event_pools[k]) {
            (void)ordo__event_pool_destroy(device->event_pools[k]);
        }
    }
    /* The memory stack first: it may hold the backend's memory. */
    hal_device_attachment_t *memory = atomic_load_explicit(&device->memory, memory_order_acquire);
    if (memory) {
        memory->destroy(memory);
    }
    pthread_mutex_destroy(&device->memory_lock);
    if (device->impl) {
        device->backend->device_fini(device);
    }
    pthread_mutex_destroy(&device->streams_lock);
    hal_device_attachment_t *budget =
        atomic_load_explicit(&device->mem_budget, memory_order_acquire);
    if (budget) {
        budget->destroy(budget);
    }
    device->magic = ORDO_HAL_DEAD;
    ordo__dealloc(device, sizeof *device, 0);
}

static ordo_status_t device_build(size_t backend_index, int ordinal, int shared,
                                  const ordo_device_config_t *config, ordo_device_t **out,
                                  const char *api) {
    const hal_backend_t *backend = backends[backend_index];
    ordo_device_t *device = ordo__alloc(sizeof *device, 0);
    if (!device) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a device");
    }
    if (pthread_mutex_init(&device->streams_lock, NULL) != 0) {
        ordo__dealloc(device, sizeof *device, 0);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot initialise the device's lock");
    }
    if (pthread_mutex_init(&device->memory_lock, NULL) != 0) {
        pthread_mutex_destroy(&device->streams_lock);
        ordo__dealloc(device, sizeof *device, 0);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot initialise the device's lock");
    }
    device->memory_config = config->memory;
    device->magic = ORDO_DEVICE_MAGIC;
    atomic_init(&device->refs, 1);
    device->backend = backend;
    device->backend_index = backend_index;
    device->shared = shared;
    backend->device_info(ordinal, &device->info);
    /* The backend first: the event pools create events through it. */
    device->building_api = api;
    ordo_status_t st = backend->device_init(device);
    device->building_api = NULL;
    if (st != ORDO_OK) {
        device->impl = NULL;
        device_free(device);
        return st;
    }
    event_pool_backend_t pool_backend = {pool_event_create, pool_event_destroy, device};
    const ordo_event_pool_config_t *configs[2] = {&config->plain_events, &config->timing_events};
    for (int k = 0; k < 2; ++k) {
        char who[128]; /* the call, and the pool's part of the config */
        snprintf(who, sizeof who, "%s, %s", api, k ? "timing_events" : "plain_events");
        st = ordo__event_pool_create(&pool_backend, (ordo_event_kind_t)k, configs[k],
                                     &device->event_pools[k], who);
        if (st != ORDO_OK) {
            ordo__kept_message_t kept;
            ordo__message_keep(&kept); /* the pool's refusal, not the teardown's */
            device_free(device);
            ordo__message_restore(&kept);
            return st;
        }
    }
    *out = device;
    return ORDO_OK;
}

ordo_status_t ordo_device_open(const char *name, ordo_device_t **out_device) {
    if (!out_device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_device is NULL");
    }
    *out_device = NULL;
    size_t b;
    int ordinal;
    ordo_status_t st = parse_name(name, &b, &ordinal, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    /* One lock for the whole build: concurrent first callers wait for the
     * one that builds, and a failed build leaves the slot empty. */
    pthread_mutex_lock(&registry_lock);
    ordo_device_t *device = shared_devices[b][ordinal];
    if (device) {
        atomic_fetch_add_explicit(&device->refs, 1, memory_order_relaxed);
    } else if (injected_build_failures > 0) {
        --injected_build_failures;
        st = ordo__error(ORDO_ERR_DEVICE, __func__, "injected build failure (test hook)");
    } else {
        /* The memory stack of a shared runtime is read from ORDO_MEMORY
         * when first used (ordo_device_memory), so a bad value does not
         * stop the device from opening. */
        ordo_device_config_t config;
        ordo__kept_message_t kept;
        ordo__message_keep(&kept);
        if (ordo_device_config_default(&config) != ORDO_OK) {
            /* A bad ORDO_MEMORY (the config is left zero): ordo_device_memory
             * reads it again and says so; the rest of the defaults stand. */
            config_defaults_but_memory(&config);
        }
        ordo__message_restore(&kept);
        st = device_build(b, ordinal, 1, &config, &device, __func__);
        if (st == ORDO_OK) {
            shared_devices[b][ordinal] = device;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (st == ORDO_OK) {
        *out_device = device;
    }
    return st;
}

ordo_status_t ordo_device_create_owned(const char *name, const ordo_device_config_t *config,
                                       ordo_device_t **out_device) {
    if (!out_device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_device is NULL");
    }
    *out_device = NULL;
    size_t b;
    int ordinal;
    ordo_status_t st = parse_name(name, &b, &ordinal, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    ordo_device_config_t defaults;
    if (config) {
        st = ordo__flags_check(config->flags, 0, __func__);
        if (st == ORDO_OK) {
            st = ordo__device_memory_config_check(&config->memory, __func__);
        }
    } else {
        st = ordo_device_config_default(&defaults);
    }
    if (st != ORDO_OK) {
        return st;
    }
    return device_build(b, ordinal, 0, config ? config : &defaults, out_device, __func__);
}

ordo_status_t ordo_device_retain(ordo_device_t *device) {
    ordo_status_t st = ordo__hal_device_check(device, __func__);
    if (st == ORDO_OK) {
        atomic_fetch_add_explicit(&device->refs, 1, memory_order_relaxed);
    }
    return st;
}

ordo_status_t ordo_device_release(ordo_device_t *device) {
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!device->shared) {
        if (atomic_fetch_sub_explicit(&device->refs, 1, memory_order_acq_rel) == 1) {
            device_free(device);
        }
        return ORDO_OK;
    }
    /* The registry lock orders the last release against a concurrent open
     * that would otherwise revive a dying runtime. */
    pthread_mutex_lock(&registry_lock);
    int last = atomic_fetch_sub_explicit(&device->refs, 1, memory_order_acq_rel) == 1;
    if (last) {
        shared_devices[device->backend_index][device->info.ordinal] = NULL;
    }
    pthread_mutex_unlock(&registry_lock);
    if (last) {
        device_free(device);
    }
    return ORDO_OK;
}

ordo_status_t ordo_device_info(ordo_device_t *device, ordo_device_info_t *out_info) {
    if (out_info) {
        memset(out_info, 0, sizeof *out_info);
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_info) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_info is NULL");
    }
    *out_info = device->info;
    return ORDO_OK;
}

ordo_status_t ordo_device_is_shared(ordo_device_t *device, bool *out_shared) {
    if (out_shared) {
        *out_shared = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_shared) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_shared is NULL");
    }
    *out_shared = device->shared;
    return ORDO_OK;
}

static ordo_status_t check_kind(ordo_event_kind_t kind, const char *api) {
    if (kind != ORDO_EVENT_PLAIN && kind != ORDO_EVENT_TIMING) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "event kind %d is not a kind",
                           (int)kind);
    }
    return ORDO_OK;
}

ordo_status_t ordo_device_event_pool_stats(ordo_device_t *device, ordo_event_kind_t kind,
                                           ordo_event_pool_stats_t *out_stats) {
    if (out_stats) {
        memset(out_stats, 0, sizeof *out_stats);
    }
    ordo_status_t st = ordo__hal_device_check(device, __func__);
    if (st == ORDO_OK) {
        st = check_kind(kind, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_stats) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stats is NULL");
    }
    return ordo__event_pool_stats(device->event_pools[kind], out_stats);
}

ordo_status_t ordo_device_event_pool_trim(ordo_device_t *device, size_t keep) {
    ordo_status_t st = ordo__hal_device_check(device, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    for (int k = 0; k < 2; ++k) {
        ORDO_RETURN_IF_ERROR(ordo__event_pool_trim(device->event_pools[k], keep));
    }
    return ORDO_OK;
}
