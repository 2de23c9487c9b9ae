#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Each thread's last message, in a buffer from the C library made at the
 * thread's first error and freed at its exit (a pthread key). It is not in
 * thread-local storage: libordo's thread-local block is taken from the
 * static TLS room a dlopen finds (some of its variables are initial-exec),
 * a few hundred bytes, and 512 bytes there helped a dlopen from Python
 * fail. The buffer belongs to the thread, not to an ordo object, so it
 * does not go through the program's allocator (ordo/alloc.h). */
static _Thread_local char *error_message;
static _Thread_local bool message_freed; /* at the thread's exit: none is made again */
static _Thread_local uint64_t error_count;
static pthread_once_t message_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t message_key;
static int message_key_ready;

/* What a thread reads when no buffer could be made, or after its exit
 * began and freed the buffer. */
static const char message_lost[] = "(the message was lost: no memory to keep it)";
static const char message_exited[] = "(no message: the thread is exiting, its text is freed)";

static void message_free(void *buffer) {
    error_message = NULL;
    message_freed = true;
    free(buffer);
}

static void message_key_make(void) {
    message_key_ready = pthread_key_create(&message_key, message_free) == 0;
}

/* The calling thread's buffer, made on first use; NULL without memory,
 * and once the thread's exit has freed it: a key destructor that runs
 * later may raise an error, and a buffer made then could leak (the C
 * library runs the destructors a bounded number of rounds). */
static char *message_buffer(void) {
    if (ORDO_LIKELY(error_message != NULL)) {
        return error_message;
    }
    if (message_freed) {
        return NULL;
    }
    pthread_once(&message_key_once, message_key_make);
    char *buffer = message_key_ready ? malloc(ORDO_ERROR_MESSAGE_MAX) : NULL;
    if (buffer && pthread_setspecific(message_key, buffer) != 0) {
        free(buffer);
        buffer = NULL;
    }
    error_message = buffer;
    return buffer;
}

typedef struct status_info {
    const char *name;
    const char *description;
} status_info_t;

static const status_info_t status_table[ORDO_STATUS_COUNT_] = {
    [ORDO_OK] = {"ORDO_OK", "success"},
    [ORDO_ERR_INVALID_ARGUMENT] = {"ORDO_ERR_INVALID_ARGUMENT", "an argument is malformed"},
    [ORDO_ERR_INVALID_HANDLE] = {"ORDO_ERR_INVALID_HANDLE",
                                 "a handle is null or not a live ordo object"},
    [ORDO_ERR_OUT_OF_RANGE] = {"ORDO_ERR_OUT_OF_RANGE", "a value is out of the accepted range"},
    [ORDO_ERR_DESTROYED] = {"ORDO_ERR_DESTROYED", "the object was destroyed"},
    [ORDO_ERR_TIMEOUT] = {"ORDO_ERR_TIMEOUT", "the deadline passed first"},
    [ORDO_ERR_CANCELLED] = {"ORDO_ERR_CANCELLED", "the operation was cancelled"},
    [ORDO_ERR_BUSY] = {"ORDO_ERR_BUSY", "the object is in a state that refuses the call"},
    [ORDO_ERR_OUT_OF_MEMORY] = {"ORDO_ERR_OUT_OF_MEMORY", "an allocation failed"},
    [ORDO_ERR_RESOURCE_EXHAUSTED] = {"ORDO_ERR_RESOURCE_EXHAUSTED",
                                     "a configured limit was reached"},
    [ORDO_ERR_DEADLOCK] = {"ORDO_ERR_DEADLOCK", "the request would close a cycle of waits"},
    [ORDO_ERR_UNAVAILABLE] = {"ORDO_ERR_UNAVAILABLE", "the backend or device is not present"},
    [ORDO_ERR_UNSUPPORTED] = {"ORDO_ERR_UNSUPPORTED", "the request is not supported here"},
    [ORDO_ERR_DEVICE] = {"ORDO_ERR_DEVICE", "the device or its driver reported an error"},
    [ORDO_ERR_ABORTED] = {"ORDO_ERR_ABORTED", "user work failed"},
    [ORDO_ERR_NOT_FOUND] = {"ORDO_ERR_NOT_FOUND", "nothing matched the lookup"},
    [ORDO_ERR_INTERNAL] = {"ORDO_ERR_INTERNAL", "an internal invariant broke (a bug in ordo)"},
    [ORDO_ERR_CORRUPTED] = {"ORDO_ERR_CORRUPTED",
                            "memory outside a block or in a freed block was overwritten"},
    [ORDO_ERR_ABANDONED] = {"ORDO_ERR_ABANDONED",
                            "a process registered to signal ended before it unregistered"},
};

static const status_info_t *status_lookup(ordo_status_t status) {
    if ((unsigned)status >= (unsigned)ORDO_STATUS_COUNT_) {
        return NULL;
    }
    return &status_table[status];
}

const char *ordo_status_name(ordo_status_t status) {
    const status_info_t *info = status_lookup(status);
    return info ? info->name : "ORDO_ERR_<unknown>";
}

const char *ordo_status_describe(ordo_status_t status) {
    const status_info_t *info = status_lookup(status);
    return info ? info->description : "not an ordo status";
}

bool ordo_status_is_error(ordo_status_t status) {
    return status != ORDO_OK && status_lookup(status) != NULL;
}

const char *ordo_error_message(void) {
    if (error_count == 0) {
        return "";
    }
    if (error_message) {
        return error_message;
    }
    return message_freed ? message_exited : message_lost;
}

uint64_t ordo__error_count(void) {
    return error_count;
}

/* Formats into a copy first: the arguments may point into error_message
 * itself (a detail that wraps the previous one: "%s", ordo_error_message()),
 * and formatting into the buffer being read is undefined and garbles the
 * text in practice. */
static void message_set(const char *prefix, const char *fmt, va_list args) {
    char message[ORDO_ERROR_MESSAGE_MAX];
    message[0] = '\0';
    int used = prefix ? snprintf(message, sizeof message, "%s: ", prefix) : 0;
    if (fmt && used >= 0 && (size_t)used < sizeof message) {
        vsnprintf(message + used, sizeof message - (size_t)used, fmt, args);
    }
    char *buffer = message_buffer();
    if (buffer) {
        memcpy(buffer, message, strnlen(message, sizeof message - 1) + 1);
    }
    ++error_count;
}

ordo_status_t ordo__error(ordo_status_t status, const char *api, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    message_set(api, fmt, args);
    va_end(args);
    return status;
}

void ordo__message_keep(ordo__kept_message_t *kept) {
    kept->count = error_count;
    /* A copy of the text's length, not of the buffer: kept on paths that
     * run often (a stream-ordered free), where the text is usually short. */
    const char *text = ordo_error_message();
    size_t length = strnlen(text, sizeof kept->text - 1);
    memcpy(kept->text, text, length);
    kept->text[length] = '\0';
}

void ordo__message_restore(const ordo__kept_message_t *kept) {
    if (error_count != kept->count) {
        (void)ordo__error(ORDO_OK, NULL, "%s", kept->text);
        /* As if nothing was recorded: a caller that compares the count
         * around a call (did user code leave a message?) must not take the
         * kept text for a new one. Keeps and restores nest with the calls
         * that make them, so no such comparison straddles a restore. */
        error_count = kept->count;
    }
}

const char *ordo__message_detail(const char *message) {
    if (strncmp(message, "ordo_", 5) == 0) {
        size_t name = strspn(message, "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (message[name] == ':' && message[name + 1] == ' ') {
            return message + name + 2;
        }
    }
    return message;
}

ordo_status_t ordo__error_as(ordo_status_t status, const char *api) {
    return ordo__error(status, api, "%s", ordo__message_detail(ordo_error_message()));
}

ordo_status_t ordo_fail(ordo_status_t status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    message_set(NULL, fmt, args);
    va_end(args);
    return status;
}

ordo_status_t ordo__flags_check(uint32_t flags, uint32_t known, const char *api) {
    if (flags & ~known) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "unknown flags 0x%x",
                           (unsigned)(flags & ~known));
    }
    return ORDO_OK;
}
