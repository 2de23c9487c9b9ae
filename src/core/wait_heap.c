/* The deadline min-heap of an asynchronous waiter (a binary heap). */
#include <string.h>

#include "base/alloc.h"
#include "core/wait_heap.h"
#include "core/waiter_internal.h"

static inline void place(wait_heap_t *heap, uint32_t index, wait_heap_node_t node) {
    heap->nodes[index] = node;
    node.entry->heap_index = index;
}

static void sift_up(wait_heap_t *heap, uint32_t index, wait_heap_node_t node) {
    while (index > 0) {
        uint32_t parent = (index - 1) / 2;
        if (heap->nodes[parent].deadline <= node.deadline) {
            break;
        }
        place(heap, index, heap->nodes[parent]);
        index = parent;
    }
    place(heap, index, node);
}

static void sift_down(wait_heap_t *heap, uint32_t index, wait_heap_node_t node) {
    uint32_t len = heap->len;
    for (;;) {
        uint32_t child = 2 * index + 1;
        if (child >= len) {
            break;
        }
        if (child + 1 < len && heap->nodes[child + 1].deadline < heap->nodes[child].deadline) {
            ++child;
        }
        if (node.deadline <= heap->nodes[child].deadline) {
            break;
        }
        place(heap, index, heap->nodes[child]);
        index = child;
    }
    place(heap, index, node);
}

int wait_heap_reserve(wait_heap_t *heap, uint32_t capacity) {
    if (capacity <= heap->capacity) {
        return 0;
    }
    wait_heap_node_t *nodes = ordo_alloc((size_t)capacity * sizeof *nodes, 0);
    if (!nodes) {
        return -1;
    }
    if (heap->len) {
        memcpy(nodes, heap->nodes, (size_t)heap->len * sizeof *nodes);
    }
    wait_heap_free(heap);
    heap->nodes = nodes;
    heap->capacity = capacity;
    return 0;
}

void wait_heap_push(wait_heap_t *heap, struct wait_entry *entry, uint64_t deadline) {
    wait_heap_node_t node = {deadline, entry};
    sift_up(heap, heap->len++, node);
}

void wait_heap_remove(wait_heap_t *heap, uint32_t index) {
    heap->nodes[index].entry->heap_index = WAIT_HEAP_NONE;
    wait_heap_node_t last = heap->nodes[--heap->len];
    if (index == heap->len) {
        return;
    }
    if (index > 0 && last.deadline < heap->nodes[(index - 1) / 2].deadline) {
        sift_up(heap, index, last);
    } else {
        sift_down(heap, index, last);
    }
}

void wait_heap_free(wait_heap_t *heap) {
    if (heap->nodes) {
        ordo_dealloc(heap->nodes, (size_t)heap->capacity * sizeof *heap->nodes, 0);
    }
    heap->nodes = NULL;
    heap->capacity = 0;
}
