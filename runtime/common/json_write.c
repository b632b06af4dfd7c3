/* runtime/common/json_write.c - compact JSON text of a jansson value into one growing buffer.
 *
 * Why not json_dumps(): a run stores an LLM exchange at every step, and jansson's writer emits
 * each fragment through a callback and decodes every byte of every string as UTF-8 on the way;
 * for a step's exchange that cost as much as the SQL statement storing it. Here a string is
 * copied in runs between the bytes that need an escape (jansson's strings are valid UTF-8
 * already, json_string() checked them). The output is what json_dumps(JSON_COMPACT) writes
 * for the same value, but for reals, written in their shortest round-trip form.
 */
#include "runtime/common/json_write.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/str.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 2048

static void
put_string(struct weft__buf *b, const char *s, size_t len, weft_err *err)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0;

    *err = *err != WEFT_OK ? *err : weft__buf_append_byte(b, '"');
    for (size_t i = 0; *err == WEFT_OK && i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t esc_len = 2;

        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        switch (c) {
        case '"':
        case '\\':
            esc[1] = (char)c;
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xf];
            esc_len = 6;
            break;
        }
        *err = weft__buf_append(b, s + run, i - run);
        *err = *err != WEFT_OK ? *err : weft__buf_append(b, esc, esc_len);
        run = i + 1;
    }
    *err = *err != WEFT_OK ? *err : weft__buf_append(b, s + run, len - run);
    *err = *err != WEFT_OK ? *err : weft__buf_append_byte(b, '"');
}

static void
put_value(struct weft__buf *b, const json_t *v, unsigned depth, weft_err *err)
{
    char num[WEFT__JSON_REAL_MAX]; /* also room for any integer */
    size_t n = 0;

    if (*err != WEFT_OK) {
        return;
    }
    if (depth > MAX_DEPTH) {
        *err = WEFT_ELIMIT;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        bool is_first = true;
        *err = weft__buf_append_byte(b, '{');
        for (void *it = json_object_iter((json_t *)v); it != NULL && *err == WEFT_OK;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!is_first) {
                *err = weft__buf_append_byte(b, ',');
            }
            is_first = false;
            put_string(b, json_object_iter_key(it), json_object_iter_key_len(it), err);
            *err = *err != WEFT_OK ? *err : weft__buf_append_byte(b, ':');
            put_value(b, json_object_iter_value(it), depth + 1, err);
        }
        *err = *err != WEFT_OK ? *err : weft__buf_append_byte(b, '}');
        break;
    }
    case JSON_ARRAY:
        *err = weft__buf_append_byte(b, '[');
        for (size_t i = 0; i < json_array_size(v) && *err == WEFT_OK; i++) {
            if (i > 0) {
                *err = weft__buf_append_byte(b, ',');
            }
            put_value(b, json_array_get(v, i), depth + 1, err);
        }
        *err = *err != WEFT_OK ? *err : weft__buf_append_byte(b, ']');
        break;
    case JSON_STRING:
        put_string(b, json_string_value(v), json_string_length(v), err);
        break;
    case JSON_INTEGER:
        n = (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        *err = weft__buf_append(b, num, n);
        break;
    case JSON_REAL:
        n = weft__fmt_json_real(json_real_value(v), '.', num);
        *err = weft__buf_append(b, num, n);
        break;
    case JSON_TRUE:
        *err = weft__buf_append(b, "true", 4);
        break;
    case JSON_FALSE:
        *err = weft__buf_append(b, "false", 5);
        break;
    default:
        *err = weft__buf_append(b, "null", 4);
        break;
    }
}

char *
weft__json_compact(const json_t *v)
{
    struct weft__buf b;
    weft_err err = WEFT_OK;

    if (v == NULL) {
        return NULL;
    }
    weft__buf_init(&b, 0);
    put_value(&b, v, 0, &err);
    if (err != WEFT_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data; /* weft__malloc'd and NUL-terminated (base/buf.h) */
}
