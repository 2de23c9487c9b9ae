/* Internal: raising errors with a per-thread detail message. */
#ifndef ORDO_BASE_ERROR_H
#define ORDO_BASE_ERROR_H

#include <stdint.h>

#include "ordo/status.h"

#if defined(__GNUC__)
#define ORDO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ORDO_LIKELY(x) __builtin_expect(!!(x), 1)
#define ORDO_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ORDO_PRINTF(f, a)
#define ORDO_LIKELY(x) (x)
#define ORDO_UNLIKELY(x) (x)
#endif

/* Records "api: <formatted detail>" as this thread's error message and
 * returns status, so a check reads: return ordo__error(ST, __func__, ...). */
ordo_status_t ordo__error(ordo_status_t status, const char *api, const char *fmt, ...)
    ORDO_PRINTF(3, 4);

/* Raises the thread's current message again as api's: "api: <detail>",
 * where the detail drops the name of the internal call that raised it (a
 * leading "ordo_<name>: "), so a message names the function the user
 * called, never one ordo called on their behalf. Returns status. */
ordo_status_t ordo__error_as(ordo_status_t status, const char *api);

/* message without its leading "ordo_<name>: ", if it has one. */
const char *ordo__message_detail(const char *message);

/* How many messages this thread has recorded: a caller of user code reads
 * it before and after, to tell whether the code left a message of its own
 * or the thread's message is an older one. */
uint64_t ordo__error_count(void);

/* The size of this thread's message, terminator included. */
#define ORDO_ERROR_MESSAGE_MAX 512

/* The thread's message, kept across internal calls whose refusals would
 * replace it though the caller's call goes on (a record on a stream that
 * failed meanwhile, a release the pool below refuses): the call that
 * succeeds, or fails with a message of its own, leaves the caller's text
 * (ordo/status.h). ordo__message_keep before those calls; after them,
 * ordo__message_restore puts the text back if any recorded another, and
 * the count (ordo__error_count) with it. */
typedef struct ordo__kept_message {
    uint64_t count;
    char text[ORDO_ERROR_MESSAGE_MAX];
} ordo__kept_message_t;

void ordo__message_keep(ordo__kept_message_t *kept);
void ordo__message_restore(const ordo__kept_message_t *kept);

/* Returns the status of expr (an ordo_status_t) from the calling function
 * when it is an error; the message the failing call recorded stays the
 * thread's. */
#define ORDO_RETURN_IF_ERROR(expr)                                                                 \
    do {                                                                                           \
        ordo_status_t ordo_status_ = (expr);                                                       \
        if (ORDO_UNLIKELY(ordo_status_ != ORDO_OK)) {                                              \
            return ordo_status_;                                                                   \
        }                                                                                          \
    } while (0)

/* ORDO_OK when flags has no bit outside known, else ORDO_ERR_INVALID_ARGUMENT
 * with a message naming the unknown bits (a config's flags field). */
ordo_status_t ordo__flags_check(uint32_t flags, uint32_t known, const char *api);

#endif
