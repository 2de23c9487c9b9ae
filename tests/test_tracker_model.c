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
    assert_ok(ordo_tracker_set_wait_observer(tracker, on_wait, h));

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
        assert_ok(ordo_submit(tracker, h->streams[stream], accesses, count, launch_task, t));
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
    assert_ok(ordo_device_open("cpu", &device));
    harness_t h = {0};
    for (int s = 0; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_stream_create(device, 0, &h.streams[s]));
    }
    uint64_t seed = env_u64("ORDO_MODEL_SEED", 0x6f72646f2d6d6f64ull);
    uint64_t programs = env_u64("ORDO_MODEL_PROGRAMS", test_scaled(10000));
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
    assert_ok(ordo_device_open("cpu", &device));
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
    uint64_t rounds = test_scaled(20000);
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
        assert_ok(ordo_submit(tracker, stream, accesses, t->count, launch_heap, t));
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_programs_match_the_model),
        cmocka_unit_test(released_buffers_outlive_their_uses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
