/* tests/runtime/test_memory.c - skill memory in runs (runtime/memory/memory.c): the examples/skills
 * workflow run twice on one state store keeps a skill in the first run and shows it to the
 * second (retrieval span, injected ids on the agent span, the worked example in the agent's
 * instructions, the metrics); a failed step keeps nothing; memory off looks nothing up.
 */
#include "runtime/state/state.h"
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
    char state[300];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    struct weft_meter *meter;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-memory-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    assert_weft_ok(weft_meter_new(NULL, &f->meter));
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = 1;
    f->ro.meter = f->meter;
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
    weft_meter_free(f->meter);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
load(struct fx *f, const char *path)
{
    struct weft_diags d = {0};

    weft_workflow_free(f->wf);
    f->wf = NULL;
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("%s", d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line)) : path);
    }
    weft_diags_cleanup(&d);
}

static void
run(struct fx *f)
{
    char error[512] = "";

    weft_run_result_free(f->r);
    f->r = NULL;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
}

/* The skills the state store holds for @p agent. */
static size_t
stored(const struct fx *f, const char *agent, struct weft__skill **out)
{
    struct rt_state *st = NULL;
    size_t n = 0;
    char err[256];

    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    assert_weft_ok(weft__state_skills_list(st, agent, 10, out, &n));
    weft__state_close(st);
    return n;
}

static void
test_memory_second_run_is_shown_the_first_runs_skill(void **state)
{
    struct fx *f = *state;
    struct weft__skill *skills = NULL;
    json_t *retrieval = NULL;
    json_t *agent = NULL;
    json_t *chat = NULL;
    char first_trace[33];
    char id[64];
    size_t n = 0;

    load(f, WEFT_SOURCE_DIR "/examples/skills/workflow.json");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    snprintf(first_trace, sizeof(first_trace), "%s", f->r->trace_id);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 0);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "0");
    assert_string_equal(otlp_span_attr(retrieval, "gen_ai.operation.name"), "retrieval");
    assert_int_equal(json_integer_value(json_object_get(retrieval, "kind")), 3); /* CLIENT */
    /* The first run's success is kept, with where it came from. */
    n = stored(f, "coder", &skills);
    assert_int_equal(n, 1);
    assert_true(skills[0].reward > 0.99);
    assert_string_equal(skills[0].trace_id, first_trace);
    assert_non_null(strstr(skills[0].solution, "slugify"));
    assert_non_null(strstr(skills[0].solution, "write_file"));
    snprintf(id, sizeof(id), "%s", skills[0].id);
    weft__skills_free(skills, n);

    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 1);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "1");
    assert_non_null(strstr(otlp_span_attr(retrieval, "gen_ai.retrieval.documents"), id));
    agent = otlp_sink_parent(f->sink, retrieval);
    assert_non_null(agent);
    {
        /* weft.skills.injected is a string array: look in the span's OTLP JSON. */
        char *text = json_dumps(agent, 0);
        assert_non_null(strstr(text, "\"weft.skills.injected\""));
        assert_non_null(strstr(text, id));
        free(text);
    }
    /* The worked example is in the agent's instructions. */
    chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 2);
    assert_non_null(chat);
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"),
                           "Solutions that worked for similar tasks before"));
    /* Still one skill (the same task), now used once; the second run gave the same solution,
     * so the skill is still the first run's: its trace, and a creation before its last use
     * (issue 26: the second run used to overwrite them both). */
    n = stored(f, "coder", &skills);
    assert_int_equal(n, 1);
    assert_int_equal(skills[0].uses, 1);
    assert_string_equal(skills[0].trace_id, first_trace);
    assert_true(skills[0].created_ns <= skills[0].last_used_ns);
    weft__skills_free(skills, n);
    assert_true(weft_test_prom_has(f->meter, "outcome=\"hit\""));
    assert_true(weft_test_prom_has(f->meter, "weft_skills_step_outcomes_total{"));
    assert_true(weft_test_prom_has(f->meter, "with_skill=\"true\""));
}

/* A step whose model has no answer fails: nothing is kept. Without "memory", nothing is looked
 * up or kept at all. */
static void
test_memory_failure_keeps_nothing_and_off_looks_nothing_up(void **state)
{
    struct fx *f = *state;
    struct weft__skill *skills = NULL;
    char path[512];

    weft_test_write_file(f->dir, "script.json", "{\"responses\": {}}");
    weft_test_write_file(
        f->dir, "on.json",
        "{\"name\": \"on\", \"memory\": {\"skills\": true}, \"models\": {\"m\": {\"provider\": "
        "\"scripted\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], "
        "\"plan\": [{\"id\": \"s1\", \"agent\": \"a\", \"task\": \"answer\"}]}");
    snprintf(path, sizeof(path), "%s/on.json", f->dir);
    load(f, path);
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(stored(f, "a", &skills), 0);
    assert_non_null(otlp_sink_find(f->sink, "retrieval weft.skills", 0));
    assert_true(weft_test_prom_has(f->meter, "outcome=\"failure\""));

    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"42\"}]}}}");
    weft_test_write_file(
        f->dir, "off.json",
        "{\"name\": \"off\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"s1\", "
        "\"agent\": \"a\", \"task\": \"answer\"}]}");
    snprintf(path, sizeof(path), "%s/off.json", f->dir);
    load(f, path);
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(stored(f, "a", &skills), 0);
    assert_int_equal(otlp_sink_count_named(f->sink, "retrieval weft.skills"), 1); /* run 1's */
}

/* One-step workflow @p name for agent "a" on @p task, skill memory on at a high min_score. */
static void
load_task(struct fx *f, const char *name, const char *task)
{
    char text[1024];
    char path[512];

    snprintf(text, sizeof(text),
             "{\"name\": \"inflect\", \"memory\": {\"skills\": true, \"min_score\": 0.9},"
             " \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}},"
             " \"agents\": [{\"name\": \"a\"}],"
             " \"plan\": [{\"id\": \"s1\", \"agent\": \"a\", \"task\": \"%s\"}]}",
             task);
    weft_test_write_file(f->dir, name, text);
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    load(f, path);
}

/* A new task that says an old one's words in other forms is covered by it: coverage compares
 * stems (Snowball English: "retrying" and "retry", "reports" and "report", "quarterly" and
 * "quarter"), so the old skill clears a min_score of 0.9. Compared word for word, half the new
 * task's words would be missing and nothing would be shown. */
static void
test_memory_inflected_task_is_covered_by_the_old_one(void **state)
{
    struct fx *f = *state;
    struct weft__skill *skills = NULL;
    json_t *retrieval = NULL;

    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"a\": {\"act\": [{\"content\": \"done\"}]}}}");
    load_task(f, "first.json", "retry the failed download of the quarterly report");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(stored(f, "a", &skills), 1);
    weft__skills_free(skills, 1);

    load_task(f, "second.json", "retrying failed downloads of quarterly reports");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 1);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "1");
    assert_non_null(strstr(otlp_span_attr(retrieval, "gen_ai.retrieval.documents"), "\"score\":1"));

    /* An unrelated task in the same words' company is still not covered. */
    load_task(f, "third.json", "summarise the quarterly sales figures");
    run(f);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 2);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "0");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_memory_second_run_is_shown_the_first_runs_skill, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_memory_failure_keeps_nothing_and_off_looks_nothing_up,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_inflected_task_is_covered_by_the_old_one, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
