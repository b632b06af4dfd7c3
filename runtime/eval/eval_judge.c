/* runtime/eval/eval_judge.c - the LLM judge (include/weft/eval.h): one chat call through the
 * provider layer (weft__llm_complete: secrets scrubbed from the answer) in JSON mode, asking for
 * {"score": 0..1, "pass": bool, "explanation": "..."}. With a tracer in the context the call is
 * a `chat {model}` CLIENT span like the engine's: gen_ai.operation.name, gen_ai.provider.name,
 * gen_ai.request.model, gen_ai.response.model, gen_ai.usage.*, weft.llm.purpose "evaluate", and
 * the cost (weft.cost.usd, langfuse.observation.cost_details) when the config has prices.
 * A failed call or an answer that is not that object is an error, never a pass. */
#include "runtime/eval/eval_int.h"
#include "runtime/llm/llm.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JUDGE_DEFAULT_TIMEOUT_MS 120000u

static const char judge_instructions[] =
    "You are an evaluator. Judge the OUTPUT of a task against the RUBRIC (and the EXPECTED "
    "value when one is given). Answer with only a JSON object: {\"score\": a number from 0 to "
    "1, \"pass\": true or false, \"explanation\": \"one or two sentences\"}.";

/* The judge's messages: instructions with the rubric, then the subject. New, or NULL. */
static json_t *
judge_messages(const struct eval_def *d, const struct weft_eval_subject *subject)
{
    size_t len = strlen(judge_instructions) + strlen(d->rubric) + 16;
    char *system = weft__malloc(len);
    json_t *user =
        json_pack("{s:s, s:s, s:s}", "input", subject->input != NULL ? subject->input : "",
                  "expected", subject->expected != NULL ? subject->expected : "", "output",
                  subject->output != NULL ? subject->output : "");
    char *user_text = user != NULL ? json_dumps(user, JSON_COMPACT) : NULL;
    json_t *messages = NULL;

    if (system != NULL && user_text != NULL) {
        snprintf(system, len, "%s\nRUBRIC: %s", judge_instructions, d->rubric);
        messages = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", system,
                             "role", "user", "content", user_text);
    }
    weft__free(system);
    free(user_text);
    json_decref(user);
    return messages;
}

/* The `chat {model}` span of the call; NULL without a tracer. */
static struct weft_span *
judge_span_start(const struct eval_def *d,
                 const struct weft_eval_context *context,
                 const char *provider_name)
{
    struct weft_span_start_options so;
    struct weft_attr attrs[5 + 16]; /* weft's own, then the context's span_attrs */
    size_t extra = context->span_attrs != NULL ? context->span_attr_count : 0;
    char name[160];

    if (context->tracer == NULL) {
        return NULL;
    }
    if (extra > 16) {
        extra = 16;
    }
    memset(&so, 0, sizeof(so));
    attrs[0] = weft_attr_str("gen_ai.operation.name", "chat");
    attrs[1] = weft_attr_str("gen_ai.provider.name", provider_name != NULL ? provider_name : "");
    attrs[2] = weft_attr_str("gen_ai.request.model", d->model);
    attrs[3] = weft_attr_str("weft.llm.purpose", "evaluate");
    attrs[4] = weft_attr_str("langfuse.observation.type", "generation");
    so.kind = WEFT_SPAN_KIND_CLIENT;
    so.parent_context = context->parent;
    if (extra > 0) {
        memcpy(attrs + 5, context->span_attrs, extra * sizeof(attrs[0]));
    }
    so.attrs = attrs;
    so.attr_count = 5 + extra;
    snprintf(name, sizeof(name), "chat %.120s", d->model);
    return weft_span_start(context->tracer, name, &so);
}

/* Usage and cost of the answer on @p s and @p span. */
static void
judge_usage(const struct eval_def *d,
            const struct llm_response *resp,
            struct weft_span *span,
            struct weft_eval_score *s)
{
    char json[200];

    s->input_tokens = resp->input_tokens > 0 ? resp->input_tokens : 0;
    s->output_tokens = resp->output_tokens > 0 ? resp->output_tokens : 0;
    if (d->has_prices) {
        double ci = (double)s->input_tokens * d->input_price / 1e6;
        double co = (double)s->output_tokens * d->output_price / 1e6;
        s->cost_usd = ci + co;
        snprintf(json, sizeof(json), "{\"input\":%.10g,\"output\":%.10g,\"total\":%.10g}", ci, co,
                 ci + co);
        if (span != NULL) {
            weft_span_set_str(span, "langfuse.observation.cost_details", json);
            weft_span_set_double(span, "weft.cost.usd", s->cost_usd);
        }
    }
    if (span == NULL) {
        return;
    }
    if (resp->input_tokens >= 0) {
        weft_span_set_int(span, "gen_ai.usage.input_tokens", resp->input_tokens);
    }
    if (resp->output_tokens >= 0) {
        weft_span_set_int(span, "gen_ai.usage.output_tokens", resp->output_tokens);
    }
    if (resp->response_model != NULL) {
        weft_span_set_str(span, "gen_ai.response.model", resp->response_model);
    }
}

/* Read the judge's answer @p text into @p s: the JSON object, or the outermost {...} in it. */
static weft_err
judge_answer(const char *text, struct weft_eval_score *s)
{
    json_t *v = json_loads(text != NULL ? text : "", 0, NULL);
    const char *open = text != NULL ? strchr(text, '{') : NULL;
    const char *close = text != NULL ? strrchr(text, '}') : NULL;
    const json_t *score = NULL;
    const json_t *pass = NULL;
    const json_t *why = NULL;
    weft_err err = WEFT_OK;

    if (v == NULL && open != NULL && close != NULL && close > open) {
        v = json_loadb(open, (size_t)(close - open) + 1, 0, NULL);
    }
    score = json_object_get(v, "score");
    pass = json_object_get(v, "pass");
    why = json_object_get(v, "explanation");
    if (!json_is_number(score) || json_number_value(score) < 0 || json_number_value(score) > 1 ||
        !json_is_boolean(pass) || (why != NULL && !json_is_string(why))) {
        err = weft__eval_error(s,
                               "the judge's answer is not {\"score\": 0..1, \"pass\": bool, "
                               "\"explanation\": string}: %.200s",
                               text != NULL ? text : "(no text)");
    } else {
        err = weft__eval_set(s, json_number_value(score), json_is_true(pass), "%s",
                             why != NULL ? json_string_value(why) : "");
    }
    json_decref(v);
    return err;
}

weft_err
weft__eval_score_judge(const struct eval_def *d,
                       const struct weft_eval_subject *subject,
                       const struct weft_eval_context *context,
                       struct weft_eval_score *s)
{
    struct llm_provider *p = context->judge_provider;
    struct llm_request req;
    struct llm_response resp;
    struct llm_error lerr;
    struct weft_span *span = NULL;
    json_t *messages = NULL;
    weft_err rc = WEFT_OK;
    weft_err err = WEFT_OK;

    if (p == NULL) {
        return weft__eval_error(s, "no LLM provider for the judge (model %s)", d->model);
    }
    messages = judge_messages(d, subject);
    if (messages == NULL) {
        return WEFT_ENOMEM;
    }
    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    memset(&lerr, 0, sizeof(lerr));
    req.agent = d->name;
    req.purpose = LLM_PURPOSE_EVALUATE;
    req.model = d->model;
    req.messages = messages;
    req.json_mode = true;
    req.temperature = 0;
    req.timeout_ms = d->timeout_ms != 0 ? d->timeout_ms : JUDGE_DEFAULT_TIMEOUT_MS;
    span = judge_span_start(d, context, p->provider_name);
    rc = weft__llm_complete(p, &req, &resp, &lerr);
    if (rc == WEFT_ENOMEM) {
        err = WEFT_ENOMEM;
    } else if (rc != WEFT_OK) {
        err = weft__eval_error(s, "the judge call failed (%s): %s", lerr.type, lerr.message);
        if (span != NULL) {
            weft_span_set_str(span, "error.type", lerr.type[0] != '\0' ? lerr.type : "error");
            weft_span_set_status(span, WEFT_STATUS_ERROR, lerr.message);
        }
    } else {
        judge_usage(d, &resp, span, s);
        err = judge_answer(resp.content, s);
        if (span != NULL && s->is_errored) {
            weft_span_set_str(span, "error.type", "invalid_response");
            weft_span_set_status(span, WEFT_STATUS_ERROR, "unparseable judge answer");
        }
    }
    weft_span_end(span, 0); /* the score is the caller's to record (weft_eval_score_record) */
    weft__llm_response_cleanup(&resp);
    json_decref(messages);
    return err;
}
