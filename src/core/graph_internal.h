/* Internal: graphs, a tracker's submissions recorded once and replayed
 * (ordo/graph.h). graph_record.c records, graph_replay.c replays, graph.c
 * keeps the graph (bindings, info, destroy).
 *
 * RECORDING. While a tracker records (tracker->recorder), ordo_tracker_submit
 * and ordo_tracker_submit_host capture their submission instead of running
 * it. Each is analysed by the tracker's own code (prepare and finish, the
 * same minimal waits) run on a *shadow* tracker: a private ordo_tracker_t
 * whose streams are the recording's *lanes* (the streams it used) and whose
 * buffers are the graph's *slots* (one per tracker buffer it used), all
 * starting empty: histories with no access, frontiers at zero, as if the
 * graph ran alone on idle streams. The shadow's streams have `capture` set,
 * so the records and waits the analysis emits are appended to the
 * recording instead of being enqueued:
 *
 *   RECORD(L, p)     lane L signals its graph timeline at shadow point p
 *   WAIT(M, L, p)    lane M waits until lane L's graph timeline reaches p
 *   HOST(L, fn, ctx) / LAUNCH(L, fn, ctx)   the submission's work on L
 *
 * in the order an eager run on idle streams would enqueue them: the
 * submission's waits (and the records they need), then its work. Nothing
 * reaches a stream while recording, and the real tracker's histories and
 * frontiers do not change.
 *
 * An access is *exposed* when its slot has not been written in the graph
 * before it (the shadow buffer's writer point is 0). Each lane keeps its
 * exposed accesses, modes merged: its *entry*.
 *
 * REPLAY. A replay is one submission per lane as far as the tracker's
 * other work is concerned, and inside it the recording as it was found:
 *
 *  1. Entry: for each lane L, the tracker's prepare on L's stream with L's
 *     entry (the slots' bound buffers): the waits a submission with those
 *     accesses needs.
 *  2. Ops, in recorded order: RECORD(L, p) signals L's graph timeline (a
 *     signal of the graph's own) at base_L + p, WAIT(M, L, p) waits for
 *     base_L + p. base_L grows by P_L, the lane's shadow points (its
 *     submissions in the recording), at every replay: replay r uses the
 *     values (r P_L, (r + 1) P_L].
 *  3. Exit: each lane takes one point p_L of its stream, and each slot's
 *     history becomes, in real terms, what the recording left in its
 *     shadow buffer: with a write in the graph, the last writer's lane at
 *     its p_L replaces the writer, and the lanes that read since are the
 *     readers; without one, the graph's readers join the readers. Every
 *     lane that used the slot gets p_L as its last use. Each lane's
 *     frontier learns, for every lane K its shadow frontier holds a point
 *     of, K's frontier as it was after the entries and K's points before
 *     p_K.
 *
 * WHY THIS IS EAGER EXECUTION. (a) Inside one replay the ops are those of
 * an eager run on idle streams, in its order, and a wait on base_L + p is
 * met by this replay's RECORD(L, p) and by nothing else: earlier replays
 * signalled at most base_L, later ones enqueue their records behind this
 * one on L, and only L signals its timeline. RECORD(L, p) is enqueued
 * behind L's ops of the shadow points up to p (and everything L ran
 * before the replay), so each wait orders at least what the shadow's wait
 * ordered: every two conflicting accesses inside the graph are ordered as
 * the tracker orders them.
 *
 * (b) Work before the replay. A graph access to slot x on lane L is either
 * exposed, and L's entry ordered it after x's history as a submission of
 * that mode on L would be (read after the last writer; a write after it and
 * every reader since), or it follows an in-graph write of x, and by (a) it
 * is ordered after the first in-graph write of x, which is exposed, a
 * write, and so ordered after all of x's history.
 *
 * (c) Work after the replay. A later access waits, as for any submission,
 * for x's writer and (a write) its readers at their points. With a write in
 * the graph these are the last in-graph writer at p_W (a record covering
 * p_W is enqueued behind all of W's replay) and the lanes that read since
 * at their p_L; every earlier in-graph access to x, and every access to x
 * before the replay, is ordered before that last write by (a) and (b).
 * Without one, the previous writer stays and the graph's readers are
 * added, as a read submission would. A release waits for each lane's p_L,
 * behind its whole part of the replay.
 *
 * (d) The frontiers learnt at exit are sound: L's shadow frontier holding
 * a point of K means L's ops end behind a chain of waits starting at a
 * RECORD of K, which K enqueued after its entry's waits and after all its
 * earlier points; so L's later work runs after what K's frontier knew
 * after the entry, and after K's points before p_K. K's frontier is read
 * after every entry and before any exit, so it holds nothing the replay's
 * own ops taught. Frontiers may know less than is true (the tracker then
 * emits a wait more, never one less); they never know more.
 *
 * (e) Never a wait on a point nobody will reach, never a hang: the shadow
 * enqueues every record before the waits on it, and the replay keeps that
 * order. A replay checks every lane's stream first and enqueues nothing
 * on a failed one. A stream that fails during the replay refuses its
 * later ops: a refused RECORD fails its graph timeline, so every wait on
 * it fails its own stream; a launch function that fails at replay is
 * replaced by a host task that fails its stream, whose pending records
 * then fail likewise. The exit is recorded all the same: what was enqueued
 * may run.
 *
 * Across replays (and across graphs) nothing else is shared: the next
 * replay's entry orders it after this one's exit like any submission.
 *
 * REFUSALS. What a replay could not repeat is refused while recording,
 * with ORDO_ERR_BUSY: a host wait on the tracker (synchronize, drain,
 * close), its destroy, a buffer's release, the split form (prepare and
 * finish: the work between them is the caller's own enqueue), and a
 * replay. The first refusal is kept, and ordo_tracker_record_end returns
 * it instead of a graph (the tracker then records no more and is usable).
 * Refusals and the end take the tracker's lock, so a refusal on another
 * thread (synchronize, drain) never races the end that frees the
 * recording.
 *
 * MEMORY. A memory pool on the tracker (src/mem/pool.c) allocates for
 * real while the tracker records: the block's birth is a write at a point
 * of the allocating stream, ordered after the memory's old uses as any
 * allocation, and the recorder notes the block (ordo__graph_block_born).
 * Freed in the same recording (ordo__graph_block_freed), the block becomes
 * the graph's: the pool ends the caller's handle (the block reads freed,
 * its buffer released, so a later use of it is refused as a freed block's
 * would be) but keeps the memory handed out; every replay uses that same
 * memory, and the graph gives it back to the pool, on the stream the
 * recording freed it on, when it is destroyed (the pool's free then waits
 * for every use the replays recorded in its history). Such a block is a
 * slot like any buffer, so its uses are ordered across replays by entry
 * and exit; its buffer is marked live for the replay's own entry and exit
 * and released again after (the tracker is externally synchronised: nobody
 * else looks in between). A block allocated in the recording and not freed
 * in it stays the caller's; one allocated before it cannot be freed in it
 * (refused: a replay could not free it again).
 *
 * Lifetimes: a graph counts on its tracker (tracker->graphs: the tracker's
 * destroy is refused while graphs live) and on its bound buffers
 * (buffer->graph_binds: their release is refused). Its lanes' streams are
 * attached to the tracker, which keeps them until it is destroyed. Its
 * timelines are signals with references: ops still queued when the graph
 * is destroyed hold their own.
 */
#ifndef ORDO_CORE_GRAPH_INTERNAL_H
#define ORDO_CORE_GRAPH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tracker_internal.h"
#include "ordo/graph.h"

#define ORDO_GRAPH_MAGIC 0x47525048u /* "GRPH" */
#define ORDO_GRAPH_DEAD 0xdead6a7fu

typedef enum graph_op_kind {
    GRAPH_OP_HOST,   /* u.host: a host task */
    GRAPH_OP_LAUNCH, /* u.launch: a launch function, called at each replay */
    GRAPH_OP_RECORD, /* lane signals its timeline at base + offset */
    GRAPH_OP_WAIT,   /* lane waits until timeline_lane's timeline reaches base + offset */
} graph_op_kind_t;

typedef struct graph_op {
    uint8_t kind;          /* graph_op_kind_t */
    uint8_t lane;          /* the lane it is enqueued on */
    uint8_t timeline_lane; /* RECORD, WAIT: the lane whose timeline */
    uint64_t offset;       /* RECORD, WAIT: the shadow point (above the replay's base) */
    union {
        struct {
            ordo_host_fn fn;
            void *ctx;
        } host;
        struct {
            ordo_launch_fn fn;
            void *ctx;
        } launch;
    } u;
} graph_op_t;

/* A stream the graph runs on. */
typedef struct graph_lane {
    ordo_stream_t *stream;
    uint32_t t;              /* its index in the tracker */
    ordo_signal_t *timeline; /* the lane's graph timeline; NULL: never recorded */
    uint32_t spare_refs;     /* references on timeline for ops to adopt */
    uint64_t points;         /* P: its submissions in the recording */
    uint64_t base;           /* the next replay's base value */
    uint64_t knows;          /* lanes its shadow frontier held a point of (not itself) */
    uint32_t entry_first;    /* its entry: entries[entry_first, + entry_count) */
    uint32_t entry_count;
    /* An enqueue on it was refused while its stream was healthy (no
     * memory): the graph is spent (ordo__graph_lane_broken). */
    uint8_t spent;
    /* An enqueue on it was refused (its own stream's refusal, not a break
     * for another lane's): its stream's failure is the one later replays
     * report first. */
    uint8_t refused;
} graph_lane_t;

/* A tracker buffer the graph uses, bound by its role in the recording. */
typedef struct graph_slot {
    ordo_buffer_t *buffer; /* bound now */
    uint8_t mode;          /* every access of the recording, merged */
    int8_t writer_t;       /* the last writer's stream index in the tracker; -1: none */
    uint64_t readers_t;    /* stream indices reading since (every reader without a write) */
    uint64_t users_t;      /* stream indices of the lanes that used it */
    uint32_t entry_first;  /* its first entry (UINT32_MAX: none), chained by entry_next */
} graph_slot_t;

/* Buffer -> slot, open addressing with linear probing (capacity a power of
 * two, at most half full). */
typedef struct graph_map {
    ordo_buffer_t **keys; /* NULL: empty */
    uint32_t *values;
    uint32_t capacity;
    uint32_t count;
} graph_map_t;

/* Gives a graph's block back to its pool: a stream-ordered free on stream. */
typedef void (*graph_block_free_fn)(void *block, ordo_stream_t *stream);

/* A memory pool's block allocated while the tracker records. */
typedef struct graph_block {
    ordo_buffer_t *buffer; /* the block's tracked buffer */
    void *block;           /* the pool's block, for free */
    graph_block_free_fn free;
    ordo_stream_t *stream; /* where the recording freed it; NULL: not freed in it */
    uint64_t bytes;
} graph_block_t;

struct ordo_graph {
    uint32_t magic;
    ordo_tracker_t *tracker;
    uint32_t lane_count;
    graph_lane_t *lanes;
    uint64_t op_count;
    graph_op_t *ops;
    uint32_t slot_count;
    graph_slot_t *slots;
    graph_map_t map; /* bound buffer -> slot */
    uint32_t entry_count;
    ordo_access_t *entries; /* the lanes' entries, lane after lane */
    uint32_t *entry_next;   /* per entry: the next entry of its slot (UINT32_MAX: none) */
    /* What the lanes learn at exit, computed after the entries: lane_count
     * rows of ORDO_TRACKER_MAX_STREAMS. */
    uint64_t *learned;
    uint32_t block_count;
    graph_block_t *blocks; /* the memory the graph holds (freed in its recording) */
    uint64_t memory_bytes;
    uint64_t tasks; /* HOST and LAUNCH ops */
    /* Task i's index in ops, built by the first ordo_graph_set_task_context
     * (NULL until then). */
    uint64_t *task_ops;
    uint64_t waits;
    uint64_t records;
    _Atomic uint64_t replays; /* relaxed: ordo_graph_info may read it beside a replay */
    /* Native graphs (graph_native.c). */
    uint8_t native_mode;  /* ordo_graph_native_t */
    uint8_t native_stale; /* a rebind since the lowering: lower again at the next replay */
    /* Why a lane is spent (the first), for the later replays' refusal. */
    char spent_why[512];       /* the size of a thread's message */
    _Atomic uint8_t native_on; /* native is set (read by ordo_graph_info beside a replay) */
    void *native;              /* the backend's; NULL: replayed op by op */
    uint8_t native_launched;   /* a replay launched it (its free goes on lane 0's stream) */
};

/* ---- recording (graph_record.c) ------------------------------------------- */

/* A recording in progress (tracker->recorder). */
typedef struct graph_recorder graph_recorder_t;

/* The messages of refusals several entry points share. */
extern const char ordo__graph_host_wait_refused[];

/* A record (wait == 0) or a wait the shadow tracker emits on stream,
 * on owner's timeline at point: appended to the recording. Cannot fail
 * (the capture reserved room for every op a submission can emit). */
void ordo__graph_capture_point(graph_recorder_t *recorder, ordo_stream_t *stream,
                               const tracker_stream_t *owner, uint64_t point, int wait);

/* Captures a submission of a recording tracker (checked as
 * ordo_tracker_submit / ordo_tracker_submit_host check theirs, and named
 * for them). */
ordo_status_t ordo__graph_capture_launch(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                         const ordo_access_t *accesses, size_t count,
                                         ordo_launch_fn launch, void *ctx);
ordo_status_t ordo__graph_capture_host(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                       const ordo_access_t *accesses, size_t count, ordo_host_fn fn,
                                       void *ctx);

/* A pool allocated block (block->stream NULL) on a tracker that records:
 * the recording notes it. */
ordo_status_t ordo__graph_block_born(ordo_tracker_t *tracker, const graph_block_t *block,
                                     const char *api);

/* A pool is asked to free the block of buffer on stream while its tracker
 * records: ORDO_OK when the recording takes it (it was allocated in it);
 * the caller then ends the block's handle. Else a refusal (the recording
 * fails with it). */
ordo_status_t ordo__graph_block_freed(ordo_tracker_t *tracker, ordo_buffer_t *buffer,
                                      ordo_stream_t *stream, const char *api);

/* A pool is asked, while its tracker records, to free a block an adaptor
 * kept after its caller's free (a guard's quarantine: mem_release), which
 * no recorded work may take: the recorder holds the free (block->free, on
 * block->stream) until the recording ends, and makes it then. Refused
 * (nothing held, the recording unharmed) for a block allocated in the
 * recording, and without memory. */
ordo_status_t ordo__graph_release_after(ordo_tracker_t *tracker, const graph_block_t *block,
                                        const char *api);

/* Refuses api on a tracker that records: ORDO_ERR_BUSY, "api: <why>", kept
 * as the recording's refusal if it is the first. ORDO_OK if the tracker
 * turns out not to record (read under its lock). */
ordo_status_t ordo__graph_refuse(ordo_tracker_t *tracker, const char *api, const char *why);

/* ---- native graphs (graph_native.c) --------------------------------------- */

/* Lowers graph to a native graph of its device, per its native_mode: with
 * AUTO, a graph that cannot be lowered stays replayed op by op (ORDO_OK);
 * with REQUIRE, why it cannot is returned. Frees a lowering it replaces. */
ordo_status_t ordo__graph_lower(ordo_graph_t *graph, const char *api);

/* The replay's ops as one native launch (graph->native set): lane 0 waits
 * for every lane's entry, launches, and every lane waits for lane 0. Same
 * contract as run_ops (graph_replay.c). */
ordo_status_t ordo__graph_run_native(ordo_graph_t *graph, const uint64_t *base, char *message,
                                     size_t capacity, uint64_t *out_broken);

/* A lane whose replay stopped at a refused enqueue (graph_replay.c): its
 * timeline fails with status and message, so the streams waiting on it
 * fail rather than wait forever, and a best-effort host task fails its
 * stream, if the stream still runs, so its later work learns of the gap.
 * refused_here: its own stream refused (not another lane's, which it
 * follows); a healthy one doing so spends the graph (lane->spent). */
void ordo__graph_lane_broken(graph_lane_t *lane, ordo_status_t status, const char *message,
                             bool refused_here);

/* Makes the lane's timeline unless it has one, named after its stream for
 * stall reports; ORDO_ERR_OUT_OF_MEMORY naming api. */
ordo_status_t ordo__graph_lane_timeline(graph_lane_t *lane, const char *api);

/* Frees the native graph, if any. */
void ordo__graph_native_free(ordo_graph_t *graph);

/* ---- the map (graph.c) ----------------------------------------------------- */

/* Room for count more keys (grows the table); ORDO_ERR_OUT_OF_MEMORY. */
ordo_status_t ordo__graph_map_reserve(graph_map_t *map, uint32_t count, const char *api);
/* The slot of buffer, or UINT32_MAX. */
uint32_t ordo__graph_map_find(const graph_map_t *map, const ordo_buffer_t *buffer);
/* Adds buffer -> slot (room reserved, buffer absent). */
void ordo__graph_map_put(graph_map_t *map, ordo_buffer_t *buffer, uint32_t slot);
/* Removes buffer (present). */
void ordo__graph_map_remove(graph_map_t *map, const ordo_buffer_t *buffer);
void ordo__graph_map_free(graph_map_t *map);

/* Checks a graph handle for api. */
ordo_status_t ordo__graph_check(const ordo_graph_t *graph, const char *api);

/* Frees a graph and everything it holds, unbinding its buffers (for the
 * destroy, and for a recording's end that fails half-way). */
void ordo__graph_free(ordo_graph_t *graph);

#endif
