/* tests/support/langfuse_server.h - a Langfuse-compatible HTTP server on 127.0.0.1 for tests.
 *
 * It serves the part of Langfuse's public API weft uses (REFERENCE.md, "Langfuse"), with
 * Langfuse's rules enforced so that a test passing against it means Langfuse would accept the
 * same traffic:
 * - every endpoint: HTTP Basic auth with the configured key pair, else 401 (JSON);
 * - POST /api/public/otel/v1/traces: x-langfuse-ingestion-version: 4 (else 400; counted),
 *   Content-Type application/x-protobuf or application/json (else 415), gzip accepted; the
 *   OTLP ExportTraceServiceRequest is decoded (tests/support/otlp_decode.c for protobuf) and
 *   the whole request is refused (400) when any span has a trace id that is not 16 bytes or is
 *   all zero, or a span id that is not 8 bytes or is all zero (JSON ids: lowercase hex);
 *   accepted spans are kept, decoded, and the answer is 200 {} (application/json);
 * - POST /api/public/scores: Langfuse's score validation (name; exactly one of traceId,
 *   sessionId, datasetRunId; observationId only with traceId; dataType NUMERIC, CATEGORICAL or
 *   BOOLEAN with a matching value; optional id, comment, environment, configId, metadata,
 *   queueId; nothing else); 400 with a message, or 200 {"id": ...}; a score whose id is
 *   already stored replaces it (Langfuse upserts by id);
 * - GET /api/public/v2/prompts/{name}?label=L | ?version=N (default label "production",
 *   "latest" is the highest version): the registered prompt as Langfuse returns it, or 404.
 * Scripted trouble: the next N trace requests answer a status (429 with Retry-After, 503, ...)
 * or drop the connection; the whole server drops connections for a while ("down"); trace
 * answers are delayed.
 *
 * Everything is bounded (spans, scores, prompts); everything is freed by
 * langfuse_server_stop(). Thread-safe: the server runs on its own thread; every function may
 * be called from any thread.
 */
#ifndef WEFT_TESTS_SUPPORT_LANGFUSE_SERVER_H
#define WEFT_TESTS_SUPPORT_LANGFUSE_SERVER_H

#include "http_receiver.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct langfuse_server;

/* What the server saw. Each request is counted under exactly one of the outcomes of its
 * endpoint (or under unauthorized, dropped or not_found). */
struct langfuse_server_stats {
    size_t unauthorized;      /* 401 answers, any endpoint */
    size_t dropped;           /* connections dropped: down, or a scripted drop */
    size_t not_found;         /* unknown paths (404) */
    size_t trace_requests;    /* authorised requests to the traces endpoint */
    size_t trace_accepted;    /* 200 */
    size_t trace_rejected;    /* 400: bad body, bad id, missing ingestion version */
    size_t trace_unsupported; /* 415: wrong Content-Type */
    size_t trace_scripted;    /* answered with a scripted failure status */
    size_t missing_ingestion_version;
    size_t spans_stored;
    size_t spans_overflow; /* accepted beyond the storage cap, not kept */
    size_t score_requests;
    size_t scores_accepted;
    size_t scores_replaced; /* accepted with the id of a stored score */
    size_t scores_rejected;
    size_t prompt_requests;
    size_t prompts_not_found;
};

/* Start on an ephemeral port of 127.0.0.1 with the project key pair (copied).
 * @return 0, or -1 when the socket or thread cannot be set up. */
int
langfuse_server_start(const char *public_key, const char *secret_key, struct langfuse_server **out);
/* Stop the thread and free everything. NULL is a no-op. */
void langfuse_server_stop(struct langfuse_server *s);
/* "http://127.0.0.1:<port>" (LANGFUSE_HOST) into buf. */
const char *langfuse_server_host(const struct langfuse_server *s, char *buf, size_t len);
/* The underlying receiver: every raw request (headers, gunzipped body, status answered).
 * Borrowed; valid until langfuse_server_stop(). */
struct http_receiver *langfuse_server_receiver(struct langfuse_server *s);

/* The next @p count authorised trace requests answer @p status (with "Retry-After:
 * <retry_after_s>" when it is not 0), or drop the connection when @p status is 0. */
void langfuse_server_fail_traces(struct langfuse_server *s,
                                 unsigned count,
                                 int status,
                                 unsigned retry_after_s);
/* Drop every connection (any endpoint) for the next @p ms milliseconds. */
void langfuse_server_go_down(struct langfuse_server *s, unsigned ms);
/* Answer each trace request @p ms milliseconds late (0: at once). */
void langfuse_server_set_delay(struct langfuse_server *s, unsigned ms);

/* Register a prompt. @p labels is a comma-separated list ("production,staging") or NULL.
 * @p type is "text" (then @p prompt is the text) or "chat" (then @p prompt is a JSON array of
 * {"role", "content"} messages). @p config is a JSON object text or NULL ({}).
 * @return 0, or -1 on a bad argument or when full. */
int langfuse_server_add_prompt(struct langfuse_server *s,
                               const char *name,
                               int version,
                               const char *labels,
                               const char *type,
                               const char *prompt,
                               const char *config);

void langfuse_server_get_stats(struct langfuse_server *s, struct langfuse_server_stats *out);
size_t langfuse_server_span_count(struct langfuse_server *s);
size_t langfuse_server_score_count(struct langfuse_server *s);
/* Wait until at least @p n spans (scores) are stored; false on timeout. */
bool langfuse_server_wait_spans(struct langfuse_server *s, size_t n, unsigned timeout_ms);
bool langfuse_server_wait_scores(struct langfuse_server *s, size_t n, unsigned timeout_ms);
/* The stored spans, in arrival order, each an OTLP JSON span object (traceId, spanId,
 * parentSpanId, name, attributes, events, links, status, ...). New reference (a deep copy). */
json_t *langfuse_server_spans(struct langfuse_server *s);
/* The stored scores (request bodies, with the id the server answered). New reference. */
json_t *langfuse_server_scores(struct langfuse_server *s);
/* The message of the last 4xx answer ("" when none) into buf. */
const char *langfuse_server_last_error(struct langfuse_server *s, char *buf, size_t len);

/* Helpers on a stored span object. Borrowed results, valid while @p span lives. */
const json_t *langfuse_span_attr(const json_t *span, const char *key); /* AnyValue or NULL */
const char *langfuse_span_str(const json_t *span, const char *key);    /* stringValue or NULL */
/* The first span named @p name in @p spans, or NULL. */
const json_t *langfuse_spans_find(const json_t *spans, const char *name);

#endif
