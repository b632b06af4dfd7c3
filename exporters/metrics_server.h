/* exporters/metrics_server.h - what the metrics server (metrics_server.c) parses itself, the
 * rest of an HTTP request being libmicrohttpd's: the route of a request and the listen
 * address; and the table of extra routes (`weft serve`'s OTLP ingest, ingest.c) that the
 * server dispatches to by path. Internal; exposed for the fuzz harness
 * (tests/fuzz/fuzz_serve.c), `weft serve` and tests.
 */
#ifndef WEFT_EXPORTERS_METRICS_SERVER_H
#define WEFT_EXPORTERS_METRICS_SERVER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>
#include <weft/metrics.h>

typedef enum weft__metrics_route {
    WEFT__ROUTE_NOT_FOUND = 0, /* 404 */
    WEFT__ROUTE_BAD_METHOD,    /* 405: neither GET nor HEAD */
    WEFT__ROUTE_METRICS,       /* GET /metrics */
    WEFT__ROUTE_HEALTHZ        /* GET /healthz */
} weft__metrics_route;

/* Route a request by its method and URL path (exact match; a query string is not a route).
 * NULL arguments route nowhere. Ownership: borrows both for the call. */
weft__metrics_route weft__metrics_server_route(const char *method, const char *url);

/* Parse a listen address "HOST:PORT" (IPv4 dotted quad, may be empty for 127.0.0.1; port
 * 0..65535, 0 picks a free one) into @p out; NULL @p addr is 127.0.0.1:9464.
 * @return WEFT_OK, WEFT_EINVAL (@p out zeroed). */
weft_err weft__metrics_server_parse_addr(const char *addr, struct sockaddr_in *out);

/* --- extra routes ------------------------------------------------------------------------- */

/* A request as a route handler sees it, its body complete. Ownership: everything is borrowed
 * for the handler call. */
struct weft__http_request {
    const char *method;
    const char *url;
    const char *body; /* NULL when empty or too large */
    size_t body_len;
    bool is_too_large; /* the body exceeded the route's max_body: it was not kept */
    void *conn;        /* for weft__http_header() */
};

/* The value of request header @p name (case-insensitive), or NULL.
 * Ownership: borrowed for the handler call. */
const char *weft__http_header(const struct weft__http_request *req, const char *name);

/* What a handler answers. The server copies @p body (weft__malloc'd or static per
 * @p free_body) and then frees it when @p free_body. */
struct weft__http_reply {
    unsigned status;
    const char *content_type; /* static */
    char *body;
    size_t len;
    bool free_body;    /* weft__free(body) after the response is built */
    const char *allow; /* an Allow header for a 405 (static), or NULL */
    /* More headers, "Name: value" lines separated by '\n' (weft__malloc'd: the server frees
     * it), or NULL. */
    char *headers;
};

/* The value of query argument @p name, or of cookie @p name, or NULL.
 * Ownership: borrowed for the handler call. */
const char *weft__http_query(const struct weft__http_request *req, const char *name);
const char *weft__http_cookie(const struct weft__http_request *req, const char *name);

/* Answer @p req into @p reply (zeroed by the caller; status 0 means 500). Runs on the server's
 * threads, concurrently: a handler does its own locking. */
typedef void (*weft__http_handler_fn)(void *user_data,
                                      const struct weft__http_request *req,
                                      struct weft__http_reply *reply);

/* One extra route: every method on an exact @p path goes to @p handler (it answers 405 itself
 * for methods it does not take). A body over @p max_body bytes is not accumulated: the handler
 * sees is_too_large instead, right away when Content-Length says so (the body is then never
 * read), else when the body ends. A route with @p max_body 0 takes no body at all. */
struct weft__http_route {
    const char *path;
    size_t max_body;
    weft__http_handler_fn handler;
    void *user_data;
    bool is_prefix; /* every path that starts with @p path (the first such route wins) */
    /* At most this many requests of the route at once, from their headers to their answer
     * (0: no limit). One more is answered 503 with Retry-After without its handler: its body
     * is read and dropped (a client that waits for 100 Continue is answered at once), and it
     * is counted (weft_http_requests_refused_total{route,reason="busy"}). So a heavy route
     * (ingest, big API reads) cannot take the memory of the others. */
    unsigned max_active;
};

/* How long a client told "busy" should wait before it retries (the Retry-After header). */
#define WEFT__HTTP_RETRY_AFTER_S 1

/* /metrics shows the server's own counter after what the source renders, when it has extra
 * routes: weft_http_requests_refused_total{route, reason} with reason "busy" (503 at
 * admission), "timeout" (closed after the idle timeout before an answer) or "client_closed"
 * (the client went away before an answer). */

/* A server with extra routes and headers on every response (`weft serve`). */
struct weft__http_server_options {
    weft_metrics_source_fn source; /* renders /metrics */
    void *user_data;
    const char *addr;
    const struct weft__http_route *routes; /* copied; may be NULL with route_count 0 */
    size_t route_count;
    /* "Name: value" strings added to every response, built-in routes' too; NULL-terminated,
     * borrowed until weft_metrics_server_stop(); NULL: none. */
    const char *const *headers;
};

/* Start a server as @p o says. Errors and ownership as weft_metrics_server_start_source(). */
weft_err weft__metrics_server_start_ex(const struct weft__http_server_options *o,
                                       struct weft_metrics_server **out);

/* As weft_metrics_server_start_source(), plus @p routes (copied; @p count may be 0). A route's
 * path shadows the built-in GET routes. Errors and ownership as that function; every route's
 * user_data is borrowed until weft_metrics_server_stop(). */
weft_err weft__metrics_server_start_routes(weft_metrics_source_fn source,
                                           void *user_data,
                                           const char *addr,
                                           const struct weft__http_route *routes,
                                           size_t count,
                                           struct weft_metrics_server **out);

#endif /* WEFT_EXPORTERS_METRICS_SERVER_H */
