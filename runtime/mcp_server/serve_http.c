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
 * A client address (IP) holds at most PER_IP_LIMIT connections (libmicrohttpd closes the next
 * one at once), and a connection silent for CONNECTION_TIMEOUT_S, headers unfinished or idle
 * between requests, is closed: 64 half-open connections from one address no longer lock every
 * other client out (they held all 64 places for 120 s). The limit is per address, not global,
 * so one client cannot take the others' places; clients behind one proxy or NAT share it.
 * Sessions: initialize issues an Mcp-Session-Id (a random UUID); every later request must carry
 * it (400 without, 404 for one that is unknown, ended or expired). At most max_sessions live at
 * once (the least recently used is ended beyond that) and a session idle for an hour ends.
 *
 * Threads: libmicrohttpd runs a thread per connection, and `lock` makes the messages pass one
 * at a time (the server handles one message at a time anyway; it also guards the sessions).
 * Not one thread for all: a start_run holds the server for as long as its run, and with one
 * thread nothing else would be read meanwhile, so a request sent on an open connection would
 * find its connection past the short timeout when the run ends and be dropped unanswered.
 * With a thread each, a request waits on the lock, and its connection's timeout is not
 * counted while it waits. weft_mcp_http_stop() joins them all.
 */
#include "runtime/mcp_server/server.h"

#include "base/buf.h"
#include "base/http_host.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

struct session {
    char id[WEFT_UUID_LEN + 1]; /* "" for a free slot */
    char protocol[WEFT__MCP_PROTOCOL_LEN];
    uint64_t last_ns;
};

struct weft_mcp_http {
    struct weft_mcp_server *server;
    struct MHD_Daemon *daemon;
    char *token; /* NULL: none */
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

/* One request's body as it arrives. */
struct request {
    struct weft__buf body;
    bool is_too_big;
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
is_authorized(const struct weft_mcp_http *http, struct MHD_Connection *conn)
{
    const char *auth = NULL;

    if (http->token == NULL) {
        return true;
    }
    auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
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

static enum MHD_Result
reply(struct MHD_Connection *conn,
      unsigned status,
      const char *type,
      char *body,
      const char *session_id)
{
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret = MHD_NO;
    size_t len = body != NULL ? strlen(body) : 0;

    /* MHD frees the body with free(); ours comes from weft__malloc, so hand it a copy. */
    resp = MHD_create_response_from_buffer(len, body != NULL ? body : (void *)"",
                                           MHD_RESPMEM_MUST_COPY);
    if (resp == NULL) {
        return MHD_NO;
    }
    if (type != NULL) {
        MHD_add_response_header(resp, "Content-Type", type);
    }
    if (session_id != NULL) {
        MHD_add_response_header(resp, "Mcp-Session-Id", session_id);
    }
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
        MHD_add_response_header(resp, "Allow", "POST, DELETE");
    }
    if (status == MHD_HTTP_UNAUTHORIZED) {
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    }
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* An HTTP error with a JSON-RPC error body (id null), as the transport spec suggests. */
static enum MHD_Result
reply_error(struct MHD_Connection *conn, unsigned status, int code, const char *message)
{
    char body[512];

    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}", code,
             message);
    return reply(conn, status, "application/json", body, NULL);
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

static enum MHD_Result
answer_post(struct weft_mcp_http *http, struct MHD_Connection *conn, struct request *req)
{
    const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id");
    const char *version =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "MCP-Protocol-Version");
    const char *body = req->body.data != NULL ? req->body.data : "";
    struct session *session = NULL;
    char negotiated[WEFT__MCP_PROTOCOL_LEN] = "";
    char *response = NULL;
    bool is_init = false;
    enum MHD_Result ret = MHD_NO;
    weft_err err = WEFT_OK;

    if (req->is_too_big) {
        return reply_error(conn, 413, -32600,
                           "Invalid Request: body larger than the server's message cap");
    }
    if (type != NULL && strncasecmp(type, "application/json", 16) != 0) {
        return reply_error(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32600,
                           "Invalid Request: Content-Type must be application/json");
    }
    is_init = is_initialize_body(body, req->body.len);
    if (!is_init) {
        if (sid == NULL) {
            return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32600,
                               "Bad Request: Mcp-Session-Id header required (initialize first)");
        }
        session = find_session(http, sid);
        if (session == NULL) {
            return reply_error(conn, MHD_HTTP_NOT_FOUND, -32600,
                               "Session not found: initialize a new session");
        }
        if (version != NULL && !weft__mcp_server_speaks(version)) {
            return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32600,
                               "Bad Request: unsupported MCP-Protocol-Version");
        }
    }
    err =
        weft__mcp_server_handle(http->server, body, req->body.len, &response, negotiated, &is_init);
    if (err != WEFT_OK) {
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, "Internal error");
    }
    if (response == NULL) {
        return reply(conn, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
    }
    if (is_init && negotiated[0] != '\0') {
        session = new_session(http, negotiated);
    }
    ret = reply(conn, MHD_HTTP_OK, "application/json", response,
                is_init && negotiated[0] != '\0' ? session->id : NULL);
    weft__free(response);
    return ret;
}

static enum MHD_Result
answer_delete(struct weft_mcp_http *http, struct MHD_Connection *conn)
{
    const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id");
    struct session *session = NULL;

    if (sid == NULL) {
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32600,
                           "Bad Request: Mcp-Session-Id header required");
    }
    session = find_session(http, sid);
    if (session == NULL) {
        return reply_error(conn, MHD_HTTP_NOT_FOUND, -32600, "Session not found");
    }
    session->id[0] = '\0';
    return reply(conn, MHD_HTTP_OK, NULL, NULL, NULL);
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
    struct weft_mcp_http *http = cls;
    struct request *req = *con_cls;
    const char *origin = NULL;
    const char *host = NULL;

    (void)version;
    if (req == NULL) {
        req = weft__calloc(1, sizeof(*req));
        if (req == NULL) {
            return MHD_NO;
        }
        weft__buf_init(&req->body, weft__mcp_server_max_message(http->server));
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (!req->is_too_big) {
            weft_err err = weft__buf_append(&req->body, upload_data, *upload_data_size);

            if (err == WEFT_ELIMIT) {
                req->is_too_big = true;
                weft__buf_cleanup(&req->body);
            } else if (err != WEFT_OK) {
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (http->is_loopback &&
        !weft__http_host_is_allowed(host, (const char *const *)http->allowed_hosts,
                                    http->allowed_host_count)) {
        char clean[80];

        /* The first at WARN, later ones at DEBUG: a page retrying cannot flood the log. */
        WEFT_LOG(atomic_exchange(&http->is_host_logged, true) ? WEFT_LOG_DEBUG : WEFT_LOG_WARN,
                 "mcp serve: a request for Host %s refused (421): not a loopback name "
                 "(--allow-host NAME serves another)",
                 weft__http_host_for_log(host, clean, sizeof(clean)));
        return reply_error(conn, MHD_HTTP_MISDIRECTED_REQUEST, -32600,
                           "Misdirected Request: this server answers only to the Host names "
                           "localhost, 127.x.y.z and [::1] (or --allow-host names)");
    }
    origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (origin != NULL && !is_loopback_origin(origin)) {
        WEFT_LOG(WEFT_LOG_WARN, "mcp serve: a request from a non-local Origin refused (403)");
        return reply_error(conn, MHD_HTTP_FORBIDDEN, -32600, "Forbidden: Origin not allowed");
    }
    if (!is_authorized(http, conn)) {
        return reply_error(conn, MHD_HTTP_UNAUTHORIZED, -32600,
                           "Unauthorized: a bearer token is required");
    }
    if (strcmp(url, MCP_PATH) != 0) {
        return reply_error(conn, MHD_HTTP_NOT_FOUND, -32600, "Not found: the endpoint is /mcp");
    }
    if (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0) {
        enum MHD_Result ret = MHD_NO;

        pthread_mutex_lock(&http->lock);
        ret = method[0] == 'P' ? answer_post(http, conn, req) : answer_delete(http, conn);
        pthread_mutex_unlock(&http->lock);
        return ret;
    }
    return reply_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, -32600,
                       "Method not allowed: POST and DELETE only (no server stream)");
}

static void
completed(void *cls,
          struct MHD_Connection *conn,
          void **con_cls,
          enum MHD_RequestTerminationCode code)
{
    struct request *req = *con_cls;

    (void)cls;
    (void)conn;
    (void)code;
    if (req != NULL) {
        weft__buf_cleanup(&req->body);
        weft__free(req);
        *con_cls = NULL;
    }
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

/* "HOST:PORT" with an IPv4 host or "localhost". */
static bool
parse_addr(const char *addr, struct sockaddr_in *out)
{
    const char *colon = strrchr(addr, ':');
    char host[64];
    char *end = NULL;
    unsigned long port = 0;
    size_t host_len = 0;

    if (colon == NULL || colon[1] == '\0') {
        return false;
    }
    host_len = (size_t)(colon - addr);
    if (host_len == 0 || host_len >= sizeof(host)) {
        return false;
    }
    memcpy(host, addr, host_len);
    host[host_len] = '\0';
    port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port > 65535) {
        return false;
    }
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0) {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

weft_err
weft_mcp_http_start(struct weft_mcp_server *server,
                    const struct weft_mcp_http_options *options,
                    struct weft_mcp_http **out)
{
    const char *addr = options != NULL && options->addr != NULL ? options->addr : DEFAULT_ADDR;
    size_t max_sessions = options != NULL ? options->max_sessions : 0;
    struct weft_mcp_http *http = NULL;
    const union MHD_DaemonInfo *info = NULL;
    struct sockaddr_in sa;
    bool is_ok = false;
    weft_err err = WEFT_ENOMEM;

    if (server == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    is_ok = parse_addr(addr, &sa);
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
    http->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                                    NULL, NULL, answer, http, MHD_OPTION_SOCK_ADDR, &sa,
                                    MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
                                    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_LIMIT,
                                    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
                                    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (http->daemon == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR, "mcp serve: cannot listen on %s", addr);
        err = WEFT_EIO;
        goto fail;
    }
    info = MHD_get_daemon_info(http->daemon, MHD_DAEMON_INFO_BIND_PORT);
    http->port = info != NULL ? info->port : ntohs(sa.sin_port);
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
    MHD_stop_daemon(http->daemon);
    pthread_mutex_destroy(&http->lock);
    if (http->token != NULL) {
        memset(http->token, 0, strlen(http->token));
    }
    weft__free(http->token);
    free_allowed_hosts(http);
    weft__free(http->sessions);
    weft__free(http);
}
