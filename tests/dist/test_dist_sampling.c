/* tests/dist/test_dist_sampling.c - tail sampling of distributed runs, whole or not at all,
 * against a real RabbitMQ started by the test and the built `weft` binary in four processes:
 * `weft serve --sampling` as the collector (its own span store), two `weft worker`s and the
 * orchestrator `weft run --executor amqp --sampling`, all three sending OTLP to serve.
 *
 * With "failed,0%": a run whose command step fails is kept at serve with the spans of all three
 * processes (the orchestrator's root, both workers' steps), and a run that completes is not
 * stored at all, although its workers' spans reached serve before its root did; the
 * orchestrator's summary and serve's /metrics say the same. */
#include "support/amqp_server.h"
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "ds."

/* Two independent command steps (one a worker each, with luck; either way two tasks) and a
 * third that joins them; FINAL decides whether the run fails. */
static const char workflow_fmt[] =
    "{\"name\": \"%s\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
    "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"supervisor\": {\"max_parallel\": 2},"
    " \"plan\": [{\"id\": \"s1\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"sleep "
    "0.2; echo one\"]}, {\"id\": \"s2\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", "
    "\"sleep 0.2; echo two\"]}, {\"id\": \"s3\", \"executor\": \"command\", \"argv\": "
    "[\"%s\"], \"depends_on\": [\"s1\", \"s2\"]}]}\n";

static struct {
    struct weft_test_amqp *broker;
    char bin[1024];
    char dir[512];
    char home[600];       /* the orchestrator's and workers' WEFT_HOME */
    char serve_home[600]; /* serve's: its span store is the fleet's */
    char url[600];
    char endpoint[128];
    pid_t serve;
    pid_t workers[2];
    unsigned serve_port;
} w;

static int
setup(void **state)
{
    char err[1024];
    char *dir = NULL;
    char log[700];

    (void)state;
    memset(&w, 0, sizeof(w));
    snprintf(w.bin, sizeof(w.bin), "%s/weft", WEFT_BINARY_DIR);
    w.broker = weft_test_amqp_start(err, sizeof(err));
    if (w.broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1; /* fails the group: never a silent skip */
    }
    dir = weft_test_mkdtemp("weft-dist-sampling-");
    if (dir == NULL) {
        return -1;
    }
    snprintf(w.dir, sizeof(w.dir), "%s", dir);
    free(dir);
    snprintf(w.home, sizeof(w.home), "WEFT_HOME=%s/home", w.dir);
    snprintf(w.serve_home, sizeof(w.serve_home), "WEFT_HOME=%s/serve", w.dir);
    snprintf(w.url, sizeof(w.url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(w.broker));
    {
        const char *argv[] = {w.bin,       "serve",           "--addr", "127.0.0.1:0", "--sampling",
                              "failed,0%", "--sampling-wait", "1s",     NULL};
        const char *env[] = {w.serve_home,     "WEFT_STATE_URL*",           "WEFT_TRACE_STORE_URL*",
                             "WEFT_SAMPLING*", "OTEL_TRACES_EXPORTER=none", NULL};

        snprintf(log, sizeof(log), "%s/serve.log", w.dir);
        w.serve = serve_proc_spawn(argv, env, w.dir, log, &w.serve_port);
    }
    snprintf(w.endpoint, sizeof(w.endpoint), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%u",
             w.serve_port);
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {w.bin, "worker", "--concurrency", "1", "--id", i == 0 ? "w1" : "w2",
                              NULL};
        const char *env[] = {w.home,
                             w.url,
                             "WEFT_QUEUE_PREFIX=" PREFIX,
                             "OTEL_TRACES_EXPORTER=otlp",
                             w.endpoint,
                             "OTEL_BSP_SCHEDULE_DELAY=100",
                             "WEFT_SAMPLING*",
                             i == 0 ? "OTEL_SERVICE_NAME=worker-1" : "OTEL_SERVICE_NAME=worker-2",
                             NULL};

        snprintf(log, sizeof(log), "%s/worker%d.log", w.dir, i + 1);
        w.workers[i] = weft_test_spawn(argv, env, w.dir, log, true);
        if (w.workers[i] <= 0) {
            return -1;
        }
    }
    return 0;
}

static int
teardown(void **state)
{
    int rc = 0;

    (void)state;
    for (int i = 0; i < 2; i++) {
        if (w.workers[i] > 0) {
            weft_test_kill_group(w.workers[i], 10000);
        }
    }
    if (w.serve > 0) {
        kill(w.serve, SIGTERM);
        if (weft_test_wait(w.serve, 10000) != 0) {
            weft_test_kill_group(w.serve, 1000);
            rc = -1;
        }
    }
    if (w.broker != NULL) {
        rc = weft_test_amqp_stop(w.broker) == 0 ? rc : -1;
    }
    weft_test_rm_rf(w.dir);
    return rc;
}

/* Run workflow @p name (its last step runs @p final) distributed; returns its --json. */
static json_t *
run(const char *name, const char *final, int want_status)
{
    char wf[2048];
    char path[700];
    char out_path[700];
    const char *argv[] = {w.bin,        "run",       path,     "--executor", "amqp",
                          "--sampling", "failed,0%", "--json", "-q",         NULL};
    const char *env[] = {w.home,
                         w.url,
                         "WEFT_QUEUE_PREFIX=" PREFIX,
                         "OTEL_TRACES_EXPORTER=otlp",
                         w.endpoint,
                         "OTEL_BSP_SCHEDULE_DELAY=100",
                         "WEFT_SAMPLING*",
                         "OTEL_SERVICE_NAME=orchestrator",
                         NULL};
    pid_t pid = 0;
    json_t *doc = NULL;
    char *text = NULL;
    FILE *f = NULL;

    snprintf(wf, sizeof(wf), workflow_fmt, name, final);
    snprintf(path, sizeof(path), "%s/%s.json", w.dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(wf, f);
    fclose(f);
    snprintf(out_path, sizeof(out_path), "%s/script.json", w.dir);
    f = fopen(out_path, "w");
    assert_non_null(f);
    fputs("{\"responses\": {}}\n", f);
    fclose(f);
    snprintf(out_path, sizeof(out_path), "%s/%s.out", w.dir, name);
    pid = weft_test_spawn(argv, env, w.dir, out_path, true);
    assert_true(pid > 0);
    assert_int_equal(weft_test_wait(pid, 120000), want_status);
    text = weft_test_read_file(out_path);
    assert_non_null(text);
    /* stdout and stderr share the log: the JSON document is the part from its first '{'. */
    doc = json_loads(strchr(text, '{') != NULL ? strchr(text, '{') : text, JSON_DISABLE_EOF_CHECK,
                     NULL);
    if (doc == NULL) {
        fail_msg("no --json document in:\n%s", text);
    }
    free(text);
    return doc;
}

/* Spans serve stored for @p trace_id, and how many processes sent them (each process has a
 * service.name of its own here; the store keeps service.name per span). */
static size_t
stored_at_serve(const char *trace_id, size_t *processes)
{
    char db[700];
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    size_t n = 0;

    *processes = 0;
    snprintf(db, sizeof(db), "%s/serve/weft.db", w.dir);
    if (weft_store_open(db, &store) != WEFT_OK) {
        return 0;
    }
    if (weft_store_load_trace(store, trace_id, &trace) == WEFT_OK) {
        const char *seen[8];
        size_t nseen = 0;

        n = weft_trace_span_count(trace);
        for (size_t i = 0; i < n; i++) {
            const struct weft_span_data *s = weft_trace_span(trace, i);
            const char *inst = NULL;
            bool is_new = true;

            for (size_t a = 0; s->resource != NULL && a < s->resource->attr_count; a++) {
                if (strcmp(s->resource->attrs[a].key, "service.name") == 0) {
                    inst = s->resource->attrs[a].value.u.str;
                }
            }
            inst = inst != NULL ? inst : "(none)";
            for (size_t k = 0; k < nseen; k++) {
                is_new = is_new && strcmp(seen[k], inst) != 0;
            }
            if (is_new && nseen < 8) {
                seen[nseen++] = inst;
            }
        }
        *processes = nseen;
        weft_trace_free(trace);
    }
    weft_store_close(store);
    return n;
}

static void
test_dist_sampling_keeps_a_failed_run_whole_and_drops_a_completed_one(void **state)
{
    json_t *failed = run("fails", "false", 1);
    json_t *passed = run("passes", "true", 0);
    char failed_id[40];
    char passed_id[40];
    size_t processes = 0;
    size_t n = 0;
    long deadline = 0;

    (void)state;
    snprintf(failed_id, sizeof(failed_id), "%s",
             json_string_value(json_object_get(failed, "trace_id")));
    snprintf(passed_id, sizeof(passed_id), "%s",
             json_string_value(json_object_get(passed, "trace_id")));
    /* The orchestrator decided, and says so. */
    assert_true(json_is_true(json_object_get(json_object_get(failed, "sampling"), "kept")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(failed, "sampling"), "rule")), "failed");
    assert_true(json_is_false(json_object_get(json_object_get(passed, "sampling"), "kept")));
    /* serve keeps the failed run with the spans of the orchestrator and its workers (both,
     * when each took a step; the broker may give both steps to one) once its 1 s wait is over. */
    deadline = weft_test_now_ms() + 30000;
    while ((n = stored_at_serve(failed_id, &processes)) == 0 || processes < 2) {
        if (weft_test_now_ms() > deadline) {
            fail_msg("serve has %zu spans of the failed run from %zu processes", n, processes);
        }
        weft_test_sleep_ms(200);
    }
    assert_true(n >= 6);
    /* ... and nothing of the completed one, whose workers' spans it received and held. */
    weft_test_sleep_ms(2500);
    assert_int_equal(stored_at_serve(passed_id, &processes), 0);
    {
        long status = 0;
        char *text = serve_proc_get(w.serve_port, "/metrics", 10000, &status);
        const char *kept[] = {"rule=\"failed\"", NULL};
        size_t count = 0;

        assert_int_equal(status, 200);
        assert_true(serve_proc_sum(text, "weft_ingest_traces_kept_total", kept, &count) >= 1);
        /* The completed run's root reached serve with the orchestrator's "drop". */
        const char *dropped[] = {"rule=\"sample\"", NULL};

        assert_true(serve_proc_sum(text, "weft_ingest_traces_dropped_total", dropped, &count) >= 1);
        free(text);
    }
    json_decref(failed);
    json_decref(passed);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist_sampling_keeps_a_failed_run_whole_and_drops_a_completed_one),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
