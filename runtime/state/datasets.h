/* runtime/state/datasets.h - datasets and experiments in the state store (docs/experiments.md):
 * typed reads and writes over one open handle, for runtime/dataset/ (include/weft/dataset.h).
 * The callers check the arguments and the bounds; these bind and read the rows the backends'
 * statements (enum weft__ds_stmt, state_backend.h) give.
 *
 * Thread-safety: the handle's (one thread per handle).
 */
#ifndef WEFT_RUNTIME_STATE_DATASETS_H
#define WEFT_RUNTIME_STATE_DATASETS_H

#include "runtime/state/state.h"

#include <weft/dataset.h>

/* One transaction: begin, then end with the first error (WEFT_OK commits; anything else rolls
 * back what was written; after a failed begin, end does nothing). @return @p err when it is not
 * WEFT_OK, else the commit's result. */
weft_err weft__ds_begin(struct rt_state *st);
weft_err weft__ds_end(struct rt_state *st, weft_err err);

/* A new dataset at version 0. @return WEFT_OK, WEFT_ESTATE (the name is taken), WEFT_EIO. */
weft_err weft__ds_create(struct rt_state *st,
                         const char *name,
                         const char *description,
                         const char *evaluators,
                         uint64_t created_ns);
/* The dataset @p name into @p out (owns its strings: weft_dataset_cleanup()).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EIO, WEFT_ENOMEM. */
weft_err weft__ds_get(struct rt_state *st, const char *name, struct weft_dataset *out);
/* Every dataset by name. Ownership: *out is the caller's (weft_datasets_free()). */
weft_err weft__ds_list(struct rt_state *st, struct weft_dataset **out, size_t *count);
/* Set the dataset's latest version. */
weft_err weft__ds_set_version(struct rt_state *st, const char *name, uint64_t version);
/* Store @p it (its id, texts and added_version) in dataset @p name. */
weft_err
weft__ds_item_add(struct rt_state *st, const char *name, const struct weft_dataset_item *it);
/* Mark the current item @p id of @p name removed at @p version; *is_found says whether it was. */
weft_err weft__ds_item_remove(
    struct rt_state *st, const char *name, const char *id, uint64_t version, bool *is_found);
/* At most @p max items of @p name at @p version from the @p offset-th, in the order added
 * (SIZE_MAX: all). Ownership: *out is the caller's (weft_dataset_items_free()). */
weft_err weft__ds_items(struct rt_state *st,
                        const char *name,
                        uint64_t version,
                        size_t offset,
                        size_t max,
                        struct weft_dataset_item **out,
                        size_t *count);
/* How many items @p name holds at @p version. */
weft_err
weft__ds_items_count(struct rt_state *st, const char *name, uint64_t version, size_t *count);
/* Delete @p name and its items. @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EIO. */
weft_err weft__ds_drop(struct rt_state *st, const char *name);

/* Experiments: @p e's fields stored as they are (e->id set, status "running"). */
weft_err weft__exp_begin(struct rt_state *st, const struct weft_experiment *e);
weft_err
weft__exp_item_put(struct rt_state *st, const char *id, const struct weft_experiment_item *it);
/* @return WEFT_OK, WEFT_ENOTFOUND (no such experiment), WEFT_EIO. */
weft_err weft__exp_end(
    struct rt_state *st, const char *id, const char *status, const char *summary, uint64_t now);
weft_err weft__exp_list(struct rt_state *st,
                        const char *dataset,
                        struct weft_experiment **out,
                        size_t *count);
/* @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EIO, WEFT_ENOMEM. */
weft_err weft__exp_get(struct rt_state *st, const char *id, struct weft_experiment *out);
weft_err weft__exp_items(struct rt_state *st,
                         const char *id,
                         struct weft_experiment_item **out,
                         size_t *count);

#endif /* WEFT_RUNTIME_STATE_DATASETS_H */
