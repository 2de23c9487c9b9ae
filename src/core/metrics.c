/* One snapshot over the components' own counters, and its text form. */
#include "ordo/metrics.h"

#include <string.h>

#include "base/error.h"
#include "base/text.h"

ordo_status_t ordo_metrics_snapshot(const ordo_metrics_sources_t *sources,
                                    ordo_metrics_t *out_metrics) {
    /* Refusals clear *out_metrics; a snapshot is built apart and copied
     * whole, so the success path writes it once. */
    if (!sources || !out_metrics) {
        if (out_metrics) {
            memset(out_metrics, 0, sizeof *out_metrics);
        }
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           sources ? "out_metrics" : "sources");
    }
    ordo_metrics_t m;
    memset(&m, 0, sizeof m);
    ordo_status_t st = ORDO_OK;
    if (sources->device) {
        st = ordo_device_event_pool_stats(sources->device, ORDO_EVENT_PLAIN, &m.events[0]);
        if (st == ORDO_OK) {
            ordo_device_info_t info;
            st = ordo_device_info(sources->device, &info);
            if (st == ORDO_OK && info.timing_events) {
                st = ordo_device_event_pool_stats(sources->device, ORDO_EVENT_TIMING, &m.events[1]);
            }
        }
        m.has_device = 1;
    }
    if (st == ORDO_OK && sources->coord) {
        st = ordo_coord_metrics(sources->coord, &m.coord);
        m.has_coord = 1;
    }
    if (st == ORDO_OK && sources->waiter) {
        st = ordo_waiter_metrics(sources->waiter, &m.waiter);
        m.has_waiter = 1;
    }
    if (st == ORDO_OK && sources->tracker) {
        st = ordo_tracker_metrics(sources->tracker, &m.tracker);
        m.has_tracker = 1;
    }
    if (st != ORDO_OK) {
        memset(out_metrics, 0, sizeof *out_metrics);
        /* The component said what was wrong; this call is named first. */
        return ordo__error(st, __func__, "%s", ordo_error_message());
    }
    *out_metrics = m;
    return ORDO_OK;
}

static unsigned long long u(uint64_t v) {
    return (unsigned long long)v;
}

ordo_status_t ordo_metrics_format(const ordo_metrics_t *m, char *text, size_t capacity,
                                  size_t *out_length) {
    if (out_length) {
        *out_length = 0;
    }
    if (!m || !out_length || (capacity && !text)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           !m            ? "metrics"
                           : !out_length ? "out_length"
                                         : "text");
    }
    size_t length = 0;
    if (capacity) {
        text[0] = '\0';
    }
    if (m->has_coord) {
        const ordo_coord_metrics_t *c = &m->coord;
        ordo__text_append(
            text, capacity, &length,
            "operations: %llu registered, %llu completed, %llu failed, %llu live, %llu "
            "dispatched; %llu deadlocks refused; waits %llu emitted, %llu elided; coordination "
            "%llu ns per operation\n",
            u(c->registered), u(c->completed), u(c->failed), u(c->live), u(c->dispatched),
            u(c->deadlocks_refused), u(c->waits_emitted), u(c->waits_elided),
            u(c->coordination_ns_per_op));
    }
    if (m->has_tracker) {
        const ordo_tracker_metrics_t *k = &m->tracker;
        ordo__text_append(
            text, capacity, &length,
            "ordering: %llu submissions; waits %llu emitted, %llu elided; %llu points "
            "recorded; %llu buffers live; reclamations %llu pending, %llu done\n",
            u(k->submissions), u(k->waits_emitted), u(k->waits_elided), u(k->points_recorded),
            u(k->buffers_live), u(k->reclamations_pending), u(k->reclamations_done));
    }
    if (m->has_waiter) {
        const ordo_waiter_metrics_t *w = &m->waiter;
        ordo__text_append(
            text, capacity, &length,
            "async waits: %llu registered, %llu pending, %llu fired (%llu with a failure), "
            "%llu timed out, %llu cancelled, %llu aborted, %llu running\n",
            u(w->registered), u(w->pending), u(w->fired), u(w->failed), u(w->timed_out),
            u(w->cancelled), u(w->aborted), u(w->running));
    }
    if (m->has_device) {
        static const char *const kinds[2] = {"plain", "timing"};
        for (int k = 0; k < 2; ++k) {
            const ordo_event_pool_stats_t *e = &m->events[k];
            size_t pooled = e->available + e->in_use;
            ordo__text_append(
                text, capacity, &length,
                "%s events: %zu in use of %zu (%.0f%% utilised, high water %zu); %llu "
                "acquired, %llu created\n",
                kinds[k], e->in_use, pooled,
                pooled ? 100.0 * (double)e->in_use / (double)pooled : 0.0, e->high_water,
                u(e->acquires), u(e->created_total));
        }
    }
    *out_length = length;
    if (capacity && length >= capacity) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "the text needs %zu bytes and a terminator; %zu given", length,
                           capacity);
    }
    return ORDO_OK;
}
