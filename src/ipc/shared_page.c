/* The shared page's protocol (ipc/shared_page.h states it and its proof). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <sched.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/error.h"
#include "base/futex.h"
#include "ipc/shared_page.h"
#include "ordo/time.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* How long a read-modify-write of the page may keep losing to other
 * writers before it reports the page scribbled on. Honest peers make
 * progress with every lost CAS; only a peer rewriting the word without
 * end could hold a caller this long. */
#define PAGE_CONTENTION_LIMIT_NS 1000000000ull
/* How long a process that lost the failure's claim waits for the claimer
 * to publish it. */
#define FAILURE_PUBLISH_WAIT_NS 10000000ull
/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
#define PID_LIMIT 4194304

void ordo__shared_page_init(shared_page_t *page, uint64_t initial_value) {
    memset(page, 0, sizeof *page);
    atomic_store_explicit(&page->version, ORDO_SHARED_SIGNAL_LAYOUT_VERSION, memory_order_relaxed);
    atomic_store_explicit(&page->size, ORDO_SHARED_SIGNAL_SIZE, memory_order_relaxed);
    atomic_store_explicit(&page->state, initial_value & PAGE_VALUE_MASK, memory_order_relaxed);
    atomic_store_explicit(&page->magic, SHARED_PAGE_MAGIC, memory_order_release);
}

ordo_status_t ordo__shared_page_validate(const shared_page_t *page, const char *what,
                                         const char *api) {
    uint64_t magic = atomic_load_explicit(&page->magic, memory_order_acquire);
    if (magic != SHARED_PAGE_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%s is not an ordo shared signal (magic %#llx)", what,
                           (unsigned long long)magic);
    }
    uint32_t version = atomic_load_explicit(&page->version, memory_order_relaxed);
    uint32_t size = atomic_load_explicit(&page->size, memory_order_relaxed);
    if (version != ORDO_SHARED_SIGNAL_LAYOUT_VERSION || size != ORDO_SHARED_SIGNAL_SIZE) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                           "%s is an ordo shared signal of layout version %u (size %u); this "
                           "library reads version %u (size %u)",
                           what, version, size, ORDO_SHARED_SIGNAL_LAYOUT_VERSION,
                           ORDO_SHARED_SIGNAL_SIZE);
    }
    return ORDO_OK;
}

uint64_t ordo__shared_page_state(shared_page_t *page) {
    return atomic_load_explicit(&page->state, memory_order_acquire) &
           (PAGE_FAILED | PAGE_VALUE_MASK);
}

/* Whether a read-modify-write loop that started at `since` has lost to
 * other writers for too long (checked every 1024 tries). */
static bool contended_too_long(unsigned tries, uint64_t since) {
    return (tries & 1023u) == 0 && ordo_time_now_ns() - since > PAGE_CONTENTION_LIMIT_NS;
}

static ordo_status_t page_refusal(shared_page_t *page, uint64_t state, uint64_t value,
                                  const char *api) {
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    ordo_status_t status = ordo__shared_page_failure(page, message);
    return ordo__error(status, api, "signal failed at %llu, before reaching %llu: %s",
                       (unsigned long long)(state & PAGE_VALUE_MASK), (unsigned long long)value,
                       message);
}

ordo_status_t ordo__shared_page_advance(shared_page_t *page, uint64_t value, const char *api) {
    uint64_t since = ordo_time_now_ns();
    uint64_t current = atomic_load_explicit(&page->state, memory_order_relaxed);
    for (unsigned tries = 1;; ++tries) {
        if (current & PAGE_FAILED) {
            atomic_thread_fence(memory_order_acquire); /* the failure's fields */
            return page_refusal(page, current, value, api);
        }
        if ((current & PAGE_VALUE_MASK) >= value) {
            return ORDO_OK;
        }
        /* Clears SLEEPERS: they are all woken below. */
        uint64_t next = value | (current & ~(PAGE_VALUE_MASK | PAGE_SLEEPERS));
        if (atomic_compare_exchange_weak_explicit(&page->state, &current, next,
                                                  memory_order_seq_cst, memory_order_relaxed)) {
            if (current & PAGE_SLEEPERS) {
                ordo__shared_page_wake_all(page);
            }
            return ORDO_OK;
        }
        if (contended_too_long(tries, since)) {
            return ordo__error(ORDO_ERR_CORRUPTED, api,
                               "the shared signal's state kept changing under the advance for "
                               "%llu ms: another process is writing over the page",
                               PAGE_CONTENTION_LIMIT_NS / 1000000ull);
        }
    }
}

void ordo__shared_page_wake_all(shared_page_t *page) {
    atomic_fetch_add_explicit(&page->wake_seq, 1, memory_order_seq_cst);
    ordo__futex_wake_shared(&page->wake_seq, INT_MAX);
}

ordo_status_t ordo__shared_page_fail(shared_page_t *page, ordo_status_t status, const char *message,
                                     const char *api) {
    (void)api;
    uint64_t unclaimed = 0;
    uint64_t claim = ((uint64_t)(uint32_t)status << 32) | (uint32_t)getpid();
    if (!atomic_compare_exchange_strong_explicit(&page->failure, &unclaimed, claim,
                                                 memory_order_acq_rel, memory_order_relaxed)) {
        /* Another failure came first: wait, bounded, until it is published,
         * so what this process reads next is that failure. */
        uint64_t until = ordo_time_now_ns() + FAILURE_PUBLISH_WAIT_NS;
        while (!(atomic_load_explicit(&page->state, memory_order_acquire) & PAGE_FAILED)) {
            if (ordo_time_now_ns() >= until) {
                /* The claimer stalled or died before publishing: publish
                 * its failure (its status is in the claim). */
                atomic_fetch_or_explicit(&page->state, PAGE_FAILED, memory_order_seq_cst);
                ordo__shared_page_wake_all(page);
                break;
            }
            sched_yield();
        }
        return ORDO_OK;
    }
    /* Byte by byte, relaxed atomic stores: a damaged page may read as
     * failed already, so a reader may be copying the text meanwhile (in
     * this process or another); each byte it reads is then old or new,
     * never undefined. */
    size_t len = message ? strnlen(message, ORDO_SIGNAL_MESSAGE_MAX - 1) : 0;
    for (size_t i = 0; i < len; ++i) {
        __atomic_store_n(&page->message[i], message[i], __ATOMIC_RELAXED);
    }
    __atomic_store_n(&page->message[len], '\0', __ATOMIC_RELAXED);
    atomic_fetch_or_explicit(&page->state, PAGE_FAILED, memory_order_seq_cst);
    ordo__shared_page_wake_all(page);
    return ORDO_OK;
}

ordo_status_t ordo__shared_page_failure(shared_page_t *page, char *message) {
    /* Copied byte by byte with relaxed atomic loads: another process (or
     * thread, on a damaged page) may be writing it, and the copy must stay
     * within the field whatever it holds. */
    size_t i = 0;
    for (; i < ORDO_SIGNAL_MESSAGE_MAX - 1; ++i) {
        char c = __atomic_load_n(&page->message[i], __ATOMIC_RELAXED);
        if (c == '\0') {
            break;
        }
        message[i] = c;
    }
    message[i] = '\0';
    uint64_t claim = atomic_load_explicit(&page->failure, memory_order_acquire);
    int32_t raw = (int32_t)(uint32_t)(claim >> 32);
    ordo_status_t status = (ordo_status_t)raw;
    if (!ordo_status_is_error(status)) {
        char original[ORDO_SIGNAL_MESSAGE_MAX];
        memcpy(original, message, i + 1);
        snprintf(message, ORDO_SIGNAL_MESSAGE_MAX,
                 "the shared page holds no valid failure status (%d): %.100s", (int)raw, original);
        return ORDO_ERR_CORRUPTED;
    }
    return status;
}

uint64_t ordo__shared_page_announce(shared_page_t *page) {
    return atomic_fetch_or_explicit(&page->state, PAGE_SLEEPERS, memory_order_seq_cst) &
           (PAGE_FAILED | PAGE_VALUE_MASK);
}

uint32_t ordo__shared_page_sleep_token(shared_page_t *page) {
    return atomic_load_explicit(&page->wake_seq, memory_order_seq_cst);
}

/* Whether pid has ended (a zombie included): its pidfd is readable. */
static bool claimer_ended(pid_t pid) {
    if (pid <= 0) {
        return false; /* a scribbled claim: a later failer publishes it */
    }
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        return errno == ESRCH;
    }
    struct pollfd ready = {.fd = fd, .events = POLLIN};
    bool ended = poll(&ready, 1, 0) == 1;
    close(fd);
    return ended;
}

void ordo__shared_page_rescue_failure(shared_page_t *page) {
    uint64_t claim = atomic_load_explicit(&page->failure, memory_order_acquire);
    if (claim == 0 || (atomic_load_explicit(&page->state, memory_order_acquire) & PAGE_FAILED)) {
        return;
    }
    if (claimer_ended((pid_t)(uint32_t)claim)) {
        atomic_fetch_or_explicit(&page->state, PAGE_FAILED, memory_order_seq_cst);
        ordo__shared_page_wake_all(page);
    }
}

void ordo__shared_page_sleep(shared_page_t *page, uint32_t token, uint64_t value,
                             ordo_deadline_t deadline) {
    ordo__shared_page_rescue_failure(page);
    uint64_t state = ordo__shared_page_announce(page);
    if ((state & PAGE_FAILED) || (state & PAGE_VALUE_MASK) >= value) {
        return;
    }
    uint64_t slice_end = ordo_time_now_ns() + PAGE_SLEEP_SLICE_NS;
    ordo__futex_wait_shared(&page->wake_seq, token, deadline < slice_end ? deadline : slice_end);
}

static void registry_changed(shared_page_t *page) {
    atomic_fetch_add_explicit(&page->registry_seq, 1, memory_order_seq_cst);
    ordo__futex_wake_shared(&page->registry_seq, INT_MAX);
}

static bool slot_holds(uint64_t word, pid_t pid, unsigned state) {
    return slot_pid(word) == (uint32_t)pid && slot_state(word) == state;
}

ordo_status_t ordo__shared_page_register(shared_page_t *page, pid_t pid, uint64_t start_time,
                                         const char *api) {
    for (size_t i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        uint64_t word = atomic_load_explicit(&page->slots[i].word, memory_order_acquire);
        if (slot_holds(word, pid, SLOT_LIVE)) {
            return ORDO_OK;
        }
    }
    for (size_t i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        shared_slot_t *slot = &page->slots[i];
        uint64_t expected = atomic_load_explicit(&slot->word, memory_order_relaxed);
        if (!slot_holds(expected, 0, SLOT_FREE)) {
            continue;
        }
        uint64_t generation = slot_generation(expected) + 1;
        if (atomic_compare_exchange_strong_explicit(
                &slot->word, &expected, slot_word_make((uint32_t)pid, generation, SLOT_CLAIMED),
                memory_order_acq_rel, memory_order_relaxed)) {
            atomic_store_explicit(&slot->start_time, start_time, memory_order_relaxed);
            atomic_store_explicit(&slot->word, slot_word_make((uint32_t)pid, generation, SLOT_LIVE),
                                  memory_order_release);
            registry_changed(page);
            return ORDO_OK;
        }
    }
    return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                       "the shared signal has %u registered signallers already (the most "
                       "ORDO_SHARED_SIGNAL_SIGNALLERS_MAX allows)",
                       ORDO_SHARED_SIGNAL_SIGNALLERS_MAX);
}

bool ordo__shared_page_unregister(shared_page_t *page, pid_t pid) {
    bool had = false;
    for (size_t i = 0; i < ORDO_SHARED_SIGNAL_SIGNALLERS_MAX; ++i) {
        uint64_t word = atomic_load_explicit(&page->slots[i].word, memory_order_relaxed);
        if (slot_holds(word, pid, SLOT_LIVE)) {
            had |= ordo__shared_page_slot_release(page, i, word);
        }
    }
    return had;
}

bool ordo__shared_page_slot_release(shared_page_t *page, size_t i, uint64_t word) {
    uint64_t freed = slot_word_make(0, slot_generation(word), SLOT_FREE);
    if (!atomic_compare_exchange_strong_explicit(&page->slots[i].word, &word, freed,
                                                 memory_order_acq_rel, memory_order_relaxed)) {
        return false;
    }
    registry_changed(page);
    return true;
}

bool ordo__shared_page_slot_mark_dead(shared_page_t *page, size_t i, uint64_t word) {
    uint64_t dead = (word & ~SLOT_STATE_MASK) | SLOT_DEAD;
    return atomic_compare_exchange_strong_explicit(&page->slots[i].word, &word, dead,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

bool ordo__shared_page_slot_dead(shared_page_t *page, size_t i, pid_t *out_pid,
                                 uint64_t *out_word) {
    uint64_t word = atomic_load_explicit(&page->slots[i].word, memory_order_acquire);
    if (slot_state(word) != SLOT_DEAD) {
        return false;
    }
    *out_pid = (pid_t)slot_pid(word);
    *out_word = word;
    return true;
}

bool ordo__shared_page_slot_read(shared_page_t *page, size_t i, pid_t *out_pid, uint64_t *out_start,
                                 uint64_t *out_word) {
    uint64_t word = atomic_load_explicit(&page->slots[i].word, memory_order_acquire);
    uint32_t pid = slot_pid(word);
    if (pid == 0 || pid > PID_LIMIT) {
        return false;
    }
    if (slot_state(word) == SLOT_CLAIMED && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
        (void)ordo__shared_page_slot_release(page, i, word);
        return false;
    }
    if (slot_state(word) != SLOT_LIVE) {
        return false;
    }
    *out_pid = (pid_t)pid;
    *out_start = atomic_load_explicit(&page->slots[i].start_time, memory_order_relaxed);
    *out_word = word;
    return true;
}

bool ordo__process_start_time(pid_t pid, uint64_t *out_ticks) {
    char path[64];
    if (pid == 0) {
        snprintf(path, sizeof path, "/proc/self/stat");
    } else {
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    char text[1024];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) {
        return false;
    }
    text[got] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: the
     * fields after it start past the last ')'. starttime is field 22, the
     * 20th after it. */
    char *p = strrchr(text, ')');
    if (!p) {
        return false;
    }
    ++p;
    for (int field = 3; field < 22; ++field) {
        p = strchr(p + 1, ' ');
        if (!p) {
            return false;
        }
    }
    unsigned long long ticks = 0;
    if (sscanf(p + 1, "%llu", &ticks) != 1) {
        return false;
    }
    *out_ticks = ticks;
    return true;
}
