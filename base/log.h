/* base/log.h - logging through the installed handler (weft_log_set_handler).
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_LOG_H
#define WEFT_BASE_LOG_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Logging: the level test happens before any formatting. */
extern weft_log_level weft__log_max;
extern weft_log_fn weft__log_fn;
void weft__log(weft_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define WEFT_LOG(level, ...)                                    \
    do {                                                        \
        if (weft__log_fn != NULL && (level) <= weft__log_max) { \
            weft__log((level), __VA_ARGS__);                    \
        }                                                       \
    } while (0)

#endif /* WEFT_BASE_LOG_H */
