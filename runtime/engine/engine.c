/* runtime/engine/engine.c - weft_run(): the one engine loop every policy shares.
 *
 * Each iteration checks the budgets, asks the supervisor for a decision (a `plan {supervisor}`
 * span), and either runs one plan step or ends. A decision follows the router priority:
 * pending loop-back requests are validated and appended as steps, then a step in progress,
 * then the next pending step whose dependencies are completed (chosen by rule, or by the
 * supervisor's LLM when the workflow asks), then the final step, then end. Conversational
 * workflows (a router) decide their one routed turn in router.c.
 *
 * The circuit breaker watches the decisions: the same next move chosen again while the plan
 * state has not changed counts as a retry; at the threshold the run goes to its final step
 * (or ends) and the plan span says why.
 *
 * Invariants: every span started here ends here; the run's memory is bounded by the plan
 * (PLAN_MAX_STEPS), the request queue and the iteration budget.
 */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/engine/engine.h"
#include "runtime/common/attr_keys.h"
#include "runtime/common/secrets.h"
#include "runtime/decide/correct.h"
#include "runtime/decide/evaluate.h"
#include "runtime/decide/lessons.h"
#include "runtime/decide/router.h"
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

static const char *const layer_names[] = {"rule",          "llm",     "fallback",
                                          "counter_limit", "pattern", "circuit_breaker",
                                          "correction",    "watchdog"};

const char *
weft__rt_layer_name(rt_layer layer)
{
    return (size_t)layer < sizeof(layer_names) / sizeof(layer_names[0]) ? layer_names[layer]
                                                                        : "unknown";
}

weft_err
weft__eng_run_nested(void *ctx,
                     const struct weft_workflow *workflow,
                     const struct weft_run_options *options,
                     struct weft_run_result **out,
                     char *error,
                     size_t error_len)
{
    (void)ctx;
    return weft_run(workflow, options, out, error, error_len);
}

/* ------------------------------------------------------------------------------------------ */
/* The loop                                                                                    */

static bool
svc_budget_spent(void *ctx, weft_run_status *status, char *reason, size_t reason_len)
{
    struct run *run = ctx;
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    const struct weft_run_result *r = run->tel.result;

    if (run->watchdog.is_fail || (run->watchdog.is_break && run->watchdog.is_break_routed) ||
        (run->watchdog.is_break && run->cfg.wf->flow != NULL)) {
        *status = WEFT_RUN_STUCK;
        snprintf(reason, reason_len, "%s", run->watchdog.stuck_reason);
    } else if (weft__replay_diverged(run->cfg.replay, reason, reason_len)) {
        *status = WEFT_RUN_ABORTED;
    } else if (weft__rt_aborted(run)) {
        *status = WEFT_RUN_ABORTED;
        snprintf(reason, reason_len, "aborted");
    } else if (run->store.state != NULL &&
               weft__state_check(run->store.state, reason, reason_len) != WEFT_OK) {
        /* The state store cannot keep what a step would do (PostgreSQL away longer than the
         * reconnect wait, a damaged SQLite file; docs/durability.md): no further step runs;
         * aborted is resumable, and `weft resume` re-runs only what was not stored. */
        *status = WEFT_RUN_ABORTED;
    } else if (run->cfg.deadline_mono != 0 && weft__rt_remaining_ms(run, 0) == 0) {
        /* Less than a millisecond left counts as spent: no call could use it. */
        *status = WEFT_RUN_TIMED_OUT;
        run->ps.spent_budget = "timeout_s";
        snprintf(reason, reason_len, "run timeout of %.3gs reached",
                 (double)sup->timeout_ms / 1000.0);
    } else if (r->iterations >= sup->max_iterations) {
        *status = WEFT_RUN_BUDGET_EXHAUSTED;
        run->ps.spent_budget = "max_iterations";
        snprintf(reason, reason_len, "max_iterations (%u) reached", sup->max_iterations);
    } else if (sup->max_tokens > 0 && r->input_tokens + r->output_tokens >= sup->max_tokens) {
        *status = WEFT_RUN_BUDGET_EXHAUSTED;
        run->ps.spent_budget = "max_tokens";
        snprintf(reason, reason_len, "token budget (%lld) spent", (long long)sup->max_tokens);
    } else if (sup->max_cost_usd > 0 && r->cost_usd >= sup->max_cost_usd) {
        *status = WEFT_RUN_BUDGET_EXHAUSTED;
        run->ps.spent_budget = "max_cost_usd";
        snprintf(reason, reason_len, "cost budget ($%.4g) spent", sup->max_cost_usd);
    } else {
        return false;
    }
    return true;
}

/* Before a step runs: the hand-off from @p from (the actor before the decision; NULL: none)
 * and the watchdog's activity. Steps of one batch are all handed off from the same actor. */
static void
step_begin(struct run *run, const char *from, size_t index)
{
    const char *actor = weft__rt_step_actor(run, &run->ps.plan.steps[index]);

    if (from != NULL && strcmp(from, actor) != 0) {
        weft__rt_metrics_handoff(run->tel.metrics, from, actor);
    }
    run->ps.last_actor = actor; /* points into the workflow: stable */
    weft__rt_watchdog_activity(run, "the step", actor, run->ps.plan.steps[index].id);
}

/* After a step ran: a failure enters correction mode when the workflow enables it, until a
 * corrective plan is in place or max_corrections attempts are spent. */
static void
step_correct(struct run *run, size_t index)
{
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;

    weft__rt_lessons_mistake(run, index);
    if (run->ps.plan.steps[index].status != STEP_FAILED || !sup->has_correction ||
        run->cfg.wf->supervisor.policy != WF_POLICY_PLAN_EXECUTE) {
        return;
    }
    while (run->ps.corrections < sup->max_corrections && !weft__rt_aborted(run)) {
        if (weft__rt_correct(run, index)) {
            return;
        }
    }
    if (run->ps.plan.steps[index].status == STEP_FAILED) {
        char note[160];
        snprintf(note, sizeof(note), "; max_corrections (%u) reached", sup->max_corrections);
        if (run->ps.plan.steps[index].feedback != NULL &&
            strstr(run->ps.plan.steps[index].feedback, "max_corrections") == NULL) {
            size_t len = strlen(run->ps.plan.steps[index].feedback) + strlen(note) + 1;
            char *grown = weft__realloc(run->ps.plan.steps[index].feedback, len);
            if (grown != NULL) {
                strcat(grown, note);
                run->ps.plan.steps[index].feedback = grown;
            }
        }
        weft__rt_save_step(run, index);
    }
}

/* After a step and its corrections: the watchdog's count, the scripts' positions, and the
 * run's output (the last completed step's). On the pool, the engine may hear of a step after
 * it heard of one that ended later (a remote executor applies several results at once, and
 * their threads return in any order): there the later end wins. */
static void
step_finish(struct run *run, size_t index)
{
    struct weft_run_result *r = run->tel.result;
    const struct plan_step *s = &run->ps.plan.steps[index];

    ENG(run)->steps_finished++;
    weft__rt_lessons_learn(run, index);
    s = &run->ps.plan.steps[index]; /* an embeddings call released the run lock */
    weft__rt_watchdog_step_done(run, index);
    weft__rt_cursors_save(run);
    if (s->status == STEP_COMPLETED &&
        (!ENG(run)->is_parallel || s->ended_ns >= ENG(run)->output_ended_ns)) {
        weft__free(r->output);
        r->output = weft__strdup(s->result);
        ENG(run)->output_ended_ns = s->ended_ns;
    }
}

/* Run the decision's step on this thread. */
static void
run_step(struct run *run, size_t index)
{
    step_begin(run, run->ps.last_actor, index);
    rt_execute_step(run, index);
    step_correct(run, index);
    step_finish(run, index);
}

/* Whether the engine may decide while steps run: only to start more ready steps. Whatever
 * changes the plan's shape or ends the run (a failure and its correction, loop-back requests,
 * the breaker, the watchdog's routes, the final agent's step) waits until no step runs. */
static bool
can_refill(struct run *run, const struct breaker *br, const struct batch *b)
{
    const struct watchdog *wd = &run->watchdog;
    size_t next = RT_END;

    if (b->is_alone || b->failed_count > 0 || run->ps.request_count > 0 ||
        run->ps.requests_dropped > 0 || br->has_tripped || wd->is_fail || wd->is_break ||
        wd->is_escalate_pending || weft__plan_in_progress(&run->ps.plan) != RT_END) {
        return false;
    }
    next = weft__plan_next_ready(&run->ps.plan, WF_NONE);
    return next != RT_END && !weft__eng_is_final_agent(run, &run->ps.plan.steps[next]);
}

/* Wait until steps on the pool end, and finish them: a failed one waits for correction mode
 * until no step runs any more. */
static void
steps_ended(struct run *run, struct weft__rt_pool *pool, struct batch *b)
{
    size_t n = weft__rt_pool_wait(pool, b->ended, WEFT__RT_MAX_PARALLEL);

    for (size_t i = 0; i < n; i++) {
        struct plan_step *s = &run->ps.plan.steps[b->ended[i]];
        s->is_running = false;
        if (s->status == STEP_FAILED) {
            b->failed[b->failed_count++] = b->ended[i];
        } else {
            step_finish(run, b->ended[i]);
        }
    }
    if (weft__rt_pool_running(pool) > 0) {
        return;
    }
    b->is_alone = false;
    for (size_t i = 0; i < b->failed_count; i++) {
        step_correct(run, b->failed[i]);
        step_finish(run, b->failed[i]);
    }
    b->failed_count = 0;
}

/* One step at a time on this thread (a width of 1, and the conversational router). */
static void
run_sequential(
    struct run *run, struct batch *b, struct breaker *br, char *reason, size_t reason_len)
{
    struct weft_run_result *r = run->tel.result;
    bool is_failed = false;
    bool is_turn_done = false;

    for (;;) {
        size_t step = RT_END;
        weft_run_status spent = WEFT_RUN_COMPLETED;

        if (weft__rt_budget_spent(run, &spent, reason, reason_len)) {
            r->status = spent;
            return;
        }
        b->count = 0;
        if (run->cfg.wf->supervisor.policy == WF_POLICY_ROUTER) {
            step = weft__eng_decide_router(run, &is_turn_done, reason, reason_len);
        } else {
            step = weft__eng_decide(run, br, &is_failed, b, reason, reason_len);
        }
        if (step == RT_END) {
            r->status = is_failed ? WEFT_RUN_FAILED : WEFT_RUN_COMPLETED;
            return;
        }
        if (step != RT_END - 1) { /* else a route that ran nothing */
            run_step(run, step);
        }
    }
}

/* Plan mode with a width above 1: the decisions' steps run on a pool of threads, and each time
 * steps end, the engine decides again and starts the steps now ready in the free slots, so a
 * wide plan keeps its window full (parallel.c). Returns with no step running; the run's status
 * and @p reason set as execute() sets them. */
static void
run_parallel(struct run *run, struct batch *b, struct breaker *br, char *reason, size_t reason_len)
{
    struct weft_run_result *r = run->tel.result;
    struct weft__rt_pool *pool = NULL;
    size_t width = b->width;
    bool is_failed = false;

    if (weft__rt_pool_start(run, width, &pool) != WEFT_OK) {
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    for (;;) {
        size_t running = weft__rt_pool_running(pool);
        size_t step = RT_END;
        weft_run_status spent = WEFT_RUN_COMPLETED;
        const char *from = run->ps.last_actor;

        if (running > 0 && (running == width || !can_refill(run, br, b))) {
            steps_ended(run, pool, b);
            continue;
        }
        if (weft__rt_budget_spent(run, &spent, reason, reason_len)) {
            r->status = spent;
            break;
        }
        b->count = 0;
        b->width = width - running;
        step = weft__eng_decide(run, br, &is_failed, b, reason, reason_len);
        if (step == RT_END) {
            r->status = is_failed ? WEFT_RUN_FAILED : WEFT_RUN_COMPLETED;
            break;
        }
        if (step == RT_END - 1) {
            continue; /* a route that ran nothing */
        }
        if (b->count == 0 || weft__eng_is_final_agent(run, &run->ps.plan.steps[step])) {
            /* Not a pick among ready steps: it runs alone, after those running. */
            while (weft__rt_pool_running(pool) > 0) {
                steps_ended(run, pool, b);
            }
            b->count = 1;
            b->steps[0] = step;
            b->is_alone = true;
        }
        for (size_t i = 0; i < b->count; i++) {
            step_begin(run, from, b->steps[i]);
            run->ps.plan.steps[b->steps[i]].is_running = true;
            weft__rt_pool_submit(pool, b->steps[i]);
        }
    }
    while (weft__rt_pool_running(pool) > 0) {
        steps_ended(run, pool, b);
    }
    weft__rt_pool_stop(pool);
}

/* A run the watchdog stopped (break, fail) never reports success: it ends as stuck, and the
 * reason names the loop. So does one the circuit breaker (@p br; NULL: none) ended with steps
 * of its plan that never ran. */
static void
stuck_status(struct run *run, const struct breaker *br, char *reason, size_t reason_len)
{
    weft_run_status *status = &run->tel.result->status;
    size_t left = 0;

    if ((*status == WEFT_RUN_COMPLETED || *status == WEFT_RUN_FAILED) &&
        (run->watchdog.is_fail || run->watchdog.is_break)) {
        *status = WEFT_RUN_STUCK;
        snprintf(reason, reason_len, "%s", run->watchdog.stuck_reason);
        return;
    }
    if (br == NULL || !br->has_tripped || *status != WEFT_RUN_COMPLETED) {
        return;
    }
    left = weft__plan_count_status(&run->ps.plan, STEP_PENDING) +
           weft__plan_count_status(&run->ps.plan, STEP_PAUSED);
    if (left > 0) {
        *status = WEFT_RUN_STUCK;
        snprintf(reason, reason_len, "circuit breaker: %s; %zu step(s) of the plan never ran",
                 br->evidence, left);
    }
}

/* The workflow file's plan, saved in one commit. false: out of memory (recorded). */
static bool
file_plan(struct run *run)
{
    const struct weft_workflow *wf = run->cfg.wf;

    for (size_t i = 0; i < wf->plan_count; i++) {
        const struct wf_step *s = &wf->plan[i];
        if (weft__plan_append(&run->ps.plan, s->id, s->agent, s->task,
                              (const char *const *)s->depends_on, s->depends_count,
                              NULL) != WEFT_OK) {
            ENG(run)->oom = WEFT_ENOMEM;
            return false;
        }
        run->ps.plan.steps[i].executor = s->executor;
        run->ps.plan.steps[i].spec = s->spec != NULL ? json_deep_copy(s->spec) : NULL;
    }
    weft__eng_save_plan(run);
    return true;
}

static void
execute(struct run *run)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_run_result *r = run->tel.result;
    struct breaker br;
    struct batch *batch = NULL; /* 6 KiB: on the heap */
    char reason[1024] = "";

    memset(&br, 0, sizeof(br));
    r->status = WEFT_RUN_COMPLETED;
    if (run->cfg.mcp != NULL) {
        char mcp_down[WEFT__MCP_HUB_ERROR_MAX] = "";
        if (weft__mcp_hub_required_down(run->cfg.mcp, mcp_down, sizeof(mcp_down))) {
            /* A server the workflow needs did not start: no step could do its work, and the
             * steps that could would only hide it (docs/mcp.md, "Faults"). */
            r->status = WEFT_RUN_FAILED;
            r->reason = weft__strdup(mcp_down);
            return;
        }
    }
    if (wf->flow != NULL && run->store.fork != NULL) {
        weft__rt_fork_apply(run); /* spans and counts; the flow takes the results itself */
    }
    if (wf->flow != NULL) {
        weft__rt_run_flow(run, &r->status, reason, sizeof(reason));
        stuck_status(run, NULL, reason, sizeof(reason));
        r->reason = weft__strdup(reason);
        return;
    }
    if (wf->supervisor.policy == WF_POLICY_PLAN_EXECUTE && !run->store.is_resumed) {
        if (wf->plan_count > 0) {
            if (!file_plan(run)) {
                return;
            }
            if (run->store.fork != NULL && !weft__rt_fork_plan(run)) {
                r->status = WEFT_RUN_FAILED;
                r->reason = weft__strdup("fork: the original's plan does not fit this workflow");
                return;
            }
        } else if (run->store.fork != NULL) {
            if (!weft__rt_fork_plan(run)) {
                r->status = WEFT_RUN_FAILED;
                r->reason = weft__strdup("fork: the original's plan does not fit this workflow");
                return;
            }
        } else if (!weft__eng_initial_plan(run, reason, sizeof(reason))) {
            r->status = WEFT_RUN_FAILED;
            r->reason = weft__strdup(reason);
            return;
        }
    }
    if (run->store.fork != NULL && wf->supervisor.policy == WF_POLICY_PLAN_EXECUTE) {
        weft__rt_fork_apply(run);
    }
    if (wf->supervisor.policy == WF_POLICY_PLAN_EXECUTE && !run->store.is_resumed) {
        weft__rt_lessons_preempt(run); /* mistakes a past run corrected, avoided this time */
    }
    batch = weft__calloc(1, sizeof(*batch));
    if (batch == NULL) {
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    batch->width = weft__eng_parallel_width(run);
    if (batch->width > 1) {
        (void)run->svc->make_worker_providers(run->svc->ctx, batch->width);
        run_parallel(run, batch, &br, reason, sizeof(reason));
    } else {
        run_sequential(run, batch, &br, reason, sizeof(reason));
    }
    weft__free(batch);
    stuck_status(run, &br, reason, sizeof(reason));
    /* A step cut short by the run's own deadline means the run timed out. */
    if (r->status == WEFT_RUN_FAILED && run->cfg.deadline_mono != 0 &&
        weft__rt_remaining_ms(run, 0) == 0) {
        char detail[sizeof(reason)];
        memcpy(detail, reason, sizeof(detail));
        r->status = WEFT_RUN_TIMED_OUT;
        run->ps.spent_budget = "timeout_s";
        snprintf(reason, sizeof(reason), "run timeout of %.3gs reached (%.900s)",
                 (double)wf->supervisor.timeout_ms / 1000.0, detail);
    }
    r->reason = weft__strdup(reason);
}

static weft_err
copy_steps(struct run *run)
{
    struct weft_run_result *r = run->tel.result;

    if (run->ps.plan.count == 0) {
        return WEFT_OK;
    }
    r->steps = weft__calloc(run->ps.plan.count, sizeof(*r->steps));
    if (r->steps == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < run->ps.plan.count; i++) {
        const struct plan_step *s = &run->ps.plan.steps[i];
        struct weft_run_step *o = &r->steps[i];
        r->step_count = i + 1;
        o->id = weft__strdup(s->id);
        o->agent = weft__strdup(weft__rt_step_actor(run, s));
        o->task = weft__strdup(s->task);
        o->status = weft__strdup(weft__step_status_name(s->status));
        o->attempts = s->attempts;
        o->result = s->result != NULL ? weft__strdup(s->result) : NULL;
        o->requested_by = s->requested_by != NULL ? weft__strdup(s->requested_by) : NULL;
        o->parent = s->parent != NULL ? weft__strdup(s->parent) : NULL;
        o->executor = weft__strdup(weft__step_executor_name(s->executor));
        o->reward = s->reward;
        o->has_reward = s->has_reward;
        {
            struct weft__buf deps;
            weft__buf_init(&deps, 0);
            weft__buf_append_str(&deps, "");
            for (size_t d = 0; d < s->depends_count; d++) {
                weft__buf_printf(&deps, "%s%s", d > 0 ? "," : "", s->depends_on[d]);
            }
            o->depends_on = deps.data;
        }
        if ((s->parent != NULL && o->parent == NULL) || o->executor == NULL ||
            o->depends_on == NULL) {
            return WEFT_ENOMEM;
        }
        if (o->id == NULL || o->agent == NULL || o->task == NULL || o->status == NULL ||
            (s->result != NULL && o->result == NULL) ||
            (s->requested_by != NULL && o->requested_by == NULL)) {
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

/* Tail sampling: the policy decides the run's trace now that everything it reads is known
 * (metrics and the stored run count the run whatever it decides). Only a run that owns its
 * trace's local root decides: a nested run's spans go with its parent's trace. */
static void
decide_sampling(struct run *run)
{
    const struct weft_sampling_policy *policy =
        run->cfg.opts->sampling != NULL ? run->cfg.opts->sampling : run->cfg.wf->sampling;
    const struct weft_span_context *parent = run->cfg.opts->parent_context;
    struct weft_run_result *r = run->tel.result;
    struct weft_sampling_facts f;
    struct weft_span_context ctx;
    const char *rule = NULL;

    if (policy == NULL || run->cfg.opts->is_sampling_off ||
        (parent != NULL && weft_span_context_is_valid(parent) && !parent->is_remote)) {
        return;
    }
    weft_span_context_of(run->tel.root, &ctx);
    memset(&f, 0, sizeof(f));
    memcpy(f.trace_id, ctx.trace_id, sizeof(f.trace_id));
    f.is_completed = r->status == WEFT_RUN_COMPLETED;
    f.is_stuck = r->status == WEFT_RUN_STUCK || run->watchdog.detections > 0;
    f.is_corrected = r->corrections > 0;
    for (size_t i = 0; i < r->verdict_count; i++) {
        const char *v = strrchr(r->verdicts[i], ':');

        f.is_rejected |= v != NULL && strcmp(v + 1, "REJECTED") == 0;
    }
    f.duration_s = (double)r->duration_ns / 1e9;
    f.cost_usd = r->cost_usd;
    f.reward = r->reward;
    for (size_t i = 0; i < r->step_count; i++) {
        f.has_reward |= r->steps[i].has_reward;
    }
    r->is_trace_kept = weft_sampling_decide(policy, &f, &rule);
    r->sampling_rule = weft__strdup(rule);
    r->is_trace_sampled = r->sampling_rule != NULL;
    if (!r->is_trace_sampled) {
        r->is_trace_kept = true; /* out of memory: no decision, the buffers keep the trace */
        return;
    }
    weft__rk_set_str(run->tel.root, WEFT__RK_SAMPLING_DECISION, r->is_trace_kept ? "keep" : "drop");
    weft__rk_set_str(run->tel.root, WEFT__RK_SAMPLING_RULE, rule);
}

/* Which budget ended the run, on the root: weft.run.budget (the workflow's name for it, as
 * svc_budget_spent() recorded it when it stopped the run), its limit and the amount used, so a
 * reader need not parse the reason. Nothing for a run that ended otherwise. */
static void
budget_attrs(struct run *run)
{
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    const struct weft_run_result *r = run->tel.result;
    struct weft_span *root = run->tel.root;
    const char *name = run->ps.spent_budget;

    if (name == NULL ||
        (r->status != WEFT_RUN_TIMED_OUT && r->status != WEFT_RUN_BUDGET_EXHAUSTED)) {
        return;
    }
    weft__rk_set_str(root, WEFT__RK_RUN_BUDGET, name);
    if (strcmp(name, "timeout_s") == 0) {
        weft__rk_set_double(root, WEFT__RK_RUN_BUDGET_LIMIT, (double)sup->timeout_ms / 1000.0);
        weft__rk_set_double(root, WEFT__RK_RUN_BUDGET_USED, (double)r->duration_ns / 1e9);
    } else if (strcmp(name, "max_iterations") == 0) {
        weft__rk_set_int(root, WEFT__RK_RUN_BUDGET_LIMIT, (int64_t)sup->max_iterations);
        weft__rk_set_int(root, WEFT__RK_RUN_BUDGET_USED, (int64_t)r->iterations);
    } else if (strcmp(name, "max_tokens") == 0) {
        weft__rk_set_int(root, WEFT__RK_RUN_BUDGET_LIMIT, sup->max_tokens);
        weft__rk_set_int(root, WEFT__RK_RUN_BUDGET_USED, r->input_tokens + r->output_tokens);
    } else {
        weft__rk_set_double(root, WEFT__RK_RUN_BUDGET_LIMIT, sup->max_cost_usd);
        weft__rk_set_double(root, WEFT__RK_RUN_BUDGET_USED, r->cost_usd);
    }
}

static void
end_root(struct run *run)
{
    struct weft_run_result *r = run->tel.result;
    struct weft_span *root = run->tel.root;

    weft__rk_set_str(root, WEFT__RK_RUN_STATUS, weft_run_status_name(r->status));
    weft__rk_set_int(root, WEFT__RK_RUN_ITERATIONS, (int64_t)r->iterations);
    weft__rk_set_int(root, WEFT__RK_RUN_STEPS, (int64_t)run->ps.plan.count);
    weft__rk_set_int(root, WEFT__RK_GEN_AI_USAGE_INPUT_TOKENS, r->input_tokens);
    weft__rk_set_int(root, WEFT__RK_GEN_AI_USAGE_OUTPUT_TOKENS, r->output_tokens);
    weft__rk_set_double(root, WEFT__RK_COST_USD, r->cost_usd);
    weft__rk_set_double(root, WEFT__RK_RUN_REWARD, r->reward);
    weft__rk_set_int(root, WEFT__RK_RUN_PS_CORRECTIONS, (int64_t)r->corrections);
    for (int k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
        char key[64];
        snprintf(key, sizeof(key), "weft.run.loops.%s", weft_loop_kind_name((weft_loop_kind)k));
        weft_span_set_int(root, key, (int64_t)r->loops[k]);
    }
    if (r->route != NULL) {
        weft__rk_set_str(root, WEFT__RK_ROUTE, r->route);
    }
    budget_attrs(run);
    weft__rt_span_content(run, root, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT, r->output);
    decide_sampling(run);
    if (r->status == WEFT_RUN_COMPLETED) {
        weft_span_set_status(root, WEFT_STATUS_OK, NULL);
    } else {
        weft__rk_set_str(root, WEFT__RK_ERROR_TYPE, weft_run_status_name(r->status));
        weft_span_set_status(root, WEFT_STATUS_ERROR, r->reason);
    }
    weft_span_end(root, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* weft_run                                                                                    */

static void
services_init(struct engine *eng)
{
    struct run_services *svc = &eng->services;

    svc->ctx = &eng->run;
    svc->llm_call = weft__eng_llm_call;
    svc->save_step = weft__eng_save_step;
    svc->progress = weft__eng_progress;
    svc->lock = weft__eng_lock;
    svc->unlock = weft__eng_unlock;
    svc->set_parallel = weft__eng_set_parallel;
    svc->cond_wait = weft__eng_cond_wait;
    svc->now_mono = weft__eng_now_mono;
    svc->count_loop = weft__eng_count_loop;
    svc->add_decision = weft__eng_add_decision;
    svc->add_verdict = weft__eng_add_verdict;
    svc->budget_spent = svc_budget_spent;
    svc->make_worker_providers = weft__eng_make_worker_providers;
    svc->cursors_save = weft__eng_cursors_save;
    svc->provider_name = weft__eng_provider_name;
    svc->execute_step = weft__eng_execute_step;
    svc->run_nested = weft__eng_run_nested;
    eng->run.svc = svc;
}

/* The run's ids, copied into the result. */
static weft_err
init_ids(struct run *run)
{
    struct weft_run_result *r = run->tel.result;
    const char *session = run->cfg.opts->session_id;

    weft__eng_make_run_id(run->store.run_id);
    run->store.session_id =
        weft__strdup(session != NULL && session[0] != '\0' ? session : run->store.run_id);
    r->run_id = weft__strdup(run->store.run_id);
    if (run->store.session_id == NULL || r->run_id == NULL) {
        return WEFT_ENOMEM;
    }
    r->session_id = weft__strdup(run->store.session_id);
    return r->session_id != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* A replay and a fork are runs of their own: neither goes with a recording, a script replay, a
 * resume or the other. */
static bool
origin_options_ok(const struct weft_run_options *opts, char *error, size_t error_len)
{
    bool is_replay = opts->replay_run_id != NULL;
    bool is_fork = opts->fork_run_id != NULL;

    /* replay and fork together replay a fork: the same fork, its calls answered by the fork's */
    if ((is_replay || is_fork) &&
        (opts->record_path != NULL || opts->replay_path != NULL || opts->resume_run_id != NULL)) {
        snprintf(error, error_len, "%s excludes --record, --replay and resume",
                 is_replay ? "replay" : "fork");
        return false;
    }
    if (!is_fork && (opts->fork_task != NULL || opts->fork_answer != NULL)) {
        snprintf(error, error_len, "a step's task or answer can be set only for a fork");
        return false;
    }
    if (is_fork != (opts->fork_from_step != NULL)) {
        snprintf(error, error_len, "fork: the run and the step to fork from go together");
        return false;
    }
    return true;
}

/* The state database, the providers, native tools, workspace and recording. */
static weft_err
open_resources(struct run *run, char *error, size_t error_len)
{
    const struct weft_run_options *opts = run->cfg.opts;
    char *state_path = NULL;
    weft_err err = WEFT_OK;

    if (opts->record_path != NULL && opts->replay_path != NULL) {
        snprintf(error, error_len, "--record and --replay exclude each other");
        return WEFT_EINVAL;
    }
    if (!origin_options_ok(opts, error, error_len)) {
        return WEFT_EINVAL;
    }
    state_path =
        opts->state_path != NULL ? weft__strdup(opts->state_path) : weft__state_default_path();
    if (state_path == NULL) {
        return WEFT_ENOMEM;
    }
    err = weft__state_open(state_path, &run->store.state, error, error_len);
    if (err == WEFT_OK) {
        run->tel.mstore = weft__rt_mstore_open(state_path);
    }
    weft__free(state_path);
    if (err == WEFT_OK) {
        err = weft__eng_setup_providers(run, error, error_len);
    }
    if (err == WEFT_OK) {
        err = weft__eng_bind_native_tools(run, error, error_len);
    }
    if (err == WEFT_OK) {
        err = weft__eng_setup_workspace(run, error, error_len);
    }
    if (err == WEFT_OK && opts->record_path != NULL) {
        err = weft__llm_recording_new(opts->record_path, &ENG(run)->recording, error, error_len);
    }
    return err;
}

/* A resumed run's stored state, the scripts' cursors, the session history and the tracer. */
static weft_err
load_context(struct run *run, struct weft_span_context *resumed_from, char *error, size_t error_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_run_result *r = run->tel.result;
    weft_err err = WEFT_OK;

    if (run->cfg.replay != NULL) {
        *resumed_from = ENG(run)->origin;
    }
    if (run->cfg.opts->fork_run_id != NULL) {
        struct weft_span_context forked;
        err = weft__rt_fork_load(run, &forked, error, error_len);
        if (err != WEFT_OK) {
            return err;
        }
        if (run->cfg.replay == NULL) {
            *resumed_from = forked; /* a replay of a fork links to the fork it replays */
        }
    }
    if (run->cfg.opts->resume_run_id != NULL) {
        err = weft__eng_resume_load(run, resumed_from, error, error_len);
        if (err != WEFT_OK) {
            return err;
        }
        weft__free(r->run_id);
        weft__free(r->session_id);
        r->run_id = weft__strdup(run->store.run_id);
        r->session_id = weft__strdup(run->store.session_id);
        if (r->run_id == NULL || r->session_id == NULL) {
            return WEFT_ENOMEM;
        }
    }
    weft__eng_cursors_restore(run);
    for (size_t i = 0; run->store.fork != NULL && i < wf->model_count; i++) {
        /* A fork's scripted models answer from where the original's were when the forked
         * step started: its re-run asks what the original asked then (runtime/engine/fork.c). */
        if (weft__eng_script_of(run, i) != NULL && run->store.fork->cursors != NULL) {
            (void)weft__llm_scripted_restore(weft__eng_provider_for(run, i),
                                             run->store.fork->cursors);
        }
    }
    if (wf->has_router && wf->supervisor.policy == WF_POLICY_ROUTER) {
        err = weft__state_messages_load(run->store.state, run->store.session_id,
                                        wf->memory.history_messages, &run->store.history);
        if (err != WEFT_OK) {
            snprintf(error, error_len, "state database: cannot load session %s",
                     run->store.session_id);
            return err;
        }
    }
    if (run->cfg.opts->provider != NULL) {
        weft__rt_keys_init(); /* before the run's first span */
        err = weft_provider_get_tracer(run->cfg.opts->provider, "weft.runtime", WEFT_VERSION,
                                       &run->tel.tracer);
        if (err != WEFT_OK && err != WEFT_EDISABLED) {
            snprintf(error, error_len, "tracer: %s", weft_strerror(err));
            return err;
        }
    }
    return WEFT_OK;
}

/* A worker's task run keeps and finds skills in the shared store the orchestrator uses
 * (WEFT_STATE_URL, else its WEFT_HOME's state.db), on a handle of its own: the run's state is
 * the orchestrator's business, not the task's. */
static weft_err
open_memory(struct run *run, char *err, size_t err_len)
{
    char *location = weft__state_default_path();
    weft_err e = WEFT_OK;

    if (location == NULL) {
        return WEFT_ENOMEM;
    }
    /* Waiting: a short database outage must not fail the task (docs/durability.md). */
    e = weft__state_open_waiting(location, &run->store.memory, err, err_len);
    weft__free(location);
    return e;
}

/* An MCP call's progress notification, shown in the run's progress display. Called on the
 * client's reader thread: the run lock is taken for the event (the agent waiting on the call
 * released it). */
static void
mcp_progress(void *user_data,
             const char *server,
             const char *tool,
             double progress,
             double total,
             const char *message)
{
    struct run *run = user_data;
    char detail[256];

    if (total > 0) {
        snprintf(detail, sizeof(detail), "mcp %s %s: %.0f%%%s%.160s", server,
                 tool != NULL ? tool : "", 100.0 * progress / total, message != NULL ? " " : "",
                 message != NULL ? message : "");
    } else {
        snprintf(detail, sizeof(detail), "mcp %s %s: %g%s%.160s", server, tool != NULL ? tool : "",
                 progress, message != NULL ? " " : "", message != NULL ? message : "");
    }
    weft__rt_lock(run);
    weft__rt_progress(run, WEFT_EVENT_TOOL_PROGRESS, NULL, detail);
    weft__rt_unlock(run);
}

/* The workflow's MCP servers, started before the run (a server that does not start is logged
 * and tried again when its agent runs: mcp/hub.h). Spans through the run's tracer; the
 * clients' metrics into @p meter. */
static weft_err
start_mcp(struct run *run, struct weft_meter *meter, char *error, size_t error_len)
{
    struct weft__mcp_hub_options o;
    char why[256] = "";
    weft_err err = WEFT_OK;

    if (run->cfg.wf->mcp_count == 0) {
        return WEFT_OK;
    }
    memset(&o, 0, sizeof(o));
    o.tracer = run->tel.tracer;
    o.meter = meter; /* the run's own (stored with it), and the caller's */
    o.meter_tee = run->cfg.opts->meter;
    o.on_progress = mcp_progress;
    o.user_data = run;
    o.span_attrs = run->tel.span_attrs; /* complete by now: the root has started */
    o.span_attr_count = run->tel.span_attr_count;
    err = weft__mcp_hub_new(run->cfg.wf, &o, &run->cfg.mcp, why, sizeof(why));
    if (err != WEFT_OK && error != NULL) {
        snprintf(error, error_len, "MCP servers: %s", why[0] != '\0' ? why : weft_strerror(err));
    }
    return err;
}

/* Everything before the root span: on failure the caller tears the run down. */
static weft_err
run_setup(struct run *run, struct weft_span_context *resumed_from, char *error, size_t error_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    const struct weft_run_options *opts = run->cfg.opts;
    weft_err err = init_ids(run);

    if (err != WEFT_OK) {
        return err;
    }
    run->cfg.capture_content =
        opts->capture_content == 1 ||
        (opts->capture_content != 0 &&
         (wf->capture_content == 1 ||
          (wf->capture_content == -1 && weft__env_bool("WEFT_CAPTURE_CONTENT", false))));
    err = open_resources(run, error, error_len);
    if (err == WEFT_OK) {
        err = load_context(run, resumed_from, error, error_len);
    }
    if (err != WEFT_OK) {
        return err;
    }
    run->cfg.started_mono = weft__monotonic_ns();
    if (wf->supervisor.timeout_ms > 0) {
        run->cfg.deadline_mono =
            run->cfg.started_mono + (uint64_t)wf->supervisor.timeout_ms * 1000000u;
    }
    err = weft__state_run_begin(run->store.state, run->store.run_id, wf->name,
                                weft__rt_snapshot_unroot(opts->snapshot_root, wf->path),
                                run->store.session_id, run->cfg.input, weft__now_ns());
    if (err == WEFT_OK) {
        err = weft__rt_run_claim(run, error, error_len); /* durable.c: owner, file hash */
    }
    if (err == WEFT_OK && (run->cfg.replay != NULL || run->store.fork != NULL)) {
        err = run->cfg.replay != NULL
                  ? weft__state_run_origin(run->store.state, run->store.run_id, "replay",
                                           weft__replay_run_id(run->cfg.replay), NULL)
                  : weft__state_run_origin(run->store.state, run->store.run_id, "fork",
                                           run->store.fork->run_id, run->store.fork->from);
    }
    if (err != WEFT_OK && error[0] == '\0' &&
        weft__state_check(run->store.state, error, error_len) == WEFT_OK) {
        snprintf(error, error_len, "state database: cannot record run %s", run->store.run_id);
    }
    return err;
}

/* Why the root span links to another run's root. */
static const char *
link_reason(const struct run *run)
{
    return run->cfg.replay != NULL   ? "replay_of"
           : run->store.fork != NULL ? "fork_of"
                                     : "resumed_from";
}

/* A replay or fork names its original on the root span. */
static void
origin_attrs(struct run *run)
{
    if (run->cfg.replay != NULL) {
        weft__rk_set_str(run->tel.root, WEFT__RK_REPLAY_OF, weft__replay_run_id(run->cfg.replay));
    }
    if (run->store.fork != NULL) {
        weft__rk_set_str(run->tel.root, WEFT__RK_FORK_OF, run->store.fork->run_id);
        weft__rk_set_str(run->tel.root, WEFT__RK_FORK_FROM, run->store.fork->from);
    }
}

/* options.span_attrs for every span of the run (spans.c copies run->tel.span_attrs into each
 * span's start attributes): prepared once here, before the root starts. */
static void
span_attrs_start(struct run *run)
{
    const struct weft_run_options *o = run->cfg.opts;
    size_t n = o->span_attrs != NULL ? o->span_attr_count : 0;
    /* The slot after the 16 is the root id's; a sub-workflow's run, which has no id of its own
     * to add, gets its parent's 16 and the parent's root id in it (subrun.c). */
    size_t max = o->root_span_id_attr != NULL ? RUN_MAX_SPAN_ATTRS : RUN_MAX_SPAN_ATTRS + 1;

    if (n > max) {
        n = max;
    }
    if (n > 0) {
        memcpy(run->tel.span_attrs, o->span_attrs, n * sizeof(run->tel.span_attrs[0]));
    }
    run->tel.span_attr_count = n;
}

/* Once the root has started: its id under options.root_span_id_attr on the root and, through
 * run->tel.span_attrs, on every span after it; then the content that goes with the root's input
 * when the run records content. */
static void
root_extras(struct run *run, const struct weft_span_context *root)
{
    const struct weft_run_options *o = run->cfg.opts;

    if (o->root_span_id_attr != NULL && o->root_span_id_attr[0] != '\0' &&
        weft_span_context_is_valid(root)) {
        struct weft_attr *a = &run->tel.span_attrs[run->tel.span_attr_count];

        weft_hex_encode(root->span_id, WEFT_SPAN_ID_SIZE, run->tel.root_span_hex);
        *a = weft_attr_str(o->root_span_id_attr, run->tel.root_span_hex);
        (void)weft_span_set_attr(run->tel.root, a);
        run->tel.span_attr_count++;
    }
    for (size_t i = 0; run->cfg.capture_content && o->root_content_attrs != NULL &&
                       i < o->root_content_attr_count && i < 16;
         i++) {
        (void)weft_span_set_attr(run->tel.root, &o->root_content_attrs[i]);
    }
}

/* The root span (linked to the run it resumes, replays or forks), its ids kept with the run,
 * the meters and the watchdog started. */
static void
run_start(struct run *run, const struct weft_span_context *resumed_from)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_link_spec link;
    struct weft_attr link_attr = weft_attr_str("weft.link.reason", link_reason(run));
    struct weft_span_context ctx;

    run->tel.root_started_ns = weft__now_ns();
    span_attrs_start(run);
    memset(&link, 0, sizeof(link));
    link.context = *resumed_from;
    link.attrs = &link_attr;
    link.attr_count = 1;
    run->tel.root =
        weft__rt_span_start_under(run, RT_SPAN_WORKFLOW, wf->name, run->cfg.opts->parent_context,
                                  &link, weft_span_context_is_valid(resumed_from) ? 1 : 0);
    if (run->store.is_resumed) {
        weft__rk_set_bool(run->tel.root, WEFT__RK_RUN_RESUMED, true);
    }
    origin_attrs(run);
    for (size_t i = 0; i < run->cfg.opts->root_attr_count && i < 16; i++) {
        (void)weft_span_set_attr(run->tel.root, &run->cfg.opts->root_attrs[i]);
    }
    weft_span_context_of(run->tel.root, &ctx);
    root_extras(run, &ctx);
    if (weft_span_context_is_valid(&ctx)) {
        char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
        weft_hex_encode(ctx.trace_id, WEFT_TRACE_ID_SIZE, run->tel.result->trace_id);
        weft_hex_encode(ctx.span_id, WEFT_SPAN_ID_SIZE, span_hex);
        (void)weft__state_run_trace(run->store.state, run->store.run_id, run->tel.result->trace_id,
                                    span_hex);
        weft__rt_run_root_saved(run); /* durable.c */
    }
    weft__rk_set_str(run->tel.root, WEFT__RK_GEN_AI_AGENT_NAME, wf->supervisor.name);
    weft__rt_span_content(run, run->tel.root, WEFT__RK_LANGFUSE_OBSERVATION_INPUT, run->cfg.input);
    (void)weft__rt_mstore_start(run->tel.mstore, run->store.run_id, run->cfg.opts->provider);
    run->tel.metrics = weft__rt_metrics_new_tee(weft__rt_mstore_meter(run->tel.mstore),
                                                run->cfg.opts->meter, wf->name);
    if (ENG(run)->executor->ops->bind_run_meter != NULL) {
        /* A remote executor's task metrics belong to the run too (stored with its snapshots). */
        ENG(run)->executor->ops->bind_run_meter(ENG(run)->executor,
                                                weft__rt_mstore_meter(run->tel.mstore));
    }
    weft__rt_metrics_run_start(run->tel.metrics, &run->tel.metrics_token);
    if (start_mcp(run, weft__rt_mstore_meter(run->tel.mstore), NULL, 0) != WEFT_OK) {
        ENG(run)->oom = WEFT_ENOMEM; /* the only error of a run's (not strict) start */
    }
    weft__rt_watchdog_start(run);
    weft__rt_progress(run, WEFT_EVENT_RUN_START, NULL, wf->name);
}

/* The routed turn joins the session's history. */
static void
save_turn(struct run *run)
{
    const struct weft_run_result *r = run->tel.result;

    if (run->store.history == NULL || r->route == NULL || run->ps.plan.count == 0) {
        return;
    }
    (void)weft__state_message_add(run->store.state, run->store.session_id, run->store.run_id,
                                  "user", run->cfg.input != NULL ? run->cfg.input : "", NULL);
    if (r->output != NULL) {
        (void)weft__state_message_add(run->store.state, run->store.session_id, run->store.run_id,
                                      "assistant", r->output, r->route);
    }
}

/* The run's final row. */
static void
save_run_end(struct run *run)
{
    const struct weft_run_result *r = run->tel.result;
    struct weft__state_run_end end;
    char *loops_text = NULL;
    json_t *loops = json_object();
    char sampling[80];

    memset(&end, 0, sizeof(end));
    end.status = weft_run_status_name(r->status);
    end.reason = r->reason;
    end.trace_id = r->trace_id;
    end.output = r->output;
    end.iterations = r->iterations;
    end.input_tokens = r->input_tokens;
    end.output_tokens = r->output_tokens;
    end.cost_usd = r->cost_usd;
    end.ended_ns = weft__now_ns();
    end.reward = r->reward;
    end.corrections = r->corrections;
    for (int k = 0; loops != NULL && k < WEFT_LOOP_KIND_COUNT; k++) {
        json_object_set_new(loops, weft_loop_kind_name((weft_loop_kind)k),
                            json_integer((json_int_t)r->loops[k]));
    }
    /* Stuck loops the watchdog found, beside the loops (the explorer's runs list shows them);
     * not a loop kind: the stored metrics skip it. */
    if (loops != NULL && run->watchdog.detections > 0) {
        json_object_set_new(loops, "stuck", json_integer((json_int_t)run->watchdog.detections));
    }
    loops_text = loops != NULL ? json_dumps(loops, JSON_COMPACT) : NULL;
    json_decref(loops);
    end.loops = loops_text;
    if (r->is_trace_sampled) {
        snprintf(sampling, sizeof(sampling), "%s:%s", r->is_trace_kept ? "kept" : "dropped",
                 r->sampling_rule);
        end.trace_sampling = sampling;
    }
    (void)weft__state_run_end(run->store.state, run->store.run_id, &end);
    free(loops_text);
}

/* After the loop: the result's steps, the root span, the stored turn and run, the lease, the
 * last metrics and progress. @return @p err, or the first failure of these. */
static weft_err
run_finish(struct run *run, weft_err err, char *error, size_t error_len)
{
    struct weft_run_result *r = run->tel.result;

    if (ENG(run)->oom != WEFT_OK) {
        err = ENG(run)->oom;
    }
    if (err == WEFT_OK) {
        err = copy_steps(run);
    }
    r->duration_ns = weft__monotonic_ns() - run->cfg.started_mono;
    if (run->cfg.replay != NULL) {
        r->replay = weft__replay_finish(run->cfg.replay, run->tel.root);
        if (r->replay == NULL && err == WEFT_OK) {
            err = WEFT_ENOMEM;
        }
    }
    end_root(run);
    save_turn(run);
    save_run_end(run);
    (void)weft__state_lease_release(run->store.state, run->store.run_id);
    (void)weft__state_flush(run->store.state); /* a failure is noted for the check below */
    if (err == WEFT_OK && weft__state_check(run->store.state, error, error_len) != WEFT_OK) {
        err = WEFT_EIO; /* the run's state is not safely kept: say so, never exit 0 */
    }
    weft__rt_cursors_save(run);
    if (!run->cfg.is_mcp_borrowed) {
        /* The servers stop before the last snapshot: their session durations are in it. */
        weft__mcp_hub_free(run->cfg.mcp);
        run->cfg.mcp = NULL;
    }
    weft__rt_metrics_run_end(run->tel.metrics, run->tel.metrics_token, r);
    weft__rt_mstore_checkpoint(run->tel.mstore, weft__rt_metrics_events(run->tel.metrics), true);
    weft__rt_progress(run, WEFT_EVENT_RUN_END, NULL, weft_run_status_name(r->status));
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Task runs (`weft worker`)                                                                   */

/* The task run's plan: one completed step per dependency (its result from the context), then
 * the step itself depending on them, nested under the consumer span. */
static weft_err
task_plan(struct run *run, const struct weft__task_run *t, char *err, size_t err_len)
{
    const struct weft__step_task *task = t->task;
    const char *key = NULL;
    const json_t *value = NULL;
    const char **deps = NULL;
    size_t dep_count = 0;
    size_t agent = 0;
    size_t index = 0;
    step_executor kind = EXEC_AGENT;
    weft_err e = WEFT_OK;

    if (!weft__step_executor_parse(task->kind, &kind)) {
        snprintf(err, err_len, "task %s: unknown step kind \"%s\"", task->step_id, task->kind);
        return WEFT_EINVAL;
    }
    if (kind == EXEC_AGENT) {
        agent = weft__rt_find_agent(run, task->agent);
        if (agent == WF_NONE) {
            snprintf(err, err_len, "task %s: workflow %s has no agent \"%s\"", task->step_id,
                     run->cfg.wf->name, task->agent);
            return WEFT_EINVAL;
        }
    }
    deps = weft__calloc(json_object_size(t->context) + 1, sizeof(*deps));
    if (deps == NULL) {
        return WEFT_ENOMEM;
    }
    json_object_foreach((json_t *)t->context, key, value)
    {
        size_t i = 0;
        e = strcmp(key, task->step_id) == 0
                ? WEFT_EINVAL
                : weft__plan_append(&run->ps.plan, key, agent, "", NULL, 0, &i);
        if (e != WEFT_OK) {
            break;
        }
        weft__plan_set_status(&run->ps.plan, i, STEP_COMPLETED);
        run->ps.plan.steps[i].result =
            weft__strdup(json_is_string(value) ? json_string_value(value) : "");
        deps[dep_count++] = run->ps.plan.steps[i].id;
    }
    if (e == WEFT_OK) {
        e = weft__plan_append(&run->ps.plan, task->step_id, agent, task->task, deps, dep_count,
                              &index);
    }
    weft__free(deps);
    if (e != WEFT_OK) {
        snprintf(err, err_len, "task %s: %s", task->step_id,
                 e == WEFT_EINVAL ? "depends on itself" : weft_strerror(e));
        return e;
    }
    {
        struct plan_step *s = &run->ps.plan.steps[index];
        s->executor = kind;
        s->spec = t->spec != NULL ? json_deep_copy(t->spec) : NULL;
        s->attempts = task->attempt > 0 ? task->attempt - 1 : 0;
        if (t->parent != NULL) {
            s->parent_ctx = *t->parent;
        }
    }
    return WEFT_OK;
}

/* The scripts' positions of the run's scripted models: {script path: cursors} (new), or NULL
 * when it has none. What a task message carries to a worker and a result brings back. */
json_t *
weft__eng_cursors_collect(struct run *run)
{
    json_t *out = json_object();

    for (size_t i = 0; out != NULL && i < run->cfg.wf->model_count; i++) {
        const char *script = weft__eng_script_of(run, i);
        json_t *c = NULL;
        if (script == NULL || json_object_get(out, script) != NULL) {
            continue;
        }
        c = weft__llm_scripted_cursors(weft__eng_provider_for(run, i));
        if (c != NULL) {
            json_object_set_new(out, script, c);
        }
    }
    if (out != NULL && json_object_size(out) == 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

/* Move the scripts to the positions in @p in ({script path: cursors}). */
void
weft__eng_cursors_apply(struct run *run, const json_t *in)
{
    for (size_t i = 0; in != NULL && i < run->cfg.wf->model_count; i++) {
        const char *script = weft__eng_script_of(run, i);
        const json_t *c = script != NULL ? json_object_get(in, script) : NULL;
        if (c != NULL) {
            (void)weft__llm_scripted_restore(weft__eng_provider_for(run, i), c);
        }
    }
}

static void
task_outcome(struct run *run, const struct weft__task_run *t, struct weft__task_outcome *out)
{
    const struct plan_step *s = &run->ps.plan.steps[run->ps.plan.count - 1];
    const struct weft_run_result *r = run->tel.result;
    unsigned before = t->task->attempt > 0 ? t->task->attempt - 1 : 0;

    out->is_success = s->status == STEP_COMPLETED;
    out->output = s->result != NULL ? weft__strdup(s->result) : NULL;
    out->error = s->feedback != NULL ? weft__strdup(s->feedback) : NULL;
    out->error_type = s->error_type != NULL ? weft__strdup(s->error_type) : NULL;
    out->details = s->error != NULL ? json_deep_copy(s->error) : NULL;
    out->input_tokens = r->input_tokens;
    out->output_tokens = r->output_tokens;
    out->cost_usd = r->cost_usd;
    out->llm_calls = r->llm_calls;
    out->tool_calls = r->tool_calls;
    out->attempts = s->attempts > before ? s->attempts - before : 0;
    out->cursors = weft__eng_cursors_collect(run);
    out->requests = run->ps.request_count > 0 ? json_array() : NULL;
    for (size_t i = 0; out->requests != NULL && i < run->ps.request_count; i++) {
        const struct rt_request *rq = &run->ps.requests[i];
        char tp[WEFT_TRACEPARENT_LEN + 1] = "";
        (void)weft_traceparent_format(&rq->requester, tp, sizeof(tp));
        json_array_append_new(out->requests, json_pack("{s:s, s:s, s:s}", "agent", rq->agent,
                                                       "query", rq->query, "requester", tp));
    }
}

/* The run's span attributes from the task message (borrowed), as run_start() sets them. */
static void
task_span_attrs(struct run *run, const struct weft__task_run *t)
{
    for (size_t i = 0; t->span_attrs != NULL && i < t->span_attr_count && i <= RUN_MAX_SPAN_ATTRS;
         i++) {
        run->tel.span_attrs[run->tel.span_attr_count++] = t->span_attrs[i];
    }
}

weft_err
weft__execute_task(const struct weft__task_run *t,
                   struct weft__task_outcome *out,
                   char *err,
                   size_t err_len)
{
    struct weft_run_options opts;
    struct engine *eng = NULL;
    struct run *run = NULL;
    weft_err e = WEFT_OK;

    memset(out, 0, sizeof(*out));
    err[0] = '\0';
    if (t != NULL && t->task != NULL && t->task->kind != NULL &&
        strcmp(t->task->kind, "noop") == 0) {
        /* A no-op task (benchmarks, checking a fleet end to end) runs nothing: no workflow,
         * no providers, no workspace, no spans of its own. */
        out->is_success = true;
        out->output = weft__strdup("");
        return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    if (t == NULL || t->wf == NULL || t->task == NULL || t->run_id == NULL) {
        snprintf(err, err_len, "task run: workflow, task and run id are required");
        return WEFT_EINVAL;
    }
    weft__rt_secrets_load(t->wf);
    memset(&opts, 0, sizeof(opts));
    opts.provider = t->provider;
    opts.capture_content = t->capture_content ? 1 : 0;
    opts.abort_flag = t->abort_flag;
    opts.meter = t->meter;
    eng = weft__calloc(1, sizeof(*eng));
    if (eng == NULL ||
        (eng->run.tel.result = weft__calloc(1, sizeof(struct weft_run_result))) == NULL) {
        weft__free(eng);
        return WEFT_ENOMEM;
    }
    run = &eng->run;
    services_init(eng);
    weft__inproc_executor_init(&eng->inproc, run);
    eng->executor = &eng->inproc.base;
    pthread_mutex_init(&eng->lock, NULL);
    pthread_mutex_init(&eng->task_lock, NULL);
    weft__plan_init(&run->ps.plan);
    run->cfg.wf = t->wf;
    run->cfg.opts = &opts;
    run->cfg.capture_content = t->capture_content;
    run->cfg.task_attempt = t->task->attempt;
    run->cfg.task_redeliveries = t->redeliveries;
    snprintf(run->store.run_id, sizeof(run->store.run_id), "%s", t->run_id);
    run->store.session_id = weft__strdup(t->run_id);
    task_span_attrs(run, t);
    e = run->store.session_id != NULL ? weft__eng_setup_providers(run, err, err_len) : WEFT_ENOMEM;
    if (e == WEFT_OK) {
        e = weft__eng_bind_native_tools(run, err, err_len);
    }
    if (e == WEFT_OK) {
        e = weft__eng_setup_workspace(run, err, err_len);
    }
    if (e == WEFT_OK && t->provider != NULL) {
        weft__rt_keys_init(); /* before the task's first span */
        e = weft_provider_get_tracer(t->provider, "weft.runtime", WEFT_VERSION, &run->tel.tracer);
        e = e == WEFT_EDISABLED ? WEFT_OK : e;
    }
    if (e == WEFT_OK && (t->wf->memory.is_skills || t->wf->memory.is_lessons)) {
        e = open_memory(run, err, err_len);
    }
    if (e == WEFT_OK && t->mcp != NULL) {
        run->cfg.mcp = t->mcp; /* the worker's, started once for its tasks */
        run->cfg.is_mcp_borrowed = true;
    } else if (e == WEFT_OK) {
        e = start_mcp(run, t->meter, err, err_len);
    }
    if (e == WEFT_OK) {
        e = task_plan(run, t, err, err_len);
    }
    if (e == WEFT_OK) {
        weft__eng_cursors_apply(run, t->cursors);
        run->tel.metrics = weft__rt_metrics_new_tee(NULL, t->meter, t->wf->name);
        weft__rt_watchdog_start(run); /* the step's own loops: repeated tool calls, budgets */
        run->cfg.started_mono = weft__monotonic_ns();
        if (t->timeout_ms > 0) {
            run->cfg.deadline_mono = run->cfg.started_mono + (uint64_t)t->timeout_ms * 1000000u;
        }
        if (run->ps.plan.steps[run->ps.plan.count - 1].executor == EXEC_AGENT) {
            weft__rt_agent_step(run, run->ps.plan.count - 1);
        } else {
            weft__command_step(run, run->ps.plan.count - 1);
        }
        task_outcome(run, t, out);
    }
    if (e != WEFT_OK && err[0] == '\0') {
        snprintf(err, err_len, "task run: %s", weft_strerror(e));
    }
    weft_run_result_free(run->tel.result);
    weft__eng_teardown(run);
    weft__free(eng);
    return e;
}

void
weft__task_outcome_cleanup(struct weft__task_outcome *out)
{
    weft__free(out->output);
    weft__free(out->error);
    weft__free(out->error_type);
    json_decref(out->details);
    json_decref(out->cursors);
    json_decref(out->requests);
    memset(out, 0, sizeof(*out));
}

weft_err
weft__run_with_executor(const struct weft_workflow *workflow,
                        const struct weft_run_options *options,
                        struct weft__executor *executor,
                        struct weft_run_result **out,
                        char *error,
                        size_t error_len)
{
    static const struct weft_run_options defaults = {.capture_content = -1};
    struct engine *eng = NULL;
    struct run *run = NULL;
    struct weft_run_result *r = NULL;
    char errbuf[512] = "";
    struct weft_span_context resumed_from;
    weft_err err = WEFT_OK;

    memset(&resumed_from, 0, sizeof(resumed_from));
    if (error == NULL || error_len == 0) {
        error = errbuf;
        error_len = sizeof(errbuf);
    }
    error[0] = '\0';
    if (out != NULL) {
        *out = NULL;
    }
    if (workflow == NULL || out == NULL || (executor != NULL && executor->ops == NULL)) {
        snprintf(error, error_len, "workflow and result are required");
        return WEFT_EINVAL;
    }
    /* Before anything can record: every configured secret is scrubbed at ingress. */
    weft__rt_secrets_load(workflow);
    eng = weft__calloc(1, sizeof(*eng));
    r = weft__calloc(1, sizeof(*r));
    if (eng == NULL || r == NULL) {
        weft__free(eng);
        weft__free(r);
        return WEFT_ENOMEM;
    }
    run = &eng->run;
    services_init(eng);
    weft__inproc_executor_init(&eng->inproc, run);
    eng->executor = executor != NULL ? executor : &eng->inproc.base;
    run->cfg.wf = workflow;
    run->cfg.opts = options != NULL ? options : &defaults;
    run->cfg.input = run->cfg.opts->input;
    pthread_mutex_init(&eng->lock, NULL);
    pthread_mutex_init(&eng->task_lock, NULL);
    weft__plan_init(&run->ps.plan);
    run->tel.result = r;
    err = run_setup(run, &resumed_from, error, error_len);
    if (err != WEFT_OK) {
        if (error[0] == '\0') {
            snprintf(error, error_len, "%s", weft_strerror(err));
        }
        weft__eng_teardown(run);
        weft__free(eng);
        weft_run_result_free(r);
        return err;
    }
    run_start(run, &resumed_from);
    execute(run);
    err = run_finish(run, WEFT_OK, error, error_len);
    weft__eng_teardown(run);
    weft__free(eng);
    if (err != WEFT_OK) {
        weft_run_result_free(r);
        return err;
    }
    *out = r;
    return WEFT_OK;
}

weft_err
weft_run(const struct weft_workflow *workflow,
         const struct weft_run_options *options,
         struct weft_run_result **out,
         char *error,
         size_t error_len)
{
    return weft__run_with_executor(workflow, options, NULL, out, error, error_len);
}
