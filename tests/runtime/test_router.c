/* tests/runtime/test_router.c - the router as a module: weft__rt_router_decide() driven through a
 * run services table of the test's own, whose llm_call answers from a script and records what
 * it was asked, with no engine, state store or provider behind it.
 *
 * Covers the three layers (counter_limit, pattern, llm), the fallback for a failed call and for
 * every malformed answer (not JSON, no route, a route that is not a string, an unknown route),
 * the clarification route chosen by the model, and what the model is shown. */
#include "runtime/decide/router.h"

#include "base/mem.h"
#include "support/weft_test.h"

#include <string.h>

struct script {
    const char *answer; /* NULL: the call fails */
    unsigned calls;
    size_t model;
    double temperature;
    bool json_mode;
    llm_purpose purpose;
    char *messages; /* what the last call was shown (JSON text) */
};

static weft_err
scripted_call(void *ctx,
              const struct run_llm_call *call,
              struct llm_response *response,
              struct llm_error *error)
{
    struct script *s = ctx;

    s->calls++;
    s->model = call->model;
    s->temperature = call->temperature;
    s->json_mode = call->json_mode;
    s->purpose = call->purpose;
    free(s->messages);
    s->messages = json_dumps(call->messages, JSON_COMPACT);
    memset(response, 0, sizeof(*response));
    if (s->answer == NULL) {
        snprintf(error->type, sizeof(error->type), "%s", "http_503");
        snprintf(error->message, sizeof(error->message), "unavailable");
        return WEFT_EHTTP;
    }
    response->content = weft__strdup(s->answer);
    return response->content != NULL ? WEFT_OK : WEFT_ENOMEM;
}

struct fx {
    struct script script;
    struct run_services svc;
    struct wf_route routes[3];
    char *vague[2];
    struct wf_router router;
    json_t *history;
    struct weft_span *span;
    struct rt_route_decision d;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    f->svc.ctx = &f->script;
    f->svc.llm_call = scripted_call; /* the router's only service; the rest stay NULL */
    f->routes[0] = (struct wf_route){"answer", 0};
    f->routes[1] = (struct wf_route){"clarify", 1};
    f->routes[2] = (struct wf_route){"billing", 2};
    f->vague[0] = "not sure";
    f->vague[1] = "whatever";
    f->router.model = 1;
    f->router.instructions = "Route support messages.";
    f->router.temperature = 0.1;
    f->router.routes = f->routes;
    f->router.route_count = 3;
    f->router.default_route = 0;
    f->router.clarification_route = 1;
    f->router.max_clarifications = 2;
    f->router.vague_patterns = f->vague;
    f->router.vague_pattern_count = 2;
    f->history = json_array();
    f->span = weft_span_start(NULL, "", NULL); /* the shared non-recording span */
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_span_end(f->span, 0);
    json_decref(f->history);
    free(f->script.messages);
    free(f);
    return 0;
}

static void
add_turn(struct fx *f, const char *user, const char *assistant, const char *route)
{
    json_array_append_new(f->history, json_pack("{s:s, s:s}", "role", "user", "content", user));
    json_array_append_new(f->history, json_pack("{s:s, s:s, s:s}", "role", "assistant", "content",
                                                assistant, "route", route));
}

static void
decide(struct fx *f, const char *input)
{
    memset(&f->d, 0xff, sizeof(f->d));
    weft__rt_router_decide(&f->svc, &f->router, NULL, input, f->history, f->span, &f->d);
}

static void
test_router_llm_layer_takes_the_models_route(void **state)
{
    struct fx *f = *state;

    f->script.answer = "{\"route\": \"billing\", \"reason\": \"asks about an invoice\"}";
    decide(f, "why was I charged twice?");
    assert_int_equal(f->d.route, 2);
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
    assert_string_equal(f->d.reason, "asks about an invoice");
    assert_int_equal(f->script.calls, 1);
    assert_int_equal(f->script.model, 1);
    assert_true(f->script.json_mode);
    assert_int_equal(f->script.purpose, LLM_PURPOSE_ROUTE);
    assert_true(f->script.temperature > 0.09 && f->script.temperature < 0.11);
}

static void
test_router_llm_is_shown_routes_history_and_message(void **state)
{
    struct fx *f = *state;

    add_turn(f, "hello", "hi, how can I help?", "answer");
    f->script.answer = "{\"route\": \"answer\"}";
    decide(f, "reset my password");
    assert_non_null(strstr(f->script.messages, "Route support messages.\\nRoutes: answer clarify "
                                               "billing"));
    assert_non_null(strstr(f->script.messages, "{\"role\":\"user\",\"content\":\"hello\"}"));
    assert_non_null(strstr(f->script.messages, "\"content\":\"hi, how can I help?\""));
    assert_non_null(
        strstr(f->script.messages, "{\"role\":\"user\",\"content\":\"reset my password\"}]"));
    /* No reason given: the route's name is the reason. */
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
    assert_string_equal(f->d.reason, "answer");
}

static void
test_router_llm_can_choose_the_clarification_route(void **state)
{
    struct fx *f = *state;

    f->script.answer = "{\"route\": \"clarify\", \"reason\": \"which account?\"}";
    decide(f, "it does not work");
    assert_int_equal(f->d.route, 1);
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
}

static void
test_router_pattern_layer_answers_a_clarification_without_llm(void **state)
{
    struct fx *f = *state;

    add_turn(f, "it does not work", "which account?", "clarify");
    f->script.answer = "{\"route\": \"billing\"}";
    decide(f, "the business one, number 42");
    assert_int_equal(f->d.route, 0);
    assert_int_equal(f->d.layer, RT_LAYER_PATTERN);
    assert_int_equal(f->script.calls, 0);
    assert_non_null(strstr(f->d.reason, "answered a clarification: answer"));
}

static void
test_router_vague_reply_to_a_clarification_goes_to_the_llm(void **state)
{
    struct fx *f = *state;

    add_turn(f, "it does not work", "which account?", "clarify");
    f->script.answer = "{\"route\": \"clarify\", \"reason\": \"still vague\"}";
    decide(f, "I'm Not Sure really");
    assert_int_equal(f->script.calls, 1);
    assert_int_equal(f->d.route, 1);
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
}

static void
test_router_counter_limit_forces_the_default_route(void **state)
{
    struct fx *f = *state;

    add_turn(f, "help", "with what?", "clarify");
    add_turn(f, "whatever", "can you say more?", "clarify");
    f->script.answer = "{\"route\": \"clarify\"}";
    decide(f, "whatever");
    assert_int_equal(f->d.route, 0);
    assert_int_equal(f->d.layer, RT_LAYER_COUNTER_LIMIT);
    assert_int_equal(f->script.calls, 0);
    assert_string_equal(f->d.reason, "2 clarifications in a row (max 2): forcing answer");
}

static void
test_router_counts_only_trailing_clarifications(void **state)
{
    struct fx *f = *state;

    add_turn(f, "help", "with what?", "clarify");
    add_turn(f, "whatever", "can you say more?", "clarify");
    add_turn(f, "my bill", "here it is", "billing"); /* the streak ended here */
    f->script.answer = "{\"route\": \"billing\", \"reason\": \"r\"}";
    decide(f, "thanks");
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
    assert_int_equal(f->script.calls, 1);
}

static void
test_router_without_clarification_route_never_counts(void **state)
{
    struct fx *f = *state;

    f->router.clarification_route = WF_NONE;
    add_turn(f, "help", "with what?", "clarify");
    add_turn(f, "whatever", "can you say more?", "clarify");
    f->script.answer = "{\"route\": \"billing\", \"reason\": \"r\"}";
    decide(f, "whatever");
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
    assert_int_equal(f->d.route, 2);
}

static void
test_router_failed_call_falls_back(void **state)
{
    struct fx *f = *state;

    f->script.answer = NULL;
    decide(f, "hello");
    assert_int_equal(f->d.route, 0);
    assert_int_equal(f->d.layer, RT_LAYER_FALLBACK);
    assert_string_equal(f->d.reason, "router LLM failed (http_503): falling back to answer");
}

static void
test_router_malformed_answers_fall_back(void **state)
{
    static const char *const answers[] = {
        "not json at all",
        "",
        "[\"billing\"]",
        "{\"reason\": \"no route\"}",
        "{\"route\": 2}",
        "{\"route\": null}",
        "{\"route\": \"refunds\", \"reason\": \"unknown route\"}",
        "{\"route\": \"Billing\"}", /* names are exact */
        "{\"route\": \"billing\"",  /* truncated */
    };
    struct fx *f = *state;

    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        f->script.answer = answers[i];
        decide(f, "hello");
        if (f->d.route != 0 || f->d.layer != RT_LAYER_FALLBACK) {
            fail_msg("answer %zu (%s): route %zu layer %d", i, answers[i], f->d.route,
                     (int)f->d.layer);
        }
        assert_string_equal(f->d.reason, "router LLM gave no known route: falling back to answer");
    }
    assert_int_equal(f->script.calls, sizeof(answers) / sizeof(answers[0]));
}

static void
test_router_null_input_and_history(void **state)
{
    struct fx *f = *state;

    f->script.answer = "{\"route\": \"billing\", \"reason\": \"r\"}";
    memset(&f->d, 0, sizeof(f->d));
    weft__rt_router_decide(&f->svc, &f->router, NULL, NULL, NULL, f->span, &f->d);
    assert_int_equal(f->d.route, 2);
    assert_non_null(strstr(f->script.messages, "{\"role\":\"user\",\"content\":\"\"}]"));
}

static void
test_router_long_reason_is_cut(void **state)
{
    struct fx *f = *state;
    char answer[1200];
    char reason[901];

    memset(reason, 'x', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    snprintf(answer, sizeof(answer), "{\"route\": \"billing\", \"reason\": \"%s\"}", reason);
    f->script.answer = answer;
    decide(f, "hello");
    assert_int_equal(f->d.layer, RT_LAYER_LLM);
    assert_int_equal(strlen(f->d.reason), 300);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_router_llm_layer_takes_the_models_route),
        T(test_router_llm_is_shown_routes_history_and_message),
        T(test_router_llm_can_choose_the_clarification_route),
        T(test_router_pattern_layer_answers_a_clarification_without_llm),
        T(test_router_vague_reply_to_a_clarification_goes_to_the_llm),
        T(test_router_counter_limit_forces_the_default_route),
        T(test_router_counts_only_trailing_clarifications),
        T(test_router_without_clarification_route_never_counts),
        T(test_router_failed_call_falls_back),
        T(test_router_malformed_answers_fall_back),
        T(test_router_null_input_and_history),
        T(test_router_long_reason_is_cut),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
