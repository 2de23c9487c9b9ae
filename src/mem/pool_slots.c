/* The pool's slots: small requests (up to the pool's slot_max_bytes) are
 * served from runs, blocks the pool takes from its chunks and cuts into
 * slots of one size class. A slot is never split or joined: freed, it goes
 * to its class's list in the freeing stream's bins whole, and a request of
 * its class takes it whole. A run whose slots are all free goes back to
 * the chunks as one free block.
 *
 * Part of pool.c's translation unit (pool.c includes it after
 * pool_frontier.c; it is not compiled on its own). */
#ifndef ORDO_POOL_UNIT
#error "pool_slots.c is a part of pool.c, which includes it"
#endif

/* The allocation's searches of the blocks (pool.c), which runs are cut
 * from. */
POOL_HOT pool_block_t *find_own(pool_t *p, size_t size, uint32_t t, pool_block_t **out_uncovered);
static ordo_status_t find_elsewhere_or_grow(pool_t *p, const mem_request_t *request, size_t size,
                                            uint32_t t, pool_block_t *uncovered,
                                            pool_block_t **out_block);

/* --- Slot lists --- */

/* Puts free slot b at the head of affinity a's list of its class. */
POOL_HOT void slot_link(pool_t *p, pool_block_t *b, unsigned a) {
    pool_bins_t *bins = p->bins[a];
    b->affinity = (uint8_t)a;
    list_push(&bins->slot_head[b->cls], &bins->slots_nonempty, b->cls, b);
    p->affinity_mask |= affinity_bit(a);
}

POOL_HOT void slot_unlink(pool_t *p, pool_block_t *b) {
    pool_bins_t *bins = p->bins[b->affinity];
    list_unlink(&bins->slot_head[b->cls], &bins->slots_nonempty, b->cls, b);
}

/* The first of the first POOL_SCAN slots from head on that t may reuse
 * without waiting, or NULL; *out_uncovered as in bin_best_fit. */
POOL_HOT pool_block_t *slot_first_covered(const pool_t *p, pool_block_t *head, uint32_t t,
                                          pool_block_t **out_uncovered) {
    unsigned scanned = 0;
    for (pool_block_t *b = head; b && scanned < POOL_SCAN; b = b->bin_next, ++scanned) {
        if (covered(p, b, t)) {
            return b;
        }
        if (!*out_uncovered) {
            *out_uncovered = b;
        }
    }
    return NULL;
}

/* A slot of class c freed on t itself (counted as a same-stream reuse),
 * or NULL; *out_uncovered as in slot_first_covered. */
POOL_HOT pool_block_t *find_own_slot(pool_t *p, unsigned c, uint32_t t,
                                     pool_block_t **out_uncovered) {
    pool_block_t *b = p->affinity_mask >> t & 1
                          ? slot_first_covered(p, p->bins[t]->slot_head[c], t, out_uncovered)
                          : NULL;
    if (b) {
        ++p->stats.reuses_same_stream;
    }
    return b;
}

/* --- Runs --- */

/* Cuts a run for slots of class c from the blocks, for stream t. */
static ordo_status_t run_make(pool_t *p, const mem_request_t *request, unsigned c, uint32_t t,
                              pool_block_t **out_run) {
    size_t size = (size_t)run_slots(c) * class_max_units(c) * POOL_UNIT;
    pool_block_t *uncovered = NULL;
    pool_block_t *b = find_own(p, size, t, &uncovered);
    ordo_status_t st = ORDO_OK;
    if (!b && (st = find_elsewhere_or_grow(p, request, size, t, uncovered, &b)) != ORDO_OK) {
        return st;
    }
    b = carve(p, b, size, carve_descriptor(p, b, size));
    b->is_free = 0;
    b->kind = POOL_KIND_RUN;
    b->affinity = (uint8_t)t;
    b->cls = (uint8_t)c;
    b->run.made = 0;
    ++p->stats.runs;
    *out_run = b;
    return ORDO_OK;
}

/* Gives run, whose slots are all gone, back to the chunks as a free block
 * with death frontier death[0..n) (none: settled; else in the bins of the
 * stream that made it). */
static void run_release_with(pool_t *p, pool_block_t *run, const pool_death_t *death, unsigned n) {
    pool_bins_t *owner = p->bins[run->affinity];
    if (owner && owner->run[run->cls] == run) {
        owner->run[run->cls] = NULL;
    }
    --p->stats.runs;
    run->kind = POOL_KIND_BLOCK;
    run->is_free = 1;
    run->affinity = n ? run->affinity : POOL_SETTLED;
    run->death_count = (uint8_t)n;
    death_copy(run->death, death, n);
    coalesce_and_bin(p, run);
}

/* Moves the free slots of affinity a that have settled to the settled
 * lists. */
static void settle_slots(pool_t *p, unsigned a) {
    pool_bins_t *bins = p->bins[a];
    for (uint64_t mask = bins->slots_nonempty; mask; mask &= mask - 1) {
        for (pool_block_t *b = bins->slot_head[__builtin_ctzll(mask)], *next; b; b = next) {
            next = b->bin_next;
            if (death_settle(p, b)) {
                slot_unlink(p, b);
                slot_link(p, b, POOL_SETTLED);
            }
        }
    }
}

/* Runs body for every free slot b, in every list (body may unlink b). */
#define FOR_EACH_FREE_SLOT(p, b, body)                                                             \
    for (unsigned a_ = 0; a_ < POOL_AFFINITIES; ++a_) {                                            \
        if (!(p)->bins[a_]) {                                                                      \
            continue;                                                                              \
        }                                                                                          \
        for (uint64_t m_ = (p)->bins[a_]->slots_nonempty; m_; m_ &= m_ - 1) {                      \
            for (pool_block_t *b = (p)->bins[a_]->slot_head[__builtin_ctzll(m_)], *n_; b;          \
                 b = n_) {                                                                         \
                n_ = b->bin_next;                                                                  \
                body                                                                               \
            }                                                                                      \
        }                                                                                          \
    }

/* Gives every run whose slots are all free back to the chunks, settled or
 * not: the run's block gets the union of its slots' death frontiers, so
 * whoever reuses it is ordered after every use of every slot. A run whose
 * union has more entries than a block keeps stays. Called before the pool
 * grows, so that memory idle in slots of one size serves other sizes
 * before more is reserved. Non-zero if a run went back. */
static int release_free_runs(pool_t *p) {
    if (!p->stats.runs) {
        return 0;
    }
    FOR_EACH_FREE_SLOT(p, b, { b->addr_prev->run.scratch = 0; })
    FOR_EACH_FREE_SLOT(p, b, { ++b->addr_prev->run.scratch; })
    /* Each run whose slots are all free collects them in its bin_next
     * chain (a run is in no bin). */
    pool_block_t *runs = NULL;
    FOR_EACH_FREE_SLOT(p, b, {
        pool_block_t *run = b->addr_prev;
        if (run->run.scratch == run->run.made) {
            if (run->is_free != 3) {
                run->is_free = 3; /* collecting */
                run->bin_next = NULL;
                run->bin_prev = runs;
                runs = run;
            }
            slot_unlink(p, b);
            b->bin_next = run->bin_next;
            run->bin_next = b;
        }
    })
    int released = 0;
    while (runs) {
        pool_block_t *run = runs;
        runs = run->bin_prev;
        run->is_free = 0;
        pool_death_t death[POOL_DEATH_MAX];
        uint8_t count = 0;
        int fits = 1;
        for (pool_block_t *b = run->bin_next; b && fits; b = b->bin_next) {
            fits = death_merge_many(death, &count, b);
        }
        for (pool_block_t *b = run->bin_next, *next; b; b = next) {
            next = b->bin_next;
            if (fits) {
                descriptor_put(p, b);
            } else {
                slot_link(p, b, b->affinity);
            }
        }
        if (fits) {
            run_release_with(p, run, death, count);
            released = 1;
        }
    }
    return released;
}

/* --- Allocation of a slot past the stream's own list --- */

/* A free slot of class c for stream t past its own list: a settled one,
 * one freed on another stream and ordered before t, a new one from t's
 * run, by policy one t must wait for, or one from a new run. The slot is
 * left in its list. */
static __attribute__((noinline)) ordo_status_t
slot_elsewhere_or_make(pool_t *p, const mem_request_t *request, unsigned c, uint32_t t,
                       pool_block_t *uncovered, pool_block_t **out_slot) {
    static const char api[] = "ordo_mem_allocate";
    pool_block_t *b = p->bins[POOL_SETTLED]->slot_head[c];
    for (uint64_t mask = p->affinity_mask & ~((uint64_t)1 << t); !b && mask; mask &= mask - 1) {
        b = slot_first_covered(p, p->bins[__builtin_ctzll(mask)]->slot_head[c], t, &uncovered);
    }
    if (b) {
        ++p->stats.reuses_known;
        *out_slot = b;
        return ORDO_OK;
    }
    ordo_status_t st = bins_ensure(p, t, api);
    if (st != ORDO_OK) {
        return st;
    }
    pool_block_t *run = p->bins[t]->run[c];
    if (!run || run->run.made == run_slots(c)) {
        if (uncovered) {
            if (p->config.reuse == ORDO_MEM_REUSE_WAIT) {
                if ((st = wait_for_death(p, t, uncovered)) != ORDO_OK) {
                    return st;
                }
                ++p->stats.reuses_waited;
                *out_slot = uncovered;
                return ORDO_OK;
            }
            ++p->stats.blocks_skipped;
        }
        if ((st = run_make(p, request, c, t, &run)) != ORDO_OK) {
            return st;
        }
        p->bins[t]->run[c] = run;
    }
    b = descriptor_take(p);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the pool's bookkeeping");
    }
    b->kind = POOL_KIND_SLOT;
    b->cls = (uint8_t)c;
    b->chunk = run->chunk;
    b->size = (size_t)class_max_units(c) * POOL_UNIT;
    b->start = run->start + run->run.made * b->size;
    b->addr_prev = run;
    b->addr_next = NULL;
    b->is_free = 1;
    /* Born free on t: were it left in t's list (the caller fails before
     * handing it out), another stream, or the run's release, must still
     * be ordered after t's taking of the run's memory. */
    b->death_count = 1;
    b->death[0] = (pool_death_t){t, tracker_new_point(p->tracker, t)};
    ++run->run.made;
    slot_link(p, b, t);
    *out_slot = b;
    return ORDO_OK;
}
