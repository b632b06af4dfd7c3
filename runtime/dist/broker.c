/* runtime/dist/broker.c - one AMQP connection to RabbitMQ over librabbitmq (broker.h).
 *
 * Channel 1 publishes (in confirm mode) and consumes; channel 2 carries the synchronous
 * requests made after setup (passive declares for queue statistics), so their replies never
 * interleave with deliveries and confirms (librabbitmq queues frames of other channels while
 * it waits for a reply).
 *
 * amqps:// URLs connect over TLS with the peer's certificate and host name verified against
 * $WEFT_AMQP_CACERT (default: the system's bundle), with a client certificate from
 * $WEFT_AMQP_CERT and $WEFT_AMQP_KEY when set. The files are checked when the handle is made,
 * so a wrong path fails at start with a sentence rather than at each reconnect.
 */
#include "runtime/dist/broker.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include "base/env.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define CH     1 /* publish + consume */
#define CH_RPC 2 /* passive declares */

struct weft__broker {
    char *url;
    char *url_safe;
    char *name;
    struct weft__broker_names names;
    unsigned heartbeat_s;
    unsigned prefetch;
    unsigned max_redeliveries;
    unsigned timeout_ms;  /* 0: connect in 10 s, RPCs unbounded */
    uint64_t deadline_ns; /* monotonic; 0: none */
    bool is_observer;
    amqp_connection_state_t conn;
    bool is_connected;
    uint64_t next_seq;
    int wake[2]; /* self-pipe: weft__broker_wake() writes, wait reads */
    amqp_envelope_t envelope;
    bool has_envelope;
    char death_reason[64];
    char death_queue[WEFT__BROKER_NAME_MAX];
    /* The current delivery's strings (valid until the next wait). */
    char traceparent[128];
    char tracestate[512];
    char message_id[128];
    char correlation_id[128];
    char type[64];
    char reply_to[256];
    char routing_key[256];
    char signature[256];
    /* TLS (amqps://): file paths, checked readable by weft__broker_new. */
    bool is_tls;
    bool is_verify; /* peer certificate and host name; $WEFT_AMQP_VERIFY=false turns it off */
    char *cacert;
    char *cert;
    char *key;
};

#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

static bool
name_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

weft_err
weft__broker_names_make(const char *prefix, struct weft__broker_names *names)
{
    const char *p = prefix != NULL ? prefix : "";
    int n = 0;

    if (strlen(p) > 100) {
        return WEFT_EINVAL;
    }
    for (const char *c = p; *c != '\0'; c++) {
        if (!name_char_ok(*c)) {
            return WEFT_EINVAL;
        }
    }
    n |= snprintf(names->exchange, sizeof(names->exchange), "%sagent_exchange", p) < 0;
    n |= snprintf(names->dlx, sizeof(names->dlx), "%sagent_dlx", p) < 0;
    n |= snprintf(names->dispatch, sizeof(names->dispatch), "%stask_dispatch_queue", p) < 0;
    n |= snprintf(names->results, sizeof(names->results), "%stask_results_queue", p) < 0;
    n |= snprintf(names->dead, sizeof(names->dead), "%stask_dead_letter_queue", p) < 0;
    return n != 0 ? WEFT_EINVAL : WEFT_OK;
}

weft_err
weft__broker_results_name(const struct weft__broker *b,
                          const char *run_id,
                          char *out,
                          size_t out_len)
{
    const char *shared = b->names.results;
    size_t prefix_len = strlen(shared) - strlen("task_results_queue");
    int n = 0;

    if (run_id == NULL || run_id[0] == '\0') {
        return WEFT_EINVAL;
    }
    for (const char *c = run_id; *c != '\0'; c++) {
        if (!name_char_ok(*c)) {
            return WEFT_EINVAL;
        }
    }
    n = snprintf(out, out_len, "%.*sresults.%s", (int)prefix_len, shared, run_id);
    if (n < 0 || (size_t)n >= out_len || (size_t)n >= WEFT__BROKER_NAME_MAX) {
        return WEFT_EINVAL;
    }
    return WEFT_OK;
}

bool
weft__broker_is_results_name(const struct weft__broker *b, const char *queue)
{
    const char *shared = b->names.results;
    size_t prefix_len = strlen(shared) - strlen("task_results_queue");
    char name[WEFT__BROKER_NAME_MAX];

    /* "{prefix}results.{run id}" exactly when the tail names that queue again. */
    return queue != NULL && strncmp(queue, shared, prefix_len) == 0 &&
           strncmp(queue + prefix_len, "results.", 8) == 0 &&
           weft__broker_results_name(b, queue + prefix_len + 8, name, sizeof(name)) == WEFT_OK;
}

/* The URL with the password masked: "amqp://user:***@host:port/vhost". */
static char *
mask_url(const char *url)
{
    const char *scheme = strstr(url, "://");
    const char *at = scheme != NULL ? strchr(scheme + 3, '@') : NULL;
    const char *colon = NULL;
    size_t len = strlen(url) + 4;
    char *out = weft__malloc(len);

    if (out == NULL) {
        return NULL;
    }
    if (at != NULL) {
        colon = memchr(scheme + 3, ':', (size_t)(at - (scheme + 3)));
    }
    if (colon == NULL) {
        snprintf(out, len, "%s", url);
    } else {
        snprintf(out, len, "%.*s:***%s", (int)(colon - url), url, at);
    }
    return out;
}

/* A TLS file named by $@p var: copied into *out, or an error naming the variable and the path
 * when it cannot be read (the broker would fail the handshake with a vaguer reason). */
static weft_err
tls_file(const char *var, const char *fallback, char **out, char *err, size_t err_len)
{
    const char *path = weft__env(var);

    *out = NULL;
    if (path == NULL) {
        path = fallback;
    }
    if (path == NULL) {
        return WEFT_OK;
    }
    if (access(path, R_OK) != 0) {
        snprintf(err, err_len, "%s %s: cannot read: %s", var, path, strerror(errno));
        return WEFT_EINVAL;
    }
    *out = weft__strdup(path);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* The TLS settings of an amqps:// URL from the environment. */
static weft_err
tls_config(struct weft__broker *b, char *err, size_t err_len)
{
    const char *bundle = access(SYSTEM_CA_BUNDLE, R_OK) == 0 ? SYSTEM_CA_BUNDLE : NULL;
    weft_err e = WEFT_OK;

    b->is_verify = weft__env_bool("WEFT_AMQP_VERIFY", true);
    if (weft__env("WEFT_AMQP_CACERT") == NULL && bundle == NULL && b->is_verify) {
        snprintf(err, err_len,
                 "broker %s: amqps needs the CA that signed the broker's certificate: set "
                 "WEFT_AMQP_CACERT to its PEM file (no system bundle at " SYSTEM_CA_BUNDLE ")",
                 b->url_safe);
        return WEFT_EINVAL;
    }
    e = tls_file("WEFT_AMQP_CACERT", bundle, &b->cacert, err, err_len);
    if (e == WEFT_OK) {
        e = tls_file("WEFT_AMQP_CERT", NULL, &b->cert, err, err_len);
    }
    if (e == WEFT_OK) {
        e = tls_file("WEFT_AMQP_KEY", NULL, &b->key, err, err_len);
    }
    if (e == WEFT_OK && (b->cert == NULL) != (b->key == NULL)) {
        snprintf(err, err_len,
                 "WEFT_AMQP_CERT and WEFT_AMQP_KEY: set both (a client "
                 "certificate and its key) or neither");
        e = WEFT_EINVAL;
    }
    if (e == WEFT_OK && !b->is_verify) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "broker %s: WEFT_AMQP_VERIFY=false: the broker's certificate is not verified "
                 "(anyone on the path can pose as the broker)",
                 b->url_safe);
    }
    return e;
}

weft_err
weft__broker_new(const struct weft__broker_config *cfg,
                 struct weft__broker **out,
                 char *err,
                 size_t err_len)
{
    const char *url = cfg->url != NULL ? cfg->url : getenv("WEFT_BROKER_URL");
    const char *prefix = cfg->prefix != NULL ? cfg->prefix : getenv("WEFT_QUEUE_PREFIX");
    struct amqp_connection_info info;
    struct weft__broker *b = NULL;
    char *scratch = NULL;
    weft_err e = WEFT_OK;

    *out = NULL;
    if (url == NULL || url[0] == '\0') {
        snprintf(err, err_len, "no broker: pass --broker amqp://... or set WEFT_BROKER_URL");
        return WEFT_EINVAL;
    }
    scratch = weft__strdup(url);
    if (scratch == NULL) {
        return WEFT_ENOMEM;
    }
    if (amqp_parse_url(scratch, &info) != AMQP_STATUS_OK) {
        char *safe = mask_url(url);
        snprintf(err, err_len,
                 "broker URL %s: expected amqp://user:password@host:port/vhost (or amqps://)",
                 safe != NULL ? safe : "(unprintable)");
        weft__free(safe);
        weft__free(scratch);
        return WEFT_EINVAL;
    }
    b = weft__calloc(1, sizeof(*b));
    if (b == NULL) {
        weft__free(scratch);
        return WEFT_ENOMEM;
    }
    b->is_tls = info.ssl != 0;
    weft__free(scratch);
    b->wake[0] = b->wake[1] = -1;
    if (weft__broker_names_make(prefix, &b->names) != WEFT_OK) {
        snprintf(err, err_len, "queue prefix \"%.100s\": expected at most 100 of [A-Za-z0-9._:-]",
                 prefix);
        weft__free(b);
        return WEFT_EINVAL;
    }
    b->url = weft__strdup(url);
    b->url_safe = mask_url(url);
    b->name = weft__strdup(cfg->name != NULL ? cfg->name : "weft");
    b->heartbeat_s = cfg->heartbeat_s != 0 ? cfg->heartbeat_s : 30;
    b->prefetch = cfg->prefetch;
    b->max_redeliveries = cfg->max_redeliveries != 0 ? cfg->max_redeliveries : 5;
    b->timeout_ms = cfg->timeout_ms;
    b->is_observer = cfg->is_observer;
    if (b->url == NULL || b->url_safe == NULL || b->name == NULL || pipe(b->wake) != 0) {
        weft__broker_free(b);
        return WEFT_ENOMEM;
    }
    if (b->is_tls) {
        e = tls_config(b, err, err_len);
        if (e != WEFT_OK) {
            weft__broker_free(b);
            return e;
        }
    }
    (void)fcntl(b->wake[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(b->wake[1], F_SETFL, O_NONBLOCK);
    (void)fcntl(b->wake[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(b->wake[1], F_SETFD, FD_CLOEXEC);
    *out = b;
    return WEFT_OK;
}

void
weft__broker_free(struct weft__broker *b)
{
    if (b == NULL) {
        return;
    }
    weft__broker_close(b);
    if (b->wake[0] >= 0) {
        close(b->wake[0]);
        close(b->wake[1]);
    }
    weft__free(b->url);
    weft__free(b->url_safe);
    weft__free(b->name);
    weft__free(b->cacert);
    weft__free(b->cert);
    weft__free(b->key);
    weft__free(b);
}

const struct weft__broker_names *
weft__broker_names(const struct weft__broker *b)
{
    return &b->names;
}

const char *
weft__broker_url_safe(const struct weft__broker *b)
{
    return b->url_safe;
}

bool
weft__broker_is_connected(const struct weft__broker *b)
{
    return b->is_connected;
}

/* A sentence for a failed RPC reply. */
static void
reply_text(amqp_rpc_reply_t r, const char *what, char *err, size_t err_len)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        snprintf(err, err_len, "%s: ok", what);
        break;
    case AMQP_RESPONSE_NONE:
        snprintf(err, err_len, "%s: no reply", what);
        break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf(err, err_len, "%s: %s", what, amqp_error_string2(r.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            const amqp_connection_close_t *m = r.reply.decoded;
            snprintf(err, err_len, "%s: broker closed the connection: %u %.*s", what, m->reply_code,
                     (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            const amqp_channel_close_t *m = r.reply.decoded;
            snprintf(err, err_len, "%s: broker closed the channel: %u %.*s", what, m->reply_code,
                     (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        } else {
            snprintf(err, err_len, "%s: broker error (method 0x%08x)", what, r.reply.id);
        }
        break;
    }
}

static bool
rpc_ok(struct weft__broker *b, const char *what, char *err, size_t err_len)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(b->conn);

    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        return true;
    }
    reply_text(r, what, err, err_len);
    return false;
}

static void
table_add(amqp_table_entry_t *e, size_t *n, const char *key, const char *str, int64_t num)
{
    e[*n].key = amqp_cstring_bytes(key);
    if (str != NULL) {
        e[*n].value.kind = AMQP_FIELD_KIND_UTF8;
        e[*n].value.value.bytes = amqp_cstring_bytes(str);
    } else {
        e[*n].value.kind = AMQP_FIELD_KIND_I64;
        e[*n].value.value.i64 = num;
    }
    (*n)++;
}

/* A durable quorum queue dead-lettering to the DLX with @p dead_key (NULL: none). */
static bool
declare_queue(struct weft__broker *b,
              const char *queue,
              const char *dead_key,
              int64_t delivery_limit,
              char *err,
              size_t err_len)
{
    amqp_table_entry_t e[4];
    size_t n = 0;
    amqp_table_t args;
    char what[WEFT__BROKER_NAME_MAX + 32];

    table_add(e, &n, "x-queue-type", "quorum", 0);
    if (dead_key != NULL) {
        table_add(e, &n, "x-dead-letter-exchange", b->names.dlx, 0);
        table_add(e, &n, "x-dead-letter-routing-key", dead_key, 0);
    }
    if (delivery_limit > 0) {
        table_add(e, &n, "x-delivery-limit", NULL, delivery_limit);
    }
    args.num_entries = (int)n;
    args.entries = e;
    /* A queue that exists keeps the arguments its first declarer gave it (the delivery limit
     * of whoever deployed first): look first, declare only when it is missing. */
    if (amqp_queue_declare(b->conn, CH_RPC, amqp_cstring_bytes(queue), 1, 1, 0, 0,
                           amqp_empty_table) != NULL &&
        amqp_get_rpc_reply(b->conn).reply_type == AMQP_RESPONSE_NORMAL) {
        return true;
    }
    {
        /* 404: the broker closed the RPC channel; acknowledge and open it again. */
        amqp_channel_close_ok_t close_ok;
        (void)amqp_send_method(b->conn, CH_RPC, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
        amqp_channel_open(b->conn, CH_RPC);
        if (!rpc_ok(b, "open channel", err, err_len)) {
            return false;
        }
    }
    amqp_queue_declare(b->conn, CH, amqp_cstring_bytes(queue), 0, 1, 0, 0, args);
    snprintf(what, sizeof(what), "declare queue %s", queue);
    return rpc_ok(b, what, err, err_len);
}

static bool
bind(struct weft__broker *b,
     const char *queue,
     const char *exchange,
     const char *key,
     char *err,
     size_t err_len)
{
    char what[3 * WEFT__BROKER_NAME_MAX];

    amqp_queue_bind(b->conn, CH, amqp_cstring_bytes(queue), amqp_cstring_bytes(exchange),
                    amqp_cstring_bytes(key), amqp_empty_table);
    snprintf(what, sizeof(what), "bind %s to %s (%s)", queue, exchange, key);
    return rpc_ok(b, what, err, err_len);
}

static bool
declare_topology(struct weft__broker *b, char *err, size_t err_len)
{
    const struct weft__broker_names *nm = &b->names;

    amqp_exchange_declare(b->conn, CH, amqp_cstring_bytes(nm->exchange),
                          amqp_cstring_bytes("direct"), 0, 1, 0, 0, amqp_empty_table);
    if (!rpc_ok(b, "declare exchange", err, err_len)) {
        return false;
    }
    amqp_exchange_declare(b->conn, CH, amqp_cstring_bytes(nm->dlx), amqp_cstring_bytes("direct"), 0,
                          1, 0, 0, amqp_empty_table);
    return rpc_ok(b, "declare dead-letter exchange", err, err_len) &&
           declare_queue(b, nm->dispatch, "dead.task", b->max_redeliveries, err, err_len) &&
           declare_queue(b, nm->results, "dead.result", 0, err, err_len) &&
           declare_queue(b, nm->dead, NULL, 0, err, err_len) &&
           bind(b, nm->dispatch, nm->exchange, "task", err, err_len) &&
           bind(b, nm->results, nm->exchange, "result", err, err_len) &&
           bind(b, nm->dead, nm->dlx, "dead.task", err, err_len) &&
           bind(b, nm->dead, nm->dlx, "dead.result", err, err_len) &&
           bind(b, nm->results, nm->dlx, "dead.task", err, err_len);
}

/* After a 404 on CH_RPC (a passive declare of a missing queue): the broker closed that channel
 * only; acknowledge and open it again. */
static bool
reopen_rpc(struct weft__broker *b, char *err, size_t err_len)
{
    amqp_channel_close_ok_t close_ok;

    (void)amqp_send_method(b->conn, CH_RPC, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
    amqp_channel_open(b->conn, CH_RPC);
    return rpc_ok(b, "open channel", err, err_len);
}

weft_err
weft__broker_declare_results(
    struct weft__broker *b, const char *queue, uint32_t expires_ms, char *err, size_t err_len)
{
    amqp_table_entry_t e[4];
    size_t n = 0;
    amqp_table_t args;
    char what[WEFT__BROKER_NAME_MAX + 32];
    bool is_ok = false;

    err[0] = '\0';
    if (!b->is_connected) {
        snprintf(err, err_len, "broker %s: not connected", b->url_safe);
        return WEFT_EIO;
    }
    table_add(e, &n, "x-queue-type", "quorum", 0);
    table_add(e, &n, "x-dead-letter-exchange", b->names.dlx, 0);
    table_add(e, &n, "x-dead-letter-routing-key", "dead.result", 0);
    table_add(e, &n, "x-expires", NULL, expires_ms);
    args.num_entries = (int)n;
    args.entries = e;
    /* Every request on CH_RPC: deliveries and confirms on CH never interleave with the replies.
     * A queue that exists (a resumed run's) is used as it is, with the results it holds. */
    if (amqp_queue_declare(b->conn, CH_RPC, amqp_cstring_bytes(queue), 1, 1, 0, 0,
                           amqp_empty_table) != NULL &&
        amqp_get_rpc_reply(b->conn).reply_type == AMQP_RESPONSE_NORMAL) {
        is_ok = true;
    } else if (reopen_rpc(b, err, err_len)) {
        amqp_queue_declare(b->conn, CH_RPC, amqp_cstring_bytes(queue), 0, 1, 0, 0, args);
        snprintf(what, sizeof(what), "declare queue %s", queue);
        is_ok = rpc_ok(b, what, err, err_len);
    }
    if (is_ok) {
        amqp_queue_bind(b->conn, CH_RPC, amqp_cstring_bytes(queue),
                        amqp_cstring_bytes(b->names.dlx), amqp_cstring_bytes("dead.task"),
                        amqp_empty_table);
        snprintf(what, sizeof(what), "bind %s to %s (dead.task)", queue, b->names.dlx);
        is_ok = rpc_ok(b, what, err, err_len);
    }
    if (!is_ok) {
        char why[512];
        snprintf(why, sizeof(why), "%s", err);
        snprintf(err, err_len, "broker %s: %s", b->url_safe, why);
        weft__broker_close(b);
        return WEFT_EIO;
    }
    return WEFT_OK;
}

weft_err
weft__broker_delete_queue(struct weft__broker *b, const char *queue)
{
    char err[256] = "";

    if (!b->is_connected) {
        return WEFT_EIO;
    }
    amqp_queue_delete(b->conn, CH_RPC, amqp_cstring_bytes(queue), 0, 0);
    if (!rpc_ok(b, "delete queue", err, sizeof(err))) {
        WEFT_LOG(WEFT_LOG_WARN, "broker %s: delete %s: %s", b->url_safe, queue, err);
        b->is_connected = false;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* The bound of the next wait: the configured timeout cut to what is left before the deadline
 * (*is_bounded false: no bound). @return false when the deadline has passed. */
static bool
next_bound(const struct weft__broker *b, struct timeval *tv, bool *is_bounded)
{
    uint64_t ms = b->timeout_ms;

    if (b->deadline_ns != 0) {
        uint64_t now = weft__monotonic_ns();
        uint64_t left = b->deadline_ns > now ? (b->deadline_ns - now) / 1000000u : 0;
        if (left == 0) {
            return false;
        }
        ms = ms == 0 || left < ms ? left : ms;
    }
    *is_bounded = ms > 0;
    tv->tv_sec = (time_t)(ms / 1000);
    tv->tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return true;
}

/* Bound the next RPC of the live connection. @return false when the deadline has passed. */
static bool
bound_rpc(struct weft__broker *b)
{
    struct timeval tv;
    bool is_bounded = false;

    if (!next_bound(b, &tv, &is_bounded)) {
        return false;
    }
    (void)amqp_set_rpc_timeout(b->conn, is_bounded ? &tv : NULL);
    return true;
}

/* The TLS socket's CA, client certificate and verification. */
static bool
tls_socket(struct weft__broker *b, amqp_socket_t *sock, char *err, size_t err_len)
{
    int rc = AMQP_STATUS_OK;

    amqp_ssl_socket_set_verify_peer(sock, b->is_verify ? 1 : 0);
    amqp_ssl_socket_set_verify_hostname(sock, b->is_verify ? 1 : 0);
    if (b->cacert != NULL) {
        rc = amqp_ssl_socket_set_cacert(sock, b->cacert);
        if (rc != AMQP_STATUS_OK) {
            snprintf(err, err_len, "broker %s: WEFT_AMQP_CACERT %s: %s", b->url_safe, b->cacert,
                     amqp_error_string2(rc));
            return false;
        }
    }
    if (b->cert != NULL) {
        rc = amqp_ssl_socket_set_key(sock, b->cert, b->key);
        if (rc != AMQP_STATUS_OK) {
            snprintf(err, err_len, "broker %s: WEFT_AMQP_CERT %s / WEFT_AMQP_KEY %s: %s",
                     b->url_safe, b->cert, b->key, amqp_error_string2(rc));
            return false;
        }
    }
    return true;
}

weft_err
weft__broker_connect(struct weft__broker *b, char *err, size_t err_len)
{
    struct amqp_connection_info info;
    char *scratch = weft__strdup(b->url);
    amqp_socket_t *sock = NULL;
    struct timeval tv = {10, 0};
    bool is_bounded = false;
    amqp_table_entry_t props[1];
    amqp_table_t client_props;
    amqp_rpc_reply_t r;
    int rc = 0;

    err[0] = '\0'; /* the steps below test it: a retry must not see the last attempt's */
    weft__broker_close(b);
    if (scratch == NULL || amqp_parse_url(scratch, &info) != AMQP_STATUS_OK) {
        weft__free(scratch);
        snprintf(err, err_len, "broker URL %s is not valid", b->url_safe);
        return WEFT_EINVAL;
    }
    b->conn = amqp_new_connection();
    sock = b->conn == NULL ? NULL
           : b->is_tls     ? amqp_ssl_socket_new(b->conn)
                           : amqp_tcp_socket_new(b->conn);
    if (sock == NULL) {
        weft__free(scratch);
        weft__broker_close(b);
        return WEFT_ENOMEM;
    }
    if (b->is_tls && !tls_socket(b, sock, err, err_len)) {
        weft__free(scratch);
        weft__broker_close(b);
        return WEFT_EIO;
    }
    if (!next_bound(b, &tv, &is_bounded)) {
        snprintf(err, err_len, "broker %s: cannot connect: no time left", b->url_safe);
        weft__free(scratch);
        weft__broker_close(b);
        return WEFT_EIO;
    }
    if (is_bounded) {
        /* One bound for every step that waits on the broker: a broker that accepts the TCP
         * connection and then hangs (stopped, overloaded) must not hold the caller. */
        (void)amqp_set_handshake_timeout(b->conn, &tv);
        (void)amqp_set_rpc_timeout(b->conn, &tv);
    } else {
        tv.tv_sec = 10;
        tv.tv_usec = 0;
    }
    rc = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        snprintf(err, err_len, "broker %s: cannot connect: %s", b->url_safe,
                 amqp_error_string2(rc));
        weft__free(scratch);
        weft__broker_close(b);
        return WEFT_EIO;
    }
    if (info.vhost == NULL || info.vhost[0] == '\0') {
        info.vhost =
            (char *)"/"; /* "amqp://host/" names the default vhost, as most clients read it */
    }
    if (is_bounded) {
        /* What the TCP connect left of the deadline bounds the login. */
        bool has_time = next_bound(b, &tv, &is_bounded);
        if (!has_time) {
            snprintf(err, err_len, "broker %s: cannot log in: no time left", b->url_safe);
            weft__free(scratch);
            weft__broker_close(b);
            return WEFT_EIO;
        }
        (void)amqp_set_handshake_timeout(b->conn, &tv);
    }
    props[0].key = amqp_cstring_bytes("connection_name");
    props[0].value.kind = AMQP_FIELD_KIND_UTF8;
    props[0].value.value.bytes = amqp_cstring_bytes(b->name);
    client_props.num_entries = 1;
    client_props.entries = props;
    r = amqp_login_with_properties(b->conn, info.vhost, 0, 131072,
                                   b->is_observer ? 0 : (int)b->heartbeat_s, &client_props,
                                   AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    weft__free(scratch);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        char why[256];
        reply_text(r, "login", why, sizeof(why));
        snprintf(err, err_len, "broker %s: %s", b->url_safe, why);
        weft__broker_close(b);
        return WEFT_EIO;
    }
    b->is_connected = true;
    if (b->is_observer) {
        if (!bound_rpc(b)) {
            snprintf(err, err_len, "broker %s: open channel: no time left", b->url_safe);
            b->is_connected = false; /* drop it: a polite close would wait again */
            weft__broker_close(b);
            return WEFT_EIO;
        }
        amqp_channel_open(b->conn, CH_RPC);
        if (!rpc_ok(b, "open channel", err, err_len)) {
            b->is_connected = false;
            weft__broker_close(b);
            return WEFT_EIO;
        }
        return WEFT_OK;
    }
    amqp_channel_open(b->conn, CH);
    if (rpc_ok(b, "open channel", err, err_len)) {
        amqp_channel_open(b->conn, CH_RPC);
    }
    if (err[0] == '\0' && rpc_ok(b, "open channel", err, err_len)) {
        amqp_confirm_select(b->conn, CH);
    }
    if (err[0] != '\0' || !rpc_ok(b, "confirm mode", err, err_len) ||
        !declare_topology(b, err, err_len)) {
        weft__broker_close(b);
        return WEFT_EIO;
    }
    if (b->prefetch > 0) {
        amqp_basic_qos(b->conn, CH, 0, (uint16_t)(b->prefetch > 65535 ? 65535 : b->prefetch), 0);
        if (!rpc_ok(b, "basic.qos", err, err_len)) {
            weft__broker_close(b);
            return WEFT_EIO;
        }
    }
    b->next_seq = 0;
    return WEFT_OK;
}

void
weft__broker_close(struct weft__broker *b)
{
    if (b->has_envelope) {
        amqp_destroy_envelope(&b->envelope);
        b->has_envelope = false;
    }
    if (b->conn == NULL) {
        return;
    }
    if (b->is_connected) {
        /* Best effort and bounded: a dead peer makes these fail fast or time out. */
        struct timeval tv = {2, 0};
        (void)amqp_set_rpc_timeout(b->conn, &tv);
        (void)amqp_connection_close(b->conn, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(b->conn);
    b->conn = NULL;
    b->is_connected = false;
}

weft_err
weft__broker_consume(struct weft__broker *b, const char *queue)
{
    char err[256] = "";

    if (!b->is_connected) {
        return WEFT_EIO;
    }
    amqp_basic_consume(b->conn, CH, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    if (!rpc_ok(b, "basic.consume", err, sizeof(err))) {
        WEFT_LOG(WEFT_LOG_ERROR, "broker %s: consume %s: %s", b->url_safe, queue, err);
        return WEFT_EIO;
    }
    return WEFT_OK;
}

weft_err
weft__broker_publish(struct weft__broker *b,
                     const char *routing_key,
                     bool to_queue,
                     const struct weft__broker_msg *msg,
                     const void *body,
                     size_t body_len,
                     uint64_t *seq)
{
    amqp_basic_properties_t p;
    amqp_table_entry_t h[6];
    size_t n = 0;
    amqp_bytes_t content;
    int rc = 0;

    if (!b->is_connected) {
        return WEFT_EIO;
    }
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_APP_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    p.app_id = amqp_cstring_bytes("weft");
    if (msg->message_id != NULL) {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = amqp_cstring_bytes(msg->message_id);
    }
    if (msg->correlation_id != NULL) {
        p._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
        p.correlation_id = amqp_cstring_bytes(msg->correlation_id);
    }
    if (msg->type != NULL) {
        p._flags |= AMQP_BASIC_TYPE_FLAG;
        p.type = amqp_cstring_bytes(msg->type);
    }
    if (msg->reply_to != NULL) {
        p._flags |= AMQP_BASIC_REPLY_TO_FLAG;
        p.reply_to = amqp_cstring_bytes(msg->reply_to);
    }
    if (msg->traceparent != NULL) {
        table_add(h, &n, "traceparent", msg->traceparent, 0);
    }
    if (msg->tracestate != NULL && msg->tracestate[0] != '\0') {
        table_add(h, &n, "tracestate", msg->tracestate, 0);
    }
    if (msg->attempt > 0) {
        table_add(h, &n, "x-weft-attempt", NULL, msg->attempt);
    }
    if (msg->timestamp_ms > 0) {
        table_add(h, &n, "x-weft-sent-ms", NULL, (int64_t)msg->timestamp_ms);
    }
    if (msg->bounces > 0) {
        table_add(h, &n, "x-weft-bounces", NULL, msg->bounces);
    }
    if (msg->signature != NULL) {
        table_add(h, &n, "weft-signature", msg->signature, 0);
    }
    p.headers.num_entries = (int)n;
    p.headers.entries = h;
    content.len = body_len;
    content.bytes = (void *)body;
    rc = amqp_basic_publish(
        b->conn, CH, to_queue ? amqp_empty_bytes : amqp_cstring_bytes(b->names.exchange),
        amqp_cstring_bytes(routing_key), msg->is_mandatory ? 1 : 0, 0, &p, content);
    if (rc != AMQP_STATUS_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "broker %s: publish failed: %s", b->url_safe,
                 amqp_error_string2(rc));
        b->is_connected = false;
        return WEFT_EIO;
    }
    *seq = ++b->next_seq;
    return WEFT_OK;
}

weft_err
weft__broker_ack(struct weft__broker *b, uint64_t delivery_tag)
{
    if (!b->is_connected || amqp_basic_ack(b->conn, CH, delivery_tag, 0) != AMQP_STATUS_OK) {
        b->is_connected = false;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

weft_err
weft__broker_reject(struct weft__broker *b, uint64_t delivery_tag, bool requeue)
{
    if (!b->is_connected ||
        amqp_basic_reject(b->conn, CH, delivery_tag, requeue ? 1 : 0) != AMQP_STATUS_OK) {
        b->is_connected = false;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

void
weft__broker_wake(struct weft__broker *b)
{
    char c = 1;
    ssize_t n = write(b->wake[1], &c, 1); /* a full pipe is already a pending wake */
    (void)n;
}

static bool
drain_wake(struct weft__broker *b)
{
    char buf[64];
    bool is_woken = false;

    while (read(b->wake[0], buf, sizeof(buf)) > 0) {
        is_woken = true;
    }
    return is_woken;
}

static const amqp_field_value_t *
header(const amqp_table_t *t, const char *key)
{
    for (int i = 0; i < t->num_entries; i++) {
        const amqp_bytes_t *k = &t->entries[i].key;
        if (k->len == strlen(key) && memcmp(k->bytes, key, k->len) == 0) {
            return &t->entries[i].value;
        }
    }
    return NULL;
}

static int64_t
field_int(const amqp_field_value_t *v)
{
    if (v == NULL) {
        return 0;
    }
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8:
        return v->value.i8;
    case AMQP_FIELD_KIND_U8:
        return v->value.u8;
    case AMQP_FIELD_KIND_I16:
        return v->value.i16;
    case AMQP_FIELD_KIND_U16:
        return v->value.u16;
    case AMQP_FIELD_KIND_I32:
        return v->value.i32;
    case AMQP_FIELD_KIND_U32:
        return v->value.u32;
    case AMQP_FIELD_KIND_I64:
        return v->value.i64;
    case AMQP_FIELD_KIND_U64:
        return (int64_t)v->value.u64;
    default:
        return 0;
    }
}

/* A string header copied into @p out (NUL-terminated); false when absent or not a string. */
static bool
field_str(const amqp_field_value_t *v, char *out, size_t out_len)
{
    if (v == NULL || (v->kind != AMQP_FIELD_KIND_UTF8 && v->kind != AMQP_FIELD_KIND_BYTES) ||
        v->value.bytes.len >= out_len) {
        return false;
    }
    memcpy(out, v->value.bytes.bytes, v->value.bytes.len);
    out[v->value.bytes.len] = '\0';
    return true;
}

/* @p bytes as a C string in @p out, or NULL when absent (@p flag not in @p flags) or too long. */
static const char *
bytes_str(amqp_flags_t flags, amqp_flags_t flag, const amqp_bytes_t *bytes, char *out, size_t len)
{
    if ((flags & flag) == 0 || bytes->len >= len) {
        return NULL;
    }
    memcpy(out, bytes->bytes, bytes->len);
    out[bytes->len] = '\0';
    return out;
}

/* Read the content of the message whose method frame came on @p channel into the envelope.
 * false when it could not be read: the connection is marked closed and @p ev says so. */
static bool
read_message(struct weft__broker *b,
             amqp_channel_t channel,
             const char *what,
             struct weft__broker_event *ev)
{
    amqp_rpc_reply_t r = amqp_read_message(b->conn, channel, &b->envelope.message, 0);
    char why[256];

    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        return true;
    }
    reply_text(r, what, why, sizeof(why));
    WEFT_LOG(WEFT_LOG_WARN, "broker %s: %s", b->url_safe, why);
    b->is_connected = false;
    ev->kind = WEFT__BROKER_CLOSED;
    return false;
}

/* The message's properties into ev->msg (strings in the broker's buffers). */
static void
fill_delivery(struct weft__broker *b, struct weft__broker_event *ev)
{
    const amqp_basic_properties_t *p = &b->envelope.message.properties;
    const amqp_table_t *h = (p->_flags & AMQP_BASIC_HEADERS_FLAG) != 0 ? &p->headers : NULL;
    struct weft__broker_msg *m = &ev->msg;

    memset(m, 0, sizeof(*m));
    ev->kind = WEFT__BROKER_DELIVERY;
    ev->delivery_tag = b->envelope.delivery_tag;
    ev->body = b->envelope.message.body.bytes;
    ev->body_len = b->envelope.message.body.len;
    m->is_redelivered = b->envelope.redelivered != 0;
    m->message_id = bytes_str(p->_flags, AMQP_BASIC_MESSAGE_ID_FLAG, &p->message_id, b->message_id,
                              sizeof(b->message_id));
    m->correlation_id = bytes_str(p->_flags, AMQP_BASIC_CORRELATION_ID_FLAG, &p->correlation_id,
                                  b->correlation_id, sizeof(b->correlation_id));
    m->type = bytes_str(p->_flags, AMQP_BASIC_TYPE_FLAG, &p->type, b->type, sizeof(b->type));
    m->reply_to = bytes_str(p->_flags, AMQP_BASIC_REPLY_TO_FLAG, &p->reply_to, b->reply_to,
                            sizeof(b->reply_to));
    m->routing_key = bytes_str(1, 1, &b->envelope.routing_key, b->routing_key,
                               sizeof(b->routing_key)); /* always present */
    if (h == NULL) {
        return;
    }
    if (field_str(header(h, "traceparent"), b->traceparent, sizeof(b->traceparent))) {
        m->traceparent = b->traceparent;
    }
    if (field_str(header(h, "tracestate"), b->tracestate, sizeof(b->tracestate))) {
        m->tracestate = b->tracestate;
    }
    if (field_str(header(h, "weft-signature"), b->signature, sizeof(b->signature))) {
        m->signature = b->signature;
    }
    m->attempt = field_int(header(h, "x-weft-attempt"));
    m->timestamp_ms = (uint64_t)field_int(header(h, "x-weft-sent-ms"));
    m->delivery_count = field_int(header(h, "x-delivery-count"));
    m->bounces = field_int(header(h, "x-weft-bounces"));
    {
        const amqp_field_value_t *death = header(h, "x-death");
        if (death != NULL && death->kind == AMQP_FIELD_KIND_ARRAY &&
            death->value.array.num_entries > 0 &&
            death->value.array.entries[0].kind == AMQP_FIELD_KIND_TABLE) {
            const amqp_table_t *d = &death->value.array.entries[0].value.table;
            if (field_str(header(d, "reason"), b->death_reason, sizeof(b->death_reason))) {
                m->death_reason = b->death_reason;
            }
            if (field_str(header(d, "queue"), b->death_queue, sizeof(b->death_queue))) {
                m->death_queue = b->death_queue;
            }
            m->death_count = field_int(header(d, "count"));
        }
    }
}

/* Read the frame that is ready. */
static weft_err
read_frame(struct weft__broker *b, struct weft__broker_event *ev)
{
    amqp_frame_t frame;
    struct timeval zero = {0, 0};
    int rc = amqp_simple_wait_frame_noblock(b->conn, &frame, &zero);

    if (rc == AMQP_STATUS_TIMEOUT) {
        ev->kind = WEFT__BROKER_TIMEOUT;
        return WEFT_OK;
    }
    if (rc != AMQP_STATUS_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "broker %s: connection lost: %s", b->url_safe,
                 amqp_error_string2(rc));
        b->is_connected = false;
        ev->kind = WEFT__BROKER_CLOSED;
        return WEFT_OK;
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) {
        ev->kind = WEFT__BROKER_TIMEOUT; /* heartbeats and strays: nothing for the caller */
        return WEFT_OK;
    }
    switch (frame.payload.method.id) {
    case AMQP_BASIC_DELIVER_METHOD: {
        const amqp_basic_deliver_t *d = frame.payload.method.decoded;
        memset(&b->envelope, 0, sizeof(b->envelope));
        b->envelope.channel = frame.channel;
        b->envelope.delivery_tag = d->delivery_tag;
        b->envelope.redelivered = d->redelivered;
        b->envelope.exchange = amqp_bytes_malloc_dup(d->exchange);
        b->envelope.routing_key = amqp_bytes_malloc_dup(d->routing_key);
        b->envelope.consumer_tag = amqp_bytes_malloc_dup(d->consumer_tag);
        b->has_envelope = true;
        if (read_message(b, frame.channel, "read message", ev)) {
            fill_delivery(b, ev);
        }
        return WEFT_OK;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        /* A mandatory publish no queue took: the message follows (its confirm comes after). */
        const amqp_basic_return_t *d = frame.payload.method.decoded;
        memset(&b->envelope, 0, sizeof(b->envelope));
        b->envelope.channel = frame.channel;
        b->envelope.exchange = amqp_bytes_malloc_dup(d->exchange);
        b->envelope.routing_key = amqp_bytes_malloc_dup(d->routing_key);
        b->has_envelope = true;
        if (read_message(b, frame.channel, "read returned message", ev)) {
            fill_delivery(b, ev);
            ev->kind = WEFT__BROKER_RETURNED;
            ev->delivery_tag = 0;
        }
        return WEFT_OK;
    }
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *a = frame.payload.method.decoded;
        ev->kind = WEFT__BROKER_CONFIRM;
        ev->seq = a->delivery_tag;
        ev->is_multiple = a->multiple != 0;
        ev->is_nack = false;
        return WEFT_OK;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *a = frame.payload.method.decoded;
        ev->kind = WEFT__BROKER_CONFIRM;
        ev->seq = a->delivery_tag;
        ev->is_multiple = a->multiple != 0;
        ev->is_nack = true;
        return WEFT_OK;
    }
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
        WEFT_LOG(WEFT_LOG_WARN, "broker %s: the broker closed the %s", b->url_safe,
                 frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ? "channel" : "connection");
        b->is_connected = false;
        ev->kind = WEFT__BROKER_CLOSED;
        return WEFT_OK;
    default:
        ev->kind = WEFT__BROKER_TIMEOUT;
        return WEFT_OK;
    }
}

weft_err
weft__broker_wait(struct weft__broker *b, uint32_t timeout_ms, struct weft__broker_event *ev)
{
    struct pollfd fds[2];

    memset(ev, 0, sizeof(*ev));
    if (b->has_envelope) {
        amqp_destroy_envelope(&b->envelope);
        b->has_envelope = false;
    }
    if (!b->is_connected) {
        ev->kind = WEFT__BROKER_CLOSED;
        return WEFT_OK;
    }
    amqp_maybe_release_buffers(b->conn);
    if (amqp_frames_enqueued(b->conn) || amqp_data_in_buffer(b->conn)) {
        return read_frame(b, ev);
    }
    /* At most a quarter of the heartbeat at a time, so librabbitmq sends ours in time. */
    if (timeout_ms > b->heartbeat_s * 250u) {
        timeout_ms = b->heartbeat_s * 250u;
    }
    fds[0].fd = amqp_get_sockfd(b->conn);
    fds[0].events = POLLIN;
    fds[1].fd = b->wake[0];
    fds[1].events = POLLIN;
    if (poll(fds, 2, (int)timeout_ms) < 0 && errno != EINTR) {
        b->is_connected = false;
        ev->kind = WEFT__BROKER_CLOSED;
        return WEFT_OK;
    }
    if ((fds[1].revents & POLLIN) != 0 && drain_wake(b)) {
        ev->kind = WEFT__BROKER_WOKEN;
        return WEFT_OK;
    }
    return read_frame(b, ev); /* also keeps the heartbeat when nothing arrived */
}

void
weft__broker_set_deadline(struct weft__broker *b, uint64_t deadline_ns)
{
    b->deadline_ns = deadline_ns;
}

weft_err
weft__broker_queue_stats(struct weft__broker *b,
                         const char *queue,
                         uint64_t *messages,
                         uint64_t *consumers)
{
    amqp_queue_declare_ok_t *ok = NULL;
    amqp_rpc_reply_t r;
    char err[256] = "";

    if (!b->is_connected) {
        return WEFT_EIO;
    }
    if (!bound_rpc(b)) {
        /* The reply to a request we give up on would arrive out of turn: close instead. */
        WEFT_LOG(WEFT_LOG_DEBUG, "broker %s: queue stats: no time left", b->url_safe);
        b->is_connected = false;
        return WEFT_EIO;
    }
    ok = amqp_queue_declare(b->conn, CH_RPC, amqp_cstring_bytes(queue), 1, 0, 0, 0,
                            amqp_empty_table);
    r = amqp_get_rpc_reply(b->conn);
    if (ok == NULL && r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
        ((const amqp_channel_close_t *)r.reply.decoded)->reply_code == AMQP_NOT_FOUND) {
        /* No such queue (nothing declared it yet): the broker closed the RPC channel only.
         * Acknowledge and open it again; the connection serves the next request. */
        amqp_channel_close_ok_t close_ok;
        (void)amqp_send_method(b->conn, CH_RPC, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
        amqp_channel_open(b->conn, CH_RPC);
        if (rpc_ok(b, "open channel", err, sizeof(err))) {
            return WEFT_ENOTFOUND;
        }
    } else if (ok == NULL || r.reply_type != AMQP_RESPONSE_NORMAL) {
        reply_text(r, "queue stats", err, sizeof(err));
    }
    if (err[0] != '\0') {
        WEFT_LOG(WEFT_LOG_WARN, "broker %s: %s", b->url_safe, err);
        b->is_connected = false; /* a failed passive declare closes the channel */
        return WEFT_EIO;
    }
    *messages = ok->message_count;
    *consumers = ok->consumer_count;
    return WEFT_OK;
}
