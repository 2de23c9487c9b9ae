/* Internal: the page a shared signal lives in, and its protocol.
 *
 * The page (ORDO_SHARED_SIGNAL_SIZE bytes) is mapped by every process that
 * has the signal open; no pointer is stored in it. Layout, version 2:
 *
 *   0    magic        "ORDOSGNL" (written last by the creator, release)
 *   8    version      ORDO_SHARED_SIGNAL_LAYOUT_VERSION
 *   12   size         ORDO_SHARED_SIGNAL_SIZE
 *   64   state        bit 63 FAILED, bit 61 SLEEPERS, bits 0-59 the value
 *   72   wake_seq     futex word: moved after every change sleepers await
 *   76   registry_seq futex word: moved after every change of the slots
 *   80   failure      0, or the first failure's status << 32 | the failing pid
 *   88   message      ORDO_SIGNAL_MESSAGE_MAX bytes
 *   256  slots        ORDO_SHARED_SIGNAL_SIGNALLERS_MAX registered signallers,
 *                     each a word (pid << 32 | generation << 8 | SLOT_*)
 *                     and the process's start time (clock ticks after
 *                     boot, /proc/PID/stat)
 *
 * Raising: a CAS of state to max(value), which also clears SLEEPERS; if it
 * cleared SLEEPERS, the raiser then moves wake_seq and wakes every sleeper
 * on it (a shared futex: sleepers of every process).
 *
 * Sleeping for a value: read wake_seq (s, the token), then fetch_or
 * SLEEPERS into state; if that returned a reached (or failed) state, do
 * not sleep; else sleep on wake_seq while it is s. No lost wake-up: the
 * fetch_or and every raise are read-modify-writes of state, so one is
 * first. If the raise is, the fetch_or returns its value. If the fetch_or
 * is, the raise clears SLEEPERS and moves wake_seq after it, so after the
 * sleeper read s: the kernel then finds wake_seq != s, or wakes the sleeper
 * (the futex's check-and-queue is atomic against the wake). Sleepers of
 * other values are woken too, and set SLEEPERS again. The token may be
 * read before the caller checks conditions of its own that a waker
 * publishes before it moves wake_seq (a handle's destroy: the waker sets
 * DESTROYED, then moves wake_seq; a sleeper that read the token and then
 * missed DESTROYED has a token the move makes stale).
 *
 * A raiser that dies (or stops) between its CAS and its wake, or a peer
 * that clears SLEEPERS, could leave sleepers asleep: every sleep is cut
 * into slices of PAGE_SLEEP_SLICE_NS after which the sleeper looks again,
 * so such a peer delays a waiter by one slice at most, never to its
 * deadline.
 *
 * Failing: claim the failure word (CAS 0 -> status << 32 | pid): the
 * status is published with the claim, so every reader agrees on it. The
 * claimer then writes the message, sets FAILED (release), moves wake_seq
 * and wakes all. A process that loses the claim waits (bounded) for
 * FAILED; if the claimer stalls past that, it sets FAILED itself (the
 * claimer's status stands; its message may then still be on its way). A
 * reader that sees FAILED (acquire) reads the status from the claim and
 * the message.
 *
 * Registering: CAS a free slot's word to (pid, its generation + 1,
 * SLOT_CLAIMED), write the start time, store (pid, that generation,
 * SLOT_LIVE) (release), then move registry_seq and wake its sleepers
 * (each process's watcher), so every process watching the page looks at
 * the new signaller. Freeing a slot keeps its generation (pid 0,
 * SLOT_FREE), so every registration of a slot has a word of its own: a
 * reaper's CAS of a word it read earlier cannot hit a later registration
 * of the same pid (a pid reused after the signaller unregistered and
 * exited), which version 1's word (pid and state only) could.
 *
 * Reporting a dead signaller: CAS its slot from the LIVE word read to
 * DEAD (only one reaper wins, and a signaller that unregistered in the
 * meantime is not reported), fail the page, then free the slot. A reaper
 * that dies between the two finds its work finished by any other: a DEAD
 * slot is reported (idempotently: the first failure wins) and freed by
 * whoever reads it.
 *
 * Trust: every other process may write anything here. Readers mask the
 * value, bound every copy, check the status, and bound every loop (a CAS
 * that keeps losing against a scribbler gives up after a time limit); the
 * creator seals a memfd against shrinking, so a mapped page cannot vanish
 * under a reader (SIGBUS).
 */
#ifndef ORDO_IPC_SHARED_PAGE_H
#define ORDO_IPC_SHARED_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ordo/shared_signal.h"
#include "ordo/signal.h"

#define SHARED_PAGE_MAGIC 0x4c4e47534f44524fULL /* "ORDOSGNL" little-endian */

#define PAGE_FAILED ((uint64_t)1 << 63)
#define PAGE_SLEEPERS ((uint64_t)1 << 61)
#define PAGE_VALUE_MASK ORDO_SIGNAL_VALUE_MAX

/* The longest one sleep on the page lasts before the sleeper looks again
 * (see "A raiser that dies" above). */
#define PAGE_SLEEP_SLICE_NS 100000000ull

enum { SLOT_FREE = 0, SLOT_CLAIMED = 1, SLOT_LIVE = 2, SLOT_DEAD = 3 };

/* A slot word's fields (see "Registering" above). */
#define SLOT_STATE_MASK 0xffull
#define SLOT_GENERATION_SHIFT 8
#define SLOT_GENERATION_MASK 0xffffffull

static inline unsigned slot_state(uint64_t word) {
    return (unsigned)(word & SLOT_STATE_MASK);
}

static inline uint32_t slot_pid(uint64_t word) {
    return (uint32_t)(word >> 32);
}

static inline uint64_t slot_generation(uint64_t word) {
    return (word >> SLOT_GENERATION_SHIFT) & SLOT_GENERATION_MASK;
}

static inline uint64_t slot_word_make(uint32_t pid, uint64_t generation, unsigned state) {
    return (uint64_t)pid << 32 | (generation & SLOT_GENERATION_MASK) << SLOT_GENERATION_SHIFT |
           state;
}

typedef struct shared_slot {
    _Atomic uint64_t word; /* pid << 32 | generation << 8 | SLOT_* */
    _Atomic uint64_t start_time;
} shared_slot_t;

typedef struct shared_page {
    _Atomic uint64_t magic;
    _Atomic uint32_t version;
    _Atomic uint32_t size;
    uint8_t reserved0[48];
    _Atomic uint64_t state;
    _Atomic uint32_t wake_seq;
    _Atomic uint32_t registry_seq;
    _Atomic uint64_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    uint8_t reserved1[256 - 88 - ORDO_SIGNAL_MESSAGE_MAX];
    shared_slot_t slots[ORDO_SHARED_SIGNAL_SIGNALLERS_MAX];
} shared_page_t;

_Static_assert(offsetof(shared_page_t, state) == 64, "layout version 2");
_Static_assert(offsetof(shared_page_t, failure) == 80, "layout version 2");
_Static_assert(offsetof(shared_page_t, message) == 88, "layout version 2");
_Static_assert(offsetof(shared_page_t, slots) == 256, "layout version 2");
_Static_assert(sizeof(shared_page_t) <= ORDO_SHARED_SIGNAL_SIZE, "the page holds the layout");

/* Writes a fresh page at initial_value (magic last). */
void ordo__shared_page_init(shared_page_t *page, uint64_t initial_value);

/* Checks a mapped page's header: ORDO_OK, or the status and message (for
 * api, naming what) of a page that is not an ordo signal's or of another
 * version. */
ordo_status_t ordo__shared_page_validate(const shared_page_t *page, const char *what,
                                         const char *api);

/* The state (acquire), with only FAILED and the value's bits kept. */
uint64_t ordo__shared_page_state(shared_page_t *page);

/* Raises the value (monotonic max). ORDO_OK; the failure's status (with
 * its message raised for api) when the page has failed. */
ordo_status_t ordo__shared_page_advance(shared_page_t *page, uint64_t value, const char *api);

/* Fails the page unless it has failed already. */
ordo_status_t ordo__shared_page_fail(shared_page_t *page, ordo_status_t status, const char *message,
                                     const char *api);

/* The failure of a page seen failed: a valid ordo error status (a
 * scribbled one reads as ORDO_ERR_CORRUPTED), its message copied into
 * message (ORDO_SIGNAL_MESSAGE_MAX bytes, terminated). */
ordo_status_t ordo__shared_page_failure(shared_page_t *page, char *message);

/* The token of a sleep: read before the caller's own checks. */
uint32_t ordo__shared_page_sleep_token(shared_page_t *page);

/* A sleeper's announcement (the protocol above, after it read its token):
 * sets SLEEPERS and returns the state it found (FAILED and the value's
 * bits), reached or not. */
uint64_t ordo__shared_page_announce(shared_page_t *page);

/* A failure claimed (page->failure) and never published: its claimer
 * ended between the two (a live one publishes within microseconds, and a
 * later failer publishes a stalled claim after 10 ms). Publishes it for
 * the dead claimer (its status is in the claim; its message may be
 * partial). Sleepers call it at each slice, and the watcher at each look,
 * so the failure reaches them even when nobody fails the page again. */
void ordo__shared_page_rescue_failure(shared_page_t *page);

/* One sleep for value (the protocol above) with token, until deadline or
 * one PAGE_SLEEP_SLICE_NS slice (a dead claimer's failure is published
 * first: ordo__shared_page_rescue_failure). */
void ordo__shared_page_sleep(shared_page_t *page, uint32_t token, uint64_t value,
                             ordo_deadline_t deadline);

/* Moves wake_seq and wakes every sleeper (of every process). */
void ordo__shared_page_wake_all(shared_page_t *page);

/* Registers pid (started at start_time) in a free slot. ORDO_OK (also
 * when it is registered already) or ORDO_ERR_RESOURCE_EXHAUSTED. */
ordo_status_t ordo__shared_page_register(shared_page_t *page, pid_t pid, uint64_t start_time,
                                         const char *api);

/* Frees pid's slots; true if it had one. */
bool ordo__shared_page_unregister(shared_page_t *page, pid_t pid);

/* Frees the slot i if it still holds word (a dead signaller's), keeping
 * its generation; true if this call freed it. */
bool ordo__shared_page_slot_release(shared_page_t *page, size_t i, uint64_t word);

/* Marks slot i, still holding the LIVE word, DEAD; true if this call did. */
bool ordo__shared_page_slot_mark_dead(shared_page_t *page, size_t i, uint64_t word);

/* Whether slot i is DEAD (*out_pid, *out_word: its pid and word). */
bool ordo__shared_page_slot_dead(shared_page_t *page, size_t i, pid_t *out_pid, uint64_t *out_word);

/* Reads slot i: true and its pid and start time when live (a pid in the
 * range a pid can take). A slot left CLAIMED by a process that died while
 * registering is freed here (it never became a signaller). */
bool ordo__shared_page_slot_read(shared_page_t *page, size_t i, pid_t *out_pid, uint64_t *out_start,
                                 uint64_t *out_word);

/* A process's start time (clock ticks after boot) from /proc/PID/stat (0
 * for the calling process's own "self"); false if it cannot be read. */
bool ordo__process_start_time(pid_t pid, uint64_t *out_ticks);

#endif
