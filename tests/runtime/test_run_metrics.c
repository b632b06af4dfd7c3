/* tests/runtime/test_run_metrics.c - collaboration metrics from real runs, scraped over HTTP
 * from the metrics server on 127.0.0.1: every family listed before the first run, then agent
 * invocations, hand-offs, loops by kind, verdicts, runs by status and GenAI token histograms
 * with the values the scripted runs imply; /healthz and unknown paths.
 *
 * Against the built binaries: the counts of a run agree between `weft run --json`, the stored
 * run row and a real `weft serve` scrape (per-run snapshots in the state store), a run killed
 * with SIGKILL keeps its metrics up to its last checkpoint, and `weft serve` keeps answering
 * scrapes while 150 slow clients hold connections open, closing them after its idle timeout. */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT_BIN        WEFT_BINARY_DIR "/weft"
#define EXAMPLE_CLARIFY WEFT_SOURCE_DIR "/examples/clarify/workflow.json"

extern char **environ;

struct body {
    char *data;
    size_t len;
};

static size_t
on_data(char *p, size_t size, size_t n, void *ud)
{
    struct body *b = ud;
    char *grown = realloc(b->data, b->len + size * n + 1);
    assert_non_null(grown);
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* GET path from the server; returns the body (free it) and the status. */
static char *
get(struct weft_metrics_server *srv, const char *path, long *status)
{
    CURL *curl = curl_easy_init();
    struct body b = {NULL, 0};
    char url[128];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", weft_metrics_server_port(srv), path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(curl);
    return b.data != NULL ? b.data : strdup("");
}

static void
run_example(const char *name, struct weft_meter *meter, const char *dir)
{
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    struct weft_run_options ro;
    char path[300];
    char state[300];

    snprintf(path, sizeof(path), "%s/examples/%s/workflow.json", WEFT_SOURCE_DIR, name);
    snprintf(state, sizeof(state), "%s/state.db", dir);
    assert_weft_ok(weft_workflow_load(path, &wf, NULL));
    memset(&ro, 0, sizeof(ro));
    ro.meter = meter;
    ro.workspace = dir;
    ro.state_path = state;
    ro.capture_content = -1;
    assert_weft_ok(weft_run(wf, &ro, &r, NULL, 0));
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    weft_run_result_free(r);
    weft_workflow_free(wf);
}

static void
test_run_metrics_scraped_after_real_runs(void **state)
{
    struct weft_meter *meter = NULL;
    struct weft_metrics_server *srv = NULL;
    char dir[] = "/tmp/weft-metrics-XXXXXX";
    char *text = NULL;
    long status = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_register(meter));
    assert_weft_ok(weft_metrics_server_start(meter, "127.0.0.1:0", &srv));
    assert_true(weft_metrics_server_port(srv) > 0);
    /* Every family is there before the first run. */
    text = get(srv, "/metrics", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(text, "# TYPE weft_agent_invocations_total counter\n"));
    assert_non_null(strstr(text, "# TYPE weft_handoffs_total counter\n"));
    assert_non_null(strstr(text, "# TYPE weft_loop_iterations_total counter\n"));
    assert_non_null(strstr(text, "# TYPE gen_ai_client_token_usage histogram\n"));
    assert_non_null(strstr(text, "# TYPE gen_ai_client_operation_duration_seconds histogram\n"));
    assert_non_null(strstr(text, "# TYPE weft_runs_active gauge\n"));
    assert_non_null(strstr(text, "weft_runs_oldest_active_age_seconds 0\n"));
    free(text);
    run_example("code_review", meter, dir);
    run_example("swarm_reflection", meter, dir);
    text = get(srv, "/metrics", &status);
    assert_non_null(strstr(text, "weft_agent_invocations_total{gen_ai_agent_name=\"reviewer\","
                                 "outcome=\"success\",workflow=\"code-review\"} 4\n"));
    assert_non_null(strstr(text, "weft_handoffs_total{from=\"reviewer\",to=\"fixer\","
                                 "workflow=\"code-review\"} 3\n"));
    assert_non_null(strstr(text, "weft_loop_iterations_total{kind=\"replan\","
                                 "workflow=\"code-review\"} 6\n"));
    assert_non_null(strstr(text, "weft_loop_iterations_total{kind=\"circuit_breaker\","
                                 "workflow=\"swarm-reflection\"} 1\n"));
    assert_non_null(strstr(text, "weft_circuit_breaker_trips_total{workflow=\"swarm-reflection\"} "
                                 "1\n"));
    assert_non_null(strstr(text, "weft_reflection_verdicts_total{gen_ai_agent_name=\"coder\","
                                 "verdict=\"REJECTED\",workflow=\"swarm-reflection\"} 1\n"));
    assert_non_null(
        strstr(text, "weft_runs_total{status=\"completed\",workflow=\"code-review\"} 1\n"));
    assert_non_null(strstr(text, "weft_runs_active{workflow=\"code-review\"} 0\n"));
    /* The code review made 26 LLM calls: 26 input and 26 output token samples. */
    assert_non_null(strstr(text, "gen_ai_client_token_usage_count{gen_ai_operation_name=\"chat\","
                                 "gen_ai_provider_name=\"weft.scripted\",gen_ai_request_model="
                                 "\"scripted-gpt-4o-mini\",gen_ai_token_type=\"input\"} 26\n"));
    assert_non_null(strstr(text, "weft_tool_calls_total{gen_ai_tool_name=\"write_file\","
                                 "outcome=\"success\",workflow=\"code-review\"} 5\n"));
    free(text);
    text = get(srv, "/healthz", &status);
    assert_int_equal(status, 200);
    assert_string_equal(text, "ok\n");
    free(text);
    text = get(srv, "/nope", &status);
    assert_int_equal(status, 404);
    free(text);
    weft_metrics_server_stop(srv);
    weft_meter_free(meter);
    weft_test_rmtree(dir);
}

static void
test_run_metrics_server_rejects_bad_addresses(void **state)
{
    struct weft_meter *meter = NULL;
    struct weft_metrics_server *srv = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_err(weft_metrics_server_start(meter, "localhost", &srv), WEFT_EINVAL);
    assert_weft_err(weft_metrics_server_start(meter, "not-an-ip:80", &srv), WEFT_EINVAL);
    assert_weft_err(weft_metrics_server_start(meter, "127.0.0.1:99999", &srv), WEFT_EINVAL);
    assert_null(srv);
    weft_meter_free(meter);
}

static void
make_home(char *home, size_t len)
{
    snprintf(home, len, "/tmp/weft-counts-XXXXXX");
    assert_non_null(mkdtemp(home));
}

static void
remove_home(const char *home)
{
    weft_test_rmtree(home);
}

static double
metric(const char *text, const char *name, const char *label)
{
    const char *labels[] = {label, NULL};
    return serve_proc_sum(text, name, label != NULL ? labels : NULL, NULL);
}

/* One example run through `weft run --json`; its JSON, its stored row and a `weft serve`
 * scrape of a WEFT_HOME that holds only it must tell the same numbers. */
static void
assert_counts_agree(const char *example)
{
    char home[64];
    char wf[256];
    char out[128];
    char state_path[128];
    char ws[128];
    json_t *j = NULL;
    json_t *v = NULL;
    json_t *agents = json_object();
    const char *key = NULL;
    struct weft_run_info *infos = NULL;
    size_t count = 0;
    size_t i = 0;
    unsigned port = 0;
    pid_t pid = 0;
    long status = 0;
    char *text = NULL;
    char label[256];

    make_home(home, sizeof(home));
    snprintf(wf, sizeof(wf), "%s/examples/%s/workflow.json", WEFT_SOURCE_DIR, example);
    snprintf(out, sizeof(out), "%s/run.json", home);
    snprintf(ws, sizeof(ws), "%s/ws", home);
    snprintf(state_path, sizeof(state_path), "%s/state.db", home);
    {
        const char *args[] = {"run", wf, "--json", "--no-trace", "--workspace", ws, NULL};
        int rc = serve_proc_run(WEFT_BIN, home, out, args);
        assert_true(rc == 0 || rc == 1);
    }
    j = json_load_file(out, 0, NULL);
    assert_non_null(j);
    pid = serve_proc_start(WEFT_BIN, home, &port);
    text = serve_proc_get(port, "/metrics", 10000, &status);
    assert_int_equal(status, 200);
    serve_proc_stop(pid);

    /* The run by its status. */
    snprintf(label, sizeof(label), "status=\"%s\"",
             json_string_value(json_object_get(j, "status")));
    assert_true(metric(text, "weft_runs_total", label) == 1.0);
    assert_true(metric(text, "weft_runs_total", NULL) == 1.0);
    /* Loops by kind. */
    json_object_foreach(json_object_get(j, "loops"), key, v)
    {
        snprintf(label, sizeof(label), "kind=\"%s\"", key);
        if (metric(text, "weft_loop_iterations_total", label) != (double)json_integer_value(v)) {
            fail_msg("%s: loops %s: --json %lld, /metrics %g", example, key,
                     (long long)json_integer_value(v),
                     metric(text, "weft_loop_iterations_total", label));
        }
    }
    /* LLM calls, tokens, cost, tool calls, corrections, verdicts. */
    assert_true(metric(text, "gen_ai_client_operation_duration_seconds_count", NULL) ==
                (double)json_integer_value(json_object_get(j, "llm_calls")));
    assert_true(metric(text, "gen_ai_client_token_usage_sum", "gen_ai_token_type=\"input\"") ==
                (double)json_integer_value(json_object_get(j, "input_tokens")));
    assert_true(metric(text, "gen_ai_client_token_usage_sum", "gen_ai_token_type=\"output\"") ==
                (double)json_integer_value(json_object_get(j, "output_tokens")));
    assert_true(fabs(metric(text, "weft_llm_cost_USD_total", NULL) -
                     json_real_value(json_object_get(j, "cost_usd"))) < 1e-9);
    if (metric(text, "weft_tool_calls_total", NULL) !=
        (double)json_integer_value(json_object_get(j, "tool_calls"))) {
        fail_msg("%s: tool calls: --json %lld, /metrics %g", example,
                 (long long)json_integer_value(json_object_get(j, "tool_calls")),
                 metric(text, "weft_tool_calls_total", NULL));
    }
    assert_true(metric(text, "weft_corrections_total", NULL) ==
                (double)json_integer_value(json_object_get(j, "corrections")));
    assert_true(metric(text, "weft_reflection_verdicts_total", NULL) ==
                (double)json_array_size(json_object_get(j, "verdicts")));
    /* Spans: recorded, dropped and failed as the summary counts them (after shutdown). */
    assert_true(
        metric(text, "weft_spans_ended", NULL) ==
        (double)json_integer_value(json_object_get(json_object_get(j, "spans"), "recorded")));
    assert_true(
        metric(text, "weft_spans_exported", "exporter=\"store\"") ==
        (double)json_integer_value(json_object_get(json_object_get(j, "spans"), "recorded")));
    assert_true(
        metric(text, "weft_spans_dropped", NULL) ==
        (double)json_integer_value(json_object_get(json_object_get(j, "spans"), "dropped")));
    assert_true(metric(text, "weft_spans_failed", NULL) ==
                (double)json_integer_value(json_object_get(json_object_get(j, "spans"), "failed")));
    /* Agent steps by agent and outcome (fan-out items count for the agent that ran them). */
    json_array_foreach(json_object_get(j, "steps"), i, v)
    {
        const char *st = json_string_value(json_object_get(v, "status"));
        char k[256];
        const char *id = json_string_value(json_object_get(v, "id"));
        json_t *other = NULL;
        size_t o = 0;
        bool is_fan_out = false;

        /* A fan-out node is no agent invocation: its items are, each for its own agent. */
        json_array_foreach(json_object_get(j, "steps"), o, other)
        {
            const char *oid = json_string_value(json_object_get(other, "id"));
            is_fan_out =
                is_fan_out || (strncmp(oid, id, strlen(id)) == 0 && oid[strlen(id)] == '[');
        }
        if (is_fan_out || strcmp(json_string_value(json_object_get(v, "executor")), "agent") != 0 ||
            (strcmp(st, "completed") != 0 && strcmp(st, "failed") != 0)) {
            continue;
        }
        snprintf(k, sizeof(k), "gen_ai_agent_name=\"%s\",outcome=\"%s\"",
                 json_string_value(json_object_get(v, "agent")),
                 strcmp(st, "completed") == 0 ? "success" : "failure");
        /* A flow node's loop runs its step again (each attempt is an invocation); an agent's
         * reflection retries happen inside one invocation. */
        json_object_set_new(agents, k,
                            json_integer(json_integer_value(json_object_get(agents, k)) +
                                         (strchr(id, '.') != NULL
                                              ? json_integer_value(json_object_get(v, "attempts"))
                                              : 1)));
    }
    assert_true(json_object_size(agents) > 0);
    json_object_foreach(agents, key, v)
    {
        if (metric(text, "weft_agent_invocations_total", key) != (double)json_integer_value(v)) {
            fail_msg("%s: invocations {%s}: steps %lld, /metrics %g", example, key,
                     (long long)json_integer_value(v),
                     metric(text, "weft_agent_invocations_total", key));
        }
    }
    /* The stored row says the same. */
    assert_weft_ok(weft_runs_list(state_path, 10, &infos, &count));
    assert_int_equal(count, 1);
    assert_string_equal(infos[0].run_id, json_string_value(json_object_get(j, "run_id")));
    assert_string_equal(infos[0].status, json_string_value(json_object_get(j, "status")));
    assert_int_equal(infos[0].input_tokens, json_integer_value(json_object_get(j, "input_tokens")));
    assert_int_equal(infos[0].output_tokens,
                     json_integer_value(json_object_get(j, "output_tokens")));
    assert_true(fabs(infos[0].cost_usd - json_real_value(json_object_get(j, "cost_usd"))) < 1e-9);
    assert_int_equal(infos[0].corrections, json_integer_value(json_object_get(j, "corrections")));
    {
        json_t *row_loops = json_loads(infos[0].loops, 0, NULL);
        assert_true(json_equal(row_loops, json_object_get(j, "loops")));
        json_decref(row_loops);
    }
    weft_run_infos_free(infos, count);
    json_decref(agents);
    json_decref(j);
    free(text);
    remove_home(home);
}

static void
test_run_metrics_counts_agree_between_json_row_and_serve(void **state)
{
    (void)state;
    assert_counts_agree("code_review");
    assert_counts_agree("swarm_reflection");
    assert_counts_agree("translation"); /* fan-out */
    assert_counts_agree("correction");
}

/* A run killed with SIGKILL while a step is in flight keeps the metrics of the steps before
 * it, and `weft serve` counts it as interrupted (its process is gone), not in progress. */
static void
test_run_metrics_killed_run_keeps_its_metrics(void **state)
{
    char home[64];
    char path[128];
    char ws[128];
    const char *argv[8];
    pid_t pid = 0;
    int status = 0;
    unsigned port = 0;
    long http = 0;
    char *text = NULL;
    FILE *fp = NULL;

    (void)state;
    make_home(home, sizeof(home));
    snprintf(path, sizeof(path), "%s/script.json", home);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"responses\": {\"a\": {\"act\": [{\"content\": \"one\"}, {\"content\": \"two\"},"
          " {\"content\": \"three\", \"delay_ms\": 20000}]}}}",
          fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/wf.json", home);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"name\": \"killed\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\":"
          " \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
          "{\"id\": \"s1\", \"agent\": \"a\", \"task\": \"first\"},"
          " {\"id\": \"s2\", \"agent\": \"a\", \"task\": \"second\", \"depends_on\": [\"s1\"]},"
          " {\"id\": \"s3\", \"agent\": \"a\", \"task\": \"third\", \"depends_on\": [\"s2\"]}]}",
          fp);
    fclose(fp);
    snprintf(ws, sizeof(ws), "%s/ws", home);
    argv[0] = WEFT_BIN;
    argv[1] = "run";
    argv[2] = path;
    argv[3] = "-q";
    argv[4] = "--no-trace";
    argv[5] = "--workspace";
    argv[6] = ws;
    argv[7] = NULL;
    weft_test_setenv("WEFT_HOME", home);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, NULL, NULL, (char *const *)argv, environ), 0);
    /* Wait until the store holds the two finished steps' invocations (written by the
     * checkpoint after step 2, or by the flusher one interval later), then kill. */
    for (int i = 0; i < 1000; i++) {
        struct timespec ts = {0, 10000000};
        port = 0;
        {
            char db[128];
            char cmd[400];
            FILE *p = NULL;
            char buf[64] = "";
            snprintf(db, sizeof(db), "%s/state.db", home);
            snprintf(cmd, sizeof(cmd),
                     "sqlite3 '%s' \"SELECT COALESCE(SUM(value), 0) FROM run_metrics WHERE name ="
                     " 'weft.agent.invocations'\" 2>/dev/null",
                     db);
            p = popen(cmd, "r");
            if (p != NULL) {
                (void)fgets(buf, sizeof(buf), p);
                pclose(p);
            }
            if (strtod(buf, NULL) >= 2.0) {
                break;
            }
        }
        nanosleep(&ts, NULL);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    pid = serve_proc_start(WEFT_BIN, home, &port);
    text = serve_proc_get(port, "/metrics", 10000, &http);
    assert_int_equal(http, 200);
    serve_proc_stop(pid);
    assert_true(metric(text, "weft_agent_invocations_total",
                       "gen_ai_agent_name=\"a\",outcome=\"success\",workflow=\"killed\"") == 2.0);
    assert_true(metric(text, "gen_ai_client_operation_duration_seconds_count", NULL) == 2.0);
    /* weft serve found the killed run's process gone: interrupted, as weft runs says. */
    assert_true(metric(text, "weft_runs_active", "workflow=\"killed\"") == 0.0);
    assert_true(metric(text, "weft_runs_total", "status=\"interrupted\"") == 1.0);
    assert_true(metric(text, "weft_spans_ended", NULL) > 0.0);
    free(text);
    remove_home(home);
}

/* Slow clients: 150 connections that send part of a request and then nothing do not keep
 * scrapes out, and the server closes them after its idle timeout. */
static void
test_run_metrics_serve_survives_slow_clients(void **state)
{
    enum { SLOW = 150 };
    char home[64];
    int fds[SLOW];
    unsigned port = 0;
    pid_t pid = 0;
    long http = 0;
    char *text = NULL;
    size_t closed = 0;
    struct timespec t0;
    struct timespec t1;

    (void)state;
    make_home(home, sizeof(home));
    pid = serve_proc_start(WEFT_BIN, home, &port);
    for (int i = 0; i < SLOW; i++) {
        struct sockaddr_in sa;
        static const char partial[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";

        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(send(fds[i], partial, sizeof(partial) - 1, MSG_NOSIGNAL),
                         (ssize_t)(sizeof(partial) - 1));
    }
    /* Each slow client sends one more header line: it is alive, just slow. */
    for (int i = 0; i < SLOW; i++) {
        (void)send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
    }
    /* A scrape gets through while all of them hold their connection: when it is answered,
     * none of theirs was closed yet (a server that served the scrape only once the idle
     * timeout had cut the slow clients would show them closed). No upper bound on the time:
     * under ThreadSanitizer, starting a thread per connection takes a second or more. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    text = serve_proc_get(port, "/metrics", 30000, &http);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(text);
    assert_int_equal(http, 200);
    assert_non_null(strstr(text, "# TYPE weft_runs_total counter"));
    free(text);
    for (int i = 0; i < SLOW; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        assert_int_equal(poll(&p, 1, 0), 0);
    }
    /* The server closes silent connections after its idle timeout (3 s): each must be
     * closed (EOF or reset) within 6 s of the last byte it sent. */
    for (int i = 0; i < SLOW; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        char buf[256];
        struct timespec now;
        long left = 0;
        int rc = 0;

        clock_gettime(CLOCK_MONOTONIC, &now);
        left = 6000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        rc = poll(&p, 1, left > 0 ? (int)left : 0);
        if (rc == 1) {
            ssize_t n = recv(fds[i], buf, sizeof(buf), 0);
            while (n > 0) { /* an error answer, then the close */
                n = recv(fds[i], buf, sizeof(buf), 0);
            }
            closed += n == 0 || (n < 0 && errno == ECONNRESET) ? 1 : 0;
        }
        close(fds[i]);
    }
    assert_int_equal(closed, SLOW);
    /* And it still serves. */
    text = serve_proc_get(port, "/healthz", 2000, &http);
    assert_int_equal(http, 200);
    free(text);
    serve_proc_stop(pid);
    remove_home(home);
    fprintf(stderr, "scrape under %d slow clients: %.1f ms\n", SLOW,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
}

/* Span counts per exporter: with the local store and an OTLP exporter whose collector refuses
 * the connection, `weft serve` shows the store's spans exported and OTLP's failed, including
 * the spans that failed at shutdown (after the run's last checkpoint). */
static void
test_run_metrics_serve_labels_span_counts_by_exporter(void **state)
{
    char home[64];
    char ws[128];
    unsigned port = 0;
    pid_t pid = 0;
    long http = 0;
    char *text = NULL;
    const char *args[] = {"run", EXAMPLE_CLARIFY, "-q", "--no-trace", "--workspace", ws, NULL};
    double ended = 0;

    (void)state;
    make_home(home, sizeof(home));
    snprintf(ws, sizeof(ws), "%s/ws", home);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1");
    weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    (void)serve_proc_run(WEFT_BIN, home, NULL, args);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", NULL);
    pid = serve_proc_start(WEFT_BIN, home, &port);
    text = serve_proc_get(port, "/metrics", 10000, &http);
    assert_int_equal(http, 200);
    serve_proc_stop(pid);
    ended = metric(text, "weft_spans_ended", NULL);
    assert_true(ended > 0);
    assert_true(metric(text, "weft_spans_exported", "exporter=\"store\"") == ended);
    assert_true(metric(text, "weft_spans_failed", "exporter=\"store\"") == 0);
    assert_true(metric(text, "weft_spans_exported", "exporter=\"otlp\"") == 0);
    assert_true(metric(text, "weft_spans_failed", "exporter=\"otlp\"") == ended);
    /* Export calls, failures and the time spent in them, per exporter. */
    assert_true(metric(text, "weft_exporter_exports", "exporter=\"store\"") >= 1);
    assert_true(metric(text, "weft_exporter_export_failures", "exporter=\"store\"") == 0);
    assert_true(metric(text, "weft_exporter_export_failures", "exporter=\"otlp\"") >= 1);
    assert_true(metric(text, "weft_exporter_export_failures", "exporter=\"otlp\"") ==
                metric(text, "weft_exporter_exports", "exporter=\"otlp\""));
    /* OTLP retried a refused connection with back-off before it gave up. */
    assert_true(metric(text, "weft_exporter_export_time_seconds", "exporter=\"otlp\"") > 0.1);
    free(text);
    remove_home(home);
}

/* Runs stored before per-run snapshots existed (no run_metrics table, or a run without rows)
 * still count in `weft serve`, from their run rows and steps. */
static void
test_run_metrics_serve_counts_runs_without_snapshots(void **state)
{
    char home[64];
    char ws[128];
    char cmd[300];
    unsigned port = 0;
    pid_t pid = 0;
    long http = 0;
    char *text = NULL;
    const char *args[] = {"run",         WEFT_SOURCE_DIR "/examples/code_review/workflow.json",
                          "-q",          "--no-trace",
                          "--workspace", ws,
                          NULL};

    (void)state;
    make_home(home, sizeof(home));
    snprintf(ws, sizeof(ws), "%s/ws", home);
    assert_int_equal(serve_proc_run(WEFT_BIN, home, NULL, args), 0);
    snprintf(cmd, sizeof(cmd), "sqlite3 '%s/state.db' 'DROP TABLE run_metrics'", home);
    assert_int_equal(system(cmd), 0);
    pid = serve_proc_start(WEFT_BIN, home, &port);
    text = serve_proc_get(port, "/metrics", 10000, &http);
    assert_int_equal(http, 200);
    serve_proc_stop(pid);
    assert_true(metric(text, "weft_runs_total", "status=\"completed\",workflow=\"code-review\"") ==
                1.0);
    assert_true(metric(text, "weft_agent_invocations_total",
                       "gen_ai_agent_name=\"reviewer\",outcome=\"success\"") == 4.0);
    assert_true(metric(text, "weft_loop_iterations_total", "kind=\"replan\"") == 6.0);
    free(text);
    remove_home(home);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_metrics_scraped_after_real_runs),
        cmocka_unit_test(test_run_metrics_server_rejects_bad_addresses),
        cmocka_unit_test(test_run_metrics_counts_agree_between_json_row_and_serve),
        cmocka_unit_test(test_run_metrics_killed_run_keeps_its_metrics),
        cmocka_unit_test(test_run_metrics_serve_survives_slow_clients),
        cmocka_unit_test(test_run_metrics_serve_labels_span_counts_by_exporter),
        cmocka_unit_test(test_run_metrics_serve_counts_runs_without_snapshots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
