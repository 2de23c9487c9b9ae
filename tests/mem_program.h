/* A randomized program of real data over a pool, shared by the memory
 * tests: blocks are written and read by host tasks on random streams
 * (ordered by the tracker through the blocks' buffers), freed on random
 * streams while those tasks may still be queued, and reallocated at once
 * elsewhere. A task stamps the whole block with (owner, version) and
 * readers verify the stamp their submission expects, so a block handed out
 * while an earlier owner's task could still touch it shows up as a wrong
 * stamp. */
#ifndef ORDO_TESTS_MEM_PROGRAM_H
#define ORDO_TESTS_MEM_PROGRAM_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ordo/memory.h"
#include "ordo/tracker.h"
#include "test_util.h"

#define MEM_PROGRAM_SLOTS 24

typedef struct mem_program {
    ordo_tracker_t *tracker;
    ordo_mem_resource_t *pool;
    ordo_stream_t *const *streams;
    unsigned stream_count;
    size_t max_bytes;     /* a block is 64 bytes plus up to this */
    unsigned writes_in_8; /* of eight actions on a live block, this many write */
    unsigned max_spin;    /* a task spins up to this many rounds first */
    /* Called after every 64th submission (may be NULL). */
    void (*every_64_steps)(ordo_mem_resource_t *pool);
} mem_program_t;

typedef struct mem_program_block {
    ordo_block_t *block;
    uint32_t *words;
    size_t count;
    uint32_t owner;   /* a fresh number per allocation */
    uint32_t version; /* of the last write submitted */
} mem_program_block_t;

typedef struct mem_program_task {
    uint32_t *words;
    size_t count;
    uint32_t stamp;
    int write;
    unsigned spin;
    _Atomic int *errors;
} mem_program_task_t;

static inline ordo_status_t mem_program_task_run(void *ctx) {
    mem_program_task_t *t = ctx;
    for (volatile unsigned i = 0; i < t->spin; ++i) {
    }
    if (t->write) {
        for (size_t i = 0; i < t->count; ++i) {
            t->words[i] = t->stamp;
        }
    }
    for (size_t i = 0; i < t->count; ++i) {
        if (t->words[i] != t->stamp) {
            atomic_fetch_add(t->errors, 1);
            break;
        }
    }
    free(t);
    return ORDO_OK;
}

static inline ordo_status_t mem_program_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, mem_program_task_run, ctx);
}

/* Runs `steps` random actions from `seed`, frees what is left, waits for
 * every stream and returns how many tasks saw memory another owner
 * touched. */
static inline int mem_program_run(const mem_program_t *p, uint64_t seed, unsigned steps) {
    _Atomic int errors = 0;
    mem_program_block_t slots[MEM_PROGRAM_SLOTS];
    memset(slots, 0, sizeof slots);
    uint32_t next_owner = 1;
    uint64_t rng = seed;
    for (unsigned step = 0; step < steps; ++step) {
        mem_program_block_t *slot = &slots[test_rand(&rng) % MEM_PROGRAM_SLOTS];
        ordo_stream_t *s = p->streams[test_rand(&rng) % p->stream_count];
        unsigned action = (unsigned)(test_rand(&rng) % 8);
        if (!slot->block) {
            size_t bytes = 64 + (size_t)(test_rand(&rng) % p->max_bytes);
            assert_ok(
                ordo_mem_allocate(p->pool, bytes, 0, s, 0, &slot->block, (void **)&slot->words));
            slot->count = bytes / sizeof(uint32_t);
            slot->owner = next_owner++;
            slot->version = 0;
            action = 0; /* first a write */
        } else if (action == 7) {
            assert_ok(ordo_mem_deallocate(p->pool, slot->block, s));
            slot->block = NULL;
            continue;
        }
        mem_program_task_t *t = malloc(sizeof *t);
        assert_non_null(t);
        t->words = slot->words;
        t->count = slot->count;
        t->write = action < p->writes_in_8;
        if (t->write) {
            ++slot->version;
        }
        t->stamp = slot->owner * 1000003u + slot->version;
        t->spin = (unsigned)(test_rand(&rng) % p->max_spin);
        t->errors = &errors;
        ordo_buffer_t *buffer = NULL;
        assert_ok(ordo_block_buffer(slot->block, &buffer));
        ordo_access_t access = {buffer, t->write ? ORDO_ACCESS_WRITE : ORDO_ACCESS_READ};
        assert_ok(ordo_tracker_lock(p->tracker));
        assert_ok(ordo_tracker_submit(p->tracker, s, &access, 1, mem_program_launch, t));
        assert_ok(ordo_tracker_unlock(p->tracker));
        if (p->every_64_steps && step % 64 == 0) {
            p->every_64_steps(p->pool);
        }
    }
    for (unsigned i = 0; i < MEM_PROGRAM_SLOTS; ++i) {
        if (slots[i].block) {
            assert_ok(
                ordo_mem_deallocate(p->pool, slots[i].block, p->streams[i % p->stream_count]));
        }
    }
    for (unsigned i = 0; i < p->stream_count; ++i) {
        assert_ok(ordo_stream_synchronize(p->streams[i], test_deadline()));
    }
    return atomic_load(&errors);
}

#endif
