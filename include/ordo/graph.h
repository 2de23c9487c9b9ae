/** @file
 * ordo/graph.h - a tracker's submissions recorded once and replayed.
 *
 * Programs that repeat the same step (a training iteration, a decode step)
 * pay the tracker's analysis on every repetition. A graph pays it once:
 *
 *     ordo_tracker_record_begin(tracker);
 *     step(tracker);                      // ordo_tracker_submit(_host) calls
 *     ordo_graph_t *graph;
 *     ordo_tracker_record_end(tracker, &graph);
 *     for (int i = 0; i < 1000; ++i)
 *         ordo_graph_replay(graph);       // the step, no hazard analysis
 *     ordo_graph_destroy(graph);
 *
 * Recording. Between ordo_tracker_record_begin and ordo_tracker_record_end,
 * ordo_tracker_submit and ordo_tracker_submit_host on the tracker (from any
 * thread, under the tracker's rules) are recorded, not run: nothing is
 * enqueued, no launch function is called, the tracker's state does not
 * change. Each is analysed as the tracker analyses a submission, as if the
 * recorded work ran alone on idle streams, and the cross-stream waits found
 * are kept with it. A launch function is called at each replay (so it can
 * read what it enqueues from its context then), except in a native graph
 * (below); a host task runs at each replay with the context it was
 * recorded with (or the one ordo_graph_set_task_context gave it).
 *
 * Native graphs. Asked for (ordo_tracker_record_begin_native), on a device
 * that has them (CUDA), ordo_tracker_record_end lowers the recording to
 * one native graph (a CUDA graph), instantiated once and launched once per
 * replay (ordo_graph_info's native says so).
 * Each launch function is then called once, at the lowering, with the
 * device work it enqueues on its stream captured (ordo/cuda.h); the
 * graph's edges are the waits the recording found, and it runs on the
 * first stream, after all work queued before on every stream of the graph
 * and before all work queued after (a replay when a stream of the graph
 * holds back on the host a wait not yet met goes op by op instead, so that
 * this join never waits for work enqueued after it). A rebind, or
 * ordo_graph_refresh, lowers the graph again at the next replay (the
 * launch functions are called again), updating the native graph in place
 * where the backend can (replays enqueued before run what they ran).
 * What cannot be lowered (a host
 * task; a launch function that does anything but enqueue device work on
 * its own stream) is replayed op by op with ORDO_GRAPH_NATIVE_AUTO, and
 * fails the recording with ORDO_GRAPH_NATIVE_REQUIRE. docs/GRAPHS.md,
 * "Native graphs".
 *
 * External accesses. Every buffer a recorded submission names lives
 * outside the graph; the graph names each in a slot, bound to that buffer,
 * with the modes the recording used (ordo_graph_buffer). A replay is
 * ordered against the tracker's other work as one submission per stream
 * it runs on, with that stream's accesses that come first in the graph:
 * before the replay, the waits those need; after it, each buffer's history
 * as the graph left it. Inside, the recorded waits are replayed as they
 * are, with no analysis.
 *
 * Binding. A plain buffer carries no size in ordo (ordo/buffer.h: a
 * history, not contents), so a slot is bound by role: ordo_graph_rebind
 * replaces the buffer of a slot with another buffer of the same tracker,
 * and later replays are ordered by the new one's history. A pool block's
 * buffer (ordo_block_buffer) has the block's size: it is rebound only to
 * another block's buffer of the same size, and a plain buffer only to a
 * plain buffer. ordo never touches the
 * data: a replay runs the recorded work, so work that must follow a rebind
 * finds its data through its context (a launch function reading, when it
 * is called at replay, the pointers the caller set before the replay).
 *
 * Refused while recording, with ORDO_ERR_BUSY, because a replay could not
 * repeat them: a host wait on the tracker (ordo_tracker_synchronize,
 * ordo_tracker_drain, ordo_tracker_close), ordo_tracker_destroy,
 * ordo_buffer_release, the split form (ordo_tracker_prepare and
 * ordo_tracker_finish: the caller's own enqueue between them is not seen),
 * the MPI operations of ordo/mpi.h (each runs once),
 * and ordo_graph_replay of any graph of the tracker. The refused call does
 * nothing, and the recording fails: ordo_tracker_record_end returns that
 * refusal's status and message, and no graph. Other calls behave as
 * without a recording (a submission with bad input is refused and not
 * recorded; buffers and owned streams may be created). A host wait on a
 * stream itself (ordo_stream_synchronize) is not the tracker's: it waits
 * for what that stream was given, which holds nothing of the recording.
 *
 * Memory. The tracker itself allocates nothing; its stream-ordered
 * allocations are those of a memory pool on it (ordo_mem_pool_create,
 * ordo/memory.h). While the tracker records, such a pool allocates for
 * real (the block is ordered after the memory's old uses on its stream,
 * as always), and a block allocated in the recording and freed in it
 * (ordo_mem_deallocate) becomes the graph's: the caller's handle ends
 * there, but the memory stays reserved for the graph, every replay uses
 * the same memory (its uses ordered across replays like any buffer's),
 * and ordo_graph_destroy gives it back to the pool, on the stream the
 * recording freed it on, behind every replay's use (ordo_graph_info's
 * memory_bytes counts it). A block allocated in the recording and not
 * freed in it stays the caller's. Refused while recording, as above:
 * freeing a block allocated before the recording, the uses
 * (ordo_mem_prepare_use, ordo_mem_finish_use, ordo_mem_record_use) and
 * ordo_mem_reap_pending. A block whose buffer a graph names cannot be
 * deallocated (ORDO_ERR_BUSY) while the graph is bound to it.
 *
 * Failures. A replay checks the streams first and returns the failure of
 * one that failed, enqueueing nothing. A host task that fails at a replay
 * fails its stream as any task does; the streams waiting on it fail in
 * turn and the next replay returns the failure. A launch function that
 * fails at a replay leaves a host task in its place that fails its stream
 * with that status (so the work ordered after it fails, and nothing waits
 * forever), and ordo_graph_replay returns the status with the function's
 * message. An enqueue the backend refuses during a replay (a stream that
 * failed meanwhile, or no memory) stops that stream's part of the replay
 * there, so nothing after the gap runs unordered; the graph's timeline of
 * that stream fails, so the streams waiting on it fail rather than wait
 * forever, and a best-effort failing task goes on the stream; the replay
 * returns the refusal, and every later replay of the graph returns
 * ORDO_ERR_UNAVAILABLE (destroy it) when the refusal came from a healthy
 * stream (no memory), or the stream's failure when it came from a stream
 * that had failed.
 *
 * Lifetimes: a graph belongs to its tracker: ordo_tracker_destroy and
 * ordo_tracker_close are refused (ORDO_ERR_BUSY) while graphs of it live,
 * and ordo_buffer_release is refused for a buffer a graph is bound to.
 * ordo_graph_destroy may be called with replays still running: what they
 * enqueued runs as it would have (the contexts of their tasks must live
 * until then, as for any host task).
 *
 * Thread-safety: a graph is its tracker's: recording, replay, rebind,
 * refresh, setting a task's context and destroy follow the tracker's rules (externally
 * synchronised, or each under ordo_tracker_lock); ordo_graph_info and ordo_graph_buffer read the
 * graph and may run beside one another and beside a replay, not beside a
 * rebind, refresh, a context set or destroy.
 */
#ifndef ORDO_GRAPH_H
#define ORDO_GRAPH_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/buffer.h"
#include "ordo/tracker.h"

ORDO_BEGIN_DECLS

/** A tracker's submissions, recorded to be replayed (opaque). */
typedef struct ordo_graph ordo_graph_t;

/** Whether a graph's replays launch one native graph of the device
 * (ordo_tracker_record_begin_native; see "Native graphs" above). */
typedef enum ordo_graph_native {
    /** Replay operation by operation (launch functions are called at every
     * replay). ordo_tracker_record_begin's. */
    ORDO_GRAPH_NATIVE_OFF = 0,
    /** Lower the recording where the device can (on CUDA, a CUDA graph);
     * else replay it operation by operation. */
    ORDO_GRAPH_NATIVE_AUTO = 1,
    /** Lower the recording, or fail: ordo_tracker_record_end (and a replay
     * after a rebind) returns why it could not (ORDO_ERR_UNSUPPORTED, or a
     * launch function's failure). */
    ORDO_GRAPH_NATIVE_REQUIRE = 2,
} ordo_graph_native_t;

/** What a graph holds (ordo_graph_info). */
typedef struct ordo_graph_info {
    uint32_t streams;      /**< streams it runs on */
    uint32_t buffers;      /**< slots: tracker buffers it names */
    uint64_t tasks;        /**< host tasks and launch functions, per replay */
    uint64_t waits;        /**< cross-stream waits inside it, per replay */
    uint64_t records;      /**< points signalled inside it for those waits, per replay */
    uint64_t replays;      /**< replays so far */
    uint64_t memory_bytes; /**< bytes of the pool blocks the graph holds (allocated and
                                freed in its recording) */
    uint32_t native;       /**< 1 when its replays launch one native graph (a CUDA graph),
                                0 when they enqueue its operations one by one */
} ordo_graph_info_t;

/** Starts recording tracker's submissions (see above). ORDO_ERR_BUSY when
 * it records already. */
ordo_status_t ordo_tracker_record_begin(ordo_tracker_t *tracker);

/** ordo_tracker_record_begin, choosing whether the graph is lowered to a
 * native graph (ORDO_ERR_INVALID_ARGUMENT for a value not of the enum). */
ordo_status_t ordo_tracker_record_begin_native(ordo_tracker_t *tracker, ordo_graph_native_t native);

/** Ends the recording and makes its graph. A recording with a refused call
 * returns that refusal (its status and message) and no graph; so does one
 * that cannot be made into a graph (ORDO_ERR_OUT_OF_MEMORY). Either way the
 * tracker records no more. ORDO_ERR_BUSY when it was not recording. An
 * empty recording makes an empty graph. */
ordo_status_t ordo_tracker_record_end(ordo_tracker_t *tracker, ordo_graph_t **out_graph);

/** Enqueues the graph's work once more: the waits its streams need for the
 * buffers it names, then the recorded work and waits, then each buffer's
 * history updated as one submission per stream would. ORDO_ERR_BUSY while
 * the tracker records (and that recording fails). A stream that has failed
 * returns its failure, nothing enqueued. The launch functions it calls run
 * inside it: from them, a submission on the tracker, a recording's begin,
 * ordo_buffer_release, a pool's ordo_mem_prepare_use / _finish_use,
 * ordo_tracker_destroy or _close, and ordo_graph_replay, ordo_graph_rebind,
 * ordo_graph_refresh, ordo_graph_set_task_context or ordo_graph_destroy of
 * any graph of the tracker are refused with ORDO_ERR_BUSY. So are these
 * from a launch function of ordo_tracker_submit (ordo/tracker.h). */
ordo_status_t ordo_graph_replay(ordo_graph_t *graph);

/** Binds the slot now bound to `bound` to `buffer` instead, a live buffer of
 * the same tracker (ORDO_ERR_INVALID_ARGUMENT for another tracker's,
 * ORDO_ERR_DESTROYED for a released one) of the same size (see above;
 * ORDO_ERR_INVALID_ARGUMENT otherwise). ORDO_ERR_NOT_FOUND when no slot is
 * bound to `bound`; ORDO_ERR_INVALID_ARGUMENT when another slot is bound
 * to `buffer` already (two slots of one graph never share a buffer: the
 * recording ordered nothing between them), or when `bound` is the graph's
 * own memory. `bound` == `buffer` does nothing. The next replay is ordered
 * by buffer's history. */
ordo_status_t ordo_graph_rebind(ordo_graph_t *graph, ordo_buffer_t *bound, ordo_buffer_t *buffer);

/** Has a native graph built again at the next replay: its launch
 * functions are called again, so the replays after it run what they
 * enqueue then (for a caller that changed what they read, a pointer or a
 * scalar, without a rebind). Nothing for a graph replayed op by op (its
 * launch functions are called at every replay anyway). */
ordo_status_t ordo_graph_refresh(ordo_graph_t *graph);

/** Gives task `index` of the graph (its host tasks and launch functions,
 * numbered in recording order, below ordo_graph_info's tasks; else
 * ORDO_ERR_OUT_OF_RANGE) the context ctx from the next replay on, as a CUDA
 * graph's node parameters are set: a host task runs with ctx, a launch
 * function is called with it (in a native graph at the next replay, which
 * lowers the graph again, as after ordo_graph_refresh). Replays made before
 * keep the context they were made with, which must live until their work
 * has run. For data that changes from replay to replay (a step number, a
 * pointer after a rebind) without a launch function that builds it.
 * Refused with ORDO_ERR_BUSY from a launch function of the tracker's
 * (a replay's, or ordo_tracker_submit's). */
ordo_status_t ordo_graph_set_task_context(ordo_graph_t *graph, uint64_t index, void *ctx);

/** The buffer bound to slot `index` (below ordo_graph_info's buffers,
 * numbered as the recording first used them; else ORDO_ERR_OUT_OF_RANGE)
 * and the modes the recording used it with, merged. */
ordo_status_t ordo_graph_buffer(ordo_graph_t *graph, uint32_t index, ordo_buffer_t **out_buffer,
                                ordo_access_mode_t *out_mode);

/** What the graph holds, and its replays so far. */
ordo_status_t ordo_graph_info(ordo_graph_t *graph, ordo_graph_info_t *out_info);

/** Destroys the graph: its buffers are bound no more. Work of its replays
 * still queued runs as it would have. */
ordo_status_t ordo_graph_destroy(ordo_graph_t *graph);

ORDO_END_DECLS

#endif
