/* Ways for two threads to hand each other a growing counter: ordo's signal
 * and the baselines it is measured against, behind one small interface. */
#ifndef ORDO_TOOL_BENCH_CHANNELS_H
#define ORDO_TOOL_BENCH_CHANNELS_H

#include <stdint.h>

struct channel_ops {
    const char *impl;
    void *(*create)(void);
    void (*destroy)(void *channel);
    void (*set)(void *channel, uint64_t value);
    /* Returns 0 once the value is reached, -1 on error (bench aborts). */
    int (*wait)(void *channel, uint64_t value);
};
typedef struct channel_ops channel_ops_t;

/* ordo timeline signal (impl "ordo"). */
extern const channel_ops_t channel_ordo;
/* The seed's design: a value behind a mutex and condition variable. */
extern const channel_ops_t channel_condvar;
/* A raw futex: every set is a wake system call, every wait sleeps. */
extern const channel_ops_t channel_futex;
/* Pure atomic spinning: the floor. */
extern const channel_ops_t channel_spin;

/* The floor for any out-of-line wait on a reached value: a call that loads
 * one atomic word and compares. Kept in another file so it is not inlined. */
int channel_reached_floor(const void *word, uint64_t value);

#endif
