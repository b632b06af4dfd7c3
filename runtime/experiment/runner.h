/* runtime/experiment/runner.h - the experiment runner's pool over a small interface of its own
 * (struct weft__exp_io): where items come from, how a result is scored and where it goes.
 * experiment.c maps it onto the datasets and evaluators (include/weft/dataset.h, eval.h);
 * tests drive it with their own items.
 *
 * weft__exp_run() reads items a page at a time, keeps at most 2 x concurrency of them (queued
 * and in flight), runs each with its own thread of a pool of concurrency threads, scores and
 * records each as it finishes and adds it to the report. Nothing of a finished item is kept.
 */
#ifndef WEFT_RUNTIME_EXPERIMENT_RUNNER_H
#define WEFT_RUNTIME_EXPERIMENT_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/experiment.h>

/* One item. Strings are owned by the item (weft__exp_item_cleanup()). */
struct weft__exp_item {
    char *id;
    char *input;     /* JSON text: a JSON string is passed to the run unquoted */
    char *expected;  /* JSON text; may be NULL */
    char *run_id;    /* the stored run it came from; may be NULL */
    char *fail_step; /* that run's failing step; may be NULL */
};

void weft__exp_item_cleanup(struct weft__exp_item *item);

/* One item's result, as recorded. Borrowed for the put() call. */
struct weft__exp_result {
    const char *run_id; /* NULL when the run never started */
    weft_experiment_outcome outcome;
    const char *scores; /* a JSON array of {evaluator, value, passed, explanation} */
    const char *error;  /* why it errored; may be NULL */
    int64_t tokens;
    double cost_usd;
    uint64_t duration_ns;
    size_t loops;
    size_t stuck_loops;
    size_t corrections;
    size_t llm_calls;
    double reward;
};

/* A score of one result. */
struct weft__exp_verdict {
    weft_experiment_outcome outcome;
    char *scores;   /* new JSON array text (free()) */
    char *error;    /* new text when the scoring could not decide; may be NULL */
    int64_t tokens; /* judge calls: added to the item's */
    double cost_usd;
};

struct weft__exp_io {
    /* Fill @p items (room for @p max) with the items from position @p offset on; *count 0:
     * no more. Called from one thread at a time. */
    weft_err (*page)(
        void *user, size_t offset, size_t max, struct weft__exp_item *items, size_t *count);
    /* Score @p result of @p item (NULL result: the run never started). NULL function: the
     * run's status decides (completed passes). Called from the pool's threads at once. */
    weft_err (*score)(void *user,
                      const struct weft__exp_item *item,
                      const struct weft_run_result *result,
                      struct weft__exp_verdict *out);
    /* Record one item's result. Called from the pool's threads, one at a time. */
    weft_err (*put)(void *user,
                    const struct weft__exp_item *item,
                    const struct weft__exp_result *result,
                    char *err,
                    size_t err_len);
    void *user;
    size_t total;                /* items expected (for progress); 0 when unknown */
    const char *experiment;      /* the experiment's id */
    const char *dataset_version; /* as text, for weft.dataset.version */
};

/* Langfuse's experiment attributes (docs/langfuse.md, "Experiments in Langfuse") for every span
 * of one item's trace: langfuse.experiment.id, .name (the id when @p name is NULL or empty),
 * .dataset.id (the dataset's name as weft knows it), .metadata.dataset_version (when
 * @p dataset_version is set) and langfuse.experiment.item.id. The root span's id goes under
 * WEFT__EXP_ROOT_ID_ATTR. Writes at most WEFT__EXP_LF_ATTRS into @p attrs, which borrow the
 * strings. @return how many it wrote. */
#define WEFT__EXP_LF_ATTRS     5
#define WEFT__EXP_ROOT_ID_ATTR "langfuse.experiment.item.root_observation_id"
size_t weft__exp_lf_attrs(const char *experiment_id,
                          const char *name,
                          const char *dataset,
                          const char *dataset_version,
                          const char *item_id,
                          struct weft_attr *attrs);

/* The status score of a run: passed when completed. @return new JSON array text or NULL. */
char *weft__exp_status_scores(const struct weft_run_result *result, weft_experiment_outcome *out);

/* Run every item of @p io with @p o's workflow and pool; fill @p report (its id is left as it
 * is). @return WEFT_OK when every item has a result; else the first put() failure. */
weft_err weft__exp_run(const struct weft_experiment_options *o,
                       const struct weft__exp_io *io,
                       struct weft_experiment_report *report,
                       char *err,
                       size_t err_len);

/* The estimate of what forking run @p source_run from @p fail_step saved against running it
 * from the start: the source run's stored LLM exchanges of the steps before @p fail_step that
 * completed (by their agent or step id), and its tokens and cost in that proportion. Zeros
 * when the run cannot be read. */
void weft__exp_saved(const char *state_path,
                     const char *source_run,
                     const char *fail_step,
                     size_t *calls,
                     int64_t *tokens,
                     double *cost_usd);

#endif /* WEFT_RUNTIME_EXPERIMENT_RUNNER_H */
