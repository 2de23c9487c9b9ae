/* The operation coordinator on CPU streams: dependencies across streams
 * checked with real data, waits emitted and elided, failures reaching
 * callbacks, dispatch by priority, callbacks exactly once (also from
 * several threads), cycles refused and listed, retirement and stale ids,
 * stream pools, registrations refused after attaching a fresh stream
 * (alone and from several threads), bad input on every entry point. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "coord/coord_internal.h"
#include "ordo/coordinator.h"
#include "refusal.h"
#include "signal_probe.h"
#include "test_util.h"

static ordo_device_t *device;

#define STREAMS 4

typedef struct fixture {
    ordo_coord_t *coord;
    ordo_stream_t *s[STREAMS];
} fixture_t;

static fixture_t *fixture_make_flags(uint32_t flags) {
    fixture_t *f = calloc(1, sizeof *f);
    ordo_coord_config_t config = {NULL, flags};
    assert_ok(ordo_coord_create(device, &config, &f->coord));
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_create(device, 0, &f->s[i]));
    }
    return f;
}

static fixture_t *fixture_make(void) {
    return fixture_make_flags(0);
}

static void fixture_free(fixture_t *f) {
    for (int i = 0; i < STREAMS; ++i) {
        (void)ordo_stream_synchronize(f->s[i], test_deadline());
    }
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_ok(ordo_coord_destroy(f->coord));
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
    free(f);
}

static ordo_op_id_t reg(fixture_t *f, ordo_stream_t *stream, const ordo_op_id_t *deps, size_t n,
                        const char *description) {
    ordo_op_desc_t desc = {.type = ORDO_OP_KERNEL,
                           .priority = ORDO_OP_PRIORITY_NORMAL,
                           .stream = stream,
                           .deps = deps,
                           .dep_count = n,
                           .description = description};
    ordo_op_id_t id = 0;
    assert_ok(ordo_coord_register(f->coord, &desc, &id));
    assert_true(id != 0);
    return id;
}

static ordo_coord_metrics_t metrics(fixture_t *f) {
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(f->coord, &m));
    return m;
}

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* A host task that holds its stream until the gate opens, then returns
 * its status: so the test decides when work finishes. */
typedef struct gate {
    ordo_signal_t *signal;
    ordo_status_t result;
} gate_t;

static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    ordo_status_t st = ordo_signal_wait(g->signal, 1, test_deadline());
    return st == ORDO_OK ? g->result : st;
}

static void gate_init(gate_t *g, ordo_status_t result) {
    g->signal = test_signal_make(0);
    g->result = result;
}

static void gate_open(gate_t *g) {
    assert_ok(ordo_signal_advance(g->signal, 1));
}

static void gate_fini(gate_t *g) {
    assert_ok(ordo_signal_destroy(g->signal));
}

/* Callbacks: each records its calls and the last status. */
typedef struct seen {
    _Atomic int calls;
    _Atomic int status;
    _Atomic ordo_op_id_t op;
} seen_t;

static void on_done(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    seen_t *s = ctx;
    atomic_store(&s->status, (int)status);
    atomic_store(&s->op, op);
    atomic_fetch_add(&s->calls, 1);
}

/* ---- dependencies across streams, with real data -------------------------------------- */

#define DAG_MAX 400
#define DAG_DEPS 3

typedef struct dag {
    int count;
    int stream[DAG_MAX];
    int ndeps[DAG_MAX];
    int deps[DAG_MAX][DAG_DEPS];
    unsigned spin_ns[DAG_MAX];
    uint64_t expected[DAG_MAX];
    _Atomic uint64_t value[DAG_MAX];
    _Atomic int violations;
    seen_t seen[DAG_MAX];
    ordo_op_id_t id[DAG_MAX];
} dag_t;

typedef struct dag_task {
    dag_t *dag;
    int k;
} dag_task_t;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h;
}

/* Op k: reads its dependencies' values (each must be there already) and
 * writes its own, after a little work to let other streams overtake. */
static ordo_status_t dag_run(void *ctx) {
    dag_task_t *t = ctx;
    dag_t *d = t->dag;
    uint64_t until = ordo_time_now_ns() + d->spin_ns[t->k];
    while (ordo_time_now_ns() < until) {
    }
    uint64_t h = (uint64_t)t->k + 1;
    for (int j = 0; j < d->ndeps[t->k]; ++j) {
        uint64_t v = atomic_load_explicit(&d->value[d->deps[t->k][j]], memory_order_acquire);
        if (v == 0) {
            atomic_fetch_add(&d->violations, 1);
        }
        h = mix(h, v);
    }
    atomic_store_explicit(&d->value[t->k], h | 1, memory_order_release);
    return ORDO_OK;
}

static void dag_make(dag_t *d, int count, int streams, uint64_t *rng) {
    memset(d, 0, sizeof *d);
    d->count = count;
    for (int k = 0; k < count; ++k) {
        d->stream[k] = (int)(test_rand(rng) % (uint64_t)streams);
        d->spin_ns[k] = (unsigned)(test_rand(rng) % 20000u);
        int want = k ? (int)(test_rand(rng) % (DAG_DEPS + 1)) : 0;
        for (int j = 0; j < want; ++j) {
            /* Mostly recent ops, so that most are still running. */
            int span = k < 8 ? k : 8;
            int dep = test_rand(rng) % 4 == 0 ? (int)(test_rand(rng) % (uint64_t)k)
                                              : k - 1 - (int)(test_rand(rng) % (uint64_t)span);
            int dup = 0;
            for (int i = 0; i < d->ndeps[k]; ++i) {
                dup |= d->deps[k][i] == dep;
            }
            if (!dup) {
                d->deps[k][d->ndeps[k]++] = dep;
            }
        }
        uint64_t h = (uint64_t)k + 1;
        for (int j = 0; j < d->ndeps[k]; ++j) {
            h = mix(h, d->expected[d->deps[k][j]]);
        }
        d->expected[k] = h | 1;
    }
}

static void dag_check(dag_t *d) {
    assert_int_equal(atomic_load(&d->violations), 0);
    for (int k = 0; k < d->count; ++k) {
        assert_int_equal(atomic_load(&d->value[k]), d->expected[k]);
        assert_int_equal(atomic_load(&d->seen[k].calls), 1);
        assert_int_equal(atomic_load(&d->seen[k].status), ORDO_OK);
        assert_int_equal(atomic_load(&d->seen[k].op), d->id[k]);
    }
}

static void dependencies_order_real_data_across_streams(void **state) {
    (void)state;
    static dag_t d;
    static dag_task_t tasks[DAG_MAX];
    uint64_t rng = 0x5eed0001;
    const int rounds = (int)test_scaled(12);
    for (int round = 0; round < rounds; ++round) {
        int streams = 2 + round % 3; /* 2, 3 and 4 streams */
        fixture_t *f = fixture_make();
        dag_make(&d, DAG_MAX, streams, &rng);
        uint64_t dep_total = 0;
        for (int k = 0; k < d.count; ++k) {
            ordo_op_id_t deps[DAG_DEPS];
            for (int j = 0; j < d.ndeps[k]; ++j) {
                deps[j] = d.id[d.deps[k][j]];
            }
            dep_total += (uint64_t)d.ndeps[k];
            char text[32];
            snprintf(text, sizeof text, "op %d", k);
            d.id[k] = reg(f, f->s[d.stream[k]], deps, (size_t)d.ndeps[k], text);
            assert_ok(ordo_coord_on_complete(f->coord, d.id[k], on_done, &d.seen[k]));
            assert_ok(ordo_coord_begin(f->coord, d.id[k]));
            tasks[k] = (dag_task_t){&d, k};
            assert_ok(ordo_stream_host_task(f->s[d.stream[k]], dag_run, &tasks[k]));
            assert_ok(ordo_coord_complete(f->coord, d.id[k]));
        }
        assert_ok(ordo_coord_drain(f->coord, test_deadline()));
        dag_check(&d);
        ordo_coord_metrics_t m = metrics(f);
        assert_int_equal(m.registered, (uint64_t)d.count);
        assert_int_equal(m.completed, (uint64_t)d.count);
        assert_int_equal(m.failed, 0);
        assert_int_equal(m.live, 0); /* all retired */
        /* Every dependency was either waited for or found not to need it. */
        assert_int_equal(m.waits_emitted + m.waits_elided, dep_total);
        assert_true(m.waits_emitted > 0);
        assert_true(m.coordination_ns > 0 && m.coordination_ns_per_op > 0);
        fixture_free(f);
    }
}

/* The same programs, driven by dispatch: every op registered up front. */
static ordo_status_t dag_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, dag_run, ctx);
}

static void dispatch_orders_real_data_across_streams(void **state) {
    (void)state;
    static dag_t d;
    static dag_task_t tasks[DAG_MAX];
    uint64_t rng = 0x5eed0002;
    const int rounds = (int)test_scaled(6);
    for (int round = 0; round < rounds; ++round) {
        fixture_t *f = fixture_make();
        dag_make(&d, DAG_MAX, 2 + round % 3, &rng);
        for (int k = 0; k < d.count; ++k) {
            ordo_op_id_t deps[DAG_DEPS];
            for (int j = 0; j < d.ndeps[k]; ++j) {
                deps[j] = d.id[d.deps[k][j]];
            }
            tasks[k] = (dag_task_t){&d, k};
            ordo_op_desc_t desc = {.type = ORDO_OP_KERNEL,
                                   .priority = (ordo_op_priority_t)(k % 5),
                                   .stream = f->s[d.stream[k]],
                                   .deps = deps,
                                   .dep_count = (size_t)d.ndeps[k],
                                   .launch = dag_launch,
                                   .launch_ctx = &tasks[k]};
            assert_ok(ordo_coord_register(f->coord, &desc, &d.id[k]));
            assert_ok(ordo_coord_on_complete(f->coord, d.id[k], on_done, &d.seen[k]));
        }
        /* Readiness needs only recorded points: one call launches all. */
        size_t launched = 0;
        assert_ok(ordo_coord_dispatch(f->coord, SIZE_MAX, &launched));
        assert_int_equal(launched, (size_t)d.count);
        assert_ok(ordo_coord_dispatch(f->coord, SIZE_MAX, &launched));
        assert_int_equal(launched, 0);
        assert_ok(ordo_coord_drain(f->coord, test_deadline()));
        dag_check(&d);
        ordo_coord_metrics_t m = metrics(f);
        assert_int_equal(m.dispatched, (uint64_t)d.count);
        assert_int_equal(m.live, 0);
        fixture_free(f);
    }
}

/* ---- waits emitted and elided -------------------------------------------------------- */

static void waits_are_emitted_once_and_elided_when_known(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_stream_t *A = f->s[0];
    ordo_stream_t *B = f->s[1];
    ordo_stream_t *C = f->s[2];
    gate_t gate;
    gate_init(&gate, ORDO_OK);
    /* Nothing finishes until the gate opens: elisions come from what the
     * streams know, not from finished work. */
    ordo_op_id_t a1 = reg(f, A, NULL, 0, "a1");
    assert_ok(ordo_coord_begin(f->coord, a1));
    assert_ok(ordo_stream_host_task(A, gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, a1));

#define RUN(id)                                                                                    \
    do {                                                                                           \
        assert_ok(ordo_coord_begin(f->coord, id));                                                 \
        assert_ok(ordo_coord_complete(f->coord, id));                                              \
    } while (0)

    ordo_op_id_t b1 = reg(f, B, (ordo_op_id_t[]){a1}, 1, "b1");
    RUN(b1);
    ordo_coord_metrics_t m = metrics(f);
    assert_int_equal(m.waits_emitted, 1);
    assert_int_equal(m.waits_elided, 0);
    ordo_op_id_t b2 = reg(f, B, (ordo_op_id_t[]){a1}, 1, "b2"); /* B knows a1 */
    RUN(b2);
    ordo_op_id_t a2 = reg(f, A, (ordo_op_id_t[]){a1}, 1, "a2"); /* same stream */
    RUN(a2);
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 1);
    assert_int_equal(m.waits_elided, 2);
    ordo_op_id_t c1 = reg(f, C, (ordo_op_id_t[]){b1}, 1, "c1");
    RUN(c1);
    ordo_op_id_t c2 = reg(f, C, (ordo_op_id_t[]){a1}, 1, "c2"); /* known through b1 */
    RUN(c2);
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 2);
    assert_int_equal(m.waits_elided, 3);
    /* Two dependencies on A collapse into one wait on the later. */
    ordo_op_id_t c3 = reg(f, C, (ordo_op_id_t[]){a1, a2}, 2, "c3");
    RUN(c3);
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 3);
    assert_int_equal(m.waits_elided, 4);
    /* Duplicates in the list merge: one wait, the repeats elided. */
    ordo_op_id_t b3 = reg(f, B, (ordo_op_id_t[]){c3, c3, c3}, 3, "b3");
    RUN(b3);
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 4);
    assert_int_equal(m.waits_elided, 6);
#undef RUN
    gate_open(&gate);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    /* Finished dependencies need nothing. */
    ordo_op_id_t d1 = reg(f, C, (ordo_op_id_t[]){a2, b3}, 2, "d1");
    assert_ok(ordo_coord_begin(f->coord, d1));
    assert_ok(ordo_coord_complete(f->coord, d1));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 4);
    assert_int_equal(m.waits_elided, 8);
    assert_int_equal(m.completed, 9);
    fixture_free(f);
    gate_fini(&gate);
}

/* ---- failures --------------------------------------------------------------------------- */

static void failures_reach_every_callback(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate;
    gate_init(&gate, ORDO_ERR_ABORTED);
    seen_t sx = {0}, sy = {0}, sz = {0}, sw = {0}, sv = {0}, late = {0};
    /* x fails on stream 0 after y on stream 1 began waiting for it. */
    ordo_op_id_t x = reg(f, f->s[0], NULL, 0, "x");
    assert_ok(ordo_coord_on_complete(f->coord, x, on_done, &sx));
    assert_ok(ordo_coord_begin(f->coord, x));
    assert_ok(ordo_stream_host_task(f->s[0], gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, x));
    ordo_op_id_t y = reg(f, f->s[1], &x, 1, "y");
    assert_ok(ordo_coord_on_complete(f->coord, y, on_done, &sy));
    assert_ok(ordo_coord_begin(f->coord, y));
    assert_ok(ordo_stream_host_task(f->s[1], noop_task, NULL));
    assert_ok(ordo_coord_complete(f->coord, y));
    /* z is registered now but begins after x failed. */
    ordo_op_id_t z = reg(f, f->s[2], &x, 1, "z");
    assert_ok(ordo_coord_on_complete(f->coord, z, on_done, &sz));
    gate_open(&gate);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(atomic_load(&sx.calls), 1);
    assert_int_equal(atomic_load(&sx.status), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sy.calls), 1); /* through stream 1's failed wait */
    assert_int_equal(atomic_load(&sy.status), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sz.calls), 0);
    /* A known failure fails the op at begin; its stream stays healthy. */
    assert_status(ordo_coord_begin(f->coord, z), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sz.calls), 1);
    assert_int_equal(atomic_load(&sz.status), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_status(f->s[2]));
    /* x has retired (no op waits for it any more); its failure is kept. */
    ordo_coord_metrics_t m = metrics(f);
    assert_int_equal(m.failed, 3);
    assert_int_equal(m.live, 0);
    ordo_op_id_t w = reg(f, f->s[3], &x, 1, "w");
    assert_ok(ordo_coord_on_complete(f->coord, w, on_done, &sw));
    assert_status(ordo_coord_begin(f->coord, w), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sw.status), ORDO_ERR_ABORTED);
    assert_ok(ordo_coord_on_complete(f->coord, x, on_done, &late)); /* at once */
    assert_int_equal(atomic_load(&late.calls), 1);
    assert_int_equal(atomic_load(&late.status), ORDO_ERR_ABORTED);
    /* Completing on a failed stream fails the op with the stream's status. */
    ordo_op_id_t v = reg(f, f->s[0], NULL, 0, "v");
    assert_ok(ordo_coord_on_complete(f->coord, v, on_done, &sv));
    assert_ok(ordo_coord_begin(f->coord, v));
    assert_status(ordo_coord_complete(f->coord, v), ORDO_ERR_ABORTED);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(atomic_load(&sv.calls), 1);
    assert_int_equal(atomic_load(&sv.status), ORDO_ERR_ABORTED);
    m = metrics(f);
    assert_int_equal(m.failed, 5);
    assert_int_equal(m.completed, 0);
    fixture_free(f);
    gate_fini(&gate);
}

static ordo_status_t launch_fails(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_ERR_ABORTED;
}

static ordo_status_t launch_must_not_run(void *ctx, ordo_stream_t *stream) {
    (void)stream;
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

/* A dependency that has failed short of its point fails the op at begin
 * also when begin would emit no wait for it: one on the op's own stream,
 * and one whose origin the op's stream has already waited for further. */
static void failed_dependencies_without_a_wait_fail_at_begin(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate;
    gate_init(&gate, ORDO_ERR_ABORTED);
    seen_t sa = {0}, sb = {0}, sc = {0};
    /* a1 fails on stream 0 (its task fails the stream); a2 comes after. */
    ordo_op_id_t a1 = reg(f, f->s[0], NULL, 0, "a1");
    assert_ok(ordo_coord_on_complete(f->coord, a1, on_done, &sa));
    assert_ok(ordo_coord_begin(f->coord, a1));
    assert_ok(ordo_stream_host_task(f->s[0], gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, a1));
    ordo_op_id_t a2 = reg(f, f->s[0], NULL, 0, "a2");
    assert_ok(ordo_coord_begin(f->coord, a2));
    assert_ok(ordo_coord_complete(f->coord, a2));
    /* Stream 1 waits for a2's point, beyond a1's. */
    ordo_op_id_t x = reg(f, f->s[1], &a2, 1, "x");
    assert_ok(ordo_coord_begin(f->coord, x));
    assert_ok(ordo_coord_complete(f->coord, x));
    /* Registered while a1 has not failed yet: both take a1's point. */
    ordo_op_id_t b = reg(f, f->s[0], &a1, 1, "b (same stream)");
    ordo_op_id_t c = reg(f, f->s[1], &a1, 1, "c (waited for already)");
    assert_ok(ordo_coord_on_complete(f->coord, b, on_done, &sb));
    assert_ok(ordo_coord_on_complete(f->coord, c, on_done, &sc));
    gate_open(&gate);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(atomic_load(&sa.calls), 1);
    assert_int_equal(atomic_load(&sa.status), ORDO_ERR_ABORTED);
    /* a1 is known to have failed: begin says so, and nothing is enqueued. */
    assert_status(ordo_coord_begin(f->coord, b), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sb.calls), 1);
    assert_int_equal(atomic_load(&sb.status), ORDO_ERR_ABORTED);
    assert_status(ordo_coord_begin(f->coord, c), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sc.calls), 1);
    assert_int_equal(atomic_load(&sc.status), ORDO_ERR_ABORTED);
    /* A dependency whose point was reached before its stream failed has
     * not failed: begin goes on, and the op fails with the stream at
     * complete. */
    ordo_op_id_t p = reg(f, f->s[3], NULL, 0, "p");
    assert_ok(ordo_coord_begin(f->coord, p));
    assert_ok(ordo_coord_complete(f->coord, p));
    ordo_op_id_t q = reg(f, f->s[3], &p, 1, "q");
    gate_t fails_now;
    gate_init(&fails_now, ORDO_ERR_ABORTED);
    gate_open(&fails_now);
    assert_ok(ordo_stream_host_task(f->s[3], gate_task, &fails_now));
    assert_status(ordo_stream_synchronize(f->s[3], test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_coord_begin(f->coord, q));
    assert_status(ordo_coord_complete(f->coord, q), ORDO_ERR_ABORTED);
    gate_fini(&fails_now);
    fixture_free(f);
    gate_fini(&gate);
}

static void failed_launch_fails_its_dependents(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    _Atomic int ran = 0;
    seen_t sf = {0}, sg = {0}, sh = {0};
    ordo_op_desc_t desc = {.stream = f->s[0], .launch = launch_fails, .description = "F"};
    ordo_op_id_t F;
    assert_ok(ordo_coord_register(f->coord, &desc, &F));
    desc = (ordo_op_desc_t){.stream = f->s[1],
                            .deps = &F,
                            .dep_count = 1,
                            .launch = launch_must_not_run,
                            .launch_ctx = &ran,
                            .description = "G"};
    ordo_op_id_t G;
    assert_ok(ordo_coord_register(f->coord, &desc, &G));
    ordo_op_id_t H = reg(f, f->s[2], &G, 1, "H"); /* by hand, after G */
    assert_ok(ordo_coord_on_complete(f->coord, F, on_done, &sf));
    assert_ok(ordo_coord_on_complete(f->coord, G, on_done, &sg));
    assert_ok(ordo_coord_on_complete(f->coord, H, on_done, &sh));
    assert_status(ordo_coord_begin(f->coord, H), ORDO_ERR_BUSY); /* G has not completed */
    /* F's launch and G's begin fail inside a dispatch that succeeds: the
     * caller's message stays (ordo/status.h); the ops' callbacks say why. */
    char before[512];
    snprintf(before, sizeof before, "%s", ordo_error_message());
    size_t launched = 99;
    assert_ok(ordo_coord_dispatch(f->coord, 10, &launched));
    assert_string_equal(ordo_error_message(), before);
    assert_int_equal(launched, 0);
    assert_int_equal(atomic_load(&ran), 0);
    assert_int_equal(atomic_load(&sf.status), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sg.status), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sg.calls), 1);
    assert_status(ordo_coord_begin(f->coord, H), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&sh.calls), 1);
    assert_int_equal(metrics(f).failed, 3);
    fixture_free(f);
}

/* A launch function runs outside the coordinator's lock, and the
 * dispatcher writes its op again after it: a destroy from inside it is
 * refused (it freed the coordinator under the dispatcher), and a drain on
 * another thread waits for it (it returned while the launch ran, and a
 * destroy after it did the same). */
typedef struct launch_gate {
    ordo_coord_t *coord;
    _Atomic int destroy_status;
    _Atomic int entered;
    ordo_signal_t *open; /* the launch returns once it reaches 1 */
} launch_gate_t;

static ordo_status_t launch_destroys(void *ctx, ordo_stream_t *stream) {
    (void)stream;
    launch_gate_t *g = ctx;
    atomic_store(&g->destroy_status, (int)ordo_coord_destroy(g->coord));
    return ORDO_OK;
}

static ordo_status_t launch_held(void *ctx, ordo_stream_t *stream) {
    (void)stream;
    launch_gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    return ordo_signal_wait(g->open, 1, test_deadline());
}

static void *dispatch_main(void *arg) {
    fixture_t *f = arg;
    size_t launched = 0;
    (void)ordo_coord_dispatch(f->coord, 1, &launched);
    return NULL;
}

static void launch_functions_hold_off_destroy_and_drain(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t *f = fixture_make();
    launch_gate_t g = {.coord = f->coord, .destroy_status = -1};
    ordo_op_desc_t desc = {.stream = f->s[0], .launch = launch_destroys, .launch_ctx = &g};
    ordo_op_id_t op;
    assert_ok(ordo_coord_register(f->coord, &desc, &op));
    size_t launched = 0;
    assert_ok(ordo_coord_dispatch(f->coord, 1, &launched));
    assert_int_equal(launched, 1);
    assert_int_equal(atomic_load(&g.destroy_status), ORDO_ERR_BUSY);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));

    g.open = test_signal_make(0);
    desc.launch = launch_held;
    assert_ok(ordo_coord_register(f->coord, &desc, &op));
    pthread_t dispatcher = test_thread_start(dispatch_main, f);
    ordo_deadline_t until = test_deadline();
    while (!atomic_load(&g.entered) && (ordo_deadline_t)ordo_time_now_ns() < until) {
        sched_yield();
    }
    assert_true(atomic_load(&g.entered));
    assert_status(ordo_coord_drain(f->coord, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    assert_status(ordo_coord_destroy(f->coord), ORDO_ERR_BUSY);
    /* The message says what holds it, and nothing else. */
    assert_string_equal(ordo_error_message(),
                        "ordo_coord_destroy: 1 launch function(s) run (ordo_coord_drain waits for "
                        "them; a launch function cannot destroy its coordinator)");
    assert_ok(ordo_signal_advance(g.open, 1));
    test_join_bounded(dispatcher);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(metrics(f).dispatched, 2);
    assert_ok(ordo_signal_release(g.open));
    fixture_free(f);
}

/* ---- dispatch by priority -------------------------------------------------------------- */

typedef struct order_log {
    _Atomic int count;
    char tags[64];
} order_log_t;

typedef struct tagged {
    order_log_t *log;
    char tag;
} tagged_t;

static ordo_status_t launch_logs(void *ctx, ordo_stream_t *stream) {
    tagged_t *t = ctx;
    t->log->tags[atomic_fetch_add(&t->log->count, 1)] = t->tag;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static ordo_op_id_t reg_dispatch(fixture_t *f, tagged_t *t, ordo_op_priority_t priority,
                                 const ordo_op_id_t *deps, size_t n) {
    ordo_op_desc_t desc = {.type = ORDO_OP_KERNEL,
                           .priority = priority,
                           .stream = f->s[t->tag % 2],
                           .deps = deps,
                           .dep_count = n,
                           .launch = launch_logs,
                           .launch_ctx = t};
    ordo_op_id_t id;
    assert_ok(ordo_coord_register(f->coord, &desc, &id));
    return id;
}

static void dispatch_goes_by_priority_then_readiness(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    order_log_t log;
    memset(&log, 0, sizeof log);
    tagged_t t[16];
    for (int i = 0; i < 16; ++i) {
        t[i] = (tagged_t){&log, (char)('a' + i)};
    }
    reg_dispatch(f, &t[0], ORDO_OP_PRIORITY_LOW, NULL, 0);      /* a */
    reg_dispatch(f, &t[1], ORDO_OP_PRIORITY_NORMAL, NULL, 0);   /* b */
    reg_dispatch(f, &t[2], ORDO_OP_PRIORITY_CRITICAL, NULL, 0); /* c */
    reg_dispatch(f, &t[3], ORDO_OP_PRIORITY_CLEANUP, NULL, 0);  /* d */
    reg_dispatch(f, &t[4], ORDO_OP_PRIORITY_HIGH, NULL, 0);     /* e */
    reg_dispatch(f, &t[5], ORDO_OP_PRIORITY_NORMAL, NULL, 0);   /* f */
    reg_dispatch(f, &t[6], ORDO_OP_PRIORITY_CRITICAL, NULL, 0); /* g */
    size_t launched = 0;
    assert_ok(ordo_coord_dispatch(f->coord, 100, &launched));
    assert_int_equal(launched, 7);
    assert_memory_equal(log.tags, "cgebfad", 7);
    /* A critical op waiting for a low one goes right after it. */
    atomic_store(&log.count, 0);
    ordo_op_id_t low = reg_dispatch(f, &t[7], ORDO_OP_PRIORITY_LOW, NULL, 0); /* h */
    reg_dispatch(f, &t[8], ORDO_OP_PRIORITY_CRITICAL, &low, 1);               /* i */
    reg_dispatch(f, &t[9], ORDO_OP_PRIORITY_NORMAL, NULL, 0);                 /* j */
    assert_ok(ordo_coord_dispatch(f->coord, 100, &launched));
    assert_int_equal(launched, 3);
    assert_memory_equal(log.tags, "jhi", 3);
    /* max bounds a call; a dependency added later makes an op unready. */
    atomic_store(&log.count, 0);
    ordo_op_id_t k = reg_dispatch(f, &t[10], ORDO_OP_PRIORITY_NORMAL, NULL, 0); /* k */
    ordo_op_id_t l = reg_dispatch(f, &t[11], ORDO_OP_PRIORITY_HIGH, NULL, 0);   /* l */
    reg_dispatch(f, &t[12], ORDO_OP_PRIORITY_NORMAL, NULL, 0);                  /* m */
    assert_ok(ordo_coord_add_dependency(f->coord, l, k));
    assert_ok(ordo_coord_dispatch(f->coord, 1, &launched));
    assert_int_equal(launched, 1);
    assert_ok(ordo_coord_dispatch(f->coord, 0, &launched));
    assert_int_equal(launched, 0);
    assert_ok(ordo_coord_dispatch(f->coord, 100, &launched));
    assert_int_equal(launched, 2);
    assert_memory_equal(log.tags, "klm", 3);
    assert_int_equal(metrics(f).dispatched, 13);
    fixture_free(f);
}

/* ---- callbacks exactly once ------------------------------------------------------------ */

static _Thread_local int on_this_thread;

static void on_done_here(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    on_done(ctx, op, status);
    on_this_thread++;
}

/* A callback that adds another callback to its own op (finished, its
 * callbacks running): that one runs at once, inside this one. */
typedef struct adder {
    ordo_coord_t *coord;
    seen_t inner;
    _Atomic int inner_before_return;
} adder_t;

static void on_done_add_more(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    adder_t *a = ctx;
    (void)status;
    if (ordo_coord_on_complete(a->coord, op, on_done, &a->inner) == ORDO_OK) {
        atomic_store(&a->inner_before_return, atomic_load(&a->inner.calls));
    }
}

static void callbacks_run_exactly_once(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate;
    gate_init(&gate, ORDO_OK);
    seen_t many[20];
    memset(many, 0, sizeof many);
    ordo_op_id_t a = reg(f, f->s[0], NULL, 0, "a");
    for (int i = 0; i < 20; ++i) { /* inline and overflow storage */
        assert_ok(ordo_coord_on_complete(f->coord, a, on_done, &many[i]));
    }
    adder_t adder = {.coord = f->coord};
    assert_ok(ordo_coord_on_complete(f->coord, a, on_done_add_more, &adder));
    assert_ok(ordo_coord_begin(f->coord, a));
    assert_ok(ordo_stream_host_task(f->s[0], gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, a));
    ordo_op_id_t b = reg(f, f->s[1], &a, 1, "b"); /* takes a copy of a's point */
    for (int i = 0; i < 20; ++i) {
        assert_int_equal(atomic_load(&many[i].calls), 0);
    }
    gate_open(&gate);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    for (int i = 0; i < 20; ++i) {
        assert_int_equal(atomic_load(&many[i].calls), 1);
        assert_int_equal(atomic_load(&many[i].status), ORDO_OK);
        assert_int_equal(atomic_load(&many[i].op), a);
    }
    assert_int_equal(atomic_load(&adder.inner_before_return), 1);
    assert_int_equal(atomic_load(&adder.inner.calls), 1);
    /* a has retired (finished, callbacks run) though b has not begun: b
     * holds a's point, not a. A callback added now runs at once, here. */
    assert_int_equal(metrics(f).live, 1);
    seen_t now = {0};
    on_this_thread = 0;
    assert_ok(ordo_coord_on_complete(f->coord, a, on_done_here, &now));
    assert_int_equal(on_this_thread, 1);
    assert_int_equal(atomic_load(&now.calls), 1);
    assert_ok(ordo_coord_begin(f->coord, b));
    assert_ok(ordo_coord_complete(f->coord, b));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(metrics(f).live, 0);
    seen_t retired = {0};
    assert_ok(ordo_coord_on_complete(f->coord, a, on_done_here, &retired));
    assert_int_equal(on_this_thread, 2);
    assert_int_equal(atomic_load(&retired.status), ORDO_OK);
    /* Ops that never finish hear of it at destroy. */
    seen_t never[3] = {{0}};
    ordo_op_id_t r = reg(f, f->s[2], NULL, 0, "registered");
    ordo_op_id_t g = reg(f, f->s[2], NULL, 0, "begun");
    assert_ok(ordo_coord_begin(f->coord, g));
    ordo_op_id_t h = reg(f, f->s[3], &r, 1, "waiting");
    assert_ok(ordo_coord_on_complete(f->coord, r, on_done, &never[0]));
    assert_ok(ordo_coord_on_complete(f->coord, g, on_done, &never[1]));
    assert_ok(ordo_coord_on_complete(f->coord, h, on_done, &never[2]));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(atomic_load(&never[i].calls), 0);
    }
    assert_ok(ordo_coord_destroy(f->coord));
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(atomic_load(&never[i].calls), 1);
        assert_int_equal(atomic_load(&never[i].status), ORDO_ERR_CANCELLED);
    }
    for (int i = 0; i < 20; ++i) {
        assert_int_equal(atomic_load(&many[i].calls), 1);
    }
    assert_ok(ordo_coord_create(device, NULL, &f->coord)); /* for fixture_free */
    fixture_free(f);
    gate_fini(&gate);
}

/* A callback run at once by on_complete on another thread is in flight
 * like any other: drain waits for it, destroy is refused meanwhile. */
typedef struct blocking_callback {
    ordo_coord_t *coord;
    ordo_op_id_t op;
    ordo_signal_t *entered; /* 1 once the callback runs */
    gate_t release;
    seen_t seen;
} blocking_callback_t;

static void on_done_blocking(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    blocking_callback_t *b = ctx;
    (void)ordo_signal_advance(b->entered, 1);
    (void)ordo_signal_wait(b->release.signal, 1, test_deadline());
    on_done(&b->seen, op, status);
}

static void *add_blocking_callback(void *arg) {
    blocking_callback_t *b = arg;
    assert_ok(ordo_coord_on_complete(b->coord, b->op, on_done_blocking, b));
    return NULL;
}

static void drain_waits_for_a_callback_run_at_once(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_op_id_t a = reg(f, f->s[0], NULL, 0, "a");
    assert_ok(ordo_coord_begin(f->coord, a));
    assert_ok(ordo_coord_complete(f->coord, a));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    blocking_callback_t b = {.coord = f->coord, .op = a, .entered = test_signal_make(0)};
    gate_init(&b.release, ORDO_OK);
    pthread_t adder = test_thread_start(add_blocking_callback, &b);
    assert_ok(ordo_signal_wait(b.entered, 1, test_deadline()));
    assert_status(ordo_coord_drain(f->coord, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
    assert_status(ordo_coord_destroy(f->coord), ORDO_ERR_BUSY);
    assert_string_equal(ordo_error_message(),
                        "ordo_coord_destroy: 1 op(s) run their callbacks (ordo_coord_drain waits "
                        "for them; a launch function cannot destroy its coordinator)");
    assert_int_equal(atomic_load(&b.seen.calls), 0);
    gate_open(&b.release);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_int_equal(atomic_load(&b.seen.calls), 1);
    assert_int_equal(atomic_load(&b.seen.status), ORDO_OK);
    pthread_join(adder, NULL);
    fixture_free(f);
    gate_fini(&b.release);
    assert_ok(ordo_signal_destroy(b.entered));
}

/* ordo/status.h: a drain that succeeds leaves the caller's message alone,
 * also when an op's stream fails while the drain sleeps on its timeline
 * (the wait meets the failure, which is the op's to report, through its
 * callback). The gate opens once the drain holds the timeline, as a
 * sleeping wait does. */
typedef struct drain_opener {
    ordo_signal_t *timeline;
    uint32_t refs; /* the timeline's before the drain */
    gate_t *gate;
    _Atomic int saw_the_drain;
} drain_opener_t;

static void *open_once_the_drain_sleeps(void *arg) {
    drain_opener_t *o = arg;
    atomic_store(&o->saw_the_drain, test_signal_refs_reach(o->timeline, o->refs + 1));
    (void)ordo_signal_advance(o->gate->signal, 1); /* checked by the test's thread */
    return NULL;
}

static void a_drain_that_meets_a_failure_keeps_the_message(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    gate_t gate;
    gate_init(&gate, ORDO_ERR_ABORTED);
    ordo_op_id_t a = reg(f, f->s[0], NULL, 0, "a");
    seen_t seen = {0};
    assert_ok(ordo_coord_on_complete(f->coord, a, on_done, &seen));
    assert_ok(ordo_coord_begin(f->coord, a));
    assert_ok(ordo_stream_host_task(f->s[0], gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, a));
    ordo_signal_t *timeline = NULL;
    for (uint32_t i = 0; i < ORDO_COORD_MAX_STREAMS && !timeline; ++i) {
        coord_stream_t *cs = f->coord->streams[i];
        timeline = cs && cs->stream == f->s[0] ? cs->timeline : NULL;
    }
    assert_non_null(timeline);
    drain_opener_t o = {timeline, atomic_load(&timeline->refs), &gate, 0};
    pthread_t opener = test_thread_start(open_once_the_drain_sleeps, &o);
    (void)ordo_coord_begin(f->coord, 987654); /* a message of the caller's */
    char before[512];
    snprintf(before, sizeof before, "%s", ordo_error_message());
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    assert_string_equal(ordo_error_message(), before);
    pthread_join(opener, NULL);
    assert_true(atomic_load(&o.saw_the_drain));
    assert_int_equal(atomic_load(&seen.status), ORDO_ERR_ABORTED);
    fixture_free(f);
    gate_fini(&gate);
}

/* Several threads register, begin and complete ops on their own streams,
 * depending on ops other threads completed, with callbacks that register
 * more work: every callback runs once, every op finishes. */
#define THREADS 4
#define PUBLISHED 64

typedef struct shared_run {
    fixture_t *f;
    int per_thread;
    _Atomic ordo_op_id_t published[PUBLISHED];
    _Atomic uint64_t next_publish;
    _Atomic int calls[THREADS][2048];
    _Atomic int bad_status;
    _Atomic int refused; /* calls that failed on the worker threads */
    _Atomic int followups;
} shared_run_t;

typedef struct worker_arg {
    shared_run_t *run;
    int index;
} worker_arg_t;

typedef struct followup {
    shared_run_t *run;
    _Atomic int *slot;
} followup_t;

static void on_shared(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    (void)op;
    followup_t *fu = ctx;
    atomic_fetch_add(fu->slot, 1);
    if (status != ORDO_OK) {
        atomic_fetch_add(&fu->run->bad_status, 1);
    }
}

/* A callback that registers, begins and completes another op (a callback
 * may call the coordinator). */
static void on_shared_followup(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    shared_run_t *run = ctx;
    (void)status;
    ordo_op_desc_t desc = {.stream = run->f->s[0], .deps = &op, .dep_count = 1};
    ordo_op_id_t id;
    if (ordo_coord_register(run->f->coord, &desc, &id) == ORDO_OK &&
        ordo_coord_begin(run->f->coord, id) == ORDO_OK &&
        ordo_coord_complete(run->f->coord, id) == ORDO_OK) {
        atomic_fetch_add(&run->followups, 1);
    }
}

static void *shared_worker(void *p) {
    worker_arg_t *arg = p;
    shared_run_t *run = arg->run;
    ordo_stream_t *stream = run->f->s[arg->index];
    uint64_t rng = 0x1234 + (uint64_t)arg->index;
    static followup_t fus[THREADS][2048];
    for (int i = 0; i < run->per_thread; ++i) {
        ordo_op_id_t deps[2];
        size_t n = 0;
        uint64_t published = atomic_load(&run->next_publish);
        uint64_t span = published < PUBLISHED ? published : PUBLISHED;
        for (int j = 0; j < 2 && span; ++j) {
            ordo_op_id_t dep = atomic_load(&run->published[test_rand(&rng) % span]);
            if (dep) { /* 0: a slot not yet written */
                deps[n++] = dep;
            }
        }
        ordo_op_desc_t desc = {.stream = stream, .deps = deps, .dep_count = n};
        ordo_op_id_t id;
        fus[arg->index][i] = (followup_t){run, &run->calls[arg->index][i]};
        /* cmocka's asserts are not for other threads: count refusals. */
        if (ordo_coord_register(run->f->coord, &desc, &id) != ORDO_OK ||
            ordo_coord_on_complete(run->f->coord, id, on_shared, &fus[arg->index][i]) != ORDO_OK ||
            (i % 16 == 0 &&
             ordo_coord_on_complete(run->f->coord, id, on_shared_followup, run) != ORDO_OK) ||
            ordo_coord_begin(run->f->coord, id) != ORDO_OK ||
            ordo_stream_host_task(stream, noop_task, NULL) != ORDO_OK ||
            ordo_coord_complete(run->f->coord, id) != ORDO_OK) {
            atomic_fetch_add(&run->refused, 1);
            continue;
        }
        uint64_t at = atomic_fetch_add(&run->next_publish, 1);
        atomic_store(&run->published[at % PUBLISHED], id);
    }
    return NULL;
}

static void callbacks_once_under_concurrency(void **state) {
    (void)state;
    static shared_run_t run;
    memset(&run, 0, sizeof run);
    run.f = fixture_make();
    run.per_thread = (int)test_scaled(2048);
    pthread_t threads[THREADS];
    worker_arg_t args[THREADS];
    for (int t = 0; t < THREADS; ++t) {
        args[t] = (worker_arg_t){&run, t};
        threads[t] = test_thread_start(shared_worker, &args[t]);
    }
    for (int t = 0; t < THREADS; ++t) {
        pthread_join(threads[t], NULL);
    }
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_synchronize(run.f->s[i], test_deadline()));
    }
    assert_ok(ordo_coord_drain(run.f->coord, test_deadline()));
    for (int t = 0; t < THREADS; ++t) {
        for (int i = 0; i < run.per_thread; ++i) {
            assert_int_equal(atomic_load(&run.calls[t][i]), 1);
        }
    }
    assert_int_equal(atomic_load(&run.bad_status), 0);
    assert_int_equal(atomic_load(&run.refused), 0);
    int expected_followups = THREADS * ((run.per_thread + 15) / 16);
    assert_int_equal(atomic_load(&run.followups), expected_followups);
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(run.f->coord, &m));
    assert_int_equal(m.completed, (uint64_t)(THREADS * run.per_thread + expected_followups));
    assert_int_equal(m.failed, 0);
    assert_int_equal(m.live, 0);
    fixture_free(run.f);
}

/* ---- deadlocks ------------------------------------------------------------------------- */

static void cycles_are_refused_with_the_cycle_named(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_op_id_t a = reg(f, f->s[0], NULL, 0, "load weights");
    ordo_op_id_t b = reg(f, f->s[1], NULL, 0, "matmul");
    ordo_op_id_t c = reg(f, f->s[2], NULL, 0, "all-reduce");
    assert_ok(ordo_coord_add_dependency(f->coord, b, a)); /* b waits for a */
    assert_ok(ordo_coord_add_dependency(f->coord, c, b));
    assert_ok(ordo_coord_add_dependency(f->coord, c, b)); /* present: no-op */
    assert_status(ordo_coord_add_dependency(f->coord, a, c), ORDO_ERR_DEADLOCK);
    const char *msg = ordo_error_message();
    char expect[256];
    snprintf(expect, sizeof expect,
             "%llu (load weights) waits for %llu (all-reduce) waits for %llu (matmul) waits "
             "for %llu (load weights)",
             (unsigned long long)a, (unsigned long long)c, (unsigned long long)b,
             (unsigned long long)a);
    if (!strstr(msg, expect)) {
        fail_msg("message '%s' lacks '%s'", msg, expect);
    }
    assert_status(ordo_coord_add_dependency(f->coord, a, a), ORDO_ERR_INVALID_ARGUMENT);
    assert_int_equal(metrics(f).deadlocks_refused, 1);
    size_t count = 99;
    assert_ok(ordo_coord_detect_deadlocks(f->coord, NULL, 0, &count));
    assert_int_equal(count, 0);
    /* The graph is as before the refusal: the chain runs. */
    assert_ok(ordo_coord_begin(f->coord, a));
    assert_ok(ordo_coord_complete(f->coord, a));
    assert_ok(ordo_coord_begin(f->coord, b));
    assert_ok(ordo_coord_complete(f->coord, b));
    assert_ok(ordo_coord_begin(f->coord, c));
    assert_ok(ordo_coord_complete(f->coord, c));
    /* A long cycle is named in part. */
    ordo_op_id_t chain[100];
    for (int i = 0; i < 100; ++i) {
        chain[i] = reg(f, f->s[i % STREAMS], i ? &chain[i - 1] : NULL, i ? 1 : 0, "link");
    }
    assert_status(ordo_coord_add_dependency(f->coord, chain[0], chain[99]), ORDO_ERR_DEADLOCK);
    assert_non_null(strstr(ordo_error_message(), "more)"));
    /* Independent ops added in reverse: reorders, no refusal. */
    ordo_op_id_t x[50];
    for (int i = 0; i < 50; ++i) {
        x[i] = reg(f, f->s[0], NULL, 0, "x");
    }
    for (int i = 49; i > 0; --i) {
        assert_ok(ordo_coord_add_dependency(f->coord, x[i - 1], x[i]));
    }
    assert_status(ordo_coord_add_dependency(f->coord, x[49], x[0]), ORDO_ERR_DEADLOCK);
    assert_int_equal(metrics(f).deadlocks_refused, 3);
    /* Run them all so the fixture drains. */
    for (int i = 0; i < 100; ++i) {
        assert_ok(ordo_coord_begin(f->coord, chain[i]));
        assert_ok(ordo_coord_complete(f->coord, chain[i]));
    }
    for (int i = 49; i >= 0; --i) {
        assert_ok(ordo_coord_begin(f->coord, x[i]));
        assert_ok(ordo_coord_complete(f->coord, x[i]));
    }
    fixture_free(f);
}

static int has_dependency_cycle_edge(const ordo_op_id_t *ops, size_t n, ordo_op_id_t from,
                                     ordo_op_id_t to) {
    for (size_t i = 0; i < n; ++i) {
        if (ops[i] == from && ops[(i + 1) % n] == to) {
            return 1;
        }
    }
    return 0;
}

static void unchecked_graphs_list_their_cycles(void **state) {
    (void)state;
    fixture_t *f = fixture_make_flags(ORDO_COORD_UNCHECKED);
    ordo_op_id_t o[6];
    seen_t seen[6];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 6; ++i) {
        o[i] = reg(f, f->s[i % STREAMS], NULL, 0, "op");
        assert_ok(ordo_coord_on_complete(f->coord, o[i], on_done, &seen[i]));
    }
    /* o0 waits for o1 waits for o2 waits for o0; o3 and o4 wait for each
     * other; o5 waits for o0 (stuck behind the cycle, not on it). */
    assert_ok(ordo_coord_add_dependency(f->coord, o[0], o[1]));
    assert_ok(ordo_coord_add_dependency(f->coord, o[1], o[2]));
    assert_ok(ordo_coord_add_dependency(f->coord, o[2], o[0]));
    assert_ok(ordo_coord_add_dependency(f->coord, o[3], o[4]));
    assert_ok(ordo_coord_add_dependency(f->coord, o[4], o[3]));
    assert_ok(ordo_coord_add_dependency(f->coord, o[5], o[0]));
    assert_int_equal(metrics(f).deadlocks_refused, 0);
    ordo_op_cycle_t cycles[4];
    size_t count = 0;
    assert_ok(ordo_coord_detect_deadlocks(f->coord, cycles, 4, &count));
    assert_int_equal(count, 2);
    int sizes = 0;
    for (size_t c = 0; c < count; ++c) {
        const ordo_op_cycle_t *cy = &cycles[c];
        assert_int_equal(cy->length, cy->component_size);
        sizes += (int)cy->length;
        /* ops[i] waits for ops[i + 1]: each is a dependency added above. */
        for (size_t i = 0; i < cy->length; ++i) {
            ordo_op_id_t from = cy->ops[i];
            ordo_op_id_t to = cy->ops[(i + 1) % cy->length];
            int known =
                has_dependency_cycle_edge((ordo_op_id_t[]){o[0], o[1], o[2]}, 3, from, to) ||
                has_dependency_cycle_edge((ordo_op_id_t[]){o[3], o[4]}, 2, from, to);
            assert_true(known);
        }
    }
    assert_int_equal(sizes, 5);
    /* Capacity smaller than the count: the total is still reported. */
    assert_ok(ordo_coord_detect_deadlocks(f->coord, cycles, 1, &count));
    assert_int_equal(count, 2);
    /* Nothing on or behind a cycle can begin; nothing hangs. */
    for (int i = 0; i < 6; ++i) {
        assert_status(ordo_coord_begin(f->coord, o[i]), ORDO_ERR_BUSY);
    }
    assert_ok(ordo_coord_destroy(f->coord));
    for (int i = 0; i < 6; ++i) {
        assert_int_equal(atomic_load(&seen[i].calls), 1);
        assert_int_equal(atomic_load(&seen[i].status), ORDO_ERR_CANCELLED);
    }
    assert_ok(ordo_coord_create(device, NULL, &f->coord));
    fixture_free(f);
}

/* ---- retirement and stale ids ----------------------------------------------------------- */

static void finished_ops_retire_and_ids_stay_meaningful(void **state) {
    (void)state;
    size_t blocks_before = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_before));
    fixture_t *f = fixture_make();
    const int ops = (int)test_scaled(100000);
    ordo_op_id_t first = 0;
    ordo_op_id_t prev = 0;
    uint64_t most_live = 0;
    for (int i = 0; i < ops; ++i) {
        ordo_op_id_t id = reg(f, f->s[i % 2], prev ? &prev : NULL, prev ? 1 : 0, "step");
        assert_ok(ordo_coord_begin(f->coord, id));
        assert_ok(ordo_coord_complete(f->coord, id));
        first = first ? first : id;
        prev = id;
        if (i % 1024 == 0) {
            ordo_coord_metrics_t m = metrics(f);
            most_live = m.live > most_live ? m.live : most_live;
            /* Let the streams catch up now and then. */
            assert_ok(ordo_stream_synchronize(f->s[i % 2], test_deadline()));
        }
    }
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    ordo_coord_metrics_t m = metrics(f);
    assert_int_equal(m.live, 0);
    assert_int_equal(m.completed, (uint64_t)ops);
    assert_true(most_live < 4096); /* bounded by what is in flight, not by history */
    print_message("%d ops, at most %llu live, %llu ns of coordination per op\n", ops,
                  (unsigned long long)most_live, (unsigned long long)m.coordination_ns_per_op);
    /* Retired ids: begin and complete refused, callbacks at once,
     * dependencies satisfied. */
    assert_status(ordo_coord_begin(f->coord, first), ORDO_ERR_BUSY);
    assert_status(ordo_coord_complete(f->coord, first), ORDO_ERR_BUSY);
    seen_t s = {0};
    assert_ok(ordo_coord_on_complete(f->coord, first, on_done, &s));
    assert_int_equal(atomic_load(&s.status), ORDO_OK);
    assert_int_equal(atomic_load(&s.calls), 1);
    ordo_op_id_t after = reg(f, f->s[2], &first, 1, "after");
    assert_ok(ordo_coord_begin(f->coord, after));
    assert_ok(ordo_coord_complete(f->coord, after));
    /* Ids never handed out. */
    assert_status(ordo_coord_begin(f->coord, 0), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_begin(f->coord, after + 1), ORDO_ERR_NOT_FOUND);
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));

    /* Failures beyond those kept: the oldest outcomes are forgotten, and
     * so is the outcome of any op retired before them. */
    ordo_op_desc_t desc = {.stream = f->s[3], .launch = launch_fails};
    ordo_op_id_t first_failed = 0;
    ordo_op_id_t last_failed = 0;
    for (unsigned i = 0; i < ORDO_COORD_FAILURES_KEPT + 10; ++i) {
        assert_ok(ordo_coord_register(f->coord, &desc, &last_failed));
        first_failed = first_failed ? first_failed : last_failed;
    }
    size_t launched = 0;
    assert_ok(ordo_coord_dispatch(f->coord, SIZE_MAX, &launched));
    assert_int_equal(launched, 0);
    assert_int_equal(metrics(f).failed, ORDO_COORD_FAILURES_KEPT + 10);
    seen_t forgotten = {0};
    assert_status(ordo_coord_on_complete(f->coord, first_failed, on_done, &forgotten),
                  ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_on_complete(f->coord, first, on_done, &forgotten), ORDO_ERR_NOT_FOUND);
    assert_int_equal(atomic_load(&forgotten.calls), 0);
    ordo_op_desc_t dep_on_forgotten = {.stream = f->s[0], .deps = &first_failed, .dep_count = 1};
    ordo_op_id_t id;
    assert_status(ordo_coord_register(f->coord, &dep_on_forgotten, &id), ORDO_ERR_NOT_FOUND);
    seen_t kept = {0};
    assert_ok(ordo_coord_on_complete(f->coord, last_failed, on_done, &kept));
    assert_int_equal(atomic_load(&kept.status), ORDO_ERR_ABORTED);
    /* Succeeded after the failures: still known. */
    ordo_op_id_t later = reg(f, f->s[0], NULL, 0, "later");
    assert_ok(ordo_coord_begin(f->coord, later));
    assert_ok(ordo_coord_complete(f->coord, later));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    seen_t known = {0};
    assert_ok(ordo_coord_on_complete(f->coord, later, on_done, &known));
    assert_int_equal(atomic_load(&known.status), ORDO_OK);
    fixture_free(f);
    size_t blocks_after = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_after));
    if (!test_device_keeps_host_blocks()) {
        assert_int_equal(blocks_after, blocks_before);
    }
}

/* One registration listing many dependencies: more still to complete
 * than register keeps at hand (it finds them again), duplicates, and some
 * finished. The op waits for every one, and each counts once as a wait
 * emitted or elided. */
static void many_dependencies_in_one_registration(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_op_id_t done[2];
    for (int i = 0; i < 2; ++i) {
        done[i] = reg(f, f->s[0], NULL, 0, "done");
        assert_ok(ordo_coord_begin(f->coord, done[i]));
        assert_ok(ordo_coord_complete(f->coord, done[i]));
    }
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    enum { WAITING = 24 };
    ordo_op_id_t waiting[WAITING];
    for (int i = 0; i < WAITING; ++i) {
        waiting[i] = reg(f, f->s[i % 3], NULL, 0, "waited for");
    }
    ordo_op_id_t deps[WAITING + 6];
    size_t n = 0;
    for (int i = WAITING; i-- > 0;) {
        deps[n++] = waiting[i];
    }
    for (int i = 0; i < 4; ++i) {
        deps[n++] = waiting[i * 5]; /* listed twice */
    }
    deps[n++] = done[0];
    deps[n++] = done[1];
    ordo_coord_metrics_t before = metrics(f);
    ordo_op_id_t last = reg(f, f->s[3], deps, n, "waits for many");
    for (int i = 0; i < WAITING; ++i) {
        assert_status(ordo_coord_begin(f->coord, last), ORDO_ERR_BUSY);
        assert_ok(ordo_coord_begin(f->coord, waiting[i]));
        assert_ok(ordo_coord_complete(f->coord, waiting[i]));
    }
    assert_ok(ordo_coord_begin(f->coord, last));
    assert_ok(ordo_coord_complete(f->coord, last));
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    ordo_coord_metrics_t after = metrics(f);
    assert_int_equal(
        after.waits_emitted + after.waits_elided - (before.waits_emitted + before.waits_elided), n);
    assert_int_equal(after.failed, 0);
    fixture_free(f);
}

/* Drains, and checks the drain did not sleep until its deadline: a stream
 * that reaches its last point between drain's poll and its look at the
 * streams must not leave it waiting for a wake nobody sends. */
static void drain_before_deadline(ordo_coord_t *coord) {
    ordo_deadline_t deadline = test_deadline();
    assert_ok(ordo_coord_drain(coord, deadline));
    assert_true(ordo_time_now_ns() < deadline);
}

/* Ids of many live ops: a dense backlog (the recent table grows: each
 * doubling moves every entry) and a long-lived op among short-lived ones
 * (it moves to the map, and must stay there, findable, across growth). */
static void many_live_ops_are_found_by_id(void **state) {
    (void)state;
    size_t blocks_before = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_before));
    fixture_t *f = fixture_make();
    ordo_op_id_t old = reg(f, f->s[3], NULL, 0, "long-lived");
    /* Short-lived ops retire as they go: few live, so the old op's entry
     * goes to the map rather than the table growing. Many of them, so
     * that the dense ids below exceed every size the table takes (an id
     * placed by the wrong bits in a doubling would then be lost). */
    const int dense = (int)test_scaled(40000);
    const int sparse = 4 * dense;
    for (int i = 0; i < sparse; ++i) {
        ordo_op_id_t id = reg(f, f->s[i % 2], NULL, 0, "short");
        assert_ok(ordo_coord_begin(f->coord, id));
        assert_ok(ordo_coord_complete(f->coord, id));
        if (i % 512 == 0) {
            drain_before_deadline(f->coord);
        }
    }
    drain_before_deadline(f->coord);
    assert_int_equal(metrics(f).live, 1);
    ordo_stream_t *where = NULL;
    assert_ok(ordo_coord_op_stream(f->coord, old, &where));
    assert_ptr_equal(where, f->s[3]);
    /* A dense backlog: every op stays live (none begun); each depends on
     * an older one still live, and on the long-lived one. */
    ordo_op_id_t *ids = calloc((size_t)dense, sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < dense; ++i) {
        ordo_op_id_t deps[2] = {old, i ? ids[(i * 7919) % i] : old};
        ids[i] = reg(f, f->s[i % 3], deps, 2, "dense");
        /* Right after a doubling too, the earlier ids are all found. */
        for (int k = 1; k <= 3 && k <= i; ++k) {
            int j = (int)(((uint64_t)i * 2654435761u + (uint64_t)k) % (uint64_t)i);
            assert_ok(ordo_coord_op_stream(f->coord, ids[j], &where));
            assert_ptr_equal(where, f->s[j % 3]);
        }
    }
    assert_int_equal(metrics(f).live, (uint64_t)dense + 1);
    for (int i = 0; i < dense; ++i) {
        assert_ok(ordo_coord_op_stream(f->coord, ids[i], &where));
        assert_ptr_equal(where, f->s[i % 3]);
    }
    assert_ok(ordo_coord_op_stream(f->coord, old, &where));
    assert_ptr_equal(where, f->s[3]);
    /* Run them all, the long-lived op first, then in registration order
     * (each after its dependencies). */
    assert_ok(ordo_coord_begin(f->coord, old));
    assert_ok(ordo_coord_complete(f->coord, old));
    for (int i = 0; i < dense; ++i) {
        assert_ok(ordo_coord_begin(f->coord, ids[i]));
        assert_ok(ordo_coord_complete(f->coord, ids[i]));
    }
    assert_ok(ordo_coord_drain(f->coord, test_deadline()));
    ordo_coord_metrics_t m = metrics(f);
    assert_int_equal(m.live, 0);
    assert_int_equal(m.completed, (uint64_t)(sparse + dense + 1));
    for (int i = 0; i < dense; i += 97) {
        assert_status(ordo_coord_begin(f->coord, ids[i]), ORDO_ERR_BUSY); /* retired */
    }
    assert_status(ordo_coord_begin(f->coord, old), ORDO_ERR_BUSY);
    free(ids);
    fixture_free(f);
    size_t blocks_after = 0;
    assert_ok(ordo_allocator_live_blocks(&blocks_after));
    if (!test_device_keeps_host_blocks()) {
        assert_int_equal(blocks_after, blocks_before);
    }
}

/* ---- stream pools ----------------------------------------------------------------------- */

static void ops_without_a_stream_take_one_from_the_pool(void **state) {
    (void)state;
    ordo_stream_pool_t *pool;
    ordo_stream_pool_config_t pc = {2, 0, 1, 0, 0};
    assert_ok(ordo_stream_pool_create(device, &pc, &pool));
    ordo_stream_t *transfer;
    assert_ok(ordo_stream_pool_next(pool, ORDO_WORKLOAD_TRANSFER, &transfer));
    ordo_coord_config_t config = {pool, 0};
    ordo_coord_t *coord;
    assert_ok(ordo_coord_create(device, &config, &coord));
    ordo_op_desc_t desc = {.type = ORDO_OP_TRANSFER, .description = "upload"};
    ordo_op_id_t up;
    assert_ok(ordo_coord_register(coord, &desc, &up));
    ordo_stream_t *got;
    assert_ok(ordo_coord_op_stream(coord, up, &got));
    assert_ptr_equal(got, transfer);
    desc = (ordo_op_desc_t){.type = ORDO_OP_KERNEL, .deps = &up, .dep_count = 1};
    ordo_op_id_t k1, k2;
    assert_ok(ordo_coord_register(coord, &desc, &k1));
    assert_ok(ordo_coord_register(coord, &desc, &k2));
    ordo_stream_t *s1, *s2;
    assert_ok(ordo_coord_op_stream(coord, k1, &s1));
    assert_ok(ordo_coord_op_stream(coord, k2, &s2));
    assert_true(s1 != s2 && s1 != transfer && s2 != transfer); /* the two compute streams */
    desc = (ordo_op_desc_t){.type = ORDO_OP_KERNEL, .workload = ORDO_WORKLOAD_TRANSFER};
    ordo_op_id_t t2;
    assert_ok(ordo_coord_register(coord, &desc, &t2));
    assert_ok(ordo_coord_op_stream(coord, t2, &got));
    assert_ptr_equal(got, transfer);
    desc.workload = (ordo_workload_t)42;
    assert_status(ordo_coord_register(coord, &desc, &t2), ORDO_ERR_INVALID_ARGUMENT);
    const ordo_op_id_t order[] = {up, k1, k2};
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_coord_begin(coord, order[i]));
        assert_ok(ordo_coord_complete(coord, order[i]));
    }
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord));
    /* A pool of another device (here an owned runtime of the same name)
     * is refused: none of its streams could take the coordinator's ops. */
    ordo_device_t *owned = NULL;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &owned));
    coord = NULL;
    assert_status(ordo_coord_create(owned, &config, &coord), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "owned runtime"));
    assert_null(coord);
    assert_ok(ordo_device_release(owned));
    assert_ok(ordo_stream_pool_destroy(pool));
}

/* ---- refused registrations ------------------------------------------------------------------- */

/* A registration refused on a fresh stream leaves nothing of that stream
 * behind: the next fresh stream, which takes its place, still has to wait
 * for what the refused op would have waited for; a refusal on a stream
 * already attached detaches nothing; a refused op that listed more
 * dependencies than fit inline frees what it reserved. */
static void refused_registrations_leave_streams_as_they_were(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_stream_t *A = f->s[0], *B = f->s[1], *X = f->s[2], *Y = f->s[3];
    gate_t gate;
    gate_init(&gate, ORDO_OK);
    ordo_op_id_t a1 = reg(f, A, NULL, 0, "a1");
    assert_ok(ordo_coord_begin(f->coord, a1));
    assert_ok(ordo_stream_host_task(A, gate_task, &gate));
    assert_ok(ordo_coord_complete(f->coord, a1));
    ordo_op_id_t b1 = reg(f, B, NULL, 0, "b1");
    ordo_op_id_t never_issued = (ordo_op_id_t)1 << 40;
    ordo_op_id_t id = 0;
    /* On fresh X: a1 is taken as a need of the refused op first. */
    ordo_op_desc_t rx = {.stream = X, .deps = (ordo_op_id_t[]){a1, never_issued}, .dep_count = 2};
    assert_status(ordo_coord_register(f->coord, &rx, &id), ORDO_ERR_NOT_FOUND);
    /* Wide: more dependencies than fit inline, then one never issued. */
    ordo_op_id_t wide_deps[8] = {a1, b1, a1, b1, a1, b1, a1, never_issued};
    ordo_op_desc_t rw = {.stream = X, .deps = wide_deps, .dep_count = 8};
    assert_status(ordo_coord_register(f->coord, &rw, &id), ORDO_ERR_NOT_FOUND);
    /* On B, attached already. */
    ordo_op_desc_t rb = {.stream = B, .deps = &never_issued, .dep_count = 1};
    assert_status(ordo_coord_register(f->coord, &rb, &id), ORDO_ERR_NOT_FOUND);
    ordo_stream_t *got = NULL;
    assert_ok(ordo_coord_op_stream(f->coord, b1, &got));
    assert_ptr_equal(got, B);
    assert_ok(ordo_coord_op_stream(f->coord, a1, &got));
    assert_ptr_equal(got, A);
    /* Y takes the place X had: it has waited for nothing. */
    ordo_op_id_t y1 = reg(f, Y, &a1, 1, "y1");
    assert_ok(ordo_coord_op_stream(f->coord, y1, &got));
    assert_ptr_equal(got, Y);
    assert_ok(ordo_coord_begin(f->coord, y1));
    assert_ok(ordo_coord_complete(f->coord, y1));
    ordo_coord_metrics_t m = metrics(f);
    assert_int_equal(m.waits_emitted, 1);
    assert_int_equal(m.waits_elided, 0);
    assert_int_equal(m.registered, 3);
    /* B still orders its ops: b2 after b1 needs no wait. */
    ordo_op_id_t b2 = reg(f, B, &b1, 1, "b2");
    const ordo_op_id_t order[] = {b1, b2};
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_coord_begin(f->coord, order[i]));
        assert_ok(ordo_coord_complete(f->coord, order[i]));
    }
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 1);
    assert_int_equal(m.waits_elided, 1);
    /* X is fresh still: it attaches now, after Y. */
    ordo_op_id_t x1 = reg(f, X, &y1, 1, "x1");
    assert_ok(ordo_coord_begin(f->coord, x1));
    assert_ok(ordo_coord_complete(f->coord, x1));
    m = metrics(f);
    assert_int_equal(m.waits_emitted, 2);
    gate_open(&gate);
    fixture_free(f);
    gate_fini(&gate);
}

#define REFUSING_THREADS 3
#define REFUSING_FRESH 4

typedef struct refuser {
    ordo_coord_t *coord;
    ordo_stream_t *own;
    ordo_stream_t *fresh[REFUSING_FRESH];
    int rounds;
    _Atomic int *errors;
} refuser_t;

static void refuser_check(refuser_t *r, int ok) {
    if (!ok) {
        atomic_fetch_add(r->errors, 1);
    }
}

/* Registers a chain of good ops on its own stream, each followed by
 * refusals on a fresh stream (listing the good op first) and on its own. */
static void *refuser_main(void *arg) {
    refuser_t *r = arg;
    ordo_op_id_t last = 0;
    ordo_op_id_t never_issued = (ordo_op_id_t)1 << 40;
    for (int i = 0; i < r->rounds; ++i) {
        ordo_op_id_t id = 0;
        ordo_op_desc_t good = {.stream = r->own, .deps = &last, .dep_count = last ? 1 : 0};
        refuser_check(r, ordo_coord_register(r->coord, &good, &id) == ORDO_OK);
        ordo_stream_t *got = NULL;
        refuser_check(r, ordo_coord_op_stream(r->coord, id, &got) == ORDO_OK && got == r->own);
        refuser_check(r, ordo_coord_begin(r->coord, id) == ORDO_OK);
        refuser_check(r, ordo_coord_complete(r->coord, id) == ORDO_OK);
        last = id;
        ordo_op_id_t deps[2] = {last, never_issued};
        ordo_op_desc_t fresh = {
            .stream = r->fresh[i % REFUSING_FRESH], .deps = deps, .dep_count = 2};
        ordo_op_id_t refused = 0;
        refuser_check(r, ordo_coord_register(r->coord, &fresh, &refused) == ORDO_ERR_NOT_FOUND);
        ordo_op_desc_t own = {.stream = r->own, .deps = &never_issued, .dep_count = 1};
        refuser_check(r, ordo_coord_register(r->coord, &own, &refused) == ORDO_ERR_NOT_FOUND);
    }
    return NULL;
}

/* Threads register and are refused on one coordinator at once: each good
 * op is on its own stream, and the refusals attach nothing, so every other
 * stream can still be attached. */
static void refusals_from_several_threads(void **state) {
    (void)state;
    ordo_coord_t *coord = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    _Atomic int errors = 0;
    refuser_t refusers[REFUSING_THREADS];
    pthread_t threads[REFUSING_THREADS];
    int rounds = (int)test_scaled(400);
    for (int t = 0; t < REFUSING_THREADS; ++t) {
        refusers[t] = (refuser_t){coord, NULL, {NULL}, rounds, &errors};
        assert_ok(ordo_stream_create(device, 0, &refusers[t].own));
        for (int k = 0; k < REFUSING_FRESH; ++k) {
            assert_ok(ordo_stream_create(device, 0, &refusers[t].fresh[k]));
        }
    }
    for (int t = 0; t < REFUSING_THREADS; ++t) {
        threads[t] = test_thread_start(refuser_main, &refusers[t]);
    }
    for (int t = 0; t < REFUSING_THREADS; ++t) {
        pthread_join(threads[t], NULL);
    }
    assert_int_equal(atomic_load(&errors), 0);
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(coord, &m));
    assert_int_equal(m.registered, (uint64_t)REFUSING_THREADS * (uint64_t)rounds);
    assert_int_equal(m.completed, m.registered);
    assert_int_equal(m.waits_emitted, 0); /* each chain stays on its stream */
    /* Three streams attached: exactly the rest still fit. */
    ordo_stream_t *more[ORDO_COORD_MAX_STREAMS];
    unsigned fitted = 0;
    ordo_status_t st = ORDO_OK;
    for (unsigned i = 0; i < ORDO_COORD_MAX_STREAMS && st == ORDO_OK; ++i) {
        assert_ok(ordo_stream_create(device, 0, &more[i]));
        ordo_op_desc_t desc = {.stream = more[i]};
        ordo_op_id_t id = 0;
        st = ordo_coord_register(coord, &desc, &id);
        fitted += st == ORDO_OK;
        if (st != ORDO_OK) {
            assert_int_equal(st, ORDO_ERR_RESOURCE_EXHAUSTED);
            assert_ok(ordo_stream_destroy(more[i]));
        }
    }
    assert_int_equal(fitted, ORDO_COORD_MAX_STREAMS - REFUSING_THREADS);
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord)); /* the ops registered last never begin */
    for (unsigned i = 0; i < fitted; ++i) {
        assert_ok(ordo_stream_destroy(more[i]));
    }
    for (int t = 0; t < REFUSING_THREADS; ++t) {
        assert_ok(ordo_stream_destroy(refusers[t].own));
        for (int k = 0; k < REFUSING_FRESH; ++k) {
            assert_ok(ordo_stream_destroy(refusers[t].fresh[k]));
        }
    }
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void bad_input_on_every_entry_point(void **state) {
    (void)state;
    fixture_t *f = fixture_make();
    ordo_coord_t *coord = f->coord;
    ordo_coord_t *none = NULL;
    uint64_t garbage[64] = {0};
    ordo_coord_t *fake = (ordo_coord_t *)garbage;
    ordo_op_id_t id = 0;
    ordo_stream_t *stream = NULL;
    size_t count = 0;
    ordo_coord_metrics_t m;

    /* create */
    assert_status(ordo_coord_create(NULL, NULL, &none), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_coord_create(device, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_coord_config_t bad_flags = {NULL, 0x80};
    assert_status(ordo_coord_create(device, &bad_flags, &none), ORDO_ERR_INVALID_ARGUMENT);
    ordo_coord_config_t bad_pool = {(ordo_stream_pool_t *)garbage, 0};
    assert_status(ordo_coord_create(device, &bad_pool, &none), ORDO_ERR_INVALID_HANDLE);

    /* handles, everywhere */
    ordo_op_desc_t ok_desc = {.stream = f->s[0]};
    ordo_coord_t *handles[2] = {NULL, fake};
    for (int h = 0; h < 2; ++h) {
        ordo_coord_t *c = handles[h];
        assert_status(ordo_coord_destroy(c), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_drain(c, test_deadline()), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_register(c, &ok_desc, &id), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_add_dependency(c, 1, 2), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_begin(c, 1), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_complete(c, 1), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_on_complete(c, 1, on_done, NULL), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_dispatch(c, 1, &count), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_op_stream(c, 1, &stream), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_detect_deadlocks(c, NULL, 0, &count), ORDO_ERR_INVALID_HANDLE);
        assert_status(ordo_coord_metrics(c, &m), ORDO_ERR_INVALID_HANDLE);
    }

    /* register */
    assert_status(ordo_coord_register(coord, NULL, &id), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_register(coord, &ok_desc, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_op_desc_t d = ok_desc;
    d.type = (ordo_op_type_t)7;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_ARGUMENT);
    d = ok_desc;
    d.priority = (ordo_op_priority_t)-1;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_ARGUMENT);
    d = ok_desc;
    d.dep_count = ORDO_COORD_MAX_DEPS + 1;
    d.deps = (ordo_op_id_t *)garbage;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_OUT_OF_RANGE);
    d = ok_desc;
    d.dep_count = 1;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_ARGUMENT);
    ordo_op_id_t unknown = 12345;
    d.deps = &unknown;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_NOT_FOUND);
    d = ok_desc;
    d.stream = NULL;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_ARGUMENT);
    d.stream = (ordo_stream_t *)garbage;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_HANDLE);
    ordo_device_t *other;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &other));
    ordo_stream_t *foreign;
    assert_ok(ordo_stream_create(other, 0, &foreign));
    d.stream = foreign;
    assert_status(ordo_coord_register(coord, &d, &id), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_stream_destroy(foreign));
    assert_ok(ordo_device_release(other));
    assert_int_equal(metrics(f).registered, 0); /* nothing registered on error */

    /* add_dependency */
    ordo_op_id_t a = reg(f, f->s[0], NULL, 0, "a");
    ordo_op_id_t b = reg(f, f->s[1], NULL, 0, "b");
    assert_status(ordo_coord_add_dependency(coord, a, a), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_add_dependency(coord, a, 999), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_add_dependency(coord, 999, a), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_add_dependency(coord, 0, a), ORDO_ERR_NOT_FOUND);
    /* An unknown op is not found, even as its own dependency. */
    assert_status(ordo_coord_add_dependency(coord, 999, 999), ORDO_ERR_NOT_FOUND);
    assert_ok(ordo_coord_add_dependency(coord, b, a));

    /* begin and complete */
    assert_status(ordo_coord_begin(coord, 999), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_complete(coord, 999), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_complete(coord, a), ORDO_ERR_BUSY); /* not begun */
    assert_status(ordo_coord_begin(coord, b), ORDO_ERR_BUSY);    /* a not completed */
    assert_ok(ordo_coord_begin(coord, a));
    assert_status(ordo_coord_begin(coord, a), ORDO_ERR_BUSY);             /* twice */
    assert_status(ordo_coord_add_dependency(coord, a, b), ORDO_ERR_BUSY); /* begun */
    assert_ok(ordo_coord_complete(coord, a));
    assert_status(ordo_coord_complete(coord, a), ORDO_ERR_BUSY); /* twice */
    assert_ok(ordo_coord_begin(coord, b));
    assert_ok(ordo_coord_complete(coord, b));
    ordo_op_desc_t dd = {.stream = f->s[0], .launch = launch_fails};
    ordo_op_id_t dispatched;
    assert_ok(ordo_coord_register(coord, &dd, &dispatched));
    assert_status(ordo_coord_begin(coord, dispatched), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_complete(coord, dispatched), ORDO_ERR_INVALID_ARGUMENT);

    /* callbacks, dispatch, queries */
    assert_status(ordo_coord_on_complete(coord, a, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_on_complete(coord, 999, on_done, NULL), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_dispatch(coord, 1, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_op_stream(coord, a, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_op_stream(coord, 999, &stream), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_coord_detect_deadlocks(coord, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_detect_deadlocks(coord, NULL, 3, &count), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_metrics(coord, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_coord_dispatch(coord, 10, &count)); /* runs the failing one */
    assert_int_equal(count, 0);

    /* drain times out and destroy refuses while a point is pending (the
     * op's callback waits for it: its timepoint is armed, it runs no
     * callback yet) */
    gate_t gate;
    gate_init(&gate, ORDO_OK);
    ordo_op_id_t g = reg(f, f->s[2], NULL, 0, "gated");
    seen_t gated = {0};
    assert_ok(ordo_coord_on_complete(coord, g, on_done, &gated));
    assert_ok(ordo_coord_begin(coord, g));
    assert_ok(ordo_stream_host_task(f->s[2], gate_task, &gate));
    assert_ok(ordo_coord_complete(coord, g));
    assert_status(ordo_coord_drain(coord, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
    assert_status(ordo_coord_drain(coord, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    assert_status(ordo_coord_destroy(coord), ORDO_ERR_BUSY);
    /* No callback runs: the message says the op awaits its point. */
    assert_string_equal(ordo_error_message(),
                        "ordo_coord_destroy: 1 op(s) await their completion points, 1 op "
                        "timepoint(s) are armed or firing (ordo_coord_drain waits for them; a "
                        "launch function cannot destroy its coordinator)");
    assert_int_equal(atomic_load(&gated.calls), 0);
    gate_open(&gate);
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_int_equal(atomic_load(&gated.calls), 1);

    /* a refused registration leaves no stream attached: refusals on as
     * many fresh streams (all kept alive, so none shares an address) as the
     * coordinator holds streams, then a good registration still fits */
    ordo_stream_t *refused[ORDO_COORD_MAX_STREAMS];
    for (unsigned i = 0; i < ORDO_COORD_MAX_STREAMS; ++i) {
        assert_ok(ordo_stream_create(device, 0, &refused[i]));
        ordo_op_id_t never_issued = 1u << 30;
        ordo_op_desc_t rd = {.stream = refused[i], .deps = &never_issued, .dep_count = 1};
        assert_status(ordo_coord_register(coord, &rd, &id), ORDO_ERR_NOT_FOUND);
    }
    ordo_op_desc_t fits = {.stream = refused[0]};
    assert_ok(ordo_coord_register(coord, &fits, &id));

    /* at most ORDO_COORD_MAX_STREAMS streams */
    ordo_stream_t *many[ORDO_COORD_MAX_STREAMS + 1];
    ordo_status_t last = ORDO_OK;
    for (unsigned i = 0; i <= ORDO_COORD_MAX_STREAMS; ++i) {
        assert_ok(ordo_stream_create(device, 0, &many[i]));
        ordo_op_desc_t sd = {.stream = many[i]};
        last = ordo_coord_register(coord, &sd, &id);
    }
    assert_int_equal(last, ORDO_ERR_RESOURCE_EXHAUSTED);
    fixture_free(f); /* the ops registered above never begin: dropped */
    for (unsigned i = 0; i <= ORDO_COORD_MAX_STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(many[i]));
    }
    for (unsigned i = 0; i < ORDO_COORD_MAX_STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(refused[i]));
    }
    gate_fini(&gate);
}

/* ---- bad input: coordinator.h (tests/refusal.h) */

static ordo_status_t coord_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static void on_op(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    (void)op, (void)status;
    ++*(int *)ctx;
}

static void coordinator_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_coord_t *coord = (ordo_coord_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, coord, ordo_coord_create, AS(ordo_device_t, f.s[0]),
                   NULL, &coord);
    ordo_coord_config_t wrong_pool = {AS(ordo_stream_pool_t, f.signal), 0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, coord, ordo_coord_create, f.device, &wrong_pool,
                   &coord);
    assert_ok(ordo_coord_create(f.device, NULL, &coord));
    ordo_coord_t *wrong = AS(ordo_coord_t, f.s[0]);

    ordo_op_id_t first = 0, id = 77;
    ordo_op_desc_t desc = {ORDO_OP_KERNEL,
                           ORDO_OP_PRIORITY_NORMAL,
                           f.s[0],
                           ORDO_WORKLOAD_ANY,
                           NULL,
                           0,
                           "first",
                           NULL,
                           NULL};
    assert_ok(ordo_coord_register(coord, &desc, &first));

    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_coord_register, wrong, &desc, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, NULL, &id);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_register, coord, &desc, NULL);
    ordo_op_desc_t bad = desc;
    bad.type = (ordo_op_type_t)7;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.type = (ordo_op_type_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.priority = (ordo_op_priority_t)5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.priority = (ordo_op_priority_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = NULL; /* no pool */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = AS(ordo_stream_t, f.signal);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = f.foreign;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.dep_count = 1; /* deps NULL */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.deps = &first;
    bad.dep_count = ORDO_COORD_MAX_DEPS + 1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, id, ordo_coord_register, coord, &bad, &id);
    bad.dep_count = SIZE_MAX;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, id, ordo_coord_register, coord, &bad, &id);
    const ordo_op_id_t unknown[2] = {first, 1000};
    bad.deps = unknown;
    bad.dep_count = 2;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, id, ordo_coord_register, coord, &bad, &id);
    const ordo_op_id_t zero[1] = {0};
    bad.deps = zero;
    bad.dep_count = 1;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, id, ordo_coord_register, coord, &bad, &id);
    assert_int_equal(id, 0);
    /* An over-long description is truncated, not refused. */
    char long_description[300];
    memset(long_description, 'd', sizeof long_description - 1);
    long_description[sizeof long_description - 1] = '\0';
    ordo_op_desc_t second_desc = desc;
    second_desc.description = long_description;
    second_desc.deps = &first;
    second_desc.dep_count = 1;
    ordo_op_id_t second = 0;
    assert_ok(ordo_coord_register(coord, &second_desc, &second));

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_add_dependency, wrong, second, first);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_add_dependency, coord, second, second);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, second, 0);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, 0, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, UINT64_MAX, first);
    REFUSED(ORDO_ERR_DEADLOCK, ordo_coord_add_dependency, coord, first, second);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_begin, wrong, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_begin, coord, 0);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_begin, coord, UINT64_MAX);
    REFUSED(ORDO_ERR_BUSY, ordo_coord_begin, coord, second);
    REFUSED(ORDO_ERR_BUSY, ordo_coord_complete, coord, first);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_complete, wrong, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_complete, coord, 0);
    int callbacks = 0;
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_on_complete, wrong, first, on_op, &callbacks);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_on_complete, coord, first, NULL, &callbacks);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_on_complete, coord, 0, on_op, &callbacks);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_on_complete, coord, 999, on_op, &callbacks);
    size_t launched = 7;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, launched, ordo_coord_dispatch, wrong, 1, &launched);
    ordo_stream_t *stream = (ordo_stream_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, stream, ordo_coord_op_stream, wrong, first, &stream);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_op_stream, coord, first, NULL);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, stream, ordo_coord_op_stream, coord, 0, &stream);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, stream, ordo_coord_op_stream, coord, 999, &stream);
    ordo_op_cycle_t cycles[2];
    size_t count = 9;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_coord_detect_deadlocks, wrong, cycles, 2,
                   &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_coord_detect_deadlocks, coord, NULL, 2,
                   &count);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_detect_deadlocks, coord, cycles, 2, NULL);
    assert_ok(ordo_coord_detect_deadlocks(coord, NULL, 0, &count));
    assert_int_equal(count, 0);
    ordo_coord_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_coord_metrics, wrong, &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_metrics, coord, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_drain, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_destroy, wrong);

    /* The graph still runs after all that. */
    assert_ok(ordo_coord_on_complete(coord, second, on_op, &callbacks));
    assert_ok(ordo_coord_begin(coord, first));
    assert_ok(ordo_coord_complete(coord, first));
    assert_ok(ordo_coord_begin(coord, second));
    assert_ok(ordo_coord_complete(coord, second));
    ordo_op_desc_t dispatched = desc;
    dispatched.launch = coord_launch;
    assert_ok(ordo_coord_register(coord, &dispatched, &id));
    assert_ok(ordo_coord_dispatch(coord, 0, &launched));
    assert_int_equal(launched, 0);
    assert_ok(ordo_coord_dispatch(coord, SIZE_MAX, &launched));
    assert_int_equal(launched, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_begin, coord, id);
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_int_equal(callbacks, 1);
    assert_ok(ordo_coord_destroy(coord));

    /* With a pool, ops without a stream take one by workload: one outside
     * the enum is refused. */
    ordo_stream_pool_t *pool = NULL;
    ordo_stream_pool_config_t pool_config = {1, 0, 1, 0, 0};
    assert_ok(ordo_stream_pool_create(f.device, &pool_config, &pool));
    ordo_coord_config_t with_pool = {pool, 0};
    assert_ok(ordo_coord_create(f.device, &with_pool, &coord));
    bad = desc;
    bad.stream = NULL;
    bad.workload = (ordo_workload_t)3;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad.workload = (ordo_workload_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_pool_destroy(pool));
    refusal_fixture_free(&f);
}

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    test_conformance_begin("coordinator");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dependencies_order_real_data_across_streams),
        cmocka_unit_test(dispatch_orders_real_data_across_streams),
        cmocka_unit_test(waits_are_emitted_once_and_elided_when_known),
        cmocka_unit_test(failures_reach_every_callback),
        cmocka_unit_test(failed_dependencies_without_a_wait_fail_at_begin),
        cmocka_unit_test(launch_functions_hold_off_destroy_and_drain),
        cmocka_unit_test(failed_launch_fails_its_dependents),
        cmocka_unit_test(dispatch_goes_by_priority_then_readiness),
        cmocka_unit_test(callbacks_run_exactly_once),
        cmocka_unit_test(drain_waits_for_a_callback_run_at_once),
        cmocka_unit_test(a_drain_that_meets_a_failure_keeps_the_message),
        cmocka_unit_test(callbacks_once_under_concurrency),
        cmocka_unit_test(cycles_are_refused_with_the_cycle_named),
        cmocka_unit_test(unchecked_graphs_list_their_cycles),
        cmocka_unit_test(finished_ops_retire_and_ids_stay_meaningful),
        cmocka_unit_test(many_live_ops_are_found_by_id),
        cmocka_unit_test(many_dependencies_in_one_registration),
        cmocka_unit_test(ops_without_a_stream_take_one_from_the_pool),
        cmocka_unit_test(refused_registrations_leave_streams_as_they_were),
        cmocka_unit_test(refusals_from_several_threads),
        cmocka_unit_test(bad_input_on_every_entry_point),
        cmocka_unit_test(coordinator_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
