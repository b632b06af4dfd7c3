/* runtime/mcp_server/api.c - the public face of MCP servers (include/weft/mcp.h): list one server's
 * tools, check that a workflow's servers start. Each call starts the server, asks, and shuts it
 * down: nothing outlives the call.
 */
#include "runtime/mcp/config.h"
#include "runtime/mcp/mcp.h"
#include "runtime/workflow/workflow.h"

#include "base/buf.h"
#include "base/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/mcp.h>

void
weft_mcp_text_free(char *text)
{
    weft__free(text);
}

/* @p text as weft-owned memory (jansson's dumps use malloc). */
static char *
own(char *text)
{
    char *copy = text != NULL ? weft__strdup(text) : NULL;

    free(text);
    return copy;
}

/* The listing of a started client. */
static json_t *
listing(struct weft__mcp_client *client, const struct weft__mcp_server_config *cfg)
{
    struct weft__mcp_tool *tools = NULL;
    size_t count = 0;
    uint64_t version = 0;
    json_t *arr = json_array();
    json_t *o = NULL;
    char *instructions = NULL;

    if (arr == NULL || weft__mcp_client_tools(client, &tools, &count, &version) != WEFT_OK) {
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        json_array_append_new(
            arr, json_pack("{s:s, s:s?, s:s?, s:O, s:O?}", "name", tools[i].name, "title",
                           tools[i].title, "description", tools[i].description, "input_schema",
                           tools[i].input_schema, "output_schema", tools[i].output_schema));
    }
    weft__mcp_tools_free(tools, count);
    instructions = weft__mcp_client_instructions(client);
    o = json_pack("{s:s, s:s, s:s?, s:s?, s:o}", "server", cfg->name, "transport",
                  cfg->url != NULL ? "http" : "stdio", "protocol_version",
                  weft__mcp_client_protocol(client), "instructions", instructions, "tools", arr);
    weft__free(instructions);
    return o;
}

/* Start @p cfg, list, stop. */
static weft_err
list_entry(const struct weft__mcp_server_config *cfg, char **out, char *error, size_t error_len)
{
    struct weft__mcp_client *client = NULL;
    json_t *o = NULL;
    weft_err e = weft__mcp_client_new(cfg, NULL, &client, error, error_len);

    if (e != WEFT_OK) {
        return e;
    }
    o = listing(client, cfg);
    weft__mcp_client_free(client);
    *out = o != NULL ? own(json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) : NULL;
    json_decref(o);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* The names in @p names (an object) as "a, b, c" into @p buf. */
static void
names_of(const json_t *names, char *buf, size_t len)
{
    const char *k = NULL;
    json_t *v = NULL;
    size_t used = 0;

    buf[0] = '\0';
    json_object_foreach((json_t *)names, k, v)
    {
        int n = snprintf(buf + used, len - used, "%s%s", used > 0 ? ", " : "", k);
        (void)v;
        if (n < 0 || (size_t)n >= len - used) {
            break;
        }
        used += (size_t)n;
    }
}

/* An mcpServers file: parse the one entry. */
static weft_err
list_from_file(const char *file,
               const json_t *servers,
               const char *server,
               char **out,
               char *error,
               size_t error_len)
{
    const json_t *value = json_object_get(servers, server);
    struct weft__mcp_entry e;
    char field[160], why[256], dir[1024];
    const char *slash = strrchr(file, '/');
    weft_err err = WEFT_OK;

    if (value == NULL) {
        char names[512];
        names_of(servers, names, sizeof(names));
        snprintf(error, error_len, "%s: no MCP server '%s' (servers: %s)", file, server,
                 names[0] != '\0' ? names : "none");
        return WEFT_ENOTFOUND;
    }
    snprintf(dir, sizeof(dir), "%.*s", slash != NULL ? (int)(slash - file) : 1,
             slash != NULL ? file : ".");
    if (!weft__mcp_entry_parse(server, value, dir, &e, field, sizeof(field), why, sizeof(why))) {
        snprintf(error, error_len, "%s: mcpServers.%s%s%s: %s", file, server,
                 field[0] != '\0' ? "." : "", field, why);
        return strcmp(why, "out of memory") == 0 ? WEFT_ENOMEM : WEFT_EPARSE;
    }
    err = list_entry(&e.cfg, out, error, error_len);
    weft__mcp_entry_cleanup(&e);
    return err;
}

/* A workflow: its loaded servers. */
static weft_err
list_from_workflow(const char *file, const char *server, char **out, char *error, size_t error_len)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    weft_err err = weft_workflow_load(file, &wf, &diags);

    if (err != WEFT_OK) {
        char line[512] = "";
        if (diags.count > 0) {
            weft_diag_format(&diags.items[0], line, sizeof(line));
        }
        snprintf(error, error_len, "%s", line[0] != '\0' ? line : weft_strerror(err));
        weft_diags_cleanup(&diags);
        return err;
    }
    err = WEFT_ENOTFOUND;
    for (size_t i = 0; i < wf->mcp_count && err == WEFT_ENOTFOUND; i++) {
        if (strcmp(wf->mcp[i].cfg.name, server) == 0) {
            err = list_entry(&wf->mcp[i].cfg, out, error, error_len);
        }
    }
    if (err == WEFT_ENOTFOUND) {
        char names[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < wf->mcp_count && used < sizeof(names); i++) {
            int n = snprintf(names + used, sizeof(names) - used, "%s%s", i > 0 ? ", " : "",
                             wf->mcp[i].cfg.name);
            used += n > 0 ? (size_t)n : 0;
        }
        snprintf(error, error_len, "%s: no MCP server '%s' (servers: %s)", file, server,
                 names[0] != '\0' ? names : "none");
    }
    weft_workflow_free(wf);
    return err;
}

weft_err
weft_mcp_list(const char *file, const char *server, char **out, char *error, size_t error_len)
{
    json_t *doc = NULL;
    json_error_t jerr;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (file == NULL || server == NULL || out == NULL || error == NULL || error_len == 0) {
        return WEFT_EINVAL;
    }
    error[0] = '\0';
    doc = json_load_file(file, 0, &jerr);
    if (doc == NULL) {
        snprintf(error, error_len, "%s:%d:%d: %s", file, jerr.line, jerr.column, jerr.text);
        return WEFT_EPARSE;
    }
    if (json_is_object(json_object_get(doc, "mcpServers"))) {
        err =
            list_from_file(file, json_object_get(doc, "mcpServers"), server, out, error, error_len);
    } else {
        err = list_from_workflow(file, server, out, error, error_len);
    }
    json_decref(doc);
    return err;
}

weft_err
weft_mcp_check(const struct weft_workflow *workflow, struct weft_diags *diags, char **report)
{
    struct weft__buf lines;
    weft_err first = WEFT_OK;

    if (report != NULL) {
        *report = NULL;
    }
    if (workflow == NULL || diags == NULL) {
        return WEFT_EINVAL;
    }
    weft__buf_init(&lines, 0);
    for (size_t i = 0; i < workflow->mcp_count; i++) {
        const struct weft__mcp_server_config *cfg = &workflow->mcp[i].cfg;
        struct weft__mcp_client *client = NULL;
        struct weft__mcp_tool *tools = NULL;
        size_t count = 0;
        uint64_t version = 0;
        char why[300] = "";
        char path[128];
        weft_err e = weft__mcp_client_new(cfg, NULL, &client, why, sizeof(why));

        snprintf(path, sizeof(path), "mcp_servers.%s", cfg->name);
        if (e == WEFT_OK) {
            e = weft__mcp_client_tools(client, &tools, &count, &version);
        }
        if (e == WEFT_OK && count == 0) {
            snprintf(why, sizeof(why), "MCP server %s started but lists no tools", cfg->name);
            e = WEFT_EIO;
        }
        if (e != WEFT_OK) {
            first = first == WEFT_OK ? (e == WEFT_ENOMEM ? e : WEFT_EIO) : first;
            (void)weft__diags_add(diags, workflow->path, path, 0, 0,
                                  why[0] != '\0' ? why : weft_strerror(e));
        } else {
            (void)weft__buf_printf(&lines, "mcp server %s: %zu tools, protocol %s\n", cfg->name,
                                   count, weft__mcp_client_protocol(client));
        }
        weft__mcp_tools_free(tools, count);
        weft__mcp_client_free(client);
    }
    if (report != NULL) {
        *report = lines.data; /* the caller's now (NULL when no server started) */
    } else {
        weft__buf_cleanup(&lines);
    }
    return first;
}
