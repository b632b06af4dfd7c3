/* exporters/metrics_server.h - the Prometheus endpoint (metrics_server.c) on the embedded HTTP
 * server (net/http_server.h): the route of a request among /metrics and /healthz, the listen
 * address with its default, and the table of extra routes (`weft serve`'s explorer, API and OTLP
 * ingest, ingest.c) that go before them. Internal; exposed for the fuzz harness
 * (tests/fuzz/fuzz_serve.c), `weft serve` and tests.
 */
#ifndef WEFT_EXPORTERS_METRICS_SERVER_H
#define WEFT_EXPORTERS_METRICS_SERVER_H

#include "net/http_server.h"

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

/* The request, reply and route types are the embedded server's (net/http_server.h): the extra
 * routes go first in its table, /metrics and /healthz after them. */

/* /metrics shows the server's own counter after what the source renders, when it has extra
 * routes: weft_http_requests_refused_total{route, reason} with reason "busy" (503 at
 * admission), "timeout" (closed after the idle timeout before an answer) or "client_closed"
 * (the client went away before an answer). */

/* A server with extra routes and headers on every response (`weft serve`). */
struct weft__metrics_server_options {
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
weft_err weft__metrics_server_start_ex(const struct weft__metrics_server_options *o,
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
