/* net/http_server.h - the one embedded HTTP server of weft (http_server.c, over libmicrohttpd):
 * `weft serve` (explorer, API, OTLP ingest), the Prometheus endpoint (exporters/metrics_server.c:
 * /metrics and /healthz as routes on it) and the Streamable HTTP transport of `weft mcp serve`
 * (runtime/mcp_server/serve_http.c). It binds an IPv4 address (port 0 picks a free one), runs a
 * thread per connection, accumulates request bodies up to each route's cap, dispatches by a route
 * table, caps connections in total and per client address, counts what it refused, and stops
 * gracefully. Access rules are the callers': a route's handler (or a catch-all "/" prefix route)
 * checks Host, Origin, tokens and sessions before it answers.
 *
 * Internal. Thread-safety: a server is started and stopped from one thread; handlers run on the
 * server's threads, concurrently, and do their own locking; the counters may be read from any
 * thread.
 */
#ifndef WEFT_NET_HTTP_SERVER_H
#define WEFT_NET_HTTP_SERVER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

struct weft__http_server; /* opaque */

/* A request as a route handler sees it, its body complete. Ownership: everything is borrowed
 * for the handler call. */
struct weft__http_request {
    const char *method;
    const char *url;  /* the path, without the query string (weft__http_query()) */
    const char *body; /* NULL when empty or too large */
    size_t body_len;
    bool is_too_large; /* the body exceeded the route's max_body: it was not kept */
    void *conn;        /* for weft__http_header() and friends */
    const struct weft__http_server *server; /* for its counters (weft__http_server_refused()) */
};

/* The value of request header @p name (case-insensitive), or NULL.
 * Ownership: borrowed for the handler call. */
const char *weft__http_header(const struct weft__http_request *req, const char *name);

/* The value of query argument @p name, or of cookie @p name, or NULL.
 * Ownership: borrowed for the handler call. */
const char *weft__http_query(const struct weft__http_request *req, const char *name);
const char *weft__http_cookie(const struct weft__http_request *req, const char *name);

/* What a handler answers. The server copies @p body (weft__malloc'd or static per
 * @p free_body) and then frees it when @p free_body. */
struct weft__http_reply {
    unsigned status;          /* 0 means 500 */
    const char *content_type; /* static */
    char *body;
    size_t len;
    bool free_body;    /* weft__free(body) after the response is built */
    const char *allow; /* an Allow header for a 405 (static), or NULL */
    /* More headers, "Name: value" lines separated by '\n' (weft__malloc'd: the server frees
     * it), or NULL. */
    char *headers;
    /* A body made as it is sent (Server-Sent Events), instead of @p body: stream_read() is
     * called on the connection's thread whenever the client can take more, may block, and
     * returns the bytes it wrote into @p buf (1 .. @p max) or WEFT__HTTP_STREAM_END;
     * stream_free() is called once the response is over or could not be made (the client
     * left, the server stopped). The connection's idle timeout does not apply while it runs:
     * the stream itself must write now and then (a client that left is seen only when a
     * write fails) and end when the server stops (weft__http_server_stop() waits for it). */
    long (*stream_read)(void *data, char *buf, size_t max);
    void (*stream_free)(void *data);
    void *stream_data;
};

#define WEFT__HTTP_STREAM_END (-1L)

/* Answer @p req into @p reply (zeroed by the server). Runs on the server's threads,
 * concurrently: a handler does its own locking. */
typedef void (*weft__http_handler_fn)(void *user_data,
                                      const struct weft__http_request *req,
                                      struct weft__http_reply *reply);

/* One route: every method on an exact @p path (or, with @p is_prefix, every path that starts
 * with it; the first matching route wins) goes to @p handler, which answers 405 itself for
 * methods it does not take. A path no route matches gets 404. A body over @p max_body bytes is
 * not accumulated (it is read and dropped; a client sending Expect: 100-continue with a
 * Content-Length over the cap is answered at once and sends none); when the body ends, the
 * request is answered 413 by the server (@p refuses_too_large) or
 * handed to the handler with is_too_large set, so that it can check access first and answer in
 * its own format. A route with @p max_body 0 takes no body at all. */
struct weft__http_route {
    const char *path;
    size_t max_body;
    weft__http_handler_fn handler;
    void *user_data;
    bool is_prefix;
    /* At most this many requests of the route at once, from their headers to their answer
     * (0: no limit). One more is answered 503 with Retry-After without its handler: its body
     * is read and dropped (a client that waits for 100 Continue is answered at once), and it
     * is counted (WEFT__HTTP_REFUSED_BUSY). So a heavy route (ingest, big API reads) cannot
     * take the memory of the others. */
    unsigned max_active;
    bool refuses_too_large; /* the server answers 413 to a body over max_body */
};

/* How long a client told "busy" should wait before it retries (the Retry-After header). */
#define WEFT__HTTP_RETRY_AFTER_S 1

/* Why a request of a route was refused or went unanswered. */
typedef enum weft__http_refusal {
    WEFT__HTTP_REFUSED_BUSY,          /* 503 at admission: max_active requests were in */
    WEFT__HTTP_REFUSED_TIMEOUT,       /* the connection idled past its timeout before the answer */
    WEFT__HTTP_REFUSED_CLIENT_CLOSED, /* the client closed the connection before the answer */
    WEFT__HTTP_REFUSED_TOO_LARGE,     /* 413 by the server (refuses_too_large) */
    WEFT__HTTP_REFUSED_COUNT
} weft__http_refusal;

/* "busy", "timeout", "client_closed", "too_large"; "" for anything else. */
const char *weft__http_refusal_name(weft__http_refusal why);

/* How a server is set up; every field but @p addr may be zero. */
struct weft__http_server_config {
    /* "HOST:PORT" (weft__http_server_parse_addr()); port 0 picks a free one. */
    const char *addr;
    const struct weft__http_route *routes; /* copied; may be NULL with route_count 0 */
    size_t route_count;
    /* "Name: value" strings added to every response; NULL-terminated, borrowed until
     * weft__http_server_stop(); NULL: none. */
    const char *const *headers;
    /* Connections at once; 0: 1000, fewer when RLIMIT_NOFILE is low. */
    unsigned connection_limit;
    /* Connections at once from one client address; the next ones are closed as they are
     * accepted, and counted (weft__http_server_refused_connections()). 0: no such cap. */
    unsigned per_address_limit;
    /* Seconds a connection may stay silent (headers unfinished, or idle between requests);
     * 0: 3. */
    unsigned idle_timeout_s;
    /* How long weft__http_server_stop() waits for requests in flight to be answered after it
     * stopped accepting connections; 0: it does not wait. */
    unsigned stop_grace_ms;
    /* Who is listening, for the log line when the address cannot be bound; NULL: "http
     * server". */
    const char *name;
};

/* Parse a listen address "HOST:PORT" (IPv4 dotted quad, may be empty for 127.0.0.1; port
 * 0..65535 in digits only) into @p out.
 * @return WEFT_OK, WEFT_EINVAL (NULL or malformed @p addr; @p out zeroed).
 * Ownership: borrows @p addr for the call. */
weft_err weft__http_server_parse_addr(const char *addr, struct sockaddr_in *out);

/* Start a server as @p cfg says and listen at once.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument, a bad address, a route without path or
 * handler), WEFT_EIO (cannot listen there: logged), WEFT_ENOMEM; *out is NULL on failure.
 * Ownership: copies @p cfg and the route table; every route's user_data and @p cfg->headers are
 * borrowed until weft__http_server_stop(); caller owns *out. */
weft_err weft__http_server_start(const struct weft__http_server_config *cfg,
                                 struct weft__http_server **out);

/* The port the server is bound to (the one picked for port 0); 0 for NULL. */
unsigned short weft__http_server_port(const struct weft__http_server *srv);

/* How many requests of route @p route (its index in the table given to start) were refused for
 * @p why; 0 for an index or reason out of range. Any thread. */
uint64_t weft__http_server_refused(const struct weft__http_server *srv,
                                   size_t route,
                                   weft__http_refusal why);

/* How many connections were closed as they were accepted, their address over
 * per_address_limit. Any thread. */
uint64_t weft__http_server_refused_connections(const struct weft__http_server *srv);

/* Stop accepting connections, wait up to stop_grace_ms for the requests in flight to be
 * answered, then close every connection, join the server's threads and free it. Must not be
 * called from a handler. NULL is a no-op. */
void weft__http_server_stop(struct weft__http_server *srv);

#endif /* WEFT_NET_HTTP_SERVER_H */
