/* tests/runtime/test_llm_record.c - the `--record` recorder and the script checker: a path
 * that cannot be written fails when the recording starts (one error naming the path and the
 * system's reason), recordings are 0600 and replay as scripts, and weft__llm_script_check reports
 * what `weft validate` prints (line and column of a syntax error, the field and what was
 * expected otherwise). */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include "runtime/llm/llm.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fx {
    char dir[64];
    char path[160];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-record-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void
test_record_unwritable_path_fails_at_start_naming_path_and_reason(void **state)
{
    struct fx *f = *state;
    struct llm_recording *rec = NULL;
    char error[300] = "";
    char want[240];

    snprintf(f->path, sizeof(f->path), "%s/missing/rec.json", f->dir);
    weft_test_capture_logs();
    assert_weft_err(weft__llm_recording_new(f->path, &rec, error, sizeof(error)), WEFT_EINVAL);
    assert_null(rec);
    snprintf(want, sizeof(want), "--record %s: cannot write: No such file or directory", f->path);
    assert_string_equal(error, want);
    /* The caller reports it: the library does not log it a second time. */
    assert_null(strstr(weft_test_logs(), "cannot write"));
}

static void
test_record_file_is_0600_and_replays_as_a_script(void **state)
{
    struct fx *f = *state;
    struct llm_recording *rec = NULL;
    struct llm_request req;
    struct llm_response resp;
    struct llm_error lerr;
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hello");
    json_t *script = NULL;
    struct stat st;
    char error[300] = "";

    snprintf(f->path, sizeof(f->path), "%s/rec.json", f->dir);
    write_text(f->path, "an older file, world-readable");
    assert_int_equal(chmod(f->path, 0644), 0);
    assert_weft_ok(weft__llm_recording_new(f->path, &rec, error, sizeof(error)));
    /* Written at once, private. */
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_weft_ok(weft__llm_script_load(f->path, &script, &lerr));
    json_decref(script);

    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    req.agent = "coder";
    req.purpose = LLM_PURPOSE_ACT;
    req.model = "m";
    req.messages = messages;
    resp.content = "done";
    resp.input_tokens = 3;
    resp.output_tokens = 1;
    assert_weft_ok(weft__llm_recording_add(rec, &req, "weft.scripted", &resp, NULL));
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_weft_ok(weft__llm_script_load(f->path, &script, &lerr));
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(
                json_object_get(json_object_get(json_object_get(script, "responses"), "coder"),
                                "act"),
                0),
            "content")),
        "done");
    json_decref(script);
    weft__llm_recording_free(rec);
    json_decref(messages);
}

static void
test_script_check_reports_line_column_field_and_expected(void **state)
{
    struct fx *f = *state;
    struct llm_script_problem p;

    snprintf(f->path, sizeof(f->path), "%s/script.json", f->dir);
    write_text(f->path, "{\"responses\": {\"a\": {\"act\": [\n  {\"content\": \"x\",}\n]}}}");
    assert_weft_err(weft__llm_script_check(f->path, &p, NULL), WEFT_EPARSE);
    assert_int_equal(p.line, 2);
    assert_int_equal(p.column, 19);
    assert_string_equal(p.field, "");
    assert_non_null(strstr(p.message, "invalid JSON: "));

    write_text(f->path, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\"},"
                        " {\"tool_calls\": \"x\"}]}}}");
    assert_weft_err(weft__llm_script_check(f->path, &p, NULL), WEFT_EPARSE);
    assert_int_equal(p.line, 0);
    assert_string_equal(p.field, "responses.a.act[1].tool_calls");
    assert_string_equal(p.message, "expected array");

    write_text(f->path, "{\"responses\": {\"a\": {\"think\": []}}}");
    assert_weft_err(weft__llm_script_check(f->path, &p, NULL), WEFT_EPARSE);
    assert_string_equal(p.field, "responses.a.think");
    assert_non_null(strstr(p.message, "unknown purpose"));

    write_text(f->path, "[1, 2]");
    assert_weft_err(weft__llm_script_check(f->path, &p, NULL), WEFT_EPARSE);
    assert_string_equal(p.field, "");
    assert_non_null(strstr(p.message, "expected {\"version\": 1"));

    write_text(f->path, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\"}]}}}");
    assert_weft_ok(weft__llm_script_check(f->path, &p, NULL));

    snprintf(f->path, sizeof(f->path), "%s/none.json", f->dir);
    assert_weft_err(weft__llm_script_check(f->path, &p, NULL), WEFT_ENOTFOUND);
    assert_non_null(strstr(p.message, "No such file or directory"));
}

static void
test_record_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    bool is_done = false;

    snprintf(f->path, sizeof(f->path), "%s/oom.json", f->dir);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 1000; budget++) {
        struct llm_recording *rec = NULL;
        struct llm_request req;
        struct llm_response resp;
        char error[300] = "";
        weft_err err = WEFT_OK;

        memset(&req, 0, sizeof(req));
        memset(&resp, 0, sizeof(resp));
        req.agent = "coder";
        req.purpose = LLM_PURPOSE_ACT;
        req.messages = messages;
        resp.content = "ok";
        resp.input_tokens = -1;
        resp.output_tokens = -1;
        failalloc_budget = budget;
        err = weft__llm_recording_new(f->path, &rec, error, sizeof(error));
        if (err != WEFT_OK) {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(rec);
            continue;
        }
        err = weft__llm_recording_add(rec, &req, "weft.scripted", &resp, NULL);
        if (err == WEFT_OK) {
            is_done = true;
        } else {
            assert_int_equal(err, WEFT_ENOMEM);
        }
        weft__llm_recording_free(rec);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    json_decref(messages);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_record_unwritable_path_fails_at_start_naming_path_and_reason),
        T(test_record_file_is_0600_and_replays_as_a_script),
        T(test_script_check_reports_line_column_field_and_expected),
        T(test_record_out_of_memory_fails_cleanly),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
