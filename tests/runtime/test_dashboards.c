/* tests/runtime/test_dashboards.c - the shipped Grafana dashboard: valid JSON, a datasource
 * variable and no hard-coded datasource uid, unique panel ids with a grid position, and every
 * metric a panel queries present in a real scrape of weft's /metrics output after a scripted run
 * (so a renamed metric breaks this test, not a dashboard in production). */
#include "support/weft_test.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The metric names a scrape exposes: every "# TYPE" family, with histogram series suffixes. */
static json_t *
scraped_names(void)
{
    struct weft_meter *meter = NULL;
    struct weft_provider *provider = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    struct weft_run_options ro;
    json_t *names = json_object();
    char dir[] = "/tmp/weft-dash-XXXXXX";
    char path[300];
    char state[300];
    char cmd[100];
    char *text = NULL;
    size_t len = 0;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    snprintf(state, sizeof(state), "%s/state.db", dir);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_runtime_metrics_register(meter));
    assert_weft_ok(weft_meter_observe_provider(meter, provider));
    assert_weft_ok(weft_workflow_load(path, &wf, NULL));
    memset(&ro, 0, sizeof(ro));
    ro.meter = meter;
    ro.provider = provider;
    ro.workspace = dir;
    ro.state_path = state;
    assert_weft_ok(weft_run(wf, &ro, &r, NULL, 0));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[256];
        char type[32];
        if (sscanf(line, "# TYPE %255s %31s", name, type) == 2) {
            json_object_set_new(names, name, json_true());
            if (strcmp(type, "histogram") == 0) {
                static const char *const sfx[] = {"_bucket", "_sum", "_count"};
                for (int i = 0; i < 3; i++) {
                    char full[300];
                    snprintf(full, sizeof(full), "%s%s", name, sfx[i]);
                    json_object_set_new(names, full, json_true());
                }
            }
        }
    }
    free(text);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    weft_provider_shutdown(provider, 1000);
    weft_provider_free(provider);
    weft_meter_free(meter);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return names;
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
    json_t *names = scraped_names();
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
            /* Each identifier that names a weft or GenAI metric must be in the scrape; label
             * names (before = or !=, or inside by (...)) are not metrics. */
            bool is_in_grouping = false;
            bool was_by = false;
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
                        if (json_object_get(names, word) == NULL) {
                            fail_msg("panel '%s' queries %s, which weft does not export",
                                     json_string_value(json_object_get(panel, "title")), word);
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
        }
    }
    assert_true(checked >= 14);
    json_decref(ids);
    json_decref(names);
    json_decref(dash);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dashboards_grafana_queries_exported_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
