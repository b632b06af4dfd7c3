/* runtime/common/attr_keys.h - every fixed attribute key the runtime sets on a span after its
 * start, interned once per process (weft_key_intern()) and set through the wrappers below.
 *
 * Call sites name a key by its id (WEFT__RK_ plus the key in capitals, dots as underscores, and
 * without the "weft." of weft's own keys: WEFT__RK_STEP_ID is "weft.step.id"). A wrapper uses
 * the interned handle when there is one and the string setter with the same key otherwise, so
 * an attribute is recorded under the same key whether interning happened, failed (the
 * process-wide table is full) or was never asked for: the spans are the same either way.
 *
 * Keys built from data (loop counters, user metadata, the content keys of callers) stay on the
 * string setters, as do start attributes and event attributes, which the tracing API takes
 * only as strings (struct weft_attr). */
#ifndef WEFT_RUNTIME_ATTR_KEYS_H
#define WEFT_RUNTIME_ATTR_KEYS_H

#include <stdatomic.h>
#include <weft/trace.h>

/* X(id, key) for each key, sorted by key within its vocabulary. */
#define WEFT__RK_LIST(X)                                                                      \
    /* Shared conventions: errors, JSON-RPC and MCP, servers, agent graphs */                 \
    X(ERROR_TYPE, "error.type")                                                               \
    X(GRAPH_NODE_ID, "graph.node.id")                                                         \
    X(GRAPH_NODE_PARENT_ID, "graph.node.parent_id")                                           \
    X(JSONRPC_REQUEST_ID, "jsonrpc.request.id")                                               \
    X(MCP_PROTOCOL_VERSION, "mcp.protocol.version")                                           \
    X(MCP_SESSION_ID, "mcp.session.id")                                                       \
    X(RPC_RESPONSE_STATUS_CODE, "rpc.response.status_code")                                   \
    X(SERVER_ADDRESS, "server.address")                                                       \
    X(SERVER_PORT, "server.port")                                                             \
    /* OpenTelemetry GenAI: the names of runtime/observe/semconv.h (test_attr_keys checks) */ \
    X(GEN_AI_AGENT_DESCRIPTION, "gen_ai.agent.description")                                   \
    X(GEN_AI_AGENT_NAME, "gen_ai.agent.name")                                                 \
    X(GEN_AI_EMBEDDINGS_DIMENSION_COUNT, "gen_ai.embeddings.dimension.count")                 \
    X(GEN_AI_INPUT_MESSAGES, "gen_ai.input.messages")                                         \
    X(GEN_AI_OPERATION_NAME, "gen_ai.operation.name")                                         \
    X(GEN_AI_OUTPUT_MESSAGES, "gen_ai.output.messages")                                       \
    X(GEN_AI_OUTPUT_TYPE, "gen_ai.output.type")                                               \
    X(GEN_AI_REQUEST_MAX_TOKENS, "gen_ai.request.max_tokens")                                 \
    X(GEN_AI_REQUEST_TEMPERATURE, "gen_ai.request.temperature")                               \
    X(GEN_AI_RESPONSE_FINISH_REASONS, "gen_ai.response.finish_reasons")                       \
    X(GEN_AI_RESPONSE_ID, "gen_ai.response.id")                                               \
    X(GEN_AI_RESPONSE_MODEL, "gen_ai.response.model")                                         \
    X(GEN_AI_RETRIEVAL_DOCUMENTS, "gen_ai.retrieval.documents")                               \
    X(GEN_AI_RETRIEVAL_QUERY_TEXT, "gen_ai.retrieval.query.text")                             \
    X(GEN_AI_RETRIEVAL_TOP_K, "gen_ai.retrieval.top_k")                                       \
    X(GEN_AI_SYSTEM_INSTRUCTIONS, "gen_ai.system_instructions")                               \
    X(GEN_AI_TOOL_CALL_ARGUMENTS, "gen_ai.tool.call.arguments")                               \
    X(GEN_AI_TOOL_CALL_ID, "gen_ai.tool.call.id")                                             \
    X(GEN_AI_TOOL_CALL_RESULT, "gen_ai.tool.call.result")                                     \
    X(GEN_AI_TOOL_NAME, "gen_ai.tool.name")                                                   \
    X(GEN_AI_TOOL_TYPE, "gen_ai.tool.type")                                                   \
    X(GEN_AI_USAGE_INPUT_TOKENS, "gen_ai.usage.input_tokens")                                 \
    X(GEN_AI_USAGE_OUTPUT_TOKENS, "gen_ai.usage.output_tokens")                               \
    /* Langfuse */                                                                            \
    X(LANGFUSE_OBSERVATION_COST_DETAILS, "langfuse.observation.cost_details")                 \
    X(LANGFUSE_OBSERVATION_INPUT, "langfuse.observation.input")                               \
    X(LANGFUSE_OBSERVATION_OUTPUT, "langfuse.observation.output")                             \
    X(LANGFUSE_OBSERVATION_PROMPT_NAME, "langfuse.observation.prompt.name")                   \
    X(LANGFUSE_OBSERVATION_PROMPT_VERSION, "langfuse.observation.prompt.version")             \
    /* weft's own */                                                                          \
    X(ARCHITECT_PATH, "weft.architect.path")                                                  \
    X(ARCHITECT_TEAM, "weft.architect.team")                                                  \
    X(COMPOSE_ATTEMPTS, "weft.compose.attempts")                                              \
    X(COMPOSE_GOAL, "weft.compose.goal")                                                      \
    X(COMPOSE_TEAM, "weft.compose.team")                                                      \
    X(CORRECTION_ATTEMPT, "weft.correction.attempt")                                          \
    X(CORRECTION_DEPENDS_AFTER, "weft.correction.depends_after")                              \
    X(CORRECTION_DEPENDS_BEFORE, "weft.correction.depends_before")                            \
    X(CORRECTION_ERROR_TYPE, "weft.correction.error_type")                                    \
    X(CORRECTION_FAILED_TASK, "weft.correction.failed_task")                                  \
    X(CORRECTION_INSERTED, "weft.correction.inserted")                                        \
    X(CORRECTION_MAX_CORRECTIONS, "weft.correction.max_corrections")                          \
    X(CORRECTION_PREEMPTIVE, "weft.correction.preemptive")                                    \
    X(CORRECTION_REWIRED, "weft.correction.rewired")                                          \
    X(COST_USD, "weft.cost.usd")                                                              \
    X(DECISION_BATCH, "weft.decision.batch")                                                  \
    X(DECISION_LAYER, "weft.decision.layer")                                                  \
    X(DECISION_NEXT, "weft.decision.next")                                                    \
    X(DECISION_PARALLEL, "weft.decision.parallel")                                            \
    X(DECISION_REASON, "weft.decision.reason")                                                \
    X(EVALUATION_RESULT, "weft.evaluation.result")                                            \
    X(FAN_OUT_FAILED, "weft.fan_out.failed")                                                  \
    X(FAN_OUT_FOR_EACH, "weft.fan_out.for_each")                                              \
    X(FAN_OUT_ITEMS, "weft.fan_out.items")                                                    \
    X(FAN_OUT_MAX_PARALLEL, "weft.fan_out.max_parallel")                                      \
    X(FORK_FROM, "weft.fork.from")                                                            \
    X(FORK_OF, "weft.fork.of")                                                                \
    X(FORK_REUSED, "weft.fork.reused")                                                        \
    X(FORK_ANSWER_OVERRIDE, "weft.fork.answer_override")                                      \
    X(ITEM_INDEX, "weft.item.index")                                                          \
    X(ITERATION, "weft.iteration")                                                            \
    X(LESSONS_USED, "weft.lessons.used")                                                      \
    X(LLM_PURPOSE, "weft.llm.purpose")                                                        \
    X(LOOP_BREAK_CONDITION, "weft.loop.break_condition")                                      \
    X(LOOP_CONDITION, "weft.loop.condition")                                                  \
    X(LOOP_EXHAUSTED, "weft.loop.exhausted")                                                  \
    X(LOOP_ITERATION, "weft.loop.iteration")                                                  \
    X(LOOP_LOOP_BACK_TO, "weft.loop.loop_back_to")                                            \
    X(LOOP_MAX_ITERATIONS, "weft.loop.max_iterations")                                        \
    X(LOOP_OUTCOME, "weft.loop.outcome")                                                      \
    X(MCP_SERVER, "weft.mcp.server")                                                          \
    X(PLAN_SIZE, "weft.plan.size")                                                            \
    X(PLAN_VERSION, "weft.plan.version")                                                      \
    X(PROMPT_IS_FALLBACK, "weft.prompt.is_fallback")                                          \
    X(PROMPT_NAME, "weft.prompt.name")                                                        \
    X(REFLECTION_ATTEMPT, "weft.reflection.attempt")                                          \
    X(REFLECTION_FEEDBACK, "weft.reflection.feedback")                                        \
    X(REFLECTION_VERDICT, "weft.reflection.verdict")                                          \
    X(REPLAN_FROM, "weft.replan.from")                                                        \
    X(REPLAN_FROM_STEP, "weft.replan.from_step")                                              \
    X(REPLAN_QUERY, "weft.replan.query")                                                      \
    X(REPLAN_STEP_ADDED, "weft.replan.step_added")                                            \
    X(REPLAN_STEP_ID, "weft.replan.step_id")                                                  \
    X(REPLAN_TO, "weft.replan.to")                                                            \
    X(REPLAY_DIVERGED_SPAN, "weft.replay.diverged.span")                                      \
    X(REPLAY_DIVERGED_STEP, "weft.replay.diverged.step")                                      \
    X(REPLAY_DIVERGED_WHAT, "weft.replay.diverged.what")                                      \
    X(REPLAY_IDENTICAL, "weft.replay.identical")                                              \
    X(REPLAY_LLM_CALLS, "weft.replay.llm_calls")                                              \
    X(REPLAY_OF, "weft.replay.of")                                                            \
    X(REPLAY_TOOL_CALLS, "weft.replay.tool_calls")                                            \
    X(ROUTE, "weft.route")                                                                    \
    X(ROUTER_CLARIFICATIONS, "weft.router.clarifications")                                    \
    X(RUN_BUDGET, "weft.run.budget")                                                          \
    X(RUN_BUDGET_LIMIT, "weft.run.budget.limit")                                              \
    X(RUN_BUDGET_USED, "weft.run.budget.used")                                                \
    X(RUN_ITERATIONS, "weft.run.iterations")                                                  \
    X(RUN_PS_CORRECTIONS, "weft.run.ps.corrections")                                          \
    X(RUN_RESUMED, "weft.run.resumed")                                                        \
    X(RUN_REWARD, "weft.run.reward")                                                          \
    X(RUN_STATUS, "weft.run.status")                                                          \
    X(RUN_STEPS, "weft.run.steps")                                                            \
    X(SAMPLING_DECISION, "weft.sampling.decision")                                            \
    X(SAMPLING_RULE, "weft.sampling.rule")                                                    \
    X(SKILLS_HITS, "weft.skills.hits")                                                        \
    X(SKILLS_INJECTED, "weft.skills.injected")                                                \
    X(SKILLS_MIN_SCORE, "weft.skills.min_score")                                              \
    X(SKILLS_OPERATION, "weft.skills.operation")                                              \
    X(SKILLS_RANKING, "weft.skills.ranking")                                                  \
    X(STEP_ATTEMPT, "weft.step.attempt")                                                      \
    X(STEP_EXECUTOR, "weft.step.executor")                                                    \
    X(STEP_ID, "weft.step.id")                                                                \
    X(STEP_PARENT, "weft.step.parent")                                                        \
    X(STEP_REQUESTED_BY, "weft.step.requested_by")                                            \
    X(STEP_RETRIES, "weft.step.retries")                                                      \
    X(STEP_REWARD, "weft.step.reward")                                                        \
    X(STEP_STATUS, "weft.step.status")                                                        \
    X(STEP_TASK, "weft.step.task")                                                            \
    X(STEP_TOOL_ROUNDS, "weft.step.tool_rounds")                                              \
    X(TASK_ATTEMPT, "weft.task.attempt")                                                      \
    X(TASK_RECLAIMED, "weft.task.reclaimed")                                                  \
    X(TASK_REDELIVERIES, "weft.task.redeliveries")                                            \
    X(TASK_RESUMED, "weft.task.resumed")                                                      \
    X(TEAM_WORKFLOW, "weft.team.workflow")                                                    \
    X(TOOL_EXIT_CODE, "weft.tool.exit_code")                                                  \
    X(TOOL_OUTCOME, "weft.tool.outcome")                                                      \
    X(TOOL_TRUNCATED, "weft.tool.truncated")

typedef enum weft__rk_id {
#define WEFT__RK_ENUM(id, key) WEFT__RK_##id,
    WEFT__RK_LIST(WEFT__RK_ENUM)
#undef WEFT__RK_ENUM
        WEFT__RK_COUNT
} weft__rk_id;

/* The handles, NULL until weft__rt_keys_init() has interned them (or for good when interning
 * failed). Atomic because a thread may read them without having run the initialisation itself:
 * an acquire load is a plain load on x86 and sees either NULL or a complete handle. */
extern _Atomic(const struct weft_attr_key *) weft__rk_handles[WEFT__RK_COUNT];
/* The key strings, by id. */
extern const char *const weft__rk_names[WEFT__RK_COUNT];

/* Intern every key of the list, once per process (pthread_once): cheap enough to call wherever
 * a run, a task, a worker, an executor, a composition or an MCP hub starts, before its first
 * span. A key that cannot be interned keeps a NULL handle (weft_key_intern() logs a full table
 * once). Thread-safe; never fails. */
void weft__rt_keys_init(void);

/* The interned handle of @p id, or NULL. */
static inline const struct weft_attr_key *
weft__rk_key(weft__rk_id id)
{
    return atomic_load_explicit(&weft__rk_handles[id], memory_order_acquire);
}

/* weft_span_set_str(), _int(), _double() and _bool() under key @p id, with the same checks and
 * results: through the interned handle when there is one, else through the string setter. */
static inline weft_err
weft__rk_set_str(struct weft_span *span, weft__rk_id id, const char *value)
{
    const struct weft_attr_key *key = weft__rk_key(id);

    if (key == NULL) {
        return weft_span_set_str(span, weft__rk_names[id], value);
    }
    return weft_span_set_str_k(span, key, value);
}

static inline weft_err
weft__rk_set_int(struct weft_span *span, weft__rk_id id, int64_t value)
{
    const struct weft_attr_key *key = weft__rk_key(id);

    if (key == NULL) {
        return weft_span_set_int(span, weft__rk_names[id], value);
    }
    return weft_span_set_int_k(span, key, value);
}

static inline weft_err
weft__rk_set_double(struct weft_span *span, weft__rk_id id, double value)
{
    const struct weft_attr_key *key = weft__rk_key(id);

    if (key == NULL) {
        return weft_span_set_double(span, weft__rk_names[id], value);
    }
    return weft_span_set_double_k(span, key, value);
}

static inline weft_err
weft__rk_set_bool(struct weft_span *span, weft__rk_id id, bool value)
{
    const struct weft_attr_key *key = weft__rk_key(id);

    if (key == NULL) {
        return weft_span_set_bool(span, weft__rk_names[id], value);
    }
    return weft_span_set_bool_k(span, key, value);
}

/* weft_span_set_str_array() under key @p id. The tracing API has no interned form of the array
 * setters, so this one always takes the string path; it exists so that the list above holds
 * every fixed key the runtime sets after a span's start. */
static inline weft_err
weft__rk_set_str_array(struct weft_span *span,
                       weft__rk_id id,
                       const char *const *values,
                       size_t count)
{
    return weft_span_set_str_array(span, weft__rk_names[id], values, count);
}

#endif /* WEFT_RUNTIME_ATTR_KEYS_H */
