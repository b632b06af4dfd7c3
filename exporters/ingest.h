/* exporters/ingest.h - OTLP/HTTP trace ingest for `weft serve`: POST /v1/traces bodies
 * (protobuf or JSON, gzip or identity) decoded (otlp_decode.h) and written into the span store
 * through the store exporter (store_writer.c), one transaction per request. Internal.
 *
 * Responses follow the OTLP/HTTP specification: 200 with an ExportTraceServiceResponse in the
 * request's encoding (with partial_success when spans were rejected), 400 for a malformed body,
 * 413 for a body over the cap (compressed or decompressed), 415 for an unsupported
 * Content-Type or Content-Encoding, 405 for a method other than POST, 503 when the store
 * cannot be written (the client retries); every error carries a google.rpc.Status.
 * Everything is counted (weft__ingest_observe()) and each kind of refusal is logged once at
 * WARN (later ones at DEBUG).
 *
 * Thread-safety: weft__ingest_handle() may run on several threads at once (decoding runs in
 * parallel; store writes are serialised by a mutex). new/free must not race with anything.
 */
#ifndef WEFT_EXPORTERS_INGEST_H
#define WEFT_EXPORTERS_INGEST_H

#include "net/http_server.h"

#include <stdint.h>
#include <weft/metrics.h>

#define WEFT__INGEST_PATH             "/v1/traces"
#define WEFT__INGEST_DEFAULT_MAX_BODY ((size_t)16 << 20)
/* The decoded form of a request may take this many times the body cap: the decoder's arena
 * and, for JSON (and protobuf kvlist values), the jansson trees it builds, counted as they are
 * allocated. Past it the request gets 413. */
#define WEFT__INGEST_DECODED_FACTOR 8
/* Requests to /v1/traces served at once, from their headers to their answer; the next get 503
 * with Retry-After (OTLP senders retry). Each takes at most its body, the inflated body and the
 * decoded budget above: with the 16 MiB default, memory stays under about 2 x 300 MiB
 * whatever the senders do (docs/serve.md). */
#define WEFT__INGEST_MAX_ACTIVE 2

struct weft__ingest;

struct weft__ingest_options {
    const char *db_path; /* span store; NULL: weft_store_default_path() */
    size_t max_body;     /* bytes, compressed and decompressed; 0: the default (16 MiB) */
    /* Tail sampling at ingest (docs/sampling.md "At ingest"): spans wait per trace in a run
     * buffer before the store; decisions spans carry are followed, other traces decided by
     * these rules (weft_sampling_policy_parse(); the ingest keeps its own copy)
     * sampling_wait_ms after their root. NULL, "" or "off": every span stored as it comes. */
    const char *sampling;
    uint32_t sampling_wait_ms; /* 0: 5000 */
};

/* Open the span store for writing (creating it when missing) and prepare the counters.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (the store cannot be opened: logged), WEFT_ENOMEM.
 * Ownership: copies @p opts; caller owns *out (weft__ingest_free()). */
weft_err weft__ingest_new(const struct weft__ingest_options *opts, struct weft__ingest **out);

/* Close the store and free @p ing. NULL is a no-op. */
void weft__ingest_free(struct weft__ingest *ing);

/* The body cap in bytes. */
size_t weft__ingest_max_body(const struct weft__ingest *ing);

/* What one request brings (see struct weft__http_request): its method, headers and body. */
struct weft__ingest_request {
    const char *method;
    const char *content_type;     /* NULL: missing (415) */
    const char *content_encoding; /* NULL or "identity": none; "gzip" */
    const void *body;
    size_t len;
    bool is_too_large; /* the transport dropped a body over the cap */
};

/* Handle one request to /v1/traces and fill @p reply (the body is weft__malloc'd with
 * free_body set, or static). Never fails: every outcome is an HTTP status, counted.
 * Ownership: borrows @p req for the call. */
void weft__ingest_handle(struct weft__ingest *ing,
                         const struct weft__ingest_request *req,
                         struct weft__http_reply *reply);

/* The route for the embedded server (net/http_server.h): POST /v1/traces with the body cap.
 * Ownership: @p ing is borrowed until the server stops. */
struct weft__http_route weft__ingest_route(struct weft__ingest *ing);

/* The counters. */
struct weft__ingest_stats {
    uint64_t spans_accepted;
    uint64_t spans_rejected;
    uint64_t spans_refused;  /* in requests answered 503 because the store failed */
    uint64_t in_flight;      /* requests being handled now */
    uint64_t store_writes;   /* batches written into the store (or tried) */
    uint64_t store_write_ns; /* time in those writes */
    uint64_t requests_200;
    uint64_t requests_400;
    uint64_t requests_405;
    uint64_t requests_413;
    uint64_t requests_415;
    uint64_t requests_503;
    uint64_t limited;            /* attributes, events and links dropped by the span limits */
    uint64_t names_escaped;      /* span and event names whose NUL bytes became U+FFFD */
    uint64_t checkpoints;        /* the store's WAL checkpoints on their own thread */
    uint64_t inline_checkpoints; /* the WAL past its backstop: a request waited for one */
};

/* Read the counters (zeros for NULL). */
void weft__ingest_stats(const struct weft__ingest *ing, struct weft__ingest_stats *out);

/* Add the counters to @p meter as weft.ingest.spans{outcome=accepted|rejected},
 * weft.ingest.requests{status=...}, weft.ingest.store_checkpoints{mode=background|inline},
 * weft.ingest.limited and weft.ingest.names_escaped (Prometheus: weft_ingest_spans_total,
 * weft_ingest_requests_total, weft_ingest_store_checkpoints_total, weft_ingest_limited_total,
 * weft_ingest_names_escaped_total). Requests refused at once because WEFT__INGEST_MAX_ACTIVE
 * were in are the server's (weft_http_requests_refused_total{route="/v1/traces"}). @return WEFT_OK,
 * WEFT_EINVAL, WEFT_ENOMEM. Ownership: borrows both for the call. */
weft_err weft__ingest_observe(const struct weft__ingest *ing, struct weft_meter *meter);

#endif /* WEFT_EXPORTERS_INGEST_H */
