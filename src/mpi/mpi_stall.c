/* A stall report across ranks (ordo_mpi_stall_report, ordo/mpi.h).
 *
 * Each rank knows its own wait-for edges that cross ranks:
 *   WAIT      one of its streams (from its device's stall report) or one
 *             of its threads (asleep or helping in ordo_signal_wait) waits
 *             for another rank's signal (an observed handle) to reach a
 *             value;
 *   HELD      one of its published signals will not move until a blocked
 *             stream of its own runs on (ordo_stall_holder, asked for the
 *             publication's next value), and that stream waits for a
 *             signal: another rank's (an edge to that rank's publication),
 *             or a local one;
 *   UNRAISED  nothing enqueued on its device raises one of its
 *             publications: only its host (or a link) can.
 * The asking rank sends STALL_QUERY to every other rank; each answers from
 * its progress thread with its records, in messages of at most
 * STALL_RECORDS_PER_MESSAGE records (under 4 KiB, the smallest eager limit
 * of Open MPI's transports: a send returns at once, whether or not the
 * asker is still there to take it). The asker gathers until every rank
 * answered or the deadline passed, joins HELD edges publication to
 * publication (each publication has at most one holder: a functional
 * graph), and names every cycle: publications each held by a stream that
 * waits for the next, round to the first, which nothing but a host can
 * break.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/error.h"
#include "coord/stall_text.h"
#include "hal/hal.h"
#include "mpi/mpi_internal.h"
#include "ordo/stall.h"
#include "sync/signal_access.h"

#define STALL_RECORDS_PER_MESSAGE 8u
#define STALL_RECORDS_MAX 1024u   /* a rank's, at most */
#define STALL_STREAM_ENTRIES 256u /* blocked streams looked at, a rank */

enum { RECORD_WAIT_STREAM = 1, RECORD_WAIT_THREAD, RECORD_HELD, RECORD_UNRAISED, RECORD_UNKNOWN };

typedef struct stall_record {
    uint32_t kind;
    uint32_t id;        /* HELD, UNRAISED, UNKNOWN: this rank's publication */
    int32_t owner;      /* the rank of the signal waited for; -1: a local signal */
    uint32_t waited_id; /* its id (owner >= 0) */
    uint64_t value;     /* the value waited for */
    uint64_t now;       /* its value here */
    uint64_t at;        /* HELD, UNRAISED, UNKNOWN: the publication's value */
    /* As the rank's own stall report shows them (quoted names, or
     * addresses). */
    char stream[ORDO__STALL_SHOWN_MAX];      /* WAIT_STREAM, HELD: the stream */
    char signal[ORDO__STALL_SHOWN_MAX + 32]; /* owner -1: the local signal */
} stall_record_t;

typedef struct stall_message {
    uint64_t serial; /* the query's */
    uint32_t epoch;  /* the answering ordo_mpi_t's (mpi_internal.h) */
    uint32_t total;  /* the rank's records, in all its messages */
    uint32_t count;  /* in this one */
    stall_record_t records[STALL_RECORDS_PER_MESSAGE];
} stall_message_t;

_Static_assert(sizeof(stall_message_t) <= 4096, "a reply message must stay eager");

typedef struct record_list {
    stall_record_t *records;
    size_t count, capacity;
} record_list_t;

static stall_record_t *record_add(record_list_t *list) {
    if (list->count == list->capacity) {
        return NULL;
    }
    stall_record_t *r = &list->records[list->count++];
    memset(r, 0, sizeof *r);
    return r;
}

/* The observed handle that is signal, under lock; NULL if none. */
static mpi_remote_t *remote_find(ordo_mpi_t *mpi, const ordo_signal_t *signal) {
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        if (r->remote.signal == signal) {
            return r;
        }
    }
    return NULL;
}

/* This rank's records (see the top). */
static void local_records(ordo_mpi_t *mpi, record_list_t *list) {
    ordo_device_t *device = mpi->stream->device;
    size_t count = 0;
    ordo_stall_entry_t *entries = ordo__alloc(STALL_STREAM_ENTRIES * sizeof *entries, 0);
    if (entries && ordo_stall_report(device, entries, STALL_STREAM_ENTRIES, &count) == ORDO_OK) {
        count = count < STALL_STREAM_ENTRIES ? count : STALL_STREAM_ENTRIES;
        pthread_mutex_lock(&mpi->lock);
        for (size_t i = 0; i < count; ++i) {
            mpi_remote_t *r = entries[i].signal ? remote_find(mpi, entries[i].signal) : NULL;
            stall_record_t *rec = r ? record_add(list) : NULL;
            if (rec) {
                rec->kind = RECORD_WAIT_STREAM;
                rec->owner = r->owner;
                rec->waited_id = r->id;
                rec->value = entries[i].waited_value;
                rec->now = entries[i].current_value;
                ordo__stall_shown(entries[i].stream, entries[i].stream_name, rec->stream,
                                  sizeof rec->stream);
            }
        }
        pthread_mutex_unlock(&mpi->lock);
    }
    if (entries) {
        ordo__dealloc(entries, STALL_STREAM_ENTRIES * sizeof *entries, 0);
    }

    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        uint64_t waited = atomic_load_explicit(&r->thread_value, memory_order_relaxed);
        stall_record_t *rec = atomic_load_explicit(&r->thread_waiters, memory_order_relaxed) > 0
                                  ? record_add(list)
                                  : NULL;
        if (rec) {
            rec->kind = RECORD_WAIT_THREAD;
            rec->owner = r->owner;
            rec->waited_id = r->id;
            rec->value = waited;
            rec->now =
                atomic_load_explicit(&r->state, memory_order_acquire) & ORDO_SIGNAL_VALUE_MAX;
        }
    }
    mpi_published_t *published = mpi->published; /* freed only by the destroy */
    pthread_mutex_unlock(&mpi->lock);

    /* The refusals met on the way (an ended signal) are no failure of the
     * report: the caller's message stays. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    for (mpi_published_t *p = published; p; p = p->next) {
        uint64_t at = 0;
        if (ordo_signal_query(p->signal, &at) != ORDO_OK) {
            continue; /* ended: nothing holds it */
        }
        ordo_stall_holder_t holder;
        if (ordo_stall_holder(device, p->signal, at + 1, &holder) != ORDO_OK ||
            holder.hold == ORDO_STALL_HOLD_RAISED || holder.hold == ORDO_STALL_HOLD_FAILS) {
            continue; /* a failure reaches the observers too: nothing hangs */
        }
        stall_record_t *rec = record_add(list);
        if (!rec) {
            break;
        }
        rec->id = p->id;
        rec->at = at;
        rec->owner = -1;
        if (holder.hold != ORDO_STALL_HOLD_BLOCKED) {
            rec->kind = holder.hold == ORDO_STALL_HOLD_NONE ? RECORD_UNRAISED : RECORD_UNKNOWN;
            continue;
        }
        rec->kind = RECORD_HELD;
        rec->value = holder.waited_value;
        rec->now = holder.current_value;
        ordo__stall_shown(holder.stream, holder.stream_name, rec->stream, sizeof rec->stream);
        char shown[ORDO__STALL_SHOWN_MAX];
        if (holder.waits_for) {
            ordo__stall_shown(holder.waits_for, holder.signal_name, shown, sizeof shown);
            snprintf(rec->signal, sizeof rec->signal, "signal %s", shown);
        } else { /* an event wait: the recording stream's progress */
            ordo__stall_shown(holder.progress_of, "", shown, sizeof shown);
            snprintf(rec->signal, sizeof rec->signal, "stream %s's progress", shown);
        }
        pthread_mutex_lock(&mpi->lock);
        mpi_remote_t *r = holder.waits_for ? remote_find(mpi, holder.waits_for) : NULL;
        if (r) {
            rec->owner = r->owner;
            rec->waited_id = r->id;
        }
        pthread_mutex_unlock(&mpi->lock);
    }
    ordo__message_restore(&kept);
}

void ordo__mpi_stall_answer(ordo_mpi_t *mpi, int asker, uint64_t serial) {
    stall_record_t *records = ordo__alloc(STALL_RECORDS_MAX * sizeof *records, 0);
    record_list_t list = {records, 0, records ? STALL_RECORDS_MAX : 0};
    if (records) {
        local_records(mpi, &list);
    }
    stall_message_t msg;
    size_t sent = 0;
    do { /* at least one message: an empty answer is an answer */
        memset(&msg, 0, sizeof msg);
        msg.serial = serial;
        msg.epoch = mpi->epoch;
        msg.total = (uint32_t)list.count;
        size_t n = list.count - sent;
        msg.count = (uint32_t)(n < STALL_RECORDS_PER_MESSAGE ? n : STALL_RECORDS_PER_MESSAGE);
        if (msg.count) {
            memcpy(msg.records, &list.records[sent], msg.count * sizeof *msg.records);
        }
        sent += msg.count;
        int length = (int)(offsetof(stall_message_t, records) + msg.count * sizeof *msg.records);
        /* Never waiting for the asker: one that died since it asked would
         * hold the progress thread (mpi_outbox.c). */
        ordo__mpi_bulk_send(mpi, asker, STALL_TAG, &msg, length);
    } while (sent < list.count);
    if (records) {
        ordo__dealloc(records, STALL_RECORDS_MAX * sizeof *records, 0);
    }
}

/* ---- the asker ----------------------------------------------------------- */

typedef struct gathered {
    record_list_t *lists; /* by rank */
    uint32_t *expected;   /* by rank: total records announced, UINT32_MAX before any answer */
} gathered_t;

static bool answered(const gathered_t *g, int rank) {
    return g->expected[rank] != UINT32_MAX && g->lists[rank].count >= g->expected[rank];
}

/* Takes the answers of the other ranks until all came (or were found
 * dead meanwhile) or the deadline passed. Between looks that find nothing
 * it pauses, from 1 us doubling to 100 us: the ranks that answer may need
 * this very core. */
static void gather(ordo_mpi_t *mpi, gathered_t *g, uint64_t serial, ordo_deadline_t deadline) {
    uint64_t pause = 0;
    for (;;) {
        bool all = true;
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (!answered(g, rank) && ordo__mpi_rank_dead(mpi, rank)) {
                g->expected[rank] = (uint32_t)g->lists[rank].count; /* as far as it came */
            }
            all &= answered(g, rank);
        }
        if (all || ordo_time_now_ns() >= deadline) {
            return;
        }
        stall_message_t msg;
        int source;
        if (!ordo__mpi_take(mpi, STALL_TAG, &msg, (int)sizeof msg, &source)) {
            pause = pause == 0 ? 1000 : (pause * 2 > 100000 ? 100000 : pause * 2);
            struct timespec nap = {0, (long)pause};
            nanosleep(&nap, NULL);
            continue;
        }
        pause = 0;
        if (msg.serial != serial || msg.epoch != mpi->epoch || source < 0 || source >= mpi->size ||
            answered(g, source) || msg.count > STALL_RECORDS_PER_MESSAGE ||
            msg.total > STALL_RECORDS_MAX) {
            continue; /* a late answer to an earlier query, or not one of ours */
        }
        ordo__mpi_heard(mpi, source);
        g->expected[source] = msg.total;
        for (uint32_t i = 0; i < msg.count; ++i) {
            stall_record_t *rec = record_add(&g->lists[source]);
            if (rec) {
                *rec = msg.records[i];
                rec->stream[sizeof rec->stream - 1] = '\0';
                rec->signal[sizeof rec->signal - 1] = '\0';
            }
        }
    }
}

typedef struct text_out {
    char *text;
    size_t capacity, len;
} text_out_t;

static void say_record(text_out_t *out, int rank, const stall_record_t *r) {
    switch (r->kind) {
    case RECORD_WAIT_STREAM:
        ordo__text_append(out->text, out->capacity, &out->len,
                          "rank %d: stream %s waits for rank %d's signal %u to reach %" PRIu64
                          " (now %" PRIu64 ")\n",
                          rank, r->stream, r->owner, r->waited_id, r->value, r->now);
        break;
    case RECORD_WAIT_THREAD:
        ordo__text_append(out->text, out->capacity, &out->len,
                          "rank %d: a thread waits for rank %d's signal %u to reach %" PRIu64
                          " (now %" PRIu64 ")\n",
                          rank, r->owner, r->waited_id, r->value, r->now);
        break;
    case RECORD_HELD:
        if (r->owner >= 0) {
            ordo__text_append(
                out->text, out->capacity, &out->len,
                "rank %d: signal %u (at %" PRIu64 ") is held by stream %s, which waits for "
                "rank %d's signal %u to reach %" PRIu64 " (now %" PRIu64 ")\n",
                rank, r->id, r->at, r->stream, r->owner, r->waited_id, r->value, r->now);
        } else {
            ordo__text_append(out->text, out->capacity, &out->len,
                              "rank %d: signal %u (at %" PRIu64
                              ") is held by stream %s, which waits for "
                              "%s here to reach %" PRIu64 " (now %" PRIu64 ")\n",
                              rank, r->id, r->at, r->stream, r->signal, r->value, r->now);
        }
        break;
    case RECORD_UNRAISED:
        ordo__text_append(out->text, out->capacity, &out->len,
                          "rank %d: signal %u (at %" PRIu64
                          "): no enqueued work raises it; only its host "
                          "or a link can\n",
                          rank, r->id, r->at);
        break;
    default:
        ordo__text_append(out->text, out->capacity, &out->len,
                          "rank %d: signal %u (at %" PRIu64 "): a queue too long to see whole\n",
                          rank, r->id, r->at);
        break;
    }
}

/* A publication held by a stream waiting for another rank's signal: a
 * node of the held-by graph, and its one edge. */
typedef struct node {
    int rank;
    const stall_record_t *held;
    size_t next;   /* the node of the signal it waits for, or NO_NODE */
    uint8_t state; /* the walk's: 0 unseen, 1 on the path, 2 done */
} node_t;

#define NO_NODE SIZE_MAX

static int node_order(const void *a, const void *b) {
    const node_t *x = a, *y = b;
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    return x->held->id < y->held->id ? -1 : x->held->id > y->held->id;
}

static size_t node_find(const node_t *nodes, size_t count, int rank, uint32_t id) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const node_t *m = &nodes[mid];
        if (m->rank < rank || (m->rank == rank && m->held->id < id)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < count && nodes[lo].rank == rank && nodes[lo].held->id == id ? lo : NO_NODE;
}

/* Names each cycle of the held-by graph once, from its smallest node
 * (rank, then id). An edge counts only while the signal waited for is
 * below the value waited for where it is held: one whose update is on its
 * way is no deadlock. Each publication has at most one holder, so every
 * node has at most one edge, and one walk from each node not yet seen
 * finds every cycle: O(n log n) in all. */
static int say_cycles(text_out_t *out, const gathered_t *g, int size) {
    size_t count = 0;
    for (int rank = 0; rank < size; ++rank) {
        for (size_t i = 0; i < g->lists[rank].count; ++i) {
            count += g->lists[rank].records[i].kind == RECORD_HELD;
        }
    }
    if (count == 0) {
        return 0;
    }
    node_t *nodes = ordo__alloc(count * sizeof *nodes, 0);
    if (!nodes) {
        ordo__text_append(out->text, out->capacity, &out->len, "(no memory to look for cycles)\n");
        return 0;
    }
    size_t n = 0;
    for (int rank = 0; rank < size; ++rank) {
        for (size_t i = 0; i < g->lists[rank].count; ++i) {
            const stall_record_t *r = &g->lists[rank].records[i];
            if (r->kind == RECORD_HELD) {
                nodes[n++] = (node_t){rank, r, NO_NODE, 0};
            }
        }
    }
    qsort(nodes, n, sizeof *nodes, node_order);
    for (size_t i = 0; i < n; ++i) {
        const stall_record_t *r = nodes[i].held;
        size_t next = r->owner >= 0 && r->owner < size ? node_find(nodes, n, r->owner, r->waited_id)
                                                       : NO_NODE;
        if (next != NO_NODE && nodes[next].held->at < r->value) {
            nodes[i].next = next;
        }
    }
    int cycles = 0;
    for (size_t start = 0; start < n; ++start) {
        size_t at = start;
        while (at != NO_NODE && nodes[at].state == 0) {
            nodes[at].state = 1;
            at = nodes[at].next;
        }
        if (at != NO_NODE && nodes[at].state == 1) { /* this walk closed a cycle at `at` */
            size_t smallest = at; /* sorted: the smallest index is the smallest node */
            for (size_t k = nodes[at].next; k != at; k = nodes[k].next) {
                smallest = k < smallest ? k : smallest;
            }
            ++cycles;
            ordo__text_append(out->text, out->capacity, &out->len, "cycle: rank %d signal %u",
                              nodes[smallest].rank, nodes[smallest].held->id);
            size_t k = smallest;
            do {
                k = nodes[k].next;
                ordo__text_append(out->text, out->capacity, &out->len, " -> rank %d signal %u",
                                  nodes[k].rank, nodes[k].held->id);
            } while (k != smallest);
            ordo__text_append(
                out->text, out->capacity, &out->len,
                " (a deadlock across ranks: each is held by a stream waiting for the next)\n");
        }
        for (size_t k = start; k != NO_NODE && nodes[k].state == 1; k = nodes[k].next) {
            nodes[k].state = 2;
        }
    }
    ordo__dealloc(nodes, count * sizeof *nodes, 0);
    return cycles;
}

ordo_status_t ordo_mpi_stall_report(ordo_mpi_t *mpi, ordo_deadline_t deadline, char *out_text,
                                    size_t capacity, size_t *out_len, int *out_cycles) {
    if (out_len) {
        *out_len = 0;
    }
    if (out_cycles) {
        *out_cycles = 0;
    }
    if (out_text && capacity) {
        out_text[0] = '\0';
    }
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    if (!out_len || (capacity && !out_text)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_len ? "out_text" : "out_len");
    }
    if (deadline == ORDO_DEADLINE_NEVER) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "the deadline must be finite: a rank may never answer");
    }
    if (atomic_load_explicit(&mpi->finalized, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__,
                           "MPI was finalized: no rank can be asked any more");
    }
    size_t n = (size_t)mpi->size;
    gathered_t g = {ordo__alloc(n * sizeof *g.lists, 0), ordo__alloc(n * sizeof *g.expected, 0)};
    bool ok = g.lists && g.expected;
    for (size_t rank = 0; ok && rank < n; ++rank) {
        g.expected[rank] = UINT32_MAX;
        g.lists[rank].records = ordo__alloc(STALL_RECORDS_MAX * sizeof(stall_record_t), 0);
        g.lists[rank].capacity = STALL_RECORDS_MAX;
        ok = g.lists[rank].records != NULL;
    }
    ordo_status_t st = ORDO_OK;
    if (!ok) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__,
                         "cannot allocate the records of %d ranks", mpi->size);
    } else {
        pthread_mutex_lock(&mpi->stall_lock); /* one asker at a time: the answers' tag is one */
        uint64_t serial = ++mpi->stall_serial;
        control_msg_t query = {.kind = MSG_STALL_QUERY, .value = serial};
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (rank != mpi->rank && !ordo__mpi_rank_dead(mpi, rank)) {
                ordo__mpi_control_send(mpi, rank, &query);
            }
        }
        local_records(mpi, &g.lists[mpi->rank]);
        g.expected[mpi->rank] = (uint32_t)g.lists[mpi->rank].count;
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (ordo__mpi_rank_dead(mpi, rank)) {
                g.expected[rank] = 0;
            }
        }
        gather(mpi, &g, serial, deadline);
        pthread_mutex_unlock(&mpi->stall_lock);

        text_out_t out = {out_text, capacity, 0};
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (ordo__mpi_rank_dead(mpi, rank)) {
                ordo__text_append(out.text, out.capacity, &out.len,
                                  "rank %d: found dead (ordo_mpi_set_peer_timeout)\n", rank);
            } else if (!answered(&g, rank)) {
                ordo__text_append(out.text, out.capacity, &out.len,
                                  "rank %d: no answer before the deadline\n", rank);
            }
            for (size_t i = 0; i < g.lists[rank].count; ++i) {
                say_record(&out, rank, &g.lists[rank].records[i]);
            }
        }
        int cycles = say_cycles(&out, &g, mpi->size);
        *out_len = out.len;
        if (out_cycles) {
            *out_cycles = cycles;
        }
        if (capacity && out.len >= capacity) {
            st = ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                             "the report needs %zu bytes, %zu given (cut to fit)", out.len + 1,
                             capacity);
        }
    }
    for (size_t rank = 0; g.lists && rank < n; ++rank) {
        if (g.lists[rank].records) {
            ordo__dealloc(g.lists[rank].records, STALL_RECORDS_MAX * sizeof(stall_record_t), 0);
        }
    }
    if (g.lists) {
        ordo__dealloc(g.lists, n * sizeof *g.lists, 0);
    }
    if (g.expected) {
        ordo__dealloc(g.expected, n * sizeof *g.expected, 0);
    }
    return st;
}
