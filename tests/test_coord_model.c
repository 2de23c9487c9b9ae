/* The coordinator against a simple model: randomised ops across streams
 * and threads, with failing host tasks, abandoned ops, cycles attempted
 * and dispatch; and targeted cases (a dispatched op whose dependency
 * failed, ids across the recent table's growth and reuse of slots, memory
 * running out in each call). */
#include <stdatomic.h>
#include <string.h>

#include "base/futex.h"
#include "ordo/coordinator.h"
#include "test_util.h"

static ordo_device_t *device;

/* ---- an allocator that fails on demand ------------------------------------------------- */

static _Atomic long fail_countdown = -1; /* fail the allocation this many from now; -1 never */
static _Atomic long fails_injected;

static void *failing_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    long n = atomic_load(&fail_countdown);
    while (n >= 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) {
            if (n == 0) {
                atomic_fetch_add(&fails_injected, 1);
                return NULL;
            }
            break;
        }
    }
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static void failing_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user;
    (void)size;
    (void)alignment;
    free(block);
}

static ordo_status_t launch_fails(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_ERR_ABORTED;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_OK;
}

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* ---- a dispatched op whose dependency failed, without callbacks ------------------------ */

static void dispatched_dependent_of_a_failure_fails_once(void **state) {
    (void)state;
    ordo_coord_t *coord = NULL;
    ordo_stream_t *s0 = NULL, *s1 = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    assert_ok(ordo_stream_create(device, 0, &s0));
    assert_ok(ordo_stream_create(device, 0, &s1));
    ordo_op_desc_t desc = {.stream = s0, .launch = launch_fails, .description = "F"};
    ordo_op_id_t f = 0, g = 0, h = 0;
    assert_ok(ordo_coord_register(coord, &desc, &f));
    /* G: dispatched after F, and nobody listens to it. */
    desc = (ordo_op_desc_t){.stream = s1, .deps = &f, .dep_count = 1, .launch = launch_noop};
    assert_ok(ordo_coord_register(coord, &desc, &g));
    size_t launched = 99;
    assert_ok(ordo_coord_dispatch(coord, 10, &launched));
    assert_int_equal(launched, 0);
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(coord, &m));
    assert_int_equal(m.registered, 2);
    assert_int_equal(m.failed, 2);
    assert_int_equal(m.live, 0);
    /* The slot G had is free once, not twice: two new ops get two slots. */
    desc = (ordo_op_desc_t){.stream = s0};
    assert_ok(ordo_coord_register(coord, &desc, &h));
    ordo_op_id_t k = 0;
    assert_ok(ordo_coord_register(coord, &desc, &k));
    assert_ok(ordo_coord_begin(coord, h));
    assert_status(ordo_coord_begin(coord, h), ORDO_ERR_BUSY);
    assert_ok(ordo_coord_begin(coord, k));
    assert_ok(ordo_coord_complete(coord, h));
    assert_ok(ordo_coord_complete(coord, k));
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_metrics(coord, &m));
    assert_int_equal(m.completed, 2);
    assert_int_equal(m.live, 0);
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_destroy(s0));
    assert_ok(ordo_stream_destroy(s1));
}

/* begin's failure names the op that failed, not the retired slot's 0. */
static void begin_failure_names_the_op(void **state) {
    (void)state;
    ordo_coord_t *coord = NULL;
    ordo_stream_t *s0 = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    assert_ok(ordo_stream_create(device, 0, &s0));
    ordo_op_desc_t desc = {.stream = s0, .launch = launch_fails};
    ordo_op_id_t f = 0, g = 0;
    assert_ok(ordo_coord_register(coord, &desc, &f));
    size_t launched = 0;
    assert_ok(ordo_coord_dispatch(coord, 1, &launched));
    desc = (ordo_op_desc_t){.stream = s0, .deps = &f, .dep_count = 1};
    assert_ok(ordo_coord_register(coord, &desc, &g));
    assert_status(ordo_coord_begin(coord, g), ORDO_ERR_ABORTED);
    char expect[64];
    snprintf(expect, sizeof expect, "op %llu:", (unsigned long long)g);
    if (!strstr(ordo_error_message(), expect)) {
        fail_msg("message \"%s\" does not name op %llu", ordo_error_message(),
                 (unsigned long long)g);
    }
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_destroy(s0));
}

/* ---- memory running out in each call ------------------------------------------------- */

typedef struct gate {
    ordo_signal_t *signal;
} gate_t;

static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    return ordo_signal_wait(g->signal, 1, test_deadline());
}

static void seen_cb(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    (void)op;
    _Atomic int *calls = ctx;
    atomic_fetch_add(calls, status == ORDO_OK ? 1 : 1000);
}

static ordo_coord_metrics_t snapshot(ordo_coord_t *coord) {
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(coord, &m));
    return m;
}

/* The counters a refused call must leave alone (ops may finish and
 * retire meanwhile, on their streams' own time). */
static void assert_unchanged(const ordo_coord_metrics_t *a, const ordo_coord_metrics_t *b) {
    assert_int_equal(a->registered, b->registered);
    assert_true(b->live <= a->live);
    assert_int_equal(a->waits_emitted, b->waits_emitted);
    assert_int_equal(a->waits_elided, b->waits_elided);
    assert_int_equal(a->deadlocks_refused, b->deadlocks_refused);
}

/* Runs call with the k-th allocation failing, k = 0, 1, ..., until it
 * succeeds; every failure must be a clean refusal. */
#define UNTIL_OK(coord, call, may_change)                                                          \
    do {                                                                                           \
        for (long k_ = 0;; ++k_) {                                                                 \
            ordo_coord_metrics_t before_ = snapshot(coord);                                        \
            atomic_store(&fail_countdown, k_);                                                     \
            ordo_status_t st_ = (call);                                                            \
            atomic_store(&fail_countdown, -1);                                                     \
            if (st_ == ORDO_OK) {                                                                  \
                break;                                                                             \
            }                                                                                      \
            if (st_ != ORDO_ERR_OUT_OF_MEMORY && st_ != ORDO_ERR_RESOURCE_EXHAUSTED) {             \
                fail_msg("%s at allocation %ld: %s (%s)", #call, k_, ordo_status_name(st_),        \
                         ordo_error_message());                                                    \
            }                                                                                      \
            ordo_coord_metrics_t after_ = snapshot(coord);                                         \
            if (!(may_change)) {                                                                   \
                assert_unchanged(&before_, &after_);                                               \
            }                                                                                      \
            assert_true(k_ < 1000);                                                                \
        }                                                                                          \
    } while (0)

/* A begin refused midway (its second wait needs memory that is not there)
 * keeps the waits it enqueued, and a retry counts each dependency once:
 * the one already waited for is not counted again as elided. The op's
 * stream is filled so that one node of its queue is left: the first wait
 * takes it, the second needs a new slab (src/backends/cpu/cpu_stream.c:
 * 510 nodes each). */
static void begin_retried_after_running_out_counts_each_dependency_once(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    enum { SLAB_NODES = 510 };
    ordo_stream_t *x = NULL, *a = NULL, *b = NULL;
    assert_ok(ordo_stream_create(device, 0, &x));
    assert_ok(ordo_stream_create(device, 0, &a));
    assert_ok(ordo_stream_create(device, 0, &b));
    gate_t gate = {NULL};
    assert_ok(ordo_signal_create(0, &gate.signal));
    ordo_coord_t *coord = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    /* Dependencies on a and b, held back so that begin must wait for both. */
    ordo_op_id_t deps[2];
    ordo_stream_t *origins[2] = {a, b};
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_host_task(origins[i], gate_task, &gate));
        ordo_op_desc_t desc = {.stream = origins[i]};
        assert_ok(ordo_coord_register(coord, &desc, &deps[i]));
        assert_ok(ordo_coord_begin(coord, deps[i]));
        assert_ok(ordo_coord_complete(coord, deps[i]));
    }
    ordo_op_desc_t desc = {.stream = x, .deps = deps, .dep_count = 2};
    ordo_op_id_t op = 0;
    assert_ok(ordo_coord_register(coord, &desc, &op));
    /* x held by the gate, its slab filled: a filler that needs a new slab
     * is refused. Then a new slab with all but one of its nodes taken. */
    assert_ok(ordo_stream_host_task(x, gate_task, &gate));
    ordo_status_t st = ORDO_OK;
    for (int i = 0; st == ORDO_OK; ++i) {
        assert_true(i <= SLAB_NODES);
        atomic_store(&fail_countdown, 0);
        st = ordo_stream_host_task(x, noop_task, NULL);
        atomic_store(&fail_countdown, -1);
    }
    assert_status(st, ORDO_ERR_OUT_OF_MEMORY);
    for (int i = 0; i < SLAB_NODES - 1; ++i) {
        assert_ok(ordo_stream_host_task(x, noop_task, NULL));
    }
    ordo_coord_metrics_t before = snapshot(coord);
    atomic_store(&fail_countdown, 0);
    st = ordo_coord_begin(coord, op);
    atomic_store(&fail_countdown, -1);
    assert_status(st, ORDO_ERR_OUT_OF_MEMORY);
    ordo_coord_metrics_t refused = snapshot(coord);
    assert_int_equal(refused.waits_emitted - before.waits_emitted, 1);
    assert_ok(ordo_coord_begin(coord, op));
    ordo_coord_metrics_t after = snapshot(coord);
    assert_int_equal(after.waits_emitted - before.waits_emitted, 2);
    assert_int_equal(after.waits_elided - before.waits_elided, 0);
    assert_ok(ordo_coord_complete(coord, op));
    assert_ok(ordo_signal_advance(gate.signal, 1));
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_int_equal(snapshot(coord).failed, 0);
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_signal_release(gate.signal));
    ordo_stream_t *streams[3] = {x, a, b};
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
        assert_ok(ordo_stream_destroy(streams[i]));
    }
}

static void running_out_of_memory_leaves_no_trace(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    size_t blocks_before = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_before));
    enum { S = 5, HELD = 300 };
    ordo_stream_t *s[S];
    for (int i = 0; i < S; ++i) {
        assert_ok(ordo_stream_create(device, 0, &s[i]));
    }
    gate_t gate = {NULL};
    assert_ok(ordo_signal_create(0, &gate.signal));
    ordo_coord_t *coord = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    _Atomic int calls = 0;
    int callbacks = 0;
    /* Stream 0 is held by the gate: its completed ops pile up on its ring
     * (which grows several times). */
    assert_ok(ordo_stream_host_task(s[0], gate_task, &gate));
    ordo_op_id_t ids[HELD + 40];
    int n = 0;
    for (; n < HELD; ++n) {
        ordo_op_desc_t desc = {.stream = s[n % 2 ? 0 : 1 + n % (S - 1)],
                               .deps = n ? &ids[n - 1] : NULL,
                               .dep_count = n ? 1 : 0};
        UNTIL_OK(coord, ordo_coord_register(coord, &desc, &ids[n]), 0);
        if (n % 3 == 0) {
            for (int c = 0; c < 4; ++c) { /* beyond the inline callbacks */
                UNTIL_OK(coord, ordo_coord_on_complete(coord, ids[n], seen_cb, &calls), 0);
                callbacks++;
            }
        }
        UNTIL_OK(coord, ordo_coord_begin(coord, ids[n]), 1);
        UNTIL_OK(coord, ordo_coord_complete(coord, ids[n]), 1);
    }
    /* Registrations with many dependencies (recorded, and not yet), some
     * listed twice, and one that is refused midway each time. */
    for (int r = 0; r < 20; ++r, ++n) {
        ordo_op_id_t first = 0;
        ordo_op_desc_t desc = {.stream = s[4]};
        UNTIL_OK(coord, ordo_coord_register(coord, &desc, &first), 0);
        ordo_op_id_t deps[40];
        for (int d = 0; d < 40; ++d) {
            deps[d] = d == 39 ? first : ids[(r * 7 + d * 3) % n];
        }
        desc = (ordo_op_desc_t){.stream = s[r % S], .deps = deps, .dep_count = 40};
        UNTIL_OK(coord, ordo_coord_register(coord, &desc, &ids[n]), 0);
        ordo_op_id_t bad[3] = {first, ids[0], 999999};
        desc.deps = bad;
        desc.dep_count = 3;
        ordo_coord_metrics_t before = snapshot(coord);
        ordo_op_id_t none = 77;
        assert_status(ordo_coord_register(coord, &desc, &none), ORDO_ERR_NOT_FOUND);
        assert_int_equal(none, 0);
        ordo_coord_metrics_t after = snapshot(coord);
        assert_unchanged(&before, &after);
        UNTIL_OK(coord, ordo_coord_add_dependency(coord, ids[n], ids[n - 1]), 0);
        UNTIL_OK(coord, ordo_coord_begin(coord, first), 1);
        UNTIL_OK(coord, ordo_coord_complete(coord, first), 1);
        ++n;
        ids[n] = first;
    }
    /* Nothing on stream 0 is reached yet: its callbacks have not run. */
    assert_ok(ordo_signal_advance(gate.signal, 1));
    for (int i = HELD; i < n; ++i) {
        if (ordo_coord_begin(coord, ids[i]) == ORDO_OK) {
            assert_ok(ordo_coord_complete(coord, ids[i]));
        }
    }
    for (int i = HELD; i < n; ++i) { /* after each one's dependencies */
        ordo_status_t st = ordo_coord_begin(coord, ids[i]);
        if (st == ORDO_OK) {
            assert_ok(ordo_coord_complete(coord, ids[i]));
        }
    }
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    ordo_coord_metrics_t m = snapshot(coord);
    assert_int_equal(atomic_load(&calls), callbacks);
    assert_int_equal(m.failed, 0);
    assert_int_equal(m.completed + m.live, m.registered);
    assert_true(atomic_load(&fails_injected) > 0);
    assert_ok(ordo_coord_destroy(coord));
    for (int i = 0; i < S; ++i) {
        assert_ok(ordo_stream_destroy(s[i]));
    }
    assert_ok(ordo_signal_destroy(gate.signal));
    size_t blocks_after = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_after));
    assert_int_equal(blocks_after, blocks_before);
}

/* ---- randomised ops against a model ---------------------------------------------------- */

#define MODEL_STREAMS 4
#define MODEL_THREADS 3
#define MODEL_MAX_DEPS 24
/* Ops between one's registration and the query of its outcome. */
#define MODEL_LAG 1000

typedef struct mop {
    int stream;
    int ndeps;
    int deps[MODEL_MAX_DEPS]; /* earlier ops, never abandoned ones */
    int abandoned;            /* registered, never begun */
    int dispatched;           /* has a launch function */
    int fails;                /* its host task fails (and with it its stream) */
    int listens;              /* a callback added when registered */
    _Atomic ordo_op_id_t id;  /* 0 until registered */
    _Atomic int ran;          /* its host task ran */
    _Atomic int order_ok;     /* ... after every dependency's */
    _Atomic int calls;        /* its callback, added when registered */
    _Atomic int status;
    _Atomic int outcome_calls; /* the callback added at the end */
    _Atomic int outcome;
} mop_t;

typedef struct model {
    int count;
    mop_t *ops;
    ordo_coord_t *coord;
    ordo_stream_t *streams[MODEL_STREAMS];
    _Atomic int deadlocks; /* refusals seen */
    _Atomic int registered;
    _Atomic int failures;
    uint64_t seed;
} model_t;

typedef struct mtask {
    model_t *m;
    int k;
} mtask_t;

/* Assertions off the test's main thread (cmocka's would unwind the wrong
 * stack): print and abort. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s failed (%s)\n", __FILE__, __LINE__, #cond,                  \
                    ordo_error_message());                                                         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_OK(expr) CHECK((expr) == ORDO_OK)

static ordo_status_t model_task(void *ctx) {
    mtask_t *t = ctx;
    mop_t *op = &t->m->ops[t->k];
    int ok = 1;
    for (int d = 0; d < op->ndeps; ++d) {
        ok &= atomic_load(&t->m->ops[op->deps[d]].ran);
    }
    for (unsigned spin = t->k % 7 == 0 ? 2000 : 0; spin; --spin) {
        ordo__cpu_relax(); /* some tasks take a while: waits get emitted */
    }
    atomic_store(&op->order_ok, ok);
    atomic_store(&op->ran, 1);
    return op->fails ? ORDO_ERR_ABORTED : ORDO_OK;
}

static mtask_t *model_tasks;

static ordo_status_t model_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, model_task, ctx);
}

static void model_cb(void *ctx, ordo_op_id_t id, ordo_status_t status) {
    mop_t *op = ctx;
    CHECK(id == atomic_load(&op->id));
    atomic_store(&op->status, (int)status);
    atomic_fetch_add(&op->calls, 1);
}

static void outcome_cb(void *ctx, ordo_op_id_t id, ordo_status_t status) {
    mop_t *op = ctx;
    CHECK(id == atomic_load(&op->id));
    atomic_store(&op->outcome, (int)status);
    atomic_fetch_add(&op->outcome_calls, 1);
}

typedef struct mthread {
    model_t *m;
    int t;
} mthread_t;

static void *model_thread(void *arg) {
    mthread_t *mt = arg;
    model_t *m = mt->m;
    uint64_t rng = m->seed * 31 + (uint64_t)mt->t + 1;
    for (int k = mt->t; k < m->count; k += MODEL_THREADS) {
        /* Learn an older op's outcome while it is still kept (a
         * callback on a retired op runs at once). */
        if (k >= MODEL_LAG) {
            mop_t *old = &m->ops[k - MODEL_LAG];
            ordo_op_id_t old_id;
            ordo_deadline_t deadline = test_deadline();
            while (!(old_id = atomic_load(&old->id))) {
                CHECK(ordo_time_now_ns() < deadline);
                test_sleep_ms(0);
            }
            CHECK_OK(ordo_coord_on_complete(m->coord, old_id, outcome_cb, old));
        }
        mop_t *op = &m->ops[k];
        ordo_op_id_t deps[MODEL_MAX_DEPS];
        for (int d = 0; d < op->ndeps; ++d) { /* registered by their threads */
            ordo_deadline_t deadline = test_deadline();
            while (!(deps[d] = atomic_load(&m->ops[op->deps[d]].id))) {
                CHECK(ordo_time_now_ns() < deadline);
                test_sleep_ms(0);
            }
        }
        ordo_op_desc_t desc = {.stream = m->streams[op->stream],
                               .priority = (ordo_op_priority_t)(test_rand(&rng) % 5),
                               .deps = deps,
                               .dep_count = (size_t)op->ndeps,
                               .launch = op->dispatched ? model_launch : NULL,
                               .launch_ctx = &model_tasks[k]};
        ordo_op_id_t id = 0;
        CHECK_OK(ordo_coord_register(m->coord, &desc, &id));
        atomic_store(&op->id, id);
        if (op->listens) {
            CHECK_OK(ordo_coord_on_complete(m->coord, id, model_cb, op));
        }
        atomic_fetch_add(&m->registered, 1);
        /* A dependency of its own dependency closes a cycle, unless that
         * one has begun (or retired) already. */
        if (op->ndeps && test_rand(&rng) % 4 == 0) {
            ordo_status_t st = ordo_coord_add_dependency(m->coord, deps[0], id);
            if (st == ORDO_ERR_DEADLOCK) {
                atomic_fetch_add(&m->deadlocks, 1);
            } else if (st != ORDO_ERR_BUSY && st != ORDO_ERR_NOT_FOUND) {
                CHECK(!"add_dependency: unexpected status");
            }
        }
        if (op->abandoned || op->dispatched) {
            continue;
        }
        ordo_deadline_t deadline = test_deadline();
        for (;;) {
            ordo_status_t st = ordo_coord_begin(m->coord, id);
            if (st == ORDO_OK) {
                break;
            }
            if (st != ORDO_ERR_BUSY) { /* a dependency failed: so has the op */
                atomic_fetch_add(&m->failures, 1);
                goto next;
            }
            size_t launched = 0;
            CHECK_OK(ordo_coord_dispatch(m->coord, 4, &launched));
            CHECK(ordo_time_now_ns() < deadline);
            test_sleep_ms(0);
        }
        {
            /* A stream that waited on a failed point has failed too. */
            ordo_stream_t *stream = m->streams[op->stream];
            ordo_status_t st = ordo_stream_host_task(stream, model_task, &model_tasks[k]);
            CHECK(st == ORDO_OK || st == ordo_stream_status(stream));
            st = ordo_coord_complete(m->coord, id);
            CHECK(st == ORDO_OK || st == ordo_stream_status(stream));
        }
    next:
        if (test_rand(&rng) % 8 == 0) {
            size_t launched = 0;
            CHECK_OK(ordo_coord_dispatch(m->coord, 8, &launched));
        }
    }
    return NULL;
}

static void model_round(uint64_t seed, int count) {
    model_t m = {.count = count, .seed = seed};
    m.ops = calloc((size_t)count, sizeof *m.ops);
    model_tasks = calloc((size_t)count, sizeof *model_tasks);
    assert_non_null(m.ops);
    assert_non_null(model_tasks);
    uint64_t rng = seed;
    int poisoned = (int)(test_rand(&rng) % (MODEL_STREAMS + 2)); /* maybe no stream fails */
    for (int k = 0; k < count; ++k) {
        mop_t *op = &m.ops[k];
        model_tasks[k] = (mtask_t){&m, k};
        op->stream = (int)(test_rand(&rng) % MODEL_STREAMS);
        op->abandoned = test_rand(&rng) % 23 == 0;
        op->dispatched = test_rand(&rng) % 3 == 0;
        op->listens = test_rand(&rng) % 2 == 0;
        op->fails = op->stream == poisoned && test_rand(&rng) % 300 == 0;
        int want = test_rand(&rng) % 16 == 0 ? MODEL_MAX_DEPS : (int)(test_rand(&rng) % 4);
        for (int tries = 0; k && op->ndeps < want && tries < 4 * want; ++tries) {
            /* Mostly recent ops (still in flight), some older ones. */
            int span = test_rand(&rng) % 4 ? 12 : 1500; /* within the failures kept */
            span = span < k ? span : k;
            int d = k - 1 - (int)(test_rand(&rng) % (uint64_t)span);
            if (!m.ops[d].abandoned) {
                op->deps[op->ndeps++] = d; /* duplicates kept */
            }
        }
    }
    assert_ok(ordo_coord_create(device, NULL, &m.coord));
    for (int i = 0; i < MODEL_STREAMS; ++i) {
        assert_ok(ordo_stream_create(device, 0, &m.streams[i]));
    }
    mthread_t args[MODEL_THREADS];
    pthread_t threads[MODEL_THREADS];
    for (int t = 0; t < MODEL_THREADS; ++t) {
        args[t] = (mthread_t){&m, t};
        threads[t] = test_thread_start(model_thread, &args[t]);
    }
    for (int t = 0; t < MODEL_THREADS; ++t) {
        pthread_join(threads[t], NULL);
    }
    /* Dispatch what is left (each launch may make more ready). */
    ordo_deadline_t deadline = test_deadline();
    for (;;) {
        size_t launched = 0;
        assert_ok(ordo_coord_dispatch(m.coord, (size_t)count, &launched));
        assert_ok(ordo_coord_drain(m.coord, test_deadline()));
        if (!launched) {
            break;
        }
        assert_true(ordo_time_now_ns() < deadline);
    }
    /* Every op's outcome: at once for finished ones, at destroy for the
     * rest. */
    for (int k = count > MODEL_LAG ? count - MODEL_LAG : 0; k < count; ++k) {
        assert_ok(
            ordo_coord_on_complete(m.coord, atomic_load(&m.ops[k].id), outcome_cb, &m.ops[k]));
    }
    assert_ok(ordo_coord_drain(m.coord, test_deadline()));
    ordo_coord_metrics_t mm;
    assert_ok(ordo_coord_metrics(m.coord, &mm));
    int ok = 0, failed = 0, open = 0;
    for (int k = 0; k < count; ++k) {
        mop_t *op = &m.ops[k];
        if (!atomic_load(&op->outcome_calls)) {
            if (!op->abandoned) {
                fail_msg("op %d (%s) never finished", k, op->dispatched ? "dispatched" : "by hand");
            }
            open++;
            continue;
        }
        assert_int_equal(atomic_load(&op->outcome_calls), 1);
        ordo_status_t st = (ordo_status_t)atomic_load(&op->outcome);
        if (op->listens) {
            assert_int_equal(atomic_load(&op->calls), 1);
            assert_int_equal(atomic_load(&op->status), st);
        }
        int dep_failed = 0;
        for (int d = 0; d < op->ndeps; ++d) {
            mop_t *dep = &m.ops[op->deps[d]];
            if (st == ORDO_OK && atomic_load(&dep->outcome_calls) != 1) {
                fail_msg("op %d finished before its dependency %d", k, op->deps[d]);
            }
            dep_failed |= atomic_load(&dep->outcome) != ORDO_OK;
        }
        if (st == ORDO_OK) {
            ok++;
            assert_false(dep_failed);
            assert_false(op->fails);
            assert_true(atomic_load(&op->ran));
            assert_true(atomic_load(&op->order_ok));
        } else {
            failed++;
            /* Only a dependency or its stream (which failed a task or
             * waited on a failed point) fails it. */
            assert_true(dep_failed || ordo_stream_status(m.streams[op->stream]) != ORDO_OK);
            assert_true(poisoned < MODEL_STREAMS);
        }
        if (dep_failed || op->fails) {
            assert_int_not_equal(st, ORDO_OK);
        }
    }
    if (getenv("ORDO_MODEL_VERBOSE")) {
        print_message(
            "ok %d failed %d open %d deadlocks %d emitted %llu elided %llu dispatched %llu\n", ok,
            failed, open, atomic_load(&m.deadlocks), (unsigned long long)mm.waits_emitted,
            (unsigned long long)mm.waits_elided, (unsigned long long)mm.dispatched);
    }
    assert_int_equal(mm.registered, (uint64_t)atomic_load(&m.registered));
    assert_int_equal(mm.completed, (uint64_t)ok);
    assert_int_equal(mm.failed, (uint64_t)failed);
    assert_int_equal(mm.live, (uint64_t)open);
    assert_int_equal(mm.deadlocks_refused, (uint64_t)atomic_load(&m.deadlocks));
    /* Stale ids: retired ones are refused, never another op's. */
    ordo_stream_t *where = NULL;
    for (int k = 0; k < count; ++k) {
        mop_t *op = &m.ops[k];
        ordo_status_t st = ordo_coord_op_stream(m.coord, atomic_load(&op->id), &where);
        if (atomic_load(&op->outcome_calls)) {
            assert_true(st == ORDO_ERR_BUSY || st == ORDO_ERR_NOT_FOUND);
            assert_true(ordo_coord_begin(m.coord, atomic_load(&op->id)) != ORDO_OK);
        } else {
            assert_ok(st);
            assert_ptr_equal(where, m.streams[op->stream]);
        }
    }
    assert_status(ordo_coord_op_stream(m.coord, mm.registered + 1, &where), ORDO_ERR_NOT_FOUND);
    assert_ok(ordo_coord_destroy(m.coord));
    for (int k = 0; k < count; ++k) { /* the open ones were cancelled */
        mop_t *op = &m.ops[k];
        assert_int_equal(atomic_load(&op->outcome_calls), 1);
        if (op->listens) {
            assert_int_equal(atomic_load(&op->calls), 1);
        }
    }
    for (int i = 0; i < MODEL_STREAMS; ++i) {
        (void)ordo_stream_synchronize(m.streams[i], test_deadline());
        assert_ok(ordo_stream_destroy(m.streams[i]));
    }
    free(m.ops);
    free(model_tasks);
    model_tasks = NULL;
}

static void random_ops_match_the_model(void **state) {
    (void)state;
    const char *env = getenv("ORDO_MODEL_SEED");
    uint64_t first = env ? strtoull(env, NULL, 0) : 1;
    int rounds = env ? 1 : (int)test_scaled(16);
    for (int r = 0; r < rounds; ++r) {
        uint64_t seed = first + (uint64_t)r * 0x9e3779b9u;
        print_message("seed %llu\n", (unsigned long long)seed);
        /* At most as many ops as failures are remembered: a failed stream
         * can fail every later op, and an op whose outcome the round
         * queries must not be forgotten under newer failures. */
        model_round(seed, (int)test_scaled(ORDO_COORD_FAILURES_KEPT));
    }
}

static int setup(void **state) {
    (void)state;
    ordo_allocator_t hooks = {failing_allocate, failing_deallocate, NULL};
    if (ordo_allocator_set(&hooks) != ORDO_OK) {
        return -1;
    }
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    test_conformance_begin("coordinator-model");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dispatched_dependent_of_a_failure_fails_once),
        cmocka_unit_test(begin_failure_names_the_op),
        cmocka_unit_test(begin_retried_after_running_out_counts_each_dependency_once),
        cmocka_unit_test(running_out_of_memory_leaves_no_trace),
        cmocka_unit_test(random_ops_match_the_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
