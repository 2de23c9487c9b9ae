/* The device's default memory stack: the direct resource under the
 * adaptors the device's configuration chooses, built on first use and
 * hung off the device as an attachment (hal.h), which the device destroys
 * before its backend goes. */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"

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
    if (st == ORDO_OK && (config->adaptors & ORDO_DEVICE_MEMORY_BUDGET)) {
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

/* The attachment: the stack's top, torn down with the device. */
typedef struct memory_attachment {
    hal_device_attachment_t base;
    ordo_mem_resource_t *top;
} memory_attachment_t;

/* Pending frees are reaped first (within 10 s); a stack with blocks still
 * outstanding is left allocated (those blocks stay valid; the leak shows
 * in ordo_allocator_live_blocks). */
static void memory_attachment_destroy(hal_device_attachment_t *self) {
    memory_attachment_t *a = (memory_attachment_t *)self;
    (void)ordo_mem_reap_pending(a->top, ordo_deadline_after_ms(10000));
    stack_destroy(a->top, NULL);
    ordo__dealloc(a, sizeof *a, 0);
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
    hal_device_attachment_t *hung = atomic_load_explicit(&device->memory, memory_order_acquire);
    if (!hung) {
        pthread_mutex_lock(&device->memory_lock);
        hung = atomic_load_explicit(&device->memory, memory_order_relaxed);
        if (!hung) {
            /* A shared runtime reads ORDO_MEMORY now, so a bad value is
             * reported here, to the caller who asked for memory. */
            ordo_device_memory_config_t config = device->memory_config;
            if (device->shared) {
                st = ordo__device_memory_config_default(&config, __func__);
            }
            memory_attachment_t *a = NULL;
            if (st == ORDO_OK && !(a = ordo__alloc(sizeof *a, 0))) {
                st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__,
                                 "cannot allocate %s's memory stack", device->info.name);
            }
            if (st == ORDO_OK && (st = stack_build(device, &config, &a->top)) != ORDO_OK) {
                ordo__dealloc(a, sizeof *a, 0);
            }
            if (st == ORDO_OK) {
                a->base.destroy = memory_attachment_destroy;
                hung = &a->base;
                atomic_store_explicit(&device->memory, hung, memory_order_release);
            }
        }
        pthread_mutex_unlock(&device->memory_lock);
    }
    *out_resource = st == ORDO_OK ? ((memory_attachment_t *)hung)->top : NULL;
    return st;
}
