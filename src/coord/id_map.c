/* The id map: linear probing, backward-shift deletion. See id_map.h. */
#include "coord/id_map.h"

#include "base/alloc.h"

/* Fibonacci hashing: consecutive ids (the common case) spread evenly. */
static inline uint32_t home(const id_map_t *map, uint64_t key) {
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> map->shift);
}

void ordo__id_map_fini(id_map_t *map) {
    ordo__dealloc(map->keys, (size_t)map->cap * sizeof *map->keys, 0);
    ordo__dealloc(map->values, (size_t)map->cap * sizeof *map->values, 0);
    map->keys = NULL;
    map->values = NULL;
    map->cap = map->count = 0;
}

ordo_status_t ordo__id_map_reserve(id_map_t *map, uint32_t extra) {
    uint64_t need = (uint64_t)map->count + extra;
    if (need * 2 <= map->cap) {
        return ORDO_OK;
    }
    uint64_t cap = map->cap ? map->cap : 64;
    unsigned bits = 0;
    while (cap < need * 2) {
        cap *= 2;
    }
    if (cap > ((uint64_t)1 << 31)) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    while (((uint64_t)1 << bits) < cap) {
        ++bits;
    }
    uint64_t *keys = ordo__alloc((size_t)cap * sizeof *keys, 0);
    uint32_t *values = ordo__alloc((size_t)cap * sizeof *values, 0);
    if (!keys || !values) {
        ordo__dealloc(keys, (size_t)cap * sizeof *keys, 0);
        ordo__dealloc(values, (size_t)cap * sizeof *values, 0);
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    id_map_t bigger = {keys, values, (uint32_t)cap, 0, 64 - bits};
    for (uint32_t i = 0; i < map->cap; ++i) {
        if (map->keys[i]) {
            ordo__id_map_put(&bigger, map->keys[i], map->values[i]);
        }
    }
    ordo__id_map_fini(map);
    *map = bigger;
    return ORDO_OK;
}

void ordo__id_map_put(id_map_t *map, uint64_t key, uint32_t value) {
    uint32_t mask = map->cap - 1;
    uint32_t i = home(map, key);
    while (map->keys[i]) {
        i = (i + 1) & mask;
    }
    map->keys[i] = key;
    map->values[i] = value;
    map->count++;
}

static uint32_t find(const id_map_t *map, uint64_t key) {
    if (!map->cap) {
        return UINT32_MAX;
    }
    uint32_t mask = map->cap - 1;
    for (uint32_t i = home(map, key);; i = (i + 1) & mask) {
        if (map->keys[i] == key) {
            return i;
        }
        if (!map->keys[i]) {
            return UINT32_MAX;
        }
    }
}

int ordo__id_map_get(const id_map_t *map, uint64_t key, uint32_t *out_value) {
    uint32_t i = find(map, key);
    if (i == UINT32_MAX) {
        return 0;
    }
    *out_value = map->values[i];
    return 1;
}

int ordo__id_map_remove(id_map_t *map, uint64_t key) {
    uint32_t i = find(map, key);
    if (i == UINT32_MAX) {
        return 0;
    }
    uint32_t mask = map->cap - 1;
    /* Shift later entries of the probe run back into the hole when their
     * home slot does not lie cyclically in (hole, their position]. */
    for (uint32_t j = (i + 1) & mask; map->keys[j]; j = (j + 1) & mask) {
        uint32_t k = home(map, map->keys[j]);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            map->keys[i] = map->keys[j];
            map->values[i] = map->values[j];
            i = j;
        }
    }
    map->keys[i] = 0;
    map->count--;
    return 1;
}
