/* serve/api_compare.c - GET /api/v1/compare?a=REF&b=REF: weft.compare/v1, two runs step by
 * step (docs/serve.md, "The explorer's API").
 *
 * What differed around the runs comes first, because it explains what differed in them: their
 * inputs and their workflow documents (the workflow file's hash, and the file's text as each
 * run's snapshot kept it, line-diffed when the hashes differ; runtime/state/snapshot.c). Then
 * the steps, a's plan order first and b's extra steps after: each side's agent, status,
 * duration, tokens (from the trace's model calls) and whether a fork reused it from its
 * original; what changed; a line diff of the results where they differ. The first step that
 * changed is the first point of divergence; the last steps' results are diffed as the output.
 *
 * Bounds: a line diff compares at most DIFF_LINES_MAX lines a side (it is quadratic), so a
 * step's result diff costs at most 16 MB of table while it is computed.
 */
#include "api_int.h"

#include "report/docs.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/store.h>
#include <weft/weft.h>

#define DIFF_LINES_MAX 2000 /* lines compared at most per side */
#define STEP_DEPTH_MAX 64   /* span depths followed for a step's tokens */

/* Lines of @p text (at most DIFF_LINES_MAX) as a JSON array of strings. */
static json_t *
lines_of(const char *text)
{
    json_t *arr = json_array();
    const char *p = text != NULL ? text : "";

    while (arr != NULL && *p != '\0' && json_array_size(arr) < DIFF_LINES_MAX) {
        size_t len = strcspn(p, "\n");
        json_t *line = json_stringn(p, len);
        json_array_append_new(arr, line != NULL ? line : json_string("\xef\xbf\xbd"));
        p += len;
        p += *p == '\n';
    }
    return arr;
}

/* A line diff of @p a and @p b (longest common subsequence): [{"op": "=" | "-" | "+",
 * "line"}]. Quadratic in lines, so both sides are cut to DIFF_LINES_MAX. */
static json_t *
line_diff(const char *a, const char *b)
{
    json_t *la = lines_of(a);
    json_t *lb = lines_of(b);
    size_t n = json_array_size(la);
    size_t m = json_array_size(lb);
    unsigned *t = calloc((n + 1) * (m + 1), sizeof(*t));
    json_t *out = json_array();

    for (size_t i = n; t != NULL && i-- > 0;) {
        const char *x = json_string_value(json_array_get(la, i));

        for (size_t j = m; j-- > 0;) {
            const char *y = json_string_value(json_array_get(lb, j));
            unsigned down = t[(i + 1) * (m + 1) + j];
            unsigned right = t[i * (m + 1) + j + 1];
            t[i * (m + 1) + j] = strcmp(x, y) == 0 ? t[(i + 1) * (m + 1) + j + 1] + 1
                                                   : (down > right ? down : right);
        }
    }
    for (size_t i = 0, j = 0; t != NULL && out != NULL && (i < n || j < m);) {
        const char *x = i < n ? json_string_value(json_array_get(la, i)) : NULL;
        const char *y = j < m ? json_string_value(json_array_get(lb, j)) : NULL;
        if (x != NULL && y != NULL && strcmp(x, y) == 0) {
            json_array_append_new(out, json_pack("{s:s, s:s}", "op", "=", "line", x));
            i++;
            j++;
        } else if (y == NULL || (x != NULL && t[(i + 1) * (m + 1) + j] >= t[i * (m + 1) + j + 1])) {
            json_array_append_new(out, json_pack("{s:s, s:s}", "op", "-", "line", x));
            i++;
        } else {
            json_array_append_new(out, json_pack("{s:s, s:s}", "op", "+", "line", y));
            j++;
        }
    }
    free(t);
    json_decref(la);
    json_decref(lb);
    if (t == NULL) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static int64_t
int_attr(const struct weft_span_data *s, const char *key)
{
    const struct weft_value *v = weft_span_data_attr(s, key);

    return v != NULL && v->type == WEFT_VALUE_INT ? v->u.i : 0;
}

/* A model call (chat, embeddings): the spans whose tokens are their own, not a sum of their
 * children's as an agent's or a workflow's are. */
static bool
is_model_call(const struct weft_span_data *s)
{
    const struct weft_value *op = weft_span_data_attr(s, "gen_ai.operation.name");

    return op != NULL && op->type == WEFT_VALUE_STRING &&
           (strcmp(op->u.str, "chat") == 0 || strcmp(op->u.str, "text_completion") == 0 ||
            strcmp(op->u.str, "embeddings") == 0);
}

/* What the trace says per step of run @p run: {"tokens": {step_id: [input, output]}, "reused":
 * {step_id: true}}. Each LLM call's tokens count for the nearest enclosing span that names a
 * step (weft.step.id); a fork's reused step has a span of its own with weft.fork.reused=true
 * (runtime/engine/fork.c). Empty objects when the run was not traced or its trace is not in
 * the span store (404) or named ambiguously (400); NULL with @p reply set when the span store
 * failed (500, 503): the comparison is not answered with tokens it could not read. New
 * reference. */
static json_t *
step_facts(const struct weft__api_config *cfg,
           const struct weft_run_details *run,
           struct weft__api_reply *reply)
{
    json_t *tokens = json_object();
    json_t *reused = json_object();
    json_t *out = json_pack("{s:o, s:o}", "tokens", tokens, "reused", reused);
    struct weft__api_reply failed = {0};
    struct weft_trace *trace = out != NULL && run->info.trace_id != NULL
                                   ? weft__api_load_trace(cfg, run->info.trace_id, &failed)
                                   : NULL;
    const char *at[STEP_DEPTH_MAX] = {NULL}; /* the step id in force at each depth */

    if (trace == NULL && failed.status >= 500) {
        json_decref(out);
        *reply = failed;
        return NULL;
    }
    free(failed.body);
    for (size_t i = 0; trace != NULL && i < weft_trace_span_count(trace); i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);
        size_t depth = weft_trace_span_depth(trace, i);
        const struct weft_value *step = weft_span_data_attr(s, "weft.step.id");
        const struct weft_value *re = weft_span_data_attr(s, "weft.fork.reused");
        int64_t in = int_attr(s, "gen_ai.usage.input_tokens");
        int64_t outt = int_attr(s, "gen_ai.usage.output_tokens");
        if (depth >= STEP_DEPTH_MAX) {
            continue;
        }
        at[depth] = step != NULL && step->type == WEFT_VALUE_STRING ? step->u.str
                    : depth > 0                                     ? at[depth - 1]
                                                                    : NULL;
        if (at[depth] != NULL && re != NULL && re->type == WEFT_VALUE_BOOL && re->u.b) {
            json_object_set_new(reused, at[depth], json_true());
        }
        if (at[depth] != NULL && (in > 0 || outt > 0) && is_model_call(s)) {
            json_t *t = json_object_get(tokens, at[depth]);
            if (t == NULL) {
                t = json_pack("[I, I]", (json_int_t)0, (json_int_t)0);
                json_object_set_new(tokens, at[depth], t);
            }
            json_array_set_new(t, 0, json_integer(json_integer_value(json_array_get(t, 0)) + in));
            json_array_set_new(t, 1, json_integer(json_integer_value(json_array_get(t, 1)) + outt));
        }
    }
    weft_trace_free(trace);
    return out;
}

/* Did fork @p run reuse step @p i from its original? Its trace says so (step_facts()); without
 * the trace, the state says it: fork.c completes a reused step at once (started == ended, or
 * neither set for a flow's), which a step that ran never does. */
static bool
is_reused(const struct weft_run_details *run, size_t i, const json_t *facts)
{
    const struct weft_run_step_extra *x = run->step_extras != NULL ? &run->step_extras[i] : NULL;
    const char *status = weft__doc_step_status(run, i);

    if (run->info.origin_kind == NULL || strcmp(run->info.origin_kind, "fork") != 0) {
        return false;
    }
    if (json_object_get(json_object_get(facts, "reused"), run->steps[i].id) != NULL) {
        return true;
    }
    return run->info.trace_id == NULL && x != NULL && x->started_ns == x->ended_ns &&
           status != NULL && strcmp(status, "completed") == 0;
}

static json_t *
step_side(const struct weft_run_details *run, size_t i, const json_t *facts)
{
    const struct weft_run_step_extra *x = run->step_extras != NULL ? &run->step_extras[i] : NULL;
    bool reused = is_reused(run, i, facts);
    uint64_t dur = !reused && x != NULL && x->started_ns != 0 && x->ended_ns >= x->started_ns
                       ? x->ended_ns - x->started_ns
                       : 0;
    const json_t *t = json_object_get(json_object_get(facts, "tokens"), run->steps[i].id);

    return json_pack("{s:s?, s:s?, s:i, s:o, s:s?, s:o, s:I, s:I, s:s?, s:b}", "agent",
                     run->steps[i].agent, "status", weft__doc_step_status(run, i), "attempts",
                     (int)run->steps[i].attempts, "duration_ns",
                     dur != 0 ? json_integer((json_int_t)dur) : json_null(), "depends_on",
                     run->steps[i].depends_on, "reward",
                     run->steps[i].has_reward ? json_real(run->steps[i].reward) : json_null(),
                     "input_tokens", (json_int_t)json_integer_value(json_array_get(t, 0)),
                     "output_tokens", (json_int_t)json_integer_value(json_array_get(t, 1)),
                     "result", run->steps[i].result, "reused", reused);
}

/* What differs between step @p i of @p a and @p j of @p b (either may be SIZE_MAX: absent),
 * as a list of field names; "presence" when one run lacks the step. */
static json_t *
step_changes(const struct weft_run_details *a, size_t i, const struct weft_run_details *b, size_t j)
{
    json_t *changed = json_array();
    static const char *const fields[] = {"agent", "status", "depends_on", "result"};

    if (i == SIZE_MAX || j == SIZE_MAX) {
        json_array_append_new(changed, json_string("presence"));
        return changed;
    }
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        const char *x = f == 0   ? a->steps[i].agent
                        : f == 1 ? weft__doc_step_status(a, i)
                        : f == 2 ? a->steps[i].depends_on
                                 : a->steps[i].result;
        const char *y = f == 0   ? b->steps[j].agent
                        : f == 1 ? weft__doc_step_status(b, j)
                        : f == 2 ? b->steps[j].depends_on
                                 : b->steps[j].result;
        if ((x == NULL) != (y == NULL) || (x != NULL && strcmp(x, y) != 0)) {
            json_array_append_new(changed, json_string(fields[f]));
        }
    }
    return changed;
}

/* The two sides of a step's result as a line diff when they differ; else null. */
static json_t *
result_diff(const struct weft_run_details *a, size_t i, const struct weft_run_details *b, size_t j)
{
    const char *x = i != SIZE_MAX ? a->steps[i].result : NULL;
    const char *y = j != SIZE_MAX ? b->steps[j].result : NULL;
    json_t *d = NULL;

    if ((x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0)) {
        return json_null();
    }
    d = line_diff(x, y);
    return d != NULL ? d : json_null();
}

/* The text to diff of a workflow document: a JSON one re-indented (a workflow written on one
 * line would otherwise diff as a single changed line), any other as it was kept. New. */
static char *
diffable(const char *text)
{
    json_t *doc = text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    char *out = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

    json_decref(doc);
    if (out == NULL && text != NULL) {
        size_t len = strlen(text) + 1;
        out = malloc(len);
        if (out != NULL) {
            memcpy(out, text, len);
        }
    }
    return out;
}

/* One run's workflow: its name, the file's hash and its text as the run's snapshot kept it
 * (runtime/state/snapshot.c); hash and text NULL when the run kept neither. NULL with @p reply
 * set when the state store failed to say. */
static json_t *
workflow_side(const struct weft__api_config *cfg,
              const struct weft_run_details *run,
              char **text,
              struct weft__api_reply *reply)
{
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN] = "";
    weft_err err = weft_run_workflow_load(cfg->state_path, run->info.run_id, hash, text);

    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        char what[120];
        snprintf(what, sizeof(what), "run %.64s's workflow", run->info.run_id);
        weft__api_reply_weft_error(reply, err, what);
        return NULL;
    }
    return json_pack("{s:s?, s:s?, s:s?, s:b}", "name", run->info.workflow, "path",
                     run->info.workflow_path, "hash", err == WEFT_OK ? hash : NULL, "document_kept",
                     err == WEFT_OK && *text != NULL);
}

/* {"same", "a", "b", "diff"}: the workflows are the same when their files' hashes are (null:
 * a run kept no hash, so nobody knows); the diff of their documents when both were kept and
 * they differ, else []. NULL with @p reply set when the state store failed. */
static json_t *
workflows_doc(const struct weft__api_config *cfg,
              const struct weft_run_details *a,
              const struct weft_run_details *b,
              struct weft__api_reply *reply)
{
    char *ta = NULL;
    char *tb = NULL;
    json_t *wa = workflow_side(cfg, a, &ta, reply);
    json_t *wb = reply->status == 0 ? workflow_side(cfg, b, &tb, reply) : NULL;
    const char *ha = json_string_value(json_object_get(wa, "hash"));
    const char *hb = json_string_value(json_object_get(wb, "hash"));
    json_t *same = ha != NULL && hb != NULL ? json_boolean(strcmp(ha, hb) == 0) : json_null();
    json_t *diff = NULL;

    if (reply->status != 0) {
        weft_run_snapshot_text_free(ta);
        json_decref(wa);
        json_decref(same);
        return NULL;
    }
    if (json_is_false(same) && ta != NULL && tb != NULL) {
        char *da = diffable(ta);
        char *db = diffable(tb);
        diff = da != NULL && db != NULL ? line_diff(da, db) : NULL;
        free(da);
        free(db);
    }
    weft_run_snapshot_text_free(ta);
    weft_run_snapshot_text_free(tb);
    return json_pack("{s:o, s:o, s:o, s:o}", "same", same, "a", wa != NULL ? wa : json_null(), "b",
                     wb != NULL ? wb : json_null(), "diff", diff != NULL ? diff : json_array());
}

/* {"same", "a", "b", "diff"}: the runs' inputs and, when they differ, their line diff. */
static json_t *
inputs_doc(const struct weft_run_details *a, const struct weft_run_details *b)
{
    const char *x = a->info.input;
    const char *y = b->info.input;
    bool same = (x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0);
    json_t *diff = same ? json_array() : line_diff(x, y);

    return json_pack("{s:b, s:s?, s:s?, s:o}", "same", same, "a", x, "b", y, "diff",
                     diff != NULL ? diff : json_array());
}

/* Both runs' steps, a's order first then b's extra steps; the first step (in a's order) that
 * changed is the first point of divergence. NULL with @p reply set when a store failed. */
static json_t *
compare_doc(const struct weft__api_config *cfg,
            const struct weft_run_details *a,
            const struct weft_run_details *b,
            struct weft__api_reply *reply)
{
    json_t *steps = NULL;
    json_t *first = NULL;
    json_t *fa = step_facts(cfg, a, reply);
    json_t *fb = reply->status == 0 ? step_facts(cfg, b, reply) : NULL;
    json_t *workflows = reply->status == 0 ? workflows_doc(cfg, a, b, reply) : NULL;
    json_t *doc = NULL;

    if (reply->status != 0) {
        json_decref(fa);
        json_decref(fb);
        json_decref(workflows);
        return NULL;
    }
    steps = json_array();
    first = json_null();
    for (size_t k = 0; steps != NULL && k < a->step_count + b->step_count; k++) {
        bool is_a = k < a->step_count;
        const char *id = is_a ? a->steps[k].id : b->steps[k - a->step_count].id;
        size_t i = is_a ? k : weft__api_step_index(a, id);
        size_t j = weft__api_step_index(b, id);
        json_t *changed = NULL;
        if (!is_a && i != SIZE_MAX) {
            continue; /* listed with a's steps */
        }
        changed = step_changes(a, i, b, j);
        if (json_array_size(changed) > 0 && json_is_null(first)) {
            json_decref(first);
            first = json_pack("{s:s, s:O}", "step", id, "changed", changed);
        }
        json_array_append_new(
            steps, json_pack("{s:s, s:o, s:o, s:o, s:o}", "id", id, "a",
                             i != SIZE_MAX ? step_side(a, i, fa) : json_null(), "b",
                             j != SIZE_MAX ? step_side(b, j, fb) : json_null(), "changed", changed,
                             "result_diff", result_diff(a, i, b, j)));
    }
    doc = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "schema", "weft.compare/v1", "a",
                    weft__doc_run_info(&a->info), "b", weft__doc_run_info(&b->info), "inputs",
                    inputs_doc(a, b), "workflows", workflows != NULL ? workflows : json_null(),
                    "steps", steps != NULL ? steps : json_array(), "first_divergence",
                    first != NULL ? first : json_null(), "output_diff",
                    line_diff(a->step_count > 0 ? a->steps[a->step_count - 1].result : NULL,
                              b->step_count > 0 ? b->steps[b->step_count - 1].result : NULL));
    json_decref(fa);
    json_decref(fb);
    return doc;
}

/* Run @p ref for side @p side ("a" or "b") loaded, or NULL with the reply set to an error that
 * names the side and the ref. */
static struct weft_run_details *
load_side(const struct weft__api_config *cfg,
          const char *side,
          const char *ref,
          struct weft__api_reply *reply)
{
    struct weft_run_details *run = NULL;
    weft_err err = weft_run_load(cfg->state_path, ref, &run);
    char what[200];

    if (err == WEFT_OK) {
        return run;
    }
    snprintf(what, sizeof(what), "run %s=%.64s%s", side, ref,
             err == WEFT_ENOTFOUND ? " (no such run: pick one from /api/v1/runs)"
             : err == WEFT_EINVAL  ? " (an ambiguous prefix: give more of the id)"
                                   : "");
    weft__api_reply_weft_error(reply, err, what);
    return NULL;
}

void
weft__api_compare(const struct weft__api_config *cfg,
                  const struct weft__api_request *req,
                  struct weft__api_reply *reply)
{
    const char *ra = req->arg(req->ctx, "a");
    const char *rb = req->arg(req->ctx, "b");
    struct weft_run_details *a = NULL;
    struct weft_run_details *b = NULL;

    if (ra == NULL || rb == NULL || ra[0] == '\0' || rb[0] == '\0') {
        weft__api_reply_error(reply, 400, "expected ?a=RUN&b=RUN");
        return;
    }
    a = load_side(cfg, "a", ra, reply);
    b = a != NULL ? load_side(cfg, "b", rb, reply) : NULL;
    if (a != NULL && b != NULL) {
        json_t *doc = compare_doc(cfg, a, b, reply);
        if (reply->status == 0) {
            weft__api_reply_json(reply, 200, doc);
        }
    }
    weft_run_details_free(a);
    weft_run_details_free(b);
}
