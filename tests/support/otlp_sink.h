/* tests/support/otlp_sink.h - a tracer provider whose only exporter sends OTLP/HTTP protobuf to
 * a real HTTP receiver on 127.0.0.1, and the decoded spans it received, flattened.
 *
 * Runtime tests drive whole workflows through it and assert on what a collector would see:
 * names, parent links, attributes, events, links and status, decoded by the independent
 * decoder in otlp_decode.c. */
#ifndef WEFT_TESTS_SUPPORT_OTLP_SINK_H
#define WEFT_TESTS_SUPPORT_OTLP_SINK_H

#include <jansson.h>
#include <stdbool.h>
#include <weft/weft.h>

struct otlp_sink;

/* Start a receiver and a provider exporting to it (batch processor, protobuf, gzip). */
struct otlp_sink *otlp_sink_new(void);
struct weft_provider *otlp_sink_provider(struct otlp_sink *sink);
/* Flush the provider and decode everything received so far into the span list. */
void otlp_sink_collect(struct otlp_sink *sink);
/* Every received body, concatenated (to search for secrets). */
const char *otlp_sink_raw(struct otlp_sink *sink, size_t *len);
void otlp_sink_free(struct otlp_sink *sink);

/* Spans received (OTLP JSON shape, plus "attrs": {key: value} flattened, values as JSON
 * strings/numbers/bools), in arrival order. Borrowed until otlp_sink_free(). */
size_t otlp_sink_count(struct otlp_sink *sink);
json_t *otlp_sink_span(struct otlp_sink *sink, size_t i);
/* The i-th span (in start order) whose name is @p name, or NULL. */
json_t *otlp_sink_find(struct otlp_sink *sink, const char *name, size_t nth);
/* How many spans are named @p name. */
size_t otlp_sink_count_named(struct otlp_sink *sink, const char *name);
/* The parent span of @p span, or NULL for a root. */
json_t *otlp_sink_parent(struct otlp_sink *sink, const json_t *span);
/* Attribute of a span as a string ("" when missing; numbers formatted). */
const char *otlp_span_attr(const json_t *span, const char *key);
/* Names of the spans (start order) whose name starts with @p prefix, joined by ","; the
 * caller frees the result with free(). */
char *otlp_sink_names(struct otlp_sink *sink, const char *prefix);
/* Values of attribute @p key on spans named with @p prefix (start order), joined by ",". */
char *otlp_sink_attr_list(struct otlp_sink *sink, const char *prefix, const char *key);

#endif
