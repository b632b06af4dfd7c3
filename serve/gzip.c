/* serve/gzip.c - gzip for `weft serve`'s answers (gzip.h). A body is compressed whole, in one
 * deflate() call into a buffer of deflateBound() bytes: the API builds its documents whole
 * anyway, and the server copies the body it is given, so streaming the compression would save
 * nothing. Level 6 (zlib's default): on the explorer's JSON it is within a few percent of 9's
 * size at about a third of its time, and about 20% smaller than 1's. But the trace rows
 * (weft.rows/v1, columns of numbers) at level 2: as small as at 6 (a 100,000-span trace's
 * rest: 1.19 MB against 1.24 MB) in a third of the time (87 against 241 ms here), which the
 * page waits for; on whole-span JSON 2 is 27% larger than 6, so only for those.
 */
#include "gzip.h"

#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* The weight of one Accept-Encoding element's parameters @p p[0 .. @p len) (";q=0.5"): 1000
 * for none, 0 for q=0 (or a malformed q, read as refusing). */
static int
weight(const char *p, size_t len)
{
    const char *q = NULL;
    int w = 0;
    int scale = 100;

    for (size_t i = 0; i + 1 < len; i++) {
        if ((p[i] == 'q' || p[i] == 'Q') && p[i + 1] == '=') {
            q = p + i + 2;
            break;
        }
    }
    if (q == NULL) {
        return 1000;
    }
    if (*q == '1') {
        return 1000;
    }
    if (*q != '0') {
        return 0;
    }
    for (q++, q += *q == '.'; *q >= '0' && *q <= '9' && scale > 0; q++, scale /= 10) {
        w += (*q - '0') * scale;
    }
    return w;
}

bool
weft__gzip_is_accepted(const char *accept)
{
    int gzip = -1; /* the weight of gzip when named, of "*" otherwise */
    int star = -1;

    while (accept != NULL && *accept != '\0') {
        size_t len = strcspn(accept, ",");
        size_t skip = strspn(accept, " \t");
        size_t name = skip < len ? strcspn(accept + skip, " \t;,") : 0;
        const char *params = accept + skip + name;
        int w = weight(params, len - skip - name);

        if ((name == 4 && strncasecmp(accept + skip, "gzip", 4) == 0) ||
            (name == 6 && strncasecmp(accept + skip, "x-gzip", 6) == 0)) {
            gzip = w > gzip ? w : gzip;
        } else if (name == 1 && accept[skip] == '*') {
            star = w;
        }
        accept += len;
        accept += *accept == ',';
    }
    return gzip >= 0 ? gzip > 0 : star > 0;
}

weft_err
weft__gzip(const char *in, size_t len, bool is_fast, char **out, size_t *out_len)
{
    z_stream zs;
    char *buf = NULL;
    uLong cap = 0;
    int rc = 0;

    *out = NULL;
    *out_len = 0;
    if (len > (size_t)UINT32_MAX) {
        return WEFT_EIO; /* avail_in is 32 bits; no answer is that large */
    }
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, is_fast ? WEFT__GZIP_FAST : WEFT__GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        return WEFT_ENOMEM;
    }
    cap = deflateBound(&zs, (uLong)len);
    buf = weft__malloc(cap);
    if (buf == NULL) {
        deflateEnd(&zs);
        return WEFT_ENOMEM;
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = (Bytef *)buf;
    zs.avail_out = (uInt)cap;
    rc = deflate(&zs, Z_FINISH);
    *out_len = (size_t)zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        weft__free(buf);
        *out_len = 0;
        return WEFT_EIO;
    }
    *out = buf;
    return WEFT_OK;
}
