/* exporters/otlp_decode.h - decoders of OTLP ExportTraceServiceRequest bodies (protobuf in
 * otlp_decode.c, OTLP JSON in otlp_decode_json.c) into span views the store exporter can write,
 * for the ingest endpoint of `weft serve` (ingest.c). Internal.
 *
 * Both decoders fill a struct weft__otlp_batch: every decoded span, its resource, scope,
 * attributes, events, links and strings live in the batch's arena, which is capped (the decoded
 * form of a tiny message can be many times its size: an empty span is 2 bytes on the wire and
 * a few hundred in memory). Spans with unusable ids (no trace id, a zero id, a span id that is
 * not 8 bytes, a parent id that is neither empty nor 8 bytes) are rejected and counted, not
 * stored: the request still succeeds with a partial_success.
 *
 * Attribute values: OTLP's AnyValue is richer than struct weft_value. Strings, bools, int64,
 * doubles and homogeneous arrays of those map one to one; a kvlist, a heterogeneous or nested
 * array becomes a string holding its JSON (objects for kvlists, arrays for arrays), and bytes
 * become a base64 string, as the OTel specification maps AnyValue to non-OTLP formats. An
 * attribute with an empty key, a key holding a NUL byte, or no value is dropped and counted in
 * the owner's dropped count.
 *
 * Thread-safety: a batch belongs to one thread; the decoders are reentrant.
 */
#ifndef WEFT_EXPORTERS_OTLP_DECODE_H
#define WEFT_EXPORTERS_OTLP_DECODE_H

#include "base/arena.h"

#include <jansson.h>
#include <stdint.h>
#include <weft/export.h>

/* Nesting allowed inside one attribute value (arrays and kvlists within one another). */
#define WEFT__OTLP_MAX_VALUE_DEPTH 32

/* The spans of one decoded request. */
struct weft__otlp_batch {
    struct weft__arena arena;
    size_t max_bytes;                    /* cap on the arena plus the span array */
    const struct weft_span_data **spans; /* accepted spans, in request order */
    size_t count;
    size_t cap;
    uint64_t rejected;      /* spans left out for their ids */
    char reject_reason[96]; /* why the first one was rejected ("" when none) */
};

/* Prepare an empty batch whose decoded form may take at most @p max_bytes. */
void weft__otlp_batch_init(struct weft__otlp_batch *batch, size_t max_bytes);

/* Free everything a decoder put in @p batch and empty it (it can be reused). */
void weft__otlp_batch_cleanup(struct weft__otlp_batch *batch);

/* Decode a protobuf ExportTraceServiceRequest (@p len bytes at @p data) into @p batch, which
 * must be empty. Unknown fields are skipped.
 * @return WEFT_OK; WEFT_EPARSE (not a valid message: truncated, a bad wire type for a known
 * field, nesting past WEFT__OTLP_MAX_VALUE_DEPTH; @p why, when not NULL, gets a sentence of at
 * most @p why_len bytes); WEFT_ELIMIT (the decoded form would exceed max_bytes); WEFT_ENOMEM.
 * On error the batch holds nothing usable: clean it up.
 * Ownership: borrows @p data for the call; the batch owns what it decodes. */
weft_err weft__otlp_decode_proto(
    const uint8_t *data, size_t len, struct weft__otlp_batch *batch, char *why, size_t why_len);

/* The same for an OTLP JSON ExportTraceServiceRequest: lowerCamelCase (or proto) field names,
 * hex ids, enums as integers (or their names), 64-bit integers as strings or numbers. Unknown
 * members are ignored. Errors as weft__otlp_decode_proto() (WEFT_EPARSE also for text that is
 * not JSON, or a member of the wrong JSON type). */
weft_err weft__otlp_decode_json(
    const char *data, size_t len, struct weft__otlp_batch *batch, char *why, size_t why_len);

/* --- shared by the two decoders (otlp_decode.c) ------------------------------------------ */

/* Allocate @p size zeroed bytes from the batch's arena within its cap; NULL when the cap is
 * reached (*err WEFT_ELIMIT) or memory is out (*err WEFT_ENOMEM). */
void *weft__otlp_batch_alloc(struct weft__otlp_batch *batch, size_t size, weft_err *err);

/* A NUL-terminated copy of @p len bytes in the batch; NULL as weft__otlp_batch_alloc(). */
char *
weft__otlp_batch_str(struct weft__otlp_batch *batch, const char *s, size_t len, weft_err *err);

/* Check @p span's ids and append it to the accepted spans, or count it as rejected.
 * @return WEFT_OK (either way), WEFT_ELIMIT or WEFT_ENOMEM. Ownership: the batch keeps the
 * pointer; @p span must live in its arena. */
weft_err weft__otlp_batch_add(struct weft__otlp_batch *batch,
                              struct weft_span_data *span,
                              bool has_trace_id,
                              bool has_span_id,
                              bool is_parent_ok);

/* Are @p link's ids usable: both present (@p has_trace_id, @p has_span_id: the right sizes)
 * and not all zero? A link that is not is dropped and counted in its span's dropped links, by
 * both decoders alike. */
bool weft__otlp_link_ids_ok(const struct weft_link_data *link, bool has_trace_id, bool has_span_id);

/* Store @p j (consumed) as a JSON string value in @p out, text in the batch. */
weft_err
weft__otlp_batch_json_value(struct weft__otlp_batch *batch, json_t *j, struct weft_value *out);

/* The base64 (RFC 4648, padded) text of @p len bytes as a jansson string; NULL on ENOMEM. */
json_t *weft__otlp_base64_json(const uint8_t *data, size_t len);

/* A jansson string for possibly invalid UTF-8 (replaced by U+FFFD); NULL on ENOMEM. */
json_t *weft__otlp_text_json(const char *s, size_t len);

#endif /* WEFT_EXPORTERS_OTLP_DECODE_H */
