/* runtime/engine/engine_llm.c - the engine's llm_call run service: each LLM call of a run with its
 * `chat {model}` span (request and usage attributes, content when captured), the provider of
 * the call's model (scripted, replayed or OpenAI-compatible), the exchange kept for replay and
 * the --record file, the run's token and cost totals, the run lock released around the call.
 * Private to the engine (engine.h). */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/common/attr_keys.h"
#include "runtime/common/secrets.h"
#include "runtime/decide/correct.h"
#include "runtime/decide/evaluate.h"
#include "runtime/decide/lessons.h"
#include "runtime/decide/router.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/fork.h"
#include "runtime/engine/parallel.h"
#include "runtime/mcp/hub.h"
#include "runtime/memory/embed.h"
#include "runtime/observe/metrics_store.h"
#include "runtime/observe/semconv.h"
#include "runtime/observe/spans.h"
#include "runtime/replay/replay.h"
#include "runtime/state/durable.h"
#include "runtime/state/snapshot.h"
#include "runtime/steps/agent.h"
#include "runtime/steps/architect.h"
#include "runtime/steps/command_step.h"
#include "runtime/steps/flow.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/ids.h"

#include <weft/weft.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------ */
/* LLM calls                                                                                   */

struct llm_provider *
weft__eng_provider_for(struct run *run, size_t model)
{
    int w = weft__rt_worker_index();

    if (ENG(run)->replay != NULL) {
        return ENG(run)->replay;
    }
    /* An OpenAI client holds one connection: each worker has its own, so parallel steps
     * wait on the network side by side. The scripted provider is thread-safe itself. */
    if (w >= 0 && ENG(run)->worker_providers != NULL && (size_t)w < ENG(run)->worker_count &&
        ENG(run)->worker_providers[w][model] != NULL) {
        return ENG(run)->worker_providers[w][model];
    }
    return ENG(run)->providers[model];
}

static void
set_usage_attrs(struct weft_span *span,
                const struct wf_model *m,
                const struct llm_response *resp,
                double *cost)
{
    char json[256];
    int64_t in = resp->input_tokens > 0 ? resp->input_tokens : 0;
    int64_t out = resp->output_tokens > 0 ? resp->output_tokens : 0;

    *cost = 0.0;
    if (resp->input_tokens >= 0) {
        weft__rk_set_int(span, WEFT__RK_GEN_AI_USAGE_INPUT_TOKENS, resp->input_tokens);
    }
    if (resp->output_tokens >= 0) {
        weft__rk_set_int(span, WEFT__RK_GEN_AI_USAGE_OUTPUT_TOKENS, resp->output_tokens);
    }
    /* Usage stays in gen_ai.usage.* (Langfuse reads those too); cost has no GenAI attribute,
     * so it goes out both as a number and as Langfuse's cost_details. */
    if (m->has_prices) {
        double ci = (double)in * m->input_price / 1e6;
        double co = (double)out * m->output_price / 1e6;
        *cost = ci + co;
        snprintf(json, sizeof(json), "{\"input\":%.10g,\"output\":%.10g,\"total\":%.10g}", ci, co,
                 ci + co);
        weft__rk_set_str(span, WEFT__RK_LANGFUSE_OBSERVATION_COST_DETAILS, json);
        weft__rk_set_double(span, WEFT__RK_COST_USD, ci + co);
    }
}

/* The request of one call and its `chat {model}` span with the request attributes. */
static struct weft_span *
chat_start(struct run *run,
           const struct run_llm_call *call,
           const struct llm_provider *p,
           struct llm_request *req)
{
    const struct wf_model *m = &run->cfg.wf->models[call->model];
    uint32_t remaining = weft__rt_remaining_ms(run, call->step_deadline_mono);
    const char *prompt_name = NULL;
    const struct rt_prompt *prompt_link = weft__prompt_link(&prompt_name);
    struct weft_span *span = NULL;

    memset(req, 0, sizeof(*req));
    req->agent = call->agent;
    req->step_key = call->step_key;
    req->purpose = call->purpose;
    req->model = m->model;
    req->messages = call->messages;
    req->tools = call->tools;
    req->json_mode = call->json_mode;
    req->temperature = call->temperature >= 0 ? call->temperature : m->temperature;
    req->max_tokens = m->max_tokens;
    req->timeout_ms = m->timeout_ms < remaining ? m->timeout_ms : remaining;
    span = weft__span_start_chat(run, m->model, p->provider_name, call->parent);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_NAME, call->agent);
    weft__rk_set_str(span, WEFT__RK_LLM_PURPOSE, weft__llm_purpose_name(call->purpose));
    if (req->temperature >= 0) {
        weft__rk_set_double(span, WEFT__RK_GEN_AI_REQUEST_TEMPERATURE, req->temperature);
    }
    if (req->max_tokens > 0) {
        weft__rk_set_int(span, WEFT__RK_GEN_AI_REQUEST_MAX_TOKENS, req->max_tokens);
    }
    if (call->json_mode) {
        weft__rk_set_str(span, WEFT__RK_GEN_AI_OUTPUT_TYPE, "json");
    }
    /* Set around the calls whose instructions it gave (agent.c act(), the supervisor's and
     * reflector's calls: weft__rt_instructions_begin()). */
    if (prompt_link != NULL) {
        if (prompt_link->is_fallback) {
            weft__rk_set_str(span, WEFT__RK_PROMPT_NAME, prompt_name);
            weft__rk_set_bool(span, WEFT__RK_PROMPT_IS_FALLBACK, true);
        } else {
            weft__rk_set_str(span, WEFT__RK_LANGFUSE_OBSERVATION_PROMPT_NAME, prompt_name);
            weft__rk_set_int(span, WEFT__RK_LANGFUSE_OBSERVATION_PROMPT_VERSION,
                             prompt_link->version);
        }
    }
    if (run->cfg.capture_content) {
        char *text = json_dumps(call->messages, JSON_COMPACT);
        char *semconv = weft__semconv_input_messages(call->messages);
        weft__rt_span_content(run, span, WEFT__RK_GEN_AI_INPUT_MESSAGES, semconv);
        weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_INPUT, text);
        free(semconv);
        free(text);
    }
    return span;
}

/* Keep the exchange: in the --record file and with the run, so `--replay run:ID` can
 * reproduce it. */
static void
chat_record(struct run *run,
            const struct llm_request *req,
            const struct llm_provider *p,
            weft_err err,
            const struct llm_response *response,
            const struct llm_error *error,
            bool is_override)
{
    if (ENG(run)->recording != NULL) {
        (void)weft__llm_recording_add(ENG(run)->recording, req, p->provider_name,
                                      err == WEFT_OK ? response : NULL, error);
    }
    if (run->store.state != NULL) {
        json_t *entry =
            weft__llm_exchange_json(req, p->provider_name, err == WEFT_OK ? response : NULL, error);
        /* Held (weft__state_commit_held()): the exchange commits with the step's end, or
         * before the step's next LLM call or tool, whichever comes first. */
        if (entry != NULL && is_override) {
            /* a fork's answer (options.fork_answer), not the model's */
            (void)json_object_set_new(entry, "override", json_true());
        }
        if (entry != NULL) {
            /* A begin that fails (logged, noted for weft__state_check()) still leaves the
             * exchange written on its own: it is never skipped. */
            bool is_begun = weft__state_begin(run->store.state) == WEFT_OK;
            (void)weft__state_exchange_add(run->store.state, run->store.run_id,
                                           req->step_key != NULL ? req->step_key : req->agent,
                                           weft__llm_purpose_name(req->purpose), entry);
            if (is_begun) {
                (void)weft__state_commit_held(run->store.state);
            }
        }
        json_decref(entry);
    }
}

/* The answer on the span and in the run's totals; returns the call's cost. */
static double
chat_answered(struct run *run,
              struct weft_span *span,
              const struct wf_model *m,
              const struct llm_response *response)
{
    const char *finish = response->finish_reason != NULL ? response->finish_reason : "stop";
    double cost = 0.0;

    if (response->response_model != NULL) {
        weft__rk_set_str(span, WEFT__RK_GEN_AI_RESPONSE_MODEL, response->response_model);
    }
    if (response->response_id != NULL) {
        weft__rk_set_str(span, WEFT__RK_GEN_AI_RESPONSE_ID, response->response_id);
    }
    weft__rk_set_str_array(span, WEFT__RK_GEN_AI_RESPONSE_FINISH_REASONS, &finish, 1);
    set_usage_attrs(span, m, response, &cost);
    run->tel.result->input_tokens += response->input_tokens > 0 ? response->input_tokens : 0;
    run->tel.result->output_tokens += response->output_tokens > 0 ? response->output_tokens : 0;
    run->tel.result->cost_usd += cost;
    weft__rt_watchdog_budget(run, span);
    if (run->cfg.capture_content) {
        char *text = weft__semconv_output_messages(weft__semconv_genai_mode(), response->content,
                                                   response->tool_calls, response->tool_call_count,
                                                   response->finish_reason);
        weft__rt_span_content(run, span, WEFT__RK_GEN_AI_OUTPUT_MESSAGES, text);
        /* A turn that only calls tools has no text: Langfuse shows the calls instead. */
        weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT,
                              response->content != NULL ? response->content : text);
        free(text);
    }
    return cost;
}

/* A fork's answer for the forked step's first call (options.fork_answer, agent.c act()) into
 * @p response. A scripted model is still asked, its answer dropped: its later answers stay
 * where they were (no other model is asked). @return WEFT_OK, WEFT_ENOMEM. */
static weft_err
override_answer(struct llm_provider *p,
                const struct llm_request *req,
                const char *answer,
                struct llm_response *response,
                struct llm_error *error)
{
    memset(response, 0, sizeof(*response));
    if (strcmp(p->provider_name, "weft.scripted") == 0 &&
        weft__llm_complete(p, req, response, error) == WEFT_OK) {
        weft__llm_response_cleanup(response);
    }
    memset(error, 0, sizeof(*error));
    response->content = weft__strdup(answer);
    response->finish_reason = weft__strdup("stop");
    response->input_tokens = -1;
    response->output_tokens = -1;
    if (response->content == NULL || response->finish_reason == NULL) {
        weft__llm_response_cleanup(response);
        snprintf(error->type, sizeof(error->type), "%s", "llm_error");
        snprintf(error->message, sizeof(error->message), "out of memory");
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

/* The llm_call service: one call with its `chat {model}` span, the run lock released around
 * the network call. */
weft_err
weft__eng_llm_call(void *ctx,
                   const struct run_llm_call *call,
                   struct llm_response *response,
                   struct llm_error *error)
{
    struct run *run = ctx;
    const struct wf_model *m = &run->cfg.wf->models[call->model];
    struct llm_provider *p = weft__eng_provider_for(run, call->model);
    struct llm_request req;
    struct weft_span *span = chat_start(run, call, p, &req);
    uint64_t call_ns = 0;
    double cost = 0.0;
    weft_err err = WEFT_OK;
    /* a replay of the fork answers from the fork's exchange, the given answer among them */
    const char *override = ENG(run)->replay == NULL ? run->ps.answer_override : NULL;

    run->ps.answer_override = NULL;
    if (override != NULL) {
        run->ps.is_answer_overridden = true;
        weft__rk_set_bool(span, WEFT__RK_FORK_ANSWER_OVERRIDE, true);
        err = override_answer(p, &req, override, response, error);
    } else if (req.timeout_ms == 0) {
        memset(response, 0, sizeof(*response));
        snprintf(error->type, sizeof(error->type), "%s", "timeout");
        snprintf(error->message, sizeof(error->message), "no time left for the call");
        err = WEFT_ETIMEDOUT;
    } else {
        char activity[96];
        uint64_t call_start = 0;
        snprintf(activity, sizeof(activity), "chat %.60s", m->model);
        weft__rt_watchdog_activity(run, activity, call->agent, NULL);
        weft__rt_unlock(run);
        call_start = weft__monotonic_ns();
        err = weft__llm_complete(p, &req, response, error);
        call_ns = weft__monotonic_ns() - call_start;
        weft__rt_lock(run);
        weft__rt_watchdog_progress(run);
        weft__rt_watchdog_poll(run, span);
    }
    chat_record(run, &req, p, err, response, error, override != NULL);
    run->tel.result->llm_calls++;
    if (err == WEFT_OK) {
        cost = chat_answered(run, span, m, response);
    } else {
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, error->type);
        weft_span_set_status(span, WEFT_STATUS_ERROR, error->message);
    }
    weft_span_end(span, 0);
    weft__rt_metrics_llm(
        run->tel.metrics, p->provider_name, m->model, weft__llm_purpose_name(call->purpose),
        err == WEFT_OK ? response->input_tokens : -1, err == WEFT_OK ? response->output_tokens : -1,
        cost, (double)call_ns / 1e9, err == WEFT_OK ? NULL : error->type);
    weft__rt_progress(run, WEFT_EVENT_LLM_CALL, NULL, m->model);
    return err;
}
