/* runtime/dataset/sources.c - a dataset's new items from stored runs (sources.h): the runs a
 * filter selects, each with its input, trace and failing step. Files are file_items.c's. */
#include "runtime/dataset/sources.h"

#include "base/mem.h"
#include "base/uuid.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS_EXAMINED 10000u

struct weft_dataset_item *
weft__ds_items_push(struct weft__ds_items *items, bool *is_full)
{
    *is_full = items->n >= WEFT_DATASET_ITEMS_MAX;
    if (*is_full) {
        return NULL;
    }
    if (items->n == items->cap) {
        size_t cap = items->cap == 0 ? 16 : items->cap * 2;
        struct weft_dataset_item *grown = weft__realloc(items->v, cap * sizeof(*grown));

        if (grown == NULL) {
            return NULL;
        }
        items->v = grown;
        items->cap = cap;
    }
    memset(&items->v[items->n], 0, sizeof(items->v[0]));
    return &items->v[items->n++];
}

void
weft__ds_items_cleanup(struct weft__ds_items *items)
{
    weft_dataset_items_free(items->v, items->n);
    memset(items, 0, sizeof(*items));
}

/* @p text as an item's JSON text: kept when it is a JSON document (object or array), else
 * encoded as a JSON string. Ownership: new (weft__free), NULL out of memory. */
static char *
json_text(const char *text)
{
    json_t *doc = NULL;
    char *dumped = NULL;
    char *out = NULL;

    if (text != NULL) {
        doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        if (doc != NULL && !json_is_object(doc) && !json_is_array(doc)) {
            json_decref(doc);
            doc = NULL;
        }
    }
    if (doc != NULL) {
        json_decref(doc);
        return weft__strdup(text);
    }
    doc = json_string(text != NULL ? text : "");
    dumped = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(doc);
    out = dumped != NULL ? weft__strdup(dumped) : NULL;
    free(dumped);
    return out;
}

/* What the failing step search keeps while walking a run's steps. */
struct fail_walk {
    char *failed;
    char *rejected;
    char *open;
    char *most;
    unsigned most_attempts;
    bool is_oom;
    /* Each step's id and the step that requested it ("" for a plan step), to walk a stuck
     * loop's hand-offs back to the plan step they started from. */
    char **ids;
    char **requested_by;
    size_t n;
    size_t cap;
};

static void
keep_step(struct fail_walk *w, const struct state_step_row *row)
{
    if (w->n == w->cap) {
        size_t cap = w->cap == 0 ? 16 : w->cap * 2;
        char **ids = weft__realloc(w->ids, cap * sizeof(*ids));
        char **by = ids != NULL ? weft__realloc(w->requested_by, cap * sizeof(*by)) : NULL;

        if (ids != NULL) {
            w->ids = ids;
        }
        if (by == NULL) {
            w->is_oom = true;
            return;
        }
        w->requested_by = by;
        w->cap = cap;
    }
    w->ids[w->n] = weft__strdup(row->id != NULL ? row->id : "");
    w->requested_by[w->n] = weft__strdup(row->requested_by != NULL ? row->requested_by : "");
    w->is_oom = w->is_oom || w->ids[w->n] == NULL || w->requested_by[w->n] == NULL;
    w->n++;
}

/* The plan step whose hand-offs led to step @p id: follow requested_by while it names a step
 * (at most n links: a cycle cannot hold the walk). */
static const char *
loop_root(const struct fail_walk *w, const char *id)
{
    for (size_t hops = 0; hops <= w->n; hops++) {
        size_t i = 0;

        while (i < w->n && strcmp(w->ids[i], id) != 0) {
            i++;
        }
        if (i == w->n || w->requested_by[i][0] == '\0') {
            return id;
        }
        id = w->requested_by[i];
    }
    return id;
}

static void
keep_first(char **slot, const char *id, bool *is_oom)
{
    if (*slot == NULL && id != NULL) {
        *slot = weft__strdup(id);
        *is_oom = *is_oom || *slot == NULL;
    }
}

static weft_err
fail_step_row(const struct state_step_row *row, void *user_data)
{
    struct fail_walk *w = user_data;
    const char *status = row->status != NULL ? row->status : "";

    keep_step(w, row);
    if (strcmp(status, "failed") == 0) {
        keep_first(&w->failed, row->id, &w->is_oom);
    }
    /* A reflection's REJECTED starts another attempt with its feedback. */
    if (row->feedback != NULL && row->feedback[0] != '\0' && row->attempts > 1 &&
        strcmp(status, "failed") != 0) {
        keep_first(&w->rejected, row->id, &w->is_oom);
    }
    if (strcmp(status, "completed") != 0 && strcmp(status, "skipped") != 0) {
        keep_first(&w->open, row->id, &w->is_oom);
    }
    if (row->attempts > w->most_attempts) {
        weft__free(w->most);
        w->most = NULL;
        keep_first(&w->most, row->id, &w->is_oom);
        w->most_attempts = row->attempts;
    }
    return w->is_oom ? WEFT_ENOMEM : WEFT_OK;
}

weft_err
weft__ds_fail_step(
    struct rt_state *st, const char *run_id, bool is_stuck, char **out, bool *is_rejected)
{
    struct fail_walk w;
    char **pick = NULL;
    weft_err err = WEFT_OK;

    memset(&w, 0, sizeof(w));
    *out = NULL;
    *is_rejected = false;
    err = weft__state_steps_each(st, run_id, fail_step_row, &w);
    if (err == WEFT_OK) {
        *is_rejected = w.rejected != NULL;
        if (w.failed != NULL) {
            pick = &w.failed;
        } else if (w.rejected != NULL) {
            pick = &w.rejected;
        } else if (is_stuck) {
            pick = w.open != NULL ? &w.open : &w.most;
        }
        if (pick != NULL && *pick != NULL) {
            *out = weft__strdup(is_stuck && pick != &w.failed && pick != &w.rejected
                                    ? loop_root(&w, *pick)
                                    : *pick);
            err = *out == NULL ? WEFT_ENOMEM : WEFT_OK;
        }
    }
    for (size_t i = 0; i < w.n; i++) {
        weft__free(w.ids[i]);
        weft__free(w.requested_by[i]);
    }
    weft__free(w.ids);
    weft__free(w.requested_by);
    weft__free(w.failed);
    weft__free(w.rejected);
    weft__free(w.open);
    weft__free(w.most);
    return err;
}

/* A stored run that the watchdog found stuck: its status, or a "stuck" count in its loops. */
static bool
run_is_stuck(const struct weft_run_info *info)
{
    json_t *loops = NULL;
    bool is_stuck = false;

    if (info->status != NULL && strcmp(info->status, "stuck") == 0) {
        return true;
    }
    if (info->loops == NULL) {
        return false;
    }
    loops = json_loads(info->loops, 0, NULL);
    is_stuck = json_integer_value(json_object_get(loops, "stuck")) > 0;
    json_decref(loops);
    return is_stuck;
}

static bool
status_matches(const char *want, const char *status)
{
    if (want == NULL) {
        return true;
    }
    if (strcmp(want, "succeeded") == 0) {
        want = "completed";
    }
    return status != NULL && strcmp(want, status) == 0;
}

/* Does run @p info pass the filter's conditions on its row (not the verdict, which needs its
 * steps)? */
static bool
run_matches(const struct weft_dataset_source *src, const struct weft_run_info *info)
{
    if (src->workflow != NULL &&
        (info->workflow == NULL || strcmp(src->workflow, info->workflow) != 0)) {
        return false;
    }
    if (!status_matches(src->status, info->status)) {
        return false;
    }
    if (src->has_reward_below && !(info->reward < src->reward_below)) {
        return false;
    }
    if ((src->from_ns != 0 && info->started_ns < src->from_ns) ||
        (src->to_ns != 0 && info->started_ns >= src->to_ns)) {
        return false;
    }
    return !src->stuck || run_is_stuck(info);
}

/* A run taken: the ids of the runs a filter selected, examined after the scan. */
struct run_ids {
    char (*ids)[WEFT_UUID_LEN + 1];
    size_t n;
    size_t cap;
    const struct weft_dataset_source *src;
};

static weft_err
add_id(struct run_ids *r, const char *id)
{
    /* A run named twice is taken once; a scan sees each run once (no quadratic check). */
    for (size_t i = 0; r->src->run_id_count > 0 && i < r->n; i++) {
        if (strcmp(r->ids[i], id) == 0) {
            return WEFT_OK;
        }
    }
    if (r->n == r->cap) {
        size_t cap = r->cap == 0 ? 64 : r->cap * 2;
        void *grown = weft__realloc(r->ids, cap * sizeof(r->ids[0]));

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        r->ids = grown;
        r->cap = cap;
    }
    snprintf(r->ids[r->n++], sizeof(r->ids[0]), "%s", id);
    return WEFT_OK;
}

static weft_err
scan_run(struct weft_run_info *info, void *user_data)
{
    struct run_ids *r = user_data;

    if (info->run_id == NULL || !run_matches(r->src, info)) {
        return WEFT_OK;
    }
    return add_id(r, info->run_id);
}

/* The runs @p src names: every id resolved (a unique prefix too). */
static weft_err
named_runs(struct rt_state *st,
           const struct weft_dataset_source *src,
           struct run_ids *r,
           char *err,
           size_t err_len)
{
    for (size_t i = 0; i < src->run_id_count; i++) {
        char id[WEFT_UUID_LEN + 1];
        char why[256] = "";
        weft_err rc =
            src->run_ids[i] != NULL
                ? weft__state_run_resolve(st, src->run_ids[i], id, sizeof(id), why, sizeof(why))
                : WEFT_EINVAL;

        if (rc != WEFT_OK) {
            snprintf(err, err_len, "run %s: %s", src->run_ids[i] != NULL ? src->run_ids[i] : "?",
                     rc == WEFT_ENOTFOUND ? "no such run"
                     : why[0] != '\0'     ? why
                                          : "expected a run id or a unique prefix of one");
            return rc == WEFT_EIO || rc == WEFT_ENOMEM ? rc : WEFT_EINVAL;
        }
        rc = add_id(r, id);
        if (rc != WEFT_OK) {
            return rc;
        }
    }
    return WEFT_OK;
}

/* One item from stored run @p id, unless the filter's verdict or (for named runs with a
 * filter) its conditions leave it out. */
static weft_err
item_of_run(struct rt_state *st,
            const struct weft_dataset_source *src,
            const char *id,
            struct weft__ds_items *items)
{
    struct weft_run_info info;
    struct weft_dataset_item *it = NULL;
    char *step = NULL;
    bool is_rejected = false;
    bool is_full = false;
    weft_err err = weft__state_run_info(st, id, &info);

    if (err != WEFT_OK) {
        return err;
    }
    if (src->run_id_count > 0 && src->from_runs && !run_matches(src, &info)) {
        weft__state_info_cleanup(&info);
        return WEFT_OK;
    }
    err = weft__ds_fail_step(st, id, run_is_stuck(&info), &step, &is_rejected);
    if (err == WEFT_OK && src->verdict != NULL && !is_rejected) {
        weft__free(step);
        weft__state_info_cleanup(&info);
        return WEFT_OK;
    }
    it = err == WEFT_OK ? weft__ds_items_push(items, &is_full) : NULL;
    if (it != NULL) {
        it->input = json_text(info.input);
        it->metadata = weft__strdup("{}");
        it->run_id = weft__strdup(id);
        it->trace_id = info.trace_id != NULL ? weft__strdup(info.trace_id) : NULL;
        it->fail_step = step;
        step = NULL;
        if (it->input == NULL || it->metadata == NULL || it->run_id == NULL ||
            (info.trace_id != NULL && it->trace_id == NULL)) {
            err = WEFT_ENOMEM;
        }
    } else if (err == WEFT_OK) {
        err = is_full ? WEFT_ELIMIT : WEFT_ENOMEM;
    }
    weft__free(step);
    weft__state_info_cleanup(&info);
    return err;
}

weft_err
weft__ds_items_from_runs(struct rt_state *st,
                         const struct weft_dataset_source *src,
                         struct weft__ds_items *items,
                         char *err,
                         size_t err_len)
{
    struct run_ids r = {.src = src};
    weft_err rc = WEFT_OK;

    if (src->verdict != NULL && strcmp(src->verdict, "REJECTED") != 0) {
        snprintf(err, err_len, "verdict: expected REJECTED, not '%s'", src->verdict);
        return WEFT_EINVAL;
    }
    if (src->run_id_count > 0) {
        rc = named_runs(st, src, &r, err, err_len);
    } else if (src->from_runs) {
        rc = weft__state_runs_each(st, src->limit != 0 ? src->limit : RUNS_EXAMINED, scan_run, &r);
    }
    /* Oldest first: items keep the order the runs were made in. */
    for (size_t i = r.n; rc == WEFT_OK && i > 0; i--) {
        rc = item_of_run(st, src, r.ids[src->run_id_count > 0 ? r.n - i : i - 1], items);
    }
    if (rc == WEFT_ELIMIT) {
        snprintf(err, err_len, "more than %u items at once", WEFT_DATASET_ITEMS_MAX);
    } else if (rc != WEFT_OK && err_len > 0 && err[0] == '\0') {
        snprintf(err, err_len, "reading the stored runs: %s", weft_strerror(rc));
    }
    weft__free(r.ids);
    return rc;
}
