/* tracing/util.h - private helpers shared by every weft module: allocation through the
 * replaceable allocator, logging through the installed handler, a bounded growable byte
 * buffer, and environment-variable parsing with warn-and-default semantics.
 *
 * Nothing here is public API; names carry the weft__ prefix.
 */
#ifndef WEFT_TRACING_UTIL_H
#define WEFT_TRACING_UTIL_H

#include <weft/common.h>

void *weft__malloc(size_t size);
void *weft__calloc(size_t count, size_t size);
void *weft__realloc(void *ptr, size_t size);
void weft__free(void *ptr);
char *weft__strdup(const char *s);
char *weft__strndup(const char *s, size_t len);

/* Logging: the level test happens before any formatting. */
extern weft_log_level weft__log_max;
extern weft_log_fn weft__log_fn;
void weft__log(weft_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define WEFT_LOG(level, ...)                                    \
    do {                                                        \
        if (weft__log_fn != NULL && (level) <= weft__log_max) { \
            weft__log((level), __VA_ARGS__);                    \
        }                                                       \
    } while (0)

/* A growable byte buffer with a hard cap. Appends past the cap fail with WEFT_ELIMIT and
 * leave the buffer unchanged. The data is always NUL-terminated (not counted in len). */
struct weft__buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* 0 means SIZE_MAX / 2 */
};
void weft__buf_init(struct weft__buf *buf, size_t max);
void weft__buf_cleanup(struct weft__buf *buf);
void weft__buf_reset(struct weft__buf *buf);
/* Cut the buffer back to @p len bytes (at most its length), NUL-terminated: how an encoder
 * that failed halfway restores what its caller had. */
void weft__buf_truncate(struct weft__buf *buf, size_t len);
weft_err weft__buf_reserve(struct weft__buf *buf, size_t extra);
weft_err weft__buf_append(struct weft__buf *buf, const void *data, size_t len);
weft_err weft__buf_append_str(struct weft__buf *buf, const char *s);
weft_err weft__buf_append_byte(struct weft__buf *buf, uint8_t byte);
weft_err weft__buf_printf(struct weft__buf *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Environment: an unset or empty variable yields NULL / the default. A malformed value logs a
 * WARN naming the variable and the expected form, and yields the default. */
const char *weft__env(const char *name);
/* weft's own boolean variables: true/false, 1/0, yes/no, on/off (case-insensitive); anything
 * else warns and yields @p def. */
bool weft__env_bool(const char *name, bool def);
/* OTel's boolean variables (OTEL_SDK_DISABLED), as the specification defines them: only
 * "true" (case-insensitive) is true; anything but "false" warns and is false. */
bool weft__env_bool_otel(const char *name, bool def);
uint64_t weft__env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max);
double weft__env_double(const char *name, double def, double min, double max);

/* Format a finite double in the shortest of %.15g, %.16g and %.17g that reads back exactly,
 * so that 0.04 prints as "0.04", not "0.040000000000000001". @return the length written. */
int weft__fmt_double(char *buf, size_t len, double d);

/* Clocks. */
/* Create every missing ancestor directory of @p path with @p mode (not @p path itself).
 * @return WEFT_OK, WEFT_EINVAL (NULL or empty), WEFT_EIO (errno says why), WEFT_ENOMEM. */
weft_err weft__mkdir_parents(const char *path, unsigned mode);

uint64_t weft__now_ns(void);
uint64_t weft__monotonic_ns(void);

/* @p text with weft's built-in redaction applied to every credential-looking part ("sk-..."
 * keys, Bearer/Basic credentials, AWS key ids), for text written to files. Never longer than
 * needed; NULL only when out of memory. Ownership: returns new (weft__free). */
char *weft__redact_text(const char *text);

/* Percent-decode @p len bytes of @p s into a new string; NULL on a bad escape (including %00,
 * which a C string cannot hold) or ENOMEM. */
char *weft__percent_decode(const char *s, size_t len);

/* Trim spaces and tabs: sets *start and *len to the trimmed span of s[0..len). */
void weft__trim(const char **start, size_t *len);

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

#endif /* WEFT_TRACING_UTIL_H */
