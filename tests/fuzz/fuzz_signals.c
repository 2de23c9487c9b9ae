/* libFuzzer target: timeline signals, timepoints, links and waits.
 *
 * Each input is a bounded program over a few signals, timepoints and links:
 * create (values in and out of range), signal, fail (any status, with or
 * without a message), query, failure read, names, retain / release /
 * destroy (and calls on destroyed signals whose memory a reference still
 * holds, which the header promises to detect), waits, wait-all and
 * wait-any with past or short deadlines, timepoints armed and cancelled,
 * links armed and cancelled (chains and cycles of them), NULL handles and
 * outputs, and a handle of no type. A model of every signal's value,
 * failure, name and references, and of every timepoint and link, predicts
 * each call's status and outputs, each callback's outcome, and what links
 * pass on; every failed call must name itself in ordo_error_message() and
 * empty its outputs. Everything is destroyed at the end of the input, and
 * ordo's host blocks must be back to their count before it.
 *
 * Known defects: none in this harness today. */
#include "fuzz_common.h"

#define SIGNALS 4
#define TIMEPOINTS 4
#define LINKS 4
#define MAX_OPS 96

typedef struct model_signal {
    ordo_signal_t *handle; /* NULL once the harness holds no reference */
    unsigned refs;         /* references the harness holds */
    int destroyed;
    uint64_t value;
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    char name[ORDO_SIGNAL_NAME_MAX];
} model_signal_t;

typedef enum { TP_IDLE, TP_ARMED, TP_FIRED } tp_state_t;

typedef struct model_tp {
    ordo_timepoint_t tp;
    tp_state_t state;
    int signal; /* model slot it is armed on */
    uint64_t value;
    /* What the model predicts once fired, and what the callback saw. */
    ordo_status_t expected;
    unsigned expected_calls;
    ordo_status_t got;
    unsigned calls;
} model_tp_t;

typedef struct model_link {
    ordo_link_t link;
    tp_state_t state;
    int source, target;
    uint64_t source_value, target_value;
    uint64_t armed_seq; /* orders links armed for the same value */
} model_link_t;

static model_signal_t sig[SIGNALS];
static model_tp_t tps[TIMEPOINTS];
static model_link_t links[LINKS];

static void on_timepoint(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    model_tp_t *t = ctx;
    FUZZ_CHECK(timepoint == &t->tp, "a timepoint callback got another timepoint");
    t->got = status;
    ++t->calls;
}

/* ------------------------------------------------------------ model */

static void model_fire(int slot);

/* Links that became due, in the order the library runs them: those of one
 * signal by value, then in the order they were armed; those that become
 * due while another link's callback runs are queued behind it, not run at
 * once (ordo/timepoint.h). */
static struct {
    int link;
    ordo_status_t outcome;
} due_links[4 * LINKS];
static size_t due_head, due_tail;
static int due_draining;
static uint64_t links_armed;

static void model_raise(int slot, uint64_t value) {
    model_signal_t *s = &sig[slot];
    if (s->destroyed || s->failure != ORDO_OK || value <= s->value) {
        return;
    }
    s->value = value;
    model_fire(slot);
}

static void model_fail(int slot, ordo_status_t status, const char *message) {
    model_signal_t *s = &sig[slot];
    if (s->destroyed || s->failure != ORDO_OK) {
        return;
    }
    s->failure = status;
    snprintf(s->message, sizeof s->message, "%s", message ? message : "");
    model_fire(slot);
}

static void model_destroy(int slot) {
    sig[slot].destroyed = 1;
    model_fire(slot);
}

/* The outcome, for something armed on slot for value: 0 while pending. */
static int model_outcome(int slot, uint64_t value, ordo_status_t *out) {
    const model_signal_t *s = &sig[slot];
    if (s->value >= value) {
        *out = ORDO_OK;
        return 1;
    }
    if (s->failure != ORDO_OK) {
        *out = s->failure;
        return 1;
    }
    if (s->destroyed) {
        *out = ORDO_ERR_CANCELLED;
        return 1;
    }
    return 0;
}

/* The rule of docs/ERRORS.md, stated again: a failure passed on keeps the
 * text where it began, past the prefixes hops put before it (a link's, a
 * wait's with its status). */
static const char *model_origin(const char *m) {
    static const char link[] = "linked source failed: ";
    static const char unreached[] = "waited-on signal was not reached: its stream failed: ";
    static const char failed[] = "waited-on signal failed: ";
    for (;;) {
        size_t status = 0;
        if (!strncmp(m, failed, sizeof failed - 1)) {
            /* A status's name then ": " (any name ordo_status_name gives). */
            for (int st = 0; !status && st <= ORDO_STATUS_COUNT_; ++st) {
                const char *name = ordo_status_name((ordo_status_t)st);
                size_t n = strlen(name);
                const char *at = m + sizeof failed - 1;
                status = !strncmp(at, name, n) && at[n] == ':' && at[n + 1] == ' ' ? n + 2 : 0;
            }
        }
        if (!strncmp(m, link, sizeof link - 1)) {
            m += sizeof link - 1;
        } else if (!strncmp(m, unreached, sizeof unreached - 1)) {
            m += sizeof unreached - 1;
        } else if (status) {
            m += sizeof failed - 1 + status;
        } else {
            return m;
        }
    }
}

static void link_fire(model_link_t *l, ordo_status_t outcome) {
    l->state = TP_FIRED;
    if (outcome == ORDO_OK) {
        model_raise(l->target, l->target_value);
    } else if (sig[l->source].failure != ORDO_OK) {
        char text[ORDO_SIGNAL_MESSAGE_MAX + 32];
        snprintf(text, sizeof text, "linked source failed: %s",
                 model_origin(sig[l->source].message));
        text[ORDO_SIGNAL_MESSAGE_MAX - 1] = '\0';
        model_fail(l->target, outcome, text);
    } else {
        model_fail(l->target, ORDO_ERR_CANCELLED,
                   "linked source signal was destroyed before reaching its value");
    }
}

/* Fires what is armed on slot and now decided. */
static void model_fire(int slot) {
    for (int i = 0; i < TIMEPOINTS; ++i) {
        ordo_status_t outcome;
        if (tps[i].state == TP_ARMED && tps[i].signal == slot &&
            model_outcome(slot, tps[i].value, &outcome)) {
            tps[i].state = TP_FIRED;
            tps[i].expected = outcome;
            ++tps[i].expected_calls;
        }
    }
    /* Collect this signal's due links in the library's order: insertion
     * sort by (value, arming order). */
    int order[LINKS];
    ordo_status_t outcomes[LINKS];
    int n = 0;
    for (int i = 0; i < LINKS; ++i) {
        ordo_status_t outcome;
        if (links[i].state == TP_ARMED && links[i].source == slot &&
            model_outcome(slot, links[i].source_value, &outcome)) {
            links[i].state = TP_FIRED; /* due: no longer collected */
            int k = n++;
            while (k > 0 && (links[order[k - 1]].source_value > links[i].source_value ||
                             (links[order[k - 1]].source_value == links[i].source_value &&
                              links[order[k - 1]].armed_seq > links[i].armed_seq))) {
                order[k] = order[k - 1];
                outcomes[k] = outcomes[k - 1];
                --k;
            }
            order[k] = i;
            outcomes[k] = outcome;
        }
    }
    for (int k = 0; k < n; ++k) {
        FUZZ_CHECK(due_tail - due_head < sizeof due_links / sizeof due_links[0],
                   "the model's queue of due links overflowed");
        size_t at = due_tail++ % (sizeof due_links / sizeof due_links[0]);
        due_links[at].link = order[k];
        due_links[at].outcome = outcomes[k];
    }
    if (due_draining) {
        return; /* inside a link's callback: run after it, in order */
    }
    due_draining = 1;
    while (due_head != due_tail) {
        size_t at = due_head++ % (sizeof due_links / sizeof due_links[0]);
        link_fire(&links[due_links[at].link], due_links[at].outcome);
    }
    due_draining = 0;
}

/* The library agrees with the model: values, failures, callbacks. */
static void model_compare(void) {
    for (int i = 0; i < SIGNALS; ++i) {
        model_signal_t *s = &sig[i];
        if (!s->handle) {
            continue;
        }
        uint64_t value = 12345;
        ordo_status_t st = FUZZ_CALL(ordo_signal_query, s->handle, &value);
        ordo_status_t want = s->destroyed ? ORDO_ERR_DESTROYED : s->failure;
        FUZZ_EXPECT(st, want, "ordo_signal_query");
        FUZZ_CHECK(value == s->value, "signal %d holds %llu, the model %llu", i,
                   (unsigned long long)value, (unsigned long long)s->value);
        ordo_status_t failure = ORDO_ERR_INTERNAL;
        char message[ORDO_SIGNAL_MESSAGE_MAX + 8];
        st = FUZZ_CALL(ordo_signal_failure, s->handle, &failure, message, sizeof message);
        FUZZ_EXPECT(st, ORDO_OK, "ordo_signal_failure");
        FUZZ_EXPECT(failure, s->failure, "the failure read");
        FUZZ_CHECK(strcmp(message, s->failure != ORDO_OK ? s->message : "") == 0,
                   "signal %d's failure message is \"%s\", the model's \"%s\"", i, message,
                   s->message);
    }
    for (int i = 0; i < TIMEPOINTS; ++i) {
        FUZZ_CHECK(tps[i].calls == tps[i].expected_calls,
                   "timepoint %d's callback ran %u times, the model expects %u", i, tps[i].calls,
                   tps[i].expected_calls);
        if (tps[i].calls) {
            FUZZ_EXPECT(tps[i].got, tps[i].expected, "a timepoint's outcome");
        }
    }
}

/* ------------------------------------------------------------ ops */

/* A slot whose memory the harness holds, or -1. */
static int pick_held(fuzz_input_t *in) {
    int first = fuzz_u8(in) % SIGNALS;
    for (int k = 0; k < SIGNALS; ++k) {
        int i = (first + k) % SIGNALS;
        if (sig[i].handle) {
            return i;
        }
    }
    return -1;
}

static void op_create(fuzz_input_t *in) {
    int slot = fuzz_u8(in) % SIGNALS;
    uint64_t initial = fuzz_value(in);
    if (sig[slot].handle) {
        return;
    }
    for (int i = 0; i < LINKS; ++i) {
        if (links[i].state == TP_ARMED && links[i].target == slot) {
            return; /* the model's slot still stands for the old target */
        }
    }
    ordo_signal_t *handle;
    fuzz_sentinel(handle);
    ordo_status_t st = FUZZ_CALL(ordo_signal_create, initial, &handle);
    FUZZ_EXPECT(st, initial > ORDO_SIGNAL_VALUE_MAX ? ORDO_ERR_OUT_OF_RANGE : ORDO_OK,
                "ordo_signal_create");
    FUZZ_EMPTY_ON_FAILURE(st, handle, "ordo_signal_create");
    if (st == ORDO_OK) {
        memset(&sig[slot], 0, sizeof sig[slot]);
        sig[slot].handle = handle;
        sig[slot].refs = 1;
        sig[slot].value = initial;
    }
}

static void op_signal(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    uint64_t v = fuzz_value(in);
    ordo_status_t want = ORDO_OK;
    if (v > ORDO_SIGNAL_VALUE_MAX) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if (s->destroyed) {
        want = ORDO_ERR_DESTROYED;
    } else if (s->failure != ORDO_OK) {
        want = s->failure;
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, s->handle, v), want, "ordo_signal_advance");
    if (want == ORDO_OK) {
        model_raise(slot, v);
    }
}

static void op_fail(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    uint8_t b = fuzz_u8(in);
    ordo_status_t status = (ordo_status_t)(b % (ORDO_STATUS_COUNT_ + 2)) - (b & 0x80 ? 1 : 0);
    char buf[256];
    const char *message = fuzz_u8(in) & 1 ? fuzz_text(in, buf, sizeof buf) : NULL;
    ordo_status_t want = ORDO_OK;
    if (!ordo_status_is_error(status)) {
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if (s->destroyed) {
        want = ORDO_ERR_DESTROYED;
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_signal_fail, s->handle, status, message), want, "ordo_signal_fail");
    if (want == ORDO_OK) {
        model_fail(slot, status, message);
    }
}

static void op_failure_read(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    size_t capacity = fuzz_u8(in) % 24;
    char message[24];
    ordo_status_t failure;
    fuzz_sentinel(failure);
    ordo_status_t st = FUZZ_CALL(ordo_signal_failure, s->handle, &failure, message, capacity);
    FUZZ_EXPECT(st, capacity == 0 ? ORDO_ERR_INVALID_ARGUMENT : ORDO_OK, "ordo_signal_failure");
    FUZZ_EMPTY_ON_FAILURE(st, failure, "ordo_signal_failure");
    if (st == ORDO_OK) {
        FUZZ_EXPECT(failure, s->failure, "the failure read");
        const char *text = s->failure != ORDO_OK ? s->message : "";
        FUZZ_CHECK(strlen(message) < capacity && strncmp(message, text, capacity - 1) == 0,
                   "failure message \"%s\" is not \"%s\" cut to %zu bytes", message, text,
                   capacity);
    }
}

static void op_names(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    if (fuzz_u8(in) & 1) {
        char buf[80];
        const char *name = fuzz_u8(in) & 1 ? fuzz_text(in, buf, sizeof buf) : NULL;
        ordo_status_t st = FUZZ_CALL(ordo_signal_set_name, s->handle, name);
        FUZZ_EXPECT(st, s->destroyed ? ORDO_ERR_DESTROYED : ORDO_OK, "ordo_signal_set_name");
        if (st == ORDO_OK) {
            snprintf(s->name, sizeof s->name, "%s", name ? name : "");
        }
        return;
    }
    size_t capacity = fuzz_u8(in) % 64;
    char out[64];
    ordo_status_t st = FUZZ_CALL(ordo_signal_name, s->handle, out, capacity);
    FUZZ_EXPECT(st, capacity == 0 ? ORDO_ERR_INVALID_ARGUMENT : ORDO_OK, "ordo_signal_name");
    if (st != ORDO_OK) {
        return;
    }
    char full[ORDO_SIGNAL_NAME_MAX + 32];
    if (s->name[0]) {
        snprintf(full, sizeof full, "%s", s->name);
    } else {
        snprintf(full, sizeof full, "%p", (void *)s->handle);
    }
    FUZZ_CHECK(strlen(out) < capacity && strncmp(out, full, capacity - 1) == 0,
               "ordo_signal_name gave \"%s\", not \"%s\" cut to %zu bytes", out, full, capacity);
}

static void op_wait(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    uint64_t v = fuzz_value(in);
    ordo_deadline_t deadline = fuzz_deadline(in);
    ordo_status_t want;
    if (v > ORDO_SIGNAL_VALUE_MAX) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if (s->destroyed) {
        want = ORDO_ERR_DESTROYED;
    } else if (!model_outcome(slot, v, &want)) {
        want = ORDO_ERR_TIMEOUT;
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_signal_wait, s->handle, v, deadline), want, "ordo_signal_wait");
}

static void op_multiwait(fuzz_input_t *in) {
    int any = fuzz_u8(in) & 1;
    size_t count = fuzz_u8(in) % 5;
    ordo_signal_point_t points[4];
    int slots[4];
    for (size_t i = 0; i < count; ++i) {
        slots[i] = pick_held(in);
        if (slots[i] < 0) {
            return;
        }
        points[i] = (ordo_signal_point_t){sig[slots[i]].handle, fuzz_value(in)};
    }
    ordo_deadline_t deadline = fuzz_deadline(in);
    /* The model: the first refused entry; else the first deciding entry. */
    ordo_status_t want = count ? ORDO_OK : ORDO_ERR_INVALID_ARGUMENT;
    size_t want_index = count;
    int refused = count == 0;
    for (size_t i = 0; i < count && !refused; ++i) {
        if (points[i].value > ORDO_SIGNAL_VALUE_MAX) {
            want = ORDO_ERR_OUT_OF_RANGE;
            refused = 1;
        } else if (sig[slots[i]].destroyed) {
            want = ORDO_ERR_DESTROYED;
            refused = 1;
        }
    }
    if (!refused) {
        size_t reached = 0;
        int decided = 0;
        for (size_t i = 0; i < count && !decided; ++i) {
            ordo_status_t outcome;
            if (model_outcome(slots[i], points[i].value, &outcome)) {
                if (outcome != ORDO_OK || any) {
                    want = outcome;
                    want_index = i;
                    decided = 1;
                }
                reached += outcome == ORDO_OK;
            }
        }
        if (!decided && reached != count) {
            want = ORDO_ERR_TIMEOUT;
        }
    }
    if (any) {
        size_t index;
        fuzz_sentinel(index);
        ordo_status_t st =
            FUZZ_CALL(ordo_signal_wait_any, count ? points : NULL, count, deadline, &index);
        FUZZ_EXPECT(st, want, "ordo_signal_wait_any");
        FUZZ_CHECK(index == want_index, "ordo_signal_wait_any: index %zu, the model %zu", index,
                   want_index);
    } else {
        ordo_status_t st = FUZZ_CALL(ordo_signal_wait_all, points, count, deadline);
        FUZZ_EXPECT(st, want, "ordo_signal_wait_all");
    }
}

static void drop_reference(int slot) {
    model_signal_t *s = &sig[slot];
    if (--s->refs == 0) {
        if (!s->destroyed) {
            model_destroy(slot); /* the last release destroys first */
        }
        s->handle = NULL;
    }
}

static void op_lifetime(fuzz_input_t *in, int slot) {
    model_signal_t *s = &sig[slot];
    switch (fuzz_u8(in) % 3) {
    case 0:
        if (s->destroyed) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, s->handle), ORDO_ERR_DESTROYED,
                        "ordo_signal_destroy");
            return;
        }
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, s->handle), ORDO_OK, "ordo_signal_destroy");
        model_destroy(slot);
        drop_reference(slot);
        return;
    case 1:
        if (s->refs < 4) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_retain, s->handle), ORDO_OK, "ordo_signal_retain");
            ++s->refs;
        }
        return;
    default:
        if (s->refs == 1 && !s->destroyed) {
            for (int i = 0; i < LINKS; ++i) {
                if (links[i].state == TP_ARMED &&
                    (links[i].source == slot || links[i].target == slot)) {
                    /* An armed link holds the signal: releasing the last
                     * reference of the harness would leave it alive and the
                     * link armed (link.h: end a source with destroy). */
                    return;
                }
            }
        }
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_release, s->handle), ORDO_OK, "ordo_signal_release");
        drop_reference(slot);
        return;
    }
}

static void op_timepoint(fuzz_input_t *in) {
    model_tp_t *t = &tps[fuzz_u8(in) % TIMEPOINTS];
    if (fuzz_u8(in) & 1) {
        ordo_cancel_result_t result;
        fuzz_sentinel(result);
        ordo_status_t st = FUZZ_CALL(ordo_timepoint_cancel, &t->tp, &result);
        if (t->state == TP_IDLE) {
            FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT, "ordo_timepoint_cancel");
            FUZZ_EMPTY_ON_FAILURE(st, result, "ordo_timepoint_cancel");
        } else {
            FUZZ_EXPECT(st, ORDO_OK, "ordo_timepoint_cancel");
            ordo_cancel_result_t want =
                t->state == TP_ARMED ? ORDO_CANCEL_PREVENTED : ORDO_CANCEL_TOO_LATE;
            FUZZ_CHECK(result == want, "ordo_timepoint_cancel: result %d, the model %d", result,
                       want);
            if (t->state == TP_ARMED) {
                t->state = TP_IDLE;
            }
        }
        return;
    }
    int slot = pick_held(in);
    if (slot < 0) {
        return;
    }
    uint64_t v = fuzz_value(in);
    ordo_status_t want = ORDO_OK;
    if (v > ORDO_SIGNAL_VALUE_MAX) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if (t->state == TP_ARMED) {
        want = ORDO_ERR_BUSY;
    } else if (sig[slot].destroyed) {
        want = ORDO_ERR_DESTROYED;
    }
    ordo_status_t st = FUZZ_CALL(ordo_timepoint_arm, &t->tp, sig[slot].handle, v, on_timepoint, t);
    FUZZ_EXPECT(st, want, "ordo_timepoint_arm");
    if (st == ORDO_OK) {
        t->state = TP_ARMED;
        t->signal = slot;
        t->value = v;
        model_fire(slot);
    }
}

static void op_link(fuzz_input_t *in) {
    model_link_t *l = &links[fuzz_u8(in) % LINKS];
    if (fuzz_u8(in) & 1) {
        ordo_cancel_result_t result;
        fuzz_sentinel(result);
        if (l->state == TP_ARMED && !sig[l->source].handle) {
            return; /* the source must stay alive while the link may be cancelled */
        }
        ordo_status_t st = FUZZ_CALL(ordo_link_cancel, &l->link, &result);
        if (l->state == TP_IDLE) {
            FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT, "ordo_link_cancel");
            FUZZ_EMPTY_ON_FAILURE(st, result, "ordo_link_cancel");
        } else {
            FUZZ_EXPECT(st, ORDO_OK, "ordo_link_cancel");
            ordo_cancel_result_t want =
                l->state == TP_ARMED ? ORDO_CANCEL_PREVENTED : ORDO_CANCEL_TOO_LATE;
            FUZZ_CHECK(result == want, "ordo_link_cancel: result %d, the model %d", result, want);
            if (l->state == TP_ARMED) {
                l->state = TP_IDLE;
            }
        }
        return;
    }
    int source = pick_held(in);
    int target = pick_held(in);
    if (source < 0) {
        return;
    }
    uint64_t sv = fuzz_value(in), tv = fuzz_value(in);
    /* Handles, then values, then state (docs/ERRORS.md); each in
     * parameter order, source before target. */
    ordo_status_t want = ORDO_OK;
    if (sv > ORDO_SIGNAL_VALUE_MAX || tv > ORDO_SIGNAL_VALUE_MAX) {
        want = ORDO_ERR_OUT_OF_RANGE;
    } else if (sig[source].destroyed || sig[target].destroyed) {
        want = ORDO_ERR_DESTROYED;
    } else if (l->state == TP_ARMED) {
        want = ORDO_ERR_BUSY;
    }
    ordo_status_t st =
        FUZZ_CALL(ordo_link_arm, &l->link, sig[source].handle, sv, sig[target].handle, tv);
    FUZZ_EXPECT(st, want, "ordo_link_arm");
    if (st == ORDO_OK) {
        l->state = TP_ARMED;
        l->armed_seq = ++links_armed;
        l->source = source;
        l->target = target;
        l->source_value = sv;
        l->target_value = tv;
        model_fire(source);
    }
}

/* NULL handles and outputs, and a live object of no ordo type. */
static void op_bad(fuzz_input_t *in) {
    ordo_signal_t *bad = fuzz_u8(in) & 1 ? NULL : FUZZ_GARBAGE(ordo_signal_t);
    uint64_t value;
    fuzz_sentinel(value);
    ordo_status_t st;
    switch (fuzz_u8(in) % 10) {
    case 0:
        st = FUZZ_CALL(ordo_signal_query, bad, &value);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_signal_query");
        FUZZ_EMPTY_ON_FAILURE(st, value, "ordo_signal_query");
        break;
    case 1:
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, bad, 1), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_advance");
        break;
    case 2:
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_fail, bad, ORDO_ERR_ABORTED, "x"),
                    ORDO_ERR_INVALID_HANDLE, "ordo_signal_fail");
        break;
    case 3:
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, bad), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_destroy");
        break;
    case 4:
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_retain, bad), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_retain");
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_release, bad), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_release");
        break;
    case 5:
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_wait, bad, 0, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_wait");
        break;
    case 6: {
        ordo_signal_point_t points[2] = {{bad, 0}, {bad, 0}};
        size_t index;
        fuzz_sentinel(index);
        st = FUZZ_CALL(ordo_signal_wait_any, points, 2, ORDO_DEADLINE_NOW, &index);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_signal_wait_any");
        FUZZ_CHECK(index == 2, "a refused wait_any left index %zu", index);
        FUZZ_EXPECT(
            FUZZ_CALL(ordo_signal_wait_all, points, ORDO_SIGNAL_WAIT_MAX + 1, ORDO_DEADLINE_NOW),
            ORDO_ERR_OUT_OF_RANGE, "ordo_signal_wait_all");
        break;
    }
    case 7: {
        ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
        FUZZ_EXPECT(FUZZ_CALL(ordo_timepoint_arm, &tp, bad, 0, on_timepoint, NULL),
                    ORDO_ERR_INVALID_HANDLE, "ordo_timepoint_arm");
        ordo_link_t link = {0};
        FUZZ_EXPECT(FUZZ_CALL(ordo_link_arm, &link, bad, 0, bad, 0), ORDO_ERR_INVALID_HANDLE,
                    "ordo_link_arm");
        break;
    }
    case 8: {
        char name[8];
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_set_name, bad, "n"), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_set_name");
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_name, bad, name, sizeof name), ORDO_ERR_INVALID_HANDLE,
                    "ordo_signal_name");
        ordo_status_t failure;
        fuzz_sentinel(failure);
        st = FUZZ_CALL(ordo_signal_failure, bad, &failure, NULL, 0);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_signal_failure");
        FUZZ_EMPTY_ON_FAILURE(st, failure, "ordo_signal_failure");
        break;
    }
    default: {
        int slot = pick_held(in);
        if (slot < 0) {
            return;
        }
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_create, 0, NULL), ORDO_ERR_INVALID_ARGUMENT,
                    "ordo_signal_create");
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_query, sig[slot].handle, NULL), ORDO_ERR_INVALID_ARGUMENT,
                    "ordo_signal_query");
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_wait_any, NULL, 1, ORDO_DEADLINE_NOW, NULL),
                    ORDO_ERR_INVALID_ARGUMENT, "ordo_signal_wait_any");
        FUZZ_EXPECT(FUZZ_CALL(ordo_timepoint_arm, NULL, sig[slot].handle, 0, on_timepoint, NULL),
                    ORDO_ERR_INVALID_ARGUMENT, "ordo_timepoint_arm");
        FUZZ_EXPECT(FUZZ_CALL(ordo_link_arm, NULL, sig[slot].handle, 0, sig[slot].handle, 0),
                    ORDO_ERR_INVALID_ARGUMENT, "ordo_link_arm");
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_harness = "fuzz_signals";
    size_t before = fuzz_live_blocks();
    memset(sig, 0, sizeof sig);
    memset(tps, 0, sizeof tps);
    memset(links, 0, sizeof links);
    due_head = due_tail = 0;
    due_draining = 0;
    links_armed = 0;
    fuzz_input_t in = {data, size, 0};
    for (int ops = 0; ops < MAX_OPS && fuzz_more(&in); ++ops) {
        uint8_t op = fuzz_u8(&in);
        if (op % 13 == 0) {
            op_create(&in);
        } else if (op % 13 == 9) {
            op_multiwait(&in);
        } else if (op % 13 == 10) {
            op_timepoint(&in);
        } else if (op % 13 == 11) {
            op_link(&in);
        } else if (op % 13 == 12) {
            op_bad(&in);
        } else {
            int slot = pick_held(&in);
            if (slot < 0) {
                op_create(&in);
                continue;
            }
            switch (op % 13) {
            case 1:
            case 2:
                op_signal(&in, slot);
                break;
            case 3:
                op_fail(&in, slot);
                break;
            case 4:
                op_failure_read(&in, slot);
                break;
            case 5:
                op_names(&in, slot);
                break;
            case 6:
            case 7:
                op_wait(&in, slot);
                break;
            default:
                op_lifetime(&in, slot);
                break;
            }
        }
        model_compare();
    }
    /* Teardown: destroy every signal still held (which fires every armed
     * timepoint and link), then drop the harness's references. */
    for (int i = 0; i < SIGNALS; ++i) {
        if (sig[i].handle && !sig[i].destroyed) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, sig[i].handle), ORDO_OK,
                        "ordo_signal_destroy");
            model_destroy(i);
            drop_reference(i);
        }
    }
    model_compare();
    for (int i = 0; i < SIGNALS; ++i) {
        while (sig[i].handle) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_release, sig[i].handle), ORDO_OK,
                        "ordo_signal_release");
            drop_reference(i);
        }
    }
    for (int i = 0; i < TIMEPOINTS; ++i) {
        FUZZ_CHECK(tps[i].state != TP_ARMED, "timepoint %d still armed after teardown", i);
    }
    for (int i = 0; i < LINKS; ++i) {
        FUZZ_CHECK(links[i].state != TP_ARMED, "link %d still armed after teardown", i);
    }
    FUZZ_CHECK_BASELINE(before);
    return 0;
}
