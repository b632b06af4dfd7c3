/* include/weft/mcp.h - Model Context Protocol servers, as a workflow configures them
 * ("mcp_servers", "mcp_servers_file") or as editors and desktop clients list them in a JSON file
 * {"mcpServers": {...}} (docs/mcp.md).
 *
 * Runs start their workflow's servers themselves: each becomes agent mcp_agent_<name>. These
 * functions are for looking at servers from outside a run: list what one offers, check that
 * a workflow's servers start.
 *
 * Thread-safety: every function may be called from any thread; they share nothing.
 */
#ifndef WEFT_MCP_H
#define WEFT_MCP_H

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

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MCP_H */
