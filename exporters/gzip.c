/* exporters/gzip.c - gzip (RFC 1952) through zlib's deflate/inflate with the gzip wrapper
 * (windowBits 15 + 16), writing straight into a capped weft__buf so that a request never grows
 * past its limit. */
#include "gzip.h"
#include "base/buf.h"

#include <zlib.h>

weft_err
weft__gzip_compress(const void *data, size_t len, int level, struct weft__buf *out)
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
