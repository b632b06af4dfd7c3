/* include/weft/common.h - error codes, export macro, allocator and log hooks shared by every
 * weft module.
 *
 * Thread-safety: weft_strerror() is thread-safe. weft_set_allocator() and
 * weft_log_set_handler() must be called before any other weft function (they are not
 * synchronised with allocations or log calls in flight).
 */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(WEFT_BUILDING_LIBRARY) && defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every fallible weft function. Append-only: values never change meaning. */
typedef enum weft_err {
    WEFT_OK = 0,
    WEFT_EINVAL = 1,    /**< a NULL or malformed argument */
    WEFT_ENOMEM = 2,    /**< an allocation failed */
    WEFT_ELIMIT = 3,    /**< a bound was reached: the item was dropped and counted */
    WEFT_EIO = 4,       /**< a file, socket or database operation failed */
    WEFT_ETIMEDOUT = 5, /**< a deadline passed before the work finished */
    WEFT_ESTATE = 6,    /**< the object is in the wrong state (e.g. already shut down) */
    WEFT_EPARSE = 7,    /**< input text could not be parsed */
    WEFT_EHTTP = 8,     /**< the server answered with a final (non-retryable) HTTP error */
    WEFT_ENOTFOUND = 9, /**< the named item does not exist */
    WEFT_EDISABLED = 10 /**< the SDK is disabled (OTEL_SDK_DISABLED=true) */
} weft_err;

/** Short English description of @p err. Never returns NULL (unknown codes give "unknown error").
 * Ownership: returns a static string.
 * Errors: none. */
WEFT_API const char *weft_strerror(weft_err err);

/** Replace the allocator used by every weft allocation.
 * Give all three functions or none (three NULLs restore libc's).
 * @param malloc_fn replacement for malloc
 * @param realloc_fn replacement for realloc
 * @param free_fn replacement for free
 * @return WEFT_OK, or WEFT_EINVAL when only some are given.
 * Thread notes: call once, before any other weft function.
 * Ownership: none; the functions are kept, not called until the next allocation. */
WEFT_API weft_err weft_set_allocator(void *(*malloc_fn)(size_t),
                                     void *(*realloc_fn)(void *, size_t),
                                     void (*free_fn)(void *));

/** Log levels, most severe first. */
typedef enum weft_log_level {
    WEFT_LOG_ERROR = 0,
    WEFT_LOG_WARN = 1,
    WEFT_LOG_INFO = 2,
    WEFT_LOG_DEBUG = 3
} weft_log_level;

/** Receives one formatted log line (no trailing newline). */
typedef void (*weft_log_fn)(weft_log_level level, const char *message, void *user_data);

/** Route library log lines to @p fn for every level up to @p max_level. The library is
 * silent until a handler is set; NULL removes it. Credentials and message content are
 * never logged. Thread notes: @p fn may be called from any weft thread, concurrently.
 * Errors: none. Ownership: @p user_data is borrowed until the handler is replaced. */
WEFT_API void weft_log_set_handler(weft_log_fn fn, weft_log_level max_level, void *user_data);

/** Name of @p level ("error", "warn", "info", "debug"). Never NULL.
 * Errors: none (unknown levels give "unknown"). Ownership: returns a static string. */
WEFT_API const char *weft_log_level_name(weft_log_level level);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_H */
