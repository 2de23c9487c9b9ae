/* Internal: the tracker's frontiers, read by index.
 *
 * The tracker numbers the streams it orders 0..count-1 as they attach.
 * Each stream t keeps a frontier: per origin stream s, the highest point of
 * s that t has waited for, directly or through the waits of others (a
 * vector clock). Work enqueued on t after that runs after s's point.
 * Besides the tracker itself, the memory pools decide reuse from them.
 *
 * Static inline: these are on the submission and allocation paths, where
 * each is one or two loads. All under the tracker's lock. */
#ifndef ORDO_CORE_FRONTIER_H
#define ORDO_CORE_FRONTIER_H

#include <stdint.h>

#include "core/tracker_internal.h"

/* How many streams the tracker orders (their indices are below it). */
static inline uint32_t frontier_stream_count(const ordo_tracker_t *tracker) {
    return tracker->stream_count;
}

/* The stream of index s. */
static inline ordo_stream_t *frontier_stream(const ordo_tracker_t *tracker, uint32_t s) {
    return tracker->streams[s]->stream;
}

/* The timeline stream s's recorded points are signalled on. */
static inline ordo_signal_t *frontier_timeline(const ordo_tracker_t *tracker, uint32_t s) {
    return tracker->streams[s]->timeline;
}

/* Stream t's whole frontier, indexed by origin stream (entries past the
 * stream count are 0). */
static inline const uint64_t *frontier_of(const ordo_tracker_t *tracker, uint32_t t) {
    return tracker->streams[t]->frontier;
}

/* Non-zero when stream t has waited for s's point `point` (or a later one),
 * so its new work runs after it. Says nothing for s == t. */
static inline int frontier_knows(const ordo_tracker_t *tracker, uint32_t t, uint32_t s,
                                 uint64_t point) {
    return tracker->streams[t]->frontier[s] >= point;
}

/* Non-zero when stream t's new work runs after s's point `point`: s is t
 * itself (a stream runs in order) or t's frontier knows the point. */
static inline int frontier_covers(const ordo_tracker_t *tracker, uint32_t t, uint32_t s,
                                  uint64_t point) {
    return s == t || frontier_knows(tracker, t, s, point);
}

/* Stream t learns what a wait on origin's record orders: every entry of
 * the record's frontier, and the record's point itself. */
static inline void frontier_learn(ordo_tracker_t *tracker, uint32_t t, uint32_t origin,
                                  const tracker_record_t *record) {
    uint64_t *frontier = tracker->streams[t]->frontier;
    for (uint32_t s = 0; s < tracker->stream_count; ++s) {
        if (frontier[s] < record->frontier[s]) {
            frontier[s] = record->frontier[s];
        }
    }
    if (frontier[origin] < record->point) {
        frontier[origin] = record->point;
    }
}

#endif
