/* Stall reports: snapshot every live stream's queued waits and signals
 * through the HAL, then simulate forward to a fixpoint to decide which
 * blocked waits the enqueued work can still release (see ordo/stall.h).
 *
 * Locks: the device's streams_lock is held while the streams are
 * snapshotted, one after the other (each snapshot takes only that stream's
 * producers' lock); nothing is allocated and no user code runs under
 * either. Signal references taken by the snapshots are dropped after every
 * lock is released. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "coord/stall_text.h"
#include "hal/hal.h"
#include "ordo/stall.h"
#include "sync/signal_access.h"

/* Room for waits and signals per stream in the first attempt; streams
 * with more get ORDO_STALL_MAX_PENDING in a second one. */
#define FIRST_CAPACITY 64u
#define NONE SIZE_MAX

typedef struct sim_stream {
    ordo_stream_t *stream;
    char name[ORDO_STREAM_NAME_MAX]; /* its name, else its address */
    uint64_t id;
    int priority;
    int seen; /* the backend can snapshot its queue */
    hal_stream_snapshot_t snap;
    size_t *sig;     /* per op: index into the signal table */
    size_t pos;      /* simulation: ops passed */
    int failed;      /* failed, or fails in the simulation */
    size_t progress; /* index of its progress timeline, or NONE */
    /* Who released the first op, if it was passed. */
    size_t releaser;
    uint64_t released_to;
    int release_fails;
} sim_stream_t;

typedef struct sim_signal {
    ordo_signal_t *signal;
    uint64_t actual;    /* value at the snapshot */
    int actual_ended;   /* failed or destroyed at the snapshot */
    uint64_t value;     /* simulated */
    int ended;          /* simulated: failed */
    size_t raiser;      /* stream that last raised (or failed) it, or NONE */
    uint64_t raised_to; /* the value it raised it to */
    size_t progress_of; /* stream whose progress timeline this is, or NONE */
} sim_signal_t;

typedef struct stall_set {
    size_t count; /* streams */
    sim_stream_t *streams;
    size_t slots;          /* streams allocated */
    hal_pending_op_t *ops; /* every stream's slice */
    size_t op_slots;
    size_t *op_sig;
    sim_signal_t *signals;
    size_t signal_slots;
    size_t signal_count;
    int any_truncated;
} stall_set_t;

/* Zero-filled arrays through the allocator hooks; NULL on overflow. */
static void *array_alloc(size_t count, size_t size) {
    if (count == 0) {
        count = 1;
    }
    if (count > SIZE_MAX / size) {
        return NULL;
    }
    return ordo__alloc(count * size, 0);
}

static void array_free(void *array, size_t count, size_t size) {
    if (array) {
        ordo__dealloc(array, (count ? count : 1) * size, 0);
    }
}

static void set_release(stall_set_t *set) {
    for (size_t i = 0; i < set->count; ++i) {
        if (set->streams[i].seen) {
            ordo__hal_stream_snapshot_release(&set->streams[i].snap);
        }
    }
    array_free(set->streams, set->slots, sizeof *set->streams);
    array_free(set->ops, set->op_slots, sizeof *set->ops);
    array_free(set->op_sig, set->signal_slots, sizeof *set->op_sig);
    array_free(set->signals, set->signal_slots, sizeof *set->signals);
    memset(set, 0, sizeof *set);
}

static int id_listed(const uint64_t *ids, size_t count, uint64_t id) {
    for (size_t i = 0; i < count; ++i) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* Snapshots every live stream of device into set. Allocation happens
 * between lock holds: if the registry grew meanwhile the attempt is
 * repeated with more room, and if queues did not fit in FIRST_CAPACITY,
 * once more with ORDO_STALL_MAX_PENDING for those streams (by id). */
static ordo_status_t collect(ordo_device_t *device, stall_set_t *set, const char *api) {
    uint64_t *grown = NULL; /* ids of the streams given the larger room */
    size_t grown_count = 0;
    int final = 0;
    size_t slack = 4;
    for (;;) {
        pthread_mutex_lock(&device->streams_lock);
        size_t slots = device->stream_count + slack;
        pthread_mutex_unlock(&device->streams_lock);
        memset(set, 0, sizeof *set);
        set->slots = slots;
        set->op_slots =
            slots * FIRST_CAPACITY + grown_count * (ORDO_STALL_MAX_PENDING - FIRST_CAPACITY);
        set->streams = array_alloc(set->slots, sizeof *set->streams);
        set->ops = array_alloc(set->op_slots, sizeof *set->ops);
        if (!set->streams || !set->ops) {
            set_release(set);
            array_free(grown, grown_count, sizeof *grown);
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                               "cannot allocate a snapshot of %zu streams", slots);
        }
        pthread_mutex_lock(&device->streams_lock);
        int fits = device->stream_count <= slots;
        if (fits) {
            size_t i = 0, offset = 0;
            for (ordo_stream_t *s = device->streams_head; s; s = s->registry_next, ++i) {
                sim_stream_t *t = &set->streams[i];
                t->stream = s;
                ordo__hal_stream_name_locked(s, t->name, sizeof t->name);
                t->id = s->id;
                t->priority = s->priority;
                size_t capacity =
                    id_listed(grown, grown_count, s->id) ? ORDO_STALL_MAX_PENDING : FIRST_CAPACITY;
                /* Each listed id is one stream, so this never overflows
                 * the room counted; checked all the same. */
                if (capacity > set->op_slots - offset) {
                    capacity = FIRST_CAPACITY;
                }
                t->snap.ops = set->ops + offset;
                t->snap.capacity = capacity;
                offset += capacity;
                if (device->backend->stream_snapshot) {
                    device->backend->stream_snapshot(s, &t->snap);
                    t->seen = 1;
                    set->any_truncated |= t->snap.truncated;
                }
            }
            set->count = i;
        }
        pthread_mutex_unlock(&device->streams_lock);
        if (!fits) {
            set_release(set);
            slack *= 2;
            continue;
        }
        if (!set->any_truncated || final) {
            array_free(grown, grown_count, sizeof *grown);
            return ORDO_OK;
        }
        /* One more attempt, with room for the streams that overflowed. */
        array_free(grown, grown_count, sizeof *grown);
        grown_count = 0;
        for (size_t i = 0; i < set->count; ++i) {
            grown_count += set->streams[i].snap.truncated;
        }
        grown = array_alloc(grown_count, sizeof *grown);
        if (!grown) {
            set_release(set);
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a snapshot");
        }
        for (size_t i = 0, k = 0; i < set->count; ++i) {
            if (set->streams[i].snap.truncated) {
                grown[k++] = set->streams[i].id;
            }
        }
        set_release(set);
        final = 1;
    }
}

static int pointer_order(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (ordo_signal_t *const *)a;
    uintptr_t y = (uintptr_t) * (ordo_signal_t *const *)b;
    return x < y ? -1 : x > y;
}

static size_t signal_index(const stall_set_t *set, const ordo_signal_t *signal) {
    size_t lo = 0, hi = set->signal_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)set->signals[mid].signal < (uintptr_t)signal) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* The distinct signals of every snapshot, sorted by address, with their
 * values read now (each is retained by a snapshot). */
static ordo_status_t build_signals(stall_set_t *set, const char *api) {
    size_t total = 0;
    for (size_t i = 0; i < set->count; ++i) {
        total += set->streams[i].snap.count + 1;
    }
    ordo_signal_t **all = array_alloc(total, sizeof *all);
    set->signal_slots = total;
    set->signals = array_alloc(total, sizeof *set->signals);
    set->op_sig = array_alloc(total, sizeof *set->op_sig);
    if (!all || !set->signals || !set->op_sig) {
        array_free(all, total, sizeof *all);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the stall analysis");
    }
    size_t n = 0;
    for (size_t i = 0; i < set->count; ++i) {
        const hal_stream_snapshot_t *snap = &set->streams[i].snap;
        for (size_t k = 0; k < snap->count; ++k) {
            all[n++] = snap->ops[k].signal;
        }
        if (snap->progress) {
            all[n++] = snap->progress;
        }
    }
    qsort(all, n, sizeof *all, pointer_order);
    size_t unique = 0;
    for (size_t k = 0; k < n; ++k) {
        if (unique == 0 || set->signals[unique - 1].signal != all[k]) {
            sim_signal_t *g = &set->signals[unique++];
            g->signal = all[k];
            signal_view_t view = ordo__signal_view(all[k]);
            g->actual = view.value;
            g->actual_ended = view.ended;
            g->value = g->actual;
            g->ended = g->actual_ended;
            g->raiser = NONE;
            g->progress_of = NONE;
        }
    }
    set->signal_count = unique;
    array_free(all, total, sizeof *all);
    size_t at = 0;
    for (size_t i = 0; i < set->count; ++i) {
        sim_stream_t *t = &set->streams[i];
        t->sig = set->op_sig + at;
        at += t->snap.count;
        for (size_t k = 0; k < t->snap.count; ++k) {
            t->sig[k] = signal_index(set, t->snap.ops[k].signal);
        }
        t->progress = NONE;
        if (t->snap.progress) {
            t->progress = signal_index(set, t->snap.progress);
            set->signals[t->progress].progress_of = i;
        }
        t->failed = t->snap.status != ORDO_OK;
        t->releaser = NONE;
    }
    return ORDO_OK;
}

static int raise_to(sim_signal_t *g, uint64_t value, size_t by, int fails) {
    if (g->value >= value || g->ended) {
        return 0;
    }
    if (fails) {
        g->ended = 1;
    } else {
        g->value = value;
    }
    g->raiser = by;
    g->raised_to = value;
    return 1;
}

/* Runs stream i forward as far as the simulated signals allow. Returns
 * whether anything moved. */
static int advance(stall_set_t *set, size_t i) {
    sim_stream_t *t = &set->streams[i];
    if (!t->seen) {
        return 0;
    }
    int moved = 0;
    const hal_stream_snapshot_t *snap = &t->snap;
    while (t->pos < snap->count) {
        const hal_pending_op_t *op = &snap->ops[t->pos];
        sim_signal_t *g = &set->signals[t->sig[t->pos]];
        if (op->kind == HAL_PENDING_WAIT) {
            /* A failed stream skips its waits. A wait on a failed signal
             * not yet at the value fails the stream: released, too. */
            if (!t->failed) {
                if (g->value < op->value && !g->ended) {
                    break;
                }
                if (t->pos == 0) {
                    t->releaser = g->raiser;
                    t->released_to = g->raised_to;
                    t->release_fails = g->value < op->value;
                }
                if (g->value < op->value) {
                    /* The stream fails here; the points before stay
                     * reached. */
                    if (t->progress != NONE) {
                        moved |= raise_to(&set->signals[t->progress], op->seq - 1, i, 0);
                    }
                    t->failed = 1;
                }
            }
        } else {
            moved |= raise_to(g, op->value, i, t->failed);
        }
        ++t->pos;
        moved = 1;
    }
    if (t->progress != NONE) {
        sim_signal_t *g = &set->signals[t->progress];
        uint64_t reached = t->pos < snap->count ? snap->ops[t->pos].seq - 1
                           : !snap->truncated   ? snap->submitted
                           : snap->count        ? snap->ops[snap->count - 1].seq
                                                : snap->completed;
        moved |= raise_to(g, t->failed ? ORDO_SIGNAL_VALUE_MAX : reached, i, t->failed);
    }
    return moved;
}

static void simulate(stall_set_t *set) {
    int moved = 1;
    while (moved) {
        moved = 0;
        for (size_t i = 0; i < set->count; ++i) {
            moved |= advance(set, i);
        }
    }
}

/* Whether a queue was seen in part; with run_past, only one the
 * simulation ran past everything it showed. A report asks run_past: work
 * behind a wait the simulation stopped at cannot run, so it releases
 * nothing, and the report stays exact. A holder asks about any: a signal
 * may be raised behind such a wait, out of sight, and that stream would be
 * its holder. */
static int queue_unseen(const stall_set_t *set, int run_past) {
    for (size_t i = 0; i < set->count; ++i) {
        const sim_stream_t *t = &set->streams[i];
        if (t->seen && t->snap.truncated && (!run_past || t->pos == t->snap.count)) {
            return 1;
        }
    }
    return 0;
}

/* The first stream (in creation order) whose queued signal, not yet
 * passed in the simulation, would raise signal index g to value, or NONE.
 * It is stopped at its first unpassed op, a wait. */
static size_t holder_of(const stall_set_t *set, size_t g, uint64_t value) {
    for (size_t i = 0; i < set->count; ++i) {
        const sim_stream_t *t = &set->streams[i];
        if (!t->seen || t->failed || t->pos >= t->snap.count) {
            continue;
        }
        for (size_t k = t->pos; k < t->snap.count; ++k) {
            const hal_pending_op_t *op = &t->snap.ops[k];
            if (op->kind != HAL_PENDING_WAIT && t->sig[k] == g && op->value >= value) {
                return i;
            }
        }
    }
    return NONE;
}

/* A report line follows an unreachable wait through the blocked streams
 * that hold it, so that it names the wait at the root (or the cycle), not
 * only the first link; bounded, as a line must stay readable. */
#define CHAIN_MAX 8u

typedef struct chain_link {
    ordo_stream_t *stream; /* the holder, stopped at the wait below */
    char stream_name[ORDO_STREAM_NAME_MAX];
    ordo_signal_t *signal;      /* what it waits for; NULL for an event wait */
    ordo_stream_t *progress_of; /* for an event wait: the recording stream */
    char progress_of_name[ORDO_STREAM_NAME_MAX];
    char signal_name[ORDO_SIGNAL_NAME_MAX];
    uint64_t waited_value;
    uint64_t current_value;
} chain_link_t;

typedef enum chain_end {
    CHAIN_ROOT,  /* the last wait has no holder in the queues */
    CHAIN_CYCLE, /* the last wait is held by a stream already on the chain */
    CHAIN_LONG,  /* longer than CHAIN_MAX links */
} chain_end_t;

typedef struct chain {
    size_t count;
    chain_end_t end;
    size_t again; /* CHAIN_CYCLE: 0 for the blocked stream, k for links[k - 1] */
    chain_link_t links[CHAIN_MAX];
} chain_t;

/* The blocked stream that holds stream index s's stopped wait: the holder
 * of its signal, or, for an event wait, the recording stream while it is
 * stopped itself. NONE when no enqueued work holds it. */
static size_t wait_holder(const stall_set_t *set, size_t s) {
    const sim_stream_t *t = &set->streams[s];
    size_t g = t->sig[t->pos];
    size_t recorder = set->signals[g].progress_of;
    if (recorder != NONE) {
        const sim_stream_t *r = &set->streams[recorder];
        return r->seen && !r->failed && r->pos < r->snap.count ? recorder : NONE;
    }
    return holder_of(set, g, t->snap.ops[t->pos].value);
}

static void chain_follow(const stall_set_t *set, size_t start, chain_t *chain) {
    size_t on[CHAIN_MAX + 1] = {start}; /* the streams on the chain */
    chain->count = 0;
    size_t s = start;
    for (;;) {
        size_t h = wait_holder(set, s);
        if (h == NONE) {
            chain->end = CHAIN_ROOT;
            return;
        }
        for (size_t j = 0; j <= chain->count; ++j) {
            if (on[j] == h) {
                chain->end = CHAIN_CYCLE;
                chain->again = j;
                return;
            }
        }
        if (chain->count == CHAIN_MAX) {
            chain->end = CHAIN_LONG;
            return;
        }
        const sim_stream_t *t = &set->streams[h];
        const sim_signal_t *w = &set->signals[t->sig[t->pos]];
        chain_link_t *link = &chain->links[chain->count];
        memset(link, 0, sizeof *link);
        link->stream = t->stream;
        memcpy(link->stream_name, t->name, sizeof link->stream_name);
        if (w->progress_of != NONE) {
            link->progress_of = set->streams[w->progress_of].stream;
            memcpy(link->progress_of_name, set->streams[w->progress_of].name,
                   sizeof link->progress_of_name);
        } else {
            link->signal = w->signal;
        }
        ordo__signal_name_get_internal(w->signal, link->signal_name, sizeof link->signal_name);
        link->waited_value = t->snap.ops[t->pos].value;
        link->current_value = w->actual;
        on[++chain->count] = h;
        s = h;
    }
}

/* The whole report into a fresh array of *out_slots entries (array_free
 * it); with chains, also each UNREACHABLE entry's chain of holders into a
 * fresh array of as many (array_free it too). */
static ordo_status_t stall_build(ordo_device_t *device, ordo_stall_entry_t **out_entries,
                                 size_t *out_count, size_t *out_slots, chain_t **out_chains,
                                 const char *api) {
    *out_entries = NULL;
    *out_count = 0;
    *out_slots = 0;
    if (out_chains) {
        *out_chains = NULL;
    }
    stall_set_t set;
    ORDO_RETURN_IF_ERROR(collect(device, &set, api));
    ordo_status_t st = build_signals(&set, api);
    ordo_stall_entry_t *entries = NULL;
    chain_t *chains = NULL;
    if (st == ORDO_OK) {
        entries = array_alloc(set.count, sizeof *entries);
        if (out_chains) {
            chains = array_alloc(set.count, sizeof *chains);
        }
        if (!entries || (out_chains && !chains)) {
            st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the report");
        }
    }
    if (st != ORDO_OK) {
        array_free(entries, set.count, sizeof *entries);
        array_free(chains, set.count, sizeof *chains);
        set_release(&set);
        return st;
    }
    simulate(&set);
    int unseen = queue_unseen(&set, 1);
    size_t n = 0;
    for (size_t i = 0; i < set.count; ++i) {
        const sim_stream_t *t = &set.streams[i];
        if (!t->seen || !t->snap.in_wait || t->snap.status != ORDO_OK) {
            continue;
        }
        const hal_pending_op_t *op = &t->snap.ops[0];
        const sim_signal_t *g = &set.signals[t->sig[0]];
        if (g->actual >= op->value || g->actual_ended) {
            continue; /* released as the snapshot was taken */
        }
        ordo_stall_entry_t *e = &entries[n++];
        e->stream = t->stream;
        memcpy(e->stream_name, t->name, sizeof e->stream_name);
        e->stream_priority = t->priority;
        if (g->progress_of != NONE) {
            e->progress_of = set.streams[g->progress_of].stream;
            memcpy(e->progress_of_name, set.streams[g->progress_of].name,
                   sizeof e->progress_of_name);
        } else {
            e->signal = g->signal;
        }
        ordo__signal_name_get_internal(g->signal, e->signal_name, sizeof e->signal_name);
        e->waited_value = op->value;
        e->current_value = g->actual;
        if (t->pos > 0) {
            e->reach = ORDO_STALL_REACHABLE;
            if (t->releaser != NONE) {
                e->releasing_stream = set.streams[t->releaser].stream;
                memcpy(e->releasing_stream_name, set.streams[t->releaser].name,
                       sizeof e->releasing_stream_name);
            }
            e->releasing_value = t->released_to;
            e->release_fails = t->release_fails;
        } else {
            e->reach = unseen ? ORDO_STALL_UNKNOWN : ORDO_STALL_UNREACHABLE;
            if (chains && e->reach == ORDO_STALL_UNREACHABLE) {
                chain_follow(&set, i, &chains[n - 1]);
            }
        }
    }
    if (out_chains) {
        *out_chains = chains;
    }
    *out_entries = entries;
    *out_count = n;
    *out_slots = set.count;
    set_release(&set);
    return ORDO_OK;
}

ordo_status_t ordo_stall_report(ordo_device_t *device, ordo_stall_entry_t *out_entries,
                                size_t capacity, size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_count || (capacity && !out_entries)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_count ? "out_entries" : "out_count");
    }
    ordo_stall_entry_t *entries;
    size_t count, slots;
    ORDO_RETURN_IF_ERROR(stall_build(device, &entries, &count, &slots, NULL, __func__));
    for (size_t i = 0; i < count && i < capacity; ++i) {
        out_entries[i] = entries[i];
    }
    *out_count = count;
    array_free(entries, slots, sizeof *entries);
    return ORDO_OK;
}

/* The holder of signal index g at value, after the simulation. */
static void holder_find(const stall_set_t *set, size_t g, uint64_t value,
                        ordo_stall_holder_t *out) {
    const sim_signal_t *target = &set->signals[g];
    if (target->value >= value) {
        out->hold = ORDO_STALL_HOLD_RAISED;
        return;
    }
    if (target->ended) {
        /* Already, or by a failure the simulation carried to it. */
        out->hold = ORDO_STALL_HOLD_FAILS;
        if (!target->actual_ended && target->raiser != NONE) {
            const sim_stream_t *t = &set->streams[target->raiser];
            out->stream = t->stream;
            memcpy(out->stream_name, t->name, sizeof out->stream_name);
        }
        return;
    }
    size_t i = holder_of(set, g, value);
    if (i != NONE) {
        const sim_stream_t *t = &set->streams[i];
        const sim_signal_t *w = &set->signals[t->sig[t->pos]];
        out->hold = ORDO_STALL_HOLD_BLOCKED;
        out->stream = t->stream;
        memcpy(out->stream_name, t->name, sizeof out->stream_name);
        if (w->progress_of != NONE) {
            out->progress_of = set->streams[w->progress_of].stream;
        } else {
            out->waits_for = w->signal;
        }
        ordo__signal_name_get_internal(w->signal, out->signal_name, sizeof out->signal_name);
        out->waited_value = t->snap.ops[t->pos].value;
        out->current_value = w->actual;
        return;
    }
    out->hold = queue_unseen(set, 0) ? ORDO_STALL_HOLD_UNKNOWN : ORDO_STALL_HOLD_NONE;
}

ordo_status_t ordo_stall_holder(ordo_device_t *device, ordo_signal_t *signal, uint64_t value,
                                ordo_stall_holder_t *out_holder) {
    if (out_holder) {
        memset(out_holder, 0, sizeof *out_holder);
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    if (!out_holder) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_holder is NULL");
    }
    if (value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "value %" PRIu64 " is above ORDO_SIGNAL_VALUE_MAX", value);
    }
    stall_set_t set;
    ORDO_RETURN_IF_ERROR(collect(device, &set, __func__));
    ordo_status_t st = build_signals(&set, __func__);
    if (st == ORDO_OK) {
        simulate(&set);
        size_t g = signal_index(&set, signal);
        if (g < set.signal_count && set.signals[g].signal == signal) {
            holder_find(&set, g, value, out_holder);
        } else if (ordo__signal_view(signal).value >= value) {
            out_holder->hold = ORDO_STALL_HOLD_RAISED; /* there already */
        } else if (ordo__signal_view(signal).ended) {
            out_holder->hold = ORDO_STALL_HOLD_FAILS;
        } else { /* in no queue */
            out_holder->hold =
                queue_unseen(&set, 0) ? ORDO_STALL_HOLD_UNKNOWN : ORDO_STALL_HOLD_NONE;
        }
    }
    set_release(&set);
    return st;
}

/* A name as a report line shows it: in quotes, with quotes, backslashes
 * and control characters escaped (\" \\ \xHH), so that a line stays one
 * line whatever a program named its streams and signals. */
_Static_assert(ORDO_STREAM_NAME_MAX <= ORDO_SIGNAL_NAME_MAX, "one size of shown name");
typedef struct shown {
    char text[ORDO__STALL_SHOWN_MAX];
} shown_t;

static shown_t quoted(const char *name) {
    shown_t out;
    size_t n = 0;
    out.text[n++] = '"';
    for (const unsigned char *c = (const unsigned char *)name; *c; ++c) {
        if (*c == '"' || *c == '\\') {
            out.text[n++] = '\\';
            out.text[n++] = (char)*c;
        } else if (*c < 0x20 || *c == 0x7f) {
            n += (size_t)snprintf(out.text + n, sizeof out.text - n, "\\x%02x", *c);
        } else {
            out.text[n++] = (char)*c;
        }
    }
    out.text[n++] = '"';
    out.text[n] = '\0';
    return out;
}

/* A stream or signal as a report line shows it: its name quoted, or its
 * address, unquoted, when it has none (the entry then holds the address as
 * the name). */
static shown_t shown(const void *object, const char *name) {
    shown_t out;
    snprintf(out.text, sizeof out.text, "%p", object);
    if (name[0] && strcmp(name, out.text) != 0) {
        out = quoted(name);
    }
    return out;
}

void ordo__stall_shown(const void *object, const char *name, char *out, size_t capacity) {
    snprintf(out, capacity, "%s", shown(object, name).text);
}

/* What a stream waits for, as a report line shows it. */
static void wait_append(char *text, size_t capacity, size_t *len, const void *signal,
                        const void *progress_of, const char *progress_of_name,
                        const char *signal_name, uint64_t waited, uint64_t current) {
    if (progress_of) {
        ordo__text_append(text, capacity, len,
                          "stream %s to reach point %llu (now %llu; an event wait)",
                          shown(progress_of, progress_of_name).text, (unsigned long long)waited,
                          (unsigned long long)current);
    } else {
        ordo__text_append(text, capacity, len, "signal %s to reach %llu (now %llu)",
                          shown(signal, signal_name).text, (unsigned long long)waited,
                          (unsigned long long)current);
    }
}

/* An unreachable wait: the blocked streams that hold it, link by link,
 * then what releases the last one. */
static void unreachable_append(const ordo_stall_entry_t *e, const chain_t *chain, char *text,
                               size_t capacity, size_t *len) {
    static const char release[] = "only a host signal, a link or a failure can release";
    if (chain->count == 0 && chain->end == CHAIN_ROOT) {
        ordo__text_append(text, capacity, len,
                          "UNREACHABLE by enqueued work - %s it (a deadlock if none comes)",
                          release);
        return;
    }
    ordo__text_append(text, capacity, len, "UNREACHABLE by enqueued work - ");
    for (size_t k = 0; k < chain->count; ++k) {
        const chain_link_t *link = &chain->links[k];
        ordo__text_append(text, capacity, len, "%sheld by stream %s, which waits for ",
                          k ? ", " : "", shown(link->stream, link->stream_name).text);
        wait_append(text, capacity, len, link->signal, link->progress_of, link->progress_of_name,
                    link->signal_name, link->waited_value, link->current_value);
    }
    switch (chain->end) {
    case CHAIN_CYCLE: {
        shown_t again = chain->again == 0 ? shown(e->stream, e->stream_name)
                                          : shown(chain->links[chain->again - 1].stream,
                                                  chain->links[chain->again - 1].stream_name);
        ordo__text_append(text, capacity, len,
                          "%sheld by stream %s: a cycle - %s a wait in it "
                          "(a deadlock if none comes)",
                          chain->count ? ", " : "", again.text, release);
        break;
    }
    case CHAIN_LONG:
        ordo__text_append(text, capacity, len,
                          ", and so on (a chain of more than %u blocked streams)", CHAIN_MAX);
        break;
    default:
        ordo__text_append(text, capacity, len, " - %s that (a deadlock if none comes)", release);
        break;
    }
}

static void format_entry(const ordo_stall_entry_t *e, const chain_t *chain, char *text,
                         size_t capacity, size_t *len) {
    ordo__text_append(text, capacity, len, "stream %s (priority %d) waits for ",
                      shown(e->stream, e->stream_name).text, e->stream_priority);
    wait_append(text, capacity, len, e->signal, e->progress_of, e->progress_of_name, e->signal_name,
                e->waited_value, e->current_value);
    ordo__text_append(text, capacity, len, ": ");
    switch (e->reach) {
    case ORDO_STALL_REACHABLE: {
        shown_t releaser = shown(e->releasing_stream, e->releasing_stream_name);
        if (e->release_fails) {
            ordo__text_append(
                text, capacity, len,
                "released by a failure propagating from stream %s (this wait will fail)",
                releaser.text);
        } else if (e->progress_of && e->progress_of == e->releasing_stream) {
            ordo__text_append(text, capacity, len, "released when stream %s reaches point %llu",
                              releaser.text, (unsigned long long)e->releasing_value);
        } else {
            ordo__text_append(text, capacity, len, "released when stream %s signals %llu",
                              releaser.text, (unsigned long long)e->releasing_value);
        }
        break;
    }
    case ORDO_STALL_UNREACHABLE:
        unreachable_append(e, chain, text, capacity, len);
        break;
    default:
        ordo__text_append(
            text, capacity, len,
            "UNKNOWN - a stream has more than %u waits and signals queued, beyond what the "
            "report inspects",
            ORDO_STALL_MAX_PENDING);
        break;
    }
    ordo__text_append(text, capacity, len, "\n");
}

ordo_status_t ordo_stall_report_format(ordo_device_t *device, char *out_text, size_t capacity,
                                       size_t *out_len) {
    if (out_len) {
        *out_len = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_len || (capacity && !out_text)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_len ? "out_text" : "out_len");
    }
    ordo_stall_entry_t *entries;
    size_t count, slots;
    chain_t *chains;
    ORDO_RETURN_IF_ERROR(stall_build(device, &entries, &count, &slots, &chains, __func__));
    size_t len = 0;
    if (capacity) {
        out_text[0] = '\0';
    }
    for (size_t i = 0; i < count; ++i) {
        format_entry(&entries[i], &chains[i], out_text, capacity, &len);
    }
    array_free(entries, slots, sizeof *entries);
    array_free(chains, slots, sizeof *chains);
    *out_len = len;
    if (capacity && len >= capacity) { /* as ordo_metrics_format: a sizing query is capacity 0 */
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "the report needs %zu bytes and a terminator; %zu given", len, capacity);
    }
    return ORDO_OK;
}
