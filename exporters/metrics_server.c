/* exporters/metrics_server.c - the Prometheus endpoint: GET /metrics renders the meter (format
 * 0.0.4) and GET /healthz answers "ok", as routes on the embedded HTTP server (net/http_server.c),
 * after the caller's own routes (`weft serve` adds the explorer, its API and POST /v1/traces).
 * The server does the HTTP: threads, body caps, admission, timeouts, the graceful stop; what
 * stays here is the page, and its last family, the server's refusals of the caller's routes.
 *
 * A scrape reads the meter through weft_meter_collect(), which never blocks recorders. The
 * server binds to the address given (loopback unless told otherwise); port 0 picks a free port.
 * No per-address connection cap: Prometheus often shares its address with other clients (one
 * host, NAT, a proxy), and would be the one refused.
 */
#include "metrics_server.h"

#include "base/buf.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>

/* How long a stop waits for the requests in flight (a scrape, an ingest) to be answered. */
#define STOP_GRACE_MS 1000

struct weft_metrics_server {
    struct weft__http_server *http;
    weft_metrics_source_fn source;
    void *source_data;
    struct weft__http_route *routes; /* the server's table: the caller's, then on_builtin */
    size_t extra_count;              /* the caller's routes: the first ones of the table */
};

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
    return weft__http_server_parse_addr(addr != NULL ? addr : "127.0.0.1:9464", out);
}

/* The server's own family, in Prometheus text: written here rather than through a meter, whose
 * page would repeat the source's target_info (a scrape refuses a family twice). */
static weft_err
render_own(const struct weft_metrics_server *ms,
           const struct weft__http_server *http,
           const struct weft__http_route *routes,
           struct weft__buf *out)
{
    static const weft__http_refusal shown[] = {WEFT__HTTP_REFUSED_BUSY, WEFT__HTTP_REFUSED_TIMEOUT,
                                               WEFT__HTTP_REFUSED_CLIENT_CLOSED};
    weft_err err = weft__buf_append_str(
        out, "# HELP weft_http_requests_refused_total Requests refused at once when busy (503 with "
             "Retry-After), or closed by a timeout or by the client before an answer, by route "
             "and reason\n# TYPE weft_http_requests_refused_total counter\n");

    for (size_t i = 0; err == WEFT_OK && i < ms->extra_count; i++) {
        for (size_t r = 0; err == WEFT_OK && r < sizeof(shown) / sizeof(shown[0]); r++) {
            /* Route paths are the program's own constants: no quote or backslash to escape. */
            err = weft__buf_printf(
                out, "weft_http_requests_refused_total{reason=\"%s\",route=\"%s\"} %llu\n",
                weft__http_refusal_name(shown[r]), routes[i].path,
                (unsigned long long)weft__http_server_refused(http, i, shown[r]));
        }
    }
    return err;
}

/* What the source rendered, then the server's own family (none without extra routes), as one
 * weft__malloc'd page, so a scrape sees the refusals beside the counters of the routes that
 * refused them. */
static weft_err
render_all(const struct weft_metrics_server *ms,
           const struct weft__http_server *http,
           const struct weft__http_route *routes,
           struct weft__buf *page)
{
    char *text = NULL;
    size_t len = 0;
    weft_err err = ms->source(ms->source_data, &text, &len);

    if (err != WEFT_OK) {
        return err;
    }
    /* The source's text is malloc'd (its contract). */
    err = weft__buf_append(page, text, len);
    free(text);
    if (err == WEFT_OK && ms->extra_count > 0) {
        err = render_own(ms, http, routes, page);
    }
    return err;
}

static void
text_reply(struct weft__http_reply *reply, unsigned status, const char *text)
{
    reply->status = status;
    reply->content_type = "text/plain; charset=utf-8";
    reply->body = (char *)text;
    reply->len = strlen(text);
}

/* The built-in routes, behind the caller's: /metrics, /healthz, and 405 or 404 for the rest. A
 * body sent to them is ignored. */
static void
on_builtin(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct weft_metrics_server *ms = user_data;
    struct weft__buf page;

    switch (weft__metrics_server_route(req->method, req->url)) {
    case WEFT__ROUTE_BAD_METHOD:
        text_reply(reply, 405, "method not allowed\n");
        return;
    case WEFT__ROUTE_HEALTHZ:
        text_reply(reply, 200, "ok\n");
        return;
    case WEFT__ROUTE_NOT_FOUND:
        text_reply(reply, 404, "not found: try /metrics or /healthz\n");
        return;
    case WEFT__ROUTE_METRICS:
        break;
    }
    weft__buf_init(&page, 0);
    if (render_all(ms, req->server, ms->routes, &page) != WEFT_OK) {
        weft__buf_cleanup(&page);
        text_reply(reply, 500, "cannot render metrics\n");
        return;
    }
    reply->status = 200;
    reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply->body = page.data; /* the buffer's memory comes from weft__malloc */
    reply->len = page.len;
    reply->free_body = true;
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

weft_err
weft__metrics_server_start_routes(weft_metrics_source_fn source,
                                  void *user_data,
                                  const char *addr,
                                  const struct weft__http_route *routes,
                                  size_t count,
                                  struct weft_metrics_server **out)
{
    struct weft__metrics_server_options o = {source, user_data, addr, routes, count, NULL};

    return weft__metrics_server_start_ex(&o, out);
}

weft_err
weft__metrics_server_start_ex(const struct weft__metrics_server_options *o,
                              struct weft_metrics_server **out)
{
    struct weft__http_server_config cfg;
    struct weft_metrics_server *ms = NULL;
    size_t count = o != NULL ? o->route_count : 0;
    weft_err err = WEFT_OK;

    if (o == NULL || o->source == NULL || out == NULL || (o->routes == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    ms = weft__calloc(1, sizeof(*ms));
    if (ms == NULL) {
        return WEFT_ENOMEM;
    }
    ms->routes = weft__calloc(count + 1, sizeof(*ms->routes));
    if (ms->routes == NULL) {
        weft__free(ms);
        return WEFT_ENOMEM;
    }
    ms->source = o->source;
    ms->source_data = o->user_data;
    ms->extra_count = count;
    if (count > 0) {
        memcpy(ms->routes, o->routes, count * sizeof(*o->routes));
    }
    /* Every other path: /metrics, /healthz, 404 and 405 (the caller's paths shadow them). */
    ms->routes[count] = (struct weft__http_route){"/", 0, on_builtin, ms, true, 0, false};
    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = o->addr != NULL ? o->addr : "127.0.0.1:9464";
    cfg.routes = ms->routes;
    cfg.route_count = count + 1;
    cfg.headers = o->headers;
    cfg.stop_grace_ms = STOP_GRACE_MS;
    cfg.name = "metrics server";
    err = weft__http_server_start(&cfg, &ms->http);
    if (err != WEFT_OK) {
        weft__free(ms->routes);
        weft__free(ms);
        return err;
    }
    *out = ms;
    return WEFT_OK;
}

unsigned short
weft_metrics_server_port(const struct weft_metrics_server *server)
{
    return server != NULL ? weft__http_server_port(server->http) : 0;
}

void
weft_metrics_server_stop(struct weft_metrics_server *server)
{
    if (server == NULL) {
        return;
    }
    weft__http_server_stop(server->http);
    weft__free(server->routes);
    weft__free(server);
}
