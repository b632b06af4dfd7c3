/* runtime/fork.c - forking a stored run from one of its steps (fork.h).
 *
 * The original's steps are read once, as JSON rows in plan order; the reused set is computed
 * on them before anything runs, so a fork that cannot be made (unknown step, a run still
 * running) is refused before its run row exists. Reused steps never reach the executor: they
 * are completed before the first decision, exactly as a resumed run's completed steps are.
 */
#include "fork.h"
#include "replay.h"
#include "spans.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"

#include <stdio.h>
#include <string.h>

static weft_err
collect_row(const struct state_step_row *row, void *user_data)
{
    json_t *rows = user_data;
    json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s?, s:s?, s:s?}", "id", row->id,
                          "actor", row->actor, "task", row->task, "depends_on",
                          row->depends_on != NULL ? row->depends_on : "[]", "status", row->status,
                          "attempts", (int)row->attempts, "result", row->result, "executor",
                          row->executor, "spec", row->spec);

    if (r == NULL) {
        return WEFT_ENOMEM;
    }
    if (row->has_reward) {
        json_object_set_new(r, "reward", json_real(row->reward));
    }
    return json_array_append_new(rows, r) == 0 ? WEFT_OK : WEFT_ENOMEM;
}

static size_t
row_index(const json_t *rows, const char *id)
{
    for (size_t i = 0; id != NULL && i < json_array_size(rows); i++) {
        if (strcmp(json_string_value(json_object_get(json_array_get(rows, i), "id")), id) == 0) {
            return i;
        }
    }
    return (size_t)-1;
}

/* Does row @p i depend on a live row (@p live)? */
static bool
depends_on_live(const json_t *rows, size_t i, const bool *live)
{
    const char *text = json_string_value(json_object_get(json_array_get(rows, i), "depends_on"));
    json_t *deps = json_loads(text != NULL ? text : "[]", 0, NULL);
    bool is_live = false;

    for (size_t d = 0; !is_live && d < json_array_size(deps); d++) {
        size_t j = row_index(rows, json_string_value(json_array_get(deps, d)));
        is_live = j != (size_t)-1 && live[j];
    }
    json_decref(deps);
    return is_live;
}

/* The reused rows: before @p from, completed, not depending on a live row. */
static weft_err
find_reused(struct rt_fork *f, size_t from)
{
    size_t n = json_array_size(f->rows);
    bool *live = weft__calloc(n + 1, sizeof(*live));
    bool is_changed = true;

    if (live == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = from; i < n; i++) {
        live[i] = true;
    }
    while (is_changed) { /* dependencies may point forward: until nothing changes */
        is_changed = false;
        for (size_t i = 0; i < from; i++) {
            if (!live[i] && depends_on_live(f->rows, i, live)) {
                live[i] = true;
                is_changed = true;
            }
        }
    }
    for (size_t i = 0; i < from; i++) {
        json_t *row = json_array_get(f->rows, i);
        const char *status = json_string_value(json_object_get(row, "status"));
        if (!live[i] && status != NULL && strcmp(status, "completed") == 0 &&
            json_object_set(f->reused, json_string_value(json_object_get(row, "id")), row) != 0) {
            weft__free(live);
            return WEFT_ENOMEM;
        }
    }
    weft__free(live);
    return WEFT_OK;
}

/* "a, b, c": the original's step ids for an error message. */
static void
list_steps(const json_t *rows, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(rows) && used + 1 < len; i++) {
        int n = snprintf(out + used, len - used, "%s%s", i > 0 ? ", " : "",
                         json_string_value(json_object_get(json_array_get(rows, i), "id")));
        used += n > 0 ? (size_t)n : 0;
    }
}

/* The original's row and steps into @p f; checks the run and the step. */
static weft_err
read_original(struct run *run,
              struct rt_fork *f,
              struct weft_span_context *link,
              char *error,
              size_t error_len)
{
    struct weft_run_info info;
    char why[160] = "";
    char ids[256];
    size_t from = 0;
    weft_err err = weft__state_run_resolve(run->store.state, run->cfg.opts->fork_run_id, f->run_id,
                                           sizeof(f->run_id), why, sizeof(why));

    memset(&info, 0, sizeof(info));
    if (err != WEFT_OK) {
        snprintf(error, error_len, "fork: %s",
                 why[0] != '\0' ? why : "no such run in the state database");
        return err;
    }
    err = weft__state_run_info(run->store.state, f->run_id, &info);
    if (err == WEFT_OK && strcmp(info.status, "running") == 0) {
        snprintf(error, error_len, "fork: run %s is still running; fork it once it ended",
                 f->run_id);
        err = WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        err = weft__state_steps_each(run->store.state, f->run_id, collect_row, f->rows);
    }
    from = err == WEFT_OK ? row_index(f->rows, f->from) : 0;
    if (err == WEFT_OK && from == (size_t)-1) {
        list_steps(f->rows, ids, sizeof(ids));
        snprintf(error, error_len, "fork: run %s has no step '%.64s' (its steps: %s)", f->run_id,
                 f->from, ids[0] != '\0' ? ids : "none");
        err = WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        err = find_reused(f, from);
        weft__rt_stored_root(&info, link);
    }
    weft__state_info_cleanup(&info);
    return err;
}

weft_err
weft__rt_fork_load(struct run *run, struct weft_span_context *link, char *error, size_t error_len)
{
    struct rt_fork *f = weft__calloc(1, sizeof(*f));
    weft_err err = WEFT_OK;

    memset(link, 0, sizeof(*link));
    if (f == NULL) {
        return WEFT_ENOMEM;
    }
    f->from = weft__strdup(run->cfg.opts->fork_from_step);
    f->rows = json_array();
    f->reused = json_object();
    err = f->from != NULL && f->rows != NULL && f->reused != NULL
              ? read_original(run, f, link, error, error_len)
              : WEFT_ENOMEM;
    if (err != WEFT_OK) {
        weft__rt_fork_free(f);
        return err;
    }
    if (run->cfg.wf->flow != NULL) {
        run->store.resumed = json_incref(f->reused); /* flow.c's restore_step() takes them */
    }
    run->store.fork = f;
    return WEFT_OK;
}

/* Append stored row @p row to the plan, pending. */
static bool
plan_row(struct run *run, const json_t *row)
{
    const char *executor = json_string_value(json_object_get(row, "executor"));
    const char *spec = json_string_value(json_object_get(row, "spec"));
    json_t *deps = json_loads(json_string_value(json_object_get(row, "depends_on")), 0, NULL);
    size_t dep_count = json_array_size(deps);
    const char **ids = weft__calloc(dep_count > 0 ? dep_count : 1, sizeof(*ids));
    step_executor ex = EXEC_AGENT;
    size_t agent = WF_NONE;
    size_t n = 0;
    size_t index = 0;
    bool is_ok = ids != NULL && (executor == NULL || weft__step_executor_parse(executor, &ex));

    if (is_ok && ex == EXEC_AGENT) {
        agent = weft__wf_find_agent(run->cfg.wf, json_string_value(json_object_get(row, "actor")));
        is_ok = agent != WF_NONE;
    }
    for (; is_ok && n < dep_count; n++) {
        ids[n] = json_string_value(json_array_get(deps, n));
    }
    is_ok = is_ok && weft__plan_append(&run->ps.plan, json_string_value(json_object_get(row, "id")),
                                       agent, json_string_value(json_object_get(row, "task")), ids,
                                       n, &index) == WEFT_OK;
    weft__free(ids);
    json_decref(deps);
    if (is_ok) {
        run->ps.plan.steps[index].executor = ex;
        run->ps.plan.steps[index].spec = spec != NULL ? json_loads(spec, 0, NULL) : NULL;
    }
    return is_ok;
}

bool
weft__rt_fork_plan(struct run *run)
{
    const json_t *rows = run->store.fork->rows;

    for (size_t i = 0; i < json_array_size(rows); i++) {
        if (!plan_row(run, json_array_get(rows, i))) {
            return false;
        }
    }
    for (size_t i = 0; i < run->ps.plan.count; i++) {
        weft__rt_save_step(run, i);
    }
    return true;
}

/* The span of a reused step: ended at once, saying where its result came from. */
static void
reused_span(struct run *run, const char *id, const json_t *row)
{
    const char *executor = json_string_value(json_object_get(row, "executor"));
    bool is_agent = executor == NULL || strcmp(executor, "agent") == 0;
    struct weft_span *span =
        weft__rt_span_start(run, is_agent ? RT_SPAN_AGENT : RT_SPAN_TOOL,
                            is_agent ? json_string_value(json_object_get(row, "actor")) : executor,
                            run->tel.root, NULL, 0);

    weft_span_set_str(span, "weft.step.id", id);
    weft_span_set_str(span, "weft.step.status", "completed");
    weft_span_set_bool(span, "weft.fork.reused", true);
    weft_span_set_str(span, "weft.fork.of", run->store.fork->run_id);
    weft__rt_span_content(run, span, "langfuse.observation.output",
                          json_string_value(json_object_get(row, "result")));
    weft_span_set_status(span, WEFT_STATUS_OK, NULL);
    weft_span_end(span, 0);
}

/* Plan step @p i completed with stored row @p row's result. */
static void
reuse_step(struct run *run, size_t i, const json_t *row)
{
    struct plan_step *s = &run->ps.plan.steps[i];
    const char *result = json_string_value(json_object_get(row, "result"));

    s->status = STEP_COMPLETED;
    weft__free(s->result);
    s->result = result != NULL ? weft__strdup(result) : NULL;
    s->attempts = (unsigned)json_integer_value(json_object_get(row, "attempts"));
    s->started_ns = weft__now_ns();
    s->ended_ns = s->started_ns;
    if (json_is_number(json_object_get(row, "reward"))) {
        s->reward = json_number_value(json_object_get(row, "reward"));
        s->has_reward = true;
        run->tel.result->reward += s->reward;
    }
    weft__rt_save_step(run, i);
}

void
weft__rt_fork_apply(struct run *run)
{
    const struct rt_fork *f = run->store.fork;
    const json_t *rows = f->rows;

    for (size_t r = 0; r < json_array_size(rows); r++) {
        const json_t *row = json_array_get(rows, r);
        const char *id = json_string_value(json_object_get(row, "id"));
        size_t i = run->ps.plan.count > 0 ? weft__plan_find(&run->ps.plan, id) : (size_t)-1;

        if (json_object_get(f->reused, id) == NULL) {
            continue;
        }
        if (run->cfg.wf->flow == NULL && i == (size_t)-1) {
            continue; /* the fork's workflow has no such step: nothing to reuse */
        }
        if (i != (size_t)-1) {
            reuse_step(run, i, row);
        }
        reused_span(run, id, row);
        run->tel.result->reused_steps++;
    }
}

void
weft__rt_fork_free(struct rt_fork *fork)
{
    if (fork == NULL) {
        return;
    }
    weft__free(fork->from);
    json_decref(fork->rows);
    json_decref(fork->reused);
    weft__free(fork);
}
