/* base/buf.c - a growable byte buffer with a hard cap. */
#include "base/buf.h"
#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
weft__buf_init(struct weft__buf *buf, size_t max)
{
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    buf->max = max == 0 ? SIZE_MAX / 2 : max;
}

void
weft__buf_cleanup(struct weft__buf *buf)
{
    if (buf == NULL) {
        return;
    }
    weft__free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

void
weft__buf_reset(struct weft__buf *buf)
{
    weft__buf_truncate(buf, 0);
}

void
weft__buf_truncate(struct weft__buf *buf, size_t len)
{
    if (len < buf->len) {
        buf->len = len;
    }
    if (buf->data != NULL) {
        buf->data[buf->len] = '\0';
    }
}

weft_err
weft__buf_reserve(struct weft__buf *buf, size_t extra)
{
    size_t need = 0;
    size_t cap = 0;
    char *data = NULL;

    if (extra > buf->max || buf->len > buf->max - extra) {
        return WEFT_ELIMIT;
    }
    need = buf->len + extra + 1;
    if (need <= buf->cap) {
        return WEFT_OK;
    }
    cap = buf->cap < 256 ? 256 : buf->cap;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    data = weft__realloc(buf->data, cap);
    if (data == NULL) {
        return WEFT_ENOMEM;
    }
    buf->data = data;
    buf->cap = cap;
    return WEFT_OK;
}

weft_err
weft__buf_append(struct weft__buf *buf, const void *data, size_t len)
{
    weft_err err = weft__buf_reserve(buf, len);

    if (err != WEFT_OK) {
        return err;
    }
    if (len > 0) {
        memcpy(buf->data + buf->len, data, len);
    }
    buf->len += len;
    buf->data[buf->len] = '\0';
    return WEFT_OK;
}

weft_err
weft__buf_append_str(struct weft__buf *buf, const char *s)
{
    return weft__buf_append(buf, s, strlen(s));
}

weft_err
weft__buf_append_byte(struct weft__buf *buf, uint8_t byte)
{
    return weft__buf_append(buf, &byte, 1);
}

weft_err
weft__buf_printf(struct weft__buf *buf, const char *fmt, ...)
{
    va_list ap;
    int n = 0;
    weft_err err = WEFT_OK;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return WEFT_EINVAL;
    }
    err = weft__buf_reserve(buf, (size_t)n);
    if (err != WEFT_OK) {
        return err;
    }
    va_start(ap, fmt);
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf->len += (size_t)n;
    return WEFT_OK;
}
