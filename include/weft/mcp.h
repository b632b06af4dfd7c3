/* include/weft/mcp.h - Model Context Protocol servers, as a workflow configures them
 * ("mcp_servers", "mcp_servers_file") or as editors and desktop clients list them in a JSON file
 * {"mcpServers": {...}} (docs/mcp.md).
 *
 * Runs start their workflow's servers themselves: each becomes agent mcp_agent_<name>. These
 * functions are for looking at servers from outside a run: list what one offers, check that
 * a workflow's servers start.
 *
 * weft is an MCP server too (`weft mcp serve`, docs/mcp.md): struct weft_mcp_server answers
 * MCP requests with tools over weft's own stores (runs, plans, traces, spans; starting a run of
 * a workflow), over stdio (weft_mcp_server_serve_stdio()) or Streamable HTTP
 * (weft_mcp_http_start()), or one message at a time for a transport of the caller's
 * (weft_mcp_server_handle()).
 *
 * Thread-safety: weft_mcp_list(), weft_mcp_check() and weft_mcp_text_free() may be called from
 * any thread; they share nothing. A struct weft_mcp_server may be used from several threads:
 * it handles one message at a time (a start_run call holds it for the whole run).
 * weft_mcp_server_free() must not overlap any other call on the server, and an HTTP transport
 * on it must be stopped first.
 */
#ifndef WEFT_MCP_H
#define WEFT_MCP_H

#include <signal.h>
#include <weft/common.h>
#include <weft/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Start server @p server of @p file (a workflow file, or a JSON file with "mcpServers"),
 * initialize it, list its tools and shut it down.
 * @param out receives a JSON object: {"server", "transport" ("stdio" or "http"),
 * "protocol_version", "instructions" (or null), "tools": [{"name", "title", "description",
 * "input_schema", "output_schema"}]}.
 * @param error receives a sentence naming the file, the server and the problem on failure.
 * @return WEFT_OK; WEFT_ENOTFOUND (no such server in the file: @p error lists the names);
 * WEFT_EPARSE (the file is not valid); the server's start error (WEFT_EIO, WEFT_ETIMEDOUT,
 * WEFT_EPARSE for no common protocol version); WEFT_EINVAL; WEFT_ENOMEM. *out is NULL on error.
 * Ownership: *out is new; free it with weft_mcp_text_free(). */
WEFT_API weft_err
weft_mcp_list(const char *file, const char *server, char **out, char *error, size_t error_len);

/** Start every MCP server of @p workflow and list its tools, then shut them down.
 * A server that does not start or lists no tools adds a diagnostic at path
 * "mcp_servers.<name>" (the workflow's file) with the reason; @p report, when not NULL,
 * receives one line per server that did ("mcp server NAME: N tools, protocol VERSION").
 * @return WEFT_OK when every server started; WEFT_EIO when one did not (see @p diags);
 * WEFT_EINVAL; WEFT_ENOMEM.
 * Ownership: borrows @p workflow; *report is new (weft_mcp_text_free()), NULL when there
 * are no servers. */
WEFT_API weft_err weft_mcp_check(const struct weft_workflow *workflow,
                                 struct weft_diags *diags,
                                 char **report);

/** Free text returned by this header's functions. NULL is a no-op.
 * Errors: none. Ownership: takes @p text. */
WEFT_API void weft_mcp_text_free(char *text);

/* ------------------------------------------------------------------------------------------ */
/* weft as an MCP server.                                                                       */

struct weft_mcp_server; /* the tools and the protocol, transport-neutral */
struct weft_mcp_http;   /* a Streamable HTTP endpoint serving one struct weft_mcp_server */
struct weft_provider;
struct weft_meter;

/** What a server reads and where start_run may look. Every field may be zero. */
struct weft_mcp_server_options {
    /** State database (runs): a file or a PostgreSQL URL; NULL means $WEFT_STATE_URL, else
     * $WEFT_HOME/state.db, as weft_runs_list() resolves it. */
    const char *state_path;
    /** Span store (traces); NULL means weft_store_default_path(). */
    const char *db_path;
    /** start_run runs only workflow files below this directory (symbolic links resolved);
     * NULL means the working directory. */
    const char *workflows_dir;
    /** Runs started by start_run record their spans here (flushed before the tool answers);
     * NULL: those runs are not traced. Borrowed: it must outlive the server. */
    struct weft_provider *provider;
    /** Runs started by start_run count their metrics here; may be NULL. Borrowed. */
    struct weft_meter *meter;
    /** When it becomes non-zero, a run started by start_run stops (as `weft run` does on
     * SIGINT) and weft_mcp_server_serve_stdio() returns. May be NULL. Borrowed. */
    const volatile sig_atomic_t *abort_flag;
    /** Largest message accepted (a stdio line, an HTTP body); 0 means 4 MiB. */
    size_t max_message_bytes;
    /** Largest tool result (its JSON text); longer results are cut and say so; 0 means 1 MiB,
     * at least 64 KiB. */
    size_t max_result_bytes;
};

/** Create a server with tools list_runs, show_run, get_trace, get_span, search_spans,
 * why_failed and start_run (docs/mcp.md), speaking MCP revisions 2025-11-25, 2025-06-18 and
 * 2025-03-26. Nothing is opened until a tool needs it.
 * @param options may be NULL (every default).
 * @param out receives the server; NULL on failure.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOTFOUND (@p options->workflows_dir does
 * not exist), WEFT_ENOMEM.
 * Ownership: copies the strings of @p options and borrows its pointers (provider, meter,
 * abort flag) for the server's life; caller owns *out, release with weft_mcp_server_free().
 * Errors: as @return says; nothing is logged. */
WEFT_API weft_err weft_mcp_server_new(const struct weft_mcp_server_options *options,
                                      struct weft_mcp_server **out);

/** Free a server. NULL is a no-op.
 * Errors: none. Ownership: takes @p server. Stop its HTTP endpoint first. */
WEFT_API void weft_mcp_server_free(struct weft_mcp_server *server);

/** Handle one JSON-RPC message (one object, as a stdio line or an HTTP body carries it).
 * Protocol errors become JSON-RPC error answers (-32700 parse error, -32600 invalid request,
 * -32601 unknown method, -32602 invalid params, among them an unknown tool); a tool that
 * fails (unknown run, bad arguments) answers a result with isError true. Notifications and
 * responses get no answer.
 * @param message the message's bytes (need not be NUL-terminated).
 * @param len its length; longer than max_message_bytes is answered with -32600.
 * @param response receives the answer's JSON text, or NULL when there is none.
 * @return WEFT_OK (also for protocol errors: they are in *response), WEFT_EINVAL (NULL
 * @p server, @p message or @p response), WEFT_ENOMEM (*response is NULL).
 * Ownership: borrows @p message; *response is new, free it with weft_mcp_text_free().
 * Errors: as @return says. */
WEFT_API weft_err weft_mcp_server_handle(struct weft_mcp_server *server,
                                         const char *message,
                                         size_t len,
                                         char **response);

/** Serve MCP over stdio: read newline-delimited messages from @p in_fd, write each answer and
 * a newline to @p out_fd, until end of input (or the abort flag). Nothing else is written to
 * @p out_fd; logs go through weft_log_set_handler(). A line longer than max_message_bytes is
 * skipped and answered with -32600.
 * @return WEFT_OK at end of input or on abort, WEFT_EINVAL (NULL @p server or a negative
 * descriptor), WEFT_EIO (reading or writing failed), WEFT_ENOMEM.
 * Ownership: borrows the descriptors (not closed).
 * Errors: as @return says. */
WEFT_API weft_err weft_mcp_server_serve_stdio(struct weft_mcp_server *server,
                                              int in_fd,
                                              int out_fd);

/** How the Streamable HTTP endpoint listens. Every field may be zero. */
struct weft_mcp_http_options {
    /** "HOST:PORT" with an IPv4 host or "localhost"; NULL means "127.0.0.1:8765". Port 0 picks
     * a free one (weft_mcp_http_port()). */
    const char *addr;
    /** When set, every request must carry "Authorization: Bearer <token>" (401 otherwise). */
    const char *token;
    /** Sessions kept at once; the least recently used is ended beyond it. 0 means 64. */
    size_t max_sessions;
    /** On a loopback address (127.0.0.0/8), Host names answered besides "localhost",
     * "127.x.y.z" and "[::1]" (each a name without a port, compared case-insensitively; any
     * port passes); other Host names, and requests without one, get 421. NULL with 0: none.
     * Ignored on other addresses. */
    const char *const *allowed_hosts;
    /** How many names @c allowed_hosts holds (at most 64). */
    size_t allowed_host_count;
};

/** Serve @p server at POST/DELETE /mcp on a thread of its own, until weft_mcp_http_stop().
 * A session id (Mcp-Session-Id) is issued by initialize and required afterwards (400 when
 * missing, 404 when unknown or ended); a request whose Origin is not a loopback origin is
 * refused (403), and on a loopback address one whose Host is neither a loopback name nor an
 * allowed one (421: no web page reaches the server through DNS rebinding); GET is 405 (no
 * server-initiated stream). Answers are application/json. A client address holds at most 32
 * connections at once, and a connection silent for 5 s (its headers unfinished, or idle
 * between requests) is closed, so half-open connections cannot lock clients out.
 * @param out receives the endpoint; NULL on failure.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument, @p options->addr is not HOST:PORT, an allowed
 * host name that is empty, holds a port or a character other than letters, digits, '.', '-',
 * '_', or more than 64 of them), WEFT_EIO
 * (cannot listen there: logged), WEFT_ENOMEM.
 * Ownership: borrows @p server until weft_mcp_http_stop(); copies @p options; caller owns
 * *out.
 * Errors: as @return says. */
WEFT_API weft_err weft_mcp_http_start(struct weft_mcp_server *server,
                                      const struct weft_mcp_http_options *options,
                                      struct weft_mcp_http **out);

/** The port @p http listens on (0 for NULL).
 * Errors: none. Ownership: none. */
WEFT_API unsigned weft_mcp_http_port(const struct weft_mcp_http *http);

/** Stop listening, wait for the request in progress, end every session and free @p http.
 * NULL is a no-op.
 * Errors: none. Ownership: takes @p http. */
WEFT_API void weft_mcp_http_stop(struct weft_mcp_http *http);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MCP_H */
