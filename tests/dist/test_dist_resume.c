/* tests/dist/test_dist_resume.c - the orchestrator of a distributed run killed with SIGKILL
 * while its tasks run on a worker, against a real RabbitMQ broker and a real PostgreSQL 15
 * started by the test: the worker finishes the tasks and publishes their results with no
 * orchestrator listening; `weft resume` reads the run from PostgreSQL, submits the tasks that
 * were in flight again as the same task and attempt, takes the results that waited on the
 * queue without running the tasks again, and completes the run. A server that cannot start
 * fails the file: it never skips. */
#include "support/amqp_server.h"
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct weft_test_amqp *broker;
static struct weft_test_pg *pg;
static char weft_bin[1024];

static int
group_setup(void **state)
{
    char err[4096];

    (void)state;
    snprintf(weft_bin, sizeof(weft_bin), "%s/weft", WEFT_BINARY_DIR);
    broker = weft_test_amqp_start(err, sizeof(err));
    if (broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1;
    }
    pg = weft_test_pg_start(NULL, err, sizeof(err));
    if (pg == NULL) {
        fprintf(stderr, "cannot start PostgreSQL: %s\n", err);
        return -1;
    }
    return 0;
}

/* The worker and the run the test started: stopped here when a failed assertion left the
 * test before it stopped them (a child's pid is not reused before it is reaped). */
static pid_t worker;
static pid_t run;

static int
group_teardown(void **state)
{
    int rc = 0;

    (void)state;
    if (worker > 0 && !weft_test_has_exited(worker, NULL)) {
        weft_test_kill_group(worker, 5000);
    }
    if (run > 0 && !weft_test_has_exited(run, NULL)) {
        weft_test_kill_group(run, 5000);
    }
    rc |= weft_test_pg_stop(pg);
    rc |= weft_test_amqp_stop(broker);
    return rc == 0 ? 0 : -1;
}

/* Two slow steps at once (each answers after 3 s) and one that joins them. */
static const char workflow[] =
    "{\"name\": \"reclaim\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
    "\"script.json\"}}, \"supervisor\": {\"timeout_s\": 120},"
    " \"agents\": [{\"name\": \"l\"}, {\"name\": \"r\"}, {\"name\": \"j\"}],"
    " \"plan\": [{\"id\": \"left\", \"agent\": \"l\", \"task\": \"the left half\"},"
    " {\"id\": \"right\", \"agent\": \"r\", \"task\": \"the right half\"},"
    " {\"id\": \"join\", \"agent\": \"j\", \"task\": \"both halves\","
    " \"depends_on\": [\"left\", \"right\"]}]}\n";
static const char script[] =
    "{\"version\": 1, \"responses\": {"
    "\"l\": {\"act\": [{\"content\": \"left done\", \"delay_ms\": 3000}]},"
    "\"r\": {\"act\": [{\"content\": \"right done\", \"delay_ms\": 3000}]},"
    "\"j\": {\"act\": [{\"content\": \"joined\"}]}}}\n";

static void
write_file(const char *dir, const char *name, const char *text)
{
    char path[700];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* How often @p needle occurs in the file at @p dir/@p name (0 when it cannot be read). */
static size_t
count_in_file(const char *dir, const char *name, const char *needle)
{
    char path[700];
    char *text = NULL;
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    text = weft_test_log_tail(path, 1u << 20);
    for (const char *p = text != NULL ? strstr(text, needle) : NULL; p != NULL;
         p = strstr(p + 1, needle)) {
        n++;
    }
    free(text);
    return n;
}

/* Wait (at most 60 s) until @p needle occurs @p n times in the file. */
static void
wait_count(const char *dir, const char *name, const char *needle, size_t n)
{
    long deadline = weft_test_now_ms() + 60000;

    while (count_in_file(dir, name, needle) < n && weft_test_now_ms() < deadline) {
        weft_test_sleep_ms(100);
    }
    if (count_in_file(dir, name, needle) < n) {
        fail_msg("%s/%s: \"%s\" seen %zu times, expected %zu", dir, name, needle,
                 count_in_file(dir, name, needle), n);
    }
}

static long long
query_int(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    long long n = -1;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return n;
}

static void
test_resume_takes_results_that_came_while_the_orchestrator_was_dead(void **state)
{
    char *dir = weft_test_mkdtemp("weft-dist-resume-");
    char home[700], url[700], prefix[64], state_url[700], db[512], wf[700], log[700];
    char run_id[80] = "";
    const char *vars[7];
    PGconn *conn = NULL;
    PGresult *res = NULL;

    (void)state;
    assert_non_null(dir);
    assert_int_equal(weft_test_pg_createdb(pg, "resume", db, sizeof(db)), 0);
    snprintf(home, sizeof(home), "WEFT_HOME=%s/home", dir);
    snprintf(url, sizeof(url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(broker));
    snprintf(prefix, sizeof(prefix), "WEFT_QUEUE_PREFIX=resume.");
    snprintf(state_url, sizeof(state_url), "WEFT_STATE_URL=%s", db);
    vars[0] = home;
    vars[1] = url;
    vars[2] = prefix;
    vars[3] = state_url;
    vars[4] = "OTEL_TRACES_EXPORTER=none";
    vars[5] = "WEFT_DEBUG=1"; /* the worker logs each task it starts and ends */
    vars[6] = NULL;
    write_file(dir, "workflow.json", workflow);
    write_file(dir, "script.json", script);
    snprintf(wf, sizeof(wf), "%s/workflow.json", dir);
    {
        const char *argv[] = {weft_bin, "worker", "--concurrency", "2", "--id", "w", NULL};
        snprintf(log, sizeof(log), "%s/w.log", dir);
        worker = weft_test_spawn(argv, vars, dir, log, true);
        assert_true(worker > 0);
    }
    {
        const char *argv[] = {weft_bin, "run", wf, "--executor", "amqp", "--no-trace", "-q", NULL};
        snprintf(log, sizeof(log), "%s/run.log", dir);
        run = weft_test_spawn(argv, vars, dir, log, true);
        assert_true(run > 0);
    }
    /* Both halves run on the worker; the orchestrator dies without a word. */
    wait_count(dir, "w.log", " started: step left ", 1);
    wait_count(dir, "w.log", " started: step right ", 1);
    kill(-run, SIGKILL);
    assert_int_equal(weft_test_wait(run, 10000), 128 + SIGKILL);
    /* The worker finishes both and publishes their results to nobody. */
    wait_count(dir, "w.log", " ended: success, result published", 2);

    conn = PQconnectdb(db);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    res = PQexec(conn, "SELECT run_id FROM workflows");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    snprintf(run_id, sizeof(run_id), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    assert_int_equal(query_int(conn, "SELECT count(*) FROM tasks WHERE status = 'dispatched'"), 2);

    {
        const char *argv[] = {weft_bin, "resume", run_id,       "--executor",
                              "amqp",   "-q",     "--no-trace", NULL};
        snprintf(log, sizeof(log), "%s/resume.log", dir);
        if (weft_test_run(argv, vars, dir, log, 120000) != 0) {
            char *tail = weft_test_log_tail(log, 4000);
            fail_msg("weft resume failed:\n%s", tail);
        }
    }
    assert_int_equal(count_in_file(dir, "resume.log", "left:l(completed)"), 1);
    assert_int_equal(count_in_file(dir, "resume.log", "join:j(completed)"), 1);
    /* Only the join went out; the halves' results were waiting and were taken as they were. */
    assert_int_equal(
        count_in_file(dir, "resume.log", "1 task(s) published, 3 result(s), 0 duplicate(s)"), 1);
    assert_int_equal(count_in_file(dir, "resume.log", "2 reclaimed"), 1);
    wait_count(dir, "w.log", " started: step join ", 1);
    assert_int_equal(count_in_file(dir, "w.log", " started: step left "), 1);
    assert_int_equal(count_in_file(dir, "w.log", " started: step right "), 1);
    /* PostgreSQL agrees: every task succeeded on its first attempt, the run too. */
    assert_int_equal(
        query_int(conn, "SELECT count(*) FROM tasks WHERE status = 'success' AND retries = 0"), 3);
    assert_int_equal(query_int(conn, "SELECT count(*) FROM workflows WHERE final_status = "
                                     "'success'"),
                     1);
    PQfinish(conn);
    kill(worker, SIGTERM);
    assert_int_equal(weft_test_wait(worker, 60000), 0);
    weft_test_rm_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_takes_results_that_came_while_the_orchestrator_was_dead),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
