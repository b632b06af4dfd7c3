/* exporters/prometheus.c - the Prometheus text exposition format 0.0.4 for a weft meter, named
 * per the OpenTelemetry to Prometheus compatibility rules:
 *
 * - metric and label names: characters outside [a-zA-Z0-9_:] (labels: [a-zA-Z0-9_]) become
 *   '_', runs of '_' collapse, a leading digit gets a '_' prefix;
 * - units become suffixes (s -> _seconds, ms -> _milliseconds, By -> _bytes, 1 -> _ratio on
 *   gauges; annotations in braces such as {token} are dropped), unless the name already ends
 *   with them;
 * - monotonic counters get _total; up-down counters are gauges; histograms expose cumulative
 *   _bucket{le="..."} series ending at le="+Inf", then _sum and _count;
 * - every family gets HELP and TYPE, even before its first measurement, so that dashboards and
 *   alerts see a known metric rather than a gap; target_info carries the resource.
 *
 * Label values are escaped (\\, \", \n). Exemplars are not part of format 0.0.4; they travel
 * in OTLP metrics.
 */
#include "base/buf.h"
#include "base/str.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>

#define MAX_NAME 512

struct render {
    struct weft__buf out;
    char family[MAX_NAME]; /* the instrument's Prometheus name, without _total/_bucket */
    const struct weft_instrument_view *view;
    weft_err err;
};

static void
sanitize(const char *in, char *out, size_t cap, bool is_label)
{
    size_t len = 0;
    bool was_underscore = false;

    if (cap == 0) {
        return;
    }
    if (in[0] >= '0' && in[0] <= '9' && len + 1 < cap) {
        out[len++] = '_';
        was_underscore = true;
    }
    for (const char *p = in; *p != '\0' && len + 1 < cap; p++) {
        char c = *p;
        bool is_ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || (!is_label && c == ':');
        if (!is_ok) {
            c = '_';
        }
        if (c == '_' && was_underscore) {
            continue;
        }
        was_underscore = c == '_';
        out[len++] = c;
    }
    out[len] = '\0';
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s);
    size_t b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The unit's suffix per the compatibility rules, or "" for none. */
static const char *
unit_suffix(const char *unit, weft_instrument_kind kind, char *buf, size_t cap)
{
    static const struct {
        const char *unit;
        const char *suffix;
    } known[] = {{"s", "seconds"},      {"ms", "milliseconds"}, {"us", "microseconds"},
                 {"ns", "nanoseconds"}, {"By", "bytes"},        {"KiBy", "kibibytes"},
                 {"MiBy", "mebibytes"}, {"%", "percent"},       {"min", "minutes"},
                 {"h", "hours"},        {"d", "days"}};
    char plain[128];
    size_t len = 0;

    /* Drop {annotations}. */
    for (const char *p = unit; *p != '\0' && len + 1 < sizeof(plain); p++) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            if (close == NULL) {
                break;
            }
            p = close;
            continue;
        }
        plain[len++] = *p;
    }
    plain[len] = '\0';
    if (len == 0) {
        return "";
    }
    if (strcmp(plain, "1") == 0) {
        return kind == WEFT_INSTRUMENT_GAUGE || kind == WEFT_INSTRUMENT_UPDOWN_COUNTER ? "ratio"
                                                                                       : "";
    }
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(plain, known[i].unit) == 0) {
            return known[i].suffix;
        }
    }
    sanitize(plain, buf, cap, false);
    return buf;
}

static void
put_escaped(struct weft__buf *b, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\') {
            weft__buf_append_str(b, "\\\\");
        } else if (s[i] == '"') {
            weft__buf_append_str(b, "\\\"");
        } else if (s[i] == '\n') {
            weft__buf_append_str(b, "\\n");
        } else {
            weft__buf_append_byte(b, (uint8_t)s[i]);
        }
    }
}

static void
put_double(struct weft__buf *b, double v)
{
    if (isnan(v)) {
        weft__buf_append_str(b, "NaN");
    } else if (isinf(v)) {
        weft__buf_append_str(b, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 1e15) {
        weft__buf_printf(b, "%.0f", v);
    } else {
        char num[32];

        weft__fmt_double(num, sizeof(num), v);
        weft__buf_append_str(b, num);
    }
}

/* {k="v",...[,le="x"]} */
static void
put_labels(struct weft__buf *b, const struct weft_attr *attrs, size_t n, const char *le)
{
    bool is_first = true;

    if (n == 0 && le == NULL) {
        return;
    }
    weft__buf_append_byte(b, '{');
    for (size_t i = 0; i < n; i++) {
        char name[MAX_NAME];
        char num[64];
        sanitize(attrs[i].key, name, sizeof(name), true);
        weft__buf_printf(b, "%s%s=\"", is_first ? "" : ",", name);
        is_first = false;
        switch (attrs[i].value.type) {
        case WEFT_VALUE_STRING:
            put_escaped(b, attrs[i].value.u.str, attrs[i].value.len);
            break;
        case WEFT_VALUE_BOOL:
            weft__buf_append_str(b, attrs[i].value.u.b ? "true" : "false");
            break;
        case WEFT_VALUE_INT:
            snprintf(num, sizeof(num), "%lld", (long long)attrs[i].value.u.i);
            weft__buf_append_str(b, num);
            break;
        case WEFT_VALUE_DOUBLE:
            weft__fmt_double(num, sizeof(num), attrs[i].value.u.d);
            weft__buf_append_str(b, num);
            break;
        default:
            break;
        }
        weft__buf_append_byte(b, '"');
    }
    if (le != NULL) {
        weft__buf_printf(b, "%sle=\"%s\"", is_first ? "" : ",", le);
    }
    weft__buf_append_byte(b, '}');
}

static bool
visit(const struct weft_instrument_view *in, const struct weft_series_view *s, void *user_data)
{
    struct render *r = user_data;
    struct weft__buf *b = &r->out;

    if (s == NULL) {
        char base[MAX_NAME];
        char ubuf[128];
        const char *suffix = unit_suffix(in->unit, in->kind, ubuf, sizeof(ubuf));
        const char *type = in->kind == WEFT_INSTRUMENT_COUNTER     ? "counter"
                           : in->kind == WEFT_INSTRUMENT_HISTOGRAM ? "histogram"
                                                                   : "gauge";
        sanitize(in->name, base, sizeof(base), false);
        if (suffix[0] != '\0' && !ends_with(base, suffix)) {
            snprintf(r->family, sizeof(r->family), "%.400s_%.100s", base, suffix);
        } else {
            snprintf(r->family, sizeof(r->family), "%s", base);
        }
        r->view = in;
        weft__buf_printf(
            b, "# HELP %s%s ", r->family,
            in->kind == WEFT_INSTRUMENT_COUNTER && !ends_with(r->family, "_total") ? "_total" : "");
        /* HELP text escapes backslash and newline only. */
        for (const char *p = in->description[0] != '\0' ? in->description : in->name; *p != '\0';
             p++) {
            if (*p == '\\') {
                weft__buf_append_str(b, "\\\\");
            } else if (*p == '\n') {
                weft__buf_append_str(b, "\\n");
            } else {
                weft__buf_append_byte(b, (uint8_t)*p);
            }
        }
        weft__buf_printf(
            b, "\n# TYPE %s%s %s\n", r->family,
            in->kind == WEFT_INSTRUMENT_COUNTER && !ends_with(r->family, "_total") ? "_total" : "",
            type);
        return true;
    }
    if (in->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i <= in->bound_count; i++) {
            struct weft__buf le;
            weft__buf_init(&le, 64);
            cumulative += s->bucket_counts[i];
            if (i < in->bound_count) {
                put_double(&le, in->bounds[i]);
            } else {
                weft__buf_append_str(&le, "+Inf");
            }
            weft__buf_printf(b, "%s_bucket", r->family);
            put_labels(b, s->attrs, s->attr_count, le.data != NULL ? le.data : "+Inf");
            weft__buf_printf(b, " %llu\n", (unsigned long long)cumulative);
            weft__buf_cleanup(&le);
        }
        weft__buf_printf(b, "%s_sum", r->family);
        put_labels(b, s->attrs, s->attr_count, NULL);
        weft__buf_append_byte(b, ' ');
        put_double(b, s->sum);
        weft__buf_printf(b, "\n%s_count", r->family);
        put_labels(b, s->attrs, s->attr_count, NULL);
        weft__buf_printf(b, " %llu\n", (unsigned long long)s->count);
        return true;
    }
    weft__buf_printf(
        b, "%s%s", r->family,
        in->kind == WEFT_INSTRUMENT_COUNTER && !ends_with(r->family, "_total") ? "_total" : "");
    put_labels(b, s->attrs, s->attr_count, NULL);
    weft__buf_append_byte(b, ' ');
    put_double(b, s->value);
    weft__buf_append_byte(b, '\n');
    return true;
}

weft_err
weft_prometheus_render(struct weft_meter *meter, char **out, size_t *len)
{
    struct render r;
    const struct weft_attr *res = NULL;
    size_t res_count = 0;
    weft_err err = WEFT_OK;

    if (meter == NULL || out == NULL || len == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *len = 0;
    memset(&r, 0, sizeof(r));
    weft__buf_init(&r.out, 0);
    res = weft_meter_resource(meter, &res_count);
    weft__buf_append_str(&r.out, "# HELP target_info Target metadata\n# TYPE target_info gauge\n"
                                 "target_info");
    put_labels(&r.out, res, res_count, NULL);
    weft__buf_append_str(&r.out, " 1\n");
    err = weft_meter_collect(meter, visit, &r);
    if (err == WEFT_OK && r.out.data == NULL) {
        err = WEFT_ENOMEM;
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&r.out);
        return err;
    }
    /* Hand out a malloc()ed copy: the caller frees it with free(), not weft's allocator. */
    *out = malloc(r.out.len + 1);
    if (*out == NULL) {
        weft__buf_cleanup(&r.out);
        return WEFT_ENOMEM;
    }
    memcpy(*out, r.out.data, r.out.len + 1);
    *len = r.out.len;
    weft__buf_cleanup(&r.out);
    return WEFT_OK;
}
