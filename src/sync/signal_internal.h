/* Internal: the timeline signal's representation, shared by the files of
 * the sync layer (signal, timepoint dispatch, waits, links).
 *
 * The whole observable state is one atomic word: the value in the low 62
 * bits, FAILED and DESTROYED in the top two. Raising the value is a CAS
 * loop that refuses to touch a word with either flag set, so a failure
 * freezes the value. Armed timepoints sit in a list sorted by value under
 * the signal's mutex; next_wake mirrors the smallest armed value so that a
 * producer decides without the lock whether anyone needs waking.
 *
 * The wake-up protocol (no lost wake-ups): a producer publishes the value
 * with a seq_cst CAS, then reads next_wake (seq_cst). A consumer arming a
 * timepoint publishes next_wake (seq_cst), then re-reads the value (seq_cst)
 * and dispatches itself if it is reached. Of the two stores, one comes first
 * in the single total order, so at least one side sees the other's.
 *
 * Locks: each signal has one mutex; no code holds two signal mutexes at
 * once, and no callback runs under one.
 */
#ifndef ORDO_SYNC_SIGNAL_INTERNAL_H
#define ORDO_SYNC_SIGNAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/error.h"
#include "ordo/signal.h"
#include "ordo/timepoint.h"

#define ORDO_SIGNAL_MAGIC 0x5349474eu /* "SIGN" */
#define ORDO_SIGNAL_DEAD 0xdeadbeefu

#define SIGNAL_FAILED ((uint64_t)1 << 63)
#define SIGNAL_DESTROYED ((uint64_t)1 << 62)
#define SIGNAL_FLAGS (SIGNAL_FAILED | SIGNAL_DESTROYED)
#define SIGNAL_VALUE_MASK ORDO_SIGNAL_VALUE_MAX
#define SIGNAL_NO_WAKE UINT64_MAX

/* Timepoint states (ordo_timepoint_t.state_). */
enum {
    TIMEPOINT_IDLE = 0,  /* never armed, or cancelled */
    TIMEPOINT_ARMED = 1, /* in its signal's list */
    TIMEPOINT_DUE = 2,   /* taken off the list; its callback runs or has run */
};

struct ordo_signal {
    uint32_t magic;
    _Atomic uint32_t refs;
    _Atomic uint64_t state;
    _Atomic uint64_t next_wake;
    pthread_mutex_t lock;
    /* Under lock: armed timepoints, ascending by value. */
    ordo_timepoint_t *head;
    ordo_timepoint_t *tail;
    /* Written once, under lock, before FAILED is published. */
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
};

/* A list of due timepoints, linked through next_, each with status_ set. */
typedef struct due_list {
    ordo_timepoint_t *head;
    ordo_timepoint_t *tail;
} due_list_t;

/* Validates a handle for api; ORDO_OK or an error with a message. */
ordo_status_t signal_check(const ordo_signal_t *signal, const char *api);

/* Returns the status the failed signal carries, after state showed FAILED. */
ordo_status_t signal_failure_status(const ordo_signal_t *signal);

/* Under lock: moves every armed timepoint with value <= reached onto due
 * (status ORDO_OK); all remaining ones too when rest != ORDO_OK, with
 * that status. Refreshes next_wake. */
void signal_collect_locked(ordo_signal_t *signal, uint64_t reached, ordo_status_t rest,
                           due_list_t *due);

/* Runs the callbacks of a due list (outside every lock). */
void timepoints_run(due_list_t *due);

/* Takes the lock and runs whatever became due at the current value. */
void signal_dispatch_reached(ordo_signal_t *signal);

static inline void signal_retain_internal(ordo_signal_t *signal) {
    atomic_fetch_add_explicit(&signal->refs, 1, memory_order_relaxed);
}

void signal_release_internal(ordo_signal_t *signal);

#endif
