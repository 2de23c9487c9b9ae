/* Internal: how a stall report shows a stream or a signal, for reports
 * written elsewhere (a report across ranks, src/mpi/mpi_stall.c). */
#ifndef ORDO_COORD_STALL_TEXT_H
#define ORDO_COORD_STALL_TEXT_H

#include <stddef.h>

#include "base/text.h"
#include "ordo/signal.h"

/* Room for any shown name: every byte escaped (\xHH), and the quotes. */
#define ORDO__STALL_SHOWN_MAX (4 * ORDO_SIGNAL_NAME_MAX + 3)

/* object's name as a report line shows it, into out (capacity > 0): the
 * name quoted, with quotes, backslashes and control characters escaped,
 * or the object's address, unquoted, when name is its address (an entry
 * holds that for an object without a name) or empty. */
void ordo__stall_shown(const void *object, const char *name, char *out, size_t capacity);

#endif
