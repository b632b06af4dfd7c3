/* runtime/engine/fork.c - forking a stored run from one of its steps (fork.h).
 *
 * The original's steps are read once, as JSON rows in plan order, and cut back to the plan as
 * it stood when the forked step started (plan_at_start(): later replans and corrections undone,
 * so the re-run adds them again only if it asks); the reused set is computed on them before
 * anything runs, so a fork that cannot be made (unknown step, a run still running) is refused
 * before its run row exists. The scripts' positions at that moment come from the original's
 * stored LLM exchanges. Reused steps never reach the executor: they are completed before the
 * first decision, exactly as a resumed run's completed steps are.
 */
#include "runtime/engine/fork.h"
#include "runtime/common/attr_keys.h"
#include "runtime/observe/spans.h"
#include "runtime/observe/watchdog.h"
#include "runtime/replay/replay.h"
#include "runtime/steps/architect.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"

#include <stdio.h>
#include <string.h>

static weft_err
collect_row(const struct state_step_row *row, void *user_data)
{
    json_t *rows = user_data;
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:s?, s:s?, s:s?, s:s?, s:s?, s:I, s:I}", "id", row->id,
        "actor", row->actor, "task", row->task, "depends_on",
        row->depends_on != NULL ? row->depends_on : "[]", "status", row->status, "attempts",
        (int)row->attempts, "result", row->result, "executor", row->executor, "spec", row->spec,
        "requested_by", row->requested_by, "parent", row->parent, "started_ns",
        (json_int_t)(row->started_ns > INT64_MAX ? INT64_MAX : row->started_ns), "ended_ns",
        (json_int_t)(row->ended_ns > INT64_MAX ? INT64_MAX : row->ended_ns));

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

/* The row of the fan-out step that owns item step row @p i ("per_chunk" for
 * "per_chunk[2].translate"), or (size_t)-1 for a step that is no fan-out item. */
static size_t
owner_row(const json_t *rows, size_t i)
{
    const char *id = json_string_value(json_object_get(json_array_get(rows, i), "id"));
    const char *open = id != NULL ? strrchr(id, '[') : NULL;
    char owner[160];

    if (open == NULL || strchr(open, ']') == NULL || strchr(open, '.') == NULL ||
        (size_t)(open - id) >= sizeof(owner)) {
        return (size_t)-1;
    }
    memcpy(owner, id, (size_t)(open - id));
    owner[open - id] = '\0';
    return row_index(rows, owner);
}

static uint64_t
row_ns(const json_t *row, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(row, key));
    return v > 0 ? (uint64_t)v : 0;
}

static weft_err
collect_correction(const struct weft_run_correction *c, void *user_data)
{
    json_t *inserted = json_loads(c->inserted != NULL ? c->inserted : "[]", 0, NULL);
    json_t *r = json_pack("{s:s, s:o, s:s, s:I}", "failed", c->failed_step, "inserted",
                          inserted != NULL ? inserted : json_array(), "before",
                          c->depends_before != NULL ? c->depends_before : "[]", "created_ns",
                          (json_int_t)(c->created_ns > INT64_MAX ? INT64_MAX : c->created_ns));

    return r != NULL && json_array_append_new(user_data, r) == 0 ? WEFT_OK : WEFT_ENOMEM;
}

/* Undo the corrections the original made after @p t (when the forked step started), latest
 * first: their inserted steps are marked in @p dropped and the failed step depends again on
 * what it did before the surgery. The forked step re-runs the failure, so a correction it still
 * needs is made again live, with the corrector answering as it did then. */
static weft_err
undo_corrections(
    struct rt_fork *f, const json_t *corrections, uint64_t t, size_t from, bool *dropped)
{
    for (size_t c = json_array_size(corrections); c-- > 0;) {
        const json_t *cor = json_array_get(corrections, c);
        const json_t *inserted = json_object_get(cor, "inserted");
        size_t failed = row_index(f->rows, json_string_value(json_object_get(cor, "failed")));

        if (row_ns(cor, "created_ns") <= t) {
            continue;
        }
        for (size_t k = 0; k < json_array_size(inserted); k++) {
            size_t j = row_index(f->rows, json_string_value(json_array_get(inserted, k)));
            if (j != (size_t)-1 && j != from) {
                dropped[j] = true;
            }
        }
        if (failed != (size_t)-1 && json_object_set(json_array_get(f->rows, failed), "depends_on",
                                                    json_object_get(cor, "before")) != 0) {
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

/* The original's plan as it stood when step @p from started (at @p t on the original's clock,
 * UINT64_MAX when it never started), and which of its steps the fork reuses.
 *
 * A plan grows while it runs: a loop-back replan appends the steps a finished step asked for
 * (requested_by), a correction inserts corrective steps and rewires the failed one. A fork that
 * kept them and re-ran the step that caused them got them twice: the original's copies, then
 * the ones the re-run asked for again (the code-review run forked from its first review grew
 * from 9 to 15 steps and ran its fixer's script dry). So:
 *   - corrections made after @p t are undone (undo_corrections());
 *   - reused: a step that completed before @p from in plan order or ended before @p t (a
 *     corrective step sits at the plan's end but ran before the step it repaired), and does
 *     not depend, directly or through others, on a step that re-runs, nor is a fan-out with
 *     an item that re-runs;
 *   - a step a replan added is kept only when the step that asked for it is reused: when the
 *     asker re-runs, it asks again (or not) live; the final agent's step the supervisor
 *     appended once the plan was done is left out when it started after @p t (appended again
 *     at the end, not run before the steps the re-run adds). @p from itself is always kept.
 * The rows left are the fork's plan (weft__rt_fork_plan()). */
/* Is row @p i the final agent's step (@p final names it, or is NULL) that the supervisor
 * appended when the plan was done, after @p t? */
static bool
is_late_final(const json_t *rows, size_t i, const char *final, uint64_t t)
{
    const json_t *row = json_array_get(rows, i);
    const char *task = json_string_value(json_object_get(row, "task"));
    const char *actor = json_string_value(json_object_get(row, "actor"));
    uint64_t started = row_ns(row, "started_ns");

    return final != NULL && actor != NULL && strcmp(actor, final) == 0 && task != NULL &&
           strcmp(task, WEFT__RT_FINAL_TASK) == 0 &&
           json_string_value(json_object_get(row, "requested_by")) == NULL &&
           (started == 0 || started > t);
}

static weft_err
plan_at_start(
    struct rt_fork *f, size_t from, uint64_t t, const json_t *corrections, const char *final)
{
    size_t n = json_array_size(f->rows);
    bool *live = weft__calloc(n + 1, sizeof(*live));
    bool *dropped = weft__calloc(n + 1, sizeof(*dropped));
    json_t *kept = json_array();
    bool is_changed = true;
    weft_err err = WEFT_ENOMEM;

    if (live == NULL || dropped == NULL || kept == NULL) {
        goto out;
    }
    err = undo_corrections(f, corrections, t, from, dropped);
    if (err != WEFT_OK) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t ended = row_ns(json_array_get(f->rows, i), "ended_ns");
        bool is_before = i != from && (i < from || (ended != 0 && ended <= t));
        live[i] = !dropped[i] && !is_before;
    }
    while (is_changed) { /* dependencies may point forward: until nothing changes */
        is_changed = false;
        for (size_t i = 0; i < n; i++) {
            size_t owner = live[i] ? owner_row(f->rows, i) : (size_t)-1;
            if (!live[i] && !dropped[i] && depends_on_live(f->rows, i, live)) {
                live[i] = true;
                is_changed = true;
            }
            /* a fan-out ends with its items: one re-run, and it runs again */
            if (owner != (size_t)-1 && !live[owner] && !dropped[owner]) {
                live[owner] = true;
                is_changed = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++) { /* an asker comes before what it asked for */
        const char *asker =
            json_string_value(json_object_get(json_array_get(f->rows, i), "requested_by"));
        size_t j = row_index(f->rows, asker);
        if (i != from &&
            ((j != (size_t)-1 && (live[j] || dropped[j])) || is_late_final(f->rows, i, final, t))) {
            dropped[i] = true;
            live[i] = false;
        }
    }
    err = WEFT_OK;
    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        json_t *row = json_array_get(f->rows, i);
        const char *status = json_string_value(json_object_get(row, "status"));
        if (dropped[i]) {
            continue;
        }
        if (json_array_append(kept, row) != 0) {
            err = WEFT_ENOMEM;
        } else if (!live[i] && status != NULL && strcmp(status, "completed") == 0 &&
                   json_object_set(f->reused, json_string_value(json_object_get(row, "id")), row) !=
                       0) {
            err = WEFT_ENOMEM;
        }
    }
    if (err == WEFT_OK) {
        json_decref(f->rows);
        f->rows = kept;
        kept = NULL;
    }
out:
    json_decref(kept);
    weft__free(live);
    weft__free(dropped);
    return err;
}

/* When the original decided to start step @p from, on its clock: the end of the last step that
 * ended before it started (else the run's start, @p run_started), so the supervisor's own calls
 * for that decision (routing) are made again by the fork. UINT64_MAX when it never started.
 * A step that was corrected keeps only its last attempt's start: its first start came before
 * its first correction. */
static uint64_t
decided_at(const json_t *rows, size_t from, const json_t *corrections, uint64_t run_started)
{
    const char *id = json_string_value(json_object_get(json_array_get(rows, from), "id"));
    uint64_t bound = row_ns(json_array_get(rows, from), "started_ns");
    uint64_t t = run_started;

    if (bound == 0) {
        return UINT64_MAX;
    }
    for (size_t c = 0; c < json_array_size(corrections); c++) {
        const json_t *cor = json_array_get(corrections, c);
        if (strcmp(json_string_value(json_object_get(cor, "failed")), id) == 0 &&
            row_ns(cor, "created_ns") < bound) {
            bound = row_ns(cor, "created_ns");
        }
    }
    for (size_t i = 0; i < json_array_size(rows); i++) {
        uint64_t ended = row_ns(json_array_get(rows, i), "ended_ns");
        if (i != from && ended != 0 && ended <= bound && ended > t) {
            t = ended;
        }
    }
    /* A failed step's end is its last one too: the correction that repaired it (and inserted
     * the forked step) marks when its first attempt had ended. */
    for (size_t c = 0; c < json_array_size(corrections); c++) {
        uint64_t made = row_ns(json_array_get(corrections, c), "created_ns");
        if (made < bound && made > t) {
            t = made;
        }
    }
    return t;
}

/* A flow step's calls are kept under its step id, and a script answers them from the step's
 * queue when it has one, else from its agent's: the agent's queue is moved past the calls of
 * all its steps too (a key the script does not use is never read). */
static weft_err
agent_cursors(const struct run *run, struct rt_fork *f)
{
    json_t *add = json_object();
    const char *key = NULL;
    json_t *v = NULL;
    weft_err err = add != NULL ? WEFT_OK : WEFT_ENOMEM;

    json_object_foreach(f->cursors, key, v)
    {
        const char *slash = strrchr(key, '/');
        char who[256];
        char agent_key[512];
        const char *actor = NULL;
        if (err != WEFT_OK || slash == NULL || (size_t)(slash - key) >= sizeof(who)) {
            continue;
        }
        snprintf(who, sizeof(who), "%.*s", (int)(slash - key), key);
        actor = json_string_value(
            json_object_get(json_array_get(f->rows, row_index(f->rows, who)), "actor"));
        if (actor == NULL || strcmp(actor, who) == 0 || weft__rt_find_agent(run, who) != WF_NONE) {
            continue; /* not a step of its own, or an agent's own queue */
        }
        snprintf(agent_key, sizeof(agent_key), "%s%s", actor, slash);
        if (json_object_set_new(add, agent_key,
                                json_integer(json_integer_value(json_object_get(add, agent_key)) +
                                             json_integer_value(v))) != 0) {
            err = WEFT_ENOMEM;
        }
    }
    json_object_foreach(add, key, v)
    {
        json_int_t own = json_integer_value(json_object_get(f->cursors, key));
        if (err == WEFT_OK &&
            json_object_set_new(f->cursors, key, json_integer(own + json_integer_value(v))) != 0) {
            err = WEFT_ENOMEM;
        }
    }
    json_decref(add);
    return err;
}

/* Add @p counts ({"who/purpose": n}) into @p cursors. */
static weft_err
add_counts(json_t *cursors, const json_t *counts)
{
    const char *key = NULL;
    json_t *v = NULL;

    json_object_foreach((json_t *)counts, key, v)
    {
        json_int_t had = json_integer_value(json_object_get(cursors, key));
        if (json_object_set_new(cursors, key, json_integer(had + json_integer_value(v))) != 0) {
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

/* Add to @p cursors the positions the scripts of run @p info started from: none for a run of
 * its own; for a fork, where its original's were when the forked step started (that original
 * may be a fork too: 16 deep at most). A fork stores only the calls it made, so a fork of a
 * fork counted from its calls alone answered its re-run with answers its original had used.
 * Each original and that moment go into @p f's origins (its composed teams then). */
static weft_err
add_start_cursors(struct run *run,
                  struct rt_fork *f,
                  const struct weft_run_info *info,
                  json_t *cursors,
                  unsigned depth)
{
    uint64_t t = 0;
    struct weft_run_info origin;
    json_t *rows = NULL;
    json_t *corrections = NULL;
    json_t *counts = NULL;
    size_t from = (size_t)-1;
    weft_err err = WEFT_OK;

    if (info->origin_kind == NULL || strcmp(info->origin_kind, "fork") != 0 ||
        info->origin_run_id == NULL || info->origin_step == NULL || depth == 16) {
        return WEFT_OK;
    }
    memset(&origin, 0, sizeof(origin));
    rows = json_array();
    corrections = json_array();
    err = rows != NULL && corrections != NULL
              ? weft__state_run_info(run->store.state, info->origin_run_id, &origin)
              : WEFT_ENOMEM;
    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* the original is gone: its positions with it */
        goto out;
    }
    err = err == WEFT_OK
              ? weft__state_steps_each(run->store.state, info->origin_run_id, collect_row, rows)
              : err;
    err = err == WEFT_OK ? weft__state_corrections_each(run->store.state, info->origin_run_id,
                                                        collect_correction, corrections)
                         : err;
    from = row_index(rows, info->origin_step);
    if (err != WEFT_OK || from == (size_t)-1) {
        goto out;
    }
    t = decided_at(rows, from, corrections, origin.started_ns);
    err = weft__state_exchange_counts(run->store.state, info->origin_run_id, t, &counts);
    err = err == WEFT_OK ? add_counts(cursors, counts) : err;
    if (err == WEFT_OK &&
        json_array_append_new(f->origins,
                              json_pack("{s:s, s:I}", "run", info->origin_run_id, "before",
                                        (json_int_t)(t > INT64_MAX ? INT64_MAX : t))) != 0) {
        err = WEFT_ENOMEM;
    }
    err = err == WEFT_OK ? add_start_cursors(run, f, &origin, cursors, depth + 1) : err;
out:
    json_decref(counts);
    json_decref(rows);
    json_decref(corrections);
    weft__state_info_cleanup(&origin);
    return err;
}

static const char *
final_actor(const struct run *run)
{
    size_t final = run->cfg.wf->supervisor.final_agent;

    return final != WF_NONE ? run->cfg.wf->agents[final].name : NULL;
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

/* A changed task or answer (options.fork_task, fork_answer) fits the forked step, row @p from:
 * a step of its own (not a fan-out's item, made as its fan-out runs), and an agent's for an
 * answer (a tool or command step makes no LLM call). */
static weft_err
check_overrides(
    const struct run *run, const struct rt_fork *f, size_t from, char *error, size_t error_len)
{
    const json_t *row = json_array_get(f->rows, from);
    const char *executor = json_string_value(json_object_get(row, "executor"));
    const char *key = run->cfg.opts->fork_answer != NULL ? "answer" : "task";

    if (run->cfg.opts->fork_task == NULL && run->cfg.opts->fork_answer == NULL) {
        return WEFT_OK;
    }
    if (owner_row(f->rows, from) != (size_t)-1) {
        snprintf(error, error_len,
                 "fork: step.%.64s.%s: the step is an item of fan-out step '%.64s', made as that "
                 "runs; set the fan-out's own step",
                 f->from, key,
                 json_string_value(
                     json_object_get(json_array_get(f->rows, owner_row(f->rows, from)), "id")));
        return WEFT_EINVAL;
    }
    if (run->cfg.opts->fork_answer != NULL && executor != NULL && strcmp(executor, "agent") != 0) {
        snprintf(error, error_len,
                 "fork: step.%.64s.answer: the step runs %.32s, not an agent, and makes no LLM "
                 "call to answer",
                 f->from, executor);
        return WEFT_EINVAL;
    }
    return WEFT_OK;
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
        err = check_overrides(run, f, from, error, error_len);
    }
    /* A fan-out's items start together, on one decision, and it ends with them: forking from
     * an item re-runs its fan-out, from where that started. */
    while (err == WEFT_OK && owner_row(f->rows, from) != (size_t)-1) {
        from = owner_row(f->rows, from);
    }
    if (err == WEFT_OK) {
        /* The scripts' positions and the plan as they were when the forked step started. */
        json_t *corrections = json_array();
        uint64_t t = 0;
        err = corrections != NULL ? weft__state_corrections_each(run->store.state, f->run_id,
                                                                 collect_correction, corrections)
                                  : WEFT_ENOMEM;
        t = decided_at(f->rows, from, corrections, info.started_ns);
        f->decided_ns = t;
        err = err == WEFT_OK ? plan_at_start(f, from, t, corrections, final_actor(run)) : err;
        err = err == WEFT_OK
                  ? weft__state_exchange_counts(run->store.state, f->run_id, t, &f->cursors)
                  : err;
        err = err == WEFT_OK ? add_start_cursors(run, f, &info, f->cursors, 0) : err;
        err = err == WEFT_OK ? agent_cursors(run, f) : err;
        json_decref(corrections);
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
    f->origins = json_array();
    err = f->from != NULL && f->rows != NULL && f->reused != NULL && f->origins != NULL
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
        /* the workflow's agents and the teams composed so far (weft__rt_architect_restore()) */
        agent = weft__rt_find_agent(run, json_string_value(json_object_get(row, "actor")));
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
        struct plan_step *s = &run->ps.plan.steps[index];
        const char *asker = json_string_value(json_object_get(row, "requested_by"));
        const char *parent = json_string_value(json_object_get(row, "parent"));
        s->executor = ex;
        s->spec = spec != NULL ? json_loads(spec, 0, NULL) : NULL;
        /* Who asked for it: its prompt quotes the asker's request, as the original's did. */
        s->requested_by = asker != NULL ? weft__strdup(asker) : NULL;
        s->parent = parent != NULL ? weft__strdup(parent) : NULL;
        is_ok = (asker == NULL || s->requested_by != NULL) && (parent == NULL || s->parent != NULL);
    }
    return is_ok;
}

/* Workflow plan step @p s also depends on the steps the fork appended (@p first on) that its
 * stored row named: a failed step a correction kept rewired waits for its corrective steps. */
static bool
add_appended_deps(struct run *run, struct plan_step *s, const json_t *row, size_t first)
{
    json_t *deps = json_loads(json_string_value(json_object_get(row, "depends_on")), 0, NULL);
    bool is_ok = true;

    for (size_t d = 0; is_ok && d < json_array_size(deps); d++) {
        const char *id = json_string_value(json_array_get(deps, d));
        size_t j = id != NULL ? weft__plan_find(&run->ps.plan, id) : (size_t)-1;
        char **grown = NULL;
        if (j == (size_t)-1 || j < first) {
            continue;
        }
        grown = weft__realloc(s->depends_on, (s->depends_count + 1) * sizeof(*grown));
        is_ok = grown != NULL;
        if (is_ok) {
            s->depends_on = grown;
            s->depends_on[s->depends_count] = weft__strdup(id);
            is_ok = s->depends_on[s->depends_count] != NULL;
            s->depends_count += is_ok ? 1 : 0;
        }
    }
    json_decref(deps);
    return is_ok;
}

/* The forked step's task replaced (options.fork_task). false: out of memory. */
static bool
set_task(struct run *run)
{
    size_t i = weft__plan_find(&run->ps.plan, run->store.fork->from);
    char *task = NULL;

    if (i == (size_t)-1) {
        return true; /* the fork's workflow lacks it: nothing runs it */
    }
    task = weft__strdup(run->cfg.opts->fork_task);
    if (task == NULL) {
        return false;
    }
    weft__free(run->ps.plan.steps[i].task);
    run->ps.plan.steps[i].task = task;
    return true;
}

bool
weft__rt_fork_plan(struct run *run)
{
    const json_t *rows = run->store.fork->rows;
    size_t first = run->ps.plan.count;

    /* The teams the original had composed by then: the steps kept from its plan may be theirs
     * (a fork's own teams include those its original had composed when it was forked). */
    weft__rt_architect_restore(run, run->store.fork->run_id, run->store.fork->decided_ns);
    for (size_t i = 0; i < json_array_size(run->store.fork->origins); i++) {
        const json_t *o = json_array_get(run->store.fork->origins, i);
        weft__rt_architect_restore(run, json_string_value(json_object_get(o, "run")),
                                   row_ns(o, "before"));
    }
    /* After a workflow's own plan, only what it lacks: the steps replans and corrections had
     * added by then (a fork from a step a replan added needs it and its asker's other asks). */
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i);
        const char *id = json_string_value(json_object_get(row, "id"));
        if (first > 0 && weft__plan_find(&run->ps.plan, id) != (size_t)-1) {
            continue;
        }
        if (!plan_row(run, row)) {
            return false;
        }
    }
    if (run->cfg.opts->fork_task != NULL && !set_task(run)) {
        return false;
    }
    for (size_t i = 0; i < first && first < run->ps.plan.count; i++) {
        size_t r = row_index(rows, run->ps.plan.steps[i].id);
        if (r != (size_t)-1 &&
            !add_appended_deps(run, &run->ps.plan.steps[i], json_array_get(rows, r), first)) {
            return false;
        }
        weft__rt_save_step(run, i);
    }
    for (size_t i = first; i < run->ps.plan.count; i++) {
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

    weft__rk_set_str(span, WEFT__RK_STEP_ID, id);
    weft__rk_set_str(span, WEFT__RK_STEP_STATUS, "completed");
    weft__rk_set_bool(span, WEFT__RK_FORK_REUSED, true);
    weft__rk_set_str(span, WEFT__RK_FORK_OF, run->store.fork->run_id);
    weft__rt_span_content(run, span, WEFT__RK_LANGFUSE_OBSERVATION_OUTPUT,
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

    weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
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

/* The watchdog as the original's was when the forked step started: it has seen the reused
 * steps' hand-offs and outputs, in the order they ended, and the last of them is the actor the
 * next step is handed off from, so a hand-off loop that began before the forked step is found
 * on the same repetition as in the original, not later. The repetitions it saw there have no
 * span in the fork (their links are left out), and a loop found among them was the original's
 * to report: it is not counted, logged or paged again. */
static void
watchdog_catch_up(struct run *run)
{
    const json_t *rows = run->store.fork->rows;
    uint64_t after = 0;

    run->watchdog.is_catching_up = true;
    for (;;) {
        size_t next = (size_t)-1;
        uint64_t next_ns = UINT64_MAX;
        for (size_t i = 0; i < run->ps.plan.count; i++) {
            const json_t *row = json_array_get(rows, row_index(rows, run->ps.plan.steps[i].id));
            uint64_t ended = row_ns(row, "ended_ns");
            if (json_object_get(run->store.fork->reused, run->ps.plan.steps[i].id) != NULL &&
                ended > after && ended < next_ns) {
                next = i;
                next_ns = ended;
            }
        }
        if (next == (size_t)-1) {
            run->watchdog.is_catching_up = false;
            return;
        }
        weft__rt_watchdog_step(run, NULL, next); /* its hand-off, from the step before */
        weft__rt_watchdog_step_done(run, next);
        run->ps.last_actor = weft__rt_step_actor(run, &run->ps.plan.steps[next]);
        after = next_ns;
    }
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
    if (run->cfg.wf->flow == NULL) {
        watchdog_catch_up(run);
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
    json_decref(fork->cursors);
    json_decref(fork->origins);
    weft__free(fork);
}
