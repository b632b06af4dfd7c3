/* base/utf8.c - UTF-8 validation, cutting, counting and repair (see base/utf8.h). */
#include "base/utf8.h"
#include "base/buf.h"

#include <string.h>

size_t
weft__utf8_seq(const uint8_t *s, size_t avail, bool *is_valid)
{
    uint8_t c = s[0];
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    size_t need = 0;

    /* The bounds of the second byte exclude overlong forms, surrogates and code points above
     * U+10FFFF (Unicode table 3-7). */
    if (c < 0x80) {
        *is_valid = true;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        *is_valid = false;
        return 1;
    }
    for (size_t i = 1; i <= need; i++) {
        if (i >= avail || s[i] < lo || s[i] > hi) {
            *is_valid = false;
            return i;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    *is_valid = true;
    return need + 1;
}

bool
weft__utf8_valid(const char *text, size_t len)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    bool is_valid = true;

    while (i < len) {
        if (len - i >= 8) {
            uint64_t word = 0;

            memcpy(&word, s + i, 8);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        i += weft__utf8_seq(s + i, len - i, &is_valid);
        if (!is_valid) {
            return false;
        }
    }
    return true;
}

size_t
weft__utf8_complete(const char *s, size_t len)
{
    size_t lead = len;
    size_t n = 0;
    bool is_valid = true;

    /* Back over at most three continuation bytes to the last lead byte. */
    while (lead > 0 && len - lead < 3 && ((uint8_t)s[lead - 1] & 0xC0) == 0x80) {
        lead--;
    }
    if (lead == 0) {
        return len;
    }
    lead--;
    n = weft__utf8_seq((const uint8_t *)s + lead, len - lead, &is_valid);
    /* A maximal invalid subpart is a prefix of some well-formed sequence: one that runs to the
     * end is a character the cut split, not garbage. */
    if (!is_valid && lead + n == len && (uint8_t)s[lead] >= 0xC2 && (uint8_t)s[lead] <= 0xF4) {
        return lead;
    }
    return len;
}

size_t
weft__utf8_cut(const char *s, size_t len, size_t max)
{
    return len <= max ? len : weft__utf8_complete(s, max);
}

size_t
weft__utf8_chars(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        n += ((uint8_t)s[i] & 0xC0) != 0x80;
    }
    return n;
}

weft_err
weft__utf8_sanitize(const char *s, size_t len, const char *replacement, struct weft__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t start = out->len;
    size_t rlen = strlen(replacement);
    size_t n = 0;
    size_t run = 0; /* start of the current run of valid bytes */
    bool is_valid = true;
    weft_err err = WEFT_OK;

    for (size_t i = 0; i < len && err == WEFT_OK; i += n) {
        n = weft__utf8_seq(p + i, len - i, &is_valid);
        if (!is_valid) {
            err = weft__buf_append(out, s + run, i - run);
            if (err == WEFT_OK) {
                err = weft__buf_append(out, replacement, rlen);
            }
            run = i + n;
        }
    }
    if (err == WEFT_OK) {
        err = weft__buf_append(out, s + run, len - run);
    }
    if (err != WEFT_OK) {
        weft__buf_truncate(out, start);
    }
    return err;
}

size_t
weft__utf8_prefix(const char *s, size_t len, size_t max_chars)
{
    size_t i = 0;
    size_t chars = 0;

    if (max_chars >= len) {
        return len; /* never more characters than bytes */
    }
    while (i < len && chars < max_chars) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xe  ? 3
                   : (c >> 3) == 0x1e ? 4
                                      : 1;

        if (i + n > len) {
            n = len - i;
        }
        i += n;
        chars++;
    }
    return i;
}
