/* tests/runtime/test_alerts_fire.c - the shipped alert rules fire on the FIRST event of a label
 * set that did not exist before, in a real Prometheus (Debian's `prometheus`) that scrapes a real
 * `weft serve` every 15 s and evaluates dashboards/weft-alerts.yml every 15 s, as
 * deploy/prometheus/prometheus.yml does in production.
 *
 * Right after a scrape of an empty state (the target is up, no workflow has a series yet), the
 * built `weft` runs, before the next scrape: the stuck-loop example once (exit 3), the
 * swarm-reflection example four times (one breaker trip each) and the code-review example once
 * with an OTLP exporter pointed at a port nobody listens on (its spans fail to export). Each new
 * series therefore appears in Prometheus already above 0, where increase() sees nothing: the
 * test checks that (the rules' old expressions are empty in the same Prometheus) and waits, via
 * /api/v1/alerts, for WeftStuckLoopDetected, WeftCircuitBreakerTripping and WeftTelemetryLost to
 * be `firing` with the values the runs imply. The other rules have a `for:` of 5 minutes or more,
 * or need a broker and workers; dashboards/tests/weft-alerts.test.yml covers them (promtool).
 * It also checks that weft serve exports the series it knows in advance at 0: every watchdog
 * kind and the breaker trips of each workflow it has seen.
 *
 * Fails when prometheus is not installed (`scripts/deps.sh test` installs it). About 50 s: two
 * scrapes before the runs, the one after them, a rule evaluation. */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
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

#define WEFT_BIN WEFT_BINARY_DIR "/weft"

extern char **environ;

/* What the test started, so that a failed assertion still stops them (weft serve's stdout is
 * ctest's pipe: a survivor would hold ctest until its timeout). */
struct fixture {
    char home[64];
    pid_t serve;
    pid_t prom;
};

/* The kinds the stuck-loop watchdog reports (docs/metrics.md). */
static const char *const stuck_kinds[] = {"handoff",          "tool",         "route",
                                          "reflection",       "flow",         "stall",
                                          "iteration_budget", "token_budget", "cost_budget"};

static unsigned short
free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned short port = 0;

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* GET @p path_and_query of Prometheus's HTTP API as JSON; NULL while it does not answer. */
static json_t *
prom_get(unsigned port, const char *path)
{
    long status = 0;
    char *body = serve_proc_get(port, path, 5000, &status);
    json_t *out = NULL;

    if (body != NULL && status == 200) {
        out = json_loads(body, 0, NULL);
    }
    free(body);
    return out;
}

/* The result vector of the instant query @p promql (a new reference; NULL while Prometheus does
 * not answer). */
static json_t *
query(unsigned port, const char *promql)
{
    CURL *curl = curl_easy_init();
    char *escaped = curl_easy_escape(curl, promql, 0);
    char path[2048];
    json_t *answer = NULL;
    json_t *result = NULL;

    assert_non_null(escaped);
    snprintf(path, sizeof(path), "/api/v1/query?query=%s", escaped);
    curl_free(escaped);
    curl_easy_cleanup(curl);
    answer = prom_get(port, path);
    result = json_object_get(json_object_get(answer, "data"), "result");
    if (json_is_array(result)) {
        json_incref(result);
    } else {
        result = NULL;
    }
    json_decref(answer);
    return result;
}

/* The value of the single sample @p promql returns; fails unless there is exactly one. */
static double
query_one(unsigned port, const char *promql)
{
    json_t *r = query(port, promql);
    double v = 0;

    if (json_array_size(r) != 1) {
        fail_msg("%s: expected one sample, got %zu", promql, json_array_size(r));
    }
    v = strtod(json_string_value(json_array_get(json_object_get(json_array_get(r, 0), "value"), 1)),
               NULL);
    json_decref(r);
    return v;
}

/* The timestamp of the last scrape of weft serve that succeeded, or 0 when none has yet. */
static double
last_scrape(unsigned port)
{
    /* timestamp() of the selector itself: of an expression it is the evaluation time. */
    json_t *r = query(port, "timestamp(up{job=\"weft\"}) and up{job=\"weft\"} == 1");
    double t = 0;

    if (json_array_size(r) == 1) {
        t = strtod(
            json_string_value(json_array_get(json_object_get(json_array_get(r, 0), "value"), 1)),
            NULL);
    }
    json_decref(r);
    return t;
}

static pid_t
start_prometheus(const char *home, unsigned serve_port, unsigned prom_port)
{
    char conf[512];
    char flag_conf[600];
    char flag_data[600];
    char listen[64];
    char log_path[512];
    posix_spawn_file_actions_t fa;
    pid_t pid = 0;
    FILE *fp = NULL;

    snprintf(conf, sizeof(conf), "%s/prometheus.yml", home);
    fp = fopen(conf, "w");
    assert_non_null(fp);
    /* deploy/prometheus/prometheus.yml's intervals and rules; the target is this serve. */
    fprintf(fp,
            "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n"
            "rule_files:\n  - %s/dashboards/weft-alerts.yml\n"
            "scrape_configs:\n  - job_name: weft\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%u']\n",
            WEFT_SOURCE_DIR, serve_port);
    assert_int_equal(fclose(fp), 0);
    snprintf(flag_conf, sizeof(flag_conf), "--config.file=%s", conf);
    snprintf(flag_data, sizeof(flag_data), "--storage.tsdb.path=%s/tsdb", home);
    snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%u", prom_port);
    snprintf(log_path, sizeof(log_path), "%s/prometheus.log", home);
    {
        char *argv[] = {"prometheus", flag_conf, flag_data, listen, "--log.level=warn", NULL};
        assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_int_equal(posix_spawnp(&pid, "prometheus", &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
    }
    return pid;
}

/* The alert @p name whose labels include @p label=@p value, from /api/v1/alerts (borrowed from
 * @p alerts), or NULL. */
static json_t *
find_alert(json_t *alerts, const char *name, const char *label, const char *value)
{
    size_t i = 0;
    json_t *a = NULL;

    json_array_foreach(alerts, i, a)
    {
        json_t *labels = json_object_get(a, "labels");
        const char *n = json_string_value(json_object_get(labels, "alertname"));
        const char *v = json_string_value(json_object_get(labels, label));

        if (n != NULL && strcmp(n, name) == 0 && v != NULL && strcmp(v, value) == 0) {
            return a;
        }
    }
    return NULL;
}

static bool
is_firing(json_t *alert)
{
    const char *state = json_string_value(json_object_get(alert, "state"));

    return state != NULL && strcmp(state, "firing") == 0;
}

static void
assert_description(json_t *alert, const char *expected)
{
    const char *d =
        json_string_value(json_object_get(json_object_get(alert, "annotations"), "description"));

    assert_non_null(d);
    assert_string_equal(d, expected);
}

static int
setup(void **state)
{
    static struct fixture fx;

    memset(&fx, 0, sizeof(fx));
    snprintf(fx.home, sizeof(fx.home), "/tmp/weft-alerts-XXXXXX");
    if (mkdtemp(fx.home) == NULL) {
        return -1;
    }
    *state = &fx;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *fx = *state;

    if (fx->prom > 0) {
        kill(fx->prom, SIGTERM);
        waitpid(fx->prom, NULL, 0);
    }
    if (fx->serve > 0) {
        kill(fx->serve, SIGTERM);
        waitpid(fx->serve, NULL, 0);
    }
    weft_test_rmtree(fx->home);
    return 0;
}

static void
test_alerts_fire_on_the_first_event_of_a_new_series(void **state)
{
    struct fixture *fx = *state;
    const char *home = fx->home;
    char endpoint[64];
    char expected[256];
    unsigned serve_port = 0;
    unsigned prom_port = free_port();
    double first = 0;
    double scraped = 0;
    double failed_spans = 0;
    double deadline = 0;
    char *text = NULL;
    long status = 0;
    json_t *answer = NULL;
    json_t *alerts = NULL;

    fx->serve = serve_proc_start(WEFT_BIN, home, &serve_port);
    fx->prom = start_prometheus(home, serve_port, prom_port);

    /* Two scrapes that succeeded, of a state without any run: the first one may come early
     * (Prometheus staggers the targets' first scrapes), from the second on they are 15 s apart,
     * and the runs start right after one. */
    deadline = now_s() + 60;
    while ((first = last_scrape(prom_port)) == 0 && now_s() < deadline) {
        pause_ms(100);
    }
    if (first == 0) {
        fail_msg("prometheus never scraped weft serve (see %s/prometheus.log)", home);
    }
    while ((scraped = last_scrape(prom_port)) == first && now_s() < deadline) {
        pause_ms(100);
    }
    if (scraped == first) {
        fail_msg("prometheus scraped weft serve only once in 60 s");
    }
    assert_true(query_one(prom_port, "count(weft_runs_total) or vector(0)") == 0);

    /* Between this scrape and the next (15 s later): the runs, a second or two in all. */
    {
        const char *stuck[] = {"run", WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json", NULL};
        const char *swarm[] = {"run", WEFT_SOURCE_DIR "/examples/swarm_reflection/workflow.json",
                               NULL};
        const char *review[] = {"run", WEFT_SOURCE_DIR "/examples/code_review/workflow.json", NULL};

        assert_int_equal(serve_proc_run(WEFT_BIN, home, NULL, stuck), 3);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(serve_proc_run(WEFT_BIN, home, NULL, swarm), 0);
        }
        /* Nobody listens there: every span fails to export (exit 4: none delivered). */
        snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", free_port());
        weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
        weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
        weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
        weft_test_setenv("OTEL_BSP_EXPORT_TIMEOUT", "300"); /* gives up at once */
        assert_int_equal(serve_proc_run(WEFT_BIN, home, NULL, review), 4);
        weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
        weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
        weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", NULL);
        weft_test_setenv("OTEL_BSP_EXPORT_TIMEOUT", NULL);
    }
    /* No scrape saw the runs in progress (that would have shown their series at 0 first). */
    if (last_scrape(prom_port) != scraped) {
        fail_msg("a scrape fell during the runs: they took more than a scrape interval");
    }

    /* What weft serve now says: the detections, and the series known in advance at 0. */
    text = serve_proc_get(serve_port, "/metrics", 10000, &status);
    assert_non_null(text);
    assert_int_equal(status, 200);
    for (size_t i = 0; i < sizeof(stuck_kinds) / sizeof(stuck_kinds[0]); i++) {
        char kind[64];
        size_t n = 0;
        double v = 0;

        snprintf(kind, sizeof(kind), "kind=\"%s\"", stuck_kinds[i]);
        v = serve_proc_sum(text, "weft_stuck_loops_total",
                           (const char *const[]){kind, "workflow=\"stuck-handoff\"", NULL}, &n);
        assert_int_equal(n, 1);
        assert_true(v == (strcmp(stuck_kinds[i], "handoff") == 0 ? 1 : 0));
        v = serve_proc_sum(text, "weft_stuck_loops_total",
                           (const char *const[]){kind, "workflow=\"swarm-reflection\"", NULL}, &n);
        assert_int_equal(n, 1);
        assert_true(v == 0);
    }
    assert_true(serve_proc_sum(text, "weft_circuit_breaker_trips_total",
                               (const char *const[]){"workflow=\"swarm-reflection\"", NULL},
                               NULL) == 4);
    assert_true(serve_proc_sum(text, "weft_circuit_breaker_trips_total",
                               (const char *const[]){"workflow=\"stuck-handoff\"", NULL},
                               NULL) == 0);
    failed_spans = serve_proc_sum(text, "weft_spans_failed",
                                  (const char *const[]){"exporter=\"otlp\"", NULL}, NULL);
    assert_true(failed_spans > 0);
    free(text);

    /* Wait for the three alerts to fire: the next scrape, then a rule evaluation. */
    deadline = now_s() + 90;
    for (;;) {
        answer = prom_get(prom_port, "/api/v1/alerts");
        alerts = json_object_get(json_object_get(answer, "data"), "alerts");
        if (is_firing(find_alert(alerts, "WeftStuckLoopDetected", "workflow", "stuck-handoff")) &&
            is_firing(
                find_alert(alerts, "WeftCircuitBreakerTripping", "workflow", "swarm-reflection")) &&
            is_firing(find_alert(alerts, "WeftTelemetryLost", "exporter", "otlp"))) {
            break;
        }
        if (now_s() > deadline) {
            char *dump = answer != NULL ? json_dumps(answer, JSON_COMPACT) : NULL;
            fail_msg("the alerts did not all fire within 90 s: %s", dump != NULL ? dump : "-");
        }
        json_decref(answer);
        pause_ms(500);
    }

    /* The values are the runs' whole counts: the first events counted. */
    {
        json_t *a = find_alert(alerts, "WeftStuckLoopDetected", "workflow", "stuck-handoff");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(a, "labels"), "kind")), "handoff");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(a, "labels"), "severity")), "page");
        assert_description(a, "The stuck-loop watchdog fired 1.00 times in 5 minutes. Find the "
                              "run's trace by its weft.stuck_loop event.");
        a = find_alert(alerts, "WeftCircuitBreakerTripping", "workflow", "swarm-reflection");
        assert_description(a, "4.00 trips in 30 minutes.");
        a = find_alert(alerts, "WeftTelemetryLost", "exporter", "otlp");
        snprintf(expected, sizeof(expected), "%.2f spans dropped or failed in 10 minutes.",
                 failed_spans);
        assert_description(a, expected);
    }
    /* No other instance of these three: the zeros and the other series count nothing. */
    {
        size_t i = 0;
        json_t *a = NULL;

        json_array_foreach(alerts, i, a)
        {
            const char *name =
                json_string_value(json_object_get(json_object_get(a, "labels"), "alertname"));
            if (strcmp(name, "WeftStuckLoopDetected") == 0) {
                assert_ptr_equal(a, find_alert(alerts, name, "workflow", "stuck-handoff"));
            } else if (strcmp(name, "WeftCircuitBreakerTripping") == 0) {
                assert_ptr_equal(a, find_alert(alerts, name, "workflow", "swarm-reflection"));
            } else if (strcmp(name, "WeftTelemetryLost") == 0) {
                assert_ptr_equal(a, find_alert(alerts, name, "exporter", "otlp"));
            }
        }
    }
    json_decref(answer);

    /* Prometheus saw each series born at its value, so the old rules (increase() alone) are
     * empty on the same data: this is the case they missed. */
    assert_true(query_one(prom_port, "min_over_time(weft_stuck_loops_total{workflow=\"stuck-"
                                     "handoff\",kind=\"handoff\"}[5m])") == 1);
    assert_true(query_one(prom_port, "min_over_time(weft_circuit_breaker_trips_total{workflow="
                                     "\"swarm-reflection\"}[5m])") == 4);
    {
        static const char *const old_rules[] = {
            "sum by (workflow, kind) (increase(weft_stuck_loops_total[5m])) > 0",
            "sum by (workflow) (increase(weft_circuit_breaker_trips_total[30m])) > 3",
            "(increase(weft_spans_dropped[10m]) + increase(weft_spans_failed[10m])) > 0",
        };
        for (size_t i = 0; i < sizeof(old_rules) / sizeof(old_rules[0]); i++) {
            json_t *r = query(prom_port, old_rules[i]);
            assert_non_null(r);
            if (json_array_size(r) != 0) {
                fail_msg("%s has samples: the series were not new to Prometheus", old_rules[i]);
            }
            json_decref(r);
        }
    }

    assert_int_equal(kill(fx->prom, SIGTERM), 0);
    assert_int_equal(waitpid(fx->prom, NULL, 0), fx->prom);
    fx->prom = 0;
    serve_proc_stop(fx->serve);
    fx->serve = 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alerts_fire_on_the_first_event_of_a_new_series, setup,
                                        teardown),
    };
    if (system("command -v prometheus >/dev/null 2>&1") != 0) {
        /* A test that cannot start its server fails: `scripts/deps.sh test` installs it. */
        fprintf(stderr, "prometheus is not installed (make deps-test installs it)\n");
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
