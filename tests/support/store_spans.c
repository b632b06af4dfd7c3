/* tests/support/store_spans.c - see store_spans.h. */
#include "store_spans.h"

#include "tracing/exporter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/trace.h>

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 9, {.str = "svc-store"}}},
};
const struct weft_resource store_spans_resource = {resource_attrs, 1, 0, NULL};
static const struct weft_scope scope = {"weft.test", "1.2.3", NULL, NULL, 0};

void
store_spans_hex(const char *hex, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned v = 0;

        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

struct weft_span_data
store_spans_make(const char *trace_hex,
                 const char *span_hex,
                 const char *parent_hex,
                 const char *name,
                 uint64_t start_ms,
                 uint64_t dur_ms)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    store_spans_hex(trace_hex, s.trace_id, WEFT_TRACE_ID_SIZE);
    store_spans_hex(span_hex, s.span_id, WEFT_SPAN_ID_SIZE);
    if (parent_hex != NULL) {
        store_spans_hex(parent_hex, s.parent_span_id, WEFT_SPAN_ID_SIZE);
        s.has_parent = true;
    }
    s.trace_flags = 1;
    s.name = name;
    s.kind = WEFT_SPAN_KIND_INTERNAL;
    s.start_time_ns = STORE_SPANS_T0 + start_ms * STORE_SPANS_MS;
    s.end_time_ns = s.start_time_ns + dur_ms * STORE_SPANS_MS;
    s.resource = &store_spans_resource;
    s.scope = &scope;
    return s;
}

weft_err
store_spans_export(struct weft_exporter *ex, const struct weft_span_data *spans, size_t n)
{
    const struct weft_span_data **ptrs = calloc(n > 0 ? n : 1, sizeof(*ptrs));
    struct weft_export_result result = {0};
    weft_err err = WEFT_ENOMEM;

    if (ptrs != NULL && n <= 4096) {
        for (size_t i = 0; i < n; i++) {
            ptrs[i] = &spans[i];
        }
        err = ex->ops->export_batch(ex->self, ptrs, n, weft_monotonic_ns() + 5000 * STORE_SPANS_MS,
                                    &result);
    }
    free(ptrs);
    return err;
}
