/* tests/mcp/test_mcp_serve.c - `weft mcp serve` (runtime/mcp_server/server.c, serve_http.c), the
 * built binary driven by weft's own MCP client (runtime/mcp/mcp.h) over stdio and Streamable HTTP,
 * against a store filled by `weft run` of example workflows: one completed after a correction
 * (examples/correction), one completed with reflection (examples/swarm_reflection), one stuck
 * (examples/stuck_loops/handoff.json), one that spends its token budget, one that fails (a
 * command step exiting 4 after writing to stderr) and the same failure with tracing off (a run
 * that was not traced). The JSON-RPC error paths are checked on the
 * library entry point weft_mcp_server_handle(); the HTTP status codes with raw libcurl
 * requests, and over HTTP who may reach it (the Host rule, --allow-host, --token-file kept out
 * of argv) and that half-open connections cannot lock other clients out. Anything that cannot
 * start fails the test. */
#include "support/weft_test.h"

#include "runtime/mcp/mcp.h"
#include "support/server_proc.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/mcp.h>

#define WEFT        WEFT_BINARY_DIR "/weft"
#define INSPECTOR   WEFT_SOURCE_DIR "/tests/mcp/node_modules/.bin/mcp-inspector"
#define EXAMPLES    WEFT_SOURCE_DIR "/examples"
#define TOKEN       "test-token-0123456789"
#define RUN_TIMEOUT 60000

struct fx {
    char *dir;          /* the temp directory */
    char home[512];     /* WEFT_HOME */
    char home_env[600]; /* "WEFT_HOME=..." */
    char wf_dir[512];   /* --workflows */
    char failed_run[64];
    char failed_span[32];
    char untraced_run[64];           /* a failing command step, OTEL_SDK_DISABLED */
    char stuck_run[64];              /* examples/stuck_loops/handoff.json */
    char budget_run[64];             /* its token budget (100) spent */
    struct weft__mcp_client *client; /* stdio */
};

static struct fx fx;

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                    */

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void
copy_file(const char *from, const char *to)
{
    json_t *j = json_load_file(from, 0, NULL);

    assert_non_null(j);
    assert_int_equal(json_dump_file(j, to, JSON_INDENT(2)), 0);
    json_decref(j);
}

/* `weft run WORKFLOW` into the test's WEFT_HOME, with @p extra_env (may be NULL) set too.
 * @return the exit status. */
static int
weft_run_env(const char *workflow, const char *extra_env)
{
    const char *argv[] = {WEFT, "run", "-q", "--no-trace", workflow, NULL};
    const char *env[] = {fx.home_env, "OTEL_*", extra_env, NULL};
    char log[600];

    snprintf(log, sizeof(log), "%s/run.log", fx.dir);
    return weft_test_run(argv, env, fx.dir, log, RUN_TIMEOUT);
}

static int
weft_run_example(const char *workflow)
{
    return weft_run_env(workflow, NULL);
}

/* `weft ARGS...` in the fixture's home. */
static int
weft_cmd(const char *const *args)
{
    const char *argv[16] = {WEFT};
    const char *env[] = {fx.home_env, "OTEL_*", NULL};
    char log[600];
    size_t n = 1;

    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    snprintf(log, sizeof(log), "%s/cmd.log", fx.dir);
    return weft_test_run(argv, env, fx.dir, log, RUN_TIMEOUT);
}

#define REPLY \
    "Thanks for writing in: we have your ticket and the right team will answer within a day."

/* A dataset of three tickets and two experiments over it (before the runs below: the failing
 * run stays the last). mcp-before runs examples/support_triage/workflow.json, whose router has
 * no queue for refunds (those runs fail at step route); mcp-exp runs workflow_fixed.json. The
 * first reply is not what its item expects (failed in both), the invoice passes in both, and
 * the second refund passes only after the fix: compared, one item fixed, two unchanged. */
static void
make_experiment(void)
{
    char items[700];
    char evals[700];

    weft_test_write_file(fx.dir, "items.jsonl",
                         "{\"input\": \"Please refund my order\", \"expected\": \"Refunded.\"}\n"
                         "{\"input\": \"Where is my invoice?\", \"expected\": \"" REPLY "\"}\n"
                         "{\"input\": \"Refund: charged twice\", \"expected\": \"" REPLY "\"}\n");
    weft_test_write_file(fx.dir, "exact.json", "[{\"name\": \"reply\", \"type\": \"exact\"}]");
    snprintf(items, sizeof(items), "%s/items.jsonl", fx.dir);
    snprintf(evals, sizeof(evals), "%s/exact.json", fx.dir);
    assert_int_equal(
        weft_cmd((const char *const[]){"dataset", "create", "tickets", "--file", items, NULL}), 0);
    assert_int_equal(weft_cmd((const char *const[]){
                         "eval", EXAMPLES "/support_triage/workflow.json", "--dataset", "tickets",
                         "--name", "mcp-before", "--evaluators", evals, "-q", NULL}),
                     0);
    assert_int_equal(weft_cmd((const char *const[]){
                         "eval", EXAMPLES "/support_triage/workflow_fixed.json", "--dataset",
                         "tickets", "--name", "mcp-exp", "--evaluators", evals, "-q", NULL}),
                     0);
}

/* Datasets made after the runs (they start none): "failures", version 1 the failed run of
 * always-fails (with its failing step), version 2 that and the three tickets of a file; "big",
 * 80 items of 2,000 bytes each, more than a server capped at 64 KiB answers at once. */
static void
make_datasets(void)
{
    char items[700];
    char big[700];
    FILE *f = NULL;

    snprintf(items, sizeof(items), "%s/items.jsonl", fx.dir);
    assert_int_equal(weft_cmd((const char *const[]){"dataset", "create", "failures", "--from-runs",
                                                    "--workflow", "always-fails", NULL}),
                     0);
    assert_int_equal(
        weft_cmd((const char *const[]){"dataset", "add", "failures", "--file", items, NULL}), 0);
    snprintf(big, sizeof(big), "%s/big.jsonl", fx.dir);
    f = fopen(big, "w");
    assert_non_null(f);
    for (int i = 0; i < 80; i++) {
        fprintf(f, "{\"input\": \"%04d %01996d\"}\n", i, 0);
    }
    assert_int_equal(fclose(f), 0);
    assert_int_equal(
        weft_cmd((const char *const[]){"dataset", "create", "big", "--file", big, NULL}), 0);
}

static struct weft__mcp_client *
start_client(const char *name,
             char **argv,
             size_t argc,
             const char *url,
             char **headers,
             size_t header_count)
{
    struct weft__mcp_server_config cfg;
    struct weft__mcp_client *c = NULL;
    char *env[] = {fx.home_env};
    char err[512] = "";
    weft_err rc = WEFT_OK;

    memset(&cfg, 0, sizeof(cfg));
    cfg.name = (char *)name;
    cfg.argv = argv;
    cfg.argc = argc;
    cfg.env = argv != NULL ? env : NULL;
    cfg.env_count = argv != NULL ? 1 : 0;
    cfg.url = (char *)url;
    cfg.headers = headers;
    cfg.header_count = header_count;
    cfg.init_timeout_ms = 15000;
    cfg.timeout_ms = 60000;
    rc = weft__mcp_client_new(&cfg, NULL, &c, err, sizeof(err));
    if (rc != WEFT_OK && url == NULL) {
        fail_msg("weft mcp serve did not start: %s (%s)", err, weft_strerror(rc));
    }
    return c;
}

/* Call @p tool and return its structuredContent (owned), failing on isError. */
static json_t *
call_ok(struct weft__mcp_client *c, const char *tool, json_t *args)
{
    struct weft__mcp_call_result r;
    json_t *out = NULL;

    assert_weft_ok(weft__mcp_client_call(c, tool, args, NULL, 0, &r));
    json_decref(args);
    if (r.is_error) {
        fail_msg("%s failed: %s: %s", tool, r.error_type, r.text != NULL ? r.text : "");
    }
    assert_non_null(r.structured);
    out = json_incref(r.structured);
    /* The text content carries the same JSON. */
    {
        json_t *from_text = json_loads(r.text, 0, NULL);

        assert_non_null(from_text);
        assert_true(json_equal(from_text, out));
        json_decref(from_text);
    }
    weft__mcp_call_result_cleanup(&r);
    return out;
}

/* Call @p tool expecting a failure; return its text (static) and error type. */
static const char *
call_fail(struct weft__mcp_client *c, const char *tool, json_t *args, char *error_type, size_t len)
{
    static char text[1024];
    struct weft__mcp_call_result r;

    assert_weft_ok(weft__mcp_client_call(c, tool, args, NULL, 0, &r));
    json_decref(args);
    assert_true(r.is_error);
    snprintf(error_type, len, "%s", r.error_type);
    snprintf(text, sizeof(text), "%s", r.text != NULL ? r.text : "");
    weft__mcp_call_result_cleanup(&r);
    return text;
}

static const json_t *
run_named(const json_t *runs, const char *workflow)
{
    size_t i = 0;
    const json_t *r = NULL;

    json_array_foreach(runs, i, r)
    {
        const char *w = json_string_value(json_object_get(r, "workflow"));

        if (w != NULL && strcmp(w, workflow) == 0) {
            return r;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Fixture: the store, and one stdio server                                                   */

/* The workflows the fixture runs, in fx.dir, and start_run's in fx.wf_dir. */
static void
write_workflows(void)
{
    char path[700];
    char text[800];

    /* A workflow that fails: one command step writing to stdout and stderr, exiting 4; the same
     * under another name for the run that is not traced. */
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", fx.dir, i == 0 ? "untraced.json" : "fail.json");
        snprintf(text, sizeof(text),
                 "{\"name\": \"%s\",\n"
                 " \"models\": {\"scripted\": {\"provider\": \"scripted\", \"model\": \"m\",\n"
                 "   \"script\": \"script.json\"}},\n"
                 " \"agents\": [{\"name\": \"reporter\", \"instructions\": \"Report.\"}],\n"
                 " \"plan\": [{\"id\": \"boom\", \"executor\": \"command\", \"task\": \"Fail\",\n"
                 "   \"argv\": [\"sh\", \"-c\", \"echo partial; echo 'disk full' >&2; exit 4\"],\n"
                 "   \"timeout_s\": 5}]}\n",
                 i == 0 ? "fails-untraced" : "always-fails");
        write_file(path, text);
    }
    snprintf(path, sizeof(path), "%s/script.json", fx.dir);
    write_file(path, "{\"version\": 1, \"responses\": {}}\n");
    /* A workflow whose token budget (100) runs out at its second call (70 tokens each). */
    snprintf(path, sizeof(path), "%s/budget_script.json", fx.dir);
    write_file(path, "{\"responses\": {\"w\": {\"act\": [{\"content\": \"first part\", \"usage\":"
                     " {\"input_tokens\": 40, \"output_tokens\": 30}}, {\"content\": \"second "
                     "part\", \"usage\": {\"input_tokens\": 40, \"output_tokens\": 30}}]}}}\n");
    snprintf(path, sizeof(path), "%s/budget.json", fx.dir);
    write_file(path, "{\"name\": \"budgeted\", \"models\": {\"m\": {\"provider\": \"scripted\", "
                     "\"script\": \"budget_script.json\"}}, \"agents\": [{\"name\": \"w\"}], "
                     "\"supervisor\": {\"max_tokens\": 100}, \"plan\": [{\"id\": \"a\", \"agent\": "
                     "\"w\", \"task\": \"A\"}, {\"id\": \"b\", \"agent\": \"w\", \"task\": \"B\", "
                     "\"depends_on\": [\"a\"]}, {\"id\": \"c\", \"agent\": \"w\", \"task\": \"C\", "
                     "\"depends_on\": [\"b\"]}]}\n");
    /* start_run's workflow: swarm_reflection and its script, copied into the allowed dir. */
    snprintf(path, sizeof(path), "%s/swarm.json", fx.wf_dir);
    copy_file(EXAMPLES "/swarm_reflection/workflow.json", path);
    snprintf(path, sizeof(path), "%s/script.json", fx.wf_dir);
    copy_file(EXAMPLES "/swarm_reflection/script.json", path);
}

static int
group_setup(void **state)
{
    char path[700];
    char *argv[] = {WEFT, "mcp", "serve", "--workflows", fx.wf_dir, NULL};

    (void)state;
    memset(&fx, 0, sizeof(fx));
    fx.dir = weft_test_mkdtemp("weft-mcp-serve-");
    assert_non_null(fx.dir);
    snprintf(fx.home, sizeof(fx.home), "%s/home", fx.dir);
    snprintf(fx.home_env, sizeof(fx.home_env), "WEFT_HOME=%s", fx.home);
    snprintf(fx.wf_dir, sizeof(fx.wf_dir), "%s/workflows", fx.dir);
    assert_int_equal(mkdir(fx.wf_dir, 0700), 0);
    write_workflows();

    make_experiment();
    assert_int_equal(weft_run_example(EXAMPLES "/correction/workflow.json"), 0);
    assert_int_equal(weft_run_example(EXAMPLES "/swarm_reflection/workflow.json"), 0);
    assert_int_equal(weft_run_example(EXAMPLES "/stuck_loops/handoff.json"), 3); /* stuck */
    snprintf(path, sizeof(path), "%s/budget.json", fx.dir);
    assert_int_equal(weft_run_example(path), 1); /* budget_exhausted */
    snprintf(path, sizeof(path), "%s/untraced.json", fx.dir);
    assert_int_equal(weft_run_env(path, "OTEL_SDK_DISABLED=true"), 1); /* failed, no trace */
    snprintf(path, sizeof(path), "%s/fail.json", fx.dir);
    assert_int_equal(weft_run_example(path), 1); /* failed: the last run */
    make_datasets();

    fx.client = start_client("weft", argv, 5, NULL, NULL, 0);
    return fx.client != NULL ? 0 : -1;
}

static int
group_teardown(void **state)
{
    (void)state;
    weft__mcp_client_free(fx.client); /* closes stdin: the server ends at EOF */
    if (fx.dir != NULL) {
        weft_test_rm_rf(fx.dir);
        free(fx.dir);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* stdio                                                                                      */

static void
test_stdio_initialize_negotiates_newest(void **state)
{
    char *instructions = weft__mcp_client_instructions(fx.client);

    (void)state;
    assert_string_equal(weft__mcp_client_protocol(fx.client), "2025-11-25");
    assert_string_equal(weft__mcp_client_server_name(fx.client), "weft");
    assert_non_null(instructions);
    assert_non_null(strstr(instructions, "why_failed"));
    weft_mcp_text_free(instructions);
    assert_weft_ok(weft__mcp_client_ping(fx.client, 5000));
}

static void
test_stdio_tools_listed_with_schemas(void **state)
{
    static const char *const names[] = {
        "list_runs",    "show_run",         "get_trace",      "get_span",
        "search_spans", "why_failed",       "start_run",      "list_datasets",
        "show_dataset", "list_experiments", "get_experiment", "compare_experiments"};
    struct weft__mcp_tool *tools = NULL;
    size_t count = 0;
    uint64_t version = 0;

    (void)state;
    assert_weft_ok(weft__mcp_client_tools(fx.client, &tools, &count, &version));
    assert_int_equal(count, sizeof(names) / sizeof(names[0]));
    for (size_t i = 0; i < count; i++) {
        assert_string_equal(tools[i].name, names[i]);
        assert_non_null(tools[i].description);
        assert_string_equal(json_string_value(json_object_get(tools[i].input_schema, "type")),
                            "object");
        assert_non_null(tools[i].output_schema);
        assert_string_equal(json_string_value(json_object_get(tools[i].output_schema, "type")),
                            "object");
    }
    weft__mcp_tools_free(tools, count);
}

static void
test_stdio_list_runs_has_statuses(void **state)
{
    json_t *out = call_ok(fx.client, "list_runs", json_object());
    const json_t *runs = json_object_get(out, "runs");
    const json_t *failed = run_named(runs, "always-fails");
    json_t *only_failed = NULL;

    (void)state;
    assert_true(json_array_size(runs) >= 3);
    assert_non_null(failed);
    assert_string_equal(json_string_value(json_object_get(failed, "status")), "failed");
    assert_string_equal(
        json_string_value(json_object_get(run_named(runs, "adaptive-correction"), "status")),
        "completed");
    assert_string_equal(
        json_string_value(json_object_get(run_named(runs, "swarm-reflection"), "status")),
        "completed");
    snprintf(fx.failed_run, sizeof(fx.failed_run), "%s",
             json_string_value(json_object_get(failed, "run_id")));
    assert_string_equal(
        json_string_value(json_object_get(run_named(runs, "stuck-handoff"), "status")), "stuck");
    assert_string_equal(json_string_value(json_object_get(run_named(runs, "budgeted"), "status")),
                        "budget_exhausted");
    snprintf(fx.stuck_run, sizeof(fx.stuck_run), "%s",
             json_string_value(json_object_get(run_named(runs, "stuck-handoff"), "run_id")));
    snprintf(fx.budget_run, sizeof(fx.budget_run), "%s",
             json_string_value(json_object_get(run_named(runs, "budgeted"), "run_id")));
    snprintf(fx.untraced_run, sizeof(fx.untraced_run), "%s",
             json_string_value(json_object_get(run_named(runs, "fails-untraced"), "run_id")));
    json_decref(out);

    /* The failing workflow, its untraced twin and mcp-before's two refunds (make_experiment()). */
    only_failed =
        call_ok(fx.client, "list_runs", json_pack("{s:s, s:i}", "status", "failed", "limit", 10));
    assert_int_equal(json_array_size(json_object_get(only_failed, "runs")), 4);
    assert_non_null(run_named(json_object_get(only_failed, "runs"), "fails-untraced"));
    assert_non_null(run_named(json_object_get(only_failed, "runs"), "always-fails"));
    assert_non_null(run_named(json_object_get(only_failed, "runs"), "support-triage"));
    json_decref(only_failed);
}

static void
test_stdio_show_run_last_has_plan(void **state)
{
    json_t *out = call_ok(fx.client, "show_run", json_pack("{s:s}", "run_id", "last"));
    const json_t *plan = json_object_get(out, "plan");
    const json_t *failed = json_object_get(out, "failed_steps");

    (void)state;
    /* The failing workflow ran last. */
    assert_string_equal(json_string_value(json_object_get(out, "status")), "failed");
    assert_int_equal(json_array_size(plan), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(plan, 0), "id")), "boom");
    assert_int_equal(json_array_size(failed), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(failed, 0), "error_type")),
                        "exit_status");
    assert_int_equal(strlen(json_string_value(json_object_get(out, "trace_id"))), 32);
    json_decref(out);
}

/* @p why's one failed step: boom, exit status 4, with the tails of its stderr and stdout. */
static void
assert_exit_4(const json_t *why)
{
    const json_t *step = json_array_get(json_object_get(why, "failed_steps"), 0);
    const json_t *error = json_object_get(step, "error");

    assert_int_equal(json_array_size(json_object_get(why, "failed_steps")), 1);
    assert_string_equal(json_string_value(json_object_get(step, "id")), "boom");
    assert_string_equal(json_string_value(json_object_get(step, "error_type")), "exit_status");
    assert_int_equal(json_integer_value(json_object_get(error, "exit_code")), 4);
    assert_string_equal(json_string_value(json_object_get(error, "stderr_tail")), "disk full\n");
    assert_string_equal(json_string_value(json_object_get(error, "stdout_tail")), "partial\n");
}

/* The entry of @p list whose @p key is @p value, or NULL. */
static const json_t *
entry_named(const json_t *list, const char *key, const char *value)
{
    size_t i = 0;
    const json_t *e = NULL;

    json_array_foreach(list, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key));

        if (v != NULL && strcmp(v, value) == 0) {
            return e;
        }
    }
    return NULL;
}

/* The datasets and experiments an agent reads to close the loop (make_experiment()). */
static void
test_stdio_datasets_and_experiments(void **state)
{
    json_t *out = call_ok(fx.client, "list_datasets", json_object());
    const json_t *d = entry_named(json_object_get(out, "datasets"), "name", "tickets");
    const json_t *items = NULL;
    const json_t *e = NULL;
    char type[64];
    const char *text = NULL;

    (void)state;
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 3); /* +failures, big */
    assert_non_null(d);
    assert_int_equal(json_integer_value(json_object_get(d, "items")), 3);
    assert_int_equal(json_integer_value(json_object_get(d, "version")), 1);
    assert_int_equal(strlen(json_string_value(json_object_get(d, "created"))), 24); /* RFC 3339 */
    json_decref(out);

    out = call_ok(fx.client, "list_experiments", json_pack("{s:s}", "dataset", "tickets"));
    e = json_array_get(json_object_get(out, "experiments"), 0); /* the newest */
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 2);
    assert_string_equal(json_string_value(json_object_get(e, "name")), "mcp-exp");
    assert_string_equal(json_string_value(json_object_get(e, "status")), "completed");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(out, "experiments"), 1), "name")),
                        "mcp-before");
    json_decref(out);
    out = call_ok(fx.client, "list_experiments", json_pack("{s:s}", "dataset", "other"));
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 0);
    json_decref(out);

    /* By name; the failed item first, with its evaluator's score and its run. */
    out = call_ok(fx.client, "get_experiment", json_pack("{s:s}", "experiment", "mcp-exp"));
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 3);
    assert_false(json_is_true(json_object_get(out, "truncated")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "status")),
                        "failed");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "status")),
                        "passed");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(items, 0), "scores"), 0), "evaluator")),
        "reply");
    assert_non_null(json_string_value(json_object_get(json_array_get(items, 0), "run_id")));
    json_decref(out);

    text = call_fail(fx.client, "get_experiment", json_pack("{s:s}", "experiment", "nope"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "no experiment nope: list_experiments shows them"));
}

/* show_dataset: a version from runs (the run, its trace and failing step) and the latest with
 * the file's items too, failing_only, and the names it refuses. */
static void
test_stdio_show_dataset(void **state)
{
    json_t *out = call_ok(fx.client, "show_dataset", json_pack("{s:s}", "dataset", "failures@1"));
    const json_t *items = json_object_get(out, "items");
    const json_t *it = json_array_get(items, 0);
    char type[64];
    char run_id[64];
    const char *text = NULL;

    (void)state;
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "dataset"), "name")),
                        "failures");
    assert_int_equal(json_integer_value(json_object_get(out, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(out, "latest_version")), 2);
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 1);
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(it, "fail_step")), "boom");
    assert_int_equal(strlen(json_string_value(json_object_get(it, "trace_id"))), 32);
    snprintf(run_id, sizeof(run_id), "%s", json_string_value(json_object_get(it, "run_id")));
    json_decref(out);
    /* The item's run is the always-fails run why_failed explains. */
    out = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", run_id));
    assert_exit_4(out);
    json_decref(out);

    /* The latest: the run's item and the file's three, in the order they were added. */
    out = call_ok(fx.client, "show_dataset", json_pack("{s:s}", "dataset", "failures"));
    items = json_object_get(out, "items");
    assert_int_equal(json_integer_value(json_object_get(out, "version")), 2);
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 4);
    assert_int_equal(json_array_size(items), 4);
    assert_false(json_is_true(json_object_get(out, "truncated")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "run_id")),
                        run_id);
    it = json_array_get(items, 1);
    assert_string_equal(json_string_value(json_object_get(it, "input")), "Please refund my order");
    assert_string_equal(json_string_value(json_object_get(it, "expected")), "Refunded.");
    assert_true(json_is_null(json_object_get(it, "run_id")));
    assert_true(json_is_null(json_object_get(it, "fail_step")));
    assert_int_equal(json_integer_value(json_object_get(it, "added_version")), 2);
    json_decref(out);

    /* Only the items with a failing step. */
    out = call_ok(fx.client, "show_dataset",
                  json_pack("{s:s, s:b}", "dataset", "failures", "failing_only", 1));
    items = json_object_get(out, "items");
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 1);
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "run_id")),
                        run_id);
    json_decref(out);

    text = call_fail(fx.client, "show_dataset", json_pack("{s:s}", "dataset", "nope"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "no dataset nope: list_datasets shows them"));
    text = call_fail(fx.client, "show_dataset", json_pack("{s:s}", "dataset", "failures@9"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "dataset failures has no version 9: list_datasets"));
    text = call_fail(fx.client, "show_dataset", json_pack("{s:s}", "dataset", "failures@x"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "expected NAME or NAME@VERSION"));
    text = call_fail(fx.client, "show_dataset",
                     json_pack("{s:s, s:s}", "dataset", "failures", "failing_only", "yes"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "failing_only: expected true or false"));
}

/* compare_experiments: mcp-before (the router without a refund queue) against mcp-exp (fixed):
 * the fixed item first with both runs, and A's run explained by why_failed. */
static void
test_stdio_compare_experiments(void **state)
{
    json_t *out = call_ok(fx.client, "compare_experiments",
                          json_pack("{s:s, s:s}", "a", "mcp-before", "b", "mcp-exp"));
    const json_t *counts = json_object_get(out, "counts");
    const json_t *items = json_object_get(out, "items");
    const json_t *first = json_array_get(items, 0);
    const json_t *a = json_object_get(out, "a");
    const json_t *b = json_object_get(out, "b");
    char type[64];
    char a_run[64];
    const char *text = NULL;
    json_t *why = NULL;

    (void)state;
    assert_string_equal(json_string_value(json_object_get(a, "name")), "mcp-before");
    assert_string_equal(json_string_value(json_object_get(b, "name")), "mcp-exp");
    assert_int_equal(strlen(json_string_value(json_object_get(a, "started"))), 24);
    assert_int_equal(json_integer_value(json_object_get(counts, "fixed")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "broken")), 0);
    assert_int_equal(json_integer_value(json_object_get(counts, "unchanged")), 2);
    assert_null(json_object_get(counts, "added")); /* the same dataset version */
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 3);
    assert_int_equal(json_array_size(items), 3);
    assert_false(json_is_true(json_object_get(out, "truncated")));
    /* B's pass rate less A's, from their summaries. */
    assert_true(
        fabs(json_number_value(json_object_get(json_object_get(out, "deltas"), "pass_rate")) -
             (json_number_value(json_object_get(json_object_get(b, "summary"), "pass_rate")) -
              json_number_value(json_object_get(json_object_get(a, "summary"), "pass_rate")))) <
        1e-9);
    assert_string_equal(json_string_value(json_object_get(first, "change")), "fixed");
    assert_string_equal(json_string_value(json_object_get(first, "b_status")), "passed");
    assert_string_not_equal(json_string_value(json_object_get(first, "a_status")), "passed");
    assert_non_null(json_string_value(json_object_get(first, "b_run_id")));
    assert_string_not_equal(json_string_value(json_object_get(first, "a_run_id")),
                            json_string_value(json_object_get(first, "b_run_id")));
    for (size_t i = 1; i < 3; i++) {
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, i), "change")),
                            "unchanged");
    }
    snprintf(a_run, sizeof(a_run), "%s", json_string_value(json_object_get(first, "a_run_id")));
    json_decref(out);

    /* The loop's first step: why A's run of the fixed item failed (the router's step). */
    why = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", a_run));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(why, "failed_steps"), 0), "id")),
                        "route");
    json_decref(why);

    text = call_fail(fx.client, "compare_experiments",
                     json_pack("{s:s, s:s}", "a", "mcp-before", "b", "nope"), type, sizeof(type));
    assert_non_null(strstr(text, "no experiment nope: list_experiments shows them"));
    text = call_fail(fx.client, "compare_experiments", json_pack("{s:s}", "a", "mcp-before"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "b"));
}

static void
test_stdio_why_failed_reaches_error_span(void **state)
{
    json_t *out = NULL;
    const json_t *path = NULL;
    const json_t *span = NULL;

    (void)state;
    assert_true(fx.failed_run[0] != '\0');
    out = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", fx.failed_run));
    path = json_object_get(out, "path");
    span = json_object_get(out, "failed_span");
    assert_true(json_array_size(path) >= 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(path, 0), "name")),
                        "invoke_workflow always-fails");
    assert_string_equal(json_string_value(json_object_get(span, "name")), "execute_tool command");
    assert_string_equal(json_string_value(json_object_get(span, "status")), "ERROR");
    assert_string_equal(json_string_value(json_object_get(span, "error_type")), "exit_status");
    assert_true(json_equal(json_array_get(path, json_array_size(path) - 1), span));
    assert_non_null(strstr(json_string_value(json_object_get(out, "summary")), "exit_status"));
    snprintf(fx.failed_span, sizeof(fx.failed_span), "%s",
             json_string_value(json_object_get(span, "span_id")));
    /* The step's stored error: its exit status and output tails; the summary names it. */
    assert_exit_4(out);
    assert_non_null(strstr(json_string_value(json_object_get(out, "summary")),
                           "; cause: step boom exited with status 4"));
    assert_true(json_is_true(json_object_get(out, "trace_read")));
    assert_int_equal(json_array_size(json_object_get(out, "exceptions")), 0);
    assert_int_equal(json_array_size(json_object_get(out, "stuck_loops")), 0);
    assert_true(json_is_null(json_object_get(out, "budget")));
    assert_true(json_is_null(json_object_get(out, "last_answer"))); /* no model call */
    assert_null(json_object_get(out, "trace_error"));
    assert_null(json_object_get(out, "exchanges_error"));
    json_decref(out);
}

/* why_failed's causes beyond the failing span, as the explorer's why panel has them: the stuck
 * loop with its repetitions, the budget that ran out with the last answer before it, and a
 * run that was not traced answered from what the state database kept. */
static void
test_stdio_why_failed_names_causes(void **state)
{
    json_t *out = NULL;
    const json_t *loop = NULL;
    const json_t *reps = NULL;
    const json_t *budget = NULL;

    (void)state;
    assert_true(fx.stuck_run[0] != '\0' && fx.budget_run[0] != '\0');
    out = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", fx.stuck_run));
    assert_string_equal(json_string_value(json_object_get(out, "status")), "stuck");
    assert_int_equal(json_array_size(json_object_get(out, "stuck_loops")), 1);
    loop = json_array_get(json_object_get(out, "stuck_loops"), 0);
    reps = json_object_get(loop, "repetitions");
    assert_string_equal(json_string_value(json_object_get(loop, "kind")), "handoff");
    assert_int_equal(json_array_size(reps), 3);
    for (size_t i = 0; i < json_array_size(reps); i++) {
        const char *id = json_string_value(json_object_get(json_array_get(reps, i), "span_id"));

        assert_non_null(id);
        assert_int_equal(strlen(id), 16);
    }
    /* The last repetition is where the watchdog found the loop. */
    assert_string_equal(json_string_value(json_object_get(json_array_get(reps, 2), "span_id")),
                        json_string_value(json_object_get(loop, "span_id")));
    assert_true(json_is_null(json_object_get(out, "budget")));
    assert_non_null(strstr(json_string_value(json_object_get(out, "summary")),
                           "; cause: a stuck handoff loop (3 repetitions)"));
    json_decref(out);

    out = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", fx.budget_run));
    budget = json_object_get(out, "budget");
    assert_string_equal(json_string_value(json_object_get(budget, "name")), "max_tokens");
    assert_int_equal(json_integer_value(json_object_get(budget, "limit")), 100);
    assert_int_equal(json_integer_value(json_object_get(budget, "used")), 140);
    assert_string_equal(json_string_value(json_object_get(budget, "unit")), "tokens");
    /* The answer that crossed the budget, from the stored exchange (content was not captured). */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "last_answer"), "text")),
        "second part");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "last_answer"), "source")),
        "exchange");
    assert_int_equal(json_array_size(json_object_get(out, "stuck_loops")), 0);
    assert_non_null(strstr(json_string_value(json_object_get(out, "summary")),
                           "; cause: the max_tokens budget ran out (limit 100, used 140 tokens)"));
    json_decref(out);
}

static void
test_stdio_why_failed_untraced_run(void **state)
{
    json_t *out = NULL;

    (void)state;
    assert_true(fx.untraced_run[0] != '\0');
    out = call_ok(fx.client, "why_failed", json_pack("{s:s}", "run_id", fx.untraced_run));
    assert_string_equal(json_string_value(json_object_get(out, "run_id")), fx.untraced_run);
    assert_string_equal(json_string_value(json_object_get(out, "status")), "failed");
    assert_true(json_is_null(json_object_get(out, "trace_id")));
    assert_false(json_is_true(json_object_get(out, "trace_read")));
    assert_true(json_is_array(json_object_get(out, "path")));
    assert_int_equal(json_array_size(json_object_get(out, "path")), 0);
    assert_true(json_is_null(json_object_get(out, "failed_span")));
    assert_int_equal(json_integer_value(json_object_get(out, "error_span_count")), 0);
    assert_exit_4(out);
    assert_true(json_is_null(json_object_get(out, "budget")));
    assert_null(json_object_get(out, "trace_error")); /* not traced: nothing failed to read */
    assert_non_null(strstr(json_string_value(json_object_get(out, "summary")),
                           "; it was not traced; cause: step boom exited with status 4"));
    json_decref(out);
}

static void
test_stdio_trace_span_and_search(void **state)
{
    json_t *trace = NULL;
    json_t *span = NULL;
    json_t *found = NULL;
    const json_t *m = NULL;
    size_t i = 0;
    bool is_found = false;

    (void)state;
    assert_true(fx.failed_span[0] != '\0');
    /* A run id is accepted as a trace reference. */
    trace = call_ok(fx.client, "get_trace", json_pack("{s:s}", "trace_id", fx.failed_run));
    assert_int_equal(json_integer_value(json_object_get(trace, "span_count")),
                     json_array_size(json_object_get(trace, "spans")));
    assert_true(json_integer_value(json_object_get(trace, "span_count")) >= 3);
    assert_true(json_integer_value(json_object_get(trace, "error_count")) >= 2);
    assert_false(json_is_true(json_object_get(trace, "truncated")));

    span = call_ok(fx.client, "get_span",
                   json_pack("{s:s, s:s}", "trace_id", fx.failed_run, "span_id", fx.failed_span));
    assert_string_equal(json_string_value(json_object_get(span, "name")), "execute_tool command");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(span, "attributes"), "weft.step.id")),
        "boom");
    assert_true(json_is_array(json_object_get(span, "events")));
    assert_true(json_is_array(json_object_get(span, "links")));

    found = call_ok(fx.client, "search_spans",
                    json_pack("{s:s, s:s}", "key", "weft.step.status", "value", "failed"));
    json_array_foreach(json_object_get(found, "matches"), i, m)
    {
        is_found |= strcmp(json_string_value(json_object_get(m, "span_id")), fx.failed_span) == 0;
        assert_string_equal(json_string_value(json_object_get(m, "value")), "failed");
    }
    assert_true(is_found);
    json_decref(trace);
    json_decref(span);
    json_decref(found);
}

static void
test_stdio_tool_errors(void **state)
{
    char type[48];
    const char *text = NULL;

    (void)state;
    text = call_fail(fx.client, "show_run", json_pack("{s:s}", "run_id", "ffffffffff"), type,
                     sizeof(type));
    assert_string_equal(type, "tool_error");
    assert_non_null(strstr(text, "no run matches"));
    text = call_fail(fx.client, "show_run", json_object(), type, sizeof(type));
    assert_string_equal(type, "tool_error");
    assert_non_null(strstr(text, "run_id"));
    text = call_fail(fx.client, "list_runs", json_pack("{s:i}", "limit", 0), type, sizeof(type));
    assert_string_equal(type, "tool_error");
    /* An unknown tool is a protocol error: -32602, as the MCP specification shows it. */
    call_fail(fx.client, "no_such_tool", json_object(), type, sizeof(type));
    assert_string_equal(type, "jsonrpc_-32602");
}

static void
test_stdio_start_run_refuses_escapes(void **state)
{
    char type[48];
    const char *text = NULL;

    (void)state;
    /* ../fail.json exists, but outside --workflows. */
    text = call_fail(fx.client, "start_run", json_pack("{s:s}", "workflow", "../fail.json"), type,
                     sizeof(type));
    assert_string_equal(type, "tool_error");
    assert_non_null(strstr(text, "outside"));
    text = call_fail(fx.client, "start_run", json_pack("{s:s}", "workflow", "/etc/passwd"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "outside"));
    text = call_fail(fx.client, "start_run", json_pack("{s:s}", "workflow", "missing.json"), type,
                     sizeof(type));
    assert_non_null(strstr(text, "no workflow file"));
}

static void
test_stdio_start_run_then_listed(void **state)
{
    json_t *run = NULL;
    json_t *list = NULL;
    json_t *trace = NULL;
    const json_t *r = NULL;
    const char *run_id = NULL;
    size_t i = 0;
    bool is_listed = false;

    (void)state;
    run = call_ok(fx.client, "start_run",
                  json_pack("{s:s, s:s}", "workflow", "swarm.json", "input", "a rate limiter"));
    assert_string_equal(json_string_value(json_object_get(run, "status")), "completed");
    run_id = json_string_value(json_object_get(run, "run_id"));
    assert_non_null(run_id);
    assert_true(json_is_string(json_object_get(run, "trace_id")));

    list = call_ok(fx.client, "list_runs", json_pack("{s:i}", "limit", 50));
    json_array_foreach(json_object_get(list, "runs"), i, r)
    {
        is_listed |= strcmp(json_string_value(json_object_get(r, "run_id")), run_id) == 0;
    }
    assert_true(is_listed);
    /* Its spans reached the store before the tool answered. */
    trace = call_ok(
        fx.client, "get_trace",
        json_pack("{s:s}", "trace_id", json_string_value(json_object_get(run, "trace_id"))));
    assert_true(json_integer_value(json_object_get(trace, "span_count")) > 3);
    json_decref(trace);
    json_decref(list);
    json_decref(run);
}

/* stdout carries only protocol messages; logs (WEFT_DEBUG=1) go to stderr; EOF ends it. */
static void
test_stdio_stdout_only_protocol_and_eof_ends(void **state)
{
    char script[4096];
    char out_path[600];
    char err_path[600];
    char quoted[700];
    char quoted_out[700];
    char quoted_err[700];
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    const char *env[] = {fx.home_env, "WEFT_DEBUG=1", NULL};
    FILE *f = NULL;
    char line[65536];
    int lines = 0;

    (void)state;
    snprintf(out_path, sizeof(out_path), "%s/stdio.out", fx.dir);
    snprintf(err_path, sizeof(err_path), "%s/stdio.err", fx.dir);
    assert_non_null(weft_test_shell_quote(WEFT, quoted, sizeof(quoted)));
    assert_non_null(weft_test_shell_quote(out_path, quoted_out, sizeof(quoted_out)));
    assert_non_null(weft_test_shell_quote(err_path, quoted_err, sizeof(quoted_err)));
    snprintf(script, sizeof(script),
             "printf '%%s\\n' "
             "'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{},\"clientInfo\":{\"name\":"
             "\"t\",\"version\":\"1\"}}}' "
             "'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}' "
             "'{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"list_runs\",\"arguments\":{}}}' "
             "| %s mcp serve >%s 2>%s",
             quoted, quoted_out, quoted_err);
    assert_int_equal(weft_test_run(argv, env, fx.dir, NULL, 30000), 0);
    f = fopen(out_path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *msg = json_loads(line, 0, NULL);

        if (msg == NULL) {
            fail_msg("stdout holds a line that is not JSON: %.200s", line);
        }
        assert_string_equal(json_string_value(json_object_get(msg, "jsonrpc")), "2.0");
        if (lines == 0) {
            assert_string_equal(json_string_value(json_object_get(json_object_get(msg, "result"),
                                                                  "protocolVersion")),
                                "2025-03-26");
        }
        json_decref(msg);
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 2); /* the notification got no answer */
}

/* ---------------------------------------------------------------------------------------- */
/* The library entry point: JSON-RPC errors                                                   */

static json_t *
handle(struct weft_mcp_server *srv, const char *msg)
{
    char *response = NULL;
    json_t *j = NULL;

    assert_weft_ok(weft_mcp_server_handle(srv, msg, strlen(msg), &response));
    if (response == NULL) {
        return NULL;
    }
    j = json_loads(response, 0, NULL);
    assert_non_null(j);
    weft_mcp_text_free(response);
    return j;
}

static void
expect_error(struct weft_mcp_server *srv, const char *msg, int code)
{
    json_t *j = handle(srv, msg);

    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")),
                     code);
    json_decref(j);
}

static void
test_handle_jsonrpc_errors(void **state)
{
    struct weft_mcp_server_options o = {0};
    struct weft_mcp_server *srv = NULL;
    char state_path[600];
    char db_path[600];
    json_t *j = NULL;
    char *big = NULL;
    char *response = NULL;

    (void)state;
    snprintf(state_path, sizeof(state_path), "%s/state.db", fx.home);
    snprintf(db_path, sizeof(db_path), "%s/weft.db", fx.home);
    o.state_path = state_path;
    o.db_path = db_path;
    o.workflows_dir = fx.wf_dir;
    o.max_message_bytes = 4096;
    assert_weft_ok(weft_mcp_server_new(&o, &srv));

    expect_error(srv, "{not json", -32700);
    expect_error(srv, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600);
    expect_error(srv, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600);
    expect_error(srv, "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", -32600);
    expect_error(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", -32601);
    expect_error(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}",
                 -32602);
    expect_error(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}",
                 -32602);
    expect_error(srv,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                 "\"cursor\":\"page2\"}}",
                 -32602);
    expect_error(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                 -32602);
    /* Unknown notifications and responses get no answer. */
    assert_null(handle(srv, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}"));
    assert_null(handle(srv, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}"));
    /* Older revisions are answered with themselves, unknown ones with the newest. */
    j = handle(srv, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-06-18\"}}");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "result"), "protocolVersion")),
        "2025-06-18");
    assert_string_equal(json_string_value(json_object_get(j, "id")), "a");
    json_decref(j);
    j = handle(srv, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"1999-01-01\"}}");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "result"), "protocolVersion")),
        "2025-11-25");
    assert_false(json_is_true(json_object_get(
        json_object_get(json_object_get(json_object_get(j, "result"), "capabilities"), "tools"),
        "listChanged")));
    json_decref(j);
    /* A message over the cap. */
    big = calloc(1, 8192);
    assert_non_null(big);
    memset(big, ' ', 8190);
    assert_weft_ok(weft_mcp_server_handle(srv, big, 8190, &response));
    assert_non_null(strstr(response, "-32600"));
    weft_mcp_text_free(response);
    free(big);
    weft_mcp_server_free(srv);
}

/* A server capped at 64 KiB a result: show_dataset of "big" (80 items of 2 KiB) lists what fits
 * and says it cut; the eval tools are read-only. */
static void
test_handle_results_within_cap(void **state)
{
    struct weft_mcp_server_options o = {0};
    struct weft_mcp_server *srv = NULL;
    char state_path[600];
    char db_path[600];
    json_t *j = NULL;
    const json_t *out = NULL;
    const json_t *tools = NULL;
    size_t listed = 0;
    size_t seen = 0;
    char *text = NULL;

    (void)state;
    snprintf(state_path, sizeof(state_path), "%s/state.db", fx.home);
    snprintf(db_path, sizeof(db_path), "%s/weft.db", fx.home);
    o.state_path = state_path;
    o.db_path = db_path;
    o.workflows_dir = fx.wf_dir;
    o.max_result_bytes = 64 * 1024;
    assert_weft_ok(weft_mcp_server_new(&o, &srv));

    j = handle(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                    "\"name\":\"show_dataset\",\"arguments\":{\"dataset\":\"big\"}}}");
    out = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_non_null(out);
    listed = json_array_size(json_object_get(out, "items"));
    assert_int_equal(json_integer_value(json_object_get(out, "count")), 80);
    assert_true(json_is_true(json_object_get(out, "truncated")));
    assert_true(listed > 10 && listed < 80);
    /* The first ones, in order. */
    assert_memory_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(out, "items"), 0), "input")),
                        "0000 ", 5);
    text = json_dumps(out, JSON_COMPACT);
    assert_non_null(text);
    assert_true(strlen(text) <= 64 * 1024);
    free(text);
    json_decref(j);

    j = handle(srv, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    tools = json_object_get(json_object_get(j, "result"), "tools");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *t = json_array_get(tools, i);
        const char *name = json_string_value(json_object_get(t, "name"));

        if (strcmp(name, "show_dataset") == 0 || strcmp(name, "compare_experiments") == 0) {
            assert_true(
                json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint")));
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    json_decref(j);
    weft_mcp_server_free(srv);
}

/* ---------------------------------------------------------------------------------------- */
/* Streamable HTTP                                                                            */

static size_t
header_cb(char *buf, size_t size, size_t n, void *ud)
{
    char *sid = ud;
    size_t len = size * n;

    if (len > 16 && strncasecmp(buf, "Mcp-Session-Id:", 15) == 0) {
        size_t start = 15;
        size_t end = len;

        while (start < len && buf[start] == ' ') {
            start++;
        }
        while (end > start && (buf[end - 1] == '\r' || buf[end - 1] == '\n')) {
            end--;
        }
        snprintf(sid, 64, "%.*s", (int)(end - start), buf + start);
    }
    return len;
}

static size_t
discard_cb(char *buf, size_t size, size_t n, void *ud)
{
    (void)buf;
    (void)ud;
    return size * n;
}

/* One raw request from source address @p from (NULL: the kernel's choice), within
 * @p timeout_ms. @return the HTTP status (0 when it could not be made). */
static long
http_request_from(const char *from,
                  long timeout_ms,
                  const char *method,
                  const char *url,
                  const char *const *headers,
                  const char *body,
                  char *sid_out)
{
    CURL *curl = curl_easy_init();
    struct curl_slist *list = NULL;
    char sid[64] = "";
    long status = 0;

    assert_non_null(curl);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        list = curl_slist_append(list, headers[i]);
    }
    list = curl_slist_append(list, "Content-Type: application/json");
    list = curl_slist_append(list, "Accept: application/json, text/event-stream");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, sid);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_cb);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (from != NULL) {
        char iface[64];
        snprintf(iface, sizeof(iface), "host!%s", from);
        curl_easy_setopt(curl, CURLOPT_INTERFACE, iface);
    }
    if (body != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    }
    if (curl_easy_perform(curl) == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    }
    if (sid_out != NULL) {
        snprintf(sid_out, 64, "%s", sid);
    }
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    return status;
}

static long
http_request(const char *method,
             const char *url,
             const char *const *headers,
             const char *body,
             char *sid_out)
{
    return http_request_from(NULL, 30000, method, url, headers, body, sid_out);
}

#define INIT_BODY                                                                              \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":" \
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"
#define PING_BODY "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"

static void
test_http_session_origin_token(void **state)
{
    unsigned port = weft_test_free_port();
    char addr[64];
    char url[128];
    char log_path[600];
    char sid[64] = "";
    char sid_hdr[128];
    const char *argv[] = {WEFT, "mcp",         "serve",   "--http", "--addr",
                          addr, "--workflows", fx.wf_dir, NULL};
    const char *env[] = {fx.home_env, "WEFT_MCP_TOKEN=" TOKEN, NULL};
    char *client_headers[] = {"Authorization: Bearer " TOKEN};
    const char *auth[] = {"Authorization: Bearer " TOKEN, NULL};
    const char *wrong[] = {"Authorization: Bearer nope-nope-nope", NULL};
    const char *with_sid[] = {"Authorization: Bearer " TOKEN, sid_hdr, NULL};
    const char *evil[] = {"Authorization: Bearer " TOKEN, sid_hdr, "Origin: http://evil.example",
                          NULL};
    const char *local[] = {"Authorization: Bearer " TOKEN, sid_hdr, "Origin: http://localhost:6274",
                           NULL};
    const char *unknown[] = {"Authorization: Bearer " TOKEN, "Mcp-Session-Id: not-a-session", NULL};
    struct weft__mcp_client *c = NULL;
    json_t *out = NULL;
    long status = 0;
    pid_t pid = 0;

    (void)state;
    assert_true(port > 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", port);
    snprintf(log_path, sizeof(log_path), "%s/http.log", fx.dir);
    pid = weft_test_spawn(argv, env, fx.dir, log_path, true);
    assert_true(pid > 0);
    /* Wait for it to listen (at most 10 s). */
    for (int i = 0; i < 100 && status == 0; i++) {
        status = http_request("POST", url, auth, INIT_BODY, sid);
        if (status == 0) {
            weft_test_sleep_ms(100);
        }
    }
    if (status != 200) {
        char *tail = weft_test_log_tail(log_path, 2000);

        weft_test_kill_group(pid, 1000);
        fail_msg("weft mcp serve --http did not answer initialize (HTTP %ld): %s", status, tail);
    }
    assert_int_equal(strlen(sid), 36);
    snprintf(sid_hdr, sizeof(sid_hdr), "Mcp-Session-Id: %s", sid);

    assert_int_equal(http_request("POST", url, with_sid, PING_BODY, NULL), 200);
    assert_int_equal(http_request("POST", url, auth, PING_BODY, NULL), 400);    /* no session */
    assert_int_equal(http_request("POST", url, unknown, PING_BODY, NULL), 404); /* unknown */
    assert_int_equal(http_request("POST", url, evil, PING_BODY, NULL), 403);    /* Origin */
    assert_int_equal(http_request("POST", url, local, PING_BODY, NULL), 200);   /* loopback */
    assert_int_equal(http_request("POST", url, wrong, INIT_BODY, NULL), 401);   /* token */
    assert_int_equal(http_request("POST", url, NULL, INIT_BODY, NULL), 401);    /* no token */
    assert_int_equal(http_request("GET", url, with_sid, NULL, NULL), 405);      /* no stream */
    assert_int_equal(
        http_request("POST", url, with_sid, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", NULL), 202);
    assert_int_equal(http_request("DELETE", url, with_sid, NULL, NULL), 200);
    assert_int_equal(http_request("POST", url, with_sid, PING_BODY, NULL), 404); /* ended */

    /* weft's own client over HTTP. */
    c = start_client("weft_http", NULL, 0, url, client_headers, 1);
    if (c == NULL) {
        weft_test_kill_group(pid, 1000);
        fail_msg("the MCP client could not start over HTTP");
    }
    assert_string_equal(weft__mcp_client_protocol(c), "2025-11-25");
    assert_non_null(weft__mcp_client_session_id(c));
    out = call_ok(c, "why_failed", json_pack("{s:s}", "run_id", fx.failed_run));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "failed_span"), "error_type")),
        "exit_status");
    json_decref(out);
    weft__mcp_client_free(c);

    /* SIGTERM stops it cleanly. */
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(weft_test_wait(pid, 10000), 0);
}

/* Start `weft mcp serve --http --addr 127.0.0.1:PORT EXTRA...` with @p env and wait (at most
 * 15 s) until an initialize with @p headers answers 200. @return the pid; *url its /mcp URL. */
static pid_t
start_http(const char *const *extra,
           const char *const *env,
           const char *const *headers,
           char *url,
           size_t url_len,
           unsigned *port)
{
    char addr[64];
    char log_path[600];
    const char *argv[16] = {WEFT, "mcp", "serve", "--http", "--addr", addr};
    size_t n = 6;
    long status = 0;
    long deadline = weft_test_now_ms() + 15000;
    pid_t pid = 0;

    *port = weft_test_free_port();
    assert_true(*port > 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", *port);
    snprintf(url, url_len, "http://127.0.0.1:%u/mcp", *port);
    snprintf(log_path, sizeof(log_path), "%s/http-host.log", fx.dir);
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++) {
        argv[n++] = extra[i];
    }
    unlink(log_path);
    pid = weft_test_spawn(argv, env, fx.dir, log_path, true);
    assert_true(pid > 0);
    while (status != 200 && weft_test_now_ms() < deadline && !weft_test_has_exited(pid, NULL)) {
        status = http_request_from(NULL, 2000, "POST", url, headers, INIT_BODY, NULL);
        if (status != 200) {
            weft_test_sleep_ms(50);
        }
    }
    if (status != 200) {
        char *tail = weft_test_log_tail(log_path, 2000);

        weft_test_kill_group(pid, 1000);
        fail_msg("weft mcp serve --http did not answer initialize (HTTP %ld): %s", status, tail);
    }
    return pid;
}

/* The status code of @p text sent as is on a new connection to 127.0.0.1:@p port. */
static long
raw_status(unsigned port, const char *text)
{
    struct sockaddr_in sa;
    struct timeval tv = {15, 0};
    char buf[256] = "";
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    while (got < 12) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return strncmp(buf, "HTTP/1.", 7) == 0 ? strtol(buf + 9, NULL, 10) : 0;
}

/* On loopback a request for a foreign Host name is refused (421: a page using DNS rebinding
 * sends its own name there), even with the token and without an Origin; --allow-host serves
 * one more name; a token from --token-file works and is nowhere in the process's argv. */
static void
test_http_host_rule_and_token_file(void **state)
{
    char token_path[600];
    char loose_log[600];
    char cmdline[4096];
    char url[128];
    char local[64];
    char proc[64];
    unsigned port = 0;
    const char *extra[] = {"--workflows", fx.wf_dir, "--token-file", token_path, "--allow-host",
                           "weft.box",    NULL};
    const char *env[] = {fx.home_env, "WEFT_MCP_TOKEN*", NULL};
    const char *auth[] = {"Authorization: Bearer file-token-0123456789", NULL};
    const char *evil[] = {"Authorization: Bearer file-token-0123456789",
                          "Host: attacker.example:8765", NULL};
    const char *box[] = {"Authorization: Bearer file-token-0123456789", "Host: WEFT.box:8765",
                         NULL};
    const char *named[] = {"Authorization: Bearer file-token-0123456789", local, NULL};
    const char *no_auth[] = {"Host: attacker.example:8765", NULL};
    const char *loose_argv[] = {WEFT, "mcp", "serve", "--http", "--token-file", token_path, NULL};
    size_t got = 0;
    FILE *in = NULL;
    int fd = -1;
    pid_t pid = 0;

    (void)state;
    snprintf(token_path, sizeof(token_path), "%s/mcp-token", fx.dir);
    fd = open(token_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "file-token-0123456789\n", 22), 22);
    assert_int_equal(close(fd), 0);
    pid = start_http(extra, env, auth, url, sizeof(url), &port);
    snprintf(local, sizeof(local), "Host: localhost:%u", port);

    snprintf(proc, sizeof(proc), "/proc/%d/cmdline", (int)pid);
    in = fopen(proc, "r");
    assert_non_null(in);
    got = fread(cmdline, 1, sizeof(cmdline) - 1, in);
    fclose(in);
    for (size_t i = 0; i < got; i++) {
        cmdline[i] = cmdline[i] == '\0' ? ' ' : cmdline[i];
    }
    cmdline[got] = '\0';
    assert_non_null(strstr(cmdline, "--token-file"));
    assert_null(strstr(cmdline, "file-token-0123456789"));

    assert_int_equal(http_request("POST", url, evil, INIT_BODY, NULL), 421);
    assert_int_equal(http_request("POST", url, no_auth, INIT_BODY, NULL), 421);
    assert_int_equal(raw_status(port, "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n"
                                      "Authorization: Bearer file-token-0123456789\r\n"
                                      "Content-Length: 2\r\nConnection: close\r\n\r\n{}"),
                     421); /* no Host at all */
    assert_int_equal(http_request("POST", url, box, INIT_BODY, NULL), 200);
    assert_int_equal(http_request("POST", url, named, INIT_BODY, NULL), 200);
    assert_int_equal(http_request("POST", url, NULL, INIT_BODY, NULL), 401);
    weft_test_kill_group(pid, 5000);
    snprintf(loose_log, sizeof(loose_log), "%s/http-host.log", fx.dir);
    assert_true(weft_test_file_contains(loose_log, "Host attacker.example:8765 refused (421)"));

    /* A token file others may read is refused before anything starts. */
    assert_int_equal(chmod(token_path, 0644), 0);
    snprintf(loose_log, sizeof(loose_log), "%s/loose.log", fx.dir);
    assert_int_equal(weft_test_run(loose_argv, env, fx.dir, loose_log, 15000), 2);
    assert_true(weft_test_file_contains(loose_log, "chmod 600"));
}

/* Close, within @p ms, those of @p fds the server closed (EOF or reset; their fd becomes -1,
 * which poll skips), until @p want are. @return how many are closed in all. */
static size_t
reap_closed(struct pollfd *fds, size_t n, long ms, size_t want)
{
    long deadline = weft_test_now_ms() + ms;
    size_t closed = 0;

    for (size_t i = 0; i < n; i++) {
        closed += fds[i].fd < 0;
    }
    while (closed < want && weft_test_now_ms() < deadline) {
        assert_true(poll(fds, n, 100) >= 0);
        for (size_t i = 0; i < n; i++) {
            char c = 0;
            if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
                read(fds[i].fd, &c, 1) <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                closed++;
            }
        }
    }
    return closed;
}

/* 64 connections that never finish their headers (a slowloris from one address) took every
 * place of the server for 120 s. Now one address holds at most 32 (the others are closed at
 * once, long before the 5 s timeout) and a silent connection is cut within seconds: a client
 * from another address is answered at once, the half-open connections are closed, and then a
 * client from their address is answered too. */
static void
test_http_half_open_connections_do_not_lock_out(void **state)
{
    enum { HALF_OPEN = 64 };
    static const char partial[] = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ";
    const char *extra[] = {"--workflows", fx.wf_dir, NULL};
    const char *env[] = {fx.home_env, "WEFT_MCP_TOKEN*", NULL};
    struct pollfd fds[HALF_OPEN];
    struct sockaddr_in sa;
    char url[128];
    unsigned port = 0;
    size_t closed = 0;
    long t0 = 0;
    long status = 0;
    pid_t pid = 0;

    (void)state;
    pid = start_http(extra, env, NULL, url, sizeof(url), &port);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (size_t i = 0; i < HALF_OPEN; i++) {
        ssize_t sent = 0;

        fds[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        fds[i].events = POLLIN;
        assert_true(fds[i].fd >= 0);
        assert_int_equal(connect(fds[i].fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        /* A connection the server closed at once (over its per-address limit) may refuse the
         * bytes: that is no failure, and MSG_NOSIGNAL keeps SIGPIPE away. */
        sent = send(fds[i].fd, partial, sizeof(partial) - 1, MSG_NOSIGNAL);
        assert_true(sent == (ssize_t)(sizeof(partial) - 1) || errno == EPIPE ||
                    errno == ECONNRESET);
    }

    /* Past the per-address limit (32) the server closes connections as it accepts them: well
     * within 3 s, where the idle timeout is 5 s. */
    closed = reap_closed(fds, HALF_OPEN, 3000, HALF_OPEN - 32);
    if (closed < HALF_OPEN - 32) {
        weft_test_kill_group(pid, 1000);
        fail_msg("only %zu of %d connections from one address were refused at once", closed,
                 (int)HALF_OPEN);
    }

    /* Another address (all of 127/8 is this machine) is answered at once. */
    t0 = weft_test_now_ms();
    status = http_request_from("127.0.0.2", 10000, "POST", url, NULL, INIT_BODY, NULL);
    if (status != 200 || weft_test_now_ms() - t0 > 5000) {
        weft_test_kill_group(pid, 1000);
        fail_msg("a new client waited %ld ms for HTTP %ld behind %d half-open connections",
                 weft_test_now_ms() - t0, status, (int)HALF_OPEN);
    }

    /* The rest, silent, are closed by the server's timeout (5 s) within 20 s. */
    closed = reap_closed(fds, HALF_OPEN, 20000, HALF_OPEN);
    for (size_t i = 0; i < HALF_OPEN; i++) {
        if (fds[i].fd >= 0) {
            close(fds[i].fd);
        }
    }
    if (closed < HALF_OPEN) {
        weft_test_kill_group(pid, 1000);
        fail_msg("%zu of %d half-open connections still open after 20 s", HALF_OPEN - closed,
                 (int)HALF_OPEN);
    }
    /* Their own address is served again. */
    assert_int_equal(http_request_from("127.0.0.1", 10000, "POST", url, NULL, INIT_BODY, NULL),
                     200);
    weft_test_kill_group(pid, 5000);
}

/* @modelcontextprotocol/inspector's CLI mode (pinned in tests/mcp/package.json) lists the
 * tools of `weft mcp serve` over stdio: another implementation of the protocol agrees. */
static void
test_inspector_cli_lists_tools(void **state)
{
    char out_path[600];
    const char *argv[] = {INSPECTOR, "--cli", WEFT, "mcp", "serve", "--method", "tools/list", NULL};
    const char *env[] = {fx.home_env, NULL};
    int status = 0;

    (void)state;
    snprintf(out_path, sizeof(out_path), "%s/inspector.out", fx.dir);
    status = weft_test_run(argv, env, fx.dir, out_path, 60000);
    if (status != 0) {
        char *tail = weft_test_log_tail(out_path, 2000);

        fail_msg("mcp-inspector --cli exited %d (npm ci in tests/mcp installs it): %s", status,
                 tail);
    }
    assert_true(weft_test_file_contains(out_path, "\"why_failed\""));
    assert_true(weft_test_file_contains(out_path, "\"outputSchema\""));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stdio_initialize_negotiates_newest),
        cmocka_unit_test(test_stdio_tools_listed_with_schemas),
        cmocka_unit_test(test_stdio_list_runs_has_statuses),
        cmocka_unit_test(test_stdio_show_run_last_has_plan),
        cmocka_unit_test(test_stdio_why_failed_reaches_error_span),
        cmocka_unit_test(test_stdio_datasets_and_experiments),
        cmocka_unit_test(test_stdio_show_dataset),
        cmocka_unit_test(test_stdio_compare_experiments),
        cmocka_unit_test(test_handle_results_within_cap),
        cmocka_unit_test(test_stdio_why_failed_names_causes),
        cmocka_unit_test(test_stdio_why_failed_untraced_run),
        cmocka_unit_test(test_stdio_trace_span_and_search),
        cmocka_unit_test(test_stdio_tool_errors),
        cmocka_unit_test(test_stdio_start_run_refuses_escapes),
        cmocka_unit_test(test_handle_jsonrpc_errors),
        cmocka_unit_test(test_http_session_origin_token),
        cmocka_unit_test(test_http_host_rule_and_token_file),
        cmocka_unit_test(test_http_half_open_connections_do_not_lock_out),
        cmocka_unit_test(test_stdio_stdout_only_protocol_and_eof_ends),
        cmocka_unit_test(test_inspector_cli_lists_tools),
        cmocka_unit_test(test_stdio_start_run_then_listed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
