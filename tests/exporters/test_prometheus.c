/* tests/exporters/test_prometheus.c - the Prometheus text exposition (format 0.0.4) of a meter:
 * OTel-to-Prometheus naming (sanitised names, unit suffixes, _total), HELP and TYPE for every
 * family before its first measurement, cumulative histogram buckets ending at +Inf with _sum
 * and _count, label escaping, target_info, and a strict line check of the whole output. */
#include "support/weft_test.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

static char *
render(struct weft_meter *m)
{
    char *text = NULL;
    size_t len = 0;

    assert_weft_ok(weft_prometheus_render(m, &text, &len));
    assert_int_equal(strlen(text), len);
    return text;
}

/* Every line is a comment (# HELP / # TYPE) or a sample "name{labels} value". */
static void
assert_parses(const char *text)
{
    regex_t sample;
    regex_t comment;
    const char *line = text;

    assert_int_equal(
        regcomp(&sample,
                "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
                ",?)*\\})? (-?[0-9.e+-]+|\\+Inf|-Inf|NaN)$",
                REG_EXTENDED | REG_NOSUB),
        0);
    assert_int_equal(
        regcomp(&comment, "^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$", REG_EXTENDED | REG_NOSUB),
        0);
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        char buf[1024];
        size_t len = 0;
        assert_non_null(end); /* every line ends with a newline */
        len = (size_t)(end - line);
        assert_true(len < sizeof(buf));
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (regexec(&sample, buf, 0, NULL, 0) != 0 && regexec(&comment, buf, 0, NULL, 0) != 0) {
            fail_msg("not exposition format: '%s'", buf);
        }
        line = end + 1;
    }
    regfree(&sample);
    regfree(&comment);
}

static void
test_prometheus_names_types_and_empty_families(void **state)
{
    struct weft_meter_options o = {.service_name = "svc"};
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct weft_instrument *tokens = NULL;
    struct weft_instrument *g = NULL;
    struct weft_instrument *u = NULL;
    char *text = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(&o, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "weft.stuck_loops", "1",
                                         "Stuck loops detected", NULL, 0, &c));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "gen_ai.client.token.usage",
                                         "{token}", "Tokens", NULL, 0, &tokens));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_GAUGE, "weft.queue.fill", "1",
                                         "Queue fill", NULL, 0, &g));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_UPDOWN_COUNTER, "weft.runs.active",
                                         "{run}", "Active runs", NULL, 0, &u));
    text = render(m);
    /* Families are listed before any measurement. */
    assert_non_null(strstr(text, "# HELP weft_stuck_loops_total Stuck loops detected\n"
                                 "# TYPE weft_stuck_loops_total counter\n"));
    assert_non_null(strstr(text, "# TYPE gen_ai_client_token_usage histogram\n"));
    assert_non_null(strstr(text, "# TYPE weft_queue_fill_ratio gauge\n"));
    assert_non_null(strstr(text, "# TYPE weft_runs_active gauge\n"));
    assert_non_null(strstr(text, "target_info{service_name=\"svc\"} 1\n"));
    assert_null(strstr(text, "weft_stuck_loops_total{")); /* no samples yet */
    assert_parses(text);
    free(text);
    {
        struct weft_attr kind = weft_attr_str("kind", "handoff");
        assert_weft_ok(weft_counter_add(c, 2, &kind, 1));
        assert_weft_ok(weft_gauge_set(g, 0.5, NULL, 0));
        assert_weft_ok(weft_counter_add(u, 3, NULL, 0));
    }
    text = render(m);
    assert_non_null(strstr(text, "weft_stuck_loops_total{kind=\"handoff\"} 2\n"));
    assert_non_null(strstr(text, "weft_queue_fill_ratio 0.5\n"));
    assert_non_null(strstr(text, "weft_runs_active 3\n"));
    assert_parses(text);
    free(text);
    weft_meter_free(m);
}

static void
test_prometheus_histogram_buckets_are_cumulative(void **state)
{
    static const double bounds[] = {0.5, 1, 2.5};
    struct weft_meter *m = NULL;
    struct weft_instrument *h = NULL;
    struct weft_attr agent = weft_attr_str("gen_ai.agent.name", "coder");
    char *text = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM,
                                         "gen_ai.invoke_agent.duration", "s", "Agent duration",
                                         bounds, 3, &h));
    assert_weft_ok(weft_histogram_record(h, 0.2, &agent, 1));
    assert_weft_ok(weft_histogram_record(h, 0.7, &agent, 1));
    assert_weft_ok(weft_histogram_record(h, 0.9, &agent, 1));
    assert_weft_ok(weft_histogram_record(h, 9, &agent, 1));
    text = render(m);
    assert_non_null(
        strstr(text, "# TYPE gen_ai_invoke_agent_duration_seconds histogram\n"
                     "gen_ai_invoke_agent_duration_seconds_bucket{gen_ai_agent_name=\"coder\","
                     "le=\"0.5\"} 1\n"
                     "gen_ai_invoke_agent_duration_seconds_bucket{gen_ai_agent_name=\"coder\","
                     "le=\"1\"} 3\n"
                     "gen_ai_invoke_agent_duration_seconds_bucket{gen_ai_agent_name=\"coder\","
                     "le=\"2.5\"} 3\n"
                     "gen_ai_invoke_agent_duration_seconds_bucket{gen_ai_agent_name=\"coder\","
                     "le=\"+Inf\"} 4\n"
                     "gen_ai_invoke_agent_duration_seconds_sum{gen_ai_agent_name=\"coder\"} "
                     "10.8\n"
                     "gen_ai_invoke_agent_duration_seconds_count{gen_ai_agent_name=\"coder\"} "
                     "4\n"));
    assert_parses(text);
    free(text);
    weft_meter_free(m);
}

/* Bounds print in their shortest exact form, so dashboards can match le="0.04". */
static void
test_prometheus_bounds_print_shortest(void **state)
{
    static const double bounds[] = {0.01, 0.02, 0.04, 0.08, 81.92};
    struct weft_meter *m = NULL;
    struct weft_instrument *h = NULL;
    char *text = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "d", "s", NULL, bounds, 5, &h));
    assert_weft_ok(weft_histogram_record(h, 0.1, NULL, 0));
    text = render(m);
    assert_non_null(strstr(text, "d_seconds_bucket{le=\"0.04\"} 0\n"));
    assert_non_null(strstr(text, "d_seconds_bucket{le=\"0.08\"} 0\n"));
    assert_non_null(strstr(text, "d_seconds_bucket{le=\"81.92\"} 1\n"));
    assert_non_null(strstr(text, "d_seconds_sum 0.1\n"));
    assert_null(strstr(text, "00000000"));
    assert_parses(text);
    free(text);
    weft_meter_free(m);
}

static void
test_prometheus_escapes_label_values_and_sanitises_names(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct weft_attr odd[2] = {weft_attr_str("tool.name", "say \"hi\"\\now\nnext"),
                               weft_attr_str("1st-key", "v")};
    char *text = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "weft.tool/calls..count", "By",
                                         "Help with a \\ and\na newline", NULL, 0, &c));
    assert_weft_ok(weft_counter_add(c, 1, odd, 2));
    text = render(m);
    assert_non_null(strstr(text,
                           "# HELP weft_tool_calls_count_bytes_total Help with a \\\\ and\\na "
                           "newline\n"));
    assert_non_null(strstr(text, "weft_tool_calls_count_bytes_total{_1st_key=\"v\",tool_name=\"say "
                                 "\\\"hi\\\"\\\\now\\nnext\"} 1\n"));
    assert_parses(text);
    free(text);
    weft_meter_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prometheus_names_types_and_empty_families),
        cmocka_unit_test(test_prometheus_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_prometheus_bounds_print_shortest),
        cmocka_unit_test(test_prometheus_escapes_label_values_and_sanitises_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
