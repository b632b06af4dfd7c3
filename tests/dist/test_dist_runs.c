/* tests/dist/test_dist_runs.c - results queues per run, against a real RabbitMQ broker started
 * by the test, with the executor and the worker in this process:
 * - two executors sharing a queue prefix run a run each at the same moment on one worker: each
 *   takes exactly its own results (none foreign, none duplicated, none from the shared queue),
 *   the worker never falls back to the shared queue, and both runs' queues are gone afterwards;
 * - a task whose reply_to names a queue that does not exist, or a queue that is not a results
 *   queue, has its result published to the shared results queue (the broker returned the first;
 *   the worker refused the second name), counted as fallbacks. */
#include "support/amqp_server.h"
#include "support/weft_test.h"

#include "base/time.h"
#include "base/uuid.h"
#include "runtime/dist/amqp_executor.h"
#include "runtime/dist/broker.h"
#include "runtime/dist/message.h"
#include "runtime/dist/worker.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>
#include <weft/runtime.h>

#define TASKS 24

static struct weft_test_amqp *broker;
static struct weft_workflow *wf;

static int
group_setup(void **state)
{
    char err[1024];
    char path[1024];
    struct weft_diags diags;

    (void)state;
    broker = weft_test_amqp_start(err, sizeof(err));
    if (broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1; /* fails the group: never a silent skip */
    }
    snprintf(path, sizeof(path), "%s/examples/support_triage/workflow_fixed.json", WEFT_SOURCE_DIR);
    memset(&diags, 0, sizeof(diags));
    if (weft_workflow_load(path, &wf, &diags) != WEFT_OK) {
        fprintf(stderr, "cannot load %s\n", path);
        weft_diags_cleanup(&diags);
        return -1;
    }
    weft_diags_cleanup(&diags);
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    weft_workflow_free(wf);
    return weft_test_amqp_stop(broker) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* A worker on its own thread                                                                  */

struct worker_thread {
    pthread_t thread;
    struct weft__worker_config cfg;
    volatile sig_atomic_t stop;
    struct weft__worker_stats stats;
    weft_err rc;
    char err[512];
};

static void *
worker_main(void *arg)
{
    struct worker_thread *w = arg;

    w->rc = weft__worker_run(&w->cfg, &w->stats, w->err, sizeof(w->err));
    return NULL;
}

/* A worker on the test broker's @p prefix, its metrics on @p meter (NULL: none), started on its
 * thread. */
static void
worker_start(struct worker_thread *w, const char *prefix, const char *id, struct weft_meter *meter)
{
    memset(w, 0, sizeof(*w));
    w->cfg.url = weft_test_amqp_url(broker);
    w->cfg.prefix = prefix;
    w->cfg.concurrency = 4;
    w->cfg.id = id;
    w->cfg.stop = &w->stop;
    w->cfg.connect_timeout_ms = 30000;
    w->cfg.meter = meter;
    assert_int_equal(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

static void
worker_stop(struct worker_thread *w)
{
    w->stop = 1;
    assert_int_equal(pthread_join(w->thread, NULL), 0);
    if (w->rc != WEFT_OK) {
        fail_msg("worker: %s: %s", weft_strerror(w->rc), w->err);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* One run driven straight through an executor                                                 */

struct run_thread {
    pthread_t thread;
    const char *prefix;
    char run_id[16];
    pthread_barrier_t *start;
    size_t done;
    size_t completed;
    uint64_t submitted_ns; /* when its first task was submitted */
    uint64_t last_result_ns;
    struct weft__amqp_executor_stats stats;
    weft_err rc;
    char err[512];
};

static void
on_done(void *user_data, const struct weft__step_result *r)
{
    struct run_thread *t = user_data;
    uint64_t now = weft__monotonic_ns();

    t->done++;
    t->completed += r->status == STEP_COMPLETED ? 1 : 0;
    t->last_result_ns = now;
}

static void *
run_main(void *arg)
{
    struct run_thread *t = arg;
    struct weft__amqp_executor_config cfg;
    struct weft__executor *ex = NULL;
    char uuids[TASKS][WEFT_UUID_LEN + 1];
    uint64_t deadline = 0;

    memset(&cfg, 0, sizeof(cfg));
    cfg.url = weft_test_amqp_url(broker);
    cfg.prefix = t->prefix;
    cfg.max_in_flight = TASKS;
    t->rc = weft__amqp_executor_new(&cfg, wf, 30000, &ex, t->err, sizeof(t->err));
    (void)pthread_barrier_wait(t->start); /* both executors exist: submit at once */
    if (t->rc != WEFT_OK) {
        return NULL;
    }
    t->submitted_ns = weft__monotonic_ns();
    for (size_t i = 0; i < TASKS && t->rc == WEFT_OK; i++) {
        struct weft__step_task task;
        char step_id[16];

        weft__uuid_v4(uuids[i]);
        snprintf(step_id, sizeof(step_id), "s%zu", i + 1);
        memset(&task, 0, sizeof(task));
        task.task_id = i + 1;
        task.attempt = 1;
        task.step_id = step_id;
        task.kind = "noop";
        task.agent = "noop";
        task.task = "nothing";
        task.context = "{}";
        task.run_id = t->run_id;
        task.task_uuid = uuids[i];
        t->rc = ex->ops->submit(ex, &task, on_done, t);
    }
    deadline = weft__monotonic_ns() + 60000000000ull;
    while (t->rc == WEFT_OK && t->done < TASKS && weft__monotonic_ns() < deadline) {
        weft_err e = ex->ops->poll(ex, 500);
        if (e != WEFT_OK && e != WEFT_ETIMEDOUT) {
            t->rc = e;
        }
    }
    weft__amqp_executor_stats(ex, &t->stats);
    ex->ops->destroy(ex);
    return NULL;
}

/* The names of the queues of @p prefix that exist, and the messages of @p queue (-1: none). */
static long
queue_messages(const char *prefix, const char *queue, size_t *run_queues)
{
    const char *args[] = {"list_queues", "-q", "name", "messages", NULL};
    char *out = NULL;
    char run_prefix[128];
    long messages = -1;

    snprintf(run_prefix, sizeof(run_prefix), "%sresults.", prefix);
    *run_queues = 0;
    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[256];
        long n = 0;

        if (sscanf(line, "%255s %ld", name, &n) != 2) {
            continue;
        }
        if (strncmp(name, run_prefix, strlen(run_prefix)) == 0) {
            (*run_queues)++;
        }
        if (strcmp(name, queue) == 0) {
            messages = n;
        }
    }
    free(out);
    return messages;
}

static void
test_two_runs_at_once_take_only_their_own_results(void **state)
{
    struct worker_thread w;
    struct run_thread runs[2];
    pthread_barrier_t start;
    size_t run_queues = 0;
    struct weft_meter *meter = NULL;
    char *text = NULL;
    size_t text_len = 0;

    (void)state;
    assert_int_equal(weft_meter_new(NULL, &meter), WEFT_OK);
    worker_start(&w, "two.", "two-w1", meter);
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
    for (size_t i = 0; i < 2; i++) {
        memset(&runs[i], 0, sizeof(runs[i]));
        runs[i].prefix = "two.";
        snprintf(runs[i].run_id, sizeof(runs[i].run_id), "%s",
                 i == 0 ? "aaaa00000001" : "bbbb00000002");
        runs[i].start = &start;
        assert_int_equal(pthread_create(&runs[i].thread, NULL, run_main, &runs[i]), 0);
    }
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(runs[i].thread, NULL), 0);
    }
    pthread_barrier_destroy(&start);
    worker_stop(&w);
    for (size_t i = 0; i < 2; i++) {
        const struct weft__amqp_executor_stats *s = &runs[i].stats;

        if (runs[i].rc != WEFT_OK) {
            fail_msg("run %s: %s: %s", runs[i].run_id, weft_strerror(runs[i].rc), runs[i].err);
        }
        assert_int_equal(runs[i].done, TASKS);
        assert_int_equal(runs[i].completed, TASKS);
        assert_int_equal(s->results, TASKS);
        assert_int_equal(s->foreign, 0);
        assert_int_equal(s->duplicates, 0);
        assert_int_equal(s->shared_results, 0);
        assert_int_equal(s->dead_lettered, 0);
        assert_int_equal(s->malformed, 0);
    }
    /* The runs went on at the same time: each had tasks out before the other's last result. */
    assert_true(runs[0].submitted_ns < runs[1].last_result_ns);
    assert_true(runs[1].submitted_ns < runs[0].last_result_ns);
    assert_int_equal(w.stats.succeeded, 2 * TASKS);
    assert_int_equal(w.stats.rejected, 0);
    assert_int_equal(w.stats.fallbacks, 0);
    /* The counter is there at 0 before any fallback: an alert on increase() sees the first. */
    assert_int_equal(weft_prometheus_render(meter, &text, &text_len), WEFT_OK);
    if (strstr(text, "weft_worker_results_fallback_total 0") == NULL) {
        fail_msg("no weft_worker_results_fallback_total 0 in:\n%s", text);
    }
    free(text);
    weft_meter_free(meter);
    /* Each run deleted its queue at its end; nothing waits on the shared one. */
    assert_int_equal(queue_messages("two.", "two.task_results_queue", &run_queues), 0);
    assert_int_equal(run_queues, 0);
}

/* Publish a noop task of run "fb0000000001" with @p reply_to, through @p b. */
static void
publish_task(struct weft__broker *b, const char *reply_to, char uuid[WEFT_UUID_LEN + 1])
{
    struct weft__task_msg m;
    struct weft__broker_msg msg;
    char *body = NULL;
    size_t len = 0;
    uint64_t seq = 0;

    weft__uuid_v4(uuid);
    memset(&m, 0, sizeof(m));
    m.run_id = (char *)"fb0000000001";
    snprintf(m.task_id, sizeof(m.task_id), "%s", uuid);
    m.seq = 1;
    m.attempt = 1;
    m.step_id = (char *)"s1";
    m.kind = (char *)"noop";
    m.agent = (char *)"noop";
    m.task = (char *)"nothing";
    m.context = json_object();
    m.sent_ns = weft__now_ns();
    assert_int_equal(weft__task_msg_encode(&m, &body, &len), WEFT_OK);
    json_decref(m.context);
    memset(&msg, 0, sizeof(msg));
    msg.message_id = uuid;
    msg.correlation_id = uuid;
    msg.type = WEFT__MSG_TASK;
    msg.reply_to = reply_to;
    msg.attempt = 1;
    msg.timestamp_ms = weft__now_ns() / 1000000u;
    assert_int_equal(weft__broker_publish(b, "task", false, &msg, body, len, &seq), WEFT_OK);
    free(body);
}

static void
test_result_for_a_missing_queue_goes_to_the_shared_one(void **state)
{
    struct worker_thread w;
    struct weft__broker_config bc;
    struct weft__broker *b = NULL;
    char err[512];
    char uuids[2][WEFT_UUID_LEN + 1];
    bool seen[2] = {false, false};
    uint64_t deadline = 0;
    struct weft_meter *meter = NULL;
    char *text = NULL;
    size_t text_len = 0;

    (void)state;
    memset(&bc, 0, sizeof(bc));
    bc.url = weft_test_amqp_url(broker);
    bc.prefix = "fb.";
    bc.name = "test publisher";
    assert_int_equal(weft__broker_new(&bc, &b, err, sizeof(err)), WEFT_OK);
    assert_int_equal(weft__broker_connect(b, err, sizeof(err)), WEFT_OK);
    /* A run's queue nobody declared (its run ended), and a queue that is not a results queue
     * (a result there would reach the workers as a task). */
    publish_task(b, "fb.results.gone00000001", uuids[0]);
    publish_task(b, "fb.task_dispatch_queue", uuids[1]);
    assert_int_equal(weft_meter_new(NULL, &meter), WEFT_OK);
    worker_start(&w, "fb.", "fb-w1", meter);
    assert_int_equal(weft__broker_consume(b, "fb.task_results_queue"), WEFT_OK);
    deadline = weft__monotonic_ns() + 30000000000ull;
    while (!(seen[0] && seen[1]) && weft__monotonic_ns() < deadline) {
        struct weft__broker_event ev;
        struct weft__result_msg r;

        assert_int_equal(weft__broker_wait(b, 200, &ev), WEFT_OK);
        if (ev.kind != WEFT__BROKER_DELIVERY) {
            continue;
        }
        assert_int_equal(weft__result_msg_decode(ev.body, ev.body_len, &r, err, sizeof(err)),
                         WEFT_OK);
        for (size_t i = 0; i < 2; i++) {
            seen[i] = seen[i] || strcmp(r.task_id, uuids[i]) == 0;
        }
        assert_true(r.is_success);
        weft__result_msg_cleanup(&r);
        assert_int_equal(weft__broker_ack(b, ev.delivery_tag), WEFT_OK);
    }
    worker_stop(&w);
    assert_true(seen[0]);
    assert_true(seen[1]);
    assert_int_equal(w.stats.succeeded, 2);
    assert_int_equal(w.stats.fallbacks, 2);
    assert_int_equal(w.stats.rejected, 0); /* no result reached the dispatch queue */
    /* ... and on the worker's /metrics, as its stop line says. */
    assert_int_equal(weft_prometheus_render(meter, &text, &text_len), WEFT_OK);
    if (strstr(text, "weft_worker_results_fallback_total 2") == NULL) {
        fail_msg("no weft_worker_results_fallback_total 2 in:\n%s", text);
    }
    free(text);
    weft_meter_free(meter);
    weft__broker_free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_runs_at_once_take_only_their_own_results),
        cmocka_unit_test(test_result_for_a_missing_queue_goes_to_the_shared_one),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
