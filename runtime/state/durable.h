/* runtime/state/durable.h - durability (durable.c, docs/durability.md): the run's owner lease, the
 * checkpoint at each saved step, the workflow file's hash checked on resume. Uses the persist
 * and telemetry parts of the run. */
#ifndef WEFT_RUNTIME_DURABLE_H
#define WEFT_RUNTIME_DURABLE_H

#include "runtime/run/run.h"

/* A step was saved: refresh the owner's heartbeat and call the checkpoint option. */
void weft__rt_checkpoint(struct run *run);
/* A new run: take ownership of its stored row and store the workflow file's hash. */
weft_err weft__rt_run_claim(struct run *run, char *error, size_t error_len);
/* A resumed run: take ownership (refused with WEFT_ESTATE while a live process holds it) and
 * compare the workflow file's hash (WEFT_EINVAL when it changed, unless resume_force). */
weft_err weft__rt_resume_claim(struct run *run, char *error, size_t error_len);
/* The root span exists: keep its name, parent and start for recovery. */
void weft__rt_run_root_saved(struct run *run);

#endif /* WEFT_RUNTIME_DURABLE_H */
