/* tests/runtime/test_state.c - the state store over SQLite files in a temp dir: every case of
 * state_cases.h (the behaviour both backends share), plus what only the SQLite backend has:
 * scripted cursors merged with a pre-version-4 row, migration of a version-1 database to the
 * current schema (8: task UUIDs, retries, dispatched flags, skills, skill vectors), a version-6
 * database gaining skill memory, the skills search planned on its full-text index, out of memory
 * over skill saves and searches, and clear errors for a newer, corrupt, damaged or unopenable file.
 * tests/runtime_pg/test_state_pg.c runs the same cases against PostgreSQL. */
#include "runtime/state/state.h"
#include "support/weft_test.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct fx {
    char dir[64];
    char location[128]; /* the state.db file */
    struct rt_state *st;
};

static long long
count_rows(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    long long n = -1;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
}

static void
exec_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("%s: %s", sql, msg);
    }
    sqlite3_close(db);
}

static long long
fx_count(struct fx *f, const char *sql)
{
    return count_rows(f->location, sql);
}

static void
fx_exec(struct fx *f, const char *sqlite_sql, const char *pg_sql)
{
    (void)pg_sql;
    exec_sql(f->location, sqlite_sql);
}

#include "state_cases.h"

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[256] = "";

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-state-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->location, sizeof(f->location), "%s/state.db", f->dir);
    assert_int_equal(weft__state_open(f->location, &f->st, err, sizeof(err)), WEFT_OK);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft__state_close(f->st);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A row written by a version-3 weft (one JSON object per script) is the base the per-queue
 * rows override. */
static void
test_state_cursors_are_merged_with_old_rows(void **state)
{
    struct fx *f = *state;
    json_t *first = json_pack("{s:i, s:i}", "coder/act", 5, "tester/act", 1);
    json_t *out = NULL;

    assert_int_equal(weft__state_cursors_save(f->st, "sess", "script.json", first), WEFT_OK);
    exec_sql(f->location, "INSERT INTO script_cursors VALUES ('sess', 'script.json',"
                          " '{\"coder/act\": 1, \"planner/plan\": 3}')");
    assert_int_equal(weft__state_cursors_load(f->st, "sess", "script.json", &out), WEFT_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "coder/act")), 5);
    assert_int_equal(json_integer_value(json_object_get(out, "planner/plan")), 3);
    assert_int_equal(json_integer_value(json_object_get(out, "tester/act")), 1);
    json_decref(out);
    json_decref(first);
}

static void
test_state_owner_is_alive_by_pid_or_heartbeat(void **state)
{
    char me[256];
    pid_t child = fork();
    int status = 0;

    (void)state;
    assert_true(child >= 0);
    if (child == 0) {
        _exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_int_equal(gethostname(me, sizeof(me)), 0);
    me[sizeof(me) - 1] = '\0';
    assert_true(weft__state_owner_is_alive(0, NULL, 0, 1)); /* unknown owner: assume alive */
    assert_true(weft__state_owner_is_alive(getpid(), me, 0, 1));
    assert_false(weft__state_owner_is_alive(child, me, 0, 1)); /* reaped: gone */
    assert_false(weft__state_owner_is_alive(0, me, 0, 1));
    /* Another host: judged by the heartbeat's age. */
    assert_true(
        weft__state_owner_is_alive(1, "elsewhere.invalid", 1000, 1000 + STATE_OWNER_STALE_NS - 1));
    assert_false(
        weft__state_owner_is_alive(1, "elsewhere.invalid", 1000, 1000 + STATE_OWNER_STALE_NS));
}

/* A database written by weft's first schema is migrated in place and keeps its data. */
static void
test_state_migrates_a_version_1_database(void **state)
{
    struct fx *f = *state;
    char path[160];
    char err[256] = "";
    struct rt_state *st = NULL;
    struct weft_run_info info;
    struct rows rows;
    struct plan plan;

    memset(&rows, 0, sizeof(rows));
    snprintf(path, sizeof(path), "%s/v1.db", f->dir);
    exec_sql(path,
             "CREATE TABLE runs (id TEXT PRIMARY KEY, workflow TEXT NOT NULL, session_id TEXT NOT"
             " NULL, input TEXT, status TEXT NOT NULL, reason TEXT, trace_id TEXT, output TEXT,"
             " iterations INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,"
             " output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,"
             " started_ns BIGINT NOT NULL, ended_ns BIGINT);"
             "CREATE TABLE steps (run_id TEXT NOT NULL, idx INTEGER NOT NULL, step_id TEXT NOT"
             " NULL, agent TEXT NOT NULL, task TEXT NOT NULL, depends_on TEXT NOT NULL, status"
             " TEXT NOT NULL, attempts INTEGER NOT NULL, result TEXT, feedback TEXT,"
             " requested_by TEXT, PRIMARY KEY (run_id, idx));"
             "CREATE TABLE messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT"
             " NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, route TEXT, created_ns BIGINT"
             " NOT NULL, PRIMARY KEY (session_id, seq));"
             "CREATE TABLE script_cursors (session_id TEXT NOT NULL, script TEXT NOT NULL,"
             " cursors TEXT NOT NULL, PRIMARY KEY (session_id, script));"
             "INSERT INTO runs (id, workflow, session_id, status, iterations, started_ns,"
             " ended_ns) VALUES ('old-run', 'wf', 's', 'completed', 4, 10, 20);"
             "INSERT INTO steps VALUES ('old-run', 0, 's1', 'coder', 't', '[]', 'completed', 1,"
             " 'done', NULL, NULL);"
             "PRAGMA user_version = 1;");
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    assert_int_equal(count_rows(path, "PRAGMA user_version"), 16);
    assert_weft_ok(weft__state_run_info(st, "old-run", &info));
    assert_string_equal(info.status, "completed");
    assert_int_equal(info.iterations, 4);
    assert_int_equal(info.step_count, 1);
    assert_null(info.workflow_path);
    assert_true(info.reward == 0.0);
    weft__state_info_cleanup(&info);
    assert_weft_ok(weft__state_steps_each(st, "old-run", collect_step, &rows));
    assert_int_equal(rows.n, 1);
    assert_false(rows.has_reward[0]);
    /* Columns and tables of every later version are there. */
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "s2", 0, "t", NULL, 0, NULL));
    plan.steps[0].has_reward = true;
    assert_weft_ok(weft__state_step_save(st, "old-run", 1, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_run_hash_set(st, "old-run", "h"));
    assert_int_equal(count_rows(path, "SELECT COUNT(*) FROM llm_exchanges"), 0);
    assert_int_equal(count_rows(path, "SELECT COUNT(*) FROM corrections"), 0);
    assert_int_equal(count_rows(path,
                                "SELECT COUNT(*) FROM steps WHERE step_id = 's2' AND"
                                " retries = 0 AND is_dispatched = 0 AND task_uuid IS NOT NULL"),
                     1);
    weft__plan_cleanup(&plan);
    weft__state_close(st);
    /* Opening again migrates nothing twice. */
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    weft__state_close(st);
}

static void
test_state_refuses_a_newer_schema(void **state)
{
    struct fx *f = *state;
    char path[160];
    char err[256] = "";
    struct rt_state *st = NULL;

    snprintf(path, sizeof(path), "%s/new.db", f->dir);
    exec_sql(path, "CREATE TABLE future (x); PRAGMA user_version = 99;");
    assert_int_equal(weft__state_open(path, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, "has schema 99; this weft knows 16"));
    assert_non_null(strstr(err, path));
    /* Nothing was changed. */
    assert_int_equal(count_rows(path, "PRAGMA user_version"), 99);
}

static void
test_state_open_errors_name_the_file(void **state)
{
    struct fx *f = *state;
    char path[160];
    char err[256] = "";
    struct rt_state *st = NULL;
    FILE *fp = NULL;

    /* Not a database at all. */
    snprintf(path, sizeof(path), "%s/garbage.db", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    for (int i = 0; i < 512; i++) {
        fputs("this is not sqlite ", fp);
    }
    fclose(fp);
    assert_int_equal(weft__state_open(path, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not a database"));
    /* A directory that cannot exist (its parent is a file): a clear error, no crash. The
     * tests run as root, so permissions alone would not stop the open. */
    snprintf(path, sizeof(path), "%s/garbage.db/state.db", f->dir);
    err[0] = '\0';
    assert_int_equal(weft__state_open(path, &st, err, sizeof(err)), WEFT_EIO);
    assert_null(st);
    assert_non_null(strstr(err, "state database"));
    assert_non_null(strstr(err, "unable to open"));
}

/* Damage found after the open (a table's pages overwritten) is reported as EIO by the call
 * that meets it, and weft__state_check() says what to do. */
static void
test_state_damage_after_open_is_reported(void **state)
{
    struct fx *f = *state;
    char path[160];
    char err[512] = "";
    struct rt_state *st = NULL;
    struct weft_run_info *infos = NULL;
    size_t count = 0;
    FILE *fp = NULL;
    long size = 0;
    long page = 0;
    weft_err rc = WEFT_OK;

    snprintf(path, sizeof(path), "%s/damaged.db", f->dir);
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    for (int i = 0; i < 200; i++) {
        char id[16];
        snprintf(id, sizeof(id), "run-%03d", i);
        assert_weft_ok(
            weft__state_run_begin(st, id, "wf", NULL, "s", "some input text", (uint64_t)i));
    }
    weft__state_close(st); /* the last connection checkpoints the WAL into the file */
    assert_int_equal(count_rows(path, "PRAGMA page_count") > 4, 1);
    page = (long)count_rows(path, "PRAGMA page_size");
    fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    size = ftell(fp);
    /* Overwrite every page but the first (the header and schema stay readable). */
    for (long off = page; off < size; off += page) {
        assert_int_equal(fseek(fp, off, SEEK_SET), 0);
        for (long k = 0; k < page; k++) {
            fputc(0x5a, fp);
        }
    }
    fclose(fp);
    weft_test_capture_logs();
    rc = weft__state_open(path, &st, err, sizeof(err));
    if (rc != WEFT_OK) {
        /* SQLite may meet the damage already while opening: still a sentence with the file. */
        assert_int_equal(rc, WEFT_EIO);
        assert_non_null(strstr(err, path));
        return;
    }
    assert_weft_ok(weft__state_check(st, err, sizeof(err)));
    assert_int_not_equal(weft__state_runs_list(st, 500, &infos, &count), WEFT_OK);
    assert_null(infos);
    assert_int_equal(count, 0);
    assert_int_equal(weft__state_run_begin(st, "x", "wf", NULL, "s", NULL, 1), WEFT_EIO);
    assert_int_equal(weft__state_check(st, err, sizeof(err)), WEFT_EIO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "damaged"));
    weft__state_close(st);
}

/* A database of schema 6 (before skill memory) gains the skills tables, its full-text index
 * and triggers, and keeps its runs; skills then save and search. */
static void
test_state_migrates_a_version_6_database_to_skills(void **state)
{
    struct fx *f = *state;
    char path[160];
    char err[256] = "";
    struct rt_state *st = NULL;
    struct weft_run_info info;
    struct weft__skill s;
    struct weft__skill *hits = NULL;
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/v6.db", f->dir);
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    assert_weft_ok(weft__state_run_begin(st, "old-run", "wf", NULL, "s", "in", 1));
    weft__state_close(st);
    exec_sql(path, "DROP TABLE skills_vocab; DROP TABLE skills_fts; DROP TABLE skills;"
                   " DROP TABLE skills_terms; DROP TABLE skills_meta; DROP TABLE tool_results;"
                   " ALTER TABLE runs DROP COLUMN origin_kind;"
                   " ALTER TABLE runs DROP COLUMN origin_run_id;"
                   " ALTER TABLE runs DROP COLUMN origin_step;"
                   " DROP INDEX runs_workflow_snapshot_ref;"
                   " ALTER TABLE runs DROP COLUMN workflow_snapshot_ref;"
                   " ALTER TABLE runs DROP COLUMN workflow_snapshot; DROP INDEX runs_ended;"
                   " ALTER TABLE runs DROP COLUMN pinned;"
                   " ALTER TABLE runs DROP COLUMN trace_sampling; DROP TABLE payloads;"
                   " DROP INDEX llm_exchanges_entry_ref;"
                   " ALTER TABLE llm_exchanges DROP COLUMN entry_ref; PRAGMA user_version = 6;");
    assert_int_equal(count_rows(path, "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE"
                                      " 'skills%'"),
                     0);
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    assert_int_equal(count_rows(path, "PRAGMA user_version"), 16);
    assert_weft_ok(weft__state_run_info(st, "old-run", &info));
    weft__state_info_cleanup(&info);
    memset(&s, 0, sizeof(s));
    s.agent = "coder";
    s.task = "migrate the database schema";
    s.solution = "ALTER TABLE";
    s.reward = 1.0;
    assert_weft_ok(weft__state_skill_save(st, &s, NULL));
    assert_weft_ok(weft__state_skills_search(st, "coder", "database migration", 3, 0.0, &hits, &n));
    assert_int_equal(n, 1);
    weft__skills_free(hits, n);
    assert_int_equal(count_rows(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'"
                                      " AND name LIKE 'skills_fts_%'"),
                     3);
    weft__state_close(st);
    /* Opening again migrates nothing twice. */
    assert_weft_ok(weft__state_open(path, &st, err, sizeof(err)));
    weft__state_close(st);
}

/* The search's shape (runtime/state/state_sqlite.c) is planned as intended: the full-text match
 * picks the best rows, which are then read from skills by key, never a scan of skills. */
static void
test_state_skills_search_is_driven_by_the_full_text_index(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    bool has_scan = false;
    bool has_search = false;

    assert_int_equal(sqlite3_open_v2(f->location, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "EXPLAIN QUERY PLAN WITH r AS MATERIALIZED (SELECT rowid"
                                        " AS rid, rank AS score FROM skills_fts WHERE"
                                        " skills_fts MATCH 'x' ORDER BY score LIMIT 3)"
                                        " SELECT s.id FROM r JOIN skills s ON s.rid = r.rid"
                                        " WHERE s.agent = 'a'",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text(stmt, 3);
        /* "SCAN s" would be the skills table read whole; "SCAN skills_fts" is the match. */
        has_scan = has_scan || strcmp(detail, "SCAN s") == 0 || strncmp(detail, "SCAN s ", 7) == 0;
        has_search = has_search || strstr(detail, "SEARCH s USING INTEGER PRIMARY KEY") != NULL;
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    assert_false(has_scan);
    assert_true(has_search);
}

/* Out of memory at every allocation of a save and a search in turn: each fails cleanly or
 * succeeds (no crash, no leak, no transaction left open, never an empty task stored). */
static size_t
skill_calls(struct fx *f, int round)
{
    struct weft__skill s;
    struct weft__skill *hits = NULL;
    char task[64];
    size_t n = 0;
    size_t ok = 0;
    bool is_new = false;

    memset(&s, 0, sizeof(s));
    snprintf(task, sizeof(task), "refactor the parser module round %d", round);
    s.agent = "coder";
    s.task = task;
    s.solution = "split parse() into lexer and parser";
    s.reward = 1.0;
    ok += weft__state_skill_save(f->st, &s, &is_new) == WEFT_OK;
    if (weft__state_skills_search(f->st, "coder", "refactor parser module", 3, 0.0, &hits, &n) ==
        WEFT_OK) {
        ok++;
        weft__skills_free(hits, n);
    }
    if (weft__state_skills_list(f->st, "coder", 3, &hits, &n) == WEFT_OK) {
        ok++;
        weft__skills_free(hits, n);
    }
    return ok;
}

static void
test_state_skills_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    bool is_done = false;
    int round = 0;

    assert_int_equal(skill_calls(f, round++), 3);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 2000; budget++) {
        failalloc_budget = budget;
        is_done = skill_calls(f, round++) == 3;
        failalloc_budget = -1;
        assert_false(weft__state_in_transaction(f->st));
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_int_equal(count_rows(f->location, "SELECT COUNT(*) FROM skills WHERE task = ''"), 0);
    assert_int_equal(skill_calls(f, round++), 3);
}

/* A step saved again with the same dependencies is an UPDATE of what changed (the SQLite
 * backend remembers which rows it stored); each save still leaves the whole row as a reader (a
 * resumed run, another handle) must see it: final status, result and times, the task and
 * actor of the first save, dependencies that changed, and a row deleted behind the handle's
 * back stored whole again. */
static void
test_state_step_saved_again_writes_what_changed(void **state)
{
    struct fx *f = *state;
    struct rt_state *other = NULL;
    struct plan plan;
    struct rows rows;
    const char *deps[2] = {"a", "b"};
    char err[256] = "";

    memset(&rows, 0, sizeof(rows));
    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "first", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "second", deps, 1, NULL));
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    /* In progress, then completed: two updates of the stored row. */
    weft__plan_set_status(&plan, 0, STEP_IN_PROGRESS);
    plan.steps[0].started_ns = 5;
    plan.steps[0].attempts = 1;
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    weft__plan_set_status(&plan, 0, STEP_COMPLETED);
    plan.steps[0].result = weft__strdup("done");
    plan.steps[0].ended_ns = 9;
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_weft_ok(weft__state_commit(f->st));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r' AND idx = 0"
                                 " AND step_id = 'a' AND agent = 'coder' AND task = 'first'"
                                 " AND status = 'completed' AND result = 'done' AND attempts = 1"
                                 " AND started_ns = 5 AND ended_ns = 9 AND task_uuid IS NOT NULL"),
                     1);
    /* Dependencies that changed are written. */
    weft__free(plan.steps[1].depends_on[0]);
    plan.steps[1].depends_on[0] = weft__strdup("b");
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 1 AND depends_on ="
                                 " '[\"b\"]'"),
                     1);
    /* A row gone behind the handle's back is stored whole again. */
    fx_exec(f, "DELETE FROM steps WHERE run_id = 'r' AND idx = 0", NULL);
    assert_weft_ok(weft__state_step_save(f->st, "r", 0, &plan.steps[0], "coder"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 0 AND task = 'first'"
                                 " AND agent = 'coder' AND status = 'completed'"),
                     1);
    /* Another run on the same handle: its rows are its own. */
    assert_weft_ok(weft__state_run_begin(f->st, "r2", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_step_save(f->st, "r2", 0, &plan.steps[0], "coder"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 1);
    /* What a resumed run reads, through a handle of its own. */
    assert_int_equal(weft__state_open(f->location, &other, err, sizeof(err)), WEFT_OK);
    assert_weft_ok(weft__state_steps_each(other, "r", collect_step, &rows));
    assert_int_equal(rows.n, 2);
    assert_string_equal(rows.status[0], "completed");
    assert_int_equal(rows.attempts[0], 1);
    assert_string_equal(rows.status[1], "pending");
    weft__state_close(other);
    weft__plan_cleanup(&plan);
}

/* A rolled back transaction takes the rows' knowledge with it: the dependencies a rolled back
 * save wrote are written again by the next one. */
static void
test_state_step_save_after_a_rollback_writes_dependencies_again(void **state)
{
    struct fx *f = *state;
    struct plan plan;
    const char *deps[1] = {"a"};

    weft__plan_init(&plan);
    assert_weft_ok(weft__plan_append(&plan, "a", 0, "first", NULL, 0, NULL));
    assert_weft_ok(weft__plan_append(&plan, "b", 0, "second", deps, 1, NULL));
    assert_weft_ok(weft__state_run_begin(f->st, "r", "wf", NULL, "s", NULL, 1));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    weft__free(plan.steps[1].depends_on[0]);
    plan.steps[1].depends_on[0] = weft__strdup("z");
    assert_weft_ok(weft__state_begin(f->st));
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    /* A write that fails inside the transaction (a row without its actor: NOT NULL), so the
     * commit rolls it all back. */
    assert_int_equal(weft__state_step_save(f->st, "r", 5, &plan.steps[0], NULL), WEFT_EIO);
    assert_int_equal(weft__state_commit(f->st), WEFT_EIO);
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 1 AND depends_on ="
                                 " '[\"a\"]'"),
                     1);
    assert_weft_ok(weft__state_step_save(f->st, "r", 1, &plan.steps[1], "coder"));
    assert_int_equal(fx_count(f, "SELECT COUNT(*) FROM steps WHERE idx = 1 AND depends_on ="
                                 " '[\"z\"]'"),
                     1);
    weft__plan_cleanup(&plan);
}

/* Connections opening a new file at once (the runs of an experiment, two `weft run`s): every
 * open succeeds. Switching the new file to WAL takes it exclusively, and SQLite's busy handler
 * did not wait for that: some opens failed with "database is locked". */
struct opener {
    const char *path;
    pthread_barrier_t *start;
    weft_err err;
    char msg[256];
};

static void *
open_at_once(void *arg)
{
    struct opener *o = arg;
    struct rt_state *st = NULL;

    pthread_barrier_wait(o->start);
    o->err = weft__state_open(o->path, &st, o->msg, sizeof(o->msg));
    weft__state_close(st);
    return NULL;
}

static void
test_state_new_file_opened_at_once(void **state)
{
    struct fx *f = *state;
    enum { OPENERS = 8, ROUNDS = 30 };

    for (int round = 0; round < ROUNDS; round++) {
        char path[192];
        pthread_barrier_t start;
        pthread_t threads[OPENERS];
        struct opener o[OPENERS];

        snprintf(path, sizeof(path), "%s/new-%d.db", f->dir, round);
        assert_int_equal(pthread_barrier_init(&start, NULL, OPENERS), 0);
        for (int i = 0; i < OPENERS; i++) {
            o[i] = (struct opener){.path = path, .start = &start};
            assert_int_equal(pthread_create(&threads[i], NULL, open_at_once, &o[i]), 0);
        }
        for (int i = 0; i < OPENERS; i++) {
            assert_int_equal(pthread_join(threads[i], NULL), 0);
            if (o[i].err != WEFT_OK) {
                fail_msg("round %d, opener %d: %s", round, i, o[i].msg);
            }
        }
        pthread_barrier_destroy(&start);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        STATE_CASES(setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_cursors_are_merged_with_old_rows, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_owner_is_alive_by_pid_or_heartbeat, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_migrates_a_version_1_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_refuses_a_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_open_errors_name_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_damage_after_open_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_migrates_a_version_6_database_to_skills, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_skills_search_is_driven_by_the_full_text_index,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_skills_out_of_memory_fails_cleanly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_step_saved_again_writes_what_changed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_state_step_save_after_a_rollback_writes_dependencies_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_new_file_opened_at_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
