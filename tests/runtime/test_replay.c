/* tests/runtime/test_replay.c - replay and fork (docs/replay.md) on real runs: a scripted
 * workflow with LLM calls, a native tool call and a command step, stored in a real SQLite state,
 * traced to an OTLP sink. A replay of it is identical (nothing runs: the command step's
 * side effect is not repeated); a changed instruction, a changed command step or a dropped step
 * is reported as the first differing span; a fork from the failed step reuses the step before
 * it (no LLM call) and runs the fixed rest live; the replay's and the fork's roots link to the
 * original's trace; an unknown run, an unknown step and a run still running are refused. */
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

struct fx {
    char dir[64];
    char state[128];
    struct otlp_sink *sink;
    struct weft_run_options ro;
};

static const char script[] =
    "{\"responses\": {\"researcher\": {\"act\": [{\"tool_calls\": [{\"name\": \"lookup\","
    " \"arguments\": {}}]}, {\"content\": \"facts: 42\"}]},"
    " \"writer\": {\"act\": [{\"content\": \"report done\"}]}}}";

/* The workflow with the build step's command @p build and the researcher's @p instructions;
 * without the report step when @p has_report is false. */
static void
write_workflow(const struct fx *f,
               const char *name,
               const char *build,
               const char *instructions,
               bool has_report)
{
    char path[256];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fprintf(out,
            "{\"name\": \"rp\", \"models\": {\"m\": {\"provider\": \"scripted\","
            " \"script\": \"script.json\"}},"
            " \"tools\": [{\"name\": \"lookup\", \"type\": \"command\","
            " \"argv\": [\"sh\", \"-c\", \"echo 42\"]}],"
            " \"agents\": [{\"name\": \"researcher\", \"instructions\": \"%s\","
            " \"tools\": [\"lookup\"]}, {\"name\": \"writer\"}],"
            " \"plan\": [{\"id\": \"research\", \"agent\": \"researcher\", \"task\": \"Find\"},"
            " {\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build\","
            " \"depends_on\": [\"research\"], \"argv\": [\"sh\", \"-c\", \"%s\"]}%s]}",
            instructions, build,
            has_report ? ", {\"id\": \"report\", \"agent\": \"writer\", \"task\": \"Report\","
                         " \"depends_on\": [\"build\"]}"
                       : "");
    fclose(out);
}

static struct weft_workflow *
load(const struct fx *f, const char *name)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    assert_weft_ok(weft_workflow_load(path, &wf, &d));
    weft_diags_cleanup(&d);
    return wf;
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char path[256];
    FILE *out = NULL;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-replay-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(script, out);
    fclose(out);
    /* The build step leaves a mark: a replay must not run it again. */
    write_workflow(f, "ok.json", "echo built >> marks.txt; echo built", "Find facts.", true);
    write_workflow(f, "broken.json", "exit 3", "Find facts.", true);
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

    otlp_sink_free(f->sink);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Run @p wf with the fixture's options plus the replay or fork fields given. */
static struct weft_run_result *
run(struct fx *f,
    const struct weft_workflow *wf,
    const char *replay,
    const char *fork,
    const char *from,
    weft_err expected,
    char *error,
    size_t error_len)
{
    struct weft_run_options ro = f->ro;
    struct weft_run_result *r = NULL;

    ro.replay_run_id = replay;
    ro.fork_run_id = fork;
    ro.fork_from_step = from;
    assert_int_equal(weft_run(wf, &ro, &r, error, error_len), expected);
    return r;
}

/* The original run of @p name: its id (new). */
static char *
original(struct fx *f, const char *name, weft_run_status status)
{
    struct weft_workflow *wf = load(f, name);
    char error[256] = "";
    struct weft_run_result *r = run(f, wf, NULL, NULL, NULL, WEFT_OK, error, sizeof(error));
    char *id = strdup(r->run_id);

    assert_int_equal(r->status, status);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    return id;
}

static int
count_marks(const struct fx *f)
{
    char path[256];
    char line[64];
    int n = 0;
    FILE *in = NULL;

    snprintf(path, sizeof(path), "%s/marks.txt", f->dir);
    in = fopen(path, "r");
    while (in != NULL && fgets(line, sizeof(line), in) != NULL) {
        n++;
    }
    if (in != NULL) {
        fclose(in);
    }
    return n;
}

/* The root span of the @p nth run traced so far links to the trace of run @p of's root. */
static json_t *
root_linked_to(struct fx *f, size_t nth, const char *of)
{
    struct weft_run_details *d = NULL;
    json_t *root = NULL;
    json_t *link = NULL;

    otlp_sink_collect(f->sink);
    root = otlp_sink_find(f->sink, "invoke_workflow rp", nth);
    assert_non_null(root);
    assert_weft_ok(weft_run_load(f->state, of, &d));
    link = json_array_get(json_object_get(root, "links"), 0);
    assert_non_null(link);
    assert_string_equal(json_string_value(json_object_get(link, "traceId")), d->info.trace_id);
    assert_string_equal(json_string_value(json_object_get(link, "spanId")), d->info.root_span_id);
    weft_run_details_free(d);
    return root;
}

static void
test_replay_of_a_run_is_identical_and_runs_nothing(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "ok.json", WEFT_RUN_COMPLETED);
    struct weft_workflow *wf = load(f, "ok.json");
    struct weft_run_result *r = NULL;
    struct weft_run_details *d = NULL;
    json_t *root = NULL;
    char error[256] = "";

    assert_int_equal(count_marks(f), 1);
    r = run(f, wf, orig, NULL, NULL, WEFT_OK, error, sizeof(error));
    assert_non_null(r->replay);
    assert_true(r->replay->is_identical);
    assert_string_equal(r->replay->original_run_id, orig);
    assert_int_equal(r->replay->llm_calls, 3);
    assert_int_equal(r->replay->llm_expected, 3);
    assert_int_equal(r->replay->tool_calls, 2); /* lookup, and the build step's command */
    assert_int_equal(r->replay->tool_expected, 2);
    assert_null(r->replay->span);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(r->output, "report done");
    assert_int_equal(count_marks(f), 1); /* the command's side effect was not repeated */
    /* A run of its own, stored with its origin, its root linked to the original's trace. */
    assert_string_not_equal(r->run_id, orig);
    assert_weft_ok(weft_run_load(f->state, r->run_id, &d));
    assert_string_equal(d->info.origin_kind, "replay");
    assert_string_equal(d->info.origin_run_id, orig);
    assert_null(d->info.origin_step);
    weft_run_details_free(d);
    root = root_linked_to(f, 1, orig);
    assert_string_equal(otlp_span_attr(root, "weft.replay.of"), orig);
    assert_string_equal(otlp_span_attr(root, "weft.replay.identical"), "true");
    weft_run_result_free(r);
    weft_workflow_free(wf);
    free(orig);
}

static void
test_replay_reports_a_changed_instruction_as_the_first_differing_span(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "ok.json", WEFT_RUN_COMPLETED);
    struct weft_workflow *wf = load(f, "ok.json");
    struct weft_run_result *r = NULL;
    char error[256] = "";

    assert_weft_ok(
        weft_workflow_set(wf, "agent.researcher.instructions", "Find more facts.", NULL, 0));
    r = run(f, wf, orig, NULL, NULL, WEFT_OK, error, sizeof(error));
    assert_false(r->replay->is_identical);
    assert_string_equal(r->replay->span, "chat m");
    assert_string_equal(r->replay->step_id, "research");
    assert_string_equal(r->replay->what, "request");
    assert_non_null(strstr(r->replay->expected, "messages[0]: "));
    assert_non_null(strstr(r->replay->expected, "Find facts."));
    assert_non_null(strstr(r->replay->got, "Find more facts."));
    assert_int_equal(r->replay->llm_calls, 0);
    /* The replay stops at the difference. */
    assert_int_equal(r->status, WEFT_RUN_ABORTED);
    assert_non_null(strstr(r->reason, "replay diverged"));
    weft_run_result_free(r);
    weft_workflow_free(wf);
    free(orig);
}

static void
test_replay_reports_a_changed_command_step(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "ok.json", WEFT_RUN_COMPLETED);
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    char error[256] = "";

    write_workflow(f, "changed.json", "echo other", "Find facts.", true);
    wf = load(f, "changed.json");
    r = run(f, wf, orig, NULL, NULL, WEFT_OK, error, sizeof(error));
    assert_false(r->replay->is_identical);
    assert_string_equal(r->replay->span, "execute_tool command");
    assert_string_equal(r->replay->step_id, "build");
    assert_string_equal(r->replay->what, "request");
    assert_non_null(strstr(r->replay->expected, "marks.txt"));
    assert_non_null(strstr(r->replay->got, "echo other"));
    assert_int_equal(r->replay->llm_calls, 2); /* the research step matched */
    assert_int_equal(r->replay->tool_calls, 1);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    free(orig);
}

static void
test_replay_reports_a_call_the_replay_did_not_make(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "ok.json", WEFT_RUN_COMPLETED);
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    char error[256] = "";

    write_workflow(f, "short.json", "echo built >> marks.txt; echo built", "Find facts.", false);
    wf = load(f, "short.json");
    r = run(f, wf, orig, NULL, NULL, WEFT_OK, error, sizeof(error));
    assert_false(r->replay->is_identical);
    assert_string_equal(r->replay->what, "missing_call");
    assert_string_equal(r->replay->span, "chat m");
    assert_non_null(strstr(r->replay->expected, "Report"));
    assert_null(r->replay->got);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED); /* the run itself went through */
    weft_run_result_free(r);
    weft_workflow_free(wf);
    free(orig);
}

static void
test_fork_reuses_earlier_steps_and_runs_the_fix_live(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "broken.json", WEFT_RUN_FAILED);
    struct weft_workflow *wf = load(f, "ok.json");
    struct weft_run_result *r = NULL;
    struct weft_run_details *d = NULL;
    json_t *root = NULL;
    json_t *reused = NULL;
    char error[256] = "";

    r = run(f, wf, NULL, orig, "build", WEFT_OK, error, sizeof(error));
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(r->reused_steps, 1);
    assert_null(r->replay);
    /* Only the writer asked its model: the research step's two calls were not made again. */
    assert_int_equal(r->llm_calls, 1);
    assert_int_equal(r->tool_calls, 1); /* the fixed build step */
    assert_int_equal(count_marks(f), 1);
    assert_int_equal(r->step_count, 3);
    assert_string_equal(r->steps[0].id, "research");
    assert_string_equal(r->steps[0].status, "completed");
    assert_string_equal(r->steps[0].result, "facts: 42"); /* the original's result */
    assert_string_equal(r->steps[2].result, "report done");
    assert_weft_ok(weft_run_load(f->state, r->run_id, &d));
    assert_string_equal(d->info.origin_kind, "fork");
    assert_string_equal(d->info.origin_run_id, orig);
    assert_string_equal(d->info.origin_step, "build");
    assert_string_equal(d->steps[0].result, "facts: 42");
    weft_run_details_free(d);
    root = root_linked_to(f, 1, orig);
    assert_string_equal(otlp_span_attr(root, "weft.fork.of"), orig);
    assert_string_equal(otlp_span_attr(root, "weft.fork.from"), "build");
    reused = otlp_sink_find(f->sink, "invoke_agent researcher", 1); /* the fork's */
    assert_non_null(reused);
    assert_string_equal(otlp_span_attr(reused, "weft.fork.reused"), "true");
    assert_string_equal(otlp_span_attr(reused, "weft.step.id"), "research");
    assert_int_equal(otlp_sink_count_named(f->sink, "chat m"), 2 + 1);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    free(orig);
}

/* Mark run @p id as running, owned by this live process. */
static void
make_running(const struct fx *f, const char *id)
{
    sqlite3 *db = NULL;
    char sql[512];
    char host[256] = "";

    gethostname(host, sizeof(host) - 1);
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET status = 'running', ended_ns = NULL, owner_pid = %d,"
             " owner_host = '%s', heartbeat_ns = %lld WHERE id = '%s'",
             (int)getpid(), host, (long long)weft_now_ns(), id);
    assert_int_equal(sqlite3_open(f->state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void
test_fork_and_replay_refuse_unknown_runs_steps_and_running_runs(void **state)
{
    struct fx *f = *state;
    char *orig = original(f, "broken.json", WEFT_RUN_FAILED);
    struct weft_workflow *wf = load(f, "ok.json");
    char error[256] = "";

    assert_null(run(f, wf, NULL, "feedfeedfeed", "build", WEFT_ENOTFOUND, error, sizeof(error)));
    assert_null(run(f, wf, "feedfeedfeed", NULL, NULL, WEFT_ENOTFOUND, error, sizeof(error)));
    assert_null(run(f, wf, NULL, orig, "nope", WEFT_EINVAL, error, sizeof(error)));
    assert_non_null(strstr(error, "no step 'nope'"));
    assert_non_null(strstr(error, "research, build, report"));
    assert_null(run(f, wf, NULL, orig, NULL, WEFT_EINVAL, error, sizeof(error)));
    /* Replay and fork together replay a fork; the original is none. */
    assert_null(run(f, wf, orig, orig, "build", WEFT_EINVAL, error, sizeof(error)));
    assert_non_null(strstr(error, "is not a fork of"));
    assert_int_equal(weft_workflow_set(wf, "agent.writer.temperature", "1", error, sizeof(error)),
                     WEFT_EINVAL);
    assert_non_null(strstr(error, "agent.NAME.model"));
    assert_int_equal(weft_workflow_set(wf, "agent.nobody.model", "m", error, sizeof(error)),
                     WEFT_EINVAL);
    assert_int_equal(weft_workflow_set(wf, "agent.writer.model", "nope", error, sizeof(error)),
                     WEFT_EINVAL);
    assert_weft_ok(weft_workflow_set(wf, "agent.writer.model", "m", error, sizeof(error)));
    make_running(f, orig);
    assert_null(run(f, wf, NULL, orig, "build", WEFT_EINVAL, error, sizeof(error)));
    assert_non_null(strstr(error, "still running"));
    assert_null(run(f, wf, orig, NULL, NULL, WEFT_EINVAL, error, sizeof(error)));
    assert_non_null(strstr(error, "still running"));
    weft_workflow_free(wf);
    free(orig);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replay_of_a_run_is_identical_and_runs_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_replay_reports_a_changed_instruction_as_the_first_differing_span, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_reports_a_changed_command_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replay_reports_a_call_the_replay_did_not_make, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fork_reuses_earlier_steps_and_runs_the_fix_live, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_fork_and_replay_refuse_unknown_runs_steps_and_running_runs, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
