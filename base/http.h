/* base/http.h - HTTP header helpers shared by every HTTP client (OTLP exporter, LLM providers,
 * webhooks).
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_HTTP_H
#define WEFT_BASE_HTTP_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A Retry-After header value (RFC 9110 10.2.3) as milliseconds from now: delta-seconds, or an
 * HTTP-date in any of its three forms (IMF-fixdate, RFC 850, asctime). 0 when @p value is NULL,
 * empty, unparsable or a date in the past; at most 10^12 (about 31 years), so that a caller
 * may convert it to nanoseconds and add a clock reading without overflow. @p value is the bare
 * value, without the name or surrounding whitespace. Shared by every HTTP client (OTLP exporter,
 * LLM providers). */
uint64_t weft__http_retry_after_ms(const char *value);

/* When the header line @p line (@p len bytes, "Name: value\r\n" as an HTTP client's header
 * callback gets it) has the name @p name (case-insensitive), copy its value without the
 * surrounding whitespace and line end into @p out, cut to @p out_len - 1 bytes, and return
 * true; else return false and leave @p out alone. */
bool
weft__http_header_value(const char *line, size_t len, const char *name, char *out, size_t out_len);

#endif /* WEFT_BASE_HTTP_H */
