#include "base/text.h"

#include <stdarg.h>
#include <stdio.h>

void ordo__text_append(char *text, size_t capacity, size_t *length, const char *fmt, ...) {
    char *at = *length < capacity ? text + *length : NULL;
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(at, at ? capacity - *length : 0, fmt, args);
    va_end(args);
    if (n > 0) {
        *length += (size_t)n;
    }
}
