/* include/weft/experiment.h - run a workflow over a dataset version (`weft eval`,
 * docs/experiments.md, "Experiments" and "From failure").
 *
 * weft_experiment_run() starts an experiment in the state store (include/weft/dataset.h), runs
 * the workflow once per item of the dataset version with a bounded pool of threads (each calls
 * weft_run(), or the caller's run function, e.g. one that sends the steps to `weft worker`
 * processes), scores every result with the evaluators (the experiment's, else the dataset's;
 * with none an item passes when its run completed) and records each item's result as soon as it
 * is known. Items are read in pages and results are never all held: memory does not grow with
 * the dataset.
 *
 * Every item's run is an ordinary stored run, tagged "experiment" and with weft.experiment.id,
 * weft.experiment.name, weft.dataset.name, weft.dataset.version and weft.dataset.item_id on its
 * root span. With from_failure an item that came from a stored run with a failing step runs as
 * a fork of that run from that step (weft_run_options.fork_run_id/fork_from_step): the steps
 * before it reuse their stored results.
 *
 * Thread-safety: weft_experiment_run() may be called from any thread; the progress callback is
 * called from the pool's threads, one call at a time.
 */
#ifndef WEFT_EXPERIMENT_H
#define WEFT_EXPERIMENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>
#include <weft/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The most runs an experiment keeps in flight at once. */
#define WEFT_EXPERIMENT_CONCURRENCY_MAX 64u

/** How one item ended. */
typedef enum weft_experiment_outcome {
    WEFT_EXPERIMENT_PASSED = 0, /**< every evaluator passed (or, with none, the run completed) */
    WEFT_EXPERIMENT_FAILED = 1, /**< the run ended and an evaluator failed it */
    WEFT_EXPERIMENT_ERRORED = 2 /**< the run could not start, or an evaluator could not decide */
} weft_experiment_outcome;

/** "passed", "failed", "errored". Never NULL. Errors: none. Ownership: a static string. */
WEFT_API const char *weft_experiment_outcome_name(weft_experiment_outcome outcome);

/** Runs one item: weft_run() by default; a caller's function may run it elsewhere (`weft eval
 * --executor amqp` sends its steps to the workers). Same contract as weft_run(); called from the
 * pool's threads, several at once. */
typedef weft_err (*weft_experiment_run_fn)(const struct weft_workflow *workflow,
                                           const struct weft_run_options *options,
                                           struct weft_run_result **out,
                                           char *error,
                                           size_t error_len,
                                           void *user_data);

/** Progress: @p done items of @p total have a result (@p passed of them passed). */
typedef void (*weft_experiment_progress_fn)(size_t done,
                                            size_t total,
                                            size_t passed,
                                            void *user_data);

/** What to run. Zero-initialise. */
struct weft_experiment_options {
    /** The state store (dataset, experiment and the item runs); NULL: the default (see
     * include/weft/dataset.h). */
    const char *state_path;
    const struct weft_workflow *workflow; /**< required; borrowed */
    const char *dataset;                  /**< the dataset's name; required */
    uint64_t dataset_version;             /**< 0: the latest */
    const char *name;                     /**< the experiment's name; NULL: "WORKFLOW@DATASET" */
    /** Runs in flight at once, 1 to WEFT_EXPERIMENT_CONCURRENCY_MAX; 0 means 4. */
    unsigned concurrency;
    /** Items from a stored run with a failing step fork that run from that step. */
    bool from_failure;
    /** Evaluators as a JSON array (docs/experiments.md); NULL: the dataset's; with neither an
     * item passes when its run completed. */
    const char *evaluators;
    /** Where the item runs' spans go; NULL: untraced. Borrowed. */
    struct weft_provider *provider;
    /** Extra tags of every item run (with "experiment"); at most 8. Borrowed. */
    const char *const *tags;
    size_t tag_count;
    weft_experiment_run_fn run; /**< NULL: weft_run() */
    void *run_user_data;
    weft_experiment_progress_fn progress; /**< may be NULL */
    void *progress_user_data;
    /** When it becomes non-zero no new item starts and the runs in flight are aborted; the
     * experiment ends "aborted". May be NULL. */
    const volatile sig_atomic_t *abort_flag;
};

/** The summary of an experiment: the sums over its items. */
struct weft_experiment_report {
    char id[37];  /**< the experiment's id */
    size_t items; /**< items with a result */
    size_t passed;
    size_t failed;
    size_t errored;
    size_t forked;      /**< items run as forks of their source run (from_failure) */
    double pass_rate;   /**< passed / items; 0 with none */
    double mean_reward; /**< mean of the runs' rewards over the items that ran */
    int64_t tokens;     /**< input + output tokens of the item runs */
    double cost_usd;
    uint64_t duration_ns; /**< wall clock of the whole experiment */
    uint64_t run_ns;      /**< summed over the item runs */
    size_t loops;         /**< loops of every kind, summed */
    size_t stuck_loops;   /**< runs the watchdog ended as stuck */
    size_t corrections;
    size_t llm_calls;
    /** from_failure: what the forks did not spend against a full run, estimated from the
     * source runs (docs/experiments.md, "From failure"): the source run's stored LLM exchanges
     * of the reused steps, and its tokens and cost in the same proportion. */
    size_t saved_llm_calls;
    int64_t saved_tokens;
    double saved_cost_usd;
    bool is_aborted;
};

/** Run the experiment @p options describes; fill @p report.
 * @return WEFT_OK when every item has a result (passed, failed or errored: read @p report), or
 * when the abort flag stopped it (report->is_aborted: the items not started have none);
 * WEFT_EINVAL (a missing option, concurrency out of range, bad evaluators: @p err says which),
 * WEFT_ENOTFOUND (no such dataset or version), WEFT_EPARSE (the evaluators), WEFT_EIO (the
 * state store), WEFT_ENOMEM. When the experiment was begun and then fails, it is ended
 * "failed" and @p report holds its id and what was done.
 * Ownership: borrows everything; @p report is the caller's. */
WEFT_API weft_err weft_experiment_run(const struct weft_experiment_options *options,
                                      struct weft_experiment_report *report,
                                      char *err,
                                      size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_EXPERIMENT_H */
