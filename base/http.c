/* base/http.c - HTTP header helpers shared by every HTTP client: Retry-After, header lines. */
#include "base/http.h"
#include "base/str.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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
