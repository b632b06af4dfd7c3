/* serve/gzip.h - gzip for `weft serve`'s answers (gzip.c): whether a request accepts it, and
 * a body compressed whole. Internal to serve/.
 */
#ifndef WEFT_SERVE_GZIP_H
#define WEFT_SERVE_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>

/* Bodies smaller than this are sent as they are: the gzip framing alone is 18 bytes, such a
 * body gains a few hundred bytes at most, and most of them are error answers and small lists
 * that a browser reads in one packet anyway. */
#define WEFT__GZIP_MIN_BYTES 1024

/* Does the Accept-Encoding value @p accept (NULL: absent) allow gzip (RFC 9110 12.5.3)?
 * "gzip" or "x-gzip" with a weight above 0, or "*" above 0 when gzip is not named; q=0 refuses
 * it. Case-insensitive. */
bool weft__gzip_is_accepted(const char *accept);

/* zlib's levels (gzip.c says why): the default, and the fast one for bodies of numbers. */
#define WEFT__GZIP_LEVEL 6
#define WEFT__GZIP_FAST  2

/* @p in[0 .. @p len) as one gzip member (zlib, WEFT__GZIP_LEVEL; WEFT__GZIP_FAST with
 * @p is_fast: the caller knows its body is columns of numbers) into *out
 * (weft__malloc'd; weft__free).
 * @return WEFT_OK, WEFT_ENOMEM, WEFT_EIO (zlib failed); *out NULL on failure. */
weft_err weft__gzip(const char *in, size_t len, bool is_fast, char **out, size_t *out_len);

#endif /* WEFT_SERVE_GZIP_H */
