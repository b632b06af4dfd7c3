/* runtime/mcp/hub.h - a run's MCP servers, and what agents see of them: each server's client
 * (mcp.h), the tools an agent may call (its bound servers' current tool lists, reloaded when a
 * server says they changed), the calls themselves, and the description the supervisor reads
 * for an MCP agent (its server's instructions and tool descriptions).
 *
 * A server that does not start is no reason to fail the run: its agent is described as
 * unavailable, its tools are absent, and a call fails to the agent (which may retry or route
 * elsewhere) while the client keeps trying to start it again with backoff. `weft validate` and
 * `weft mcp list` use weft__mcp_hub_new() with is_strict to report a start failure instead.
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

#endif /* WEFT_RUNTIME_MCP_HUB_H */
