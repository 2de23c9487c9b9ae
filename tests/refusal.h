/* Checks of refusals, shared by each concept's bad-input cases (a sweep of
 * every public entry point with bad input, kept beside the concept's other
 * tests): NULL handles and outputs, handles of the wrong type, values out
 * of range, handles of another device or owner. Each refusal must return
 * the status the header promises (or the class status.h gives the
 * mistake), raise a message naming the function, leave every output it was
 * given empty (NULL, 0, an all-zero struct: docs/ERRORS.md, "Outputs on
 * failure"; REFUSED_CLEARS pre-fills them with a sentinel), and leak
 * nothing (ordo_allocator_live_blocks, and the sanitizers' leak check).
 *
 * The cases are built on cpu:0 objects (refusal_fixture_t). In a
 * conformance suite, which also runs on other devices, each case calls
 * REFUSAL_ON_CPU_ONLY() first: it runs in the suite's cpu:0 run. */
#ifndef ORDO_TESTS_REFUSAL_H
#define ORDO_TESTS_REFUSAL_H

#include <string.h>

#include "test_util.h"

/* Sets this thread's error message to one that names a function other
 * than checked, so that a refusal that raises nothing shows up as a stale
 * message. */
static inline void refusal_prime_message(const char *checked) {
    if (strcmp(checked, "ordo_allocator_live_blocks") != 0) {
        (void)ordo_allocator_live_blocks(NULL);
    } else {
        (void)ordo_signal_create(0, NULL);
    }
}

static inline void check_message(const char *fn, const char *expr, int line) {
    const char *message = ordo_error_message();
    if (!message || !message[0] || !strstr(message, fn)) {
        fail_msg("line %d: %s: the message \"%s\" does not name %s", line, expr,
                 message ? message : "(null)", fn);
    }
}

/* fn(...) returns expected, with a fresh message that names fn. */
#define REFUSED(expected, fn, ...)                                                                 \
    do {                                                                                           \
        refusal_prime_message(#fn);                                                                \
        ordo_status_t st_ = fn(__VA_ARGS__);                                                       \
        if (st_ != (expected)) {                                                                   \
            print_error("line %d: %s(%s) returned %s, expected %s (%s)\n", __LINE__, #fn,          \
                        #__VA_ARGS__, ordo_status_name(st_), ordo_status_name(expected),           \
                        ordo_error_message());                                                     \
        }                                                                                          \
        assert_int_equal(st_, (expected));                                                         \
        check_message(#fn, #__VA_ARGS__, __LINE__);                                                \
    } while (0)

/* An output's bytes before a refusal: not zero anywhere, so a pointer, an
 * id, a count, a flag and every field of a struct all start non-empty. */
#define SENTINEL_BYTE 0x5a

static inline void check_cleared(const void *object, size_t size, const char *fn, const char *name,
                                 int line) {
    const unsigned char *bytes = object;
    for (size_t i = 0; i < size; ++i) {
        if (bytes[i] != 0) {
            fail_msg("line %d: %s left %s set (byte %zu is 0x%02x) instead of clearing it", line,
                     fn, name, i, bytes[i]);
        }
    }
}

/* REFUSED, with the output object (a variable, or *pointer) pre-filled
 * with the sentinel and found empty (NULL, 0, all zero) after the call. */
#define REFUSED_CLEARS(expected, object, fn, ...)                                                  \
    do {                                                                                           \
        memset(&(object), SENTINEL_BYTE, sizeof(object));                                          \
        REFUSED(expected, fn, __VA_ARGS__);                                                        \
        check_cleared(&(object), sizeof(object), #fn, #object, __LINE__);                          \
    } while (0)

/* The same for a function with two outputs. */
#define REFUSED_CLEARS2(expected, first, second, fn, ...)                                          \
    do {                                                                                           \
        memset(&(first), SENTINEL_BYTE, sizeof(first));                                            \
        memset(&(second), SENTINEL_BYTE, sizeof(second));                                          \
        REFUSED(expected, fn, __VA_ARGS__);                                                        \
        check_cleared(&(first), sizeof(first), #fn, #first, __LINE__);                             \
        check_cleared(&(second), sizeof(second), #fn, #second, __LINE__);                          \
    } while (0)

/* A live object of no ordo type: zeroes where a magic number would be. */
static inline void *refusal_garbage(void) {
    static uint64_t garbage[64];
    return garbage;
}
#define GARBAGE(type) ((type *)refusal_garbage())
/* A live object of another type. */
#define AS(type, object) ((type *)(void *)(object))

static inline size_t refusal_live_blocks(void) {
    size_t n = 0;
    assert_ok(ordo_allocator_live_blocks(&n));
    return n;
}

/* The objects most checks need: the shared cpu device with two streams,
 * an owned device with one (a foreign device), and a signal. */
typedef struct refusal_fixture {
    size_t blocks_before;
    ordo_device_t *device;
    ordo_device_t *other;
    ordo_stream_t *s[2];
    ordo_stream_t *foreign;
    ordo_signal_t *signal;
} refusal_fixture_t;

static inline void refusal_fixture_make(refusal_fixture_t *f) {
    memset(f, 0, sizeof *f);
    f->blocks_before = refusal_live_blocks();
    assert_ok(ordo_device_open("cpu:0", &f->device));
    assert_ok(ordo_device_create_owned("cpu:0", NULL, &f->other));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(f->device, 0, &f->s[i]));
    }
    assert_ok(ordo_stream_create(f->other, 0, &f->foreign));
    f->signal = test_signal_make(0);
}

static inline void refusal_fixture_free(refusal_fixture_t *f) {
    assert_ok(ordo_signal_release(f->signal));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
    assert_ok(ordo_stream_destroy(f->foreign));
    assert_ok(ordo_device_release(f->other));
    assert_ok(ordo_device_release(f->device));
    assert_int_equal(refusal_live_blocks(), f->blocks_before);
}

/* Skips the calling case (cmocka skip(), with the reason printed) unless
 * device, the device its suite runs on, is a cpu device: the case's objects
 * are cpu:0's whatever the suite's device, so a run on another device
 * would only repeat it. */
#define REFUSAL_ON_CPU_ONLY(device)                                                                \
    do {                                                                                           \
        if (strncmp((device), "cpu", 3) != 0) {                                                    \
            print_message("  skipped on %s: a bad-input case, run on cpu:0 only (its fixture's "   \
                          "device)\n",                                                             \
                          (device));                                                               \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- objects owned by other objects ---------------------------------------
 * docs/ERRORS.md, "Objects owned by other objects": an object that another
 * one owns or still uses refuses the caller's destroy (and stays whole), or
 * is kept alive by a reference; a use that is defined stays defined. */

/* The message names the function (REFUSED) and also who holds the object. */
static inline void check_owner_named(const char *owner) {
    const char *message = ordo_error_message();
    if (!strstr(message, owner)) {
        fail_msg("the message \"%s\" does not name %s", message, owner);
    }
}

/* Allocates and frees one block through r on s: r still works. */
static inline void memory_still_works(ordo_mem_resource_t *r, ordo_stream_t *s) {
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(r, 100, 0, s, 1, &block, NULL));
    assert_ok(ordo_mem_deallocate(r, block, s));
    assert_ok(ordo_mem_reap_pending(r, test_deadline()));
}

#endif
