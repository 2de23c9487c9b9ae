/* ordo/export.h - wraps every public declaration block.
 *
 * The library is compiled with hidden visibility; declarations between
 * ORDO_BEGIN_DECLS and ORDO_END_DECLS are the exported API, so symbols of
 * internal helpers never leak from the shared library. */
#ifndef ORDO_EXPORT_H
#define ORDO_EXPORT_H

#if defined(__GNUC__)
#define ORDO_VISIBILITY_PUSH_ _Pragma("GCC visibility push(default)")
#define ORDO_VISIBILITY_POP_ _Pragma("GCC visibility pop")
#else
#define ORDO_VISIBILITY_PUSH_
#define ORDO_VISIBILITY_POP_
#endif

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
