/* base/buf.h - a growable byte buffer with a hard cap.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_BUF_H
#define WEFT_BASE_BUF_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer with a hard cap. Appends past the cap fail with WEFT_ELIMIT and
 * leave the buffer unchanged. The data is always NUL-terminated (not counted in len). */
struct weft__buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* 0 means SIZE_MAX / 2 */
};
void weft__buf_init(struct weft__buf *buf, size_t max);
void weft__buf_cleanup(struct weft__buf *buf);
void weft__buf_reset(struct weft__buf *buf);
/* Cut the buffer back to @p len bytes (at most its length), NUL-terminated: how an encoder
 * that failed halfway restores what its caller had. */
void weft__buf_truncate(struct weft__buf *buf, size_t len);
weft_err weft__buf_reserve(struct weft__buf *buf, size_t extra);
weft_err weft__buf_append(struct weft__buf *buf, const void *data, size_t len);
weft_err weft__buf_append_str(struct weft__buf *buf, const char *s);
weft_err weft__buf_append_byte(struct weft__buf *buf, uint8_t byte);
weft_err weft__buf_printf(struct weft__buf *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* WEFT_BASE_BUF_H */
