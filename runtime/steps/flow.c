/* runtime/steps/flow.c - the flow engine: a DAG of agent nodes run in parallel on a bounded worker
 * pool, with per-node loops, fan-out over a list with a concurrency limit, and fan-in of the
 * ordered item results.
 *
 * Every node execution is a plan step, so the state store, `weft run show` and the evaluator
 * see flows like any plan. The scheduler (the engine thread) owns the plan; workers run one
 * step at a time through the run's executor (rt_execute_step()), which releases the run lock only
 * around LLM calls and tools (run.h), so steps overlap exactly where they wait on I/O.
 *
 * Scopes: the top-level flow is scope 0; each fan-out item is a scope running the fan-out
 * node's sub-flow with its own loop counters. A step records its scope (plan_step.item) and
 * its node (plan_step.flow_node).
 *
 * Loops: when a node with loop_config completes and its result's condition_field is true,
 * the break_condition (parsed at load time) does not hold and the loop count is below
 * max_iterations, the nodes from loop_back_to to the node are re-opened with the node's
 * result as feedback (a `loop {node}` span records it). Reaching max_iterations is recorded
 * (weft.loop.exhausted) and the flow continues with the last result, or the node fails when
 * on_max_iterations is "fail".
 *
 * Failures: a required node that fails fails its scope (the whole flow at the top level; only
 * its item inside a fan-out, where the other items' results survive). A non-required node's
 * failure lets its dependents run without its result.
 */
#include "runtime/steps/flow.h"
#include "runtime/common/attr_keys.h"
#include "runtime/decide/evaluate.h"
#include "runtime/observe/spans.h"
#include "runtime/steps/subrun.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/workflow/expr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 1000 /* a fan-out over a longer list fails the node: memory stays bounded */

struct scope {
    const struct wf_flow *def;
    size_t first_step; /* steps [first_step, first_step + def->count) */
    int parent;        /* parent scope, -1 for the top level */
    size_t owner;      /* fan-out step in the parent scope (items) */
    int item;          /* item index, -1 for the top level */
    unsigned *loops;   /* loop count per node */
    bool is_active;
    bool is_done;
    bool is_failed;
    struct weft_span *span; /* item span */
    struct weft_span_context ctx;
};

struct fanout {
    size_t step; /* the fan-out node's step */
    size_t first_scope;
    size_t items;
    size_t active;
    size_t finished;
    size_t next; /* next item to activate */
    struct weft_span *span;
};

struct flow {
    struct run *run;
    struct scope *scopes;
    size_t scope_count;
    size_t scope_cap;
    struct fanout *fanouts;
    size_t fanout_count;
    size_t fanout_cap;
    size_t *queue; /* steps waiting for a worker */
    size_t queued;
    size_t *done; /* steps the workers finished */
    size_t done_count;
    size_t cap; /* of queue and done: grows with the plan */
    size_t running;
    pthread_cond_t work;
    pthread_cond_t changed;
    bool is_stopping;
    bool is_failed;
    char reason[512];
};

static bool
grow(void **items, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap == 0 ? 16 : *cap;
    void *grown = NULL;

    if (need <= *cap) {
        return true;
    }
    while (n < need) {
        n *= 2;
    }
    grown = weft__realloc(*items, n * size);
    if (grown == NULL) {
        return false;
    }
    *items = grown;
    *cap = n;
    return true;
}

static bool
reserve_jobs(struct flow *fl)
{
    size_t need = fl->run->ps.plan.count + 1;
    size_t cap = fl->cap;

    if (!grow((void **)&fl->queue, &cap, need, sizeof(size_t))) {
        return false;
    }
    cap = fl->cap;
    if (!grow((void **)&fl->done, &cap, need, sizeof(size_t))) {
        return false;
    }
    fl->cap = cap;
    return true;
}

static const struct wf_flow_node *
node_of(const struct flow *fl, size_t step)
{
    const struct plan_step *s = &fl->run->ps.plan.steps[step];
    return &fl->scopes[s->item].def->nodes[s->flow_node];
}

/* ------------------------------------------------------------------------------------------ */
/* Workers                                                                                     */

/* A node that runs another workflow file as one step (subrun.c). */
static void
subflow_step(struct flow *fl, size_t index)
{
    struct run *run = fl->run;

    run->ps.plan.steps[index].attempts++;
    weft__rt_run_subworkflow(run, index, node_of(fl, index)->subwf, NULL);
}

struct worker_arg {
    struct flow *fl;
    int index;
};

static void *
worker_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct flow *fl = wa->fl;
    struct run *run = fl->run;

    weft__rt_set_worker_index(wa->index);
    weft__rt_lock(run);
    for (;;) {
        size_t step = 0;
        while (fl->queued == 0 && !fl->is_stopping) {
            run->svc->cond_wait(run->svc->ctx, &fl->work);
        }
        if (fl->is_stopping) {
            break;
        }
        step = fl->queue[0];
        memmove(fl->queue, fl->queue + 1, (fl->queued - 1) * sizeof(*fl->queue));
        fl->queued--;
        if (node_of(fl, step)->subwf != NULL) {
            subflow_step(fl, step);
        } else {
            rt_execute_step(run,
                            step); /* the executor; releases the lock around LLM and tool calls */
        }
        fl->done[fl->done_count++] = step;
        fl->running--;
        pthread_cond_signal(&fl->changed);
    }
    weft__rt_unlock(run);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Scopes and steps                                                                            */

static char *
item_text(const json_t *item)
{
    char *dumped = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
    char *copy = dumped != NULL ? weft__strdup(dumped) : NULL;
    free(dumped);
    return copy;
}

/* A resumed flow: a step the killed run completed keeps its result and is not run again; any
 * other step keeps its attempt count, which also restores its loop counter. */
static void
restore_step(struct flow *fl, int scope, size_t node, size_t step)
{
    struct run *run = fl->run;
    struct plan_step *s = &run->ps.plan.steps[step];
    const json_t *stored = json_object_get(run->store.resumed, s->id);
    const char *status = json_string_value(json_object_get(stored, "status"));

    if (stored == NULL) {
        return;
    }
    s->attempts = (unsigned)json_integer_value(json_object_get(stored, "attempts"));
    if (fl->scopes[scope].def->nodes[node].has_loop && s->attempts > 1) {
        fl->scopes[scope].loops[node] = s->attempts - 1;
    }
    if (status == NULL || strcmp(status, "completed") != 0) {
        return;
    }
    weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
    weft__free(s->result);
    s->result = json_is_string(json_object_get(stored, "result"))
                    ? weft__strdup(json_string_value(json_object_get(stored, "result")))
                    : NULL;
    if (json_is_number(json_object_get(stored, "reward"))) {
        s->reward = json_number_value(json_object_get(stored, "reward"));
        s->has_reward = true;
        run->tel.result->reward += s->reward;
    }
}

static json_t *
fanout_list(const struct flow *fl, const struct scope *sc, const struct wf_flow_node *n);
static int add_scope(struct flow *fl,
                     const struct wf_flow *def,
                     int parent,
                     size_t owner,
                     int item,
                     const json_t *item_value);

/* A fork reuses fan-out node @p step of scope @p index (it ended before the forked step, its
 * items with it): its items' steps are reused too, and listed with the run's steps as the
 * original's were, in scopes that never run. @return false when out of memory. */
static bool
restore_items(struct flow *fl, int index, size_t step)
{
    const struct scope *sc = &fl->scopes[index];
    const struct wf_flow_node *n = &sc->def->nodes[fl->run->ps.plan.steps[step].flow_node];
    json_t *list = fanout_list(fl, sc, n);
    bool is_ok = true;

    for (size_t i = 0; is_ok && i < json_array_size(list) && i < MAX_ITEMS; i++) {
        is_ok = add_scope(fl, n->sub, index, step, (int)i, json_array_get(list, i)) >= 0;
    }
    json_decref(list);
    return is_ok;
}

/* Create scope @p def with its steps. @return the scope index, or -1 (out of memory). */
static int
add_scope(struct flow *fl,
          const struct wf_flow *def,
          int parent,
          size_t owner,
          int item,
          const json_t *item_value)
{
    struct run *run = fl->run;
    struct scope *sc = NULL;
    int index = (int)fl->scope_count;
    char *value = item_value != NULL ? item_text(item_value) : NULL;

    if (!grow((void **)&fl->scopes, &fl->scope_cap, fl->scope_count + 1, sizeof(*fl->scopes))) {
        weft__free(value);
        return -1;
    }
    sc = &fl->scopes[fl->scope_count];
    memset(sc, 0, sizeof(*sc));
    sc->def = def;
    sc->parent = parent;
    sc->owner = owner;
    sc->item = item;
    sc->first_step = run->ps.plan.count;
    sc->is_active = parent < 0;
    sc->loops = weft__calloc(def->count, sizeof(*sc->loops));
    if (sc->loops == NULL) {
        weft__free(value);
        return -1;
    }
    fl->scope_count++;
    for (size_t i = 0; i < def->count; i++) {
        const struct wf_flow_node *n = &def->nodes[i];
        const char *deps[64];
        char ids[64][160];
        char id[160];
        struct weft__buf task;
        size_t k = 0;
        size_t idx = 0;
        weft_err err = WEFT_OK;

        if (parent < 0) {
            snprintf(id, sizeof(id), "%s", n->id);
        } else {
            snprintf(id, sizeof(id), "%.60s[%d].%.60s", run->ps.plan.steps[owner].id, item, n->id);
        }
        for (; k < n->upstream_count && k < 64; k++) {
            if (parent < 0) {
                snprintf(ids[k], sizeof(ids[k]), "%s", def->nodes[n->upstream[k]].id);
            } else {
                snprintf(ids[k], sizeof(ids[k]), "%.60s[%d].%.60s", run->ps.plan.steps[owner].id,
                         item, def->nodes[n->upstream[k]].id);
            }
            deps[k] = ids[k];
        }
        weft__buf_init(&task, 0);
        weft__buf_printf(&task, "%s", n->task != NULL ? n->task : "Do your part of the flow.");
        if (value != NULL) {
            weft__buf_printf(&task, "\n\nItem %d: %s", item, value);
        }
        err = weft__plan_append(&run->ps.plan, id, n->agent, task.data != NULL ? task.data : "",
                                deps, k, &idx);
        weft__buf_cleanup(&task);
        if (err != WEFT_OK) {
            weft__free(value);
            return -1;
        }
        run->ps.plan.steps[idx].flow_node = (int)i;
        run->ps.plan.steps[idx].item = index;
        restore_step(fl, index, i, idx);
        weft__rt_save_step(run, idx);
    }
    weft__free(value);
    for (size_t i = 0; run->store.fork != NULL && i < def->count; i++) {
        size_t step = fl->scopes[index].first_step + i;
        if (def->nodes[i].sub != NULL && def->nodes[i].for_each != NULL &&
            run->ps.plan.steps[step].status == STEP_COMPLETED && !restore_items(fl, index, step)) {
            return -1;
        }
    }
    return reserve_jobs(fl) ? index : -1;
}

/* A step's dependencies are satisfied: completed, or failed but not required. */
static bool
is_ready(const struct flow *fl, size_t step)
{
    const struct run *run = fl->run;
    const struct plan_step *s = &run->ps.plan.steps[step];
    const struct scope *sc = &fl->scopes[s->item];
    const struct wf_flow_node *n = &sc->def->nodes[s->flow_node];

    for (size_t k = 0; k < n->upstream_count; k++) {
        const struct plan_step *u = &run->ps.plan.steps[sc->first_step + n->upstream[k]];
        bool is_optional_failure =
            u->status == STEP_FAILED && !sc->def->nodes[n->upstream[k]].is_required;
        if (u->status != STEP_COMPLETED && !is_optional_failure) {
            return false;
        }
    }
    return true;
}

static json_t *
parse_result(const char *text)
{
    json_t *v = text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    return v != NULL ? v : (text != NULL ? json_string(text) : json_null());
}

/* The value at a dotted path of @p root, or NULL. */
static const json_t *
lookup(const json_t *root, const char *path)
{
    char key[128];
    const char *p = path;

    while (root != NULL && *p != '\0') {
        size_t len = strcspn(p, ".");
        if (len >= sizeof(key)) {
            return NULL;
        }
        memcpy(key, p, len);
        key[len] = '\0';
        root = json_object_get(root, key);
        p += len;
        if (*p == '.') {
            p++;
        }
    }
    return root;
}

static bool
is_truthy(const json_t *v)
{
    if (v == NULL || json_is_null(v) || json_is_false(v)) {
        return false;
    }
    if (json_is_integer(v)) {
        return json_integer_value(v) != 0;
    }
    if (json_is_real(v)) {
        return json_real_value(v) != 0.0;
    }
    if (json_is_string(v)) {
        return json_string_length(v) > 0;
    }
    if (json_is_array(v)) {
        return json_array_size(v) > 0;
    }
    return !json_is_object(v) || json_object_size(v) > 0;
}

/* A fan-out item's result: {node id: last result} for every node of its sub-flow, so the
 * fan-in sees the translation as well as its audit. */
static json_t *
item_result(const struct flow *fl, const struct scope *sc)
{
    json_t *all = json_object();

    for (size_t i = 0; all != NULL && i < sc->def->count; i++) {
        json_object_set_new(all, sc->def->nodes[i].id,
                            parse_result(fl->run->ps.plan.steps[sc->first_step + i].result));
    }
    return all;
}

/* The flow's output: its sink node's result, or an object of several sinks' results. */
static json_t *
scope_result(const struct flow *fl, const struct scope *sc)
{
    const struct run *run = fl->run;
    json_t *sinks = json_object();
    json_t *only = NULL;
    size_t n = 0;

    for (size_t i = 0; sinks != NULL && i < sc->def->count; i++) {
        bool is_sink = true;
        for (size_t j = 0; j < sc->def->count && is_sink; j++) {
            for (size_t k = 0; k < sc->def->nodes[j].upstream_count; k++) {
                is_sink = is_sink && sc->def->nodes[j].upstream[k] != i;
            }
        }
        if (is_sink) {
            json_t *r = parse_result(run->ps.plan.steps[sc->first_step + i].result);
            json_object_set_new(sinks, sc->def->nodes[i].id, r);
            only = r;
            n++;
        }
    }
    if (n == 1) {
        json_incref(only);
        json_decref(sinks);
        return only;
    }
    return sinks;
}

/* ------------------------------------------------------------------------------------------ */
/* Fan-out                                                                                     */

static void check_scope(struct flow *fl, int index);

static void
activate_items(struct flow *fl, struct fanout *fo)
{
    struct run *run = fl->run;
    const struct wf_flow_node *n = node_of(fl, fo->step);

    while (fo->next < fo->items && fo->active < n->max_parallel) {
        struct scope *sc = &fl->scopes[fo->first_scope + fo->next];
        char subject[160];
        snprintf(subject, sizeof(subject), "%.100s[%d]", run->ps.plan.steps[fo->step].id, sc->item);
        sc->span = weft__rt_span_start(run, RT_SPAN_ITEM, subject, fo->span, NULL, 0);
        weft__rk_set_int(sc->span, WEFT__RK_ITEM_INDEX, sc->item);
        weft__rk_set_str(sc->span, WEFT__RK_STEP_ID, run->ps.plan.steps[fo->step].id);
        weft_span_context_of(sc->span, &sc->ctx);
        sc->ctx.trace_state = NULL;
        for (size_t i = 0; i < sc->def->count; i++) {
            run->ps.plan.steps[sc->first_step + i].parent_ctx = sc->ctx;
        }
        sc->is_active = true;
        fo->active++;
        fo->next++;
        check_scope(fl, (int)(fo->first_scope + fo->next - 1)); /* restored items are done */
    }
}

static void finish_fanout(struct flow *fl, struct fanout *fo);

/* The list fan-out node @p n of scope @p sc goes over: the first upstream result with an
 * array at its for_each path (a new reference), or NULL. */
static json_t *
fanout_list(const struct flow *fl, const struct scope *sc, const struct wf_flow_node *n)
{
    const struct run *run = fl->run;
    json_t *list = NULL;

    for (size_t k = 0; k < n->upstream_count && list == NULL; k++) {
        json_t *r = parse_result(run->ps.plan.steps[sc->first_step + n->upstream[k]].result);
        const json_t *v = lookup(r, n->for_each);
        if (json_is_array(v)) {
            list = json_incref((json_t *)v);
        }
        json_decref(r);
    }
    return list;
}

/* Start the fan-out node @p step: one scope per item of the upstream's list. */
static void
start_fanout(struct flow *fl, size_t step)
{
    struct run *run = fl->run;
    const struct wf_flow_node *n = node_of(fl, step);
    const struct scope *sc = &fl->scopes[run->ps.plan.steps[step].item];
    int scope_index = run->ps.plan.steps[step].item;
    json_t *list = NULL;
    struct fanout *fo = NULL;
    char why[256] = "";

    weft__plan_set_status(&run->ps.plan, step, STEP_IN_PROGRESS);
    run->ps.plan.steps[step].attempts++;
    run->ps.plan.steps[step].started_ns = weft__now_ns();
    list = fanout_list(fl, sc, n);
    if (list == NULL) {
        snprintf(why, sizeof(why), "no upstream result has a list at '%.100s'", n->for_each);
    } else if (json_array_size(list) > MAX_ITEMS) {
        snprintf(why, sizeof(why), "%zu items exceed the limit of %d", json_array_size(list),
                 MAX_ITEMS);
    } else if (!grow((void **)&fl->fanouts, &fl->fanout_cap, fl->fanout_count + 1,
                     sizeof(*fl->fanouts))) {
        snprintf(why, sizeof(why), "out of memory");
    }
    if (why[0] == '\0') {
        fo = &fl->fanouts[fl->fanout_count++];
        memset(fo, 0, sizeof(*fo));
        fo->step = step;
        fo->first_scope = fl->scope_count;
        fo->items = json_array_size(list);
        fo->span = weft__rt_span_start_under(run, RT_SPAN_FANOUT, run->ps.plan.steps[step].id,
                                             &run->ps.plan.steps[step].parent_ctx, NULL, 0);
        weft__rk_set_str(fo->span, WEFT__RK_STEP_ID, run->ps.plan.steps[step].id);
        weft__rk_set_str(fo->span, WEFT__RK_FAN_OUT_FOR_EACH, n->for_each);
        weft__rk_set_int(fo->span, WEFT__RK_FAN_OUT_ITEMS, (int64_t)fo->items);
        weft__rk_set_int(fo->span, WEFT__RK_FAN_OUT_MAX_PARALLEL, n->max_parallel);
        for (size_t i = 0; i < fo->items; i++) {
            if (add_scope(fl, n->sub, scope_index, step, (int)i, json_array_get(list, i)) < 0) {
                snprintf(why, sizeof(why), "out of memory");
                break;
            }
        }
    }
    json_decref(list);
    if (why[0] != '\0') {
        struct plan_step *s = &run->ps.plan.steps[step];
        weft__free(s->feedback);
        s->feedback = weft__strdup(why);
        weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
        if (fo != NULL) {
            weft_span_set_status(fo->span, WEFT_STATUS_ERROR, why);
            weft_span_end(fo->span, 0);
            fl->fanout_count--;
        }
        fl->done[fl->done_count++] = step; /* handled like a worker's failure */
        return;
    }
    if (fo->items == 0) {
        finish_fanout(fl, fo);
        return;
    }
    activate_items(fl, fo);
}

static void
finish_fanout(struct flow *fl, struct fanout *fo)
{
    struct run *run = fl->run;
    json_t *results = json_array();
    size_t failed = 0;
    struct plan_step *s = NULL;
    char *text = NULL;

    for (size_t i = 0; i < fo->items; i++) {
        const struct scope *sc = &fl->scopes[fo->first_scope + i];
        /* Fan-in in item order; a failed item leaves null and the others survive. */
        json_array_append_new(results, sc->is_failed ? json_null() : item_result(fl, sc));
        failed += sc->is_failed;
    }
    text = results != NULL ? json_dumps(results, JSON_COMPACT) : NULL;
    json_decref(results);
    s = &run->ps.plan.steps[fo->step];
    weft__free(s->result);
    s->result = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    s->ended_ns = weft__now_ns();
    if (fo->items > 0 && failed == fo->items) {
        weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
        weft__free(s->feedback);
        s->feedback = weft__strdup("every item failed");
        weft_span_set_status(fo->span, WEFT_STATUS_ERROR, "every item failed");
    } else {
        weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
        weft_span_set_status(fo->span, WEFT_STATUS_OK, NULL);
    }
    weft__rk_set_int(fo->span, WEFT__RK_FAN_OUT_FAILED, (int64_t)failed);
    weft_span_end(fo->span, 0);
    fo->span = NULL;
    weft__rt_save_step(run, fo->step);
    fl->done[fl->done_count++] = fo->step;
}

static struct fanout *
fanout_of_step(struct flow *fl, size_t step)
{
    for (size_t i = 0; i < fl->fanout_count; i++) {
        if (fl->fanouts[i].step == step) {
            return &fl->fanouts[i];
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Completion                                                                                  */

static void
finish_scope(struct flow *fl, int index, bool is_failed)
{
    struct scope *sc = &fl->scopes[index];
    struct fanout *fo = NULL;

    if (sc->is_done) {
        return;
    }
    sc->is_done = true;
    sc->is_failed = is_failed;
    if (sc->parent < 0) {
        return;
    }
    if (sc->span != NULL) {
        weft_span_set_status(sc->span, is_failed ? WEFT_STATUS_ERROR : WEFT_STATUS_OK,
                             is_failed ? "item failed" : NULL);
        weft_span_end(sc->span, 0);
        sc->span = NULL;
    }
    fo = fanout_of_step(fl, sc->owner);
    if (fo == NULL) {
        return;
    }
    fo->active--;
    fo->finished++;
    if (fo->finished == fo->items) {
        finish_fanout(fl, fo);
    } else {
        activate_items(fl, fo);
    }
}

static void
check_scope(struct flow *fl, int index)
{
    const struct scope *sc = &fl->scopes[index];
    const struct run *run = fl->run;

    for (size_t i = 0; i < sc->def->count; i++) {
        step_status st = run->ps.plan.steps[sc->first_step + i].status;
        if (st != STEP_COMPLETED && st != STEP_FAILED && st != STEP_SKIPPED) {
            return;
        }
    }
    finish_scope(fl, index, false);
}

/* Does node @p from reach node @p to through upstream edges (is it upstream of it)? */
static bool
reaches(const struct wf_flow *def, size_t from, size_t to)
{
    size_t stack[1024];
    size_t top = 0;

    if (from == to) {
        return true;
    }
    stack[top++] = to;
    while (top > 0) {
        size_t c = stack[--top];
        for (size_t u = 0; u < def->nodes[c].upstream_count; u++) {
            size_t up = def->nodes[c].upstream[u];
            if (up == from) {
                return true;
            }
            if (top < sizeof(stack) / sizeof(stack[0])) {
                stack[top++] = up; /* the graph is a DAG (checked at load): this ends */
            }
        }
    }
    return false;
}

/* Re-open the nodes on the paths from back_to to node, with the node's result as feedback. */
static void
reopen(struct flow *fl, const struct scope *sc, size_t back_to, size_t node, const char *feedback)
{
    struct run *run = fl->run;

    for (size_t i = 0; i < sc->def->count; i++) {
        if (reaches(sc->def, back_to, i) && reaches(sc->def, i, node)) {
            struct plan_step *s = &run->ps.plan.steps[sc->first_step + i];
            weft__plan_step_set_status(&run->ps.plan, s, STEP_PENDING);
            weft__free(s->extra_input);
            s->extra_input = weft__strdup(feedback);
            weft__rt_save_step(run, sc->first_step + i);
        }
    }
}

/* A completed node with loop_config: loop back, break, or stop at max_iterations. */
static void
consider_loop(struct flow *fl, size_t step)
{
    struct run *run = fl->run;
    struct plan_step *s = &run->ps.plan.steps[step];
    struct scope *sc = &fl->scopes[s->item];
    const struct wf_flow_node *n = &sc->def->nodes[s->flow_node];
    json_t *result = parse_result(s->result);
    bool is_wanted = is_truthy(lookup(result, n->loop.condition_field));
    bool is_break = false;
    unsigned *count = &sc->loops[s->flow_node];
    struct weft_span *span = NULL;
    char subject[200];

    if (is_wanted && n->loop.brk != NULL) {
        (void)weft__expr_eval(n->loop.brk, result, &is_break);
    }
    if (!is_wanted) {
        json_decref(result);
        return;
    }
    snprintf(subject, sizeof(subject), "%s", s->id);
    span = weft__rt_span_start_under(run, RT_SPAN_LOOP, subject, &s->parent_ctx, NULL, 0);
    weft__rk_set_int(span, WEFT__RK_LOOP_ITERATION, *count + 1);
    weft__rk_set_int(span, WEFT__RK_LOOP_MAX_ITERATIONS, n->loop.max_iterations);
    weft__rk_set_str(span, WEFT__RK_LOOP_LOOP_BACK_TO, sc->def->nodes[n->loop.back_to].id);
    weft__rk_set_str(span, WEFT__RK_LOOP_CONDITION, n->loop.condition_field);
    if (n->loop.brk != NULL) {
        weft__rk_set_str(span, WEFT__RK_LOOP_BREAK_CONDITION, weft__expr_text(n->loop.brk));
    }
    if (is_break) {
        weft__rk_set_str(span, WEFT__RK_LOOP_OUTCOME, "break");
    } else if (*count >= n->loop.max_iterations) {
        weft__rk_set_str(span, WEFT__RK_LOOP_OUTCOME, "max_iterations");
        weft__rk_set_bool(span, WEFT__RK_LOOP_EXHAUSTED, true);
        if (n->loop.is_fail_on_max) {
            weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
            weft__free(s->feedback);
            s->feedback = weft__strdup("loop reached max_iterations");
            weft_span_set_status(span, WEFT_STATUS_ERROR, "loop reached max_iterations");
        }
    } else {
        weft__rt_watchdog_flow(run, span, n->id, sc->def->nodes[n->loop.back_to].id, s->agent,
                               sc->def->nodes[n->loop.back_to].agent, s->result);
        s = &run->ps.plan.steps[step];
        if (weft__rt_watchdog_should_stop(run)) {
            /* A stuck loop under break or fail: no more rounds; the run ends as stuck. */
            weft__rk_set_str(span, WEFT__RK_LOOP_OUTCOME, "stuck");
        } else {
            char *text = item_text(result);
            (*count)++;
            weft__rt_count_loop(run, WEFT_LOOP_FLOW);
            weft__rk_set_str(span, WEFT__RK_LOOP_OUTCOME, "loop_back");
            reopen(fl, sc, n->loop.back_to, (size_t)s->flow_node, text != NULL ? text : "");
            weft__free(text);
        }
    }
    weft_span_end(span, 0);
    json_decref(result);
}

static void
on_done(struct flow *fl, size_t step)
{
    struct run *run = fl->run;
    struct plan_step *s = &run->ps.plan.steps[step];
    int scope = s->item;
    const struct wf_flow_node *n = node_of(fl, step);

    weft__rt_watchdog_fact(run, s->status == STEP_COMPLETED ? s->result : s->feedback);
    if (s->status == STEP_COMPLETED && n->has_loop) {
        consider_loop(fl, step);
        s = &run->ps.plan.steps[step];
    }
    if (s->status == STEP_FAILED && n->is_required) {
        if (fl->scopes[scope].parent < 0) {
            if (!fl->is_failed) {
                fl->is_failed = true;
                snprintf(fl->reason, sizeof(fl->reason), "node %.100s failed: %.300s", s->id,
                         s->feedback != NULL ? s->feedback : "error");
            }
            return;
        }
        finish_scope(fl, scope, true);
        return;
    }
    check_scope(fl, scope);
}

/* Queue every ready step of every active scope; start ready fan-outs. */
static void
schedule(struct flow *fl)
{
    struct run *run = fl->run;

    for (size_t c = 0; c < fl->scope_count && !fl->is_failed; c++) {
        struct scope *sc = &fl->scopes[c];
        if (!sc->is_active || sc->is_done) {
            continue;
        }
        for (size_t i = 0; i < sc->def->count; i++) {
            size_t step = sc->first_step + i;
            if (run->ps.plan.steps[step].status != STEP_PENDING || !is_ready(fl, step)) {
                continue;
            }
            if (run->tel.result->iterations >= run->cfg.wf->supervisor.max_iterations) {
                return; /* the budget check in run_flow() ends the run */
            }
            run->tel.result->iterations++;
            if (sc->def->nodes[i].sub != NULL) {
                start_fanout(fl, step);
                sc = &fl->scopes[c]; /* start_fanout() may move the scopes */
                continue;
            }
            for (size_t k = 0; k < sc->def->nodes[i].upstream_count; k++) {
                const struct wf_flow_node *up = &sc->def->nodes[sc->def->nodes[i].upstream[k]];
                if (up->agent != WF_NONE && sc->def->nodes[i].agent != WF_NONE) {
                    weft__rt_metrics_handoff(run->tel.metrics, run->cfg.wf->agents[up->agent].name,
                                             run->cfg.wf->agents[sc->def->nodes[i].agent].name);
                }
            }
            weft__plan_set_status(&run->ps.plan, step, STEP_IN_PROGRESS);
            fl->queue[fl->queued++] = step;
            fl->running++;
            pthread_cond_signal(&fl->work);
        }
    }
}

static bool
has_work(const struct flow *fl)
{
    const struct run *run = fl->run;

    for (size_t c = 0; c < fl->scope_count; c++) {
        const struct scope *sc = &fl->scopes[c];
        if (!sc->is_active || sc->is_done) {
            continue;
        }
        for (size_t i = 0; i < sc->def->count; i++) {
            if (run->ps.plan.steps[sc->first_step + i].status == STEP_PENDING &&
                is_ready(fl, sc->first_step + i)) {
                return true;
            }
        }
    }
    return false;
}

/* Start up to @p nthreads workers (fewer if the system refuses more). @return how many started;
 * @p threads and @p args hold theirs and must outlive them. */
static unsigned
start_workers(struct flow *fl, pthread_t *threads, struct worker_arg *args, unsigned nthreads)
{
    unsigned started = 0;

    for (; started < nthreads && !fl->is_failed; started++) {
        args[started].fl = fl;
        args[started].index = (int)started;
        if (pthread_create(&threads[started], NULL, worker_main, &args[started]) != 0) {
            break;
        }
    }
    return started;
}

/* The scheduling loop, under the run's lock: queue what is ready, handle the steps that ended,
 * and wait for the workers, until the flow is done, fails or the run's budget is spent
 * (then *status and @p reason say which). */
static void
drive(struct flow *fl, weft_run_status *status, char *reason, size_t reason_len)
{
    struct run *run = fl->run;

    while (!fl->is_failed) {
        weft_run_status spent = WEFT_RUN_COMPLETED;
        if (!reserve_jobs(fl)) {
            fl->is_failed = true;
            snprintf(fl->reason, sizeof(fl->reason), "out of memory");
            break;
        }
        schedule(fl);
        while (fl->done_count > 0) {
            size_t step = fl->done[--fl->done_count];
            on_done(fl, step);
            weft__rt_cursors_save(run);
        }
        if (fl->is_failed) {
            break;
        }
        if (fl->running == 0 && fl->queued == 0 && !has_work(fl)) {
            break;
        }
        if (weft__rt_budget_spent(run, &spent, reason, reason_len)) {
            *status = spent;
            break;
        }
        /* A step that ended may have made others ready (a fan-out activates its next item
         * the moment one finishes): queue them before waiting, or their slot stays idle
         * until another step ends. */
        if (fl->running > 0 && fl->done_count == 0 && !has_work(fl)) {
            run->svc->cond_wait(run->svc->ctx, &fl->changed);
        }
    }
}

/* Drop what no worker has taken, let running steps finish (they check the abort flag and
 * their deadlines), then stop the @p started workers. Called with the run's lock held; returns
 * without it. */
static void
stop_workers(struct flow *fl, pthread_t *threads, unsigned started)
{
    struct run *run = fl->run;

    for (size_t i = 0; i < fl->queued; i++) {
        weft__plan_set_status(&run->ps.plan, fl->queue[i], STEP_PENDING);
    }
    fl->running -= fl->queued;
    fl->queued = 0;
    while (fl->running > 0) {
        run->svc->cond_wait(run->svc->ctx, &fl->changed);
    }
    fl->done_count = 0;
    fl->is_stopping = true;
    pthread_cond_broadcast(&fl->work);
    weft__rt_unlock(run);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
    }
}

/* End the spans of fan-outs or items cut short by a failure (error "flow stopped"), and free the
 * scopes' loop counters. */
static void
end_open_spans(struct flow *fl)
{
    for (size_t i = 0; i < fl->scope_count; i++) {
        if (fl->scopes[i].span != NULL) {
            weft_span_set_status(fl->scopes[i].span, WEFT_STATUS_ERROR, "flow stopped");
            weft_span_end(fl->scopes[i].span, 0);
        }
        weft__free(fl->scopes[i].loops);
    }
    for (size_t i = 0; i < fl->fanout_count; i++) {
        if (fl->fanouts[i].span != NULL) {
            weft_span_set_status(fl->fanouts[i].span, WEFT_STATUS_ERROR, "flow stopped");
            weft_span_end(fl->fanouts[i].span, 0);
        }
    }
}

/* The run's output is the top scope's result: a string as it is, anything else as compact
 * JSON. */
static void
set_flow_output(struct flow *fl)
{
    struct weft_run_result *result = fl->run->tel.result;
    json_t *out = fl->scope_count > 0 ? scope_result(fl, &fl->scopes[0]) : NULL;
    char *text = out != NULL ? json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    weft__free(result->output);
    result->output = NULL;
    if (json_is_string(out)) {
        result->output = weft__strdup(json_string_value(out));
    } else if (text != NULL) {
        result->output = weft__strdup(text);
    }
    free(text);
    json_decref(out);
}

void
weft__rt_run_flow(struct run *run, weft_run_status *status, char *reason, size_t reason_len)
{
    const struct wf_flow *def = run->cfg.wf->flow;
    struct flow fl;
    pthread_t threads[256];
    struct worker_arg args[256];
    unsigned nthreads = def->max_parallel < 256 ? def->max_parallel : 256;
    unsigned started = 0;

    memset(&fl, 0, sizeof(fl));
    fl.run = run;
    pthread_cond_init(&fl.work, NULL);
    pthread_cond_init(&fl.changed, NULL);
    *status = WEFT_RUN_COMPLETED;
    run->svc->set_parallel(run->svc->ctx, true);
    (void)run->svc->make_worker_providers(run->svc->ctx, nthreads);
    weft__rt_lock(run);
    if (add_scope(&fl, def, -1, 0, -1, NULL) < 0) {
        fl.is_failed = true;
        snprintf(fl.reason, sizeof(fl.reason), "out of memory");
    }
    started = start_workers(&fl, threads, args, nthreads);
    if (started == 0 && !fl.is_failed) {
        fl.is_failed = true;
        snprintf(fl.reason, sizeof(fl.reason), "cannot start worker threads");
    }
    drive(&fl, status, reason, reason_len);
    stop_workers(&fl, threads, started);
    run->svc->set_parallel(run->svc->ctx, false);
    end_open_spans(&fl);
    if (fl.is_failed) {
        *status = WEFT_RUN_FAILED;
        snprintf(reason, reason_len, "%s", fl.reason);
    } else if (*status == WEFT_RUN_COMPLETED) {
        set_flow_output(&fl);
        snprintf(reason, reason_len, "flow complete");
    }
    weft__free(fl.scopes);
    weft__free(fl.fanouts);
    weft__free(fl.queue);
    weft__free(fl.done);
    pthread_cond_destroy(&fl.work);
    pthread_cond_destroy(&fl.changed);
}
