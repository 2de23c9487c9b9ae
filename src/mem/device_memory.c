/* The device's default memory stack: the direct resource under the
 * adaptors the device's configuration chooses, built on first use. */
#include "mem/device_memory.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"

#define MEMORY_ADAPTORS_ALL                                                                        \
    (ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_LOGGING | ORDO_DEVICE_MEMORY_STATISTICS |      \
     ORDO_DEVICE_MEMORY_GUARD)

/* "2G", "512M", "4096": bytes, or 0 with *ok cleared. */
static uint64_t parse_bytes(const char *text, size_t length, int *ok) {
    char digits[32];
    /* strtoull alone would take blanks, a sign, or no digits at all. */
    if (!length || length >= sizeof digits || text[0] < '0' || text[0] > '9') {
        *ok = 0;
        return 0;
    }
    memcpy(digits, text, length);
    digits[length] = '\0';
    char *end = NULL;
    unsigned long long value = strtoull(digits, &end, 10);
    uint64_t scale = 1;
    if (end && *end && !end[1]) {
        scale = *end == 'K' || *end == 'k'   ? (uint64_t)1 << 10
                : *end == 'M' || *end == 'm' ? (uint64_t)1 << 20
                : *end == 'G' || *end == 'g' ? (uint64_t)1 << 30
                                             : 0;
        ++end;
    }
    *ok = end != digits && end && !*end && scale && value <= UINT64_MAX / scale;
    return *ok ? value * scale : 0;
}

static ordo_status_t parse_env(const char *env, ordo_device_memory_config_t *config,
                               const char *api) {
    memset(config, 0, sizeof *config);
    for (const char *item = env; *item;) {
        size_t length = strcspn(item, ",");
        const char *eq = memchr(item, '=', length);
        size_t key = eq ? (size_t)(eq - item) : length;
        int ok = 1;
        if (key == 6 && !strncmp(item, "direct", 6) && !eq) {
            config->adaptors = 0;
        } else if (key == 10 && !strncmp(item, "statistics", 10) && !eq) {
            config->adaptors |= ORDO_DEVICE_MEMORY_STATISTICS;
        } else if (key == 5 && !strncmp(item, "guard", 5) && !eq) {
            config->adaptors |= ORDO_DEVICE_MEMORY_GUARD;
        } else if (key == 6 && !strncmp(item, "budget", 6)) {
            config->adaptors |= ORDO_DEVICE_MEMORY_BUDGET;
            if (eq) {
                config->budget_bytes = parse_bytes(eq + 1, length - key - 1, &ok);
            }
        } else if (key == 3 && !strncmp(item, "log", 3) && eq &&
                   length - key - 1 < sizeof config->log_path && length > key + 1) {
            config->adaptors |= ORDO_DEVICE_MEMORY_LOGGING;
            memcpy(config->log_path, eq + 1, length - key - 1);
            config->log_path[length - key - 1] = '\0';
        } else {
            ok = 0;
        }
        if (!ok) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "ORDO_MEMORY=\"%s\": cannot use \"%.*s\" (expected direct, "
                               "statistics, guard, budget[=BYTES] or log=PATH, comma-separated)",
                               env, (int)length, item);
        }
        item += length;
        if (*item == ',') {
            ++item;
        }
    }
    return ORDO_OK;
}

ordo_status_t ordo__device_memory_config_default(ordo_device_memory_config_t *out_config,
                                                 const char *api) {
    const char *env = getenv("ORDO_MEMORY");
    if (env) {
        return parse_env(env, out_config, api);
    }
    memset(out_config, 0, sizeof *out_config);
    out_config->adaptors = ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_STATISTICS;
    return ORDO_OK;
}

ordo_status_t ordo__device_memory_config_check(const ordo_device_memory_config_t *config,
                                               const char *api) {
    if (config->adaptors & ~MEMORY_ADAPTORS_ALL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "memory adaptors 0x%x include unknown bits", config->adaptors);
    }
    if ((config->adaptors & ORDO_DEVICE_MEMORY_LOGGING) &&
        (!config->log_path[0] || !memchr(config->log_path, '\0', sizeof config->log_path))) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "a logging memory stack needs a log path");
    }
    return ORDO_OK;
}

/* Destroys the stack from top down to (not including) stop. */
static void stack_destroy(ordo_mem_resource_t *top, ordo_mem_resource_t *stop) {
    while (top && top != stop) {
        ordo_mem_resource_t *below = top->upstream;
        if (ordo__mem_resource_destroy_owned(top) != ORDO_OK) {
            return; /* still in use: left as it is */
        }
        top = below;
    }
}

static ordo_status_t stack_build(ordo_device_t *device, const ordo_device_memory_config_t *config,
                                 ordo_mem_resource_t **out_top) {
    ordo_mem_resource_t *top = NULL;
    ordo_status_t st = ordo__mem_direct_create_unreferenced(device, &top);
    if (st != ORDO_OK) {
        return st;
    }
    if (config->adaptors & ORDO_DEVICE_MEMORY_BUDGET) {
        ordo_mem_resource_t *next = NULL;
        if (config->budget_bytes) {
            st = ordo_mem_budget_set_limit(device, config->budget_bytes);
        }
        if (st == ORDO_OK) {
            st = ordo_mem_budget_create(top, NULL, &next);
        }
        top = st == ORDO_OK ? next : top;
    }
    if (st == ORDO_OK && (config->adaptors & ORDO_DEVICE_MEMORY_LOGGING)) {
        ordo_mem_resource_t *next = NULL;
        st = ordo_mem_logging_create_path(top, config->log_path, &next);
        top = st == ORDO_OK ? next : top;
    }
    if (st == ORDO_OK && (config->adaptors & ORDO_DEVICE_MEMORY_STATISTICS)) {
        ordo_mem_resource_t *next = NULL;
        st = ordo_mem_statistics_create(top, &next);
        top = st == ORDO_OK ? next : top;
    }
    if (st == ORDO_OK && (config->adaptors & ORDO_DEVICE_MEMORY_GUARD)) {
        ordo_mem_resource_t *next = NULL;
        st = ordo_mem_guard_create(top, NULL, &next);
        top = st == ORDO_OK ? next : top;
    }
    if (st != ORDO_OK) {
        char message[256];
        snprintf(message, sizeof message, "%s", ordo_error_message());
        stack_destroy(top, NULL);
        return ordo__error(st, "ordo_device_memory", "cannot build %s's memory stack: %s",
                           device->info.name, message);
    }
    /* Only once built: a layer made on an owned one holds the device (the
     * caller's layers do), which the device's own must not. */
    for (ordo_mem_resource_t *r = top; r; r = r->upstream) {
        r->device_owned = 1;
    }
    *out_top = top;
    return ORDO_OK;
}

ordo_status_t ordo_device_memory(ordo_device_t *device, ordo_mem_resource_t **out_resource) {
    if (out_resource) {
        *out_resource = NULL;
    }
    ordo_status_t st = ordo__hal_device_check(device, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_resource) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_resource is NULL");
    }
    ordo_mem_resource_t *top = atomic_load_explicit(&device->memory, memory_order_acquire);
    if (!top) {
        pthread_mutex_lock(&device->memory_lock);
        top = atomic_load_explicit(&device->memory, memory_order_relaxed);
        if (!top) {
            /* A shared runtime reads ORDO_MEMORY now, so a bad value is
             * reported here, to the caller who asked for memory. */
            ordo_device_memory_config_t config = device->memory_config;
            if (device->shared) {
                st = ordo__device_memory_config_default(&config, __func__);
            }
            if (st == ORDO_OK) {
                st = stack_build(device, &config, &top);
            }
            if (st == ORDO_OK) {
                atomic_store_explicit(&device->memory, top, memory_order_release);
            }
        }
        pthread_mutex_unlock(&device->memory_lock);
    }
    *out_resource = st == ORDO_OK ? top : NULL;
    return st;
}

void ordo__device_memory_teardown(ordo_device_t *device) {
    ordo_mem_resource_t *top = atomic_load_explicit(&device->memory, memory_order_acquire);
    if (top) {
        (void)ordo_mem_reap_pending(top, ordo_deadline_after_ms(10000));
        stack_destroy(top, NULL);
        atomic_store_explicit(&device->memory, NULL, memory_order_relaxed);
    }
}
