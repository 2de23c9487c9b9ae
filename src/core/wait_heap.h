/* Internal: the deadline min-heap of an asynchronous waiter. Each node
 * keeps its key next to the entry pointer, so sifting compares within the
 * node array; each entry keeps its node's index (heap_index), so any entry
 * is removed in O(log n). Not thread-safe: the waiter's timer_lock guards
 * it. */
#ifndef ORDO_CORE_WAIT_HEAP_H
#define ORDO_CORE_WAIT_HEAP_H

#include <stdint.h>

#define WAIT_HEAP_NONE UINT32_MAX

struct wait_entry;

typedef struct wait_heap_node {
    uint64_t deadline;
    struct wait_entry *entry;
} wait_heap_node_t;

typedef struct wait_heap {
    wait_heap_node_t *nodes;
    uint32_t len;
    uint32_t capacity;
} wait_heap_t;

/* Makes room for capacity nodes (never shrinks). 0 or -1 (out of memory,
 * the heap unchanged). */
int wait_heap_reserve(wait_heap_t *heap, uint32_t capacity);

/* Inserts entry with key deadline; the heap must have room. Sets
 * entry->heap_index. */
void wait_heap_push(wait_heap_t *heap, struct wait_entry *entry, uint64_t deadline);

/* Removes the node at index (an entry's heap_index); sets that entry's
 * heap_index to WAIT_HEAP_NONE. */
void wait_heap_remove(wait_heap_t *heap, uint32_t index);

void wait_heap_free(wait_heap_t *heap);

#endif
