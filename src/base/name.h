/* Internal: the names objects carry for diagnostics (signals, streams):
 * a fixed room in the object, filled and read under the object's lock. */
#ifndef ORDO_BASE_NAME_H
#define ORDO_BASE_NAME_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Stores name in room bytes at to, truncated to room - 1; NULL or ""
 * leaves no name. */
static inline void name_store(char *to, size_t room, const char *name) {
    size_t len = name ? strnlen(name, room - 1) : 0;
    memcpy(to, name ? name : "", len);
    to[len] = '\0';
}

/* Copies name into out (capacity > 0, truncated), or, when it is empty,
 * the address of the object it names. */
static inline void name_or_address(const char *name, const void *object, char *out,
                                   size_t capacity) {
    if (name[0]) {
        size_t len = strnlen(name, capacity - 1);
        memcpy(out, name, len);
        out[len] = '\0';
    } else {
        snprintf(out, capacity, "%p", object);
    }
}

#endif
