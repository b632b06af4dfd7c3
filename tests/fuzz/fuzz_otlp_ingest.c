/* tests/fuzz/fuzz_otlp_ingest.c - the OTLP trace decoders of `weft serve`'s ingest
 * (exporters/otlp_decode.c, otlp_decode_json.c).
 *
 * Input: byte 0 even: the rest is a protobuf ExportTraceServiceRequest; odd: OTLP JSON.
 * Properties: a decoded batch holds only spans with non-zero ids and non-NULL names, keys and
 * strings; the decoded form stays within its cap; and what was accepted survives a round trip
 * through weft's own protobuf encoder and decoder (same count, nothing rejected).
 */
#include "fuzz_util.h"

#include "base/buf.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"

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

static void
round_trip(const struct weft__otlp_batch *batch)
{
    struct weft__buf body;
    struct weft__otlp_batch again;

    weft__buf_init(&body, 0);
    if (weft__otlp_encode_proto(batch->spans, batch->count, &body) != WEFT_OK) {
        weft__buf_cleanup(&body);
        return; /* out of memory only */
    }
    weft__otlp_batch_init(&again, (size_t)64 << 20);
    FUZZ_CHECK(weft__otlp_decode_proto((const uint8_t *)body.data, body.len, &again, NULL, 0) ==
               WEFT_OK);
    FUZZ_CHECK(again.count == batch->count && again.rejected == 0);
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
