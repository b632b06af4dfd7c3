/* runtime/mcp/transport.h - the two MCP transports as the client sees them (private to
 * runtime/mcp/): a stdio child process (stdio.c) and Streamable HTTP (http.c).
 *
 * A transport moves whole JSON-RPC messages. What arrives is handed to a sink: a message (one
 * line of stdout, one SSE event's data, one application/json body), a stderr line (stdio), or
 * the news that the connection is gone. The sink runs on the transport's reader thread (stdio)
 * or on the thread that made the HTTP request, so it must not wait for another message.
 * Neither transport knows JSON-RPC ids or MCP methods; the client does the matching.
 */
#ifndef WEFT_RUNTIME_MCP_TRANSPORT_H
#define WEFT_RUNTIME_MCP_TRANSPORT_H

#include "runtime/mcp/mcp.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest message (line, SSE event or body) a server may send: larger is a protocol error. */
#define WEFT__MCP_MAX_MESSAGE (8u * 1024u * 1024u)
/* Longest stderr line logged whole; longer lines are cut (the rest is dropped). */
#define WEFT__MCP_MAX_STDERR_LINE 2048u

struct weft__mcp_sink {
    void *ctx;
    /* One message, not NUL-terminated. */
    void (*on_message)(void *ctx, const char *data, size_t len);
    /* A line the server wrote on stderr (without its newline; cut at MAX_STDERR_LINE). */
    void (*on_stderr)(void *ctx, const char *line, size_t len);
    /* The connection is gone: @p why is a sentence fragment ("exited with status 1");
     * @p fail_type is what the calls in flight fail with: "server_down", or "oversized" when
     * the server sent a line over WEFT__MCP_MAX_MESSAGE (the framing is broken, so the
     * connection ends there). Called once. */
    void (*on_closed)(void *ctx, const char *why, const char *fail_type);
};

/* stdio: a child process in its own process group. */
struct weft__mcp_stdio;

/* Spawn the server of @p cfg and start its reader thread.
 * @return WEFT_OK, WEFT_EIO (spawn failed: @p err says why), WEFT_ENOMEM. */
weft_err weft__mcp_stdio_start(const struct weft__mcp_server_config *cfg,
                               const struct weft__mcp_sink *sink,
                               struct weft__mcp_stdio **out,
                               char *err,
                               size_t err_len);
/* Write @p msg and a newline, waiting for pipe space until @p deadline_mono_ns.
 * Thread-safe. @return WEFT_OK, WEFT_EIO (the server is gone), WEFT_ETIMEDOUT. */
weft_err weft__mcp_stdio_send(struct weft__mcp_stdio *s,
                              const char *msg,
                              size_t len,
                              uint64_t deadline_mono_ns);
/* Close stdin, give the server @p grace_ms to exit, then SIGTERM and SIGKILL its process
 * group; join the reader thread and free. Must not run on the reader thread. NULL: no-op. */
void weft__mcp_stdio_stop(struct weft__mcp_stdio *s, unsigned grace_ms);
pid_t weft__mcp_stdio_pid(const struct weft__mcp_stdio *s);

/* Streamable HTTP. */
struct weft__mcp_http;

/* server.address and server.port of @p url. @return WEFT_OK, WEFT_EINVAL (not http(s)),
 * WEFT_ENOMEM. */
weft_err weft__mcp_http_parse_url(const char *url, char *host, size_t host_len, int *port);
/* @return WEFT_OK, WEFT_EINVAL (bad URL), WEFT_ENOMEM. No request is made yet. */
weft_err weft__mcp_http_new(const struct weft__mcp_server_config *cfg,
                            const struct weft__mcp_sink *sink,
                            struct weft__mcp_http **out,
                            char *err,
                            size_t err_len);
/* POST one message and hand every message of the answer (JSON body or SSE events) to the
 * sink before returning; a dropped SSE stream is resumed with GET + Last-Event-ID while
 * @p want_id's answer has not arrived (the sink's caller says when it has, see
 * weft__mcp_http_answered). Thread-safe (one curl handle per request).
 * @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EIO (connection failed or dropped), WEFT_EHTTP
 * (an error status; 404 with a session means the session is gone), WEFT_ELIMIT (an answer
 * over WEFT__MCP_MAX_MESSAGE), WEFT_EPARSE (a garbled answer). @p err says what happened. */
weft_err weft__mcp_http_post(struct weft__mcp_http *h,
                             const char *msg,
                             size_t len,
                             int64_t want_id,
                             uint64_t deadline_mono_ns,
                             long *status,
                             char *err,
                             size_t err_len);
/* The client tells the transport that the answer to @p id has arrived (stops resuming). */
typedef bool (*weft__mcp_answered_fn)(void *ctx, int64_t id);
void weft__mcp_http_set_answered(struct weft__mcp_http *h, weft__mcp_answered_fn fn);
/* After initialize: the negotiated version goes in MCP-Protocol-Version from now on. */
weft_err weft__mcp_http_set_protocol(struct weft__mcp_http *h, const char *version);
/* A copy of the Mcp-Session-Id the server gave (NULL: none). Free with weft__free. */
char *weft__mcp_http_session_id(struct weft__mcp_http *h);
/* server.address and server.port of the URL (borrowed while @p h lives). */
const char *weft__mcp_http_host(const struct weft__mcp_http *h);
int weft__mcp_http_port(const struct weft__mcp_http *h);
/* Open the standalone GET stream for server-initiated messages on a thread of its own (when the
 * server offers one; a 405 ends it quietly). @return WEFT_OK, WEFT_ENOMEM. */
weft_err weft__mcp_http_listen(struct weft__mcp_http *h);
/* DELETE the session (when there is one, bounded by @p timeout_ms), stop the listener, free. */
void weft__mcp_http_close(struct weft__mcp_http *h, unsigned timeout_ms);

#endif /* WEFT_RUNTIME_MCP_TRANSPORT_H */
