/* runtime/dataset/sources.h - where a dataset's new items come from (include/weft/dataset.h):
 * stored runs matching a filter, with each run's failing step, and JSONL or CSV files. Items are
 * built in memory first, so a bad source stores nothing. Also the store opened for writing,
 * which the datasets and the experiments share.
 *
 * Thread-safety: none beyond the state handle's.
 */
#ifndef WEFT_RUNTIME_DATASET_SOURCES_H
#define WEFT_RUNTIME_DATASET_SOURCES_H

#include "runtime/state/state.h"

#include <weft/dataset.h>

/* Items being built: each owns its strings (id and added_version are set when stored). */
struct weft__ds_items {
    struct weft_dataset_item *v;
    size_t n;
    size_t cap;
};

/* Open the state store @p state_path (NULL: weft__state_default_path()) for writing, created
 * when missing (dataset.c, for the datasets' and the experiments' writes). @return
 * weft__state_open()'s result, with its reason (or a generic one) in @p err. */
weft_err weft__ds_open_rw(const char *state_path, struct rt_state **st, char *err, size_t err_len);

/* A new zeroed item at the end of @p items, or NULL (out of memory, or WEFT_DATASET_ITEMS_MAX
 * reached: *is_full). */
struct weft_dataset_item *weft__ds_items_push(struct weft__ds_items *items, bool *is_full);
void weft__ds_items_cleanup(struct weft__ds_items *items);

/* The items of the .jsonl or .csv file @p path (by its extension; anything else is read as
 * JSONL) appended to @p items. @return WEFT_OK, WEFT_ENOTFOUND (cannot open), WEFT_EPARSE
 * ("PATH:LINE: field: expected ..." in @p err), WEFT_ELIMIT, WEFT_ENOMEM. */
weft_err
weft__ds_items_from_file(const char *path, struct weft__ds_items *items, char *err, size_t err_len);

/* One item per stored run that @p src selects, appended to @p items. @return WEFT_OK,
 * WEFT_EINVAL (a run id that names none or several, a verdict other than REJECTED), WEFT_EIO,
 * WEFT_ELIMIT, WEFT_ENOMEM; @p err says which. */
weft_err weft__ds_items_from_runs(struct rt_state *st,
                                  const struct weft_dataset_source *src,
                                  struct weft__ds_items *items,
                                  char *err,
                                  size_t err_len);

/* The failing step of stored run @p run_id (docs/experiments.md): its first failed step, else
 * its first step a reflection rejected, else (a stuck run, @p is_stuck) the plan step whose
 * hand-offs led to the first step that did not complete (else to the step with the most
 * attempts): the step of the workflow where the loop started. *out is new (weft__free) or NULL when
 * the run has none; *is_rejected says whether a step was rejected. */
weft_err weft__ds_fail_step(
    struct rt_state *st, const char *run_id, bool is_stuck, char **out, bool *is_rejected);

#endif /* WEFT_RUNTIME_DATASET_SOURCES_H */
