/* runtime/mcp_server/server.c - weft as an MCP server (include/weft/mcp.h, docs/mcp.md):
 * JSON-RPC 2.0 over the MCP lifecycle (initialize, notifications/initialized, ping) and seven tools
 * over weft's own stores: list_runs, show_run, get_trace, get_span, search_spans, why_failed (the
 * state database and the span store, read through their public APIs) and start_run (weft_run
 * on a workflow file below an allowed directory). The stdio transport lives here too; the
 * Streamable HTTP one is serve_http.c. The tools live in tools_*.c, one file per subject, over
 * the helpers of tool_util.c (tools.h); this file lists their tables in a fixed order.
 *
 * Shape: one entry point, weft__mcp_server_handle(), turns one message into at most one
 * answer; transports only move bytes and keep sessions. Every tool builds a jansson object
 * (its structuredContent, described by its outputSchema); the answer carries it twice, as
 * structuredContent and as the text of one content item, for clients that read only text.
 *
 * Invariants: every input is bounded (a message by max_message_bytes, a list by its limit
 * argument, a trace by get_trace's span cap, a string attribute by WEFT__MCP_MAX_VALUE_BYTES)
 * and every result by max_result_bytes: a result that would pass it is cut, and says so
 * ("truncated": true). Results are scrubbed of registered secrets before they leave (trace
 * attributes were redacted at record time already). A mutex makes the server handle one message
 * at a time.
 */
#define _GNU_SOURCE /* realpath */
#include "runtime/mcp_server/server.h"
#include "runtime/mcp_server/tools.h"

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/mcp.h>
#include <weft/secrets.h>
#include <weft/store.h>
#include <weft/weft.h>

#define DEFAULT_MAX_MESSAGE (4u * 1024u * 1024u)
#define DEFAULT_MAX_RESULT  (1024u * 1024u)
#define MIN_MAX_RESULT      (64u * 1024u)

/* Revisions spoken, newest first: initialize answers the client's when it is one of these. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
#define VERSION_COUNT (sizeof(versions) / sizeof(versions[0]))

/* JSON-RPC error codes. */
#define RPC_PARSE_ERROR      (-32700)
#define RPC_INVALID_REQUEST  (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS   (-32602)
#define RPC_INTERNAL_ERROR   (-32603)

/* ---------------------------------------------------------------------------------------- */
/* Small helpers                                                                              */

static char *
own(char *text)
{
    char *copy = text != NULL ? weft__strdup(text) : NULL;

    free(text);
    return copy;
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

/* The tools, in the order tools/list answers them (clients and tests rely on it). A new tool
 * file adds its table here. */
static const struct {
    const struct tool *tools;
    const size_t *count;
} tool_tables[] = {
    {weft__mcp_tools_runs, &weft__mcp_tools_runs_count},
    {weft__mcp_tools_trace, &weft__mcp_tools_trace_count},
    {weft__mcp_tools_why, &weft__mcp_tools_why_count},
    {weft__mcp_tools_start, &weft__mcp_tools_start_count},
    {weft__mcp_tools_datasets, &weft__mcp_tools_datasets_count},
    {weft__mcp_tools_eval, &weft__mcp_tools_eval_count},
};
#define TABLE_COUNT (sizeof(tool_tables) / sizeof(tool_tables[0]))

/* The tool named @p name, or NULL. */
static const struct tool *
find_tool(const char *name)
{
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        for (size_t i = 0; i < *tool_tables[t].count; i++) {
            if (strcmp(tool_tables[t].tools[i].name, name) == 0) {
                return &tool_tables[t].tools[i];
            }
        }
    }
    return NULL;
}

static const char instructions[] =
    "weft runs multi-agent LLM workflows and records every run in a state database and every "
    "decision as a span in a trace. These tools read them: list_runs to find a run, show_run "
    "for its plan and failed steps, why_failed to answer why a run failed (the path to its "
    "deepest error and its causes: exit status, budget, stuck loop, last answer), get_trace and "
    "get_span for the spans, search_spans to find spans by "
    "attribute across recent traces; start_run runs a workflow file from the allowed "
    "directory; list_datasets and show_dataset read the datasets (inputs, often failed runs with "
    "their failing step), list_experiments and get_experiment the results of `weft eval` "
    "experiments (which items failed, their scores and runs), and compare_experiments two of "
    "them (items fixed and broken, with both runs): why_failed, change the workflow, `weft "
    "eval`, compare_experiments. Run ids accept a unique prefix or \"last\".";

/* ---------------------------------------------------------------------------------------- */
/* JSON-RPC                                                                                   */

bool
weft__mcp_server_speaks(const char *version)
{
    for (size_t i = 0; version != NULL && i < VERSION_COUNT; i++) {
        if (strcmp(versions[i], version) == 0) {
            return true;
        }
    }
    return false;
}

size_t
weft__mcp_server_max_message(const struct weft_mcp_server *server)
{
    return server->max_message;
}

static json_t *
rpc_error(json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                     id != NULL ? id : json_null(), "error", "code", code, "message", message);
}

static json_t *
rpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *
do_initialize(const json_t *params, char *negotiated)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = weft__mcp_server_speaks(asked) ? asked : versions[0];

    if (negotiated != NULL) {
        snprintf(negotiated, WEFT__MCP_PROTOCOL_LEN, "%s", version);
    }
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "weft",
                     "title", "weft runs and traces", "version", WEFT_VERSION, "instructions",
                     instructions);
}

static json_t *
tool_json(const struct tool *t)
{
    json_t *in = json_loads(t->input_schema, 0, NULL);
    json_t *out = json_loads(t->output_schema, 0, NULL);

    /* The schemas are constants: a typo is a bug the tests catch (assert would too). */
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:b, s:b}}", "name", t->name, "title", t->title,
                     "description", t->description, "inputSchema", in != NULL ? in : json_object(),
                     "outputSchema", out != NULL ? out : json_object(), "annotations",
                     "readOnlyHint", t->is_read_only, "openWorldHint", 0);
}

static json_t *
do_tools_list(void)
{
    json_t *list = json_array();

    for (size_t t = 0; list != NULL && t < TABLE_COUNT; t++) {
        for (size_t i = 0; i < *tool_tables[t].count; i++) {
            json_array_append_new(list, tool_json(&tool_tables[t].tools[i]));
        }
    }
    return json_pack("{s:o}", "tools", list);
}

/* The tool result: structuredContent and its text, or isError with a sentence. The text is
 * scrubbed of registered secrets; a result that could not be scrubbed is withheld. */
static json_t *
tool_result(struct weft_mcp_server *srv, struct tool_out *to)
{
    char *text = NULL;
    char *scrubbed = NULL;
    json_t *structured = NULL;
    json_t *r = NULL;
    weft_err err = WEFT_OK;

    if (to->result == NULL && to->error[0] == '\0') {
        snprintf(to->error, sizeof(to->error), "out of memory");
    }
    if (to->result == NULL) {
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", to->error,
                         "isError", 1);
    }
    text = json_dumps(to->result, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        return NULL;
    }
    if (strlen(text) > srv->max_result) {
        /* The tools keep within the cap as they build; this is the backstop. */
        free(text);
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                         "the result is larger than the server's result cap: ask for less "
                         "(limit) or narrower",
                         "isError", 1);
    }
    err = weft_secrets_scrub(text, strlen(text), &scrubbed);
    if (err != WEFT_OK) {
        free(text);
        return NULL;
    }
    if (scrubbed != NULL) {
        structured = json_loads(scrubbed, 0, NULL);
        if (structured != NULL) {
            r = json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", scrubbed,
                          "structuredContent", structured, "isError", 0);
        } else {
            r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                          "the result was withheld: it held a secret", "isError", 1);
        }
        weft_secrets_text_free(scrubbed);
        free(text);
        return r;
    }
    r = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                  "structuredContent", to->result, "isError", 0);
    free(text);
    return r;
}

/* tools/call. @return the result, or NULL with *code and @p msg set for a JSON-RPC error. */
static json_t *
do_tools_call(
    struct weft_mcp_server *srv, const json_t *params, int *code, char *msg, size_t msg_len)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    json_t *empty = NULL;
    struct tool_out to;
    json_t *r = NULL;
    const struct tool *tool = NULL;

    if (name == NULL) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "tools/call: params.name (a string) is required");
        return NULL;
    }
    tool = find_tool(name);
    if (tool == NULL) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "Unknown tool: %.100s", name);
        return NULL;
    }
    if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "tools/call: params.arguments must be an object");
        return NULL;
    }
    if (args == NULL || json_is_null(args)) {
        empty = json_object();
        args = empty;
    }
    memset(&to, 0, sizeof(to));
    tool->run(srv, args, &to);
    r = tool_result(srv, &to);
    json_decref(to.result);
    json_decref(empty);
    if (r == NULL) {
        *code = RPC_INTERNAL_ERROR;
        snprintf(msg, msg_len, "out of memory");
    }
    return r;
}

/* Answer one request (a message with a method and an id). */
static json_t *
dispatch(struct weft_mcp_server *srv,
         const char *method,
         json_t *id,
         const json_t *params,
         char *negotiated,
         bool *is_initialize)
{
    json_t *result = NULL;
    int code = RPC_METHOD_NOT_FOUND;
    char msg[256];

    snprintf(msg, sizeof(msg), "Method not found: %.100s", method);
    if (strcmp(method, "initialize") == 0) {
        *is_initialize = true;
        if (json_string_value(json_object_get(params, "protocolVersion")) == NULL) {
            return rpc_error(id, RPC_INVALID_PARAMS,
                             "initialize: params.protocolVersion (a string) is required");
        }
        result = do_initialize(params, negotiated);
    } else if (strcmp(method, "ping") == 0) {
        result = json_object();
    } else if (strcmp(method, "tools/list") == 0) {
        const json_t *cursor = json_object_get(params, "cursor");

        /* One page holds every tool: no cursor is ever issued, so any cursor is unknown. */
        if (cursor != NULL && !json_is_null(cursor) &&
            !(json_is_string(cursor) && json_string_length(cursor) == 0)) {
            return rpc_error(id, RPC_INVALID_PARAMS, "tools/list: unknown cursor");
        }
        result = do_tools_list();
    } else if (strcmp(method, "tools/call") == 0) {
        result = do_tools_call(srv, params, &code, msg, sizeof(msg));
    }
    if (result == NULL) {
        return rpc_error(id, code, msg);
    }
    return rpc_result(id, result);
}

weft_err
weft__mcp_server_handle(struct weft_mcp_server *srv,
                        const char *message,
                        size_t len,
                        char **response,
                        char *negotiated,
                        bool *is_initialize)
{
    json_t *msg = NULL;
    json_t *answer = NULL;
    json_t *id = NULL;
    const json_t *params = NULL;
    const char *method = NULL;
    json_error_t jerr;
    bool is_init = false;
    char text[300];

    if (srv == NULL || message == NULL || response == NULL) {
        return WEFT_EINVAL;
    }
    *response = NULL;
    if (negotiated != NULL) {
        negotiated[0] = '\0';
    }
    if (len > srv->max_message) {
        snprintf(text, sizeof(text), "Invalid Request: message larger than %zu bytes",
                 srv->max_message);
        answer = rpc_error(NULL, RPC_INVALID_REQUEST, text);
        goto out;
    }
    msg = json_loadb(message, len, JSON_REJECT_DUPLICATES, &jerr);
    if (msg == NULL) {
        snprintf(text, sizeof(text), "Parse error: %s (column %d)", jerr.text, jerr.column);
        answer = rpc_error(NULL, RPC_PARSE_ERROR, text);
        goto out;
    }
    if (!json_is_object(msg)) {
        answer = rpc_error(NULL, RPC_INVALID_REQUEST,
                           json_is_array(msg) ? "Invalid Request: batches are not supported"
                                              : "Invalid Request: expected a JSON object");
        goto out;
    }
    id = json_object_get(msg, "id");
    method = json_string_value(json_object_get(msg, "method"));
    params = json_object_get(msg, "params");
    if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
        answer = rpc_error(NULL, RPC_INVALID_REQUEST,
                           "Invalid Request: id must be a string or an integer");
        goto out;
    }
    if (json_object_get(msg, "method") == NULL &&
        (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL)) {
        goto out; /* a response: the server sends no requests, so nothing waits for it */
    }
    if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 || method == NULL) {
        answer = rpc_error(id, RPC_INVALID_REQUEST,
                           "Invalid Request: expected jsonrpc \"2.0\" and a method");
        goto out;
    }
    if (id == NULL) {
        goto out; /* a notification: initialized, cancelled, or one we do not know */
    }
    if (params != NULL && !json_is_object(params)) {
        answer = rpc_error(id, RPC_INVALID_PARAMS, "Invalid params: params must be an object");
        goto out;
    }
    pthread_mutex_lock(&srv->lock);
    answer = dispatch(srv, method, id, params, negotiated, &is_init);
    pthread_mutex_unlock(&srv->lock);
out:
    if (is_initialize != NULL) {
        *is_initialize = is_init;
    }
    if (answer != NULL) {
        *response = own(json_dumps(answer, JSON_COMPACT | JSON_PRESERVE_ORDER));
    }
    if (answer != NULL && *response == NULL) {
        json_decref(answer);
        json_decref(msg);
        return WEFT_ENOMEM;
    }
    json_decref(answer);
    json_decref(msg);
    return WEFT_OK;
}

weft_err
weft_mcp_server_handle(struct weft_mcp_server *server,
                       const char *message,
                       size_t len,
                       char **response)
{
    return weft__mcp_server_handle(server, message, len, response, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Lifecycle and stdio                                                                        */

static char *
dup_or_null(const char *s)
{
    return s != NULL ? weft__strdup(s) : NULL;
}

weft_err
weft_mcp_server_new(const struct weft_mcp_server_options *options, struct weft_mcp_server **out)
{
    struct weft_mcp_server_options none;
    struct weft_mcp_server *srv = NULL;
    char *dir = NULL;
    weft_err err = WEFT_ENOMEM;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (options == NULL) {
        memset(&none, 0, sizeof(none));
        options = &none;
    }
    dir = realpath(options->workflows_dir != NULL ? options->workflows_dir : ".", NULL);
    if (dir == NULL) {
        return errno == ENOMEM ? WEFT_ENOMEM : WEFT_ENOTFOUND;
    }
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        goto fail;
    }
    srv->workflows_dir = weft__strdup(dir);
    srv->state_path = dup_or_null(options->state_path);
    srv->db_path = dup_or_null(options->db_path);
    if (srv->workflows_dir == NULL || (options->state_path != NULL && srv->state_path == NULL) ||
        (options->db_path != NULL && srv->db_path == NULL)) {
        goto fail;
    }
    err = weft_store_pool_new(srv->db_path, 0, &srv->stores);
    if (err != WEFT_OK) {
        goto fail;
    }
    srv->provider = options->provider;
    srv->meter = options->meter;
    srv->abort_flag = options->abort_flag;
    srv->max_message =
        options->max_message_bytes != 0 ? options->max_message_bytes : DEFAULT_MAX_MESSAGE;
    srv->max_result =
        options->max_result_bytes != 0 ? options->max_result_bytes : DEFAULT_MAX_RESULT;
    if (srv->max_result < MIN_MAX_RESULT) {
        srv->max_result = MIN_MAX_RESULT;
    }
    pthread_mutex_init(&srv->lock, NULL);
    free(dir);
    *out = srv;
    return WEFT_OK;
fail:
    if (srv != NULL) {
        weft__free(srv->workflows_dir);
        weft__free(srv->state_path);
        weft__free(srv->db_path);
    }
    weft__free(srv);
    free(dir);
    return err;
}

void
weft_mcp_server_free(struct weft_mcp_server *server)
{
    if (server == NULL) {
        return;
    }
    pthread_mutex_destroy(&server->lock);
    weft_store_pool_free(server->stores);
    weft__free(server->workflows_dir);
    weft__free(server->state_path);
    weft__free(server->db_path);
    weft__free(server);
}

/* Answer one line (without its newline). */
static weft_err
serve_line(struct weft_mcp_server *srv, int out_fd, const char *line, size_t len)
{
    char *response = NULL;
    weft_err err = WEFT_OK;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) {
        len--;
    }
    if (len == 0) {
        return WEFT_OK;
    }
    err = weft__mcp_server_handle(srv, line, len, &response, NULL, NULL);
    if (err == WEFT_OK && response != NULL) {
        err = weft__write_all(out_fd, response, strlen(response));
        if (err == WEFT_OK) {
            err = weft__write_all(out_fd, "\n", 1);
        }
    }
    weft__free(response);
    return err;
}

weft_err
weft_mcp_server_serve_stdio(struct weft_mcp_server *server, int in_fd, int out_fd)
{
    struct weft__buf line;
    char chunk[65536];
    bool is_skipping = false; /* inside a line longer than the cap */
    weft_err err = WEFT_OK;

    if (server == NULL || in_fd < 0 || out_fd < 0) {
        return WEFT_EINVAL;
    }
    weft__buf_init(&line, server->max_message);
    for (;;) {
        ssize_t n = 0;

        if (server->abort_flag != NULL && *server->abort_flag != 0) {
            break;
        }
        n = read(in_fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            err = WEFT_EIO;
            break;
        }
        if (n == 0) {
            if (!is_skipping && line.len > 0) {
                err = serve_line(server, out_fd, line.data, line.len);
            }
            break;
        }
        for (const char *p = chunk, *end = chunk + n; p < end && err == WEFT_OK;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t take = (size_t)((nl != NULL ? nl : end) - p);

            weft_err added = is_skipping ? WEFT_OK : weft__buf_append(&line, p, take);

            if (added == WEFT_ELIMIT) {
                char text[128];

                snprintf(text, sizeof(text),
                         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
                         "\"message\":\"Invalid Request: message larger than %zu bytes\"}}\n",
                         server->max_message);
                WEFT_LOG(WEFT_LOG_WARN, "mcp serve: a message larger than %zu bytes skipped",
                         server->max_message);
                err = weft__write_all(out_fd, text, strlen(text));
                is_skipping = true;
                weft__buf_reset(&line);
            } else if (added != WEFT_OK) {
                err = added;
            }
            if (nl == NULL) {
                break;
            }
            if (!is_skipping && err == WEFT_OK) {
                err = serve_line(server, out_fd, line.data != NULL ? line.data : "", line.len);
            }
            is_skipping = false;
            weft__buf_reset(&line);
            p = nl + 1;
        }
        if (err != WEFT_OK) {
            break;
        }
    }
    weft__buf_cleanup(&line);
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "mcp serve: stdio: %s", strerror(errno));
    }
    return err;
}
