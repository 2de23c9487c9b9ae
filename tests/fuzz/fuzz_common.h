/* Helpers shared by the libFuzzer harnesses of the public API
 * (fuzz_signals.c, fuzz_memory.c, fuzz_coord.c, fuzz_streams.c): an input
 * reader, checks that abort with a message (libFuzzer then reports the
 * input), the promises every call makes (a status the model expects, an
 * error message naming the function called, outputs emptied on failure)
 * and the switch for checks of known defects.
 *
 * Known defects. A check that fails on today's library because of a defect
 * someone is fixing is written as `if (fuzz_known_defect("id")) CHECK...`
 * (or the harness avoids the path when it is off, where a detected defect
 * would leave state behind). Such checks run when:
 * - the environment variable ORDO_FUZZ_KNOWN_DEFECTS is "1" or "all" (every
 *   known defect), or a comma-separated list of ids (just those);
 * - or the harness was compiled with -DORDO_FUZZ_KNOWN_DEFECTS=1 (every
 *   one; the CMake option ORDO_FUZZ_KNOWN_DEFECTS does this).
 * Otherwise they are skipped, so CI passes meanwhile. Each harness lists its
 * ids, and what each one is, at its top; a fixer removes the entry and the
 * fuzz_known_defect() guard, so the check always runs. */
#ifndef ORDO_FUZZ_COMMON_H
#define ORDO_FUZZ_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ordo/ordo.h"

#ifndef ORDO_FUZZ_KNOWN_DEFECTS
#define ORDO_FUZZ_KNOWN_DEFECTS 0
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------ failing */

/* The harness's name, for messages; each harness defines it. */
static const char *fuzz_harness;

__attribute__((noreturn, format(printf, 3, 4))) static void fuzz_fail(const char *file, int line,
                                                                      const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s:%d: check failed: %s\n  (ordo_error_message: \"%s\")\n", fuzz_harness,
            file, line, text, ordo_error_message());
    abort();
}

#define FUZZ_FAIL(...) fuzz_fail(__FILE__, __LINE__, __VA_ARGS__)
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            FUZZ_FAIL(__VA_ARGS__);                                                                \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------ host tasks */

static inline ordo_status_t fuzz_noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* Fails its stream with ORDO_ERR_ABORTED. */
static inline ordo_status_t fuzz_failing_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

/* ------------------------------------------------------------ known defects */

/* Non-zero when the checks of known defect id run (see the top). */
static inline int fuzz_known_defect(const char *id) {
    if (ORDO_FUZZ_KNOWN_DEFECTS) {
        return 1;
    }
    const char *env = getenv("ORDO_FUZZ_KNOWN_DEFECTS");
    if (!env || !env[0] || strcmp(env, "0") == 0) {
        return 0;
    }
    if (strcmp(env, "1") == 0 || strcmp(env, "all") == 0) {
        return 1;
    }
    size_t len = strlen(id);
    for (const char *p = env; (p = strstr(p, id)) != NULL; p += len) {
        if ((p == env || p[-1] == ',') && (p[len] == '\0' || p[len] == ',')) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ input */

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
    size_t pos;
} fuzz_input_t;

static inline int fuzz_more(const fuzz_input_t *in) {
    return in->pos < in->size;
}

static inline uint8_t fuzz_u8(fuzz_input_t *in) {
    return in->pos < in->size ? in->data[in->pos++] : 0;
}

static inline uint16_t fuzz_u16(fuzz_input_t *in) {
    uint16_t lo = fuzz_u8(in);
    return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}

/* A signal-like value: mostly small, sometimes at or past
 * ORDO_SIGNAL_VALUE_MAX. */
static inline uint64_t fuzz_value(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    switch (b >> 6) {
    case 3:
        return (b & 1) ? ORDO_SIGNAL_VALUE_MAX + 1 + (b & 0x3e)
                       : ORDO_SIGNAL_VALUE_MAX - (b & 0x3e);
    default:
        return b & 0x0f;
    }
}

/* A deadline that is past or at most about a millisecond away, so no wait
 * of a harness blocks for long. */
static inline ordo_deadline_t fuzz_deadline(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    if (b < 128) {
        return b & 1 ? ORDO_DEADLINE_NOW : ordo_time_now_ns() - (b & 7);
    }
    return ordo_deadline_after_ns((uint64_t)(b & 0x7f) * 8000u);
}

/* A NUL-terminated text of up to 255 bytes from the input, in buf. */
static inline const char *fuzz_text(fuzz_input_t *in, char *buf, size_t capacity) {
    size_t len = fuzz_u8(in) % capacity;
    for (size_t i = 0; i < len; ++i) {
        char c = (char)fuzz_u8(in);
        buf[i] = c ? c : 'x';
    }
    buf[len] = '\0';
    return buf;
}

/* ------------------------------------------------------------ calls */

/* Sets this thread's error message to one that names no function a
 * harness checks, so a refusal that raises no message of its own shows. */
static inline void fuzz_prime_message(void) {
    (void)ordo_allocator_live_blocks(NULL);
}

/* After a failed call of fn: ordo_error_message() names fn
 * (docs/ERRORS.md: "which function, which argument, which value"). */
static inline void fuzz_check_named(const char *file, int line, ordo_status_t st, const char *fn) {
    if (st != ORDO_OK) {
        const char *message = ordo_error_message();
        if (!message || !strstr(message, fn)) {
            fuzz_fail(file, line, "%s returned %s with a message that does not name it: \"%s\"", fn,
                      ordo_status_name(st), message ? message : "(null)");
        }
    }
}

/* Calls fn(...) with a primed message; on failure the message must name
 * fn. Evaluates to the status. */
#define FUZZ_CALL(fn, ...)                                                                         \
    __extension__({                                                                                \
        fuzz_prime_message();                                                                      \
        ordo_status_t call_st_ = fn(__VA_ARGS__);                                                  \
        fuzz_check_named(__FILE__, __LINE__, call_st_, #fn);                                       \
        call_st_;                                                                                  \
    })

/* The same, where the message check belongs to known defect id. */
#define FUZZ_CALL_KD(id, fn, ...)                                                                  \
    __extension__({                                                                                \
        fuzz_prime_message();                                                                      \
        ordo_status_t call_st_ = fn(__VA_ARGS__);                                                  \
        if (fuzz_known_defect(id)) {                                                               \
            fuzz_check_named(__FILE__, __LINE__, call_st_, #fn);                                   \
        }                                                                                          \
        call_st_;                                                                                  \
    })

/* The status a call returned is the one the model expects. */
#define FUZZ_EXPECT(st, expected, what)                                                            \
    do {                                                                                           \
        ordo_status_t exp_got_ = (st), exp_want_ = (expected);                                     \
        FUZZ_CHECK(exp_got_ == exp_want_, "%s returned %s, the model expects %s", what,            \
                   ordo_status_name(exp_got_), ordo_status_name(exp_want_));                       \
    } while (0)

/* An output object the call was given: on failure it must be empty (all
 * zero bytes). Pre-fill it with fuzz_sentinel before the call. */
#define FUZZ_SENTINEL 0x5a
#define fuzz_sentinel(object) memset(&(object), FUZZ_SENTINEL, sizeof(object))
#define FUZZ_EMPTY_ON_FAILURE(st, object, what)                                                    \
    do {                                                                                           \
        if ((st) != ORDO_OK) {                                                                     \
            const unsigned char *bytes_ = (const unsigned char *)&(object);                        \
            for (size_t i_ = 0; i_ < sizeof(object); ++i_) {                                       \
                FUZZ_CHECK(bytes_[i_] == 0, "%s failed (%s) and left %s set (byte %zu is 0x%02x)", \
                           what, ordo_status_name(st), #object, i_, bytes_[i_]);                   \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------ host memory */

static inline size_t fuzz_live_blocks(void) {
    size_t n = 0;
    if (ordo_allocator_live_blocks(&n) != ORDO_OK) {
        FUZZ_FAIL("ordo_allocator_live_blocks refused");
    }
    return n;
}

/* ordo's host blocks are back to what they were before the input. */
#define FUZZ_CHECK_BASELINE(before)                                                                \
    do {                                                                                           \
        size_t after_ = fuzz_live_blocks();                                                        \
        FUZZ_CHECK(after_ == (before),                                                             \
                   "ordo holds %zu host blocks after the input, %zu before it (a leak)", after_,   \
                   (size_t)(before));                                                              \
    } while (0)

/* A live object of no ordo type (zeroes where a type tag would be). */
__attribute__((unused)) static uint64_t fuzz_garbage[64];
#define FUZZ_GARBAGE(type) ((type *)(void *)fuzz_garbage)

#endif
