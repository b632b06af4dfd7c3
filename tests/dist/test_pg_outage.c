/* tests/dist/test_pg_outage.c - a PostgreSQL outage in the middle of a run, against a real
 * PostgreSQL 15 (stopped with pg_ctl and started again on the same data and port) and, for the
 * distributed case, a real RabbitMQ broker with a `weft worker`, both started by the test.
 *
 * The plan is four side-effecting command steps a -> b -> c -> d, each appending its name to
 * a file, so the test counts executions. The database goes away while b runs and comes back
 * 10 s later: the state connection waits for it (WEFT_STATE_RECONNECT_MS, default 60 s), b's
 * result is kept and written when it returns, and the run completes with exactly four
 * executions, its stored status agreeing with its exit status and its trace. When the
 * database stays away longer than the wait, the run stops (c and d never run), says so naming
 * the database, and `weft resume` runs again only the step whose end was not stored. A server
 * that cannot start fails the file: it never skips. */
#include "support/amqp_server.h"
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUTAGE_MS 10000 /* how long the database stays away in the survived outage */

static struct weft_test_amqp *broker;
static struct weft_test_pg *pg;
static char weft_bin[1024];
static pid_t worker; /* stopped in the teardown when a failed assertion left it running */
static pid_t run;
static bool is_halted; /* a failed test left the server stopped: the next one starts it */

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

/* One test's directory, environment and workflow. */
struct env {
    char dir[512];
    char home[600];
    char broker_url[600];
    char prefix[64];
    char state_url[700];
    char db[512];
    char wf[600];
    char execs[600]; /* the file each step appends its name to */
    char go[600];    /* b waits for this file: the test lets it end while the database is away */
    const char *vars[10];
};

/* b appends, then waits (at most 60 s) for the go file; the others append and end. */
#define STEP(id, deps, wait)                                                                   \
    "{\"id\": \"" id "\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"echo $0 >> " \
    "\\\"$1\\\"" wait "\", \"" id "\", \"@EXECS@\", \"@GO@\"]" deps "}"
#define WAIT_GO                                                                                \
    "; n=0; while [ ! -e \\\"$2\\\" ]; do n=$((n+1)); [ $n -gt 1200 ] && exit 1; sleep 0.05; " \
    "done"

static const char workflow_template[] =
    "{\"name\": \"outage\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
    "\"script.json\"}}, \"supervisor\": {\"timeout_s\": 300}, \"agents\": [{\"name\": \"x\"}],"
    " \"plan\": [" STEP("a", "", "") "," STEP("b", ", \"depends_on\": [\"a\"]", WAIT_GO) "," STEP(
        "c", ", \"depends_on\": [\"b\"]", "") "," STEP("d", ", \"depends_on\": [\"c\"]", "") "]}\n";

/* @p text with every @p from replaced by @p to, into @p out. */
static void
replace_all(const char *text, const char *from, const char *to, char *out, size_t len)
{
    size_t n = 0;

    while (*text != '\0' && n + 1 < len) {
        if (strncmp(text, from, strlen(from)) == 0) {
            n += (size_t)snprintf(out + n, len - n, "%s", to);
            text += strlen(from);
        } else {
            out[n++] = *text++;
        }
    }
    assert_true(n + 1 < len);
    out[n] = '\0';
}

static void
env_init(struct env *e, const char *name, const char *reconnect_ms)
{
    char *dir = weft_test_mkdtemp("weft-pg-outage-");
    char text[4096];
    char text2[4096];
    size_t k = 0;

    assert_non_null(dir);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    free(dir);
    if (is_halted) {
        assert_int_equal(weft_test_pg_restart(pg, text, sizeof(text)), 0);
        is_halted = false;
    }
    assert_int_equal(weft_test_pg_createdb(pg, name, e->db, sizeof(e->db)), 0);
    snprintf(e->home, sizeof(e->home), "WEFT_HOME=%s/home", e->dir);
    snprintf(e->broker_url, sizeof(e->broker_url), "WEFT_BROKER_URL=%s",
             weft_test_amqp_url(broker));
    snprintf(e->prefix, sizeof(e->prefix), "WEFT_QUEUE_PREFIX=%s.", name);
    snprintf(e->state_url, sizeof(e->state_url), "WEFT_STATE_URL=%s", e->db);
    snprintf(e->execs, sizeof(e->execs), "%s/executions", e->dir);
    snprintf(e->go, sizeof(e->go), "%s/go", e->dir);
    snprintf(e->wf, sizeof(e->wf), "%s/workflow.json", e->dir);
    e->vars[k++] = e->home;
    e->vars[k++] = e->broker_url;
    e->vars[k++] = e->prefix;
    e->vars[k++] = e->state_url;
    e->vars[k++] = "WEFT_DEBUG=1"; /* the worker logs each task; the state logs its waits */
    e->vars[k++] = reconnect_ms;   /* NULL: the default wait */
    e->vars[k] = NULL;
    replace_all(workflow_template, "@EXECS@", e->execs, text, sizeof(text));
    replace_all(text, "@GO@", e->go, text2, sizeof(text2));
    weft_test_write_file(e->dir, "workflow.json", text2);
    weft_test_write_file(e->dir, "script.json", "{\"version\": 1, \"responses\": {}}\n");
}

/* The lines of the executions file, joined ("a b c d"), into @p out. */
static void
executions(const struct env *e, char *out, size_t len)
{
    FILE *f = fopen(e->execs, "r");
    char line[64];
    size_t n = 0;

    out[0] = '\0';
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        n += (size_t)snprintf(out + n, len > n ? len - n : 0, "%s%s", n > 0 ? " " : "", line);
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* Wait (at most 60 s) until the executions are @p want. */
static void
wait_executions(const struct env *e, const char *want)
{
    long deadline = weft_test_now_ms() + 60000;
    char got[256];

    executions(e, got, sizeof(got));
    while (strcmp(got, want) != 0 && weft_test_now_ms() < deadline) {
        weft_test_sleep_ms(50);
        executions(e, got, sizeof(got));
    }
    if (strcmp(got, want) != 0) {
        fail_msg("executions: \"%s\", expected \"%s\"", got, want);
    }
}

/* Wait (at most 30 s) until the run noticed the database was away: its log says it waits,
 * or says a write failed, or a step after b ran. */
static void
wait_noticed(const struct env *e, const char *log)
{
    long deadline = weft_test_now_ms() + 30000;
    char got[256];

    for (;;) {
        executions(e, got, sizeof(got));
        if (weft_test_file_contains(log, "waiting up to") ||
            weft_test_file_contains(log, "failed on postgresql://") || strcmp(got, "a b") != 0) {
            return;
        }
        if (weft_test_now_ms() >= deadline) {
            char *tail = weft_test_log_tail(log, 3000);
            fail_msg("%s: the run did not notice the outage; it ends:\n%s", log, tail);
        }
        weft_test_sleep_ms(50);
    }
}

static char *
query_text(const char *db, const char *sql)
{
    PGconn *conn = PQconnectdb(db);
    PGresult *res = NULL;
    char *out = NULL;

    if (PQstatus(conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", db, PQerrorMessage(conn));
    }
    res = PQexec(conn, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    }
    out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(conn);
    assert_non_null(out);
    return out;
}

static void
assert_query(const char *db, const char *sql, const char *want)
{
    char *got = query_text(db, sql);

    if (strcmp(got, want) != 0) {
        fail_msg("%s: \"%s\", expected \"%s\"", sql, got, want);
    }
    free(got);
}

/* Start the run (and for @p is_amqp a worker), take the database away while b runs and end b
 * meanwhile; the state then waits for the database. @return when the database went away
 * (weft_test_now_ms()). */
static long
start_and_break(struct env *e, bool is_amqp, const char *run_log)
{
    long halted = 0;

    if (is_amqp) {
        const char *argv[] = {weft_bin, "worker", "--concurrency", "1", "--id", "w", NULL};
        char log[700];

        snprintf(log, sizeof(log), "%s/w.log", e->dir);
        worker = weft_test_spawn(argv, e->vars, e->dir, log, true);
        assert_true(worker > 0);
    }
    {
        const char *argv[] = {weft_bin, "run", e->wf, "--executor", is_amqp ? "amqp" : "in_process",
                              "-q",     NULL};
        run = weft_test_spawn(argv, e->vars, e->dir, run_log, true);
        assert_true(run > 0);
    }
    wait_executions(e, "a b");
    assert_int_equal(weft_test_pg_halt(pg), 0);
    is_halted = true;
    halted = weft_test_now_ms();
    weft_test_write_file(e->dir, "go", "");
    /* b ended with the database away: its save is what waits. */
    wait_noticed(e, run_log);
    return halted;
}

static void
outage_survived(bool is_amqp, const char *name)
{
    struct env e;
    char run_log[700];
    char err[4096];
    char *run_id = NULL;
    long halted = 0;
    int status = 0;

    env_init(&e, name, NULL);
    snprintf(run_log, sizeof(run_log), "%s/run.log", e.dir);
    halted = start_and_break(&e, is_amqp, run_log);
    /* The outage lasts OUTAGE_MS: its length is the scenario, not a synchronisation. */
    if (weft_test_now_ms() - halted < OUTAGE_MS) {
        weft_test_sleep_ms(OUTAGE_MS - (weft_test_now_ms() - halted));
    }
    /* Nothing ran after b while the database was away. */
    executions(&e, err, sizeof(err));
    assert_string_equal(err, "a b");
    assert_int_equal(weft_test_pg_restart(pg, err, sizeof(err)), 0);
    is_halted = false;

    status = weft_test_wait(run, 90000);
    if (status != 0) {
        char *tail = weft_test_log_tail(run_log, 4000);
        fail_msg("weft run exited %d:\n%s", status, tail);
    }
    run = 0;
    assert_true(weft_test_file_contains(run_log, "reconnected after"));
    /* Exactly four executions: nothing ran twice. */
    executions(&e, err, sizeof(err));
    assert_string_equal(err, "a b c d");
    /* The stored run agrees with the exit status: completed, every step once and done. */
    run_id = query_text(e.db, "SELECT run_id FROM workflows");
    assert_query(e.db, "SELECT status || ' ' || final_status FROM workflows", "completed success");
    assert_query(e.db,
                 "SELECT string_agg(step_id || ':' || step_status || ':' || attempts, ' '"
                 " ORDER BY task_order) FROM tasks",
                 "a:completed:1 b:completed:1 c:completed:1 d:completed:1");
    /* And with the trace: the run's root span ended OK, completed (`weft trace show RUN_ID`). */
    {
        const char *argv[] = {weft_bin, "trace", "show", run_id, NULL};
        char log[700];

        snprintf(log, sizeof(log), "%s/trace.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 30000), 0);
        if (!weft_test_file_contains(log, "invoke_workflow outage") ||
            !weft_test_file_contains(log, " ok  weft.run.status=completed")) {
            char *tail = weft_test_log_tail(log, 4000);
            fail_msg("weft trace show %s:\n%s", run_id, tail);
        }
    }
    if (is_amqp) {
        /* The worker is still up, and the coordinator took each result once. */
        assert_false(weft_test_has_exited(worker, NULL));
        assert_true(weft_test_file_contains(run_log, "4 task(s) published, 4 result(s), 0 "
                                                     "duplicate(s)"));
        weft_test_kill_group(worker, 30000);
        worker = 0;
    }
    free(run_id);
    weft_test_rm_rf(e.dir);
}

static void
test_outage_during_a_distributed_run_runs_each_step_once(void **state)
{
    (void)state;
    outage_survived(true, "dist");
}

static void
test_outage_during_an_in_process_run_runs_each_step_once(void **state)
{
    (void)state;
    outage_survived(false, "local");
}

/* An outage longer than the wait (1 s here): the run stops without running c or d, says the
 * database is gone, and a resume once it is back runs only b again (its end was not stored). */
static void
test_outage_longer_than_the_wait_stops_and_resume_reruns_only_the_unsaved(void **state)
{
    struct env e;
    char run_log[700];
    char err[4096];
    char *run_id = NULL;
    int status = 0;

    (void)state;
    env_init(&e, "long", "WEFT_STATE_RECONNECT_MS=1000");
    snprintf(run_log, sizeof(run_log), "%s/run.log", e.dir);
    start_and_break(&e, false, run_log);
    status = weft_test_wait(run, 60000);
    run = 0;
    assert_int_equal(status, 1);
    assert_true(weft_test_file_contains(run_log, "could not be made again within 1000 ms"));
    executions(&e, err, sizeof(err));
    assert_string_equal(err, "a b"); /* c and d never ran */
    assert_int_equal(weft_test_pg_restart(pg, err, sizeof(err)), 0);
    is_halted = false;

    run_id = query_text(e.db, "SELECT run_id FROM workflows");
    {
        const char *argv[] = {weft_bin, "resume", run_id, "-q", NULL};
        char log[700];

        snprintf(log, sizeof(log), "%s/resume.log", e.dir);
        if (weft_test_run(argv, e.vars, e.dir, log, 90000) != 0) {
            char *tail = weft_test_log_tail(log, 4000);
            fail_msg("weft resume failed:\n%s", tail);
        }
    }
    /* a's end was stored before the outage: not run again; b's was not: run again. */
    executions(&e, err, sizeof(err));
    assert_string_equal(err, "a b b c d");
    assert_query(e.db, "SELECT status FROM workflows", "completed");
    free(run_id);
    weft_test_rm_rf(e.dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outage_during_a_distributed_run_runs_each_step_once),
        cmocka_unit_test(test_outage_during_an_in_process_run_runs_each_step_once),
        cmocka_unit_test(test_outage_longer_than_the_wait_stops_and_resume_reruns_only_the_unsaved),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
