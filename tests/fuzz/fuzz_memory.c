/* libFuzzer target: stream-ordered memory stacks.
 *
 * Each input builds a stack on a fresh owned cpu device: the direct
 * resource at the bottom, then up to four layers in any order chosen from
 * pool, budget, statistics, logging (to /dev/null, as a FILE or a path) and
 * guard, with settings from the input. It then runs a bounded program on
 * three streams: allocations (sizes, alignments, tags and streams in and
 * out of range, exactly ORDO_MEM_MAX_BYTES), deallocations on streams,
 * host tasks that write blocks in stream order (with use tracking where a
 * pool is in the stack, refused with ORDO_ERR_UNSUPPORTED where not),
 * host tasks that fail their stream (allocations there follow), double
 * frees and frees of another stack's blocks, writes just past or before a
 * block the guard handed out (the guard must report ORDO_ERR_CORRUPTED),
 * reaps, destroys refused while blocks or adaptors stand, and bad handles.
 * The model predicts each status, that failed calls name themselves and
 * empty their outputs, the statistics adaptor's counts (where it sees the
 * caller's blocks), the guard's live blocks, and that the whole stack
 * comes down cleanly at the end, with ordo's host blocks back to their
 * count before the input.
 *
 * Defects it found, fixed since, and checked on every input: adaptors
 * above a guard kept a block the guard had freed (its ORDO_ERR_CORRUPTED
 * taken for a refused free); ordo_mem_allocate, ordo_mem_prepare_use,
 * finish_use and record_use on a failed stream, and ordo_stream_synchronize,
 * named the internal call that failed (ordo_stream_wait, ordo_signal_wait);
 * a guard's free on a failed stream lost its finding's message to the
 * refused free point; a guard and a pool refused exactly
 * ORDO_MEM_MAX_BYTES as out of range. New known defects go behind
 * fuzz_known_defect() (fuzz_common.h) until fixed. */
#include "fuzz_common.h"

#define STREAMS 3
#define LAYERS 5
#define BLOCKS 12
#define TASKS 64
#define MAX_OPS 64

typedef enum { L_DIRECT, L_POOL, L_BUDGET, L_STATISTICS, L_LOGGING, L_GUARD, L_KINDS } kind_t;

typedef struct layer {
    kind_t kind;
    ordo_mem_resource_t *r;
} layer_t;

typedef struct mblock {
    ordo_block_t *block;
    unsigned char *ptr;
    size_t bytes;
    uint32_t tag;
    int stream;  /* allocated on */
    int touched; /* the stream whose queued task may write it, or -1 */
    int found;   /* the guard found an overwrite of it already (reported once) */
} mblock_t;

typedef struct task {
    unsigned char *ptr;
    size_t bytes;
    unsigned char fill;
} task_t;

static ordo_device_t *foreign_device;
static ordo_stream_t *foreign_stream;
static FILE *devnull;

static ordo_device_t *device;
static ordo_stream_t *streams[STREAMS];
static ordo_status_t failing[STREAMS]; /* the status a queued task fails it with */
static uint32_t failures_used;         /* bit per status a task failed a stream with */
static layer_t layers[LAYERS];
static int nlayers;
static int maker; /* the topmost layer that makes blocks: direct, pool or guard */
static int has_pool, has_budget_limit;
static int stats_layer; /* a statistics layer that sees the callers' blocks, or -1 */
static int guard_layer;
static ordo_tracker_t *tracker;
static ordo_mem_resource_t *other; /* another stack */
static ordo_block_t *other_block;
static mblock_t blocks[BLOCKS];
static ordo_block_t *freed[BLOCKS]; /* handles freed on a guard (double frees) */
static int nfreed;
static task_t tasks[TASKS];
static int ntasks;

static ordo_mem_resource_t *top(void) {
    return layers[nlayers - 1].r;
}

static ordo_status_t write_task(void *ctx) {
    task_t *t = ctx;
    memset(t->ptr, t->fill, t->bytes);
    return ORDO_OK;
}

static ordo_status_t failing_task(void *ctx) {
    return (ordo_status_t)(intptr_t)ctx;
}

/* ------------------------------------------------------------ the stack */

static void add_layer(fuzz_input_t *in, kind_t kind) {
    ordo_mem_resource_t *up = top(), *r;
    fuzz_sentinel(r);
    ordo_status_t st = ORDO_OK;
    switch (kind) {
    case L_POOL: {
        ordo_mem_pool_config_t config;
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_pool_config_default, &config), ORDO_OK,
                    "ordo_mem_pool_config_default");
        uint8_t b = fuzz_u8(in);
        config.reuse = (ordo_mem_reuse_policy_t)(b & 1);
        config.chunk_bytes = (size_t)64 << 10;
        config.slot_max_bytes = b & 2 ? 0 : config.slot_max_bytes;
        config.release_threshold = b & 4 ? 0 : config.release_threshold;
        st = FUZZ_CALL(ordo_mem_pool_create, tracker, up, &config, &r);
        break;
    }
    case L_BUDGET: {
        ordo_mem_budget_config_t config = {(uint64_t)(fuzz_u8(in) & 3) * 50000u, 0};
        st = FUZZ_CALL(ordo_mem_budget_create, up, &config, &r);
        uint8_t limit = fuzz_u8(in);
        if (st == ORDO_OK && limit & 1) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_mem_budget_set_limit, device, (uint64_t)limit << 12),
                        ORDO_OK, "ordo_mem_budget_set_limit");
            has_budget_limit = 1;
        }
        break;
    }
    case L_STATISTICS:
        st = FUZZ_CALL(ordo_mem_statistics_create, up, &r);
        break;
    case L_LOGGING:
        if (fuzz_u8(in) & 1) {
            st = FUZZ_CALL(ordo_mem_logging_create, up, devnull, &r);
        } else {
            st = FUZZ_CALL(ordo_mem_logging_create_path, up, "/dev/null", &r);
        }
        break;
    default: {
        ordo_mem_guard_config_t config;
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_guard_config_default, &config), ORDO_OK,
                    "ordo_mem_guard_config_default");
        config.canary_bytes = 1 + fuzz_u8(in) % 64;
        config.quarantine_blocks = fuzz_u8(in) % 8;
        st = FUZZ_CALL(ordo_mem_guard_create, up, &config, &r);
        break;
    }
    }
    FUZZ_EXPECT(st, ORDO_OK, "creating a memory layer");
    layers[nlayers++] = (layer_t){kind, r};
}

static void build_stack(fuzz_input_t *in) {
    ordo_mem_resource_t *r;
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_direct_create, device, &r), ORDO_OK, "ordo_mem_direct_create");
    layers[0] = (layer_t){L_DIRECT, r};
    nlayers = 1;
    int used[L_KINDS] = {0};
    int wanted = fuzz_u8(in) % LAYERS;
    for (int i = 0; i < wanted; ++i) {
        kind_t kind = (kind_t)(1 + fuzz_u8(in) % (L_KINDS - 1));
        if (!used[kind]) {
            used[kind] = 1;
            add_layer(in, kind);
        }
    }
    maker = 0;
    has_pool = 0;
    guard_layer = -1;
    stats_layer = -1;
    for (int i = 0; i < nlayers; ++i) {
        kind_t k = layers[i].kind;
        if (k == L_DIRECT || k == L_POOL || k == L_GUARD) {
            maker = i;
            stats_layer = -1; /* blocks made above it are not the ones it counts */
        }
        has_pool |= k == L_POOL;
        guard_layer = k == L_GUARD ? i : guard_layer;
        stats_layer = k == L_STATISTICS ? i : stats_layer;
    }
}

/* ------------------------------------------------------------ checks */

static int live_count(size_t *bytes) {
    int n = 0;
    *bytes = 0;
    for (int i = 0; i < BLOCKS; ++i) {
        if (blocks[i].block) {
            ++n;
            *bytes += blocks[i].bytes;
        }
    }
    return n;
}

static void compare(void) {
    size_t bytes;
    int n = live_count(&bytes);
    if (stats_layer >= 0) {
        static ordo_mem_statistics_t s;
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_statistics_get, layers[stats_layer].r, &s), ORDO_OK,
                    "ordo_mem_statistics_get");
        FUZZ_CHECK(s.overall.current_blocks == (uint64_t)n && s.overall.current_bytes == bytes,
                   "statistics count %llu blocks of %llu bytes; the caller holds %d of %zu",
                   (unsigned long long)s.overall.current_blocks,
                   (unsigned long long)s.overall.current_bytes, n, bytes);
    }
    if (guard_layer == maker && layers[maker].kind == L_GUARD) {
        ordo_mem_guard_report_t report;
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_guard_check, layers[guard_layer].r, &report), ORDO_OK,
                    "ordo_mem_guard_check");
        FUZZ_CHECK(report.live_blocks == (uint64_t)n, "the guard counts %llu live blocks, not %d",
                   (unsigned long long)report.live_blocks, n);
    }
    uint64_t outstanding;
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_bytes_outstanding, top(), &outstanding), ORDO_OK,
                "ordo_mem_bytes_outstanding");
    FUZZ_CHECK(outstanding >= bytes, "%llu bytes outstanding, but the caller holds %zu",
               (unsigned long long)outstanding, bytes);
}

/* Whether st may be stream s's failure: one it was failed with, or, with
 * a pool in the stack (whose reuse and use tracking make streams wait for
 * one another on the device), any one a stream was failed with, passed
 * on by such a wait. Notes it as s's failure. */
static int failure_ok(int s, ordo_status_t st) {
    if (st <= ORDO_OK || st >= ORDO_STATUS_COUNT_ || !(failures_used & (1u << st))) {
        return 0;
    }
    if (!has_pool && st != failing[s]) {
        return 0; /* (with a pool, a wait may fail it before its own task does) */
    }
    failing[s] = st;
    return 1;
}

/* Waits for stream s's queued work (a host-side order between streams). */
static void settle(int s) {
    ordo_status_t st = FUZZ_CALL(ordo_stream_synchronize, streams[s], ordo_deadline_after_ms(5000));
    FUZZ_CHECK(st == ORDO_OK || failure_ok(s, st), "ordo_stream_synchronize returned %s",
               ordo_status_name(st));
}

/* A stream not known to have failed (stream 0 is never failed by a task
 * of its own, but a wait may pass another's failure on). */
static int healthy_stream(fuzz_input_t *in) {
    int s = fuzz_u8(in) % STREAMS;
    return failing[s] ? 0 : s;
}

/* ------------------------------------------------------------ ops */

static void op_allocate(fuzz_input_t *in) {
    int slot = fuzz_u8(in) % BLOCKS;
    if (blocks[slot].block) {
        return;
    }
    uint8_t b = fuzz_u8(in);
    size_t bytes = 1 + fuzz_u16(in) % 3000;
    switch (b & 15) {
    case 0:
        bytes = 0;
        break;
    case 1:
        bytes = ORDO_MEM_MAX_BYTES;
        break;
    case 2:
        bytes = ORDO_MEM_MAX_BYTES + 1 + (size_t)fuzz_u8(in);
        break;
    default:
        break;
    }
    uint8_t a = fuzz_u8(in);
    size_t alignment = a < 128    ? 0
                       : a < 250  ? (size_t)1 << (a % 13)
                       : a == 250 ? 3
                                  : ORDO_MEM_MAX_ALIGNMENT << 1;
    uint32_t tag = fuzz_u8(in) % 70;
    int s = fuzz_u8(in) % (STREAMS + 1);
    ordo_stream_t *stream = s == STREAMS ? foreign_stream : streams[s];
    ordo_status_t want = ORDO_OK;
    if (s == STREAMS || bytes == 0) {
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if (bytes > ORDO_MEM_MAX_BYTES) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if ((alignment & (alignment - 1)) || alignment > ORDO_MEM_MAX_ALIGNMENT) {
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if (tag >= ORDO_MEM_MAX_TAGS) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if (bytes == ORDO_MEM_MAX_BYTES) {
        want = ORDO_ERR_OUT_OF_MEMORY;
    }
    ordo_block_t *block;
    void *ptr;
    fuzz_sentinel(block);
    fuzz_sentinel(ptr);
    fuzz_prime_message();
    ordo_status_t st = ordo_mem_allocate(top(), bytes, alignment, stream, tag, &block, &ptr);
    int on_failed = s < STREAMS && failure_ok(s, st);
    fuzz_check_named(__FILE__, __LINE__, st, "ordo_mem_allocate");
    FUZZ_EMPTY_ON_FAILURE(st, block, "ordo_mem_allocate");
    FUZZ_EMPTY_ON_FAILURE(st, ptr, "ordo_mem_allocate");
    if (want == ORDO_ERR_OUT_OF_MEMORY && st == ORDO_ERR_OUT_OF_RANGE) {
        /* Exactly the maximum is in range, whichever layer refuses it. */
        FUZZ_FAIL("ordo_mem_allocate of exactly ORDO_MEM_MAX_BYTES returned %s, not %s",
                  ordo_status_name(st), ordo_status_name(want));
    }
    if (want == ORDO_OK && st != ORDO_OK) {
        int allowed = (has_budget_limit && st == ORDO_ERR_OUT_OF_MEMORY) || on_failed;
        FUZZ_CHECK(allowed, "ordo_mem_allocate of %zu bytes returned %s", bytes,
                   ordo_status_name(st));
        return;
    }
    FUZZ_EXPECT(st, want, "ordo_mem_allocate");
    if (st != ORDO_OK) {
        return;
    }
    size_t align = alignment ? alignment : ORDO_MEM_DEFAULT_ALIGNMENT;
    FUZZ_CHECK(block && ptr && ((uintptr_t)ptr & (align - 1)) == 0,
               "ordo_mem_allocate gave block %p ptr %p for alignment %zu", (void *)block, ptr,
               align);
    ordo_block_info_t info;
    FUZZ_EXPECT(FUZZ_CALL(ordo_block_info, block, &info), ORDO_OK, "ordo_block_info");
    FUZZ_CHECK(info.ptr == ptr && info.bytes == bytes && info.tag == tag && info.stream == stream,
               "ordo_block_info does not describe the allocation");
    memset(ptr, 0x11, bytes); /* usable at once on the host (cpu) */
    blocks[slot] = (mblock_t){block, ptr, bytes, tag, s, -1, 0};
}

static void forget(int slot, int guard_made) {
    if (guard_made && nfreed < BLOCKS) {
        freed[nfreed++] = blocks[slot].block;
    }
    blocks[slot].block = NULL;
}

static void op_deallocate(fuzz_input_t *in) {
    int slot = fuzz_u8(in) % BLOCKS;
    mblock_t *b = &blocks[slot];
    if (!b->block) {
        return;
    }
    int s = b->touched >= 0 ? b->touched : healthy_stream(in);
    if (failing[s]) {
        settle(s);
        b->touched = -1;
        s = 0;
    }
    ordo_status_t st = FUZZ_CALL(ordo_mem_deallocate, top(), b->block, streams[s]);
    if (st != ORDO_OK) {
        /* A pool refuses a free on a failed stream that would have to
         * wait for the block's uses elsewhere: the block stays live. */
        FUZZ_CHECK(failure_ok(s, st), "ordo_mem_deallocate returned %s", ordo_status_name(st));
        return;
    }
    forget(slot, layers[maker].kind == L_GUARD);
}

/* A double free (where a guard makes the blocks: it keeps their headers),
 * a block of another stack, garbage and NULL. */
static void op_bad_free(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    int s = healthy_stream(in);
    ordo_status_t st;
    switch (b % 4) {
    case 0:
        if (!nfreed) {
            return;
        }
        st = FUZZ_CALL(ordo_mem_deallocate, top(), freed[fuzz_u8(in) % nfreed], streams[s]);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate (double free)");
        break;
    case 1:
        st = FUZZ_CALL(ordo_mem_deallocate, top(), other_block, streams[s]);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT, "ordo_mem_deallocate (another stack's block)");
        break;
    case 2:
        st = FUZZ_CALL(ordo_mem_deallocate, top(), b & 4 ? NULL : FUZZ_GARBAGE(ordo_block_t),
                       streams[s]);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate (not a block)");
        break;
    default: {
        int slot = fuzz_u8(in) % BLOCKS;
        if (blocks[slot].block) {
            st = FUZZ_CALL(ordo_mem_deallocate, top(), blocks[slot].block, foreign_stream);
            FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT,
                        "ordo_mem_deallocate (a stream of another device)");
            st = FUZZ_CALL(ordo_mem_deallocate, b & 4 ? NULL : FUZZ_GARBAGE(ordo_mem_resource_t),
                           blocks[slot].block, streams[s]);
            FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate (not a resource)");
        }
        break;
    }
    }
}

/* Writes just past the end (or before the start) of a block the guard
 * handed out. */
static void op_canary(fuzz_input_t *in) {
    if (layers[maker].kind != L_GUARD) {
        return;
    }
    int slot = fuzz_u8(in) % BLOCKS;
    mblock_t *b = &blocks[slot];
    if (!b->block) {
        return;
    }
    uint8_t how = fuzz_u8(in);
    unsigned char *where = how & 1 ? b->ptr + b->bytes : b->ptr - 1;
    if (b->touched >= 0) {
        settle(b->touched); /* its writer is done: the canary is the host's alone */
        b->touched = -1;
    }
    unsigned char saved = *where;
    *where = (unsigned char)(saved ^ (1 + (how >> 1)));
    int s = healthy_stream(in);
    ordo_status_t st = FUZZ_CALL(ordo_mem_deallocate, top(), b->block, streams[s]);
    if (st != ORDO_ERR_CORRUPTED) {
        fuzz_check_named(__FILE__, __LINE__, st, "ordo_mem_deallocate");
    }
    if (!b->found || st != ORDO_OK) {
        FUZZ_EXPECT(st, ORDO_ERR_CORRUPTED, "ordo_mem_deallocate of a block with a broken canary");
    }
    forget(slot, 1); /* the guard freed it all the same (docs/MEMORY.md) */
}

static void op_task(fuzz_input_t *in) {
    int slot = fuzz_u8(in) % BLOCKS;
    mblock_t *b = &blocks[slot];
    int s = healthy_stream(in);
    if (!b->block || ntasks == TASKS) {
        return;
    }
    if (b->touched >= 0 && b->touched != s) {
        settle(b->touched);
    }
    ordo_access_mode_t mode = ORDO_ACCESS_WRITE;
    ordo_status_t st = FUZZ_CALL(ordo_mem_prepare_use, top(), b->block, streams[s], mode);
    if (st != ORDO_OK && failure_ok(s, st)) {
        return;
    }
    FUZZ_EXPECT(st, has_pool ? ORDO_OK : ORDO_ERR_UNSUPPORTED, "ordo_mem_prepare_use");
    tasks[ntasks] = (task_t){b->ptr, b->bytes, (unsigned char)ntasks};
    st = FUZZ_CALL(ordo_stream_host_task, streams[s], write_task, &tasks[ntasks]);
    FUZZ_CHECK(st == ORDO_OK || failure_ok(s, st), "ordo_stream_host_task returned %s",
               ordo_status_name(st));
    ++ntasks;
    b->touched = s;
    st = FUZZ_CALL(ordo_mem_finish_use, top(), b->block, streams[s], mode);
    FUZZ_CHECK(st == (has_pool ? ORDO_OK : ORDO_ERR_UNSUPPORTED) || failure_ok(s, st),
               "ordo_mem_finish_use returned %s", ordo_status_name(st));
    st = FUZZ_CALL(ordo_mem_record_use, top(), b->block, streams[s]);
    FUZZ_CHECK(st == (has_pool ? ORDO_OK : ORDO_ERR_UNSUPPORTED) || failure_ok(s, st),
               "ordo_mem_record_use returned %s", ordo_status_name(st));
    bool supported = false;
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_supports_use_tracking, top(), &supported), ORDO_OK,
                "ordo_mem_supports_use_tracking");
    FUZZ_CHECK(!supported == !has_pool, "use tracking supported: %d, a pool in the stack: %d",
               supported, has_pool);
}

static void op_fail_stream(fuzz_input_t *in) {
    int s = 1 + fuzz_u8(in) % (STREAMS - 1);
    ordo_status_t status = (ordo_status_t)(1 + fuzz_u8(in) % (ORDO_STATUS_COUNT_ - 1));
    ordo_status_t st =
        FUZZ_CALL(ordo_stream_host_task, streams[s], failing_task, (void *)(intptr_t)status);
    /* A stream failing already may not have run its failing task yet. */
    FUZZ_CHECK(st == ORDO_OK || failure_ok(s, st), "ordo_stream_host_task returned %s",
               ordo_status_name(st));
    if (!failing[s]) {
        failing[s] = status;
    }
    failures_used |= 1u << status;
    for (int i = 0; i < BLOCKS; ++i) {
        if (blocks[i].block && blocks[i].touched == s) {
            settle(s); /* its tasks may have been dropped: nobody writes the block now */
            blocks[i].touched = -1;
        }
    }
}

static void op_misc(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    switch (b % 4) {
    case 0: {
        ordo_status_t st = FUZZ_CALL(ordo_mem_reap_pending, top(), fuzz_deadline(in));
        FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_TIMEOUT, "ordo_mem_reap_pending returned %s",
                   ordo_status_name(st));
        break;
    }
    case 1: {
        /* A layer with another standing on it, or the top with blocks out. */
        size_t bytes;
        int i = fuzz_u8(in) % nlayers;
        if (i == nlayers - 1 && !live_count(&bytes)) {
            return;
        }
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_resource_destroy, layers[i].r), ORDO_ERR_BUSY,
                    "ordo_mem_resource_destroy");
        break;
    }
    case 2: {
        uint64_t bytes;
        fuzz_sentinel(bytes);
        ordo_mem_resource_t *bad = b & 4 ? NULL : FUZZ_GARBAGE(ordo_mem_resource_t);
        ordo_status_t st = FUZZ_CALL(ordo_mem_bytes_outstanding, bad, &bytes);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_mem_bytes_outstanding");
        FUZZ_EMPTY_ON_FAILURE(st, bytes, "ordo_mem_bytes_outstanding");
        ordo_block_t *block;
        void *ptr;
        fuzz_sentinel(block);
        fuzz_sentinel(ptr);
        st = FUZZ_CALL(ordo_mem_allocate, bad, 64, 0, streams[0], 0, &block, &ptr);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_mem_allocate");
        FUZZ_EMPTY_ON_FAILURE(st, block, "ordo_mem_allocate");
        FUZZ_EMPTY_ON_FAILURE(st, ptr, "ordo_mem_allocate");
        ordo_block_info_t info;
        fuzz_sentinel(info);
        st = FUZZ_CALL(ordo_block_info, NULL, &info);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_block_info");
        FUZZ_EMPTY_ON_FAILURE(st, info, "ordo_block_info");
        break;
    }
    default: {
        int slot = fuzz_u8(in) % BLOCKS;
        if (!blocks[slot].block) {
            return;
        }
        ordo_buffer_t *buffer;
        fuzz_sentinel(buffer);
        ordo_status_t st = FUZZ_CALL(ordo_block_buffer, blocks[slot].block, &buffer);
        FUZZ_EXPECT(st, has_pool ? ORDO_OK : ORDO_ERR_UNSUPPORTED, "ordo_block_buffer");
        FUZZ_EMPTY_ON_FAILURE(st, buffer, "ordo_block_buffer");
        break;
    }
    }
}

/* ------------------------------------------------------------ the input */

static void setup(void) {
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        FUZZ_CHECK(devnull, "cannot open /dev/null");
        FUZZ_EXPECT(ordo_device_create_owned("cpu", NULL, &foreign_device), ORDO_OK,
                    "ordo_device_create_owned");
        FUZZ_EXPECT(ordo_stream_create(foreign_device, 0, &foreign_stream), ORDO_OK,
                    "ordo_stream_create");
    }
}

static void teardown(void) {
    for (int i = 0; i < BLOCKS; ++i) {
        int s = blocks[i].touched >= 0 ? blocks[i].touched : 0;
        for (int k = 0; blocks[i].block && k <= STREAMS; ++k, s = (s + 1) % STREAMS) {
            ordo_status_t st = FUZZ_CALL(ordo_mem_deallocate, top(), blocks[i].block, streams[s]);
            FUZZ_CHECK(st == ORDO_OK || failure_ok(s, st),
                       "ordo_mem_deallocate at teardown returned %s", ordo_status_name(st));
            if (st == ORDO_OK) {
                blocks[i].block = NULL;
            }
        }
        FUZZ_CHECK(!blocks[i].block, "no stream could free a block at teardown");
    }
    compare();
    for (int s = 0; s < STREAMS; ++s) {
        settle(s);
    }
    /* Top down: a guard's destroy gives its quarantine back to the layer
     * below as stream-ordered frees, which that layer's reap then sees. */
    for (int i = nlayers - 1; i >= 0; --i) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_reap_pending, layers[i].r, ordo_deadline_after_ms(5000)),
                    ORDO_OK, "ordo_mem_reap_pending at teardown");
        FUZZ_EXPECT(FUZZ_CALL(ordo_mem_resource_destroy, layers[i].r), ORDO_OK,
                    "ordo_mem_resource_destroy at teardown");
    }
    /* (a direct free on a stream that failed is a free all the same) */
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_deallocate, other, other_block, streams[0]), ORDO_OK,
                "ordo_mem_deallocate");
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_reap_pending, other, ordo_deadline_after_ms(5000)), ORDO_OK,
                "ordo_mem_reap_pending");
    FUZZ_EXPECT(FUZZ_CALL(ordo_mem_resource_destroy, other), ORDO_OK, "ordo_mem_resource_destroy");
    FUZZ_EXPECT(FUZZ_CALL(ordo_tracker_destroy, tracker), ORDO_OK, "ordo_tracker_destroy");
    for (int s = 0; s < STREAMS; ++s) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_destroy, streams[s]), ORDO_OK, "ordo_stream_destroy");
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_device_release, device), ORDO_OK, "ordo_device_release");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_harness = "fuzz_memory";
    setup();
    size_t before = fuzz_live_blocks();
    memset(blocks, 0, sizeof blocks);
    memset(failing, 0, sizeof failing);
    nfreed = ntasks = 0;
    failures_used = 0;
    has_budget_limit = 0;
    fuzz_input_t in = {data, size, 0};
    FUZZ_EXPECT(ordo_device_create_owned("cpu", NULL, &device), ORDO_OK,
                "ordo_device_create_owned");
    for (int s = 0; s < STREAMS; ++s) {
        FUZZ_EXPECT(ordo_stream_create(device, 0, &streams[s]), ORDO_OK, "ordo_stream_create");
    }
    FUZZ_EXPECT(ordo_tracker_create(device, &tracker), ORDO_OK, "ordo_tracker_create");
    FUZZ_EXPECT(ordo_mem_direct_create(device, &other), ORDO_OK, "ordo_mem_direct_create");
    FUZZ_EXPECT(ordo_mem_allocate(other, 32, 0, streams[0], 0, &other_block, NULL), ORDO_OK,
                "ordo_mem_allocate");
    build_stack(&in);
    for (int ops = 0; ops < MAX_OPS && fuzz_more(&in); ++ops) {
        switch (fuzz_u8(&in) % 8) {
        case 0:
        case 1:
            op_allocate(&in);
            break;
        case 2:
            op_deallocate(&in);
            break;
        case 3:
            op_bad_free(&in);
            break;
        case 4:
            op_canary(&in);
            break;
        case 5:
            op_task(&in);
            break;
        case 6:
            op_fail_stream(&in);
            break;
        default:
            op_misc(&in);
            break;
        }
        compare();
    }
    teardown();
    FUZZ_CHECK_BASELINE(before);
    return 0;
}
