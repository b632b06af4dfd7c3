/* runtime/observe/runs.c - stored runs read back through the public API (`weft runs`, `weft run
 * show`): a run's record, its plan steps with rewards and lineage, and its DAG-surgery history.
 *
 * A missing database is "no runs" for the caller to explain (WEFT_ENOTFOUND), never a new empty
 * file: reading must not create state. A PostgreSQL state (a URL) is always opened: the
 * server says whether it is there, and its schema is migrated like a writer's.
 */
#include "runtime/observe/metrics.h"
#include "runtime/observe/metrics_store.h"
#include "runtime/state/state.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

weft_err
weft_runs_list(const char *state_path, size_t limit, struct weft_run_info **out, size_t *count)
{
    struct rt_state *st = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *count = 0;
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_runs_list(st, limit == 0 ? 20 : limit, out, count);
    }
    weft__state_close(st);
    return err;
}

weft_err
weft_runs_recover(const char *state_path, weft_interrupted_fn fn, void *user_data, size_t *count)
{
    struct rt_state *st = NULL;
    char why[512];
    weft_err err = WEFT_OK;

    if (count != NULL) {
        *count = 0;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_recover(st, fn, user_data, count);
        if (weft__state_check(st, why, sizeof(why)) != WEFT_OK) {
            WEFT_LOG(WEFT_LOG_ERROR, "%s", why);
            err = WEFT_EIO;
        }
    }
    weft__state_close(st);
    return err;
}

void
weft_run_infos_free(struct weft_run_info *infos, size_t count)
{
    for (size_t i = 0; infos != NULL && i < count; i++) {
        weft__state_info_cleanup(&infos[i]);
    }
    weft__free(infos);
}

static char *
deps_list(const char *json_text)
{
    json_t *deps = json_loads(json_text != NULL ? json_text : "[]", 0, NULL);
    struct weft__buf b;

    weft__buf_init(&b, 0);
    weft__buf_append_str(&b, "");
    for (size_t i = 0; i < json_array_size(deps); i++) {
        weft__buf_printf(&b, "%s%s", i > 0 ? "," : "", json_string_value(json_array_get(deps, i)));
    }
    json_decref(deps);
    return b.data;
}

static char *
dup_or_null(const char *s, bool *is_oom)
{
    char *copy = NULL;

    if (s == NULL) {
        return NULL;
    }
    copy = weft__strdup(s);
    *is_oom = *is_oom || copy == NULL;
    return copy;
}

static weft_err
add_step(const struct state_step_row *row, void *user_data)
{
    struct weft_run_details *d = user_data;
    struct weft_run_step *grown = weft__realloc(d->steps, (d->step_count + 1) * sizeof(*grown));
    struct weft_run_step_extra *grown_extras = NULL;
    struct weft_run_step_extra *x = NULL;
    struct weft_run_step *s = NULL;
    bool is_oom = false;

    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    d->steps = grown;
    grown_extras = weft__realloc(d->step_extras, (d->step_count + 1) * sizeof(*grown_extras));
    if (grown_extras == NULL) {
        return WEFT_ENOMEM;
    }
    d->step_extras = grown_extras;
    x = &d->step_extras[d->step_count];
    memset(x, 0, sizeof(*x));
    x->feedback = dup_or_null(row->feedback, &is_oom);
    x->error_type = dup_or_null(row->error_type, &is_oom);
    x->error = dup_or_null(row->error, &is_oom);
    x->started_ns = row->started_ns;
    x->ended_ns = row->ended_ns;
    s = &d->steps[d->step_count++];
    memset(s, 0, sizeof(*s));
    s->id = dup_or_null(row->id, &is_oom);
    s->agent = dup_or_null(row->actor, &is_oom);
    s->task = dup_or_null(row->task, &is_oom);
    s->status = dup_or_null(row->status, &is_oom);
    s->attempts = row->attempts;
    s->result = dup_or_null(row->result, &is_oom);
    s->requested_by = dup_or_null(row->requested_by, &is_oom);
    s->parent = dup_or_null(row->parent, &is_oom);
    s->executor = dup_or_null(row->executor != NULL ? row->executor : "agent", &is_oom);
    s->depends_on = deps_list(row->depends_on);
    s->reward = row->reward;
    s->has_reward = row->has_reward;
    return is_oom || s->depends_on == NULL ? WEFT_ENOMEM : WEFT_OK;
}

static weft_err
add_correction(const struct weft_run_correction *c, void *user_data)
{
    struct weft_run_details *d = user_data;
    struct weft_run_correction *grown =
        weft__realloc(d->corrections, (d->correction_count + 1) * sizeof(*grown));
    struct weft_run_correction *o = NULL;
    bool is_oom = false;

    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    d->corrections = grown;
    o = &d->corrections[d->correction_count++];
    memset(o, 0, sizeof(*o));
    o->seq = c->seq;
    o->created_ns = c->created_ns;
    o->failed_step = dup_or_null(c->failed_step, &is_oom);
    o->error_type = dup_or_null(c->error_type, &is_oom);
    o->inserted = dup_or_null(c->inserted, &is_oom);
    o->depends_before = dup_or_null(c->depends_before, &is_oom);
    o->depends_after = dup_or_null(c->depends_after, &is_oom);
    return is_oom ? WEFT_ENOMEM : WEFT_OK;
}

static bool
is_run_over(const char *status)
{
    return status != NULL && strcmp(status, "running") != 0 && strcmp(status, "interrupted") != 0;
}

static size_t
step_index(const struct weft_run_details *d, const char *id, size_t len)
{
    for (size_t i = 0; i < d->step_count; i++) {
        if (d->steps[i].id != NULL && strlen(d->steps[i].id) == len &&
            strncmp(d->steps[i].id, id, len) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* A step that never ran in a run that is over was skipped when a dependency failed, or was
 * itself skipped. The engine stores such steps as pending, so the reason is derived here, in
 * plan order: a dependency comes before the steps that depend on it. */
static weft_err
mark_skipped(struct weft_run_details *d)
{
    bool *is_skipped = NULL;

    if (!is_run_over(d->info.status) || d->step_count == 0) {
        return WEFT_OK;
    }
    is_skipped = weft__calloc(d->step_count, sizeof(*is_skipped));
    if (is_skipped == NULL) {
        return WEFT_ENOMEM;
    }
    /* Two passes: a dependency may be listed after its dependant after DAG surgery. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < d->step_count; i++) {
            const char *st = d->steps[i].status;
            const char *p = d->steps[i].depends_on;

            if (is_skipped[i] || st == NULL ||
                (strcmp(st, "pending") != 0 && strcmp(st, "skipped") != 0)) {
                continue;
            }
            while (p != NULL && *p != '\0') {
                size_t len = strcspn(p, ",");
                size_t k = step_index(d, p, len);

                if (k != SIZE_MAX && (strcmp(d->steps[k].status, "failed") == 0 || is_skipped[k])) {
                    d->step_extras[i].skipped_dependency = weft__strndup(p, len);
                    d->step_extras[i].skipped_dependency_status =
                        is_skipped[k] ? "skipped" : "failed";
                    if (d->step_extras[i].skipped_dependency == NULL) {
                        weft__free(is_skipped);
                        return WEFT_ENOMEM;
                    }
                    is_skipped[i] = true;
                    break;
                }
                p += len;
                p += *p == ',';
            }
        }
    }
    weft__free(is_skipped);
    return WEFT_OK;
}

weft_err
weft_run_load(const char *state_path, const char *ref, struct weft_run_details **out)
{
    struct rt_state *st = NULL;
    struct weft_run_details *d = NULL;
    char id[96];
    char why[160];
    weft_err err = WEFT_OK;

    if (ref == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    err = weft__state_open_existing(state_path, &st);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_run_resolve(st, ref, id, sizeof(id), why, sizeof(why));
    if (err == WEFT_EINVAL) {
        WEFT_LOG(WEFT_LOG_WARN, "%s", why);
    }
    if (err == WEFT_OK) {
        d = weft__calloc(1, sizeof(*d));
        err = d == NULL ? WEFT_ENOMEM : weft__state_run_info(st, id, &d->info);
    }
    if (err == WEFT_OK) {
        err = weft__state_steps_each(st, id, add_step, d);
    }
    if (err == WEFT_OK) {
        err = weft__state_corrections_each(st, id, add_correction, d);
    }
    if (err == WEFT_OK) {
        err = mark_skipped(d);
    }
    weft__state_close(st);
    if (err != WEFT_OK) {
        weft_run_details_free(d);
        return err;
    }
    *out = d;
    return WEFT_OK;
}

void
weft_run_details_free(struct weft_run_details *d)
{
    if (d == NULL) {
        return;
    }
    weft__state_info_cleanup(&d->info);
    for (size_t i = 0; i < d->step_count; i++) {
        struct weft_run_step *s = &d->steps[i];
        weft__free(s->id);
        weft__free(s->agent);
        weft__free(s->task);
        weft__free(s->status);
        weft__free(s->result);
        weft__free(s->requested_by);
        weft__free(s->parent);
        weft__free(s->executor);
        weft__free(s->depends_on);
        if (d->step_extras != NULL) {
            weft__free(d->step_extras[i].feedback);
            weft__free(d->step_extras[i].error_type);
            weft__free(d->step_extras[i].error);
            weft__free(d->step_extras[i].skipped_dependency);
        }
    }
    weft__free(d->steps);
    weft__free(d->step_extras);
    for (size_t i = 0; i < d->correction_count; i++) {
        weft__free(d->corrections[i].failed_step);
        weft__free(d->corrections[i].error_type);
        weft__free(d->corrections[i].inserted);
        weft__free(d->corrections[i].depends_before);
        weft__free(d->corrections[i].depends_after);
    }
    weft__free(d->corrections);
    weft__free(d);
}

/* ------------------------------------------------------------------------------------------ */
/* LLM exchanges (the explorer's "last model answer")                                          */

/* One script entry (weft__llm_exchange_json()) into @p x; false when out of memory. */
static bool
exchange_of(const char *who, const char *purpose, const json_t *entry, struct weft_run_exchange *x)
{
    const json_t *calls = json_object_get(entry, "tool_calls");
    const json_t *error = json_object_get(entry, "error");
    const char *content = json_string_value(json_object_get(entry, "content"));
    bool is_oom = false;

    x->who = dup_or_null(who, &is_oom);
    x->purpose = dup_or_null(purpose, &is_oom);
    x->content = dup_or_null(content, &is_oom);
    if (json_array_size(calls) > 0) {
        char *text = json_dumps(calls, JSON_COMPACT);
        x->tool_calls = dup_or_null(text, &is_oom);
        is_oom |= text == NULL;
        free(text);
    }
    if (json_is_object(error)) {
        struct weft__buf b;
        const char *type = json_string_value(json_object_get(error, "type"));
        const char *message = json_string_value(json_object_get(error, "message"));

        weft__buf_init(&b, 0);
        is_oom |= weft__buf_printf(&b, "%s: %s", type != NULL ? type : "error",
                                   message != NULL ? message : "") != WEFT_OK;
        x->error = dup_or_null(b.data, &is_oom);
        weft__buf_cleanup(&b);
    }
    return !is_oom;
}

/* How many entries the queues of one asker ({purpose: [entry, ...]}) hold. */
static size_t
queue_entries(json_t *queues)
{
    const char *purpose = NULL;
    json_t *list = NULL;
    size_t n = 0;

    json_object_foreach(queues, purpose, list)
    {
        n += json_array_size(list);
    }
    return n;
}

/* The entries of @p who's queues into @p out from *@p i on; false when out of memory. */
static bool
queue_fill(const char *who, json_t *queues, struct weft_run_exchange *out, size_t *i)
{
    const char *purpose = NULL;
    json_t *list = NULL;

    json_object_foreach(queues, purpose, list)
    {
        for (size_t k = 0; k < json_array_size(list); k++) {
            if (!exchange_of(who, purpose, json_array_get(list, k), &out[(*i)++])) {
                return false;
            }
        }
    }
    return true;
}

/* The entries of a stored script ({"responses": {who: {purpose: [entry, ...]}}}) as an
 * array; @return WEFT_OK or WEFT_ENOMEM. */
static weft_err
exchanges_of(const json_t *script, struct weft_run_exchange **out, size_t *count)
{
    json_t *responses = json_object_get(script, "responses");
    const char *who = NULL;
    json_t *queues = NULL;
    size_t n = 0;
    size_t i = 0;

    json_object_foreach(responses, who, queues)
    {
        n += queue_entries(queues);
    }
    *out = weft__calloc(n > 0 ? n : 1, sizeof(**out));
    if (*out == NULL) {
        return WEFT_ENOMEM;
    }
    json_object_foreach(responses, who, queues)
    {
        if (!queue_fill(who, queues, *out, &i)) {
            weft_run_exchanges_free(*out, i);
            *out = NULL;
            return WEFT_ENOMEM;
        }
    }
    *count = i;
    return WEFT_OK;
}

weft_err
weft_run_exchanges_load(const char *state_path,
                        const char *run_id,
                        struct weft_run_exchange **out,
                        size_t *count)
{
    struct rt_state *st = NULL;
    json_t *script = NULL;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (run_id == NULL || out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_exchanges_script(st, run_id, &script);
    weft__state_close(st);
    if (err == WEFT_ENOTFOUND) {
        return WEFT_OK; /* the run stored no exchange */
    }
    if (err == WEFT_OK) {
        err = exchanges_of(script, out, count);
    }
    json_decref(script);
    return err;
}

void
weft_run_exchanges_free(struct weft_run_exchange *exchanges, size_t count)
{
    if (exchanges == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        weft__free(exchanges[i].who);
        weft__free(exchanges[i].purpose);
        weft__free(exchanges[i].content);
        weft__free(exchanges[i].tool_calls);
        weft__free(exchanges[i].error);
    }
    weft__free(exchanges);
}

/* ------------------------------------------------------------------------------------------ */
/* Metrics across stored runs (weft serve): per-run snapshots, see metrics_store.c             */

weft_err
weft_runtime_metrics_from_store(struct weft_meter *meter, const char *state_path)
{
    return weft__rt_mstore_fold(meter, state_path);
}
