/* base/utf8.h - the one UTF-8 implementation every weft module uses: validation, cutting on a
 * character boundary, counting characters and repairing invalid text.
 *
 * Well-formedness follows Unicode table 3-7 (no overlong forms, surrogates or code points above
 * U+10FFFF); "maximal invalid subpart" is Unicode's definition (section 3.9, U+FFFD
 * substitution), the one OTLP/JSON encoders and browsers use.
 *
 * Internal to weft (names carry the weft__ prefix).
 */
#ifndef WEFT_BASE_UTF8_H
#define WEFT_BASE_UTF8_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* U+FFFD REPLACEMENT CHARACTER, encoded. */
#define WEFT__UTF8_REPLACEMENT "\xEF\xBF\xBD"

/* The length of the well-formed sequence at @p s (with *is_valid true), or of the maximal
 * invalid subpart there (with *is_valid false). @p avail must be at least 1. Never more than
 * @p avail, never 0. */
size_t weft__utf8_seq(const uint8_t *s, size_t avail, bool *is_valid);

/* True when s[0..len) is well-formed UTF-8. ASCII runs are checked eight bytes at a time. */
bool weft__utf8_valid(const char *s, size_t len);

/* s[0..len) without a trailing sequence that the end cuts short (a lead byte and fewer
 * continuation bytes than it announces): how text cut by a byte cap is made whole again. */
size_t weft__utf8_complete(const char *s, size_t len);

/* The longest prefix of s[0..len) of at most @p max bytes that does not end inside a
 * multi-byte sequence: how text is cut to a byte cap. Returns @p len when it fits. */
size_t weft__utf8_cut(const char *s, size_t len, size_t max);

/* The number of characters in s[0..len): bytes that are not continuation bytes (an invalid
 * byte counts as one character). */
size_t weft__utf8_chars(const char *s, size_t len);

/* Length in bytes of the first @p max_chars characters of s[0..len) (a lead byte counts its
 * whole sequence, cut at @p len): how attribute values are cut to a character limit. */
size_t weft__utf8_prefix(const char *s, size_t len, size_t max_chars);

/* Append s[0..len) to @p out with each maximal invalid subpart replaced by @p replacement
 * (e.g. WEFT__UTF8_REPLACEMENT or "?"). Ownership: borrows everything. Errors: WEFT_ENOMEM or
 * WEFT_ELIMIT from the buffer, which is then cut back to its length on entry. */
weft_err
weft__utf8_sanitize(const char *s, size_t len, const char *replacement, struct weft__buf *out);

#endif /* WEFT_BASE_UTF8_H */
