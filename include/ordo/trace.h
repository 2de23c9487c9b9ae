/** @file
 * ordo/trace.h - timeline traces of what ordo does.
 *
 * While tracing is on, ordo records what its streams run and what it
 * inserts between them, and ordo_trace_stop writes it as Chrome trace-event
 * JSON (open it in https://ui.perfetto.dev or chrome://tracing):
 * - one track per stream (named after the stream, with its
 *   ordo_stream_set_name name if it has one, and its device), with a
 *   slice for each piece of work it ran (host tasks, waits);
 * - a flow arrow for every cross-stream wait a tracker inserted (each wait
 *   its waits_emitted metric counts, a graph replay's included; a native
 *   replay's recorded waits are edges inside the device's graph, not
 *   waits), from the point the origin stream signalled to the point the
 *   waiting stream passed its wait, where both ends were drawn;
 * - an instant for every signal a stream reached;
 * - counters of memory in use, per pool;
 * - slices and instants the program adds itself (ordo_trace_slice_begin
 *   and friends) on its threads' tracks.
 *
 * Recording appends to a per-thread buffer: no lock, no allocation (a
 * thread's first record aside); every few thousand events the thread takes
 * a new chunk of the room start mapped. When tracing is off, each hook
 * costs one relaxed load and a predicted branch.
 *
 * Thread-safety: every call may be made from any thread at any time (start
 * and stop are serialized; records made while tracing is off are dropped).
 * A child forked during a trace goes on with it alone: it may stop it (the
 * events of a thread that was recording at the fork are left out) or start
 * its own.
 */
#ifndef ORDO_TRACE_H
#define ORDO_TRACE_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** The settings of a trace. */
typedef struct ordo_trace_config {
    /** Events kept, roughly: recording threads take room in chunks of
     * 4096 events, so a trace keeps up to this many rounded up to whole
     * chunks; later events are dropped and counted. 0: the default, 4 Mi
     * events (about 230 MiB). ordo_trace_start maps room for them all and
     * touches the first 64 MiB, so that recording does not fault memory
     * in; stop gives it back. */
    uint64_t max_events;
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_trace_config_t;

/** What a trace held (ordo_trace_stop). */
typedef struct ordo_trace_stats {
    uint64_t events;  /**< recorded */
    uint64_t dropped; /**< beyond max_events */
    uint64_t flows;   /**< tracker waits (waits_emitted) written as flow arrows */
} ordo_trace_stats_t;

/** The defaults: max_events 4 Mi, flags 0. */
ordo_status_t ordo_trace_config_default(ordo_trace_config_t *out_config);

/** Starts recording (config may be NULL: the defaults). ORDO_ERR_BUSY if already on;
 * ORDO_ERR_OUT_OF_MEMORY (or ORDO_ERR_OUT_OF_RANGE for an absurd
 * max_events) when the room for max_events cannot be mapped. */
ordo_status_t ordo_trace_start(const ordo_trace_config_t *config);

/** Stops recording and writes the trace to path (NULL: discards it). The
 * recorded events are freed either way. out_stats may be NULL; it is
 * filled even when writing the trace fails.
 * ORDO_ERR_INVALID_ARGUMENT if tracing is off or path cannot be opened;
 * ORDO_ERR_INTERNAL if the trace could not be written in full (a full
 * disk: the file is left cut short); ORDO_ERR_OUT_OF_MEMORY if the export
 * cannot allocate (short of room for the events themselves, the file is
 * still written, valid, without what needed the memory: program threads'
 * slices, or the flow arrows, as the message says). Tracing is off after
 * every one of these. */
ordo_status_t ordo_trace_stop(const char *path, ordo_trace_stats_t *out_stats);

/** Non-zero in *out_on while recording. */
ordo_status_t ordo_trace_is_on(bool *out_on);

/** Opens a slice named name. The program's own marks, on the calling
 * thread's track. name must stay valid until ordo_trace_stop (a string
 * literal, typically). Slices nest; each begin needs its end on the same
 * thread. An end whose begin came before the trace started is ignored;
 * slices open when the trace stops end with it. */
ordo_status_t ordo_trace_slice_begin(const char *name);

/** Ends the calling thread's innermost open slice (see ordo_trace_slice_begin). */
ordo_status_t ordo_trace_slice_end(void);

/** An instant named name on the calling thread's track. */
ordo_status_t ordo_trace_instant(const char *name);

/** A sample of the counter named name: value from now on. */
ordo_status_t ordo_trace_counter(const char *name, int64_t value);

ORDO_END_DECLS

#endif
