/* runtime/eval/eval_config.c - the evaluator config (include/weft/eval.h): a JSON array of
 * {"name", "type", options...}, checked whole at parse time so that a bad pattern or a missing
 * option is found before any run starts. Messages name the field as a path
 * ("evaluators[2].pattern: expected a valid regular expression (...)"). */
#include "runtime/common/json_type.h"
#include "runtime/eval/eval_int.h"

#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {"exact",       "contains", "regex",
                                         "json_schema", "numeric",  "command",
                                         "llm_judge",   "rewards",  "verdicts"};
#define TYPE_COUNT (sizeof(type_names) / sizeof(type_names[0]))
#define TYPE_LIST \
    "exact, contains, regex, json_schema, numeric, command, llm_judge, rewards, verdicts"

/* The options each type accepts besides "name" and "type". */
static const char *const type_keys[TYPE_COUNT] = {
    "value trim case_insensitive",
    "value mode trim case_insensitive",
    "pattern case_insensitive",
    "schema",
    "expected tolerance relative",
    "argv timeout_s",
    "rubric model timeout_s input_price output_price",
    "threshold",
    "rule",
};

const char *
weft_eval_type_name(weft_eval_type type)
{
    return (size_t)type < TYPE_COUNT ? type_names[type] : "unknown";
}

/* Parse state: where messages go and the current element's path. */
struct parse {
    char *err;
    size_t err_len;
    const char *field;
    size_t index;
};

static weft_err fail(struct parse *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_err
fail(struct parse *p, const char *key, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (p->err != NULL && p->err_len > 0) {
        snprintf(p->err, p->err_len, "%s[%zu]%s%s: %s", p->field, p->index, key != NULL ? "." : "",
                 key != NULL ? key : "", what);
    }
    return WEFT_EPARSE;
}

static bool
key_allowed(weft_eval_type type, const char *key)
{
    const char *list = type_keys[type];
    size_t len = strlen(key);

    if (strcmp(key, "name") == 0 || strcmp(key, "type") == 0) {
        return true;
    }
    for (const char *p = strstr(list, key); p != NULL; p = strstr(p + 1, key)) {
        if ((p == list || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' ')) {
            return true;
        }
    }
    return false;
}

/* An optional boolean option. */
static weft_err
opt_bool(struct parse *p, const json_t *obj, const char *key, bool *out)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL) {
        return WEFT_OK;
    }
    if (!json_is_boolean(v)) {
        return fail(p, key, "expected boolean, got %s", weft__json_type_name(v));
    }
    *out = json_is_true(v);
    return WEFT_OK;
}

/* An optional number option, at least @p min. */
static weft_err
opt_number(struct parse *p, const json_t *obj, const char *key, double min, double *out, bool *has)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL) {
        return WEFT_OK;
    }
    if (!json_is_number(v)) {
        return fail(p, key, "expected number, got %s", weft__json_type_name(v));
    }
    if (json_number_value(v) < min) {
        return fail(p, key, "expected a number >= %g, got %g", min, json_number_value(v));
    }
    *out = json_number_value(v);
    if (has != NULL) {
        *has = true;
    }
    return WEFT_OK;
}

/* An optional "timeout_s" in seconds, more than 0 and at most a day (as the workflow's
 * timeouts), as milliseconds in *out; 0 when absent (the type's default). */
static weft_err
opt_timeout_ms(struct parse *p, const json_t *obj, uint32_t *out)
{
    const json_t *v = json_object_get(obj, "timeout_s");

    if (v == NULL) {
        return WEFT_OK;
    }
    if (!json_is_number(v)) {
        return fail(p, "timeout_s", "expected number, got %s", weft__json_type_name(v));
    }
    if (json_number_value(v) < 0.001 || json_number_value(v) > 86400.0) {
        return fail(p, "timeout_s", "expected seconds in [0.001, 86400], got %g",
                    json_number_value(v));
    }
    *out = (uint32_t)(json_number_value(v) * 1000.0 + 0.5);
    return WEFT_OK;
}

/* A required non-empty string option, copied to *out. */
static weft_err
req_string(struct parse *p, const json_t *obj, const char *key, char **out)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL) {
        return fail(p, key, "missing (expected a non-empty string)");
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        return fail(p, key, "expected a non-empty string, got %s",
                    json_is_string(v) ? "\"\"" : weft__json_type_name(v));
    }
    *out = weft__strdup(json_string_value(v));
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
parse_contains(struct parse *p, const json_t *obj, struct eval_def *d)
{
    const json_t *v = json_object_get(obj, "value");
    const json_t *mode = json_object_get(obj, "mode");
    size_t i = 0;
    const json_t *item = NULL;

    if (v != NULL && !json_is_string(v) && !json_is_array(v)) {
        return fail(p, "value", "expected a string or an array of strings, got %s",
                    weft__json_type_name(v));
    }
    if (json_is_array(v) && json_array_size(v) == 0) {
        /* "all of none" would pass every output */
        return fail(p, "value", "expected a string or an array of strings, got an empty array");
    }
    json_array_foreach(v, i, item)
    {
        if (!json_is_string(item)) {
            char key[32];
            snprintf(key, sizeof(key), "value[%zu]", i);
            return fail(p, key, "expected string, got %s", weft__json_type_name(item));
        }
    }
    if (mode != NULL) {
        const char *m = json_string_value(mode);
        if (m == NULL || (strcmp(m, "all") != 0 && strcmp(m, "any") != 0)) {
            return fail(p, "mode", "expected \"all\" or \"any\"");
        }
        d->is_any = strcmp(m, "any") == 0;
    }
    d->value = json_incref((json_t *)v);
    return WEFT_OK;
}

static weft_err
parse_regex(struct parse *p, const json_t *obj, struct eval_def *d)
{
    char *pattern = NULL;
    weft_err err = req_string(p, obj, "pattern", &pattern);
    int rc = 0;

    if (err != WEFT_OK) {
        return err;
    }
    rc = regcomp(&d->re, pattern,
                 REG_EXTENDED | REG_NOSUB | (d->is_case_insensitive ? REG_ICASE : 0));
    if (rc != 0) {
        char why[200];
        regerror(rc, &d->re, why, sizeof(why));
        err = fail(p, "pattern", "expected a valid regular expression (%s)", why);
    } else {
        d->has_re = true;
    }
    weft__free(pattern);
    return err;
}

static weft_err
parse_command(struct parse *p, const json_t *obj, struct eval_def *d)
{
    const json_t *argv = json_object_get(obj, "argv");
    weft_err err = opt_timeout_ms(p, obj, &d->timeout_ms);

    if (err != WEFT_OK) {
        return err;
    }
    if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 64) {
        return fail(p, "argv", "expected a non-empty array of at most 64 strings");
    }
    d->argv = weft__calloc(json_array_size(argv) + 1, sizeof(*d->argv));
    if (d->argv == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(argv); i++) {
        const json_t *a = json_array_get(argv, i);
        if (!json_is_string(a) || (i == 0 && json_string_length(a) == 0)) {
            char key[32];
            snprintf(key, sizeof(key), "argv[%zu]", i);
            return fail(p, key, "expected a%s string", i == 0 ? " non-empty" : "");
        }
        d->argv[i] = weft__strdup(json_string_value(a));
        if (d->argv[i] == NULL) {
            return WEFT_ENOMEM;
        }
        d->argc = i + 1;
    }
    return WEFT_OK;
}

static weft_err
parse_judge(struct parse *p, const json_t *obj, struct eval_def *d)
{
    bool has_in = false;
    bool has_out = false;
    weft_err err = req_string(p, obj, "rubric", &d->rubric);

    if (err == WEFT_OK) {
        err = req_string(p, obj, "model", &d->model);
    }
    if (err == WEFT_OK) {
        err = opt_timeout_ms(p, obj, &d->timeout_ms);
    }
    if (err == WEFT_OK) {
        err = opt_number(p, obj, "input_price", 0, &d->input_price, &has_in);
    }
    if (err == WEFT_OK) {
        err = opt_number(p, obj, "output_price", 0, &d->output_price, &has_out);
    }
    if (err == WEFT_OK && has_in != has_out) {
        err = fail(p, has_in ? "output_price" : "input_price",
                   "missing (input_price and output_price go together)");
    }
    d->has_prices = has_in && has_out;
    return err;
}

/* The options of @p d's type. */
static weft_err
parse_options(struct parse *p, const json_t *obj, struct eval_def *d)
{
    weft_err err = opt_bool(p, obj, "case_insensitive", &d->is_case_insensitive);
    const json_t *rule = json_object_get(obj, "rule");

    if (err == WEFT_OK) {
        err = opt_bool(p, obj, "trim", &d->is_trim);
    }
    if (err != WEFT_OK) {
        return err;
    }
    switch (d->type) {
    case WEFT_EVAL_EXACT:
        d->value = json_incref(json_object_get(obj, "value"));
        return WEFT_OK;
    case WEFT_EVAL_CONTAINS:
        return parse_contains(p, obj, d);
    case WEFT_EVAL_REGEX:
        return parse_regex(p, obj, d);
    case WEFT_EVAL_JSON_SCHEMA:
        d->schema = json_incref(json_object_get(obj, "schema"));
        return json_is_object(d->schema)
                   ? WEFT_OK
                   : fail(p, "schema", "expected an object (a JSON schema), got %s",
                          d->schema == NULL ? "nothing" : weft__json_type_name(d->schema));
    case WEFT_EVAL_NUMERIC:
        err = opt_number(p, obj, "expected", -1e308, &d->number, &d->has_number);
        if (err == WEFT_OK) {
            err = opt_number(p, obj, "tolerance", 0, &d->tolerance, NULL);
        }
        return err == WEFT_OK ? opt_bool(p, obj, "relative", &d->is_relative) : err;
    case WEFT_EVAL_COMMAND:
        return parse_command(p, obj, d);
    case WEFT_EVAL_LLM_JUDGE:
        return parse_judge(p, obj, d);
    case WEFT_EVAL_REWARDS:
        return opt_number(p, obj, "threshold", -1e308, &d->number, &d->has_number);
    case WEFT_EVAL_VERDICTS:
        if (rule != NULL &&
            (!json_is_string(rule) || (strcmp(json_string_value(rule), "no_rejected") != 0 &&
                                       strcmp(json_string_value(rule), "last_approved") != 0))) {
            return fail(p, "rule", "expected \"no_rejected\" or \"last_approved\"");
        }
        d->is_last_approved = rule != NULL && strcmp(json_string_value(rule), "last_approved") == 0;
        return WEFT_OK;
    }
    return WEFT_OK;
}

/* The type, the known keys and the name of one element. */
static weft_err
parse_head(struct parse *p, const json_t *obj, struct eval_def *d)
{
    const json_t *type = json_object_get(obj, "type");
    const json_t *name = json_object_get(obj, "name");
    const char *key = NULL;
    const json_t *v = NULL;
    size_t t = 0;

    if (!json_is_object(obj)) {
        return fail(p, NULL, "expected an object, got %s", weft__json_type_name(obj));
    }
    if (!json_is_string(type)) {
        return fail(p, "type", "%s (expected one of " TYPE_LIST ")",
                    type == NULL ? "missing" : "expected string");
    }
    while (t < TYPE_COUNT && strcmp(type_names[t], json_string_value(type)) != 0) {
        t++;
    }
    if (t == TYPE_COUNT) {
        return fail(p, "type", "unknown type \"%.60s\" (expected one of " TYPE_LIST ")",
                    json_string_value(type));
    }
    d->type = (weft_eval_type)t;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!key_allowed(d->type, key)) {
            return fail(p, key, "unknown option for type %s (expected: name, type, %s)",
                        type_names[t], type_keys[t]);
        }
    }
    if (name != NULL && (!json_is_string(name) || json_string_length(name) == 0 ||
                         json_string_length(name) > 200)) {
        return fail(p, "name", "expected a non-empty string of at most 200 bytes");
    }
    return WEFT_OK;
}

static void
def_cleanup(struct eval_def *d)
{
    weft__free(d->name);
    json_decref(d->value);
    json_decref(d->schema);
    if (d->has_re) {
        regfree(&d->re);
    }
    for (size_t i = 0; d->argv != NULL && d->argv[i] != NULL; i++) {
        weft__free(d->argv[i]);
    }
    weft__free(d->argv);
    weft__free(d->rubric);
    weft__free(d->model);
}

/* Name every evaluator: its "name", or its type numbered when the type repeats. Names must be
 * unique (a score is stored under its evaluator's name). */
static weft_err
assign_names(struct parse *p, const json_t *array, struct weft_evaluators *e)
{
    for (size_t i = 0; i < e->count; i++) {
        const char *given = json_string_value(json_object_get(json_array_get(array, i), "name"));
        char auto_name[48];
        size_t same = 0;

        p->index = i;
        if (given == NULL) {
            for (size_t j = 0; j < i; j++) {
                same += e->defs[j].type == e->defs[i].type;
            }
            snprintf(auto_name, sizeof(auto_name), same == 0 ? "%s" : "%s_%zu",
                     type_names[e->defs[i].type], same + 1);
        }
        e->defs[i].name = weft__strdup(given != NULL ? given : auto_name);
        if (e->defs[i].name == NULL) {
            return WEFT_ENOMEM;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(e->defs[j].name, e->defs[i].name) == 0) {
                return fail(p, "name", "\"%s\" is already the name of %s[%zu]", e->defs[i].name,
                            p->field, j);
            }
        }
    }
    return WEFT_OK;
}

weft_err
weft_evaluators_parse(
    const char *json, const char *field, struct weft_evaluators **out, char *err, size_t err_len)
{
    struct parse p = {err, err_len, field != NULL ? field : "evaluators", 0};
    json_error_t jerr;
    json_t *array = NULL;
    struct weft_evaluators *e = NULL;
    weft_err rc = WEFT_OK;

    if (err != NULL && err_len > 0) {
        err[0] = '\0';
    }
    if (json == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    array = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_array(array)) {
        if (err != NULL && err_len > 0) {
            snprintf(err, err_len, "%s: %s%s", p.field,
                     array == NULL ? "invalid JSON: " : "expected an array of evaluators, got ",
                     array == NULL ? jerr.text : weft__json_type_name(array));
        }
        json_decref(array);
        return WEFT_EPARSE;
    }
    e = weft__calloc(1, sizeof(*e));
    e->defs = e != NULL ? weft__calloc(json_array_size(array) + 1, sizeof(*e->defs)) : NULL;
    rc = e != NULL && e->defs != NULL ? WEFT_OK : WEFT_ENOMEM;
    for (size_t i = 0; rc == WEFT_OK && i < json_array_size(array); i++) {
        p.index = i;
        e->count = i + 1;
        rc = parse_head(&p, json_array_get(array, i), &e->defs[i]);
        if (rc == WEFT_OK) {
            rc = parse_options(&p, json_array_get(array, i), &e->defs[i]);
        }
    }
    if (rc == WEFT_OK) {
        rc = assign_names(&p, array, e);
    }
    json_decref(array);
    if (rc != WEFT_OK) {
        weft_evaluators_free(e);
        return rc;
    }
    *out = e;
    return WEFT_OK;
}

void
weft_evaluators_free(struct weft_evaluators *evaluators)
{
    if (evaluators == NULL) {
        return;
    }
    for (size_t i = 0; evaluators->defs != NULL && i < evaluators->count; i++) {
        def_cleanup(&evaluators->defs[i]);
    }
    weft__free(evaluators->defs);
    weft__free(evaluators);
}

size_t
weft_evaluators_count(const struct weft_evaluators *evaluators)
{
    return evaluators != NULL ? evaluators->count : 0;
}

const char *
weft_evaluators_name(const struct weft_evaluators *evaluators, size_t i)
{
    return evaluators != NULL && i < evaluators->count ? evaluators->defs[i].name : NULL;
}

const char *
weft_evaluators_model(const struct weft_evaluators *evaluators, size_t i)
{
    return evaluators != NULL && i < evaluators->count &&
                   evaluators->defs[i].type == WEFT_EVAL_LLM_JUDGE
               ? evaluators->defs[i].model
               : NULL;
}
