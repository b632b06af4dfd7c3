/* runtime/engine/executor.c - the in-process executor: the executor interface (executor.h) over
 * agent.c and command_step.c, running each task on the calling thread.
 *
 * It shares the run's memory, so a step writes its own status, result, spans and saved row as
 * it always has; the result handed back is read from the plan after the step ran.
 */
#include "runtime/engine/executor.h"
#include "runtime/steps/agent.h"
#include "runtime/steps/command_step.h"

static weft_err
inproc_submit(struct weft__executor *base,
              const struct weft__step_task *task,
              weft__step_done_fn done,
              void *user_data)
{
    struct weft__inproc_executor *ex = (struct weft__inproc_executor *)base;
    struct run *run = ex->run;
    struct weft__step_result result;
    const struct plan_step *s = NULL;

    if (task->step >= run->ps.plan.count) {
        return WEFT_EINVAL;
    }
    if (run->ps.plan.steps[task->step].executor == EXEC_AGENT) {
        weft__rt_agent_step(run, task->step);
    } else {
        weft__command_step(run, task->step);
    }
    /* Read after the step: appends during it may have moved the plan. */
    s = &run->ps.plan.steps[task->step];
    result.task_id = task->task_id;
    result.status = s->status;
    result.output = s->result;
    result.error = s->feedback;
    done(user_data, &result);
    return WEFT_OK;
}

static const struct weft__executor_ops inproc_ops = {inproc_submit, NULL, NULL, NULL};

void
weft__inproc_executor_init(struct weft__inproc_executor *ex, struct run *run)
{
    ex->base.ops = &inproc_ops;
    ex->base.name = "in_process";
    ex->base.max_in_flight = 256; /* one per flow worker at most */
    ex->base.writes_plan = true;
    ex->run = run;
}
