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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

    for (mpi_published_t *p = published; p; p = p->next) {
        uint64_t at = 0;
        if (ordo_signal_query(p->signal, &at) != ORDO_OK) {
            continue; /* ended: nothing holds it */
        }
        ordo_stall_holder_t holder;
        if (ordo_stall_holder(device, p->signal, at + 1, &holder) != ORDO_OK ||
            holder.hold == ORDO_STALL_HOLD_RAISED) {
            continue;
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
        msg.total = (uint32_t)list.count;
        size_t n = list.count - sent;
        msg.count = (uint32_t)(n < STALL_RECORDS_PER_MESSAGE ? n : STALL_RECORDS_PER_MESSAGE);
        if (msg.count) {
            memcpy(msg.records, &list.records[sent], msg.count * sizeof *msg.records);
        }
        sent += msg.count;
        int length = (int)(offsetof(stall_message_t, records) + msg.count * sizeof *msg.records);
        if (MPI_Send(&msg, length, MPI_BYTE, asker, STALL_TAG, mpi->control) != MPI_SUCCESS) {
            break;
        }
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

/* Takes the answers of the other ranks until all came or the deadline. */
static void gather(ordo_mpi_t *mpi, gathered_t *g, uint64_t serial, ordo_deadline_t deadline) {
    for (;;) {
        bool all = true;
        for (int rank = 0; rank < mpi->size && all; ++rank) {
            all = answered(g, rank);
        }
        if (all || ordo_time_now_ns() >= deadline) {
            return;
        }
        int flag = 0;
        MPI_Message message;
        MPI_Status status;
        if (MPI_Improbe(MPI_ANY_SOURCE, STALL_TAG, mpi->control, &flag, &message, &status) !=
                MPI_SUCCESS ||
            !flag) {
            continue;
        }
        stall_message_t msg;
        memset(&msg, 0, sizeof msg);
        if (MPI_Mrecv(&msg, (int)sizeof msg, MPI_BYTE, &message, &status) != MPI_SUCCESS) {
            continue;
        }
        int source = status.MPI_SOURCE;
        if (msg.serial != serial || source < 0 || source >= mpi->size ||
            msg.count > STALL_RECORDS_PER_MESSAGE || msg.total > STALL_RECORDS_MAX) {
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

static void say(text_out_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(text_out_t *out, const char *fmt, ...) {
    char line[512];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    if (n < 0) {
        return;
    }
    size_t length = strlen(line);
    if (out->capacity > out->len + 1) {
        size_t room = out->capacity - out->len - 1;
        memcpy(out->text + out->len, line, length < room ? length : room);
        out->text[out->len + (length < room ? length : room)] = '\0';
    }
    out->len += length;
}

/* The HELD record of rank's publication id, or NULL. */
static const stall_record_t *held_of(const gathered_t *g, int rank, uint32_t id) {
    const record_list_t *list = &g->lists[rank];
    for (size_t i = 0; i < list->count; ++i) {
        if (list->records[i].kind == RECORD_HELD && list->records[i].id == id) {
            return &list->records[i];
        }
    }
    return NULL;
}

static void say_record(text_out_t *out, int rank, const stall_record_t *r) {
    switch (r->kind) {
    case RECORD_WAIT_STREAM:
        say(out,
            "rank %d: stream %s waits for rank %d's signal %u to reach %" PRIu64 " (now %" PRIu64
            ")\n",
            rank, r->stream, r->owner, r->waited_id, r->value, r->now);
        break;
    case RECORD_WAIT_THREAD:
        say(out,
            "rank %d: a thread waits for rank %d's signal %u to reach %" PRIu64 " (now %" PRIu64
            ")\n",
            rank, r->owner, r->waited_id, r->value, r->now);
        break;
    case RECORD_HELD:
        if (r->owner >= 0) {
            say(out,
                "rank %d: signal %u (at %" PRIu64 ") is held by stream %s, which waits for "
                "rank %d's signal %u to reach %" PRIu64 " (now %" PRIu64 ")\n",
                rank, r->id, r->at, r->stream, r->owner, r->waited_id, r->value, r->now);
        } else {
            say(out,
                "rank %d: signal %u (at %" PRIu64 ") is held by stream %s, which waits for "
                "%s here to reach %" PRIu64 " (now %" PRIu64 ")\n",
                rank, r->id, r->at, r->stream, r->signal, r->value, r->now);
        }
        break;
    case RECORD_UNRAISED:
        say(out,
            "rank %d: signal %u (at %" PRIu64 "): no enqueued work raises it; only its host "
            "or a link can\n",
            rank, r->id, r->at);
        break;
    default:
        say(out, "rank %d: signal %u (at %" PRIu64 "): a queue too long to see whole\n", rank,
            r->id, r->at);
        break;
    }
}

/* Names each cycle of HELD edges once (from its smallest rank and id). */
static int say_cycles(text_out_t *out, const gathered_t *g, int size) {
    int cycles = 0;
    for (int rank = 0; rank < size; ++rank) {
        const record_list_t *list = &g->lists[rank];
        for (size_t i = 0; i < list->count; ++i) {
            const stall_record_t *start = &list->records[i];
            if (start->kind != RECORD_HELD || start->owner < 0) {
                continue;
            }
            /* Walk at most one step a publication: a cycle returns here. */
            int r = rank;
            const stall_record_t *at = start;
            bool smallest = true, closed = false;
            for (size_t steps = 0; steps < (size_t)size * STALL_RECORDS_MAX && at; ++steps) {
                int next = at->owner;
                if (next < 0 || next >= size) {
                    break;
                }
                uint32_t id = at->waited_id;
                if (next == rank && id == start->id) {
                    closed = true;
                    break;
                }
                if (next < rank || (next == rank && id < start->id)) {
                    smallest = false;
                }
                r = next;
                at = held_of(g, r, id);
            }
            if (!closed || !smallest) {
                continue;
            }
            ++cycles;
            say(out, "cycle: rank %d signal %u", rank, start->id);
            at = start;
            for (;;) {
                say(out, " -> rank %d signal %u", at->owner, at->waited_id);
                if (at->owner == rank && at->waited_id == start->id) {
                    break;
                }
                at = held_of(g, at->owner, at->waited_id);
            }
            say(out, " (a deadlock across ranks: each is held by a stream waiting for the next)\n");
        }
    }
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
                say(&out, "rank %d: found dead (ordo_mpi_set_peer_timeout)\n", rank);
            } else if (!answered(&g, rank)) {
                say(&out, "rank %d: no answer before the deadline\n", rank);
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
