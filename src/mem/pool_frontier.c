/* The pool's policy: death frontiers.
 *
 * Freeing a block computes its death frontier: the last use on every
 * stream that the freeing stream has not already waited for, plus a fresh
 * point of the freeing stream itself. A free block is reusable on stream T
 * once T's frontier covers every entry (an entry on T itself is covered: T
 * runs in order). That is a comparison of a few integers; nothing is
 * polled. When no covered block fits, the pool orders T after the entries
 * it lacks on the device, or takes another block (its reuse policy).
 *
 * Here: what covers an entry, what the host knows complete (settled), the
 * device waits that order a stream after a frontier, the joining of two
 * frontiers when free neighbours become one block (the range allocator's
 * hooks), and the settling of free blocks. Frontiers are read through the
 * tracker's interface (core/frontier.h).
 *
 * Part of pool.c's translation unit (pool.c includes it after
 * pool_range.c; it is not compiled on its own). */
#ifndef ORDO_POOL_UNIT
#error "pool_frontier.c is a part of pool.c, which includes it"
#endif

/* Copies n death entries. One entry (a block used on one stream) is the
 * common case; the compiler turns a loop into `rep movs`, whose start-up
 * costs more than copying a few entries, so each count up to the maximum
 * is a fixed-size copy. */
static inline void death_copy(pool_death_t *to, const pool_death_t *from, unsigned n) {
    _Static_assert(POOL_DEATH_MAX == 6, "one case per count");
    switch (n) {
    case 6:
        to[5] = from[5];
        /* fall through */
    case 5:
        to[4] = from[4];
        /* fall through */
    case 4:
        to[3] = from[3];
        /* fall through */
    case 3:
        to[2] = from[2];
        /* fall through */
    case 2:
        to[1] = from[1];
        /* fall through */
    case 1:
        to[0] = from[0];
        /* fall through */
    default:
        break;
    }
}

/* Non-zero when stream t may reuse b without waiting: t has waited for
 * every use in b's death frontier (an entry on t itself: t runs in order). */
static int covered_by_frontier(const pool_t *p, const pool_block_t *b, uint32_t t) {
    for (unsigned i = 0; i < b->death_count; ++i) {
        if (!frontier_covers(p->tracker, t, b->death[i].stream, b->death[i].point)) {
            return 0;
        }
    }
    return 1;
}

/* The common cases first: a block last used on one stream, t itself or
 * another. */
static inline __attribute__((always_inline)) int covered(const pool_t *p, const pool_block_t *b,
                                                         uint32_t t) {
    if (ORDO_LIKELY(b->death_count == 1)) {
        return frontier_covers(p->tracker, t, b->death[0].stream, b->death[0].point);
    }
    return covered_by_frontier(p, b, t);
}

/* Non-zero when the host knows stream s's point `point` complete, with
 * everything it stands for. A death frontier leaves out the uses the
 * freeing stream had waited for: its point stands for them. A healthy
 * stream's reached point completes them (its waits ran first). A failed
 * stream runs nothing more, but the waits it had enqueued may never have
 * run either, so its point vouches only for its own work: what it had
 * waited for (its frontier, which only grows) must be complete on its own,
 * on the streams that ran it. *visited: failed streams already expanded. */
static int point_settled(const pool_t *p, uint32_t s, uint64_t point, uint64_t *visited) {
    const ordo_tracker_t *tracker = p->tracker;
    signal_view_t view = ordo__signal_view(frontier_timeline(tracker, s));
    if (view.value >= point) {
        return 1; /* reached (a failed timeline keeps the value it reached) */
    }
    if (!view.ended && ordo__hal_stream_failure(frontier_stream(tracker, s)) == ORDO_OK) {
        return 0;
    }
    uint64_t bit = (uint64_t)1 << s;
    if (*visited & bit) {
        return 1; /* its frontier is being checked already */
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u] && !point_settled(p, u, waited[u], visited)) {
            return 0;
        }
    }
    return 1;
}

/* Non-zero when everything of other streams that stream s had waited for
 * (its frontier) is complete on its own: s's point then vouches for
 * nothing of theirs, whether s goes on or fails. */
static int frontier_others_settled(const pool_t *p, uint32_t s) {
    uint64_t visited = (uint64_t)1 << s;
    const uint64_t *waited = frontier_of(p->tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(p->tracker); ++u) {
        if (u != s && waited[u] && !point_settled(p, u, waited[u], &visited)) {
            return 0;
        }
    }
    return 1;
}

static int death_settled(const pool_t *p, const pool_death_t *d) {
    uint64_t visited = 0;
    return point_settled(p, d->stream, d->point, &visited);
}

/* Orders t after stream s's point `point` and what it stands for (see
 * point_settled), with device waits on healthy streams only: a failed
 * stream's entry is replaced by the points it had waited for. */
static ordo_status_t wait_for_point(pool_t *p, uint32_t t, uint32_t s, uint64_t point,
                                    uint64_t *visited) {
    ordo_tracker_t *tracker = p->tracker;
    if (frontier_covers(tracker, t, s, point)) {
        return ORDO_OK;
    }
    if (ordo__hal_stream_failure(frontier_stream(tracker, s)) == ORDO_OK) {
        return ordo__tracker_wait_for(tracker, t, s, point);
    }
    uint64_t value = ordo__signal_reached(frontier_timeline(tracker, s));
    uint64_t bit = (uint64_t)1 << s;
    if (value >= point || (*visited & bit)) {
        return ORDO_OK;
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u]) {
            ORDO_RETURN_IF_ERROR(wait_for_point(p, t, u, waited[u], visited));
        }
    }
    return ORDO_OK;
}

/* Orders t after every entry of b's death frontier, on the device, so
 * that t may take b. An entry of a failed stream (it runs no more work) is
 * replaced by what that stream had waited for. */
static ordo_status_t wait_for_death(pool_t *p, uint32_t t, const pool_block_t *b) {
    uint64_t visited = 0;
    for (unsigned i = 0; i < b->death_count; ++i) {
        ordo_status_t st = wait_for_point(p, t, b->death[i].stream, b->death[i].point, &visited);
        if (st != ORDO_OK) {
            /* The wait ordo enqueued was refused (t has failed): named for
             * the allocation, the call the user made. */
            return ordo__error_as(st, "ordo_mem_allocate");
        }
    }
    return ORDO_OK;
}

/* Raises need[] to the points of healthy streams the host must see reached
 * before stream s's point `point` is settled (see point_settled). */
static void need_point(const pool_t *p, uint32_t s, uint64_t point, uint64_t *need,
                       uint64_t *visited) {
    const ordo_tracker_t *tracker = p->tracker;
    signal_view_t view = ordo__signal_view(frontier_timeline(tracker, s));
    if (view.value >= point) {
        return;
    }
    if (!view.ended && ordo__hal_stream_failure(frontier_stream(tracker, s)) == ORDO_OK) {
        if (need[s] < point) {
            need[s] = point;
        }
        return;
    }
    uint64_t bit = (uint64_t)1 << s;
    if (*visited & bit) {
        return;
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u]) {
            need_point(p, u, waited[u], need, visited);
        }
    }
}

/* Merges b's frontier into into (maximum per stream); zero if the result
 * has more entries than a block keeps. */
static int death_merge_many(pool_death_t *into, uint8_t *count, const pool_block_t *b) {
    pool_death_t merged[POOL_DEATH_MAX];
    unsigned n = *count;
    death_copy(merged, into, n);
    for (unsigned i = 0; i < b->death_count; ++i) {
        unsigned j = 0;
        while (j < n && merged[j].stream != b->death[i].stream) {
            ++j;
        }
        if (j < n) {
            if (merged[j].point < b->death[i].point) {
                merged[j].point = b->death[i].point;
            }
        } else if (n == POOL_DEATH_MAX) {
            return 0;
        } else {
            merged[n++] = b->death[i];
        }
    }
    death_copy(into, merged, n);
    *count = (uint8_t)n;
    return 1;
}

/* death_merge_many, after the common case: both used on one stream. */
static inline __attribute__((always_inline)) int death_merge(pool_death_t *into, uint8_t *count,
                                                             const pool_block_t *b) {
    if (ORDO_LIKELY(*count == 1 && b->death_count == 1 && into[0].stream == b->death[0].stream)) {
        if (into[0].point < b->death[0].point) {
            into[0].point = b->death[0].point;
        }
        return 1;
    }
    return death_merge_many(into, count, b);
}

/* --- Joining free neighbours (the range allocator's hooks) --- */

/* Free neighbours join when their frontiers fit together in one block:
 * the joined frontier is the maximum of both, so reusing the joined block
 * waits for every use of either. A settled block that joins an unsettled
 * one takes that one's affinity: the settled bins hold only blocks with
 * nothing pending. */
POOL_HOT int pool_may_join(pool_block_t *b, const pool_block_t *other, uint8_t *affinity) {
    if (!death_merge(b->death, &b->death_count, other)) {
        return 0;
    }
    if (*affinity == POOL_SETTLED) {
        *affinity = other->affinity;
    }
    return 1;
}

POOL_HOT void pool_join_carry(pool_block_t *keep, const pool_block_t *b) {
    keep->death_count = b->death_count;
    death_copy(keep->death, b->death, b->death_count);
}

/* --- Settling (explicit calls only: reap, trim, destroy, out of memory) --- */

/* Drops the death entries the host knows complete from b; non-zero when
 * none is left. */
static int death_settle(const pool_t *p, pool_block_t *b) {
    unsigned kept = 0;
    for (unsigned i = 0; i < b->death_count; ++i) {
        if (!death_settled(p, &b->death[i])) {
            b->death[kept++] = b->death[i];
        }
    }
    b->death_count = (uint8_t)kept;
    return !kept;
}

/* Moves the free blocks of stream a's bins whose death entries have all
 * settled to the settled bins, joining them with free neighbours. */
static void settle_blocks(pool_t *p, unsigned a) {
    /* Collect first: moving blocks changes the lists being walked. */
    pool_bins_t *bins = p->bins[a];
    pool_block_t *done = NULL;
    for (unsigned c = 0; c < POOL_CLASSES; ++c) {
        for (pool_block_t *b = bins->head[c], *next; b; b = next) {
            next = b->bin_next;
            if (death_settle(p, b)) {
                bin_remove(p, b);
                b->is_free = 2; /* out of its bin: not to be merged yet */
                b->bin_next = done;
                done = b;
            }
        }
    }
    while (done) {
        pool_block_t *b = done;
        done = b->bin_next;
        b->is_free = 1;
        b->affinity = POOL_SETTLED;
        coalesce_and_bin(p, b);
    }
}
