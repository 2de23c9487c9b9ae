/* The operation graph against a reference: Tarjan's strongly connected
 * components, written here independently over an adjacency matrix. On
 * thousands of seeded random graphs, a checked edge is refused exactly when
 * the reference says it would close a cycle, and the cycles listed for a
 * graph built unchecked are exactly the reference's components. */
#include <string.h>

#include "coord/op_graph.h"
#include "test_util.h"

/* ---- the reference -------------------------------------------------------------- */

#define REF_MAX 256

typedef struct ref_graph {
    int n;
    unsigned char present[REF_MAX];
    unsigned char adj[REF_MAX][REF_MAX]; /* adj[u][v]: u -> v */
} ref_graph_t;

typedef struct ref_tarjan {
    const ref_graph_t *g;
    int index[REF_MAX];
    int low[REF_MAX];
    int on_stack[REF_MAX];
    int stack[REF_MAX];
    int top;
    int next;
    int comp[REF_MAX]; /* component number */
    int comps;
} ref_tarjan_t;

static void ref_connect(ref_tarjan_t *t, int v) {
    t->index[v] = t->low[v] = t->next++;
    t->stack[t->top++] = v;
    t->on_stack[v] = 1;
    for (int w = 0; w < t->g->n; ++w) {
        if (!t->g->adj[v][w]) {
            continue;
        }
        if (t->index[w] < 0) {
            ref_connect(t, w);
            if (t->low[w] < t->low[v]) {
                t->low[v] = t->low[w];
            }
        } else if (t->on_stack[w] && t->index[w] < t->low[v]) {
            t->low[v] = t->index[w];
        }
    }
    if (t->low[v] == t->index[v]) {
        int w;
        do {
            w = t->stack[--t->top];
            t->on_stack[w] = 0;
            t->comp[w] = t->comps;
        } while (w != v);
        t->comps++;
    }
}

static void ref_scc(const ref_graph_t *g, ref_tarjan_t *t) {
    memset(t, 0, sizeof *t);
    t->g = g;
    for (int v = 0; v < g->n; ++v) {
        t->index[v] = -1;
        t->comp[v] = -1;
    }
    for (int v = 0; v < g->n; ++v) {
        if (g->present[v] && t->index[v] < 0) {
            ref_connect(t, v);
        }
    }
}

/* Would u -> v close a cycle? Tarjan on the graph with the edge added. */
static int ref_would_cycle(ref_graph_t *g, int u, int v) {
    if (u == v) {
        return 1;
    }
    unsigned char had = g->adj[u][v];
    g->adj[u][v] = 1;
    static ref_tarjan_t t;
    ref_scc(g, &t);
    g->adj[u][v] = had;
    return t.comp[u] == t.comp[v];
}

static void ref_remove(ref_graph_t *g, int v) {
    g->present[v] = 0;
    for (int w = 0; w < g->n; ++w) {
        g->adj[v][w] = g->adj[w][v] = 0;
    }
}

/* ---- helpers ---------------------------------------------------------------------- */

static uint64_t seed_state = 0x243f6a8885a308d3u;

static int rand_below(int n) {
    return (int)(test_rand(&seed_state) % (uint64_t)n);
}

static void graph_from_scratch(op_graph_t *g, ref_graph_t *ref, int n) {
    ordo__op_graph_init(g);
    memset(ref, 0, sizeof *ref);
    ref->n = n;
    for (int v = 0; v < n; ++v) {
        assert_ok(ordo__op_graph_add_node(g, (uint32_t)v));
        ref->present[v] = 1;
    }
}

/* The graph's edges are exactly the reference's. */
static void assert_same_edges(const op_graph_t *g, const ref_graph_t *ref) {
    for (int u = 0; u < ref->n; ++u) {
        if (!ref->present[u]) {
            assert_false(op_graph_contains(g, (uint32_t)u));
            continue;
        }
        uint32_t out = 0;
        for (int v = 0; v < ref->n; ++v) {
            out += ref->adj[u][v];
            assert_int_equal(ordo__op_graph_has_edge(g, (uint32_t)u, (uint32_t)v), ref->adj[u][v]);
        }
        assert_int_equal(op_graph_out_degree(g, (uint32_t)u), out);
    }
}

/* ---- checked insertion ----------------------------------------------------------- */

static void refusal_matches_tarjan(void **state) {
    (void)state;
    static ref_graph_t ref;
    const int graphs = (int)test_scaled(3000);
    uint64_t refused = 0;
    uint64_t accepted = 0;
    uint64_t t_end = ordo_time_now_ns() + 15000000000ull;
    for (int round = 0; round < graphs && ordo_time_now_ns() < t_end; ++round) {
        int n = 2 + rand_below(round % 10 == 0 ? 120 : 24);
        op_graph_t g;
        graph_from_scratch(&g, &ref, n);
        int attempts = rand_below(4 * n) + 1;
        for (int a = 0; a < attempts; ++a) {
            if (rand_below(20) == 0) {
                /* Retire a node and bring its id back as a new node: it is
                 * then ordered after everything. */
                int v = rand_below(n);
                ordo__op_graph_remove_node(&g, (uint32_t)v);
                ref_remove(&ref, v);
                assert_ok(ordo__op_graph_add_node(&g, (uint32_t)v));
                ref.present[v] = 1;
                continue;
            }
            int u = rand_below(n);
            int v = rand_below(n);
            int expect = ref_would_cycle(&ref, u, v);
            uint32_t nodes[REF_MAX + 1];
            op_graph_path_t path = {nodes, REF_MAX + 1, 0};
            ordo_status_t st = ordo__op_graph_add_edge(&g, (uint32_t)u, (uint32_t)v, 1, &path);
            if (expect) {
                assert_int_equal(st, ORDO_ERR_DEADLOCK);
                refused++;
                /* The path runs v -> ... -> u along edges of the graph. */
                assert_true(path.length >= 1);
                assert_int_equal(nodes[0], (uint32_t)v);
                assert_int_equal(nodes[path.length - 1], (uint32_t)u);
                for (size_t k = 0; k + 1 < path.length; ++k) {
                    assert_true(ref.adj[nodes[k]][nodes[k + 1]]);
                }
            } else {
                assert_ok(st);
                accepted += !ref.adj[u][v];
                ref.adj[u][v] = 1;
            }
            assert_true(g.order_valid);
            assert_true(ordo__op_graph_order_consistent(&g));
        }
        assert_same_edges(&g, &ref);
        ordo__op_graph_fini(&g);
    }
    /* Both outcomes were exercised in quantity. */
    assert_true(refused > 1000 / ORDO_TEST_SCALE_DIVISOR);
    assert_true(accepted > 1000 / ORDO_TEST_SCALE_DIVISOR);
}

/* ---- listing cycles ------------------------------------------------------------------ */

typedef struct found_cycles {
    const ref_graph_t *ref;
    const ref_tarjan_t *tarjan;
    int count;
    int seen_comp[REF_MAX];
} found_cycles_t;

static void on_cycle(void *ctx, const uint32_t *members, size_t member_count, const uint32_t *cycle,
                     size_t cycle_length) {
    found_cycles_t *f = ctx;
    int comp = f->tarjan->comp[members[0]];
    size_t expect_members = 0;
    for (int v = 0; v < f->ref->n; ++v) {
        expect_members += f->ref->present[v] && f->tarjan->comp[v] == comp;
    }
    /* The members are exactly one reference component, reported once. */
    assert_int_equal(member_count, expect_members);
    for (size_t i = 0; i < member_count; ++i) {
        assert_int_equal(f->tarjan->comp[members[i]], comp);
    }
    assert_false(f->seen_comp[comp]);
    f->seen_comp[comp] = 1;
    /* The cycle: distinct members, consecutive edges, closing edge. */
    assert_true(cycle_length >= 1 && cycle_length <= member_count);
    assert_int_equal(cycle[0], members[0]); /* through the component's root */
    unsigned char used[REF_MAX] = {0};
    for (size_t i = 0; i < cycle_length; ++i) {
        assert_int_equal(f->tarjan->comp[cycle[i]], comp);
        assert_false(used[cycle[i]]);
        used[cycle[i]] = 1;
        uint32_t next = cycle[(i + 1) % cycle_length];
        assert_true(f->ref->adj[cycle[i]][next]);
    }
    f->count++;
}

static void check_cycles(op_graph_t *g, const ref_graph_t *ref) {
    static ref_tarjan_t t;
    ref_scc(ref, &t);
    int expect = 0;
    for (int c = 0; c < t.comps; ++c) {
        int size = 0;
        int self_loop = 0;
        for (int v = 0; v < ref->n; ++v) {
            if (ref->present[v] && t.comp[v] == c) {
                size++;
                self_loop |= ref->adj[v][v];
            }
        }
        expect += size > 1 || self_loop;
    }
    static found_cycles_t found;
    memset(&found, 0, sizeof found);
    found.ref = ref;
    found.tarjan = &t;
    assert_ok(ordo__op_graph_find_cycles(g, on_cycle, &found));
    assert_int_equal(found.count, expect);
}

static void detect_matches_tarjan(void **state) {
    (void)state;
    static ref_graph_t ref;
    const int graphs = (int)test_scaled(3000);
    int with_cycles = 0;
    uint64_t t_end = ordo_time_now_ns() + 15000000000ull;
    for (int round = 0; round < graphs && ordo_time_now_ns() < t_end; ++round) {
        int n = 1 + rand_below(round % 10 == 0 ? 200 : 30);
        op_graph_t g;
        graph_from_scratch(&g, &ref, n);
        /* Sparse to dense: few edges give acyclic graphs, many give one
         * big component, in between several small ones. */
        int edges = rand_below(n * (1 + round % 3)) + 1;
        for (int a = 0; a < edges; ++a) {
            int u = rand_below(n);
            int v = rand_below(n);
            if (u == v && rand_below(8) != 0) {
                continue; /* a few self-loops */
            }
            assert_ok(ordo__op_graph_add_edge(&g, (uint32_t)u, (uint32_t)v, 0, NULL));
            ref.adj[u][v] = 1;
        }
        for (int r = rand_below(3); r > 0; --r) {
            int v = rand_below(n);
            ordo__op_graph_remove_node(&g, (uint32_t)v);
            ref_remove(&ref, v);
        }
        assert_same_edges(&g, &ref);
        check_cycles(&g, &ref);
        static ref_tarjan_t t;
        ref_scc(&ref, &t);
        with_cycles += t.comps < n;
        /* A checked insertion on a graph whose order is broken still
         * answers exactly (without bounds). */
        int u = rand_below(n);
        int v = rand_below(n);
        if (ref.present[u] && ref.present[v]) {
            /* (An edge present already is a no-op, even on a cycle.) */
            int expect = ref_would_cycle(&ref, u, v) && (u == v || !ref.adj[u][v]);
            ordo_status_t st = ordo__op_graph_add_edge(&g, (uint32_t)u, (uint32_t)v, 1, NULL);
            assert_int_equal(st, expect ? ORDO_ERR_DEADLOCK : ORDO_OK);
        }
        ordo__op_graph_fini(&g);
    }
    assert_true(with_cycles > 100 / ORDO_TEST_SCALE_DIVISOR);
}

static void acyclic_graph_lists_nothing(void **state) {
    (void)state;
    op_graph_t g;
    ordo__op_graph_init(&g);
    assert_ok(ordo__op_graph_find_cycles(&g, on_cycle, NULL)); /* empty */
    for (uint32_t v = 0; v < 100; ++v) {
        assert_ok(ordo__op_graph_add_node(&g, v));
        if (v) {
            assert_ok(ordo__op_graph_add_edge(&g, v - 1, v, 1, NULL));
        }
    }
    assert_ok(ordo__op_graph_find_cycles(&g, on_cycle, NULL)); /* on_cycle would crash */
    /* Duplicates are no-ops; a self-loop is refused when checked. */
    assert_ok(ordo__op_graph_add_edge(&g, 0, 1, 1, NULL));
    assert_int_equal(op_graph_out_degree(&g, 0), 1);
    uint32_t node = 77;
    op_graph_path_t path = {&node, 1, 0};
    assert_int_equal(ordo__op_graph_add_edge(&g, 5, 5, 1, &path), ORDO_ERR_DEADLOCK);
    assert_int_equal(path.length, 1);
    assert_int_equal(node, 5);
    /* A refused long cycle reports its whole length, stores what fits. */
    uint32_t nodes[4];
    op_graph_path_t small = {nodes, 4, 0};
    assert_int_equal(ordo__op_graph_add_edge(&g, 99, 0, 1, &small), ORDO_ERR_DEADLOCK);
    assert_int_equal(small.length, 100);
    assert_int_equal(nodes[0], 0);
    assert_int_equal(nodes[3], 3);
    ordo__op_graph_fini(&g);
}

/* ---- incremental cost --------------------------------------------------------------- */

static void search_stays_in_the_affected_region(void **state) {
    (void)state;
    const uint32_t n = (uint32_t)test_scaled(200000);
    op_graph_t g;
    ordo__op_graph_init(&g);
    for (uint32_t v = 0; v < n; ++v) {
        assert_ok(ordo__op_graph_add_node(&g, v));
    }
    /* Edges that agree with the order: no search at all. */
    for (uint32_t v = 0; v + 2 < n; v += 2) {
        assert_ok(ordo__op_graph_add_edge(&g, v, v + 2, 1, NULL));
    }
    assert_int_equal(g.visited, 0);
    /* Edges against the order between neighbours in it: the search sees
     * the few nodes between them, not the graph. */
    uint64_t t0 = ordo_time_now_ns();
    uint32_t added = 0;
    for (uint32_t v = 1; v + 1 < n; v += 4) {
        uint64_t before = g.visited;
        assert_ok(ordo__op_graph_add_edge(&g, v + 1, v, 1, NULL)); /* v+1 before v */
        assert_true(g.visited - before <= 4);
        added++;
    }
    uint64_t elapsed = ordo_time_now_ns() - t0;
    assert_true(ordo__op_graph_order_consistent(&g));
    /* Far below a walk of the graph per edge (n * added node visits). */
    assert_true(g.visited <= 4ull * added);
    print_message("%u reordering insertions into %u nodes: %.1f ns each, %.2f nodes visited\n",
                  added, n, (double)elapsed / added, (double)g.visited / added);
    /* The one edge that closes the long even chain is refused. */
    assert_int_equal(ordo__op_graph_add_edge(&g, (n - 1) & ~1u, 0, 1, NULL),
                     (n - 1) & ~1u ? ORDO_ERR_DEADLOCK : ORDO_OK);
    ordo__op_graph_fini(&g);
}

static void large_random_dag_in_bounded_time(void **state) {
    (void)state;
    const uint32_t n = (uint32_t)test_scaled(8000);
    const uint32_t m = 4 * n;
    op_graph_t g;
    ordo__op_graph_init(&g);
    for (uint32_t v = 0; v < n; ++v) {
        assert_ok(ordo__op_graph_add_node(&g, v));
    }
    /* A hidden order: edges go from lower to higher rank, inserted in
     * random order, so none is refused but many go against the graph's
     * current order. */
    uint32_t *rank = calloc(n, sizeof *rank);
    for (uint32_t v = 0; v < n; ++v) {
        rank[v] = v;
    }
    for (uint32_t v = n - 1; v > 0; --v) {
        uint32_t k = (uint32_t)rand_below((int)v + 1);
        uint32_t tmp = rank[v];
        rank[v] = rank[k];
        rank[k] = tmp;
    }
    uint64_t t0 = ordo_time_now_ns();
    for (uint32_t e = 0; e < m; ++e) {
        uint32_t a = (uint32_t)rand_below((int)n);
        uint32_t span = 1 + (uint32_t)rand_below(64); /* mostly local edges */
        uint32_t b = a + span < n ? a + span : n - 1;
        if (a == b) {
            continue;
        }
        /* From the node ranked a to the one ranked b. */
        assert_ok(ordo__op_graph_add_edge(&g, rank[a], rank[b], 1, NULL));
    }
    uint64_t elapsed = ordo_time_now_ns() - t0;
    assert_true(ordo__op_graph_order_consistent(&g));
    print_message("%u edges into %u nodes: %.0f ns each, %.1f nodes visited per edge\n", m, n,
                  (double)elapsed / m, (double)g.visited / m);
    ordo__op_graph_fini(&g);
    free(rank);
}

static void removal_and_compaction_keep_the_order(void **state) {
    (void)state;
    op_graph_t g;
    ordo__op_graph_init(&g);
    /* A sliding window of live nodes: ids are reused, indices run out and
     * are compacted again and again. */
    const uint32_t window = 64;
    for (uint32_t step = 0; step < 20000; ++step) {
        uint32_t v = step % (2 * window);
        if (op_graph_contains(&g, v)) {
            ordo__op_graph_remove_node(&g, v);
        }
        assert_ok(ordo__op_graph_add_node(&g, v));
        for (int k = 0; k < 3; ++k) {
            /* v is new, without out-edges: u -> v cannot close a cycle. */
            uint32_t u = (uint32_t)rand_below((int)(2 * window));
            if (op_graph_contains(&g, u) && u != v) {
                assert_ok(ordo__op_graph_add_edge(&g, u, v, 1, NULL));
            }
        }
        for (int k = 0; k < 3; ++k) {
            /* Any two live nodes: a reorder, or a refusal. */
            uint32_t a = (uint32_t)rand_below((int)(2 * window));
            uint32_t b = (uint32_t)rand_below((int)(2 * window));
            if (op_graph_contains(&g, a) && op_graph_contains(&g, b)) {
                ordo_status_t st = ordo__op_graph_add_edge(&g, a, b, 1, NULL);
                assert_true(st == ORDO_OK || st == ORDO_ERR_DEADLOCK);
            }
        }
        assert_true(g.live <= 2 * window);
    }
    assert_true(ordo__op_graph_order_consistent(&g));
    assert_true(g.at_cap <= 8 * window); /* indices did not grow with the steps */
    ordo__op_graph_fini(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refusal_matches_tarjan),
        cmocka_unit_test(detect_matches_tarjan),
        cmocka_unit_test(acyclic_graph_lists_nothing),
        cmocka_unit_test(search_stays_in_the_affected_region),
        cmocka_unit_test(large_random_dag_in_bounded_time),
        cmocka_unit_test(removal_and_compaction_keep_the_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
