/* tests/runtime/test_architect.c - architect agents (runtime/steps/architect.c): a step routed to
 * an agent with "architect" composes a team for its task, the team is registered for the rest of
 * the run and runs the goal as the next step (its trace under that step, the composition's
 * under the architect's step); a composed team with an architect of its own composes one level
 * deeper, and no deeper than the limit; a run whose architect composes nothing fails the step.
 */
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/weft.h>

struct fx {
    char dir[256];
    char state[300];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-architect-XXXXXX");
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

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Write @p text as @p name in the fixture's directory, "@DIR@" replaced by the directory. */
static void
write_file(const struct fx *f, const char *name, const char *text)
{
    char path[512];
    FILE *out = NULL;
    const char *at = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    while ((at = strstr(text, "@DIR@")) != NULL) {
        fwrite(text, 1, (size_t)(at - text), out);
        fputs(f->dir, out);
        text = at + 5;
    }
    fputs(text, out);
    fclose(out);
}

static void
run_main(struct fx *f, const char *workflow)
{
    struct weft_run_options ro;
    struct weft_diags d = {0};
    char path[512];
    char error[512] = "";

    write_file(f, "main.json", workflow);
    snprintf(path, sizeof(path), "%s/main.json", f->dir);
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("%s", weft_diag_format(&d.items[0], line, sizeof(line)));
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(f->sink);
    ro.state_path = f->state;
    ro.workspace = f->dir;
    if (weft_run(f->wf, &ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
}

static const char *
parent_of(const json_t *span)
{
    return json_string_value(json_object_get(span, "parentSpanId"));
}

static const char *
id_of(const json_t *span)
{
    return json_string_value(json_object_get(span, "spanId"));
}

#define MODEL "\"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}}"
#define SUBMIT(team) \
    "{\"tool_calls\": [{\"name\": \"submit_team\", \"arguments\": {\"team\": " team "}}]}"

static void
test_architect_composes_registers_and_runs_a_team(void **state)
{
    struct fx *f = *state;
    json_t *arch = NULL;
    json_t *compose = NULL;
    json_t *team_step = NULL;
    json_t *team_root = NULL;
    json_t *create = NULL;
    char path[512];
    struct stat st;

    write_file(f, "script.json",
               "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
                   "{\"name\": \"greeting_team\", \"description\": \"greets people\", "
                   "\"agents\": [{\"name\": \"greeter\", \"description\": \"says hello\", "
                   "\"instructions\": \"Greet.\"}], \"plan\": [{\"id\": \"g\", \"agent\": "
                   "\"greeter\", \"task\": \"Greet the user\"}]}") ", {\"content\": \"done\"}]}, "
                                                                   "\"greeter\": {\"act\": "
                                                                   "[{\"content\": \"Hello, "
                                                                   "user!\"}]}}}");
    run_main(f, "{\"name\": \"main\", " MODEL ", \"agents\": [{\"name\": \"architect\", "
                "\"instructions\": \"You design small teams.\", \"architect\": {\"out_dir\": "
                "\"teams\"}}], \"plan\": [{\"id\": \"design\", \"agent\": \"architect\", "
                "\"task\": \"Build a team that greets the user\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 2);
    assert_string_equal(f->r->steps[0].status, "completed");
    assert_non_null(strstr(f->r->steps[0].result, "composed team greeting_team"));
    assert_string_equal(f->r->steps[1].agent, "greeting_team");
    assert_string_equal(f->r->steps[1].status, "completed");
    assert_string_equal(f->r->steps[1].result, "Hello, user!");
    assert_string_equal(f->r->output, "Hello, user!");
    assert_int_equal(f->r->llm_calls, 3); /* the architect's two and the greeter's */
    /* Saved where the architect says. */
    snprintf(path, sizeof(path), "%s/teams/greeting_team.json", f->dir);
    assert_int_equal(stat(path, &st), 0);
    /* The composition under the architect's step, the team's run under its own step. */
    arch = otlp_sink_find(f->sink, "invoke_agent architect", 0);
    assert_non_null(arch);
    assert_string_equal(otlp_span_attr(arch, "weft.architect.team"), "greeting_team");
    compose = otlp_sink_find(f->sink, "compose greeting_team", 0);
    assert_non_null(compose);
    assert_string_equal(parent_of(compose), id_of(arch));
    assert_string_equal(json_string_value(json_object_get(compose, "traceId")),
                        json_string_value(json_object_get(arch, "traceId")));
    create = otlp_sink_find(f->sink, "create_agent greeter", 0);
    assert_non_null(create);
    assert_string_equal(parent_of(create), id_of(compose));
    /* A workflow that uses the saved team shows it, and its agents, when validated. */
    {
        struct weft_workflow *uses = NULL;
        struct weft_diags d = {0};
        char *text = NULL;
        write_file(f, "uses.json",
                   "{\"name\": \"uses\", " MODEL ", \"agents\": [{\"name\": \"greeters\", "
                   "\"workflow\": \"teams/greeting_team.json\"}]}");
        snprintf(path, sizeof(path), "%s/uses.json", f->dir);
        assert_weft_ok(weft_workflow_load(path, &uses, &d));
        text = weft_workflow_describe(uses);
        assert_non_null(strstr(text, "- greeters: team 'greeting_team'"));
        assert_non_null(strstr(text, "    - greeter: agent on m"));
        weft_workflow_text_free(text);
        weft_workflow_free(uses);
    }
    team_step = otlp_sink_find(f->sink, "invoke_agent greeting_team", 0);
    assert_non_null(team_step);
    team_root = otlp_sink_find(f->sink, "invoke_workflow greeting_team", 0);
    assert_non_null(team_root);
    assert_string_equal(parent_of(team_root), id_of(team_step));
}

static const char INNER_SCRIPT[] = "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
    "{\"name\": \"inner_team\", \"agents\": [{\"name\": \"again\", \"architect\": "
    "true}]}") "," SUBMIT("{\"name\": \"inner_team\", \"agents\": [{\"name\": "
                          "\"worker\"}], \"plan\": "
                          "[{\"id\": \"w\", \"agent\": \"worker\", \"task\": "
                          "\"Work\"}]}") ","
                                         "{\"content\": \"done\"}]}, \"worker\": "
                                         "{\"act\": [{\"content\": \"worked\"}]}}}";

/* Recursive composition: the outer team has an architect of its own (depth 2), which composes
 * the inner team when the outer team runs; the inner team may not have one (depth 1). */
static void
test_architect_composes_recursively_within_the_depth_limit(void **state)
{
    struct fx *f = *state;
    json_t *inner = NULL;
    json_t *outer_step = NULL;
    json_t *doc = NULL;
    char path[512];

    /* The inner architect's script: an architect inside is too deep, then a plain team. */
    write_file(f, "inner.json", INNER_SCRIPT);
    write_file(f, "script.json",
               "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
                   "{\"name\": \"outer_team\", \"models\": {\"m\": {\"provider\": \"scripted\", "
                   "\"script\": \"@DIR@/inner.json\"}}, \"agents\": [{\"name\": \"planner\", "
                   "\"architect\": {\"max_depth\": 3}}], \"plan\": [{\"id\": \"p\", \"agent\": "
                   "\"planner\", \"task\": \"Build a team that works\"}]}") ", {\"content\": "
                                                                            "\"done\"}]}}}");
    run_main(f, "{\"name\": \"main\", " MODEL ", \"agents\": [{\"name\": \"architect\", "
                "\"architect\": {\"max_depth\": 2}}], \"plan\": [{\"id\": \"design\", \"agent\": "
                "\"architect\", \"task\": \"Build a team that builds a team\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 2);
    assert_string_equal(f->r->steps[1].agent, "outer_team");
    assert_string_equal(f->r->steps[1].result, "worked");
    /* The outer team's architect was given one level less than it asked for. */
    snprintf(path, sizeof(path), "%s/teams/outer_team.json", f->dir);
    doc = json_load_file(path, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(json_array_get(json_object_get(doc, "agents"), 0), "architect"),
            "max_depth")),
        1);
    json_decref(doc);
    /* The inner architect's first design was too deep; the second ran, nested in the trace. */
    {
        size_t too_deep = 0; /* rejected designs: the status says why */
        size_t n = otlp_sink_count_named(f->sink, "execute_tool submit_team");
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++) {
            json_t *span = otlp_sink_find(f->sink, "execute_tool submit_team", i);
            too_deep +=
                json_integer_value(json_object_get(json_object_get(span, "status"), "code")) == 2;
        }
        assert_int_equal(too_deep, 1);
    }
    inner = otlp_sink_find(f->sink, "invoke_workflow inner_team", 0);
    outer_step = otlp_sink_find(f->sink, "invoke_agent outer_team", 0);
    assert_non_null(inner);
    assert_non_null(outer_step);
    assert_string_equal(json_string_value(json_object_get(inner, "traceId")),
                        json_string_value(json_object_get(outer_step, "traceId")));
}

/* Every design rejected: the step fails with the reasons and nothing is registered. */
static void
test_architect_without_a_team_fails_the_step(void **state)
{
    struct fx *f = *state;
    json_t *arch = NULL;

    write_file(f, "script.json",
               "{\"responses\": {\"architect\": {\"act\": [" SUBMIT(
                   "{\"name\": \"t\", \"agents\": [{\"name\": \"a\", \"tools\": [\"read_file\", "
                   "\"write_file\"]}]}") ", {\"content\": \"I give up\"}]}}}");
    run_main(f, "{\"name\": \"main\", " MODEL ", \"agents\": [{\"name\": \"architect\", "
                "\"architect\": {\"max_attempts\": 1}}], \"plan\": [{\"id\": \"design\", "
                "\"agent\": \"architect\", \"task\": \"Build a team\"}]}");
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(f->r->step_count, 1);
    assert_string_equal(f->r->steps[0].status, "failed");
    arch = otlp_sink_find(f->sink, "invoke_agent architect", 0);
    assert_string_equal(otlp_span_attr(arch, "error.type"), "no_team");
    assert_non_null(otlp_sink_find(f->sink, "compose", 0));
}

/* The loader's checks of "architect". */
static void
test_architect_config_errors(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char path[512];

    write_file(f, "bad.json",
               "{\"name\": \"bad\", " MODEL ", \"agents\": [{\"name\": \"a\", "
               "\"tools\": [\"read_file\"], \"architect\": {\"max_depth\": 9}}]}");
    snprintf(path, sizeof(path), "%s/bad.json", f->dir);
    assert_weft_err(weft_workflow_load(path, &f->wf, &d), WEFT_EPARSE);
    {
        bool has_tools = false;
        bool has_depth = false;
        for (size_t i = 0; i < d.count; i++) {
            has_tools = has_tools || strstr(d.items[i].message, "remove \"tools\"") != NULL;
            has_depth =
                has_depth || (strcmp(d.items[i].path, "agents[0].architect.max_depth") == 0 &&
                              strstr(d.items[i].message, "[1, 3]") != NULL);
        }
        assert_true(has_tools);
        assert_true(has_depth);
    }
    weft_diags_cleanup(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_architect_composes_registers_and_runs_a_team, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_architect_composes_recursively_within_the_depth_limit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_architect_without_a_team_fails_the_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_architect_config_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
