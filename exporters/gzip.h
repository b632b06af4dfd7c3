/* exporters/gzip.h - gzip compression and decompression into capped weft__buf buffers (zlib). */
#ifndef WEFT_EXPORTERS_GZIP_H
#define WEFT_EXPORTERS_GZIP_H

#include "base/buf.h"

/* Append the gzip encoding of data[0..len) to @p out at zlib @p level (-1 default, 0-9).
 * @return WEFT_OK, WEFT_ELIMIT (out->max reached; out restored), WEFT_ENOMEM, WEFT_EIO. */
weft_err weft__gzip_compress(const void *data, size_t len, int level, struct weft__buf *out);

/* Append the decompressed gzip stream data[0..len) to @p out (bounded by out->max).
 * @return WEFT_OK, WEFT_ELIMIT, WEFT_EPARSE (not gzip, corrupt or truncated), WEFT_ENOMEM. */
weft_err weft__gzip_decompress(const void *data, size_t len, struct weft__buf *out);

#endif /* WEFT_EXPORTERS_GZIP_H */
