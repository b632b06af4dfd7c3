/* runtime/replay/replay.c - replaying a stored run, and the tool calls' choke point (replay.h).
 *
 * A replay answers from memory: the original's exchanges become a script (the scripted
 * provider answers a request once it matched) and its tool results a table keyed by
 * "step \x1f attempt \x1f seq". Requests are compared the way they were stored: the live
 * request is dumped, redacted and parsed again, so a credential the store redacted does not
 * read as a change. Only the first difference is kept: it is what a user fixes; everything
 * after it follows from it.
 */
#include "runtime/replay/replay.h"
#include "runtime/common/attr_keys.h"
#include "runtime/common/secrets.h"
#include "runtime/run/run.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "tracing/ids.h"
#include "tracing/redact.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXCERPT_BEFORE 40  /* bytes of context shown before the first differing byte */
#define EXCERPT_BYTES  160 /* bytes shown of each side of a difference */

struct rt_replay {
    char run_id[72];
    json_t *script;                /* {"version": 1, "responses": {who: {purpose: [entry]}}} */
    json_t *cursors;               /* "who/purpose" -> calls answered */
    json_t *tools;                 /* key -> {"tool", "request", "outcome", "used"} */
    json_t *tool_order;            /* the keys in the order the original made the calls */
    struct llm_provider *scripted; /* answers a matched request */
    pthread_mutex_t lock;
    size_t llm_expected;
    size_t tool_expected;
    size_t llm_calls;
    size_t tool_calls;
    bool is_diverged;
    char *span; /* the first difference (owned) */
    char *step;
    char *what;
    char *expected;
    char *got;
};

/* The calling thread's step attempt (replay.h). */
static __thread char tl_step[128];
static __thread unsigned tl_attempt;
static __thread unsigned tl_seq;

void
weft__rt_step_begin(const char *step_id, unsigned attempt)
{
    snprintf(tl_step, sizeof(tl_step), "%s", step_id != NULL ? step_id : "");
    tl_attempt = attempt;
    tl_seq = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Differences                                                                                 */

/* A short view of @p text around byte @p at, after @p label: new (weft__free), NULL for NULL. */
static char *
excerpt(const char *label, const char *text, size_t at)
{
    size_t len = text != NULL ? strlen(text) : 0;
    size_t from = at > EXCERPT_BEFORE ? at - EXCERPT_BEFORE : 0;
    size_t n = 0;
    struct weft__buf b;

    if (text == NULL) {
        return NULL;
    }
    from = from > len ? len : from;
    while (from > 0 && ((unsigned char)text[from] & 0xC0) == 0x80) {
        from--;
    }
    n = weft__utf8_cut(text + from, len - from, EXCERPT_BYTES);
    weft__buf_init(&b, 0);
    (void)weft__buf_printf(&b, "%s%s%.*s%s", label, from > 0 ? "..." : "", (int)n, text + from,
                           from + n < len ? "..." : "");
    return b.data;
}

/* Where @p a and @p b first differ (the length of their common prefix). */
static size_t
first_difference(const char *a, const char *b)
{
    size_t i = 0;

    while (a != NULL && b != NULL && a[i] != '\0' && a[i] == b[i]) {
        i++;
    }
    return i;
}

/* Keep the first difference (the caller holds rp->lock). @p expected and @p got are whole
 * texts (may be NULL); the report shows each around the first byte where they differ, after
 * @p label (where in the request: "messages[2]: ", or ""). */
static void
diverge_at(struct rt_replay *rp,
           const char *span,
           const char *step,
           const char *what,
           const char *label,
           const char *expected,
           const char *got)
{
    size_t at = first_difference(expected, got);

    if (rp->is_diverged) {
        return;
    }
    rp->is_diverged = true;
    rp->span = weft__strdup(span);
    rp->step = step != NULL && step[0] != '\0' ? weft__strdup(step) : NULL;
    rp->what = weft__strdup(what);
    rp->expected = excerpt(label, expected, at);
    rp->got = excerpt(label, got, at);
}

static void
diverge(struct rt_replay *rp,
        const char *span,
        const char *step,
        const char *what,
        const char *expected,
        const char *got)
{
    diverge_at(rp, span, step, what, "", expected, got);
}

bool
weft__replay_diverged(struct rt_replay *rp, char *reason, size_t reason_len)
{
    bool is_diverged = false;

    if (rp == NULL) {
        return false;
    }
    pthread_mutex_lock(&rp->lock);
    is_diverged = rp->is_diverged;
    if (is_diverged && reason != NULL) {
        snprintf(reason, reason_len, "replay diverged from run %s at %s%s%s: %s", rp->run_id,
                 rp->span != NULL ? rp->span : "?", rp->step != NULL ? " of step " : "",
                 rp->step != NULL ? rp->step : "", rp->what != NULL ? rp->what : "?");
    }
    pthread_mutex_unlock(&rp->lock);
    return is_diverged;
}

/* @p value dumped compactly with sorted keys, redacted as the store redacts. New (weft__free). */
static char *
canonical(const json_t *value)
{
    char *raw = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *clean = raw != NULL ? weft__redact_text(raw) : NULL;
    json_t *again = clean != NULL ? json_loads(clean, JSON_DECODE_ANY, NULL) : NULL;
    char *out = NULL;

    free(raw);
    /* Redaction keeps JSON valid; dumped again so both sides have one form. */
    raw = again != NULL ? json_dumps(again, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    out = raw != NULL ? weft__strdup(raw) : clean;
    if (out != clean) {
        weft__free(clean);
    }
    free(raw);
    json_decref(again);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Loading                                                                                     */

static char *
tool_key(const char *step, unsigned attempt, unsigned seq)
{
    struct weft__buf b;

    weft__buf_init(&b, 0);
    (void)weft__buf_printf(&b, "%s\x1f%u\x1f%u", step, attempt, seq);
    return b.data;
}

static weft_err
load_tool(const struct weft__state_tool_result *r, void *user_data)
{
    struct rt_replay *rp = user_data;
    char *key = tool_key(r->step_id, r->attempt, r->seq);
    json_t *entry = json_pack("{s:s, s:s, s:s, s:b}", "tool", r->tool, "request", r->request,
                              "outcome", r->outcome, "used", 0);
    weft_err err = WEFT_ENOMEM;

    if (key != NULL && entry != NULL && json_object_set(rp->tools, key, entry) == 0 &&
        json_array_append_new(rp->tool_order, json_string(key)) == 0) {
        err = WEFT_OK;
    }
    json_decref(entry);
    weft__free(key);
    return err;
}

static size_t
count_exchanges(const json_t *script)
{
    const char *who = NULL;
    const json_t *purposes = NULL;
    size_t n = 0;

    json_object_foreach((json_t *)json_object_get(script, "responses"), who, purposes)
    {
        const char *purpose = NULL;
        const json_t *list = NULL;
        json_object_foreach((json_t *)purposes, purpose, list)
        {
            n += json_array_size(list);
        }
    }
    return n;
}

/* The run's stored exchanges and tool results into @p rp. */
static weft_err
load_calls(struct rt_state *st, struct rt_replay *rp, char *error, size_t error_len)
{
    struct llm_error lerr;
    weft_err err = weft__state_exchanges_script(st, rp->run_id, &rp->script);

    if (err == WEFT_ENOTFOUND) { /* a run without LLM calls replays its tools alone */
        rp->script = json_pack("{s:i, s:{}}", "version", 1, "responses");
        err = rp->script != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    if (err == WEFT_OK) {
        err = weft__llm_scripted_new(rp->script, "stored run", &rp->scripted, &lerr);
        if (err != WEFT_OK) {
            snprintf(error, error_len, "replay: the stored exchanges of run %s: %s", rp->run_id,
                     lerr.message);
        }
    }
    if (err == WEFT_OK) {
        err = weft__state_tool_results_each(st, rp->run_id, load_tool, rp);
    }
    rp->llm_expected = count_exchanges(rp->script);
    rp->tool_expected = json_array_size(rp->tool_order);
    return err;
}

weft_err
weft__replay_open(struct rt_state *st,
                  const char *ref,
                  struct rt_replay **out,
                  struct weft_run_info *info,
                  char *error,
                  size_t error_len)
{
    struct rt_replay *rp = NULL;
    char why[160] = "";
    weft_err err = WEFT_OK;

    *out = NULL;
    memset(info, 0, sizeof(*info));
    rp = weft__calloc(1, sizeof(*rp));
    if (rp == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&rp->lock, NULL);
    rp->cursors = json_object();
    rp->tools = json_object();
    rp->tool_order = json_array();
    err =
        rp->cursors != NULL && rp->tools != NULL && rp->tool_order != NULL ? WEFT_OK : WEFT_ENOMEM;
    if (err == WEFT_OK) {
        err = weft__state_run_resolve(st, ref, rp->run_id, sizeof(rp->run_id), why, sizeof(why));
        if (err != WEFT_OK) {
            snprintf(error, error_len, "replay: %s",
                     why[0] != '\0' ? why : "no such run in the state database");
        }
    }
    if (err == WEFT_OK) {
        err = weft__state_run_info(st, rp->run_id, info);
    }
    if (err == WEFT_OK && strcmp(info->status, "running") == 0) {
        snprintf(error, error_len, "replay: run %s is still running; replay it once it ended",
                 rp->run_id);
        err = WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        err = load_calls(st, rp, error, error_len);
    }
    if (err != WEFT_OK) {
        weft__state_info_cleanup(info);
        weft__replay_free(rp);
        return err;
    }
    *out = rp;
    return WEFT_OK;
}

const char *
weft__replay_run_id(const struct rt_replay *rp)
{
    return rp->run_id;
}

void
weft__replay_free(struct rt_replay *rp)
{
    if (rp == NULL) {
        return;
    }
    json_decref(rp->script);
    json_decref(rp->cursors);
    json_decref(rp->tools);
    json_decref(rp->tool_order);
    weft__llm_provider_free(rp->scripted);
    pthread_mutex_destroy(&rp->lock);
    weft__free(rp->span);
    weft__free(rp->step);
    weft__free(rp->what);
    weft__free(rp->expected);
    weft__free(rp->got);
    weft__free(rp);
}

/* ------------------------------------------------------------------------------------------ */
/* LLM calls                                                                                   */

/* The first difference between the stored request @p stored and the live one @p live
 * ({"model", "messages"}): false when they are the same; else @p label names the part and
 * *expected and *got (new) hold it as whole texts ("(none)" for a message one side lacks). */
static bool
request_differs(const json_t *stored,
                const json_t *live,
                char *label,
                size_t label_len,
                char **expected,
                char **got)
{
    const json_t *sm = json_object_get(stored, "messages");
    const json_t *lm = json_object_get(live, "messages");
    size_t n =
        json_array_size(sm) > json_array_size(lm) ? json_array_size(sm) : json_array_size(lm);

    *expected = NULL;
    *got = NULL;
    if (!json_equal(json_object_get(stored, "model"), json_object_get(live, "model"))) {
        snprintf(label, label_len, "model: ");
        *expected = canonical(json_object_get(stored, "model"));
        *got = canonical(json_object_get(live, "model"));
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(sm, i);
        const json_t *b = json_array_get(lm, i);
        if (a == NULL || b == NULL || !json_equal(a, b)) {
            snprintf(label, label_len, "messages[%zu]: ", i);
            *expected = a != NULL ? canonical(a) : weft__strdup("(none)");
            *got = b != NULL ? canonical(b) : weft__strdup("(none)");
            return true;
        }
    }
    return false;
}

/* The live request as it would have been stored: model and messages, redacted. */
static json_t *
live_request(const struct llm_request *req)
{
    json_t *raw = json_pack("{s:s, s:O}", "model", req->model != NULL ? req->model : "", "messages",
                            req->messages != NULL ? req->messages : json_null());
    char *text = raw != NULL ? canonical(raw) : NULL;
    json_t *out = text != NULL ? json_loads(text, 0, NULL) : NULL;

    json_decref(raw);
    weft__free(text);
    return out;
}

/* Check @p req against the stored call at its position (rp->lock held). true: it matched
 * and the position moved on. */
static bool
check_call(struct rt_replay *rp, const struct llm_request *req)
{
    const json_t *responses = json_object_get(rp->script, "responses");
    const char *purpose = weft__llm_purpose_name(req->purpose);
    const char *who = req->step_key != NULL && json_object_get(responses, req->step_key) != NULL
                          ? req->step_key
                          : req->agent;
    const json_t *list = json_object_get(json_object_get(responses, who), purpose);
    char key[256];
    char span[160];
    char label[48] = "";
    json_int_t used = 0;
    json_t *live = live_request(req);
    char *expected = NULL;
    char *got = NULL;
    bool is_match = false;

    snprintf(key, sizeof(key), "%s/%s", who, purpose);
    snprintf(span, sizeof(span), "chat %.120s", req->model != NULL ? req->model : "");
    used = json_integer_value(json_object_get(rp->cursors, key));
    if (live == NULL) {
        diverge(rp, span, tl_step, "request", NULL, "(out of memory)");
    } else if ((size_t)used >= json_array_size(list)) {
        got = canonical(json_object_get(live, "messages"));
        diverge(rp, span, tl_step, "unexpected_call", NULL, got);
    } else if (request_differs(json_object_get(json_array_get(list, (size_t)used), "request"), live,
                               label, sizeof(label), &expected, &got)) {
        diverge_at(rp, span, tl_step, "request", label, expected, got);
    } else {
        is_match = json_object_set_new(rp->cursors, key, json_integer(used + 1)) == 0;
        rp->llm_calls += is_match ? 1 : 0;
    }
    weft__free(expected);
    weft__free(got);
    json_decref(live);
    return is_match;
}

static weft_err
replay_complete(void *self,
                const struct llm_request *request,
                struct llm_response *response,
                struct llm_error *error)
{
    struct rt_replay *rp = self;
    bool is_match = false;

    memset(response, 0, sizeof(*response));
    pthread_mutex_lock(&rp->lock);
    is_match = !rp->is_diverged && check_call(rp, request);
    pthread_mutex_unlock(&rp->lock);
    if (!is_match) {
        snprintf(error->type, sizeof(error->type), "%s", "replay_diverged");
        snprintf(error->message, sizeof(error->message),
                 "the replay of run %s diverged: no stored answer for this request", rp->run_id);
        return WEFT_EIO;
    }
    return weft__llm_complete(rp->scripted, request, response, error);
}

static void
replay_provider_free(void *self)
{
    (void)self; /* the replay belongs to the run (weft__replay_free()) */
}

static const struct llm_provider_ops replay_ops = {replay_complete, replay_provider_free};

weft_err
weft__replay_provider_new(struct rt_replay *rp, struct llm_provider **out)
{
    struct llm_provider *p = weft__calloc(1, sizeof(*p));

    *out = NULL;
    if (p == NULL) {
        return WEFT_ENOMEM;
    }
    p->ops = &replay_ops;
    p->self = rp;
    p->provider_name = "weft.replay";
    *out = p;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tool calls                                                                                  */

/* The stored outcome @p text into @p out; @return the stored call's result. */
static weft_err
outcome_from(const char *text, struct tool_outcome *out)
{
    json_t *o = json_loads(text != NULL ? text : "", 0, NULL);
    const char *output = json_string_value(json_object_get(o, "output"));
    const char *type = json_string_value(json_object_get(o, "error_type"));
    weft_err rc = (weft_err)json_integer_value(json_object_get(o, "rc"));

    memset(out, 0, sizeof(*out));
    out->is_error = json_is_true(json_object_get(o, "is_error"));
    out->exit_code = json_is_integer(json_object_get(o, "exit_code"))
                         ? (int)json_integer_value(json_object_get(o, "exit_code"))
                         : -1;
    out->is_truncated = json_is_true(json_object_get(o, "is_truncated"));
    snprintf(out->error_type, sizeof(out->error_type), "%s", type != NULL ? type : "");
    out->output = weft__strdup(output != NULL ? output : "");
    json_decref(o);
    return out->output != NULL ? rc : WEFT_ENOMEM;
}

/* A tool call the replay cannot answer: a failed outcome the step sees as an error. */
static weft_err
diverged_outcome(struct tool_outcome *out)
{
    memset(out, 0, sizeof(*out));
    out->is_error = true;
    out->exit_code = -1;
    snprintf(out->error_type, sizeof(out->error_type), "%s", "replay_diverged");
    out->output = weft__strdup("{\"error\":\"the replay diverged from the original run\"}");
    return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* Answer call @p seq of the thread's step attempt from @p rp. */
static weft_err
replay_tool(struct rt_replay *rp,
            unsigned seq,
            const char *tool,
            const json_t *args,
            struct tool_outcome *out)
{
    char *key = tool_key(tl_step, tl_attempt, seq);
    json_t *entry = NULL;
    char *live = canonical(args != NULL ? args : json_null());
    char span[160];
    char *stored = NULL;
    weft_err rc = WEFT_OK;

    snprintf(span, sizeof(span), "execute_tool %.120s", tool);
    pthread_mutex_lock(&rp->lock);
    entry = key != NULL ? json_object_get(rp->tools, key) : NULL;
    if (!rp->is_diverged && entry == NULL) {
        diverge(rp, span, tl_step, "unexpected_call", NULL, live);
    } else if (!rp->is_diverged &&
               strcmp(json_string_value(json_object_get(entry, "tool")), tool) != 0) {
        diverge(rp, span, tl_step, "request", json_string_value(json_object_get(entry, "tool")),
                tool);
    } else if (!rp->is_diverged) {
        json_t *req =
            json_loads(json_string_value(json_object_get(entry, "request")), JSON_DECODE_ANY, NULL);
        stored = req != NULL ? canonical(req) : NULL;
        json_decref(req);
        if (stored == NULL || live == NULL || strcmp(stored, live) != 0) {
            diverge(rp, span, tl_step, "request", stored, live);
        }
    }
    if (!rp->is_diverged) {
        json_object_set_new(entry, "used", json_true());
        rp->tool_calls++;
        rc = outcome_from(json_string_value(json_object_get(entry, "outcome")), out);
    } else {
        rc = diverged_outcome(out);
    }
    pthread_mutex_unlock(&rp->lock);
    weft__free(stored);
    weft__free(live);
    weft__free(key);
    return rc;
}

/* @p text cut to WEFT_TOOL_RESULT_MAX and scrubbed of configured secrets. New, or NULL. */
static char *
stored_text(const char *text)
{
    char *capped = weft__skill_cap(text != NULL ? text : "", WEFT_TOOL_RESULT_MAX);

    if (capped != NULL && weft__rt_secrets_scrub_owned(&capped) != WEFT_OK) {
        return NULL; /* scrub frees on failure */
    }
    return capped;
}

/* The request as stored: the arguments' JSON, or, over the cap, a JSON string of the cut text
 * (a replay of that call then differs, and says so). New (free()), or NULL. */
static char *
request_text(const json_t *args)
{
    char *raw = json_dumps(args != NULL ? args : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
    char *cut = NULL;
    json_t *s = NULL;

    if (raw == NULL || strlen(raw) <= WEFT_TOOL_RESULT_MAX) {
        return raw;
    }
    cut = weft__skill_cap(raw, WEFT_TOOL_RESULT_MAX - 64);
    free(raw);
    s = cut != NULL ? json_string(cut) : NULL;
    raw = s != NULL ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    weft__free(cut);
    return raw;
}

/* Keep call @p seq with the run (the run lock held); failures are logged by the store. */
static void
keep_tool(struct run *run,
          unsigned seq,
          const char *tool,
          const char *kind,
          const json_t *args,
          weft_err rc,
          const struct tool_outcome *out)
{
    struct weft__state_tool_result row;
    char *output = stored_text(out->output);
    char *request = request_text(args);
    json_t *o = output != NULL
                    ? json_pack("{s:i, s:s, s:b, s:s, s:i, s:b}", "rc", (int)rc, "output", output,
                                "is_error", out->is_error, "error_type", out->error_type,
                                "exit_code", out->exit_code, "is_truncated", out->is_truncated)
                    : NULL;
    char *outcome = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

    if (run->store.state != NULL && request != NULL && outcome != NULL) {
        memset(&row, 0, sizeof(row));
        row.step_id = tl_step;
        row.attempt = tl_attempt;
        row.seq = seq;
        row.tool = tool;
        row.kind = kind;
        row.request = request;
        row.outcome = outcome;
        (void)weft__state_tool_result_add(run->store.state, run->store.run_id, &row);
    }
    free(outcome);
    json_decref(o);
    free(request);
    weft__free(output);
}

weft_err
weft__rt_tool_call(struct run *run,
                   const char *tool,
                   const char *kind,
                   const json_t *args,
                   rt_tool_fn fn,
                   void *ctx,
                   struct tool_outcome *out)
{
    unsigned seq = ++tl_seq;
    weft_err rc = WEFT_OK;

    if (run->cfg.replay != NULL) {
        rc = replay_tool(run->cfg.replay, seq, tool, args, out);
    } else {
        weft__rt_unlock(run);
        rc = fn(ctx, out);
        weft__rt_lock(run);
    }
    if (out->output != NULL || rc == WEFT_OK) {
        keep_tool(run, seq, tool, kind, args, rc, out);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* The end                                                                                     */

/* The first stored call nobody asked for, as the difference (rp->lock held). */
static void
find_missing(struct rt_replay *rp)
{
    const char *who = NULL;
    const json_t *purposes = NULL;

    for (size_t i = 0; !rp->is_diverged && i < json_array_size(rp->tool_order); i++) {
        const char *key = json_string_value(json_array_get(rp->tool_order, i));
        const json_t *e = json_object_get(rp->tools, key);
        if (!json_is_true(json_object_get(e, "used"))) {
            char span[160];
            snprintf(span, sizeof(span), "execute_tool %.120s",
                     json_string_value(json_object_get(e, "tool")));
            diverge(rp, span, NULL, "missing_call",
                    json_string_value(json_object_get(e, "request")), NULL);
            weft__free(rp->step);
            rp->step = weft__strndup(key, strcspn(key, "\x1f"));
        }
    }
    json_object_foreach((json_t *)json_object_get(rp->script, "responses"), who, purposes)
    {
        const char *purpose = NULL;
        const json_t *list = NULL;
        json_object_foreach((json_t *)purposes, purpose, list)
        {
            char key[256];
            json_int_t used = 0;
            snprintf(key, sizeof(key), "%s/%s", who, purpose);
            used = json_integer_value(json_object_get(rp->cursors, key));
            if (!rp->is_diverged && (size_t)used < json_array_size(list)) {
                const json_t *req = json_object_get(json_array_get(list, (size_t)used), "request");
                char span[160];
                char *text = canonical(json_object_get(req, "messages"));
                snprintf(span, sizeof(span), "chat %.120s",
                         json_string_value(json_object_get(req, "model")));
                diverge(rp, span, NULL, "missing_call", text, NULL);
                weft__free(text);
            }
        }
    }
}

struct weft_replay_report *
weft__replay_finish(struct rt_replay *rp, struct weft_span *root)
{
    struct weft_replay_report *r = weft__calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&rp->lock);
    find_missing(rp);
    r->original_run_id = weft__strdup(rp->run_id);
    r->is_identical = !rp->is_diverged;
    r->llm_calls = rp->llm_calls;
    r->tool_calls = rp->tool_calls;
    r->llm_expected = rp->llm_expected;
    r->tool_expected = rp->tool_expected;
    r->span = rp->span != NULL ? weft__strdup(rp->span) : NULL;
    r->step_id = rp->step != NULL ? weft__strdup(rp->step) : NULL;
    r->what = rp->what != NULL ? weft__strdup(rp->what) : NULL;
    r->expected = rp->expected != NULL ? weft__strdup(rp->expected) : NULL;
    r->got = rp->got != NULL ? weft__strdup(rp->got) : NULL;
    pthread_mutex_unlock(&rp->lock);
    weft__rk_set_bool(root, WEFT__RK_REPLAY_IDENTICAL, r->is_identical);
    weft__rk_set_int(root, WEFT__RK_REPLAY_LLM_CALLS, (int64_t)r->llm_calls);
    weft__rk_set_int(root, WEFT__RK_REPLAY_TOOL_CALLS, (int64_t)r->tool_calls);
    if (!r->is_identical) {
        weft__rk_set_str(root, WEFT__RK_REPLAY_DIVERGED_SPAN, r->span != NULL ? r->span : "");
        weft__rk_set_str(root, WEFT__RK_REPLAY_DIVERGED_WHAT, r->what != NULL ? r->what : "");
        if (r->step_id != NULL) {
            weft__rk_set_str(root, WEFT__RK_REPLAY_DIVERGED_STEP, r->step_id);
        }
    }
    return r;
}

void
weft__replay_report_free(struct weft_replay_report *r)
{
    if (r == NULL) {
        return;
    }
    weft__free(r->original_run_id);
    weft__free(r->span);
    weft__free(r->step_id);
    weft__free(r->what);
    weft__free(r->expected);
    weft__free(r->got);
    weft__free(r);
}

void
weft__rt_stored_root(const struct weft_run_info *info, struct weft_span_context *out)
{
    memset(out, 0, sizeof(*out));
    if (info->trace_id == NULL || info->root_span_id == NULL || strlen(info->trace_id) != 32 ||
        strlen(info->root_span_id) != 16 ||
        weft__hex_decode_id(info->trace_id, 32, out->trace_id, sizeof(out->trace_id)) != WEFT_OK ||
        weft__hex_decode_id(info->root_span_id, 16, out->span_id, sizeof(out->span_id)) !=
            WEFT_OK) {
        memset(out, 0, sizeof(*out));
        return;
    }
    out->trace_flags = WEFT_TRACE_FLAG_SAMPLED;
}
