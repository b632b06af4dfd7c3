/* runtime/steps/agent.c - one plan step of an agent: attempts, the tool loop, loop-back requests
 * and tri-state reflection, each traced.
 *
 * An attempt is an `invoke_agent {agent}` span. Inside it the agent's LLM is called
 * (`chat {model}`) until it answers without tool calls or max_tool_rounds is spent; every
 * tool call is an `execute_tool {tool}` span, and a call whose arguments fail the tool's
 * schema is answered with a tool error without running anything. With reflection on, a
 * `reflect {agent}` span under the attempt asks the reflector for a verdict: APPROVED keeps
 * the output, FIXED takes the refined output, REJECTED starts another attempt with the
 * feedback, up to max_retries. Malformed reflector output is a traced error that counts as
 * one REJECTED.
 */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/steps/agent.h"
#include "runtime/common/attr_keys.h"
#include "runtime/decide/evaluate.h"
#include "runtime/mcp/hub.h"
#include "runtime/memory/memory.h"
#include "runtime/observe/semconv.h"
#include "runtime/observe/spans.h"
#include "runtime/replay/replay.h"
#include "runtime/steps/architect.h"
#include "runtime/steps/subrun.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum verdict { VERDICT_APPROVED = 0, VERDICT_FIXED, VERDICT_REJECTED } verdict;

static const char *const verdict_names[] = {"APPROVED", "FIXED", "REJECTED"};

/* Flow steps key scripted and recorded exchanges by step id (see llm_request.step_key). */
static const char *
flow_key(const struct run *run, size_t step)
{
    return run->cfg.wf->flow != NULL ? run->ps.plan.steps[step].id : NULL;
}

/* The OpenAI "tools" array for the agent, or NULL when it has none. */
static json_t *
tools_json(struct run *run, const struct wf_agent *agent)
{
    const struct weft_workflow *wf = run->cfg.wf;
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < agent->tool_count; i++) {
        const struct tool_def *d = &wf->tools[agent->tools[i]];
        const struct tool_def *native = run->cfg.native[agent->tools[i]];
        const json_t *schema = native != NULL ? native->schema : d->schema;
        const char *desc = native != NULL ? native->description : d->description;
        json_array_append_new(arr,
                              json_pack("{s:s, s:{s:s, s:s, s:O}}", "type", "function", "function",
                                        "name", d->name, "description",
                                        desc != NULL ? desc : weft__tool_type_name(d->type),
                                        "parameters", schema != NULL ? schema : json_object()));
    }
    if (arr != NULL && agent->mcp_server_count > 0 && run->cfg.mcp != NULL) {
        /* Without the run lock: the client may wait on its reader thread (a reload), which
         * may wait on the run lock to show a progress notification. */
        weft__rt_unlock(run);
        (void)weft__mcp_hub_tools_json(run->cfg.mcp, agent, arr); /* out of memory: fewer */
        weft__rt_lock(run);
    }
    if (arr != NULL && agent->can_request_count > 0) {
        json_t *schema = weft__tool_builtin_schema(TOOL_REQUEST_AGENT);
        json_array_append_new(
            arr, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function", "name",
                           "request_agent", "description",
                           "Ask the supervisor to schedule another agent with a query.",
                           "parameters", schema != NULL ? schema : json_object()));
    }
    if (json_array_size(arr) == 0) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

static json_t *
attempt_messages(const struct run *run,
                 const struct plan_step *step,
                 const char *instructions,
                 const char *skills,
                 const char *feedback)
{
    const struct weft_workflow *wf = run->cfg.wf;
    const struct wf_agent *agent = weft__rt_agent(run, step->agent);
    json_t *msgs = json_array();
    struct weft__buf user;
    struct weft__buf sys;

    weft__buf_init(&sys, 0);
    weft__buf_init(&user, 0);
    weft__buf_printf(&sys, "%s", instructions != NULL ? instructions : "You are a helpful agent.");
    if (agent->can_request_count > 0) {
        weft__buf_printf(&sys, "\nYou may ask for: ");
        for (size_t i = 0; i < agent->can_request_count; i++) {
            weft__buf_printf(&sys, "%s%s", i > 0 ? ", " : "",
                             wf->agents[agent->can_request[i]].name);
        }
        weft__buf_printf(&sys, " (tool request_agent).");
    }
    if (skills != NULL && skills[0] != '\0') {
        weft__buf_append_str(&sys, skills); /* worked examples from skill memory */
    }
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content",
                                          sys.data != NULL ? sys.data : ""));
    /* Conversational runs: the session so far. */
    for (size_t i = 0; run->store.history != NULL && i < json_array_size(run->store.history); i++) {
        const json_t *m = json_array_get(run->store.history, i);
        json_array_append_new(msgs, json_pack("{s:O, s:O}", "role", json_object_get(m, "role"),
                                              "content", json_object_get(m, "content")));
    }
    weft__buf_printf(&user, "Task: %s", step->task);
    if (run->cfg.input != NULL && run->store.history == NULL) {
        weft__buf_printf(&user, "\n\nRequest: %s", run->cfg.input);
    }
    for (size_t d = 0; d < step->depends_count; d++) {
        size_t j = weft__plan_find(&run->ps.plan, step->depends_on[d]);
        if (j != (size_t)-1 && run->ps.plan.steps[j].result != NULL) {
            weft__buf_printf(&user, "\n\nResult of %s (%s): %s", run->ps.plan.steps[j].id,
                             weft__rt_step_actor(run, &run->ps.plan.steps[j]),
                             run->ps.plan.steps[j].result);
        }
    }
    if (step->requested_by != NULL) {
        size_t j = weft__plan_find(&run->ps.plan, step->requested_by);
        if (j != (size_t)-1 && run->ps.plan.steps[j].result != NULL) {
            weft__buf_printf(&user, "\n\nFrom %s (%s): %s", run->ps.plan.steps[j].id,
                             weft__rt_step_actor(run, &run->ps.plan.steps[j]),
                             run->ps.plan.steps[j].result);
        }
    }
    if (step->extra_input != NULL) {
        weft__buf_printf(&user, "\n\nFeedback for another round: %s", step->extra_input);
    }
    if (feedback != NULL) {
        weft__buf_printf(&user, "\n\nYour previous answer was rejected. Feedback: %s", feedback);
    }
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content",
                                          user.data != NULL ? user.data : ""));
    weft__buf_cleanup(&sys);
    weft__buf_cleanup(&user);
    return msgs;
}

static bool
agent_has_tool(const struct wf_agent *agent, size_t tool)
{
    for (size_t i = 0; i < agent->tool_count; i++) {
        if (agent->tools[i] == tool) {
            return true;
        }
    }
    return false;
}

static void
queue_request(
    struct run *run, size_t step, const char *agent, const char *query, struct weft_span *span)
{
    struct weft_span_context requester;

    weft_span_context_of(span, &requester);
    weft__rt_request_add(run, step, agent, query, &requester);
}

/* What one tool call came to, as run_tool_call()'s phases fill it in: the outcome name for
 * weft.tool.outcome ("ok", "unknown_tool", "invalid_arguments", "error"), the error message,
 * the text for the tool message (owned, may stay NULL) and the tool's own outcome (owned).
 * is_infra: the call failed for a reason of the server's (down, timeout, protocol, oversized),
 * not the tool's: after its retries it fails the step instead of going back to the model. */
struct call_result {
    const char *outcome_name;
    char err[256];
    char *text;
    struct tool_outcome outcome;
    bool is_infra;
};

/* A tool call that failed the step (an infrastructure failure): its kind and the sentence. */
struct tool_failure {
    const char *kind; /* NULL: none */
    char why[400];
};

/* Whether an MCP call's error type is the server's fault rather than the tool's answer. The
 * client's types: "server_down" (exited, not running, could not restart), "timeout" (no
 * answer within timeout_s), "protocol" (broke JSON-RPC), "oversized" (a message over the
 * transport's 8 MiB cap). A tool's isError ("tool_error") and JSON-RPC errors (bad params)
 * are answers the model can act on. */
static bool
is_infra_type(const char *type)
{
    return strcmp(type, "server_down") == 0 || strcmp(type, "timeout") == 0 ||
           strcmp(type, "protocol") == 0 || strcmp(type, "oversized") == 0;
}

/* The fixed error kind of a failed call (weft.tool.errors' error.type, the step's error type
 * for infrastructure failures, the summaries' counts): a bounded set. */
static const char *
error_kind(const struct call_result *r, bool is_mcp)
{
    const char *type = r->outcome.error_type;

    /* Static strings only: the kind outlives @p r (it becomes the step's error type). */
    static const char *const same[] = {"server_down", "timeout", "oversized", "tool_error"};

    if (strcmp(r->outcome_name, "unknown_tool") == 0) {
        return "unknown_tool";
    }
    if (strcmp(r->outcome_name, "invalid_arguments") == 0) {
        return "invalid_arguments";
    }
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        if (strcmp(type, same[i]) == 0) {
            return same[i];
        }
    }
    if (strcmp(type, "protocol") == 0) {
        return "protocol_error";
    }
    if (strncmp(type, "jsonrpc_", 8) == 0) {
        return "jsonrpc_error";
    }
    /* A native tool that ran and failed (exit code, its own timeout, refused path) is the
     * tool's own error, as an MCP tool's isError is. */
    return is_mcp ? "error" : "tool_error";
}

/* Count one failed call of @p kind on step @p index: the step's error object keeps
 * {"tool_errors": {kind: n}} (stored with the step; `weft run show` and the explorer add
 * them up), whether the step then completes or fails. */
static void
count_step_tool_error(struct run *run, size_t index, const char *kind)
{
    struct plan_step *step = &run->ps.plan.steps[index];
    json_t *counts = NULL;

    if (step->error == NULL) {
        step->error = json_object();
    }
    counts = json_object_get(step->error, "tool_errors");
    if (step->error != NULL && !json_is_object(counts)) {
        counts = json_object();
        if (json_object_set_new(step->error, "tool_errors", counts) != 0) {
            counts = NULL;
        }
    }
    if (counts != NULL) {
        json_int_t n = json_integer_value(json_object_get(counts, kind));
        (void)json_object_set_new(counts, kind, json_integer(n + 1));
    }
}

/* The `execute_tool` span of @p call under @p agent_span, with the call's attributes. */
static struct weft_span *
tool_call_start(struct run *run, struct weft_span *agent_span, const struct llm_tool_call *call)
{
    struct weft_span *span =
        weft__rt_span_start(run, RT_SPAN_TOOL, call->name, agent_span, NULL, 0);

    weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_NAME, call->name);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_CALL_ID, call->id);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_TYPE, "function");
    weft__rt_span_task_attempt(run, span);
    weft__rt_span_content(run, span, WEFT__RK_GEN_AI_TOOL_CALL_ARGUMENTS, call->arguments);
    weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_INPUT, call->arguments);
    return span;
}

/* The built-in request_agent tool with validated @p args: queue the request for the supervisor,
 * or refuse an agent that does not exist or that @p agent may not request. */
static void
call_request(struct run *run,
             size_t step,
             struct weft_span *span,
             struct weft_span *agent_span,
             const struct wf_agent *agent,
             const json_t *args,
             struct call_result *r)
{
    const char *to = json_string_value(json_object_get(args, "agent"));
    size_t to_index = weft__rt_find_agent(run, to);

    weft__rk_set_str(span, WEFT__RK_REPLAN_TO, to);
    if (to_index == WF_NONE || !weft__wf_agent_can_request(agent, to_index)) {
        /* Told to the model at once, so it can pick another agent (nothing queued). */
        r->outcome_name = "invalid_arguments";
        snprintf(r->err, sizeof(r->err), "%s '%.64s'%s",
                 to_index == WF_NONE ? "no agent named" : "not allowed to request", to,
                 to_index == WF_NONE ? "" : " (not in this agent's can_request)");
        snprintf(r->outcome.error_type, sizeof(r->outcome.error_type), "%s",
                 to_index == WF_NONE ? "unknown_agent" : "agent_not_allowed");
    } else {
        queue_request(run, step, to, json_string_value(json_object_get(args, "query")), agent_span);
        r->text = weft__strdup("{\"status\":\"requested\",\"note\":\"the supervisor "
                               "will schedule the agent after this step\"}");
    }
}

/* What a native tool call needs while the run lock is released (rt_tool_fn). */
struct native_call {
    const struct tool_def *def;
    const char *workspace;
    const json_t *args;
};

static weft_err
native_run(void *ctx, struct tool_outcome *out)
{
    const struct native_call *c = ctx;

    return weft__tool_run(c->def, c->workspace, c->args, out);
}

/* Run tool @p def with validated @p args, its timeout cut to what is left of the step's
 * @p deadline. The run's lock is released while the tool runs; the watchdog is told before and
 * after. */
static void
call_tool(struct run *run,
          size_t step,
          struct weft_span *span,
          const struct tool_def *def,
          const char *name,
          const json_t *args,
          uint64_t deadline,
          struct call_result *r)
{
    const struct wf_agent *agent = weft__rt_agent(run, run->ps.plan.steps[step].agent);
    struct tool_def bounded = *def;
    uint32_t left = weft__rt_remaining_ms(run, deadline);
    weft_err trc = WEFT_OK;
    char activity[96];

    if (bounded.type == TOOL_COMMAND || bounded.type == TOOL_HTTP_GET) {
        uint32_t t = bounded.timeout_ms != 0 ? bounded.timeout_ms : 30000;
        bounded.timeout_ms = t < left ? t : (left > 0 ? left : 1);
    }
    snprintf(activity, sizeof(activity), "tool %.60s", name);
    weft__rt_watchdog_activity(run, activity, agent->name, run->ps.plan.steps[step].id);
    {
        struct native_call c = {&bounded, run->cfg.workspace, args};
        /* Kept with the run; a replay answers it from there (replay.h). */
        trc = weft__rt_tool_call(run, name, "native", args, native_run, &c, &r->outcome);
    }
    weft__rt_watchdog_progress(run);
    weft__rt_watchdog_poll(run, span);
    if (trc != WEFT_OK) {
        r->outcome_name = "error";
        snprintf(r->err, sizeof(r->err), "tool failed to run");
    } else {
        r->outcome_name = r->outcome.is_error ? "error" : "ok";
        r->text = r->outcome.output;
        r->outcome.output = NULL;
        if (r->outcome.is_error) {
            snprintf(r->err, sizeof(r->err), "%s", r->outcome.error_type);
        }
    }
    if (r->outcome.exit_code >= 0) {
        weft__rk_set_int(span, WEFT__RK_TOOL_EXIT_CODE, r->outcome.exit_code);
    }
    if (r->outcome.is_truncated) {
        weft__rk_set_bool(span, WEFT__RK_TOOL_TRUNCATED, true);
    }
}

/* weft.mcp.calls' outcome label for @p r: a bounded set (JSON-RPC error codes fold into one). */
static const char *
mcp_outcome(const struct call_result *r)
{
    const char *type = r->outcome.error_type;

    if (strcmp(r->outcome_name, "ok") == 0) {
        return "success";
    }
    if (strcmp(r->outcome_name, "invalid_arguments") == 0) {
        return "invalid_arguments";
    }
    if (strncmp(type, "jsonrpc_", 8) == 0) {
        return "jsonrpc_error";
    }
    if (strcmp(type, "tool_error") == 0 || is_infra_type(type)) {
        return type;
    }
    return "error";
}

/* What an MCP tool call needs while the run lock is released (rt_tool_fn). */
struct mcp_call {
    struct weft__mcp_client *client;
    const char *name;
    const json_t *args;
    const struct weft_span_context *parent;
    uint32_t timeout_ms;
    /* The run's span attributes for the call's span, when the hub is not the run's own (a
     * worker's, shared by its tasks' runs): NULL otherwise (the hub's clients carry them). */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* The MCP call, its result as a tool outcome (output = the content as text). */
static weft_err
mcp_run(void *ctx, struct tool_outcome *out)
{
    const struct mcp_call *c = ctx;
    struct weft__mcp_call_result res;

    memset(&res, 0, sizeof(res));
    (void)weft__mcp_client_call_attrs(c->client, c->name, c->args, c->parent, c->timeout_ms,
                                      c->span_attrs, c->span_attr_count, &res);
    out->is_error = res.is_error;
    out->exit_code = -1;
    out->is_truncated = res.is_truncated;
    snprintf(out->error_type, sizeof(out->error_type), "%.47s", res.error_type);
    out->output = res.text;
    res.text = NULL;
    weft__mcp_call_result_cleanup(&res);
    return WEFT_OK;
}

/* Tool @p name of MCP server @p server with @p args, validated first against the tool's
 * @p schema, its timeout cut to what is left of the step's @p deadline. The run's lock is
 * released during the call; its client span nests under @p span (the execute_tool span). */
static void
call_mcp(struct run *run,
         size_t step,
         struct weft_span *span,
         size_t server,
         const char *name,
         const json_t *args,
         const json_t *schema,
         uint64_t deadline,
         struct call_result *r)
{
    const struct wf_agent *agent = weft__rt_agent(run, run->ps.plan.steps[step].agent);
    struct weft__mcp_client *client = weft__mcp_hub_client(run->cfg.mcp, server);
    char *mcp_name = weft__mcp_hub_tool_name(run->cfg.mcp, server, name);
    struct weft_span_context ctx;
    char verr[200] = "";
    char activity[96];

    weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_TYPE, "extension");
    weft__rk_set_str(span, WEFT__RK_MCP_SERVER, run->cfg.wf->mcp[server].cfg.name);
    if (!json_is_object(args)) {
        r->outcome_name = "invalid_arguments";
        snprintf(r->err, sizeof(r->err), "arguments are not a JSON object");
    } else if (schema != NULL && !weft__tool_schema_validate(schema, args, verr, sizeof(verr))) {
        r->outcome_name = "invalid_arguments";
        snprintf(r->err, sizeof(r->err), "invalid arguments: %s", verr);
    } else if ((client == NULL || mcp_name == NULL) && run->cfg.replay == NULL) {
        r->outcome_name = "error";
        snprintf(r->err, sizeof(r->err), "MCP server %s is not running",
                 run->cfg.wf->mcp[server].cfg.name);
        snprintf(r->outcome.error_type, sizeof(r->outcome.error_type), "server_down");
        r->is_infra = true;
    } else {
        unsigned retries = run->cfg.wf->mcp[server].retries;
        snprintf(activity, sizeof(activity), "mcp tool %.60s", name);
        weft_span_context_of(span, &ctx);
        /* A server failure (down, timeout, protocol, oversized) is tried again up to the
         * server's "retries" (the client restarts a server that is down, with backoff), while
         * the step has time left; what still fails then fails the step (agent.c act()). */
        for (unsigned k = 0;; k++) {
            uint32_t left = weft__rt_remaining_ms(run, deadline);
            struct mcp_call c = {client,
                                 mcp_name,
                                 args,
                                 &ctx,
                                 deadline != 0 ? (left > 0 ? left : 1) : 0,
                                 run->cfg.is_mcp_borrowed ? run->tel.span_attrs : NULL,
                                 run->tel.span_attr_count};
            weft__rt_watchdog_activity(run, activity, agent->name, run->ps.plan.steps[step].id);
            /* Kept with the run; a replay answers it from there and calls no server. */
            (void)weft__rt_tool_call(run, name, "mcp", args, mcp_run, &c, &r->outcome);
            weft__rt_watchdog_progress(run);
            weft__rt_watchdog_poll(run, span);
            if (!r->outcome.is_error || !is_infra_type(r->outcome.error_type) || k >= retries ||
                weft__rt_aborted(run) ||
                (deadline != 0 && weft__rt_remaining_ms(run, deadline) == 0)) {
                break;
            }
            {
                struct weft_attr ev[3] = {
                    weft_attr_str(WEFT__ERROR_TYPE, r->outcome.error_type),
                    weft_attr_int("weft.tool.attempt", (int64_t)k + 1),
                    weft_attr_str("weft.tool.error", r->outcome.output != NULL
                                                         ? r->outcome.output
                                                         : r->outcome.error_type)};
                weft_span_add_event(span, "weft.tool.retry", ev, 3, 0);
            }
            r->outcome_name = "error";
            weft__rt_metrics_mcp(run->tel.metrics, run->cfg.wf->mcp[server].cfg.name,
                                 mcp_outcome(r), r->outcome.is_truncated);
            weft__tool_outcome_cleanup(&r->outcome);
            memset(&r->outcome, 0, sizeof(r->outcome));
            r->outcome.exit_code = -1;
        }
        r->outcome_name = r->outcome.is_error ? "error" : "ok";
        r->text = r->outcome.output;
        r->outcome.output = NULL;
        if (r->outcome.is_error) {
            if (r->outcome.error_type[0] == '\0') {
                snprintf(r->outcome.error_type, sizeof(r->outcome.error_type), "tool_error");
            }
            r->is_infra = is_infra_type(r->outcome.error_type);
            if (r->is_infra && r->text != NULL) {
                snprintf(r->err, sizeof(r->err), "%.47s: %.200s", r->outcome.error_type, r->text);
            } else {
                snprintf(r->err, sizeof(r->err), "%.47s", r->outcome.error_type);
            }
        }
        if (r->outcome.is_truncated) {
            weft__rk_set_bool(span, WEFT__RK_TOOL_TRUNCATED, true);
        }
    }
    weft__rt_metrics_mcp(run->tel.metrics, run->cfg.wf->mcp[server].cfg.name, mcp_outcome(r),
                         r->outcome.is_truncated);
    weft__free(mcp_name);
}

/* Record @p r on the span and end it. A failure gets the error type and status, and when the
 * tool gave no text, the model gets {"error", "type"} instead. */
static void
tool_call_finish(struct run *run,
                 struct weft_span *span,
                 const struct llm_tool_call *call,
                 bool is_request,
                 struct call_result *r)
{
    weft__rk_set_str(span, WEFT__RK_TOOL_OUTCOME, r->outcome_name);
    if (strcmp(r->outcome_name, "ok") != 0) {
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE,
                         r->outcome.error_type[0] != '\0' ? r->outcome.error_type
                                                          : r->outcome_name);
        weft_span_set_status(span, WEFT_STATUS_ERROR, r->err);
        if (r->text == NULL) {
            json_t *e = json_pack("{s:s, s:s}", "error", r->err, "type", r->outcome_name);
            char *dumped = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
            r->text = dumped != NULL ? weft__strdup(dumped) : NULL;
            free(dumped);
            json_decref(e);
        }
    }
    if (!is_request) { /* a request is a hand-off: the watchdog sees it when the step starts */
        weft__rt_watchdog_tool(run, span, call->name, call->arguments, r->text);
    }
    weft__rt_span_content(run, span, WEFT__RK_GEN_AI_TOOL_CALL_RESULT, r->text);
    weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT, r->text);
    weft_span_end(span, 0);
}

/* Run one tool call; returns the text for the tool message (new). A failure of the server's
 * (after its retries) is put in @p fail: it ends the attempt (act()). */
static char *
run_tool_call(struct run *run,
              size_t step,
              struct weft_span *agent_span,
              const struct llm_tool_call *call,
              uint64_t deadline,
              struct tool_failure *fail)
{
    const struct weft_workflow *wf = run->cfg.wf;
    const struct wf_agent *agent = weft__rt_agent(run, run->ps.plan.steps[step].agent);
    size_t idx = weft__wf_find_tool(wf, call->name);
    struct weft_span *span = tool_call_start(run, agent_span, call);
    struct call_result r;
    json_t *args = NULL;
    json_t *mcp_schema = NULL;
    size_t mcp_server = 0;
    uint64_t t0 = weft__monotonic_ns();

    memset(&r, 0, sizeof(r));
    r.outcome.exit_code = -1;
    r.outcome_name = "ok";
    args = json_loads(call->arguments != NULL ? call->arguments : "", JSON_DECODE_ANY, NULL);
    bool is_request = strcmp(call->name, "request_agent") == 0 && agent->can_request_count > 0;
    bool is_down = false; /* the tool is not offered because a server is not running */
    bool is_mcp = !is_request && (idx == WF_NONE || !agent_has_tool(agent, idx)) &&
                  run->cfg.mcp != NULL &&
                  weft__mcp_hub_find(run->cfg.mcp, agent, call->name, &mcp_server, &mcp_schema);
    if (is_mcp) {
        idx = WF_NONE;
        call_mcp(run, step, span, mcp_server, call->name, args, mcp_schema, deadline, &r);
    } else if (!is_request && (idx == WF_NONE || !agent_has_tool(agent, idx)) &&
               run->cfg.mcp != NULL &&
               weft__mcp_hub_down(run->cfg.mcp, agent, &mcp_server, r.err, sizeof(r.err))) {
        /* No running server offers the tool, and one of the agent's servers is not running:
         * the tool is most likely that server's. Say what happened (server_down), not
         * unknown_tool, which would send the model looking for another name. */
        is_down = true;
        r.outcome_name = "error";
        r.is_infra = true;
        snprintf(r.outcome.error_type, sizeof(r.outcome.error_type), "server_down");
        weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_TYPE, "extension");
        weft__rk_set_str(span, WEFT__RK_MCP_SERVER, wf->mcp[mcp_server].cfg.name);
        weft__rt_metrics_mcp(run->tel.metrics, wf->mcp[mcp_server].cfg.name, "server_down", false);
    } else if (!is_request && (idx == WF_NONE || !agent_has_tool(agent, idx))) {
        r.outcome_name = "unknown_tool";
        snprintf(r.err, sizeof(r.err), "unknown tool '%.64s' for agent %.64s", call->name,
                 agent->name);
    } else if (args == NULL || !json_is_object(args)) {
        r.outcome_name = "invalid_arguments";
        snprintf(r.err, sizeof(r.err), "arguments are not a JSON object");
    } else {
        const struct tool_def *def = is_request                     ? NULL
                                     : run->cfg.native[idx] != NULL ? run->cfg.native[idx]
                                                                    : &wf->tools[idx];
        json_t *schema = is_request ? weft__tool_builtin_schema(TOOL_REQUEST_AGENT) : NULL;
        const json_t *check = is_request ? schema : def->schema;
        char verr[200] = "";
        if (check != NULL && !weft__tool_schema_validate(check, args, verr, sizeof(verr))) {
            r.outcome_name = "invalid_arguments";
            snprintf(r.err, sizeof(r.err), "invalid arguments: %s", verr);
        } else if (is_request) {
            call_request(run, step, span, agent_span, agent, args, &r);
        } else {
            call_tool(run, step, span, def, call->name, args, deadline, &r);
        }
        json_decref(schema);
    }
    tool_call_finish(run, span, call, is_request, &r);
    run->tel.result->tool_calls++;
    if (strcmp(r.outcome_name, "ok") != 0) {
        const char *kind = error_kind(&r, is_mcp || is_down);
        weft__rt_metrics_tool_error(run->tel.metrics, agent->name, kind);
        count_step_tool_error(run, step, kind);
        if (r.is_infra && fail->kind == NULL) {
            fail->kind = kind;
            snprintf(fail->why, sizeof(fail->why), "tool %.64s failed (%s): %.300s", call->name,
                     kind, r.err);
        }
    }
    /* Every call counts, as in the run's tool_calls (refused ones as failures); a name the
     * workflow does not know is not a label value, so series stay bounded. */
    json_decref(mcp_schema);
    weft__rt_metrics_tool(
        run->tel.metrics, idx != WF_NONE || is_request || is_mcp ? call->name : "unknown",
        strcmp(r.outcome_name, "ok") == 0, (double)(weft__monotonic_ns() - t0) / 1e9);
    weft__rt_progress(run, WEFT_EVENT_TOOL_CALL, &run->ps.plan.steps[step], call->name);
    weft__tool_outcome_cleanup(&r.outcome);
    json_decref(args);
    return r.text != NULL ? r.text : weft__strdup("{\"error\":\"out of memory\"}");
}

static json_t *
assistant_tool_message(const struct llm_response *resp)
{
    json_t *calls = json_array();

    for (size_t i = 0; calls != NULL && i < resp->tool_call_count; i++) {
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                                               resp->tool_calls[i].id, "type", "function",
                                               "function", "name", resp->tool_calls[i].name,
                                               "arguments", resp->tool_calls[i].arguments));
    }
    return json_pack("{s:s, s:s?, s:o}", "role", "assistant", "content", resp->content,
                     "tool_calls", calls);
}

/* The tool loop of one attempt. @return the final text (new) or NULL with @p why set. */
static char *
act(struct run *run,
    size_t step,
    struct weft_span *span,
    json_t *msgs,
    uint64_t deadline,
    char *why,
    size_t why_len,
    const char **error_type)
{
    const struct wf_agent *agent = weft__rt_agent(run, run->ps.plan.steps[step].agent);
    json_t *tools = tools_json(run, agent);
    char *output = NULL;
    unsigned round = 0;
    struct tool_failure fail = {NULL, ""};

    for (round = 0; round < agent->max_tool_rounds; round++) {
        struct llm_response resp;
        struct llm_error lerr;

        if (round > 0 && agent->mcp_server_count > 0) {
            /* An MCP server's tools may have changed since the last round (list_changed). */
            json_decref(tools);
            tools = tools_json(run, agent);
        }
        if (weft__rt_aborted(run)) {
            snprintf(why, why_len, "aborted");
            *error_type = "aborted";
            break;
        }
        if (weft__rt_watchdog_should_stop(run)) {
            snprintf(why, why_len, "stopped by the watchdog: %.400s", run->watchdog.stuck_reason);
            *error_type = "stuck_loop";
            break;
        }
        if (deadline != 0 && weft__rt_remaining_ms(run, deadline) == 0) {
            snprintf(why, why_len, "step timeout reached");
            *error_type = "timeout";
            break;
        }
        if (round == 0 && run->cfg.opts->fork_answer != NULL && !run->ps.is_answer_overridden &&
            strcmp(run->ps.plan.steps[step].id, run->cfg.opts->fork_from_step) == 0) {
            run->ps.answer_override = run->cfg.opts->fork_answer; /* taken by the call */
        }
        if (weft__rt_llm_call(run, span, agent->name, flow_key(run, step), LLM_PURPOSE_ACT,
                              agent->model, msgs, tools, false, -1.0, deadline, &resp,
                              &lerr) != WEFT_OK) {
            snprintf(why, why_len, "LLM call failed (%s): %s", lerr.type, lerr.message);
            *error_type = "llm_error";
            break;
        }
        if (resp.tool_call_count == 0) {
            output = weft__strdup(resp.content != NULL ? resp.content : "");
            weft__llm_response_cleanup(&resp);
            break;
        }
        json_array_append_new(msgs, assistant_tool_message(&resp));
        for (size_t i = 0; i < resp.tool_call_count && fail.kind == NULL; i++) {
            char *text = run_tool_call(run, step, span, &resp.tool_calls[i], deadline, &fail);
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
                                                  resp.tool_calls[i].id, "content",
                                                  text != NULL ? text : ""));
            weft__free(text);
        }
        weft__llm_response_cleanup(&resp);
        if (fail.kind != NULL) {
            /* A server failure the retries did not cure: the step fails like any other
             * failed step (correction mode, budgets, the run's status and exit code), and
             * the agent's success rate does not count it as a success. */
            snprintf(why, why_len, "%s", fail.why);
            *error_type = fail.kind;
            break;
        }
    }
    if (output == NULL && fail.kind == NULL && round == agent->max_tool_rounds) {
        snprintf(why, why_len, "max_tool_rounds (%u) reached without a final answer",
                 agent->max_tool_rounds);
        *error_type = "max_tool_rounds";
    }
    weft__rk_set_int(span, WEFT__RK_STEP_TOOL_ROUNDS, round);
    json_decref(tools);
    return output;
}

/* replan_on: any keyword in the output (case-insensitive) asks for the configured agent. */
static void
check_replan_on(struct run *run, size_t step, const char *output, struct weft_span *span)
{
    const struct wf_agent *agent = weft__rt_agent(run, run->ps.plan.steps[step].agent);

    if (agent->replan_agent == WF_NONE || output == NULL) {
        return;
    }
    for (size_t i = 0; i < agent->replan_keyword_count; i++) {
        if (strcasestr(output, agent->replan_keywords[i]) != NULL) {
            struct weft_attr a = weft_attr_str("weft.replan.keyword", agent->replan_keywords[i]);
            weft_span_add_event(span, "weft.replan_on", &a, 1, 0);
            queue_request(run, step, run->cfg.wf->agents[agent->replan_agent].name, output, span);
            return;
        }
    }
}

/* The reflector's messages for @p output of step @p s: the agent's reflection instructions and
 * the task with the output to review. @return new, or NULL when out of memory. */
static json_t *
reflect_messages(const struct plan_step *s, const char *instructions, const char *output)
{
    struct weft__buf user;
    json_t *msgs = NULL;

    weft__buf_init(&user, 0);
    weft__buf_printf(&user,
                     "Task: %s\n\nOutput to review:\n%s\n\nAnswer as JSON: {\"status\": "
                     "\"APPROVED\"|\"FIXED\"|\"REJECTED\", \"refined_output\": ..., "
                     "\"feedback\": ...}",
                     s->task, output);
    msgs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", instructions, "role",
                     "user", "content", user.data != NULL ? user.data : "");
    weft__buf_cleanup(&user);
    return msgs;
}

/* Read the reflector's answer @p content ({"status", "refined_output", "feedback"}). Sets
 * *refined for FIXED and *feedback when given (both new); @p why says what is malformed. */
static verdict
read_verdict(const char *content, char **refined, char **feedback, char *why, size_t why_len)
{
    json_t *answer = json_loads(content != NULL ? content : "", 0, NULL);
    const char *status = json_string_value(json_object_get(answer, "status"));
    verdict v = VERDICT_REJECTED;

    if (status == NULL) {
        snprintf(why, why_len, "reflector output is not {\"status\": ...} JSON");
    } else if (strcmp(status, "APPROVED") == 0) {
        v = VERDICT_APPROVED;
    } else if (strcmp(status, "FIXED") == 0 &&
               json_is_string(json_object_get(answer, "refined_output"))) {
        v = VERDICT_FIXED;
        *refined = weft__strdup(json_string_value(json_object_get(answer, "refined_output")));
    } else if (strcmp(status, "FIXED") == 0) {
        snprintf(why, why_len, "FIXED without a refined_output string");
    } else if (strcmp(status, "REJECTED") != 0) {
        snprintf(why, why_len, "unknown status '%.32s'", status);
    }
    if (json_is_string(json_object_get(answer, "feedback"))) {
        *feedback = weft__strdup(json_string_value(json_object_get(answer, "feedback")));
    }
    json_decref(answer);
    return v;
}

/* The verdict as a GenAI evaluation event on the reflection @p span (score 1 approved, 0.5
 * fixed, 0 rejected; the feedback as explanation only when content is captured). */
static void
verdict_event(const struct run *run, struct weft_span *span, verdict v, const char *feedback)
{
    struct weft_attr a[4];
    size_t n = 0;

    a[n++] = weft_attr_str(WEFT__GENAI_EVALUATION_NAME, "reflection_verdict");
    a[n++] = weft_attr_str(WEFT__GENAI_EVALUATION_SCORE_LABEL, verdict_names[v]);
    a[n++] = weft_attr_double(WEFT__GENAI_EVALUATION_SCORE_VALUE, v == VERDICT_APPROVED ? 1.0
                                                                  : v == VERDICT_FIXED  ? 0.5
                                                                                        : 0.0);
    if (run->cfg.capture_content && feedback != NULL) {
        a[n++] = weft_attr_str(WEFT__GENAI_EVALUATION_EXPLANATION, feedback);
    }
    weft_span_add_event(span, WEFT__GENAI_EVALUATION_EVENT, a, n, 0);
}

/* Ask the reflector. @return the verdict; *refined and *feedback are new or NULL. */
static verdict
reflect(struct run *run,
        size_t step,
        struct weft_span *parent,
        const char *output,
        unsigned attempt,
        uint64_t deadline,
        char **refined,
        char **feedback)
{
    const struct plan_step *s = &run->ps.plan.steps[step];
    const struct wf_agent *agent = weft__rt_agent(run, s->agent);
    struct weft_span *span =
        weft__rt_span_start(run, RT_SPAN_REFLECT, agent->name, parent, NULL, 0);
    struct llm_response resp;
    struct llm_error lerr;
    json_t *msgs = NULL;
    verdict v = VERDICT_REJECTED;
    char why[256] = "";
    struct rt_prompt held;
    const char *instructions = NULL;
    weft_err call_err = WEFT_OK;

    *refined = NULL;
    *feedback = NULL;
    weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_NAME, agent->name);
    weft__rk_set_int(span, WEFT__RK_REFLECTION_ATTEMPT, attempt);
    weft__rk_set_str(span, WEFT__RK_STEP_ID, s->id);
    instructions =
        weft__rt_instructions_begin(run, agent->reflection.instructions, agent->reflection.prompt,
                                    "You review an agent's output.", &held);
    /* The plan may have moved while a managed prompt was fetched (the lock was released). */
    s = &run->ps.plan.steps[step];
    msgs = reflect_messages(s, instructions, output);
    call_err =
        weft__rt_llm_call(run, span, agent->name, flow_key(run, step), LLM_PURPOSE_REFLECT,
                          agent->reflection.model, msgs, NULL, true, -1.0, deadline, &resp, &lerr);
    weft__rt_instructions_end(&held);
    if (call_err != WEFT_OK) {
        snprintf(why, sizeof(why), "reflector LLM failed (%s): %.180s", lerr.type, lerr.message);
    } else {
        v = read_verdict(resp.content, refined, feedback, why, sizeof(why));
    }
    if (why[0] != '\0') {
        /* Malformed or failed reflection: a traced error that counts as one REJECTED. */
        v = VERDICT_REJECTED;
        weft__free(*feedback);
        *feedback = weft__strdup(why);
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "invalid_reflection");
        weft_span_set_status(span, WEFT_STATUS_ERROR, why);
    }
    weft__rk_set_str(span, WEFT__RK_REFLECTION_VERDICT, verdict_names[v]);
    weft__rt_span_content(run, span, WEFT__RK_REFLECTION_FEEDBACK, *feedback);
    verdict_event(run, span, v, *feedback);
    if (v == VERDICT_REJECTED) {
        weft__rt_watchdog_reflection(run, span, s->agent, *feedback, output);
    }
    weft_span_end(span, 0);
    weft__rt_add_verdict(run, agent->name, verdict_names[v]);
    weft__rt_metrics_verdict(run->tel.metrics, agent->name, verdict_names[v]);
    weft__rt_progress(run, WEFT_EVENT_VERDICT, s, verdict_names[v]);
    json_decref(msgs);
    weft__llm_response_cleanup(&resp);
    return v;
}

/* An agent step with an output_schema must answer JSON that validates against it. */
static bool
output_matches_schema(const struct plan_step *step, const char *output)
{
    const json_t *schema = json_object_get(step->spec, "output_schema");
    json_t *value = NULL;
    bool is_ok = false;

    if (schema == NULL) {
        return true;
    }
    value = json_loads(output, JSON_DECODE_ANY, NULL);
    is_ok = value != NULL && weft__tool_schema_validate(schema, value, NULL, 0);
    json_decref(value);
    return is_ok;
}

/* Attempt @p attempt of step @p index: its `invoke_agent` span, saved with the step (recovery
 * closes it if a kill leaves it open), with the step's attributes; progress and the watchdog are
 * told. Never NULL. */
struct weft_span *
weft__rt_agent_attempt_start(struct run *run,
                             size_t index,
                             const struct wf_agent *agent,
                             unsigned attempt)
{
    struct plan_step *step = &run->ps.plan.steps[index];
    struct weft_link_spec link;
    struct weft_span *span = NULL;
    char detail[32];

    memset(&link, 0, sizeof(link));
    link.context = step->requester;
    step->attempts++;
    weft__rt_step_begin(step->id, attempt); /* its tool calls are kept (and replayed) by it */
    span = weft__rt_span_start_under(run, RT_SPAN_AGENT, agent->name, &step->parent_ctx, &link,
                                     step->has_requester ? 1 : 0);
    weft_span_context_of(span, &step->span);
    step->span.trace_state = NULL;
    weft__rt_save_step(run, index);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_NAME, agent->name);
    weft__rk_set_str(span, WEFT__RK_STEP_ID, step->id);
    weft__rk_set_int(span, WEFT__RK_STEP_ATTEMPT, attempt);
    weft__rk_set_str(span, WEFT__RK_GRAPH_NODE_ID, agent->name);
    weft__rk_set_str(span, WEFT__RK_GRAPH_NODE_PARENT_ID, run->cfg.wf->supervisor.name);
    if (step->requested_by != NULL) {
        weft__rk_set_str(span, WEFT__RK_STEP_REQUESTED_BY, step->requested_by);
    }
    weft__rt_span_content(run, span, WEFT__RK_STEP_TASK, step->task);
    snprintf(detail, sizeof(detail), "attempt %u", attempt);
    weft__rt_progress(run, WEFT_EVENT_STEP_START, step, detail);
    weft__rt_watchdog_activity(run, "the step", agent->name, step->id);
    return span;
}

/* What one attempt produced: the output (owned), or why there is none. */
struct attempt {
    char *output;
    char *tools; /* the tool calls that worked (for a skill's solution), or NULL */
    char why[512];
    const char *error_type;
};

/* Ask the agent's model (act(), with its tool loop) for the step's output, with the
 * instructions from @p prompt (a managed prompt) or the workflow. */
static void
attempt_act(struct run *run,
            size_t index,
            struct weft_span *span,
            const struct wf_agent *agent,
            const struct rt_prompt *prompt,
            const char *skills,
            const char *feedback,
            uint64_t deadline,
            struct attempt *a)
{
    const char *instructions = agent->prompt != NULL ? prompt->text : agent->instructions;
    json_t *msgs = NULL;

    if (run->cfg.capture_content) {
        /* The agent's own instructions, apart from the chat history. */
        char *si = weft__semconv_system_instructions(instructions);
        weft__rt_span_content(run, span, WEFT__RK_GEN_AI_SYSTEM_INSTRUCTIONS, si);
        free(si);
    }
    msgs = attempt_messages(run, &run->ps.plan.steps[index], instructions, skills, feedback);
    weft__rt_set_prompt_link(agent->prompt != NULL ? agent->prompt->name : NULL,
                             agent->prompt != NULL ? prompt : NULL);
    a->output = act(run, index, span, msgs, deadline, a->why, sizeof(a->why), &a->error_type);
    if (a->output != NULL && run->cfg.wf->memory.is_skills) {
        a->tools = weft__rt_skills_tools(msgs);
    }
    weft__rt_set_prompt_link(NULL, NULL);
    json_decref(msgs);
}

/* Reflection on @p a's output: APPROVED keeps it, FIXED replaces it with the refined one,
 * REJECTED drops it and leaves the critique in *feedback for the next attempt. */
static void
attempt_reflect(struct run *run,
                size_t index,
                struct weft_span *span,
                unsigned attempt,
                unsigned max_attempts,
                uint64_t deadline,
                char **feedback,
                struct attempt *a)
{
    char *refined = NULL;
    char *fb = NULL;
    verdict v = reflect(run, index, span, a->output, attempt, deadline, &refined, &fb);

    weft__rk_set_str(span, WEFT__RK_REFLECTION_VERDICT, verdict_names[v]);
    if (v == VERDICT_FIXED) {
        weft__free(a->output);
        a->output = refined;
        refined = NULL;
    }
    if (v == VERDICT_REJECTED) {
        weft__free(*feedback);
        *feedback = fb != NULL ? fb : weft__strdup("rejected without feedback");
        fb = NULL;
        snprintf(a->why, sizeof(a->why), "REJECTED: %.400s", *feedback != NULL ? *feedback : "");
        a->error_type = "rejected";
        if (attempt < max_attempts) {
            weft__rt_count_loop(run, WEFT_LOOP_REFLECTION);
        }
        weft__free(a->output);
        a->output = NULL;
    }
    weft__free(refined);
    weft__free(fb);
}

/* Record attempt @p a on the step and its span: completed, retrying, or failed for good.
 * Takes a->output. @return true when the step is done (no further attempt). */
static bool
attempt_finish(struct run *run,
               size_t index,
               struct weft_span *span,
               unsigned attempt,
               unsigned max_attempts,
               struct attempt *a)
{
    struct plan_step *step = &run->ps.plan.steps[index];
    bool is_final = false;
    bool is_invalid = false;

    weft_span_context_of(span, &step->span);
    step->span.trace_state = NULL;
    if (a->output != NULL) {
        weft__free(step->result);
        step->result = a->output;
        a->output = NULL;
        weft__plan_step_set_status(&run->ps.plan, step, STEP_COMPLETED);
        weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT, step->result);
        weft__rk_set_str(span, WEFT__RK_STEP_STATUS, "completed");
        weft_span_set_status(span, WEFT_STATUS_OK, NULL);
        weft__rt_evaluate(run, index, RT_EVAL_SUCCESS, span);
        return true;
    }
    is_final = attempt >= max_attempts || strcmp(a->error_type, "rejected") != 0 ||
               weft__rt_watchdog_should_stop(run);
    weft__rk_set_str(span, WEFT__RK_STEP_STATUS, is_final ? "failed" : "retrying");
    weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, a->error_type);
    weft_span_set_status(span, WEFT_STATUS_ERROR, a->why);
    if (!is_final) {
        return false;
    }
    is_invalid =
        strcmp(a->error_type, "rejected") == 0 || strcmp(a->error_type, "invalid_output") == 0;
    weft__free(step->feedback);
    step->feedback = weft__strdup(a->why);
    weft__free(step->error_type);
    step->error_type = weft__strdup(a->error_type);
    {
        /* The counts of failed tool calls stay beside the error (count_step_tool_error). */
        json_t *counts = json_object_get(step->error, "tool_errors");
        json_t *error = json_pack("{s:s, s:s}", "error_type", a->error_type, "message", a->why);
        if (error != NULL && counts != NULL) {
            (void)json_object_set(error, "tool_errors", counts);
        }
        json_decref(step->error);
        step->error = error;
    }
    weft__plan_step_set_status(&run->ps.plan, step, STEP_FAILED);
    weft__rt_evaluate(run, index, is_invalid ? RT_EVAL_INVALID_OUTPUT : RT_EVAL_FAILURE, span);
    return true;
}

void
weft__rt_agent_step_end(struct run *run,
                        size_t index,
                        const struct wf_agent *agent,
                        struct weft_span *span,
                        const char *error_type)
{
    const struct plan_step *step = &run->ps.plan.steps[index];

    weft__rk_set_str(span, WEFT__RK_STEP_STATUS, weft__step_status_name(step->status));
    if (step->status != STEP_COMPLETED) {
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, error_type);
        weft_span_set_status(span, WEFT_STATUS_ERROR, step->feedback != NULL ? step->feedback : "");
    }
    weft_span_end(span, 0);
    weft__rt_metrics_agent(run->tel.metrics, agent->name, step->status == STEP_COMPLETED,
                           (double)(step->ended_ns - step->started_ns) / 1e9);
    weft__rt_progress(run, WEFT_EVENT_STEP_END, step, weft__step_status_name(step->status));
}

/* A team agent's step: its workflow runs as one sub-run under the step's invoke_agent span. */
static void
team_step(struct run *run, size_t index, const struct wf_agent *agent)
{
    struct weft_span *span = weft__rt_agent_attempt_start(run, index, agent, 1);
    struct weft_span_context ctx;

    weft__rk_set_str(span, WEFT__RK_TEAM_WORKFLOW, agent->team->name);
    weft_span_context_of(span, &ctx);
    weft__rt_run_subworkflow(run, index, agent->team, &ctx);
    weft__rt_agent_step_end(run, index, agent, span, "team_failed");
}

void
weft__rt_agent_step(struct run *run, size_t index)
{
    struct plan_step *step = &run->ps.plan.steps[index];
    const struct wf_agent *agent = weft__rt_agent(run, step->agent);
    uint32_t timeout =
        agent->timeout_ms != 0 ? agent->timeout_ms : run->cfg.wf->supervisor.step_timeout_ms;
    uint64_t deadline = timeout != 0 ? weft__monotonic_ns() + (uint64_t)timeout * 1000000u : 0;
    unsigned max_attempts = agent->has_reflection ? agent->reflection.max_retries + 1 : 1;
    char *feedback = NULL;
    bool is_done = false;
    struct rt_prompt prompt;
    bool is_prompt_resolved = false;
    char prompt_error[300] = "";
    struct rt_recall recall;
    char *tools = NULL;                 /* the last attempt's tool calls that worked */
    struct weft_span_context last_span; /* the last attempt's span: a skill's provenance */

    if (agent->team != NULL) {
        team_step(run, index, agent);
        return;
    }
    if (agent->architect != NULL) {
        weft__rt_architect_step(run, index, agent);
        return;
    }
    memset(&prompt, 0, sizeof(prompt));
    memset(&recall, 0, sizeof(recall));
    memset(&last_span, 0, sizeof(last_span));
    weft__plan_step_set_status(&run->ps.plan, step, STEP_IN_PROGRESS);
    step->started_ns = weft__now_ns();
    for (unsigned attempt = 1; attempt <= max_attempts && !is_done; attempt++) {
        struct weft_span *span = weft__rt_agent_attempt_start(run, index, agent, attempt);
        size_t token = weft_context_attach(span);
        struct attempt a;

        memset(&a, 0, sizeof(a));
        if (attempt == 1) {
            weft__rt_skills_recall(run, index, span, &recall);
        } else if (recall.ids != NULL) {
            weft__rt_skills_mark(span, recall.ids); /* every attempt saw them */
        }
        if (agent->prompt != NULL && !is_prompt_resolved) {
            /* Fetched (or cached) once per step, without the run lock. */
            char perr[256] = "";
            weft__rt_unlock(run);
            is_prompt_resolved =
                weft__rt_prompt_resolve(agent->prompt, &prompt, perr, sizeof(perr)) == WEFT_OK;
            weft__rt_lock(run);
            if (!is_prompt_resolved) {
                snprintf(prompt_error, sizeof(prompt_error), "instructions: %s", perr);
            }
        }
        weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_INPUT,
                              run->ps.plan.steps[index].task);
        if (agent->prompt != NULL && !is_prompt_resolved) {
            snprintf(a.why, sizeof(a.why), "%s", prompt_error);
            a.error_type = "prompt_unavailable";
        } else {
            attempt_act(run, index, span, agent, &prompt, recall.text, feedback, deadline, &a);
        }
        if (a.output != NULL) {
            check_replan_on(run, index, a.output, span);
            if (agent->has_reflection) {
                attempt_reflect(run, index, span, attempt, max_attempts, deadline, &feedback, &a);
            }
        }
        if (a.output != NULL && !output_matches_schema(&run->ps.plan.steps[index], a.output)) {
            snprintf(a.why, sizeof(a.why), "output does not match the step's output_schema");
            a.error_type = "invalid_output";
            weft__free(a.output);
            a.output = NULL;
        }
        is_done = attempt_finish(run, index, span, attempt, max_attempts, &a);
        weft__free(tools);
        tools = a.tools;
        weft_span_context_of(span, &last_span);
        weft_context_detach(token);
        weft_span_end(span, 0);
        /* act() and reflect() release the run lock: the plan may have moved. */
        step = &run->ps.plan.steps[index];
        weft__rt_progress(run, WEFT_EVENT_STEP_END, step, weft__step_status_name(step->status));
    }
    weft__free(feedback);
    weft__rt_prompt_cleanup(&prompt);
    step->ended_ns = weft__now_ns();
    weft__rt_skills_learn(run, index, tools, &last_span, recall.ids != NULL);
    step = &run->ps.plan.steps[index]; /* an embeddings call released the run lock */
    weft__free(tools);
    weft__rt_recall_cleanup(&recall);
    weft__rt_metrics_agent(run->tel.metrics, agent->name, step->status == STEP_COMPLETED,
                           (double)(step->ended_ns - step->started_ns) / 1e9);
    weft__rt_save_step(run, index);
    weft__rt_step_begin(NULL, 0);
}
