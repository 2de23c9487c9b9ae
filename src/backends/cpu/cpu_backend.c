/* The CPU backend: one device, "cpu:0"; streams are worker threads
 * (cpu_stream.c). Always built, always available. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu_stream.h"
#include "base/error.h"
#include "hal/hal.h"

static int cpu_available(char *reason, size_t reason_capacity) {
    if (reason_capacity) {
        reason[0] = '\0';
    }
    return 1;
}

static size_t cpu_device_count(void) {
    return 1;
}

static void cpu_device_info(int ordinal, ordo_device_info_t *out_info) {
    memset(out_info, 0, sizeof *out_info);
    snprintf(out_info->name, sizeof out_info->name, "cpu:%d", ordinal);
    snprintf(out_info->backend, sizeof out_info->backend, "cpu");
    out_info->ordinal = ordinal;
    out_info->priority_least = 0;
    out_info->priority_greatest = CPU_PRIORITY_GREATEST;
    out_info->timing_events = 1;
    out_info->device_memory = 0;
    out_info->native_timeline = 1;
}

/* The device itself keeps no state beyond the generic shell. */
static int cpu_device_marker;

static ordo_status_t cpu_device_init(ordo_device_t *device) {
    device->impl = &cpu_device_marker;
    return ORDO_OK;
}

static void cpu_device_fini(ordo_device_t *device) {
    device->impl = NULL;
}

/* Device memory of the CPU backend is host memory. */
static ordo_status_t cpu_mem_alloc(ordo_device_t *device, size_t bytes, size_t alignment,
                                   void **out_ptr) {
    if (alignment < sizeof(void *)) {
        alignment = sizeof(void *);
    }
    /* More than the machine has can never succeed: say so plainly rather
     * than ask the C library (or a sanitizer's allocator) for it. */
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0 && bytes / (size_t)page_size >= (size_t)pages) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "%s cannot allocate %zu bytes: the machine has %zu bytes of memory",
                           device->info.name, bytes, (size_t)pages * (size_t)page_size);
    }
    void *ptr = NULL;
    int err = posix_memalign(&ptr, alignment, bytes);
    if (err) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "%s cannot allocate %zu bytes aligned to %zu: %s", device->info.name,
                           bytes, alignment, strerror(err));
    }
    *out_ptr = ptr;
    return ORDO_OK;
}

static void cpu_mem_free(ordo_device_t *device, void *ptr, size_t bytes) {
    (void)device, (void)bytes;
    free(ptr);
}

const hal_backend_t ordo__hal_cpu_backend = {
    .name = "cpu",
    .available = cpu_available,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .device_init = cpu_device_init,
    .device_fini = cpu_device_fini,
    .stream_init = ordo__cpu_stream_init,
    .stream_fini = ordo__cpu_stream_fini,
    .stream_on_own_thread = ordo__cpu_stream_on_own_thread,
    .host_task = ordo__cpu_stream_host_task,
    .signal = ordo__cpu_stream_signal,
    .wait = ordo__cpu_stream_wait,
    .signal_adopt = ordo__cpu_stream_signal_adopt,
    .wait_adopt = ordo__cpu_stream_wait_adopt,
    .synchronize = ordo__cpu_stream_synchronize,
    .status = ordo__cpu_stream_status,
    .failure = ordo__cpu_stream_failure,
    .event_record = ordo__cpu_stream_event_record,
    .stream_snapshot = ordo__cpu_stream_snapshot,
    .stream_progress = ordo__cpu_stream_progress,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
};
