/* runtime/steps/architect.c - an architect agent's step (architect.h).
 *
 * A composed team becomes an agent the same way a hand-written team agent is one: a workflow
 * document with one agent whose "workflow" is the team's file, loaded by the ordinary loader
 * (so the team is checked once more, and runs through the same team path, subrun.c). That
 * one-agent workflow is the roster slot; it shares the run's models, so the agent's model index
 * means the same in both.
 */
#include "runtime/steps/architect.h"
#include "runtime/common/attr_keys.h"

#include "runtime/decide/evaluate.h"
#include "runtime/state/state.h"
#include "runtime/steps/agent.h"
#include "runtime/steps/compose.h"
#include "runtime/workflow/workflow.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <stdio.h>
#include <string.h>
#include <weft/compose.h>

/* Register the team saved at @p path as the run's next agent. @return its name (borrowed from
 * the roster), or NULL with @p why. */
static const char *
register_team(struct run *run, const char *path, char *why, size_t why_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    json_t *team = json_load_file(path, 0, NULL);
    const char *name = json_string_value(json_object_get(team, "name"));
    struct weft_workflow *slot = NULL;
    struct weft_diags d = {0};
    json_t *doc = NULL;

    if (name == NULL) {
        snprintf(why, why_len, "%s: no team name", path);
    } else if (weft__rt_find_agent(run, name) != WF_NONE) {
        snprintf(why, why_len, "the run already has an agent named %s", name);
    } else if (run->roster.count == RUN_MAX_TEAMS) {
        snprintf(why, why_len, "a run composes %d teams at most", RUN_MAX_TEAMS);
    } else {
        doc =
            json_pack("{s:s+, s:O?, s:[{s:s, s:s, s:s*}]}", "name", name, " (composed)", "models",
                      json_object_get(wf->doc, "models"), "agents", "name", name, "workflow", path,
                      "description", json_string_value(json_object_get(team, "description")));
        if (doc == NULL || weft__workflow_load_doc(wf->path, doc, &slot, &d) != WEFT_OK) {
            char line[512];
            snprintf(why, why_len, "team %s does not load: %s", name,
                     d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line))
                                 : "out of memory");
        } else {
            run->roster.teams[run->roster.count++] = slot;
            name = slot->agents[0].name;
        }
    }
    weft_diags_cleanup(&d);
    json_decref(doc);
    json_decref(team);
    return why[0] == '\0' ? name : NULL;
}

/* Compose with the run lock released. @return the saved team's path (new) or NULL, @p why. */
static char *
compose(struct run *run,
        const struct wf_agent *agent,
        const char *goal,
        const struct weft_span_context *under,
        char *why,
        size_t why_len)
{
    struct weft_compose_options o;
    struct weft_compose_usage used;
    char *path = NULL;

    memset(&o, 0, sizeof(o));
    o.usage = &used;
    o.goal = goal;
    o.base = run->cfg.wf;
    o.architect = agent->name;
    o.provider = run->cfg.opts->provider;
    o.state_path = run->cfg.opts->state_path;
    o.parent = under;
    o.run_id = run->store.run_id;
    o.capture_content = run->cfg.capture_content ? 1 : 0;
    weft__rt_unlock(run);
    if (weft__compose_with(&o, run->svc->run_nested, run->svc->ctx, &path, why, why_len) !=
            WEFT_OK &&
        why[0] == '\0') {
        snprintf(why, why_len, "the architect composed no team");
    }
    weft__rt_lock(run);
    /* The architect's calls are this run's too, as a team's are (subrun.c). */
    run->tel.result->input_tokens += used.input_tokens;
    run->tel.result->output_tokens += used.output_tokens;
    run->tel.result->cost_usd += used.cost_usd;
    run->tel.result->llm_calls += used.llm_calls;
    run->tel.result->tool_calls += used.tool_calls;
    return path;
}

void
weft__rt_architect_step(struct run *run, size_t index, const struct wf_agent *agent)
{
    struct weft_span *span = weft__rt_agent_attempt_start(run, index, agent, 1);
    struct plan_step *s = &run->ps.plan.steps[index];
    struct weft_span_context ctx;
    char why[1024] = "";
    char *goal = weft__strdup(s->task != NULL ? s->task : "");
    char *path = NULL;
    const char *team = NULL;

    weft__plan_step_set_status(&run->ps.plan, s, STEP_IN_PROGRESS);
    s->started_ns = weft__now_ns();
    weft_span_context_of(span, &ctx);
    ctx.trace_state = NULL;
    path = goal != NULL ? compose(run, agent, goal, &ctx, why, sizeof(why)) : NULL;
    team = path != NULL ? register_team(run, path, why, sizeof(why)) : NULL;
    s = &run->ps.plan.steps[index]; /* the lock was released: the plan may have moved */
    s->ended_ns = weft__now_ns();
    weft__free(s->result);
    s->result = NULL;
    if (team != NULL) {
        struct weft__buf out;
        weft__buf_init(&out, 0);
        weft__buf_printf(&out, "composed team %s (saved as %s); it runs the goal next", team, path);
        s->result = out.data;
        weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
        weft__rk_set_str(span, WEFT__RK_ARCHITECT_TEAM, team);
        weft__rk_set_str(span, WEFT__RK_ARCHITECT_PATH, path);
        weft__rt_request_add(run, index, team, goal, &ctx);
        weft__rt_evaluate(run, index, RT_EVAL_SUCCESS, NULL);
    } else {
        weft__free(s->feedback);
        s->feedback = weft__strdup(why[0] != '\0' ? why : "out of memory");
        weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
        weft__rt_evaluate(run, index, RT_EVAL_FAILURE, NULL);
    }
    weft__rt_save_step(run, index);
    weft__rt_agent_step_end(run, index, agent, span, "no_team");
    weft__free(path);
    weft__free(goal);
}

void
weft__rt_architect_restore(struct run *run, const char *run_id, uint64_t before_ns)
{
    struct weft__state_team *teams = NULL;
    size_t n = 0;

    if (run->store.state == NULL ||
        weft__state_teams_list(run->store.state, run_id, RUN_MAX_TEAMS, &teams, &n) != WEFT_OK) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char why[512] = "";
        if (teams[i].created_ns < before_ns && weft__rt_find_agent(run, teams[i].name) == WF_NONE &&
            register_team(run, teams[i].path, why, sizeof(why)) == NULL) {
            WEFT_LOG(WEFT_LOG_WARN, "resume: composed team %s not registered again: %s",
                     teams[i].name, why);
        }
    }
    weft__state_teams_free(teams, n);
}
