/* A reference happens-before model for trackers, independent of the
 * tracker's own vector clocks: every submission is a node, program order
 * and each wait the tracker reports are edges, and reachability is kept as
 * explicit ancestor sets. The model checks that (1) every cross-stream
 * hazard is ordered, (2) no emitted wait was already implied by what its
 * stream knew and (3) every wait is needed: without it, the submission's
 * other waits would leave a hazard unordered (the waits of a submission
 * are a minimal cover). */
#ifndef ORDO_TEST_TRACKER_MODEL_H
#define ORDO_TEST_TRACKER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ordo/tracker.h"

typedef struct model model_t;

typedef struct model_access {
    uint32_t buffer;
    ordo_access_mode_t mode;
} model_access_t;

model_t *model_create(uint32_t streams, uint32_t max_submissions);
void model_free(model_t *model);

/* Submission in program order: begin, then the waits the tracker emits for
 * it (model_on_wait, stream indices), then end. */
void model_begin(model_t *model, uint32_t stream, const model_access_t *accesses, size_t count);
void model_on_wait(model_t *model, uint32_t waiting, uint32_t origin, uint64_t origin_point,
                   uint64_t needed_point);
void model_end(model_t *model);
/* The submission was refused after begin (and perhaps some waits): it is
 * not a node, but the waits it emitted order later work on its stream. */
void model_cancel(model_t *model);
/* Checks only the waits (well-formed, none redundant), not that every
 * hazard was ordered: for programs whose streams fail. */
void model_skip_hazards(model_t *model);

/* Violations found so far; the first one's description. */
size_t model_violations(const model_t *model, const char **out_first);

#endif
