/* Internal: the deadline min-heap of an asynchronous waiter. A node names
 * a wait by slot and generation and never points into it, so sifting
 * writes only the node array, and a wait that is resolved otherwise needs
 * no removal: its node goes stale and is dropped when it reaches the top
 * or when the heap is compacted. Not thread-safe: the waiter's timer_lock
 * guards it. */
#ifndef ORDO_CORE_WAIT_HEAP_H
#define ORDO_CORE_WAIT_HEAP_H

#include <stdint.h>

typedef struct wait_heap_node {
    uint64_t deadline;
    uint32_t slot;
    uint32_t gen;
} wait_heap_node_t;

typedef struct wait_heap {
    wait_heap_node_t *nodes;
    uint32_t len;
    uint32_t capacity;
} wait_heap_t;

/* Makes room for capacity nodes (never shrinks). 0, or -1 when out of
 * memory (the heap unchanged). */
int ordo__wait_heap_reserve(wait_heap_t *heap, uint32_t capacity);

/* Inserts a node; the heap must have room. Returns the node's final index
 * (0: it is the new earliest). */
uint32_t ordo__wait_heap_push(wait_heap_t *heap, wait_heap_node_t node);

/* Removes the earliest node (the heap must not be empty). */
void ordo__wait_heap_pop(wait_heap_t *heap);

/* Keeps only the nodes for which keep(ctx, node) is non-zero, then
 * restores the heap order in O(n). Returns how many were dropped. */
uint32_t ordo__wait_heap_filter(wait_heap_t *heap,
                                int (*keep)(void *ctx, const wait_heap_node_t *node), void *ctx);

void ordo__wait_heap_free(wait_heap_t *heap);

#endif
