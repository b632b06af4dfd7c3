/* tests/runtime/test_correct.c - executor steps, the evaluator's reward table and correction
 * mode: the adaptive-correction example (a missing helper is written by a corrective step and the
 * retry earns 1.5), a correction that fails until max_corrections ends the run, invalid
 * corrective plans counted as attempts, and DAG surgery that the store refuses midway (a
 * trigger aborts the last statement) leaving the store and the run consistent. Spans reach a
 * real OTLP receiver. */
#include "runtime/decide/evaluate.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[128];
    char state[200];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-correct-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
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
load(struct fx *f, const char *path)
{
    struct weft_diags d = {0};
    char line[512];

    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        for (size_t i = 0; i < d.count; i++) {
            print_message("%s\n", weft_diag_format(&d.items[i], line, sizeof(line)));
        }
        fail_msg("cannot load %s", path);
    }
    weft_diags_cleanup(&d);
}

static void
load_inline(struct fx *f, const char *workflow, const char *script)
{
    char path[300];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(script, fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(workflow, fp);
    fclose(fp);
    load(f, path);
}

static void
run(struct fx *f)
{
    char error[256] = "";
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
}

static const struct weft_run_step *
step(const struct weft_run_result *r, const char *id)
{
    for (size_t i = 0; i < r->step_count; i++) {
        if (strcmp(r->steps[i].id, id) == 0) {
            return &r->steps[i];
        }
    }
    fail_msg("no step %s", id);
    return NULL;
}

/* One value from the state database. */
static char *
query(struct fx *f, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *out = NULL;

    assert_int_equal(sqlite3_open(f->state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
        out = strdup((const char *)sqlite3_column_text(stmt, 0));
    } else {
        out = strdup("(none)");
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
}

static void
assert_query(struct fx *f, const char *sql, const char *expected)
{
    char *got = query(f, sql);
    assert_string_equal(got, expected);
    free(got);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_correct_reward_table(void **state)
{
    (void)state;
    assert_true(weft__rt_reward(RT_EVAL_SUCCESS, 0) == 1.0);
    assert_true(weft__rt_reward(RT_EVAL_SUCCESS, 2) == 1.5);
    assert_true(weft__rt_reward(RT_EVAL_INVALID_OUTPUT, 0) == -0.5);
    assert_true(weft__rt_reward(RT_EVAL_INVALID_OUTPUT, 3) == -0.5);
    assert_true(weft__rt_reward(RT_EVAL_FAILURE, 0) == -1.0);
    assert_true(weft__rt_reward(RT_EVAL_FAILURE, 3) > -1.31 &&
                weft__rt_reward(RT_EVAL_FAILURE, 3) < -1.29);
    assert_string_equal(weft__rt_eval_name(RT_EVAL_INVALID_OUTPUT), "invalid_output");
}

static void
test_correct_example_writes_the_missing_helper_and_retries(void **state)
{
    struct fx *f = *state;
    json_t *correct = NULL;
    json_t *fix = NULL;
    json_t *retry = NULL;
    char path[300];

    snprintf(path, sizeof(path), "%s/examples/correction/workflow.json", WEFT_SOURCE_DIR);
    load(f, path);
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->corrections, 1);
    assert_int_equal(f->r->loops[WEFT_LOOP_CORRECTION], 1);
    /* The retried step succeeded after a retry: 1.5; the fix and the report 1.0 each. */
    assert_true(step(f->r, "greet")->reward == 1.5);
    assert_int_equal(step(f->r, "greet")->attempts, 2);
    assert_string_equal(step(f->r, "greet")->depends_on, "greet.c1.1");
    assert_string_equal(step(f->r, "greet.c1.1")->parent, "greet");
    assert_string_equal(step(f->r, "greet.c1.1")->executor, "file_writer");
    /* The run's reward counts the failed attempt too: -1.0 + 1.5 + 1.0 + 1.0. */
    assert_true(f->r->reward == 2.5);
    /* Spans: the failed attempt, the correction with before/after, the linked fix, the retry. */
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool command"), 2);
    correct = otlp_sink_find(f->sink, "correct greet", 0);
    assert_non_null(correct);
    assert_string_equal(otlp_span_attr(correct, "weft.correction.error_type"), "exit_status");
    assert_string_equal(otlp_span_attr(correct, "weft.correction.inserted"), "1");
    assert_string_equal(otlp_span_attr(correct, "weft.correction.rewired"), "true");
    {
        /* OTLP arrays arrive as {"values": [{"stringValue": ...}]}. */
        json_t *after = json_object_get(
            json_object_get(json_object_get(correct, "attrs"), "weft.correction.depends_after"),
            "values");
        json_t *before = json_object_get(
            json_object_get(json_object_get(correct, "attrs"), "weft.correction.depends_before"),
            "values");
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(after, 0), "stringValue")),
            "greet.c1.1");
        assert_int_equal(json_array_size(after), 1);
        assert_int_equal(json_array_size(before), 0);
    }
    fix = otlp_sink_find(f->sink, "execute_tool file_writer", 0);
    retry = otlp_sink_find(f->sink, "execute_tool command", 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(fix, "links"), 0), "spanId")),
                        json_string_value(json_object_get(
                            otlp_sink_find(f->sink, "execute_tool command", 0), "spanId")));
    assert_string_equal(otlp_span_attr(retry, "weft.step.reward"), "1.5");
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "invoke_workflow adaptive-correction", 0),
                       "weft.run.reward"),
        "2.5");
    /* The store: the surgery history and the rewired plan. */
    assert_query(
        f, "SELECT inserted || ' ' || depends_before || ' ' || depends_after FROM corrections",
        "[\"greet.c1.1\"] [] [\"greet.c1.1\"]");
    assert_query(f, "SELECT depends_on FROM steps WHERE step_id = 'greet'", "[\"greet.c1.1\"]");
    assert_query(f, "SELECT reward FROM runs", "2.5");
}

#define FAILING_WORKFLOW                                                                          \
    "{\"name\": \"stubborn\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "      \
    "\"script.json\"}}, \"supervisor\": {\"correction\": {\"max_corrections\": 2}},"              \
    " \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"check\", \"executor\": \"command\"," \
    " \"argv\": [\"sh\", \"-c\", \"test -f ready.flag\"]},"                                       \
    " {\"id\": \"after\", \"agent\": \"a\", \"task\": \"t\", \"depends_on\": [\"check\"]}]}"

static void
test_correct_failing_correction_ends_at_max_corrections(void **state)
{
    struct fx *f = *state;

    /* First plan writes the wrong file; the second is invalid (no retry step). */
    load_inline(f, FAILING_WORKFLOW,
                "{\"responses\": {\"supervisor\": {\"correct\": ["
                "{\"content\": {\"steps\": [{\"description\": \"flag\", \"executor\": "
                "\"file_writer\", \"path\": \"wrong.flag\", \"content\": \"x\", \"rationale\": "
                "\"r\"}, {\"executor\": \"retry\", \"step\": \"check\"}]}},"
                "{\"content\": {\"steps\": [{\"description\": \"flag\", \"executor\": "
                "\"file_writer\", \"path\": \"ready.flag\", \"content\": \"x\", \"rationale\": "
                "\"r\"}]}}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(f->r->corrections, 2);
    assert_non_null(strstr(f->r->reason, "max_corrections (2) reached"));
    assert_string_equal(step(f->r, "check")->status, "failed");
    assert_string_equal(step(f->r, "after")->status, "skipped");
    assert_int_equal(step(f->r, "check")->attempts, 2);
    /* Failure after one retry: -1.0 - 0.1. */
    assert_true(step(f->r, "check")->reward < -1.09 && step(f->r, "check")->reward > -1.11);
    assert_int_equal(otlp_sink_count_named(f->sink, "correct check"), 2);
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "correct check", 1), "error.type"),
                        "invalid_correction");
    assert_query(f, "SELECT count(*) FROM corrections", "1");
    assert_query(f, "SELECT status FROM runs", "failed");
}

/* A plan of nothing but the retry step is refused as invalid (it once read the step after the
 * plan's end and crashed the run), and the failed step keeps its dependencies. */
static void
test_correct_retry_only_plan_is_invalid(void **state)
{
    struct fx *f = *state;

    load_inline(f, FAILING_WORKFLOW,
                "{\"responses\": {\"supervisor\": {\"correct\": ["
                "{\"content\": {\"steps\": [{\"executor\": \"retry\", \"step\": \"check\"}]}},"
                "{\"content\": {\"steps\": [{\"executor\": \"retry\", \"step\": \"check\"}]}}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(step(f->r, "check")->status, "failed");
    assert_int_equal(f->r->step_count, 2);
    assert_non_null(
        strstr(otlp_span_attr(otlp_sink_find(f->sink, "correct check", 0), "error.type"),
               "invalid_correction"));
    assert_query(f, "SELECT count(*) FROM corrections", "0");
}

static void
test_correct_surgery_refused_by_the_store_rolls_back(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = NULL;
    struct weft_run_result *first = NULL;

    load_inline(f, FAILING_WORKFLOW,
                "{\"responses\": {\"supervisor\": {\"correct\": ["
                "{\"content\": {\"steps\": [{\"description\": \"flag\", \"executor\": "
                "\"file_writer\", \"path\": \"ready.flag\", \"content\": \"x\", \"rationale\": "
                "\"r\"}, {\"executor\": \"retry\", \"step\": \"check\"}]}},"
                "{\"content\": {\"steps\": [{\"description\": \"flag\", \"executor\": "
                "\"file_writer\", \"path\": \"ready.flag\", \"content\": \"x\", \"rationale\": "
                "\"r\"}, {\"executor\": \"retry\", \"step\": \"check\"}]}}]}}}");
    /* Create the schema with a first run's store, then make the store refuse the last
     * statement of every surgery. */
    f->ro.state_path = f->state;
    {
        struct weft_run_options ro = f->ro;
        char error[128];
        ro.provider = NULL;
        ro.replay_path = NULL;
        assert_weft_ok(weft_run(f->wf, &ro, &first, error, sizeof(error)));
        weft_run_result_free(first);
    }
    assert_int_equal(sqlite3_open(f->state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DELETE FROM corrections; DELETE FROM steps;"
                                  "CREATE TRIGGER refuse BEFORE INSERT ON corrections BEGIN"
                                  " SELECT RAISE(ABORT, 'refused'); END;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    {
        char flag[300];
        snprintf(flag, sizeof(flag), "%s/ready.flag", f->dir);
        unlink(flag);
    }
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    /* Nothing of either surgery reached the store: no corrective step, the failed step's
     * dependencies untouched, and memory agrees (no corrective step in the result). */
    assert_query(f, "SELECT count(*) FROM steps WHERE parent IS NOT NULL", "0");
    assert_query(f, "SELECT count(*) FROM corrections", "0");
    assert_query(f, "SELECT depends_on FROM steps WHERE step_id = 'check' ORDER BY rowid DESC",
                 "[]");
    assert_int_equal(f->r->step_count, 2);
    assert_non_null(
        strstr(otlp_span_attr(otlp_sink_find(f->sink, "correct check", 0), "error.type"),
               "invalid_correction"));
}

static void
test_correct_executor_validation_and_invalid_output(void **state)
{
    struct fx *f = *state;

    load_inline(f,
                "{\"name\": \"ex\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
                "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
                "{\"id\": \"echo\", \"executor\": \"command\", \"argv\": [\"echo\", \"version 2\"],"
                " \"expect_output\": \"^version 3\"},"
                "{\"id\": \"json\", \"agent\": \"a\", \"task\": \"t\", \"output_schema\": "
                "{\"type\": \"object\", \"required\": [\"ok\"]}}]}",
                "{\"responses\": {\"a\": {\"act\": [{\"content\": \"not json\"}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_true(step(f->r, "echo")->reward == -0.5);
    assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "execute_tool command", 0),
                                       "weft.evaluation.result"),
                        "invalid_output");
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_correct_reward_table),
        T(test_correct_example_writes_the_missing_helper_and_retries),
        T(test_correct_failing_correction_ends_at_max_corrections),
        T(test_correct_retry_only_plan_is_invalid),
        T(test_correct_surgery_refused_by_the_store_rolls_back),
        T(test_correct_executor_validation_and_invalid_output),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
