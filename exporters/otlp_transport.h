/* exporters/otlp_transport.h - the OTLP/HTTP transport shared by the trace, metrics and
 * Langfuse exporters: endpoint and option resolution from the OTEL_EXPORTER_OTLP_* environment,
 * gzip, the spool, and the retry rules of REFERENCE.md run by net/http_client (one kept-alive
 * client; 429, 502, 503, 504 and connection failures, exponential backoff with full jitter,
 * Retry-After honoured, bounded by the deadline and the retry budget).
 *
 * Threads: send runs on one thread at a time (the exporter's). shutdown may come from any
 * thread: it wakes a retry wait and aborts a request in flight. Header values are never logged.
 */
#ifndef WEFT_EXPORTERS_OTLP_TRANSPORT_H
#define WEFT_EXPORTERS_OTLP_TRANSPORT_H

#include <weft/export.h>

struct weft__otlp_transport;
struct curl_slist;

/** What differs between the users of the transport. */
struct weft__otlp_transport_config {
    /** "TRACES" or "METRICS": OTEL_EXPORTER_OTLP_<signal>_* wins over OTEL_EXPORTER_OTLP_*.
     * NULL: the environment is not read at all (Langfuse has its own variables). */
    const char *signal;
    /** Appended to a base endpoint: "v1/traces", "v1/metrics". */
    const char *path;
    /** The full URL given through the API (wins over base and environment); may be NULL. */
    const char *signal_endpoint;
    /** Names the exporter in log lines: "OTLP", "OTLP metrics", "Langfuse". */
    const char *log_name;
    /** Header lines ("Name: value") added as given; their values are never logged. */
    const char *const *extra_headers;
    size_t extra_header_count;
    /** HTTP Basic credentials (libcurl builds the header); never logged. NULL: none. */
    const char *basic_user;
    const char *basic_password;
    /** Parse 2xx answers for OTLP partial_success (false for receivers that answer JSON of
     * their own, such as Langfuse). */
    bool parse_partial_success;
    /** "otlp", "langfuse": the kind in the spool's directory name. NULL: never a spool
     * (metrics, scores); else a spool when the options' spool fields or WEFT_EXPORT_SPOOL*
     * ask for one (spool.h). */
    const char *spool_kind;
};

/** Create a transport. @p o: zero/NULL fields come from the environment (when cfg->signal is
 * set), else the defaults. @return WEFT_OK, WEFT_EINVAL (bad URL or option, logged with its
 * name), WEFT_EIO (libcurl failed to initialise), WEFT_ENOMEM. Ownership: strings are copied. */
weft_err weft__otlp_transport_new(const struct weft__otlp_transport_config *cfg,
                                  const struct weft_otlp_options *o,
                                  struct weft__otlp_transport **out);

/** Free a transport. NULL is a no-op. Must not race with send. */
void weft__otlp_transport_free(struct weft__otlp_transport *t);

/** True when the transport sends OTLP JSON, false for protobuf. */
bool weft__otlp_transport_is_json(const struct weft__otlp_transport *t);

/** The request URL (for log lines). */
const char *weft__otlp_transport_url(const struct weft__otlp_transport *t);

/** Send one encoded request (gzipped here when configured), retrying per the rules until
 * @p deadline (CLOCK_MONOTONIC ns, 0 none). *rejected (may be NULL) receives the
 * partial_success count of a 2xx answer. @return WEFT_OK (2xx), WEFT_EHTTP (a final HTTP
 * status; see stats.last_http_status), WEFT_EPARSE (a 2xx whose body is not an OTLP response,
 * when cfg->parse_partial_success), WEFT_ETIMEDOUT (retries gave up), WEFT_EIO (transport
 * error or an oversized answer), WEFT_ESTATE (shut down), WEFT_ENOMEM. Every failure leaves
 * its description in the last error. */
weft_err weft__otlp_transport_send(struct weft__otlp_transport *t,
                                   const char *data,
                                   size_t len,
                                   uint64_t deadline,
                                   uint64_t *rejected);

/** Send one request of @p spans spans like weft__otlp_transport_send(), with the spool: older
 * spooled requests go first (up to 8, one attempt each); while some still wait, or when this
 * one's retries give up (WEFT_ETIMEDOUT, WEFT_EIO, WEFT_ESTATE), it is written to the spool
 * instead and the call succeeds with *spooled = @p spans. Without a spool it is exactly
 * weft__otlp_transport_send(). @return as weft__otlp_transport_send(). */
weft_err weft__otlp_transport_export(struct weft__otlp_transport *t,
                                     const char *data,
                                     size_t len,
                                     uint32_t spans,
                                     uint64_t deadline,
                                     uint64_t *rejected,
                                     uint64_t *spooled);

/** Send up to 16 spooled requests while the endpoint takes them (the processor's idle op).
 * @return true when more wait and the endpoint answers: call again. */
bool weft__otlp_transport_idle(struct weft__otlp_transport *t, uint64_t deadline);

/** Send spooled requests until none is left, the endpoint fails or @p deadline passes. */
void weft__otlp_transport_flush_spool(struct weft__otlp_transport *t, uint64_t deadline);

/** The spool's counters (zeros, is_enabled false, without one). Thread-safe. */
void weft__otlp_transport_spool_stats(const struct weft__otlp_transport *t,
                                      struct weft_spool_stats *out);

/** Stop: later sends fail with WEFT_ESTATE, a retry wait and a request in flight end now.
 * Thread-safe. */
void weft__otlp_transport_shutdown(struct weft__otlp_transport *t);

/** Copy the last failure ("connection refused by http://host:4318/v1/traces", "no answer from
 * ... within 10000 ms", "HTTP 500 from ...: excerpt") into @p buf; "" when none yet. Never
 * holds user info, query strings or header values. Thread-safe. @return its length. */
size_t weft__otlp_transport_last_error(const struct weft__otlp_transport *t, char *buf, size_t len);

/** Counters (spans_rejected holds the partial_success items of any signal). NULL-safe. */
void weft__otlp_transport_stats(const struct weft__otlp_transport *t, struct weft_otlp_stats *out);

/** Append the members of @p list, an OTEL_EXPORTER_OTLP_HEADERS-style "k=v,k2=v2" value
 * (values percent-decoded, members trimmed), to @p headers as "k: v" lines. Malformed members
 * are warned about by @p source (a variable name) and skipped; values are never logged.
 * @return WEFT_OK, WEFT_ENOMEM (the list keeps what was added). Ownership: the lines are new
 * in *headers, the list of a struct weft__http_headers (net/http_client.h; free it with
 * weft__http_headers_cleanup, which wipes the values). */
weft_err weft__otlp_headers_add(struct curl_slist **headers, const char *list, const char *source);

#endif /* WEFT_EXPORTERS_OTLP_TRANSPORT_H */
