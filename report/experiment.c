/* report/experiment.c - see experiment.h. */
#include "report/experiment.h"
#include "report/docs.h"

#include <string.h>

double
weft__exp_num(const json_t *summary, const char *key)
{
    return json_number_value(json_object_get(summary, key));
}

/* Append @p item (consumed) to @p *arr; on failure (out of memory) *arr is released and NULL,
 * so the document it goes into fails rather than lose an entry. */
static void
append_or_drop(json_t **arr, json_t *item)
{
    if (*arr != NULL && json_array_append_new(*arr, item) != 0) {
        json_decref(*arr);
        *arr = NULL;
    }
}

json_t *
weft__doc_experiment_item(const struct weft_experiment_item *it)
{
    return json_pack("{s:s, s:s?, s:s, s:o, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:s?}", "item_id",
                     it->item_id, "run_id", it->run_id, "status", it->status, "scores",
                     weft__doc_parsed_or(it->scores, json_array()), "tokens",
                     (json_int_t)it->tokens, "cost_usd", it->cost_usd, "duration_ns",
                     (json_int_t)it->duration_ns, "loops", (json_int_t)it->loops, "stuck_loops",
                     (json_int_t)it->stuck_loops, "corrections", (json_int_t)it->corrections,
                     "llm_calls", (json_int_t)it->llm_calls, "error", it->error);
}

json_t *
weft__doc_experiment_info(const struct weft_experiment *e)
{
    return json_pack("{s:s, s:s?, s:s?, s:I, s:s?, s:s?, s:s?, s:b, s:I, s:I, s:o}", "id", e->id,
                     "name", e->name, "dataset", e->dataset, "dataset_version",
                     (json_int_t)e->dataset_version, "workflow", e->workflow, "workflow_hash",
                     e->workflow_hash, "status", e->status, "from_failure", e->from_failure,
                     "started_ns", (json_int_t)e->started_ns, "ended_ns", (json_int_t)e->ended_ns,
                     "summary", weft__doc_parsed_or(e->summary, json_object()));
}

json_t *
weft__doc_experiment(const struct weft__exp *x, bool with_items)
{
    json_t *info = weft__doc_experiment_info(&x->e);
    json_t *doc = json_pack("{s:s}", "schema", WEFT_DOC_SCHEMA_EXPERIMENT);
    json_t *items = with_items ? json_array() : NULL;

    if (info == NULL || doc == NULL || json_object_update(doc, info) != 0) {
        json_decref(info);
        json_decref(doc);
        json_decref(items);
        return NULL;
    }
    json_decref(info);
    for (size_t i = 0; items != NULL && i < x->count; i++) {
        append_or_drop(&items, weft__doc_experiment_item(&x->items[i]));
    }
    if (with_items && (items == NULL || json_object_set_new(doc, "items", items) != 0)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *
weft__doc_experiments(const struct weft_experiment *list, size_t count)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < count; i++) {
        append_or_drop(&arr, weft__doc_experiment_info(&list[i]));
    }
    return json_pack("{s:s, s:o}", "schema", WEFT_DOC_SCHEMA_EXPERIMENTS, "experiments", arr);
}

/* ------------------------------------------------------------------------------------------ */
/* Compare */

/* Sums over the items (what compare's deltas are made of). */
struct sums {
    uint64_t tokens;
    double cost;
    uint64_t duration_ns;
    uint64_t loops;
};

static void
sums_of(const struct weft__exp *x, struct sums *s)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < x->count; i++) {
        s->tokens += (uint64_t)x->items[i].tokens;
        s->cost += x->items[i].cost_usd;
        s->duration_ns += x->items[i].duration_ns;
        s->loops += x->items[i].loops;
    }
}

static const struct weft_experiment_item *
find_item(const struct weft__exp *x, const char *item_id)
{
    for (size_t i = 0; i < x->count; i++) {
        if (strcmp(x->items[i].item_id, item_id) == 0) {
            return &x->items[i];
        }
    }
    return NULL;
}

/* fixed, broken or unchanged (an item in only one of them: added / removed). */
static const char *
change_of(const struct weft_experiment_item *a, const struct weft_experiment_item *b)
{
    bool was = a != NULL && strcmp(a->status, "passed") == 0;
    bool is = b != NULL && strcmp(b->status, "passed") == 0;

    if (a == NULL) {
        return "added";
    }
    if (b == NULL) {
        return "removed";
    }
    return was == is ? "unchanged" : (is ? "fixed" : "broken");
}

static json_t *
deltas(const struct weft__exp *a, const struct weft__exp *b)
{
    struct sums sa;
    struct sums sb;

    sums_of(a, &sa);
    sums_of(b, &sb);
    return json_pack(
        "{s:f, s:f, s:f, s:I, s:I, s:I}", "pass_rate",
        weft__exp_num(b->summary, "pass_rate") - weft__exp_num(a->summary, "pass_rate"),
        "mean_reward",
        weft__exp_num(b->summary, "mean_reward") - weft__exp_num(a->summary, "mean_reward"),
        "cost_usd", sb.cost - sa.cost, "tokens", (json_int_t)sb.tokens - (json_int_t)sa.tokens,
        "duration_ns", (json_int_t)sb.duration_ns - (json_int_t)sa.duration_ns, "loops",
        (json_int_t)sb.loops - (json_int_t)sa.loops);
}

/* Every item of A then those only in B, the changed ones first; counts by change.
 * Quadratic in the items: an experiment holds at most a dataset version's items, compared once
 * per request. */
static json_t *
compare_items(const struct weft__exp *a, const struct weft__exp *b, json_t *counts)
{
    json_t *changed = json_array();
    json_t *same = json_array();
    bool is_oom = false;

    for (size_t pass = 0; changed != NULL && same != NULL && pass < 2; pass++) {
        const struct weft__exp *x = pass == 0 ? a : b;

        for (size_t i = 0; i < x->count; i++) {
            const struct weft_experiment_item *ia = pass == 0 ? &x->items[i] : NULL;
            const struct weft_experiment_item *ib =
                pass == 0 ? find_item(b, x->items[i].item_id) : &x->items[i];
            const char *c = NULL;

            if (pass == 1 && find_item(a, x->items[i].item_id) != NULL) {
                continue;
            }
            c = change_of(ia, ib);
            is_oom |= json_object_set_new(
                          counts, c,
                          json_integer(json_integer_value(json_object_get(counts, c)) + 1)) != 0;
            is_oom |=
                json_array_append_new(strcmp(c, "unchanged") == 0 ? same : changed,
                                      json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s?}", "item_id",
                                                x->items[i].item_id, "change", c, "a_status",
                                                ia != NULL ? ia->status : NULL, "b_status",
                                                ib != NULL ? ib->status : NULL, "a_run_id",
                                                ia != NULL ? ia->run_id : NULL, "b_run_id",
                                                ib != NULL ? ib->run_id : NULL)) != 0;
        }
    }
    if (is_oom || changed == NULL || same == NULL || json_array_extend(changed, same) != 0) {
        json_decref(changed);
        changed = NULL;
    }
    json_decref(same);
    return changed;
}

json_t *
weft__doc_experiment_compare(const struct weft__exp *a, const struct weft__exp *b)
{
    json_t *counts = json_pack("{s:i, s:i, s:i}", "fixed", 0, "broken", 0, "unchanged", 0);
    json_t *doc =
        counts != NULL
            ? json_pack("{s:s, s:o, s:o}", "schema", WEFT_DOC_SCHEMA_EXP_COMPARE, "a",
                        weft__doc_experiment(a, false), "b", weft__doc_experiment(b, false))
            : NULL;
    json_t *items = doc != NULL ? compare_items(a, b, counts) : NULL;

    bool is_known = a->e.workflow_hash != NULL && b->e.workflow_hash != NULL;

    if (items == NULL ||
        json_object_set_new(doc, "same_workflow",
                            is_known
                                ? json_boolean(strcmp(a->e.workflow_hash, b->e.workflow_hash) == 0)
                                : json_null()) != 0 ||
        json_object_set_new(doc, "items", items) != 0 ||
        json_object_set(doc, "counts", counts) != 0 ||
        json_object_set_new(doc, "deltas", deltas(a, b)) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    json_decref(counts);
    return doc;
}

/* ------------------------------------------------------------------------------------------ */
/* Datasets */

json_t *
weft__doc_dataset_info(const struct weft_dataset *d)
{
    return json_pack("{s:s, s:s?, s:o, s:I, s:I, s:I}", "name", d->name, "description",
                     d->description, "evaluators", weft__doc_parsed_or(d->evaluators, json_null()),
                     "version", (json_int_t)d->version, "items", (json_int_t)d->items, "created_ns",
                     (json_int_t)d->created_ns);
}

json_t *
weft__doc_datasets(const struct weft_dataset *list, size_t count)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < count; i++) {
        append_or_drop(&arr, weft__doc_dataset_info(&list[i]));
    }
    return json_pack("{s:s, s:o}", "schema", WEFT_DOC_SCHEMA_DATASETS, "datasets", arr);
}

json_t *
weft__doc_dataset_item(const struct weft_dataset_item *it)
{
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:s?, s:s?, s:s?, s:I}", "id", it->id, "input",
                     weft__doc_parsed_or(it->input, json_null()), "expected",
                     weft__doc_parsed_or(it->expected, json_null()), "assertions",
                     weft__doc_parsed_or(it->assertions, json_null()), "metadata",
                     weft__doc_parsed_or(it->metadata, json_null()), "run_id", it->run_id,
                     "trace_id", it->trace_id, "fail_step", it->fail_step, "added_version",
                     (json_int_t)it->added_version);
}

json_t *
weft__doc_dataset(const struct weft_dataset *ds,
                  uint64_t version,
                  const struct weft_dataset_item *items,
                  size_t count)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < count; i++) {
        append_or_drop(&arr, weft__doc_dataset_item(&items[i]));
    }
    return json_pack("{s:s, s:o, s:I, s:o}", "schema", WEFT_DOC_SCHEMA_DATASET, "dataset",
                     weft__doc_dataset_info(ds), "version",
                     (json_int_t)(version != 0 ? version : ds->version), "items", arr);
}
