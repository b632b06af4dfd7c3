/* runtime/engine/engine_decide.c - the supervisor's decisions (engine.c's loop asks, this answers):
 * the initial plan from the supervisor's LLM (validated, one repair), loop-back requests
 * validated and appended, the router priority (a step in progress, the next ready step by
 * rule or by the supervisor's LLM, the final step, end), the circuit breaker, the watchdog's
 * reroutes, and the conversational router's one turn. Each decision is a `plan {supervisor}`
 * span. Private to the engine (engine.h); the loop in engine.c calls the weft__eng_ entries.
 */
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
/* Supervisor decisions                                                                        */

/* Every step of the plan saved, in one commit. */
void
weft__eng_save_plan(struct run *run)
{
    if (run->store.state != NULL) {
        (void)weft__state_begin(run->store.state);
    }
    for (size_t i = 0; i < run->ps.plan.count; i++) {
        weft__rt_save_step(run, i);
    }
    if (run->store.state != NULL) {
        (void)weft__state_commit(run->store.state);
    }
}

/* Initial plan from the supervisor's LLM, validated; one repair attempt with the error. */
static bool
parse_llm_plan(struct run *run, const char *text, char *why, size_t why_len)
{
    json_error_t jerr;
    json_t *root = json_loads(text != NULL ? text : "", 0, &jerr);
    const json_t *steps = json_object_get(root, "plan");
    struct plan candidate;
    struct plan_check check;
    bool is_ok = false;

    weft__plan_init(&candidate);
    weft__plan_check_init(&check);
    if (root == NULL) {
        snprintf(why, why_len, "plan is not JSON: %s", jerr.text);
        goto out;
    }
    if (!json_is_array(steps) || json_array_size(steps) == 0) {
        snprintf(why, why_len, "expected {\"plan\": [{\"agent\", \"task\", \"depends_on\"}, ...]}");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *s = json_array_get(steps, i);
        const char *agent = json_string_value(json_object_get(s, "agent"));
        const char *task = json_string_value(json_object_get(s, "task"));
        const char *id = json_string_value(json_object_get(s, "id"));
        const json_t *deps = json_object_get(s, "depends_on");
        const char *dep_ids[64];
        char numbered[64][24];
        size_t ndeps = 0;
        size_t agent_idx = agent != NULL ? weft__rt_find_agent(run, agent) : WF_NONE;

        if (agent == NULL || task == NULL) {
            snprintf(why, why_len, "plan[%zu]: expected \"agent\" and \"task\" strings", i);
            goto out;
        }
        if (agent_idx == WF_NONE) {
            snprintf(why, why_len, "plan[%zu].agent: unknown agent '%.64s'", i, agent);
            goto out;
        }
        if (deps != NULL && (!json_is_array(deps) || json_array_size(deps) > 64)) {
            snprintf(why, why_len, "plan[%zu].depends_on: expected an array of step ids", i);
            goto out;
        }
        for (size_t d = 0; d < json_array_size(deps); d++) {
            const json_t *v = json_array_get(deps, d);
            /* Step numbers (1-based) are accepted too: models often answer with them. */
            if (json_is_integer(v)) {
                snprintf(numbered[d], sizeof(numbered[d]), "s%lld",
                         (long long)json_integer_value(v));
                dep_ids[ndeps++] = numbered[d];
            } else if (json_is_string(v)) {
                dep_ids[ndeps++] = json_string_value(v);
            } else {
                snprintf(why, why_len, "plan[%zu].depends_on[%zu]: expected a step id", i, d);
                goto out;
            }
        }
        if (weft__plan_append(&candidate, id, agent_idx, task, dep_ids, ndeps, NULL) != WEFT_OK) {
            snprintf(why, why_len, "plan too large or out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < candidate.count; i++) {
        weft__plan_check_add(&check, candidate.steps[i].id,
                             (const char *const *)candidate.steps[i].depends_on,
                             candidate.steps[i].depends_count);
    }
    if (weft__plan_check_run(&check) != WEFT_OK) {
        snprintf(why, why_len, "plan[%zu]: %.200s", check.bad_index, check.message);
        goto out;
    }
    weft__plan_cleanup(&run->ps.plan);
    run->ps.plan = candidate;
    weft__plan_init(&candidate);
    is_ok = true;
out:
    weft__plan_check_cleanup(&check);
    weft__plan_cleanup(&candidate);
    json_decref(root);
    return is_ok;
}

/* The supervisor's messages: its instructions (a managed prompt is resolved into @p held and
 * linked to the call's generation: end it with weft__rt_instructions_end() after the call), the
 * agents and what they do, and @p user. */
static json_t *
supervisor_messages(struct run *run, const char *user, struct rt_prompt *held)
{
    const struct weft_workflow *wf = run->cfg.wf;
    json_t *msgs = json_array();
    struct weft__buf sys;

    weft__buf_init(&sys, 0);
    weft__buf_printf(
        &sys, "%s\n\nAgents:",
        weft__rt_instructions_begin(run, wf->supervisor.instructions, wf->supervisor.prompt,
                                    "You are the supervisor of a team of agents.", held));
    /* The workflow's agents and the teams composed so far (the count is read again each time:
     * describing an MCP agent releases the lock). */
    for (size_t i = 0; i < weft__rt_agent_count(run); i++) {
        const struct wf_agent *agent = weft__rt_agent(run, i);
        char *about = NULL;
        if (agent->is_mcp && run->cfg.mcp != NULL) {
            bool is_ready = false;
            weft__rt_unlock(run); /* as agent.c tools_json(): the client may wait on its reader */
            /* An optional server that is not running: its agent is not offered. */
            is_ready = weft__mcp_hub_agent_ready(run->cfg.mcp, agent);
            about = is_ready ? weft__mcp_hub_describe(run->cfg.mcp, agent) : NULL;
            weft__rt_lock(run);
            if (!is_ready) {
                continue;
            }
        }
        const char *text = about != NULL ? about : agent->description;
        weft__buf_printf(&sys, "\n- %s", agent->name);
        if (text != NULL && text[0] != '\0') {
            weft__buf_printf(&sys, ": %s", text);
        }
        weft__free(about);
    }
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content",
                                          sys.data != NULL ? sys.data : ""));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", user));
    weft__buf_cleanup(&sys);
    return msgs;
}

bool
weft__eng_initial_plan(struct run *run, char *reason, size_t reason_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_span *span =
        weft__rt_span_start(run, RT_SPAN_PLAN, wf->supervisor.name, run->tel.root, NULL, 0);
    struct weft__buf user;
    char why[256] = "";
    bool is_ok = false;

    const char *request = run->cfg.input != NULL    ? run->cfg.input
                          : wf->description != NULL ? wf->description
                                                    : wf->name;

    weft__buf_init(&user, 0);
    weft__buf_printf(&user,
                     "Make a plan as JSON: {\"thought\": ..., \"plan\": [{\"agent\", \"task\", "
                     "\"depends_on\": [step ids s1, s2, ...]}]}.\n\nRequest: %s",
                     request);
    weft__rt_lessons_for_plan(run, request, span, &user);
    run->tel.result->iterations++;
    for (int attempt = 0; attempt < 2 && !is_ok; attempt++) {
        struct llm_response resp;
        struct llm_error lerr;
        json_t *msgs = NULL;
        struct rt_prompt held;
        weft_err call_err = WEFT_OK;

        if (attempt == 1) {
            weft__buf_printf(&user,
                             "\n\nYour previous plan was rejected: %s. Answer with a "
                             "corrected plan.",
                             why);
        }
        msgs = supervisor_messages(run, user.data != NULL ? user.data : "", &held);
        call_err = weft__rt_llm_call(run, span, wf->supervisor.name, NULL, LLM_PURPOSE_PLAN,
                                     wf->supervisor.model, msgs, NULL, true, -1.0, 0, &resp, &lerr);
        weft__rt_instructions_end(&held);
        if (call_err != WEFT_OK) {
            snprintf(why, sizeof(why), "planner LLM failed: %.200s", lerr.message);
        } else if (parse_llm_plan(run, resp.content, why, sizeof(why))) {
            is_ok = true;
        }
        if (!is_ok) {
            struct weft_attr a[2] = {weft_attr_str(WEFT__ERROR_TYPE, "invalid_plan"),
                                     weft_attr_str("weft.plan.error", why)};
            weft_span_add_event(span, "weft.plan.invalid", a, 2, 0);
        }
        weft__llm_response_cleanup(&resp);
        json_decref(msgs);
    }
    weft__buf_cleanup(&user);
    weft__rk_set_str(span, WEFT__RK_DECISION_LAYER, "llm");
    weft__rk_set_str(span, WEFT__RK_DECISION_NEXT, is_ok ? "plan" : "end");
    weft__rk_set_int(span, WEFT__RK_PLAN_VERSION, run->ps.plan.version);
    weft__rk_set_int(span, WEFT__RK_PLAN_SIZE, (int64_t)run->ps.plan.count);
    if (is_ok) {
        snprintf(reason, reason_len, "planned %zu steps", run->ps.plan.count);
        weft__rk_set_str(span, WEFT__RK_DECISION_REASON, reason);
        weft__rt_add_decision(run, RT_LAYER_LLM, "plan", reason);
    } else {
        snprintf(reason, reason_len, "no valid plan: %s", why);
        weft__rk_set_str(span, WEFT__RK_DECISION_REASON, reason);
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "invalid_plan");
        weft_span_set_status(span, WEFT_STATUS_ERROR, reason);
        weft__rt_add_decision(run, RT_LAYER_LLM, "end", reason);
    }
    weft_span_end(span, 0);
    weft__eng_save_plan(run);
    return is_ok;
}

/* Validate and apply pending loop-back requests; appends to @p note what happened. */
static void
apply_requests(struct run *run, struct weft_span *decision, struct weft__buf *note)
{
    for (size_t i = 0; i < run->ps.request_count; i++) {
        struct rt_request *rq = &run->ps.requests[i];
        /* An id copy, not a pointer into the plan: weft__plan_append() may move the steps. */
        const char *from_id = run->ps.plan.steps[rq->from_step].id;
        char from[64];
        const struct wf_agent *from_agent =
            weft__rt_agent(run, run->ps.plan.steps[rq->from_step].agent);
        size_t to = weft__rt_find_agent(run, rq->agent);
        struct weft_link_spec link;
        struct weft_span *span = NULL;
        char subject[160];
        char why[200] = "";
        size_t added = 0;

        memset(&link, 0, sizeof(link));
        link.context = rq->requester;
        snprintf(subject, sizeof(subject), "%s\xe2\x86\x92%s", from_agent->name, rq->agent);
        span = weft__rt_span_start(run, RT_SPAN_REPLAN, subject, decision, &link,
                                   weft_span_context_is_valid(&rq->requester) ? 1 : 0);
        weft__rk_set_str(span, WEFT__RK_REPLAN_FROM, from_agent->name);
        weft__rk_set_str(span, WEFT__RK_REPLAN_TO, rq->agent);
        snprintf(from, sizeof(from), "%s", from_id);
        weft__rk_set_str(span, WEFT__RK_REPLAN_FROM_STEP, from);
        weft__rt_span_content(run, span, WEFT__RK_REPLAN_QUERY, rq->query);
        if (to == WF_NONE) {
            snprintf(why, sizeof(why), "unknown agent '%.64s'", rq->agent);
        } else if (!weft__rt_may_request(run, from_agent, to)) {
            snprintf(why, sizeof(why), "%.64s may not request %.64s (not in can_request)",
                     from_agent->name, rq->agent);
        } else if (weft__plan_append(&run->ps.plan, NULL, to, rq->query, NULL, 0, &added) !=
                   WEFT_OK) {
            snprintf(why, sizeof(why), "plan is full");
        }
        if (why[0] != '\0') {
            weft__rk_set_bool(span, WEFT__RK_REPLAN_STEP_ADDED, false);
            weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "replan_cancelled");
            weft_span_set_status(span, WEFT_STATUS_ERROR, why);
            weft__buf_printf(note, "request from %s cancelled: %s; ", from, why);
        } else {
            struct plan_step *s = &run->ps.plan.steps[added];
            s->requested_by = weft__strdup(from);
            s->requester = rq->requester;
            s->has_requester = weft_span_context_is_valid(&rq->requester);
            weft__rk_set_bool(span, WEFT__RK_REPLAN_STEP_ADDED, true);
            weft__rk_set_str(span, WEFT__RK_REPLAN_STEP_ID, s->id);
            weft__rt_count_loop(run, WEFT_LOOP_REPLAN);
            weft__buf_printf(note, "%s requested %s: added %s; ", from, rq->agent, s->id);
            weft__rt_save_step(run, added);
        }
        weft_span_end(span, 0);
        weft__free(rq->agent);
        weft__free(rq->query);
    }
    if (run->ps.requests_dropped > 0) {
        weft__buf_printf(note, "%zu requests over the limit cancelled; ", run->ps.requests_dropped);
        run->ps.requests_dropped = 0;
    }
    run->ps.request_count = 0;
}

/* The supervisor's LLM picks among ready steps: {"next": agent|"end", "reason"}. */
static size_t
llm_route(struct run *run,
          struct weft_span *decision,
          rt_layer *layer,
          bool *is_end,
          char *reason,
          size_t reason_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft__buf user;
    struct llm_response resp;
    struct llm_error lerr;
    json_t *msgs = NULL;
    json_t *answer = NULL;
    const char *next = NULL;
    size_t step = RT_END;
    struct rt_prompt held;
    weft_err call_err = WEFT_OK;

    weft__buf_init(&user, 0);
    weft__buf_printf(&user, "Plan status:");
    for (size_t i = 0; i < run->ps.plan.count; i++) {
        const struct plan_step *s = &run->ps.plan.steps[i];
        weft__buf_printf(&user, "\n- %s %s [%s]", s->id, weft__rt_step_actor(run, s),
                         weft__step_status_name(s->status));
    }
    weft__buf_printf(&user, "\nAnswer as JSON: {\"next\": \"<agent>\" or \"end\", \"reason\": "
                            "\"...\"}");
    msgs = supervisor_messages(run, user.data != NULL ? user.data : "", &held);
    weft__buf_cleanup(&user);
    *is_end = false;
    call_err = weft__rt_llm_call(run, decision, wf->supervisor.name, NULL, LLM_PURPOSE_ROUTE,
                                 wf->supervisor.model, msgs, NULL, true, 0.0, 0, &resp, &lerr);
    weft__rt_instructions_end(&held);
    if (call_err != WEFT_OK) {
        *layer = RT_LAYER_FALLBACK;
        snprintf(reason, reason_len, "route LLM failed (%s): next ready step by rule", lerr.type);
        json_decref(msgs);
        return weft__plan_next_ready(&run->ps.plan, WF_NONE);
    }
    json_decref(msgs);
    answer = json_loads(resp.content != NULL ? resp.content : "", 0, NULL);
    next = json_string_value(json_object_get(answer, "next"));
    if (next == NULL) {
        *layer = RT_LAYER_FALLBACK;
        snprintf(reason, reason_len, "route LLM answer malformed: next ready step by rule");
        step = weft__plan_next_ready(&run->ps.plan, WF_NONE);
    } else if (strcmp(next, "end") == 0) {
        *layer = RT_LAYER_LLM;
        *is_end = true;
        snprintf(reason, reason_len, "%.200s",
                 json_is_string(json_object_get(answer, "reason"))
                     ? json_string_value(json_object_get(answer, "reason"))
                     : "the supervisor chose to end");
    } else {
        size_t agent = weft__rt_find_agent(run, next);
        *layer = RT_LAYER_LLM;
        if (agent == WF_NONE) {
            *layer = RT_LAYER_FALLBACK;
            snprintf(reason, reason_len,
                     "route LLM named unknown agent '%.64s': next ready "
                     "step by rule",
                     next);
            step = weft__plan_next_ready(&run->ps.plan, WF_NONE);
        } else {
            step = weft__plan_next_ready(&run->ps.plan, agent);
            if (step == RT_END) {
                /* A route to an agent with nothing to do makes no progress: the circuit
                 * breaker counts these. The decision names the agent but runs nothing. */
                snprintf(reason, reason_len, "route to %.64s: no ready step for it", next);
                step = RT_END - 1;
            } else {
                snprintf(reason, reason_len, "%.200s",
                         json_is_string(json_object_get(answer, "reason"))
                             ? json_string_value(json_object_get(answer, "reason"))
                             : "chosen by the supervisor");
            }
        }
    }
    json_decref(answer);
    weft__llm_response_cleanup(&resp);
    return step;
}

/* The final step (supervisor.final_agent), appended once. RT_END when there is none. */
static size_t
final_step(struct run *run)
{
    size_t agent = run->cfg.wf->supervisor.final_agent;
    size_t index = RT_END;

    if (agent == WF_NONE) {
        return RT_END;
    }
    for (size_t i = 0; i < run->ps.plan.count; i++) {
        if (run->ps.plan.steps[i].agent == agent && run->ps.plan.steps[i].status == STEP_PENDING) {
            return i;
        }
    }
    if (weft__plan_append(&run->ps.plan, NULL, agent, WEFT__RT_FINAL_TASK, NULL, 0, &index) !=
        WEFT_OK) {
        return RT_END;
    }
    weft__rt_save_step(run, index);
    return index;
}

/* The watchdog's policies that change the route: fail ends the run, break goes to the final
 * step (once; the run then ends as stuck), escalate hands the loop to the escalation agent, in
 * place of the step that would have repeated it (skipped). */
static void
watchdog_route(
    struct run *run, struct breaker *br, size_t *step, rt_layer *layer, char *why, size_t why_len)
{
    struct watchdog *wd = &run->watchdog;
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;

    if (wd->is_fail) {
        *step = RT_END; /* the run ends as stuck: nothing more runs */
        *layer = RT_LAYER_WATCHDOG;
        snprintf(why, why_len, "%.200s: ending", wd->stuck_reason);
    } else if (wd->is_break && !wd->is_break_routed) {
        wd->is_break_routed = true;
        if (br != NULL) {
            br->has_tripped = true; /* nothing else is routed after the final step */
        }
        *layer = RT_LAYER_WATCHDOG;
        *step = final_step(run);
        snprintf(why, why_len, "%.200s: %s", wd->stuck_reason,
                 *step != RT_END ? "routing to the final step, then ending" : "ending");
    } else if (wd->is_escalate_pending) {
        const struct wf_router *router = &run->cfg.wf->router;
        size_t agent =
            sup->watchdog.escalate_to != WF_NONE ? sup->watchdog.escalate_to : sup->final_agent;
        size_t added = RT_END;
        char task[512];

        if (agent == WF_NONE && run->cfg.wf->has_router && router->clarification_route != WF_NONE) {
            agent = router->routes[router->clarification_route].agent; /* the QA path */
        }
        wd->is_escalate_pending = false;
        wd->has_escalated = true;
        if (*step != RT_END && *step != RT_END - 1 &&
            run->ps.plan.steps[*step].status == STEP_PENDING) {
            struct plan_step *s = &run->ps.plan.steps[*step];
            weft__plan_step_set_status(&run->ps.plan, s, STEP_SKIPPED);
            weft__free(s->feedback);
            s->feedback = weft__strdup("skipped: the stuck loop was escalated");
            weft__rt_save_step(run, *step);
        }
        snprintf(task, sizeof(task),
                 "The run is stuck in a loop: %.300s. Resolve it, or hand the work to the agent "
                 "that can, or give the final answer.",
                 wd->stuck_reason);
        if (agent == WF_NONE ||
            weft__plan_append(&run->ps.plan, NULL, agent, task, NULL, 0, &added) != WEFT_OK) {
            wd->is_fail = true; /* nowhere to escalate to: the run ends as stuck */
            *step = RT_END;
            snprintf(why, why_len, "%.200s: no agent to escalate to", wd->stuck_reason);
            return;
        }
        weft__rt_save_step(run, added);
        wd->escalated_epoch = wd->epoch;
        *layer = RT_LAYER_WATCHDOG;
        *step = added;
        snprintf(why, why_len, "%.200s: escalated to %.64s", wd->stuck_reason,
                 weft__rt_agent(run, agent)->name);
    }
}

static void
progress_decision(struct run *run, rt_layer layer, const char *next, const char *reason)
{
    char detail[512];

    snprintf(detail, sizeof(detail), "%s: %s (%.400s)", weft__rt_layer_name(layer), next, reason);
    weft__rt_progress(run, WEFT_EVENT_DECISION, NULL, detail);
}

/* The supervisor's choice before the checks: a failed step ends the plan (*is_failed), a step
 * in progress goes on, else the next ready step (or the LLM's route), else the final step. */
static size_t
choose_step(struct run *run,
            struct weft_span *span,
            const struct breaker *br,
            bool *is_failed,
            bool *is_ready_pick,
            rt_layer *layer,
            char *why,
            size_t why_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    size_t step = RT_END;
    size_t failed = RT_END;
    bool is_end = false;

    /* The first failed step; the plan counts them, so a run without one never scans. */
    for (size_t i = 0; weft__plan_count_status(&run->ps.plan, STEP_FAILED) > 0 &&
                       i < run->ps.plan.count && failed == RT_END;
         i++) {
        if (run->ps.plan.steps[i].status == STEP_FAILED) {
            failed = i;
        }
    }
    if (failed != RT_END) {
        const struct plan_step *s = &run->ps.plan.steps[failed];
        *is_failed = true;
        weft__plan_skip_blocked(&run->ps.plan);
        snprintf(why, why_len, "step %.32s (%.64s) failed: %.140s", s->id,
                 weft__rt_step_actor(run, s), s->feedback != NULL ? s->feedback : "error");
        return RT_END;
    }
    if (br->has_tripped) {
        snprintf(why, why_len, "circuit breaker tripped earlier: ending");
        return weft__plan_in_progress(&run->ps.plan);
    }
    if ((step = weft__plan_in_progress(&run->ps.plan)) != RT_END) {
        snprintf(why, why_len, "step %.32s is in progress", run->ps.plan.steps[step].id);
        return step;
    }
    weft__plan_skip_blocked(&run->ps.plan);
    if (wf->supervisor.route_with_llm) {
        step = llm_route(run, span, layer, &is_end, why, why_len);
    } else {
        step = weft__plan_next_ready(&run->ps.plan, WF_NONE);
        if (step != RT_END) {
            snprintf(why, why_len, "next ready step %.32s", run->ps.plan.steps[step].id);
            *is_ready_pick = true;
        }
    }
    if (step == RT_END && !is_end && *layer != RT_LAYER_FALLBACK) {
        step = final_step(run);
        snprintf(why, why_len, step != RT_END ? "plan complete: final step" : "plan complete");
    } else if (step == RT_END && !is_end) {
        step = final_step(run);
    }
    return step;
}

/* Circuit breaker: the same move (@p next_name) again while the plan state stands still (no
 * step completed or ended since, the plan unchanged). On the tripping repetition the span gets
 * the event, and the run goes to the final step. */
static void
breaker_check(struct run *run,
              struct breaker *br,
              struct weft_span *span,
              const char *next_name,
              size_t *step,
              rt_layer *layer,
              const char **next,
              char *why,
              size_t why_len)
{
    size_t completed = weft__plan_count_status(&run->ps.plan, STEP_COMPLETED);
    struct weft_attr a[4];
    char evidence[200];

    if (strcmp(next_name, "end") != 0 && strcmp(next_name, br->last_next) == 0 &&
        completed == br->last_completed && ENG(run)->steps_finished == br->last_finished &&
        run->ps.plan.version == br->last_version) {
        br->retries++;
    } else {
        br->retries = 0;
    }
    snprintf(br->last_next, sizeof(br->last_next), "%s", next_name);
    br->last_completed = completed;
    br->last_finished = ENG(run)->steps_finished;
    br->last_version = run->ps.plan.version;
    if (br->retries < run->cfg.wf->supervisor.circuit_breaker || br->has_tripped) {
        return;
    }
    snprintf(evidence, sizeof(evidence), "route '%s' chosen %u times without progress", next_name,
             br->retries + 1);
    a[0] = weft_attr_str(WEFT__ERROR_TYPE, "circuit_breaker");
    a[1] = weft_attr_str("weft.circuit_breaker.route", next_name);
    a[2] = weft_attr_int("weft.circuit_breaker.retries", br->retries);
    a[3] = weft_attr_str("weft.circuit_breaker.evidence", evidence);
    weft_span_add_event(span, "weft.circuit_breaker", a, 4, 0);
    weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "circuit_breaker");
    weft_span_set_status(span, WEFT_STATUS_ERROR, evidence);
    weft__rt_count_loop(run, WEFT_LOOP_CIRCUIT_BREAKER);
    br->has_tripped = true;
    memcpy(br->evidence, evidence, sizeof(br->evidence));
    *layer = RT_LAYER_CIRCUIT_BREAKER;
    *step = final_step(run);
    *next = *step != RT_END ? weft__rt_step_actor(run, &run->ps.plan.steps[*step]) : "end";
    snprintf(why, why_len, "%s: %s", evidence,
             *step != RT_END ? "routing to the final step" : "ending");
}

/* The watchdog sees every decision while its span is open, and may reroute it. */
static void
watchdog_check(struct run *run,
               struct breaker *br,
               struct weft_span *span,
               size_t *step,
               rt_layer *layer,
               const char **next,
               char *why,
               size_t why_len)
{
    bool is_step = *step != RT_END && *step != RT_END - 1;

    weft__rt_watchdog_progress(run);
    weft__rt_watchdog_poll(run, span);
    weft__rt_watchdog_decision(run, span, *next, is_step);
    if (is_step) {
        weft__rt_watchdog_step(run, span, *step);
    }
    watchdog_route(run, br, step, layer, why, why_len);
    if (*step == RT_END) {
        *next = "end";
    } else if (*step != RT_END - 1) {
        *next = weft__rt_step_actor(run, &run->ps.plan.steps[*step]);
    }
}

/* Steps that run at once in plan mode: the run's option, else the workflow's
 * supervisor.max_parallel, else 1 in process (steps kept in order, as before parallel plans)
 * and the executor's max_in_flight for a remote one. An LLM router chooses one step at a time. */
size_t
weft__eng_parallel_width(const struct run *run)
{
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    const struct weft__executor *ex = ENG(run)->executor;
    size_t cap = ex->max_in_flight == 0 ? 1 : ex->max_in_flight;
    size_t width = run->cfg.opts->max_parallel;

    if (sup->policy != WF_POLICY_PLAN_EXECUTE || sup->route_with_llm) {
        return 1;
    }
    if (width == 0) {
        width = sup->max_parallel;
    }
    if (width == 0) {
        width = ex->writes_plan ? 1 : cap;
    }
    cap = cap < WEFT__RT_MAX_PARALLEL ? cap : WEFT__RT_MAX_PARALLEL;
    return width < cap ? width : cap;
}

bool
weft__eng_is_final_agent(const struct run *run, const struct plan_step *s)
{
    size_t final = run->cfg.wf->supervisor.final_agent;

    return final != WF_NONE && s->executor == EXEC_AGENT && s->agent == final;
}

/* The steps ready beside @p first (pending, dependencies met), in plan order, up to the
 * batch's width; each counts as an iteration of the run's budget. The final agent's step runs
 * alone: it sums up the others. Their ids go on the decision's span and into @p note. */
static void
batch_collect(
    struct run *run, size_t first, struct batch *b, struct weft_span *span, struct weft__buf *note)
{
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    const char *ids[WEFT__RT_MAX_PARALLEL];

    b->count = 1;
    b->steps[0] = first;
    ids[0] = run->ps.plan.steps[first].id;
    if (weft__eng_is_final_agent(run, &run->ps.plan.steps[first])) {
        return;
    }
    for (size_t i = run->ps.plan.open_from; i < run->ps.plan.count && b->count < b->width; i++) {
        const struct plan_step *s = &run->ps.plan.steps[i];
        if (i == first || s->status != STEP_PENDING || s->is_running ||
            !weft__plan_is_ready(&run->ps.plan, i) || weft__eng_is_final_agent(run, s) ||
            run->tel.result->iterations >= sup->max_iterations) {
            continue;
        }
        run->tel.result->iterations++;
        ids[b->count] = s->id;
        b->steps[b->count++] = i;
    }
    if (b->count > 1) {
        weft__rk_set_int(span, WEFT__RK_DECISION_PARALLEL, (int64_t)b->count);
        weft__rk_set_str_array(span, WEFT__RK_DECISION_BATCH, ids, b->count);
        weft__buf_printf(note, "; %zu ready steps at once:", b->count);
        for (size_t i = 0; i < b->count; i++) {
            weft__buf_printf(note, " %.32s", ids[i]);
        }
    }
}

/* One decision. Returns the step to run, RT_END to end, or RT_END - 1 for a no-op route. A
 * step picked as the next ready one brings the steps ready beside it into @p b. */
size_t
weft__eng_decide(struct run *run,
                 struct breaker *br,
                 bool *is_failed,
                 struct batch *b,
                 char *reason,
                 size_t reason_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_span *span =
        weft__rt_span_start(run, RT_SPAN_PLAN, wf->supervisor.name, run->tel.root, NULL, 0);
    struct weft__buf note;
    rt_layer layer = RT_LAYER_RULE;
    size_t step = RT_END;
    const char *next = "end";
    char next_name[96] = "end";
    char why[256] = "";
    bool is_ready_pick = false;
    size_t picked = RT_END;

    weft__buf_init(&note, 4096);
    b->count = 0;
    run->tel.result->iterations++;
    weft__rt_watchdog_activity(run, "a decision", wf->supervisor.name, "");
    weft__rk_set_int(span, WEFT__RK_ITERATION, (int64_t)run->tel.result->iterations);
    if (run->ps.request_count > 0 || run->ps.requests_dropped > 0) {
        apply_requests(run, span, &note);
    }
    step = choose_step(run, span, br, is_failed, &is_ready_pick, &layer, why, sizeof(why));
    picked = step;
    if (step != RT_END && step != RT_END - 1) {
        next = weft__rt_step_actor(run, &run->ps.plan.steps[step]);
        snprintf(next_name, sizeof(next_name), "%s", next);
    } else if (step == RT_END - 1) {
        /* A no-op route: llm_route() wrote "route to AGENT: ..." */
        size_t len = strcspn(why + 9, ":");
        snprintf(next_name, sizeof(next_name), "%.*s", (int)(len < 95 ? len : 95), why + 9);
        next = next_name;
    }
    breaker_check(run, br, span, next_name, &step, &layer, &next, why, sizeof(why));
    if (step == RT_END) {
        next = "end";
    }
    watchdog_check(run, br, span, &step, &layer, &next, why, sizeof(why));
    weft__buf_append_str(&note, why);
    if (is_ready_pick && step == picked && step < RT_END - 1) {
        batch_collect(run, step, b, span, &note);
    }
    snprintf(reason, reason_len, "%s", note.data != NULL ? note.data : why);
    weft__rk_set_str(span, WEFT__RK_DECISION_LAYER, weft__rt_layer_name(layer));
    weft__rk_set_str(span, WEFT__RK_DECISION_NEXT, next);
    weft__rk_set_str(span, WEFT__RK_DECISION_REASON, reason);
    weft__rk_set_int(span, WEFT__RK_PLAN_VERSION, run->ps.plan.version);
    weft__rk_set_int(span, WEFT__RK_PLAN_SIZE, (int64_t)run->ps.plan.count);
    if (step != RT_END && step != RT_END - 1) {
        weft__rk_set_str(span, WEFT__RK_STEP_ID, run->ps.plan.steps[step].id);
    }
    weft_span_end(span, 0);
    weft__rt_add_decision(run, layer, next, reason);
    progress_decision(run, layer, next, reason);
    weft__buf_cleanup(&note);
    return step;
}

/* Conversational turn: route, run the route's agent, then end. */
size_t
weft__eng_decide_router(struct run *run, bool *is_done, char *reason, size_t reason_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_span *span =
        weft__rt_span_start(run, RT_SPAN_PLAN, wf->supervisor.name, run->tel.root, NULL, 0);
    rt_layer layer = RT_LAYER_RULE;
    size_t route = 0;
    size_t index = RT_END;
    const char *next = "end";

    run->tel.result->iterations++;
    weft__rk_set_int(span, WEFT__RK_ITERATION, (int64_t)run->tel.result->iterations);
    if (*is_done && run->watchdog.is_escalate_pending) {
        watchdog_route(run, NULL, &index, &layer, reason, reason_len);
        if (index != RT_END) {
            next = weft__rt_step_actor(run, &run->ps.plan.steps[index]);
        }
    } else if (*is_done) {
        snprintf(reason, reason_len, "turn answered");
    } else {
        struct rt_route_decision d;
        struct rt_prompt held;
        const char *instructions = weft__rt_instructions_begin(
            run, wf->router.instructions, wf->router.prompt, "Route the user's message.", &held);
        weft__rt_router_decide(run->svc, &wf->router, instructions, run->cfg.input,
                               run->store.history, span, &d);
        weft__rt_instructions_end(&held);
        route = d.route;
        layer = d.layer;
        snprintf(reason, reason_len, "%s", d.reason);
        if (weft__plan_append(&run->ps.plan, NULL, wf->router.routes[route].agent,
                              run->cfg.input != NULL ? run->cfg.input : "", NULL, 0,
                              &index) == WEFT_OK) {
            next = wf->agents[wf->router.routes[route].agent].name;
            weft__free(run->tel.result->route);
            run->tel.result->route = weft__strdup(wf->router.routes[route].name);
            weft__rk_set_str(span, WEFT__RK_ROUTE, wf->router.routes[route].name);
            if (route == wf->router.clarification_route) {
                weft__rt_count_loop(run, WEFT_LOOP_CLARIFICATION);
            }
            weft__rt_save_step(run, index);
        }
        *is_done = true;
    }
    weft__rk_set_str(span, WEFT__RK_DECISION_LAYER, weft__rt_layer_name(layer));
    weft__rk_set_str(span, WEFT__RK_DECISION_NEXT, next);
    weft__rk_set_str(span, WEFT__RK_DECISION_REASON, reason);
    weft__rk_set_int(span, WEFT__RK_PLAN_VERSION, run->ps.plan.version);
    weft__rk_set_int(span, WEFT__RK_PLAN_SIZE, (int64_t)run->ps.plan.count);
    weft_span_end(span, 0);
    weft__rt_add_decision(run, layer, next, reason);
    progress_decision(run, layer, next, reason);
    return index;
}
