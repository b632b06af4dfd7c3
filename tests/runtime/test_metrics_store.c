/* tests/runtime/test_metrics_store.c - per-run metric snapshots and their fold over a SQLite
 * state file in a temp dir: every case of mstore_cases.h. tests/runtime_pg/test_metrics_pg.c
 * runs the same cases against PostgreSQL; tests/runtime/test_run_metrics.c covers whole runs
 * of the built binary (killed runs, `weft serve`). */
#include "runtime/state/state.h"
#include "support/weft_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[64];
    char location[128]; /* the state.db file */
    struct rt_state *st;
};

static long long
fx_count(struct fx *f, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    long long n = -1;

    assert_int_equal(sqlite3_open_v2(f->location, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    }
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
}

#include "mstore_cases.h"

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[256] = "";

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-mstore-XXXXXX");
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        MSTORE_CASES(setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
