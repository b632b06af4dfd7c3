/* tests/runtime/test_compose.c - the architect (runtime/steps/compose.c) with the scripted
 * provider: examples/architect's first design (an agent bound to two tools) is sent back through
 * submit_team and the second is kept, saved, loaded and run, with a create_agent span per
 * agent; designs with an unknown tool, a dependency cycle or a team inside the team are each
 * rejected with their reason, and when every design is rejected compose fails clearly.
 */
#include "support/otlp_sink.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

struct fx {
    char dir[256];
    char state[300];
    struct otlp_sink *sink;
    struct weft_workflow *base;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-compose-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_workflow_free(f->base);
    otlp_sink_free(f->sink);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
load_base(struct fx *f, const char *path)
{
    struct weft_diags d = {0};

    if (weft_workflow_load(path, &f->base, &d) != WEFT_OK) {
        char line[512];
        fail_msg("%s", weft_diag_format(&d.items[0], line, sizeof(line)));
    }
    weft_diags_cleanup(&d);
}

static weft_err
compose(struct fx *f, unsigned attempts, char **path, char *error, size_t len)
{
    struct weft_compose_options o;

    memset(&o, 0, sizeof(o));
    o.goal = "Build me a team that researches stocks and writes a Python report";
    o.base = f->base;
    o.out_dir = f->dir;
    o.max_attempts = attempts;
    o.provider = otlp_sink_provider(f->sink);
    o.state_path = f->state;
    return weft_compose(&o, path, error, len);
}

static void
test_compose_example_rejects_then_keeps_and_the_team_runs(void **state)
{
    struct fx *f = *state;
    char *path = NULL;
    char error[2048] = "";
    char expect[512];
    struct weft_workflow *team = NULL;
    struct weft_diags d = {0};
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    json_t *first = NULL;
    json_t *root = NULL;
    json_t *create = NULL;

    load_base(f, WEFT_SOURCE_DIR "/examples/architect/workflow.json");
    assert_weft_ok(compose(f, 3, &path, error, sizeof(error)));
    snprintf(expect, sizeof(expect), "%s/stock_report_team.json", f->dir);
    assert_string_equal(path, expect);
    otlp_sink_collect(f->sink);
    /* Two submissions: the first rejected with the reason, the second accepted. */
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool submit_team"), 2);
    first = otlp_sink_find(f->sink, "execute_tool submit_team", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(first, "status"), "code")),
                     2);
    /* A create_agent span per agent of the team, under compose stock_report_team. */
    root = otlp_sink_find(f->sink, "compose stock_report_team", 0);
    assert_non_null(root);
    assert_string_equal(otlp_span_attr(root, "weft.compose.attempts"), "2");
    create = otlp_sink_find(f->sink, "create_agent writer", 0);
    assert_non_null(create);
    assert_string_equal(otlp_span_attr(create, "gen_ai.operation.name"), "create_agent");
    assert_string_equal(json_string_value(json_object_get(create, "parentSpanId")),
                        json_string_value(json_object_get(root, "spanId")));
    assert_int_equal(otlp_sink_count_named(f->sink, "create_agent researcher"), 1);
    assert_int_equal(otlp_sink_count_named(f->sink, "create_agent runner"), 1);
    /* The saved team loads and runs (its scripted answers come from the base's script). */
    assert_weft_ok(weft_workflow_load(path, &team, &d));
    memset(&ro, 0, sizeof(ro));
    ro.state_path = f->state;
    ro.workspace = f->dir;
    ro.input = "ACME";
    assert_weft_ok(weft_run(team, &ro, &r, error, sizeof(error)));
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_non_null(strstr(r->steps[2].result, "mean 101.1"));
    weft_run_result_free(r);
    weft_workflow_free(team);
    weft_compose_text_free(path);
}

#define SUBMIT(team) \
    "{\"tool_calls\": [{\"name\": \"submit_team\", \"arguments\": {\"team\": " team "}}]}"

static void
test_compose_rejects_bad_designs_with_their_reasons(void **state)
{
    struct fx *f = *state;
    char *path = NULL;
    char error[4096] = "";
    char base_path[512];

    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
            "{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"tools\": "
            "[\"nonexistent_tool\"]}]}") "," SUBMIT("{\"name\": \"t\", \"agents\": "
                                                    "[{\"name\": \"a\"}], \"plan\": "
                                                    "[{\"id\": "
                                                    "\"s1\", \"agent\": \"a\", \"task\": "
                                                    "\"x\", \"depends_on\": [\"s2\"]}, "
                                                    "{\"id\": \"s2\", \"agent\": \"a\", "
                                                    "\"task\": \"y\", \"depends_on\": "
                                                    "[\"s1\"]}]}") "," SUBMIT("{\"name\": "
                                                                              "\"t\", "
                                                                              "\"agents\": "
                                                                              "[{\"name\": "
                                                                              "\"a\", "
                                                                              "\"workflow\":"
                                                                              " "
                                                                              "\"other."
                                                                              "json\"}]}") "," SUBMIT("{\"name\": \"t\", \"flow\": {}, \"agents\": [{\"name\": \"a\"}]}") ","
                                                                                                                                                                          "{\"content\": \"I give up\"}]}}}");
    weft_test_write_file(
        f->dir, "base.json",
        "{\"name\": \"base\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"assistant\"}]}");
    snprintf(base_path, sizeof(base_path), "%s/base.json", f->dir);
    load_base(f, base_path);
    assert_weft_err(compose(f, 4, &path, error, sizeof(error)), WEFT_EPARSE);
    assert_null(path);
    assert_non_null(strstr(error, "no design was accepted (4 submitted)"));
    assert_non_null(strstr(error, "supervisor-star, not a flow"));
    otlp_sink_collect(f->sink);
    assert_int_equal(otlp_sink_count_named(f->sink, "execute_tool submit_team"), 4);
    assert_null(otlp_sink_find(f->sink, "compose t", 0));
    /* Each submission failed (test_compose_reasons checks the reasons one by one). */
    for (size_t i = 0; i < 4; i++) {
        json_t *s = otlp_sink_find(f->sink, "execute_tool submit_team", i);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "status"), "code")),
                         2);
    }
}

/* A design is never written over a file already there: one named after the base workflow is
 * sent back (the base left as it was) and the renamed one kept; composing the same team again
 * finds its own file, identical, and keeps it. */
static void
test_compose_never_overwrites_a_file(void **state)
{
    struct fx *f = *state;
    char *path = NULL;
    char *again = NULL;
    char error[4096] = "";
    char base_path[512];
    static const char base_text[] =
        "{\"name\": \"base\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"assistant\"}]}";
    char *kept = NULL;
    json_t *first = NULL;

    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
            "{\"name\": \"base\", \"agents\": [{\"name\": \"a\"}]}") "," SUBMIT("{\"name\": "
                                                                                "\"renamed\", "
                                                                                "\"agents\": "
                                                                                "[{\"name\": "
                                                                                "\"a\"}]}") "]}}}");
    weft_test_write_file(f->dir, "base.json", base_text);
    snprintf(base_path, sizeof(base_path), "%s/base.json", f->dir);
    load_base(f, base_path);
    assert_weft_ok(compose(f, 3, &path, error, sizeof(error)));
    assert_non_null(strstr(path, "/renamed.json"));
    kept = weft_test_log_tail(base_path, 4096);
    assert_non_null(kept);
    assert_string_equal(kept, base_text);
    free(kept);
    otlp_sink_collect(f->sink);
    first = otlp_sink_find(f->sink, "execute_tool submit_team", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(first, "status"), "code")),
                     2);

    assert_weft_ok(compose(f, 3, &again, error, sizeof(error)));
    assert_string_equal(again, path);
    weft_compose_text_free(again);
    weft_compose_text_free(path);
}

/* The reasons themselves, without the architect: what check and load say of each design. */
static void
test_compose_reasons(void **state)
{
    struct fx *f = *state;
    char *path = NULL;
    char error[4096] = "";
    char base_path[512];
    static const struct {
        const char *team;
        const char *reason;
    } cases[] = {
        {"{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"tools\": [\"read_file\", "
         "\"write_file\"]}]}",
         "bound to 2 tools and MCP servers"},
        {"{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"tools\": [\"nonexistent_tool\"]}]}",
         "unknown tool 'nonexistent_tool'"},
        {"{\"name\": \"t\", \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"s1\", "
         "\"agent\": \"a\", \"task\": \"x\", \"depends_on\": [\"s2\"]}, {\"id\": \"s2\", "
         "\"agent\": \"a\", \"task\": \"y\", \"depends_on\": [\"s1\"]}]}",
         "dependency cycle"},
        {"{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"workflow\": \"x.json\"}]}",
         "too deep"},
        {"{\"name\": \"Bad Name\", \"agents\": [{\"name\": \"a\"}]}", "snake_case"},
        {"{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"architect\": true}]}",
         "an architect inside this team is too deep"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char script[4096];
        snprintf(script, sizeof(script),
                 "{\"responses\": {\"architect\": {\"act\": [{\"tool_calls\": [{\"name\": "
                 "\"submit_team\", \"arguments\": {\"team\": %s}}]}, {\"content\": \"done\"}]}}}",
                 cases[i].team);
        weft_test_write_file(f->dir, "script.json", script);
        weft_test_write_file(
            f->dir, "base.json",
            "{\"name\": \"base\", \"models\": {\"m\": {\"provider\": \"scripted\", "
            "\"script\": \"script.json\"}}, \"agents\": [{\"name\": \"assistant\"}]}");
        snprintf(base_path, sizeof(base_path), "%s/base.json", f->dir);
        weft_workflow_free(f->base);
        f->base = NULL;
        load_base(f, base_path);
        error[0] = '\0';
        assert_weft_err(compose(f, 1, &path, error, sizeof(error)), WEFT_EPARSE);
        if (strstr(error, cases[i].reason) == NULL) {
            fail_msg("case %zu: expected '%s' in: %s", i, cases[i].reason, error);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compose_example_rejects_then_keeps_and_the_team_runs,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_compose_rejects_bad_designs_with_their_reasons, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compose_never_overwrites_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compose_reasons, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
