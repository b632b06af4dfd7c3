/* net/http_client.h - the one outbound HTTP client, over libcurl, that every caller of weft uses:
 * the OTLP/HTTP exporters, the OpenAI provider, embeddings, Langfuse prompts, the webhook
 * sender, the http_get tool and the MCP Streamable HTTP transport.
 *
 * A request is a plain description (method, URL, headers, body, timeouts, response cap,
 * redirect policy, TLS files, Basic auth, hooks); a client is one kept-alive libcurl handle;
 * weft__http_client_perform() runs one request, with or without a retry policy (429, 502,
 * 503, 504 and transport failures, exponential backoff with jitter, Retry-After honoured,
 * bounded by attempts, a deadline and a retry budget), and fills a response: status, the
 * headers callers need (Retry-After, Content-Type, one named header such as Mcp-Session-Id,
 * the redirect target) and the body, capped ("the answer is over N bytes").
 *
 * Header lists hold credentials (Authorization, x-api-key, api-key): every line is wiped before
 * it is freed, secret lines are built in exactly sized buffers that are wiped too, and nothing
 * here logs a header, a body or a URL's user info.
 *
 * Callers keep what is theirs on top of the hooks: OTLP's spool and partial-success parsing,
 * the MCP transport's SSE parsing and resumption, http_get's host allow-list and redirect
 * checks, error texts their tests assert.
 *
 * Thread-safety: a client is used by one thread at a time; separate clients are independent.
 * A header list may be shared read-only by requests on several threads once built.
 */
#ifndef WEFT_NET_HTTP_CLIENT_H
#define WEFT_NET_HTTP_CLIENT_H

#include "base/buf.h"

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEFT__HTTP_DEFAULT_MAX_RESPONSE (8u << 20) /* a request's max_response_bytes of 0 */

/* ------------------------------------------------------------------------------------------ */
/* Header lists                                                                                */

/* "Name: value" lines; zero-initialise (or weft__http_headers_init) before use. */
struct weft__http_headers {
    struct curl_slist *list;
};

void weft__http_headers_init(struct weft__http_headers *h);

/* Append the line @p line ("Name: value", or "Name:" to suppress a header libcurl would add).
 * @return WEFT_OK, WEFT_EINVAL (NULL, or a CR or LF in the line), WEFT_ENOMEM (unchanged).
 * Ownership: copies the line. */
weft_err weft__http_headers_add(struct weft__http_headers *h, const char *line);

/* Append "@p name: @p value". The line is built in an exactly sized buffer that is wiped once
 * the list holds its copy, so a secret value leaves no stray copy on the heap.
 * @return WEFT_OK, WEFT_EINVAL (a CR or LF), WEFT_ENOMEM (unchanged). Ownership: copies. */
weft_err
weft__http_headers_add_pair(struct weft__http_headers *h, const char *name, const char *value);

/* Append "Authorization: Bearer @p token" the same way. @return as weft__http_headers_add_pair. */
weft_err weft__http_headers_add_bearer(struct weft__http_headers *h, const char *token);

/* Append a copy of every line of @p from. @return WEFT_OK, WEFT_ENOMEM (@p h unchanged). */
weft_err weft__http_headers_append_all(struct weft__http_headers *h,
                                       const struct weft__http_headers *from);

/* The value of the first line named @p name (case-insensitive), borrowed until the list
 * changes; NULL when absent. */
const char *weft__http_headers_get(const struct weft__http_headers *h, const char *name);

/* Wipe every line (any may hold a credential) and free the list; the list is empty after.
 * NULL is a no-op. */
void weft__http_headers_cleanup(struct weft__http_headers *h);

/* True when a header of this name carries a credential (Authorization, Proxy-Authorization,
 * Cookie, x-api-key, api-key, and names ending in "token", "secret" or "key"): its value must
 * never be logged. */
bool weft__http_header_is_secret(const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Requests and responses                                                                      */

/* Streaming: called with each piece of the body as it arrives (instead of buffering it in the
 * response). @return false to stop the transfer (the failure is WEFT__HTTP_FAIL_WRITE). */
typedef bool (*weft__http_write_fn)(const char *data, size_t len, void *user_data);
/* Each header line as received ("Name: value\r\n", and the status line). @return false to stop
 * the transfer (WEFT__HTTP_FAIL_WRITE). */
typedef bool (*weft__http_header_fn)(const char *line, size_t len, void *user_data);
/* Asked before the client blocks on the transfer's sockets, for at most *poll_ms (1,000 on
 * entry; the hook may lower it, e.g. to a drain deadline), and again after every wake-up
 * (socket activity, libcurl's timers, weft__http_client_wakeup()). @return true to abort the
 * transfer (WEFT__HTTP_FAIL_ABORTED), for shutdown and drain deadlines. */
typedef bool (*weft__http_abort_fn)(void *user_data, uint32_t *poll_ms);

struct weft__http_client_request {
    const char *method; /* NULL: POST when has_body, else GET */
    const char *url;
    const struct weft__http_headers *headers; /* NULL: none */
    const char *content_type;                 /* NULL: none; else sent as Content-Type */
    const char *body;                         /* sent when has_body; not copied */
    size_t body_len;
    bool has_body;
    const char *user_agent;      /* NULL: "weft/<version>" */
    uint32_t connect_timeout_ms; /* 0: libcurl's default (300 s, cut by timeout_ms) */
    uint32_t timeout_ms;         /* the whole attempt; 0: none (a retry deadline still cuts it) */
    size_t max_response_bytes;   /* 0: WEFT__HTTP_DEFAULT_MAX_RESPONSE */
    bool is_truncate_ok;         /* a body over the cap is cut there (the transfer stops) and
                                  * the attempt succeeds with is_truncated */
    long max_redirects;          /* 0: redirects are not followed (Location is reported) */
    const char *protocols;       /* NULL: "http,https" */
    bool is_keepalive;           /* TCP keep-alive probes on the connection */
    const char *ca_file;         /* TLS: a CA bundle; NULL: the system's */
    const char *client_cert;     /* TLS client certificate (PEM); NULL: none */
    const char *client_key;
    bool is_insecure;       /* TLS: no peer or host verification (tests and labs only) */
    const char *basic_user; /* HTTP Basic credentials, built by libcurl; NULL: none */
    const char *basic_password;
    const char *capture_header; /* the value of this response header lands in response->captured */
    weft__http_write_fn on_write;
    weft__http_header_fn on_header;
    weft__http_abort_fn should_abort;
    void *user_data; /* for the three hooks */
};

/* Why an attempt did not end with an HTTP answer. */
typedef enum weft__http_failure {
    WEFT__HTTP_FAIL_NONE = 0,  /* an answer came: see status */
    WEFT__HTTP_FAIL_CONNECT,   /* refused or unreachable (os_errno says which) */
    WEFT__HTTP_FAIL_RESOLVE,   /* the host name does not resolve */
    WEFT__HTTP_FAIL_TIMEOUT,   /* no whole answer within the attempt's timeout */
    WEFT__HTTP_FAIL_NOTHING,   /* the server closed the connection without an answer */
    WEFT__HTTP_FAIL_TOO_LARGE, /* the body is over max_response_bytes */
    WEFT__HTTP_FAIL_WRITE,     /* a hook stopped the transfer */
    WEFT__HTTP_FAIL_ABORTED,   /* should_abort said so */
    WEFT__HTTP_FAIL_NOMEM,     /* out of memory */
    WEFT__HTTP_FAIL_OTHER      /* any other transport or TLS failure (error says which) */
} weft__http_failure;

/* How a retried request ended. */
typedef enum weft__http_stop {
    WEFT__HTTP_STOP_FINAL = 0, /* a 2xx, or an answer or failure that is not retried */
    WEFT__HTTP_STOP_ATTEMPTS,  /* retryable, but max_attempts were made */
    WEFT__HTTP_STOP_DEADLINE,  /* retryable, but the wait would end past the deadline or budget */
    WEFT__HTTP_STOP_CANCELLED  /* the retry policy's sleep was interrupted */
} weft__http_stop;

struct weft__http_response {
    long status;                /* of the last attempt's answer, even one whose body broke off;
                                 * 0 when none came */
    weft__http_failure failure; /* of the last attempt */
    const char *error;          /* libcurl's text for the failure (static); "" when none */
    long os_errno;              /* for WEFT__HTTP_FAIL_CONNECT */
    bool is_retryable;          /* the last attempt is one the retry rules would repeat */
    bool is_truncated;          /* is_truncate_ok and the body was cut at the cap */
    struct weft__buf body;      /* the last answer's body (unless streamed), at most the cap */
    char retry_after[64];       /* the last answer's Retry-After value, "" when none */
    char content_type[128];     /* the last answer's Content-Type value, "" when none */
    char captured[256];         /* the last answer's capture_header value, "" when none */
    char *redirect_url;         /* where a 3xx not followed points; NULL when none */
    unsigned attempts;          /* attempts made */
    weft__http_stop stop;       /* how the retries ended */
    uint64_t timeout_ms;        /* the last attempt's timeout (after the deadline cut it) */
};

/* Zero a response. */
void weft__http_response_init(struct weft__http_response *r);
/* Free the body and the redirect target; the response may be reused after init. NULL: no-op. */
void weft__http_response_cleanup(struct weft__http_response *r);

/* ------------------------------------------------------------------------------------------ */
/* Retry policy                                                                                */

struct weft__http_retry {
    unsigned max_attempts;       /* 0 or 1: one attempt */
    uint32_t initial_backoff_ms; /* the first backoff; doubled up to max_backoff_ms */
    uint32_t max_backoff_ms;
    bool is_half_jitter;         /* waits drawn from [b/2, b]; else full jitter, [0, b] */
    bool is_500_retryable;       /* also retry 500 (LLM APIs) */
    bool is_retry_after_503_429; /* honour Retry-After on 429 and 503 only (else on any) */
    uint64_t retry_after_max_ms; /* a cap on a Retry-After wait; 0: none */
    uint64_t deadline_ns;        /* monotonic; 0: none. Cuts attempts; no wait ends past it */
    uint64_t budget_ms;          /* 0: none; else no wait ends more than this after the start */
    /* Sleep @p ms; false when the wait was interrupted (shutdown, drain): the request stops
     * with WEFT__HTTP_STOP_CANCELLED. NULL: nanosleep. */
    bool (*sleep_ms)(void *user_data, uint64_t ms);
    /* Told of each failed attempt that will be retried, before the wait (logging, counters,
     * last-error texts). NULL: nothing. */
    void (*on_retry)(void *user_data, const struct weft__http_response *r, uint64_t wait_ms);
    void *user_data;
};

/* The statuses and failures the retry rules repeat (429, 502, 503, 504, and 500 when
 * @p with_500; connect, resolve, timeout, send/receive, empty answer, TLS handshake). */
bool weft__http_status_is_retryable(long status, bool with_500);

/* ------------------------------------------------------------------------------------------ */
/* Clients                                                                                     */

struct weft__http_client;

/* Initialise libcurl for the process (once, thread-safe). @return true when it is ready. */
bool weft__http_global_init(void);

/* A client: one libcurl handle kept across requests, so a connection is reused.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (libcurl failed to initialise), WEFT_ENOMEM.
 * Ownership: free with weft__http_client_free(). */
weft_err weft__http_client_new(struct weft__http_client **out);
void weft__http_client_free(struct weft__http_client *c); /* NULL is a no-op */

/* Wake a perform of @p c that is blocked on its sockets, so that its should_abort hook runs
 * now rather than at the end of its poll slice. Thread-safe (the one call that is): for
 * shutdown from another thread. Harmless when no transfer runs. */
void weft__http_client_wakeup(struct weft__http_client *c);

/* Run @p req, retried per @p retry (NULL: one attempt), into @p resp (initialised by the
 * caller; reset here). Each attempt starts a fresh response body and headers.
 * @return WEFT_OK when the last attempt got an answer (any status: check resp->status),
 * WEFT_ETIMEDOUT (timeout), WEFT_ELIMIT (the body is over the cap), WEFT_ENOMEM, WEFT_ESTATE
 * (aborted by should_abort or a hook), WEFT_EIO (any other transport failure), WEFT_EINVAL
 * (NULL arguments or no URL): always the outcome of the last attempt; resp->stop says why the
 * retries ended (an interrupted retry sleep is WEFT__HTTP_STOP_CANCELLED).
 * Ownership: borrows @p req for the call. */
weft_err weft__http_client_perform(struct weft__http_client *c,
                                   const struct weft__http_client_request *req,
                                   const struct weft__http_retry *retry,
                                   struct weft__http_response *resp);

/* One request on a client of its own (created and freed here). As weft__http_client_perform. */
weft_err weft__http_perform(const struct weft__http_client_request *req,
                            const struct weft__http_retry *retry,
                            struct weft__http_response *resp);

/* ------------------------------------------------------------------------------------------ */
/* URLs                                                                                        */

/* The parts of a URL as libcurl parses it (the host it would connect to). Every member is
 * NULL when absent. */
struct weft__http_url {
    char *scheme;
    char *user;
    char *host; /* IPv6 literals in brackets */
    char *port; /* the scheme's default when none is given */
    char *path;
    char *query;
    char *url; /* the whole URL, normalised: what a request should use */
};

/* Parse @p url; with @p any_scheme, schemes libcurl does not speak are accepted too.
 * @return WEFT_OK, WEFT_EINVAL (not a URL), WEFT_ENOMEM. Ownership: release with
 * weft__http_url_cleanup(). */
weft_err weft__http_url_parse(const char *url, bool any_scheme, struct weft__http_url *out);
void weft__http_url_cleanup(struct weft__http_url *u); /* NULL is a no-op */

/* "scheme://host:port/path" of @p url into @p out (never user info, query or fragment, which
 * may carry credentials); @p fallback when it does not parse. */
void weft__http_url_describe(const char *url, const char *fallback, char *out, size_t len);

/* @p s percent-encoded for a path segment or query value. NULL when out of memory.
 * Ownership: free with weft__free(). */
char *weft__http_escape(const char *s);

#endif /* WEFT_NET_HTTP_CLIENT_H */
