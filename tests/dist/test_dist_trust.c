/* tests/dist/test_dist_trust.c - trust between the fleet's processes against a real RabbitMQ
 * broker (docs/distributed.md, "Trust"): a worker with a key refuses unsigned, forged and
 * foreign-key tasks published straight to the broker (nothing runs; refused, logged, counted
 * in /metrics) and runs a properly signed one; a signed run completes; an orchestrator with a
 * key refuses the unsigned results of a worker without one; a worker's command allow-list
 * fails a step that would start another program. Each test uses its own queue prefix. */
#include "runtime/dist/broker.h"
#include "runtime/dist/message.h"
#include "runtime/dist/sign.h"
#include "support/amqp_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY       "trust-test-key-0123456789abcdef"
#define OTHER_KEY "somebody-elses-key-0123456789"

static struct weft_test_amqp *broker;
static char weft_bin[1024];
static pid_t started[16];
static size_t started_count;

struct env {
    char dir[512];
    char home[600];
    char url[600];
    char prefix[600];
    char queue_prefix[128];
    const char *vars[10];
};

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
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < started_count; i++) {
        if (!weft_test_has_exited(started[i], NULL)) {
            weft_test_kill_group(started[i], 5000);
        }
    }
    return weft_test_amqp_stop(broker) == 0 ? 0 : -1;
}

/* The environment of a test's processes; @p key: WEFT_DIST_KEY, or NULL for none. */
static void
env_init(struct env *e, const char *prefix, const char *key)
{
    char *dir = weft_test_mkdtemp("weft-trust-");
    size_t n = 0;

    assert_non_null(dir);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    free(dir);
    snprintf(e->home, sizeof(e->home), "WEFT_HOME=%s/home", e->dir);
    snprintf(e->url, sizeof(e->url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(broker));
    snprintf(e->queue_prefix, sizeof(e->queue_prefix), "%s.", prefix);
    snprintf(e->prefix, sizeof(e->prefix), "WEFT_QUEUE_PREFIX=%s", e->queue_prefix);
    e->vars[n++] = e->home;
    e->vars[n++] = e->url;
    e->vars[n++] = e->prefix;
    e->vars[n++] = "OTEL_TRACES_EXPORTER=none";
    e->vars[n++] = "WEFT_DEBUG=1";
    e->vars[n++] = key != NULL ? "WEFT_DIST_KEY=" KEY : "WEFT_DIST_KEY=";
    e->vars[n] = NULL;
}

static pid_t
start_worker(const struct env *e, const char *name, const char *const *extra)
{
    char log[700];
    const char *argv[16] = {weft_bin, "worker", "--concurrency", "2", "--id", name};
    size_t n = 6;
    pid_t pid = 0;

    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++) {
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
    pid = weft_test_spawn(argv, e->vars, e->dir, log, true);
    assert_true(pid > 0);
    if (started_count < sizeof(started) / sizeof(started[0])) {
        started[started_count++] = pid;
    }
    return pid;
}

static void
stop_worker(pid_t w)
{
    kill(w, SIGTERM);
    assert_int_equal(weft_test_wait(w, 60000), 0);
}

static void
assert_log(const struct env *e, const char *name, const char *needle)
{
    char path[700];

    snprintf(path, sizeof(path), "%s/%s", e->dir, name);
    if (!weft_test_file_contains(path, needle)) {
        char *tail = weft_test_log_tail(path, 4000);
        fprintf(stderr, "%s lacks \"%s\":\n%s\n", path, needle, tail);
        free(tail);
        fail();
    }
}

static void
assert_no_log(const struct env *e, const char *name, const char *needle)
{
    char path[700];

    snprintf(path, sizeof(path), "%s/%s", e->dir, name);
    assert_false(weft_test_file_contains(path, needle));
}

static bool
file_exists(const struct env *e, const char *name)
{
    char path[700];

    snprintf(path, sizeof(path), "%s/%s", e->dir, name);
    return access(path, F_OK) == 0;
}

/* A queue's ready message count from rabbitmqctl (-1: no such queue). */
static long
queue_ready(const char *queue)
{
    const char *args[] = {"list_queues", "-q", "name", "messages_ready", NULL};
    char *out = NULL;
    long ready = -1;

    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[256];
        long r = 0;
        if (sscanf(line, "%255s %ld", name, &r) == 2 && strcmp(name, queue) == 0) {
            ready = r;
        }
    }
    free(out);
    return ready;
}

/* Wait (at most 30 s: the broker refreshes its statistics every few seconds) for @p ready. */
static void
wait_ready(const char *queue, long ready)
{
    long deadline = weft_test_now_ms() + 30000;
    long r = -1;

    while ((r = queue_ready(queue)) != ready && weft_test_now_ms() < deadline) {
        weft_test_sleep_ms(250);
    }
    assert_int_equal(r, ready);
}

/* Wait (at most 30 s) until @p queue has a consumer: the worker declared the topology. */
static void
wait_consumer(const char *queue)
{
    const char *args[] = {"list_queues", "-q", "name", "consumers", NULL};
    long deadline = weft_test_now_ms() + 30000;

    for (;;) {
        char *out = NULL;
        long consumers = 0;
        assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
        for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            char name[256];
            long c = 0;
            if (sscanf(line, "%255s %ld", name, &c) == 2 && strcmp(name, queue) == 0) {
                consumers = c;
            }
        }
        free(out);
        if (consumers >= 1) {
            return;
        }
        if (weft_test_now_ms() >= deadline) {
            fail_msg("no consumer on %s after 30 s", queue);
        }
        weft_test_sleep_ms(100);
    }
}

static const char command_workflow[] =
    "{\"name\": \"trust\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
    "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"s\", "
    "\"executor\": \"command\", \"argv\": [\"true\"]}]}\n";

/* A valid task message whose command step touches @p dir/@p file: it would run if accepted. */
static char *
touch_task(const struct env *e, const char *task_id, const char *file, size_t *len)
{
    struct weft__task_msg m;
    char path[700], wf_path[700];
    char *text = NULL;

    snprintf(path, sizeof(path), "%s/%s", e->dir, file);
    snprintf(wf_path, sizeof(wf_path), "%s/workflow.json", e->dir);
    memset(&m, 0, sizeof(m));
    m.run_id = "forged-run";
    snprintf(m.task_id, sizeof(m.task_id), "%s", task_id);
    m.seq = 1;
    m.attempt = 1;
    m.step_id = "s";
    m.kind = "command";
    m.agent = "command";
    m.task = "touch";
    m.spec = json_pack("{s:[s,s]}", "argv", "touch", path);
    m.workflow_path = wf_path;
    m.workflow = json_loads(command_workflow, 0, NULL);
    assert_non_null(m.workflow);
    assert_weft_ok(weft__task_msg_encode(&m, &text, len));
    json_decref(m.spec);
    json_decref(m.workflow);
    return text;
}

/* Publish @p body as a task through weft's own publish path, with @p msg's headers (a
 * signature or not), and wait for the broker's confirm. */
static void
publish_task(const struct env *e, struct weft__broker_msg *msg, const char *body, size_t len)
{
    struct weft__broker_config cfg;
    struct weft__broker *b = NULL;
    uint64_t seq = 0;
    long deadline = weft_test_now_ms() + 10000;
    char err[512] = "";

    memset(&cfg, 0, sizeof(cfg));
    cfg.url = weft_test_amqp_url(broker);
    cfg.prefix = e->queue_prefix;
    cfg.name = "trust test publisher";
    assert_weft_ok(weft__broker_new(&cfg, &b, err, sizeof(err)));
    assert_weft_ok(weft__broker_connect(b, err, sizeof(err)));
    msg->type = WEFT__MSG_TASK;
    assert_weft_ok(weft__broker_publish(b, "task", false, msg, body, len, &seq));
    for (;;) {
        struct weft__broker_event ev;
        assert_weft_ok(weft__broker_wait(b, 500, &ev));
        if (ev.kind == WEFT__BROKER_CONFIRM && ev.seq >= seq) {
            assert_false(ev.is_nack);
            break;
        }
        assert_true(weft_test_now_ms() < deadline);
    }
    weft__broker_free(b);
}

static void
keys_init(struct weft__dist_keys *k, const char *secret)
{
    char err[256] = "";

    memset(k, 0, sizeof(*k));
    assert_weft_ok(weft__dist_keys_set(k, secret, strlen(secret), NULL, 0, err, sizeof(err)));
}

static size_t
collect(char *data, size_t size, size_t n, void *user)
{
    struct weft__buf *b = user;
    (void)weft__buf_append(b, data, size * n);
    return size * n;
}

/* The worker's /metrics text (NULL when it does not answer). */
static char *
metrics_text(unsigned port)
{
    struct weft__buf b;
    char url[128];
    CURL *c = curl_easy_init();
    CURLcode rc = CURLE_OK;

    weft__buf_init(&b, 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metrics", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

static void
assert_metric(unsigned port, const char *needle)
{
    char *text = metrics_text(port);

    assert_non_null(text);
    if (strstr(text, needle) == NULL) {
        fprintf(stderr, "/metrics lacks \"%s\":\n%s\n", needle, text);
        free(text);
        fail();
    }
    free(text);
}

/* Published straight to the broker: an unsigned task, a forged one (the signature of another
 * body) and one signed with another deployment's key are refused, and nothing runs; the same
 * kind of task signed with the key runs, which shows the refused ones would have. */
static void
test_unsigned_and_forged_tasks_refused(void **state)
{
    struct env e;
    struct weft__dist_keys key, other;
    struct weft__broker_msg msg;
    char sig[WEFT__SIGN_LEN], dead[300], dispatch[300], addr[64];
    const char *ids[] = {
        "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"};
    unsigned port = weft_test_free_port();
    char *body = NULL, *decoy = NULL;
    size_t len = 0, decoy_len = 0;
    long deadline = 0;
    pid_t w = 0;

    (void)state;
    env_init(&e, "refuse", KEY);
    weft_test_write_file(e.dir, "workflow.json", command_workflow);
    weft_test_write_file(e.dir, "script.json", "{\"responses\": {}}");
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    {
        const char *extra[] = {"--metrics-addr", addr, NULL};
        w = start_worker(&e, "w", extra);
    }
    snprintf(dispatch, sizeof(dispatch), "%stask_dispatch_queue", e.queue_prefix);
    snprintf(dead, sizeof(dead), "%stask_dead_letter_queue", e.queue_prefix);
    wait_consumer(dispatch);
    keys_init(&key, KEY);
    keys_init(&other, OTHER_KEY);

    /* Unsigned. */
    body = touch_task(&e, ids[0], "pwned-unsigned", &len);
    memset(&msg, 0, sizeof(msg));
    msg.message_id = ids[0];
    publish_task(&e, &msg, body, len);
    free(body);

    /* Forged: a genuine signature of a harmless task, on a body that touches a file. */
    decoy = touch_task(&e, ids[1], "harmless", &decoy_len);
    body = touch_task(&e, ids[1], "pwned-forged", &len);
    memset(&msg, 0, sizeof(msg));
    msg.message_id = ids[1];
    msg.type = WEFT__MSG_TASK;
    assert_weft_ok(weft__dist_sign(&key, &msg, decoy, decoy_len, sig));
    publish_task(&e, &msg, body, len);
    free(body);
    free(decoy);

    /* Signed with a key this deployment does not hold. */
    body = touch_task(&e, ids[2], "pwned-other-key", &len);
    memset(&msg, 0, sizeof(msg));
    msg.message_id = ids[2];
    msg.type = WEFT__MSG_TASK;
    assert_weft_ok(weft__dist_sign(&other, &msg, body, len, sig));
    publish_task(&e, &msg, body, len);
    free(body);

    /* All three went to the dead letters unread. */
    wait_ready(dead, 3);
    assert_false(file_exists(&e, "pwned-unsigned"));
    assert_false(file_exists(&e, "pwned-forged"));
    assert_false(file_exists(&e, "pwned-other-key"));
    assert_false(file_exists(&e, "harmless"));
    assert_log(&e, "w.log", "tasks must be signed: key ");
    assert_log(&e, "w.log", "task 11111111-1111-4111-8111-111111111111 refused (unsigned)");
    assert_log(&e, "w.log", "task 22222222-2222-4222-8222-222222222222 refused (forged)");
    assert_log(&e, "w.log", "task 33333333-3333-4333-8333-333333333333 refused (unknown_key)");
    assert_no_log(&e, "w.log", KEY);
    assert_no_log(&e, "w.log", " started: step ");
    assert_metric(port, "weft_dist_messages_refused_total{reason=\"unsigned\"} 1");
    assert_metric(port, "weft_dist_messages_refused_total{reason=\"forged\"} 1");
    assert_metric(port, "weft_dist_messages_refused_total{reason=\"unknown_key\"} 1");

    /* The same kind of task, signed with the key: it runs. */
    body = touch_task(&e, ids[3], "signed-ran", &len);
    memset(&msg, 0, sizeof(msg));
    msg.message_id = ids[3];
    msg.type = WEFT__MSG_TASK;
    assert_weft_ok(weft__dist_sign(&key, &msg, body, len, sig));
    publish_task(&e, &msg, body, len);
    free(body);
    deadline = weft_test_now_ms() + 30000;
    while (!file_exists(&e, "signed-ran") && weft_test_now_ms() < deadline) {
        weft_test_sleep_ms(100);
    }
    assert_true(file_exists(&e, "signed-ran"));
    wait_ready(dead, 3); /* nothing more refused */

    stop_worker(w);
    assert_log(&e, "w.log", "3 refused unsigned or forged");
    weft__dist_keys_cleanup(&key);
    weft__dist_keys_cleanup(&other);
    weft_test_rm_rf(e.dir);
}

/* A run whose orchestrator and worker share the key completes, and nothing is refused. */
static void
test_signed_run_completes(void **state)
{
    struct env e;
    char log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "signed", KEY);
    weft_test_write_file(e.dir, "workflow.json", command_workflow);
    weft_test_write_file(e.dir, "script.json", "{\"responses\": {}}");
    w = start_worker(&e, "w", NULL);
    {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor",
                              "amqp",   "-q",  "--no-trace",    NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "run.log", "s:command(completed)");
    assert_log(&e, "run.log", "1 result(s)");
    assert_log(&e, "run.log", "reclaimed, 0 refused");
    stop_worker(w);
    assert_log(&e, "w.log", "1 succeeded");
    assert_log(&e, "w.log", "0 refused unsigned or forged");
    assert_no_log(&e, "w.log", KEY);
    assert_no_log(&e, "run.log", KEY);
    weft_test_rm_rf(e.dir);
}

/* A worker without a key says so at start, runs the task, and sends an unsigned result: the
 * orchestrator, which has a key, refuses it, and the step fails at the run's timeout (a
 * refused result decides nothing, as a lost one). */
static void
test_unsigned_results_refused_by_a_keyed_orchestrator(void **state)
{
    struct env e, keyed;
    char log[700];
    pid_t w = 0;
    long t0 = 0;

    (void)state;
    env_init(&e, "unkeyed", NULL);
    env_init(&keyed, "unkeyed", KEY);
    weft_test_write_file(e.dir, "workflow.json",
                         "{\"name\": \"trust\", \"supervisor\": {\"timeout_s\": 6},"
                         " \"models\": {\"m\": {\"provider\": \"scripted\", \"script\":"
                         " \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\":"
                         " \"s\", \"executor\": \"command\", \"argv\": [\"touch\", \"ran\"]}]}\n");
    weft_test_write_file(e.dir, "script.json", "{\"responses\": {}}");
    w = start_worker(&e, "w", NULL);
    {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor",
                              "amqp",   "-q",  "--no-trace",    NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        t0 = weft_test_now_ms();
        assert_int_not_equal(weft_test_run(argv, keyed.vars, e.dir, log, 120000), 0);
    }
    assert_true(weft_test_now_ms() - t0 >= 5000); /* it waited for a genuine result */
    assert_log(&e, "run.log", "refused (unsigned)");
    assert_log(&e, "run.log", "reclaimed, 1 refused");
    assert_log(&e, "run.log", "0 result(s)");
    stop_worker(w);
    assert_log(&e, "w.log", "tasks are not authenticated");
    assert_log(&e, "w.log", "1 succeeded");
    weft_test_rm_rf(e.dir);
    weft_test_rm_rf(keyed.dir);
}

/* --allow-commands: a step whose program is not on the list fails with a clear error and is
 * counted; the allowed step beside it runs; the worker stays up. */
static void
test_allow_list_refuses_a_command_step(void **state)
{
    struct env e;
    char log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "allow", KEY);
    weft_test_write_file(e.dir, "workflow.json",
                         "{\"name\": \"allow\", \"models\": {\"m\": {\"provider\": \"scripted\","
                         " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                         " \"plan\": [{\"id\": \"ok\", \"executor\": \"command\", \"argv\":"
                         " [\"true\"]}, {\"id\": \"bad\", \"executor\": \"command\", \"argv\":"
                         " [\"touch\", \"made\"]}]}\n");
    weft_test_write_file(e.dir, "script.json", "{\"responses\": {}}");
    {
        const char *extra[] = {"--allow-commands", " true, ls ", NULL};
        w = start_worker(&e, "w", extra);
    }
    {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor",
                              "amqp",   "-q",  "--no-trace",    NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_not_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_false(file_exists(&e, "made"));
    assert_log(&e, "run.log", "ok:command(completed)");
    assert_log(&e, "run.log", "bad:command(failed)");
    assert_log(&e, "w.log", "command 'touch' not allowed on this worker");
    assert_false(weft_test_has_exited(w, NULL));
    stop_worker(w);
    assert_log(&e, "w.log", "1 command(s) refused");
    weft_test_rm_rf(e.dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unsigned_and_forged_tasks_refused),
        cmocka_unit_test(test_signed_run_completes),
        cmocka_unit_test(test_unsigned_results_refused_by_a_keyed_orchestrator),
        cmocka_unit_test(test_allow_list_refuses_a_command_step),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
