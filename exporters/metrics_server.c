/* exporters/metrics_server.c - a small HTTP server (libmicrohttpd) for Prometheus scrapes:
 * GET /metrics renders the meter (format 0.0.4), GET /healthz answers "ok".
 *
 * libmicrohttpd runs a pool of its own threads on epoll; a scrape reads the meter through
 * weft_meter_collect(), which never blocks recorders. Slow clients: a connection silent for
 * 3 s is closed, and up to 1000 connections are served (fewer when RLIMIT_NOFILE is low). The
 * server binds to the address given (loopback unless told otherwise); port 0 picks a free port.
 */
#include "metrics_server.h"

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
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret = MHD_NO;
    unsigned status = MHD_HTTP_OK;
    char *text = NULL;
    size_t len = 0;
    const char *type = "text/plain; charset=utf-8";
    weft__metrics_route route = WEFT__ROUTE_NOT_FOUND;

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
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
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
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
    struct weft_metrics_server *srv = NULL;
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN] = "";
    unsigned port = 0;
    const union MHD_DaemonInfo *info = NULL;

    if (source == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
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
    srv->source_data = user_data;
    /* Slow clients must not take the endpoint down: a connection idle for more than
     * IDLE_TIMEOUT_S between two bytes is closed (a scrape sends its request in one packet),
     * epoll lifts select()'s 1024-descriptor ceiling so the connection limit can be high, and
     * a small thread pool keeps one slow render from holding the others. No per-IP limit:
     * Prometheus often shares its address with other clients (one host, NAT, a proxy), and
     * would be the one refused. */
    srv->daemon =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer,
                         srv, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_THREAD_POOL_SIZE,
                         (unsigned)POOL_THREADS, MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (srv->daemon == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR, "metrics server: cannot listen on %s:%u", host, port);
        weft__free(srv);
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
    weft__free(server);
}
