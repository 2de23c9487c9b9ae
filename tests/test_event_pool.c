/* The generic event pool (src/hal/event_pool.h) over a fake backend that
 * counts its live events: growth policy, the maximum, exact statistics,
 * trimming, refusals of bad input, backend failures, and threads - many at
 * once, exiting with cached events, releasing the same event together.
 * Every wait has a deadline. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/event_pool.h"
#include "test_util.h"

/* ---- a fake backend ---------------------------------------------------- */

#define FAKE_MAGIC 0x46414b45u /* "FAKE" */
#define FAKE_DEAD 0x44454144u

typedef struct fake_backend {
    _Atomic long live;
    _Atomic long created;
    _Atomic long destroyed;
    _Atomic long fail_after; /* creations that still succeed; < 0: all */
    _Atomic int return_null; /* succeed but return no event */
    _Atomic int bad_destroys;
    ordo_event_kind_t kind;
} fake_backend_t;

typedef struct fake_event {
    uint32_t magic;
    ordo_event_kind_t kind;
    fake_backend_t *owner;
    _Atomic int holder; /* which test thread holds it; 0: nobody */
    char pad[40];
} fake_event_t;

static ordo_status_t fake_create(void *user, ordo_event_kind_t kind, void **out_event) {
    fake_backend_t *fake = user;
    long left = atomic_load(&fake->fail_after);
    while (left >= 0) {
        if (left == 0) {
            return ORDO_ERR_DEVICE;
        }
        if (atomic_compare_exchange_weak(&fake->fail_after, &left, left - 1)) {
            break;
        }
    }
    if (atomic_load(&fake->return_null)) {
        *out_event = NULL;
        return ORDO_OK;
    }
    fake_event_t *event = ordo__alloc(sizeof *event, 0);
    if (!event) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    event->magic = FAKE_MAGIC;
    event->kind = kind;
    event->owner = fake;
    atomic_fetch_add(&fake->live, 1);
    atomic_fetch_add(&fake->created, 1);
    *out_event = event;
    return ORDO_OK;
}

static void fake_destroy(void *user, void *object) {
    fake_backend_t *fake = user;
    fake_event_t *event = object;
    if (!event || event->magic != FAKE_MAGIC || event->owner != fake || event->kind != fake->kind ||
        atomic_load(&event->holder) != 0) {
        atomic_fetch_add(&fake->bad_destroys, 1);
        return;
    }
    event->magic = FAKE_DEAD;
    ordo__dealloc(event, sizeof *event, 0);
    atomic_fetch_sub(&fake->live, 1);
    atomic_fetch_add(&fake->destroyed, 1);
}

static void fake_init(fake_backend_t *fake, ordo_event_kind_t kind) {
    memset(fake, 0, sizeof *fake);
    atomic_store(&fake->fail_after, -1);
    fake->kind = kind;
}

static event_pool_backend_t fake_ops(fake_backend_t *fake) {
    event_pool_backend_t backend = {fake_create, fake_destroy, fake};
    return backend;
}

static event_pool_t *pool_make(fake_backend_t *fake, size_t initial, size_t growth,
                               size_t maximum) {
    event_pool_backend_t backend = fake_ops(fake);
    ordo_event_pool_config_t config = {initial, growth, maximum};
    event_pool_t *pool = NULL;
    assert_ok(ordo__event_pool_create(&backend, fake->kind, &config, &pool, "test"));
    assert_non_null(pool);
    return pool;
}

static ordo_event_pool_stats_t stats_of(event_pool_t *pool) {
    ordo_event_pool_stats_t stats;
    memset(&stats, 0xab, sizeof stats);
    assert_ok(ordo__event_pool_stats(pool, &stats));
    return stats;
}

static void *acquire_one(event_pool_t *pool, int expect_pooled) {
    void *event = NULL;
    int pooled = -1;
    assert_ok(ordo__event_pool_acquire(pool, &event, &pooled));
    assert_non_null(event);
    assert_int_equal(pooled, expect_pooled);
    return event;
}

/* Everything the pools allocated is back. */
static void assert_no_live_blocks(void) {
    size_t live = 1;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

static void pool_finish(event_pool_t *pool, fake_backend_t *fake) {
    assert_ok(ordo__event_pool_destroy(pool));
    assert_int_equal(atomic_load(&fake->live), 0);
    assert_int_equal(atomic_load(&fake->bad_destroys), 0);
    assert_no_live_blocks();
}

static void assert_message_mentions(const char *what) {
    if (!strstr(ordo_error_message(), what)) {
        fail_msg("message \"%s\" does not mention \"%s\"", ordo_error_message(), what);
    }
}

/* pthread_join bounded by a deadline in seconds. */
static void join_within(pthread_t thread, unsigned seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)seconds;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0) {
        fail_msg("a thread did not finish within %u s", seconds);
    }
}

/* Spins (politely) until *flag >= value or the test deadline passes. */
static int wait_flag(_Atomic int *flag, int value, ordo_deadline_t deadline) {
    unsigned spins = 0;
    while (atomic_load_explicit(flag, memory_order_acquire) < value) {
        if (ordo_time_now_ns() >= deadline) {
            return -1;
        }
        if (++spins % 64 == 0) {
            sched_yield();
        }
    }
    return 0;
}

/* ---- policy ----------------------------------------------------------- */

static void initial_events_are_created_up_front(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_TIMING);
    event_pool_t *pool = pool_make(&fake, 5, 3, 0);
    assert_int_equal(atomic_load(&fake.live), 5);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.available, 5);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.high_water, 0);
    assert_int_equal(s.created_total, 5);
    assert_int_equal(s.destroyed_total, 0);
    assert_int_equal(s.unpooled_created, 0);
    assert_int_equal(s.acquires, 0);
    assert_int_equal(s.releases, 0);
    fake_event_t *event = acquire_one(pool, 1);
    assert_int_equal(event->magic, FAKE_MAGIC);
    assert_int_equal(event->kind, ORDO_EVENT_TIMING);
    assert_int_equal(atomic_load(&fake.live), 5);
    assert_ok(ordo__event_pool_release(pool, event, 1));
    pool_finish(pool, &fake);
}

static void the_default_config_is_used_for_null(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_backend_t backend = fake_ops(&fake);
    event_pool_t *pool = NULL;
    assert_ok(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, NULL, &pool, "test"));
    ordo_event_pool_config_t defaults;
    assert_ok(ordo_event_pool_config_default(&defaults));
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.available, defaults.initial);
    assert_int_equal(s.created_total, ORDO_EVENT_POOL_DEFAULT_INITIAL);
    assert_true(defaults.growth >= 1);
    assert_int_equal(defaults.maximum, 0);
    pool_finish(pool, &fake);
}

static void growth_creates_a_batch_when_empty(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 0, 4, 0);
    assert_int_equal(atomic_load(&fake.live), 0);
    void *held[9];
    held[0] = acquire_one(pool, 1);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.created_total, 4);
    assert_int_equal(s.available, 3);
    assert_int_equal(s.in_use, 1);
    for (int i = 1; i < 4; ++i) {
        held[i] = acquire_one(pool, 1);
    }
    s = stats_of(pool);
    assert_int_equal(s.created_total, 4);
    assert_int_equal(s.available, 0);
    held[4] = acquire_one(pool, 1);
    s = stats_of(pool);
    assert_int_equal(s.created_total, 8);
    assert_int_equal(s.available, 3);
    assert_int_equal(s.in_use, 5);
    for (int i = 0; i < 5; ++i) {
        for (int j = 0; j < i; ++j) {
            assert_ptr_not_equal(held[i], held[j]);
        }
    }
    for (int i = 0; i < 5; ++i) {
        assert_ok(ordo__event_pool_release(pool, held[i], 1));
    }
    s = stats_of(pool);
    assert_int_equal(s.available, 8);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.high_water, 5);
    assert_int_equal(s.acquires, 5);
    assert_int_equal(s.releases, 5);
    assert_int_equal(atomic_load(&fake.live), 8);
    pool_finish(pool, &fake);
}

static void maximum_bounds_pooled_events_and_counts_unpooled(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 2, 4, 5);
    void *pooled[5];
    for (int i = 0; i < 5; ++i) {
        pooled[i] = acquire_one(pool, 1);
        ordo_event_pool_stats_t s = stats_of(pool);
        assert_true(s.created_total - s.unpooled_created <= 5);
    }
    assert_int_equal(atomic_load(&fake.live), 5);
    void *extra[2];
    extra[0] = acquire_one(pool, 0);
    extra[1] = acquire_one(pool, 0);
    assert_int_equal(atomic_load(&fake.live), 7);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.created_total, 7);
    assert_int_equal(s.unpooled_created, 2);
    assert_int_equal(s.in_use, 7);
    assert_int_equal(s.high_water, 7);
    assert_int_equal(s.available, 0);
    /* Unpooled events are destroyed on release. */
    assert_ok(ordo__event_pool_release(pool, extra[1], 0));
    assert_int_equal(atomic_load(&fake.live), 6);
    assert_ok(ordo__event_pool_release(pool, extra[0], 0));
    s = stats_of(pool);
    assert_int_equal(s.unpooled_destroyed, 2);
    assert_int_equal(s.destroyed_total, 2);
    assert_int_equal(s.in_use, 5);
    for (int i = 0; i < 5; ++i) {
        assert_ok(ordo__event_pool_release(pool, pooled[i], 1));
    }
    s = stats_of(pool);
    assert_int_equal(s.available, 5);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.high_water, 7);
    /* Back under the maximum: pooled again, nothing new created. */
    void *again = acquire_one(pool, 1);
    assert_int_equal(stats_of(pool).created_total, 7);
    assert_ok(ordo__event_pool_release(pool, again, 1));
    assert_int_equal(atomic_load(&fake.live), 5);
    pool_finish(pool, &fake);
}

/* A random single-threaded run checked after every step against a model
 * of the policy. */
static void stats_are_exact_after_every_step(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    const size_t growth = 3;
    event_pool_t *pool = pool_make(&fake, 4, growth, 0);
    struct {
        size_t available, in_use, high_water;
        uint64_t created, destroyed, acquires, releases;
    } m = {4, 0, 0, 4, 0, 0, 0};
    void *held[40];
    size_t count = 0;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < 4000; ++step) {
        uint64_t r = test_rand(&rng);
        if (r % 97 == 0) {
            size_t keep = (size_t)(r >> 8) % 6;
            assert_ok(ordo__event_pool_trim(pool, keep));
            if (m.available > keep) {
                m.destroyed += m.available - keep;
                m.available = keep;
            }
        } else if (count < 40 && (count == 0 || (r >> 16) % 100 < 52)) {
            held[count++] = acquire_one(pool, 1);
            if (m.available == 0) {
                m.created += growth;
                m.available += growth;
            }
            m.available--;
            m.in_use++;
            m.acquires++;
            m.high_water = m.in_use > m.high_water ? m.in_use : m.high_water;
        } else {
            size_t pick = (size_t)(r >> 24) % count;
            assert_ok(ordo__event_pool_release(pool, held[pick], 1));
            held[pick] = held[--count];
            m.available++;
            m.in_use--;
            m.releases++;
        }
        ordo_event_pool_stats_t s = stats_of(pool);
        assert_int_equal(s.available, m.available);
        assert_int_equal(s.in_use, m.in_use);
        assert_int_equal(s.high_water, m.high_water);
        assert_int_equal(s.created_total, m.created);
        assert_int_equal(s.destroyed_total, m.destroyed);
        assert_int_equal(s.acquires, m.acquires);
        assert_int_equal(s.releases, m.releases);
        assert_int_equal(s.unpooled_created, 0);
        assert_int_equal(atomic_load(&fake.live), (long)(m.created - m.destroyed));
    }
    while (count) {
        assert_ok(ordo__event_pool_release(pool, held[--count], 1));
    }
    pool_finish(pool, &fake);
}

static void trim_destroys_available_events_beyond_keep(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 10, 4, 0);
    void *held[3];
    for (int i = 0; i < 3; ++i) {
        held[i] = acquire_one(pool, 1);
    }
    assert_ok(ordo__event_pool_trim(pool, 4));
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.available, 4);
    assert_int_equal(s.destroyed_total, 3);
    assert_int_equal(s.in_use, 3);
    assert_int_equal(atomic_load(&fake.live), 7);
    assert_ok(ordo__event_pool_trim(pool, 100)); /* nothing beyond 100 */
    assert_int_equal(stats_of(pool).available, 4);
    assert_ok(ordo__event_pool_trim(pool, 0));
    s = stats_of(pool);
    assert_int_equal(s.available, 0);
    assert_int_equal(s.destroyed_total, 7);
    assert_int_equal(atomic_load(&fake.live), 3);
    /* Held events are untouched, and come back as usual. */
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo__event_pool_release(pool, held[i], 1));
    }
    assert_int_equal(stats_of(pool).available, 3);
    /* A trimmed pool grows again. */
    void *more[5];
    for (int i = 0; i < 5; ++i) {
        more[i] = acquire_one(pool, 1);
    }
    s = stats_of(pool);
    assert_int_equal(s.created_total, 14);
    assert_int_equal(s.available, 2);
    for (int i = 0; i < 5; ++i) {
        assert_ok(ordo__event_pool_release(pool, more[i], 1));
    }
    pool_finish(pool, &fake);
}

static void destroy_is_refused_while_events_are_in_use(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 1, 1, 1);
    void *pooled = acquire_one(pool, 1);
    assert_status(ordo__event_pool_destroy(pool), ORDO_ERR_BUSY);
    assert_message_mentions("ordo__event_pool_destroy");
    assert_message_mentions("in use");
    void *unpooled = acquire_one(pool, 0);
    assert_ok(ordo__event_pool_release(pool, pooled, 1));
    assert_status(ordo__event_pool_destroy(pool), ORDO_ERR_BUSY); /* the unpooled one */
    /* The refusal changed nothing. */
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.in_use, 1);
    assert_int_equal(s.available, 1);
    assert_ok(ordo__event_pool_release(pool, unpooled, 0));
    pool_finish(pool, &fake);
}

/* ---- bad input --------------------------------------------------------- */

static void bad_input_to_create_is_refused(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_backend_t backend = fake_ops(&fake);
    ordo_event_pool_config_t config = {2, 2, 0};
    event_pool_t *pool = (event_pool_t *)&fake; /* must be overwritten */
    assert_status(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, NULL, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("out_pool");
    assert_status(ordo__event_pool_create(NULL, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_null(pool);
    event_pool_backend_t half = {fake_create, NULL, &fake};
    assert_status(ordo__event_pool_create(&half, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    half = (event_pool_backend_t){NULL, fake_destroy, &fake};
    assert_status(ordo__event_pool_create(&half, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo__event_pool_create(&backend, (ordo_event_kind_t)7, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("kind");
    config.growth = 0;
    assert_status(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("growth");
    config = (ordo_event_pool_config_t){6, 2, 5};
    assert_status(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("maximum");
    /* A count above its maximum is out of range (status.h). */
    config = (ordo_event_pool_config_t){SIZE_MAX, 2, 0};
    assert_status(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_null(pool);
    assert_int_equal(atomic_load(&fake.created), 0);
    assert_no_live_blocks();
}

static void bad_input_to_every_call_is_refused(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 2, 2, 3);
    void *event = NULL;
    int pooled = 0;
    ordo_event_pool_stats_t s;
    /* NULL and non-pool handles. */
    assert_status(ordo__event_pool_acquire(NULL, &event, &pooled), ORDO_ERR_INVALID_HANDLE);
    assert_message_mentions("ordo__event_pool_acquire");
    assert_status(ordo__event_pool_release(NULL, &fake, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo__event_pool_trim(NULL, 0), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo__event_pool_stats(NULL, &s), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo__event_pool_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    _Alignas(64) unsigned char not_a_pool[512] = {0};
    assert_status(ordo__event_pool_acquire((event_pool_t *)not_a_pool, &event, &pooled),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo__event_pool_destroy((event_pool_t *)not_a_pool), ORDO_ERR_INVALID_HANDLE);
    /* NULL out pointers. */
    assert_status(ordo__event_pool_acquire(pool, NULL, &pooled), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("out_event");
    assert_status(ordo__event_pool_acquire(pool, &event, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("out_pooled");
    assert_null(event);
    assert_status(ordo__event_pool_stats(pool, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("out_stats");
    /* Releases of what was not acquired here. */
    assert_status(ordo__event_pool_release(pool, NULL, 1), ORDO_ERR_INVALID_ARGUMENT);
    fake_event_t stranger = {.magic = FAKE_MAGIC, .owner = &fake};
    assert_status(ordo__event_pool_release(pool, &stranger, 1), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("not a live event");
    assert_status(ordo__event_pool_release(pool, &stranger, 0), ORDO_ERR_INVALID_ARGUMENT);
    fake_backend_t other_fake;
    fake_init(&other_fake, ORDO_EVENT_PLAIN);
    event_pool_t *other = pool_make(&other_fake, 1, 1, 0);
    void *foreign = acquire_one(other, 1);
    assert_status(ordo__event_pool_release(pool, foreign, 1), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo__event_pool_release(other, foreign, 1));
    /* An available (never acquired) event of this pool. */
    void *mine = acquire_one(pool, 1);
    assert_ok(ordo__event_pool_release(pool, mine, 1));
    assert_status(ordo__event_pool_release(pool, mine, 1), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("released twice");
    /* Double release, the wrong flag, a bad flag. */
    void *a = acquire_one(pool, 1);
    assert_status(ordo__event_pool_release(pool, a, 2), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo__event_pool_release(pool, a, 0), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("pooled 1");
    assert_ok(ordo__event_pool_release(pool, a, 1));
    assert_status(ordo__event_pool_release(pool, a, 1), ORDO_ERR_INVALID_ARGUMENT);
    void *held[3];
    for (int i = 0; i < 3; ++i) {
        held[i] = acquire_one(pool, 1);
    }
    void *u = acquire_one(pool, 0);
    assert_status(ordo__event_pool_release(pool, u, 1), ORDO_ERR_INVALID_ARGUMENT);
    assert_message_mentions("pooled 0");
    assert_ok(ordo__event_pool_release(pool, u, 0));
    assert_status(ordo__event_pool_release(pool, u, 0), ORDO_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo__event_pool_release(pool, held[i], 1));
        assert_status(ordo__event_pool_release(pool, held[i], 1), ORDO_ERR_INVALID_ARGUMENT);
    }
    /* None of the refusals counted or changed anything. */
    s = stats_of(pool);
    assert_int_equal(s.acquires, 6);
    assert_int_equal(s.releases, 6);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.available, 3);
    assert_int_equal(s.unpooled_created, 1);
    assert_int_equal(s.unpooled_destroyed, 1);
    assert_int_equal(atomic_load(&fake.live), 3);
    assert_ok(ordo__event_pool_destroy(other));
    assert_int_equal(atomic_load(&other_fake.live), 0);
    pool_finish(pool, &fake);
}

/* ---- backend failures ---------------------------------------------------- */

static void backend_failure_leaves_nothing_behind(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_backend_t backend = fake_ops(&fake);
    /* In create: the two made are destroyed again. */
    ordo_event_pool_config_t config = {5, 2, 0};
    atomic_store(&fake.fail_after, 2);
    event_pool_t *pool = (event_pool_t *)&fake;
    assert_status(ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &pool, "test"),
                  ORDO_ERR_DEVICE);
    assert_message_mentions("backend");
    assert_null(pool);
    assert_int_equal(atomic_load(&fake.created), 2);
    assert_int_equal(atomic_load(&fake.live), 0);
    assert_no_live_blocks();
    /* In growth: nothing made, nothing counted. */
    atomic_store(&fake.fail_after, -1);
    pool = pool_make(&fake, 0, 4, 6);
    atomic_store(&fake.fail_after, 0);
    void *event = &fake;
    int pooled = 7;
    assert_status(ordo__event_pool_acquire(pool, &event, &pooled), ORDO_ERR_DEVICE);
    assert_null(event);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.created_total, 0);
    assert_int_equal(s.acquires, 0);
    assert_int_equal(s.in_use, 0);
    /* A growth cut short keeps what was made, and the acquire that
     * succeeds with it leaves the caller's message (ordo/status.h). */
    atomic_store(&fake.fail_after, 2);
    void *held[6];
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    held[0] = acquire_one(pool, 1);
    assert_string_equal(ordo_error_message(), "the caller's own message");
    s = stats_of(pool);
    assert_int_equal(s.created_total, 2);
    assert_int_equal(s.available, 1);
    atomic_store(&fake.fail_after, -1);
    for (int i = 1; i < 6; ++i) {
        held[i] = acquire_one(pool, 1);
    }
    assert_int_equal(stats_of(pool).created_total, 6);
    /* Beyond the maximum: a failed unpooled creation counts nothing. */
    atomic_store(&fake.fail_after, 0);
    assert_status(ordo__event_pool_acquire(pool, &event, &pooled), ORDO_ERR_DEVICE);
    s = stats_of(pool);
    assert_int_equal(s.unpooled_created, 0);
    assert_int_equal(s.in_use, 6);
    /* A backend that says OK but returns nothing. */
    atomic_store(&fake.fail_after, -1);
    atomic_store(&fake.return_null, 1);
    assert_status(ordo__event_pool_acquire(pool, &event, &pooled), ORDO_ERR_INTERNAL);
    atomic_store(&fake.return_null, 0);
    for (int i = 0; i < 6; ++i) {
        assert_ok(ordo__event_pool_release(pool, held[i], 1));
    }
    s = stats_of(pool);
    assert_int_equal(s.available, 6);
    assert_int_equal(s.acquires, 6);
    assert_int_equal(atomic_load(&fake.live), 6);
    pool_finish(pool, &fake);
}

/* ---- threads ------------------------------------------------------------- */

typedef struct cycler {
    event_pool_t *pool;
    int holds;       /* acquire this many, release them, then exit */
    int keep_cached; /* exit right after: the events sit in the cache */
    _Atomic int *errors;
} cycler_t;

static void *cycle_and_exit(void *arg) {
    cycler_t *c = arg;
    void *held[16];
    for (int i = 0; i < c->holds; ++i) {
        int pooled;
        if (ordo__event_pool_acquire(c->pool, &held[i], &pooled) != ORDO_OK || pooled != 1) {
            atomic_fetch_add(c->errors, 1);
            return NULL;
        }
    }
    for (int i = 0; i < c->holds; ++i) {
        if (ordo__event_pool_release(c->pool, held[i], 1) != ORDO_OK) {
            atomic_fetch_add(c->errors, 1);
        }
    }
    return NULL;
}

static void exiting_threads_return_their_cached_events(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 0, 4, 0);
    _Atomic int errors = 0;
    cycler_t cyclers[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; ++i) {
        cyclers[i] = (cycler_t){pool, 3 + i, 1, &errors};
        threads[i] = test_thread_start(cycle_and_exit, &cyclers[i]);
    }
    for (int i = 0; i < 4; ++i) {
        join_within(threads[i], 10);
    }
    assert_int_equal(atomic_load(&errors), 0);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.acquires, 3 + 4 + 5 + 6);
    assert_int_equal(s.releases, 3 + 4 + 5 + 6);
    assert_int_equal(s.available, s.created_total);
    /* Threads that overlapped only had the peak sampled: bounds, no more. */
    assert_true(s.high_water >= 1 && s.high_water <= 18);
    /* Trim reaches only the depot and this thread's cache: that it empties
     * the pool proves the exited threads' caches came back. */
    assert_ok(ordo__event_pool_trim(pool, 0));
    assert_int_equal(stats_of(pool).available, 0);
    assert_int_equal(atomic_load(&fake.live), 0);
    /* Alone again, this thread's high-water mark is exact. */
    void *held[9];
    for (int i = 0; i < 9; ++i) {
        held[i] = acquire_one(pool, 1);
    }
    for (int i = 0; i < 9; ++i) {
        assert_ok(ordo__event_pool_release(pool, held[i], 1));
    }
    s = stats_of(pool);
    assert_true(s.high_water >= 9);
    pool_finish(pool, &fake);
}

typedef struct lingerer {
    event_pool_t *pool;
    fake_backend_t *fake2;
    _Atomic int used; /* 1: it cached events of pool */
    _Atomic int go;   /* 1: pool is destroyed, go on */
    _Atomic int errors;
} lingerer_t;

static void *use_then_linger(void *arg) {
    lingerer_t *l = arg;
    void *held[5];
    int pooled;
    for (int i = 0; i < 5; ++i) {
        if (ordo__event_pool_acquire(l->pool, &held[i], &pooled) != ORDO_OK) {
            atomic_fetch_add(&l->errors, 1);
            return NULL;
        }
    }
    for (int i = 0; i < 5; ++i) {
        if (ordo__event_pool_release(l->pool, held[i], 1) != ORDO_OK) {
            atomic_fetch_add(&l->errors, 1);
        }
    }
    atomic_store_explicit(&l->used, 1, memory_order_release);
    if (wait_flag(&l->go, 1, test_deadline()) != 0) {
        atomic_fetch_add(&l->errors, 1);
        return NULL;
    }
    /* The old pool is gone; a new one works on this thread as usual. */
    event_pool_backend_t backend = fake_ops(l->fake2);
    ordo_event_pool_config_t config = {1, 1, 0};
    event_pool_t *fresh;
    if (ordo__event_pool_create(&backend, ORDO_EVENT_PLAIN, &config, &fresh, "test") != ORDO_OK) {
        atomic_fetch_add(&l->errors, 1);
        return NULL;
    }
    for (int round = 0; round < 100; ++round) {
        void *event;
        if (ordo__event_pool_acquire(fresh, &event, &pooled) != ORDO_OK ||
            ordo__event_pool_release(fresh, event, pooled) != ORDO_OK) {
            atomic_fetch_add(&l->errors, 1);
        }
    }
    if (ordo__event_pool_destroy(fresh) != ORDO_OK) {
        atomic_fetch_add(&l->errors, 1);
    }
    return NULL;
}

static void destroy_reclaims_caches_of_living_threads(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_backend_t fake2;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    fake_init(&fake2, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 2, 2, 0);
    lingerer_t l = {.pool = pool, .fake2 = &fake2};
    pthread_t thread = test_thread_start(use_then_linger, &l);
    assert_int_equal(wait_flag(&l.used, 1, test_deadline()), 0);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.available, s.created_total);
    assert_ok(ordo__event_pool_destroy(pool)); /* the thread still has a cache */
    assert_int_equal(atomic_load(&fake.live), 0);
    assert_int_equal(atomic_load(&fake.bad_destroys), 0);
    atomic_store_explicit(&l.go, 1, memory_order_release);
    join_within(thread, 10);
    assert_int_equal(atomic_load(&l.errors), 0);
    assert_int_equal(atomic_load(&fake2.live), 0);
    assert_no_live_blocks();
}

typedef struct handoff {
    event_pool_t *pool;
    void *ring[64];
    _Atomic uint64_t head; /* written by the producer */
    _Atomic uint64_t tail; /* written by the consumer */
    uint64_t count;
    _Atomic int errors;
} handoff_t;

static void *consume_and_release(void *arg) {
    handoff_t *h = arg;
    ordo_deadline_t deadline = ordo_deadline_after_ms(60000);
    for (uint64_t i = 0; i < h->count; ++i) {
        while (atomic_load_explicit(&h->head, memory_order_acquire) == i) {
            if (ordo_time_now_ns() >= deadline) {
                atomic_fetch_add(&h->errors, 1);
                return NULL;
            }
            sched_yield();
        }
        if (ordo__event_pool_release(h->pool, h->ring[i % 64], 1) != ORDO_OK) {
            atomic_fetch_add(&h->errors, 1);
        }
        atomic_store_explicit(&h->tail, i + 1, memory_order_release);
    }
    return NULL;
}

static void events_acquired_on_one_thread_are_released_on_another(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 4, 4, 0);
    handoff_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->pool = pool;
    h->count = test_scaled(50000);
    pthread_t consumer = test_thread_start(consume_and_release, h);
    ordo_deadline_t deadline = ordo_deadline_after_ms(60000);
    for (uint64_t i = 0; i < h->count; ++i) {
        while (i - atomic_load_explicit(&h->tail, memory_order_acquire) >= 64) {
            if (ordo_time_now_ns() >= deadline) {
                fail_msg("the consumer stalled");
            }
            sched_yield();
        }
        int pooled;
        assert_ok(ordo__event_pool_acquire(pool, &h->ring[i % 64], &pooled));
        assert_int_equal(pooled, 1);
        atomic_store_explicit(&h->head, i + 1, memory_order_release);
    }
    join_within(consumer, 60);
    assert_int_equal(atomic_load(&h->errors), 0);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.acquires, h->count);
    assert_int_equal(s.releases, h->count);
    assert_int_equal(s.in_use, 0);
    assert_true(s.high_water <= 65);
    /* The consumer has exited: all its events are back. */
    assert_int_equal(s.available, s.created_total - s.destroyed_total);
    assert_int_equal(atomic_load(&fake.live), (long)s.available);
    free(h);
    pool_finish(pool, &fake);
}

typedef struct racer {
    event_pool_t *pool;
    void *_Atomic event;
    _Atomic int round;   /* the round both racers may start */
    _Atomic int done[2]; /* the last round each finished */
    _Atomic int ok[2];
    _Atomic int refused[2];
    _Atomic int errors;
    int rounds;
} racer_t;

typedef struct racer_arg {
    racer_t *race;
    int index;
} racer_arg_t;

static void *race_release(void *arg) {
    racer_arg_t *a = arg;
    racer_t *r = a->race;
    ordo_deadline_t deadline = ordo_deadline_after_ms(60000);
    for (int round = 1; round <= r->rounds; ++round) {
        if (wait_flag(&r->round, round, deadline) != 0) {
            atomic_fetch_add(&r->errors, 1);
            return NULL;
        }
        void *event = atomic_load(&r->event);
        ordo_status_t st = ordo__event_pool_release(r->pool, event, 1);
        if (st == ORDO_OK) {
            atomic_fetch_add(&r->ok[a->index], 1);
        } else if (st == ORDO_ERR_INVALID_ARGUMENT) {
            atomic_fetch_add(&r->refused[a->index], 1);
        } else {
            atomic_fetch_add(&r->errors, 1);
        }
        atomic_store_explicit(&r->done[a->index], round, memory_order_release);
    }
    return NULL;
}

static void simultaneous_double_releases_succeed_once(void **state) {
    (void)state;
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    event_pool_t *pool = pool_make(&fake, 8, 8, 0);
    racer_t race = {.pool = pool, .rounds = (int)test_scaled(4000)};
    racer_arg_t args[2] = {{&race, 0}, {&race, 1}};
    pthread_t threads[2] = {test_thread_start(race_release, &args[0]),
                            test_thread_start(race_release, &args[1])};
    ordo_deadline_t deadline = ordo_deadline_after_ms(60000);
    for (int round = 1; round <= race.rounds; ++round) {
        int pooled;
        void *event = NULL;
        assert_ok(ordo__event_pool_acquire(pool, &event, &pooled));
        atomic_store(&race.event, event);
        atomic_store_explicit(&race.round, round, memory_order_release);
        assert_int_equal(wait_flag(&race.done[0], round, deadline), 0);
        assert_int_equal(wait_flag(&race.done[1], round, deadline), 0);
    }
    join_within(threads[0], 60);
    join_within(threads[1], 60);
    assert_int_equal(atomic_load(&race.errors), 0);
    assert_int_equal(atomic_load(&race.ok[0]) + atomic_load(&race.ok[1]), race.rounds);
    assert_int_equal(atomic_load(&race.refused[0]) + atomic_load(&race.refused[1]), race.rounds);
    ordo_event_pool_stats_t s = stats_of(pool);
    assert_int_equal(s.in_use, 0);
    assert_int_equal(s.releases, (uint64_t)race.rounds);
    assert_int_equal(s.available, s.created_total);
    pool_finish(pool, &fake);
}

/* Many threads at once: random holdings up to 8, threads that exit holding
 * cached events, a thread reading statistics and trimming meanwhile. Every
 * event carries the id of its holder: one handed out twice is caught. */
#define STRESS_WORKERS 4
#define STRESS_QUITTERS 4
#define STRESS_HOLD 8

typedef struct stress {
    event_pool_t *pool;
    size_t maximum;
    uint64_t ops;
    _Atomic uint64_t acquired;
    _Atomic uint64_t unpooled;
    _Atomic int workers_done;
    _Atomic int errors;
} stress_t;

typedef struct stress_arg {
    stress_t *s;
    int id;
    uint64_t ops;
} stress_arg_t;

static void stress_error(stress_t *s, const char *what, ordo_status_t st) {
    print_error("%s: %s (%s)\n", what, ordo_status_name(st), ordo_error_message());
    atomic_fetch_add(&s->errors, 1);
}

static void *stress_worker(void *arg) {
    stress_arg_t *a = arg;
    stress_t *s = a->s;
    void *held[STRESS_HOLD];
    int flags[STRESS_HOLD];
    int count = 0;
    uint64_t rng = 0x1234567u + (uint64_t)a->id * 0x9e3779b97f4a7c15ull;
    uint64_t acquired = 0;
    uint64_t unpooled = 0;
    for (uint64_t i = 0; i < a->ops; ++i) {
        uint64_t r = test_rand(&rng);
        if (count < STRESS_HOLD && (count == 0 || r % 3 != 0)) {
            ordo_status_t st = ordo__event_pool_acquire(s->pool, &held[count], &flags[count]);
            if (st != ORDO_OK) {
                stress_error(s, "acquire", st);
                break;
            }
            fake_event_t *e = held[count];
            int expected = 0;
            if (!atomic_compare_exchange_strong(&e->holder, &expected, a->id)) {
                stress_error(s, "an event handed out twice", ORDO_ERR_INTERNAL);
                break;
            }
            unpooled += flags[count] == 0;
            ++acquired;
            ++count;
        } else {
            int pick = (int)((r >> 8) % (uint64_t)count);
            fake_event_t *e = held[pick];
            atomic_store(&e->holder, 0);
            ordo_status_t st = ordo__event_pool_release(s->pool, e, flags[pick]);
            if (st != ORDO_OK) {
                stress_error(s, "release", st);
                break;
            }
            --count;
            held[pick] = held[count];
            flags[pick] = flags[count];
        }
    }
    while (count > 0) {
        --count;
        atomic_store(&((fake_event_t *)held[count])->holder, 0);
        ordo_status_t st = ordo__event_pool_release(s->pool, held[count], flags[count]);
        if (st != ORDO_OK) {
            stress_error(s, "final release", st);
        }
    }
    atomic_fetch_add(&s->acquired, acquired);
    atomic_fetch_add(&s->unpooled, unpooled);
    return NULL; /* exits with events in its cache */
}

static void *stress_observer(void *arg) {
    stress_t *s = arg;
    ordo_deadline_t deadline = ordo_deadline_after_ms(300000);
    unsigned round = 0;
    while (atomic_load(&s->workers_done) == 0 && ordo_time_now_ns() < deadline) {
        ordo_event_pool_stats_t st;
        if (ordo__event_pool_stats(s->pool, &st) != ORDO_OK || st.high_water < st.in_use ||
            st.created_total < st.destroyed_total || st.unpooled_created < st.unpooled_destroyed) {
            stress_error(s, "stats", ORDO_ERR_INTERNAL);
            break;
        }
        uint64_t pooled_alive =
            (st.created_total - st.unpooled_created) - (st.destroyed_total - st.unpooled_destroyed);
        if (s->maximum && pooled_alive > s->maximum) {
            stress_error(s, "pooled events beyond the maximum", ORDO_ERR_INTERNAL);
            break;
        }
        if (++round % 16 == 0 && ordo__event_pool_trim(s->pool, 4) != ORDO_OK) {
            stress_error(s, "trim", ORDO_ERR_INTERNAL);
            break;
        }
        sched_yield();
    }
    return NULL;
}

static void run_stress(size_t initial, size_t growth, size_t maximum) {
    fake_backend_t fake;
    fake_init(&fake, ORDO_EVENT_PLAIN);
    stress_t s = {.maximum = maximum, .ops = test_scaled(200000)};
    s.pool = pool_make(&fake, initial, growth, maximum);
    pthread_t observer = test_thread_start(stress_observer, &s);
    stress_arg_t args[STRESS_WORKERS + STRESS_QUITTERS];
    pthread_t workers[STRESS_WORKERS];
    pthread_t quitters[STRESS_QUITTERS];
    for (int i = 0; i < STRESS_WORKERS; ++i) {
        args[i] = (stress_arg_t){&s, i + 1, s.ops};
        workers[i] = test_thread_start(stress_worker, &args[i]);
    }
    /* Short-lived threads, in two waves, each exiting with cached events
     * while the workers run. */
    for (int wave = 0; wave < 2; ++wave) {
        for (int i = 0; i < STRESS_QUITTERS; ++i) {
            int k = STRESS_WORKERS + i;
            args[k] = (stress_arg_t){&s, 100 + wave * STRESS_QUITTERS + i, s.ops / 20};
            quitters[i] = test_thread_start(stress_worker, &args[k]);
        }
        for (int i = 0; i < STRESS_QUITTERS; ++i) {
            join_within(quitters[i], 120);
        }
    }
    for (int i = 0; i < STRESS_WORKERS; ++i) {
        join_within(workers[i], 300);
    }
    atomic_store(&s.workers_done, 1);
    join_within(observer, 10);
    assert_int_equal(atomic_load(&s.errors), 0);
    ordo_event_pool_stats_t st = stats_of(s.pool);
    uint64_t acquired = atomic_load(&s.acquired);
    assert_int_equal(st.acquires, acquired);
    assert_int_equal(st.releases, acquired);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.unpooled_created, atomic_load(&s.unpooled));
    assert_int_equal(st.unpooled_destroyed, st.unpooled_created);
    /* Every thread has exited: every pooled event is back and reachable. */
    assert_int_equal(st.available, st.created_total - st.destroyed_total);
    assert_int_equal(atomic_load(&fake.live), (long)st.available);
    if (maximum) {
        assert_true(st.available <= maximum);
    }
    assert_true(st.high_water >= 1);
    assert_true(st.high_water <= (STRESS_WORKERS + STRESS_QUITTERS) * STRESS_HOLD);
    assert_ok(ordo__event_pool_trim(s.pool, 0));
    assert_int_equal(atomic_load(&fake.live), 0);
    pool_finish(s.pool, &fake);
}

static void stress_unbounded(void **state) {
    (void)state;
    run_stress(8, 8, 0);
}

static void stress_with_a_maximum(void **state) {
    (void)state;
    run_stress(4, 2, 16);
}

/* More pools on one thread than it has cache entries: the rest work
 * without a cache, correctly. */
static void many_pools_on_one_thread(void **state) {
    (void)state;
    enum { POOLS = 70 };
    fake_backend_t *fakes = calloc(POOLS, sizeof *fakes);
    event_pool_t *pools[POOLS];
    assert_non_null(fakes);
    for (int p = 0; p < POOLS; ++p) {
        fake_init(&fakes[p], p % 2 ? ORDO_EVENT_TIMING : ORDO_EVENT_PLAIN);
        pools[p] = pool_make(&fakes[p], 1, 2, 0);
    }
    for (int round = 0; round < 3; ++round) {
        void *held[POOLS][3];
        for (int p = 0; p < POOLS; ++p) {
            for (int k = 0; k < 3; ++k) {
                held[p][k] = acquire_one(pools[p], 1);
            }
        }
        for (int p = 0; p < POOLS; ++p) {
            /* Released into the wrong pool: refused. */
            assert_status(ordo__event_pool_release(pools[(p + 1) % POOLS], held[p][0], 1),
                          ORDO_ERR_INVALID_ARGUMENT);
            for (int k = 0; k < 3; ++k) {
                assert_ok(ordo__event_pool_release(pools[p], held[p][k], 1));
            }
        }
    }
    for (int p = 0; p < POOLS; ++p) {
        ordo_event_pool_stats_t s = stats_of(pools[p]);
        assert_int_equal(s.acquires, 9);
        assert_int_equal(s.releases, 9);
        assert_int_equal(s.in_use, 0);
        assert_int_equal(s.high_water, 3);
        assert_int_equal(s.created_total, 3);
        assert_int_equal(s.available, 3);
        assert_ok(ordo__event_pool_destroy(pools[p]));
        assert_int_equal(atomic_load(&fakes[p].live), 0);
    }
    free(fakes);
    assert_no_live_blocks();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(initial_events_are_created_up_front),
        cmocka_unit_test(the_default_config_is_used_for_null),
        cmocka_unit_test(growth_creates_a_batch_when_empty),
        cmocka_unit_test(maximum_bounds_pooled_events_and_counts_unpooled),
        cmocka_unit_test(stats_are_exact_after_every_step),
        cmocka_unit_test(trim_destroys_available_events_beyond_keep),
        cmocka_unit_test(destroy_is_refused_while_events_are_in_use),
        cmocka_unit_test(bad_input_to_create_is_refused),
        cmocka_unit_test(bad_input_to_every_call_is_refused),
        cmocka_unit_test(backend_failure_leaves_nothing_behind),
        cmocka_unit_test(exiting_threads_return_their_cached_events),
        cmocka_unit_test(destroy_reclaims_caches_of_living_threads),
        cmocka_unit_test(events_acquired_on_one_thread_are_released_on_another),
        cmocka_unit_test(simultaneous_double_releases_succeed_once),
        cmocka_unit_test(stress_unbounded),
        cmocka_unit_test(stress_with_a_maximum),
        cmocka_unit_test(many_pools_on_one_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
