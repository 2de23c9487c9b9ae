#include "ordo/version.h"

#ifndef ORDO_BUILD_TYPE
#define ORDO_BUILD_TYPE "unknown"
#endif
#ifndef ORDO_SANITIZERS
#define ORDO_SANITIZERS "none"
#endif

#if defined(__clang__)
#define ORDO_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define ORDO_COMPILER "gcc " __VERSION__
#else
#define ORDO_COMPILER "unknown compiler"
#endif

const char *ordo_version(void) {
    return ORDO_VERSION_STRING;
}

const char *ordo_build_config(void) {
    return "compiler: " ORDO_COMPILER "; build: " ORDO_BUILD_TYPE "; sanitizers: " ORDO_SANITIZERS;
}
