/* tests/dist/test_message.c - task and result messages: a round trip keeps every field, and
 * each kind of bad input is refused with a sentence naming the field. */
#include "runtime/dist/message.h"
#include "support/weft_test.h"

#include <stdlib.h>
#include <string.h>

static const char uuid[] = "123e4567-e89b-42d3-a456-426614174000";

static void
test_task_round_trip(void **state)
{
    struct weft__task_msg m, back;
    char *text = NULL;
    size_t len = 0;
    char err[256] = "";

    (void)state;
    memset(&m, 0, sizeof(m));
    m.run_id = "r1";
    memcpy(m.task_id, uuid, sizeof(uuid));
    m.seq = 7;
    m.attempt = 2;
    m.step_id = "s3";
    m.kind = "agent";
    m.agent = "reviewer";
    m.task = "review login.py";
    m.context = json_pack("{s:s}", "s2", "code");
    m.workflow_path = "/w/workflow.json";
    m.workflow = json_pack("{s:s}", "name", "wf");
    m.capture_content = true;
    m.timeout_ms = 5000;
    assert_int_equal(weft__task_msg_encode(&m, &text, &len), WEFT_OK);
    assert_int_equal(weft__task_msg_decode(text, len, &back, err, sizeof(err)), WEFT_OK);
    assert_string_equal(back.run_id, "r1");
    assert_string_equal(back.task_id, uuid);
    assert_int_equal(back.seq, 7);
    assert_int_equal(back.attempt, 2);
    assert_string_equal(back.agent, "reviewer");
    assert_string_equal(json_string_value(json_object_get(back.context, "s2")), "code");
    assert_string_equal(json_string_value(json_object_get(back.workflow, "name")), "wf");
    assert_true(back.capture_content);
    assert_int_equal(back.timeout_ms, 5000);
    weft__task_msg_cleanup(&back);
    free(text);
    json_decref(m.context);
    json_decref(m.workflow);
}

static void
test_result_round_trip(void **state)
{
    struct weft__result_msg m, back;
    char *text = NULL;
    size_t len = 0;
    char err[256] = "";

    (void)state;
    memset(&m, 0, sizeof(m));
    m.run_id = "r1";
    memcpy(m.task_id, uuid, sizeof(uuid));
    m.seq = 1;
    m.attempt = 1;
    m.error = "boom";
    m.error_type = "exit_status";
    m.delivery_count = 2;
    m.input_tokens = 10;
    m.output_tokens = 3;
    m.llm_calls = 4;
    m.requests = json_pack("[{s:s, s:s}]", "agent", "fixer", "query", "fix it");
    assert_int_equal(weft__result_msg_encode(&m, &text, &len), WEFT_OK);
    assert_int_equal(weft__result_msg_decode(text, len, &back, err, sizeof(err)), WEFT_OK);
    assert_false(back.is_success);
    assert_string_equal(back.error, "boom");
    assert_string_equal(back.error_type, "exit_status");
    assert_int_equal(back.delivery_count, 2);
    assert_int_equal(back.input_tokens, 10);
    assert_int_equal(back.llm_calls, 4);
    assert_int_equal(json_array_size(back.requests), 1);
    weft__result_msg_cleanup(&back);
    free(text);
    json_decref(m.requests);
}

/* A no-op task needs no workflow; its result is a success with an empty (not a missing)
 * output. */
static void
test_noop_round_trip(void **state)
{
    struct weft__task_msg m, back;
    struct weft__result_msg r, r_back;
    char *text = NULL;
    size_t len = 0;
    char err[256] = "";

    (void)state;
    memset(&m, 0, sizeof(m));
    m.run_id = "r1";
    memcpy(m.task_id, uuid, sizeof(uuid));
    m.seq = 1;
    m.attempt = 1;
    m.step_id = "s1";
    m.kind = "noop";
    m.agent = "noop";
    m.task = "";
    assert_int_equal(weft__task_msg_encode(&m, &text, &len), WEFT_OK);
    assert_int_equal(weft__task_msg_decode(text, len, &back, err, sizeof(err)), WEFT_OK);
    assert_string_equal(back.kind, "noop");
    assert_null(back.workflow);
    assert_null(back.workflow_path);
    weft__task_msg_cleanup(&back);
    free(text);

    memset(&r, 0, sizeof(r));
    r.run_id = "r1";
    memcpy(r.task_id, uuid, sizeof(uuid));
    r.seq = 1;
    r.attempt = 1;
    r.is_success = true;
    r.output = "";
    r.started_ns = 1000;
    r.ended_ns = 1001;
    assert_int_equal(weft__result_msg_encode(&r, &text, &len), WEFT_OK);
    assert_int_equal(weft__result_msg_decode(text, len, &r_back, err, sizeof(err)), WEFT_OK);
    assert_true(r_back.is_success);
    assert_non_null(r_back.output);
    assert_string_equal(r_back.output, "");
    assert_int_equal(r_back.started_ns, 1000);
    assert_int_equal(r_back.ended_ns, 1001);
    weft__result_msg_cleanup(&r_back);
    free(text);
}

static void
expect_bad_task(const char *body, const char *needle)
{
    struct weft__task_msg m;
    char err[256] = "";

    assert_int_equal(weft__task_msg_decode(body, strlen(body), &m, err, sizeof(err)), WEFT_EPARSE);
    if (strstr(err, needle) == NULL) {
        fail_msg("\"%s\" lacks \"%s\"", err, needle);
    }
}

static void
test_bad_tasks_refused(void **state)
{
    (void)state;
    expect_bad_task("not json", "invalid JSON");
    expect_bad_task("\xff\xfe", "not UTF-8");
    expect_bad_task("{\"type\": \"other\"}", "field \"type\"");
    expect_bad_task("[1]", "field \"type\"");
    expect_bad_task(
        "{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": \"x\", \"seq\": 1,"
        " \"attempt\": 1, \"step_id\": \"s\", \"kind\": \"noop\", \"agent\": \"a\","
        " \"task\": \"t\"}",
        "field \"task_id\": expected a UUID");
    expect_bad_task("{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": "
                    "\"123e4567-e89b-42d3-a456-426614174000\", \"seq\": 1, \"attempt\": 0,"
                    " \"step_id\": \"s\", \"kind\": \"noop\", \"agent\": \"a\", \"task\": \"t\"}",
                    "field \"attempt\": expected a positive integer");
    expect_bad_task("{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": "
                    "\"123e4567-e89b-42d3-a456-426614174000\", \"seq\": 1, \"attempt\": 1,"
                    " \"step_id\": \"s\", \"kind\": \"shell\", \"agent\": \"a\", \"task\": \"t\"}",
                    "field \"kind\"");
    expect_bad_task("{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": "
                    "\"123e4567-e89b-42d3-a456-426614174000\", \"seq\": 1, \"attempt\": 1,"
                    " \"step_id\": \"s\", \"kind\": \"agent\", \"agent\": \"a\", \"task\": \"t\"}",
                    "field \"workflow\"");
}

static void
test_bad_result_refused(void **state)
{
    struct weft__result_msg m;
    char err[256] = "";
    const char body[] = "{\"type\": \"weft.result.v1\", \"run_id\": \"r\", \"task_id\": "
                        "\"123e4567-e89b-42d3-a456-426614174000\", \"seq\": 1, \"attempt\": 1,"
                        " \"status\": \"maybe\"}";

    (void)state;
    assert_int_equal(weft__result_msg_decode(body, strlen(body), &m, err, sizeof(err)),
                     WEFT_EPARSE);
    assert_non_null(strstr(err, "field \"status\""));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_round_trip),    cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_noop_round_trip),    cmocka_unit_test(test_bad_tasks_refused),
        cmocka_unit_test(test_bad_result_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
