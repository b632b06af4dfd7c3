/* tests/dist/test_dist_eval.c - `weft eval --executor amqp` against a real RabbitMQ and a real
 * PostgreSQL state started by the test: an experiment of 12 items of examples/support_triage
 * (a dataset from a file, kept in PostgreSQL) with --concurrency 4 runs each item's steps on two
 * `weft worker` processes; every item passes, every item run completed and its steps are in the
 * workers' logs (none ran in the eval process), item runs overlapped in time (their stored
 * start and end), and no result was lost or misrouted: each run's own results queue is gone at
 * the end, the shared results queue and the dead letters are empty, and no worker fell back to
 * the shared queue. Every span of every item's trace, the workers' (their CONSUMER spans and the
 * agent, chat and tool spans under them) as much as the eval process's, carries Langfuse's
 * experiment attributes, the root span's id among them (the task messages' "span_attrs"): all
 * processes record into the PostgreSQL span store, read back with `weft trace show --json`. */
#include "support/amqp_server.h"
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct weft_test_amqp *broker;
static struct weft_test_pg *pg;
static char weft_bin[1024];
static pid_t workers[2];

static int
group_setup(void **state)
{
    char err[1024];

    (void)state;
    snprintf(weft_bin, sizeof(weft_bin), "%s/weft", WEFT_BINARY_DIR);
    broker = weft_test_amqp_start(err, sizeof(err));
    if (broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1; /* fails the group: never a silent skip */
    }
    pg = weft_test_pg_start(NULL, err, sizeof(err));
    if (pg == NULL) {
        fprintf(stderr, "cannot start PostgreSQL: %s\n", err);
        weft_test_amqp_stop(broker);
        return -1;
    }
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        if (workers[i] > 0 && !weft_test_has_exited(workers[i], NULL)) {
            weft_test_kill_group(workers[i], 5000);
        }
    }
    weft_test_pg_stop(pg);
    return weft_test_amqp_stop(broker) == 0 ? 0 : -1;
}

#define ITEMS 12

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

/* The stored item runs: all completed, and at least two of them in flight at one moment (a
 * run started before another one ended, and ended after it started). */
static void
assert_runs_overlapped(json_t *items)
{
    PGconn *conn = PQconnectdb(weft_test_pg_url(pg));
    char ids[ITEMS * 20 + 8] = "";
    char sql[ITEMS * 20 + 512];
    size_t i = 0;
    json_t *it = NULL;
    long long overlapping = 0;

    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    json_array_foreach(items, i, it)
    {
        const char *run_id = json_string_value(json_object_get(it, "run_id"));

        assert_non_null(run_id);
        assert_true(strlen(run_id) < 16 && strspn(run_id, "0123456789abcdef") == strlen(run_id));
        snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s'%s'", i > 0 ? "," : "", run_id);
    }
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM workflows WHERE run_id IN (%s) AND status = 'completed' "
             "AND ended_ns > started_ns",
             ids);
    assert_int_equal(query_int(conn, sql), ITEMS);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM workflows a JOIN workflows b ON a.run_id < b.run_id "
             "WHERE a.run_id IN (%s) AND b.run_id IN (%s) "
             "AND a.started_ns < b.ended_ns AND b.started_ns < a.ended_ns",
             ids, ids);
    overlapping = query_int(conn, sql);
    if (overlapping < 1) {
        fail_msg("no two of the %d item runs were in flight at once (--concurrency 4)", ITEMS);
    }
    PQfinish(conn);
}

/* The queues of prefix "evaltest.": the shared results queue and the dead letters hold
 * nothing, and no run's own results queue is left (each run deleted its own at its end). */
static void
assert_queues_clean(void)
{
    const char *args[] = {"list_queues", "-q", "name", "messages", NULL};
    char *out = NULL;
    size_t seen = 0;

    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[256];
        long n = 0;

        if (sscanf(line, "%255s %ld", name, &n) != 2) {
            continue;
        }
        if (strncmp(name, "evaltest.results.", 17) == 0) {
            fail_msg("results queue %s is left after its run (%ld message(s))", name, n);
        }
        if (strcmp(name, "evaltest.task_results_queue") == 0 ||
            strcmp(name, "evaltest.task_dead_letter_queue") == 0) {
            seen++;
            if (n != 0) {
                fail_msg("%s holds %ld message(s), expected none", name, n);
            }
        }
    }
    assert_int_equal(seen, 2);
    free(out);
}

static const char *
span_attr(const json_t *span, const char *key)
{
    return json_string_value(json_object_get(json_object_get(span, "attributes"), key));
}

/* Item @p index's run @p run_id: its trace's spans each carry the experiment's attributes with
 * the root span's id; at least its three steps' CONSUMER spans and two agent and two chat spans
 * under them are the workers'. The experiment id goes in @p experiment (the first item's) and
 * the item id in @p item_ids[index] (checked to differ between items). */
static void
assert_trace_attrs(const char *const *vars,
                   const char *dir,
                   const char *run_id,
                   size_t index,
                   char *experiment,
                   char item_ids[][80])
{
    const char *argv[] = {weft_bin, "trace", "show", run_id, "--json", NULL};
    char log[700];
    char *out = NULL;
    json_t *doc = NULL;
    json_t *spans = NULL;
    json_t *span = NULL;
    json_t *worker_spans = json_object(); /* ids of the workers' spans */
    const char *root_id = NULL;
    const char *item_id = NULL;
    size_t i = 0;
    size_t consumers = 0, agents = 0, chats = 0;

    assert_non_null(run_id);
    snprintf(log, sizeof(log), "%s/trace-%s.json", dir, run_id);
    if (weft_test_run(argv, vars, dir, log, 60000) != 0) {
        char *text = weft_test_read_file(log);
        fail_msg("weft trace show %s: %s", run_id, text != NULL ? text : "(no output)");
    }
    out = weft_test_read_file(log);
    assert_non_null(out);
    doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(doc);
    spans = json_object_get(doc, "spans");
    assert_true(json_array_size(spans) > 6);
    span = json_array_get(spans, 0);
    assert_null(json_string_value(json_object_get(span, "parent_span_id")));
    assert_non_null(strstr(json_string_value(json_object_get(span, "name")), "invoke_workflow"));
    root_id = json_string_value(json_object_get(span, "span_id"));
    assert_non_null(root_id);
    assert_int_equal(strlen(root_id), 16);
    item_id = span_attr(span, "langfuse.experiment.item.id");
    assert_non_null(item_id);
    assert_true(item_id[0] != '\0' && strlen(item_id) < 80);
    for (size_t k = 0; k < index; k++) {
        assert_string_not_equal(item_ids[k], item_id);
    }
    snprintf(item_ids[index], 80, "%s", item_id);
    if (experiment[0] == '\0') {
        assert_non_null(span_attr(span, "langfuse.experiment.id"));
        snprintf(experiment, 80, "%s", span_attr(span, "langfuse.experiment.id"));
    }
    json_array_foreach(spans, i, span)
    {
        const char *name = json_string_value(json_object_get(span, "name"));
        const char *id = json_string_value(json_object_get(span, "span_id"));
        const char *parent = json_string_value(json_object_get(span, "parent_span_id"));
        const char *got = span_attr(span, "langfuse.experiment.item.root_observation_id");
        bool is_worker = span_attr(span, "weft.worker.id") != NULL ||
                         (parent != NULL && json_object_get(worker_spans, parent) != NULL);

        if (got == NULL || strcmp(got, root_id) != 0) {
            fail_msg("run %s: span %s (%s%s): root_observation_id %s, expected the root's %s",
                     run_id, name, id, is_worker ? ", a worker's" : "", got != NULL ? got : "none",
                     root_id);
        }
        assert_string_equal(span_attr(span, "langfuse.experiment.id"), experiment);
        assert_string_equal(span_attr(span, "langfuse.experiment.item.id"), item_id);
        assert_string_equal(span_attr(span, "langfuse.experiment.dataset.id"), "items");
        assert_non_null(span_attr(span, "langfuse.experiment.name"));
        if (!is_worker) {
            continue;
        }
        json_object_set_new(worker_spans, id, json_true());
        consumers += span_attr(span, "weft.worker.id") != NULL ? 1 : 0;
        agents += strncmp(name, "invoke_agent", 12) == 0 ? 1 : 0;
        chats += strncmp(name, "chat", 4) == 0 ? 1 : 0;
    }
    if (consumers < 3 || agents < 2 || chats < 2) {
        fail_msg("run %s: the workers' spans: %zu CONSUMER, %zu agent, %zu chat; expected at "
                 "least 3, 2 and 2",
                 run_id, consumers, agents, chats);
    }
    json_decref(worker_spans);
    json_decref(doc);
    free(out);
}

static void
test_eval_items_run_on_the_workers(void **state)
{
    char *dir = weft_test_mkdtemp("weft-dist-eval-");
    char home[600];
    char url[600];
    char state_url[600];
    char log[700];
    char wf[600];
    const char *vars[8];
    char *out = NULL;
    char *logs[2];
    json_t *doc = NULL;
    size_t i = 0;
    json_t *it = NULL;

    (void)state;
    assert_non_null(dir);
    snprintf(home, sizeof(home), "WEFT_HOME=%s/home", dir);
    snprintf(url, sizeof(url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(broker));
    snprintf(state_url, sizeof(state_url), "WEFT_STATE_URL=%s", weft_test_pg_url(pg));
    vars[0] = home;
    vars[1] = url;
    vars[2] = state_url;
    vars[3] = "WEFT_QUEUE_PREFIX=evaltest.";
    vars[4] = "OTEL_TRACES_EXPORTER=store"; /* the PostgreSQL of WEFT_STATE_URL, for all */
    vars[5] = "WEFT_DEBUG=1";               /* workers log each task they start */
    vars[6] = NULL;
    snprintf(wf, sizeof(wf), "%s/examples/support_triage/workflow_fixed.json", WEFT_SOURCE_DIR);
    {
        static const char *const inputs[] = {
            "I cannot log in after the update", "Where is my invoice for March?",
            "Please refund my last order",      "The export button does nothing",
            "Refund request: charged twice",    "My password reset mail never comes",
        };
        char lines[ITEMS * 80] = "";

        for (size_t k = 0; k < ITEMS; k++) {
            snprintf(lines + strlen(lines), sizeof(lines) - strlen(lines),
                     "{\"input\": \"%s (%zu)\"}\n", inputs[k % 6], k + 1);
        }
        weft_test_write_file(dir, "items.jsonl", lines);
    }
    for (size_t w = 0; w < 2; w++) {
        const char *argv[] = {
            weft_bin, "worker", "--concurrency", "2", "--id", w == 0 ? "w1" : "w2", NULL};

        snprintf(log, sizeof(log), "%s/w%zu.log", dir, w + 1);
        workers[w] = weft_test_spawn(argv, vars, dir, log, true);
        assert_true(workers[w] > 0);
    }
    {
        const char *argv[] = {weft_bin, "dataset",     "create", "items",
                              "--file", "items.jsonl", NULL};

        snprintf(log, sizeof(log), "%s/dataset.log", dir);
        assert_int_equal(weft_test_run(argv, vars, dir, log, 60000), 0);
    }
    {
        const char *argv[] = {weft_bin,        "eval",       wf,     "--dataset",
                              "items",         "--executor", "amqp", "--json",
                              "--concurrency", "4",          NULL};

        int status = 0;

        snprintf(log, sizeof(log), "%s/eval.json", dir);
        status = weft_test_run(argv, vars, dir, log, 120000);
        if (status != 0) {
            char *text = weft_test_read_file(log);

            fail_msg("weft eval --executor amqp: exit %d: %s", status,
                     text != NULL ? text : "(no output)");
        }
    }
    out = weft_test_read_file(log);
    assert_non_null(out);
    assert_null(strstr(out, "one item at a time"));
    doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "summary"), "passed")),
                     ITEMS);
    assert_int_equal(json_array_size(json_object_get(doc, "items")), ITEMS);
    assert_runs_overlapped(json_object_get(doc, "items"));
    for (size_t w = 0; w < 2; w++) {
        snprintf(log, sizeof(log), "%s/w%zu.log", dir, w + 1);
        logs[w] = weft_test_read_file(log);
        assert_non_null(logs[w]);
    }
    /* Each item run's three steps started on a worker. */
    json_array_foreach(json_object_get(doc, "items"), i, it)
    {
        const char *run_id = json_string_value(json_object_get(it, "run_id"));
        char needle[128];
        size_t steps = 0;

        assert_non_null(run_id);
        snprintf(needle, sizeof(needle), "of run %s", run_id);
        for (size_t w = 0; w < 2; w++) {
            for (const char *p = strstr(logs[w], needle); p != NULL; p = strstr(p + 1, needle)) {
                steps++;
            }
        }
        if (steps < 3) {
            fail_msg("run %s: %zu step(s) started on the workers, expected 3", run_id, steps);
        }
    }
    for (size_t w = 0; w < 2; w++) {
        kill(workers[w], SIGTERM);
        assert_int_equal(weft_test_wait(workers[w], 30000), 0);
        free(logs[w]);
        /* Every result went to its run's own queue. */
        snprintf(log, sizeof(log), "%s/w%zu.log", dir, w + 1);
        logs[w] = weft_test_read_file(log);
        assert_non_null(logs[w]);
        assert_non_null(strstr(logs[w], " 0 rejected,"));
        assert_non_null(strstr(logs[w], " 0 result(s) to the shared queue"));
        free(logs[w]);
    }
    assert_queues_clean();
    {
        char experiment[80] = "";
        char item_ids[ITEMS][80];

        json_array_foreach(json_object_get(doc, "items"), i, it)
        {
            assert_trace_attrs(vars, dir, json_string_value(json_object_get(it, "run_id")), i,
                               experiment, item_ids);
        }
    }
    json_decref(doc);
    free(out);
    weft_test_rm_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_items_run_on_the_workers),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
