/* Internal: an open-addressing hash map from 64-bit ids (never 0) to
 * 32-bit values, for the coordinator's live operations and the outcomes it
 * keeps of retired ones. Linear probing with backward-shift deletion: no
 * tombstones, so lookups stay short however many ids come and go, and the
 * table never grows beyond twice the most entries it held at once.
 *
 * Not thread-safe: the owner serialises every call. */
#ifndef ORDO_COORD_ID_MAP_H
#define ORDO_COORD_ID_MAP_H

#include <stdint.h>

#include "ordo/status.h"

typedef struct id_map {
    uint64_t *keys; /* 0: empty */
    uint32_t *values;
    uint32_t cap; /* a power of two, or 0 */
    uint32_t count;
    unsigned shift; /* 64 - log2(cap) */
} id_map_t;

void ordo__id_map_fini(id_map_t *map);

/* Makes room for `extra` more entries (the load stays at most one half). */
ordo_status_t ordo__id_map_reserve(id_map_t *map, uint32_t extra);

/* Inserts key (absent, not 0) with value; room must have been reserved. */
void ordo__id_map_put(id_map_t *map, uint64_t key, uint32_t value);

/* Non-zero, with *out_value, when key is present. */
int ordo__id_map_get(const id_map_t *map, uint64_t key, uint32_t *out_value);

/* Removes key if present; non-zero if it was. */
int ordo__id_map_remove(id_map_t *map, uint64_t key);

#endif
