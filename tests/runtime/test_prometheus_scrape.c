/* tests/runtime/test_prometheus_scrape.c - a real Prometheus scrapes weft: the test starts
 * Debian's prometheus on 127.0.0.1 with a scrape config pointed at weft's metrics server (after
 * a scripted run), waits for a scrape, and queries Prometheus's HTTP API for weft's series.
 * The metrics must parse and carry the values the run implies. Fails when the prometheus binary
 * is not installed (`make deps-test` installs it). */
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static unsigned short
free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned short port = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

struct body {
    char *data;
    size_t len;
};

static size_t
on_data(char *p, size_t size, size_t n, void *ud)
{
    struct body *b = ud;
    char *grown = realloc(b->data, b->len + size * n + 1);
    if (grown == NULL) {
        return 0;
    }
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* Prometheus's instant query; NULL while it is not answering. */
static json_t *
query(unsigned short port, const char *promql)
{
    CURL *curl = curl_easy_init();
    struct body b = {NULL, 0};
    char url[512];
    char *escaped = curl_easy_escape(curl, promql, 0);
    json_t *out = NULL;

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/query?query=%s", port, escaped);
    curl_free(escaped);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    if (curl_easy_perform(curl) == CURLE_OK && b.data != NULL) {
        out = json_loads(b.data, 0, NULL);
    }
    free(b.data);
    curl_easy_cleanup(curl);
    return out;
}

static void
test_prometheus_scrapes_weft(void **state)
{
    struct weft_meter *meter = NULL;
    struct weft_metrics_server *srv = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    struct weft_run_options ro;
    char dir[] = "/tmp/weft-prom-XXXXXX";
    char path[300];
    char conf[300];
    char data[300];
    char listen[64];
    char flag_conf[400];
    char flag_data[400];
    unsigned short prom_port = free_port();
    pid_t pid = 0;
    json_t *answer = NULL;
    FILE *fp = NULL;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_register(meter));
    snprintf(path, sizeof(path), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    assert_weft_ok(weft_workflow_load(path, &wf, NULL));
    memset(&ro, 0, sizeof(ro));
    ro.meter = meter;
    ro.workspace = dir;
    snprintf(data, sizeof(data), "%s/state.db", dir);
    ro.state_path = data;
    assert_weft_ok(weft_run(wf, &ro, &r, NULL, 0));
    assert_weft_ok(weft_metrics_server_start(meter, "127.0.0.1:0", &srv));
    snprintf(conf, sizeof(conf), "%s/prometheus.yml", dir);
    fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp,
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: weft\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%u']\n",
            weft_metrics_server_port(srv));
    fclose(fp);
    snprintf(data, sizeof(data), "%s/tsdb", dir);
    snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%u", prom_port);
    snprintf(flag_conf, sizeof(flag_conf), "--config.file=%s", conf);
    snprintf(flag_data, sizeof(flag_data), "--storage.tsdb.path=%s", data);
    {
        char *argv[] = {"prometheus", flag_conf, flag_data, listen, "--log.level=warn", NULL};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
        assert_int_equal(posix_spawnp(&pid, "prometheus", &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
    }
    /* Wait (up to 60 s) until Prometheus has scraped weft at least once. */
    for (int i = 0; i < 600; i++) {
        struct timespec ts = {0, 100000000};
        answer = query(prom_port, "weft_runs_total");
        if (answer != NULL &&
            json_array_size(json_object_get(json_object_get(answer, "data"), "result")) > 0) {
            break;
        }
        json_decref(answer);
        answer = NULL;
        nanosleep(&ts, NULL);
    }
    assert_non_null(answer);
    {
        json_t *res = json_array_get(json_object_get(json_object_get(answer, "data"), "result"), 0);
        json_t *metric = json_object_get(res, "metric");
        assert_string_equal(json_string_value(json_object_get(metric, "workflow")), "code-review");
        assert_string_equal(json_string_value(json_object_get(metric, "status")), "completed");
        assert_string_equal(json_string_value(json_array_get(json_object_get(res, "value"), 1)),
                            "1");
    }
    json_decref(answer);
    answer = query(prom_port, "sum(weft_handoffs_total{from=\"reviewer\",to=\"fixer\"})");
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(
                json_array_get(json_object_get(json_object_get(answer, "data"), "result"), 0),
                "value"),
            1)),
        "3");
    json_decref(answer);
    /* The scrape parsed cleanly: the target is up and no sample was rejected. */
    answer = query(prom_port, "up{job=\"weft\"}");
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(
                json_array_get(json_object_get(json_object_get(answer, "data"), "result"), 0),
                "value"),
            1)),
        "1");
    json_decref(answer);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    weft_metrics_server_stop(srv);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    weft_meter_free(meter);
    weft_test_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prometheus_scrapes_weft),
    };
    if (system("command -v prometheus >/dev/null 2>&1") != 0) {
        /* A test that cannot start its server fails: `make test` installs prometheus. */
        fprintf(stderr, "prometheus is not installed (make deps-test installs it)\n");
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
