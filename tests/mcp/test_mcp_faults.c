/* tests/mcp/test_mcp_faults.c - what users see when an MCP server fails: a run whose server
 * does not start fails before its first step (with the server's name, its stderr and the
 * command that installs it) unless the server is optional; a call that fails for a server
 * reason (crash mid-call, hang, a 50 MB answer, an answer that is not JSON) is retried as
 * configured and then fails the step, the run and the exit status; a tool's own isError goes
 * back to the model. The failures are counted by agent and kind in the step's stored error
 * (weft run show, the explorer), in weft.tool.errors (the run's stored metrics, which weft
 * serve's /metrics folds) and in `weft run`'s summary and --json.
 *
 * The servers are real child processes: tests/mcp/servers/fault.mjs (node) in its misbehaving
 * modes, and the filesystem reference server from npm (tests/mcp/node_modules, installed by
 * `scripts/deps.sh test`) for the example's missing-package case.
 */
#include "support/otlp_sink.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/weft.h>

#define MCP_DIR   WEFT_SOURCE_DIR "/tests/mcp"
#define FAULT     MCP_DIR "/servers/fault.mjs"
#define FS_SERVER MCP_DIR "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
#define MODEL     "\"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}}"

struct fx {
    char *dir;
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    char state[512];
    char record[512]; /* what the fault server received, one line each ($MCP_RECORD) */
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct stat st;

    if (stat(FS_SERVER, &st) != 0) {
        fprintf(stderr, "%s is missing: `scripts/deps.sh test` installs the MCP test servers\n",
                FS_SERVER);
        free(f);
        return -1; /* fails the group: never a silent skip */
    }
    f->dir = weft_test_mkdtemp("weft-mcp-faults-");
    assert_non_null(f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    snprintf(f->record, sizeof(f->record), "%s/record.jsonl", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
    weft_test_setenv("MCP_RECORD", f->record);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_setenv("MCP_RECORD", NULL);
    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* The contents of file @p path (to free()), or NULL. */
static char *
slurp(const char *path)
{
    FILE *in = fopen(path, "r");
    char *text = NULL;
    long len = 0;

    if (in == NULL) {
        return NULL;
    }
    fseek(in, 0, SEEK_END);
    len = ftell(in);
    fseek(in, 0, SEEK_SET);
    text = calloc((size_t)len + 1, 1);
    if (text != NULL && fread(text, 1, (size_t)len, in) != (size_t)len) {
        free(text);
        text = NULL;
    }
    fclose(in);
    return text;
}

/* How many lines the fault server received that call tool @p tool. */
static size_t
calls_received(const struct fx *f, const char *tool)
{
    char *text = slurp(f->record);
    char needle[96];
    size_t n = 0;

    snprintf(needle, sizeof(needle), "\"name\":\"%s\"", tool);
    for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p++) {
        n++;
    }
    free(text);
    return n;
}

static void
load_and_run(struct fx *f, const char *workflow_json)
{
    char path[1024];
    char error[512] = "";
    struct weft_diags d = {0};

    weft_test_write_file(f->dir, "wf.json", workflow_json);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    weft_workflow_free(f->wf);
    f->wf = NULL;
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        fail_msg("workflow: %s", d.count > 0 ? d.items[0].message : "?");
    }
    weft_diags_cleanup(&d);
    weft_run_result_free(f->r);
    f->r = NULL;
    f->ro.input = "go";
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run failed: %s", error);
    }
    otlp_sink_collect(f->sink);
}

/* A one-step plan: mcp_agent_fault calls @p tool once, then answers "done". The fault server
 * runs in @p mode with @p extra server keys (", \"timeout_s\": 1", ...). */
static void
run_fault_tool(struct fx *f, const char *mode, const char *tool, const char *extra)
{
    char script[1024];
    char wf[2048];

    snprintf(script, sizeof(script),
             "{\"responses\": {\"mcp_agent_fault\": {\"act\": [{\"tool_calls\": [{\"name\": "
             "\"%s\", \"arguments\": {}}]}, {\"content\": \"done\"}]}}}",
             tool);
    weft_test_write_file(f->dir, "script.json", script);
    snprintf(wf, sizeof(wf),
             "{\"name\": \"faults\", " MODEL ", \"mcp_servers\": {\"fault\": {\"command\": "
             "\"node\", \"args\": [\"" FAULT "\", \"%s\"]%s}}, \"plan\": [{\"id\": \"s1\", "
             "\"agent\": \"mcp_agent_fault\", \"task\": \"use the tool\"}]}",
             mode, extra);
    load_and_run(f, wf);
}

/* The stored step s1 as `weft run show` reads it: its error type and its tool error count of
 * @p kind (from the step's stored error object). */
static void
assert_stored_step(const struct fx *f, const char *error_type, const char *kind, long count)
{
    struct weft_run_details *d = NULL;
    json_t *error = NULL;

    assert_weft_ok(weft_run_load(f->state, f->r->run_id, &d));
    assert_int_equal(d->step_count, 1);
    if (error_type == NULL) {
        assert_null(d->step_extras[0].error_type);
    } else {
        assert_non_null(d->step_extras[0].error_type);
        assert_string_equal(d->step_extras[0].error_type, error_type);
    }
    assert_non_null(d->step_extras[0].error);
    error = json_loads(d->step_extras[0].error, 0, NULL);
    assert_non_null(error);
    if (json_integer_value(json_object_get(json_object_get(error, "tool_errors"), kind)) != count) {
        fail_msg("expected tool_errors.%s = %ld in %s", kind, count, d->step_extras[0].error);
    }
    json_decref(error);
    weft_run_details_free(d);
}

/* What weft serve's /metrics shows of the stored runs contains @p needle. */
static void
assert_stored_metric(const struct fx *f, const char *needle)
{
    struct weft_meter *meter = NULL;

    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_from_store(meter, f->state));
    assert_true(weft_test_prom_has(meter, needle));
    weft_meter_free(meter);
}

/* A server that exits in the middle of tools/call: the call is tried again (retries: 1, the
 * server restarted), fails again, and the step fails with server_down; the run fails, the
 * agent's invocation counts as a failure, and the failure is counted by agent and kind. */
static void
test_crash_mid_call_fails_the_step_after_its_retry(void **state)
{
    struct fx *f = *state;
    json_t *tool = NULL;

    run_fault_tool(f, "ok", "crash", ", \"retries\": 1");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(f->r->step_count, 1);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_int_equal(calls_received(f, "crash"), 2); /* the call and its one retry */
    /* The model was not asked again: the scripted "done" was never used. */
    assert_int_equal(f->r->llm_calls, 1);
    tool = otlp_sink_find(f->sink, "execute_tool crash", 0);
    assert_non_null(tool);
    assert_string_equal(otlp_span_attr(tool, "error.type"), "server_down");
    assert_stored_step(f, "server_down", "server_down", 1);
    assert_stored_metric(f, "weft_tool_errors_total{error_type=\"server_down\","
                            "gen_ai_agent_name=\"mcp_agent_fault\"");
    assert_stored_metric(f, "weft_agent_invocations_total{gen_ai_agent_name=\"mcp_agent_fault\","
                            "outcome=\"failure\"");
    assert_stored_metric(f, "weft_mcp_calls_total{outcome=\"server_down\",server=\"fault\","
                            "workflow=\"faults\"} 2");
}

/* A server that never answers: the call times out after timeout_s (1 s here), with no retry
 * (retries: 0), and the step fails with timeout. */
static void
test_hang_times_out_and_fails_the_step(void **state)
{
    struct fx *f = *state;
    long t0 = weft_test_now_ms();

    run_fault_tool(f, "ok", "hang", ", \"timeout_s\": 1, \"retries\": 0");
    assert_true(weft_test_now_ms() - t0 < 20000);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_int_equal(calls_received(f, "hang"), 1);
    assert_stored_step(f, "timeout", "timeout", 1);
    assert_stored_metric(f, "weft_tool_errors_total{error_type=\"timeout\"");
}

/* A 50 MB answer: reading stops at the transport's 8 MiB cap (the server is stopped), and the
 * step fails with oversized. */
static void
test_huge_result_is_cut_off_and_fails_the_step(void **state)
{
    struct fx *f = *state;

    run_fault_tool(f, "ok", "huge", ", \"retries\": 0");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_stored_step(f, "oversized", "oversized", 1);
    assert_stored_metric(f, "weft_tool_errors_total{error_type=\"oversized\"");
}

/* An answer that is not JSON, then nothing: a protocol error, not a success. */
static void
test_invalid_json_answer_is_a_protocol_error(void **state)
{
    struct fx *f = *state;

    run_fault_tool(f, "ok", "invalid", ", \"timeout_s\": 1, \"retries\": 0");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_stored_step(f, "protocol_error", "protocol_error", 1);
    assert_stored_metric(f, "weft_tool_errors_total{error_type=\"protocol_error\"");
}

/* A tool that answers isError is the tool's own answer: it goes back to the model, which
 * answers, and the step completes; the error is still counted (tool_error). */
static void
test_is_error_goes_back_to_the_model(void **state)
{
    struct fx *f = *state;

    run_fault_tool(f, "ok", "fail", "");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->steps[0].status, "completed");
    assert_int_equal(f->r->llm_calls, 2);
    assert_int_equal(calls_received(f, "fail"), 1); /* never retried */
    assert_stored_step(f, NULL, "tool_error", 1);
    assert_stored_metric(f, "weft_tool_errors_total{error_type=\"tool_error\","
                            "gen_ai_agent_name=\"mcp_agent_fault\"");
}

/* A server that does not start (and is not optional) fails the run before its first step:
 * no model call, no step; the reason names the server, quotes its stderr and gives the
 * install command. */
static void
test_server_that_does_not_start_fails_the_run_first(void **state)
{
    struct fx *f = *state;

    weft_test_write_file(f->dir, "script.json", "{\"responses\": {}}");
    load_and_run(f, "{\"name\": \"nostart\", " MODEL ", \"agents\": [{\"name\": \"a\"}], "
                    "\"mcp_servers\": {\"fault\": {\"command\": \"node\", \"args\": [\"" FAULT
                    "\", \"nostart\"], \"install\": \"npm ci --prefix tools\"}}, \"plan\": "
                    "[{\"id\": \"s1\", \"agent\": \"a\", \"task\": \"go\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(f->r->llm_calls, 0);
    assert_int_equal(f->r->step_count, 0);
    assert_non_null(f->r->reason);
    if (strstr(f->r->reason, "MCP server fault did not start") == NULL ||
        strstr(f->r->reason, "Cannot find module 'fault-server-dependency'") == NULL ||
        strstr(f->r->reason, "Install it with: npm ci --prefix tools") == NULL) {
        fail_msg("reason: %s", f->r->reason);
    }
}

/* The plan chat span's input messages (content is captured), or "". */
static const char *
plan_prompt(struct fx *f)
{
    for (size_t i = 0; i < otlp_sink_count(f->sink); i++) {
        json_t *s = otlp_sink_span(f->sink, i);
        if (strcmp(otlp_span_attr(s, "weft.llm.purpose"), "plan") == 0) {
            return otlp_span_attr(s, "gen_ai.input.messages");
        }
    }
    return "";
}

/* An optional server that does not start: the run goes on, the supervisor is not offered
 * its agent; a step routed to it anyway fails with server_down (not unknown_tool). */
static void
test_optional_server_is_left_out(void **state)
{
    struct fx *f = *state;
    const char *prompt = NULL;
    json_t *tool = NULL;

    f->ro.capture_content = 1;
    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"supervisor\": {\"plan\": [{\"content\": {\"thought\": \"t\", "
        "\"plan\": [{\"agent\": \"a\", \"task\": \"go\"}]}}]}, \"a\": {\"act\": [{\"content\": "
        "\"done\"}]}}}");
    load_and_run(f, "{\"name\": \"opt\", " MODEL ", \"agents\": [{\"name\": \"a\", "
                    "\"description\": \"does it\"}], \"mcp_servers\": {\"fault\": {\"command\": "
                    "\"node\", \"args\": [\"" FAULT "\", \"nostart\"], \"optional\": true}}}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    prompt = plan_prompt(f);
    if (strstr(prompt, "- a: does it") == NULL || strstr(prompt, "mcp_agent_fault") != NULL) {
        fail_msg("the supervisor's prompt: %s", prompt);
    }

    /* A plan that names the agent anyway: its tool call is a server failure. */
    otlp_sink_free(f->sink);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"mcp_agent_fault\": {\"act\": [{\"tool_calls\": "
                         "[{\"name\": \"echo\", \"arguments\": {}}]}, {\"content\": \"done\"}]}}}");
    load_and_run(f, "{\"name\": \"opt\", " MODEL ", \"mcp_servers\": {\"fault\": {\"command\": "
                    "\"node\", \"args\": [\"" FAULT "\", \"nostart\"], \"optional\": true}}, "
                    "\"plan\": [{\"id\": \"s1\", \"agent\": \"mcp_agent_fault\", \"task\": "
                    "\"echo\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    tool = otlp_sink_find(f->sink, "execute_tool echo", 0);
    assert_non_null(tool);
    assert_string_equal(otlp_span_attr(tool, "error.type"), "server_down");
    assert_stored_step(f, "server_down", "server_down", 1);
}

/* Correction mode applies to a step a server failure failed, as to any failed step: the
 * corrector is asked (with error type server_down), retries the step, and the retried step
 * (the server restarted) completes. */
static void
test_correction_mode_repairs_a_server_failure(void **state)
{
    struct fx *f = *state;
    struct weft_run_details *d = NULL;

    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"supervisor\": {\"correct\": [{\"content\": {\"steps\": [{"
        "\"description\": \"Note the crash\", \"executor\": \"file_writer\", \"path\": "
        "\"crash.txt\", \"content\": \"the fault server crashed\", \"rationale\": \"a "
        "record\"}, {\"description\": \"Retry once the server is back\", \"executor\": \"retry\", "
        "\"step\": \"s1\", \"rationale\": \"the server crashed\"}]}}]}, \"mcp_agent_fault\": "
        "{\"act\": [{\"tool_calls\": [{\"name\": \"crash\", \"arguments\": {}}]}, "
        "{\"tool_calls\": [{\"name\": \"echo\", \"arguments\": {}}]}, {\"content\": "
        "\"done\"}]}}}");
    load_and_run(f, "{\"name\": \"repair\", " MODEL ", \"supervisor\": {\"correction\": "
                    "{\"enabled\": true, \"max_corrections\": 1}}, \"mcp_servers\": {\"fault\": "
                    "{\"command\": \"node\", \"args\": [\"" FAULT "\", \"ok\"], \"retries\": 0}}, "
                    "\"plan\": [{\"id\": \"s1\", \"agent\": \"mcp_agent_fault\", \"task\": "
                    "\"use the tools\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->corrections, 1);
    assert_weft_ok(weft_run_load(f->state, f->r->run_id, &d));
    assert_int_equal(d->correction_count, 1);
    assert_string_equal(d->corrections[0].failed_step, "s1");
    assert_string_equal(d->corrections[0].error_type, "server_down");
    weft_run_details_free(d);
    assert_int_equal(calls_received(f, "crash"), 1);
    assert_int_equal(calls_received(f, "echo"), 1);
}

/* Run the built weft with @p args in the test directory and @p env added; @return its exit
 * status, and its output (stdout and stderr) in @p out (to free()). */
static int
weft_cli(const struct fx *f, const char *const *args, const char *const *env, char **out)
{
    const char *argv[16];
    char log[1024];
    size_t n = 0;
    int status = 0;

    argv[n++] = WEFT_BINARY_DIR "/weft";
    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/cli.log", f->dir);
    unlink(log);
    status = weft_test_run(argv, env, f->dir, log, 60000);
    *out = slurp(log);
    assert_non_null(*out);
    return status;
}

/* `weft run`: a step failed by a crashing server is a failed run (exit 1, never "completed"),
 * and the summary, --json and `weft run show` count the failure by agent and kind alike. */
static void
test_cli_says_failed_and_counts_tool_errors(void **state)
{
    struct fx *f = *state;
    char home[600];
    char home_env[700];
    char *out = NULL;
    json_t *doc = NULL;
    json_t *row = NULL;

    snprintf(home, sizeof(home), "%s/home", f->dir);
    snprintf(home_env, sizeof(home_env), "WEFT_HOME=%s", home);
    const char *env[] = {home_env, "WEFT_STATE_URL=", NULL};
    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"mcp_agent_fault\": {\"act\": [{\"tool_calls\": "
        "[{\"name\": \"crash\", \"arguments\": {}}]}, {\"content\": \"done\"}]}}}");
    weft_test_write_file(f->dir, "wf.json",
                         "{\"name\": \"faults\", " MODEL ", \"mcp_servers\": {\"fault\": "
                         "{\"command\": \"node\", \"args\": [\"" FAULT "\", \"ok\"], \"retries\": "
                         "0}}, \"plan\": [{\"id\": \"s1\", \"agent\": \"mcp_agent_fault\", "
                         "\"task\": \"crash\"}]}");
    {
        const char *args[] = {"run", "wf.json", "--no-trace", NULL};
        assert_int_equal(weft_cli(f, args, env, &out), 1);
        if (strstr(out, ": failed in ") == NULL || strstr(out, "completed in") != NULL ||
            strstr(out, "tool errors: mcp_agent_fault:server_down=1") == NULL ||
            strstr(out, "mcp_agent_fault:failure=1") == NULL) {
            fail_msg("weft run said:\n%s", out);
        }
        free(out);
    }
    {
        const char *args[] = {"run", "wf.json", "--json", NULL};
        assert_int_equal(weft_cli(f, args, env, &out), 1);
        doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
        if (doc == NULL) {
            fail_msg("not JSON:\n%s", out);
        }
        assert_string_equal(json_string_value(json_object_get(doc, "status")), "failed");
        row = json_array_get(json_object_get(doc, "tool_errors"), 0);
        assert_non_null(row);
        assert_string_equal(json_string_value(json_object_get(row, "agent")), "mcp_agent_fault");
        assert_string_equal(json_string_value(json_object_get(row, "kind")), "server_down");
        assert_int_equal(json_integer_value(json_object_get(row, "count")), 1);
        json_decref(doc);
        free(out);
    }
    {
        const char *args[] = {"run", "show", "last", NULL};
        assert_int_equal(weft_cli(f, args, env, &out), 0);
        if (strstr(out, "status=failed") == NULL ||
            strstr(out, "tool errors: mcp_agent_fault:server_down=1") == NULL) {
            fail_msg("weft run show said:\n%s", out);
        }
        free(out);
    }
    {
        const char *args[] = {"run", "show", "last", "--json", NULL};
        assert_int_equal(weft_cli(f, args, env, &out), 0);
        doc = json_loads(out, 0, NULL);
        if (doc == NULL) {
            fail_msg("not JSON:\n%s", out);
        }
        row = json_array_get(json_object_get(doc, "tool_errors"), 0);
        assert_non_null(row);
        assert_string_equal(json_string_value(json_object_get(row, "kind")), "server_down");
        assert_int_equal(json_integer_value(json_object_get(row, "count")), 1);
        json_decref(doc);
        free(out);
    }
}

/* The README's example when the filesystem server's npm package is missing: the run fails
 * before its first step, names the server, quotes node's error and says what installs it. */
static void
test_example_without_its_package_says_how_to_install_it(void **state)
{
    struct fx *f = *state;
    char *wf = slurp(WEFT_SOURCE_DIR "/examples/mcp_filesystem/workflow.json");
    char *script = slurp(WEFT_SOURCE_DIR "/examples/mcp_filesystem/script.json");
    char home_env[700];
    char *out = NULL;

    assert_non_null(wf);
    assert_non_null(script);
    weft_test_write_file(f->dir, "workflow.json", wf);
    weft_test_write_file(f->dir, "script.json", script);
    free(wf);
    free(script);
    snprintf(home_env, sizeof(home_env), "WEFT_HOME=%s/home", f->dir);
    {
        const char *env[] = {home_env, "WEFT_STATE_URL=", "WEFT_MCP_MODULES=/nonexistent", NULL};
        const char *args[] = {"run", "workflow.json", "--no-trace", NULL};
        assert_int_equal(weft_cli(f, args, env, &out), 1);
        if (strstr(out, "MCP server filesystem did not start") == NULL ||
            strstr(out, "Cannot find module") == NULL || strstr(out, "make deps") == NULL ||
            strstr(out, "(0 decisions)") == NULL || strstr(out, "completed") != NULL) {
            fail_msg("weft run said:\n%s", out);
        }
        free(out);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_crash_mid_call_fails_the_step_after_its_retry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hang_times_out_and_fails_the_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_result_is_cut_off_and_fails_the_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_invalid_json_answer_is_a_protocol_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_is_error_goes_back_to_the_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_that_does_not_start_fails_the_run_first, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_optional_server_is_left_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correction_mode_repairs_a_server_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_says_failed_and_counts_tool_errors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_example_without_its_package_says_how_to_install_it,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
