/* runtime/fork.h - `weft fork RUN --from STEP`: a new run that reuses the original run's results
 * for the steps before STEP and runs STEP and everything after it live (docs/replay.md).
 *
 * Which steps are reused: in the original's plan order, a step before STEP that completed and
 * does not depend (directly or through other steps) on STEP or on a step after it. Every other
 * step runs live. The fork's plan is the workflow's own plan when it has one (so a changed
 * workflow's fixed steps are used), else the original's stored plan (an LLM made it; no planner
 * call is made again). Flows take the reused steps' results the way a resumed flow does.
 *
 * Thread-safety: used on the run's engine thread only, before its steps start.
 */
#ifndef WEFT_RUNTIME_FORK_H
#define WEFT_RUNTIME_FORK_H

#include "run.h"

#include <jansson.h>

struct rt_fork {
    char run_id[72]; /* the original */
    char *from;      /* the step it forks from */
    json_t *rows;    /* the original's steps in plan order: [{id, actor, task, ...}] */
    json_t *reused;  /* step id -> {status, result, attempts, reward, actor, executor} */
};

/* Load the original for run @p run (its options name it): refuses an unknown run, a run still
 * running and an unknown step; fills @p link with the original's root span (zero when it was not
 * traced). @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL (@p error says why), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: sets run->store.fork (freed by weft__rt_fork_free()). */
weft_err
weft__rt_fork_load(struct run *run, struct weft_span_context *link, char *error, size_t error_len);

/* An LLM-planned workflow's fork: the original's stored steps become the plan (all pending).
 * @return false when out of memory or a stored step names an agent the workflow lacks. */
bool weft__rt_fork_plan(struct run *run);

/* Mark the plan's reused steps completed with the original's results (saved), and give each a
 * span that says so (weft.fork.reused=true) under the root. Flows: their results reach the flow
 * through run->store.resumed. Counts them in the result's reused_steps. */
void weft__rt_fork_apply(struct run *run);

void weft__rt_fork_free(struct rt_fork *fork);

#endif /* WEFT_RUNTIME_FORK_H */
