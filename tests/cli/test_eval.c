/* tests/cli/test_eval.c - `weft eval` as a user types it, end to end on examples/support_triage
 * with the scripted provider (issue 31, "Done when"): 30 stored runs, 8 of which fail at step
 * route; a dataset of the failures and one of all 30; the fixed workflow --from-failure passes
 * all 8, each fork making fewer LLM calls than a full run of the same ticket (from the stored
 * exchanges) and the saving counted; the original and the fixed workflow over all 30 compare as
 * 8 fixed, 22 unchanged; --fail-under gates the exit status; a broken version (its router fails
 * every ticket) shows up as broken items; list and show. */
#include "support/cli_run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define WEFT_BIN WEFT_BINARY_DIR "/weft"
#define EXAMPLE  WEFT_SOURCE_DIR "/examples/support_triage/"
#define ORIGINAL EXAMPLE "workflow.json"
#define FIXED    EXAMPLE "workflow_fixed.json"

static int
setup(void **state)
{
    struct weft_test_cli *f = weft_test_cli_new(WEFT_BIN, "weft-eval-cli");

    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    weft_test_cli_free(*state);
    return 0;
}

/* The 30 tickets, each run once with the original workflow (8 fail at route). */
static void
run_tickets(struct weft_test_cli *f)
{
    FILE *in = fopen(EXAMPLE "tickets.jsonl", "r");
    char line[1024];
    size_t runs = 0;
    size_t failed = 0;

    assert_non_null(in);
    while (fgets(line, sizeof(line), in) != NULL) {
        json_t *doc = weft_test_json_parse(line);
        struct weft_test_cli_result r =
            WEFT_TEST_CLI_RUN(f, "run", ORIGINAL, "--input",
                              json_string_value(json_object_get(doc, "input")), "-q", "--no-trace");

        assert_true(r.status == 0 || r.status == 1);
        failed += r.status == 1 ? 1 : 0;
        runs++;
        json_decref(doc);
    }
    fclose(in);
    assert_int_equal(runs, 30);
    assert_int_equal(failed, 8);
}

static size_t
exchanges(const struct weft_test_cli *f, const char *run_id)
{
    struct weft_run_exchange *ex = NULL;
    size_t count = 0;

    assert_int_equal(weft_run_exchanges_load(f->state, run_id, &ex, &count), WEFT_OK);
    weft_run_exchanges_free(ex, count);
    return count;
}

/* The stored input of run @p run_id (new text). */
static char *
input_of(const struct weft_test_cli *f, const char *run_id)
{
    struct weft_run_details *d = NULL;
    char *input = NULL;

    assert_int_equal(weft_run_load(f->state, run_id, &d), WEFT_OK);
    input = strdup(d->info.input);
    weft_run_details_free(d);
    return input;
}

static json_t *
eval_json(struct weft_test_cli *f, const char *const *args, int want_status)
{
    struct weft_test_cli_result r = weft_test_cli_run(f, args);

    if (r.status != want_status) {
        fail_msg("weft eval: exit %d, expected %d: %s", r.status, want_status, r.err);
    }
    return weft_test_json_parse(r.out);
}

static size_t
count_of(const json_t *doc, const char *key)
{
    return (size_t)json_integer_value(json_object_get(json_object_get(doc, "summary"), key));
}

/* --from-failure: each of the 8 forks made fewer LLM calls than the full run of its ticket
 * (@p full: the fixed workflow over all 30, from the start). */
static void
check_from_failure(struct weft_test_cli *f, const json_t *forks, const json_t *full)
{
    const json_t *items = json_object_get(forks, "items");
    size_t i = 0;
    json_t *it = NULL;

    assert_int_equal(json_array_size(items), 8);
    json_array_foreach(items, i, it)
    {
        const char *run_id = json_string_value(json_object_get(it, "run_id"));
        char *input = input_of(f, run_id);
        size_t j = 0;
        json_t *other = NULL;
        bool is_found = false;

        assert_string_equal(json_string_value(json_object_get(it, "status")), "passed");
        json_array_foreach(json_object_get(full, "items"), j, other)
        {
            const char *full_run = json_string_value(json_object_get(other, "run_id"));
            char *other_input = input_of(f, full_run);

            if (!is_found && strcmp(other_input, input) == 0) {
                is_found = true;
                assert_int_equal(exchanges(f, full_run), 2); /* classify, reply */
                assert_int_equal(exchanges(f, run_id), 1);   /* reply; classify reused */
            }
            free(other_input);
        }
        assert_true(is_found);
        free(input);
    }
}

static void
test_eval_support_triage_end_to_end(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r;
    json_t *forks = NULL;
    json_t *after = NULL;
    json_t *cmp = NULL;
    const json_t *first = NULL;

    run_tickets(f);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "refunds", "--from-runs", "--workflow",
                          "support-triage", "--status", "failed");
    assert_int_equal(r.status, 0);
    r = WEFT_TEST_CLI_RUN(f, "dataset", "create", "tickets", "--from-runs", "--workflow",
                          "support-triage");
    assert_int_equal(r.status, 0);

    /* The fix, where the plan broke: all 8 pass, 8 LLM calls made and 8 saved. */
    forks = eval_json(f,
                      (const char *const[]){"eval", FIXED, "--dataset", "refunds", "--from-failure",
                                            "--concurrency", "4", "--json", NULL},
                      0);
    assert_string_equal(json_string_value(json_object_get(forks, "schema")), "weft.experiment/v1");
    assert_int_equal(count_of(forks, "passed"), 8);
    assert_int_equal(count_of(forks, "forked"), 8);
    assert_int_equal(count_of(forks, "llm_calls"), 8);
    assert_int_equal(count_of(forks, "saved_llm_calls"), 8);
    assert_true(count_of(forks, "saved_tokens") > 0);

    /* The original and the fixed workflow over all 30, from the start. */
    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "tickets", "--name", "before",
                          "--concurrency", "3", "-q");
    assert_int_equal(r.status, 0); /* no --fail-under: failures are results, not errors */
    assert_non_null(strstr(r.out, "pass rate    73.3%"));
    after = eval_json(f,
                      (const char *const[]){"eval", FIXED, "--dataset", "tickets", "--name",
                                            "after", "--fail-under", "0.9", "--json", NULL},
                      0);
    assert_int_equal(count_of(after, "passed"), 30);
    check_from_failure(f, forks, after);

    /* --fail-under gates: 22 of 30 is under 0.9. */
    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "tickets", "--name", "gate",
                          "--fail-under", "0.9", "-q");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "below --fail-under 0.9"));

    cmp = eval_json(f, (const char *const[]){"eval", "compare", "before", "after", "--json", NULL},
                    0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cmp, "counts"), "fixed")),
                     8);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(cmp, "counts"), "unchanged")), 22);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cmp, "counts"), "broken")),
                     0);
    first = json_array_get(json_object_get(cmp, "items"), 0); /* changed items first */
    assert_string_equal(json_string_value(json_object_get(first, "change")), "fixed");
    assert_non_null(json_string_value(json_object_get(first, "a_run_id")));
    assert_non_null(json_string_value(json_object_get(first, "b_run_id")));
    assert_true(json_real_value(json_object_get(json_object_get(cmp, "deltas"), "pass_rate")) >
                0.26);
    /* Each experiment names its workflow's version: the fixed one differs, a rerun does not. */
    assert_true(json_is_false(json_object_get(cmp, "same_workflow")));
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(cmp, "a"), "workflow_hash")),
               "fnv1a64:"));
    json_decref(cmp);
    cmp =
        eval_json(f, (const char *const[]){"eval", "compare", "before", "gate", "--json", NULL}, 0);
    assert_true(json_is_true(json_object_get(cmp, "same_workflow")));
    r = WEFT_TEST_CLI_RUN(f, "eval", "compare", "before", "after");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "fixed 8   broken 0   unchanged 22"));
    json_decref(cmp);
    json_decref(after);
    json_decref(forks);
}

/* A version whose router fails every ticket: the 22 that passed before are broken. */
static void
test_eval_broken_version(void **state)
{
    struct weft_test_cli *f = *state;
    json_t *wf = NULL;
    json_t *cmp = NULL;
    char path[256];
    struct weft_test_cli_result r;

    run_tickets(f);
    assert_int_equal(WEFT_TEST_CLI_RUN(f, "dataset", "create", "tickets", "--from-runs",
                                       "--workflow", "support-triage")
                         .status,
                     0);
    wf = json_load_file(ORIGINAL, 0, NULL);
    assert_non_null(wf);
    json_object_set_new(json_object_get(json_object_get(wf, "models"), "scripted"), "script",
                        json_string(EXAMPLE "script.json"));
    json_object_set_new(json_array_get(json_object_get(wf, "plan"), 1), "argv",
                        json_pack("[s, s, s]", "sh", "-c", "echo 'route: down' >&2; exit 3"));
    snprintf(path, sizeof(path), "%s/broken.json", f->dir);
    assert_int_equal(json_dump_file(wf, path, JSON_INDENT(2)), 0);
    json_decref(wf);

    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "tickets", "--name", "before", "-q");
    assert_int_equal(r.status, 0);
    r = WEFT_TEST_CLI_RUN(f, "eval", "broken.json", "--dataset", "tickets", "--name", "broken",
                          "-q", "--concurrency", "8", "--fail-under", "0.5");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, "passed 0   failed 30   errored 0"));
    cmp = eval_json(f, (const char *const[]){"eval", "compare", "before", "broken", "--json", NULL},
                    0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cmp, "counts"), "broken")),
                     22);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(cmp, "counts"), "unchanged")), 8);
    json_decref(cmp);

    /* Without evaluators the run's status is the score, on the item run's trace too. */
    r = WEFT_TEST_CLI_RUN(f, "trace", "show", "last", "--json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"weft.experiment.name\": \"broken\""));
    assert_non_null(strstr(r.out, "gen_ai.evaluation.result"));

    /* list and show read them back; show takes a name or an id prefix. */
    r = WEFT_TEST_CLI_RUN(f, "eval", "list");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "broken"));
    assert_non_null(strstr(r.out, "before"));
    r = WEFT_TEST_CLI_RUN(f, "eval", "show", "broken");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "pass rate    0.0%"));
    r = WEFT_TEST_CLI_RUN(f, "eval", "show", "no-such-experiment");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no such experiment"));
}

/* Evaluators over the status: a passing and a failing one, scores stored per item and recorded
 * on the item run's trace (the events the Langfuse exporter sends as scores); a judge with no
 * model to ask errors the items, and an errored experiment exits 6, never 0. */
/* LLM judges answered by a scripted model of the workflow: 29 polite replies and a curt one
 * pass and fail, their calls traced under the item's run; a judge whose queue runs dry (the
 * example's own script has none) makes its item errored, never passed. */
static void
judged(struct weft_test_cli *f)
{
    json_t *wf = json_load_file(FIXED, 0, NULL);
    json_t *models = json_object_get(wf, "models");
    json_t *answers = json_array();
    json_t *doc = NULL;
    char path[512];
    struct weft_test_cli_result r;

    assert_non_null(wf);
    json_object_set_new(json_object_get(models, "scripted"), "script",
                        json_string(EXAMPLE "script.json"));
    json_object_set_new(models, "judge",
                        json_pack("{s:s, s:s, s:s}", "provider", "scripted", "model", "judge-model",
                                  "script", "judge_script.json"));
    for (size_t i = 0; i < json_array_size(json_object_get(wf, "agents")); i++) {
        json_object_set_new(json_array_get(json_object_get(wf, "agents"), i), "model",
                            json_string("scripted")); /* two models now: say which */
    }
    snprintf(path, sizeof(path), "%s/judged.json", f->dir);
    assert_int_equal(json_dump_file(wf, path, JSON_INDENT(1)), 0);
    json_decref(wf);
    for (int i = 0; i < 30; i++) {
        json_array_append_new(answers, json_pack("{s:{s:f, s:b, s:s}}", "content", "score",
                                                 i < 29 ? 0.9 : 0.1, "pass", i < 29, "explanation",
                                                 i < 29 ? "polite" : "curt"));
    }
    wf = json_pack("{s:i, s:{s:{s:o}}}", "version", 1, "responses", "polite", "evaluate", answers);
    snprintf(path, sizeof(path), "%s/judge_script.json", f->dir);
    assert_int_equal(json_dump_file(wf, path, 0), 0);
    json_decref(wf);
    weft_test_write_file(f->dir, "polite.json",
                         "[{\"name\": \"polite\", \"type\": \"llm_judge\", \"model\": "
                         "\"judge\", \"rubric\": \"Is the reply polite?\"}]");
    snprintf(path, sizeof(path), "%s/judged.json", f->dir);
    doc = eval_json(f,
                    (const char *const[]){"eval", path, "--dataset", "tickets", "--evaluators",
                                          "polite.json", "--json", "-q", NULL},
                    0);
    assert_int_equal(count_of(doc, "passed"), 29);
    assert_int_equal(count_of(doc, "failed"), 1);
    json_decref(doc);
    r = WEFT_TEST_CLI_RUN(f, "trace", "show", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "chat judge"));

    /* The example's script has no answers for a judge: every item errored (exit 6). */
    weft_test_write_file(f->dir, "dry.json",
                         "[{\"name\": \"polite\", \"type\": \"llm_judge\", \"model\": "
                         "\"scripted\", \"rubric\": \"Is the reply polite?\"}]");
    r = WEFT_TEST_CLI_RUN(f, "eval", FIXED, "--dataset", "tickets", "--evaluators", "dry.json",
                          "-q");
    assert_int_equal(r.status, 6);
    assert_non_null(strstr(r.out, "errored 30"));
}

static void
test_eval_evaluators(void **state)
{
    struct weft_test_cli *f = *state;
    json_t *doc = NULL;
    const json_t *scores = NULL;
    struct weft_test_cli_result r;

    run_tickets(f);
    assert_int_equal(WEFT_TEST_CLI_RUN(f, "dataset", "create", "tickets", "--from-runs",
                                       "--workflow", "support-triage")
                         .status,
                     0);
    weft_test_write_file(f->dir, "reply.json",
                         "[{\"name\": \"thanks\", \"type\": \"contains\", \"value\": \"Thanks\"},"
                         " {\"name\": \"refund\", \"type\": \"regex\", \"pattern\": \"refund\"}]");
    doc = eval_json(f,
                    (const char *const[]){"eval", FIXED, "--dataset", "tickets", "--evaluators",
                                          "reply.json", "--json", "-q", NULL},
                    0);
    assert_int_equal(count_of(doc, "failed"), 30); /* no reply mentions a refund */
    scores = json_object_get(json_array_get(json_object_get(doc, "items"), 0), "scores");
    assert_int_equal(json_array_size(scores), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(scores, 0), "evaluator")),
                        "thanks");
    assert_true(json_is_true(json_object_get(json_array_get(scores, 0), "passed")));
    assert_true(json_is_false(json_object_get(json_array_get(scores, 1), "passed")));
    json_decref(doc);
    r = WEFT_TEST_CLI_RUN(f, "trace", "show", "last", "--json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "weft.experiment.id"));
    assert_non_null(strstr(r.out, "weft.dataset.item_id"));
    assert_non_null(strstr(r.out, "gen_ai.evaluation.result"));

    /* A judge whose model is not the workflow's: refused before any item runs. */
    weft_test_write_file(f->dir, "judge.json",
                         "[{\"type\": \"llm_judge\", \"model\": \"nowhere\","
                         " \"rubric\": \"Polite?\"}]");
    r = WEFT_TEST_CLI_RUN(f, "eval", FIXED, "--dataset", "tickets", "--evaluators", "judge.json",
                          "-q");
    assert_int_not_equal(r.status, 0);
    assert_int_equal(r.status, 2); /* bad configuration */
    assert_non_null(strstr(r.err, "not one of the workflow's models"));
    judged(f);
}

static void
test_eval_usage(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL);

    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--dataset"));
    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "x", "--fail-under", "1.5");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--fail-under: expected a pass rate from 0 to 1"));
    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "x", "--concurrency", "0");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "eval", ORIGINAL, "--dataset", "nothing-here");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "nothing-here"));
    r = WEFT_TEST_CLI_RUN(f, "eval", "--help");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--from-failure"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_eval_support_triage_end_to_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_broken_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_evaluators, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_usage, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
