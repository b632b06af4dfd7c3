/* tests/runtime/test_workflow.c - the workflow loader: every shipped example is valid, and each
 * kind of mistake gives a diagnostic naming the file, the JSON path and what was expected,
 * with every problem reported rather than only the first. */
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int
setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/weft-wf-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    weft_test_rmtree(dir);
    return 0;
}

static const char *
write_file(const char *name, const char *text)
{
    static char path[512];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

#define SCRIPT "{\"version\": 1, \"responses\": {}}"

/* Load @p json as a workflow next to an empty script; returns the error and fills diags. */
static weft_err
load(const char *json, struct weft_diags *diags)
{
    struct weft_workflow *wf = NULL;
    weft_err err = WEFT_OK;
    char path[512];

    write_file("s.json", SCRIPT);
    snprintf(path, sizeof(path), "%s", write_file("wf.json", json));
    err = weft_workflow_load(path, &wf, diags);
    if (err == WEFT_OK) {
        assert_non_null(wf);
    } else {
        assert_null(wf);
    }
    weft_workflow_free(wf);
    return err;
}

/* True when some diagnostic has exactly @p path and contains @p text. */
static bool
has_diag(const struct weft_diags *d, const char *path, const char *text)
{
    for (size_t i = 0; i < d->count; i++) {
        if (strcmp(d->items[i].path, path) == 0 && strstr(d->items[i].message, text) != NULL) {
            return true;
        }
    }
    return false;
}

static void
dump(const struct weft_diags *d)
{
    char line[1024];
    for (size_t i = 0; i < d->count; i++) {
        print_message("  %s\n", weft_diag_format(&d->items[i], line, sizeof(line)));
    }
}

#define MODELS "\"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"s.json\"}}"

static void
test_workflow_examples_are_valid(void **state)
{
    static const char *const examples[] = {
        "code_review/workflow.json",      "clarify/workflow.json",
        "swarm_reflection/workflow.json", "openai/workflow.json",
        "stuck_loops/handoff.json",       "stuck_loops/tool.json",
        "stuck_loops/route.json",         "stuck_loops/reflection.json",
        "stuck_loops/flow.json"};
    (void)state;
    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        struct weft_workflow *wf = NULL;
        struct weft_diags d = {0};
        char path[512];
        snprintf(path, sizeof(path), "%s/examples/%s", WEFT_SOURCE_DIR, examples[i]);
        if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
            dump(&d);
            fail_msg("%s is invalid", path);
        }
        assert_int_equal(d.count, 0);
        weft_workflow_free(wf);
    }
}

/* Regression: a router naming agents while one agent has no name crashed the loader (strcmp
 * on NULL in the agent lookup); it is an ordinary diagnostic. Watchdog settings are checked. */
static void
test_workflow_nameless_agent_and_watchdog_settings_are_diagnostics(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"},"
                         " {\"instructions\": \"no name\"}], \"router\": {\"routes\": {\"x\":"
                         " \"a\", \"y\": \"ghost\"}, \"default_route\": \"x\"}}",
                         &d),
                    WEFT_EPARSE);
    assert_true(has_diag(&d, "agents[1].name", "required"));
    assert_true(has_diag(&d, "router.routes.y", "unknown agent 'ghost'"));
    weft_diags_cleanup(&d);
    assert_weft_err(load("{\"name\": \"w\", " MODELS ", \"supervisor\": {\"watchdog\":"
                         " {\"policy\": \"escalate\", \"repeats\": 1, \"window\": 40}},"
                         " \"agents\": [{\"name\": \"a\"}]}",
                         &d),
                    WEFT_EPARSE);
    assert_true(has_diag(&d, "supervisor.watchdog.repeats", "expected integer in [2, 32]"));
    assert_true(has_diag(&d, "supervisor.watchdog.window", "expected integer in [2, 32]"));
    assert_true(has_diag(&d, "supervisor.watchdog.escalate_to", "needs escalate_to"));
    weft_diags_cleanup(&d);
    assert_weft_err(load("{\"name\": \"w\", " MODELS ", \"supervisor\": {\"watchdog\":"
                         " {\"policy\": \"loop\", \"escalate_to\": \"nobody\"}},"
                         " \"agents\": [{\"name\": \"a\"}]}",
                         &d),
                    WEFT_EPARSE);
    assert_true(has_diag(&d, "supervisor.watchdog.policy", "\"escalate\" or \"fail\""));
    assert_true(has_diag(&d, "supervisor.watchdog.escalate_to", "unknown agent 'nobody'"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_minimal_loads_with_defaults(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_ok(load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"}]}", &d));
    assert_int_equal(d.count, 0);
}

static void
test_workflow_syntax_error_has_line_and_column(void **state)
{
    struct weft_diags d = {0};
    char line[1024];
    (void)state;
    assert_weft_err(load("{\n  \"name\": \"w\",\n  \"agents\": [,]\n}", &d), WEFT_EPARSE);
    assert_int_equal(d.count, 1);
    assert_int_equal(d.items[0].line, 3);
    assert_true(d.items[0].column > 0);
    weft_diag_format(&d.items[0], line, sizeof(line));
    assert_non_null(strstr(line, "wf.json:3:"));
    assert_non_null(strstr(line, "invalid JSON"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_missing_file_is_not_found(void **state)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(weft_workflow_load("/nonexistent/wf.json", &wf, &d), WEFT_ENOTFOUND);
    assert_int_equal(d.count, 1);
    assert_string_equal(d.items[0].file, "/nonexistent/wf.json");
    weft_diags_cleanup(&d);
}

static void
test_workflow_unknown_keys_are_errors(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(load("{\"name\": \"w\", \"colour\": 1, " MODELS
                         ", \"agents\": [{\"name\": \"a\", \"max_retires\": 3}]}",
                         &d),
                    WEFT_EPARSE);
    assert_true(has_diag(&d, "colour", "unknown key"));
    assert_true(has_diag(&d, "agents[0].max_retires", "unknown key"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_reports_every_error_with_path(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(
        load("{\"name\": 5, " MODELS ", \"agents\": ["
             "{\"name\": \"a\", \"can_request\": [\"ghost\"], \"tools\": [\"teleport\"]},"
             "{\"name\": \"b\", \"model\": \"nope\"},"
             "{\"name\": \"c\", \"reflection\": {\"max_retries\": -1}, \"max_tool_rounds\": \"x\"},"
             "{\"name\": \"a\"}],"
             "\"supervisor\": {\"circuit_breaker\": 0, \"final_agent\": \"zed\", \"policy\": "
             "\"x\"}}",
             &d),
        WEFT_EPARSE);
    dump(&d);
    assert_true(has_diag(&d, "name", "expected string, got integer"));
    assert_true(has_diag(&d, "agents[0].can_request[0]", "unknown agent 'ghost'"));
    assert_true(has_diag(&d, "agents[0].tools[0]", "unknown tool 'teleport'"));
    assert_true(has_diag(&d, "agents[1].model", "unknown model 'nope'"));
    assert_true(has_diag(&d, "agents[2].reflection.max_retries", "expected integer in [0, 100]"));
    assert_true(has_diag(&d, "agents[2].max_tool_rounds", "expected integer"));
    assert_true(has_diag(&d, "agents[3].name", "duplicate agent name 'a'"));
    assert_true(has_diag(&d, "supervisor.circuit_breaker", "expected integer in [1, 1000]"));
    assert_true(has_diag(&d, "supervisor.final_agent", "unknown agent 'zed'"));
    assert_true(has_diag(&d, "supervisor.policy", "expected \"plan_execute\" or \"router\""));
    assert_true(d.count >= 10);
    weft_diags_cleanup(&d);
}

static void
test_workflow_plan_cycles_and_unknown_steps_are_rejected(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(
        load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"}],"
             "\"plan\": [{\"id\": \"x\", \"agent\": \"a\", \"task\": \"t\","
             " \"depends_on\": [\"y\"]},"
             "{\"id\": \"y\", \"agent\": \"a\", \"task\": \"t\", \"depends_on\": [\"x\"]}]}",
             &d),
        WEFT_EPARSE);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.items[0].message, "dependency cycle"));
    weft_diags_cleanup(&d);
    assert_weft_err(
        load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"}],"
             "\"plan\": [{\"agent\": \"b\", \"task\": \"t\", \"depends_on\": [\"s9\"]}]}",
             &d),
        WEFT_EPARSE);
    assert_true(has_diag(&d, "plan[0].agent", "unknown agent 'b'"));
    assert_true(has_diag(&d, "plan[0]", "unknown step 's9'"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_models_tools_and_router_checked(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    assert_weft_err(
        load("{\"name\": \"w\", \"models\": {"
             "\"s\": {\"provider\": \"scripted\", \"script\": \"missing.json\"},"
             "\"o\": {\"provider\": \"openai\", \"base_url\": \"ftp://x\", \"temperature\": 3},"
             "\"z\": {\"provider\": \"anthropic\"}},"
             "\"tools\": [{\"name\": \"t\", \"type\": \"http_get\"},"
             "{\"name\": \"c\", \"type\": \"shell\"}],"
             "\"agents\": [{\"name\": \"a\", \"model\": \"s\"}],"
             "\"router\": {\"model\": \"s\", \"routes\": {\"r\": \"nobody\"}, \"default_route\": "
             "\"q\"}}",
             &d),
        WEFT_EPARSE);
    dump(&d);
    assert_true(has_diag(&d, "models.s.script", "cannot read script file"));
    assert_true(has_diag(&d, "models.o.base_url", "expected an http:// or https:// URL"));
    assert_true(has_diag(&d, "models.o.temperature", "expected number in [0, 2]"));
    assert_true(has_diag(&d, "models.z.provider", "expected \"openai\" or \"scripted\""));
    assert_true(has_diag(&d, "tools[0].allow_hosts", "non-empty array"));
    assert_true(has_diag(&d, "tools[1].type", "expected \"command\""));
    assert_true(has_diag(&d, "router.routes.r", "unknown agent 'nobody'"));
    assert_true(has_diag(&d, "router.default_route", "unknown route 'q'"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_base_url_expands_environment(void **state)
{
    struct weft_diags d = {0};
    (void)state;
    weft_test_setenv("WEFT_TEST_BASE", "http://127.0.0.1:9/v1");
    assert_weft_ok(load("{\"name\": \"w\", \"models\": {\"o\": {\"provider\": \"openai\","
                        " \"base_url\": \"${WEFT_TEST_BASE:-ftp://bad}\"}},"
                        " \"agents\": [{\"name\": \"a\"}]}",
                        &d));
    weft_test_setenv("WEFT_TEST_BASE", NULL);
    assert_weft_err(load("{\"name\": \"w\", \"models\": {\"o\": {\"provider\": \"openai\","
                         " \"base_url\": \"${WEFT_TEST_BASE:-ftp://bad}\"}},"
                         " \"agents\": [{\"name\": \"a\"}]}",
                         &d),
                    WEFT_EPARSE);
    assert_true(has_diag(&d, "models.o.base_url", "ftp://bad"));
    weft_diags_cleanup(&d);
}

static void
test_workflow_diag_format_without_line(void **state)
{
    struct weft_diag diag = {"f.json", "agents[2].reflection.max_retries", "expected integer >= 0",
                             0, 0};
    char buf[256];
    (void)state;
    assert_string_equal(weft_diag_format(&diag, buf, sizeof(buf)),
                        "f.json: agents[2].reflection.max_retries: expected integer >= 0");
}

static void
test_workflow_executor_and_max_parallel_are_checked(void **state)
{
    struct weft_diags d = {0};

    (void)state;
    assert_weft_ok(load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"}],"
                        " \"supervisor\": {\"max_parallel\": 8}, \"executor\": {\"kind\": "
                        "\"amqp\", \"queue_prefix\": \"team-a.\", \"max_in_flight\": 32}}",
                        &d));
    assert_weft_err(load("{\"name\": \"w\", " MODELS ", \"agents\": [{\"name\": \"a\"}],"
                         " \"supervisor\": {\"max_parallel\": 0}, \"executor\": {\"kind\": "
                         "\"kafka\", \"queue_prefix\": \"a b\", \"max_in_flight\": 300, "
                         "\"broker\": \"amqp://u:p@h/\"}}",
                         &d),
                    WEFT_EPARSE);
    dump(&d);
    assert_true(has_diag(&d, "supervisor.max_parallel", "expected integer in [1, 256]"));
    assert_true(has_diag(&d, "executor.kind", "expected \"in_process\" or \"amqp\""));
    assert_true(has_diag(&d, "executor.queue_prefix", "A-Z a-z 0-9"));
    assert_true(has_diag(&d, "executor.max_in_flight", "expected integer in [1, 256]"));
    /* The broker URL carries credentials: not a workflow key. */
    assert_true(has_diag(&d, "executor.broker", "unknown"));
    weft_diags_cleanup(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workflow_examples_are_valid),
        cmocka_unit_test_setup_teardown(test_workflow_minimal_loads_with_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_workflow_nameless_agent_and_watchdog_settings_are_diagnostics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workflow_syntax_error_has_line_and_column, setup,
                                        teardown),
        cmocka_unit_test(test_workflow_missing_file_is_not_found),
        cmocka_unit_test_setup_teardown(test_workflow_unknown_keys_are_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workflow_reports_every_error_with_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_workflow_plan_cycles_and_unknown_steps_are_rejected,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_workflow_models_tools_and_router_checked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_workflow_base_url_expands_environment, setup,
                                        teardown),
        cmocka_unit_test(test_workflow_diag_format_without_line),
        cmocka_unit_test_setup_teardown(test_workflow_executor_and_max_parallel_are_checked, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
