/* runtime/mcp/content.h - a tools/call result as the text a model reads (client.c's calls).
 *
 * Internal to the MCP client. */
#ifndef WEFT_RUNTIME_MCP_CONTENT_H
#define WEFT_RUNTIME_MCP_CONTENT_H

#include "runtime/mcp/mcp.h"

#include <jansson.h>
#include <stddef.h>
#include <weft/common.h>

/* @p len bytes of @p text into out->text, secrets scrubbed, cut at @p max bytes on a character
 * boundary (out->is_truncated says so). @return WEFT_OK, WEFT_ENOMEM. */
weft_err
weft__mcp_fill_text(struct weft__mcp_call_result *out, const char *text, size_t len, size_t max);

/* A CallToolResult @p result into @p out: its content as text (text items joined by newlines,
 * every other item as compact JSON; the structured content when there is nothing else), at most
 * @p max bytes; structuredContent copied; isError as error_type "tool_error".
 * @return WEFT_OK, WEFT_ENOMEM. */
weft_err weft__mcp_result_fill(struct weft__mcp_call_result *out, const json_t *result, size_t max);

#endif /* WEFT_RUNTIME_MCP_CONTENT_H */
