/* exporters/metrics_server.c - a small HTTP server (libmicrohttpd) for Prometheus scrapes:
 * GET /metrics renders the meter (format 0.0.4), GET /healthz answers "ok"; and a table of
 * extra routes (struct weft__http_route: `weft serve` adds POST /v1/traces), each with its
 * handler and body cap. The built-in routes stay in answer_builtin(); the extra routes'
 * bodies are accumulated in answer_route() up to their cap, never beyond, and a request
 * whose Content-Length is over the cap is answered before its body is read.
 *
 * libmicrohttpd runs a pool of its own threads on epoll; a scrape reads the meter through
 * weft_meter_collect(), which never blocks recorders. Slow clients: a connection silent for
 * 3 s is closed, and up to 1000 connections are served (fewer when RLIMIT_NOFILE is low). The
 * server binds to the address given (loopback unless told otherwise); port 0 picks a free port.
 */
#include "metrics_server.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <weft/metrics.h>

struct weft_metrics_server {
    struct MHD_Daemon *daemon;
    weft_metrics_source_fn source;
    void *source_data;
    unsigned short port;
    struct weft__http_route *routes;
    size_t route_count;
    const char *const *headers; /* on every response (borrowed) */
};

/* One request on an extra route, from its headers to its completion. */
struct upload {
    const struct weft_metrics_server *srv;
    const struct weft__http_route *route;
    struct weft__buf body;
    bool is_too_large;
};

#define IDLE_TIMEOUT_S  3    /* seconds a connection may stay silent */
#define MAX_CONNECTIONS 1000 /* at most; less when the descriptor limit is lower */
#define POOL_THREADS    2

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
        if (srv->source(srv->source_data, &text, &len) != WEFT_OK) {
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

/* The upload callbacks of an extra route: the first call (headers only) sets up the upload
 * and answers at once when the declared length is over the cap; later calls append the body
 * up to the cap and drop the rest; the last call (no data) runs the handler. */
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
        weft__buf_init(&up->body, route->max_body);
        *con_cls = up;
        if (declared_too_large(conn, route->max_body)) {
            up->is_too_large = true;
            return answer_route(conn, url, method, up);
        }
        return MHD_YES;
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
    (void)code;
    if (up != NULL) {
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
        if (srv->routes == NULL) {
            server_free(srv);
            return WEFT_ENOMEM;
        }
        memcpy(srv->routes, routes, count * sizeof(*routes));
        srv->route_count = count;
    }
    /* Slow clients must not take the endpoint down: a connection idle for more than
     * IDLE_TIMEOUT_S between two bytes is closed (a scrape sends its request in one packet),
     * epoll lifts select()'s 1024-descriptor ceiling so the connection limit can be high, and
     * a small thread pool keeps one slow render from holding the others. No per-IP limit:
     * Prometheus often shares its address with other clients (one host, NAT, a proxy), and
     * would be the one refused. */
    srv->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, srv,
        MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit(), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
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
