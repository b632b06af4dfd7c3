/* runtime/steps/subrun.h - another workflow run as one step of this run: a flow node with
 * "workflow", or an agent with "workflow" (a team). */
#ifndef WEFT_RUNTIME_SUBRUN_H
#define WEFT_RUNTIME_SUBRUN_H

#include "runtime/run/run.h"

/* Run @p subwf as plan step @p index: a nested weft_run() whose input is the step's task and
 * its dependencies' results, whose root span nests under @p parent (NULL or invalid: the step's
 * place in the trace, else the run's root), with this run's options (tracing, state, workspace,
 * session, tools, content capture, abort flag) and the run lock released while it runs. The
 * step ends completed with the sub-run's output, or failed with its reason; its tokens, cost
 * and calls add to this run's; the evaluator rewards it and it is saved. The caller counts the
 * attempt. Run lock held. */
void weft__rt_run_subworkflow(struct run *run,
                              size_t index,
                              const struct weft_workflow *subwf,
                              const struct weft_span_context *parent);

#endif /* WEFT_RUNTIME_SUBRUN_H */
