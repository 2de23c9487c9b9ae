/* Blocking waits: ordo_signal_wait, ordo_signal_wait_all, ordo_signal_wait_any.
 *
 * Each wait first checks without side effects, then spins for a short,
 * bounded time (a producer on another core often answers within it), then
 * arms one timepoint per entry that is still pending and sleeps on a futex
 * until a firing decides the wait or the deadline passes. A signal whose
 * producer lets waiters help (a device's completion watcher: the feeders
 * of signal_internal.h) is looked at by the waiting thread itself between
 * short sleeps, so the thread that needs the value sees it without
 * another thread's wake-up in between. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/futex.h"
#include "base/timer_slack.h"
#include "sync/signal_internal.h"
#include "sync/wait_tuning.h"
#include "sync/waiter.h"

/* The timer slack of a thread while it helps (waiter_sleep_helping). */
#define HELP_TIMER_SLACK_NS 1000u

/* How long a wait spins before it sleeps. Long enough to cover a round trip
 * to a thread running on another core, far shorter than a futex sleep and
 * wake (tens of microseconds on a busy machine). */
#define WAIT_SPIN_NS 4000u
static _Atomic uint64_t wait_spin_ns = WAIT_SPIN_NS;

uint64_t ordo__sync_wait_set_spin_ns(uint64_t spin_ns) {
    return atomic_exchange_explicit(&wait_spin_ns, spin_ns, memory_order_relaxed);
}

/* How long a wait spins before it also yields the CPU between checks. */
#define WAIT_SPIN_ALONE_NS 1000u
/* Checks between two reads of the clock. One pause separates two checks:
 * a pause costs up to ~140 cycles on recent x86 cores, so batching pauses
 * would delay noticing a reached value by microseconds. */
#define WAIT_SPIN_BATCH 16
/* Multi-waits of up to this many entries keep their timepoints on the stack. */
#define WAIT_STACK_ENTRIES 64

typedef enum entry_state { ENTRY_PENDING, ENTRY_REACHED, ENTRY_FAILED } entry_state_t;

/* The state of an entry once a wait is under way. Values reached before a
 * failure or a destroy stay reached; a signal destroyed during the wait
 * cancels it (check_points refused signals destroyed before it). */
static entry_state_t entry_check(const ordo_signal_point_t *point, ordo_status_t *out_status) {
    /* A remote signal's truth, not its mirror: a wait sees another
     * party's move at once, and runs no callbacks to bring the mirror up. */
    uint64_t state = signal_state_now(point->signal);
    if ((state & SIGNAL_VALUE_MASK) >= point->value) {
        return ENTRY_REACHED;
    }
    /* A failed signal cannot be failed again, destroyed or not: its failure
     * came first and is the answer. */
    if (state & SIGNAL_FAILED) {
        *out_status = ordo__signal_failure_now(point->signal, NULL);
        return ENTRY_FAILED;
    }
    if (state & SIGNAL_DESTROYED) {
        *out_status = ORDO_ERR_CANCELLED;
        return ENTRY_FAILED;
    }
    return ENTRY_PENDING;
}

/* The outcome of a pass over the entries without blocking. */
typedef struct scan {
    int decided;          /* the wait can return now */
    ordo_status_t status; /* its result when decided */
    size_t index;         /* the deciding entry (any: first reached or failed) */
} scan_t;

static scan_t scan_entries(const ordo_signal_point_t *points, size_t count, int any) {
    scan_t scan = {0, ORDO_OK, count};
    size_t reached = 0;
    for (size_t i = 0; i < count; ++i) {
        ordo_status_t failure = ORDO_OK;
        entry_state_t entry = entry_check(&points[i], &failure);
        if (entry == ENTRY_FAILED || (entry == ENTRY_REACHED && any)) {
            scan.decided = 1;
            scan.status = failure;
            scan.index = i;
            return scan;
        }
        reached += entry == ENTRY_REACHED;
    }
    scan.decided = reached == count;
    return scan;
}

static scan_t spin_entries(const ordo_signal_point_t *points, size_t count, int any,
                           ordo_deadline_t deadline) {
    scan_t scan = scan_entries(points, count, any);
    if (scan.decided) {
        return scan;
    }
    uint64_t spin = atomic_load_explicit(&wait_spin_ns, memory_order_relaxed);
    uint64_t now = ordo_time_now_ns();
    uint64_t until = deadline <= now || spin >= deadline - now ? deadline : now + spin;
    uint64_t yield_after = now + WAIT_SPIN_ALONE_NS;
    for (;;) {
        for (int i = 0; i < WAIT_SPIN_BATCH; ++i) {
            ordo__cpu_relax();
            scan = scan_entries(points, count, any);
            if (scan.decided) {
                return scan;
            }
        }
        now = ordo_time_now_ns();
        if (now >= until) {
            return scan;
        }
        if (now >= yield_after) {
            /* The producer may be waiting for this very CPU (the scheduler
             * likes to put a woken thread next to its waker): let it run. */
            sched_yield();
        }
    }
}

void ordo__waiter_timepoint_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    waiter_t *waiter = ctx;
    _Atomic uint32_t *word = &waiter->word;
    if (waiter->any || status != ORDO_OK) {
        uint64_t index = (uint64_t)(timepoint - waiter->timepoints);
        uint64_t expected = 0;
        atomic_compare_exchange_strong_explicit(&waiter->decided, &expected,
                                                ((index + 1) << 32) | (uint32_t)status,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    uint32_t old = atomic_fetch_add_explicit(word, 1, memory_order_acq_rel);
    if (old & WAITER_SLEEPING) {
        ordo__futex_wake(word, 1);
    }
}

/* Sleeps until stop(word) holds or the deadline passes; returns 0 on the
 * deadline. */
static int waiter_sleep(waiter_t *waiter, int (*stop)(const waiter_t *, uint32_t, uint32_t),
                        uint32_t armed, ordo_deadline_t deadline) {
    for (;;) {
        uint32_t word = atomic_load_explicit(&waiter->word, memory_order_acquire);
        if (stop(waiter, word & WAITER_COUNT_MASK, armed)) {
            return 1;
        }
        if (deadline != ORDO_DEADLINE_NEVER && ordo_time_now_ns() >= deadline) {
            return 0;
        }
        if (!(word & WAITER_SLEEPING)) {
            if (!atomic_compare_exchange_weak_explicit(&waiter->word, &word, word | WAITER_SLEEPING,
                                                       memory_order_acq_rel,
                                                       memory_order_acquire)) {
                continue;
            }
            word |= WAITER_SLEEPING;
        }
        ordo__futex_wait(&waiter->word, word, deadline);
        atomic_fetch_and_explicit(&waiter->word, ~WAITER_SLEEPING, memory_order_relaxed);
    }
}

static int waiter_decided(const waiter_t *waiter, uint32_t fired, uint32_t armed) {
    if (atomic_load_explicit(&waiter->decided, memory_order_acquire) != 0) {
        return 1; /* any: the first firing; all: a failure */
    }
    return !waiter->any && fired == armed;
}

/* Asks the feeders of the entries (signal_internal.h, "Feeders") to look
 * once. Returns -1 if no entry has a feeder that can help, else whether
 * anything moved; *inout_min_ns and *inout_max_ns (0 on the first call)
 * take the first feeder's schedule. */
static int waiter_help(const ordo_signal_point_t *points, size_t count, uint64_t *inout_min_ns,
                       uint64_t *inout_max_ns) {
    int result = -1;
    const signal_feeder_t *last = NULL;
    for (size_t i = 0; i < count; ++i) {
        signal_feeder_t *feeder = ordo__signal_feeder_enter(points[i].signal);
        if (!feeder) {
            continue;
        }
        if (*inout_min_ns == 0) {
            *inout_min_ns = feeder->help_min_ns;
            *inout_max_ns = feeder->help_max_ns;
        }
        if (feeder != last) {                  /* the entries of one device share it */
            int helped = feeder->help(feeder); /* < 0: its producer has stopped */
            if (helped >= 0) {
                result = (result > 0) | (helped != 0);
            }
            last = feeder;
        }
        ordo__signal_feeder_leave(feeder);
    }
    return result;
}

/* waiter_sleep(waiter_decided) for a wait that may help its producers:
 * sleeps in slices, the first help_min_ns long, doubling up to help_max_ns
 * (back to the first after anything moved), and asks the feeders to look
 * after each. The thread's timer slack is tightened meanwhile: the default
 * would stretch every slice by up to 50 us. Without a helping feeder it is
 * one plain sleep. */
static int waiter_sleep_helping(waiter_t *waiter, const ordo_signal_point_t *points, size_t count,
                                uint32_t armed, ordo_deadline_t deadline) {
    uint64_t min_ns = 0, max_ns = 0;
    uint32_t fired = atomic_load_explicit(&waiter->word, memory_order_acquire);
    if (waiter_decided(waiter, fired & WAITER_COUNT_MASK, armed) ||
        waiter_help(points, count, &min_ns, &max_ns) < 0 || min_ns == 0) {
        return waiter_sleep(waiter, waiter_decided, armed, deadline);
    }
    uint64_t slack = ordo__timer_slack_set(HELP_TIMER_SLACK_NS);
    uint64_t slice = min_ns;
    int decided;
    for (;;) {
        uint64_t now = ordo_time_now_ns();
        ordo_deadline_t until = deadline;
        if (deadline == ORDO_DEADLINE_NEVER || (deadline > now && deadline - now > slice)) {
            until = now + slice;
        }
        if ((decided = waiter_sleep(waiter, waiter_decided, armed, until)) != 0 ||
            until == deadline) {
            break;
        }
        int moved = waiter_help(points, count, &min_ns, &max_ns);
        if (moved < 0) { /* the producer is gone: nothing to help */
            decided = waiter_sleep(waiter, waiter_decided, armed, deadline);
            break;
        }
        slice = moved ? min_ns : (slice * 2 > max_ns ? max_ns : slice * 2);
    }
    ordo__timer_slack_restore(slack);
    return decided;
}

static int waiter_drained(const waiter_t *waiter, uint32_t fired, uint32_t expected) {
    (void)waiter;
    return fired == expected;
}

/* The message of a wait that entry i (of count) decided with a failure:
 * destroyed, or failed, with the failure's own message. The state word
 * tells which, not the status: a producer may fail with ORDO_ERR_CANCELLED,
 * the status of a destroy. */
static ordo_status_t entry_refused(ordo_status_t status, const ordo_signal_point_t *points,
                                   size_t count, size_t i, const char *api) {
    const ordo_signal_t *signal = points[i].signal;
    unsigned long long value = (unsigned long long)points[i].value;
    if (!(signal_state_now(signal) & SIGNAL_FAILED)) {
        return count == 1
                   ? ordo__error(status, api, "the signal was destroyed before reaching value %llu",
                                 value)
                   : ordo__error(status, api, "entry %zu (value %llu): its signal was destroyed", i,
                                 value);
    }
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    (void)ordo__signal_failure_now(signal, message);
    int length = (int)strnlen(message, ORDO_SIGNAL_MESSAGE_MAX);
    return count == 1
               ? ordo__error(status, api, "the signal failed before reaching value %llu: %.*s",
                             value, length, message)
               : ordo__error(status, api,
                             "entry %zu (value %llu): its signal failed before reaching it: "
                             "%.*s",
                             i, value, length, message);
}

/* The blocking part of every wait: arms, sleeps, disarms, then reads the
 * outcome. Returns the wait's status and, for wait-any, the deciding
 * index. */
static ordo_status_t wait_blocking(const ordo_signal_point_t *points, size_t count, int any,
                                   ordo_deadline_t deadline, ordo_timepoint_t *timepoints,
                                   size_t *out_index, const char *api) {
    waiter_t waiter = {.timepoints = timepoints, .any = any};
    atomic_init(&waiter.word, 0);
    atomic_init(&waiter.decided, 0);
    memset(timepoints, 0, count * sizeof *timepoints);

    /* References keep every signal alive until the outcome is read, even if
     * another thread destroys one meanwhile. */
    for (size_t i = 0; i < count; ++i) {
        ordo__signal_retain_internal(points[i].signal);
    }
    uint32_t armed = 0;
    for (size_t i = 0; i < count; ++i) {
        ordo_status_t ignored;
        if (!any && entry_check(&points[i], &ignored) == ENTRY_REACHED) {
            continue;
        }
        if (ordo__timepoint_arm_quiet(&timepoints[i], points[i].signal, points[i].value,
                                      ordo__waiter_timepoint_fired, &waiter,
                                      TIMEPOINT_WAITER) != ORDO_OK) {
            /* Destroyed since the spin: perhaps after reaching the value,
             * which then stays reached, or after failing. Whichever, it
             * decides the wait unless a firing did first. */
            ordo_status_t failure = ORDO_OK;
            entry_state_t entry = entry_check(&points[i], &failure);
            if (entry == ENTRY_REACHED && !any) {
                continue;
            }
            uint64_t expected = 0;
            atomic_compare_exchange_strong_explicit(&waiter.decided, &expected,
                                                    ((uint64_t)(i + 1) << 32) | (uint32_t)failure,
                                                    memory_order_relaxed, memory_order_relaxed);
            break;
        }
        ++armed;
        if (any && atomic_load_explicit(&waiter.decided, memory_order_relaxed) != 0) {
            break; /* decided while arming: the rest need no timepoint */
        }
    }
    (void)waiter_sleep_helping(&waiter, points, count, armed, deadline);

    uint32_t prevented = 0;
    for (size_t i = 0; i < count; ++i) {
        if (__atomic_load_n(&timepoints[i].state_, __ATOMIC_ACQUIRE) == TIMEPOINT_IDLE) {
            continue; /* never armed */
        }
        ordo_cancel_result_t result;
        if (ordo_timepoint_cancel(&timepoints[i], &result) == ORDO_OK &&
            result == ORDO_CANCEL_PREVENTED) {
            ++prevented;
        }
    }
    /* Firings that were past stopping still touch the waiter: let them end. */
    waiter_sleep(&waiter, waiter_drained, armed - prevented, ORDO_DEADLINE_NEVER);

    /* The outcome: the first firing that decided, else the signals as they
     * are now (a value may have been raised just before the deadline with
     * its collection still in flight), else the deadline. A signal failed
     * with ORDO_ERR_TIMEOUT decides the wait as any failure does: only the
     * deadline reports count and "deadline passed". */
    ordo_status_t status = ORDO_ERR_TIMEOUT;
    int deadline_passed = 0;
    uint64_t decided = atomic_load_explicit(&waiter.decided, memory_order_acquire);
    if (decided != 0) {
        *out_index = (size_t)(decided >> 32) - 1;
        status = (ordo_status_t)(uint32_t)decided;
    } else {
        scan_t scan = scan_entries(points, count, any);
        *out_index = scan.index;
        deadline_passed = !scan.decided;
        status = scan.decided ? scan.status : ORDO_ERR_TIMEOUT;
    }
    if (deadline_passed) {
        uint64_t at = atomic_load_explicit(&points[0].signal->state, memory_order_relaxed);
        *out_index = count;
        if (count == 1) {
            ordo__error(status, api, "deadline passed waiting for value %llu (at %llu)",
                        (unsigned long long)points[0].value,
                        (unsigned long long)(at & SIGNAL_VALUE_MASK));
        } else {
            ordo__error(status, api, "deadline passed before the %s of %zu entries was satisfied",
                        any ? "wait-any" : "wait-all", count);
        }
    } else if (status != ORDO_OK) {
        entry_refused(status, points, count, *out_index, api);
    }
    for (size_t i = 0; i < count; ++i) {
        ordo__signal_release_internal(points[i].signal);
    }
    return status;
}

static ordo_status_t scan_result(const scan_t *scan, const ordo_signal_point_t *points,
                                 size_t count, size_t *out_index, const char *api) {
    *out_index = scan->index;
    if (scan->status == ORDO_OK) {
        return ORDO_OK;
    }
    return entry_refused(scan->status, points, count, scan->index, api);
}

static ordo_status_t wait_points(const ordo_signal_point_t *points, size_t count, int any,
                                 ordo_deadline_t deadline, size_t *out_index, const char *api) {
    scan_t scan = spin_entries(points, count, any, deadline);
    if (scan.decided) {
        return scan_result(&scan, points, count, out_index, api);
    }
    if (deadline != ORDO_DEADLINE_NEVER && ordo_time_now_ns() >= deadline) {
        *out_index = count;
        return ordo__error(ORDO_ERR_TIMEOUT, api, "deadline passed before the %s was satisfied",
                           any ? "wait-any" : "wait-all");
    }
    ordo_timepoint_t stack_timepoints[WAIT_STACK_ENTRIES];
    ordo_timepoint_t *timepoints = stack_timepoints;
    if (count > WAIT_STACK_ENTRIES) {
        timepoints = ordo__alloc(count * sizeof *timepoints, 0);
        if (!timepoints) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate %zu timepoints",
                               count);
        }
    }
    ordo_status_t st = wait_blocking(points, count, any, deadline, timepoints, out_index, api);
    if (timepoints != stack_timepoints) {
        ordo__dealloc(timepoints, count * sizeof *timepoints, 0);
    }
    return st;
}

/* Why check_points refused a point: "entry i: ..." in a multi-wait, just
 * the reason in a single wait (index -1). */
static ordo_status_t point_refused(const ordo_signal_point_t *point, long long index,
                                   const char *api) {
    char where[32] = "";
    if (index >= 0) {
        snprintf(where, sizeof where, "entry %lld: ", index);
    }
    ordo_status_t st = ordo__signal_check(point->signal, api);
    if (st != ORDO_OK) {
        return ordo__error(st, api, "%s%s", where,
                           point->signal ? "not a live signal" : "signal is NULL");
    }
    if (point->value > ORDO_SIGNAL_VALUE_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%svalue %llu exceeds ORDO_SIGNAL_VALUE_MAX",
                           where, (unsigned long long)point->value);
    }
    return ordo__error(ORDO_ERR_DESTROYED, api, "%ssignal %p was destroyed", where,
                       (const void *)point->signal);
}

static ordo_status_t check_points(const ordo_signal_point_t *points, size_t count,
                                  const char *api) {
    if (!points) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "points is NULL");
    }
    if (count == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "count is 0");
    }
    if (count > ORDO_SIGNAL_WAIT_MAX) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api,
                           "count %zu exceeds ORDO_SIGNAL_WAIT_MAX (%u)", count,
                           ORDO_SIGNAL_WAIT_MAX);
    }
    for (size_t i = 0; i < count; ++i) {
        const ordo_signal_t *signal = points[i].signal;
        int refused =
            ordo__signal_check(signal, api) != ORDO_OK || points[i].value > ORDO_SIGNAL_VALUE_MAX ||
            (atomic_load_explicit(&signal->state, memory_order_relaxed) & SIGNAL_DESTROYED);
        if (refused) {
            return point_refused(&points[i], count == 1 ? -1 : (long long)i, api);
        }
    }
    return ORDO_OK;
}

/* A multi-wait arms a timepoint on each point: a remote handle whose
 * mirror nobody feeds is refused. (A single wait on a remote signal sleeps
 * on its truth, and needs no feeding.) */
static ordo_status_t check_points_armable(const ordo_signal_point_t *points, size_t count,
                                          const char *api) {
    for (size_t i = 0; i < count; ++i) {
        ORDO_RETURN_IF_ERROR(ordo__signal_armable(points[i].signal, api));
    }
    return ORDO_OK;
}

/* A single wait on a remote signal: after the spin, it sleeps on the truth
 * itself (ops->sleep), woken by the party that moves it, with no hop
 * through the remote's owner. A reference keeps the handle (and the
 * remote) alive while it sleeps; a destroy of the handle interrupts it. */
static ordo_status_t wait_remote(const ordo_signal_point_t *point, ordo_deadline_t deadline,
                                 const char *api) {
    signal_remote_t *remote = point->signal->remote;
    scan_t scan =
        remote->ops->sleep_looks ? scan_entries(point, 1, 1) : spin_entries(point, 1, 1, deadline);
    size_t index;
    if (scan.decided) {
        return scan_result(&scan, point, 1, &index, api);
    }
    ordo__signal_retain_internal(point->signal);
    ordo_status_t status = ORDO_ERR_TIMEOUT;
    for (;;) {
        uint32_t token = remote->ops->sleep_token(remote);
        scan = scan_entries(point, 1, 1);
        if (scan.decided) {
            status = scan_result(&scan, point, 1, &index, api);
            break;
        }
        if (deadline != ORDO_DEADLINE_NEVER && ordo_time_now_ns() >= deadline) {
            uint64_t at = signal_state_now(point->signal) & SIGNAL_VALUE_MASK;
            status = ordo__error(ORDO_ERR_TIMEOUT, api,
                                 "deadline passed waiting for value %llu (at %llu)",
                                 (unsigned long long)point->value, (unsigned long long)at);
            break;
        }
        remote->ops->sleep(remote, token, point->value, deadline);
    }
    ordo__signal_release_internal(point->signal);
    return status;
}

/* Kept out of line so the reached case below needs no stack frame. */
__attribute__((noinline)) static ordo_status_t wait_one_slow(ordo_signal_t *signal, uint64_t value,
                                                             ordo_deadline_t deadline) {
    ordo_signal_point_t point = {signal, value};
    ORDO_RETURN_IF_ERROR(check_points(&point, 1, "ordo_signal_wait"));
    if (signal->remote) {
        return wait_remote(&point, deadline, "ordo_signal_wait");
    }
    size_t index;
    return wait_points(&point, 1, 1, deadline, &index, "ordo_signal_wait");
}

ordo_status_t ordo_signal_wait(ordo_signal_t *signal, uint64_t value, ordo_deadline_t deadline) {
    if (ORDO_LIKELY(signal && signal->magic == ORDO_SIGNAL_MAGIC)) {
        uint64_t state = atomic_load_explicit(&signal->state, memory_order_acquire);
        /* Reached implies value <= ORDO_SIGNAL_VALUE_MAX. */
        if (ORDO_LIKELY((state & SIGNAL_VALUE_MASK) >= value && !(state & SIGNAL_DESTROYED))) {
            return ORDO_OK;
        }
    }
    return wait_one_slow(signal, value, deadline);
}

ordo_status_t ordo_signal_wait_all(const ordo_signal_point_t *points, size_t count,
                                   ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(check_points(points, count, __func__));
    ORDO_RETURN_IF_ERROR(check_points_armable(points, count, __func__));
    size_t index;
    return wait_points(points, count, 0, deadline, &index, __func__);
}

ordo_status_t ordo_signal_wait_any(const ordo_signal_point_t *points, size_t count,
                                   ordo_deadline_t deadline, size_t *out_index) {
    if (!out_index) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_index is NULL");
    }
    *out_index = count;
    ORDO_RETURN_IF_ERROR(check_points(points, count, __func__));
    ORDO_RETURN_IF_ERROR(check_points_armable(points, count, __func__));
    return wait_points(points, count, 1, deadline, out_index, __func__);
}
