/* The operation graph: incremental topological order (Pearce-Kelly) and
 * cycle listing (Tarjan). See op_graph.h. */
#include <string.h>

#include "base/alloc.h"
#include "coord/op_graph.h"

/* ---- storage ------------------------------------------------------------- */

/* Grows an array of element_size entries from *cap to at least need
 * (doubling); the new entries are zero-filled by ordo__alloc. */
static int grow(void **array, uint32_t *cap, uint32_t need, size_t element_size) {
    if (need <= *cap) {
        return 1;
    }
    if (need > OP_GRAPH_MAX) {
        return 0;
    }
    uint64_t wanted = *cap ? *cap : 16;
    while (wanted < need) {
        wanted *= 2;
    }
    if (wanted > OP_GRAPH_MAX) {
        wanted = OP_GRAPH_MAX;
    }
    void *bigger = ordo__alloc((size_t)wanted * element_size, 0);
    if (!bigger) {
        return 0;
    }
    if (*array) {
        memcpy(bigger, *array, (size_t)*cap * element_size);
        ordo__dealloc(*array, (size_t)*cap * element_size, 0);
    }
    *array = bigger;
    *cap = (uint32_t)wanted;
    return 1;
}

void ordo__op_graph_init(op_graph_t *graph) {
    memset(graph, 0, sizeof *graph);
    graph->edge_free = OP_GRAPH_NONE;
    graph->order_valid = 1;
}

void ordo__op_graph_fini(op_graph_t *graph) {
    ordo__dealloc(graph->nodes, (size_t)graph->node_cap * sizeof *graph->nodes, 0);
    ordo__dealloc(graph->at, (size_t)graph->at_cap * sizeof *graph->at, 0);
    ordo__dealloc(graph->edges, (size_t)graph->edge_cap * sizeof *graph->edges, 0);
    ordo__dealloc(graph->stack_node, (size_t)graph->scratch_cap * sizeof *graph->stack_node, 0);
    ordo__dealloc(graph->stack_edge, (size_t)graph->scratch_cap * sizeof *graph->stack_edge, 0);
    ordo__dealloc(graph->forward, (size_t)graph->scratch_cap * sizeof *graph->forward, 0);
    ordo__dealloc(graph->backward, (size_t)graph->scratch_cap * sizeof *graph->backward, 0);
    ordo__dealloc(graph->sort_tmp, (size_t)graph->scratch_cap * sizeof *graph->sort_tmp, 0);
    ordo__op_graph_init(graph);
}

/* Scratch for searches over up to n nodes. The arrays grow together: each
 * is replaced only once all the new ones exist. */
static int scratch_reserve(op_graph_t *graph, uint32_t n) {
    if (n <= graph->scratch_cap) {
        return 1;
    }
    uint32_t cap = graph->scratch_cap ? graph->scratch_cap : 16;
    while (cap < n) {
        cap *= 2;
    }
    uint32_t *stack_node = ordo__alloc((size_t)cap * sizeof *stack_node, 0);
    uint32_t *stack_edge = ordo__alloc((size_t)cap * sizeof *stack_edge, 0);
    uint64_t *forward = ordo__alloc((size_t)cap * sizeof *forward, 0);
    uint64_t *backward = ordo__alloc((size_t)cap * sizeof *backward, 0);
    uint64_t *sort_tmp = ordo__alloc((size_t)cap * sizeof *sort_tmp, 0);
    if (!stack_node || !stack_edge || !forward || !backward || !sort_tmp) {
        ordo__dealloc(stack_node, (size_t)cap * sizeof *stack_node, 0);
        ordo__dealloc(stack_edge, (size_t)cap * sizeof *stack_edge, 0);
        ordo__dealloc(forward, (size_t)cap * sizeof *forward, 0);
        ordo__dealloc(backward, (size_t)cap * sizeof *backward, 0);
        ordo__dealloc(sort_tmp, (size_t)cap * sizeof *sort_tmp, 0);
        return 0;
    }
    size_t old = graph->scratch_cap;
    ordo__dealloc(graph->stack_node, old * sizeof *graph->stack_node, 0);
    ordo__dealloc(graph->stack_edge, old * sizeof *graph->stack_edge, 0);
    ordo__dealloc(graph->forward, old * sizeof *graph->forward, 0);
    ordo__dealloc(graph->backward, old * sizeof *graph->backward, 0);
    ordo__dealloc(graph->sort_tmp, old * sizeof *graph->sort_tmp, 0);
    graph->sort_tmp = sort_tmp;
    graph->stack_node = stack_node;
    graph->stack_edge = stack_edge;
    graph->forward = forward;
    graph->backward = backward;
    graph->scratch_cap = cap;
    return 1;
}

/* Renumbers the present nodes 0..live-1 in their current order, closing
 * the holes removed nodes left. */
static void order_compact(op_graph_t *graph) {
    uint32_t j = 0;
    for (uint32_t i = 0; i < graph->at_used; ++i) {
        uint32_t node = graph->at[i];
        if (node != OP_GRAPH_NONE) {
            graph->at[j] = node;
            graph->nodes[node].ord = j++;
        }
    }
    for (uint32_t i = j; i < graph->at_used; ++i) {
        graph->at[i] = OP_GRAPH_NONE;
    }
    graph->at_used = j;
}

ordo_status_t ordo__op_graph_reserve_nodes(op_graph_t *graph, uint32_t node_bound, uint32_t count) {
    if (node_bound > OP_GRAPH_MAX || count > OP_GRAPH_MAX - graph->live) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    uint32_t old_cap = graph->node_cap;
    if (!grow((void **)&graph->nodes, &graph->node_cap, node_bound, sizeof *graph->nodes)) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = old_cap; i < graph->node_cap; ++i) {
        graph->nodes[i].ord = OP_GRAPH_NONE;
    }
    if (graph->at_cap - graph->at_used < count) {
        order_compact(graph);
        if (graph->at_cap - graph->at_used < count &&
            !grow((void **)&graph->at, &graph->at_cap, graph->at_used + count, sizeof *graph->at)) {
            return ORDO_ERR_OUT_OF_MEMORY;
        }
    }
    return scratch_reserve(graph, graph->live + count) ? ORDO_OK : ORDO_ERR_OUT_OF_MEMORY;
}

ordo_status_t ordo__op_graph_add_node(op_graph_t *graph, uint32_t node) {
    if (node >= OP_GRAPH_MAX || op_graph_contains(graph, node)) {
        return ORDO_ERR_INVALID_ARGUMENT;
    }
    uint32_t old_cap = graph->node_cap;
    if (!grow((void **)&graph->nodes, &graph->node_cap, node + 1, sizeof *graph->nodes)) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = old_cap; i < graph->node_cap; ++i) {
        graph->nodes[i].ord = OP_GRAPH_NONE;
    }
    if (graph->at_used == graph->at_cap) {
        /* Out of indices: close the holes if they are at least half, else
         * grow (amortised O(1) per node either way). */
        if (graph->live < graph->at_cap / 2) {
            order_compact(graph);
        } else if (!grow((void **)&graph->at, &graph->at_cap, graph->at_cap + 1,
                         sizeof *graph->at)) {
            return ORDO_ERR_OUT_OF_MEMORY;
        }
    }
    if (!scratch_reserve(graph, graph->live + 1)) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    op_graph_node_t *n = &graph->nodes[node];
    n->ord = graph->at_used;
    n->first_out = n->first_in = OP_GRAPH_NONE;
    n->out_count = n->in_count = 0;
    graph->at[graph->at_used++] = node;
    graph->live++;
    return ORDO_OK;
}

ordo_status_t ordo__op_graph_reserve_edges(op_graph_t *graph, uint32_t n) {
    uint32_t free_count = graph->edge_cap - graph->edge_count;
    if (n <= free_count) {
        return ORDO_OK;
    }
    uint32_t old_cap = graph->edge_cap;
    if ((uint64_t)graph->edge_count + n > OP_GRAPH_MAX ||
        !grow((void **)&graph->edges, &graph->edge_cap, graph->edge_count + n,
              sizeof *graph->edges)) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    /* Chain the new edges onto the free list. */
    for (uint32_t i = graph->edge_cap; i-- > old_cap;) {
        graph->edges[i].next_out = graph->edge_free;
        graph->edge_free = i;
    }
    return ORDO_OK;
}

static void edge_link(op_graph_t *graph, uint32_t from, uint32_t to) {
    uint32_t e = graph->edge_free;
    op_graph_edge_t *edge = &graph->edges[e];
    graph->edge_free = edge->next_out;
    graph->edge_count++;
    op_graph_node_t *f = &graph->nodes[from];
    op_graph_node_t *t = &graph->nodes[to];
    edge->from = from;
    edge->to = to;
    edge->prev_out = OP_GRAPH_NONE;
    edge->next_out = f->first_out;
    if (f->first_out != OP_GRAPH_NONE) {
        graph->edges[f->first_out].prev_out = e;
    }
    f->first_out = e;
    f->out_count++;
    edge->prev_in = OP_GRAPH_NONE;
    edge->next_in = t->first_in;
    if (t->first_in != OP_GRAPH_NONE) {
        graph->edges[t->first_in].prev_in = e;
    }
    t->first_in = e;
    t->in_count++;
}

static void edge_unlink(op_graph_t *graph, uint32_t e) {
    op_graph_edge_t *edge = &graph->edges[e];
    op_graph_node_t *f = &graph->nodes[edge->from];
    op_graph_node_t *t = &graph->nodes[edge->to];
    if (edge->prev_out != OP_GRAPH_NONE) {
        graph->edges[edge->prev_out].next_out = edge->next_out;
    } else {
        f->first_out = edge->next_out;
    }
    if (edge->next_out != OP_GRAPH_NONE) {
        graph->edges[edge->next_out].prev_out = edge->prev_out;
    }
    f->out_count--;
    if (edge->prev_in != OP_GRAPH_NONE) {
        graph->edges[edge->prev_in].next_in = edge->next_in;
    } else {
        t->first_in = edge->next_in;
    }
    if (edge->next_in != OP_GRAPH_NONE) {
        graph->edges[edge->next_in].prev_in = edge->prev_in;
    }
    t->in_count--;
    edge->next_out = graph->edge_free;
    graph->edge_free = e;
    graph->edge_count--;
}

void ordo__op_graph_remove_node(op_graph_t *graph, uint32_t node) {
    if (!op_graph_contains(graph, node)) {
        return;
    }
    op_graph_node_t *n = &graph->nodes[node];
    while (n->first_out != OP_GRAPH_NONE) {
        edge_unlink(graph, n->first_out);
    }
    while (n->first_in != OP_GRAPH_NONE) {
        edge_unlink(graph, n->first_in);
    }
    graph->at[n->ord] = OP_GRAPH_NONE;
    n->ord = OP_GRAPH_NONE;
    graph->live--;
}

int ordo__op_graph_has_edge(const op_graph_t *graph, uint32_t from, uint32_t to) {
    const op_graph_node_t *f = &graph->nodes[from];
    const op_graph_node_t *t = &graph->nodes[to];
    /* Walk the shorter list. */
    if (f->out_count <= t->in_count) {
        for (uint32_t e = f->first_out; e != OP_GRAPH_NONE; e = graph->edges[e].next_out) {
            if (graph->edges[e].to == to) {
                return 1;
            }
        }
    } else {
        for (uint32_t e = t->first_in; e != OP_GRAPH_NONE; e = graph->edges[e].next_in) {
            if (graph->edges[e].from == from) {
                return 1;
            }
        }
    }
    return 0;
}

/* ---- insertion (Pearce-Kelly) ---------------------------------------------- */

static uint32_t next_epoch(op_graph_t *graph) {
    if (++graph->epoch == 0) {
        /* Wrapped: no stale mark may equal a future epoch. */
        for (uint32_t i = 0; i < graph->node_cap; ++i) {
            graph->nodes[i].mark = 0;
        }
        graph->epoch = 1;
    }
    return graph->epoch;
}

static void path_write(op_graph_path_t *cycle, const uint32_t *nodes, size_t count, uint32_t last) {
    if (!cycle) {
        return;
    }
    cycle->length = count + 1;
    for (size_t i = 0; i < count && i < cycle->capacity; ++i) {
        cycle->nodes[i] = nodes[i];
    }
    if (count < cycle->capacity) {
        cycle->nodes[count] = last;
    }
}

/* Forward search from `to` for `from` over out-edges, through nodes
 * ordered before ub (every node when bounded is 0). Returns 1 and writes
 * the path if `from` is reached; otherwise the visited nodes are in
 * graph->forward[0, *out_count). */
static int search_forward(op_graph_t *graph, uint32_t to, uint32_t from, uint32_t ub, int bounded,
                          op_graph_path_t *cycle, uint32_t *out_count) {
    uint32_t epoch = next_epoch(graph);
    uint32_t depth = 0;
    uint32_t count = 0;
    graph->nodes[to].mark = epoch;
    graph->forward[count++] = ((uint64_t)graph->nodes[to].ord << 32) | to;
    graph->stack_node[depth] = to;
    graph->stack_edge[depth++] = graph->nodes[to].first_out;
    graph->visited++;
    while (depth) {
        uint32_t e = graph->stack_edge[depth - 1];
        if (e == OP_GRAPH_NONE) {
            depth--;
            continue;
        }
        graph->stack_edge[depth - 1] = graph->edges[e].next_out;
        uint32_t w = graph->edges[e].to;
        if (w == from) {
            path_write(cycle, graph->stack_node, depth, from);
            return 1;
        }
        op_graph_node_t *n = &graph->nodes[w];
        if (n->mark == epoch || (bounded && n->ord > ub)) {
            continue;
        }
        n->mark = epoch;
        graph->visited++;
        graph->forward[count++] = ((uint64_t)n->ord << 32) | w;
        graph->stack_node[depth] = w;
        graph->stack_edge[depth++] = n->first_out;
    }
    *out_count = count;
    return 0;
}

/* Backward search from `from` over in-edges through nodes ordered after
 * lb; the visited nodes go to graph->backward. */
static uint32_t search_backward(op_graph_t *graph, uint32_t from, uint32_t lb) {
    uint32_t epoch = next_epoch(graph);
    uint32_t depth = 0;
    uint32_t count = 0;
    graph->nodes[from].mark = epoch;
    graph->backward[count++] = ((uint64_t)graph->nodes[from].ord << 32) | from;
    graph->stack_node[depth] = from;
    graph->stack_edge[depth++] = graph->nodes[from].first_in;
    graph->visited++;
    while (depth) {
        uint32_t e = graph->stack_edge[depth - 1];
        if (e == OP_GRAPH_NONE) {
            depth--;
            continue;
        }
        graph->stack_edge[depth - 1] = graph->edges[e].next_in;
        uint32_t w = graph->edges[e].from;
        op_graph_node_t *n = &graph->nodes[w];
        if (n->mark == epoch || n->ord < lb) {
            continue;
        }
        n->mark = epoch;
        graph->visited++;
        graph->backward[count++] = ((uint64_t)n->ord << 32) | w;
        graph->stack_node[depth] = w;
        graph->stack_edge[depth++] = n->first_in;
    }
    return count;
}

/* Sorts entries (ord << 32 | node) by ord: insertion sort when few, else
 * a least-significant-digit radix sort over the bytes an ord can use
 * (orders are distinct, so stability does not matter; O(n) either way). */
static void sort_by_order(op_graph_t *graph, uint64_t *a, uint32_t n) {
    if (n <= 32) {
        for (uint32_t i = 1; i < n; ++i) {
            uint64_t x = a[i];
            uint32_t j = i;
            for (; j > 0 && a[j - 1] > x; --j) {
                a[j] = a[j - 1];
            }
            a[j] = x;
        }
        return;
    }
    uint64_t *src = a;
    uint64_t *dst = graph->sort_tmp;
    for (unsigned shift = 32; shift < 64 && (graph->at_used >> (shift - 32)); shift += 8) {
        uint32_t count[257] = {0};
        for (uint32_t i = 0; i < n; ++i) {
            count[((src[i] >> shift) & 0xff) + 1]++;
        }
        for (unsigned b = 0; b < 256; ++b) {
            count[b + 1] += count[b];
        }
        for (uint32_t i = 0; i < n; ++i) {
            dst[count[(src[i] >> shift) & 0xff]++] = src[i];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) {
        memcpy(a, src, (size_t)n * sizeof *a);
    }
}

/* Gives the backward set (everything `from` needs) the lowest of the
 * indices both sets hold and the forward set (everything after `to`) the
 * rest, each keeping its internal order. */
static void reorder(op_graph_t *graph, uint32_t nf, uint32_t nb) {
    sort_by_order(graph, graph->forward, nf);
    sort_by_order(graph, graph->backward, nb);
    /* The indices, merged in increasing order, into the stack arrays
     * (free now, and as large as the two sets together). */
    uint32_t *indices = graph->stack_node;
    uint32_t i = 0;
    uint32_t j = 0;
    uint32_t k = 0;
    while (i < nf || j < nb) {
        if (j == nb || (i < nf && graph->forward[i] < graph->backward[j])) {
            indices[k++] = (uint32_t)(graph->forward[i++] >> 32);
        } else {
            indices[k++] = (uint32_t)(graph->backward[j++] >> 32);
        }
    }
    k = 0;
    for (j = 0; j < nb; ++j) {
        uint32_t node = (uint32_t)graph->backward[j];
        graph->nodes[node].ord = indices[k];
        graph->at[indices[k++]] = node;
    }
    for (i = 0; i < nf; ++i) {
        uint32_t node = (uint32_t)graph->forward[i];
        graph->nodes[node].ord = indices[k];
        graph->at[indices[k++]] = node;
    }
}

ordo_status_t ordo__op_graph_add_edge(op_graph_t *graph, uint32_t from, uint32_t to, int checked,
                                      op_graph_path_t *cycle) {
    if (checked && from == to) {
        path_write(cycle, NULL, 0, from);
        return ORDO_ERR_DEADLOCK;
    }
    if (ordo__op_graph_has_edge(graph, from, to)) {
        return ORDO_OK;
    }
    if (graph->edge_free == OP_GRAPH_NONE && ordo__op_graph_reserve_edges(graph, 1) != ORDO_OK) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    uint32_t ub = graph->nodes[from].ord;
    uint32_t lb = graph->nodes[to].ord;
    if (!checked) {
        if (ub >= lb) {
            graph->order_valid = 0;
        }
        edge_link(graph, from, to);
        return ORDO_OK;
    }
    if (graph->order_valid && ub < lb) {
        edge_link(graph, from, to); /* agrees with the order */
        return ORDO_OK;
    }
    uint32_t nf = 0;
    if (search_forward(graph, to, from, ub, graph->order_valid, cycle, &nf)) {
        return ORDO_ERR_DEADLOCK;
    }
    if (graph->order_valid) {
        uint32_t nb = search_backward(graph, from, lb);
        reorder(graph, nf, nb);
    }
    edge_link(graph, from, to);
    return ORDO_OK;
}

void ordo__op_graph_remove_in_edges(op_graph_t *graph, uint32_t node, void (*fn)(void *, uint32_t),
                                    void *ctx) {
    op_graph_node_t *n = &graph->nodes[node];
    while (n->first_in != OP_GRAPH_NONE) {
        uint32_t from = graph->edges[n->first_in].from;
        edge_unlink(graph, n->first_in);
        if (fn) {
            fn(ctx, from);
        }
    }
}

int ordo__op_graph_order_consistent(const op_graph_t *graph) {
    for (uint32_t node = 0; node < graph->node_cap; ++node) {
        const op_graph_node_t *n = &graph->nodes[node];
        if (n->ord == OP_GRAPH_NONE) {
            continue;
        }
        if (n->ord >= graph->at_used || graph->at[n->ord] != node) {
            return 0;
        }
        for (uint32_t e = n->first_out; e != OP_GRAPH_NONE; e = graph->edges[e].next_out) {
            if (graph->nodes[graph->edges[e].to].ord <= n->ord) {
                return 0;
            }
        }
    }
    return 1;
}

/* ---- cycles (Tarjan) ------------------------------------------------------------ */

#define UNSEEN UINT32_MAX

typedef struct tarjan {
    uint32_t *index;  /* visiting order; UNSEEN */
    uint32_t *low;    /* lowest index reachable through the DFS subtree */
    uint32_t *comp;   /* component number once assigned; UNSEEN while on the stack */
    uint32_t *stack;  /* nodes of components not yet closed */
    uint32_t *call_n; /* the DFS call stack: node and its next edge */
    uint32_t *call_e;
    uint32_t *parent; /* BFS for a cycle path */
    uint32_t *queue;
    uint32_t *seen; /* BFS marks: component number + 1 */
    uint32_t *path; /* the cycle reported */
} tarjan_t;

#define TARJAN_ARRAYS 10

/* A shortest cycle through root within its component, written to path
 * (root first); returns its length. */
static size_t component_cycle(const op_graph_t *graph, tarjan_t *t, uint32_t root, uint32_t comp,
                              uint32_t *path) {
    uint32_t head = 0;
    uint32_t tail = 0;
    t->queue[tail++] = root;
    t->seen[root] = comp + 1;
    t->parent[root] = OP_GRAPH_NONE;
    while (head < tail) {
        uint32_t u = t->queue[head++];
        for (uint32_t e = graph->nodes[u].first_out; e != OP_GRAPH_NONE;
             e = graph->edges[e].next_out) {
            uint32_t w = graph->edges[e].to;
            if (w == root) {
                /* u -> root closes the cycle: walk back to root. */
                size_t length = 0;
                for (uint32_t x = u; x != OP_GRAPH_NONE; x = t->parent[x]) {
                    path[length++] = x;
                }
                for (size_t a = 0, b = length - 1; a < b; ++a, --b) {
                    uint32_t tmp = path[a];
                    path[a] = path[b];
                    path[b] = tmp;
                }
                return length;
            }
            if (t->comp[w] == comp && t->seen[w] != comp + 1) {
                t->seen[w] = comp + 1;
                t->parent[w] = u;
                t->queue[tail++] = w;
            }
        }
    }
    return 0; /* not reached: a component of more than one node is strongly connected */
}

ordo_status_t ordo__op_graph_find_cycles(op_graph_t *graph, op_graph_cycle_fn fn, void *ctx) {
    size_t n = graph->node_cap;
    if (n == 0) {
        return ORDO_OK;
    }
    uint32_t *block = ordo__alloc(n * TARJAN_ARRAYS * sizeof *block, 0);
    if (!block) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    tarjan_t t = {block,         block + n,     block + 2 * n, block + 3 * n, block + 4 * n,
                  block + 5 * n, block + 6 * n, block + 7 * n, block + 8 * n, block + 9 * n};
    for (size_t i = 0; i < n; ++i) {
        t.index[i] = UNSEEN;
        t.comp[i] = UNSEEN;
        t.seen[i] = 0;
    }
    uint32_t next_index = 0;
    uint32_t next_comp = 0;
    uint32_t top = 0; /* of t.stack */
    /* Roots in topological order, so results come in a stable order. */
    for (uint32_t r = 0; r < graph->at_used; ++r) {
        uint32_t root = graph->at[r];
        if (root == OP_GRAPH_NONE || t.index[root] != UNSEEN) {
            continue;
        }
        uint32_t depth = 0;
        t.index[root] = t.low[root] = next_index++;
        t.stack[top++] = root;
        t.call_n[depth] = root;
        t.call_e[depth++] = graph->nodes[root].first_out;
        while (depth) {
            uint32_t v = t.call_n[depth - 1];
            uint32_t e = t.call_e[depth - 1];
            if (e != OP_GRAPH_NONE) {
                t.call_e[depth - 1] = graph->edges[e].next_out;
                uint32_t w = graph->edges[e].to;
                if (t.index[w] == UNSEEN) {
                    t.index[w] = t.low[w] = next_index++;
                    t.stack[top++] = w;
                    t.call_n[depth] = w;
                    t.call_e[depth++] = graph->nodes[w].first_out;
                } else if (t.comp[w] == UNSEEN && t.index[w] < t.low[v]) {
                    t.low[v] = t.index[w]; /* w is on the stack */
                }
                continue;
            }
            depth--;
            if (depth && t.low[v] < t.low[t.call_n[depth - 1]]) {
                t.low[t.call_n[depth - 1]] = t.low[v];
            }
            if (t.low[v] != t.index[v]) {
                continue;
            }
            /* v roots a component: the stack down to v. */
            uint32_t first = top;
            do {
                t.comp[t.stack[--first]] = next_comp;
            } while (t.stack[first] != v);
            size_t members = top - first;
            int cyclic = members > 1 || ordo__op_graph_has_edge(graph, v, v);
            if (cyclic && fn) {
                size_t length = component_cycle(graph, &t, v, next_comp, t.path);
                fn(ctx, &t.stack[first], members, t.path, length);
            }
            top = first;
            next_comp++;
        }
    }
    ordo__dealloc(block, n * TARJAN_ARRAYS * sizeof *block, 0);
    return ORDO_OK;
}
