/* tests/runtime/test_flow.c - the flow engine: the translation example (per-chunk loops with
 * 0, 1 and 3 revisions, a break condition, one chunk stopping at max_iterations, ordered
 * fan-in), parallel scheduling (independent nodes overlap in time; max_parallel 1 does not),
 * fan-out with a failing item, required and optional failures, on_max_iterations "fail", and
 * the load-time checks (cycles, loop_back_to, break_condition syntax). Spans reach a real OTLP
 * receiver. */
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fx {
    char dir[128];
    char state[200];
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-flow-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
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

static void
put(struct fx *f, const char *name, const char *text)
{
    char path[300];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Load a workflow; returns the load error and the diagnostics joined. */
static weft_err
load(struct fx *f, const char *path, char *diags, size_t len)
{
    struct weft_diags d = {0};
    char line[512];
    size_t used = 0;
    weft_err err = weft_workflow_load(path, &f->wf, &d);

    diags[0] = '\0';
    for (size_t i = 0; i < d.count; i++) {
        used += (size_t)snprintf(diags + used, used < len ? len - used : 0, "%s\n",
                                 weft_diag_format(&d.items[i], line, sizeof(line)));
    }
    weft_diags_cleanup(&d);
    return err;
}

static void
load_inline(struct fx *f, const char *workflow, const char *script)
{
    char path[300];
    char diags[2048];

    put(f, "script.json", script);
    put(f, "wf.json", workflow);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    if (load(f, path, diags, sizeof(diags)) != WEFT_OK) {
        fail_msg("invalid workflow:\n%s", diags);
    }
}

static void
run(struct fx *f)
{
    char error[256] = "";
    weft_run_result_free(f->r);
    f->r = NULL;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    otlp_sink_collect(f->sink);
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

static uint64_t
nano(const json_t *span, const char *key)
{
    return strtoull(json_string_value(json_object_get(span, key)), NULL, 10);
}

static void
assert_attrs(struct otlp_sink *sink, const char *prefix, const char *key, const char *expected)
{
    char *v = otlp_sink_attr_list(sink, prefix, key);
    assert_string_equal(v, expected);
    free(v);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_flow_translation_loops_per_chunk_and_fans_in(void **state)
{
    struct fx *f = *state;
    char path[300];
    char diags[1024];
    json_t *results = NULL;
    json_t *fan = NULL;

    snprintf(path, sizeof(path), "%s/examples/translation/workflow.json", WEFT_SOURCE_DIR);
    assert_weft_ok(load(f, path, diags, sizeof(diags)));
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    /* Loops: chunk 0 breaks (score), chunk 1 once, chunk 2 three times, chunk 3 three times
     * and then stops at max_iterations. */
    assert_int_equal(f->r->loops[WEFT_LOOP_FLOW], 7);
    assert_int_equal(otlp_sink_count_named(f->sink, "loop per_chunk[0].audit"), 1);
    assert_int_equal(otlp_sink_count_named(f->sink, "loop per_chunk[1].audit"), 1);
    assert_int_equal(otlp_sink_count_named(f->sink, "loop per_chunk[2].audit"), 3);
    assert_int_equal(otlp_sink_count_named(f->sink, "loop per_chunk[3].audit"), 4);
    assert_attrs(f->sink, "loop per_chunk[0]", "weft.loop.outcome", "break");
    assert_attrs(f->sink, "loop per_chunk[3]", "weft.loop.outcome",
                 "loop_back,loop_back,loop_back,max_iterations");
    assert_attrs(f->sink, "loop per_chunk[3]", "weft.loop.exhausted", "true"); /* last only */
    /* Fan-in in item order, each item with its final translation and audit. */
    results = json_loads(step(f->r, "per_chunk")->result, 0, NULL);
    assert_non_null(results);
    assert_int_equal(json_array_size(results), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(results, 1), "translate")),
                        "The dog is sleeping.");
    assert_string_equal(json_string_value(json_object_get(json_array_get(results, 3), "translate")),
                        "We will see each other tomorrow.");
    assert_true(json_is_true(
        json_object_get(json_object_get(json_array_get(results, 3), "audit"), "needs_revision")));
    json_decref(results);
    assert_non_null(strstr(f->r->output, "We will see each other tomorrow."));
    /* The span tree: fan_out under the run, one item span per chunk, steps under their item. */
    fan = otlp_sink_find(f->sink, "fan_out per_chunk", 0);
    assert_non_null(fan);
    assert_string_equal(otlp_span_attr(fan, "weft.fan_out.items"), "4");
    assert_string_equal(json_string_value(json_object_get(otlp_sink_parent(f->sink, fan), "name")),
                        "invoke_workflow translation");
    for (int i = 0; i < 4; i++) {
        char name[64];
        json_t *item = NULL;
        snprintf(name, sizeof(name), "item per_chunk[%d]", i);
        item = otlp_sink_find(f->sink, name, 0);
        assert_non_null(item);
        assert_ptr_equal(otlp_sink_parent(f->sink, item), fan);
    }
    {
        json_t *tr = otlp_sink_find(f->sink, "invoke_agent translator", 0);
        const char *parent =
            json_string_value(json_object_get(otlp_sink_parent(f->sink, tr), "name"));
        assert_int_equal(strncmp(parent, "item per_chunk[", 15), 0);
    }
    assert_int_equal(otlp_sink_count_named(f->sink, "invoke_agent translator"), 1 + 2 + 4 + 4);
}

#define DELAYED_FLOW(parallel)                                                                 \
    "{\"name\": \"fanout3\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "    \
    "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"c\"}," \
    " {\"name\": \"join\"}], \"flow\": {\"max_parallel\": " parallel ", \"nodes\": ["          \
    "{\"agent\": \"a\"}, {\"agent\": \"b\"}, {\"agent\": \"c\"},"                              \
    " {\"agent\": \"join\", \"upstream_agents\": [\"a\", \"b\", \"c\"]}]}}"

#define DELAYED_SCRIPT                                                              \
    "{\"responses\": {\"a\": {\"act\": [{\"content\": \"A\", \"delay_ms\": 300}]}," \
    " \"b\": {\"act\": [{\"content\": \"B\", \"delay_ms\": 300}]},"                 \
    " \"c\": {\"act\": [{\"content\": \"C\", \"delay_ms\": 300}]},"                 \
    " \"join\": {\"act\": [{\"content\": \"ABC\"}]}}}"

static void
test_flow_independent_nodes_overlap_in_time(void **state)
{
    struct fx *f = *state;
    json_t *spans[3];
    uint64_t latest_start = 0;
    uint64_t earliest_end = UINT64_MAX;

    load_inline(f, DELAYED_FLOW("3"), DELAYED_SCRIPT);
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->output, "ABC");
    /* Three 300 ms steps on three workers: well under the 900 ms they take in a row. */
    assert_true(f->r->duration_ns < 800000000ull);
    spans[0] = otlp_sink_find(f->sink, "invoke_agent a", 0);
    spans[1] = otlp_sink_find(f->sink, "invoke_agent b", 0);
    spans[2] = otlp_sink_find(f->sink, "invoke_agent c", 0);
    for (int i = 0; i < 3; i++) {
        assert_non_null(spans[i]);
        if (nano(spans[i], "startTimeUnixNano") > latest_start) {
            latest_start = nano(spans[i], "startTimeUnixNano");
        }
        if (nano(spans[i], "endTimeUnixNano") < earliest_end) {
            earliest_end = nano(spans[i], "endTimeUnixNano");
        }
    }
    assert_true(latest_start < earliest_end); /* all three were running at once */
    /* The join ran after all three. */
    assert_true(nano(otlp_sink_find(f->sink, "invoke_agent join", 0), "startTimeUnixNano") >=
                earliest_end);
}

static void
test_flow_max_parallel_one_runs_in_turn(void **state)
{
    struct fx *f = *state;

    load_inline(f, DELAYED_FLOW("1"), DELAYED_SCRIPT);
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_true(f->r->duration_ns >= 900000000ull);
}

/* Six items at max_parallel 2, item 1 slow (900 ms), the others quick (100 ms): a slot is
 * refilled the moment an item ends, so the quick items run one after the other beside the slow
 * one. The bug left the freed slot idle until the slow item ended too. */
static void
test_flow_fan_out_refills_a_slot_as_soon_as_an_item_ends(void **state)
{
    struct fx *f = *state;
    uint64_t starts[6];
    uint64_t ends[6];
    uint64_t slow_end = 0;
    unsigned beside_slow = 0;

    load_inline(f,
                "{\"name\": \"fo\", \"models\": {\"m\": {\"provider\": \"scripted\","
                " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"split\"},"
                " {\"name\": \"work\"}], \"flow\": {\"max_parallel\": 2, \"nodes\":"
                " [{\"agent\": \"split\"}, {\"id\": \"each\", \"upstream_agents\": [\"split\"],"
                " \"for_each\": \"items\", \"max_parallel\": 2, \"nodes\": [{\"agent\":"
                " \"work\"}]}]}}",
                "{\"responses\": {\"split\": {\"act\": [{\"content\": {\"items\": [0, 1, 2,"
                " 3, 4, 5]}}]},"
                " \"each[0].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 100}]},"
                " \"each[1].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 900}]},"
                " \"each[2].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 100}]},"
                " \"each[3].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 100}]},"
                " \"each[4].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 100}]},"
                " \"each[5].work\": {\"act\": [{\"content\": \"w\", \"delay_ms\": 100}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    for (size_t i = 0; i < 6; i++) {
        json_t *span = otlp_sink_find(f->sink, "invoke_agent work", i);
        assert_non_null(span);
        starts[i] = nano(span, "startTimeUnixNano");
        ends[i] = nano(span, "endTimeUnixNano");
        if (ends[i] - starts[i] >= 800000000ull) {
            slow_end = ends[i]; /* item 1's */
        }
    }
    assert_true(slow_end > 0);
    /* Never more than two items at once: at each start, at most one other is in flight. */
    for (size_t i = 0; i < 6; i++) {
        unsigned in_flight = 0;
        for (size_t j = 0; j < 6; j++) {
            in_flight += j != i && starts[j] <= starts[i] && ends[j] > starts[i];
        }
        assert_true(in_flight <= 1);
        beside_slow += starts[i] < slow_end;
    }
    /* The five quick ones (500 ms in a row) all started while the slow one ran. */
    assert_int_equal(beside_slow, 6);
}

static void
test_flow_failed_item_leaves_the_others(void **state)
{
    struct fx *f = *state;
    json_t *results = NULL;

    load_inline(
        f,
        "{\"name\": \"items\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"split\"}, {\"name\": \"work\"},"
        " {\"name\": \"sum\"}], \"flow\": {\"nodes\": [{\"agent\": \"split\"},"
        " {\"id\": \"each\", \"upstream_agents\": [\"split\"], \"for_each\": \"items\","
        " \"max_parallel\": 2, \"nodes\": [{\"agent\": \"work\"}]},"
        " {\"agent\": \"sum\", \"upstream_agents\": [\"each\"]}]}}",
        "{\"responses\": {\"split\": {\"act\": [{\"content\": {\"items\": [1, 2, 3]}}]},"
        " \"each[0].work\": {\"act\": [{\"content\": \"one\"}]},"
        " \"each[1].work\": {\"act\": [{\"error\": \"http_500\"}]},"
        " \"each[2].work\": {\"act\": [{\"content\": \"three\"}]},"
        " \"sum\": {\"act\": [{\"content\": \"one, three\"}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    results = json_loads(step(f->r, "each")->result, 0, NULL);
    assert_int_equal(json_array_size(results), 3);
    assert_true(json_is_null(json_array_get(results, 1)));
    assert_string_equal(json_string_value(json_object_get(json_array_get(results, 2), "work")),
                        "three");
    json_decref(results);
    assert_string_equal(step(f->r, "each[1].work")->status, "failed");
    assert_string_equal(
        otlp_span_attr(otlp_sink_find(f->sink, "fan_out each", 0), "weft.fan_out.failed"), "1");
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(otlp_sink_find(f->sink, "item each[1]", 0), "status"), "code")),
        2);
}

static void
test_flow_required_and_optional_failures(void **state)
{
    struct fx *f = *state;
    static const char workflow[] =
        "{\"name\": \"req\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"flow\": "
        "{\"nodes\": [{\"agent\": \"a\", \"required\": %s}, {\"agent\": \"b\","
        " \"upstream_agents\": [\"a\"]}]}}";
    char wf[600];

    snprintf(wf, sizeof(wf), workflow, "false");
    load_inline(f, wf, "{\"responses\": {\"b\": {\"act\": [{\"content\": \"b ran\"}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->output, "b ran");
    weft_workflow_free(f->wf);
    f->wf = NULL;
    snprintf(wf, sizeof(wf), workflow, "true");
    load_inline(f, wf, "{\"responses\": {\"b\": {\"act\": [{\"content\": \"b ran\"}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_non_null(strstr(f->r->reason, "node a failed"));
    assert_string_equal(step(f->r, "b")->status, "pending");
}

static void
test_flow_on_max_iterations_fail(void **state)
{
    struct fx *f = *state;

    load_inline(
        f,
        "{\"name\": \"strict\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"w\"}, {\"name\": \"check\"}],"
        " \"flow\": {\"nodes\": [{\"agent\": \"w\"}, {\"agent\": \"check\","
        " \"upstream_agents\": [\"w\"], \"loop_config\": {\"loop_back_to\": \"w\","
        " \"condition_field\": \"again\", \"max_iterations\": 1,"
        " \"on_max_iterations\": \"fail\"}}]}}",
        "{\"responses\": {\"w\": {\"act\": [{\"content\": \"1\"}, {\"content\": \"2\"}]},"
        " \"check\": {\"act\": [{\"content\": {\"again\": true}},"
        " {\"content\": {\"again\": true}}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_FAILED);
    assert_int_equal(f->r->loops[WEFT_LOOP_FLOW], 1);
    assert_non_null(strstr(f->r->reason, "max_iterations"));
}

static void
test_flow_sub_workflow_runs_as_one_nested_step(void **state)
{
    struct fx *f = *state;
    json_t *outer = NULL;
    json_t *inner = NULL;

    put(f, "inner_script.json",
        "{\"responses\": {\"helper\": {\"act\": [{\"content\": \"inner answer\"}]}}}");
    put(f, "inner.json",
        "{\"name\": \"inner\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"inner_script.json\"}}, \"agents\": [{\"name\": \"helper\"}],"
        " \"plan\": [{\"agent\": \"helper\", \"task\": \"help\"}]}");
    load_inline(
        f,
        "{\"name\": \"outer\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"prep\"}, {\"name\": \"after\"}],"
        " \"flow\": {\"nodes\": [{\"agent\": \"prep\"},"
        " {\"id\": \"sub\", \"workflow\": \"inner.json\", \"upstream_agents\": [\"prep\"]},"
        " {\"agent\": \"after\", \"upstream_agents\": [\"sub\"]}]}}",
        "{\"responses\": {\"prep\": {\"act\": [{\"content\": \"prepared\"}]},"
        " \"after\": {\"act\": [{\"content\": \"all done\"}]}}}");
    run(f);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(step(f->r, "sub")->result, "inner answer");
    assert_string_equal(f->r->output, "all done");
    /* The sub-workflow's spans nest in the same trace, under the outer run. */
    outer = otlp_sink_find(f->sink, "invoke_workflow outer", 0);
    inner = otlp_sink_find(f->sink, "invoke_workflow inner", 0);
    assert_non_null(inner);
    assert_string_equal(json_string_value(json_object_get(inner, "traceId")),
                        json_string_value(json_object_get(outer, "traceId")));
    assert_ptr_equal(otlp_sink_parent(f->sink, inner), outer);
    assert_ptr_equal(otlp_sink_parent(f->sink, otlp_sink_find(f->sink, "invoke_agent helper", 0)),
                     inner);
}

static void
test_flow_load_time_checks(void **state)
{
    struct fx *f = *state;
    char path[300];
    char diags[4096];

    put(f, "script.json", "{\"responses\": {}}");
    put(f, "bad.json",
        "{\"name\": \"bad\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"c\"}],"
        " \"flow\": {\"nodes\": [{\"agent\": \"a\", \"upstream_agents\": [\"b\"]},"
        " {\"agent\": \"b\", \"upstream_agents\": [\"a\"]},"
        " {\"agent\": \"c\", \"upstream_agents\": [\"ghost\"], \"loop_config\": "
        "{\"loop_back_to\": \"a\", \"condition_field\": \"x\", \"break_condition\": \"score >> "
        "1\"}},"
        " {\"id\": \"d\", \"agent\": \"wizard\"}]}}");
    snprintf(path, sizeof(path), "%s/bad.json", f->dir);
    assert_weft_err(load(f, path, diags, sizeof(diags)), WEFT_EPARSE);
    print_message("%s", diags);
    assert_non_null(strstr(diags, "dependency cycle"));
    assert_non_null(strstr(diags, "flow.nodes[2].upstream_agents[0]: unknown node 'ghost'"));
    assert_non_null(strstr(diags, "flow.nodes[2].loop_config.break_condition: position"));
    assert_non_null(strstr(diags, "flow.nodes[3].agent: unknown agent 'wizard'"));
    put(f, "bad2.json",
        "{\"name\": \"bad\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"script.json\"}}, \"agents\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
        " \"flow\": {\"nodes\": [{\"agent\": \"a\"}, {\"agent\": \"b\", \"loop_config\": "
        "{\"loop_back_to\": \"a\", \"condition_field\": \"x\"}}]}}");
    snprintf(path, sizeof(path), "%s/bad2.json", f->dir);
    assert_weft_err(load(f, path, diags, sizeof(diags)), WEFT_EPARSE);
    assert_non_null(strstr(diags, "'a' is not upstream of 'b'"));
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_flow_translation_loops_per_chunk_and_fans_in),
        T(test_flow_independent_nodes_overlap_in_time),
        T(test_flow_max_parallel_one_runs_in_turn),
        T(test_flow_fan_out_refills_a_slot_as_soon_as_an_item_ends),
        T(test_flow_failed_item_leaves_the_others),
        T(test_flow_required_and_optional_failures),
        T(test_flow_on_max_iterations_fail),
        T(test_flow_sub_workflow_runs_as_one_nested_step),
        T(test_flow_load_time_checks),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
