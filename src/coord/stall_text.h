/* Internal: how a stall report shows a stream or a signal, for reports
 * written elsewhere (a report across ranks, src/mpi/mpi_stall.c). */
#ifndef ORDO_COORD_STALL_TEXT_H
#define ORDO_COORD_STALL_TEXT_H

#include <stddef.h>

#include "base/error.h"
#include "ordo/signal.h"

/* Room for any shown name: every byte escaped (\xHH), and the quotes. */
#define ORDO__STALL_SHOWN_MAX (4 * ORDO_SIGNAL_NAME_MAX + 3)

/* object's name as a report line shows it, into out (capacity > 0): the
 * name quoted, with quotes, backslashes and control characters escaped,
 * or the object's address, unquoted, when name is its address (an entry
 * holds that for an object without a name) or empty. */
void ordo__stall_shown(const void *object, const char *name, char *out, size_t capacity);

/* Appends formatted text at *len, keeping what fits in text (capacity
 * bytes, terminated when anything fits); *len grows by the full length. */
void ordo__stall_append(char *text, size_t capacity, size_t *len, const char *fmt, ...)
    ORDO_PRINTF(4, 5);

#endif
