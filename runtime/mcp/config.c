/* runtime/mcp/config.c - MCP server entries (config.h): parsed and checked key by key, so that
 * a mistake is reported with the server, the key and what was expected, the way the rest of a
 * workflow file is. Environment references are expanded here, in the process that will start
 * the server: the workflow document itself keeps "${NAME}", never the value.
 */
#include "runtime/mcp/config.h"

#include "base/buf.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS    256
#define MAX_ENV     128
#define MAX_HEADERS 64

static const char *const entry_keys[] = {"type",
                                         "command",
                                         "args",
                                         "env",
                                         "cwd",
                                         "url",
                                         "headers",
                                         "timeout_s",
                                         "init_timeout_s",
                                         "max_output_bytes",
                                         "description",
                                         "model",
                                         "agent",
                                         "optional",
                                         "retries",
                                         "install",
                                         NULL};

void
weft__mcp_entry_cleanup(struct weft__mcp_entry *e)
{
    if (e == NULL) {
        return;
    }
    weft__mcp_server_config_cleanup(&e->cfg);
    weft__free(e->description);
    weft__free(e->model);
    weft__free(e->install);
    memset(e, 0, sizeof(*e));
}

void
weft__mcp_agent_name(const char *name, char *out, size_t len)
{
    snprintf(out, len, "mcp_agent_%s", name);
}

char *
weft__mcp_expand(const char *text)
{
    struct weft__buf b;
    const char *p = text;
    weft_err err = WEFT_OK;

    weft__buf_init(&b, 0);
    err = weft__buf_append(&b, "", 0); /* "" has a buffer too */
    while (err == WEFT_OK && *p != '\0') {
        const char *open = strstr(p, "${");
        const char *close = open != NULL ? strchr(open, '}') : NULL;
        const char *sep = NULL;
        char name[128];
        size_t name_len = 0;
        const char *value = NULL;

        if (open == NULL || close == NULL) {
            err = weft__buf_append_str(&b, p);
            break;
        }
        err = weft__buf_append(&b, p, (size_t)(open - p));
        sep = strstr(open, ":-");
        if (sep != NULL && sep > close) {
            sep = NULL;
        }
        name_len = (size_t)((sep != NULL ? sep : close) - (open + 2));
        p = close + 1;
        if (name_len == 0 || name_len >= sizeof(name)) {
            if (err == WEFT_OK) { /* not a reference: kept as written */
                err = weft__buf_append(&b, open, (size_t)(close + 1 - open));
            }
            continue;
        }
        memcpy(name, open + 2, name_len);
        name[name_len] = '\0';
        value = getenv(name);
        if (err != WEFT_OK) {
            break;
        }
        if (value != NULL && value[0] != '\0') {
            err = weft__buf_append_str(&b, value);
        } else if (sep != NULL) {
            err = weft__buf_append(&b, sep + 2, (size_t)(close - (sep + 2)));
        }
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data; /* the buffer's data is the caller's now */
}

/* A problem with key @p key of the entry. Always false. */
static bool
bad(char *field, size_t field_len, const char *key, char *why, size_t why_len, const char *msg)
{
    snprintf(field, field_len, "%s", key);
    snprintf(why, why_len, "%s", msg);
    return false;
}

/* A string value expanded, or NULL with why set. */
static char *
expanded_string(
    const json_t *v, const char *key, char *field, size_t field_len, char *why, size_t why_len)
{
    char *out = NULL;

    if (!json_is_string(v)) {
        (void)bad(field, field_len, key, why, why_len, "expected a string");
        return NULL;
    }
    out = weft__mcp_expand(json_string_value(v));
    if (out == NULL) {
        (void)bad(field, field_len, key, why, why_len, "out of memory");
    }
    return out;
}

/* {"KEY": "value", ...} at @p key into "KEY<sep>value" strings, values expanded. */
static bool
pairs(const json_t *obj,
      const char *key,
      const char *sep,
      size_t max,
      char ***out,
      size_t *count,
      char *field,
      size_t field_len,
      char *why,
      size_t why_len)
{
    const char *k = NULL;
    json_t *v = NULL;
    size_t n = 0;

    if (obj == NULL) {
        return true;
    }
    if (!json_is_object(obj) || json_object_size(obj) > max) {
        return bad(field, field_len, key, why, why_len,
                   max == MAX_ENV ? "expected an object of strings (at most 128 entries)"
                                  : "expected an object of strings (at most 64 entries)");
    }
    *out = weft__calloc(json_object_size(obj) + 1, sizeof(**out));
    if (*out == NULL) {
        return bad(field, field_len, key, why, why_len, "out of memory");
    }
    json_object_foreach((json_t *)obj, k, v)
    {
        char sub[160];
        char *value = NULL;
        size_t len = 0;

        snprintf(sub, sizeof(sub), "%s.%s", key, k);
        if (k[0] == '\0' || strpbrk(k, sep[0] == '=' ? "=" : ":\r\n") != NULL) {
            return bad(field, field_len, sub, why, why_len, "expected a valid name");
        }
        value = expanded_string(v, sub, field, field_len, why, why_len);
        if (value == NULL) {
            return false;
        }
        if (strpbrk(value, "\r\n") != NULL) {
            weft__free(value);
            return bad(field, field_len, sub, why, why_len, "expected one line");
        }
        len = strlen(k) + strlen(sep) + strlen(value) + 1;
        (*out)[n] = weft__malloc(len);
        if ((*out)[n] == NULL) {
            weft__free(value);
            return bad(field, field_len, sub, why, why_len, "out of memory");
        }
        snprintf((*out)[n], len, "%s%s%s", k, sep, value);
        weft__free(value);
        *count = ++n;
    }
    return true;
}

/* "args": an array of strings after the command, expanded; argv[0] is the command. */
static bool
argv_of(const json_t *value,
        struct weft__mcp_server_config *cfg,
        char *field,
        size_t field_len,
        char *why,
        size_t why_len)
{
    const json_t *cmd = json_object_get(value, "command");
    const json_t *args = json_object_get(value, "args");
    size_t n = args != NULL ? json_array_size(args) : 0;

    if (!json_is_string(cmd) || json_string_length(cmd) == 0) {
        return bad(field, field_len, "command", why, why_len, "expected a non-empty string");
    }
    if (args != NULL && (!json_is_array(args) || n >= MAX_ARGS)) {
        return bad(field, field_len, "args", why, why_len,
                   "expected an array of strings (at most 255)");
    }
    cfg->argv = weft__calloc(n + 2, sizeof(*cfg->argv));
    if (cfg->argv == NULL) {
        return bad(field, field_len, "command", why, why_len, "out of memory");
    }
    cfg->argv[0] = expanded_string(cmd, "command", field, field_len, why, why_len);
    if (cfg->argv[0] == NULL) {
        return false;
    }
    cfg->argc = 1;
    for (size_t i = 0; i < n; i++) {
        char sub[32];
        snprintf(sub, sizeof(sub), "args[%zu]", i);
        cfg->argv[i + 1] =
            expanded_string(json_array_get(args, i), sub, field, field_len, why, why_len);
        if (cfg->argv[i + 1] == NULL) {
            return false;
        }
        cfg->argc = i + 2;
    }
    return true;
}

/* cwd, expanded and made absolute against @p base_dir. */
static bool
cwd_of(const json_t *v,
       const char *base_dir,
       struct weft__mcp_server_config *cfg,
       char *field,
       size_t field_len,
       char *why,
       size_t why_len)
{
    char *dir = NULL;

    if (v == NULL) {
        return true;
    }
    dir = expanded_string(v, "cwd", field, field_len, why, why_len);
    if (dir == NULL) {
        return false;
    }
    if (dir[0] != '/' && base_dir != NULL) {
        size_t len = strlen(base_dir) + strlen(dir) + 2;
        char *abs = weft__malloc(len);
        if (abs == NULL) {
            weft__free(dir);
            return bad(field, field_len, "cwd", why, why_len, "out of memory");
        }
        snprintf(abs, len, "%s/%s", base_dir, dir);
        weft__free(dir);
        dir = abs;
    }
    cfg->cwd = dir;
    return true;
}

/* A number of seconds in (0, 3600] at @p key as milliseconds; 0 when absent. */
static bool
seconds_of(const json_t *value,
           const char *key,
           uint32_t *ms,
           char *field,
           size_t field_len,
           char *why,
           size_t why_len)
{
    const json_t *v = json_object_get(value, key);

    if (v == NULL) {
        return true;
    }
    if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 3600) {
        return bad(field, field_len, key, why, why_len, "expected seconds in (0, 3600]");
    }
    *ms = (uint32_t)(json_number_value(v) * 1000.0);
    return true;
}

/* weft's own keys: limits, the agent's description and model, whether there is an agent. */
static bool
weft_keys(const json_t *value,
          struct weft__mcp_entry *out,
          char *field,
          size_t field_len,
          char *why,
          size_t why_len)
{
    const json_t *v = json_object_get(value, "max_output_bytes");

    if (!seconds_of(value, "timeout_s", &out->cfg.timeout_ms, field, field_len, why, why_len) ||
        !seconds_of(value, "init_timeout_s", &out->cfg.init_timeout_ms, field, field_len, why,
                    why_len)) {
        return false;
    }
    if (v != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 1024 ||
            json_integer_value(v) > 64 * 1024 * 1024) {
            return bad(field, field_len, "max_output_bytes", why, why_len,
                       "expected an integer from 1024 to 67108864");
        }
        out->cfg.max_output = (size_t)json_integer_value(v);
    }
    v = json_object_get(value, "agent");
    if (v != NULL && !json_is_boolean(v)) {
        return bad(field, field_len, "agent", why, why_len, "expected true or false");
    }
    out->is_agent = v == NULL || json_is_true(v);
    v = json_object_get(value, "optional");
    if (v != NULL && !json_is_boolean(v)) {
        return bad(field, field_len, "optional", why, why_len,
                   "expected true (the run goes on without the server when it does not start) "
                   "or false (the default: the run fails before its first step)");
    }
    out->is_optional = json_is_true(v);
    v = json_object_get(value, "retries");
    out->retries = WEFT__MCP_DEFAULT_RETRIES;
    if (v != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > WEFT__MCP_MAX_RETRIES) {
            return bad(field, field_len, "retries", why, why_len,
                       "expected an integer from 0 to 5 (calls tried again after a server "
                       "failure)");
        }
        out->retries = (unsigned)json_integer_value(v);
    }
    v = json_object_get(value, "install");
    if (v != NULL) {
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 300) {
            return bad(field, field_len, "install", why, why_len,
                       "expected the command that installs the server (1 to 300 characters)");
        }
        out->install = weft__strdup(json_string_value(v));
        if (out->install == NULL) {
            return bad(field, field_len, "install", why, why_len, "out of memory");
        }
    }
    v = json_object_get(value, "description");
    if (v != NULL) {
        out->description = expanded_string(v, "description", field, field_len, why, why_len);
        if (out->description == NULL) {
            return false;
        }
    }
    v = json_object_get(value, "model");
    if (v != NULL) {
        if (!json_is_string(v)) {
            return bad(field, field_len, "model", why, why_len, "expected a model's name");
        }
        out->model = weft__strdup(json_string_value(v));
        if (out->model == NULL) {
            return bad(field, field_len, "model", why, why_len, "out of memory");
        }
    }
    return true;
}

/* The transport: "type" when given, else command (stdio) or url (HTTP), never both. */
static bool
transport_of(
    const json_t *value, bool *is_stdio, char *field, size_t field_len, char *why, size_t why_len)
{
    const json_t *type = json_object_get(value, "type");
    bool has_cmd = json_object_get(value, "command") != NULL;
    bool has_url = json_object_get(value, "url") != NULL;
    const char *t = json_string_value(type);

    if (type != NULL && t == NULL) {
        return bad(field, field_len, "type", why, why_len,
                   "expected \"stdio\", \"http\" or \"streamable-http\"");
    }
    if (t != NULL && strcmp(t, "sse") == 0) {
        return bad(field, field_len, "type", why, why_len,
                   "the legacy HTTP+SSE transport is not supported (expected \"stdio\", "
                   "\"http\" or \"streamable-http\")");
    }
    if (t != NULL && strcmp(t, "stdio") != 0 && strcmp(t, "http") != 0 &&
        strcmp(t, "streamable-http") != 0) {
        return bad(field, field_len, "type", why, why_len,
                   "expected \"stdio\", \"http\" or \"streamable-http\"");
    }
    if (has_cmd == has_url) {
        return bad(field, field_len, "", why, why_len,
                   "expected exactly one of \"command\" (stdio) and \"url\" (Streamable "
                   "HTTP)");
    }
    *is_stdio = has_cmd;
    if (t != NULL && (strcmp(t, "stdio") == 0) != has_cmd) {
        return bad(field, field_len, "type", why, why_len,
                   has_cmd ? "expected \"stdio\" for a \"command\" entry"
                           : "expected \"http\" or \"streamable-http\" for a \"url\" entry");
    }
    return true;
}

static bool
check_name(const char *name, char *field, size_t field_len, char *why, size_t why_len)
{
    size_t len = strlen(name);

    if (len == 0 || len > 48 ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != len) {
        return bad(field, field_len, "", why, why_len,
                   "expected a server name of 1 to 48 characters of [A-Za-z0-9_-]");
    }
    return true;
}

/* Every key known, transport first, then what it needs. */
static bool
parse_keys(const char *name,
           const json_t *value,
           const char *base_dir,
           struct weft__mcp_entry *out,
           char *field,
           size_t field_len,
           char *why,
           size_t why_len)
{
    const char *k = NULL;
    json_t *v = NULL;
    bool is_stdio = false;

    json_object_foreach((json_t *)value, k, v)
    {
        bool is_known = false;
        for (size_t i = 0; entry_keys[i] != NULL && !is_known; i++) {
            is_known = strcmp(entry_keys[i], k) == 0;
        }
        if (!is_known) {
            return bad(field, field_len, k, why, why_len,
                       "unknown key (expected type, command, args, env, cwd, url, headers, "
                       "timeout_s, init_timeout_s, max_output_bytes, description, model, agent, "
                       "optional, retries, install)");
        }
    }
    if (!transport_of(value, &is_stdio, field, field_len, why, why_len)) {
        return false;
    }
    out->cfg.name = weft__strdup(name);
    if (out->cfg.name == NULL) {
        return bad(field, field_len, "", why, why_len, "out of memory");
    }
    if (is_stdio) {
        if (json_object_get(value, "headers") != NULL) {
            return bad(field, field_len, "headers", why, why_len,
                       "headers are for \"url\" servers");
        }
        return argv_of(value, &out->cfg, field, field_len, why, why_len) &&
               pairs(json_object_get(value, "env"), "env", "=", MAX_ENV, &out->cfg.env,
                     &out->cfg.env_count, field, field_len, why, why_len) &&
               cwd_of(json_object_get(value, "cwd"), base_dir, &out->cfg, field, field_len, why,
                      why_len);
    }
    if (json_object_get(value, "args") != NULL || json_object_get(value, "env") != NULL ||
        json_object_get(value, "cwd") != NULL) {
        return bad(field, field_len,
                   json_object_get(value, "args") != NULL  ? "args"
                   : json_object_get(value, "env") != NULL ? "env"
                                                           : "cwd",
                   why, why_len, "only stdio servers (\"command\") take this key");
    }
    out->cfg.url =
        expanded_string(json_object_get(value, "url"), "url", field, field_len, why, why_len);
    if (out->cfg.url == NULL) {
        return false;
    }
    if (strncmp(out->cfg.url, "http://", 7) != 0 && strncmp(out->cfg.url, "https://", 8) != 0) {
        return bad(field, field_len, "url", why, why_len, "expected an http:// or https:// URL");
    }
    return pairs(json_object_get(value, "headers"), "headers", ": ", MAX_HEADERS, &out->cfg.headers,
                 &out->cfg.header_count, field, field_len, why, why_len);
}

bool
weft__mcp_entry_parse(const char *name,
                      const json_t *value,
                      const char *base_dir,
                      struct weft__mcp_entry *out,
                      char *field,
                      size_t field_len,
                      char *why,
                      size_t why_len)
{
    bool is_ok = false;

    memset(out, 0, sizeof(*out));
    field[0] = '\0';
    why[0] = '\0';
    if (!check_name(name, field, field_len, why, why_len)) {
        return false;
    }
    if (!json_is_object(value)) {
        return bad(field, field_len, "", why, why_len,
                   "expected an object with \"command\" or \"url\"");
    }
    is_ok = parse_keys(name, value, base_dir, out, field, field_len, why, why_len) &&
            weft_keys(value, out, field, field_len, why, why_len);
    if (!is_ok) {
        weft__mcp_entry_cleanup(out);
    }
    return is_ok;
}
