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

#include <stdint.h>
#include <weft/export.h>

/* Nesting allowed inside one attribute value (arrays and kvlists within one another). */
#define WEFT__OTLP_MAX_VALUE_DEPTH 32

/* Per-span limits applied as spans are added (the OTel SDK's span limits, which a sender may
 * not have applied): the first N are kept, the rest dropped and added to the owner's
 * dropped_*_count, which the store keeps. 0 keeps none; UINT32_MAX (after init) all. */
struct weft__otlp_limits {
    uint32_t attrs;       /* OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT */
    uint32_t events;      /* OTEL_SPAN_EVENT_COUNT_LIMIT */
    uint32_t links;       /* OTEL_SPAN_LINK_COUNT_LIMIT */
    uint32_t event_attrs; /* OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT */
    uint32_t link_attrs;  /* OTEL_LINK_ATTRIBUTE_COUNT_LIMIT */
};

/* The OTel SDK's default for each limit. */
#define WEFT__OTLP_DEFAULT_LIMIT 128

/* The spans of one decoded request. */
struct weft__otlp_batch {
    struct weft__arena arena;
    size_t max_bytes;  /* cap on the arena, the span array and a decoder's work memory */
    size_t json_bytes; /* work memory counted: the protobuf decoder's jansson trees
                          (weft__otlp_batch_json_begin), the JSON decoder's scratch buffers
                          (weft__otlp_batch_charge) */
    bool is_json_over; /* a jansson allocation was refused for the cap */
    struct weft__otlp_limits limits;     /* none after init; ingest sets them */
    uint64_t dropped_by_limits;          /* attributes, events and links the limits dropped */
    uint64_t names_escaped;              /* span and event names whose NUL bytes became U+FFFD */
    const struct weft_span_data **spans; /* accepted spans, in request order */
    size_t count;
    size_t cap;
    uint64_t rejected;      /* spans left out for their ids */
    char reject_reason[96]; /* why the first one was rejected ("" when none) */
};

/* Prepare an empty batch whose decoded form may take at most @p max_bytes. */
void weft__otlp_batch_init(struct weft__otlp_batch *batch, size_t max_bytes);

/* Install jansson's allocation hooks that count a decode's trees against its batch (they call
 * malloc and free, so nothing else changes). Idempotent; call it before other threads use
 * jansson (ingest does at weft__ingest_new); the protobuf decoder calls it too. */
void weft__otlp_decode_global_init(void);

/* Count this thread's jansson allocations against @p batch's max_bytes from now until
 * weft__otlp_batch_json_end(@p batch, the returned mark); an allocation past the cap fails
 * (jansson then fails as out of memory) and sets is_json_over. The count is of bytes
 * allocated (frees are not subtracted), plus a malloc header each. */
size_t weft__otlp_batch_json_begin(struct weft__otlp_batch *batch);
/* Stop counting; the trees built since the mark are freed by now: their bytes are given back. */
void weft__otlp_batch_json_end(struct weft__otlp_batch *batch, size_t mark);

/* Count @p size bytes of a decoder's work memory (given back when the decoder resets
 * json_bytes to what it was) against @p batch's max_bytes. @return false, with *err
 * WEFT_ELIMIT, when that would pass the cap. */
bool weft__otlp_batch_charge(struct weft__otlp_batch *batch, size_t size, weft_err *err);

/* Read the limits from the environment as the OTel SDK does (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT,
 * else OTEL_ATTRIBUTE_COUNT_LIMIT; OTEL_SPAN_EVENT_COUNT_LIMIT; OTEL_SPAN_LINK_COUNT_LIMIT;
 * OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT and OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, else
 * OTEL_ATTRIBUTE_COUNT_LIMIT), WEFT__OTLP_DEFAULT_LIMIT each when unset or not a number. */
void weft__otlp_limits_from_env(struct weft__otlp_limits *out);

/* A NUL-terminated copy of a name of @p len bytes in the batch, each NUL byte in it replaced
 * by U+FFFD (a C string would end at the first: "a\0b" read as "a") and counted in
 * names_escaped. NULL as weft__otlp_batch_alloc(). */
char *
weft__otlp_batch_name(struct weft__otlp_batch *batch, const char *s, size_t len, weft_err *err);

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

/* The same for an OTLP JSON ExportTraceServiceRequest, read in one pass without a JSON tree:
 * lowerCamelCase (or proto) field names, hex ids, enums as integers (or their names), 64-bit
 * integers as strings or numbers. Unknown members are ignored. Errors as
 * weft__otlp_decode_proto() (WEFT_EPARSE also for text that is not JSON as jansson's
 * json_loadb(JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL) reads it, or a member of the wrong JSON
 * type; the first error in the text wins). Its scratch memory counts against max_bytes too. */
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

#endif /* WEFT_EXPORTERS_OTLP_DECODE_H */
