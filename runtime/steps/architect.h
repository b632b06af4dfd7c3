/* runtime/steps/architect.h - an architect agent's step: the live half of the architect
 * (docs/architect.md). The step's task is the goal; weft_compose() designs a team with the
 * agent's model and instructions (its run nests under the step's span), the accepted team is
 * registered for the rest of the run as an agent the supervisor routes to like any
 * (run_roster), and a request for it with the goal is queued, so the team runs next as its
 * own step under the supervisor. Teams composed inside a team nest the same way, one level
 * less deep each time (wf_architect.max_depth). */
#ifndef WEFT_RUNTIME_ARCHITECT_H
#define WEFT_RUNTIME_ARCHITECT_H

#include "runtime/run/run.h"

/* Run plan step @p index of architect agent @p agent to its final status: completed with a
 * note naming the team and its file, or failed with why no team came out (every design
 * rejected, a name already taken, no room for another team). Run lock held; released while
 * the architect designs. */
void weft__rt_architect_step(struct run *run, size_t index, const struct wf_agent *agent);

/* On resume: the teams composed for run @p run_id (the state store's teams table) before
 * @p before_ns registered again, in the order they were composed, so its stored steps find their
 * agents (a fork: the original's teams composed before the forked step started; those composed
 * later are composed again live). A team whose file is gone is logged (its steps then fail to
 * resume, naming the agent). Run lock held. */
void weft__rt_architect_restore(struct run *run, const char *run_id, uint64_t before_ns);

#endif /* WEFT_RUNTIME_ARCHITECT_H */
