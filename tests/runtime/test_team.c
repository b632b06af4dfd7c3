/* tests/runtime/test_team.c - team agents: an agent whose "workflow" is another workflow file
 * runs it as one step (runtime/steps/subrun.c), routed to like any agent: the team's output is the
 * step's result, its trace nests under the step's agent span, its tokens add to the run's; a
 * failing team fails the step; a team that names itself is refused when the file is loaded.
 */
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

struct fx {
    char dir[256];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    char state[300];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-team-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
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

#define MODEL "\"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}}"

static weft_err
load(struct fx *f, const char *name, struct weft_diags *d)
{
    char path[512];

    weft_workflow_free(f->wf);
    f->wf = NULL;
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    return weft_workflow_load(path, &f->wf, d);
}

static void
test_team_runs_as_one_step_of_the_supervisor(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char error[256] = "";
    json_t *agent = NULL;
    json_t *team_root = NULL;

    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"analyst\": {\"act\": [{\"content\": \"prices rose 3%\", "
        "\"usage\": {\"input_tokens\": 100, \"output_tokens\": 10}}]}, \"writer\": "
        "{\"act\": [{\"content\": \"Report: prices rose 3%.\", \"usage\": "
        "{\"input_tokens\": 50, \"output_tokens\": 5}}]}}}");
    weft_test_write_file(
        f->dir, "team.json",
        "{\"name\": \"stock_report_team\", " MODEL ", \"agents\": [{\"name\": "
        "\"analyst\"}], \"plan\": [{\"id\": \"t1\", \"agent\": \"analyst\", \"task\": "
        "\"analyse\"}]}");
    weft_test_write_file(
        f->dir, "main.json",
        "{\"name\": \"main\", " MODEL ", \"agents\": [{\"name\": \"stock_report_team\", "
        "\"description\": \"researches stocks\", \"workflow\": \"team.json\"}, {\"name\": "
        "\"writer\"}], \"plan\": [{\"id\": \"s1\", \"agent\": \"stock_report_team\", "
        "\"task\": \"research ACME\"}, {\"id\": \"s2\", \"agent\": \"writer\", \"task\": "
        "\"write\", \"depends_on\": [\"s1\"]}]}");
    if (load(f, "main.json", &d) != WEFT_OK) {
        char line[512];
        fail_msg("%s", weft_diag_format(&d.items[0], line, sizeof(line)));
    }
    weft_diags_cleanup(&d);
    f->ro.input = "ACME";
    assert_weft_ok(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)));
    otlp_sink_collect(f->sink);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->steps[0].status, "completed");
    assert_string_equal(f->r->steps[0].result, "prices rose 3%");
    assert_string_equal(f->r->output, "Report: prices rose 3%.");
    /* The team's tokens are the run's too. */
    assert_int_equal(f->r->input_tokens, 150);
    /* invoke_agent stock_report_team, and the team's own run under it. */
    agent = otlp_sink_find(f->sink, "invoke_agent stock_report_team", 0);
    assert_non_null(agent);
    assert_string_equal(otlp_span_attr(agent, "weft.team.workflow"), "stock_report_team");
    team_root = otlp_sink_find(f->sink, "invoke_workflow stock_report_team", 0);
    assert_non_null(team_root);
    assert_string_equal(json_string_value(json_object_get(team_root, "parentSpanId")),
                        json_string_value(json_object_get(agent, "spanId")));
    assert_non_null(otlp_sink_find(f->sink, "invoke_agent analyst", 0));
}

static void
test_team_failure_fails_the_step_and_cycles_are_refused(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char error[256] = "";
    json_t *agent = NULL;

    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {}}"); /* the team's agent has no answer */
    weft_test_write_file(f->dir, "team.json",
                         "{\"name\": \"team\", " MODEL
                         ", \"agents\": [{\"name\": \"analyst\"}], \"plan\": "
                         "[{\"id\": \"t1\", \"agent\": \"analyst\", \"task\": \"analyse\"}]}");
    weft_test_write_file(
        f->dir, "main.json",
        "{\"name\": \"main\", " MODEL ", \"agents\": [{\"name\": \"team\", \"workflow\": "
        "\"team.json\"}], \"plan\": [{\"id\": \"s1\", \"agent\": \"team\", \"task\": "
        "\"go\"}]}");
    assert_weft_ok(load(f, "main.json", &d));
    assert_weft_ok(weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)));
    otlp_sink_collect(f->sink);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_string_equal(f->r->steps[0].status, "failed");
    agent = otlp_sink_find(f->sink, "invoke_agent team", 0);
    assert_string_equal(otlp_span_attr(agent, "error.type"), "team_failed");

    /* A team that names itself, and a team agent with tools of its own. */
    weft_test_write_file(f->dir, "loop.json",
                         "{\"name\": \"loop\", " MODEL
                         ", \"agents\": [{\"name\": \"again\", \"workflow\": "
                         "\"loop.json\"}]}");
    assert_weft_err(load(f, "loop.json", &d), WEFT_EPARSE);
    assert_non_null(strstr(d.items[0].message, "is invalid"));
    weft_diags_cleanup(&d);
    weft_test_write_file(f->dir, "mixed.json",
                         "{\"name\": \"mixed\", " MODEL
                         ", \"agents\": [{\"name\": \"t\", \"workflow\": "
                         "\"team.json\", \"tools\": [\"read_file\"]}]}");
    assert_weft_err(load(f, "mixed.json", &d), WEFT_EPARSE);
    assert_string_equal(d.items[0].path, "agents[0].workflow");
    assert_non_null(strstr(d.items[0].message, "remove \"tools\""));
    weft_diags_cleanup(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_team_runs_as_one_step_of_the_supervisor, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_team_failure_fails_the_step_and_cycles_are_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
