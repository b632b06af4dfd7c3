/* runtime/state/datasets.c - datasets and experiments over the state store's backends
 * (datasets.h): each function binds its statement's values in the order enum weft__ds_stmt says
 * and reads the rows into the public structs of include/weft/dataset.h. */
#include "runtime/state/datasets.h"

#include "runtime/state/state_rows.h"

#include "base/mem.h"

#include <string.h>

/* Rows read into a growing array of @c size-byte elements by @c read. */
struct rows_read {
    void *rows;
    size_t n;
    size_t cap;
    size_t size;
    void (*read)(const struct weft__state_row *row, void *elem, bool *is_oom);
};

static weft_err
row_collect(const struct weft__state_row *row, void *ctx)
{
    struct rows_read *r = ctx;
    bool is_oom = false;

    if (r->n == r->cap) {
        size_t cap = r->cap == 0 ? 16 : r->cap * 2;
        void *grown = weft__realloc(r->rows, cap * r->size);

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        r->rows = grown;
        r->cap = cap;
    }
    memset((char *)r->rows + r->n * r->size, 0, r->size);
    r->read(row, (char *)r->rows + r->n * r->size, &is_oom);
    r->n++;
    return is_oom ? WEFT_ENOMEM : WEFT_OK;
}

static uint64_t
row_u64(const struct weft__state_row *row, int col)
{
    int64_t v = weft__row_i64(row, col);

    return v > 0 ? (uint64_t)v : 0;
}

static void
read_dataset(const struct weft__state_row *row, void *elem, bool *is_oom)
{
    struct weft_dataset *d = elem;

    d->name = weft__row_dup(row, 0, is_oom);
    d->description = weft__row_dup(row, 1, is_oom);
    d->evaluators = weft__row_dup(row, 2, is_oom);
    d->created_ns = row_u64(row, 3);
    d->version = row_u64(row, 4);
    d->items = (size_t)row_u64(row, 5);
}

static void
read_item(const struct weft__state_row *row, void *elem, bool *is_oom)
{
    struct weft_dataset_item *it = elem;

    it->id = weft__row_dup(row, 0, is_oom);
    it->input = weft__row_dup(row, 1, is_oom);
    it->expected = weft__row_dup(row, 2, is_oom);
    it->assertions = weft__row_dup(row, 3, is_oom);
    it->metadata = weft__row_dup(row, 4, is_oom);
    it->run_id = weft__row_dup(row, 5, is_oom);
    it->trace_id = weft__row_dup(row, 6, is_oom);
    it->fail_step = weft__row_dup(row, 7, is_oom);
    it->added_version = row_u64(row, 8);
    it->removed_version = row->ops->is_null(row, 9) ? 0 : row_u64(row, 9);
}

static void
read_experiment(const struct weft__state_row *row, void *elem, bool *is_oom)
{
    struct weft_experiment *e = elem;

    e->id = weft__row_dup(row, 0, is_oom);
    e->name = weft__row_dup(row, 1, is_oom);
    e->dataset = weft__row_dup(row, 2, is_oom);
    e->dataset_version = row_u64(row, 3);
    e->workflow = weft__row_dup(row, 4, is_oom);
    e->workflow_hash = weft__row_dup(row, 5, is_oom);
    e->from_failure = weft__row_flag(row, 6);
    e->started_ns = row_u64(row, 7);
    e->ended_ns = row->ops->is_null(row, 8) ? 0 : row_u64(row, 8);
    e->status = weft__row_dup(row, 9, is_oom);
    e->summary = weft__row_dup(row, 10, is_oom);
}

static void
read_exp_item(const struct weft__state_row *row, void *elem, bool *is_oom)
{
    struct weft_experiment_item *it = elem;

    it->item_id = weft__row_dup(row, 0, is_oom);
    it->run_id = weft__row_dup(row, 1, is_oom);
    it->status = weft__row_dup(row, 2, is_oom);
    it->scores = weft__row_dup(row, 3, is_oom);
    it->tokens = row_u64(row, 4);
    it->cost_usd = weft__row_f64(row, 5);
    it->duration_ns = row_u64(row, 6);
    it->loops = row_u64(row, 7);
    it->stuck_loops = row_u64(row, 8);
    it->corrections = row_u64(row, 9);
    it->llm_calls = row_u64(row, 10);
    it->error = weft__row_dup(row, 11, is_oom);
}

/* Run @p which and hand the rows over as *out / *count (freed with @p release on failure). */
static weft_err
collect(struct rt_state *st,
        enum weft__ds_stmt which,
        const struct weft__state_arg *args,
        size_t n,
        struct rows_read *r,
        void (*release)(void *rows, size_t count),
        void **out,
        size_t *count)
{
    weft_err err = st->ops->ds_run(st, which, args, n, row_collect, r);

    *out = NULL;
    *count = 0;
    if (err != WEFT_OK) {
        release(r->rows, r->n);
        return err;
    }
    *out = r->rows;
    *count = r->n;
    return WEFT_OK;
}

static void
release_datasets(void *rows, size_t n)
{
    weft_datasets_free(rows, n);
}

static void
release_items(void *rows, size_t n)
{
    weft_dataset_items_free(rows, n);
}

static void
release_experiments(void *rows, size_t n)
{
    weft_experiments_free(rows, n);
}

static void
release_exp_items(void *rows, size_t n)
{
    weft_experiment_items_free(rows, n);
}

/* A row seen: *(bool *)ctx. */
static weft_err
row_seen(const struct weft__state_row *row, void *ctx)
{
    (void)row;
    *(bool *)ctx = true;
    return WEFT_OK;
}

weft_err
weft__ds_begin(struct rt_state *st)
{
    return st->ops->begin(st);
}

weft_err
weft__ds_end(struct rt_state *st, weft_err err)
{
    weft_err ended = WEFT_OK;

    if (!st->ops->in_transaction(st)) {
        return err; /* begin failed: nothing to end */
    }
    /* The backend's end commits a refusal that wrote nothing; here every failure rolls back. */
    ended = st->ops->end(st, err == WEFT_OK ? WEFT_OK : WEFT_EIO);
    return err != WEFT_OK ? err : ended;
}

weft_err
weft__ds_create(struct rt_state *st,
                const char *name,
                const char *description,
                const char *evaluators,
                uint64_t created_ns)
{
    bool is_new = false;
    weft_err err = st->ops->ds_run(
        st, WEFT__DS_CREATE,
        SQL_ARGS(SQL_KEY(name), SQL_TEXT(description), SQL_RAW(evaluators), SQL_U64(created_ns)),
        row_seen, &is_new);

    return err == WEFT_OK && !is_new ? WEFT_ESTATE : err;
}

weft_err
weft__ds_get(struct rt_state *st, const char *name, struct weft_dataset *out)
{
    struct rows_read r = {.size = sizeof(struct weft_dataset), .read = read_dataset};
    struct weft_dataset *rows = NULL;
    size_t n = 0;
    weft_err err = collect(st, WEFT__DS_GET, SQL_ARGS(SQL_KEY(name)), &r, release_datasets,
                           (void **)&rows, &n);

    memset(out, 0, sizeof(*out));
    if (err == WEFT_OK && n == 0) {
        err = WEFT_ENOTFOUND;
    }
    if (err == WEFT_OK) {
        *out = rows[0];
        memset(&rows[0], 0, sizeof(rows[0]));
    }
    weft_datasets_free(rows, n);
    return err;
}

weft_err
weft__ds_list(struct rt_state *st, struct weft_dataset **out, size_t *count)
{
    struct rows_read r = {.size = sizeof(struct weft_dataset), .read = read_dataset};
    const struct weft__state_arg none[1] = {SQL_NULL};

    return collect(st, WEFT__DS_LIST, none, 0, &r, release_datasets, (void **)out, count);
}

weft_err
weft__ds_set_version(struct rt_state *st, const char *name, uint64_t version)
{
    return st->ops->ds_run(st, WEFT__DS_VERSION, SQL_ARGS(SQL_KEY(name), SQL_U64(version)), NULL,
                           NULL);
}

weft_err
weft__ds_item_add(struct rt_state *st, const char *name, const struct weft_dataset_item *it)
{
    return st->ops->ds_run(st, WEFT__DS_ITEM_ADD,
                           SQL_ARGS(SQL_KEY(it->id), SQL_KEY(name), SQL_RAW(it->input),
                                    SQL_RAW(it->expected), SQL_RAW(it->assertions),
                                    SQL_RAW(it->metadata != NULL ? it->metadata : "{}"),
                                    SQL_KEY(it->run_id), SQL_KEY(it->trace_id),
                                    SQL_KEY(it->fail_step), SQL_U64(it->added_version)),
                           NULL, NULL);
}

weft_err
weft__ds_item_remove(
    struct rt_state *st, const char *name, const char *id, uint64_t version, bool *is_found)
{
    *is_found = false;
    return st->ops->ds_run(st, WEFT__DS_ITEM_REMOVE,
                           SQL_ARGS(SQL_KEY(name), SQL_KEY(id), SQL_U64(version)), row_seen,
                           is_found);
}

weft_err
weft__ds_items(struct rt_state *st,
               const char *name,
               uint64_t version,
               size_t offset,
               size_t max,
               struct weft_dataset_item **out,
               size_t *count)
{
    struct rows_read r = {.size = sizeof(struct weft_dataset_item), .read = read_item};
    /* Both dialects take a LIMIT of any size; INT64_MAX reads as "all". */
    uint64_t limit = max > (size_t)INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)max;

    return collect(st, WEFT__DS_ITEMS,
                   SQL_ARGS(SQL_KEY(name), SQL_U64(version), SQL_U64(limit), SQL_U64(offset)), &r,
                   release_items, (void **)out, count);
}

/* The first column of the one row as a count: *(size_t *)ctx. */
static weft_err
row_count(const struct weft__state_row *row, void *ctx)
{
    *(size_t *)ctx = (size_t)row_u64(row, 0);
    return WEFT_OK;
}

weft_err
weft__ds_items_count(struct rt_state *st, const char *name, uint64_t version, size_t *count)
{
    *count = 0;
    return st->ops->ds_run(st, WEFT__DS_ITEMS_COUNT, SQL_ARGS(SQL_KEY(name), SQL_U64(version)),
                           row_count, count);
}

weft_err
weft__ds_drop(struct rt_state *st, const char *name)
{
    bool is_found = false;
    weft_err err = st->ops->ds_run(st, WEFT__DS_DROP_ITEMS, SQL_ARGS(SQL_KEY(name)), NULL, NULL);

    if (err == WEFT_OK) {
        err = st->ops->ds_run(st, WEFT__DS_DROP, SQL_ARGS(SQL_KEY(name)), row_seen, &is_found);
    }
    return err == WEFT_OK && !is_found ? WEFT_ENOTFOUND : err;
}

weft_err
weft__exp_begin(struct rt_state *st, const struct weft_experiment *e)
{
    return st->ops->ds_run(st, WEFT__EXP_BEGIN,
                           SQL_ARGS(SQL_KEY(e->id), SQL_KEY(e->name), SQL_KEY(e->dataset),
                                    SQL_U64(e->dataset_version), SQL_KEY(e->workflow),
                                    SQL_KEY(e->workflow_hash), SQL_BOOL(e->from_failure),
                                    SQL_U64(e->started_ns), SQL_RAW("running")),
                           NULL, NULL);
}

weft_err
weft__exp_item_put(struct rt_state *st, const char *id, const struct weft_experiment_item *it)
{
    return st->ops->ds_run(
        st, WEFT__EXP_ITEM_PUT,
        SQL_ARGS(SQL_KEY(id), SQL_KEY(it->item_id), SQL_KEY(it->run_id), SQL_RAW(it->status),
                 SQL_RAW(it->scores != NULL ? it->scores : "[]"), SQL_U64(it->tokens),
                 SQL_F64(it->cost_usd), SQL_U64(it->duration_ns), SQL_U64(it->loops),
                 SQL_U64(it->stuck_loops), SQL_U64(it->corrections), SQL_U64(it->llm_calls),
                 SQL_TEXT(it->error)),
        NULL, NULL);
}

weft_err
weft__exp_end(
    struct rt_state *st, const char *id, const char *status, const char *summary, uint64_t now)
{
    bool is_found = false;
    weft_err err = st->ops->ds_run(
        st, WEFT__EXP_END, SQL_ARGS(SQL_KEY(id), SQL_RAW(status), SQL_RAW(summary), SQL_U64(now)),
        row_seen, &is_found);

    return err == WEFT_OK && !is_found ? WEFT_ENOTFOUND : err;
}

weft_err
weft__exp_list(struct rt_state *st,
               const char *dataset,
               struct weft_experiment **out,
               size_t *count)
{
    struct rows_read r = {.size = sizeof(struct weft_experiment), .read = read_experiment};

    return collect(st, WEFT__EXP_LIST, SQL_ARGS(SQL_KEY(dataset)), &r, release_experiments,
                   (void **)out, count);
}

weft_err
weft__exp_get(struct rt_state *st, const char *id, struct weft_experiment *out)
{
    struct rows_read r = {.size = sizeof(struct weft_experiment), .read = read_experiment};
    struct weft_experiment *rows = NULL;
    size_t n = 0;
    weft_err err = collect(st, WEFT__EXP_GET, SQL_ARGS(SQL_KEY(id)), &r, release_experiments,
                           (void **)&rows, &n);

    memset(out, 0, sizeof(*out));
    if (err == WEFT_OK && n == 0) {
        err = WEFT_ENOTFOUND;
    }
    if (err == WEFT_OK) {
        *out = rows[0];
        memset(&rows[0], 0, sizeof(rows[0]));
    }
    weft_experiments_free(rows, n);
    return err;
}

weft_err
weft__exp_items(struct rt_state *st,
                const char *id,
                struct weft_experiment_item **out,
                size_t *count)
{
    struct rows_read r = {.size = sizeof(struct weft_experiment_item), .read = read_exp_item};

    return collect(st, WEFT__EXP_ITEMS, SQL_ARGS(SQL_KEY(id)), &r, release_exp_items, (void **)out,
                   count);
}

/* The public structs' release (include/weft/dataset.h): here, beside the readers that fill
 * them. */

void
weft_dataset_cleanup(struct weft_dataset *ds)
{
    if (ds == NULL) {
        return;
    }
    weft__free(ds->name);
    weft__free(ds->description);
    weft__free(ds->evaluators);
    memset(ds, 0, sizeof(*ds));
}

void
weft_datasets_free(struct weft_dataset *ds, size_t count)
{
    for (size_t i = 0; ds != NULL && i < count; i++) {
        weft_dataset_cleanup(&ds[i]);
    }
    weft__free(ds);
}

void
weft_dataset_items_free(struct weft_dataset_item *items, size_t count)
{
    for (size_t i = 0; items != NULL && i < count; i++) {
        weft__free(items[i].id);
        weft__free(items[i].input);
        weft__free(items[i].expected);
        weft__free(items[i].assertions);
        weft__free(items[i].metadata);
        weft__free(items[i].run_id);
        weft__free(items[i].trace_id);
        weft__free(items[i].fail_step);
    }
    weft__free(items);
}

void
weft_experiment_cleanup(struct weft_experiment *e)
{
    if (e == NULL) {
        return;
    }
    weft__free(e->id);
    weft__free(e->name);
    weft__free(e->dataset);
    weft__free(e->workflow);
    weft__free(e->workflow_hash);
    weft__free(e->status);
    weft__free(e->summary);
    memset(e, 0, sizeof(*e));
}

void
weft_experiments_free(struct weft_experiment *e, size_t count)
{
    for (size_t i = 0; e != NULL && i < count; i++) {
        weft_experiment_cleanup(&e[i]);
    }
    weft__free(e);
}

void
weft_experiment_items_free(struct weft_experiment_item *items, size_t count)
{
    for (size_t i = 0; items != NULL && i < count; i++) {
        weft__free(items[i].item_id);
        weft__free(items[i].run_id);
        weft__free(items[i].status);
        weft__free(items[i].scores);
        weft__free(items[i].error);
    }
    weft__free(items);
}
