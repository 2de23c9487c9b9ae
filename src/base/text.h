/* Internal: text built piece by piece into a caller's buffer (reports,
 * metrics, error details). */
#ifndef ORDO_BASE_TEXT_H
#define ORDO_BASE_TEXT_H

#include <stddef.h>

#include "base/error.h"

/* Appends formatted text at *length, keeping what fits in text (capacity
 * bytes, terminated whenever anything fits; text may be NULL when
 * capacity is 0). *length grows by the full length of the piece, fitting
 * or not, so a caller learns the size a whole text needs. */
void ordo__text_append(char *text, size_t capacity, size_t *length, const char *fmt, ...)
    ORDO_PRINTF(4, 5);

#endif
