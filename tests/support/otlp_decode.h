/* tests/support/otlp_decode.h - an OTLP protobuf decoder for tests, written independently of
 * exporters/otlp_proto.c (it shares no code with it) so that it can check what the encoder
 * and the OTLP exporter send.
 *
 * weft_test_otlp_decode_request() turns an ExportTraceServiceRequest into a jansson tree in
 * exactly the shape weft's OTLP JSON encoder writes: lowerCamelCase keys, ids as lowercase
 * hex, enums and uint32 counts as numbers, 64-bit integers as decimal strings, doubles as
 * numbers (NaN and the infinities as "NaN", "Infinity", "-Infinity"), bytesValue as base64.
 * So json_equal(decode(proto bytes), json_loads(json text)) holds when both encoders agree.
 *
 * The wire checks are strict: a bad wire type, a truncated varint, fixed field or length, a
 * varint over 64 bits, field number 0, an id that is not 16 (trace) or 8 (span) bytes, a
 * string that is not UTF-8, a bool other than 0 or 1, a uint32 or enum out of range, a
 * singular field written twice, two members of the AnyValue oneof, or nesting deeper than 32
 * are all errors, reported with the byte offset (from the start of @p data) where the bad
 * item starts. Unknown fields with a valid wire type are skipped.
 *
 * Thread-safety: all functions are reentrant.
 */
#ifndef WEFT_TESTS_SUPPORT_OTLP_DECODE_H
#define WEFT_TESTS_SUPPORT_OTLP_DECODE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Also reject what weft's encoders never write: proto3 default values outside the AnyValue
 * oneof (0, "", an empty singular message such as "resource": {}) and varints with
 * redundant continuation bytes. */
#define WEFT_TEST_OTLP_CANONICAL 0x1u

struct weft_test_otlp_error {
    size_t offset;  /**< byte offset of the offending tag or value */
    char text[256]; /**< e.g. "Span.kind (field 6): wire type 2, expected 0 at offset 37" */
};

/** Decode an ExportTraceServiceRequest (@p len bytes; 0 bytes is the empty request {}).
 * @param flags 0 or WEFT_TEST_OTLP_CANONICAL.
 * @param err filled on failure; may be NULL.
 * @return a new JSON object (release with json_decref()), or NULL on a wire error. */
json_t *weft_test_otlp_decode_request(const void *data,
                                      size_t len,
                                      unsigned flags,
                                      struct weft_test_otlp_error *err);

/** The same for an ExportMetricsServiceRequest (metrics/v1): Sum, Gauge and Histogram data
 * points with exemplars, packed bucket counts and bounds. */
json_t *weft_test_otlp_decode_metrics_request(const void *data,
                                              size_t len,
                                              unsigned flags,
                                              struct weft_test_otlp_error *err);

/** Append an ExportTraceServiceResponse carrying partial_success {rejected_spans = @p
 * rejected, error_message = @p message} to @p out, as an OTLP receiver answers. With
 * @p rejected 0 and @p message NULL or empty nothing is appended (the full-success body).
 * @return WEFT_OK, WEFT_EINVAL (@p out NULL), WEFT_ELIMIT, WEFT_ENOMEM. */
weft_err
weft_test_otlp_response_proto(int64_t rejected, const char *message, struct weft__buf *out);

#endif
