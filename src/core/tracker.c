/* Trackers: per-stream frontiers, hazard analysis, minimal device waits. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/trace.h"
#include "core/frontier.h"
#include "core/graph_internal.h"
#include "core/timeline_op.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

/* Single-writer counters: the tracker is externally synchronised, so a
 * relaxed load and store suffice (readers on other threads see a value the
 * counter really had). */
static inline void counter_add(_Atomic uint64_t *counter, uint64_t n) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

ordo_status_t ordo__tracker_check(const ordo_tracker_t *tracker, const char *api) {
    if (!tracker || tracker->magic != ORDO_TRACKER_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live tracker",
                           (const void *)tracker);
    }
    return ORDO_OK;
}

ordo_status_t ordo_tracker_create(ordo_device_t *device, ordo_tracker_t **out_tracker) {
    if (out_tracker) {
        *out_tracker = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_tracker) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_tracker is NULL");
    }
    ordo_tracker_t *tracker = ordo__alloc(sizeof *tracker, 64);
    if (!tracker) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a tracker");
    }
    ordo_status_t st = ordo__reclaimer_start(&tracker->reclaimer);
    if (st != ORDO_OK) {
        ordo__dealloc(tracker, sizeof *tracker, 64);
        return ordo__error(st, __func__, "cannot start the reclaimer thread");
    }
    tracker->magic = ORDO_TRACKER_MAGIC;
    tracker->device = device;
    ordo__rlock_init(&tracker->lock);
    ordo_device_retain(device);
    *out_tracker = tracker;
    return ORDO_OK;
}

ordo_status_t ordo_tracker_destroy(ordo_tracker_t *tracker) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(tracker, __func__,
                                                "a tracker cannot be destroyed while it records"));
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_teardown_check(tracker, 0, __func__));
    return ordo__tracker_teardown(tracker, __func__);
}

ordo_status_t ordo__tracker_stream_attach(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                          uint32_t *out_index, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, api));
    if (stream->device != tracker->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "stream of %s used with a tracker of %s",
                           stream->device->info.name, tracker->device->info.name);
    }
    /* A stream the tracker owns has its place kept; any other may not
     * take the place of one it owns and has not ordered yet. */
    const int owned = stream->owner == tracker && stream->owner_kind == HAL_STREAM_OWNER_TRACKER;
    if (!owned && tracker->stream_count + tracker->owned_unordered == ORDO_TRACKER_MAX_STREAMS) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                           "a tracker orders at most %u streams: it orders %u and keeps a "
                           "place for the %u it owns and has not ordered yet",
                           ORDO_TRACKER_MAX_STREAMS, tracker->stream_count,
                           tracker->owned_unordered);
    }
    tracker_stream_t *ts = ordo__alloc(sizeof *ts, 64);
    if (!ts) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate stream state");
    }
    ordo_status_t st = ordo_signal_create(0, &ts->timeline);
    if (st != ORDO_OK) {
        ordo__dealloc(ts, sizeof *ts, 64);
        return ordo__error_as(st, api);
    }
    ordo__timeline_name_after(ts->timeline, "tracker", stream);
    ts->stream = stream;
    ordo__hal_stream_use(stream, HAL_STREAM_TRACKER); /* its destroy is refused until ours */
    if (stream->device->backend->stream_progress) {
        /* Both live as long as the stream, so as long as the tracker. */
        stream->device->backend->stream_progress(stream, &ts->progress, &ts->ops_submitted);
    }
    tracker->streams[tracker->stream_count] = ts;
    uint32_t slot = tracker_lookup_slot(stream);
    while (tracker->lookup_stream[slot]) { /* a free slot: there are twice as many as streams */
        slot = (slot + 1) & (TRACKER_LOOKUP - 1);
    }
    tracker->lookup_stream[slot] = stream;
    tracker->lookup_index[slot] = (uint8_t)tracker->stream_count;
    *out_index = tracker->stream_count++;
    tracker->owned_unordered -= owned ? 1u : 0u;
    return ORDO_OK;
}

/* Why access i is refused as a handle or an argument, or ORDO_OK (a
 * buffer held by a prepare counts as live here). */
static ordo_status_t access_fault(const ordo_tracker_t *tracker, const ordo_access_t *access,
                                  size_t i, const char *api) {
    const ordo_buffer_t *b = access->buffer;
    if (!b) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "access %zu: buffer is NULL", i);
    }
    if (b->magic == ORDO_BUFFER_RELEASED) {
        return ordo__error(ORDO_ERR_DESTROYED, api, "access %zu: buffer %p was released", i,
                           (const void *)b);
    }
    if (b->magic != ORDO_BUFFER_MAGIC && b->magic != ORDO_BUFFER_PREPARED) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "access %zu: %p is not a live buffer", i,
                           (const void *)b);
    }
    if (b->tracker != tracker) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "access %zu: buffer %p belongs to another tracker", i, (const void *)b);
    }
    if ((unsigned)access->mode - 1u > 2u) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "access %zu: mode %d is not a mode", i,
                           (int)access->mode);
    }
    return ORDO_OK;
}

/* Explains why a list of accesses is refused (the slow path of the
 * checks): a fault of a handle or an argument in any access answers
 * before a buffer held by a prepare (docs/ERRORS.md: the state of the
 * objects comes last). */
static ordo_status_t accesses_refused(const ordo_tracker_t *tracker, const ordo_access_t *accesses,
                                      size_t count, const char *api) {
    for (size_t i = 0; i < count; ++i) {
        ORDO_RETURN_IF_ERROR(access_fault(tracker, &accesses[i], i, api));
    }
    for (size_t i = 0; i < count; ++i) {
        if (accesses[i].buffer->magic == ORDO_BUFFER_PREPARED) {
            return ordo__buffer_refuse_prepared(accesses[i].buffer, api);
        }
    }
    return ordo__error(ORDO_ERR_INTERNAL, api, "accesses refused for no reason found");
}

/* Checks each access (the list and its count were checked by enter). */
static inline __attribute__((always_inline)) ordo_status_t
check_accesses(const ordo_tracker_t *tracker, const ordo_access_t *accesses, size_t count,
               const char *api) {
    for (size_t i = 0; i < count; ++i) {
        const ordo_buffer_t *b = accesses[i].buffer;
        /* One test for the common case; the reason only on refusal. */
        if (ORDO_UNLIKELY(!b || b->magic != ORDO_BUFFER_MAGIC || b->tracker != tracker ||
                          (unsigned)accesses[i].mode - 1u > 2u)) {
            return accesses_refused(tracker, accesses, count, api);
        }
    }
    return ORDO_OK;
}

/* check_accesses for a finish: buffers held by a prepare are good too. */
static ordo_status_t check_accesses_held(const ordo_tracker_t *tracker,
                                         const ordo_access_t *accesses, size_t count,
                                         const char *api) {
    for (size_t i = 0; i < count; ++i) {
        ORDO_RETURN_IF_ERROR(access_fault(tracker, &accesses[i], i, api));
    }
    return ORDO_OK;
}

/* Enqueues a record (wait == 0) or a wait on owner's timeline on stream
 * (core/timeline_op.h), or, on a recording's shadow tracker, captures it
 * into the recording (core/graph_internal.h). */
static ordo_status_t timeline_enqueue(ordo_stream_t *stream, tracker_stream_t *owner,
                                      uint64_t point, int wait) {
    if (ORDO_UNLIKELY(owner->capture)) {
        ordo__graph_capture_point(owner->capture, stream, owner, point, wait);
        return ORDO_OK;
    }
    return timeline_op(stream, owner->timeline, &owner->spare_refs, point, wait);
}

/* The smallest remembered record at or after point (ts->recorded >= point:
 * the latest record is always kept, so there is one). */
static const tracker_record_t *record_find(const tracker_stream_t *ts, uint64_t point) {
    const tracker_record_t *best = NULL;
    for (unsigned i = 0; i < TRACKER_RECORDS; ++i) {
        const tracker_record_t *r = &ts->records[i];
        if (r->point >= point && (!best || r->point < best->point)) {
            best = r;
        }
    }
    return best;
}

ordo_status_t ordo__tracker_record_covering(ordo_tracker_t *tracker, uint32_t stream,
                                            uint64_t point, const tracker_record_t **out_record) {
    tracker_stream_t *ts = tracker->streams[stream];
    if (ts->recorded < point) {
        /* Record the stream's current point: it covers `point` and carries
         * what the stream had waited for by then. */
        uint64_t now = ts->point;
        ordo_status_t st = timeline_enqueue(ts->stream, ts, now, 0);
        if (st != ORDO_OK) {
            if (!ordo__signal_view(ts->timeline).ended) {
                return st; /* not enqueued, timeline healthy: nothing recorded */
            }
            /* The stream has failed and so has the timeline: waiters fail
             * rather than hang, which is all a record must give them. */
        }
        tracker_record_t *record = &ts->records[ts->next_record];
        ts->next_record = (ts->next_record + 1) % TRACKER_RECORDS;
        record->point = now;
        memcpy(record->frontier, ts->frontier, sizeof record->frontier);
        ts->recorded = now;
        counter_add(&tracker->points_recorded, 1);
        *out_record = record;
        return ORDO_OK;
    }
    *out_record = record_find(ts, point);
    return ORDO_OK;
}

/* The orderings a submission needs that its stream does not know yet: per
 * origin stream, the highest point of it that must come first. */
typedef struct needs {
    uint64_t mask;                            /* origin streams with such a need */
    uint64_t point[ORDO_TRACKER_MAX_STREAMS]; /* set where mask has the bit */
} needs_t;

static inline void need(needs_t *n, uint32_t origin, uint64_t point) {
    uint64_t bit = (uint64_t)1 << origin;
    if (!(n->mask & bit)) {
        n->mask |= bit;
        n->point[origin] = point;
    } else if (n->point[origin] < point) {
        n->point[origin] = point;
    }
}

/* What a wait for origin's point `point` would order: the record that
 * ordo__tracker_record_covering would give (the one remembered, or the stream's
 * current point with its frontier, which a new record would take), without
 * recording anything. */
static void record_peek(const tracker_stream_t *ts, uint64_t point, uint64_t *out_point,
                        const uint64_t **out_frontier) {
    if (ts->recorded < point) {
        *out_point = ts->point;
        *out_frontier = ts->frontier;
        return;
    }
    const tracker_record_t *record = record_find(ts, point);
    *out_point = record->point;
    *out_frontier = record->frontier;
}

/* A submission that needs several origin streams may need fewer waits than
 * origins: a wait orders everything its record knows, and that can cover
 * another origin's need (a write on A, a read of it on B, then a write on
 * C: C's wait for B's read covers its need of A, because B waited for A
 * first). Keeps a set of waits none of which the others cover, together
 * covering every need.
 *
 * Each candidate wait's cover is the set of needs it orders: its own, and
 * every origin whose needed point its record's frontier has reached.
 * Frontiers are exact (a stream knows a point exactly when a chain of
 * waits orders it), so a need outside every kept cover is really not
 * ordered, and one inside is. Candidates are tried for removal from the
 * narrowest cover up, so the wide ones stay; one is removed when the
 * others still cover every need. What remains is irredundant: removing
 * any one wait leaves some need unordered.
 *
 * A kept wait is emitted for its record's point, written to through[y],
 * not for its need: another kept wait may cover its need and yet not the
 * needs it was kept for (x knows y's need but not the later record of y
 * that knows z). Waiting through the record keeps each cover as computed;
 * none is then elided, since a kept wait whose record another one knew
 * would cover nothing beyond that one and would have been removed.
 * Returns the number of waits removed. */
__attribute__((noinline)) static uint64_t drop_covered_waits(const ordo_tracker_t *tracker,
                                                             needs_t *needs, uint64_t *through) {
    uint32_t origins[ORDO_TRACKER_MAX_STREAMS];
    uint64_t covers[ORDO_TRACKER_MAX_STREAMS];
    uint32_t n = 0;
    for (uint64_t mask = needs->mask; mask; mask &= mask - 1) {
        uint32_t y = (uint32_t)__builtin_ctzll(mask);
        uint64_t record_point;
        const uint64_t *frontier;
        record_peek(tracker->streams[y], needs->point[y], &record_point, &frontier);
        through[y] = record_point; /* >= needs->point[y]: it covers its own need */
        uint64_t cover = (uint64_t)1 << y;
        for (uint64_t rest = needs->mask & ~cover; rest; rest &= rest - 1) {
            uint32_t z = (uint32_t)__builtin_ctzll(rest);
            if (frontier[z] >= needs->point[z]) {
                cover |= (uint64_t)1 << z;
            }
        }
        /* Insertion by cover size: narrowest first. */
        uint32_t at = n++;
        while (at > 0 && __builtin_popcountll(covers[at - 1]) > __builtin_popcountll(cover)) {
            origins[at] = origins[at - 1];
            covers[at] = covers[at - 1];
            --at;
        }
        origins[at] = y;
        covers[at] = cover;
    }
    const uint64_t all = needs->mask;
    uint64_t kept = ((uint64_t)1 << n) - 1; /* n < 64: stream t is never an origin */
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < n; ++i) {
        uint64_t others = 0;
        for (uint64_t rest = kept & ~((uint64_t)1 << i); rest; rest &= rest - 1) {
            others |= covers[__builtin_ctzll(rest)];
        }
        if ((others & all) == all) {
            kept &= ~((uint64_t)1 << i);
            needs->mask &= ~((uint64_t)1 << origins[i]);
            ++dropped;
        }
    }
    return dropped;
}

/* ordo__tracker_wait_for, ordering stream t after origin's point `through`, which
 * is `point` or a later point whose record the caller counts on (see
 * drop_covered_waits); the observer is told of `point`, the need. */
static ordo_status_t wait_through(ordo_tracker_t *tracker, uint32_t t, uint32_t origin,
                                  uint64_t point, uint64_t through) {
    if (frontier_knows(tracker, t, origin, through)) {
        counter_add(&tracker->waits_elided, 1); /* known, directly or transitively */
        return ORDO_OK;
    }
    const tracker_record_t *record = NULL;
    ORDO_RETURN_IF_ERROR(ordo__tracker_record_covering(tracker, origin, through, &record));
    ordo_stream_t *stream = frontier_stream(tracker, t);
    ORDO_RETURN_IF_ERROR(timeline_enqueue(stream, tracker->streams[origin], record->point, 1));
    frontier_learn(tracker, t, origin, record);
    counter_add(&tracker->waits_emitted, 1);
    if (trace_on() && !tracker->streams[origin]->capture) { /* captured: not enqueued */
        timeline_trace_wait(stream, frontier_timeline(tracker, origin), record->point);
    }
    if (tracker->observer) {
        tracker->observer(tracker->observer_ctx, stream, frontier_stream(tracker, origin),
                          record->point, point);
    }
    return ORDO_OK;
}

ordo_status_t ordo__tracker_wait_for(ordo_tracker_t *tracker, uint32_t t, uint32_t origin,
                                     uint64_t point) {
    return wait_through(tracker, t, origin, point, point);
}

int ordo__tracker_point_ran(const ordo_tracker_t *tracker, uint32_t t, uint64_t point) {
    const tracker_stream_t *ts = tracker->streams[t];
    if (!ts->progress) {
        return 0;
    }
    /* Points and op counts grow together, so the first finish at or after
     * the point has an op count at least the point's own. */
    const tracker_finish_t *best = NULL;
    for (unsigned i = 0; i < TRACKER_FINISHES; ++i) {
        const tracker_finish_t *f = &ts->finishes[i];
        if (f->point >= point && (!best || f->point < best->point)) {
            best = f;
        }
    }
    if (!best) {
        return 0; /* a point handed out after the last finish (a pool's) */
    }
    /* Acquire: the work's effects happen before the caller reclaims. */
    return ordo__signal_reached(ts->progress) >= best->ops;
}

ordo_status_t ordo__buffer_reserve_points(ordo_buffer_t *b, const char *api) {
    if (!b->more_last_points) {
        b->more_last_points =
            ordo__alloc(ORDO_TRACKER_MAX_STREAMS * sizeof *b->more_last_points, 0);
        if (!b->more_last_points) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                               "cannot grow a buffer's per-stream points");
        }
    }
    return ORDO_OK;
}

/* Allocates what recording accesses on stream t will need, so that the
 * recording itself cannot fail after the work was enqueued. */
__attribute__((noinline)) static ordo_status_t
reserve_beyond_inline(uint32_t t, const ordo_access_t *accesses, size_t count, const char *api) {
    (void)t;
    for (size_t i = 0; i < count; ++i) {
        ORDO_RETURN_IF_ERROR(ordo__buffer_reserve_points(accesses[i].buffer, api));
    }
    return ORDO_OK;
}

/* Streams below BUFFER_INLINE_READERS need nothing (the common case, kept
 * inline: the submission path is a few dozen instructions, and a call's
 * register saves were a noticeable share of it). */
static inline __attribute__((always_inline)) ordo_status_t
reserve_locked(uint32_t t, const ordo_access_t *accesses, size_t count, const char *api) {
    return t < BUFFER_INLINE_READERS ? ORDO_OK : reserve_beyond_inline(t, accesses, count, api);
}

/* Hands out stream t's next point for a submission whose ops this thread
 * has enqueued, and notes the stream's op count beside it. */
static inline __attribute__((always_inline)) uint64_t point_finished(ordo_tracker_t *tracker,
                                                                     uint32_t t) {
    tracker_stream_t *ts = tracker->streams[t];
    uint64_t point = ++ts->point;
    if (ORDO_LIKELY(ts->ops_submitted)) {
        /* The submission's ops were enqueued by this thread (its launch
         * function, or before ordo_tracker_finish), so the count read here is at
         * least the last of them: once the progress reaches it, they ran. */
        tracker_finish_t *finish = &ts->finishes[ts->next_finish];
        ts->next_finish = (ts->next_finish + 1) & (TRACKER_FINISHES - 1);
        finish->point = point;
        finish->ops = atomic_load_explicit(ts->ops_submitted, memory_order_relaxed);
    }
    counter_add(&tracker->submissions, 1);
    return point;
}

/* Records the accesses as stream t's next point; cannot fail once
 * reserve_locked has succeeded for them. With let_go (a constant at each
 * call), each buffer is let go by the prepare that held it, in the same
 * pass. */
static inline __attribute__((always_inline)) void finish_recording(ordo_tracker_t *tracker,
                                                                   uint32_t t,
                                                                   const ordo_access_t *accesses,
                                                                   size_t count, int let_go) {
    uint64_t point = point_finished(tracker, t);
    uint64_t bit = (uint64_t)1 << t;
    for (size_t i = 0; i < count; ++i) {
        ordo_buffer_t *b = accesses[i].buffer;
        if (let_go) {
            b->magic = ORDO_BUFFER_MAGIC;
        }
        buffer_set_last_point(b, t, point);
        b->use_mask |= bit;
        if (accesses[i].mode & ORDO_ACCESS_WRITE) {
            b->writer = (buffer_use_t){t, point};
            b->reader_mask = 0;
        } else {
            b->reader_mask |= bit;
        }
    }
}

static inline __attribute__((always_inline)) void
finish_locked(ordo_tracker_t *tracker, uint32_t t, const ordo_access_t *accesses, size_t count) {
    finish_recording(tracker, t, accesses, count, 0);
}

uint64_t ordo__tracker_point_finished(ordo_tracker_t *tracker, uint32_t t) {
    return point_finished(tracker, t);
}

/* The checks every submission entry point makes before its accesses are
 * read: the tracker, the list itself, and the stream (attached on first
 * use). A stream already attached is found without a check; one seen for
 * the first time is attached only once its accesses are known good.
 * *out_index is written on every path (the slow ones write 0 first): gcc
 * -O1 cannot follow the index through the status and the attach, and
 * warned that the callers' index may be used uninitialised. */
static inline __attribute__((always_inline)) ordo_status_t
enter(ordo_tracker_t *tracker, ordo_stream_t *stream, const ordo_access_t *accesses, size_t count,
      uint32_t *out_index, int finishing, int launch_ok, const char *api) {
    ordo_status_t st = ordo__tracker_check(tracker, api);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        *out_index = 0;
        return st;
    }
    if (ORDO_UNLIKELY(!launch_ok && (st = tracker_not_launching(tracker, api)) != ORDO_OK)) {
        *out_index = 0;
        return st;
    }
    if (ORDO_UNLIKELY((count && !accesses) || count > ORDO_TRACKER_MAX_ACCESSES)) {
        /* A bad handle answers first (docs/ERRORS.md). */
        if (!tracker_stream_find(tracker, stream, out_index) &&
            (st = ordo__hal_stream_check(stream, api)) != ORDO_OK) {
            *out_index = 0;
            return st;
        }
        *out_index = 0;
        return count > ORDO_TRACKER_MAX_ACCESSES
                   ? ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%zu accesses; at most %u", count,
                                 ORDO_TRACKER_MAX_ACCESSES)
                   : ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                                 "accesses is NULL but count is %zu", count);
    }
    if (ORDO_LIKELY(tracker_stream_find(tracker, stream, out_index))) {
        return ORDO_OK;
    }
    *out_index = 0;
    st = ordo__hal_stream_check(stream, api); /* a bad handle answers first */
    if (st == ORDO_OK) {
        st = finishing ? check_accesses_held(tracker, accesses, count, api)
                       : check_accesses(tracker, accesses, count, api);
    }
    if (st == ORDO_OK) {
        st = ordo__tracker_stream_attach(tracker, stream, out_index, api);
    }
    return st;
}

/* Notes the reads of b on the streams in `others` as needs (a write comes
 * after them); gives those streams. Out of line: writes are the rarer
 * accesses, and inlined this loop took the registers of the pass. */
__attribute__((noinline)) static uint64_t need_reads(needs_t *needs, const ordo_buffer_t *b,
                                                     uint64_t others, const uint64_t *frontier) {
    uint64_t readers = b->reader_mask & others;
    for (uint64_t rest = readers; rest; rest &= rest - 1) {
        uint32_t r = (uint32_t)__builtin_ctzll(rest);
        uint64_t read = buffer_last_point(b, r);
        if (read > frontier[r]) {
            need(needs, r, read);
        }
    }
    return readers;
}

/* Checks the accesses of a submission on stream t and emits the waits they
 * need: one pass over the accesses reads each buffer once, checking it and
 * collecting the orderings, and nothing is emitted unless all are good.
 *
 * Most orderings a submission needs are known to its stream already
 * (directly or transitively: its frontier covers them). They are told
 * apart in the pass, against the frontier, so the pass branches only on
 * the rare unknown one; the known ones are only noted in a mask, for the
 * elided count. What ordo__tracker_wait_for does per origin stream is unchanged:
 * an origin whose highest needed point is known is elided, any other gets
 * one wait for that point. */
static inline __attribute__((always_inline)) ordo_status_t
prepare_locked(ordo_tracker_t *tracker, uint32_t t, const ordo_access_t *accesses, size_t count,
               const char *api) {
    const uint64_t *frontier = frontier_of(tracker, t);
    const uint64_t others = ~((uint64_t)1 << t);
    needs_t needs;
    needs.mask = 0;
    uint64_t seen = 0; /* origin streams with any need, known or not */
    for (size_t i = 0; i < count; ++i) {
        const ordo_buffer_t *b = accesses[i].buffer;
        const unsigned mode = (unsigned)accesses[i].mode;
        /* One test for the common case; the reason only on refusal. */
        if (ORDO_UNLIKELY(!b || b->magic != ORDO_BUFFER_MAGIC || b->tracker != tracker ||
                          mode - 1u > 2u)) {
            return accesses_refused(tracker, accesses, count, api);
        }
        /* After a write: every access waits for it (RAW, WAW); a buffer
         * never written has writer point 0, which needs nothing. */
        const uint32_t w = b->writer.stream;
        const uint64_t point = b->writer.point;
        seen |= (uint64_t)(point != 0) << w;
        if (ORDO_UNLIKELY(point > frontier[w]) && w != t) {
            need(&needs, w, point);
        }
        /* A write also waits for the reads since (WAR). */
        if (mode & ORDO_ACCESS_WRITE) {
            seen |= need_reads(&needs, b, others, frontier);
        }
    }
    ordo_status_t st = reserve_locked(t, accesses, count, api);
    if (st != ORDO_OK) {
        return st;
    }
    /* Stream t's own points need nothing: it runs in order. */
    uint64_t known = seen & others & ~needs.mask;
    if (known) {
        uint64_t n = 0; /* usually a bit or two (no popcnt instruction assumed) */
        for (; known; known &= known - 1) {
            ++n;
        }
        counter_add(&tracker->waits_elided, n);
    }
    if (ORDO_LIKELY(!(needs.mask & (needs.mask - 1)))) {
        if (needs.mask) { /* one origin: one wait */
            uint32_t origin = (uint32_t)__builtin_ctzll(needs.mask);
            st = ordo__tracker_wait_for(tracker, t, origin, needs.point[origin]);
            return ORDO_LIKELY(st == ORDO_OK) ? st : ordo__error_as(st, api);
        }
        return ORDO_OK;
    }
    /* Several origins: only the waits no other one covers. */
    uint64_t through[ORDO_TRACKER_MAX_STREAMS];
    counter_add(&tracker->waits_elided, drop_covered_waits(tracker, &needs, through));
    for (uint64_t mask = needs.mask; mask; mask &= mask - 1) {
        uint32_t origin = (uint32_t)__builtin_ctzll(mask);
        st = wait_through(tracker, t, origin, needs.point[origin], through[origin]);
        if (st != ORDO_OK) {
            return ordo__error_as(st, api); /* this stream has failed: so will the submission */
        }
    }
    return ORDO_OK;
}

/* The split form cannot be recorded: the work between prepare and finish
 * is enqueued by the caller, where the recording does not see it. */
static const char split_form_refused[] =
    "the split form cannot be recorded (the work between ordo_tracker_prepare and "
    "ordo_tracker_finish is enqueued where the recording does not see it): submit it with "
    "ordo_tracker_submit";

ordo_status_t ordo__tracker_refuse_in_launch(const ordo_tracker_t *tracker, const char *api) {
    if (!tracker_launching_here(tracker)) {
        return ORDO_OK;
    }
    if (tracker->replaying) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "called inside a launch function of ordo_graph_replay on its tracker: "
                           "the replay orders its own work; submit, rebind or destroy before or "
                           "after it");
    }
    return ordo__error(ORDO_ERR_BUSY, api,
                       "called inside a launch function of ordo_tracker_submit on its tracker: "
                       "the submission's waits were emitted before the launch and its accesses "
                       "are recorded after it; submit, replay or tear down after "
                       "ordo_tracker_submit returns");
}

int ordo__tracker_launch_names(const ordo_tracker_t *tracker, const ordo_buffer_t *b) {
    if (!tracker_launching_here(tracker)) {
        return 0;
    }
    for (size_t i = 0; i < tracker->launch_access_count; ++i) {
        if (tracker->launch_accesses[i].buffer == b) {
            return 1;
        }
    }
    return 0;
}

ordo_status_t ordo__buffer_refuse_prepared(const ordo_buffer_t *b, const char *api) {
    return ordo__error(ORDO_ERR_BUSY, api,
                       "buffer %p is named by an ordo_tracker_prepare (or ordo_mem_prepare_use) "
                       "on stream %p whose finish has not come: until then only that finish "
                       "may name it",
                       (const void *)b, (void *)b->tracker->streams[b->prepared_on]->stream);
}

static inline __attribute__((always_inline)) ordo_status_t
split_prepare(ordo_tracker_t *tracker, ordo_stream_t *stream, const ordo_access_t *accesses,
              size_t count, int launch_ok, const char *api) {
    uint32_t t;
    ordo_status_t st = enter(tracker, stream, accesses, count, &t, 0, launch_ok, api);
    if (ORDO_UNLIKELY(st == ORDO_OK && tracker_recording(tracker))) {
        st = ordo__graph_refuse(tracker, api, split_form_refused);
    }
    if (st == ORDO_OK) {
        /* Refuses a buffer prepared already: its finish is still to come. */
        st = prepare_locked(tracker, t, accesses, count, api);
    }
    if (st != ORDO_OK) {
        return st;
    }
    /* Held for the finish (a buffer named twice keeps both modes). */
    for (size_t i = 0; i < count; ++i) {
        ordo_buffer_t *b = accesses[i].buffer;
        const uint8_t mode = (uint8_t)accesses[i].mode;
        b->prepared_modes = b->magic == ORDO_BUFFER_PREPARED ? b->prepared_modes | mode : mode;
        b->prepared_on = (uint8_t)t;
        b->magic = ORDO_BUFFER_PREPARED;
    }
    return ORDO_OK;
}

ordo_status_t ordo_tracker_prepare(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                   const ordo_access_t *accesses, size_t count) {
    return split_prepare(tracker, stream, accesses, count, 0, __func__);
}

ordo_status_t ordo__tracker_prepare_at(ordo_tracker_t *tracker, uint32_t t,
                                       const ordo_access_t *accesses, size_t count,
                                       const char *api) {
    return prepare_locked(tracker, t, accesses, count, api);
}

void ordo__tracker_finish_at(ordo_tracker_t *tracker, uint32_t t, const ordo_access_t *accesses,
                             size_t count) {
    finish_locked(tracker, t, accesses, count);
}

ordo_status_t ordo__tracker_check_accesses(const ordo_tracker_t *tracker,
                                           const ordo_access_t *accesses, size_t count,
                                           const char *api) {
    return check_accesses(tracker, accesses, count, api);
}

/* Why the good access i cannot end a prepare on stream t, or ORDO_OK. */
static ordo_status_t unprepared(const ordo_tracker_t *tracker, uint32_t t,
                                const ordo_access_t *access, size_t i, const char *api) {
    const ordo_buffer_t *b = access->buffer;
    const unsigned mode = (unsigned)access->mode;
    if (b->magic != ORDO_BUFFER_PREPARED) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "access %zu: buffer %p was not prepared: ordo_tracker_finish ends an "
                           "ordo_tracker_prepare of the same accesses",
                           i, (const void *)b);
    }
    if (b->prepared_on != t) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "access %zu: buffer %p was prepared on stream %p, not on this one", i,
                           (const void *)b, (void *)tracker->streams[b->prepared_on]->stream);
    }
    if ((mode & ORDO_ACCESS_WRITE) && !(b->prepared_modes & ORDO_ACCESS_WRITE)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "access %zu: buffer %p is finished as a %s but was prepared as a "
                           "read (its prepare waited for no reads)",
                           i, (const void *)b, mode == ORDO_ACCESS_WRITE ? "write" : "read-write");
    }
    return ORDO_OK;
}
/* Why access i cannot end a prepare on stream t, or ORDO_OK: its buffer
 * must be held by a prepare on t that named at least its mode. Bad
 * accesses are refused first, as every submission refuses them. */
static ordo_status_t finish_refused(const ordo_tracker_t *tracker, uint32_t t,
                                    const ordo_access_t *accesses, size_t count, const char *api) {
    ORDO_RETURN_IF_ERROR(check_accesses_held(tracker, accesses, count, api));
    for (size_t i = 0; i < count; ++i) {
        ORDO_RETURN_IF_ERROR(unprepared(tracker, t, &accesses[i], i, api));
    }
    return ORDO_OK;
}

static inline __attribute__((always_inline)) ordo_status_t
split_finish(ordo_tracker_t *tracker, ordo_stream_t *stream, const ordo_access_t *accesses,
             size_t count, int launch_ok, const char *api) {
    uint32_t t;
    ordo_status_t st = enter(tracker, stream, accesses, count, &t, 1, launch_ok, api);
    if (ORDO_UNLIKELY(st == ORDO_OK && tracker_recording(tracker))) {
        st = ordo__graph_refuse(tracker, api, split_form_refused);
    }
    /* Every access is checked before any is recorded: one test each for
     * the common case, the reason only on refusal. */
    for (size_t i = 0; st == ORDO_OK && i < count; ++i) {
        const ordo_buffer_t *b = accesses[i].buffer;
        const unsigned mode = (unsigned)accesses[i].mode;
        if (ORDO_UNLIKELY(!b || b->magic != ORDO_BUFFER_PREPARED || b->tracker != tracker ||
                          mode - 1u > 2u || b->prepared_on != t ||
                          (mode & ~(unsigned)b->prepared_modes & ORDO_ACCESS_WRITE))) {
            st = finish_refused(tracker, t, accesses, count, api);
        }
    }
    if (st == ORDO_OK) {
        st = reserve_locked(t, accesses, count, api); /* done by prepare, normally */
    }
    if (st != ORDO_OK) {
        return st; /* the prepare stays open */
    }
    finish_recording(tracker, t, accesses, count, 1);
    return ORDO_OK;
}

ordo_status_t ordo_tracker_finish(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                  const ordo_access_t *accesses, size_t count) {
    return split_finish(tracker, stream, accesses, count, 0, __func__);
}

ordo_status_t ordo__tracker_block_use(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                      const ordo_access_t *access, int finish, const char *api) {
    return finish ? split_finish(tracker, stream, access, 1, 1, api)
                  : split_prepare(tracker, stream, access, 1, 1, api);
}

ordo_status_t ordo__tracker_submit_refusal(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                           const ordo_access_t *accesses, size_t count,
                                           const char *api) {
    ordo_status_t st = ordo__tracker_check(tracker, api);
    uint32_t t;
    if (st != ORDO_OK || tracker_stream_find(tracker, stream, &t)) {
        return st;
    }
    if ((st = ordo__hal_stream_check(stream, api)) != ORDO_OK) {
        return st;
    }
    if (count && !accesses) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "accesses is NULL but count is %zu",
                           count);
    }
    if (count > ORDO_TRACKER_MAX_ACCESSES) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%zu accesses; at most %u", count,
                           ORDO_TRACKER_MAX_ACCESSES);
    }
    return check_accesses(tracker, accesses, count, api);
}

ordo_status_t ordo__tracker_launch_failed(ordo_status_t st, int left_message, const char *api) {
    ordo_status_t status = ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED;
    if (left_message) {
        return ordo__error(status, api, "the launch function returned %s (%d): %s",
                           ordo_status_name(st), (int)st, ordo_error_message());
    }
    return ordo__error(status, api, "the launch function returned %s (%d)", ordo_status_name(st),
                       (int)st);
}

ordo_status_t ordo_tracker_submit(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                  const ordo_access_t *accesses, size_t count,
                                  ordo_launch_fn launch, void *ctx) {
    if (ORDO_UNLIKELY(!launch)) {
        ordo_status_t st = ordo__tracker_submit_refusal(tracker, stream, accesses, count, __func__);
        return st != ORDO_OK ? st
                             : ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "launch is NULL");
    }
    uint32_t t;
    ordo_status_t st = enter(tracker, stream, accesses, count, &t, 0, 0, __func__);
    if (ORDO_UNLIKELY(st == ORDO_OK && tracker_recording(tracker))) {
        /* Recorded, not run: launch runs at each replay. */
        return ordo__graph_capture_launch(tracker, stream, accesses, count, launch, ctx);
    }
    if (st == ORDO_OK) {
        st = prepare_locked(tracker, t, accesses, count, __func__);
    }
    if (st == ORDO_OK) {
        uint64_t messages = ordo__error_count();
        tracker_launch_begin(tracker);
        tracker->launch_accesses = accesses;
        tracker->launch_access_count = count;
        st = launch(ctx, stream);
        tracker->launch_access_count = 0;
        tracker_launch_end(tracker);
        if (st != ORDO_OK) {
            st = ordo__tracker_launch_failed(st, ordo__error_count() != messages, __func__);
        }
    }
    if (st != ORDO_OK) {
        return st; /* nothing enqueued: nothing to record */
    }
    finish_locked(tracker, t, accesses, count);
    return ORDO_OK;
}

ordo_status_t ordo_tracker_metrics(ordo_tracker_t *tracker, ordo_tracker_metrics_t *out_metrics) {
    if (out_metrics) {
        memset(out_metrics, 0, sizeof *out_metrics);
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (!out_metrics) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_metrics is NULL");
    }
    out_metrics->submissions = atomic_load_explicit(&tracker->submissions, memory_order_relaxed);
    out_metrics->waits_emitted =
        atomic_load_explicit(&tracker->waits_emitted, memory_order_relaxed);
    out_metrics->waits_elided = atomic_load_explicit(&tracker->waits_elided, memory_order_relaxed);
    out_metrics->points_recorded =
        atomic_load_explicit(&tracker->points_recorded, memory_order_relaxed);
    out_metrics->buffers_live = atomic_load_explicit(&tracker->buffers_live, memory_order_relaxed);
    out_metrics->reclamations_pending =
        atomic_load_explicit(&tracker->reclamations_pending, memory_order_acquire);
    out_metrics->reclamations_done =
        atomic_load_explicit(&tracker->reclamations_done, memory_order_acquire);
    return ORDO_OK;
}

ordo_status_t ordo__tracker_set_wait_observer(ordo_tracker_t *tracker,
                                              ordo__tracker_wait_observer_fn observer, void *ctx) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    tracker->observer = observer;
    tracker->observer_ctx = ctx;
    return ORDO_OK;
}

ordo_status_t ordo_tracker_lock(ordo_tracker_t *tracker) {
    ordo_status_t st = ordo__tracker_check(tracker, __func__);
    if (st == ORDO_OK) {
        ordo_rlock_lock(&tracker->lock);
    }
    return st;
}

ordo_status_t ordo_tracker_unlock(ordo_tracker_t *tracker) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (!ordo__rlock_held(&tracker->lock)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "the calling thread does not hold the tracker's lock");
    }
    ordo_rlock_unlock(&tracker->lock);
    return ORDO_OK;
}
