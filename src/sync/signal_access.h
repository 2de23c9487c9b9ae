/* Internal: what the layers above sync may use of a timeline signal. The
 * signal's representation (its state word, its lock, its timepoint list)
 * stays private to src/sync (sync/signal_internal.h, which the other
 * layers' include views do not hold): they read a signal's state through
 * the functions below, which say which memory order they give.
 */
#ifndef ORDO_SYNC_SIGNAL_ACCESS_H
#define ORDO_SYNC_SIGNAL_ACCESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/timepoint.h"

/* Timepoint kinds (ordo_timepoint_t.kind_): how a due one is run. */
enum {
    TIMEPOINT_USER = 0,   /* a callback: run after waiters, in order, never nested */
    TIMEPOINT_WAITER = 1, /* a blocked wait's wake-up: run at once, before the rest */
    TIMEPOINT_LINK = 2,   /* a link: entered while still DUE (ordo__link_timepoint_fired) */
};

/* A producer that observes a signal's value somewhere else (see "Feeders"
 * in sync/signal_internal.h). */
typedef struct signal_feeder {
    void (*wanted)(struct signal_feeder *feeder);
    /* Optional: looks once on the calling (waiting) thread; returns 1 if
     * anything moved, 0 if not, -1 if it cannot help any more. */
    int (*help)(struct signal_feeder *feeder);
    uint64_t help_min_ns;
    uint64_t help_max_ns;
    _Atomic uint32_t helpers; /* futex word: references from enter */
} signal_feeder_t;

/* A list of due timepoints, linked through next_, each with status_ set. */
typedef struct due_list {
    ordo_timepoint_t *head;
    ordo_timepoint_t *tail;
} due_list_t;

/* A signal's observable state, read in one load. */
typedef struct signal_view {
    uint64_t value; /* reached (frozen at the failure when failed) */
    bool failed;    /* failed: ordo__signal_failure gives its status and message */
    bool ended;     /* failed or destroyed: the value will not move again */
} signal_view_t;

/* The readers of the state word are inline: they sit on the streams' hot
 * paths, where a call into this layer per operation showed (an all-to-all
 * barrier ran 10% slower through out-of-line readers). The word's place
 * and bits are sync's, stated here only for these readers;
 * signal_internal.h defines its SIGNAL_* bits from them and checks the
 * place. No code outside src/sync reads the word but through them. */
#define ORDO__SIGNAL_REFS_OFFSET 4
#define ORDO__SIGNAL_STATE_OFFSET 8
#define ORDO__SIGNAL_FAILED_BIT ((uint64_t)1 << 63)
#define ORDO__SIGNAL_DESTROYED_BIT ((uint64_t)1 << 62)

static inline _Atomic uint64_t *signal_state_word(const ordo_signal_t *signal) {
    return (_Atomic uint64_t *)((uintptr_t)signal + ORDO__SIGNAL_STATE_OFFSET);
}

static inline signal_view_t signal_view_of(uint64_t word) {
    return (signal_view_t){
        .value = word & ORDO_SIGNAL_VALUE_MAX,
        .failed = (word & ORDO__SIGNAL_FAILED_BIT) != 0,
        .ended = (word & (ORDO__SIGNAL_FAILED_BIT | ORDO__SIGNAL_DESTROYED_BIT)) != 0,
    };
}

/* The state, acquire: what the producers did before the value (or the
 * failure) they published is visible to the caller. */
static inline signal_view_t ordo__signal_view(const ordo_signal_t *signal) {
    return signal_view_of(atomic_load_explicit(signal_state_word(signal), memory_order_acquire));
}

/* The state as the latest write in the word's modification order left it,
 * acquire (a read-modify-write: for a check that must not miss a raise
 * ordered before it by another read-modify-write of the caller's). */
static inline signal_view_t ordo__signal_view_latest(ordo_signal_t *signal) {
    return signal_view_of(
        atomic_fetch_or_explicit(signal_state_word(signal), 0, memory_order_acquire));
}

/* The value reached, acquire (ordo__signal_view(signal).value). */
static inline uint64_t ordo__signal_reached(const ordo_signal_t *signal) {
    return atomic_load_explicit(signal_state_word(signal), memory_order_acquire) &
           ORDO_SIGNAL_VALUE_MAX;
}

/* The signal's number in traces (unique in the process, never reused). */
uint64_t ordo__signal_trace_id(const ordo_signal_t *signal);

/* Whether the signal was destroyed (relaxed: a hint for a refusal). */
static inline bool ordo__signal_destroyed(const ordo_signal_t *signal) {
    return (atomic_load_explicit(signal_state_word(signal), memory_order_relaxed) &
            ORDO__SIGNAL_DESTROYED_BIT) != 0;
}

/* The failure of a signal the caller saw failed (a view with failed set):
 * its status, and its message (stable from then on, while the caller holds
 * a reference). */
ordo_status_t ordo__signal_failure(const ordo_signal_t *signal, const char **out_message);

/* Its message alone (ordo__signal_failure's *out_message). */
const char *ordo__signal_failure_message(const ordo_signal_t *signal);

/* Validates a handle for api; ORDO_OK or an error with a message. */
ordo_status_t ordo__signal_check(const ordo_signal_t *signal, const char *api);

/* Runs the callbacks of a due list (outside every lock). */
void ordo__timepoints_run(due_list_t *due);

/* Non-zero while this thread runs timepoint callbacks (due ones are then
 * queued behind the running one, not run). */
int ordo__timepoints_running_here(void);

/* A thread that must not run others' callbacks (a waiting thread that
 * helps a device's watcher complete points: a callback there could need a
 * lock the waiter holds) diverts them: ordo__timepoints_run still wakes blocked
 * waiters at once, and hands every other due timepoint to the sink, whose
 * owner runs them later with ordo__timepoints_run on a thread of its own. */
typedef struct timepoint_sink {
    /* Takes the list (linked through next_, each with status_ set). */
    void (*take)(struct timepoint_sink *sink, due_list_t *due);
} timepoint_sink_t;

/* Sets the calling thread's sink (NULL: run callbacks here again) and
 * returns the one it replaces. */
timepoint_sink_t *ordo__timepoints_divert(timepoint_sink_t *sink);

/* ORDO_OK, or the status (and message, naming api) refusing timepoints on
 * a remote handle whose mirror its owner does not feed (a shared signal's
 * handle copied into a forked child): every wait that arms one checks it
 * first. */
ordo_status_t ordo__signal_armable(const ordo_signal_t *signal, const char *api);

/* The outcome of a timepoint a cancel found due or fired (too late): set
 * under its signal's lock when it became due, read under it here. */
ordo_status_t ordo__timepoint_due_status(ordo_timepoint_t *timepoint);

/* Arms a validated timepoint of kind (TIMEPOINT_*); no error message on
 * failure (ORDO_ERR_DESTROYED, or ordo__signal_armable's status). */
ordo_status_t ordo__timepoint_arm_quiet(ordo_timepoint_t *timepoint, ordo_signal_t *signal,
                                        uint64_t value, ordo_timepoint_fn fn, void *ctx, int kind);

/* Takes one reference, or n at once; each is given back with
 * ordo__signal_release_internal. */
static inline void ordo__signal_retain_many(ordo_signal_t *signal, uint32_t n) {
    atomic_fetch_add_explicit((_Atomic uint32_t *)((uintptr_t)signal + ORDO__SIGNAL_REFS_OFFSET), n,
                              memory_order_relaxed);
}
static inline void ordo__signal_retain_internal(ordo_signal_t *signal) {
    ordo__signal_retain_many(signal, 1);
}
void ordo__signal_release_internal(ordo_signal_t *signal);

/* For a stream whose wait on signal ended short of its value (the signal
 * failed or was destroyed): the status the stream fails with, and in what
 * (capacity > 0) the message, with the failure's own message. */
ordo_status_t ordo__signal_wait_ended(const ordo_signal_t *signal, char *what, size_t capacity);

/* How ordo__signal_wait_ended's text begins, and every other text of a
 * failure a wait passes on (the CUDA watcher's, when the stream producing
 * a device-side wait's value failed): a stream whose failure reads so
 * failed only by waiting for work that failed elsewhere. */
#define ORDO__WAIT_ENDED_TEXT "waited-on signal "
/* The failures a wait passes on: a signal that failed (then its status),
 * a device-side wait whose value's stream failed. */
#define ORDO__WAIT_FAILED_TEXT ORDO__WAIT_ENDED_TEXT "failed: "
#define ORDO__WAIT_UNREACHED_TEXT ORDO__WAIT_ENDED_TEXT "was not reached: its stream failed: "
/* How a link's target failed by its source reads. */
#define ORDO__LINK_FAILED_TEXT "linked source failed: "

/* The text of the failure where it began, inside message: past the
 * prefixes each hop that passed it on put before it (a wait's, a
 * link's). Each hop puts one prefix before this origin, not before the
 * last hop's text, so a failure keeps its own words across a pipeline of
 * any length. */
const char *ordo__failure_origin(const char *message);

/* Hangs feeder on the signal (replacing another one, which then hears of
 * no more waits). */
void ordo__signal_feeder_set(ordo_signal_t *signal, signal_feeder_t *feeder);

/* Takes feeder off the signal if it is the one hung there; once this
 * returns, feeder->wanted is not running for this signal and will not be
 * called for it. */
void ordo__signal_feeder_clear(ordo_signal_t *signal, signal_feeder_t *feeder);

/* The signal's feeder, if it can help, with a reference the caller gives
 * back with ordo__signal_feeder_leave; NULL otherwise. */
signal_feeder_t *ordo__signal_feeder_enter(ordo_signal_t *signal);
void ordo__signal_feeder_leave(signal_feeder_t *feeder);

/* Whether a timepoint (a wait, a link, a stream's wait) is armed on the
 * signal, and the smallest value one is armed for (*out_value; only when
 * it returns true). Relaxed: a hint for schedules, not an ordering. */
bool ordo__signal_wanted_value(const ordo_signal_t *signal, uint64_t *out_value);

/* Sets the name without the checks (name may be NULL). */
void ordo__signal_name_set_internal(ordo_signal_t *signal, const char *name);

/* Copies the name, or the address when none, into out (capacity > 0). */
void ordo__signal_name_get_internal(ordo_signal_t *signal, char *out, size_t capacity);

#endif
