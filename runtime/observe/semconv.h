/* runtime/observe/semconv.h - the OpenTelemetry GenAI vocabulary weft emits, in one place.
 *
 * Every gen_ai.* span name prefix, attribute key and event name the runtime writes is a macro
 * here, so the names live in one file and docs/semconv.md can be checked against it. Which
 * version of the conventions is emitted is decided once, from OTEL_SEMCONV_STABILITY_OPT_IN,
 * by weft__semconv_genai_mode().
 *
 * The GenAI conventions moved from open-telemetry/semantic-conventions (last published there
 * in v1.41.0) to open-telemetry/semantic-conventions-genai, which has no release yet. Their
 * transition plan says an instrumentation keeps emitting what it emitted by default and
 * switches to the latest experimental version only when OTEL_SEMCONV_STABILITY_OPT_IN holds
 * `gen_ai_latest_experimental`; it defines no dual-emission value for GenAI. weft's default
 * is therefore the v1.41 vocabulary it has emitted, and the opt-in gives the newest text.
 * docs/semconv.md records the commits read and what differs between the two.
 *
 * Message content follows the conventions' JSON schemas (gen-ai-input-messages.json,
 * gen-ai-output-messages.json, gen-ai-system-instructions.json) and goes out as JSON strings,
 * which the conventions allow where structured attribute values are not supported.
 */
#ifndef WEFT_RUNTIME_SEMCONV_H
#define WEFT_RUNTIME_SEMCONV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct llm_tool_call; /* llm/llm.h */

/* Operation names: the gen_ai.operation.name values and the span name prefixes. */
#define WEFT__GENAI_OP_INVOKE_WORKFLOW "invoke_workflow"
#define WEFT__GENAI_OP_INVOKE_AGENT    "invoke_agent"
#define WEFT__GENAI_OP_PLAN            "plan"
#define WEFT__GENAI_OP_CHAT            "chat"
#define WEFT__GENAI_OP_EXECUTE_TOOL    "execute_tool"
#define WEFT__GENAI_OP_EMBEDDINGS      "embeddings"
#define WEFT__GENAI_OP_CREATE_AGENT    "create_agent" /* remote agent services; weft has none */

/* Attributes shared by the spans. */
#define WEFT__GENAI_OPERATION_NAME  "gen_ai.operation.name"
#define WEFT__GENAI_PROVIDER_NAME   "gen_ai.provider.name" /* replaces gen_ai.system */
#define WEFT__GENAI_CONVERSATION_ID "gen_ai.conversation.id"
#define WEFT__GENAI_WORKFLOW_NAME   "gen_ai.workflow.name"
#define WEFT__GENAI_AGENT_NAME      "gen_ai.agent.name"
#define WEFT__GENAI_AGENT_ID        "gen_ai.agent.id"
#define WEFT__GENAI_AGENT_DESC      "gen_ai.agent.description"
#define WEFT__ERROR_TYPE            "error.type" /* stable */

/* Inference (chat) spans. */
#define WEFT__GENAI_REQUEST_MODEL       "gen_ai.request.model"
#define WEFT__GENAI_REQUEST_TEMPERATURE "gen_ai.request.temperature"
#define WEFT__GENAI_REQUEST_MAX_TOKENS  "gen_ai.request.max_tokens"
#define WEFT__GENAI_OUTPUT_TYPE         "gen_ai.output.type"
#define WEFT__GENAI_RESPONSE_MODEL      "gen_ai.response.model"
#define WEFT__GENAI_RESPONSE_ID         "gen_ai.response.id"
#define WEFT__GENAI_RESPONSE_FINISH     "gen_ai.response.finish_reasons"
#define WEFT__GENAI_USAGE_INPUT         "gen_ai.usage.input_tokens"
#define WEFT__GENAI_USAGE_OUTPUT        "gen_ai.usage.output_tokens"

/* Content (opt-in: only with capture on). */
#define WEFT__GENAI_INPUT_MESSAGES      "gen_ai.input.messages"
#define WEFT__GENAI_OUTPUT_MESSAGES     "gen_ai.output.messages"
#define WEFT__GENAI_SYSTEM_INSTRUCTIONS "gen_ai.system_instructions"
#define WEFT__GENAI_TOOL_CALL_ARGUMENTS "gen_ai.tool.call.arguments"
#define WEFT__GENAI_TOOL_CALL_RESULT    "gen_ai.tool.call.result"

/* Tool spans. */
#define WEFT__GENAI_TOOL_NAME    "gen_ai.tool.name"
#define WEFT__GENAI_TOOL_CALL_ID "gen_ai.tool.call.id"
#define WEFT__GENAI_TOOL_TYPE    "gen_ai.tool.type" /* function, extension, datastore */

/* Evaluation results: an event on the evaluated operation's span. */
#define WEFT__GENAI_EVALUATION_EVENT       "gen_ai.evaluation.result"
#define WEFT__GENAI_EVALUATION_NAME        "gen_ai.evaluation.name"
#define WEFT__GENAI_EVALUATION_SCORE_VALUE "gen_ai.evaluation.score.value"
#define WEFT__GENAI_EVALUATION_SCORE_LABEL "gen_ai.evaluation.score.label"
#define WEFT__GENAI_EVALUATION_EXPLANATION "gen_ai.evaluation.explanation"

/* The versions weft can emit. */
typedef enum weft__semconv_genai {
    /* Default: open-telemetry/semantic-conventions v1.41.0, the last release with GenAI. */
    WEFT__SEMCONV_GENAI_V1_41 = 0,
    /* `gen_ai_latest_experimental`: semantic-conventions-genai as recorded in semconv.md. */
    WEFT__SEMCONV_GENAI_LATEST = 1
} weft__semconv_genai;

/* The version named by an OTEL_SEMCONV_STABILITY_OPT_IN value: a comma-separated list of
 * category values, blanks around each ignored, matched exactly (so `http` or `database/dup`,
 * which belong to other categories, leave the default). NULL or empty means the default. */
weft__semconv_genai weft__semconv_genai_parse(const char *value);

/* The version this process emits: OTEL_SEMCONV_STABILITY_OPT_IN read on the first call and
 * kept (an atomic load afterwards). Thread-safe. */
weft__semconv_genai weft__semconv_genai_mode(void);

/* Read OTEL_SEMCONV_STABILITY_OPT_IN again on the next weft__semconv_genai_mode() call: for
 * tests, and for programs that set the variable after a run. Not to be called while runs are
 * in flight (their spans would mix versions). */
void weft__semconv_reload(void);

/* Whether @p mode puts gen_ai.provider.name on invoke_agent spans (v1.41 requires it; the
 * latest text removed it from in-process agent spans). */
bool weft__semconv_agent_has_provider(weft__semconv_genai mode);

/* gen_ai.input.messages for OpenAI-style chat @p messages ([{role, content, tool_calls,
 * tool_call_id}]): [{role, parts: [{type: text|tool_call|tool_call_response, ...}]}].
 * System messages stay in the list with role "system": they are part of the chat history.
 * @return a JSON string to free with free(), or NULL (no messages, or out of memory). */
char *weft__semconv_input_messages(const json_t *messages);

/* gen_ai.output.messages for one assistant answer: its text (may be NULL), its tool calls
 * (arguments parsed when they are JSON, kept as text otherwise) and the finish reason. v1.41
 * requires finish_reason on each message; the latest text deprecates it there (it stays in
 * gen_ai.response.finish_reasons), so @p mode decides.
 * @return a JSON string to free with free(), or NULL on out of memory. */
char *weft__semconv_output_messages(weft__semconv_genai mode,
                                    const char *content,
                                    const struct llm_tool_call *calls,
                                    size_t call_count,
                                    const char *finish_reason);

/* gen_ai.system_instructions for @p text: [{"type": "text", "content": text}].
 * @return a JSON string to free with free(), or NULL (NULL or empty text, out of memory). */
char *weft__semconv_system_instructions(const char *text);

/* The schema's FinishReason for a provider's value: OpenAI's "tool_calls" and
 * "function_call" are "tool_call"; anything else is kept; NULL is "stop". Borrowed. */
const char *weft__semconv_finish_reason(const char *provider_value);

#endif
