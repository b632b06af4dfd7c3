/* tests/runtime/test_engine.c - whole workflows through weft_run(), asserting the exact
 * sequence of agents, decisions (with layers), verdicts and loops, and the span tree a real
 * OTLP receiver on 127.0.0.1 decodes: names, parent links, links, key attributes and status.
 *
 * Every run uses the scripted provider, so the sequences are deterministic; the workflows are
 * the shipped examples plus small ones written by the tests for each failure path. */
#define _GNU_SOURCE /* memmem */

#include "support/openai_server.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[256];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    char state[300];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-engine-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
    weft_test_setenv("WEFT_CAPTURE_CONTENT", NULL);
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
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
write_file(struct fx *f, const char *name, const char *text)
{
    char path[512];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

static void
load_path(struct fx *f, const char *path)
{
    struct weft_diags d = {0};
    char line[1024];

    weft_workflow_free(f->wf);
    f->wf = NULL;
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        for (size_t i = 0; i < d.count; i++) {
            print_message("%s\n", weft_diag_format(&d.items[i], line, sizeof(line)));
        }
        fail_msg("cannot load %s", path);
    }
    weft_diags_cleanup(&d);
}

static void
load_example(struct fx *f, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/examples/%s/workflow.json", WEFT_SOURCE_DIR, name);
    load_path(f, path);
}

/* Write wf.json and script.json into the test directory and load them. */
static void
load_inline(struct fx *f, const char *workflow, const char *script)
{
    char path[512];
    write_file(f, "wf.json", workflow);
    write_file(f, "script.json", script);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    load_path(f, path);
}

static void
run(struct fx *f, const char *input)
{
    char error[512] = "";
    weft_run_result_free(f->r);
    f->r = NULL;
    f->ro.input = input;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run failed: %s", error);
    }
    otlp_sink_collect(f->sink);
}

static char *
decisions(const struct weft_run_result *r)
{
    static char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->decision_count; i++) {
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s:%s", i > 0 ? "," : "",
                                r->decisions[i].layer, r->decisions[i].next);
    }
    return buf;
}

static char *
verdicts(const struct weft_run_result *r)
{
    static char buf[1024];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->verdict_count; i++) {
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i > 0 ? "," : "",
                                r->verdicts[i]);
    }
    return buf;
}

static void
assert_names(struct otlp_sink *sink, const char *prefix, const char *expected)
{
    char *names = otlp_sink_names(sink, prefix);
    assert_string_equal(names, expected);
    free(names);
}

static void
assert_attrs(struct otlp_sink *sink, const char *prefix, const char *key, const char *expected)
{
    char *v = otlp_sink_attr_list(sink, prefix, key);
    assert_string_equal(v, expected);
    free(v);
}

static const char *
parent_name(struct otlp_sink *sink, const json_t *span)
{
    json_t *p = otlp_sink_parent(sink, span);
    return p != NULL ? json_string_value(json_object_get(p, "name")) : "(root)";
}

static int
status_code(const json_t *span)
{
    return (int)json_integer_value(json_object_get(json_object_get(span, "status"), "code"));
}

/* The three vocabularies and the session on every span; every parent present. */
static void
assert_span_model(struct otlp_sink *sink, const char *session)
{
    for (size_t i = 0; i < otlp_sink_count(sink); i++) {
        const json_t *s = otlp_sink_span(sink, i);
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *type = otlp_span_attr(s, "langfuse.observation.type");
        assert_string_equal(otlp_span_attr(s, "gen_ai.conversation.id"), session);
        assert_string_equal(otlp_span_attr(s, "session.id"), session);
        assert_string_not_equal(otlp_span_attr(s, "openinference.span.kind"), "");
        if (strncmp(name, "invoke_workflow ", 16) == 0) {
            assert_string_equal(type, "chain");
            assert_null(otlp_sink_parent(sink, s));
        } else {
            assert_non_null(otlp_sink_parent(sink, s));
        }
        if (strncmp(name, "plan ", 5) == 0) {
            assert_string_equal(type, "chain");
            assert_string_equal(otlp_span_attr(s, "gen_ai.operation.name"), "plan");
            assert_string_not_equal(otlp_span_attr(s, "weft.decision.layer"), "");
            assert_string_not_equal(otlp_span_attr(s, "weft.decision.next"), "");
        } else if (strncmp(name, "invoke_agent ", 13) == 0) {
            assert_string_equal(type, "agent");
            assert_string_equal(otlp_span_attr(s, "openinference.span.kind"), "AGENT");
            assert_int_equal(strncmp(parent_name(sink, s), "invoke_workflow ", 16), 0);
            assert_string_not_equal(otlp_span_attr(s, "weft.step.id"), "");
        } else if (strncmp(name, "chat ", 5) == 0) {
            assert_string_equal(type, "generation");
            assert_int_equal(json_integer_value(json_object_get(s, "kind")), 3);
            assert_string_equal(otlp_span_attr(s, "gen_ai.operation.name"), "chat");
            assert_string_not_equal(otlp_span_attr(s, "gen_ai.provider.name"), "");
        } else if (strncmp(name, "execute_tool ", 13) == 0) {
            assert_string_equal(type, "tool");
            assert_int_equal(strncmp(parent_name(sink, s), "invoke_agent ", 13), 0);
        } else if (strncmp(name, "reflect ", 8) == 0) {
            assert_string_equal(type, "evaluator");
            assert_int_equal(strncmp(parent_name(sink, s), "invoke_agent ", 13), 0);
        } else if (strncmp(name, "replan ", 7) == 0) {
            assert_string_equal(type, "chain");
            assert_int_equal(strncmp(parent_name(sink, s), "plan ", 5), 0);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */

static void
test_engine_code_review_loops_back_until_approved(void **state)
{
    struct fx *f = *state;
    json_t *root = NULL;

    load_example(f, "code_review");
    run(f, "Add a login endpoint");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_names(f->sink, "invoke_agent ",
                 "invoke_agent architect,invoke_agent codesmith,invoke_agent reviewer,"
                 "invoke_agent fixer,invoke_agent reviewer,invoke_agent fixer,"
                 "invoke_agent reviewer,invoke_agent fixer,invoke_agent reviewer");
    assert_string_equal(decisions(f->r), "llm:plan,rule:architect,rule:codesmith,rule:reviewer,"
                                         "rule:fixer,rule:reviewer,rule:fixer,rule:reviewer,"
                                         "rule:fixer,rule:reviewer,rule:end");
    assert_int_equal(f->r->loops[WEFT_LOOP_REPLAN], 6);
    assert_int_equal(f->r->step_count, 9);
    assert_string_equal(f->r->steps[3].requested_by, "s3");
    assert_string_equal(f->r->steps[8].requested_by, "s8");
    assert_non_null(strstr(f->r->output, "APPROVED"));
    /* The span tree a collector sees. */
    assert_int_equal(otlp_sink_count_named(f->sink, "invoke_workflow code-review"), 1);
    root = otlp_sink_find(f->sink, "invoke_workflow code-review", 0);
    assert_string_equal(otlp_span_attr(root, "weft.run.status"), "completed");
    assert_string_equal(otlp_span_attr(root, "weft.run.loops.replan"), "6");
    assert_int_equal(status_code(root), 1);
    assert_attrs(f->sink, "plan ", "weft.decision.layer",
                 "llm,rule,rule,rule,rule,rule,rule,rule,rule,rule,rule");
    assert_attrs(f->sink, "replan ", "weft.replan.step_added", "true,true,true,true,true,true");
    assert_int_equal(otlp_sink_count_named(f->sink, "replan reviewer\xe2\x86\x92"
                                                    "fixer"),
                     3);
    assert_int_equal(otlp_sink_count_named(f->sink, "replan fixer\xe2\x86\x92reviewer"), 3);
    /* A replan span and the step it added both link to the requesting step's span. */
    {
        json_t *replan = otlp_sink_find(f->sink,
                                        "replan reviewer\xe2\x86\x92"
                                        "fixer",
                                        0);
        json_t *requester = otlp_sink_find(f->sink, "invoke_agent reviewer", 0);
        json_t *added = otlp_sink_find(f->sink, "invoke_agent fixer", 0);
        const char *req_id = json_string_value(json_object_get(requester, "spanId"));
        json_t *l1 = json_array_get(json_object_get(replan, "links"), 0);
        json_t *l2 = json_array_get(json_object_get(added, "links"), 0);
        assert_non_null(l1);
        assert_non_null(l2);
        assert_string_equal(json_string_value(json_object_get(l1, "spanId")), req_id);
        assert_string_equal(json_string_value(json_object_get(l2, "spanId")), req_id);
        assert_string_equal(otlp_span_attr(added, "weft.step.requested_by"), "s3");
    }
    /* Usage on chat spans; the run totals add up. */
    {
        json_t *chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 0);
        assert_string_equal(otlp_span_attr(chat, "gen_ai.usage.input_tokens"), "350");
        assert_string_equal(otlp_span_attr(chat, "gen_ai.usage.output_tokens"), "90");
        assert_string_equal(otlp_span_attr(chat, "weft.llm.purpose"), "plan");
        assert_string_not_equal(otlp_span_attr(chat, "langfuse.observation.cost_details"), "");
        assert_int_equal(otlp_sink_count_named(f->sink, "chat scripted-gpt-4o-mini"),
                         f->r->llm_calls);
    }
    assert_span_model(f->sink, f->r->session_id);
    /* Content is off by default. */
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 0),
                                       "gen_ai.input.messages"),
                        "");
}

static void
test_engine_swarm_reflection_and_circuit_breaker(void **state)
{
    struct fx *f = *state;
    json_t *tripped = NULL;

    load_example(f, "swarm_reflection");
    run(f, "Build a rate limiter");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(verdicts(f->r),
                        "coder:REJECTED,coder:FIXED,reviewer:APPROVED,coder:APPROVED");
    assert_string_equal(decisions(f->r),
                        "llm:plan,llm:researcher,llm:coder,llm:reviewer,llm:coder,llm:reviewer,"
                        "llm:reviewer,circuit_breaker:qa,rule:end");
    assert_int_equal(f->r->loops[WEFT_LOOP_REFLECTION], 1);
    assert_int_equal(f->r->loops[WEFT_LOOP_CIRCUIT_BREAKER], 1);
    assert_int_equal(f->r->loops[WEFT_LOOP_REPLAN], 1);
    /* The FIXED verdict's refined output is the step's result. */
    assert_non_null(strstr(f->r->steps[1].result, "decrements tokens"));
    assert_int_equal(f->r->steps[1].attempts, 2);
    assert_names(f->sink, "invoke_agent ",
                 "invoke_agent researcher,invoke_agent coder,invoke_agent coder,"
                 "invoke_agent reviewer,invoke_agent coder,invoke_agent qa");
    assert_attrs(f->sink, "reflect ", "weft.reflection.verdict",
                 "REJECTED,FIXED,APPROVED,APPROVED");
    assert_attrs(f->sink, "invoke_agent coder", "weft.step.attempt", "1,2,1");
    /* The rejected attempt is an error span; the evaluation event carries the verdict. */
    assert_int_equal(status_code(otlp_sink_find(f->sink, "invoke_agent coder", 0)), 2);
    {
        json_t *reflect = otlp_sink_find(f->sink, "reflect coder", 0);
        json_t *ev = json_array_get(json_object_get(reflect, "events"), 0);
        assert_string_equal(json_string_value(json_object_get(ev, "name")),
                            "gen_ai.evaluation.result");
    }
    /* The breaker trip: an event with ERROR status on the deciding plan span. */
    tripped = otlp_sink_find(f->sink, "plan supervisor", 7);
    assert_non_null(tripped);
    assert_string_equal(otlp_span_attr(tripped, "weft.decision.layer"), "circuit_breaker");
    assert_string_equal(otlp_span_attr(tripped, "weft.decision.next"), "qa");
    assert_int_equal(status_code(tripped), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(tripped, "events"), 0), "name")),
                        "weft.circuit_breaker");
    assert_span_model(f->sink, f->r->session_id);
}

static void
test_engine_clarify_three_layers_across_a_session(void **state)
{
    struct fx *f = *state;
    static const char *const turns[] = {"Tell me more about it", "The Rust borrow checker",
                                        "Tell me more about it", "more about it",
                                        "what about it?",        "Compare tokio and async-std"};
    static const char *const layers[] = {"llm", "pattern",       "llm",
                                         "llm", "counter_limit", "fallback"};
    static const char *const routes[] = {"clarification", "research", "clarification",
                                         "clarification", "research", "research"};
    size_t router_chats = 0;

    load_example(f, "clarify");
    f->ro.session_id = "conv-1";
    for (size_t i = 0; i < 6; i++) {
        size_t before = otlp_sink_count(f->sink);
        run(f, turns[i]);
        assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
        assert_string_equal(f->r->decisions[0].layer, layers[i]);
        assert_string_equal(f->r->route, routes[i]);
        assert_string_equal(f->r->session_id, "conv-1");
        /* Pattern and counter layers skip the router's LLM call. */
        router_chats = 0;
        for (size_t s = before; s < otlp_sink_count(f->sink); s++) {
            json_t *span = otlp_sink_span(f->sink, s);
            if (strcmp(otlp_span_attr(span, "gen_ai.agent.name"), "router") == 0 &&
                strncmp(json_string_value(json_object_get(span, "name")), "chat ", 5) == 0) {
                router_chats++;
            }
        }
        assert_int_equal(router_chats,
                         strcmp(layers[i], "llm") == 0 || strcmp(layers[i], "fallback") == 0 ? 1
                                                                                             : 0);
    }
    assert_string_equal(f->r->output,
                        "tokio has the larger ecosystem; async-std mirrors std's API.");
    assert_attrs(f->sink, "plan orchestrator", "weft.route",
                 "clarification,,research,,clarification,,clarification,,research,,research,");
    assert_span_model(f->sink, "conv-1");
}

static void
test_engine_record_then_replay_gives_identical_structure(void **state)
{
    struct fx *f = *state;
    char rec[320];
    char *first = NULL;
    char *second = NULL;
    size_t n = 0;

    snprintf(rec, sizeof(rec), "%s/recorded.json", f->dir);
    load_example(f, "swarm_reflection");
    f->ro.record_path = rec;
    run(f, "Build a rate limiter");
    n = otlp_sink_count(f->sink);
    first = otlp_sink_names(f->sink, "");
    f->ro.record_path = NULL;
    f->ro.replay_path = rec;
    run(f, "Build a rate limiter");
    assert_int_equal(otlp_sink_count(f->sink), 2 * n);
    second = otlp_sink_names(f->sink, "");
    /* The second run's names, in order, repeat the first run's. */
    assert_int_equal(strlen(second), 2 * strlen(first) + 1);
    assert_memory_equal(second + strlen(first) + 1, first, strlen(first));
    assert_string_equal(verdicts(f->r),
                        "coder:REJECTED,coder:FIXED,reviewer:APPROVED,coder:APPROVED");
    free(first);
    free(second);
}

#define ONE_MODEL                                                                       \
    "\"models\": {\"m\": {\"provider\": \"scripted\", \"model\": \"toy\", \"script\": " \
    "\"script.json\"}}"

static void
test_engine_replay_of_a_stored_run(void **state)
{
    struct fx *f = *state;
    char ref[64];
    char *first = NULL;
    char *second = NULL;
    size_t n = 0;

    load_example(f, "swarm_reflection");
    run(f, "Build a rate limiter");
    n = otlp_sink_count(f->sink);
    first = otlp_sink_names(f->sink, "");
    /* The state database kept every exchange: the run replays from it alone. */
    snprintf(ref, sizeof(ref), "run:%s", f->r->run_id);
    f->ro.replay_path = ref;
    run(f, "Build a rate limiter");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(verdicts(f->r),
                        "coder:REJECTED,coder:FIXED,reviewer:APPROVED,coder:APPROVED");
    assert_int_equal(otlp_sink_count(f->sink), 2 * n);
    second = otlp_sink_names(f->sink, "");
    assert_string_equal(second + strlen(first) + 1, first);
    free(first);
    free(second);
    f->ro.replay_path = "run:doesnotexist";
    {
        char error[256];
        weft_run_result_free(f->r);
        f->r = NULL;
        assert_weft_err(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)), WEFT_ENOTFOUND);
        assert_non_null(strstr(error, "no stored LLM exchanges"));
    }
}

static void
test_engine_unknown_and_disallowed_requests_are_refused_to_the_model(void **state)
{
    struct fx *f = *state;

    load_inline(
        f,
        "{\"name\": \"req\", " ONE_MODEL ", \"agents\": ["
        "{\"name\": \"a\", \"can_request\": [\"b\"]}, {\"name\": \"b\"}, {\"name\": \"c\"}],"
        "\"plan\": [{\"agent\": \"a\", \"task\": \"go\"}]}",
        "{\"responses\": {\"a\": {\"act\": ["
        "{\"tool_calls\": [{\"name\": \"request_agent\", \"arguments\": {\"agent\": "
        "\"ghost\", \"query\": \"boo\"}},"
        "{\"name\": \"request_agent\", \"arguments\": {\"agent\": \"c\", \"query\": \"q\"}},"
        "{\"name\": \"request_agent\", \"arguments\": {\"agent\": \"b\", \"query\": \"q\"}}]},"
        "{\"content\": \"done\"}]}, \"b\": {\"act\": [{\"content\": \"b done\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 2); /* only b was added */
    assert_string_equal(f->r->steps[1].agent, "b");
    assert_int_equal(f->r->loops[WEFT_LOOP_REPLAN], 1);
    /* The tool refuses what cannot be scheduled, so the model hears it at once; only the valid
     * request reaches the supervisor. */
    assert_attrs(f->sink, "execute_tool request_agent", "weft.tool.outcome",
                 "invalid_arguments,invalid_arguments,ok");
    assert_attrs(f->sink, "replan ", "weft.replan.step_added", "true");
    {
        const json_t *ghost = otlp_sink_find(f->sink, "execute_tool request_agent", 0);
        const json_t *c = otlp_sink_find(f->sink, "execute_tool request_agent", 1);
        assert_int_equal(status_code(ghost), 2);
        assert_string_equal(otlp_span_attr(ghost, "error.type"), "unknown_agent");
        assert_non_null(
            strstr(json_string_value(json_object_get(json_object_get(ghost, "status"), "message")),
                   "no agent named 'ghost'"));
        assert_string_equal(otlp_span_attr(c, "error.type"), "agent_not_allowed");
    }
    assert_string_equal(decisions(f->r), "rule:a,rule:b,rule:end");
}

static void
test_engine_invalid_plan_is_repaired_once(void **state)
{
    struct fx *f = *state;
    json_t *plan = NULL;

    load_inline(f, "{\"name\": \"p\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\"}]}",
                "{\"responses\": {\"supervisor\": {\"plan\": ["
                "{\"content\": {\"plan\": [{\"agent\": \"wizard\", \"task\": \"t\"}]}},"
                "{\"content\": {\"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}}]},"
                "\"a\": {\"act\": [{\"content\": \"ok\"}]}}}");
    run(f, "x");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    plan = otlp_sink_find(f->sink, "plan supervisor", 0);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(plan, "events"), 0), "name")),
                        "weft.plan.invalid");
    assert_int_equal(otlp_sink_count_named(f->sink, "chat toy"), 3);
}

static void
test_engine_plan_invalid_twice_fails_the_run(void **state)
{
    struct fx *f = *state;
    json_t *plan = NULL;

    load_inline(f, "{\"name\": \"p\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\"}]}",
                "{\"responses\": {\"supervisor\": {\"plan\": ["
                "{\"content\": {\"plan\": [{\"id\": \"x\", \"agent\": \"a\", \"task\": \"t\","
                " \"depends_on\": [\"y\"]}, {\"id\": \"y\", \"agent\": \"a\", \"task\": \"t\","
                " \"depends_on\": [\"x\"]}]}},"
                "{\"content\": \"not json at all\"}]}}}");
    run(f, "x");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_non_null(strstr(f->r->reason, "no valid plan"));
    plan = otlp_sink_find(f->sink, "plan supervisor", 0);
    assert_int_equal(status_code(plan), 2);
    assert_string_equal(otlp_span_attr(plan, "error.type"), "invalid_plan");
    assert_int_equal(json_array_size(json_object_get(plan, "events")), 2);
    assert_int_equal(status_code(otlp_sink_find(f->sink, "invoke_workflow p", 0)), 2);
}

static void
test_engine_malformed_reflection_counts_as_rejected(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"r\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\","
                " \"reflection\": {\"max_retries\": 1}}],"
                "\"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
                "{\"responses\": {\"a\": {\"act\": [{\"content\": \"v1\"}, {\"content\": \"v2\"}],"
                "\"reflect\": [{\"content\": \"looks fine to me\"}, {\"content\": {\"status\": "
                "\"APPROVED\"}}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(verdicts(f->r), "a:REJECTED,a:APPROVED");
    assert_string_equal(f->r->output, "v2");
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "reflect a", 0), "error.type"),
                        "invalid_reflection");
}

static void
test_engine_rejections_past_max_retries_fail_the_step(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"r\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\","
                " \"reflection\": {\"max_retries\": 1}}],"
                "\"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
                "{\"responses\": {\"a\": {\"act\": [{\"content\": \"v1\"}, {\"content\": \"v2\"}],"
                "\"reflect\": [{\"content\": {\"status\": \"REJECTED\", \"feedback\": \"no\"}},"
                "{\"content\": {\"status\": \"REJECTED\", \"feedback\": \"still wrong\"}}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_non_null(strstr(f->r->reason, "still wrong"));
    assert_attrs(f->sink, "invoke_agent a", "weft.step.status", "retrying,failed");
}

static void
test_engine_missing_scripted_response_fails_the_step(void **state)
{
    struct fx *f = *state;
    json_t *chat = NULL;

    load_inline(f,
                "{\"name\": \"m\", " ONE_MODEL
                ", \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
                "\"plan\": [{\"agent\": \"a\", \"task\": \"t\"},"
                " {\"agent\": \"b\", \"task\": \"t\", \"depends_on\": [\"s1\"]}]}",
                "{\"responses\": {}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_string_equal(f->r->steps[1].status, "skipped");
    chat = otlp_sink_find(f->sink, "chat toy", 0);
    assert_string_equal(otlp_span_attr(chat, "error.type"), "script_exhausted");
    assert_int_equal(status_code(chat), 2);
    assert_string_equal(decisions(f->r), "rule:a,rule:end");
}

/* The last root named @p root carries weft.run.budget @p name, .limit @p limit and .used @p used
 * (NULL: not checked). */
static void
expect_budget(struct fx *f, const char *root, const char *name, const char *limit, const char *used)
{
    size_t n = otlp_sink_count_named(f->sink, root);
    const json_t *span = NULL;

    assert_true(n > 0);
    span = otlp_sink_find(f->sink, root, n - 1);
    assert_string_equal(otlp_span_attr(span, "weft.run.budget"), name);
    if (limit != NULL) {
        assert_string_equal(otlp_span_attr(span, "weft.run.budget.limit"), limit);
    }
    if (used != NULL) {
        assert_string_equal(otlp_span_attr(span, "weft.run.budget.used"), used);
    }
}

static void
test_engine_iteration_budget_ends_the_run(void **state)
{
    struct fx *f = *state;

    load_inline(
        f,
        "{\"name\": \"b\", " ONE_MODEL ", \"supervisor\": {\"max_iterations\": 2},"
        "\"agents\": [{\"name\": \"a\"}],"
        "\"plan\": [{\"agent\": \"a\", \"task\": \"1\"}, {\"agent\": \"a\", \"task\": \"2\"},"
        " {\"agent\": \"a\", \"task\": \"3\"}]}",
        "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\"}, {\"content\": \"y\"},"
        " {\"content\": \"z\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_BUDGET_EXHAUSTED);
    assert_non_null(strstr(f->r->reason, "max_iterations (2)"));
    assert_int_equal(f->r->iterations, 2);
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "invoke_workflow b", 0), "weft.run.status"),
        "budget_exhausted");
    /* The budget that ended it, on the root: what the why panel reads. */
    expect_budget(f, "invoke_workflow b", "max_iterations", "2", "2");
}

static void
test_engine_token_and_cost_budgets_end_the_run(void **state)
{
    struct fx *f = *state;
    static const char script[] =
        "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\", \"usage\": {\"input_tokens\": "
        "600, \"output_tokens\": 500}}, {\"content\": \"y\"}]}}}";

    load_inline(
        f,
        "{\"name\": \"t\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\", \"prices\": {\"input_per_1m\": 1000, \"output_per_1m\": 1000}}},"
        "\"supervisor\": {\"max_tokens\": 1000}, \"agents\": [{\"name\": \"a\"}],"
        "\"plan\": [{\"agent\": \"a\", \"task\": \"1\"}, {\"agent\": \"a\", \"task\": \"2\"}]}",
        script);
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_BUDGET_EXHAUSTED);
    assert_non_null(strstr(f->r->reason, "token budget"));
    assert_int_equal(f->r->input_tokens, 600);
    expect_budget(f, "invoke_workflow t", "max_tokens", "1000", "1100");
    load_inline(
        f,
        "{\"name\": \"t\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\", \"prices\": {\"input_per_1m\": 1000, \"output_per_1m\": 1000}}},"
        "\"supervisor\": {\"max_cost_usd\": 1.0}, \"agents\": [{\"name\": \"a\"}],"
        "\"plan\": [{\"agent\": \"a\", \"task\": \"1\"}, {\"agent\": \"a\", \"task\": \"2\"}]}",
        script);
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_BUDGET_EXHAUSTED);
    assert_non_null(strstr(f->r->reason, "cost budget"));
    assert_true(f->r->cost_usd > 1.09 && f->r->cost_usd < 1.11);
    expect_budget(f, "invoke_workflow t", "max_cost_usd", NULL, NULL);
}

static void
test_engine_max_tool_rounds_fails_the_step(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"t\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\", \"tools\": "
                "[\"read_file\"], \"max_tool_rounds\": 2}],"
                "\"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
                "{\"responses\": {\"a\": {\"act\": ["
                "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
                "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]},"
                "{\"content\": \"never reached\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_non_null(strstr(f->r->reason, "max_tool_rounds (2)"));
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "invoke_agent a", 0), "error.type"),
                        "max_tool_rounds");
}

static void
test_engine_bad_tool_calls_are_returned_not_run(void **state)
{
    struct fx *f = *state;
    char path[400];

    load_inline(
        f,
        "{\"name\": \"t\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\", \"tools\": "
        "[\"write_file\"]}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
        "{\"responses\": {\"a\": {\"act\": ["
        "{\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"out.txt\"}},"
        " {\"name\": \"write_file\", \"arguments\": \"{not json\"},"
        " {\"name\": \"delete_everything\", \"arguments\": {}}]},"
        "{\"content\": \"gave up\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_attrs(f->sink, "execute_tool ", "weft.tool.outcome",
                 "invalid_arguments,invalid_arguments,unknown_tool");
    assert_int_equal(status_code(otlp_sink_find(f->sink, "execute_tool write_file", 0)), 2);
    snprintf(path, sizeof(path), "%s/out.txt", f->dir);
    assert_int_not_equal(access(path, F_OK), 0); /* the invalid call never ran */
}

static void
test_engine_step_timeout_fails_a_hung_llm_call(void **state)
{
    struct fx *f = *state;
    uint64_t t0 = weft_monotonic_ns();

    load_inline(
        f,
        "{\"name\": \"t\", " ONE_MODEL ", \"supervisor\": {\"step_timeout_s\": 0.2},"
        "\"agents\": [{\"name\": \"a\"}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
        "{\"responses\": {\"a\": {\"act\": [{\"content\": \"late\", \"delay_ms\": 30000}]}}}");
    run(f, NULL);
    assert_true(weft_monotonic_ns() - t0 < 5000000000ull); /* cut at 0.2 s, not 30 s */
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "chat toy", 0), "error.type"),
                        "timeout");
    assert_non_null(strstr(f->r->reason, "timeout"));
}

static void
test_engine_run_timeout_ends_the_run(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"t\", " ONE_MODEL ", \"supervisor\": {\"timeout_s\": 0.3},"
                "\"agents\": [{\"name\": \"a\"}], \"plan\": [{\"agent\": \"a\", \"task\": \"1\"},"
                " {\"agent\": \"a\", \"task\": \"2\"}]}",
                "{\"responses\": {\"a\": {\"act\": [{\"content\": \"ok\", \"delay_ms\": 200},"
                " {\"content\": \"ok\", \"delay_ms\": 200}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_TIMED_OUT);
    assert_non_null(strstr(f->r->reason, "run timeout"));
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "invoke_workflow t", 0), "weft.run.status"),
        "timed_out");
    expect_budget(f, "invoke_workflow t", "timeout_s", "0.3", NULL);
}

/* A command step is cut at the run's deadline, not left to its own (default) timeout. */
static void
test_engine_run_timeout_cuts_a_command_step(void **state)
{
    struct fx *f = *state;
    uint64_t t0 = weft_monotonic_ns();

    load_inline(f,
                "{\"name\": \"t\", " ONE_MODEL ", \"supervisor\": {\"timeout_s\": 0.5},"
                "\"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"slow\", "
                "\"executor\": \"command\", \"argv\": [\"sleep\", \"5\"]}]}",
                "{\"responses\": {}}");
    run(f, NULL);
    assert_true(weft_monotonic_ns() - t0 < 3000000000ull); /* cut near 0.5 s, not 5 s */
    assert_int_equal(f->r->status, WEFT_RUN_TIMED_OUT);
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "invoke_workflow t", 0), "weft.run.status"),
        "timed_out");
    expect_budget(f, "invoke_workflow t", "timeout_s", "0.5", NULL);
}

/* A command step's process is told its run, its step and the run's request. */
static void
test_engine_command_step_sees_its_run(void **state)
{
    struct fx *f = *state;
    char want[128];
    char *big = NULL;
    json_t *out = NULL;

    load_inline(f,
                "{\"name\": \"t\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\"}], "
                "\"plan\": [{\"id\": \"look\", \"executor\": \"command\", \"argv\": "
                "[\"sh\", \"-c\", \"printf '%s|%s|%s' \\\"$WEFT_STEP_ID\\\" "
                "\\\"$WEFT_RUN_INPUT\\\" \\\"$WEFT_RUN_ID\\\"\"]}]}",
                "{\"responses\": {}}");
    run(f, "refund ticket \"42\"");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    snprintf(want, sizeof(want), "look|refund ticket \"42\"|%s", f->r->run_id);
    out = json_loads(f->r->output, 0, NULL); /* the step's result: {exit_code, stdout, ...} */
    assert_non_null(out);
    assert_string_equal(json_string_value(json_object_get(out, "stdout")), want);
    json_decref(out);

    /* A request past 64 KiB is cut, and says so. */
    big = calloc(70001, 1);
    assert_non_null(big);
    memset(big, 'x', 70000);
    load_inline(f,
                "{\"name\": \"t\", " ONE_MODEL ", \"agents\": [{\"name\": \"a\"}], "
                "\"plan\": [{\"id\": \"look\", \"executor\": \"command\", \"argv\": "
                "[\"sh\", \"-c\", \"printf '%s %s' ${#WEFT_RUN_INPUT} "
                "\\\"$WEFT_RUN_INPUT_TRUNCATED\\\"\"]}]}",
                "{\"responses\": {}}");
    run(f, big);
    free(big);
    out = json_loads(f->r->output, 0, NULL);
    assert_non_null(out);
    assert_string_equal(json_string_value(json_object_get(out, "stdout")), "65536 1");
    json_decref(out);
}

static void
test_engine_replan_on_keywords_request_an_agent(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"k\", " ONE_MODEL ", \"agents\": ["
                "{\"name\": \"scanner\", \"can_request\": [\"fixer\"],"
                " \"replan_on\": {\"keywords\": [\"sql injection\"], \"agent\": \"fixer\"}},"
                "{\"name\": \"fixer\"}], \"plan\": [{\"agent\": \"scanner\", \"task\": \"scan\"}]}",
                "{\"responses\": {\"scanner\": {\"act\": [{\"content\": \"Found a SQL Injection in "
                "q.py\"}]},"
                " \"fixer\": {\"act\": [{\"content\": \"fixed\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(decisions(f->r), "rule:scanner,rule:fixer,rule:end");
    assert_string_equal(f->r->steps[1].task, "Found a SQL Injection in q.py");
    assert_string_equal(f->r->steps[1].requested_by, "s1");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(
                json_object_get(otlp_sink_find(f->sink, "invoke_agent scanner", 0), "events"), 0),
            "name")),
        "weft.replan_on");
}

static void
test_engine_route_llm_failure_falls_back_to_the_rule(void **state)
{
    struct fx *f = *state;

    load_inline(
        f,
        "{\"name\": \"f\", " ONE_MODEL ", \"supervisor\": {\"route_with_llm\": true},"
        "\"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
        "\"plan\": [{\"agent\": \"a\", \"task\": \"1\"}, {\"agent\": \"b\", \"task\": \"2\"}]}",
        "{\"responses\": {\"supervisor\": {\"route\": [{\"error\": \"http_500\"},"
        " {\"content\": \"b please\"}, {\"content\": {\"next\": \"end\"}}]},"
        " \"a\": {\"act\": [{\"content\": \"x\"}]}, \"b\": {\"act\": [{\"content\": \"y\"}]}}}");
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(decisions(f->r), "fallback:a,fallback:b,llm:end");
    assert_non_null(strstr(f->r->decisions[0].reason, "http_500"));
    assert_non_null(strstr(f->r->decisions[1].reason, "malformed"));
}

/* Does the file at @p path contain @p needle? */
static bool
file_contains(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n = 0;

    if (fp == NULL) {
        return false;
    }
    n = fread(buf, 1, sizeof(buf), fp);
    fclose(fp);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

#define SECRET_KEY "sk-weft-test-0123456789abcdefSECRET"

static void
test_engine_openai_example_against_a_local_server(void **state)
{
    struct fx *f = *state;
    struct openai_server *srv = NULL;
    char base[128];
    char path[400];
    char rec[400];
    char *first = NULL;
    size_t len = 0;
    const char *raw = NULL;
    const json_t *body = NULL;

    assert_int_equal(openai_server_start(&srv), 0);
    openai_server_expect_key(srv, SECRET_KEY);
    weft_test_setenv("OPENAI_BASE_URL", openai_server_base_url(srv, base, sizeof(base)));
    weft_test_setenv("OPENAI_API_KEY", SECRET_KEY);
    weft_test_capture_logs();
    load_example(f, "openai");
    openai_server_push_error(srv, 429, "0", "rate limited, retry");
    openai_server_push_tool_call(
        srv, "call_w1", "write_file",
        "{\"path\": \"notes.md\", \"content\": \"- traces\\n- loops\\n- costs\\n\"}", 210, 40);
    openai_server_push_text(srv, "Wrote three bullet points to notes.md.", 260, 12);
    openai_server_push_tool_call(srv, "call_r1", "read_file", "{\"path\": \"notes.md\"}", 180, 15);
    openai_server_push_text(srv, "notes.md answers the request.", 240, 9);
    snprintf(rec, sizeof(rec), "%s/openai-recording.json", f->dir);
    f->ro.record_path = rec;
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->output, "notes.md answers the request.");
    assert_int_equal(openai_server_request_count(srv), 5); /* 429 retried once */
    /* The real API shape: tools offered with their schema, tool results sent back. */
    body = openai_server_request_body(srv, 1);
    assert_string_equal(json_string_value(json_object_get(body, "model")), "gpt-4o-mini");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(body, "tools"), 0), "function"),
            "name")),
        "write_file");
    body = openai_server_request_body(srv, 2);
    {
        const json_t *msgs = json_object_get(body, "messages");
        const json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
        assert_string_equal(json_string_value(json_object_get(last, "role")), "tool");
        assert_string_equal(json_string_value(json_object_get(last, "tool_call_id")), "call_w1");
    }
    snprintf(path, sizeof(path), "%s/notes.md", f->dir);
    assert_true(file_contains(path, "- loops"));
    /* Spans: provider, usage and cost from the price table. */
    {
        json_t *chat = otlp_sink_find(f->sink, "chat gpt-4o-mini", 0);
        assert_string_equal(otlp_span_attr(chat, "gen_ai.provider.name"), "openai");
        assert_string_equal(otlp_span_attr(chat, "gen_ai.usage.input_tokens"), "210");
        assert_string_not_equal(otlp_span_attr(chat, "weft.cost.usd"), "");
    }
    assert_int_equal(f->r->input_tokens, 210 + 260 + 180 + 240);
    /* The key reached the server and nothing else: no exported byte, no state, no
     * recording, no log line. */
    assert_non_null(strstr(openai_server_request_headers(srv, 0), SECRET_KEY));
    raw = otlp_sink_raw(f->sink, &len);
    assert_null(memmem(raw, len, SECRET_KEY, strlen(SECRET_KEY)));
    assert_false(file_contains(f->state, SECRET_KEY));
    assert_false(file_contains(rec, SECRET_KEY));
    assert_null(strstr(weft_test_logs(), SECRET_KEY));
    /* The recording replays without the server, giving the same span structure. */
    first = otlp_sink_names(f->sink, "");
    openai_server_stop(srv);
    f->ro.record_path = NULL;
    f->ro.replay_path = rec;
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    {
        char *both = otlp_sink_names(f->sink, "");
        assert_string_equal(both + strlen(first) + 1, first);
        free(both);
    }
    free(first);
    weft_test_setenv("OPENAI_BASE_URL", NULL);
    weft_test_setenv("OPENAI_API_KEY", NULL);
}

static void
test_engine_missing_api_key_is_a_start_error(void **state)
{
    struct fx *f = *state;
    char error[512] = "";

    weft_test_setenv("OPENAI_API_KEY", NULL);
    load_example(f, "openai");
    assert_weft_err(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)), WEFT_EINVAL);
    assert_non_null(strstr(error, "OPENAI_API_KEY is not set"));
}

static weft_err
stock_level(void *user_data, const char *arguments_json, struct weft_tool_result *result)
{
    (void)user_data;
    return weft_tool_result_set(result,
                                strstr(arguments_json, "\"sku\":\"A1\"") != NULL
                                    ? "{\"sku\": \"A1\", \"in_stock\": 7}"
                                    : "{\"error\": \"unknown sku\"}",
                                strstr(arguments_json, "\"sku\":\"A1\"") == NULL);
}

static void
test_engine_native_tools_and_path_escapes(void **state)
{
    struct fx *f = *state;
    struct weft_tools *tools = NULL;
    char error[256] = "";

    assert_weft_ok(weft_tools_new(&tools));
    assert_weft_ok(weft_tools_add(tools, "stock_level", "Units in stock for a SKU",
                                  "{\"type\": \"object\", \"properties\": {\"sku\": {\"type\": "
                                  "\"string\"}}, \"required\": [\"sku\"]}",
                                  stock_level, NULL));
    load_inline(
        f,
        "{\"name\": \"n\", " ONE_MODEL ", \"tools\": [{\"name\": \"stock_level\","
        " \"type\": \"native\"}], \"agents\": [{\"name\": \"a\", \"tools\": "
        "[\"stock_level\", \"read_file\"]}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
        "{\"responses\": {\"a\": {\"act\": [{\"tool_calls\": ["
        "{\"name\": \"stock_level\", \"arguments\": {\"sku\": \"A1\"}},"
        "{\"name\": \"stock_level\", \"arguments\": {\"sku\": 5}},"
        "{\"name\": \"read_file\", \"arguments\": {\"path\": \"../../../etc/passwd\"}}]},"
        "{\"content\": \"7 in stock\"}]}}}");
    /* Declared native but not registered: the run does not start. */
    assert_weft_err(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)), WEFT_ENOTFOUND);
    assert_non_null(strstr(error, "stock_level"));
    f->ro.tools = tools;
    run(f, NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_attrs(f->sink, "execute_tool ", "weft.tool.outcome", "ok,invalid_arguments,error");
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "execute_tool read_file", 0), "error.type"),
        "path_escape");
    f->ro.tools = NULL;
    weft_tools_free(tools);
}

static void
test_engine_abort_flag_stops_the_run(void **state)
{
    struct fx *f = *state;
    static volatile sig_atomic_t flag = 1;

    load_example(f, "code_review");
    f->ro.abort_flag = &flag;
    run(f, "x");
    assert_int_equal(f->r->status, WEFT_RUN_ABORTED);
    assert_int_equal(otlp_sink_count_named(f->sink, "invoke_workflow code-review"), 1);
}

static void
test_engine_capture_content_puts_messages_on_spans(void **state)
{
    struct fx *f = *state;
    json_t *chat = NULL;

    load_example(f, "code_review");
    f->ro.capture_content = 1;
    run(f, "Add a login endpoint; deploy with sk-live-0123456789abcdefghij");
    chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 0);
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "Add a login endpoint"));
    /* Captured content passes through redaction: the key never reaches the collector. */
    {
        size_t len = 0;
        const char *raw = otlp_sink_raw(f->sink, &len);
        assert_null(memmem(raw, len, "sk-live-0123456789abcdefghij", 28));
        /* Nor does the state database, which keeps every exchange for replays. */
        assert_false(file_contains(f->state, "sk-live-0123456789abcdefghij"));
        assert_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "sk-live-0123"));
    }
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.output.messages"), "assistant"));
    assert_string_not_equal(otlp_span_attr(otlp_sink_find(f->sink, "execute_tool write_file", 0),
                                           "gen_ai.tool.call.arguments"),
                            "");
}

static void
test_engine_replay_file_missing_is_an_error(void **state)
{
    struct fx *f = *state;
    char error[512] = "";

    load_example(f, "code_review");
    f->ro.replay_path = "/nonexistent/replay.json";
    assert_weft_err(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)), WEFT_ENOTFOUND);
    assert_null(f->r);
    assert_non_null(strstr(error, "/nonexistent/replay.json"));
}

/* The model keeps routing to the researcher after its one step is done: the breaker trips on
 * the repeated no-op route and ends the run, and the coder's step never ran. That is no
 * success: the run ends as stuck, and its reason says why and what was left. */
static void
test_engine_breaker_ending_with_steps_left_is_stuck(void **state)
{
    struct fx *f = *state;
    const char *route = "{\"content\": {\"next\": \"researcher\", \"reason\": \"more\"}}";
    char script[1024];

    snprintf(script, sizeof(script),
             "{\"responses\": {\"supervisor\": {\"route\": [%s, %s, %s, %s]}, \"researcher\": "
             "{\"act\": [{\"content\": \"facts\"}]}}}",
             route, route, route, route);
    load_inline(f,
                "{\"name\": \"loopy\", \"supervisor\": {\"route_with_llm\": true, "
                "\"circuit_breaker\": 2}, \"models\": {\"m\": {\"provider\": \"scripted\", "
                "\"script\": \"script.json\"}}, \"agents\": [{\"name\": \"researcher\"}, "
                "{\"name\": \"coder\"}], \"plan\": [{\"id\": \"s1\", \"agent\": \"researcher\", "
                "\"task\": \"find\"}, {\"id\": \"s2\", \"agent\": \"coder\", \"task\": \"write\", "
                "\"depends_on\": [\"s1\"]}]}",
                script);
    run(f, "go");
    assert_int_equal(f->r->loops[WEFT_LOOP_CIRCUIT_BREAKER], 1);
    assert_int_equal(f->r->status, WEFT_RUN_STUCK);
    assert_string_equal(f->r->steps[0].status, "completed");
    assert_string_equal(f->r->steps[1].status, "pending");
    assert_non_null(strstr(f->r->reason, "circuit breaker: route 'researcher' chosen"));
    assert_non_null(strstr(f->r->reason, "1 step(s) of the plan never ran"));
}

/* Three independent command steps that each wait (up to @p limit x 50 ms) until all three have
 * started: they can only succeed when they run at once. A fourth step joins them. */
static void
load_barrier(struct fx *f, int limit, const char *supervisor)
{
    char wf[2048];
    char barrier[256];

    snprintf(barrier, sizeof(barrier),
             "mkdir -p barrier && touch barrier/$0 && n=0 && while [ $(ls barrier | wc -l) "
             "-lt 3 ]; do n=$((n+1)); [ $n -gt %d ] && exit 1; sleep 0.05; done; echo $0 ok",
             limit);
    snprintf(wf, sizeof(wf),
             "{\"name\": \"wide\", \"supervisor\": %s, \"models\": {\"m\": {\"provider\": "
             "\"scripted\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], "
             "\"plan\": ["
             "{\"id\": \"s1\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"%s\", "
             "\"s1\"]},"
             "{\"id\": \"s2\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"%s\", "
             "\"s2\"]},"
             "{\"id\": \"s3\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"%s\", "
             "\"s3\"]},"
             "{\"id\": \"join\", \"executor\": \"command\", \"argv\": [\"ls\", \"barrier\"], "
             "\"depends_on\": [\"s1\", \"s2\", \"s3\"]}]}",
             supervisor, barrier, barrier, barrier);
    load_inline(f, wf, "{\"responses\": {}}");
}

static void
test_engine_parallel_plan_runs_ready_steps_at_once(void **state)
{
    struct fx *f = *state;
    json_t *plan = NULL;

    load_barrier(f, 200, "{\"max_parallel\": 3}");
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    for (size_t i = 0; i < f->r->step_count; i++) {
        assert_string_equal(f->r->steps[i].status, "completed");
    }
    /* One decision started the three; the join ran after them, alone. */
    assert_int_equal(f->r->decision_count, 3); /* the batch, the join, the end */
    assert_non_null(strstr(f->r->decisions[0].reason, "3 ready steps at once: s1 s2 s3"));
    assert_non_null(strstr(f->r->output, "s1"));
    plan = otlp_sink_find(f->sink, "plan supervisor", 0);
    assert_non_null(plan);
    assert_string_equal(otlp_span_attr(plan, "weft.decision.parallel"), "3");
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "plan supervisor", 1), "weft.decision.parallel"),
        "");
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool command"), 4);
}

/* Two at once, three independent steps: s1 can only end once s3 has started, and s3 is not
 * ready in the first decision (no room): it starts when s2 ends and frees its slot, while s1
 * still runs. A run that waited for the whole first pair before deciding again would fail s1. */
static void
test_engine_parallel_plan_fills_a_freed_slot_at_once(void **state)
{
    struct fx *f = *state;
    const char *wf =
        "{\"name\": \"window\", \"supervisor\": {\"max_parallel\": 2}, \"models\": {\"m\": "
        "{\"provider\": \"scripted\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": "
        "\"a\"}], \"plan\": ["
        "{\"id\": \"s1\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"n=0; while [ ! "
        "-e s3.started ]; do n=$((n+1)); [ $n -gt 200 ] && exit 1; sleep 0.05; done; echo s1 "
        "ok\"]},"
        "{\"id\": \"s2\", \"executor\": \"command\", \"argv\": [\"echo\", \"s2 ok\"]},"
        "{\"id\": \"s3\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"touch "
        "s3.started; echo s3 ok\"]}]}";
    json_t *second = NULL;

    load_inline(f, wf, "{\"responses\": {}}");
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    for (size_t i = 0; i < f->r->step_count; i++) {
        assert_string_equal(f->r->steps[i].status, "completed");
    }
    /* The pair, then s3 in s2's slot while s1 ran, then the end. */
    assert_int_equal(f->r->decision_count, 3);
    assert_non_null(strstr(f->r->decisions[0].reason, "2 ready steps at once: s1 s2"));
    assert_non_null(strstr(f->r->decisions[1].reason, "next ready step s3"));
    second = otlp_sink_find(f->sink, "plan supervisor", 1);
    assert_non_null(second);
    assert_string_equal(otlp_span_attr(second, "weft.step.id"), "s3");
    /* s1 ended last: its output is the run's. */
    assert_non_null(strstr(f->r->output, "s1 ok"));
}

/* The run's option wins over the workflow's: with 1, the steps run one after the other, so the
 * first one's barrier gives up and the run fails there. */
static void
test_engine_parallel_plan_option_one_runs_steps_in_order(void **state)
{
    struct fx *f = *state;

    load_barrier(f, 10, "{\"max_parallel\": 3}");
    f->ro.max_parallel = 1;
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    assert_string_equal(f->r->steps[1].status, "pending");
    assert_null(strstr(f->r->decisions[0].reason, "at once"));
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_engine_code_review_loops_back_until_approved),
        T(test_engine_swarm_reflection_and_circuit_breaker),
        T(test_engine_clarify_three_layers_across_a_session),
        T(test_engine_record_then_replay_gives_identical_structure),
        T(test_engine_replay_of_a_stored_run),
        T(test_engine_unknown_and_disallowed_requests_are_refused_to_the_model),
        T(test_engine_invalid_plan_is_repaired_once),
        T(test_engine_plan_invalid_twice_fails_the_run),
        T(test_engine_malformed_reflection_counts_as_rejected),
        T(test_engine_rejections_past_max_retries_fail_the_step),
        T(test_engine_missing_scripted_response_fails_the_step),
        T(test_engine_iteration_budget_ends_the_run),
        T(test_engine_token_and_cost_budgets_end_the_run),
        T(test_engine_max_tool_rounds_fails_the_step),
        T(test_engine_bad_tool_calls_are_returned_not_run),
        T(test_engine_step_timeout_fails_a_hung_llm_call),
        T(test_engine_run_timeout_ends_the_run),
        T(test_engine_run_timeout_cuts_a_command_step),
        T(test_engine_command_step_sees_its_run),
        T(test_engine_replan_on_keywords_request_an_agent),
        T(test_engine_route_llm_failure_falls_back_to_the_rule),
        T(test_engine_openai_example_against_a_local_server),
        T(test_engine_missing_api_key_is_a_start_error),
        T(test_engine_native_tools_and_path_escapes),
        T(test_engine_abort_flag_stops_the_run),
        T(test_engine_capture_content_puts_messages_on_spans),
        T(test_engine_replay_file_missing_is_an_error),
        T(test_engine_breaker_ending_with_steps_left_is_stuck),
        T(test_engine_parallel_plan_runs_ready_steps_at_once),
        T(test_engine_parallel_plan_fills_a_freed_slot_at_once),
        T(test_engine_parallel_plan_option_one_runs_steps_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
