/* runtime/engine/parallel.h - a pool of threads that run plan steps while the engine keeps deciding
 * (parallel.c). */
#ifndef WEFT_RUNTIME_PARALLEL_H
#define WEFT_RUNTIME_PARALLEL_H

#include "runtime/run/run.h"

#include <stddef.h>
#include <weft/runtime.h>

/* Steps that run at once at most (the engine's tasks in flight bound it too). */
#define WEFT__RT_MAX_PARALLEL 256

struct weft__rt_pool;

/* Put @p run in parallel mode, take its lock for the caller, and make a pool of at most
 * @p width threads (created as steps need them; worker indexes 0..width-1, so each has its own
 * OpenAI clients). The caller holds the run lock from here until weft__rt_pool_stop(), except
 * inside weft__rt_pool_wait().
 * @return WEFT_OK, WEFT_EINVAL (width 0 or above WEFT__RT_MAX_PARALLEL), WEFT_ENOMEM; on error
 * nothing changed and *out is NULL. Ownership: borrows @p run; free with weft__rt_pool_stop(). */
weft_err weft__rt_pool_start(struct run *run, size_t width, struct weft__rt_pool **out);

/* Steps running now (handed over and not yet returned by weft__rt_pool_wait()). */
size_t weft__rt_pool_running(const struct weft__rt_pool *pool);

/* Hand plan step @p step to an idle thread; there must be room (running < width). When the
 * system refuses a thread, the step runs on the caller's thread before this returns, and is
 * reported as finished by the next wait like any other. Run lock held. */
void weft__rt_pool_submit(struct weft__rt_pool *pool, size_t step);

/* The steps that finished since the last call, at most @p cap of them into @p steps, in plan
 * order; when none has and some are running, waits (releasing the run lock) until one does.
 * @return how many were written; 0 only when nothing runs. Run lock held. */
size_t weft__rt_pool_wait(struct weft__rt_pool *pool, size_t *steps, size_t cap);

/* Wait for the running steps (their results are in the plan, unreported), stop the threads,
 * release the run lock and leave parallel mode. NULL is a no-op. */
void weft__rt_pool_stop(struct weft__rt_pool *pool);

#endif /* WEFT_RUNTIME_PARALLEL_H */
