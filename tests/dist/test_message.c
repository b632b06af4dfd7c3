/* tests/dist/test_message.c - task and result messages: a round trip keeps every field, and
 * each kind of bad input is refused with a sentence naming the field. */
#include "base/buf.h"
#include "runtime/dist/message.h"
#include "support/weft_test.h"

#include <math.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

static const char uuid[] = "123e4567-e89b-42d3-a456-426614174000";

/* A noop task of run r1 (seq 1, attempt 1) into @p m; a test sets what it checks on top. */
static void
noop_msg(struct weft__task_msg *m)
{
    memset(m, 0, sizeof(*m));
    m->run_id = "r1";
    memcpy(m->task_id, uuid, sizeof(uuid));
    m->seq = 1;
    m->attempt = 1;
    m->step_id = "s1";
    m->kind = "noop";
    m->agent = "noop";
    m->task = "";
}

/* @p m encoded, then decoded into @p back (weft__task_msg_cleanup it). The text goes to *text
 * when @p text is not NULL (the caller frees it); it is freed otherwise. */
static void
task_round_trip(const struct weft__task_msg *m, struct weft__task_msg *back, char **text)
{
    char *body = NULL;
    size_t len = 0;
    char err[256] = "";

    assert_int_equal(weft__task_msg_encode(m, &body, &len), WEFT_OK);
    assert_int_equal(weft__task_msg_decode(body, len, back, err, sizeof(err)), WEFT_OK);
    if (text != NULL) {
        *text = body;
    } else {
        free(body);
    }
}

static void
test_task_round_trip(void **state)
{
    struct weft__task_msg m, back;

    (void)state;
    noop_msg(&m);
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
    task_round_trip(&m, &back, NULL);
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
    noop_msg(&m);
    task_round_trip(&m, &back, NULL);
    assert_string_equal(back.kind, "noop");
    assert_null(back.workflow);
    assert_null(back.workflow_path);
    weft__task_msg_cleanup(&back);

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

/* A noop task message as text with @p extra (", \"field\": value") before its closing brace. */
static char *
noop_task(const char *extra)
{
    static const char head[] = "{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": "
                               "\"123e4567-e89b-42d3-a456-426614174000\", \"seq\": 1, "
                               "\"attempt\": 1, \"step_id\": \"s\", \"kind\": \"noop\", "
                               "\"agent\": \"a\", \"task\": \"t\"";
    size_t size = sizeof(head) + strlen(extra) + 2;
    char *body = malloc(size);

    assert_non_null(body);
    snprintf(body, size, "%s%s}", head, extra);
    return body;
}

static const struct weft_attr *
find_attr(const struct weft__task_msg *m, const char *key)
{
    for (size_t i = 0; i < m->span_attr_count; i++) {
        if (strcmp(m->span_attrs[i].key, key) == 0) {
            return &m->span_attrs[i];
        }
    }
    return NULL;
}

/* The run's span attributes travel with their types; the root span's id is one of them. */
static void
test_span_attrs_round_trip(void **state)
{
    struct weft__task_msg m, back;
    struct weft_attr attrs[5];
    const struct weft_attr *a = NULL;
    char *text = NULL;

    (void)state;
    noop_msg(&m);
    attrs[0] = weft_attr_str("langfuse.experiment.id", "exp-\xc3\xa9\"1\"");
    attrs[1] = weft_attr_bool("weft.flag", true);
    attrs[2] = weft_attr_int("weft.count", -42);
    attrs[3] = weft_attr_double("weft.ratio", 2.0);
    attrs[4] = weft_attr_str("langfuse.experiment.item.root_observation_id", "00f067aa0ba902b7");
    m.span_attrs = attrs;
    m.span_attr_count = 5;
    task_round_trip(&m, &back, NULL);
    assert_int_equal(back.span_attr_count, 5);
    a = find_attr(&back, "langfuse.experiment.id");
    assert_non_null(a);
    assert_int_equal(a->value.type, WEFT_VALUE_STRING);
    assert_int_equal(a->value.len, strlen("exp-\xc3\xa9\"1\""));
    assert_memory_equal(a->value.u.str, "exp-\xc3\xa9\"1\"", a->value.len);
    a = find_attr(&back, "weft.flag");
    assert_non_null(a);
    assert_int_equal(a->value.type, WEFT_VALUE_BOOL);
    assert_true(a->value.u.b);
    a = find_attr(&back, "weft.count");
    assert_non_null(a);
    assert_int_equal(a->value.type, WEFT_VALUE_INT);
    assert_int_equal(a->value.u.i, -42);
    a = find_attr(&back, "weft.ratio"); /* 2.0 stays a double, not an integer */
    assert_non_null(a);
    assert_int_equal(a->value.type, WEFT_VALUE_DOUBLE);
    assert_true(a->value.u.d == 2.0);
    a = find_attr(&back, "langfuse.experiment.item.root_observation_id");
    assert_non_null(a);
    assert_string_equal(a->value.u.str, "00f067aa0ba902b7");
    weft__task_msg_cleanup(&back);

    /* None given: the field is not sent, and a message without it has none. */
    m.span_attrs = NULL;
    m.span_attr_count = 0;
    task_round_trip(&m, &back, &text);
    assert_null(strstr(text, "span_attrs"));
    assert_null(back.span_attrs);
    assert_int_equal(back.span_attr_count, 0);
    weft__task_msg_cleanup(&back);
    free(text);
}

/* What the decoder would refuse never leaves the encoder: over-long keys and unsendable values
 * are left out, long strings cut at a character boundary, the count and the total bounded. */
static void
test_span_attrs_encoder_bounds(void **state)
{
    struct weft__task_msg m, back;
    struct weft_attr attrs[24];
    char long_key[WEFT__MSG_ATTR_KEY_MAX + 2];
    char keys[24][16];
    char *big = malloc(WEFT__MSG_ATTR_VALUE_MAX + 10);
    static const char *const strs[] = {"x", "y"};
    const struct weft_attr *a = NULL;

    (void)state;
    assert_non_null(big);
    memset(big, 'v', WEFT__MSG_ATTR_VALUE_MAX + 10);
    memcpy(big + WEFT__MSG_ATTR_VALUE_MAX - 1, "\xc3\xa9", 2); /* a character across the cut */
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    noop_msg(&m);
    for (size_t i = 0; i < 24; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
        attrs[i] = weft_attr_strn(keys[i], big, WEFT__MSG_ATTR_VALUE_MAX + 10);
    }
    attrs[1] = weft_attr_str(long_key, "dropped");
    attrs[2].value.type = WEFT_VALUE_STRING_ARRAY;
    attrs[2].value.len = 2;
    attrs[2].value.u.strs = strs;
    attrs[3] = weft_attr_double(keys[3], NAN);
    attrs[4] = weft_attr_int(keys[4], 4);
    attrs[5] = weft_attr_strn(keys[5], "a\0b", 3); /* would come back as \u0000: refused */
    attrs[6] = weft_attr_str(keys[6], "\xff");     /* not UTF-8 */
    m.span_attrs = attrs;
    m.span_attr_count = 24;
    task_round_trip(&m, &back, NULL);
    /* 16 KiB of keys and strings hold three 4 KiB values besides the integer. */
    assert_int_equal(back.span_attr_count, 4);
    assert_null(find_attr(&back, long_key));
    assert_null(find_attr(&back, "k2"));
    assert_null(find_attr(&back, "k3"));
    assert_null(find_attr(&back, "k5"));
    assert_null(find_attr(&back, "k6"));
    a = find_attr(&back, "k4");
    assert_non_null(a);
    assert_int_equal(a->value.u.i, 4);
    a = find_attr(&back, "k0");
    assert_non_null(a);
    assert_int_equal(a->value.len, WEFT__MSG_ATTR_VALUE_MAX - 1); /* é not split */
    assert_non_null(find_attr(&back, "k7"));
    assert_non_null(find_attr(&back, "k8"));
    assert_null(find_attr(&back, "k9"));
    weft__task_msg_cleanup(&back);

    /* Small values: at most WEFT__TASK_SPAN_ATTRS_MAX of them. */
    for (size_t i = 0; i < 24; i++) {
        attrs[i] = weft_attr_int(keys[i], (int64_t)i);
    }
    task_round_trip(&m, &back, NULL);
    assert_int_equal(back.span_attr_count, WEFT__TASK_SPAN_ATTRS_MAX);
    assert_non_null(find_attr(&back, "k16"));
    assert_null(find_attr(&back, "k17"));
    weft__task_msg_cleanup(&back);
    free(big);
}

static void
expect_bad_attrs(const char *extra, const char *needle)
{
    char *body = noop_task(extra);
    expect_bad_task(body, needle);
    free(body);
}

/* Older orchestrators send no span_attrs; older workers ignore fields they do not know (a newer
 * orchestrator's span_attrs among them); anything over a bound or of another type is refused
 * with the field named. */
static void
test_span_attrs_decode(void **state)
{
    struct weft__task_msg m;
    char err[256] = "";
    char *body = NULL;
    struct weft__buf extra;
    char *big = NULL;

    (void)state;
    body = noop_task(", \"a_later_field\": {\"x\": [1]}");
    assert_int_equal(weft__task_msg_decode(body, strlen(body), &m, err, sizeof(err)), WEFT_OK);
    assert_int_equal(m.span_attr_count, 0);
    weft__task_msg_cleanup(&m);
    free(body);
    body = noop_task(", \"span_attrs\": null");
    assert_int_equal(weft__task_msg_decode(body, strlen(body), &m, err, sizeof(err)), WEFT_OK);
    assert_null(m.span_attrs);
    weft__task_msg_cleanup(&m);
    free(body);

    expect_bad_attrs(", \"span_attrs\": [1]", "field \"span_attrs\": expected an object");
    expect_bad_attrs(", \"span_attrs\": {\"a\": [1]}", "field \"span_attrs\": expected values");
    expect_bad_attrs(", \"span_attrs\": {\"a\": {\"b\": 1}}", "field \"span_attrs\"");
    expect_bad_attrs(", \"span_attrs\": {\"a\": 1, \"b\": null}", "(attribute 2 is not)");
    expect_bad_attrs(", \"span_attrs\": {\"\": 1}", "field \"span_attrs\": expected keys");

    weft__buf_init(&extra, 0);
    assert_int_equal(weft__buf_append_str(&extra, ", \"span_attrs\": {"), WEFT_OK);
    for (int i = 0; i < WEFT__TASK_SPAN_ATTRS_MAX + 1; i++) {
        char item[32];
        snprintf(item, sizeof(item), "%s\"k%d\": %d", i > 0 ? ", " : "", i, i);
        assert_int_equal(weft__buf_append_str(&extra, item), WEFT_OK);
    }
    assert_int_equal(weft__buf_append_str(&extra, "}"), WEFT_OK);
    expect_bad_attrs(extra.data, "field \"span_attrs\": expected at most 17");
    weft__buf_cleanup(&extra);

    big = malloc(16u << 10);
    assert_non_null(big);
    memset(big, 'k', WEFT__MSG_ATTR_KEY_MAX + 1);
    big[WEFT__MSG_ATTR_KEY_MAX + 1] = '\0';
    weft__buf_init(&extra, 0);
    assert_int_equal(weft__buf_append_str(&extra, ", \"span_attrs\": {\""), WEFT_OK);
    assert_int_equal(weft__buf_append_str(&extra, big), WEFT_OK);
    assert_int_equal(weft__buf_append_str(&extra, "\": 1}"), WEFT_OK);
    expect_bad_attrs(extra.data, "expected keys of 1 to 256 bytes");
    weft__buf_cleanup(&extra);

    memset(big, 'v', WEFT__MSG_ATTR_VALUE_MAX + 1);
    big[WEFT__MSG_ATTR_VALUE_MAX + 1] = '\0';
    weft__buf_init(&extra, 0);
    assert_int_equal(weft__buf_append_str(&extra, ", \"span_attrs\": {\"a\": \""), WEFT_OK);
    assert_int_equal(weft__buf_append_str(&extra, big), WEFT_OK);
    assert_int_equal(weft__buf_append_str(&extra, "\"}"), WEFT_OK);
    expect_bad_attrs(extra.data, "expected string values of at most 4096 bytes");
    weft__buf_cleanup(&extra);

    /* Five values of 4000 bytes: each within its bound, 20000 in all. */
    big[4000] = '\0';
    weft__buf_init(&extra, 0);
    assert_int_equal(weft__buf_append_str(&extra, ", \"span_attrs\": {"), WEFT_OK);
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%s\"k%d\": \"", i > 0 ? ", " : "", i);
        assert_int_equal(weft__buf_append_str(&extra, key), WEFT_OK);
        assert_int_equal(weft__buf_append_str(&extra, big), WEFT_OK);
        assert_int_equal(weft__buf_append_str(&extra, "\""), WEFT_OK);
    }
    assert_int_equal(weft__buf_append_str(&extra, "}"), WEFT_OK);
    expect_bad_attrs(extra.data,
                     "field \"span_attrs\": expected at most 16384 bytes of keys and string");
    weft__buf_cleanup(&extra);
    free(big);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_round_trip),
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_noop_round_trip),
        cmocka_unit_test(test_bad_tasks_refused),
        cmocka_unit_test(test_bad_result_refused),
        cmocka_unit_test(test_span_attrs_round_trip),
        cmocka_unit_test(test_span_attrs_encoder_bounds),
        cmocka_unit_test(test_span_attrs_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
