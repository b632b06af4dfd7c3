/* tests/exporters/test_langfuse.c - the Langfuse exporter against a Langfuse-compatible server
 * on 127.0.0.1 (tests/support/langfuse_server.c), which enforces Langfuse's rules: Basic auth,
 * the ingestion-version header, whole-request rejection of bad ids, score validation.
 *
 * The spans are built the way weft's runtime builds them (runtime/observe/spans.c: the three
 * vocabularies and the run-wide attributes on every span; runtime/engine/engine.c and agent.c:
 * model, usage, cost, verdicts, run outcome) and go through a real provider and batch processor.
 * Covered: observation types, trace-wide attributes, generation details, levels, metadata,
 * scores (and their validity), trace splitting, secrecy of the secret key, truncation, retries
 * without loss, the stop on 401, configuration errors, span end never waiting on Langfuse,
 * both OTLP encodings and sampling. The first tests check the test server itself, so that
 * "the server accepted it" means something. */
#include "support/langfuse_server.h"
#include "support/weft_test.h"

#include "runtime/llm/prompts.h"
#include <weft/eval.h>

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK "pk-lf-1234567890abcdef"
#define SK "sk-lf-0123456789abcdef0123456789abcdef"

static const char *const env_vars[] = {
    "LANGFUSE_HOST",
    "LANGFUSE_BASE_URL",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_ENVIRONMENT",
    "LANGFUSE_TRACING_ENVIRONMENT",
    "LANGFUSE_RELEASE",
    "LANGFUSE_SAMPLE_RATE",
    "WEFT_LANGFUSE_PROTOCOL",
    "WEFT_LANGFUSE_SCORES",
    "WEFT_LANGFUSE_MAX_VALUE_BYTES",
    "WEFT_LANGFUSE_MAX_REQUEST_BYTES",
    "WEFT_LANGFUSE_MAX_SPANS_PER_TRACE",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "WEFT_LANGFUSE_PROMPT_TTL_S",
};

struct fx {
    struct langfuse_server *srv;
    char host[64];
    struct weft_langfuse_options o; /* tests adjust it before lf_start() */
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct weft_exporter *exporter; /* owned by the provider */
    json_t *spans;
    json_t *scores;
};

static void
clear_env(void)
{
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        weft_test_setenv(env_vars[i], NULL);
    }
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    clear_env();
    assert_int_equal(langfuse_server_start(PK, SK, &f->srv), 0);
    langfuse_server_host(f->srv, f->host, sizeof(f->host));
    f->o.host = f->host;
    f->o.public_key = PK;
    f->o.secret_key = SK;
    f->o.environment = "test-env";
    f->o.release = "v1.2.3";
    f->o.timeout_ms = 5000;
    f->o.max_retry_ms = 10000;
    f->o.initial_backoff_ms = 20;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_provider_free(f->provider);
    json_decref(f->spans);
    json_decref(f->scores);
    langfuse_server_stop(f->srv);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft__rt_prompt_cache_clear();
    clear_env();
    free(f);
    return 0;
}

/* A provider with the Langfuse exporter behind its own batch processor, as
 * weft_provider_add_env_exporters() sets it up. @p delay_ms: the batch schedule (long means
 * "only on flush"). */
static void
lf_start(struct fx *f, uint32_t delay_ms)
{
    struct weft_provider_options po;
    struct weft_batch_options bo = {4096, 512, delay_ms, 30000};
    struct weft_processor *proc = NULL;

    memset(&po, 0, sizeof(po));
    po.service_name = "langfuse-test";
    po.id_seed = 42;
    assert_weft_ok(weft_provider_new(&po, &f->provider));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "weft", NULL, &f->tracer));
    assert_weft_ok(weft_langfuse_exporter_new(&f->o, &f->exporter));
    assert_string_equal(weft_exporter_name(f->exporter), "langfuse");
    assert_weft_ok(weft_batch_processor_new(f->exporter, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
}

static struct weft_langfuse_stats
lf_stats(struct fx *f)
{
    struct weft_langfuse_stats st;

    weft_langfuse_exporter_stats(f->exporter, &st);
    return st;
}

/* Flush, then take what the server stored. */
static void
lf_flush_expect(struct fx *f, weft_err expected)
{
    assert_weft_err(weft_provider_force_flush(f->provider, 20000), expected);
    json_decref(f->spans);
    json_decref(f->scores);
    f->spans = langfuse_server_spans(f->srv);
    f->scores = langfuse_server_scores(f->srv);
}

static void
lf_flush(struct fx *f)
{
    lf_flush_expect(f, WEFT_OK);
}

/* ------------------------------------------------------------------------------------------ */
/* Spans shaped like the runtime's                                                             */

enum kind { K_WORKFLOW, K_PLAN, K_AGENT, K_CHAT, K_TOOL, K_REFLECT };

/* runtime/observe/spans.c's table. */
static const struct {
    const char *operation;
    const char *genai_op;
    const char *openinference;
    const char *langfuse;
} kinds[] = {
    [K_WORKFLOW] = {"invoke_workflow", "invoke_workflow", "CHAIN", "chain"},
    [K_PLAN] = {"plan", "plan", "CHAIN", "chain"},
    [K_AGENT] = {"invoke_agent", "invoke_agent", "AGENT", "agent"},
    [K_CHAT] = {"chat", "chat", "LLM", "generation"},
    [K_TOOL] = {"execute_tool", "execute_tool", "TOOL", "tool"},
    [K_REFLECT] = {"reflect", NULL, "EVALUATOR", "evaluator"},
};

static const char *const run_tags[] = {"nightly", "eval"};

static struct weft_span *
rt_start(struct fx *f, enum kind k, const char *subject, const struct weft_span *parent)
{
    struct weft_span_start_options so;
    struct weft_attr attrs[12];
    size_t n = 0;
    char name[128];
    struct weft_span *span = NULL;

    snprintf(name, sizeof(name), "%s %s", kinds[k].operation, subject);
    if (kinds[k].genai_op != NULL) {
        attrs[n++] = weft_attr_str("gen_ai.operation.name", kinds[k].genai_op);
    }
    attrs[n++] = weft_attr_str("openinference.span.kind", kinds[k].openinference);
    attrs[n++] = weft_attr_str("langfuse.observation.type", kinds[k].langfuse);
    attrs[n++] = weft_attr_str("gen_ai.conversation.id", "sess-42");
    attrs[n++] = weft_attr_str("session.id", "sess-42");
    attrs[n++] = weft_attr_str("langfuse.trace.name", "research");
    attrs[n++] = weft_attr_str("weft.run.id", "run-1");
    attrs[n++] = weft_attr_str("user.id", "user-7");
    memset(&so, 0, sizeof(so));
    so.kind = k == K_CHAT ? WEFT_SPAN_KIND_CLIENT : WEFT_SPAN_KIND_INTERNAL;
    so.parent = parent;
    so.is_root = parent == NULL;
    so.attrs = attrs;
    so.attr_count = n;
    span = weft_span_start(f->tracer, name, &so);
    weft_span_set_str_array(span, "weft.run.tags", run_tags, 2);
    return span;
}

static void
hex_span_id(const struct weft_span *span, char out[17])
{
    struct weft_span_context ctx;

    weft_span_context_of(span, &ctx);
    weft_hex_encode(ctx.span_id, WEFT_SPAN_ID_SIZE, out);
}

static void
hex_trace_id(const struct weft_span *span, char out[33])
{
    struct weft_span_context ctx;

    weft_span_context_of(span, &ctx);
    weft_hex_encode(ctx.trace_id, WEFT_TRACE_ID_SIZE, out);
}

/* An LLM call as runtime/engine/engine.c records it (prices 0.15 and 0.60 USD per million). */
static void
emit_chat(struct fx *f, const struct weft_span *parent, int64_t in, int64_t out)
{
    struct weft_span *span = rt_start(f, K_CHAT, "gpt-4o-mini", parent);
    const char *finish = "stop";
    double ci = (double)in * 0.15 / 1e6;
    double co = (double)out * 0.60 / 1e6;
    char json[256];

    weft_span_set_str(span, "gen_ai.provider.name", "openai");
    weft_span_set_str(span, "gen_ai.request.model", "gpt-4o-mini");
    weft_span_set_str(span, "gen_ai.response.model", "gpt-4o-mini-2024-07-18");
    weft_span_set_str_array(span, "gen_ai.response.finish_reasons", &finish, 1);
    weft_span_set_int(span, "gen_ai.usage.input_tokens", in);
    weft_span_set_int(span, "gen_ai.usage.output_tokens", out);
    snprintf(json, sizeof(json), "{\"input\":%.10g,\"output\":%.10g,\"total\":%.10g}", ci, co,
             ci + co);
    weft_span_set_str(span, "langfuse.observation.cost_details", json);
    weft_span_set_double(span, "weft.cost.usd", ci + co);
    weft_span_end(span, 0);
}

struct run_ids {
    char trace[33];
    char root[17];
    char reflect[17];
};

#define RUN_SPANS 9

/* A supervised run: a plan, a researcher with an LLM call and a tool, a reflection, a failed
 * writer and a stuck-loop detection; the root carries the outcome. @p output goes on the
 * researcher as its output. */
static void
emit_run(struct fx *f, const char *status, const char *output, struct run_ids *ids)
{
    struct weft_span *root = rt_start(f, K_WORKFLOW, "research", NULL);
    struct weft_span *plan = NULL;
    struct weft_span *agent = NULL;
    struct weft_span *span = NULL;
    struct weft_attr ev[3];

    hex_trace_id(root, ids->trace);
    hex_span_id(root, ids->root);
    weft_span_set_str(root, "gen_ai.workflow.name", "research");

    plan = rt_start(f, K_PLAN, "supervisor", root);
    weft_span_set_str(plan, "weft.decision.layer", "llm");
    weft_span_set_str(plan, "weft.decision.next", "researcher");
    weft_span_set_str(plan, "weft.decision.reason", "needs sources");
    emit_chat(f, plan, 100, 20);
    weft_span_end(plan, 0);

    agent = rt_start(f, K_AGENT, "researcher", root);
    emit_chat(f, agent, 120, 30);
    span = rt_start(f, K_TOOL, "search", agent);
    weft_span_set_str(span, "gen_ai.tool.name", "search");
    weft_span_end(span, 0);
    span = rt_start(f, K_REFLECT, "researcher", agent);
    hex_span_id(span, ids->reflect);
    weft_span_set_int(span, "weft.reflection.attempt", 1);
    weft_span_set_str(span, "weft.reflection.verdict", "FIXED");
    weft_span_set_str(span, "weft.reflection.feedback", "add sources");
    weft_span_end(span, 0);
    weft_span_set_str(agent, "weft.step.status", "completed");
    if (output != NULL) {
        weft_span_set_str(agent, "langfuse.observation.output", output);
    }
    weft_span_end(agent, 0);

    span = rt_start(f, K_AGENT, "writer", root);
    weft_span_set_str(span, "weft.step.status", "failed");
    weft_span_set_str(span, "error.type", "tool_error");
    weft_span_set_status(span, WEFT_STATUS_ERROR, "boom");
    weft_span_end(span, 0);

    span = rt_start(f, K_PLAN, "watchdog", root);
    ev[0] = weft_attr_str("weft.stuck_loop.kind", "handoff");
    ev[1] = weft_attr_str("weft.stuck_loop.evidence", "writer -> critic -> writer");
    ev[2] = weft_attr_str("weft.stuck_loop.policy", "warn");
    weft_span_add_event(span, "weft.stuck_loop", ev, 3, 0);
    weft_span_add_event(root, "weft.stuck_loop", ev, 3, 0); /* the runtime's root copy */
    weft_span_end(span, 0);

    weft_span_set_str(root, "weft.run.status", status);
    weft_span_set_int(root, "weft.run.iterations", 3);
    weft_span_set_int(root, "gen_ai.usage.input_tokens", 220);
    weft_span_set_int(root, "gen_ai.usage.output_tokens", 50);
    weft_span_set_double(root, "weft.run.reward", 0.75);
    weft_span_set_int(root, "weft.run.loops.reflection", 2);
    weft_span_set_int(root, "weft.run.loops.replan", 0);
    if (strcmp(status, "completed") == 0) {
        weft_span_set_status(root, WEFT_STATUS_OK, NULL);
    } else {
        weft_span_set_str(root, "error.type", status);
        weft_span_set_status(root, WEFT_STATUS_ERROR, "the run failed");
    }
    weft_span_end(root, 0);
}

static const json_t *
span_named(struct fx *f, const char *name)
{
    const json_t *sp = langfuse_spans_find(f->spans, name);

    if (sp == NULL) {
        fail_msg("the server has no span named '%s'", name);
    }
    return sp;
}

static const json_t *
score_named(struct fx *f, const char *name)
{
    const json_t *sc = NULL;
    size_t i = 0;

    json_array_foreach(f->scores, i, sc)
    {
        if (strcmp(json_string_value(json_object_get(sc, "name")), name) == 0) {
            return sc;
        }
    }
    fail_msg("the server has no score named '%s'", name);
    return NULL;
}

/* Every span id the server stored appears once; @return how many there are. */
static size_t
distinct_span_ids(struct fx *f)
{
    json_t *seen = json_object();
    const json_t *sp = NULL;
    size_t i = 0;
    size_t n = 0;

    json_array_foreach(f->spans, i, sp)
    {
        const char *id = json_string_value(json_object_get(sp, "spanId"));
        assert_null(json_object_get(seen, id)); /* Langfuse v4 would store a duplicate */
        json_object_set_new(seen, id, json_true());
    }
    n = json_object_size(seen);
    json_decref(seen);
    return n;
}

static json_t *
json_attr(const json_t *span, const char *key)
{
    const char *text = langfuse_span_str(span, key);
    json_t *doc = NULL;

    if (text == NULL) {
        fail_msg("span '%s' has no %s", json_string_value(json_object_get(span, "name")), key);
    }
    doc = json_loads(text, 0, NULL);
    if (!json_is_object(doc)) {
        fail_msg("%s is not a JSON object: %s", key, text);
    }
    return doc;
}

/* ------------------------------------------------------------------------------------------ */
/* Raw HTTP for the server checks                                                              */

struct reply {
    long status;
    char body[4096];
    size_t len;
};

static size_t
on_body(char *data, size_t size, size_t n, void *user_data)
{
    struct reply *r = user_data;
    size_t len = size * n;
    size_t room = sizeof(r->body) - 1 - r->len;

    memcpy(r->body + r->len, data, len < room ? len : room);
    r->len += len < room ? len : room;
    r->body[r->len] = '\0';
    return len;
}

/* One request to the test server; @p user NULL sends no credentials. */
static long
call(struct fx *f,
     const char *method,
     const char *path,
     const char *user,
     const char *password,
     const char *const *headers,
     const void *body,
     size_t body_len,
     struct reply *out)
{
    CURL *curl = curl_easy_init();
    struct curl_slist *list = NULL;
    char url[256];

    assert_non_null(curl);
    memset(out, 0, sizeof(*out));
    snprintf(url, sizeof(url), "%s%s", f->host, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    if (user != NULL) {
        curl_easy_setopt(curl, CURLOPT_USERNAME, user);
        curl_easy_setopt(curl, CURLOPT_PASSWORD, password);
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        list = curl_slist_append(list, headers[i]);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    return out->status;
}

static long
post_score(struct fx *f, const char *body, struct reply *out)
{
    static const char *const headers[] = {"Content-Type: application/json", NULL};

    return call(f, "POST", "/api/public/scores", PK, SK, headers, body, strlen(body), out);
}

static long
post_traces(struct fx *f, const char *content_type, bool with_version, const char *body)
{
    char ct[128];
    const char *headers[3] = {ct, NULL, NULL};
    struct reply r;

    snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
    if (with_version) {
        headers[1] = "x-langfuse-ingestion-version: 4";
    }
    return call(f, "POST", "/api/public/otel/v1/traces", PK, SK, headers, body, strlen(body), &r);
}

/* An OTLP JSON request with two spans, the second with the given ids. */
static void
two_span_request(char *buf, size_t len, const char *trace_id, const char *span_id)
{
    snprintf(buf, len,
             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
             "{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"b7ad6b7169203331\","
             "\"name\":\"good\",\"kind\":1,\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"},"
             "{\"traceId\":\"%s\",\"spanId\":\"%s\",\"name\":\"other\",\"kind\":1,"
             "\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}]}]}]}",
             trace_id, span_id);
}

/* ------------------------------------------------------------------------------------------ */
/* The test server itself                                                                      */

static void
test_server_refuses_missing_or_wrong_credentials(void **state)
{
    struct fx *f = *state;
    struct reply r;
    struct langfuse_server_stats st;
    const char *body = "{\"name\":\"x\",\"traceId\":\"t\",\"value\":1}";
    json_t *doc = NULL;

    assert_int_equal(
        call(f, "POST", "/api/public/scores", NULL, NULL, NULL, body, strlen(body), &r), 401);
    doc = json_loads(r.body, 0, NULL);
    assert_non_null(json_string_value(json_object_get(doc, "message")));
    json_decref(doc);
    assert_int_equal(
        call(f, "POST", "/api/public/scores", PK, "sk-lf-wrong", NULL, body, strlen(body), &r),
        401);
    assert_int_equal(call(f, "POST", "/api/public/scores", SK, PK, NULL, body, strlen(body), &r),
                     401);
    assert_int_equal(call(f, "GET", "/api/public/v2/prompts/p", PK, "nope", NULL, NULL, 0, &r),
                     401);
    assert_int_equal(post_score(f, body, &r), 200); /* the right pair passes */
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.unauthorized, 4);
    assert_int_equal(langfuse_server_score_count(f->srv), 1);
}

static void
test_server_validates_scores_like_langfuse(void **state)
{
    static const char *const bad[] = {
        "not json",
        "[1]",
        "{\"traceId\":\"t\",\"value\":1}",                                    /* no name */
        "{\"name\":\"\",\"traceId\":\"t\",\"value\":1}",                      /* empty name */
        "{\"name\":\"n\",\"value\":1}",                                       /* no target */
        "{\"name\":\"n\",\"traceId\":\"t\",\"sessionId\":\"s\",\"value\":1}", /* two targets */
        "{\"name\":\"n\",\"sessionId\":\"s\",\"observationId\":\"o\",\"value\":1}",
        "{\"name\":\"n\",\"traceId\":\"t\"}", /* no value */
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":\"x\",\"dataType\":\"NUMERIC\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":1,\"dataType\":\"CATEGORICAL\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":2,\"dataType\":\"BOOLEAN\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":true,\"dataType\":\"BOOLEAN\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":1,\"dataType\":\"PERCENT\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":1,\"environment\":\"Prod!\"}",
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":1,\"observationID\":\"o\"}", /* unknown */
        "{\"name\":\"n\",\"traceId\":\"t\",\"value\":1,\"comment\":5}",
    };
    struct fx *f = *state;
    struct reply r;
    struct langfuse_server_stats st;
    json_t *doc = NULL;
    json_t *scores = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (post_score(f, bad[i], &r) != 400) {
            fail_msg("accepted (%ld): %s", r.status, bad[i]);
        }
        doc = json_loads(r.body, 0, NULL);
        assert_non_null(json_string_value(json_object_get(doc, "message")));
        json_decref(doc);
    }
    assert_int_equal(langfuse_server_score_count(f->srv), 0);

    assert_int_equal(post_score(f,
                                "{\"id\":\"s1\",\"name\":\"q\",\"traceId\":\"t\","
                                "\"observationId\":\"o\",\"value\":0.5,\"dataType\":\"NUMERIC\","
                                "\"environment\":\"prod\",\"comment\":\"c\",\"configId\":\"k\"}",
                                &r),
                     200);
    doc = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "id")), "s1");
    json_decref(doc);
    assert_int_equal(post_score(f,
                                "{\"name\":\"b\",\"sessionId\":\"s\",\"value\":1,"
                                "\"dataType\":\"BOOLEAN\"}",
                                &r),
                     200);
    assert_int_equal(post_score(f, "{\"name\":\"c\",\"datasetRunId\":\"d\",\"value\":\"ok\"}", &r),
                     200); /* dataType inferred */
    /* The same id again replaces the score (Langfuse upserts by id). */
    assert_int_equal(post_score(f,
                                "{\"id\":\"s1\",\"name\":\"q\",\"traceId\":\"t\",\"value\":0.9,"
                                "\"dataType\":\"NUMERIC\"}",
                                &r),
                     200);
    scores = langfuse_server_scores(f->srv);
    assert_int_equal(json_array_size(scores), 3);
    assert_true(json_number_value(json_object_get(json_array_get(scores, 0), "value")) == 0.9);
    json_decref(scores);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.scores_rejected, sizeof(bad) / sizeof(bad[0]));
    assert_int_equal(st.scores_accepted, 4);
    assert_int_equal(st.scores_replaced, 1);
}

static void
test_server_traces_need_version_header_media_type_and_valid_ids(void **state)
{
    struct fx *f = *state;
    char body[1024];
    struct langfuse_server_stats st;
    json_t *spans = NULL;

    two_span_request(body, sizeof(body), "0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7");
    assert_int_equal(post_traces(f, "application/json", false, body), 400);
    assert_int_equal(post_traces(f, "text/plain", true, body), 415);
    assert_int_equal(post_traces(f, "application/x-protobuf", true, "\x0a\x05"), 400);
    /* One bad span refuses the whole request: the good span beside it is not stored. */
    two_span_request(body, sizeof(body), "00000000000000000000000000000000", "00f067aa0ba902b7");
    assert_int_equal(post_traces(f, "application/json", true, body), 400);
    two_span_request(body, sizeof(body), "0af7651916cd43dd8448eb211c80319c", "0000000000000000");
    assert_int_equal(post_traces(f, "application/json", true, body), 400);
    two_span_request(body, sizeof(body), "0af7651916cd43dd8448eb211c8031", "00f067aa0ba902b7");
    assert_int_equal(post_traces(f, "application/json", true, body), 400);
    two_span_request(body, sizeof(body), "0AF7651916CD43DD8448EB211C80319C", "00f067aa0ba902b7");
    assert_int_equal(post_traces(f, "application/json", true, body), 400);
    assert_int_equal(langfuse_server_span_count(f->srv), 0);

    two_span_request(body, sizeof(body), "0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7");
    assert_int_equal(post_traces(f, "application/json; charset=utf-8", true, body), 200);
    spans = langfuse_server_spans(f->srv);
    assert_int_equal(json_array_size(spans), 2);
    assert_non_null(langfuse_spans_find(spans, "other"));
    json_decref(spans);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.missing_ingestion_version, 1);
    assert_int_equal(st.trace_unsupported, 1);
    assert_int_equal(st.trace_rejected, 6);
    assert_int_equal(st.trace_accepted, 1);
    {
        const struct http_request *last =
            http_receiver_request(langfuse_server_receiver(f->srv), 7);
        char ct[64];
        assert_non_null(last);
        assert_int_equal(last->answered, 200);
        assert_non_null(http_request_header(last, "x-langfuse-ingestion-version", ct, 64));
    }
}

static void
test_server_serves_prompts_as_the_runtime_client_reads_them(void **state)
{
    struct fx *f = *state;
    struct reply r;
    json_t *doc = NULL;
    struct rt_prompt p;
    struct rt_prompt_ref by_label = {.name = "agent orchestrator", .label = "staging"};
    struct rt_prompt_ref by_version = {.name = "agent orchestrator", .version = 1};
    struct rt_prompt_ref chat = {.name = "critic"};
    struct rt_prompt_ref missing = {.name = "nobody", .fallback = "fallback text"};
    char err[256] = "";

    assert_int_equal(langfuse_server_add_prompt(f->srv, "agent orchestrator", 1, "production",
                                                "text", "Plan the work.", NULL),
                     0);
    assert_int_equal(langfuse_server_add_prompt(f->srv, "agent orchestrator", 2, "staging", "text",
                                                "Plan the work, v2.", "{\"temperature\":0.2}"),
                     0);
    assert_int_equal(
        langfuse_server_add_prompt(
            f->srv, "critic", 4, "production,latest", "chat",
            "[{\"role\":\"system\",\"content\":\"Be strict.\"},{\"role\":\"user\",\"content\":"
            "\"Check it.\"}]",
            NULL),
        0);

    /* Langfuse's answer shape. */
    assert_int_equal(call(f, "GET", "/api/public/v2/prompts/agent%20orchestrator?label=staging", PK,
                          SK, NULL, NULL, 0, &r),
                     200);
    doc = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "name")), "agent orchestrator");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 2);
    assert_string_equal(json_string_value(json_object_get(doc, "type")), "text");
    assert_string_equal(json_string_value(json_object_get(doc, "prompt")), "Plan the work, v2.");
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "labels"), 0)),
                        "staging");
    assert_true(json_real_value(json_object_get(json_object_get(doc, "config"), "temperature")) ==
                0.2);
    json_decref(doc);
    assert_int_equal(call(f, "GET", "/api/public/v2/prompts/agent%20orchestrator?label=latest", PK,
                          SK, NULL, NULL, 0, &r),
                     200);
    assert_non_null(strstr(r.body, "\"version\":2"));
    assert_int_equal(call(f, "GET", "/api/public/v2/prompts/agent%20orchestrator?label=nope", PK,
                          SK, NULL, NULL, 0, &r),
                     404);
    assert_int_equal(
        call(f, "GET", "/api/public/v2/prompts/critic?version=9", PK, SK, NULL, NULL, 0, &r), 404);

    /* The runtime's prompt client against it. */
    weft_test_setenv("LANGFUSE_HOST", f->host);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", PK);
    weft_test_setenv("LANGFUSE_SECRET_KEY", SK);
    weft__rt_prompt_cache_clear();
    assert_weft_ok(weft__rt_prompt_resolve(&by_label, &p, err, sizeof(err)));
    assert_string_equal(p.text, "Plan the work, v2.");
    assert_int_equal(p.version, 2);
    weft__rt_prompt_cleanup(&p);
    assert_weft_ok(weft__rt_prompt_resolve(&by_version, &p, err, sizeof(err)));
    assert_string_equal(p.text, "Plan the work.");
    assert_int_equal(p.version, 1);
    weft__rt_prompt_cleanup(&p);
    assert_weft_ok(weft__rt_prompt_resolve(&chat, &p, err, sizeof(err))); /* label production */
    assert_string_equal(p.text, "Be strict.\n\nCheck it.");
    assert_int_equal(p.version, 4);
    weft__rt_prompt_cleanup(&p);
    assert_weft_ok(weft__rt_prompt_resolve(&missing, &p, err, sizeof(err)));
    assert_true(p.is_fallback);
    assert_string_equal(p.text, "fallback text");
    weft__rt_prompt_cleanup(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* The exporter                                                                                */

static void
test_langfuse_observation_types_follow_weft_span_kinds(void **state)
{
    static const struct {
        const char *name;
        const char *type;
    } want[] = {
        {"invoke_workflow research", "chain"},
        {"plan supervisor", "chain"},
        {"plan watchdog", "chain"},
        {"invoke_agent researcher", "agent"},
        {"invoke_agent writer", "agent"},
        {"chat gpt-4o-mini", "generation"},
        {"execute_tool search", "tool"},
        {"reflect researcher", "evaluator"},
    };
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;
    struct http_receiver *rx = langfuse_server_receiver(f->srv);
    char buf[128];

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *type =
            langfuse_span_str(span_named(f, want[i].name), "langfuse.observation.type");
        assert_non_null(type);
        assert_string_equal(type, want[i].type);
    }
    /* The way Langfuse wants spans: protobuf, gzip, Basic auth, ingestion version 4. */
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.trace_accepted, 1);
    assert_int_equal(st.trace_rejected + st.trace_unsupported + st.unauthorized, 0);
    assert_int_equal(st.missing_ingestion_version, 0);
    {
        const struct http_request *req = http_receiver_request(rx, 0);
        assert_string_equal(req->path, "/api/public/otel/v1/traces");
        assert_string_equal(http_request_header(req, "Content-Type", buf, sizeof(buf)),
                            "application/x-protobuf");
        assert_string_equal(http_request_header(req, "Content-Encoding", buf, sizeof(buf)), "gzip");
        assert_true(req->wire_len < req->body_len);
    }
    assert_int_equal(lf_stats(f).spans_sent, RUN_SPANS);
}

static void
test_langfuse_trace_wide_attributes_on_every_span(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    const json_t *sp = NULL;
    size_t i = 0;

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    json_array_foreach(f->spans, i, sp)
    {
        const json_t *tags =
            json_object_get(langfuse_span_attr(sp, "langfuse.trace.tags"), "arrayValue");
        const json_t *values = json_object_get(tags, "values");

        assert_string_equal(json_string_value(json_object_get(sp, "traceId")), ids.trace);
        assert_string_equal(langfuse_span_str(sp, "langfuse.trace.name"), "research");
        assert_string_equal(langfuse_span_str(sp, "langfuse.session.id"), "sess-42");
        assert_string_equal(langfuse_span_str(sp, "langfuse.user.id"), "user-7");
        assert_string_equal(langfuse_span_str(sp, "langfuse.environment"), "test-env");
        assert_string_equal(langfuse_span_str(sp, "langfuse.release"), "v1.2.3");
        assert_int_equal(json_array_size(values), 2);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(values, 0), "stringValue")),
            "nightly");
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(values, 1), "stringValue")), "eval");
    }
}

static void
test_langfuse_generation_carries_model_usage_and_cost(void **state)
{
    struct fx *f = *state;
    struct weft_span *root = NULL;
    struct weft_span *span = NULL;
    const json_t *gen = NULL;
    json_t *usage = NULL;
    json_t *cost = NULL;

    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    emit_chat(f, root, 120, 30);
    /* A failed call has no response model: the request model names it. */
    span = rt_start(f, K_CHAT, "claude", root);
    weft_span_set_str(span, "gen_ai.request.model", "claude-sonnet");
    weft_span_set_status(span, WEFT_STATUS_ERROR, "timeout");
    weft_span_end(span, 0);
    span = rt_start(f, K_TOOL, "search", root);
    weft_span_end(span, 0);
    /* The run's totals, as the runtime puts them on its root. */
    weft_span_set_int(root, "gen_ai.usage.input_tokens", 120);
    weft_span_set_str(root, "langfuse.observation.cost_details", "{\"total\":3.6e-05}");
    weft_span_end(root, 0);
    lf_flush(f);

    /* Langfuse would add them to the generations' own: on the root they are metadata. */
    gen = span_named(f, "invoke_workflow research");
    assert_null(langfuse_span_attr(gen, "langfuse.observation.usage_details"));
    assert_null(langfuse_span_attr(gen, "langfuse.observation.cost_details"));
    assert_null(langfuse_span_attr(gen, "gen_ai.usage.input_tokens"));
    assert_non_null(langfuse_span_attr(gen, "langfuse.observation.metadata.usage.input_tokens"));
    assert_non_null(langfuse_span_attr(gen, "langfuse.observation.metadata.cost_details"));

    gen = span_named(f, "chat gpt-4o-mini");
    assert_string_equal(langfuse_span_str(gen, "langfuse.observation.model.name"),
                        "gpt-4o-mini-2024-07-18");
    usage = json_attr(gen, "langfuse.observation.usage_details");
    assert_true(json_is_integer(json_object_get(usage, "input")));
    assert_int_equal(json_integer_value(json_object_get(usage, "input")), 120);
    assert_int_equal(json_integer_value(json_object_get(usage, "output")), 30);
    assert_int_equal(json_integer_value(json_object_get(usage, "total")), 150);
    cost = json_attr(gen, "langfuse.observation.cost_details");
    assert_true(fabs(json_number_value(json_object_get(cost, "input")) - 120 * 0.15e-6) < 1e-15);
    assert_true(fabs(json_number_value(json_object_get(cost, "output")) - 30 * 0.60e-6) < 1e-15);
    assert_true(fabs(json_number_value(json_object_get(cost, "total")) - 36e-6) < 1e-15);
    json_decref(usage);
    json_decref(cost);

    gen = span_named(f, "chat claude");
    assert_string_equal(langfuse_span_str(gen, "langfuse.observation.model.name"), "claude-sonnet");
    assert_null(langfuse_span_attr(gen, "langfuse.observation.usage_details"));
    assert_null(langfuse_span_attr(span_named(f, "execute_tool search"),
                                   "langfuse.observation.model.name"));
}

static void
test_langfuse_levels_error_for_failures_and_warning_for_stuck_loops(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct weft_span *root = NULL;
    struct weft_span *span = NULL;
    struct weft_attr ev[2];

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    root = rt_start(f, K_WORKFLOW, "second", NULL);
    span = rt_start(f, K_PLAN, "breaker", root);
    ev[0] = weft_attr_str("weft.circuit_breaker.route", "writer");
    ev[1] = weft_attr_int("weft.circuit_breaker.retries", 3);
    weft_span_add_event(span, "weft.circuit_breaker", ev, 2, 0);
    weft_span_end(span, 0);
    span = rt_start(f, K_TOOL, "broken", root);
    weft_span_set_status(span, WEFT_STATUS_ERROR, "exit 1");
    weft_span_end(span, 0);
    /* A failed step that also got stuck is an error first. */
    span = rt_start(f, K_AGENT, "stuck-and-failed", root);
    weft_span_set_str(span, "weft.step.status", "failed");
    ev[0] = weft_attr_str("weft.stuck_loop.kind", "repeat");
    weft_span_add_event(span, "weft.stuck_loop", ev, 1, 0);
    weft_span_end(span, 0);
    weft_span_end(root, 0);
    lf_flush(f);

    assert_string_equal(
        langfuse_span_str(span_named(f, "invoke_agent writer"), "langfuse.observation.level"),
        "ERROR");
    assert_string_equal(
        langfuse_span_str(span_named(f, "plan watchdog"), "langfuse.observation.level"), "WARNING");
    assert_string_equal(
        langfuse_span_str(span_named(f, "plan breaker"), "langfuse.observation.level"), "WARNING");
    assert_string_equal(
        langfuse_span_str(span_named(f, "execute_tool broken"), "langfuse.observation.level"),
        "ERROR");
    assert_string_equal(langfuse_span_str(span_named(f, "invoke_agent stuck-and-failed"),
                                          "langfuse.observation.level"),
                        "ERROR");
    assert_null(
        langfuse_span_attr(span_named(f, "invoke_agent researcher"), "langfuse.observation.level"));
    /* The completed run's root repeats the stuck-loop event: a warning on the trace. */
    assert_string_equal(
        langfuse_span_str(span_named(f, "invoke_workflow research"), "langfuse.observation.level"),
        "WARNING");
}

static void
test_langfuse_weft_attributes_become_filterable_metadata(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    const json_t *plan = NULL;

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    plan = span_named(f, "plan supervisor");
    assert_string_equal(langfuse_span_str(plan, "langfuse.observation.metadata.decision.layer"),
                        "llm");
    assert_string_equal(langfuse_span_str(plan, "langfuse.observation.metadata.decision.next"),
                        "researcher");
    assert_string_equal(langfuse_span_str(plan, "weft.decision.layer"), "llm"); /* kept too */
    assert_string_equal(langfuse_span_str(span_named(f, "reflect researcher"),
                                          "langfuse.observation.metadata.reflection.verdict"),
                        "FIXED");
}

static void
test_langfuse_scores_pass_validation_and_point_at_their_spans(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    const json_t *sc = NULL;
    struct langfuse_server_stats st;
    struct weft_langfuse_stats ls;
    json_t *seen = json_object();
    size_t i = 0;

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);

    sc = score_named(f, "reflection_verdict");
    assert_string_equal(json_string_value(json_object_get(sc, "dataType")), "CATEGORICAL");
    assert_string_equal(json_string_value(json_object_get(sc, "value")), "FIXED");
    assert_string_equal(json_string_value(json_object_get(sc, "traceId")), ids.trace);
    assert_string_equal(json_string_value(json_object_get(sc, "observationId")), ids.reflect);
    assert_string_equal(json_string_value(json_object_get(sc, "comment")), "add sources");

    sc = score_named(f, "run_success");
    assert_string_equal(json_string_value(json_object_get(sc, "dataType")), "BOOLEAN");
    assert_true(json_number_value(json_object_get(sc, "value")) == 1.0);
    assert_string_equal(json_string_value(json_object_get(sc, "traceId")), ids.trace);
    assert_null(json_object_get(sc, "observationId")); /* a trace-level score */

    sc = score_named(f, "run_reward");
    assert_string_equal(json_string_value(json_object_get(sc, "dataType")), "NUMERIC");
    assert_true(json_number_value(json_object_get(sc, "value")) == 0.75);

    sc = score_named(f, "loops_reflection");
    assert_true(json_number_value(json_object_get(sc, "value")) == 2.0);
    sc = score_named(f, "loops_total");
    assert_true(json_number_value(json_object_get(sc, "value")) == 2.0);
    sc = score_named(f, "stuck_loop");
    assert_string_equal(json_string_value(json_object_get(sc, "value")), "handoff");
    assert_non_null(json_object_get(sc, "observationId"));
    {
        /* One score per detection: the root span's copy of the event adds none. */
        size_t stuck = 0;
        json_array_foreach(f->scores, i, sc)
        {
            stuck += strcmp(json_string_value(json_object_get(sc, "name")), "stuck_loop") == 0;
        }
        assert_int_equal(stuck, 1);
    }

    /* Every score: the environment, and its own deterministic id. */
    json_array_foreach(f->scores, i, sc)
    {
        const char *id = json_string_value(json_object_get(sc, "id"));
        assert_string_equal(json_string_value(json_object_get(sc, "environment")), "test-env");
        assert_non_null(id);
        assert_null(json_object_get(seen, id));
        json_object_set_new(seen, id, json_true());
    }
    json_decref(seen);
    assert_int_equal(json_array_size(f->scores), 6);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.scores_rejected, 0);
    assert_int_equal(st.scores_accepted, 6);
    ls = lf_stats(f);
    assert_int_equal(ls.scores_sent, 6);
    assert_int_equal(ls.scores_failed, 0);
}

static void
test_langfuse_failed_run_scores_run_success_false(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    const json_t *sc = NULL;

    lf_start(f, 3600000);
    emit_run(f, "failed", NULL, &ids);
    lf_flush(f);
    sc = score_named(f, "run_success");
    assert_true(json_number_value(json_object_get(sc, "value")) == 0.0);
    assert_string_equal(json_string_value(json_object_get(sc, "comment")), "failed");
    assert_string_equal(
        langfuse_span_str(span_named(f, "invoke_workflow research"), "langfuse.observation.level"),
        "ERROR");
}

static void
test_langfuse_scores_disabled_by_option_sends_none(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;

    f->o.disable_scores = true;
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.score_requests, 0);
    assert_int_equal(lf_stats(f).scores_sent + lf_stats(f).scores_failed, 0);
}

static void
test_langfuse_scores_disabled_by_env_sends_none(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;

    weft_test_setenv("WEFT_LANGFUSE_SCORES", "false");
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.score_requests, 0);
}

static void
test_langfuse_long_run_splits_into_linked_traces_of_one_session(void **state)
{
    struct fx *f = *state;
    struct weft_span *root = NULL;
    char trace[33];
    char root_id[17];
    json_t *traces = json_object();
    const json_t *sp = NULL;
    size_t i = 0;
    size_t in_parts = 0;

    f->o.max_spans_per_trace = 4;
    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    hex_trace_id(root, trace);
    hex_span_id(root, root_id);
    for (int k = 0; k < 10; k++) {
        char subject[16];
        snprintf(subject, sizeof(subject), "step%d", k);
        weft_span_end(rt_start(f, K_AGENT, subject, root), 0);
    }
    weft_span_end(root, 0);
    lf_flush(f);

    /* 10 children at 4 per trace: the original trace (4 and the root), then 4, then 2. */
    assert_int_equal(json_array_size(f->spans), 11);
    json_array_foreach(f->spans, i, sp)
    {
        const char *tid = json_string_value(json_object_get(sp, "traceId"));
        json_t *n = json_object_get(traces, tid);

        json_object_set_new(traces, tid, json_integer(n == NULL ? 1 : json_integer_value(n) + 1));
        assert_string_equal(langfuse_span_str(sp, "langfuse.session.id"), "sess-42");
        if (strcmp(tid, trace) != 0) {
            /* A span of a later part links back to the run's trace and its parent there. */
            const json_t *links = json_object_get(sp, "links");
            const json_t *link = json_array_get(links, json_array_size(links) - 1);
            const char *name = langfuse_span_str(sp, "langfuse.trace.name");

            assert_non_null(link);
            assert_string_equal(json_string_value(json_object_get(link, "traceId")), trace);
            assert_string_equal(json_string_value(json_object_get(link, "spanId")), root_id);
            assert_true(strcmp(name, "research (part 2)") == 0 ||
                        strcmp(name, "research (part 3)") == 0);
            in_parts++;
        } else {
            assert_string_equal(langfuse_span_str(sp, "langfuse.trace.name"), "research");
        }
    }
    assert_int_equal(json_object_size(traces), 3);
    assert_int_equal(json_integer_value(json_object_get(traces, trace)), 5);
    assert_int_equal(in_parts, 6);
    assert_string_equal(
        json_string_value(json_object_get(span_named(f, "invoke_workflow research"), "traceId")),
        trace); /* the root stays in the run's own trace */
    assert_int_equal(lf_stats(f).traces_split, 2);
    json_decref(traces);
}

/* Run one trace of @p children child spans and a root with max_spans_per_trace @p max;
 * @return the number of distinct trace ids the server got. */
static size_t
split_run(struct fx *f, size_t max, int children)
{
    struct weft_span *root = NULL;
    json_t *traces = json_object();
    const json_t *sp = NULL;
    size_t i = 0;
    size_t n = 0;

    f->o.max_spans_per_trace = max;
    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    for (int k = 0; k < children; k++) {
        weft_span_end(rt_start(f, K_TOOL, "step", root), 0);
    }
    weft_span_end(root, 0);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), (size_t)children + 1);
    json_array_foreach(f->spans, i, sp)
    {
        json_object_set_new(traces, json_string_value(json_object_get(sp, "traceId")), json_true());
    }
    n = json_object_size(traces);
    json_decref(traces);
    return n;
}

static void
test_langfuse_split_count_matches_the_traces_created_one_per_trace(void **state)
{
    struct fx *f = *state;

    /* One span per trace: each child after the first starts a trace of its own. */
    assert_int_equal(split_run(f, 1, 3), 3);
    assert_int_equal(lf_stats(f).traces_split, 2);
}

static void
test_langfuse_split_count_ignores_the_root_at_a_part_boundary(void **state)
{
    struct fx *f = *state;

    /* Two per trace, four children: two traces; the root, ending fifth, stays in the first
     * and creates none. */
    assert_int_equal(split_run(f, 2, 4), 2);
    assert_int_equal(lf_stats(f).traces_split, 1);
}

static bool
contains(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);

    for (size_t i = 0; hay != NULL && i + n <= len; i++) {
        if (memcmp(hay + i, needle, n) == 0) {
            return true;
        }
    }
    return false;
}

static void
test_langfuse_secret_key_never_leaves(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct http_receiver *rx = langfuse_server_receiver(f->srv);
    struct weft_span *span = NULL;
    bool saw_marker = false;

    weft_test_capture_logs();
    lf_start(f, 3600000);
    /* The agent leaks the key into its output and a tool argument. */
    emit_run(f, "completed", "the key is " SK " - done", &ids);
    span = rt_start(f, K_TOOL, "leak", NULL);
    weft_span_set_str(span, "langfuse.observation.input", SK);
    weft_span_end(span, 0);
    lf_flush(f);
    assert_int_equal(json_array_size(f->spans), RUN_SPANS + 1);
    assert_true(json_array_size(f->scores) > 0);
    assert_true(http_receiver_count(rx) >= 2);
    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *req = http_receiver_request(rx, i);
        assert_false(contains(req->body, req->body_len, SK));
        assert_false(contains(req->headers, strlen(req->headers), SK));
        saw_marker = saw_marker || contains(req->body, req->body_len, "the key is ");
    }
    assert_true(saw_marker); /* the search does look at the text around the key */
    assert_null(strstr(weft_test_logs(), SK));
}

static void
test_langfuse_long_values_are_cut_on_utf8_boundaries_with_a_marker(void **state)
{
    struct fx *f = *state;
    struct weft_span *span = NULL;
    char ascii[1001];
    char accents[201];
    const char *got = NULL;

    memset(ascii, 'x', 1000);
    ascii[1000] = '\0';
    for (int i = 0; i < 100; i++) {
        memcpy(accents + 2 * i, "\xc3\xa9", 2); /* é */
    }
    accents[200] = '\0';
    f->o.max_value_bytes = 63;
    lf_start(f, 3600000);
    span = rt_start(f, K_AGENT, "big", NULL);
    weft_span_set_str(span, "langfuse.observation.input", ascii);
    weft_span_set_str(span, "langfuse.observation.output", accents);
    weft_span_end(span, 0);
    lf_flush(f);

    /* The server decodes strictly (UTF-8 checked): a cut inside a character would be a 400. */
    assert_int_equal(json_array_size(f->spans), 1);
    got = langfuse_span_str(span_named(f, "invoke_agent big"), "langfuse.observation.input");
    assert_int_equal(strlen(got), 63 + strlen("...[truncated by weft]"));
    assert_int_equal(strncmp(got, ascii, 63), 0);
    assert_string_equal(got + 63, "...[truncated by weft]");
    got = langfuse_span_str(span_named(f, "invoke_agent big"), "langfuse.observation.output");
    assert_int_equal(strncmp(got, accents, 62), 0);
    assert_string_equal(got + 62, "...[truncated by weft]");
    assert_string_equal(langfuse_span_str(span_named(f, "invoke_agent big"), "session.id"),
                        "sess-42"); /* short values untouched */
    assert_int_equal(lf_stats(f).values_truncated, 2);
}

static void
test_langfuse_requests_stay_under_the_byte_limit(void **state)
{
    struct fx *f = *state;
    struct http_receiver *rx = langfuse_server_receiver(f->srv);
    struct weft_span *root = NULL;
    struct weft_span *span = NULL;
    struct weft_langfuse_stats ls;
    char text[1501];
    char huge[12001];

    memset(text, 'a', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    memset(huge, 'b', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    f->o.max_request_bytes = 8192;
    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    for (int i = 0; i < 30; i++) {
        span = rt_start(f, K_TOOL, "step", root);
        weft_span_set_str(span, "langfuse.observation.output", text);
        weft_span_end(span, 0);
    }
    /* One span that is over the limit on its own: dropped and counted, the rest go. */
    span = rt_start(f, K_TOOL, "huge", root);
    weft_span_set_str(span, "langfuse.observation.output", huge);
    weft_span_end(span, 0);
    weft_span_end(root, 0);
    lf_flush_expect(f, WEFT_EIO); /* the flush could not deliver that one */

    assert_int_equal(json_array_size(f->spans), 31);
    assert_int_equal(distinct_span_ids(f), 31);
    assert_null(langfuse_spans_find(f->spans, "execute_tool huge"));
    assert_true(http_receiver_count(rx) >= 6); /* 30 * 1.5 KB in 8 KB requests */
    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *req = http_receiver_request(rx, i);
        assert_true(req->body_len <= 8192);
    }
    ls = lf_stats(f);
    assert_int_equal(ls.spans_sent, 31);
    assert_int_equal(ls.spans_dropped, 1);
}

static void
test_langfuse_429_with_retry_after_then_success_loses_nothing(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct weft_langfuse_stats ls;
    uint64_t t0 = 0;

    langfuse_server_fail_traces(f->srv, 1, 429, 1);
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    t0 = weft_monotonic_ns();
    lf_flush(f);
    assert_true(weft_monotonic_ns() - t0 >= 900000000u); /* Retry-After: 1 was honoured */
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    assert_int_equal(distinct_span_ids(f), RUN_SPANS);
    assert_int_equal(json_array_size(f->scores), 6);
    ls = lf_stats(f);
    assert_int_equal(ls.requests, 2);
    assert_int_equal(ls.spans_sent, RUN_SPANS);
    assert_int_equal(ls.spans_dropped, 0);
}

static void
test_langfuse_503s_then_success_loses_nothing(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;

    langfuse_server_fail_traces(f->srv, 3, 503, 0);
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_int_equal(distinct_span_ids(f), RUN_SPANS);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.trace_scripted, 3);
    assert_int_equal(st.trace_accepted, 1);
    assert_int_equal(lf_stats(f).requests, 4);
    assert_int_equal(lf_stats(f).spans_dropped, 0);
}

static void
test_langfuse_outage_shorter_than_the_retry_budget_loses_nothing(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;
    struct weft_langfuse_stats ls;

    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    langfuse_server_go_down(f->srv, 700);
    lf_flush(f);
    langfuse_server_get_stats(f->srv, &st);
    assert_true(st.dropped >= 1); /* the outage was seen */
    assert_int_equal(json_array_size(f->spans), RUN_SPANS);
    assert_int_equal(distinct_span_ids(f), RUN_SPANS);
    assert_int_equal(json_array_size(f->scores), 6);
    ls = lf_stats(f);
    assert_true(ls.requests >= 2);
    assert_int_equal(ls.spans_dropped, 0);
    assert_int_equal(ls.scores_failed, 0);
}

static void
test_langfuse_401_stops_the_exporter_and_counts_drops(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct langfuse_server_stats st;
    struct weft_langfuse_stats ls;
    struct weft_trace_stats ts;
    size_t requests = 0;

    weft_test_capture_logs();
    f->o.secret_key = "sk-lf-ffffffffffffffffffffffffffffffff";
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    (void)weft_provider_force_flush(f->provider, 20000); /* the failure shows in the stats */
    ls = lf_stats(f);
    assert_true(ls.is_stopped);
    assert_int_equal(ls.spans_sent, 0);
    assert_int_equal(ls.spans_dropped, RUN_SPANS);
    assert_int_equal(ls.scores_sent, 0);
    assert_int_equal(ls.scores_failed, 6);
    langfuse_server_get_stats(f->srv, &st);
    assert_int_equal(st.unauthorized, 1); /* a 401 is not retried */
    assert_int_equal(st.trace_accepted + st.score_requests, 0);
    assert_non_null(strstr(weft_test_logs(), "refused the credentials"));
    assert_null(strstr(weft_test_logs(), "ffffffffffffffff"));

    /* Later spans are dropped and counted without touching the network. */
    requests = http_receiver_count(langfuse_server_receiver(f->srv));
    for (int i = 0; i < 3; i++) {
        weft_span_end(rt_start(f, K_TOOL, "later", NULL), 0);
    }
    (void)weft_provider_force_flush(f->provider, 20000); /* the failure shows in the stats */
    ls = lf_stats(f);
    assert_int_equal(ls.spans_dropped, RUN_SPANS + 3);
    assert_int_equal(http_receiver_count(langfuse_server_receiver(f->srv)), requests);
    weft_provider_get_stats(f->provider, &ts);
    assert_int_equal(ts.spans_failed, RUN_SPANS + 3);
}

static void
test_langfuse_missing_or_partial_credentials_are_einval(void **state)
{
    struct fx *f = *state;
    struct weft_langfuse_options o;
    struct weft_exporter *e = (struct weft_exporter *)&o; /* must come back NULL */

    weft_test_capture_logs();
    memset(&o, 0, sizeof(o));
    o.host = f->host;
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    assert_null(e);
    assert_non_null(strstr(weft_test_logs(), "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"));

    o.public_key = PK;
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "LANGFUSE_SECRET_KEY is not set"));
    o.public_key = NULL;
    o.secret_key = SK;
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "LANGFUSE_PUBLIC_KEY is not set"));
    o.public_key = "";
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    o.public_key = NULL;
    o.secret_key = NULL;
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", PK); /* half a pair from the environment */
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    assert_null(e);
    assert_null(strstr(weft_test_logs(), SK));

    /* Swapped keys, a bad host, a bad environment name. */
    o.public_key = SK;
    o.secret_key = PK;
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    o.public_key = PK;
    o.secret_key = SK;
    o.host = "ftp://127.0.0.1";
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    o.host = f->host;
    o.environment = "Prod!";
    assert_weft_err(weft_langfuse_exporter_new(&o, &e), WEFT_EINVAL);
    assert_null(e);

    /* The whole pair from the environment works. */
    o.public_key = NULL;
    o.secret_key = NULL;
    o.environment = NULL;
    weft_test_setenv("LANGFUSE_SECRET_KEY", SK);
    assert_weft_ok(weft_langfuse_exporter_new(&o, &e));
    assert_non_null(e);
    weft_exporter_free(e);
}

static void
test_langfuse_slow_server_does_not_delay_span_end(void **state)
{
    struct fx *f = *state;
    langfuse_server_set_delay(f->srv, 2000);
    lf_start(f, 1);
    weft_span_end(rt_start(f, K_TOOL, "first", NULL), 0);
    /* The export thread now waits two seconds for Langfuse's answer. */
    assert_true(langfuse_server_wait_spans(f->srv, 1, 5000));
    for (int i = 0; i < 20; i++) {
        weft_span_end(rt_start(f, K_TOOL, "during", NULL), 0);
    }
    /* All twenty ended while Langfuse still held the first request: none waited for it. */
    assert_int_equal(langfuse_server_span_count(f->srv), 1);
    langfuse_server_set_delay(f->srv, 0);
    assert_weft_ok(weft_provider_shutdown(f->provider, 20000));
    assert_int_equal(langfuse_server_span_count(f->srv), 21);
    assert_int_equal(lf_stats(f).spans_dropped, 0);
}

static void
test_langfuse_json_protocol_is_accepted(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    char buf[64];

    f->o.protocol_json = true;
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    assert_string_equal(
        http_request_header(http_receiver_request(langfuse_server_receiver(f->srv), 0),
                            "Content-Type", buf, sizeof(buf)),
        "application/json");
    assert_int_equal(distinct_span_ids(f), RUN_SPANS);
    assert_string_equal(
        langfuse_span_str(span_named(f, "chat gpt-4o-mini"), "langfuse.observation.type"),
        "generation");
    assert_int_equal(json_array_size(f->scores), 6);
}

static void
test_langfuse_sample_rate_zero_sends_nothing(void **state)
{
    struct fx *f = *state;
    struct run_ids ids;
    struct weft_langfuse_stats ls;

    f->o.sample_rate_set = true;
    f->o.sample_rate = 0.0;
    lf_start(f, 3600000);
    emit_run(f, "completed", NULL, &ids);
    lf_flush(f);
    ls = lf_stats(f);
    assert_int_equal(ls.spans_sampled_out, RUN_SPANS);
    assert_int_equal(ls.requests, 0);
    assert_int_equal(http_receiver_count(langfuse_server_receiver(f->srv)), 0);
}

/* Two detections on one span are two scores (distinct ids), and the agent span that repeats
 * its reflection's verdict does not make a second verdict score. */
static void
test_langfuse_each_detection_and_verdict_scored_once(void **state)
{
    struct fx *f = *state;
    struct weft_span *root = NULL;
    struct weft_span *span = NULL;
    struct weft_attr ev[2];
    size_t stuck = 0;
    size_t verdicts = 0;
    const char *first_id = NULL;
    size_t i = 0;
    json_t *score = NULL;

    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    span = rt_start(f, K_PLAN, "supervisor", root);
    ev[0] = weft_attr_str("weft.stuck_loop.kind", "handoff");
    ev[1] = weft_attr_str("weft.stuck_loop.evidence", "third call");
    weft_span_add_event(span, "weft.stuck_loop", ev, 2, 0);
    ev[0] = weft_attr_str("weft.stuck_loop.kind", "iteration_budget");
    ev[1] = weft_attr_str("weft.stuck_loop.evidence", "8 of 10");
    weft_span_add_event(span, "weft.stuck_loop", ev, 2, 0);
    weft_span_end(span, 0);
    span = rt_start(f, K_AGENT, "writer", root);
    weft_span_set_str(span, "weft.reflection.verdict", "APPROVED");
    {
        struct weft_span *reflect = rt_start(f, K_REFLECT, "writer", span);
        weft_span_set_str(reflect, "weft.reflection.verdict", "APPROVED");
        weft_span_end(reflect, 0);
    }
    weft_span_end(span, 0);
    weft_span_end(root, 0);
    lf_flush(f);
    json_array_foreach(f->scores, i, score)
    {
        const char *name = json_string_value(json_object_get(score, "name"));

        if (strcmp(name, "stuck_loop") == 0) {
            const char *id = json_string_value(json_object_get(score, "id"));
            if (first_id == NULL) {
                first_id = id;
            } else {
                assert_string_not_equal(first_id, id);
            }
            stuck++;
        }
        if (strcmp(name, "reflection_verdict") == 0) {
            verdicts++;
        }
    }
    assert_int_equal(stuck, 2);
    assert_int_equal(verdicts, 1);
}

/* Evaluator scores (include/weft/eval.h) recorded on spans go out as NUMERIC scores named after
 * their evaluator, the explanation as the comment: on the observation for a child span, on
 * the trace for the root; an errored one with value 0. */
static void
test_langfuse_evaluator_scores_become_numeric_scores(void **state)
{
    struct fx *f = *state;
    struct weft_span *root = NULL;
    struct weft_span *span = NULL;
    struct weft_eval_score judge = {(char *)"tone",
                                    WEFT_EVAL_LLM_JUDGE,
                                    0.75,
                                    true,
                                    false,
                                    (char *)"polite and on topic",
                                    0,
                                    0,
                                    0};
    struct weft_eval_score cmd = {(char *)"tests",
                                  WEFT_EVAL_COMMAND,
                                  0,
                                  false,
                                  true,
                                  (char *)"pytest: spawn_failed",
                                  0,
                                  0,
                                  0};
    size_t i = 0;
    size_t seen = 0;
    json_t *score = NULL;

    lf_start(f, 3600000);
    root = rt_start(f, K_WORKFLOW, "research", NULL);
    span = rt_start(f, K_AGENT, "writer", root);
    assert_int_equal(weft_eval_score_record(span, &judge), WEFT_OK);
    weft_span_end(span, 0);
    assert_int_equal(weft_eval_score_record(root, &cmd), WEFT_OK);
    assert_int_equal(weft_eval_score_record(NULL, &cmd), WEFT_EINVAL);
    weft_span_end(root, 0);
    lf_flush(f);
    json_array_foreach(f->scores, i, score)
    {
        const char *name = json_string_value(json_object_get(score, "name"));

        if (strcmp(name, "tone") == 0) {
            assert_string_equal(json_string_value(json_object_get(score, "dataType")), "NUMERIC");
            assert_true(json_number_value(json_object_get(score, "value")) == 0.75);
            assert_string_equal(json_string_value(json_object_get(score, "comment")),
                                "polite and on topic");
            assert_non_null(json_object_get(score, "observationId"));
            seen++;
        } else if (strcmp(name, "tests") == 0) {
            assert_string_equal(json_string_value(json_object_get(score, "dataType")), "NUMERIC");
            assert_true(json_number_value(json_object_get(score, "value")) == 0);
            assert_string_equal(json_string_value(json_object_get(score, "comment")),
                                "pytest: spawn_failed");
            assert_null(json_object_get(score, "observationId"));
            seen++;
        }
    }
    assert_int_equal(seen, 2);
}

/* The limits come from the environment when the options leave them at 0. */
static void
test_langfuse_limits_from_the_environment(void **state)
{
    struct fx *f = *state;
    char text[1000];
    const char *got = NULL;

    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    weft_test_setenv("WEFT_LANGFUSE_MAX_SPANS_PER_TRACE", "3");
    weft_test_setenv("WEFT_LANGFUSE_MAX_VALUE_BYTES", "300");
    /* 7 children of 3 per trace: three traces. */
    assert_int_equal(split_run(f, 0, 7), 3);
    weft_provider_free(f->provider);
    f->provider = NULL;

    lf_start(f, 3600000);
    {
        struct weft_span *span = rt_start(f, K_TOOL, "long", NULL);
        weft_span_set_str(span, "langfuse.observation.output", text);
        weft_span_end(span, 0);
    }
    lf_flush(f);
    got = langfuse_span_str(span_named(f, "execute_tool long"), "langfuse.observation.output");
    assert_non_null(got);
    assert_int_equal(strlen(got), 300 + strlen("...[truncated by weft]"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_langfuse_each_detection_and_verdict_scored_once),
        T(test_langfuse_evaluator_scores_become_numeric_scores),
        T(test_langfuse_limits_from_the_environment),
        T(test_server_refuses_missing_or_wrong_credentials),
        T(test_server_validates_scores_like_langfuse),
        T(test_server_traces_need_version_header_media_type_and_valid_ids),
        T(test_server_serves_prompts_as_the_runtime_client_reads_them),
        T(test_langfuse_observation_types_follow_weft_span_kinds),
        T(test_langfuse_trace_wide_attributes_on_every_span),
        T(test_langfuse_generation_carries_model_usage_and_cost),
        T(test_langfuse_levels_error_for_failures_and_warning_for_stuck_loops),
        T(test_langfuse_weft_attributes_become_filterable_metadata),
        T(test_langfuse_scores_pass_validation_and_point_at_their_spans),
        T(test_langfuse_failed_run_scores_run_success_false),
        T(test_langfuse_scores_disabled_by_option_sends_none),
        T(test_langfuse_scores_disabled_by_env_sends_none),
        T(test_langfuse_long_run_splits_into_linked_traces_of_one_session),
        T(test_langfuse_split_count_matches_the_traces_created_one_per_trace),
        T(test_langfuse_split_count_ignores_the_root_at_a_part_boundary),
        T(test_langfuse_secret_key_never_leaves),
        T(test_langfuse_long_values_are_cut_on_utf8_boundaries_with_a_marker),
        T(test_langfuse_requests_stay_under_the_byte_limit),
        T(test_langfuse_429_with_retry_after_then_success_loses_nothing),
        T(test_langfuse_503s_then_success_loses_nothing),
        T(test_langfuse_outage_shorter_than_the_retry_budget_loses_nothing),
        T(test_langfuse_401_stops_the_exporter_and_counts_drops),
        T(test_langfuse_missing_or_partial_credentials_are_einval),
        T(test_langfuse_slow_server_does_not_delay_span_end),
        T(test_langfuse_json_protocol_is_accepted),
        T(test_langfuse_sample_rate_zero_sends_nothing),
#undef T
    };
    int failed = 0;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
