#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench_channels.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
#include "ordo/signal.h"

/* Waits in a benchmark are bounded too: a hang becomes an error. The
 * deadline is fixed when the channel is made, so no wait reads the clock
 * on the measured path. */
#define CHANNEL_WAIT_LIMIT_NS (300ull * 1000000000ull)

typedef struct ordo_channel {
    ordo_signal_t *signal;
    ordo_deadline_t deadline;
} ordo_channel_t;

static void *ordo_create(void) {
    ordo_channel_t *c = calloc(1, sizeof *c);
    if (c && ordo_signal_create(0, &c->signal) != ORDO_OK) {
        free(c);
        return NULL;
    }
    if (c) {
        c->deadline = ordo_deadline_after_ns(CHANNEL_WAIT_LIMIT_NS);
    }
    return c;
}

static void ordo_destroy(void *channel) {
    ordo_channel_t *c = channel;
    ordo_signal_destroy(c->signal);
    free(c);
}

static void ordo_set(void *channel, uint64_t value) {
    ordo_signal_advance(((ordo_channel_t *)channel)->signal, value);
}

static int ordo_wait(void *channel, uint64_t value) {
    ordo_channel_t *c = channel;
    ordo_status_t st = ordo_signal_wait(c->signal, value, c->deadline);
    if (st != ORDO_OK) {
        fprintf(stderr, "bench: %s\n", ordo_error_message());
        return -1;
    }
    return 0;
}

const channel_ops_t channel_ordo = {"ordo", ordo_create, ordo_destroy, ordo_set, ordo_wait};

typedef struct condvar_channel {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    _Atomic uint64_t value;
} condvar_channel_t;

static void *condvar_create(void) {
    condvar_channel_t *c = calloc(1, sizeof *c);
    if (c) {
        pthread_mutex_init(&c->mutex, NULL);
        pthread_cond_init(&c->cond, NULL);
    }
    return c;
}

static void condvar_destroy(void *channel) {
    condvar_channel_t *c = channel;
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mutex);
    free(c);
}

static void condvar_set(void *channel, uint64_t value) {
    condvar_channel_t *c = channel;
    pthread_mutex_lock(&c->mutex);
    atomic_store(&c->value, value);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mutex);
}

static int condvar_wait(void *channel, uint64_t value) {
    condvar_channel_t *c = channel;
    if (atomic_load(&c->value) >= value) {
        return 0;
    }
    pthread_mutex_lock(&c->mutex);
    while (atomic_load(&c->value) < value) {
        pthread_cond_wait(&c->cond, &c->mutex);
    }
    pthread_mutex_unlock(&c->mutex);
    return 0;
}

const channel_ops_t channel_condvar = {"condvar", condvar_create, condvar_destroy, condvar_set,
                                       condvar_wait};

typedef struct word_channel {
    _Atomic uint32_t word;
} word_channel_t;

static void *word_create(void) {
    return calloc(1, sizeof(word_channel_t));
}

static void word_destroy(void *channel) {
    free(channel);
}

static void futex_set(void *channel, uint64_t value) {
    word_channel_t *c = channel;
    atomic_store(&c->word, (uint32_t)value);
    syscall(SYS_futex, &c->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int futex_wait(void *channel, uint64_t value) {
    word_channel_t *c = channel;
    uint32_t seen;
    while ((seen = atomic_load(&c->word)) < (uint32_t)value) {
        syscall(SYS_futex, &c->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    }
    return 0;
}

const channel_ops_t channel_futex = {"futex", word_create, word_destroy, futex_set, futex_wait};

static void spin_set(void *channel, uint64_t value) {
    atomic_store(&((word_channel_t *)channel)->word, (uint32_t)value);
}

static int spin_wait(void *channel, uint64_t value) {
    word_channel_t *c = channel;
    while (atomic_load_explicit(&c->word, memory_order_acquire) < (uint32_t)value) {
        cpu_relax();
    }
    return 0;
}

const channel_ops_t channel_spin = {"spin", word_create, word_destroy, spin_set, spin_wait};

__attribute__((noinline)) int channel_reached_floor(const void *word, uint64_t value) {
    return atomic_load_explicit((const _Atomic uint64_t *)word, memory_order_acquire) >= value ? 0
                                                                                               : -1;
}
