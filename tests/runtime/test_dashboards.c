/* tests/runtime/test_dashboards.c - the shipped Grafana dashboard and alert rules against a
 * real `weft serve`: every scripted example (examples/STAR/workflow.json but openai) and the
 * stuck-loop example (examples/stuck_loops/handoff.json) run through the built `weft` binary into a
 * throwaway WEFT_HOME, `weft serve` listens on 127.0.0.1 port 0, and every weft_STAR or gen_ai_STAR
 * metric that a panel or an alert rule queries must have samples in its scrape (so a renamed
 * metric, or one `weft serve` does not export, breaks this test, not a dashboard in production).
 * The dashboard is also checked for valid JSON, a datasource variable and no hard-coded
 * datasource uid, unique panel ids with a grid position. A promtool rule unit test built from
 * two real scrapes (before and after the stuck-loop example) checks that the shipped stuck-loop
 * alert fires (skipped when promtool is not installed). */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include <ctype.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define WEFT_BIN WEFT_BINARY_DIR "/weft"

/* The shipped stuck-loop example: a tester/coder ping-pong the watchdog breaks (exit 3). */
#define STUCK_EXAMPLE WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json"

struct world {
    char home[64];
    char *before;  /* scrape after the examples, before the stuck run */
    char *after;   /* scrape after everything */
    json_t *names; /* metric names with at least one sample in the last scrape */
};

static struct world world;

static char *
scrape(const char *home)
{
    unsigned port = 0;
    pid_t pid = serve_proc_start(WEFT_BIN, home, &port);
    long status = 0;
    char *text = serve_proc_get(port, "/metrics", 10000, &status);

    assert_non_null(text);
    assert_int_equal(status, 200);
    serve_proc_stop(pid);
    return text;
}

/* Names of the samples of a scrape (histograms show as their _bucket/_sum/_count samples). */
static json_t *
sample_names(const char *text)
{
    json_t *names = json_object();

    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t n = strcspn(line, "{ \n");

        if (line[0] != '#' && n > 0 && n < 256) {
            char name[256];
            memcpy(name, line, n);
            name[n] = '\0';
            json_object_set_new(names, name, json_true());
        }
        if (end == NULL) {
            break;
        }
        line = end + 1;
    }
    return names;
}

static int
setup_world(void **state)
{
    glob_t g;
    char ws[128];

    (void)state;
    memset(&world, 0, sizeof(world));
    snprintf(world.home, sizeof(world.home), "/tmp/weft-dash-XXXXXX");
    if (mkdtemp(world.home) == NULL) {
        return -1;
    }
    snprintf(ws, sizeof(ws), "%s/ws", world.home);
    if (glob(WEFT_SOURCE_DIR "/examples/*/workflow.json", 0, NULL, &g) != 0) {
        return -1;
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *args[] = {"run", g.gl_pathv[i], "-q", "--no-trace", "--workspace", ws, NULL};
        if (strstr(g.gl_pathv[i], "/openai/") != NULL) {
            continue; /* needs a real API key */
        }
        /* Examples may end in any status; what matters is what they recorded. */
        (void)serve_proc_run(WEFT_BIN, world.home, NULL, args);
    }
    globfree(&g);
    world.before = scrape(world.home);
    {
        const char *args[] = {"run", STUCK_EXAMPLE, "-q", "--no-trace", "--workspace", ws, NULL};
        if (serve_proc_run(WEFT_BIN, world.home, NULL, args) != 3) {
            return -1; /* the example must end as stuck */
        }
    }
    world.after = scrape(world.home);
    world.names = sample_names(world.after);
    return 0;
}

static int
teardown_world(void **state)
{
    char cmd[128];

    (void)state;
    free(world.before);
    free(world.after);
    json_decref(world.names);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", world.home);
    return system(cmd) == 0 ? 0 : -1;
}

/* Check every metric an expression names against the scrape; @return how many it named.
 * Label names (before = or !=, or inside by/without (...)) are not metrics. */
static size_t
check_expr(const char *expr, const char *where)
{
    bool is_in_grouping = false;
    bool was_by = false;
    size_t checked = 0;

    for (const char *p = expr; *p != '\0';) {
        if (isalpha((unsigned char)*p) || *p == '_') {
            char word[256];
            size_t n = 0;
            const char *after = NULL;
            while ((isalnum((unsigned char)*p) || *p == '_' || *p == ':') && n < 255) {
                word[n++] = *p++;
            }
            word[n] = '\0';
            after = p;
            while (*after == ' ') {
                after++;
            }
            was_by = strcmp(word, "by") == 0 || strcmp(word, "without") == 0;
            if (!is_in_grouping && *after != '=' && *after != '!' &&
                (strncmp(word, "weft_", 5) == 0 || strncmp(word, "gen_ai_", 7) == 0)) {
                if (json_object_get(world.names, word) == NULL) {
                    fail_msg("%s queries %s, which `weft serve` does not export after the "
                             "examples ran",
                             where, word);
                }
                checked++;
            }
        } else {
            if (*p == '(' && was_by) {
                is_in_grouping = true;
            } else if (*p == ')') {
                is_in_grouping = false;
            }
            if (*p != ' ') {
                was_by = false;
            }
            p++;
        }
    }
    return checked;
}

/* Every "uid" in the document is the datasource variable. */
static void
assert_no_hard_coded_uid(const json_t *v)
{
    const char *key = NULL;
    json_t *child = NULL;
    size_t i = 0;

    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, key, child)
        {
            if (strcmp(key, "uid") == 0) {
                assert_string_equal(json_string_value(child), "${datasource}");
            }
            assert_no_hard_coded_uid(child);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child)
        {
            assert_no_hard_coded_uid(child);
        }
    }
}

static void
test_dashboards_grafana_queries_exported_metrics(void **state)
{
    char path[300];
    json_error_t jerr;
    json_t *dash = NULL;
    json_t *panel = NULL;
    json_t *ids = json_object();
    size_t i = 0;
    size_t checked = 0;
    bool has_datasource_var = false;

    (void)state;
    snprintf(path, sizeof(path), "%s/dashboards/weft-grafana.json", WEFT_SOURCE_DIR);
    dash = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (dash == NULL) {
        fail_msg("%s:%d: %s", path, jerr.line, jerr.text);
    }
    assert_no_hard_coded_uid(dash);
    json_array_foreach(json_object_get(json_object_get(dash, "templating"), "list"), i, panel)
    {
        has_datasource_var =
            has_datasource_var ||
            strcmp(json_string_value(json_object_get(panel, "type")), "datasource") == 0;
    }
    assert_true(has_datasource_var);
    json_array_foreach(json_object_get(dash, "panels"), i, panel)
    {
        char id[32];
        json_t *target = NULL;
        size_t t = 0;
        snprintf(id, sizeof(id), "%lld",
                 (long long)json_integer_value(json_object_get(panel, "id")));
        assert_null(json_object_get(ids, id));
        json_object_set_new(ids, id, json_true());
        assert_non_null(json_object_get(panel, "gridPos"));
        json_array_foreach(json_object_get(panel, "targets"), t, target)
        {
            const char *expr = json_string_value(json_object_get(target, "expr"));
            assert_non_null(expr);
            {
                char where[300];
                snprintf(where, sizeof(where), "panel '%s'",
                         json_string_value(json_object_get(panel, "title")));
                checked += check_expr(expr, where);
            }
        }
    }
    assert_true(checked >= 14);
    json_decref(ids);
    json_decref(dash);
}

/* The expressions of the alert rules: `expr: text` on one line, or `expr: |` followed by a
 * block of deeper-indented lines. */
static void
test_dashboards_alert_rules_query_exported_metrics(void **state)
{
    FILE *fp = fopen(WEFT_SOURCE_DIR "/dashboards/weft-alerts.yml", "r");
    char line[1024];
    char expr[4096] = "";
    char alert[256] = "?";
    size_t block_indent = 0;
    bool is_in_block = false;
    size_t checked = 0;
    size_t rules = 0;

    (void)state;
    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp) != NULL) {
        size_t indent = strspn(line, " ");
        const char *text = line + indent;
        const char *a = strstr(line, "- alert: ");

        if (is_in_block) {
            if (indent > block_indent || text[0] == '\n') {
                strncat(expr, text, sizeof(expr) - strlen(expr) - 1);
                continue;
            }
            checked += check_expr(expr, alert);
            is_in_block = false;
        }
        if (a != NULL) {
            snprintf(alert, sizeof(alert), "alert %.*s", (int)strcspn(a + 9, "\n"), a + 9);
            rules++;
        } else if (strncmp(text, "expr:", 5) == 0) {
            const char *rest = text + 5 + strspn(text + 5, " ");
            if (rest[0] == '|') {
                is_in_block = true;
                block_indent = indent;
                expr[0] = '\0';
            } else {
                checked += check_expr(rest, alert);
            }
        }
    }
    if (is_in_block) {
        checked += check_expr(expr, alert);
    }
    fclose(fp);
    assert_true(rules >= 9);
    assert_true(checked >= 12);
}

/* The shipped stuck-loop alert fires on input series taken from real scrapes: each
 * weft_stuck_loops_total series of the stuck workflow holds its value before the run for
 * three minutes, then its value after. */
static void
test_dashboards_stuck_loop_alert_fires_on_a_real_scrape(void **state)
{
    char path[256];
    char cmd[512];
    FILE *fp = NULL;
    size_t series = 0;

    (void)state;
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fail_msg("promtool is not installed (make deps-test installs Debian's prometheus)");
    }
    snprintf(path, sizeof(path), "%s/stuck.test.yml", world.home);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "rule_files:\n  - %s/dashboards/weft-alerts.yml\nevaluation_interval: 1m\n"
            "tests:\n  - interval: 1m\n    input_series:\n",
            WEFT_SOURCE_DIR);
    for (const char *line = world.after; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        static const char name[] = "weft_stuck_loops_total{";

        if (strncmp(line, name, sizeof(name) - 1) == 0 && len < 1024) {
            char sample[1024];
            char *value = NULL;
            double before = 0;
            double after = 0;
            size_t n = 0;

            snprintf(sample, sizeof(sample), "%.*s", (int)len, line);
            value = strrchr(sample, ' ');
            assert_non_null(value);
            *value++ = '\0';
            after = strtod(value, NULL);
            /* The same series in the earlier scrape, or 0 when it had none. */
            {
                const char *labels[] = {strchr(sample, '{'), NULL};
                char exact[1024];
                snprintf(exact, sizeof(exact), "%s", labels[0]);
                labels[0] = exact;
                before = serve_proc_sum(world.before, "weft_stuck_loops_total", labels, &n);
            }
            if (strstr(sample, "workflow=\"stuck-handoff\"") != NULL) {
                assert_true(after > before);
                fprintf(fp, "      - series: '%s'\n        values: '%g %g %g %g %g %g'\n", sample,
                        before, before, before, after, after, after);
                series++;
            }
        }
        if (end == NULL) {
            break;
        }
        line = end + 1;
    }
    assert_true(series >= 1); /* the stuck run's detection is in the scrape */
    fprintf(
        fp,
        "    alert_rule_test:\n      - eval_time: 4m\n        alertname: WeftStuckLoopDetected\n"
        "        exp_alerts:\n          - exp_labels: {severity: page, workflow: stuck-handoff,"
        " kind: handoff}\n            exp_annotations:\n"
        "              summary: \"weft workflow stuck-handoff is stuck (handoff)\"\n"
        "              description: \"The stuck-loop watchdog fired %.2f times in 5 minutes."
        " Find the run's trace by its weft.stuck_loop event.\"\n"
        "      - eval_time: 2m\n        alertname: WeftStuckLoopDetected\n"
        "        exp_alerts: []\n",
        serve_proc_sum(world.after, "weft_stuck_loops_total",
                       (const char *const[]){"workflow=\"stuck-handoff\"", NULL}, NULL));
    fclose(fp);
    snprintf(cmd, sizeof(cmd), "promtool test rules '%s' >&2", path);
    assert_int_equal(system(cmd), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dashboards_grafana_queries_exported_metrics),
        cmocka_unit_test(test_dashboards_alert_rules_query_exported_metrics),
        cmocka_unit_test(test_dashboards_stuck_loop_alert_fires_on_a_real_scrape),
    };
    return cmocka_run_group_tests(tests, setup_world, teardown_world);
}
