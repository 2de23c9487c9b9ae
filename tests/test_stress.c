/* Concurrency stress: many producers and consumers on shared signals, a
 * ping-pong that would expose a lost wake-up, arm/cancel races. Every wait
 * has a deadline; sizes shrink in sanitizer builds. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "sync/wait_tuning.h"
#include "test_util.h"

/* ---- producers and consumers ----------------------------------------- */

#define SIGNALS 8
#define PRODUCERS 2
#define CONSUMERS 3

typedef struct shared {
    ordo_signal_t *signals[SIGNALS];
    _Atomic uint64_t issued[SIGNALS];
    uint64_t total[SIGNALS]; /* each signal's final value, known up front */
    uint64_t per_producer;
    _Atomic int producers_done;
    _Atomic uint64_t waits_done;
    _Atomic int errors;
} shared_t;

typedef struct worker {
    shared_t *shared;
    uint64_t seed;
} worker_t;

static size_t producer_pick(uint64_t *rng) {
    return (size_t)(test_rand(rng) % SIGNALS);
}

static void consumer_check(shared_t *sh, ordo_status_t st, const char *what) {
    if (st != ORDO_OK) {
        print_error("%s: %s (%s)\n", what, ordo_status_name(st), ordo_error_message());
        atomic_fetch_add(&sh->errors, 1);
    }
}

static void *producer_run(void *arg) {
    worker_t *w = arg;
    shared_t *sh = w->shared;
    uint64_t rng = w->seed;
    uint64_t wait_rng = ~w->seed; /* separate: rng must replay the totals */
    for (uint64_t i = 0; i < sh->per_producer; ++i) {
        size_t j = producer_pick(&rng);
        uint64_t v = atomic_fetch_add(&sh->issued[j], 1) + 1;
        /* Values from two producers arrive out of order: lower ones are
         * no-ops by design. */
        if (ordo_signal_advance(sh->signals[j], v) != ORDO_OK) {
            atomic_fetch_add(&sh->errors, 1);
        }
        if (i % 16 == 0) {
            /* Producers consume too: a value already issued is always
             * signalled right after, so this wait is always satisfiable. */
            size_t m = (size_t)(test_rand(&wait_rng) % SIGNALS);
            uint64_t issued = atomic_load(&sh->issued[m]);
            consumer_check(sh, ordo_signal_wait(sh->signals[m], issued, test_deadline()),
                           "producer wait");
            atomic_fetch_add(&sh->waits_done, 1);
        }
    }
    return NULL;
}

static void *consumer_run(void *arg) {
    worker_t *w = arg;
    shared_t *sh = w->shared;
    uint64_t rng = w->seed;
    for (;;) {
        int finishing = atomic_load(&sh->producers_done);
        size_t j = (size_t)(test_rand(&rng) % SIGNALS);
        uint64_t current;
        (void)ordo_signal_query(sh->signals[j], &current);
        if (current >= sh->total[j]) {
            if (finishing) {
                break;
            }
            continue;
        }
        uint64_t target = current + 1 + test_rand(&rng) % 64;
        if (target > sh->total[j]) {
            target = sh->total[j];
        }
        uint64_t kind = test_rand(&rng) % 4;
        if (kind < 2) {
            consumer_check(sh, ordo_signal_wait(sh->signals[j], target, test_deadline()), "wait");
        } else {
            /* A multi-wait over a few signals at targets each will reach. */
            ordo_signal_point_t points[4];
            for (size_t k = 0; k < 4; ++k) {
                size_t m = (j + k) % SIGNALS;
                uint64_t now;
                (void)ordo_signal_query(sh->signals[m], &now);
                uint64_t t = now + 1 + test_rand(&rng) % 16;
                points[k] =
                    (ordo_signal_point_t){sh->signals[m], t > sh->total[m] ? sh->total[m] : t};
            }
            if (kind == 2) {
                consumer_check(sh, ordo_signal_wait_all(points, 4, test_deadline()), "wait_all");
            } else {
                size_t index;
                consumer_check(sh, ordo_signal_wait_any(points, 4, test_deadline(), &index),
                               "wait_any");
            }
        }
        atomic_fetch_add(&sh->waits_done, 1);
    }
    return NULL;
}

static void producers_and_consumers(void **state) {
    (void)state;
    shared_t *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    /* 1e6 signals in a normal build. */
    sh->per_producer = test_scaled(500000);
    worker_t producers[PRODUCERS];
    worker_t consumers[CONSUMERS];
    for (size_t p = 0; p < PRODUCERS; ++p) {
        producers[p] = (worker_t){sh, 0x9e3779b97f4a7c15ull * (p + 1)};
        uint64_t rng = producers[p].seed;
        for (uint64_t i = 0; i < sh->per_producer; ++i) {
            sh->total[producer_pick(&rng)]++;
        }
    }
    for (size_t j = 0; j < SIGNALS; ++j) {
        assert_ok(ordo_signal_create(0, &sh->signals[j]));
    }
    pthread_t threads[PRODUCERS + CONSUMERS];
    for (size_t c = 0; c < CONSUMERS; ++c) {
        consumers[c] = (worker_t){sh, 0xd1b54a32d192ed03ull * (c + 1)};
        threads[PRODUCERS + c] = test_thread_start(consumer_run, &consumers[c]);
    }
    for (size_t p = 0; p < PRODUCERS; ++p) {
        threads[p] = test_thread_start(producer_run, &producers[p]);
    }
    for (size_t p = 0; p < PRODUCERS; ++p) {
        pthread_join(threads[p], NULL);
    }
    atomic_store(&sh->producers_done, 1);
    for (size_t c = 0; c < CONSUMERS; ++c) {
        pthread_join(threads[PRODUCERS + c], NULL);
    }
    assert_int_equal(atomic_load(&sh->errors), 0);
    for (size_t j = 0; j < SIGNALS; ++j) {
        uint64_t value;
        assert_ok(ordo_signal_query(sh->signals[j], &value));
        assert_int_equal(value, sh->total[j]);
        assert_ok(ordo_signal_destroy(sh->signals[j]));
    }
    print_message("  %llu signals, %llu consumer waits\n",
                  (unsigned long long)(sh->per_producer * PRODUCERS),
                  (unsigned long long)atomic_load(&sh->waits_done));
    free(sh);
}

/* ---- ping-pong --------------------------------------------------------- */

typedef struct pingpong {
    ordo_signal_t *ping;
    ordo_signal_t *pong;
    uint64_t rounds;
    _Atomic int errors;
} pingpong_t;

static void *pong_run(void *arg) {
    pingpong_t *pp = arg;
    for (uint64_t i = 1; i <= pp->rounds; ++i) {
        if (ordo_signal_wait(pp->ping, i, test_deadline()) != ORDO_OK ||
            ordo_signal_advance(pp->pong, i) != ORDO_OK) {
            atomic_fetch_add(&pp->errors, 1);
            return NULL;
        }
    }
    return NULL;
}

static void run_pingpong(uint64_t rounds) {
    pingpong_t pp = {.rounds = rounds};
    assert_ok(ordo_signal_create(0, &pp.ping));
    assert_ok(ordo_signal_create(0, &pp.pong));
    pthread_t t = test_thread_start(pong_run, &pp);
    for (uint64_t i = 1; i <= rounds; ++i) {
        assert_ok(ordo_signal_advance(pp.ping, i));
        ordo_status_t st = ordo_signal_wait(pp.pong, i, test_deadline());
        if (st != ORDO_OK) {
            /* Unblock the partner so it ends too. */
            (void)ordo_signal_fail(pp.ping, ORDO_ERR_ABORTED, "test failed");
            pthread_join(t, NULL);
            fail_msg("round %llu: %s (%s)", (unsigned long long)i, ordo_status_name(st),
                     ordo_error_message());
        }
    }
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&pp.errors), 0);
    assert_ok(ordo_signal_destroy(pp.ping));
    assert_ok(ordo_signal_destroy(pp.pong));
}

static void pingpong_with_spinning(void **state) {
    (void)state;
    run_pingpong(test_scaled(1000000));
}

/* Every wait sleeps: each round trip goes through the futex, the path
 * where a lost wake-up would stall a round until its deadline. */
static void pingpong_always_sleeping(void **state) {
    (void)state;
    uint64_t previous = ordo__sync_wait_set_spin_ns(0);
    run_pingpong(test_scaled(200000));
    ordo__sync_wait_set_spin_ns(previous);
}

/* ---- arm / cancel against a concurrent producer ------------------------ */

typedef struct racer {
    ordo_signal_t *signal;
    _Atomic int stop;
} racer_t;

static void *racer_signal(void *arg) {
    racer_t *r = arg;
    uint64_t v = 0;
    while (!atomic_load(&r->stop)) {
        (void)ordo_signal_advance(r->signal, ++v);
    }
    return NULL;
}

typedef struct counted {
    _Atomic uint64_t fired;
} counted_t;

static void counted_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)tp;
    if (status == ORDO_OK) {
        atomic_fetch_add(&((counted_t *)ctx)->fired, 1);
    }
}

static void arm_cancel_race(void **state) {
    (void)state;
    racer_t r = {0};
    assert_ok(ordo_signal_create(0, &r.signal));
    pthread_t t = test_thread_start(racer_signal, &r);
    counted_t counted = {0};
    uint64_t prevented = 0;
    uint64_t too_late = 0;
    uint64_t rounds = test_scaled(200000);
    for (uint64_t i = 0; i < rounds; ++i) {
        ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
        uint64_t now;
        assert_ok(ordo_signal_query(r.signal, &now));
        assert_ok(ordo_timepoint_arm(&tp, r.signal, now + 1 + (i % 3), counted_fired, &counted));
        ordo_cancel_result_t result;
        assert_ok(ordo_timepoint_cancel(&tp, &result));
        if (result == ORDO_CANCEL_PREVENTED) {
            ++prevented;
        } else {
            ++too_late;
            /* The callback runs on the producer; it must land before tp
             * goes out of scope. */
            ordo_deadline_t deadline = test_deadline();
            while (atomic_load(&counted.fired) < too_late) {
                assert_true(ordo_time_now_ns() < deadline);
                sched_yield();
            }
        }
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(prevented + too_late, rounds);
    assert_int_equal(atomic_load(&counted.fired), too_late);
    print_message("  %llu prevented, %llu too late\n", (unsigned long long)prevented,
                  (unsigned long long)too_late);
    assert_ok(ordo_signal_destroy(r.signal));
}

/* ---- destroy as soon as the wait returns -------------------------------- */

/* The producer may still be inside ordo_signal_advance when the consumer's
 * wait returns; the consumer destroys the signal at once. Under
 * AddressSanitizer any touch of the freed signal fails the test. */
typedef struct handoff {
    _Atomic(ordo_signal_t *) slot;
    _Atomic int stop;
} handoff_t;

static void *handoff_producer(void *arg) {
    handoff_t *h = arg;
    while (!atomic_load(&h->stop)) {
        ordo_signal_t *s = atomic_exchange(&h->slot, NULL);
        if (s) {
            (void)ordo_signal_advance(s, 1);
        } else {
            sched_yield(); /* on a busy machine, the consumer may need this CPU */
        }
    }
    return NULL;
}

static void flag_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *tp) {
    (void)status;
    (void)tp;
    atomic_store((_Atomic int *)ctx, 1);
}

static void destroy_right_after_wait(void **state) {
    (void)state;
    handoff_t h = {NULL, 0};
    pthread_t t = test_thread_start(handoff_producer, &h);
    uint64_t rounds = test_scaled(100000);
    for (uint64_t i = 0; i < rounds; ++i) {
        ordo_signal_t *s = test_signal_make(0);
        ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
        _Atomic int fired = 1;
        if (i % 2) {
            /* A pending timepoint makes the producer take the dispatch path. */
            atomic_store(&fired, 0);
            assert_ok(ordo_timepoint_arm(&tp, s, 1, flag_fired, &fired));
        }
        atomic_store(&h.slot, s);
        assert_ok(ordo_signal_wait(s, 1, test_deadline()));
        assert_ok(ordo_signal_destroy(s));
        /* The timepoint is ours again only once its callback has run. */
        ordo_deadline_t deadline = test_deadline();
        while (!atomic_load(&fired)) {
            assert_true(ordo_time_now_ns() < deadline);
            sched_yield();
        }
    }
    atomic_store(&h.stop, 1);
    pthread_join(t, NULL);
}

/* ---- re-arming a link as soon as it has done its job ------------------ */

/* The owner sees the target signalled while the producer's thread may still
 * be inside the link's callback; re-arming must wait (ORDO_ERR_BUSY) until
 * the link is its owner's again. ThreadSanitizer checks the hand-over. */
static void link_rearm_race(void **state) {
    (void)state;
    racer_t r = {0};
    assert_ok(ordo_signal_create(0, &r.signal));
    ordo_signal_t *target = test_signal_make(0);
    pthread_t t = test_thread_start(racer_signal, &r);
    ordo_link_t link = {ORDO_TIMEPOINT_INIT, NULL, 0};
    uint64_t rounds = test_scaled(50000);
    uint64_t busy = 0;
    for (uint64_t i = 1; i <= rounds; ++i) {
        uint64_t now;
        assert_ok(ordo_signal_query(r.signal, &now));
        ordo_deadline_t deadline = test_deadline();
        ordo_status_t st;
        while ((st = ordo_link_arm(&link, r.signal, now + 1, target, i)) == ORDO_ERR_BUSY) {
            ++busy;
            assert_true(ordo_time_now_ns() < deadline);
            sched_yield(); /* the link's callback may be waiting for this CPU */
        }
        assert_ok(st);
        assert_ok(ordo_signal_wait(target, i, deadline));
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    print_message("  %llu re-arms refused while the link was still running\n",
                  (unsigned long long)busy);
    assert_ok(ordo_signal_destroy(r.signal));
    assert_ok(ordo_signal_destroy(target));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(producers_and_consumers),  cmocka_unit_test(pingpong_with_spinning),
        cmocka_unit_test(pingpong_always_sleeping), cmocka_unit_test(arm_cancel_race),
        cmocka_unit_test(destroy_right_after_wait), cmocka_unit_test(link_rearm_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
