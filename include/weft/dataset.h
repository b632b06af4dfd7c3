/* include/weft/dataset.h - datasets and experiments (`weft dataset`, `weft eval`,
 * docs/experiments.md), kept in the state store.
 *
 * A dataset is a named, versioned set of items. An item holds an input (JSON text), optional
 * expectations (the expected output, assertions), metadata and, when it came from a stored run,
 * that run, its trace and the step where it went wrong (its failing step). Every change that
 * adds or removes items makes a new version: version V is the items added at V or before and
 * not removed at V or before. A new dataset is version 0 (empty) until its first items.
 *
 * An experiment records a workflow run over one version of a dataset: one row per item (its run,
 * status and scores) and a summary. weft_experiment_begin(), weft_experiment_item_put() and
 * weft_experiment_end() are what the `weft eval` runner calls; the rest reads.
 *
 * Every function opens the state store named by @p state_path (a SQLite file or a
 * postgresql:// URL; NULL means $WEFT_STATE_URL, else $WEFT_HOME/state.db), does one thing in
 * one transaction and closes it. Writers create the store when missing; readers report a
 * missing SQLite file as WEFT_ENOTFOUND.
 *
 * Errors: functions that take @p err (may be NULL when @p err_len is 0) write one sentence
 * there on failure: what, where ("items.jsonl:3: expected: ..."), what was expected.
 *
 * Thread-safety: the functions may be called from any thread; each opens its own connection.
 */
#ifndef WEFT_DATASET_H
#define WEFT_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bounds: a longer field is refused (WEFT_ELIMIT) with a message naming it. */
#define WEFT_DATASET_NAME_MAX    128u            /**< a dataset's or experiment's name, bytes */
#define WEFT_DATASET_INPUT_MAX   (1024u * 1024u) /**< an item's input, bytes of JSON */
#define WEFT_DATASET_FIELD_MAX   (256u * 1024u)  /**< expected, assertions, metadata, each */
#define WEFT_DATASET_DESC_MAX    4096u           /**< a description */
#define WEFT_DATASET_EVAL_MAX    (64u * 1024u)   /**< evaluators JSON; an experiment's summary */
#define WEFT_DATASET_ITEMS_MAX   100000u         /**< items added by one call */
#define WEFT_EXPERIMENT_TEXT_MAX (64u * 1024u)   /**< an experiment item's scores or error */

/** A dataset as listed. Strings are owned by the struct (weft_datasets_free()). */
struct weft_dataset {
    char *name;
    char *description; /**< may be NULL */
    char *evaluators;  /**< a JSON document (docs/experiments.md); may be NULL */
    uint64_t created_ns;
    uint64_t version; /**< the latest version; 0: no items were ever added */
    size_t items;     /**< items in the latest version */
};

/** One item. Strings are owned by the array (weft_dataset_items_free()). */
struct weft_dataset_item {
    char *id;         /**< a UUID */
    char *input;      /**< JSON text (a string input is a JSON string) */
    char *expected;   /**< JSON text; may be NULL */
    char *assertions; /**< JSON text; may be NULL */
    char *metadata;   /**< a JSON object, "{}" when none */
    char *run_id;     /**< the stored run it came from; may be NULL */
    char *trace_id;   /**< that run's trace; may be NULL */
    char *fail_step;  /**< that run's failing step id; may be NULL */
    uint64_t added_version;
    uint64_t removed_version; /**< 0: not removed */
};

/** Where new items come from: stored runs matching a filter, a file, or both. A zeroed struct
 * selects nothing. The filter's conditions all hold for a run taken (AND). */
struct weft_dataset_source {
    bool from_runs;        /**< take stored runs matching the fields below */
    const char *workflow;  /**< the run's workflow name; NULL: any */
    const char *status;    /**< "failed", "completed", "stuck", ... ; NULL: any */
    bool stuck;            /**< only runs where the watchdog found a stuck loop */
    bool has_reward_below; /**< only runs whose reward is below reward_below */
    double reward_below;
    const char *verdict;        /**< "REJECTED": a step a reflection rejected; NULL: any */
    uint64_t from_ns;           /**< started at or after; 0: no bound */
    uint64_t to_ns;             /**< started before; 0: no bound */
    const char *const *run_ids; /**< these runs (ids or unique prefixes); with from_runs they
                                 * are further filtered, alone they are taken as they are */
    size_t run_id_count;
    size_t limit;     /**< runs examined, newest first; 0: 10000 */
    const char *file; /**< a .jsonl or .csv file of items; NULL: none */
};

/** Create the dataset @p name and add the items of @p source (may be NULL: an empty dataset).
 * @param state_path the state store; NULL means the default.
 * @param name 1 to WEFT_DATASET_NAME_MAX bytes of letters, digits, '-', '_', '.'.
 * @param description may be NULL.
 * @param evaluators a JSON document (object or array); may be NULL.
 * @param added receives how many items were added (may be NULL).
 * @return WEFT_OK, WEFT_ESTATE (a dataset of that name exists), WEFT_EINVAL (bad name, bad
 * source, a run id that names no run or several), WEFT_EPARSE (a bad file line or evaluators),
 * WEFT_ELIMIT (a field too long, too many items), WEFT_ENOTFOUND (the file is missing),
 * WEFT_EIO, WEFT_ENOMEM.
 * Errors: nothing is stored on failure (one transaction).
 * Ownership: borrows everything. */
WEFT_API weft_err weft_dataset_create(const char *state_path,
                                      const char *name,
                                      const char *description,
                                      const char *evaluators,
                                      const struct weft_dataset_source *source,
                                      size_t *added,
                                      char *err,
                                      size_t err_len);

/** Add the items of @p source to the existing dataset @p name: a new version when any.
 * @param added receives how many items were added (may be NULL).
 * @param version receives the dataset's latest version (may be NULL).
 * @return as weft_dataset_create(), WEFT_ENOTFOUND also for no such dataset; adding no item is
 * WEFT_OK with *added 0 and no new version.
 * Errors: nothing is stored on failure. Ownership: borrows everything. */
WEFT_API weft_err weft_dataset_add(const char *state_path,
                                   const char *name,
                                   const struct weft_dataset_source *source,
                                   size_t *added,
                                   uint64_t *version,
                                   char *err,
                                   size_t err_len);

/** Every dataset, by name.
 * @return WEFT_OK (also for none: *out NULL), WEFT_ENOTFOUND (no database), WEFT_EINVAL,
 * WEFT_EIO, WEFT_ENOMEM. Ownership: caller owns *out (weft_datasets_free(*out, *count)). */
WEFT_API weft_err weft_datasets_list(const char *state_path,
                                     struct weft_dataset **out,
                                     size_t *count);

/** The dataset @p name and its items at @p version (0: the latest).
 * @param ds receives the dataset (may be NULL); release its strings with
 * weft_dataset_cleanup(ds).
 * @param items receives the items (NULL when none), in the order they were added.
 * @return WEFT_OK, WEFT_ENOTFOUND (no such dataset, or no database), WEFT_EINVAL (NULL
 * argument, a version above the latest), WEFT_EIO, WEFT_ENOMEM.
 * Ownership: caller owns *ds's strings and *items (weft_dataset_items_free()). */
WEFT_API weft_err weft_dataset_show(const char *state_path,
                                    const char *name,
                                    uint64_t version,
                                    struct weft_dataset *ds,
                                    struct weft_dataset_item **items,
                                    size_t *count);

/** Remove items of the latest version by id (or a unique prefix of at least 4 characters):
 * one new version. An id that names no current item, or several, fails the whole call.
 * @param removed receives how many were removed (may be NULL).
 * @param version receives the new version (may be NULL).
 * @return WEFT_OK, WEFT_ENOTFOUND (no such dataset or item; @p err names it), WEFT_EINVAL,
 * WEFT_EIO, WEFT_ENOMEM. Errors: nothing changes on failure. Ownership: borrows everything. */
WEFT_API weft_err weft_dataset_rm(const char *state_path,
                                  const char *name,
                                  const char *const *ids,
                                  size_t id_count,
                                  size_t *removed,
                                  uint64_t *version,
                                  char *err,
                                  size_t err_len);

/** Delete the dataset @p name with every version of its items. Experiments over it are kept
 * (they name the dataset and version they ran).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: borrows everything. */
WEFT_API weft_err weft_dataset_drop(const char *state_path, const char *name);

/** A page of a dataset version's items: at most @p max (0: none, only @p ds and @p total;
 * SIZE_MAX: all) from the @p offset-th, in the order added, so a large dataset can be read
 * without holding it whole (`weft eval` reads its items this way). A version's items never
 * change, so pages read at different times fit together.
 * @param version 0: the latest. @param ds receives the dataset as listed (may be NULL).
 * @param total receives how many items the version holds (may be NULL).
 * @return as weft_dataset_show(). Ownership: as weft_dataset_show(). */
WEFT_API weft_err weft_dataset_items_page(const char *state_path,
                                          const char *name,
                                          uint64_t version,
                                          size_t offset,
                                          size_t max,
                                          struct weft_dataset *ds,
                                          struct weft_dataset_item **items,
                                          size_t *count,
                                          size_t *total);

/** Free the strings of @p ds (not @p ds itself) and zero it. NULL is a no-op.
 * Errors: none. Ownership: takes @p ds's strings. */
WEFT_API void weft_dataset_cleanup(struct weft_dataset *ds);
/** Free an array from weft_datasets_list(). NULL is a no-op.
 * Errors: none. Ownership: takes @p ds. */
WEFT_API void weft_datasets_free(struct weft_dataset *ds, size_t count);
/** Free an array from weft_dataset_show(). NULL is a no-op.
 * Errors: none. Ownership: takes @p items. */
WEFT_API void weft_dataset_items_free(struct weft_dataset_item *items, size_t count);

/* ------------------------------------------------------------------------------------------ */
/* Experiments                                                                                 */

/** An experiment. Strings are owned by the struct (weft_experiments_free()). */
struct weft_experiment {
    char *id; /**< a UUID */
    char *name;
    char *dataset;
    uint64_t dataset_version;
    char *workflow;      /**< the workflow's name */
    char *workflow_hash; /**< the workflow files' hash; may be NULL */
    bool from_failure;   /**< items from runs were forked at their failing step */
    uint64_t started_ns;
    uint64_t ended_ns; /**< 0 while running */
    char *status;      /**< "running", then what weft_experiment_end() said */
    char *summary;     /**< a JSON object; NULL while running */
};

/** One item's result. Strings are owned by the array (weft_experiment_items_free()). */
struct weft_experiment_item {
    char *item_id;
    char *run_id; /**< may be NULL (an item that errored before its run) */
    char *status; /**< "passed", "failed", "errored" or "running" */
    char *scores; /**< a JSON array of {evaluator, value, passed, explanation} */
    uint64_t tokens;
    double cost_usd;
    uint64_t duration_ns;
    uint64_t loops;
    uint64_t stuck_loops;
    uint64_t corrections;
    uint64_t llm_calls;
    char *error; /**< may be NULL */
};

/** Start an experiment (status "running").
 * @param e what to record: name, dataset, dataset_version (must exist), workflow, optional
 * workflow_hash, from_failure; e->id may be NULL (a new UUID is made) or a UUID to use.
 * @param id_out receives the experiment's id (37 bytes with the NUL).
 * @return WEFT_OK, WEFT_ENOTFOUND (no such dataset or version), WEFT_EINVAL (a missing field,
 * an id in use), WEFT_ELIMIT, WEFT_EIO, WEFT_ENOMEM. Ownership: borrows everything. */
WEFT_API weft_err weft_experiment_begin(const char *state_path,
                                        const struct weft_experiment *e,
                                        char id_out[37],
                                        char *err,
                                        size_t err_len);

/** Record (insert or replace) one item's result of experiment @p id.
 * @param it item_id, status and scores (a JSON array; NULL means []) required; the rest may
 * be 0/NULL.
 * @return WEFT_OK, WEFT_ENOTFOUND (no such experiment), WEFT_EINVAL (a bad status, scores not a
 * JSON array), WEFT_ELIMIT, WEFT_EIO, WEFT_ENOMEM. Ownership: borrows everything. */
WEFT_API weft_err weft_experiment_item_put(const char *state_path,
                                           const char *id,
                                           const struct weft_experiment_item *it,
                                           char *err,
                                           size_t err_len);

/** End experiment @p id with @p status ("completed", "failed", "aborted") and @p summary (a
 * JSON object; may be NULL).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL, WEFT_ELIMIT, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: borrows everything. */
WEFT_API weft_err weft_experiment_end(const char *state_path,
                                      const char *id,
                                      const char *status,
                                      const char *summary,
                                      char *err,
                                      size_t err_len);

/** Experiments, newest first, of @p dataset (NULL: all).
 * @return WEFT_OK (also none), WEFT_ENOTFOUND (no database), WEFT_EINVAL, WEFT_EIO,
 * WEFT_ENOMEM. Ownership: caller owns *out (weft_experiments_free(*out, *count)). */
WEFT_API weft_err weft_experiments_list(const char *state_path,
                                        const char *dataset,
                                        struct weft_experiment **out,
                                        size_t *count);

/** The id of the experiment @p ref names: an id, a name (its newest experiment) or a unique
 * prefix of an id of at least 4 characters, as `weft eval show` and MCP's get_experiment take.
 * @return WEFT_OK (@p id_out filled), WEFT_ENOTFOUND (none, or no database), WEFT_EINVAL (NULL
 * argument, or a prefix of several), WEFT_EIO, WEFT_ENOMEM. Ownership: none. */
WEFT_API weft_err weft_experiment_resolve(const char *state_path, const char *ref, char id_out[37]);

/** Experiment @p id and its items in the order first recorded.
 * @param e receives the experiment; release with weft_experiment_cleanup(e).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: caller owns *e's strings and *items (weft_experiment_items_free()). */
WEFT_API weft_err weft_experiment_load(const char *state_path,
                                       const char *id,
                                       struct weft_experiment *e,
                                       struct weft_experiment_item **items,
                                       size_t *count);

/** Free the strings of @p e (not @p e itself) and zero it. NULL is a no-op.
 * Errors: none. Ownership: takes @p e's strings. */
WEFT_API void weft_experiment_cleanup(struct weft_experiment *e);
/** Free an array from weft_experiments_list(). NULL is a no-op.
 * Errors: none. Ownership: takes @p e. */
WEFT_API void weft_experiments_free(struct weft_experiment *e, size_t count);
/** Free an array from weft_experiment_load(). NULL is a no-op.
 * Errors: none. Ownership: takes @p items. */
WEFT_API void weft_experiment_items_free(struct weft_experiment_item *items, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DATASET_H */
