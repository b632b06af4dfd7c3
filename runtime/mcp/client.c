/* runtime/mcp/client.c - the MCP client (mcp.h): lifecycle, tools, calls, restarts, spans and
 * metrics over one of the two transports (transport.h).
 *
 * Shape. A client owns at most one connection (`struct conn`: a child process or an HTTP
 * endpoint, plus a generation number). Requests are JSON-RPC with integer ids from one counter;
 * each caller takes a slot in a fixed table of MAX_PENDING, sends, and sleeps on the client's
 * condition variable until the transport's sink fills its slot, the connection is lost, or its
 * deadline passes. So any number of threads share one connection, and nothing grows: a full
 * table answers "overloaded" at once.
 *
 * Threads. stdio: the transport's reader thread runs the sink (answers, notifications, stderr,
 * the end of the child). HTTP: the calling thread runs the sink while its POST streams, and a
 * listener thread runs it for the standalone GET stream. A worker thread per client does what a
 * sink must not do itself because it would wait for an answer: reload the tool list after
 * notifications/tools/list_changed, and answer the server's own requests (ping) over HTTP.
 * Events go to the caller's callback from these threads, never under the client's lock.
 *
 * Lifecycle. start = spawn or connect, initialize (offering weft__mcp_versions[0], accepting
 * any version of the list the server answers), notifications/initialized, tools/list (every
 * page). A connection that is lost (the child exited, its stdout broke the framing, HTTP
 * failed or the session expired) fails every request in flight with "server_down" and
 * marks the client down; the next tools/call starts it again, no sooner than the backoff
 * allows (0.5 s after the previous start, doubling to 30 s while starts keep failing or the
 * server keeps dying before a call succeeds). Restarts are serialised by `start_lock`; a
 * restart waits for every sender on the old connection (`conn_users`) before it stops it.
 *
 * Invariants: `lock` guards everything below it in the struct; a slot is in_use from the
 * request's send to its caller's return and done at most once; the connection is stopped only
 * with conn_users == 0 and never from its own reader thread; secrets (configured env values and
 * headers) reach neither spans nor logs (they are registered with weft_secrets_add and every
 * line of server output that is logged, and every tool result, is scrubbed).
 */
#include "runtime/common/attr_keys.h"
#include "runtime/mcp/content.h"
#include "runtime/mcp/transport.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"

#include <weft/secrets.h>

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PENDING       64
#define MAX_TOOLS         4096
#define MAX_PAGES         64
#define OUTBOX_MAX        16
#define BACKOFF_FIRST_MS  500u
#define BACKOFF_MAX_MS    30000u
#define STOP_GRACE_MS     2000u
#define DEFAULT_TIMEOUT   60000u
#define DEFAULT_INIT      30000u
#define DEFAULT_OUTPUT    (1024u * 1024u)
#define LOG_EXCERPT_BYTES 160
#define STDERR_TAIL_BYTES 1024

const char *const weft__mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
const size_t weft__mcp_version_count = sizeof(weft__mcp_versions) / sizeof(weft__mcp_versions[0]);

/* mcp.client.operation.duration and mcp.client.session.duration buckets (OTel MCP
 * semantic conventions, docs/gen-ai/mcp.md). */
static const double duration_bounds[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1,
                                         2,    5,    10,   30,  60,  120, 300};

enum state { ST_DOWN = 0, ST_STARTING, ST_UP, ST_CLOSING };

struct conn {
    struct weft__mcp_client *c;
    uint64_t gen;
    struct weft__mcp_stdio *stdio;
    struct weft__mcp_http *http;
};

struct pending {
    bool in_use;
    bool is_done;
    int64_t id;
    uint64_t gen;
    json_t *answer;     /* the response message, owned */
    char fail_type[24]; /* done without an answer: "server_down", "protocol", "oversized" */
    char why[320];
    char tool[128]; /* for progress events ("" when not a call) */
};

/* What one request ended with. */
struct rpc_result {
    json_t *result;      /* the answer's "result", owned; NULL on failure */
    char error_type[48]; /* "" or the call's error type */
    char span_error[48]; /* error.type on the span and the metric */
    bool has_code;
    int64_t code;
    char message[512];
};

struct weft__mcp_client {
    struct weft__mcp_server_config cfg; /* deep copy */
    struct weft__mcp_options opts;
    bool is_http;
    char host[256]; /* server.address and server.port (HTTP) */
    int port;
    /* In opts.meter and opts.meter_tee (NULL where there is none). */
    struct weft_instrument *op_duration[2];
    struct weft_instrument *session_duration[2];
    pthread_mutex_t start_lock; /* one (re)start at a time */
    pthread_t worker;
    bool has_worker;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    enum state state;
    uint64_t gen;
    struct conn *conn;
    unsigned conn_users;
    int64_t next_id;
    struct pending pending[MAX_PENDING];
    char down_why[320];
    char protocol[32];
    char session_id[256];
    char server_name[128];
    char *instructions;
    struct weft__mcp_tool *tools;
    size_t tool_count;
    uint64_t tools_version;
    struct weft__mcp_stats stats;
    unsigned backoff_ms;
    uint64_t last_start_ns; /* monotonic; 0: never */
    uint64_t session_start_ns;
    bool is_session_open;
    char last_stderr[200];
    /* The last lines of stderr (newline-separated, oldest dropped first): a server that dies
     * while starting explains itself there (node prints the error, then a stack, then its
     * version), and the start error quotes it. */
    char stderr_tail[STDERR_TAIL_BYTES];
    bool is_worker_stopping;
    bool is_tools_dirty;
    char *outbox[OUTBOX_MAX];
    size_t outbox_len;
};

/* The two histograms in @p meter (NULL: none), at slot @p i. */
static void
make_instruments(struct weft__mcp_client *c, size_t i, struct weft_meter *meter)
{
    if (meter == NULL) {
        return;
    }
    (void)weft_meter_instrument(
        meter, WEFT_INSTRUMENT_HISTOGRAM, "mcp.client.operation.duration", "s",
        "The duration of the MCP request or notification as observed "
        "on the sender from the time it was sent until the response "
        "or ack is received.",
        duration_bounds, sizeof(duration_bounds) / sizeof(duration_bounds[0]), &c->op_duration[i]);
    (void)weft_meter_instrument(
        meter, WEFT_INSTRUMENT_HISTOGRAM, "mcp.client.session.duration", "s",
        "The duration of the MCP session as observed on the MCP client.", duration_bounds,
        sizeof(duration_bounds) / sizeof(duration_bounds[0]), &c->session_duration[i]);
}

/* mcp.client.session.duration, once per session, when it ends: @p fail_type says why it broke
 * (NULL: closed cleanly). Client lock held. */
static void
record_session_locked(struct weft__mcp_client *c, const char *fail_type)
{
    struct weft_attr attrs[7];
    size_t n = 0;
    double s = 0;

    if (!c->is_session_open) {
        return;
    }
    c->is_session_open = false;
    s = (double)(weft__monotonic_ns() - c->session_start_ns) / 1e9;
    attrs[n++] = weft_attr_str("mcp.protocol.version", c->protocol);
    attrs[n++] = weft_attr_str("network.transport", c->is_http ? "tcp" : "pipe");
    if (fail_type != NULL) {
        attrs[n++] = weft_attr_str("error.type", fail_type);
    }
    if (c->is_http) {
        attrs[n++] = weft_attr_str("network.protocol.name", "http");
        attrs[n++] = weft_attr_str("server.address", c->host);
        attrs[n++] = weft_attr_int("server.port", c->port);
    }
    for (size_t i = 0; i < 2; i++) {
        if (c->session_duration[i] != NULL) {
            (void)weft_histogram_record(c->session_duration[i], s, attrs, n);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */

static uint64_t
deadline_after(uint32_t ms)
{
    return weft__monotonic_ns() + (uint64_t)ms * 1000000u;
}

static uint32_t
ms_left(uint64_t deadline)
{
    uint64_t now = weft__monotonic_ns();
    return now >= deadline ? 0 : (uint32_t)((deadline - now) / 1000000u);
}

static void
emit(struct weft__mcp_client *c,
     weft__mcp_event_kind kind,
     const char *tool,
     double progress,
     double total,
     const char *message)
{
    struct weft__mcp_event ev;

    if (c->opts.on_event == NULL) {
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.kind = kind;
    ev.server = c->cfg.name;
    ev.tool = tool;
    ev.progress = progress;
    ev.total = total;
    ev.message = message;
    c->opts.on_event(c->opts.user_data, &ev);
}

/* Log @p len bytes of server output with the configured secrets scrubbed, at most
 * @p max bytes of it. */
static void
log_output(struct weft__mcp_client *c,
           weft_log_level level,
           const char *what,
           const char *text,
           size_t len,
           size_t max)
{
    char *scrubbed = NULL;
    const char *shown = text;
    size_t shown_len = len;
    size_t cut = 0;

    if (weft__log_fn == NULL || level > weft__log_max) {
        return;
    }
    if (weft_secrets_scrub(text, len, &scrubbed) != WEFT_OK) {
        return; /* never log it unscrubbed */
    }
    if (scrubbed != NULL) {
        shown = scrubbed;
        shown_len = strlen(scrubbed);
    }
    cut = weft__utf8_cut(shown, shown_len, max);
    WEFT_LOG(level, "mcp %s: %s%.*s%s", c->cfg.name, what, (int)cut, shown,
             cut < shown_len ? "..." : "");
    weft_secrets_text_free(scrubbed);
}

/* Register @p value as a secret under a name made from @p key (values shorter than the
 * registry's minimum cannot be matched safely and are left out). */
static void
add_secret(const char *key, size_t key_len, const char *value)
{
    char name[48];
    size_t n = 0;

    for (size_t i = 0; i < key_len && n < sizeof(name) - 1; i++) {
        char ch = key[i];
        name[n++] = (isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.') ? ch : '_';
    }
    name[n] = '\0';
    if (n == 0) {
        snprintf(name, sizeof(name), "MCP_SECRET");
    }
    if (value != NULL && strlen(value) >= WEFT_SECRET_MIN_LEN) {
        (void)weft_secrets_add(name, value);
    }
}

static void
register_secrets(const struct weft__mcp_server_config *cfg)
{
    for (size_t i = 0; i < cfg->env_count; i++) {
        const char *eq = strchr(cfg->env[i], '=');
        if (eq != NULL) {
            add_secret(cfg->env[i], (size_t)(eq - cfg->env[i]), eq + 1);
        }
    }
    for (size_t i = 0; i < cfg->header_count; i++) {
        const char *colon = strchr(cfg->headers[i], ':');
        const char *value = NULL;
        const char *space = NULL;
        if (colon == NULL) {
            continue;
        }
        value = colon + 1;
        while (*value == ' ' || *value == '\t') {
            value++;
        }
        add_secret(cfg->headers[i], (size_t)(colon - cfg->headers[i]), value);
        /* "Bearer <token>", "Basic <credentials>": the credential alone too. */
        space = strchr(value, ' ');
        if (space != NULL) {
            add_secret(cfg->headers[i], (size_t)(colon - cfg->headers[i]), space + 1);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Config, tools, results                                                                      */

static char **
copy_strv(char *const *v, size_t n, bool is_null_terminated)
{
    char **out = weft__calloc(n + 1, sizeof(*out));

    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = weft__strdup(v[i]);
        if (out[i] == NULL) {
            for (size_t j = 0; j < i; j++) {
                weft__free(out[j]);
            }
            weft__free(out);
            return NULL;
        }
    }
    (void)is_null_terminated;
    out[n] = NULL;
    return out;
}

static void
free_strv(char **v, size_t n)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        weft__free(v[i]);
    }
    weft__free(v);
}

void
weft__mcp_server_config_cleanup(struct weft__mcp_server_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    weft__free(cfg->name);
    free_strv(cfg->argv, cfg->argc);
    free_strv(cfg->env, cfg->env_count);
    weft__free(cfg->cwd);
    weft__free(cfg->url);
    free_strv(cfg->headers, cfg->header_count);
    memset(cfg, 0, sizeof(*cfg));
}

static bool
is_valid_name(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > 48) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-') {
            return false;
        }
    }
    return true;
}

static weft_err
copy_config(const struct weft__mcp_server_config *in,
            struct weft__mcp_server_config *out,
            char *err,
            size_t err_len)
{
    bool is_stdio = in->argv != NULL && in->argc > 0;
    bool is_http = in->url != NULL && in->url[0] != '\0';

    memset(out, 0, sizeof(*out));
    if (!is_valid_name(in->name)) {
        snprintf(err, err_len, "mcp server name must be 1 to 48 of [A-Za-z0-9_-]");
        return WEFT_EINVAL;
    }
    if (is_stdio == is_http) {
        snprintf(err, err_len, "mcp server '%s': give exactly one of a command and a url",
                 in->name);
        return WEFT_EINVAL;
    }
    for (size_t i = 0; is_stdio && i < in->argc; i++) {
        if (in->argv[i] == NULL) {
            snprintf(err, err_len, "mcp server '%s': argv has a NULL entry", in->name);
            return WEFT_EINVAL;
        }
    }
    for (size_t i = 0; i < in->env_count; i++) {
        if (in->env[i] == NULL || strchr(in->env[i], '=') == NULL || in->env[i][0] == '=') {
            snprintf(err, err_len, "mcp server '%s': env entry %zu is not KEY=VALUE", in->name, i);
            return WEFT_EINVAL;
        }
    }
    for (size_t i = 0; i < in->header_count; i++) {
        if (in->headers[i] == NULL || strchr(in->headers[i], ':') == NULL ||
            strpbrk(in->headers[i], "\r\n") != NULL) {
            snprintf(err, err_len, "mcp server '%s': header %zu is not 'Name: value'", in->name, i);
            return WEFT_EINVAL;
        }
    }
    out->name = weft__strdup(in->name);
    out->argc = is_stdio ? in->argc : 0;
    out->argv = is_stdio ? copy_strv(in->argv, in->argc, true) : NULL;
    out->env_count = in->env_count;
    out->env = in->env_count > 0 ? copy_strv(in->env, in->env_count, false) : NULL;
    out->cwd = in->cwd != NULL ? weft__strdup(in->cwd) : NULL;
    out->url = is_http ? weft__strdup(in->url) : NULL;
    out->header_count = in->header_count;
    out->headers = in->header_count > 0 ? copy_strv(in->headers, in->header_count, false) : NULL;
    out->timeout_ms = in->timeout_ms != 0 ? in->timeout_ms : DEFAULT_TIMEOUT;
    out->init_timeout_ms = in->init_timeout_ms != 0 ? in->init_timeout_ms : DEFAULT_INIT;
    out->max_output = in->max_output != 0 ? in->max_output : DEFAULT_OUTPUT;
    if (out->name == NULL || (is_stdio && out->argv == NULL) ||
        (in->env_count > 0 && out->env == NULL) || (in->cwd != NULL && out->cwd == NULL) ||
        (is_http && out->url == NULL) || (in->header_count > 0 && out->headers == NULL)) {
        weft__mcp_server_config_cleanup(out);
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

static void
tool_cleanup(struct weft__mcp_tool *t)
{
    weft__free(t->name);
    weft__free(t->title);
    weft__free(t->description);
    json_decref(t->input_schema);
    json_decref(t->output_schema);
}

void
weft__mcp_tools_free(struct weft__mcp_tool *tools, size_t count)
{
    if (tools == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        tool_cleanup(&tools[i]);
    }
    weft__free(tools);
}

static char *
dup_or_null(const char *s)
{
    return s != NULL ? weft__strdup(s) : NULL;
}

/* Fill @p t from one entry of a tools/list answer. @return false on ENOMEM or a tool without
 * a name (skipped). */
static weft_err
tool_from_json(const json_t *j, struct weft__mcp_tool *t)
{
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *title = json_string_value(json_object_get(j, "title"));
    const char *desc = json_string_value(json_object_get(j, "description"));
    json_t *in = json_object_get(j, "inputSchema");
    json_t *outs = json_object_get(j, "outputSchema");

    memset(t, 0, sizeof(*t));
    if (name == NULL || name[0] == '\0') {
        return WEFT_EPARSE;
    }
    t->name = weft__strdup(name);
    t->title = dup_or_null(title);
    t->description = dup_or_null(desc);
    t->input_schema =
        json_is_object(in) ? json_deep_copy(in) : json_pack("{s:s}", "type", "object");
    t->output_schema = json_is_object(outs) ? json_deep_copy(outs) : NULL;
    if (t->name == NULL || (title != NULL && t->title == NULL) ||
        (desc != NULL && t->description == NULL) || t->input_schema == NULL ||
        (json_is_object(outs) && t->output_schema == NULL)) {
        tool_cleanup(t);
        memset(t, 0, sizeof(*t));
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

static weft_err
copy_tools(const struct weft__mcp_tool *in, size_t n, struct weft__mcp_tool **out)
{
    struct weft__mcp_tool *v = NULL;

    *out = NULL;
    if (n == 0) {
        return WEFT_OK;
    }
    v = weft__calloc(n, sizeof(*v));
    if (v == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        v[i].name = weft__strdup(in[i].name);
        v[i].title = dup_or_null(in[i].title);
        v[i].description = dup_or_null(in[i].description);
        v[i].input_schema = json_deep_copy(in[i].input_schema);
        v[i].output_schema =
            in[i].output_schema != NULL ? json_deep_copy(in[i].output_schema) : NULL;
        if (v[i].name == NULL || (in[i].title != NULL && v[i].title == NULL) ||
            (in[i].description != NULL && v[i].description == NULL) || v[i].input_schema == NULL ||
            (in[i].output_schema != NULL && v[i].output_schema == NULL)) {
            weft__mcp_tools_free(v, i + 1);
            return WEFT_ENOMEM;
        }
    }
    *out = v;
    return WEFT_OK;
}

void
weft__mcp_call_result_cleanup(struct weft__mcp_call_result *r)
{
    if (r == NULL) {
        return;
    }
    weft__free(r->text);
    json_decref(r->structured);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------------------------------------ */
/* Losing a connection                                                                         */

struct down_note {
    bool is_new;
    char why[320];
};

/* Mark generation @p gen down (when it is still the current one): fail its requests in
 * flight, close its session for the metrics. Called with the lock held; the caller emits
 * SERVER_DOWN from @p note after unlocking. */
static void
mark_down_locked(struct weft__mcp_client *c,
                 uint64_t gen,
                 const char *fail_type,
                 const char *why,
                 struct down_note *note)
{
    note->is_new = false;
    if (gen != c->gen || (c->state != ST_UP && c->state != ST_STARTING)) {
        return;
    }
    c->state = ST_DOWN;
    if (c->last_stderr[0] != '\0') {
        snprintf(c->down_why, sizeof(c->down_why), "mcp server '%s' %s (last stderr line: %s)",
                 c->cfg.name, why, c->last_stderr);
    } else {
        snprintf(c->down_why, sizeof(c->down_why), "mcp server '%s' %s", c->cfg.name, why);
    }
    for (size_t i = 0; i < MAX_PENDING; i++) {
        struct pending *p = &c->pending[i];
        if (p->in_use && !p->is_done && p->gen == gen) {
            p->is_done = true;
            snprintf(p->fail_type, sizeof(p->fail_type), "%s", fail_type);
            snprintf(p->why, sizeof(p->why), "%s", c->down_why);
        }
    }
    record_session_locked(c, fail_type);
    pthread_cond_broadcast(&c->cond);
    note->is_new = true;
    snprintf(note->why, sizeof(note->why), "%s", c->down_why);
}

static void
tell_down(struct weft__mcp_client *c, const struct down_note *note)
{
    if (note->is_new) {
        WEFT_LOG(WEFT_LOG_WARN, "%s", note->why);
        emit(c, WEFT__MCP_SERVER_DOWN, NULL, 0, 0, note->why);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The sink: what the transports deliver                                                       */

static struct pending *
find_pending_locked(struct weft__mcp_client *c, uint64_t gen, int64_t id)
{
    for (size_t i = 0; i < MAX_PENDING; i++) {
        struct pending *p = &c->pending[i];
        if (p->in_use && p->id == id && p->gen == gen) {
            return p;
        }
    }
    return NULL;
}

static bool
json_int_id(const json_t *id, int64_t *out)
{
    if (json_is_integer(id)) {
        *out = (int64_t)json_integer_value(id);
        return true;
    }
    /* Some servers echo ids as strings; ours are decimal integers. */
    if (json_is_string(id)) {
        const char *s = json_string_value(id);
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (end != s && *end == '\0') {
            *out = (int64_t)v;
            return true;
        }
    }
    return false;
}

static void
bad_line(struct weft__mcp_client *c, const char *data, size_t len)
{
    pthread_mutex_lock(&c->lock);
    c->stats.bad_lines++;
    pthread_mutex_unlock(&c->lock);
    log_output(c, WEFT_LOG_WARN, "dropped a line that is not JSON-RPC: ", data, len,
               LOG_EXCERPT_BYTES);
}

static void
queue_outbox(struct weft__mcp_client *c, char *msg)
{
    pthread_mutex_lock(&c->lock);
    if (c->outbox_len < OUTBOX_MAX) {
        c->outbox[c->outbox_len++] = msg;
        msg = NULL;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    if (msg != NULL) {
        WEFT_LOG(WEFT_LOG_WARN, "mcp %s: too many server requests waiting; one dropped",
                 c->cfg.name);
        free(msg);
    }
}

/* A request from the server: weft answers ping and declines the rest (it offers no client
 * capabilities: no roots, sampling or elicitation). */
static void
server_request(struct conn *cn, const json_t *msg)
{
    struct weft__mcp_client *c = cn->c;
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *answer = NULL;
    char *text = NULL;

    if (strcmp(method, "ping") == 0) {
        answer = json_pack("{s:s,s:O,s:{}}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"),
                           "result");
    } else {
        answer =
            json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"),
                      "error", "code", -32601, "message", "Method not found");
    }
    text = answer != NULL ? json_dumps(answer, JSON_COMPACT) : NULL;
    json_decref(answer);
    if (text == NULL) {
        return;
    }
    if (cn->stdio != NULL) {
        (void)weft__mcp_stdio_send(cn->stdio, text, strlen(text), deadline_after(1000));
        free(text);
    } else {
        queue_outbox(c, text); /* an HTTP answer is a POST: not from inside a transfer */
    }
}

static void
notification(struct conn *cn, const json_t *msg)
{
    struct weft__mcp_client *c = cn->c;
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *params = json_object_get(msg, "params");

    if (strcmp(method, "notifications/progress") == 0) {
        int64_t token = 0;
        char tool[128] = "";
        bool is_ours = false;
        if (!json_int_id(json_object_get(params, "progressToken"), &token)) {
            return;
        }
        pthread_mutex_lock(&c->lock);
        {
            struct pending *p = find_pending_locked(c, cn->gen, token);
            if (p != NULL && !p->is_done) {
                snprintf(tool, sizeof(tool), "%s", p->tool);
                is_ours = true;
            }
        }
        pthread_mutex_unlock(&c->lock);
        if (is_ours) {
            emit(c, WEFT__MCP_PROGRESS, tool,
                 json_number_value(json_object_get(params, "progress")),
                 json_number_value(json_object_get(params, "total")),
                 json_string_value(json_object_get(params, "message")));
        }
    } else if (strcmp(method, "notifications/tools/list_changed") == 0) {
        pthread_mutex_lock(&c->lock);
        c->is_tools_dirty = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
    } else if (strcmp(method, "notifications/message") == 0) {
        char *text = json_dumps(json_object_get(params, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
        if (text != NULL) {
            log_output(c, WEFT_LOG_DEBUG, "log: ", text, strlen(text), LOG_EXCERPT_BYTES);
            free(text);
        }
    }
}

static void
one_message(struct conn *cn, json_t *msg, const char *data, size_t len)
{
    struct weft__mcp_client *c = cn->c;
    const json_t *id = json_object_get(msg, "id");
    const json_t *method = json_object_get(msg, "method");
    int64_t n = 0;

    if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0) {
        bad_line(c, data, len);
        return;
    }
    if (json_is_string(method)) {
        if (id == NULL || json_is_null(id)) {
            notification(cn, msg);
        } else {
            server_request(cn, msg);
        }
        return;
    }
    if (id == NULL || (json_object_get(msg, "result") == NULL &&
                       !json_is_object(json_object_get(msg, "error")))) {
        bad_line(c, data, len);
        return;
    }
    if (!json_int_id(id, &n)) {
        WEFT_LOG(WEFT_LOG_DEBUG, "mcp %s: an answer to an id weft never sent", c->cfg.name);
        return;
    }
    pthread_mutex_lock(&c->lock);
    {
        struct pending *p = find_pending_locked(c, cn->gen, n);
        if (p != NULL && !p->is_done) {
            /* A copy the waiter owns alone: jansson's reference counts are not safe to share
             * between threads (json_decref reads the count before its atomic decrement), and
             * this thread still holds the message it came in. */
            p->answer = json_deep_copy(msg);
            if (p->answer == NULL) {
                snprintf(p->fail_type, sizeof(p->fail_type), "out_of_memory");
                snprintf(p->why, sizeof(p->why), "out of memory reading the answer");
            }
            p->is_done = true;
            pthread_cond_broadcast(&c->cond);
        } else {
            WEFT_LOG(WEFT_LOG_DEBUG, "mcp %s: a late answer to request %" PRId64 " dropped",
                     c->cfg.name, n);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

static void
sink_message(void *ctx, const char *data, size_t len)
{
    struct conn *cn = ctx;
    json_error_t jerr;
    json_t *msg = json_loadb(data, len, 0, &jerr);

    if (msg == NULL) {
        bad_line(cn->c, data, len);
        return;
    }
    if (json_is_array(msg)) {
        /* A JSON-RPC batch (2025-03-26 allowed them): each element on its own. */
        for (size_t i = 0; i < json_array_size(msg); i++) {
            one_message(cn, json_array_get(msg, i), data, len);
        }
    } else {
        one_message(cn, msg, data, len);
    }
    json_decref(msg);
}

/* Append line @p line to the newline-separated @p tail, dropping its oldest lines to make
 * room (a line longer than the whole tail keeps its end). */
static void
tail_append(char *tail, size_t cap, const char *line, size_t len)
{
    size_t have = strlen(tail);
    size_t need = len + (have > 0 ? 1 : 0);

    if (len >= cap) {
        line += len - (cap - 1);
        len = cap - 1;
        while (len > 0 && ((unsigned char)*line & 0xC0) == 0x80) {
            line++; /* not in the middle of a UTF-8 sequence */
            len--;
        }
        memcpy(tail, line, len);
        tail[len] = '\0';
        return;
    }
    while (have > 0 && have + need >= cap) {
        const char *nl = strchr(tail, '\n');
        size_t drop = nl != NULL ? (size_t)(nl - tail) + 1 : have;
        memmove(tail, tail + drop, have - drop + 1);
        have -= drop;
        need = len + (have > 0 ? 1 : 0);
    }
    if (have > 0) {
        tail[have++] = '\n';
    }
    memcpy(tail + have, line, len);
    tail[have + len] = '\0';
}

static void
sink_stderr(void *ctx, const char *line, size_t len)
{
    struct conn *cn = ctx;
    struct weft__mcp_client *c = cn->c;
    char *scrubbed = NULL;

    log_output(c, WEFT_LOG_INFO, "", line, len, WEFT__MCP_MAX_STDERR_LINE);
    if (len == 0 || weft_secrets_scrub(line, len, &scrubbed) != WEFT_OK) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    if (cn->gen == c->gen) {
        const char *src = scrubbed != NULL ? scrubbed : line;
        size_t n = scrubbed != NULL ? strlen(scrubbed) : len;
        size_t cut = weft__utf8_cut(src, n, sizeof(c->last_stderr) - 1);
        memcpy(c->last_stderr, src, cut);
        c->last_stderr[cut] = '\0';
        tail_append(c->stderr_tail, sizeof(c->stderr_tail), src, n);
    }
    pthread_mutex_unlock(&c->lock);
    weft_secrets_text_free(scrubbed);
}

static void
sink_closed(void *ctx, const char *why, const char *fail_type)
{
    struct conn *cn = ctx;
    struct weft__mcp_client *c = cn->c;
    struct down_note note;

    pthread_mutex_lock(&c->lock);
    mark_down_locked(c, cn->gen, fail_type, why, &note);
    pthread_mutex_unlock(&c->lock);
    tell_down(c, &note);
}

static bool
http_answered(void *ctx, int64_t id)
{
    struct conn *cn = ctx;
    struct weft__mcp_client *c = cn->c;
    bool is_done = true;

    pthread_mutex_lock(&c->lock);
    {
        struct pending *p = find_pending_locked(c, cn->gen, id);
        is_done = p == NULL || p->is_done;
    }
    pthread_mutex_unlock(&c->lock);
    return is_done;
}

/* ------------------------------------------------------------------------------------------ */
/* Sending                                                                                     */

/* Send @p text on @p cn. HTTP: the answer is delivered before this returns. On failure,
 * @p fail_type and @p why say what the request should end with. */
static weft_err
conn_send(struct weft__mcp_client *c,
          struct conn *cn,
          const char *text,
          int64_t want_id,
          uint64_t deadline,
          char *why,
          size_t why_len,
          bool *is_lost)
{
    weft_err rc = WEFT_OK;

    *is_lost = false;
    if (cn->stdio != NULL) {
        rc = weft__mcp_stdio_send(cn->stdio, text, strlen(text), deadline);
        if (rc == WEFT_EIO) {
            snprintf(why, why_len, "closed its stdin");
            *is_lost = true;
        }
        return rc;
    }
    {
        long status = 0;
        char err[192] = "";
        rc = weft__mcp_http_post(cn->http, text, strlen(text), want_id, deadline, &status, err,
                                 sizeof(err));
        if (rc == WEFT_EIO) {
            snprintf(why, why_len, "is unreachable (%s)", err);
            *is_lost = true;
        } else if (rc == WEFT_EHTTP && status == 404 && c->session_id[0] != '\0') {
            snprintf(why, why_len, "ended the session (HTTP 404)");
            *is_lost = true;
        } else if (rc != WEFT_OK && rc != WEFT_ETIMEDOUT) {
            snprintf(why, why_len, "mcp server '%s' %s", c->cfg.name, err);
        }
    }
    return rc;
}

/* Fire-and-forget notification on the current connection. */
static void
notify(struct weft__mcp_client *c, const char *method, json_t *params, uint32_t timeout_ms)
{
    json_t *msg = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", method);
    char *text = NULL;
    struct conn *cn = NULL;
    char why[256];
    bool is_lost = false;

    if (msg != NULL && params != NULL) {
        json_object_set(msg, "params", params);
    }
    json_decref(params);
    text = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (text == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    if (c->conn != NULL && (c->state == ST_UP || c->state == ST_STARTING)) {
        cn = c->conn;
        c->conn_users++;
    }
    pthread_mutex_unlock(&c->lock);
    if (cn != NULL) {
        (void)conn_send(c, cn, text, -1, deadline_after(timeout_ms), why, sizeof(why), &is_lost);
        pthread_mutex_lock(&c->lock);
        c->conn_users--;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
    free(text);
}

static void
record_operation(struct weft__mcp_client *c,
                 const char *method,
                 const char *tool,
                 const struct rpc_result *r,
                 double seconds)
{
    struct weft_attr attrs[10];
    char code[24];
    size_t n = 0;
    char protocol[32];

    if (c->op_duration[0] == NULL && c->op_duration[1] == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    snprintf(protocol, sizeof(protocol), "%s", c->protocol);
    pthread_mutex_unlock(&c->lock);
    attrs[n++] = weft_attr_str("mcp.method.name", method);
    if (tool != NULL) {
        attrs[n++] = weft_attr_str("gen_ai.tool.name", tool);
        attrs[n++] = weft_attr_str("gen_ai.operation.name", "execute_tool");
    }
    if (r->span_error[0] != '\0') {
        attrs[n++] = weft_attr_str("error.type", r->span_error);
    }
    if (r->has_code) {
        snprintf(code, sizeof(code), "%" PRId64, r->code);
        attrs[n++] = weft_attr_str("rpc.response.status_code", code);
    }
    attrs[n++] = weft_attr_str("network.transport", c->is_http ? "tcp" : "pipe");
    if (protocol[0] != '\0') {
        attrs[n++] = weft_attr_str("mcp.protocol.version", protocol);
    }
    if (c->is_http) {
        attrs[n++] = weft_attr_str("network.protocol.name", "http");
        attrs[n++] = weft_attr_str("server.address", c->host);
        attrs[n++] = weft_attr_int("server.port", c->port);
    }
    for (size_t i = 0; i < 2; i++) {
        if (c->op_duration[i] != NULL) {
            (void)weft_histogram_record(c->op_duration[i], seconds, attrs, n);
        }
    }
}

/* What the span of a request needs besides its method: the tool of a tools/call (NULL
 * otherwise), the parent (NULL or invalid: the thread's current span), and the call's span
 * attributes in place of the client's options.span_attrs (attrs NULL: the client's). */
struct span_of {
    const char *tool;
    const struct weft_span_context *parent;
    const struct weft_attr *attrs;
    size_t attr_count;
};

static const struct span_of no_span_of = {NULL, NULL, NULL, 0};

/* Start the client span of one request. */
static struct weft_span *
start_span(struct weft__mcp_client *c, const char *method, const struct span_of *sp)
{
    const char *tool = sp->tool;
    struct weft__mcp_options extra = c->opts;
    struct weft_span_start_options so;
    struct weft_attr attrs[8 + WEFT__MCP_SPAN_ATTRS_MAX]; /* its own, then the run's */
    size_t n = 0;
    char name[256];

    if (c->opts.tracer == NULL) {
        return NULL;
    }
    if (tool != NULL) {
        snprintf(name, sizeof(name), "%s %s", method, tool);
    } else {
        snprintf(name, sizeof(name), "%s", method);
    }
    attrs[n++] = weft_attr_str("mcp.method.name", method);
    if (tool != NULL) {
        attrs[n++] = weft_attr_str("gen_ai.operation.name", "execute_tool");
        attrs[n++] = weft_attr_str("gen_ai.tool.name", tool);
    }
    attrs[n++] = weft_attr_str("network.transport", c->is_http ? "tcp" : "pipe");
    if (c->is_http) {
        attrs[n++] = weft_attr_str("network.protocol.name", "http");
        attrs[n++] = weft_attr_str("server.address", c->host);
        attrs[n++] = weft_attr_int("server.port", c->port);
    }
    memset(&so, 0, sizeof(so));
    so.kind = WEFT_SPAN_KIND_CLIENT;
    so.parent_context = weft_span_context_is_valid(sp->parent) ? sp->parent : NULL;
    so.attrs = attrs;
    if (sp->attrs != NULL) {
        extra.span_attrs = sp->attrs;
        extra.span_attr_count = sp->attr_count;
    }
    so.attr_count = weft__mcp_span_attrs_add(&extra, attrs, n);
    return weft_span_start(c->opts.tracer, name, &so);
}

/* params._meta: the trace context of the request's span (or, without a span, the caller's)
 * and, for calls, the progress token. */
static weft_err
add_meta(json_t *params,
         struct weft_span *span,
         const struct weft_span_context *parent,
         int64_t progress_token)
{
    struct weft_span_context ctx;
    struct weft_span *current = NULL;
    json_t *meta = json_object_get(params, "_meta");
    char tp[WEFT_TRACEPARENT_LEN + 1];
    bool has_ctx = false;

    if (!json_is_object(meta)) {
        meta = json_object();
        if (meta == NULL || json_object_set_new(params, "_meta", meta) != 0) {
            return WEFT_ENOMEM;
        }
    }
    memset(&ctx, 0, sizeof(ctx));
    if (span != NULL) {
        weft_span_context_of(span, &ctx);
        has_ctx = weft_span_context_is_valid(&ctx);
    }
    if (!has_ctx && weft_span_context_is_valid(parent)) {
        ctx = *parent;
        has_ctx = true;
    }
    if (!has_ctx) {
        current = weft_context_current();
        if (current != NULL) {
            weft_span_context_of(current, &ctx);
            has_ctx = weft_span_context_is_valid(&ctx);
        }
    }
    if (has_ctx && weft_traceparent_format(&ctx, tp, sizeof(tp)) == WEFT_OK) {
        if (json_object_set_new(meta, "traceparent", json_string(tp)) != 0) {
            return WEFT_ENOMEM;
        }
        if (ctx.trace_state != NULL && ctx.trace_state[0] != '\0' &&
            json_object_set_new(meta, "tracestate", json_string(ctx.trace_state)) != 0) {
            return WEFT_ENOMEM;
        }
    }
    if (progress_token >= 0 &&
        json_object_set_new(meta, "progressToken", json_integer(progress_token)) != 0) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

static void
set_failure(struct rpc_result *r, const char *type, const char *message)
{
    snprintf(r->error_type, sizeof(r->error_type), "%s", type);
    snprintf(r->span_error, sizeof(r->span_error), "%s", type);
    snprintf(r->message, sizeof(r->message), "%s", message);
}

/* One request: span, slot, send, wait, answer. @p params is taken. @p is_init lets it run
 * while the connection is STARTING. @return WEFT_OK with @p out filled (out->error_type ""
 * and out->result set on success), or WEFT_ENOMEM. */
static weft_err
rpc(struct weft__mcp_client *c,
    const char *method,
    json_t *params,
    const struct span_of *sp,
    uint64_t deadline,
    bool is_init,
    struct rpc_result *out)
{
    const char *tool = sp->tool;
    struct weft_span *span = NULL;
    struct pending *slot = NULL;
    struct conn *cn = NULL;
    json_t *msg = NULL;
    json_t *answer = NULL;
    char *text = NULL;
    int64_t id = 0;
    uint64_t start_ns = weft__monotonic_ns();
    char why[320] = "";
    bool is_lost = false;
    bool is_timeout = false;
    weft_err rc = WEFT_OK;
    struct down_note note = {0};
    char idbuf[24];
    char protocol[32];
    char session[256];

    memset(out, 0, sizeof(*out));
    span = start_span(c, method, sp);
    if (params == NULL) {
        params = json_object();
    }
    pthread_mutex_lock(&c->lock);
    if (c->conn == NULL || (c->state != ST_UP && !(is_init && c->state == ST_STARTING))) {
        set_failure(out, "server_down",
                    c->down_why[0] != '\0' ? c->down_why : "mcp server is not running");
    } else {
        for (size_t i = 0; i < MAX_PENDING; i++) {
            if (!c->pending[i].in_use) {
                slot = &c->pending[i];
                break;
            }
        }
        if (slot == NULL) {
            set_failure(out, "overloaded", "too many requests in flight");
        } else {
            id = ++c->next_id;
            memset(slot, 0, sizeof(*slot));
            slot->in_use = true;
            slot->id = id;
            slot->gen = c->gen;
            snprintf(slot->tool, sizeof(slot->tool), "%s", tool != NULL ? tool : "");
            cn = c->conn;
            c->conn_users++;
        }
    }
    snprintf(protocol, sizeof(protocol), "%s", c->protocol);
    snprintf(session, sizeof(session), "%s", c->session_id);
    pthread_mutex_unlock(&c->lock);
    if (slot == NULL) {
        json_decref(params);
        goto finish;
    }
    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    weft__rk_set_str(span, WEFT__RK_JSONRPC_REQUEST_ID, idbuf);
    if (protocol[0] != '\0') {
        weft__rk_set_str(span, WEFT__RK_MCP_PROTOCOL_VERSION, protocol);
    }
    if (session[0] != '\0') {
        weft__rk_set_str(span, WEFT__RK_MCP_SESSION_ID, session);
    }
    msg = json_pack("{s:s,s:I,s:s,s:o}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method,
                    "params", params);
    if (msg == NULL || add_meta(json_object_get(msg, "params"), span, sp->parent,
                                strcmp(method, "tools/call") == 0 ? id : -1) != WEFT_OK) {
        rc = WEFT_ENOMEM;
    } else {
        text = json_dumps(msg, JSON_COMPACT);
        rc = text != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    json_decref(msg);
    if (rc == WEFT_OK) {
        rc = conn_send(c, cn, text, id, deadline, why, sizeof(why), &is_lost);
    }
    free(text);
    pthread_mutex_lock(&c->lock);
    c->conn_users--;
    pthread_cond_broadcast(&c->cond);
    if (is_lost) {
        mark_down_locked(c, slot->gen, "server_down", why, &note);
    } else if (rc != WEFT_OK && rc != WEFT_ETIMEDOUT && !slot->is_done) {
        slot->is_done = true;
        snprintf(slot->fail_type, sizeof(slot->fail_type), "%s",
                 rc == WEFT_ENOMEM   ? "out_of_memory"
                 : rc == WEFT_ELIMIT ? "oversized"
                                     : "protocol");
        snprintf(slot->why, sizeof(slot->why), "%s", why[0] != '\0' ? why : weft_strerror(rc));
    }
    while (!slot->is_done && weft__monotonic_ns() < deadline) {
        weft__cond_timedwait_ns(&c->cond, &c->lock, deadline);
    }
    if (!slot->is_done) {
        is_timeout = true;
        set_failure(out, "timeout", "");
        snprintf(out->message, sizeof(out->message),
                 "mcp server '%s' did not answer %s within %u ms", c->cfg.name, method,
                 (unsigned)((weft__monotonic_ns() - start_ns) / 1000000u));
    } else if (slot->answer != NULL) {
        answer = slot->answer;
        slot->answer = NULL;
    } else {
        set_failure(out, slot->fail_type, slot->why);
    }
    slot->in_use = false;
    snprintf(protocol, sizeof(protocol), "%s", c->protocol);
    pthread_mutex_unlock(&c->lock);
    tell_down(c, &note);
    rc = WEFT_OK;
    if (is_timeout && strcmp(method, "initialize") != 0) {
        /* The spec's cancellation: the server may stop the work; a late answer is dropped. */
        char reason[96];
        snprintf(reason, sizeof(reason), "timed out after %u ms",
                 (unsigned)((weft__monotonic_ns() - start_ns) / 1000000u));
        notify(c, "notifications/cancelled",
               json_pack("{s:I,s:s}", "requestId", (json_int_t)id, "reason", reason), 1000);
    }
    if (answer != NULL) {
        json_t *error = json_object_get(answer, "error");
        if (json_is_object(error)) {
            const char *emsg = json_string_value(json_object_get(error, "message"));
            out->has_code = true;
            out->code = (int64_t)json_integer_value(json_object_get(error, "code"));
            snprintf(out->error_type, sizeof(out->error_type), "jsonrpc_%" PRId64, out->code);
            /* The MCP conventions: error.type is the JSON-RPC code as a string. */
            snprintf(out->span_error, sizeof(out->span_error), "%" PRId64, out->code);
            snprintf(out->message, sizeof(out->message), "%s", emsg != NULL ? emsg : "error");
        } else {
            out->result = json_incref(json_object_get(answer, "result"));
            /* isError: the call worked, the tool failed; the conventions' error.type. */
            if (json_is_true(json_object_get(out->result, "isError"))) {
                snprintf(out->span_error, sizeof(out->span_error), "tool_error");
                snprintf(out->message, sizeof(out->message), "the tool reported an error");
            }
        }
        json_decref(answer);
    }
finish:
    if (span != NULL) {
        if (strcmp(method, "initialize") == 0 && out->result != NULL) {
            const char *v = json_string_value(json_object_get(out->result, "protocolVersion"));
            if (v != NULL) {
                weft__rk_set_str(span, WEFT__RK_MCP_PROTOCOL_VERSION, v);
            }
        } else if (protocol[0] != '\0') {
            weft__rk_set_str(span, WEFT__RK_MCP_PROTOCOL_VERSION, protocol);
        }
        if (out->has_code) {
            char code[24];
            snprintf(code, sizeof(code), "%" PRId64, out->code);
            weft__rk_set_str(span, WEFT__RK_RPC_RESPONSE_STATUS_CODE, code);
        }
        if (out->span_error[0] != '\0') {
            weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, out->span_error);
            weft_span_set_status(span, WEFT_STATUS_ERROR, out->message);
        }
    }
    record_operation(c, method, tool, out, (double)(weft__monotonic_ns() - start_ns) / 1e9);
    /* The span ends after the metric so the histogram's exemplar can point at it. */
    weft_span_end(span, 0);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Tools                                                                                        */

/* tools/list, every page, into a new array. @return WEFT_OK or the failure in @p r. */
static weft_err
list_tools(struct weft__mcp_client *c,
           uint64_t deadline,
           struct weft__mcp_tool **tools,
           size_t *count,
           struct rpc_result *r)
{
    struct weft__mcp_tool *v = NULL;
    size_t n = 0;
    char *cursor = NULL;
    weft_err rc = WEFT_OK;

    *tools = NULL;
    *count = 0;
    for (int page = 0; page < MAX_PAGES; page++) {
        json_t *params = cursor != NULL ? json_pack("{s:s}", "cursor", cursor) : NULL;
        const json_t *list = NULL;
        const char *next = NULL;
        rc = rpc(c, "tools/list", params, &no_span_of, deadline, false, r);
        if (rc != WEFT_OK || r->error_type[0] != '\0') {
            goto fail;
        }
        list = json_object_get(r->result, "tools");
        for (size_t i = 0; i < json_array_size(list) && n < MAX_TOOLS; i++) {
            struct weft__mcp_tool *grown = weft__realloc(v, (n + 1) * sizeof(*v));
            weft_err e = WEFT_OK;
            if (grown == NULL) {
                rc = WEFT_ENOMEM;
                goto fail;
            }
            v = grown;
            e = tool_from_json(json_array_get(list, i), &v[n]);
            if (e == WEFT_ENOMEM) {
                rc = WEFT_ENOMEM;
                goto fail;
            }
            if (e == WEFT_OK) {
                n++;
            }
        }
        next = json_string_value(json_object_get(r->result, "nextCursor"));
        weft__free(cursor);
        cursor = next != NULL && next[0] != '\0' ? weft__strdup(next) : NULL;
        json_decref(r->result);
        r->result = NULL;
        if (cursor == NULL) {
            break;
        }
    }
    weft__free(cursor);
    *tools = v;
    *count = n;
    return WEFT_OK;
fail:
    weft__free(cursor);
    weft__mcp_tools_free(v, n);
    return rc;
}

static void
install_tools(struct weft__mcp_client *c, struct weft__mcp_tool *tools, size_t n)
{
    struct weft__mcp_tool *old = NULL;
    size_t old_n = 0;

    pthread_mutex_lock(&c->lock);
    old = c->tools;
    old_n = c->tool_count;
    c->tools = tools;
    c->tool_count = n;
    c->tools_version++;
    pthread_mutex_unlock(&c->lock);
    weft__mcp_tools_free(old, old_n);
}

static void
reload_tools(struct weft__mcp_client *c)
{
    struct rpc_result r;
    struct weft__mcp_tool *tools = NULL;
    size_t n = 0;
    weft_err rc = list_tools(c, deadline_after(c->cfg.timeout_ms), &tools, &n, &r);

    if (rc != WEFT_OK || r.error_type[0] != '\0') {
        WEFT_LOG(WEFT_LOG_WARN, "mcp %s: reloading the tool list failed: %s", c->cfg.name,
                 rc != WEFT_OK ? weft_strerror(rc) : r.message);
        json_decref(r.result);
        return;
    }
    install_tools(c, tools, n);
    emit(c, WEFT__MCP_TOOLS_CHANGED, NULL, 0, 0, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* The worker thread                                                                            */

static void *
worker_main(void *arg)
{
    struct weft__mcp_client *c = arg;

    pthread_mutex_lock(&c->lock);
    while (!c->is_worker_stopping) {
        if (c->outbox_len > 0) {
            char *text = c->outbox[0];
            struct conn *cn = c->state == ST_UP ? c->conn : NULL;
            memmove(c->outbox, c->outbox + 1, (c->outbox_len - 1) * sizeof(c->outbox[0]));
            c->outbox_len--;
            if (cn != NULL) {
                char why[256];
                bool is_lost = false;
                c->conn_users++;
                pthread_mutex_unlock(&c->lock);
                (void)conn_send(c, cn, text, -1, deadline_after(2000), why, sizeof(why), &is_lost);
                pthread_mutex_lock(&c->lock);
                c->conn_users--;
                pthread_cond_broadcast(&c->cond);
            }
            free(text);
            continue;
        }
        if (c->is_tools_dirty && c->state == ST_UP) {
            c->is_tools_dirty = false;
            pthread_mutex_unlock(&c->lock);
            reload_tools(c);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Starting                                                                                     */

static void
conn_stop(struct weft__mcp_client *c, struct conn *cn)
{
    if (cn == NULL) {
        return;
    }
    if (cn->stdio != NULL) {
        weft__mcp_stdio_stop(cn->stdio, STOP_GRACE_MS);
    }
    if (cn->http != NULL) {
        weft__mcp_http_close(cn->http, c->state == ST_CLOSING ? 2000 : 0);
    }
    weft__free(cn);
}

/* Spawn or connect, initialize, notifications/initialized, first tools/list. Called with
 * start_lock held and no connection. @return WEFT_OK or the error with @p err filled. */
static weft_err
start_session(struct weft__mcp_client *c, uint64_t deadline, char *err, size_t err_len)
{
    struct weft__mcp_sink sink;
    struct conn *cn = weft__calloc(1, sizeof(*cn));
    struct rpc_result r;
    struct weft__mcp_tool *tools = NULL;
    size_t tool_count = 0;
    const char *version = NULL;
    const char *instructions = NULL;
    char *instructions_copy = NULL;
    char terr[256] = "";
    bool is_known = false;
    bool has_tools = true;
    weft_err rc = WEFT_OK;

    memset(&r, 0, sizeof(r));
    if (cn == NULL) {
        return WEFT_ENOMEM;
    }
    cn->c = c;
    sink.ctx = cn;
    sink.on_message = sink_message;
    sink.on_stderr = sink_stderr;
    sink.on_closed = sink_closed;
    pthread_mutex_lock(&c->lock);
    cn->gen = ++c->gen;
    c->state = ST_STARTING;
    c->protocol[0] = '\0';
    c->session_id[0] = '\0';
    c->last_stderr[0] = '\0';
    c->stderr_tail[0] = '\0';
    c->down_why[0] = '\0';
    c->last_start_ns = weft__monotonic_ns();
    pthread_mutex_unlock(&c->lock);
    if (c->is_http) {
        rc = weft__mcp_http_new(&c->cfg, &sink, &cn->http, terr, sizeof(terr));
        if (rc == WEFT_OK) {
            weft__mcp_http_set_answered(cn->http, http_answered);
        }
    } else {
        rc = weft__mcp_stdio_start(&c->cfg, &sink, &cn->stdio, terr, sizeof(terr));
    }
    if (rc != WEFT_OK) {
        snprintf(err, err_len, "mcp server '%s': %s", c->cfg.name, terr);
        weft__free(cn);
        pthread_mutex_lock(&c->lock);
        c->state = ST_DOWN;
        snprintf(c->down_why, sizeof(c->down_why), "%s", err);
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    c->conn = cn;
    pthread_mutex_unlock(&c->lock);

    rc = rpc(c, "initialize",
             json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", weft__mcp_versions[0],
                       "capabilities", "clientInfo", "name", "weft", "version", "0.1.0"),
             &no_span_of, deadline, true, &r);
    if (rc != WEFT_OK) {
        goto fail;
    }
    if (strcmp(r.error_type, "timeout") == 0) {
        snprintf(err, err_len, "mcp server '%s' did not answer initialize within %u ms",
                 c->cfg.name, (unsigned)c->cfg.init_timeout_ms);
        rc = WEFT_ETIMEDOUT;
        goto fail;
    }
    if (r.error_type[0] != '\0') {
        if (strncmp(r.error_type, "jsonrpc_", 8) == 0) {
            snprintf(err, err_len, "mcp server '%s' refused initialize: %s (%" PRId64 ")",
                     c->cfg.name, r.message, r.code);
            rc = WEFT_EPARSE;
        } else {
            snprintf(err, err_len, "%s, during initialize", r.message);
            rc = WEFT_EIO;
        }
        goto fail;
    }
    version = json_string_value(json_object_get(r.result, "protocolVersion"));
    for (size_t i = 0; version != NULL && i < weft__mcp_version_count; i++) {
        is_known = is_known || strcmp(version, weft__mcp_versions[i]) == 0;
    }
    if (!is_known) {
        snprintf(err, err_len,
                 "mcp server '%s' speaks protocol version '%s'; weft speaks %s, %s and %s",
                 c->cfg.name, version != NULL ? version : "(none)", weft__mcp_versions[0],
                 weft__mcp_versions[1], weft__mcp_versions[2]);
        rc = WEFT_EPARSE;
        goto fail;
    }
    instructions = json_string_value(json_object_get(r.result, "instructions"));
    instructions_copy = instructions != NULL ? weft__strdup(instructions) : NULL;
    has_tools = json_object_get(json_object_get(r.result, "capabilities"), "tools") != NULL;
    pthread_mutex_lock(&c->lock);
    snprintf(c->protocol, sizeof(c->protocol), "%s", version);
    snprintf(
        c->server_name, sizeof(c->server_name), "%s",
        json_string_value(json_object_get(json_object_get(r.result, "serverInfo"), "name")) != NULL
            ? json_string_value(json_object_get(json_object_get(r.result, "serverInfo"), "name"))
            : "");
    weft__free(c->instructions);
    c->instructions = instructions_copy;
    if (c->is_http) {
        char *sid = weft__mcp_http_session_id(cn->http);
        snprintf(c->session_id, sizeof(c->session_id), "%s", sid != NULL ? sid : "");
        weft__free(sid);
    }
    pthread_mutex_unlock(&c->lock);
    json_decref(r.result);
    r.result = NULL;
    /* From the copy: `version` pointed into the answer, which is gone now. */
    if (c->is_http && weft__mcp_http_set_protocol(cn->http, c->protocol) != WEFT_OK) {
        rc = WEFT_ENOMEM;
        goto fail;
    }
    pthread_mutex_lock(&c->lock);
    c->state = ST_UP;
    c->session_start_ns = weft__monotonic_ns();
    c->is_session_open = true;
    pthread_mutex_unlock(&c->lock);
    notify(c, "notifications/initialized", NULL, ms_left(deadline) + 1);
    if (c->is_http) {
        (void)weft__mcp_http_listen(cn->http);
    }
    if (has_tools) {
        rc = list_tools(c, deadline, &tools, &tool_count, &r);
        if (rc != WEFT_OK) {
            goto fail;
        }
        if (r.error_type[0] != '\0') {
            snprintf(err, err_len, "mcp server '%s': tools/list failed: %s", c->cfg.name,
                     r.message);
            rc = strcmp(r.error_type, "timeout") == 0 ? WEFT_ETIMEDOUT : WEFT_EIO;
            goto fail;
        }
    }
    install_tools(c, tools, tool_count);
    return WEFT_OK;
fail:
    json_decref(r.result);
    {
        struct down_note note;
        pthread_mutex_lock(&c->lock);
        mark_down_locked(c, cn->gen, "server_down", "failed to start", &note);
        c->state = ST_DOWN;
        snprintf(c->down_why, sizeof(c->down_why), "%s", err[0] != '\0' ? err : "start failed");
        c->conn = NULL;
        while (c->conn_users > 0) {
            pthread_cond_wait(&c->cond, &c->lock);
        }
        pthread_mutex_unlock(&c->lock);
    }
    conn_stop(c, cn);
    /* After the reader has stopped: what the server said on stderr before it gave up is the
     * best explanation of a failed start (a missing module, a bad argument). */
    pthread_mutex_lock(&c->lock);
    if (c->stderr_tail[0] != '\0' && err[0] != '\0') {
        size_t used = strlen(err);
        /* hub.c splits the message at this mark: keep them the same. */
        snprintf(err + used, err_len - used, "; its stderr ends:\n%s", c->stderr_tail);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Make sure the server is up: start it again when it is down, after the backoff. */
static weft_err
ensure_up(struct weft__mcp_client *c, uint64_t deadline, char *err, size_t err_len)
{
    struct conn *old = NULL;
    uint64_t earliest = 0;
    weft_err rc = WEFT_OK;
    bool is_restart = false;

    pthread_mutex_lock(&c->start_lock);
    pthread_mutex_lock(&c->lock);
    if (c->state == ST_UP || c->state == ST_CLOSING) {
        rc = c->state == ST_UP ? WEFT_OK : WEFT_ESTATE;
        pthread_mutex_unlock(&c->lock);
        pthread_mutex_unlock(&c->start_lock);
        return rc;
    }
    is_restart = c->last_start_ns != 0;
    earliest = c->last_start_ns + (uint64_t)c->backoff_ms * 1000000u;
    if (is_restart && earliest > weft__monotonic_ns()) {
        if (earliest >= deadline) {
            snprintf(err, err_len, "%s; next start in %u ms (backoff)", c->down_why,
                     (unsigned)((earliest - weft__monotonic_ns()) / 1000000u));
            pthread_mutex_unlock(&c->lock);
            pthread_mutex_unlock(&c->start_lock);
            return WEFT_EIO;
        }
        pthread_mutex_unlock(&c->lock);
        weft__sleep_ms((unsigned)((earliest - weft__monotonic_ns()) / 1000000u) + 1);
        pthread_mutex_lock(&c->lock);
    }
    old = c->conn;
    c->conn = NULL;
    while (c->conn_users > 0) {
        pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    conn_stop(c, old);
    rc = start_session(c, deadline, err, err_len);
    pthread_mutex_lock(&c->lock);
    if (is_restart) {
        c->stats.restarts++;
    }
    /* Starts that keep failing, or a server that keeps dying before a call succeeds, space
     * out; a call that succeeds resets the delay. */
    c->backoff_ms = c->backoff_ms == 0                   ? BACKOFF_FIRST_MS
                    : c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                         : c->backoff_ms * 2;
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->start_lock);
    if (rc == WEFT_OK && is_restart) {
        WEFT_LOG(WEFT_LOG_INFO, "mcp %s: restarted", c->cfg.name);
        emit(c, WEFT__MCP_SERVER_RESTARTED, NULL, 0, 0, NULL);
        emit(c, WEFT__MCP_TOOLS_CHANGED, NULL, 0, 0, NULL);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Public functions                                                                             */

weft_err
weft__mcp_client_new(const struct weft__mcp_server_config *cfg,
                     const struct weft__mcp_options *opts,
                     struct weft__mcp_client **out,
                     char *err,
                     size_t err_len)
{
    struct weft__mcp_client *c = NULL;
    char scratch[8];
    weft_err rc = WEFT_OK;

    if (err == NULL || err_len == 0) {
        err = scratch;
        err_len = sizeof(scratch);
    }
    err[0] = '\0';
    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (cfg == NULL) {
        snprintf(err, err_len, "no mcp server config");
        return WEFT_EINVAL;
    }
    c = weft__calloc(1, sizeof(*c));
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    rc = copy_config(cfg, &c->cfg, err, err_len);
    if (rc != WEFT_OK) {
        weft__free(c);
        return rc;
    }
    if (opts != NULL) {
        c->opts = *opts;
    }
    c->is_http = c->cfg.url != NULL;
    if (c->is_http) {
        rc = weft__mcp_http_parse_url(c->cfg.url, c->host, sizeof(c->host), &c->port);
        if (rc != WEFT_OK) {
            snprintf(err, err_len, "mcp server '%s': url is not an http(s) URL", c->cfg.name);
            weft__mcp_server_config_cleanup(&c->cfg);
            weft__free(c);
            return rc;
        }
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->start_lock, NULL);
    weft__cond_init_monotonic(&c->cond);
    register_secrets(&c->cfg);
    make_instruments(c, 0, c->opts.meter);
    if (c->opts.meter_tee != c->opts.meter) {
        make_instruments(c, 1, c->opts.meter_tee);
    }
    if (pthread_create(&c->worker, NULL, worker_main, c) != 0) {
        weft__mcp_client_free(c);
        return WEFT_ENOMEM;
    }
    c->has_worker = true;
    rc = ensure_up(c, deadline_after(c->cfg.init_timeout_ms), err, err_len);
    if (rc != WEFT_OK) {
        if (err[0] == '\0') {
            snprintf(err, err_len, "mcp server '%s' could not start: %s", c->cfg.name,
                     weft_strerror(rc));
        }
        weft__mcp_client_free(c);
        return rc;
    }
    /* The first start is not a restart; the backoff starts from here. */
    pthread_mutex_lock(&c->lock);
    c->backoff_ms = BACKOFF_FIRST_MS;
    pthread_mutex_unlock(&c->lock);
    *out = c;
    return WEFT_OK;
}

void
weft__mcp_client_free(struct weft__mcp_client *c)
{
    struct conn *cn = NULL;

    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    record_session_locked(c, NULL);
    c->state = ST_CLOSING;
    c->is_worker_stopping = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->has_worker) {
        pthread_join(c->worker, NULL);
    }
    pthread_mutex_lock(&c->lock);
    while (c->conn_users > 0) {
        pthread_cond_wait(&c->cond, &c->lock);
    }
    cn = c->conn;
    c->conn = NULL;
    pthread_mutex_unlock(&c->lock);
    conn_stop(c, cn);
    for (size_t i = 0; i < c->outbox_len; i++) {
        free(c->outbox[i]);
    }
    for (size_t i = 0; i < MAX_PENDING; i++) {
        json_decref(c->pending[i].answer);
    }
    weft__mcp_tools_free(c->tools, c->tool_count);
    weft__free(c->instructions);
    weft__mcp_server_config_cleanup(&c->cfg);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->start_lock);
    weft__free(c);
}

const char *
weft__mcp_client_name(const struct weft__mcp_client *client)
{
    return client != NULL ? client->cfg.name : NULL;
}

const char *
weft__mcp_client_protocol(const struct weft__mcp_client *client)
{
    return client != NULL && client->protocol[0] != '\0' ? client->protocol : NULL;
}

const char *
weft__mcp_client_session_id(const struct weft__mcp_client *client)
{
    return client != NULL && client->session_id[0] != '\0' ? client->session_id : NULL;
}

const char *
weft__mcp_client_server_name(const struct weft__mcp_client *client)
{
    return client != NULL && client->server_name[0] != '\0' ? client->server_name : NULL;
}

char *
weft__mcp_client_instructions(struct weft__mcp_client *client)
{
    char *copy = NULL;

    if (client == NULL) {
        return NULL;
    }
    /* A copy under the lock: a restart replaces them (a hub reads them from other threads). */
    pthread_mutex_lock(&client->lock);
    copy = client->instructions != NULL ? weft__strdup(client->instructions) : NULL;
    pthread_mutex_unlock(&client->lock);
    return copy;
}

weft_err
weft__mcp_client_tools(struct weft__mcp_client *client,
                       struct weft__mcp_tool **tools,
                       size_t *count,
                       uint64_t *version)
{
    weft_err rc = WEFT_OK;

    if (client == NULL || tools == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&client->lock);
    rc = copy_tools(client->tools, client->tool_count, tools);
    *count = rc == WEFT_OK ? client->tool_count : 0;
    if (version != NULL) {
        *version = client->tools_version;
    }
    pthread_mutex_unlock(&client->lock);
    return rc;
}

weft_err
weft__mcp_client_call(struct weft__mcp_client *client,
                      const char *tool,
                      const json_t *args,
                      const struct weft_span_context *parent,
                      uint32_t timeout_ms,
                      struct weft__mcp_call_result *out)
{
    return weft__mcp_client_call_attrs(client, tool, args, parent, timeout_ms, NULL, 0, out);
}

weft_err
weft__mcp_client_call_attrs(struct weft__mcp_client *client,
                            const char *tool,
                            const json_t *args,
                            const struct weft_span_context *parent,
                            uint32_t timeout_ms,
                            const struct weft_attr *span_attrs,
                            size_t span_attr_count,
                            struct weft__mcp_call_result *out)
{
    struct weft__mcp_client *c = client;
    struct span_of sp = {tool, parent, span_attrs, span_attr_count};
    struct rpc_result r;
    json_t *params = NULL;
    uint64_t deadline = 0;
    char err[320] = "";
    weft_err rc = WEFT_OK;
    bool is_failed = false;
    uint64_t bad_before = 0;
    uint64_t bad_after = 0;

    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (c == NULL || tool == NULL || tool[0] == '\0' || out == NULL ||
        (args != NULL && !json_is_object(args))) {
        return WEFT_EINVAL;
    }
    deadline = deadline_after(timeout_ms != 0 ? timeout_ms : c->cfg.timeout_ms);
    pthread_mutex_lock(&c->lock);
    c->stats.calls++;
    bad_before = c->stats.bad_lines;
    pthread_mutex_unlock(&c->lock);
    if (ensure_up(c, deadline, err, sizeof(err)) != WEFT_OK) {
        pthread_mutex_lock(&c->lock);
        if (err[0] != '\0') {
            snprintf(c->down_why, sizeof(c->down_why), "%s", err);
        }
        pthread_mutex_unlock(&c->lock);
    }
    /* A deep copy: the caller's arguments may be shared with other threads, and jansson's
     * reference counts are not atomic. */
    params = json_pack("{s:s,s:o}", "name", tool, "arguments",
                       args != NULL ? json_deep_copy(args) : json_object());
    if (params == NULL) {
        return WEFT_ENOMEM;
    }
    rc = rpc(c, "tools/call", params, &sp, deadline, false, &r);
    if (rc != WEFT_OK) {
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    bad_after = c->stats.bad_lines;
    pthread_mutex_unlock(&c->lock);
    if (strcmp(r.error_type, "timeout") == 0 && bad_after > bad_before) {
        /* The server wrote lines that are not JSON-RPC while this call waited, and no answer
         * came: most likely the answer was among them. A protocol error says so better than
         * a timeout (with calls in parallel, another call's garbage may be the cause). */
        snprintf(r.error_type, sizeof(r.error_type), "protocol");
        snprintf(r.message, sizeof(r.message),
                 "mcp server '%s' wrote %" PRIu64 " line(s) that are not JSON-RPC and no answer "
                 "to tools/call %.64s within %u ms",
                 c->cfg.name, bad_after - bad_before, tool,
                 (unsigned)(timeout_ms != 0 ? timeout_ms : c->cfg.timeout_ms));
    }
    if (r.error_type[0] != '\0') {
        is_failed = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", r.error_type);
        out->is_error = true;
        rc = weft__mcp_fill_text(out, r.message, strlen(r.message), c->cfg.max_output);
    } else {
        rc = weft__mcp_result_fill(out, r.result, c->cfg.max_output);
    }
    json_decref(r.result);
    if (rc != WEFT_OK) {
        weft__mcp_call_result_cleanup(out);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    if (out->is_error) {
        c->stats.errors++;
    }
    if (strcmp(out->error_type, "timeout") == 0) {
        c->stats.timeouts++;
    }
    if (out->is_truncated) {
        c->stats.truncated++;
    }
    if (!is_failed) {
        c->backoff_ms = BACKOFF_FIRST_MS; /* the server answers: a later crash starts afresh */
    }
    pthread_mutex_unlock(&c->lock);
    return WEFT_OK;
}

weft_err
weft__mcp_client_ping(struct weft__mcp_client *client, uint32_t timeout_ms)
{
    struct rpc_result r;
    weft_err rc = WEFT_OK;

    if (client == NULL) {
        return WEFT_EINVAL;
    }
    rc = rpc(client, "ping", NULL, &no_span_of,
             deadline_after(timeout_ms != 0 ? timeout_ms : client->cfg.timeout_ms), false, &r);
    json_decref(r.result);
    if (rc != WEFT_OK) {
        return rc;
    }
    if (strcmp(r.error_type, "timeout") == 0) {
        return WEFT_ETIMEDOUT;
    }
    return r.error_type[0] == '\0' ? WEFT_OK : WEFT_EIO;
}

void
weft__mcp_client_stats(const struct weft__mcp_client *client, struct weft__mcp_stats *out)
{
    struct weft__mcp_client *c = (struct weft__mcp_client *)client;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}
