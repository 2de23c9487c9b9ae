/* Stream pools: compute and transfer streams, handed out round-robin. */
#include <stdatomic.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/stream_pool.h"
#include "hal/hal.h"

#define ORDO_STREAM_POOL_MAGIC 0x53504f4cu /* "SPOL" */
/* More than any device runs concurrently; a bound against absurd input. */
#define STREAM_POOL_MAX 1024

struct ordo_stream_pool {
    uint32_t magic;
    size_t compute;  /* streams[0, compute) */
    size_t transfer; /* streams[compute, compute + transfer) */
    _Atomic size_t cursor[3];
    ordo_stream_t **streams;
    _Atomic uint32_t coordinators; /* that take streams from the pool */
};

static ordo_status_t pool_check(const ordo_stream_pool_t *pool, const char *api) {
    if (!pool || pool->magic != ORDO_STREAM_POOL_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live stream pool",
                           (const void *)pool);
    }
    return ORDO_OK;
}

static void pool_free(ordo_stream_pool_t *pool, size_t made) {
    for (size_t i = 0; i < made; ++i) {
        (void)ordo__hal_stream_destroy(pool->streams[i], "ordo_stream_pool_destroy");
    }
    ordo__dealloc(pool->streams, (pool->compute + pool->transfer) * sizeof *pool->streams, 0);
    pool->magic = ORDO_HAL_DEAD;
    ordo__dealloc(pool, sizeof *pool, 0);
}

ordo_status_t ordo_stream_pool_config_default(ordo_stream_pool_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_stream_pool_config_t){.compute_streams = 1};
    return ORDO_OK;
}

ordo_status_t ordo_stream_pool_create(ordo_device_t *device,
                                      const ordo_stream_pool_config_t *config,
                                      ordo_stream_pool_t **out_pool) {
    if (out_pool) {
        *out_pool = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_pool) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_pool is NULL");
    }
    ordo_stream_pool_config_t defaults;
    if (!config) {
        (void)ordo_stream_pool_config_default(&defaults);
        config = &defaults;
    }
    ordo_status_t st = ordo__flags_check(config->flags, 0, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (config->compute_streams == 0) {
        /* Transfers may share the compute streams, not the reverse. */
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "compute_streams is 0: a pool needs at least one compute stream");
    }
    if (config->compute_streams > STREAM_POOL_MAX || config->transfer_streams > STREAM_POOL_MAX ||
        config->compute_streams + config->transfer_streams > STREAM_POOL_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "at most %d streams in all (got %zu compute, %zu transfer)",
                           STREAM_POOL_MAX, config->compute_streams, config->transfer_streams);
    }
    const int priorities[2] = {config->compute_priority, config->transfer_priority};
    for (int c = 0; c < 2; ++c) {
        if (priorities[c] > device->info.priority_least ||
            priorities[c] < device->info.priority_greatest) {
            return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                               "%s priority %d outside [%d, %d] for %s", c ? "transfer" : "compute",
                               priorities[c], device->info.priority_greatest,
                               device->info.priority_least, device->info.name);
        }
    }
    size_t total = config->compute_streams + config->transfer_streams;
    ordo_stream_pool_t *pool = ordo__alloc(sizeof *pool, 0);
    ordo_stream_t **streams = ordo__alloc(total * sizeof *streams, 0);
    if (!pool || !streams) {
        ordo__dealloc(pool, sizeof *pool, 0);
        ordo__dealloc(streams, total * sizeof *streams, 0);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a stream pool");
    }
    pool->magic = ORDO_STREAM_POOL_MAGIC;
    pool->compute = config->compute_streams;
    pool->transfer = config->transfer_streams;
    pool->streams = streams;
    for (size_t i = 0; i < total; ++i) {
        int priority = i < pool->compute ? config->compute_priority : config->transfer_priority;
        st = ordo_stream_create(device, priority, &streams[i]);
        if (st != ORDO_OK) {
            pool_free(pool, i);
            return ordo__error_as(st, __func__); /* named for this call */
        }
        streams[i]->owner = pool;
        streams[i]->owner_kind = HAL_STREAM_OWNER_POOL;
    }
    *out_pool = pool;
    return ORDO_OK;
}

ordo_status_t ordo_stream_pool_destroy(ordo_stream_pool_t *pool) {
    ordo_status_t st = pool_check(pool, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    uint32_t coordinators = atomic_load_explicit(&pool->coordinators, memory_order_acquire);
    if (coordinators) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "%u coordinator(s) take streams from the pool: destroy them first",
                           coordinators);
    }
    /* All or nothing: a stream that cannot be destroyed here (the caller
     * runs on its thread, or a tracker or coordinator still orders it)
     * keeps the whole pool (and its handles) alive. */
    size_t total = pool->compute + pool->transfer;
    for (size_t i = 0; i < total; ++i) {
        ORDO_RETURN_IF_ERROR(ordo__hal_stream_check_destroy(pool->streams[i], __func__));
    }
    pool_free(pool, total);
    return ORDO_OK;
}

ordo_device_t *ordo__stream_pool_device(const ordo_stream_pool_t *pool) {
    return pool->streams[0]->device; /* a pool has a stream at least */
}

void ordo__stream_pool_use(ordo_stream_pool_t *pool) {
    atomic_fetch_add_explicit(&pool->coordinators, 1, memory_order_relaxed);
}

void ordo__stream_pool_unuse(ordo_stream_pool_t *pool) {
    atomic_fetch_sub_explicit(&pool->coordinators, 1, memory_order_release);
}

/* The class serving workload: [first, first + count). */
static ordo_status_t pool_class(const ordo_stream_pool_t *pool, ordo_workload_t workload,
                                size_t *first, size_t *count, const char *api) {
    switch (workload) {
    case ORDO_WORKLOAD_ANY:
        *first = 0;
        *count = pool->compute + pool->transfer;
        return ORDO_OK;
    case ORDO_WORKLOAD_COMPUTE:
        *first = 0;
        *count = pool->compute;
        return ORDO_OK;
    case ORDO_WORKLOAD_TRANSFER:
        /* Without transfer streams, transfers share the compute ones. */
        *first = pool->transfer ? pool->compute : 0;
        *count = pool->transfer ? pool->transfer : pool->compute;
        return ORDO_OK;
    }
    return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "workload %d is not a workload",
                       (int)workload);
}

ordo_status_t ordo_stream_pool_next(ordo_stream_pool_t *pool, ordo_workload_t workload,
                                    ordo_stream_t **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    ORDO_RETURN_IF_ERROR(pool_check(pool, __func__));
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    size_t first = 0;
    size_t count = 0;
    ORDO_RETURN_IF_ERROR(pool_class(pool, workload, &first, &count, __func__));
    size_t turn = atomic_fetch_add_explicit(&pool->cursor[workload], 1, memory_order_relaxed);
    *out_stream = pool->streams[first + turn % count];
    return ORDO_OK;
}

ordo_status_t ordo_stream_pool_size(ordo_stream_pool_t *pool, ordo_workload_t workload,
                                    size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    ORDO_RETURN_IF_ERROR(pool_check(pool, __func__));
    if (!out_count) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_count is NULL");
    }
    size_t first = 0;
    return pool_class(pool, workload, &first, out_count, __func__);
}
