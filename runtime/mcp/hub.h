/* runtime/mcp/hub.h - a run's MCP servers, and what agents see of them: each server's client
 * (mcp.h), the tools an agent may call (its bound servers' current tool lists, reloaded when a
 * server says they changed), the calls themselves, and the description the supervisor reads
 * for an MCP agent (its server's instructions and tool descriptions).
 *
 * The hub itself never fails a run: weft__mcp_hub_new() starts what it can, and the engine asks
 * weft__mcp_hub_required_down() whether a server the workflow did not mark "optional" failed to
 * start (the run then fails before its first step, saying why). An optional server that is not
 * running has no tools, its agent is not offered to the supervisor
 * (weft__mcp_hub_agent_ready()), and the hub keeps trying to start it again with backoff.
 * `weft validate` and `weft mcp list` use weft__mcp_hub_new() with is_strict to report a start
 * failure instead.
 *
 * Thread-safety: every function may be called from any thread, concurrently; free is the
 * exception (no call may overlap it).
 */
#ifndef WEFT_RUNTIME_MCP_HUB_H
#define WEFT_RUNTIME_MCP_HUB_H

#include "runtime/mcp/mcp.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct weft_workflow;
struct wf_agent;
struct weft__mcp_hub;

/* Room for a start error: the client's sentence, the tail of the server's stderr (1 KiB) and
 * the install command. */
#define WEFT__MCP_HUB_ERROR_MAX 1800

/* Called (on a client's reader thread, no lock of the hub's held) for each progress
 * notification of a call in flight. */
typedef void (*weft__mcp_hub_progress_fn)(void *user_data,
                                          const char *server,
                                          const char *tool,
                                          double progress,
                                          double total,
                                          const char *message);

struct weft__mcp_hub_options {
    struct weft_tracer *tracer;   /* NULL: no spans */
    struct weft_meter *meter;     /* NULL: no metrics */
    struct weft_meter *meter_tee; /* a second one recording the same; NULL: none */
    weft__mcp_hub_progress_fn on_progress;
    void *user_data;
    /* Only these servers (indices into wf->mcp); NULL: every server. */
    const size_t *only;
    size_t only_count;
    bool is_strict; /* a server that does not start fails the call (validate, mcp list) */
    /* Extra attributes on every span of the hub's clients; borrowed for the hub's life. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* Start the workflow's MCP servers (one after the other; each within its init timeout; the
 * clients register their env and header values as secrets).
 * @return WEFT_OK (a server that did not start is logged and retried later, unless is_strict);
 * with is_strict, the first start error (as weft__mcp_client_new()) with @p err naming the
 * server; WEFT_ENOMEM. *out is NULL on error. Ownership: borrows @p wf for the hub's life. */
weft_err weft__mcp_hub_new(const struct weft_workflow *wf,
                           const struct weft__mcp_hub_options *opts,
                           struct weft__mcp_hub **out,
                           char *err,
                           size_t err_len);

void weft__mcp_hub_free(struct weft__mcp_hub *hub); /* NULL: no-op */

/* Server @p server's client, or NULL while it is not started. Borrowed until free. */
struct weft__mcp_client *weft__mcp_hub_client(struct weft__mcp_hub *hub, size_t server);

/* Append to @p tools (a JSON array in the OpenAI "tools" format) the tools of @p agent's bound
 * servers; a name already in the array, or offered by two servers, is skipped and logged once.
 * @return WEFT_OK, WEFT_ENOMEM. */
weft_err
weft__mcp_hub_tools_json(struct weft__mcp_hub *hub, const struct wf_agent *agent, json_t *tools);

/* Which of @p agent's servers offers tool @p name, and its input schema (new reference, or
 * NULL). @return true when one does. */
bool weft__mcp_hub_find(struct weft__mcp_hub *hub,
                        const struct wf_agent *agent,
                        const char *name,
                        size_t *server,
                        json_t **schema);

/* The server's own name for the tool the model calls @p name on server @p server (the model
 * sees names with characters outside [A-Za-z0-9_-] replaced by '_'). @return new text, or NULL
 * when the server has no such tool (or out of memory). */
char *weft__mcp_hub_tool_name(struct weft__mcp_hub *hub, size_t server, const char *name);

/* What the supervisor is told MCP agent @p agent does: the configured description, else the
 * server's instructions and its tools' one-line descriptions, else why it is unavailable.
 * @return new text (NULL: out of memory). */
char *weft__mcp_hub_describe(struct weft__mcp_hub *hub, const struct wf_agent *agent);

/* Whether a server that is not optional (and is wanted) failed to start; @p why then names it,
 * says why (with the end of its stderr) and gives its "install" command when configured.
 * Call it after weft__mcp_hub_new(). */
bool weft__mcp_hub_required_down(struct weft__mcp_hub *hub, char *why, size_t why_len);

/* Whether every server @p agent binds is running (a stopped one is tried again when its
 * backoff allows). The supervisor is not offered an MCP agent that is not ready. */
bool weft__mcp_hub_agent_ready(struct weft__mcp_hub *hub, const struct wf_agent *agent);

/* Whether one of @p agent's servers is not running: *server is its index and @p why says
 * why. A tool the model names that no running server offers is then a server failure
 * (server_down), not an unknown tool. */
bool weft__mcp_hub_down(struct weft__mcp_hub *hub,
                        const struct wf_agent *agent,
                        size_t *server,
                        char *why,
                        size_t why_len);

#endif /* WEFT_RUNTIME_MCP_HUB_H */
