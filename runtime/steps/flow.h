/* runtime/steps/flow.h - the flow engine (flow.c). */
#ifndef WEFT_RUNTIME_FLOW_H
#define WEFT_RUNTIME_FLOW_H

#include "runtime/run/run.h"

/* Run the workflow's flow to its end: steps go to the run's executor through the run services
 * (run_services.execute_step) from a pool of worker threads. */
void weft__rt_run_flow(struct run *run, weft_run_status *status, char *reason, size_t reason_len);

#endif /* WEFT_RUNTIME_FLOW_H */
