/* tests/runtime/test_lessons.c - lessons from corrections (runtime/decide/lessons.c) with
 * examples/lessons: the first run fails a step and correction mode repairs it, which is kept as
 * a lesson; the second run repairs the step before it runs (no failure, no corrector call,
 * fewer steps run), visible in its trace; a similar but not identical task that fails gets the
 * lesson in its corrector's context instead; mistakes are counted, repeated or not.
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
    struct weft_meter *meter;
    struct weft_workflow *wf;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-lessons-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    assert_weft_ok(weft_meter_new(NULL, &f->meter));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_meter_free(f->meter);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A run of the loaded workflow in a fresh workspace @p n (so the missing file is missing). */
static struct weft_run_result *
run(struct fx *f, int n)
{
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char ws[400];
    char error[512] = "";

    snprintf(ws, sizeof(ws), "%s/ws%d", f->dir, n);
    assert_int_equal(mkdir(ws, 0700), 0);
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(f->sink);
    ro.state_path = f->state;
    ro.workspace = ws;
    ro.meter = f->meter;
    ro.capture_content = 1;
    if (weft_run(f->wf, &ro, &r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
    return r;
}

static void
load(struct fx *f, const char *path)
{
    struct weft_diags d = {0};

    weft_workflow_free(f->wf);
    f->wf = NULL;
    assert_weft_ok(weft_workflow_load(path, &f->wf, &d));
}

static const struct weft_run_step *
step(const struct weft_run_result *r, const char *id)
{
    for (size_t i = 0; i < r->step_count; i++) {
        if (strcmp(r->steps[i].id, id) == 0) {
            return &r->steps[i];
        }
    }
    fail_msg("no step %s", id);
    return NULL;
}

static void
test_lessons_second_run_avoids_the_first_runs_failure(void **state)
{
    struct fx *f = *state;
    struct weft_run_result *first = NULL;
    struct weft_run_result *second = NULL;
    json_t *preempt = NULL;

    load(f, WEFT_SOURCE_DIR "/examples/lessons/workflow.json");
    first = run(f, 1);
    assert_int_equal(first->status, WEFT_RUN_COMPLETED);
    assert_int_equal(step(first, "greet")->attempts, 2); /* failed, repaired, retried */
    assert_int_equal(first->llm_calls, 2);               /* the corrector and the reporter */
    assert_true(weft_test_prom_has(f->meter, "weft_lessons_total{outcome=\"learned\""));
    assert_true(weft_test_prom_has(f->meter, "repeated=\"false\""));
    otlp_sink_free(f->sink);
    f->sink = otlp_sink_new();

    second = run(f, 2);
    assert_int_equal(second->status, WEFT_RUN_COMPLETED);
    /* The step ran once and never failed; the corrector was not asked. */
    assert_int_equal(step(second, "greet")->attempts, 1);
    assert_string_equal(step(second, "greet")->status, "completed");
    assert_int_equal(second->llm_calls, 1);
    assert_true(second->tool_calls < first->tool_calls);
    assert_true(second->iterations < first->iterations);
    /* No failed attempt to pay for: a higher reward (3.0 against 2.5). */
    assert_true(second->reward > first->reward);
    /* In its trace: the repair before the step, with the lesson it came from. */
    preempt = otlp_sink_find(f->sink, "correct greet", 0);
    assert_non_null(preempt);
    assert_string_equal(otlp_span_attr(preempt, "weft.correction.preemptive"), "true");
    {
        char *text = json_dumps(preempt, 0);
        assert_non_null(strstr(text, "weft.lessons.used"));
        free(text);
    }
    assert_true(weft_test_prom_has(f->meter, "weft_lessons_total{outcome=\"preempted\""));
    weft_run_result_free(first);
    weft_run_result_free(second);
}

/* A failure like a known one, on a task that is only similar: the lesson guides the corrector
 * (it is in the corrector's context, its id on the correct span), and the failure counts as a
 * repeated mistake. */
static void
test_lessons_guide_the_corrector_of_a_similar_failure(void **state)
{
    struct fx *f = *state;
    struct weft_run_result *r = NULL;
    char *wf = NULL;
    char path[512];
    json_t *doc = NULL;
    json_t *chat = NULL;
    json_t *correct = NULL;

    load(f, WEFT_SOURCE_DIR "/examples/lessons/workflow.json");
    r = run(f, 1); /* the lesson */
    weft_run_result_free(r);
    doc = json_load_file(WEFT_SOURCE_DIR "/examples/lessons/workflow.json", 0, NULL);
    assert_non_null(doc);
    json_object_set_new(json_array_get(json_object_get(doc, "plan"), 0), "task",
                        json_string("Run the greeting script for the team again"));
    json_object_set_new(json_object_get(json_object_get(doc, "models"), "scripted"), "script",
                        json_string(WEFT_SOURCE_DIR "/examples/lessons/script.json"));
    wf = json_dumps(doc, JSON_INDENT(1));
    weft_test_write_file(f->dir, "similar.json", wf);
    free(wf);
    json_decref(doc);
    snprintf(path, sizeof(path), "%s/similar.json", f->dir);
    load(f, path);
    otlp_sink_free(f->sink);
    f->sink = otlp_sink_new();
    r = run(f, 2);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(step(r, "greet")->attempts, 2); /* not repaired ahead: failed, then fixed */
    correct = otlp_sink_find(f->sink, "correct greet", 0);
    assert_non_null(correct);
    {
        char *text = json_dumps(correct, 0);
        assert_non_null(strstr(text, "weft.lessons.used"));
        free(text);
    }
    chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 0);
    assert_string_equal(otlp_span_attr(chat, "weft.llm.purpose"), "correct");
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "lessons"));
    assert_true(weft_test_prom_has(f->meter, "repeated=\"true\""));
    assert_true(weft_test_prom_has(f->meter, "weft_lessons_total{outcome=\"guided\""));
    weft_run_result_free(r);
}

/* A workflow whose supervisor plans with the model: a request like a task that failed before
 * brings the lesson into the planner's prompt (before anything runs), and its id onto the plan
 * span. An unrelated request brings none. */
static void
test_lessons_reach_the_llm_planner(void **state)
{
    struct fx *f = *state;
    struct weft_run_result *r = NULL;
    char path[512];
    json_t *chat = NULL;
    const char *script =
        "{\"version\": 1, \"responses\": {\"supervisor\": {\"plan\": [{\"content\": "
        "{\"thought\": \"report\", \"plan\": [{\"agent\": \"reporter\", \"task\": "
        "\"Report the greeting.\", \"depends_on\": []}]}}]}, \"reporter\": {\"act\": "
        "[{\"content\": \"done\"}]}}}";
    const char *wf =
        "{\"name\": \"planned\", \"models\": {\"scripted\": {\"provider\": \"scripted\", "
        "\"model\": \"scripted-gpt-4o-mini\", \"script\": \"planned-script.json\"}}, "
        "\"supervisor\": {\"instructions\": \"Plan.\"}, \"agents\": [{\"name\": "
        "\"reporter\", \"instructions\": \"Report.\"}], \"memory\": {\"lessons\": true}}";

    load(f, WEFT_SOURCE_DIR "/examples/lessons/workflow.json");
    r = run(f, 1); /* the lesson */
    weft_run_result_free(r);
    weft_test_write_file(f->dir, "planned-script.json", script);
    weft_test_write_file(f->dir, "planned.json", wf);
    snprintf(path, sizeof(path), "%s/planned.json", f->dir);
    for (int i = 0; i < 2; i++) {
        struct weft_run_options ro;
        char error[512] = "";
        char ws[400];
        const char *msgs = NULL;
        json_t *plan = NULL;

        load(f, path);
        otlp_sink_free(f->sink);
        f->sink = otlp_sink_new();
        snprintf(ws, sizeof(ws), "%s/planned-ws%d", f->dir, i);
        assert_int_equal(mkdir(ws, 0700), 0);
        memset(&ro, 0, sizeof(ro));
        ro.provider = otlp_sink_provider(f->sink);
        ro.state_path = f->state;
        ro.workspace = ws;
        ro.meter = f->meter;
        ro.capture_content = 1;
        ro.input = i == 0 ? "Run the greeting script, then report it" : "Summarise the weather";
        if (weft_run(f->wf, &ro, &r, error, sizeof(error)) != WEFT_OK) {
            fail_msg("weft_run: %s", error);
        }
        otlp_sink_collect(f->sink);
        assert_int_equal(r->status, WEFT_RUN_COMPLETED);
        chat = otlp_sink_find(f->sink, "chat scripted-gpt-4o-mini", 0);
        assert_non_null(chat);
        assert_string_equal(otlp_span_attr(chat, "weft.llm.purpose"), "plan");
        msgs = otlp_span_attr(chat, "gen_ai.input.messages");
        plan = otlp_sink_parent(f->sink, chat);
        assert_non_null(plan);
        if (i == 0) {
            assert_non_null(strstr(msgs, "Lessons from earlier runs"));
            assert_non_null(strstr(msgs, "lib/helpers.sh")); /* the corrective plan */
        } else {
            assert_null(strstr(msgs, "Lessons from earlier runs"));
        }
        {
            char *text = json_dumps(plan, 0);
            assert_true((strstr(text, "weft.lessons.used") != NULL) == (i == 0));
            free(text);
        }
        weft_run_result_free(r);
    }
    assert_true(weft_test_prom_has(f->meter, "weft_lessons_total{outcome=\"planned\""));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lessons_second_run_avoids_the_first_runs_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lessons_guide_the_corrector_of_a_similar_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lessons_reach_the_llm_planner, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
