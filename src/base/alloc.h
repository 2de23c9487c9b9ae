/* Internal: host allocations through the user's hooks (ordo/alloc.h). */
#ifndef ORDO_BASE_ALLOC_H
#define ORDO_BASE_ALLOC_H

#include <stddef.h>

#include "ordo/alloc.h"

/* size bytes aligned to alignment (0: a pointer's alignment), zero-filled;
 * NULL on failure. */
void *ordo_alloc(size_t size, size_t alignment);
/* Returns a block from ordo_alloc with the same size and alignment. */
void ordo_dealloc(void *block, size_t size, size_t alignment);

#endif
