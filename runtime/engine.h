/* runtime/engine.h - the engine's own state, private to engine.c (and nothing else: a ctest
 * check, tests/arch/check_engine_includes.sh, fails when another module includes it).
 *
 * The modules around the engine see a run through run.h: its parts (configuration, persist,
 * telemetry, plan state), the watchdog and the run services. What only the engine touches
 * lives here: the LLM providers behind the llm_call service, the recording, the result's
 * growth and out-of-memory flag, the run lock, the executor and the tasks in flight.
 */
#ifndef WEFT_RUNTIME_ENGINE_H
#define WEFT_RUNTIME_ENGINE_H

#include "executor.h"
#include "run.h"

#include <pthread.h>

#define ENGINE_MAX_IN_FLIGHT 256 /* tasks in flight at once (flows run at most 256 workers) */

/* A task handed to the executor whose result has not been applied yet. */
struct engine_task {
    uint64_t task_id; /* 0: free slot */
    size_t step;
    bool is_done;
    /* Its result is in the plan (under the run lock): whichever thread polled it in applied
     * it, together with the other results that came with it (engine.c apply_results()). */
    bool is_applied;
    step_status status;
    char *output; /* owned copies of the result */
    char *error;
    char *error_type;
    json_t *details;
    json_t *cursors;
    json_t *requests;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    size_t llm_calls;
    size_t tool_calls;
    unsigned redeliveries;
};

struct engine {
    struct run run; /* first: the services' context is &run, and ENG() goes back */
    struct run_services services;
    struct llm_provider **providers; /* one per model (shared where a script is shared) */
    struct llm_provider *replay;     /* --replay, or a replay's provider: answers every model */
    struct weft_span_context origin; /* a replay's original root span (its link) */
    struct llm_recording *recording;
    struct llm_provider ***worker_providers; /* [worker][model] OpenAI clients, or NULL */
    size_t worker_count;
    size_t decisions_cap;
    size_t verdicts_cap;
    weft_err oom; /* set when recording the result ran out of memory */
    /* Flows run steps on worker threads. They share the run under one lock, released only
     * around blocking work (LLM calls, tools), so steps overlap while they wait on I/O and
     * everything else stays as simple as on one thread. */
    pthread_mutex_t lock;
    bool is_parallel;
    uint64_t output_ended_ns; /* when the step whose result is the run's output ended */
    /* Steps the loop saw end (step_finish()): progress for the circuit breaker even when their
     * results were applied before an earlier decision (a remote executor's grouped results). */
    size_t steps_finished;
    struct weft__inproc_executor inproc;
    struct weft__executor *executor; /* &inproc.base or the caller's */
    /* Guards tasks[] and tasks_in_flight: results may arrive on any thread that polls while
     * the run lock is released (a remote executor's waits). */
    pthread_mutex_t task_lock;
    uint64_t next_task_id;
    struct engine_task tasks[ENGINE_MAX_IN_FLIGHT];
    size_t tasks_in_flight;
};

/* The engine of a run (the run is its first member). */
#define ENG(run) ((struct engine *)(void *)(run))

#endif /* WEFT_RUNTIME_ENGINE_H */
