/* runtime/llm/scripted.c - the scripted provider (the embedded default) and script loading.
 *
 * A script is {"version": 1, "responses": {AGENT: {PURPOSE: [RESPONSE, ...]}}}; each call
 * takes the next unused response of its (agent, purpose) queue. A RESPONSE is
 * {"content": text | JSON value, "tool_calls": [{"id", "name", "arguments"}], "usage":
 * {"input_tokens", "output_tokens"}, "model", "error": {"type", "message"}, "delay_ms"} where
 * "request", "provider" (written by recordings) and "override" (a fork's given answer) are
 * ignored. A missing response is an LLM error, so failure paths can be scripted by leaving a
 * queue short, or by an explicit "error".
 *
 * The whole script is validated when loaded, so a typo fails `weft run` before the first
 * step rather than in the middle of a run.
 */
#include "llm.h"

#include "base/mem.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct scripted {
    json_t *responses; /* a reference into the script: agent -> purpose -> array; read-only */
    json_t *cursors;   /* "agent/purpose" -> integer: responses handed out; under lock */
    /* Responses whose call has returned. Saved cursors are these, so a call in flight when the
     * process died is answered again on resume (parallel flow steps hand out and finish in
     * different orders). */
    json_t *committed;
    /* The committed queues changed since weft__llm_scripted_cursors_changed() last took them, so a
     * step saves only its own cursors (all of them made step cost grow with plan size). */
    json_t *changed;
    pthread_mutex_t lock; /* parallel flow steps share one script */
};

static bool
has_only_keys(const json_t *obj, const char *const *allowed, const char **bad)
{
    const char *key = NULL;
    json_t *v = NULL;

    json_object_foreach((json_t *)obj, key, v)
    {
        bool is_known = false;
        (void)v;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            is_known = is_known || strcmp(key, allowed[i]) == 0;
        }
        if (!is_known) {
            *bad = key;
            return false;
        }
    }
    return true;
}

/* Validate one response; fills error->message with its path on failure. */
static bool
check_response(const json_t *r, const char *where, struct llm_error *error)
{
    static const char *const keys[] = {"content", "tool_calls", "usage",    "model",    "error",
                                       "request", "provider",   "delay_ms", "override", NULL};
    static const char *const call_keys[] = {"id", "name", "arguments", NULL};
    const char *bad = NULL;
    const json_t *calls = json_object_get(r, "tool_calls");
    const json_t *usage = json_object_get(r, "usage");
    const json_t *err = json_object_get(r, "error");

    if (!json_is_object(r)) {
        snprintf(error->message, sizeof(error->message), "%.120s: expected object", where);
        return false;
    }
    if (!has_only_keys(r, keys, &bad)) {
        snprintf(error->message, sizeof(error->message), "%.120s.%.60s: unknown key", where, bad);
        return false;
    }
    if (calls != NULL) {
        if (!json_is_array(calls)) {
            snprintf(error->message, sizeof(error->message), "%.120s.tool_calls: expected array",
                     where);
            return false;
        }
        for (size_t i = 0; i < json_array_size(calls); i++) {
            const json_t *c = json_array_get(calls, i);
            if (!json_is_object(c) || !has_only_keys(c, call_keys, &bad) ||
                !json_is_string(json_object_get(c, "name"))) {
                snprintf(error->message, sizeof(error->message),
                         "%.100s.tool_calls[%zu]: expected {\"name\": string, \"arguments\": "
                         "object or string, \"id\": string}",
                         where, i);
                return false;
            }
        }
    }
    if (usage != NULL && (!json_is_object(usage) ||
                          (json_object_get(usage, "input_tokens") != NULL &&
                           !json_is_integer(json_object_get(usage, "input_tokens"))) ||
                          (json_object_get(usage, "output_tokens") != NULL &&
                           !json_is_integer(json_object_get(usage, "output_tokens"))))) {
        snprintf(error->message, sizeof(error->message),
                 "%.120s.usage: expected {\"input_tokens\": integer, \"output_tokens\": integer}",
                 where);
        return false;
    }
    if (json_object_get(r, "delay_ms") != NULL &&
        (!json_is_integer(json_object_get(r, "delay_ms")) ||
         json_integer_value(json_object_get(r, "delay_ms")) < 0 ||
         json_integer_value(json_object_get(r, "delay_ms")) > 600000)) {
        snprintf(error->message, sizeof(error->message),
                 "%.120s.delay_ms: expected integer in [0, 600000]", where);
        return false;
    }
    if (err != NULL && !json_is_string(err) &&
        !(json_is_object(err) && json_is_string(json_object_get(err, "type")))) {
        snprintf(error->message, sizeof(error->message),
                 "%.120s.error: expected a string or {\"type\": string, \"message\": string}",
                 where);
        return false;
    }
    return true;
}

static bool
check_script(const json_t *script, struct llm_error *error)
{
    const json_t *responses = json_object_get(script, "responses");
    const json_t *version = json_object_get(script, "version");
    const char *agent = NULL;
    const char *bad = NULL;
    json_t *purposes = NULL;
    static const char *const keys[] = {"version", "responses", "description", NULL};

    if (!json_is_object(script) || !json_is_object(responses)) {
        snprintf(error->message, sizeof(error->message),
                 "expected {\"version\": 1, \"responses\": {AGENT: {PURPOSE: [...]}}}");
        return false;
    }
    if (!has_only_keys(script, keys, &bad)) {
        snprintf(error->message, sizeof(error->message), "%s: unknown key", bad);
        return false;
    }
    if (version != NULL && !(json_is_integer(version) && json_integer_value(version) == 1)) {
        snprintf(error->message, sizeof(error->message), "version: expected 1");
        return false;
    }
    json_object_foreach((json_t *)responses, agent, purposes)
    {
        const char *purpose = NULL;
        json_t *list = NULL;
        if (!json_is_object(purposes)) {
            snprintf(error->message, sizeof(error->message),
                     "responses.%s: expected an object of purposes", agent);
            return false;
        }
        json_object_foreach(purposes, purpose, list)
        {
            llm_purpose p;
            char where[160];
            if (!weft__llm_purpose_parse(purpose, &p)) {
                snprintf(error->message, sizeof(error->message),
                         "responses.%s.%s: unknown purpose (expected plan, route, act, reflect, "
                         "correct or summarize)",
                         agent, purpose);
                return false;
            }
            if (!json_is_array(list)) {
                snprintf(error->message, sizeof(error->message),
                         "responses.%s.%s: expected an array of responses", agent, purpose);
                return false;
            }
            for (size_t i = 0; i < json_array_size(list); i++) {
                snprintf(where, sizeof(where), "responses.%s.%s[%zu]", agent, purpose, i);
                if (!check_response(json_array_get(list, i), where, error)) {
                    return false;
                }
            }
        }
    }
    return true;
}

weft_err
weft__llm_script_load(const char *path, json_t **out, struct llm_error *error)
{
    json_error_t jerr;
    json_t *script = NULL;
    FILE *f = NULL;

    *out = NULL;
    memset(error, 0, sizeof(*error));
    f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(error->type, sizeof(error->type), "%s", "script_missing");
        snprintf(error->message, sizeof(error->message), "%s: cannot open", path);
        return WEFT_ENOTFOUND;
    }
    script = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (script == NULL) {
        snprintf(error->type, sizeof(error->type), "%s", "script_invalid");
        snprintf(error->message, sizeof(error->message), "%s:%d:%d: invalid JSON: %s", path,
                 jerr.line, jerr.column, jerr.text);
        return WEFT_EPARSE;
    }
    *out = script; /* checked by weft__llm_scripted_new() */
    return WEFT_OK;
}

weft_err
weft__llm_script_check(const char *path, struct llm_script_problem *out, json_t **doc)
{
    json_error_t jerr;
    struct llm_error error;
    json_t *script = NULL;
    FILE *f = NULL;
    const char *colon = NULL;

    memset(out, 0, sizeof(*out));
    memset(&error, 0, sizeof(error));
    if (doc != NULL) {
        *doc = NULL;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(out->message, sizeof(out->message), "cannot open: %s", strerror(errno));
        return WEFT_ENOTFOUND;
    }
    script = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (script == NULL) {
        out->line = jerr.line;
        out->column = jerr.column;
        snprintf(out->message, sizeof(out->message), "invalid JSON: %s", jerr.text);
        return WEFT_EPARSE;
    }
    if (check_script(script, &error)) {
        if (doc != NULL) {
            *doc = script;
        } else {
            json_decref(script);
        }
        return WEFT_OK;
    }
    json_decref(script);
    /* check_script says "FIELD: what was expected" (the field a JSON path without spaces), or
     * only what the whole script should look like. */
    colon = strstr(error.message, ": ");
    if (colon != NULL && memchr(error.message, ' ', (size_t)(colon - error.message)) == NULL) {
        snprintf(out->field, sizeof(out->field), "%.*s", (int)(colon - error.message),
                 error.message);
        snprintf(out->message, sizeof(out->message), "%s", colon + 2);
    } else {
        snprintf(out->message, sizeof(out->message), "%s", error.message);
    }
    return WEFT_EPARSE;
}

static char *
json_text(const json_t *v)
{
    char *dumped = NULL;
    char *copy = NULL;

    if (json_is_string(v)) {
        return weft__strdup(json_string_value(v));
    }
    dumped = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (dumped == NULL) {
        return NULL;
    }
    copy = weft__strdup(dumped);
    free(dumped);
    return copy;
}

static weft_err answer(struct scripted *s,
                       const struct llm_request *request,
                       struct llm_response *response,
                       struct llm_error *error,
                       char *key,
                       size_t key_len);

static weft_err
scripted_complete(void *self,
                  const struct llm_request *request,
                  struct llm_response *response,
                  struct llm_error *error)
{
    struct scripted *s = self;
    char key[256] = "";
    weft_err err = answer(s, request, response, error, key, sizeof(key));

    if (key[0] != '\0') {
        json_int_t used = 0;

        pthread_mutex_lock(&s->lock);
        used = json_integer_value(json_object_get(s->committed, key)) + 1;
        (void)json_object_set_new(s->committed, key, json_integer(used));
        (void)json_object_set_new(s->changed, key, json_integer(used));
        pthread_mutex_unlock(&s->lock);
    }
    return err;
}

/* Take the next response of @p list, the queue @p key (who/purpose), under the lock: its cursor
 * moves on by one. @return WEFT_OK with its position in *used, WEFT_ENOTFOUND when the queue is
 * used up (script_exhausted in @p error), WEFT_ENOMEM. */
static weft_err
take_next(struct scripted *s,
          const json_t *list,
          const char *key,
          const char *who,
          const char *purpose,
          json_int_t *used,
          struct llm_error *error)
{
    pthread_mutex_lock(&s->lock);
    *used = json_integer_value(json_object_get(s->cursors, key));
    if (list == NULL || (size_t)*used >= json_array_size(list)) {
        pthread_mutex_unlock(&s->lock);
        snprintf(error->type, sizeof(error->type), "%s", "script_exhausted");
        snprintf(error->message, sizeof(error->message),
                 "no scripted response left for %.100s/%s (%lld used)", who, purpose,
                 (long long)*used);
        return WEFT_ENOTFOUND;
    }
    if (json_object_set_new(s->cursors, key, json_integer(*used + 1)) != 0) {
        pthread_mutex_unlock(&s->lock);
        return WEFT_ENOMEM;
    }
    pthread_mutex_unlock(&s->lock);
    return WEFT_OK;
}

/* Wait out response @p r's "delay_ms". A scripted delay stands for a slow model: it is cut short
 * by the call's timeout, which then fails the call as a real client would (WEFT_ETIMEDOUT). */
static weft_err
scripted_delay(const json_t *r, const struct llm_request *request, struct llm_error *error)
{
    uint64_t delay = 0;
    bool is_cut = false;
    struct timespec ts;

    if (json_integer_value(json_object_get(r, "delay_ms")) <= 0) {
        return WEFT_OK;
    }
    delay = (uint64_t)json_integer_value(json_object_get(r, "delay_ms"));
    is_cut = request->timeout_ms != 0 && request->timeout_ms < delay;
    if (is_cut) {
        delay = request->timeout_ms;
    }
    ts.tv_sec = (time_t)(delay / 1000u);
    ts.tv_nsec = (long)(delay % 1000u) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
    if (is_cut) {
        snprintf(error->type, sizeof(error->type), "%s", "timeout");
        snprintf(error->message, sizeof(error->message), "no answer within %u ms",
                 request->timeout_ms);
        return WEFT_ETIMEDOUT;
    }
    return WEFT_OK;
}

/* A scripted failure: response @p r's "error" (a type, or {"type", "message"}) into @p error.
 * @return false when @p r is no failure; else true with the call's result in *code. */
static bool
scripted_failure(const json_t *r, struct llm_error *error, weft_err *code)
{
    const json_t *err = json_object_get(r, "error");
    const char *type = NULL;
    const char *msg = NULL;

    if (err == NULL) {
        return false;
    }
    type = json_is_string(err) ? json_string_value(err)
                               : json_string_value(json_object_get(err, "type"));
    msg = json_string_value(json_object_get(err, "message"));
    snprintf(error->type, sizeof(error->type), "%s", type);
    snprintf(error->message, sizeof(error->message), "%s", msg != NULL ? msg : "scripted failure");
    if (strcmp(type, "timeout") == 0) {
        *code = WEFT_ETIMEDOUT;
    } else {
        *code = strcmp(type, "invalid_response") == 0 ? WEFT_EPARSE : WEFT_EIO;
    }
    return true;
}

/* Copy response @p r's "tool_calls" into @p response (which owns them; tool_call_count counts
 * those begun, so that cleanup frees them on error). Ids default to call_<n>_<i>, with n the
 * response's number in its queue, arguments to {}. */
static weft_err
copy_tool_calls(const json_t *r, json_int_t used, struct llm_response *response)
{
    const json_t *calls = json_object_get(r, "tool_calls");

    if (json_array_size(calls) == 0) {
        return WEFT_OK;
    }
    response->tool_calls = weft__calloc(json_array_size(calls), sizeof(*response->tool_calls));
    if (response->tool_calls == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *c = json_array_get(calls, i);
        const json_t *args = json_object_get(c, "arguments");
        struct llm_tool_call *tc = &response->tool_calls[i];
        char id[48];

        snprintf(id, sizeof(id), "call_%lld_%zu", (long long)used + 1, i + 1);
        tc->id = weft__strdup(json_is_string(json_object_get(c, "id"))
                                  ? json_string_value(json_object_get(c, "id"))
                                  : id);
        tc->name = weft__strdup(json_string_value(json_object_get(c, "name")));
        tc->arguments = args != NULL ? json_text(args) : weft__strdup("{}");
        response->tool_call_count = i + 1;
        if (tc->id == NULL || tc->name == NULL || tc->arguments == NULL) {
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

/* Hand out the next response; @p key receives its queue's key once one was taken. */
static weft_err
answer(struct scripted *s,
       const struct llm_request *request,
       struct llm_response *response,
       struct llm_error *error,
       char *out_key,
       size_t out_key_len)
{
    const char *purpose = weft__llm_purpose_name(request->purpose);
    const char *who =
        request->step_key != NULL && json_object_get(s->responses, request->step_key) != NULL
            ? request->step_key
            : request->agent;
    const json_t *list = json_object_get(json_object_get(s->responses, who), purpose);
    const json_t *r = NULL;
    const json_t *usage = NULL;
    char key[256];
    json_int_t used = 0;
    weft_err rc = WEFT_OK;

    snprintf(key, sizeof(key), "%s/%s", who, purpose);
    rc = take_next(s, list, key, who, purpose, &used, error);
    if (rc != WEFT_OK) {
        return rc;
    }
    snprintf(out_key, out_key_len, "%s", key);
    r = json_array_get(list, (size_t)used); /* the responses never change: read unlocked */
    rc = scripted_delay(r, request, error);
    if (rc != WEFT_OK) {
        return rc;
    }
    if (scripted_failure(r, error, &rc)) {
        return rc;
    }
    if (json_object_get(r, "content") != NULL && !json_is_null(json_object_get(r, "content"))) {
        response->content = json_text(json_object_get(r, "content"));
        if (response->content == NULL) {
            return WEFT_ENOMEM;
        }
    }
    rc = copy_tool_calls(r, used, response);
    if (rc != WEFT_OK) {
        return rc;
    }
    usage = json_object_get(r, "usage");
    response->input_tokens = json_is_integer(json_object_get(usage, "input_tokens"))
                                 ? json_integer_value(json_object_get(usage, "input_tokens"))
                                 : -1;
    response->output_tokens = json_is_integer(json_object_get(usage, "output_tokens"))
                                  ? json_integer_value(json_object_get(usage, "output_tokens"))
                                  : -1;
    response->response_model = weft__strdup(json_is_string(json_object_get(r, "model"))
                                                ? json_string_value(json_object_get(r, "model"))
                                                : request->model);
    response->finish_reason = weft__strdup(response->tool_call_count > 0 ? "tool_calls" : "stop");
    response->attempts = 1;
    if (response->response_model == NULL || response->finish_reason == NULL) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

static void
scripted_free(void *self)
{
    struct scripted *s = self;

    if (s == NULL) {
        return;
    }
    json_decref(s->responses);
    json_decref(s->cursors);
    json_decref(s->committed);
    json_decref(s->changed);
    pthread_mutex_destroy(&s->lock);
    weft__free(s);
}

static const struct llm_provider_ops scripted_ops = {scripted_complete, scripted_free};

weft_err
weft__llm_scripted_new(json_t *script,
                       const char *origin,
                       struct llm_provider **out,
                       struct llm_error *error)
{
    struct scripted *s = NULL;
    struct llm_provider *p = NULL;

    *out = NULL;
    memset(error, 0, sizeof(*error));
    if (!check_script(script, error)) {
        char detail[sizeof(error->message)];
        memcpy(detail, error->message, sizeof(detail));
        snprintf(error->type, sizeof(error->type), "%s", "script_invalid");
        snprintf(error->message, sizeof(error->message), "%s: %.200s",
                 origin != NULL ? origin : "script", detail);
        return WEFT_EPARSE;
    }
    s = weft__calloc(1, sizeof(*s));
    p = weft__calloc(1, sizeof(*p));
    if (s == NULL || p == NULL) {
        weft__free(s);
        weft__free(p);
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    /* A reference, not a copy: the script is only read (under s->lock or not at all). */
    s->responses = json_incref(json_object_get(script, "responses"));
    s->cursors = json_object();
    s->committed = json_object();
    s->changed = json_object();
    if (s->responses == NULL || s->cursors == NULL || s->committed == NULL || s->changed == NULL) {
        goto fail;
    }
    p->ops = &scripted_ops;
    p->self = s;
    p->provider_name = "weft.scripted";
    *out = p;
    return WEFT_OK;
fail:
    if (s != NULL) {
        scripted_free(s);
    }
    weft__free(p);
    return WEFT_ENOMEM;
}

json_t *
weft__llm_scripted_cursors(const struct llm_provider *provider)
{
    struct scripted *s = NULL;
    json_t *copy = NULL;

    if (provider == NULL || provider->ops != &scripted_ops) {
        return NULL;
    }
    s = provider->self;
    pthread_mutex_lock(&s->lock);
    copy = json_deep_copy(s->committed);
    pthread_mutex_unlock(&s->lock);
    return copy;
}

json_t *
weft__llm_scripted_cursors_changed(struct llm_provider *provider)
{
    struct scripted *s = NULL;
    json_t *fresh = json_object();
    json_t *taken = NULL;

    if (provider == NULL || provider->ops != &scripted_ops || fresh == NULL) {
        json_decref(fresh);
        return NULL;
    }
    s = provider->self;
    pthread_mutex_lock(&s->lock);
    taken = s->changed;
    s->changed = fresh;
    pthread_mutex_unlock(&s->lock);
    return taken;
}

weft_err
weft__llm_scripted_restore(struct llm_provider *provider, const json_t *cursors)
{
    struct scripted *s = NULL;
    json_t *copy = NULL;
    const char *key = NULL;
    json_t *v = NULL;

    if (provider == NULL || provider->ops != &scripted_ops || !json_is_object(cursors)) {
        return WEFT_EINVAL;
    }
    json_object_foreach((json_t *)cursors, key, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            return WEFT_EINVAL;
        }
    }
    copy = json_deep_copy(cursors);
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    s = provider->self;
    pthread_mutex_lock(&s->lock);
    json_decref(s->cursors);
    json_decref(s->committed);
    s->cursors = copy;
    s->committed = json_deep_copy(copy);
    pthread_mutex_unlock(&s->lock);
    return WEFT_OK;
}
