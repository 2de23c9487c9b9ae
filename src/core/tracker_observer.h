/* Internal: a hook that sees every wait a tracker emits, for tests and
 * debugging (the randomized tracker tests check each submission's waits
 * against a model through it). Not part of the public API. */
#ifndef ORDO_CORE_TRACKER_OBSERVER_H
#define ORDO_CORE_TRACKER_OBSERVER_H

#include <stdint.h>

#include "ordo/tracker.h"

/* Called for every wait the tracker emits: waiting waits until origin
 * reaches origin_point (the recorded point that covers needed_point). Runs
 * on the submitting thread. */
typedef void (*ordo__tracker_wait_observer_fn)(void *ctx, ordo_stream_t *waiting,
                                               ordo_stream_t *origin, uint64_t origin_point,
                                               uint64_t needed_point);

/* Sets the observer (NULL: none). Set it while no submission runs. */
ordo_status_t ordo__tracker_set_wait_observer(ordo_tracker_t *tracker,
                                              ordo__tracker_wait_observer_fn observer, void *ctx);

#endif
