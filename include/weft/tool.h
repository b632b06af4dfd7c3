/* include/weft/tool.h - tools registered from C by an embedding program, so that agents can
 * call the application's own capabilities.
 *
 * A tool is a name, a description, a JSON schema for its arguments and a function. weft
 * validates the model's arguments against the schema before calling the function (a call
 * that does not validate is returned to the agent as a tool error and never reaches it).
 *
 * Thread-safety:
 * - struct weft_tools: build it on one thread, then share it read-only: runs may call its
 *   tools from any thread, concurrently (a tool function must be thread-safe if it is used by
 *   concurrent runs).
 * - struct weft_tool_result: valid only during the tool call it was passed to.
 */
#ifndef WEFT_TOOL_H
#define WEFT_TOOL_H

#include <weft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct weft_tools;       /* a registry of native tools */
struct weft_tool_result; /* where a tool function writes its answer */

/** A native tool. @p arguments_json is a JSON object that validated against the tool's
 * schema. Write the answer with weft_tool_result_set(); an answer left unset is an error
 * "tool returned nothing".
 * @return WEFT_OK when the tool ran (even if it reports a tool-level error through
 * weft_tool_result_set(..., true)); any other code is a failure of the tool itself, returned
 * to the agent as a tool error with weft_strerror()'s text.
 * Ownership: @p arguments_json is borrowed for the call. */
typedef weft_err (*weft_tool_fn)(void *user_data,
                                 const char *arguments_json,
                                 struct weft_tool_result *result);

/** Set the text returned to the model (usually JSON) and whether it reports an error.
 * A second call replaces the first.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_ENOMEM.
 * Ownership: copies @p text. */
WEFT_API weft_err weft_tool_result_set(struct weft_tool_result *result,
                                       const char *text,
                                       bool is_error);

/** Create an empty registry.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM. Ownership: free with weft_tools_free(). */
WEFT_API weft_err weft_tools_new(struct weft_tools **out);

/** Free a registry. NULL is a no-op.
 * Errors: none. Ownership: takes @p tools (frees it and every tool in it). */
WEFT_API void weft_tools_free(struct weft_tools *tools);

/** Register a tool.
 * @param name tool name as the model sees it: 1 to 64 characters of [A-Za-z0-9_-], unique in
 * the registry and not a built-in tool name (request_agent, read_file, write_file).
 * @param description shown to the model; may be NULL.
 * @param parameters_schema JSON schema (object) of the arguments; NULL means {"type":"object"}.
 * @return WEFT_OK, WEFT_EINVAL (bad name, NULL fn, duplicate, schema that is not a JSON
 * object), WEFT_ENOMEM; the registry is unchanged on error.
 * Ownership: copies the strings; @p user_data is borrowed for the registry's lifetime. */
WEFT_API weft_err weft_tools_add(struct weft_tools *tools,
                                 const char *name,
                                 const char *description,
                                 const char *parameters_schema,
                                 weft_tool_fn fn,
                                 void *user_data);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOL_H */
