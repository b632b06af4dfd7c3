/* tests/runtime/test_llm_openai.c - the OpenAI-compatible provider (runtime/llm/openai.c)
 * against a real HTTP/1.1 server on 127.0.0.1 that speaks the chat-completions API
 * (tests/support/openai_server.c). Covers the request (URL, headers, body options), the answer
 * (text, usage, tool calls), the retry rules (429/500/502/503/504 and transport failures only,
 * Retry-After, bounded retries, the overall deadline), final errors and their messages,
 * unusable answers, keep-alive, out-of-memory, and that the API key goes nowhere but the
 * Authorization header. */
#include "support/failalloc.h"
#include "support/openai_server.h"
#include "support/weft_test.h"

#include "runtime/llm/llm.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "sk-test-SECRET-0123456789abcdef"

struct fx {
    struct openai_server *srv;
    char base_url[128];
    json_t *messages;
    struct llm_response response;
    struct llm_error error;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(openai_server_start(&f->srv), 0);
    openai_server_base_url(f->srv, f->base_url, sizeof(f->base_url));
    f->messages = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "content", "You are terse.",
                            "role", "user", "content", "Say hello.");
    assert_non_null(f->messages);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft__llm_response_cleanup(&f->response);
    openai_server_stop(f->srv);
    json_decref(f->messages);
    free(f);
    return 0;
}

/* A provider for the fixture's server with fast backoffs (1-5 ms). */
static struct llm_provider *
make_provider(struct fx *f, const char *key, unsigned max_retries)
{
    struct llm_openai_options o = {0};
    struct llm_provider *p = NULL;

    o.base_url = f->base_url;
    o.api_key = key;
    o.max_retries = max_retries;
    o.initial_backoff_ms = 1;
    o.max_backoff_ms = 5;
    assert_weft_ok(weft__llm_openai_new(&o, &p));
    assert_non_null(p);
    return p;
}

static struct llm_request
basic_request(struct fx *f)
{
    struct llm_request r = {0};

    r.agent = "researcher";
    r.purpose = LLM_PURPOSE_ACT;
    r.model = "gpt-4o-mini";
    r.messages = f->messages;
    r.temperature = -1;
    r.timeout_ms = 10000;
    return r;
}

static weft_err
call(struct fx *f, struct llm_provider *p, const struct llm_request *r)
{
    weft__llm_response_cleanup(&f->response);
    return weft__llm_complete(p, r, &f->response, &f->error);
}

static uint64_t
ms_since(uint64_t t)
{
    return (weft_monotonic_ns() - t) / 1000000u;
}

static void
test_llm_openai_text_answer_parses_content_and_usage(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    char buf[128];

    openai_server_push_text(f->srv, "Hello there.", 12, 3);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "Hello there.");
    assert_int_equal(f->response.tool_call_count, 0);
    assert_null(f->response.tool_calls);
    assert_int_equal(f->response.input_tokens, 12);
    assert_int_equal(f->response.output_tokens, 3);
    assert_string_equal(f->response.response_model, "gpt-4o-mini");
    assert_string_equal(f->response.finish_reason, "stop");
    assert_non_null(f->response.response_id);
    assert_true(strncmp(f->response.response_id, "chatcmpl-", 9) == 0);
    assert_int_equal(f->response.attempts, 1);

    assert_int_equal(openai_server_request_count(f->srv), 1);
    assert_string_equal(openai_server_request_path(f->srv, 0), "/v1/chat/completions");
    assert_non_null(openai_server_request_header(f->srv, 0, "User-Agent", buf, sizeof(buf)));
    assert_string_equal(buf, "weft/" WEFT_VERSION);
    assert_non_null(openai_server_request_header(f->srv, 0, "Content-Type", buf, sizeof(buf)));
    assert_string_equal(buf, "application/json");
    assert_null(openai_server_request_header(f->srv, 0, "Authorization", buf, sizeof(buf)));
    weft__llm_provider_free(p);
}

static void
test_llm_openai_missing_usage_gives_minus_one(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_text(f->srv, "no usage here", -1, -1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "no usage here");
    assert_int_equal(f->response.input_tokens, -1);
    assert_int_equal(f->response.output_tokens, -1);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_request_body_carries_every_option(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    json_t *tools =
        json_pack("[{s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s}},s:[s]}}}]", "type", "function", "function",
                  "name", "search", "description", "Search the web", "parameters", "type", "object",
                  "properties", "q", "type", "string", "required", "q");
    const json_t *body = NULL;

    assert_non_null(tools);
    r.model = "gpt-4.1";
    r.tools = tools;
    r.json_mode = true;
    r.temperature = 0.25;
    r.max_tokens = 256;
    openai_server_push_text(f->srv, "{\"ok\":true}", 40, 4);
    assert_weft_ok(call(f, p, &r));

    body = openai_server_request_body(f->srv, 0);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "model")), "gpt-4.1");
    assert_true(json_equal(json_object_get(body, "messages"), f->messages));
    assert_true(json_equal(json_object_get(body, "tools"), tools));
    assert_string_equal(json_string_value(json_object_get(body, "tool_choice")), "auto");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "response_format"), "type")),
        "json_object");
    assert_true(json_is_real(json_object_get(body, "temperature")));
    assert_true(json_real_value(json_object_get(body, "temperature")) == 0.25);
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 256);
    /* The answer's model is what the server reports. */
    assert_string_equal(f->response.response_model, "gpt-4.1");
    json_decref(tools);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_defaults_leave_options_out(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    json_t *no_tools = json_array();
    const json_t *body = NULL;

    r.tools = no_tools; /* empty: same as none */
    openai_server_push_text(f->srv, "hi", 1, 1);
    assert_weft_ok(call(f, p, &r));
    body = openai_server_request_body(f->srv, 0);
    assert_non_null(body);
    assert_non_null(json_object_get(body, "model"));
    assert_non_null(json_object_get(body, "messages"));
    assert_null(json_object_get(body, "tools"));
    assert_null(json_object_get(body, "tool_choice"));
    assert_null(json_object_get(body, "response_format"));
    assert_null(json_object_get(body, "temperature"));
    assert_null(json_object_get(body, "max_tokens"));
    json_decref(no_tools);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_tool_call_answer_is_parsed(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_tool_call(f->srv, "call_abc123", "search", "{\"q\":\"weft tracing\"}", 20,
                                 7);
    assert_weft_ok(call(f, p, &r));
    assert_null(f->response.content);
    assert_int_equal(f->response.tool_call_count, 1);
    assert_string_equal(f->response.tool_calls[0].id, "call_abc123");
    assert_string_equal(f->response.tool_calls[0].name, "search");
    assert_string_equal(f->response.tool_calls[0].arguments, "{\"q\":\"weft tracing\"}");
    assert_string_equal(f->response.finish_reason, "tool_calls");
    assert_int_equal(f->response.input_tokens, 20);
    assert_int_equal(f->response.output_tokens, 7);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_tool_call_without_id_gets_one(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_tool_call(f->srv, NULL, "lookup", "{}", 5, 2);
    openai_server_push_tool_call(f->srv, NULL, "lookup", "{}", 5, 2);
    assert_weft_ok(call(f, p, &r));
    assert_int_equal(f->response.tool_call_count, 1);
    assert_string_equal(f->response.tool_calls[0].id, "call_1");
    assert_string_equal(f->response.tool_calls[0].name, "lookup");
    assert_string_equal(f->response.tool_calls[0].arguments, "{}");
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.tool_calls[0].id, "call_2"); /* unique per provider */
    weft__llm_provider_free(p);
}

static void
test_llm_openai_429_is_retried_then_succeeds(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_error(f->srv, 429, "0", NULL);
    openai_server_push_text(f->srv, "after the rate limit", 3, 4);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "after the rate limit");
    assert_int_equal(f->response.attempts, 2);
    assert_int_equal(openai_server_request_count(f->srv), 2);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_retry_after_seconds_is_honoured(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    uint64_t t = weft_monotonic_ns();

    openai_server_push_error(f->srv, 429, "1", "Rate limit reached for gpt-4o-mini");
    openai_server_push_text(f->srv, "ok", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_true(ms_since(t) >= 950); /* the backoff alone is at most 1 ms */
    assert_int_equal(f->response.attempts, 2);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_retry_after_past_the_deadline_gives_up_at_once(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    uint64_t t = weft_monotonic_ns();

    r.timeout_ms = 3000;
    openai_server_push_error(f->srv, 503, "30", NULL);
    assert_weft_err(call(f, p, &r), WEFT_ETIMEDOUT);
    assert_string_equal(f->error.type, "timeout");
    assert_non_null(strstr(f->error.message, "503"));
    assert_true(ms_since(t) < 2000);
    assert_int_equal(openai_server_request_count(f->srv), 1);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_500_twice_then_success(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_error(f->srv, 500, NULL, NULL);
    openai_server_push_error(f->srv, 500, NULL, NULL);
    openai_server_push_text(f->srv, "third time lucky", 8, 3);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "third time lucky");
    assert_int_equal(f->response.attempts, 3);
    assert_int_equal(openai_server_request_count(f->srv), 3);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_502_503_504_are_retried(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_error(f->srv, 502, NULL, NULL);
    openai_server_push_error(f->srv, 503, NULL, NULL);
    openai_server_push_error(f->srv, 504, NULL, NULL);
    openai_server_push_text(f->srv, "up again", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_int_equal(f->response.attempts, 4); /* the default of 3 retries */
    weft__llm_provider_free(p);
}

static void
test_llm_openai_retries_are_bounded(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 2);
    struct llm_request r = basic_request(f);

    /* Empty queue: the server answers 500 every time. */
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_string_equal(f->error.type, "http_500");
    assert_non_null(strstr(f->error.message, "3 attempts"));
    assert_non_null(strstr(f->error.message, "The server had an error"));
    assert_int_equal(openai_server_request_count(f->srv), 3);
    assert_null(f->response.content);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_400_is_final(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push_error(f->srv, 400, NULL,
                             "Invalid value for 'temperature': must be between 0 and 2.");
    openai_server_push_text(f->srv, "never sent", 1, 1);
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_string_equal(f->error.type, "http_400");
    assert_non_null(strstr(f->error.message, "HTTP 400"));
    assert_non_null(
        strstr(f->error.message, "Invalid value for 'temperature': must be between 0 and 2."));
    assert_int_equal(openai_server_request_count(f->srv), 1);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_long_error_message_is_truncated(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    char big[2000];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    openai_server_push_error(f->srv, 422, NULL, big);
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_string_equal(f->error.type, "http_422");
    assert_true(strlen(f->error.message) < sizeof(f->error.message));
    assert_non_null(strstr(f->error.message, "xxxxxxxx"));
    weft__llm_provider_free(p);
}

static void
test_llm_openai_wrong_key_is_401_without_leaking_it(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, SECRET, 0);
    struct llm_request r = basic_request(f);

    openai_server_expect_key(f->srv, "sk-the-right-one");
    openai_server_push_text(f->srv, "never sent", 1, 1);
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_string_equal(f->error.type, "http_401");
    /* The server echoes the key it got; the client keeps the sentence but not the key. */
    assert_non_null(strstr(f->error.message, "Incorrect API key provided"));
    assert_null(strstr(f->error.message, SECRET));
    assert_null(strstr(f->error.message, "SECRET"));
    assert_non_null(strstr(f->error.message, "[redacted]"));
    assert_int_equal(openai_server_request_count(f->srv), 1);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_key_is_sent_but_never_logged(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = NULL;
    struct llm_request r = basic_request(f);
    char auth[128];

    weft_test_capture_logs();
    p = make_provider(f, SECRET, 0);
    openai_server_expect_key(f->srv, SECRET);
    openai_server_push_error(f->srv, 500, NULL, NULL);
    openai_server_push_text(f->srv, "authorised", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "authorised");
    for (size_t i = 0; i < 2; i++) {
        assert_non_null(
            openai_server_request_header(f->srv, i, "Authorization", auth, sizeof(auth)));
        assert_string_equal(auth, "Bearer " SECRET);
    }
    /* A failure too: the server now wants another key and quotes the one it got. */
    openai_server_expect_key(f->srv, "sk-rotated");
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_null(strstr(f->error.message, SECRET));
    weft__llm_provider_free(p);

    assert_non_null(strstr(weft_test_logs(), "retry")); /* the capture did see lines */
    assert_null(strstr(weft_test_logs(), SECRET));
    assert_null(strstr(weft_test_logs(), "SECRET"));
}

static void
test_llm_openai_overall_timeout_with_a_slow_server(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    uint64_t t = weft_monotonic_ns();
    uint64_t took = 0;

    r.timeout_ms = 300;
    openai_server_push_delay(f->srv, 5000, "too late");
    assert_weft_err(call(f, p, &r), WEFT_ETIMEDOUT);
    took = ms_since(t);
    assert_string_equal(f->error.type, "timeout");
    assert_true(took >= 290);
    assert_true(took < 2000);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_connection_refused_is_eio_after_retries(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 2);
    struct llm_request r = basic_request(f);

    openai_server_stop(f->srv); /* nothing listens on the port any more */
    f->srv = NULL;
    assert_weft_err(call(f, p, &r), WEFT_EIO);
    assert_string_equal(f->error.type, "connection");
    assert_non_null(strstr(f->error.message, "3 attempts"));
    weft__llm_provider_free(p);
}

static void
test_llm_openai_dropped_connection_is_retried(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push(f->srv, &(struct openai_reply){.drop = true});
    openai_server_push_text(f->srv, "reconnected", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "reconnected");
    assert_int_equal(f->response.attempts, 2);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_invalid_json_is_eparse(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push(f->srv, &(struct openai_reply){.raw_body = "<html>502 Bad Gateway</html>",
                                                      .content_type = "text/html"});
    assert_weft_err(call(f, p, &r), WEFT_EPARSE);
    assert_string_equal(f->error.type, "invalid_response");
    assert_null(f->response.content);
    assert_int_equal(openai_server_request_count(f->srv), 1); /* not retried */
    weft__llm_provider_free(p);
}

static void
test_llm_openai_answer_without_choices_is_eparse(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push(
        f->srv,
        &(struct openai_reply){.raw_body = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\","
                                           "\"choices\":[]}"});
    assert_weft_err(call(f, p, &r), WEFT_EPARSE);
    assert_string_equal(f->error.type, "invalid_response");
    assert_non_null(strstr(f->error.message, "choices"));
    weft__llm_provider_free(p);
}

/* Every wrong-typed member is an invalid_response error naming the member and the types, not
 * an empty answer; none is retried. */
static void
test_llm_openai_wrong_types_are_invalid_response(void **state)
{
    static const struct {
        const char *body;
        const char *reason;
    } cases[] = {
        {"{\"choices\":[{\"message\":{\"content\":12}}]}",
         "response: choices[0].message.content: expected string or null, got integer"},
        {"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":\"x\"}}]}",
         "response: choices[0].message.tool_calls: expected array or null, got string"},
        {"{\"choices\":[{\"message\":{\"content\":\"hi\"}}],"
         "\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":1}}",
         "response: usage.prompt_tokens: expected an integer in [0, 10^12], got -5"},
        {"{\"choices\":[{\"message\":{\"content\":\"hi\"}}],"
         "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1e300}}",
         "response: usage.completion_tokens: expected a non-negative integer, got number"},
        {"{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"usage\":[1,2]}",
         "response: usage: expected object or null, got array"},
        {"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
         "\"function\":{\"name\":\"search\",\"arguments\":12}}]}}]}",
         "response: choices[0].message.tool_calls[0].function.arguments: expected string, got "
         "integer"},
        {"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
         "\"function\":{\"name\":7}}]}}]}",
         "response: choices[0].message.tool_calls[0].function.name: expected a non-empty "
         "string, got integer"},
        {"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[\"x\"]}}]}",
         "response: choices[0].message.tool_calls[0]: expected object, got string"},
        {"{\"id\":\"chatcmpl-1\"}", "response: choices: expected a non-empty array, got nothing"},
        {"{\"choices\":{}}", "response: choices: expected a non-empty array, got object"},
        {"{\"choices\":[{\"message\":\"hi\"}]}",
         "response: choices[0].message: expected object, got string"},
        {"{\"choices\":[{\"message\":{\"content\":\"hi\"},\"finish_reason\":3}]}",
         "response: choices[0].finish_reason: expected string or null, got integer"},
        {"{\"model\":[],\"choices\":[{\"message\":{\"content\":\"hi\"}}]}",
         "response: model: expected string or null, got array"},
    };
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 3);
    struct llm_request r = basic_request(f);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t before = openai_server_request_count(f->srv);

        openai_server_push(f->srv, &(struct openai_reply){.raw_body = cases[i].body});
        assert_weft_err(call(f, p, &r), WEFT_EPARSE);
        assert_string_equal(f->error.type, "invalid_response");
        if (strstr(f->error.message, cases[i].reason) == NULL) {
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, f->error.message, cases[i].reason);
        }
        assert_null(f->response.content);
        assert_int_equal(f->response.tool_call_count, 0);
        assert_int_equal(openai_server_request_count(f->srv), before + 1); /* not retried */
    }
    weft__llm_provider_free(p);
}

/* What the API and compatible servers legitimately send still parses: null content with
 * tool calls, arguments as an object, null usage and null members. */
static void
test_llm_openai_lenient_shapes_still_parse(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    openai_server_push(f->srv,
                       &(struct openai_reply){
                           .raw_body = "{\"id\":null,\"model\":null,\"usage\":null,\"choices\":[{"
                                       "\"finish_reason\":null,\"message\":{\"content\":null,"
                                       "\"tool_calls\":[{\"function\":{\"name\":\"search\","
                                       "\"arguments\":{\"q\":\"x\"}}}]}}]}"});
    assert_weft_ok(call(f, p, &r));
    assert_null(f->response.content);
    assert_int_equal(f->response.tool_call_count, 1);
    assert_string_equal(f->response.tool_calls[0].arguments, "{\"q\":\"x\"}");
    assert_int_equal(f->response.input_tokens, -1);
    weft__llm_provider_free(p);
}

/* Configured secrets leave every answer at ingress (weft__llm_complete), whatever member holds
 * them, and the error texts too. */
static void
test_llm_openai_registered_secrets_are_scrubbed_from_answers(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    weft_secrets_clear();
    assert_weft_ok(weft_secrets_add("LOCAL_KEY", "plain-local-token-42"));
    openai_server_push_text(f->srv, "the token is plain-local-token-42", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.content, "the token is [REDACTED:LOCAL_KEY]");
    openai_server_push_tool_call(f->srv, "c1", "search", "{\"q\": \"plain-local-token-42\"}", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(f->response.tool_calls[0].arguments, "{\"q\": \"[REDACTED:LOCAL_KEY]\"}");
    openai_server_push_error(f->srv, 400, NULL, "bad token plain-local-token-42");
    assert_weft_err(call(f, p, &r), WEFT_EHTTP);
    assert_null(strstr(f->error.message, "plain-local-token-42"));
    assert_non_null(strstr(f->error.message, "[REDACTED:LOCAL_KEY]"));
    weft_secrets_clear();
    weft__llm_provider_free(p);
}

static void
test_llm_openai_oversized_answer_is_an_error(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);
    size_t n = (9u << 20);
    char *big = malloc(n + 1);

    assert_non_null(big);
    memset(big, ' ', n);
    big[n] = '\0';
    openai_server_push(f->srv, &(struct openai_reply){.raw_body = big, .raw_len = n});
    free(big);
    assert_weft_err(call(f, p, &r), WEFT_EPARSE);
    assert_string_equal(f->error.type, "invalid_response");
    assert_non_null(strstr(f->error.message, "over"));
    weft__llm_provider_free(p);
}

static void
test_llm_openai_bad_options_are_einval(void **state)
{
    struct llm_openai_options o = {0};
    struct llm_provider *p = (struct llm_provider *)state; /* any non-NULL value */

    assert_weft_err(weft__llm_openai_new(&o, &p), WEFT_EINVAL); /* no base_url */
    assert_null(p);
    o.base_url = "";
    assert_weft_err(weft__llm_openai_new(&o, &p), WEFT_EINVAL);
    o.base_url = "ftp://example.com/v1";
    assert_weft_err(weft__llm_openai_new(&o, &p), WEFT_EINVAL);
    assert_weft_err(weft__llm_openai_new(NULL, &p), WEFT_EINVAL);
    o.base_url = "http://127.0.0.1:1/v1";
    assert_weft_err(weft__llm_openai_new(&o, NULL), WEFT_EINVAL);
}

static void
test_llm_openai_request_without_model_is_einval(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    r.model = NULL;
    assert_weft_err(call(f, p, &r), WEFT_EINVAL);
    assert_int_equal(openai_server_request_count(f->srv), 0);
    weft__llm_provider_free(p);
}

static void
test_llm_openai_trailing_slash_is_stripped(void **state)
{
    struct fx *f = *state;
    struct llm_openai_options o = {0};
    struct llm_provider *p = NULL;
    struct llm_request r = basic_request(f);
    char url[160];

    snprintf(url, sizeof(url), "%s/", f->base_url);
    o.base_url = url;
    o.provider_name = "vllm";
    assert_weft_ok(weft__llm_openai_new(&o, &p));
    assert_string_equal(p->provider_name, "vllm");
    openai_server_push_text(f->srv, "ok", 1, 1);
    assert_weft_ok(call(f, p, &r));
    assert_string_equal(openai_server_request_path(f->srv, 0), "/v1/chat/completions");
    weft__llm_provider_free(p);
}

static void
test_llm_openai_reuses_the_connection(void **state)
{
    struct fx *f = *state;
    struct llm_provider *p = make_provider(f, NULL, 0);
    struct llm_request r = basic_request(f);

    assert_string_equal(p->provider_name, "openai");
    openai_server_push_text(f->srv, "one", 1, 1);
    openai_server_push_text(f->srv, "two", 1, 1);
    openai_server_push_text(f->srv, "three", 1, 1);
    for (int i = 0; i < 3; i++) {
        assert_weft_ok(call(f, p, &r));
    }
    assert_string_equal(f->response.content, "three");
    assert_int_equal(openai_server_request_count(f->srv), 3);
    assert_int_equal(openai_server_request_conn(f->srv, 0), openai_server_request_conn(f->srv, 2));
    weft__llm_provider_free(p);
}

static void
test_llm_openai_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    struct llm_request r = basic_request(f);
    bool has_reply_queued = false;
    bool is_done = false;

    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 1000; budget++) {
        struct llm_openai_options o = {0};
        struct llm_provider *p = NULL;
        size_t before = 0;
        weft_err err = WEFT_OK;

        o.base_url = f->base_url;
        o.api_key = SECRET;
        failalloc_budget = budget;
        err = weft__llm_openai_new(&o, &p);
        if (err != WEFT_OK) {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(p);
            continue;
        }
        if (!has_reply_queued) {
            openai_server_push_tool_call(f->srv, "call_1", "search", "{\"q\":1}", 3, 4);
            has_reply_queued = true;
        }
        before = openai_server_request_count(f->srv);
        err = call(f, p, &r);
        if (openai_server_request_count(f->srv) > before) {
            has_reply_queued = false; /* the server used it */
        }
        if (err == WEFT_OK) {
            assert_string_equal(f->response.tool_calls[0].name, "search");
            is_done = true;
        } else {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(f->response.content);
            assert_int_equal(f->response.tool_call_count, 0);
        }
        weft__llm_response_cleanup(&f->response);
        weft__llm_provider_free(p);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_llm_openai_text_answer_parses_content_and_usage),
        T(test_llm_openai_missing_usage_gives_minus_one),
        T(test_llm_openai_request_body_carries_every_option),
        T(test_llm_openai_defaults_leave_options_out),
        T(test_llm_openai_tool_call_answer_is_parsed),
        T(test_llm_openai_tool_call_without_id_gets_one),
        T(test_llm_openai_429_is_retried_then_succeeds),
        T(test_llm_openai_retry_after_seconds_is_honoured),
        T(test_llm_openai_retry_after_past_the_deadline_gives_up_at_once),
        T(test_llm_openai_500_twice_then_success),
        T(test_llm_openai_502_503_504_are_retried),
        T(test_llm_openai_retries_are_bounded),
        T(test_llm_openai_400_is_final),
        T(test_llm_openai_long_error_message_is_truncated),
        T(test_llm_openai_wrong_key_is_401_without_leaking_it),
        T(test_llm_openai_key_is_sent_but_never_logged),
        T(test_llm_openai_overall_timeout_with_a_slow_server),
        T(test_llm_openai_connection_refused_is_eio_after_retries),
        T(test_llm_openai_dropped_connection_is_retried),
        T(test_llm_openai_invalid_json_is_eparse),
        T(test_llm_openai_answer_without_choices_is_eparse),
        T(test_llm_openai_wrong_types_are_invalid_response),
        T(test_llm_openai_lenient_shapes_still_parse),
        T(test_llm_openai_registered_secrets_are_scrubbed_from_answers),
        T(test_llm_openai_oversized_answer_is_an_error),
        T(test_llm_openai_bad_options_are_einval),
        T(test_llm_openai_request_without_model_is_einval),
        T(test_llm_openai_trailing_slash_is_stripped),
        T(test_llm_openai_reuses_the_connection),
        T(test_llm_openai_out_of_memory_fails_cleanly),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
