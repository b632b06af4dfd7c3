/* runtime/tools/tools.h - the tools agents can call: built-in file tools confined to the run's
 * workspace, http_get restricted to an allowlist of hosts, command tools that run an argv
 * without a shell, native tools registered from C (include/weft/tool.h), and the JSON-schema
 * check every call passes before it runs.
 *
 * The engine resolves the tool, validates the arguments with weft__tool_schema_validate(), opens
 * the `execute_tool {tool}` span, calls weft__tool_run() and records the outcome. Nothing here
 * traces or logs message content.
 *
 * Thread-safety: tool configs are immutable after loading; weft__tool_run() may be called from any
 * thread.
 */
#ifndef WEFT_RUNTIME_TOOLS_H
#define WEFT_RUNTIME_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/tool.h>

typedef enum tool_type {
    TOOL_REQUEST_AGENT = 0, /* handled by the engine itself, never by weft__tool_run() */
    TOOL_READ_FILE,
    TOOL_WRITE_FILE,
    TOOL_HTTP_GET,
    TOOL_COMMAND,
    TOOL_NATIVE
} tool_type;

/* "request_agent", "read_file", "write_file", "http_get", "command", "native". */
const char *weft__tool_type_name(tool_type type);

/* A configured tool (built by the workflow loader or from a native registry entry). */
struct tool_def {
    char *name;
    char *description;
    tool_type type;
    json_t *schema; /* owned: JSON schema of the arguments (object) */
    /* TOOL_READ_FILE / TOOL_WRITE_FILE */
    size_t max_bytes; /* largest file read or written; 0 means 1 MiB */
    /* TOOL_HTTP_GET */
    char **allow_hosts; /* exact host names (case-insensitive); "*" is not accepted */
    size_t allow_host_count;
    /* TOOL_COMMAND */
    char **argv; /* argv[0] is the program (searched in PATH when it has no '/') */
    size_t argc;
    bool append_args; /* the model may pass {"args": [...]} appended to argv */
    char *cwd;        /* relative to the workspace; NULL means the workspace */
    /* Programmatic callers only (command steps, the command evaluator of runtime/eval/); the
     * workflow loader leaves them NULL. The text the command reads on stdin (NULL: /dev/null),
     * and "NAME=value" entries added to its environment, replacing the engine's variables of
     * the same names (NULL-terminated; NULL: none). Borrowed. */
    const char *stdin_text;
    const char *const *env_extra;
    /* TOOL_HTTP_GET and TOOL_COMMAND */
    uint32_t timeout_ms; /* 0 means 30000 */
    size_t max_output;   /* bytes of stdout+stderr / body kept; 0 means 64 KiB */
    /* TOOL_NATIVE */
    weft_tool_fn fn;
    void *user_data;
};

void weft__tool_def_cleanup(struct tool_def *def); /* frees what it owns; NULL is a no-op */

/* The JSON schema of a built-in type's arguments (new reference), e.g. read_file:
 * {"type":"object","properties":{"path":{"type":"string"}},"required":["path"],
 *  "additionalProperties":false}. NULL for TOOL_NATIVE. */
json_t *weft__tool_builtin_schema(tool_type type);

/* Validate @p value against the JSON-schema subset weft supports: type (string, number,
 * integer, boolean, object, array, null, or a list of them), properties, required,
 * additionalProperties (boolean), items, enum, minimum, maximum, minLength, maxLength,
 * minItems, maxItems. Unknown keywords are ignored.
 * @param err receives "args.path: expected string" style text on failure.
 * @return true when valid. */
bool
weft__tool_schema_validate(const json_t *schema, const json_t *value, char *err, size_t err_len);

/* What a tool call produced. */
struct tool_outcome {
    bool is_error;       /* the call failed: the model gets @c output as an error */
    char error_type[48]; /* "path_escape", "not_allowed", "timeout", "exit_status", ... ("" when ok)
                          */
    int exit_code; /* command: exit status (128+signal when killed); http_get: HTTP status; else -1
                    */
    char *output;  /* text returned to the model (JSON for built-ins); never NULL after
                      weft__tool_run() */
    bool is_truncated; /* output was cut at max_output */
};

void weft__tool_outcome_cleanup(struct tool_outcome *outcome);

/* Run @p def with validated @p args in @p workspace (an absolute path to an existing
 * directory). File tools refuse paths that leave the workspace, through "..", absolute
 * paths or symlinks (error_type "path_escape"). http_get refuses hosts outside the allowlist
 * ("not_allowed") and non-http(s) schemes. A command that outlives its timeout is killed
 * ("timeout"). The output is scrubbed of the configured secrets (include/weft/secrets.h)
 * before it is returned: a tool repeating a key is an ingress like a model answer.
 * @return WEFT_OK when the outcome is filled (also for tool-level errors), WEFT_EINVAL,
 * WEFT_ENOMEM. */
weft_err weft__tool_run(const struct tool_def *def,
                        const char *workspace,
                        const json_t *args,
                        struct tool_outcome *out);

/* Native registry access for the engine. @return the number of tools / tool @p i (borrowed
 * until weft_tools_free()); NULL registry means none. */
size_t weft__tool_registry_count(const struct weft_tools *tools);
const struct tool_def *weft__tool_registry_get(const struct weft_tools *tools, size_t i);

/* The implementations weft__tool_run() dispatches to (one file each). Same contract as
 * weft__tool_run(). */
weft_err weft__tool_fs(const struct tool_def *def,
                       const char *workspace,
                       const json_t *args,
                       struct tool_outcome *out);
weft_err weft__tool_command(const struct tool_def *def,
                            const char *workspace,
                            const json_t *args,
                            struct tool_outcome *out);
weft_err
weft__tool_http_get(const struct tool_def *def, const json_t *args, struct tool_outcome *out);

/* Open directory @p path (relative to @p workspace; NULL, "" or "." is the workspace itself)
 * the way the file tools resolve paths: component by component with openat(2), refusing ".."
 * and symlinks. Shared by the file tools and the command tools' cwd (fs.c).
 * @return 0 with *out_fd open (O_CLOEXEC); EPERM when the path would leave the workspace;
 * another errno value (ENOENT, ENOTDIR, ...) otherwise, with *out_fd = -1. */
int weft__tool_open_dir(const char *workspace, const char *path, int *out_fd);

#endif /* WEFT_RUNTIME_TOOLS_H */
