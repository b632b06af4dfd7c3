/* tests/runtime/test_dashboards.c - the shipped Grafana dashboard and alert rules against a
 * real `weft serve`: every scripted example (examples/STAR/workflow.json but openai) and the
 * stuck-loop example (examples/stuck_loops/handoff.json) run through the built `weft` binary into a
 * throwaway WEFT_HOME, `weft serve` listens on 127.0.0.1 port 0, and every weft_STAR or gen_ai_STAR
 * metric that a panel or an alert rule queries must have samples in its scrape (so a renamed
 * metric, or one `weft serve` does not export, breaks this test, not a dashboard in production).
 * The dashboard is also checked for valid JSON, a datasource variable and no hard-coded
 * datasource uid, unique panel ids with grid positions that do not overlap, and every query
 * parses (promtool). Every metric a panel or a rule queries must also be a row of the table in
 * docs/metrics.md; the distributed-run families (broker, tasks, workers) need a broker and
 * workers this test does not start: here they are checked against the table, and
 * tests/dist/test_serve_dist.c (label `servers`) checks that each one the dashboard and the
 * alert rules query has samples in the scrapes of a real `weft serve` with a broker and of a
 * real `weft worker` after a distributed run. A promtool rule
 * unit test built from two real scrapes (before and after the stuck-loop example) checks that
 * the shipped stuck-loop alert fires (fails when promtool is not installed). */
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
    char *before;       /* scrape after the examples, before the stuck run */
    char *after;        /* scrape after everything */
    json_t *names;      /* metric names with at least one sample in the last scrape */
    json_t *documented; /* Prometheus name -> type ("counter", "histogram"...) in docs/metrics.md */
};

/* Families of distributed runs: `weft serve` has them only with a broker (WEFT_BROKER_URL) and
 * runs dispatched through it, and the weft_worker_STAR ones only a `weft worker` exports. This test
 * starts neither, so here a query of these is checked against docs/metrics.md; that they have
 * samples in real scrapes is tests/dist/test_serve_dist.c's check (a `servers` test: it starts
 * RabbitMQ, serve, a worker and a distributed run). */
static const char *const distributed_families[] = {
    "weft_broker_queue_depth",
    "weft_workers_live",
    "weft_broker_up",
    "weft_tasks_in_flight",
    "weft_tasks_dispatched_total",
    "weft_tasks_redeliveries_total",
    "weft_tasks_dead_lettered_total",
    "weft_tasks_duplicate_results_total",
    "weft_task_dispatch_to_start_seconds",
    "weft_task_start_to_end_seconds",
    "weft_worker_tasks_total",
    "weft_worker_busy",
    "weft_worker_concurrency",
};

/* Families of a PostgreSQL span store: this test's `weft serve` keeps its spans in SQLite, so
 * a query of these is checked against docs/metrics.md here, and
 * tests/serve_pg/test_serve_pg.c (label `servers`) checks they have samples over PostgreSQL. */
static const char *const postgresql_families[] = {
    "weft_store_partitions",
};

static struct world world;

static char *
scrape(const char *home)
{
    unsigned port = 0;
    pid_t pid = 0;
    long status = 0;
    char *text = NULL;

    /* With retention on, as a production serve runs: its families are exported too. */
    weft_test_setenv("WEFT_RETENTION", "3650d");
    weft_test_setenv("WEFT_MAX_STORE_SIZE", "10GiB");
    pid = serve_proc_start(WEFT_BIN, home, &port);
    text = serve_proc_get(port, "/metrics", 10000, &status);
    weft_test_setenv("WEFT_RETENTION", NULL);
    weft_test_setenv("WEFT_MAX_STORE_SIZE", NULL);

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

/* The Prometheus names of the metric table in docs/metrics.md: each row's second column holds
 * one or more `name`s, the third the type. */
static json_t *
documented_names(void)
{
    FILE *fp = fopen(WEFT_SOURCE_DIR "/docs/metrics.md", "r");
    json_t *names = json_object();
    char line[2048];

    if (fp == NULL) {
        return names;
    }
    while (fgets(line, sizeof(line), fp) != NULL) {
        char *col[4] = {NULL, NULL, NULL, NULL};
        char *p = line;
        size_t n = 0;

        if (line[0] != '|') {
            continue;
        }
        /* Columns: | instrument | Prometheus name | type | labels | */
        while (n < 4 && (p = strchr(p, '|')) != NULL) {
            *p++ = '\0';
            col[n++] = p;
        }
        if (n < 4) {
            continue;
        }
        {
            char type[32];
            size_t len = strcspn(col[2] + strspn(col[2], " "), " |");
            snprintf(type, sizeof(type), "%.*s", (int)len, col[2] + strspn(col[2], " "));
            for (char *q = strchr(col[1], '`'); q != NULL; q = strchr(q, '`')) {
                char *end = strchr(q + 1, '`');
                if (end == NULL) {
                    break;
                }
                *end = '\0';
                if (strncmp(q + 1, "weft_", 5) == 0 || strncmp(q + 1, "gen_ai_", 7) == 0) {
                    json_object_set_new(names, q + 1, json_string(type));
                }
                q = end + 1;
            }
        }
    }
    fclose(fp);
    return names;
}

static bool
is_distributed_family(const char *family)
{
    for (size_t i = 0; i < sizeof(distributed_families) / sizeof(distributed_families[0]); i++) {
        if (strcmp(family, distributed_families[i]) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < sizeof(postgresql_families) / sizeof(postgresql_families[0]); i++) {
        if (strcmp(family, postgresql_families[i]) == 0) {
            return true; /* not exported by this test's serve either */
        }
    }
    return false;
}

/* The family a queried sample name belongs to in docs/metrics.md (a histogram's _bucket, _sum
 * and _count samples belong to the histogram), or NULL when the table does not list it. */
static const char *
documented_family(const char *name, char *buf, size_t size)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    size_t len = strlen(name);

    if (json_object_get(world.documented, name) != NULL) {
        return name;
    }
    for (size_t i = 0; i < 3; i++) {
        size_t sl = strlen(suffixes[i]);
        json_t *type = NULL;
        if (len > sl && strcmp(name + len - sl, suffixes[i]) == 0 && len - sl < size) {
            snprintf(buf, size, "%.*s", (int)(len - sl), name);
            type = json_object_get(world.documented, buf);
            if (type != NULL && strcmp(json_string_value(type), "histogram") == 0) {
                return buf;
            }
        }
    }
    return NULL;
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
    world.documented = documented_names();
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
    json_decref(world.documented);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", world.home);
    return system(cmd) == 0 ? 0 : -1;
}

/* Check every metric an expression names against docs/metrics.md and the scrape; @return how
 * many it named. Label names (inside {...}, or inside the (...) after by, without, on, ignoring,
 * group_left, group_right) and quoted strings are not metrics. The documented families of the
 * metrics are added to @p families (NULL: not collected). */
static size_t
check_expr(const char *expr, const char *where, json_t *families)
{
    bool is_in_grouping = false;
    bool was_by = false;
    int braces = 0;
    size_t checked = 0;

    for (const char *p = expr; *p != '\0';) {
        if (*p == '"' || *p == '\'' || *p == '`') {
            const char *close = strchr(p + 1, *p);
            p = close != NULL ? close + 1 : p + strlen(p);
            was_by = false;
        } else if (isalpha((unsigned char)*p) || *p == '_') {
            char word[256];
            size_t n = 0;
            while ((isalnum((unsigned char)*p) || *p == '_' || *p == ':') && n < 255) {
                word[n++] = *p++;
            }
            word[n] = '\0';
            was_by = strcmp(word, "by") == 0 || strcmp(word, "without") == 0 ||
                     strcmp(word, "on") == 0 || strcmp(word, "ignoring") == 0 ||
                     strcmp(word, "group_left") == 0 || strcmp(word, "group_right") == 0;
            if (!is_in_grouping && braces == 0 &&
                (strncmp(word, "weft_", 5) == 0 || strncmp(word, "gen_ai_", 7) == 0)) {
                char buf[256];
                const char *family = documented_family(word, buf, sizeof(buf));
                if (family == NULL) {
                    fail_msg("%s queries %s, which the metric table of docs/metrics.md does not "
                             "list",
                             where, word);
                }
                if (!is_distributed_family(family) && json_object_get(world.names, word) == NULL) {
                    fail_msg("%s queries %s, which `weft serve` does not export after the "
                             "examples ran",
                             where, word);
                }
                if (families != NULL) {
                    json_object_set_new(families, family, json_true());
                }
                checked++;
            }
        } else {
            if (*p == '(' && was_by) {
                is_in_grouping = true;
            } else if (*p == ')') {
                is_in_grouping = false;
            } else if (*p == '{') {
                braces++;
            } else if (*p == '}' && braces > 0) {
                braces--;
            }
            if (!isspace((unsigned char)*p)) {
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

/* Two panels' grid rectangles share a cell. */
static bool
grid_overlaps(const json_t *a, const json_t *b)
{
    json_int_t ax = json_integer_value(json_object_get(a, "x"));
    json_int_t ay = json_integer_value(json_object_get(a, "y"));
    json_int_t bx = json_integer_value(json_object_get(b, "x"));
    json_int_t by = json_integer_value(json_object_get(b, "y"));

    return ax < bx + json_integer_value(json_object_get(b, "w")) &&
           bx < ax + json_integer_value(json_object_get(a, "w")) &&
           ay < by + json_integer_value(json_object_get(b, "h")) &&
           by < ay + json_integer_value(json_object_get(a, "h"));
}

static json_t *
load_dashboard(void)
{
    json_error_t jerr;
    json_t *dash = json_load_file(WEFT_SOURCE_DIR "/dashboards/weft-grafana.json",
                                  JSON_REJECT_DUPLICATES, &jerr);

    if (dash == NULL) {
        fail_msg("dashboards/weft-grafana.json:%d: %s", jerr.line, jerr.text);
    }
    return dash;
}

static void
test_dashboards_grafana_queries_exported_metrics(void **state)
{
    json_t *dash = load_dashboard();
    json_t *panel = NULL;
    json_t *panels = json_object_get(dash, "panels");
    json_t *ids = json_object();
    json_t *families = json_object();
    size_t i = 0;
    size_t checked = 0;
    bool has_datasource_var = false;
    bool has_distributed_row = false;

    (void)state;
    assert_no_hard_coded_uid(dash);
    json_array_foreach(json_object_get(json_object_get(dash, "templating"), "list"), i, panel)
    {
        has_datasource_var =
            has_datasource_var ||
            strcmp(json_string_value(json_object_get(panel, "type")), "datasource") == 0;
    }
    assert_true(has_datasource_var);
    json_array_foreach(panels, i, panel)
    {
        char id[32];
        json_t *target = NULL;
        json_t *grid = json_object_get(panel, "gridPos");
        const char *title = json_string_value(json_object_get(panel, "title"));
        size_t t = 0;
        snprintf(id, sizeof(id), "%lld",
                 (long long)json_integer_value(json_object_get(panel, "id")));
        assert_null(json_object_get(ids, id));
        json_object_set_new(ids, id, json_true());
        assert_non_null(grid);
        for (size_t j = 0; j < i; j++) {
            json_t *other = json_array_get(panels, j);
            if (grid_overlaps(grid, json_object_get(other, "gridPos"))) {
                fail_msg("panel '%s' overlaps panel '%s'", title,
                         json_string_value(json_object_get(other, "title")));
            }
        }
        if (strcmp(json_string_value(json_object_get(panel, "type")), "row") == 0) {
            /* A collapsed row keeps its panels inside it, where nothing here would look. */
            assert_false(json_is_true(json_object_get(panel, "collapsed")));
            has_distributed_row = has_distributed_row || strcmp(title, "Distributed") == 0;
        }
        json_array_foreach(json_object_get(panel, "targets"), t, target)
        {
            const char *expr = json_string_value(json_object_get(target, "expr"));
            assert_non_null(expr);
            {
                char where[300];
                snprintf(where, sizeof(where), "panel '%s'", title);
                checked += check_expr(expr, where, families);
            }
        }
    }
    /* The Distributed row shows every family of distributed runs. */
    assert_true(has_distributed_row);
    for (i = 0; i < sizeof(distributed_families) / sizeof(distributed_families[0]); i++) {
        if (json_object_get(world.documented, distributed_families[i]) == NULL) {
            fail_msg("%s is not in docs/metrics.md's table", distributed_families[i]);
        }
        if (json_object_get(families, distributed_families[i]) == NULL) {
            fail_msg("no panel shows %s", distributed_families[i]);
        }
    }
    assert_true(checked >= 38);
    json_decref(families);
    json_decref(ids);
    json_decref(dash);
}

/* Replace every @p from in @p s (in place, @p size bytes) by @p to. */
static void
replace_all(char *s, size_t size, const char *from, const char *to)
{
    size_t fl = strlen(from);
    size_t tl = strlen(to);

    for (char *p = strstr(s, from); p != NULL; p = strstr(p + tl, from)) {
        assert_true(strlen(s) - fl + tl < size);
        memmove(p + tl, p + fl, strlen(p + fl) + 1);
        memcpy(p, to, tl);
    }
}

/* Every panel query parses: promtool checks them as recording rules, with Grafana's variables
 * replaced by values of their kind. */
static void
test_dashboards_grafana_queries_parse(void **state)
{
    json_t *dash = load_dashboard();
    json_t *panel = NULL;
    char path[256];
    char cmd[512];
    FILE *fp = NULL;
    size_t i = 0;
    size_t rules = 0;

    (void)state;
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fail_msg("promtool is not installed (make deps-test installs Debian's prometheus)");
    }
    snprintf(path, sizeof(path), "%s/panels.rules.yml", world.home);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "groups:\n  - name: panels\n    rules:\n");
    json_array_foreach(json_object_get(dash, "panels"), i, panel)
    {
        json_t *target = NULL;
        size_t t = 0;
        json_array_foreach(json_object_get(panel, "targets"), t, target)
        {
            char expr[4096];
            snprintf(expr, sizeof(expr), "%s", json_string_value(json_object_get(target, "expr")));
            replace_all(expr, sizeof(expr), "$__rate_interval", "5m");
            replace_all(expr, sizeof(expr), "$__interval", "1m");
            replace_all(expr, sizeof(expr), "$__range", "6h");
            replace_all(expr, sizeof(expr), "$workflow", ".*");
            replace_all(expr, sizeof(expr), "'", "''"); /* YAML single-quoted */
            fprintf(fp, "      - record: 'panel_%lld_%s'\n        expr: '%s'\n",
                    (long long)json_integer_value(json_object_get(panel, "id")),
                    json_string_value(json_object_get(target, "refId")), expr);
            rules++;
        }
    }
    fclose(fp);
    assert_true(rules >= 36);
    snprintf(cmd, sizeof(cmd), "promtool check rules '%s' >&2", path);
    assert_int_equal(system(cmd), 0);
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
            checked += check_expr(expr, alert, NULL);
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
                checked += check_expr(rest, alert, NULL);
            }
        }
    }
    if (is_in_block) {
        checked += check_expr(expr, alert, NULL);
    }
    fclose(fp);
    assert_true(rules >= 13);
    assert_true(checked >= 22);
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
            /* The kinds that did not fire are there too, at 0 (weft serve exports every kind of
             * a workflow it has seen): they stay out of the input. */
            if (strstr(sample, "workflow=\"stuck-handoff\"") != NULL && after > 0) {
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
        cmocka_unit_test(test_dashboards_grafana_queries_parse),
        cmocka_unit_test(test_dashboards_alert_rules_query_exported_metrics),
        cmocka_unit_test(test_dashboards_stuck_loop_alert_fires_on_a_real_scrape),
    };
    return cmocka_run_group_tests(tests, setup_world, teardown_world);
}
