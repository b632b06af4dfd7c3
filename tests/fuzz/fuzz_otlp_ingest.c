/* tests/fuzz/fuzz_otlp_ingest.c - the OTLP trace decoders of `weft serve`'s ingest
 * (exporters/otlp_decode.c, otlp_decode_json.c).
 *
 * Input: byte 0 even: the rest is a protobuf ExportTraceServiceRequest; odd: OTLP JSON.
 * Properties: a decoded batch holds only spans with non-zero ids and non-NULL names, keys and
 * strings; the decoded form stays within its cap; and what was accepted survives a round trip
 * through weft's own protobuf encoder and decoder unchanged: the same spans, each with the same
 * ids, parent, name, kind, times, status, trace state, attributes, events, links, dropped
 * counts, resource and scope (a span count alone let a decoder or the encoder lose or garble
 * any of these unseen). The encoder groups spans by resource and scope, so spans are matched as
 * a multiset, not by position.
 */
#include "fuzz_util.h"

#include "base/buf.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <weft/weft.h>

#define CAP ((size_t)8 << 20)

static void
check_span(const struct weft_span_data *s)
{
    static const uint8_t zero[WEFT_TRACE_ID_SIZE] = {0};

    FUZZ_CHECK(memcmp(s->trace_id, zero, WEFT_TRACE_ID_SIZE) != 0);
    FUZZ_CHECK(memcmp(s->span_id, zero, WEFT_SPAN_ID_SIZE) != 0);
    FUZZ_CHECK(s->name != NULL);
    FUZZ_CHECK(s->resource != NULL && s->scope != NULL);
    FUZZ_CHECK(s->kind <= WEFT_SPAN_KIND_CONSUMER && s->status_code <= WEFT_STATUS_ERROR);
    for (size_t i = 0; i < s->attr_count; i++) {
        FUZZ_CHECK(s->attrs[i].key != NULL && s->attrs[i].key[0] != '\0');
        if (s->attrs[i].value.type == WEFT_VALUE_STRING) {
            FUZZ_CHECK(s->attrs[i].value.u.str != NULL);
        }
    }
    for (size_t i = 0; i < s->event_count; i++) {
        FUZZ_CHECK(s->events[i].name != NULL);
    }
}

/* Optional strings: absent and empty encode alike (an empty protobuf string is not sent). */
static bool
same_opt_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static bool
same_bytes(const void *a, const void *b, size_t len)
{
    return len == 0 || memcmp(a, b, len) == 0;
}

static bool
same_value(const struct weft_value *a, const struct weft_value *b)
{
    if (a->type != b->type) {
        return false;
    }
    switch (a->type) {
    case WEFT_VALUE_STRING:
        return a->len == b->len && same_bytes(a->u.str, b->u.str, a->len);
    case WEFT_VALUE_BOOL:
        return a->u.b == b->u.b;
    case WEFT_VALUE_INT:
        return a->u.i == b->u.i;
    case WEFT_VALUE_DOUBLE:
        return memcmp(&a->u.d, &b->u.d, sizeof(double)) == 0; /* NaN and -0.0 too */
    case WEFT_VALUE_STRING_ARRAY:
        if (a->len != b->len) {
            return false;
        }
        for (size_t i = 0; i < a->len; i++) {
            if (!same_opt_str(a->u.strs[i], b->u.strs[i])) {
                return false;
            }
        }
        return true;
    case WEFT_VALUE_BOOL_ARRAY:
        if (a->len != b->len) {
            return false;
        }
        for (size_t i = 0; i < a->len; i++) {
            if (a->u.bools[i] != b->u.bools[i]) {
                return false;
            }
        }
        return true;
    case WEFT_VALUE_INT_ARRAY:
        return a->len == b->len && same_bytes(a->u.ints, b->u.ints, a->len * sizeof(int64_t));
    case WEFT_VALUE_DOUBLE_ARRAY:
        return a->len == b->len && same_bytes(a->u.doubles, b->u.doubles, a->len * sizeof(double));
    }
    return false;
}

static bool
same_attrs(const struct weft_attr *a, size_t na, const struct weft_attr *b, size_t nb)
{
    if (na != nb) {
        return false;
    }
    for (size_t i = 0; i < na; i++) {
        if (strcmp(a[i].key, b[i].key) != 0 || !same_value(&a[i].value, &b[i].value)) {
            return false;
        }
    }
    return true;
}

/* The first field found to differ, said when a span finds no match. */
static const char *mismatch = "";

#define SAME(cond, field)     \
    do {                      \
        if (!(cond)) {        \
            mismatch = field; \
            return false;     \
        }                     \
    } while (0)

static bool
same_span(const struct weft_span_data *a, const struct weft_span_data *b)
{
    SAME(memcmp(a->trace_id, b->trace_id, WEFT_TRACE_ID_SIZE) == 0, "trace_id");
    SAME(memcmp(a->span_id, b->span_id, WEFT_SPAN_ID_SIZE) == 0, "span_id");
    SAME(a->has_parent == b->has_parent &&
             memcmp(a->parent_span_id, b->parent_span_id, WEFT_SPAN_ID_SIZE) == 0,
         "parent");
    SAME(a->parent_is_remote == b->parent_is_remote, "parent_is_remote");
    SAME(a->trace_flags == b->trace_flags, "trace_flags");
    SAME(same_opt_str(a->trace_state, b->trace_state), "trace_state");
    SAME(strcmp(a->name, b->name) == 0, "name");
    SAME(a->kind == b->kind, "kind");
    SAME(a->start_time_ns == b->start_time_ns && a->end_time_ns == b->end_time_ns, "times");
    SAME(a->status_code == b->status_code && same_opt_str(a->status_message, b->status_message),
         "status");
    SAME(same_attrs(a->attrs, a->attr_count, b->attrs, b->attr_count), "attributes");
    SAME(a->dropped_attrs == b->dropped_attrs && a->dropped_events == b->dropped_events &&
             a->dropped_links == b->dropped_links,
         "dropped counts");
    SAME(a->event_count == b->event_count && a->link_count == b->link_count, "event/link count");
    for (size_t i = 0; i < a->event_count; i++) {
        const struct weft_event_data *x = &a->events[i];
        const struct weft_event_data *y = &b->events[i];
        SAME(x->time_ns == y->time_ns && strcmp(x->name, y->name) == 0 &&
                 same_attrs(x->attrs, x->attr_count, y->attrs, y->attr_count) &&
                 x->dropped_attrs == y->dropped_attrs,
             "event");
    }
    for (size_t i = 0; i < a->link_count; i++) {
        const struct weft_link_data *x = &a->links[i];
        const struct weft_link_data *y = &b->links[i];
        SAME(memcmp(x->trace_id, y->trace_id, WEFT_TRACE_ID_SIZE) == 0 &&
                 memcmp(x->span_id, y->span_id, WEFT_SPAN_ID_SIZE) == 0 &&
                 same_opt_str(x->trace_state, y->trace_state) && x->trace_flags == y->trace_flags &&
                 x->is_remote == y->is_remote &&
                 same_attrs(x->attrs, x->attr_count, y->attrs, y->attr_count) &&
                 x->dropped_attrs == y->dropped_attrs,
             "link");
    }
    SAME(same_attrs(a->resource->attrs, a->resource->attr_count, b->resource->attrs,
                    b->resource->attr_count) &&
             a->resource->dropped_attrs == b->resource->dropped_attrs &&
             same_opt_str(a->resource->schema_url, b->resource->schema_url),
         "resource");
    SAME(same_opt_str(a->scope->name, b->scope->name) &&
             same_opt_str(a->scope->version, b->scope->version) &&
             same_opt_str(a->scope->schema_url, b->scope->schema_url) &&
             same_attrs(a->scope->attrs, a->scope->attr_count, b->scope->attrs,
                        b->scope->attr_count),
         "scope");
    return true;
}

static void
round_trip(const struct weft__otlp_batch *batch)
{
    struct weft__buf body;
    struct weft__otlp_batch again;
    bool *used = NULL;

    weft__buf_init(&body, 0);
    if (weft__otlp_encode_proto(batch->spans, batch->count, &body) != WEFT_OK) {
        weft__buf_cleanup(&body);
        return; /* out of memory only */
    }
    weft__otlp_batch_init(&again, (size_t)64 << 20);
    FUZZ_CHECK(weft__otlp_decode_proto((const uint8_t *)body.data, body.len, &again, NULL, 0) ==
               WEFT_OK);
    FUZZ_CHECK(again.count == batch->count && again.rejected == 0);
    /* Every span came back as it was: each original matches a distinct decoded span. */
    used = calloc(again.count + 1, sizeof(*used));
    FUZZ_CHECK(used != NULL);
    for (size_t i = 0; i < batch->count; i++) {
        bool is_found = false;
        for (size_t j = 0; j < again.count && !is_found; j++) {
            if (!used[j] && same_span(batch->spans[i], again.spans[j])) {
                used[j] = true;
                is_found = true;
            }
        }
        if (!is_found) {
            fprintf(stderr, "span %zu (%s) came back changed: %s differs\n", i,
                    batch->spans[i]->name, mismatch);
        }
        FUZZ_CHECK(is_found);
    }
    free(used);
    weft__otlp_batch_cleanup(&again);
    weft__buf_cleanup(&body);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct weft__otlp_batch batch;
    char why[160];
    weft_err err = WEFT_OK;

    if (size == 0) {
        return 0;
    }
    weft__otlp_batch_init(&batch, CAP);
    if (data[0] % 2 == 0) {
        err = weft__otlp_decode_proto(data + 1, size - 1, &batch, why, sizeof(why));
    } else {
        err = weft__otlp_decode_json((const char *)data + 1, size - 1, &batch, why, sizeof(why));
    }
    FUZZ_CHECK(err == WEFT_OK || err == WEFT_EPARSE || err == WEFT_ELIMIT);
    FUZZ_CHECK(batch.arena.bytes <= CAP + 65536);
    if (err == WEFT_EPARSE) {
        FUZZ_CHECK(why[0] != '\0');
    }
    if (err == WEFT_OK) {
        for (size_t i = 0; i < batch.count; i++) {
            check_span(batch.spans[i]);
        }
        round_trip(&batch);
    }
    weft__otlp_batch_cleanup(&batch);
    return 0;
}
