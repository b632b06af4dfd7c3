/* runtime/mcp_server/serve_http.c - the Streamable HTTP transport of weft's MCP server
 * (include/weft/mcp.h): POST /mcp carries one JSON-RPC message and gets its answer as
 * application/json (202 with no body for a notification); DELETE /mcp ends a session; GET is
 * 405, as the server never starts a stream of its own.
 *
 * Security, as the transport specification asks of local servers: it binds 127.0.0.1 unless
 * told otherwise, refuses requests whose Origin is not a loopback origin (403: a web page must
 * not reach it through DNS rebinding), on a loopback address also those whose Host is not a
 * loopback name or an allowed one (421, base/http_host.h: a browser always sends the page's
 * own name there, even where it sends no Origin), and with a token requires "Authorization:
 * Bearer" (401).
 *
 * Connections: a connection that never finishes its headers must not hold a place for long.
 * The HTTP is the embedded server's (net/http_server.h); this file sets its limits and brings the
 * access rule, the sessions and the messages as the handler of one route, "/" as a prefix.
 * A client address (IP) holds at most PER_IP_LIMIT connections (the server closes the next
 * one at once), and a connection silent for CONNECTION_TIMEOUT_S, headers unfinished or idle
 * between requests, is closed: 64 half-open connections from one address no longer lock every
 * other client out (they held all 64 places for 120 s). The limit is per address, not global,
 * so one client cannot take the others' places; clients behind one proxy or NAT share it.
 * Sessions: initialize issues an Mcp-Session-Id (a random UUID); every later request must carry
 * it (400 without, 404 for one that is unknown, ended or expired). At most max_sessions live at
 * once (the least recently used is ended beyond that) and a session idle for an hour ends.
 *
 * Threads: the server runs a thread per connection, and `lock` makes the messages pass one
 * at a time (the server handles one message at a time anyway; it also guards the sessions).
 * Not one thread for all: a start_run holds the server for as long as its run, and with one
 * thread nothing else would be read meanwhile, so a request sent on an open connection would
 * find its connection past the short timeout when the run ends and be dropped unanswered.
 * With a thread each, a request waits on the lock, and its connection's timeout is not
 * counted while it waits. weft_mcp_http_stop() gives the answers in flight STOP_GRACE_MS, then
 * joins them all.
 */
#include "runtime/mcp_server/server.h"

#include "base/http_host.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"
#include "net/http_server.h"

#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <weft/mcp.h>

#define DEFAULT_ADDR         "127.0.0.1:8765"
#define DEFAULT_MAX_SESSIONS 64
#define MAX_SESSIONS_CAP     4096
#define SESSION_IDLE_NS      (3600ull * 1000000000ull)
#define CONNECTION_LIMIT     256
#define PER_IP_LIMIT         32
#define CONNECTION_TIMEOUT_S 5
#define MAX_ALLOWED_HOSTS    64
#define MCP_PATH             "/mcp"
#define STOP_GRACE_MS        1000 /* for the answers in flight when the server stops */

struct session {
    char id[WEFT_UUID_LEN + 1]; /* "" for a free slot */
    char protocol[WEFT__MCP_PROTOCOL_LEN];
    uint64_t last_ns;
};

struct weft_mcp_http {
    struct weft_mcp_server *server;
    struct weft__http_server *http; /* the embedded server, one "/" route to on_request() */
    char *token;                    /* NULL: none */
    char **allowed_hosts;
    size_t allowed_host_count;
    bool is_loopback;           /* listens on 127.0.0.0/8: the Host rule applies */
    atomic_bool is_host_logged; /* the first Host refusal was logged at WARN */
    pthread_mutex_t lock;       /* one message at a time; the sessions */
    bool is_lock_ready;
    struct session *sessions;
    size_t max_sessions;
    unsigned port;
};

/* ---------------------------------------------------------------------------------------- */
/* Checks                                                                                     */

/* Is @p origin ("scheme://host[:port]") a loopback origin? */
static bool
is_loopback_origin(const char *origin)
{
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    const char *host = NULL;
    size_t len = 0;

    if (strncmp(origin, "http://", 7) == 0) {
        host = origin + 7;
    } else if (strncmp(origin, "https://", 8) == 0) {
        host = origin + 8;
    } else {
        return false; /* "null", file:, extensions, ... */
    }
    len = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":/");
    if (host[len] != '\0' && host[len] != ':' && host[len] != '/') {
        return false;
    }
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        if (strlen(hosts[i]) == len && strncasecmp(host, hosts[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* Compare without leaking where the first difference is. */
static bool
is_same_secret(const char *given, const char *expected)
{
    size_t n = strlen(given);
    size_t m = strlen(expected);
    unsigned char diff = (unsigned char)(n != m);

    for (size_t i = 0; i < m; i++) {
        diff |= (unsigned char)(expected[i] ^ given[i < n ? i : 0]);
    }
    return diff == 0 && n > 0;
}

static bool
is_authorized(const struct weft_mcp_http *http, const struct weft__http_request *req)
{
    const char *auth = NULL;

    if (http->token == NULL) {
        return true;
    }
    auth = weft__http_header(req, "Authorization");
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
        return false;
    }
    auth += 7;
    while (*auth == ' ') {
        auth++;
    }
    return is_same_secret(auth, http->token);
}

/* ---------------------------------------------------------------------------------------- */
/* Sessions                                                                                   */

static struct session *
find_session(struct weft_mcp_http *http, const char *id)
{
    uint64_t now = weft__monotonic_ns();

    for (size_t i = 0; id != NULL && i < http->max_sessions; i++) {
        struct session *s = &http->sessions[i];

        if (s->id[0] == '\0' || strcmp(s->id, id) != 0) {
            continue;
        }
        if (now - s->last_ns > SESSION_IDLE_NS) {
            s->id[0] = '\0'; /* expired */
            return NULL;
        }
        s->last_ns = now;
        return s;
    }
    return NULL;
}

/* A new session: a free slot, else the least recently used one is ended. */
static struct session *
new_session(struct weft_mcp_http *http, const char *protocol)
{
    struct session *slot = &http->sessions[0];

    for (size_t i = 0; i < http->max_sessions; i++) {
        struct session *s = &http->sessions[i];

        if (s->id[0] == '\0') {
            slot = s;
            break;
        }
        if (s->last_ns < slot->last_ns) {
            slot = s;
        }
    }
    if (slot->id[0] != '\0') {
        WEFT_LOG(WEFT_LOG_INFO, "mcp serve: %zu sessions: the least recently used one ended",
                 http->max_sessions);
    }
    weft__uuid_v4(slot->id);
    snprintf(slot->protocol, sizeof(slot->protocol), "%s", protocol);
    slot->last_ns = weft__monotonic_ns();
    return slot;
}

/* ---------------------------------------------------------------------------------------- */
/* Answers                                                                                    */

/* Answer @p status with @p body (copied; NULL: none) of @p type and @p headers ("Name: value"
 * lines, or NULL). Out of memory, the status goes out with an empty body. */
static void
reply_with(struct weft__http_reply *reply,
           unsigned status,
           const char *type,
           const char *body,
           const char *headers)
{
    reply->status = status;
    reply->content_type = type;
    if (body != NULL) {
        reply->body = weft__strdup(body);
        reply->len = reply->body != NULL ? strlen(reply->body) : 0;
        reply->free_body = true;
    }
    if (headers != NULL) {
        reply->headers = weft__strdup(headers);
    }
    if (status == 405) {
        reply->allow = "POST, DELETE";
    }
}

/* An HTTP error with a JSON-RPC error body (id null), as the transport spec suggests. */
static void
reply_error(struct weft__http_reply *reply, unsigned status, int code, const char *message)
{
    char body[512];

    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}", code,
             message);
    reply_with(reply, status, "application/json", body,
               status == 401 ? "WWW-Authenticate: Bearer" : NULL);
}

/* Is @p body an initialize request? Only the method is looked at; the server checks the
 * rest. */
static bool
is_initialize_body(const char *body, size_t len)
{
    json_t *msg = json_loadb(body, len, 0, NULL);
    const char *method = json_string_value(json_object_get(msg, "method"));
    bool is_init = method != NULL && strcmp(method, "initialize") == 0;

    json_decref(msg);
    return is_init;
}

static void
answer_post(struct weft_mcp_http *http,
            const struct weft__http_request *req,
            struct weft__http_reply *reply)
{
    const char *type = weft__http_header(req, "Content-Type");
    const char *sid = weft__http_header(req, "Mcp-Session-Id");
    const char *version = weft__http_header(req, "MCP-Protocol-Version");
    const char *body = req->body != NULL ? req->body : "";
    struct session *session = NULL;
    char negotiated[WEFT__MCP_PROTOCOL_LEN] = "";
    char header[64 + WEFT_UUID_LEN];
    char *response = NULL;
    bool is_init = false;
    weft_err err = WEFT_OK;

    if (req->is_too_large) {
        reply_error(reply, 413, -32600,
                    "Invalid Request: body larger than the server's message cap");
        return;
    }
    if (type != NULL && strncasecmp(type, "application/json", 16) != 0) {
        reply_error(reply, 415, -32600, "Invalid Request: Content-Type must be application/json");
        return;
    }
    is_init = is_initialize_body(body, req->body_len);
    if (!is_init) {
        if (sid == NULL) {
            reply_error(reply, 400, -32600,
                        "Bad Request: Mcp-Session-Id header required (initialize first)");
            return;
        }
        session = find_session(http, sid);
        if (session == NULL) {
            reply_error(reply, 404, -32600, "Session not found: initialize a new session");
            return;
        }
        if (version != NULL && !weft__mcp_server_speaks(version)) {
            reply_error(reply, 400, -32600, "Bad Request: unsupported MCP-Protocol-Version");
            return;
        }
    }
    err =
        weft__mcp_server_handle(http->server, body, req->body_len, &response, negotiated, &is_init);
    if (err != WEFT_OK) {
        reply_error(reply, 500, -32603, "Internal error");
        return;
    }
    if (response == NULL) {
        reply_with(reply, 202, NULL, NULL, NULL);
        return;
    }
    header[0] = '\0';
    if (is_init && negotiated[0] != '\0') {
        session = new_session(http, negotiated);
        snprintf(header, sizeof(header), "Mcp-Session-Id: %s", session->id);
    }
    reply_with(reply, 200, "application/json", response, header[0] != '\0' ? header : NULL);
    weft__free(response);
}

static void
answer_delete(struct weft_mcp_http *http,
              const struct weft__http_request *req,
              struct weft__http_reply *reply)
{
    const char *sid = weft__http_header(req, "Mcp-Session-Id");
    struct session *session = NULL;

    if (sid == NULL) {
        reply_error(reply, 400, -32600, "Bad Request: Mcp-Session-Id header required");
        return;
    }
    session = find_session(http, sid);
    if (session == NULL) {
        reply_error(reply, 404, -32600, "Session not found");
        return;
    }
    session->id[0] = '\0';
    reply_with(reply, 200, NULL, NULL, NULL);
}

/* The access rule, in order: the Host name on a loopback address (421), the Origin (403), the
 * token (401); false with the reply set when the request may not go on. It runs before the
 * path is looked at, so that nothing about the server is told to a request that may not ask. */
static bool
admit(struct weft_mcp_http *http,
      const struct weft__http_request *req,
      struct weft__http_reply *reply)
{
    const char *host = weft__http_header(req, "Host");
    const char *origin = NULL;

    if (http->is_loopback &&
        !weft__http_host_is_allowed(host, (const char *const *)http->allowed_hosts,
                                    http->allowed_host_count)) {
        char clean[80];

        /* The first at WARN, later ones at DEBUG: a page retrying cannot flood the log. */
        WEFT_LOG(atomic_exchange(&http->is_host_logged, true) ? WEFT_LOG_DEBUG : WEFT_LOG_WARN,
                 "mcp serve: a request for Host %s refused (421): not a loopback name "
                 "(--allow-host NAME serves another)",
                 weft__http_host_for_log(host, clean, sizeof(clean)));
        reply_error(reply, 421, -32600,
                    "Misdirected Request: this server answers only to the Host names "
                    "localhost, 127.x.y.z and [::1] (or --allow-host names)");
        return false;
    }
    origin = weft__http_header(req, "Origin");
    if (origin != NULL && !is_loopback_origin(origin)) {
        WEFT_LOG(WEFT_LOG_WARN, "mcp serve: a request from a non-local Origin refused (403)");
        reply_error(reply, 403, -32600, "Forbidden: Origin not allowed");
        return false;
    }
    if (!is_authorized(http, req)) {
        reply_error(reply, 401, -32600, "Unauthorized: a bearer token is required");
        return false;
    }
    return true;
}

/* Every path comes here (the one route is "/" as a prefix): the access rule first, then /mcp. */
static void
on_request(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct weft_mcp_http *http = user_data;
    bool is_post = strcmp(req->method, "POST") == 0;

    if (!admit(http, req, reply)) {
        return;
    }
    if (strcmp(req->url, MCP_PATH) != 0) {
        reply_error(reply, 404, -32600, "Not found: the endpoint is /mcp");
        return;
    }
    if (is_post || strcmp(req->method, "DELETE") == 0) {
        pthread_mutex_lock(&http->lock);
        if (is_post) {
            answer_post(http, req, reply);
        } else {
            answer_delete(http, req, reply);
        }
        pthread_mutex_unlock(&http->lock);
        return;
    }
    reply_error(reply, 405, -32600, "Method not allowed: POST and DELETE only (no server stream)");
}

/* ---------------------------------------------------------------------------------------- */
/* Lifecycle                                                                                  */

static void
free_allowed_hosts(struct weft_mcp_http *http)
{
    for (size_t i = 0; http->allowed_hosts != NULL && i < http->allowed_host_count; i++) {
        weft__free(http->allowed_hosts[i]);
    }
    weft__free(http->allowed_hosts);
    http->allowed_hosts = NULL;
    http->allowed_host_count = 0;
}

/* "HOST:PORT" with an IPv4 host or "localhost" into @p out and, for the server, @p norm (the
 * same with "localhost" as 127.0.0.1). */
static bool
parse_addr(const char *addr, struct sockaddr_in *out, char *norm, size_t norm_len)
{
    const char *colon = strrchr(addr, ':');
    int n = 0;

    if (colon == NULL || colon == addr) {
        return false;
    }
    if ((size_t)(colon - addr) == strlen("localhost") &&
        strncmp(addr, "localhost", (size_t)(colon - addr)) == 0) {
        n = snprintf(norm, norm_len, "127.0.0.1%s", colon);
    } else {
        n = snprintf(norm, norm_len, "%s", addr);
    }
    return n > 0 && (size_t)n < norm_len && weft__http_server_parse_addr(norm, out) == WEFT_OK;
}

/* The embedded server for @p http at @p addr, with the transport's limits. */
static weft_err
start_server(struct weft_mcp_http *http, const char *addr)
{
    struct weft__http_server_config cfg;
    struct weft__http_route route;

    /* One route for every path: the access rule answers before the path is looked at. A body
     * over the message cap reaches on_request() too (is_too_large), for the same reason. */
    memset(&route, 0, sizeof(route));
    route.path = "/";
    route.is_prefix = true;
    route.max_body = weft__mcp_server_max_message(http->server);
    route.handler = on_request;
    route.user_data = http;
    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = addr;
    cfg.routes = &route;
    cfg.route_count = 1;
    cfg.connection_limit = CONNECTION_LIMIT;
    cfg.per_address_limit = PER_IP_LIMIT;
    cfg.idle_timeout_s = CONNECTION_TIMEOUT_S;
    cfg.stop_grace_ms = STOP_GRACE_MS;
    cfg.name = "mcp serve";
    return weft__http_server_start(&cfg, &http->http);
}

weft_err
weft_mcp_http_start(struct weft_mcp_server *server,
                    const struct weft_mcp_http_options *options,
                    struct weft_mcp_http **out)
{
    const char *addr = options != NULL && options->addr != NULL ? options->addr : DEFAULT_ADDR;
    size_t max_sessions = options != NULL ? options->max_sessions : 0;
    struct weft_mcp_http *http = NULL;
    struct sockaddr_in sa;
    char norm[80];
    bool is_ok = false;
    weft_err err = WEFT_ENOMEM;

    if (server == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    is_ok = parse_addr(addr, &sa, norm, sizeof(norm));
    if (!is_ok) {
        return WEFT_EINVAL;
    }
    if (max_sessions == 0) {
        max_sessions = DEFAULT_MAX_SESSIONS;
    }
    if (max_sessions > MAX_SESSIONS_CAP) {
        max_sessions = MAX_SESSIONS_CAP;
    }
    http = weft__calloc(1, sizeof(*http));
    if (http == NULL) {
        goto fail;
    }
    http->server = server;
    http->max_sessions = max_sessions;
    http->sessions = weft__calloc(max_sessions, sizeof(*http->sessions));
    if (http->sessions == NULL) {
        goto fail;
    }
    if (options != NULL && options->token != NULL && options->token[0] != '\0') {
        http->token = weft__strdup(options->token);
        if (http->token == NULL) {
            goto fail;
        }
    }
    if (options != NULL && options->allowed_host_count > 0) {
        if (options->allowed_hosts == NULL || options->allowed_host_count > MAX_ALLOWED_HOSTS) {
            err = WEFT_EINVAL;
            goto fail;
        }
        http->allowed_hosts = weft__calloc(options->allowed_host_count, sizeof(char *));
        if (http->allowed_hosts == NULL) {
            goto fail;
        }
        for (size_t i = 0; i < options->allowed_host_count; i++) {
            if (!weft__http_host_name_ok(options->allowed_hosts[i])) {
                err = WEFT_EINVAL;
                goto fail;
            }
            http->allowed_hosts[i] = weft__strdup(options->allowed_hosts[i]);
            if (http->allowed_hosts[i] == NULL) {
                goto fail;
            }
            http->allowed_host_count = i + 1;
        }
    }
    http->is_loopback = weft__http_ipv4_is_loopback(sa.sin_addr.s_addr);
    if (!http->is_loopback && http->token == NULL) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "mcp serve: listening on %s without a token: anyone who reaches it can read "
                 "the traces and start runs",
                 addr);
    }
    if (pthread_mutex_init(&http->lock, NULL) != 0) {
        goto fail;
    }
    http->is_lock_ready = true;
    err = start_server(http, norm);
    if (err != WEFT_OK) {
        goto fail;
    }
    http->port = weft__http_server_port(http->http);
    *out = http;
    return WEFT_OK;
fail:
    if (http != NULL) {
        if (http->is_lock_ready) {
            pthread_mutex_destroy(&http->lock);
        }
        free_allowed_hosts(http);
        weft__free(http->token);
        weft__free(http->sessions);
    }
    weft__free(http);
    return err;
}

unsigned
weft_mcp_http_port(const struct weft_mcp_http *http)
{
    return http != NULL ? http->port : 0;
}

void
weft_mcp_http_stop(struct weft_mcp_http *http)
{
    if (http == NULL) {
        return;
    }
    weft__http_server_stop(http->http);
    pthread_mutex_destroy(&http->lock);
    if (http->token != NULL) {
        memset(http->token, 0, strlen(http->token));
    }
    weft__free(http->token);
    free_allowed_hosts(http);
    weft__free(http->sessions);
    weft__free(http);
}
