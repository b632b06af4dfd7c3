/* tests/runtime/test_experiment_langfuse.c - `weft eval` experiments as Langfuse experiments
 * (docs/langfuse.md, "Experiments in Langfuse"): an experiment of examples/support_triage over a
 * dataset of two tickets, traced to an in-memory exporter and to the Langfuse-compatible test
 * server (tests/support/langfuse_server.c). Every span of every item trace (workflow root,
 * agents, chats, the command step's tool span, the evaluate span) carries the experiment
 * context and its item's context, whose root observation id is the root span's id; the root
 * carries the item's input and expected output only when content capture is on; the Langfuse
 * exporter sends all of it to the server with the scores; a plain run carries none of it. */
#include "support/langfuse_server.h"
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK "pk-lf-exp"
#define SK "sk-lf-exp-secret-1b2c"

struct fx {
    struct langfuse_server *srv;
    char host[96];
    char dir[64];
    char state[128];
    struct weft_provider *provider;
    struct mem_exporter *mem;
    struct weft_workflow *wf;
    struct weft_dataset_item *items;
    size_t item_count;
    struct weft_experiment_report rep;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char path[256];
    char err[256] = "";
    struct weft_dataset_source src;
    FILE *out = NULL;

    assert_non_null(f);
    assert_int_equal(langfuse_server_start(PK, SK, &f->srv), 0);
    langfuse_server_host(f->srv, f->host, sizeof(f->host));
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-lfexp-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    snprintf(path, sizeof(path), "%s/tickets.jsonl", f->dir);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs("{\"input\": \"Where is my invoice for March?\", \"expected\": \"queued: billing\"}\n"
          "{\"input\": \"I cannot log in after the update\", \"expected\": {\"team\": "
          "\"support\"}}\n",
          out);
    fclose(out);
    memset(&src, 0, sizeof(src));
    src.file = path;
    assert_int_equal(
        weft_dataset_create(f->state, "tickets", NULL, NULL, &src, NULL, err, sizeof(err)),
        WEFT_OK);
    assert_weft_ok(weft_dataset_items_page(f->state, "tickets", 0, 0, 16, NULL, &f->items,
                                           &f->item_count, NULL));
    assert_int_equal(f->item_count, 2);
    snprintf(path, sizeof(path), "%s/examples/support_triage/workflow.json", WEFT_SOURCE_DIR);
    assert_weft_ok(weft_workflow_load(path, &f->wf, NULL));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_dataset_items_free(f->items, f->item_count);
    weft_workflow_free(f->wf);
    weft_provider_free(f->provider);
    langfuse_server_stop(f->srv);
    weft_test_setenv("WEFT_CAPTURE_CONTENT", NULL);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A provider with the Langfuse exporter and an in-memory exporter, each behind its own batch
 * processor, as weft_provider_add_env_exporters() sets them up. */
static void
start_provider(struct fx *f)
{
    struct weft_langfuse_options o;
    struct weft_batch_options bo = {4096, 512, 3600000, 30000};
    struct weft_exporter *lf = NULL;
    struct weft_exporter *mem = NULL;
    struct weft_processor *proc = NULL;

    memset(&o, 0, sizeof(o));
    o.host = f->host;
    o.public_key = PK;
    o.secret_key = SK;
    o.timeout_ms = 2000;
    o.max_retry_ms = 20000;
    o.initial_backoff_ms = 50;
    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(weft_langfuse_exporter_new(&o, &lf));
    assert_weft_ok(weft_batch_processor_new(lf, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
    assert_weft_ok(mem_exporter_new(&mem, &f->mem));
    assert_weft_ok(weft_batch_processor_new(mem, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
}

/* @p evaluators: the experiment's evaluator config; NULL: the dataset's (none). */
static void
run_experiment(struct fx *f, const char *evaluators)
{
    struct weft_experiment_options o;
    char err[512] = "";

    start_provider(f);
    memset(&o, 0, sizeof(o));
    o.state_path = f->state;
    o.workflow = f->wf;
    o.dataset = "tickets";
    o.name = "nightly";
    o.concurrency = 2;
    o.provider = f->provider;
    o.evaluators = evaluators;
    assert_int_equal(weft_experiment_run(&o, &f->rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(f->rep.items, 2);
    assert_weft_ok(weft_provider_force_flush(f->provider, 20000));
}

static const char *
str_attr(const struct mem_span *s, const char *key)
{
    const struct weft_value *v = mem_span_attr(s, key);

    return v != NULL && v->type == WEFT_VALUE_STRING ? v->u.str : NULL;
}

static void
hex(const uint8_t *id, size_t len, char *out)
{
    weft_hex_encode(id, len, out);
}

static const struct weft_dataset_item *
item_of(const struct fx *f, const char *id)
{
    for (size_t i = 0; id != NULL && i < f->item_count; i++) {
        if (strcmp(f->items[i].id, id) == 0) {
            return &f->items[i];
        }
    }
    fail_msg("no dataset item '%s'", id != NULL ? id : "(null)");
    return NULL;
}

static bool
has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Check every item trace in the in-memory exporter; @p is_captured: content capture was on. */
static void
check_item_traces(const struct fx *f, bool is_captured)
{
    size_t count = mem_exporter_count(f->mem);
    size_t roots = 0;

    for (size_t r = 0; r < count; r++) {
        const struct mem_span *root = mem_exporter_span(f->mem, r);
        const struct weft_dataset_item *item = NULL;
        const char *item_id = NULL;
        char root_hex[17];
        size_t spans = 0;
        bool has_chat = false;
        bool has_agent = false;
        bool has_tool = false;
        bool has_evaluate = false;

        if (root->has_parent) {
            continue;
        }
        roots++;
        assert_true(has_prefix(root->name, "invoke_workflow "));
        hex(root->span_id, 8, root_hex);
        item_id = str_attr(root, "langfuse.experiment.item.id");
        item = item_of(f, item_id);
        assert_string_equal(str_attr(root, "weft.dataset.item_id"), item_id);
        if (is_captured) {
            /* The run's input is the item's JSON string, unquoted. */
            json_t *in = json_loads(item->input, JSON_DECODE_ANY, NULL);

            assert_string_equal(str_attr(root, "langfuse.observation.input"),
                                json_string_value(in));
            json_decref(in);
            assert_string_equal(str_attr(root, "langfuse.experiment.item.expected_output"),
                                item->expected);
            assert_non_null(str_attr(root, "langfuse.observation.output"));
        } else {
            assert_null(mem_span_attr(root, "langfuse.observation.input"));
            assert_null(mem_span_attr(root, "langfuse.observation.output"));
            assert_null(mem_span_attr(root, "langfuse.experiment.item.expected_output"));
        }
        for (size_t i = 0; i < count; i++) {
            const struct mem_span *s = mem_exporter_span(f->mem, i);

            if (memcmp(s->trace_id, root->trace_id, 16) != 0) {
                continue;
            }
            spans++;
            if (str_attr(s, "langfuse.experiment.id") == NULL) {
                fail_msg("span '%s' has no langfuse.experiment.id", s->name);
            }
            assert_string_equal(str_attr(s, "langfuse.experiment.id"), f->rep.id);
            assert_string_equal(str_attr(s, "langfuse.experiment.name"), "nightly");
            assert_string_equal(str_attr(s, "langfuse.experiment.dataset.id"), "tickets");
            assert_string_equal(str_attr(s, "langfuse.experiment.metadata.dataset_version"), "1");
            assert_string_equal(str_attr(s, "langfuse.experiment.item.id"), item_id);
            assert_string_equal(str_attr(s, "langfuse.experiment.item.root_observation_id"),
                                root_hex);
            has_chat |= has_prefix(s->name, "chat ");
            has_agent |= has_prefix(s->name, "invoke_agent ");
            has_tool |= has_prefix(s->name, "execute_tool ");
            has_evaluate |= has_prefix(s->name, "evaluate ");
        }
        /* The kinds of span the example makes, each checked above. */
        assert_true(has_chat && has_agent && has_tool && has_evaluate);
        assert_true(spans >= 6);
    }
    assert_int_equal(roots, 2);
}

static void
test_every_span_of_every_item_carries_the_experiment_with_content(void **state)
{
    struct fx *f = *state;

    weft_test_setenv("WEFT_CAPTURE_CONTENT", "1");
    run_experiment(f, NULL);
    check_item_traces(f, true);
}

static void
test_root_holds_no_item_content_when_capture_is_off(void **state)
{
    struct fx *f = *state;

    weft_test_setenv("WEFT_CAPTURE_CONTENT", "0");
    run_experiment(f, NULL);
    check_item_traces(f, false);
}

/* What reached the Langfuse server: the same attributes on every span of the two item traces,
 * the root observation id naming the root span as the server stored it, and the scores. */
static void
test_langfuse_server_gets_the_experiment_attributes_and_scores(void **state)
{
    struct fx *f = *state;
    json_t *spans = NULL;
    const json_t *sp = NULL;
    size_t i = 0;
    size_t roots = 0;

    weft_test_setenv("WEFT_CAPTURE_CONTENT", "1");
    run_experiment(f, NULL);
    assert_true(langfuse_server_wait_scores(f->srv, 2, 20000));
    spans = langfuse_server_spans(f->srv);
    assert_int_equal(json_array_size(spans), mem_exporter_count(f->mem));
    json_array_foreach(spans, i, sp)
    {
        const char *root_id = langfuse_span_str(sp, "langfuse.experiment.item.root_observation_id");
        const json_t *other = NULL;
        size_t j = 0;
        bool is_found = false;

        assert_string_equal(langfuse_span_str(sp, "langfuse.experiment.id"), f->rep.id);
        assert_string_equal(langfuse_span_str(sp, "langfuse.experiment.name"), "nightly");
        assert_string_equal(langfuse_span_str(sp, "langfuse.experiment.dataset.id"), "tickets");
        assert_non_null(langfuse_span_str(sp, "langfuse.experiment.item.id"));
        assert_non_null(root_id);
        /* The id names a span of the same trace, which has no parent and is the item's root. */
        json_array_foreach(spans, j, other)
        {
            const char *id = json_string_value(json_object_get(other, "spanId"));

            if (id != NULL && strcmp(id, root_id) == 0) {
                assert_string_equal(json_string_value(json_object_get(other, "traceId")),
                                    json_string_value(json_object_get(sp, "traceId")));
                assert_non_null(
                    langfuse_span_str(other, "langfuse.experiment.item.expected_output"));
                is_found = true;
            }
        }
        assert_true(is_found);
        roots += strcmp(json_string_value(json_object_get(sp, "spanId")), root_id) == 0 ? 1 : 0;
    }
    assert_int_equal(roots, 2);
    json_decref(spans);
}

/* An empty evaluator list is no evaluators: each item is judged by its run's status (one
 * "status" score on its evaluate span), not passed by an empty list. */
static void
test_an_empty_evaluator_list_scores_the_run_status(void **state)
{
    struct fx *f = *state;
    size_t evaluates = 0;

    weft_test_setenv("WEFT_CAPTURE_CONTENT", "0");
    run_experiment(f, "[]");
    for (size_t i = 0; i < mem_exporter_count(f->mem); i++) {
        const struct mem_span *s = mem_exporter_span(f->mem, i);
        const struct weft_attr *a = NULL;

        if (!has_prefix(s->name, "evaluate ")) {
            continue;
        }
        evaluates++;
        assert_int_equal(s->event_count, 1);
        assert_string_equal(s->event_names[0], "gen_ai.evaluation.result");
        a = s->event_attrs[0];
        assert_string_equal(a[0].key, "gen_ai.evaluation.name");
        assert_string_equal(a[0].value.u.str, "status");
    }
    assert_int_equal(evaluates, 2);
    assert_int_equal(f->rep.passed + f->rep.failed + f->rep.errored, 2);
}

/* With none of the options set, a run's spans carry no experiment attribute. */
static void
test_plain_run_carries_no_experiment_attributes(void **state)
{
    struct fx *f = *state;
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char error[512] = "";
    size_t count = 0;

    start_provider(f);
    memset(&ro, 0, sizeof(ro));
    ro.provider = f->provider;
    ro.input = "Where is my invoice for March?";
    ro.state_path = f->state;
    ro.capture_content = 1;
    assert_weft_ok(weft_run(f->wf, &ro, &r, error, sizeof(error)));
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    weft_run_result_free(r);
    assert_weft_ok(weft_provider_force_flush(f->provider, 20000));
    count = mem_exporter_count(f->mem);
    assert_true(count >= 5);
    for (size_t i = 0; i < count; i++) {
        const struct mem_span *s = mem_exporter_span(f->mem, i);

        for (size_t k = 0; k < s->attr_count; k++) {
            if (has_prefix(s->attrs[k].key, "langfuse.experiment.")) {
                fail_msg("span '%s' has %s", s->name, s->attrs[k].key);
            }
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_every_span_of_every_item_carries_the_experiment_with_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_root_holds_no_item_content_when_capture_is_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_langfuse_server_gets_the_experiment_attributes_and_scores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_empty_evaluator_list_scores_the_run_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_plain_run_carries_no_experiment_attributes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
