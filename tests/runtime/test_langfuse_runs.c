/* tests/runtime/test_langfuse_runs.c - whole runs of every scripted example workflow exported
 * to the Langfuse-compatible test server (tests/support/langfuse_server.c), as a user would run
 * them with LANGFUSE_* set: the observation type of every span follows its kind, trace-wide
 * attributes are on every span, generations carry model, usage and cost JSON, the server
 * accepts every request and every score (run outcome on the trace, each reflection verdict on
 * its reflect observation), a conversational session groups its runs, the secret key is
 * nowhere in the traffic, and a Langfuse outage loses nothing and delays neither the run nor
 * the other exporter. */
#define _GNU_SOURCE /* memmem */

#include "support/langfuse_server.h"
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include "runtime/observe/semconv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK "pk-lf-runs"
#define SK "sk-lf-runs-secret-7f3a"

struct fx {
    struct langfuse_server *srv;
    char host[96];
    char dir[64];
    char state[128];
    struct weft_provider *provider;
    struct weft_exporter *lf;
    struct mem_exporter *mem;
    struct weft_workflow *wf;
    struct weft_run_result *r;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(langfuse_server_start(PK, SK, &f->srv), 0);
    langfuse_server_host(f->srv, f->host, sizeof(f->host));
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-lfruns-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    weft_provider_free(f->provider);
    langfuse_server_stop(f->srv);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A provider with the Langfuse exporter and an in-memory exporter, each behind its own batch
 * processor, as weft_provider_add_env_exporters() sets them up. */
static void
start_provider(struct fx *f)
{
    struct weft_langfuse_options o;
    struct weft_batch_options bo = {4096, 512, 3600000, 30000};
    struct weft_exporter *mem = NULL;
    struct weft_processor *proc = NULL;

    memset(&o, 0, sizeof(o));
    o.host = f->host;
    o.public_key = PK;
    o.secret_key = SK;
    o.environment = "ci-env";
    o.release = "r42";
    o.timeout_ms = 2000;
    o.max_retry_ms = 20000;
    o.initial_backoff_ms = 50;
    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(weft_langfuse_exporter_new(&o, &f->lf));
    assert_weft_ok(weft_batch_processor_new(f->lf, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
    assert_weft_ok(mem_exporter_new(&mem, &f->mem));
    assert_weft_ok(weft_batch_processor_new(mem, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
}

static void
run_example(struct fx *f, const char *name, const char *input, const char *session)
{
    static const char *const tags[] = {"ci", "langfuse"};
    struct weft_run_options ro;
    char path[512];
    char error[512] = "";

    snprintf(path, sizeof(path), "%s/examples/%s/workflow.json", WEFT_SOURCE_DIR, name);
    weft_workflow_free(f->wf);
    f->wf = NULL;
    assert_weft_ok(weft_workflow_load(path, &f->wf, NULL));
    memset(&ro, 0, sizeof(ro));
    ro.provider = f->provider;
    ro.input = input;
    ro.session_id = session;
    ro.state_path = f->state;
    ro.workspace = f->dir;
    ro.capture_content = 1;
    ro.user_id = "user-9";
    ro.tags = tags;
    ro.tag_count = 2;
    weft_run_result_free(f->r);
    f->r = NULL;
    if (weft_run(f->wf, &ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("%s: %s", name, error);
    }
}

/* The spans of trace @p trace_id the server stored. New reference. */
static json_t *
spans_of(struct fx *f, const char *trace_id)
{
    json_t *all = langfuse_server_spans(f->srv);
    json_t *out = json_array();
    size_t i = 0;
    json_t *span = NULL;

    json_array_foreach(all, i, span)
    {
        if (strcmp(json_string_value(json_object_get(span, "traceId")), trace_id) == 0) {
            json_array_append(out, span);
        }
    }
    json_decref(all);
    return out;
}

static const char *
expected_type(const char *name)
{
    static const struct {
        const char *prefix;
        const char *type;
    } map[] = {{"chat ", "generation"},
               {"invoke_agent ", "agent"},
               {"execute_tool ", "tool"},
               {"reflect ", "evaluator"}};

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (strncmp(name, map[i].prefix, strlen(map[i].prefix)) == 0) {
            return map[i].type;
        }
    }
    return "chain"; /* the workflow, decisions, replans, corrections, loops, fan-outs */
}

static bool
has_tag(const json_t *tags, const char *tag)
{
    const json_t *values = json_object_get(json_object_get(tags, "arrayValue"), "values");
    size_t i = 0;
    json_t *v = NULL;

    json_array_foreach(values, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "stringValue")), tag) == 0) {
            return true;
        }
    }
    return false;
}

/* Everything a Langfuse user relies on, for one run. @return the reflect spans seen. */
static size_t
check_run(struct fx *f, const char *workflow, const char *session)
{
    json_t *spans = NULL;
    json_t *scores = NULL;
    size_t i = 0;
    json_t *span = NULL;
    json_t *score = NULL;
    size_t generations = 0;
    size_t reflects = 0;
    size_t verdicts = 0;
    bool has_outcome = false;
    struct langfuse_server_stats st;

    assert_weft_ok(weft_provider_force_flush(f->provider, 30000));
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.trace_rejected, 0);
    assert_int_equal(st.scores_rejected, 0);
    assert_int_equal(st.missing_ingestion_version, 0);
    spans = spans_of(f, f->r->trace_id);
    assert_true(json_array_size(spans) >= 3);
    json_array_foreach(spans, i, span)
    {
        const char *name = json_string_value(json_object_get(span, "name"));

        if (langfuse_span_str(span, "langfuse.observation.type") == NULL ||
            strcmp(langfuse_span_str(span, "langfuse.observation.type"), expected_type(name)) !=
                0) {
            fail_msg("%s: span %s has type %s", workflow, name,
                     langfuse_span_str(span, "langfuse.observation.type"));
        }
        assert_string_equal(langfuse_span_str(span, "langfuse.trace.name"), workflow);
        assert_string_equal(langfuse_span_str(span, "langfuse.session.id"), session);
        assert_string_equal(langfuse_span_str(span, "langfuse.user.id"), "user-9");
        assert_string_equal(langfuse_span_str(span, "langfuse.environment"), "ci-env");
        assert_string_equal(langfuse_span_str(span, "langfuse.release"), "r42");
        assert_true(has_tag(langfuse_span_attr(span, "langfuse.trace.tags"), "langfuse"));
        if (strcmp(expected_type(name), "generation") == 0 &&
            langfuse_span_attr(span, "gen_ai.usage.input_tokens") != NULL) {
            json_t *usage =
                json_loads(langfuse_span_str(span, "langfuse.observation.usage_details"), 0, NULL);

            assert_non_null(usage);
            assert_true(json_is_integer(json_object_get(usage, "input")));
            assert_int_equal(json_integer_value(json_object_get(usage, "total")),
                             json_integer_value(json_object_get(usage, "input")) +
                                 json_integer_value(json_object_get(usage, "output")));
            json_decref(usage);
            assert_non_null(langfuse_span_str(span, "langfuse.observation.model.name"));
            generations++;
        }
        if (strcmp(expected_type(name), "generation") != 0) {
            /* Totals on runs and agents would be counted twice. */
            assert_null(langfuse_span_attr(span, "langfuse.observation.usage_details"));
        }
        if (strncmp(name, "reflect ", 8) == 0) {
            reflects++;
        }
    }
    assert_true(generations > 0);
    /* Scores: the outcome on the trace, every verdict on its reflect observation. */
    scores = langfuse_server_scores(f->srv);
    json_array_foreach(scores, i, score)
    {
        const char *name = json_string_value(json_object_get(score, "name"));
        const char *observation = json_string_value(json_object_get(score, "observationId"));

        if (strcmp(json_string_value(json_object_get(score, "traceId")), f->r->trace_id) != 0) {
            continue;
        }
        assert_string_equal(json_string_value(json_object_get(score, "environment")), "ci-env");
        if (strcmp(name, "run_success") == 0) {
            has_outcome = true;
            assert_int_equal(json_integer_value(json_object_get(score, "value")),
                             f->r->status == WEFT_RUN_COMPLETED ? 1 : 0);
        }
        if (strcmp(name, "reflection_verdict") == 0) {
            size_t k = 0;
            json_t *s = NULL;
            bool is_found = false;

            verdicts++;
            json_array_foreach(spans, k, s)
            {
                is_found =
                    is_found ||
                    (strcmp(json_string_value(json_object_get(s, "spanId")), observation) == 0 &&
                     strncmp(json_string_value(json_object_get(s, "name")), "reflect ", 8) == 0);
            }
            assert_true(is_found);
        }
    }
    assert_true(has_outcome);
    assert_int_equal(verdicts, f->r->verdict_count);
    json_decref(scores);
    json_decref(spans);
    return reflects;
}

/* The secret key appears in no request the server received (headers carry it only inside the
 * Basic credentials, base64-encoded). */
static void
assert_secret_never_sent(struct fx *f)
{
    struct http_receiver *rx = langfuse_server_receiver(f->srv);

    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *req = http_receiver_request(rx, i);

        assert_null(strstr(req->headers, SK));
        assert_true(req->body == NULL || memmem(req->body, req->body_len, SK, strlen(SK)) == NULL);
    }
}

static void
test_langfuse_runs_every_example_is_well_formed(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *example;
        const char *workflow;
        const char *input;
    } examples[] = {
        {"code_review", "code-review", "Add a login endpoint to the user service"},
        {"swarm_reflection", NULL, "Write a haiku about tracing"},
        {"translation", NULL, NULL},
        {"correction", NULL, NULL},
        {"clarify", NULL, "Tell me more about it"},
    };
    size_t reflects = 0;

    start_provider(f);
    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        char session[64];

        snprintf(session, sizeof(session), "session-%zu", i);
        run_example(f, examples[i].example, examples[i].input, session);
        reflects += check_run(f, weft_workflow_name(f->wf), session);
    }
    assert_true(reflects > 0); /* the reflection examples did reflect */
    assert_secret_never_sent(f);
}

/* With the newest GenAI conventions opted into, Langfuse still gets each generation's model,
 * usage, input and output. */
static void
test_langfuse_runs_latest_semconv_keeps_the_mapping(void **state)
{
    struct fx *f = *state;
    json_t *spans = NULL;
    size_t i = 0;
    json_t *span = NULL;
    size_t generations = 0;

    weft_test_setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental");
    weft__semconv_reload();
    start_provider(f);
    run_example(f, "code_review", "Add a login endpoint to the user service", "session-latest");
    weft_test_setenv("OTEL_SEMCONV_STABILITY_OPT_IN", NULL);
    weft__semconv_reload();
    (void)check_run(f, "code-review", "session-latest");
    spans = spans_of(f, f->r->trace_id);
    json_array_foreach(spans, i, span)
    {
        const char *name = json_string_value(json_object_get(span, "name"));
        if (strcmp(expected_type(name), "generation") != 0) {
            continue;
        }
        generations++;
        assert_string_equal(langfuse_span_str(span, "langfuse.observation.model.name"),
                            "scripted-gpt-4o-mini");
        assert_non_null(langfuse_span_str(span, "langfuse.observation.usage_details"));
        assert_non_null(langfuse_span_str(span, "langfuse.observation.input"));
        assert_non_null(langfuse_span_str(span, "langfuse.observation.output"));
        assert_non_null(langfuse_span_str(span, "gen_ai.input.messages"));
    }
    assert_true(generations > 0);
    json_decref(spans);
}

static void
test_langfuse_runs_session_groups_a_conversation(void **state)
{
    struct fx *f = *state;
    char first[33];

    start_provider(f);
    run_example(f, "clarify", "Tell me more about it", "conv-7");
    snprintf(first, sizeof(first), "%s", f->r->trace_id);
    check_run(f, weft_workflow_name(f->wf), "conv-7");
    run_example(f, "clarify", "The Rust borrow checker", "conv-7");
    check_run(f, weft_workflow_name(f->wf), "conv-7");
    /* Two traces, one session. */
    assert_string_not_equal(first, f->r->trace_id);
}

static void
test_langfuse_runs_outage_loses_nothing_and_delays_nothing(void **state)
{
    struct fx *f = *state;
    struct weft_langfuse_stats st;
    size_t mem_spans = 0;
    json_t *spans = NULL;

    start_provider(f);
    langfuse_server_go_down(f->srv, 3000);
    run_example(f, "code_review", "Add a login endpoint to the user service", "outage");
    /* The run does not wait on Langfuse: it returned with nothing delivered there (a run that
     * waited for its spans to reach Langfuse would have waited out the outage and delivered
     * them). No clock: a slow machine (ThreadSanitizer) cannot fail this, nor pass it wrongly. */
    assert_int_equal(langfuse_server_span_count(f->srv), 0);
    /* Nor does the other exporter lose anything to the outage. */
    assert_weft_ok(weft_provider_force_flush(f->provider, 30000));
    mem_spans = mem_exporter_count(f->mem);
    assert_true(mem_spans >= 10);
    /* Within the retry budget, Langfuse gets everything once it is back. */
    assert_true(langfuse_server_wait_spans(f->srv, mem_spans, 20000));
    spans = spans_of(f, f->r->trace_id);
    assert_int_equal(json_array_size(spans), mem_spans);
    json_decref(spans);
    weft_langfuse_exporter_stats(f->lf, &st);
    assert_int_equal(st.spans_dropped, 0);
    assert_int_equal(st.spans_sent, mem_spans);
    check_run(f, "code-review", "outage");
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_langfuse_runs_every_example_is_well_formed),
        T(test_langfuse_runs_latest_semconv_keeps_the_mapping),
        T(test_langfuse_runs_session_groups_a_conversation),
        T(test_langfuse_runs_outage_loses_nothing_and_delays_nothing),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
