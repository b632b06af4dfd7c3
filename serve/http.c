/* serve/http.c - `weft serve`'s HTTP server (http.h). */
#include "http.h"

#include "ui.h"

#include "base/log.h"
#include "base/mem.h"
#include "exporters/metrics_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_TIMEOUT_S  30 /* the explorer keeps connections for its polling */
#define POOL_THREADS    4
#define MAX_CONNECTIONS 256

/* Only this server's own files and API: no inline script or style, no other origin, no
 * framing. Span content is text in the page (the UI never builds markup from it), and this is
 * the second line: a script that got in anyway would not run. */
#define CSP                                                                           \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

struct weft__serve {
    struct MHD_Daemon *daemon;
    const struct weft__serve_config *cfg;
    unsigned short port;
};

weft__serve_route
weft__serve_route_of(const char *method, const char *url)
{
    if (method == NULL || url == NULL) {
        return WEFT__SERVE_NOT_FOUND;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        return WEFT__SERVE_BAD_METHOD;
    }
    if (strcmp(url, "/healthz") == 0) {
        return WEFT__SERVE_HEALTHZ;
    }
    if (strcmp(url, "/metrics") == 0) {
        return WEFT__SERVE_METRICS;
    }
    if (strncmp(url, "/api/v1/", 8) == 0) {
        return WEFT__SERVE_API;
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0 ||
        (strncmp(url, "/assets/", 8) == 0 && strchr(url + 8, '/') == NULL)) {
        return WEFT__SERVE_ASSET;
    }
    return WEFT__SERVE_NOT_FOUND;
}

/* Constant-time comparison of a presented token with the expected one. */
static bool
token_equal(const char *got, const char *want)
{
    size_t gl = got != NULL ? strlen(got) : 0;
    size_t wl = strlen(want);
    unsigned char diff = (unsigned char)(gl != wl);

    for (size_t i = 0; i < wl; i++) {
        diff |= (unsigned char)(want[i] ^ (i < gl ? got[i] : 0));
    }
    return got != NULL && diff == 0;
}

/* Does the request carry the token (header or cookie)? Always when none is configured. */
static bool
is_authorized(struct MHD_Connection *conn, const char *token)
{
    const char *auth = NULL;

    if (token == NULL) {
        return true;
    }
    auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (auth != NULL && strncmp(auth, "Bearer ", 7) == 0 && token_equal(auth + 7, token)) {
        return true;
    }
    return token_equal(MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, "weft_token"), token);
}

static const char *
query_arg(void *ctx, const char *name)
{
    return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result
respond(struct MHD_Connection *conn,
        unsigned status,
        const char *type,
        struct MHD_Response *resp,
        bool is_cacheable)
{
    enum MHD_Result ret = MHD_NO;

    if (resp == NULL) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cache-Control", is_cacheable ? "max-age=300" : "no-store");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result
send_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    return respond(
        conn, status, "text/plain; charset=utf-8",
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT), false);
}

static enum MHD_Result
send_asset(struct MHD_Connection *conn, const char *url)
{
    const struct weft__ui_asset *a = NULL;
    const char *type = NULL;
    const char *name =
        strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0 ? "index.html" : url + 8;

    if (!weft__ui_find(name, &a, &type)) {
        return send_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    return respond(conn, MHD_HTTP_OK, type,
                   MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT),
                   strcmp(name, "index.html") != 0);
}

/* /?token=T from a browser: the token as an HttpOnly cookie, and back to / without it in the
 * address bar (or history). */
static enum MHD_Result
send_login(struct MHD_Connection *conn, const char *token)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    char cookie[600];

    if (resp == NULL) {
        return MHD_NO;
    }
    snprintf(cookie, sizeof(cookie), "weft_token=%s; Path=/; HttpOnly; SameSite=Strict", token);
    MHD_add_response_header(resp, "Set-Cookie", cookie);
    MHD_add_response_header(resp, "Location", "/");
    return respond(conn, MHD_HTTP_SEE_OTHER, "text/plain; charset=utf-8", resp, false);
}

static enum MHD_Result
send_api(struct MHD_Connection *conn, const struct weft__serve *srv, const char *url)
{
    struct weft__api_request req = {url, query_arg, conn};
    struct weft__api_reply reply;

    weft__api_get(&srv->cfg->api, &req, &reply);
    if (reply.body == NULL) {
        return send_text(conn, 503, "out of memory\n");
    }
    return respond(conn, reply.status, "application/json; charset=utf-8",
                   MHD_create_response_from_buffer(reply.len, reply.body, MHD_RESPMEM_MUST_FREE),
                   false);
}

static enum MHD_Result
send_metrics(struct MHD_Connection *conn, const struct weft__serve *srv)
{
    char *text = NULL;
    size_t len = 0;

    if (srv->cfg->metrics == NULL ||
        srv->cfg->metrics(srv->cfg->metrics_data, &text, &len) != WEFT_OK) {
        return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics\n");
    }
    return respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                   MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE), false);
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
    const struct weft__serve *srv = cls;
    weft__serve_route route = weft__serve_route_of(method, url);
    const char *login = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "token");

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    if (route == WEFT__SERVE_BAD_METHOD) {
        return send_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    if (route == WEFT__SERVE_HEALTHZ) {
        return send_text(conn, MHD_HTTP_OK, "ok\n");
    }
    if (route == WEFT__SERVE_METRICS) {
        return send_metrics(conn, srv);
    }
    if (route == WEFT__SERVE_NOT_FOUND) {
        return send_text(conn, MHD_HTTP_NOT_FOUND,
                         "not found: the explorer is at /, its API at /api/v1/\n");
    }
    if (srv->cfg->is_explorer_off) {
        return send_text(conn, MHD_HTTP_FORBIDDEN,
                         "the explorer is off: this server listens beyond loopback without a "
                         "token (weft serve --token)\n");
    }
    if (srv->cfg->token != NULL && strcmp(url, "/") == 0 && login != NULL &&
        token_equal(login, srv->cfg->token)) {
        return send_login(conn, srv->cfg->token);
    }
    if (!is_authorized(conn, srv->cfg->token)) {
        return send_text(conn, MHD_HTTP_UNAUTHORIZED,
                         "a token is needed: Authorization: Bearer TOKEN, or open /?token=TOKEN\n");
    }
    return route == WEFT__SERVE_API ? send_api(conn, srv, url) : send_asset(conn, url);
}

weft_err
weft__serve_start(const struct weft__serve_config *cfg, struct weft__serve **out)
{
    struct weft__serve *srv = NULL;
    struct sockaddr_in sa;
    const union MHD_DaemonInfo *info = NULL;

    if (cfg == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (weft__metrics_server_parse_addr(cfg->addr, &sa) != WEFT_OK) {
        return WEFT_EINVAL;
    }
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        return WEFT_ENOMEM;
    }
    srv->cfg = cfg;
    srv->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, srv,
        MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (srv->daemon == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR, "serve: cannot listen on %s", cfg->addr);
        weft__free(srv);
        return WEFT_EIO;
    }
    info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info != NULL ? info->port : ntohs(sa.sin_port);
    *out = srv;
    return WEFT_OK;
}

unsigned short
weft__serve_port(const struct weft__serve *srv)
{
    return srv != NULL ? srv->port : 0;
}

void
weft__serve_stop(struct weft__serve *srv)
{
    if (srv != NULL) {
        MHD_stop_daemon(srv->daemon);
        weft__free(srv);
    }
}
