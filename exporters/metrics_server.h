/* exporters/metrics_server.h - what the metrics server (metrics_server.c) parses itself, the
 * rest of an HTTP request being libmicrohttpd's: the route of a request and the listen
 * address. Internal; exposed for the fuzz harness (tests/fuzz/fuzz_serve.c) and tests.
 */
#ifndef WEFT_EXPORTERS_METRICS_SERVER_H
#define WEFT_EXPORTERS_METRICS_SERVER_H

#include <netinet/in.h>
#include <weft/common.h>

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

#endif /* WEFT_EXPORTERS_METRICS_SERVER_H */
