/* The parker (src/base/parker.h): the word's bookkeeping, deadline-bounded
 * parks, wake-ups filtered by interest, and lost wake-ups under stress:
 * one sleeper, several sleepers woken one at a time, wake-all, and the
 * wakers' lock. Every park has a deadline (the test's): a lost wake-up
 * shows as a park that timed out with work waiting, never as a hang. */
#include <limits.h>
#include <stdatomic.h>

#include "base/parker.h"
#include "test_util.h"

static uint64_t sleepers_of(ordo_parker_t *p) {
    return atomic_load(&p->word) & ORDO__PARKER_SLEEPERS;
}

static uint64_t interest_of(ordo_parker_t *p) {
    return (atomic_load(&p->word) & ORDO__PARKER_INTEREST) >> ORDO__PARKER_INTEREST_SHIFT;
}

/* Polls until n threads are inside park (announced), with the test's
 * deadline. */
static void wait_for_sleepers(ordo_parker_t *p, uint64_t n) {
    ordo_deadline_t deadline = test_deadline();
    while (sleepers_of(p) != n) {
        if (ordo_time_now_ns() >= deadline) {
            fail_msg("%llu sleepers never parked", (unsigned long long)n);
        }
        sched_yield();
    }
}

static void test_unpark_moves_the_epoch_and_a_stale_key_does_not_sleep(void **state) {
    (void)state;
    ordo_parker_t p;
    ordo__parker_init(&p);
    ordo_park_key_t key = ordo__parker_prepare(&p);
    ordo__parker_unpark(&p, ORDO_PARK_ANY, 1); /* nobody sleeps: no wake */
    assert_int_equal(atomic_load(&p.word), ORDO__PARKER_EPOCH_ONE);
    /* Returns at once, long before the deadline: the epoch moved. */
    assert_int_equal(ordo__parker_park(&p, key, ORDO_PARK_ANY, test_deadline()), ORDO_PARK_WOKEN);
    assert_int_equal(atomic_load(&p.word), ORDO__PARKER_EPOCH_ONE);
}

/* A waker that wakes moves the sleepers it wakes to WOKEN in its own RMW,
 * so the next waker makes no system call for them. */
static void test_a_wake_counts_sleepers_woken(void **state) {
    (void)state;
    const uint64_t three = 3 * ORDO__PARKER_SLEEPER_ONE | (uint64_t)0x3
                                                              << ORDO__PARKER_INTEREST_SHIFT;
    uint64_t one = ordo__parker_woken(three, 0x1, 1);
    assert_int_equal(one, three + ORDO__PARKER_EPOCH_ONE - ORDO__PARKER_SLEEPER_ONE +
                              ORDO__PARKER_WOKEN_ONE);
    assert_true(ordo__parker_wakes(one, 0x2));
    /* Not interested: only the epoch moves. */
    assert_false(ordo__parker_wakes(three, 0x4));
    assert_int_equal(ordo__parker_woken(three, 0x4, 1), three + ORDO__PARKER_EPOCH_ONE);
    /* Wake-all: every sleeper woken, INTEREST cleared, no wake after it. */
    uint64_t all = ordo__parker_woken(three, 0x2, INT_MAX);
    assert_int_equal(all, ORDO__PARKER_EPOCH_ONE + 3 * ORDO__PARKER_WOKEN_ONE);
    assert_false(ordo__parker_wakes(all, ORDO_PARK_ANY));
    assert_int_equal(ordo__parker_woken(all, ORDO_PARK_ANY, 1), all + ORDO__PARKER_EPOCH_ONE);
}

static void test_park_ends_at_its_deadline(void **state) {
    (void)state;
    ordo_parker_t p;
    ordo__parker_init(&p);
    uint64_t start = ordo_time_now_ns();
    ordo_deadline_t deadline = start + 20000000u; /* 20 ms */
    assert_int_equal(ordo__parker_park(&p, ordo__parker_prepare(&p), 0x5, deadline),
                     ORDO_PARK_TIMED_OUT);
    assert_true(ordo_time_now_ns() >= deadline);
    /* Left: no sleeper, no interest, the epoch as it was. */
    assert_int_equal(atomic_load(&p.word), 0);
    /* A deadline already past returns at once. */
    assert_int_equal(ordo__parker_park(&p, ordo__parker_prepare(&p), ORDO_PARK_ANY, start),
                     ORDO_PARK_TIMED_OUT);
    assert_int_equal(atomic_load(&p.word), 0);
}

typedef struct sleeper {
    ordo_parker_t *parker;
    uint32_t interest;
    _Atomic int result; /* -1 until park returns */
} sleeper_t;

static void *park_once(void *arg) {
    sleeper_t *s = arg;
    ordo_park_key_t key = ordo__parker_prepare(s->parker);
    atomic_store(&s->result, (int)ordo__parker_park(s->parker, key, s->interest, test_deadline()));
    return NULL;
}

/* An unpark for a reason outside the sleeper's interest moves the epoch
 * but makes no wake call; one for a reason in it wakes the sleeper. */
static void test_interest_decides_the_wake(void **state) {
    (void)state;
    ordo_parker_t p;
    ordo__parker_init(&p);
    sleeper_t s = {&p, 0x1 | 0x4, -1};
    pthread_t thread = test_thread_start(park_once, &s);
    wait_for_sleepers(&p, 1);
    assert_int_equal(interest_of(&p), 0x5);
    uint64_t word = atomic_load(&p.word);
    assert_false(ordo__parker_wakes(word, 0x2));
    assert_true(ordo__parker_wakes(word, 0x4));
    ordo__parker_unpark(&p, 0x2, 1);
    ordo__parker_unpark(&p, 0x4, 1);
    test_join_bounded(thread);
    assert_int_equal(atomic_load(&s.result), ORDO_PARK_WOKEN);
    assert_int_equal(sleepers_of(&p), 0);
    assert_int_equal(interest_of(&p), 0);
}

/* INTEREST is the union of the sleepers' and stays until the last one
 * leaves; unpark(INT_MAX) wakes them all. */
static void test_wake_all_and_the_union_of_interests(void **state) {
    (void)state;
    enum { N = 6 };
    ordo_parker_t p;
    ordo__parker_init(&p);
    sleeper_t s[N];
    pthread_t threads[N];
    for (int i = 0; i < N; ++i) {
        s[i] = (sleeper_t){&p, 1u << (i % 3), -1};
        threads[i] = test_thread_start(park_once, &s[i]);
    }
    wait_for_sleepers(&p, N);
    assert_int_equal(interest_of(&p), 0x7);
    ordo__parker_unpark(&p, 0x2, INT_MAX);
    for (int i = 0; i < N; ++i) {
        test_join_bounded(threads[i]);
        assert_int_equal(atomic_load(&s[i].result), ORDO_PARK_WOKEN);
    }
    assert_int_equal(atomic_load(&p.word) & ~(ORDO__PARKER_EPOCH_ONE * 0xffffffffu), 0);
}

/* ---- lost wake-ups ------------------------------------------------------ */

/* A ping-pong: the producer posts one item and waits for its ack; the
 * consumer takes it, acks, and parks again. Each side parks right after
 * looking, so the other side's unpark keeps landing in the window between
 * a look and a sleep. `locked`: the producer posts through the wakers'
 * lock instead of unpark. */
typedef struct pingpong {
    ordo_parker_t items;
    ordo_parker_t acks;
    _Atomic uint64_t posted;
    _Atomic uint64_t taken;
    uint64_t rounds;
    _Atomic int lost; /* a park timed out with work waiting */
    _Atomic int stop;
} pingpong_t;

/* A short pause of random length (up to 63 spins): a waker's post then
 * lands at every stage of the other side's look-and-park. */
static void random_pause(void) {
    static _Thread_local uint64_t rng = 0;
    if (!rng) {
        rng = (uint64_t)(uintptr_t)&rng | 1;
    }
    uint64_t pause = test_rand(&rng) % 64;
    for (uint64_t k = 0; k < pause; ++k) {
        ordo__cpu_relax();
    }
}

/* Waits until *value >= target, parked on p; 0 if a park timed out. The
 * pause between the look and the park widens the window a lost wake-up
 * would need. */
static int wait_at_least(ordo_parker_t *p, _Atomic uint64_t *value, uint64_t target) {
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(p);
        if (atomic_load_explicit(value, memory_order_relaxed) >= target) {
            return 1;
        }
        random_pause();
        if (ordo__parker_park(p, key, ORDO_PARK_ANY, deadline) == ORDO_PARK_TIMED_OUT) {
            return atomic_load_explicit(value, memory_order_relaxed) >= target;
        }
    }
}

static void *pingpong_consumer(void *arg) {
    pingpong_t *pp = arg;
    for (uint64_t i = 1; i <= pp->rounds; ++i) {
        if (!wait_at_least(&pp->items, &pp->posted, i)) {
            atomic_store(&pp->lost, 1);
            return NULL;
        }
        atomic_store_explicit(&pp->taken, i, memory_order_relaxed);
        ordo__parker_unpark(&pp->acks, ORDO_PARK_ANY, 1);
    }
    return NULL;
}

/* Takes and releases the wakers' lock over and over, so the consumer's
 * keys and leaves meet a held lock. */
static void *lock_churn(void *arg) {
    pingpong_t *pp = arg;
    while (!atomic_load(&pp->stop)) {
        ordo__parker_unlock(&pp->items, ordo__parker_lock(&pp->items), ORDO_PARK_ANY);
        sched_yield();
    }
    return NULL;
}

static void run_pingpong(uint64_t rounds, int locked) {
    pingpong_t *pp = calloc(1, sizeof *pp);
    assert_non_null(pp);
    ordo__parker_init(&pp->items);
    ordo__parker_init(&pp->acks);
    pp->rounds = rounds;
    pthread_t consumer = test_thread_start(pingpong_consumer, pp);
    pthread_t churn;
    memset(&churn, 0, sizeof churn);
    if (locked) {
        churn = test_thread_start(lock_churn, pp);
    }
    int lost = 0;
    for (uint64_t i = 1; i <= rounds && !atomic_load(&pp->lost); ++i) {
        random_pause(); /* the post meets the consumer looking, parking, asleep */
        if (locked) {
            uint64_t seen = ordo__parker_lock(&pp->items);
            atomic_store_explicit(&pp->posted, i, memory_order_relaxed);
            ordo__parker_unlock(&pp->items, seen, ORDO_PARK_ANY);
        } else {
            atomic_store_explicit(&pp->posted, i, memory_order_relaxed);
            ordo__parker_unpark(&pp->items, ORDO_PARK_ANY, 1);
        }
        if (!wait_at_least(&pp->acks, &pp->taken, i)) {
            lost = 1;
            break;
        }
    }
    atomic_store(&pp->stop, 1);
    if (lost) {
        /* Let the consumer go if it is the one asleep. */
        if (locked) {
            uint64_t seen = ordo__parker_lock(&pp->items);
            atomic_store(&pp->posted, UINT64_MAX);
            ordo__parker_unlock(&pp->items, seen, ORDO_PARK_ANY);
        } else {
            atomic_store(&pp->posted, UINT64_MAX);
            ordo__parker_unpark(&pp->items, ORDO_PARK_ANY, INT_MAX);
        }
    }
    test_join_bounded(consumer);
    if (locked) {
        test_join_bounded(churn);
    }
    assert_false(lost);
    assert_false(atomic_load(&pp->lost));
    assert_int_equal(atomic_load(&pp->taken), rounds);
    assert_int_equal(sleepers_of(&pp->items), 0);
    assert_int_equal(sleepers_of(&pp->acks), 0);
    free(pp);
}

static void test_no_lost_wake_one_sleeper(void **state) {
    (void)state;
    run_pingpong(test_scaled(200000), 0);
}

static void test_no_lost_wake_through_the_wakers_lock(void **state) {
    (void)state;
    run_pingpong(test_scaled(100000), 1);
}

/* Several workers park on one parker and take items from a shared count;
 * the producer posts a batch, unparking one worker per item, and waits
 * until every item is taken. A lost wake-up leaves items with every
 * worker asleep: the producer's wait then times out. */
enum { WORKERS = 4 };

typedef struct crew {
    ordo_parker_t items;
    ordo_parker_t done;
    _Atomic uint64_t posted;
    _Atomic uint64_t claimed;
    _Atomic uint64_t finished;
    _Atomic int stop;
} crew_t;

static void *crew_worker(void *arg) {
    crew_t *c = arg;
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&c->items);
        uint64_t claimed = atomic_load(&c->claimed);
        if (claimed < atomic_load(&c->posted)) {
            if (atomic_compare_exchange_weak(&c->claimed, &claimed, claimed + 1)) {
                atomic_fetch_add(&c->finished, 1);
                ordo__parker_unpark(&c->done, ORDO_PARK_ANY, 1);
            }
            continue;
        }
        if (atomic_load(&c->stop)) {
            return NULL;
        }
        random_pause();
        /* Bounded; a lost wake-up shows in the producer's wait first. */
        (void)ordo__parker_park(&c->items, key, ORDO_PARK_ANY, test_deadline());
    }
}

static void test_no_lost_wake_several_sleepers_woken_one_by_one(void **state) {
    (void)state;
    crew_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    ordo__parker_init(&c->items);
    ordo__parker_init(&c->done);
    pthread_t workers[WORKERS];
    for (int i = 0; i < WORKERS; ++i) {
        workers[i] = test_thread_start(crew_worker, c);
    }
    uint64_t rounds = test_scaled(40000);
    uint64_t rng = 12345;
    int ok = 1;
    for (uint64_t r = 0; r < rounds && ok; ++r) {
        uint64_t batch = 1 + test_rand(&rng) % WORKERS;
        for (uint64_t k = 0; k < batch; ++k) {
            atomic_fetch_add(&c->posted, 1);
            ordo__parker_unpark(&c->items, ORDO_PARK_ANY, 1);
        }
        ok = wait_at_least(&c->done, &c->finished, atomic_load(&c->posted));
    }
    atomic_store(&c->stop, 1);
    ordo__parker_unpark(&c->items, ORDO_PARK_ANY, INT_MAX);
    for (int i = 0; i < WORKERS; ++i) {
        test_join_bounded(workers[i]);
    }
    if (!ok) {
        fail_msg("%llu of %llu items were left with every worker asleep",
                 (unsigned long long)(atomic_load(&c->posted) - atomic_load(&c->finished)),
                 (unsigned long long)atomic_load(&c->posted));
    }
    assert_int_equal(sleepers_of(&c->items), 0);
    assert_int_equal(interest_of(&c->items), 0);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unpark_moves_the_epoch_and_a_stale_key_does_not_sleep),
        cmocka_unit_test(test_a_wake_counts_sleepers_woken),
        cmocka_unit_test(test_park_ends_at_its_deadline),
        cmocka_unit_test(test_interest_decides_the_wake),
        cmocka_unit_test(test_wake_all_and_the_union_of_interests),
        cmocka_unit_test(test_no_lost_wake_one_sleeper),
        cmocka_unit_test(test_no_lost_wake_through_the_wakers_lock),
        cmocka_unit_test(test_no_lost_wake_several_sleepers_woken_one_by_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
