/* tracing/util.c - allocation, logging, bounded buffers, environment parsing, clocks and
 * Retry-After parsing shared by every weft module.
 *
 * The allocator and log hooks are plain globals set once before use (documented in
 * common.h), so the hot path reads them without synchronisation.
 */
#include "util.h"

#include <weft/export.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

static void *(*alloc_malloc)(size_t) = malloc;
static void *(*alloc_realloc)(void *, size_t) = realloc;
static void (*alloc_free)(void *) = free;

weft_log_level weft__log_max = WEFT_LOG_ERROR;
weft_log_fn weft__log_fn = NULL;
static void *log_user_data = NULL;

const char *
weft_strerror(weft_err err)
{
    switch (err) {
    case WEFT_OK:
        return "success";
    case WEFT_EINVAL:
        return "invalid argument";
    case WEFT_ENOMEM:
        return "out of memory";
    case WEFT_ELIMIT:
        return "limit reached (dropped and counted)";
    case WEFT_EIO:
        return "input/output error";
    case WEFT_ETIMEDOUT:
        return "timed out";
    case WEFT_ESTATE:
        return "invalid state";
    case WEFT_EPARSE:
        return "parse error";
    case WEFT_EHTTP:
        return "HTTP error";
    case WEFT_ENOTFOUND:
        return "not found";
    case WEFT_EDISABLED:
        return "SDK disabled";
    }
    return "unknown error";
}

weft_err
weft_set_allocator(void *(*malloc_fn)(size_t),
                   void *(*realloc_fn)(void *, size_t),
                   void (*free_fn)(void *))
{
    if (malloc_fn == NULL && realloc_fn == NULL && free_fn == NULL) {
        alloc_malloc = malloc;
        alloc_realloc = realloc;
        alloc_free = free;
        return WEFT_OK;
    }
    if (malloc_fn == NULL || realloc_fn == NULL || free_fn == NULL) {
        return WEFT_EINVAL;
    }
    alloc_malloc = malloc_fn;
    alloc_realloc = realloc_fn;
    alloc_free = free_fn;
    return WEFT_OK;
}

void *
weft__malloc(size_t size)
{
    return alloc_malloc(size == 0 ? 1 : size);
}

void *
weft__calloc(size_t count, size_t size)
{
    void *p = NULL;

    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    p = weft__malloc(count * size);
    if (p != NULL) {
        memset(p, 0, count * size);
    }
    return p;
}

void *
weft__realloc(void *ptr, size_t size)
{
    return alloc_realloc(ptr, size == 0 ? 1 : size);
}

void
weft__free(void *ptr)
{
    if (ptr != NULL) {
        alloc_free(ptr);
    }
}

char *
weft__strndup(const char *s, size_t len)
{
    char *copy = weft__malloc(len + 1);

    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

char *
weft__strdup(const char *s)
{
    return s == NULL ? NULL : weft__strndup(s, strlen(s));
}

void
weft_log_set_handler(weft_log_fn fn, weft_log_level max_level, void *user_data)
{
    weft__log_fn = fn;
    weft__log_max = max_level;
    log_user_data = user_data;
}

const char *
weft_log_level_name(weft_log_level level)
{
    switch (level) {
    case WEFT_LOG_ERROR:
        return "error";
    case WEFT_LOG_WARN:
        return "warn";
    case WEFT_LOG_INFO:
        return "info";
    case WEFT_LOG_DEBUG:
        return "debug";
    }
    return "unknown";
}

void
weft__log(weft_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    weft_log_fn fn = weft__log_fn;

    if (fn == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fn(level, line, log_user_data);
}

void
weft__buf_init(struct weft__buf *buf, size_t max)
{
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    buf->max = max == 0 ? SIZE_MAX / 2 : max;
}

void
weft__buf_cleanup(struct weft__buf *buf)
{
    if (buf == NULL) {
        return;
    }
    weft__free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

void
weft__buf_reset(struct weft__buf *buf)
{
    weft__buf_truncate(buf, 0);
}

void
weft__buf_truncate(struct weft__buf *buf, size_t len)
{
    if (len < buf->len) {
        buf->len = len;
    }
    if (buf->data != NULL) {
        buf->data[buf->len] = '\0';
    }
}

weft_err
weft__buf_reserve(struct weft__buf *buf, size_t extra)
{
    size_t need = 0;
    size_t cap = 0;
    char *data = NULL;

    if (extra > buf->max || buf->len > buf->max - extra) {
        return WEFT_ELIMIT;
    }
    need = buf->len + extra + 1;
    if (need <= buf->cap) {
        return WEFT_OK;
    }
    cap = buf->cap < 256 ? 256 : buf->cap;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    data = weft__realloc(buf->data, cap);
    if (data == NULL) {
        return WEFT_ENOMEM;
    }
    buf->data = data;
    buf->cap = cap;
    return WEFT_OK;
}

weft_err
weft__buf_append(struct weft__buf *buf, const void *data, size_t len)
{
    weft_err err = weft__buf_reserve(buf, len);

    if (err != WEFT_OK) {
        return err;
    }
    if (len > 0) {
        memcpy(buf->data + buf->len, data, len);
    }
    buf->len += len;
    buf->data[buf->len] = '\0';
    return WEFT_OK;
}

weft_err
weft__buf_append_str(struct weft__buf *buf, const char *s)
{
    return weft__buf_append(buf, s, strlen(s));
}

weft_err
weft__buf_append_byte(struct weft__buf *buf, uint8_t byte)
{
    return weft__buf_append(buf, &byte, 1);
}

weft_err
weft__buf_printf(struct weft__buf *buf, const char *fmt, ...)
{
    va_list ap;
    int n = 0;
    weft_err err = WEFT_OK;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return WEFT_EINVAL;
    }
    err = weft__buf_reserve(buf, (size_t)n);
    if (err != WEFT_OK) {
        return err;
    }
    va_start(ap, fmt);
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf->len += (size_t)n;
    return WEFT_OK;
}

const char *
weft__env(const char *name)
{
    const char *v = getenv(name);

    return (v == NULL || v[0] == '\0') ? NULL : v;
}

bool
weft__env_bool(const char *name, bool def)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    const char *v = weft__env(name);

    if (v == NULL) {
        return def;
    }
    /* The forms the README documents, case-insensitive. */
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            return true;
        }
        if (strcasecmp(v, no[i]) == 0) {
            return false;
        }
    }
    WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected true/false, 1/0, yes/no or on/off; using %s", name, v,
             def ? "true" : "false");
    return def;
}

bool
weft__env_bool_otel(const char *name, bool def)
{
    const char *v = weft__env(name);

    if (v == NULL) {
        return def;
    }
    /* The OTel specification: only a case-insensitive "true" is true; anything else that is
     * not "false" warns and is false. */
    if (strcasecmp(v, "true") == 0) {
        return true;
    }
    if (strcasecmp(v, "false") != 0) {
        WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected true or false; using false", name, v);
    }
    return false;
}

uint64_t
weft__env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
    const char *v = weft__env(name);
    char *end = NULL;
    unsigned long long n = 0;

    if (v == NULL) {
        return def;
    }
    errno = 0;
    n = strtoull(v, &end, 10);
    while (end != NULL && (*end == ' ' || *end == '\t')) {
        end++;
    }
    if (v[0] == '-' || errno != 0 || end == v || *end != '\0' || n < min || n > max) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "%s=%s: expected an integer in [%llu, %llu]; using the default %llu", name, v,
                 (unsigned long long)min, (unsigned long long)max, (unsigned long long)def);
        return def;
    }
    return (uint64_t)n;
}

double
weft__env_double(const char *name, double def, double min, double max)
{
    const char *v = weft__env(name);
    char *end = NULL;
    double d = 0;

    if (v == NULL) {
        return def;
    }
    errno = 0;
    d = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(d >= min && d <= max)) {
        WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected a number in [%g, %g]; using the default %g", name,
                 v, min, max, def);
        return def;
    }
    return d;
}

uint64_t
weft__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
weft__monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
weft_now_ns(void)
{
    return weft__now_ns();
}

uint64_t
weft_monotonic_ns(void)
{
    return weft__monotonic_ns();
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

char *
weft__percent_decode(const char *s, size_t len)
{
    char *out = weft__malloc(len + 1);
    size_t i = 0;
    size_t o = 0;

    if (out == NULL) {
        return NULL;
    }
    while (i < len) {
        if (s[i] == '%') {
            /* %00 is refused like a bad escape: the result is a C string, and a NUL in it
             * would silently cut a header value or make a resource key empty. */
            if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
                (s[i + 1] == '0' && s[i + 2] == '0')) {
                weft__free(out);
                return NULL;
            }
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 3;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return out;
}

void
weft__trim(const char **start, size_t *len)
{
    while (*len > 0 && (**start == ' ' || **start == '\t')) {
        (*start)++;
        (*len)--;
    }
    while (*len > 0 && ((*start)[*len - 1] == ' ' || (*start)[*len - 1] == '\t')) {
        (*len)--;
    }
}

static int
month_number(const char *name)
{
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

    for (int i = 0; i < 12; i++) {
        if (strcmp(name, months[i]) == 0) {
            return i + 1;
        }
    }
    return 0;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). Written
 * out because timegm() is not POSIX and mktime() would apply the local time zone. */
static int64_t
days_from_civil(int64_t year, int month, int day)
{
    int64_t era = 0;
    int64_t yoe = 0;
    int64_t doy = 0;
    int64_t doe = 0;

    year -= month <= 2 ? 1 : 0;
    era = (year >= 0 ? year : year - 399) / 400;
    yoe = year - era * 400;
    doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* An HTTP-date as seconds since the epoch, or -1. RFC 9110 5.6.7: senders use IMF-fixdate
 * ("Sun, 06 Nov 1994 08:49:37 GMT"); recipients also accept RFC 850 ("Sunday, 06-Nov-94
 * 08:49:37 GMT") and asctime ("Sun Nov  6 08:49:37 1994"). Parsed here rather than with
 * curl_getdate() so that tracing/ does not depend on libcurl. */
static int64_t
parse_http_date(const char *v)
{
    char mon[4] = "";
    int day = 0;
    int year = 0;
    int hh = 0;
    int mm = 0;
    int ss = 0;
    int used = 0;
    int month = 0;
    int fields = 0;
    bool is_match = false;

    fields = sscanf(v, "%*[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", &day, mon, &year, &hh,
                    &mm, &ss, &used);
    is_match = fields == 6 && used > 0 && v[used] == '\0';
    if (!is_match) {
        used = 0;
        fields = sscanf(v, "%*[A-Za-z], %2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", &day, mon, &year,
                        &hh, &mm, &ss, &used);
        is_match = fields == 6 && used > 0 && v[used] == '\0';
        /* RFC 850 has a two-digit year; nothing is retried before 1970. */
        year += year < 70 ? 2000 : 1900;
    }
    if (!is_match) {
        used = 0;
        fields = sscanf(v, "%*[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", mon, &day, &hh, &mm, &ss,
                        &year, &used);
        is_match = fields == 6 && used > 0 && v[used] == '\0';
    }
    if (!is_match) {
        return -1;
    }
    month = month_number(mon);
    if (month == 0 || day < 1 || day > 31 || year < 1970 || hh < 0 || hh > 23 || mm < 0 ||
        mm > 59 || ss < 0 || ss > 60) {
        return -1;
    }
    return days_from_civil(year, month, day) * 86400 + hh * 3600 + mm * 60 + ss;
}

/* The longest wait reported: about 31 years, small enough that callers can turn it into
 * nanoseconds and add it to a clock reading without overflow. */
#define RETRY_AFTER_MAX_S 1000000000ull

uint64_t
weft__http_retry_after_ms(const char *value)
{
    char *end = NULL;
    unsigned long long secs = 0;
    int64_t when = 0;
    int64_t now = 0;

    if (value == NULL || value[0] == '\0') {
        return 0;
    }
    if (value[0] >= '0' && value[0] <= '9') {
        errno = 0;
        secs = strtoull(value, &end, 10);
        if (*end != '\0') {
            return 0;
        }
        /* Saturate rather than wrap: callers bound the wait by their own deadline. */
        if (errno != 0 || secs > RETRY_AFTER_MAX_S) {
            secs = RETRY_AFTER_MAX_S;
        }
        return (uint64_t)secs * 1000u;
    }
    when = parse_http_date(value);
    now = (int64_t)time(NULL);
    if (when <= now) {
        return 0;
    }
    if ((uint64_t)(when - now) > RETRY_AFTER_MAX_S) {
        return RETRY_AFTER_MAX_S * 1000u;
    }
    return (uint64_t)(when - now) * 1000u;
}

char *
weft__redact_text(const char *text)
{
    size_t len = strlen(text);
    /* A replacement marker can be longer than what it replaces: leave room for many. */
    size_t cap = len + 64 + len / 2;
    char *scratch = weft__malloc(cap);
    const char *redacted = NULL;
    char *out = NULL;

    if (scratch == NULL) {
        return NULL;
    }
    redacted = weft_redact_builtin("text", text, len, scratch, cap);
    out = weft__strdup(redacted != NULL ? redacted : text);
    weft__free(scratch);
    return out;
}

int
weft__fmt_double(char *buf, size_t len, double d)
{
    int n = 0;

    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, len, "%.*g", prec, d);
        if (n < 0 || (size_t)n >= len || strtod(buf, NULL) == d) {
            break;
        }
    }
    return n;
}

weft_err
weft__mkdir_parents(const char *path, unsigned mode)
{
    char *copy = NULL;
    char *slash = NULL;
    weft_err err = WEFT_OK;

    if (path == NULL || path[0] == '\0') {
        return WEFT_EINVAL; /* and copy + 1 below would be past the end */
    }
    copy = weft__strdup(path);
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    /* Create each ancestor in turn; an existing directory is fine, anything else at a
     * component's place (a file, no permission) fails with errno set for the caller. */
    for (slash = strchr(copy + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        struct stat st;

        *slash = '\0';
        if (mkdir(copy, (mode_t)mode) != 0) {
            int saved = errno;

            if (saved != EEXIST || stat(copy, &st) != 0 || !S_ISDIR(st.st_mode)) {
                errno = saved == EEXIST ? ENOTDIR : saved;
                err = WEFT_EIO;
                goto out;
            }
        }
        *slash = '/';
    }
out:
    weft__free(copy);
    return err;
}

bool
weft__http_header_value(const char *line, size_t len, const char *name, char *out, size_t out_len)
{
    size_t name_len = strlen(name);
    const char *v = line + name_len + 1;
    size_t vlen = 0;

    if (len <= name_len || line[name_len] != ':' || strncasecmp(line, name, name_len) != 0 ||
        out_len == 0) {
        return false;
    }
    vlen = len - name_len - 1;
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n')) {
        vlen--;
    }
    weft__trim(&v, &vlen);
    if (vlen >= out_len) {
        vlen = out_len - 1;
    }
    memcpy(out, v, vlen);
    out[vlen] = '\0';
    return true;
}
