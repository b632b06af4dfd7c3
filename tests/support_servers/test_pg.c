/* tests/support_servers/test_pg.c - the PostgreSQL test server (tests/support/pg_server.h):
 * it starts on 127.0.0.1 only, libpq talks to it (tables, UUID[] and JSONB, the column types
 * of issue 14's schema), a failed start names its log, and stopping - or the test dying -
 * leaves no process and no directory behind. */
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct weft_test_pg *server;

static int
start_server(void **state)
{
    char err[2048];
    long t0 = weft_test_now_ms();

    (void)state;
    server = weft_test_pg_start(NULL, err, sizeof(err));
    if (server == NULL) {
        fail_msg("%s", err);
    }
    print_message("PostgreSQL started in %ld ms at %s\n", weft_test_now_ms() - t0,
                  weft_test_pg_url(server));
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

static PGconn *
connect_to(const char *url)
{
    PGconn *conn = PQconnectdb(url);

    if (PQstatus(conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", url, PQerrorMessage(conn));
    }
    return conn;
}

static void
exec_ok(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    PQclear(res);
}

/* The single value of a one-row, one-column query, copied into @p buf. */
static const char *
query_value(PGconn *conn, const char *sql, char *buf, size_t len)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return buf;
}

/* Gone, or a zombie waiting for init to reap it (the postmaster is pg_ctl's orphan). */
static bool
is_gone(pid_t pid)
{
    char path[64];
    char text[256] = "";
    FILE *fp = NULL;
    const char *paren = NULL;

    if (kill(pid, 0) != 0) {
        return true;
    }
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    fp = fopen(path, "r");
    if (fp == NULL) {
        return true;
    }
    if (fgets(text, sizeof(text), fp) == NULL) {
        text[0] = '\0';
    }
    fclose(fp);
    paren = strrchr(text, ')');
    return paren != NULL && paren[1] == ' ' && paren[2] == 'Z';
}

static bool
wait_gone(pid_t pid, const char *dir, long timeout_ms)
{
    long deadline = weft_test_now_ms() + timeout_ms;
    struct stat st;

    while (weft_test_now_ms() < deadline) {
        if (is_gone(pid) && stat(dir, &st) != 0 && errno == ENOENT) {
            return true;
        }
        weft_test_sleep_ms(50);
    }
    return false;
}

static pid_t
postmaster_pid(const char *dir)
{
    char path[600];
    FILE *fp = NULL;
    long pid = -1;

    snprintf(path, sizeof(path), "%s/data/postmaster.pid", dir);
    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_int_equal(fscanf(fp, "%ld", &pid), 1);
    fclose(fp);
    return (pid_t)pid;
}

static void
test_pg_listens_on_loopback_only_as_postgres(void **state)
{
    PGconn *conn = connect_to(weft_test_pg_url(server));
    char buf[512];
    char prefix[64];

    (void)state;
    snprintf(prefix, sizeof(prefix), "postgresql://postgres@127.0.0.1:%u/",
             weft_test_pg_port(server));
    assert_true(strncmp(weft_test_pg_url(server), prefix, strlen(prefix)) == 0);
    assert_string_equal(query_value(conn, "SHOW listen_addresses", buf, sizeof(buf)), "127.0.0.1");
    assert_string_equal(query_value(conn, "SHOW fsync", buf, sizeof(buf)), "off");
    assert_string_equal(query_value(conn, "SELECT current_user", buf, sizeof(buf)), "postgres");
    query_value(conn, "SHOW server_version_num", buf, sizeof(buf));
    assert_true(strncmp(buf, "15", 2) == 0);
    query_value(conn, "SHOW unix_socket_directories", buf, sizeof(buf));
    assert_true(strncmp(buf, weft_test_pg_dir(server), strlen(weft_test_pg_dir(server))) == 0);
    PQfinish(conn);
}

static void
test_pg_table_insert_select_round_trip(void **state)
{
    PGconn *conn = connect_to(weft_test_pg_url(server));
    const char *params[2] = {"step one", "42"};
    PGresult *res = NULL;

    (void)state;
    exec_ok(conn, "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL, n int)");
    res = PQexecParams(conn, "INSERT INTO notes (body, n) VALUES ($1, $2) RETURNING id", 2, NULL,
                       params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
    res = PQexec(conn, "SELECT body, n FROM notes WHERE id = 1");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    assert_string_equal(PQgetvalue(res, 0, 0), "step one");
    assert_string_equal(PQgetvalue(res, 0, 1), "42");
    PQclear(res);
    exec_ok(conn, "DROP TABLE notes");
    PQfinish(conn);
}

/* The column types of issue 14's tasks table: UUID, UUID[] and JSONB. */
static void
test_pg_uuid_array_and_jsonb_round_trip(void **state)
{
    PGconn *conn = connect_to(weft_test_pg_url(server));
    const char *id = "6f1c2a4e-9b7d-4c3e-8a1f-0d2e3c4b5a69";
    const char *deps = "{1b4e28ba-2fa1-11d2-883f-0016d3cca427,"
                       "a3bb189e-8bf9-3888-9912-ace4e6543002}";
    const char *notes =
        "{\"status\": \"failed\", \"error_type\": \"ValueError\", "
        "\"error_message\": \"bad \\\"quote\\\" and \\u00e9\", \"details\": [1, 2]}";
    const char *params[3] = {id, deps, notes};
    PGresult *res = NULL;

    (void)state;
    exec_ok(conn, "CREATE TABLE tasks (task_id uuid PRIMARY KEY, dependencies uuid[], "
                  "feedback_notes jsonb)");
    res =
        PQexecParams(conn, "INSERT INTO tasks VALUES ($1, $2, $3)", 3, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        fail_msg("insert: %s", PQerrorMessage(conn));
    }
    PQclear(res);
    res = PQexec(conn, "SELECT task_id, dependencies, array_length(dependencies, 1), "
                       "dependencies[2], feedback_notes->>'status', "
                       "feedback_notes->>'error_message', feedback_notes->'details'->>1, "
                       "feedback_notes = $${\"details\": [1, 2], \"status\": \"failed\", "
                       "\"error_type\": \"ValueError\", "
                       "\"error_message\": \"bad \\\"quote\\\" and é\"}$$::jsonb "
                       "FROM tasks");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("select: %s", PQerrorMessage(conn));
    }
    assert_int_equal(PQntuples(res), 1);
    assert_string_equal(PQgetvalue(res, 0, 0), id);
    assert_string_equal(PQgetvalue(res, 0, 1), deps);
    assert_string_equal(PQgetvalue(res, 0, 2), "2");
    assert_string_equal(PQgetvalue(res, 0, 3), "a3bb189e-8bf9-3888-9912-ace4e6543002");
    assert_string_equal(PQgetvalue(res, 0, 4), "failed");
    assert_string_equal(PQgetvalue(res, 0, 5), "bad \"quote\" and \xc3\xa9");
    assert_string_equal(PQgetvalue(res, 0, 6), "2");
    assert_string_equal(PQgetvalue(res, 0, 7), "t");
    PQclear(res);
    /* A task whose dependency list contains a given task: the query the scheduler needs. */
    res = PQexec(conn, "SELECT count(*) FROM tasks WHERE "
                       "'1b4e28ba-2fa1-11d2-883f-0016d3cca427'::uuid = ANY(dependencies)");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
    exec_ok(conn, "DROP TABLE tasks");
    PQfinish(conn);
}

static void
test_pg_createdb_gives_a_fresh_database(void **state)
{
    char url[256];
    char buf[128];
    PGconn *conn = NULL;

    (void)state;
    assert_int_equal(weft_test_pg_createdb(server, "weft_fresh", url, sizeof(url)), 0);
    assert_true(strstr(url, "/weft_fresh") != NULL);
    conn = connect_to(url);
    assert_string_equal(query_value(conn, "SELECT current_database()", buf, sizeof(buf)),
                        "weft_fresh");
    assert_string_equal(query_value(conn,
                                    "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                                    buf, sizeof(buf)),
                        "0");
    PQfinish(conn);
    assert_int_equal(weft_test_pg_createdb(server, "Bad-Name", url, sizeof(url)), -1);
}

/* A server that cannot start fails with an error naming its log and quoting it; the data is
 * gone, the logs stay for whoever reads the error. */
static void
test_pg_failed_start_names_the_log(void **state)
{
    static const char *const settings[] = {"shared_buffers = 'plenty'", NULL};
    char err[4096];
    char dir[512];
    const char *see = NULL;
    const char *end = NULL;
    struct stat st;
    struct weft_test_pg *pg = weft_test_pg_start(settings, err, sizeof(err));

    (void)state;
    assert_null(pg);
    print_message("the error reads: %s\n", err);
    see = strstr(err, "; see ");
    assert_non_null(see);
    end = strstr(see, "/postgres.log");
    assert_non_null(end);
    assert_true(strstr(err, "shared_buffers") != NULL); /* the log's FATAL line is quoted */
    snprintf(dir, sizeof(dir), "%.*s", (int)(end - see - 6), see + 6);
    assert_int_equal(stat(dir, &st), 0);
    {
        char data[600];

        snprintf(data, sizeof(data), "%s/data", dir);
        assert_int_not_equal(stat(data, &st), 0);
    }
    assert_int_equal(weft_test_rm_rf(dir), 0);
}

static void
test_pg_missing_binaries_fail_clearly(void **state)
{
    char err[1024];
    struct weft_test_pg *pg = NULL;

    (void)state;
    weft_test_setenv("WEFT_TEST_PG_BINDIR", "/nonexistent/pg/bin");
    pg = weft_test_pg_start(NULL, err, sizeof(err));
    weft_test_setenv("WEFT_TEST_PG_BINDIR", NULL);
    assert_null(pg);
    assert_true(strstr(err, "/nonexistent/pg/bin/initdb not found") != NULL);
    assert_true(strstr(err, "postgresql-15") != NULL);
}

static void
test_pg_stop_leaves_nothing_behind(void **state)
{
    char err[2048];
    char dir[512];
    char url[128];
    struct weft_test_pg *pg = weft_test_pg_start(NULL, err, sizeof(err));
    pid_t pid = 0;
    PGconn *conn = NULL;
    long t0 = 0;

    (void)state;
    if (pg == NULL) {
        fail_msg("%s", err);
    }
    snprintf(dir, sizeof(dir), "%s", weft_test_pg_dir(pg));
    snprintf(url, sizeof(url), "%s", weft_test_pg_url(pg));
    pid = postmaster_pid(dir);
    t0 = weft_test_now_ms();
    assert_int_equal(weft_test_pg_stop(pg), 0);
    print_message("PostgreSQL stopped in %ld ms\n", weft_test_now_ms() - t0);
    assert_true(wait_gone(pid, dir, 5000));
    conn = PQconnectdb(url);
    assert_int_not_equal(PQstatus(conn), CONNECTION_OK);
    PQfinish(conn);
}

/* A test that dies with its server running: the guard stops the server and removes its
 * directory. The "test" here is a forked child that starts a server and exits at once. */
static void
test_pg_guard_cleans_up_after_a_dead_test(void **state)
{
    int fds[2];
    char line[600] = "";
    char dir[512] = "";
    long pid = 0;
    pid_t child = 0;
    FILE *fp = NULL;
    int status = 0;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char err[2048];
        struct weft_test_pg *pg = NULL;

        close(fds[0]);
        pg = weft_test_pg_start(NULL, err, sizeof(err));
        if (pg != NULL) {
            dprintf(fds[1], "%ld %s\n", (long)postmaster_pid(weft_test_pg_dir(pg)),
                    weft_test_pg_dir(pg));
        }
        _exit(pg != NULL ? 0 : 1); /* dies without weft_test_pg_stop */
    }
    close(fds[1]);
    fp = fdopen(fds[0], "r");
    assert_non_null(fp);
    if (fgets(line, sizeof(line), fp) == NULL) {
        line[0] = '\0';
    }
    fclose(fp);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(sscanf(line, "%ld %511s", &pid, dir), 2);
    assert_true(pid > 0);
    assert_true(wait_gone((pid_t)pid, dir, 20000));
}

int
main(void)
{
    const struct CMUnitTest with_server[] = {
        cmocka_unit_test(test_pg_listens_on_loopback_only_as_postgres),
        cmocka_unit_test(test_pg_table_insert_select_round_trip),
        cmocka_unit_test(test_pg_uuid_array_and_jsonb_round_trip),
        cmocka_unit_test(test_pg_createdb_gives_a_fresh_database),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_pg_failed_start_names_the_log),
        cmocka_unit_test(test_pg_missing_binaries_fail_clearly),
        cmocka_unit_test(test_pg_stop_leaves_nothing_behind),
        cmocka_unit_test(test_pg_guard_cleans_up_after_a_dead_test),
    };
    int failed = cmocka_run_group_tests_name("pg_server", with_server, start_server, stop_server);

    failed += cmocka_run_group_tests_name("pg_server_lifecycle", alone, NULL, NULL);
    return failed;
}
