#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracker_model.h"

typedef struct node {
    uint32_t stream;
    size_t access_count;
    model_access_t *accesses;
    uint64_t *ancestors; /* bitset over node ids */
} node_t;

struct model {
    uint32_t streams;
    uint32_t max_nodes;
    uint32_t node_count;
    size_t words;
    node_t *nodes;
    uint32_t *last_on_stream; /* node id + 1, 0: none */
    uint32_t **stream_nodes;  /* per stream: node ids by point - 1 */
    uint32_t *stream_points;  /* submissions per stream */
    uint64_t **carry;         /* per stream: what cancelled submissions had waited for */
    /* The open submission's ancestors before its waits, and its waits: at
     * its end, no wait may be implied by the others. */
    uint64_t *base;
    uint32_t wait_count;
    uint32_t *wait_origin; /* per wait, at most one per other stream */
    uint64_t *wait_node;   /* the origin's node the wait orders through */
    int open;              /* between begin and end */
    int skip_hazards;      /* model_skip_hazards */
    size_t violations;
    char first[256];
};

model_t *model_create(uint32_t streams, uint32_t max_submissions) {
    model_t *m = calloc(1, sizeof *m);
    m->streams = streams;
    m->max_nodes = max_submissions;
    m->words = (max_submissions + 63) / 64;
    m->nodes = calloc(max_submissions, sizeof *m->nodes);
    m->last_on_stream = calloc(streams, sizeof *m->last_on_stream);
    m->stream_points = calloc(streams, sizeof *m->stream_points);
    m->stream_nodes = calloc(streams, sizeof *m->stream_nodes);
    m->carry = calloc(streams, sizeof *m->carry);
    m->base = calloc(m->words ? m->words : 1, sizeof(uint64_t));
    m->wait_origin = calloc(streams, sizeof *m->wait_origin);
    m->wait_node = calloc(streams, sizeof *m->wait_node);
    for (uint32_t s = 0; s < streams; ++s) {
        m->stream_nodes[s] = calloc(max_submissions, sizeof(uint32_t));
        m->carry[s] = calloc(m->words ? m->words : 1, sizeof(uint64_t));
    }
    return m;
}

void model_free(model_t *m) {
    for (uint32_t i = 0; i < m->node_count; ++i) {
        free(m->nodes[i].ancestors);
        free(m->nodes[i].accesses);
    }
    for (uint32_t s = 0; s < m->streams; ++s) {
        free(m->stream_nodes[s]);
        free(m->carry[s]);
    }
    free(m->carry);
    free(m->base);
    free(m->wait_origin);
    free(m->wait_node);
    free(m->stream_nodes);
    free(m->stream_points);
    free(m->last_on_stream);
    free(m->nodes);
    free(m);
}

static void violation(model_t *m, const char *what) {
    if (m->violations++ == 0) {
        snprintf(m->first, sizeof m->first, "%s", what);
    }
}

static int has(const uint64_t *set, uint32_t id) {
    return (set[id / 64] >> (id % 64)) & 1u;
}

/* set |= ancestors(id) | {id} */
static void absorb(model_t *m, uint64_t *set, uint32_t id) {
    const uint64_t *other = m->nodes[id].ancestors;
    for (size_t w = 0; w < m->words; ++w) {
        set[w] |= other[w];
    }
    set[id / 64] |= (uint64_t)1 << (id % 64);
}

void model_begin(model_t *m, uint32_t stream, const model_access_t *accesses, size_t count) {
    if (m->open || m->node_count == m->max_nodes || stream >= m->streams) {
        violation(m, "model misuse: begin without end, too many submissions or bad stream");
        return;
    }
    node_t *n = &m->nodes[m->node_count];
    n->stream = stream;
    n->access_count = count;
    n->accesses = calloc(count ? count : 1, sizeof *n->accesses);
    memcpy(n->accesses, accesses, count * sizeof *accesses);
    n->ancestors = calloc(m->words, sizeof(uint64_t));
    if (m->last_on_stream[stream]) {
        absorb(m, n->ancestors, m->last_on_stream[stream] - 1); /* program order */
    }
    for (size_t w = 0; w < m->words; ++w) {
        n->ancestors[w] |= m->carry[stream][w]; /* waits of cancelled submissions */
    }
    memcpy(m->base, n->ancestors, m->words * sizeof(uint64_t));
    m->wait_count = 0;
    m->open = 1;
}

void model_on_wait(model_t *m, uint32_t waiting, uint32_t origin, uint64_t origin_point,
                   uint64_t needed_point) {
    node_t *n = &m->nodes[m->node_count];
    char what[256];
    if (!m->open || waiting != n->stream || origin >= m->streams || origin == waiting ||
        needed_point == 0 || origin_point < needed_point ||
        origin_point > m->stream_points[origin]) {
        snprintf(what, sizeof what,
                 "malformed wait: stream %u on %u, point %llu for %llu (origin has %u points)",
                 waiting, origin, (unsigned long long)origin_point,
                 (unsigned long long)needed_point,
                 origin < m->streams ? m->stream_points[origin] : 0);
        violation(m, what);
        return;
    }
    uint32_t needed = m->stream_nodes[origin][needed_point - 1];
    if (has(n->ancestors, needed)) {
        snprintf(what, sizeof what,
                 "redundant wait: submission %u (stream %u) already follows stream %u point %llu",
                 m->node_count, waiting, origin, (unsigned long long)needed_point);
        violation(m, what);
    }
    /* The wait orders everything up to origin_point before this node. */
    absorb(m, n->ancestors, m->stream_nodes[origin][origin_point - 1]);
    if (m->wait_count == m->streams) {
        violation(m, "malformed waits: more waits in one submission than streams");
        return;
    }
    m->wait_origin[m->wait_count] = origin;
    m->wait_node[m->wait_count] = m->stream_nodes[origin][origin_point - 1];
    m->wait_count++;
}

static int conflicts(const node_t *a, const node_t *b) {
    for (size_t i = 0; i < a->access_count; ++i) {
        for (size_t j = 0; j < b->access_count; ++j) {
            if (a->accesses[i].buffer == b->accesses[j].buffer &&
                ((a->accesses[i].mode | b->accesses[j].mode) & ORDO_ACCESS_WRITE)) {
                return 1;
            }
        }
    }
    return 0;
}

/* Each wait of the open submission must be needed: without it, some
 * cross-stream hazard of the submission would be unordered by the other
 * waits and what the stream knew before them. (Not "its needed point is
 * ordered by the others": a wait may go through a later record of its
 * stream than its own need, to order a third stream's need that record
 * knows.) */
static void check_waits_needed(model_t *m) {
    const node_t *n = &m->nodes[m->node_count];
    uint64_t *set = calloc(m->words ? m->words : 1, sizeof(uint64_t));
    for (uint32_t i = 0; i < m->wait_count; ++i) {
        memcpy(set, m->base, m->words * sizeof(uint64_t));
        for (uint32_t j = 0; j < m->wait_count; ++j) {
            if (j != i) {
                absorb(m, set, (uint32_t)m->wait_node[j]);
            }
        }
        int needed = 0;
        for (uint32_t e = 0; e < m->node_count && !needed; ++e) {
            needed = m->nodes[e].stream != n->stream && conflicts(&m->nodes[e], n) && !has(set, e);
        }
        if (!needed) {
            char what[256];
            snprintf(what, sizeof what,
                     "redundant wait: submission %u (stream %u) waits for stream %u, "
                     "though its other waits order every hazard",
                     m->node_count, n->stream, m->wait_origin[i]);
            violation(m, what);
        }
    }
    free(set);
}

void model_end(model_t *m) {
    if (!m->open) {
        violation(m, "model misuse: end without begin");
        return;
    }
    uint32_t id = m->node_count;
    node_t *n = &m->nodes[id];
    check_waits_needed(m);
    for (uint32_t e = 0; e < id; ++e) {
        if (!m->skip_hazards && m->nodes[e].stream != n->stream && conflicts(&m->nodes[e], n) &&
            !has(n->ancestors, e)) {
            char what[256];
            snprintf(what, sizeof what,
                     "unordered hazard: submission %u (stream %u) and %u (stream %u)", e,
                     m->nodes[e].stream, id, n->stream);
            violation(m, what);
        }
    }
    m->stream_nodes[n->stream][m->stream_points[n->stream]++] = id;
    m->last_on_stream[n->stream] = id + 1;
    m->node_count++;
    m->open = 0;
}

void model_skip_hazards(model_t *m) {
    m->skip_hazards = 1;
}

void model_cancel(model_t *m) {
    if (!m->open) {
        violation(m, "model misuse: cancel without begin");
        return;
    }
    node_t *n = &m->nodes[m->node_count];
    /* The waits it emitted stay on its stream: later work there follows
     * what they waited for. */
    for (size_t w = 0; w < m->words; ++w) {
        m->carry[n->stream][w] |= n->ancestors[w];
    }
    free(n->ancestors);
    free(n->accesses);
    memset(n, 0, sizeof *n);
    m->open = 0;
}

size_t model_violations(const model_t *m, const char **out_first) {
    if (out_first) {
        *out_first = m->first;
    }
    return m->violations;
}
