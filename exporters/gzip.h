/* exporters/gzip.h - gzip compression (libdeflate, or zlib) and decompression (zlib) into capped
 * weft__buf buffers. */
#ifndef WEFT_EXPORTERS_GZIP_H
#define WEFT_EXPORTERS_GZIP_H

#include "base/buf.h"

/* Append the gzip encoding of data[0..len) to @p out at @p level (-1 default, 0-9, as zlib),
 * in one pass with libdeflate. Thread-safe (a compressor per thread, freed at thread exit).
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ELIMIT (out->max reached; out unchanged), WEFT_ENOMEM,
 * WEFT_EIO. */
weft_err weft__gzip_compress(const void *data, size_t len, int level, struct weft__buf *out);

/* The same through zlib's streaming deflate (kept for comparison in span_bench and tests). */
weft_err weft__gzip_compress_zlib(const void *data, size_t len, int level, struct weft__buf *out);

/* Append the decompressed gzip stream data[0..len) to @p out (bounded by out->max).
 * @return WEFT_OK, WEFT_ELIMIT, WEFT_EPARSE (not gzip, corrupt or truncated), WEFT_ENOMEM. */
weft_err weft__gzip_decompress(const void *data, size_t len, struct weft__buf *out);

#endif /* WEFT_EXPORTERS_GZIP_H */
