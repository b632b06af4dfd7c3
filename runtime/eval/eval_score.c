/* runtime/eval/eval_score.c - scoring one subject (include/weft/eval.h): the text kinds (exact,
 * contains, regex, json_schema, numeric), the run's rewards and verdicts, the verdict rule, and
 * scores as telemetry (the gen_ai.evaluation.result event). The command evaluator and the LLM
 * judge are in eval_run.c and eval_judge.c. */
#include "runtime/common/json_type.h"
#include "runtime/eval/eval_int.h"
#include "runtime/tools/tools.h"

#include "base/mem.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static weft_err set_explanation(struct weft_eval_score *s, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static weft_err
set_explanation(struct weft_eval_score *s, const char *fmt, va_list ap)
{
    char text[1024];

    vsnprintf(text, sizeof(text), fmt, ap);
    weft__free(s->explanation);
    s->explanation = weft__strdup(text);
    return s->explanation != NULL ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__eval_set(struct weft_eval_score *s, double value, bool is_passed, const char *fmt, ...)
{
    va_list ap;
    weft_err err = WEFT_OK;

    s->value = value < 0 ? 0 : value > 1 ? 1 : value;
    s->is_passed = is_passed;
    s->is_errored = false;
    va_start(ap, fmt);
    err = set_explanation(s, fmt, ap);
    va_end(ap);
    return err;
}

weft_err
weft__eval_error(struct weft_eval_score *s, const char *fmt, ...)
{
    va_list ap;
    weft_err err = WEFT_OK;

    s->value = 0;
    s->is_passed = false;
    s->is_errored = true;
    va_start(ap, fmt);
    err = set_explanation(s, fmt, ap);
    va_end(ap);
    return err;
}

/* [*start, *start + *len) without leading and trailing white space. */
static void
trim(const char **start, size_t *len)
{
    while (*len > 0 && isspace((unsigned char)**start)) {
        (*start)++;
        (*len)--;
    }
    while (*len > 0 && isspace((unsigned char)(*start)[*len - 1])) {
        (*len)--;
    }
}

/* The expected text: the config's string value, else the subject's expected JSON when it is a
 * string (its value) or anything else (its compact JSON). NULL when there is none. Ownership:
 * new (weft__free). */
static char *
expected_text(const struct eval_def *d, const struct weft_eval_subject *subject)
{
    json_t *v = NULL;
    char *text = NULL;
    char *copy = NULL;

    if (json_is_string(d->value)) {
        return weft__strdup(json_string_value(d->value));
    }
    if (d->value != NULL) {
        text = json_dumps(d->value, JSON_COMPACT | JSON_ENCODE_ANY);
    } else if (subject->expected != NULL) {
        v = json_loads(subject->expected, JSON_DECODE_ANY, NULL);
        if (json_is_string(v)) {
            copy = weft__strdup(json_string_value(v));
        } else if (v == NULL) {
            copy = weft__strdup(subject->expected); /* plain text: as is */
        } else {
            text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        }
        json_decref(v);
    }
    if (text != NULL) {
        copy = weft__strdup(text);
        free(text);
    }
    return copy;
}

static bool
text_equal(const struct eval_def *d, const char *a, const char *b)
{
    size_t alen = strlen(a);
    size_t blen = strlen(b);

    if (d->is_trim) {
        trim(&a, &alen);
        trim(&b, &blen);
    }
    return alen == blen &&
           (d->is_case_insensitive ? strncasecmp(a, b, alen) == 0 : memcmp(a, b, alen) == 0);
}

static bool
text_contains(const struct eval_def *d, const char *hay, const char *needle)
{
    size_t nlen = strlen(needle);

    if (d->is_trim) {
        trim(&needle, &nlen);
    }
    for (const char *p = hay; *p != '\0' || nlen == 0; p++) {
        if (d->is_case_insensitive ? strncasecmp(p, needle, nlen) == 0
                                   : strncmp(p, needle, nlen) == 0) {
            return true;
        }
    }
    return false;
}

static weft_err
score_exact(const struct eval_def *d,
            const struct weft_eval_subject *sub,
            struct weft_eval_score *s)
{
    char *want = expected_text(d, sub);
    const char *out = sub->output != NULL ? sub->output : "";
    weft_err err = WEFT_OK;

    if (want == NULL) {
        return weft__eval_error(s, "no expected value (the item has none and the evaluator no "
                                   "\"value\")");
    }
    err =
        text_equal(d, out, want)
            ? weft__eval_set(s, 1, true, "the output equals the expected value")
            : weft__eval_set(s, 0, false, "the output differs from the expected \"%.300s\"", want);
    weft__free(want);
    return err;
}

static weft_err
score_contains(const struct eval_def *d,
               const struct weft_eval_subject *sub,
               struct weft_eval_score *s)
{
    const char *out = sub->output != NULL ? sub->output : "";
    size_t found = 0;
    const char *missing = NULL;
    char *want = NULL;
    weft_err err = WEFT_OK;

    if (json_is_array(d->value)) {
        for (size_t i = 0; i < json_array_size(d->value); i++) {
            const char *n = json_string_value(json_array_get(d->value, i));
            if (text_contains(d, out, n)) {
                found++;
            } else if (missing == NULL) {
                missing = n;
            }
        }
        if (d->is_any ? found > 0 : missing == NULL) {
            return weft__eval_set(s, 1, true, "the output contains %zu of %zu strings", found,
                                  json_array_size(d->value));
        }
        if (d->is_any) {
            return weft__eval_set(s, 0, false, "the output contains none of the %zu strings",
                                  json_array_size(d->value));
        }
        return weft__eval_set(s, (double)found / (double)json_array_size(d->value), false,
                              "the output contains %zu of %zu strings; missing \"%.200s\"", found,
                              json_array_size(d->value), missing);
    }
    want = expected_text(d, sub);
    if (want == NULL) {
        return weft__eval_error(s, "no expected value (the item has none and the evaluator no "
                                   "\"value\")");
    }
    err = text_contains(d, out, want)
              ? weft__eval_set(s, 1, true, "the output contains \"%.300s\"", want)
              : weft__eval_set(s, 0, false, "the output does not contain \"%.300s\"", want);
    weft__free(want);
    return err;
}

static weft_err
score_schema(const struct eval_def *d,
             const struct weft_eval_subject *sub,
             struct weft_eval_score *s)
{
    json_error_t jerr;
    json_t *v = json_loads(sub->output != NULL ? sub->output : "", JSON_DECODE_ANY, &jerr);
    char why[512] = "";
    weft_err err = WEFT_OK;

    if (v == NULL) {
        return weft__eval_error(s, "the output is not JSON (%s at line %d, column %d)", jerr.text,
                                jerr.line, jerr.column);
    }
    err = weft__tool_schema_validate(d->schema, v, why, sizeof(why))
              ? weft__eval_set(s, 1, true, "the output is valid against the schema")
              : weft__eval_set(s, 0, false, "%s", why);
    json_decref(v);
    return err;
}

/* A number from text: the whole text (spaces around allowed), or a JSON number or numeric
 * string. @return false when it is not one. */
static bool
parse_number(const char *text, double *out)
{
    char *end = NULL;
    double v = 0;

    if (text == NULL) {
        return false;
    }
    while (isspace((unsigned char)*text) || *text == '"') {
        text++;
    }
    v = strtod(text, &end);
    if (end == text || !isfinite(v)) {
        return false;
    }
    while (isspace((unsigned char)*end) || *end == '"') {
        end++;
    }
    *out = v;
    return *end == '\0';
}

static weft_err
score_numeric(const struct eval_def *d,
              const struct weft_eval_subject *sub,
              struct weft_eval_score *s)
{
    double want = d->number;
    double got = 0;
    double limit = 0;
    double diff = 0;

    if (!d->has_number && !parse_number(sub->expected, &want)) {
        return weft__eval_error(s,
                                "no expected number (the item's expected value is %s and the "
                                "evaluator has no \"expected\")",
                                sub->expected != NULL ? "not a number" : "missing");
    }
    if (!parse_number(sub->output, &got)) {
        return weft__eval_error(s, "the output is not a number: \"%.100s\"",
                                sub->output != NULL ? sub->output : "");
    }
    limit = d->is_relative ? d->tolerance * fabs(want) : d->tolerance;
    diff = fabs(got - want);
    return weft__eval_set(s, diff <= limit ? 1 : 0, diff <= limit,
                          "%.10g is %.3g from the expected %.10g (tolerance %.3g%s)", got, diff,
                          want, limit, d->is_relative ? ", relative" : "");
}

static weft_err
score_verdicts(const struct eval_def *d, const struct weft_run_result *r, struct weft_eval_score *s)
{
    const char *last = r->verdict_count > 0 ? r->verdicts[r->verdict_count - 1] : NULL;
    size_t rejected = 0;

    for (size_t i = 0; i < r->verdict_count; i++) {
        rejected += r->verdicts[i] != NULL && strstr(r->verdicts[i], "REJECTED") != NULL;
    }
    if (d->is_last_approved) {
        bool is_ok = last != NULL && strstr(last, "APPROVED") != NULL;
        return weft__eval_set(s, is_ok, is_ok, "the last of %zu verdicts is %s", r->verdict_count,
                              last != NULL ? last : "missing");
    }
    return weft__eval_set(s, rejected == 0, rejected == 0, "%zu of %zu verdicts REJECTED", rejected,
                          r->verdict_count);
}

weft_err
weft__eval_score_basic(const struct eval_def *d,
                       const struct weft_eval_subject *subject,
                       struct weft_eval_score *s)
{
    const char *out = subject->output != NULL ? subject->output : "";

    switch (d->type) {
    case WEFT_EVAL_EXACT:
        return score_exact(d, subject, s);
    case WEFT_EVAL_CONTAINS:
        return score_contains(d, subject, s);
    case WEFT_EVAL_REGEX:
        return regexec(&d->re, out, 0, NULL, 0) == 0
                   ? weft__eval_set(s, 1, true, "the output matches the pattern")
                   : weft__eval_set(s, 0, false, "the output does not match the pattern");
    case WEFT_EVAL_JSON_SCHEMA:
        return score_schema(d, subject, s);
    case WEFT_EVAL_NUMERIC:
        return score_numeric(d, subject, s);
    case WEFT_EVAL_REWARDS:
        if (subject->result == NULL) {
            return weft__eval_error(s, "no run result to read the reward from");
        }
        return weft__eval_set(
            s, subject->result->reward >= d->number, subject->result->reward >= d->number,
            "the run's reward %.6g is %s the threshold %.6g", subject->result->reward,
            subject->result->reward >= d->number ? "at least" : "below", d->number);
    case WEFT_EVAL_VERDICTS:
        return subject->result != NULL
                   ? score_verdicts(d, subject->result, s)
                   : weft__eval_error(s, "no run result to read the verdicts from");
    case WEFT_EVAL_COMMAND:
    case WEFT_EVAL_LLM_JUDGE:
        break;
    }
    return weft__eval_error(s, "not a basic evaluator");
}

weft_err
weft_evaluators_score(const struct weft_evaluators *evaluators,
                      const struct weft_eval_subject *subject,
                      const struct weft_eval_context *context,
                      struct weft_eval_scores *out)
{
    static const struct weft_eval_context none = {0};
    weft_err err = WEFT_OK;

    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (evaluators == NULL || subject == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    context = context != NULL ? context : &none;
    out->scores = weft__calloc(evaluators->count + 1, sizeof(*out->scores));
    if (out->scores == NULL) {
        return WEFT_ENOMEM;
    }
    out->count = evaluators->count;
    out->is_passed = true;
    for (size_t i = 0; err == WEFT_OK && i < evaluators->count; i++) {
        const struct eval_def *d = &evaluators->defs[i];
        struct weft_eval_score *s = &out->scores[i];

        s->name = weft__strdup(d->name);
        s->type = d->type;
        err = s->name == NULL                  ? WEFT_ENOMEM
              : d->type == WEFT_EVAL_COMMAND   ? weft__eval_score_command(d, subject, context, s)
              : d->type == WEFT_EVAL_LLM_JUDGE ? weft__eval_score_judge(d, subject, context, s)
                                               : weft__eval_score_basic(d, subject, s);
        /* The verdict rule: passed only when every evaluator passed and none errored. */
        out->is_passed = out->is_passed && s->is_passed && !s->is_errored;
        out->input_tokens += s->input_tokens;
        out->output_tokens += s->output_tokens;
        out->cost_usd += s->cost_usd;
    }
    if (err != WEFT_OK) {
        weft_eval_scores_cleanup(out);
    }
    return err;
}

void
weft_eval_scores_cleanup(struct weft_eval_scores *scores)
{
    if (scores == NULL) {
        return;
    }
    for (size_t i = 0; scores->scores != NULL && i < scores->count; i++) {
        weft__free(scores->scores[i].name);
        weft__free(scores->scores[i].explanation);
    }
    weft__free(scores->scores);
    memset(scores, 0, sizeof(*scores));
}

weft_err
weft_eval_score_record(struct weft_span *span, const struct weft_eval_score *score)
{
    struct weft_attr attrs[5];

    if (span == NULL || score == NULL || score->name == NULL) {
        return WEFT_EINVAL;
    }
    attrs[0] = weft_attr_str("gen_ai.evaluation.name", score->name);
    attrs[1] = weft_attr_double("gen_ai.evaluation.score.value", score->value);
    attrs[2] = weft_attr_str("gen_ai.evaluation.score.label", score->is_errored  ? "error"
                                                              : score->is_passed ? "pass"
                                                                                 : "fail");
    attrs[3] = weft_attr_str("gen_ai.evaluation.explanation",
                             score->explanation != NULL ? score->explanation : "");
    attrs[4] = weft_attr_str("weft.evaluation.type", weft_eval_type_name(score->type));
    return weft_span_add_event(span, "gen_ai.evaluation.result", attrs, 5, 0);
}
