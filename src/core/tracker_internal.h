/* Internal: the tracker's state, shared by tracker.c (ordering), buffer.c
 * (histories and release), reclaimer.c (deferred reclamation) and the
 * graphs (graph_record.c, graph_replay.c: recording and replaying a
 * tracker's submissions, core/graph_internal.h). */
#ifndef ORDO_CORE_TRACKER_INTERNAL_H
#define ORDO_CORE_TRACKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/error.h"
#include "base/parker.h"
#include "base/rlock.h"
#include "core/tracker_observer.h"
#include "ordo/buffer.h"
#include "ordo/timepoint.h"
#include "ordo/tracker.h"

#define ORDO_TRACKER_MAGIC 0x5452434bu /* "TRCK" */
#define ORDO_BUFFER_MAGIC 0x42554646u  /* "BUFF" */
#define ORDO_BUFFER_RELEASED 0x52454c53u
/* Named by an ordo_tracker_prepare whose ordo_tracker_finish has not come
 * yet: every other call that names it (a submission, a second prepare, its
 * release, a rebind, a block's free) fails the common magic check and is
 * refused on its slow path; only that finish, on the prepare's stream,
 * accepts it and makes it live again. */
#define ORDO_BUFFER_PREPARED 0x50524550u /* "PREP" */
#define ORDO_BUFFER_DEAD 0xdeadb0ffu
/* Recorded points each stream remembers, with the frontier it had then. */
#define TRACKER_RECORDS 8
/* Streams whose latest read a buffer keeps inline (indexed by stream);
 * reads from streams beyond them go to an array allocated on first use. */
#define BUFFER_INLINE_READERS 8
/* Slots of the tracker's stream lookup (open addressing, linear probing):
 * twice the most streams, so a probe ends within a few slots. */
#define TRACKER_LOOKUP (2 * ORDO_TRACKER_MAX_STREAMS)
/* Finished submissions each stream remembers with the stream's op count
 * then (a power of two). */
#define TRACKER_FINISHES 8

typedef struct tracker_record {
    uint64_t point; /* 0: empty slot */
    uint64_t frontier[ORDO_TRACKER_MAX_STREAMS];
} tracker_record_t;

/* A finished submission: its point, and how many ops its stream had been
 * given by then (its own included). */
typedef struct tracker_finish {
    uint64_t point;
    uint64_t ops;
} tracker_finish_t;

/* A tracker that records a graph (core/graph_internal.h). */
struct graph_recorder;

typedef struct tracker_stream {
    ordo_stream_t *stream;
    /* Non-NULL on the streams of a recording's shadow tracker only: its
     * records and waits are captured into the recording instead of being
     * enqueued (core/graph_internal.h). */
    struct graph_recorder *capture;
    ordo_signal_t *timeline; /* signalled to a point when it is recorded */
    /* References on timeline the tracker holds for the ops that record or
     * wait on it to adopt (taken in batches; released with the tracker). */
    uint32_t spare_refs;
    uint64_t point;    /* points handed out (finished submissions) */
    uint64_t recorded; /* the last recorded point */
    /* Where the backend offers them (hal_backend.stream_progress): the
     * stream's progress timeline and its count of ops
     * submitted; NULL otherwise. With the last finishes they tell whether
     * a point's work has run without recording it. */
    ordo_signal_t *progress;
    const _Atomic uint64_t *ops_submitted;
    unsigned next_finish;
    tracker_finish_t finishes[TRACKER_FINISHES];
    /* What this stream has waited for, per origin stream, transitively. */
    uint64_t frontier[ORDO_TRACKER_MAX_STREAMS];
    tracker_record_t records[TRACKER_RECORDS];
    unsigned next_record;
} tracker_stream_t;

typedef struct buffer_use {
    uint32_t stream;
    uint64_t point;
} buffer_use_t;

struct ordo_buffer {
    uint32_t magic;
    /* While magic is ORDO_BUFFER_PREPARED: the stream index the prepare
     * was made on, and the modes it named (a finish may name no more). */
    uint8_t prepared_on;
    uint8_t prepared_modes;
    ordo_tracker_t *tracker;
    /* Non-zero for a buffer embedded in a pool's block: the pool owns its
     * life, ordo_buffer_release refuses it. */
    uint32_t pool_owned;
    /* Graphs that name the buffer (core/graph_internal.h): its release is
     * refused while any does, since their replays update its history. */
    uint32_t graph_binds;
    /* The bytes of the memory it stands for, where it has a size (a pool's
     * block: what was asked for); 0 for a plain buffer. A graph's slot is
     * rebound only to a buffer of the same size. */
    uint64_t bytes;
    buffer_use_t writer; /* point 0: never written */
    /* Each stream's latest access point (read or write), indexed by stream:
     * no search on the submission path. reader_mask: the streams that read
     * since the last write (their points are those reads: hazards).
     * use_mask: every stream that ever accessed the buffer (release waits
     * for each one's last use: a failed stream never waited for anything,
     * so an earlier use elsewhere is not implied by its later one). */
    uint64_t reader_mask;
    uint64_t use_mask;
    uint64_t last_points[BUFFER_INLINE_READERS];
    uint64_t *more_last_points; /* ORDO_TRACKER_MAX_STREAMS entries, or NULL */
    /* Release: one timepoint per use still running, counted down. */
    ordo_reclaim_fn reclaim;
    void *reclaim_ctx;
    _Atomic uint32_t uses_pending;
    uint32_t timepoint_count;
    ordo_timepoint_t *timepoints;
    struct ordo_buffer *next_reclaim; /* on the reclaimer's queue */
};

typedef struct reclaimer {
    pthread_mutex_t lock;
    ordo_parker_t wake;   /* the thread sleeps on it, awaiting buffers */
    ordo_parker_t idle;   /* drains sleep on it, awaiting no pending reclamation */
    ordo_buffer_t *queue; /* under lock */
    int stop;             /* under lock */
    pthread_t thread;
} reclaimer_t;

struct ordo_tracker {
    uint32_t magic;
    /* Launch functions running on the tracker: ordo_tracker_submit's (its
     * prepare has emitted the waits, its finish will record the accesses)
     * or a whole ordo_graph_replay (its entry has prepared its lanes and
     * its exit will write the histories). Calls from those functions that
     * would change what the open submission was ordered against, or tear
     * it down, are refused meanwhile (tracker_not_launching): a submission,
     * a prepare or finish, a replay, a recording, a change to a graph, a
     * buffer's release, the tracker's destroy, a pool's free of a block
     * the submission names. Beside magic, which every submission reads
     * first: the check costs no other cache line, and the fields after
     * keep their places. Written by the launching thread only (a load and
     * a store, no read-modify-write, atomic); read plainly by its own
     * submission paths and atomically by others (tracker_launching: a
     * tracker's close on a stream's thread, a pool's free). Which thread
     * launches: launcher. */
    uint32_t launching;
    ordo_device_t *device;
    /* Non-NULL while the tracker records a graph: submissions are captured
     * (core/graph_internal.h). Set and cleared by the recording thread
     * under lock; read without it by the submission paths (relaxed: the
     * tracker is externally synchronised) and under it by the refusals. */
    _Atomic(struct graph_recorder *) recorder;
    _Atomic uint32_t graphs; /* live graphs recorded on the tracker */
    uint32_t stream_count;
    tracker_stream_t *streams[ORDO_TRACKER_MAX_STREAMS];
    /* Attached streams by address (NULL: an empty slot), with their index:
     * a lookup costs a hash and usually one compare, however many streams
     * the tracker orders and in whatever order they come. */
    ordo_stream_t *lookup_stream[TRACKER_LOOKUP];
    uint8_t lookup_index[TRACKER_LOOKUP];
    ordo__tracker_wait_observer_fn observer;
    void *observer_ctx;
    _Atomic uint64_t submissions;
    _Atomic uint64_t waits_emitted;
    _Atomic uint64_t waits_elided;
    _Atomic uint64_t points_recorded;
    _Atomic uint64_t buffers_live;
    _Atomic uint64_t reclamations_pending;
    _Atomic uint64_t reclamations_done;
    reclaimer_t reclaimer;
    /* ordo_tracker_lock; taken by the memory pools on this tracker. */
    ordo_rlock_t lock;
    _Atomic uint32_t pools; /* memory pools standing on the tracker */
    /* Of launching: a replay's (the refusals name it). */
    uint32_t replaying;
    /* The thread whose launch functions run (its ordo__rlock_marker's
     * address). The refusals are for the calls they make, however deep
     * in other trackers' launches: a call from another thread meanwhile
     * (a host task the launch started, which may run before the
     * submission returns) is the tracker's external synchronisation's to
     * order, not a launch function's. */
    _Atomic(const void *) launcher;
    /* The accesses of the ordo_tracker_submit whose launch function runs
     * (count 0 otherwise): a pool refuses to free a block they name. */
    const ordo_access_t *launch_accesses;
    size_t launch_access_count;
    /* The streams the tracker made (ordo_tracker_stream_create), in
     * creation order, under lock: destroyed with the tracker. */
    uint32_t owned_count;
    ordo_stream_t *owned[ORDO_TRACKER_MAX_STREAMS];
    /* Of those, the ones not yet in streams: each keeps a place there, so
     * stream_count + owned_unordered <= ORDO_TRACKER_MAX_STREAMS (under
     * lock, as stream_count is where several threads submit). */
    uint32_t owned_unordered;
};

ordo_status_t ordo__tracker_check(const ordo_tracker_t *tracker, const char *api);

/* ORDO_ERR_BUSY, with a message for api, when the tracker cannot be torn
 * down now (nothing is changed): memory pools use it, buffers are live,
 * reclamations are pending (unless pending_ok: a close waits for those),
 * or a stream it owns cannot be destroyed (called on that stream's
 * thread, or another tracker or a coordinator keeps it in its table). */
ordo_status_t ordo__tracker_teardown_check(const ordo_tracker_t *tracker, int pending_ok,
                                           const char *api);

/* Tears down a tracker that passed ordo__tracker_teardown_check: its
 * reclaimer, its table of streams, the tracker, then the streams it owns
 * (as ordo_stream_destroy does), then its reference on the device. */
ordo_status_t ordo__tracker_teardown(ordo_tracker_t *tracker, const char *api);

/* The latest access point of stream s on b (s in b->use_mask). */
static inline uint64_t buffer_last_point(const ordo_buffer_t *b, uint32_t s) {
    return s < BUFFER_INLINE_READERS ? b->last_points[s] : b->more_last_points[s];
}

/* Sets it (more_last_points reserved for s beyond the inline ones). */
static inline void buffer_set_last_point(ordo_buffer_t *b, uint32_t s, uint64_t point) {
    if (s < BUFFER_INLINE_READERS) {
        b->last_points[s] = point;
    } else {
        b->more_last_points[s] = point;
    }
}

/* Allocates b's points beyond the inline ones if it has none yet. */
ordo_status_t ordo__buffer_reserve_points(ordo_buffer_t *b, const char *api);

/* The last use of b on each stream that may still be running, each made
 * a recorded point on the stream's tracker timeline
 * (ordo__buffer_use_timeline): at most ORDO_TRACKER_MAX_STREAMS, in out.
 * Under the tracker's lock when other threads use it. The thread's message
 * is left alone unless a record is refused (api's error). */
ordo_status_t ordo__buffer_uses_running(const ordo_buffer_t *b, buffer_use_t *out,
                                        uint32_t *out_count, const char *api);

/* The timeline a point of ordo__buffer_uses_running is on. */
ordo_signal_t *ordo__buffer_use_timeline(const ordo_buffer_t *b, uint32_t stream);

/* ORDO_ERR_BUSY for api, which names b while b is held by a prepare
 * (ORDO_BUFFER_PREPARED). */
ordo_status_t ordo__buffer_refuse_prepared(const ordo_buffer_t *b, const char *api);

/* ORDO_ERR_BUSY for api, called inside a launch function of the tracker's
 * (ordo_tracker_submit's, or a replay's), on its thread; else ORDO_OK. */
ordo_status_t ordo__tracker_refuse_in_launch(const ordo_tracker_t *tracker, const char *api);

/* Marks the launch functions of a submission or a replay running on this
 * thread (one at a time per tracker: a second is refused). */
static inline void tracker_launch_begin(ordo_tracker_t *tracker) {
    atomic_store_explicit(&tracker->launcher, &ordo__rlock_marker, memory_order_relaxed);
    __atomic_store_n(&tracker->launching, tracker->launching + 1, __ATOMIC_RELAXED);
}

static inline void tracker_launch_end(ordo_tracker_t *tracker) {
    __atomic_store_n(&tracker->launching, tracker->launching - 1, __ATOMIC_RELAXED);
}

/* launching, read by any thread (the plain reads are the launching
 * thread's own, on the submission paths). */
static inline uint32_t tracker_launching(const ordo_tracker_t *tracker) {
    return __atomic_load_n(&tracker->launching, __ATOMIC_RELAXED);
}

/* Non-zero when this thread runs the tracker's launch functions. */
static inline int tracker_launching_here(const ordo_tracker_t *tracker) {
    return tracker_launching(tracker) &&
           atomic_load_explicit(&tracker->launcher, memory_order_relaxed) == &ordo__rlock_marker;
}

/* ORDO_OK unless a launch function of the tracker runs on this thread:
 * then ordo__tracker_refuse_in_launch's refusal, for a call it must not
 * make. */
static inline ordo_status_t tracker_not_launching(const ordo_tracker_t *tracker, const char *api) {
    return ORDO_LIKELY(!tracker->launching) ? ORDO_OK
                                            : ordo__tracker_refuse_in_launch(tracker, api);
}

/* The split form (prepare, or finish) of one access to a pool's block,
 * named api: allowed inside a launch function, where the pool refuses a
 * block the open submission names (a use of another block is ordered by
 * waits and a point of its own, beside the submission's). */
ordo_status_t ordo__tracker_block_use(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                      const ordo_access_t *access, int finish, const char *api);

/* Non-zero when the submission whose launch function runs names b. */
int ordo__tracker_launch_names(const ordo_tracker_t *tracker, const ordo_buffer_t *b);

/* Non-zero while the tracker records a graph (relaxed: see recorder). */
static inline int tracker_recording(const ordo_tracker_t *tracker) {
    return atomic_load_explicit(&tracker->recorder, memory_order_relaxed) != NULL;
}

_Static_assert(TRACKER_LOOKUP == 128, "tracker_lookup_slot takes the top 7 bits");

static inline uint32_t tracker_lookup_slot(const ordo_stream_t *stream) {
    /* Fibonacci hashing of the address: the top bits of the product. */
    return (uint32_t)(((uint64_t)(uintptr_t)stream * UINT64_C(0x9e3779b97f4a7c15)) >> 57);
}

/* The index of an attached stream; 0 if stream is not attached (or NULL).
 * Inline: every submission and every pool call looks its stream up. */
static inline int tracker_stream_find(const ordo_tracker_t *tracker, const ordo_stream_t *stream,
                                      uint32_t *out_index) {
    for (uint32_t slot = tracker_lookup_slot(stream);; slot = (slot + 1) & (TRACKER_LOOKUP - 1)) {
        const ordo_stream_t *key = tracker->lookup_stream[slot];
        if (ORDO_LIKELY(key == stream && key)) {
            *out_index = tracker->lookup_index[slot];
            return 1;
        }
        if (!key) {
            return 0;
        }
    }
}

/* Attaches a stream not attached yet (checks the handle and its device)
 * and gives its index. */
ordo_status_t ordo__tracker_stream_attach(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                          uint32_t *out_index, const char *api);

/* The stream's index in the tracker, attaching it on first use. */
static inline ordo_status_t tracker_stream_index(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                                 uint32_t *out_index, const char *api) {
    return tracker_stream_find(tracker, stream, out_index)
               ? ORDO_OK
               : ordo__tracker_stream_attach(tracker, stream, out_index, api);
}

/* Orders stream t after origin's point `point`: nothing if t's frontier
 * knows it already (counted elided), else one device wait on the record
 * covering it (counted emitted; t's frontier learns the record's). */
ordo_status_t ordo__tracker_wait_for(ordo_tracker_t *tracker, uint32_t t, uint32_t origin,
                                     uint64_t point);

/* Hands out stream t's next point for an access with no submission of its
 * own (a block's birth or free, a recorded use): any record that covers
 * it is enqueued after the call, so it covers everything enqueued on the
 * stream before. */
static inline uint64_t tracker_new_point(ordo_tracker_t *tracker, uint32_t t) {
    return ++tracker->streams[t]->point;
}

/* Makes sure stream's point `point` is recorded (signals the stream's
 * timeline at its current point if no record covers it yet) and gives the
 * record that covers it: the smallest recorded point >= point it knows.
 * Fails (and records nothing) only if the signal could not be enqueued on a
 * healthy stream; on a failed stream the record fails its timeline, which
 * is what its waiters need. */
ordo_status_t ordo__tracker_record_covering(ordo_tracker_t *tracker, uint32_t stream,
                                            uint64_t point, const tracker_record_t **out_record);

/* Non-zero when the work of stream t up to point `point` is known to have
 * run from the stream's progress (nothing recorded, nothing enqueued): the
 * op count of a remembered finish at or after the point has been reached.
 * 0 when that is not known (not run yet, or no finish remembered covers
 * it, or the backend has no progress to read). */
int ordo__tracker_point_ran(const ordo_tracker_t *tracker, uint32_t t, uint64_t point);

/* For a submission refused for its function argument: the fault of an
 * earlier parameter (the tracker, the stream, the access list), checked
 * without attaching the stream, or ORDO_OK when they are good (handles
 * and arguments answer in parameter order, docs/ERRORS.md). */
ordo_status_t ordo__tracker_submit_refusal(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                           const ordo_access_t *accesses, size_t count,
                                           const char *api);

/* The analysis of one submission on stream t, out of line, for the graphs
 * (a replay's entry on the real tracker, a recording on its shadow):
 * prepare checks the accesses and emits the waits they need; finish
 * records them as t's next point (after prepare succeeded for them, it
 * cannot fail). No limit on count: the caller's lists are its own. */
ordo_status_t ordo__tracker_prepare_at(ordo_tracker_t *tracker, uint32_t t,
                                       const ordo_access_t *accesses, size_t count,
                                       const char *api);
void ordo__tracker_finish_at(ordo_tracker_t *tracker, uint32_t t, const ordo_access_t *accesses,
                             size_t count);

/* Hands out stream t's next point for a submission whose ops were all
 * enqueued by this thread, noting the stream's op count for
 * ordo__tracker_point_ran, and counts the submission. */
uint64_t ordo__tracker_point_finished(ordo_tracker_t *tracker, uint32_t t);

/* Checks each access of a list (buffers live, of this tracker; modes). */
ordo_status_t ordo__tracker_check_accesses(const ordo_tracker_t *tracker,
                                           const ordo_access_t *accesses, size_t count,
                                           const char *api);

/* Lets go of the tracker's table of streams: each stream's timeline (the
 * spare references first) and its use of the stream, then the state. */
void ordo__tracker_streams_release(ordo_tracker_t *tracker);

/* The status and message of a submission whose launch function returned
 * st: st itself if it is an ordo error (ORDO_ERR_ABORTED if not), and a
 * message for api that says so, wrapping the one the function left if it
 * left one (left_message: the thread's message is otherwise an older
 * one). */
ordo_status_t ordo__tracker_launch_failed(ordo_status_t st, int left_message, const char *api);

ordo_status_t ordo__reclaimer_start(reclaimer_t *reclaimer);
void ordo__reclaimer_stop(reclaimer_t *reclaimer);
/* Hands a buffer whose uses have all completed to the reclaimer thread. */
void ordo__reclaimer_push(ordo_tracker_t *tracker, ordo_buffer_t *buffer);
/* Counts one pending reclamation as done and wakes drainers. */
void ordo__reclaimer_finished(ordo_tracker_t *tracker);
/* Runs reclaim and frees the buffer's history. */
void ordo__buffer_reclaim_now(ordo_tracker_t *tracker, ordo_buffer_t *buffer);

#endif
