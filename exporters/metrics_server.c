/* exporters/metrics_server.c - a small HTTP server (libmicrohttpd) for Prometheus scrapes:
 * GET /metrics renders the meter (format 0.0.4), GET /healthz answers "ok"; and a table of
 * extra routes (struct weft__http_route: `weft serve` adds POST /v1/traces), each with its
 * handler and body cap. The built-in routes stay in answer_builtin(); the extra routes'
 * bodies are accumulated in answer_route() up to their cap, never beyond, and a request
 * whose Content-Length is over the cap is answered before its body is read.
 *
 * Every request gets an answer. libmicrohttpd runs one thread per connection: a handler that
 * takes seconds (a 15 MB ingest, a trace of 500,000 spans) holds its own thread only, so /healthz
 * and /metrics are answered at once whatever the other connections do (with a pool of two
 * threads, two heavy handlers starved every queued connection until it timed out unanswered).
 * What bounds memory instead is admission: a route may take at most max_active requests at
 * once, and the next one is answered 503 with Retry-After, its body read and dropped as it
 * comes, never kept (OTLP senders retry on 503, so nothing is lost). Requests
 * refused, and those whose connection closed or timed out before they were answered, are
 * counted by route and reason and shown on /metrics after the source's families.
 *
 * A scrape reads the meter through weft_meter_collect(), which never blocks recorders. Slow
 * clients: a connection silent for 3 s is closed, and up to 1000 connections are served (fewer
 * when RLIMIT_NOFILE is low), each on its own thread (a stack is reserved, few pages are
 * touched). The server binds to the address given (loopback unless told otherwise); port 0
 * picks a free port.
 */
#include "metrics_server.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <weft/metrics.h>

/* Why a request on an extra route went unanswered or was refused (render_own). */
typedef enum refusal {
    REFUSED_BUSY,          /* 503 at admission: max_active requests were in */
    REFUSED_TIMEOUT,       /* the connection idled past IDLE_TIMEOUT_S before the answer */
    REFUSED_CLIENT_CLOSED, /* the client closed or broke the connection before the answer */
    REFUSED_COUNT
} refusal;

static const char *const refusal_names[REFUSED_COUNT] = {"busy", "timeout", "client_closed"};

/* The live state of one extra route: requests in, and the refusals counted. */
struct route_state {
    atomic_uint active;
    atomic_uint_fast64_t refused[REFUSED_COUNT];
};

struct weft_metrics_server {
    struct MHD_Daemon *daemon;
    weft_metrics_source_fn source;
    void *source_data;
    unsigned short port;
    struct weft__http_route *routes;
    struct route_state *states; /* one per route */
    size_t route_count;
    const char *const *headers; /* on every response (borrowed) */
};

/* One request on an extra route, from its headers to its completion. */
struct upload {
    const struct weft_metrics_server *srv;
    const struct weft__http_route *route;
    struct route_state *state;
    struct weft__buf body;
    bool is_too_large;
    bool is_busy;     /* refused at admission: its body is dropped, its answer 503 */
    bool has_slot;    /* counted in state->active: released when the request completes */
    bool is_answered; /* a response was queued */
};

#define IDLE_TIMEOUT_S  3    /* seconds a connection may stay silent */
#define MAX_CONNECTIONS 1000 /* at most; less when the descriptor limit is lower */

/* The connection limit: MAX_CONNECTIONS, or what the descriptor limit leaves after a margin
 * for the rest of the process (state database, exporters). */
static unsigned
connection_limit(void)
{
    struct rlimit rl;
    rlim_t limit = MAX_CONNECTIONS;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < MAX_CONNECTIONS + 64) {
        limit = rl.rlim_cur > 96 ? rl.rlim_cur - 64 : 32;
    }
    return (unsigned)limit;
}

static weft_err
render_meter(void *user_data, char **out, size_t *len)
{
    return weft_prometheus_render(user_data, out, len);
}

weft__metrics_route
weft__metrics_server_route(const char *method, const char *url)
{
    if (method == NULL || url == NULL) {
        return WEFT__ROUTE_NOT_FOUND;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        return WEFT__ROUTE_BAD_METHOD;
    }
    if (strcmp(url, "/metrics") == 0) {
        return WEFT__ROUTE_METRICS;
    }
    if (strcmp(url, "/healthz") == 0) {
        return WEFT__ROUTE_HEALTHZ;
    }
    return WEFT__ROUTE_NOT_FOUND;
}

weft_err
weft__metrics_server_parse_addr(const char *addr, struct sockaddr_in *out)
{
    char host[64] = "127.0.0.1";
    const char *colon = NULL;
    long port = 9464;
    char *end = NULL;

    memset(out, 0, sizeof(*out));
    if (addr != NULL) {
        colon = strrchr(addr, ':');
        if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
            return WEFT_EINVAL;
        }
        if (colon > addr) {
            memcpy(host, addr, (size_t)(colon - addr));
            host[colon - addr] = '\0';
        }
        /* Digits only: strtol alone would take " 80", "+80" and an empty port (as 0). */
        if (colon[1] < '0' || colon[1] > '9') {
            return WEFT_EINVAL;
        }
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || port < 0 || port > 65535) {
            return WEFT_EINVAL;
        }
    }
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        memset(out, 0, sizeof(*out));
        return WEFT_EINVAL;
    }
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return WEFT_OK;
}

/* The server's own headers and a reply's "Name: value" lines onto @p resp. */
static void
add_headers(struct MHD_Response *resp, const char *const *common, const char *lines)
{
    for (size_t i = 0; common != NULL && common[i] != NULL; i++) {
        const char *colon = strchr(common[i], ':');
        char name[64];
        if (colon != NULL && (size_t)(colon - common[i]) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(colon - common[i]), common[i]);
            MHD_add_response_header(resp, name, colon + 1 + strspn(colon + 1, " "));
        }
    }
    while (lines != NULL && *lines != '\0') {
        size_t len = strcspn(lines, "\n");
        const char *colon = memchr(lines, ':', len);
        char name[64];
        char value[1024];
        if (colon != NULL && (size_t)(colon - lines) < sizeof(name)) {
            size_t vstart = (size_t)(colon - lines) + 1;
            vstart += strspn(lines + vstart, " ");
            snprintf(name, sizeof(name), "%.*s", (int)(colon - lines), lines);
            snprintf(value, sizeof(value), "%.*s", (int)(len > vstart ? len - vstart : 0),
                     lines + vstart);
            MHD_add_response_header(resp, name, value);
        }
        lines += len;
        lines += *lines == '\n';
    }
}

/* The server's own family, in Prometheus text: written here rather than through a meter,
 * whose page would repeat the source's target_info (a scrape refuses a family twice). */
static weft_err
render_own(const struct weft_metrics_server *srv, struct weft__buf *out)
{
    weft_err err = weft__buf_append_str(
        out, "# HELP weft_http_requests_refused_total Requests refused at once when busy (503 with "
             "Retry-After), or closed by a timeout or by the client before an answer, by route "
             "and reason\n# TYPE weft_http_requests_refused_total counter\n");

    for (size_t i = 0; err == WEFT_OK && i < srv->route_count; i++) {
        for (size_t r = 0; err == WEFT_OK && r < REFUSED_COUNT; r++) {
            /* Route paths are the program's own constants: no quote or backslash to escape. */
            err = weft__buf_printf(
                out, "weft_http_requests_refused_total{reason=\"%s\",route=\"%s\"} %llu\n",
                refusal_names[r], srv->routes[i].path,
                (unsigned long long)atomic_load(&srv->states[i].refused[r]));
        }
    }
    return err;
}

/* What the source rendered, then the server's own family (none without extra routes): one
 * page, so a scrape sees the refusals beside the counters of the routes that refused them. */
static weft_err
render_all(const struct weft_metrics_server *srv, char **out, size_t *len)
{
    struct weft__buf own;
    char *both = NULL;
    weft_err err = srv->source(srv->source_data, out, len);

    if (err != WEFT_OK || srv->route_count == 0) {
        return err;
    }
    weft__buf_init(&own, 0);
    err = render_own(srv, &own);
    /* The source's text is malloc'd (its contract): libmicrohttpd frees the page with free(). */
    both = err == WEFT_OK ? realloc(*out, *len + own.len + 1) : NULL;
    if (both == NULL) {
        weft__buf_cleanup(&own);
        free(*out);
        *out = NULL;
        return err != WEFT_OK ? err : WEFT_ENOMEM;
    }
    memcpy(both + *len, own.data, own.len);
    both[*len + own.len] = '\0';
    *out = both;
    *len += own.len;
    weft__buf_cleanup(&own);
    return WEFT_OK;
}

static enum MHD_Result
answer_builtin(struct weft_metrics_server *srv,
               struct MHD_Connection *conn,
               const char *url,
               const char *method)
{
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret = MHD_NO;
    unsigned status = MHD_HTTP_OK;
    char *text = NULL;
    size_t len = 0;
    const char *type = "text/plain; charset=utf-8";
    weft__metrics_route route = WEFT__ROUTE_NOT_FOUND;

    route = weft__metrics_server_route(method, url);
    if (route == WEFT__ROUTE_BAD_METHOD) {
        static const char msg[] = "method not allowed\n";
        resp =
            MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (route == WEFT__ROUTE_METRICS) {
        if (render_all(srv, &text, &len) != WEFT_OK) {
            static const char msg[] = "cannot render metrics\n";
            resp = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
                                                   MHD_RESPMEM_PERSISTENT);
            status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        } else {
            resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
            type = "text/plain; version=0.0.4; charset=utf-8";
            if (resp == NULL) {
                free(text);
            }
        }
    } else if (route == WEFT__ROUTE_HEALTHZ) {
        static const char msg[] = "ok\n";
        resp =
            MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    } else {
        static const char msg[] = "not found: try /metrics or /healthz\n";
        resp =
            MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    }
    if (resp == NULL) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    add_headers(resp, srv->headers, NULL);
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* Extra routes */

const char *
weft__http_header(const struct weft__http_request *req, const char *name)
{
    if (req == NULL || req->conn == NULL || name == NULL) {
        return NULL;
    }
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *
weft__http_query(const struct weft__http_request *req, const char *name)
{
    if (req == NULL || req->conn == NULL || name == NULL) {
        return NULL;
    }
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *
weft__http_cookie(const struct weft__http_request *req, const char *name)
{
    if (req == NULL || req->conn == NULL || name == NULL) {
        return NULL;
    }
    return MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, name);
}

static const struct weft__http_route *
find_route(const struct weft_metrics_server *srv, const char *url)
{
    for (size_t i = 0; url != NULL && i < srv->route_count; i++) {
        const struct weft__http_route *r = &srv->routes[i];
        if (r->is_prefix ? strncmp(r->path, url, strlen(r->path)) == 0
                         : strcmp(r->path, url) == 0) {
            return r;
        }
    }
    return NULL;
}

/* Run the route's handler on the request as it stands and queue its reply. */
static enum MHD_Result
answer_route(struct MHD_Connection *conn, const char *url, const char *method, struct upload *up)
{
    struct weft__http_request req = {method, url, NULL, 0, up->is_too_large, conn};
    struct weft__http_reply reply;
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret = MHD_NO;

    memset(&reply, 0, sizeof(reply));
    if (!up->is_too_large && up->body.len > 0) {
        req.body = up->body.data;
        req.body_len = up->body.len;
    }
    up->route->handler(up->route->user_data, &req, &reply);
    resp = MHD_create_response_from_buffer(reply.len, reply.len > 0 ? reply.body : (void *)"",
                                           MHD_RESPMEM_MUST_COPY);
    if (reply.free_body) {
        weft__free(reply.body);
    }
    if (resp != NULL) {
        add_headers(resp, up->srv->headers, reply.headers);
    }
    weft__free(reply.headers);
    if (resp == NULL) {
        return MHD_NO;
    }
    if (reply.content_type != NULL) {
        MHD_add_response_header(resp, "Content-Type", reply.content_type);
    }
    if (reply.allow != NULL) {
        MHD_add_response_header(resp, "Allow", reply.allow);
    }
    ret = MHD_queue_response(conn, reply.status != 0 ? reply.status : 500u, resp);
    MHD_destroy_response(resp);
    up->is_answered = ret == MHD_YES;
    return ret;
}

/* Is the declared Content-Length over @p max? (A missing or chunked length is checked as the
 * body arrives.) */
static bool
declared_too_large(struct MHD_Connection *conn, size_t max)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    char *end = NULL;
    unsigned long long n = 0;

    if (cl == NULL || cl[0] < '0' || cl[0] > '9') {
        return false;
    }
    n = strtoull(cl, &end, 10);
    return *end == '\0' && n > (unsigned long long)max;
}

/* libmicrohttpd's own messages go to weft's log handler, never to stderr: the library does not
 * print. What the server could not do (start a thread, allocate, accept) is a warning; the rest
 * is what clients did (closed mid-request, sent a bad header), counted on /metrics already, and
 * only worth a debug line: 150 slow clients must not write 150 warnings. */
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    weft_log_level level = WEFT_LOG_DEBUG;

    (void)cls;
    if (weft__log_fn == NULL || WEFT_LOG_WARN > weft__log_max) {
        return; /* nothing of it would be shown: no formatting */
    }
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    if (strstr(line, "ailed to") != NULL || strstr(line, "nable to") != NULL ||
        strstr(line, "emory") != NULL) {
        level = WEFT_LOG_WARN;
    }
    WEFT_LOG(level, "http server: %s", line);
}

/* Take one of the route's max_active slots; false when all are in use. */
static bool
take_slot(const struct weft__http_route *route, struct route_state *state)
{
    unsigned n = atomic_load(&state->active);

    if (route->max_active == 0) {
        return true;
    }
    do {
        if (n >= route->max_active) {
            return false;
        }
    } while (!atomic_compare_exchange_weak(&state->active, &n, n + 1));
    return true;
}

/* 503 with Retry-After. The body is a google.rpc.Status, as OTLP/HTTP
 * answers errors: protobuf when the request was protobuf, else JSON (code 14, UNAVAILABLE). */
static enum MHD_Result
answer_busy(struct MHD_Connection *conn, struct upload *up)
{
    static const char text[] = "busy: too many requests of this kind at once; retry later";
    static const char json[] = "{\"code\":14,\"message\":\"busy: too many requests of this "
                               "kind at once; retry later\"}";
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    bool is_proto = ct != NULL && (strncasecmp(ct, "application/x-protobuf", 22) == 0 ||
                                   strncasecmp(ct, "application/protobuf", 20) == 0);
    unsigned char proto[sizeof(text) + 4];
    struct MHD_Response *resp = NULL;
    char retry[16];
    enum MHD_Result ret = MHD_NO;

    atomic_fetch_add(&up->state->refused[REFUSED_BUSY], 1);
    if (is_proto) {
        /* Status{code = 14 (field 1, varint), message (field 2, length-delimited)}. */
        proto[0] = 0x08;
        proto[1] = 14;
        proto[2] = 0x12;
        proto[3] = (unsigned char)(sizeof(text) - 1);
        memcpy(proto + 4, text, sizeof(text) - 1);
        resp = MHD_create_response_from_buffer(sizeof(text) - 1 + 4, proto, MHD_RESPMEM_MUST_COPY);
    } else {
        resp =
            MHD_create_response_from_buffer(sizeof(json) - 1, (void *)json, MHD_RESPMEM_PERSISTENT);
    }
    if (resp == NULL) {
        return MHD_NO;
    }
    snprintf(retry, sizeof(retry), "%d", WEFT__HTTP_RETRY_AFTER_S);
    MHD_add_response_header(resp, "Content-Type",
                            is_proto ? "application/x-protobuf" : "application/json");
    MHD_add_response_header(resp, "Retry-After", retry);
    add_headers(resp, up->srv->headers, NULL);
    ret = MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, resp);
    MHD_destroy_response(resp);
    up->is_answered = ret == MHD_YES;
    return ret;
}

/* The upload callbacks of an extra route: the first call (headers only) sets up the upload,
 * takes a slot of the route (or answers 503 at once when none is free) and answers at once
 * when the declared length is over the cap; later calls append the body up to the cap and
 * drop the rest; the last call (no data) runs the handler. */
static enum MHD_Result
route_upload(const struct weft_metrics_server *srv,
             struct MHD_Connection *conn,
             const struct weft__http_route *route,
             const char *url,
             const char *method,
             const char *upload_data,
             size_t *upload_data_size,
             void **con_cls)
{
    struct upload *up = *con_cls;

    if (up == NULL) {
        up = weft__calloc(1, sizeof(*up));
        if (up == NULL) {
            return MHD_NO;
        }
        up->srv = srv;
        up->route = route;
        up->state = &srv->states[route - srv->routes];
        weft__buf_init(&up->body, route->max_body);
        *con_cls = up;
        if (!take_slot(route, up->state)) {
            /* A client waiting for 100 Continue sends no body: tell it now. Any other gets
             * its answer once its body is in (read and dropped as it comes, never kept):
             * answered and closed mid-upload, it would see a reset on its socket, not the
             * 503 that tells it to retry. */
            const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");

            up->is_busy = true;
            if (expect != NULL && strcasecmp(expect, "100-continue") == 0) {
                return answer_busy(conn, up);
            }
            return MHD_YES;
        }
        up->has_slot = route->max_active > 0;
        if (declared_too_large(conn, route->max_body)) {
            up->is_too_large = true;
            return answer_route(conn, url, method, up);
        }
        return MHD_YES;
    }
    if (up->is_answered || (up->is_busy && *upload_data_size > 0)) {
        /* Answered already, or refused: whatever body still comes is dropped. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (up->is_busy) {
        return answer_busy(conn, up);
    }
    if (*upload_data_size > 0) {
        if (!up->is_too_large) {
            /* max_body 0: the route takes no body (a chunked one has no Content-Length to
             * refuse up front, and an uncapped buffer would keep all of it). */
            weft_err err = route->max_body == 0
                               ? WEFT_ELIMIT
                               : weft__buf_append(&up->body, upload_data, *upload_data_size);

            if (err == WEFT_ELIMIT) {
                up->is_too_large = true;
                weft__buf_cleanup(&up->body);
            } else if (err != WEFT_OK) {
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    return answer_route(conn, url, method, up);
}

static void
completed(void *cls,
          struct MHD_Connection *conn,
          void **con_cls,
          enum MHD_RequestTerminationCode code)
{
    struct upload *up = *con_cls;

    (void)cls;
    (void)conn;
    if (up != NULL) {
        /* A request that ends without an answer is counted, so that nothing a client sent
         * vanishes unseen; a server shutting down is not the client's doing. */
        if (!up->is_answered && code == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
            atomic_fetch_add(&up->state->refused[REFUSED_TIMEOUT], 1);
        } else if (!up->is_answered && code != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
                   code != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) {
            atomic_fetch_add(&up->state->refused[REFUSED_CLIENT_CLOSED], 1);
        }
        if (up->has_slot) {
            atomic_fetch_sub(&up->state->active, 1);
        }
        weft__buf_cleanup(&up->body);
        weft__free(up);
        *con_cls = NULL;
    }
}

static enum MHD_Result
answer(void *cls,
       struct MHD_Connection *conn,
       const char *url,
       const char *method,
       const char *version,
       const char *upload_data,
       size_t *upload_data_size,
       void **con_cls)
{
    struct weft_metrics_server *srv = cls;
    const struct weft__http_route *route = find_route(srv, url);

    (void)version;
    if (route != NULL) {
        return route_upload(srv, conn, route, url, method, upload_data, upload_data_size, con_cls);
    }
    /* A body sent to a built-in route is read and ignored. */
    if (*upload_data_size > 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    return answer_builtin(srv, conn, url, method);
}

weft_err
weft_metrics_server_start(struct weft_meter *meter,
                          const char *addr,
                          struct weft_metrics_server **out)
{
    if (meter == NULL) {
        return WEFT_EINVAL;
    }
    return weft_metrics_server_start_source(render_meter, meter, addr, out);
}

weft_err
weft_metrics_server_start_source(weft_metrics_source_fn source,
                                 void *user_data,
                                 const char *addr,
                                 struct weft_metrics_server **out)
{
    return weft__metrics_server_start_routes(source, user_data, addr, NULL, 0, out);
}

static void
server_free(struct weft_metrics_server *srv)
{
    weft__free(srv->states);
    weft__free(srv->routes);
    weft__free(srv);
}

weft_err
weft__metrics_server_start_routes(weft_metrics_source_fn source,
                                  void *user_data,
                                  const char *addr,
                                  const struct weft__http_route *routes,
                                  size_t count,
                                  struct weft_metrics_server **out)
{
    struct weft__http_server_options o = {source, user_data, addr, routes, count, NULL};

    return weft__metrics_server_start_ex(&o, out);
}

weft_err
weft__metrics_server_start_ex(const struct weft__http_server_options *o,
                              struct weft_metrics_server **out)
{
    weft_metrics_source_fn source = o != NULL ? o->source : NULL;
    const char *addr = o != NULL ? o->addr : NULL;
    const struct weft__http_route *routes = o != NULL ? o->routes : NULL;
    size_t count = o != NULL ? o->route_count : 0;
    struct weft_metrics_server *srv = NULL;
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN] = "";
    unsigned port = 0;
    const union MHD_DaemonInfo *info = NULL;

    if (source == NULL || out == NULL || (routes == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    for (size_t i = 0; i < count; i++) {
        if (routes[i].path == NULL || routes[i].handler == NULL) {
            return WEFT_EINVAL;
        }
    }
    if (weft__metrics_server_parse_addr(addr, &sa) != WEFT_OK) {
        return WEFT_EINVAL;
    }
    port = ntohs(sa.sin_port);
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        return WEFT_ENOMEM;
    }
    srv->source = source;
    srv->source_data = o->user_data;
    srv->headers = o->headers;
    if (count > 0) {
        srv->routes = weft__calloc(count, sizeof(*srv->routes));
        srv->states = weft__calloc(count, sizeof(*srv->states));
        if (srv->routes == NULL || srv->states == NULL) {
            server_free(srv);
            return WEFT_ENOMEM;
        }
        memcpy(srv->routes, routes, count * sizeof(*routes));
        srv->route_count = count;
        for (size_t i = 0; i < count; i++) {
            atomic_init(&srv->states[i].active, 0);
            for (size_t r = 0; r < REFUSED_COUNT; r++) {
                atomic_init(&srv->states[i].refused[r], 0);
            }
        }
    }
    /* Slow clients must not take the endpoint down: a connection idle for more than
     * IDLE_TIMEOUT_S between two bytes is closed (a scrape sends its request in one packet),
     * poll() lifts select()'s 1024-descriptor ceiling so the connection limit can be high, and
     * a thread per connection keeps one slow handler from holding any other request (the
     * heavy routes are bounded by their max_active instead). No per-IP limit: Prometheus
     * often shares its address with other clients (one host, NAT, a proxy), and would be the
     * one refused. */
    srv->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, answer, srv, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
        connection_limit(), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_END);
    if (srv->daemon == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR, "metrics server: cannot listen on %s:%u", host, port);
        server_free(srv);
        return WEFT_EIO;
    }
    info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info != NULL ? info->port : (unsigned short)port;
    *out = srv;
    return WEFT_OK;
}

unsigned short
weft_metrics_server_port(const struct weft_metrics_server *server)
{
    return server != NULL ? server->port : 0;
}

void
weft_metrics_server_stop(struct weft_metrics_server *server)
{
    if (server == NULL) {
        return;
    }
    MHD_stop_daemon(server->daemon);
    server_free(server);
}
