/* trace_check FILE: validates a Chrome trace-event JSON file as ordo writes
 * it. The file must be well-formed JSON with a traceEvents array; every
 * event must have a phase; timed events must have a numeric ts, and on each
 * track (pid, tid) the timestamps must not go back and complete slices
 * ("X") must nest (none ends after one around it); every flow start ("s")
 * must have exactly one finish ("f") with the same id and the reverse; and
 * slices opened with "B" must be closed with "E" on the same track.
 * Strings must be valid UTF-8 (RFC 8259): no stray, overlong or truncated
 * sequences, no surrogates.
 * Prints a one-line summary; exits non-zero with the reason otherwise. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p;
    const char *end;
    const char *error;
} parser_t;

typedef struct event {
    char ph[4];
    double ts, dur;
    int has_ts;
    long long pid, tid, id;
    int has_id;
} event_t;

static void skip_space(parser_t *x) {
    while (x->p < x->end && isspace((unsigned char)*x->p)) {
        ++x->p;
    }
}

static int parse_fail(parser_t *x, const char *why) {
    if (!x->error) {
        x->error = why;
    }
    return 0;
}

static int parse_value(parser_t *x, int depth);

/* The length of the UTF-8 sequence at p (RFC 3629: shortest form, no
 * surrogates, at most U+10FFFF), or 0 when it is not one. */
static int utf8_length(const unsigned char *p, const unsigned char *end) {
    int n = p[0] < 0x80                    ? 1
            : p[0] >= 0xc2 && p[0] <= 0xdf ? 2
            : p[0] >= 0xe0 && p[0] <= 0xef ? 3
            : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                           : 0;
    if (!n || end - p < n) {
        return 0;
    }
    for (int i = 1; i < n; ++i) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f)) {
        return 0;
    }
    return n;
}

/* A string; its first out_capacity-1 bytes (unescaped enough for keys and
 * phases) go to out. */
static int parse_string(parser_t *x, char *out, size_t out_capacity) {
    size_t n = 0;
    if (x->p >= x->end || *x->p != '"') {
        return parse_fail(x, "expected a string");
    }
    for (++x->p; x->p < x->end && *x->p != '"'; ++x->p) {
        if ((unsigned char)*x->p < 0x20) {
            return parse_fail(x, "control character in a string");
        }
        if ((unsigned char)*x->p >= 0x80) {
            int length = utf8_length((const unsigned char *)x->p, (const unsigned char *)x->end);
            if (!length) {
                return parse_fail(x, "invalid UTF-8 in a string");
            }
            x->p += length - 1; /* the last byte goes to out below */
        }
        if (*x->p == '\\') {
            ++x->p;
            if (x->p >= x->end || !strchr("\"\\/bfnrtu", *x->p)) {
                return parse_fail(x, "bad escape in a string");
            }
            if (*x->p == 'u') {
                for (int i = 0; i < 4; ++i) {
                    if (++x->p >= x->end || !isxdigit((unsigned char)*x->p)) {
                        return parse_fail(x, "bad \\u escape");
                    }
                }
            }
        }
        if (out && n + 1 < out_capacity) {
            out[n++] = *x->p;
        }
    }
    if (x->p >= x->end) {
        return parse_fail(x, "unterminated string");
    }
    ++x->p;
    if (out) {
        out[n] = '\0';
    }
    return 1;
}

/* A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (strtod alone
 * would also take nan, inf, hex and a leading '+'). */
static int json_number_length(const char *p, const char *end) {
    const char *q = p;
    if (q < end && *q == '-') {
        ++q;
    }
    if (q >= end || !isdigit((unsigned char)*q)) {
        return 0;
    }
    if (*q == '0') {
        ++q;
    } else {
        while (q < end && isdigit((unsigned char)*q)) {
            ++q;
        }
    }
    if (q < end && *q == '.') {
        if (++q >= end || !isdigit((unsigned char)*q)) {
            return 0;
        }
        while (q < end && isdigit((unsigned char)*q)) {
            ++q;
        }
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        ++q;
        if (q < end && (*q == '+' || *q == '-')) {
            ++q;
        }
        if (q >= end || !isdigit((unsigned char)*q)) {
            return 0;
        }
        while (q < end && isdigit((unsigned char)*q)) {
            ++q;
        }
    }
    return (int)(q - p);
}

static int parse_number(parser_t *x, double *out) {
    int length = json_number_length(x->p, x->end);
    if (!length) {
        return parse_fail(x, "expected a number");
    }
    char *stop = NULL;
    double v = strtod(x->p, &stop);
    if (stop != x->p + length) {
        return parse_fail(x, "expected a number");
    }
    x->p = stop;
    if (out) {
        *out = v;
    }
    return 1;
}

static int parse_literal(parser_t *x, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(x->end - x->p) < n || memcmp(x->p, word, n) != 0) {
        return parse_fail(x, "unexpected token");
    }
    x->p += n;
    return 1;
}

static int parse_composite(parser_t *x, int depth, char open) {
    char close = open == '{' ? '}' : ']';
    ++x->p;
    skip_space(x);
    if (x->p < x->end && *x->p == close) {
        ++x->p;
        return 1;
    }
    for (;;) {
        skip_space(x);
        if (open == '{') {
            if (!parse_string(x, NULL, 0)) {
                return 0;
            }
            skip_space(x);
            if (x->p >= x->end || *x->p++ != ':') {
                return parse_fail(x, "expected ':'");
            }
        }
        if (!parse_value(x, depth + 1)) {
            return 0;
        }
        skip_space(x);
        if (x->p < x->end && *x->p == ',') {
            ++x->p;
            continue;
        }
        if (x->p < x->end && *x->p == close) {
            ++x->p;
            return 1;
        }
        return parse_fail(x, "expected ',' or a closing bracket");
    }
}

static int parse_value(parser_t *x, int depth) {
    if (depth > 64) {
        return parse_fail(x, "nested too deeply");
    }
    skip_space(x);
    if (x->p >= x->end) {
        return parse_fail(x, "unexpected end");
    }
    switch (*x->p) {
    case '{':
    case '[':
        return parse_composite(x, depth, *x->p);
    case '"':
        return parse_string(x, NULL, 0);
    case 't':
        return parse_literal(x, "true");
    case 'f':
        return parse_literal(x, "false");
    case 'n':
        return parse_literal(x, "null");
    default:
        return parse_number(x, NULL);
    }
}

/* One event object: the fields the checks need, the rest skipped. */
static int parse_event(parser_t *x, event_t *e) {
    memset(e, 0, sizeof *e);
    skip_space(x);
    if (x->p >= x->end || *x->p != '{') {
        return parse_fail(x, "an event is not an object");
    }
    ++x->p;
    for (;;) {
        char key[16];
        skip_space(x);
        if (!parse_string(x, key, sizeof key)) {
            return 0;
        }
        skip_space(x);
        if (x->p >= x->end || *x->p++ != ':') {
            return parse_fail(x, "expected ':'");
        }
        skip_space(x);
        double v = 0;
        if (!strcmp(key, "ph")) {
            if (!parse_string(x, e->ph, sizeof e->ph)) {
                return 0;
            }
        } else if (!strcmp(key, "ts") || !strcmp(key, "pid") || !strcmp(key, "tid") ||
                   !strcmp(key, "id") || !strcmp(key, "dur")) {
            if (!parse_number(x, &v)) {
                return 0;
            }
            if (!strcmp(key, "ts")) {
                e->ts = v, e->has_ts = 1;
            } else if (!strcmp(key, "pid")) {
                e->pid = (long long)v;
            } else if (!strcmp(key, "tid")) {
                e->tid = (long long)v;
            } else if (!strcmp(key, "dur")) {
                e->dur = v;
            } else {
                e->id = (long long)v, e->has_id = 1;
            }
        } else if (!parse_value(x, 1)) {
            return 0;
        }
        skip_space(x);
        if (x->p < x->end && *x->p == ',') {
            ++x->p;
            continue;
        }
        if (x->p < x->end && *x->p == '}') {
            ++x->p;
            return e->ph[0] ? 1 : parse_fail(x, "an event has no phase");
        }
        return parse_fail(x, "expected ',' or '}' in an event");
    }
}

/* Complete ("X") slices open on a track, by end time: deeper ones must
 * end within the ones around them. */
#define TRACK_MAX_NESTING 64
/* Times are written in microseconds to the nanosecond, each rounded on
 * its own: a slice may seem to outlast its parent by that much. */
#define TS_ROUNDING 0.0025

typedef struct track {
    long long pid, tid;
    double last_ts;
    long open_slices;
    double ends[TRACK_MAX_NESTING];
    size_t depth;
} track_t;

static int check(const char *path, char *summary, size_t capacity) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(summary, capacity, "cannot open %s", path);
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text || got != (size_t)size) {
        free(text);
        snprintf(summary, capacity, "cannot read %s", path);
        return 0;
    }
    text[size] = '\0'; /* the string searches below stop here */
    parser_t whole = {text, text + size, NULL};
    int ok = parse_value(&whole, 0);
    skip_space(&whole);
    if (ok && whole.p != whole.end) {
        ok = parse_fail(&whole, "text after the JSON value");
    }
    if (!ok) {
        snprintf(summary, capacity, "not well-formed JSON at byte %ld: %s", (long)(whole.p - text),
                 whole.error);
        free(text);
        return 0;
    }
    /* The key, then ':' and the array itself (not a '[' further on). */
    const char *bracket = NULL;
    for (const char *key = strstr(text, "\"traceEvents\""); key && !bracket;
         key = strstr(key + 1, "\"traceEvents\"")) {
        const char *q = key + strlen("\"traceEvents\"");
        while (isspace((unsigned char)*q)) {
            ++q;
        }
        if (*q++ != ':') {
            continue;
        }
        while (isspace((unsigned char)*q)) {
            ++q;
        }
        bracket = *q == '[' ? q : NULL;
    }
    if (!bracket) {
        snprintf(summary, capacity, "no traceEvents array");
        free(text);
        return 0;
    }
    parser_t x = {bracket + 1, text + size, NULL};
    size_t capacity_tracks = 64, track_count = 0, events = 0, flow_cap = 1024;
    track_t *tracks = calloc(capacity_tracks, sizeof *tracks);
    long long *starts = calloc(flow_cap, sizeof *starts),
              *finishes = calloc(flow_cap, sizeof *finishes);
    size_t nstarts = 0, nfinishes = 0;
    const char *problem = NULL;
    char detail[160] = "";
    for (;;) {
        skip_space(&x);
        if (x.p < x.end && *x.p == ']') {
            break;
        }
        event_t e;
        if (!parse_event(&x, &e)) {
            problem = x.error;
            break;
        }
        ++events;
        skip_space(&x);
        if (x.p < x.end && *x.p == ',') {
            ++x.p;
        }
        if (!strcmp(e.ph, "M")) {
            continue;
        }
        if (!e.has_ts) {
            snprintf(detail, sizeof detail, "a '%s' event has no ts", e.ph);
            problem = detail;
            break;
        }
        if (!strcmp(e.ph, "C")) {
            continue; /* counters are per process, not per track */
        }
        size_t t = 0;
        while (t < track_count && (tracks[t].pid != e.pid || tracks[t].tid != e.tid)) {
            ++t;
        }
        if (t == track_count) {
            if (track_count == capacity_tracks) {
                capacity_tracks *= 2;
                tracks = realloc(tracks, capacity_tracks * sizeof *tracks);
            }
            memset(&tracks[track_count], 0, sizeof tracks[track_count]);
            tracks[track_count].pid = e.pid;
            tracks[track_count].tid = e.tid;
            tracks[track_count++].last_ts = e.ts;
        }
        if (!strcmp(e.ph, "s") || !strcmp(e.ph, "f")) {
            /* Flows are written after the slices: checked by id below. */
            if (!e.has_id) {
                snprintf(detail, sizeof detail, "a flow event has no id");
                problem = detail;
                break;
            }
            if (nstarts == flow_cap || nfinishes == flow_cap) {
                flow_cap *= 2;
                starts = realloc(starts, flow_cap * sizeof *starts);
                finishes = realloc(finishes, flow_cap * sizeof *finishes);
            }
            if (e.ph[0] == 's') {
                starts[nstarts++] = e.id;
            } else {
                finishes[nfinishes++] = e.id;
            }
            continue;
        }
        if (e.ts < tracks[t].last_ts) {
            snprintf(detail, sizeof detail, "track (%lld, %lld) goes back in time: %.3f after %.3f",
                     e.pid, e.tid, e.ts, tracks[t].last_ts);
            problem = detail;
            break;
        }
        tracks[t].last_ts = e.ts;
        if (!strcmp(e.ph, "X")) {
            track_t *k = &tracks[t];
            while (k->depth && k->ends[k->depth - 1] <= e.ts + TS_ROUNDING) {
                --k->depth; /* ended before this one began */
            }
            if (k->depth && e.ts + e.dur > k->ends[k->depth - 1] + TS_ROUNDING) {
                snprintf(detail, sizeof detail,
                         "track (%lld, %lld): a slice at %.3f ends at %.3f, after the slice "
                         "around it (ends at %.3f)",
                         e.pid, e.tid, e.ts, e.ts + e.dur, k->ends[k->depth - 1]);
                problem = detail;
                break;
            }
            if (k->depth == TRACK_MAX_NESTING) {
                snprintf(detail, sizeof detail, "track (%lld, %lld) nests slices too deeply", e.pid,
                         e.tid);
                problem = detail;
                break;
            }
            k->ends[k->depth++] = e.ts + e.dur;
        } else if (!strcmp(e.ph, "B")) {
            ++tracks[t].open_slices;
        } else if (!strcmp(e.ph, "E") && --tracks[t].open_slices < 0) {
            snprintf(detail, sizeof detail, "track (%lld, %lld) ends a slice it never began", e.pid,
                     e.tid);
            problem = detail;
            break;
        }
    }
    for (size_t t = 0; !problem && t < track_count; ++t) {
        if (tracks[t].open_slices) {
            snprintf(detail, sizeof detail, "track (%lld, %lld) leaves %ld slice(s) open",
                     tracks[t].pid, tracks[t].tid, tracks[t].open_slices);
            problem = detail;
        }
    }
    /* Each id once among the starts, once among the finishes. */
    for (size_t i = 0; !problem && i < nstarts; ++i) {
        size_t started = 0, finished = 0;
        for (size_t j = 0; j < nstarts; ++j) {
            started += starts[j] == starts[i];
        }
        for (size_t j = 0; j < nfinishes; ++j) {
            finished += finishes[j] == starts[i];
        }
        if (started != 1 || finished != 1) {
            snprintf(detail, sizeof detail, "flow %lld has %zu start(s) and %zu finish(es)",
                     starts[i], started, finished);
            problem = detail;
        }
    }
    if (!problem && nfinishes != nstarts) {
        snprintf(detail, sizeof detail, "%zu flow finishes for %zu starts", nfinishes, nstarts);
        problem = detail;
    }
    if (problem) {
        snprintf(summary, capacity, "%s", problem);
    } else {
        snprintf(summary, capacity, "%zu events on %zu tracks, %zu flows", events, track_count,
                 nstarts);
    }
    free(tracks);
    free(starts);
    free(finishes);
    free(text);
    return problem == NULL;
}

#ifndef TRACE_CHECK_NO_MAIN
int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: trace_check FILE\n");
        return 2;
    }
    char summary[256];
    int ok = check(argv[1], summary, sizeof summary);
    printf("trace_check: %s: %s\n", argv[1], summary);
    return ok ? 0 : 1;
}
#endif
