/* runtime/dataset/experiment.c - experiments through the public API (include/weft/dataset.h):
 * what the `weft eval` runner records (begin, one row per item, end) and reads back. Each call
 * checks its arguments and bounds, then opens the state store for one transaction. */
#include "runtime/dataset/exp_load.h"
#include "runtime/dataset/sources.h"
#include "runtime/state/datasets.h"

#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static bool
is_text_ok(const char *s, size_t max)
{
    return s != NULL && s[0] != '\0' && strlen(s) <= max;
}

/* Is @p text a JSON document of the wanted kind (is_object / array) within @p max bytes? */
static bool
json_is_kind(const char *text, bool is_object, size_t max)
{
    json_t *doc = NULL;
    bool is_ok = false;

    if (text == NULL || strlen(text) > max) {
        return false;
    }
    doc = json_loads(text, 0, NULL);
    is_ok = doc != NULL && (is_object ? json_is_object(doc) : json_is_array(doc));
    json_decref(doc);
    return is_ok;
}

static weft_err
fail(char *err, size_t err_len, weft_err rc, const char *what)
{
    if (err != NULL && err_len > 0) {
        snprintf(err, err_len, "%s", what);
    }
    return rc;
}

static weft_err
check_begin(const struct weft_experiment *e, char *err, size_t err_len)
{
    if (e == NULL || !is_text_ok(e->name, WEFT_DATASET_NAME_MAX) ||
        !is_text_ok(e->dataset, WEFT_DATASET_NAME_MAX) ||
        !is_text_ok(e->workflow, WEFT_DATASET_NAME_MAX * 8)) {
        return fail(err, err_len, WEFT_EINVAL,
                    "experiment: expected a name and dataset of 1 to 128 bytes and a workflow");
    }
    if (e->id != NULL && !weft__uuid_is_valid(e->id)) {
        return fail(err, err_len, WEFT_EINVAL, "experiment id: expected a UUID");
    }
    if (e->workflow_hash != NULL && strlen(e->workflow_hash) > 256) {
        return fail(err, err_len, WEFT_ELIMIT, "workflow_hash: expected at most 256 bytes");
    }
    return WEFT_OK;
}

weft_err
weft_experiment_begin(const char *state_path,
                      const struct weft_experiment *e,
                      char id_out[37],
                      char *err,
                      size_t err_len)
{
    struct weft_experiment row;
    struct weft_dataset ds = {0};
    struct rt_state *st = NULL;
    char id[WEFT_UUID_LEN + 1];
    weft_err rc = check_begin(e, err, err_len);

    if (rc != WEFT_OK || id_out == NULL) {
        return rc != WEFT_OK ? rc : WEFT_EINVAL;
    }
    row = *e;
    if (e->id == NULL) {
        weft__uuid_v4(id);
    } else {
        snprintf(id, sizeof(id), "%s", e->id);
    }
    row.id = id;
    row.started_ns = e->started_ns != 0 ? e->started_ns : weft__now_ns();
    rc = weft__ds_open_rw(state_path, &st, err, err_len);
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK) {
            rc = weft__ds_get(st, e->dataset, &ds);
        }
        if (rc == WEFT_OK && (e->dataset_version == 0 || e->dataset_version > ds.version)) {
            rc = fail(err, err_len, WEFT_ENOTFOUND, "dataset version: no such version");
        } else if (rc == WEFT_ENOTFOUND) {
            fail(err, err_len, rc, "dataset: no such dataset");
        }
        if (rc == WEFT_OK) {
            rc = weft__exp_begin(st, &row);
            if (rc == WEFT_EIO) {
                fail(err, err_len, rc, "experiment: cannot store it (an id in use?)");
            }
        }
        rc = weft__ds_end(st, rc);
    }
    weft_dataset_cleanup(&ds);
    weft__state_close(st);
    if (rc == WEFT_OK) {
        memcpy(id_out, id, sizeof(id));
    }
    return rc;
}

static bool
status_is_valid(const char *status)
{
    static const char *const names[] = {"passed", "failed", "errored", "running"};

    for (size_t i = 0; status != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(status, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

static weft_err
check_item(const struct weft_experiment_item *it, char *err, size_t err_len)
{
    if (it == NULL || !is_text_ok(it->item_id, 64)) {
        return fail(err, err_len, WEFT_EINVAL, "item_id: expected an item id");
    }
    if (!status_is_valid(it->status)) {
        return fail(err, err_len, WEFT_EINVAL,
                    "status: expected passed, failed, errored or running");
    }
    if (it->scores != NULL && !json_is_kind(it->scores, false, WEFT_EXPERIMENT_TEXT_MAX)) {
        return fail(err, err_len,
                    it->scores != NULL && strlen(it->scores) > WEFT_EXPERIMENT_TEXT_MAX
                        ? WEFT_ELIMIT
                        : WEFT_EINVAL,
                    "scores: expected a JSON array of at most 64 KiB");
    }
    if (it->error != NULL && strlen(it->error) > WEFT_EXPERIMENT_TEXT_MAX) {
        return fail(err, err_len, WEFT_ELIMIT, "error: expected at most 64 KiB");
    }
    if (it->run_id != NULL && strlen(it->run_id) > 64) {
        return fail(err, err_len, WEFT_EINVAL, "run_id: expected a run id");
    }
    return WEFT_OK;
}

weft_err
weft_experiment_item_put(const char *state_path,
                         const char *id,
                         const struct weft_experiment_item *it,
                         char *err,
                         size_t err_len)
{
    struct weft_experiment e = {0};
    struct rt_state *st = NULL;
    weft_err rc = check_item(it, err, err_len);

    if (rc == WEFT_OK && (id == NULL || !weft__uuid_is_valid(id))) {
        rc = fail(err, err_len, WEFT_EINVAL, "experiment id: expected a UUID");
    }
    if (rc == WEFT_OK) {
        rc = weft__ds_open_rw(state_path, &st, err, err_len);
    }
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK) {
            rc = weft__exp_get(st, id, &e);
            if (rc == WEFT_ENOTFOUND) {
                fail(err, err_len, rc, "experiment: no such experiment");
            }
        }
        if (rc == WEFT_OK) {
            rc = weft__exp_item_put(st, id, it);
        }
        rc = weft__ds_end(st, rc);
    }
    weft_experiment_cleanup(&e);
    weft__state_close(st);
    return rc;
}

weft_err
weft_experiment_end(const char *state_path,
                    const char *id,
                    const char *status,
                    const char *summary,
                    char *err,
                    size_t err_len)
{
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (id == NULL || !weft__uuid_is_valid(id) || !is_text_ok(status, 32)) {
        return fail(err, err_len, WEFT_EINVAL, "experiment end: expected an id and a status");
    }
    if (summary != NULL && !json_is_kind(summary, true, WEFT_DATASET_EVAL_MAX)) {
        return fail(err, err_len,
                    strlen(summary) > WEFT_DATASET_EVAL_MAX ? WEFT_ELIMIT : WEFT_EINVAL,
                    "summary: expected a JSON object of at most 64 KiB");
    }
    rc = weft__ds_open_rw(state_path, &st, err, err_len);
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK) {
            rc = weft__exp_end(st, id, status, summary, weft__now_ns());
            if (rc == WEFT_ENOTFOUND) {
                fail(err, err_len, rc, "experiment: no such experiment");
            }
        }
        rc = weft__ds_end(st, rc);
    }
    weft__state_close(st);
    return rc;
}

weft_err
weft_experiments_list(const char *state_path,
                      const char *dataset,
                      struct weft_experiment **out,
                      size_t *count)
{
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *count = 0;
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__exp_list(st, dataset, out, count);
    }
    weft__state_close(st);
    return rc;
}

weft_err
weft_experiment_resolve(const char *state_path, const char *ref, char id_out[37])
{
    struct weft_experiment *list = NULL;
    size_t count = 0;
    size_t matches = 0;
    const char *id = NULL;
    bool is_exact = false;
    weft_err rc = WEFT_OK;

    if (ref == NULL || id_out == NULL) {
        return WEFT_EINVAL;
    }
    rc = weft_experiments_list(state_path, NULL, &list, &count);
    for (size_t i = 0; rc == WEFT_OK && i < count && id == NULL; i++) { /* newest first */
        if (strcmp(list[i].id, ref) == 0 ||
            (list[i].name != NULL && strcmp(list[i].name, ref) == 0)) {
            id = list[i].id;
            matches = 1;
        }
    }
    is_exact = id != NULL;
    for (size_t i = 0; rc == WEFT_OK && !is_exact && strlen(ref) >= 4 && i < count; i++) {
        if (strncmp(list[i].id, ref, strlen(ref)) == 0) {
            id = id == NULL ? list[i].id : id;
            matches += 1; /* counted on: two make the prefix ambiguous */
        }
    }
    if (rc == WEFT_OK) {
        rc = matches == 0 ? WEFT_ENOTFOUND : matches > 1 ? WEFT_EINVAL : WEFT_OK;
    }
    if (rc == WEFT_OK) {
        snprintf(id_out, 37, "%s", id);
    }
    weft_experiments_free(list, count);
    return rc;
}

weft_err
weft_experiment_load(const char *state_path,
                     const char *id,
                     struct weft_experiment *e,
                     struct weft_experiment_item **items,
                     size_t *count)
{
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (e == NULL || items == NULL || count == NULL || id == NULL) {
        return WEFT_EINVAL;
    }
    memset(e, 0, sizeof(*e));
    *items = NULL;
    *count = 0;
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__exp_get(st, id, e);
    }
    if (rc == WEFT_OK) {
        rc = weft__exp_items(st, id, items, count);
    }
    if (rc != WEFT_OK) {
        weft_experiment_cleanup(e);
    }
    weft__state_close(st);
    return rc;
}

weft_err
weft__exp_load(const char *state, const char *ref, struct weft__exp *x)
{
    char id[37];
    weft_err err = WEFT_OK;

    memset(x, 0, sizeof(*x));
    err = weft_experiment_resolve(state, ref, id);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft_experiment_load(state, id, &x->e, &x->items, &x->count);
    if (err != WEFT_OK) {
        return err;
    }
    x->summary = x->e.summary != NULL ? json_loads(x->e.summary, 0, NULL) : NULL;
    if (!json_is_object(x->summary)) {
        json_decref(x->summary);
        x->summary = json_object();
    }
    return x->summary != NULL ? WEFT_OK : WEFT_ENOMEM;
}

void
weft__exp_cleanup(struct weft__exp *x)
{
    weft_experiment_cleanup(&x->e);
    weft_experiment_items_free(x->items, x->count);
    json_decref(x->summary);
    memset(x, 0, sizeof(*x));
}
