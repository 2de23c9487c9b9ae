/* Internal: tuning of blocking waits, for tests that must force a path. */
#ifndef ORDO_SYNC_WAIT_TUNING_H
#define ORDO_SYNC_WAIT_TUNING_H

#include <stdint.h>

/* How long blocking waits spin before sleeping (default WAIT_SPIN_NS).
 * Zero makes every blocked wait sleep at once: the path where a lost
 * wake-up would show. Returns the previous value. */
uint64_t ordo__sync_wait_set_spin_ns(uint64_t spin_ns);

#endif
