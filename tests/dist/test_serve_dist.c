/* tests/dist/test_serve_dist.c - what Prometheus sees of a distributed deployment, against a
 * real RabbitMQ broker started by the test: `weft serve` with the broker's URL, one
 * `weft worker --metrics-addr`, and `weft run --executor amqp` of the code-review example into
 * the same WEFT_HOME, all the built `weft` binary.
 *
 * The tests run in order and share the processes:
 *  1. after the run, serve's /metrics has the broker's view (one live worker, empty queues,
 *     weft_broker_up 1) and the orchestrator's task families from the stored run (as many
 *     tasks dispatched as the run published, one latency sample per task, nothing in
 *     flight); the worker's own /metrics has its successes and its concurrency;
 *  2. every distributed-run metric the shipped dashboard and alert rules query has samples in
 *     these two scrapes (tests/runtime/test_dashboards.c checks the rest of the families
 *     against a serve without a broker, and points here for these);
 *  3. with the worker stopped, a task dispatched waits in the dispatch queue: depth 1, no
 *     live worker;
 *  4. a frozen broker (SIGSTOP) gives weft_broker_up 0 within serve's 2 s bound, and 1 again
 *     once it is thawed; a stopped broker gives weft_broker_up 0 at once, without the queue
 *     series, and the broker's password never reaches serve's log. */
#include "support/amqp_server.h"
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX      "sd."
#define BOUND_MS    2000 /* serve's budget for one scrape's broker questions */
#define DEADLINE_MS 30000
/* What a bounded scrape may take beyond BOUND_MS on a loaded 2-core machine (servers, workers
 * and other tests share it): the check is that a dead broker cannot hold a scrape, not speed. */
#define SLACK_MS 6000

static const char slow_workflow[] =
    "{\"name\": \"waits\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": \"s\", "
    "\"script\": \"script.json\"}}, \"supervisor\": {\"timeout_s\": 120},"
    " \"agents\": [{\"name\": \"slow\", \"instructions\": \"Take your time.\"}],"
    " \"plan\": [{\"id\": \"s1\", \"agent\": \"slow\", \"task\": \"think\"}]}\n";
static const char slow_script[] =
    "{\"version\": 1, \"responses\": {\"slow\": {\"act\": [{\"content\": \"ok\"}]}}}\n";

static struct {
    struct weft_test_amqp *broker;
    char bin[1024];
    char dir[512];
    char home[600];
    char url[600];
    char prefix[64];
    const char *env[5]; /* worker and runs: the broker and prefix from the environment */
    pid_t serve;
    pid_t worker;
    unsigned serve_port;
    unsigned worker_port;
    char *serve_text;  /* serve's scrape after the run */
    char *worker_text; /* the worker's scrape after the run */
} w;

/* The number after @p marker in the file at @p path (0 when absent). */
static unsigned
number_after(const char *path, const char *marker)
{
    FILE *fp = fopen(path, "r");
    char text[8192];
    size_t got = 0;
    const char *p = NULL;

    if (fp == NULL) {
        return 0;
    }
    got = fread(text, 1, sizeof(text) - 1, fp);
    text[got] = '\0';
    fclose(fp);
    p = strstr(text, marker);
    return p != NULL ? (unsigned)strtoul(p + strlen(marker), NULL, 10) : 0;
}

/* Wait (at most 20 s) for the process logging to @p log to say "@p marker<port>". */
static unsigned
wait_port(pid_t pid, const char *log, const char *marker)
{
    long deadline = weft_test_now_ms() + 20000;
    unsigned port = 0;

    while ((port = number_after(log, marker)) == 0 && weft_test_now_ms() < deadline) {
        if (weft_test_has_exited(pid, NULL)) {
            break;
        }
        weft_test_sleep_ms(50);
    }
    if (port == 0) {
        char *tail = weft_test_log_tail(log, 4000);
        fprintf(stderr, "no \"%s\" in %s:\n%s\n", marker, log, tail);
        free(tail);
        fail();
    }
    return port;
}

static char *
scrape(unsigned port, long *elapsed_ms)
{
    long status = 0;
    long start = weft_test_now_ms();
    char *text = serve_proc_get(port, "/metrics", 10000, &status);

    if (elapsed_ms != NULL) {
        *elapsed_ms = weft_test_now_ms() - start;
    }
    assert_non_null(text);
    assert_int_equal(status, 200);
    return text;
}

static double
value(const char *text, const char *name, const char *label, size_t *count)
{
    const char *labels[] = {label, NULL};

    return serve_proc_sum(text, name, label != NULL ? labels : NULL, count);
}

/* Scrape serve until @p name{@p label} equals @p want (the broker refreshes some statistics
 * every few seconds), at most DEADLINE_MS; fail with the last scrape otherwise. */
static void
wait_serve_value(const char *name, const char *label, double want)
{
    long deadline = weft_test_now_ms() + DEADLINE_MS;
    char *text = NULL;
    size_t n = 0;
    double got = -1;

    for (;;) {
        free(text);
        text = scrape(w.serve_port, NULL);
        got = value(text, name, label, &n);
        if ((n > 0 && got == want) || weft_test_now_ms() >= deadline) {
            break;
        }
        weft_test_sleep_ms(250);
    }
    if (n == 0 || got != want) {
        fprintf(stderr, "%s{%s}: want %g, got %g (%zu samples) in:\n%s\n", name,
                label != NULL ? label : "", want, got, n, text);
        free(text);
        fail();
    }
    free(text);
}

static void
write_file(const char *name, const char *text)
{
    char path[700];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%s", w.dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int
group_setup(void **state)
{
    char err[1024];
    char *dir = NULL;

    (void)state;
    memset(&w, 0, sizeof(w));
    snprintf(w.bin, sizeof(w.bin), "%s/weft", WEFT_BINARY_DIR);
    w.broker = weft_test_amqp_start(err, sizeof(err));
    if (w.broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1; /* fails the group: never a silent skip */
    }
    dir = weft_test_mkdtemp("weft-serve-dist-");
    if (dir == NULL) {
        return -1;
    }
    snprintf(w.dir, sizeof(w.dir), "%s", dir);
    free(dir);
    snprintf(w.home, sizeof(w.home), "WEFT_HOME=%s/home", w.dir);
    snprintf(w.url, sizeof(w.url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(w.broker));
    snprintf(w.prefix, sizeof(w.prefix), "WEFT_QUEUE_PREFIX=%s", PREFIX);
    w.env[0] = w.home;
    w.env[1] = w.url;
    w.env[2] = w.prefix;
    w.env[3] = "OTEL_TRACES_EXPORTER=none";
    w.env[4] = NULL;
    return 0;
}

/* The run of test 3, stopped by the group teardown when a failed assertion left it running. */
static pid_t waiting_run;

static int
group_teardown(void **state)
{
    int rc = 0;

    (void)state;
    if (w.worker > 0) {
        weft_test_kill_group(w.worker, 10000);
    }
    if (waiting_run > 0 && !weft_test_has_exited(waiting_run, NULL)) {
        weft_test_kill_group(waiting_run, 10000);
    }
    if (w.serve > 0) {
        kill(w.serve, SIGTERM);
        rc = weft_test_wait(w.serve, 10000) == 0 ? rc : -1;
        if (rc != 0) {
            weft_test_kill_group(w.serve, 1000);
        }
    }
    free(w.serve_text);
    free(w.worker_text);
    if (w.broker != NULL) {
        (void)weft_test_amqp_pause(w.broker, false);
        rc = weft_test_amqp_stop(w.broker) == 0 ? rc : -1;
    }
    weft_test_rm_rf(w.dir);
    return rc;
}

/* serve: the broker URL from the environment, the prefix from its flag (its environment has
 * none), a port of its choice, debug logging. */
static void
start_serve(void)
{
    char log[700];
    const char *argv[] = {w.bin, "serve", "--addr", "127.0.0.1:0", "--queue-prefix", PREFIX, NULL};
    /* WEFT_DEBUG: every log line, down to debug, must keep the password out. */
    const char *env[] = {w.home,         w.url, "WEFT_QUEUE_PREFIX*", "OTEL_TRACES_EXPORTER=none",
                         "WEFT_DEBUG=1", NULL};

    snprintf(log, sizeof(log), "%s/serve.log", w.dir);
    w.serve = weft_test_spawn(argv, env, w.dir, log, true);
    assert_true(w.serve > 0);
    w.serve_port = wait_port(w.serve, log, "listening on port ");
}

static void
start_worker(void)
{
    char log[700];
    const char *argv[] = {w.bin, "worker",         "--concurrency", "3", "--id",
                          "w1",  "--metrics-addr", "127.0.0.1:0",   NULL};

    snprintf(log, sizeof(log), "%s/worker.log", w.dir);
    w.worker = weft_test_spawn(argv, w.env, w.dir, log, true);
    assert_true(w.worker > 0);
    w.worker_port = wait_port(w.worker, log, "serving metrics on port ");
}

/* 1. One worker, one run of the code-review example, then both scrapes. */
static void
test_serve_and_worker_metrics_after_an_amqp_run(void **state)
{
    char wf[1024], log[700];
    unsigned published = 0;
    size_t n = 0;

    (void)state;
    start_serve();
    start_worker();
    /* The worker consumes the dispatch queue: the broker reports it as soon as serve asks. */
    wait_serve_value("weft_workers_live", NULL, 1);
    wait_serve_value("weft_broker_up", NULL, 1);
    snprintf(wf, sizeof(wf), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    snprintf(log, sizeof(log), "%s/run.log", w.dir);
    {
        const char *argv[] = {w.bin,        "run",  wf,           "--input", "Add a login endpoint",
                              "--executor", "amqp", "--no-trace", "-q",      NULL};
        assert_int_equal(weft_test_run(argv, w.env, w.dir, log, 120000), 0);
    }
    /* Nine steps, each dispatched once (a task is published once when nothing fails). */
    assert_true(weft_test_file_contains(log, "s9:reviewer(completed)"));
    assert_false(weft_test_file_contains(log, "s10:"));
    published = number_after(log, "amqp executor: ");
    assert_int_equal(published, 9);
    /* Queue statistics lag: wait until the broker shows the queues drained. */
    wait_serve_value("weft_broker_queue_depth", "queue=\"dispatch\"", 0);
    wait_serve_value("weft_broker_queue_depth", "queue=\"results\"", 0);
    wait_serve_value("weft_broker_queue_depth", "queue=\"dead_letter\"", 0);
    w.serve_text = scrape(w.serve_port, NULL);
    w.worker_text = scrape(w.worker_port, NULL);
    {
        const char *s = w.serve_text;
        const char *wf_label = "workflow=\"code-review\"";
        assert_true(value(s, "weft_workers_live", NULL, &n) == 1 && n == 1);
        assert_true(value(s, "weft_broker_up", NULL, &n) == 1 && n == 1);
        assert_true(value(s, "weft_broker_queue_depth", NULL, &n) == 0 && n == 3);
        /* The orchestrator's families, folded from the run's stored snapshot. */
        assert_true(value(s, "weft_tasks_dispatched_total", wf_label, &n) == published && n == 1);
        assert_true(value(s, "weft_task_dispatch_to_start_seconds_count", wf_label, &n) ==
                    published);
        assert_true(value(s, "weft_task_start_to_end_seconds_count", "outcome=\"success\"", &n) ==
                    published);
        assert_true(value(s, "weft_tasks_in_flight", wf_label, &n) == 0 && n == 1);
        /* Counters that never moved read 0, per workflow (and per reason). */
        assert_true(value(s, "weft_tasks_redeliveries_total", wf_label, &n) == 0 && n == 1);
        assert_true(value(s, "weft_tasks_duplicate_results_total", wf_label, &n) == 0 && n == 1);
        assert_true(value(s, "weft_tasks_dead_lettered_total", wf_label, &n) == 0 && n == 3);
        /* The worker's families are the worker's: serve has none. */
        (void)value(s, "weft_worker_tasks_total", NULL, &n);
        assert_int_equal(n, 0);
    }
    {
        const char *s = w.worker_text;
        /* One worker ran every task. */
        assert_true(value(s, "weft_worker_tasks_total", "outcome=\"success\"", &n) == published &&
                    n == 1);
        assert_true(value(s, "weft_worker_tasks_total", "outcome=\"failed\"", &n) == 0 && n == 1);
        assert_true(value(s, "weft_worker_concurrency", NULL, &n) == 3 && n == 1);
        assert_true(value(s, "weft_worker_busy", NULL, &n) == 0 && n == 1);
    }
}

/* Does @p text (a scrape) have a sample named exactly @p name? */
static bool
has_sample(const char *text, const char *name)
{
    size_t n = 0;

    (void)serve_proc_sum(text, name, NULL, &n);
    return n > 0;
}

/* The metric names of distributed runs that @p path queries (its weft_* words of the
 * distributed families), added to @p names (space separated, each once). */
static void
distributed_names(const char *path, char *names, size_t size)
{
    static const char *const prefixes[] = {"weft_broker_", "weft_workers_", "weft_tasks_",
                                           "weft_task_", "weft_worker_"};
    FILE *fp = fopen(path, "r");
    char *text = NULL;
    long len = 0;

    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = calloc(1, (size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    for (const char *p = text; (p = strstr(p, "weft_")) != NULL;) {
        char word[128];
        size_t n = 0;
        bool is_distributed = false;
        bool is_word_start = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');

        while ((isalnum((unsigned char)p[n]) || p[n] == '_') && n < sizeof(word) - 1) {
            word[n] = p[n];
            n++;
        }
        word[n] = '\0';
        p += n;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
            is_distributed = is_distributed || strncmp(word, prefixes[i], strlen(prefixes[i])) == 0;
        }
        if (is_word_start && is_distributed) {
            char key[130];
            snprintf(key, sizeof(key), " %s ", word);
            if (strstr(names, key) == NULL) {
                assert_true(strlen(names) + strlen(word) + 2 < size);
                strcat(names, word);
                strcat(names, " ");
            }
        }
    }
    free(text);
}

/* 2. Every distributed metric a dashboard panel or an alert rule queries has samples in the
 * scrapes of serve or of the worker. */
static void
test_dashboard_distributed_metrics_have_samples(void **state)
{
    char names[4096] = " ";
    size_t checked = 0;

    (void)state;
    assert_non_null(w.serve_text);
    distributed_names(WEFT_SOURCE_DIR "/dashboards/weft-grafana.json", names, sizeof(names));
    distributed_names(WEFT_SOURCE_DIR "/dashboards/weft-alerts.yml", names, sizeof(names));
    for (char *name = strtok(names, " "); name != NULL; name = strtok(NULL, " ")) {
        if (!has_sample(w.serve_text, name) && !has_sample(w.worker_text, name)) {
            fail_msg("the dashboards query %s, which neither weft serve (with a broker) nor "
                     "weft worker exports after a distributed run",
                     name);
        }
        checked++;
    }
    /* depth, live, up, in flight, dispatched, redeliveries, dead letters, duplicates, the two
     * latency histograms, worker tasks, busy and concurrency */
    assert_true(checked >= 13);
}

/* 3. No worker: a dispatched task waits in the dispatch queue, and serve says so. */
static void
test_dispatched_task_waits_without_workers(void **state)
{
    char wf[700], log[700];
    pid_t run = 0;

    (void)state;
    kill(w.worker, SIGTERM);
    assert_int_equal(weft_test_wait(w.worker, 60000), 0);
    w.worker = 0;
    wait_serve_value("weft_workers_live", NULL, 0);
    write_file("workflow.json", slow_workflow);
    write_file("script.json", slow_script);
    snprintf(wf, sizeof(wf), "%s/workflow.json", w.dir);
    snprintf(log, sizeof(log), "%s/waiting.log", w.dir);
    {
        const char *argv[] = {w.bin, "run", wf, "--executor", "amqp", "--no-trace", "-q", NULL};
        run = weft_test_spawn(argv, w.env, w.dir, log, true);
        assert_true(run > 0);
        waiting_run = run;
    }
    wait_serve_value("weft_broker_queue_depth", "queue=\"dispatch\"", 1);
    wait_serve_value("weft_workers_live", NULL, 0);
    assert_false(weft_test_has_exited(run, NULL)); /* still waiting for its task */
    weft_test_kill_group(run, 10000);
}

/* 4. A frozen broker, then a stopped one: serve answers within its bound and says the broker
 * is down; its log names the broker without the password. */
static void
test_broker_down_is_visible_and_bounded(void **state)
{
    char log[700];
    char *text = NULL;
    long elapsed = 0;
    size_t n = 0;

    (void)state;
    snprintf(log, sizeof(log), "%s/serve.log", w.dir);
    weft_test_sleep_ms(1100); /* past the second in which scrapes share one answer */
    assert_int_equal(weft_test_amqp_pause(w.broker, true), 0);
    text = scrape(w.serve_port, &elapsed);
    assert_int_equal(weft_test_amqp_pause(w.broker, false), 0);
    assert_true(value(text, "weft_broker_up", NULL, &n) == 0 && n == 1);
    (void)value(text, "weft_broker_queue_depth", NULL, &n);
    assert_int_equal(n, 0); /* no stale depth */
    if (elapsed > BOUND_MS + SLACK_MS) {
        fail_msg("a scrape with a frozen broker took %ld ms (bound %d ms)", elapsed, BOUND_MS);
    }
    free(text);
    /* Thawed: a later scrape connects again. */
    wait_serve_value("weft_broker_up", NULL, 1);
    wait_serve_value("weft_broker_queue_depth", "queue=\"dispatch\"", 1);
    /* Stopped: refused at once. */
    assert_int_equal(weft_test_amqp_stop(w.broker), 0);
    w.broker = NULL;
    weft_test_sleep_ms(1100);
    text = scrape(w.serve_port, &elapsed);
    assert_true(value(text, "weft_broker_up", NULL, &n) == 0 && n == 1);
    (void)value(text, "weft_workers_live", NULL, &n);
    assert_int_equal(n, 0);
    assert_true(elapsed < BOUND_MS + SLACK_MS);
    /* The stored runs' families are still there. */
    assert_true(value(text, "weft_tasks_dispatched_total", "workflow=\"code-review\"", &n) == 9);
    free(text);
    assert_true(weft_test_file_contains(log, "guest:***@127.0.0.1"));
    assert_false(weft_test_file_contains(log, "guest:guest"));
    assert_true(weft_test_file_contains(log, "weft_broker_up is 0 until it answers"));
    assert_true(weft_test_file_contains(log, "answering again"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_and_worker_metrics_after_an_amqp_run),
        cmocka_unit_test(test_dashboard_distributed_metrics_have_samples),
        cmocka_unit_test(test_dispatched_task_waits_without_workers),
        cmocka_unit_test(test_broker_down_is_visible_and_bounded),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
