/* report/experiment.h - the JSON documents of experiments and datasets (`weft eval show|list|
 * compare --json`, `weft dataset list|show --json`), served unchanged by `weft serve`'s
 * /api/v1/experiments and /api/v1/datasets and read by the MCP tools, so a pass rate or a
 * count of fixed items reads the same everywhere (schemas: docs/cli-json.md).
 *
 * Every builder returns a new jansson reference, NULL only when memory ran out. The
 * conventions are report/docs.h's.
 */
#ifndef WEFT_REPORT_EXPERIMENT_H
#define WEFT_REPORT_EXPERIMENT_H

#include <jansson.h>
#include <stdbool.h>
#include <weft/dataset.h>
#include <weft/weft.h>

#define WEFT_DOC_SCHEMA_EXPERIMENT  "weft.experiment/v1"
#define WEFT_DOC_SCHEMA_EXPERIMENTS "weft.experiments/v1"
#define WEFT_DOC_SCHEMA_EXP_COMPARE "weft.experiment_compare/v1"
#define WEFT_DOC_SCHEMA_DATASETS    "weft.datasets/v1"
#define WEFT_DOC_SCHEMA_DATASET     "weft.dataset/v1"

/* An experiment with its items, as runtime/dataset/exp_load.h's weft__exp_load() reads it
 * (report/ builds documents from data and reads no store). */
struct weft__exp {
    struct weft_experiment e;
    struct weft_experiment_item *items;
    size_t count;
    json_t *summary; /* the stored summary; {} when none */
};

/* A number of the stored summary (0 when absent). */
double weft__exp_num(const json_t *summary, const char *key);

/* One item's result: item_id, run_id, status, scores (the evaluators' array), tokens,
 * cost_usd, duration_ns, loops, stuck_loops, corrections, llm_calls, error. */
json_t *weft__doc_experiment_item(const struct weft_experiment_item *it);

/* weft.experiment/v1: the experiment, its summary and, with @p with_items, its items in the
 * order first recorded. */
json_t *weft__doc_experiment(const struct weft__exp *x, bool with_items);

/* One experiment of a list (no items): id, name, dataset, dataset_version, workflow, status,
 * from_failure, started_ns, ended_ns, summary. */
json_t *weft__doc_experiment_info(const struct weft_experiment *e);

/* weft.experiments/v1 of @p count experiments. */
json_t *weft__doc_experiments(const struct weft_experiment *list, size_t count);

/* weft.experiment_compare/v1 of A and B: "a" and "b" (without items), "same_workflow" (their
 * workflow hashes equal; null when either has none), "counts" (fixed,
 * broken, unchanged, and added/removed when an item is in only one), "deltas" (B - A: pass
 * rate, mean reward, cost, tokens, duration, loops) and "items": every item of A then those
 * only in B, the changed ones first, each with both statuses and both run ids. */
json_t *weft__doc_experiment_compare(const struct weft__exp *a, const struct weft__exp *b);

/* One dataset of a list: name, description, evaluators (null or the array), version, items,
 * created_ns. */
json_t *weft__doc_dataset_info(const struct weft_dataset *d);

/* weft.datasets/v1 of @p count datasets. */
json_t *weft__doc_datasets(const struct weft_dataset *list, size_t count);

/* One dataset item: id, input, expected, assertions, metadata (each JSON, null when absent),
 * run_id, trace_id, fail_step (the run it came from; null when none), added_version. */
json_t *weft__doc_dataset_item(const struct weft_dataset_item *it);

/* weft.dataset/v1: the dataset, the version shown (@p version; 0: the latest) and its items. */
json_t *weft__doc_dataset(const struct weft_dataset *ds,
                          uint64_t version,
                          const struct weft_dataset_item *items,
                          size_t count);

#endif /* WEFT_REPORT_EXPERIMENT_H */
