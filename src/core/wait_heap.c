/* The deadline min-heap of an asynchronous waiter (a binary heap). */
#include <string.h>

#include "base/alloc.h"
#include "core/wait_heap.h"

static uint32_t sift_up(wait_heap_node_t *nodes, uint32_t index, wait_heap_node_t node) {
    while (index > 0) {
        uint32_t parent = (index - 1) / 2;
        if (nodes[parent].deadline <= node.deadline) {
            break;
        }
        nodes[index] = nodes[parent];
        index = parent;
    }
    nodes[index] = node;
    return index;
}

static void sift_down(wait_heap_node_t *nodes, uint32_t len, uint32_t index,
                      wait_heap_node_t node) {
    for (;;) {
        uint32_t child = 2 * index + 1;
        if (child >= len) {
            break;
        }
        if (child + 1 < len && nodes[child + 1].deadline < nodes[child].deadline) {
            ++child;
        }
        if (node.deadline <= nodes[child].deadline) {
            break;
        }
        nodes[index] = nodes[child];
        index = child;
    }
    nodes[index] = node;
}

int ordo__wait_heap_reserve(wait_heap_t *heap, uint32_t capacity) {
    if (capacity <= heap->capacity) {
        return 0;
    }
    wait_heap_node_t *nodes = ordo__alloc((size_t)capacity * sizeof *nodes, 0);
    if (!nodes) {
        return -1;
    }
    if (heap->len) {
        memcpy(nodes, heap->nodes, (size_t)heap->len * sizeof *nodes);
    }
    uint32_t len = heap->len;
    ordo__wait_heap_free(heap);
    heap->nodes = nodes;
    heap->len = len;
    heap->capacity = capacity;
    return 0;
}

uint32_t ordo__wait_heap_push(wait_heap_t *heap, wait_heap_node_t node) {
    return sift_up(heap->nodes, heap->len++, node);
}

void ordo__wait_heap_pop(wait_heap_t *heap) {
    wait_heap_node_t last = heap->nodes[--heap->len];
    if (heap->len) {
        sift_down(heap->nodes, heap->len, 0, last);
    }
}

uint32_t ordo__wait_heap_filter(wait_heap_t *heap,
                                int (*keep)(void *ctx, const wait_heap_node_t *node), void *ctx) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < heap->len; ++i) {
        if (keep(ctx, &heap->nodes[i])) {
            heap->nodes[kept++] = heap->nodes[i];
        }
    }
    uint32_t dropped = heap->len - kept;
    heap->len = kept;
    for (uint32_t i = kept / 2; i-- > 0;) {
        sift_down(heap->nodes, kept, i, heap->nodes[i]);
    }
    return dropped;
}

void ordo__wait_heap_free(wait_heap_t *heap) {
    if (heap->nodes) {
        ordo__dealloc(heap->nodes, (size_t)heap->capacity * sizeof *heap->nodes, 0);
    }
    heap->nodes = NULL;
    heap->len = 0;
    heap->capacity = 0;
}
