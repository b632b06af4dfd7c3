/* tests/runtime/test_run_metrics.c - collaboration metrics from real runs, scraped over HTTP
 * from the metrics server on 127.0.0.1: every family listed before the first run, then agent
 * invocations, hand-offs, loops by kind, verdicts, runs by status and GenAI token histograms
 * with the values the scripted runs imply; /healthz and unknown paths. */
#include "support/weft_test.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    char cmd[100];
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
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_metrics_scraped_after_real_runs),
        cmocka_unit_test(test_run_metrics_server_rejects_bad_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
