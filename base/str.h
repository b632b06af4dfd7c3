/* base/str.h - small string helpers.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_STR_H
#define WEFT_BASE_STR_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Format a finite double in the shortest of %.15g, %.16g and %.17g that reads back exactly,
 * so that 0.04 prints as "0.04", not "0.040000000000000001". @return the length written. */
int weft__fmt_double(char *buf, size_t len, double d);

/* A finite double as jansson's dump writes it at JSON_REAL_PRECISION(17): "%.17g", the
 * locale's decimal point @p point turned into '.', ".0" added when neither '.' nor 'e' is
 * there (so that it reads back as a real), the exponent without '+' or leading zeros.
 * @p buf holds at least WEFT__JSON_REAL_MAX bytes. @return the length written. */
#define WEFT__JSON_REAL_MAX 40
size_t weft__fmt_json_real(double d, char point, char *buf);

/* Percent-decode @p len bytes of @p s into a new string; NULL on a bad escape (including %00,
 * which a C string cannot hold) or ENOMEM. */
char *weft__percent_decode(const char *s, size_t len);

/* Trim spaces and tabs: sets *start and *len to the trimmed span of s[0..len). */
void weft__trim(const char **start, size_t *len);

#endif /* WEFT_BASE_STR_H */
