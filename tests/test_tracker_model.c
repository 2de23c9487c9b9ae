/* Randomised reference-model test of automatic ordering: thousands of
 * random programs run on CPU streams with real data. Every task checks the
 * versions of what it accesses and stamps what it writes, so a missing wait
 * shows up as a wrong version (and, under ThreadSanitizer, as a race);
 * separately a reference happens-before model (tracker_model.c) checks that
 * every hazard was ordered and no emitted wait was already implied.
 *
 * Seeded and reproducible: ORDO_MODEL_SEED sets the seed, ORDO_MODEL_PROGRAMS
 * the number of programs (a larger run), ORDO_MODEL_SECONDS a time bound. */
#include <stdatomic.h>
#include <string.h>

#include "core/tracker_observer.h"
#include "ordo/buffer.h"
#include "ordo/tracker.h"
#include "test_util.h"
#include "tracker_model.h"

#define MAX_STREAMS 4
#define MAX_BUFFERS 8
#define MAX_SUBMISSIONS 64
#define MAX_ACCESSES 3
#define MAX_WORDS 64

typedef struct buffer_data {
    uint64_t version; /* plain memory on purpose: races show under TSan */
    uint32_t words;
    uint64_t data[MAX_WORDS];
} buffer_data_t;

typedef struct task {
    size_t count;
    buffer_data_t *data[MAX_ACCESSES];
    uint64_t expect[MAX_ACCESSES]; /* the version each access must see */
    uint64_t stamp[MAX_ACCESSES];  /* the version a write leaves (0: read) */
    unsigned spin;                 /* a random length of work */
    _Atomic uint64_t *errors;
} task_t;

static uint64_t pattern(uint64_t version, uint32_t i) {
    return version * 0x9e3779b97f4a7c15ull ^ i;
}

static ordo_status_t run_task(void *ctx) {
    task_t *t = ctx;
    for (size_t a = 0; a < t->count; ++a) {
        buffer_data_t *d = t->data[a];
        int bad = d->version != t->expect[a];
        for (uint32_t i = 0; i < d->words && !bad; ++i) {
            bad = d->data[i] != pattern(d->version, i);
        }
        if (bad) {
            atomic_fetch_add(t->errors, 1);
        }
    }
    for (volatile unsigned i = 0; i < t->spin; ++i) {
    }
    for (size_t a = 0; a < t->count; ++a) {
        if (t->stamp[a]) {
            buffer_data_t *d = t->data[a];
            d->version = t->stamp[a];
            for (uint32_t i = 0; i < d->words; ++i) {
                d->data[i] = pattern(d->version, i);
            }
        }
    }
    return ORDO_OK;
}

static ordo_status_t launch_task(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, run_task, ctx);
}

typedef struct harness {
    ordo_stream_t *streams[MAX_STREAMS];
    model_t *model;
} harness_t;

static uint32_t index_of(harness_t *h, ordo_stream_t *s) {
    for (uint32_t i = 0; i < MAX_STREAMS; ++i) {
        if (h->streams[i] == s) {
            return i;
        }
    }
    return UINT32_MAX;
}

static void on_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin, uint64_t origin_point,
                    uint64_t needed_point) {
    harness_t *h = ctx;
    model_on_wait(h->model, index_of(h, waiting), index_of(h, origin), origin_point, needed_point);
}

typedef struct totals {
    uint64_t programs;
    uint64_t submissions;
    uint64_t waits;
    uint64_t elided;
} totals_t;

/* One random program; returns 0 when it ran correctly. */
static int run_program(harness_t *h, ordo_device_t *device, uint64_t *rng, totals_t *totals) {
    uint32_t streams = 2 + (uint32_t)(test_rand(rng) % (MAX_STREAMS - 1));
    uint32_t buffers = 1 + (uint32_t)(test_rand(rng) % MAX_BUFFERS);
    uint32_t submissions = 1 + (uint32_t)(test_rand(rng) % MAX_SUBMISSIONS);
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    h->model = model_create(streams, submissions);
    assert_ok(ordo__tracker_set_wait_observer(tracker, on_wait, h));

    buffer_data_t data[MAX_BUFFERS];
    ordo_buffer_t *handles[MAX_BUFFERS];
    uint64_t version[MAX_BUFFERS];
    for (uint32_t b = 0; b < buffers; ++b) {
        data[b].version = version[b] = 1;
        data[b].words = 1 + (uint32_t)(test_rand(rng) % MAX_WORDS);
        for (uint32_t i = 0; i < data[b].words; ++i) {
            data[b].data[i] = pattern(1, i);
        }
        assert_ok(ordo_buffer_create(tracker, &handles[b]));
    }
    _Atomic uint64_t errors = 0;
    task_t *tasks = calloc(submissions, sizeof *tasks);
    uint64_t next_version = 2;
    for (uint32_t k = 0; k < submissions; ++k) {
        uint32_t stream = (uint32_t)(test_rand(rng) % streams);
        size_t count = (size_t)(test_rand(rng) % (MAX_ACCESSES + 1));
        ordo_access_t accesses[MAX_ACCESSES];
        model_access_t modeled[MAX_ACCESSES];
        task_t *t = &tasks[k];
        t->errors = &errors;
        t->spin = (unsigned)(test_rand(rng) % 2000);
        t->count = 0;
        for (size_t a = 0; a < count; ++a) {
            uint32_t b = (uint32_t)(test_rand(rng) % buffers);
            ordo_access_mode_t mode = (ordo_access_mode_t)(1 + test_rand(rng) % 3);
            /* One entry per buffer per task: a repeated buffer merges its
             * modes, as the tracker does. */
            size_t seen = 0;
            while (seen < t->count && t->data[seen] != &data[b]) {
                ++seen;
            }
            if (seen < t->count) {
                modeled[seen].mode |= mode;
            } else {
                t->data[t->count] = &data[b];
                modeled[t->count] = (model_access_t){b, mode};
                t->count++;
            }
            accesses[a] = (ordo_access_t){handles[b], mode};
        }
        for (size_t a = 0; a < t->count; ++a) {
            uint32_t b = modeled[a].buffer;
            t->expect[a] = version[b];
            t->stamp[a] = (modeled[a].mode & ORDO_ACCESS_WRITE) ? next_version++ : 0;
            if (t->stamp[a]) {
                version[b] = t->stamp[a];
            }
        }
        model_begin(h->model, stream, modeled, t->count);
        assert_ok(
            ordo_tracker_submit(tracker, h->streams[stream], accesses, count, launch_task, t));
        model_end(h->model);
    }
    for (uint32_t s = 0; s < streams; ++s) {
        assert_ok(ordo_stream_synchronize(h->streams[s], test_deadline()));
    }
    for (uint32_t b = 0; b < buffers; ++b) {
        assert_ok(ordo_buffer_release(handles[b], NULL, NULL));
    }
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_ok(ordo_tracker_destroy(tracker));
    int failed = 0;
    const char *why = NULL;
    if (model_violations(h->model, &why)) {
        print_error("model: %s\n", why);
        failed = 1;
    }
    if (atomic_load(&errors)) {
        print_error("data: %llu task(s) saw a wrong version\n",
                    (unsigned long long)atomic_load(&errors));
        failed = 1;
    }
    for (uint32_t b = 0; b < buffers; ++b) {
        if (data[b].version != version[b]) {
            print_error("data: buffer %u ended at version %llu, expected %llu\n", b,
                        (unsigned long long)data[b].version, (unsigned long long)version[b]);
            failed = 1;
        }
    }
    totals->programs++;
    totals->submissions += m.submissions;
    totals->waits += m.waits_emitted;
    totals->elided += m.waits_elided;
    model_free(h->model);
    free(tasks);
    return failed;
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : fallback;
}

static void random_programs_match_the_model(void **state) {
    (void)state;
    ordo_device_t *device;
    assert_ok(ordo_device_open(test_device_name(), &device));
    harness_t h = {0};
    for (int s = 0; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &h.streams[s]));
    }
    uint64_t seed = env_u64("ORDO_MODEL_SEED", 0x6f72646f2d6d6f64ull);
    uint64_t programs = env_u64("ORDO_MODEL_PROGRAMS", test_device_scaled(10000));
    uint64_t seconds = env_u64("ORDO_MODEL_SECONDS", 120);
    ordo_deadline_t stop = ordo_deadline_after_ms(seconds * 1000);
    totals_t totals = {0};
    for (uint64_t p = 0; p < programs && ordo_time_now_ns() < stop; ++p) {
        uint64_t rng = seed ^ (p * 0x9e3779b97f4a7c15ull) ^ 1;
        if (run_program(&h, device, &rng, &totals)) {
            fail_msg("program %llu failed; reproduce with ORDO_MODEL_SEED=%llu "
                     "ORDO_MODEL_PROGRAMS=%llu",
                     (unsigned long long)p, (unsigned long long)seed, (unsigned long long)(p + 1));
        }
    }
    print_message("  %llu programs, %llu submissions, %llu waits emitted, %llu elided\n",
                  (unsigned long long)totals.programs, (unsigned long long)totals.submissions,
                  (unsigned long long)totals.waits, (unsigned long long)totals.elided);
    assert_true(totals.programs >= 1);
    for (int s = 0; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_stream_destroy(h.streams[s]));
    }
    assert_ok(ordo_device_release(device));
}

/* ---- wide programs: up to 64 streams, the split form, release and reuse -- */

#define WIDE_STREAMS ORDO_TRACKER_MAX_STREAMS
#define WIDE_SLOTS 6

typedef struct wide_data {
    buffer_data_t d;
    _Atomic int reclaimed; /* set by the reclaim callback */
} wide_data_t;

typedef struct wide_task {
    task_t base;
    wide_data_t *owners[MAX_ACCESSES];
    int fail; /* checks what it reads, then fails its stream without writing */
    /* For the check of what ran: when it started and ended (0: it did
     * not run), its stream and accesses, and whether it was accepted. */
    uint64_t start;
    uint64_t end;
    uint32_t stream;
    int accepted;
    model_access_t modeled[MAX_ACCESSES];
} wide_task_t;

/* One clock over every task's start and end. */
static _Atomic uint64_t wide_clock;

static ordo_status_t run_wide_task(void *ctx) {
    wide_task_t *t = ctx;
    t->start = atomic_fetch_add(&wide_clock, 1) + 1;
    for (size_t a = 0; a < t->base.count; ++a) {
        if (atomic_load(&t->owners[a]->reclaimed)) {
            atomic_fetch_add(t->base.errors, 1);
        }
    }
    ordo_status_t st = ORDO_ERR_ABORTED;
    if (t->fail) {
        for (size_t a = 0; a < t->base.count; ++a) {
            t->base.stamp[a] = 0;
        }
    }
    if (run_task(&t->base) == ORDO_OK && !t->fail) {
        st = ORDO_OK;
    }
    for (size_t a = 0; a < t->base.count; ++a) {
        if (atomic_load(&t->owners[a]->reclaimed)) {
            atomic_fetch_add(t->base.errors, 1);
        }
    }
    t->end = atomic_fetch_add(&wide_clock, 1) + 1;
    return st;
}

/* Every two accepted tasks on different streams that conflict, and both
 * ran, ran one after the other, in submission order. */
static int ran_in_order(const wide_task_t *tasks, uint32_t count) {
    for (uint32_t j = 0; j < count; ++j) {
        const wide_task_t *n = &tasks[j];
        if (!n->accepted || !n->start) {
            continue;
        }
        for (uint32_t i = 0; i < j; ++i) {
            const wide_task_t *e = &tasks[i];
            if (!e->accepted || !e->start || e->stream == n->stream) {
                continue;
            }
            int conflict = 0;
            for (size_t a = 0; a < e->base.count; ++a) {
                for (size_t b = 0; b < n->base.count; ++b) {
                    conflict |= e->modeled[a].buffer == n->modeled[b].buffer &&
                                ((e->modeled[a].mode | n->modeled[b].mode) & ORDO_ACCESS_WRITE);
                }
            }
            if (conflict && e->end > n->start) {
                print_error("ran out of order: task %u (stream %u) ended at %llu, after task %u "
                            "(stream %u) started at %llu\n",
                            i, e->stream, (unsigned long long)e->end, j, n->stream,
                            (unsigned long long)n->start);
                return 0;
            }
        }
    }
    return 1;
}

static ordo_status_t launch_wide_task(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, run_wide_task, ctx);
}

static void reclaim_wide(void *ctx) {
    wide_data_t *d = ctx;
    atomic_store(&d->reclaimed, 1);
}

typedef struct wide_harness {
    ordo_stream_t *program[WIDE_STREAMS]; /* the program's streams, in its order */
    uint32_t streams;
    model_t *model;
} wide_harness_t;

static uint32_t wide_index_of(wide_harness_t *h, ordo_stream_t *s) {
    for (uint32_t i = 0; i < h->streams; ++i) {
        if (h->program[i] == s) {
            return i;
        }
    }
    return UINT32_MAX;
}

static void on_wide_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin,
                         uint64_t origin_point, uint64_t needed_point) {
    wide_harness_t *h = ctx;
    model_on_wait(h->model, wide_index_of(h, waiting), wide_index_of(h, origin), origin_point,
                  needed_point);
}

/* A submission refused because its stream has failed is not a node. */
static int refused_by_failure(ordo_status_t st, ordo_stream_t *stream, model_t *model) {
    if (st == ORDO_OK) {
        return 0;
    }
    if (ordo_stream_status(stream) == ORDO_OK) {
        print_error("refused on a healthy stream: %s (%s)\n", ordo_status_name(st),
                    ordo_error_message());
        fail();
    }
    model_cancel(model);
    return 1;
}

/* A refused submission writes nothing: what it would have written stays. */
static void restore_versions(uint64_t *version, const model_access_t *modeled,
                             const uint64_t *before, size_t count) {
    for (size_t a = count; a-- > 0;) {
        version[modeled[a].buffer] = before[a];
    }
}

/* Makes the next buffer of a wide program: its data at version 1 (1 to 8
 * words), noted in all and version at index *made, and its handle; gives
 * that index. */
static uint32_t wide_buffer_new(ordo_tracker_t *tracker, uint64_t *rng, wide_data_t **all,
                                uint64_t *version, uint32_t *made, ordo_buffer_t **out_handle) {
    uint32_t id = (*made)++;
    all[id] = calloc(1, sizeof *all[id]);
    all[id]->d.version = version[id] = 1;
    all[id]->d.words = 1 + (uint32_t)(test_rand(rng) % 8);
    for (uint32_t i = 0; i < all[id]->d.words; ++i) {
        all[id]->d.data[i] = pattern(1, i);
    }
    assert_ok(ordo_buffer_create(tracker, out_handle));
    return id;
}

/* pool: WIDE_STREAMS streams to choose from; NULL: fresh streams (some
 * tasks then fail, and with them their streams). */
static int run_wide_program(ordo_device_t *device, ordo_stream_t **pool, uint64_t *rng,
                            totals_t *totals) {
    wide_harness_t h = {0};
    ordo_stream_t *fresh[WIDE_STREAMS];
    const int failures = pool == NULL;
    /* Mostly around the inline limit of 8 streams, sometimes all 64. */
    uint64_t kind = test_rand(rng) % 4;
    h.streams = kind == 0 ? WIDE_STREAMS
                          : 2 + (uint32_t)(test_rand(rng) % (kind == 1 ? WIDE_STREAMS - 1 : 14));
    if (failures) {
        h.streams = 2 + (uint32_t)(test_rand(rng) % 11);
        for (uint32_t i = 0; i < WIDE_STREAMS; ++i) {
            fresh[i] = NULL;
        }
        for (uint32_t i = 0; i < h.streams; ++i) {
            assert_ok(ordo_stream_create(device, 0, &fresh[i]));
        }
        pool = fresh;
    }
    ordo_stream_t *perm[WIDE_STREAMS];
    memcpy(perm, pool, sizeof perm);
    const uint32_t choices = failures ? h.streams : WIDE_STREAMS;
    for (uint32_t i = 0; i < h.streams; ++i) {
        uint32_t j = i + (uint32_t)(test_rand(rng) % (choices - i));
        ordo_stream_t *tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        h.program[i] = perm[i];
    }
    uint32_t submissions = 1 + (uint32_t)(test_rand(rng) % (2 * MAX_SUBMISSIONS));
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    h.model = model_create(h.streams, submissions);
    if (failures) {
        /* A stream that fails runs none of its waits, yet its records carry
         * what they would have waited for: whoever waits on such a record
         * fails with it. The model does not know failures; what ran is
         * checked below instead. */
        model_skip_hazards(h.model);
    }
    assert_ok(ordo__tracker_set_wait_observer(tracker, on_wide_wait, &h));

    /* Every buffer ever made, so that its memory outlives the program. */
    uint32_t max_buffers = WIDE_SLOTS + submissions;
    wide_data_t **all = calloc(max_buffers, sizeof *all);
    uint64_t *version = calloc(max_buffers, sizeof *version);
    uint32_t made = 0;
    uint32_t slot_id[WIDE_SLOTS];
    ordo_buffer_t *handles[WIDE_SLOTS];
    for (uint32_t s = 0; s < WIDE_SLOTS; ++s) {
        slot_id[s] = wide_buffer_new(tracker, rng, all, version, &made, &handles[s]);
    }
    _Atomic uint64_t errors = 0;
    wide_task_t *tasks = calloc(submissions, sizeof *tasks);
    uint64_t next_version = 2;
    uint32_t released = 0;
    for (uint32_t k = 0; k < submissions; ++k) {
        if (test_rand(rng) % 8 == 0) {
            /* Release one buffer while its uses may still run, and reuse
             * its slot for a new one. */
            uint32_t s = (uint32_t)(test_rand(rng) % WIDE_SLOTS);
            assert_ok(ordo_buffer_release(handles[s], reclaim_wide, all[slot_id[s]]));
            released++;
            slot_id[s] = wide_buffer_new(tracker, rng, all, version, &made, &handles[s]);
        }
        uint32_t stream = (uint32_t)(test_rand(rng) % h.streams);
        size_t count = (size_t)(test_rand(rng) % (MAX_ACCESSES + 1));
        ordo_access_t accesses[MAX_ACCESSES];
        model_access_t modeled[MAX_ACCESSES];
        wide_task_t *t = &tasks[k];
        t->base.errors = &errors;
        t->base.spin = (unsigned)(test_rand(rng) % 1000);
        t->fail = failures && test_rand(rng) % 24 == 0;
        for (size_t a = 0; a < count; ++a) {
            uint32_t s = (uint32_t)(test_rand(rng) % WIDE_SLOTS);
            uint32_t id = slot_id[s];
            ordo_access_mode_t mode = (ordo_access_mode_t)(1 + test_rand(rng) % 3);
            size_t seen = 0;
            while (seen < t->base.count && modeled[seen].buffer != id) {
                ++seen;
            }
            if (seen < t->base.count) {
                modeled[seen].mode |= mode;
            } else {
                t->base.data[t->base.count] = &all[id]->d;
                t->owners[t->base.count] = all[id];
                modeled[t->base.count] = (model_access_t){id, mode};
                t->base.count++;
            }
            accesses[a] = (ordo_access_t){handles[s], mode};
        }
        uint64_t before[MAX_ACCESSES];
        for (size_t a = 0; a < t->base.count; ++a) {
            uint32_t id = modeled[a].buffer;
            before[a] = version[id];
            t->base.expect[a] = version[id];
            t->base.stamp[a] = (modeled[a].mode & ORDO_ACCESS_WRITE) ? next_version++ : 0;
            if (t->base.stamp[a]) {
                version[id] = t->base.stamp[a];
            }
        }
        t->stream = stream;
        memcpy(t->modeled, modeled, t->base.count * sizeof *modeled);
        model_begin(h.model, stream, modeled, t->base.count);
        ordo_stream_t *on = h.program[stream];
        if (test_rand(rng) % 3 == 0) {
            if (refused_by_failure(ordo_tracker_prepare(tracker, on, accesses, count), on,
                                   h.model)) {
                restore_versions(version, modeled, before, t->base.count);
                continue;
            }
            ordo_status_t st = ordo_stream_host_task(on, run_wide_task, t);
            if (st != ORDO_OK && ordo_stream_status(on) == ORDO_OK) {
                print_error("refused on a healthy stream: %s (%s)\n", ordo_status_name(st),
                            ordo_error_message());
                fail();
            }
            /* A prepare is ended all the same, its work enqueued or not
             * (ordo/tracker.h): to the model, a task accepted on a stream
             * that then failed, whose work never runs. */
            assert_ok(ordo_tracker_finish(tracker, on, accesses, count));
        } else if (refused_by_failure(
                       ordo_tracker_submit(tracker, on, accesses, count, launch_wide_task, t), on,
                       h.model)) {
            restore_versions(version, modeled, before, t->base.count);
            continue;
        }
        model_end(h.model);
        t->accepted = 1;
    }
    for (uint32_t s = 0; s < WIDE_SLOTS; ++s) {
        assert_ok(ordo_buffer_release(handles[s], reclaim_wide, all[slot_id[s]]));
    }
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    for (uint32_t i = 0; i < h.streams; ++i) {
        ordo_status_t st = ordo_stream_synchronize(h.program[i], test_deadline());
        if (!failures || st != ORDO_ERR_ABORTED) {
            assert_ok(st);
        }
    }
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_ok(ordo_tracker_destroy(tracker));
    int failed = 0;
    const char *why = NULL;
    if (model_violations(h.model, &why)) {
        print_error("model: %s\n", why);
        failed = 1;
    }
    if (atomic_load(&errors)) {
        print_error("data: %llu task(s) saw a wrong version or reclaimed memory\n",
                    (unsigned long long)atomic_load(&errors));
        failed = 1;
    }
    if (!ran_in_order(tasks, submissions)) {
        failed = 1;
    }
    if (m.reclamations_done != made || (!failures && m.submissions != submissions) ||
        m.buffers_live != 0) {
        print_error("metrics: %llu reclaimed of %u, %llu submissions of %u, %llu live\n",
                    (unsigned long long)m.reclamations_done, made,
                    (unsigned long long)m.submissions, submissions,
                    (unsigned long long)m.buffers_live);
        failed = 1;
    }
    for (uint32_t i = 0; i < made; ++i) {
        if (!atomic_load(&all[i]->reclaimed) || (!failures && all[i]->d.version != version[i])) {
            print_error("buffer %u: reclaimed %d, version %llu, expected %llu\n", i,
                        atomic_load(&all[i]->reclaimed), (unsigned long long)all[i]->d.version,
                        (unsigned long long)version[i]);
            failed = 1;
        }
        free(all[i]);
    }
    (void)released;
    if (failures) {
        for (uint32_t i = 0; i < h.streams; ++i) {
            assert_ok(ordo_stream_destroy(fresh[i]));
        }
    }
    totals->programs++;
    totals->submissions += m.submissions;
    totals->waits += m.waits_emitted;
    totals->elided += m.waits_elided;
    model_free(h.model);
    free(tasks);
    free(all);
    free(version);
    return failed;
}

/* Runs programs wide programs from seed (salted), on pool's streams or,
 * with pool NULL, on fresh streams with failing tasks, until stop; a failed
 * one fails the test with how to reproduce it (the count's variable). */
static void run_wide_programs(ordo_device_t *device, ordo_stream_t **pool, uint64_t seed,
                              uint64_t salt, uint64_t programs, ordo_deadline_t stop,
                              const char *count_env, totals_t *totals) {
    for (uint64_t p = 0; p < programs && ordo_time_now_ns() < stop; ++p) {
        uint64_t rng = seed ^ (p * 0x9e3779b97f4a7c15ull) ^ salt;
        if (run_wide_program(device, pool, &rng, totals)) {
            fail_msg("%s program %llu failed; reproduce with ORDO_MODEL_SEED=%llu %s=%llu",
                     pool ? "wide" : "failing", (unsigned long long)p, (unsigned long long)seed,
                     count_env, (unsigned long long)(p + 1));
        }
    }
}

static void wide_programs_match_the_model(void **state) {
    (void)state;
    ordo_device_t *device;
    assert_ok(ordo_device_open(test_device_name(), &device));
    ordo_stream_t *pool[WIDE_STREAMS];
    for (int s = 0; s < (int)WIDE_STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &pool[s]));
    }
    uint64_t seed = env_u64("ORDO_MODEL_SEED", 0x77696465ull);
    uint64_t programs = env_u64("ORDO_MODEL_PROGRAMS", test_device_scaled(1000));
    uint64_t seconds = env_u64("ORDO_MODEL_SECONDS", 60);
    ordo_deadline_t stop = ordo_deadline_after_ms(seconds * 1000);
    totals_t totals = {0};
    run_wide_programs(device, pool, seed, 1, programs, stop, "ORDO_MODEL_PROGRAMS", &totals);
    print_message("  %llu programs, %llu submissions, %llu waits emitted, %llu elided\n",
                  (unsigned long long)totals.programs, (unsigned long long)totals.submissions,
                  (unsigned long long)totals.waits, (unsigned long long)totals.elided);
    assert_true(totals.programs >= 1);
    /* With failing tasks: fresh streams for each program. */
    totals = (totals_t){0};
    programs = env_u64("ORDO_MODEL_FAILING", test_device_scaled(300));
    run_wide_programs(device, NULL, seed, 2, programs, stop, "ORDO_MODEL_FAILING", &totals);
    print_message("  %llu programs with failures, %llu submissions, %llu waits emitted\n",
                  (unsigned long long)totals.programs, (unsigned long long)totals.submissions,
                  (unsigned long long)totals.waits);
    for (int s = 0; s < (int)WIDE_STREAMS; ++s) {
        assert_ok(ordo_stream_destroy(pool[s]));
    }
    assert_ok(ordo_device_release(device));
}

/* ---- several submitting threads, serialised by the tracker's lock -------- */

#define LOCKED_THREADS 3
#define LOCKED_STREAMS 10
#define LOCKED_PER_THREAD 400

typedef struct locked_program {
    ordo_tracker_t *tracker;
    wide_harness_t h;
    wide_data_t **all;
    uint64_t *version;
    uint32_t made;
    uint32_t slot_id[WIDE_SLOTS];
    ordo_buffer_t *handles[WIDE_SLOTS];
    wide_task_t *tasks;
    uint32_t next_task;
    uint64_t next_version;
    _Atomic uint64_t errors;     /* what the tasks saw */
    _Atomic uint64_t refusals;   /* calls refused on the submitting threads */
    _Atomic uint32_t first_done; /* submissions of the first thread */
} locked_program_t;

typedef struct locked_thread locked_thread_t;

struct locked_thread {
    locked_program_t *p;
    uint64_t rng;
    int first; /* the others start once it has submitted alone for a while */
};

static wide_data_t *locked_new_data(locked_program_t *p, uint64_t *rng) {
    wide_data_t *d = calloc(1, sizeof *d);
    d->d.version = p->version[p->made] = 1;
    d->d.words = 1 + (uint32_t)(test_rand(rng) % 8);
    for (uint32_t i = 0; i < d->d.words; ++i) {
        d->d.data[i] = pattern(1, i);
    }
    p->all[p->made] = d;
    return d;
}

static void *locked_submitter(void *arg) {
    locked_thread_t *th = arg;
    locked_program_t *p = th->p;
    /* The first thread takes the lock alone for a while (the lock may
     * then favour it), and the others take it from it. */
    ordo_deadline_t deadline = test_deadline();
    while (!th->first && atomic_load(&p->first_done) < LOCKED_PER_THREAD / 2 &&
           ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    for (uint32_t k = 0; k < LOCKED_PER_THREAD; ++k) {
        if (ordo_tracker_lock(p->tracker) != ORDO_OK) {
            atomic_fetch_add(&p->refusals, 1);
            return NULL;
        }
        if (test_rand(&th->rng) % 8 == 0) {
            uint32_t s = (uint32_t)(test_rand(&th->rng) % WIDE_SLOTS);
            if (ordo_buffer_release(p->handles[s], reclaim_wide, p->all[p->slot_id[s]]) !=
                ORDO_OK) {
                atomic_fetch_add(&p->refusals, 1);
            }
            locked_new_data(p, &th->rng);
            p->slot_id[s] = p->made++;
            if (ordo_buffer_create(p->tracker, &p->handles[s]) != ORDO_OK) {
                atomic_fetch_add(&p->refusals, 1);
            }
        }
        uint32_t stream = (uint32_t)(test_rand(&th->rng) % p->h.streams);
        size_t count = (size_t)(test_rand(&th->rng) % (MAX_ACCESSES + 1));
        ordo_access_t accesses[MAX_ACCESSES];
        wide_task_t *t = &p->tasks[p->next_task++];
        t->base.errors = &p->errors;
        t->base.spin = (unsigned)(test_rand(&th->rng) % 1000);
        t->stream = stream;
        for (size_t a = 0; a < count; ++a) {
            uint32_t s = (uint32_t)(test_rand(&th->rng) % WIDE_SLOTS);
            uint32_t id = p->slot_id[s];
            ordo_access_mode_t mode = (ordo_access_mode_t)(1 + test_rand(&th->rng) % 3);
            size_t seen = 0;
            while (seen < t->base.count && t->modeled[seen].buffer != id) {
                ++seen;
            }
            if (seen < t->base.count) {
                t->modeled[seen].mode |= mode;
            } else {
                t->base.data[t->base.count] = &p->all[id]->d;
                t->owners[t->base.count] = p->all[id];
                t->modeled[t->base.count] = (model_access_t){id, mode};
                t->base.count++;
            }
            accesses[a] = (ordo_access_t){p->handles[s], mode};
        }
        for (size_t a = 0; a < t->base.count; ++a) {
            uint32_t id = t->modeled[a].buffer;
            t->base.expect[a] = p->version[id];
            t->base.stamp[a] = (t->modeled[a].mode & ORDO_ACCESS_WRITE) ? p->next_version++ : 0;
            if (t->base.stamp[a]) {
                p->version[id] = t->base.stamp[a];
            }
        }
        model_begin(p->h.model, stream, t->modeled, t->base.count);
        if (ordo_tracker_submit(p->tracker, p->h.program[stream], accesses, count, launch_wide_task,
                                t) != ORDO_OK) {
            atomic_fetch_add(&p->refusals, 1);
        }
        model_end(p->h.model);
        t->accepted = 1;
        if (ordo_tracker_unlock(p->tracker) != ORDO_OK) {
            atomic_fetch_add(&p->refusals, 1);
        }
        if (th->first) {
            atomic_fetch_add(&p->first_done, 1);
        }
    }
    return NULL;
}

static void locked_threads_match_the_model(void **state) {
    (void)state;
    ordo_device_t *device;
    assert_ok(ordo_device_open(test_device_name(), &device));
    locked_program_t p = {0};
    p.h.streams = LOCKED_STREAMS;
    for (uint32_t s = 0; s < LOCKED_STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &p.h.program[s]));
    }
    uint32_t submissions = LOCKED_THREADS * LOCKED_PER_THREAD;
    assert_ok(ordo_tracker_create(device, &p.tracker));
    p.h.model = model_create(LOCKED_STREAMS, submissions);
    assert_ok(ordo__tracker_set_wait_observer(p.tracker, on_wide_wait, &p.h));
    p.all = calloc(WIDE_SLOTS + submissions, sizeof *p.all);
    p.version = calloc(WIDE_SLOTS + submissions, sizeof *p.version);
    p.tasks = calloc(submissions, sizeof *p.tasks);
    p.next_version = 2;
    uint64_t rng = 0x6c6f636b6564ull;
    for (uint32_t s = 0; s < WIDE_SLOTS; ++s) {
        locked_new_data(&p, &rng);
        p.slot_id[s] = p.made++;
        assert_ok(ordo_buffer_create(p.tracker, &p.handles[s]));
    }
    locked_thread_t threads[LOCKED_THREADS];
    pthread_t ids[LOCKED_THREADS];
    for (int i = 0; i < LOCKED_THREADS; ++i) {
        threads[i] = (locked_thread_t){&p, rng ^ (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull, i == 0};
        ids[i] = test_thread_start(locked_submitter, &threads[i]);
    }
    for (int i = 0; i < LOCKED_THREADS; ++i) {
        pthread_join(ids[i], NULL);
    }
    for (uint32_t s = 0; s < WIDE_SLOTS; ++s) {
        assert_ok(ordo_buffer_release(p.handles[s], reclaim_wide, p.all[p.slot_id[s]]));
    }
    assert_ok(ordo_tracker_drain(p.tracker, test_deadline()));
    for (uint32_t s = 0; s < LOCKED_STREAMS; ++s) {
        assert_ok(ordo_stream_synchronize(p.h.program[s], test_deadline()));
    }
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(p.tracker, &m));
    assert_ok(ordo_tracker_destroy(p.tracker));
    const char *why = NULL;
    if (model_violations(p.h.model, &why)) {
        fail_msg("model: %s", why);
    }
    assert_int_equal(atomic_load(&p.refusals), 0);
    assert_int_equal(atomic_load(&p.errors), 0);
    assert_true(ran_in_order(p.tasks, submissions));
    assert_int_equal(m.submissions, submissions);
    assert_int_equal(m.reclamations_done, p.made);
    for (uint32_t i = 0; i < p.made; ++i) {
        assert_true(atomic_load(&p.all[i]->reclaimed));
        assert_int_equal(p.all[i]->d.version, p.version[i]);
        free(p.all[i]);
    }
    model_free(p.h.model);
    free(p.all);
    free(p.version);
    free(p.tasks);
    for (uint32_t s = 0; s < LOCKED_STREAMS; ++s) {
        assert_ok(ordo_stream_destroy(p.h.program[s]));
    }
    assert_ok(ordo_device_release(device));
}

/* ---- reclamation: released buffers outlive every use ------------------- */

typedef struct heap_buffer {
    uint64_t *words; /* freed by the reclaim callback */
    uint32_t count;
    _Atomic uint64_t *reclaimed;
} heap_buffer_t;

typedef struct heap_task {
    heap_buffer_t *targets[2];
    size_t count;
    unsigned spin;
} heap_task_t;

static ordo_status_t touch_heap(void *ctx) {
    heap_task_t *t = ctx;
    for (volatile unsigned i = 0; i < t->spin; ++i) {
    }
    for (size_t a = 0; a < t->count; ++a) {
        heap_buffer_t *b = t->targets[a];
        for (uint32_t i = 0; i < b->count; ++i) {
            b->words[i] += i; /* ASan reports this if the memory is gone */
        }
    }
    return ORDO_OK;
}

static ordo_status_t launch_heap(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, touch_heap, ctx);
}

static void reclaim_heap(void *ctx) {
    heap_buffer_t *b = ctx;
    free(b->words);
    atomic_fetch_add(b->reclaimed, 1);
    free(b);
}

static void released_buffers_outlive_their_uses(void **state) {
    (void)state;
    ordo_device_t *device;
    assert_ok(ordo_device_open(test_device_name(), &device));
    ordo_stream_t *streams[MAX_STREAMS];
    for (int s = 0; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &streams[s]));
    }
    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(device, &tracker));
    _Atomic uint64_t reclaimed = 0;
    uint64_t created = 0;
    uint64_t rng = 0x5eed5eed5eedull;
    ordo_buffer_t *live[MAX_BUFFERS] = {0};
    heap_buffer_t *heap[MAX_BUFFERS] = {0};
    uint64_t rounds = test_device_scaled(20000);
    heap_task_t *tasks = calloc(rounds, sizeof *tasks);
    for (uint64_t k = 0; k < rounds; ++k) {
        uint32_t b = (uint32_t)(test_rand(&rng) % MAX_BUFFERS);
        if (!live[b]) {
            heap[b] = calloc(1, sizeof *heap[b]);
            heap[b]->count = 1 + (uint32_t)(test_rand(&rng) % 32);
            heap[b]->words = calloc(heap[b]->count, sizeof(uint64_t));
            heap[b]->reclaimed = &reclaimed;
            assert_ok(ordo_buffer_create(tracker, &live[b]));
            created++;
        }
        if (test_rand(&rng) % 8 == 0) {
            /* Released while tasks on other streams may still use it. */
            assert_ok(ordo_buffer_release(live[b], reclaim_heap, heap[b]));
            live[b] = NULL;
            continue;
        }
        heap_task_t *t = &tasks[k];
        t->spin = (unsigned)(test_rand(&rng) % 3000);
        t->targets[t->count++] = heap[b];
        ordo_access_t accesses[2] = {{live[b], ORDO_ACCESS_READ_WRITE}};
        uint32_t other = (uint32_t)(test_rand(&rng) % MAX_BUFFERS);
        if (live[other] && other != b) {
            t->targets[t->count++] = heap[other];
            accesses[1] = (ordo_access_t){live[other], ORDO_ACCESS_READ_WRITE};
        }
        ordo_stream_t *stream = streams[test_rand(&rng) % MAX_STREAMS];
        assert_ok(ordo_tracker_submit(tracker, stream, accesses, t->count, launch_heap, t));
    }
    for (int b = 0; b < MAX_BUFFERS; ++b) {
        if (live[b]) {
            assert_ok(ordo_buffer_release(live[b], reclaim_heap, heap[b]));
        }
    }
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_int_equal(atomic_load(&reclaimed), created);
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    print_message("  %llu buffers created, %llu reclaimed\n", (unsigned long long)created,
                  (unsigned long long)m.reclamations_done);
    assert_ok(ordo_tracker_destroy(tracker));
    for (int s = 0; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_stream_synchronize(streams[s], test_deadline()));
        assert_ok(ordo_stream_destroy(streams[s]));
    }
    free(tasks);
    assert_ok(ordo_device_release(device));
}

/* A wait that goes through a later record than its need, for a third
 * stream: once stream A's record at its point 1 is forgotten (more than
 * eight records since), the record covering A's point 1 knows stream D,
 * which A waited for after point 1. A write of x (A's, read on B) and a
 * read of z (D's) on C need A, B and D: B's record covers A's need but not
 * D's; A's later record covers D's. Two waits, A through its later record
 * and B, both needed, and the model agrees. */
#define DIRECTED_STREAMS 5

typedef struct directed {
    ordo_stream_t *streams[DIRECTED_STREAMS];
    model_t *model;
    ordo_tracker_t *tracker;
    uint64_t waits;
    uint64_t through_later; /* waits whose record is past their need */
} directed_t;

static uint32_t directed_index(const directed_t *d, const ordo_stream_t *s) {
    for (uint32_t i = 0; i < DIRECTED_STREAMS; ++i) {
        if (d->streams[i] == s) {
            return i;
        }
    }
    return UINT32_MAX;
}

static void on_directed_wait(void *ctx, ordo_stream_t *waiting, ordo_stream_t *origin,
                             uint64_t origin_point, uint64_t needed_point) {
    directed_t *d = ctx;
    d->waits++;
    d->through_later += origin_point > needed_point;
    model_on_wait(d->model, directed_index(d, waiting), directed_index(d, origin), origin_point,
                  needed_point);
}

static ordo_status_t directed_noop(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t directed_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, directed_noop, ctx);
}

static void directed_submit(directed_t *d, uint32_t stream, ordo_buffer_t *const *handles,
                            const uint32_t *buffers, const ordo_access_mode_t *modes,
                            size_t count) {
    ordo_access_t accesses[4];
    model_access_t modeled[4];
    for (size_t i = 0; i < count; ++i) {
        accesses[i] = (ordo_access_t){handles[buffers[i]], modes[i]};
        modeled[i] = (model_access_t){buffers[i], modes[i]};
    }
    model_begin(d->model, stream, modeled, count);
    assert_ok(ordo_tracker_submit(d->tracker, d->streams[stream], accesses, count, directed_launch,
                                  NULL));
    model_end(d->model);
}

static void a_wait_through_a_later_record_is_needed(void **state) {
    (void)state;
    enum { A, B, C, D, E, STREAMS };
    _Static_assert(STREAMS == DIRECTED_STREAMS, "one stream each");
    enum { X, Z, W, BUFFERS };
    ordo_device_t *device;
    assert_ok(ordo_device_open("cpu", &device));
    directed_t d = {0};
    assert_ok(ordo_tracker_create(device, &d.tracker));
    for (uint32_t s = 0; s < STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &d.streams[s]));
    }
    d.model = model_create(STREAMS, 64);
    assert_ok(ordo__tracker_set_wait_observer(d.tracker, on_directed_wait, &d));
    ordo_buffer_t *handles[BUFFERS];
    for (uint32_t b = 0; b < BUFFERS; ++b) {
        assert_ok(ordo_buffer_create(d.tracker, &handles[b]));
    }
    const ordo_access_mode_t r = ORDO_ACCESS_READ, w = ORDO_ACCESS_WRITE;
    const ordo_access_mode_t rw[2] = {ORDO_ACCESS_WRITE, ORDO_ACCESS_READ};
    directed_submit(&d, D, handles, (uint32_t[]){Z}, &w, 1);
    directed_submit(&d, A, handles, (uint32_t[]){X}, &w, 1);
    directed_submit(&d, B, handles, (uint32_t[]){X}, &r, 1); /* records A's point 1 */
    directed_submit(&d, A, handles, (uint32_t[]){Z}, &r, 1); /* A now knows D */
    for (int i = 0; i < 9; ++i) {                            /* nine later records of A */
        directed_submit(&d, A, handles, (uint32_t[]){W}, &w, 1);
        directed_submit(&d, E, handles, (uint32_t[]){W}, &r, 1);
    }
    uint64_t before = d.waits, later = d.through_later;
    directed_submit(&d, C, handles, (uint32_t[]){X, Z}, rw, 2);
    assert_int_equal(d.waits - before, 2);
    assert_int_equal(d.through_later - later, 1); /* A's, through a later record */
    const char *first = NULL;
    size_t violations = model_violations(d.model, &first);
    if (violations) {
        fail_msg("%zu violations; first: %s", violations, first);
    }
    for (uint32_t b = 0; b < BUFFERS; ++b) {
        assert_ok(ordo_buffer_release(handles[b], NULL, NULL));
    }
    assert_ok(ordo_tracker_synchronize(d.tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(d.tracker));
    for (uint32_t s = 0; s < STREAMS; ++s) {
        assert_ok(ordo_stream_destroy(d.streams[s]));
    }
    model_free(d.model);
    assert_ok(ordo_device_release(device));
}

int main(void) {
    test_conformance_begin("tracker-model");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_programs_match_the_model),
        cmocka_unit_test(wide_programs_match_the_model),
        cmocka_unit_test(locked_threads_match_the_model),
        cmocka_unit_test(released_buffers_outlive_their_uses),
        cmocka_unit_test(a_wait_through_a_later_record_is_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
