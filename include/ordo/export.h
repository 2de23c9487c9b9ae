/** @file
 * ordo/export.h - wraps every public declaration block.
 *
 * The library is compiled with hidden visibility; declarations between
 * ORDO_BEGIN_DECLS and ORDO_END_DECLS are the exported API, so symbols of
 * internal helpers never leak from the shared library. */
#ifndef ORDO_EXPORT_H
#define ORDO_EXPORT_H

/* The API's truth values are bool. */
#include <stdbool.h>

/** @def ORDO_VISIBILITY_PUSH_
 * Gives the declarations that follow default visibility (a pragma under
 * GCC and Clang, nothing elsewhere). Used only by ORDO_BEGIN_DECLS.
 * @def ORDO_VISIBILITY_POP_
 * Returns to the visibility in force before ORDO_VISIBILITY_PUSH_. Used
 * only by ORDO_END_DECLS. */
#if defined(__GNUC__)
#define ORDO_VISIBILITY_PUSH_ _Pragma("GCC visibility push(default)")
#define ORDO_VISIBILITY_POP_ _Pragma("GCC visibility pop")
#else
#define ORDO_VISIBILITY_PUSH_
#define ORDO_VISIBILITY_POP_
#endif

/** @def ORDO_BEGIN_DECLS
 * Opens a block of public declarations: exported from the shared library
 * (default visibility) and, in C++, given C linkage.
 * @def ORDO_END_DECLS
 * Closes the block ORDO_BEGIN_DECLS opened. */
#ifdef __cplusplus
#define ORDO_BEGIN_DECLS                                                                           \
    extern "C" {                                                                                   \
    ORDO_VISIBILITY_PUSH_
#define ORDO_END_DECLS                                                                             \
    ORDO_VISIBILITY_POP_                                                                           \
    }
#else
#define ORDO_BEGIN_DECLS ORDO_VISIBILITY_PUSH_
#define ORDO_END_DECLS ORDO_VISIBILITY_POP_
#endif

#endif
