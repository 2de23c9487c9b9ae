/* libFuzzer target: the operation coordinator, the asynchronous waiter and
 * barriers.
 *
 * Each input runs a bounded program on three streams of a fresh owned cpu
 * device, some of them held at the start behind a gate signal (so work is
 * pending for as long as the program wants): ops registered by hand or for
 * dispatch, with random dependencies (unknown, repeated, on retired ops),
 * dependencies added later (cycles must be refused with ORDO_ERR_DEADLOCK,
 * or, in an unchecked coordinator, listed by detect_deadlocks), begin and
 * complete in any order, dispatch, completion callbacks, host tasks that
 * fail a stream, a destroy refused while completed ops wait for their
 * points; waits of an asynchronous waiter on signals (inline or on
 * workers, past, short or no deadlines) and their cancels; barriers over
 * sets of the streams (duplicates, NULL entries, empty sets), arrived at
 * and synchronized with short deadlines. A model of the graph (a
 * reachability check for cycles, strongly connected components for the
 * unchecked listing) and of each op's state predicts every status; every
 * failed call must name itself and empty its outputs; each callback runs
 * exactly once (ORDO_ERR_CANCELLED for ops that never finished when the
 * coordinator goes), and a cancelled wait's never. The input ends with the
 * gates opened, the coordinator drained and destroyed with work pending,
 * and ordo's host blocks back to their count.
 *
 * Known defects (ORDO_FUZZ_KNOWN_DEFECTS, see fuzz_common.h): none listed
 * in this harness today. */
#include "fuzz_common.h"

#define STREAMS 3
#define OPS 16
#define WAITS 8
#define BARRIERS 2
#define MAX_OPS 64

typedef enum { OP_NEW, OP_BEGUN, OP_COMPLETED, OP_FAILED } op_state_t;

typedef struct mop {
    ordo_op_id_t id;
    int stream;
    int launch; /* registered for dispatch */
    int launch_fails;
    op_state_t state;
    int deps[OPS + 4]; /* model indices */
    int ndeps;
    /* Its callback (added at registration): calls and the last status. */
    _Atomic unsigned calls;
    _Atomic ordo_status_t got;
} mop_t;

typedef struct mwait {
    ordo_wait_id_t id;
    int cancelled; /* prevented */
    _Atomic unsigned calls;
} mwait_t;

static ordo_device_t *device, *foreign_device;
static ordo_stream_t *streams[STREAMS], *foreign_stream;
static ordo_signal_t *gates[STREAMS]; /* NULL: the stream is not held */
static int gate_open[STREAMS];        /* its gate was signalled */
static int failed_any;
static ordo_coord_t *coord;
static int unchecked;
static mop_t ops[OPS];
static int nops;
static ordo_waiter_t *waiter;
static ordo_signal_t *wsig[2];
static mwait_t waits[WAITS];
static int nwaits;
static ordo_barrier_t *barriers[BARRIERS];

static void on_op(void *ctx, ordo_op_id_t id, ordo_status_t status) {
    mop_t *m = ctx;
    FUZZ_CHECK(id == m->id, "a completion callback got op %llu, not %llu", (unsigned long long)id,
               (unsigned long long)m->id);
    m->got = status;
    ++m->calls;
}

static ordo_status_t launch(void *ctx, ordo_stream_t *stream) {
    mop_t *m = ctx;
    FUZZ_CHECK(stream == streams[m->stream], "an op launched on another stream");
    for (int d = 0; d < m->ndeps; ++d) {
        op_state_t s = ops[m->deps[d]].state;
        FUZZ_CHECK(s == OP_COMPLETED, "op %llu launched before its dependency %llu completed",
                   (unsigned long long)m->id, (unsigned long long)ops[m->deps[d]].id);
    }
    if (m->launch_fails) {
        m->state = OP_FAILED;
        return ORDO_ERR_ABORTED;
    }
    ordo_status_t st = ordo_stream_host_task(stream, fuzz_noop_task, NULL);
    /* complete follows at once, in dispatch, unless the stream failed */
    m->state = st == ORDO_OK ? OP_COMPLETED : OP_FAILED;
    return st;
}

static void on_wait(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    mwait_t *w = ctx;
    (void)status;
    (void)id;
    ++w->calls;
}

/* ------------------------------------------------------------ the graph */

static int has_dep(int op, int dep) {
    for (int d = 0; d < ops[op].ndeps; ++d) {
        if (ops[op].deps[d] == dep) {
            return 1;
        }
    }
    return 0;
}

/* Whether from reaches to through dependencies. */
static int reaches(int from, int to, unsigned *seen) {
    if (from == to) {
        return 1;
    }
    if (*seen & (1u << from)) {
        return 0;
    }
    *seen |= 1u << from;
    for (int d = 0; d < ops[from].ndeps; ++d) {
        if (reaches(ops[from].deps[d], to, seen)) {
            return 1;
        }
    }
    return 0;
}

/* Strongly connected components of more than one op (Tarjan). */
static int t_index[OPS], t_low[OPS], t_on[OPS], t_stack[OPS], t_sp, t_next, t_count;

static void strongconnect(int v) {
    t_index[v] = t_low[v] = t_next++;
    t_stack[t_sp++] = v;
    t_on[v] = 1;
    for (int d = 0; d < ops[v].ndeps; ++d) {
        int w = ops[v].deps[d];
        if (t_index[w] < 0) {
            strongconnect(w);
            t_low[v] = t_low[w] < t_low[v] ? t_low[w] : t_low[v];
        } else if (t_on[w]) {
            t_low[v] = t_index[w] < t_low[v] ? t_index[w] : t_low[v];
        }
    }
    if (t_low[v] == t_index[v]) {
        int size = 0, w;
        do {
            w = t_stack[--t_sp];
            t_on[w] = 0;
            ++size;
        } while (w != v);
        t_count += size > 1;
    }
}

static int model_cycles(void) {
    t_sp = t_next = t_count = 0;
    for (int i = 0; i < nops; ++i) {
        t_index[i] = -1;
        t_on[i] = 0;
    }
    for (int i = 0; i < nops; ++i) {
        if (t_index[i] < 0) {
            strongconnect(i);
        }
    }
    return t_count;
}

/* ------------------------------------------------------------ ops */

static ordo_op_id_t id_of(fuzz_input_t *in, int *out_index) {
    uint8_t b = fuzz_u8(in);
    *out_index = -1;
    if (nops && b < 240) {
        *out_index = b % nops;
        return ops[*out_index].id;
    }
    return b & 1 ? 0 : ops[nops ? nops - 1 : 0].id + 1000; /* never handed out */
}

static void op_register(fuzz_input_t *in) {
    if (nops == OPS) {
        return;
    }
    mop_t *m = &ops[nops];
    memset(m, 0, sizeof *m);
    uint8_t b = fuzz_u8(in);
    int s = fuzz_u8(in) % (STREAMS + 2);
    m->stream = s < STREAMS ? s : 0;
    m->launch = b & 1;
    m->launch_fails = (b & 6) == 6;
    ordo_op_id_t deps[4];
    size_t ndeps = fuzz_u8(in) % 5;
    int unknown = 0;
    for (size_t d = 0; d < ndeps; ++d) {
        int index;
        deps[d] = id_of(in, &index);
        if (index < 0) {
            unknown = 1;
        } else if (!has_dep(nops, index)) {
            m->deps[m->ndeps++] = index;
        }
    }
    char text[96];
    ordo_op_desc_t desc = {
        .type = (ordo_op_type_t)(b >> 4) % 7,
        .priority = (ordo_op_priority_t)(b >> 3) % 5,
        .stream = s < STREAMS    ? streams[s]
                  : s == STREAMS ? NULL
                                 : foreign_stream,
        .workload = ORDO_WORKLOAD_ANY,
        .deps = ndeps ? deps : NULL,
        .dep_count = ndeps,
        .description = b & 8 ? fuzz_text(in, text, sizeof text) : NULL,
        .launch = m->launch ? launch : NULL,
        .launch_ctx = m,
    };
    ordo_status_t want = ORDO_OK;
    if (s >= STREAMS) {
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if (unknown) {
        want = ORDO_ERR_NOT_FOUND;
    }
    ordo_op_id_t id;
    fuzz_sentinel(id);
    ordo_status_t st = FUZZ_CALL(ordo_coord_register, coord, &desc, &id);
    if (want != ORDO_OK && st != ORDO_OK) {
        /* Both refusals may apply; either may be reported. */
        FUZZ_CHECK(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_NOT_FOUND,
                   "ordo_coord_register returned %s", ordo_status_name(st));
    } else {
        FUZZ_EXPECT(st, want, "ordo_coord_register");
    }
    FUZZ_EMPTY_ON_FAILURE(st, id, "ordo_coord_register");
    if (st != ORDO_OK) {
        return;
    }
    FUZZ_CHECK(id != 0 && (nops == 0 || id > ops[nops - 1].id), "op id %llu is not new",
               (unsigned long long)id);
    m->id = id;
    m->state = OP_NEW;
    ++nops;
    FUZZ_EXPECT(FUZZ_CALL(ordo_coord_on_complete, coord, id, on_op, m), ORDO_OK,
                "ordo_coord_on_complete");
}

static void op_add_dependency(fuzz_input_t *in) {
    int a, b;
    ordo_op_id_t op = id_of(in, &a), dep = id_of(in, &b);
    ordo_status_t want;
    if (a < 0 || b < 0) {
        want = ORDO_ERR_NOT_FOUND;
    } else if (a == b) {
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if (ops[a].state != OP_NEW) {
        want = ORDO_ERR_BUSY;
    } else if (has_dep(a, b)) {
        want = ORDO_OK;
    } else {
        unsigned seen = 0;
        want = !unchecked && reaches(b, a, &seen) ? ORDO_ERR_DEADLOCK : ORDO_OK;
    }
    ordo_status_t st = FUZZ_CALL(ordo_coord_add_dependency, coord, op, dep);
    if (a >= 0 && ops[a].state != OP_NEW && st == ORDO_ERR_BUSY) {
        return; /* a begun op, and an unknown dependency or itself: either refusal */
    }
    FUZZ_EXPECT(st, want, "ordo_coord_add_dependency");
    if (st == ORDO_OK && !has_dep(a, b)) {
        ops[a].deps[ops[a].ndeps++] = b;
    }
}

/* The status begin may return for m: ORDO_OK, BUSY or a failure. */
static void op_begin(fuzz_input_t *in) {
    int a;
    ordo_op_id_t id = id_of(in, &a);
    ordo_status_t st = FUZZ_CALL(ordo_coord_begin, coord, id);
    if (a < 0) {
        FUZZ_EXPECT(st, ORDO_ERR_NOT_FOUND, "ordo_coord_begin");
        return;
    }
    mop_t *m = &ops[a];
    int pending = 0, failed = 0;
    for (int d = 0; d < m->ndeps; ++d) {
        pending += ops[m->deps[d]].state == OP_NEW || ops[m->deps[d]].state == OP_BEGUN;
        failed += ops[m->deps[d]].state == OP_FAILED;
    }
    if (m->launch) {
        FUZZ_CHECK(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_BUSY,
                   "ordo_coord_begin of a dispatch op returned %s", ordo_status_name(st));
        return;
    }
    if (m->state != OP_NEW || (pending && !failed)) {
        FUZZ_EXPECT(st, ORDO_ERR_BUSY, "ordo_coord_begin");
        return;
    }
    if (st == ORDO_OK) {
        FUZZ_CHECK(!failed && !pending, "ordo_coord_begin began an op with a failed or pending "
                                        "dependency");
        m->state = OP_BEGUN;
        return;
    }
    if (failed && st == ORDO_ERR_BUSY) {
        return; /* a failed dependency with others pending: either answer */
    }
    FUZZ_CHECK((failed || failed_any) && st != ORDO_ERR_BUSY && st != ORDO_ERR_NOT_FOUND,
               "ordo_coord_begin returned %s", ordo_status_name(st));
    m->state = OP_FAILED;
}

static void op_complete(fuzz_input_t *in) {
    int a;
    ordo_op_id_t id = id_of(in, &a);
    ordo_status_t st = FUZZ_CALL(ordo_coord_complete, coord, id);
    if (a < 0) {
        FUZZ_EXPECT(st, ORDO_ERR_NOT_FOUND, "ordo_coord_complete");
        return;
    }
    mop_t *m = &ops[a];
    if (m->launch) {
        FUZZ_CHECK(st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_BUSY,
                   "ordo_coord_complete of a dispatch op returned %s", ordo_status_name(st));
        return;
    }
    if (m->state != OP_BEGUN) {
        FUZZ_EXPECT(st, ORDO_ERR_BUSY, "ordo_coord_complete");
        return;
    }
    if (fuzz_u8(in) & 1) {
        ordo_status_t task =
            FUZZ_CALL(ordo_stream_host_task, streams[m->stream], fuzz_noop_task, NULL);
        FUZZ_CHECK(task == ORDO_OK || (failed_any && task == ORDO_ERR_ABORTED),
                   "ordo_stream_host_task returned %s", ordo_status_name(task));
    }
    if (st == ORDO_OK) {
        m->state = OP_COMPLETED;
        return;
    }
    FUZZ_CHECK(failed_any, "ordo_coord_complete returned %s with no stream failed",
               ordo_status_name(st));
    m->state = OP_FAILED;
}

static void op_dispatch(fuzz_input_t *in) {
    size_t max = fuzz_u8(in) % 4;
    size_t launched;
    fuzz_sentinel(launched);
    ordo_status_t st = FUZZ_CALL(ordo_coord_dispatch, coord, max ? max : 1000, &launched);
    FUZZ_EXPECT(st, ORDO_OK, "ordo_coord_dispatch");
    FUZZ_CHECK(launched <= (max ? max : 1000), "dispatch launched %zu of at most %zu", launched,
               max);
    /* Ops dispatch failed at begin are known from their callbacks. */
    for (int i = 0; i < nops; ++i) {
        if (ops[i].launch && ops[i].state == OP_NEW && ops[i].calls) {
            ops[i].state = OP_FAILED;
        }
    }
    if (max) {
        return;
    }
    /* With no limit, every dispatch op whose dependencies completed ran. */
    for (int i = 0; i < nops; ++i) {
        int ready = ops[i].launch && ops[i].state == OP_NEW;
        for (int d = 0; ready && d < ops[i].ndeps; ++d) {
            ready = ops[ops[i].deps[d]].state == OP_COMPLETED;
        }
        FUZZ_CHECK(!ready, "op %llu was ready but not dispatched", (unsigned long long)ops[i].id);
    }
}

static void op_misc(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    switch (b % 6) {
    case 0: {
        ordo_op_cycle_t cycles[4];
        size_t count;
        fuzz_sentinel(count);
        ordo_status_t st = FUZZ_CALL(ordo_coord_detect_deadlocks, coord, cycles, 4, &count);
        FUZZ_EXPECT(st, ORDO_OK, "ordo_coord_detect_deadlocks");
        size_t want = unchecked ? (size_t)model_cycles() : 0;
        FUZZ_CHECK(count == want, "detect_deadlocks lists %zu cycles, the model %zu", count, want);
        for (size_t c = 0; c < count && c < 4; ++c) {
            FUZZ_CHECK(cycles[c].length >= 2 && cycles[c].component_size >= cycles[c].length,
                       "a cycle of length %zu in a component of %zu", cycles[c].length,
                       cycles[c].component_size);
        }
        break;
    }
    case 1: {
        ordo_coord_metrics_t metrics;
        FUZZ_EXPECT(FUZZ_CALL(ordo_coord_metrics, coord, &metrics), ORDO_OK, "ordo_coord_metrics");
        FUZZ_CHECK(metrics.registered == (uint64_t)nops, "metrics count %llu ops, not %d",
                   (unsigned long long)metrics.registered, nops);
        break;
    }
    case 2: {
        /* A failing host task: the stream fails from there on. */
        int s = fuzz_u8(in) % STREAMS;
        ordo_status_t st = FUZZ_CALL(ordo_stream_host_task, streams[s], fuzz_failing_task, NULL);
        FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_ABORTED, "ordo_stream_host_task returned %s",
                   ordo_status_name(st));
        failed_any = 1;
        break;
    }
    case 3: {
        /* A destroy with completed ops held behind a gate is refused. */
        int held = 0;
        for (int i = 0; i < nops; ++i) {
            held |= ops[i].state == OP_COMPLETED && gates[ops[i].stream] &&
                    !gate_open[ops[i].stream] && !ops[i].calls;
        }
        if (held) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_coord_destroy, coord), ORDO_ERR_BUSY, "ordo_coord_destroy");
            FUZZ_EXPECT(FUZZ_CALL(ordo_coord_drain, coord, fuzz_deadline(in)), ORDO_ERR_TIMEOUT,
                        "ordo_coord_drain");
        }
        break;
    }
    case 4: {
        int s = fuzz_u8(in) % STREAMS;
        if (gates[s]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, gates[s], 1), ORDO_OK,
                        "ordo_signal_advance");
            gate_open[s] = 1;
        }
        break;
    }
    default: {
        ordo_stream_t *out;
        fuzz_sentinel(out);
        int a;
        ordo_op_id_t id = id_of(in, &a);
        ordo_status_t st = FUZZ_CALL(ordo_coord_op_stream, coord, id, &out);
        if (a < 0) {
            FUZZ_EXPECT(st, ORDO_ERR_NOT_FOUND, "ordo_coord_op_stream");
            FUZZ_EMPTY_ON_FAILURE(st, out, "ordo_coord_op_stream");
        } else if (st == ORDO_OK) {
            FUZZ_CHECK(out == streams[ops[a].stream], "ordo_coord_op_stream: another stream");
        }
        break;
    }
    }
}

static void op_wait(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    if (b & 1 && nwaits) {
        mwait_t *w = &waits[fuzz_u8(in) % nwaits];
        ordo_cancel_result_t result;
        fuzz_sentinel(result);
        ordo_status_t st = FUZZ_CALL(ordo_waiter_cancel, waiter, w->id, 1, &result);
        if (w->cancelled) {
            FUZZ_EXPECT(st, ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel");
        }
        FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_NOT_FOUND, "ordo_waiter_cancel returned %s",
                   ordo_status_name(st));
        FUZZ_EMPTY_ON_FAILURE(st, result, "ordo_waiter_cancel");
        if (st == ORDO_OK && result == ORDO_CANCEL_PREVENTED) {
            w->cancelled = 1;
        }
        return;
    }
    if (b & 2) {
        ordo_signal_t *sg = wsig[(b >> 2) & 1];
        ordo_status_t st = b & 8 ? FUZZ_CALL(ordo_signal_advance, sg, fuzz_value(in) & 15)
                                 : FUZZ_CALL(ordo_signal_fail, sg, ORDO_ERR_ABORTED, "fuzz");
        (void)st; /* a failed signal refuses a signal: either is fine here */
        return;
    }
    if (nwaits == WAITS) {
        return;
    }
    mwait_t *w = &waits[nwaits];
    memset(w, 0, sizeof *w);
    uint64_t value = fuzz_value(in);
    uint8_t d = fuzz_u8(in);
    ordo_deadline_t deadline = d < 64 ? ORDO_DEADLINE_NEVER : fuzz_deadline(in);
    uint32_t flags = d & 1 ? ORDO_WAIT_INLINE : 0;
    ordo_wait_id_t id;
    fuzz_sentinel(id);
    ordo_status_t st = FUZZ_CALL(ordo_waiter_wait, waiter, wsig[(b >> 2) & 1], value, deadline,
                                 flags, on_wait, w, &id);
    FUZZ_EXPECT(st, value > ORDO_SIGNAL_VALUE_MAX ? ORDO_ERR_OUT_OF_RANGE : ORDO_OK,
                "ordo_waiter_wait");
    FUZZ_EMPTY_ON_FAILURE(st, id, "ordo_waiter_wait");
    if (st == ORDO_OK) {
        w->id = id;
        ++nwaits;
    }
}

static void op_barrier(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    ordo_barrier_t **slot = &barriers[(b >> 1) & 1];
    if (!*slot || b & 1) {
        if (*slot) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_barrier_destroy, *slot), ORDO_OK, "ordo_barrier_destroy");
            *slot = NULL;
        }
        ordo_stream_t *set[4];
        size_t count = fuzz_u8(in) % 5;
        int null = 0, distinct = 0;
        unsigned seen = 0;
        for (size_t i = 0; i < count; ++i) {
            uint8_t k = fuzz_u8(in) % (STREAMS + 1);
            set[i] = k < STREAMS ? streams[k] : NULL;
            null |= k == STREAMS;
            if (k < STREAMS && !(seen & (1u << k))) {
                seen |= 1u << k;
                ++distinct;
            }
        }
        ordo_barrier_t *barrier;
        fuzz_sentinel(barrier);
        ordo_status_t st = FUZZ_CALL(ordo_barrier_create, set, count,
                                     (ordo_barrier_scheme_t)((b >> 2) % 3), &barrier);
        FUZZ_CHECK(count && !null
                       ? st == ORDO_OK
                       : st == ORDO_ERR_INVALID_ARGUMENT || st == ORDO_ERR_INVALID_HANDLE,
                   "ordo_barrier_create of %zu streams returned %s", count, ordo_status_name(st));
        FUZZ_EMPTY_ON_FAILURE(st, barrier, "ordo_barrier_create");
        if (st == ORDO_OK) {
            size_t n;
            FUZZ_EXPECT(FUZZ_CALL(ordo_barrier_stream_count, barrier, &n), ORDO_OK,
                        "ordo_barrier_stream_count");
            FUZZ_CHECK(n == (size_t)distinct, "a barrier of %d streams counts %zu", distinct, n);
            *slot = barrier;
        }
        return;
    }
    if (b & 4) {
        ordo_status_t st = FUZZ_CALL(ordo_barrier_arrive, *slot);
        FUZZ_CHECK(st == ORDO_OK || (failed_any && st == ORDO_ERR_ABORTED),
                   "ordo_barrier_arrive returned %s", ordo_status_name(st));
        return;
    }
    uint64_t elapsed;
    ordo_status_t st = FUZZ_CALL(ordo_barrier_synchronize, *slot, fuzz_deadline(in), &elapsed);
    FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_TIMEOUT || (failed_any && st == ORDO_ERR_ABORTED),
               "ordo_barrier_synchronize returned %s", ordo_status_name(st));
}

/* ------------------------------------------------------------ the input */

static void setup(void) {
    if (!foreign_device) {
        FUZZ_EXPECT(ordo_device_create_owned("cpu", NULL, &foreign_device), ORDO_OK,
                    "ordo_device_create_owned");
        FUZZ_EXPECT(ordo_stream_create(foreign_device, 0, &foreign_stream), ORDO_OK,
                    "ordo_stream_create");
    }
}

static void teardown(void) {
    for (int s = 0; s < STREAMS; ++s) {
        if (gates[s]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, gates[s], 1), ORDO_OK,
                        "ordo_signal_advance");
        }
    }
    ordo_status_t st = FUZZ_CALL(ordo_coord_drain, coord, ordo_deadline_after_ms(5000));
    FUZZ_EXPECT(st, ORDO_OK, "ordo_coord_drain");
    FUZZ_EXPECT(FUZZ_CALL(ordo_coord_destroy, coord), ORDO_OK, "ordo_coord_destroy");
    for (int i = 0; i < nops; ++i) {
        mop_t *m = &ops[i];
        FUZZ_CHECK(m->calls == 1, "op %llu's callback ran %u times", (unsigned long long)m->id,
                   m->calls);
        ordo_status_t got = m->got;
        if (m->state == OP_NEW || m->state == OP_BEGUN) {
            FUZZ_EXPECT(got, ORDO_ERR_CANCELLED, "the callback of an op never completed");
        } else if (m->state == OP_COMPLETED && !failed_any) {
            FUZZ_EXPECT(got, ORDO_OK, "the callback of a completed op");
        } else if (m->state == OP_FAILED) {
            FUZZ_CHECK(got != ORDO_OK, "a failed op's callback got ORDO_OK");
        }
    }
    for (int i = 0; i < BARRIERS; ++i) {
        if (barriers[i]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_barrier_destroy, barriers[i]), ORDO_OK,
                        "ordo_barrier_destroy");
        }
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_waiter_destroy, waiter), ORDO_OK, "ordo_waiter_destroy");
    for (int i = 0; i < nwaits; ++i) {
        FUZZ_CHECK(waits[i].calls == (waits[i].cancelled ? 0u : 1u),
                   "wait %d's callback ran %u times (cancelled: %d)", i, waits[i].calls,
                   waits[i].cancelled);
    }
    for (int i = 0; i < 2; ++i) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, wsig[i]), ORDO_OK, "ordo_signal_destroy");
    }
    for (int s = 0; s < STREAMS; ++s) {
        st = FUZZ_CALL(ordo_stream_synchronize, streams[s], ordo_deadline_after_ms(5000));
        FUZZ_CHECK(st == ORDO_OK || (failed_any && st == ORDO_ERR_ABORTED),
                   "ordo_stream_synchronize returned %s", ordo_status_name(st));
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_destroy, streams[s]), ORDO_OK, "ordo_stream_destroy");
        if (gates[s]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, gates[s]), ORDO_OK, "ordo_signal_destroy");
        }
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_device_release, device), ORDO_OK, "ordo_device_release");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_harness = "fuzz_coord";
    setup();
    size_t before = fuzz_live_blocks();
    fuzz_input_t in = {data, size, 0};
    nops = nwaits = failed_any = 0;
    memset(barriers, 0, sizeof barriers);
    FUZZ_EXPECT(ordo_device_create_owned("cpu", NULL, &device), ORDO_OK,
                "ordo_device_create_owned");
    uint8_t config = fuzz_u8(&in);
    for (int s = 0; s < STREAMS; ++s) {
        FUZZ_EXPECT(ordo_stream_create(device, 0, &streams[s]), ORDO_OK, "ordo_stream_create");
        gates[s] = NULL;
        gate_open[s] = 0;
        if (config & (2u << s)) {
            FUZZ_EXPECT(ordo_signal_create(0, &gates[s]), ORDO_OK, "ordo_signal_create");
            FUZZ_EXPECT(ordo_stream_wait(streams[s], gates[s], 1), ORDO_OK, "ordo_stream_wait");
        }
    }
    unchecked = config & 1;
    ordo_coord_config_t cc = {NULL, unchecked ? ORDO_COORD_UNCHECKED : 0};
    FUZZ_EXPECT(FUZZ_CALL(ordo_coord_create, device, &cc, &coord), ORDO_OK, "ordo_coord_create");
    ordo_waiter_config_t wc = {1 + (config >> 4) % 2, 0};
    FUZZ_EXPECT(FUZZ_CALL(ordo_waiter_create, &wc, &waiter), ORDO_OK, "ordo_waiter_create");
    for (int i = 0; i < 2; ++i) {
        FUZZ_EXPECT(ordo_signal_create(0, &wsig[i]), ORDO_OK, "ordo_signal_create");
    }
    for (int n = 0; n < MAX_OPS && fuzz_more(&in); ++n) {
        switch (fuzz_u8(&in) % 10) {
        case 0:
        case 1:
            op_register(&in);
            break;
        case 2:
        case 3:
            op_add_dependency(&in);
            break;
        case 4:
            op_begin(&in);
            break;
        case 5:
            op_complete(&in);
            break;
        case 6:
            op_dispatch(&in);
            break;
        case 7:
            op_misc(&in);
            break;
        case 8:
            op_wait(&in);
            break;
        default:
            op_barrier(&in);
            break;
        }
    }
    teardown();
    FUZZ_CHECK_BASELINE(before);
    return 0;
}
