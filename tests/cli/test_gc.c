/* tests/cli/test_gc.c - retention from the terminal (cli/gc_cmd.c, cli/runs_cmd.c): the built
 * `weft` binary runs examples/code_review twice into a temporary WEFT_HOME, one run is aged
 * by rewriting its end in the state database, and then `weft gc --older-than AGE` (text,
 * --json, --dry-run) deletes it with its workspace folder, `weft runs pin|unpin` keeps it or
 * lets it go, and the age parser takes 14d, 12h, 30m, 90s and refuses everything else with
 * exit status 2. */
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define EXAMPLE    WEFT_SOURCE_DIR "/examples/code_review/workflow.json"
#define MAX_OUTPUT (1u << 20)
#define DAY_NS     "86400000000000"

struct fixture {
    char dir[64];
    char state[128];
    char *out;
    char *err;
    char old_id[64]; /* the run aged by 30 days */
    char new_id[64];
};

struct run {
    int status;
    const char *out;
    const char *err;
};

/* Run the weft binary with @p args (NULL-terminated). */
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

static void
sql_exec(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;

    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("%s: %s", sql, msg);
    }
    sqlite3_close(db);
}

/* The first column of the first row as text into @p out ("" for none). */
static const char *
sql_text(const char *db_path, const char *sql, char *out, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    out[0] = '\0';
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
        snprintf(out, len, "%s", (const char *)sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
}

static long long
sql_count(const char *db_path, const char *sql)
{
    char text[32];

    return strtoll(sql_text(db_path, sql, text, sizeof(text)), NULL, 10);
}

static bool
has_workspace(const struct fixture *f, const char *id)
{
    char path[256];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/workspaces/%s", f->dir, id);
    return lstat(path, &sb) == 0;
}

/* Two runs of the example; the older one ends 30 days ago. */
static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char sql[256];
    struct run r;

    assert_non_null(f);
    f->out = malloc(MAX_OUTPUT);
    f->err = malloc(MAX_OUTPUT);
    assert_non_null(f->out);
    assert_non_null(f->err);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-gc-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_test_setenv("WEFT_HOME", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    r = RUN(f, "run", EXAMPLE, "-q", "--no-trace");
    assert_int_equal(r.status, 0);
    sql_text(f->state, "SELECT id FROM runs", f->old_id, sizeof(f->old_id));
    r = RUN(f, "run", EXAMPLE, "-q", "--no-trace");
    assert_int_equal(r.status, 0);
    snprintf(sql, sizeof(sql), "SELECT id FROM runs WHERE id <> '%s'", f->old_id);
    sql_text(f->state, sql, f->new_id, sizeof(f->new_id));
    assert_int_equal(strlen(f->old_id), 12);
    assert_int_equal(strlen(f->new_id), 12);
    snprintf(sql, sizeof(sql),
             "UPDATE runs SET started_ns = started_ns - 30 * " DAY_NS
             ", ended_ns = ended_ns - 30 * " DAY_NS " WHERE id = '%s'",
             f->old_id);
    sql_exec(f->state, sql);
    assert_true(has_workspace(f, f->old_id));
    assert_true(has_workspace(f, f->new_id));
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

static json_int_t
runs_member(json_t *doc, const char *name)
{
    json_t *v = json_object_get(json_object_get(json_object_get(doc, "stores"), "runs"), name);

    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static long long
rows_of(const struct fixture *f, const char *table, const char *id)
{
    char sql[256];

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE run_id = '%s'", table, id);
    return sql_count(f->state, sql);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_gc_json_dry_run_then_delete_report_the_same(void **state)
{
    struct fixture *f = *state;
    json_t *dry = NULL;
    json_t *real = NULL;
    struct run r;
    static const char *const members[] = {"runs_deleted",       "rows_deleted",
                                          "workspaces_removed", "workspace_bytes",
                                          "runs_kept_pinned",   "runs_kept_running"};

    assert_true(rows_of(f, "steps", f->old_id) > 0);
    assert_true(rows_of(f, "llm_exchanges", f->old_id) > 0);
    r = RUN(f, "gc", "--older-than", "14d", "--dry-run", "--json");
    assert_int_equal(r.status, 0);
    dry = parse(r.out);
    assert_string_equal(json_string_value(json_object_get(dry, "schema")), "weft.gc/v1");
    assert_true(json_is_true(json_object_get(dry, "dry_run")));
    assert_string_equal(json_string_value(json_object_get(dry, "older_than")), "14d");
    assert_true(json_is_integer(json_object_get(dry, "cutoff_ns")));
    assert_true(json_is_string(json_object_get(dry, "cutoff")));
    assert_true(json_is_true(
        json_object_get(json_object_get(json_object_get(dry, "stores"), "runs"), "ok")));
    assert_int_equal(runs_member(dry, "runs_deleted"), 1);
    assert_true(runs_member(dry, "rows_deleted") > rows_of(f, "steps", f->old_id));
    assert_int_equal(runs_member(dry, "workspaces_removed"), 1);
    assert_int_equal(runs_member(dry, "runs_kept_pinned"), 0);
    /* Nothing changed. */
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs"), 2);
    assert_true(rows_of(f, "steps", f->old_id) > 0);
    assert_true(has_workspace(f, f->old_id));

    r = RUN(f, "gc", "--older-than", "14d", "--json");
    assert_int_equal(r.status, 0);
    real = parse(r.out);
    assert_true(json_is_false(json_object_get(real, "dry_run")));
    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
        assert_int_equal(runs_member(real, members[i]), runs_member(dry, members[i]));
    }
    /* The old run is gone from every table and its folder with it; the new one is whole. */
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs"), 1);
    assert_int_equal(rows_of(f, "steps", f->old_id), 0);
    assert_int_equal(rows_of(f, "llm_exchanges", f->old_id), 0);
    assert_int_equal(rows_of(f, "messages", f->old_id), 0);
    assert_int_equal(rows_of(f, "tool_results", f->old_id), 0);
    assert_true(rows_of(f, "steps", f->new_id) > 0);
    assert_true(rows_of(f, "llm_exchanges", f->new_id) > 0);
    assert_false(has_workspace(f, f->old_id));
    assert_true(has_workspace(f, f->new_id));
    json_decref(dry);
    json_decref(real);
}

static void
test_gc_text_says_what_it_deleted(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "gc", "--older-than", "14d");

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "deleting what ended before "));
    assert_non_null(strstr(r.out, "runs: deleted 1 run ("));
    assert_non_null(strstr(r.out, " and 1 workspace folder ("));
    assert_non_null(strstr(r.out, "; kept 0 pinned, 0 running\n"));
    r = RUN(f, "gc", "--older-than", "14d", "--dry-run");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "dry run: nothing is deleted"));
    assert_non_null(strstr(r.out, "runs: would delete 0 runs (0 rows)"));
    /* No database: nothing to do, and none is made. */
    r = RUN(f, "gc", "--older-than", "1d", "--state", "/nonexistent-weft-dir/state.db");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "runs: no state database yet"));
}

static void
test_gc_pinned_run_is_kept_until_unpinned(void **state)
{
    struct fixture *f = *state;
    char prefix[8];
    char line[128];
    char expect[96];
    json_t *doc = NULL;
    struct run r;

    snprintf(prefix, sizeof(prefix), "%.6s", f->old_id);
    r = RUN(f, "runs", "pin", prefix);
    assert_int_equal(r.status, 0);
    snprintf(expect, sizeof(expect), "pinned %s", f->old_id);
    assert_non_null(strstr(r.out, expect));
    /* weft runs marks it; run show --json says so; the other run is not pinned. */
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    snprintf(line, sizeof(line), "\n%s*  code-review", f->old_id);
    assert_non_null(strstr(r.out, line));
    snprintf(line, sizeof(line), "\n%s   code-review", f->new_id);
    assert_non_null(strstr(r.out, line));
    assert_non_null(strstr(r.out, "* pinned: weft gc keeps it"));
    r = RUN(f, "run", "show", f->old_id, "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_true(json_is_true(json_object_get(json_object_get(doc, "run"), "pinned")));
    json_decref(doc);
    r = RUN(f, "runs", "--json");
    doc = parse(r.out);
    assert_true(json_is_boolean(
        json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "pinned")));
    json_decref(doc);

    r = RUN(f, "gc", "--older-than", "14d", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    assert_int_equal(runs_member(doc, "runs_deleted"), 0);
    assert_int_equal(runs_member(doc, "runs_kept_pinned"), 1);
    json_decref(doc);
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs"), 2);
    assert_true(has_workspace(f, f->old_id));

    r = RUN(f, "runs", "unpin", f->old_id);
    assert_int_equal(r.status, 0);
    snprintf(expect, sizeof(expect), "unpinned %s", f->old_id);
    assert_non_null(strstr(r.out, expect));
    r = RUN(f, "run", "show", f->old_id, "--json");
    doc = parse(r.out);
    assert_true(json_is_false(json_object_get(json_object_get(doc, "run"), "pinned")));
    json_decref(doc);
    r = RUN(f, "gc", "--older-than", "14d");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "runs: deleted 1 run ("));
    assert_false(has_workspace(f, f->old_id));
}

static void
test_gc_pin_refuses_unknown_and_ambiguous_runs(void **state)
{
    struct fixture *f = *state;
    struct run r;

    r = RUN(f, "runs", "pin", "0123456789ab");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no run '0123456789ab'"));
    sql_exec(f->state, "INSERT INTO runs (id, workflow, session_id, status, started_ns, ended_ns)"
                       " VALUES ('ffff00000001', 'x', 's1', 'completed', 1, 2),"
                       " ('ffff00000002', 'x', 's2', 'completed', 1, 2)");
    r = RUN(f, "runs", "pin", "ffff");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "'ffff' does not name one run"));
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs WHERE pinned <> 0"), 0);
    r = RUN(f, "runs", "pin");
    assert_int_equal(r.status, 2);
    r = RUN(f, "runs", "pin", "last");
    assert_int_equal(r.status, 0);
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs WHERE pinned <> 0"), 1);
}

static void
test_gc_age_accepts_days_hours_minutes_seconds_only(void **state)
{
    struct fixture *f = *state;
    static const char *const good[] = {"14d", "12h", "30m", "90s", "1s", "36500d"};
    static const char *const bad[] = {"14",
                                      "d",
                                      "14w",
                                      "1.5h",
                                      "-3d",
                                      "0d",
                                      "14dd",
                                      "",
                                      " 14d",
                                      "14D",
                                      "1e3s",
                                      "36501d",
                                      "99999999999999999999d"};
    struct run r;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        r = RUN(f, "gc", "--older-than", good[i], "--dry-run");
        if (r.status != 0) {
            fail_msg("--older-than '%s': exit %d: %s", good[i], r.status, r.err);
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = RUN(f, "gc", "--older-than", bad[i], "--dry-run");
        if (r.status != 2 || strstr(r.err, "weft gc: --older-than '") == NULL) {
            fail_msg("--older-than '%s': exit %d: %s", bad[i], r.status, r.err);
        }
    }
    /* A refused age deletes nothing; so does a missing one. */
    r = RUN(f, "gc", "--older-than", "0d");
    assert_non_null(strstr(r.err, "must be more than 0"));
    r = RUN(f, "gc");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--older-than AGE is required"));
    assert_int_equal(sql_count(f->state, "SELECT count(*) FROM runs"), 2);
    r = RUN(f, "help", "gc");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "usage: weft gc --older-than AGE"));
}

/* A traced run whose spans are aged by 30 days in the span store: `weft gc` deletes its trace
 * (and not the new one's), says so in both forms, and the store reads on. */
static void
test_gc_deletes_old_traces_from_the_span_store(void **state)
{
    struct fixture *f = *state;
    char store[160];
    char sql[320];
    char old_trace[40];
    char new_trace[40];
    json_t *doc = NULL;
    json_t *spans = NULL;
    long long traces = 0;
    struct run r = RUN(f, "run", EXAMPLE, "-q");

    assert_int_equal(r.status, 0);
    snprintf(store, sizeof(store), "%s/weft.db", f->dir);
    sql_text(store, "SELECT trace_id FROM traces ORDER BY start_ns DESC LIMIT 1", old_trace,
             sizeof(old_trace));
    r = RUN(f, "run", EXAMPLE, "-q");
    assert_int_equal(r.status, 0);
    sql_text(store, "SELECT trace_id FROM traces ORDER BY start_ns DESC LIMIT 1", new_trace,
             sizeof(new_trace));
    traces = sql_count(store, "SELECT count(*) FROM traces");
    assert_int_equal(strlen(old_trace), 32);
    assert_int_equal(strlen(new_trace), 32);
    snprintf(sql, sizeof(sql),
             "UPDATE traces SET start_ns = start_ns - 30 * " DAY_NS
             ", end_ns = end_ns - 30 * " DAY_NS " WHERE trace_id = '%s'",
             old_trace);
    sql_exec(store, sql);
    r = RUN(f, "gc", "--older-than", "14d", "--dry-run", "--json");
    assert_int_equal(r.status, 0);
    doc = parse(r.out);
    spans = json_object_get(json_object_get(doc, "stores"), "spans");
    assert_true(json_is_true(json_object_get(spans, "ok")));
    assert_int_equal(json_integer_value(json_object_get(spans, "traces_deleted")), 1);
    assert_true(json_integer_value(json_object_get(spans, "spans_deleted")) > 10);
    /* No content captured: no payload record to collect (tests/payloads and the store tests
     * cover collection). */
    assert_true(json_is_integer(json_object_get(spans, "payloads_deleted")));
    assert_int_equal(json_integer_value(json_object_get(spans, "payloads_deleted")), 0);
    json_decref(doc);
    assert_int_equal(sql_count(store, "SELECT count(*) FROM traces"), traces);
    r = RUN(f, "gc", "--older-than", "14d");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "spans: deleted 1 trace ("));
    assert_non_null(strstr(r.out, " freed)"));
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM spans WHERE trace_id = '%s'", old_trace);
    assert_int_equal(sql_count(store, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM spans WHERE trace_id = '%s'", new_trace);
    assert_true(sql_count(store, sql) > 10);
    r = RUN(f, "trace", "show", new_trace);
    assert_int_equal(r.status, 0);
    r = RUN(f, "trace", "show", old_trace);
    assert_int_equal(r.status, 1);
}

/* `weft serve --retention`: its first pass, at start, deletes the aged run's trace and the run
 * itself (runs follow their traces out), counted on /metrics. */
static void
test_serve_retention_deletes_old_traces_and_their_runs(void **state)
{
    struct fixture *f = *state;
    char store[160];
    char sql[320];
    char log[160];
    char home_env[160];
    const char *argv[] = {WEFT_BIN, "serve", "--addr", "127.0.0.1:0", "--retention", "14d", NULL};
    const char *env[] = {home_env, "WEFT_SERVE_TOKEN*", "WEFT_STATE_URL*", NULL};
    const char *labels[] = {"outcome=\"ok\"", NULL};
    unsigned port = 0;
    pid_t pid = 0;
    char *metrics = NULL;
    long status = 0;
    double deleted = 0;
    struct run r = RUN(f, "run", EXAMPLE, "-q");

    assert_int_equal(r.status, 0);
    snprintf(store, sizeof(store), "%s/weft.db", f->dir);
    sql_exec(store, "UPDATE traces SET start_ns = start_ns - 30 * " DAY_NS
                    ", end_ns = end_ns - 30 * " DAY_NS);
    snprintf(home_env, sizeof(home_env), "WEFT_HOME=%s", f->dir);
    snprintf(log, sizeof(log), "%s/serve.log", f->dir);
    pid = serve_proc_spawn(argv, env, f->dir, log, &port);
    for (int i = 0; i < 200 && deleted < 1; i++) {
        free(metrics);
        metrics = serve_proc_get(port, "/metrics", 10000, &status);
        assert_non_null(metrics);
        deleted = serve_proc_sum(metrics, "weft_store_retention_traces_deleted_total", NULL, NULL);
        if (deleted < 1) {
            weft_test_sleep_ms(50);
        }
    }
    assert_true(deleted >= 1);
    assert_true(serve_proc_sum(metrics, "weft_store_retention_passes_total", labels, NULL) >= 1);
    free(metrics);
    weft_test_kill_group(pid, 5000);
    assert_int_equal(sql_count(store, "SELECT count(*) FROM traces"), 0);
    /* The run aged in setup went with the traces; the new ones are younger than 14 days. */
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM runs WHERE id = '%s'", f->old_id);
    assert_int_equal(sql_count(f->state, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM runs WHERE id = '%s'", f->new_id);
    assert_int_equal(sql_count(f->state, sql), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gc_json_dry_run_then_delete_report_the_same, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_text_says_what_it_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_pinned_run_is_kept_until_unpinned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_pin_refuses_unknown_and_ambiguous_runs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_age_accepts_days_hours_minutes_seconds_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_deletes_old_traces_from_the_span_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_serve_retention_deletes_old_traces_and_their_runs,
                                        setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
