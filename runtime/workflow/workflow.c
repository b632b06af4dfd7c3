/* runtime/workflow/workflow.c - load and validate a workflow file.
 *
 * Validation collects every problem rather than stopping at the first, because a user fixing
 * a workflow wants the whole list at once (`weft validate`). Each problem names the file, the
 * JSON path and what was expected. Unknown keys are errors: a misspelt "max_retires" silently
 * ignored would be a budget silently ignored.
 *
 * Shape: parse with jansson (syntax errors carry line and column), then one function per
 * object kind reads its keys into the structs of workflow.h, resolving names to indices in a
 * second pass once every agent, model and tool is known.
 */
#include "runtime/workflow/workflow.h"

#include "base/buf.h"
#include "base/mem.h"
#include "runtime/common/json_type.h"
#include "runtime/llm/llm.h"
#include "runtime/observe/webhook.h"
#include "runtime/workflow/expr.h"
#include "runtime/workflow/plan.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DIAGS 256

struct loader {
    const char *file;
    unsigned file_depth; /* sub-workflow nesting */
    struct weft_diags *diags;
    struct weft_diags local; /* used when the caller passes none */
    size_t errors;
    bool is_oom;
    const json_t *doc; /* the document itself (a task message's copy), instead of reading file */
};

/* ------------------------------------------------------------------------------------------ */
/* Diagnostics                                                                                 */

static void
diag_add(struct loader *ld, const char *path, int line, int column, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

weft_err
weft__diags_add(struct weft_diags *d,
                const char *file,
                const char *path,
                int line,
                int column,
                const char *message)
{
    struct weft_diag *grown = NULL;

    if (d->count >= MAX_DIAGS) {
        d->dropped++;
        return WEFT_OK;
    }
    grown = weft__realloc(d->items, (d->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    d->items = grown;
    grown[d->count].file = weft__strdup(file);
    grown[d->count].path = weft__strdup(path);
    grown[d->count].message = weft__strdup(message);
    grown[d->count].line = line;
    grown[d->count].column = column;
    if (grown[d->count].file == NULL || grown[d->count].path == NULL ||
        grown[d->count].message == NULL) {
        weft__free(grown[d->count].file);
        weft__free(grown[d->count].path);
        weft__free(grown[d->count].message);
        return WEFT_ENOMEM;
    }
    d->count++;
    return WEFT_OK;
}

static void
diag_add(struct loader *ld, const char *path, int line, int column, const char *fmt, ...)
{
    char message[512];
    va_list ap;

    ld->errors++;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if (weft__diags_add(ld->diags, ld->file, path, line, column, message) != WEFT_OK) {
        ld->is_oom = true;
    }
}

void
weft_diags_cleanup(struct weft_diags *diags)
{
    if (diags == NULL) {
        return;
    }
    for (size_t i = 0; i < diags->count; i++) {
        weft__free(diags->items[i].file);
        weft__free(diags->items[i].path);
        weft__free(diags->items[i].message);
    }
    weft__free(diags->items);
    memset(diags, 0, sizeof(*diags));
}

const char *
weft_diag_format(const struct weft_diag *diag, char *buf, size_t len)
{
    if (buf == NULL || len == 0) {
        return buf;
    }
    if (diag == NULL) {
        buf[0] = '\0';
        return buf;
    }
    if (diag->line > 0) {
        snprintf(buf, len, "%s:%d:%d: %s%s%s", diag->file, diag->line, diag->column,
                 diag->path[0] != '\0' ? diag->path : "", diag->path[0] != '\0' ? ": " : "",
                 diag->message);
    } else {
        snprintf(buf, len, "%s: %s%s%s", diag->file, diag->path[0] != '\0' ? diag->path : "",
                 diag->path[0] != '\0' ? ": " : "", diag->message);
    }
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed readers. Each reports a problem at PATH.KEY and leaves the default on a mismatch.     */

/* Paths are cut to the buffer: a diagnostic with a shortened path beats none. */
static void
join_path(char *out, size_t len, const char *path, const char *key)
{
    int n =
        path[0] == '\0' ? snprintf(out, len, "%s", key) : snprintf(out, len, "%s.%s", path, key);
    if (n < 0) {
        out[0] = '\0';
    }
}

/* Report every key of @p obj not in @p allowed (NULL-terminated). */
static void
check_keys(struct loader *ld, const json_t *obj, const char *path, const char *const *allowed)
{
    const char *key = NULL;
    json_t *value = NULL;
    char sub[256];

    json_object_foreach((json_t *)obj, key, value)
    {
        bool is_known = false;
        (void)value;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (strcmp(key, allowed[i]) == 0) {
                is_known = true;
                break;
            }
        }
        if (!is_known) {
            join_path(sub, sizeof(sub), path, key);
            diag_add(ld, sub, 0, 0, "unknown key");
        }
    }
}

static const json_t *
get_typed(struct loader *ld,
          const json_t *obj,
          const char *path,
          const char *key,
          json_type type,
          bool is_required)
{
    const json_t *v = json_object_get(obj, key);
    char sub[256];

    join_path(sub, sizeof(sub), path, key);
    if (v == NULL) {
        if (is_required) {
            diag_add(ld, sub, 0, 0, "required key is missing (expected %s)",
                     weft__json_type_expected(type));
        }
        return NULL;
    }
    if (json_typeof(v) != type && !(type == JSON_REAL && json_is_integer(v)) &&
        !(type == JSON_TRUE && json_is_boolean(v))) {
        diag_add(ld, sub, 0, 0, "expected %s, got %s", weft__json_type_expected(type),
                 weft__json_type_name(v));
        return NULL;
    }
    return v;
}

static char *
get_str(struct loader *ld, const json_t *obj, const char *path, const char *key, bool is_required)
{
    const json_t *v = get_typed(ld, obj, path, key, JSON_STRING, is_required);
    char sub[256];
    char *copy = NULL;

    if (v == NULL) {
        return NULL;
    }
    if (json_string_length(v) == 0 && is_required) {
        join_path(sub, sizeof(sub), path, key);
        diag_add(ld, sub, 0, 0, "expected a non-empty string");
        return NULL;
    }
    copy = weft__strdup(json_string_value(v));
    if (copy == NULL) {
        ld->is_oom = true;
    }
    return copy;
}

static bool
get_bool(struct loader *ld, const json_t *obj, const char *path, const char *key, bool def)
{
    const json_t *v = get_typed(ld, obj, path, key, JSON_TRUE, false);
    return v == NULL ? def : json_is_true(v);
}

/* An integer in [min, max]. */
static int64_t
get_int(struct loader *ld,
        const json_t *obj,
        const char *path,
        const char *key,
        int64_t def,
        int64_t min,
        int64_t max)
{
    const json_t *v = json_object_get(obj, key);
    char sub[256];

    if (v == NULL) {
        return def;
    }
    join_path(sub, sizeof(sub), path, key);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        if (max == INT64_MAX) {
            diag_add(ld, sub, 0, 0, "expected integer >= %lld", (long long)min);
        } else {
            diag_add(ld, sub, 0, 0, "expected integer in [%lld, %lld]", (long long)min,
                     (long long)max);
        }
        return def;
    }
    return json_integer_value(v);
}

static double
get_num(struct loader *ld,
        const json_t *obj,
        const char *path,
        const char *key,
        double def,
        double min,
        double max)
{
    const json_t *v = json_object_get(obj, key);
    char sub[256];

    if (v == NULL) {
        return def;
    }
    join_path(sub, sizeof(sub), path, key);
    if (!json_is_number(v) || json_number_value(v) < min || json_number_value(v) > max ||
        !isfinite(json_number_value(v))) {
        diag_add(ld, sub, 0, 0, "expected number in [%g, %g]", min, max);
        return def;
    }
    return json_number_value(v);
}

/* Seconds (number > 0, at most a day) as milliseconds; 0 when absent. */
static uint32_t
get_seconds_ms(struct loader *ld, const json_t *obj, const char *path, const char *key)
{
    double s = get_num(ld, obj, path, key, 0.0, 0.001, 86400.0);
    return (uint32_t)(s * 1000.0 + 0.5);
}

/* Instructions kept in Langfuse prompt management: {"langfuse_prompt": NAME, "label": L or
 * "version": N, "fallback": TEXT}. */
static struct rt_prompt_ref *
get_prompt_ref(struct loader *ld, const json_t *obj, const char *agent_path)
{
    static const char *const keys[] = {"langfuse_prompt", "label", "version", "fallback", NULL};
    struct rt_prompt_ref *ref = weft__calloc(1, sizeof(*ref));
    char path[96];

    snprintf(path, sizeof(path), "%s.instructions", agent_path);
    if (ref == NULL) {
        ld->is_oom = true;
        return NULL;
    }
    check_keys(ld, obj, path, keys);
    ref->name = get_str(ld, obj, path, "langfuse_prompt", true);
    ref->label = get_str(ld, obj, path, "label", false);
    ref->version = get_int(ld, obj, path, "version", 0, 1, INT32_MAX);
    ref->fallback = get_str(ld, obj, path, "fallback", false);
    if (ref->label != NULL && ref->version != 0) {
        char sub[128];
        snprintf(sub, sizeof(sub), "%s.version", path);
        diag_add(ld, sub, 0, 0, "give \"label\" or \"version\", not both");
    }
    return ref;
}

/* obj.instructions: a string into *text, or a Langfuse prompt reference into *ref. */
static void
get_instructions(
    struct loader *ld, const json_t *obj, const char *path, char **text, struct rt_prompt_ref **ref)
{
    if (json_is_object(json_object_get(obj, "instructions"))) {
        *ref = get_prompt_ref(ld, json_object_get(obj, "instructions"), path);
    } else {
        *text = get_str(ld, obj, path, "instructions", false);
    }
}

/* An array of non-empty strings; *count receives its length. */
static char **
get_str_array(
    struct loader *ld, const json_t *obj, const char *path, const char *key, size_t *count)
{
    const json_t *arr = get_typed(ld, obj, path, key, JSON_ARRAY, false);
    char **out = NULL;
    size_t n = 0;
    char sub[256];

    *count = 0;
    if (arr == NULL || json_array_size(arr) == 0) {
        return NULL;
    }
    out = weft__calloc(json_array_size(arr), sizeof(*out));
    if (out == NULL) {
        ld->is_oom = true;
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *v = json_array_get(arr, i);
        char base[200];

        join_path(base, sizeof(base), path, key);
        snprintf(sub, sizeof(sub), "%s[%zu]", base, i);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            diag_add(ld, sub, 0, 0, "expected a non-empty string");
            continue;
        }
        out[n] = weft__strdup(json_string_value(v));
        if (out[n] == NULL) {
            ld->is_oom = true;
            continue;
        }
        n++;
    }
    *count = n;
    return out;
}

void
weft__wf_free_str_array(char **arr, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        weft__free(arr[i]);
    }
    weft__free(arr);
}

/* A path relative to the workflow's directory, made absolute. */
static char *
resolve_path(const struct weft_workflow *wf, const char *rel)
{
    struct weft__buf b;

    if (rel[0] == '/') {
        return weft__strdup(rel);
    }
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%s/%s", wf->dir, rel) != WEFT_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

/* ------------------------------------------------------------------------------------------ */
/* Lookups                                                                                     */

bool
weft__wf_agent_can_request(const struct wf_agent *from, size_t to)
{
    for (size_t i = 0; from != NULL && i < from->can_request_count; i++) {
        if (from->can_request[i] == to) {
            return true;
        }
    }
    return false;
}

size_t
weft__wf_find_agent(const struct weft_workflow *wf, const char *name)
{
    /* An agent whose name is missing (a diagnostic already) matches nothing. */
    for (size_t i = 0; name != NULL && i < wf->agent_count; i++) {
        if (wf->agents[i].name != NULL && strcmp(wf->agents[i].name, name) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

size_t
weft__wf_find_tool(const struct weft_workflow *wf, const char *name)
{
    for (size_t i = 0; name != NULL && i < wf->tool_count; i++) {
        if (wf->tools[i].name != NULL && strcmp(wf->tools[i].name, name) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

static size_t
find_model(const struct weft_workflow *wf, const char *name)
{
    for (size_t i = 0; name != NULL && i < wf->model_count; i++) {
        if (wf->models[i].name != NULL && strcmp(wf->models[i].name, name) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

/* Resolve obj[key] (a model name) to an index; a missing key falls back to @p def. */
static size_t
model_ref(struct loader *ld,
          const struct weft_workflow *wf,
          const json_t *obj,
          const char *path,
          size_t def)
{
    const json_t *v = get_typed(ld, obj, path, "model", JSON_STRING, false);
    char sub[256];
    size_t idx = WF_NONE;

    if (v == NULL) {
        if (def == WF_NONE && json_object_get(obj, "model") == NULL) {
            join_path(sub, sizeof(sub), path, "model");
            if (wf->model_count != 1) {
                diag_add(ld, sub, 0, 0, "required key is missing (expected the name of a model)");
            }
            return wf->model_count == 1 ? 0 : WF_NONE;
        }
        return def;
    }
    idx = find_model(wf, json_string_value(v));
    if (idx == WF_NONE) {
        join_path(sub, sizeof(sub), path, "model");
        diag_add(ld, sub, 0, 0, "unknown model '%s' (expected a key of \"models\")",
                 json_string_value(v));
    }
    return idx;
}

/* ------------------------------------------------------------------------------------------ */
/* Sections                                                                                    */

/* Expand one "${NAME}" or "${NAME:-default}" reference (the whole value), so that a shipped
 * workflow can point at a local server without editing: base_url "${OPENAI_BASE_URL:-https://
 * api.openai.com/v1}". Any other text is returned as is. Ownership: returns new. */
static char *
expand_env(const char *value)
{
    const char *end = NULL;
    const char *sep = NULL;
    char name[128];
    const char *env = NULL;
    size_t len = 0;

    if (strncmp(value, "${", 2) != 0 || (end = strchr(value, '}')) == NULL || end[1] != '\0') {
        return weft__strdup(value);
    }
    sep = strstr(value, ":-");
    len = (size_t)((sep != NULL && sep < end ? sep : end) - (value + 2));
    if (len == 0 || len >= sizeof(name)) {
        return weft__strdup(value);
    }
    memcpy(name, value + 2, len);
    name[len] = '\0';
    env = getenv(name);
    if (env != NULL && env[0] != '\0') {
        return weft__strdup(env);
    }
    if (sep != NULL && sep < end) {
        return weft__strndup(sep + 2, (size_t)(end - (sep + 2)));
    }
    return weft__strdup("");
}

/* The provider of model @p mod (at @p path) and what only that provider takes: a scripted
 * model's script (resolved against the workflow's directory), an OpenAI-compatible model's
 * base_url (environment expanded, http:// or https://) and api_key_env. */
static void
load_model_provider(struct loader *ld,
                    struct weft_workflow *wf,
                    struct wf_model *mod,
                    const json_t *m,
                    const char *path)
{
    char *provider = get_str(ld, m, path, "provider", true);
    char sub[300];

    if (provider != NULL && strcmp(provider, "scripted") == 0) {
        char *script = get_str(ld, m, path, "script", true);
        mod->provider = WF_PROVIDER_SCRIPTED;
        if (script != NULL) {
            mod->script = resolve_path(wf, script);
            weft__free(script);
        }
    } else if (provider != NULL && strcmp(provider, "openai") == 0) {
        mod->provider = WF_PROVIDER_OPENAI;
        mod->base_url = get_str(ld, m, path, "base_url", true);
        if (mod->base_url != NULL) {
            char *expanded = expand_env(mod->base_url);
            weft__free(mod->base_url);
            mod->base_url = expanded;
            if (expanded != NULL && strncmp(expanded, "http://", 7) != 0 &&
                strncmp(expanded, "https://", 8) != 0) {
                snprintf(sub, sizeof(sub), "%s.base_url", path);
                diag_add(ld, sub, 0, 0, "expected an http:// or https:// URL, got \"%s\"",
                         expanded);
            }
        }
        mod->api_key_env = get_str(ld, m, path, "api_key_env", false);
        if (json_object_get(m, "script") != NULL) {
            snprintf(sub, sizeof(sub), "%s.script", path);
            diag_add(ld, sub, 0, 0, "only a scripted model takes a script");
        }
    } else if (provider != NULL) {
        snprintf(sub, sizeof(sub), "%s.provider", path);
        diag_add(ld, sub, 0, 0, "expected \"openai\" or \"scripted\", got \"%s\"", provider);
    }
    weft__free(provider);
}

/* Load models.<name> (@p m) into @p mod, whose name is set: provider, model (the name by
 * default), sampling, timeout (120 s by default), retries and prices. */
static void
load_model(struct loader *ld, struct weft_workflow *wf, struct wf_model *mod, const json_t *m)
{
    static const char *const keys[] = {"provider",    "model",       "base_url",   "api_key_env",
                                       "script",      "temperature", "max_tokens", "timeout_s",
                                       "max_retries", "prices",      NULL};
    static const char *const price_keys[] = {"input_per_1m", "output_per_1m", NULL};
    const json_t *prices = NULL;
    char path[256];

    snprintf(path, sizeof(path), "models.%s", mod->name);
    if (!json_is_object(m)) {
        diag_add(ld, path, 0, 0, "expected object, got %s", weft__json_type_name(m));
        return;
    }
    check_keys(ld, m, path, keys);
    load_model_provider(ld, wf, mod, m, path);
    mod->model = get_str(ld, m, path, "model", false);
    if (mod->model == NULL) {
        mod->model = weft__strdup(mod->name);
    }
    mod->temperature = get_num(ld, m, path, "temperature", -1.0, 0.0, 2.0);
    mod->max_tokens = get_int(ld, m, path, "max_tokens", 0, 1, INT32_MAX);
    mod->timeout_ms = get_seconds_ms(ld, m, path, "timeout_s");
    if (mod->timeout_ms == 0) {
        mod->timeout_ms = 120000;
    }
    mod->max_retries = (unsigned)get_int(ld, m, path, "max_retries", 3, 0, 10);
    prices = get_typed(ld, m, path, "prices", JSON_OBJECT, false);
    if (prices != NULL) {
        char sub[300];
        snprintf(sub, sizeof(sub), "%s.prices", path);
        check_keys(ld, prices, sub, price_keys);
        mod->input_price = get_num(ld, prices, sub, "input_per_1m", 0.0, 0.0, 1e6);
        mod->output_price = get_num(ld, prices, sub, "output_per_1m", 0.0, 0.0, 1e6);
        mod->has_prices = true;
    }
}

static void
load_models(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    const json_t *models = get_typed(ld, root, "", "models", JSON_OBJECT, true);
    const char *name = NULL;
    json_t *m = NULL;
    size_t i = 0;

    if (models == NULL) {
        return;
    }
    if (json_object_size(models) == 0) {
        diag_add(ld, "models", 0, 0, "expected at least one model");
        return;
    }
    wf->models = weft__calloc(json_object_size(models), sizeof(*wf->models));
    if (wf->models == NULL) {
        ld->is_oom = true;
        return;
    }
    json_object_foreach((json_t *)models, name, m)
    {
        struct wf_model *mod = &wf->models[i];

        mod->name = weft__strdup(name);
        wf->model_count = ++i;
        if (mod->name == NULL) {
            ld->is_oom = true;
            return;
        }
        load_model(ld, wf, mod, m);
    }
}

/* The fields of tool @p def that depend on its "type" (@p type, as written; the loader's
 * diagnostics under @p path for what is missing or unknown). */
static void
load_tool_type(
    struct loader *ld, struct tool_def *def, const json_t *t, const char *path, const char *type)
{
    char sub[128];

    if (strcmp(type, "command") == 0) {
        def->type = TOOL_COMMAND;
        def->argv = get_str_array(ld, t, path, "argv", &def->argc);
        if (def->argc == 0 && json_object_get(t, "argv") == NULL) {
            snprintf(sub, sizeof(sub), "%s.argv", path);
            diag_add(ld, sub, 0, 0, "required key is missing (expected array of strings)");
        }
        def->append_args = get_bool(ld, t, path, "append_args", false);
        def->cwd = get_str(ld, t, path, "cwd", false);
    } else if (strcmp(type, "http_get") == 0) {
        def->type = TOOL_HTTP_GET;
        def->allow_hosts = get_str_array(ld, t, path, "allow_hosts", &def->allow_host_count);
        if (def->allow_host_count == 0) {
            snprintf(sub, sizeof(sub), "%s.allow_hosts", path);
            diag_add(ld, sub, 0, 0, "expected a non-empty array of host names");
        }
    } else if (strcmp(type, "read_file") == 0) {
        def->type = TOOL_READ_FILE;
    } else if (strcmp(type, "write_file") == 0) {
        def->type = TOOL_WRITE_FILE;
    } else if (strcmp(type, "native") == 0) {
        def->type = TOOL_NATIVE;
    } else {
        snprintf(sub, sizeof(sub), "%s.type", path);
        diag_add(ld, sub, 0, 0,
                 "expected \"command\", \"http_get\", \"read_file\", \"write_file\" or "
                 "\"native\", got \"%s\"",
                 type);
    }
}

/* Load tools[@p i] (@p t) into the next free slot of wf->tools; a tool with a valid, new name is
 * counted in wf->tool_count even if other fields are wrong (they get diagnostics). */
static void
load_tool(struct loader *ld, struct weft_workflow *wf, const json_t *t, size_t i)
{
    static const char *const keys[] = {"name",        "type",      "description", "argv",
                                       "append_args", "cwd",       "timeout_s",   "max_output",
                                       "allow_hosts", "max_bytes", NULL};
    struct tool_def *def = &wf->tools[wf->tool_count];
    char path[64];
    char *type = NULL;

    snprintf(path, sizeof(path), "tools[%zu]", i);
    if (!json_is_object(t)) {
        diag_add(ld, path, 0, 0, "expected object, got %s", weft__json_type_name(t));
        return;
    }
    check_keys(ld, t, path, keys);
    def->name = get_str(ld, t, path, "name", true);
    if (def->name == NULL) {
        return;
    }
    if (weft__wf_find_tool(wf, def->name) != WF_NONE || strcmp(def->name, "request_agent") == 0) {
        char sub[128];
        snprintf(sub, sizeof(sub), "%s.name", path);
        diag_add(ld, sub, 0, 0, "duplicate or reserved tool name '%s'", def->name);
        weft__free(def->name);
        def->name = NULL;
        return;
    }
    wf->tool_count++;
    def->description = get_str(ld, t, path, "description", false);
    type = get_str(ld, t, path, "type", true);
    if (type == NULL) {
        return;
    }
    load_tool_type(ld, def, t, path, type);
    weft__free(type);
    def->timeout_ms = get_seconds_ms(ld, t, path, "timeout_s");
    def->max_output = (size_t)get_int(ld, t, path, "max_output", 0, 1, 64 << 20);
    def->max_bytes = (size_t)get_int(ld, t, path, "max_bytes", 0, 1, 64 << 20);
    if (def->type != TOOL_NATIVE) {
        def->schema = weft__tool_builtin_schema(def->type);
    }
}

static void
load_tools(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const builtins[] = {"read_file", "write_file", "request_agent"};
    static const tool_type builtin_types[] = {TOOL_READ_FILE, TOOL_WRITE_FILE, TOOL_REQUEST_AGENT};
    const json_t *tools = get_typed(ld, root, "", "tools", JSON_ARRAY, false);
    size_t declared = tools != NULL ? json_array_size(tools) : 0;

    wf->tools = weft__calloc(declared + 3, sizeof(*wf->tools));
    if (wf->tools == NULL) {
        ld->is_oom = true;
        return;
    }
    for (size_t i = 0; i < declared; i++) {
        load_tool(ld, wf, json_array_get(tools, i), i);
    }
    /* Built-ins every agent may list without declaring them. */
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
        struct tool_def *def = NULL;

        if (weft__wf_find_tool(wf, builtins[i]) != WF_NONE) {
            continue;
        }
        def = &wf->tools[wf->tool_count];
        def->name = weft__strdup(builtins[i]);
        if (def->name == NULL) {
            ld->is_oom = true;
            return;
        }
        def->type = builtin_types[i];
        def->schema = weft__tool_builtin_schema(def->type);
        wf->tool_count++;
    }
}

/* One MCP server entry named @p name (at @p where, for diagnostics), appended to wf->mcp. */
static void
load_mcp_entry(struct loader *ld,
               struct weft_workflow *wf,
               const char *name,
               const json_t *value,
               const char *where)
{
    struct weft__mcp_entry e;
    char field[160];
    char why[256];
    char sub[320];

    for (size_t i = 0; i < wf->mcp_count; i++) {
        if (strcmp(wf->mcp[i].cfg.name, name) == 0) {
            snprintf(sub, sizeof(sub), "%s.%s", where, name);
            diag_add(ld, sub, 0, 0, "duplicate MCP server name '%s'", name);
            return;
        }
    }
    if (!weft__mcp_entry_parse(name, value, wf->dir, &e, field, sizeof(field), why, sizeof(why))) {
        snprintf(sub, sizeof(sub), "%s.%s%s%s", where, name, field[0] != '\0' ? "." : "", field);
        diag_add(ld, sub, 0, 0, "%s", why);
        ld->is_oom = ld->is_oom || strcmp(why, "out of memory") == 0;
        return;
    }
    wf->mcp[wf->mcp_count++] = e; /* room made by load_mcp_servers() */
}

/* "mcp_servers" (name -> entry) and "mcp_servers_file" (a file with {"mcpServers": {...}}, as
 * editors and desktop clients write it; relative to the workflow). */
static void
load_mcp_servers(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    const json_t *inline_servers = get_typed(ld, root, "", "mcp_servers", JSON_OBJECT, false);
    char *file = get_str(ld, root, "", "mcp_servers_file", false);
    json_t *doc = NULL;
    const json_t *file_servers = NULL;
    char where[600] = "";
    const char *k = NULL;
    json_t *v = NULL;

    if (file != NULL) {
        char *path = resolve_path(wf, file);
        json_error_t jerr;
        doc = path != NULL ? json_load_file(path, 0, &jerr) : NULL;
        snprintf(where, sizeof(where), "mcp_servers_file(%s).mcpServers", file);
        if (path != NULL && doc == NULL) {
            diag_add(ld, "mcp_servers_file", jerr.line, jerr.column, "%s: %s", path, jerr.text);
        }
        file_servers = json_object_get(doc, "mcpServers");
        if (doc != NULL && !json_is_object(file_servers)) {
            diag_add(ld, "mcp_servers_file", 0, 0, "%s: expected an object with \"mcpServers\"",
                     path);
            file_servers = NULL;
        }
        weft__free(path);
    }
    wf->mcp = weft__calloc(json_object_size(inline_servers) + json_object_size(file_servers) + 1,
                           sizeof(*wf->mcp));
    if (wf->mcp == NULL) {
        ld->is_oom = true;
    }
    json_object_foreach((json_t *)inline_servers, k, v)
    {
        if (wf->mcp != NULL) {
            load_mcp_entry(ld, wf, k, v, "mcp_servers");
        }
    }
    json_object_foreach((json_t *)file_servers, k, v)
    {
        if (wf->mcp != NULL) {
            load_mcp_entry(ld, wf, k, v, where);
        }
    }
    json_decref(doc);
    weft__free(file);
}

/* The MCP servers that get an agent of their own: those not turned off with "agent": false
 * and not already declared under that name in "agents" (which then binds the server). */
static bool
mcp_gets_agent(const struct weft_workflow *wf, const json_t *agents, size_t server)
{
    char name[96];

    if (!wf->mcp[server].is_agent) {
        return false;
    }
    weft__mcp_agent_name(wf->mcp[server].cfg.name, name, sizeof(name));
    for (size_t i = 0; i < json_array_size(agents); i++) {
        const char *declared =
            json_string_value(json_object_get(json_array_get(agents, i), "name"));
        if (declared != NULL && strcmp(declared, name) == 0) {
            return false;
        }
    }
    return true;
}

/* The agents after the declared ones: one per MCP server (mcp_agent_<name>). */
static void
add_mcp_agents(struct loader *ld, struct weft_workflow *wf, const json_t *agents)
{
    for (size_t s = 0; s < wf->mcp_count; s++) {
        struct wf_agent *ag = NULL;
        char name[96];

        if (!mcp_gets_agent(wf, agents, s)) {
            continue;
        }
        ag = &wf->agents[wf->agent_count];
        weft__mcp_agent_name(wf->mcp[s].cfg.name, name, sizeof(name));
        ag->name = weft__strdup(name);
        ag->mcp_servers = weft__calloc(1, sizeof(*ag->mcp_servers));
        ag->description =
            wf->mcp[s].description != NULL ? weft__strdup(wf->mcp[s].description) : NULL;
        if (ag->name == NULL || ag->mcp_servers == NULL ||
            (wf->mcp[s].description != NULL && ag->description == NULL)) {
            ld->is_oom = true;
        }
        if (ag->mcp_servers != NULL) {
            ag->mcp_servers[ag->mcp_server_count++] = s;
        }
        ag->is_mcp = true;
        ag->replan_agent = WF_NONE;
        ag->model = WF_NONE;
        ag->max_tool_rounds = 8;
        wf->agent_count++;
    }
}

static void
load_agents_pass1(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    const json_t *agents = NULL;
    size_t extra = 0;

    for (size_t s = 0; s < wf->mcp_count; s++) {
        extra += mcp_gets_agent(wf, json_object_get(root, "agents"), s) ? 1 : 0;
    }
    agents = get_typed(ld, root, "", "agents", JSON_ARRAY, extra == 0);
    if (agents == NULL && extra == 0) {
        return;
    }
    if (json_array_size(agents) + extra == 0) {
        diag_add(ld, "agents", 0, 0, "expected at least one agent");
        return;
    }
    wf->agents = weft__calloc(json_array_size(agents) + extra, sizeof(*wf->agents));
    if (wf->agents == NULL) {
        ld->is_oom = true;
        return;
    }
    for (size_t i = 0; i < json_array_size(agents); i++) {
        const json_t *a = json_array_get(agents, i);
        struct wf_agent *ag = &wf->agents[i];
        char path[64];

        snprintf(path, sizeof(path), "agents[%zu]", i);
        wf->agent_count = i + 1;
        ag->replan_agent = WF_NONE;
        ag->model = WF_NONE;
        if (!json_is_object(a)) {
            diag_add(ld, path, 0, 0, "expected object, got %s", weft__json_type_name(a));
            continue;
        }
        ag->name = get_str(ld, a, path, "name", true);
        if (ag->name != NULL) {
            for (size_t j = 0; j < i; j++) {
                if (wf->agents[j].name != NULL && strcmp(wf->agents[j].name, ag->name) == 0) {
                    char sub[128];
                    snprintf(sub, sizeof(sub), "%s.name", path);
                    diag_add(ld, sub, 0, 0, "duplicate agent name '%s'", ag->name);
                }
            }
        }
    }
    add_mcp_agents(ld, wf, agents);
}

/* Resolve a list of agent names at obj[key] to indices. */
static size_t *
agent_refs(struct loader *ld,
           const struct weft_workflow *wf,
           const json_t *obj,
           const char *path,
           const char *key,
           size_t *count)
{
    size_t n = 0;
    char **names = get_str_array(ld, obj, path, key, &n);
    size_t *out = NULL;

    *count = 0;
    if (n == 0) {
        weft__wf_free_str_array(names, n);
        return NULL;
    }
    out = weft__calloc(n, sizeof(*out));
    if (out == NULL) {
        ld->is_oom = true;
        weft__wf_free_str_array(names, n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t idx = weft__wf_find_agent(wf, names[i]);
        if (idx == WF_NONE) {
            char sub[256];
            char base[200];
            join_path(base, sizeof(base), path, key);
            snprintf(sub, sizeof(sub), "%s[%zu]", base, i);
            diag_add(ld, sub, 0, 0, "unknown agent '%s'", names[i]);
            continue;
        }
        out[(*count)++] = idx;
    }
    weft__wf_free_str_array(names, n);
    return out;
}

/* Agent @p ag's "tools": indexes into wf->tools. A name that is not a tool, or request_agent
 * (implied by can_request), gets a diagnostic and is left out. */
static void
load_agent_tools(struct loader *ld,
                 const struct weft_workflow *wf,
                 struct wf_agent *ag,
                 const json_t *a,
                 const char *path)
{
    size_t tool_count = 0;
    char **tool_names = get_str_array(ld, a, path, "tools", &tool_count);

    if (tool_count > 0) {
        ag->tools = weft__calloc(tool_count, sizeof(*ag->tools));
        if (ag->tools == NULL) {
            ld->is_oom = true;
        }
    }
    for (size_t t = 0; t < tool_count && ag->tools != NULL; t++) {
        size_t idx = weft__wf_find_tool(wf, tool_names[t]);
        if (idx == WF_NONE || wf->tools[idx].type == TOOL_REQUEST_AGENT) {
            char sub[128];
            snprintf(sub, sizeof(sub), "%s.tools[%zu]", path, t);
            diag_add(ld, sub, 0, 0,
                     idx == WF_NONE ? "unknown tool '%s' (expected a name from \"tools\" or "
                                      "a built-in: read_file, write_file)"
                                    : "'%s' is implied by can_request; do not list it",
                     tool_names[t]);
            continue;
        }
        ag->tools[ag->tool_count++] = idx;
    }
    weft__wf_free_str_array(tool_names, tool_count);
}

/* Agent @p ag's "replan_on" section, if any: the keywords that hand over to another agent, and
 * that agent. */
static void
load_agent_replan(struct loader *ld,
                  const struct weft_workflow *wf,
                  struct wf_agent *ag,
                  const json_t *a,
                  const char *path)
{
    static const char *const replan_keys[] = {"keywords", "agent", NULL};
    const json_t *replan = get_typed(ld, a, path, "replan_on", JSON_OBJECT, false);
    char sub[128];
    char *agent = NULL;

    if (replan == NULL) {
        return;
    }
    snprintf(sub, sizeof(sub), "%s.replan_on", path);
    check_keys(ld, replan, sub, replan_keys);
    ag->replan_keywords = get_str_array(ld, replan, sub, "keywords", &ag->replan_keyword_count);
    if (ag->replan_keyword_count == 0) {
        char k[160];
        snprintf(k, sizeof(k), "%s.keywords", sub);
        diag_add(ld, k, 0, 0, "expected a non-empty array of strings");
    }
    agent = get_str(ld, replan, sub, "agent", true);
    if (agent != NULL) {
        ag->replan_agent = weft__wf_find_agent(wf, agent);
        if (ag->replan_agent == WF_NONE) {
            char k[160];
            snprintf(k, sizeof(k), "%s.agent", sub);
            diag_add(ld, k, 0, 0, "unknown agent '%s'", agent);
        }
        weft__free(agent);
    }
}

/* Agent @p ag's "reflection" section, if any: the reviewing model (the agent's by default), its
 * instructions and how many rejections the agent may retry. */
static void
load_agent_reflection(struct loader *ld,
                      const struct weft_workflow *wf,
                      struct wf_agent *ag,
                      const json_t *a,
                      const char *path)
{
    static const char *const refl_keys[] = {"model", "instructions", "max_retries", NULL};
    const json_t *refl = get_typed(ld, a, path, "reflection", JSON_OBJECT, false);
    char sub[128];

    if (refl == NULL) {
        return;
    }
    snprintf(sub, sizeof(sub), "%s.reflection", path);
    check_keys(ld, refl, sub, refl_keys);
    ag->has_reflection = true;
    ag->reflection.model = model_ref(ld, wf, refl, sub, ag->model);
    get_instructions(ld, refl, sub, &ag->reflection.instructions, &ag->reflection.prompt);
    ag->reflection.max_retries = (unsigned)get_int(ld, refl, sub, "max_retries", 2, 0, 100);
}

/* Agent @p ag's "mcp_servers": the servers whose tools it may call besides its own tools; an
 * agent declared as mcp_agent_<name> binds server <name> without listing it. */
static void
load_agent_mcp(struct loader *ld,
               const struct weft_workflow *wf,
               struct wf_agent *ag,
               const json_t *a,
               const char *path)
{
    size_t n = 0;
    char **names = get_str_array(ld, a, path, "mcp_servers", &n);

    ag->mcp_servers = weft__calloc(n + 1, sizeof(*ag->mcp_servers));
    if (ag->mcp_servers == NULL) {
        ld->is_oom = true;
        weft__wf_free_str_array(names, n);
        return;
    }
    for (size_t s = 0; s < wf->mcp_count && ag->name != NULL; s++) {
        char name[96];
        weft__mcp_agent_name(wf->mcp[s].cfg.name, name, sizeof(name));
        if (strcmp(name, ag->name) == 0) {
            ag->mcp_servers[ag->mcp_server_count++] = s;
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t found = WF_NONE;
        for (size_t s = 0; s < wf->mcp_count && found == WF_NONE; s++) {
            found = strcmp(wf->mcp[s].cfg.name, names[i]) == 0 ? s : WF_NONE;
        }
        if (found == WF_NONE) {
            char sub[160];
            snprintf(sub, sizeof(sub), "%s.mcp_servers[%zu]", path, i);
            diag_add(ld, sub, 0, 0, "unknown MCP server '%s' (expected a key of \"mcp_servers\")",
                     names[i]);
        } else if (ag->mcp_server_count == 0 || ag->mcp_servers[0] != found) {
            ag->mcp_servers[ag->mcp_server_count++] = found;
        }
    }
    weft__wf_free_str_array(names, n);
}

static weft_err load_depth(const char *path,
                           const json_t *doc,
                           unsigned depth,
                           struct weft_workflow **out,
                           struct weft_diags *diags);

/* Agent @p ag's "workflow": a team, loaded now (at most 3 files deep, so a team that names
 * itself is refused). A team runs its own agents: it takes no instructions, tools, MCP servers
 * or reflection of its own. */
static void
load_agent_team(struct loader *ld,
                const struct weft_workflow *wf,
                struct wf_agent *ag,
                const json_t *a,
                const char *path)
{
    static const char *const own[] = {"instructions", "tools",     "mcp_servers", "reflection",
                                      "can_request",  "replan_on", NULL};
    char *file = get_str(ld, a, path, "workflow", false);
    char *full = NULL;
    char sub[160];

    if (file == NULL) {
        return;
    }
    snprintf(sub, sizeof(sub), "%s.workflow", path);
    for (size_t i = 0; own[i] != NULL; i++) {
        if (json_object_get(a, own[i]) != NULL) {
            diag_add(ld, sub, 0, 0, "a team agent runs its workflow's agents: remove \"%s\"",
                     own[i]);
        }
    }
    full = resolve_path(wf, file);
    if (full == NULL) {
        ld->is_oom = true;
    } else if (ld->file_depth >= 3) {
        diag_add(ld, sub, 0, 0, "teams nested deeper than 3 levels (a cycle?)");
    } else {
        struct weft_diags inner = {0};
        if (load_depth(full, NULL, ld->file_depth + 1, &ag->team, &inner) != WEFT_OK) {
            diag_add(ld, sub, 0, 0, "'%s' is invalid: %s", file,
                     inner.count > 0 ? inner.items[0].message : "cannot be loaded");
        }
        weft_diags_cleanup(&inner);
    }
    weft__free(file);
    weft__free(full);
}

/* Agent @p ag's "architect": true, or {"max_attempts", "max_depth", "out_dir"}. An architect
 * composes teams with its model and instructions: it takes no tools, MCP servers, team,
 * reflection or requests of its own (it requests the teams it composed). */
static void
load_agent_architect(struct loader *ld,
                     const struct weft_workflow *wf,
                     struct wf_agent *ag,
                     const json_t *a,
                     const char *path)
{
    static const char *const keys[] = {"max_attempts", "max_depth", "out_dir", NULL};
    static const char *const own[] = {"tools",       "mcp_servers", "workflow", "reflection",
                                      "can_request", "replan_on",   NULL};
    const json_t *v = json_object_get(a, "architect");
    char sub[160];
    char *dir = NULL;

    snprintf(sub, sizeof(sub), "%s.architect", path);
    if (v == NULL || json_is_false(v)) {
        return;
    }
    if (!json_is_true(v) && !json_is_object(v)) {
        diag_add(ld, sub, 0, 0, "expected true or an object {max_attempts, max_depth, out_dir}");
        return;
    }
    for (size_t i = 0; own[i] != NULL; i++) {
        if (json_object_get(a, own[i]) != NULL) {
            diag_add(ld, sub, 0, 0,
                     "an architect composes teams and uses none itself: remove \"%s\"", own[i]);
        }
    }
    ag->architect = weft__calloc(1, sizeof(*ag->architect));
    if (ag->architect == NULL) {
        ld->is_oom = true;
        return;
    }
    if (json_is_object(v)) {
        check_keys(ld, v, sub, keys);
        dir = get_str(ld, v, sub, "out_dir", false);
    }
    ag->architect->max_attempts = (unsigned)get_int(ld, v, sub, "max_attempts", 3, 1, 10);
    ag->architect->max_depth = (unsigned)get_int(ld, v, sub, "max_depth", 1, 1, 3);
    ag->architect->out_dir = resolve_path(wf, dir != NULL ? dir : "teams");
    ld->is_oom = ld->is_oom || ag->architect->out_dir == NULL;
    weft__free(dir);
}

/* An agent made for an MCP server: the server's model, else the workflow's only or first. */
static void
load_mcp_agent(struct loader *ld, struct weft_workflow *wf, struct wf_agent *ag)
{
    const struct weft__mcp_entry *e = &wf->mcp[ag->mcp_servers[0]];

    ag->model = e->model != NULL ? find_model(wf, e->model) : (wf->model_count > 0 ? 0 : WF_NONE);
    if (ag->model == WF_NONE) {
        char sub[160];
        snprintf(sub, sizeof(sub), "mcp_servers.%s.model", e->cfg.name);
        diag_add(ld, sub, 0, 0,
                 e->model != NULL ? "unknown model '%s' (expected a key of \"models\")"
                                  : "no model for agent mcp_agent_%s (expected \"models\")",
                 e->model != NULL ? e->model : e->cfg.name);
    }
}

static void
load_agents_pass2(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {
        "name",        "model",      "instructions",    "tools",     "can_request",
        "replan_on",   "reflection", "max_tool_rounds", "timeout_s", "description",
        "mcp_servers", "workflow",   "architect",       NULL};
    const json_t *agents = json_object_get(root, "agents");

    for (size_t i = 0; i < wf->agent_count; i++) {
        const json_t *a = json_array_get(agents, i);
        struct wf_agent *ag = &wf->agents[i];
        char path[64];

        if (ag->is_mcp) {
            load_mcp_agent(ld, wf, ag);
            continue;
        }
        if (!json_is_object(a)) {
            continue;
        }
        snprintf(path, sizeof(path), "agents[%zu]", i);
        check_keys(ld, a, path, keys);
        ag->model = model_ref(ld, wf, a, path, WF_NONE);
        get_instructions(ld, a, path, &ag->instructions, &ag->prompt);
        ag->description = get_str(ld, a, path, "description", false);
        load_agent_tools(ld, wf, ag, a, path);
        load_agent_mcp(ld, wf, ag, a, path);
        ag->can_request = agent_refs(ld, wf, a, path, "can_request", &ag->can_request_count);
        load_agent_replan(ld, wf, ag, a, path);
        load_agent_reflection(ld, wf, ag, a, path);
        load_agent_team(ld, wf, ag, a, path);
        load_agent_architect(ld, wf, ag, a, path);
        ag->max_tool_rounds = (unsigned)get_int(ld, a, path, "max_tool_rounds", 8, 1, 1000);
        ag->timeout_ms = get_seconds_ms(ld, a, path, "timeout_s");
    }
}

/* supervisor.policy: plan_execute, or router (which needs a "router" section); the default
 * follows the section's presence. */
static void
load_policy(struct loader *ld, struct weft_workflow *wf, const json_t *s)
{
    struct wf_supervisor *sup = &wf->supervisor;
    char *policy = get_str(ld, s, "supervisor", "policy", false);

    sup->policy = wf->has_router ? WF_POLICY_ROUTER : WF_POLICY_PLAN_EXECUTE;
    if (policy != NULL) {
        if (strcmp(policy, "plan_execute") == 0) {
            sup->policy = WF_POLICY_PLAN_EXECUTE;
        } else if (strcmp(policy, "router") == 0) {
            sup->policy = WF_POLICY_ROUTER;
        } else {
            diag_add(ld, "supervisor.policy", 0, 0,
                     "expected \"plan_execute\" or \"router\", got \"%s\"", policy);
        }
        weft__free(policy);
    }
    if (sup->policy == WF_POLICY_ROUTER && !wf->has_router) {
        diag_add(ld, "supervisor.policy", 0, 0, "policy \"router\" needs a \"router\" section");
    }
}

/* supervisor.watchdog.webhook: where stuck-loop alerts go, and in which format. */
static void
load_webhook(struct loader *ld, const json_t *hook, struct wf_supervisor *sup)
{
    static const char *const webhook_keys[] = {"url", "format", NULL};
    char *format = get_str(ld, hook, "supervisor.watchdog.webhook", "format", false);

    check_keys(ld, hook, "supervisor.watchdog.webhook", webhook_keys);
    sup->watchdog.webhook_url = get_str(ld, hook, "supervisor.watchdog.webhook", "url", true);
    if (sup->watchdog.webhook_url != NULL &&
        strncmp(sup->watchdog.webhook_url, "http://", 7) != 0 &&
        strncmp(sup->watchdog.webhook_url, "https://", 8) != 0) {
        diag_add(ld, "supervisor.watchdog.webhook.url", 0, 0,
                 "expected an http:// or https:// URL");
    }
    sup->watchdog.webhook_format = RT_WEBHOOK_GENERIC;
    if (format != NULL && strcmp(format, "alertmanager") == 0) {
        sup->watchdog.webhook_format = RT_WEBHOOK_ALERTMANAGER;
    } else if (format != NULL && strcmp(format, "generic") != 0) {
        diag_add(ld, "supervisor.watchdog.webhook.format", 0, 0,
                 "expected \"generic\" or \"alertmanager\", got \"%s\"", format);
    }
    weft__free(format);
}

/* supervisor.watchdog: policy, repeats and window (0 when absent: the environment or the
 * default applies at run start), escalate_to, stall_s, webhook. */
static void
load_watchdog(struct loader *ld, struct weft_workflow *wf, const json_t *s)
{
    static const char *const watchdog_keys[] = {"policy",  "repeats", "window", "escalate_to",
                                                "stall_s", "webhook", NULL};
    struct wf_supervisor *sup = &wf->supervisor;
    const json_t *wd = get_typed(ld, s, "supervisor", "watchdog", JSON_OBJECT, false);
    const json_t *hook = NULL;
    char *policy_name = NULL;
    char *to = NULL;

    sup->watchdog.escalate_to = WF_NONE;
    sup->watchdog.stall_ms = 300000;
    sup->watchdog.webhook_format = -1;
    if (wd == NULL) {
        return;
    }
    policy_name = get_str(ld, wd, "supervisor.watchdog", "policy", false);
    check_keys(ld, wd, "supervisor.watchdog", watchdog_keys);
    if (policy_name != NULL) {
        if (strcmp(policy_name, "warn") == 0) {
            sup->watchdog.policy = WATCHDOG_WARN;
        } else if (strcmp(policy_name, "break") == 0) {
            sup->watchdog.policy = WATCHDOG_BREAK;
        } else if (strcmp(policy_name, "escalate") == 0) {
            sup->watchdog.policy = WATCHDOG_ESCALATE;
        } else if (strcmp(policy_name, "fail") == 0 || strcmp(policy_name, "abort") == 0) {
            sup->watchdog.policy = WATCHDOG_FAIL; /* "abort": the name before "fail" */
        } else {
            diag_add(ld, "supervisor.watchdog.policy", 0, 0,
                     "expected \"warn\", \"break\", \"escalate\" or \"fail\", got \"%s\"",
                     policy_name);
        }
        weft__free(policy_name);
    }
    sup->watchdog.repeats =
        (unsigned)get_int(ld, wd, "supervisor.watchdog", "repeats", 0, 2, WATCHDOG_WINDOW_MAX);
    sup->watchdog.window =
        (unsigned)get_int(ld, wd, "supervisor.watchdog", "window", 0, 2, WATCHDOG_WINDOW_MAX);
    if (sup->watchdog.repeats != 0 && sup->watchdog.window != 0 &&
        sup->watchdog.window < sup->watchdog.repeats) {
        diag_add(ld, "supervisor.watchdog.window", 0, 0, "expected at least repeats (%u), got %u",
                 sup->watchdog.repeats, sup->watchdog.window);
    }
    to = get_str(ld, wd, "supervisor.watchdog", "escalate_to", false);
    if (to != NULL) {
        sup->watchdog.escalate_to = weft__wf_find_agent(wf, to);
        if (sup->watchdog.escalate_to == WF_NONE) {
            diag_add(ld, "supervisor.watchdog.escalate_to", 0, 0, "unknown agent '%s'", to);
        }
        weft__free(to);
    }
    sup->watchdog.stall_ms =
        (uint32_t)(get_num(ld, wd, "supervisor.watchdog", "stall_s", 300.0, 0.0, 86400.0) * 1000.0 +
                   0.5);
    hook = get_typed(ld, wd, "supervisor.watchdog", "webhook", JSON_OBJECT, false);
    if (hook != NULL) {
        load_webhook(ld, hook, sup);
    }
}

static void
load_supervisor(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {
        "name",           "model",          "instructions",    "policy",
        "route_with_llm", "max_iterations", "timeout_s",       "step_timeout_s",
        "max_tokens",     "max_cost_usd",   "circuit_breaker", "final_agent",
        "correction",     "watchdog",       "max_parallel",    NULL};
    static const char *const correction_keys[] = {"enabled", "max_corrections", "instructions",
                                                  NULL};
    const json_t *corr = NULL;
    const json_t *s = get_typed(ld, root, "", "supervisor", JSON_OBJECT, false);
    struct wf_supervisor *sup = &wf->supervisor;
    const json_t *empty = NULL;
    char *final = NULL;

    sup->final_agent = WF_NONE;
    if (s == NULL) {
        empty = json_object();
        if (empty == NULL) {
            ld->is_oom = true;
            return;
        }
        s = empty;
    }
    check_keys(ld, s, "supervisor", keys);
    sup->name = get_str(ld, s, "supervisor", "name", false);
    if (sup->name == NULL) {
        sup->name = weft__strdup("supervisor");
    }
    sup->model = model_ref(ld, wf, s, "supervisor", wf->model_count > 0 ? 0 : WF_NONE);
    get_instructions(ld, s, "supervisor", &sup->instructions, &sup->prompt);
    load_policy(ld, wf, s);
    sup->route_with_llm = get_bool(ld, s, "supervisor", "route_with_llm", false);
    sup->max_iterations = (unsigned)get_int(ld, s, "supervisor", "max_iterations", 50, 1, 1000000);
    sup->timeout_ms = get_seconds_ms(ld, s, "supervisor", "timeout_s");
    sup->step_timeout_ms = get_seconds_ms(ld, s, "supervisor", "step_timeout_s");
    sup->max_tokens = get_int(ld, s, "supervisor", "max_tokens", 0, 1, INT64_MAX);
    sup->max_cost_usd = get_num(ld, s, "supervisor", "max_cost_usd", 0.0, 0.0, 1e9);
    sup->circuit_breaker = (unsigned)get_int(ld, s, "supervisor", "circuit_breaker", 2, 1, 1000);
    sup->max_parallel = (unsigned)get_int(ld, s, "supervisor", "max_parallel", 0, 1, 256);
    load_watchdog(ld, wf, s);
    corr = get_typed(ld, s, "supervisor", "correction", JSON_OBJECT, false);
    if (corr != NULL) {
        check_keys(ld, corr, "supervisor.correction", correction_keys);
        sup->has_correction = get_bool(ld, corr, "supervisor.correction", "enabled", true);
        sup->max_corrections =
            (unsigned)get_int(ld, corr, "supervisor.correction", "max_corrections", 2, 1, 100);
        get_instructions(ld, corr, "supervisor.correction", &sup->correction_instructions,
                         &sup->correction_prompt);
    }
    final = get_str(ld, s, "supervisor", "final_agent", false);
    if (final != NULL) {
        sup->final_agent = weft__wf_find_agent(wf, final);
        if (sup->final_agent == WF_NONE) {
            diag_add(ld, "supervisor.final_agent", 0, 0, "unknown agent '%s'", final);
        }
        weft__free(final);
    }
    json_decref((json_t *)empty);
}

static size_t
find_route(const struct wf_router *r, const char *name)
{
    for (size_t i = 0; i < r->route_count; i++) {
        if (strcmp(r->routes[i].name, name) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

static void
load_router(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {"model",
                                       "instructions",
                                       "temperature",
                                       "routes",
                                       "default_route",
                                       "clarification_route",
                                       "max_clarifications",
                                       "vague_patterns",
                                       NULL};
    const json_t *r = get_typed(ld, root, "", "router", JSON_OBJECT, false);
    struct wf_router *rt = &wf->router;
    const json_t *routes = NULL;
    const char *name = NULL;
    json_t *agent = NULL;
    char *def = NULL;
    char *clar = NULL;

    if (r == NULL) {
        return;
    }
    wf->has_router = true;
    rt->default_route = WF_NONE;
    rt->clarification_route = WF_NONE;
    check_keys(ld, r, "router", keys);
    rt->model = model_ref(ld, wf, r, "router", wf->model_count > 0 ? 0 : WF_NONE);
    get_instructions(ld, r, "router", &rt->instructions, &rt->prompt);
    rt->temperature = get_num(ld, r, "router", "temperature", 0.1, 0.0, 2.0);
    routes = get_typed(ld, r, "router", "routes", JSON_OBJECT, true);
    if (routes != NULL && json_object_size(routes) > 0) {
        rt->routes = weft__calloc(json_object_size(routes), sizeof(*rt->routes));
        if (rt->routes == NULL) {
            ld->is_oom = true;
            return;
        }
        json_object_foreach((json_t *)routes, name, agent)
        {
            char sub[160];
            snprintf(sub, sizeof(sub), "router.routes.%s", name);
            if (!json_is_string(agent)) {
                diag_add(ld, sub, 0, 0, "expected the name of an agent");
                continue;
            }
            rt->routes[rt->route_count].agent = weft__wf_find_agent(wf, json_string_value(agent));
            if (rt->routes[rt->route_count].agent == WF_NONE) {
                diag_add(ld, sub, 0, 0, "unknown agent '%s'", json_string_value(agent));
                continue;
            }
            rt->routes[rt->route_count].name = weft__strdup(name);
            if (rt->routes[rt->route_count].name == NULL) {
                ld->is_oom = true;
                return;
            }
            rt->route_count++;
        }
    } else if (routes != NULL) {
        diag_add(ld, "router.routes", 0, 0, "expected at least one route");
    }
    def = get_str(ld, r, "router", "default_route", true);
    if (def != NULL) {
        rt->default_route = find_route(rt, def);
        if (rt->default_route == WF_NONE) {
            diag_add(ld, "router.default_route", 0, 0, "unknown route '%s'", def);
        }
    }
    clar = get_str(ld, r, "router", "clarification_route", false);
    if (clar != NULL) {
        rt->clarification_route = find_route(rt, clar);
        if (rt->clarification_route == WF_NONE) {
            diag_add(ld, "router.clarification_route", 0, 0, "unknown route '%s'", clar);
        }
    }
    weft__free(def);
    weft__free(clar);
    rt->max_clarifications = (unsigned)get_int(ld, r, "router", "max_clarifications", 2, 1, 100);
    rt->vague_patterns = get_str_array(ld, r, "router", "vague_patterns", &rt->vague_pattern_count);
}

json_t *
weft__wf_executor_spec(step_executor executor, const json_t *step, char *why, size_t why_len)
{
    const json_t *argv = json_object_get(step, "argv");
    const json_t *expect = json_object_get(step, "expect_output");
    const json_t *timeout = json_object_get(step, "timeout_s");
    const json_t *path = json_object_get(step, "path");
    const json_t *content = json_object_get(step, "content");
    const json_t *url = json_object_get(step, "url");
    const json_t *schema = json_object_get(step, "output_schema");
    json_t *spec = json_object();

    why[0] = '\0';
    if (spec == NULL) {
        return NULL;
    }
    if (timeout != NULL && (!json_is_number(timeout) || json_number_value(timeout) <= 0 ||
                            json_number_value(timeout) > 86400)) {
        snprintf(why, why_len, "timeout_s: expected number in (0, 86400]");
        goto fail;
    }
    if (timeout != NULL) {
        json_object_set(spec, "timeout_s", (json_t *)timeout);
    }
    switch (executor) {
    case EXEC_AGENT:
        if (schema != NULL && !json_is_object(schema)) {
            snprintf(why, why_len, "output_schema: expected a JSON schema object");
            goto fail;
        }
        if (schema != NULL) {
            json_object_set(spec, "output_schema", (json_t *)schema);
        }
        break;
    case EXEC_COMMAND:
        if (!json_is_array(argv) || json_array_size(argv) == 0) {
            snprintf(why, why_len, "argv: expected a non-empty array of strings");
            goto fail;
        }
        for (size_t i = 0; i < json_array_size(argv); i++) {
            if (!json_is_string(json_array_get(argv, i))) {
                snprintf(why, why_len, "argv[%zu]: expected string", i);
                goto fail;
            }
        }
        json_object_set(spec, "argv", (json_t *)argv);
        if (expect != NULL) {
            regex_t re;
            if (!json_is_string(expect) ||
                regcomp(&re, json_string_value(expect), REG_EXTENDED | REG_NOSUB) != 0) {
                snprintf(why, why_len,
                         "expect_output: expected a POSIX extended regular "
                         "expression");
                goto fail;
            }
            regfree(&re);
            json_object_set(spec, "expect_output", (json_t *)expect);
        }
        break;
    case EXEC_FILE_WRITER:
        if (!json_is_string(path) || json_string_length(path) == 0 || !json_is_string(content)) {
            snprintf(why, why_len, "expected \"path\" and \"content\" strings");
            goto fail;
        }
        json_object_set(spec, "path", (json_t *)path);
        json_object_set(spec, "content", (json_t *)content);
        break;
    case EXEC_HTTP_CALL:
        if (!json_is_string(url) || (strncmp(json_string_value(url), "http://", 7) != 0 &&
                                     strncmp(json_string_value(url), "https://", 8) != 0)) {
            snprintf(why, why_len, "url: expected an http:// or https:// URL");
            goto fail;
        }
        json_object_set(spec, "url", (json_t *)url);
        break;
    }
    return spec;
fail:
    json_decref(spec);
    return NULL;
}

/* Load plan[@p i] (@p s, an object) into @p st: id (s<i+1> by default), executor, agent (only
 * for an agent step), the executor's spec, task (the executor's name by default) and
 * depends_on. */
static void
load_plan_step(struct loader *ld,
               const struct weft_workflow *wf,
               struct wf_step *st,
               const json_t *s,
               size_t i,
               const char *path)
{
    static const char *const keys[] = {
        "id",        "agent", "task",    "depends_on", "executor",      "argv", "expect_output",
        "timeout_s", "path",  "content", "url",        "output_schema", NULL};
    char sub[128];
    char why[160];
    char *agent = NULL;
    char *executor = NULL;

    check_keys(ld, s, path, keys);
    st->id = get_str(ld, s, path, "id", false);
    if (st->id == NULL) {
        char id[32];
        snprintf(id, sizeof(id), "s%zu", i + 1);
        st->id = weft__strdup(id);
    }
    executor = get_str(ld, s, path, "executor", false);
    st->executor = EXEC_AGENT;
    if (executor != NULL && !weft__step_executor_parse(executor, &st->executor)) {
        snprintf(sub, sizeof(sub), "%s.executor", path);
        diag_add(ld, sub, 0, 0,
                 "expected \"agent\", \"command\", \"file_writer\" or \"http_call\", got "
                 "\"%s\"",
                 executor);
    }
    weft__free(executor);
    st->agent = WF_NONE;
    if (st->executor == EXEC_AGENT) {
        agent = get_str(ld, s, path, "agent", true);
        st->agent = agent != NULL ? weft__wf_find_agent(wf, agent) : WF_NONE;
        if (agent != NULL && st->agent == WF_NONE) {
            snprintf(sub, sizeof(sub), "%s.agent", path);
            diag_add(ld, sub, 0, 0, "unknown agent '%s'", agent);
        }
        weft__free(agent);
    } else if (json_object_get(s, "agent") != NULL) {
        snprintf(sub, sizeof(sub), "%s.agent", path);
        diag_add(ld, sub, 0, 0, "only an \"agent\" step names an agent");
    }
    st->spec = weft__wf_executor_spec(st->executor, s, why, sizeof(why));
    if (st->spec == NULL && why[0] != '\0') {
        diag_add(ld, path, 0, 0, "%s", why);
    } else if (st->spec == NULL) {
        ld->is_oom = true;
    }
    st->task = get_str(ld, s, path, "task", st->executor == EXEC_AGENT);
    if (st->task == NULL) {
        st->task = weft__strdup(weft__step_executor_name(st->executor));
    }
    st->depends_on = get_str_array(ld, s, path, "depends_on", &st->depends_count);
}

static void
load_plan(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    const json_t *plan = get_typed(ld, root, "", "plan", JSON_ARRAY, false);
    struct plan_check check;

    if (plan == NULL || json_array_size(plan) == 0) {
        return;
    }
    wf->plan = weft__calloc(json_array_size(plan), sizeof(*wf->plan));
    if (wf->plan == NULL) {
        ld->is_oom = true;
        return;
    }
    for (size_t i = 0; i < json_array_size(plan); i++) {
        const json_t *s = json_array_get(plan, i);
        char path[64];

        snprintf(path, sizeof(path), "plan[%zu]", i);
        if (!json_is_object(s)) {
            diag_add(ld, path, 0, 0, "expected object, got %s", weft__json_type_name(s));
            continue;
        }
        load_plan_step(ld, wf, &wf->plan[wf->plan_count], s, i, path);
        wf->plan_count++;
    }
    /* Ids, references and cycles: the same checks the supervisor applies to an LLM's plan. */
    weft__plan_check_init(&check);
    for (size_t i = 0; i < wf->plan_count; i++) {
        weft__plan_check_add(&check, wf->plan[i].id, (const char *const *)wf->plan[i].depends_on,
                             wf->plan[i].depends_count);
    }
    if (weft__plan_check_run(&check) != WEFT_OK) {
        char path[64];
        snprintf(path, sizeof(path), "plan[%zu]", check.bad_index);
        diag_add(ld, path, 0, 0, "%s", check.message);
    }
    weft__plan_check_cleanup(&check);
}

/* ------------------------------------------------------------------------------------------ */
/* Flows                                                                                       */

void
weft__wf_flow_free(struct wf_flow *flow)
{
    if (flow == NULL) {
        return;
    }
    for (size_t i = 0; i < flow->count; i++) {
        struct wf_flow_node *n = &flow->nodes[i];
        weft__free(n->id);
        weft__free(n->task);
        weft__free(n->upstream);
        weft__free(n->loop.condition_field);
        weft__expr_free(n->loop.brk);
        weft__free(n->for_each);
        weft__wf_flow_free(n->sub);
        weft_workflow_free(n->subwf);
    }
    weft__free(flow->nodes);
    weft__free(flow);
}

static size_t
flow_find(const struct wf_flow *flow, const char *id)
{
    for (size_t i = 0; i < flow->count; i++) {
        if (flow->nodes[i].id != NULL && strcmp(flow->nodes[i].id, id) == 0) {
            return i;
        }
    }
    return WF_NONE;
}

/* Is @p a an upstream (transitively) of @p b? */
static bool
flow_reaches(const struct wf_flow *flow, size_t a, size_t b, unsigned depth)
{
    const struct wf_flow_node *n = &flow->nodes[b];

    if (depth > flow->count) {
        return false; /* a cycle: reported separately */
    }
    for (size_t i = 0; i < n->upstream_count; i++) {
        if (n->upstream[i] == a || flow_reaches(flow, a, n->upstream[i], depth + 1)) {
            return true;
        }
    }
    return false;
}

static struct wf_flow *load_flow(struct loader *ld,
                                 struct weft_workflow *wf,
                                 const json_t *obj,
                                 const char *path,
                                 unsigned depth);

static void
load_flow_node(struct loader *ld,
               struct weft_workflow *wf,
               struct wf_flow *flow,
               size_t i,
               const json_t *n,
               const char *path,
               unsigned depth)
{
    static const char *const keys[] = {"id",           "agent",       "task",     "upstream_agents",
                                       "required",     "loop_config", "for_each", "nodes",
                                       "max_parallel", "workflow",    NULL};
    struct wf_flow_node *node = &flow->nodes[i];
    char *agent = NULL;
    char sub[256];

    check_keys(ld, n, path, keys);
    node->agent = WF_NONE;
    agent = get_str(ld, n, path, "agent", false);
    node->id = get_str(ld, n, path, "id", false);
    if (node->id == NULL && agent != NULL) {
        node->id = weft__strdup(agent);
    }
    if (node->id == NULL) {
        diag_add(ld, path, 0, 0, "expected \"id\" or \"agent\"");
        node->id = weft__strdup("?");
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(flow->nodes[j].id, node->id) == 0) {
            diag_add(ld, path, 0, 0, "duplicate node id '%s'", node->id);
        }
    }
    if (agent != NULL) {
        node->agent = weft__wf_find_agent(wf, agent);
        if (node->agent == WF_NONE) {
            join_path(sub, sizeof(sub), path, "agent");
            diag_add(ld, sub, 0, 0, "unknown agent '%s'", agent);
        }
    }
    weft__free(agent);
    node->task = get_str(ld, n, path, "task", false);
    node->is_required = get_bool(ld, n, path, "required", true);
    node->max_parallel = (unsigned)get_int(ld, n, path, "max_parallel", 4, 1, 256);
    node->for_each = get_str(ld, n, path, "for_each", false);
    if (node->for_each != NULL) {
        join_path(sub, sizeof(sub), path, "nodes");
        if (node->agent != WF_NONE) {
            diag_add(ld, path, 0, 0, "a for_each node runs a sub-flow (\"nodes\"), not an agent");
        }
        if (depth >= 3) {
            diag_add(ld, path, 0, 0, "for_each nested deeper than 3 levels");
        } else {
            node->sub = load_flow(ld, wf, n, path, depth + 1);
        }
    } else if (json_object_get(n, "workflow") != NULL) {
        char *file = get_str(ld, n, path, "workflow", true);
        char *full = file != NULL ? resolve_path(wf, file) : NULL;
        join_path(sub, sizeof(sub), path, "workflow");
        if (node->agent != WF_NONE) {
            diag_add(ld, path, 0, 0, "a node runs an agent or a workflow, not both");
        } else if (full != NULL && ld->file_depth >= 3) {
            diag_add(ld, sub, 0, 0, "sub-workflows nested deeper than 3 levels (a cycle?)");
        } else if (full != NULL) {
            struct weft_diags inner = {0};
            if (load_depth(full, NULL, ld->file_depth + 1, &node->subwf, &inner) != WEFT_OK) {
                diag_add(ld, sub, 0, 0, "'%s' is invalid: %s", file,
                         inner.count > 0 ? inner.items[0].message : "cannot be loaded");
            }
            weft_diags_cleanup(&inner);
        }
        weft__free(file);
        weft__free(full);
    } else if (node->agent == WF_NONE && json_object_get(n, "agent") == NULL) {
        diag_add(ld, path, 0, 0, "expected \"agent\", \"workflow\" or \"for_each\" with \"nodes\"");
    }
}

/* Second pass: upstream references and loops, once every node id is known. */
static void
link_flow_node(struct loader *ld, struct wf_flow *flow, size_t i, const json_t *n, const char *path)
{
    static const char *const loop_keys[] = {"loop_back_to",      "condition_field",
                                            "max_iterations",    "break_condition",
                                            "on_max_iterations", NULL};
    struct wf_flow_node *node = &flow->nodes[i];
    size_t count = 0;
    char **ups = get_str_array(ld, n, path, "upstream_agents", &count);
    const json_t *loop = get_typed(ld, n, path, "loop_config", JSON_OBJECT, false);
    char sub[256];

    if (count > 0) {
        node->upstream = weft__calloc(count, sizeof(*node->upstream));
        if (node->upstream == NULL) {
            ld->is_oom = true;
        }
    }
    for (size_t k = 0; k < count && node->upstream != NULL; k++) {
        size_t up = flow_find(flow, ups[k]);
        if (up == WF_NONE) {
            snprintf(sub, sizeof(sub), "%.200s.upstream_agents[%zu]", path, k);
            diag_add(ld, sub, 0, 0,
                     "unknown node '%s' (upstreams are nodes of the same flow or sub-flow)",
                     ups[k]);
            continue;
        }
        if (up == i) {
            snprintf(sub, sizeof(sub), "%.200s.upstream_agents[%zu]", path, k);
            diag_add(ld, sub, 0, 0, "a node cannot be its own upstream");
            continue;
        }
        node->upstream[node->upstream_count++] = up;
    }
    weft__wf_free_str_array(ups, count);
    if (loop != NULL) {
        char *back = NULL;
        char *brk = NULL;
        char *policy = NULL;
        join_path(sub, sizeof(sub), path, "loop_config");
        check_keys(ld, loop, sub, loop_keys);
        node->has_loop = true;
        back = get_str(ld, loop, sub, "loop_back_to", true);
        node->loop.back_to = back != NULL ? flow_find(flow, back) : WF_NONE;
        if (back != NULL && node->loop.back_to == WF_NONE) {
            char k[300];
            snprintf(k, sizeof(k), "%s.loop_back_to", sub);
            diag_add(ld, k, 0, 0, "unknown node '%s'", back);
        }
        weft__free(back);
        node->loop.condition_field = get_str(ld, loop, sub, "condition_field", true);
        node->loop.max_iterations = (unsigned)get_int(ld, loop, sub, "max_iterations", 3, 1, 1000);
        brk = get_str(ld, loop, sub, "break_condition", false);
        if (brk != NULL) {
            struct expr_error e;
            memset(&e, 0, sizeof(e));
            if (weft__expr_parse(brk, &node->loop.brk, &e) != WEFT_OK) {
                char k[300];
                snprintf(k, sizeof(k), "%s.break_condition", sub);
                diag_add(ld, k, 0, 0, "%s (in \"%s\")", e.message, brk);
            }
            weft__free(brk);
        }
        policy = get_str(ld, loop, sub, "on_max_iterations", false);
        if (policy != NULL && strcmp(policy, "fail") != 0 && strcmp(policy, "continue") != 0) {
            char k[300];
            snprintf(k, sizeof(k), "%s.on_max_iterations", sub);
            diag_add(ld, k, 0, 0, "expected \"continue\" or \"fail\", got \"%s\"", policy);
        }
        node->loop.is_fail_on_max = policy != NULL && strcmp(policy, "fail") == 0;
        weft__free(policy);
    }
}

/* Check the graph of @p flow (node paths under @p sub): outside declared loops the upstream
 * graph must be a DAG, and a loop_back_to target must be upstream of its node. */
static void
check_flow_graph(struct loader *ld, const struct wf_flow *flow, const char *sub)
{
    struct plan_check check;
    const char ***deps = NULL;

    /* Cycles outside declared loops: the upstream graph must be a DAG. */
    weft__plan_check_init(&check);
    deps = weft__calloc(flow->count + 1, sizeof(*deps));
    for (size_t i = 0; deps != NULL && i < flow->count; i++) {
        deps[i] = weft__calloc(flow->nodes[i].upstream_count + 1, sizeof(**deps));
        for (size_t k = 0; deps[i] != NULL && k < flow->nodes[i].upstream_count; k++) {
            deps[i][k] = flow->nodes[flow->nodes[i].upstream[k]].id;
        }
        weft__plan_check_add(&check, flow->nodes[i].id, deps[i],
                             deps[i] != NULL ? flow->nodes[i].upstream_count : 0);
    }
    if (deps != NULL && weft__plan_check_run(&check) == WEFT_EPARSE) {
        char np[300];
        snprintf(np, sizeof(np), "%s[%zu]", sub, check.bad_index);
        diag_add(ld, np, 0, 0, "%s (flows may loop only through loop_config)", check.message);
    } else {
        /* loop_back_to must be upstream of the node (only meaningful without cycles). */
        for (size_t i = 0; i < flow->count; i++) {
            const struct wf_flow_node *n = &flow->nodes[i];
            if (n->has_loop && n->loop.back_to != WF_NONE && n->loop.back_to != i &&
                !flow_reaches(flow, n->loop.back_to, i, 0)) {
                char np[320];
                snprintf(np, sizeof(np), "%s[%zu].loop_config.loop_back_to", sub, i);
                diag_add(ld, np, 0, 0, "'%s' is not upstream of '%s'",
                         flow->nodes[n->loop.back_to].id, n->id);
            }
        }
    }
    for (size_t i = 0; deps != NULL && i < flow->count; i++) {
        weft__free((void *)deps[i]);
    }
    weft__free((void *)deps);
    weft__plan_check_cleanup(&check);
}

static struct wf_flow *
load_flow(struct loader *ld,
          struct weft_workflow *wf,
          const json_t *obj,
          const char *path,
          unsigned depth)
{
    const json_t *nodes = get_typed(ld, obj, path, "nodes", JSON_ARRAY, true);
    struct wf_flow *flow = NULL;
    char sub[256];

    if (nodes == NULL) {
        return NULL;
    }
    join_path(sub, sizeof(sub), path, "nodes");
    if (json_array_size(nodes) == 0 || json_array_size(nodes) > 1000) {
        diag_add(ld, sub, 0, 0, "expected 1 to 1000 nodes");
        return NULL;
    }
    flow = weft__calloc(1, sizeof(*flow));
    if (flow == NULL ||
        (flow->nodes = weft__calloc(json_array_size(nodes), sizeof(*flow->nodes))) == NULL) {
        weft__free(flow);
        ld->is_oom = true;
        return NULL;
    }
    flow->max_parallel = (unsigned)get_int(ld, obj, path, "max_parallel", 4, 1, 256);
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        const json_t *n = json_array_get(nodes, i);
        char np[256];
        snprintf(np, sizeof(np), "%.200s[%zu]", sub, i);
        flow->count = i + 1;
        if (!json_is_object(n)) {
            diag_add(ld, np, 0, 0, "expected object, got %s", weft__json_type_name(n));
            flow->nodes[i].id = weft__strdup("?");
            flow->nodes[i].agent = WF_NONE;
            continue;
        }
        load_flow_node(ld, wf, flow, i, n, np, depth);
    }
    for (size_t i = 0; i < flow->count; i++) {
        const json_t *n = json_array_get(nodes, i);
        char np[256];
        snprintf(np, sizeof(np), "%.200s[%zu]", sub, i);
        if (json_is_object(n)) {
            link_flow_node(ld, flow, i, n, np);
        }
    }
    check_flow_graph(ld, flow, sub);
    return flow;
}

static void
load_flow_section(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {"max_parallel", "nodes", NULL};
    const json_t *flow = get_typed(ld, root, "", "flow", JSON_OBJECT, false);

    if (flow == NULL) {
        return;
    }
    check_keys(ld, flow, "flow", keys);
    wf->flow = load_flow(ld, wf, flow, "flow", 0);
    if (wf->plan_count > 0 || wf->has_router) {
        diag_add(ld, "flow", 0, 0, "a workflow has a flow, a plan or a router, not several");
    }
}

/* ------------------------------------------------------------------------------------------ */

static char *
dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char cwd[PATH_MAX];

    if (slash == NULL) {
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            return weft__strdup(".");
        }
        return weft__strdup(cwd);
    }
    if (slash == path) {
        return weft__strdup("/");
    }
    if (path[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL) {
        struct weft__buf b;
        weft__buf_init(&b, 0);
        if (weft__buf_printf(&b, "%s/%.*s", cwd, (int)(slash - path), path) != WEFT_OK) {
            weft__buf_cleanup(&b);
            return NULL;
        }
        return b.data;
    }
    return weft__strndup(path, (size_t)(slash - path));
}

static void
check_scripts(struct loader *ld, struct weft_workflow *wf)
{
    for (size_t i = 0; i < wf->model_count; i++) {
        struct wf_model *m = &wf->models[i];
        struct stat st;
        char path[256];

        if (m->provider != WF_PROVIDER_SCRIPTED || m->script == NULL) {
            continue;
        }
        if (stat(m->script, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(path, sizeof(path), "models.%s.script", m->name);
            diag_add(ld, path, 0, 0, "cannot read script file '%s': %s", m->script,
                     strerror(errno != 0 ? errno : ENOENT));
        } else {
            /* The script with the scripted provider's own rules, reported against its file, and
             * kept: the run's provider is made from it without reading the file again. */
            struct llm_script_problem p;
            const char *workflow_file = ld->file;

            if (weft__llm_script_check(m->script, &p, &m->script_doc) != WEFT_OK) {
                ld->file = m->script;
                diag_add(ld, p.field, p.line, p.column, "%s (script of model '%s')", p.message,
                         m->name);
                ld->file = workflow_file;
            }
        }
    }
}

static void
check_policy(struct loader *ld, const struct weft_workflow *wf)
{
    const struct watchdog_config *wd = &wf->supervisor.watchdog;

    if (wd->policy == WATCHDOG_ESCALATE && wf->flow != NULL) {
        diag_add(ld, "supervisor.watchdog.policy", 0, 0,
                 "\"escalate\" needs a supervisor to hand the loop to; a flow takes \"warn\", "
                 "\"break\" or \"fail\"");
    } else if (wd->policy == WATCHDOG_ESCALATE && wd->escalate_to == WF_NONE &&
               wf->supervisor.final_agent == WF_NONE &&
               (!wf->has_router || wf->router.clarification_route == WF_NONE)) {
        diag_add(ld, "supervisor.watchdog.escalate_to", 0, 0,
                 "policy \"escalate\" needs escalate_to, supervisor.final_agent or a "
                 "clarification route");
    }
    if (wf->supervisor.policy == WF_POLICY_ROUTER && wf->plan_count > 0) {
        diag_add(ld, "plan", 0, 0, "a router workflow takes no initial plan");
    }
    for (size_t i = 0; i < wf->agent_count; i++) {
        const struct wf_agent *a = &wf->agents[i];
        for (size_t j = 0; j < a->can_request_count; j++) {
            if (a->can_request[j] == i) {
                char path[96];
                snprintf(path, sizeof(path), "agents[%zu].can_request", i);
                diag_add(ld, path, 0, 0, "an agent cannot request itself");
            }
        }
    }
}

weft_err
weft_workflow_load(const char *path, struct weft_workflow **out, struct weft_diags *diags)
{
    return load_depth(path, NULL, 0, out, diags);
}

weft_err
weft__workflow_load_doc(const char *path,
                        const json_t *doc,
                        struct weft_workflow **out,
                        struct weft_diags *diags)
{
    if (doc == NULL) {
        return WEFT_EINVAL;
    }
    return load_depth(path, doc, 0, out, diags);
}

/* Read the workflow file @p path into *root (new): it must exist and hold a JSON object.
 * @return WEFT_OK, or WEFT_ENOTFOUND, WEFT_EIO, WEFT_EPARSE with a diagnostic. */
static weft_err
read_root(struct loader *ld, const char *path, json_t **root)
{
    json_error_t jerr;
    struct stat st;

    if (ld->doc != NULL) {
        *root = json_deep_copy(ld->doc);
        if (*root == NULL || !json_is_object(*root)) {
            diag_add(ld, "", 0, 0, "expected a JSON object at the top level");
            return *root == NULL && json_is_object(ld->doc) ? WEFT_ENOMEM : WEFT_EPARSE;
        }
        return WEFT_OK;
    }
    if (stat(path, &st) != 0) {
        diag_add(ld, "", 0, 0, "cannot open: %s", strerror(errno));
        return errno == ENOENT ? WEFT_ENOTFOUND : WEFT_EIO;
    }
    *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (*root == NULL) {
        diag_add(ld, "", jerr.line > 0 ? jerr.line : 0, jerr.column > 0 ? jerr.column : 0,
                 "invalid JSON: %s", jerr.text);
        return WEFT_EPARSE;
    }
    if (!json_is_object(*root)) {
        diag_add(ld, "", 0, 0, "expected a JSON object at the top level, got %s",
                 weft__json_type_name(*root));
        return WEFT_EPARSE;
    }
    return WEFT_OK;
}

/* "executor": {"kind": "in_process"|"amqp", "queue_prefix": "...", "max_in_flight": N}. */
static void
load_executor(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {"kind", "queue_prefix", "max_in_flight", NULL};
    const json_t *e = get_typed(ld, root, "", "executor", JSON_OBJECT, false);
    struct wf_executor *ex = &wf->executor;

    if (e == NULL) {
        return;
    }
    check_keys(ld, e, "executor", keys);
    ex->kind = get_str(ld, e, "executor", "kind", false);
    if (ex->kind != NULL && strcmp(ex->kind, "in_process") != 0 && strcmp(ex->kind, "amqp") != 0) {
        diag_add(ld, "executor.kind", 0, 0, "expected \"in_process\" or \"amqp\", got \"%s\"",
                 ex->kind);
    }
    ex->queue_prefix = get_str(ld, e, "executor", "queue_prefix", false);
    if (ex->queue_prefix != NULL &&
        (strlen(ex->queue_prefix) > 64 ||
         strspn(ex->queue_prefix,
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") !=
             strlen(ex->queue_prefix))) {
        diag_add(ld, "executor.queue_prefix", 0, 0,
                 "expected at most 64 of the characters A-Z a-z 0-9 . _ : -");
    }
    ex->max_in_flight = (unsigned)get_int(ld, e, "executor", "max_in_flight", 0, 1, 256);
}

/* "memory.embeddings" (@p e): an OpenAI-compatible embeddings endpoint, named the way a
 * "models" entry names its server (base_url environment expanded, api_key_env), with the
 * cosine's share of the score and the call's timeout (10 s by default: a lookup waits on it). */
static void
load_embeddings(struct loader *ld, struct wf_embeddings *emb, const json_t *e)
{
    static const char *const keys[] = {"base_url",  "model",      "api_key_env", "weight",
                                       "timeout_s", "dimensions", NULL};
    const char *path = "memory.embeddings";

    check_keys(ld, e, path, keys);
    emb->base_url = get_str(ld, e, path, "base_url", true);
    if (emb->base_url != NULL) {
        char *expanded = expand_env(emb->base_url);
        weft__free(emb->base_url);
        emb->base_url = expanded;
        if (expanded != NULL && strncmp(expanded, "http://", 7) != 0 &&
            strncmp(expanded, "https://", 8) != 0) {
            diag_add(ld, "memory.embeddings.base_url", 0, 0,
                     "expected an http:// or https:// URL, got \"%s\"", expanded);
        }
    }
    emb->model = get_str(ld, e, path, "model", true);
    emb->api_key_env = get_str(ld, e, path, "api_key_env", false);
    emb->weight = get_num(ld, e, path, "weight", 0.5, 0.0, 1.0);
    emb->timeout_ms = get_seconds_ms(ld, e, path, "timeout_s");
    if (emb->timeout_ms == 0) {
        emb->timeout_ms = 10000;
    }
    emb->dimensions = (size_t)get_int(ld, e, path, "dimensions", 0, 1, 8192);
}

/* "memory": skill memory (off unless "skills" is true) and the conversation's window. */
static void
load_memory(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {
        "skills",  "k",          "min_score", "max_per_agent", "max_age_days", "history_messages",
        "lessons", "embeddings", NULL};
    const json_t *e = NULL;
    const json_t *m = get_typed(ld, root, "", "memory", JSON_OBJECT, false);
    struct wf_memory *mem = &wf->memory;

    mem->k = 3;
    mem->min_score = 0.2;
    mem->max_per_agent = 1000;
    mem->max_age_ns = 180ull * 24 * 3600 * 1000000000ull;
    mem->history_messages = 200;
    if (m == NULL) {
        return;
    }
    check_keys(ld, m, "memory", keys);
    mem->is_skills = get_bool(ld, m, "memory", "skills", false);
    mem->is_lessons = get_bool(ld, m, "memory", "lessons", false);
    mem->k = (unsigned)get_int(ld, m, "memory", "k", 3, 1, 16);
    mem->min_score = get_num(ld, m, "memory", "min_score", 0.2, 0.0, 1.0);
    mem->max_per_agent = (size_t)get_int(ld, m, "memory", "max_per_agent", 1000, 1, 1000000);
    mem->max_age_ns = (uint64_t)get_int(ld, m, "memory", "max_age_days", 180, 0, 36500) * 24 *
                      3600 * 1000000000ull;
    mem->history_messages = (unsigned)get_int(ld, m, "memory", "history_messages", 200, 0, 10000);
    e = get_typed(ld, m, "memory", "embeddings", JSON_OBJECT, false);
    if (e != NULL) {
        load_embeddings(ld, &mem->embeddings, e);
    }
}

/* "sampling": the tail-sampling policy (docs/sampling.md), as one string of comma-separated
 * rules or an array of rule strings, in the order they are tried. */
static void
load_sampling(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    const json_t *v = json_object_get(root, "sampling");
    struct weft__buf text;
    char why[256] = "";
    weft_err err = WEFT_OK;

    if (v == NULL || json_is_null(v)) {
        return;
    }
    weft__buf_init(&text, 0);
    if (json_is_string(v)) {
        err = weft__buf_append_str(&text, json_string_value(v));
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && err == WEFT_OK; i++) {
            const json_t *r = json_array_get(v, i);
            char path[32];

            if (!json_is_string(r) || strchr(json_string_value(r), ',') != NULL) {
                snprintf(path, sizeof(path), "sampling[%zu]", i);
                diag_add(ld, path, 0, 0,
                         "expected one rule as a string, e.g. \"failed\" or "
                         "\"low_reward=reward<0.5\"");
                weft__buf_cleanup(&text);
                return;
            }
            err = weft__buf_printf(&text, "%s%s", i > 0 ? "," : "", json_string_value(r));
        }
    } else {
        diag_add(ld, "sampling", 0, 0,
                 "expected a string of rules (\"failed,stuck,5%%\") or an array of rules");
        return;
    }
    if (err == WEFT_OK) {
        err = weft_sampling_policy_parse(text.data != NULL ? text.data : "", &wf->sampling, why,
                                         sizeof(why));
    }
    if (err == WEFT_EPARSE) {
        diag_add(ld, "sampling", 0, 0, "%s", why);
    } else if (err != WEFT_OK) {
        ld->is_oom = true;
    }
    weft__buf_cleanup(&text);
}

/* Load every section of @p root into @p wf, in the order their diagnostics come out: later
 * sections refer to what earlier ones declared (models, tools, agents). */
static void
load_sections(struct loader *ld, struct weft_workflow *wf, const json_t *root)
{
    static const char *const keys[] = {
        "name",        "description",      "models",    "supervisor",      "agents", "tools",
        "plan",        "router",           "workspace", "capture_content", "flow",   "executor",
        "mcp_servers", "mcp_servers_file", "memory",    "sampling",        NULL};
    char *workspace = NULL;

    check_keys(ld, root, "", keys);
    wf->name = get_str(ld, root, "", "name", true);
    wf->description = get_str(ld, root, "", "description", false);
    load_models(ld, wf, root);
    load_tools(ld, wf, root);
    load_mcp_servers(ld, wf, root);
    load_agents_pass1(ld, wf, root);
    load_agents_pass2(ld, wf, root);
    load_router(ld, wf, root);
    load_supervisor(ld, wf, root);
    load_plan(ld, wf, root);
    load_flow_section(ld, wf, root);
    load_executor(ld, wf, root);
    load_memory(ld, wf, root);
    load_sampling(ld, wf, root);
    check_scripts(ld, wf);
    check_policy(ld, wf);
    workspace = get_str(ld, root, "", "workspace", false);
    if (workspace != NULL) {
        wf->workspace = resolve_path(wf, workspace);
        weft__free(workspace);
    }
    if (json_object_get(root, "capture_content") != NULL) {
        wf->capture_content = get_bool(ld, root, "", "capture_content", false) ? 1 : 0;
    }
}

static weft_err
load_depth(const char *path,
           const json_t *doc,
           unsigned depth,
           struct weft_workflow **out,
           struct weft_diags *diags)
{
    struct loader ld;
    struct weft_workflow *wf = NULL;
    json_t *root = NULL;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    memset(&ld, 0, sizeof(ld));
    ld.file = path;
    ld.doc = doc;
    ld.file_depth = depth;
    ld.diags = diags != NULL ? diags : &ld.local;
    weft_diags_cleanup(ld.diags);
    err = read_root(&ld, path, &root);
    if (err != WEFT_OK) {
        goto out;
    }
    wf = weft__calloc(1, sizeof(*wf));
    if (wf == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    wf->capture_content = -1;
    wf->path = weft__strdup(path);
    wf->dir = dir_of(path);
    if (wf->path == NULL || wf->dir == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    load_sections(&ld, wf, root);
    wf->doc = json_incref(root);
    if (ld.is_oom) {
        err = WEFT_ENOMEM;
    } else if (ld.errors > 0) {
        err = WEFT_EPARSE;
    }
out:
    json_decref(root);
    weft_diags_cleanup(&ld.local);
    if (err != WEFT_OK) {
        weft_workflow_free(wf);
        return err;
    }
    *out = wf;
    return WEFT_OK;
}

const char *
weft_workflow_name(const struct weft_workflow *workflow)
{
    return workflow != NULL && workflow->name != NULL ? workflow->name : "";
}

const struct weft_sampling_policy *
weft_workflow_sampling(const struct weft_workflow *workflow)
{
    return workflow != NULL ? workflow->sampling : NULL;
}

static void
describe(const struct weft_workflow *wf, unsigned depth, struct weft__buf *b)
{
    for (size_t i = 0; i < wf->agent_count; i++) {
        const struct wf_agent *a = &wf->agents[i];
        (void)weft__buf_printf(b, "%*s- %s: ", (int)(2 + 2 * depth), "", a->name);
        if (a->team != NULL) {
            (void)weft__buf_printf(b, "team '%s' (%s)\n", a->team->name, a->team->path);
            if (depth < 3) {
                describe(a->team, depth + 1, b);
            }
            continue;
        }
        if (a->architect != NULL) {
            (void)weft__buf_printf(b, "architect (%u designs, depth %u, teams in %s)\n",
                                   a->architect->max_attempts, a->architect->max_depth,
                                   a->architect->out_dir);
            continue;
        }
        (void)weft__buf_printf(b, "%s", a->is_mcp ? "MCP server agent" : "agent");
        if (a->model != WF_NONE) {
            (void)weft__buf_printf(b, " on %s", wf->models[a->model].name);
        }
        for (size_t t = 0; t < a->tool_count; t++) {
            (void)weft__buf_printf(b, "%s%s", t == 0 ? ", tools: " : " ",
                                   wf->tools[a->tools[t]].name);
        }
        (void)weft__buf_append_str(b, "\n");
    }
}

char *
weft_workflow_describe(const struct weft_workflow *workflow)
{
    struct weft__buf b;

    weft__buf_init(&b, 0);
    if (workflow != NULL) {
        describe(workflow, 0, &b);
    }
    return b.data != NULL ? b.data : weft__strdup("");
}

void
weft_workflow_text_free(char *text)
{
    weft__free(text);
}

void
weft__wf_prompt_ref_free(struct rt_prompt_ref *ref)
{
    if (ref != NULL) {
        weft__rt_prompt_ref_cleanup(ref);
        weft__free(ref);
    }
}

/* The agent a "agent.NAME.FIELD" key names (NAME may hold dots: the field is after the last),
 * with @p field pointing at FIELD; NULL when the key has another shape or no such agent. */
static struct wf_agent *
set_key_agent(struct weft_workflow *wf, const char *key, const char **field)
{
    const char *dot = strrchr(key, '.');
    size_t len = 0;

    if (strncmp(key, "agent.", 6) != 0 || dot == NULL || dot <= key + 6) {
        return NULL;
    }
    len = (size_t)(dot - (key + 6));
    *field = dot + 1;
    for (size_t i = 0; i < wf->agent_count; i++) {
        if (strlen(wf->agents[i].name) == len && strncmp(wf->agents[i].name, key + 6, len) == 0) {
            return &wf->agents[i];
        }
    }
    return NULL;
}

weft_err
weft_workflow_set(struct weft_workflow *workflow,
                  const char *key,
                  const char *value,
                  char *error,
                  size_t error_len)
{
    static const char keys[] = WF_SET_KEYS;
    const char *field = "";
    struct wf_agent *agent = NULL;
    char *copy = NULL;

    if (workflow == NULL || key == NULL || value == NULL) {
        return WEFT_EINVAL;
    }
    if (error == NULL) {
        error_len = 0; /* snprintf(NULL, 0, ...) only measures */
    }
    agent = set_key_agent(workflow, key, &field);
    if (agent == NULL) {
        snprintf(error, error_len, "--set %.80s: %s%s", key,
                 strncmp(key, "agent.", 6) == 0 ? "no such agent; " : "unknown key; ", keys);
        return WEFT_EINVAL;
    }
    if (strcmp(field, "model") == 0) {
        for (size_t i = 0; i < workflow->model_count; i++) {
            if (strcmp(workflow->models[i].name, value) == 0) {
                agent->model = i;
                return WEFT_OK;
            }
        }
        snprintf(error, error_len, "--set %.80s: no model '%.80s' in the workflow's models", key,
                 value);
        return WEFT_EINVAL;
    }
    if (strcmp(field, "instructions") != 0) {
        snprintf(error, error_len, "--set %.80s: unknown field '%.40s'; %s", key, field, keys);
        return WEFT_EINVAL;
    }
    copy = weft__strdup(value);
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    weft__free(agent->instructions);
    agent->instructions = copy;
    weft__wf_prompt_ref_free(agent->prompt);
    agent->prompt = NULL;
    return WEFT_OK;
}
