/* tests/runtime/test_prompts.c - agent instructions from Langfuse prompt management, against a
 * real HTTP server on 127.0.0.1: the request (path, label or version, Basic auth), text and chat
 * prompts, the cache and its TTL, a stale copy preferred to the fallback, the fallback only when
 * nothing was cached, and clear errors; and whole runs whose agent instructions name a Langfuse
 * prompt: the prompt text in the system message, generation spans linked to the prompt's name
 * and version, the fallback marked as such, a step that fails without any instructions, and
 * the workflow checks. */
#include "support/http_receiver.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include "runtime/llm/prompts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    struct http_receiver *rx;
    char host[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "", f->host, sizeof(f->host));
    weft_test_setenv("LANGFUSE_HOST", f->host);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test");
    weft_test_setenv("LANGFUSE_SECRET_KEY", "sk-lf-secret");
    weft_test_setenv("WEFT_LANGFUSE_PROMPT_TTL_S", NULL);
    weft__rt_prompt_cache_clear();
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    http_receiver_stop(f->rx);
    weft__rt_prompt_cache_clear();
    free(f);
    return 0;
}

static void
push_json(struct fx *f, int status, const char *body)
{
    struct http_response r = {.status = status, .body = body, .content_type = "application/json"};
    http_receiver_push(f->rx, &r);
}

static void
test_prompts_fetches_text_prompt_by_label_with_basic_auth(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref ref = {.name = "agent orchestrator", .label = "staging"};
    struct rt_prompt p;
    char err[256] = "";
    char auth[128];
    const struct http_request *req = NULL;

    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"agent orchestrator\",\"version\":7,"
              "\"prompt\":\"You route requests.\",\"config\":{},\"labels\":[\"staging\"]}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    assert_string_equal(p.text, "You route requests.");
    assert_int_equal(p.version, 7);
    assert_false(p.is_fallback);
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(req->method, "GET");
    /* The name is URL-encoded; the label goes in the query. */
    assert_string_equal(req->path, "/api/public/v2/prompts/agent%20orchestrator?label=staging");
    assert_non_null(http_request_header(req, "Authorization", auth, sizeof(auth)));
    /* base64("pk-lf-test:sk-lf-secret") */
    assert_string_equal(auth, "Basic cGstbGYtdGVzdDpzay1sZi1zZWNyZXQ=");
    weft__rt_prompt_cleanup(&p);
}

static void
test_prompts_chat_prompt_by_version_joins_messages(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref ref = {.name = "critic", .version = 3};
    struct rt_prompt p;
    char err[256] = "";

    push_json(f, 200,
              "{\"type\":\"chat\",\"name\":\"critic\",\"version\":3,\"prompt\":["
              "{\"role\":\"system\",\"content\":\"Be strict.\"},"
              "{\"role\":\"user\",\"content\":\"Review the diff.\"}]}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    assert_string_equal(p.text, "Be strict.\n\nReview the diff.");
    assert_int_equal(p.version, 3);
    assert_string_equal(http_receiver_request(f->rx, 0)->path,
                        "/api/public/v2/prompts/critic?version=3");
    weft__rt_prompt_cleanup(&p);
}

static void
test_prompts_cache_serves_within_ttl_and_refetches_after(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref ref = {.name = "p"};
    struct rt_prompt p;
    char err[256] = "";

    push_json(f, 200, "{\"type\":\"text\",\"name\":\"p\",\"version\":1,\"prompt\":\"one\"}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    weft__rt_prompt_cleanup(&p);
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    assert_string_equal(p.text, "one");
    weft__rt_prompt_cleanup(&p);
    assert_int_equal(http_receiver_count(f->rx), 1); /* the second came from the cache */
    assert_string_equal(http_receiver_request(f->rx, 0)->path,
                        "/api/public/v2/prompts/p?label=production");
    weft_test_setenv("WEFT_LANGFUSE_PROMPT_TTL_S", "0"); /* no caching: every call fetches */
    push_json(f, 200, "{\"type\":\"text\",\"name\":\"p\",\"version\":2,\"prompt\":\"two\"}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    assert_string_equal(p.text, "two");
    assert_int_equal(p.version, 2);
    weft__rt_prompt_cleanup(&p);
    assert_int_equal(http_receiver_count(f->rx), 2);
}

static void
test_prompts_stale_copy_beats_fallback_when_fetch_fails(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref ref = {.name = "p", .fallback = "local text"};
    struct rt_prompt p;
    char err[256] = "";

    weft_test_setenv("WEFT_LANGFUSE_PROMPT_TTL_S", "0");
    push_json(f, 200, "{\"type\":\"text\",\"name\":\"p\",\"version\":4,\"prompt\":\"remote\"}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    weft__rt_prompt_cleanup(&p);
    push_json(f, 503, "{\"message\":\"down\"}");
    assert_weft_ok(weft__rt_prompt_resolve(&ref, &p, err, sizeof(err)));
    assert_string_equal(p.text, "remote");
    assert_int_equal(p.version, 4);
    assert_false(p.is_fallback);
    weft__rt_prompt_cleanup(&p);
}

static void
test_prompts_fallback_only_when_nothing_cached(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref with = {.name = "missing", .fallback = "local text"};
    struct rt_prompt_ref without = {.name = "missing"};
    struct rt_prompt p;
    char err[256] = "";

    push_json(f, 404, "{\"message\":\"Prompt not found\"}");
    assert_weft_ok(weft__rt_prompt_resolve(&with, &p, err, sizeof(err)));
    assert_string_equal(p.text, "local text");
    assert_true(p.is_fallback);
    assert_int_equal(p.version, 0);
    weft__rt_prompt_cleanup(&p);
    push_json(f, 404, "{\"message\":\"Prompt not found\"}");
    assert_weft_err(weft__rt_prompt_resolve(&without, &p, err, sizeof(err)), WEFT_ENOTFOUND);
    assert_non_null(strstr(err, "prompt 'missing' (label production): Langfuse answered HTTP 404"));
    assert_null(p.text);
    /* A malformed answer is a failed fetch too. */
    push_json(f, 200, "{\"type\":\"text\",\"name\":\"missing\"}");
    assert_weft_err(weft__rt_prompt_resolve(&without, &p, err, sizeof(err)), WEFT_EPARSE);
    assert_non_null(strstr(err, "no text prompt"));
}

static void
test_prompts_without_langfuse_keys(void **state)
{
    struct fx *f = *state;
    struct rt_prompt_ref with = {.name = "p", .fallback = "local"};
    struct rt_prompt_ref without = {.name = "p"};
    struct rt_prompt p;
    char err[256] = "";

    weft_test_setenv("LANGFUSE_SECRET_KEY", NULL);
    assert_weft_ok(weft__rt_prompt_resolve(&with, &p, err, sizeof(err)));
    assert_true(p.is_fallback);
    weft__rt_prompt_cleanup(&p);
    assert_weft_err(weft__rt_prompt_resolve(&without, &p, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "Langfuse is not configured"));
    assert_int_equal(http_receiver_count(f->rx), 0); /* no request without credentials */
}

/* Write @p text to @p dir/@p name. */
static void
put_file(const char *dir, const char *name, const char *text)
{
    char path[160];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A run of one agent whose instructions are @p instructions (JSON), traced into a sink. */
static struct weft_run_result *
run_with_instructions(struct otlp_sink *sink, const char *instructions)
{
    char dir[] = "/tmp/weft-prompts-XXXXXX";
    char path[128];
    char workflow[1024];
    char error[256] = "";
    struct weft_workflow *wf = NULL;
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    struct weft_diags d = {0};

    assert_non_null(mkdtemp(dir));
    put_file(dir, "script.json",
             "{\"responses\": {\"coder\": {\"act\": [{\"content\": \"done\"}]}}}");
    snprintf(workflow, sizeof(workflow),
             "{\"name\": \"p\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
             "\"script.json\"}}, \"agents\": [{\"name\": \"coder\", \"instructions\": %s}], "
             "\"plan\": [{\"agent\": \"coder\", \"task\": \"write it\"}]}",
             instructions);
    put_file(dir, "wf.json", workflow);
    snprintf(path, sizeof(path), "%s/wf.json", dir);
    if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("invalid: %s",
                 d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line)) : "?");
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(sink);
    ro.workspace = dir;
    ro.capture_content = 1;
    assert_weft_ok(weft_run(wf, &ro, &r, error, sizeof(error)));
    otlp_sink_collect(sink);
    weft_workflow_free(wf);
    weft_test_rmtree(dir);
    return r;
}

static void
test_prompts_run_links_generations_to_the_prompt(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *chat = NULL;

    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"coder-sys\",\"version\":4,"
              "\"prompt\":\"You write careful C.\",\"labels\":[\"production\"]}");
    r = run_with_instructions(sink,
                              "{\"langfuse_prompt\": \"coder-sys\", \"label\": \"production\", "
                              "\"fallback\": \"You write code.\"}");
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(http_receiver_request(f->rx, 0)->path,
                        "/api/public/v2/prompts/coder-sys?label=production");
    chat = otlp_sink_find(sink, "chat m", 0);
    assert_non_null(chat);
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.name"), "coder-sys");
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.version"), "4");
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "You write careful C."));
    assert_string_equal(otlp_span_attr(chat, "weft.prompt.is_fallback"), "");
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

static void
test_prompts_run_uses_fallback_or_fails_the_step(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *chat = NULL;
    json_t *agent = NULL;

    /* Langfuse answers 404: the fallback text, marked, and no link to a version. */
    push_json(f, 404, "{\"error\":\"LangfuseNotFoundError\",\"message\":\"Prompt not found\"}");
    r = run_with_instructions(
        sink, "{\"langfuse_prompt\": \"missing\", \"fallback\": \"You write code.\"}");
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    chat = otlp_sink_find(sink, "chat m", 0);
    assert_string_equal(otlp_span_attr(chat, "weft.prompt.is_fallback"), "true");
    assert_string_equal(otlp_span_attr(chat, "weft.prompt.name"), "missing");
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.name"), "");
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "You write code."));
    weft_run_result_free(r);
    otlp_sink_free(sink);

    /* No fallback and nothing cached: the step fails and says why; no LLM call is made. */
    sink = otlp_sink_new();
    push_json(f, 500, "{\"error\":\"boom\"}");
    r = run_with_instructions(sink, "{\"langfuse_prompt\": \"broken\", \"version\": 2}");
    assert_int_equal(r->status, WEFT_RUN_FAILED);
    assert_null(otlp_sink_find(sink, "chat m", 0));
    agent = otlp_sink_find(sink, "invoke_agent coder", 0);
    assert_string_equal(otlp_span_attr(agent, "error.type"), "prompt_unavailable");
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(agent, "status"), "message")),
               "instructions:"));
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

/* A run of @p workflow (JSON) with @p script (JSON), traced into a sink. */
static struct weft_run_result *
run_workflow(struct otlp_sink *sink, const char *workflow, const char *script)
{
    char dir[] = "/tmp/weft-prompts-XXXXXX";
    char path[128];
    char error[256] = "";
    struct weft_workflow *wf = NULL;
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    struct weft_diags d = {0};

    assert_non_null(mkdtemp(dir));
    put_file(dir, "script.json", script);
    put_file(dir, "wf.json", workflow);
    snprintf(path, sizeof(path), "%s/wf.json", dir);
    if (weft_workflow_load(path, &wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("invalid: %s",
                 d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line)) : "?");
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(sink);
    ro.workspace = dir;
    ro.capture_content = 1;
    assert_weft_ok(weft_run(wf, &ro, &r, error, sizeof(error)));
    otlp_sink_collect(sink);
    weft_workflow_free(wf);
    weft_test_rmtree(dir);
    return r;
}

static const char managed_workflow[] =
    "{\"name\": \"managed\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
    "\"script.json\"}}, \"supervisor\": {\"instructions\": {\"langfuse_prompt\": \"sup-sys\"}}, "
    "\"agents\": [{\"name\": \"coder\", \"reflection\": {\"instructions\": "
    "{\"langfuse_prompt\": \"critic-sys\", \"version\": 2}}}]}";
static const char managed_script[] =
    "{\"responses\": {\"supervisor\": {\"plan\": [{\"content\": {\"thought\": \"one step\", "
    "\"plan\": [{\"agent\": \"coder\", \"task\": \"write it\"}]}}]}, \"coder\": {\"act\": "
    "[{\"content\": \"done\"}], \"reflect\": [{\"content\": {\"status\": \"APPROVED\"}}]}}}";

/* The supervisor's and the reflector's instructions come from Langfuse prompt management too:
 * the planning and reflection generations use the prompts' texts and link to their versions;
 * a prompt that cannot be had gives weft's built-in text, marked, and the run goes on. */
static void
test_prompts_supervisor_and_reflection_prompts_are_managed(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *plan_chat = NULL;
    json_t *reflect_chat = NULL;

    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"sup-sys\",\"version\":7,"
              "\"prompt\":\"You plan carefully.\",\"labels\":[\"production\"]}");
    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"critic-sys\",\"version\":2,"
              "\"prompt\":\"You check carefully.\",\"labels\":[]}");
    r = run_workflow(sink, managed_workflow, managed_script);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(http_receiver_request(f->rx, 0)->path,
                        "/api/public/v2/prompts/sup-sys?label=production");
    assert_string_equal(http_receiver_request(f->rx, 1)->path,
                        "/api/public/v2/prompts/critic-sys?version=2");
    plan_chat = otlp_sink_find(sink, "chat m", 0);
    assert_string_equal(otlp_span_attr(plan_chat, "weft.llm.purpose"), "plan");
    assert_string_equal(otlp_span_attr(plan_chat, "langfuse.observation.prompt.name"), "sup-sys");
    assert_string_equal(otlp_span_attr(plan_chat, "langfuse.observation.prompt.version"), "7");
    assert_non_null(
        strstr(otlp_span_attr(plan_chat, "gen_ai.input.messages"), "You plan carefully."));
    reflect_chat = otlp_sink_find(sink, "chat m", 2);
    assert_string_equal(otlp_span_attr(reflect_chat, "weft.llm.purpose"), "reflect");
    assert_string_equal(otlp_span_attr(reflect_chat, "langfuse.observation.prompt.name"),
                        "critic-sys");
    assert_non_null(
        strstr(otlp_span_attr(reflect_chat, "gen_ai.input.messages"), "You check carefully."));
    /* The agent's own generation is linked to neither. */
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(sink, "chat m", 1), "langfuse.observation.prompt.name"), "");
    weft_run_result_free(r);
    otlp_sink_free(sink);

    /* Langfuse fails and there is no fallback: weft's built-in text, marked; the run goes on. */
    weft__rt_prompt_cache_clear();
    sink = otlp_sink_new();
    push_json(f, 500, "{\"error\":\"boom\"}");
    push_json(f, 500, "{\"error\":\"boom\"}");
    r = run_workflow(sink, managed_workflow, managed_script);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    plan_chat = otlp_sink_find(sink, "chat m", 0);
    assert_string_equal(otlp_span_attr(plan_chat, "weft.prompt.is_fallback"), "true");
    assert_string_equal(otlp_span_attr(plan_chat, "weft.prompt.name"), "sup-sys");
    assert_string_equal(otlp_span_attr(plan_chat, "langfuse.observation.prompt.name"), "");
    assert_non_null(strstr(otlp_span_attr(plan_chat, "gen_ai.input.messages"),
                           "You are the supervisor of a team of agents."));
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

/* Correction mode's guidance may be a managed prompt too; weft's answer format always follows
 * it, and the corrector's generation links to the prompt. */
static void
test_prompts_correction_guidance_is_managed(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *chat = NULL;
    const char *input = NULL;

    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"corrector\",\"version\":3,"
              "\"prompt\":\"Prefer writing the missing file.\",\"labels\":[\"production\"]}");
    r = run_workflow(
        sink,
        "{\"name\": \"fix\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"supervisor\": {\"correction\": {\"enabled\": true, "
        "\"instructions\": {\"langfuse_prompt\": \"corrector\"}}}, \"agents\": [{\"name\": "
        "\"a\"}], \"plan\": [{\"id\": \"greet\", \"executor\": \"command\", \"task\": \"greet\", "
        "\"argv\": [\"sh\", \"-c\", \"cat hello.txt\"]}]}",
        "{\"responses\": {\"supervisor\": {\"correct\": [{\"content\": {\"steps\": [{"
        "\"description\": \"write it\", \"executor\": \"file_writer\", \"path\": \"hello.txt\", "
        "\"content\": \"hello\", \"rationale\": \"missing\"}, {\"description\": \"retry\", "
        "\"executor\": \"retry\", \"step\": \"greet\", \"rationale\": \"now there\"}]}}]}}}");
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(r->corrections, 1);
    chat = otlp_sink_find(sink, "chat m", 0);
    assert_non_null(chat);
    assert_string_equal(otlp_span_attr(chat, "weft.llm.purpose"), "correct");
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.name"), "corrector");
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.version"), "3");
    input = otlp_span_attr(chat, "gen_ai.input.messages");
    assert_non_null(strstr(input, "Prefer writing the missing file."));
    assert_non_null(strstr(input, "Answer with a corrective plan as JSON"));
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

/* An architect agent's instructions from Langfuse: its generations (in the composition's run)
 * link to the prompt, and weft's team format still reaches the model (in its task). */
static void
test_prompts_architect_prompt_is_managed(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *chat = NULL;
    const char *input = NULL;

    push_json(f, 200,
              "{\"type\":\"text\",\"name\":\"architect-sys\",\"version\":7,"
              "\"prompt\":\"Design the smallest team that works.\",\"labels\":[\"production\"]}");
    r = run_workflow(
        sink,
        "{\"name\": \"arch\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"architect\", \"instructions\": "
        "{\"langfuse_prompt\": \"architect-sys\"}, \"architect\": true}], \"plan\": [{\"id\": "
        "\"design\", \"agent\": \"architect\", \"task\": \"Build a team that greets\"}]}",
        "{\"responses\": {\"architect\": {\"act\": [{\"tool_calls\": [{\"name\": "
        "\"submit_team\", \"arguments\": {\"team\": {\"name\": \"greeters\", \"agents\": "
        "[{\"name\": \"greeter\"}], \"plan\": [{\"id\": \"g\", \"agent\": \"greeter\", "
        "\"task\": \"greet\"}]}}}]}, {\"content\": \"done\"}]}, \"greeter\": {\"act\": "
        "[{\"content\": \"hello\"}]}}}");
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    chat = otlp_sink_find(sink, "chat m", 0);
    assert_non_null(chat);
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.name"), "architect-sys");
    assert_string_equal(otlp_span_attr(chat, "langfuse.observation.prompt.version"), "7");
    input = otlp_span_attr(chat, "gen_ai.input.messages");
    assert_non_null(strstr(input, "Design the smallest team that works."));
    assert_non_null(strstr(input, "Design a team for the goal as a weft workflow"));
    assert_non_null(strstr(input, "Build a team that greets"));
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

static void
test_prompts_workflow_checks_the_reference(void **state)
{
    char dir[] = "/tmp/weft-prompts-XXXXXX";
    char path[128];
    char all[2048] = "";
    char line[512];
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};

    (void)state;
    assert_non_null(mkdtemp(dir));
    put_file(dir, "wf.json",
             "{\"name\": \"p\", \"models\": {\"m\": {\"provider\": \"scripted\"}}, \"agents\": "
             "[{\"name\": \"a\", \"instructions\": {\"label\": \"x\", \"version\": 2, \"lable\": "
             "1}}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}");
    snprintf(path, sizeof(path), "%s/wf.json", dir);
    assert_true(weft_workflow_load(path, &wf, &d) != WEFT_OK);
    for (size_t i = 0; i < d.count; i++) {
        strncat(all, weft_diag_format(&d.items[i], line, sizeof(line)),
                sizeof(all) - strlen(all) - 2);
        strcat(all, "\n");
    }
    assert_non_null(strstr(all, "agents[0].instructions.langfuse_prompt"));
    assert_non_null(strstr(all, "agents[0].instructions.version"));
    assert_non_null(strstr(all, "lable"));
    weft_diags_cleanup(&d);
    remove(path);
    rmdir(dir);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_prompts_fetches_text_prompt_by_label_with_basic_auth),
        T(test_prompts_chat_prompt_by_version_joins_messages),
        T(test_prompts_cache_serves_within_ttl_and_refetches_after),
        T(test_prompts_stale_copy_beats_fallback_when_fetch_fails),
        T(test_prompts_fallback_only_when_nothing_cached),
        T(test_prompts_without_langfuse_keys),
        T(test_prompts_run_links_generations_to_the_prompt),
        T(test_prompts_run_uses_fallback_or_fails_the_step),
        T(test_prompts_supervisor_and_reflection_prompts_are_managed),
        T(test_prompts_correction_guidance_is_managed),
        T(test_prompts_architect_prompt_is_managed),
        T(test_prompts_workflow_checks_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
