/* serve/http.c - `weft serve`'s HTTP server (http.h): the explorer's and ingest's routes on the
 * metrics server's route table, each behind the same access rule. */
#include "http.h"

#include "ui.h"

#include "base/mem.h"
#include "exporters/metrics_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Only this server's own files and API: no inline script or style, no other origin, no
 * framing. Span content is text in the page (the UI never builds markup from it), and this is
 * the second line: a script that got in anyway would not run. */
static const char *const common_headers[] = {
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options: nosniff", "Referrer-Policy: no-referrer", NULL};

struct weft__serve {
    struct weft_metrics_server *server;
    const struct weft__serve_config *cfg;
};

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

static bool
is_authorized(const struct weft__http_request *req, const char *token)
{
    const char *auth = weft__http_header(req, "Authorization");

    if (token == NULL) {
        return true;
    }
    if (auth != NULL && strncmp(auth, "Bearer ", 7) == 0 && token_equal(auth + 7, token)) {
        return true;
    }
    return token_equal(weft__http_cookie(req, "weft_token"), token);
}

static void
text_reply(struct weft__http_reply *reply, unsigned status, const char *text)
{
    reply->status = status;
    reply->content_type = "text/plain; charset=utf-8";
    reply->body = (char *)text;
    reply->len = strlen(text);
}

/* The access rule of the explorer and ingest (http.h): false with the reply set when the
 * request may not go on. */
static bool
admit(const struct weft__serve *srv,
      const struct weft__http_request *req,
      struct weft__http_reply *reply)
{
    const char *token = srv->cfg->token;
    const char *login = weft__http_query(req, "token");

    if (srv->cfg->is_explorer_off) {
        text_reply(reply, 403,
                   "the explorer and ingest are off: this server listens beyond loopback "
                   "without a token (weft serve --token)\n");
        return false;
    }
    if (token != NULL && strcmp(req->url, "/") == 0 && login != NULL && token_equal(login, token)) {
        /* /?token=T from a browser: the token as an HttpOnly cookie, and back to / without it
         * in the address bar (or history). */
        char lines[700];
        snprintf(lines, sizeof(lines),
                 "Set-Cookie: weft_token=%s; Path=/; HttpOnly; SameSite=Strict\nLocation: /",
                 token);
        text_reply(reply, 303, "");
        reply->headers = weft__strdup(lines);
        return false;
    }
    if (!is_authorized(req, token)) {
        text_reply(reply, 401,
                   "a token is needed: Authorization: Bearer TOKEN, or open /?token=TOKEN\n");
        return false;
    }
    return true;
}

static bool
is_get(const struct weft__http_request *req, struct weft__http_reply *reply)
{
    if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0) {
        return true;
    }
    text_reply(reply, 405, "method not allowed\n");
    reply->allow = "GET, HEAD";
    return false;
}

static void
on_asset(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    const struct weft__serve *srv = user_data;
    const struct weft__ui_asset *a = NULL;
    const char *type = NULL;
    bool is_index = strcmp(req->url, "/") == 0 || strcmp(req->url, "/index.html") == 0;
    const char *name = is_index ? "index.html" : req->url + strlen("/assets/");

    if (!is_get(req, reply) || !admit(srv, req, reply)) {
        return;
    }
    if (strchr(name, '/') != NULL || !weft__ui_find(name, &a, &type)) {
        text_reply(reply, 404, "not found\n");
        return;
    }
    reply->status = 200;
    reply->content_type = type;
    reply->body = (char *)a->data;
    reply->len = a->len;
    reply->headers =
        weft__strdup(is_index ? "Cache-Control: no-store" : "Cache-Control: max-age=300");
}

struct arg_ctx {
    const struct weft__http_request *req;
};

static const char *
query_arg(void *ctx, const char *name)
{
    return weft__http_query(((const struct arg_ctx *)ctx)->req, name);
}

static void
on_api(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    const struct weft__serve *srv = user_data;
    struct arg_ctx ctx = {req};
    struct weft__api_request areq = {req->url, query_arg, &ctx};
    struct weft__api_reply ar;

    if (!is_get(req, reply) || !admit(srv, req, reply)) {
        return;
    }
    weft__api_get(&srv->cfg->api, &areq, &ar);
    if (ar.body == NULL) {
        text_reply(reply, 503, "out of memory\n");
        return;
    }
    reply->body = weft__strndup(ar.body, ar.len); /* the server frees with weft__free */
    free(ar.body);
    if (reply->body == NULL) {
        text_reply(reply, 503, "out of memory\n");
        return;
    }
    reply->status = ar.status;
    reply->content_type = "application/json; charset=utf-8";
    reply->len = ar.len;
    reply->free_body = true;
    reply->headers = weft__strdup("Cache-Control: no-store");
}

static void
on_ingest(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    const struct weft__serve *srv = user_data;
    struct weft__http_route inner = weft__ingest_route(srv->cfg->ingest);

    if (admit(srv, req, reply)) {
        inner.handler(inner.user_data, req, reply);
    }
}

weft_err
weft__serve_start(const struct weft__serve_config *cfg, struct weft__serve **out)
{
    struct weft__serve *srv = NULL;
    struct weft__http_route routes[5];
    struct weft__http_server_options o;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (cfg == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        return WEFT_ENOMEM;
    }
    srv->cfg = cfg;
    memset(routes, 0, sizeof(routes));
    routes[n++] = (struct weft__http_route){"/api/v1/", 0, on_api, srv, true};
    routes[n++] = (struct weft__http_route){"/assets/", 0, on_asset, srv, true};
    routes[n++] = (struct weft__http_route){"/", 0, on_asset, srv, false};
    routes[n++] = (struct weft__http_route){"/index.html", 0, on_asset, srv, false};
    if (cfg->ingest != NULL) {
        routes[n++] = (struct weft__http_route){
            WEFT__INGEST_PATH, weft__ingest_max_body(cfg->ingest), on_ingest, srv, false};
    }
    memset(&o, 0, sizeof(o));
    o.source = cfg->metrics;
    o.user_data = cfg->metrics_data;
    o.addr = cfg->addr;
    o.routes = routes;
    o.route_count = n;
    o.headers = common_headers;
    err = weft__metrics_server_start_ex(&o, &srv->server);
    if (err != WEFT_OK) {
        weft__free(srv);
        return err;
    }
    *out = srv;
    return WEFT_OK;
}

unsigned short
weft__serve_port(const struct weft__serve *srv)
{
    return srv != NULL ? weft_metrics_server_port(srv->server) : 0;
}

void
weft__serve_stop(struct weft__serve *srv)
{
    if (srv != NULL) {
        weft_metrics_server_stop(srv->server);
        weft__free(srv);
    }
}
