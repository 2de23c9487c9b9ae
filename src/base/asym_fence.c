#include "base/asym_fence.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int ordo__asym_hot_fences = 1;

static pthread_once_t registered = PTHREAD_ONCE_INIT;

static long membarrier_call(int command) {
    return syscall(SYS_membarrier, command, 0, 0);
}

static void register_once(void) {
    if (membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
        atomic_store(&ordo__asym_hot_fences, 0);
    }
}

int ordo__asym_init(void) {
    pthread_once(&registered, register_once);
    return ordo__asym_cheap();
}

void ordo__asym_rare(void) {
    if (ordo__asym_cheap()) {
        /* Hot sides that fence with the compiler only rely on it, so a
         * failure is never ignored: ENOMEM (the kernel could not allocate
         * its CPU mask) is retried; no other error can follow a successful
         * registration, and going on without the fence would break them. */
        while (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
            if (errno != ENOMEM) {
                fprintf(stderr,
                        "ordo: membarrier failed after it was registered (%s); "
                        "going on would break mutual exclusion\n",
                        strerror(errno));
                abort();
            }
            sched_yield();
        }
    } else {
        atomic_thread_fence(memory_order_seq_cst);
    }
}
