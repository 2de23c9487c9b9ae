/* Internal: a recursive lock on a futex. Uncontended lock and unlock are
 * one atomic each; the owning thread may take it again (each lock needs
 * its unlock). Waiters spin briefly, then sleep. */
#ifndef ORDO_BASE_RLOCK_H
#define ORDO_BASE_RLOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct ordo_rlock {
    _Atomic uint32_t word; /* 0 free, 1 held, 2 held with sleepers */
    _Atomic(const void *) owner;
    uint32_t depth; /* the owner's */
} ordo_rlock_t;

void ordo_rlock_init(ordo_rlock_t *lock);
void ordo_rlock_lock(ordo_rlock_t *lock);
void ordo_rlock_unlock(ordo_rlock_t *lock);
/* Non-zero when the calling thread holds the lock. */
int ordo_rlock_held(const ordo_rlock_t *lock);

#endif
