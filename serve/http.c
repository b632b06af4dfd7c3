/* serve/http.c - `weft serve`'s HTTP server (http.h): the explorer's and ingest's routes on the
 * embedded HTTP server (net/http_server.h), before the metrics server's /metrics and /healthz
 * (exporters/metrics_server.h), each behind the same access rule (admit()): the Host name on a
 * loopback address, then the explorer being off beyond loopback, then the token. Each refusal
 * is counted in an atomic, read at each scrape by weft__serve_observe(), and the first of each
 * kind is logged at WARN (later ones at DEBUG), so a misconfigured client cannot flood the log
 * but the first occurrence says what to change. */
#include "http.h"

#include "events.h"
#include "fork.h"
#include "gzip.h"
#include "rows_cache.h"
#include "ui.h"

#include "base/env.h"
#include "base/http_host.h"
#include "base/log.h"
#include "base/mem.h"
#include "exporters/metrics_server.h"
#include "net/http_server.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <weft/dataset.h>

/* Only this server's own files and API: no inline script or style, no other origin, no
 * framing. Span content is text in the page (the UI never builds markup from it), and this is
 * the second line: a script that got in anyway would not run. */
static const char *const common_headers[] = {
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options: nosniff", "Referrer-Policy: no-referrer", NULL};

/* Why admit() refused a request (weft__serve_observe() names them). */
typedef enum denial {
    DENIED_HOST,  /* 421: a Host name that is neither loopback nor allowed, on loopback */
    DENIED_TOKEN, /* 401: no token, or a wrong one */
    DENIED_OFF,   /* 403: beyond loopback without a token */
    DENIED_COUNT
} denial;

static const char *const denial_names[DENIED_COUNT] = {"host", "token", "off"};

struct weft__serve {
    struct weft_metrics_server *server;
    const struct weft__serve_config *cfg;
    bool is_loopback; /* listens on 127.0.0.0/8: the Host rule applies */
    atomic_uint_fast64_t denied[DENIED_COUNT];
    atomic_bool is_logged[DENIED_COUNT];
    struct weft__serve_events *events; /* GET /api/v1/events */
    struct weft__serve_fork *fork;     /* POST /api/v1/runs/ID/fork; NULL: none */
    struct weft__api_config api;       /* cfg->api with the rows cache */
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

/* Count a refusal of kind @p why; the first of its kind is logged at WARN with @p what (no
 * request data but the Host name, which says what to pass to --allow-host). */
static void
deny(struct weft__serve *srv, denial why, const char *what, const char *host)
{
    char clean[80];
    bool is_first = false;

    atomic_fetch_add(&srv->denied[why], 1);
    is_first = !atomic_exchange(&srv->is_logged[why], true);
    WEFT_LOG(is_first ? WEFT_LOG_WARN : WEFT_LOG_DEBUG, "serve: %s (Host %s)%s", what,
             weft__http_host_for_log(host, clean, sizeof(clean)),
             is_first ? "; later ones are logged at DEBUG" : "");
}

/* The access rule of the explorer and ingest (http.h): false with the reply set when the
 * request may not go on. */
static bool
admit(struct weft__serve *srv, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    const char *token = srv->cfg->token;
    const char *login = weft__http_query(req, "token");
    const char *host = weft__http_header(req, "Host");

    /* First: on loopback without a token (the usual case) this is all that keeps a web page
     * out, and a name the user did not allow is refused whatever else the request carries. A
     * request without Host (HTTP/1.0 from a raw socket) is refused too: no browser sends one,
     * so it costs nothing and leaves no gap. */
    if (srv->is_loopback &&
        !weft__http_host_is_allowed(host, srv->cfg->allow_hosts, srv->cfg->allow_host_count)) {
        deny(srv, DENIED_HOST, "a request for a Host name that is not loopback refused (421)",
             host);
        text_reply(reply, 421,
                   "misdirected request: this server listens on loopback and answers only to "
                   "the Host names localhost, 127.x.y.z and [::1] (a guard against DNS "
                   "rebinding): open it as http://127.0.0.1:<port>/ or "
                   "http://localhost:<port>/, or start it with weft serve --allow-host NAME\n");
        return false;
    }
    if (srv->cfg->is_explorer_off) {
        deny(srv, DENIED_OFF,
             "a request to the explorer or ingest refused: off beyond loopback without a token "
             "(403)",
             host);
        text_reply(reply, 403,
                   "the explorer and ingest are off: this server listens beyond loopback "
                   "without a token (weft serve --token-file PATH)\n");
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
        deny(srv, DENIED_TOKEN, "a request without the right token refused (401)", host);
        text_reply(reply, 401,
                   "a token is needed: Authorization: Bearer TOKEN, or open /?token=TOKEN\n");
        return false;
    }
    return true;
}

/* Send @p reply's body gzip-compressed when the request accepts it and the body is worth it
 * (gzip.h), with Content-Encoding; Vary: Accept-Encoding either way, so that a cache between
 * the browser and the server keeps the two apart. @p headers: the reply's other header lines
 * (static). Done here, once for every answer of the explorer and its API, rather than per
 * route. A body that does not shrink, or a failure to compress, is sent as it is. */
static void
encode(const struct weft__http_request *req,
       struct weft__http_reply *reply,
       bool is_numeric,
       const char *headers)
{
    char lines[256];
    char *packed = NULL;
    size_t packed_len = 0;
    bool is_gzip =
        reply->len >= WEFT__GZIP_MIN_BYTES &&
        weft__gzip_is_accepted(weft__http_header(req, "Accept-Encoding")) &&
        weft__gzip(reply->body, reply->len, is_numeric, &packed, &packed_len) == WEFT_OK &&
        packed_len < reply->len;

    if (is_gzip) {
        if (reply->free_body) {
            weft__free(reply->body);
        }
        reply->body = packed;
        reply->len = packed_len;
        reply->free_body = true;
    } else {
        weft__free(packed);
    }
    snprintf(lines, sizeof(lines), "%s\nVary: Accept-Encoding%s", headers,
             is_gzip ? "\nContent-Encoding: gzip" : "");
    reply->headers = weft__strdup(lines);
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
    struct weft__serve *srv = user_data;
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
    encode(req, reply, false, is_index ? "Cache-Control: no-store" : "Cache-Control: max-age=300");
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
json_reply(struct weft__http_reply *reply, int status, char *json)
{
    if (json == NULL) {
        text_reply(reply, 503, "out of memory\n");
        return;
    }
    reply->body = weft__strdup(json);
    free(json);
    if (reply->body == NULL) {
        text_reply(reply, 503, "out of memory\n");
        return;
    }
    reply->status = status;
    reply->content_type = "application/json; charset=utf-8";
    reply->len = strlen(reply->body);
    reply->free_body = true;
    reply->headers = weft__strdup("Cache-Control: no-store");
}

static void
json_error(struct weft__http_reply *reply, int status, const char *text)
{
    json_t *o = json_pack("{s:{s:i, s:s}}", "error", "status", status, "message", text);

    json_reply(reply, status, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

/* Whether the request says Content-Type: application/json (parameters allowed). */
static bool
is_json_body(const struct weft__http_request *req)
{
    const char *type = weft__http_header(req, "Content-Type");

    return type != NULL && strncasecmp(type, "application/json", 16) == 0 &&
           (type[16] == '\0' || type[16] == ';' || type[16] == ' ');
}

/* What every writing route (fork, dataset add) checks once admitted: that it is on (@p is_on;
 * else 403 with @p off_text), a JSON body (415) of at most @p max_body bytes and within the
 * server's bound (413). False with the reply set when any fails. */
static bool
accept_write(const struct weft__http_request *req,
             bool is_on,
             const char *off_text,
             size_t max_body,
             struct weft__http_reply *reply)
{
    if (!is_on) {
        json_error(reply, 403, off_text);
    } else if (!is_json_body(req)) {
        json_error(reply, 415, "expected Content-Type: application/json");
    } else if (req->is_too_large || req->body_len > max_body) {
        json_error(reply, 413, "the body is too large");
    } else {
        return true;
    }
    return false;
}

/* The run reference of "/api/v1/runs/REF/fork" into @p out; false for any other path. */
static bool
fork_path(const char *url, char *out, size_t out_len)
{
    const char *ref = url + strlen("/api/v1/runs/");
    const char *slash = strncmp(url, "/api/v1/runs/", 13) == 0 ? strchr(ref, '/') : NULL;

    if (slash == NULL || strcmp(slash, "/fork") != 0 || slash == ref ||
        (size_t)(slash - ref) >= out_len) {
        return false;
    }
    snprintf(out, out_len, "%.*s", (int)(slash - ref), ref);
    return true;
}

/* POST /api/v1/runs/REF/fork (http.h, serve/fork.h); admitted already. */
static void
on_fork(struct weft__serve *srv,
        const struct weft__http_request *req,
        const char *ref,
        struct weft__http_reply *reply)
{
    char text[700];
    int status = 500;

    if (!accept_write(req, srv->cfg->token != NULL && srv->fork != NULL,
                      "forking from the explorer needs its token: start weft serve with --token, "
                      "--token-file or WEFT_SERVE_TOKEN",
                      SIZE_MAX, reply)) {
        return;
    }
    status = weft__serve_fork_post(srv->fork, ref, req->body, req->body_len, text, sizeof(text));
    if (status == 202) {
        json_t *o = json_pack("{s:s}", "run_id", text);
        json_reply(reply, status, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
        json_decref(o);
    } else {
        json_error(reply, status, text);
    }
}

/* The dataset name of "/api/v1/datasets/NAME/items" into @p out; false for any other path. */
static bool
dataset_items_path(const char *url, char *out, size_t out_len)
{
    const char *name = url + strlen("/api/v1/datasets/");
    const char *slash = strncmp(url, "/api/v1/datasets/", 17) == 0 ? strchr(name, '/') : NULL;

    if (slash == NULL || strcmp(slash, "/items") != 0 || slash == name ||
        (size_t)(slash - name) >= out_len) {
        return false;
    }
    snprintf(out, out_len, "%.*s", (int)(slash - name), name);
    return true;
}

/* POST /api/v1/datasets/NAME/items (api.h, serve/api_eval.c); admitted already. Off without a
 * token, as the fork route: the page's "Add to dataset" writes to the state store. */
static void
on_dataset_add(struct weft__serve *srv,
               const struct weft__http_request *req,
               const char *name,
               struct weft__http_reply *reply)
{
    struct weft__api_reply ar;

    if (!accept_write(req, srv->cfg->token != NULL,
                      "adding to a dataset from the explorer needs its token: start weft serve "
                      "with --token, --token-file or WEFT_SERVE_TOKEN (or use weft dataset add)",
                      WEFT__API_DATASET_ADD_MAX_BODY, reply)) {
        return;
    }
    weft__api_dataset_add(&srv->api, name, req->body, req->body_len, &ar);
    json_reply(reply, (int)ar.status, ar.body); /* takes ar.body; NULL: 503 */
}

static void
on_api(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct weft__serve *srv = user_data;
    struct arg_ctx ctx = {req};
    struct weft__api_request areq = {req->url, query_arg, &ctx};
    struct weft__api_reply ar;
    char ref[80];
    char name[WEFT_DATASET_NAME_MAX + 1];

    if (strcmp(req->method, "POST") == 0 && fork_path(req->url, ref, sizeof(ref))) {
        if (admit(srv, req, reply)) {
            on_fork(srv, req, ref, reply);
        }
        return;
    }
    if (strcmp(req->method, "POST") == 0 && dataset_items_path(req->url, name, sizeof(name))) {
        if (admit(srv, req, reply)) {
            on_dataset_add(srv, req, name, reply);
        }
        return;
    }
    if (!is_get(req, reply) || !admit(srv, req, reply)) {
        return;
    }
    if (strcmp(req->url, "/api/v1/session") == 0) {
        /* What the page may do: fork and add to a dataset only with the token (it got here
         * with it). */
        json_t *o =
            json_pack("{s:b, s:b}", "can_fork", srv->cfg->token != NULL && srv->fork != NULL,
                      "can_add_to_dataset", srv->cfg->token != NULL);
        json_reply(reply, 200, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
        json_decref(o);
        return;
    }
    weft__api_get(&srv->api, &areq, &ar);
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
    encode(req, reply, ar.is_numeric, "Cache-Control: no-store");
}

/* GET /api/v1/events: the runs as Server-Sent Events (events.h), behind the same access rule
 * as the rest of the API; at most WEFT__EVENTS_MAX_CLIENTS at once (the route's admission). */
static void
on_events(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct weft__serve *srv = user_data;

    if (!is_get(req, reply) || !admit(srv, req, reply)) {
        return;
    }
    weft__serve_events_reply(srv->events, reply);
}

static void
on_ingest(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct weft__serve *srv = user_data;
    struct weft__http_route inner = weft__ingest_route(srv->cfg->ingest);

    if (admit(srv, req, reply)) {
        inner.handler(inner.user_data, req, reply);
    }
}

/* The rows cache weft__serve_start() made (not one the caller gave in cfg->api). */
static void
rows_cache_drop(struct weft__serve *srv, const struct weft__serve_config *cfg)
{
    if (srv->api.rows_cache != cfg->api.rows_cache) {
        weft__rows_cache_free(srv->api.rows_cache);
    }
    srv->api.rows_cache = NULL;
}

weft_err
weft__serve_start(const struct weft__serve_config *cfg, struct weft__serve **out)
{
    struct weft__serve *srv = NULL;
    struct weft__http_route routes[6];
    struct weft__metrics_server_options o;
    struct sockaddr_in sa;
    size_t n = 0;
    uint64_t rows_mb = 0;
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
    if (weft__metrics_server_parse_addr(cfg->addr, &sa) != WEFT_OK) {
        weft__free(srv);
        return WEFT_EINVAL;
    }
    srv->is_loopback = weft__http_ipv4_is_loopback(sa.sin_addr.s_addr);
    srv->api = cfg->api;
    /* WEFT_SERVE_ROWS_CACHE_MB: view=rows's outlines kept between a page's parts (0: none). */
    rows_mb = weft__env_u64("WEFT_SERVE_ROWS_CACHE_MB", WEFT__ROWS_CACHE_MB, 0, 1u << 20);
    if (srv->api.rows_cache == NULL && rows_mb > 0 &&
        weft__rows_cache_new((size_t)rows_mb << 20, &srv->api.rows_cache) != WEFT_OK) {
        weft__free(srv);
        return WEFT_ENOMEM;
    }
    err = weft__serve_events_new(cfg->api.state_path, cfg->events_poll_ms, cfg->events_heartbeat_ms,
                                 &srv->events);
    if (err == WEFT_OK && cfg->fork_exe != NULL) {
        err = weft__serve_fork_new(cfg->fork_exe, cfg->api.state_path, cfg->api.store_path,
                                   &srv->fork);
        if (err != WEFT_OK) {
            weft__serve_events_free(srv->events);
        }
    }
    if (err != WEFT_OK) {
        rows_cache_drop(srv, cfg);
        weft__free(srv);
        return err;
    }
    memset(routes, 0, sizeof(routes));
    /* Before /api/v1/: a stream holds its slot for as long as the client listens, so it has
     * admission of its own and never takes one of the API's. */
    routes[n++] = (struct weft__http_route){"/api/v1/events",         0,    on_events, srv, false,
                                            WEFT__EVENTS_MAX_CLIENTS, false};
    /* The API and ingest are the heavy routes: each takes at most its max_active requests at
     * once (the next get 503 with Retry-After), which bounds their memory; the UI's files,
     * /metrics and /healthz are never held up by them (net/http_server.h). */
    routes[n++] = (struct weft__http_route){"/api/v1/", WEFT__SERVE_FORK_MAX_BODY, on_api, srv,
                                            true,       WEFT__API_MAX_ACTIVE,      true};
    routes[n++] = (struct weft__http_route){"/assets/", 0, on_asset, srv, true, 0, false};
    routes[n++] = (struct weft__http_route){"/", 0, on_asset, srv, false, 0, false};
    routes[n++] = (struct weft__http_route){"/index.html", 0, on_asset, srv, false, 0, false};
    if (cfg->ingest != NULL) {
        routes[n++] = (struct weft__http_route){WEFT__INGEST_PATH,
                                                weft__ingest_max_body(cfg->ingest),
                                                on_ingest,
                                                srv,
                                                false,
                                                WEFT__INGEST_MAX_ACTIVE,
                                                false};
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
        weft__serve_fork_free(srv->fork);
        weft__serve_events_free(srv->events);
        rows_cache_drop(srv, cfg);
        weft__free(srv);
        return err;
    }
    *out = srv;
    return WEFT_OK;
}

/* weft.serve.rows_cache{event=hit|miss|eviction} and weft.serve.rows_cache_bytes. */
static weft_err
observe_rows_cache(struct weft__rows_cache *cache, struct weft_meter *meter)
{
    static const char *const events[] = {"hit", "miss", "eviction"};
    struct weft__rows_cache_stats st;
    struct weft_instrument *count = NULL;
    struct weft_instrument *bytes = NULL;
    weft_err err = weft_meter_instrument(
        meter, WEFT_INSTRUMENT_COUNTER, "weft.serve.rows_cache", "{request}",
        "The explorer's trace rows (view=rows) by how they were answered: hit (the outline kept "
        "from an earlier part), miss (read from the span store); eviction: outlines dropped "
        "to stay under WEFT_SERVE_ROWS_CACHE_MB",
        NULL, 0, &count);

    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.serve.rows_cache_bytes",
                                    "By", "What the kept outlines hold, about", NULL, 0, &bytes);
    }
    weft__rows_cache_stats(cache, &st);
    for (size_t i = 0; err == WEFT_OK && i < 3; i++) {
        struct weft_attr attr = weft_attr_str("event", events[i]);
        uint64_t n = i == 0 ? st.hits : i == 1 ? st.misses : st.evictions;
        err = weft_counter_add(count, (double)n, &attr, 1);
    }
    return err == WEFT_OK ? weft_gauge_set(bytes, (double)st.bytes, NULL, 0) : err;
}

weft_err
weft__serve_observe(const struct weft__serve *srv, struct weft_meter *meter)
{
    struct weft_instrument *denied = NULL;
    weft_err err = WEFT_OK;

    if (meter == NULL) {
        return WEFT_EINVAL;
    }
    err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.serve.access.denied",
                                "{request}",
                                "Requests to the explorer, its API and ingest refused by the "
                                "access rule, by reason: host (421), token (401), off (403)",
                                NULL, 0, &denied);
    for (size_t i = 0; err == WEFT_OK && i < DENIED_COUNT; i++) {
        struct weft_attr attr = weft_attr_str("reason", denial_names[i]);
        uint64_t n = srv != NULL ? atomic_load(&srv->denied[i]) : 0;
        err = weft_counter_add(denied, (double)n, &attr, 1);
    }
    return err == WEFT_OK ? observe_rows_cache(srv != NULL ? srv->api.rows_cache : NULL, meter)
                          : err;
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
        /* The streams first: the server waits for its requests, and a stream ends only when
         * told to. */
        weft__serve_events_stop(srv->events);
        weft_metrics_server_stop(srv->server);
        weft__serve_fork_free(srv->fork); /* after the requests: a fork still running stops */
        weft__serve_events_free(srv->events);
        rows_cache_drop(srv, srv->cfg);
        weft__free(srv);
    }
}
