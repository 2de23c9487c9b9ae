/* Internal: host allocations through the user's hooks (ordo/alloc.h). */
#ifndef ORDO_BASE_ALLOC_H
#define ORDO_BASE_ALLOC_H

#include <stddef.h>

#include "ordo/alloc.h"

/* size bytes aligned to alignment (0: a pointer's alignment), zero-filled;
 * NULL on failure. */
void *ordo__alloc(size_t size, size_t alignment);
/* Returns a block from ordo__alloc with the same size and alignment. */
void ordo__dealloc(void *block, size_t size, size_t alignment);

#endif
