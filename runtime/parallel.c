/* runtime/parallel.c - plan steps that are ready at the same moment run at once.
 *
 * The supervisor picks one ready step per decision; with a width above 1 (engine.c
 * parallel_width()) the steps ready beside it start with it, one thread each, the way the flow
 * engine runs its nodes. The threads share the run under its lock, which the executor releases
 * around LLM calls, tools and a remote executor's waits, so the steps overlap while they wait
 * on I/O and everything else stays as simple as on one thread. Whatever changes the plan's
 * shape (correction mode, loop-back requests, the watchdog's routes) happens after the batch,
 * on the engine's thread.
 *
 * Threads are created per batch and joined before it returns rather than kept in a pool: a
 * batch lasts as long as its slowest step (LLM calls take seconds), so creating a thread (tens
 * of microseconds) is noise, and nothing outlives the batch.
 */
#include "parallel.h"

#include <pthread.h>
#include <stdbool.h>

struct job {
    struct run *run;
    size_t step;
    int index; /* the thread's worker index: its own OpenAI clients (engine.c provider_for) */
    pthread_t thread;
    bool is_started;
};

static void *
job_main(void *arg)
{
    struct job *job = arg;

    weft__rt_set_worker_index(job->index);
    weft__rt_lock(job->run);
    rt_execute_step(job->run, job->step); /* releases the lock around blocking work */
    weft__rt_unlock(job->run);
    return NULL;
}

void
weft__rt_run_parallel(struct run *run, const size_t *steps, size_t count)
{
    struct job jobs[WEFT__RT_MAX_PARALLEL];
    int prev_index = weft__rt_worker_index();

    if (count == 0) {
        return;
    }
    if (count > WEFT__RT_MAX_PARALLEL) {
        count = WEFT__RT_MAX_PARALLEL;
    }
    run->svc->set_parallel(run->svc->ctx, true);
    weft__rt_lock(run);
    for (size_t i = 1; i < count; i++) {
        jobs[i].run = run;
        jobs[i].step = steps[i];
        jobs[i].index = (int)i;
        jobs[i].is_started = pthread_create(&jobs[i].thread, NULL, job_main, &jobs[i]) == 0;
    }
    weft__rt_set_worker_index(0);
    rt_execute_step(run, steps[0]);
    for (size_t i = 1; i < count; i++) {
        if (!jobs[i].is_started) {
            rt_execute_step(run, steps[i]);
        }
    }
    weft__rt_unlock(run);
    for (size_t i = 1; i < count; i++) {
        if (jobs[i].is_started) {
            pthread_join(jobs[i].thread, NULL);
        }
    }
    weft__rt_set_worker_index(prev_index);
    run->svc->set_parallel(run->svc->ctx, false);
}
