/* runtime/mcp/config.h - MCP server entries as workflows and `mcpServers` files write them.
 *
 * One entry, the value of a server's name in a workflow's "mcp_servers" object or in the
 * "mcpServers" object of the file editors and desktop clients use:
 *   stdio: {"command": "npx", "args": [...], "env": {"KEY": "value"}, "cwd": "dir"}
 *   HTTP:  {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
 * plus "type" ("stdio", "http" or "streamable-http"; implied by command or url), and weft's own
 * keys: "timeout_s", "init_timeout_s", "max_output_bytes", "description" (for the agent, instead
 * of the server's instructions), "model" (the agent's model; the workflow's first by default)
 * "agent" (false: no mcp_agent_<name>, the server's tools only go to agents that bind them),
 * "optional" (true: a server that does not start does not fail the run), "retries" (0-5, default
 * 1: a call that failed for a server reason - down, timeout, protocol, oversized - is tried again)
 * and "install" (the command that installs the server, named when it does not start).
 * "${NAME}" and "${NAME:-default}" anywhere in args, env, cwd, url and header values expand
 * from the environment of the process that starts the server (a worker's own, for distributed
 * runs), so files carry no secrets. The legacy HTTP+SSE transport ("type": "sse") is refused.
 */
#ifndef WEFT_RUNTIME_MCP_CONFIG_H
#define WEFT_RUNTIME_MCP_CONFIG_H

#include "runtime/mcp/mcp.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* What weft adds to a server entry beyond the client's configuration. */
struct weft__mcp_entry {
    struct weft__mcp_server_config cfg;
    char *description; /* NULL: the server's instructions and tool descriptions */
    char *model;       /* NULL: the workflow's default */
    bool is_agent;     /* default true: the server becomes agent mcp_agent_<name> */
    /* false (default): a server that does not start fails the run before its first step;
     * true: the run goes on without it, and its agent is not offered to the supervisor. */
    bool is_optional;
    unsigned retries; /* a call that fails for a server reason is tried again this often */
    char *install;    /* NULL: none; else the command that installs the server, named when
                       * it does not start */
};

#define WEFT__MCP_DEFAULT_RETRIES 1u
#define WEFT__MCP_MAX_RETRIES     5u

void weft__mcp_entry_cleanup(struct weft__mcp_entry *e); /* NULL: no-op */

/* Parse entry @p value of server @p name. Relative cwd resolves against @p base_dir.
 * On a problem, @p field receives the offending key ("command", "env.KEY", ...; "" for the
 * entry itself) and @p why what was expected, and false is returned with @p out cleaned up.
 * Out of memory: false with why "out of memory". Ownership: @p out owns what it holds. */
bool weft__mcp_entry_parse(const char *name,
                           const json_t *value,
                           const char *base_dir,
                           struct weft__mcp_entry *out,
                           char *field,
                           size_t field_len,
                           char *why,
                           size_t why_len);

/* Expand "${NAME}" and "${NAME:-default}" references in @p text from the environment.
 * @return new text (NULL: out of memory). */
char *weft__mcp_expand(const char *text);

/* The agent name of server @p name: "mcp_agent_<name>" into @p out. */
void weft__mcp_agent_name(const char *name, char *out, size_t len);

#endif /* WEFT_RUNTIME_MCP_CONFIG_H */
