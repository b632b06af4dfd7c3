/* runtime/mcp_server/server.h - what the MCP server's transports (server.c for stdio, serve_http.c
 * for Streamable HTTP) share: one JSON-RPC message in, at most one answer out, with the protocol
 * revision of the session the message belongs to.
 */
#ifndef WEFT_RUNTIME_MCP_SERVER_H
#define WEFT_RUNTIME_MCP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <weft/mcp.h>

/* Longest protocol revision string the server keeps ("2025-11-25" and NUL, with room). */
#define WEFT__MCP_PROTOCOL_LEN 24

/* Is @p version one of the revisions the server speaks? */
bool weft__mcp_server_speaks(const char *version);

/* The server's cap on one message, in bytes. */
size_t weft__mcp_server_max_message(const struct weft_mcp_server *server);

/* Handle one message as weft_mcp_server_handle() does. @p negotiated (WEFT__MCP_PROTOCOL_LEN
 * bytes, may be NULL) receives the revision agreed when the message was an initialize request
 * that succeeded, else "". @p is_initialize (may be NULL) says whether the message was an
 * initialize request, whatever its outcome. */
weft_err weft__mcp_server_handle(struct weft_mcp_server *server,
                                 const char *message,
                                 size_t len,
                                 char **response,
                                 char *negotiated,
                                 bool *is_initialize);

#endif /* WEFT_RUNTIME_MCP_SERVER_H */
