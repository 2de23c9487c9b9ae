/* The memory part of a device's configuration: its defaults (from
 * ORDO_MEMORY) and its checks. Plain data of the public config: the stack
 * it describes is built by the memory layer (src/mem/device_memory.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "hal/hal.h"

#define MEMORY_ADAPTORS_ALL                                                                        \
    (ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_LOGGING | ORDO_DEVICE_MEMORY_STATISTICS |      \
     ORDO_DEVICE_MEMORY_GUARD)

/* "2G", "512M", "4096": bytes, or 0 with *ok cleared. */
static uint64_t parse_bytes(const char *text, size_t length, int *ok) {
    char digits[32];
    /* strtoull alone would take blanks, a sign, or no digits at all. */
    if (!length || length >= sizeof digits || text[0] < '0' || text[0] > '9') {
        *ok = 0;
        return 0;
    }
    memcpy(digits, text, length);
    digits[length] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(digits, &end, 10);
    if (errno == ERANGE) {
        *ok = 0; /* too many digits: not "unlimited" */
        return 0;
    }
    uint64_t scale = 1;
    if (end && *end && !end[1]) {
        scale = *end == 'K' || *end == 'k'   ? (uint64_t)1 << 10
                : *end == 'M' || *end == 'm' ? (uint64_t)1 << 20
                : *end == 'G' || *end == 'g' ? (uint64_t)1 << 30
                                             : 0;
        ++end;
    }
    *ok = end != digits && end && !*end && scale && value <= UINT64_MAX / scale;
    return *ok ? value * scale : 0;
}

static ordo_status_t parse_env(const char *env, ordo_device_memory_config_t *config,
                               const char *api) {
    memset(config, 0, sizeof *config);
    /* No item empty (a stray comma is a mistake to show, not to skip);
     * "direct", the base with no adaptor yet, only first: after adaptors
     * it would drop them unseen; each adaptor at most once: a second would
     * replace the first's settings unseen, or stack nothing. */
    for (const char *item = env;; ++item) {
        size_t length = strcspn(item, ",");
        const char *eq = memchr(item, '=', length);
        size_t key = eq ? (size_t)(eq - item) : length;
        int ok = 1;
        uint32_t adaptor = 0;
        if (length == 0) {
            ok = 0;
        } else if (key == 6 && !strncmp(item, "direct", 6) && !eq) {
            ok = item == env;
        } else if (key == 10 && !strncmp(item, "statistics", 10) && !eq) {
            adaptor = ORDO_DEVICE_MEMORY_STATISTICS;
        } else if (key == 5 && !strncmp(item, "guard", 5) && !eq) {
            adaptor = ORDO_DEVICE_MEMORY_GUARD;
        } else if (key == 6 && !strncmp(item, "budget", 6)) {
            adaptor = ORDO_DEVICE_MEMORY_BUDGET;
            if (eq) {
                config->budget_bytes = parse_bytes(eq + 1, length - key - 1, &ok);
            }
        } else if (key == 3 && !strncmp(item, "log", 3) && eq && length > key + 1) {
            if (length - key - 1 >= sizeof config->log_path) {
                memset(config, 0, sizeof *config);
                return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                                   "ORDO_MEMORY: the log path is %zu bytes, at most %zu",
                                   length - key - 1, sizeof config->log_path - 1);
            }
            adaptor = ORDO_DEVICE_MEMORY_LOGGING;
            memcpy(config->log_path, eq + 1, length - key - 1);
            config->log_path[length - key - 1] = '\0';
        } else {
            ok = 0;
        }
        if (ok && (config->adaptors & adaptor)) {
            memset(config, 0, sizeof *config);
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "ORDO_MEMORY=\"%.96s%s\": \"%.*s\" is given twice (each item at "
                               "most once)",
                               env, strlen(env) > 96 ? "..." : "", (int)key, item);
        }
        config->adaptors |= adaptor;
        if (!ok) {
            memset(config, 0, sizeof *config);
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "ORDO_MEMORY=\"%.96s%s\": cannot use \"%.*s%s\"%s (expected "
                               "direct first if at all, then statistics, guard, budget[=BYTES] "
                               "or log=PATH, comma-separated)",
                               env, strlen(env) > 96 ? "..." : "", length > 96 ? 96 : (int)length,
                               item, length > 96 ? "..." : "", length ? "" : ", an empty item");
        }
        item += length;
        if (!*item) {
            return ORDO_OK;
        }
    }
}

ordo_status_t ordo__device_memory_config_default(ordo_device_memory_config_t *out_config,
                                                 const char *api) {
    const char *env = getenv("ORDO_MEMORY");
    if (env && *env) { /* set but empty: as if unset */
        return parse_env(env, out_config, api);
    }
    memset(out_config, 0, sizeof *out_config);
    out_config->adaptors = ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_STATISTICS;
    return ORDO_OK;
}

ordo_status_t ordo__device_memory_config_check(const ordo_device_memory_config_t *config,
                                               const char *api) {
    if (config->adaptors & ~MEMORY_ADAPTORS_ALL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "memory adaptors 0x%x include unknown bits", config->adaptors);
    }
    if ((config->adaptors & ORDO_DEVICE_MEMORY_LOGGING) &&
        (!config->log_path[0] || !memchr(config->log_path, '\0', sizeof config->log_path))) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "a logging memory stack needs a log path");
    }
    return ORDO_OK;
}
