/* The tracker's lock (src/base/rlock.h): recursion, the bias towards a
 * thread that uses it alone, revocation of the bias when another thread
 * comes, and mutual exclusion under contention across bias changes. */
#include <sched.h>
#include <stdatomic.h>

#include "base/asym_fence.h"
#include "base/futex.h"
#include "base/rlock.h"
#include "test_util.h"

static void bias_to_me(ordo_rlock_t *lock) {
    for (int i = 0; i < 10000; ++i) {
        ordo_rlock_lock(lock);
        ordo_rlock_unlock(lock);
    }
}

static int biased_to_me(ordo_rlock_t *lock) {
    return (atomic_load(&lock->bias) & ~(uintptr_t)1) == (uintptr_t)&ordo__rlock_marker;
}

static void test_recursion_and_held(void **state) {
    (void)state;
    ordo_rlock_t lock;
    ordo__rlock_init(&lock);
    assert_false(ordo__rlock_held(&lock));
    ordo_rlock_lock(&lock);
    ordo_rlock_lock(&lock);
    assert_true(ordo__rlock_held(&lock));
    ordo_rlock_unlock(&lock);
    assert_true(ordo__rlock_held(&lock)); /* one level still held */
    ordo_rlock_unlock(&lock);
    assert_false(ordo__rlock_held(&lock));
}

static void test_a_thread_alone_earns_the_bias(void **state) {
    (void)state;
    ordo_rlock_t lock;
    ordo__rlock_init(&lock);
    bias_to_me(&lock);
    if (!ordo__asym_cheap()) {
        assert_false(biased_to_me(&lock)); /* never biased without membarrier */
        skip();
    }
    assert_true(biased_to_me(&lock));
    /* Biased entries nest and report the holder like shared ones. */
    ordo_rlock_lock(&lock);
    assert_true(lock.through_bias);
    ordo_rlock_lock(&lock);
    assert_true(ordo__rlock_held(&lock));
    ordo_rlock_unlock(&lock);
    ordo_rlock_unlock(&lock);
    assert_false(ordo__rlock_held(&lock));
    assert_int_equal(atomic_load(&lock.bias_inside[0]), 0);
    assert_int_equal(atomic_load(&lock.bias_inside[1]), 0);
}

typedef struct contender {
    ordo_rlock_t *lock;
    _Atomic int acquired;
    _Atomic int started;
} contender_t;

static void *take_once(void *arg) {
    contender_t *c = arg;
    atomic_store(&c->started, 1);
    ordo_rlock_lock(c->lock);
    atomic_store(&c->acquired, 1);
    ordo_rlock_unlock(c->lock);
    return NULL;
}

/* Another thread revokes the bias, waiting (asleep) while the biased
 * thread is inside, and gets the lock once it leaves. */
static void test_revocation_waits_for_the_biased_holder(void **state) {
    (void)state;
    ordo_rlock_t lock;
    ordo__rlock_init(&lock);
    bias_to_me(&lock);
    const uint32_t run_before = lock.run_to_bias;
    ordo_rlock_lock(&lock);
    contender_t c = {&lock, 0, 0};
    pthread_t thread = test_thread_start(take_once, &c);
    while (!atomic_load(&c.started)) {
        test_sleep_ms(1);
    }
    test_sleep_ms(50);
    assert_int_equal(atomic_load(&c.acquired), 0); /* excluded while we hold it */
    ordo_rlock_unlock(&lock);
    test_join_bounded(thread);
    assert_int_equal(atomic_load(&c.acquired), 1);
    assert_false(biased_to_me(&lock));
    if (ordo__asym_cheap()) {
        assert_int_equal(lock.run_to_bias, 2 * run_before); /* revoked once */
    }
    /* The former holder still takes it, through the shared path. */
    ordo_rlock_lock(&lock);
    assert_false(lock.through_bias);
    ordo_rlock_unlock(&lock);
}

/* A thread that read `bias` (its own marker and flag) in ordo_rlock_lock,
 * then was descheduled before raising its flag: meanwhile its bias is
 * revoked and another thread earns the bias (on the other flag: a hand-off
 * is biased at once) and enters. The stale thread's entry (modelled by
 * calling ordo__rlock_enter_bias, which is what ordo_rlock_lock does next)
 * must back off without hiding the new biased holder from a revoker. */
typedef struct stale {
    ordo_rlock_t lock;
    _Atomic int inside; /* the second thread holds the lock through the bias */
    _Atomic int release;
    _Atomic int third_acquired;
} stale_t;

static void *take_bias_and_hold(void *arg) {
    stale_t *s = arg;
    bias_to_me(&s->lock); /* revokes the first thread, then earns the bias */
    ordo_rlock_lock(&s->lock);
    atomic_store(&s->inside, s->lock.through_bias ? 1 : -1);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&s->release) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    ordo_rlock_unlock(&s->lock);
    return NULL;
}

static void *take_once_stale(void *arg) {
    stale_t *s = arg;
    ordo_rlock_lock(&s->lock);
    atomic_store(&s->third_acquired, 1);
    ordo_rlock_unlock(&s->lock);
    return NULL;
}

/* A zeroed fixture of `size` bytes that starts with a lock, biased to this
 * thread (the test is skipped where the lock is never biased). */
static void *biased_fixture(size_t size) {
    if (!ordo__asym_init()) {
        skip();
    }
    void *fixture = calloc(1, size);
    assert_non_null(fixture);
    ordo_rlock_t *lock = fixture;
    ordo__rlock_init(lock);
    bias_to_me(lock);
    assert_true(biased_to_me(lock));
    return fixture;
}

static void test_stale_biased_entry_does_not_hide_the_new_holder(void **state) {
    (void)state;
    stale_t *s = biased_fixture(sizeof *s);
    /* Here this thread would read `bias` == itself and be descheduled. */
    unsigned stale_flag = (unsigned)atomic_load(&s->lock.bias) & 1u;
    pthread_t second = test_thread_start(take_bias_and_hold, s);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&s->inside) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    /* The second thread holds the lock through the bias, on the flag the
     * first thread cannot touch. */
    assert_int_equal(atomic_load(&s->inside), 1);
    assert_int_not_equal((unsigned)atomic_load(&s->lock.bias) & 1u, stale_flag);
    /* This thread resumes its entry: it must see it lost the bias. */
    assert_false(ordo__rlock_enter_bias(&s->lock, stale_flag));
    /* A third thread must still wait for the second to leave. */
    pthread_t third = test_thread_start(take_once_stale, s);
    test_sleep_ms(50);
    int overlapped = atomic_load(&s->third_acquired);
    atomic_store(&s->release, 1);
    test_join_bounded(second);
    test_join_bounded(third);
    assert_int_equal(overlapped, 0);
    assert_int_equal(atomic_load(&s->third_acquired), 1);
    free(s);
}

/* The bias after hand-offs: A earns it, B takes over (biased at once on
 * the other flag) and stays alive without taking the lock again, C takes
 * over from B. Both flags then wait for threads that have not come back,
 * so C is not biased, until A comes through the shared path once. */
typedef struct handoff {
    ordo_rlock_t lock;
    _Atomic int step;   /* raised by the main thread: what to do next */
    _Atomic int done;   /* raised by a helper when its step is done */
    _Atomic int biased; /* what the helper saw at the end of its step */
} handoff_t;

static int wait_for(_Atomic int *flag, int value) {
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load(flag) < value) {
        if (ordo_time_now_ns() >= deadline) {
            return 0;
        }
        test_sleep_ms(1);
    }
    return 1;
}

/* B: earns the bias, then waits without the lock until told to end. */
static void *handoff_b(void *arg) {
    handoff_t *h = arg;
    bias_to_me(&h->lock);
    atomic_store(&h->biased, biased_to_me(&h->lock));
    atomic_store(&h->done, 1);
    (void)wait_for(&h->step, 3);
    return NULL;
}

/* C: takes over from B; then, once A has been through, runs again. */
static void *handoff_c(void *arg) {
    handoff_t *h = arg;
    bias_to_me(&h->lock);
    atomic_store(&h->biased, biased_to_me(&h->lock));
    atomic_store(&h->done, 2);
    if (wait_for(&h->step, 2)) {
        bias_to_me(&h->lock);
        atomic_store(&h->biased, biased_to_me(&h->lock));
    }
    atomic_store(&h->done, 3);
    return NULL;
}

static void test_bias_follows_hand_offs(void **state) {
    (void)state;
    handoff_t *h = biased_fixture(sizeof *h); /* biased to A, this thread */
    pthread_t b = test_thread_start(handoff_b, h);
    assert_true(wait_for(&h->done, 1));
    assert_int_equal(atomic_load(&h->biased), 1); /* biased at once after a hand-off */
    pthread_t c = test_thread_start(handoff_c, h);
    assert_true(wait_for(&h->done, 2));
    assert_int_equal(atomic_load(&h->biased), 0); /* A and B hold both flags */
    ordo_rlock_lock(&h->lock);                    /* A comes through the shared path */
    assert_false(h->lock.through_bias);
    ordo_rlock_unlock(&h->lock);
    atomic_store(&h->step, 2);
    assert_true(wait_for(&h->done, 3));
    assert_int_equal(atomic_load(&h->biased), 1); /* A's flag is free again */
    atomic_store(&h->step, 3);
    test_join_bounded(b);
    test_join_bounded(c);
    free(h);
}

/* A helper thread driven step by step: it does its actions[i] once the
 * test has raised `go` past i, then raises `reached` to i + 1. */
enum { ACT_END, ACT_EARN, ACT_LOCK, ACT_UNLOCK };

typedef struct agent {
    ordo_rlock_t *lock;
    int actions[8];
    _Atomic int go;
    _Atomic int reached;
    _Atomic int held;    /* levels of the lock it holds */
    _Atomic int through; /* through_bias at its last outermost lock */
    _Atomic int biased;  /* biased_to_me after its last action */
    _Atomic(const void *) marker;
    pthread_t thread;
} agent_t;

static void *agent_run(void *arg) {
    agent_t *a = arg;
    atomic_store(&a->marker, (const void *)&ordo__rlock_marker);
    for (int i = 0; a->actions[i] != ACT_END; ++i) {
        if (!wait_for(&a->go, i + 1)) {
            break;
        }
        switch (a->actions[i]) {
        case ACT_EARN:
            bias_to_me(a->lock);
            break;
        case ACT_LOCK:
            ordo_rlock_lock(a->lock);
            if (atomic_fetch_add(&a->held, 1) == 0) {
                atomic_store(&a->through, (int)a->lock->through_bias);
            }
            break;
        default:
            atomic_fetch_sub(&a->held, 1);
            ordo_rlock_unlock(a->lock);
            break;
        }
        atomic_store(&a->biased, biased_to_me(a->lock));
        atomic_store(&a->reached, i + 1);
    }
    /* A test that failed half-way leaves nothing held. */
    for (int n = atomic_load(&a->held); n > 0; --n) {
        ordo_rlock_unlock(a->lock);
    }
    return NULL;
}

static void agent_start(agent_t *a, ordo_rlock_t *lock) {
    a->lock = lock;
    a->thread = test_thread_start(agent_run, a);
}

/* Lets the agent do its next action and waits until it is done. */
static void agent_step(agent_t *a) {
    int next = atomic_fetch_add(&a->go, 1) + 1;
    assert_true(wait_for(&a->reached, next));
}

/* Lets the agent take the lock, which it must not get while another
 * thread holds it: waits until it is revoking the bias, then a little. */
static void agent_step_blocked(agent_t *a, ordo_rlock_t *lock) {
    atomic_fetch_add(&a->go, 1);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&lock->revoking) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    assert_true(atomic_load(&lock->revoking));
    test_sleep_ms(20);
    assert_int_equal(atomic_load(&a->held), 0);
}

/* Joins the agent, which has done all its actions. */
static void agent_finish(agent_t *a) {
    int count = 0;
    while (a->actions[count] != ACT_END) {
        ++count;
    }
    assert_int_equal(atomic_load(&a->reached), count);
    test_join_bounded(a->thread);
}

/* A's entry raised its flag and was descheduled before its check; B has
 * the bias on the other flag and holds the lock. A revoker C waits for B's
 * flag only, not for A's: it gets the lock when B leaves. A then resumes,
 * backs off, and its flag is free again once it has come through the
 * shared path. */
static void test_revoker_waits_only_for_the_flag_it_revokes(void **state) {
    (void)state;
    ordo_rlock_t *lock = biased_fixture(sizeof *lock); /* biased to A, this thread */
    const unsigned a_flag = (unsigned)atomic_load(&lock->bias) & 1u;
    agent_t b = {.actions = {ACT_EARN, ACT_LOCK, ACT_UNLOCK}};
    agent_t c = {.actions = {ACT_LOCK, ACT_UNLOCK}};
    agent_start(&b, lock);
    agent_start(&c, lock);
    agent_step(&b);
    assert_int_equal(atomic_load(&b.biased), 1);
    assert_int_equal((unsigned)atomic_load(&lock->bias) & 1u, a_flag ^ 1u);
    agent_step(&b); /* B holds the lock through the bias */
    assert_int_equal(atomic_load(&b.through), 1 + (int)(a_flag ^ 1u));
    assert_false(ordo__rlock_held(lock));
    /* A's stale entry: its flag is up, its check not yet made. */
    atomic_store(&lock->bias_inside[a_flag], 1);
    agent_step_blocked(&c, lock);
    agent_step(&b);                       /* B leaves */
    assert_true(wait_for(&c.reached, 1)); /* C gets it, A's flag still up */
    assert_int_equal(atomic_load(&c.through), 0);
    assert_int_equal(atomic_load(&lock->bias_inside[a_flag]), 1);
    agent_step(&c);
    agent_finish(&b);
    agent_finish(&c);
    /* A resumes: its check fails (the bias is no longer A's), it backs off. */
    assert_int_not_equal(atomic_load(&lock->bias), ordo__rlock_bias_of_me(a_flag));
    ordo__rlock_back_off_bias(lock, a_flag);
    assert_int_equal(atomic_load(&lock->bias_inside[a_flag]), 0);
    ordo_rlock_lock(lock);
    assert_int_equal(lock->through_bias, 0);
    ordo_rlock_unlock(lock);
    assert_null(lock->revoked[a_flag]); /* A came back: its flag is free */
    free(lock);
}

/* A revocation of B (biased on one flag, holding the lock twice) is under
 * way when A's stale entry on the other flag resumes: A sees `revoking`
 * (shared by both flags) and backs off without disturbing the revoker,
 * which gets the lock only when B has left both levels. */
static void test_stale_entry_during_a_revocation_on_the_other_flag(void **state) {
    (void)state;
    ordo_rlock_t *lock = biased_fixture(sizeof *lock);
    const unsigned a_flag = (unsigned)atomic_load(&lock->bias) & 1u;
    agent_t b = {.actions = {ACT_EARN, ACT_LOCK, ACT_LOCK, ACT_UNLOCK, ACT_UNLOCK}};
    agent_t c = {.actions = {ACT_LOCK, ACT_UNLOCK}};
    agent_start(&b, lock);
    agent_start(&c, lock);
    agent_step(&b);
    agent_step(&b);
    agent_step(&b); /* B holds the lock twice through the bias */
    assert_int_equal(atomic_load(&b.through), 1 + (int)(a_flag ^ 1u));
    agent_step_blocked(&c, lock); /* C is revoking B */
    assert_false(ordo__rlock_enter_bias(lock, a_flag));
    assert_int_equal(atomic_load(&lock->bias_inside[a_flag]), 0);
    assert_int_equal(atomic_load(&lock->bias_inside[a_flag ^ 1u]), 1);
    agent_step(&b); /* one level left: B still holds it */
    test_sleep_ms(20);
    assert_int_equal(atomic_load(&c.held), 0);
    agent_step(&b);
    assert_true(wait_for(&c.reached, 1));
    agent_step(&c);
    agent_finish(&b);
    agent_finish(&c);
    free(lock);
}

/* While A's stale entry is pending on its flag, the bias moves from B to no
 * one (C revokes B: both flags wait for their threads) and back to B once B
 * has come through the shared path: on B's flag again, never on A's. A's
 * entry then backs off, and a revoker still waits for B. */
static void test_bias_returns_only_to_a_free_flag(void **state) {
    (void)state;
    ordo_rlock_t *lock = biased_fixture(sizeof *lock);
    const unsigned a_flag = (unsigned)atomic_load(&lock->bias) & 1u;
    agent_t b = {.actions = {ACT_EARN, ACT_EARN, ACT_LOCK, ACT_UNLOCK}};
    agent_t c = {.actions = {ACT_EARN, ACT_LOCK, ACT_UNLOCK}};
    agent_start(&b, lock);
    agent_start(&c, lock);
    agent_step(&b); /* B revokes A and earns the bias on the other flag */
    assert_int_equal(atomic_load(&b.biased), 1);
    agent_step(&c); /* C revokes B: both flags are reserved */
    assert_int_equal(atomic_load(&c.biased), 0);
    assert_int_equal(atomic_load(&lock->bias), 0);
    agent_step(&b); /* B comes back and earns the bias again */
    assert_int_equal(atomic_load(&b.biased), 1);
    assert_int_equal((unsigned)atomic_load(&lock->bias) & 1u, a_flag ^ 1u);
    agent_step(&b); /* and holds the lock */
    assert_int_equal(atomic_load(&b.through), 1 + (int)(a_flag ^ 1u));
    assert_false(ordo__rlock_enter_bias(lock, a_flag)); /* A resumes */
    agent_step_blocked(&c, lock);
    agent_step(&b);
    assert_true(wait_for(&c.reached, 2));
    agent_step(&c);
    agent_finish(&b);
    agent_finish(&c);
    free(lock);
}

/* A thread that held the bias exits; a new thread may get the same
 * thread-local address, and so the same marker. It then enters through
 * the old thread's bias (harmless: that thread can be neither inside nor on
 * its way in), and a revoker still waits for it. */
static void test_new_thread_on_an_exited_threads_marker(void **state) {
    (void)state;
    ordo_rlock_t *lock = biased_fixture(sizeof *lock);
    agent_t d = {.actions = {ACT_EARN}};
    agent_start(&d, lock);
    agent_step(&d);
    assert_int_equal(atomic_load(&d.biased), 1);
    const uintptr_t d_bias = atomic_load(&lock->bias);
    agent_finish(&d);
    agent_t n = {.actions = {ACT_LOCK, ACT_UNLOCK}};
    agent_t c = {.actions = {ACT_LOCK, ACT_UNLOCK}};
    agent_start(&n, lock);
    agent_step(&n);
    const int reused = atomic_load(&n.marker) == atomic_load(&d.marker);
    print_message("the new thread %s the exited thread's marker\n",
                  reused ? "has" : "does not have");
    agent_start(&c, lock);
    if (reused) {
        assert_int_equal(atomic_load(&n.through), 1 + (int)(d_bias & 1u));
        agent_step_blocked(&c, lock); /* C revokes N */
        agent_step(&n);
        assert_true(wait_for(&c.reached, 1));
    } else {
        assert_int_equal(atomic_load(&n.through), 0); /* it revoked the exited thread */
        agent_step(&n);
        agent_step(&c);
    }
    agent_step(&c);
    agent_finish(&n);
    agent_finish(&c);
    free(lock);
}

/* Contention across bias changes: threads alternate solo runs long
 * enough to earn the bias with bursts that revoke it; a plain counter and
 * an "inside" flag catch any overlap (ThreadSanitizer too). */
#define STRESS_THREADS 4

typedef struct stress {
    ordo_rlock_t lock;
    int inside;
    uint64_t counter;
    _Atomic int overlaps;
    _Atomic int turn;
} stress_t;

typedef struct stress_arg {
    stress_t *s;
    int id;
    uint64_t done;
} stress_arg_t;

static void stress_enter(stress_t *s, uint64_t *rng) {
    ordo_rlock_lock(&s->lock);
    int nested = (test_rand(rng) & 7) == 0;
    if (nested) {
        ordo_rlock_lock(&s->lock);
    }
    if (s->inside) {
        atomic_fetch_add(&s->overlaps, 1);
    }
    s->inside = 1;
    ++s->counter;
    for (unsigned spin = (unsigned)(test_rand(rng) & 15); spin; --spin) {
        ordo__cpu_relax();
    }
    s->inside = 0;
    if (nested) {
        ordo_rlock_unlock(&s->lock);
    }
    ordo_rlock_unlock(&s->lock);
}

static void *stress_thread(void *arg) {
    stress_arg_t *a = arg;
    stress_t *s = a->s;
    uint64_t rng = 0x9e3779b97f4a7c15u * (uint64_t)(a->id + 1);
    const uint64_t rounds = test_scaled(40);
    for (uint64_t r = 0; r < rounds; ++r) {
        /* Whose solo run it is: that thread takes the lock many times in
         * a row (earning the bias), the others once in a while. */
        int mine = atomic_load(&s->turn) % STRESS_THREADS == a->id;
        unsigned burst = mine ? 2000u : 1u + (unsigned)(test_rand(&rng) % 4);
        for (unsigned i = 0; i < burst; ++i) {
            stress_enter(s, &rng);
            ++a->done;
        }
        if (mine) {
            atomic_fetch_add(&s->turn, 1);
        } else {
            test_sleep_ms((unsigned)(test_rand(&rng) % 2));
        }
    }
    return NULL;
}

static void test_mutual_exclusion_across_bias_changes(void **state) {
    (void)state;
    stress_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    ordo__rlock_init(&s->lock);
    stress_arg_t args[STRESS_THREADS];
    pthread_t threads[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; ++i) {
        args[i] = (stress_arg_t){s, i, 0};
        threads[i] = test_thread_start(stress_thread, &args[i]);
    }
    uint64_t expected = 0;
    for (int i = 0; i < STRESS_THREADS; ++i) {
        test_join_bounded(threads[i]);
        expected += args[i].done;
    }
    assert_int_equal(atomic_load(&s->overlaps), 0);
    assert_int_equal(s->counter, expected);
    assert_false(ordo__rlock_held(&s->lock));
    if (ordo__asym_cheap()) {
        /* The bias was earned and revoked at least once. */
        assert_true(s->lock.run_to_bias > 64);
        print_message("run to earn the bias at the end: %u\n", s->lock.run_to_bias);
    }
    free(s);
}

/* The bias moves between threads as fast as it can: every acquisition
 * through the shared path lowers the run that earns the bias to 2, and
 * more threads than cores take the lock with tiny critical sections, so
 * threads are often descheduled between reading `bias` and entering, and
 * revokers often sleep while the biased thread is inside or backing off.
 * Bounded by time; a plain counter and an "inside" flag catch overlap. */
#define CHURN_THREADS 6

typedef struct churn {
    ordo_rlock_t lock;
    int inside;
    uint64_t counter;
    uint64_t biased_entries;
    _Atomic int overlaps;
    uint64_t until_ns;
} churn_t;

typedef struct churn_arg {
    churn_t *c;
    int id;
    uint64_t done;
} churn_arg_t;

/* ordo_rlock_lock with the thread descheduled where preemption can fall
 * between its relaxed read of `bias` and its entry through the bias: for a
 * moment (a yield), or now and then long enough (tens of microseconds) for
 * the bias to be revoked and handed to another thread on the other flag,
 * who may be inside when this entry resumes. */
static void lock_descheduled_after_bias_load(ordo_rlock_t *lock, uint64_t *rng) {
    const void *me = &ordo__rlock_marker;
    uintptr_t bias = atomic_load_explicit(&lock->bias, memory_order_relaxed);
    unsigned flag = (unsigned)bias & 1u;
    if ((bias & ~(uintptr_t)1) == (uintptr_t)me) {
        if (test_rand(rng) & 3) {
            sched_yield();
        } else {
            struct timespec pause = {0, 10000 + (long)(test_rand(rng) % 90000)};
            nanosleep(&pause, NULL);
        }
        if (ordo__rlock_enter_bias(lock, flag)) {
            lock->through_bias = 1 + flag;
            atomic_store_explicit(&lock->owner, me, memory_order_relaxed);
            lock->depth = 1;
            return;
        }
    }
    ordo__rlock_lock_shared(lock);
    lock->through_bias = 0;
    atomic_store_explicit(&lock->owner, me, memory_order_relaxed);
    lock->depth = 1;
}

static void *churn_thread(void *arg) {
    churn_arg_t *a = arg;
    churn_t *c = a->c;
    uint64_t rng = 0x2545f4914f6cdd1du * (uint64_t)(a->id + 1);
    while (ordo_time_now_ns() < c->until_ns) {
        unsigned burst = 1u + (unsigned)(test_rand(&rng) % 8);
        for (unsigned i = 0; i < burst; ++i) {
            if ((test_rand(&rng) & 15) == 0) {
                lock_descheduled_after_bias_load(&c->lock, &rng);
            } else {
                ordo_rlock_lock(&c->lock);
            }
            if (c->inside) {
                atomic_fetch_add(&c->overlaps, 1);
            }
            c->inside = 1;
            ++c->counter;
            if (c->lock.through_bias) {
                ++c->biased_entries;
            } else {
                c->lock.run_to_bias = c->lock.run_to_bias ? 2 : 0; /* under word */
            }
            c->inside = 0;
            ordo_rlock_unlock(&c->lock);
            ++a->done;
        }
        if ((test_rand(&rng) & 63) == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static void test_bias_churn_keeps_mutual_exclusion(void **state) {
    (void)state;
    churn_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    ordo__rlock_init(&c->lock);
    c->until_ns = ordo_time_now_ns() + 2000000000u / ORDO_TEST_SCALE_DIVISOR + 200000000u;
    churn_arg_t args[CHURN_THREADS];
    pthread_t threads[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; ++i) {
        args[i] = (churn_arg_t){c, i, 0};
        threads[i] = test_thread_start(churn_thread, &args[i]);
    }
    uint64_t expected = 0;
    for (int i = 0; i < CHURN_THREADS; ++i) {
        test_join_bounded(threads[i]);
        expected += args[i].done;
    }
    print_message("%llu acquisitions, %llu through the bias, %d overlaps\n",
                  (unsigned long long)expected, (unsigned long long)c->biased_entries,
                  atomic_load(&c->overlaps));
    assert_int_equal(atomic_load(&c->overlaps), 0);
    assert_int_equal(c->counter, expected);
    assert_false(ordo__rlock_held(&c->lock));
    free(c);
}

/* Lost wakeups: again and again one thread holds the lock through the bias
 * for a moment (from nothing to a few microseconds) while several others
 * arrive at once; the first revokes (sleeping or not while the biased
 * thread is inside) and the others queue on the shared path. A wake that
 * is lost leaves a thread asleep and the round's deadline fails. */
#define WAKE_REVOKERS 3

typedef struct wake {
    ordo_rlock_t lock;
    _Atomic uint32_t round;   /* odd: the biased thread is taking the lock */
    _Atomic uint32_t arrived; /* revokers through this round */
    _Atomic int stop;
    int inside;
    _Atomic int overlaps;
    uint64_t biased_rounds;
} wake_t;

static void wake_critical(wake_t *w) {
    if (w->inside) {
        atomic_fetch_add(&w->overlaps, 1);
    }
    w->inside = 1;
    w->inside = 0;
}

static void *wake_revoker(void *arg) {
    wake_t *w = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t round;
        const ordo_deadline_t deadline = test_deadline();
        while ((round = atomic_load(&w->round)) == seen || !(round & 1)) {
            if (atomic_load(&w->stop) || ordo_time_now_ns() >= deadline) {
                return NULL;
            }
            sched_yield();
        }
        seen = round;
        ordo_rlock_lock(&w->lock);
        wake_critical(w);
        ordo_rlock_unlock(&w->lock);
        atomic_fetch_add(&w->arrived, 1);
    }
}

static void test_revokers_woken_after_short_biased_holds(void **state) {
    (void)state;
    wake_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    ordo__rlock_init(&w->lock);
    pthread_t revokers[WAKE_REVOKERS];
    for (int i = 0; i < WAKE_REVOKERS; ++i) {
        revokers[i] = test_thread_start(wake_revoker, w);
    }
    uint64_t rng = 0x853c49e6748fea9bu;
    const uint32_t rounds = (uint32_t)test_scaled(20000);
    int timed_out = 0;
    for (uint32_t r = 0; r < rounds && !timed_out; ++r) {
        /* Earn the bias back at once (run_to_bias is guarded by word). */
        for (int i = 0; i < 3; ++i) {
            ordo_rlock_lock(&w->lock);
            if (!w->lock.through_bias && w->lock.run_to_bias) {
                w->lock.run_to_bias = 1;
            }
            ordo_rlock_unlock(&w->lock);
        }
        atomic_store(&w->arrived, 0);
        ordo_rlock_lock(&w->lock);
        w->biased_rounds += w->lock.through_bias;
        atomic_store(&w->round, 2 * r + 1); /* the revokers come now */
        wake_critical(w);
        for (unsigned spin = (unsigned)(test_rand(&rng) % 4096); spin; --spin) {
            ordo__cpu_relax();
        }
        ordo_rlock_unlock(&w->lock);
        const ordo_deadline_t deadline = test_deadline();
        while (atomic_load(&w->arrived) < WAKE_REVOKERS) {
            if (ordo_time_now_ns() >= deadline) {
                timed_out = 1;
                break;
            }
            sched_yield();
        }
        atomic_store(&w->round, 2 * r + 2);
    }
    atomic_store(&w->stop, 1);
    for (int i = 0; i < WAKE_REVOKERS; ++i) {
        test_join_bounded(revokers[i]);
    }
    print_message("%u rounds, %llu with the bias\n", rounds, (unsigned long long)w->biased_rounds);
    assert_false(timed_out);
    assert_int_equal(atomic_load(&w->overlaps), 0);
    if (ordo__asym_cheap()) {
        assert_true(w->biased_rounds > rounds / 2);
    }
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recursion_and_held),
        cmocka_unit_test(test_a_thread_alone_earns_the_bias),
        cmocka_unit_test(test_revocation_waits_for_the_biased_holder),
        cmocka_unit_test(test_mutual_exclusion_across_bias_changes),
        cmocka_unit_test(test_stale_biased_entry_does_not_hide_the_new_holder),
        cmocka_unit_test(test_bias_follows_hand_offs),
        cmocka_unit_test(test_revoker_waits_only_for_the_flag_it_revokes),
        cmocka_unit_test(test_stale_entry_during_a_revocation_on_the_other_flag),
        cmocka_unit_test(test_bias_returns_only_to_a_free_flag),
        cmocka_unit_test(test_new_thread_on_an_exited_threads_marker),
        cmocka_unit_test(test_bias_churn_keeps_mutual_exclusion),
        cmocka_unit_test(test_revokers_woken_after_short_biased_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
