/* tests/runtime/test_watchdog.c - the stuck-loop watchdog, each detector on a scripted workflow
 * that triggers it (repeated agent, repeated tool, no progress, iteration budget) with the warn,
 * break and abort policies, and the legitimate review-fix cycle of the code-review example,
 * which must not trigger anything; the wall-clock stall timer on a slow model (and not on a
 * quick one), the token and cost budgets, and webhook alerts (generic and Alertmanager) to a
 * real local HTTP server. Spans reach a real OTLP receiver; counts come from a meter. */
#include "support/http_receiver.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[128];
    char state[200];
    struct otlp_sink *sink;
    struct weft_meter *meter;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-watchdog-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    assert_weft_ok(weft_meter_new(NULL, &f->meter));
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.meter = f->meter;
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    char cmd[200];

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_meter_free(f->meter);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void
put(struct fx *f, const char *name, const char *text)
{
    char path[300];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void
run_inline(struct fx *f, const char *workflow, const char *script)
{
    char path[300];
    char error[256] = "";
    struct weft_diags d = {0};

    put(f, "script.json", script);
    put(f, "wf.json", workflow);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    weft_workflow_free(f->wf);
    f->wf = NULL;
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("invalid: %s",
                 d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line)) : "?");
    }
    weft_run_result_free(f->r);
    f->r = NULL;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
}

/* The kinds of every weft.stuck_loop event received, joined by ",". */
static void
stuck_kinds(struct fx *f, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < otlp_sink_count(f->sink); i++) {
        json_t *events = json_object_get(otlp_sink_span(f->sink, i), "events");
        for (size_t e = 0; e < json_array_size(events); e++) {
            json_t *ev = json_array_get(events, e);
            json_t *attr = NULL;
            size_t k = 0;
            if (strcmp(json_string_value(json_object_get(ev, "name")), "weft.stuck_loop") != 0) {
                continue;
            }
            json_array_foreach(json_object_get(ev, "attributes"), k, attr)
            {
                if (strcmp(json_string_value(json_object_get(attr, "key")),
                           "weft.stuck_loop.kind") == 0) {
                    used += (size_t)snprintf(out + used, len - used, "%s%s", used > 0 ? "," : "",
                                             json_string_value(json_object_get(
                                                 json_object_get(attr, "value"), "stringValue")));
                }
            }
        }
    }
}

static char *
scrape(struct fx *f)
{
    char *text = NULL;
    size_t len = 0;
    assert_weft_ok(weft_prometheus_render(f->meter, &text, &len));
    return text;
}

#define REPEATING(policy)                                                                \
    "{\"name\": \"poll\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": " \
    "\"script.json\"}}, \"supervisor\": {\"watchdog\": {\"policy\": \"" policy "\"}},"   \
    " \"agents\": [{\"name\": \"poller\"}], \"plan\": ["                                 \
    "{\"agent\": \"poller\", \"task\": \"Check the build status\"},"                     \
    " {\"agent\": \"poller\", \"task\": \"check the  build status\"},"                   \
    " {\"agent\": \"poller\", \"task\": \"Check the build status\"},"                    \
    " {\"agent\": \"poller\", \"task\": \"Check the build status\"}]}"

#define REPEATING_SCRIPT                                                                 \
    "{\"responses\": {\"poller\": {\"act\": [{\"content\": \"pending\"}, {\"content\": " \
    "\"pending\"}, {\"content\": \"pending\"}, {\"content\": \"pending\"}]}}}"

static void
test_watchdog_repeated_agent_warns(void **state)
{
    struct fx *f = *state;
    char kinds[256];
    char *text = NULL;

    run_inline(f, REPEATING("warn"), REPEATING_SCRIPT);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED); /* warn only */
    stuck_kinds(f, kinds, sizeof(kinds));
    /* The third and the fourth identical call (case and spaces normalised). */
    assert_string_equal(kinds, "repeated_agent,repeated_agent");
    text = scrape(f);
    assert_non_null(strstr(text,
                           "weft_stuck_loops_total{kind=\"repeated_agent\",workflow=\"poll\"} "
                           "2\n"));
    free(text);
    {
        json_t *plan = otlp_sink_find(f->sink, "plan supervisor", 2);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(plan, "status"), "code")), 2);
    }
}

static void
test_watchdog_break_and_abort_policies(void **state)
{
    struct fx *f = *state;

    run_inline(f, REPEATING("break"), REPEATING_SCRIPT);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 4);
    assert_string_equal(f->r->steps[3].status, "pending"); /* broken out before the fourth */
    assert_non_null(strstr(f->r->reason, "ending"));
    run_inline(f, REPEATING("abort"), REPEATING_SCRIPT);
    assert_int_equal(f->r->status, WEFT_RUN_ABORTED);
    assert_non_null(strstr(f->r->reason, "stuck loop (repeated_agent)"));
}

static void
test_watchdog_repeated_tool_and_budget(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_inline(f,
               "{\"name\": \"tools\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"script.json\"}}, \"supervisor\": {\"max_iterations\": 2}, \"agents\": [{\"name\":"
               " \"r\", \"tools\": [\"read_file\"], \"max_tool_rounds\": 10}],"
               " \"plan\": [{\"agent\": \"r\", \"task\": \"read\"}]}",
               "{\"responses\": {\"r\": {\"act\": ["
               "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
               "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
               "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
               "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
               "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
               "{\"content\": \"gave up\"}]}}}");
    stuck_kinds(f, kinds, sizeof(kinds));
    /* 1 of 2 iterations is not 80 %; 2 of 2 is, at the closing decision. */
    assert_string_equal(kinds, "repeated_tool,iteration_budget");
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "execute_tool read_file", 4), "error.type"),
        "stuck_loop");
}

static void
test_watchdog_no_progress(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_inline(
        f,
        "{\"name\": \"idle\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"supervisor\": {\"route_with_llm\": true, \"circuit_breaker\":"
        " 100, \"watchdog\": {\"no_progress\": 4}}, \"agents\": [{\"name\": \"a\"}, {\"name\":"
        " \"b\"}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
        "{\"responses\": {\"supervisor\": {\"route\": ["
        "{\"content\": {\"next\": \"b\"}}, {\"content\": {\"next\": \"b\"}},"
        "{\"content\": {\"next\": \"b\"}}, {\"content\": {\"next\": \"b\"}},"
        "{\"content\": {\"next\": \"b\"}}, {\"content\": {\"next\": \"end\"}}]}}}");
    /* b has no step: every route to it changes nothing; the first decision saw the new plan. */
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "no_progress");
}

static void
test_watchdog_quiet_on_a_legitimate_review_cycle(void **state)
{
    struct fx *f = *state;
    char path[300];
    char kinds[256];
    char *text = NULL;

    snprintf(path, sizeof(path), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    assert_weft_ok(weft_workflow_load(path, &f->wf, NULL));
    assert_weft_ok(weft_run(f->wf, &f->ro, &f->r, NULL, 0));
    otlp_sink_collect(f->sink);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
    text = scrape(f);
    assert_null(strstr(text, "weft_stuck_loops_total{"));
    assert_non_null(strstr(text, "# TYPE weft_stuck_loops_total counter"));
    free(text);
}

/* A fresh sink for the next run of a test. */
static void
reset_sink(struct fx *f)
{
    otlp_sink_free(f->sink);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
}

/* The single weft.stuck_loop event's evidence on span @p name, or NULL. */
static const char *
stuck_evidence(struct fx *f, const char *name)
{
    json_t *span = NULL;

    for (size_t n = 0; (span = otlp_sink_find(f->sink, name, n)) != NULL; n++) {
        json_t *events = json_object_get(span, "events");

        for (size_t e = 0; e < json_array_size(events); e++) {
            json_t *ev = json_array_get(events, e);
            json_t *attr = NULL;
            size_t k = 0;

            json_array_foreach(json_object_get(ev, "attributes"), k, attr)
            {
                if (strcmp(json_string_value(json_object_get(attr, "key")),
                           "weft.stuck_loop.evidence") == 0) {
                    return json_string_value(
                        json_object_get(json_object_get(attr, "value"), "stringValue"));
                }
            }
        }
    }
    return "";
}

#define SLOW(stall, delay, hook)                                                                \
    "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "        \
    "\"script.json\"}}, \"supervisor\": {\"watchdog\": {\"stall_s\": " stall hook "}},"         \
    " \"agents\": [{\"name\": \"thinker\"}], \"plan\": [{\"agent\": \"thinker\", \"task\":"     \
    " \"think\"}]}",                                                                            \
        "{\"responses\": {\"thinker\": {\"act\": [{\"content\": \"done\", \"delay_ms\": " delay \
        "}]}}}"

static void
test_watchdog_stall_on_a_hung_model_alerts_while_it_hangs(void **state)
{
    struct fx *f = *state;
    struct http_receiver *rx = NULL;
    const struct http_request *req = NULL;
    char wf[1024];
    char url[160];
    char kinds[256];
    char *text = NULL;
    json_t *body = NULL;
    json_error_t jerr;

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_set_default(
        rx,
        &(struct http_response){.status = 200, .content_type = "application/json", .body = "{}"});
    http_receiver_url(rx, "/hook", url, sizeof(url));
    snprintf(wf, sizeof(wf),
             "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
             "\"script.json\"}}, \"supervisor\": {\"watchdog\": {\"stall_s\": 0.2, \"webhook\": "
             "{\"url\": \"%s\"}}}, \"agents\": [{\"name\": \"thinker\"}], \"plan\": "
             "[{\"agent\": \"thinker\", \"task\": \"think\"}]}",
             url);
    run_inline(f, wf,
               "{\"responses\": {\"thinker\": {\"act\": [{\"content\": \"done\", \"delay_ms\": "
               "900}]}}}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED); /* warn: the run goes on */
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "stall"); /* once per stall, however long it lasts */
    /* The event lands on the hung call's own span, naming what the run waited on. */
    assert_non_null(strstr(stuck_evidence(f, "chat m"), "waiting on chat m for thinker"));
    text = scrape(f);
    assert_non_null(strstr(text, "weft_stuck_loops_total{kind=\"stall\",workflow=\"slow\"} 1\n"));
    free(text);
    /* The alert went out (the run end drains the webhook queue). */
    assert_int_equal(http_receiver_count(rx), 1);
    req = http_receiver_request(rx, 0);
    assert_string_equal(req->path, "/hook");
    body = json_loadb(req->body, req->body_len, 0, &jerr);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "kind")), "stall");
    assert_string_equal(json_string_value(json_object_get(body, "workflow")), "slow");
    assert_string_equal(json_string_value(json_object_get(body, "run_id")), f->r->run_id);
    assert_string_equal(json_string_value(json_object_get(body, "trace_id")), f->r->trace_id);
    json_decref(body);
    http_receiver_stop(rx);
}

static void
test_watchdog_no_stall_on_a_quick_model(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_inline(f, SLOW("0.5", "50", ""));
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
    /* stall_s 0 turns the timer off, however slow the call. */
    reset_sink(f);
    run_inline(f, SLOW("0", "300", ""));
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
}

#define SPENDING(budget)                                                                    \
    "{\"name\": \"spend\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "   \
    "\"script.json\"}}, \"supervisor\": {" budget "}, \"agents\": [{\"name\": \"w\"}],"     \
    " \"plan\": [{\"agent\": \"w\", \"task\": \"a\"}, {\"agent\": \"w\", \"task\": \"b\"}," \
    " {\"agent\": \"w\", \"task\": \"c\"}]}"

#define SPENDING_SCRIPT                                                                 \
    "{\"responses\": {\"w\": {\"act\": ["                                               \
    "{\"content\": \"1\", \"usage\": {\"input_tokens\": 300, \"output_tokens\": 100}}," \
    "{\"content\": \"2\", \"usage\": {\"input_tokens\": 300, \"output_tokens\": 150}}," \
    "{\"content\": \"3\", \"usage\": {\"input_tokens\": 300, \"output_tokens\": 100}}]}}}"

static void
test_watchdog_token_budget_warns_then_crosses(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    /* 400, then 850 (85 %: the warning), then the budget crossed. */
    run_inline(f, SPENDING("\"max_tokens\": 1000"), SPENDING_SCRIPT);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "token_budget,token_budget");
    assert_non_null(strstr(stuck_evidence(f, "chat m"), "of 1000 tokens"));
    assert_int_equal(f->r->status, WEFT_RUN_BUDGET_EXHAUSTED);
    /* Well under the budget: nothing. */
    reset_sink(f);
    run_inline(f, SPENDING("\"max_tokens\": 100000"), SPENDING_SCRIPT);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
}

static void
test_watchdog_alertmanager_webhook_and_config_errors(void **state)
{
    struct fx *f = *state;
    struct http_receiver *rx = NULL;
    char url[160];
    char path[300];
    char line[512];
    char *wf = NULL;
    json_t *body = NULL;
    json_t *alert = NULL;
    json_error_t jerr;
    struct weft_diags d = {0};
    struct weft_workflow *bad = NULL;

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_url(rx, "/api/v2/alerts", url, sizeof(url));
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_URL", url);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_FORMAT", "alertmanager");
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION", "Bearer sekrit-token");
    weft_test_capture_logs();
    run_inline(f, REPEATING("warn"), REPEATING_SCRIPT);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_URL", NULL);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_FORMAT", NULL);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION", NULL);
    assert_int_equal(http_receiver_count(rx), 2); /* two repeated_agent detections */
    {
        char auth[64];
        assert_string_equal(
            http_request_header(http_receiver_request(rx, 0), "Authorization", auth, sizeof(auth)),
            "Bearer sekrit-token");
    }
    assert_null(strstr(weft_test_logs(), "sekrit"));
    body = json_loadb(http_receiver_request(rx, 0)->body, http_receiver_request(rx, 0)->body_len, 0,
                      &jerr);
    assert_true(json_is_array(body));
    alert = json_array_get(body, 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(alert, "labels"), "alertname")),
        "WeftStuckLoop");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(alert, "labels"), "kind")),
        "repeated_agent");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(alert, "labels"), "severity")),
        "warning");
    assert_non_null(json_object_get(alert, "startsAt"));
    json_decref(body);

    /* An unknown format in the environment is said, and the generic payload goes out. */
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_URL", url);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_FORMAT", "slack");
    reset_sink(f);
    run_inline(f, REPEATING("warn"), REPEATING_SCRIPT);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_URL", NULL);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_FORMAT", NULL);
    assert_non_null(strstr(weft_test_logs(), "WEFT_WATCHDOG_WEBHOOK_FORMAT=slack: expected"));
    assert_int_equal(http_receiver_count(rx), 4);
    body = json_loadb(http_receiver_request(rx, 2)->body, http_receiver_request(rx, 2)->body_len, 0,
                      &jerr);
    assert_true(json_is_object(body));
    assert_string_equal(json_string_value(json_object_get(body, "type")), "weft.stuck_loop");
    json_decref(body);
    http_receiver_stop(rx);

    /* A webhook that is not http(s), and an unknown format: errors with their field. */
    put(f, "bad.json",
        "{\"name\": \"b\", \"models\": {\"m\": {\"provider\": \"scripted\"}}, \"supervisor\":"
        " {\"watchdog\": {\"stall_s\": -1, \"webhook\": {\"url\": \"ftp://x\", \"format\":"
        " \"slack\"}}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"agent\": \"a\","
        " \"task\": \"t\"}]}");
    snprintf(path, sizeof(path), "%s/bad.json", f->dir);
    assert_true(weft_workflow_load(path, &bad, &d) != WEFT_OK);
    assert_null(bad);
    wf = calloc(1, 4096);
    for (size_t i = 0; i < d.count; i++) {
        strcat(wf, weft_diag_format(&d.items[i], line, sizeof(line)));
        strcat(wf, "\n");
    }
    assert_non_null(strstr(wf, "supervisor.watchdog.webhook.url"));
    assert_non_null(strstr(wf, "supervisor.watchdog.webhook.format"));
    assert_non_null(strstr(wf, "supervisor.watchdog.stall_s"));
    free(wf);
    weft_diags_cleanup(&d);
}

/* Every agent step fails; correction mode hands each failure to the other agent, whose step
 * fails too: a, b, a, b, ... with new tasks each time, none completed. */
static void
ping_pong_script(char *out, size_t len)
{
    static const char err[] = "{\"error\": {\"type\": \"server_error\", \"message\": \"down\"}}";
    char failed[128] = "s1";
    size_t n = 0;

    n += (size_t)snprintf(out + n, len - n,
                          "{\"responses\": {\"a\": {\"act\": [%s, %s, %s, %s]},"
                          " \"b\": {\"act\": [%s, %s, %s]}, \"supervisor\": {\"correct\": [",
                          err, err, err, err, err, err, err);
    for (int i = 1; i <= 6; i++) {
        n += (size_t)snprintf(out + n, len - n,
                              "%s{\"content\": {\"steps\": [{\"description\": \"diagnose %d\","
                              " \"executor\": \"agent\", \"agent\": \"%s\", \"rationale\": \"r\"},"
                              " {\"executor\": \"retry\", \"step\": \"%s\"}]}}",
                              i > 1 ? ", " : "", i, i % 2 == 1 ? "b" : "a", failed);
        snprintf(failed + strlen(failed), sizeof(failed) - strlen(failed), ".c%d.1", i);
    }
    snprintf(out + n, len - n, "]}}}");
}

#define PING_PONG(policy)                                                                 \
    "{\"name\": \"pp\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "    \
    "\"script.json\"}}, \"supervisor\": {\"circuit_breaker\": 100, \"correction\": "      \
    "{\"max_corrections\": 6}, \"watchdog\": {\"policy\": \"" policy "\"}}, \"agents\": " \
    "[{\"name\": \"a\"}, {\"name\": \"b\"}], \"plan\": [{\"agent\": \"a\", \"task\": \"build\"}]}"

static void
test_watchdog_ping_pong_between_two_failing_agents(void **state)
{
    struct fx *f = *state;
    char script[4096];
    char kinds[256];

    ping_pong_script(script, sizeof(script));
    run_inline(f, PING_PONG("warn"), script);
    stuck_kinds(f, kinds, sizeof(kinds));
    /* The sixth and seventh steps close an A-B-A-B-A-B window. */
    assert_string_equal(kinds, "ping_pong,ping_pong");
    assert_non_null(strstr(stuck_evidence(f, "plan supervisor"), "alternated over 6 steps"));
    reset_sink(f);
    run_inline(f, PING_PONG("abort"), script);
    assert_int_equal(f->r->status, WEFT_RUN_ABORTED);
    assert_non_null(strstr(f->r->reason, "stuck loop (ping_pong)"));
}

static void
test_watchdog_no_ping_pong_when_steps_complete(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    /* The same alternation, each step done: a hand-off chain, not a stuck loop. */
    run_inline(f,
               "{\"name\": \"chain\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\":"
               " \"script.json\"}}, \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"plan\":"
               " [{\"agent\": \"a\", \"task\": \"t1\"}, {\"agent\": \"b\", \"task\": \"t2\"},"
               " {\"agent\": \"a\", \"task\": \"t3\"}, {\"agent\": \"b\", \"task\": \"t4\"},"
               " {\"agent\": \"a\", \"task\": \"t5\"}, {\"agent\": \"b\", \"task\": \"t6\"},"
               " {\"agent\": \"a\", \"task\": \"t7\"}]}",
               "{\"responses\": {\"a\": {\"act\": [{\"content\": \"1\"}, {\"content\": \"3\"},"
               " {\"content\": \"5\"}, {\"content\": \"7\"}]}, \"b\": {\"act\": [{\"content\":"
               " \"2\"}, {\"content\": \"4\"}, {\"content\": \"6\"}]}}}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_watchdog_ping_pong_between_two_failing_agents),
        T(test_watchdog_no_ping_pong_when_steps_complete),
        T(test_watchdog_stall_on_a_hung_model_alerts_while_it_hangs),
        T(test_watchdog_no_stall_on_a_quick_model),
        T(test_watchdog_token_budget_warns_then_crosses),
        T(test_watchdog_alertmanager_webhook_and_config_errors),
        T(test_watchdog_repeated_agent_warns),
        T(test_watchdog_break_and_abort_policies),
        T(test_watchdog_repeated_tool_and_budget),
        T(test_watchdog_no_progress),
        T(test_watchdog_quiet_on_a_legitimate_review_cycle),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
