/* runtime/steps/command_step.c - steps that need no model (command, file_writer, http_call).
 *
 * These are "command steps" (a plan step's `executor` field in the workflow file names its
 * kind); they are not the executor interface of executor.h, which is how the engine hands any
 * step, agent or command, to be run. Command steps reuse the tools (tools/): a command step is a
 * command tool with the step's argv, a file_writer step writes through the confined write_file,
 * an http_call step is an http_get allowed to exactly its own host. Each is an
 * `execute_tool {executor}` span under the run, validated per type (command: exit code 0 and the
 * optional expected-output pattern; file_writer: the file holds the expected content;
 * http_call: 2xx) and scored by the evaluator (evaluate.h).
 */
#include "runtime/steps/command_step.h"
#include "runtime/common/attr_keys.h"
#include "runtime/decide/evaluate.h"
#include "runtime/observe/spans.h"
#include "runtime/replay/replay.h"

#include "base/mem.h"
#include "base/time.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keep the last @p max bytes of @p text (at a UTF-8 boundary) for error details. */
static json_t *
tail(const char *text, size_t max)
{
    size_t len = text != NULL ? strlen(text) : 0;
    const char *p = text != NULL ? text : "";

    if (len > max) {
        p += len - max;
        while ((*p & 0xC0) == 0x80) {
            p++;
        }
    }
    return json_string(p);
}

static void
set_error(struct plan_step *s, const char *type, json_t *details)
{
    weft__free(s->error_type);
    s->error_type = weft__strdup(type);
    json_decref(s->error);
    s->error = details;
    if (s->error != NULL) {
        json_object_set_new(s->error, "error_type", json_string(type));
    }
}

/* What a command step's tool needs without the run lock (rt_tool_fn). */
struct step_call {
    const char *workspace;
    step_executor executor;
    const json_t *spec;
    uint32_t left_ms; /* the run's time left when the step started; UINT32_MAX: no deadline */
    const char *run_id;
    const char *step_id;
    const char *input; /* the run's request; NULL: none */
};

/* The most of the run's request a command sees in WEFT_RUN_INPUT (Linux takes at most 128 KiB
 * in one environment string). */
#define INPUT_ENV_MAX (64u * 1024u)

/* What a command step's process is told about its run (docs/workflow.md, "Command steps"):
 * WEFT_RUN_ID, WEFT_STEP_ID and WEFT_RUN_INPUT (cut at INPUT_ENV_MAX bytes on a character
 * boundary, WEFT_RUN_INPUT_TRUNCATED=1 then). Fills @p env (5 slots, NULL-ended) with new
 * strings; false when out of memory (free with free_env() either way). */
/* "NAME=" and the @p len bytes of @p value, as a new string; NULL when out of memory. */
static char *
env_entry(const char *name, const char *value, size_t len)
{
    size_t n = strlen(name);
    char *e = weft__malloc(n + 1 + len + 1);

    if (e != NULL) {
        memcpy(e, name, n);
        e[n] = '=';
        memcpy(e + n + 1, value, len);
        e[n + 1 + len] = '\0';
    }
    return e;
}

static bool
step_env(const struct step_call *c, char **env)
{
    const char *in = c->input != NULL ? c->input : "";
    size_t len = strlen(in);
    size_t n = 0;
    bool is_cut = len > INPUT_ENV_MAX;

    if (is_cut) {
        len = INPUT_ENV_MAX;
        while (len > 0 && ((unsigned char)in[len] & 0xC0u) == 0x80u) {
            len--; /* not inside a UTF-8 sequence */
        }
    }
    memset(env, 0, 5 * sizeof(*env));
    env[n++] = env_entry("WEFT_RUN_ID", c->run_id, strlen(c->run_id));
    env[n++] = env_entry("WEFT_STEP_ID", c->step_id != NULL ? c->step_id : "",
                         c->step_id != NULL ? strlen(c->step_id) : 0);
    env[n++] = env_entry("WEFT_RUN_INPUT", in, len);
    if (is_cut) {
        env[n++] = env_entry("WEFT_RUN_INPUT_TRUNCATED", "1", 1);
    }
    for (size_t i = 0; i < n; i++) {
        if (env[i] == NULL) {
            return false;
        }
    }
    return true;
}

static void
free_env(char **env)
{
    for (size_t i = 0; i < 4; i++) {
        weft__free(env[i]);
    }
}

/* Run the step's tool; fills @p out. */
static weft_err
run_executor(const struct step_call *c, struct tool_outcome *out)
{
    const char *workspace = c->workspace;
    step_executor executor = c->executor;
    const json_t *spec = c->spec;
    uint32_t left_ms = c->left_ms;
    char *env[5] = {NULL, NULL, NULL, NULL, NULL};
    struct tool_def def;
    json_t *args = NULL;
    char *host = NULL;
    char *argv_store[64];
    weft_err err = WEFT_OK;
    const json_t *timeout = json_object_get(spec, "timeout_s");

    memset(&def, 0, sizeof(def));
    def.name = (char *)weft__step_executor_name(executor);
    def.timeout_ms = json_is_number(timeout) ? (uint32_t)(json_number_value(timeout) * 1000.0) : 0;
    /* The run's deadline (timeout_s) cuts the step short too: a command never outlives its run. */
    if (left_ms != UINT32_MAX && (def.timeout_ms == 0 || def.timeout_ms > left_ms)) {
        def.timeout_ms = left_ms > 0 ? left_ms : 1;
    }
    if (executor == EXEC_COMMAND) {
        const json_t *argv = json_object_get(spec, "argv");
        def.type = TOOL_COMMAND;
        def.argc = json_array_size(argv) < 64 ? json_array_size(argv) : 64;
        for (size_t i = 0; i < def.argc; i++) {
            argv_store[i] = (char *)json_string_value(json_array_get(argv, i));
        }
        def.argv = argv_store;
        def.env_extra = (const char *const *)env;
        args = step_env(c, env) ? json_object() : NULL;
    } else if (executor == EXEC_FILE_WRITER) {
        def.type = TOOL_WRITE_FILE;
        args = json_pack("{s:O, s:O}", "path", json_object_get(spec, "path"), "content",
                         json_object_get(spec, "content"));
    } else {
        /* The workflow (or the corrective plan) named this URL: allow exactly its host. */
        const char *url = json_string_value(json_object_get(spec, "url"));
        const char *start = url != NULL ? strstr(url, "://") : NULL;
        size_t len = 0;
        if (start != NULL) {
            start += 3;
            len = strcspn(start, "/:?#");
            host = weft__strndup(start, len);
        }
        def.type = TOOL_HTTP_GET;
        def.allow_hosts = &host;
        def.allow_host_count = host != NULL ? 1 : 0;
        args = json_pack("{s:s}", "url", url != NULL ? url : "");
    }
    if (args == NULL) {
        weft__free(host);
        free_env(env);
        return WEFT_ENOMEM;
    }
    err = weft__tool_run(&def, workspace, args, out);
    json_decref(args);
    weft__free(host);
    free_env(env);
    return err;
}

static weft_err
step_run(void *ctx, struct tool_outcome *out)
{
    const struct step_call *c = ctx;

    return run_executor(c, out);
}

/* What the read-back of a file_writer step needs without the run lock (rt_tool_fn). */
struct check_call {
    const char *workspace;
    const json_t *args;
};

static weft_err
check_run(void *ctx, struct tool_outcome *out)
{
    const struct check_call *c = ctx;
    struct tool_def def;

    memset(&def, 0, sizeof(def));
    def.type = TOOL_READ_FILE;
    def.max_bytes = 64u << 20;
    return weft__tool_run(&def, c->workspace, c->args, out);
}

/* Does the file hold exactly the content the step wrote? (A tool call of its own: a replay
 * answers the read from the store, as it answered the write.) */
static bool
file_matches(struct run *run, const struct plan_step *s)
{
    struct tool_outcome out;
    json_t *args = json_pack("{s:O}", "path", json_object_get(s->spec, "path"));
    json_t *got = NULL;
    bool is_match = false;
    struct check_call c = {run->cfg.workspace, args};

    memset(&out, 0, sizeof(out));
    if (args != NULL &&
        weft__rt_tool_call(run, "read_file", "check", args, check_run, &c, &out) == WEFT_OK) {
        got = out.is_error ? NULL : json_loads(out.output, 0, NULL);
        is_match = got != NULL &&
                   json_equal(json_object_get(got, "content"), json_object_get(s->spec, "content"));
    }
    weft__tool_outcome_cleanup(&out);
    json_decref(got);
    json_decref(args);
    return is_match;
}

/* Start step @p index: in progress and saved, its tool span (linked to its requester) with the
 * step's attributes, progress told. Never NULL. */
static struct weft_span *
command_step_start(struct run *run, size_t index, const char *name)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    struct weft_link_spec link;
    struct weft_span *span = NULL;
    char detail[32];

    memset(&link, 0, sizeof(link));
    link.context = s->requester;
    weft__plan_step_set_status(&run->ps.plan, s, STEP_IN_PROGRESS);
    s->attempts++;
    s->started_ns = weft__now_ns();
    weft__rt_step_begin(s->id, s->attempts); /* its tool calls are kept (and replayed) by it */
    weft__rt_save_step(run, index);
    span = weft__rt_span_start_under(run, RT_SPAN_TOOL, name, &s->parent_ctx, &link,
                                     s->has_requester ? 1 : 0);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_TOOL_NAME, name);
    weft__rk_set_str(span, WEFT__RK_STEP_ID, s->id);
    weft__rk_set_str(span, WEFT__RK_STEP_EXECUTOR, name);
    weft__rk_set_int(span, WEFT__RK_STEP_ATTEMPT, s->attempts);
    weft__rt_span_task_attempt(run, span);
    if (s->parent != NULL) {
        weft__rk_set_str(span, WEFT__RK_STEP_PARENT, s->parent);
    }
    weft__rt_span_content(run, span, WEFT__RK_STEP_TASK, s->task);
    weft_span_context_of(span, &s->span);
    s->span.trace_state = NULL;
    snprintf(detail, sizeof(detail), "attempt %u", s->attempts);
    weft__rt_progress(run, WEFT_EVENT_STEP_START, s, detail);
    return span;
}

/* Does the stdout of command step @p s (in @p result, the tool's JSON output) match the spec's
 * expect_output pattern? If not, the step's error says so. */
static bool
output_expected(struct plan_step *s, const struct tool_outcome *out, const json_t *result)
{
    regex_t re;
    const char *stdout_text = json_string_value(json_object_get(result, "stdout"));
    bool is_match = true;

    if (regcomp(&re, json_string_value(json_object_get(s->spec, "expect_output")),
                REG_EXTENDED | REG_NOSUB) != 0 ||
        regexec(&re, stdout_text != NULL ? stdout_text : "", 0, NULL, 0) != 0) {
        is_match = false;
        set_error(s, "invalid_output",
                  json_pack("{s:i, s:o, s:O}", "exit_code", out->exit_code, "stdout_tail",
                            tail(stdout_text, 1000), "expected",
                            json_object_get(s->spec, "expect_output")));
    }
    regfree(&re);
    return is_match;
}

/* Judge what step @p index's executor gave (@p rc, @p out): a failure to run, a failed tool, or
 * output that is not what the step expects sets the step's error and @p why. */
static rt_eval
command_step_judge(struct run *run,
                   size_t index,
                   struct weft_span *span,
                   const char *name,
                   weft_err rc,
                   const struct tool_outcome *out,
                   char *why,
                   size_t why_len)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    json_t *result = NULL;
    rt_eval eval = RT_EVAL_SUCCESS;

    if (rc != WEFT_OK) {
        snprintf(why, why_len, "%s step could not run", name);
        set_error(s, "spawn_failed", json_object());
        return RT_EVAL_FAILURE;
    }
    result = json_loads(out->output, 0, NULL);
    if (out->exit_code >= 0) {
        weft__rk_set_int(span, WEFT__RK_TOOL_EXIT_CODE, out->exit_code);
    }
    if (out->is_error) {
        eval = RT_EVAL_FAILURE;
        snprintf(why, why_len, "%s failed: %s", name, out->error_type);
        set_error(s, out->error_type,
                  json_pack("{s:i, s:o, s:o}", "exit_code", out->exit_code, "stderr_tail",
                            tail(json_string_value(json_object_get(result, "stderr")), 2000),
                            "stdout_tail",
                            tail(json_string_value(json_object_get(result, "stdout")), 1000)));
    } else if (s->executor == EXEC_COMMAND &&
               json_is_string(json_object_get(s->spec, "expect_output"))) {
        if (!output_expected(s, out, result)) {
            eval = RT_EVAL_INVALID_OUTPUT;
            snprintf(why, why_len, "output does not match the expected pattern");
        }
    } else if (s->executor == EXEC_FILE_WRITER && !file_matches(run, s)) {
        eval = RT_EVAL_INVALID_OUTPUT;
        snprintf(why, why_len, "the file does not hold the expected content");
        set_error(s, "invalid_output", json_object());
    }
    json_decref(result);
    return eval;
}

/* Record @p eval on step @p s and its span: completed with the output as its result, or failed
 * with @p why as feedback; then end the span. */
static void
command_step_finish(struct run *run,
                    struct plan_step *s,
                    struct weft_span *span,
                    rt_eval eval,
                    const char *why,
                    const struct tool_outcome *out)
{
    if (eval == RT_EVAL_SUCCESS) {
        weft__free(s->result);
        s->result = weft__strdup(out->output != NULL ? out->output : "");
        weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
        weft__rk_set_str(span, WEFT__RK_STEP_STATUS, "completed");
        weft_span_set_status(span, WEFT_STATUS_OK, NULL);
    } else {
        weft__free(s->feedback);
        s->feedback = weft__strdup(why);
        weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
        weft__rk_set_str(span, WEFT__RK_STEP_STATUS, "failed");
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE,
                         s->error_type != NULL ? s->error_type : "failed");
        weft_span_set_status(span, WEFT_STATUS_ERROR, why);
    }
    weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT, out->output);
    weft_span_end(span, 0);
}

void
weft__command_step(struct run *run, size_t index)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    const char *name = weft__step_executor_name(s->executor);
    struct weft_span *span = command_step_start(run, index, name);
    struct tool_outcome out;
    rt_eval eval = RT_EVAL_SUCCESS;
    weft_err rc = WEFT_OK;
    char why[300] = "";

    memset(&out, 0, sizeof(out));
    {
        /* The spec object stays put while the lock is released; the step array may move. The
         * call is kept with the run, and a replay answers it from there (replay.h). */
        json_t *spec = json_incref(s->spec);
        struct step_call c = {
            run->cfg.workspace, s->executor, spec,          weft__rt_remaining_ms(run, 0),
            run->store.run_id,  s->id,       run->cfg.input};
        rc = weft__rt_tool_call(run, name, "step", spec, step_run, &c, &out);
        json_decref(spec);
        s = &run->ps.plan.steps[index];
    }
    eval = command_step_judge(run, index, span, name, rc, &out, why, sizeof(why));
    weft__rk_set_str(span, WEFT__RK_TOOL_OUTCOME, eval == RT_EVAL_SUCCESS ? "ok" : "error");
    weft__rt_evaluate(run, index, eval, span);
    command_step_finish(run, s, span, eval, why, &out);
    s->ended_ns = weft__now_ns();
    weft__rt_metrics_tool(run->tel.metrics, name, eval == RT_EVAL_SUCCESS,
                          (double)(s->ended_ns - s->started_ns) / 1e9);
    run->tel.result->tool_calls++;
    weft__tool_outcome_cleanup(&out);
    weft__rt_progress(run, WEFT_EVENT_STEP_END, s, weft__step_status_name(s->status));
    weft__rt_save_step(run, index);
    weft__rt_step_begin(NULL, 0);
}
