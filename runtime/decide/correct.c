/* runtime/decide/correct.c - correction mode: after a step fails, the supervisor's model writes a
 * corrective plan and the engine rewires the DAG around the failure.
 *
 * Context sent to the model: the overall goal, the failed step (task, executor, structured
 * error: type, exit code, stderr tail, feedback) and the steps that succeeded. The answer must
 * be {"steps": [{"description", "executor", "rationale", ...executor fields}, ...]} whose last
 * step is {"executor": "retry", "step": FAILED_ID}. It is validated like a workflow plan.
 *
 * DAG surgery: the failed step becomes paused, the corrective steps are inserted as a chain
 * (each depends on the one before; ids "<failed>.c<n>.<i>", parent = the failed step), and the
 * failed step is rewired to also depend on the last of them, so its dependents keep waiting.
 * The store sees all of it in one SQLite transaction (weft__state_surgery); if that fails, the
 * in-memory plan is rolled back too, so memory and store never disagree.
 *
 * Spans: `correct {step}` under the run, with the before/after dependency lists; the corrective
 * steps' spans link to the failed step's span.
 */
#include "runtime/decide/correct.h"
#include "runtime/common/attr_keys.h"
#include "runtime/decide/lessons.h"
#include "runtime/observe/semconv.h"
#include "runtime/observe/spans.h"

#include "base/buf.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CORRECTIVE_STEPS 10

static json_t *
context_json(const struct run *run, const struct plan_step *failed)
{
    json_t *done = json_array();
    json_t *ctx = NULL;

    for (size_t i = 0; done != NULL && i < run->ps.plan.count; i++) {
        const struct plan_step *s = &run->ps.plan.steps[i];
        if (s->status == STEP_COMPLETED) {
            json_array_append_new(done, json_pack("{s:s, s:s, s:s}", "id", s->id, "executor",
                                                  weft__step_executor_name(s->executor), "task",
                                                  s->task));
        }
    }
    ctx = json_pack("{s:s, s:{s:s, s:s, s:s, s:O?, s:s?}, s:o}", "goal",
                    run->cfg.input != NULL             ? run->cfg.input
                    : run->cfg.wf->description != NULL ? run->cfg.wf->description
                                                       : run->cfg.wf->name,
                    "failed_step", "id", failed->id, "task", failed->task, "executor",
                    weft__step_executor_name(failed->executor), "error", failed->error, "feedback",
                    failed->feedback, "successful_steps", done);
    return ctx;
}

/* Validate the corrective plan; on success *steps borrows its "steps" array. */
static bool
validate(const json_t *answer, const char *failed_id, const json_t **steps, char *why, size_t len)
{
    const json_t *list = json_object_get(answer, "steps");
    size_t n = json_array_size(list);
    const json_t *last = NULL;

    /* At least one corrective step before the retry: a bare retry is no correction (the
     * step's own retries do that), and the surgery below always has a step to rewire to. */
    if (!json_is_array(list) || n < 2 || n > MAX_CORRECTIVE_STEPS + 1) {
        snprintf(why, len,
                 "expected {\"steps\": [...]} with 1 to %d corrective steps, then the retry",
                 MAX_CORRECTIVE_STEPS);
        return false;
    }
    last = json_array_get(list, n - 1);
    if (!json_is_string(json_object_get(last, "executor")) ||
        strcmp(json_string_value(json_object_get(last, "executor")), "retry") != 0 ||
        !json_is_string(json_object_get(last, "step")) ||
        strcmp(json_string_value(json_object_get(last, "step")), failed_id) != 0) {
        snprintf(why, len, "the last step must be {\"executor\": \"retry\", \"step\": \"%.40s\"}",
                 failed_id);
        return false;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        const json_t *s = json_array_get(list, i);
        const char *executor = json_string_value(json_object_get(s, "executor"));
        step_executor ex;
        json_t *spec = NULL;
        char sub[160];

        if (!json_is_string(json_object_get(s, "description")) ||
            !json_is_string(json_object_get(s, "rationale")) || executor == NULL) {
            snprintf(why, len,
                     "steps[%zu]: expected \"description\", \"executor\" and "
                     "\"rationale\" strings",
                     i);
            return false;
        }
        if (!weft__step_executor_parse(executor, &ex)) {
            snprintf(why, len, "steps[%zu].executor: unknown executor '%.40s'", i, executor);
            return false;
        }
        spec = weft__wf_executor_spec(ex, s, sub, sizeof(sub));
        if (spec == NULL) {
            snprintf(why, len, "steps[%zu]: %s", i, sub[0] != '\0' ? sub : "out of memory");
            return false;
        }
        json_decref(spec);
    }
    *steps = list;
    return true;
}

static json_t *
string_array(char **items, size_t count)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < count; i++) {
        json_array_append_new(arr, json_string(items[i]));
    }
    return arr;
}

/* Append the corrective steps and rewire; returns the first new index, or (size_t)-1. */
static size_t
apply(struct run *run, size_t failed, const json_t *steps, unsigned number, char *why, size_t len)
{
    size_t first = run->ps.plan.count;
    size_t n = json_array_size(steps) - 1;
    char prev[96] = "";
    char **deps = NULL;

    for (size_t i = 0; i < n; i++) {
        const json_t *js = json_array_get(steps, i);
        const char *dep = prev;
        size_t idx = 0;
        step_executor ex = EXEC_AGENT;
        char id[96];
        char sub[160];
        struct plan_step *s = NULL;
        size_t agent = WF_NONE;

        weft__step_executor_parse(json_string_value(json_object_get(js, "executor")), &ex);
        if (ex == EXEC_AGENT) {
            const char *name = json_string_value(json_object_get(js, "agent"));
            agent = name != NULL ? weft__rt_find_agent(run, name) : WF_NONE;
            if (agent == WF_NONE) {
                snprintf(why, len, "steps[%zu].agent: expected a known agent", i);
                goto undo;
            }
        }
        snprintf(id, sizeof(id), "%.60s.c%u.%zu", run->ps.plan.steps[failed].id, number, i + 1);
        if (weft__plan_append(
                &run->ps.plan, id, agent, json_string_value(json_object_get(js, "description")),
                prev[0] != '\0' ? &dep : NULL, prev[0] != '\0' ? 1 : 0, &idx) != WEFT_OK) {
            snprintf(why, len, "plan is full");
            goto undo;
        }
        s = &run->ps.plan.steps[idx];
        s->executor = ex;
        s->spec = weft__wf_executor_spec(ex, js, sub, sizeof(sub));
        s->parent = weft__strdup(run->ps.plan.steps[failed].id);
        /* Corrective steps link to the failed step's span. */
        s->requester = run->ps.plan.steps[failed].span;
        s->has_requester = weft_span_context_is_valid(&s->requester);
        if (s->spec == NULL || s->parent == NULL) {
            snprintf(why, len, "out of memory");
            goto undo;
        }
        snprintf(prev, sizeof(prev), "%s", id);
    }
    if (n > 0) {
        struct plan_step *f = &run->ps.plan.steps[failed];
        deps = weft__realloc(f->depends_on, (f->depends_count + 1) * sizeof(*deps));
        if (deps == NULL) {
            snprintf(why, len, "out of memory");
            goto undo;
        }
        f->depends_on = deps;
        f->depends_on[f->depends_count] = weft__strdup(prev);
        if (f->depends_on[f->depends_count] == NULL) {
            snprintf(why, len, "out of memory");
            goto undo;
        }
        f->depends_count++;
    }
    weft__plan_set_status(&run->ps.plan, failed, STEP_PAUSED);
    return first;
undo:
    weft__plan_truncate(&run->ps.plan, first);
    return (size_t)-1;
}

/* One correction in progress: what weft__rt_correct()'s phases hand each other. Owns before and
 * after (the failed step's dependencies before and after the surgery, JSON string arrays). */
struct correction {
    unsigned number;
    char failed_id[96];
    step_status old_status;
    size_t old_count;
    size_t first; /* the first corrective step, or (size_t)-1 while there is none */
    json_t *before;
    json_t *after;
    char why[300];
    const json_t *given;   /* a lesson's corrective plan: applied without asking the model */
    const char *lesson_id; /* the lesson it came from, or NULL */
    json_t *answer;        /* the plan the model gave, once applied (kept as the step's lesson) */
};

/* The `correct` span for correction @p c of @p failed, linked to the failed step's span, with the
 * correction's attributes; the correction loop is counted. Never NULL. */
static struct weft_span *
correction_start(struct run *run, const struct plan_step *failed, const struct correction *c)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct weft_link_spec link;
    struct weft_span *span = NULL;

    memset(&link, 0, sizeof(link));
    link.context = failed->span;
    span = weft__rt_span_start(run, RT_SPAN_CORRECT, c->failed_id, run->tel.root, &link,
                               weft_span_context_is_valid(&failed->span) ? 1 : 0);
    weft__rt_count_loop(run, WEFT_LOOP_CORRECTION);
    run->tel.result->corrections = run->ps.corrections;
    weft__rk_set_str(span, WEFT__RK_CORRECTION_FAILED_TASK, c->failed_id);
    weft__rk_set_str(span, WEFT__RK_CORRECTION_ERROR_TYPE,
                     failed->error_type != NULL ? failed->error_type : "failed");
    weft__rk_set_int(span, WEFT__RK_CORRECTION_ATTEMPT, c->number);
    weft__rk_set_int(span, WEFT__RK_CORRECTION_MAX_CORRECTIONS, wf->supervisor.max_corrections);
    return span;
}

/* Ask the supervisor's model for a corrective plan for step @p index and, if it is valid, apply
 * it to the plan in memory (c->first, c->old_count); otherwise c->why says why not. */
static void
ask_corrector(struct run *run, struct weft_span *span, size_t index, struct correction *c)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct llm_response resp;
    struct llm_error lerr;
    json_t *ctx = context_json(run, &run->ps.plan.steps[index]);
    json_t *lessons = weft__rt_lessons_for(run, index, span);
    char *ctx_text = NULL;
    json_t *msgs = NULL;
    json_t *answer = NULL;
    const json_t *steps = NULL;
    struct rt_prompt held;
    const char *guidance = NULL;
    struct weft__buf sys;

    if (ctx != NULL && lessons != NULL) {
        /* Past corrections of failures like this one, best rewarded first (lessons.c). */
        json_object_set(ctx, "lessons", lessons);
    }
    json_decref(lessons);
    ctx_text = ctx != NULL ? json_dumps(ctx, JSON_COMPACT) : NULL;
    memset(&resp, 0, sizeof(resp));
    /* The guidance may be a managed prompt; the answer's format is weft's and always follows. */
    guidance = weft__rt_instructions_begin(run, wf->supervisor.correction_instructions,
                                           wf->supervisor.correction_prompt,
                                           "A step of the plan failed.", &held);
    weft__buf_init(&sys, 0);
    (void)weft__buf_printf(&sys,
                           "%s\n\nAnswer with a corrective plan as JSON: {\"steps\": "
                           "[{\"description\", \"executor\": \"agent|command|file_writer|"
                           "http_call\", \"rationale\", ...executor fields}, ..., "
                           "{\"executor\": \"retry\", \"step\": FAILED_ID}]}",
                           guidance);
    msgs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content",
                     sys.data != NULL ? sys.data : "", "role", "user", "content",
                     ctx_text != NULL ? ctx_text : "{}");
    weft__buf_cleanup(&sys);
    weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_INPUT, ctx_text);
    if (msgs == NULL) {
        snprintf(c->why, sizeof(c->why), "out of memory");
    } else if (weft__rt_llm_call(run, span, wf->supervisor.name, NULL, LLM_PURPOSE_CORRECT,
                                 wf->supervisor.model, msgs, NULL, true, -1.0, 0, &resp,
                                 &lerr) != WEFT_OK) {
        snprintf(c->why, sizeof(c->why), "corrector LLM failed (%s): %.200s", lerr.type,
                 lerr.message);
    } else {
        answer = json_loads(resp.content != NULL ? resp.content : "", 0, NULL);
        if (answer == NULL) {
            snprintf(c->why, sizeof(c->why), "corrective plan is not JSON");
        } else if (validate(answer, c->failed_id, &steps, c->why, sizeof(c->why))) {
            c->old_count = run->ps.plan.count;
            c->first = apply(run, index, steps, c->number, c->why, sizeof(c->why));
            c->answer = c->first != (size_t)-1 ? json_incref(answer) : NULL;
        }
    }
    weft__rt_instructions_end(&held);
    json_decref(answer);
    json_decref(msgs);
    json_decref(ctx);
    free(ctx_text);
    weft__llm_response_cleanup(&resp);
}

/* A lesson's corrective plan applied to step @p index as the model's would be, its retry step
 * pointed at this step. */
static void
apply_given(struct run *run, size_t index, struct correction *c)
{
    json_t *plan = json_deep_copy(c->given);
    json_t *list = json_object_get(plan, "steps");
    json_t *last = json_array_get(list, json_array_size(list) - 1);
    const json_t *steps = NULL;

    if (last != NULL) {
        json_object_set_new(last, "step", json_string(c->failed_id));
    }
    if (plan == NULL) {
        snprintf(c->why, sizeof(c->why), "out of memory");
    } else if (validate(plan, c->failed_id, &steps, c->why, sizeof(c->why))) {
        c->old_count = run->ps.plan.count;
        c->first = apply(run, index, steps, c->number, c->why, sizeof(c->why));
    }
    json_decref(plan);
}

/* Save the applied correction (c->first) in the state store as one DAG surgery. If the store
 * refuses it, the plan in memory is rolled back to what the store holds and c->first is reset. */
static void
persist_surgery(struct run *run, size_t index, struct correction *c)
{
    struct plan_step *failed = &run->ps.plan.steps[index];
    const char **actors = NULL;
    weft_err serr = WEFT_OK;

    c->after = string_array(failed->depends_on, failed->depends_count);
    actors = weft__calloc(run->ps.plan.count, sizeof(*actors));
    serr = actors == NULL ? WEFT_ENOMEM : WEFT_OK;
    for (size_t i = 0; actors != NULL && i < run->ps.plan.count; i++) {
        actors[i] = weft__rt_step_actor(run, &run->ps.plan.steps[i]);
    }
    if (serr == WEFT_OK && run->store.state != NULL) {
        serr = weft__state_surgery(run->store.state, run->store.run_id, &run->ps.plan, index,
                                   c->first, c->number,
                                   failed->error_type != NULL ? failed->error_type : "lesson",
                                   c->before, c->after, actors);
    }
    weft__free((void *)actors);
    if (serr != WEFT_OK) {
        snprintf(c->why, sizeof(c->why), "the state store refused the DAG surgery");
        /* Roll memory back to what the store still holds. */
        weft__plan_truncate(&run->ps.plan, c->old_count);
        failed = &run->ps.plan.steps[index];
        weft__free(failed->depends_on[--failed->depends_count]);
        weft__plan_step_set_status(&run->ps.plan, failed, c->old_status);
        c->first = (size_t)-1;
    }
}

/* Record on @p span what correction @p c came to: the inserted steps and the failed step's
 * dependencies before and after, or the `weft.correction.invalid` event with c->why (and the
 * failed step back in its old status). */
static void
correction_outcome(struct run *run, struct weft_span *span, size_t index, struct correction *c)
{
    if (c->first != (size_t)-1) {
        weft__rk_set_int(span, WEFT__RK_CORRECTION_INSERTED,
                         (int64_t)(run->ps.plan.count - c->first));
        weft__rk_set_bool(span, WEFT__RK_CORRECTION_REWIRED, run->ps.plan.count > c->first);
        for (size_t k = 0; k < 2; k++) {
            const json_t *list = k == 0 ? c->before : c->after;
            const char *items[64];
            size_t n = 0;
            for (; n < json_array_size(list) && n < 64; n++) {
                items[n] = json_string_value(json_array_get(list, n));
            }
            weft__rk_set_str_array(span,
                                   k == 0 ? WEFT__RK_CORRECTION_DEPENDS_BEFORE
                                          : WEFT__RK_CORRECTION_DEPENDS_AFTER,
                                   items, n);
        }
        weft_span_set_status(span, WEFT_STATUS_OK, NULL);
    } else {
        struct weft_attr a[2] = {weft_attr_str(WEFT__ERROR_TYPE, "invalid_correction"),
                                 weft_attr_str("weft.correction.error", c->why)};
        weft_span_add_event(span, "weft.correction.invalid", a, 2, 0);
        weft__rk_set_bool(span, WEFT__RK_CORRECTION_REWIRED, false);
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "invalid_correction");
        weft_span_set_status(span, WEFT_STATUS_ERROR, c->why);
        weft__plan_set_status(&run->ps.plan, index, c->old_status);
    }
}

static bool
correct_core(struct run *run, size_t index, const json_t *given, const char *lesson_id)
{
    struct plan_step *failed = &run->ps.plan.steps[index];
    struct weft_span *span = NULL;
    struct correction c;
    bool is_ok = false;

    memset(&c, 0, sizeof(c));
    c.number = ++run->ps.corrections;
    snprintf(c.failed_id, sizeof(c.failed_id), "%s", failed->id);
    c.old_status = failed->status;
    c.first = (size_t)-1;
    c.given = given;
    c.lesson_id = lesson_id;
    span = correction_start(run, failed, &c);
    c.before = string_array(failed->depends_on, failed->depends_count);
    if (given != NULL) {
        const char *ids[1] = {lesson_id};
        weft__rk_set_bool(span, WEFT__RK_CORRECTION_PREEMPTIVE, true);
        weft__rk_set_str(span, WEFT__RK_CORRECTION_ERROR_TYPE, "preemptive");
        weft__rk_set_str_array(span, WEFT__RK_LESSONS_USED, ids, 1);
        apply_given(run, index, &c);
    } else {
        ask_corrector(run, span, index, &c);
    }
    if (c.first != (size_t)-1) {
        persist_surgery(run, index, &c);
    }
    is_ok = c.first != (size_t)-1;
    correction_outcome(run, span, index, &c);
    weft_span_end(span, 0);
    weft__rt_metrics_correction(run->tel.metrics, is_ok);
    {
        char detail[400];
        snprintf(detail, sizeof(detail), "correction %u of %.60s: %.250s", c.number, c.failed_id,
                 is_ok ? "rewired" : c.why);
        weft__rt_progress(run, WEFT_EVENT_DECISION, NULL, detail);
        weft__rt_add_decision(run, RT_LAYER_CORRECTION,
                              is_ok ? run->ps.plan.steps[c.first].id : "end", detail);
    }
    if (is_ok && c.answer != NULL) {
        /* The plan that repaired it: a lesson once the step completes (lessons.c). */
        json_decref(run->ps.plan.steps[index].lesson);
        run->ps.plan.steps[index].lesson = c.answer;
        c.answer = NULL;
    }
    json_decref(c.answer);
    json_decref(c.before);
    json_decref(c.after);
    return is_ok;
}

bool
weft__rt_correct(struct run *run, size_t index)
{
    return correct_core(run, index, NULL, NULL);
}

bool
weft__rt_correct_preempt(struct run *run, size_t index, const json_t *plan, const char *lesson_id)
{
    return correct_core(run, index, plan, lesson_id);
}
