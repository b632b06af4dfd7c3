/* exporters/otlp_encode.h - encode span batches as an OTLP ExportTraceServiceRequest, in
 * protobuf (opentelemetry-proto trace/v1, collector/trace/v1) or in OTLP JSON.
 *
 * Spans are grouped by resource, then by scope (pointer identity, first-seen order); an
 * empty batch encodes as an empty request (no envelopes). The output is appended to @p out.
 * Errors: WEFT_EINVAL (NULL arguments), WEFT_ELIMIT (the buffer's cap was reached; @p out is
 * restored to its previous length), WEFT_ENOMEM.
 */
#ifndef WEFT_EXPORTERS_OTLP_ENCODE_H
#define WEFT_EXPORTERS_OTLP_ENCODE_H

#include "base/buf.h"
#include <weft/export.h>
#include <weft/metrics.h>
#include <weft/weft.h>

#include <string.h>

weft_err weft__otlp_encode_proto(const struct weft_span_data *const *spans,
                                 size_t count,
                                 struct weft__buf *out);

weft_err weft__otlp_encode_json(const struct weft_span_data *const *spans,
                                size_t count,
                                struct weft__buf *out);

/* Encode what @p meter holds now (weft_meter_collect(): gauge callbacks run first) as one
 * OTLP ExportMetricsServiceRequest with cumulative temporality: one ResourceMetrics with the
 * meter's resource, one ScopeMetrics (scope "weft", weft's version); counters become
 * monotonic Sums, up-down counters non-monotonic Sums, gauges Gauges, histograms Histograms
 * with their exemplars. Instruments without series are left out. *points receives the number
 * of data points written (0: nothing worth sending). Appended to @p out; errors as above. */
#define WEFT__METRICS_SCOPE "weft"

/* The envelope both metrics encoders write: the meter's resource, and scope "weft" at weft's
 * version. */
static inline void
weft__otlp_metrics_envelope(struct weft_meter *meter,
                            struct weft_resource *res,
                            struct weft_scope *scope)
{
    memset(res, 0, sizeof(*res));
    memset(scope, 0, sizeof(*scope));
    res->attrs = weft_meter_resource(meter, &res->attr_count);
    scope->name = WEFT__METRICS_SCOPE;
    scope->version = WEFT_VERSION;
}

weft_err
weft__otlp_metrics_encode_proto(struct weft_meter *meter, struct weft__buf *out, size_t *points);

weft_err
weft__otlp_metrics_encode_json(struct weft_meter *meter, struct weft__buf *out, size_t *points);

/* Parse an ExportTraceServiceResponse body (protobuf or JSON per @p is_json) for
 * partial_success. Sets *rejected (0 when absent) and copies error_message into @p message
 * (may be NULL) truncated to @p message_len. An empty body is a full success.
 * @return WEFT_OK, WEFT_EPARSE, or WEFT_EINVAL (NULL body with a non-zero length). */
weft_err weft__otlp_parse_response(const char *body,
                                   size_t len,
                                   bool is_json,
                                   uint64_t *rejected,
                                   char *message,
                                   size_t message_len);

#endif /* WEFT_EXPORTERS_OTLP_ENCODE_H */
