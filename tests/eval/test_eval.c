/* tests/eval/test_eval.c - evaluators (include/weft/eval.h, runtime/eval/): every kind passing
 * and failing, bad configs with their messages, the command evaluator with a real shell script,
 * the LLM judge answered by the scripted provider (pass, fail, provider error, unparseable
 * answer, no provider) and traced as a `chat {model}` span, json_schema cases, the verdict rule
 * and scores recorded as gen_ai.evaluation.result events. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include "runtime/llm/llm.h"
#include <weft/eval.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse @p config (must succeed) and score @p sub with @p ctx; the scores go to *out. */
static void
score(const char *config,
      const struct weft_eval_subject *sub,
      const struct weft_eval_context *ctx,
      struct weft_eval_scores *out)
{
    struct weft_evaluators *e = NULL;
    char err[512] = "";

    if (weft_evaluators_parse(config, NULL, &e, err, sizeof(err)) != WEFT_OK) {
        fail_msg("parse %s: %s", config, err);
    }
    assert_weft_ok(weft_evaluators_score(e, sub, ctx, out));
    assert_int_equal(out->count, weft_evaluators_count(e));
    weft_evaluators_free(e);
}

/* The pass/error flags of one single-evaluator config on @p output with @p expected. */
static void
expect_one(const char *config, const char *output, const char *expected, bool pass, bool errored)
{
    struct weft_eval_subject sub = {"the input", expected, output, NULL};
    struct weft_eval_scores s;

    score(config, &sub, NULL, &s);
    assert_int_equal(s.count, 1);
    if (s.scores[0].is_passed != pass || s.scores[0].is_errored != errored) {
        fail_msg("%s on \"%s\": passed %d errored %d (%s)", config, output, s.scores[0].is_passed,
                 s.scores[0].is_errored, s.scores[0].explanation);
    }
    assert_non_null(s.scores[0].explanation);
    assert_true(s.scores[0].value >= 0 && s.scores[0].value <= 1);
    assert_int_equal(s.is_passed, pass && !errored);
    weft_eval_scores_cleanup(&s);
}

static void
expect_parse_error(const char *config, const char *message)
{
    struct weft_evaluators *e = NULL;
    char err[512] = "";

    assert_int_equal(weft_evaluators_parse(config, NULL, &e, err, sizeof(err)), WEFT_EPARSE);
    assert_null(e);
    if (strstr(err, message) == NULL) {
        fail_msg("%s: got \"%s\", want \"%s\"", config, err, message);
    }
}

static void
test_eval_exact_and_contains(void **state)
{
    (void)state;
    expect_one("[{\"type\":\"exact\"}]", "Paris", "\"Paris\"", true, false);
    expect_one("[{\"type\":\"exact\"}]", " paris\n", "\"Paris\"", false, false);
    expect_one("[{\"type\":\"exact\",\"trim\":true,\"case_insensitive\":true}]", " paris\n",
               "\"Paris\"", true, false);
    expect_one("[{\"type\":\"exact\",\"value\":\"42\"}]", "42", NULL, true, false);
    expect_one("[{\"type\":\"exact\"}]", "{\"a\":1}", "{\"a\": 1}", true, false);
    expect_one("[{\"type\":\"exact\"}]", "x", NULL, false, true); /* nothing to compare with */
    expect_one("[{\"type\":\"contains\"}]", "the capital is Paris.", "\"Paris\"", true, false);
    expect_one("[{\"type\":\"contains\",\"value\":\"Lyon\"}]", "Paris", NULL, false, false);
    expect_one("[{\"type\":\"contains\",\"value\":[\"a\",\"B\"],\"case_insensitive\":true}]", "ab",
               NULL, true, false);
    expect_one("[{\"type\":\"contains\",\"value\":[\"a\",\"z\"]}]", "ab", NULL, false, false);
    expect_one("[{\"type\":\"contains\",\"value\":[\"a\",\"z\"],\"mode\":\"any\"}]", "ab", NULL,
               true, false);
    expect_one("[{\"type\":\"contains\",\"value\":[\"y\",\"z\"],\"mode\":\"any\"}]", "ab", NULL,
               false, false);
}

static void
test_eval_regex_numeric_rewards_verdicts(void **state)
{
    struct weft_run_result r;
    char *verdicts[] = {(char *)"coder:REJECTED", (char *)"coder:APPROVED"};
    struct weft_eval_subject sub = {NULL, NULL, "x", &r};
    struct weft_eval_scores s;

    (void)state;
    expect_one("[{\"type\":\"regex\",\"pattern\":\"^[0-9]+ apples$\"}]", "12 apples", NULL, true,
               false);
    expect_one("[{\"type\":\"regex\",\"pattern\":\"^[0-9]+ apples$\"}]", "many apples", NULL, false,
               false);
    expect_one("[{\"type\":\"regex\",\"pattern\":\"APPLES\",\"case_insensitive\":true}]", "apples",
               NULL, true, false);
    expect_one("[{\"type\":\"numeric\"}]", " 3.14 ", "3.14159", false, false);
    expect_one("[{\"type\":\"numeric\",\"tolerance\":0.01}]", "3.14", "3.14159", true, false);
    expect_one("[{\"type\":\"numeric\",\"tolerance\":0.01,\"relative\":true}]", "990", "1000", true,
               false);
    expect_one("[{\"type\":\"numeric\",\"tolerance\":0.001,\"relative\":true}]", "990", "1000",
               false, false);
    expect_one("[{\"type\":\"numeric\",\"expected\":7}]", "\"7\"", NULL, true, false);
    expect_one("[{\"type\":\"numeric\"}]", "seven", "7", false, true);
    expect_one("[{\"type\":\"numeric\"}]", "7", NULL, false, true);

    memset(&r, 0, sizeof(r));
    r.reward = 1.5;
    r.verdicts = verdicts;
    r.verdict_count = 2;
    score("[{\"type\":\"rewards\",\"threshold\":1},{\"type\":\"rewards\",\"threshold\":2},"
          "{\"type\":\"verdicts\"},{\"type\":\"verdicts\",\"rule\":\"last_approved\"}]",
          &sub, NULL, &s);
    assert_string_equal(s.scores[0].name, "rewards");
    assert_string_equal(s.scores[1].name, "rewards_2");
    assert_true(s.scores[0].is_passed);
    assert_false(s.scores[1].is_passed);
    assert_false(s.scores[2].is_passed); /* a REJECTED verdict */
    assert_string_equal(s.scores[2].explanation, "1 of 2 verdicts REJECTED");
    assert_true(s.scores[3].is_passed); /* the last one is APPROVED */
    assert_false(s.is_passed);
    weft_eval_scores_cleanup(&s);
    sub.result = NULL; /* no run result: those two cannot decide */
    score("[{\"type\":\"rewards\"},{\"type\":\"verdicts\"}]", &sub, NULL, &s);
    assert_true(s.scores[0].is_errored && s.scores[1].is_errored);
    assert_false(s.scores[0].is_passed || s.scores[1].is_passed);
    weft_eval_scores_cleanup(&s);
}

static void
test_eval_json_schema(void **state)
{
    static const char cfg[] =
        "[{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\",\"required\":[\"name\"],"
        "\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\","
        "\"minLength\":2},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]}}}}}]";
    struct weft_eval_subject sub = {NULL, NULL, "{\"name\":\"Al\",\"age\":200}", NULL};
    struct weft_eval_scores s;

    (void)state;
    expect_one(cfg, "{\"name\":\"Al\",\"age\":30,\"tags\":[\"a\"]}", NULL, true, false);
    expect_one(cfg, "{\"age\":30}", NULL, false, false);              /* required */
    expect_one(cfg, "{\"name\":\"A\"}", NULL, false, false);          /* minLength */
    expect_one(cfg, "{\"name\":\"Al\",\"x\":1}", NULL, false, false); /* additionalProperties */
    expect_one(cfg, "{\"name\":\"Al\",\"tags\":[\"c\"]}", NULL, false, false); /* enum */
    expect_one(cfg, "[1]", NULL, false, false);                                /* type */
    expect_one(cfg, "not json {", NULL, false, true); /* not JSON: errored */
    score(cfg, &sub, NULL, &s);
    assert_false(s.scores[0].is_passed);
    assert_non_null(strstr(s.scores[0].explanation, "age"));
    weft_eval_scores_cleanup(&s);
}

static void
test_eval_bad_configs_say_where_and_what(void **state)
{
    (void)state;
    expect_parse_error("[{\"type\":\"exact\"},{\"type\":\"exact\"},"
                       "{\"type\":\"regex\",\"pattern\":\"a(b\"}]",
                       "evaluators[2].pattern: expected a valid regular expression (");
    expect_parse_error("{}", "evaluators: expected an array of evaluators, got object");
    expect_parse_error("[", "evaluators: invalid JSON");
    expect_parse_error("[{\"type\":\"fuzzy\"}]", "evaluators[0].type: unknown type \"fuzzy\"");
    expect_parse_error("[{}]", "evaluators[0].type: missing");
    expect_parse_error("[3]", "evaluators[0]: expected an object, got integer");
    expect_parse_error("[{\"type\":\"regex\"}]", "evaluators[0].pattern: missing");
    expect_parse_error("[{\"type\":\"exact\",\"patern\":1}]",
                       "evaluators[0].patern: unknown option for type exact");
    expect_parse_error("[{\"type\":\"contains\",\"value\":[1]}]",
                       "evaluators[0].value[0]: expected string, got integer");
    expect_parse_error("[{\"type\":\"contains\",\"value\":[]}]",
                       "evaluators[0].value: expected a string or an array of strings, got an "
                       "empty array");
    expect_parse_error("[{\"type\":\"contains\",\"mode\":\"some\"}]",
                       "evaluators[0].mode: expected \"all\" or \"any\"");
    expect_parse_error("[{\"type\":\"json_schema\"}]", "evaluators[0].schema: expected an object");
    expect_parse_error("[{\"type\":\"numeric\",\"tolerance\":-1}]",
                       "evaluators[0].tolerance: expected a number >= 0");
    expect_parse_error("[{\"type\":\"command\",\"argv\":[]}]",
                       "evaluators[0].argv: expected a non-empty array");
    expect_parse_error("[{\"type\":\"llm_judge\",\"rubric\":\"r\"}]",
                       "evaluators[0].model: missing");
    /* A timeout beyond a day would overflow the milliseconds it is kept in. */
    expect_parse_error("[{\"type\":\"command\",\"argv\":[\"true\"],\"timeout_s\":1e10}]",
                       "evaluators[0].timeout_s: expected seconds in [0.001, 86400], got 1e+10");
    expect_parse_error("[{\"type\":\"llm_judge\",\"rubric\":\"r\",\"model\":\"m\","
                       "\"timeout_s\":0}]",
                       "evaluators[0].timeout_s: expected seconds in [0.001, 86400], got 0");
    expect_parse_error("[{\"type\":\"command\",\"argv\":[\"true\"],\"timeout_s\":\"5\"}]",
                       "evaluators[0].timeout_s: expected number, got string");
    expect_parse_error("[{\"type\":\"llm_judge\",\"rubric\":\"r\",\"model\":\"m\","
                       "\"input_price\":1}]",
                       "evaluators[0].output_price: missing");
    expect_parse_error("[{\"type\":\"verdicts\",\"rule\":\"all\"}]",
                       "evaluators[0].rule: expected \"no_rejected\" or \"last_approved\"");
    expect_parse_error("[{\"type\":\"exact\",\"name\":\"a\"},{\"type\":\"regex\",\"name\":\"a\","
                       "\"pattern\":\"x\"}]",
                       "evaluators[1].name: \"a\" is already the name of evaluators[0]");
    expect_parse_error("[{\"type\":\"rewards\",\"threshold\":\"1\"}]",
                       "evaluators[0].threshold: expected number, got string");
    assert_int_equal(weft_evaluators_parse(NULL, NULL, NULL, NULL, 0), WEFT_EINVAL);
}

static void
test_eval_command_runs_a_shell_script(void **state)
{
    char dir[] = "/tmp/weft-eval-XXXXXX";
    char config[1024];
    struct weft_eval_subject sub = {"six times seven", "42", "42", NULL};
    struct weft_eval_context ctx;
    struct weft_eval_scores s;

    (void)state;
    assert_non_null(mkdtemp(dir));
    weft_test_write_file(dir, "check.sh",
                         "out=$(cat)\n"
                         "if [ \"$out\" = \"$WEFT_EVAL_EXPECTED\" ]; then\n"
                         "  echo \"input: $WEFT_EVAL_INPUT ($WEFT_EVAL_NAME)\"; echo 0.8; exit 0\n"
                         "fi\n"
                         "echo \"got $out, want $WEFT_EVAL_EXPECTED\" >&2; exit 3\n");
    snprintf(config, sizeof(config),
             "[{\"type\":\"command\",\"name\":\"answer\",\"argv\":[\"sh\",\"%s/check.sh\"]},"
             "{\"type\":\"command\",\"argv\":[\"%s/no-such-program\"]},"
             "{\"type\":\"command\",\"argv\":[\"sh\",\"-c\",\"sleep 5\"],\"timeout_s\":0.2}]",
             dir, dir);
    memset(&ctx, 0, sizeof(ctx));
    ctx.workdir = dir;
    score(config, &sub, &ctx, &s);
    assert_true(s.scores[0].is_passed);
    assert_false(s.scores[0].is_errored);
    assert_true(fabs(s.scores[0].value - 0.8) < 1e-9); /* the reward on the last line */
    assert_true(s.scores[1].is_errored);               /* cannot start */
    assert_false(s.scores[1].is_passed);
    assert_non_null(strstr(s.scores[1].explanation, "spawn_failed"));
    assert_true(s.scores[2].is_errored); /* timed out */
    assert_non_null(strstr(s.scores[2].explanation, "timeout"));
    assert_false(s.is_passed);
    weft_eval_scores_cleanup(&s);

    sub.output = "41";
    score(config, &sub, &ctx, &s);
    assert_false(s.scores[0].is_passed);
    assert_false(s.scores[0].is_errored);
    assert_true(s.scores[0].value == 0);
    assert_non_null(strstr(s.scores[0].explanation, "exited 3: got 41, want 42"));
    weft_eval_scores_cleanup(&s);
    weft_test_rmtree(dir);
}

/* A scripted provider whose "tone/evaluate" queue holds @p responses (a JSON array). */
static struct llm_provider *
judge_provider(const char *responses)
{
    char text[4096];
    json_t *script = NULL;
    struct llm_provider *p = NULL;
    struct llm_error err;

    snprintf(text, sizeof(text), "{\"version\":1,\"responses\":{\"tone\":{\"evaluate\":%s}}}",
             responses);
    script = json_loads(text, 0, NULL);
    assert_non_null(script);
    if (weft__llm_scripted_new(script, "test", &p, &err) != WEFT_OK) {
        fail_msg("script: %s", err.message);
    }
    json_decref(script);
    return p;
}

static const struct weft_attr *
attr(const struct mem_span *sp, const char *key)
{
    for (size_t i = 0; i < sp->attr_count; i++) {
        if (strcmp(sp->attrs[i].key, key) == 0) {
            return &sp->attrs[i];
        }
    }
    return NULL;
}

static void
test_eval_llm_judge_scripted(void **state)
{
    static const char cfg[] = "[{\"type\":\"llm_judge\",\"name\":\"tone\",\"rubric\":\"Polite?\","
                              "\"model\":\"judge-1\",\"input_price\":2,\"output_price\":10}]";
    struct llm_provider *p = judge_provider(
        "[{\"content\":{\"score\":0.9,\"pass\":true,\"explanation\":\"polite\"},"
        "\"usage\":{\"input_tokens\":100,\"output_tokens\":20},\"model\":\"judge-1-0613\"},"
        "{\"content\":\"Sure! {\\\"score\\\": 0.2, \\\"pass\\\": false, "
        "\\\"explanation\\\": \\\"rude\\\"}\"},"
        "{\"error\":{\"type\":\"http_500\",\"message\":\"server error\"}},"
        "{\"content\":\"I think it is fine.\"},"
        "{\"content\":{\"score\":3,\"pass\":true}}]");
    struct weft_exporter *exp = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_processor *proc = NULL;
    struct weft_provider *tp = NULL;
    struct weft_eval_context ctx;
    struct weft_eval_subject sub = {"say hi", NULL, "Hello there!", NULL};
    struct weft_eval_scores s;
    const struct mem_span *sp = NULL;

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &tp));
    assert_weft_ok(mem_exporter_new(&exp, &mem));
    assert_weft_ok(weft_simple_processor_new(exp, &proc));
    assert_weft_ok(weft_provider_add_processor_take(tp, proc));
    memset(&ctx, 0, sizeof(ctx));
    ctx.judge_provider = p;
    assert_weft_ok(weft_provider_get_tracer(tp, "test", NULL, &ctx.tracer));

    score(cfg, &sub, &ctx, &s); /* 1: a pass, traced with usage and cost */
    assert_true(s.scores[0].is_passed && !s.scores[0].is_errored);
    assert_true(fabs(s.scores[0].value - 0.9) < 1e-9);
    assert_string_equal(s.scores[0].explanation, "polite");
    assert_int_equal(s.input_tokens, 100);
    assert_int_equal(s.output_tokens, 20);
    assert_true(fabs(s.cost_usd - (100 * 2 + 20 * 10) / 1e6) < 1e-12);
    assert_true(s.is_passed);
    weft_eval_scores_cleanup(&s);
    assert_int_equal(mem_exporter_count(mem), 1);
    sp = mem_exporter_span(mem, 0);
    assert_string_equal(sp->name, "chat judge-1");
    assert_int_equal(sp->kind, WEFT_SPAN_KIND_CLIENT);
    assert_string_equal(attr(sp, "gen_ai.operation.name")->value.u.str, "chat");
    assert_string_equal(attr(sp, "gen_ai.provider.name")->value.u.str, "weft.scripted");
    assert_string_equal(attr(sp, "gen_ai.request.model")->value.u.str, "judge-1");
    assert_string_equal(attr(sp, "gen_ai.response.model")->value.u.str, "judge-1-0613");
    assert_int_equal(attr(sp, "gen_ai.usage.input_tokens")->value.u.i, 100);
    assert_int_equal(attr(sp, "gen_ai.usage.output_tokens")->value.u.i, 20);
    assert_non_null(attr(sp, "weft.cost.usd"));
    assert_int_equal(sp->event_count, 0); /* the caller records the score, once */

    score(cfg, &sub, &ctx, &s); /* 2: a fail, the object found in the text */
    assert_false(s.scores[0].is_passed || s.scores[0].is_errored);
    assert_true(fabs(s.scores[0].value - 0.2) < 1e-9);
    assert_string_equal(s.scores[0].explanation, "rude");
    weft_eval_scores_cleanup(&s);

    score(cfg, &sub, &ctx, &s); /* 3: the provider fails: errored, never passed */
    assert_true(s.scores[0].is_errored && !s.scores[0].is_passed);
    assert_non_null(strstr(s.scores[0].explanation, "http_500"));
    assert_false(s.is_passed);
    weft_eval_scores_cleanup(&s);
    assert_int_equal(mem_exporter_span(mem, 2)->status, WEFT_STATUS_ERROR);

    for (int i = 0; i < 3; i++) { /* 4: prose, 5: a score out of range, 6: script exhausted */
        score(cfg, &sub, &ctx, &s);
        assert_true(s.scores[0].is_errored && !s.scores[0].is_passed);
        assert_false(s.is_passed);
        weft_eval_scores_cleanup(&s);
    }
    ctx.judge_provider = NULL; /* no provider at all */
    score(cfg, &sub, &ctx, &s);
    assert_true(s.scores[0].is_errored && !s.scores[0].is_passed);
    weft_eval_scores_cleanup(&s);

    weft__llm_provider_free(p);
    weft_provider_shutdown(tp, 1000);
    weft_provider_free(tp);
}

/* The verdict rule, and scores as gen_ai.evaluation.result events. */
static void
test_eval_verdict_rule_and_record(void **state)
{
    struct weft_eval_subject sub = {NULL, "\"ok\"", "ok", NULL};
    struct weft_eval_scores s;
    struct weft_exporter *exp = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_processor *proc = NULL;
    struct weft_provider *tp = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_span *span = NULL;
    const struct mem_span *sp = NULL;

    (void)state;
    score("[{\"type\":\"exact\"},{\"type\":\"contains\",\"value\":\"o\"}]", &sub, NULL, &s);
    assert_true(s.is_passed);
    weft_eval_scores_cleanup(&s);
    score("[{\"type\":\"exact\"},{\"type\":\"json_schema\",\"schema\":{}}]", &sub, NULL, &s);
    assert_true(s.scores[0].is_passed);
    assert_true(s.scores[1].is_errored); /* "ok" is not JSON */
    assert_false(s.is_passed);

    assert_weft_ok(weft_provider_new(NULL, &tp));
    assert_weft_ok(mem_exporter_new(&exp, &mem));
    assert_weft_ok(weft_simple_processor_new(exp, &proc));
    assert_weft_ok(weft_provider_add_processor_take(tp, proc));
    assert_weft_ok(weft_provider_get_tracer(tp, "test", NULL, &tracer));
    span = weft_span_start(tracer, "eval item", NULL);
    assert_weft_ok(weft_eval_score_record(span, &s.scores[0]));
    assert_weft_ok(weft_eval_score_record(span, &s.scores[1]));
    assert_int_equal(weft_eval_score_record(span, NULL), WEFT_EINVAL);
    weft_span_end(span, 0);
    sp = mem_exporter_span(mem, 0);
    assert_int_equal(sp->event_count, 2);
    assert_string_equal(sp->event_names[1], "gen_ai.evaluation.result");
    for (size_t i = 0; i < sp->event_attr_count[1]; i++) {
        const struct weft_attr *a = &sp->event_attrs[1][i];
        if (strcmp(a->key, "gen_ai.evaluation.score.label") == 0) {
            assert_string_equal(a->value.u.str, "error");
        }
        if (strcmp(a->key, "gen_ai.evaluation.name") == 0) {
            assert_string_equal(a->value.u.str, "json_schema");
        }
    }
    weft_eval_scores_cleanup(&s);
    weft_provider_shutdown(tp, 1000);
    weft_provider_free(tp);
    assert_string_equal(weft_eval_type_name(WEFT_EVAL_LLM_JUDGE), "llm_judge");
    assert_string_equal(weft_eval_type_name((weft_eval_type)99), "unknown");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_exact_and_contains),
        cmocka_unit_test(test_eval_regex_numeric_rewards_verdicts),
        cmocka_unit_test(test_eval_json_schema),
        cmocka_unit_test(test_eval_bad_configs_say_where_and_what),
        cmocka_unit_test(test_eval_command_runs_a_shell_script),
        cmocka_unit_test(test_eval_llm_judge_scripted),
        cmocka_unit_test(test_eval_verdict_rule_and_record),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
