/* runtime/tools/schema.c - the JSON-schema subset tool arguments are checked against, the
 * built-in tools' schemas, and the small shared helpers of tools.h.
 *
 * Models write tool arguments; a wrong call must come back to the model as an error it can
 * fix, before anything runs. The subset covers what function-calling schemas use in practice
 * (type, properties, required, additionalProperties, items, enum, bounds and lengths);
 * unknown keywords are ignored, as JSON Schema itself does.
 *
 * Invariants: validation never allocates (messages go into the caller's buffer, paths into
 * bounded stack buffers, so a long key only shortens the message); recursion is bounded at 32
 * levels; the first failure found is the one reported, named by its JSON path from "args"
 * ("args.items[2]: expected integer").
 */
#include "tools.h"

#include "base/mem.h"
#include "base/utf8.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {"request_agent", "read_file", "write_file",
                                         "http_get",      "command",   "native"};

const char *
weft__tool_type_name(tool_type type)
{
    return (size_t)type < sizeof(type_names) / sizeof(type_names[0]) ? type_names[type] : "unknown";
}

void
weft__tool_def_cleanup(struct tool_def *def)
{
    if (def == NULL) {
        return;
    }
    weft__free(def->name);
    weft__free(def->description);
    json_decref(def->schema);
    for (size_t i = 0; i < def->allow_host_count; i++) {
        weft__free(def->allow_hosts[i]);
    }
    weft__free(def->allow_hosts);
    for (size_t i = 0; i < def->argc; i++) {
        weft__free(def->argv[i]);
    }
    weft__free(def->argv);
    weft__free(def->cwd);
    memset(def, 0, sizeof(*def));
}

void
weft__tool_outcome_cleanup(struct tool_outcome *outcome)
{
    if (outcome == NULL) {
        return;
    }
    weft__free(outcome->output);
    outcome->output = NULL;
}

json_t *
weft__tool_builtin_schema(tool_type type)
{
    switch (type) {
    case TOOL_REQUEST_AGENT:
        return json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s, s], s:b}", "type", "object",
                         "properties", "agent", "type", "string", "description", "the agent to ask",
                         "query", "type", "string", "description", "what the agent should do",
                         "required", "agent", "query", "additionalProperties", 0);
    case TOOL_READ_FILE:
        return json_pack("{s:s, s:{s:{s:s, s:i}}, s:[s], s:b}", "type", "object", "properties",
                         "path", "type", "string", "minLength", 1, "required", "path",
                         "additionalProperties", 0);
    case TOOL_WRITE_FILE:
        return json_pack("{s:s, s:{s:{s:s, s:i}, s:{s:s}}, s:[s, s], s:b}", "type", "object",
                         "properties", "path", "type", "string", "minLength", 1, "content", "type",
                         "string", "required", "path", "content", "additionalProperties", 0);
    case TOOL_HTTP_GET:
        return json_pack("{s:s, s:{s:{s:s, s:i}}, s:[s], s:b}", "type", "object", "properties",
                         "url", "type", "string", "minLength", 1, "required", "url",
                         "additionalProperties", 0);
    case TOOL_COMMAND:
        return json_pack("{s:s, s:{s:{s:s, s:{s:s}}}, s:b}", "type", "object", "properties", "args",
                         "type", "array", "items", "type", "string", "additionalProperties", 0);
    case TOOL_NATIVE:
        break;
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Validation                                                                                  */

static bool
has_type(const json_t *value, const char *type)
{
    if (strcmp(type, "string") == 0) {
        return json_is_string(value);
    }
    if (strcmp(type, "integer") == 0) {
        return json_is_integer(value) ||
               (json_is_real(value) && floor(json_real_value(value)) == json_real_value(value));
    }
    if (strcmp(type, "number") == 0) {
        return json_is_number(value);
    }
    if (strcmp(type, "boolean") == 0) {
        return json_is_boolean(value);
    }
    if (strcmp(type, "object") == 0) {
        return json_is_object(value);
    }
    if (strcmp(type, "array") == 0) {
        return json_is_array(value);
    }
    if (strcmp(type, "null") == 0) {
        return json_is_null(value);
    }
    return true; /* an unknown type name constrains nothing */
}

static bool
check_type(const json_t *schema, const json_t *value, const char *path, char *err, size_t len)
{
    const json_t *type = json_object_get(schema, "type");
    size_t i = 0;
    const json_t *t = NULL;

    if (json_is_string(type)) {
        if (!has_type(value, json_string_value(type))) {
            snprintf(err, len, "%s: expected %s", path, json_string_value(type));
            return false;
        }
        return true;
    }
    if (json_is_array(type) && json_array_size(type) > 0) {
        char names[160] = "";
        size_t used = 0;
        size_t count = json_array_size(type);

        json_array_foreach(type, i, t)
        {
            if (json_is_string(t) && has_type(value, json_string_value(t))) {
                return true;
            }
        }
        /* "expected string, integer or null" */
        json_array_foreach(type, i, t)
        {
            const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
            int n = snprintf(names + used, sizeof(names) - used, "%s%s", sep,
                             json_is_string(t) ? json_string_value(t) : "?");
            if (n < 0 || (size_t)n >= sizeof(names) - used) {
                break; /* cut: the message stays readable */
            }
            used += (size_t)n;
        }
        snprintf(err, len, "%s: expected %s", path, names);
        return false;
    }
    return true;
}

static bool validate(const json_t *schema,
                     const json_t *value,
                     const char *path,
                     unsigned depth,
                     char *err,
                     size_t len);

static bool
check_object(const json_t *schema,
             const json_t *value,
             const char *path,
             unsigned depth,
             char *err,
             size_t len)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const char *key = NULL;
    json_t *v = NULL;
    size_t i = 0;
    char sub[256];

    json_array_foreach(required, i, v)
    {
        if (json_is_string(v) && json_object_get(value, json_string_value(v)) == NULL) {
            snprintf(err, len, "%s: missing required property '%s'", path, json_string_value(v));
            return false;
        }
    }
    json_object_foreach((json_t *)value, key, v)
    {
        const json_t *ps = json_object_get(props, key);
        snprintf(sub, sizeof(sub), "%s.%s", path, key);
        if (ps == NULL) {
            if (json_is_false(additional)) {
                snprintf(err, len, "%s: unknown property", sub);
                return false;
            }
            if (json_is_object(additional) && !validate(additional, v, sub, depth + 1, err, len)) {
                return false;
            }
            continue;
        }
        if (!validate(ps, v, sub, depth + 1, err, len)) {
            return false;
        }
    }
    return true;
}

static bool
check_array(const json_t *schema,
            const json_t *value,
            const char *path,
            unsigned depth,
            char *err,
            size_t len)
{
    const json_t *items = json_object_get(schema, "items");
    const json_t *min = json_object_get(schema, "minItems");
    const json_t *max = json_object_get(schema, "maxItems");
    size_t n = json_array_size(value);
    char sub[256];

    if (json_is_integer(min) && (json_int_t)n < json_integer_value(min)) {
        snprintf(err, len, "%s: expected at least %lld items", path,
                 (long long)json_integer_value(min));
        return false;
    }
    if (json_is_integer(max) && (json_int_t)n > json_integer_value(max)) {
        snprintf(err, len, "%s: expected at most %lld items", path,
                 (long long)json_integer_value(max));
        return false;
    }
    for (size_t i = 0; json_is_object(items) && i < n; i++) {
        snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
        if (!validate(items, json_array_get(value, i), sub, depth + 1, err, len)) {
            return false;
        }
    }
    return true;
}

static bool
validate(const json_t *schema,
         const json_t *value,
         const char *path,
         unsigned depth,
         char *err,
         size_t len)
{
    const json_t *en = json_object_get(schema, "enum");

    if (depth > 32) {
        snprintf(err, len, "%s: nested too deeply", path);
        return false;
    }
    if (!json_is_object(schema)) {
        return true; /* no constraints */
    }
    if (!check_type(schema, value, path, err, len)) {
        return false;
    }
    if (json_is_array(en)) {
        bool is_member = false;
        for (size_t i = 0; i < json_array_size(en) && !is_member; i++) {
            is_member = json_equal(json_array_get(en, i), (json_t *)value);
        }
        if (!is_member) {
            snprintf(err, len, "%s: not one of the allowed values", path);
            return false;
        }
    }
    if (json_is_number(value)) {
        const json_t *min = json_object_get(schema, "minimum");
        const json_t *max = json_object_get(schema, "maximum");
        double v = json_number_value(value);
        if (json_is_number(min) && v < json_number_value(min)) {
            snprintf(err, len, "%s: expected a value >= %g", path, json_number_value(min));
            return false;
        }
        if (json_is_number(max) && v > json_number_value(max)) {
            snprintf(err, len, "%s: expected a value <= %g", path, json_number_value(max));
            return false;
        }
    }
    if (json_is_string(value)) {
        const json_t *min = json_object_get(schema, "minLength");
        const json_t *max = json_object_get(schema, "maxLength");
        size_t n = weft__utf8_chars(json_string_value(value), json_string_length(value));
        if (json_is_integer(min) && (json_int_t)n < json_integer_value(min)) {
            snprintf(err, len, "%s: expected at least %lld characters", path,
                     (long long)json_integer_value(min));
            return false;
        }
        if (json_is_integer(max) && (json_int_t)n > json_integer_value(max)) {
            snprintf(err, len, "%s: expected at most %lld characters", path,
                     (long long)json_integer_value(max));
            return false;
        }
    }
    if (json_is_object(value)) {
        return check_object(schema, value, path, depth, err, len);
    }
    if (json_is_array(value)) {
        return check_array(schema, value, path, depth, err, len);
    }
    return true;
}

bool
weft__tool_schema_validate(const json_t *schema, const json_t *value, char *err, size_t err_len)
{
    char scratch[8];

    if (err == NULL || err_len == 0) {
        err = scratch;
        err_len = sizeof(scratch);
    }
    err[0] = '\0';
    if (value == NULL) {
        snprintf(err, err_len, "args: missing");
        return false;
    }
    return validate(schema, value, "args", 0, err, err_len);
}
