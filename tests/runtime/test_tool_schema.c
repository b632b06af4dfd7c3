/* tests/runtime/test_tool_schema.c - the JSON-schema subset tool arguments are checked against
 * (runtime/tools/schema.c): every keyword accepting and rejecting, error messages that name
 * the JSON path of the first failure, and the built-in tools' schemas against good and bad
 * arguments. Pure functions: no fixtures, no I/O. */
#include "base/mem.h"
#include "runtime/tools/tools.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <string.h>

/* Validate @p value against @p schema (both JSON text); check the verdict and, when
 * @p message is not NULL, the exact error text. */
static void
check(const char *schema, const char *value, bool expected, const char *message)
{
    json_error_t jerr;
    json_t *s = json_loads(schema, 0, &jerr);
    json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
    char err[256] = "untouched";
    bool got = false;

    if (s == NULL || v == NULL) {
        fail_msg("bad test JSON: %s / %s", schema, value);
    }
    got = weft__tool_schema_validate(s, v, err, sizeof(err));
    if (got != expected) {
        fail_msg("%s against %s: expected %s, got %s (%s)", value, schema,
                 expected ? "valid" : "invalid", got ? "valid" : "invalid", err);
    }
    if (expected) {
        assert_string_equal(err, "");
    }
    if (message != NULL) {
        assert_string_equal(err, message);
    }
    json_decref(s);
    json_decref(v);
}

static void
test_schema_type_accepts_and_rejects_each_type(void **state)
{
    (void)state;
    check("{\"type\": \"string\"}", "\"x\"", true, NULL);
    check("{\"type\": \"string\"}", "1", false, "args: expected string");
    check("{\"type\": \"number\"}", "1.5", true, NULL);
    check("{\"type\": \"number\"}", "2", true, NULL);
    check("{\"type\": \"number\"}", "\"2\"", false, "args: expected number");
    check("{\"type\": \"integer\"}", "2", true, NULL);
    check("{\"type\": \"integer\"}", "2.0", true, NULL); /* a whole number written as real */
    check("{\"type\": \"integer\"}", "2.5", false, "args: expected integer");
    check("{\"type\": \"boolean\"}", "false", true, NULL);
    check("{\"type\": \"boolean\"}", "0", false, "args: expected boolean");
    check("{\"type\": \"object\"}", "{}", true, NULL);
    check("{\"type\": \"object\"}", "[]", false, "args: expected object");
    check("{\"type\": \"array\"}", "[]", true, NULL);
    check("{\"type\": \"array\"}", "{}", false, "args: expected array");
    check("{\"type\": \"null\"}", "null", true, NULL);
    check("{\"type\": \"null\"}", "\"\"", false, "args: expected null");
}

static void
test_schema_type_list_names_every_alternative(void **state)
{
    (void)state;
    check("{\"type\": [\"string\", \"null\"]}", "null", true, NULL);
    check("{\"type\": [\"string\", \"null\"]}", "\"a\"", true, NULL);
    check("{\"type\": [\"string\", \"null\"]}", "1", false, "args: expected string or null");
    check("{\"type\": [\"string\", \"integer\", \"null\"]}", "true", false,
          "args: expected string, integer or null");
}

static void
test_schema_without_constraints_accepts_anything(void **state)
{
    (void)state;
    check("{}", "{\"a\": [1, 2, {\"b\": null}]}", true, NULL);
    check("{\"x-vendor\": 1, \"format\": \"uri\", \"pattern\": \"^$\"}", "\"anything\"", true,
          NULL);
    check("{\"type\": \"no-such-type\"}", "1", true, NULL);
}

static void
test_schema_required_names_the_missing_property(void **state)
{
    (void)state;
    check("{\"type\": \"object\", \"required\": [\"path\"]}", "{}", false,
          "args: missing required property 'path'");
    check("{\"type\": \"object\", \"required\": [\"path\", \"content\"]}", "{\"path\": \"a\"}",
          false, "args: missing required property 'content'");
    check("{\"type\": \"object\", \"required\": [\"path\"]}", "{\"path\": null}", true, NULL);
}

static void
test_schema_properties_check_nested_values(void **state)
{
    (void)state;
    check("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}",
          "{\"n\": \"3\"}", false, "args.n: expected integer");
    check("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}",
          "{\"other\": \"3\"}", true, NULL);
    check("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"object\", \"properties\": "
          "{\"b\": {\"type\": \"object\", \"required\": [\"c\"]}}}}}",
          "{\"a\": {\"b\": {}}}", false, "args.a.b: missing required property 'c'");
}

static void
test_schema_additional_properties(void **state)
{
    (void)state;
    check("{\"type\": \"object\", \"properties\": {\"path\": {}}, \"additionalProperties\": false}",
          "{\"path\": \"a\", \"mode\": \"x\"}", false, "args.mode: unknown property");
    check("{\"type\": \"object\", \"properties\": {\"path\": {}}, \"additionalProperties\": true}",
          "{\"path\": \"a\", \"mode\": \"x\"}", true, NULL);
    check("{\"type\": \"object\", \"properties\": {\"path\": {}}}", "{\"mode\": 1}", true, NULL);
    /* A schema for the extra properties is applied to each of them. */
    check("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"number\"}}",
          "{\"a\": 1, \"b\": \"2\"}", false, "args.b: expected number");
}

static void
test_schema_items_name_the_index(void **state)
{
    (void)state;
    check("{\"type\": \"object\", \"properties\": {\"items\": {\"type\": \"array\", \"items\": "
          "{\"type\": \"integer\"}}}}",
          "{\"items\": [1, 2, \"three\"]}", false, "args.items[2]: expected integer");
    check("{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"id\": "
          "{\"type\": \"string\"}}}}",
          "[{\"id\": \"a\"}, {\"id\": 7}]", false, "args[1].id: expected string");
    check("{\"type\": \"array\", \"items\": {\"type\": \"string\"}}", "[]", true, NULL);
}

static void
test_schema_array_length_bounds(void **state)
{
    (void)state;
    check("{\"type\": \"array\", \"minItems\": 1}", "[]", false, "args: expected at least 1 items");
    check("{\"type\": \"array\", \"maxItems\": 2}", "[1, 2, 3]", false,
          "args: expected at most 2 items");
    check("{\"type\": \"array\", \"minItems\": 1, \"maxItems\": 2}", "[1, 2]", true, NULL);
}

static void
test_schema_enum_compares_json_values(void **state)
{
    (void)state;
    check("{\"enum\": [\"asc\", \"desc\"]}", "\"asc\"", true, NULL);
    check("{\"enum\": [\"asc\", \"desc\"]}", "\"up\"", false,
          "args: not one of the allowed values");
    check("{\"enum\": [1, null, {\"a\": 1}]}", "{\"a\": 1}", true, NULL);
    check("{\"enum\": [1, null]}", "\"1\"", false, NULL);
    check("{\"type\": \"object\", \"properties\": {\"mode\": {\"enum\": [\"r\", \"w\"]}}}",
          "{\"mode\": \"x\"}", false, "args.mode: not one of the allowed values");
}

static void
test_schema_numeric_bounds(void **state)
{
    (void)state;
    check("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", "0", true, NULL);
    check("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", "1", true, NULL);
    check("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", "1.5", false,
          "args: expected a value <= 1");
    check("{\"type\": \"integer\", \"minimum\": 1}", "0", false, "args: expected a value >= 1");
    check("{\"type\": \"number\", \"minimum\": -0.5}", "-0.75", false,
          "args: expected a value >= -0.5");
}

static void
test_schema_string_lengths_count_characters(void **state)
{
    (void)state;
    check("{\"type\": \"string\", \"minLength\": 1}", "\"\"", false,
          "args: expected at least 1 characters");
    check("{\"type\": \"string\", \"maxLength\": 3}", "\"abcd\"", false,
          "args: expected at most 3 characters");
    /* Two characters, four bytes. */
    check("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 2}", "\"\xc3\xa9\xc3\xa9\"",
          true, NULL);
}

/* @p levels of {"type":"array","items":...} around {}, and @p levels of arrays around 1. */
static void
nested(int levels, char *schema, size_t schema_len, char *value, size_t value_len)
{
    size_t s = 0;
    size_t v = 0;

    for (int i = 0; i < levels; i++) {
        s += (size_t)snprintf(schema + s, schema_len - s, "{\"type\": \"array\", \"items\": ");
        v += (size_t)snprintf(value + v, value_len - v, "[");
    }
    s += (size_t)snprintf(schema + s, schema_len - s, "{}");
    v += (size_t)snprintf(value + v, value_len - v, "1");
    for (int i = 0; i < levels; i++) {
        s += (size_t)snprintf(schema + s, schema_len - s, "}");
        v += (size_t)snprintf(value + v, value_len - v, "]");
    }
}

static void
test_schema_reports_deep_nesting_instead_of_recursing(void **state)
{
    char schema[4096];
    char value[512];

    (void)state;
    nested(20, schema, sizeof(schema), value, sizeof(value));
    check(schema, value, true, NULL);
    nested(40, schema, sizeof(schema), value, sizeof(value));
    check(schema, value, false, NULL);
    {
        json_t *js = json_loads(schema, 0, NULL);
        json_t *jv = json_loads(value, 0, NULL);
        char err[256] = "";
        assert_false(weft__tool_schema_validate(js, jv, err, sizeof(err)));
        assert_non_null(strstr(err, ": nested too deeply"));
        assert_int_equal(strncmp(err, "args[0][0][0]", 13), 0);
        json_decref(js);
        json_decref(jv);
    }
}

static void
test_schema_tolerates_missing_value_and_error_buffer(void **state)
{
    json_t *schema = json_loads("{\"type\": \"object\", \"required\": [\"a\"]}", 0, NULL);
    json_t *value = json_object();
    char err[8];

    (void)state;
    assert_false(weft__tool_schema_validate(schema, NULL, NULL, 0));
    assert_false(weft__tool_schema_validate(schema, value, NULL, 0));
    /* A short buffer gets a cut, terminated message. */
    assert_false(weft__tool_schema_validate(schema, value, err, sizeof(err)));
    assert_int_equal(strlen(err), sizeof(err) - 1);
    json_decref(schema);
    json_decref(value);
}

/* ------------------------------------------------------------------------------------------ */
/* Built-in schemas                                                                            */

struct case_ {
    tool_type type;
    const char *args;
    bool is_valid;
    const char *message; /* NULL: not checked */
};

static void
test_schema_builtin_schemas_accept_good_and_reject_bad_args(void **state)
{
    static const struct case_ cases[] = {
        {TOOL_READ_FILE, "{\"path\": \"notes/a.md\"}", true, NULL},
        {TOOL_READ_FILE, "{}", false, "args: missing required property 'path'"},
        {TOOL_READ_FILE, "{\"path\": 3}", false, "args.path: expected string"},
        {TOOL_READ_FILE, "{\"path\": \"\"}", false, NULL},
        {TOOL_READ_FILE, "{\"path\": \"a\", \"mode\": \"r\"}", false,
         "args.mode: unknown property"},
        {TOOL_READ_FILE, "[\"a\"]", false, "args: expected object"},
        {TOOL_WRITE_FILE, "{\"path\": \"a\", \"content\": \"\"}", true, NULL},
        {TOOL_WRITE_FILE, "{\"path\": \"a\"}", false, "args: missing required property 'content'"},
        {TOOL_WRITE_FILE, "{\"path\": \"a\", \"content\": 1}", false,
         "args.content: expected string"},
        {TOOL_HTTP_GET, "{\"url\": \"https://docs.example/\"}", true, NULL},
        {TOOL_HTTP_GET, "{\"url\": 5}", false, "args.url: expected string"},
        {TOOL_HTTP_GET, "{}", false, "args: missing required property 'url'"},
        {TOOL_COMMAND, "{}", true, NULL},
        {TOOL_COMMAND, "{\"args\": [\"-n\", \"5\"]}", true, NULL},
        {TOOL_COMMAND, "{\"args\": [\"-n\", 5]}", false, "args.args[1]: expected string"},
        {TOOL_COMMAND, "{\"args\": \"-n 5\"}", false, "args.args: expected array"},
        {TOOL_COMMAND, "{\"cmd\": \"rm -rf /\"}", false, "args.cmd: unknown property"},
        {TOOL_REQUEST_AGENT, "{\"agent\": \"writer\", \"query\": \"draft it\"}", true, NULL},
        {TOOL_REQUEST_AGENT, "{\"agent\": \"writer\"}", false,
         "args: missing required property 'query'"},
        {TOOL_REQUEST_AGENT, "{\"query\": \"q\"}", false,
         "args: missing required property 'agent'"},
        {TOOL_REQUEST_AGENT, "{\"agent\": 1, \"query\": \"q\"}", false,
         "args.agent: expected string"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *schema = weft__tool_builtin_schema(cases[i].type);
        json_t *args = json_loads(cases[i].args, JSON_DECODE_ANY, NULL);
        char err[256] = "";
        bool got = false;

        assert_non_null(schema);
        assert_true(json_is_object(schema));
        assert_non_null(args);
        got = weft__tool_schema_validate(schema, args, err, sizeof(err));
        if (got != cases[i].is_valid) {
            fail_msg("%s %s: expected %s (%s)", weft__tool_type_name(cases[i].type), cases[i].args,
                     cases[i].is_valid ? "valid" : "invalid", err);
        }
        if (cases[i].message != NULL) {
            assert_string_equal(err, cases[i].message);
        }
        json_decref(schema);
        json_decref(args);
    }
    assert_null(weft__tool_builtin_schema(TOOL_NATIVE));
}

static void
test_schema_type_names(void **state)
{
    (void)state;
    assert_string_equal(weft__tool_type_name(TOOL_REQUEST_AGENT), "request_agent");
    assert_string_equal(weft__tool_type_name(TOOL_READ_FILE), "read_file");
    assert_string_equal(weft__tool_type_name(TOOL_WRITE_FILE), "write_file");
    assert_string_equal(weft__tool_type_name(TOOL_HTTP_GET), "http_get");
    assert_string_equal(weft__tool_type_name(TOOL_COMMAND), "command");
    assert_string_equal(weft__tool_type_name(TOOL_NATIVE), "native");
    assert_string_equal(weft__tool_type_name((tool_type)99), "unknown");
}

static void
test_schema_cleanup_functions_free_everything_and_accept_null(void **state)
{
    struct tool_def def;
    struct tool_outcome outcome;

    (void)state;
    /* Every owned field set: LeakSanitizer reports anything weft__tool_def_cleanup() misses. */
    memset(&def, 0, sizeof(def));
    def.name = weft__strdup("fetch_docs");
    def.description = weft__strdup("Fetch a page");
    def.type = TOOL_COMMAND;
    def.schema = weft__tool_builtin_schema(TOOL_COMMAND);
    def.allow_hosts = weft__calloc(2, sizeof(char *));
    assert_non_null(def.allow_hosts);
    def.allow_hosts[0] = weft__strdup("a.example");
    def.allow_hosts[1] = weft__strdup("b.example");
    def.allow_host_count = 2;
    def.argv = weft__calloc(1, sizeof(char *));
    assert_non_null(def.argv);
    def.argv[0] = weft__strdup("ls");
    def.argc = 1;
    def.cwd = weft__strdup("src");
    weft__tool_def_cleanup(&def);
    assert_null(def.name);
    assert_null(def.schema);
    assert_int_equal(def.argc, 0);
    weft__tool_def_cleanup(&def); /* twice is harmless */
    weft__tool_def_cleanup(NULL);

    memset(&outcome, 0, sizeof(outcome));
    outcome.output = weft__strdup("{}");
    weft__tool_outcome_cleanup(&outcome);
    assert_null(outcome.output);
    weft__tool_outcome_cleanup(&outcome);
    weft__tool_outcome_cleanup(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_type_accepts_and_rejects_each_type),
        cmocka_unit_test(test_schema_type_list_names_every_alternative),
        cmocka_unit_test(test_schema_without_constraints_accepts_anything),
        cmocka_unit_test(test_schema_required_names_the_missing_property),
        cmocka_unit_test(test_schema_properties_check_nested_values),
        cmocka_unit_test(test_schema_additional_properties),
        cmocka_unit_test(test_schema_items_name_the_index),
        cmocka_unit_test(test_schema_array_length_bounds),
        cmocka_unit_test(test_schema_enum_compares_json_values),
        cmocka_unit_test(test_schema_numeric_bounds),
        cmocka_unit_test(test_schema_string_lengths_count_characters),
        cmocka_unit_test(test_schema_reports_deep_nesting_instead_of_recursing),
        cmocka_unit_test(test_schema_tolerates_missing_value_and_error_buffer),
        cmocka_unit_test(test_schema_builtin_schemas_accept_good_and_reject_bad_args),
        cmocka_unit_test(test_schema_type_names),
        cmocka_unit_test(test_schema_cleanup_functions_free_everything_and_accept_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
