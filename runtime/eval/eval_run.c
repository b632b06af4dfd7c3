/* runtime/eval/eval_run.c - the evaluators that run something (include/weft/eval.h):
 *
 * command: the configured argv through the command tool (runtime/tools/command.c: its own
 * process group, the environment without credentials, a timeout), the run's output on stdin,
 * WEFT_EVAL_INPUT, WEFT_EVAL_EXPECTED, WEFT_EVAL_STATUS and WEFT_EVAL_NAME in its environment.
 * Exit 0 passes; a number alone on the last non-empty stdout line is the score (clamped to
 * 0..1), else the score is 1 or 0. A program that cannot start or times out is an error.
 * (The LLM judge is in eval_judge.c.) */
#include "runtime/eval/eval_int.h"
#include "runtime/tools/tools.h"

#include "base/mem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "NAME=value" (weft__free), or NULL. */
static char *
env_entry(const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value != NULL ? value : "") + 2;
    char *e = weft__malloc(len);

    if (e != NULL) {
        snprintf(e, len, "%s=%s", name, value != NULL ? value : "");
    }
    return e;
}

/* The number alone on the last non-empty line of @p text. @return false when there is none. */
static bool
last_line_number(const char *text, double *out)
{
    const char *end = text + strlen(text);
    const char *start = NULL;
    char line[64];
    char *stop = NULL;
    size_t len = 0;

    while (end > text && isspace((unsigned char)end[-1])) {
        end--;
    }
    start = end;
    while (start > text && start[-1] != '\n') {
        start--;
    }
    while (start < end && isspace((unsigned char)*start)) {
        start++;
    }
    len = (size_t)(end - start);
    if (len == 0 || len >= sizeof(line)) {
        return false;
    }
    memcpy(line, start, len);
    line[len] = '\0';
    *out = strtod(line, &stop);
    return stop != line && *stop == '\0' && isfinite(*out);
}

/* Score from the command's outcome @p out. */
static weft_err
command_verdict(const struct eval_def *d, const struct tool_outcome *out, struct weft_eval_score *s)
{
    json_t *result = json_loads(out->output != NULL ? out->output : "", 0, NULL);
    const char *stdout_text = json_string_value(json_object_get(result, "stdout"));
    const char *stderr_text = json_string_value(json_object_get(result, "stderr"));
    bool is_passed = out->exit_code == 0;
    double reward = is_passed ? 1 : 0;
    bool has_reward = stdout_text != NULL && last_line_number(stdout_text, &reward);
    weft_err err = WEFT_OK;

    if (out->exit_code < 0 || strcmp(out->error_type, "timeout") == 0 ||
        (out->is_error && strcmp(out->error_type, "exit_status") != 0)) {
        const char *msg = json_string_value(json_object_get(result, "error"));
        err = weft__eval_error(s, "%s: %s%s%.300s", d->argv[0], out->error_type,
                               msg != NULL ? ": " : "", msg != NULL ? msg : "");
    } else if (is_passed) {
        err = weft__eval_set(s, reward, true, "%s exited 0%s", d->argv[0],
                             has_reward ? " with a score" : "");
    } else {
        err = weft__eval_set(s, has_reward ? reward : 0, false, "%s exited %d: %.300s", d->argv[0],
                             out->exit_code,
                             stderr_text != NULL && *stderr_text != '\0' ? stderr_text
                             : stdout_text != NULL                       ? stdout_text
                                                                         : "");
    }
    json_decref(result);
    return err;
}

weft_err
weft__eval_score_command(const struct eval_def *d,
                         const struct weft_eval_subject *subject,
                         const struct weft_eval_context *context,
                         struct weft_eval_score *s)
{
    char *env[5] = {NULL};
    struct tool_def def;
    struct tool_outcome out;
    json_t *args = json_object();
    weft_err err = WEFT_OK;

    memset(&def, 0, sizeof(def));
    memset(&out, 0, sizeof(out));
    env[0] = env_entry("WEFT_EVAL_INPUT", subject->input);
    env[1] = env_entry("WEFT_EVAL_EXPECTED", subject->expected);
    env[2] = env_entry("WEFT_EVAL_NAME", d->name);
    env[3] =
        env_entry("WEFT_EVAL_STATUS",
                  subject->result != NULL ? weft_run_status_name(subject->result->status) : "");
    def.name = d->name;
    def.type = TOOL_COMMAND;
    def.argv = d->argv;
    def.argc = d->argc;
    def.timeout_ms = d->timeout_ms;
    def.stdin_text = subject->output != NULL ? subject->output : "";
    def.env_extra = (const char *const *)env;
    if (args == NULL || env[0] == NULL || env[1] == NULL || env[2] == NULL || env[3] == NULL) {
        err = WEFT_ENOMEM;
    } else {
        const char *dir = context->workdir != NULL ? context->workdir : ".";
        err = weft__tool_run(&def, dir, args, &out);
        if (err == WEFT_OK) {
            err = command_verdict(d, &out, s);
        } else if (err != WEFT_ENOMEM) {
            err = weft__eval_error(s, "%s could not run (%s)", d->argv[0], weft_strerror(err));
        }
    }
    weft__tool_outcome_cleanup(&out);
    json_decref(args);
    for (size_t i = 0; i < 4; i++) {
        weft__free(env[i]);
    }
    return err;
}
