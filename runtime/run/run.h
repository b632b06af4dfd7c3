/* runtime/run/run.h - one run as the runtime's modules see it: four cohesive parts and the run
 * services, the only way back into the engine.
 *
 * The parts (each one struct, one job):
 * - struct run_config: what the run was asked to do (workflow, options, input, workspace,
 *   capture flag, native tools, start time and deadline). Set up by the engine before the
 *   first step and read-only afterwards, so any thread may read it without the run lock.
 * - struct run_persist: where the run is kept (state database, run and session ids, the
 *   resumed steps, the conversation history). Written only under the run lock.
 * - struct run_telemetry: what the run reports (tracer, root span, meter, metric snapshots and
 *   the result being filled in: totals, reward, output). Spans go through spans.h and metrics
 *   through metrics.h, both over this part; neither calls the engine.
 * - struct run_plan_state: the plan being executed and the loop-back requests, corrections and
 *   hand-off bookkeeping that change it. Guarded by the run lock.
 * The stuck-loop watchdog keeps its own state (watchdog.h) next to them.
 *
 * The run services (struct run_services) are what the engine provides to the modules around
 * it (agent.c, correct.c, flow.c, router.c, command_step.c, watchdog.c): an LLM call with its
 * `chat` span, saving a step, progress events, the run lock, the clock, result bookkeeping
 * (loops, decisions, verdicts), budgets and running a step through the executor (executor.h).
 * A module calls the rt_*() wrappers below, which dispatch through run->svc; router.c takes
 * the services table itself, so a test can drive it with scripted answers and no engine.
 *
 * Only engine.c knows the engine's own state (providers, recording, the result's growth, the
 * lock itself, the executor): engine.h is included by engine.c alone, and a ctest check
 * (tests/arch/check_engine_includes.sh) keeps it that way.
 */
#ifndef WEFT_RUNTIME_RUN_H
#define WEFT_RUNTIME_RUN_H

#include "runtime/llm/llm.h"
#include "runtime/observe/metrics.h"
#include "runtime/observe/watchdog.h"
#include "runtime/state/state.h"
#include "runtime/workflow/plan.h"
#include "runtime/workflow/workflow.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <weft/runtime.h>

#define RUN_MAX_REQUESTS   16 /* pending loop-back requests; more are cancelled and traced */
#define RT_END             ((size_t)-1)
#define RUN_MAX_SPAN_ATTRS 16 /* options.span_attrs kept; the root span's id comes on top */

struct rt_embedder;
struct rt_fork;
struct rt_mstore;
struct rt_prompt;
struct rt_replay;
struct tool_def;
struct weft__mcp_hub;

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

/* What the run was asked to do; read-only once the first step starts. */
struct run_config {
    const struct weft_workflow *wf;
    const struct weft_run_options *opts;
    const char *input;  /* the request: the options' or, on resume, the stored one */
    char *stored_input; /* owned copy behind input on resume */
    char *workspace;
    bool capture_content;
    const struct tool_def **native; /* per workflow tool: the registry entry of native tools */
    struct weft__mcp_hub *mcp;      /* the workflow's MCP servers (mcp/hub.h); NULL: none */
    bool is_mcp_borrowed;           /* mcp belongs to the caller (a worker's): not freed here */
    uint64_t started_mono;
    uint64_t deadline_mono; /* 0: none */
    /* A worker's task run (docs/distributed.md): the task's attempt and the deliveries of its
     * message before this one, set on every execute_tool span so repeated side effects show.
     * 0 and 0 for an ordinary run. */
    unsigned task_attempt;
    int64_t task_redeliveries;
    /* A replay (`weft replay`, replay.h): the original's calls that answer this run's; NULL for
     * any other run. Set before the first step; it has its own lock. Owned. */
    struct rt_replay *replay;
};

/* Where the run is kept. */
struct run_persist {
    struct rt_state *state;
    /* Where skill memory lives when it is not the run's state: a worker's task run opens the
     * shared store (WEFT_STATE_URL, or its WEFT_HOME) for it alone; NULL otherwise. Owned. */
    struct rt_state *memory;
    /* Skill memory's embeddings client (memory.c), made on first use; freed with the run. */
    struct rt_embedder *embedder;
    bool is_embedder_broken; /* it could not be made (its key's variable unset): text only */
    bool is_embed_warned;    /* the run's one warning about the endpoint was logged */
    char run_id[72];
    char *session_id;
    bool is_resumed;
    json_t *resumed;      /* resumed flows: stored steps by id {status, result, attempts, reward} */
    json_t *history;      /* router: the session's earlier messages */
    struct rt_fork *fork; /* a fork (fork.h): the original and the reused steps; else NULL */
};

/* What the run reports. */
struct run_telemetry {
    struct weft_tracer *tracer; /* NULL: nothing traced */
    struct weft_span *root;
    uint64_t root_started_ns;       /* when the root span started (durable.c) */
    struct weft_run_result *result; /* totals, reward, output: filled in as the run goes */
    struct rt_metrics *metrics;     /* NULL: no meter */
    uint64_t metrics_token;
    struct rt_mstore *mstore; /* per-run metric snapshots (metrics_store.h); NULL: none */
    /* What every span of the run carries besides weft's own (spans.c): options.span_attrs,
     * then options.root_span_id_attr with root_span_hex once the root has started. Filled in
     * by run_start() before any other span starts and read-only after, so the steps' threads
     * read it without the lock. The values borrow the options' strings and root_span_hex. A
     * worker's task run (weft__execute_task) fills it from its task message instead (the
     * orchestrator's, root id included), borrowing the message's strings. */
    struct weft_attr span_attrs[RUN_MAX_SPAN_ATTRS + 1];
    size_t span_attr_count;
    char root_span_hex[2 * WEFT_SPAN_ID_SIZE + 1]; /* "" until the root has started */
};

/* The plan and what changes it. Never hold a pointer into the plan across a call that releases
 * the run lock: weft__plan_append() may move the steps. */
struct run_plan_state {
    struct plan plan;
    struct rt_request requests[RUN_MAX_REQUESTS];
    size_t request_count;
    size_t requests_dropped;
    unsigned corrections;   /* correction attempts so far (valid or not) */
    const char *last_actor; /* the previous step's agent, for hand-off counts */
    /* A fork's answer for the forked step's first LLM call (options.fork_answer): agent.c
     * sets it just before that call, llm_call takes it (both under the run lock). */
    const char *answer_override;
    bool is_answer_overridden; /* the fork's answer was given (once per run) */
    /* The budget that ended the run, as svc_budget_spent() found it (the workflow's name for
     * it: "timeout_s", "max_iterations", "max_tokens", "max_cost_usd"); NULL: none. */
    const char *spent_budget;
};

/* The arguments of one LLM call (see run_services.llm_call). All borrowed for the call. */
struct run_llm_call {
    struct weft_span *parent; /* the `chat` span's parent */
    const char *agent;
    const char *step_key; /* flow steps: the step id; NULL: the agent */
    llm_purpose purpose;
    size_t model; /* index into the workflow's models */
    const json_t *messages;
    const json_t *tools; /* NULL: none */
    bool json_mode;
    double temperature;          /* < 0: the model's */
    uint64_t step_deadline_mono; /* 0: only the run's deadline */
};

/* The signature of a run's entry: weft_run() with a context first (compose.c's runner). */
typedef weft_err (*weft__run_entry_fn)(void *ctx,
                                       const struct weft_workflow *workflow,
                                       const struct weft_run_options *options,
                                       struct weft_run_result **out,
                                       char *error,
                                       size_t error_len);

/* What the engine provides to the modules around it. Every function gets @p ctx first. A
 * module documents which of them it calls (router.c: llm_call only); the engine fills all.
 * Thread notes: in a parallel flow every call but lock/cond_wait is made with the run lock
 * held, and llm_call releases it around the network call itself. */
struct run_services {
    void *ctx;
    /* One LLM call with its `chat {model}` span under call->parent, recorded and counted.
     * @return as weft__llm_complete(); *response is the caller's to clean up on WEFT_OK. */
    weft_err (*llm_call)(void *ctx,
                         const struct run_llm_call *call,
                         struct llm_response *response,
                         struct llm_error *error);
    /* Save plan step @p index to the state store (failures are logged: the run goes on). */
    void (*save_step)(void *ctx, size_t index);
    /* Report a progress event (the run options' callback). */
    void (*progress)(void *ctx,
                     weft_run_event_kind kind,
                     const struct plan_step *step,
                     const char *detail);
    /* The run lock: no-ops unless the run is parallel. */
    void (*lock)(void *ctx);
    void (*unlock)(void *ctx);
    /* Parallel flows: make lock/unlock real (true) or no-ops again (false), and wait on
     * @p cond with the lock held. */
    void (*set_parallel)(void *ctx, bool is_parallel);
    void (*cond_wait)(void *ctx, pthread_cond_t *cond);
    /* The clock (CLOCK_MONOTONIC nanoseconds) deadlines are measured on. */
    uint64_t (*now_mono)(void *ctx);
    /* Result bookkeeping. */
    void (*count_loop)(void *ctx, weft_loop_kind kind);
    void (*add_decision)(void *ctx, rt_layer layer, const char *next, const char *reason);
    void (*add_verdict)(void *ctx, const char *agent, const char *verdict);
    /* Budgets (watchdog, abort, timeout, iterations, tokens, cost): true with status and reason
     * when one is spent. */
    bool (*budget_spent)(void *ctx, weft_run_status *status, char *reason, size_t reason_len);
    /* One OpenAI client per worker for a parallel flow (logged on failure). */
    weft_err (*make_worker_providers)(void *ctx, size_t workers);
    /* Save the scripted providers' cursors for the session. */
    void (*cursors_save)(void *ctx);
    /* The provider name (gen_ai.provider.name) that answers model @p model's calls, or NULL. */
    const char *(*provider_name)(void *ctx, size_t model);
    /* Run plan step @p index to its final status through the run's executor (executor.h). */
    void (*execute_step)(void *ctx, size_t index);
    /* A nested run (team agent, flow workflow node, architect): as weft_run(), called with the
     * run lock released. *out is the caller's to free with weft_run_result_free(). */
    weft__run_entry_fn run_nested;
};

/* Teams an architect agent composed during this run (architect.h): agents beyond the
 * workflow's, numbered from wf->agent_count on, that the supervisor routes to like any. Each
 * slot is a one-agent workflow whose agent runs the team; slots never move, so an agent
 * pointer stays valid until the run ends. Run lock held to read or add. */
#define RUN_MAX_TEAMS 8

struct run_roster {
    struct weft_workflow *teams[RUN_MAX_TEAMS];
    size_t count;
};

/* One run: the parts, the watchdog and the services back into the engine. */
struct run {
    struct run_config cfg;
    struct run_persist store;
    struct run_telemetry tel;
    struct run_plan_state ps;
    struct run_roster roster;
    struct watchdog watchdog;
    const struct run_services *svc;
};

/* Wrappers: the modules' calls into the engine, through run->svc. */
static inline void
weft__rt_lock(struct run *run)
{
    run->svc->lock(run->svc->ctx);
}

static inline void
weft__rt_unlock(struct run *run)
{
    run->svc->unlock(run->svc->ctx);
}

static inline void
weft__rt_progress(struct run *run,
                  weft_run_event_kind kind,
                  const struct plan_step *step,
                  const char *detail)
{
    run->svc->progress(run->svc->ctx, kind, step, detail);
}

static inline void
weft__rt_save_step(struct run *run, size_t index)
{
    run->svc->save_step(run->svc->ctx, index);
}

static inline void
weft__rt_count_loop(struct run *run, weft_loop_kind kind)
{
    run->svc->count_loop(run->svc->ctx, kind);
}

static inline void
weft__rt_add_decision(struct run *run, rt_layer layer, const char *next, const char *reason)
{
    run->svc->add_decision(run->svc->ctx, layer, next, reason);
}

static inline void
weft__rt_add_verdict(struct run *run, const char *agent, const char *verdict)
{
    run->svc->add_verdict(run->svc->ctx, agent, verdict);
}

static inline bool
weft__rt_budget_spent(struct run *run, weft_run_status *status, char *reason, size_t reason_len)
{
    return run->svc->budget_spent(run->svc->ctx, status, reason, reason_len);
}

static inline void
weft__rt_cursors_save(struct run *run)
{
    run->svc->cursors_save(run->svc->ctx);
}

static inline void
rt_execute_step(struct run *run, size_t index)
{
    run->svc->execute_step(run->svc->ctx, index);
}

/* One LLM call with its `chat {model}` span under @p parent. @p messages is borrowed.
 * @return as weft__llm_complete(). */
static inline weft_err
weft__rt_llm_call(struct run *run,
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
                  struct llm_error *error)
{
    struct run_llm_call call = {parent,   agent, step_key,  purpose,     model,
                                messages, tools, json_mode, temperature, step_deadline_mono};
    return run->svc->llm_call(run->svc->ctx, &call, response, error);
}

/* Helpers over the parts (run.c). */

/* The worker index of the calling thread, or -1 on the engine thread. */
int weft__rt_worker_index(void);
void weft__rt_set_worker_index(int index);

/* The Langfuse prompt the calling thread's agent instructions came from (NULL: none): the LLM
 * call links its chat spans to it (langfuse.observation.prompt.name and .version; a fallback
 * text is marked weft.prompt.is_fallback instead). Borrowed until cleared. */
void weft__rt_set_prompt_link(const char *name, const struct rt_prompt *prompt);
/* The calling thread's prompt link (NULL: none), its name in *name. */
const struct rt_prompt *weft__prompt_link(const char **name);

/* Instructions for a model call that is not an agent's own step (the supervisor's planning and
 * routing, reflection, the conversational router): @p text, or the Langfuse prompt @p ref
 * resolved into @p held (without the run lock) and linked to the calling thread's generations
 * until weft__rt_instructions_end(). A prompt that cannot be had (no cache, no fallback) gives
 * @p builtin, marked as a fallback on the generations, with a warning: these callers have a
 * sensible default, so the run goes on. @return the text to use, valid until the end call.
 * Ownership: @p held is the caller's (zeroed before the call). */
const char *weft__rt_instructions_begin(struct run *run,
                                        const char *text,
                                        const struct rt_prompt_ref *ref,
                                        const char *builtin,
                                        struct rt_prompt *held);
void weft__rt_instructions_end(struct rt_prompt *held);

/* Has the caller asked the run to stop (the options' abort flag)? */
bool weft__rt_aborted(const struct run *run);
/* Milliseconds left before @p step_deadline_mono or the run's deadline (whichever is first);
 * UINT32_MAX when neither is set, 0 when passed. */
uint32_t weft__rt_remaining_ms(const struct run *run, uint64_t step_deadline_mono);
/* The run's agents: the workflow's, then the teams composed during the run (run_roster).
 * weft__rt_agent() is NULL for an index beyond them; weft__rt_find_agent() WF_NONE for an
 * unknown (or NULL) name. Run lock held. */
size_t weft__rt_agent_count(const struct run *run);
const struct wf_agent *weft__rt_agent(const struct run *run, size_t index);
size_t weft__rt_find_agent(const struct run *run, const char *name);
/* May agent @p from request agent @p to (a run agent index)? Its can_request says so, or it is
 * an architect and @p to a team composed during the run. */
bool weft__rt_may_request(const struct run *run, const struct wf_agent *from, size_t to);

/* Must @p step run in this process whatever the run's executor? An architect's step and a
 * composed team's do: both need this run's roster. */
bool weft__rt_step_is_local(const struct run *run, const struct plan_step *step);

/* The agent's name, or the step kind's ("command", ...) for steps without an agent. */
const char *weft__rt_step_actor(const struct run *run, const struct plan_step *step);

/* On a worker's task run: the task's attempt and redeliveries on @p span (execute_tool spans),
 * so a side effect repeated by a redelivery is visible. No-op for ordinary runs. */
void weft__rt_span_task_attempt(const struct run *run, struct weft_span *span);

/* Queue a loop-back request of step @p step for @p agent (as the model named it; validated
 * when applied) with @p query, linked to @p requester (may be NULL). A full queue or no memory
 * counts it in requests_dropped. Errors: none. */
void weft__rt_request_add(struct run *run,
                          size_t step,
                          const char *agent,
                          const char *query,
                          const struct weft_span_context *requester);

#endif /* WEFT_RUNTIME_RUN_H */
