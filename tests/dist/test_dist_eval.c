/* tests/dist/test_dist_eval.c - `weft eval --executor amqp` against a real RabbitMQ and a real
 * PostgreSQL state started by the test: an experiment of 5 items of examples/support_triage
 * (a dataset from a file, kept in PostgreSQL) runs each item's steps on two `weft worker`
 * processes (one item run at a time: see docs/experiments.md); every item passes and every item
 * run's steps are in the workers' logs (none ran in the eval process). */
#include "support/amqp_server.h"
#include "support/pg_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
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
    vars[4] = "OTEL_TRACES_EXPORTER=none";
    vars[5] = "WEFT_DEBUG=1"; /* workers log each task they start */
    vars[6] = NULL;
    snprintf(wf, sizeof(wf), "%s/examples/support_triage/workflow_fixed.json", WEFT_SOURCE_DIR);
    weft_test_write_file(dir, "five.jsonl",
                         "{\"input\": \"I cannot log in after the update\"}\n"
                         "{\"input\": \"Where is my invoice for March?\"}\n"
                         "{\"input\": \"Please refund my last order\"}\n"
                         "{\"input\": \"The export button does nothing\"}\n"
                         "{\"input\": \"Refund request: charged twice\"}\n");
    for (size_t w = 0; w < 2; w++) {
        const char *argv[] = {
            weft_bin, "worker", "--concurrency", "2", "--id", w == 0 ? "w1" : "w2", NULL};

        snprintf(log, sizeof(log), "%s/w%zu.log", dir, w + 1);
        workers[w] = weft_test_spawn(argv, vars, dir, log, true);
        assert_true(workers[w] > 0);
    }
    {
        const char *argv[] = {weft_bin, "dataset", "create", "five", "--file", "five.jsonl", NULL};

        snprintf(log, sizeof(log), "%s/dataset.log", dir);
        assert_int_equal(weft_test_run(argv, vars, dir, log, 60000), 0);
    }
    {
        const char *argv[] = {weft_bin,        "eval",       wf,     "--dataset",
                              "five",          "--executor", "amqp", "--json",
                              "--concurrency", "2",          NULL};

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
    assert_non_null(strstr(out, "runs one item at a time (--concurrency 2 ignored"));
    doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "summary"), "passed")),
                     5);
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
