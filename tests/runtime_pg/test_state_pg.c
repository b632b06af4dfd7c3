/* tests/runtime_pg/test_state_pg.c - the state store over a real PostgreSQL 15
 * (tests/support/pg_server.h, one server for the file, a fresh database per test):
 * - every case of tests/runtime/state_cases.h, the behaviour the SQLite backend has too, read
 *   through views named like the SQLite tables (runs, steps) over workflows and tasks;
 * - what only this backend has: the migration creates the design's workflows and tasks columns
 *   with their exact types, keys and indexes; migrations are version-tracked, idempotent, and
 *   safe when several processes open a fresh database at once; a newer schema is refused;
 *   tasks rows carry the design's statuses, dependencies and parent as task UUIDs, rewards
 *   and feedback_notes in the success and failure shapes; two processes racing for a run's
 *   lease: exactly one wins; recovery skips a run another connection holds locked; a connection
 *   terminated by the server (pg_terminate_backend) is made again, and a transaction it cut
 *   short is sent again, before a statement or at COMMIT, and stored once; a server stopped
 *   and started again within WEFT_STATE_RECONNECT_MS is waited for and nothing is lost; a run
 *   end sent twice adds its totals once; a server gone for good is reported after the wait,
 *   naming the URL; errors and logs never show the URL's password.
 * A server that cannot start fails the file: it never skips. */
#include "base/mem.h"
#include "runtime/state/state.h"
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct weft_test_pg *server;
static unsigned databases; /* per-test database names t1, t2, ... */

struct fx {
    char location[256]; /* the test database's URL */
    struct rt_state *st;
    PGconn *conn; /* the test's own connection: views, checks, faults */
};

static PGresult *
run_ok(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    return res;
}

static long long
fx_count(struct fx *f, const char *sql)
{
    PGresult *res = run_ok(f->conn, sql);
    long long n = -1;

    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    return n;
}

static void
fx_exec(struct fx *f, const char *sqlite_sql, const char *pg_sql)
{
    (void)sqlite_sql;
    PQclear(run_ok(f->conn, pg_sql));
}

/* The first column of the first row of @p sql as text into @p out ("" for NULL or no row). */
static const char *
fx_text(struct fx *f, const char *sql, char *out, size_t len)
{
    PGresult *res = run_ok(f->conn, sql);

    out[0] = '\0';
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    return out;
}

#include "runtime/state_cases.h"

/* weft's SQLite names over the PostgreSQL tables, so state_cases.h's checks read both. */
static const char views[] =
    "CREATE VIEW runs AS SELECT run_id AS id, workflow, workflow_path, session_id,"
    " user_prompt AS input, status, reason, trace_id, output, iterations, input_tokens,"
    " output_tokens, cost_usd, started_ns, ended_ns, root_span_id, total_reward AS reward,"
    " corrections, loops, resumed_from_trace, owner_pid, owner_host, owner_token, owner_since_ns,"
    " heartbeat_ns, workflow_hash, root_span_name, root_parent_span_id, root_started_ns"
    " FROM workflows;"
    "CREATE VIEW steps AS SELECT w.run_id, t.task_order AS idx, t.step_id, t.agent,"
    " t.description AS task, t.depends_on, t.step_status AS status, t.attempts, t.result,"
    " t.feedback, t.requested_by, t.executor_type AS executor, t.spec, t.parent_step AS parent,"
    " t.reward, t.error_type, t.error, t.started_ns, t.ended_ns, t.span_id, t.span_parent_id"
    " FROM tasks t JOIN workflows w ON w.workflow_id = t.workflow_id;";

static int
start_server(void **state)
{
    char err[4096];

    (void)state;
    server = weft_test_pg_start(NULL, err, sizeof(err));
    if (server == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
stop_server(void **state)
{
    (void)state;
    assert_int_equal(weft_test_pg_stop(server), 0);
    server = NULL;
    return 0;
}

/* A fresh database; its URL into @p url. */
static void
fresh_database(char *url, size_t len)
{
    char name[32];

    snprintf(name, sizeof(name), "t%u", ++databases);
    if (weft_test_pg_createdb(server, name, url, len) != 0) {
        fail_msg("createdb %s: %s", name, url);
    }
}

static PGconn *
connect_to(const char *url)
{
    PGconn *conn = PQconnectdb(url);

    if (PQstatus(conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", url, PQerrorMessage(conn));
    }
    return conn;
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[512] = "";

    assert_non_null(f);
    fresh_database(f->location, sizeof(f->location));
    if (weft__state_open(f->location, &f->st, err, sizeof(err)) != WEFT_OK) {
        fail_msg("open %s: %s", f->location, err);
    }
    f->conn = connect_to(f->location);
    PQclear(run_ok(f->conn, views));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft__state_close(f->st);
    PQfinish(f->conn);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Schema and migrations                                                                       */

/* Column @p column of @p table: "data_type|udt_name|max length|nullable|default". */
static const char *
column(struct fx *f, const char *table, const char *column, char *out, size_t len)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT data_type || '|' || udt_name || '|' ||"
             " COALESCE(character_maximum_length::text, '') || '|' || is_nullable || '|' ||"
             " COALESCE(column_default, '') FROM information_schema.columns"
             " WHERE table_schema = current_schema() AND table_name = '%s'"
             " AND column_name = '%s'",
             table, column);
    return fx_text(f, sql, out, len);
}

static void
test_pg_migration_creates_the_design_tables(void **state)
{
    struct fx *f = *state;
    char buf[512];

    /* workflows: the design's five columns, exactly. */
    assert_string_equal(column(f, "workflows", "workflow_id", buf, sizeof(buf)), "uuid|uuid||NO|");
    assert_string_equal(column(f, "workflows", "user_prompt", buf, sizeof(buf)), "text|text||YES|");
    assert_string_equal(column(f, "workflows", "creation_timestamp", buf, sizeof(buf)),
                        "timestamp with time zone|timestamptz||NO|now()");
    assert_string_equal(column(f, "workflows", "final_status", buf, sizeof(buf)),
                        "character varying|varchar|20|YES|'in_progress'::character varying");
    assert_string_equal(column(f, "workflows", "total_reward", buf, sizeof(buf)),
                        "double precision|float8||YES|");
    /* tasks: the design's fourteen. */
    assert_string_equal(column(f, "tasks", "task_id", buf, sizeof(buf)), "uuid|uuid||NO|");
    assert_string_equal(column(f, "tasks", "workflow_id", buf, sizeof(buf)), "uuid|uuid||NO|");
    assert_string_equal(column(f, "tasks", "parent_id", buf, sizeof(buf)), "uuid|uuid||YES|");
    assert_string_equal(column(f, "tasks", "task_order", buf, sizeof(buf)), "integer|int4||NO|");
    assert_string_equal(column(f, "tasks", "description", buf, sizeof(buf)), "text|text||YES|");
    assert_string_equal(column(f, "tasks", "status", buf, sizeof(buf)),
                        "character varying|varchar|20|NO|'pending'::character varying");
    assert_string_equal(column(f, "tasks", "dependencies", buf, sizeof(buf)),
                        "ARRAY|_uuid||NO|'{}'::uuid[]");
    assert_string_equal(column(f, "tasks", "executor_type", buf, sizeof(buf)),
                        "character varying|varchar|50|YES|");
    assert_string_equal(column(f, "tasks", "reward", buf, sizeof(buf)),
                        "double precision|float8||YES|");
    assert_string_equal(column(f, "tasks", "feedback_notes", buf, sizeof(buf)),
                        "jsonb|jsonb||YES|");
    assert_string_equal(column(f, "tasks", "retries", buf, sizeof(buf)), "integer|int4||NO|0");
    assert_string_equal(column(f, "tasks", "creation_timestamp", buf, sizeof(buf)),
                        "timestamp with time zone|timestamptz||NO|now()");
    assert_string_equal(column(f, "tasks", "last_update_timestamp", buf, sizeof(buf)),
                        "timestamp with time zone|timestamptz||NO|now()");
    /* Keys: primary keys, tasks -> workflows, tasks -> tasks (sub-tasks). */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM pg_constraint WHERE contype = 'p' AND"
                                 " ((conrelid = 'workflows'::regclass AND pg_get_constraintdef(oid)"
                                 " = 'PRIMARY KEY (workflow_id)') OR (conrelid = 'tasks'::regclass"
                                 " AND pg_get_constraintdef(oid) = 'PRIMARY KEY (task_id)'))"),
                     2);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND"
                                 " conrelid = 'tasks'::regclass AND (pg_get_constraintdef(oid) LIKE"
                                 " 'FOREIGN KEY (workflow_id) REFERENCES workflows(workflow_id)%'"
                                 " OR pg_get_constraintdef(oid) LIKE"
                                 " 'FOREIGN KEY (parent_id) REFERENCES tasks(task_id)%')"),
                     2);
    /* The statuses: the design's six and skipped. */
    fx_text(f,
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' AND"
            " conrelid = 'tasks'::regclass",
            buf, sizeof(buf));
    for (const char *const *s =
             (const char *const[]){"'pending'", "'dispatched'", "'in_progress'", "'success'",
                                   "'failed'", "'paused'", "'skipped'", NULL};
         *s != NULL; s++) {
        assert_non_null(strstr(buf, *s));
    }
    /* weft's run id is a unique column beside the design's. */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM pg_constraint WHERE contype = 'u' AND"
                                 " conrelid = 'workflows'::regclass AND pg_get_constraintdef(oid)"
                                 " = 'UNIQUE (run_id)'"),
                     1);
    /* Indexes on tasks(status) and tasks(workflow_id). */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM pg_indexes WHERE tablename = 'tasks' AND"
                                 " indexdef LIKE '%USING btree (status)'"),
                     1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM pg_indexes WHERE tablename = 'tasks' AND"
                                 " indexdef LIKE '%USING btree (workflow_id)'"),
                     1);
}

static void
test_pg_migrations_are_tracked_and_run_once(void **state)
{
    struct fx *f = *state;
    struct rt_state *again = NULL;
    char err[512] = "";
    char stamp[2][64];

    /* 1: workflows, tasks and weft's tables; 2: run_metrics (per-run metric snapshots);
     * 3: skills (skill memory); 4: skill_vectors (its embeddings); 5: teams (composed);
     * 6: tool_results and run origins (replay and fork); 7: the workflow snapshot; 8: pinned
     * runs (retention); 9: the trace's sampling decision; 10: content-addressed payloads;
     * 11: the workflow snapshot as a payload; 12: datasets and experiments. */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM weft_schema_migrations"), 12);
    assert_int_equal(fx_count(f, "SELECT min(version) FROM weft_schema_migrations"), 1);
    assert_int_equal(fx_count(f, "SELECT max(version) FROM weft_schema_migrations"), 12);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM weft_schema_migrations WHERE applied_at IS"
                                 " NOT NULL AND applied_at <= now()"),
                     12);
    fx_text(f, "SELECT max(applied_at) FROM weft_schema_migrations", stamp[0], sizeof(stamp[0]));
    /* Opening again applies nothing. */
    assert_weft_ok(weft__state_open(f->location, &again, err, sizeof(err)));
    weft__state_close(again);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM weft_schema_migrations"), 12);
    fx_text(f, "SELECT max(applied_at) FROM weft_schema_migrations", stamp[1], sizeof(stamp[1]));
    assert_string_equal(stamp[0], stamp[1]);
    assert_string_equal(column(f, "weft_schema_migrations", "version", stamp[0], sizeof(stamp[0])),
                        "integer|int4||NO|");
    assert_string_equal(
        column(f, "weft_schema_migrations", "applied_at", stamp[0], sizeof(stamp[0])),
        "timestamp with time zone|timestamptz||NO|now()");
}

/* Several processes opening one fresh database at the same moment: every open succeeds and
 * each migration is applied once (the advisory lock). */
static void
test_pg_concurrent_first_opens_migrate_once(void **state)
{
    struct fx *f = *state;
    char url[256];
    int go[2];
    pid_t kids[4];
    char sql[128];
    PGconn *conn = NULL;
    PGresult *res = NULL;

    (void)f;
    fresh_database(url, sizeof(url));
    assert_int_equal(pipe(go), 0);
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            struct rt_state *st = NULL;
            char err[512];
            char byte = 0;

            close(go[1]);
            if (read(go[0], &byte, 1) != 0) {
                _exit(3);
            }
            _exit(weft__state_open(url, &st, err, sizeof(err)) == WEFT_OK ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]); /* everyone starts at once */
    for (int i = 0; i < 4; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    conn = connect_to(url);
    snprintf(sql, sizeof(sql),
             "SELECT count(*), count(DISTINCT version) FROM "
             "weft_schema_migrations");
    res = run_ok(conn, sql);
    assert_string_equal(PQgetvalue(res, 0, 0), "12");
    assert_string_equal(PQgetvalue(res, 0, 1), "12");
    PQclear(res);
    PQfinish(conn);
}

static void
test_pg_refuses_a_newer_schema(void **state)
{
    struct fx *f = *state;
    struct rt_state *st = NULL;
    char err[512] = "";

    fx_exec(f, NULL, "INSERT INTO weft_schema_migrations (version) VALUES (99)");
    assert_int_equal(weft__state_open(f->location, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, "has schema 99; this weft knows 12"));
    assert_non_null(strstr(err, f->location));
    /* Nothing was changed. */
    assert_int_equal(fx_count(f, "SELECT max(version) FROM weft_schema_migrations"), 99);
}

/* ------------------------------------------------------------------------------------------ */
/* The design's columns as weft fills them                                                     */

/* One value of the task of step @p step_id: @p expr over tasks t. */
static const char *
task_value(struct fx *f, const char *step_id, const char *expr, char *out, size_t len)
{
    char sql[512];

    snprintf(sql, sizeof(sql), "SELECT %s FROM tasks t WHERE t.step_id = '%s'", expr, step_id);
    return fx_text(f, sql, out, len);
}

static void
test_pg_tasks_carry_the_design_statuses_and_notes(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    struct weft__state_run_end end;
    const char *deps_fix[2] = {"design", "build"};
    char buf[1024];
    char want[256];

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "design", 0, "Design it", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "build", 0, "make", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "test", 0, "make test", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "review", 0, "Review", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "deploy", 0, "Deploy", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "fix", 0, "Fix the test", deps_fix, 2, NULL));
    assert_weft_ok(weft__plan_append(&plan, "docs", 0, "Docs", NULL, 0, NULL));
    /* An agent step that succeeded: its answer is the stdout. */
    plan.steps[0].status = STEP_COMPLETED;
    plan.steps[0].result = weft__strdup("design.md written");
    plan.steps[0].has_reward = true;
    plan.steps[0].reward = 1.0;
    /* A command step that succeeded: its tool's stdout and stderr. */
    plan.steps[1].executor = EXEC_COMMAND;
    plan.steps[1].status = STEP_COMPLETED;
    plan.steps[1].result = weft__strdup("{\"exit_code\":0,\"stdout\":\"built\\n\","
                                        "\"stderr\":\"1 warning\\n\"}");
    plan.steps[1].has_reward = true;
    plan.steps[1].reward = 1.5;
    plan.steps[1].retries = 2;
    /* A command step that failed, repaired by "fix": paused. */
    plan.steps[2].executor = EXEC_COMMAND;
    plan.steps[2].status = STEP_PAUSED;
    plan.steps[2].feedback = weft__strdup("command failed: exit_status");
    plan.steps[2].error_type = weft__strdup("exit_status");
    plan.steps[2].error = json_pack("{s:i, s:s, s:s}", "exit_code", 2, "stderr_tail",
                                    "assertion failed", "error_type", "exit_status");
    plan.steps[2].has_reward = true;
    plan.steps[2].reward = -1.1;
    /* An agent that failed with a traceback. */
    plan.steps[3].status = STEP_FAILED;
    plan.steps[3].error_type = weft__strdup("tool_error");
    plan.steps[3].error =
        json_pack("{s:s, s:s}", "message", "the tool crashed", "traceback", "File x, line 1");
    /* Handed to a remote worker, no result yet. */
    plan.steps[4].status = STEP_IN_PROGRESS;
    plan.steps[4].is_dispatched = true;
    /* The corrective step: a sub-task of the failed one. */
    plan.steps[5].parent = weft__strdup("test");
    plan.steps[6].status = STEP_SKIPPED;

    assert_weft_ok(weft__state_run_begin(f->st, "run1", "ship", "wf.json", "sess",
                                         "Add a login endpoint", 1700000000000000000ull));
    for (size_t i = 0; i < plan.count; i++) {
        assert_weft_ok(weft__state_step_save(f->st, "run1", i, &plan.steps[i], "coder"));
    }
    /* The run's row: the design's columns. */
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE run_id = 'run1' AND"
                                 " user_prompt = 'Add a login endpoint' AND final_status ="
                                 " 'in_progress' AND total_reward IS NULL AND creation_timestamp ="
                                 " to_timestamp(1700000000)"),
                     1);
    /* Statuses in the design's words; weft's own kept beside them. */
    assert_string_equal(task_value(f, "design", "status || '/' || step_status", buf, sizeof(buf)),
                        "success/completed");
    assert_string_equal(task_value(f, "test", "status || '/' || step_status", buf, sizeof(buf)),
                        "paused/paused");
    assert_string_equal(task_value(f, "review", "status", buf, sizeof(buf)), "failed");
    assert_string_equal(task_value(f, "deploy", "status || '/' || step_status", buf, sizeof(buf)),
                        "dispatched/in_progress");
    assert_string_equal(task_value(f, "fix", "status", buf, sizeof(buf)), "pending");
    assert_string_equal(task_value(f, "docs", "status", buf, sizeof(buf)), "skipped");
    /* Order, description, executor type, reward, retries, task id. */
    assert_string_equal(
        task_value(f, "build",
                   "task_order || '|' || description || '|' || executor_type"
                   " || '|' || reward || '|' || retries || '|' || task_id",
                   buf, sizeof(buf)),
        (snprintf(want, sizeof(want), "1|make|command|1.5|2|%s", plan.steps[1].task_uuid), want));
    assert_string_equal(task_value(f, "design", "reward::text", buf, sizeof(buf)), "1");
    assert_string_equal(task_value(f, "fix", "coalesce(reward::text, 'null')", buf, sizeof(buf)),
                        "null");
    /* Dependencies and parent as task UUIDs. */
    snprintf(want, sizeof(want), "{%s,%s}", plan.steps[0].task_uuid, plan.steps[1].task_uuid);
    assert_string_equal(task_value(f, "fix", "dependencies::text", buf, sizeof(buf)), want);
    assert_string_equal(task_value(f, "fix", "parent_id::text", buf, sizeof(buf)),
                        plan.steps[2].task_uuid);
    assert_string_equal(task_value(f, "design", "dependencies::text", buf, sizeof(buf)), "{}");
    /* feedback_notes: the success shape ... */
    assert_string_equal(task_value(f, "design", "feedback_notes::text", buf, sizeof(buf)),
                        "{\"notes\": \"\", \"status\": \"success\", \"stderr\": \"\", \"stdout\":"
                        " \"design.md written\"}");
    assert_string_equal(task_value(f, "build", "feedback_notes::text", buf, sizeof(buf)),
                        "{\"notes\": \"\", \"status\": \"success\", \"stderr\": \"1 warning\\n\","
                        " \"stdout\": \"built\\n\"}");
    /* ... and the failure shape: details, or the traceback when the error has one. */
    assert_string_equal(task_value(f, "test", "feedback_notes::text", buf, sizeof(buf)),
                        "{\"status\": \"failed\", \"details\": {\"exit_code\": 2, \"error_type\":"
                        " \"exit_status\", \"stderr_tail\": \"assertion failed\"}, \"error_type\":"
                        " \"exit_status\", \"error_message\": \"command failed: exit_status\"}");
    assert_string_equal(
        task_value(f, "review", "feedback_notes::text", buf, sizeof(buf)),
        "{\"status\": \"failed\", \"traceback\": \"File x, line 1\","
        " \"error_type\": \"tool_error\", \"error_message\": \"the tool crashed\"}");
    assert_string_equal(
        task_value(f, "fix", "coalesce(feedback_notes::text, 'null')", buf, sizeof(buf)), "null");
    /* An update moves last_update_timestamp, not creation_timestamp. */
    fx_exec(f, NULL,
            "UPDATE tasks SET creation_timestamp = now() - interval '1 hour',"
            " last_update_timestamp = now() - interval '1 hour'");
    plan.steps[5].status = STEP_COMPLETED;
    plan.steps[5].result = weft__strdup("fixed");
    assert_weft_ok(weft__state_step_save(f->st, "run1", 5, &plan.steps[5], "fixer"));
    assert_string_equal(task_value(f, "fix",
                                   "(last_update_timestamp > creation_timestamp + interval"
                                   " '30 minutes')::text || status",
                                   buf, sizeof(buf)),
                        "truesuccess");
    /* The run's end in the design's words. */
    memset(&end, 0, sizeof(end));
    end.status = "completed";
    end.reward = 2.5;
    end.ended_ns = 1700000001000000000ull;
    assert_weft_ok(weft__state_run_end(f->st, "run1", &end));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE run_id = 'run1' AND"
                                 " final_status = 'success' AND total_reward = 2.5 AND status ="
                                 " 'completed'"),
                     1);
    end.status = "timed_out";
    assert_weft_ok(weft__state_run_end(f->st, "run1", &end));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE final_status = 'failed'"),
                     1);
    end.status = "aborted";
    assert_weft_ok(weft__state_run_end(f->st, "run1", &end));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE final_status = 'paused'"),
                     1);
    weft__plan_cleanup(&plan);
}

/* A step saved for a run that is not stored is an error, not a silent no-op. */
static void
test_pg_step_of_an_unknown_run_fails(void **state)
{
    struct fx *f = *state;
    struct plan plan;

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "t", NULL, 0, NULL));
    weft_test_capture_logs();
    assert_int_equal(weft__state_step_save(f->st, "ghost", 0, &plan.steps[0], "coder"), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "run ghost is not stored"));
    weft__plan_cleanup(&plan);
}

/* ------------------------------------------------------------------------------------------ */
/* Concurrency                                                                                 */

/* Four processes, each with its own connection, take the same run's lease at the same moment:
 * exactly one gets it, the others are refused naming a live owner. */
static void
test_pg_lease_race_has_exactly_one_winner(void **state)
{
    struct fx *f = *state;
    int go[2];
    int results[2];
    int hold[2];
    pid_t kids[4];
    int wins = 0;
    int refusals = 0;

    assert_weft_ok(weft__state_run_begin(f->st, "contested", "wf", NULL, "s", NULL, 1));
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(results), 0);
    assert_int_equal(pipe(hold), 0);
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            struct rt_state *st = NULL;
            struct state_owner holder;
            char err[512];
            char byte = 0;

            close(go[1]);
            close(results[0]);
            close(hold[1]);
            if (weft__state_open(f->location, &st, err, sizeof(err)) != WEFT_OK ||
                read(go[0], &byte, 1) != 0) {
                _exit(3);
            }
            switch (weft__state_lease_acquire(st, "contested", &holder)) {
            case WEFT_OK:
                byte = 'W';
                break;
            case WEFT_ESTATE:
                byte = holder.pid > 0 && holder.pid != getpid() ? 'R' : '?';
                break;
            default:
                byte = 'E';
            }
            if (write(results[1], &byte, 1) != 1) {
                _exit(4);
            }
            /* Stay alive (an owner that exited would be dead) until the parent has counted. */
            (void)read(hold[0], &byte, 1);
            weft__state_close(st);
            _exit(0);
        }
    }
    close(go[0]);
    close(results[1]);
    close(hold[0]);
    close(go[1]); /* all four go */
    for (int i = 0; i < 4; i++) {
        char byte = 0;
        assert_int_equal(read(results[0], &byte, 1), 1);
        wins += byte == 'W';
        refusals += byte == 'R';
    }
    close(hold[1]);
    for (int i = 0; i < 4; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    close(results[0]);
    assert_int_equal(wins, 1);
    assert_int_equal(refusals, 3);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE owner_token IS NOT NULL"),
                     1);
}

/* Recovery scans with SKIP LOCKED: a run whose row another connection holds (it is taking the
 * run over) is neither waited for nor marked; once released, it is. */
static void
test_pg_recover_skips_a_locked_run(void **state)
{
    struct fx *f = *state;
    struct state_owner holder;
    size_t count = 99;
    char sql[256];
    pid_t child = fork();
    int status = 0;

    assert_true(child >= 0);
    if (child == 0) {
        _exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_weft_ok(weft__state_run_begin(f->st, "dead", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_lease_acquire(f->st, "dead", &holder));
    snprintf(sql, sizeof(sql), "UPDATE workflows SET owner_pid = %d WHERE run_id = 'dead'",
             (int)child); /* its owner is gone */
    fx_exec(f, NULL, sql);
    fx_exec(f, NULL, "BEGIN");
    fx_exec(f, NULL, "SELECT 1 FROM workflows WHERE run_id = 'dead' FOR UPDATE");
    assert_weft_ok(weft__state_recover(f->st, NULL, NULL, &count));
    assert_int_equal(count, 0);
    fx_exec(f, NULL, "COMMIT");
    assert_weft_ok(weft__state_recover(f->st, NULL, NULL, &count));
    assert_int_equal(count, 1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM workflows WHERE status = 'interrupted' AND"
                                 " final_status = 'paused' AND owner_token IS NULL"),
                     1);
}

/* ------------------------------------------------------------------------------------------ */
/* Connection loss                                                                             */

/* Terminate the state's server process(es) of this database (all but the test's own), and wait
 * until they are gone. */
static void
terminate_state_connections(struct fx *f)
{
    assert_true(fx_count(f, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000)"
                            " FROM pg_stat_activity WHERE datname = current_database()"
                            " AND pid <> pg_backend_pid()) t") >= 1);
}

static void
test_pg_dropped_connection_is_made_again(void **state)
{
    struct fx *f = *state;
    struct weft_run_info info;
    struct plan plan;

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "t", NULL, 0, NULL));
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", "in", 1));
    weft_test_capture_logs();
    terminate_state_connections(f);
    /* The next call reconnects and runs: outside a transaction, nothing is lost. */
    assert_weft_ok(weft__state_run_info(f->st, "r", &info));
    assert_string_equal(info.input, "in");
    weft__state_info_cleanup(&info);
    assert_non_null(strstr(weft_test_logs(), "was lost during run info; reconnected"));
    terminate_state_connections(f);
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM steps"), 1);

    /* Inside a transaction the server lost what was sent: the transaction is begun again and
     * its statements sent again before the one that failed, and it commits whole, once. */
    weft_test_clear_logs();
    assert_weft_ok(weft__state_begin(f->st));
    plan.steps[0].status = STEP_COMPLETED;
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    terminate_state_connections(f);
    assert_weft_ok(weft__state_message_add(f->st, "s", "r", "user", "hello", NULL));
    assert_weft_ok(weft__state_commit(f->st));
    assert_false(weft__state_in_transaction(f->st));
    assert_non_null(strstr(weft_test_logs(), "was sent again (1 statements)"));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM steps WHERE status = 'completed'"), 1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM messages"), 1);

    /* At COMMIT: the transaction is sent again and committed, once. */
    assert_weft_ok(weft__state_begin(f->st));
    plan.steps[0].attempts = 2;
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_message_add(f->st, "s", "r", "user", "second", NULL));
    terminate_state_connections(f);
    assert_weft_ok(weft__state_commit(f->st));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM steps WHERE attempts = 2"), 1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM messages WHERE content = 'second'"), 1);
    assert_weft_ok(weft__state_message_add(f->st, "s", "r", "user", "again", NULL));
    assert_int_equal(fx_count(f, "SELECT count(*) FROM messages"), 3);
    {
        char why[512];
        assert_weft_ok(weft__state_check(f->st, why, sizeof(why)));
    }
    weft__plan_cleanup(&plan);
}

/* A run end sent a second time (as after an answer lost with the connection) adds its totals
 * once: they are added to a row not already ended at that instant. */
static void
test_pg_run_end_sent_twice_adds_once(void **state)
{
    struct fx *f = *state;
    struct weft__state_run_end end;

    memset(&end, 0, sizeof(end));
    end.status = "completed";
    end.iterations = 3;
    end.input_tokens = 5;
    end.output_tokens = 7;
    end.cost_usd = 0.5;
    end.ended_ns = 1000;
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", "in", 1));
    assert_weft_ok(weft__state_run_end(f->st, "r", &end));
    assert_weft_ok(weft__state_run_end(f->st, "r", &end));
    assert_int_equal(fx_count(f, "SELECT input_tokens + output_tokens + iterations FROM runs"), 15);
    /* A resumed run's end (another instant) adds its attempt's totals. */
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", "in", 2));
    end.ended_ns = 2000;
    assert_weft_ok(weft__state_run_end(f->st, "r", &end));
    assert_int_equal(fx_count(f, "SELECT input_tokens + output_tokens + iterations FROM runs"), 30);
}

/* Starts the halted server again after a pause, from a thread: the test's main thread is
 * meanwhile inside a state call that waits for it. */
struct restarter {
    struct weft_test_pg *pg;
    long delay_ms;
    int rc;
    char err[2048];
};

static void *
restart_later(void *arg)
{
    struct restarter *r = arg;

    weft_test_sleep_ms(r->delay_ms); /* the outage's length: the scenario, not a sync */
    r->rc = weft_test_pg_restart(r->pg, r->err, sizeof(r->err));
    return NULL;
}

/* The server stops (pg_ctl stop) in the middle of a transaction and starts again 1.5 s later
 * on the same data and port: the next statement waits for it, the transaction is sent again,
 * and everything is stored once; a statement outside a transaction waits the same way. */
static void
test_pg_outage_within_the_wait_loses_nothing(void **state)
{
    struct weft_test_pg *srv = NULL;
    struct rt_state *st = NULL;
    /* Static: a failed assertion leaves the function while the thread may still run. */
    static struct restarter r;
    pthread_t thread;
    struct weft_run_info info;
    struct plan plan;
    char err[4096] = "";
    char url[256];
    PGconn *conn = NULL;
    PGresult *res = NULL;

    (void)state;
    srv = weft_test_pg_start(NULL, err, sizeof(err));
    if (srv == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    snprintf(url, sizeof(url), "%s", weft_test_pg_url(srv));
    assert_weft_ok(weft__state_open(url, &st, err, sizeof(err)));
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "t", NULL, 0, NULL));
    assert_weft_ok(weft__state_run_begin(st, "r", "wf", NULL, "s", NULL, 1));
    weft_test_capture_logs();

    assert_weft_ok(weft__state_begin(st));
    plan.steps[0].status = STEP_COMPLETED;
    assert_weft_ok(weft__state_step_save(st, "r", 0, &plan.steps[0], "coder"));
    assert_int_equal(weft_test_pg_halt(srv), 0);
    memset(&r, 0, sizeof(r));
    r.pg = srv;
    r.delay_ms = 1500;
    assert_int_equal(pthread_create(&thread, NULL, restart_later, &r), 0);
    assert_weft_ok(weft__state_message_add(st, "s", "r", "assistant", "kept", NULL));
    assert_weft_ok(weft__state_commit(st));
    assert_int_equal(pthread_join(thread, NULL), 0);
    if (r.rc != 0) {
        fail_msg("restart: %s", r.err);
    }
    assert_non_null(strstr(weft_test_logs(), "waiting up to"));
    assert_non_null(strstr(weft_test_logs(), "reconnected after"));

    /* Outside a transaction. */
    assert_int_equal(weft_test_pg_halt(srv), 0);
    assert_int_equal(pthread_create(&thread, NULL, restart_later, &r), 0);
    assert_weft_ok(weft__state_message_add(st, "s", "r", "user", "also kept", NULL));
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(r.rc, 0);
    assert_weft_ok(weft__state_check(st, err, sizeof(err)));

    conn = PQconnectdb(url);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    res = PQexec(conn, "SELECT (SELECT string_agg(step_status, ',') FROM tasks) || ' ' ||"
                       " (SELECT string_agg(content, ',' ORDER BY seq) FROM messages)");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "completed kept,also kept");
    PQclear(res);
    PQfinish(conn);
    weft__plan_cleanup(&plan);
    weft__state_close(st);

    /* Opening while the server is away: a command fails at once; a worker's task (the waiting
     * open) waits for it. */
    assert_int_equal(weft_test_pg_halt(srv), 0);
    st = NULL;
    assert_int_equal(weft__state_open(url, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_int_equal(pthread_create(&thread, NULL, restart_later, &r), 0);
    assert_weft_ok(weft__state_open_waiting(url, &st, err, sizeof(err)));
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(r.rc, 0);
    assert_weft_ok(weft__state_run_info(st, "r", &info));
    assert_string_equal(info.status, "running");
    weft__state_info_cleanup(&info);
    weft__state_close(st);
    assert_int_equal(weft_test_pg_stop(srv), 0);
}

/* The server goes away for good: calls fail (logged), nothing crashes, weft__state_check()
 * names the URL, and closing the handle works. */
static void
test_pg_server_gone_for_good_is_reported(void **state)
{
    struct weft_test_pg *gone = NULL;
    struct rt_state *st = NULL;
    struct weft_run_info info;
    char err[4096] = "";
    char url[256];

    (void)state;
    gone = weft_test_pg_start(NULL, err, sizeof(err));
    if (gone == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    snprintf(url, sizeof(url), "%s", weft_test_pg_url(gone));
    weft_test_setenv("WEFT_STATE_RECONNECT_MS", "700"); /* read by the open */
    assert_weft_ok(weft__state_open(url, &st, err, sizeof(err)));
    weft_test_setenv("WEFT_STATE_RECONNECT_MS", NULL);
    assert_weft_ok(weft__state_run_begin(st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_check(st, err, sizeof(err)));
    assert_int_equal(weft_test_pg_stop(gone), 0);
    weft_test_capture_logs();
    assert_int_equal(weft__state_run_info(st, "r", &info), WEFT_EIO);
    assert_null(info.run_id);
    assert_int_equal(weft__state_begin(st), WEFT_EIO);
    assert_false(weft__state_in_transaction(st));
    assert_non_null(
        strstr(weft_test_logs(), "run info failed on postgresql://postgres@127.0.0.1:"));
    assert_int_equal(weft__state_check(st, err, sizeof(err)), WEFT_EIO);
    assert_non_null(strstr(err, url));
    assert_non_null(strstr(err, "the connection was lost and could not be made again within "
                                "700 ms (WEFT_STATE_RECONNECT_MS)"));
    assert_non_null(strstr(weft_test_logs(), "waiting up to"));
    assert_null(strchr(err, '\n'));
    weft__state_close(st);
}

/* A server that is not there: a clear error naming the URL, quickly, without its password. */
static void
test_pg_unreachable_server_fails_clearly(void **state)
{
    struct rt_state *st = NULL;
    char err[512] = "";
    char url[128];

    (void)state;
    /* Port 1 on loopback: nothing listens there. */
    snprintf(url, sizeof(url), "postgresql://weft:hunter2secret@127.0.0.1:1/db?connect_timeout=2");
    assert_int_equal(weft__state_open(url, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, "postgresql://weft:****@127.0.0.1:1/db"));
    assert_non_null(strstr(err, "cannot connect"));
    assert_null(strstr(err, "hunter2secret"));
}

/* The password in a URL (user:password@ or ?password=) never reaches a message or a log line,
 * even when the server accepts the connection and a statement then fails. */
static void
test_pg_password_never_shown(void **state)
{
    struct fx *f = *state;
    struct rt_state *st = NULL;
    char url[512];
    char err[512] = "";
    char *shown = NULL;
    const char *rest = strstr(f->location, "@");
    struct plan plan;

    assert_non_null(rest);
    snprintf(url, sizeof(url), "postgresql://postgres:hunter2secret%s?password=hunter2secret",
             rest);
    shown = weft__state_location_redacted(url);
    assert_null(strstr(shown, "hunter2secret"));
    assert_non_null(strstr(shown, "postgresql://postgres:****@127.0.0.1:"));
    assert_non_null(strstr(shown, "?password=****"));
    weft__free(shown);
    shown = weft__state_location_redacted("postgres://u@h/d?sslmode=require&password=x&a=b");
    assert_string_equal(shown, "postgres://u@h/d?sslmode=require&password=****&a=b");
    weft__free(shown);
    shown = weft__state_location_redacted("/var/lib/weft/state.db");
    assert_string_equal(shown, "/var/lib/weft/state.db");
    weft__free(shown);

    weft_test_capture_logs();
    assert_weft_ok(weft__state_open(url, &st, err, sizeof(err))); /* trust: accepted */
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "t", NULL, 0, NULL));
    assert_int_equal(weft__state_step_save(st, "no-such-run", 0, &plan.steps[0], "c"), WEFT_EIO);
    fx_exec(f, NULL, "ALTER TABLE messages RENAME TO messages_gone");
    assert_int_equal(weft__state_message_add(st, "s", "r", "user", "x", NULL), WEFT_EIO);
    assert_non_null(
        strstr(weft_test_logs(), "message insert failed on postgresql://postgres:****@"));
    assert_non_null(strstr(weft_test_logs(), "INSERT INTO messages"));
    assert_null(strstr(weft_test_logs(), "hunter2secret"));
    fx_exec(f, NULL, "ALTER TABLE messages_gone RENAME TO messages");
    weft__plan_cleanup(&plan);
    weft__state_close(st);
}

/* WEFT_STATE_URL is the default location; it is never turned into a file. */
static void
test_pg_state_url_is_the_default_location(void **state)
{
    struct fx *f = *state;
    char *loc = NULL;

    weft_test_setenv("WEFT_STATE_URL", f->location);
    loc = weft__state_default_path();
    assert_string_equal(loc, f->location);
    assert_true(weft__state_is_url(loc));
    weft__free(loc);
    weft_test_setenv("WEFT_STATE_URL", "");
    loc = weft__state_default_path();
    assert_non_null(strstr(loc, "state.db"));
    assert_false(weft__state_is_url(loc));
    weft__free(loc);
    weft_test_setenv("WEFT_STATE_URL", NULL);
    assert_true(weft__state_is_url("postgres://h/d"));
    assert_false(weft__state_is_url("postgresql:/h"));
    assert_false(weft__state_is_url(NULL));
}

/* weft_runs_gc() and weft_run_pin() over a PostgreSQL URL: the old unpinned run goes with its
 * rows in every table and its workspace folder; the pinned one stays; a dry run first reports
 * the same numbers and changes nothing. */
static void
test_pg_runs_gc_through_the_public_api(void **state)
{
    struct fx *f = *state;
    struct weft_runs_gc_report dry;
    struct weft_runs_gc_report r;
    const char *home = getenv("WEFT_HOME");
    char path[512];
    char id[96];

    assert_non_null(home);
    gc_seed(f, "pgold1", "s-old", 2000);
    gc_seed(f, "pgpin1", "s-pin", 2000);
    gc_seed(f, "pgnew1", "s-new", GC_CUTOFF + 1);
    snprintf(path, sizeof(path), "%s/workspaces", home);
    (void)mkdir(home, 0755);
    (void)mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/workspaces/pgold1", home);
    weft_test_rmtree(path);
    assert_int_equal(mkdir(path, 0755), 0);
    weft_test_write_file(path, "out.txt", "12345");
    assert_weft_ok(weft_run_pin(f->location, "pgpin", true, id, sizeof(id)));
    assert_string_equal(id, "pgpin1");
    assert_int_equal(weft_run_pin(f->location, "pg", true, id, sizeof(id)), WEFT_EINVAL);
    assert_int_equal(weft_run_pin(f->location, "nope", true, id, sizeof(id)), WEFT_ENOTFOUND);

    assert_weft_ok(weft_runs_gc(f->location, GC_CUTOFF, true, &dry));
    assert_int_equal(dry.runs_deleted, 1);
    assert_int_equal(dry.rows_deleted, GC_TABLES);
    assert_int_equal(dry.workspaces_removed, 1);
    assert_int_equal(dry.workspace_bytes, 5);
    assert_int_equal(dry.runs_kept_pinned, 1);
    assert_int_equal(gc_rows(f, "runs", "pgold1", "s-old"), 1);
    assert_int_equal(access(path, F_OK), 0);

    assert_weft_ok(weft_runs_gc(f->location, GC_CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, dry.runs_deleted);
    assert_int_equal(r.rows_deleted, dry.rows_deleted);
    assert_int_equal(r.workspace_bytes, dry.workspace_bytes);
    assert_int_equal(r.runs_kept_pinned, 1);
    assert_int_equal(access(path, F_OK), -1);
    for (size_t i = 0; i < GC_TABLES; i++) {
        assert_int_equal(gc_rows(f, gc_tables[i], "pgold1", "s-old"), 0);
        assert_int_equal(gc_rows(f, gc_tables[i], "pgpin1", "s-pin"), 1);
        assert_int_equal(gc_rows(f, gc_tables[i], "pgnew1", "s-new"), 1);
    }
    /* Unpinned, it goes too. */
    assert_weft_ok(weft_run_pin(f->location, "pgpin1", false, NULL, 0));
    assert_weft_ok(weft_runs_gc(f->location, GC_CUTOFF, false, &r));
    assert_int_equal(r.runs_deleted, 1);
    assert_int_equal(gc_rows(f, "runs", "pgpin1", "s-pin"), 0);
    assert_int_equal(gc_rows(f, "runs", "pgnew1", "s-new"), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        STATE_CASES(setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_migration_creates_the_design_tables, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_migrations_are_tracked_and_run_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_concurrent_first_opens_migrate_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_refuses_a_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_tasks_carry_the_design_statuses_and_notes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_step_of_an_unknown_run_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_lease_race_has_exactly_one_winner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_recover_skips_a_locked_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_dropped_connection_is_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_run_end_sent_twice_adds_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_outage_within_the_wait_loses_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pg_server_gone_for_good_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_unreachable_server_fails_clearly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_password_never_shown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_state_url_is_the_default_location, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_runs_gc_through_the_public_api, setup, teardown),
    };

    return cmocka_run_group_tests(tests, start_server, stop_server);
}
