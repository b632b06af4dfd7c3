/* net/http_server.c - the embedded HTTP server (http_server.h) over libmicrohttpd: a route table
 * whose bodies are accumulated up to each route's cap, never beyond (a request whose
 * Content-Length is over the cap is answered before its body is read), admission per route,
 * connection caps in total and per client address, and a graceful stop.
 *
 * Every request gets an answer. libmicrohttpd runs one thread per connection: a handler that
 * takes seconds (a 15 MB ingest, a trace of 500,000 spans, an MCP start_run) holds its own thread
 * only, so /healthz and /metrics are answered at once whatever the other connections do (with a
 * pool of two threads, two heavy handlers starved every queued connection until it timed out
 * unanswered). What bounds memory instead is admission: a route may take at most max_active
 * requests at once (from their headers until their answer is built and queued, or until a
 * streamed answer is sent; a queued answer's copy is bounded by the connection caps), and the
 * next one is answered 503 with Retry-After, its body read and dropped
 * as it comes, never kept (OTLP senders retry on 503, so nothing is lost). Requests refused, and
 * those whose connection closed or timed out before they were answered, are counted by route and
 * reason for the callers' /metrics.
 *
 * Slow clients: a connection silent for idle_timeout_s is closed, and poll() lifts select()'s
 * 1024-descriptor ceiling so the connection limit can be high (each thread reserves a stack, few
 * pages are touched). The per-address cap is ours rather than libmicrohttpd's, which refuses
 * silently: the accept policy refuses (and counts) a connection whose address already holds
 * per_address_limit, and the connection notifications keep the count of live connections per
 * address. Both run on the listening thread, so the check and the count cannot race.
 *
 * Stopping: the listening socket is closed first (MHD_quiesce_daemon), then the requests in flight
 * (headers in, no answer sent yet) get up to stop_grace_ms to be answered, and only then are the
 * connections closed and their threads joined: libmicrohttpd's own stop drops an answer that a
 * handler has queued but that has not been sent.
 */
#include "net/http_server.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_IDLE_TIMEOUT_S  3
#define DEFAULT_MAX_CONNECTIONS 1000 /* at most; less when the descriptor limit is lower */

static const char *const refusal_names[WEFT__HTTP_REFUSED_COUNT] = {"busy", "timeout",
                                                                    "client_closed", "too_large"};

/* The live state of one route: requests in, and the refusals counted. */
struct route_state {
    atomic_uint active;
    atomic_uint_fast64_t refused[WEFT__HTTP_REFUSED_COUNT];
};

/* Live connections of one client address (IPv4); count 0 marks a free slot. */
struct addr_slot {
    uint32_t addr;
    unsigned count;
};

struct weft__http_server {
    struct MHD_Daemon *daemon;
    unsigned short port;
    struct weft__http_route *routes;
    struct route_state *states; /* one per route */
    size_t route_count;
    const char *const *headers; /* on every response (borrowed) */
    unsigned stop_grace_ms;
    /* The per-address cap: slots for every live connection, under addr_lock (listening thread
     * and connection threads). */
    unsigned per_address_limit;
    struct addr_slot *addrs;
    size_t addr_cap;
    pthread_mutex_t addr_lock;
    atomic_uint_fast64_t refused_connections;
    atomic_bool is_refusal_logged; /* the first refused connection was logged at WARN */
    /* Requests in flight, for the graceful stop. */
    pthread_mutex_t flight_lock;
    pthread_cond_t flight_done;
    size_t in_flight;
};

/* One request, from its headers to its completion. */
struct request {
    struct weft__http_server *srv;
    const struct weft__http_route *route; /* NULL: no route (404) */
    struct route_state *state;
    struct weft__buf body;
    bool is_too_large;
    bool is_busy;     /* refused at admission: its body is dropped, its answer 503 */
    bool has_slot;    /* counted in state->active: released when a built answer is queued,
                       * else (a stream, no answer) when the request completes */
    bool is_answered; /* a response was queued */
};

const char *
weft__http_refusal_name(weft__http_refusal why)
{
    return (unsigned)why < WEFT__HTTP_REFUSED_COUNT ? refusal_names[why] : "";
}

/* The connection limit: DEFAULT_MAX_CONNECTIONS, or what the descriptor limit leaves after a
 * margin for the rest of the process (state database, exporters). */
static unsigned
default_connection_limit(void)
{
    struct rlimit rl;
    rlim_t limit = DEFAULT_MAX_CONNECTIONS;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < DEFAULT_MAX_CONNECTIONS + 64) {
        limit = rl.rlim_cur > 96 ? rl.rlim_cur - 64 : 32;
    }
    return (unsigned)limit;
}

weft_err
weft__http_server_parse_addr(const char *addr, struct sockaddr_in *out)
{
    char host[64] = "127.0.0.1";
    const char *colon = NULL;
    long port = 0;
    char *end = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    colon = addr != NULL ? strrchr(addr, ':') : NULL;
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
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        memset(out, 0, sizeof(*out));
        return WEFT_EINVAL;
    }
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests as handlers see them */

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

/* ------------------------------------------------------------------------------------------ */
/* Answers */

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

/* A streamed body (weft__http_reply's stream_*), as libmicrohttpd's content reader. */
struct stream {
    long (*read)(void *data, char *buf, size_t max);
    void (*free)(void *data);
    void *data;
};

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    long n = st->read(st->data, buf, max);

    (void)pos;
    return n > 0 ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void
stream_free(void *cls)
{
    struct stream *st = cls;

    st->free(st->data);
    weft__free(st);
}

/* The response of a streamed reply, or NULL (its stream freed). Its reads block the
 * connection's thread, so the idle timeout, checked between them, is off for it. */
static struct MHD_Response *
stream_response(struct MHD_Connection *conn, struct weft__http_reply *reply)
{
    struct stream *st = weft__calloc(1, sizeof(*st));
    struct MHD_Response *resp = NULL;

    if (st == NULL) {
        reply->stream_free(reply->stream_data);
        return NULL;
    }
    st->read = reply->stream_read;
    st->free = reply->stream_free;
    st->data = reply->stream_data;
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (resp == NULL) {
        stream_free(st);
        return NULL;
    }
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)0);
    return resp;
}

/* Queue @p reply (its body copied; freed as it says) on @p conn. */
static enum MHD_Result
send_reply(struct request *rq, struct MHD_Connection *conn, struct weft__http_reply *reply)
{
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret = MHD_NO;

    resp = reply->stream_read != NULL
               ? stream_response(conn, reply)
               : MHD_create_response_from_buffer(
                     reply->len, reply->len > 0 ? reply->body : (void *)"", MHD_RESPMEM_MUST_COPY);
    if (reply->free_body) {
        weft__free(reply->body);
    }
    if (resp != NULL) {
        add_headers(resp, rq->srv->headers, reply->headers);
    }
    weft__free(reply->headers);
    if (resp == NULL) {
        return MHD_NO;
    }
    if (reply->content_type != NULL) {
        MHD_add_response_header(resp, "Content-Type", reply->content_type);
    }
    if (reply->allow != NULL) {
        MHD_add_response_header(resp, "Allow", reply->allow);
    }
    ret = MHD_queue_response(conn, reply->status != 0 ? reply->status : 500u, resp);
    MHD_destroy_response(resp);
    rq->is_answered = ret == MHD_YES;
    if (rq->is_answered && rq->has_slot && reply->stream_read == NULL) {
        /* A built answer: the handler's work is over, and the slot goes back now rather than
         * when libmicrohttpd says the request completed, which can come after the client has
         * its answer and sent the next request (a client asking one thing at a time was told
         * 503). A stream keeps its slot: it reads while it sends. */
        atomic_fetch_sub(&rq->state->active, 1);
        rq->has_slot = false;
    }
    return ret;
}

static enum MHD_Result
send_text(struct request *rq, struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct weft__http_reply reply;

    memset(&reply, 0, sizeof(reply));
    reply.status = status;
    reply.content_type = "text/plain; charset=utf-8";
    reply.body = (char *)text;
    reply.len = strlen(text);
    return send_reply(rq, conn, &reply);
}

/* Run the route's handler on the request as it stands and queue its reply; or answer 413 when
 * the route leaves that to the server. */
static enum MHD_Result
answer_route(struct request *rq, struct MHD_Connection *conn, const char *url, const char *method)
{
    struct weft__http_request req = {method, url, NULL, 0, rq->is_too_large, conn, rq->srv};
    struct weft__http_reply reply;

    if (rq->is_too_large && rq->route->refuses_too_large) {
        char text[96];

        atomic_fetch_add(&rq->state->refused[WEFT__HTTP_REFUSED_TOO_LARGE], 1);
        snprintf(text, sizeof(text), "request body too large: at most %zu bytes\n",
                 rq->route->max_body);
        return send_text(rq, conn, MHD_HTTP_CONTENT_TOO_LARGE, text);
    }
    memset(&reply, 0, sizeof(reply));
    if (!rq->is_too_large && rq->body.len > 0) {
        req.body = rq->body.data;
        req.body_len = rq->body.len;
    }
    rq->route->handler(rq->route->user_data, &req, &reply);
    return send_reply(rq, conn, &reply);
}

/* 503 with Retry-After. The body is a google.rpc.Status, as OTLP/HTTP answers errors: protobuf
 * when the request was protobuf, else JSON (code 14, UNAVAILABLE). */
static enum MHD_Result
answer_busy(struct request *rq, struct MHD_Connection *conn)
{
    static const char text[] = "busy: too many requests of this kind at once; retry later";
    static const char json[] = "{\"code\":14,\"message\":\"busy: too many requests of this "
                               "kind at once; retry later\"}";
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    bool is_proto = ct != NULL && (strncasecmp(ct, "application/x-protobuf", 22) == 0 ||
                                   strncasecmp(ct, "application/protobuf", 20) == 0);
    unsigned char proto[sizeof(text) + 4];
    struct weft__http_reply reply;
    char retry[32];

    atomic_fetch_add(&rq->state->refused[WEFT__HTTP_REFUSED_BUSY], 1);
    memset(&reply, 0, sizeof(reply));
    reply.status = MHD_HTTP_SERVICE_UNAVAILABLE;
    if (is_proto) {
        /* Status{code = 14 (field 1, varint), message (field 2, length-delimited)}. */
        proto[0] = 0x08;
        proto[1] = 14;
        proto[2] = 0x12;
        proto[3] = (unsigned char)(sizeof(text) - 1);
        memcpy(proto + 4, text, sizeof(text) - 1);
        reply.body = (char *)proto;
        reply.len = sizeof(text) - 1 + 4;
        reply.content_type = "application/x-protobuf";
    } else {
        reply.body = (char *)json;
        reply.len = sizeof(json) - 1;
        reply.content_type = "application/json";
    }
    snprintf(retry, sizeof(retry), "Retry-After: %d", WEFT__HTTP_RETRY_AFTER_S);
    reply.headers = weft__strdup(retry); /* without it (out of memory) still a 503 */
    return send_reply(rq, conn, &reply);
}

/* ------------------------------------------------------------------------------------------ */
/* The request callbacks */

static const struct weft__http_route *
find_route(const struct weft__http_server *srv, const char *url)
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

/* The first call of a request (headers only): its state, counted in flight; admission to its
 * route (503 at once to a client waiting for 100 Continue), and an answer at once when no route
 * takes the path or the declared length is over the cap. */
static enum MHD_Result
begin(struct weft__http_server *srv,
      struct MHD_Connection *conn,
      const char *url,
      const char *method,
      void **con_cls)
{
    struct request *rq = weft__calloc(1, sizeof(*rq));

    if (rq == NULL) {
        return MHD_NO;
    }
    rq->srv = srv;
    rq->route = find_route(srv, url);
    *con_cls = rq;
    pthread_mutex_lock(&srv->flight_lock);
    srv->in_flight++;
    pthread_mutex_unlock(&srv->flight_lock);
    if (rq->route == NULL) {
        return send_text(rq, conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    rq->state = &srv->states[rq->route - srv->routes];
    weft__buf_init(&rq->body, rq->route->max_body);
    if (!take_slot(rq->route, rq->state)) {
        /* A client waiting for 100 Continue sends no body: tell it now. Any other gets its
         * answer once its body is in (read and dropped as it comes, never kept): answered and
         * closed mid-upload, it would see a reset on its socket, not the 503 that tells it to
         * retry. */
        const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");

        rq->is_busy = true;
        if (expect != NULL && strcasecmp(expect, "100-continue") == 0) {
            return answer_busy(rq, conn);
        }
        return MHD_YES;
    }
    rq->has_slot = rq->route->max_active > 0;
    if (declared_too_large(conn, rq->route->max_body)) {
        /* As for a busy route: a client waiting for 100 Continue hears the 413 now; any other
         * once its body is in (dropped as it comes), since answered and closed mid-upload it
         * could see a reset on its socket instead of the 413 (ingest's test saw it under
         * TSan). */
        const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");

        rq->is_too_large = true;
        if (expect != NULL && strcasecmp(expect, "100-continue") == 0) {
            return answer_route(rq, conn, url, method);
        }
    }
    return MHD_YES;
}

/* libmicrohttpd's access handler: begin() on the headers, then the body appended up to the
 * route's cap and the rest dropped, then (no data) the answer. */
static enum MHD_Result
on_request(void *cls,
           struct MHD_Connection *conn,
           const char *url,
           const char *method,
           const char *version,
           const char *upload_data,
           size_t *upload_data_size,
           void **con_cls)
{
    struct request *rq = *con_cls;

    (void)version;
    if (rq == NULL) {
        return begin(cls, conn, url, method, con_cls);
    }
    if (rq->route == NULL) {
        /* The 404 went out with the headers; a body that still comes is dropped. */
        *upload_data_size = 0;
        return rq->is_answered ? MHD_YES : MHD_NO;
    }
    if (rq->is_answered || (rq->is_busy && *upload_data_size > 0)) {
        /* Answered already, or refused: whatever body still comes is dropped. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->is_busy) {
        return answer_busy(rq, conn);
    }
    if (*upload_data_size > 0) {
        if (!rq->is_too_large) {
            /* max_body 0: the route takes no body (a chunked one has no Content-Length to
             * refuse up front, and an uncapped buffer would keep all of it). */
            weft_err err = rq->route->max_body == 0
                               ? WEFT_ELIMIT
                               : weft__buf_append(&rq->body, upload_data, *upload_data_size);

            if (err == WEFT_ELIMIT) {
                rq->is_too_large = true;
                weft__buf_cleanup(&rq->body);
            } else if (err != WEFT_OK) {
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    return answer_route(rq, conn, url, method);
}

static void
on_completed(void *cls,
             struct MHD_Connection *conn,
             void **con_cls,
             enum MHD_RequestTerminationCode code)
{
    struct weft__http_server *srv = cls;
    struct request *rq = *con_cls;

    (void)conn;
    if (rq == NULL) {
        return;
    }
    /* A request that ends without an answer is counted, so that nothing a client sent vanishes
     * unseen; a server shutting down is not the client's doing. */
    if (rq->state != NULL && !rq->is_answered) {
        if (code == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
            atomic_fetch_add(&rq->state->refused[WEFT__HTTP_REFUSED_TIMEOUT], 1);
        } else if (code != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
                   code != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) {
            atomic_fetch_add(&rq->state->refused[WEFT__HTTP_REFUSED_CLIENT_CLOSED], 1);
        }
    }
    if (rq->has_slot) {
        atomic_fetch_sub(&rq->state->active, 1);
    }
    weft__buf_cleanup(&rq->body);
    weft__free(rq);
    *con_cls = NULL;
    pthread_mutex_lock(&srv->flight_lock);
    srv->in_flight--;
    if (srv->in_flight == 0) {
        pthread_cond_broadcast(&srv->flight_done);
    }
    pthread_mutex_unlock(&srv->flight_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Connections per client address */

static struct addr_slot *
find_addr(struct weft__http_server *srv, uint32_t addr)
{
    for (size_t i = 0; i < srv->addr_cap; i++) {
        if (srv->addrs[i].count > 0 && srv->addrs[i].addr == addr) {
            return &srv->addrs[i];
        }
    }
    return NULL;
}

/* The accept policy: a connection from an address that holds per_address_limit already is
 * closed at once, and counted. */
static enum MHD_Result
on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct weft__http_server *srv = cls;
    const struct addr_slot *slot = NULL;
    bool is_full = false;

    if (addr == NULL || addr->sa_family != AF_INET || addrlen < sizeof(struct sockaddr_in)) {
        return MHD_YES;
    }
    pthread_mutex_lock(&srv->addr_lock);
    slot = find_addr(srv, ((const struct sockaddr_in *)(const void *)addr)->sin_addr.s_addr);
    is_full = slot != NULL && slot->count >= srv->per_address_limit;
    pthread_mutex_unlock(&srv->addr_lock);
    if (is_full) {
        char ip[INET_ADDRSTRLEN] = "?";

        atomic_fetch_add(&srv->refused_connections, 1);
        (void)inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)addr)->sin_addr, ip,
                        sizeof(ip));
        /* The first at WARN, later ones at DEBUG: a client reconnecting cannot flood the log. */
        WEFT_LOG(atomic_exchange(&srv->is_refusal_logged, true) ? WEFT_LOG_DEBUG : WEFT_LOG_WARN,
                 "http server: a connection from %s refused: it holds %u already"
                 " (per_address_limit; later refusals are logged at DEBUG)",
                 ip, srv->per_address_limit);
        return MHD_NO;
    }
    return MHD_YES;
}

/* A connection starts or closes: the count of its address. Its slot's index (plus one) is kept
 * in the connection's socket context, so the close finds it without a lookup. */
static void
on_connection(void *cls,
              struct MHD_Connection *conn,
              void **socket_context,
              enum MHD_ConnectionNotificationCode code)
{
    struct weft__http_server *srv = cls;
    const union MHD_ConnectionInfo *info = NULL;
    const struct sockaddr_in *sa = NULL;
    struct addr_slot *slot = NULL;

    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        uintptr_t index = (uintptr_t)*socket_context;

        if (index > 0) {
            pthread_mutex_lock(&srv->addr_lock);
            srv->addrs[index - 1].count--;
            pthread_mutex_unlock(&srv->addr_lock);
            *socket_context = NULL;
        }
        return;
    }
    info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || info->client_addr->sa_family != AF_INET) {
        return;
    }
    sa = (const struct sockaddr_in *)(const void *)info->client_addr;
    pthread_mutex_lock(&srv->addr_lock);
    slot = find_addr(srv, sa->sin_addr.s_addr);
    for (size_t i = 0; slot == NULL && i < srv->addr_cap; i++) {
        if (srv->addrs[i].count == 0) {
            slot = &srv->addrs[i];
            slot->addr = sa->sin_addr.s_addr;
        }
    }
    /* A slot is always free: there are as many as connections can be live at once. */
    if (slot != NULL) {
        slot->count++;
        *socket_context = (void *)(uintptr_t)(slot - srv->addrs + 1);
    }
    pthread_mutex_unlock(&srv->addr_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Lifecycle */

/* libmicrohttpd's own messages go to weft's log handler, never to stderr: the library does not
 * print. What the server could not do (start a thread, allocate, accept) is a warning; the rest
 * is what clients did (closed mid-request, sent a bad header), counted already, and only worth a
 * debug line: 150 slow clients must not write 150 warnings. */
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

static void
server_free(struct weft__http_server *srv)
{
    weft__free(srv->addrs);
    weft__free(srv->states);
    weft__free(srv->routes);
    weft__free(srv);
}

/* The copy of the route table and the per-address slots; false when out of memory. */
static bool
server_tables(struct weft__http_server *srv,
              const struct weft__http_server_config *cfg,
              unsigned connection_limit)
{
    if (cfg->route_count > 0) {
        srv->routes = weft__calloc(cfg->route_count, sizeof(*srv->routes));
        srv->states = weft__calloc(cfg->route_count, sizeof(*srv->states));
        if (srv->routes == NULL || srv->states == NULL) {
            return false;
        }
        memcpy(srv->routes, cfg->routes, cfg->route_count * sizeof(*cfg->routes));
        srv->route_count = cfg->route_count;
        for (size_t i = 0; i < cfg->route_count; i++) {
            atomic_init(&srv->states[i].active, 0);
            for (size_t r = 0; r < WEFT__HTTP_REFUSED_COUNT; r++) {
                atomic_init(&srv->states[i].refused[r], 0);
            }
        }
    }
    if (srv->per_address_limit > 0) {
        srv->addr_cap = (size_t)connection_limit + 1;
        srv->addrs = weft__calloc(srv->addr_cap, sizeof(*srv->addrs));
        if (srv->addrs == NULL) {
            return false;
        }
    }
    return true;
}

/* The locks and the condition; false (nothing left initialised) when one cannot be made. */
static bool
sync_init(struct weft__http_server *srv)
{
    if (pthread_mutex_init(&srv->addr_lock, NULL) != 0) {
        return false;
    }
    if (pthread_mutex_init(&srv->flight_lock, NULL) != 0) {
        pthread_mutex_destroy(&srv->addr_lock);
        return false;
    }
    if (pthread_cond_init(&srv->flight_done, NULL) != 0) {
        pthread_mutex_destroy(&srv->flight_lock);
        pthread_mutex_destroy(&srv->addr_lock);
        return false;
    }
    return true;
}

static void
sync_cleanup(struct weft__http_server *srv)
{
    pthread_cond_destroy(&srv->flight_done);
    pthread_mutex_destroy(&srv->flight_lock);
    pthread_mutex_destroy(&srv->addr_lock);
}

/* The daemon itself: a thread per connection, poll(), the timeouts and limits, our callbacks. */
static struct MHD_Daemon *
start_daemon(struct weft__http_server *srv,
             const struct sockaddr_in *sa,
             unsigned connection_limit,
             unsigned idle_timeout_s)
{
    return MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
            MHD_USE_ITC,
        0, srv->per_address_limit > 0 ? on_accept : NULL, srv, on_request, srv,
        MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        srv, MHD_OPTION_NOTIFY_CONNECTION, srv->per_address_limit > 0 ? on_connection : NULL, srv,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
}

weft_err
weft__http_server_start(const struct weft__http_server_config *cfg, struct weft__http_server **out)
{
    struct weft__http_server *srv = NULL;
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN] = "";
    unsigned connection_limit = 0;
    const union MHD_DaemonInfo *info = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (cfg == NULL || (cfg->routes == NULL && cfg->route_count > 0)) {
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < cfg->route_count; i++) {
        if (cfg->routes[i].path == NULL || cfg->routes[i].handler == NULL) {
            return WEFT_EINVAL;
        }
    }
    if (weft__http_server_parse_addr(cfg->addr, &sa) != WEFT_OK) {
        return WEFT_EINVAL;
    }
    connection_limit =
        cfg->connection_limit > 0 ? cfg->connection_limit : default_connection_limit();
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        return WEFT_ENOMEM;
    }
    srv->headers = cfg->headers;
    srv->stop_grace_ms = cfg->stop_grace_ms;
    srv->per_address_limit = cfg->per_address_limit;
    atomic_init(&srv->refused_connections, 0);
    atomic_init(&srv->is_refusal_logged, false);
    if (!server_tables(srv, cfg, connection_limit)) {
        server_free(srv);
        return WEFT_ENOMEM;
    }
    if (!sync_init(srv)) {
        server_free(srv);
        return WEFT_ENOMEM;
    }
    srv->daemon = start_daemon(srv, &sa, connection_limit,
                               cfg->idle_timeout_s > 0 ? cfg->idle_timeout_s
                                                       : (unsigned)DEFAULT_IDLE_TIMEOUT_S);
    if (srv->daemon == NULL) {
        inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
        WEFT_LOG(WEFT_LOG_ERROR, "%s: cannot listen on %s:%u",
                 cfg->name != NULL ? cfg->name : "http server", host, ntohs(sa.sin_port));
        sync_cleanup(srv);
        server_free(srv);
        return WEFT_EIO;
    }
    info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info != NULL ? info->port : ntohs(sa.sin_port);
    *out = srv;
    return WEFT_OK;
}

unsigned short
weft__http_server_port(const struct weft__http_server *srv)
{
    return srv != NULL ? srv->port : 0;
}

uint64_t
weft__http_server_refused(const struct weft__http_server *srv, size_t route, weft__http_refusal why)
{
    if (srv == NULL || route >= srv->route_count || (unsigned)why >= WEFT__HTTP_REFUSED_COUNT) {
        return 0;
    }
    return atomic_load(&srv->states[route].refused[why]);
}

uint64_t
weft__http_server_refused_connections(const struct weft__http_server *srv)
{
    return srv != NULL ? atomic_load(&srv->refused_connections) : 0;
}

/* Wait until no request is in flight, or for at most @p ms. */
static void
wait_in_flight(struct weft__http_server *srv, unsigned ms)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)(ms / 1000);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&srv->flight_lock);
    while (srv->in_flight > 0) {
        if (pthread_cond_timedwait(&srv->flight_done, &srv->flight_lock, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&srv->flight_lock);
}

void
weft__http_server_stop(struct weft__http_server *srv)
{
    MHD_socket listen_fd = MHD_INVALID_SOCKET;

    if (srv == NULL) {
        return;
    }
    if (srv->stop_grace_ms > 0) {
        /* No new connection from here on (the socket is ours to close once quiesced, and
         * would still take connections into its backlog); the ones open may still finish
         * their request. */
        listen_fd = MHD_quiesce_daemon(srv->daemon);
        if (listen_fd != MHD_INVALID_SOCKET) {
            close(listen_fd);
        }
        wait_in_flight(srv, srv->stop_grace_ms);
    }
    MHD_stop_daemon(srv->daemon);
    sync_cleanup(srv);
    server_free(srv);
}
