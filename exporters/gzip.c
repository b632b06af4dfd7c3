/* exporters/gzip.c - gzip (RFC 1952) into capped weft__buf buffers, so that a request never
 * grows past its limit.
 *
 * Compression of a whole request body uses libdeflate: the body is in memory already, and
 * libdeflate's one-shot compressor is about twice as fast as zlib's streaming deflate
 * at level 1 for the same ratio on OTLP protobuf (span_bench, case export). Its compressor
 * is built once per thread and level and kept, shared with the span store's payloads
 * (weft__deflate_compressor(), store/payload.c). Decompression has no
 * size known in advance and streams through zlib's inflate. The zlib compressor stays for the
 * benchmark and for tests that cross-check the two. */
#include "gzip.h"
#include "base/buf.h"
#include "store/payload.h"

#include <libdeflate.h>
#include <zlib.h>

/* libdeflate levels run 0..12; zlib's "default" (-1) is 6 in both. */
static int
deflate_level(int level)
{
    if (level < 0) {
        return 6;
    }
    return level > 12 ? 12 : level;
}

weft_err
weft__gzip_compress(const void *data, size_t len, int level, struct weft__buf *out)
{
    struct libdeflate_compressor *c = NULL;
    bool owned = false;
    size_t bound = 0;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (data == NULL && len > 0) {
        return WEFT_EINVAL;
    }
    if (level > 9) {
        return WEFT_EINVAL; /* the zlib range, which callers are written against */
    }
    c = weft__deflate_compressor(deflate_level(level), &owned);
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    bound = libdeflate_gzip_compress_bound(c, len);
    err = weft__buf_reserve(out, bound);
    if (err == WEFT_ELIMIT && out->max > out->len) {
        /* The worst case does not fit under the cap, but the real output may: offer what is
         * left (libdeflate returns 0 when the output does not fit). */
        bound = out->max - out->len;
        err = weft__buf_reserve(out, bound);
    }
    if (err == WEFT_OK) {
        n = libdeflate_gzip_compress(c, len > 0 ? data : "", len, out->data + out->len, bound);
        if (n == 0) {
            err = WEFT_ELIMIT;
        } else {
            out->len += n;
            weft__buf_truncate(out, out->len);
        }
    }
    if (owned) {
        libdeflate_free_compressor(c);
    }
    return err;
}

weft_err
weft__gzip_compress_zlib(const void *data, size_t len, int level, struct weft__buf *out)
{
    z_stream zs = {0};
    size_t start = out->len;
    size_t off = 0;
    weft_err err = WEFT_OK;
    int rc = Z_OK;

    if (data == NULL && len > 0) {
        return WEFT_EINVAL;
    }
    if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return WEFT_ENOMEM;
    }
    /* Feed at most 1 GiB at a time: zlib's counters are unsigned int. */
    do {
        size_t chunk = len - off < (1u << 30) ? len - off : (1u << 30);
        bool last = off + chunk == len;

        zs.next_in = (Bytef *)(uintptr_t)((const char *)data + off);
        zs.avail_in = (uInt)chunk;
        do {
            size_t room = deflateBound(&zs, (uLong)chunk) + 64;

            err = weft__buf_reserve(out, room);
            if (err != WEFT_OK) {
                goto fail;
            }
            zs.next_out = (Bytef *)out->data + out->len;
            zs.avail_out = (uInt)room;
            rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
            out->len += room - zs.avail_out;
            if (rc == Z_STREAM_ERROR) {
                err = WEFT_EIO;
                goto fail;
            }
        } while (zs.avail_out == 0 || (last && rc != Z_STREAM_END));
        off += chunk;
    } while (off < len);
    deflateEnd(&zs);
    weft__buf_truncate(out, out->len);
    return WEFT_OK;
fail:
    deflateEnd(&zs);
    weft__buf_truncate(out, start);
    return err;
}

weft_err
weft__gzip_decompress(const void *data, size_t len, struct weft__buf *out)
{
    z_stream zs = {0};
    size_t start = out->len;
    weft_err err = WEFT_OK;
    int rc = Z_OK;

    if (data == NULL || len > UINT32_MAX) {
        return WEFT_EINVAL;
    }
    if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        return WEFT_ENOMEM;
    }
    zs.next_in = (Bytef *)(uintptr_t)data;
    zs.avail_in = (uInt)len;
    do {
        size_t room = 64 * 1024;

        err = weft__buf_reserve(out, room);
        if (err != WEFT_OK) {
            goto fail;
        }
        zs.next_out = (Bytef *)out->data + out->len;
        zs.avail_out = (uInt)room;
        rc = inflate(&zs, Z_NO_FLUSH);
        out->len += room - zs.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END) {
            err = rc == Z_MEM_ERROR ? WEFT_ENOMEM : WEFT_EPARSE;
            goto fail;
        }
        if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
            err = WEFT_EPARSE; /* truncated stream */
            goto fail;
        }
    } while (rc != Z_STREAM_END);
    inflateEnd(&zs);
    weft__buf_truncate(out, out->len);
    return WEFT_OK;
fail:
    inflateEnd(&zs);
    weft__buf_truncate(out, start);
    return err;
}
