/* runtime/steps/agent.h - one agent step (agent.c): attempts, the tool loop, loop-back requests and
 * reflection, reaching the engine only through the run services (run.h). */
#ifndef WEFT_RUNTIME_AGENT_H
#define WEFT_RUNTIME_AGENT_H

#include "runtime/run/run.h"

/* Run plan step @p index of an agent (attempts, tool loop, reflection). Sets the step's final
 * status; loop-back requests land in run->ps.requests. In a parallel flow the run lock is held
 * on entry and released only around LLM and tool calls. */
void weft__rt_agent_step(struct run *run, size_t index);

/* For steps that are not an LLM agent's (teams, architects): the step's invoke_agent span for
 * attempt @p attempt (attempts counted, span context kept, progress and watchdog told), and
 * its end (status, error type when it did not complete, agent metrics, progress). Run lock
 * held. */
struct weft_span *weft__rt_agent_attempt_start(struct run *run,
                                               size_t index,
                                               const struct wf_agent *agent,
                                               unsigned attempt);
void weft__rt_agent_step_end(struct run *run,
                             size_t index,
                             const struct wf_agent *agent,
                             struct weft_span *span,
                             const char *error_type);

#endif /* WEFT_RUNTIME_AGENT_H */
