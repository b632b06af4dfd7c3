/* runtime/engine.h - the state of one run, shared by the engine loop (engine.c), agent steps
 * (agent.c), conversational routing (router.c) and span helpers (spans.c).
 *
 * One engine, several policies: engine.c owns the loop (budgets, supervisor decisions,
 * loop-back replans, the circuit breaker); a decision either runs a plan step through
 * agent.c or ends the run. router.c is the decision function of conversational workflows.
 */
#ifndef WEFT_RUNTIME_ENGINE_H
#define WEFT_RUNTIME_ENGINE_H

#include "llm/llm.h"
#include "metrics.h"
#include "plan.h"
#include "state.h"
#include "workflow.h"

#include <pthread.h>
#include <weft/runtime.h>

#define RUN_MAX_REQUESTS 16 /* pending loop-back requests; more are cancelled and traced */
#define RT_END           ((size_t)-1)

/* A loop-back request an agent made with request_agent or replan_on. */
struct rt_request {
    size_t from_step;
    char *agent; /* as the model named it: may be unknown */
    char *query;
    struct weft_span_context requester;
};

/* How a decision was taken (weft.decision.layer). */
typedef enum rt_layer {
    RT_LAYER_RULE = 0,
    RT_LAYER_LLM,
    RT_LAYER_FALLBACK,
    RT_LAYER_COUNTER_LIMIT,
    RT_LAYER_PATTERN,
    RT_LAYER_CIRCUIT_BREAKER,
    RT_LAYER_CORRECTION,
    RT_LAYER_WATCHDOG
} rt_layer;

const char *weft__rt_layer_name(rt_layer layer);

struct rt_mstore;

struct run {
    const struct weft_workflow *wf;
    const struct weft_run_options *opts;
    struct weft_tracer *tracer; /* NULL: nothing traced */
    struct weft_span *root;
    struct rt_state *state;
    uint64_t root_started_ns;        /* when the root span started (durable.c) */
    struct llm_provider **providers; /* one per model (shared where a script is shared) */
    struct llm_provider *replay;     /* --replay: answers every model */
    struct llm_recording *recording;
    const struct tool_def **native; /* per workflow tool: the registry entry of native tools */
    char run_id[72];
    char *session_id;
    const char *input;  /* the request: the options' or, on resume, the stored one */
    char *stored_input; /* owned copy behind input on resume */
    bool is_resumed;
    char *workspace;
    bool capture_content;
    struct plan plan;
    struct rt_request requests[RUN_MAX_REQUESTS];
    size_t request_count;
    size_t requests_dropped;
    json_t *history; /* router: the session's earlier messages */
    json_t *resumed; /* resumed flows: stored steps by id {status, result, attempts, reward} */
    uint64_t started_mono;
    uint64_t deadline_mono; /* 0: none */
    struct weft_run_result *result;
    unsigned corrections;       /* correction attempts so far (valid or not) */
    struct rt_metrics *metrics; /* NULL: no meter */
    uint64_t metrics_token;
    struct rt_mstore *mstore; /* per-run metric snapshots (metrics_store.h); NULL: none */
    const char *last_actor;   /* the previous step's agent, for hand-off counts */
    struct watchdog watchdog;
    /* Flows run steps on worker threads. They share the run under one lock, released only
     * around blocking work (LLM calls, tools), so steps overlap while they wait on I/O and
     * everything else stays as simple as on one thread. Never hold a pointer into the plan
     * across a call that releases the lock: weft__plan_append() may move the steps. */
    pthread_mutex_t lock;
    bool is_parallel;
    struct llm_provider ***worker_providers; /* [worker][model] OpenAI clients, or NULL */
    size_t worker_count;
    size_t decisions_cap;
    size_t verdicts_cap;
    weft_err oom; /* set when recording the result ran out of memory */
};

/* The run lock (no-ops unless the run is parallel). */
void weft__rt_lock(struct run *run);
void weft__rt_unlock(struct run *run);
/* The worker index of the calling thread, or -1 on the engine thread. */
int weft__rt_worker_index(void);
void weft__rt_set_worker_index(int index);

/* The Langfuse prompt the calling thread's agent instructions came from (NULL: none):
 * weft__rt_llm_call() links its chat spans to it (langfuse.observation.prompt.name and .version; a
 * fallback text is marked weft.prompt.is_fallback instead). Borrowed until cleared. */
void weft__rt_set_prompt_link(const char *name, const struct rt_prompt *prompt);

/* Time and budgets. */
bool weft__rt_aborted(const struct run *run);
/* Milliseconds left before @p step_deadline_mono or the run's deadline (whichever is first);
 * UINT32_MAX when neither is set, 0 when passed. */
uint32_t weft__rt_remaining_ms(const struct run *run, uint64_t step_deadline_mono);

/* Count one loop iteration of @p kind (result and metrics). */
void weft__rt_count_loop(struct run *run, weft_loop_kind kind);

/* Progress callback. */
void weft__rt_progress(struct run *run,
                       weft_run_event_kind kind,
                       const struct plan_step *step,
                       const char *detail);

/* Record into the result. */
void weft__rt_add_decision(struct run *run, rt_layer layer, const char *next, const char *reason);
void weft__rt_add_verdict(struct run *run, const char *agent, const char *verdict);

/* One LLM call with its `chat {model}` span under @p parent. @p messages is borrowed.
 * @return as weft__llm_complete(). */
weft_err weft__rt_llm_call(struct run *run,
                           struct weft_span *parent,
                           const char *agent,
                           const char *step_key,
                           llm_purpose purpose,
                           size_t model,
                           const json_t *messages,
                           const json_t *tools,
                           bool json_mode,
                           double temperature,
                           uint64_t step_deadline_mono,
                           struct llm_response *response,
                           struct llm_error *error);

/* Span kinds of DESIGN.md's span model. */
typedef enum rt_span_kind {
    RT_SPAN_WORKFLOW = 0,
    RT_SPAN_PLAN,
    RT_SPAN_AGENT,
    RT_SPAN_CHAT,
    RT_SPAN_TOOL,
    RT_SPAN_REFLECT,
    RT_SPAN_REPLAN,
    RT_SPAN_CORRECT,
    RT_SPAN_LOOP,
    RT_SPAN_FANOUT,
    RT_SPAN_ITEM
} rt_span_kind;

/* Start a span named "{operation} {subject}" with the three vocabularies (gen_ai.operation.name
 * where the GenAI conventions define one, openinference.span.kind, langfuse.observation.type)
 * and the run-wide attributes (session, run id, workflow/trace name). Never NULL. */
struct weft_span *weft__rt_span_start(struct run *run,
                                      rt_span_kind kind,
                                      const char *subject,
                                      struct weft_span *parent,
                                      const struct weft_link_spec *links,
                                      size_t link_count);

/* The same, nested under the span context @p parent when it is valid (flow items), else
 * under the run's root span. */
struct weft_span *weft__rt_span_start_under(struct run *run,
                                            rt_span_kind kind,
                                            const char *subject,
                                            const struct weft_span_context *parent,
                                            const struct weft_link_spec *links,
                                            size_t link_count);

/* A chat span for @p model under @p parent, with gen_ai.provider.name and gen_ai.request.model
 * among its start attributes (both sampling-relevant). Never NULL. */
struct weft_span *weft__span_start_chat(struct run *run,
                                        const char *model,
                                        const char *provider,
                                        struct weft_span *parent);

/* Set a content attribute (prompts, outputs, arguments) only when capture is on. */
void
weft__rt_span_content(struct run *run, struct weft_span *span, const char *key, const char *text);

/* Run plan step @p index of an agent (attempts, tool loop, reflection). Sets the step's final
 * status; loop-back requests land in run->requests. */
void weft__rt_agent_step(struct run *run, size_t index);

/* Conversational routing: choose the route for this turn. Sets *route (index into the
 * router's routes), the layer and the reason; runs the LLM layer under @p decision_span. */
void weft__rt_router_decide(struct run *run,
                            struct weft_span *decision_span,
                            size_t *route,
                            rt_layer *layer,
                            char *reason,
                            size_t reason_len);

/* The evaluator (executor.c). */
typedef enum rt_eval { RT_EVAL_SUCCESS = 0, RT_EVAL_INVALID_OUTPUT, RT_EVAL_FAILURE } rt_eval;

const char *weft__rt_eval_name(rt_eval eval);
/* first-try success 1.0, success after retries 1.5, invalid output -0.5,
 * failure -1.0 - 0.1 * retries. */
double weft__rt_reward(rt_eval eval, unsigned retries);
/* Score step @p index (retries = attempts - 1), add it to the run's reward (replacing an
 * earlier score of the same step) and record it on @p span. */
void weft__rt_evaluate(struct run *run, size_t index, rt_eval eval, struct weft_span *span);

/* Run a command, file_writer or http_call step with its span, evaluation and reward. */
void weft__rt_executor_step(struct run *run, size_t index);

/* Correction mode (correct.c): ask for a corrective plan for failed step @p index and perform
 * the DAG surgery. @return true when the plan was rewired (the step is paused and will be
 * retried after the corrective steps); false when this attempt failed (invalid plan, LLM or
 * store failure: traced, counted). */
bool weft__rt_correct(struct run *run, size_t index);

/* The agent's name, or the executor's ("command", ...) for steps without an agent. */
const char *weft__rt_step_actor(const struct run *run, const struct plan_step *step);

/* The flow engine (flow.c): run the workflow's flow to its end. */
void weft__rt_run_flow(struct run *run, weft_run_status *status, char *reason, size_t reason_len);

/* Budgets (iterations, run timeout, tokens, cost, abort): true with status and reason when one
 * is spent. */
bool
weft__rt_budget_spent(struct run *run, weft_run_status *status, char *reason, size_t reason_len);

/* Create one OpenAI client per worker for the workflow's OpenAI models (logged on failure;
 * workers then share the engine's client). */
weft_err weft__rt_make_worker_providers(struct run *run, size_t workers);

/* Save the scripted providers' cursors for the session (resume continues from them). */
void weft__rt_cursors_save(struct run *run);

/* Save step @p index to the state store (logged on failure: the run goes on). */
void weft__rt_save_step(struct run *run, size_t index);

/* Durability (runtime/durable.c, docs/durability.md). */
/* A step was saved: refresh the owner's heartbeat and call the checkpoint option. */
void weft__rt_checkpoint(struct run *run);
/* A new run: take ownership of its stored row and store the workflow file's hash. */
weft_err weft__rt_run_claim(struct run *run, char *error, size_t error_len);
/* A resumed run: take ownership (refused with WEFT_ESTATE while a live process holds it) and
 * compare the workflow file's hash (WEFT_EINVAL when it changed, unless resume_force). */
weft_err weft__rt_resume_claim(struct run *run, char *error, size_t error_len);
/* The root span exists: keep its name, parent and start for recovery. */
void weft__rt_run_root_saved(struct run *run);

#endif /* WEFT_RUNTIME_ENGINE_H */
