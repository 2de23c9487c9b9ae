#include <time.h>

#include "ordo/time.h"

uint64_t ordo_time_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t saturating_add(uint64_t a, uint64_t b) {
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

ordo_deadline_t ordo_deadline_after_ns(uint64_t timeout_ns) {
    if (timeout_ns == UINT64_MAX) {
        return ORDO_DEADLINE_NEVER;
    }
    return saturating_add(ordo_time_now_ns(), timeout_ns);
}

ordo_deadline_t ordo_deadline_after_ms(uint64_t timeout_ms) {
    if (timeout_ms > UINT64_MAX / 1000000u) {
        return ORDO_DEADLINE_NEVER;
    }
    return ordo_deadline_after_ns(timeout_ms * 1000000u);
}

uint64_t ordo_deadline_remaining_ns(ordo_deadline_t deadline) {
    if (deadline == ORDO_DEADLINE_NEVER) {
        return UINT64_MAX;
    }
    uint64_t now = ordo_time_now_ns();
    return deadline > now ? deadline - now : 0;
}
