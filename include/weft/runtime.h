/* include/weft/runtime.h - load a workflow file and run it: the supervisor engine with its
 * policies (plan-and-execute, LLM routing, loop-back replanning, three-layer conversational
 * routing, circuit breaker, tri-state reflection, budgets), traced in DESIGN.md's span model.
 *
 * A workflow is immutable once loaded and may be shared by concurrent runs. A run executes on
 * the calling thread; its spans go to the provider given in the options (exporters run on
 * their own threads, so a run never waits on the network for telemetry).
 *
 * Thread-safety:
 * - struct weft_workflow: immutable after weft_workflow_load(); share it freely.
 * - weft_run(): reentrant; each call owns its run. The abort flag may be raised from any
 *   thread or a signal handler.
 * - struct weft_run_result: immutable once returned.
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include <signal.h>
#include <weft/metrics.h>
#include <weft/tool.h>
#include <weft/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

struct weft_workflow;

/** One problem found in a workflow file. */
struct weft_diag {
    char *file;    /**< the file (as given) */
    char *path;    /**< JSON path, e.g. "agents[2].reflection.max_retries"; "" for the root */
    char *message; /**< what was expected, e.g. "expected integer >= 0" */
    int line;      /**< 1-based line for JSON syntax errors; 0 when unknown */
    int column;    /**< 1-based column for JSON syntax errors; 0 when unknown */
};

/** Every problem found, in document order. Zero-initialise before use. */
struct weft_diags {
    struct weft_diag *items;
    size_t count;
    size_t dropped; /**< problems beyond the first 256, counted but not kept */
};

/** Free the diagnostics and zero the struct. NULL is a no-op.
 * Errors: none. Ownership: frees what @p diags holds, not @p diags itself. */
WEFT_API void weft_diags_cleanup(struct weft_diags *diags);

/** Format diagnostic @p diag as "file:line:col: path: message" (line and column only when
 * known) into @p buf. @return @p buf.
 * Errors: none (truncated to @p len). Ownership: writes into the caller's @p buf. */
WEFT_API const char *weft_diag_format(const struct weft_diag *diag, char *buf, size_t len);

/** Load and validate the workflow file at @p path (JSON; see docs/workflow.md). Every error
 * is collected, not only the first: unknown keys, wrong types, values out of range, unknown
 * agents, models or tools, dependency cycles in the initial plan, unreadable script files.
 * @param diags receives every problem (may be NULL); cleared first.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_ENOTFOUND (no such file), WEFT_EIO,
 * WEFT_EPARSE (invalid: see @p diags), WEFT_ENOMEM. *out is NULL on failure.
 * Ownership: caller owns *out; free with weft_workflow_free(). */
WEFT_API weft_err weft_workflow_load(const char *path,
                                     struct weft_workflow **out,
                                     struct weft_diags *diags);

/** The workflow's name. Ownership: borrowed until weft_workflow_free().
 * Errors: none. */
WEFT_API const char *weft_workflow_name(const struct weft_workflow *workflow);

struct weft_sampling_policy; /* include/weft/sampling.h */

/** The workflow's tail-sampling policy (its "sampling"), or NULL when it has none.
 * Ownership: borrowed until weft_workflow_free(). Errors: none. */
WEFT_API const struct weft_sampling_policy *
weft_workflow_sampling(const struct weft_workflow *workflow);

/** The workflow's agents as text for people (`weft validate`): one line per agent with what it
 * is (an LLM agent with its model and tools, an MCP server's agent, a team with its file and
 * agents, recursively, an architect with its limits and where its teams go).
 * @return new text (free with weft_workflow_text_free()), or NULL when out of memory.
 * Ownership: caller owns the result. Errors: none beyond memory. */
WEFT_API char *weft_workflow_describe(const struct weft_workflow *workflow);

/** Free text from weft_workflow_describe(). NULL is a no-op.
 * Errors: none. Ownership: takes @p text. */
WEFT_API void weft_workflow_text_free(char *text);

/** Override one simple field of a loaded workflow (`weft fork --set KEY=VALUE`). Keys:
 * "agent.NAME.model" (VALUE names one of the workflow's models) and
 * "agent.NAME.instructions" (VALUE is the new text; a Langfuse prompt reference is dropped).
 * Call it before the workflow is shared with any run.
 * @return WEFT_OK; WEFT_EINVAL (NULL argument, unknown key, agent or model: @p error says
 * which, and which keys exist); WEFT_ENOMEM. The workflow is unchanged on error.
 * Ownership: copies @p value; borrows the rest for the call. */
WEFT_API weft_err weft_workflow_set(struct weft_workflow *workflow,
                                    const char *key,
                                    const char *value,
                                    char *error,
                                    size_t error_len);

/** Free a workflow. NULL is a no-op.
 * Errors: none. Ownership: takes @p workflow (frees it). */
WEFT_API void weft_workflow_free(struct weft_workflow *workflow);

/** How a run ended. */
typedef enum weft_run_status {
    WEFT_RUN_COMPLETED = 0,        /**< the route reached end with every step done */
    WEFT_RUN_FAILED = 1,           /**< a step failed, or no valid plan could be made */
    WEFT_RUN_BUDGET_EXHAUSTED = 2, /**< iterations, tokens or cost ran out */
    WEFT_RUN_TIMED_OUT = 3,        /**< the run's wall-clock budget ran out */
    WEFT_RUN_ABORTED = 4,          /**< the abort flag was raised */
    WEFT_RUN_STUCK = 5             /**< the watchdog found a stuck loop and its policy (break,
                                        fail) ended the run early: steps never ran */
} weft_run_status;

/** "completed", "failed", "budget_exhausted", "timed_out", "aborted", "stuck". Never NULL.
 * Stored runs may also read "running" (in progress) or "interrupted" (its process died).
 * Errors: none. Ownership: returns a static string. */
WEFT_API const char *weft_run_status_name(weft_run_status status);

/** Kinds of loop the engine counts (also the metrics' loop kind label). */
typedef enum weft_loop_kind {
    WEFT_LOOP_REPLAN = 0,     /**< a loop-back replan appended a step */
    WEFT_LOOP_REFLECTION = 1, /**< a REJECTED verdict re-ran an agent */
    WEFT_LOOP_CLARIFICATION = 2,
    WEFT_LOOP_CIRCUIT_BREAKER = 3, /**< a route repeated without progress */
    WEFT_LOOP_FLOW = 4,
    WEFT_LOOP_CORRECTION = 5
} weft_loop_kind;

#define WEFT_LOOP_KIND_COUNT 6

/** "replan", "reflection", "clarification", "circuit_breaker", "flow", "correction".
 * Never NULL. Errors: none. Ownership: returns a static string. */
WEFT_API const char *weft_loop_kind_name(weft_loop_kind kind);

/** Progress events, in order. */
typedef enum weft_run_event_kind {
    WEFT_EVENT_RUN_START = 0,
    WEFT_EVENT_DECISION = 1,   /**< the supervisor chose: detail is "layer: next (reason)" */
    WEFT_EVENT_STEP_START = 2, /**< an agent attempt starts: detail is "attempt N" */
    WEFT_EVENT_STEP_END = 3,   /**< detail is the step status */
    WEFT_EVENT_LLM_CALL = 4,   /**< an LLM call ended: detail is the model */
    WEFT_EVENT_TOOL_CALL = 5,  /**< a tool call ended: detail is the tool */
    WEFT_EVENT_VERDICT = 6,    /**< a reflection verdict: detail is the verdict */
    WEFT_EVENT_RUN_END = 7,    /**< detail is the run status */
    /** An MCP tool call in flight reported progress: detail is "mcp SERVER TOOL: P% MESSAGE"
     * (or the raw progress value when the server gives no total); step_id is NULL. */
    WEFT_EVENT_TOOL_PROGRESS = 8
} weft_run_event_kind;

/** One progress event. Every pointer is borrowed for the duration of the callback. */
struct weft_run_event {
    weft_run_event_kind kind;
    const char *run_id;
    const char *step_id; /**< NULL outside a step */
    const char *agent;   /**< NULL outside a step */
    const char *detail;  /**< see weft_run_event_kind; never NULL */
    size_t iteration;    /**< supervisor decisions so far */
    size_t steps_done;
    size_t steps_total;
    uint64_t elapsed_ns;
    int64_t input_tokens; /**< run totals so far */
    int64_t output_tokens;
    double cost_usd;
};

/** Receives progress events on the run's thread; must not call back into the run. */
typedef void (*weft_run_progress_fn)(const struct weft_run_event *event, void *user_data);

/** Run options. Zero-initialise; NULL options mean all defaults. */
struct weft_run_options {
    /** Where spans go; NULL means nothing is traced (the run still works). Borrowed. */
    struct weft_provider *provider;
    const char *input;      /**< the user's request / message; may be NULL */
    const char *session_id; /**< conversation id; NULL means the run id */
    /** Write every LLM exchange to this file in the script format (see docs/workflow.md). */
    const char *record_path;
    /** Answer every LLM call from this script (a recording) instead of the network. */
    const char *replay_path;
    /** Directory the file and command tools are confined to; NULL means the workflow's
     * "workspace", else $WEFT_HOME/workspaces/<run id>. Created when missing. */
    const char *workspace;
    /** State store (runs, steps, session messages): a SQLite file path, or a PostgreSQL
     * connection URI (postgresql://... or postgres://..., docs/distributed.md); NULL means
     * $WEFT_STATE_URL when set, else $WEFT_HOME/state.db (WEFT_HOME defaults to ./.weft). */
    const char *state_path;
    const struct weft_tools *tools; /**< native tools agents may list; borrowed */
    /** 1 records message content on spans (after redaction), 0 never, -1 (or any other
     * value) lets the workflow's capture_content or WEFT_CAPTURE_CONTENT=1 decide. */
    int capture_content;
    weft_run_progress_fn progress;
    void *progress_user_data;
    /** When non-NULL and it becomes non-zero, the run stops at the next check (between
     * decisions, LLM rounds and tool calls) with status aborted. */
    const volatile sig_atomic_t *abort_flag;
    /** Continue the stored run with this id instead of starting a new one (`weft resume`):
     * completed steps are kept, a step that was in progress runs again, the run keeps its id
     * and session, and its new trace links to the previous one. The workflow must be the one
     * the run was started with. */
    const char *resume_run_id;
    /** Nest the run's spans under this span (an embedding program's own span, or the step
     * that runs a sub-workflow); NULL starts a new trace. Borrowed for the call. */
    const struct weft_span_context *parent_context;
    /** Collaboration metrics go to this meter (include/weft/metrics.h); NULL records none.
     * Borrowed for the call. */
    struct weft_meter *meter;
    /** The end user the run acts for: user.id on every span (Langfuse's user). NULL: none. */
    const char *user_id;
    /** Labels of the run: weft.run.tags (a string array) on every span (Langfuse's trace tags).
     * At most 16 are kept. Borrowed for the call. */
    const char *const *tags;
    size_t tag_count;
    /** Called on the run's thread each time a step has ended and been saved to the state
     * database (a checkpoint), e.g. to flush the local span store so that the spans of saved
     * steps survive a crash (`weft run` does; see docs/durability.md). NULL: none. It should
     * return quickly (bound any wait) and must not call back into the run. */
    void (*checkpoint)(void *user_data);
    void *checkpoint_user_data;
    /** With resume_run_id: continue even when the workflow file's bytes changed since the run
     * started (its hash differs). Without it such a resume fails with WEFT_EINVAL. */
    bool resume_force;
    /** Plan steps whose dependencies are met run at once, up to this many (1 to 256); 0
     * means the workflow's supervisor.max_parallel, else 1 with the in-process executor and
     * the remote executor's max-in-flight with `--executor amqp`. Steps chosen by an LLM
     * router (supervisor.route_with_llm) and the final agent's step always run alone. */
    unsigned max_parallel;
    /** Replay the stored run with this id (a run id, a unique prefix, or "last") as a new run
     * (`weft replay`, docs/replay.md): every LLM call is answered from the run's stored
     * exchanges and every tool call (native, MCP, command steps) from its stored tool results;
     * nothing goes to the network and no tool runs. Each request is compared with the one the
     * original made at the same position; the first difference stops the replay (status
     * aborted) and the result's replay report names it. Excludes record_path, replay_path,
     * resume_run_id and fork_run_id. */
    const char *replay_run_id;
    /** Fork the stored run with this id (or a unique prefix, or "last") as a new run
     * (`weft fork`): the steps before fork_from_step that completed are reused (their stored
     * results, no LLM or tool call) and fork_from_step with everything after it runs live
     * with this workflow. The original must have ended. Requires fork_from_step. */
    const char *fork_run_id;
    /** The step id a fork runs live from; must be a step of the original run. */
    const char *fork_from_step;
    /** A fork: fork_from_step's task replaced with this text (`weft fork --set
     * step.ID.task=TEXT`); NULL keeps the original's. Requires fork_run_id. */
    const char *fork_task;
    /** A fork: fork_from_step's first LLM call is answered with this text instead of asking
     * the model (`weft fork --set step.ID.answer=TEXT`). The exchange is stored with
     * "override": true and the call's span says weft.fork.answer_override=true. A scripted
     * model's answer for that call is still taken (and dropped), so its later answers stay
     * where they were. NULL: the model answers. Requires fork_run_id. */
    const char *fork_answer;
    /** The workflow was loaded from a stored run's snapshot written under this directory
     * (weft_run_snapshot_load()): its files are named as the run had them, without this
     * prefix, wherever the run records a file (its workflow path, the scripts' cursors that
     * a resume continues, its own snapshot). NULL: files are named as they are. */
    const char *snapshot_root;
    /** Tail sampling (include/weft/sampling.h): decide at the run's end whether its trace is
     * kept; wins over the workflow's "sampling". NULL: the workflow's policy, if any. The
     * decision goes on the root span (weft.sampling.decision, weft.sampling.rule) for the run
     * buffers of weft_tail_wrap() to follow; a nested run (a local parent_context) is decided
     * with its parent's trace, not on its own. Borrowed for the call. */
    const struct weft_sampling_policy *sampling;
    /** Decide nothing: the workflow's "sampling" is ignored (every trace kept whole). */
    bool is_sampling_off;
    /** Extra attributes set on the run's root span (invoke_workflow) when it starts, after
     * weft's own, e.g. weft.experiment.id (`weft eval`); at most 16 are set. A key weft sets
     * itself is overwritten by the one given here. Borrowed for the call (the span copies
     * what it keeps). NULL: none. */
    const struct weft_attr *root_attrs;
    size_t root_attr_count;
    /** Extra attributes on EVERY span the run starts (the workflow root, plan, agent, chat,
     * tool, reflect, loop, fan-out, retrieval and embeddings spans, command steps' tool spans,
     * the spans of its MCP calls, and the runs of sub-workflow steps), as start attributes so
     * that samplers see them; e.g. Langfuse's langfuse.experiment.* context (`weft eval`,
     * docs/langfuse.md). At most 16 are set, after weft's own start attributes (a key weft sets
     * when the span starts gets the value given here). With `--executor amqp` they travel in
     * each task message and a worker puts them on every span it starts for the task
     * (docs/distributed.md "Messages"); there string, bool, int and double values are carried
     * (array values are not), within the message's bounds. Borrowed for the call (each span
     * copies what it keeps). NULL: none, at no cost per span. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
    /** When non-NULL, every span of the run (as for span_attrs, the root included) also
     * carries the root span's id, 16 lowercase hex digits, under this key; e.g.
     * "langfuse.experiment.item.root_observation_id". The spans of a sub-workflow step's run
     * carry the id of this run's root. Borrowed for the call. NULL: none. */
    const char *root_span_id_attr;
    /** Attributes set on the root span only when the run records message content
     * (capture_content, after redaction), like the run's input and output: content that
     * belongs with them, e.g. an experiment item's expected output. At most 16 are set.
     * Borrowed for the call. NULL: none. */
    const struct weft_attr *root_content_attrs;
    size_t root_content_attr_count;
};

/** One step of the final plan. */
struct weft_run_step {
    char *id;
    char *agent; /**< the agent, or the executor for steps without one ("command", ...) */
    char *task;
    char *status;       /**< pending, in_progress, completed, failed, paused, skipped */
    unsigned attempts;  /**< agent attempts (reflection retries included) */
    char *result;       /**< the step's output; NULL when it produced none */
    char *requested_by; /**< step id that asked for this step (loop-back replan), or NULL */
    char *parent;       /**< correction steps: the failed step they repair, or NULL */
    char *executor;     /**< agent, command, file_writer, http_call */
    char *depends_on;   /**< comma-separated step ids ("" for none) */
    double reward;      /**< the evaluator's reward; 0 when the step was not evaluated */
    bool has_reward;
};

/** One supervisor decision. */
struct weft_run_decision {
    char *layer;  /**< rule, llm, fallback, counter_limit, pattern, circuit_breaker */
    char *next;   /**< an agent name, or "end" */
    char *reason; /**< a sentence */
};

struct weft_replay_report;

/** The outcome of a run. */
struct weft_run_result {
    weft_run_status status;
    char *run_id;
    char *session_id;
    char trace_id[33]; /**< lowercase hex; "" when not traced */
    char *output;      /**< the final answer (last completed step's result); may be NULL */
    char *reason;      /**< why the run ended, a sentence */
    char *route;       /**< conversational workflows: the route taken; else NULL */
    /** Iterations spent of supervisor.max_iterations: one per supervisor decision, plus one
     * per further step a parallel decision starts (docs/workflow.md, "Parallel steps"). */
    size_t iterations;
    size_t loops[WEFT_LOOP_KIND_COUNT];
    size_t llm_calls;
    size_t tool_calls;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    uint64_t duration_ns;
    struct weft_run_step *steps;
    size_t step_count;
    struct weft_run_decision *decisions;
    size_t decision_count;
    char **verdicts; /**< reflection verdicts in order ("coder:REJECTED", ...) */
    size_t verdict_count;
    double reward;      /**< sum of the steps' evaluator rewards (see docs/workflow.md) */
    size_t corrections; /**< correction attempts (valid corrective plans and invalid ones) */
    /** A replay (weft_run_options.replay_run_id): how it compared with the original; else
     * NULL. Freed with the result. */
    struct weft_replay_report *replay;
    /** A fork: steps reused from the original (not run again); 0 otherwise. */
    size_t reused_steps;
    /** A sampling policy decided the run's trace (weft_run_options.sampling or the
     * workflow's): is_trace_kept says whether it is kept and sampling_rule names the rule
     * (weft.sampling.rule). false/NULL without a policy: the trace is kept whole. */
    bool is_trace_sampled;
    bool is_trace_kept;
    char *sampling_rule;
};

/** What a replay found. Strings are owned by the report (freed with the run result). */
struct weft_replay_report {
    char *original_run_id;
    bool is_identical;    /**< every call matched and none was missing or added */
    size_t llm_calls;     /**< LLM calls answered from the original's exchanges */
    size_t tool_calls;    /**< tool calls answered from the original's tool results */
    size_t llm_expected;  /**< the original's stored LLM exchanges */
    size_t tool_expected; /**< the original's stored tool results */
    /** The first differing span, when not identical: its name ("chat MODEL",
     * "execute_tool TOOL"), its step id (NULL for supervisor calls), what differed
     * ("request": same position, different request; "unexpected_call": a call the original
     * did not make; "missing_call": a call the original made and the replay did not) and
     * short excerpts of what the original had and what the replay made (either may be NULL). */
    char *span;
    char *step_id;
    char *what;
    char *expected;
    char *got;
};

/** Run @p workflow to its end (a route of end, a spent budget, a failure or an abort).
 * @param error receives a sentence when the run could not start (may be NULL).
 * @return WEFT_OK when the run executed, whatever its status (see (*out)->status);
 * WEFT_EINVAL, WEFT_ENOTFOUND (replay file missing), WEFT_EPARSE (replay file or script
 * invalid), WEFT_EIO (state database or workspace unusable), WEFT_ENOMEM.
 * Ownership: borrows @p workflow and @p options; caller owns *out, free it with
 * weft_run_result_free(). */
WEFT_API weft_err weft_run(const struct weft_workflow *workflow,
                           const struct weft_run_options *options,
                           struct weft_run_result **out,
                           char *error,
                           size_t error_len);

/** Create every collaboration-metric family on @p meter (runs, agent invocations, loops by
 * kind, hand-offs, verdicts, corrections, rewards, GenAI token and duration histograms, ...),
 * so that a scrape lists them, at zero, before the first run. weft_run() does the same for
 * its meter. @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM.
 * Ownership: borrows @p meter; the families belong to it. */
WEFT_API weft_err weft_runtime_metrics_register(struct weft_meter *meter);

/** Fill @p meter (a fresh one: values are added) with the metrics the state database holds
 * across runs, as `weft serve` exposes them. Every run persists its collaboration metrics and
 * its span pipeline's counts per run (table run_metrics, written at checkpoints: after a step,
 * at most once a second, and at run end), with the names and labels a live run uses; they are
 * summed across runs per (name, labels). Also: runs in progress (stored runs that never ended,
 * killed ones included until `weft resume`) and the oldest one's age, and exporter queue gauges
 * of runs in progress (fullest queue for utilization). Runs stored before per-run snapshots
 * existed count from their run rows (runs, duration, reward, loops, cost, agent outcomes).
 * Every family is registered, at zero before the first run. At most the 100000 most recent runs
 * are read. docs/metrics.md lists the families. SQLite and PostgreSQL states keep the same
 * snapshots and fold the same way.
 * @param state_path a file or a PostgreSQL URL; NULL means $WEFT_STATE_URL, else
 * $WEFT_HOME/state.db; a missing file is no runs.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: borrows both arguments for the call; the series added belong to
 * @p meter. */
WEFT_API weft_err weft_runtime_metrics_from_store(struct weft_meter *meter, const char *state_path);

/** Persist @p provider's span counts (weft.spans.ended; exported, dropped and failed per
 * exporter; queue gauges) as run @p run_id's, replacing what its last checkpoint stored. Call
 * it after weft_provider_shutdown(), so that spans exported at shutdown count: `weft run` does.
 * The counts are the provider's since it was created, so use a provider per run.
 * @param state_path a file or a PostgreSQL URL; NULL means $WEFT_STATE_URL, else
 * $WEFT_HOME/state.db.
 * @return WEFT_OK, WEFT_EINVAL (NULL run id or provider), WEFT_EIO (database), WEFT_ENOMEM.
 * Ownership: borrows everything for the call. Thread-safety: any thread. */
WEFT_API weft_err weft_run_metrics_save_provider(const char *state_path,
                                                 const char *run_id,
                                                 struct weft_provider *provider);

/** Free a run result. NULL is a no-op.
 * Errors: none. Ownership: takes @p result (frees it and its strings). */
WEFT_API void weft_run_result_free(struct weft_run_result *result);

/* ------------------------------------------------------------------------------------------ */
/* Stored runs: the state database read back (`weft runs`, `weft run show`, `weft resume`).     */

/** One run as the state database holds it. */
struct weft_run_info {
    char *run_id;
    char *workflow;      /**< the workflow's name */
    char *workflow_path; /**< the file it was loaded from; may be NULL for old runs */
    char *session_id;
    char *input; /**< may be NULL */
    /** running, completed, failed, ...; "interrupted" for a run whose process died (also
     * before weft_runs_recover() marks it: a running run whose owner is gone reads so). */
    char *status;
    char *reason;             /**< may be NULL */
    char *trace_id;           /**< the latest trace of the run; may be NULL */
    char *root_span_id;       /**< its root span; may be NULL */
    char *resumed_from_trace; /**< the trace a resumed run continued; may be NULL */
    char *loops;              /**< JSON {kind: count}; may be NULL */
    char *origin_kind;   /**< "replay" or "fork" when the run was made from another; else NULL */
    char *origin_run_id; /**< the run it replayed or forked; NULL when origin_kind is */
    char *origin_step;   /**< a fork's step id it ran live from; else NULL */
    uint64_t started_ns;
    uint64_t ended_ns; /**< 0 while running */
    size_t iterations;
    size_t step_count;
    size_t corrections;
    double reward;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    /** Kept by weft_runs_gc() whatever its age (weft_run_pin()). */
    bool is_pinned;
    /** Tail sampling decided the run's trace: "kept:RULE" or "dropped:RULE" (the run's
     * weft.sampling.rule); NULL when no policy applied (the trace was kept whole). */
    char *trace_sampling;
};

/** One DAG surgery of a run. Lists are JSON arrays of step ids. */
struct weft_run_correction {
    unsigned seq;
    char *failed_step;
    char *error_type; /**< may be NULL */
    char *inserted;
    char *depends_before;
    char *depends_after;
    uint64_t created_ns;
};

/** What the state database keeps about a step beyond struct weft_run_step: its failure and
 * timing, and, for a step that never ran because a dependency failed, which one. */
struct weft_run_step_extra {
    char *feedback;   /**< the last failure reason or reflection feedback; may be NULL */
    char *error_type; /**< the last failure's type ("exit_status", "timeout", ...); may be NULL */
    /** The last failure's details as a JSON object text (for command steps: exit_code,
     * stderr_tail, stdout_tail); may be NULL. */
    char *error;
    uint64_t started_ns; /**< 0 when the step never started */
    uint64_t ended_ns;   /**< 0 when it never ended */
    /** Set when the run has ended, the step never ran (stored as pending or skipped) and one
     * of its dependencies failed or was itself skipped: that dependency's id. Else NULL. */
    char *skipped_dependency;
    /** The status of skipped_dependency: "failed" or "skipped"; NULL when it is NULL. Borrowed
     * static text. */
    const char *skipped_dependency_status;
};

/** Everything stored about one run. */
struct weft_run_details {
    struct weft_run_info info;
    struct weft_run_step *steps; /**< in plan order */
    size_t step_count;
    struct weft_run_correction *corrections;
    size_t correction_count;
    /** step_count entries, parallel to @c steps. */
    struct weft_run_step_extra *step_extras;
};

/** List the @p limit most recent runs, newest first.
 * @param state_path a file or a PostgreSQL URL; NULL means $WEFT_STATE_URL, else
 * $WEFT_HOME/state.db.
 * @return WEFT_OK (also when there are none), WEFT_ENOTFOUND (no database), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: free with weft_run_infos_free(). */
WEFT_API weft_err weft_runs_list(const char *state_path,
                                 size_t limit,
                                 struct weft_run_info **out,
                                 size_t *count);

/** Free an array from weft_runs_list(). NULL is a no-op.
 * Errors: none. Ownership: takes @p infos (frees the array and every string in it). */
WEFT_API void weft_run_infos_free(struct weft_run_info *infos, size_t count);

/** Load one run: @p ref is a run id, a unique prefix of one, or "last".
 * @return WEFT_OK, WEFT_ENOTFOUND (no such run, or no database), WEFT_EINVAL (ambiguous prefix,
 * NULL argument), WEFT_EIO, WEFT_ENOMEM. Ownership: free with weft_run_details_free(). */
WEFT_API weft_err weft_run_load(const char *state_path,
                                const char *ref,
                                struct weft_run_details **out);

/** One stored LLM exchange of a run (the record `weft replay` answers from): which queue it
 * belongs to and what came back. The state store keeps them, redacted, whether or not the
 * run captured content on its spans. */
struct weft_run_exchange {
    char *who;        /**< the queue: the asking agent's name, or a flow step's id */
    char *purpose;    /**< what the call was for (weft.llm.purpose: act, decide, ...) */
    char *content;    /**< the answer's text; NULL when it only called tools, or failed */
    char *tool_calls; /**< the tools it asked for, a JSON array text; NULL when none */
    char *error;      /**< "type: message" when the call failed; else NULL */
};

/** Load the stored LLM exchanges of run @p run_id (a full id, as weft_run_load() gives),
 * grouped by queue (who, then purpose), each queue in the order its calls were made.
 * @param state_path as weft_run_load().
 * @return WEFT_OK (*count 0 when the run stored none), WEFT_ENOTFOUND (no database),
 * WEFT_EINVAL (NULL argument), WEFT_EIO, WEFT_ENOMEM.
 * Ownership: *out is new, release with weft_run_exchanges_free(); NULL (and *count 0) on
 * failure. Thread-safety: any thread. */
WEFT_API weft_err weft_run_exchanges_load(const char *state_path,
                                          const char *run_id,
                                          struct weft_run_exchange **out,
                                          size_t *count);

/** Free what weft_run_exchanges_load() returned. NULL is a no-op.
 * Errors: none. Ownership: takes @p exchanges (the array and its strings). */
WEFT_API void weft_run_exchanges_free(struct weft_run_exchange *exchanges, size_t count);

/** Length of a snapshot hash with its NUL: "fnv1a64:" and 16 hex digits. */
#define WEFT_RUN_SNAPSHOT_HASH_LEN 32

/** What a stored run kept of its workflow's files (docs/replay.md, "What a run keeps"). */
struct weft_run_snapshot {
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN]; /**< over every file's path and bytes */
    size_t file_count;                     /**< the workflow file first, then what it uses */
    size_t bytes;                          /**< of file text, at most 4 MiB */
    bool is_current;          /**< every file is at its path with the bytes the run had */
    bool is_workflow_present; /**< the workflow file is at its path (changed or not) */
    bool is_workflow_changed; /**< ... and its bytes differ from the run's */
};

/** The snapshot of the workflow files run @p run_id (a full id, as weft_run_load() gives)
 * was started with, checked against the files on disk; with @p dir, its files are also
 * written under @p dir, each at @p dir followed by its absolute path (mode 0600; the other
 * entries of the workflow's directory are linked there when it still exists), and
 * @p *workflow_out names the workflow's copy, ready for weft_workflow_load().
 * @param state_path as weft_run_load().
 * @return WEFT_OK, WEFT_ENOTFOUND (no such run, no database, or a run that kept no snapshot:
 * an older one, or one over the bounds), WEFT_EINVAL (NULL argument, a path too long),
 * WEFT_EIO (the state database, or a file under @p dir), WEFT_ENOMEM.
 * Ownership: *workflow_out is new (weft_run_snapshot_text_free()); NULL on failure. The caller
 * owns @p dir and removes it when done. Thread-safety: any thread. */
WEFT_API weft_err weft_run_snapshot_load(const char *state_path,
                                         const char *run_id,
                                         const char *dir,
                                         struct weft_run_snapshot *out,
                                         char **workflow_out);

/** Free a text from weft_run_snapshot_load(). NULL is a no-op.
 * Errors: none. Ownership: takes @p text. */
WEFT_API void weft_run_snapshot_text_free(char *text);

/** The workflow document run @p run_id (a full id, as weft_run_load() gives) was started with:
 * the workflow file's hash ("fnv1a64:" and 16 hex digits, the hash `weft resume` compares)
 * and, when the run kept a snapshot, the file's text as it was then. A run that kept no
 * snapshot (an older one, or one over the snapshot's bounds) gives its hash alone, *text_out
 * NULL. Nothing is read from or written to the workflow's files on disk.
 * @param state_path as weft_run_load(). @param hash_out receives the hash, NUL-terminated.
 * @param text_out receives the text, or NULL (none kept).
 * @return WEFT_OK, WEFT_ENOTFOUND (no such run, no database, or a run that kept neither),
 * WEFT_EINVAL (NULL argument), WEFT_EIO (the state database, or a snapshot it did not write),
 * WEFT_ENOMEM.
 * Ownership: *text_out is new, release with weft_run_snapshot_text_free(); NULL on failure.
 * Thread-safety: any thread (a handle of its own per call). */
WEFT_API weft_err weft_run_workflow_load(const char *state_path,
                                         const char *run_id,
                                         char hash_out[WEFT_RUN_SNAPSHOT_HASH_LEN],
                                         char **text_out);

/** Free what weft_run_load() returned. NULL is a no-op.
 * Errors: none. Ownership: takes @p details (frees it and everything in it). */
WEFT_API void weft_run_details_free(struct weft_run_details *details);

/** A run found interrupted by weft_runs_recover(): its process died while it was running.
 * Every pointer is borrowed for the duration of the callback. */
/** A step that was in progress when its run's process died: its agent span never ended. */
struct weft_interrupted_step {
    const char *span_id;        /**< 16 hex digits */
    const char *parent_span_id; /**< 16 hex digits; NULL: the run's root span */
    const char *name;           /**< "invoke_agent AGENT" */
    uint64_t started_ns;
};

struct weft_interrupted_run {
    const char *run_id;
    const char *workflow;
    int64_t owner_pid;               /**< the process that ran it */
    const char *owner_host;          /**< the host it ran on */
    const char *reason;              /**< the sentence stored as the run's reason */
    const char *trace_id;            /**< 32 hex digits; NULL when the run was not traced */
    const char *root_span_id;        /**< 16 hex digits; NULL when not traced */
    const char *root_parent_span_id; /**< NULL when the run started its own trace */
    const char *root_name;           /**< "invoke_workflow NAME"; NULL for older runs */
    uint64_t root_started_ns;        /**< 0 for older runs */
    uint64_t ended_ns;               /**< its last sign of life: last heartbeat or step end */
    const struct weft_interrupted_step *open_steps; /**< borrowed for the call */
    size_t open_step_count;
};

/** Receives one interrupted run. */
typedef void (*weft_interrupted_fn)(const struct weft_interrupted_run *run, void *user_data);

/** Find the runs stored as running whose owner is gone (on this host its pid no longer
 * exists; on another host its heartbeat is more than 10 minutes old), mark them
 * "interrupted" in the state database (ended at their last sign of life) and call @p fn for
 * each, so that the caller can close their still-open spans (weft_store_add_interrupted_span()).
 * `weft runs`, `weft run show`, `weft resume` and `weft serve` call it first.
 * @param state_path a file or a PostgreSQL URL; NULL means $WEFT_STATE_URL, else
 * $WEFT_HOME/state.db. @param fn may be NULL. @param count
 * receives how many runs were marked (may be NULL).
 * @return WEFT_OK, WEFT_ENOTFOUND (no database), WEFT_EIO (also a damaged database: logged
 * with the file's name), WEFT_ENOMEM.
 * Ownership: the run passed to @p fn is borrowed for that call only; @p user_data
 * is borrowed for the call. */
WEFT_API weft_err weft_runs_recover(const char *state_path,
                                    weft_interrupted_fn fn,
                                    void *user_data,
                                    size_t *count);

/* ------------------------------------------------------------------------------------------ */
/* Retention: pinning runs and deleting old ones (`weft runs pin`, `weft gc`, docs/retention.md) */

/** Pin (@p is_pinned true) or unpin the run @p ref names: a pinned run is kept by
 * weft_runs_gc() whatever its age. Pinning a pinned run (or unpinning an unpinned one) is not
 * an error.
 * @param state_path as weft_run_load(). @param ref a run id, a unique prefix of one, or "last".
 * @param id_out receives the run's full id, NUL-terminated (may be NULL); @p id_len its size.
 * @return WEFT_OK, WEFT_ENOTFOUND (no such run, or no database), WEFT_EINVAL (ambiguous prefix,
 * malformed ref, NULL @p ref), WEFT_EIO, WEFT_ENOMEM. On error the run is unchanged.
 * Ownership: borrows every argument for the call. Thread-safety: any thread (a handle of its
 * own per call). */
WEFT_API weft_err
weft_run_pin(const char *state_path, const char *ref, bool is_pinned, char *id_out, size_t id_len);

/** What weft_runs_gc() deleted, or with dry_run would delete. */
struct weft_runs_gc_report {
    size_t runs_deleted;       /**< runs deleted (dry run: that would be) */
    uint64_t rows_deleted;     /**< rows of every run-keyed table, the runs' own included */
    size_t workspaces_removed; /**< workspace folders removed (dry run: that would be) */
    uint64_t workspace_bytes;  /**< bytes of regular files in them (apparent size) */
    size_t workspace_errors;   /**< folders that could not be removed whole (logged) */
    size_t runs_kept_pinned;   /**< ended before the cutoff but pinned */
    size_t runs_kept_running;  /**< started before the cutoff, stored as running */
};

/** Delete every stored run that ended before @p cutoff_ns (nanoseconds since the Unix epoch),
 * except runs stored as running (whatever their age: weft_runs_recover() first marks those
 * whose process died) and pinned runs. A run goes with its rows in every run-keyed table
 * (steps or tasks, LLM exchanges, tool results, corrections, metric snapshots) in one
 * transaction per run, re-checked inside it, so a run resumed or pinned meanwhile is kept; its
 * session's messages and scripted cursors go with the session's last stored run. Skills,
 * lessons and composed teams are kept (they have their own retention). Then the run's
 * workspace folder is removed, under one rule: only the entry named exactly as the run's id
 * directly under weft's own workspaces root ($WEFT_HOME/workspaces, else ./.weft/workspaces,
 * as a run creates it), and never across a symbolic link or a mount: a link in its place is
 * removed as a link, its target untouched, and a --workspace elsewhere is never looked at.
 * @param state_path as weft_run_load(). @param is_dry_run count and report, change nothing.
 * @param out receives the report (zeroed first; filled also on a failure part way, for what
 * was done until then).
 * @return WEFT_OK, WEFT_ENOTFOUND (no database), WEFT_EINVAL (NULL @p out), WEFT_EIO (the
 * database; runs deleted before the failure stay deleted), WEFT_ENOMEM. A workspace that
 * cannot be removed is not an error: it is counted in workspace_errors and logged.
 * Ownership: borrows every argument for the call. Thread-safety: any thread. */
WEFT_API weft_err weft_runs_gc(const char *state_path,
                               uint64_t cutoff_ns,
                               bool is_dry_run,
                               struct weft_runs_gc_report *out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_H */
