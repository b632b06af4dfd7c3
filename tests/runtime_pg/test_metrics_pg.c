/* tests/runtime_pg/test_metrics_pg.c - per-run metric snapshots and their fold over a real
 * PostgreSQL 15 (tests/support/pg_server.h, one server for the file, a fresh database per
 * test): every case of tests/runtime/mstore_cases.h, which tests/runtime/test_metrics_store.c
 * runs over SQLite, plus what only this backend has: the run_metrics table of migration 2 with
 * its key, and a snapshot writer whose connection the server terminated reconnects for the
 * next checkpoint. A server that cannot start fails the file: it never skips. */
#include "runtime/state/state.h"
#include "support/pg_server.h"
#include "support/weft_test.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct weft_test_pg *server;
static unsigned databases; /* per-test database names m1, m2, ... */

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

#include "runtime/mstore_cases.h"

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

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char name[32];
    char err[512] = "";

    assert_non_null(f);
    snprintf(name, sizeof(name), "m%u", ++databases);
    if (weft_test_pg_createdb(server, name, f->location, sizeof(f->location)) != 0) {
        fail_msg("createdb %s: %s", name, f->location);
    }
    if (weft__state_open(f->location, &f->st, err, sizeof(err)) != WEFT_OK) {
        fail_msg("open %s: %s", f->location, err);
    }
    f->conn = PQconnectdb(f->location);
    if (PQstatus(f->conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", f->location, PQerrorMessage(f->conn));
    }
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

/* Migration 2 made the table, keyed as SQLite's is. */
static void
test_pg_run_metrics_table_of_migration_2(void **state)
{
    struct fx *f = *state;

    assert_int_equal(fx_count(f, "SELECT count(*) FROM weft_schema_migrations WHERE version = 2"),
                     1);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM information_schema.columns"
                                 " WHERE table_name = 'run_metrics'"),
                     15);
    assert_int_equal(fx_count(f, "SELECT count(*) FROM information_schema.key_column_usage k"
                                 " JOIN information_schema.table_constraints c"
                                 " ON c.constraint_name = k.constraint_name"
                                 " WHERE c.table_name = 'run_metrics'"
                                 " AND c.constraint_type = 'PRIMARY KEY'"),
                     4);
}

/* The server ends the writer's session between two checkpoints: the next one reconnects and
 * writes (the reconnect-once rule of state_pg.c), and the fold sees it. */
static void
test_pg_snapshot_writer_reconnects_after_termination(void **state)
{
    struct fx *f = *state;
    struct weft_meter *meter = NULL;
    struct weft_instrument *c = NULL;
    struct rt_mstore *ms = NULL;

    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", "0");
    ms = started(f, "cut", &meter);
    c = counter(meter, "test.cut");
    assert_weft_ok(weft_counter_add(c, 1, NULL, 0));
    weft__rt_mstore_checkpoint(ms, 1, false);
    assert_true(folded(f->location, "test.cut", NULL, NULL).total == 1.0);
    PQclear(run_ok(f->conn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND pid <> pg_backend_pid()"));
    assert_weft_ok(weft_counter_add(c, 1, NULL, 0));
    weft__rt_mstore_checkpoint(ms, 2, true);
    weft__rt_mstore_free(ms);
    assert_true(folded(f->location, "test.cut", NULL, NULL).total == 2.0);
    weft_test_setenv("WEFT_METRICS_SNAPSHOT_MS", NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        MSTORE_CASES(setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_run_metrics_table_of_migration_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_snapshot_writer_reconnects_after_termination, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, start_server, stop_server);
}
