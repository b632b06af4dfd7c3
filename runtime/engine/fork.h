/* runtime/engine/fork.h - `weft fork RUN --from STEP`: a new run that reuses the original run's
 * results for the steps before STEP and runs STEP and everything after it live (docs/replay.md).
 *
 * The fork starts from the original's plan as it stood when STEP started: corrections made
 * after that are undone, and steps a replan added at the request of a step that re-runs are left
 * out (the re-run asks for them again, or not). Which steps are reused: a step that completed
 * before STEP in plan order or ended before STEP started, and does not depend (directly or
 * through other steps) on a step that re-runs. Every other step runs live. The fork's plan is
 * the workflow's own plan when it has one (so a changed workflow's fixed steps are used) and the
 * steps it lacks that replans and corrections had added by then, else that stored plan (an LLM
 * made it; no planner call is made again). Flows take the reused
 * steps' results the way a resumed flow does. Scripted models answer from where the original's
 * were when STEP started (cursors).
 *
 * Thread-safety: used on the run's engine thread only, before its steps start.
 */
#ifndef WEFT_RUNTIME_FORK_H
#define WEFT_RUNTIME_FORK_H

#include "runtime/run/run.h"

#include <jansson.h>

/* The task of the final agent's step the supervisor appends when the plan is done (engine.c):
 * a fork leaves it out when it came after the forked step, the re-run appends it again. */
#define WEFT__RT_FINAL_TASK "Synthesize the final answer from the results so far."

struct rt_fork {
    char run_id[72];     /* the original */
    char *from;          /* the step it forks from */
    json_t *rows;        /* the original's plan when `from` started, in order: [{id, actor, ...}] */
    json_t *reused;      /* step id -> {status, result, attempts, reward, actor, executor} */
    json_t *cursors;     /* "who/purpose" -> the original's LLM calls of that queue before `from` */
    uint64_t decided_ns; /* when the original decided to start `from` (UINT64_MAX: never) */
    json_t *origins;     /* the original is a fork: [{run, before}] its originals, and when */
};

/* Load the original for run @p run (its options name it): refuses an unknown run, a run still
 * running and an unknown step; fills @p link with the original's root span (zero when it was not
 * traced). @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL (@p error says why), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: sets run->store.fork (freed by weft__rt_fork_free()). */
weft_err
weft__rt_fork_load(struct run *run, struct weft_span_context *link, char *error, size_t error_len);

/* The fork's plan from the original's (as it stood when the forked step started), all pending:
 * the whole of it for an LLM-planned workflow; after a workflow's own plan, the steps that plan
 * lacks (those replans and corrections had added by then).
 * @return false when out of memory or a stored step names an agent the workflow lacks. */
bool weft__rt_fork_plan(struct run *run);

/* Mark the plan's reused steps completed with the original's results (saved), and give each a
 * span that says so (weft.fork.reused=true) under the root. Flows: their results reach the flow
 * through run->store.resumed. Counts them in the result's reused_steps. */
void weft__rt_fork_apply(struct run *run);

void weft__rt_fork_free(struct rt_fork *fork);

#endif /* WEFT_RUNTIME_FORK_H */
