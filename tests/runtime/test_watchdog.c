/* tests/runtime/test_watchdog.c - the stuck-loop watchdog on scripted workflows: every loop kind
 * (the examples/stuck_loops/ workflows: hand-off ping-pong, tool, route, reflection, flow), a
 * cycle of three agents, loops that make progress (not flagged), each policy (warn, break,
 * escalate with and without a recurrence, fail), the global repeats setting, one report and
 * one alert per loop, events on the detection and the root span with links to the
 * repetitions; the wall-clock stall timer on a slow model (and not on a quick one), the token
 * and cost budgets, and webhook alerts (generic and Alertmanager) to a real local HTTP
 * server. Spans reach a real OTLP receiver; counts come from a meter. */
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

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_meter_free(f->meter);
    weft_test_rmtree(f->dir);
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

static bool
is_root(const json_t *span)
{
    const char *parent = json_string_value(json_object_get(span, "parentSpanId"));
    return parent == NULL || parent[0] == '\0';
}

/* The kinds of the weft.stuck_loop events on the root span (@p on_root) or on the others,
 * joined by ",". */
static void
kinds_where(struct fx *f, bool on_root, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < otlp_sink_count(f->sink); i++) {
        json_t *span = otlp_sink_span(f->sink, i);
        json_t *events = json_object_get(span, "events");
        if (is_root(span) != on_root) {
            continue;
        }
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

/* The kinds of the detections (events on the span where each was found). */
static void
stuck_kinds(struct fx *f, char *out, size_t len)
{
    kinds_where(f, false, out, len);
}

static char *
scrape(struct fx *f)
{
    char *text = NULL;
    size_t len = 0;
    assert_weft_ok(weft_prometheus_render(f->meter, &text, &len));
    return text;
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
    /* The workflow's stuck-loop series are there from its start, at 0 (every kind is known in
     * advance, so a first detection is an increase in Prometheus), and none moved. */
    assert_non_null(strstr(text, "# TYPE weft_stuck_loops_total counter"));
    assert_non_null(
        strstr(text, "weft_stuck_loops_total{kind=\"handoff\",workflow=\"code-review\"} 0\n"));
    for (const char *p = strstr(text, "weft_stuck_loops_total{"); p != NULL;
         p = strstr(p + 1, "weft_stuck_loops_total{")) {
        assert_int_equal(strncmp(strchr(p, '}'), "} 0\n", 4), 0);
    }
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

/* A plan of different commands in a row, none printing anything: four hand-offs to the command
 * executor, not one repeated (the signature once ignored the command, so the third was
 * reported as a stuck loop and paged); the same command three times is still one. */
static void
test_watchdog_different_commands_are_not_a_loop(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_inline(
        f,
        "{\"name\": \"cmds\", \"models\": {\"m\": {\"provider\": \"scripted\", "
        "\"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
        "{\"id\": \"s1\", \"executor\": \"command\", \"argv\": [\"true\"]},"
        "{\"id\": \"s2\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"exit 0\"]},"
        "{\"id\": \"s3\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \":\"]},"
        "{\"id\": \"s4\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"true\"]}]}",
        "{\"responses\": {}}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");

    reset_sink(f);
    run_inline(f,
               "{\"name\": \"cmds\", \"models\": {\"m\": {\"provider\": \"scripted\", "
               "\"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
               "{\"id\": \"s1\", \"executor\": \"command\", \"argv\": [\"true\"]},"
               "{\"id\": \"s2\", \"executor\": \"command\", \"argv\": [\"true\"]},"
               "{\"id\": \"s3\", \"executor\": \"command\", \"argv\": [\"true\"]}]}",
               "{\"responses\": {}}");
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff");
}

/* A static plan polling the same thing four times: supervisor -> poller once, then the same
 * poller -> poller hand-off three times with the same answer (a self-repeat). */
#define REPEATING(policy)                                                                \
    "{\"name\": \"poll\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": " \
    "\"script.json\"}}, \"supervisor\": {\"watchdog\": {\"policy\": \"" policy "\"}},"   \
    " \"agents\": [{\"name\": \"poller\"}], \"plan\": ["                                 \
    "{\"agent\": \"poller\", \"task\": \"Check the build status\"},"                     \
    " {\"agent\": \"poller\", \"task\": \"check the  build status\"},"                   \
    " {\"agent\": \"poller\", \"task\": \"Check the build status\"},"                    \
    " {\"agent\": \"poller\", \"task\": \" CHECK the build status \"}]}"

#define REPEATING_SCRIPT                                                                 \
    "{\"responses\": {\"poller\": {\"act\": [{\"content\": \"pending\"}, {\"content\": " \
    "\"pending\"}, {\"content\": \"pending\"}, {\"content\": \"pending\"}]}}}"

/* The text of examples/stuck_loops/@p name (malloc'd). */
static char *
example_text(const char *name)
{
    char path[512];
    FILE *fp = NULL;
    char *text = calloc(1, 1 << 16);
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/examples/stuck_loops/%s", WEFT_SOURCE_DIR, name);
    fp = fopen(path, "r");
    assert_non_null(fp);
    n = fread(text, 1, (1 << 16) - 1, fp);
    fclose(fp);
    text[n] = '\0';
    return text;
}

static void
run_example(struct fx *f, const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/examples/stuck_loops/%s", WEFT_SOURCE_DIR, name);
    weft_workflow_free(f->wf);
    f->wf = NULL;
    weft_run_result_free(f->r);
    f->r = NULL;
    assert_weft_ok(weft_workflow_load(path, &f->wf, NULL));
    assert_weft_ok(weft_run(f->wf, &f->ro, &f->r, NULL, 0));
    otlp_sink_collect(f->sink);
}

/* The value of event attribute @p key of the first weft.stuck_loop event on @p span. */
static json_t *
event_attr(const json_t *span, const char *key)
{
    json_t *events = json_object_get(span, "events");

    for (size_t e = 0; e < json_array_size(events); e++) {
        json_t *ev = json_array_get(events, e);
        json_t *attr = NULL;
        size_t k = 0;
        if (strcmp(json_string_value(json_object_get(ev, "name")), "weft.stuck_loop") != 0) {
            continue;
        }
        json_array_foreach(json_object_get(ev, "attributes"), k, attr)
        {
            if (strcmp(json_string_value(json_object_get(attr, "key")), key) == 0) {
                return json_object_get(attr, "value");
            }
        }
    }
    return NULL;
}

static const char *
event_str(const json_t *span, const char *key)
{
    json_t *v = event_attr(span, key);
    return v != NULL ? json_string_value(json_object_get(v, "stringValue")) : NULL;
}

static long long
event_int(const json_t *span, const char *key)
{
    json_t *v = event_attr(span, key);
    json_t *i = v != NULL ? json_object_get(v, "intValue") : NULL;
    return json_is_string(i) ? atoll(json_string_value(i)) : json_integer_value(i);
}

/* The first span that carries a weft.stuck_loop event, root excluded. */
static json_t *
detection_span(struct fx *f)
{
    for (size_t i = 0; i < otlp_sink_count(f->sink); i++) {
        json_t *span = otlp_sink_span(f->sink, i);
        if (!is_root(span) && event_attr(span, "weft.stuck_loop.kind") != NULL) {
            return span;
        }
    }
    return NULL;
}

static json_t *
root_span(struct fx *f)
{
    for (size_t i = 0; i < otlp_sink_count(f->sink); i++) {
        if (is_root(otlp_sink_span(f->sink, i))) {
            return otlp_sink_span(f->sink, i);
        }
    }
    return NULL;
}

static size_t
count_char(const char *s, char c)
{
    size_t n = 0;
    for (; s != NULL && *s != '\0'; s++) {
        n += *s == c;
    }
    return n;
}

static void
assert_metric(struct fx *f, const char *sample)
{
    char *text = scrape(f);
    if (strstr(text, sample) == NULL) {
        fail_msg("no '%s' in:\n%s", sample, text);
    }
    free(text);
}

/* The canonical stuck loop: a tester and a coder handing the same failing test back and
 * forth. Flagged when the tester hands off to the coder a third time (decision 6 of a budget
 * of 40), broken with policy break: the run ends as stuck and the third hop never runs. */
static void
test_watchdog_handoff_ping_pong_flagged_on_third_repetition(void **state)
{
    struct fx *f = *state;
    char kinds[256];
    json_t *det = NULL;
    json_t *root = NULL;

    run_example(f, "handoff.json");
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_string_equal(weft_run_status_name(f->r->status), "stuck");
    assert_non_null(strstr(f->r->reason, "stuck loop (handoff)"));
    assert_non_null(
        strstr(f->r->reason, "tester \xe2\x86\x92 coder 'Make the failing test pass.'"));
    assert_int_equal(f->r->iterations, 6);
    assert_int_equal(f->r->step_count, 6);
    assert_string_equal(f->r->steps[5].agent, "coder");
    assert_string_equal(f->r->steps[5].status, "pending"); /* broken before it ran */
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff"); /* one report for the whole loop */
    kinds_where(f, true, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff"); /* and the same event on the root span */
    det = detection_span(f);
    assert_non_null(det);
    assert_string_equal(json_string_value(json_object_get(det, "name")), "plan supervisor");
    assert_string_equal(otlp_span_attr(det, "error.type"), "stuck_loop");
    assert_int_equal(event_int(det, "weft.stuck_loop.repetitions"), 3);
    assert_string_equal(event_str(det, "weft.stuck_loop.agents"), "tester,coder");
    assert_string_equal(event_str(det, "weft.stuck_loop.policy"), "break");
    assert_int_equal(strlen(event_str(det, "weft.stuck_loop.signature")), 16);
    /* The three repetitions: ids on the event, links from the detection (to the two before
     * it) and from the root (to all three). */
    assert_int_equal(count_char(event_str(det, "weft.stuck_loop.span_ids"), ','), 2);
    assert_int_equal(json_array_size(json_object_get(det, "links")), 2);
    root = root_span(f);
    assert_int_equal(json_array_size(json_object_get(root, "links")), 3);
    {
        const char *first = json_string_value(
            json_object_get(json_array_get(json_object_get(root, "links"), 0), "spanId"));
        assert_non_null(strstr(event_str(det, "weft.stuck_loop.span_ids"), first));
    }
    assert_metric(f, "weft_stuck_loops_total{kind=\"handoff\",workflow=\"stuck-handoff\"} 1\n");
}

/* Policy warn: the loop goes on to the iteration budget, reported (and alerted) once. */
static void
test_watchdog_handoff_warn_reports_and_alerts_once(void **state)
{
    struct fx *f = *state;
    struct http_receiver *rx = NULL;
    char url[160];
    char kinds[256];
    char *script = example_text("handoff_script.json");
    char *wf = calloc(1, 4096);

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_url(rx, "/hook", url, sizeof(url));
    snprintf(wf, 4096,
             "{\"name\": \"pp\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
             "\"script.json\"}}, \"supervisor\": {\"max_iterations\": 14, \"watchdog\": "
             "{\"policy\": \"warn\", \"webhook\": {\"url\": \"%s\"}}}, \"agents\": ["
             "{\"name\": \"tester\", \"can_request\": [\"coder\"]},"
             " {\"name\": \"coder\", \"can_request\": [\"tester\"]}],"
             " \"plan\": [{\"agent\": \"tester\", \"task\": \"Run the test suite.\"}]}",
             url);
    run_inline(f, wf, script);
    assert_int_equal(f->r->status, WEFT_RUN_BUDGET_EXHAUSTED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff,iteration_budget");
    assert_metric(f, "weft_stuck_loops_total{kind=\"handoff\",workflow=\"pp\"} 1\n");
    assert_int_equal(http_receiver_count(rx), 2); /* the loop once, the budget warning once */
    http_receiver_stop(rx);
    free(wf);
    free(script);
}

/* A -> B -> C -> A with the same tasks and answers: a cycle of three, found on the third
 * a -> b hand-off (decision 8). */
static void
test_watchdog_cycle_of_three_agents(void **state)
{
    struct fx *f = *state;
    char kinds[256];
    char script[8192];
    size_t n = 0;
    static const char *const names[] = {"a", "b", "c"};

    n += (size_t)snprintf(script + n, sizeof(script) - n, "{\"responses\": {");
    for (int i = 0; i < 3; i++) {
        n += (size_t)snprintf(script + n, sizeof(script) - n, "%s\"%s\": {\"act\": [",
                              i > 0 ? ", " : "", names[i]);
        for (int k = 0; k < 4; k++) {
            n += (size_t)snprintf(script + n, sizeof(script) - n,
                                  "%s{\"tool_calls\": [{\"name\": \"request_agent\", "
                                  "\"arguments\": {\"agent\": \"%s\", \"query\": \"Your turn\"}}]},"
                                  " {\"content\": \"%s passed it on\"}",
                                  k > 0 ? ", " : "", names[(i + 1) % 3], names[i]);
        }
        n += (size_t)snprintf(script + n, sizeof(script) - n, "]}");
    }
    snprintf(script + n, sizeof(script) - n, "}}");
    run_inline(f,
               "{\"name\": \"ring\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"script.json\"}}, \"supervisor\": {\"max_iterations\": 30, \"watchdog\": "
               "{\"policy\": \"fail\"}}, \"agents\": [{\"name\": \"a\", \"can_request\": [\"b\"]},"
               " {\"name\": \"b\", \"can_request\": [\"c\"]}, {\"name\": \"c\", \"can_request\":"
               " [\"a\"]}], \"plan\": [{\"agent\": \"a\", \"task\": \"Start\"}]}",
               script);
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_int_equal(f->r->iterations, 8);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff");
    assert_string_equal(event_str(detection_span(f), "weft.stuck_loop.agents"), "a,b,c");
    assert_non_null(strstr(f->r->reason, "a \xe2\x86\x92 b 'Your turn'"));
}

/* The same hand-offs, but every round produces something new (a fix that changes, a test
 * count that drops): a loop that progresses is not stuck. Also the self-repeating static plan
 * of REPEATING with new answers. */
static void
test_watchdog_progressing_loop_is_not_flagged(void **state)
{
    struct fx *f = *state;
    char kinds[256];
    char script[8192];
    size_t n = 0;

    n += (size_t)snprintf(script + n, sizeof(script) - n,
                          "{\"responses\": {\"tester\": {\"act\": [");
    for (int k = 0; k < 5; k++) {
        if (k < 4) {
            n += (size_t)snprintf(script + n, sizeof(script) - n,
                                  "%s{\"tool_calls\": [{\"name\": \"request_agent\", \"arguments\":"
                                  " {\"agent\": \"coder\", \"query\": \"Make the failing test"
                                  " pass.\"}}]}, {\"content\": \"%d failed\"}",
                                  k > 0 ? ", " : "", 5 - k);
        } else {
            n += (size_t)snprintf(script + n, sizeof(script) - n, ", {\"content\": \"all pass\"}");
        }
    }
    n += (size_t)snprintf(script + n, sizeof(script) - n, "]}, \"coder\": {\"act\": [");
    for (int k = 0; k < 4; k++) {
        n += (size_t)snprintf(script + n, sizeof(script) - n,
                              "%s{\"tool_calls\": [{\"name\": \"request_agent\", \"arguments\":"
                              " {\"agent\": \"tester\", \"query\": \"Run the test again.\"}}]},"
                              " {\"content\": \"fixed bug %d\"}",
                              k > 0 ? ", " : "", k + 1);
    }
    snprintf(script + n, sizeof(script) - n, "]}}}");
    run_inline(f,
               "{\"name\": \"fixing\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\":"
               " \"script.json\"}}, \"supervisor\": {\"watchdog\": {\"policy\": \"fail\"}},"
               " \"agents\": [{\"name\": \"tester\", \"can_request\": [\"coder\"]}, {\"name\":"
               " \"coder\", \"can_request\": [\"tester\"]}], \"plan\": [{\"agent\": \"tester\","
               " \"task\": \"Run the test suite.\"}]}",
               script);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 9);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
    reset_sink(f);
    run_inline(f, REPEATING("fail"),
               "{\"responses\": {\"poller\": {\"act\": [{\"content\": \"queued\"}, {\"content\": "
               "\"building\"}, {\"content\": \"testing\"}, {\"content\": \"green\"}]}}}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "");
}

/* A self-repeat with unchanged answers (case and spacing of the task ignored): the third
 * poller -> poller hand-off is the loop; fail ends the run before it. */
static void
test_watchdog_self_repeat_fails_the_run(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_inline(f, REPEATING("fail"), REPEATING_SCRIPT);
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_non_null(
        strstr(f->r->reason, "stuck loop (handoff): handoff poller \xe2\x86\x92 poller"));
    assert_string_equal(f->r->steps[3].status, "pending");
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "handoff");
    {
        json_t *plan = otlp_sink_find(f->sink, "plan supervisor", 3);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(plan, "status"), "code")), 2);
    }
}

/* The other kinds, each from its shipped example, with its example's policy. */
static void
test_watchdog_tool_route_reflection_and_flow_examples(void **state)
{
    struct fx *f = *state;
    char kinds[256];

    run_example(f, "tool.json"); /* fail */
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "tool");
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool build_status"), 3);
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "execute_tool build_status", 2), "error.type"),
        "stuck_loop");
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_non_null(strstr(f->r->reason, "stuck loop (tool): tool build_status {}"));

    reset_sink(f);
    run_example(f, "route.json"); /* warn: reported, and the run goes on */
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "route");
    assert_int_equal(f->r->iterations, 6);
    assert_metric(f, "weft_stuck_loops_total{kind=\"route\",workflow=\"stuck-route\"} 1\n");

    reset_sink(f);
    run_example(f, "reflection.json"); /* fail: before max_retries runs out */
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "reflection");
    assert_int_equal(f->r->steps[0].attempts, 3);
    assert_int_equal(otlp_sink_count_named(f->sink, "reflect coder"), 3);

    reset_sink(f);
    run_example(f, "flow.json"); /* break: no fourth round */
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    stuck_kinds(f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "flow");
    assert_int_equal(f->r->loops[WEFT_LOOP_FLOW], 2);
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "loop check", 2), "weft.loop.outcome"), "stuck");
    assert_string_equal(event_str(detection_span(f), "weft.stuck_loop.agents"), "checker,patcher");
}

#define ESCALATING                                                                             \
    "{\"name\": \"esc\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "        \
    "\"script.json\"}}, \"supervisor\": {\"max_iterations\": 30, \"watchdog\": {\"policy\": "  \
    "\"escalate\", \"escalate_to\": \"lead\"}}, \"agents\": [{\"name\": \"tester\", "          \
    "\"can_request\": [\"coder\"]}, {\"name\": \"coder\", \"can_request\": [\"tester\"]},"     \
    " {\"name\": \"lead\", \"can_request\": [\"coder\"]}], \"plan\": [{\"agent\": \"tester\"," \
    " \"task\": \"Run the test suite.\"}]}"

/* Escalate: the hop that would repeat the loop is skipped and the lead gets the loop. When
 * the lead settles it, the run completes; when the loop comes back, the run ends as stuck. */
static void
test_watchdog_escalate_hands_the_loop_over_once(void **state)
{
    struct fx *f = *state;
    char *script = example_text("handoff_script.json");
    char *settled = calloc(1, strlen(script) + 256);
    char *again = calloc(1, strlen(script) + 512);
    const char *end = strrchr(script, '}');
    const char *inner = NULL;

    /* The example's script plus the lead's answers. */
    inner = end - 1;
    while (*inner != '}') {
        inner--;
    }
    snprintf(settled, strlen(script) + 256,
             "%.*s, \"lead\": {\"act\": [{\"content\": \"Stop: the test itself is wrong; "
             "shipping without it.\"}]}}}",
             (int)(inner - script), script);
    run_inline(f, ESCALATING, settled);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 7);
    assert_string_equal(f->r->steps[5].status, "skipped");
    assert_string_equal(f->r->steps[6].agent, "lead");
    assert_string_equal(f->r->steps[6].status, "completed");
    assert_string_equal(f->r->decisions[5].layer, "watchdog");
    assert_non_null(strstr(f->r->decisions[5].reason, "escalated to lead"));

    reset_sink(f);
    snprintf(again, strlen(script) + 512,
             "%.*s, \"lead\": {\"act\": [{\"tool_calls\": [{\"name\": \"request_agent\", "
             "\"arguments\": {\"agent\": \"coder\", \"query\": \"Try once more.\"}}]}, "
             "{\"content\": \"back to you\"}]}}}",
             (int)(inner - script), script);
    run_inline(f, ESCALATING, again);
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_non_null(strstr(f->r->reason, "after escalation"));
    free(again);
    free(settled);
    free(script);
}

/* WEFT_WATCHDOG_REPEATS applies to workflows that do not set repeats. */
static void
test_watchdog_repeats_from_the_environment(void **state)
{
    struct fx *f = *state;

    weft_test_setenv("WEFT_WATCHDOG_REPEATS", "4");
    run_example(f, "tool.json");
    weft_test_setenv("WEFT_WATCHDOG_REPEATS", NULL);
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool build_status"), 4);
    assert_int_equal(event_int(detection_span(f), "weft.stuck_loop.repetitions"), 4);
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
    assert_non_null(
        strstr(stuck_evidence(f, "chat m"), "in step s1 (agent thinker) while waiting on chat m"));
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
    assert_int_equal(http_receiver_count(rx), 1); /* one loop, one alert */
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
        json_string_value(json_object_get(json_object_get(alert, "labels"), "kind")), "handoff");
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
    assert_int_equal(http_receiver_count(rx), 2);
    body = json_loadb(http_receiver_request(rx, 1)->body, http_receiver_request(rx, 1)->body_len, 0,
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

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_watchdog_handoff_ping_pong_flagged_on_third_repetition),
        T(test_watchdog_different_commands_are_not_a_loop),
        T(test_watchdog_handoff_warn_reports_and_alerts_once),
        T(test_watchdog_cycle_of_three_agents),
        T(test_watchdog_progressing_loop_is_not_flagged),
        T(test_watchdog_self_repeat_fails_the_run),
        T(test_watchdog_tool_route_reflection_and_flow_examples),
        T(test_watchdog_escalate_hands_the_loop_over_once),
        T(test_watchdog_repeats_from_the_environment),
        T(test_watchdog_stall_on_a_hung_model_alerts_while_it_hangs),
        T(test_watchdog_no_stall_on_a_quick_model),
        T(test_watchdog_token_budget_warns_then_crosses),
        T(test_watchdog_alertmanager_webhook_and_config_errors),
        T(test_watchdog_quiet_on_a_legitimate_review_cycle),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
