/* runtime/engine/engine_executor.c - the executor path of the engine: every plan step goes to the
 * run's executor (executor.h: in-process threads, or RabbitMQ workers) as a task carrying the
 * step, its dependencies' results and the scripts' positions, and its result is delivered back
 * into the plan, the state and the step's span, within the run's deadline and its
 * max_in_flight. Private to the engine (engine.h); the run services' execute_step is
 * weft__eng_execute_step().
 */
#define _GNU_SOURCE /* strcasestr, realpath */

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
/* The executor: every step goes to it as a task (executor.h)                                  */

static struct engine_task *
task_slot(struct engine *eng, uint64_t task_id)
{
    for (size_t i = 0; i < ENGINE_MAX_IN_FLIGHT; i++) {
        if (eng->tasks[i].task_id == task_id) {
            return &eng->tasks[i];
        }
    }
    return NULL;
}

static void
task_release(struct engine *eng, struct engine_task *t)
{
    pthread_mutex_lock(&eng->task_lock);
    weft__free(t->output);
    weft__free(t->error);
    weft__free(t->error_type);
    json_decref(t->details);
    json_decref(t->cursors);
    json_decref(t->requests);
    memset(t, 0, sizeof(*t));
    eng->tasks_in_flight--;
    pthread_mutex_unlock(&eng->task_lock);
}

/* The completion callback: results are matched to their task by id; a result for a task that
 * is not (or no longer) waited for is dropped. */
static void
task_done(void *user_data, const struct weft__step_result *result)
{
    struct engine *eng = user_data;
    struct engine_task *t = NULL;

    pthread_mutex_lock(&eng->task_lock);
    t = result->task_id != 0 ? task_slot(eng, result->task_id) : NULL;
    if (t == NULL || t->is_done) {
        pthread_mutex_unlock(&eng->task_lock);
        WEFT_LOG(WEFT_LOG_WARN, "executor %s: result for task %llu ignored (not waited for)",
                 eng->executor->name, (unsigned long long)result->task_id);
        return;
    }
    t->status = result->status == STEP_COMPLETED ? STEP_COMPLETED : STEP_FAILED;
    if (!eng->executor->writes_plan) {
        t->output = result->output != NULL ? weft__strdup(result->output) : NULL;
        t->error = result->error != NULL ? weft__strdup(result->error) : NULL;
        t->error_type = result->error_type != NULL ? weft__strdup(result->error_type) : NULL;
        t->details = result->details != NULL ? json_deep_copy(result->details) : NULL;
        t->cursors = result->cursors != NULL ? json_deep_copy(result->cursors) : NULL;
        t->requests = result->requests != NULL ? json_deep_copy(result->requests) : NULL;
        t->input_tokens = result->input_tokens;
        t->output_tokens = result->output_tokens;
        t->cost_usd = result->cost_usd;
        t->llm_calls = result->llm_calls;
        t->tool_calls = result->tool_calls;
        t->redeliveries = result->redeliveries;
    }
    t->is_done = true;
    pthread_mutex_unlock(&eng->task_lock);
}

static bool
task_is_done(struct engine *eng, const struct engine_task *t)
{
    bool is_done = false;

    pthread_mutex_lock(&eng->task_lock);
    is_done = t->is_done;
    pthread_mutex_unlock(&eng->task_lock);
    return is_done;
}

/* The dependencies' results as a JSON object text (free with free()), for the task. */
static char *
task_context(const struct run *run, const struct plan_step *s)
{
    json_t *deps = json_object();
    char *text = NULL;

    for (size_t d = 0; deps != NULL && d < s->depends_count; d++) {
        size_t j = weft__plan_find(&run->ps.plan, s->depends_on[d]);
        if (j != (size_t)-1 && run->ps.plan.steps[j].result != NULL) {
            json_object_set_new(deps, s->depends_on[d], json_string(run->ps.plan.steps[j].result));
        }
    }
    text = deps != NULL ? json_dumps(deps, JSON_COMPACT) : NULL;
    json_decref(deps);
    return text;
}

/* For executors that do not write the plan: the step starts as an in-process one would. A
 * reclaimed task (dispatched before a resume) keeps its attempt. */
static void
step_started(struct run *run, size_t index, bool is_reclaim)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    char detail[64];

    weft__plan_step_set_status(&run->ps.plan, s, STEP_IN_PROGRESS);
    s->attempts += is_reclaim ? 0 : 1;
    s->is_dispatched = true;
    s->started_ns = weft__now_ns();
    /* The dispatched mark is committed without waiting for the disk (a WAL flush, which on
     * PostgreSQL is most of a save's time): lost in a crash of the database's machine, the step
     * reads as it was before and runs again on resume, as a step in flight does anyway; the
     * step's end is an ordinary commit, which makes this one durable first. */
    if (run->store.state != NULL) {
        (void)weft__state_begin_lazy(run->store.state);
    }
    weft__rt_save_step(run, index);
    if (run->store.state != NULL) {
        (void)weft__state_commit(run->store.state);
    }
    snprintf(detail, sizeof(detail),
             is_reclaim ? "attempt %u, dispatched before the resume" : "attempt %u", s->attempts);
    weft__rt_progress(run, WEFT_EVENT_STEP_START, s, detail);
}

/* What a remote executor reported beyond status, output and error: usage into the run's
 * totals, the failure's type and details for correction, the scripts' positions, the
 * redeliveries. */
static void
step_apply_remote(struct run *run, size_t index, struct engine_task *t)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    struct weft_run_result *r = run->tel.result;

    r->input_tokens += t->input_tokens;
    r->output_tokens += t->output_tokens;
    r->cost_usd += t->cost_usd;
    r->llm_calls += t->llm_calls;
    r->tool_calls += t->tool_calls;
    if (t->error_type != NULL) {
        weft__free(s->error_type);
        s->error_type = t->error_type;
        t->error_type = NULL;
    }
    if (t->details != NULL) {
        json_decref(s->error);
        s->error = t->details;
        t->details = NULL;
    }
    if (t->redeliveries > s->retries) {
        s->retries = t->redeliveries;
    }
    weft__eng_cursors_apply(run, t->cursors);
    for (size_t i = 0; i < json_array_size(t->requests); i++) {
        const json_t *rq = json_array_get(t->requests, i);
        const char *tp = json_string_value(json_object_get(rq, "requester"));
        struct weft_span_context requester;
        memset(&requester, 0, sizeof(requester));
        if (tp != NULL && tp[0] != '\0') {
            (void)weft_traceparent_parse(tp, NULL, &requester);
        }
        weft__rt_request_add(run, index, json_string_value(json_object_get(rq, "agent")),
                             json_string_value(json_object_get(rq, "query")), &requester);
    }
}

/* The step ends with @p status; @p output and @p error are taken (NULL: none). */
static void
step_ended(struct run *run, size_t index, step_status status, char *output, char *error)
{
    struct plan_step *s = &run->ps.plan.steps[index];

    weft__plan_step_set_status(&run->ps.plan, s, status);
    s->is_dispatched = false;
    s->ended_ns = weft__now_ns();
    weft__free(s->result);
    s->result = output;
    if (error != NULL || status == STEP_FAILED) {
        weft__free(s->feedback);
        s->feedback = error;
    } else {
        weft__free(error);
    }
    weft__rt_evaluate(run, index, status == STEP_COMPLETED ? RT_EVAL_SUCCESS : RT_EVAL_FAILURE,
                      NULL);
    if (s->executor == EXEC_AGENT) {
        /* The worker counted it in its own meter; the run's collaboration metrics count it here. */
        weft__rt_metrics_agent(run->tel.metrics, weft__rt_step_actor(run, s),
                               status == STEP_COMPLETED,
                               (double)(s->ended_ns - s->started_ns) / 1e9);
    }
    weft__rt_save_step(run, index);
    weft__rt_progress(run, WEFT_EVENT_STEP_END, s, weft__step_status_name(s->status));
}

/* Deliver results until @p t has its own: the run's deadline and abort flag bound the wait. */
static weft_err
task_await(struct run *run, struct engine_task *t)
{
    struct weft__executor *ex = ENG(run)->executor;

    while (!task_is_done(ENG(run), t)) {
        uint32_t left = weft__rt_remaining_ms(run, 0);
        weft_err err = WEFT_OK;
        if (ex->ops->poll == NULL) {
            return WEFT_ESTATE; /* it promised a result inside submit and gave none */
        }
        if (left == 0 || weft__rt_aborted(run)) {
            return WEFT_ETIMEDOUT;
        }
        /* Other steps of a parallel batch submit and apply results meanwhile. */
        weft__rt_unlock(run);
        err = ex->ops->poll(ex, left < 1000 ? left : 1000);
        weft__rt_lock(run);
        if (err != WEFT_OK && err != WEFT_ETIMEDOUT) {
            return err;
        }
    }
    return WEFT_OK;
}

_Static_assert(WEFT__TASK_SPAN_ATTRS_MAX == RUN_MAX_SPAN_ATTRS + 1,
               "a task carries what run->tel.span_attrs holds");

/* What an executor working on a copy needs besides the step: the run, the task's UUID, the
 * command parameters, the scripts' positions (*cursors, new), where its spans nest, the time
 * left, the content-capture choice and the attributes every span of the run carries. */
static void
task_remote_fields(struct run *run,
                   const struct plan_step *s,
                   struct weft__step_task *task,
                   json_t **cursors)
{
    *cursors = weft__eng_cursors_collect(run);
    task->run_id = run->store.run_id;
    task->task_uuid = s->task_uuid;
    task->spec = s->spec;
    task->cursors = *cursors;
    if (weft_span_context_is_valid(&s->parent_ctx)) {
        task->parent = s->parent_ctx;
    } else {
        weft_span_context_of(run->tel.root, &task->parent);
    }
    task->timeout_ms = run->cfg.deadline_mono != 0 ? weft__rt_remaining_ms(run, 0) : 0;
    task->capture_content = run->cfg.capture_content;
    task->span_attrs = run->tel.span_attr_count > 0 ? run->tel.span_attrs : NULL;
    task->span_attr_count = run->tel.span_attr_count;
}

/* Apply every result that came and is not in the plan yet, this thread's and those of other
 * threads' tasks, in one transaction: one durable commit for all the results one poll brought
 * (group commit), instead of one each. Each step is saved whole (status, output, cursors) before
 * anything reads it: the run lock is held throughout, and the commit comes before it is
 * released. Run lock held. */
static void
apply_results(struct run *run)
{
    struct engine *eng = ENG(run);
    struct engine_task *ready[ENGINE_MAX_IN_FLIGHT];
    size_t n = 0;

    pthread_mutex_lock(&eng->task_lock);
    for (size_t i = 0; i < ENGINE_MAX_IN_FLIGHT; i++) {
        struct engine_task *t = &eng->tasks[i];
        if (t->task_id != 0 && t->is_done && !t->is_applied) {
            ready[n++] = t;
        }
    }
    pthread_mutex_unlock(&eng->task_lock);
    if (n == 0) {
        return;
    }
    if (run->store.state != NULL) {
        (void)weft__state_begin(run->store.state);
    }
    for (size_t i = 0; i < n; i++) {
        struct engine_task *t = ready[i];
        step_apply_remote(run, t->step, t);
        step_ended(run, t->step, t->status, t->output, t->error);
        t->output = NULL;
        t->error = NULL;
        t->is_applied = true;
    }
    if (run->store.state != NULL) {
        (void)weft__state_commit(run->store.state);
    }
}

/* Make room for one more task in flight (the executor's max_in_flight). */
static weft_err
task_room(struct run *run)
{
    struct engine *eng = ENG(run);
    struct weft__executor *ex = eng->executor;
    size_t max = ex->max_in_flight == 0 ? 1 : ex->max_in_flight;

    for (;;) {
        weft_err err = WEFT_ELIMIT;
        size_t in_flight = 0;
        pthread_mutex_lock(&eng->task_lock);
        in_flight = eng->tasks_in_flight;
        pthread_mutex_unlock(&eng->task_lock);
        if (in_flight < max && in_flight < ENGINE_MAX_IN_FLIGHT) {
            break;
        }
        if (ex->ops->poll == NULL || weft__rt_aborted(run) || weft__rt_remaining_ms(run, 0) == 0) {
            return WEFT_ELIMIT;
        }
        weft__rt_unlock(run);
        err = ex->ops->poll(ex, 1000);
        weft__rt_lock(run);
        if (err != WEFT_OK && err != WEFT_ETIMEDOUT) {
            return err;
        }
    }
    return WEFT_OK;
}

/* The execute_step service: plan step @p index handed to the executor as a task, waited for,
 * and (for executors that do not write the plan) its result applied to the step. */
void
weft__eng_execute_step(void *ctx, size_t index)
{
    struct run *run = ctx;
    struct engine *eng = ENG(run);
    const struct plan_step *s = &run->ps.plan.steps[index];
    /* An architect and the teams it composed live in this run's memory (run_roster): they run
     * here whatever the executor. */
    struct weft__executor *ex = weft__rt_step_is_local(run, s) ? &eng->inproc.base : eng->executor;
    struct weft__step_task task;
    struct engine_task *t = NULL;
    char *context = NULL;
    json_t *cursors = NULL;
    char why[160];
    weft_err err = task_room(run);

    if (err == WEFT_OK) {
        pthread_mutex_lock(&eng->task_lock);
        t = task_slot(eng, 0);
        if (t != NULL) {
            t->task_id = ++eng->next_task_id;
            t->step = index;
            eng->tasks_in_flight++;
        }
        pthread_mutex_unlock(&eng->task_lock);
    }
    if (t == NULL) {
        snprintf(why, sizeof(why), "executor %s: no room for another task (%s)", ex->name,
                 weft_strerror(err != WEFT_OK ? err : WEFT_ELIMIT));
        step_ended(run, index, STEP_FAILED, NULL, weft__strdup(why));
        return;
    }
    /* Serialised only for an executor that works on a copy (in process, it would be unused). */
    context = ex->writes_plan ? NULL : task_context(run, s);
    memset(&task, 0, sizeof(task));
    task.task_id = t->task_id;
    /* A task in flight when the orchestrator stopped goes out again as the same attempt: the
     * result a worker published meanwhile (or will) answers it (docs/distributed.md). */
    task.is_reclaim = !ex->writes_plan && s->is_dispatched && s->attempts > 0;
    task.attempt = task.is_reclaim ? s->attempts : s->attempts + 1;
    task.step = index;
    task.step_id = s->id;
    task.kind = weft__step_executor_name(s->executor);
    task.agent = weft__rt_step_actor(run, s);
    task.task = s->task;
    task.context = context != NULL ? context : "{}";
    if (!ex->writes_plan) {
        task_remote_fields(run, s, &task, &cursors);
        step_started(run, index, task.is_reclaim);
    } else {
        run->ps.plan.steps[index].is_dispatched = false; /* resumed in process: runs here */
    }
    err = ex->ops->submit(ex, &task, task_done, eng);
    free(context);
    json_decref(cursors);
    if (err == WEFT_OK) {
        err = task_await(run, t);
    }
    if (err != WEFT_OK) {
        snprintf(why, sizeof(why), "executor %s gave no result: %s", ex->name, weft_strerror(err));
        WEFT_LOG(WEFT_LOG_WARN, "step %s: %s", run->ps.plan.steps[index].id, why);
        t->is_applied = true; /* a late result is not applied by another thread either */
        step_ended(run, index, STEP_FAILED, NULL, weft__strdup(why));
    } else if (!ex->writes_plan) {
        apply_results(run); /* this task's result, unless another thread's poll applied it */
    }
    task_release(eng, t);
}
