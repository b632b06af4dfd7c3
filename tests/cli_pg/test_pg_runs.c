/* tests/cli_pg/test_pg_runs.c - `weft` with its state in a real PostgreSQL 15
 * (WEFT_STATE_URL=postgresql://...), end to end with the built binary as child processes:
 * - `weft run` of examples/code_review/workflow.json leaves its workflows row with
 *   final_status, total_reward and the user prompt, and tasks rows with the design's statuses,
 *   rewards and feedback_notes; `weft runs`, `weft run show` (also --json) read it back, and
 *   its per-run metric snapshot is stored in run_metrics and weft serve's fold of it
 *   (weft_runtime_metrics_from_store) has the agent invocations, LLM calls, tokens and span
 *   counts its --json summary printed; no SQLite state file is written anywhere, and nothing
 *   warns that snapshots are not kept;
 * - a `kill -9` of `weft run` mid-run: `weft runs` marks it interrupted (final_status paused)
 *   and `weft resume` completes it from PostgreSQL without running a completed step again;
 *   the fold has the killed run's invocations up to its last checkpoint, then the resumed
 *   attempt's added to them (every step once);
 * - a state URL nobody answers at fails `weft run` with the URL (password hidden) and exit 1.
 * One server for the file, a fresh database and WEFT_HOME per test. A server that cannot start
 * fails the file: it never skips. */
#include "support/pg_server.h"
#include "support/weft_test.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define EXAMPLE    WEFT_SOURCE_DIR "/examples/code_review/workflow.json"
#define MAX_OUTPUT (1u << 16)
#define STEPS      6
#define WAIT_MS    20000 /* bound on any wait for a condition */

static struct weft_test_pg *server;
static unsigned databases;

struct fixture {
    char dir[64];
    char url[256];
    char wf[128];
    PGconn *conn;
    char out[MAX_OUTPUT];
    char err[MAX_OUTPUT];
};

struct run {
    int status;
    const char *out;
    const char *err;
};

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
    struct fixture *f = calloc(1, sizeof(*f));
    char name[32];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-pgruns-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->wf, sizeof(f->wf), "%s/wf.json", f->dir);
    snprintf(name, sizeof(name), "r%u", ++databases);
    if (weft_test_pg_createdb(server, name, f->url, sizeof(f->url)) != 0) {
        fail_msg("createdb: %s", f->url);
    }
    f->conn = PQconnectdb(f->url);
    if (PQstatus(f->conn) != CONNECTION_OK) {
        fail_msg("connect %s: %s", f->url, PQerrorMessage(f->conn));
    }
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("WEFT_STATE_URL", f->url);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_setenv("WEFT_STATE_URL", NULL);
    PQfinish(f->conn);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
read_file(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    assert_non_null(fp);
    n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Start the weft binary with @p args (NULL-terminated); its output goes to files named by
 * @p tag in the fixture's directory. */
static pid_t
spawn_weft(struct fixture *f, const char *tag, const char *const *args)
{
    char out_path[160];
    char err_path[160];
    char *argv[24];
    size_t argc = 0;
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;

    snprintf(out_path, sizeof(out_path), "%s/%s.out", f->dir, tag);
    snprintf(err_path, sizeof(err_path), "%s/%s.err", f->dir, tag);
    argv[argc++] = (char *)WEFT_BIN;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 23);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    return pid;
}

static struct run
wait_weft(struct fixture *f, const char *tag, pid_t pid)
{
    char path[160];
    int status = 0;
    struct run r = {0};

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    snprintf(path, sizeof(path), "%s/%s.out", f->dir, tag);
    read_file(path, f->out, sizeof(f->out));
    snprintf(path, sizeof(path), "%s/%s.err", f->dir, tag);
    read_file(path, f->err, sizeof(f->err));
    r.status = WEXITSTATUS(status);
    r.out = f->out;
    r.err = f->err;
    return r;
}

#define RUN(f, ...) \
    wait_weft((f), "cmd", spawn_weft((f), "cmd", (const char *const[]){__VA_ARGS__, NULL}))

/* The first column of the first row of @p sql, "$1" bound to @p arg (may be NULL), as text into
 * @p out ("" for NULL or no row). */
static const char *
query_text(struct fixture *f, const char *sql, const char *arg, char *out, size_t len)
{
    const char *params[1] = {arg};
    PGresult *res = PQexecParams(f->conn, sql, arg != NULL ? 1 : 0, NULL, params, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQerrorMessage(f->conn));
    }
    out[0] = '\0';
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    return out;
}

static long long
query_int(struct fixture *f, const char *sql, const char *arg)
{
    char buf[64];

    query_text(f, sql, arg, buf, sizeof(buf));
    return buf[0] != '\0' ? strtoll(buf, NULL, 10) : -1;
}

/* A count that may not be readable yet (the run has not created the tables): -1 then. */
static long long
poll_count(struct fixture *f, const char *sql)
{
    PGresult *res = PQexec(f->conn, sql);
    long long n = -1;

    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    }
    PQclear(res);
    return n;
}

static void
pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* No SQLite state anywhere under WEFT_HOME (nor in the working directory's .weft). */
static void
assert_no_state_file(struct fixture *f)
{
    char path[160];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/state.db", f->dir);
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_not_equal(stat(".weft/state.db", &sb), 0);
}

/* The sum of every sample of family @p name whose labels contain @p label (NULL: all). */
static double
metric(const char *text, const char *name, const char *label)
{
    size_t n = strlen(name);
    double total = 0;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const char *value = NULL;

        if (strncmp(line, name, n) == 0 && (line[n] == '{' || line[n] == ' ')) {
            value = line[n] == '{' ? strstr(line, "} ") : line + n;
            if (value != NULL && (end == NULL || value < end) &&
                (label == NULL ||
                 (line[n] == '{' && strstr(line, label) != NULL && strstr(line, label) < value))) {
                total += strtod(value + (line[n] == '{' ? 2 : 1), NULL);
            }
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return total;
}

/* Agent invocations by agent and outcome, counted from the --json summary's steps, are what
 * the fold says. */
static void
assert_summary_agrees(const char *text, json_t *summary)
{
    json_t *counts = json_object();
    json_t *v = NULL;
    const char *key = NULL;
    size_t i = 0;

    json_array_foreach(json_object_get(summary, "steps"), i, v)
    {
        const char *st = json_string_value(json_object_get(v, "status"));
        char k[256];

        if (strcmp(json_string_value(json_object_get(v, "executor")), "agent") != 0 ||
            (strcmp(st, "completed") != 0 && strcmp(st, "failed") != 0)) {
            continue;
        }
        snprintf(k, sizeof(k), "gen_ai_agent_name=\"%s\",outcome=\"%s\"",
                 json_string_value(json_object_get(v, "agent")),
                 strcmp(st, "completed") == 0 ? "success" : "failure");
        json_object_set_new(counts, k,
                            json_integer(json_integer_value(json_object_get(counts, k)) + 1));
    }
    assert_true(json_object_size(counts) >= 3);
    json_object_foreach(counts, key, v)
    {
        if (metric(text, "weft_agent_invocations_total", key) != (double)json_integer_value(v)) {
            fail_msg("invocations {%s}: summary %lld, fold %g", key,
                     (long long)json_integer_value(v),
                     metric(text, "weft_agent_invocations_total", key));
        }
    }
    json_decref(counts);
}

/* The fold's invocations of agent "a" (the chain's). */
static double
folded_invocations(struct fixture *f)
{
    struct weft_meter *meter = NULL;
    char *text = NULL;
    size_t len = 0;
    double n = 0;

    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_from_store(meter, f->url));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    n = metric(text, "weft_agent_invocations_total", "gen_ai_agent_name=\"a\",outcome=\"success\"");
    free(text);
    weft_meter_free(meter);
    return n;
}

static void
test_pg_run_of_the_code_review_example(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char buf[512];
    struct run r;
    json_t *doc = NULL;
    struct weft_meter *meter = NULL;
    json_t *summary = NULL;
    char *text = NULL;
    size_t len = 0;

    r = RUN(f, "run", EXAMPLE, "--input", "Add a login endpoint to the user service", "--json",
            "--no-trace");
    if (r.status != 0) {
        fail_msg("weft run exited %d: %s", r.status, r.err);
    }
    assert_no_state_file(f);
    /* Per-run metric snapshots are kept in PostgreSQL: no warning that they are not, no error. */
    assert_null(strstr(r.err, "kept only in a SQLite"));
    assert_null(strstr(r.err, "run metrics"));
    summary = json_loads(r.out, 0, NULL);
    assert_non_null(summary);

    /* The run's workflows row. */
    query_text(f, "SELECT run_id FROM workflows", NULL, id, sizeof(id));
    assert_int_equal(strlen(id), 12);
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM workflows WHERE run_id = $1 AND"
                               " final_status = 'success' AND status = 'completed' AND"
                               " total_reward > 0 AND user_prompt = 'Add a login endpoint to the"
                               " user service' AND workflow = 'code-review' AND ended_ns >"
                               " started_ns AND owner_token IS NULL",
                               id),
                     1);
    /* Its tasks: every step succeeded with a reward and the success notes; the loop-back
     * steps the reviewer asked for are there, in plan order. */
    assert_true(query_int(f, "SELECT count(*) FROM tasks", NULL) >= 4);
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM tasks WHERE status <> 'success' OR reward IS"
                               " NULL OR feedback_notes->>'status' <> 'success' OR"
                               " feedback_notes->>'stdout' IS NULL OR step_status <> 'completed'",
                               NULL),
                     0);
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM tasks t JOIN workflows w USING (workflow_id)"
                               " WHERE w.run_id = $1 AND t.executor_type = 'agent' AND"
                               " t.description <> '' AND t.retries = 0",
                               id),
                     query_int(f, "SELECT count(*) FROM tasks", NULL));
    query_text(f, "SELECT string_agg(agent, ',' ORDER BY task_order) FROM tasks", NULL, buf,
               sizeof(buf));
    assert_true(strncmp(buf, "architect,codesmith,reviewer,fixer", 34) == 0);
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM tasks t WHERE cardinality(t.dependencies) <>"
                               " jsonb_array_length(t.depends_on::jsonb)",
                               NULL),
                     0);
    assert_true(query_int(f, "SELECT count(*) FROM llm_exchanges WHERE run_id = $1", id) > 0);

    /* Read back through the CLI. */
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, id));
    assert_non_null(strstr(r.out, "completed"));
    r = RUN(f, "run", "show", id);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "architect"));
    assert_non_null(strstr(r.out, "reviewer"));
    r = RUN(f, "run", "show", "last", "--json");
    assert_int_equal(r.status, 0);
    doc = json_loads(r.out, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "run"), "run_id")),
                        id);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "run"), "status")),
                        "completed");
    assert_int_equal((long long)json_array_size(json_object_get(doc, "steps")),
                     query_int(f, "SELECT count(*) FROM tasks", NULL));
    json_decref(doc);

    /* weft serve's numbers: the run's own snapshot (attempt 0) in run_metrics, folded, says
     * what the run's --json summary said. */
    assert_true(
        query_int(f, "SELECT count(*) FROM run_metrics WHERE run_id = $1 AND attempt = 0", id) > 0);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_from_store(meter, f->url));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    assert_summary_agrees(text, summary);
    assert_true(metric(text, "weft_runs_total", "status=\"completed\",workflow=\"code-review\"") ==
                1.0);
    assert_true(metric(text, "gen_ai_client_operation_duration_seconds_count", NULL) ==
                (double)json_integer_value(json_object_get(summary, "llm_calls")));
    assert_true(metric(text, "gen_ai_client_token_usage_sum", "gen_ai_token_type=\"input\"") ==
                (double)json_integer_value(json_object_get(summary, "input_tokens")));
    /* Span counts were saved after the run's provider shut down (self-only rows). */
    assert_true(
        metric(text, "weft_spans_ended", NULL) ==
        (double)json_integer_value(json_object_get(json_object_get(summary, "spans"), "recorded")));
    free(text);
    weft_meter_free(meter);
    json_decref(summary);
    assert_no_state_file(f);
}

static void
write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A chain of STEPS agent steps s0 -> s1 -> ...; every answer takes @p delay_ms. */
static void
write_chain(struct fixture *f, int delay_ms)
{
    char path[160];
    char text[4096];
    size_t n = 0;

    n += (size_t)snprintf(text + n, sizeof(text) - n,
                          "{\"version\": 1, \"responses\": {\"a\": {\"act\": [");
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"content\": \"done %d\", \"delay_ms\": %d}", i > 0 ? ", " : "",
                              i, delay_ms);
    }
    snprintf(text + n, sizeof(text) - n, "]}}}");
    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    write_text(path, text);
    n = (size_t)snprintf(text, sizeof(text),
                         "{\"name\": \"chain\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                         " \"plan\": [");
    for (int i = 0; i < STEPS; i++) {
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%s{\"id\": \"s%d\", \"agent\": \"a\", \"task\": \"Step %d\"",
                              i > 0 ? ", " : "", i, i);
        if (i > 0) {
            n += (size_t)snprintf(text + n, sizeof(text) - n, ", \"depends_on\": [\"s%d\"]", i - 1);
        }
        n += (size_t)snprintf(text + n, sizeof(text) - n, "}");
    }
    snprintf(text + n, sizeof(text) - n, "]}\n");
    write_text(f->wf, text);
}

static void
test_pg_resume_of_a_killed_run(void **state)
{
    struct fixture *f = *state;
    char id[64];
    char ended[STEPS][32];
    char uuids[2][64];
    pid_t pid = 0;
    struct run r;

    /* 1.1 s a step: s1 ends over a snapshot interval (1 s) after s0, so its checkpoint writes
     * while s2 is in flight. */
    write_chain(f, 1100);
    pid = spawn_weft(f, "run", (const char *const[]){"run", f->wf, "-q", "--no-trace", NULL});
    for (int waited = 0;
         poll_count(
             f, "SELECT count(*) FROM tasks WHERE step_id = 's2' AND status = 'in_progress'") < 1;
         waited += 10) {
        if (waited > WAIT_MS) {
            fail_msg("timed out waiting for step s2 to start");
        }
        pause_ms(10);
    }
    /* The two finished steps' invocations are stored (by the checkpoint after s1, or by the
     * flusher one interval later) before the kill. */
    for (int waited = 0; poll_count(f, "SELECT COALESCE(SUM(value), 0)::bigint FROM run_metrics"
                                       " WHERE name = 'weft.agent.invocations'") < 2;
         waited += 10) {
        if (waited > WAIT_MS) {
            fail_msg("timed out waiting for the run's metric snapshot");
        }
        pause_ms(10);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &(int){0}, 0), pid);
    query_text(f, "SELECT run_id FROM workflows", NULL, id, sizeof(id));
    assert_int_equal(query_int(f, "SELECT count(*) FROM tasks WHERE status = 'success'", NULL), 2);
    /* Killed: its metrics up to its last checkpoint, s0 and s1. */
    assert_true(folded_invocations(f) == 2.0);
    for (int k = 0; k < STEPS; k++) {
        char step[8];
        snprintf(step, sizeof(step), "s%d", k);
        query_text(f, "SELECT ended_ns FROM tasks WHERE status = 'success' AND step_id = $1", step,
                   ended[k], sizeof(ended[k]));
    }
    query_text(f, "SELECT task_id FROM tasks WHERE step_id = 's0'", NULL, uuids[0],
               sizeof(uuids[0]));

    /* `weft runs` marks it interrupted: final_status paused, owner gone. */
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "interrupted"));
    assert_non_null(strstr(r.err, "was interrupted"));
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM workflows WHERE status = 'interrupted' AND"
                               " final_status = 'paused' AND owner_token IS NULL AND run_id = $1",
                               id),
                     1);

    /* Resume completes it from PostgreSQL; no completed step ran again. */
    r = RUN(f, "resume", id, "-q", "--no-trace");
    if (r.status != 0) {
        fail_msg("weft resume exited %d: %s", r.status, r.err);
    }
    assert_int_equal(query_int(f,
                               "SELECT count(*) FROM workflows WHERE status = 'completed' AND"
                               " final_status = 'success' AND owner_token IS NULL AND run_id = $1",
                               id),
                     1);
    assert_int_equal(query_int(f, "SELECT count(*) FROM tasks WHERE status = 'success'", NULL),
                     STEPS);
    assert_int_equal(query_int(f, "SELECT count(*) FROM llm_exchanges WHERE run_id = $1", id),
                     STEPS);
    for (int k = 0; k < 2; k++) {
        char step[8];
        char now[32];
        snprintf(step, sizeof(step), "s%d", k);
        query_text(f, "SELECT ended_ns FROM tasks WHERE attempts = 1 AND step_id = $1", step, now,
                   sizeof(now));
        assert_string_equal(now, ended[k]);
    }
    /* The tasks kept their ids across the resume. */
    query_text(f, "SELECT task_id FROM tasks WHERE step_id = 's0'", NULL, uuids[1],
               sizeof(uuids[1]));
    assert_string_equal(uuids[0], uuids[1]);
    assert_int_equal(query_int(f, "SELECT count(*) FROM tasks", NULL), STEPS);
    /* The resume wrote attempt 1 beside the killed attempt 0; they add up to every step once. */
    assert_int_equal(
        query_int(f, "SELECT count(DISTINCT attempt) FROM run_metrics WHERE run_id = $1", id), 2);
    assert_true(folded_invocations(f) == (double)STEPS);
    assert_null(strstr(r.err, "kept only in a SQLite"));
    assert_no_state_file(f);
}

/* A URL nobody answers at: `weft run` fails naming it, with its password hidden, and writes no
 * SQLite state instead. */
static void
test_pg_unreachable_state_url_fails_the_run(void **state)
{
    struct fixture *f = *state;
    struct run r;

    write_chain(f, 0);
    weft_test_setenv("WEFT_STATE_URL",
                     "postgresql://weft:hunter2secret@127.0.0.1:1/weft?connect_timeout=2");
    r = RUN(f, "run", f->wf, "-q", "--no-trace");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "postgresql://weft:****@127.0.0.1:1/weft"));
    assert_null(strstr(r.err, "hunter2secret"));
    assert_null(strstr(r.out, "hunter2secret"));
    assert_no_state_file(f);
    r = RUN(f, "runs");
    assert_int_not_equal(r.status, 0);
    assert_null(strstr(r.err, "hunter2secret"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pg_run_of_the_code_review_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_resume_of_a_killed_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_unreachable_state_url_fails_the_run, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, start_server, stop_server);
}
