/* runtime/tools/registry.c - native tools registered from C (include/weft/tool.h), and
 * weft__tool_run(), the one entry point the engine calls for every tool type.
 *
 * A registry is a growable array of struct tool_def; it is built before runs start and read
 * without locks afterwards (tool.h's thread-safety contract). Invariants: names are unique,
 * valid and never a built-in's; every entry is TOOL_NATIVE with a parsed object schema; a
 * failed weft_tools_add() leaves the registry as it was (everything is allocated before the
 * entry is appended). weft__tool_run() always leaves a non-NULL output on WEFT_OK and none on
 * error.
 *
 * JSON text from jansson (json_dumps) comes from jansson's allocator and is released with
 * free(); text that outlives a call is copied with weft__strdup.
 */
#include "tools.h"

#include "base/mem.h"
#include "runtime/common/secrets.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct weft_tools {
    struct tool_def *defs;
    size_t count;
    size_t cap;
};

struct weft_tool_result {
    char *text;
    bool is_error;
    bool is_set;
};

weft_err
weft_tool_result_set(struct weft_tool_result *result, const char *text, bool is_error)
{
    char *copy = NULL;

    if (result == NULL || text == NULL) {
        return WEFT_EINVAL;
    }
    copy = weft__strdup(text);
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    weft__free(result->text);
    result->text = copy;
    result->is_error = is_error;
    result->is_set = true;
    return WEFT_OK;
}

weft_err
weft_tools_new(struct weft_tools **out)
{
    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = weft__calloc(1, sizeof(**out));
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

void
weft_tools_free(struct weft_tools *tools)
{
    if (tools == NULL) {
        return;
    }
    for (size_t i = 0; i < tools->count; i++) {
        weft__tool_def_cleanup(&tools->defs[i]);
    }
    weft__free(tools->defs);
    weft__free(tools);
}

static bool
is_valid_name(const char *name)
{
    static const char *const builtins[] = {"request_agent", "read_file", "write_file"};
    size_t len = name != NULL ? strlen(name) : 0;

    if (len == 0 || len > 64) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-') {
            return false;
        }
    }
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
        if (strcmp(name, builtins[i]) == 0) {
            return false;
        }
    }
    return true;
}

weft_err
weft_tools_add(struct weft_tools *tools,
               const char *name,
               const char *description,
               const char *parameters_schema,
               weft_tool_fn fn,
               void *user_data)
{
    struct tool_def def;
    json_error_t jerr;

    if (tools == NULL || fn == NULL || !is_valid_name(name)) {
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < tools->count; i++) {
        if (strcmp(tools->defs[i].name, name) == 0) {
            return WEFT_EINVAL;
        }
    }
    memset(&def, 0, sizeof(def));
    def.type = TOOL_NATIVE;
    def.fn = fn;
    def.user_data = user_data;
    memset(&jerr, 0, sizeof(jerr));
    def.schema = parameters_schema != NULL ? json_loads(parameters_schema, 0, &jerr)
                                           : json_pack("{s:s}", "type", "object");
    if (!json_is_object(def.schema)) {
        bool is_oom = parameters_schema == NULL ||
                      (def.schema == NULL && json_error_code(&jerr) == json_error_out_of_memory);
        json_decref(def.schema);
        return is_oom ? WEFT_ENOMEM : WEFT_EINVAL;
    }
    def.name = weft__strdup(name);
    def.description = description != NULL ? weft__strdup(description) : NULL;
    if (def.name == NULL || (description != NULL && def.description == NULL)) {
        weft__tool_def_cleanup(&def);
        return WEFT_ENOMEM;
    }
    if (tools->count == tools->cap) {
        size_t cap = tools->cap == 0 ? 4 : tools->cap * 2;
        struct tool_def *grown = weft__realloc(tools->defs, cap * sizeof(*grown));
        if (grown == NULL) {
            weft__tool_def_cleanup(&def);
            return WEFT_ENOMEM;
        }
        tools->defs = grown;
        tools->cap = cap;
    }
    tools->defs[tools->count++] = def;
    return WEFT_OK;
}

size_t
weft__tool_registry_count(const struct weft_tools *tools)
{
    return tools != NULL ? tools->count : 0;
}

const struct tool_def *
weft__tool_registry_get(const struct weft_tools *tools, size_t i)
{
    return tools != NULL && i < tools->count ? &tools->defs[i] : NULL;
}

static weft_err
run_native(const struct tool_def *def, const json_t *args, struct tool_outcome *out)
{
    struct weft_tool_result result = {NULL, false, false};
    char *text = json_dumps(args, JSON_COMPACT);
    weft_err rc = WEFT_OK;

    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    rc = def->fn(def->user_data, text, &result);
    free(text);
    if (rc != WEFT_OK || !result.is_set) {
        json_t *e = json_pack("{s:s, s:s}", "error",
                              rc != WEFT_OK ? weft_strerror(rc) : "tool returned nothing", "type",
                              "tool_failed");
        char *dumped = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
        weft__free(result.text);
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "tool_failed");
        out->output = dumped != NULL ? weft__strdup(dumped) : NULL;
        free(dumped);
        return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    out->output = result.text;
    out->is_error = result.is_error;
    if (result.is_error) {
        snprintf(out->error_type, sizeof(out->error_type), "%s", "tool_error");
    }
    return WEFT_OK;
}

weft_err
weft__tool_run(const struct tool_def *def,
               const char *workspace,
               const json_t *args,
               struct tool_outcome *out)
{
    weft_err err = WEFT_OK;

    if (def == NULL || out == NULL || args == NULL || workspace == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    out->exit_code = -1;
    switch (def->type) {
    case TOOL_READ_FILE:
    case TOOL_WRITE_FILE:
        err = weft__tool_fs(def, workspace, args, out);
        break;
    case TOOL_COMMAND:
        err = weft__tool_command(def, workspace, args, out);
        break;
    case TOOL_HTTP_GET:
        err = weft__tool_http_get(def, args, out);
        break;
    case TOOL_NATIVE:
        err = run_native(def, args, out);
        break;
    case TOOL_REQUEST_AGENT:
    default:
        return WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        /* Ingress: a tool (a command printing its environment, a page echoing a header) may
         * repeat a configured secret; it leaves here, before the engine stores or traces the
         * output or hands it to the model. */
        err = weft__rt_secrets_scrub_owned(&out->output);
    }
    if (err != WEFT_OK) {
        weft__tool_outcome_cleanup(out);
    }
    return err;
}
