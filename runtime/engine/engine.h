/* runtime/engine/engine.h - the engine's own state, private to engine.c and its parts (engine_*.c:
 * engine_decide.c, the supervisor's decisions; engine_executor.c, steps as the executor's
 * tasks; engine_llm.c, the llm_call service; engine_resume.c, a stored run loaded back;
 * engine_setup.c, providers, workspace and teardown; engine_services.c, the small run
 * services), and nothing else: a ctest check,
 * tests/arch/check_engine_includes.sh, fails when another module includes it.
 *
 * The modules around the engine see a run through run.h: its parts (configuration, persist,
 * telemetry, plan state), the watchdog and the run services. What only the engine touches
 * lives here: the LLM providers behind the llm_call service, the recording, the result's
 * growth and out-of-memory flag, the run lock, the executor and the tasks in flight.
 */
#ifndef WEFT_RUNTIME_ENGINE_H
#define WEFT_RUNTIME_ENGINE_H

#include "runtime/engine/executor.h"
#include "runtime/engine/parallel.h"
#include "runtime/run/run.h"

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

/* --- engine_decide.c: the supervisor's decisions, for the loop in engine.c ---------------- */

struct breaker {
    char last_next[96];
    size_t last_completed;
    size_t last_finished;
    unsigned last_version;
    unsigned retries;
    bool has_tripped;
    char evidence[200]; /* why it tripped */
};

/* The steps one decision starts: the chosen one first, then those ready beside it; and, while
 * steps run on the pool (run_parallel()), the ones that ended and those whose failure waits
 * for correction mode until no step runs. */
struct batch {
    size_t width; /* steps this decision may start at most (parallel_width(), less those running) */
    size_t count;
    size_t steps[WEFT__RT_MAX_PARALLEL];
    size_t ended[WEFT__RT_MAX_PARALLEL];
    size_t failed[WEFT__RT_MAX_PARALLEL];
    size_t failed_count;
    bool is_alone; /* the running step must run alone (the final agent's, a resumed one, a route) */
};

/* Every step of the plan saved, in one commit. */
void weft__eng_save_plan(struct run *run);
/* The initial plan from the supervisor's LLM, validated; false: the run cannot start (why in
 * @p reason). */
bool weft__eng_initial_plan(struct run *run, char *reason, size_t reason_len);
/* Steps that run at once in plan mode (see engine_decide.c). */
size_t weft__eng_parallel_width(const struct run *run);
/* Is @p s the workflow's final agent's step? */
bool weft__eng_is_final_agent(const struct run *run, const struct plan_step *s);
/* One decision: the step to run, RT_END to end, or RT_END - 1 for a no-op route; a step picked
 * as the next ready one brings the steps ready beside it into @p b. */
size_t weft__eng_decide(struct run *run,
                        struct breaker *br,
                        bool *is_failed,
                        struct batch *b,
                        char *reason,
                        size_t reason_len);
/* A conversational turn: route, run the route's agent, then end. */
size_t weft__eng_decide_router(struct run *run, bool *is_done, char *reason, size_t reason_len);

/* --- engine_executor.c: steps as tasks of the run's executor ---------------------------- */

/* The run service execute_step (run.h): run plan step @p index through the executor. */
void weft__eng_execute_step(void *ctx, size_t index);

/* The run_nested service, and weft_compose()'s run entry (compose_entry.c): a run inside
 * another (a team agent, a flow's workflow node, the architect's composition) is an ordinary
 * weft_run() of its own, so that the steps never call the engine themselves. @p ctx unused.
 * @return as weft_run(). */
weft_err weft__eng_run_nested(void *ctx,
                              const struct weft_workflow *workflow,
                              const struct weft_run_options *options,
                              struct weft_run_result **out,
                              char *error,
                              size_t error_len);

/* --- engine_llm.c: the llm_call run service -------------------------------------------- */

/* The provider that answers model @p model for the calling thread (a replay's, a worker's own
 * OpenAI client, or the run's). */
struct llm_provider *weft__eng_provider_for(struct run *run, size_t model);
/* The run service llm_call (run.h): one call with its `chat {model}` span, the run lock
 * released around the network call. */
weft_err weft__eng_llm_call(void *ctx,
                            const struct run_llm_call *call,
                            struct llm_response *response,
                            struct llm_error *error);

/* --- engine_resume.c: a stored run loaded back ------------------------------------------- */

/* Load the stored run into @p run for `weft resume`; fills @p link with the previous trace's
 * root. @return WEFT_OK, or an error with @p error saying why. */
weft_err weft__eng_resume_load(struct run *run,
                               struct weft_span_context *link,
                               char *error,
                               size_t error_len);

/* --- engine_setup.c: before the first decision, after the last --------------------- */
/* Each is documented at its definition. */

weft_err weft__eng_make_run_id(char out[24]);
weft_err weft__eng_setup_workspace(struct run *run, char *error, size_t error_len);
weft_err weft__eng_make_worker_providers(void *ctx, size_t workers);
weft_err weft__eng_setup_providers(struct run *run, char *error, size_t error_len);
weft_err weft__eng_bind_native_tools(struct run *run, char *error, size_t error_len);
const char *weft__eng_script_of(const struct run *run, size_t i);
void weft__eng_cursors_restore(struct run *run);
const char *weft__eng_provider_name(void *ctx, size_t model);
void weft__eng_cursors_save(void *ctx);
void weft__eng_teardown(struct run *run);

/* --- engine_services.c: the small run services (run.h) ----------------------------- */
/* Each is documented at its definition; engine.c wires them into the run's services. */

void weft__eng_lock(void *ctx);
void weft__eng_unlock(void *ctx);
void weft__eng_set_parallel(void *ctx, bool is_parallel);
void weft__eng_cond_wait(void *ctx, pthread_cond_t *cond);
uint64_t weft__eng_now_mono(void *ctx);
void weft__eng_count_loop(void *ctx, weft_loop_kind kind);
void weft__eng_progress(void *ctx,
                        weft_run_event_kind kind,
                        const struct plan_step *step,
                        const char *detail);
void weft__eng_add_decision(void *ctx, rt_layer layer, const char *next, const char *reason);
void weft__eng_add_verdict(void *ctx, const char *agent, const char *verdict);
void weft__eng_save_step(void *ctx, size_t index);

/* --- engine.c, for its parts ------------------------------------------------------------ */

/* The scripts' positions of the run's scripted models: {script path: cursors} (new), or NULL
 * when it has none. What a task message carries to a worker and a result brings back. */
json_t *weft__eng_cursors_collect(struct run *run);
/* Move the scripts to the positions in @p in ({script path: cursors}). */
void weft__eng_cursors_apply(struct run *run, const json_t *in);

#endif /* WEFT_RUNTIME_ENGINE_H */
