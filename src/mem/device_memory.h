/* Internal: the device's default memory stack (ordo_device_memory). */
#ifndef ORDO_MEM_DEVICE_MEMORY_H
#define ORDO_MEM_DEVICE_MEMORY_H

#include "ordo/device.h"

/* The memory part of ordo_device_config_default: ORDO_MEMORY if set, else
 * budget (unlimited) and statistics. */
ordo_status_t ordo__device_memory_config_default(ordo_device_memory_config_t *out_config,
                                                 const char *api);

/* Checks a caller's config (adaptor bits known, a log path with logging). */
ordo_status_t ordo__device_memory_config_check(const ordo_device_memory_config_t *config,
                                               const char *api);

/* Destroys the device's stack, if built, before the device goes. A stack
 * with blocks still outstanding is left allocated (those blocks stay
 * valid; the leak shows in ordo_allocator_live_blocks). */
void ordo__device_memory_teardown(ordo_device_t *device);

#endif
