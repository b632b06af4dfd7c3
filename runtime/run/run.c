/* runtime/run/run.c - helpers over the parts of a run (run.h) that need no engine: the step's
 * actor, the abort flag, the time left, and the calling thread's worker index and prompt link.
 */
#include "runtime/run/run.h"
#include "runtime/common/attr_keys.h"
#include "runtime/replay/replay.h"

#include "base/log.h"
#include "base/mem.h"
#include "runtime/llm/prompts.h"

#include <stdint.h>
#include <string.h>

static __thread int worker_index = -1;
static __thread const char *prompt_name;
static __thread const struct rt_prompt *prompt_link;

void
weft__rt_set_prompt_link(const char *name, const struct rt_prompt *prompt)
{
    prompt_name = prompt != NULL ? name : NULL;
    prompt_link = prompt;
}

const struct rt_prompt *
weft__prompt_link(const char **name)
{
    *name = prompt_name;
    return prompt_link;
}

const char *
weft__rt_instructions_begin(struct run *run,
                            const char *text,
                            const struct rt_prompt_ref *ref,
                            const char *builtin,
                            struct rt_prompt *held)
{
    char err[256] = "";
    weft_err e = WEFT_OK;

    memset(held, 0, sizeof(*held));
    if (ref == NULL) {
        return text != NULL ? text : builtin;
    }
    weft__rt_unlock(run);
    e = weft__rt_prompt_resolve(ref, held, err, sizeof(err));
    weft__rt_lock(run);
    if (e != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "prompt %s: %s; using weft's built-in instructions", ref->name,
                 err);
        held->text = weft__strdup(builtin);
        held->is_fallback = true;
        held->version = 0;
    }
    weft__rt_set_prompt_link(ref->name, held);
    return held->text != NULL ? held->text : builtin;
}

void
weft__rt_instructions_end(struct rt_prompt *held)
{
    weft__rt_set_prompt_link(NULL, NULL);
    weft__rt_prompt_cleanup(held);
}

int
weft__rt_worker_index(void)
{
    return worker_index;
}

void
weft__rt_set_worker_index(int index)
{
    worker_index = index;
}

bool
weft__rt_aborted(const struct run *run)
{
    /* A replay stops at its first difference: what follows it would only differ more. */
    return (run->cfg.opts->abort_flag != NULL && *run->cfg.opts->abort_flag != 0) ||
           weft__replay_diverged(run->cfg.replay, NULL, 0);
}

uint32_t
weft__rt_remaining_ms(const struct run *run, uint64_t step_deadline_mono)
{
    uint64_t now = run->svc->now_mono(run->svc->ctx);
    uint64_t deadline = run->cfg.deadline_mono;

    if (step_deadline_mono != 0 && (deadline == 0 || step_deadline_mono < deadline)) {
        deadline = step_deadline_mono;
    }
    if (deadline == 0) {
        return UINT32_MAX;
    }
    if (now >= deadline) {
        return 0;
    }
    return (deadline - now) / 1000000u > UINT32_MAX - 1 ? UINT32_MAX - 1
                                                        : (uint32_t)((deadline - now) / 1000000u);
}

size_t
weft__rt_agent_count(const struct run *run)
{
    return run->cfg.wf->agent_count + run->roster.count;
}

const struct wf_agent *
weft__rt_agent(const struct run *run, size_t index)
{
    if (index < run->cfg.wf->agent_count) {
        return &run->cfg.wf->agents[index];
    }
    index -= run->cfg.wf->agent_count;
    return index < run->roster.count ? &run->roster.teams[index]->agents[0] : NULL;
}

size_t
weft__rt_find_agent(const struct run *run, const char *name)
{
    size_t i = weft__wf_find_agent(run->cfg.wf, name);

    for (size_t t = 0; i == WF_NONE && name != NULL && t < run->roster.count; t++) {
        if (strcmp(run->roster.teams[t]->agents[0].name, name) == 0) {
            i = run->cfg.wf->agent_count + t;
        }
    }
    return i;
}

bool
weft__rt_may_request(const struct run *run, const struct wf_agent *from, size_t to)
{
    if (from->architect != NULL && to >= run->cfg.wf->agent_count) {
        return to < weft__rt_agent_count(run);
    }
    return weft__wf_agent_can_request(from, to);
}

bool
weft__rt_step_is_local(const struct run *run, const struct plan_step *step)
{
    const struct wf_agent *agent =
        step->executor == EXEC_AGENT ? weft__rt_agent(run, step->agent) : NULL;

    return agent != NULL && (agent->architect != NULL || step->agent >= run->cfg.wf->agent_count);
}

const char *
weft__rt_step_actor(const struct run *run, const struct plan_step *step)
{
    const struct wf_agent *agent =
        step->executor == EXEC_AGENT ? weft__rt_agent(run, step->agent) : NULL;

    if (agent != NULL) {
        return agent->name;
    }
    return weft__step_executor_name(step->executor);
}

void
weft__rt_span_task_attempt(const struct run *run, struct weft_span *span)
{
    if (run->cfg.task_attempt > 0) {
        weft__rk_set_int(span, WEFT__RK_TASK_ATTEMPT, run->cfg.task_attempt);
        weft__rk_set_int(span, WEFT__RK_TASK_REDELIVERIES, run->cfg.task_redeliveries);
    }
}

void
weft__rt_request_add(struct run *run,
                     size_t step,
                     const char *agent,
                     const char *query,
                     const struct weft_span_context *requester)
{
    struct rt_request *rq = NULL;

    if (agent == NULL || run->ps.request_count >= RUN_MAX_REQUESTS) {
        run->ps.requests_dropped++;
        return;
    }
    rq = &run->ps.requests[run->ps.request_count];
    rq->agent = weft__strdup(agent);
    rq->query = weft__strdup(query != NULL ? query : "");
    if (rq->agent == NULL || rq->query == NULL) {
        weft__free(rq->agent);
        weft__free(rq->query);
        run->ps.requests_dropped++;
        return;
    }
    rq->from_step = step;
    memset(&rq->requester, 0, sizeof(rq->requester));
    if (requester != NULL) {
        rq->requester = *requester;
    }
    rq->requester.trace_state = NULL;
    run->ps.request_count++;
}
