/* tests/support/otlp_sink.c - see otlp_sink.h. */
#include "otlp_sink.h"

#include "http_receiver.h"
#include "otlp_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct otlp_sink {
    struct http_receiver *rx;
    struct weft_provider *provider;
    size_t decoded; /* requests decoded so far */
    json_t *spans;  /* array, sorted by start time */
    char *raw;
    size_t raw_len;
};

struct otlp_sink *
otlp_sink_new(void)
{
    struct otlp_sink *s = calloc(1, sizeof(*s));
    struct weft_otlp_options o;
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;
    struct weft_provider_options po = {.service_name = "weft-test"};
    char url[128];

    if (s == NULL || http_receiver_start(&s->rx) != 0) {
        abort();
    }
    memset(&o, 0, sizeof(o));
    o.traces_endpoint = http_receiver_url(s->rx, "/v1/traces", url, sizeof(url));
    o.protocol_set = true;
    o.protocol = WEFT_OTLP_HTTP_PROTOBUF;
    o.compression = 2;
    if (weft_provider_new(&po, &s->provider) != WEFT_OK ||
        weft_otlp_exporter_new(&o, &ex) != WEFT_OK ||
        weft_batch_processor_new(ex, NULL, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(s->provider, proc) != WEFT_OK) {
        abort();
    }
    s->spans = json_array();
    return s;
}

struct weft_provider *
otlp_sink_provider(struct otlp_sink *sink)
{
    return sink->provider;
}

static json_t *
flatten_value(const json_t *v)
{
    const char *key = NULL;
    json_t *inner = NULL;

    json_object_foreach((json_t *)v, key, inner)
    {
        if (strcmp(key, "intValue") == 0) {
            return json_integer(strtoll(json_string_value(inner), NULL, 10));
        }
        return json_deep_copy(inner);
    }
    return json_null();
}

static int
by_start(const void *a, const void *b)
{
    const char *sa = json_string_value(json_object_get(*(json_t *const *)a, "startTimeUnixNano"));
    const char *sb = json_string_value(json_object_get(*(json_t *const *)b, "startTimeUnixNano"));
    unsigned long long x = strtoull(sa, NULL, 10);
    unsigned long long y = strtoull(sb, NULL, 10);
    return x < y ? -1 : x > y ? 1 : 0;
}

void
otlp_sink_collect(struct otlp_sink *sink)
{
    size_t n = 0;
    json_t **all = NULL;

    weft_provider_force_flush(sink->provider, 10000);
    n = http_receiver_count(sink->rx);
    for (; sink->decoded < n; sink->decoded++) {
        const struct http_request *req = http_receiver_request(sink->rx, sink->decoded);
        struct weft_test_otlp_error err;
        json_t *doc = weft_test_otlp_decode_request(req->body, req->body_len, 0, &err);
        json_t *rs = NULL;
        size_t i = 0;

        if (doc == NULL) {
            fprintf(stderr, "otlp_sink: undecodable request: %s\n", err.text);
            abort();
        }
        sink->raw = realloc(sink->raw, sink->raw_len + req->body_len + 1);
        memcpy(sink->raw + sink->raw_len, req->body, req->body_len);
        sink->raw_len += req->body_len;
        sink->raw[sink->raw_len] = '\0';
        json_array_foreach(json_object_get(doc, "resourceSpans"), i, rs)
        {
            size_t j = 0;
            json_t *ss = NULL;
            json_array_foreach(json_object_get(rs, "scopeSpans"), j, ss)
            {
                size_t k = 0;
                json_t *span = NULL;
                json_array_foreach(json_object_get(ss, "spans"), k, span)
                {
                    json_t *attrs = json_object();
                    size_t a = 0;
                    json_t *kv = NULL;
                    json_array_foreach(json_object_get(span, "attributes"), a, kv)
                    {
                        json_object_set_new(attrs, json_string_value(json_object_get(kv, "key")),
                                            flatten_value(json_object_get(kv, "value")));
                    }
                    json_object_set_new(span, "attrs", attrs);
                    json_array_append(sink->spans, span);
                }
            }
        }
        json_decref(doc);
    }
    /* Sort by start time so tests read spans in the order the run made them. */
    n = json_array_size(sink->spans);
    all = calloc(n + 1, sizeof(*all));
    for (size_t i = 0; i < n; i++) {
        all[i] = json_incref(json_array_get(sink->spans, i));
    }
    qsort(all, n, sizeof(*all), by_start);
    json_array_clear(sink->spans);
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(sink->spans, all[i]);
    }
    free(all);
}

const char *
otlp_sink_raw(struct otlp_sink *sink, size_t *len)
{
    *len = sink->raw_len;
    return sink->raw != NULL ? sink->raw : "";
}

void
otlp_sink_free(struct otlp_sink *sink)
{
    if (sink == NULL) {
        return;
    }
    weft_provider_shutdown(sink->provider, 10000);
    weft_provider_free(sink->provider);
    http_receiver_stop(sink->rx);
    json_decref(sink->spans);
    free(sink->raw);
    free(sink);
}

size_t
otlp_sink_count(struct otlp_sink *sink)
{
    return json_array_size(sink->spans);
}

json_t *
otlp_sink_span(struct otlp_sink *sink, size_t i)
{
    return json_array_get(sink->spans, i);
}

json_t *
otlp_sink_find(struct otlp_sink *sink, const char *name, size_t nth)
{
    size_t i = 0;
    json_t *span = NULL;

    json_array_foreach(sink->spans, i, span)
    {
        if (strcmp(json_string_value(json_object_get(span, "name")), name) == 0 && nth-- == 0) {
            return span;
        }
    }
    return NULL;
}

size_t
otlp_sink_count_named(struct otlp_sink *sink, const char *name)
{
    size_t n = 0;
    size_t i = 0;
    json_t *span = NULL;

    json_array_foreach(sink->spans, i, span)
    {
        n += strcmp(json_string_value(json_object_get(span, "name")), name) == 0;
    }
    return n;
}

json_t *
otlp_sink_parent(struct otlp_sink *sink, const json_t *span)
{
    const char *parent = json_string_value(json_object_get(span, "parentSpanId"));
    size_t i = 0;
    json_t *s = NULL;

    if (parent == NULL || parent[0] == '\0') {
        return NULL;
    }
    json_array_foreach(sink->spans, i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "spanId")), parent) == 0) {
            return s;
        }
    }
    return NULL;
}

const char *
otlp_span_attr(const json_t *span, const char *key)
{
    static __thread char buf[64];
    const json_t *v = json_object_get(json_object_get(span, "attrs"), key);

    if (json_is_string(v)) {
        return json_string_value(v);
    }
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_boolean(v)) {
        return json_is_true(v) ? "true" : "false";
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%g", json_real_value(v));
        return buf;
    }
    return "";
}

static char *
join(struct otlp_sink *sink, const char *prefix, const char *key)
{
    size_t cap = 256;
    size_t len = 0;
    char *out = calloc(1, cap);
    size_t i = 0;
    json_t *span = NULL;

    json_array_foreach(sink->spans, i, span)
    {
        const char *name = json_string_value(json_object_get(span, "name"));
        const char *v = NULL;
        size_t vl = 0;
        if (strncmp(name, prefix, strlen(prefix)) != 0) {
            continue;
        }
        v = key != NULL ? otlp_span_attr(span, key) : name;
        vl = strlen(v);
        while (len + vl + 2 > cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        if (len > 0) {
            out[len++] = ',';
        }
        memcpy(out + len, v, vl);
        len += vl;
        out[len] = '\0';
    }
    return out;
}

char *
otlp_sink_names(struct otlp_sink *sink, const char *prefix)
{
    return join(sink, prefix, NULL);
}

char *
otlp_sink_attr_list(struct otlp_sink *sink, const char *prefix, const char *key)
{
    return join(sink, prefix, key);
}
