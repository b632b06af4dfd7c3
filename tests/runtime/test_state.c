/* tests/runtime/test_state.c - the state store as a module: cached statements stay correct
 * across many writes and nested uses, scripted cursors are saved one queue at a time and
 * loaded merged with a pre-version-4 row, and weft__state_begin()/weft__state_commit() group writes
 * into one transaction that a failed write rolls back whole. Real SQLite files in a temp dir. */
#include "runtime/state.h"
#include "support/weft_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[64];
    char path[128];
    struct rt_state *st;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[256] = "";

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-state-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
    assert_int_equal(weft__state_open(f->path, &f->st, err, sizeof(err)), WEFT_OK);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    char cmd[160];

    weft__state_close(f->st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    (void)system(cmd);
    free(f);
    return 0;
}

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
test_state_cached_statements_write_every_row(void **state)
{
    struct fx *f = *state;
    struct plan_step step;

    memset(&step, 0, sizeof(step));
    assert_int_equal(weft__state_run_begin(f->st, "r1", "wf", NULL, "s1", "in", 1), WEFT_OK);
    /* The same cached INSERT 500 times, with different bindings each time. */
    for (int i = 0; i < 500; i++) {
        char id[16];
        char task[32];
        snprintf(id, sizeof(id), "s%d", i);
        snprintf(task, sizeof(task), "task %d", i);
        step.id = id;
        step.task = task;
        step.status = i % 2 == 0 ? STEP_COMPLETED : STEP_PENDING;
        assert_int_equal(weft__state_step_save(f->st, "r1", (size_t)i, &step, "worker"), WEFT_OK);
    }
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE run_id = 'r1'"), 500);
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE status = 'completed'"),
                     250);
    /* A binding never outlives its call: the last row has its own task, not a neighbour's. */
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE idx = 499 AND"
                                         " task = 'task 499' AND step_id = 's499'"),
                     1);
}

static void
test_state_cursors_are_saved_per_queue_and_merged_with_old_rows(void **state)
{
    struct fx *f = *state;
    json_t *first = json_pack("{s:i, s:i}", "coder/act", 2, "tester/act", 1);
    json_t *second = json_pack("{s:i}", "coder/act", 5);
    json_t *out = NULL;
    sqlite3 *db = NULL;

    assert_int_equal(weft__state_cursors_save(f->st, "sess", "script.json", first), WEFT_OK);
    assert_int_equal(weft__state_cursors_save(f->st, "sess", "script.json", second), WEFT_OK);
    assert_int_equal(weft__state_cursors_load(f->st, "sess", "script.json", &out), WEFT_OK);
    assert_non_null(out);
    assert_int_equal(json_integer_value(json_object_get(out, "coder/act")), 5);
    assert_int_equal(json_integer_value(json_object_get(out, "tester/act")), 1);
    json_decref(out);
    /* Another session or script sees nothing. */
    assert_int_equal(weft__state_cursors_load(f->st, "other", "script.json", &out), WEFT_OK);
    assert_null(out);
    /* A row written by a version-3 weft is the base the per-queue rows override. */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "INSERT INTO script_cursors VALUES ('sess', 'script.json',"
                                  " '{\"coder/act\": 1, \"planner/plan\": 3}')",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(weft__state_cursors_load(f->st, "sess", "script.json", &out), WEFT_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "coder/act")), 5);
    assert_int_equal(json_integer_value(json_object_get(out, "planner/plan")), 3);
    assert_int_equal(json_integer_value(json_object_get(out, "tester/act")), 1);
    json_decref(out);
    json_decref(first);
    json_decref(second);
}

static void
test_state_transaction_groups_writes_and_rolls_back_on_failure(void **state)
{
    struct fx *f = *state;
    struct plan_step step;
    json_t *cursors = json_pack("{s:i}", "a/act", 1);
    sqlite3 *db = NULL;

    memset(&step, 0, sizeof(step));
    step.id = "s0";
    step.task = "t";
    step.status = STEP_COMPLETED;
    assert_int_equal(weft__state_run_begin(f->st, "r2", "wf", NULL, "s2", NULL, 1), WEFT_OK);
    /* Nested pairs: nothing is visible to another connection before the outermost commit. */
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "r2", 0, &step, "a"), WEFT_OK);
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_cursors_save(f->st, "s2", "x.json", cursors), WEFT_OK);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 0);
    assert_int_equal(weft__state_commit(f->st), WEFT_OK);
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 1);
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM script_cursor_keys"), 1);

    /* A write that fails inside (a trigger refuses it) rolls back the step saved before it. */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TRIGGER no_cursors BEFORE INSERT ON script_cursor_keys"
                                  " BEGIN SELECT RAISE(ABORT, 'refused'); END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    weft_test_capture_logs();
    step.id = "s1";
    assert_int_equal(weft__state_begin(f->st), WEFT_OK);
    assert_int_equal(weft__state_step_save(f->st, "r2", 1, &step, "a"), WEFT_OK);
    json_object_set_new(cursors, "b/act", json_integer(4));
    assert_int_equal(weft__state_cursors_save(f->st, "s2", "y.json", cursors), WEFT_EIO);
    assert_int_equal(weft__state_commit(f->st), WEFT_EIO);
    assert_non_null(strstr(weft_test_logs(), "refused"));
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 1);
    /* The handle is usable afterwards. */
    step.id = "s2";
    assert_int_equal(weft__state_step_save(f->st, "r2", 2, &step, "a"), WEFT_OK);
    assert_int_equal(count_rows(f->path, "SELECT COUNT(*) FROM steps WHERE run_id = 'r2'"), 2);
    json_decref(cursors);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_cached_statements_write_every_row, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_state_cursors_are_saved_per_queue_and_merged_with_old_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_state_transaction_groups_writes_and_rolls_back_on_failure, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
