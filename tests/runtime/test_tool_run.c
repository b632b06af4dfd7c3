/* tests/runtime/test_tool_run.c - the tools agents call, run for real: the JSON-schema check,
 * file tools confined to a temporary workspace (.., absolute paths, symlinked files and
 * directories), command tools (exit codes, stderr, timeouts that kill the process group,
 * output caps, missing programs, appended arguments, cwd escapes), http_get against a real
 * HTTP server on 127.0.0.1 (allowlist, userinfo, schemes, status, body cap) and native tools
 * registered from C, with an out-of-memory loop. */
#define _GNU_SOURCE /* realpath */

#include "runtime/tools/tools.h"
#include "support/failalloc.h"
#include "support/http_receiver.h"
#include "support/weft_test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fx {
    char ws[PATH_MAX + 8];  /* the workspace */
    char outside[PATH_MAX]; /* a directory next to it */
    struct tool_outcome out;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char real[PATH_MAX];

    snprintf(f->outside, sizeof(f->outside), "/tmp/weft-tools-XXXXXX");
    assert_non_null(mkdtemp(f->outside));
    assert_non_null(realpath(f->outside, real));
    memcpy(f->outside, real, sizeof(real));
    snprintf(f->ws, sizeof(f->ws), "%s/ws", f->outside);
    assert_int_equal(mkdir(f->ws, 0755), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    char cmd[PATH_MAX + 16];

    tool_outcome_cleanup(&f->out);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->outside);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void
put(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Run a tool of @p type with @p args_json; the outcome stays in f->out. */
static void
call(struct fx *f, struct tool_def *def, const char *args_json)
{
    json_t *args = json_loads(args_json, 0, NULL);

    assert_non_null(args);
    tool_outcome_cleanup(&f->out);
    assert_weft_ok(tool_run(def, f->ws, args, &f->out));
    assert_non_null(f->out.output);
    json_decref(args);
}

static json_t *
output(struct fx *f)
{
    static json_t *last = NULL;
    json_decref(last);
    last = json_loads(f->out.output, 0, NULL);
    assert_non_null(last);
    return last;
}

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                      */

static void
check_schema(const char *schema, const char *value, bool expected, const char *message)
{
    json_t *s = json_loads(schema, 0, NULL);
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    char err[200] = "";

    assert_non_null(s);
    assert_non_null(v);
    if (tool_schema_validate(s, v, err, sizeof(err)) != expected) {
        fail_msg("%s against %s: expected %s (%s)", value, schema, expected ? "valid" : "invalid",
                 err);
    }
    if (message != NULL) {
        assert_string_equal(err, message);
    }
    json_decref(s);
    json_decref(v);
}

static void
test_tool_schema_keywords(void **state)
{
    (void)state;
    check_schema("{\"type\": \"object\", \"required\": [\"path\"]}", "{}", false,
                 "args: missing required property 'path'");
    check_schema("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}",
                 "{\"n\": \"3\"}", false, "args.n: expected integer");
    check_schema("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}",
                 "{\"n\": 3.0}", true, NULL);
    check_schema("{\"type\": \"object\", \"additionalProperties\": false}", "{\"x\": 1}", false,
                 "args.x: unknown property");
    check_schema("{\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 3}",
                 "[\"a\", 2]", false, "args[1]: expected string");
    check_schema("{\"type\": \"array\", \"minItems\": 1}", "[]", false,
                 "args: expected at least 1 items");
    check_schema("{\"enum\": [\"asc\", \"desc\"]}", "\"up\"", false,
                 "args: not one of the allowed values");
    check_schema("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", "1.5", false,
                 "args: expected a value <= 1");
    check_schema("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
                 "\"\xc3\xa9\xc3\xa9\"", true, NULL);
    check_schema("{\"type\": \"string\", \"maxLength\": 3}", "\"abcd\"", false,
                 "args: expected at most 3 characters");
    check_schema("{\"type\": [\"string\", \"null\"]}", "null", true, NULL);
    check_schema("{\"type\": [\"string\", \"null\"]}", "1", false, NULL);
    check_schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"object\", "
                 "\"properties\": {\"b\": {\"type\": \"boolean\"}}}}}",
                 "{\"a\": {\"b\": 1}}", false, "args.a.b: expected boolean");
    check_schema("{\"x-unknown-keyword\": true}", "{\"anything\": 1}", true, NULL);
}

static void
test_tool_builtin_schemas(void **state)
{
    static const tool_type types[] = {TOOL_REQUEST_AGENT, TOOL_READ_FILE, TOOL_WRITE_FILE,
                                      TOOL_HTTP_GET, TOOL_COMMAND};
    static const char *const good[] = {"{\"agent\": \"a\", \"query\": \"q\"}", "{\"path\": \"a\"}",
                                       "{\"path\": \"a\", \"content\": \"\"}",
                                       "{\"url\": \"http://x/\"}", "{\"args\": [\"-n\"]}"};
    static const char *const bad[] = {"{\"agent\": \"a\"}", "{\"path\": \"\"}", "{\"path\": \"a\"}",
                                      "{\"url\": 5}", "{\"args\": [1]}"};
    (void)state;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        json_t *schema = tool_builtin_schema(types[i]);
        json_t *g = json_loads(good[i], 0, NULL);
        json_t *b = json_loads(bad[i], 0, NULL);
        assert_non_null(schema);
        assert_true(tool_schema_validate(schema, g, NULL, 0));
        assert_false(tool_schema_validate(schema, b, NULL, 0));
        json_decref(schema);
        json_decref(g);
        json_decref(b);
    }
    assert_null(tool_builtin_schema(TOOL_NATIVE));
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */

static void
test_tool_files_read_and_write_inside_the_workspace(void **state)
{
    struct fx *f = *state;
    struct tool_def rd = {.type = TOOL_READ_FILE};
    struct tool_def wr = {.type = TOOL_WRITE_FILE};
    char path[PATH_MAX + 16];
    struct stat st;

    call(f, &wr, "{\"path\": \"src/app/main.py\", \"content\": \"print('hi')\\n\"}");
    assert_false(f->out.is_error);
    assert_int_equal(json_integer_value(json_object_get(output(f), "bytes")), 12);
    call(f, &rd, "{\"path\": \"./src//app/main.py\"}");
    assert_false(f->out.is_error);
    assert_string_equal(json_string_value(json_object_get(output(f), "content")), "print('hi')\n");
    /* Overwrite replaces atomically: no temporary file is left behind. */
    call(f, &wr, "{\"path\": \"src/app/main.py\", \"content\": \"v2\"}");
    call(f, &rd, "{\"path\": \"src/app/main.py\"}");
    assert_string_equal(json_string_value(json_object_get(output(f), "content")), "v2");
    snprintf(path, sizeof(path), "%s/src/app", f->ws);
    assert_int_equal(stat(path, &st), 0);
    call(f, &rd, "{\"path\": \"missing.txt\"}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "not_found");
    call(f, &rd, "{\"path\": \"src\"}");
    assert_true(f->out.is_error);
}

static void
test_tool_files_refuse_every_escape(void **state)
{
    struct fx *f = *state;
    struct tool_def rd = {.type = TOOL_READ_FILE};
    struct tool_def wr = {.type = TOOL_WRITE_FILE};
    static const char *const reads[] = {
        "{\"path\": \"../secret.txt\"}",      "{\"path\": \"a/../../secret.txt\"}",
        "{\"path\": \"/etc/passwd\"}",        "{\"path\": \"link.txt\"}",
        "{\"path\": \"linkdir/secret.txt\"}",
    };
    char target[2 * PATH_MAX];
    char link[2 * PATH_MAX];

    put(f->outside, "secret.txt", "top secret");
    snprintf(target, sizeof(target), "%s/secret.txt", f->outside);
    snprintf(link, sizeof(link), "%s/link.txt", f->ws);
    assert_int_equal(symlink(target, link), 0);
    snprintf(link, sizeof(link), "%s/linkdir", f->ws);
    assert_int_equal(symlink(f->outside, link), 0);
    for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
        call(f, &rd, reads[i]);
        assert_true(f->out.is_error);
        assert_string_equal(f->out.error_type, "path_escape");
        assert_null(strstr(f->out.output, "top secret"));
    }
    /* Writing through a symlinked directory or onto a symlink never touches the target. */
    call(f, &wr, "{\"path\": \"linkdir/secret.txt\", \"content\": \"pwned\"}");
    assert_string_equal(f->out.error_type, "path_escape");
    call(f, &wr, "{\"path\": \"../secret.txt\", \"content\": \"pwned\"}");
    assert_string_equal(f->out.error_type, "path_escape");
    call(f, &wr, "{\"path\": \"link.txt\", \"content\": \"replaced\"}");
    assert_false(f->out.is_error); /* the link itself is replaced by a file */
    {
        FILE *fp = fopen(target, "r");
        char buf[64] = "";
        assert_non_null(fp);
        assert_non_null(fgets(buf, sizeof(buf), fp));
        fclose(fp);
        assert_string_equal(buf, "top secret");
    }
}

static void
test_tool_files_enforce_max_bytes(void **state)
{
    struct fx *f = *state;
    struct tool_def rd = {.type = TOOL_READ_FILE, .max_bytes = 4};
    struct tool_def wr = {.type = TOOL_WRITE_FILE, .max_bytes = 4};

    put(f->ws, "big.txt", "0123456789");
    call(f, &rd, "{\"path\": \"big.txt\"}");
    assert_string_equal(f->out.error_type, "too_large");
    call(f, &wr, "{\"path\": \"b.txt\", \"content\": \"0123456789\"}");
    assert_string_equal(f->out.error_type, "too_large");
}

/* ------------------------------------------------------------------------------------------ */
/* Commands                                                                                    */

static struct tool_def
command(char **argv, size_t argc)
{
    struct tool_def d;
    memset(&d, 0, sizeof(d));
    d.type = TOOL_COMMAND;
    d.argv = argv;
    d.argc = argc;
    return d;
}

static void
test_tool_command_exit_codes_and_streams(void **state)
{
    struct fx *f = *state;
    char *ok[] = {"sh", "-c", "echo out; echo err >&2"};
    char *bad[] = {"sh", "-c", "echo failing >&2; exit 3"};
    char *pwd[] = {"pwd"};
    struct tool_def d = command(ok, 3);
    json_t *o = NULL;

    call(f, &d, "{}");
    o = output(f);
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, 0);
    assert_string_equal(json_string_value(json_object_get(o, "stdout")), "out\n");
    assert_string_equal(json_string_value(json_object_get(o, "stderr")), "err\n");
    d = command(bad, 3);
    call(f, &d, "{}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "exit_status");
    assert_int_equal(f->out.exit_code, 3);
    assert_string_equal(json_string_value(json_object_get(output(f), "stderr")), "failing\n");
    d = command(pwd, 1);
    call(f, &d, "{}");
    assert_string_equal(json_string_value(json_object_get(output(f), "stdout")) + strlen(f->ws),
                        "\n");
}

static void
test_tool_command_timeout_kills_the_group(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sh", "-c", "sleep 30 & sleep 30; echo never"};
    struct tool_def d = command(argv, 3);
    uint64_t t0 = weft_monotonic_ns();

    d.timeout_ms = 200;
    call(f, &d, "{}");
    assert_true(weft_monotonic_ns() - t0 < 5000000000ull);
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "timeout");
    assert_int_equal(f->out.exit_code, 128 + 9);
    assert_true(json_is_true(json_object_get(output(f), "timed_out")));
}

static void
test_tool_command_output_cap_never_blocks(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"head", "-c", "3000000", "/dev/zero"};
    struct tool_def d = command(argv, 4);

    d.max_output = 1000;
    call(f, &d, "{}");
    assert_false(f->out.is_error);
    assert_true(f->out.is_truncated);
    assert_true(json_is_true(json_object_get(output(f), "truncated")));
}

static void
test_tool_command_missing_program_args_and_cwd(void **state)
{
    struct fx *f = *state;
    char *missing[] = {"weft-no-such-program"};
    char *echo[] = {"echo", "hello"};
    char *pwd[] = {"pwd"};
    struct tool_def d = command(missing, 1);

    call(f, &d, "{}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "spawn_failed");
    d = command(echo, 2);
    d.append_args = true;
    call(f, &d, "{\"args\": [\"big\", \"world\"]}");
    assert_string_equal(json_string_value(json_object_get(output(f), "stdout")),
                        "hello big world\n");
    d.append_args = false;
    call(f, &d, "{\"args\": [\"ignored\"]}");
    assert_string_equal(json_string_value(json_object_get(output(f), "stdout")), "hello\n");
    d = command(pwd, 1);
    d.cwd = "../";
    call(f, &d, "{}");
    assert_string_equal(f->out.error_type, "path_escape");
    d.cwd = "/tmp";
    call(f, &d, "{}");
    assert_string_equal(f->out.error_type, "path_escape");
}

/* ------------------------------------------------------------------------------------------ */
/* http_get                                                                                    */

static void
test_tool_http_get_allowlist(void **state)
{
    struct fx *f = *state;
    struct http_receiver *rx = NULL;
    char *hosts[] = {"127.0.0.1"};
    struct tool_def d = {.type = TOOL_HTTP_GET, .allow_hosts = hosts, .allow_host_count = 1};
    struct http_response ok = {
        .status = 200, .body = "hello from the docs", .content_type = "text/plain"};
    struct http_response missing = {.status = 404, .body = "nope", .content_type = "text/plain"};
    char url[128];
    char args[300];

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_push(rx, &ok);
    http_receiver_push(rx, &missing);
    http_receiver_push(rx, &ok);
    snprintf(args, sizeof(args), "{\"url\": \"%s\"}",
             http_receiver_url(rx, "/doc", url, sizeof(url)));
    call(f, &d, args);
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, 200);
    assert_string_equal(json_string_value(json_object_get(output(f), "body")),
                        "hello from the docs");
    call(f, &d, args);
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "http_status");
    assert_int_equal(f->out.exit_code, 404);
    /* Refused before any request is made. */
    call(f, &d, "{\"url\": \"http://localhost:1/\"}");
    assert_string_equal(f->out.error_type, "not_allowed");
    snprintf(args, sizeof(args), "{\"url\": \"http://127.0.0.1@evil.example:%u/\"}",
             http_receiver_port(rx));
    call(f, &d, args);
    assert_string_equal(f->out.error_type, "not_allowed");
    snprintf(args, sizeof(args), "{\"url\": \"http://user:pw@127.0.0.1:%u/\"}",
             http_receiver_port(rx));
    call(f, &d, args);
    assert_string_equal(f->out.error_type, "not_allowed");
    call(f, &d, "{\"url\": \"ftp://127.0.0.1/x\"}");
    assert_string_equal(f->out.error_type, "not_allowed");
    call(f, &d, "{\"url\": \"not a url\"}");
    assert_true(f->out.is_error);
    assert_int_equal(http_receiver_count(rx), 2);
    /* The body cap. */
    d.max_output = 5;
    snprintf(args, sizeof(args), "{\"url\": \"%s\"}", url);
    call(f, &d, args);
    assert_true(f->out.is_truncated);
    assert_string_equal(json_string_value(json_object_get(output(f), "body")), "hello");
    http_receiver_stop(rx);
}

/* ------------------------------------------------------------------------------------------ */
/* Native tools                                                                                */

static weft_err
lookup_order(void *user_data, const char *arguments_json, struct weft_tool_result *result)
{
    int *calls = user_data;
    char text[256];

    (*calls)++;
    if (strstr(arguments_json, "\"broken\"") != NULL) {
        return WEFT_EIO;
    }
    if (strstr(arguments_json, "\"silent\"") != NULL) {
        return WEFT_OK;
    }
    snprintf(text, sizeof(text), "{\"seen\": %s}", arguments_json);
    return weft_tool_result_set(result, text, strstr(arguments_json, "\"bad\"") != NULL);
}

static void
test_tool_native_registry(void **state)
{
    struct fx *f = *state;
    struct weft_tools *tools = NULL;
    int calls = 0;
    const struct tool_def *d = NULL;

    assert_weft_ok(weft_tools_new(&tools));
    assert_weft_ok(weft_tools_add(tools, "lookup_order", "Find an order",
                                  "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": "
                                  "\"string\"}}, \"required\": [\"id\"]}",
                                  lookup_order, &calls));
    assert_weft_err(weft_tools_add(tools, "lookup_order", NULL, NULL, lookup_order, &calls),
                    WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "read_file", NULL, NULL, lookup_order, &calls),
                    WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "bad name!", NULL, NULL, lookup_order, &calls),
                    WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "x", NULL, "[1, 2]", lookup_order, &calls), WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "y", NULL, NULL, NULL, &calls), WEFT_EINVAL);
    assert_int_equal(tool_registry_count(tools), 1);
    d = tool_registry_get(tools, 0);
    assert_string_equal(d->name, "lookup_order");
    call(f, (struct tool_def *)d, "{\"id\": \"A-1\"}");
    assert_false(f->out.is_error);
    assert_string_equal(f->out.output, "{\"seen\": {\"id\":\"A-1\"}}");
    call(f, (struct tool_def *)d, "{\"id\": \"bad\"}");
    assert_true(f->out.is_error);
    call(f, (struct tool_def *)d, "{\"id\": \"broken\"}");
    assert_string_equal(f->out.error_type, "tool_failed");
    assert_non_null(strstr(f->out.output, weft_strerror(WEFT_EIO)));
    call(f, (struct tool_def *)d, "{\"id\": \"silent\"}");
    assert_non_null(strstr(f->out.output, "tool returned nothing"));
    assert_int_equal(calls, 4);
    weft_tools_free(tools);
    weft_tools_free(NULL);
}

static void
test_tool_native_registry_out_of_memory(void **state)
{
    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        struct weft_tools *tools = NULL;
        weft_err err = WEFT_OK;
        int calls = 0;

        failalloc_budget = budget;
        err = weft_tools_new(&tools);
        if (err == WEFT_OK) {
            err = weft_tools_add(tools, "t1", "first", NULL, lookup_order, &calls);
        }
        if (err == WEFT_OK) {
            err = weft_tools_add(tools, "t2", "second", NULL, lookup_order, &calls);
        }
        failalloc_budget = -1;
        if (err == WEFT_OK) {
            assert_int_equal(tool_registry_count(tools), 2);
            weft_tools_free(tools);
            break;
        }
        assert_int_equal(err, WEFT_ENOMEM);
        assert_true(tool_registry_count(tools) < 2);
        weft_tools_free(tools);
    }
    weft_set_allocator(NULL, NULL, NULL);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tool_schema_keywords),
        cmocka_unit_test(test_tool_builtin_schemas),
        T(test_tool_files_read_and_write_inside_the_workspace),
        T(test_tool_files_refuse_every_escape),
        T(test_tool_files_enforce_max_bytes),
        T(test_tool_command_exit_codes_and_streams),
        T(test_tool_command_timeout_kills_the_group),
        T(test_tool_command_output_cap_never_blocks),
        T(test_tool_command_missing_program_args_and_cwd),
        T(test_tool_http_get_allowlist),
        T(test_tool_native_registry),
        cmocka_unit_test(test_tool_native_registry_out_of_memory),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
