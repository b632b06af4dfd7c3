/* tests/runtime/test_semconv.c - the GenAI vocabulary weft emits (runtime/observe/semconv.h).
 *
 * The OTEL_SEMCONV_STABILITY_OPT_IN parser on its own; the message builders against the
 * conventions' JSON shapes, exactly; and scripted runs of the shipped examples received by a
 * real OTLP receiver, once with the variable unset (v1.41, the default) and once with
 * gen_ai_latest_experimental, asserting the exact names, kinds and attributes per span. */
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include "runtime/llm/llm.h"
#include "runtime/observe/semconv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPT_IN "OTEL_SEMCONV_STABILITY_OPT_IN"

/* ---- the variable ------------------------------------------------------------------------ */

static void
test_semconv_parse_unset_and_empty_are_the_default(void **state)
{
    (void)state;
    assert_int_equal(weft__semconv_genai_parse(NULL), WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse(""), WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse(" , ,"), WEFT__SEMCONV_GENAI_V1_41);
}

static void
test_semconv_parse_latest_experimental_in_a_list(void **state)
{
    (void)state;
    assert_int_equal(weft__semconv_genai_parse("gen_ai_latest_experimental"),
                     WEFT__SEMCONV_GENAI_LATEST);
    assert_int_equal(weft__semconv_genai_parse("http, gen_ai_latest_experimental ,database"),
                     WEFT__SEMCONV_GENAI_LATEST);
    assert_int_equal(weft__semconv_genai_parse("\tgen_ai_latest_experimental\t"),
                     WEFT__SEMCONV_GENAI_LATEST);
}

static void
test_semconv_parse_other_values_keep_the_default(void **state)
{
    (void)state;
    /* Other categories, near misses, and the old `gen-ai`/`gen-ai/dup` values of the
     * superseded OTEL_SEMCONV_UPDATE_OPT_IN plan: none names a GenAI version here. */
    assert_int_equal(weft__semconv_genai_parse("http,database/dup"), WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse("GEN_AI_LATEST_EXPERIMENTAL"),
                     WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse("gen_ai_latest_experimentalx"),
                     WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse("gen_ai_latest_experimental/dup"),
                     WEFT__SEMCONV_GENAI_V1_41);
    assert_int_equal(weft__semconv_genai_parse("gen-ai,gen-ai/dup"), WEFT__SEMCONV_GENAI_V1_41);
}

static void
test_semconv_mode_is_read_once_until_reload(void **state)
{
    (void)state;
    weft_test_setenv(OPT_IN, NULL);
    weft__semconv_reload();
    assert_int_equal(weft__semconv_genai_mode(), WEFT__SEMCONV_GENAI_V1_41);
    /* A change after the first read is not seen... */
    weft_test_setenv(OPT_IN, "gen_ai_latest_experimental");
    assert_int_equal(weft__semconv_genai_mode(), WEFT__SEMCONV_GENAI_V1_41);
    /* ...until the variable is read again. */
    weft__semconv_reload();
    assert_int_equal(weft__semconv_genai_mode(), WEFT__SEMCONV_GENAI_LATEST);
    weft_test_setenv(OPT_IN, NULL);
    weft__semconv_reload();
    assert_int_equal(weft__semconv_genai_mode(), WEFT__SEMCONV_GENAI_V1_41);
    assert_true(weft__semconv_agent_has_provider(WEFT__SEMCONV_GENAI_V1_41));
    assert_false(weft__semconv_agent_has_provider(WEFT__SEMCONV_GENAI_LATEST));
}

/* ---- message shapes ---------------------------------------------------------------------- */

static void
assert_json_equal(char *text, const char *expected)
{
    json_t *got = NULL;
    json_t *want = json_loads(expected, 0, NULL);

    assert_non_null(text);
    got = json_loads(text, 0, NULL);
    assert_non_null(want);
    assert_non_null(got);
    if (!json_equal(got, want)) {
        fail_msg("got %s\nwant %s", text, expected);
    }
    json_decref(got);
    json_decref(want);
    free(text);
}

static void
test_semconv_input_messages_become_parts(void **state)
{
    json_t *msgs =
        json_loads("[{\"role\":\"system\",\"content\":\"You write C.\"},"
                   " {\"role\":\"user\",\"content\":\"Add a test\"},"
                   " {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
                   "   \"type\":\"function\",\"function\":{\"name\":\"write_file\","
                   "   \"arguments\":\"{\\\"path\\\":\\\"a.c\\\"}\"}},"
                   "  {\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"ls\","
                   "   \"arguments\":\"not json\"}}]},"
                   " {\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"ok\"},"
                   " {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"more\"},"
                   "   {\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}}]}]",
                   0, NULL);

    (void)state;
    assert_non_null(msgs);
    assert_json_equal(
        weft__semconv_input_messages(msgs),
        "[{\"role\":\"system\",\"parts\":[{\"type\":\"text\",\"content\":\"You write C.\"}]},"
        " {\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"Add a test\"}]},"
        " {\"role\":\"assistant\",\"parts\":["
        "   {\"type\":\"tool_call\",\"id\":\"call_1\",\"name\":\"write_file\","
        "    \"arguments\":{\"path\":\"a.c\"}},"
        "   {\"type\":\"tool_call\",\"id\":\"call_2\",\"name\":\"ls\",\"arguments\":\"not "
        "json\"}]},"
        " {\"role\":\"tool\",\"parts\":[{\"type\":\"tool_call_response\",\"id\":\"call_1\","
        "   \"response\":\"ok\"}]},"
        " {\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"more\"},"
        "   {\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}}]}]");
    assert_null(weft__semconv_input_messages(NULL));
    json_decref(msgs);
}

static void
test_semconv_output_messages_finish_reason_per_version(void **state)
{
    struct llm_tool_call call = {"call_9", "search", "{\"q\":\"otel\"}"};

    (void)state;
    /* v1.41: finish_reason required on each message, in the schema's enum. */
    assert_json_equal(weft__semconv_output_messages(WEFT__SEMCONV_GENAI_V1_41, "Looking.", &call, 1,
                                                    "tool_calls"),
                      "[{\"role\":\"assistant\",\"parts\":["
                      "  {\"type\":\"text\",\"content\":\"Looking.\"},"
                      "  {\"type\":\"tool_call\",\"id\":\"call_9\",\"name\":\"search\","
                      "   \"arguments\":{\"q\":\"otel\"}}],"
                      " \"finish_reason\":\"tool_call\"}]");
    assert_json_equal(
        weft__semconv_output_messages(WEFT__SEMCONV_GENAI_V1_41, "Done.", NULL, 0, NULL),
        "[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"Done.\"}],"
        " \"finish_reason\":\"stop\"}]");
    /* Latest: deprecated on the message (gen_ai.response.finish_reasons carries it). */
    assert_json_equal(
        weft__semconv_output_messages(WEFT__SEMCONV_GENAI_LATEST, "Done.", NULL, 0, "length"),
        "[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"Done.\"}]}]");
}

static void
test_semconv_system_instructions_are_text_parts(void **state)
{
    (void)state;
    assert_json_equal(weft__semconv_system_instructions("Be brief."),
                      "[{\"type\":\"text\",\"content\":\"Be brief.\"}]");
    assert_null(weft__semconv_system_instructions(NULL));
    assert_null(weft__semconv_system_instructions(""));
    assert_string_equal(weft__semconv_finish_reason("function_call"), "tool_call");
    assert_string_equal(weft__semconv_finish_reason("content_filter"), "content_filter");
}

/* ---- scripted runs ----------------------------------------------------------------------- */

struct fx {
    char dir[64];
    char state[128];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-semconv-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
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
    weft_test_setenv(OPT_IN, NULL);
    weft__semconv_reload();
    return 0;
}

/* Run a shipped example with content capture on, OTEL_SEMCONV_STABILITY_OPT_IN set to
 * @p opt_in (NULL: unset) and read afresh, as a new process would. */
static void
run_example(struct fx *f, const char *example, const char *input, const char *opt_in)
{
    struct weft_run_options ro;
    char path[512];
    char error[512] = "";

    weft_test_setenv(OPT_IN, opt_in);
    weft__semconv_reload();
    snprintf(path, sizeof(path), "%s/examples/%s/workflow.json", WEFT_SOURCE_DIR, example);
    assert_weft_ok(weft_workflow_load(path, &f->wf, NULL));
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(f->sink);
    ro.state_path = f->state;
    ro.workspace = f->dir;
    ro.capture_content = 1;
    ro.input = input;
    if (weft_run(f->wf, &ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
}

static int
kind_of(const json_t *span)
{
    return (int)json_integer_value(json_object_get(span, "kind"));
}

static bool
has_attr(const json_t *span, const char *key)
{
    return json_object_get(json_object_get(span, "attrs"), key) != NULL;
}

/* The JSON an attribute holds, parsed (the test owns it). */
static json_t *
json_attr(const json_t *span, const char *key)
{
    json_t *v = json_loads(otlp_span_attr(span, key), 0, NULL);
    if (v == NULL) {
        fail_msg("%s is not JSON: '%s'", key, otlp_span_attr(span, key));
    }
    return v;
}

/* Keys of the first event named @p name on @p span, joined by "," in order; "" if none. */
static void
event_keys(const json_t *span, const char *name, char *out, size_t len)
{
    size_t i = 0;
    json_t *ev = NULL;

    out[0] = '\0';
    json_array_foreach(json_object_get(span, "events"), i, ev)
    {
        size_t k = 0;
        json_t *kv = NULL;
        size_t used = 0;

        if (strcmp(json_string_value(json_object_get(ev, "name")), name) != 0) {
            continue;
        }
        json_array_foreach(json_object_get(ev, "attributes"), k, kv)
        {
            used += (size_t)snprintf(out + used, len - used, "%s%s", k > 0 ? "," : "",
                                     json_string_value(json_object_get(kv, "key")));
        }
        return;
    }
}

/* What both versions put on the spans of the swarm_reflection example. */
static void
assert_common_vocabulary(struct fx *f)
{
    json_t *root = otlp_sink_find(f->sink, "invoke_workflow swarm-reflection", 0);
    json_t *agent = otlp_sink_find(f->sink, "invoke_agent coder", 0);
    json_t *chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o", 1);
    json_t *plan = otlp_sink_find(f->sink, "plan supervisor", 0);
    json_t *reflect = otlp_sink_find(f->sink, "reflect coder", 0);
    json_t *v = NULL;
    char keys[256];

    assert_non_null(root);
    assert_non_null(agent);
    assert_non_null(chat);
    assert_non_null(plan);
    assert_non_null(reflect);
    /* invoke_workflow {workflow}: INTERNAL. */
    assert_int_equal(kind_of(root), 1);
    assert_string_equal(otlp_span_attr(root, "gen_ai.operation.name"), "invoke_workflow");
    assert_string_equal(otlp_span_attr(root, "gen_ai.workflow.name"), "swarm-reflection");
    assert_string_equal(otlp_span_attr(root, "gen_ai.conversation.id"), f->r->session_id);
    /* invoke_agent {agent}: INTERNAL in process. */
    assert_int_equal(kind_of(agent), 1);
    assert_string_equal(otlp_span_attr(agent, "gen_ai.operation.name"), "invoke_agent");
    assert_string_equal(otlp_span_attr(agent, "gen_ai.agent.name"), "coder");
    assert_string_equal(otlp_span_attr(agent, "gen_ai.request.model"), "scripted-gpt-4o");
    assert_false(has_attr(agent, "gen_ai.agent.id"));
    assert_false(has_attr(agent, "gen_ai.system"));
    v = json_attr(agent, "gen_ai.system_instructions");
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 0), "type")), "text");
    assert_int_equal(json_array_size(v), 1);
    json_decref(v);
    /* plan {agent}. */
    assert_string_equal(otlp_span_attr(plan, "gen_ai.operation.name"), "plan");
    assert_string_equal(otlp_span_attr(plan, "gen_ai.agent.name"), "supervisor");
    /* chat {model}: CLIENT, provider and models, usage, finish reasons, messages as parts. */
    assert_int_equal(kind_of(chat), 3);
    assert_string_equal(otlp_span_attr(chat, "gen_ai.operation.name"), "chat");
    assert_string_equal(otlp_span_attr(chat, "gen_ai.provider.name"), "weft.scripted");
    assert_string_equal(otlp_span_attr(chat, "gen_ai.request.model"), "scripted-gpt-4o");
    assert_false(has_attr(chat, "gen_ai.system"));
    assert_string_not_equal(otlp_span_attr(chat, "gen_ai.response.model"), "");
    assert_string_not_equal(otlp_span_attr(chat, "gen_ai.usage.input_tokens"), "");
    assert_string_not_equal(otlp_span_attr(chat, "gen_ai.usage.output_tokens"), "");
    assert_true(has_attr(chat, "gen_ai.response.finish_reasons"));
    v = json_attr(chat, "gen_ai.input.messages");
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 0), "role")), "system");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(v, 0), "parts"), 0), "type")),
        "text");
    assert_null(json_object_get(json_array_get(v, 0), "content"));
    json_decref(v);
    /* The evaluation result on the reflect span. */
    event_keys(reflect, "gen_ai.evaluation.result", keys, sizeof(keys));
    assert_string_equal(keys, "gen_ai.evaluation.name,gen_ai.evaluation.score.label,"
                              "gen_ai.evaluation.score.value,gen_ai.evaluation.explanation");
}

/* The first execute_tool span of the code_review example: INTERNAL with the tool attributes. */
static void
assert_tool_vocabulary(struct fx *f)
{
    json_t *tool = otlp_sink_find(f->sink, "execute_tool write_file", 0);
    json_t *v = NULL;

    assert_non_null(tool);
    assert_int_equal(kind_of(tool), 1);
    assert_string_equal(otlp_span_attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_string_equal(otlp_span_attr(tool, "gen_ai.tool.name"), "write_file");
    assert_string_equal(otlp_span_attr(tool, "gen_ai.tool.type"), "function");
    assert_string_not_equal(otlp_span_attr(tool, "gen_ai.tool.call.id"), "");
    assert_string_not_equal(otlp_span_attr(tool, "gen_ai.tool.call.result"), "");
    v = json_attr(tool, "gen_ai.tool.call.arguments");
    assert_true(json_is_object(v));
    json_decref(v);
}

/* The finish_reason on output messages and the provider on agent spans are what differ. */
static void
assert_version_specifics(struct fx *f, weft__semconv_genai mode)
{
    json_t *agent = otlp_sink_find(f->sink, "invoke_agent coder", 0);
    json_t *chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o", 1);
    json_t *out = json_attr(chat, "gen_ai.output.messages");
    json_t *msg = json_array_get(out, 0);

    assert_string_equal(json_string_value(json_object_get(msg, "role")), "assistant");
    assert_true(json_array_size(json_object_get(msg, "parts")) >= 1);
    if (mode == WEFT__SEMCONV_GENAI_V1_41) {
        assert_string_equal(otlp_span_attr(agent, "gen_ai.provider.name"), "weft.scripted");
        assert_non_null(json_string_value(json_object_get(msg, "finish_reason")));
    } else {
        assert_false(has_attr(agent, "gen_ai.provider.name"));
        assert_null(json_object_get(msg, "finish_reason"));
    }
    json_decref(out);
}

static void
test_semconv_run_unset_emits_v1_41(void **state)
{
    struct fx *f = *state;

    run_example(f, "swarm_reflection", "Build a rate limiter", NULL);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_common_vocabulary(f);
    assert_version_specifics(f, WEFT__SEMCONV_GENAI_V1_41);
}

static void
test_semconv_run_latest_experimental_emits_latest(void **state)
{
    struct fx *f = *state;

    run_example(f, "swarm_reflection", "Build a rate limiter", "http,gen_ai_latest_experimental");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_common_vocabulary(f);
    assert_version_specifics(f, WEFT__SEMCONV_GENAI_LATEST);
}

static void
test_semconv_run_tools_in_both_versions(void **state)
{
    struct fx *f = *state;

    run_example(f, "code_review", "Add a login endpoint", NULL);
    assert_tool_vocabulary(f);
    weft_run_result_free(f->r);
    f->r = NULL;
    weft_workflow_free(f->wf);
    f->wf = NULL;
    otlp_sink_free(f->sink);
    f->sink = otlp_sink_new();
    run_example(f, "code_review", "Add a login endpoint", "gen_ai_latest_experimental");
    assert_tool_vocabulary(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semconv_parse_unset_and_empty_are_the_default),
        cmocka_unit_test(test_semconv_parse_latest_experimental_in_a_list),
        cmocka_unit_test(test_semconv_parse_other_values_keep_the_default),
        cmocka_unit_test(test_semconv_mode_is_read_once_until_reload),
        cmocka_unit_test(test_semconv_input_messages_become_parts),
        cmocka_unit_test(test_semconv_output_messages_finish_reason_per_version),
        cmocka_unit_test(test_semconv_system_instructions_are_text_parts),
        cmocka_unit_test_setup_teardown(test_semconv_run_unset_emits_v1_41, setup, teardown),
        cmocka_unit_test_setup_teardown(test_semconv_run_latest_experimental_emits_latest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_semconv_run_tools_in_both_versions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
