/* runtime/parallel.h - ready plan steps run at once (parallel.c). */
#ifndef WEFT_RUNTIME_PARALLEL_H
#define WEFT_RUNTIME_PARALLEL_H

#include "run.h"

#include <stddef.h>

/* Steps one batch runs at most (the engine's tasks in flight bound it too). */
#define WEFT__RT_MAX_PARALLEL 256

/* Hand plan steps @p steps[0..count) to the run's executor at once, one thread each (the
 * caller's thread runs the first), and return when all have ended. Called on the engine's
 * thread, not in parallel mode; the run is in parallel mode (its lock taken by each thread)
 * for the call. A thread the system refuses runs its step on the caller's thread after the
 * first. @p count is at most WEFT__RT_MAX_PARALLEL. Ownership: borrows everything. */
void weft__rt_run_parallel(struct run *run, const size_t *steps, size_t count);

#endif /* WEFT_RUNTIME_PARALLEL_H */
