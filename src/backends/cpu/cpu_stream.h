/* Internal: CPU streams, each an in-order worker thread. */
#ifndef ORDO_BACKENDS_CPU_STREAM_H
#define ORDO_BACKENDS_CPU_STREAM_H

#include "hal/hal.h"

/* CPU stream priorities run from CPU_PRIORITY_GREATEST to 0; a more urgent
 * stream's worker gets a lower nice value where the process may set it. */
#define CPU_PRIORITY_GREATEST (-2)

ordo_status_t ordo__cpu_stream_init(ordo_stream_t *stream);
void ordo__cpu_stream_fini(ordo_stream_t *stream);
int ordo__cpu_stream_on_own_thread(const ordo_stream_t *stream);
ordo_status_t ordo__cpu_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx);
ordo_status_t ordo__cpu_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
ordo_status_t ordo__cpu_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);
ordo_status_t ordo__cpu_stream_signal_adopt(ordo_stream_t *stream, ordo_signal_t *signal,
                                            uint64_t value);
ordo_status_t ordo__cpu_stream_wait_adopt(ordo_stream_t *stream, ordo_signal_t *signal,
                                          uint64_t value);
ordo_status_t ordo__cpu_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline);
ordo_status_t ordo__cpu_stream_status(ordo_stream_t *stream);
ordo_status_t ordo__cpu_stream_failure(const ordo_stream_t *stream);
ordo_status_t ordo__cpu_stream_event_record(ordo_event_t *event, ordo_stream_t *stream);
void ordo__cpu_stream_snapshot(ordo_stream_t *stream, hal_stream_snapshot_t *snapshot);
void ordo__cpu_stream_progress(ordo_stream_t *stream, ordo_signal_t **out_progress,
                               const _Atomic uint64_t **out_submitted);

#endif
