/* runtime/mcp/hub.c - a run's MCP servers (hub.h).
 *
 * Each server keeps a snapshot of its tool list, replaced when the client's list version moves
 * (a notifications/tools/list_changed, or a restart): an agent's next LLM round sees the new
 * set. A server that did not start has no client; the hub tries again, no more often than its
 * backoff allows (0.5 s doubling to 30 s), when an agent asks for its tools. Starting is slow
 * (a process spawn and initialize), so it happens outside the hub's lock, one attempt per
 * server at a time.
 *
 * Tool names go to the model as OpenAI function names ([A-Za-z0-9_-], at most 64): an MCP
 * name with other characters (the spec allows '.') is offered with them replaced by '_', and
 * a call is matched back the same way.
 */
#include "runtime/mcp/hub.h"
#include "runtime/common/attr_keys.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/workflow/workflow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 500u
#define BACKOFF_MAX_MS 30000u
#define DESCRIBE_MAX   1500
#define MODEL_NAME_MAX 64
/* What the client puts before the end of a server's stderr in a start error (client.c). */
#define STDERR_MARK "; its stderr ends:\n"

struct hub_server {
    const struct weft__mcp_entry *entry;
    struct weft__mcp_client *client;
    char error[WEFT__MCP_HUB_ERROR_MAX]; /* why it is not started ("" when it is) */
    bool is_starting;
    uint64_t next_try_ns; /* monotonic */
    unsigned backoff_ms;
    struct weft__mcp_tool *tools; /* snapshot */
    size_t tool_count;
    uint64_t version;
};

struct weft__mcp_hub {
    const struct weft_workflow *wf;
    struct weft__mcp_hub_options opts;
    pthread_mutex_t lock; /* the servers' fields */
    struct hub_server *servers;
    size_t count;
};

/* The client's events: progress goes to the hub's caller; the rest is logged by the client. */
static void
on_client_event(void *user_data, const struct weft__mcp_event *ev)
{
    struct weft__mcp_hub *hub = user_data;

    if (ev->kind == WEFT__MCP_PROGRESS && hub->opts.on_progress != NULL) {
        hub->opts.on_progress(hub->opts.user_data, ev->server, ev->tool, ev->progress, ev->total,
                              ev->message);
    }
}

/* Start server @p s unless it runs, is starting or waits for its backoff. Hub lock not held.
 * @return WEFT_OK when it runs (now or already); the start error otherwise. */
static weft_err
start_server(struct weft__mcp_hub *hub, struct hub_server *s, char *err, size_t err_len)
{
    struct weft__mcp_options o;
    struct weft__mcp_client *client = NULL;
    uint64_t now = weft__monotonic_ns();
    weft_err e = WEFT_OK;

    pthread_mutex_lock(&hub->lock);
    if (s->client != NULL || s->is_starting || now < s->next_try_ns) {
        e = s->client != NULL ? WEFT_OK : WEFT_EIO;
        snprintf(err, err_len, "%s", s->error);
        pthread_mutex_unlock(&hub->lock);
        return e;
    }
    s->is_starting = true;
    pthread_mutex_unlock(&hub->lock);

    memset(&o, 0, sizeof(o));
    o.tracer = hub->opts.tracer;
    o.meter = hub->opts.meter;
    o.meter_tee = hub->opts.meter_tee;
    o.on_event = on_client_event;
    o.user_data = hub;
    o.span_attrs = hub->opts.span_attrs;
    o.span_attr_count = hub->opts.span_attr_count;
    e = weft__mcp_client_new(&s->entry->cfg, &o, &client, err, err_len);

    pthread_mutex_lock(&hub->lock);
    s->is_starting = false;
    if (e == WEFT_OK) {
        s->client = client;
        s->error[0] = '\0';
        s->backoff_ms = 0;
    } else {
        snprintf(s->error, sizeof(s->error), "%s", err);
        s->backoff_ms = s->backoff_ms == 0                   ? BACKOFF_MIN_MS
                        : s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                             : s->backoff_ms * 2;
        s->next_try_ns = weft__monotonic_ns() + (uint64_t)s->backoff_ms * 1000000u;
    }
    pthread_mutex_unlock(&hub->lock);
    if (e != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s (next attempt in %.1f s)", err,
                 (double)s->backoff_ms / 1000.0);
    }
    return e;
}

static bool
is_wanted(const struct weft__mcp_hub_options *opts, size_t server)
{
    if (opts->only == NULL) {
        return true;
    }
    for (size_t i = 0; i < opts->only_count; i++) {
        if (opts->only[i] == server) {
            return true;
        }
    }
    return false;
}

weft_err
weft__mcp_hub_new(const struct weft_workflow *wf,
                  const struct weft__mcp_hub_options *opts,
                  struct weft__mcp_hub **out,
                  char *err,
                  size_t err_len)
{
    struct weft__mcp_hub *hub = NULL;
    weft_err first = WEFT_OK;

    *out = NULL;
    err[0] = '\0';
    hub = weft__calloc(1, sizeof(*hub));
    if (hub != NULL && wf->mcp_count > 0) {
        hub->servers = weft__calloc(wf->mcp_count, sizeof(*hub->servers));
    }
    if (hub == NULL || (wf->mcp_count > 0 && hub->servers == NULL)) {
        weft__free(hub);
        return WEFT_ENOMEM;
    }
    hub->wf = wf;
    if (opts != NULL) {
        hub->opts = *opts;
    }
    weft__rt_keys_init(); /* before the first request's span */
    hub->count = wf->mcp_count;
    pthread_mutex_init(&hub->lock, NULL);
    for (size_t i = 0; i < hub->count; i++) {
        hub->servers[i].entry = &wf->mcp[i];
    }
    for (size_t i = 0; i < hub->count; i++) {
        char why[WEFT__MCP_HUB_ERROR_MAX] = "";
        weft_err e = WEFT_OK;
        if (!is_wanted(&hub->opts, i)) {
            continue;
        }
        e = start_server(hub, &hub->servers[i], why, sizeof(why));
        if (e != WEFT_OK && first == WEFT_OK) {
            first = e;
            snprintf(err, err_len, "%s", why);
        }
    }
    if (first != WEFT_OK && hub->opts.is_strict) {
        weft__mcp_hub_free(hub);
        return first;
    }
    *out = hub;
    return WEFT_OK;
}

void
weft__mcp_hub_free(struct weft__mcp_hub *hub)
{
    if (hub == NULL) {
        return;
    }
    for (size_t i = 0; i < hub->count; i++) {
        weft__mcp_client_free(hub->servers[i].client);
        weft__mcp_tools_free(hub->servers[i].tools, hub->servers[i].tool_count);
    }
    pthread_mutex_destroy(&hub->lock);
    weft__free(hub->servers);
    weft__free(hub);
}

struct weft__mcp_client *
weft__mcp_hub_client(struct weft__mcp_hub *hub, size_t server)
{
    struct weft__mcp_client *c = NULL;

    if (server >= hub->count) {
        return NULL;
    }
    pthread_mutex_lock(&hub->lock);
    c = hub->servers[server].client;
    pthread_mutex_unlock(&hub->lock);
    return c;
}

/* Server @p i started (trying again when its backoff allows) and its snapshot current.
 * @return false when it is not running. Hub lock not held. */
static bool
refresh(struct weft__mcp_hub *hub, size_t i)
{
    struct hub_server *s = &hub->servers[i];
    struct weft__mcp_tool *tools = NULL;
    size_t count = 0;
    uint64_t version = 0;
    char why[WEFT__MCP_HUB_ERROR_MAX];

    if (start_server(hub, s, why, sizeof(why)) != WEFT_OK) {
        return false;
    }
    if (weft__mcp_client_tools(s->client, &tools, &count, &version) != WEFT_OK) {
        return true; /* out of memory: the old snapshot stays */
    }
    pthread_mutex_lock(&hub->lock);
    if (s->tools == NULL || version != s->version) {
        struct weft__mcp_tool *old = s->tools;
        size_t old_count = s->tool_count;
        s->tools = tools;
        s->tool_count = count;
        s->version = version;
        tools = old;
        count = old_count;
    }
    pthread_mutex_unlock(&hub->lock);
    weft__mcp_tools_free(tools, count);
    return true;
}

/* @p name as an OpenAI function name: [A-Za-z0-9_-], at most 64 characters. */
static void
model_name(const char *name, char *out)
{
    size_t n = 0;

    for (; name[n] != '\0' && n < MODEL_NAME_MAX; n++) {
        char c = name[n];
        bool is_ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-';
        out[n] = is_ok ? c : '_';
    }
    out[n] = '\0';
}

static bool
array_has_name(const json_t *tools, const char *name)
{
    size_t i = 0;
    json_t *t = NULL;

    json_array_foreach(tools, i, t)
    {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            return true;
        }
    }
    return false;
}

weft_err
weft__mcp_hub_tools_json(struct weft__mcp_hub *hub, const struct wf_agent *agent, json_t *tools)
{
    weft_err e = WEFT_OK;

    for (size_t k = 0; k < agent->mcp_server_count && e == WEFT_OK; k++) {
        size_t i = agent->mcp_servers[k];
        struct hub_server *s = NULL;

        if (i >= hub->count || !refresh(hub, i)) {
            continue;
        }
        s = &hub->servers[i];
        pthread_mutex_lock(&hub->lock);
        for (size_t t = 0; t < s->tool_count && e == WEFT_OK; t++) {
            const struct weft__mcp_tool *tool = &s->tools[t];
            char name[MODEL_NAME_MAX + 1];
            json_t *entry = NULL;
            model_name(tool->name, name);
            if (array_has_name(tools, name)) {
                WEFT_LOG(WEFT_LOG_WARN, "mcp %s: tool %s hidden from agent %s: the name is taken",
                         s->entry->cfg.name, name, agent->name);
                continue;
            }
            entry =
                json_pack("{s:s, s:{s:s, s:s, s:O}}", "type", "function", "function", "name", name,
                          "description", tool->description != NULL ? tool->description : tool->name,
                          "parameters", tool->input_schema);
            if (entry == NULL || json_array_append_new(tools, entry) != 0) {
                e = WEFT_ENOMEM;
            }
        }
        pthread_mutex_unlock(&hub->lock);
    }
    return e;
}

bool
weft__mcp_hub_find(struct weft__mcp_hub *hub,
                   const struct wf_agent *agent,
                   const char *name,
                   size_t *server,
                   json_t **schema)
{
    bool is_found = false;

    *schema = NULL;
    for (size_t k = 0; k < agent->mcp_server_count && !is_found; k++) {
        size_t i = agent->mcp_servers[k];
        struct hub_server *s = NULL;
        if (i >= hub->count) {
            continue;
        }
        s = &hub->servers[i];
        pthread_mutex_lock(&hub->lock);
        for (size_t t = 0; t < s->tool_count && !is_found; t++) {
            char as_model[MODEL_NAME_MAX + 1];
            model_name(s->tools[t].name, as_model);
            if (strcmp(as_model, name) == 0) {
                is_found = true;
                *server = i;
                *schema = json_deep_copy(s->tools[t].input_schema);
            }
        }
        pthread_mutex_unlock(&hub->lock);
    }
    return is_found;
}

char *
weft__mcp_hub_tool_name(struct weft__mcp_hub *hub, size_t server, const char *name)
{
    char *out = NULL;

    if (server >= hub->count) {
        return NULL;
    }
    pthread_mutex_lock(&hub->lock);
    for (size_t t = 0; t < hub->servers[server].tool_count && out == NULL; t++) {
        char as_model[MODEL_NAME_MAX + 1];
        model_name(hub->servers[server].tools[t].name, as_model);
        if (strcmp(as_model, name) == 0) {
            out = weft__strdup(hub->servers[server].tools[t].name);
        }
    }
    pthread_mutex_unlock(&hub->lock);
    return out;
}

/* The first line of @p text, at most @p max bytes, into @p b. */
static void
first_line(struct weft__buf *b, const char *text, size_t max)
{
    size_t len = strcspn(text, "\r\n");

    (void)weft__buf_append(b, text, len < max ? len : max);
}

char *
weft__mcp_hub_describe(struct weft__mcp_hub *hub, const struct wf_agent *agent)
{
    struct weft__buf b;
    size_t i = agent->mcp_server_count > 0 ? agent->mcp_servers[0] : hub->count;
    struct hub_server *s = i < hub->count ? &hub->servers[i] : NULL;

    weft__buf_init(&b, DESCRIBE_MAX);
    if (agent->description != NULL) {
        (void)weft__buf_append_str(&b, agent->description);
    } else if (s == NULL) {
        (void)weft__buf_append_str(&b, "");
    } else if (!refresh(hub, i)) {
        pthread_mutex_lock(&hub->lock);
        (void)weft__buf_printf(&b, "unavailable: MCP server %s did not start (%.160s)",
                               s->entry->cfg.name, s->error);
        pthread_mutex_unlock(&hub->lock);
    } else {
        char *instructions = weft__mcp_client_instructions(s->client);
        (void)weft__buf_printf(&b, "the tools of MCP server %s", s->entry->cfg.name);
        if (instructions != NULL && instructions[0] != '\0') {
            (void)weft__buf_append_str(&b, ": ");
            first_line(&b, instructions, 300);
        }
        weft__free(instructions);
        pthread_mutex_lock(&hub->lock);
        (void)weft__buf_append_str(&b, ". Tools:");
        for (size_t t = 0; t < s->tool_count; t++) {
            (void)weft__buf_printf(&b, "%s %s", t == 0 ? "" : ";", s->tools[t].name);
            if (s->tools[t].description != NULL) {
                (void)weft__buf_append_str(&b, " (");
                first_line(&b, s->tools[t].description, 120);
                (void)weft__buf_append_str(&b, ")");
            }
        }
        pthread_mutex_unlock(&hub->lock);
    }
    if (b.data == NULL) {
        char *empty = weft__strdup("");
        return empty;
    }
    return b.data;
}

bool
weft__mcp_hub_required_down(struct weft__mcp_hub *hub, char *why, size_t why_len)
{
    bool is_down = false;

    pthread_mutex_lock(&hub->lock);
    for (size_t i = 0; i < hub->count && !is_down; i++) {
        const struct hub_server *s = &hub->servers[i];
        if (s->client != NULL || s->entry->is_optional || !is_wanted(&hub->opts, i)) {
            continue;
        }
        /* The client's sentence first, then the install command, then the end of the
         * server's stderr (which the client put after STDERR_MARK): a terminal that shows
         * only the first lines still shows what to do. */
        const char *tail = strstr(s->error, STDERR_MARK);
        int head = tail != NULL ? (int)(tail - s->error) : (int)strlen(s->error);
        is_down = true;
        snprintf(why, why_len, "MCP server %s did not start: %.*s%s%s%s%s", s->entry->cfg.name,
                 head, s->error[0] != '\0' ? s->error : "no reason given",
                 s->entry->install != NULL ? "\nInstall it with: " : "",
                 s->entry->install != NULL ? s->entry->install : "",
                 tail != NULL ? "\nIts stderr ends:\n" : "",
                 tail != NULL ? tail + strlen(STDERR_MARK) : "");
    }
    pthread_mutex_unlock(&hub->lock);
    return is_down;
}

bool
weft__mcp_hub_agent_ready(struct weft__mcp_hub *hub, const struct wf_agent *agent)
{
    for (size_t k = 0; k < agent->mcp_server_count; k++) {
        size_t i = agent->mcp_servers[k];
        if (i < hub->count && !refresh(hub, i)) {
            return false;
        }
    }
    return true;
}

bool
weft__mcp_hub_down(struct weft__mcp_hub *hub,
                   const struct wf_agent *agent,
                   size_t *server,
                   char *why,
                   size_t why_len)
{
    bool is_down = false;

    pthread_mutex_lock(&hub->lock);
    for (size_t k = 0; k < agent->mcp_server_count && !is_down; k++) {
        size_t i = agent->mcp_servers[k];
        if (i < hub->count && hub->servers[i].client == NULL) {
            is_down = true;
            *server = i;
            snprintf(why, why_len, "MCP server %s is not running: %s",
                     hub->servers[i].entry->cfg.name,
                     hub->servers[i].error[0] != '\0' ? hub->servers[i].error : "not started");
        }
    }
    pthread_mutex_unlock(&hub->lock);
    return is_down;
}
