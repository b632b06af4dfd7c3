/* runtime/mcp/mcp.h - a Model Context Protocol client: one connection to one MCP server, over
 * stdio (a child process, newline-delimited JSON-RPC on its stdin/stdout) or Streamable HTTP
 * (POST to the endpoint; answers as application/json or text/event-stream).
 *
 * What it does for its caller: starts the server (spawn or connect), runs the lifecycle
 * (initialize with version negotiation, notifications/initialized, ping, clean shutdown), keeps
 * the server's tool list (tools/list with pagination, reloaded on
 * notifications/tools/list_changed), calls tools (tools/call, structured and unstructured content,
 * isError), reports progress notifications, and survives a server that crashes, hangs or writes
 * garbage: in-flight calls fail with a clear error naming the server, and the server is restarted
 * with backoff on the next use. Each request is a client span (`{mcp.method.name} {target}`, per
 * the OTel MCP semantic conventions) under the caller's span, with the trace context in
 * params._meta; mcp.client.operation.duration and mcp.client.session.duration go to the given
 * meter.
 *
 * Thread-safety: a client may be used from several threads at once (calls are multiplexed by
 * JSON-RPC id); every function below is thread-safe except weft__mcp_client_free(), which no
 * call may overlap.
 */
#ifndef WEFT_RUNTIME_MCP_H
#define WEFT_RUNTIME_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>
#include <weft/metrics.h>
#include <weft/trace.h>

/* Protocol revisions this client speaks, newest first; initialize offers the first. */
extern const char *const weft__mcp_versions[];
extern const size_t weft__mcp_version_count;

/* One server as configured (workflow `mcp_servers`, or an `mcpServers` file). Exactly one of
 * argv (stdio) and url (Streamable HTTP) is set. */
struct weft__mcp_server_config {
    char *name; /* [A-Za-z0-9_-]{1,48}: the agent is mcp_agent_<name> */
    /* stdio */
    char **argv; /* argv[0] searched in PATH when it has no '/'; NULL-terminated, argc entries */
    size_t argc;
    char **env; /* "KEY=VALUE" added to weft's environment for the child; values are secrets */
    size_t env_count;
    char *cwd; /* NULL: weft's working directory */
    /* Streamable HTTP */
    char *url;
    char **headers; /* "Name: value"; values are secrets (Authorization, API keys) */
    size_t header_count;
    /* Limits (0: the default) */
    uint32_t timeout_ms;      /* per request; default 60000 */
    uint32_t init_timeout_ms; /* start + initialize + first tools/list; default 30000 */
    size_t max_output;        /* bytes of a tool result's text kept; default 1 MiB */
};

void weft__mcp_server_config_cleanup(struct weft__mcp_server_config *cfg); /* NULL: no-op */

/* A tool as the server lists it. */
struct weft__mcp_tool {
    char *name;
    char *title;           /* NULL: none */
    char *description;     /* NULL: none */
    json_t *input_schema;  /* owned; {"type":"object"} when the server gave none */
    json_t *output_schema; /* owned; NULL: none */
};

void weft__mcp_tools_free(struct weft__mcp_tool *tools, size_t count);

typedef enum weft__mcp_event_kind {
    WEFT__MCP_TOOLS_CHANGED = 0, /* the tool list was reloaded (list_changed or a restart) */
    WEFT__MCP_PROGRESS,          /* a notifications/progress for a call in flight */
    WEFT__MCP_SERVER_DOWN,       /* the server exited, hung or broke the protocol */
    WEFT__MCP_SERVER_RESTARTED   /* started again and initialized */
} weft__mcp_event_kind;

struct weft__mcp_event {
    weft__mcp_event_kind kind;
    const char *server;  /* the server's name */
    const char *tool;    /* PROGRESS: the tool called; else NULL */
    double progress;     /* PROGRESS */
    double total;        /* PROGRESS: 0 when unknown */
    const char *message; /* PROGRESS: may be NULL; SERVER_DOWN: why */
};

/* Called on one of the client's own threads (the stdio reader, the HTTP request or listener
 * thread, the worker that reloads the tool list, or the caller of a call that restarted the
 * server), never under the client's lock; it must not call back into the client. */
typedef void (*weft__mcp_event_fn)(void *user_data, const struct weft__mcp_event *event);

struct weft__mcp_options {
    struct weft_tracer *tracer;   /* NULL: no spans */
    struct weft_meter *meter;     /* NULL: no metrics */
    struct weft_meter *meter_tee; /* a second meter recording the same (NULL: none): a run's
                                   * own meter (stored with it) besides the caller's */
    weft__mcp_event_fn on_event;
    void *user_data;
    /* Extra attributes on every span of the client (a run's options.span_attrs and its root
     * id); borrowed for the client's life. NULL: none. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* Append @p o's span_attrs (at most WEFT__MCP_SPAN_ATTRS_MAX) to @p attrs, which holds @p n and
 * has room for that many more. @return the new count. */
#define WEFT__MCP_SPAN_ATTRS_MAX 17
static inline size_t
weft__mcp_span_attrs_add(const struct weft__mcp_options *o, struct weft_attr *attrs, size_t n)
{
    size_t extra = o->span_attrs == NULL                           ? 0
                   : o->span_attr_count < WEFT__MCP_SPAN_ATTRS_MAX ? o->span_attr_count
                                                                   : WEFT__MCP_SPAN_ATTRS_MAX;

    for (size_t i = 0; i < extra; i++) {
        attrs[n + i] = o->span_attrs[i];
    }
    return n + extra;
}

struct weft__mcp_client;

/* Make a client for @p cfg (copied) and start it: spawn or connect, initialize, list the
 * tools, all within cfg->init_timeout_ms. The server's stderr (stdio) goes to weft's log at
 * INFO, one line at a time, prefixed "mcp <name>: ".
 * @return WEFT_OK; WEFT_EINVAL (bad config); WEFT_EIO (could not start, crashed, or answered
 * garbage), WEFT_ETIMEDOUT (no answer to initialize), WEFT_EPARSE (no common protocol version,
 * or an error answer to initialize: weft_err has no EPROTO), with a sentence naming the server
 * in @p err; WEFT_ENOMEM. *out is NULL on error. Ownership: free with weft__mcp_client_free(). */
weft_err weft__mcp_client_new(const struct weft__mcp_server_config *cfg,
                              const struct weft__mcp_options *opts,
                              struct weft__mcp_client **out,
                              char *err,
                              size_t err_len);

/* Shut down cleanly (stdio: close stdin, wait, SIGTERM, SIGKILL; HTTP: DELETE the session)
 * and free. NULL is a no-op. */
void weft__mcp_client_free(struct weft__mcp_client *client);

/* The server's name and its negotiated protocol version: borrowed until the client is freed
 * (a restart may rewrite the protocol: read it where no restart can happen). */
const char *weft__mcp_client_name(const struct weft__mcp_client *client);
const char *weft__mcp_client_protocol(const struct weft__mcp_client *client);

/* The server's `instructions` from its initialize answer, copied (NULL: none, or out of
 * memory). Ownership: free with weft__free(). */
char *weft__mcp_client_instructions(struct weft__mcp_client *client);
const char *weft__mcp_client_session_id(const struct weft__mcp_client *client);
const char *weft__mcp_client_server_name(const struct weft__mcp_client *client);

/* A copy of the current tool list. *version increases each time the list is reloaded.
 * @return WEFT_OK, WEFT_ENOMEM. Ownership: free with weft__mcp_tools_free(). */
weft_err weft__mcp_client_tools(struct weft__mcp_client *client,
                                struct weft__mcp_tool **tools,
                                size_t *count,
                                uint64_t *version);

/* What a tools/call returned. */
struct weft__mcp_call_result {
    bool is_error;       /* isError from the server, or the call failed (error_type says) */
    char error_type[48]; /* "" (ok), "tool_error" (isError), "timeout", "server_down",
                          * "protocol" (broke JSON-RPC; also a timeout after lines that
                          * were not JSON-RPC), "oversized" (a message over
                          * WEFT__MCP_MAX_MESSAGE, 8 MiB), "jsonrpc_<code>", "overloaded"
                          * (more than 64 requests in flight on this client) */
    char *text;          /* the content as text for the model (text items joined, other items
                          * as JSON); never NULL after a call that returned WEFT_OK */
    json_t *structured;  /* structuredContent, or NULL */
    bool is_truncated;   /* text was cut at max_output */
};

void weft__mcp_call_result_cleanup(struct weft__mcp_call_result *r);

/* Call tool @p tool with @p args (a JSON object) and wait at most @p timeout_ms (0: the
 * server's timeout_ms). The client span nests under @p parent (NULL or invalid: the thread's
 * current span), and parent's traceparent goes in params._meta. On timeout a
 * notifications/cancelled is sent. A server that is down is restarted first (backoff: 0.5 s,
 * doubling to 30 s, between attempts).
 * @return WEFT_OK when @p out is filled (also for isError and for calls that failed: see
 * out->error_type); WEFT_EINVAL; WEFT_ENOMEM. */
weft_err weft__mcp_client_call(struct weft__mcp_client *client,
                               const char *tool,
                               const json_t *args,
                               const struct weft_span_context *parent,
                               uint32_t timeout_ms,
                               struct weft__mcp_call_result *out);

/* weft__mcp_client_call() whose span carries @p span_attrs (@p span_attr_count of them, at
 * most WEFT__MCP_SPAN_ATTRS_MAX) in place of the client's options.span_attrs: a hub started once
 * and shared by the tasks of several runs (`weft worker`) gives each call its own run's
 * attributes. @p span_attrs NULL: the client's. Borrowed for the call. */
weft_err weft__mcp_client_call_attrs(struct weft__mcp_client *client,
                                     const char *tool,
                                     const json_t *args,
                                     const struct weft_span_context *parent,
                                     uint32_t timeout_ms,
                                     const struct weft_attr *span_attrs,
                                     size_t span_attr_count,
                                     struct weft__mcp_call_result *out);

/* ping. @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EIO. */
weft_err weft__mcp_client_ping(struct weft__mcp_client *client, uint32_t timeout_ms);

/* Per-client counters for weft's own metrics and summaries. */
struct weft__mcp_stats {
    uint64_t calls;     /* tools/call requests sent */
    uint64_t errors;    /* of them: isError or failed */
    uint64_t timeouts;  /* of them: timed out (cancelled) */
    uint64_t truncated; /* results cut at max_output */
    uint64_t restarts;  /* times the server was started again */
    uint64_t bad_lines; /* lines from the server that were not JSON-RPC (logged, dropped) */
};

void weft__mcp_client_stats(const struct weft__mcp_client *client, struct weft__mcp_stats *out);

#endif /* WEFT_RUNTIME_MCP_H */
