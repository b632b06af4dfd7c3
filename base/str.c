/* base/str.c - small string helpers: percent-decoding, trimming, shortest round-trip doubles. */
#include "base/str.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

size_t
weft__fmt_json_real(double d, char point, char *buf)
{
    int n = snprintf(buf, WEFT__JSON_REAL_MAX - 3, "%.17g", d);
    size_t len = n > 0 ? (size_t)n : 0;
    char *e = NULL;

    if (point != '.' && (e = strchr(buf, point)) != NULL) {
        *e = '.';
    }
    if (strchr(buf, '.') == NULL && strchr(buf, 'e') == NULL) {
        memcpy(buf + len, ".0", 3);
        len += 2;
    }
    e = strchr(buf, 'e');
    if (e != NULL) {
        char *start = e + 1;
        char *end = start + 1;

        if (*start == '-') {
            start++;
        }
        while (*end == '0') {
            end++;
        }
        memmove(start, end, len + 1 - (size_t)(end - buf));
        len -= (size_t)(end - start);
    }
    return len;
}

char *
weft__percent_decode(const char *s, size_t len)
{
    char *out = weft__malloc(len + 1);
    size_t i = 0;
    size_t o = 0;

    if (out == NULL) {
        return NULL;
    }
    while (i < len) {
        if (s[i] == '%') {
            /* %00 is refused like a bad escape: the result is a C string, and a NUL in it
             * would silently cut a header value or make a resource key empty. */
            if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
                (s[i + 1] == '0' && s[i + 2] == '0')) {
                weft__free(out);
                return NULL;
            }
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 3;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return out;
}

void
weft__trim(const char **start, size_t *len)
{
    while (*len > 0 && (**start == ' ' || **start == '\t')) {
        (*start)++;
        (*len)--;
    }
    while (*len > 0 && ((*start)[*len - 1] == ' ' || (*start)[*len - 1] == '\t')) {
        (*len)--;
    }
}

int
weft__fmt_double(char *buf, size_t len, double d)
{
    int n = 0;

    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, len, "%.*g", prec, d);
        if (n < 0 || (size_t)n >= len || strtod(buf, NULL) == d) {
            break;
        }
    }
    return n;
}
