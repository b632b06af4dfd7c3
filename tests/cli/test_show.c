/* tests/cli/test_show.c - debugging a failed plan from the terminal, end to end: the built
 * `weft` binary runs real workflows (scripted provider, real child processes) into real state
 * and span databases in a temporary WEFT_HOME, then `weft run show`, `weft runs`,
 * `weft trace list` and `weft trace show` read them back, as text and as JSON documents that
 * the test parses with jansson and checks type by type (docs/cli-json.md). */
#include "support/weft_test.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define EXAMPLE(n) WEFT_SOURCE_DIR "/examples/" n "/workflow.json"
#define MAX_OUTPUT (1u << 20)

struct fixture {
    char dir[64];
    char *out;
    char *err;
};

struct run {
    int status;
    const char *out;
    const char *err;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->out = malloc(MAX_OUTPUT);
    f->err = malloc(MAX_OUTPUT);
    assert_non_null(f->out);
    assert_non_null(f->err);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-show-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_test_setenv("WEFT_HOME", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_rmtree(f->dir);
    free(f->out);
    free(f->err);
    free(f);
    return 0;
}

static void
write_text(const struct fixture *f, const char *name, const char *text)
{
    char path[160];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Run the weft binary with @p args (NULL-terminated) in the fixture's directory. */
static struct run
run_weft(struct fixture *f, const char *const *args)
{
    struct run r = {0};

    r.status =
        weft_test_run_captured(WEFT_BIN, args, f->dir, f->out, MAX_OUTPUT, f->err, MAX_OUTPUT);
    r.out = f->out;
    r.err = f->err;
    return r;
}

#define RUN(f, ...) run_weft((f), (const char *const[]){__VA_ARGS__, NULL})

/* A plan whose first step (a command) fails with multi-line, non-ASCII output on stderr and
 * stdout; "test" depends on it and "ship" on "test"; "notes" is independent and answers
 * multi-line UTF-8 text. */
static void
write_failing_workflow(struct fixture *f)
{
    write_text(f, "script.json",
               "{\"responses\": {\"a\": {\"act\": [{\"content\": "
               "\"R\\u00e9sum\\u00e9 \\u2014 line one\\n  \\u70b9 line two\\nline three\"}]}}}");
    write_text(f, "wf.json",
               "{\"name\": \"failing\", \"models\": {\"m\": {\"provider\": \"scripted\","
               " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
               " \"plan\": ["
               "{\"id\": \"notes\", \"agent\": \"a\", \"task\": \"Write notes\"},"
               "{\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build it\","
               " \"depends_on\": [\"notes\"], \"argv\": [\"sh\", \"-c\","
               " \"echo 'h\\u00e9llo w\\u00f6rld \\u2713'; printf 'l\\u00ednea uno\\nl\\u00ednea "
               "dos \\u2014 \\u00fc\\n' >&2; exit 3\"]},"
               "{\"id\": \"test\", \"agent\": \"a\", \"task\": \"Test it\","
               " \"depends_on\": [\"build\"]},"
               "{\"id\": \"ship\", \"agent\": \"a\", \"task\": \"Ship it\","
               " \"depends_on\": [\"test\"]}]}");
}

static struct run
run_failing(struct fixture *f)
{
    char wf[128];

    write_failing_workflow(f);
    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    return RUN(f, "run", wf, "-q", "--workspace", f->dir);
}

static json_t *
parse(const char *text)
{
    json_error_t error;
    json_t *doc = json_loads(text, 0, &error);

    if (doc == NULL) {
        fprintf(stderr, "not JSON (line %d: %s):\n%s\n", error.line, error.text, text);
    }
    assert_non_null(doc);
    return doc;
}

static json_t *
step_named(json_t *steps, const char *id)
{
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *s = json_array_get(steps, i);

        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0) {
            return s;
        }
    }
    fail_msg("no step %s", id);
    return NULL;
}

static size_t
count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */

static void
test_show_run_show_lists_skipped_steps_and_failure_text(void **state)
{
    struct fixture *f = *state;
    struct run r = run_failing(f);

    assert_int_equal(r.status, 1);
    /* weft runs says why a run did not complete, on its line. */
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "  WHY\n"));
    assert_non_null(strstr(r.out, "0  step build (command) failed: command failed: exit_status\n"));
    r = RUN(f, "run", "show", "last");
    assert_int_equal(r.status, 0);
    /* The table keeps its layout; the never-run steps read skipped, not pending. */
    assert_non_null(strstr(r.out, "STEP             AGENT"));
    assert_non_null(strstr(r.out, "\ntest             a            agent        skipped "));
    assert_null(strstr(r.out, " pending "));
    assert_non_null(strstr(r.out, "\nNot run:\n"));
    assert_non_null(strstr(r.out, "  test             skipped (dependency build failed)\n"));
    assert_non_null(strstr(r.out, "  ship             skipped (dependency test skipped)\n"));
    /* The stored failure: sentence, exit code, both tails, UTF-8 and newlines intact. */
    assert_non_null(strstr(r.out, "\nFailed steps:\n  build (command) failed [exit_status]:\n"
                                  "    command failed: exit_status\n"));
    assert_non_null(strstr(r.out, "    exit_code: 3\n"));
    assert_non_null(strstr(r.out, "    stderr_tail:\n"
                                  "      l\xc3\xadnea uno\n"
                                  "      l\xc3\xadnea dos \xe2\x80\x94 \xc3\xbc\n"));
    assert_non_null(strstr(r.out, "    stdout_tail: h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93\n"));
    /* A multi-line UTF-8 result: every line indented, nothing cut or replaced. */
    assert_non_null(strstr(r.out, "\nResults:\n  notes:\n"
                                  "    R\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 line one\n"
                                  "      \xe7\x82\xb9 line two\n"
                                  "    line three\n"));
    assert_null(strstr(r.out, "?"));
}

/* `weft run why`: the explorer's why document as text, each cause from the same document its
 * --json prints (weft.why/v1, as /api/v1/runs/REF/why serves it). */
static void
test_show_run_why_names_the_causes(void **state)
{
    struct fixture *f = *state;
    struct run r = run_failing(f);
    json_t *doc = NULL;
    char wf[128];

    assert_int_equal(r.status, 1);
    r = RUN(f, "run", "why", "last", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.why/v1");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "last_answer"), "source")),
        "exchange");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "failed_span"), "step_id")),
        "build");
    json_decref(doc);
    r = RUN(f, "run", "why", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "failed: step build (command) failed: command failed: "
                                  "exit_status\n  failing span: execute_tool command ("));
    assert_non_null(strstr(r.out, "\n  path: invoke_workflow failing > execute_tool command\n"));
    assert_non_null(strstr(r.out, "\nFailed steps:\n  build (command) failed [exit_status]:\n"
                                  "    exit status 3\n"));
    assert_non_null(strstr(r.out, "    stderr (last lines):\n"
                                  "      l\xc3\xadnea uno\n"
                                  "      l\xc3\xadnea dos \xe2\x80\x94 \xc3\xbc\n"));
    /* The answer before the failure: the notes step's, from the stored exchange (the run did
     * not capture content), multi-line UTF-8 intact. */
    assert_non_null(strstr(r.out, "\nLast model answer before the failure: chat m ("));
    assert_non_null(strstr(r.out, "), agent a, from the stored exchange\n"
                                  "    R\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 line one\n"
                                  "      \xe7\x82\xb9 line two\n"
                                  "    line three\n"));
    assert_null(strstr(r.out, "Budget ran out"));
    assert_null(strstr(r.out, "Stuck loop"));

    /* A budget: its name, limit and the amount used. */
    write_text(f, "budget_script.json",
               "{\"responses\": {\"a\": {\"act\": [{\"content\": \"one\", \"usage\": "
               "{\"input_tokens\": 40, \"output_tokens\": 30}}, {\"content\": \"two\", \"usage\": "
               "{\"input_tokens\": 40, \"output_tokens\": 30}}]}}}");
    write_text(f, "budget.json",
               "{\"name\": \"budgeted\", \"models\": {\"m\": {\"provider\": \"scripted\","
               " \"script\": \"budget_script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
               " \"supervisor\": {\"max_tokens\": 100}, \"plan\": [{\"id\": \"x\", \"agent\":"
               " \"a\", \"task\": \"X\"}, {\"id\": \"y\", \"agent\": \"a\", \"task\": \"Y\","
               " \"depends_on\": [\"x\"]}, {\"id\": \"z\", \"agent\": \"a\", \"task\": \"Z\","
               " \"depends_on\": [\"y\"]}]}");
    snprintf(wf, sizeof(wf), "%s/budget.json", f->dir);
    r = RUN(f, "run", wf, "-q");
    assert_int_equal(r.status, 1);
    r = RUN(f, "run", "why", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\nBudget ran out: max_tokens: limit 100, used 140 tokens\n"));
    /* Stuck: the loop and its repetitions, oldest first. */
    r = RUN(f, "run", WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json", "-q");
    assert_int_equal(r.status, 3);
    r = RUN(f, "run", "why", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\nStuck loop (handoff, policy break): handoff tester "));
    assert_non_null(strstr(r.out, "\n  repetitions:\n    1. plan supervisor ("));
    assert_non_null(strstr(r.out, "\n    3. plan supervisor ("));
    assert_int_equal(count_of(r.out, "\n    4. "), 0);
    /* No such run: said, exit 1. */
    r = RUN(f, "run", "why", "nosuchrun");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "weft run why: nosuchrun: no such run"));
}

static void
test_show_run_show_json_is_typed(void **state)
{
    struct fixture *f = *state;
    struct run r = run_failing(f);
    json_t *doc = NULL;
    json_t *run = NULL;
    json_t *steps = NULL;
    json_t *build = NULL;
    json_t *test = NULL;
    json_t *error = NULL;

    assert_int_equal(r.status, 1);
    r = RUN(f, "run", "show", "last", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.run/v1");
    run = json_object_get(doc, "run");
    assert_true(json_is_object(run));
    assert_string_equal(json_string_value(json_object_get(run, "status")), "failed");
    assert_true(json_is_integer(json_object_get(run, "started_ns")));
    assert_true(json_is_integer(json_object_get(run, "ended_ns")));
    assert_true(json_is_integer(json_object_get(run, "duration_ns")));
    assert_true(json_is_string(json_object_get(run, "started")));
    assert_true(json_is_real(json_object_get(run, "reward")));
    assert_true(json_is_integer(json_object_get(run, "iterations")));
    assert_true(json_is_null(json_object_get(run, "input")));
    assert_true(json_is_null(json_object_get(run, "resumed_from_trace")));
    assert_true(json_is_integer(json_object_get(json_object_get(run, "loops"), "replan")));
    assert_int_equal(strlen(json_string_value(json_object_get(run, "trace_id"))), 32);
    steps = json_object_get(doc, "steps");
    assert_true(json_is_array(steps));
    assert_int_equal(json_array_size(steps), 4);
    assert_true(json_is_array(json_object_get(doc, "corrections")));
    build = step_named(steps, "build");
    assert_string_equal(json_string_value(json_object_get(build, "status")), "failed");
    assert_true(json_is_integer(json_object_get(build, "attempts")));
    assert_true(json_is_array(json_object_get(build, "depends_on")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(build, "depends_on"), 0)),
                        "notes");
    assert_string_equal(json_string_value(json_object_get(build, "error_type")), "exit_status");
    error = json_object_get(build, "error");
    assert_true(json_is_object(error));
    assert_int_equal(json_integer_value(json_object_get(error, "exit_code")), 3);
    assert_string_equal(json_string_value(json_object_get(error, "stderr_tail")),
                        "l\xc3\xadnea uno\nl\xc3\xadnea dos \xe2\x80\x94 \xc3\xbc\n");
    assert_true(json_is_integer(json_object_get(build, "duration_ns")));
    assert_true(json_is_null(json_object_get(build, "skipped")));
    test = step_named(steps, "test");
    assert_string_equal(json_string_value(json_object_get(test, "status")), "skipped");
    assert_string_equal(json_string_value(json_object_get(test, "stored_status")), "pending");
    assert_true(json_is_null(json_object_get(test, "reward")));
    assert_true(json_is_null(json_object_get(test, "started_ns")));
    assert_true(json_is_null(json_object_get(test, "result")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(test, "skipped"), "dependency")),
        "build");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(step_named(steps, "ship"), "skipped"), "dependency")),
                        "test");
    assert_string_equal(
        json_string_value(json_object_get(step_named(steps, "notes"), "result")),
        "R\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 line one\n  \xe7\x82\xb9 line two\nline three");
    json_decref(doc);

    r = RUN(f, "runs", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.runs/v1");
    assert_true(json_is_array(json_object_get(doc, "runs")));
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 1);
    run = json_array_get(json_object_get(doc, "runs"), 0);
    assert_string_equal(json_string_value(json_object_get(run, "workflow")), "failing");
    assert_int_equal(json_integer_value(json_object_get(run, "step_count")), 4);
    assert_true(json_is_real(json_object_get(run, "cost_usd")));
    json_decref(doc);
}

static void
test_show_runs_json_without_database_is_an_empty_array(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "runs", "--json");
    json_t *doc = parse(r.out);

    assert_int_equal(r.status, 0);
    assert_true(json_is_array(json_object_get(doc, "runs")));
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 0);
    json_decref(doc);
}

static void
test_show_trace_show_takes_a_run_id_and_prints_json(void **state)
{
    struct fixture *f = *state;
    struct run r = run_failing(f);
    json_t *doc = NULL;
    json_t *spans = NULL;
    char run_id[64];
    char trace_id[64];
    char prefix[8];
    bool has_failed_tool = false;

    assert_int_equal(r.status, 1);
    r = RUN(f, "run", "show", "last", "--json");
    doc = parse(r.out);
    snprintf(run_id, sizeof(run_id), "%s",
             json_string_value(json_object_get(json_object_get(doc, "run"), "run_id")));
    snprintf(trace_id, sizeof(trace_id), "%s",
             json_string_value(json_object_get(json_object_get(doc, "run"), "trace_id")));
    json_decref(doc);

    /* A full run id: the run's trace as a tree, said to be the run's. */
    r = RUN(f, "trace", "show", run_id);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "its latest trace"));
    assert_non_null(strstr(r.out, trace_id));
    assert_non_null(strstr(r.out, "ERROR: command failed: exit_status"));
    assert_non_null(strstr(r.out, "weft.run.status=failed"));
    /* run:PREFIX, and a trace id, give the same trace. */
    snprintf(prefix, sizeof(prefix), "run:%.3s", run_id);
    r = RUN(f, "trace", "show", prefix);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, trace_id));
    r = RUN(f, "trace", "show", "run:ffffffffffff");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no run 'ffffffffffff'"));

    r = RUN(f, "trace", "show", run_id, "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.trace/v1");
    assert_string_equal(json_string_value(json_object_get(doc, "trace_id")), trace_id);
    assert_string_equal(json_string_value(json_object_get(doc, "run_id")), run_id);
    assert_true(json_is_array(json_object_get(doc, "other_traces")));
    assert_true(json_is_integer(json_object_get(doc, "span_count")));
    assert_int_equal(json_integer_value(json_object_get(doc, "error_count")), 2);
    spans = json_object_get(doc, "spans");
    assert_true(json_is_array(spans));
    assert_int_equal(json_array_size(spans),
                     json_integer_value(json_object_get(doc, "span_count")));
    assert_true(json_is_null(json_object_get(json_array_get(spans, 0), "parent_span_id")));
    for (size_t i = 0; i < json_array_size(spans); i++) {
        json_t *s = json_array_get(spans, i);
        json_t *attrs = json_object_get(s, "attributes");

        assert_true(json_is_integer(json_object_get(s, "start_ns")));
        assert_true(json_is_integer(json_object_get(s, "duration_ns")));
        assert_true(json_is_integer(json_object_get(s, "depth")));
        assert_true(json_is_string(json_object_get(s, "start")));
        assert_true(json_is_object(attrs));
        assert_true(json_is_array(json_object_get(s, "events")));
        assert_true(json_is_array(json_object_get(s, "links")));
        if (json_object_get(attrs, "weft.tool.exit_code") != NULL) {
            assert_true(json_is_integer(json_object_get(attrs, "weft.tool.exit_code")));
            assert_int_equal(json_integer_value(json_object_get(attrs, "weft.tool.exit_code")), 3);
            assert_string_equal(json_string_value(json_object_get(s, "status")), "error");
            has_failed_tool = true;
        }
    }
    assert_true(has_failed_tool);
    json_decref(doc);

    r = RUN(f, "trace", "list", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.traces/v1");
    assert_true(json_is_array(json_object_get(doc, "traces")));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "traces"), 0), "trace_id")),
                        trace_id);
    assert_true(json_is_integer(
        json_object_get(json_array_get(json_object_get(doc, "traces"), 0), "span_count")));
    assert_true(json_is_boolean(
        json_object_get(json_array_get(json_object_get(doc, "traces"), 0), "has_root")));
    json_decref(doc);
}

static void
test_show_correction_run_tree_has_links_json_has_corrections(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "run", EXAMPLE("correction"), "--workspace", f->dir);
    json_t *doc = NULL;
    json_t *corr = NULL;

    assert_int_equal(r.status, 0);
    /* The end-of-run tree shows the correction's link to the failed step's span. */
    assert_non_null(strstr(r.out, "correct greet"));
    assert_non_null(strstr(r.out, "\xe2\x86\xaa link span "));
    assert_non_null(strstr(r.out, "ERROR: command failed: exit_status"));
    r = RUN(f, "run", "show", "last", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    corr = json_array_get(json_object_get(doc, "corrections"), 0);
    assert_true(json_is_integer(json_object_get(corr, "seq")));
    assert_true(json_is_array(json_object_get(corr, "inserted")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(corr, "inserted"), 0)),
                        "greet.c1.1");
    assert_true(json_is_array(json_object_get(corr, "depends_after")));
    assert_true(json_is_integer(json_object_get(corr, "created_ns")));
    assert_int_equal(count_of(r.out, "\"status\": \"completed\""), 4); /* the run and 3 steps */
    json_decref(doc);
}

/* A value from an SQLite database, or "" (the caller frees). */
static char *
sql_value(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *out = NULL;

    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
        out = strdup((const char *)sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out != NULL ? out : strdup("");
}

/* A run killed (SIGKILL) while its second step waits on a slow answer, then resumed: the run
 * has two traces, and `weft trace show RUN` shows the latest and names the earlier one. */
static void
test_show_trace_show_of_a_resumed_run_names_the_earlier_trace(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char state_db[128];
    char *run_id = NULL;
    char *old_trace = NULL;
    char *new_trace = NULL;
    pid_t pid = 0;
    int status = 0;
    json_t *doc = NULL;
    struct run r;

    write_text(f, "script.json",
               "{\"responses\": {\"a\": {\"act\": [{\"content\": \"first done\"},"
               " {\"content\": \"second done\", \"delay_ms\": 3000},"
               " {\"content\": \"third done\"}]}}}");
    write_text(f, "slow.json",
               "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\","
               " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
               " \"plan\": [{\"id\": \"one\", \"agent\": \"a\", \"task\": \"first\"},"
               " {\"id\": \"two\", \"agent\": \"a\", \"task\": \"second\","
               " \"depends_on\": [\"one\"]}]}");
    snprintf(wf, sizeof(wf), "%s/slow.json", f->dir);
    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    {
        const char *argv[] = {WEFT_BIN, "run", wf, "-q", "--workspace", f->dir, NULL};
        bool is_running = false;

        assert_int_equal(posix_spawn(&pid, WEFT_BIN, NULL, NULL, (char *const *)argv, environ), 0);
        /* Poll the state database (no fixed sleep) until step two is in progress. */
        for (int i = 0; i < 1000 && !is_running; i++) {
            char *st = sql_value(state_db, "SELECT status FROM steps WHERE step_id = 'two'");
            struct timespec ts = {0, 5000000};

            is_running = strcmp(st, "in_progress") == 0;
            free(st);
            if (!is_running) {
                nanosleep(&ts, NULL);
            }
        }
        assert_true(is_running);
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
    }
    run_id = sql_value(state_db, "SELECT id FROM runs");
    old_trace = sql_value(state_db, "SELECT trace_id FROM runs");
    assert_int_equal(strlen(old_trace), 32);
    r = RUN(f, "resume", run_id, "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    new_trace = sql_value(state_db, "SELECT trace_id FROM runs");
    assert_int_equal(strlen(new_trace), 32);
    assert_string_not_equal(new_trace, old_trace);

    r = RUN(f, "trace", "show", run_id);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, new_trace));
    assert_non_null(strstr(r.out, "the run was resumed: its earlier trace is"));
    assert_non_null(strstr(r.out, old_trace));
    /* The new root's link to the old trace is drawn. */
    assert_non_null(strstr(r.out, "link trace "));
    r = RUN(f, "trace", "show", run_id, "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "trace_id")), new_trace);
    assert_true(json_is_array(json_object_get(doc, "other_traces")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "other_traces"), 0)),
                        old_trace);
    json_decref(doc);
    r = RUN(f, "run", "show", run_id, "--json");
    doc = parse(r.out);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "run"), "resumed_from_trace")),
        old_trace);
    json_decref(doc);
    free(run_id);
    free(old_trace);
    free(new_trace);
}

/* A plan of 45 command steps whose step s35 fails: `weft run` summarises the steps line and
 * the tree (the failure stays visible), and `weft run show` says which steps never ran. */
static void
test_show_large_plan_is_summarised_failure_kept(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    struct run r;

    assert_non_null(fp);
    fputs("{\"name\": \"long\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\":"
          " \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [",
          fp);
    for (int i = 0; i < 45; i++) {
        fprintf(fp,
                "%s{\"id\": \"s%d\", \"executor\": \"command\", \"task\": \"t%d\", \"argv\":"
                " [\"sh\", \"-c\", \"%s\"]}",
                i > 0 ? "," : "", i, i, i == 35 ? "echo broken >&2; exit 4" : "true");
    }
    fputs("]}", fp);
    fclose(fp);
    write_text(f, "long.json", text);
    free(text);
    write_text(f, "script.json", "{\"responses\": {}}");
    snprintf(wf, sizeof(wf), "%s/long.json", f->dir);
    r = RUN(f, "run", wf, "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, " s9:command(completed) s35:command(failed) ... 34 more "
                                  "(25 completed, 9 pending; weft run show "));
    assert_null(strstr(r.out, "s20:command"));
    /* The tree: the failed step and the root's error stay, the rest is counted. */
    assert_non_null(strstr(r.out, "ERROR: command failed: exit_status"));
    assert_non_null(strstr(r.out, "weft.step.id=s35"));
    assert_non_null(strstr(r.out, "more `execute_tool command` spans ("));
    assert_non_null(strstr(r.out, "more `plan supervisor` spans ("));
    assert_true(count_of(r.out, "\n") < 70);
    r = RUN(f, "run", "show", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "  s35 (command) failed [exit_status]:\n"));
    assert_non_null(strstr(r.out, "    stderr_tail: broken\n"));
    assert_non_null(strstr(r.out, "    stdout_tail: (empty)\n"));
    assert_non_null(strstr(r.out, "  s36              not run (the run ended failed first)\n"));
    assert_non_null(strstr(r.out, "  s44              not run (the run ended failed first)\n"));
    assert_null(strstr(r.out, "  s34              not run"));
}

/* Stored text that is not valid UTF-8 (here the run's input) still gives valid JSON: the
 * invalid bytes become U+FFFD, the rest is kept. */
static void
test_show_json_repairs_invalid_utf8(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    struct run r;
    json_t *doc = NULL;
    json_t *run = NULL;

    write_failing_workflow(f);
    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    r = RUN(f, "run", wf, "-q", "--workspace", f->dir, "--input", "bad \xff byte \xc3\xa9 end");
    assert_int_equal(r.status, 1);
    r = RUN(f, "runs", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    run = json_array_get(json_object_get(doc, "runs"), 0);
    assert_string_equal(json_string_value(json_object_get(run, "input")),
                        "bad \xef\xbf\xbd byte \xc3\xa9 end");
    json_decref(doc);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_show_run_show_lists_skipped_steps_and_failure_text,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_run_show_json_is_typed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_run_why_names_the_causes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_runs_json_without_database_is_an_empty_array,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_trace_show_takes_a_run_id_and_prints_json, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_show_correction_run_tree_has_links_json_has_corrections, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_show_trace_show_of_a_resumed_run_names_the_earlier_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_large_plan_is_summarised_failure_kept, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_show_json_repairs_invalid_utf8, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
